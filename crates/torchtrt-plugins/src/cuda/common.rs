//! CUDA C shared by every plugin program, after plugin-api's
//! [`ELEMENTS`](torchtrt_plugin_api::cuda_c::ELEMENTS) (f16/bf16 loads widening to f32, stores
//! rounding to nearest even): 16-byte vector access and reductions. No toolkit headers are
//! needed (NVRTC compiles it as is).

/// Prepended (after `ELEMENTS`) to every plugin program.
pub(crate) const COMMON: &str = r#"
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
