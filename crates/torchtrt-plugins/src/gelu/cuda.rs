//! The GELU CUDA kernel: one pass with 16-byte vector loads and stores, the optional bias
//! added along the last dimension, computed in f32 for f32, f16 and bf16.

use torchtrt_plugin_api::{CudaLaunch, DType, PluginResult};

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

template <typename D, int FORM>
__device__ __forceinline__ void gelu_impl(const typename D::T* x, typename D::T* y,
                                          const float* bias, i64 n, i64 last, int vec) {
    const int V = Vec16<D>::V;
    i64 stride = (i64)gridDim.x * blockDim.x;
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 nvec = vec ? n / V : 0;
    i64 pairs = nvec / 2;
    for (i64 v = tid; v < pairs; v += stride) {
        uint4 r0 = *reinterpret_cast<const uint4*>(x + 2 * v * V);
        uint4 r1 = *reinterpret_cast<const uint4*>(x + (2 * v + 1) * V);
        float a[2 * V];
        Vec16<D>::unpack(r0, a);
        Vec16<D>::unpack(r1, a + V);
#pragma unroll
        for (int k = 0; k < 2 * V; ++k) {
            float t = a[k];
            if (bias) t += bias[(2 * v * V + k) % last];
            a[k] = gelu<FORM>(t);
        }
        Vec16<D>::store(y, 2 * v * V, a);
        Vec16<D>::store(y, (2 * v + 1) * V, a + V);
    }
    for (i64 v = 2 * pairs + tid; v < nvec; v += stride) {
        float a[V];
        Vec16<D>::load(x, v * V, a);
#pragma unroll
        for (int k = 0; k < V; ++k) {
            float t = a[k];
            if (bias) t += bias[(v * V + k) % last];
            a[k] = gelu<FORM>(t);
        }
        Vec16<D>::store(y, v * V, a);
    }
    for (i64 i = nvec * V + tid; i < n; i += stride) {
        float t = Elem<D>::load(x, i);
        if (bias) t += bias[i % last];
        Elem<D>::store(y, i, gelu<FORM>(t));
    }
}

#define GELU(name, D) \
extern "C" __global__ void gelu_erf_##name(const D::T* x, D::T* y, const float* b, i64 n, i64 last, int vec) \
{ gelu_impl<D, 0>(x, y, b, n, last, vec); } \
extern "C" __global__ void gelu_tanh_##name(const D::T* x, D::T* y, const float* b, i64 n, i64 last, int vec) \
{ gelu_impl<D, 1>(x, y, b, n, last, vec); }
FOR_EACH_DTYPE(GELU)
"#,
};

fn kernel(form: Form, dtype: DType) -> Option<&'static str> {
    Some(match (form, dtype) {
        (Form::Erf, DType::F32) => "gelu_erf_f32",
        (Form::Erf, DType::F16) => "gelu_erf_f16",
        (Form::Erf, DType::BF16) => "gelu_erf_bf16",
        (Form::Tanh, DType::F32) => "gelu_tanh_f32",
        (Form::Tanh, DType::F16) => "gelu_tanh_f16",
        (Form::Tanh, DType::BF16) => "gelu_tanh_bf16",
        _ => return None,
    })
}

/// Queues GELU of the launch's one input into its one output.
pub(super) fn enqueue(
    origin: &Origin,
    form: Form,
    bias: Option<&[f32]>,
    cuda: &CudaLaunch<'_>,
) -> PluginResult<()> {
    let (x, y, n) = origin.check_unary_cuda(cuda, None)?;
    let dtype = x.desc.dtype;
    let name = kernel(form, dtype)
        .ok_or_else(|| origin.input_error(format!("no CUDA kernel for {dtype}")))?;
    let last = x.desc.shape.last().copied().unwrap_or(1).max(1);
    let bias_ptr = match bias {
        Some(b) => cuda::constant(cuda, bytemuck::cast_slice(b))?,
        None => 0,
    };
    let vec = (x.ptr.is_multiple_of(16) && y.ptr.is_multiple_of(16)) as i32;
    let per_block = 512 * (16 / dtype.size()) as u64;
    let blocks = (n as u64).div_ceil(per_block).clamp(1, 1 << 16) as u32;
    let args = Args::default()
        .ptr(x.ptr)
        .ptr(y.ptr)
        .ptr(bias_ptr)
        .i64(n as i64)
        .i64(last)
        .i32(vec);
    // SAFETY: the arguments match the kernel; the pointers come from the launch, sized by
    // `check_unary_cuda`, and the bias table lives for the process.
    unsafe { cuda::launch(&PROGRAM, name, cuda, (blocks, 1, 1), (256, 1, 1), 0, args) }
}
