//! The GELU CUDA kernel: one pass with 16-byte vector loads and stores, the optional bias
//! added along the last dimension, computed in f32 for f32, f16 and bf16.

use torchtrt_plugin_api::{CudaLaunch, PluginResult};

use super::Form;
use crate::cuda::{self, Args, Program};
use crate::support::Origin;

const PROGRAM: Program = Program {
    name: "gelu",
    source: r#"
template <int FORM> __device__ __forceinline__ float gelu(float v) {
    if (FORM == 0) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(u));
}

/* Streaming (evict-first) 16-byte load and store. */
__device__ __forceinline__ uint4 load_cs(const uint4* p) {
    uint4 r;
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ void store_cs(uint4* p, uint4 v) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

/* U 16-byte vectors per thread per step, all loaded before any is computed; the grid strides
   over the vectors, then over the scalar tail. HINT: streaming loads and stores. */
template <typename D, int FORM, int U, int BIAS, int HINT>
__device__ __forceinline__ void gelu_impl(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, const float* __restrict__ bias, i64 n, i64 last, int vec) {
    const int V = Vec16<D>::V;
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 nvec = vec ? n / V : 0;
    i64 step = (i64)gridDim.x * blockDim.x * U;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    for (i64 b = (i64)blockIdx.x * blockDim.x * U + threadIdx.x; b < nvec; b += step) {
        uint4 raw[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (b + u * blockDim.x < nvec)
                raw[u] = HINT ? load_cs(xv + b + u * blockDim.x) : __ldg(xv + b + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            i64 i = b + u * blockDim.x;
            if (i >= nvec) break;
            float a[V];
            Vec16<D>::unpack(raw[u], a);
#pragma unroll
            for (int k = 0; k < V; ++k) {
                float t = a[k];
                if (BIAS) t += bias[(i * V + k) % last];
                a[k] = gelu<FORM>(t);
            }
            if (HINT) {
                uint4 o;
                typename D::T* e = reinterpret_cast<typename D::T*>(&o);
#pragma unroll
                for (int k = 0; k < V; ++k) Elem<D>::store(e, k, a[k]);
                store_cs(reinterpret_cast<uint4*>(y) + i, o);
            } else {
                Vec16<D>::store(y, i * V, a);
            }
        }
    }
    for (i64 i = nvec * V + tid; i < n; i += (i64)gridDim.x * blockDim.x) {
        float t = Elem<D>::load(x, i);
        if (BIAS) t += bias[i % last];
        Elem<D>::store(y, i, gelu<FORM>(t));
    }
}

#define GELU_F(name, D, F, U, H) \
extern "C" __global__ void __launch_bounds__(256) gelu_##F##_##U##_##H##_##name(const D::T* x, D::T* y, const float* b, i64 n, i64 last, int vec) \
{ if (b) gelu_impl<D, F, U, 1, H>(x, y, b, n, last, vec); else gelu_impl<D, F, U, 0, H>(x, y, b, n, last, vec); }
#define GELU_U(name, D, F, U) GELU_F(name, D, F, U, 0) GELU_F(name, D, F, U, 1)
#define GELU(name, D) GELU_U(name, D, 0, 2) GELU_U(name, D, 0, 4) GELU_U(name, D, 1, 2) \
GELU_U(name, D, 1, 4)
FOR_EACH_DTYPE(GELU)
"#,
};

/// Queues GELU of the launch's one input into its one output.
pub(super) fn enqueue(
    origin: &Origin,
    form: Form,
    bias: Option<&[f32]>,
    cuda: &CudaLaunch<'_>,
) -> PluginResult<()> {
    let (x, y, n) = origin.check_unary_cuda(cuda, None)?;
    let dtype = x.desc.dtype;
    let suffix = cuda::suffix(dtype)
        .ok_or_else(|| origin.input_error(format!("no CUDA kernel for {dtype}")))?;
    let form = match form {
        Form::Erf => 0,
        Form::Tanh => 1,
    };
    // Measured on an H200: f32 is fastest with 2 vectors per thread and plain accesses,
    // f16/bf16 with 4 and streaming ones.
    let (unroll, hint) = if dtype.size() == 4 { (2, 0) } else { (4, 1) };
    let threads = 256;
    let name = format!("gelu_{form}_{unroll}_{hint}_{suffix}");
    let last = x.desc.shape.last().copied().unwrap_or(1).max(1);
    let bias_ptr = match bias {
        Some(b) => cuda::constant(cuda, bytemuck::cast_slice(b))?,
        None => 0,
    };
    let vec = (x.ptr.is_multiple_of(16) && y.ptr.is_multiple_of(16)) as i32;
    let per_block = (threads * unroll * (16 / dtype.size())) as u64;
    let blocks = (n as u64).div_ceil(per_block).clamp(1, 1 << 20) as u32;
    let args = Args::default()
        .ptr(x.ptr)
        .ptr(y.ptr)
        .ptr(bias_ptr)
        .i64(n as i64)
        .i64(last)
        .i32(vec);
    // SAFETY: the arguments match the kernel; the pointers come from the launch, sized by
    // `check_unary_cuda`, and the bias table lives for the process.
    unsafe {
        cuda::launch(
            &PROGRAM,
            &name,
            cuda,
            (blocks, 1, 1),
            (threads as u32, 1, 1),
            0,
            args,
        )
    }
}
