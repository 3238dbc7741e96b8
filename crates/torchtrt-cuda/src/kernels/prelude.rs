//! CUDA C shared by the core-layer programs (no toolkit headers: NVRTC compiles it as is):
//! element loads that widen f16 and bf16 to f32 and stores that round back to nearest
//! even, warp and block reductions, and the naming of per-dtype entry points.

use std::sync::LazyLock;

use torchtrt_plugin_api::DType;
use torchtrt_plugin_api::cuda_c::ELEMENTS;

use super::ProgramSource;

/// Prepended (after plugin-api's `ELEMENTS`) to every core program by [`Program`].
pub(crate) const PRELUDE: &str = r#"
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

/* Elements of D packed in 32-bit words, in registers: element j of the words w as a float,
   and word k of the floats v packed as D. A vector load stays one instruction this way:
   through a union in memory, ptxas split each 16-byte load into 2-byte ones. */
template <typename D> struct Packed;
template <> struct Packed<F32> {
    static __device__ __forceinline__ float get(const unsigned* w, int j) {
        return __uint_as_float(w[j]);
    }
    static __device__ __forceinline__ unsigned word(const float* v, int k) {
        return __float_as_uint(v[k]);
    }
};
template <> struct Packed<F16> {
    static __device__ __forceinline__ float get(const unsigned* w, int j) {
        return h2f((u16)(w[j >> 1] >> ((j & 1) * 16)));
    }
    static __device__ __forceinline__ unsigned word(const float* v, int k) {
        return (unsigned)f2h(v[2 * k]) | ((unsigned)f2h(v[2 * k + 1]) << 16);
    }
};
template <> struct Packed<BF16> {
    static __device__ __forceinline__ float get(const unsigned* w, int j) {
        return b2f((u16)(w[j >> 1] >> ((j & 1) * 16)));
    }
    static __device__ __forceinline__ unsigned word(const float* v, int k) {
        return (unsigned)f2b(v[2 * k]) | ((unsigned)f2b(v[2 * k + 1]) << 16);
    }
};

/* Elements of a 16-byte vector of D, and its lanes as floats: element `i` of `p` (a multiple
   of V from a 16-byte-aligned base) and the V after it. */
template <typename D> struct Lanes {
    static const int V = 16 / sizeof(typename D::T);
    static __device__ __forceinline__ void load(const void* p, unsigned long long i, float* out) {
        const uint4 q = *reinterpret_cast<const uint4*>((const typename D::T*)p + i);
        const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < V; ++j) out[j] = Packed<D>::get(w, j);
    }
    static __device__ __forceinline__ void store(void* p, unsigned long long i, const float* in) {
        uint4 q;
        q.x = Packed<D>::word(in, 0);
        q.y = Packed<D>::word(in, 1);
        q.z = Packed<D>::word(in, 2);
        q.w = Packed<D>::word(in, 3);
        *reinterpret_cast<uint4*>((typename D::T*)p + i) = q;
    }
};

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
    /// A program named `name` whose source is `body()` (built with [`with_prelude`]).
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

/// Compiles `program` with NVRTC for sm_75, sm_80 and, when its source has a path of its
/// own for it, sm_90 ([`archs_of`]), panicking with the compiler's log on an error; skipped
/// when NVRTC is not installed, unless `TORCHTRT_REQUIRE_NVRTC=1` (as `scripts/test` sets).
/// Needs no GPU. With `TORCHTRT_CUBIN_DIR` set, cubins for all three are written there
/// (`scripts/kernel_resources`).
#[cfg(test)]
pub(crate) fn assert_compiles(program: &'static Program) {
    let src = program.source();
    assert_source_compiles(src.name, src.source);
}

/// The architectures whose code paths differ; every compile test covers each.
#[cfg(test)]
pub(crate) const TEST_ARCHS: [(u32, u32); 3] = [(7, 5), (8, 0), (9, 0)];

/// The architectures whose code paths differ for `source`: sm_90 compiles the same code as
/// sm_80 unless the source asks for it (`__CUDA_ARCH__ >= 900`), so a source that does not
/// is compiled for [`TEST_ARCHS`] but the last.
#[cfg(test)]
pub(crate) fn archs_of(source: &str) -> &'static [(u32, u32)] {
    if source.contains("__CUDA_ARCH__ >= 900") {
        &TEST_ARCHS
    } else {
        &TEST_ARCHS[..2]
    }
}

/// Whether NVRTC is installed; without it a compile test of `what` skips (printing why),
/// unless `TORCHTRT_REQUIRE_NVRTC=1`, which makes a missing NVRTC a failure.
#[cfg(test)]
pub(crate) fn nvrtc_or_skip(what: &str) -> bool {
    match crate::probe::nvrtc() {
        Ok(()) => true,
        Err(e) => {
            let required = std::env::var("TORCHTRT_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "NVRTC not found but TORCHTRT_REQUIRE_NVRTC=1: {e}"
            );
            eprintln!("NVRTC not found: `{what}` not compiled ({e})");
            false
        }
    }
}

/// [`assert_compiles`] for a program given as its name and complete source.
#[cfg(test)]
pub(crate) fn assert_source_compiles(name: &str, source: &str) {
    use crate::nvrtc::{Arch, compile};
    if !nvrtc_or_skip(name) {
        return;
    }
    let cubins = std::env::var("TORCHTRT_CUBIN_DIR").ok();
    let archs = if cubins.is_some() {
        &TEST_ARCHS[..]
    } else {
        archs_of(source)
    };
    for &arch in archs {
        let image = compile(name, source, Arch::new(arch), &[]).unwrap_or_else(|e| panic!("{e}"));
        if let Some(dir) = &cubins {
            let path = format!("{dir}/{name}_sm{}{}.cubin", arch.0, arch.1);
            std::fs::write(&path, image.cubin).unwrap_or_else(|e| panic!("writing {path}: {e}"));
        }
    }
}

/// `ELEMENTS` and `PRELUDE` followed by `body`.
pub(crate) fn with_prelude(body: &str) -> String {
    format!("{ELEMENTS}{PRELUDE}{body}")
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
