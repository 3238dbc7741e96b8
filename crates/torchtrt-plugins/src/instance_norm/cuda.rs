//! The instance-normalisation CUDA kernel: one block per (n, c) plane. The block reads the
//! plane once for shifted sums (the plane's first element as shift), reduces them through
//! shared memory, then reads it again (from L2 for planes that fit) to apply the affine map
//! and the optional leaky relu. 16-byte vector accesses when the plane allows them.

use torchtrt_plugin_api::{CudaLaunch, DType, PluginResult};

use crate::cuda::{self, Args, Program};
use crate::support::Origin;

const PROGRAM: Program = Program {
    name: "instance_norm",
    source: r#"
__device__ __forceinline__ float block_sum(float v, float* shared) {
    v = warp_sum(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = (threadIdx.x < warps) ? shared[threadIdx.x] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) shared[32] = v;
    __syncthreads();
    return shared[32];
}

__device__ __forceinline__ float affine(float v, float mean, float scale, float bias,
                                        int relu, float alpha) {
    float r = fmaf(v - mean, scale, bias);
    return (relu && r < 0.0f) ? r * alpha : r;
}

template <typename D>
__device__ __forceinline__ void inorm_impl(const typename D::T* x, typename D::T* y,
        const float* params, i64 plane, int channels, float eps, int relu, float alpha,
        int vec) {
    __shared__ float shared[33];
    const int V = Vec16<D>::V;
    i64 p = blockIdx.x;
    int c = (int)(p % channels);
    const typename D::T* xp = x + p * plane;
    typename D::T* yp = y + p * plane;
    float shift = Elem<D>::load(xp, 0);
    float s = 0.0f, ss = 0.0f;
    i64 nv = vec ? plane / V : 0;
    for (i64 i = threadIdx.x; i < nv; i += blockDim.x) {
        float a[V];
        Vec16<D>::load(xp, i * V, a);
#pragma unroll
        for (int k = 0; k < V; ++k) { float d = a[k] - shift; s += d; ss = fmaf(d, d, ss); }
    }
    for (i64 i = nv * V + threadIdx.x; i < plane; i += blockDim.x) {
        float d = Elem<D>::load(xp, i) - shift; s += d; ss = fmaf(d, d, ss);
    }
    s = block_sum(s, shared);
    ss = block_sum(ss, shared);
    float n = (float)plane;
    float dmean = s / n;
    float var = fmaxf(ss / n - dmean * dmean, 0.0f);
    float mean = shift + dmean;
    float scale = params[c] * rsqrtf(var + eps);
    float bias = params[channels + c];
    for (i64 i = threadIdx.x; i < nv; i += blockDim.x) {
        float a[V];
        Vec16<D>::load(xp, i * V, a);
#pragma unroll
        for (int k = 0; k < V; ++k) a[k] = affine(a[k], mean, scale, bias, relu, alpha);
        Vec16<D>::store(yp, i * V, a);
    }
    for (i64 i = nv * V + threadIdx.x; i < plane; i += blockDim.x)
        Elem<D>::store(yp, i, affine(Elem<D>::load(xp, i), mean, scale, bias, relu, alpha));
}

#define INORM(name, D) \
extern "C" __global__ void instance_norm_##name(const D::T* x, D::T* y, const float* params, \
        i64 plane, int channels, float eps, int relu, float alpha, int vec) \
{ inorm_impl<D>(x, y, params, plane, channels, eps, relu, alpha, vec); }
FOR_EACH_DTYPE(INORM)
"#,
};

/// The layer's parameters as the kernel takes them.
pub(super) struct Params<'a> {
    pub(super) scales: &'a [f32],
    pub(super) bias: &'a [f32],
    pub(super) epsilon: f32,
    pub(super) leaky_slope: Option<f32>,
}

/// Queues instance normalisation of the launch's one input into its one output.
pub(super) fn enqueue(origin: &Origin, p: &Params<'_>, cuda: &CudaLaunch<'_>) -> PluginResult<()> {
    let (x, y, n) = origin.check_unary_cuda(cuda, None)?;
    let shape = &x.desc.shape;
    if !(3..=5).contains(&shape.len()) {
        return Err(origin.input_error(format!("input rank {} is outside 3..=5", shape.len())));
    }
    let dtype = x.desc.dtype;
    let kernel = match dtype {
        DType::F32 => "instance_norm_f32",
        DType::F16 => "instance_norm_f16",
        DType::BF16 => "instance_norm_bf16",
        other => return Err(origin.input_error(format!("no CUDA kernel for {other}"))),
    };
    let plane: usize = shape[2..].iter().map(|&d| d as usize).product();
    if plane == 0 || n == 0 {
        return Ok(());
    }
    let planes = n / plane;
    let params: Vec<f32> = p.scales.iter().chain(p.bias).copied().collect();
    let params = cuda::constant(cuda, bytemuck::cast_slice(&params))?;
    let lanes = 16 / dtype.size();
    let vec = x.ptr.is_multiple_of(16) && y.ptr.is_multiple_of(16) && plane.is_multiple_of(lanes);
    let threads = (plane / lanes).next_power_of_two().clamp(64, 1024) as u32;
    let grid = u32::try_from(planes)
        .map_err(|_| origin.input_error(format!("{planes} planes exceed one CUDA grid")))?;
    let args = Args::default()
        .ptr(x.ptr)
        .ptr(y.ptr)
        .ptr(params)
        .i64(plane as i64)
        .i32(p.scales.len() as i32)
        .f32(p.epsilon)
        .i32(p.leaky_slope.is_some() as i32)
        .f32(p.leaky_slope.unwrap_or(0.0))
        .i32(vec as i32);
    // SAFETY: the arguments match the kernel; the tensors were checked by
    // `check_unary_cuda` and the parameter table lives for the process.
    unsafe {
        cuda::launch(
            &PROGRAM,
            kernel,
            cuda,
            (grid, 1, 1),
            (threads, 1, 1),
            0,
            args,
        )
    }
}
