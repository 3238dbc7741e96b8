//! GatherND: each index tuple resolved to the offset of a slice of the data, then the
//! slices copied in parallel.

use torchtrt_core::layers::GatherNd;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_width;
use crate::parallel::for_each_rows;
use crate::tensor_access::{
    check_arity, check_dtype, check_output, contiguous_strides, words, words_mut,
};

const WHAT: &str = "GatherNd";

struct GatherNdKernel {
    batch_dims: usize,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &GatherNd,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(GatherNdKernel {
        batch_dims: layer.batch_dims,
        dtype: inputs[0].dtype,
    }))
}

/// The data offsets of the slices that index tuples address.
pub(super) struct Tuples {
    /// Offset of each tuple's slice, in the tuples' row-major order.
    pub(super) offsets: Vec<usize>,
    /// Elements per slice.
    pub(super) slice: usize,
}

impl Tuples {
    /// Resolves `idx` (`[batch…, tuples…, k]`) against `data` with `batch_dims` shared
    /// leading axes; an index out of range is an error naming it.
    pub(super) fn new(
        what: &str,
        data: &[usize],
        idx: &Tensor,
        batch_dims: usize,
    ) -> Result<Tuples, String> {
        let ishape = idx.shape();
        let k = *ishape
            .last()
            .ok_or_else(|| format!("{what}: indices {idx} have rank 0"))?;
        if batch_dims >= ishape.len() || batch_dims + k > data.len() || k == 0 {
            return Err(format!(
                "{what}: indices {idx} do not address data {data:?} after {batch_dims} batch axes"
            ));
        }
        if ishape[..batch_dims] != data[..batch_dims] {
            return Err(format!(
                "{what}: batch axes of data {data:?} and indices {idx} differ"
            ));
        }
        let values = int_vector_any(what, idx)?;
        let strides = contiguous_strides(data);
        let batches: usize = data[..batch_dims].iter().product();
        let batch_stride: usize = data[batch_dims..].iter().product();
        let tuples = values.len() / k;
        let per_batch = tuples / batches.max(1);
        let mut offsets = Vec::with_capacity(tuples);
        for (t, tuple) in values.chunks_exact(k).enumerate() {
            let mut at = t.checked_div(per_batch).unwrap_or(0) * batch_stride;
            for (j, &v) in tuple.iter().enumerate() {
                let d = data[batch_dims + j] as i64;
                let i = if v < 0 { v + d } else { v };
                if !(0..d).contains(&i) {
                    return Err(format!(
                        "{what}: index {v} of tuple {t} is out of range for axis {} of {data:?}",
                        batch_dims + j
                    ));
                }
                at += i as usize * strides[batch_dims + j];
            }
            offsets.push(at);
        }
        Ok(Tuples {
            offsets,
            slice: data[batch_dims + k..].iter().product(),
        })
    }
}

/// The values of an i32 or i64 tensor of any rank.
fn int_vector_any(what: &str, t: &Tensor) -> Result<Vec<i64>, String> {
    match t.dtype() {
        DType::I64 | DType::I32 => t.to_i64_vec(),
        _ => None,
    }
    .ok_or_else(|| format!("{what}: indices must be i64 or i32, got {t}"))
}

impl Kernel for GatherNdKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=2, 1)?;
        let (data, idx) = (inputs[0], inputs[1]);
        check_dtype(WHAT, data, self.dtype)?;
        let tuples = Tuples::new(WHAT, data.shape(), idx, self.batch_dims)?;
        let k = idx.shape()[idx.rank() - 1];
        let mut shape = idx.shape()[..idx.rank() - 1].to_vec();
        shape.extend_from_slice(&data.shape()[self.batch_dims + k..]);
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let slice = tuples.slice;
        with_width!(self.dtype, W => {
            let src = words::<W>(data)?;
            let dst = words_mut::<W>(out)?;
            for_each_rows(dst, slice, slice, |first, rows| {
                for (row, &at) in rows.chunks_exact_mut(slice).zip(&tuples.offsets[first..]) {
                    row.copy_from_slice(&src[at..at + slice]);
                }
            });
            Ok(())
        })
    }
}
