//! Max, average and Lp pooling over 1 or 2 spatial dims (1-D as one row), a thread per
//! output, with the CPU kernel's window rules: padding never wins a max, averages divide by
//! the taps inside the input (or inside input and padding with `count_include_pad`), an
//! output whose window misses the input is −∞ (max) or 0 (average). 3-D runs on the host.

use torchtrt_core::layers::{InferInput, LayerKind, PoolKind, Pooling};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::operands::{arg_i32, dims, expect_arity, expect_dtype, grid_for};
use super::prelude::{Program, dtype_suffix, with_prelude};
use super::{DeviceKernel, PrepareCtx};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Pooling";
const THREADS: u32 = 256;

static PROGRAM: Program = Program::new("core_pooling", || with_prelude(BODY));

const BODY: &str = r#"
template <typename D>
__device__ __forceinline__ void pool_impl(const void* x, void* y, i64 planes, int H, int W,
    int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int PHE, int PWE, int DH,
    int DW, int kind, int p, int include_pad) {
    GRID_LOOP(i, planes * OH * OW) {
        int ow = (int)(i % OW);
        i64 t = i / OW;
        int oh = (int)(t % OH);
        i64 base = (t / OH) * (i64)H * W;
        int h0 = oh * SH - PH, w0 = ow * SW - PW;
        int vh = 0, vw = 0, ph = 0, pw = 0;
        for (int k = 0; k < KH; ++k) {
            int c = h0 + k * DH;
            vh += c >= 0 && c < H;
            ph += c >= -PH && c < H + PHE;
        }
        for (int k = 0; k < KW; ++k) {
            int c = w0 + k * DW;
            vw += c >= 0 && c < W;
            pw += c >= -PW && c < W + PWE;
        }
        float acc = kind == 0 ? -__int_as_float(0x7f800000) : 0.0f;
        for (int kh = 0; kh < KH; ++kh) {
            int ih = h0 + kh * DH;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                int iw = w0 + kw * DW;
                if (iw < 0 || iw >= W) continue;
                float v = LOAD(D, x, base + (i64)ih * W + iw);
                if (kind == 0) acc = v > acc ? v : acc;
                else if (kind == 1) acc += v;
                else if (p == 1) acc += fabsf(v);
                else if (p == 2) acc += v * v;
                else acc += powf(fabsf(v), (float)p);
            }
        }
        if (kind == 1) {
            int count = include_pad ? ph * pw : vh * vw;
            acc = count == 0 ? 0.0f : acc / (float)count;
        } else if (kind == 2) {
            acc = p == 1 ? acc : p == 2 ? sqrtf(acc) : powf(acc, 1.0f / (float)p);
        }
        STORE(D, y, i, acc);
    }
}
#define POOL(S, D) extern "C" __global__ void pool2d_##S(const void* x, void* y, i64 planes, \
    int H, int W, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int PHE, \
    int PWE, int DH, int DW, int kind, int p, int include_pad) { \
    pool_impl<D>(x, y, planes, H, W, OH, OW, KH, KW, SH, SW, PH, PW, PHE, PWE, DH, DW, kind, \
        p, include_pad); }
FOR_EACH_DTYPE(POOL)
"#;

struct PoolKernel {
    dtype: DType,
    layer: Pooling,
    spatial: usize,
    f: Function,
}

pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Pooling(l) = layer else {
        return None;
    };
    let x = inputs.first()?;
    let suffix = dtype_suffix(x.dtype)?;
    let spatial = x.shape.len().checked_sub(2)?;
    if !(1..=2).contains(&spatial) {
        return None;
    }
    Some(
        ctx.programs
            .function(&PROGRAM.source(), &format!("pool2d_{suffix}"))
            .map_err(|e| format!("{WHAT}: {e}"))
            .map(|f| {
                Box::new(PoolKernel {
                    dtype: x.dtype,
                    layer: l.clone(),
                    spatial,
                    f,
                }) as Box<dyn DeviceKernel>
            }),
    )
}

impl DeviceKernel for PoolKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(WHAT, inputs, outputs, 1, 1)?;
        expect_dtype(WHAT, inputs, self.dtype)?;
        expect_dtype(WHAT, outputs, self.dtype)?;
        let (x, y) = (dims(&inputs[0].desc)?, dims(&outputs[0].desc)?);
        let rank = self.spatial + 2;
        if x.len() != rank || y.len() != rank || x[..2] != y[..2] {
            return Err(format!("{WHAT}: input {x:?} and output {y:?} do not fit"));
        }
        let l = &self.layer;
        let pair = |v: &[usize], fill: usize| {
            if self.spatial == 1 {
                [fill, v[0]]
            } else {
                [v[0], v[1]]
            }
        };
        let param = |v: &[i64], fill: usize| -> Result<[usize; 2], String> {
            let v: Vec<usize> = v
                .iter()
                .map(|&e| usize::try_from(e).map_err(|_| format!("{WHAT}: parameter {e}")))
                .collect::<Result<_, _>>()?;
            if v.len() != self.spatial {
                return Err(format!("{WHAT}: {v:?} has the wrong length"));
            }
            Ok(pair(&v, fill))
        };
        let (hw, ohw) = (pair(&x[2..], 1), pair(&y[2..], 1));
        let [k, s, pb, pe, d] = [
            param(&l.kernel, 1)?,
            param(&l.strides, 1)?,
            param(&l.pads_begin, 0)?,
            param(&l.pads_end, 0)?,
            param(&l.dilations, 1)?,
        ];
        let planes = x[0] * x[1];
        let total = planes * ohw[0] * ohw[1];
        if total == 0 {
            return Ok(());
        }
        let (kind, p) = match l.kind {
            PoolKind::Max => (0, 0),
            PoolKind::Average => (1, 0),
            PoolKind::Lp { p } => (2, p),
        };
        let mut args = KernelArgs::new()
            .ptr(inputs[0].ptr)
            .ptr(outputs[0].ptr)
            .i64(planes as i64);
        for v in [hw, ohw, k, s, pb, pe, d].concat() {
            args = args.i32(arg_i32(v, WHAT)?);
        }
        let mut args = args
            .i32(kind)
            .i32(i32::try_from(p).map_err(|_| format!("{WHAT}: p = {p}"))?)
            .i32(i32::from(l.count_include_pad));
        // SAFETY: the arguments match `pool2d_*`; the tensors hold the checked shapes.
        unsafe {
            self.f.launch(
                stream,
                (grid_for(total, THREADS), 1, 1),
                (THREADS, 1, 1),
                0,
                &mut args,
            )
        }
        .map_err(|e| format!("{WHAT}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }
}
