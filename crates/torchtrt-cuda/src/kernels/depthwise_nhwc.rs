//! Depthwise convolution channels last: `x [N, H, W, C]` with one filter per channel
//! (`w [C, 1, K, K]`, groups = C), square 3×3, 5×5 and 7×7 windows at stride 1 or 2 without
//! dilation. A thread computes [`COLUMNS`] adjacent output columns of one row for `V`
//! adjacent channels (one 16-byte load per input pixel: 8 channels of f16/bf16, 4 of f32),
//! sliding along the input row so that each load serves every output column whose window
//! covers it, in f32 (where the channel count or a pointer does not align to that, a thread
//! computes one output element); bias, residual (`y`'s shape) and activation are applied as
//! it writes. Neighbouring threads take neighbouring channels, so a warp's loads are
//! contiguous. Constant weights are stored once as `[K·K, C]`, each tap's channels one load;
//! weights given at run time are read as they are, a thread per output element.

use torchtrt_core::layers::{Convolution, InferInput};
use torchtrt_plugin_api::DType;

use super::PrepareCtx;
use super::epilogue::{ACTIVATIONS, Epilogue};
use super::operands::{Weights, arg_i32, grid_for};
use super::prelude::{Program, dtype_suffix, with_prelude};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Convolution (depthwise, channels last)";
const THREADS: u32 = 256;
/// Output columns a thread computes.
pub(super) const COLUMNS: usize = 4;
/// The windows and strides the kernel is built for.
const WINDOWS: [usize; 3] = [3, 5, 7];
const STRIDES: [usize; 2] = [1, 2];

static PROGRAM: Program = Program::new("core_depthwise_nhwc", || {
    let cases: String = WINDOWS
        .iter()
        .flat_map(|&k| {
            STRIDES
                .iter()
                .map(move |&s| format!("DWN_CASE(Sx, D, {k}, {s}) "))
        })
        .collect();
    with_prelude(&format!(
        "#define DWN_TW {COLUMNS}\n#define DWN_CASES(Sx, D) {cases}\n{ACTIVATIONS}{BODY}"
    ))
});

const BODY: &str = r#"

/* V = Lanes<D>::V channels a thread. Items (n, oh, column tile, channel group) flattened,
   channel groups fastest. The weights are the [K·K, C] copy: tap t of channel c at
   w[t·C + c], each tap's V channels one load. */
template <typename D, int K, int S, int V>
__device__ __forceinline__ void dw_nhwc(const void* x, const void* w, const void* bias,
    const void* res, void* y, int H, int W, int C, int OH, int OW, int PH, int PW, i64 items,
    int code, float p0, float p1) {
    const int TW = DWN_TW, NV = (TW - 1) * S + K;
    const int CG = C / V, OWT = (OW + TW - 1) / TW;
    for (i64 it = blockIdx.x * (i64)blockDim.x + threadIdx.x; it < items;
         it += (i64)gridDim.x * blockDim.x) {
        i64 r = it / CG;
        const int c = (int)(it - r * CG) * V;
        const i64 r2 = r / OWT;
        const int ow0 = (int)(r - r2 * OWT) * TW;
        const i64 n = r2 / OH;
        const int oh = (int)(r2 - n * OH);
        const int ih0 = oh * S - PH, iw0 = ow0 * S - PW;
        float acc[TW][V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const float b = bias ? LOAD(D, bias, c + j) : 0.0f;
#pragma unroll
            for (int t = 0; t < TW; ++t) acc[t][j] = b;
        }
#pragma unroll
        for (int kh = 0; kh < K; ++kh) {
            const int ih = ih0 + kh;
            if ((unsigned)ih >= (unsigned)H) continue;
            float wr[K][V];
#pragma unroll
            for (int kw = 0; kw < K; ++kw) Lanes<D>::load(w, (i64)(kh * K + kw) * C + c, wr[kw]);
            const i64 row = ((n * H + ih) * W) * (i64)C + c;
#pragma unroll
            for (int q = 0; q < NV; ++q) {
                const int iw = iw0 + q;
                float v[V];
                if ((unsigned)iw < (unsigned)W) {
                    Lanes<D>::load(x, row + (i64)iw * C, v);
                } else {
#pragma unroll
                    for (int j = 0; j < V; ++j) v[j] = 0.0f;
                }
#pragma unroll
                for (int t = 0; t < TW; ++t) {
                    const int kw = q - t * S;
                    if (kw >= 0 && kw < K) {
#pragma unroll
                        for (int j = 0; j < V; ++j) acc[t][j] = fmaf(v[j], wr[kw][j], acc[t][j]);
                    }
                }
            }
        }
#pragma unroll
        for (int t = 0; t < TW; ++t) {
            if (ow0 + t >= OW) break;
            const i64 o = ((n * OH + oh) * OW + ow0 + t) * (i64)C + c;
            float rv[V];
            if (res) {
                Lanes<D>::load(res, o, rv);
            } else {
#pragma unroll
                for (int j = 0; j < V; ++j) rv[j] = 0.0f;
            }
#pragma unroll
            for (int j = 0; j < V; ++j) acc[t][j] = act(acc[t][j] + rv[j], code, p0, p1);
            Lanes<D>::store(y, (unsigned long long)o, acc[t]);
        }
    }
}

/* One output element per item ((n, oh, ow) then channel, channels fastest), for channel
   counts, pointers or weights the vector kernel does not take. The weights of tap t for
   channel c are at w[c·wc + t·wk]: wc = 1, wk = C for the [K·K, C] copy, wc = K·K, wk = 1
   as the layer's input. */
template <typename D>
__device__ __forceinline__ void dw_nhwc_any(const void* x, const void* w, const void* bias,
    const void* res, void* y, int H, int W, int C, int OH, int OW, int PH, int PW, i64 wc,
    i64 wk, i64 items, int K, int S, int code, float p0, float p1) {
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < items;
         e += (i64)gridDim.x * blockDim.x) {
        const i64 p = e / C;
        const int c = (int)(e - p * C);
        const i64 r = p / OW;
        const int ow = (int)(p - r * OW);
        const i64 n = r / OH;
        const int oh = (int)(r - n * OH);
        float acc = bias ? LOAD(D, bias, c) : 0.0f;
        for (int kh = 0; kh < K; ++kh) {
            const int ih = oh * S - PH + kh;
            if ((unsigned)ih >= (unsigned)H) continue;
            for (int kw = 0; kw < K; ++kw) {
                const int iw = ow * S - PW + kw;
                if ((unsigned)iw >= (unsigned)W) continue;
                acc = fmaf(LOAD(D, x, ((n * H + ih) * W + iw) * (i64)C + c),
                           LOAD(D, w, c * wc + (kh * K + kw) * wk), acc);
            }
        }
        if (res) acc += LOAD(D, res, e);
        STORE(D, y, e, act(acc, code, p0, p1));
    }
}

/* One entry point per window and stride, so that each is given the registers it needs (in
   one kernel with every case, all took the largest case's 174; 7×7 at stride 1 takes 162). */
#define DWN_ARGS const void* x, const void* w, const void* bias, const void* res, void* y, \
    int H, int W, int C, int OH, int OW, int PH, int PW, i64 wc, i64 wk, i64 items, int code, \
    float p0, float p1, int K, int S
#define DWN_CASE(Sx, D, KK, SS) extern "C" __global__ void __launch_bounds__(256) \
    conv_dw_nhwc_##Sx##_k##KK##s##SS(DWN_ARGS) { \
    dw_nhwc<D, KK, SS, Lanes<D>::V>(x, w, bias, res, y, H, W, C, OH, OW, PH, PW, items, code, \
        p0, p1); }
#define DW_NHWC(Sx, D) extern "C" __global__ void __launch_bounds__(256) \
    conv_dw_nhwc_any_##Sx(DWN_ARGS) { \
    dw_nhwc_any<D>(x, w, bias, res, y, H, W, C, OH, OW, PH, PW, wc, wk, items, K, S, code, p0, \
        p1); } \
    DWN_CASES(Sx, D)
FOR_EACH_DTYPE(DW_NHWC)
"#;

/// The window size and stride of a depthwise convolution the kernel takes (`l` over
/// `inputs`, which may be channels first or last: only the weights and parameters are read).
pub(super) fn window(l: &Convolution, inputs: &[InferInput<'_>]) -> Option<(usize, usize)> {
    let (x, w) = (inputs.first()?, inputs.get(1)?);
    let dims: Vec<usize> = w
        .shape
        .iter()
        .map(|d| d.as_const().and_then(|v| usize::try_from(v).ok()))
        .collect::<Option<_>>()?;
    let &[m, 1, k, kw] = dims.as_slice() else {
        return None;
    };
    let s = usize::try_from(*l.strides.first()?).ok()?;
    let float = matches!(x.dtype, DType::F32 | DType::F16 | DType::BF16);
    let fits = x.shape.len() == 4
        && float
        && inputs.iter().all(|i| i.dtype == x.dtype)
        && usize::try_from(l.groups) == Ok(m)
        && k == kw
        && WINDOWS.contains(&k)
        && STRIDES.contains(&s)
        && l.strides.iter().all(|&v| v == s as i64)
        && l.dilations.iter().all(|&d| d == 1)
        && l.pads_begin.iter().chain(&l.pads_end).all(|&p| p >= 0)
        && Epilogue::new(l.activation).is_some();
    fits.then_some((k, s))
}

/// Sizes of one channels-last run.
pub(super) struct Run {
    pub n: usize,
    pub input: [usize; 2],
    pub c: usize,
    pub output: [usize; 2],
    pub pad: [usize; 2],
}

/// The prepared kernel of one layer.
pub(super) struct DepthwiseNhwc {
    /// The kernel of this window and stride, for channels in vectors.
    vector: Function,
    /// The kernel of one output element a thread, for the rest.
    scalar: Function,
    size: usize,
    k: usize,
    stride: usize,
    epilogue: Epilogue,
    /// The constant weights as `[K·K, C]`.
    taps: Option<Weights>,
}

impl DepthwiseNhwc {
    /// The kernel for `l` over `inputs` (channels last) with the layer's `epilogue`, `None`
    /// where it does not apply.
    pub(super) fn prepare(
        l: &Convolution,
        inputs: &[InferInput<'_>],
        epilogue: Epilogue,
        ctx: &PrepareCtx<'_>,
    ) -> Option<Result<DepthwiseNhwc, String>> {
        let (k, stride) = window(l, inputs)?;
        let dtype = inputs[0].dtype;
        let suffix = dtype_suffix(dtype)?;
        Some((|| {
            let function = |name: String| {
                ctx.programs
                    .function(&PROGRAM.source(), &name)
                    .map_err(|e| format!("{WHAT}: loading {name}: {e}"))
            };
            let vector = function(format!("conv_dw_nhwc_{suffix}_k{k}s{stride}"))?;
            let scalar = function(format!("conv_dw_nhwc_any_{suffix}"))?;
            let taps = inputs[1]
                .value
                .map(|w| {
                    Weights::upload_bytes(
                        ctx.device,
                        &tap_major(w.bytes(), k * k, dtype.size()),
                        WHAT,
                    )
                })
                .transpose()?;
            Ok(DepthwiseNhwc {
                vector,
                scalar,
                size: dtype.size(),
                k,
                stride,
                epilogue,
                taps,
            })
        })())
    }

    /// Queues `y = act(conv(x, w) + bias + res)` (`bias`, `res` may be 0: absent).
    pub(super) fn run(
        &self,
        r: &Run,
        [x, w, bias, res, y]: [u64; 5],
        stream: &Stream,
    ) -> Result<(), String> {
        let i = |v: usize| arg_i32(v, WHAT);
        let vec_lanes = 16 / self.size;
        let vec = r.c.is_multiple_of(vec_lanes)
            && self.taps.as_ref().is_some_and(|t| t.ptr() % 16 == 0)
            && [x, y, res].iter().all(|p| p % 16 == 0);
        let pixels = r.n * r.output[0];
        let items = match vec {
            true => pixels * r.output[1].div_ceil(COLUMNS) * (r.c / vec_lanes),
            false => pixels * r.output[1] * r.c,
        };
        let kk = (self.k * self.k) as i64;
        let (wptr, wc, wk) = match &self.taps {
            Some(t) => (t.ptr(), 1, r.c as i64),
            None => (w, kk, 1),
        };
        for v in [
            r.n * r.input[0] * r.input[1],
            r.n * r.output[0] * r.output[1],
        ] {
            v.checked_mul(r.c)
                .filter(|&e| i64::try_from(e).is_ok())
                .ok_or_else(|| format!("{WHAT}: {v} positions of {} channels", r.c))?;
        }
        let mut args = KernelArgs::new().ptr(x).ptr(wptr).ptr(bias).ptr(res).ptr(y);
        for v in [
            r.input[0],
            r.input[1],
            r.c,
            r.output[0],
            r.output[1],
            r.pad[0],
            r.pad[1],
        ] {
            args = args.i32(i(v)?);
        }
        let mut args = args
            .i64(wc)
            .i64(wk)
            .i64(items as i64)
            .i32(self.epilogue.code)
            .f32(self.epilogue.p0)
            .f32(self.epilogue.p1)
            .i32(i(self.k)?)
            .i32(i(self.stride)?);
        let blocks = grid_for(items, THREADS);
        let function = if vec { &self.vector } else { &self.scalar };
        // SAFETY: the arguments match `conv_dw_nhwc_*` (`DWN_ARGS`); the caller checked that
        // x, y and res hold the shapes of `r` channels last and the weights `[C, 1, K, K]`.
        unsafe { function.launch(stream, (blocks, 1, 1), (THREADS, 1, 1), 0, &mut args) }
            .map_err(|e| format!("{WHAT}: {e}"))
    }
}

/// Weights `[C, 1, K·K]` (`taps` = K·K elements of `size` bytes per channel) as `[K·K, C]`.
fn tap_major(bytes: &[u8], taps: usize, size: usize) -> Vec<u8> {
    let channels = bytes.len() / (taps * size).max(1);
    let mut out = vec![0u8; bytes.len()];
    for ch in 0..channels {
        for t in 0..taps {
            let src = (ch * taps + t) * size;
            let dst = (t * channels + ch) * size;
            out[dst..dst + size].copy_from_slice(&bytes[src..src + size]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::tap_major;

    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }

    #[test]
    fn weights_become_tap_major() {
        let w: Vec<u8> = (0..2u16 * 9).flat_map(|v| v.to_le_bytes()).collect();
        let t = tap_major(&w, 9, 2);
        let at = |i: usize| u16::from_le_bytes([t[2 * i], t[2 * i + 1]]);
        assert_eq!((at(0), at(1), at(2), at(3), at(17)), (0, 9, 1, 10, 17));
    }
}
