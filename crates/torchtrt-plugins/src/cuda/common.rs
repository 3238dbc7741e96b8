//! CUDA C shared by every plugin program: element loads and stores that widen f16 and bf16
//! to f32 and round back to nearest even, so kernels compute in f32 like the CPU kernels.
//! No toolkit headers are needed (NVRTC compiles it as is).

/// Prepended to every plugin program.
pub(crate) const COMMON: &str = r#"
typedef unsigned short u16;
typedef long long i64;

struct F32 { typedef float T; };
struct F16 { typedef u16 T; };
struct BF16 { typedef u16 T; };

__device__ __forceinline__ float h2f(u16 h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ u16 f2h(float f) {
    u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float b2f(u16 b) { return __uint_as_float(((unsigned)b) << 16); }
__device__ __forceinline__ u16 f2b(float f) {
#if __CUDA_ARCH__ >= 800
    u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
#endif
}

template <typename D> struct Elem;
template <> struct Elem<F32> {
    static __device__ __forceinline__ float load(const float* p, i64 i) { return p[i]; }
    static __device__ __forceinline__ void store(float* p, i64 i, float v) { p[i] = v; }
};
template <> struct Elem<F16> {
    static __device__ __forceinline__ float load(const u16* p, i64 i) { return h2f(p[i]); }
    static __device__ __forceinline__ void store(u16* p, i64 i, float v) { p[i] = f2h(v); }
};
template <> struct Elem<BF16> {
    static __device__ __forceinline__ float load(const u16* p, i64 i) { return b2f(p[i]); }
    static __device__ __forceinline__ void store(u16* p, i64 i, float v) { p[i] = f2b(v); }
};

/* 16-byte vectors: V elements per uint4. */
template <typename D> struct Vec16 {
    static const int V = 16 / sizeof(typename D::T);
    static __device__ __forceinline__ void load(const typename D::T* p, i64 i, float* out) {
        uint4 raw = *reinterpret_cast<const uint4*>(p + i);
        unpack(raw, out);
    }
    static __device__ __forceinline__ void unpack(uint4 raw, float* out) {
        const typename D::T* e = reinterpret_cast<const typename D::T*>(&raw);
#pragma unroll
        for (int k = 0; k < V; ++k) out[k] = Elem<D>::load(e, k);
    }
    static __device__ __forceinline__ void store(typename D::T* p, i64 i, const float* in) {
        uint4 raw;
        typename D::T* e = reinterpret_cast<typename D::T*>(&raw);
#pragma unroll
        for (int k = 0; k < V; ++k) Elem<D>::store(e, k, in[k]);
        *reinterpret_cast<uint4*>(p + i) = raw;
    }
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#define FOR_EACH_DTYPE(M) M(f32, F32) M(f16, F16) M(bf16, BF16)
"#;
