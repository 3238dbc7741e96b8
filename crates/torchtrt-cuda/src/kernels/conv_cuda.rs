//! CUDA C of the convolution: the bias + residual + activation epilogue that follows the
//! GEMM, direct kernels for grouped convolutions, and a tiled depthwise kernel (3×3, 5×5 and
//! 7×7 at stride 1 or 2; bias and activation fused in both); im2col is in `im2col`.

use super::depthwise::{COLS, WINDOWS, rows};
use super::epilogue::ACTIVATIONS;
use super::prelude::{Program, with_prelude};

/// The convolution program.
pub(crate) static CONV: Program = Program::new("core_convolution", || {
    let cases: String = WINDOWS
        .iter()
        .map(|&(k, s)| format!("DW_CASE(D, {k}, {s}, {}) ", rows(k, s)))
        .collect();
    with_prelude(&format!(
        "#define DW_RW {COLS}\n#define DW_CASES(D) {cases}\n{ACTIVATIONS}{BODY}"
    ))
});

const BODY: &str = r#"

/* Where a flat output element lies: plane (image·M + m) position p, and its source element
   (the same, or for a wide product [M][NB][HW] element (m·NB + image)·HW + p). */
template <typename I>
struct EpiPos {
    I src;
    int m, p;
    __device__ __forceinline__ void at(I e, int M, int HW, int NB) {
        I plane = e / HW;
        p = (int)(e - plane * HW);
        I image = plane / M;
        m = (int)(plane - image * M);
        src = NB > 0 ? ((I)m * NB + image) * HW + p : e;
    }
    __device__ __forceinline__ void next(int M, int HW, int NB) {
        ++src;
        if (++p < HW) return;
        p = 0;
        bool wrap = ++m == M;
        if (wrap) m = 0;
        if (NB > 0) src = wrap ? src - (I)(M - 1) * NB * HW : src + (I)(NB - 1) * HW;
    }
};

/* y[e] = act(src[·] + bias[m] + res[e]) over `total` flat output elements (src = y in place
   for NB = 0, a wide product otherwise; bias and res may be null), V a thread: 16-byte loads
   and stores where `vec` (y, src and res aligned, NB = 0 for src). */
template <typename D, typename I>
__device__ __forceinline__ void epilogue_flat(const void* src, void* y, const void* bias,
    const void* res, int M, int HW, int NB, I total, bool vec, int code, float p0, float p1) {
    const int V = Lanes<D>::V;
    for (I e = ((I)blockIdx.x * blockDim.x + threadIdx.x) * V; e < total;
         e += (I)gridDim.x * blockDim.x * V) {
        EpiPos<I> at;
        at.at(e, M, HW, NB);
        const bool whole = vec && e + V <= total;
        float v[V], r[V];
        if (whole && NB == 0) {
            Lanes<D>::load(src, e, v);
        } else {
            EpiPos<I> s = at;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                v[j] = e + j < total ? LOAD(D, src, s.src) : 0.0f;
                s.next(M, HW, NB);
            }
        }
        if (res && whole) {
            Lanes<D>::load(res, e, r);
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) r[j] = res && e + j < total ? LOAD(D, res, e + j) : 0.0f;
        }
        float b = bias ? LOAD(D, bias, at.m) : 0.0f;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            v[j] = act(v[j] + r[j] + b, code, p0, p1);
            at.next(M, HW, NB);
            if (bias && at.p == 0) b = LOAD(D, bias, at.m);
        }
        if (whole) {
            Lanes<D>::store(y, e, v);
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) if (e + j < total) STORE(D, y, e + j, v[j]);
        }
    }
}

/* 32-bit indices when the output has fewer than 2^31 elements (a grid stride, at most 2^31,
   then cannot wrap past 2^32). */
#define EPILOGUE(S, D) extern "C" __global__ void conv_epilogue_##S(const void* src, void* y, \
    const void* bias, const void* res, int M, int HW, int NB, i64 total, int vec, int code, \
    float p0, float p1) { \
    if (total < (1ll << 31)) epilogue_flat<D, unsigned>(src, y, bias, res, M, HW, NB, \
        (unsigned)total, vec != 0, code, p0, p1); \
    else epilogue_flat<D, unsigned long long>(src, y, bias, res, M, HW, NB, \
        (unsigned long long)total, vec != 0, code, p0, p1); }
FOR_EACH_DTYPE(EPILOGUE)

/* The direct kernels: a thread per output, blocks of (positions, planes) over (output
   positions, planes), so that several small planes share a block; planes beyond the grid
   are walked in a loop (at least 2^20 below 2^31 planes, so the stride cannot wrap). */

/* Depthwise K×K (one input channel per group): every tap's load issued unconditionally
   (predicated) from the unrolled window. */
template <typename D, int K>
__device__ __forceinline__ void depthwise_k(const void* x, const void* w, const void* bias,
    void* y, int C, int H, int W, int M, int Mg, int SH, int SW, int PH, int PW, int DH,
    int DW, int OH, int OW, int planes, int code, float p0, float p1) {
    const int ohw = OH * OW, q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= ohw) return;
    const int oh = q / OW, ow = q - oh * OW;
    const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    for (int plane = blockIdx.y * blockDim.y + threadIdx.y; plane < planes;
         plane += gridDim.y * blockDim.y) {
        const int n = plane / M, m = plane - n * M;
        const i64 xb = ((i64)n * C + m / Mg) * H * W;
        const i64 wb = (i64)m * K * K;
        float acc = bias ? LOAD(D, bias, m) : 0.0f;
#pragma unroll
        for (int kh = 0; kh < K; ++kh) {
            const int ih = ih0 + kh * DH;
            const bool rok = ih >= 0 && ih < H;
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
                const int iw = iw0 + kw * DW;
                const bool ok = rok && iw >= 0 && iw < W;
                float v = ok ? LOAD(D, x, xb + ih * W + iw) : 0.0f;
                acc += v * LOAD(D, w, wb + kh * K + kw);
            }
        }
        STORE(D, y, (i64)plane * ohw + q, act(acc, code, p0, p1));
    }
}

/* Any other grouped convolution with Cg input channels per group, Mg output channels per
   group. */
template <typename D>
__device__ __forceinline__ void direct_impl(const void* x, const void* w, const void* bias,
    void* y, int C, int H, int W, int M, int Cg, int Mg, int KH, int KW, int SH, int SW,
    int PH, int PW, int DH, int DW, int OH, int OW, int planes, int code, float p0, float p1) {
    const int ntaps = Cg * KH * KW, ohw = OH * OW, q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= ohw) return;
    const int oh = q / OW, ow = q - oh * OW;
    const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    for (int plane = blockIdx.y * blockDim.y + threadIdx.y; plane < planes;
         plane += gridDim.y * blockDim.y) {
        const int n = plane / M, m = plane - n * M, g = m / Mg;
        const i64 wb = (i64)m * ntaps;
        float acc = bias ? LOAD(D, bias, m) : 0.0f;
        for (int cc = 0; cc < Cg; ++cc) {
            const i64 xb = ((i64)n * C + g * Cg + cc) * H * W;
            for (int kh = 0; kh < KH; ++kh) {
                const int ih = ih0 + kh * DH;
                if (ih < 0 || ih >= H) continue;
                for (int kw = 0; kw < KW; ++kw) {
                    const int iw = iw0 + kw * DW;
                    if (iw < 0 || iw >= W) continue;
                    acc += LOAD(D, x, xb + ih * W + iw)
                        * LOAD(D, w, wb + (cc * KH + kh) * KW + kw);
                }
            }
        }
        STORE(D, y, (i64)plane * ohw + q, act(acc, code, p0, p1));
    }
}

#define DIRECT(S, D) extern "C" __global__ void conv_direct_##S(const void* x, const void* w, \
    const void* bias, void* y, int C, int H, int W, int M, int Cg, int Mg, int KH, int KW, \
    int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW, int planes, int code, \
    float p0, float p1) { \
    bool dw = Cg == 1 && KH == KW; \
    if (dw && KH == 3) depthwise_k<D, 3>(x, w, bias, y, C, H, W, M, Mg, SH, SW, PH, PW, DH, \
        DW, OH, OW, planes, code, p0, p1); \
    else if (dw && KH == 5) depthwise_k<D, 5>(x, w, bias, y, C, H, W, M, Mg, SH, SW, PH, PW, \
        DH, DW, OH, OW, planes, code, p0, p1); \
    else if (dw && KH == 7) depthwise_k<D, 7>(x, w, bias, y, C, H, W, M, Mg, SH, SW, PH, PW, \
        DH, DW, OH, OW, planes, code, p0, p1); \
    else direct_impl<D>(x, w, bias, y, C, H, W, M, Cg, Mg, KH, KW, SH, SW, PH, PW, DH, DW, \
        OH, OW, planes, code, p0, p1); }
FOR_EACH_DTYPE(DIRECT)

/* An aligned word of B bytes, and its 32-bit parts. */
template <int B> struct Word;
template <> struct Word<4> {
    typedef unsigned int T;
    static __device__ __forceinline__ void split(T v, unsigned* w) { w[0] = v; }
};
template <> struct Word<8> {
    typedef unsigned long long T;
    static __device__ __forceinline__ void split(T v, unsigned* w) {
        w[0] = (unsigned)v;
        w[1] = (unsigned)(v >> 32);
    }
};
template <> struct Word<16> {
    typedef uint4 T;
    static __device__ __forceinline__ void split(T v, unsigned* w) {
        w[0] = v.x;
        w[1] = v.y;
        w[2] = v.z;
        w[3] = v.w;
    }
};

/* V adjacent elements of D from element i of p (V-aligned), as floats, in one load. */
template <typename D, int V>
__device__ __forceinline__ void load_vec(const typename D::T* p, i64 i, float* out) {
    typedef Word<V * sizeof(typename D::T)> W;
    unsigned w[4];
    W::split(*reinterpret_cast<const typename W::T*>(p + i), w);
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = Packed<D>::get(w, j);
}

/* One plane's input window (rows from ih0, columns from iw0; IHt × IWt, zero outside the
   input) into dst (rows of pitch IP), read as V-aligned groups of V elements (the caller
   guarantees W and the plane's base are multiples of V), 16 elements in flight per thread. */
template <typename D, int V>
__device__ __forceinline__ void dw_stage(const typename D::T* src, float* dst, int H, int W,
                                         int ih0, int iw0, int IHt, int IWt, int IP, int t,
                                         int nt) {
    const int NB = 16 / V;
    const int sh = ((iw0 % V) + V) % V, gw = (IWt + sh + V - 1) / V, n = IHt * gw;
    for (int e = t; e < n; e += NB * nt) {
        float v[NB][V];
        int gy[NB], gx[NB];
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            const int q = e + j * nt;
            gy[j] = q < n ? q / gw : -1;
            gx[j] = q < n ? q - gy[j] * gw : 0;
            const int ih = ih0 + gy[j], iw = iw0 - sh + gx[j] * V;
            if (q < n && (unsigned)ih < (unsigned)H && iw >= 0 && iw < W) {
                load_vec<D, V>(src, (i64)ih * W + iw, v[j]);
            } else {
#pragma unroll
                for (int c = 0; c < V; ++c) v[j][c] = 0.0f;
            }
        }
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            if (gy[j] < 0) continue;
#pragma unroll
            for (int c = 0; c < V; ++c) {
                const int col = gx[j] * V - sh + c;
                if (col >= 0 && col < IWt) dst[gy[j] * IP + col] = v[j][c];
            }
        }
    }
}

/* Depthwise K×K at stride S (no dilation), tiled. A block of (TC, RG, P) threads takes a
   tile of RG·RH output rows × TC·DW_RW columns of P planes: it stages the tiles' input
   windows (IHt × IWt, zero outside the input) in shared memory as floats, in rows of pitch
   IP (even), followed by the planes' weights; each thread then computes RH × DW_RW
   outputs from registers. Loads are issued eight at a time, or as groups of `vec` = 4
   elements where the rows allow (16 elements in flight). Grid (tiles across, tiles down,
   plane groups); plane groups beyond the grid are walked in a loop. A plane's input and
   output positions, and the planes, count below 2^31 (the launch checks). */
template <typename D, int K, int S, int RH>
__device__ __forceinline__ void depthwise_tiled(const void* x, const void* w, const void* bias,
    void* y, int C, int H, int W, int M, int Mg, int PH, int PW, int OH, int OW, int IHt,
    int IWt, int IP, int dy, int dx, int planes, int code, float p0, float p1, int vec) {
    extern __shared__ float dw_sm[];
    const int TC = blockDim.x, RG = blockDim.y, P = blockDim.z;
    const int A = IHt * IP, nt = TC * RG * P;
    float* wsm = dw_sm + P * A;
    const int t = threadIdx.x + TC * (threadIdx.y + RG * threadIdx.z);
    const int ry0 = t / IWt, rx0 = t - ry0 * IWt, n_el = IHt * IWt;
    const int oh0 = blockIdx.y * RG * RH, ow0 = blockIdx.x * TC * DW_RW;
    const int ih0 = oh0 * S - PH, iw0 = ow0 * S - PW;
    const i64 HW = (i64)H * W;
    for (int plane0 = blockIdx.z * P; plane0 < planes; plane0 += gridDim.z * P) {
        int n = plane0 / M, m = plane0 - n * M;
        __syncthreads();
        for (int p = 0; p < P && plane0 + p < planes; ++p) {
            for (int i = t; i < K * K; i += nt) wsm[p * K * K + i] = LOAD(D, w, m * K * K + i);
            const typename D::T* src = (const typename D::T*)x
                + ((i64)n * C + (Mg == 1 ? m : m / Mg)) * HW;
            float* dst = dw_sm + p * A;
            if (vec == 4) {
                dw_stage<D, 4>(src, dst, H, W, ih0, iw0, IHt, IWt, IP, t, nt);
            } else {
                int ry = ry0, rx = rx0;
                for (int e = t; e < n_el; e += 8 * nt) {
                    float v[8];
                    int at[8];
#pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        const int ih = ih0 + ry, iw = iw0 + rx;
                        const bool in = e + j * nt < n_el;
                        v[j] = in && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W
                            ? Elem<D>::load(src, ih * W + iw) : 0.0f;
                        at[j] = in ? ry * IP + rx : -1;
                        rx += dx;
                        ry += dy;
                        if (rx >= IWt) { rx -= IWt; ++ry; }
                    }
#pragma unroll
                    for (int j = 0; j < 8; ++j) if (at[j] >= 0) dst[at[j]] = v[j];
                }
            }
            if (++m == M) { m = 0; ++n; }
        }
        __syncthreads();
        const int pp = threadIdx.z, plane = plane0 + pp;
        if (plane >= planes) continue;
        const int m_out = plane % M;
        float wr[K * K];
#pragma unroll
        for (int i = 0; i < K * K; ++i) wr[i] = wsm[pp * K * K + i];
        const float b = bias ? LOAD(D, bias, m_out) : 0.0f;
        float acc[RH][DW_RW];
#pragma unroll
        for (int i = 0; i < RH; ++i)
#pragma unroll
            for (int j = 0; j < DW_RW; ++j) acc[i][j] = b;
        const float* s = dw_sm + pp * A + threadIdx.y * RH * S * IP + threadIdx.x * DW_RW * S;
        const int NV = (DW_RW - 1) * S + K;
#pragma unroll
        for (int rr = 0; rr < (RH - 1) * S + K; ++rr) {
            /* DW_RW·S is even, so every pair starts 8-byte aligned; the pad column read
               past an odd NV is never used. */
            float v[NV + 1];
            const float* row = s + rr * IP;
#pragma unroll
            for (int c = 0; c < NV; c += 2) {
                const float2 q = *reinterpret_cast<const float2*>(row + c);
                v[c] = q.x;
                v[c + 1] = q.y;
            }
#pragma unroll
            for (int i = 0; i < RH; ++i) {
                const int kh = rr - i * S;
                if (kh >= 0 && kh < K) {
#pragma unroll
                    for (int j = 0; j < DW_RW; ++j)
#pragma unroll
                        for (int kw = 0; kw < K; ++kw)
                            acc[i][j] = fmaf(v[j * S + kw], wr[kh * K + kw], acc[i][j]);
                }
            }
        }
        const int oh = oh0 + threadIdx.y * RH, ow = ow0 + threadIdx.x * DW_RW;
        const i64 yb = (i64)plane * OH * OW;
#pragma unroll
        for (int i = 0; i < RH; ++i)
#pragma unroll
            for (int j = 0; j < DW_RW; ++j)
                if (oh + i < OH && ow + j < OW)
                    STORE(D, y, yb + (oh + i) * OW + ow + j, act(acc[i][j], code, p0, p1));
    }
}

#define DW_CASE(D, KK, SS, RR) if (K == KK && S == SS) { depthwise_tiled<D, KK, SS, RR>(x, \
    w, bias, y, \
    C, H, W, M, Mg, PH, PW, OH, OW, IHt, IWt, IP, dy, dx, planes, code, p0, p1, vec); return; }
#define DEPTHWISE(Sx, D) extern "C" __global__ void __launch_bounds__(256, 3) \
    conv_depthwise_##Sx(const void* x, const void* w, const void* bias, void* y, int C, int H, \
    int W, int M, int Mg, int PH, int PW, int OH, int OW, int IHt, int IWt, int IP, int dy, \
    int dx, int planes, int code, float p0, float p1, int K, int S, int vec) { \
    DW_CASES(D) }
FOR_EACH_DTYPE(DEPTHWISE)
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::CONV);
    }
}
