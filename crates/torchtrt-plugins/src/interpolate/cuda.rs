//! The Interpolate CUDA kernels. Every mode reduces to per-axis tap tables, built on the
//! host by the same code as the CPU kernels (`nearest`, `linear`, `cubic`, `pool`, with
//! their coordinate modes, `exclude_outside` and antialias) and uploaded once per distinct
//! table. An output element is the weighted sum (or, for adaptive max pooling, the maximum)
//! of the input elements its taps name. Small tap sets run one thread per output element
//! (neighbouring threads read neighbouring inputs); large windows (adaptive pools) run one
//! warp per output element, lanes spread over the window's rows.

use torchtrt_plugin_api::{CudaLaunch, DType, DeviceTensor, PluginError, PluginResult};

use super::config::Config;
use super::coord::AxisGeom;
use super::mode::Mode;
use super::taps::AxisTaps;
use super::{cubic, linear, nearest, pool};
use crate::cuda::{self, Args, Program};

const PROGRAM: Program = Program {
    name: "interpolate",
    source: r#"
struct Geo {
    i64 in[3], out[3];
    int n[3], idx[3], w[3];
};

template <int MAX>
__device__ __forceinline__ float tap_init() { return MAX ? -__int_as_float(0x7f800000) : 0.0f; }

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
                acc = MAX ? fmaxf(acc, v) : fmaf(wzy * wx, v, acc);
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

/* One warp per output element; lanes over the (a, b, c) taps, c fastest. */
template <typename D, int MAX>
__device__ __forceinline__ void interp_warp(const typename D::T* x, typename D::T* y,
        const int* tab, Geo g, i64 planes) {
    const float* wt = reinterpret_cast<const float*>(tab);
    int lane = threadIdx.x & 31;
    i64 out_plane = g.out[0] * g.out[1] * g.out[2];
    i64 in_plane = g.in[0] * g.in[1] * g.in[2];
    i64 total = planes * out_plane;
    i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    int taps = g.n[0] * g.n[1] * g.n[2];
    for (i64 e = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; e < total; e += warps) {
        i64 p = e / out_plane, o = e - p * out_plane;
        i64 ox = o % g.out[2], oy = (o / g.out[2]) % g.out[1], oz = o / (g.out[2] * g.out[1]);
        const typename D::T* src = x + p * in_plane;
        float acc = tap_init<MAX>();
        for (int t = lane; t < taps; t += 32) {
            int c = t % g.n[2], ab = t / g.n[2], b = ab % g.n[1], a = ab / g.n[1];
            i64 t0 = oz * g.n[0] + a, t1 = oy * g.n[1] + b, t2 = ox * g.n[2] + c;
            float w = wt[g.w[0] + t0] * wt[g.w[1] + t1] * wt[g.w[2] + t2];
            if (!MAX && w == 0.0f) continue;
            i64 off = ((i64)tab[g.idx[0] + t0] * g.in[1] + tab[g.idx[1] + t1]) * g.in[2]
                    + tab[g.idx[2] + t2];
            float v = Elem<D>::load(src, off);
            acc = MAX ? fmaxf(acc, v) : fmaf(w, v, acc);
        }
        acc = MAX ? warp_max(acc) : warp_sum(acc);
        if (lane == 0) Elem<D>::store(y, e, acc);
    }
}

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
"#,
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

fn kernel(warp: bool, max: bool, dtype: DType) -> Option<&'static str> {
    Some(match (warp, max, dtype) {
        (false, false, DType::F32) => "interp_thread_sum_f32",
        (false, false, DType::F16) => "interp_thread_sum_f16",
        (false, false, DType::BF16) => "interp_thread_sum_bf16",
        (false, true, DType::F32) => "interp_thread_max_f32",
        (false, true, DType::F16) => "interp_thread_max_f16",
        (false, true, DType::BF16) => "interp_thread_max_bf16",
        (true, false, DType::F32) => "interp_warp_sum_f32",
        (true, false, DType::F16) => "interp_warp_sum_f16",
        (true, false, DType::BF16) => "interp_warp_sum_bf16",
        (true, true, DType::F32) => "interp_warp_max_f32",
        (true, true, DType::F16) => "interp_warp_max_f16",
        (true, true, DType::BF16) => "interp_warp_max_bf16",
        _ => return None,
    })
}

fn invalid(msg: String) -> PluginError {
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
    let name =
        kernel(warp, max, dtype).ok_or_else(|| invalid(format!("no CUDA kernel for {dtype}")))?;
    let packed = pack_geo(&tables, n, idx, w);
    let args = Args::default()
        .ptr(x.ptr)
        .ptr(y.ptr)
        .ptr(table)
        .bytes(&packed)
        .i64(planes as i64);
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
    unsafe { cuda::launch(&PROGRAM, name, cuda, grid, block, 0, args) }
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
