//! Index plumbing shared by GatherElements and ScatterElements: checked positions along the
//! axis, and the walk that maps each index element to its data offset off the axis.

use torchtrt_core::Tensor;
use torchtrt_core::layers::normalize_axis;
use torchtrt_core::plugin_api::DType;

use crate::strided::Strided;
use crate::tensor_access::contiguous_strides;

/// Where the elements of an index tensor land in the data.
pub(super) struct ElementIndex {
    /// Each index as a position in `0..len` of the axis, row-major over the index shape.
    pub positions: Vec<usize>,
    /// Offsets into the data without the axis term, walked over the index shape.
    pub walk: Strided<1>,
    /// The data stride of the axis.
    pub axis_stride: usize,
}

impl ElementIndex {
    /// Checks `idx` against `data` along `axis`; errors name the first index out of range.
    pub(super) fn new(
        what: &str,
        data: &[usize],
        idx: &Tensor,
        axis: i64,
    ) -> Result<ElementIndex, String> {
        if !matches!(idx.dtype(), DType::I64 | DType::I32) {
            return Err(format!("{what}: indices must be i32 or i64, got {idx}"));
        }
        let shape = idx.shape();
        let axis = normalize_axis(axis, data.len()).map_err(|e| format!("{what}: {e}"))?;
        let fits =
            shape.len() == data.len() && (0..data.len()).all(|d| d == axis || shape[d] <= data[d]);
        if !fits {
            return Err(format!(
                "{what}: indices {idx} do not fit data of shape {data:?} along axis {axis}"
            ));
        }
        let len = data[axis] as i64;
        let values = idx
            .to_i64_vec()
            .ok_or_else(|| format!("{what}: indices {idx} are not integers"))?;
        let positions = values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let p = if v < 0 { v + len } else { v };
                if (0..len).contains(&p) {
                    Ok(p as usize)
                } else {
                    Err(format!(
                        "{what}: index {v} (element {i} of the indices) is out of range for an axis of {len}"
                    ))
                }
            })
            .collect::<Result<_, _>>()?;
        let data_strides = contiguous_strides(data);
        let strides: Vec<[isize; 1]> = (0..data.len())
            .map(|d| {
                [if d == axis {
                    0
                } else {
                    data_strides[d] as isize
                }]
            })
            .collect();
        Ok(ElementIndex {
            positions,
            walk: Strided::new(shape, &strides, [0]),
            axis_stride: data_strides[axis],
        })
    }

    /// The data offset of each index element in `start..end` as `f(element, offset)`, in
    /// row-major order.
    pub(super) fn for_each(&self, start: usize, end: usize, mut f: impl FnMut(usize, usize)) {
        let [step] = self.walk.inner_strides();
        self.walk.for_each_run(start, end, |o, [at], len| {
            for j in 0..len {
                let base = (at as isize + j as isize * step) as usize;
                f(o + j, base + self.positions[o + j] * self.axis_stride);
            }
        });
    }
}
