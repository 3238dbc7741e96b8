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

pub(crate) const PROGRAM: Program = Program {
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
            acc = max_nan(acc, v);
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
                    acc = MAX ? max_nan(acc, v) : fmaf(w, v, acc);
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
                    acc[q] = MAX ? max_nan(acc[q], a[q])
                                 : (w[u] == 0.0f ? acc[q] : fmaf(w[u], a[q], acc[q]));
            }
        }
#pragma unroll
        for (int q = 0; q < V; ++q)
            for (int o = lpr; o < 32; o <<= 1) {
                float v = __shfl_xor_sync(0xffffffffu, acc[q], o);
                acc[q] = MAX ? max_nan(acc[q], v) : acc[q] + v;
            }
        if (grp == 0) {
#pragma unroll
            for (int q = 0; q < V; ++q) cm[j * V + q] = acc[q];
        }
    }
    __syncwarp();
    for (int o = lane; o < OX; o += 32) Elem<D>::store(y, e * OX + o, fold_columns<MAX>(cm, tab, g, o));
}
/* Elementwise maximum of two words of packed 16-bit values, a NaN winning as in `max_nan`. */
template <typename D>
__device__ __forceinline__ unsigned max_pair(unsigned a, unsigned b) {
    u16 x[2] = {(u16)(a & 0xffffu), (u16)(a >> 16)}, z[2] = {(u16)(b & 0xffffu), (u16)(b >> 16)};
    u16 r[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) Elem<D>::store(r, k, max_nan(Elem<D>::load(x, k), Elem<D>::load(z, k)));
    return (unsigned)r[0] | ((unsigned)r[1] << 16);
}
#if __CUDA_ARCH__ >= 800
template <>
__device__ __forceinline__ unsigned max_pair<F16>(unsigned a, unsigned b) {
    unsigned r; asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
template <>
__device__ __forceinline__ unsigned max_pair<BF16>(unsigned a, unsigned b) {
    unsigned r; asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
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
/* Adaptive max pools of 16-bit rows of 2^lg whole vectors (lg <= 5): a warp per (plane,
   output row), on the adaptive windows [i*in/out, ceil((i+1)*in/out)) computed here. Lane l
   takes vector column l % nvw of every (32 / nvw)-th window row, every load issued before the
   first use; the row phases meet through shuffles, then four lanes fold each output's columns
   from the warp's row of column maxima in shared memory. */
#define WIN_LOADS 10
template <typename D> __device__ __forceinline__ uint4 lowest_vec();
template <> __device__ __forceinline__ uint4 lowest_vec<F16>() {
    return make_uint4(0xFC00FC00u, 0xFC00FC00u, 0xFC00FC00u, 0xFC00FC00u);
}
template <> __device__ __forceinline__ uint4 lowest_vec<BF16>() {
    return make_uint4(0xFF80FF80u, 0xFF80FF80u, 0xFF80FF80u, 0xFF80FF80u);
}
__device__ __forceinline__ uint4 shfl_down_vec(uint4 v, int d) {
    return make_uint4(__shfl_down_sync(~0u, v.x, d), __shfl_down_sync(~0u, v.y, d),
                      __shfl_down_sync(~0u, v.z, d), __shfl_down_sync(~0u, v.w, d));
}
template <typename D>
__device__ __forceinline__ void pool_win(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, int H, int W, int OY, int OX, unsigned items, int lg) {
    extern __shared__ __align__(16) uint4 win_cols[];
    const int nvw = W >> 3, G = 32 >> lg;
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const unsigned item = blockIdx.x * (blockDim.x >> 5) + wib;
    if (item >= items) return;
    const int p = item / OY, b = item - p * OY;
    const int s = b * H / OY, n = ((b + 1) * H + OY - 1) / OY - s;
    const int ph = lane >> lg;
    const uint4* src = reinterpret_cast<const uint4*>(x) + ((i64)p * H + s) * nvw + (lane & (nvw - 1));
    uint4 v[WIN_LOADS];
#pragma unroll
    for (int k = 0; k < WIN_LOADS; ++k) {
        int r = ph + k * G;
        v[k] = r < n ? __ldg(src + r * nvw) : lowest_vec<D>();
    }
    uint4 acc = v[0];
#pragma unroll
    for (int k = 1; k < WIN_LOADS; ++k) acc = max_vec<D>(acc, v[k]);
    for (int d = nvw; d < 32; d <<= 1) acc = max_vec<D>(acc, shfl_down_vec(acc, d));
    uint4* cols = win_cols + wib * nvw;
    if (lane < nvw) cols[lane] = acc;
    __syncwarp();
    const typename D::T* row = reinterpret_cast<const typename D::T*>(cols);
    typename D::T* out = y + ((i64)p * OY + b) * OX;
    for (int o0 = 0; o0 < OX; o0 += 8) {
        int o = o0 + (lane >> 2);
        float m = tap_init<1>();
        if (o < OX) {
            int c = o * W / OX + (lane & 3), ce = ((o + 1) * W + OX - 1) / OX;
            float t[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) t[u] = c + 4 * u < ce ? Elem<D>::load(row, c + 4 * u) : m;
            for (c += 32; c < ce; c += 4) m = max_nan(m, Elem<D>::load(row, c));
            m = max_nan(m, max_nan(max_nan(max_nan(t[0], t[1]), max_nan(t[2], t[3])),
                                   max_nan(max_nan(t[4], t[5]), max_nan(t[6], t[7]))));
        }
        m = max_nan(m, __shfl_xor_sync(~0u, m, 1));
        m = max_nan(m, __shfl_xor_sync(~0u, m, 2));
        if (o < OX && (lane & 3) == 0) Elem<D>::store(out, o, m);
    }
}
#define POOLWIN(name, D) \
extern "C" __global__ void __launch_bounds__(128, 8) pool_win_max_##name(const D::T* x, D::T* y, \
        int h, int w, int oy, int ox, unsigned items, int lg) \
{ pool_win<D>(x, y, h, w, oy, ox, items, lg); }
POOLWIN(f16, F16)
POOLWIN(bf16, BF16)
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
    /// Input and output device pointers (also the first two of `args`).
    pub x: u64,
    /// See `x`.
    pub y: u64,
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
    if p.max
        && p.planar
        && p.aligned
        && dtype.size() == 2
        && let Some(win) = Windows::plan(t, p.planes, 16 / dtype.size())
    {
        return Some(pool_win(p, &win, dtype, cuda));
    }
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

/// Loads a lane of `pool_win` issues (`WIN_LOADS` in the kernel).
const WIN_LOADS: usize = 10;

/// Warps in a `pool_win` block (its launch bounds assume 128 threads).
const WIN_WARPS: usize = 4;

/// How `pool_win` covers an adaptive max pool.
#[derive(Debug, PartialEq)]
struct Windows {
    /// log2 of the 16-byte vectors in a row.
    lg: u32,
    /// Warps, one per (plane, output row).
    items: usize,
}

impl Windows {
    /// `Some` when both axes read exactly the adaptive windows, a row is 2^k vectors of
    /// `lanes` values (k ≤ 5), every window's rows fit a lane's loads, and the kernel's 32-bit
    /// window and item arithmetic cannot overflow.
    fn plan(t: &[AxisTaps], planes: usize, lanes: usize) -> Option<Windows> {
        let (h, w, oy, ox) = (t[1].input, t[2].input, t[1].outputs(), t[2].outputs());
        let nvw = w / lanes;
        if !nvw.is_power_of_two() || nvw > 32 || !adaptive(&t[1]) || !adaptive(&t[2]) {
            return None;
        }
        let tallest = (0..oy).map(|i| t[1].input_span(i..i + 1).len()).max()?;
        let fits = |a: usize, b: usize| a.checked_mul(b).is_some_and(|v| v < 1 << 31);
        let items = planes.checked_mul(oy)?;
        (tallest <= 32 / nvw * WIN_LOADS && fits(oy, h + 1) && fits(ox, w + 1) && fits(items, 1))
            .then_some(Windows {
                lg: nvw.trailing_zeros(),
                items,
            })
    }
}

/// True when output `i` of `t` reads exactly the adaptive window
/// `[i·in/out, ⌈(i+1)·in/out⌉)` for every `i` (padding taps repeat an index inside it).
fn adaptive(t: &AxisTaps) -> bool {
    let (input, out, n) = (t.input, t.outputs(), t.n);
    (0..out).all(|i| {
        let (s, e) = (i * input / out, ((i + 1) * input).div_ceil(out));
        let idx = &t.index[i * n..(i + 1) * n];
        s < e
            && e - s <= n
            && idx[..e - s].iter().copied().eq(s..e)
            && idx[e - s..].iter().all(|k| (s..e).contains(k))
    })
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

fn pool_win(p: &Pools<'_>, win: &Windows, dtype: DType, cuda: &CudaLaunch<'_>) -> PluginResult<()> {
    let t = p.tables;
    let nvw = 1usize << win.lg;
    let name = format!("pool_win_max_{}", dtype_name(dtype)?);
    let grid = win.items.div_ceil(WIN_WARPS) as u32;
    let dims = [
        t[1].input,
        t[2].input,
        t[1].outputs(),
        t[2].outputs(),
        win.items,
    ];
    let args = dims
        .iter()
        .fold(Args::default().ptr(p.x).ptr(p.y), |a, &d| a.i32(d as i32))
        .i32(win.lg as i32);
    // SAFETY: the arguments match the kernel (pointers, four extents, the item count, below
    // 2^31 as `Windows::plan` checked, passed in the bits of its `unsigned`, and log2 of the
    // row's vectors); the tensors were checked by the plugin, 16-byte aligned with rows of
    // whole vectors; each warp's shared row holds `nvw` vectors.
    unsafe {
        cuda::launch(
            &PROGRAM,
            &name,
            cuda,
            (grid, 1, 1),
            ((WIN_WARPS * 32) as u32, 1, 1),
            (WIN_WARPS * nvw * 16) as u32,
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
    use super::{Band, Windows, adaptive};
    use crate::interpolate::pool;
    use crate::interpolate::taps::AxisTaps;

    #[test]
    fn windows_take_adaptive_pools_whose_rows_fit_a_lane() {
        let t = [pool::taps(1, 1), pool::taps(128, 7), pool::taps(128, 7)];
        let win = Windows::plan(&t, 2048, 8).expect("fits");
        assert_eq!(
            win,
            Windows {
                lg: 4,
                items: 2048 * 7
            }
        );
        let narrow = [pool::taps(1, 1), pool::taps(9, 9), pool::taps(16, 3)];
        assert_eq!(Windows::plan(&narrow, 6, 8).expect("fits").lg, 1);
        let odd = [pool::taps(1, 1), pool::taps(37, 5), pool::taps(40, 6)];
        assert!(Windows::plan(&odd, 6, 8).is_none());
        let wide = [pool::taps(1, 1), pool::taps(64, 2), pool::taps(512, 3)];
        assert!(Windows::plan(&wide, 1, 8).is_none());
        let column = |h| [pool::taps(1, 1), pool::taps(h, 1), pool::taps(8, 1)];
        assert!(Windows::plan(&column(320), 1, 8).is_some());
        assert!(Windows::plan(&column(321), 1, 8).is_none());
        let rows_of_20 = [pool::taps(1, 1), pool::taps(128, 7), pool::taps(128, 7)];
        assert!(
            Windows::plan(&rows_of_20, 2048, 4).is_none(),
            "f32 rows: 32 vectors, 10 rows"
        );
        assert!(Windows::plan(&t, 1 << 29, 8).is_none(), "items past 2^31");
    }

    #[test]
    fn only_exact_adaptive_windows_count_as_adaptive() {
        assert!(adaptive(&pool::taps(128, 7)));
        assert!(adaptive(&pool::taps(5, 9)));
        let mut wider = AxisTaps::with_taps(3, 4, 2);
        wider.push_taps(&[0, 1, 2], &[1.0; 3]);
        wider.push_taps(&[1, 2, 3], &[1.0; 3]);
        assert!(!adaptive(&wider.finish()));
        let mut gap = AxisTaps::with_taps(2, 4, 2);
        gap.push_taps(&[0, 1], &[1.0; 2]);
        gap.push_taps(&[2, 2], &[1.0; 2]);
        assert!(!adaptive(&gap.finish()));
    }

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
}
