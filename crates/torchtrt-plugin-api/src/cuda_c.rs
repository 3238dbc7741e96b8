//! CUDA C that kernels written for torchtrt share, compiled as is by NVRTC (no toolkit
//! headers): dtype tags, f16/bf16 ↔ f32 conversions rounding to nearest even, and
//! `Elem<D>::load`/`store` that widen to f32 and round back. The built-in plugins and the
//! CUDA backend's core kernels prepend it to their programs; a plugin library's CUDA C can
//! too.

/// The shared CUDA C: `u16`/`i64` typedefs, the dtype tags `F32`/`F16`/`BF16` (each with its
/// storage type `T`), `h2f`/`f2h`/`b2f`/`f2b`, and `Elem<D>` with `load(p, i)`/`store(p, i, v)`
/// computing in f32.
pub const ELEMENTS: &str = r#"
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

"#;
