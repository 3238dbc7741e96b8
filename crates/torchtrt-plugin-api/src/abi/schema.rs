//! Field schemas across the ABI.

use std::ffi::CString;

use super::fields::{RawFields, read_value};
use super::ptr;
use super::types::TtrtFieldSpec;
use crate::field::{FieldSpec, FieldType};

/// C views of a Rust schema that own every byte they point to.
pub(crate) struct RawSchema {
    _strings: Vec<CString>,
    _defaults: RawFields,
    raw: Vec<TtrtFieldSpec>,
}

impl RawSchema {
    /// Views of `schema`; an error when a name or doc contains a NUL byte.
    pub(crate) fn new(schema: &[FieldSpec]) -> Result<RawSchema, String> {
        let defaults = RawFields::new(
            schema
                .iter()
                .filter_map(|s| Some((s.name.as_str(), s.default.as_ref()?))),
        )?;
        let mut next_default = defaults.as_slice().iter();
        let mut strings = Vec::new();
        let mut raw = Vec::new();
        for spec in schema {
            let nul = |_| format!("field `{}`: name or doc contains a NUL byte", spec.name);
            let name = CString::new(spec.name.as_str()).map_err(nul)?;
            let doc = CString::new(spec.doc.as_str()).map_err(nul)?;
            let default_value = match spec.default {
                Some(_) => next_default
                    .next()
                    .map_or(std::ptr::null(), std::ptr::from_ref),
                None => std::ptr::null(),
            };
            raw.push(TtrtFieldSpec {
                name: name.as_ptr(),
                field_type: spec.ty as i32,
                required: i32::from(spec.required),
                min_len: i64::try_from(spec.min_len).unwrap_or(i64::MAX),
                max_len: spec
                    .max_len
                    .map_or(-1, |m| i64::try_from(m).unwrap_or(i64::MAX)),
                default_value,
                doc: doc.as_ptr(),
            });
            strings.push(name);
            strings.push(doc);
        }
        Ok(RawSchema {
            _strings: strings,
            _defaults: defaults,
            raw,
        })
    }

    /// The views, in order.
    pub(crate) fn as_slice(&self) -> &[TtrtFieldSpec] {
        &self.raw
    }
}

/// Reads and checks `nb` schema entries at `specs`.
///
/// # Safety
/// A non-NULL `specs` must point to `nb` entries whose pointers are NULL or valid.
pub(crate) unsafe fn read_schema(
    specs: *const TtrtFieldSpec,
    nb: i32,
) -> Result<Vec<FieldSpec>, String> {
    let nb = ptr::count(nb, "field schema")?;
    // SAFETY: `nb` entries by the caller's promise.
    let raw = unsafe { ptr::slice(specs, nb, "field schema") }?;
    let mut out: Vec<FieldSpec> = Vec::with_capacity(nb);
    for (i, s) in raw.iter().enumerate() {
        // SAFETY: a NUL-terminated name by the caller's promise.
        let name = unsafe { ptr::string(s.name, &format!("name of schema entry {i}")) }?;
        if name.is_empty() || out.iter().any(|o| o.name == name) {
            return Err(format!(
                "schema entry {i}: empty or repeated field name {name:?}"
            ));
        }
        let what = format!("schema field `{name}`");
        let ty = FieldType::from_raw(s.field_type)
            .ok_or_else(|| format!("{what}: unknown field type {}", s.field_type))?;
        let min_len = usize::try_from(s.min_len)
            .map_err(|_| format!("{what}: negative min_len {}", s.min_len))?;
        let max_len = match s.max_len {
            -1 => None,
            m => Some(
                usize::try_from(m)
                    .ok()
                    .filter(|&m| m >= min_len)
                    .ok_or_else(|| format!("{what}: max_len {m} is below min_len or not -1"))?,
            ),
        };
        // SAFETY: NULL or a valid field by the caller's promise.
        let default = match unsafe { s.default_value.as_ref() } {
            None => None,
            Some(d) => {
                // SAFETY: forwarded from the caller.
                let v = unsafe { read_value(d.field_type, d.length, d.data, &what) }?;
                if v.ty() != ty {
                    return Err(format!(
                        "{what}: default of type {} for a {ty} field",
                        v.ty()
                    ));
                }
                Some(v)
            }
        };
        let doc = if s.doc.is_null() {
            String::new()
        } else {
            // SAFETY: non-NULL and NUL-terminated by the caller's promise.
            unsafe { ptr::string(s.doc, &format!("{what} doc")) }?
        };
        out.push(FieldSpec {
            name,
            ty,
            required: s.required != 0,
            default,
            min_len,
            max_len,
            doc,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_schema() {
        let schema = vec![
            FieldSpec::required("mode", FieldType::Char, "interpolation mode"),
            FieldSpec::with_default("beta", 1.0f32, "slope").scalar(),
            FieldSpec::optional("axes", FieldType::I32, "axes").len_range(0, Some(4)),
            FieldSpec::with_default("eps", 1e-5f64, "epsilon"),
        ];
        let raw = RawSchema::new(&schema).expect("no NUL bytes");
        let n = i32::try_from(raw.as_slice().len()).expect("few entries");
        // SAFETY: `raw` owns the views it hands out.
        let back = unsafe { read_schema(raw.as_slice().as_ptr(), n) };
        assert_eq!(back, Ok(schema));
    }
}
