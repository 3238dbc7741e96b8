//! The separable CUDA kernels of Interpolate for tap tables of at most two taps per axis
//! (linear, bilinear and trilinear at any scale and coordinate mode, nearest): one block per
//! (plane, output slice) walks batches of output rows. Rows a whole number of 16-byte vectors
//! wide, in and out. Stage one reads input rows with vector loads and blends them into f32
//! rows in shared memory; stage two blends columns and stores whole output vectors, a warp's
//! stores covering contiguous runs. `lin_span` blends depth only in stage one (the batch's
//! span of input rows, each read once) and rows in stage two; `lin_rows`, for spans too tall
//! for the block, blends depth and rows per output row in stage one.

use torchtrt_plugin_api::{DType, PluginResult};

use super::cuda::{dtype_name, geo_c};
use super::taps::AxisTaps;
use crate::cuda::{self, Args, Program};

const PROGRAM: Program = Program {
    name: "interpolate_linear",
    source: concat!(
        geo_c!(),
        r#"
/* One output vector's column taps: packed shared-memory offsets (low, high 16 bits; rows are
   padded one float per 32, so lanes V / 2 columns apart hit distinct banks) and weights. */
template <typename D> struct XTaps {
    unsigned at[Vec16<D>::V];
    float w0[Vec16<D>::V], w1[Vec16<D>::V];
    __device__ __forceinline__ void load(const int* tab, const Geo& g, int c0) {
        const float* wt = reinterpret_cast<const float*>(tab);
#pragma unroll
        for (int k = 0; k < Vec16<D>::V; ++k) {
            int t = (c0 + k) * g.n[2];
            int a = tab[g.idx[2] + t], b = a;
            w0[k] = wt[g.w[2] + t];
            w1[k] = 0.0f;
            if (g.n[2] > 1) {
                b = tab[g.idx[2] + t + 1];
                w1[k] = wt[g.w[2] + t + 1];
            }
            at[k] = (unsigned)(a + (a >> 5)) | ((unsigned)(b + (b >> 5)) << 16);
        }
    }
    __device__ __forceinline__ float at_row(const float* row, int k) const {
        return fmaf(w1[k], row[at[k] >> 16], w0[k] * row[at[k] & 0xffffu]);
    }
};

struct Tap2 { int i0, i1; float w0, w1; };
__device__ __forceinline__ Tap2 tap2(const int* tab, const Geo& g, int axis, int o) {
    const float* wt = reinterpret_cast<const float*>(tab);
    int t = o * g.n[axis];
    Tap2 r;
    r.i0 = r.i1 = tab[g.idx[axis] + t];
    r.w0 = wt[g.w[axis] + t];
    r.w1 = 0.0f;
    if (g.n[axis] > 1) {
        r.i1 = tab[g.idx[axis] + t + 1];
        r.w1 = wt[g.w[axis] + t + 1];
    }
    return r;
}

__device__ __forceinline__ float* padded(float* row, int j, int V) {
    int w = j * V;
    return row + w + (w >> 5);
}

/* One batch of output rows and the stage-one items it needs (input rows a vector wide). */
struct Batch { int r0, rows, lo, items; };

template <int SPAN>
__device__ __forceinline__ Batch batch_at(const int* tab, const Geo& g, int r0, int R, int nvi) {
    Batch b;
    b.r0 = r0;
    b.rows = min(R, (int)g.out[1] - r0);
    b.lo = 0;
    b.items = b.rows * nvi;
    if (SPAN) {
        Tap2 first = tap2(tab, g, 1, r0), last = tap2(tab, g, 1, r0 + b.rows - 1);
        b.lo = min(first.i0, first.i1);
        b.items = (max(last.i0, last.i1) + 1 - b.lo) * nvi;
    }
    return b;
}

/* Stage one, a chunk of ITEMS vector items a thread from item `base`: `load` issues every
   load before `store` uses any. `lin_rows` blends the depth and row taps of output row r0 + r
   (4 loads an item), `lin_span` the depth taps of input row lo + r (2 loads). */
template <typename D, int ITEMS, int SPAN> struct StageOne {
    uint4 raw[ITEMS][SPAN ? 2 : 4];
    float wy[ITEMS][2];
    __device__ __forceinline__ void load(const uint4* s0, const uint4* s1, const int* tab,
            const Geo& g, const Tap2& z, const Batch& b, int nvi, int base) {
#pragma unroll
        for (int u = 0; u < ITEMS; ++u) {
            int it = base + threadIdx.x + u * blockDim.x;
            if (it < b.items) {
                int r = it / nvi, j = it - r * nvi;
                if constexpr (SPAN) {
                    raw[u][0] = __ldg(s0 + (b.lo + r) * nvi + j);
                    if (z.w1 != 0.0f) raw[u][1] = __ldg(s1 + (b.lo + r) * nvi + j);
                } else {
                    Tap2 t = tap2(tab, g, 1, b.r0 + r);
                    wy[u][0] = t.w0;
                    wy[u][1] = t.w1;
                    raw[u][0] = __ldg(s0 + t.i0 * nvi + j);
                    raw[u][1] = __ldg(s0 + t.i1 * nvi + j);
                    if (z.w1 != 0.0f) {
                        raw[u][2] = __ldg(s1 + t.i0 * nvi + j);
                        raw[u][3] = __ldg(s1 + t.i1 * nvi + j);
                    }
                }
            }
        }
    }
    __device__ __forceinline__ void store(float* sh, const Tap2& z, const Batch& b, int nvi, int P,
            int base) {
        const int V = Vec16<D>::V;
#pragma unroll
        for (int u = 0; u < ITEMS; ++u) {
            int it = base + threadIdx.x + u * blockDim.x;
            if (it < b.items) {
                int r = it / nvi, j = it - r * nvi;
                float a[V], c[V], v[V];
                if constexpr (SPAN) {
                    Vec16<D>::unpack(raw[u][0], a);
#pragma unroll
                    for (int k = 0; k < V; ++k) v[k] = z.w0 * a[k];
                    if (z.w1 != 0.0f) {
                        Vec16<D>::unpack(raw[u][1], c);
#pragma unroll
                        for (int k = 0; k < V; ++k) v[k] = fmaf(z.w1, c[k], v[k]);
                    }
                } else {
                    Vec16<D>::unpack(raw[u][0], a);
                    Vec16<D>::unpack(raw[u][1], c);
#pragma unroll
                    for (int k = 0; k < V; ++k) v[k] = z.w0 * fmaf(wy[u][1], c[k], wy[u][0] * a[k]);
                    if (z.w1 != 0.0f) {
                        Vec16<D>::unpack(raw[u][2], a);
                        Vec16<D>::unpack(raw[u][3], c);
#pragma unroll
                        for (int k = 0; k < V; ++k)
                            v[k] = fmaf(z.w1, fmaf(wy[u][1], c[k], wy[u][0] * a[k]), v[k]);
                    }
                }
                float* row = padded(sh + r * P, j, V);
#pragma unroll
                for (int k = 0; k < V; ++k) row[k] = v[k];
            }
        }
    }
};

/* Stage two: one output vector of each of the thread's rows of batch `b`, blended from the
   stage-one rows at `cur` and stored whole. */
template <typename D, int SPAN>
__device__ __forceinline__ void stage_two(const float* cur, const Batch& b, const XTaps<D>& xt,
        const int* tab, const Geo& g, typename D::T* dst, int P, int roff, int rstep) {
    const int V = Vec16<D>::V;
    if (roff >= rstep) return;
    for (int r = roff; r < b.rows; r += rstep) {
        float o[V];
        if constexpr (SPAN) {
            Tap2 t = tap2(tab, g, 1, b.r0 + r);
            const float* ra = cur + (t.i0 - b.lo) * P;
            const float* rb = cur + (t.i1 - b.lo) * P;
#pragma unroll
            for (int k = 0; k < V; ++k)
                o[k] = fmaf(t.w1, xt.at_row(rb, k), t.w0 * xt.at_row(ra, k));
        } else {
#pragma unroll
            for (int k = 0; k < V; ++k) o[k] = xt.at_row(cur + r * P, k);
        }
        *reinterpret_cast<uint4*>(dst + (i64)(b.r0 + r) * g.out[2]) = Pack16<D>::pack(o);
    }
}

/* grid: blocks over (plane, output slice); R output rows a batch, P floats a padded row. Each
   batch: stage one into shared memory, a barrier, stage two, a barrier. */
template <typename D, int ITEMS, int SPAN>
__device__ __forceinline__ void lin(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, const int* __restrict__ tab, Geo g, i64 planes, int R,
        int P) {
    extern __shared__ float sh[];
    typedef typename D::T T;
    const int V = Vec16<D>::V;
    const int OZ = (int)g.out[0], OY = (int)g.out[1], OX = (int)g.out[2];
    const int nvi = (int)g.in[2] / V, nvo = OX / V;
    const int cv = threadIdx.x % nvo, rstep = blockDim.x / nvo, roff = threadIdx.x / nvo;
    XTaps<D> xt;
    xt.load(tab, g, cv * V);
    const i64 slice = g.in[1] * g.in[2];
    StageOne<D, ITEMS, SPAN> one;
    for (i64 bi = blockIdx.x; bi < planes * OZ; bi += gridDim.x) {
        i64 p = bi / OZ;
        int oz = (int)(bi - p * OZ);
        Tap2 z = tap2(tab, g, 0, oz);
        const uint4* s0 = reinterpret_cast<const uint4*>(x + (p * g.in[0] + z.i0) * slice);
        const uint4* s1 = reinterpret_cast<const uint4*>(x + (p * g.in[0] + z.i1) * slice);
        T* dst = y + (p * OZ + oz) * (i64)OY * OX + cv * V;
        for (int r0 = 0; r0 < OY; r0 += R) {
            Batch b = batch_at<SPAN>(tab, g, r0, R, nvi);
            for (int base = 0; base < b.items; base += ITEMS * blockDim.x) {
                one.load(s0, s1, tab, g, z, b, nvi, base);
                one.store(sh, z, b, nvi, P, base);
            }
            __syncthreads();
            stage_two<D, SPAN>(sh, b, xt, tab, g, dst, P, roff, rstep);
            __syncthreads();
        }
    }
}

/* lin_{rows,span}_{ITEMS}_{dtype}, held to 64 registers (8 blocks of 128 threads an SM). */
#define LIN1(name, D, I) \
extern "C" __global__ void __launch_bounds__(256, 4) lin_rows_##I##_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p, int r, int w) \
{ lin<D, I, 0>(x, y, t, g, p, r, w); } \
extern "C" __global__ void __launch_bounds__(256, 4) lin_span_##I##_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p, int r, int w) \
{ lin<D, I, 1>(x, y, t, g, p, r, w); }
#define LIN(name, D) LIN1(name, D, 1)
FOR_EACH_DTYPE(LIN)
"#
    ),
};

/// Shared memory a block's stage-one rows may take: 8 blocks of 128 threads fit an SM's
/// 228 KiB, and larger batches (fewer barriers) measured faster up to there on an H200.
const BUFFER: usize = 20 << 10;

/// Rows per batch tried at most.
const MAX_BATCH: usize = 256;

/// A launch the kernels take: the geometry as `cuda::enqueue` prepared it.
pub(super) struct Linear<'a> {
    /// The three axes' tap tables (depth, rows, columns).
    pub tables: &'a [AxisTaps],
    /// Input, output, table, packed `Geo` and plane count.
    pub args: &'a Args,
    /// Planes (batch × channels).
    pub planes: usize,
    /// Input and output pointers 16-byte aligned.
    pub aligned: bool,
}

/// One launch of the kernels, as [`plan`] chose it.
#[derive(Debug, PartialEq)]
struct Plan {
    /// `lin_span` rather than `lin_rows`.
    span: bool,
    /// Blocks (grid-stride over planes × output slices) and threads a block.
    grid: u32,
    threads: u32,
    /// Output rows a batch, floats a padded shared row, shared bytes a block.
    batch: usize,
    padded: usize,
    shared: usize,
}

/// The launch for `tables` on `planes` planes of `dtype`, when these kernels take it: at most
/// two taps per axis, aligned pointers, input and output rows whole 16-byte vectors, at most
/// 256 output vectors a row.
fn plan(tables: &[AxisTaps], planes: usize, aligned: bool, dtype: DType) -> Option<Plan> {
    let t = tables;
    let lanes = 16 / dtype.size();
    let (ix, ox) = (t[2].input, t[2].outputs());
    let (oy, slices) = (t[1].outputs(), t[0].outputs());
    let ok = aligned
        && t.iter().all(|a| (1..=2).contains(&a.n))
        && ix.is_multiple_of(lanes)
        && ox.is_multiple_of(lanes)
        && ox > 0
        && oy > 0
        && t[1].input * ix < (1 << 31);
    if !ok {
        return None;
    }
    let nvo = ox / lanes;
    let threads = if nvo <= 128 {
        128
    } else if nvo <= 256 {
        256
    } else {
        return None;
    };
    let padded = {
        let p = ix + ix / 32;
        p + (6 - p % 4) % 4
    };
    let rstep = threads / nvo;
    let fits = |rows: usize| rows * padded * 4 <= BUFFER;
    let by_span = || {
        monotone(&t[1])
            .then(|| batch(oy, rstep, |r| span(&t[1], r), fits))
            .flatten()
            .map(|b| (true, b))
    };
    let by_rows = || batch(oy, rstep, |r| r, fits).map(|b| (false, b));
    // On an H200 (×2 trilinear) f32 ran faster with lin_span (fewer loads), f16 and bf16 with
    // lin_rows (half the shared-memory reads in stage two).
    let chosen = if dtype.size() == 4 {
        by_span().or_else(by_rows)
    } else {
        by_rows().or_else(by_span)
    };
    let (span, (batch, rows)) = chosen?;
    Some(Plan {
        span,
        grid: (planes * slices).min(1 << 24) as u32,
        threads: threads as u32,
        batch,
        padded,
        shared: rows * padded * 4,
    })
}

/// Queues the layer when these kernels take it; `None` leaves it to the general ones.
pub(super) fn enqueue(
    l: &Linear<'_>,
    dtype: DType,
    cuda: &torchtrt_plugin_api::CudaLaunch<'_>,
) -> Option<PluginResult<()>> {
    let p = plan(l.tables, l.planes, l.aligned, dtype)?;
    let name = match dtype_name(dtype) {
        Ok(d) => format!("lin_{}_1_{d}", if p.span { "span" } else { "rows" }),
        Err(e) => return Some(Err(e)),
    };
    let args = l.args.clone().i32(p.batch as i32).i32(p.padded as i32);
    // SAFETY: the arguments match the kernel (`Geo` by value, then rows per batch and the
    // padded row length); the tensors were checked by the plugin and the table lives for the
    // process; `p.shared` bytes of shared memory hold every batch's stage-one rows.
    Some(unsafe {
        cuda::launch(
            &PROGRAM,
            &name,
            cuda,
            (p.grid, 1, 1),
            (p.threads, 1, 1),
            p.shared as u32,
            args,
        )
    })
}

/// The largest batch (a multiple of `step` output rows, at most [`MAX_BATCH`] or the rounded-up
/// output) whose stage-one rows `need(batch)` fit: `(batch, rows)`.
fn batch(
    outputs: usize,
    step: usize,
    need: impl Fn(usize) -> usize,
    fits: impl Fn(usize) -> bool,
) -> Option<(usize, usize)> {
    let top = outputs.next_multiple_of(step).min(MAX_BATCH.max(step));
    let mut best = None;
    for r in (step..=top).step_by(step) {
        let rows = need(r);
        if !fits(rows) {
            break;
        }
        best = Some((r, rows));
    }
    best
}

/// The lowest and highest input index of output `o`'s taps.
fn reach(t: &AxisTaps, o: usize) -> (usize, usize) {
    let idx = &t.index[o * t.n..(o + 1) * t.n];
    let lo = idx.iter().copied().min().unwrap_or(0);
    (lo, idx.iter().copied().max().unwrap_or(lo))
}

/// True when the taps' reaches never move back (what `lin_span` assumes of its row taps).
fn monotone(t: &AxisTaps) -> bool {
    (1..t.outputs()).all(|o| {
        let (a, b) = (reach(t, o - 1), reach(t, o));
        a.0 <= b.0 && a.1 <= b.1
    })
}

/// Input rows the tallest batch of `rows` output rows spans.
fn span(t: &AxisTaps, rows: usize) -> usize {
    (0..t.outputs())
        .step_by(rows)
        .map(|r0| {
            let r1 = (r0 + rows).min(t.outputs()) - 1;
            reach(t, r1).1 + 1 - reach(t, r0).0
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact ×2 half-pixel taps of `n` inputs: output `2i` reads `i - 1, i`, `2i + 1` reads
    /// `i, i + 1`, clamped.
    fn doubled(n: usize) -> AxisTaps {
        let mut t = AxisTaps::with_taps(2, n, 2 * n);
        for o in 0..2 * n {
            let i = o / 2;
            let pair = if o % 2 == 0 {
                [i.saturating_sub(1), i]
            } else {
                [i, (i + 1).min(n - 1)]
            };
            t.push_taps(&pair, &[0.25, 0.75]);
        }
        t
    }

    /// ×2 align-corners taps of `n` inputs (what trilinear ×2 with `align_corners` builds).
    fn aligned2(n: usize) -> AxisTaps {
        let mut t = AxisTaps::with_taps(2, n, 2 * n);
        for o in 0..2 * n {
            let x = (o * (n - 1)) as f64 / (2 * n - 1) as f64;
            let base = x.floor();
            t.push_window(base as i64, &mut [1.0 - (x - base), x - base], false);
        }
        t
    }

    #[test]
    fn plan_takes_the_benchmark_trilinear_by_dtype() {
        let tables = [aligned2(32), aligned2(64), aligned2(64)];
        let f32 = plan(&tables, 256, true, DType::F32).expect("taken");
        let (padded, blocks) = (66, 256 * 64);
        assert_eq!(
            f32,
            Plan {
                span: true,
                grid: blocks,
                threads: 128,
                batch: 128,
                padded,
                shared: span(&tables[1], 128) * padded * 4,
            }
        );
        let f16 = plan(&tables, 256, true, DType::F16).expect("taken");
        assert!(!f16.span);
        assert_eq!((f16.batch % 8, f16.shared), (0, f16.batch * padded * 4));
        assert!(f16.shared <= BUFFER && (f16.batch + 8) * padded * 4 > BUFFER);
    }

    #[test]
    fn plan_leaves_other_layers_to_the_general_kernels() {
        let tables = [aligned2(4), aligned2(8), aligned2(8)];
        assert!(plan(&tables, 2, true, DType::F32).is_some());
        assert_eq!(plan(&tables, 2, false, DType::F32), None);
        let half_vector = [aligned2(4), aligned2(8), aligned2(4)];
        assert!(plan(&half_vector, 2, true, DType::F32).is_some());
        assert_eq!(plan(&half_vector, 2, true, DType::F16), None);
        let narrow = [aligned2(4), aligned2(8), aligned2(6)];
        assert_eq!(plan(&narrow, 2, true, DType::F32), None);
        let mut cubic = AxisTaps::with_taps(4, 8, 8);
        cubic.push_taps(&[0; 32], &[0.25; 32]);
        assert_eq!(
            plan(&[aligned2(4), aligned2(8), cubic], 2, true, DType::F32),
            None
        );
        let wide = [AxisTaps::identity(1), aligned2(2), aligned2(1024)];
        assert_eq!(plan(&wide, 2, true, DType::F32), None);
        assert!(plan(&wide, 2, true, DType::F16).is_some());
    }

    #[test]
    fn program_compiles_with_nvrtc() {
        crate::cuda::assert_compiles(&super::PROGRAM);
    }

    #[test]
    fn span_counts_the_input_rows_of_the_tallest_batch() {
        let t = doubled(8);
        assert_eq!(span(&t, 4), 4);
        assert_eq!(span(&t, 16), 8);
        assert_eq!(span(&t, 1), 2);
    }

    #[test]
    fn monotone_rejects_reaches_that_move_back() {
        assert!(monotone(&doubled(8)));
        let mut back = AxisTaps::with_taps(2, 4, 3);
        back.push_taps(&[1, 2, 0, 1, 2, 3], &[0.5; 6]);
        assert!(!monotone(&back));
    }

    #[test]
    fn batch_takes_the_largest_batch_that_fits() {
        let t = doubled(8);
        assert_eq!(
            batch(16, 4, |r| span(&t, r), |rows| rows <= 4),
            Some((4, 4))
        );
        assert_eq!(batch(16, 4, |r| r, |rows| rows <= 13), Some((12, 12)));
        assert_eq!(batch(16, 4, |r| r, |_| true), Some((16, 16)));
        assert_eq!(batch(16, 4, |r| r, |_| false), None);
    }
}
