//! The GELU CUDA kernel: one pass with 16-byte vector loads and stores, the optional bias
//! added along the last dimension, computed in f32 for f32, f16 and bf16 with a branch-free
//! erfc (cheap enough that 16-bit tensors run at the memory bound).

use torchtrt_plugin_api::{CudaLaunch, PluginResult};

use super::Form;
use crate::cuda::{self, Args, Program};
use crate::support::Origin;

pub(crate) const PROGRAM: Program = Program {
    name: "gelu",
    source: r#"
__device__ __forceinline__ float ex2_approx(float x) {
    float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
    float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}

/* FORM 0: x Φ(x) with Φ(−|x|) = erfc(|x| / √2) / 2 = t e^(P(t) − z²) / 2, t = 1 / (1 + z / 2),
   P the rational Chebyshev fit of Numerical Recipes' erfcc (relative error < 1.2e-7 for every
   z ≥ 0): branch-free, and accurate in the negative tail where 1 + erf(x) cancels.
   FORM 1: the tanh form as x σ(2u) = x / (1 + e^(−2u)). */
template <int FORM> __device__ __forceinline__ float gelu(float v) {
    const float LOG2E = 1.4426950408889634f;
    if (FORM == 1) {
        float u = 0.7978845608028654f * fmaf(0.044715f * v, v * v, v);
        return v * rcp_approx(1.0f + ex2_approx(-2.0f * LOG2E * u));
    }
    float z = fabsf(v) * 0.70710678118654752f;
    float t = rcp_approx(fmaf(0.5f, z, 1.0f));
    float p = 0.17087277f;
    p = fmaf(p, t, -0.82215223f);
    p = fmaf(p, t, 1.48851587f);
    p = fmaf(p, t, -1.13520398f);
    p = fmaf(p, t, 0.27886807f);
    p = fmaf(p, t, -0.18628806f);
    p = fmaf(p, t, 0.09678418f);
    p = fmaf(p, t, 0.37409196f);
    p = fmaf(p, t, 1.00002368f);
    p = fmaf(p, t, -1.26551223f);
    float h = 0.5f * t * ex2_approx(fmaf(-z, z, p) * LOG2E);
    return v * (v >= 0.0f ? 1.0f - h : h);
}

/* U 16-byte vectors per thread per step, all loaded before any is computed; the grid strides
   over the vectors, then over the scalar tail. */
template <typename D, int FORM, int U, int BIAS>
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
                raw[u] = __ldg(xv + b + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            i64 i = b + u * blockDim.x;
            if (i >= nvec) break;
            float a[V];
            Vec16<D>::unpack(raw[u], a);
            i64 c = BIAS ? (i * V) % last : 0;
#pragma unroll
            for (int k = 0; k < V; ++k) {
                float t = a[k];
                if (BIAS) {
                    t += bias[c];
                    if (++c == last) c = 0;
                }
                a[k] = gelu<FORM>(t);
            }
            Vec16<D>::store(y, i * V, a);
        }
    }
    for (i64 i = nvec * V + tid; i < n; i += (i64)gridDim.x * blockDim.x) {
        float t = Elem<D>::load(x, i);
        if (BIAS) t += bias[i % last];
        Elem<D>::store(y, i, gelu<FORM>(t));
    }
}

/* One entry point per bias choice, so that the bias-free kernel is not given the registers
   of the bias path (which would cost occupancy). */
#define GELU_B(name, D, F, U, B) \
extern "C" __global__ void __launch_bounds__(256) gelu_##F##_##U##_##B##_##name(const D::T* x, D::T* y, const float* b, i64 n, i64 last, int vec) \
{ gelu_impl<D, F, U, B>(x, y, b, n, last, vec); }
#define GELU_U(name, D, F, U) GELU_B(name, D, F, U, 0) GELU_B(name, D, F, U, 1)
#define GELU(name, D) GELU_U(name, D, 0, 1) GELU_U(name, D, 0, 2) GELU_U(name, D, 1, 1) \
GELU_U(name, D, 1, 2)
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
    // Measured on an H200 (BENCHMARKS.md): f32 is fastest with one vector per thread, f16/bf16
    // with two; streaming (evict-first) hints made no difference.
    let unroll = if dtype.size() == 4 { 1 } else { 2 };
    let threads = 256;
    let name = format!("gelu_{form}_{unroll}_{}_{suffix}", bias.is_some() as u8);
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
