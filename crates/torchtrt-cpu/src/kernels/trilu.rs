//! Trilu: copies each trailing matrix row by row, zeroing the part outside the triangle.

use torchtrt_core::layers::Trilu;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::scalar_arg::scalar_value;
use crate::dispatch::with_width;
use crate::parallel::for_each_row;
use crate::tensor_access::{check_arity, check_dtype, check_output, words, words_mut};

const WHAT: &str = "Trilu";

struct TriluKernel {
    upper: bool,
    dtype: DType,
}

pub(super) fn prepare(layer: &Trilu, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(TriluKernel {
        upper: layer.upper,
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for TriluKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=2, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        if x.rank() < 2 {
            return Err(format!("{WHAT} needs an input of rank ≥ 2, got {x}"));
        }
        let k = match inputs.get(1) {
            Some(t) => scalar_value(WHAT, "k", t)?,
            None => 0,
        };
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, x.shape())?;
        let rows = x.shape()[x.rank() - 2];
        let cols = x.shape()[x.rank() - 1];
        let upper = self.upper;
        with_width!(self.dtype, W => {
            let src = words::<W>(x)?;
            for_each_row(words_mut::<W>(out)?, cols, cols, || (), |_, r, dst| {
                let (lo, hi) = kept(r % rows, k, cols, upper);
                dst[..lo].fill(0);
                dst[lo..hi].copy_from_slice(&src[r * cols + lo..r * cols + hi]);
                dst[hi..].fill(0);
            });
            Ok(())
        })
    }
}

/// The columns `lo..hi` of row `i` inside the triangle: `j − i ≥ k` (upper) or `j − i ≤ k`.
fn kept(i: usize, k: i64, cols: usize, upper: bool) -> (usize, usize) {
    let clamp = |v: i128| v.clamp(0, cols as i128) as usize;
    let edge = i as i128 + i128::from(k);
    if upper {
        (clamp(edge), cols)
    } else {
        (0, clamp(edge + 1))
    }
}
