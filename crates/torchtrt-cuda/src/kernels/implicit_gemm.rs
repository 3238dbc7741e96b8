//! Implicit-GEMM convolution on tensor cores (sm_80+, f16/bf16, one group, input channels a
//! multiple of [`BK`]) writing NCHW with bias, residual and activation fused:
//! `y[m, col] = act(Σ_k w[m, k] · x̂[k, col] + b[m] + r[m, col])`, where a column is an output
//! position of any image (`image·OH·OW + p`) and `k = (tap, channel)` runs over the taps of
//! the window, channels innermost. The input is first copied channels last, so that the
//! [`BK`] channels of one tap at one pixel are 64 contiguous bytes; a block of four or eight
//! warps then computes a tile of output channels × columns (one of [`TILES`], the fastest at
//! each run shape, timed on its first run), the weights (packed tap by tap at prepare time,
//! [`taps_major`]) and the input pixels streaming through [`STAGES`] shared-memory buffers by
//! `cp.async` (zeros where a window leaves the image) ahead of the `mma.m16n8k16` products;
//! no im2col matrix or product reaches global memory.

use std::collections::HashMap;
use std::sync::Mutex;

use torchtrt_core::layers::{InferInput, QuantizedConvolution};
use torchtrt_plugin_api::DType;

use super::PrepareCtx;
use super::conv_tactic::Tactic;
use super::epilogue::{ACTIVATIONS, Epilogue};
use super::mma::TENSOR_CORES;
use super::operands::{Weights, arg_i32};
use super::prelude::{Program, with_prelude};
use super::quantize::QUANTIZE_BYTE;
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;
use crate::timing;

/// Channels per step (16-bit elements, or pairs of bytes): the input channel count must be a
/// multiple.
pub(super) const BK: usize = 32;
const WHAT: &str = "Convolution";

static PROGRAM: Program = Program::new("core_implicit_gemm", || {
    let mut entries = String::new();
    for (dt, tag, bf) in [("f16", "F16", 0), ("bf16", "BF16", 1)] {
        for tile in TILES {
            entries.push_str(&tile.entry_point(dt, &format!("igemm<{tag}, {bf}")));
        }
    }
    source(&entries)
});

/// The 8-bit convolutions: signed or unsigned input bytes, f16 or f32 bias, residual and
/// output.
static PROGRAM_I8: Program = Program::new("core_implicit_gemm_i8", || {
    let mut entries = String::new();
    for (input, u) in [("s8", 0), ("u8", 1)] {
        for (dt, tag) in [("f16", "F16"), ("f32", "F32")] {
            for tile in TILES {
                let dt = format!("{input}_{dt}");
                entries.push_str(&tile.entry_point(&dt, &format!("igemm_i8<{tag}, {u}")));
            }
        }
    }
    source(&entries)
});

/// A program's source: the shared body, then its `entries`.
fn source(entries: &str) -> String {
    with_prelude(&format!(
        "{TENSOR_CORES}{ACTIVATIONS}{QUANTIZE_BYTE}#define IG_BK {BK}\n{BODY}{entries}"
    ))
}

/// A block's tile: a grid of warps (along the output channels, along the columns), each
/// computing `mt` m-tiles of 16 channels × `nt` n-tiles of 8 columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tile {
    warps: (usize, usize),
    mt: usize,
    nt: usize,
}

impl Tile {
    const fn new(warps: (usize, usize), mt: usize, nt: usize) -> Tile {
        Tile { warps, mt, nt }
    }

    /// Output channels of the block's tile.
    const fn rows(self) -> usize {
        self.warps.0 * 16 * self.mt
    }

    /// Columns of the block's tile.
    const fn cols(self) -> usize {
        self.warps.1 * 8 * self.nt
    }

    const fn threads(self) -> usize {
        32 * self.warps.0 * self.warps.1
    }

    /// The entry point of a dtype suffix.
    fn entry(self, dt: &str) -> String {
        let warps = self.warps.0 * self.warps.1;
        format!("igemm_{dt}_{}x{}_w{warps}", self.rows(), self.cols())
    }

    /// The source of the entry point of `dt` calling `call` (a template and its leading
    /// arguments) with the tile's: register bounds for two blocks of 256 threads a
    /// multiprocessor (four of 128).
    fn entry_point(self, dt: &str, call: &str) -> String {
        let (threads, (wm, wn), (mt, nt)) = (self.threads(), self.warps, (self.mt, self.nt));
        format!(
            "extern \"C\" __global__ void __launch_bounds__({threads}, {}) {}(IG_PARAMS) \
             {{ {call}, {wm}, {wn}, {mt}, {nt}, {STAGES}>(IG_ARGS); }}\n",
            512 / threads,
            self.entry(dt)
        )
    }

    /// Dynamic shared memory of a block: [`STAGES`] buffers of its weight and input tiles,
    /// rows of [`BK`] + 8 elements.
    const fn shared_bytes(self) -> u32 {
        (STAGES * (self.rows() + self.cols()) * (BK + 8) * 2) as u32
    }

    /// Blocks along the channels and in all for `m` channels × `cols` columns.
    fn blocks(self, m: usize, cols: usize) -> (usize, usize) {
        let m_tiles = m.div_ceil(self.rows());
        (m_tiles, m_tiles.saturating_mul(cols.div_ceil(self.cols())))
    }
}

/// The tiles, largest first: eight warps of 64 × 32 or 32 × 32, four of 64 × 32 or 32 × 32
/// (blocks of 128 or 64 channels × 128 or 64 columns).
const TILES: [Tile; 4] = [
    Tile::new((2, 4), 4, 4),
    Tile::new((2, 4), 2, 4),
    Tile::new((2, 2), 4, 4),
    Tile::new((2, 2), 2, 4),
];

/// Steps of the reduction in flight: shared-memory buffers of a block.
const STAGES: usize = 4;

const BODY: &str = r#"
#define IG_PARAMS const u16* x, const u16* w, const void* bias, const void* res, u16* y, \
    int C, int H, int W, int M, int OH, int OW, int KH, int KW, int sh, int sw, int ph, \
    int pw, int dh, int dw, int cols, int m_tiles, int pairs, int nhwc, int code, float p0, \
    float p1, const float* qscale, int qout, float qs, int qz
#define IG_ARGS x, w, bias, res, y, C, H, W, M, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, cols, \
    m_tiles, pairs, nhwc, code, p0, p1, qscale, qout, qs, qz
#define IG_LOOP_ARGS x, w, C, H, W, M, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, cols, m_tiles
#define IG_P (IG_BK + 8)

/* x [N, C, HW] → y [N, HW, C] through 32 × 32 tiles in shared memory. */
template <typename T>
__device__ __forceinline__ void to_channels_last(const T* x, T* y, int C, int HW) {
    __shared__ T tile[32][34];
    const int p0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
    const T* xs = x + (i64)blockIdx.z * C * HW;
    T* ys = y + (i64)blockIdx.z * C * HW;
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

extern "C" __global__ void __launch_bounds__(256) igemm_channels_last_u8(
    const unsigned char* x, unsigned char* y, int C, int HW) {
    to_channels_last(x, y, C, HW);
}

/* One tensor-core product step: f16 (OP 0) or bf16 (OP 1) pairs into floats, signed (OP 2)
   or unsigned (OP 3) byte quads of the input times signed weight bytes into 32-bit sums. */
template <int OP>
__device__ __forceinline__ void ig_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    tc_mma<OP>(c, a, b0, b1);
}
template <int OP>
__device__ __forceinline__ void ig_mma(int* c, const unsigned* a, unsigned b0, unsigned b1) {
    tc_imma<OP - 2>(c, a, b0, b1);
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

/* The products of one block's tile, from x [N, H·W, C] (channels last) and the packed
   weights [M, KH·KW·C], into `acc`: a block of WM × WN warps owns BM = WM·16·MT output
   channels × BN = WN·8·NT columns, a warp MT m-tiles of 16 × NT n-tiles of 8; steps of IG_BK
   channels of one tap stream through STAGES buffers of shared memory by `cp.async` (16
   bytes: eight channels of a weight row or of an input pixel, zeros where the window leaves
   the image), STAGES − 1 steps ahead of the products (`ig_mma<OP>`). Elements are 16-bit;
   8-bit operands run as pairs of bytes (C and the weight rows counted in pairs), whose
   fragments the byte products read in the same places. */
template <int OP, int WM, int WN, int MT, int NT, int STAGES, typename A>
__device__ __forceinline__ void igemm_products(A (&acc)[MT][NT][4], const u16* x, const u16* w,
    int C, int H, int W, int M, int OH, int OW, int KH, int KW, int sh, int sw, int ph, int pw,
    int dh, int dw, int cols, int m_tiles) {
    constexpr int ROWS = 8 * WM * WN, BM = WM * 16 * MT, BN = WN * 8 * NT;
    constexpr int A_CH = BM / ROWS, B_CH = BN / ROWS;
    static_assert(BM % ROWS == 0 && BN % ROWS == 0, "a tile's rows are whole copy passes");
    extern __shared__ __align__(16) u16 smem[];
    u16 (*as)[BM][IG_P] = reinterpret_cast<u16 (*)[BM][IG_P]>(smem);
    u16 (*bs)[BN][IG_P] = reinterpret_cast<u16 (*)[BN][IG_P]>(smem + STAGES * BM * IG_P);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wm = warp / WN, wn = warp % WN, mat = lane >> 3;
    const int m0 = (blockIdx.x % m_tiles) * BM, n0 = (blockIdx.x / m_tiles) * BN;
    const int HW = H * W, OHW = OH * OW, K = KH * KW * C, steps = K / IG_BK;
    const int part = (tid & 3) * 8, row0 = tid >> 2;

    /* The columns this thread copies (rows row0 + ROWS·i of the tile): the corner of each one's
       window and its image. */
    const u16* xb[B_CH];
    int ih0[B_CH], iw0[B_CH];
    bool cok[B_CH];
#pragma unroll
    for (int i = 0; i < B_CH; ++i) {
        int col = n0 + row0 + ROWS * i, img = 0, pos = 0;
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
        rok[i] = m0 + row0 + ROWS * i < M;
        wb[i] = w + (rok[i] ? (i64)(m0 + row0 + ROWS * i) * K : 0) + part;
    }

    int c0 = 0, r = 0, s = 0;
    auto load = [&](int kt, int st) {
#pragma unroll
        for (int i = 0; i < A_CH; ++i)
            tc_copy16(&as[st][row0 + ROWS * i][part], wb[i] + kt * IG_BK, rok[i]);
#pragma unroll
        for (int i = 0; i < B_CH; ++i) {
            int ih = ih0[i] + r * dh, iw = iw0[i] + s * dw;
            bool ok = cok[i] && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
            tc_copy16(&bs[st][row0 + ROWS * i][part], ok ? xb[i] + (ih * W + iw) * C + c0 : x, ok);
        }
        c0 += IG_BK;
        if (c0 == C) {
            c0 = 0;
            if (++s == KW) { s = 0; ++r; }
        }
    };

#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int b = 0; b < NT; ++b) acc[a][b][0] = acc[a][b][1] = acc[a][b][2] = acc[a][b][3] = 0;

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
                for (int nt = 0; nt < NT; ++nt) ig_mma<OP>(acc[mt][nt], a, b[nt][0], b[nt][1]);
            }
        }
    }
}

/* y = act(w ⋆ x + bias + res) from x [N, H·W, C] (channels last), y and res [N, M, OH·OW]
   (NCHW) or, with `nhwc`, [N, OH·OW, M]: the products of `igemm_products`, then the
   epilogue. */
template <typename D, int BF, int WM, int WN, int MT, int NT, int STAGES>
__device__ __forceinline__ void igemm(IG_PARAMS) {
#if __CUDA_ARCH__ >= 800
    constexpr int BM = WM * 16 * MT, BN = WN * 8 * NT;
    float acc[MT][NT][4];
    igemm_products<BF, WM, WN, MT, NT, STAGES>(acc, IG_LOOP_ARGS);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp / WN, wn = warp % WN;
    const int m0 = (blockIdx.x % m_tiles) * BM, n0 = (blockIdx.x / m_tiles) * BN;
    const int OHW = OH * OW;

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

/* The 8-bit convolution: x bytes (signed, or unsigned with U) channels last, weights signed
   bytes, both counted in pairs by C and the packed rows; the exact 32-bit sums of each output
   channel m scale by qscale[m] (input scale × the channel's weight scale) into D with the
   bias, the residual and the activation, into y [N, M, OH·OW] (or, with `nhwc`, [N, OH·OW,
   M], as the residual) as D or, with `qout` (1: I8, 2: U8), quantized by qs and qz as
   `Quantize` does. */
template <typename D, int U, int WM, int WN, int MT, int NT, int STAGES>
__device__ __forceinline__ void igemm_i8(IG_PARAMS) {
#if __CUDA_ARCH__ >= 800
    constexpr int BM = WM * 16 * MT, BN = WN * 8 * NT;
    int acc[MT][NT][4];
    igemm_products<2 + U, WM, WN, MT, NT, STAGES>(acc, IG_LOOP_ARGS);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp / WN, wn = warp % WN;
    const int m0 = (blockIdx.x % m_tiles) * BM, n0 = (blockIdx.x / m_tiles) * BN;
    const int OHW = OH * OW;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int m = m0 + wm * 16 * MT + mt * 16 + g + 8 * hr;
            if (m >= M) continue;
            const float sm = qscale[m], bm = bias ? LOAD(D, bias, m) : 0.0f;
            const i64 row = (i64)m * OHW;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int c = n0 + wn * 8 * NT + nt * 8 + 2 * t + h;
                    if (c >= cols) continue;
                    const int im = c / OHW;
                    const i64 e = nhwc ? (i64)c * M + m : (i64)im * M * OHW + (c - im * OHW) + row;
                    float v = (float)acc[mt][nt][2 * hr + h] * sm + bm;
                    if (res) v += LOAD(D, res, e);
                    v = act(v, code, p0, p1);
                    if (qout) ((unsigned char*)y)[e] = quantize_byte(v, qs, qz, qout == 1);
                    else STORE(D, y, e, v);
                }
        }
#endif
}
"#;

/// The weights `[M, C, KH·KW]` of `size`-byte elements reordered to `[M, KH·KW, C]`: each
/// output channel's row runs tap by tap, the channels of a tap together.
pub(super) fn taps_major(bytes: &[u8], m: usize, c: usize, taps: usize, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len()];
    for o in 0..m {
        for ch in 0..c {
            for tap in 0..taps {
                let from = ((o * c + ch) * taps + tap) * size;
                let to = ((o * taps + tap) * c + ch) * size;
                out[to..to + size].copy_from_slice(&bytes[from..from + size]);
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
    matches!(dtype, DType::F16 | DType::BF16) && fits(groups, weights, cc, BK)
}

/// Whether the kernel runs the 8-bit convolution `l` of `x` (its input) with constant
/// weights on a device of compute capability `cc`: 2-D, one group, sm_80 or newer, `I8` or
/// `U8` input with zero point 0, input channels a multiple of 2·[`BK`], an f16 or f32 float
/// type, an activation the epilogue fuses.
pub(crate) fn takes_int8(
    l: &QuantizedConvolution,
    x: &InferInput<'_>,
    weights: Option<&torchtrt_core::tensor::Tensor>,
    cc: (u32, u32),
) -> bool {
    matches!(x.dtype, DType::I8 | DType::U8)
        && x.shape.len() == 4
        && l.input_zero_point == 0
        && matches!(l.dtype, DType::F16 | DType::F32)
        && Epilogue::new(l.conv.activation).is_some()
        && l.output.is_none_or(|q| q.check().is_ok())
        && weights.is_some_and(|w| w.dtype() == DType::I8 && w.rank() == 4)
        && fits(l.conv.groups, weights, cc, 2 * BK)
}

/// One group, sm_80 or newer, constant weights `[M, C, …]` with C a multiple of `step`.
fn fits(
    groups: i64,
    weights: Option<&torchtrt_core::tensor::Tensor>,
    cc: (u32, u32),
    step: usize,
) -> bool {
    let Some(shape) = weights.map(|w| w.shape()) else {
        return false;
    };
    groups == 1 && cc >= (8, 0) && shape.len() >= 3 && shape[1] > 0 && shape[1].is_multiple_of(step)
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
    /// For an 8-bit convolution: its scales and output quantization.
    int8: Option<Int8>,
    /// The tile chosen per run shape (images, input height and width, channels last).
    tiles: Mutex<HashMap<[usize; 4], usize>>,
    /// The tile every run takes (`ConvTactic::Tile`), instead of timing.
    forced: Option<usize>,
}

/// What an 8-bit convolution adds to the float one.
struct Int8 {
    /// `input_scale · weight_scales[m]` per output channel, on the device.
    scales: Weights,
    /// The output's quantization: the kernel's code (0: none, 1: I8, 2: U8), scale and zero
    /// point.
    output: (i32, f32, i32),
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
        Some(Self::load(ctx, &PROGRAM, dt, w, epilogue, None))
    }

    /// The kernel for the 8-bit convolution `l` of `x` with constant `weights`, `None` where
    /// it does not apply ([`takes_int8`]).
    pub(super) fn prepare_int8(
        ctx: &PrepareCtx<'_>,
        l: &QuantizedConvolution,
        x: &InferInput<'_>,
        weights: Option<&torchtrt_core::tensor::Tensor>,
    ) -> Option<Result<ImplicitGemm, String>> {
        let w = weights.filter(|_| takes_int8(l, x, weights, ctx.device.compute_capability()))?;
        let input = if x.dtype == DType::U8 { "u8" } else { "s8" };
        let dt = if l.dtype == DType::F16 { "f16" } else { "f32" };
        let scales: Vec<u8> = l
            .weight_scales
            .iter()
            .flat_map(|s| (s * l.input_scale).to_le_bytes())
            .collect();
        let output = l.output.map_or((0, 1.0, 0), |q| {
            (
                if q.dtype == DType::I8 { 1 } else { 2 },
                q.scale,
                q.zero_point,
            )
        });
        let epilogue = Epilogue::new(l.conv.activation)?;
        Some((|| {
            let int8 = Int8 {
                scales: Weights::upload_bytes(ctx.device, &scales, WHAT)?,
                output,
            };
            Self::load(
                ctx,
                &PROGRAM_I8,
                &format!("{input}_{dt}"),
                w,
                epilogue,
                Some(int8),
            )
        })())
    }

    /// Loads the entry points of `program` for the type suffix `dt` and uploads the
    /// weights `w` packed tap by tap.
    fn load(
        ctx: &PrepareCtx<'_>,
        program: &'static Program,
        dt: &str,
        w: &torchtrt_core::tensor::Tensor,
        epilogue: Epilogue,
        int8: Option<Int8>,
    ) -> Result<ImplicitGemm, String> {
        let shape = w.shape();
        let (m, c) = (shape[0], shape[1]);
        let taps: usize = shape[2..].iter().product();
        let load = |name: &str| {
            ctx.programs
                .function(&program.source(), name)
                .map_err(|e| format!("{WHAT}: loading {name}: {e}"))
        };
        let functions = TILES
            .iter()
            .map(|&t| {
                let f = load(&t.entry(dt))?;
                f.allow_shared(t.shared_bytes())
                    .map_err(|e| format!("{WHAT}: {e}"))?;
                Ok(f)
            })
            .collect::<Result<_, String>>()?;
        let sms = ctx
            .device
            .multiprocessors()
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let packed = taps_major(w.bytes(), m, c, taps, w.dtype().size());
        let channels_last = match int8 {
            Some(_) => "igemm_channels_last_u8",
            None => "igemm_channels_last",
        };
        Ok(ImplicitGemm {
            functions,
            channels_last: load(channels_last)?,
            weights: Weights::upload_bytes(ctx.device, &packed, WHAT)?,
            epilogue,
            sms: sms as usize,
            int8,
            tiles: Mutex::default(),
            forced: match ctx.conv_tactic {
                Some(Tactic::Tile(t)) => Some(t.min(TILES.len() - 1)),
                _ => None,
            },
        })
    }

    /// Bytes of an input element: 1 for an 8-bit convolution, else 2.
    fn element(&self) -> usize {
        if self.int8.is_some() { 1 } else { 2 }
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
        let what = WHAT;
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
        let most_blocks = TILES.iter().map(|t| t.blocks(p.m, cols).1).max();
        if most_blocks.is_none_or(|b| b >= i32::MAX as usize) {
            return Ok(false);
        }
        let paired = if channels_last { p.m } else { ohw };
        let pairs = self.int8.is_none() && paired.is_multiple_of(2) && y % 4 == 0 && res % 4 == 0;
        let i = |v: usize| arg_i32(v, what);
        if channels_last {
            if x % 16 != 0 {
                return Err(format!(
                    "{what}: a channels-last input must be 16-byte aligned"
                ));
            }
            self.products(p, [x, bias, res, y], (cols, pairs), true, stream)?;
            return Ok(true);
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
            .alloc(p.n * p.c * hw * self.element())
            .map_err(|e| format!("{what}: channels-last scratch: {e}"))?;
        let mut args = KernelArgs::new()
            .ptr(x)
            .ptr(nhwc.ptr())
            .i32(i(p.c)?)
            .i32(i(hw)?);
        // SAFETY: the arguments match `igemm_channels_last*` (of this element size); x holds
        // `[N, C, HW]` and the scratch as many elements.
        unsafe {
            self.channels_last
                .launch(stream, grid, (32, 8, 1), 0, &mut args)
        }
        .map_err(|e| format!("{what}: {e}"))?;
        let done = self.products(p, [nhwc.ptr(), bias, res, y], (cols, pairs), false, stream);
        drop(nhwc);
        done.map(|()| true)
    }

    /// Queues the products of `x` (channels last) into `y` (NCHW, or NHWC with `nhwc`) with
    /// the tile chosen for this run's shape: the fastest of the tiles no taller than the
    /// channels (rounded up to 64), timed on the shape's first run into a scratch output
    /// (as convolution tactics are) and remembered; while `stream` is being captured,
    /// [`choose_tile`]'s guess, not remembered.
    fn products(
        &self,
        p: &Problem,
        [x, bias, res, y]: [u64; 4],
        (cols, pairs): (usize, bool),
        nhwc: bool,
        stream: &Stream,
    ) -> Result<(), String> {
        let key = [p.n, p.input[0], p.input[1], usize::from(nhwc)];
        let poisoned = || format!("{WHAT}: the tile table's lock was poisoned");
        let known = match self.forced {
            Some(tile) => Some(tile),
            None => self
                .tiles
                .lock()
                .map_err(|_| poisoned())?
                .get(&key)
                .copied(),
        };
        let err = |e| format!("{WHAT}: timing tiles: {e}");
        let tile = match known {
            Some(tile) => tile,
            None if stream.is_capturing().map_err(err)? => choose_tile(p.m, cols, self.sms),
            None => {
                let tall = p.m.next_multiple_of(64);
                let candidates: Vec<usize> = (0..TILES.len())
                    .filter(|&t| TILES[t].rows() <= tall)
                    .collect();
                let out_bytes = p.n * p.m * p.output[0] * p.output[1] * 4;
                let scratch = stream.device().allocator().alloc(out_bytes);
                let scratch = scratch.map_err(|e| format!("{WHAT}: tile scratch: {e}"))?;
                let into_scratch = [x, bias, res, scratch.ptr()];
                let best = timing::fastest(
                    stream,
                    &candidates,
                    |&t| self.launch(p, into_scratch, (cols, pairs), nhwc, t, stream),
                    err,
                )?;
                drop(scratch);
                let tile = best.map_or_else(|| choose_tile(p.m, cols, self.sms), |b| candidates[b]);
                self.tiles.lock().map_err(|_| poisoned())?.insert(key, tile);
                tile
            }
        };
        self.launch(p, [x, bias, res, y], (cols, pairs), nhwc, tile, stream)
    }

    /// Launches the kernel of `TILES[tile]` over `x` channels last into `y` (NCHW, or NHWC
    /// with `nhwc`); the caller checked that its block count fits 31 bits.
    fn launch(
        &self,
        p: &Problem,
        [x, bias, res, y]: [u64; 4],
        (cols, pairs): (usize, bool),
        nhwc: bool,
        tile: usize,
        stream: &Stream,
    ) -> Result<(), String> {
        let what = WHAT;
        let i = |v: usize| arg_i32(v, what);
        let t = TILES[tile];
        let (m_tiles, blocks) = t.blocks(p.m, cols);
        let blocks = u32::try_from(blocks).map_err(|_| format!("{what}: {blocks} blocks"))?;
        let mut args = KernelArgs::new()
            .ptr(x)
            .ptr(self.weights.ptr())
            .ptr(bias)
            .ptr(res)
            .ptr(y);
        let c = p.c * self.element() / 2;
        for v in [c, p.input[0], p.input[1], p.m, p.output[0], p.output[1]]
            .into_iter()
            .chain(p.kernel)
            .chain(p.stride)
            .chain(p.pad)
            .chain(p.dilation)
        {
            args = args.i32(i(v)?);
        }
        let args = args
            .i32(i(cols)?)
            .i32(i(m_tiles)?)
            .i32(i32::from(pairs))
            .i32(i32::from(nhwc))
            .i32(self.epilogue.code)
            .f32(self.epilogue.p0)
            .f32(self.epilogue.p1);
        let (scales, (qout, qs, qz)) = self
            .int8
            .as_ref()
            .map_or((0, (0, 1.0, 0)), |q| (q.scales.ptr(), q.output));
        let mut args = args.ptr(scales).i32(qout).f32(qs).i32(qz);
        // SAFETY: the arguments match `igemm_*`; the caller checked that y (and res) hold the
        // problem's shape in their layout and bias its M values, x is channels last; the
        // packed weights are `[M, taps·C]` with C (in 16-bit pairs) a multiple of BK; an
        // 8-bit layer's scales hold M floats; every index fits 32 bits (checked above); the
        // shared memory is the tile's, allowed at prepare.
        unsafe {
            self.functions[tile].launch(
                stream,
                (blocks, 1, 1),
                (t.threads() as u32, 1, 1),
                t.shared_bytes(),
                &mut args,
            )
        }
        .map_err(|e| format!("{what}: {e}"))
    }
}

/// The tile for `m` output channels × `cols` columns on `sms` multiprocessors when it cannot
/// be timed: the first of [`TILES`] not taller than `m` rounded up to 64 that gives at least
/// two blocks of 256 threads (four of 128) a multiprocessor, the last otherwise.
fn choose_tile(m: usize, cols: usize, sms: usize) -> usize {
    let tall = m.next_multiple_of(64);
    let last = TILES.len() - 1;
    (0..last)
        .find(|&i| {
            let t = TILES[i];
            t.rows() <= tall && t.blocks(m, cols).1 * t.threads() >= 512 * sms
        })
        .unwrap_or(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&PROGRAM);
        super::super::prelude::assert_compiles(&PROGRAM_I8);
    }

    #[test]
    fn tiles_shrink_until_the_multiprocessors_are_busy() {
        assert_eq!(choose_tile(256, 32 * 3136, 132), 0);
        assert_eq!(choose_tile(512, 32 * 196, 132), 1);
        assert_eq!(choose_tile(512, 32 * 49, 132), 3);
        assert_eq!(choose_tile(64, 49, 132), 3);
        assert_eq!(choose_tile(64, 32 * 3136, 132), 1);
        assert_eq!(TILES[1].blocks(512, 32 * 196), (8, 8 * 49));
        assert_eq!(TILES[3].blocks(64, 0), (1, 0));
    }

    #[test]
    fn tiles_are_whole_copy_passes_of_their_threads() {
        for t in TILES {
            let rows = t.threads() / 4;
            assert!(
                t.rows().is_multiple_of(rows) && t.cols().is_multiple_of(rows),
                "{t:?}"
            );
            assert!(t.shared_bytes() <= 227 * 1024, "{t:?}");
        }
    }

    #[test]
    fn taps_major_puts_a_taps_channels_together() {
        let (m, c, taps) = (3, 5, 4);
        let src: Vec<u16> = (0..(m * c * taps) as u16).collect();
        let bytes: Vec<u8> = src.iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = taps_major(&bytes, m, c, taps, 2);
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
