//! The separable CUDA kernel of Interpolate for tap tables of at most two taps per axis
//! (linear, bilinear and trilinear at any scale and coordinate mode, nearest), whose row taps
//! never move back: blocks walk (plane, output slice) items (16-bit types in two waves of
//! resident blocks, f32 a block an item), each in batches of output rows. Input
//! rows a whole number of 16-byte vectors wide. Each batch blends the depth taps of the input
//! rows it spans into f32 rows in shared memory (one vector load an item a tap). Then each
//! thread walks a run of output rows over four output columns: it keeps the column blends of
//! the two input rows the current output row needs in registers, computes a new one only when
//! the row taps move on (every second output row at ×2), and blends them into the output.
//! Every column blend is thus computed once per run instead of once per output row.

use torchtrt_plugin_api::{DType, PluginResult};

use super::cuda::{dtype_name, geo_c};
use super::taps::AxisTaps;
use crate::cuda::{self, Args, Program};

pub(crate) const PROGRAM: Program = Program {
    name: "interpolate_linear",
    source: concat!(
        geo_c!(),
        r#"
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

/* Column c of a shared row lives at c ^ ((c >> 5) & 1): the lanes of a warp reading columns
   2L + k (a ×2 upsample) hit distinct banks, and aligned float4 groups stay aligned. */
__device__ __forceinline__ int swz(int c) { return c ^ ((c >> 5) & 1); }
__device__ __forceinline__ void store4_swz(float* row, int c, const float* v) {
    *reinterpret_cast<float4*>(row + c) = (c >> 5) & 1 ? make_float4(v[1], v[0], v[3], v[2])
                                                       : make_float4(v[0], v[1], v[2], v[3]);
}

/* A thread's four output columns: byte offsets of their taps in a shared row, and weights. */
struct ColTaps {
    unsigned o0[4], o1[4];
    float w0[4], w1[4];
    __device__ __forceinline__ void load(const int* tab, const Geo& g, int c0) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            Tap2 t = tap2(tab, g, 2, c0 + k);
            o0[k] = 4u * swz(t.i0);
            o1[k] = 4u * swz(t.i1);
            w0[k] = t.w0;
            w1[k] = t.w1;
        }
    }
    __device__ __forceinline__ void blend(const char* row, float* out) const {
#pragma unroll
        for (int k = 0; k < 4; ++k)
            out[k] = fmaf(w1[k], *reinterpret_cast<const float*>(row + o1[k]),
                          w0[k] * *reinterpret_cast<const float*>(row + o0[k]));
    }
};

/* Four outputs stored at once (16 bytes of f32, 8 of f16/bf16). */
template <typename D> struct Store4 {
    static __device__ __forceinline__ void at(u16* p, const float* o) {
        *reinterpret_cast<uint2*>(p) = make_uint2(Pack2<D>::of(o[0], o[1]), Pack2<D>::of(o[2], o[3]));
    }
};
template <> struct Store4<F32> {
    static __device__ __forceinline__ void at(float* p, const float* o) {
        *reinterpret_cast<float4*>(p) = make_float4(o[0], o[1], o[2], o[3]);
    }
};

/* Input rows lo..lo + n of the two depth planes, blended by the depth taps into the shared rows
   A (P floats apart); two rows' loads in flight a thread. */
template <typename D>
__device__ __forceinline__ void blend_depth(float* A, const uint4* s0, const uint4* s1,
        const Tap2& z, int lo, int n, int nvi, int P) {
    const int V = Vec16<D>::V, IF = 2;
    const bool fit = nvi <= (int)blockDim.x;
    const int jt = fit ? threadIdx.x % nvi : threadIdx.x, jstep = fit ? nvi : blockDim.x;
    const int rt = fit ? threadIdx.x / nvi : 0, rstep = fit ? blockDim.x / nvi : 1;
    if (rt >= rstep) return;
    for (int j = jt; j < nvi; j += jstep) {
        const uint4* b0 = s0 + lo * nvi + j;
        const uint4* b1 = s1 + lo * nvi + j;
        for (int r = rt; r < n; r += IF * rstep) {
            uint4 ra[IF], rb[IF];
#pragma unroll
            for (int u = 0; u < IF; ++u) {
                if (r + u * rstep < n) {
                    ra[u] = __ldg(b0 + (r + u * rstep) * nvi);
                    if (z.w1 != 0.0f) rb[u] = __ldg(b1 + (r + u * rstep) * nvi);
                }
            }
#pragma unroll
            for (int u = 0; u < IF; ++u) {
                if (r + u * rstep >= n) break;
                float a[V], c[V];
                Vec16<D>::unpack(ra[u], a);
#pragma unroll
                for (int k = 0; k < V; ++k) a[k] *= z.w0;
                if (z.w1 != 0.0f) {
                    Vec16<D>::unpack(rb[u], c);
#pragma unroll
                    for (int k = 0; k < V; ++k) a[k] = fmaf(z.w1, c[k], a[k]);
                }
                float* row = A + (r + u * rstep) * P;
#pragma unroll
                for (int k = 0; k < V; k += 4) store4_swz(row, j * V + k, a + k);
            }
        }
    }
}

/* The row taps of output rows r0..r0 + rows as int4: byte offsets of both input rows from the
   batch's first (in shared rows P floats apart), and weights. */
__device__ __forceinline__ void row_taps(int4* ytab, const int* tab, const Geo& g, int r0, int rows, int P) {
    Tap2 f = tap2(tab, g, 1, r0);
    const int lo = min(f.i0, f.i1);
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        Tap2 t = tap2(tab, g, 1, r0 + r);
        ytab[r] = make_int4((t.i0 - lo) * P * 4, (t.i1 - lo) * P * 4, __float_as_int(t.w0),
                            __float_as_int(t.w1));
    }
}

/* Blocks stride over (plane, output slice) items; R output rows a batch, P floats a shared row.
   Shared memory: the batch's row taps (R int4: byte offsets of both rows, weights), then its
   input rows. Each batch: taps and depth blend, a barrier, the row walks, a barrier. When one
   batch holds every output row, its taps are the same for every item: computed once a block. */
template <typename D>
__device__ __forceinline__ void lin_win(const typename D::T* __restrict__ x,
        typename D::T* __restrict__ y, const int* __restrict__ tab, Geo g, i64 planes, int R,
        int P) {
    extern __shared__ float4 lin_sh[];
    typedef typename D::T T;
    const int V = Vec16<D>::V;
    const int OZ = (int)g.out[0], OY = (int)g.out[1], OX = (int)g.out[2];
    const int nvi = (int)g.in[2] / V, nxq = OX / 4;
    const int cg = threadIdx.x % nxq, runs = blockDim.x / nxq, run = threadIdx.x / nxq;
    const int per = (R + runs - 1) / runs;
    int4* ytab = reinterpret_cast<int4*>(lin_sh);
    float* A = reinterpret_cast<float*>(lin_sh + R);
    const char* Ab = reinterpret_cast<const char*>(A);
    ColTaps xt;
    xt.load(tab, g, cg * 4);
    const i64 slice = g.in[1] * g.in[2];
    const bool whole = R >= OY;
    if (whole) row_taps(ytab, tab, g, 0, OY, P);
    for (i64 bi = blockIdx.x; bi < planes * OZ; bi += gridDim.x) {
        i64 p = bi / OZ;
        int oz = (int)(bi - p * OZ);
        Tap2 z = tap2(tab, g, 0, oz);
        const uint4* s0 = reinterpret_cast<const uint4*>(x + (p * g.in[0] + z.i0) * slice);
        const uint4* s1 = reinterpret_cast<const uint4*>(x + (p * g.in[0] + z.i1) * slice);
        T* dst = y + (p * OZ + oz) * (i64)OY * OX + cg * 4;
        for (int r0 = 0; r0 < OY; r0 += R) {
            const int rows = min(R, OY - r0);
            Tap2 f = tap2(tab, g, 1, r0), l = tap2(tab, g, 1, r0 + rows - 1);
            const int lo = min(f.i0, f.i1), n = max(l.i0, l.i1) + 1 - lo;
            if (!whole) row_taps(ytab, tab, g, r0, rows, P);
            blend_depth<D>(A, s0, s1, z, lo, n, nvi, P);
            __syncthreads();
            if (run < runs) {
                const int rs = run * per, re = min(rs + per, rows);
                int h0 = -1, h1 = -1;
                float c0[4], c1[4];
                T* out = dst + (i64)(r0 + rs) * OX;
                for (int r = rs; r < re; ++r, out += OX) {
                    int4 t = ytab[r];
                    if (t.x == h1 && t.y != t.x) {
#pragma unroll
                        for (int k = 0; k < 4; ++k) c0[k] = c1[k];
                        xt.blend(Ab + t.y, c1);
                    } else if (t.x != h0 || t.y != h1) {
                        xt.blend(Ab + t.x, c0);
                        if (t.y != t.x) {
                            xt.blend(Ab + t.y, c1);
                        } else {
#pragma unroll
                            for (int k = 0; k < 4; ++k) c1[k] = c0[k];
                        }
                    }
                    h0 = t.x;
                    h1 = t.y;
                    const float w0 = __int_as_float(t.z), w1 = __int_as_float(t.w);
                    float o[4];
#pragma unroll
                    for (int k = 0; k < 4; ++k) o[k] = fmaf(w1, c1[k], w0 * c0[k]);
                    Store4<D>::at(out, o);
                }
            }
            __syncthreads();
        }
    }
}

/* lin_win_{dtype}, held to 64 registers (8 blocks of 128 threads an SM; more blocks at fewer
   registers spilled and measured slower on an H200). */
#define LIN(name, D) \
extern "C" __global__ void __launch_bounds__(256, 4) lin_win_##name(const D::T* x, D::T* y, const int* t, Geo g, i64 p, int r, int w) \
{ lin_win<D>(x, y, t, g, p, r, w); }
FOR_EACH_DTYPE(LIN)
"#
    ),
};

/// Shared memory a block's batch may take (row taps and input rows): 8 blocks of 128 threads
/// fit an SM's 228 KiB, and whole ×2 trilinear slices (one batch, fewer barriers) measured
/// fastest on an H200.
const BUFFER: usize = 20 << 10;

/// Waves of resident blocks a 16-bit launch takes, its blocks striding over the items: a
/// block's column and row taps are then computed once for several items (×2 trilinear f16 on
/// an H200: 0.1880 → 0.1765 ms at two waves, 0.1825 at eight). f32 blocks, twice the bytes an
/// item, run one item each (0.3211 ms; two waves measured 0.3448).
const WAVES_16: u32 = 2;

/// Rows per batch tried at most.
const MAX_BATCH: usize = 256;

/// A launch the kernel takes: the geometry as `cuda::enqueue` prepared it.
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

/// One launch of the kernel, as [`plan`] chose it.
#[derive(Debug, PartialEq)]
struct Plan {
    /// (plane, output slice) items, which blocks stride over, and threads a block.
    items: u32,
    threads: u32,
    /// Output rows a batch, floats a shared input row, shared bytes a block.
    batch: usize,
    row: usize,
    shared: usize,
}

/// The launch for `tables` on `planes` planes of `dtype`, when the kernel takes it: at most two
/// taps per axis, row taps that never move back, aligned pointers, input rows whole 16-byte
/// vectors, output rows whole groups of four and at most 1024 wide.
fn plan(tables: &[AxisTaps], planes: usize, aligned: bool, dtype: DType) -> Option<Plan> {
    let t = tables;
    let lanes = 16 / dtype.size();
    let (ix, ox) = (t[2].input, t[2].outputs());
    let (oy, slices) = (t[1].outputs(), t[0].outputs());
    let ok = aligned
        && t.iter().all(|a| (1..=2).contains(&a.n))
        && ix.is_multiple_of(lanes)
        && ox.is_multiple_of(4)
        && ox > 0
        && oy > 0
        && t[1].input * ix < (1 << 31)
        && monotone(&t[1]);
    if !ok {
        return None;
    }
    let groups = ox / 4;
    let threads = match groups {
        0..=128 => 128,
        129..=256 => 256,
        _ => return None,
    };
    let bytes = |rows: usize| rows * 16 + span(&t[1], rows) * ix * 4;
    let batch = batch(oy, threads / groups, |rows| bytes(rows) <= BUFFER)?;
    Some(Plan {
        items: (planes * slices).min(1 << 24) as u32,
        threads: threads as u32,
        batch,
        row: ix,
        shared: bytes(batch),
    })
}

/// Queues the layer when the kernel takes it; `None` leaves it to the general ones.
pub(super) fn enqueue(
    l: &Linear<'_>,
    dtype: DType,
    cuda: &torchtrt_plugin_api::CudaLaunch<'_>,
) -> Option<PluginResult<()>> {
    let p = plan(l.tables, l.planes, l.aligned, dtype)?;
    let name = match dtype_name(dtype) {
        Ok(d) => format!("lin_win_{d}"),
        Err(e) => return Some(Err(e)),
    };
    let grid = if dtype.size() == 2 {
        match cuda::resident_blocks(&PROGRAM, &name, cuda, p.threads, p.shared as u32) {
            Ok(r) => p.items.min(r.saturating_mul(WAVES_16)),
            Err(e) => return Some(Err(e)),
        }
    } else {
        p.items
    };
    let args = l.args.clone().i32(p.batch as i32).i32(p.row as i32);
    // SAFETY: the arguments match the kernel (`Geo` by value, then rows per batch and floats a
    // shared row); the tensors were checked by the plugin and the table lives for the process;
    // `p.shared` bytes of shared memory hold every batch's row taps and input rows.
    Some(unsafe {
        cuda::launch(
            &PROGRAM,
            &name,
            cuda,
            (grid, 1, 1),
            (p.threads, 1, 1),
            p.shared as u32,
            args,
        )
    })
}

/// The largest batch of output rows (a multiple of `step`, at most [`MAX_BATCH`] or the
/// rounded-up output) that `fits`.
fn batch(outputs: usize, step: usize, fits: impl Fn(usize) -> bool) -> Option<usize> {
    let top = outputs.next_multiple_of(step).min(MAX_BATCH.max(step));
    (step..=top)
        .step_by(step)
        .take_while(|&rows| fits(rows))
        .last()
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
    fn plan_takes_the_benchmark_trilinear_in_whole_slices() {
        let tables = [aligned2(32), aligned2(64), aligned2(64)];
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let p = plan(&tables, 256, true, dtype).expect("taken");
            let shared = 128 * 16 + 64 * 64 * 4;
            assert_eq!(
                p,
                Plan {
                    items: 256 * 64,
                    threads: 128,
                    batch: 128,
                    row: 64,
                    shared,
                },
                "{dtype:?}"
            );
            assert!(shared <= BUFFER);
        }
    }

    #[test]
    fn plan_batches_rows_whose_inputs_do_not_fit() {
        let tables = [aligned2(2), aligned2(128), aligned2(128)];
        let p = plan(&tables, 2, true, DType::F32).expect("taken");
        assert_eq!((p.threads, p.row), (128, 128));
        assert!(p.batch < 256 && p.batch.is_multiple_of(2), "{p:?}");
        assert!(p.shared <= BUFFER);
        let next = p.batch + 2;
        assert!(next * 16 + span(&tables[1], next) * 128 * 4 > BUFFER);
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
        let mut back = AxisTaps::with_taps(2, 4, 3);
        back.push_taps(&[1, 2, 0, 1, 2, 3], &[0.5; 6]);
        assert_eq!(
            plan(&[aligned2(4), back, aligned2(8)], 2, true, DType::F32),
            None
        );
        let wide = [AxisTaps::identity(1), aligned2(2), aligned2(512)];
        assert_eq!(
            plan(&wide, 2, true, DType::F16).map(|p| p.threads),
            Some(256)
        );
        let wider = [AxisTaps::identity(1), aligned2(2), aligned2(1024)];
        assert_eq!(plan(&wider, 2, true, DType::F32), None);
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
        assert_eq!(batch(16, 4, |r| span(&t, r) <= 4), Some(4));
        assert_eq!(batch(16, 4, |r| r <= 13), Some(12));
        assert_eq!(batch(16, 4, |_| true), Some(16));
        assert_eq!(batch(16, 4, |_| false), None);
        assert_eq!(batch(1000, 2, |_| true), Some(MAX_BATCH));
    }
}
