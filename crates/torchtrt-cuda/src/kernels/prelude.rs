//! CUDA C shared by the core-layer programs (no toolkit headers: NVRTC compiles it as is):
//! element loads that widen f16 and bf16 to f32 and stores that round back to nearest
//! even, warp and block reductions, and the naming of per-dtype entry points.

use std::sync::LazyLock;

use torchtrt_plugin_api::DType;

use super::ProgramSource;

/// Prepended to every core program by [`Program`].
pub(crate) const PRELUDE: &str = r#"
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

#define LOAD(D, p, i) Elem<D>::load((const typename D::T*)(p), (i))
#define STORE(D, p, i, v) Elem<D>::store((typename D::T*)(p), (i), (v))

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
__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
   `scratch` holds 32 floats of shared memory. */
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : -__int_as_float(0x7f800000);
    return warp_max(v);
}

/* A grid-stride loop of `i` (i64) over `0..total`. */
#define GRID_LOOP(i, total) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (total); \
         i += (i64)gridDim.x * blockDim.x)

#define FOR_EACH_DTYPE(M) M(f32, F32) M(f16, F16) M(bf16, BF16)
"#;

/// A core program: the prelude followed by `body`, built once.
pub(crate) struct Program {
    name: &'static str,
    source: LazyLock<String>,
}

impl Program {
    /// A program named `name` whose source is `PRELUDE` + `body()`.
    pub(crate) const fn new(name: &'static str, body: fn() -> String) -> Program {
        Program {
            name,
            source: LazyLock::new(body),
        }
    }

    /// The source to compile.
    pub(crate) fn source(&'static self) -> ProgramSource {
        ProgramSource {
            name: self.name,
            source: self.source.as_str(),
        }
    }
}

/// `PRELUDE` followed by `body`.
pub(crate) fn with_prelude(body: &str) -> String {
    format!("{PRELUDE}{body}")
}

/// The entry-point suffix of a float dtype the core kernels support (`f32`, `f16`,
/// `bf16`), `None` for others.
pub(crate) fn dtype_suffix(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F32 => Some("f32"),
        DType::F16 => Some("f16"),
        DType::BF16 => Some("bf16"),
        _ => None,
    }
}
