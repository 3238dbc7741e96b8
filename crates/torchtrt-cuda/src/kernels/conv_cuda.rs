//! CUDA C of the convolution: im2col (a raw copy of 2- or 4-byte elements, zeros in the
//! padding), the bias + activation epilogue that follows the GEMM, and a direct kernel for
//! depthwise convolutions (bias and activation fused).

use super::epilogue::ACTIVATIONS;
use super::prelude::{Program, with_prelude};

/// The convolution program.
pub(crate) static CONV: Program = Program::new("core_convolution", || {
    with_prelude(&format!("{ACTIVATIONS}{BODY}"))
});

const BODY: &str = r#"
/* Each thread handles VEC consecutive output positions of one row (plane kernels). */
#define VEC 8

/* col[row][p] = x[plane][oh*SH-PH+kh*DH][ow*SW-PW+kw*DW] for row = (image·group, r) with
   r = (channel in group, kh, kw) below REAL = Cg·KH·KW and zero rows from REAL up to
   PADDED; p = (oh, ow). Blocks along y walk the rows (the decomposition is uniform per
   block), threads along x take VEC positions each (independent loads, one 16-byte store
   when rows are a multiple of VEC long). With NB > 0 (one group) the rows of the NB images
   interleave instead: col[r][image][p], one [PADDED, NB·OH·OW] matrix. */
template <typename T>
__device__ __forceinline__ void im2col_impl(
    const T* __restrict__ x, T* __restrict__ col, int REAL, int PADDED, int H, int W, int KH,
    int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW, i64 rows, int NB) {
    int ohw = OH * OW, kk = KH * KW;
    bool vec = ohw % VEC == 0;
    for (i64 row = blockIdx.y; row < rows; row += gridDim.y) {
        int r = (int)(row % PADDED);
        bool zero = r >= REAL;
        int c = r / kk, kidx = r - c * kk;
        int kh = kidx / KW, kw = kidx - kh * KW;
        const T* __restrict__ plane = x + ((row / PADDED) * (REAL / kk) + c) * (i64)H * W;
        T* dst = col + (NB > 0 ? ((i64)r * NB + row / PADDED) : row) * ohw;
        for (int p0 = (blockIdx.x * blockDim.x + threadIdx.x) * VEC; p0 < ohw;
             p0 += gridDim.x * blockDim.x * VEC) {
            int oh = p0 / OW, ow = p0 - oh * OW;
            union { T e[VEC]; uint4 q[VEC * sizeof(T) / 16]; } v;
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                int ih = oh * SH - PH + kh * DH, iw = ow * SW - PW + kw * DW;
                bool ok = !zero && p0 + j < ohw && ih >= 0 && ih < H && iw >= 0 && iw < W;
                v.e[j] = ok ? plane[ih * W + iw] : (T)0;
                if (++ow == OW) { ow = 0; ++oh; }
            }
            if (vec) {
#pragma unroll
                for (int j = 0; j < VEC * (int)sizeof(T) / 16; ++j)
                    reinterpret_cast<uint4*>(dst + p0)[j] = v.q[j];
            } else {
#pragma unroll
                for (int j = 0; j < VEC; ++j) if (p0 + j < ohw) dst[p0 + j] = v.e[j];
            }
        }
    }
}

#define IM2COL_ARGS int REAL, int PADDED, int H, int W, int KH, int KW, int SH, int SW, int PH, int PW, \
    int DH, int DW, int OH, int OW, i64 rows, int NB
#define IM2COL_PASS REAL, PADDED, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, rows, NB
extern "C" __global__ void im2col_2(const u16* x, u16* col, IM2COL_ARGS) {
    im2col_impl<u16>(x, col, IM2COL_PASS);
}
extern "C" __global__ void im2col_4(const float* x, float* col, IM2COL_ARGS) {
    im2col_impl<float>(x, col, IM2COL_PASS);
}

/* y[plane][p] = act(y[plane][p] + bias[plane % M] + res[plane][p]) in place, planes along
   y; bias and res may be null. */
template <typename D>
__device__ __forceinline__ void epilogue_impl(void* y, const void* bias, const void* res,
    int M, int HW, i64 planes, int code, float p0, float p1) {
    for (i64 plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        float b = bias ? LOAD(D, bias, plane % M) : 0.0f;
        i64 base = plane * HW;
        for (int q = (blockIdx.x * blockDim.x + threadIdx.x) * VEC; q < HW;
             q += gridDim.x * blockDim.x * VEC) {
            float v[VEC];
#pragma unroll
            for (int j = 0; j < VEC; ++j) v[j] = q + j < HW ? LOAD(D, y, base + q + j) : 0.0f;
            if (res) {
#pragma unroll
                for (int j = 0; j < VEC; ++j) if (q + j < HW) v[j] += LOAD(D, res, base + q + j);
            }
#pragma unroll
            for (int j = 0; j < VEC; ++j)
                if (q + j < HW) STORE(D, y, base + q + j, act(v[j] + b, code, p0, p1));
        }
    }
}
#define EPILOGUE(S, D) extern "C" __global__ void conv_epilogue_##S(void* y, const void* bias, \
    const void* res, int M, int HW, i64 planes, int code, float p0, float p1) { \
    epilogue_impl<D>(y, bias, res, M, HW, planes, code, p0, p1); }
FOR_EACH_DTYPE(EPILOGUE)

/* y[image][m][p] = act(src[m][image][p] + bias[m] + res[image][m][p]) for the product of
   one GEMM over NB interleaved images; planes (image, m) along y; bias and res may be
   null. */
template <typename D>
__device__ __forceinline__ void epilogue_t_impl(const void* src, void* y, const void* bias,
    const void* res, int M, int HW, int NB, i64 planes, int code, float p0, float p1) {
    for (i64 plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        int m = (int)(plane % M);
        i64 image = plane / M;
        float b = bias ? LOAD(D, bias, m) : 0.0f;
        i64 from = ((i64)m * NB + image) * HW, to = plane * HW;
        for (int q = (blockIdx.x * blockDim.x + threadIdx.x) * VEC; q < HW;
             q += gridDim.x * blockDim.x * VEC) {
            float v[VEC];
#pragma unroll
            for (int j = 0; j < VEC; ++j)
                v[j] = q + j < HW ? LOAD(D, src, from + q + j) + b : 0.0f;
            if (res) {
#pragma unroll
                for (int j = 0; j < VEC; ++j) if (q + j < HW) v[j] += LOAD(D, res, to + q + j);
            }
#pragma unroll
            for (int j = 0; j < VEC; ++j)
                if (q + j < HW) STORE(D, y, to + q + j, act(v[j], code, p0, p1));
        }
    }
}
#define EPILOGUE_T(S, D) extern "C" __global__ void conv_epilogue_t_##S(const void* src, \
    void* y, const void* bias, const void* res, int M, int HW, int NB, i64 planes, int code, \
    float p0, float p1) { epilogue_t_impl<D>(src, y, bias, res, M, HW, NB, planes, code, p0, p1); }
FOR_EACH_DTYPE(EPILOGUE_T)

/* Depthwise K×K (one input channel per group): the plane's taps in registers, every tap's
   load issued unconditionally (predicated), VEC outputs per thread. */
template <typename D, int K>
__device__ __forceinline__ void depthwise_k(const void* x, const void* w, const void* bias,
    void* y, int C, int H, int W, int M, int Mg, int SH, int SW, int PH, int PW, int DH,
    int DW, int OH, int OW, i64 planes, int code, float p0, float p1) {
    int ohw = OH * OW;
    for (i64 plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        int m = (int)(plane % M);
        i64 n = plane / M;
        float taps[K * K];
#pragma unroll
        for (int k = 0; k < K * K; ++k) taps[k] = LOAD(D, w, (i64)m * K * K + k);
        float b = bias ? LOAD(D, bias, m) : 0.0f;
        i64 xb = (n * C + m / Mg) * (i64)H * W;
        for (int q = (blockIdx.x * blockDim.x + threadIdx.x) * VEC; q < ohw;
             q += gridDim.x * blockDim.x * VEC) {
            int oh = q / OW, ow = q - oh * OW;
#pragma unroll 1
            for (int j = 0; j < VEC && q + j < ohw; ++j) {
                int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
                float acc = b;
#pragma unroll
                for (int kh = 0; kh < K; ++kh) {
                    int ih = ih0 + kh * DH;
                    bool rok = ih >= 0 && ih < H;
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                        int iw = iw0 + kw * DW;
                        bool ok = rok && iw >= 0 && iw < W;
                        float v = ok ? LOAD(D, x, xb + ih * W + iw) : 0.0f;
                        acc += v * taps[kh * K + kw];
                    }
                }
                STORE(D, y, plane * ohw + q + j, act(acc, code, p0, p1));
                if (++ow == OW) { ow = 0; ++oh; }
            }
        }
    }
}

/* Any other grouped convolution with Cg input channels per group, Mg output channels per
   group: a thread per output, planes along y. */
template <typename D>
__device__ __forceinline__ void direct_impl(const void* x, const void* w, const void* bias,
    void* y, int C, int H, int W, int M, int Cg, int Mg, int KH, int KW, int SH, int SW,
    int PH, int PW, int DH, int DW, int OH, int OW, i64 planes, int code, float p0, float p1) {
    int ntaps = Cg * KH * KW, ohw = OH * OW;
    for (i64 plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        int m = (int)(plane % M);
        i64 n = plane / M;
        int g = m / Mg;
        i64 wb = (i64)m * ntaps;
        float b = bias ? LOAD(D, bias, m) : 0.0f;
        for (int q = (blockIdx.x * blockDim.x + threadIdx.x) * VEC; q < ohw;
             q += gridDim.x * blockDim.x * VEC) {
            for (int p = q; p < q + VEC && p < ohw; ++p) {
                int oh = p / OW, ow = p - oh * OW;
                int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
                float acc = b;
                for (int cc = 0; cc < Cg; ++cc) {
                    i64 xb = (n * C + g * Cg + cc) * (i64)H * W;
                    for (int kh = 0; kh < KH; ++kh) {
                        int ih = ih0 + kh * DH;
                        if (ih < 0 || ih >= H) continue;
                        for (int kw = 0; kw < KW; ++kw) {
                            int iw = iw0 + kw * DW;
                            if (iw < 0 || iw >= W) continue;
                            acc += LOAD(D, x, xb + ih * W + iw)
                                * LOAD(D, w, wb + (cc * KH + kh) * KW + kw);
                        }
                    }
                }
                STORE(D, y, plane * ohw + p, act(acc, code, p0, p1));
            }
        }
    }
}

#define DIRECT(S, D) extern "C" __global__ void conv_direct_##S(const void* x, const void* w, \
    const void* bias, void* y, int C, int H, int W, int M, int Cg, int Mg, int KH, int KW, \
    int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW, i64 planes, int code, \
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
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::CONV);
    }
}
