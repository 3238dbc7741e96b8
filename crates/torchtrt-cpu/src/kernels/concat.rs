//! Concatenation along an axis.

use torchtrt_core::layers::{Concat, normalize_axis};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::parallel::for_each_chunk;
use crate::tensor_access::{check_dtype, check_output};

const WHAT: &str = "Concat";

struct ConcatKernel {
    axis: i64,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Concat,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ConcatKernel {
        axis: layer.axis,
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for ConcatKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let [out] = outputs else {
            return Err(format!("{WHAT} has one output, got {}", outputs.len()));
        };
        let Some(first) = inputs.first() else {
            return Err(format!("{WHAT} needs at least one input"));
        };
        let axis = normalize_axis(self.axis, first.rank()).map_err(|e| format!("{WHAT}: {e}"))?;
        let mut shape = first.shape().to_vec();
        shape[axis] = 0;
        for x in inputs {
            check_dtype(WHAT, x, self.dtype)?;
            let agrees = x.rank() == shape.len()
                && x.shape()
                    .iter()
                    .zip(&shape)
                    .enumerate()
                    .all(|(d, (a, b))| d == axis || a == b);
            if !agrees {
                return Err(format!(
                    "{WHAT}: cannot join {x} to {first} along axis {axis}"
                ));
            }
            shape[axis] += x.shape()[axis];
        }
        check_output(WHAT, out, self.dtype, &shape)?;
        let elem = self.dtype.size();
        let inner: usize = shape[axis + 1..].iter().product::<usize>() * elem;
        let blocks: Vec<usize> = inputs.iter().map(|x| x.shape()[axis] * inner).collect();
        let row: usize = blocks.iter().sum();
        let sources: Vec<&[u8]> = inputs.iter().map(|x| x.bytes()).collect();
        for_each_chunk(out.bytes_mut(), |start, chunk| {
            copy_span(&sources, &blocks, row, start, chunk);
        });
        Ok(())
    }
}

/// Fills `dst`, the bytes of the output from `start` on, from `sources`: output row `o`
/// (`row` bytes) is block `o` of each source in turn (`blocks[i]` bytes of source `i`).
/// Chunks of the output rather than whole rows are the parallel tasks, so a batch of one
/// (one row) is split over the threads too.
fn copy_span(sources: &[&[u8]], blocks: &[usize], row: usize, start: usize, dst: &mut [u8]) {
    let end = start + dst.len();
    let mut pos = start;
    while pos < end {
        let (o, mut off) = (pos / row, pos % row);
        for (src, &len) in sources.iter().zip(blocks) {
            if off < len {
                let take = (len - off).min(end - pos);
                dst[pos - start..pos - start + take]
                    .copy_from_slice(&src[o * len + off..o * len + off + take]);
                pos += take;
                if pos == end {
                    return;
                }
                off = len;
            }
            off -= len;
        }
    }
}
