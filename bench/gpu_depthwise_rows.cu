// Depthwise convolution channels last (f16 in and out, f32 accumulation) on the GPU: the
// row-streaming kernel against the column-vector kernel it replaced, checked against a
// direct reference and timed against a device copy of the input and output bytes, per shape
// and tiling. A thread of the streaming kernel owns one channel and TW adjacent output
// columns of a segment of R output rows: it reads each input row of the segment once,
// adds it into the (K-1)/S+1 output rows whose windows cover it (a register ring unrolled
// over S·L input rows, so that every ring index is a constant) and writes a row as soon as
// its last input row is in. On the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/dwr bench/gpu_depthwise_rows.cu && /tmp/dwr
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA error %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
typedef long long i64;

template <int K, int S, int TW>
__global__ void __launch_bounds__(256) dw_rows(const __half* __restrict__ x, const __half* __restrict__ w,
    const __half* __restrict__ bias, __half* __restrict__ y, int H, int W, int C, int OH, int OW, int PH,
    int PW, int R, int SEG, i64 items) {
    constexpr int L = (K - 1) / S + 1, P = S * L, NV = (TW - 1) * S + K;
    const int OWT = (OW + TW - 1) / TW;
    for (i64 it = blockIdx.x * (i64)blockDim.x + threadIdx.x; it < items; it += (i64)gridDim.x * blockDim.x) {
        const i64 r = it / C;
        const int c = (int)(it - r * C);
        const i64 r2 = r / OWT;
        const int ow0 = (int)(r - r2 * OWT) * TW;
        const i64 n = r2 / SEG;
        const int oh0 = (int)(r2 - n * SEG) * R;
        const int rows = min(R, OH - oh0), nin = (rows - 1) * S + K;
        const int ih0 = oh0 * S - PH, iw0 = ow0 * S - PW;
        float wr[K][K];
#pragma unroll
        for (int kh = 0; kh < K; ++kh)
#pragma unroll
            for (int kw = 0; kw < K; ++kw) wr[kh][kw] = __half2float(w[(kh * K + kw) * C + c]);
        const float b = bias ? __half2float(bias[c]) : 0.0f;
        float acc[L][TW];
#pragma unroll
        for (int s = 0; s < L; ++s)
#pragma unroll
            for (int t = 0; t < TW; ++t) acc[s][t] = 0.0f;
        const __half* xn = x + n * H * (i64)W * C + c;
        __half* yc = y + ((n * OH + oh0) * (i64)OW + ow0) * C + c;
        for (int base = 0; base < nin; base += P) {
#pragma unroll
            for (int j = 0; j < P; ++j) {
                const int i = base + j;
                if (i >= nin) break;
                const int ih = ih0 + i;
                float v[NV];
                if ((unsigned)ih < (unsigned)H) {
                    const __half* row = xn + (i64)ih * W * C;
#pragma unroll
                    for (int q = 0; q < NV; ++q) {
                        const int iw = iw0 + q;
                        v[q] = (unsigned)iw < (unsigned)W ? __half2float(row[(i64)iw * C]) : 0.0f;
                    }
                } else {
#pragma unroll
                    for (int q = 0; q < NV; ++q) v[q] = 0.0f;
                }
#pragma unroll
                for (int kh = 0; kh < K; ++kh) {
                    if ((j - kh) % S != 0) continue;
                    const int s = (((j - kh) / S) % L + L) % L;
#pragma unroll
                    for (int t = 0; t < TW; ++t)
#pragma unroll
                        for (int kw = 0; kw < K; ++kw) acc[s][t] = fmaf(v[t * S + kw], wr[kh][kw], acc[s][t]);
                }
                if ((j - (K - 1)) % S == 0) {
                    const int s = (((j - (K - 1)) / S) % L + L) % L;
                    if (i >= K - 1) {
                        const int o = (i - (K - 1)) / S;
                        __half* out = yc + (i64)o * OW * C;
#pragma unroll
                        for (int t = 0; t < TW; ++t)
                            if (ow0 + t < OW) out[(i64)t * C] = __float2half(acc[s][t] + b);
                    }
#pragma unroll
                    for (int t = 0; t < TW; ++t) acc[s][t] = 0.0f;
                }
            }
        }
    }
}

// The kernel it replaces (depthwise_nhwc.rs, f16: 8 channels a thread, 4 columns, one row).
template <int K, int S>
__global__ void __launch_bounds__(256) dw_cols(const __half* __restrict__ x, const __half* __restrict__ w,
    const __half* __restrict__ bias, __half* __restrict__ y, int H, int W, int C, int OH, int OW, int PH,
    int PW, i64 items) {
    const int TW = 4, NV = (TW - 1) * S + K, V = 8;
    const int CG = C / V, OWT = (OW + TW - 1) / TW;
    for (i64 it = blockIdx.x * (i64)blockDim.x + threadIdx.x; it < items; it += (i64)gridDim.x * blockDim.x) {
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
            const float b = __half2float(bias[c + j]);
#pragma unroll
            for (int t = 0; t < TW; ++t) acc[t][j] = b;
        }
#pragma unroll
        for (int kh = 0; kh < K; ++kh) {
            const int ih = ih0 + kh;
            if ((unsigned)ih >= (unsigned)H) continue;
            float wr[K][V];
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
                uint4 u = *(const uint4*)(w + (kh * K + kw) * (i64)C + c);
                const __half* h = (const __half*)&u;
#pragma unroll
                for (int j = 0; j < V; ++j) wr[kw][j] = __half2float(h[j]);
            }
            const i64 row = ((n * H + ih) * W) * (i64)C + c;
#pragma unroll
            for (int q = 0; q < NV; ++q) {
                const int iw = iw0 + q;
                float v[V];
                if ((unsigned)iw < (unsigned)W) {
                    uint4 u = *(const uint4*)(x + row + (i64)iw * C);
                    const __half* h = (const __half*)&u;
#pragma unroll
                    for (int j = 0; j < V; ++j) v[j] = __half2float(h[j]);
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
            uint4 u;
            __half* h = (__half*)&u;
#pragma unroll
            for (int j = 0; j < V; ++j) h[j] = __float2half(acc[t][j]);
            *(uint4*)(y + o) = u;
        }
    }
}

__global__ void dw_ref(const __half* x, const __half* w, const __half* bias, float* y, int N, int H, int W,
    int C, int OH, int OW, int K, int S, int PH, int PW) {
    const i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (e >= (i64)N * OH * OW * C) return;
    const int c = e % C;
    const i64 p = e / C;
    const int ow = p % OW, oh = (p / OW) % OH, n = p / ((i64)OW * OH);
    float acc = __half2float(bias[c]);
    for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) {
            const int ih = oh * S - PH + kh, iw = ow * S - PW + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            acc += __half2float(x[((n * (i64)H + ih) * W + iw) * C + c]) * __half2float(w[(kh * K + kw) * C + c]);
        }
    y[e] = acc;
}

template <typename F> static float ms(F f, int warm = 10, int iters = 50, int reps = 5) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < warm; ++i) f();
    float best = 1e30f;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(a));
        for (int i = 0; i < iters; ++i) f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        best = std::min(best, t / iters);
    }
    CK(cudaGetLastError());
    return best;
}

struct Shape { int n, c, size, k, s; };

template <int K, int S, int TW>
static void rows_case(const Shape& sh, const __half* x, const __half* w, const __half* b, __half* y, int R,
    int threads, float copy, const float* ref, std::vector<__half>& host, std::vector<float>& href) {
    const int H = sh.size, W = sh.size, C = sh.c, P = K / 2;
    const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    const int seg = (OH + R - 1) / R;
    const i64 items = (i64)sh.n * seg * ((OW + TW - 1) / TW) * C;
    const int blocks = (int)std::min<i64>((items + threads - 1) / threads, 1 << 30);
    auto run = [&] { dw_rows<K, S, TW><<<blocks, threads>>>(x, w, b, y, H, W, C, OH, OW, P, P, R, seg, items); };
    const float t = ms(run);
    const size_t out = (size_t)sh.n * OH * OW * C;
    CK(cudaMemcpy(host.data(), y, out * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t e = 0; e < out; ++e)
        worst = std::max(worst, (double)fabsf(__half2float(host[e]) - href[e]) / (1.0 + fabsf(href[e])));
    printf("  rows TW=%d R=%2d T=%3d: %.4f ms  of copy %.2f  err %.1e%s\n", TW, R, threads, t, copy / t,
        worst, worst > 4e-3 ? "  WRONG" : "");
}

template <int K, int S>
static void shape_case(const Shape& sh) {
    const int H = sh.size, W = sh.size, C = sh.c, P = K / 2;
    const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    const size_t in = (size_t)sh.n * H * W * C, out = (size_t)sh.n * OH * OW * C;
    std::vector<__half> hx(in), hw(K * K * C), hb(C), hy(out);
    srand(K * 1000 + C);
    auto rnd = [] { return (float)rand() / RAND_MAX * 2.0f - 1.0f; };
    for (auto& v : hx) v = __float2half(rnd());
    for (auto& v : hw) v = __float2half(rnd() / K);
    for (auto& v : hb) v = __float2half(rnd());
    __half *x, *w, *b, *y, *buf;
    float* ref;
    CK(cudaMalloc(&x, in * 2));
    CK(cudaMalloc(&w, hw.size() * 2));
    CK(cudaMalloc(&b, C * 2));
    CK(cudaMalloc(&y, out * 2));
    CK(cudaMalloc(&ref, out * 4));
    CK(cudaMalloc(&buf, (in + out) * 4));
    CK(cudaMemcpy(x, hx.data(), in * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb.data(), C * 2, cudaMemcpyHostToDevice));
    dw_ref<<<(unsigned)((out + 255) / 256), 256>>>(x, w, b, ref, sh.n, H, W, C, OH, OW, K, S, P, P);
    std::vector<float> href(out);
    CK(cudaMemcpy(href.data(), ref, out * 4, cudaMemcpyDeviceToHost));
    const float copy = ms([&] { CK(cudaMemcpyAsync(buf, buf + in + out, (in + out) * 2, cudaMemcpyDeviceToDevice)); });
    printf("dw%dx%d s%d [%d,%d,%d,%d] copy %.4f ms\n", K, K, S, sh.n, C, H, W, copy);
    if (C % 8 == 0) {
        const i64 items = (i64)sh.n * OH * ((OW + 3) / 4) * (C / 8);
        auto run = [&] { dw_cols<K, S><<<(unsigned)((items + 255) / 256), 256>>>(x, w, b, y, H, W, C, OH, OW, P, P, items); };
        const float t = ms(run);
        CK(cudaMemcpy(hy.data(), y, out * 2, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (size_t e = 0; e < out; ++e)
            worst = std::max(worst, (double)fabsf(__half2float(hy[e]) - href[e]) / (1.0 + fabsf(href[e])));
        printf("  cols (old)      : %.4f ms  of copy %.2f  err %.1e\n", t, copy / t, worst);
    }
    for (int R : {4, 8, 14, 28, 56})
        for (int T : {128, 256}) {
            if (R > OH + 8) continue;
            rows_case<K, S, 4>(sh, x, w, b, y, R, T, copy, ref, hy, href);
            rows_case<K, S, 8>(sh, x, w, b, y, R, T, copy, ref, hy, href);
        }
    CK(cudaFree(x)); CK(cudaFree(w)); CK(cudaFree(b)); CK(cudaFree(y)); CK(cudaFree(ref)); CK(cudaFree(buf));
}

int main() {
    shape_case<7, 1>({32, 96, 56, 7, 1});
    shape_case<7, 1>({32, 192, 28, 7, 1});
    shape_case<7, 1>({32, 384, 14, 7, 1});
    shape_case<7, 1>({32, 768, 7, 7, 1});
    shape_case<3, 1>({32, 32, 112, 3, 1});
    shape_case<3, 2>({32, 96, 112, 3, 2});
    shape_case<3, 1>({32, 144, 56, 3, 1});
    shape_case<5, 1>({32, 240, 28, 5, 1});
    shape_case<5, 2>({32, 72, 56, 5, 2});
    shape_case<5, 1>({32, 672, 14, 5, 1});
    shape_case<7, 2>({2, 24, 15, 7, 2});
    shape_case<5, 1>({3, 20, 9, 5, 1});
    return 0;
}
