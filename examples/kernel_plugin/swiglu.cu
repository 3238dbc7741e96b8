// SwiGLU on CUDA, for the kernel plugin of swiglu.toml. With `prelude = true` torchtrt
// prepends its CUDA C elements: `Elem<F32>` / `Elem<F16>` load and store in f32.

template <typename D>
__device__ __forceinline__ void swiglu_one(const typename D::T* x, typename D::T* y, i64 i,
                                           i64 d, float alpha) {
    i64 r = i / d, c = i - r * d;
    float a = Elem<D>::load(x, r * 2 * d + c);
    float b = Elem<D>::load(x, r * 2 * d + d + c);
    Elem<D>::store(y, i, a / (1.0f + __expf(-alpha * a)) * b);
}

template <typename D>
__device__ void swiglu(const typename D::T* x, typename D::T* y, i64 n, i64 d, float alpha) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) swiglu_one<D>(x, y, i, d, alpha);
}

template <typename D>
__device__ void swiglu_strided(const typename D::T* x, typename D::T* y, i64 n, i64 d,
                               float alpha) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        swiglu_one<D>(x, y, i, d, alpha);
    }
}

extern "C" __global__ void swiglu_f32(const float* x, float* y, i64 n, i64 d, float alpha) {
    swiglu<F32>(x, y, n, d, alpha);
}
extern "C" __global__ void swiglu_f16(const u16* x, u16* y, i64 n, i64 d, float alpha) {
    swiglu<F16>(x, y, n, d, alpha);
}
extern "C" __global__ void swiglu_strided_f32(const float* x, float* y, i64 n, i64 d,
                                              float alpha) {
    swiglu_strided<F32>(x, y, n, d, alpha);
}
extern "C" __global__ void swiglu_strided_f16(const u16* x, u16* y, i64 n, i64 d,
                                              float alpha) {
    swiglu_strided<F16>(x, y, n, d, alpha);
}
