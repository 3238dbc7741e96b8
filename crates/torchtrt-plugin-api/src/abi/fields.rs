//! Field values across the ABI: C views of Rust fields, and Rust fields read from C.

use std::ffi::{CString, c_void};

use super::ptr;
use super::types::TtrtField;
use crate::field::{FieldCollection, FieldType, FieldValue};

/// C views of Rust fields that own every byte they point to. Moving a `RawFields` keeps the
/// pointers valid; they die with it.
pub(crate) struct RawFields {
    _names: Vec<CString>,
    _data: Vec<Vec<u64>>,
    raw: Vec<TtrtField>,
}

impl RawFields {
    /// Views of `fields`; an error when a name contains a NUL byte.
    pub(crate) fn new<'a>(
        fields: impl IntoIterator<Item = (&'a str, &'a FieldValue)>,
    ) -> Result<RawFields, String> {
        let mut names = Vec::new();
        let mut data = Vec::new();
        let mut raw = Vec::new();
        for (name, value) in fields {
            let cname = CString::new(name)
                .map_err(|_| format!("field name {name:?} contains a NUL byte"))?;
            let bytes = aligned_bytes(value);
            raw.push(TtrtField {
                name: cname.as_ptr(),
                field_type: value.ty() as i32,
                reserved: 0,
                length: value.len(),
                data: bytes.as_ptr().cast::<c_void>(),
            });
            names.push(cname);
            data.push(bytes);
        }
        Ok(RawFields {
            _names: names,
            _data: data,
            raw,
        })
    }

    /// The views, in order.
    pub(crate) fn as_slice(&self) -> &[TtrtField] {
        &self.raw
    }
}

/// The value's bytes in 8-byte aligned storage, strings followed by a NUL for C readers.
fn aligned_bytes(value: &FieldValue) -> Vec<u64> {
    let mut bytes = value.to_bytes();
    if value.ty() == FieldType::Char {
        bytes.push(0);
    }
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(&bytes);
    words
}

/// Reads a value of discriminant `ty` with `length` elements at `data`.
///
/// # Safety
/// A non-NULL `data` must point to `length` elements of the type.
pub(crate) unsafe fn read_value(
    ty: i32,
    length: usize,
    data: *const c_void,
    what: &str,
) -> Result<FieldValue, String> {
    let ty = FieldType::from_raw(ty).ok_or_else(|| format!("{what}: unknown field type {ty}"))?;
    let n = length
        .checked_mul(ty.element_size())
        .ok_or_else(|| format!("{what}: {length} elements is too large"))?;
    // SAFETY: `n` bytes at `data` by the caller's promise.
    let bytes = unsafe { ptr::slice(data.cast::<u8>(), n, what) }?;
    FieldValue::from_bytes(ty, bytes).ok_or_else(|| format!("{what}: string is not valid UTF-8"))
}

/// Reads `nb` fields at `fields`; names must be unique.
///
/// # Safety
/// A non-NULL `fields` must point to `nb` fields, each valid as [`read_value`] requires.
pub(crate) unsafe fn read_fields(
    fields: *const TtrtField,
    nb: i32,
) -> Result<FieldCollection, String> {
    let nb = ptr::count(nb, "fields")?;
    // SAFETY: `nb` fields by the caller's promise.
    let raw = unsafe { ptr::slice(fields, nb, "fields") }?;
    let mut out = FieldCollection::new();
    for (i, f) in raw.iter().enumerate() {
        // SAFETY: a NUL-terminated name by the caller's promise.
        let name = unsafe { ptr::string(f.name, &format!("name of field {i}")) }?;
        if out.contains(&name) {
            return Err(format!("field `{name}` is given twice"));
        }
        // SAFETY: forwarded from the caller.
        let value =
            unsafe { read_value(f.field_type, f.length, f.data, &format!("field `{name}`")) }?;
        out.set(&name, value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    #[test]
    fn round_trips_every_type() {
        let fields = FieldCollection::new()
            .with("a", vec![1.5f32, -2.25])
            .with("b", "bilinear")
            .with("c", FieldValue::Dims(vec![3, -1, 7]))
            .with("d", FieldValue::Bytes(vec![1, 2, 3]))
            .with("e", vec![bf16::from_f32(0.5)])
            .with("f", Vec::<i32>::new());
        let raw = RawFields::new(fields.iter().map(|f| (f.name.as_str(), &f.value)))
            .expect("names have no NUL");
        let n = i32::try_from(raw.as_slice().len()).expect("few fields");
        // SAFETY: `raw` owns the views it hands out.
        let back = unsafe { read_fields(raw.as_slice().as_ptr(), n) };
        assert_eq!(back, Ok(fields));
    }

    #[test]
    fn rejects_bad_type_and_nul_names() {
        let x = [1.0f32];
        // SAFETY: `x` holds one f32.
        let e = unsafe { read_value(42, 1, x.as_ptr().cast(), "field `x`") };
        assert_eq!(e, Err("field `x`: unknown field type 42".to_string()));
        let v = FieldValue::from(1i32);
        assert!(RawFields::new([("a\0b", &v)]).is_err());
    }
}
