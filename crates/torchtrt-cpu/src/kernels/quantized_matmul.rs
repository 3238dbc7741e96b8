//! Matrix product of 8-bit integers ([`QuantizedMatMul`]): tiles of tokens (rows of the
//! input) are packed as the columns of unsigned-byte panels and multiplied with the packed
//! weight rows in 32-bit integers; each tile is scaled with its bias and written back
//! transposed, one run of output columns per token.

use std::sync::Arc;

use rayon::prelude::*;
use torchtrt_core::layers::{QuantizedMatMul, quantized_range};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::convolution::SendPtr;
use super::quantize::quantize_into;
use crate::linalg::gemm_i8::{self, Acc, MR, NR, PackedRows, pack_rows, panel_bytes};
use crate::scratch::with_scratch;
use crate::tensor_access::{check_arity, check_output, elems, elems_mut, words, words_mut};

const WHAT: &str = "QuantizedMatMul";

/// Tokens per task, so that one task's panels stay in L2.
const PANEL_BYTES: usize = 256 * 1024;

struct QuantizedMatMulKernel {
    layer: QuantizedMatMul,
    packed: Option<Arc<PackedRows>>,
}

pub(super) fn prepare(
    layer: &QuantizedMatMul,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    if layer.dtype != DType::F32 {
        return Err(format!(
            "{WHAT} has no CPU kernel for {} outputs",
            layer.dtype
        ));
    }
    let packed = match inputs[1].value {
        Some(w) => Some(Arc::new(pack(w)?)),
        None => None,
    };
    Ok(Box::new(QuantizedMatMulKernel {
        layer: layer.clone(),
        packed,
    }))
}

/// The `I8` weights `[N, K]` packed.
fn pack(w: &Tensor) -> Result<PackedRows, String> {
    let [n, k] = w.shape() else {
        return Err(format!("{WHAT}: weights {w} are not [N, K]"));
    };
    PackedRows::new(words::<i8>(w)?, *n, *k).ok_or_else(|| {
        format!(
            "{WHAT}: {k} products per output exceed the {} a 32-bit sum holds",
            gemm_i8::MAX_DEPTH
        )
    })
}

impl Kernel for QuantizedMatMulKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=3, 1)?;
        let (a, w) = (inputs[0], inputs[1]);
        let flip = match a.dtype() {
            DType::I8 => 0x80,
            DType::U8 => 0,
            other => return Err(format!("{WHAT} reads I8 or U8, not {other}")),
        };
        let (&[n, k], Some(&depth)) = (w.shape(), a.shape().last()) else {
            return Err(format!("{WHAT}: weights {w} are not [N, K] for {a}"));
        };
        if depth != k || self.layer.weight_scales.len() != n {
            return Err(format!("{WHAT}: {a} and weights {w} do not agree"));
        }
        let mut shape = a.shape().to_vec();
        *shape.last_mut().ok_or(WHAT)? = n;
        let out = &mut outputs[0];
        let out_dtype = self.layer.output.map_or(DType::F32, |q| q.dtype);
        check_output(WHAT, out, out_dtype, &shape)?;
        let bias = inputs.get(2).map(|b| elems::<f32>(b)).transpose()?;
        if bias.is_some_and(|b| b.len() != n) {
            return Err(format!("{WHAT}: the bias must hold {n} values"));
        }
        let fresh;
        let packed = match &self.packed {
            Some(p) => p.as_ref(),
            None => {
                fresh = pack(w)?;
                &fresh
            }
        };
        let zero = self.layer.input_zero_point as u8;
        let pad = zero ^ flip;
        let scale = self.layer.input_scale;
        let scales: Vec<f32> = self.layer.weight_scales.iter().map(|s| s * scale).collect();
        let shifts: Vec<i32> = (0..n).map(|r| i32::from(pad) * packed.row_sum(r)).collect();
        let tokens = a.numel() / k.max(1);
        let quantization = match self.layer.output {
            Some(q) => Some((q.scale, q.zero_point, quantized_range(q.dtype).ok_or(WHAT)?)),
            None => None,
        };
        let dst = match quantization {
            None => Dst::Float(SendPtr(elems_mut::<f32>(out)?.as_mut_ptr())),
            Some(_) => Dst::Bytes(SendPtr(words_mut::<u8>(out)?.as_mut_ptr())),
        };
        let terms = Terms {
            scales: &scales,
            shifts: &shifts,
            bias,
            quantization,
            n,
        };
        let x = words::<u8>(a)?;
        let quads = packed.quads();
        let width = (PANEL_BYTES / (quads * 4 * NR).max(1) * NR).max(NR);
        let tasks = tokens.div_ceil(width);
        let task = |t: usize| {
            let t0 = t * width;
            let count = width.min(tokens - t0);
            let rows = &x[t0 * k..(t0 + count) * k];
            with_scratch(panel_bytes(quads, count), |panels: &mut [u8]| {
                pack_rows(rows, k, count, flip, pad, panels);
                let panel_len = quads * NR * 4;
                let mut acc: Acc = [[0; NR]; MR];
                for r0 in (0..n).step_by(MR) {
                    for (p, panel) in panels.chunks_exact(panel_len).enumerate() {
                        gemm_i8::tile(packed, r0, panel, NR * 4, &mut acc);
                        let cols = NR.min(count - p * NR);
                        // SAFETY: tokens `t0 + p·NR ..` of this task and output columns
                        // `r0..r0 + MR`: inside the output, written by this task alone.
                        unsafe { terms.write(&acc, r0, t0 + p * NR, cols, dst) };
                    }
                }
            });
        };
        if tasks > 1 && rayon::current_num_threads() > 1 {
            (0..tasks).into_par_iter().for_each(task);
        } else {
            (0..tasks).for_each(task);
        }
        Ok(())
    }
}

/// Where the outputs go.
#[derive(Clone, Copy)]
enum Dst {
    Float(SendPtr<f32>),
    Bytes(SendPtr<u8>),
}

/// What turns a tile's sums into outputs.
struct Terms<'a> {
    /// `input_scale · weight_scales[n]`.
    scales: &'a [f32],
    /// The input zero point's share of each sum.
    shifts: &'a [i32],
    bias: Option<&'a [f32]>,
    /// Scale, zero point and range of a quantized output.
    quantization: Option<(f32, i32, (i32, i32))>,
    /// Output columns.
    n: usize,
}

impl Terms<'_> {
    /// Writes the tile of output columns `r0..` for the `cols` tokens from `token`.
    ///
    /// # Safety
    /// Those outputs must be inside the output `dst` points to and written by no one else
    /// meanwhile.
    unsafe fn write(&self, acc: &Acc, r0: usize, token: usize, cols: usize, dst: Dst) {
        let rows = MR.min(self.n - r0);
        let mut block = [[0f32; MR]; NR];
        for (r, sums) in acc.iter().enumerate().take(rows) {
            let m = r0 + r;
            let (shift, scale) = (self.shifts[m], self.scales[m]);
            let bias = self.bias.map_or(0.0, |b| b[m]);
            for (line, &s) in block.iter_mut().zip(sums) {
                line[r] = (s - shift) as f32 * scale + bias;
            }
        }
        let mut bytes = [0u8; MR];
        for (c, line) in block.iter().enumerate().take(cols) {
            let at = (token + c) * self.n + r0;
            match (dst, self.quantization) {
                // SAFETY: the caller vouches for these `rows` outputs.
                (Dst::Float(p), _) => unsafe {
                    std::ptr::copy_nonoverlapping(line.as_ptr(), p.get().add(at), rows)
                },
                (Dst::Bytes(p), Some((scale, zp, range))) => {
                    quantize_into(&line[..rows], &mut bytes[..rows], scale, zp, range);
                    // SAFETY: as above.
                    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.get().add(at), rows) };
                }
                (Dst::Bytes(_), None) => {}
            }
        }
    }
}
