//! Index plumbing shared by GatherElements and ScatterElements: indices checked against
//! the axis, and the walk that maps each index element to its data offset.

use rayon::prelude::*;
use torchtrt_core::Tensor;
use torchtrt_core::layers::normalize_axis;
use torchtrt_core::plugin_api::DType;

use crate::parallel::MIN_TASK;
use crate::strided::Strided;
use crate::tensor_access::{contiguous_strides, elems};

/// The elements of an index tensor.
#[derive(Clone, Copy)]
enum Values<'a> {
    I64(&'a [i64]),
    I32(&'a [i32]),
}

/// Where the elements of an index tensor land in the data.
pub(super) struct ElementIndex<'a> {
    values: Values<'a>,
    /// The length of the axis; every index is in `-len..len`.
    len: i64,
    /// Offsets into the data without the axis term, walked over the index shape.
    walk: Strided<1>,
    /// The data stride of the axis.
    axis_stride: usize,
}

/// The position of the first of `values` outside `-len..len`.
fn first_out_of_range<T: Copy + Into<i64> + Sync>(values: &[T], len: i64) -> Option<usize> {
    values
        .par_chunks(MIN_TASK)
        .enumerate()
        .find_map_first(|(c, chunk)| {
            let bad = chunk.iter().position(|&v| {
                let v: i64 = v.into();
                v < -len || v >= len
            });
            bad.map(|i| c * MIN_TASK + i)
        })
}

impl<'a> ElementIndex<'a> {
    /// Checks `idx` against data of shape `data` along `axis`; errors name the first index
    /// out of range.
    pub(super) fn new(
        what: &str,
        data: &[usize],
        idx: &'a Tensor,
        axis: i64,
    ) -> Result<ElementIndex<'a>, String> {
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
        let (values, bad) = match idx.dtype() {
            DType::I64 => {
                let v = elems::<i64>(idx)?;
                (
                    Values::I64(v),
                    first_out_of_range(v, len).map(|i| (i, v[i])),
                )
            }
            DType::I32 => {
                let v = elems::<i32>(idx)?;
                (
                    Values::I32(v),
                    first_out_of_range(v, len).map(|i| (i, v[i].into())),
                )
            }
            _ => return Err(format!("{what}: indices must be i32 or i64, got {idx}")),
        };
        if let Some((i, v)) = bad {
            return Err(format!(
                "{what}: index {v} (element {i} of the indices) is out of range for an axis of {len}"
            ));
        }
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
            values,
            len,
            walk: Strided::new(shape, &strides, [0]),
            axis_stride: data_strides[axis],
        })
    }

    /// Calls `f(element, data_offset)` for the index elements `start..end`, in row-major
    /// order.
    pub(super) fn for_each(&self, start: usize, end: usize, f: impl FnMut(usize, usize)) {
        match self.values {
            Values::I64(v) => self.walk_with(v, start, end, f),
            Values::I32(v) => self.walk_with(v, start, end, f),
        }
    }

    fn walk_with<T: Copy + Into<i64>>(
        &self,
        values: &[T],
        start: usize,
        end: usize,
        mut f: impl FnMut(usize, usize),
    ) {
        let [step] = self.walk.inner_strides();
        self.walk.for_each_run(start, end, |o, [at], n| {
            for j in 0..n {
                let v: i64 = values[o + j].into();
                let p = if v < 0 { v + self.len } else { v } as usize;
                let base = (at as isize + j as isize * step) as usize;
                f(o + j, base + p * self.axis_stride);
            }
        });
    }
}
