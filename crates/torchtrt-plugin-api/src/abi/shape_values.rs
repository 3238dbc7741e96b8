//! Shape-input values across the ABI: [`ShapeValues`] as [`TtrtShapeValues`] and back.

use super::ptr;
use super::types::{
    TTRT_SHAPE_VALUES_FLOATS, TTRT_SHAPE_VALUES_INTS, TTRT_SHAPE_VALUES_UNKNOWN, TtrtShapeValues,
};
use crate::shape_values::{MAX_SHAPE_VALUES, ShapeValues};

/// The C view of `values`, pointing into them (valid while they are).
pub(crate) fn to_raw(values: &[ShapeValues]) -> Result<Vec<TtrtShapeValues>, String> {
    values
        .iter()
        .map(|v| {
            let (kind, count, ints, floats) = match v {
                ShapeValues::Unknown => (TTRT_SHAPE_VALUES_UNKNOWN, 0, [].as_ptr(), [].as_ptr()),
                ShapeValues::Ints(x) => (TTRT_SHAPE_VALUES_INTS, x.len(), x.as_ptr(), [].as_ptr()),
                ShapeValues::Floats(x) => {
                    (TTRT_SHAPE_VALUES_FLOATS, x.len(), [].as_ptr(), x.as_ptr())
                }
            };
            Ok(TtrtShapeValues {
                kind,
                count: ptr::to_count(count, "shape values")?,
                ints: if kind == TTRT_SHAPE_VALUES_INTS {
                    ints
                } else {
                    std::ptr::null()
                },
                floats: if kind == TTRT_SHAPE_VALUES_FLOATS {
                    floats
                } else {
                    std::ptr::null()
                },
            })
        })
        .collect()
}

/// Reads `n` entries at `raw` (NULL: all unknown).
///
/// # Safety
/// A non-NULL `raw` holds `n` entries whose arrays hold their counts, valid for this call.
pub(crate) unsafe fn from_raw(
    raw: *const TtrtShapeValues,
    n: usize,
) -> Result<Vec<ShapeValues>, String> {
    if raw.is_null() {
        return Ok(vec![ShapeValues::Unknown; n]);
    }
    // SAFETY: `n` entries by the caller's promise.
    let entries = unsafe { ptr::slice(raw, n, "shape values") }?;
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let what = format!("shape values of input {i}");
            let count = ptr::count(e.count, &what)?;
            if count > MAX_SHAPE_VALUES {
                return Err(format!(
                    "{what}: {count} values, at most {MAX_SHAPE_VALUES}"
                ));
            }
            match e.kind {
                TTRT_SHAPE_VALUES_UNKNOWN => Ok(ShapeValues::Unknown),
                // SAFETY: `count` integers by the ABI's rules.
                TTRT_SHAPE_VALUES_INTS => unsafe { ptr::slice(e.ints, count, &what) }
                    .map(|v| ShapeValues::Ints(v.to_vec())),
                // SAFETY: `count` values by the ABI's rules.
                TTRT_SHAPE_VALUES_FLOATS => unsafe { ptr::slice(e.floats, count, &what) }
                    .map(|v| ShapeValues::Floats(v.to_vec())),
                k => Err(format!("{what}: unknown kind {k}")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let values = vec![
            ShapeValues::Unknown,
            ShapeValues::Ints(vec![3, -4]),
            ShapeValues::Floats(vec![0.5]),
            ShapeValues::Ints(Vec::new()),
        ];
        let raw = to_raw(&values).unwrap();
        // SAFETY: `raw` points into `values`, alive here.
        let back = unsafe { from_raw(raw.as_ptr(), raw.len()) }.unwrap();
        assert_eq!(back, values);
        // SAFETY: NULL is all unknown.
        let none = unsafe { from_raw(std::ptr::null(), 2) }.unwrap();
        assert_eq!(none, vec![ShapeValues::Unknown; 2]);
    }

    #[test]
    fn bad_entries_are_errors() {
        let bad = [TtrtShapeValues {
            kind: 7,
            count: 0,
            ints: std::ptr::null(),
            floats: std::ptr::null(),
        }];
        // SAFETY: one valid entry.
        assert!(unsafe { from_raw(bad.as_ptr(), 1) }.is_err());
        let null_ints = [TtrtShapeValues {
            kind: TTRT_SHAPE_VALUES_INTS,
            count: 2,
            ints: std::ptr::null(),
            floats: std::ptr::null(),
        }];
        // SAFETY: one entry whose NULL array is refused before reading.
        assert!(unsafe { from_raw(null_ints.as_ptr(), 1) }.is_err());
    }
}
