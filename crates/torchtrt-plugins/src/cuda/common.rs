//! CUDA C shared by every plugin program, after plugin-api's
//! [`ELEMENTS`](torchtrt_plugin_api::cuda_c::ELEMENTS) (f16/bf16 loads widening to f32, stores
//! rounding to nearest even): 16-byte vector access, paired f16/bf16 rounding and reductions.
//! No toolkit headers are needed (NVRTC compiles it as is).

/// Prepended (after `ELEMENTS`) to every plugin program.
pub(crate) const COMMON: &str = r#"
/* Two f32 rounded to nearest even into one packed f16x2 / bf16x2 word (`lo` in the low half):
   one instruction on sm_80+. Pack16 packs a vector's V floats into a uint4 with them. */
__device__ __forceinline__ unsigned f2h2(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
    unsigned r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
#else
    return (unsigned)f2h(lo) | ((unsigned)f2h(hi) << 16);
#endif
}
__device__ __forceinline__ unsigned f2b2(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
    unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
#else
    return (unsigned)f2b(lo) | ((unsigned)f2b(hi) << 16);
#endif
}
/* Two f32 rounded into one packed word of a 16-bit D (`lo` in the low half). */
template <typename D> struct Pack2;
template <> struct Pack2<F16> {
    static __device__ __forceinline__ unsigned of(float lo, float hi) { return f2h2(lo, hi); }
};
template <> struct Pack2<BF16> {
    static __device__ __forceinline__ unsigned of(float lo, float hi) { return f2b2(lo, hi); }
};
template <typename D> struct Pack16 {
    static __device__ __forceinline__ uint4 pack(const float* v) {
        return make_uint4(Pack2<D>::of(v[0], v[1]), Pack2<D>::of(v[2], v[3]),
                          Pack2<D>::of(v[4], v[5]), Pack2<D>::of(v[6], v[7]));
    }
};
template <> struct Pack16<F32> {
    static __device__ __forceinline__ uint4 pack(const float* v) {
        return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]),
                          __float_as_uint(v[3]));
    }
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
    static __device__ __forceinline__ uint4 pack(const float* in) { return Pack16<D>::pack(in); }
    static __device__ __forceinline__ void store(typename D::T* p, i64 i, const float* in) {
        *reinterpret_cast<uint4*>(p + i) = pack(in);
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
