//! The adaptive-pool CUDA kernels of Interpolate (tap tables from `pool`, windows summed or
//! maxed): two-dimensional pools over rows of whole 16-byte vectors (f16/bf16: `pool_span`, a
//! block per band of output rows staging the input rows it spans in shared memory, by one bulk
//! copy on sm_90; f32 or too wide a span: `pool_rows`, a warp per output row) and other
//! two-dimensional pools whose row folds fit in shared memory (`pool2d`, a block per plane).
//! Other pools run the general kernels of `cuda`.

use torchtrt_plugin_api::{CudaLaunch, DType, PluginResult};

use super::cuda::{dtype_name, geo_c, invalid};
use super::taps::AxisTaps;
use crate::cuda::{self, Args, Program};

const PROGRAM: Program = Program {
    name: "interpolate_pool",
    source: concat!(
        geo_c!(),
        r#"
/* Output column o folded from a row of column folds. A maximum reads no weights: padding
   taps repeat a window's first index, which leaves it unchanged. */
template <int MAX>
__device__ __forceinline__ float fold_columns(const float* row, const int* tab, const Geo& g, int o) {
    const float* wt = reinterpret_cast<const float*>(tab);
    float acc = tap_init<MAX>();
    for (int k = 0; k < g.n[2]; ++k) {
        int t = o * g.n[2] + k;
        float v = row[tab[g.idx[2] + t]];
        if (MAX) {
            acc = fmaxf(acc, v);
        } else {
            float w = wt[g.w[2] + t];
            acc = w == 0.0f ? acc : fmaf(w, v, acc);
        }
    }
    return acc;
}

/* Two-dimensional pooling, one block per plane: threads take input columns and fold each
   output row's window of input rows (coalesced loads, each row read once per window that
   covers it) into shared memory; then one thread per output folds its columns. Taps with
   weight 0 are padding (pool tables pad windows to the widest). */
template <typename D, int MAX>
__device__ __forceinline__ void pool2d(const typename D::T* x, typename D::T* y,
        const int* tab, Geo g, i64 planes) {
    extern __shared__ float cols[];
    const float* wt = reinterpret_cast<const float*>(tab);
    int iy = (int)g.in[1], ix = (int)g.in[2], oy = (int)g.out[1], ox = (int)g.out[2];
    for (i64 p = blockIdx.x; p < planes; p += gridDim.x) {
        const typename D::T* src = x + p * iy * ix;
        for (int c = threadIdx.x; c < ix; c += blockDim.x) {
            for (int b = 0; b < oy; ++b) {
                float acc = tap_init<MAX>();
#pragma unroll 4
                for (int k = 0; k < g.n[1]; ++k) {
                    int t = b * g.n[1] + k;
                    float w = wt[g.w[1] + t];
                    if (w == 0.0f) continue;
                    float v = Elem<D>::load(src, (i64)tab[g.idx[1] + t] * ix + c);
                    acc = MAX ? fmaxf(acc, v) : fmaf(w, v, acc);
                }
                cols[b * ix + c] = acc;
            }
        }
        __syncthreads();
        for (int e = threadIdx.x; e < oy * ox; e += blockDim.x) {
            int b = e / ox, o = e - b * ox;
            Elem<D>::store(y, p * oy * ox + e, fold_columns<MAX>(cols + b * ix, tab, g, o));
        }
        __syncthreads();
    }
}
/* Two-dimensional pooling with rows a multiple of the vector width: one warp per (plane,
   output row). Lanes form groups of `lpr` lanes (lpr divides the row's vector count); each
   group walks every (32 / lpr)-th row of the window with 16-byte loads, the groups combine
   through shuffles, the column folds go to shared memory, and lanes fold the output columns. */
template <typename D, int MAX, int UNR>
__device__ __forceinline__ void pool_rows(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, const int* __restrict__ tab, Geo g, i64 planes, int lpr) {
    extern __shared__ float cols[];
    const int V = Vec16<D>::V;
    const float* wt = reinterpret_cast<const float*>(tab);
    int H = (int)g.in[1], W = (int)g.in[2], OY = (int)g.out[1], OX = (int)g.out[2];
    int nvw = W / V;
    i64 e = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (e >= planes * OY) return;
    i64 p = e / OY;
    int b = (int)(e - p * OY);
    int lane = threadIdx.x & 31, sub = lane % lpr, grp = lane / lpr, groups = 32 / lpr;
    float* cm = cols + (threadIdx.x >> 5) * W;
    const uint4* src = reinterpret_cast<const uint4*>(x + p * H * W);
    for (int j = sub; j < nvw; j += lpr) {
        float acc[V];
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = tap_init<MAX>();
        for (int k0 = grp; k0 < g.n[1]; k0 += groups * UNR) {
            uint4 raw[UNR];
            float w[UNR];
#pragma unroll
            for (int u = 0; u < UNR; ++u) {
                int k = k0 + u * groups;
                if (k < g.n[1]) {
                    int t = b * g.n[1] + k;
                    w[u] = wt[g.w[1] + t];
                    raw[u] = __ldg(src + (i64)tab[g.idx[1] + t] * nvw + j);
                }
            }
#pragma unroll
            for (int u = 0; u < UNR; ++u) {
                if (k0 + u * groups >= g.n[1]) break;
                float a[V];
                Vec16<D>::unpack(raw[u], a);
#pragma unroll
                for (int q = 0; q < V; ++q)
                    acc[q] = MAX ? fmaxf(acc[q], a[q])
                                 : (w[u] == 0.0f ? acc[q] : fmaf(w[u], a[q], acc[q]));
            }
        }
#pragma unroll
        for (int q = 0; q < V; ++q)
            for (int o = lpr; o < 32; o <<= 1) {
                float v = __shfl_xor_sync(0xffffffffu, acc[q], o);
                acc[q] = MAX ? fmaxf(acc[q], v) : acc[q] + v;
            }
        if (grp == 0) {
#pragma unroll
            for (int q = 0; q < V; ++q) cm[j * V + q] = acc[q];
        }
    }
    __syncwarp();
    for (int o = lane; o < OX; o += 32) Elem<D>::store(y, e * OX + o, fold_columns<MAX>(cm, tab, g, o));
}
/* Elementwise maximum of two words of packed 16-bit values, NaN-dropping as fmaxf. */
template <typename D>
__device__ __forceinline__ unsigned max_pair(unsigned a, unsigned b) {
    u16 x[2] = {(u16)(a & 0xffffu), (u16)(a >> 16)}, z[2] = {(u16)(b & 0xffffu), (u16)(b >> 16)};
    u16 r[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) Elem<D>::store(r, k, fmaxf(Elem<D>::load(x, k), Elem<D>::load(z, k)));
    return (unsigned)r[0] | ((unsigned)r[1] << 16);
}
#if __CUDA_ARCH__ >= 800
template <>
__device__ __forceinline__ unsigned max_pair<F16>(unsigned a, unsigned b) {
    unsigned r; asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
template <>
__device__ __forceinline__ unsigned max_pair<BF16>(unsigned a, unsigned b) {
    unsigned r; asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
#endif
template <typename D>
__device__ __forceinline__ uint4 max_vec(uint4 a, uint4 b) {
    return make_uint4(max_pair<D>(a.x, b.x), max_pair<D>(a.y, b.y), max_pair<D>(a.z, b.z),
                      max_pair<D>(a.w, b.w));
}
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
/* Two-dimensional pooling of 16-bit rows of whole vectors, one block per (plane, `br` output
   rows): the input rows the block's windows span (contiguous, at most `span`) are staged in
   shared memory, on sm_90 by one bulk copy, then threads fold (plane-row window, vector
   column) pairs, max pools on the packed values, and fold the output columns. */
template <typename D, int MAX>
__device__ __forceinline__ void pool_span(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, const int* __restrict__ tab, Geo g, int br, int span) {
    extern __shared__ __align__(16) unsigned char staged[];
    __shared__ __align__(8) unsigned long long bar;
    __shared__ int first, count;
    const int V = Vec16<D>::V;
    const float* wt = reinterpret_cast<const float*>(tab);
    int H = (int)g.in[1], W = (int)g.in[2], OY = (int)g.out[1], OX = (int)g.out[2];
    int nvw = W / V;
    int bands = (OY + br - 1) / br;
    i64 p = blockIdx.x / bands;
    int b0 = (int)(blockIdx.x - p * bands) * br, nb = min(OY - b0, br);
    uint4* rows = reinterpret_cast<uint4*>(staged);
    float* cols = reinterpret_cast<float*>(staged + (size_t)span * nvw * 16);
    const uint4* plane = reinterpret_cast<const uint4*>(x + p * H * W);
    if (threadIdx.x == 0) {
        const int* t = tab + g.idx[1] + b0 * g.n[1];
        int lo = t[0], hi = t[0];
        for (int k = 1; k < nb * g.n[1]; ++k) { lo = min(lo, t[k]); hi = max(hi, t[k]); }
        first = lo;
#if __CUDA_ARCH__ >= 900
        unsigned bytes = (unsigned)((hi + 1 - lo) * nvw * 16);
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&bar)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(smem_addr(&bar)), "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(smem_addr(rows)), "l"(plane + (i64)lo * nvw), "r"(bytes),
                        "r"(smem_addr(&bar)) : "memory");
#else
        count = (hi + 1 - lo) * nvw;
#endif
    }
    __syncthreads();
#if __CUDA_ARCH__ >= 900
    int lo = first;
    for (unsigned done = 0; !done;)
        asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], 0; selp.u32 %0, 1, 0, q; }"
                     : "=r"(done) : "r"(smem_addr(&bar)) : "memory");
#else
    int lo = first;
    for (int i = threadIdx.x; i < count; i += blockDim.x) rows[i] = plane[(i64)lo * nvw + i];
    __syncthreads();
#endif
    for (int e = threadIdx.x; e < nb * nvw; e += blockDim.x) {
        int bb = e / nvw, j = e - bb * nvw, b = b0 + bb;
        const int* rt = tab + g.idx[1] + b * g.n[1];
        float a[V];
        if (MAX) {
            uint4 acc = rows[(rt[0] - lo) * nvw + j];
            for (int k = 1; k < g.n[1]; ++k) acc = max_vec<D>(acc, rows[(rt[k] - lo) * nvw + j]);
            Vec16<D>::unpack(acc, a);
        } else {
#pragma unroll
            for (int q = 0; q < V; ++q) a[q] = 0.0f;
            for (int k = 0; k < g.n[1]; ++k) {
                float w = wt[g.w[1] + b * g.n[1] + k];
                if (w == 0.0f) continue;
                float v[V];
                Vec16<D>::unpack(rows[(rt[k] - lo) * nvw + j], v);
#pragma unroll
                for (int q = 0; q < V; ++q) a[q] = fmaf(w, v[q], a[q]);
            }
        }
#pragma unroll
        for (int q = 0; q < V; ++q) cols[bb * W + j * V + q] = a[q];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < nb * OX; e += blockDim.x) {
        int bb = e / OX, o = e - bb * OX;
        Elem<D>::store(y, (p * OY + b0) * OX + e, fold_columns<MAX>(cols + bb * W, tab, g, o));
    }
}
#define POOLSPAN(name, D) \
extern "C" __global__ void pool_span_sum_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p, int br, int s) \
{ pool_span<D, 0>(x, y, t, g, br, s); } \
extern "C" __global__ void pool_span_max_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p, int br, int s) \
{ pool_span<D, 1>(x, y, t, g, br, s); }
POOLSPAN(f16, F16)
POOLSPAN(bf16, BF16)
#define POOLROWS_U(name, D, U) \
extern "C" __global__ void pool_rows_sum_##U##_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p, int l) \
{ pool_rows<D, 0, U>(x, y, t, g, p, l); } \
extern "C" __global__ void pool_rows_max_##U##_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p, int l) \
{ pool_rows<D, 1, U>(x, y, t, g, p, l); }
#define POOLROWS(name, D) POOLROWS_U(name, D, 4) POOLROWS_U(name, D, 8)
FOR_EACH_DTYPE(POOLROWS)
#define POOL(name, D) \
extern "C" __global__ void pool2d_sum_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p) \
{ pool2d<D, 0>(x, y, t, g, p); } \
extern "C" __global__ void pool2d_max_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p) \
{ pool2d<D, 1>(x, y, t, g, p); }
FOR_EACH_DTYPE(POOL)
"#
    ),
};

/// A pool launch as `cuda::enqueue` prepared it.
pub(super) struct Pools<'a> {
    /// The three axes' tap tables (depth, rows, columns).
    pub tables: &'a [AxisTaps],
    /// Input, output, table, packed `Geo` and plane count.
    pub args: &'a Args,
    /// Planes (batch × channels).
    pub planes: usize,
    /// Max pooling rather than average.
    pub max: bool,
    /// The window is large enough for a warp per output.
    pub warp: bool,
    /// No depth axis (a single input and output slice).
    pub planar: bool,
    /// Pointers 16-byte aligned and rows a whole number of vectors.
    pub aligned: bool,
}

/// Queues the pool when one of these kernels takes it; `None` leaves it to the general ones.
pub(super) fn enqueue(
    p: &Pools<'_>,
    dtype: DType,
    cuda: &CudaLaunch<'_>,
) -> Option<PluginResult<()>> {
    let t = p.tables;
    let w = t[2].input;
    if p.planar
        && p.aligned
        && dtype.size() == 2
        && let Some(band) = Band::plan(t, dtype.size())
    {
        return Some(pool_span(p, &band, dtype, cuda));
    }
    if p.planar && p.aligned && w * 4 * 4 <= 48 << 10 {
        return Some(pool_rows(p, dtype, cuda));
    }
    let rows_bytes = t[1].outputs() * w * 4;
    if p.warp && p.planar && rows_bytes <= 48 << 10 {
        return Some(pool2d(p, rows_bytes, dtype, cuda));
    }
    None
}

/// Shared memory `pool_span` may take: staged rows and column folds (48 KiB less its statics).
const SPAN_SHARED: usize = 46 << 10;

/// How `pool_span` covers a pool: output rows per block, and the most input rows they span.
struct Band {
    rows: usize,
    span: usize,
    shared: usize,
}

impl Band {
    /// Output rows per block so that a block stages about 16 input rows; `None` when that
    /// band's rows and column folds exceed [`SPAN_SHARED`].
    fn plan(t: &[AxisTaps], elem: usize) -> Option<Band> {
        let (h, oy, w, n) = (t[1].input, t[1].outputs(), t[2].input, t[1].n);
        let rows = (16 * oy).div_ceil(h.max(1)).clamp(1, oy.max(1));
        let span = t[1]
            .index
            .chunks(rows * n)
            .map(|taps| {
                let lo = taps.iter().min().copied().unwrap_or(0);
                let hi = taps.iter().max().copied().unwrap_or(0);
                hi + 1 - lo
            })
            .max()?;
        let shared = span * w * elem + rows * w * 4;
        (shared <= SPAN_SHARED).then_some(Band { rows, span, shared })
    }
}

fn kind(max: bool) -> &'static str {
    if max { "max" } else { "sum" }
}

fn pool_rows(p: &Pools<'_>, dtype: DType, cuda: &CudaLaunch<'_>) -> PluginResult<()> {
    let lanes = 16 / dtype.size();
    let w = p.tables[2].input;
    let nvw = w / lanes;
    let lpr = 1usize << nvw.trailing_zeros().min(5);
    let warps = p.planes * p.tables[1].outputs();
    let name = format!(
        "pool_rows_{}_{}_{}",
        kind(p.max),
        if lanes == 4 { 8 } else { 4 },
        dtype_name(dtype)?
    );
    let grid = u32::try_from(warps.div_ceil(4))
        .map_err(|_| invalid(format!("{warps} output rows exceed the CUDA grid")))?;
    let args = p.args.clone().i32(lpr as i32);
    // SAFETY: the arguments match the kernel (`Geo` by value, then the lanes-per-row count);
    // the tensors were checked by the plugin and the table lives for the process; 4 warps of
    // `w` floats of shared memory hold the column folds.
    unsafe {
        cuda::launch(
            &PROGRAM,
            &name,
            cuda,
            (grid, 1, 1),
            (128, 1, 1),
            (4 * w * 4) as u32,
            args,
        )
    }
}

fn pool_span(p: &Pools<'_>, band: &Band, dtype: DType, cuda: &CudaLaunch<'_>) -> PluginResult<()> {
    let lanes = 16 / dtype.size();
    let nvw = p.tables[2].input / lanes;
    let blocks = p.planes * p.tables[1].outputs().div_ceil(band.rows);
    let name = format!("pool_span_{}_{}", kind(p.max), dtype_name(dtype)?);
    let grid = u32::try_from(blocks)
        .map_err(|_| invalid(format!("{blocks} row bands exceed the CUDA grid")))?;
    let threads = (band.rows * nvw).next_power_of_two().clamp(32, 128) as u32;
    let args = p.args.clone().i32(band.rows as i32).i32(band.span as i32);
    // SAFETY: the arguments match the kernel (`Geo` by value, then rows per band and the widest
    // span); the tensors were checked by the plugin, 16-byte aligned with rows of whole vectors;
    // `band.shared` bytes hold `span` staged rows and the band's column folds.
    unsafe {
        cuda::launch(
            &PROGRAM,
            &name,
            cuda,
            (grid, 1, 1),
            (threads, 1, 1),
            band.shared as u32,
            args,
        )
    }
}

fn pool2d(
    p: &Pools<'_>,
    rows_bytes: usize,
    dtype: DType,
    cuda: &CudaLaunch<'_>,
) -> PluginResult<()> {
    let name = format!("pool2d_{}_{}", kind(p.max), dtype_name(dtype)?);
    let grid = (p.planes.min(1 << 20) as u32, 1, 1);
    let threads = p.tables[2].input.next_multiple_of(32).clamp(64, 512) as u32;
    // SAFETY: as in `pool_rows`, without the lanes count; `rows_bytes` of shared memory hold
    // the row folds.
    unsafe {
        cuda::launch(
            &PROGRAM,
            &name,
            cuda,
            grid,
            (threads, 1, 1),
            rows_bytes as u32,
            p.args.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Band;
    use crate::interpolate::pool;

    #[test]
    fn bands_cover_the_rows_their_windows_span() {
        let t = [pool::taps(1, 1), pool::taps(128, 7), pool::taps(128, 7)];
        let band = Band::plan(&t, 2).expect("fits");
        assert_eq!((band.rows, band.span), (1, 20));
        assert_eq!(band.shared, 20 * 128 * 2 + 128 * 4);
        let t = [pool::taps(1, 1), pool::taps(6, 9), pool::taps(16, 4)];
        let band = Band::plan(&t, 2).expect("fits");
        assert_eq!((band.rows, band.span), (9, 6));
        let tall = [pool::taps(1, 1), pool::taps(300, 1), pool::taps(160, 4)];
        assert!(Band::plan(&tall, 2).is_none());
    }

    #[test]
    fn program_compiles_with_nvrtc() {
        crate::cuda::assert_compiles(&super::PROGRAM);
    }
}
