//! Max, average and Lp pooling over 1 or 2 spatial dims (1-D as one row), a thread per
//! output (a kernel per kind, blocks over output columns, rows and planes: no index
//! divisions), with the CPU kernel's window rules: padding never wins a max, averages divide by
//! the taps inside the input (or inside input and padding with `count_include_pad`), an
//! output whose window misses the input is −∞ (max) or 0 (average). 3-D runs on the host.

use torchtrt_core::layers::{InferInput, LayerKind, PoolKind, Pooling};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::operands::{arg_i32, dims, expect_arity, expect_dtype};
use super::prelude::{Program, dtype_suffix, with_prelude};
use super::{DeviceKernel, PrepareCtx};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Pooling";
const THREADS: u32 = 256;

static PROGRAM: Program = Program::new("core_pooling", || with_prelude(BODY));

const BODY: &str = r#"
/* One thread per output: blocks of (columns, rows) over (output columns, output rows,
   planes), the rows and planes beyond the grid walked in a loop. KIND 0 max, 1 average,
   2 Lp. */
template <typename D, int KIND>
__device__ __forceinline__ void pool_impl(const void* x, void* y, i64 planes, int H, int W,
    int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int PHE, int PWE, int DH,
    int DW, int p, int include_pad) {
    const int ow = blockIdx.x * blockDim.x + threadIdx.x;
    if (ow >= OW) return;
    const int w0 = ow * SW - PW;
    int vw = 0, pw = 0;
    if (KIND == 1) {
        for (int k = 0; k < KW; ++k) {
            int c = w0 + k * DW;
            vw += c >= 0 && c < W;
            pw += c >= -PW && c < W + PWE;
        }
    }
    for (i64 pl = blockIdx.z; pl < planes; pl += gridDim.z) {
        const i64 base = pl * (i64)H * W;
        for (int oh = blockIdx.y * blockDim.y + threadIdx.y; oh < OH; oh += gridDim.y * blockDim.y) {
            const int h0 = oh * SH - PH;
            float acc = KIND == 0 ? -__int_as_float(0x7f800000) : 0.0f;
            int vh = 0, ph = 0;
            for (int kh = 0; kh < KH; ++kh) {
                const int ih = h0 + kh * DH;
                if (KIND == 1) ph += ih >= -PH && ih < H + PHE;
                if (ih < 0 || ih >= H) continue;
                vh += 1;
                const i64 row = base + (i64)ih * W;
                for (int kw = 0; kw < KW; ++kw) {
                    const int iw = w0 + kw * DW;
                    if (iw < 0 || iw >= W) continue;
                    const float v = LOAD(D, x, row + iw);
                    if (KIND == 0) acc = v > acc ? v : acc;
                    else if (KIND == 1) acc += v;
                    else if (p == 1) acc += fabsf(v);
                    else if (p == 2) acc += v * v;
                    else acc += powf(fabsf(v), (float)p);
                }
            }
            if (KIND == 1) {
                const int count = include_pad ? ph * pw : vh * vw;
                acc = count == 0 ? 0.0f : acc / (float)count;
            } else if (KIND == 2) {
                acc = p == 1 ? acc : p == 2 ? sqrtf(acc) : powf(acc, 1.0f / (float)p);
            }
            STORE(D, y, (pl * OH + oh) * OW + ow, acc);
        }
    }
}
#define POOL_KIND(S, D, NAME, KIND) extern "C" __global__ void pool2d_##NAME##_##S(const void* x, \
    void* y, i64 planes, int H, int W, int OH, int OW, int KH, int KW, int SH, int SW, int PH, \
    int PW, int PHE, int PWE, int DH, int DW, int p, int include_pad) { \
    pool_impl<D, KIND>(x, y, planes, H, W, OH, OW, KH, KW, SH, SW, PH, PW, PHE, PWE, DH, DW, \
        p, include_pad); }
#define POOL(S, D) POOL_KIND(S, D, max, 0) POOL_KIND(S, D, avg, 1) POOL_KIND(S, D, lp, 2)
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
    let kind = match l.kind {
        PoolKind::Max => "max",
        PoolKind::Average => "avg",
        PoolKind::Lp { .. } => "lp",
    };
    Some(
        ctx.programs
            .function(&PROGRAM.source(), &format!("pool2d_{kind}_{suffix}"))
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
        if planes * ohw[0] * ohw[1] == 0 {
            return Ok(());
        }
        let p = match l.kind {
            PoolKind::Lp { p } => p,
            PoolKind::Max | PoolKind::Average => 0,
        };
        let mut args = KernelArgs::new()
            .ptr(inputs[0].ptr)
            .ptr(outputs[0].ptr)
            .i64(planes as i64);
        for v in [hw, ohw, k, s, pb, pe, d].concat() {
            args = args.i32(arg_i32(v, WHAT)?);
        }
        let mut args = args
            .i32(i32::try_from(p).map_err(|_| format!("{WHAT}: p = {p}"))?)
            .i32(i32::from(l.count_include_pad));
        let threads = (ohw[1].next_power_of_two() as u32).clamp(32, THREADS);
        let rows = (THREADS / threads).min(ohw[0].next_power_of_two() as u32);
        let grid = (
            ohw[1].div_ceil(threads as usize) as u32,
            ohw[0].div_ceil(rows as usize).min(65_535) as u32,
            planes.min(65_535) as u32,
        );
        // SAFETY: the arguments match `pool2d_*`; the tensors hold the checked shapes.
        unsafe {
            self.f
                .launch(stream, grid, (threads, rows, 1), 0, &mut args)
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
