// The read floor of the per-launch timing the plugin table uses: how fast a kernel that only
// reads a tensor (and writes nothing of note) can go on this GPU, timed per launch with CUDA
// events as bench/gpu_plugins_vs_pytorch.py times plugins, for the adaptive pool's input sizes
// (64 MiB f16, 128 MiB f32). "of_copy" is bytes read / time / the 1 GiB copy bandwidth, the
// plugin table's measure. On the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/read_floor bench/gpu_read_floor.cu && /tmp/read_floor
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA error %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void empty_k() {}

template <int LOADS>
__global__ void __launch_bounds__(256) read_k(const uint4* __restrict__ x, unsigned* out, long long vecs_per_block) {
    const uint4* p = x + blockIdx.x * vecs_per_block;
    unsigned acc = 0;
    for (long long base = 0; base < vecs_per_block; base += (long long)LOADS * blockDim.x) {
        uint4 v[LOADS];
#pragma unroll
        for (int i = 0; i < LOADS; ++i) v[i] = __ldg(p + base + i * blockDim.x + threadIdx.x);
#pragma unroll
        for (int i = 0; i < LOADS; ++i) acc = max(acc, max(max(v[i].x, v[i].y), max(v[i].z, v[i].w)));
    }
    if (acc == 0x12345678u) out[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(256) read_gs(const uint4* __restrict__ x, unsigned* out, long long n) {
    unsigned acc = 0;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = __ldg(x + i), b = __ldg(x + i + stride), c = __ldg(x + i + 2 * stride), d = __ldg(x + i + 3 * stride);
        acc = max(acc, max(max(a.x, b.y), max(c.z, d.w)));
    }
    for (; i < n; i += stride) { uint4 a = __ldg(x + i); acc = max(acc, a.x); }
    if (acc == 0x12345678u) out[blockIdx.x] = acc;
}

template <typename F> static float med(F f, int warm = 20, int iters = 100) {
    for (int i = 0; i < warm; ++i) f();
    std::vector<cudaEvent_t> ev(2 * iters);
    for (auto& e : ev) CK(cudaEventCreate(&e));
    for (int i = 0; i < iters; ++i) { CK(cudaEventRecord(ev[2 * i])); f(); CK(cudaEventRecord(ev[2 * i + 1])); }
    CK(cudaDeviceSynchronize());
    std::vector<float> t(iters);
    for (int i = 0; i < iters; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    std::sort(t.begin(), t.end());
    return t[iters / 2];
}
template <typename F> static float amort(F f, int reps = 50) {
    return med([&] { for (int i = 0; i < reps; ++i) f(); }, 3, 11) / reps;
}

int main() {
    size_t G = 1ull << 30;
    void *a, *b; CK(cudaMalloc(&a, G)); CK(cudaMalloc(&b, G));
    CK(cudaMemset(a, 1, G));
    unsigned* out; CK(cudaMalloc(&out, 1 << 20));
    float c1 = med([&] { CK(cudaMemcpyAsync(b, a, G, cudaMemcpyDeviceToDevice)); });
    printf("copy 1GiB %.4f ms %.0f GB/s\n", c1, 2.0 * G / c1 / 1e6);
    printf("empty kernel per-launch %.4f ms, amortised %.4f ms\n", med([&] { empty_k<<<1, 32>>>(); }), amort([&] { empty_k<<<1, 32>>>(); }));
    for (size_t mb : {64, 128}) {
        size_t bytes = mb << 20, vecs = bytes / 16;
        float cp = med([&] { CK(cudaMemcpyAsync(b, a, bytes / 2, cudaMemcpyDeviceToDevice)); });
        printf("%zu MiB: same-bytes copy %.4f ms\n", mb, cp);
        const uint4* x = (const uint4*)a;
        auto rep = [&](const char* name, auto f) {
            float m = med(f), am = amort(f);
            printf("%zu MiB %-28s per-launch %.4f ms (%.0f GB/s, of_copy %.3f)  amortised %.4f ms\n", mb, name, m, bytes / m / 1e6, bytes / m / 1e6 / (2.0 * G / c1 / 1e6), am);
        };
        long long planes = bytes / 32768;
        rep("plane/blk 256t x8", [&] { read_k<8><<<planes, 256>>>(x, out, 2048); });
        rep("plane/blk 256t x4", [&] { read_k<4><<<planes, 256>>>(x, out, 2048); });
        rep("plane/blk 128t x16", [&] { read_k<16><<<planes, 128>>>(x, out, 2048); });
        rep("2plane/blk 256t x8", [&] { read_k<8><<<planes / 2, 256>>>(x, out, 4096); });
        rep("halfplane/blk 256t x4", [&] { read_k<4><<<planes * 2, 256>>>(x, out, 1024); });
        for (int bps : {4, 8, 16}) {
            char nm[64]; snprintf(nm, 64, "grid-stride 132x%d", bps);
            rep(nm, [&] { read_gs<<<132 * bps, 256>>>(x, out, vecs); });
        }
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
