//! Implicit-GEMM convolution on tensor cores (sm_80+, f16/bf16, one group, input channels a
//! multiple of [`BK`]) writing NCHW with bias, residual and activation fused:
//! `y[m, col] = act(Σ_k w[m, k] · x̂[k, col] + b[m] + r[m, col])`, where a column is an output
//! position of any image (`image·OH·OW + p`) and `k = (tap, channel)` runs over the taps of
//! the window, channels innermost. The input is first copied channels last, so that the
//! [`BK`] channels of one tap at one pixel are 64 contiguous bytes; a block of eight warps
//! then computes a tile of output channels × columns ([`TILES`]), the weights (packed tap by
//! tap at prepare time, [`taps_major`]) and the input pixels streaming through [`STAGES`]
//! shared-memory buffers by `cp.async` (zeros where a window leaves the image) ahead of the
//! `mma.m16n8k16` products; no im2col matrix or product reaches global memory.

use torchtrt_plugin_api::DType;

use super::PrepareCtx;
use super::epilogue::{ACTIVATIONS, Epilogue};
use super::mma::TENSOR_CORES;
use super::operands::{Weights, arg_i32};
use super::prelude::{Program, with_prelude};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

/// Channels per step: the input channel count must be a multiple.
pub(super) const BK: usize = 32;
const THREADS: u32 = 256;

static PROGRAM: Program = Program::new("core_implicit_gemm", || {
    let mut entries = String::new();
    for (dt, tag, bf) in [("f16", "F16", 0), ("bf16", "BF16", 1)] {
        for (mt, nt) in TILES {
            entries.push_str(&format!(
                "extern \"C\" __global__ void __launch_bounds__(256, 2) {}(IG_PARAMS) \
                 {{ igemm<{tag}, {bf}, {mt}, {nt}, {STAGES}>(IG_ARGS); }}\n",
                entry(dt, (mt, nt))
            ));
        }
    }
    with_prelude(&format!(
        "{TENSOR_CORES}{ACTIVATIONS}#define IG_BK {BK}\n{BODY}{entries}"
    ))
});

/// Tile shapes, largest first, as (m-tiles, n-tiles) of a warp: a block's tile is
/// `32·mt` output channels × `32·nt` columns.
const TILES: [(usize, usize); 3] = [(4, 4), (2, 4), (2, 2)];

/// Steps of the reduction in flight: shared-memory buffers of a block.
const STAGES: usize = 4;

/// The entry point of a dtype suffix and a tile.
fn entry(dt: &str, (mt, nt): (usize, usize)) -> String {
    format!("igemm_{dt}_{}x{}", 32 * mt, 32 * nt)
}

/// Dynamic shared memory of a block of `tile`: [`STAGES`] buffers of its weight and input
/// tiles, rows of [`BK`] + 8 elements.
fn shared_bytes((mt, nt): (usize, usize)) -> u32 {
    (STAGES * 32 * (mt + nt) * (BK + 8) * 2) as u32
}

const BODY: &str = r#"
#define IG_PARAMS const u16* x, const u16* w, const void* bias, const void* res, u16* y, \
    int C, int H, int W, int M, int OH, int OW, int KH, int KW, int sh, int sw, int ph, \
    int pw, int dh, int dw, int cols, int m_tiles, int pairs, int nhwc, int code, float p0, \
    float p1
#define IG_ARGS x, w, bias, res, y, C, H, W, M, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, cols, \
    m_tiles, pairs, nhwc, code, p0, p1
#define IG_P (IG_BK + 8)

/* x [N, C, HW] → y [N, HW, C] through 32 × 32 tiles in shared memory. */
__device__ __forceinline__ void to_channels_last(const u16* x, u16* y, int C, int HW) {
    __shared__ u16 tile[32][34];
    const int p0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
    const u16* xs = x + (i64)blockIdx.z * C * HW;
    u16* ys = y + (i64)blockIdx.z * C * HW;
    for (int i = threadIdx.y; i < 32; i += 8) {
        int c = c0 + i, p = p0 + threadIdx.x;
        if (c < C && p < HW) tile[i][threadIdx.x] = xs[(i64)c * HW + p];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
        int p = p0 + i, c = c0 + threadIdx.x;
        if (c < C && p < HW) ys[(i64)p * C + c] = tile[threadIdx.x][i];
    }
}

extern "C" __global__ void __launch_bounds__(256) igemm_channels_last(const u16* x, u16* y,
    int C, int HW) {
    to_channels_last(x, y, C, HW);
}

/* The epilogue into y [N, OH·OW, M] (`at`: each column's first element): the threads of rows
   g and g ^ 1 (lanes four apart) swap one of their two columns, so that each holds two
   neighbouring channels of one column and, with `pairs` (M even, y and res 4-byte aligned),
   writes them as one word. */
template <typename D, int BF, int MT, int NT>
__device__ __forceinline__ void igemm_store_nhwc(float (&acc)[MT][NT][4], const i64 (&at)[NT][2],
    const bool (&ok)[NT][2], const void* bias, const void* res, u16* y, int M, int mb, int g,
    int pairs, int code, float p0, float p1) {
    const int odd = g & 1;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int m = mb + mt * 16 + g + 8 * hr, lo = m - odd;
            const float bm = bias && m < M ? LOAD(D, bias, m) : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                float v0 = acc[mt][nt][2 * hr] + bm, v1 = acc[mt][nt][2 * hr + 1] + bm;
                float got = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
                float v[2] = {odd ? got : v0, odd ? v1 : got};
                if (!(odd ? ok[nt][1] : ok[nt][0]) || lo >= M) continue;
                const i64 e = (odd ? at[nt][1] : at[nt][0]) + lo;
                const bool two = lo + 1 < M;
                if (res) {
                    v[0] += LOAD(D, res, e);
                    if (two) v[1] += LOAD(D, res, e + 1);
                }
                if (pairs && two) {
                    *(unsigned*)(y + e) =
                        tc_pack<BF>(act(v[0], code, p0, p1), act(v[1], code, p0, p1));
                } else {
                    STORE(D, y, e, act(v[0], code, p0, p1));
                    if (two) STORE(D, y, e + 1, act(v[1], code, p0, p1));
                }
            }
        }
}

/* y = act(w ⋆ x + bias + res) from x [N, H·W, C] (channels last), y and res [N, M, OH·OW]
   (NCHW) or, with `nhwc`, [N, OH·OW, M]. A
   block of eight warps (2 × 4) owns BM = 32·MT output channels × BN = 32·NT columns, a warp
   MT m-tiles of 16 × NT n-tiles of 8; steps of IG_BK channels of one tap stream through
   STAGES buffers of shared memory by `cp.async` (16 bytes: eight channels of a weight row or
   of an input pixel, zeros where the window leaves the image), STAGES − 1 steps ahead of the
   `mma.m16n8k16` products. */
template <typename D, int BF, int MT, int NT, int STAGES>
__device__ __forceinline__ void igemm(IG_PARAMS) {
#if __CUDA_ARCH__ >= 800
    constexpr int BM = 32 * MT, BN = 32 * NT, A_CH = BM / 64, B_CH = BN / 64;
    extern __shared__ __align__(16) u16 smem[];
    u16 (*as)[BM][IG_P] = reinterpret_cast<u16 (*)[BM][IG_P]>(smem);
    u16 (*bs)[BN][IG_P] = reinterpret_cast<u16 (*)[BN][IG_P]>(smem + STAGES * BM * IG_P);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp >> 2, wn = warp & 3, mat = lane >> 3;
    const int m0 = (blockIdx.x % m_tiles) * BM, n0 = (blockIdx.x / m_tiles) * BN;
    const int HW = H * W, OHW = OH * OW, K = KH * KW * C, steps = K / IG_BK;
    const int part = (tid & 3) * 8, row0 = tid >> 2;

    /* The columns this thread copies (rows row0 + 64·i of the tile): the corner of each one's
       window and its image. */
    const u16* xb[B_CH];
    int ih0[B_CH], iw0[B_CH];
    bool cok[B_CH];
#pragma unroll
    for (int i = 0; i < B_CH; ++i) {
        int col = n0 + row0 + 64 * i, img = 0, pos = 0;
        cok[i] = col < cols;
        if (cok[i]) {
            img = col / OHW;
            pos = col - img * OHW;
        }
        int oh = pos / OW;
        ih0[i] = oh * sh - ph;
        iw0[i] = (pos - oh * OW) * sw - pw;
        xb[i] = x + (i64)img * HW * C + part;
    }
    const u16* wb[A_CH];
    bool rok[A_CH];
#pragma unroll
    for (int i = 0; i < A_CH; ++i) {
        rok[i] = m0 + row0 + 64 * i < M;
        wb[i] = w + (rok[i] ? (i64)(m0 + row0 + 64 * i) * K : 0) + part;
    }

    int c0 = 0, r = 0, s = 0;
    auto load = [&](int kt, int st) {
#pragma unroll
        for (int i = 0; i < A_CH; ++i)
            tc_copy16(&as[st][row0 + 64 * i][part], wb[i] + kt * IG_BK, rok[i]);
#pragma unroll
        for (int i = 0; i < B_CH; ++i) {
            int ih = ih0[i] + r * dh, iw = iw0[i] + s * dw;
            bool ok = cok[i] && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
            tc_copy16(&bs[st][row0 + 64 * i][part], ok ? xb[i] + (ih * W + iw) * C + c0 : x, ok);
        }
        c0 += IG_BK;
        if (c0 == C) {
            c0 = 0;
            if (++s == KW) { s = 0; ++r; }
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int b = 0; b < NT; ++b) acc[a][b][0] = acc[a][b][1] = acc[a][b][2] = acc[a][b][3] = 0.0f;

#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        if (st < steps) load(st, st);
        tc_commit();
    }
    for (int kt = 0; kt < steps; ++kt) {
        tc_wait_group<STAGES - 2>();
        __syncthreads();
        const int next = kt + STAGES - 1, st = kt % STAGES;
        if (next < steps) load(next, next % STAGES);
        tc_commit();
#pragma unroll
        for (int kk = 0; kk < IG_BK / 16; ++kk) {
            unsigned b[NT][2];
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {
                unsigned f[4];
                tc_ldmatrix<0>(f, &bs[st][wn * 8 * NT + (2 * np + (mat >> 1)) * 8 + (lane & 7)][kk * 16 + (mat & 1) * 8]);
                b[2 * np][0] = f[0];
                b[2 * np][1] = f[1];
                b[2 * np + 1][0] = f[2];
                b[2 * np + 1][1] = f[3];
            }
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                unsigned a[4];
                tc_ldmatrix<0>(a, &as[st][wm * 16 * MT + mt * 16 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) tc_mma<BF>(acc[mt][nt], a, b[nt][0], b[nt][1]);
            }
        }
    }

    /* Each thread holds columns 2t, 2t + 1 of eight-column tiles: both in one image when
       OH·OW is even, so `pairs` writes them as one word. */
    i64 at[NT][2];
    bool ok[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int c = n0 + wn * 8 * NT + nt * 8 + 2 * t + h;
            ok[nt][h] = c < cols;
            int im = ok[nt][h] ? c / OHW : 0;
            at[nt][h] = nhwc ? (i64)c * M : (i64)im * M * OHW + (c - im * OHW);
        }
    if (nhwc) {
        igemm_store_nhwc<D, BF, MT, NT>(acc, at, ok, bias, res, y, M, m0 + wm * 16 * MT, g,
                                        pairs, code, p0, p1);
        return;
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            int m = m0 + wm * 16 * MT + mt * 16 + g + 8 * hr;
            if (m >= M) continue;
            float bm = bias ? LOAD(D, bias, m) : 0.0f;
            i64 row = (i64)m * OHW;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                float v[2] = {acc[mt][nt][2 * hr] + bm, acc[mt][nt][2 * hr + 1] + bm};
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    if (res && ok[nt][h]) v[h] += LOAD(D, res, at[nt][h] + row);
                if (pairs && ok[nt][1]) {
                    *(unsigned*)(y + at[nt][0] + row) =
                        tc_pack<BF>(act(v[0], code, p0, p1), act(v[1], code, p0, p1));
                } else {
#pragma unroll
                    for (int h = 0; h < 2; ++h)
                        if (ok[nt][h]) STORE(D, y, at[nt][h] + row, act(v[h], code, p0, p1));
                }
            }
        }
#endif
}
"#;

/// The weights `[M, C, KH·KW]` of 16-bit elements (as bytes) reordered to `[M, KH·KW, C]`:
/// each output channel's row runs tap by tap, the channels of a tap together.
pub(super) fn taps_major(bytes: &[u8], m: usize, c: usize, taps: usize) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len()];
    for o in 0..m {
        for ch in 0..c {
            for tap in 0..taps {
                let from = ((o * c + ch) * taps + tap) * 2;
                let to = ((o * taps + tap) * c + ch) * 2;
                out[to..to + 2].copy_from_slice(&bytes[from..from + 2]);
            }
        }
    }
    out
}

/// Whether the kernel runs a convolution of `dtype` with `groups` and constant `weights`
/// (`[M, C, *window]`) on a device of compute capability `cc`: f16 or bf16, one group,
/// sm_80 or newer, input channels a multiple of [`BK`].
pub(crate) fn takes(
    dtype: DType,
    groups: i64,
    weights: Option<&torchtrt_core::tensor::Tensor>,
    cc: (u32, u32),
) -> bool {
    let Some(shape) = weights.map(|w| w.shape()) else {
        return false;
    };
    matches!(dtype, DType::F16 | DType::BF16)
        && groups == 1
        && cc >= (8, 0)
        && shape.len() >= 3
        && shape[1] > 0
        && shape[1].is_multiple_of(BK)
}

/// Sizes of one run: images, input channels and size, output channels and size, window,
/// stride, padding at the start and dilation (`[h, w]` pairs).
pub(super) struct Problem {
    pub n: usize,
    pub c: usize,
    pub input: [usize; 2],
    pub m: usize,
    pub output: [usize; 2],
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dilation: [usize; 2],
}

/// The tensor-core convolution of one layer: its entry points (by tile), the
/// channels-last copy of the input, packed weights and fused activation.
pub(super) struct ImplicitGemm {
    functions: Vec<Function>,
    channels_last: Function,
    weights: Weights,
    epilogue: Epilogue,
    /// The device's multiprocessors, which the tile choice keeps busy.
    sms: usize,
}

impl ImplicitGemm {
    /// The kernel for a convolution of `dtype` whose constant `weights` are
    /// `[M, C, *window]` (one group), `None` where it does not apply: not f16/bf16, a device
    /// below sm_80, input channels not a multiple of [`BK`].
    pub(super) fn prepare(
        ctx: &PrepareCtx<'_>,
        dtype: DType,
        groups: i64,
        weights: Option<&torchtrt_core::tensor::Tensor>,
        epilogue: Epilogue,
    ) -> Option<Result<ImplicitGemm, String>> {
        let dt = match dtype {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            _ => return None,
        };
        let w = weights?;
        if !takes(dtype, groups, Some(w), ctx.device.compute_capability()) {
            return None;
        }
        let shape = w.shape();
        let (m, c) = (shape[0], shape[1]);
        let taps: usize = shape[2..].iter().product();
        Some((|| {
            let load = |name: &str| {
                ctx.programs
                    .function(&PROGRAM.source(), name)
                    .map_err(|e| format!("Convolution: loading {name}: {e}"))
            };
            let functions = TILES
                .iter()
                .map(|&t| {
                    let f = load(&entry(dt, t))?;
                    f.allow_shared(shared_bytes(t))
                        .map_err(|e| format!("Convolution: {e}"))?;
                    Ok(f)
                })
                .collect::<Result<_, String>>()?;
            let sms = ctx
                .device
                .multiprocessors()
                .map_err(|e| format!("Convolution: {e}"))?;
            let packed = taps_major(w.bytes(), m, c, taps);
            Ok(ImplicitGemm {
                functions,
                channels_last: load("igemm_channels_last")?,
                weights: Weights::upload_bytes(ctx.device, &packed, "Convolution")?,
                epilogue,
                sms: sms as usize,
            })
        })())
    }

    /// Queues the convolution of `x` into `y` (`bias`, `res` may be 0: absent), all NCHW or,
    /// with `channels_last`, NHWC; `Ok(false)` without queueing anything when the sizes
    /// exceed the kernel's 32-bit indexing.
    pub(super) fn run(
        &self,
        p: &Problem,
        channels_last: bool,
        [x, bias, res, y]: [u64; 4],
        stream: &Stream,
    ) -> Result<bool, String> {
        let what = "Convolution";
        let hw = p.input[0] * p.input[1];
        let ohw = p.output[0] * p.output[1];
        let fits = |v: Option<usize>| v.is_some_and(|v| i32::try_from(v).is_ok());
        let Some(cols) = p.n.checked_mul(ohw).filter(|&c| fits(Some(c))) else {
            return Ok(false);
        };
        if !fits(p.c.checked_mul(hw))
            || !fits(p.m.checked_mul(ohw))
            || !fits(Some(p.kernel[0] * p.kernel[1] * p.c))
        {
            return Ok(false);
        }
        let (tile, blocks, m_tiles) = choose_tile(p.m, cols, self.sms);
        let Some(blocks) = u32::try_from(blocks).ok().filter(|&b| b < i32::MAX as u32) else {
            return Ok(false);
        };
        let paired = if channels_last { p.m } else { ohw };
        let pairs = paired.is_multiple_of(2) && y % 4 == 0 && res % 4 == 0;
        let i = |v: usize| arg_i32(v, what);
        if channels_last {
            if x % 16 != 0 {
                return Err(format!(
                    "{what}: a channels-last input must be 16-byte aligned"
                ));
            }
            return self.launch(
                p,
                [x, bias, res, y],
                (cols, m_tiles, blocks),
                pairs,
                true,
                tile,
                stream,
            );
        }
        let grid = (
            u32::try_from(hw.div_ceil(32)).map_err(|_| format!("{what}: {hw} positions"))?,
            u32::try_from(p.c / 32).map_err(|_| format!("{what}: {} channels", p.c))?,
            u32::try_from(p.n).map_err(|_| format!("{what}: {} images", p.n))?,
        );
        if grid.1 > 65_535 || grid.2 > 65_535 {
            return Ok(false);
        }
        let nhwc = stream
            .device()
            .allocator()
            .alloc(p.n * p.c * hw * 2)
            .map_err(|e| format!("{what}: channels-last scratch: {e}"))?;
        let mut args = KernelArgs::new()
            .ptr(x)
            .ptr(nhwc.ptr())
            .i32(i(p.c)?)
            .i32(i(hw)?);
        // SAFETY: the arguments match `igemm_channels_last`; x holds `[N, C, HW]` and the
        // scratch as many elements.
        unsafe {
            self.channels_last
                .launch(stream, grid, (32, 8, 1), 0, &mut args)
        }
        .map_err(|e| format!("{what}: {e}"))?;
        let done = self.launch(
            p,
            [nhwc.ptr(), bias, res, y],
            (cols, m_tiles, blocks),
            pairs,
            false,
            tile,
            stream,
        );
        drop(nhwc);
        done
    }

    /// Launches the tile's kernel over `x` channels last into `y` (NCHW, or NHWC with
    /// `nhwc`) on a grid of `blocks` blocks, `m_tiles` of them along the channels.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        p: &Problem,
        [x, bias, res, y]: [u64; 4],
        (cols, m_tiles, blocks): (usize, usize, u32),
        pairs: bool,
        nhwc: bool,
        tile: usize,
        stream: &Stream,
    ) -> Result<bool, String> {
        let what = "Convolution";
        let i = |v: usize| arg_i32(v, what);
        let mut args = KernelArgs::new()
            .ptr(x)
            .ptr(self.weights.ptr())
            .ptr(bias)
            .ptr(res)
            .ptr(y);
        for v in [p.c, p.input[0], p.input[1], p.m, p.output[0], p.output[1]]
            .into_iter()
            .chain(p.kernel)
            .chain(p.stride)
            .chain(p.pad)
            .chain(p.dilation)
        {
            args = args.i32(i(v)?);
        }
        let mut args = args
            .i32(i(cols)?)
            .i32(i(m_tiles)?)
            .i32(i32::from(pairs))
            .i32(i32::from(nhwc))
            .i32(self.epilogue.code)
            .f32(self.epilogue.p0)
            .f32(self.epilogue.p1);
        // SAFETY: the arguments match `igemm_*`; the caller checked that y (and res) hold the
        // problem's shape in their layout and bias its M values, x is channels last; the
        // packed weights are `[M, taps·C]` with C a multiple of BK; every index fits 32 bits
        // (checked above); the shared memory is the tile's, allowed at prepare.
        unsafe {
            self.functions[tile].launch(
                stream,
                (blocks, 1, 1),
                (THREADS, 1, 1),
                shared_bytes(TILES[tile]),
                &mut args,
            )
        }
        .map_err(|e| format!("{what}: {e}"))?;
        Ok(true)
    }
}

/// The tile for `m` output channels × `cols` columns on `sms` multiprocessors: the largest
/// not taller than `m` rounded up to 64 that gives at least two blocks a multiprocessor, the
/// smallest otherwise; returns its index in [`TILES`], the block count and the blocks along
/// the channels.
fn choose_tile(m: usize, cols: usize, sms: usize) -> (usize, usize, usize) {
    let count = |(mt, nt): (usize, usize)| {
        let m_tiles = m.div_ceil(32 * mt);
        (m_tiles.saturating_mul(cols.div_ceil(32 * nt)), m_tiles)
    };
    let last = TILES.len() - 1;
    let tile = (0..last)
        .find(|&i| 32 * TILES[i].0 <= m.next_multiple_of(64) && count(TILES[i]).0 >= 2 * sms)
        .unwrap_or(last);
    let (blocks, m_tiles) = count(TILES[tile]);
    (tile, blocks, m_tiles)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&PROGRAM);
    }

    #[test]
    fn tiles_shrink_until_the_multiprocessors_are_busy() {
        assert_eq!(choose_tile(256, 32 * 3136, 132), (0, 2 * 784, 2));
        assert_eq!(choose_tile(512, 32 * 196, 132), (1, 8 * 49, 8));
        assert_eq!(choose_tile(512, 32 * 49, 132), (2, 8 * 25, 8));
        assert_eq!(choose_tile(64, 49, 132), (2, 1, 1));
        assert_eq!(choose_tile(64, 32 * 3136, 132), (1, 784, 1));
        assert_eq!(choose_tile(64, 0, 132).1, 0);
    }

    #[test]
    fn taps_major_puts_a_taps_channels_together() {
        let (m, c, taps) = (3, 5, 4);
        let src: Vec<u16> = (0..(m * c * taps) as u16).collect();
        let bytes: Vec<u8> = src.iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = taps_major(&bytes, m, c, taps);
        let got: Vec<u16> = out
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        for o in 0..m {
            for ch in 0..c {
                for tap in 0..taps {
                    assert_eq!(
                        got[(o * taps + tap) * c + ch],
                        src[(o * c + ch) * taps + tap],
                        "m {o} c {ch} tap {tap}"
                    );
                }
            }
        }
    }
}
