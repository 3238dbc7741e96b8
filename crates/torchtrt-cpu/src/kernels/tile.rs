//! Tile: the input repeated along each dim; each output row is the matching input row
//! repeated.

use torchtrt_core::layers::{Tile, int_vector};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_width;
use crate::parallel::for_each_row;
use crate::tensor_access::{
    check_arity, check_dtype, check_output, contiguous_strides, words, words_mut,
};

const WHAT: &str = "Tile";

struct TileKernel {
    dtype: DType,
}

pub(super) fn prepare(_: &Tile, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(TileKernel {
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for TileKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=2, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let repeats =
            int_vector("the repeats input", inputs[1]).map_err(|e| format!("{WHAT}: {e}"))?;
        if repeats.len() != x.rank() || repeats.iter().any(|&r| r < 0) {
            return Err(format!("{WHAT}: repeats {repeats:?} do not fit {x}"));
        }
        let shape = x
            .shape()
            .iter()
            .zip(&repeats)
            .map(|(&d, &r)| d.checked_mul(r as usize))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| format!("{WHAT}: repeating {x} by {repeats:?} overflows"))?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        if out.numel() == 0 {
            return Ok(());
        }
        with_width!(self.dtype, W => {
            tile(words::<W>(x)?, x.shape(), &shape, words_mut::<W>(out)?);
            Ok(())
        })
    }
}

/// Fills `out` (of `shape`, a non-empty multiple of `in_shape` dim by dim) with `x` tiled.
fn tile<W: Copy + Send + Sync>(x: &[W], in_shape: &[usize], shape: &[usize], out: &mut [W]) {
    let Some((&row_len, outer)) = shape.split_last() else {
        out.copy_from_slice(x);
        return;
    };
    let in_row = in_shape[in_shape.len() - 1];
    let in_strides = contiguous_strides(in_shape);
    for_each_row(
        out,
        row_len,
        row_len,
        || (),
        |_, r, dst| {
            let mut rest = r;
            let mut src = 0;
            for d in (0..outer.len()).rev() {
                src += (rest % outer[d]) % in_shape[d] * in_strides[d];
                rest /= outer[d];
            }
            let row = &x[src..src + in_row];
            for chunk in dst.chunks_exact_mut(in_row) {
                chunk.copy_from_slice(row);
            }
        },
    );
}
