//! The instance-normalisation CUDA kernel: one block per (n, c) plane. The block reads the
//! plane once for shifted sums (the plane's first element as shift), 8 16-byte vectors per
//! thread in flight, reduces them through shared memory, then applies the affine map and the
//! optional leaky relu to the plane kept in registers (when it fits) or read again (from L2).
//! Scalar accesses when the plane is not whole aligned vectors.

use torchtrt_plugin_api::{CudaLaunch, PluginResult};

use crate::cuda::{self, Args, Program};
use crate::support::Origin;

pub(crate) const PROGRAM: Program = Program {
    name: "instance_norm",
    source: r#"
/* Sums s and ss over the block; every thread gets both. */
__device__ __forceinline__ float2 block_sum2(float s, float ss, float2* shared) {
    s = warp_sum(s);
    ss = warp_sum(ss);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    if (lane == 0) shared[warp] = make_float2(s, ss);
    __syncthreads();
    if (warp == 0) {
        float2 v = lane < warps ? shared[lane] : make_float2(0.0f, 0.0f);
        v.x = warp_sum(v.x);
        v.y = warp_sum(v.y);
        if (lane == 0) shared[32] = v;
    }
    __syncthreads();
    return shared[32];
}

__device__ __forceinline__ float affine(float v, float mean, float scale, float bias,
                                        int relu, float alpha) {
    float r = fmaf(v - mean, scale, bias);
    return (relu && r < 0.0f) ? r * alpha : r;
}

/* U 16-byte vectors per thread per step, loaded before use. KEEP: the whole plane is one
   step (nv <= U * blockDim.x), held in registers between the two phases. */
template <typename D, int U, int KEEP>
__device__ __forceinline__ void inorm_impl(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, const float* __restrict__ params, i64 plane,
        int channels, float eps, int relu, float alpha, int vec) {
    __shared__ float2 shared[33];
    const int V = Vec16<D>::V;
    i64 p = blockIdx.x;
    int c = (int)(p % channels);
    const typename D::T* xp = x + p * plane;
    typename D::T* yp = y + p * plane;
    const uint4* xv = reinterpret_cast<const uint4*>(xp);
    float shift = Elem<D>::load(xp, 0);
    float s = 0.0f, ss = 0.0f;
    i64 nv = vec ? plane / V : 0;
    i64 step = (i64)blockDim.x * U;
    uint4 raw[U];
    for (i64 b = threadIdx.x; b < nv; b += step) {
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (b + u * blockDim.x < nv) raw[u] = __ldg(xv + b + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (b + u * blockDim.x >= nv) break;
            float a[V];
            Vec16<D>::unpack(raw[u], a);
#pragma unroll
            for (int k = 0; k < V; ++k) { float d = a[k] - shift; s += d; ss = fmaf(d, d, ss); }
        }
        if (KEEP) break;
    }
    for (i64 i = nv * V + threadIdx.x; i < plane; i += blockDim.x) {
        float d = Elem<D>::load(xp, i) - shift; s += d; ss = fmaf(d, d, ss);
    }
    float2 t = block_sum2(s, ss, shared);
    float n = (float)plane;
    float dmean = t.x / n;
    float var = fmaxf(t.y / n - dmean * dmean, 0.0f);
    float mean = shift + dmean;
    float scale = params[c] * rsqrtf(var + eps);
    float bias = params[channels + c];
    for (i64 b = threadIdx.x; b < nv; b += step) {
        if (!KEEP) {
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (b + u * blockDim.x < nv) raw[u] = __ldg(xv + b + u * blockDim.x);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            i64 i = b + u * blockDim.x;
            if (i >= nv) break;
            float a[V];
            Vec16<D>::unpack(raw[u], a);
#pragma unroll
            for (int k = 0; k < V; ++k) a[k] = affine(a[k], mean, scale, bias, relu, alpha);
            Vec16<D>::store(yp, i * V, a);
        }
        if (KEEP) break;
    }
    for (i64 i = nv * V + threadIdx.x; i < plane; i += blockDim.x)
        Elem<D>::store(yp, i, affine(Elem<D>::load(xp, i), mean, scale, bias, relu, alpha));
}

#define INORM_U(name, D, U, K) \
extern "C" __global__ void instance_norm_##U##_##K##_##name(const D::T* x, D::T* y, const float* params, \
        i64 plane, int channels, float eps, int relu, float alpha, int vec) \
{ inorm_impl<D, U, K>(x, y, params, plane, channels, eps, relu, alpha, vec); }
#define INORM(name, D) INORM_U(name, D, 8, 0) INORM_U(name, D, 8, 1)
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
    let suffix = cuda::suffix(dtype)
        .ok_or_else(|| origin.input_error(format!("no CUDA kernel for {dtype}")))?;
    let plane: usize = shape[2..].iter().map(|&d| d as usize).product();
    if plane == 0 || n == 0 {
        return Ok(());
    }
    let planes = n / plane;
    let params: Vec<f32> = p.scales.iter().chain(p.bias).copied().collect();
    let params = cuda::constant(cuda, bytemuck::cast_slice(&params))?;
    let lanes = 16 / dtype.size();
    let vec = x.ptr.is_multiple_of(16) && y.ptr.is_multiple_of(16) && plane.is_multiple_of(lanes);
    let nv = if vec { plane / lanes } else { 0 };
    let unroll = 8;
    let threads = (nv.max(plane / 8) / unroll)
        .next_power_of_two()
        .clamp(64, 1024);
    let keep = usize::from(nv > 0 && nv <= threads * unroll);
    let kernel = format!("instance_norm_{unroll}_{keep}_{suffix}");
    let threads = threads as u32;
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
            &kernel,
            cuda,
            (grid, 1, 1),
            (threads, 1, 1),
            0,
            args,
        )
    }
}
