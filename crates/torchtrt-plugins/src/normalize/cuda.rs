//! The NormalizePlugin CUDA kernels. Dimensions are merged into alternating runs of kept
//! and reduced dimensions (size-1 dimensions dropped). When the innermost run is reduced a
//! warp folds one output (lanes over contiguous elements); otherwise a thread folds one
//! output over strided elements, coalesced across neighbouring threads, and in mode
//! `normalize` keeps up to 64 of them in registers for the second pass. One reduced run
//! between kept ones goes through shared-memory slabs (`norm_tile`) or, in mode `normalize`
//! with rows of whole 16-byte vectors, registers (`norm_regs`).

use torchtrt_plugin_api::{CudaLaunch, DType, PluginError, PluginResult};

use super::Mode;
use super::reduce::Order;
use crate::cuda::{self, Args, Program};
use crate::support::Origin;

pub(crate) const PROGRAM: Program = Program {
    name: "normalize",
    source: r#"
#define CACHE 64
__device__ __forceinline__ float fold(int ord, float p, float acc, float v) {
    float a = fabsf(v);
    switch (ord) {
        case 0: return acc + a;
        case 1: return fmaf(v, v, acc);
        case 2: return fmaxf(acc, a);
        default: return acc + powf(a, p);
    }
}
__device__ __forceinline__ float finish(int ord, float p, float acc) {
    switch (ord) {
        case 1: return sqrtf(acc);
        case 3: return powf(acc, 1.0f / p);
        default: return acc;
    }
}
/* The order fixed at compile time (ORD >= 0) or read at run time (ORD = -1): a per-element
   switch in an unrolled loop costs the 16-bit kernels their memory bound. */
template <int ORD> __device__ __forceinline__ int order(int ord) { return ORD >= 0 ? ORD : ord; }

/* geo: nk, nr, kdim[nk], kstride[nk], rdim[nr], rstride[nr]; runs outer to inner. */
__device__ __forceinline__ i64 offset(const i64* dim, const i64* stride, int n, i64 i) {
    i64 off = 0;
    for (int d = n - 1; d >= 0; --d) { i64 q = i / dim[d]; off += (i - q * dim[d]) * stride[d]; i = q; }
    return off;
}

template <typename D, int MODE>
__device__ __forceinline__ void norm_thread(const typename D::T* x, typename D::T* y,
        const i64* geo, i64 K, i64 R, int ord, float p, float eps) {
    int nk = (int)geo[0], nr = (int)geo[1];
    const i64 *kdim = geo + 2, *kstr = kdim + nk, *rdim = kstr + nk, *rstr = rdim + nr;
    i64 rs = rstr[nr - 1];
    bool simple = nr == 1;
    bool cached = MODE == 1 && simple && R <= CACHE;
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < K; k += (i64)gridDim.x * blockDim.x) {
        i64 base = offset(kdim, kstr, nk, k);
        float acc = 0.0f;
        float a[CACHE];
        if (cached) {
#pragma unroll
            for (int r = 0; r < CACHE; ++r) if (r < R) a[r] = Elem<D>::load(x, base + r * rs);
#pragma unroll
            for (int r = 0; r < CACHE; ++r) if (r < R) acc = fold(ord, p, acc, a[r]);
        } else {
            for (i64 r = 0; r < R; ++r) {
                i64 off = simple ? r * rs : offset(rdim, rstr, nr, r);
                acc = fold(ord, p, acc, Elem<D>::load(x, base + off));
            }
        }
        float norm = finish(ord, p, acc);
        if (MODE == 0) { Elem<D>::store(y, k, norm); continue; }
        float inv = 1.0f / fmaxf(norm, eps);
        if (cached) {
#pragma unroll
            for (int r = 0; r < CACHE; ++r) if (r < R) Elem<D>::store(y, base + r * rs, a[r] * inv);
        } else {
            for (i64 r = 0; r < R; ++r) {
                i64 off = base + (simple ? r * rs : offset(rdim, rstr, nr, r));
                Elem<D>::store(y, off, Elem<D>::load(x, off) * inv);
            }
        }
    }
}

template <typename D, int MODE>
__device__ __forceinline__ void norm_warp(const typename D::T* x, typename D::T* y,
        const i64* geo, i64 K, i64 R, int ord, float p, float eps) {
    int nk = (int)geo[0], nr = (int)geo[1];
    const i64 *kdim = geo + 2, *kstr = kdim + nk, *rdim = kstr + nk, *rstr = rdim + nr;
    bool simple = nr == 1;
    int lane = threadIdx.x & 31;
    i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 k = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; k < K; k += warps) {
        i64 base = offset(kdim, kstr, nk, k);
        float acc = 0.0f;
        for (i64 r = lane; r < R; r += 32) {
            i64 off = simple ? r : offset(rdim, rstr, nr, r);
            acc = fold(ord, p, acc, Elem<D>::load(x, base + off));
        }
        acc = ord == 2 ? warp_max(acc) : warp_sum(acc);
        float norm = finish(ord, p, acc);
        if (MODE == 0) { if (lane == 0) Elem<D>::store(y, k, norm); continue; }
        float inv = 1.0f / fmaxf(norm, eps);
        for (i64 r = lane; r < R; r += 32) {
            i64 off = base + (simple ? r : offset(rdim, rstr, nr, r));
            Elem<D>::store(y, off, Elem<D>::load(x, off) * inv);
        }
    }
}

/* x viewed as [O, R, S] (one reduced run between kept runs): a block loads an R x TILE
   slab (coalesced along S) into shared memory, folds each column, and writes the norms or
   the normalised slab, so x is read once. */
#define TILE 64
template <typename D, int MODE>
__device__ __forceinline__ void norm_tile(const typename D::T* x, typename D::T* y,
        i64 O, i64 R, i64 S, int ord, float p, float eps) {
    extern __shared__ float sm[];
    float* part = sm + R * TILE;
    i64 tiles = (S + TILE - 1) / TILE;
    i64 o = blockIdx.x / tiles, l0 = (blockIdx.x - o * tiles) * TILE;
    int width = (int)min((i64)TILE, S - l0);
    const typename D::T* src = x + o * R * S + l0;
    int n = (int)R * TILE;
#pragma unroll 8
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int r = i / TILE, l = i - r * TILE;
        sm[i] = l < width ? Elem<D>::load(src, r * S + l) : 0.0f;
    }
    __syncthreads();
    int l = threadIdx.x % TILE, grp = threadIdx.x / TILE, groups = blockDim.x / TILE;
    float acc = 0.0f;
    for (int r = grp; r < R; r += groups) acc = fold(ord, p, acc, sm[r * TILE + l]);
    part[grp * TILE + l] = acc;
    __syncthreads();
    if (grp == 0) {
        for (int k = 1; k < groups; ++k)
            acc = ord == 2 ? fmaxf(acc, part[k * TILE + l]) : acc + part[k * TILE + l];
        float norm = finish(ord, p, acc);
        part[l] = MODE == 0 ? norm : 1.0f / fmaxf(norm, eps);
    }
    __syncthreads();
    if (MODE == 0) {
        if (threadIdx.x < width) Elem<D>::store(y, o * S + l0 + threadIdx.x, part[threadIdx.x]);
        return;
    }
    typename D::T* dst = y + o * R * S + l0;
#pragma unroll 8
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int r = i / TILE, c = i - r * TILE;
        if (c < width) Elem<D>::store(dst, r * S + c, sm[i] * part[c]);
    }
}
/* x viewed as [O, R, S] normalised over R (R <= W ITEMS, S a multiple of the vector width):
   a block of W warps covers 32 vectors of S for one o; warp w holds rows w, w + W, … of its
   lane's vector in registers, so x is read once with 16-byte loads and y written once. */
template <typename D, int ITEMS, int W, int ORD>
__device__ __forceinline__ void norm_regs(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, i64 R, i64 S, int ord_arg, float p, float eps) {
    const int V = Vec16<D>::V;
    const int ord = order<ORD>(ord_arg);
    __shared__ float part[W][V][32];
    __shared__ float inv[V][32];
    i64 groups = S / V;
    i64 tiles = (groups + 31) / 32;
    i64 o = blockIdx.x / tiles;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    i64 gi = (blockIdx.x - o * tiles) * 32 + lane;
    bool live = gi < groups;
    const uint4* src = reinterpret_cast<const uint4*>(x + o * R * S) + gi;
    uint4* dst = reinterpret_cast<uint4*>(y + o * R * S) + gi;
    uint4 raw[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        int r = warp + W * i;
        if (live && r < R) raw[i] = __ldg(src + r * groups);
    }
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (live && warp + W * i < R) {
            float a[V];
            Vec16<D>::unpack(raw[i], a);
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] = fold(ord, p, acc[k], a[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) part[warp][k][lane] = acc[k];
    __syncthreads();
    for (int e = threadIdx.x; e < V * 32; e += blockDim.x) {
        int k = e >> 5, l = e & 31;
        float t = part[0][k][l];
#pragma unroll
        for (int w = 1; w < W; ++w) t = ord == 2 ? fmaxf(t, part[w][k][l]) : t + part[w][k][l];
        inv[k][l] = 1.0f / fmaxf(finish(ord, p, t), eps);
    }
    __syncthreads();
    if (!live) return;
    float f[V];
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = inv[k][lane];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        int r = warp + W * i;
        if (r < R) {
            float a[V];
            Vec16<D>::unpack(raw[i], a);
#pragma unroll
            for (int k = 0; k < V; ++k) a[k] *= f[k];
            Vec16<D>::store(reinterpret_cast<typename D::T*>(dst + r * groups), 0, a);
        }
    }
}
/* Entry points per order: `l2` (p = 2, the common case) compiled for it, `any` reading it. */
#define REGS_O(name, D, I, P, NT, O, OT) \
extern "C" __global__ void __launch_bounds__(NT) P##_##I##_##OT##_##name(const D::T* x, D::T* y, i64 R, i64 S, int o, float p, float e) \
{ norm_regs<D, I, NT / 32, O>(x, y, R, S, o, p, e); }
#define REGS_I(name, D, I, P, NT) REGS_O(name, D, I, P, NT, 1, l2) REGS_O(name, D, I, P, NT, -1, any)
#define REGS(name, D) REGS_I(name, D, 1, norm_regs, 256) REGS_I(name, D, 2, norm_regs, 256) \
REGS_I(name, D, 4, norm_regs, 256) REGS_I(name, D, 8, norm_regs, 256)
FOR_EACH_DTYPE(REGS)
#define REGS16(name, D) REGS_I(name, D, 2, norm_regs16, 512) REGS_I(name, D, 4, norm_regs16, 512)
REGS16(f16, F16) REGS16(bf16, BF16)

#define TILED(name, D) \
extern "C" __global__ void norm_tile_norm_##name(const D::T* x, D::T* y, i64 O, i64 R, i64 S, int o, float p, float e) \
{ norm_tile<D, 0>(x, y, O, R, S, o, p, e); } \
extern "C" __global__ void norm_tile_normalize_##name(const D::T* x, D::T* y, i64 O, i64 R, i64 S, int o, float p, float e) \
{ norm_tile<D, 1>(x, y, O, R, S, o, p, e); }
FOR_EACH_DTYPE(TILED)

#define NORM(name, D) \
extern "C" __global__ void norm_thread_norm_##name(const D::T* x, D::T* y, const i64* g, i64 K, i64 R, int o, float p, float e) \
{ norm_thread<D, 0>(x, y, g, K, R, o, p, e); } \
extern "C" __global__ void norm_thread_normalize_##name(const D::T* x, D::T* y, const i64* g, i64 K, i64 R, int o, float p, float e) \
{ norm_thread<D, 1>(x, y, g, K, R, o, p, e); } \
extern "C" __global__ void norm_warp_norm_##name(const D::T* x, D::T* y, const i64* g, i64 K, i64 R, int o, float p, float e) \
{ norm_warp<D, 0>(x, y, g, K, R, o, p, e); } \
extern "C" __global__ void norm_warp_normalize_##name(const D::T* x, D::T* y, const i64* g, i64 K, i64 R, int o, float p, float e) \
{ norm_warp<D, 1>(x, y, g, K, R, o, p, e); }
FOR_EACH_DTYPE(NORM)
"#,
};

/// 16-bit reductions at least this long run `norm_regs` with 16 warps (measured 2 % faster
/// than 8 on an H200 at R = 64; f32 is slower with 16).
const WIDE_R: usize = 32;
/// Columns per shared-memory slab (`TILE` in the kernel).
const TILE: usize = 64;
/// The largest reduced extent whose slab fits 48 KiB of shared memory.
const TILE_MAX_R: usize = 48 * 1024 / (TILE * 4) - 4;

fn dtype_name(dtype: DType) -> PluginResult<&'static str> {
    cuda::suffix(dtype)
        .ok_or_else(|| PluginError::InvalidInput(format!("no CUDA kernel for {dtype}")))
}

/// Merged runs of `dims`: `(size, stride, reduced)`, outer to inner, size-1 dims dropped.
fn runs(dims: &[usize], mask: &[bool]) -> Vec<(usize, usize, bool)> {
    let mut stride = 1usize;
    let mut out: Vec<(usize, usize, bool)> = Vec::new();
    for (&d, &r) in dims.iter().zip(mask).rev() {
        if d != 1 {
            match out.last_mut() {
                Some(last) if last.2 == r && last.1 * last.0 == stride => last.0 *= d,
                _ => out.push((d, stride, r)),
            }
        }
        stride *= d;
    }
    out.reverse();
    out
}

fn kernel(warp: bool, mode: Mode, dtype: DType) -> Option<&'static str> {
    Some(match (warp, mode, dtype) {
        (false, Mode::Norm, DType::F32) => "norm_thread_norm_f32",
        (false, Mode::Norm, DType::F16) => "norm_thread_norm_f16",
        (false, Mode::Norm, DType::BF16) => "norm_thread_norm_bf16",
        (false, Mode::Normalize, DType::F32) => "norm_thread_normalize_f32",
        (false, Mode::Normalize, DType::F16) => "norm_thread_normalize_f16",
        (false, Mode::Normalize, DType::BF16) => "norm_thread_normalize_bf16",
        (true, Mode::Norm, DType::F32) => "norm_warp_norm_f32",
        (true, Mode::Norm, DType::F16) => "norm_warp_norm_f16",
        (true, Mode::Norm, DType::BF16) => "norm_warp_norm_bf16",
        (true, Mode::Normalize, DType::F32) => "norm_warp_normalize_f32",
        (true, Mode::Normalize, DType::F16) => "norm_warp_normalize_f16",
        (true, Mode::Normalize, DType::BF16) => "norm_warp_normalize_bf16",
        _ => return None,
    })
}

/// The layer's settings as the kernels take them.
pub(super) struct Params<'a> {
    pub(super) mask: &'a [bool],
    pub(super) order: Order,
    pub(super) mode: Mode,
    pub(super) eps: f32,
    pub(super) expected_out: &'a [i64],
}

/// Queues the norm (or normalisation) of the launch's one input into its one output.
pub(super) fn enqueue(origin: &Origin, p: &Params<'_>, cuda: &CudaLaunch<'_>) -> PluginResult<()> {
    let (x, y, n) = origin.check_unary_cuda(cuda, Some(p.expected_out))?;
    if n == 0 {
        return Ok(());
    }
    let dims: Vec<usize> = x.desc.shape.iter().map(|&d| d as usize).collect();
    let mut runs = runs(&dims, p.mask);
    if !runs.iter().any(|r| r.2) {
        runs.push((1, 1, true));
    }
    let (kept, reduced): (Vec<_>, Vec<_>) = runs.iter().partition(|r| !r.2);
    let kept = if kept.is_empty() {
        vec![(1, 0, false)]
    } else {
        kept
    };
    let big_k: usize = kept.iter().map(|r| r.0).product();
    let big_r: usize = reduced.iter().map(|r| r.0).product();
    let mut geo: Vec<i64> = vec![kept.len() as i64, reduced.len() as i64];
    for set in [&kept, &reduced] {
        geo.extend(set.iter().map(|r| r.0 as i64));
        geo.extend(set.iter().map(|r| r.1 as i64));
    }
    let (ord, pw) = match p.order {
        Order::One => (0, 1.0),
        Order::Two => (1, 2.0),
        Order::Inf => (2, 0.0),
        Order::P(v) => (3, v),
    };
    let dtype = x.desc.dtype;
    let inner = runs.last().filter(|r| !r.2).map_or(1, |r| r.0);
    let lanes = 16 / dtype.size();
    if reduced.len() == 1
        && kept.len() <= 2
        && matches!(p.mode, Mode::Normalize)
        && big_r <= 64
        && inner.is_multiple_of(lanes)
        && x.ptr.is_multiple_of(16)
        && y.ptr.is_multiple_of(16)
    {
        let warps = if lanes == 8 && big_r >= WIDE_R { 16 } else { 8 };
        let items = big_r.div_ceil(warps).next_power_of_two();
        let order = if ord == 1 { "l2" } else { "any" };
        let name = match warps {
            16 => format!("norm_regs16_{items}_{order}_{}", dtype_name(dtype)?),
            _ => format!("norm_regs_{items}_{order}_{}", dtype_name(dtype)?),
        };
        let outer = big_k / inner;
        let tiles = outer * (inner / lanes).div_ceil(32);
        let args = Args::default()
            .ptr(x.ptr)
            .ptr(y.ptr)
            .i64(big_r as i64)
            .i64(inner as i64)
            .i32(ord)
            .f32(pw)
            .f32(p.eps);
        let grid = u32::try_from(tiles)
            .map_err(|_| origin.input_error(format!("{tiles} tiles exceed one CUDA grid")))?;
        // SAFETY: the arguments match the kernel; the tensors were checked by
        // `check_unary_cuda`, both 16-byte aligned with rows of whole vectors.
        return unsafe {
            cuda::launch(
                &PROGRAM,
                &name,
                cuda,
                (grid, 1, 1),
                (32 * warps as u32, 1, 1),
                0,
                args,
            )
        };
    }
    if reduced.len() == 1 && kept.len() <= 2 && inner >= 16 && big_r <= TILE_MAX_R {
        let mode = match p.mode {
            Mode::Norm => "norm",
            Mode::Normalize => "normalize",
        };
        let name = format!("norm_tile_{mode}_{}", dtype_name(dtype)?);
        let outer = big_k / inner;
        let tiles = outer * inner.div_ceil(TILE);
        let shared = ((big_r + 4) * TILE * 4) as u32;
        let args = Args::default()
            .ptr(x.ptr)
            .ptr(y.ptr)
            .i64(outer as i64)
            .i64(big_r as i64)
            .i64(inner as i64)
            .i32(ord)
            .f32(pw)
            .f32(p.eps);
        let grid = u32::try_from(tiles)
            .map_err(|_| origin.input_error(format!("{tiles} tiles exceed one CUDA grid")))?;
        // SAFETY: the arguments match the kernel; the tensors were checked by
        // `check_unary_cuda`; `shared` holds the slab and the partial folds.
        return unsafe {
            cuda::launch(
                &PROGRAM,
                &name,
                cuda,
                (grid, 1, 1),
                (256, 1, 1),
                shared,
                args,
            )
        };
    }
    let warp = runs.last().is_some_and(|r| r.2 && r.1 == 1) && big_r >= 16;
    let name = kernel(warp, p.mode, dtype)
        .ok_or_else(|| origin.input_error(format!("no CUDA kernel for {dtype}")))?;
    let geo = cuda::constant(cuda, bytemuck::cast_slice(&geo))?;
    let threads = 256u64;
    let workers = if warp {
        big_k as u64 * 32
    } else {
        big_k as u64
    };
    let blocks = workers.div_ceil(threads).clamp(1, 1 << 20) as u32;
    let args = Args::default()
        .ptr(x.ptr)
        .ptr(y.ptr)
        .ptr(geo)
        .i64(big_k as i64)
        .i64(big_r as i64)
        .i32(ord)
        .f32(pw)
        .f32(p.eps);
    // SAFETY: the arguments match the kernel; the tensors were checked by
    // `check_unary_cuda`; the geometry table lives for the process.
    unsafe {
        cuda::launch(
            &PROGRAM,
            name,
            cuda,
            (blocks, 1, 1),
            (threads as u32, 1, 1),
            0,
            args,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_merge_neighbours_and_drop_ones() {
        assert_eq!(
            runs(&[2, 3, 4, 5], &[false, true, false, false]),
            vec![(2, 60, false), (3, 20, true), (20, 1, false)]
        );
        assert_eq!(
            runs(&[2, 1, 4, 5], &[true, false, true, true]),
            vec![(40, 1, true)]
        );
    }
}
