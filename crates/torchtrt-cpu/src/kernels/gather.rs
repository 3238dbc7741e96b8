//! Gather along an axis by integer indices (negative indices count from the end).

use torchtrt_core::layers::{Gather, normalize_axis};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::parallel::for_each_row;
use crate::tensor_access::{check_arity, check_dtype, check_output};

const WHAT: &str = "Gather";

struct GatherKernel {
    axis: i64,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Gather,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(GatherKernel {
        axis: layer.axis,
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for GatherKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=2, 1)?;
        let (data, idx) = (inputs[0], inputs[1]);
        check_dtype(WHAT, data, self.dtype)?;
        let axis = normalize_axis(self.axis, data.rank()).map_err(|e| format!("{WHAT}: {e}"))?;
        let mut shape = data.shape()[..axis].to_vec();
        shape.extend_from_slice(idx.shape());
        shape.extend_from_slice(&data.shape()[axis + 1..]);
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let positions = resolve_indices(idx, data.shape()[axis])?;
        let elem = self.dtype.size();
        let inner = data.shape()[axis + 1..].iter().product::<usize>() * elem;
        let block = data.shape()[axis] * inner;
        let row = positions.len() * inner;
        let src = data.bytes();
        for_each_row(
            out.bytes_mut(),
            row,
            row,
            || (),
            |_, o, dst| {
                let base = o * block;
                for (chunk, &p) in dst.chunks_exact_mut(inner).zip(&positions) {
                    chunk.copy_from_slice(&src[base + p * inner..base + (p + 1) * inner]);
                }
            },
        );
        Ok(())
    }
}

/// The indices as positions in `0..len`; errors name the first index out of range.
fn resolve_indices(idx: &Tensor, len: usize) -> Result<Vec<usize>, String> {
    if !matches!(idx.dtype(), DType::I64 | DType::I32) {
        return Err(format!("{WHAT}: indices must be i32 or i64, got {idx}"));
    }
    let values = idx
        .to_i64_vec()
        .ok_or_else(|| format!("{WHAT}: indices {idx} are not integers"))?;
    let n = len as i64;
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let p = if v < 0 { v + n } else { v };
            if (0..n).contains(&p) {
                Ok(p as usize)
            } else {
                Err(format!(
                    "{WHAT}: index {v} (element {i} of the indices) is out of range for an axis of {len}"
                ))
            }
        })
        .collect()
}
