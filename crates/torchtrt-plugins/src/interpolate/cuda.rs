//! The Interpolate CUDA kernels. Every mode reduces to per-axis tap tables, built on the
//! host by the same code as the CPU kernels (`nearest`, `linear`, `cubic`, `pool`, with
//! their coordinate modes, `exclude_outside` and antialias) and uploaded once per distinct
//! table. An output element is the weighted sum (or, for adaptive max pooling, the maximum)
//! of the input elements its taps name. Small tap sets run one thread per output element
//! (neighbouring threads read neighbouring inputs); large windows (adaptive pools) run one
//! warp per output element, lanes spread over the window's rows. Exact ×2 upsampling has a
//! vectorised kernel (`up2`); two-dimensional adaptive pools have their own (`cuda_pool`), and
//! so do tables of at most two taps per axis over rows of whole vectors (`cuda_linear`).

use torchtrt_plugin_api::{CudaLaunch, DType, DeviceTensor, PluginError, PluginResult};

use super::config::Config;
use super::coord::AxisGeom;
use super::cuda_linear::{self, Linear};
use super::cuda_pool::{self, Pools};
use super::mode::Mode;
use super::taps::AxisTaps;
use super::{cubic, linear, nearest, pool};
use crate::cuda::{self, Args, Program};

/// The tap geometry every interpolate kernel takes (`struct Geo`, passed by value; see
/// [`pack_geo`]) and the start value of a sum or max over taps.
macro_rules! geo_c {
    () => {
        r#"
struct Geo {
    i64 in[3], out[3];
    int n[3], idx[3], w[3];
};

template <int MAX>
__device__ __forceinline__ float tap_init() { return MAX ? -__int_as_float(0x7f800000) : 0.0f; }

/* The larger of two values, a NaN in either winning (PyTorch's max pool, and the CPU's). */
__device__ __forceinline__ float max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return (b > a || b != b) ? b : a;
#endif
}
"#
    };
}
pub(super) use geo_c;

pub(crate) const PROGRAM: Program = Program {
    name: "interpolate",
    source: concat!(
        geo_c!(),
        r#"

template <typename D, int MAX>
__device__ __forceinline__ float gather(const typename D::T* src, const int* tab,
        const Geo& g, i64 oz, i64 oy, i64 ox) {
    const float* wt = reinterpret_cast<const float*>(tab);
    float acc = tap_init<MAX>();
    for (int a = 0; a < g.n[0]; ++a) {
        i64 t0 = oz * g.n[0] + a;
        float wz = wt[g.w[0] + t0];
        if (!MAX && wz == 0.0f) continue;
        i64 rz = tab[g.idx[0] + t0] * g.in[1];
        for (int b = 0; b < g.n[1]; ++b) {
            i64 t1 = oy * g.n[1] + b;
            float wy = wt[g.w[1] + t1];
            if (!MAX && wy == 0.0f) continue;
            i64 ry = (rz + tab[g.idx[1] + t1]) * g.in[2];
            float wzy = wz * wy;
            for (int c = 0; c < g.n[2]; ++c) {
                i64 t2 = ox * g.n[2] + c;
                float wx = wt[g.w[2] + t2];
                if (!MAX && wx == 0.0f) continue;
                float v = Elem<D>::load(src, ry + tab[g.idx[2] + t2]);
                acc = MAX ? max_nan(acc, v) : fmaf(wzy * wx, v, acc);
            }
        }
    }
    return acc;
}

/* grid: (x blocks, OY*OZ, planes or fewer); one thread per output element. */
template <typename D, int MAX>
__device__ __forceinline__ void interp_thread(const typename D::T* x, typename D::T* y,
        const int* tab, Geo g, i64 planes) {
    i64 ox = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (ox >= g.out[2]) return;
    i64 oy = blockIdx.y % g.out[1], oz = blockIdx.y / g.out[1];
    i64 in_plane = g.in[0] * g.in[1] * g.in[2];
    i64 out_plane = g.out[0] * g.out[1] * g.out[2];
    i64 o = (oz * g.out[1] + oy) * g.out[2] + ox;
    for (i64 p = blockIdx.z; p < planes; p += gridDim.z)
        Elem<D>::store(y, p * out_plane + o, gather<D, MAX>(x + p * in_plane, tab, g, oz, oy, ox));
}

/* One warp per output element: the warp walks the window's rows, lanes its columns. */
template <typename D, int MAX>
__device__ __forceinline__ void interp_warp(const typename D::T* x, typename D::T* y,
        const int* tab, Geo g, i64 planes) {
    const float* wt = reinterpret_cast<const float*>(tab);
    int lane = threadIdx.x & 31;
    i64 out_plane = g.out[0] * g.out[1] * g.out[2];
    i64 in_plane = g.in[0] * g.in[1] * g.in[2];
    i64 total = planes * out_plane;
    i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 e = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; e < total; e += warps) {
        i64 p = e / out_plane, o = e - p * out_plane;
        i64 ox = o % g.out[2], oy = (o / g.out[2]) % g.out[1], oz = o / (g.out[2] * g.out[1]);
        const typename D::T* src = x + p * in_plane;
        float acc = tap_init<MAX>();
        for (int a = 0; a < g.n[0]; ++a) {
            i64 t0 = oz * g.n[0] + a;
            float wz = wt[g.w[0] + t0];
            if (!MAX && wz == 0.0f) continue;
            i64 rz = tab[g.idx[0] + t0] * g.in[1];
            for (int b = 0; b < g.n[1]; ++b) {
                i64 t1 = oy * g.n[1] + b;
                float wy = wt[g.w[1] + t1];
                if (!MAX && wy == 0.0f) continue;
                i64 ry = (rz + tab[g.idx[1] + t1]) * g.in[2];
                for (int c = lane; c < g.n[2]; c += 32) {
                    i64 t2 = ox * g.n[2] + c;
                    float wx = wt[g.w[2] + t2];
                    if (!MAX && wx == 0.0f) continue;
                    float v = Elem<D>::load(src, ry + tab[g.idx[2] + t2]);
                    acc = MAX ? max_nan(acc, v) : fmaf(wz * wy * wx, v, acc);
                }
            }
        }
        acc = MAX ? warp_max(acc) : warp_sum(acc);
        if (lane == 0) Elem<D>::store(y, e, acc);
    }
}

/* Two adjacent outputs stored at once (8 bytes of f32, 4 of f16/bf16). */
template <typename D> struct Pair {
    static __device__ __forceinline__ void store(u16* p, i64 i, const float* v) {
        *reinterpret_cast<unsigned*>(p + i) = Pack2<D>::of(v[0], v[1]);
    }
};
template <> struct Pair<F32> {
    static __device__ __forceinline__ void store(float* p, i64 i, const float* v) {
        *reinterpret_cast<float2*>(p + i) = make_float2(v[0], v[1]);
    }
};

/* Few taps, summed: one thread per OPT adjacent output columns; the block's (z, y) taps are
   combined into NYZ (row, weight) pairs, the thread's column taps sit in registers, and the
   thread walks `ppt` planes with them. */
template <typename D, int OPT, int NX, int NYZ>
__device__ __forceinline__ void interp_fast(const typename D::T* x, typename D::T* y,
        const int* tab, Geo g, i64 planes, int ppt) {
    const float* wt = reinterpret_cast<const float*>(tab);
    i64 ox = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * OPT;
    if (ox >= g.out[2]) return;
    i64 oy = blockIdx.y % g.out[1], oz = blockIdx.y / g.out[1];
    i64 row[NYZ];
    float wr[NYZ];
#pragma unroll
    for (int j = 0; j < NYZ; ++j) {
        int a = j / g.n[1], b = j - a * g.n[1];
        i64 t0 = oz * g.n[0] + a, t1 = oy * g.n[1] + b;
        row[j] = ((i64)tab[g.idx[0] + t0] * g.in[1] + tab[g.idx[1] + t1]) * g.in[2];
        wr[j] = wt[g.w[0] + t0] * wt[g.w[1] + t1];
    }
    int ix[OPT][NX];
    float wx[OPT][NX];
#pragma unroll
    for (int q = 0; q < OPT; ++q)
#pragma unroll
        for (int c = 0; c < NX; ++c) {
            ix[q][c] = tab[g.idx[2] + (ox + q) * NX + c];
            wx[q][c] = wt[g.w[2] + (ox + q) * NX + c];
        }
    i64 in_plane = g.in[0] * g.in[1] * g.in[2];
    i64 out_plane = g.out[0] * g.out[1] * g.out[2];
    i64 o = (i64)blockIdx.y * g.out[2] + ox;
    i64 p1 = min(planes, (i64)(blockIdx.z + 1) * ppt);
    for (i64 p = (i64)blockIdx.z * ppt; p < p1; ++p) {
        const typename D::T* src = x + p * in_plane;
        float acc[OPT];
#pragma unroll
        for (int q = 0; q < OPT; ++q) {
            acc[q] = 0.0f;
#pragma unroll
            for (int j = 0; j < NYZ; ++j)
#pragma unroll
                for (int c = 0; c < NX; ++c)
                    acc[q] = fmaf(wr[j] * wx[q][c], Elem<D>::load(src, row[j] + ix[q][c]), acc[q]);
        }
        if (OPT == 2) Pair<D>::store(y, p * out_plane + o, acc);
        else Elem<D>::store(y, p * out_plane + o, acc[0]);
    }
}
/* Exact ×2 upsampling of [planes, H, W] with W a multiple of the vector width: one thread per
   output vector (V columns of output rows 2i and 2i + 1), so a warp's 16-byte stores cover
   whole contiguous runs; it reads the V / 2 input columns under it (8 bytes) and, for linear,
   their neighbours in input rows i - 1, i, i + 1. NEAREST copies; otherwise half-pixel
   linear weights 1/4, 3/4 with edge rows and columns clamped. */
__device__ __forceinline__ float lerp_q(float a, float b) { return fmaf(0.75f, b, 0.25f * a); }

template <typename D>
__device__ __forceinline__ void load_half(const typename D::T* p, float* out) {
    const int V = Vec16<D>::V;
    uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
    uint4 wide = make_uint4(raw.x, raw.y, 0u, 0u);
    float a[V];
    Vec16<D>::unpack(wide, a);
#pragma unroll
    for (int k = 0; k < V / 2; ++k) out[k] = a[k];
}

template <typename D, int NEAREST>
__device__ __forceinline__ void up2(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, i64 planes, int H, int W) {
    const int V = Vec16<D>::V, HV = V / 2;
    int nov = 2 * W / V;
    int cell = blockIdx.x * blockDim.x + threadIdx.x;
    if (cell >= H * nov) return;
    int i = cell / nov, j = cell - i * nov;
    int c0 = j * HV;
    i64 in_plane = (i64)H * W, out_plane = 4 * in_plane;
    for (i64 p = blockIdx.y; p < planes; p += gridDim.y) {
        const typename D::T* src = x + p * in_plane;
        typename D::T* dst = y + p * out_plane + (i64)(2 * i) * (2 * W) + j * V;
        if (NEAREST) {
            float a[HV], o[V];
            load_half<D>(src + (i64)i * W + c0, a);
#pragma unroll
            for (int k = 0; k < HV; ++k) o[2 * k] = o[2 * k + 1] = a[k];
            Vec16<D>::store(dst, 0, o);
            Vec16<D>::store(dst, 2 * W, o);
            continue;
        }
        int rows[3] = {max(i - 1, 0), i, min(i + 1, H - 1)};
        int left = max(c0 - 1, 0), right = min(c0 + HV, W - 1);
        float r[3][HV + 2];
#pragma unroll
        for (int q = 0; q < 3; ++q) {
            const typename D::T* row = src + (i64)rows[q] * W;
            load_half<D>(row + c0, r[q] + 1);
            r[q][0] = Elem<D>::load(row, left);
            r[q][HV + 1] = Elem<D>::load(row, right);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float c[HV + 2], o[V];
#pragma unroll
            for (int k = 0; k < HV + 2; ++k)
                c[k] = h == 0 ? lerp_q(r[0][k], r[1][k]) : lerp_q(r[2][k], r[1][k]);
#pragma unroll
            for (int k = 0; k < HV; ++k) {
                o[2 * k] = lerp_q(c[k], c[k + 1]);
                o[2 * k + 1] = lerp_q(c[k + 2], c[k + 1]);
            }
            Vec16<D>::store(dst, h * 2 * W, o);
        }
    }
}
#define UP2(name, D) \
extern "C" __global__ void __launch_bounds__(256) up2_nearest_##name(const D::T* x, D::T* y, i64 p, int h, int w) \
{ up2<D, 1>(x, y, p, h, w); } \
extern "C" __global__ void __launch_bounds__(256) up2_linear_##name(const D::T* x, D::T* y, i64 p, int h, int w) \
{ up2<D, 0>(x, y, p, h, w); }
FOR_EACH_DTYPE(UP2)


#define FAST1(name, D, OPT, NX, NYZ) \
extern "C" __global__ void interp_fast_##OPT##_##NX##_##NYZ##_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p, int ppt) \
{ interp_fast<D, OPT, NX, NYZ>(x, y, t, g, p, ppt); }
#define FAST_NYZ(name, D, OPT, NX) FAST1(name, D, OPT, NX, 1) FAST1(name, D, OPT, NX, 2) \
FAST1(name, D, OPT, NX, 4) FAST1(name, D, OPT, NX, 8) FAST1(name, D, OPT, NX, 16)
#define FAST(name, D) FAST_NYZ(name, D, 1, 1) FAST_NYZ(name, D, 1, 2) FAST_NYZ(name, D, 1, 4) \
FAST_NYZ(name, D, 2, 1) FAST_NYZ(name, D, 2, 2) FAST_NYZ(name, D, 2, 4)
FOR_EACH_DTYPE(FAST)

#define INTERP(name, D) \
extern "C" __global__ void interp_thread_sum_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p) \
{ interp_thread<D, 0>(x, y, t, g, p); } \
extern "C" __global__ void interp_thread_max_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p) \
{ interp_thread<D, 1>(x, y, t, g, p); } \
extern "C" __global__ void interp_warp_sum_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p) \
{ interp_warp<D, 0>(x, y, t, g, p); } \
extern "C" __global__ void interp_warp_max_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p) \
{ interp_warp<D, 1>(x, y, t, g, p); }
FOR_EACH_DTYPE(INTERP)
"#
    ),
};

/// Windows at least this large (taps per output element) run one warp per output.
const WARP_TAPS: usize = 64;

fn axis_taps(config: &Config, g: &AxisGeom) -> AxisTaps {
    match config.mode {
        Mode::Nearest => {
            let index = nearest::indices(config, g);
            let mut t = AxisTaps::with_taps(1, g.input, g.output);
            t.push_taps(&index, &vec![1.0; index.len()]);
            t
        }
        Mode::Linear { .. } => linear::taps(config, g),
        Mode::Cubic => cubic::taps(config, g),
        Mode::AdaptiveAvg { .. } | Mode::AdaptiveMax { .. } => pool::taps(g.input, g.output),
    }
}

/// Threads to aim for (an H100/H200 holds 270 K at once): planes per thread beyond.
const FAST_THREADS: usize = 1 << 22;

pub(super) fn dtype_name(dtype: DType) -> PluginResult<&'static str> {
    cuda::suffix(dtype)
        .ok_or_else(|| PluginError::InvalidInput(format!("no CUDA kernel for {dtype}")))
}

pub(super) fn invalid(msg: String) -> PluginError {
    PluginError::InvalidInput(msg)
}

/// Queues the layer on `x` into `y` (shapes, dtypes and counts already checked).
pub(super) fn enqueue(
    config: &Config,
    x: &DeviceTensor,
    y: &DeviceTensor,
    cuda: &CudaLaunch<'_>,
) -> PluginResult<()> {
    if x.desc.shape.iter().chain(&y.desc.shape).any(|&d| d < 0) {
        return Err(invalid("enqueue needs concrete shapes".into()));
    }
    let dims = |s: &[i64]| -> Vec<usize> { s.iter().map(|&d| d as usize).collect() };
    let (ins, outs) = (dims(&x.desc.shape), dims(&y.desc.shape));
    let spatial = ins.len().saturating_sub(2);
    if !(1..=3).contains(&spatial) {
        return Err(PluginError::Unsupported(format!(
            "the CUDA kernel takes 1 to 3 spatial dimensions, got {spatial}"
        )));
    }
    let planes: usize = ins[..2].iter().product();
    let out_count: usize = planes * outs[2..].iter().product::<usize>();
    if out_count == 0 {
        return Ok(());
    }
    if x.ptr == 0 || y.ptr == 0 {
        return Err(invalid("a device pointer is null".into()));
    }
    let mut tables: Vec<AxisTaps> = (0..3 - spatial).map(|_| AxisTaps::identity(1)).collect();
    for (a, (&i, &o)) in ins[2..].iter().zip(&outs[2..]).enumerate() {
        let g = AxisGeom {
            input: i,
            output: o,
            scale: config.size.scale(a),
            roi: config.roi_of(a),
        };
        tables.push(axis_taps(config, &g));
    }
    let mut blob: Vec<u32> = Vec::new();
    let (mut n, mut idx, mut w) = ([0i32; 3], [0i32; 3], [0i32; 3]);
    for (a, t) in tables.iter().enumerate() {
        n[a] = t.n as i32;
        idx[a] = blob.len() as i32;
        blob.extend(t.index.iter().map(|&i| i as u32));
        w[a] = blob.len() as i32;
        blob.extend(t.weight.iter().map(|w| w.to_bits()));
    }
    let table = cuda::constant(cuda, bytemuck::cast_slice(&blob))?;
    let taps: usize = tables.iter().map(|t| t.n).product();
    let warp = taps >= WARP_TAPS;
    let max = matches!(config.mode, Mode::AdaptiveMax { .. });
    let dtype = x.desc.dtype;
    let name = format!(
        "interp_{}_{}_{}",
        if warp { "warp" } else { "thread" },
        if max { "max" } else { "sum" },
        dtype_name(dtype)?
    );
    let packed = pack_geo(&tables, n, idx, w);
    let args = Args::default()
        .ptr(x.ptr)
        .ptr(y.ptr)
        .ptr(table)
        .bytes(&packed)
        .i64(planes as i64);
    let pool = matches!(
        config.mode,
        Mode::AdaptiveAvg { .. } | Mode::AdaptiveMax { .. }
    );
    let lanes = 16 / dtype.size();
    let (h, w) = (tables[1].input, tables[2].input);
    let planar = tables[0].outputs() == 1 && tables[0].input == 1;
    let aligned = x.ptr.is_multiple_of(16) && y.ptr.is_multiple_of(16) && w.is_multiple_of(lanes);
    if planar && aligned && h * w < (1 << 31) {
        let double = |linear| doubles(&tables[1], linear) && doubles(&tables[2], linear);
        let kind = if double(false) {
            Some("nearest")
        } else if double(true) {
            Some("linear")
        } else {
            None
        };
        if let Some(kind) = kind {
            let cells = 2 * h * w / lanes;
            let name = format!("up2_{kind}_{}", dtype_name(dtype)?);
            let grid = (cells.div_ceil(256) as u32, planes.min(65535) as u32, 1);
            let args = Args::default()
                .ptr(x.ptr)
                .ptr(y.ptr)
                .i64(planes as i64)
                .i32(h as i32)
                .i32(w as i32);
            // SAFETY: the arguments match the kernel; the tensors were checked by the plugin,
            // the output being [planes, 2h, 2w].
            return unsafe { cuda::launch(&PROGRAM, &name, cuda, grid, (256, 1, 1), 0, args) };
        }
    }
    if pool {
        let pools = Pools {
            tables: &tables,
            x: x.ptr,
            y: y.ptr,
            args: &args,
            planes,
            max,
            warp,
            planar,
            aligned,
        };
        if let Some(queued) = cuda_pool::enqueue(&pools, dtype, cuda) {
            return queued;
        }
    }
    if !max {
        let linear = Linear {
            tables: &tables,
            args: &args,
            planes,
            aligned: x.ptr.is_multiple_of(16) && y.ptr.is_multiple_of(16),
        };
        if let Some(queued) = cuda_linear::enqueue(&linear, dtype, cuda) {
            return queued;
        }
    }
    let nyz = tables[0].n * tables[1].n;
    let fast = !max && [1, 2, 4].contains(&tables[2].n) && [1, 2, 4, 8, 16].contains(&nyz);
    if fast {
        let (ox, oyz) = (
            tables[2].outputs(),
            tables[0].outputs() * tables[1].outputs(),
        );
        let opt = if ox.is_multiple_of(2) && y.ptr.is_multiple_of(8) {
            2
        } else {
            1
        };
        let columns = ox / opt;
        let threads = columns.next_power_of_two().clamp(32, 256);
        let gy = u32::try_from(oyz)
            .ok()
            .filter(|&v| v < 65536)
            .ok_or_else(|| invalid(format!("{oyz} output rows exceed the CUDA grid")))?;
        let per_plane = columns.div_ceil(threads) * threads * oyz;
        let ppt = (planes * per_plane / FAST_THREADS)
            .max(planes.div_ceil(65535))
            .clamp(1, planes);
        let name = format!(
            "interp_fast_{opt}_{}_{nyz}_{}",
            tables[2].n,
            dtype_name(dtype)?
        );
        let grid = (
            columns.div_ceil(threads) as u32,
            gy,
            planes.div_ceil(ppt) as u32,
        );
        let args = args.i32(ppt as i32);
        // SAFETY: as below, with the planes-per-thread count appended.
        return unsafe {
            cuda::launch(&PROGRAM, &name, cuda, grid, (threads as u32, 1, 1), 0, args)
        };
    }
    let (grid, block) = if warp {
        let blocks = (out_count as u64 * 32).div_ceil(256).clamp(1, 1 << 20) as u32;
        ((blocks, 1, 1), (256, 1, 1))
    } else {
        let (ox, oyz) = (
            tables[2].outputs(),
            tables[0].outputs() * tables[1].outputs(),
        );
        let threads = ox.next_power_of_two().clamp(32, 256);
        let gy = u32::try_from(oyz)
            .ok()
            .filter(|&v| v < 65536)
            .ok_or_else(|| invalid(format!("{oyz} output rows exceed the CUDA grid")))?;
        (
            (ox.div_ceil(threads) as u32, gy, planes.min(65535) as u32),
            (threads as u32, 1, 1),
        )
    };
    // SAFETY: the arguments match the kernel (`Geo` passed by value in its C layout); the
    // tensors were checked by the plugin; the table lives for the process.
    unsafe { cuda::launch(&PROGRAM, &name, cuda, grid, block, 0, args) }
}

/// True when `t` is exact ×2 upsampling: nearest (output `o` copies input `o / 2`) or, with
/// `linear`, half-pixel linear (`o = 2i` blends inputs `i - 1, i` by 1/4, 3/4 and `o = 2i + 1`
/// inputs `i, i + 1` by 3/4, 1/4, indices clamped into the input).
fn doubles(t: &AxisTaps, linear: bool) -> bool {
    let n = t.input;
    if n == 0 || t.outputs() != 2 * n {
        return false;
    }
    (0..2 * n).all(|o| {
        let i = o / 2;
        let want: [(usize, f32); 2] = match (linear, o % 2) {
            (false, _) => [(i, 1.0), (i, 0.0)],
            (true, 0) => [(i.saturating_sub(1), 0.25), (i, 0.75)],
            (true, _) => [(i, 0.75), ((i + 1).min(n - 1), 0.25)],
        };
        let taps = || {
            let r = o * t.n..(o + 1) * t.n;
            t.index[r.clone()].iter().zip(&t.weight[r])
        };
        let weight_at =
            |k: usize| -> f32 { taps().filter(|(j, _)| **j == k).map(|(_, w)| *w).sum() };
        let wanted_at = |k: usize| -> f32 { want.iter().filter(|w| w.0 == k).map(|w| w.1).sum() };
        taps().all(|(&k, &w)| w == 0.0 || want.iter().any(|x| x.0 == k))
            && want
                .iter()
                .all(|&(k, _)| (weight_at(k) - wanted_at(k)).abs() <= 1e-6)
    })
}

/// `struct Geo` in its C layout: `i64 in[3], out[3]; int n[3], idx[3], w[3];` (84 bytes,
/// padded to 88).
fn pack_geo(tables: &[AxisTaps], n: [i32; 3], idx: [i32; 3], w: [i32; 3]) -> Vec<u8> {
    let mut b = Vec::with_capacity(88);
    for t in tables {
        b.extend((t.input as i64).to_le_bytes());
    }
    for t in tables {
        b.extend((t.outputs() as i64).to_le_bytes());
    }
    for v in n.iter().chain(&idx).chain(&w) {
        b.extend(v.to_le_bytes());
    }
    b.resize(88, 0);
    b
}
