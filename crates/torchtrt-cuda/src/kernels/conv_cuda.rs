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
/* col[n][c][kh][kw][oh][ow] = x[n][c][oh*SH-PH+kh*DH][ow*SW-PW+kw*DW], for n·C planes. */
template <typename T>
__device__ __forceinline__ void im2col_impl(
    const T* __restrict__ x, T* __restrict__ col, int C, int H, int W, int KH, int KW,
    int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW, i64 total) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total;
         i += (i64)gridDim.x * blockDim.x) {
        int ow = (int)(i % OW);
        i64 t = i / OW;
        int oh = (int)(t % OH); t /= OH;
        int kw = (int)(t % KW); t /= KW;
        int kh = (int)(t % KH); t /= KH;
        int ih = oh * SH - PH + kh * DH, iw = ow * SW - PW + kw * DW;
        T v = (T)0;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = x[(t * H + ih) * (i64)W + iw];
        col[i] = v;
    }
}

#define IM2COL_ARGS int C, int H, int W, int KH, int KW, int SH, int SW, int PH, int PW, \
    int DH, int DW, int OH, int OW, i64 total
#define IM2COL_PASS C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, total
extern "C" __global__ void im2col_2(const u16* x, u16* col, IM2COL_ARGS) {
    im2col_impl<u16>(x, col, IM2COL_PASS);
}
extern "C" __global__ void im2col_4(const float* x, float* col, IM2COL_ARGS) {
    im2col_impl<float>(x, col, IM2COL_PASS);
}

/* y[n][m][p] = act(y[n][m][p] + bias[m]) in place; bias may be null. */
template <typename D>
__device__ __forceinline__ void epilogue_impl(void* y, const void* bias, int M, int HW,
    i64 total, int code, float p0, float p1) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total;
         i += (i64)gridDim.x * blockDim.x) {
        float v = LOAD(D, y, i);
        if (bias) v += LOAD(D, bias, (i / HW) % M);
        STORE(D, y, i, act(v, code, p0, p1));
    }
}
#define EPILOGUE(S, D) extern "C" __global__ void conv_epilogue_##S(void* y, const void* bias, \
    int M, int HW, i64 total, int code, float p0, float p1) { \
    epilogue_impl<D>(y, bias, M, HW, total, code, p0, p1); }
FOR_EACH_DTYPE(EPILOGUE)

/* One thread per output of a convolution whose groups have Cg input channels each (the
   depthwise case has Cg = 1); Mg output channels per group. */
template <typename D>
__device__ __forceinline__ void direct_impl(const void* x, const void* w, const void* bias,
    void* y, int C, int H, int W, int M, int Cg, int Mg, int KH, int KW, int SH, int SW,
    int PH, int PW, int DH, int DW, int OH, int OW, i64 total, int code, float p0, float p1) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total;
         i += (i64)gridDim.x * blockDim.x) {
        int ow = (int)(i % OW);
        i64 t = i / OW;
        int oh = (int)(t % OH); t /= OH;
        int m = (int)(t % M);
        i64 n = t / M;
        int g = m / Mg;
        float acc = bias ? LOAD(D, bias, m) : 0.0f;
        int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
        for (int cc = 0; cc < Cg; ++cc) {
            i64 xb = (n * C + g * Cg + cc) * (i64)H * W;
            i64 wb = ((i64)m * Cg + cc) * KH * KW;
            for (int kh = 0; kh < KH; ++kh) {
                int ih = ih0 + kh * DH;
                if (ih < 0 || ih >= H) continue;
                for (int kw = 0; kw < KW; ++kw) {
                    int iw = iw0 + kw * DW;
                    if (iw < 0 || iw >= W) continue;
                    acc += LOAD(D, x, xb + (i64)ih * W + iw) * LOAD(D, w, wb + kh * KW + kw);
                }
            }
        }
        STORE(D, y, i, act(acc, code, p0, p1));
    }
}
#define DIRECT(S, D) extern "C" __global__ void conv_direct_##S(const void* x, const void* w, \
    const void* bias, void* y, int C, int H, int W, int M, int Cg, int Mg, int KH, int KW, \
    int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW, i64 total, int code, \
    float p0, float p1) { \
    direct_impl<D>(x, w, bias, y, C, H, W, M, Cg, Mg, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, \
        total, code, p0, p1); }
FOR_EACH_DTYPE(DIRECT)
"#;
