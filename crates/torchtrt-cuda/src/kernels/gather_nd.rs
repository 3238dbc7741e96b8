//! `GatherNd` and `ScatterNd` layers on any data dtype with i32 or i64 index tuples of up
//! to [`MAX_TUPLE`] entries: a thread per output (gather) or update (scatter) element
//! resolves its tuple against the data's dims. On the device an index out of range gathers
//! zeros and scatters nothing (constant indices are checked at prepare time). Scatter
//! reductions combine through compare-and-swap loops on the word holding the element, so
//! duplicate tuples accumulate; without a reduction duplicates land in no set order.

use torchtrt_core::layers::{InferInput, LayerKind, ScatterReduction};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::access::ACCESS;
use super::layout::{THREADS, blocks};
use super::operands::{dims, expect_arity};
use super::prelude::{Program, with_prelude};
use super::{DeviceKernel, PrepareCtx};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

/// The longest index tuple the kernels take.
pub(crate) const MAX_TUPLE: usize = 8;

static PROGRAM: Program = Program::new("core_gather_nd", || {
    let mut entries = String::new();
    for (e, s) in [(1, "u8"), (2, "u16"), (4, "u32"), (8, "u64")] {
        for x in ["i32", "i64"] {
            entries.push_str(&format!(
                "extern \"C\" __global__ void gather_nd_{e}_{x}(const {s}* data, const {x}* idx, \
                 {s}* out, TUPLE_PARAMS) {{ gather_nd<{s}, {x}>(data, idx, out, TUPLE_ARGS); }}\n\
                 extern \"C\" __global__ void scatter_nd_{e}_{x}(const {s}* upd, const {x}* idx, \
                 {s}* out, TUPLE_PARAMS) {{ scatter_nd<{s}, {x}>(upd, idx, out, TUPLE_ARGS); }}\n"
            ));
            for (dt, d) in REDUCIBLE.iter().filter(|(dt, _)| dt.size() == e) {
                let suffix = super::layout::suffix(*dt);
                entries.push_str(&format!(
                    "extern \"C\" __global__ void scatter_nd_{suffix}_{x}(const {s}* upd, \
                     const {x}* idx, {s}* out, TUPLE_PARAMS, int op) {{ \
                     scatter_nd_reduce<{d}, {x}>(upd, idx, out, TUPLE_ARGS, op); }}\n"
                ));
            }
        }
        entries.push_str(&format!(
            "extern \"C\" __global__ void copy_words_{e}(const {s}* src, {s}* dst, i64 n) \
             {{ GRID_STRIDE(i64, i, n) dst[i] = src[i]; }}\n"
        ));
    }
    with_prelude(&format!("{ACCESS}{BODY}{entries}"))
});

/// Dtypes whose scatter reductions have a kernel, with their CUDA C tags.
const REDUCIBLE: [(DType, &str); 5] = [
    (DType::F32, "F32"),
    (DType::F16, "F16"),
    (DType::BF16, "BF16"),
    (DType::I32, "I32"),
    (DType::I64, "I64"),
];

const BODY: &str = r#"
#define TUPLE_PARAMS i64 n, i64 slice, int k, i64 per_batch, i64 batch_stride, \
    i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, i64 d6, i64 d7, \
    i64 s0, i64 s1, i64 s2, i64 s3, i64 s4, i64 s5, i64 s6, i64 s7
#define TUPLE_ARGS n, slice, k, per_batch, batch_stride, \
    Tuple{{d0, d1, d2, d3, d4, d5, d6, d7}, {s0, s1, s2, s3, s4, s5, s6, s7}}

struct Tuple { i64 d[8]; i64 s[8]; };

/* The data offset of tuple t's slice, or -1 when an index is out of range. */
template <typename X>
__device__ __forceinline__ i64 tuple_offset(const X* idx, i64 t, int k, i64 per_batch,
                                            i64 batch_stride, const Tuple& tp) {
    i64 at = (per_batch > 0 ? t / per_batch : 0) * batch_stride;
    for (int j = 0; j < k; ++j) {
        i64 v = (i64)idx[t * k + j];
        if (v < 0) v += tp.d[j];
        if (v < 0 || v >= tp.d[j]) return -1;
        at += v * tp.s[j];
    }
    return at;
}

template <typename S, typename X>
__device__ __forceinline__ void gather_nd(const S* data, const X* idx, S* out, i64 n,
    i64 slice, int k, i64 per_batch, i64 batch_stride, Tuple tp) {
    GRID_STRIDE(i64, i, n) {
        i64 t = i / slice, e = i - t * slice;
        i64 at = tuple_offset(idx, t, k, per_batch, batch_stride, tp);
        out[i] = at < 0 ? (S)0 : data[at + e];
    }
}

template <typename S, typename X>
__device__ __forceinline__ void scatter_nd(const S* upd, const X* idx, S* out, i64 n,
    i64 slice, int k, i64 per_batch, i64 batch_stride, Tuple tp) {
    GRID_STRIDE(i64, i, n) {
        i64 t = i / slice, e = i - t * slice;
        i64 at = tuple_offset(idx, t, k, per_batch, batch_stride, tp);
        if (at >= 0) out[at + e] = upd[i];
    }
}

__device__ __forceinline__ float combine_f(int op, float a, float b) {
    switch (op) {
    case 1: return a + b;
    case 2: return a * b;
    case 3: return b > a ? b : a;
    case 4: return b < a ? b : a;
    default: return b;
    }
}
template <typename T> __device__ __forceinline__ T combine_i(int op, T a, T b) {
    switch (op) {
    case 1: return (T)((u64)a + (u64)b);
    case 2: return (T)((u64)a * (u64)b);
    case 3: return b > a ? b : a;
    case 4: return b < a ? b : a;
    default: return b;
    }
}

template <typename D> struct Atomic;
template <> struct Atomic<F32> {
    static __device__ __forceinline__ void apply(u32* p, u32 v, int op) {
        u32 old = *p, seen;
        do {
            seen = old;
            float r = combine_f(op, __uint_as_float(seen), __uint_as_float(v));
            old = atomicCAS(p, seen, __float_as_uint(r));
        } while (seen != old);
    }
};
template <> struct Atomic<I32> {
    static __device__ __forceinline__ void apply(u32* p, u32 v, int op) {
        u32 old = *p, seen;
        do {
            seen = old;
            old = atomicCAS(p, seen, (u32)combine_i<i32>(op, (i32)seen, (i32)v));
        } while (seen != old);
    }
};
template <> struct Atomic<I64> {
    static __device__ __forceinline__ void apply(u64* p, u64 v, int op) {
        u64 old = *p, seen;
        do {
            seen = old;
            old = atomicCAS(p, seen, (u64)combine_i<i64>(op, (i64)seen, (i64)v));
        } while (seen != old);
    }
};
/* 16-bit floats: a compare-and-swap on the aligned 32-bit word holding the element. */
template <typename D> struct Atomic16 {
    static __device__ __forceinline__ void apply(u16* p, u16 v, int op) {
        u32* word = (u32*)((u64)p & ~(u64)3);
        int shift = ((u64)p & 2) ? 16 : 0;
        float b = Elem<D>::load(&v, 0);
        u32 old = *word, seen;
        do {
            seen = old;
            u16 cur = (u16)((seen >> shift) & 0xffffu);
            u16 r;
            Elem<D>::store(&r, 0, combine_f(op, Elem<D>::load(&cur, 0), b));
            u32 next = (seen & ~(0xffffu << shift)) | ((u32)r << shift);
            old = atomicCAS(word, seen, next);
        } while (seen != old);
    }
};
template <> struct Atomic<F16> : Atomic16<F16> {};
template <> struct Atomic<BF16> : Atomic16<BF16> {};

template <typename D, typename X, typename S>
__device__ __forceinline__ void scatter_nd_reduce(const S* upd, const X* idx, S* out, i64 n,
    i64 slice, int k, i64 per_batch, i64 batch_stride, Tuple tp, int op) {
    GRID_STRIDE(i64, i, n) {
        i64 t = i / slice, e = i - t * slice;
        i64 at = tuple_offset(idx, t, k, per_batch, batch_stride, tp);
        if (at >= 0) Atomic<D>::apply(out + at + e, upd[i], op);
    }
}
"#;

/// The dims and strides of the axes the tuples index, and where batches start.
struct TupleGeometry {
    /// Tuples per batch (0 without batch axes).
    per_batch: i64,
    batch_stride: i64,
    dims: [i64; MAX_TUPLE],
    strides: [i64; MAX_TUPLE],
    /// Elements per slice.
    slice: usize,
    k: usize,
}

impl TupleGeometry {
    fn new(what: &str, data: &[usize], idx: &[usize], batch_dims: usize) -> Result<Self, String> {
        let k = *idx
            .last()
            .ok_or_else(|| format!("{what}: indices of rank 0"))?;
        if k == 0 || k > MAX_TUPLE || batch_dims + k > data.len() || batch_dims >= idx.len() {
            return Err(format!(
                "{what}: index tuples of {k} over data {data:?} after {batch_dims} batch axes"
            ));
        }
        let mut dims = [1i64; MAX_TUPLE];
        let mut strides = [0i64; MAX_TUPLE];
        for j in 0..k {
            let axis = batch_dims + j;
            dims[j] = data[axis] as i64;
            strides[j] = data[axis + 1..].iter().product::<usize>() as i64;
        }
        let batches: usize = data[..batch_dims].iter().product();
        let tuples: usize = idx[..idx.len() - 1].iter().product();
        Ok(TupleGeometry {
            per_batch: if batch_dims == 0 {
                0
            } else {
                (tuples / batches.max(1)) as i64
            },
            batch_stride: data[batch_dims..].iter().product::<usize>() as i64,
            dims,
            strides,
            slice: data[batch_dims + k..].iter().product(),
            k,
        })
    }

    fn push(&self, args: KernelArgs, n: usize) -> KernelArgs {
        let args = args
            .i64(n as i64)
            .i64(self.slice as i64)
            .i32(self.k as i32)
            .i64(self.per_batch)
            .i64(self.batch_stride);
        let args = self.dims.iter().fold(args, |a, &d| a.i64(d));
        self.strides.iter().fold(args, |a, &s| a.i64(s))
    }
}

fn index_suffix(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::I32 => Some("i32"),
        DType::I64 => Some("i64"),
        _ => None,
    }
}

/// Checks constant indices against known data dims.
fn check_constant_indices(
    what: &str,
    data: &InferInput<'_>,
    idx: &InferInput<'_>,
    batch_dims: usize,
) -> Result<(), String> {
    let (Some(v), Some(k)) = (idx.value, idx.shape.last().and_then(|d| d.as_const())) else {
        return Ok(());
    };
    let values = v.to_i64_vec().unwrap_or_default();
    for (t, tuple) in values.chunks(k.max(1) as usize).enumerate() {
        for (j, &i) in tuple.iter().enumerate() {
            if let Some(d) = data.shape.get(batch_dims + j).and_then(|d| d.as_const())
                && (i < -d || i >= d)
            {
                return Err(format!(
                    "{what}: index {i} of tuple {t} is out of range for a dim of {d}"
                ));
            }
        }
    }
    Ok(())
}

/// Prepares a `GatherNd` or `ScatterNd` layer.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let (what, batch_dims, reduction) = match layer {
        LayerKind::GatherNd(l) => ("GatherNd", l.batch_dims, None),
        LayerKind::ScatterNd(l) => ("ScatterNd", 0, Some(l.reduction)),
        _ => return None,
    };
    let (data, idx) = (inputs.first()?, inputs.get(1)?);
    let x = index_suffix(idx.dtype)?;
    let elem = data.dtype.size();
    if !matches!(elem, 1 | 2 | 4 | 8) {
        return None;
    }
    let entry = match reduction {
        None => format!("gather_nd_{elem}_{x}"),
        Some(ScatterReduction::None) => format!("scatter_nd_{elem}_{x}"),
        Some(_) => {
            REDUCIBLE.iter().find(|(d, _)| *d == data.dtype)?;
            format!("scatter_nd_{}_{x}", super::layout::suffix(data.dtype))
        }
    };
    Some((|| {
        check_constant_indices(what, data, idx, batch_dims)?;
        let source = PROGRAM.source();
        let load = |e: &str| {
            ctx.programs
                .function(&source, e)
                .map_err(|err| format!("{what}: {err}"))
        };
        Ok(Box::new(TupleKernel {
            what,
            batch_dims,
            reduction,
            dtype: data.dtype,
            index: idx.dtype,
            main: load(&entry)?,
            copy: load(&format!("copy_words_{elem}"))?,
        }) as Box<dyn DeviceKernel>)
    })())
}

struct TupleKernel {
    what: &'static str,
    batch_dims: usize,
    /// `None` for a gather.
    reduction: Option<ScatterReduction>,
    dtype: DType,
    index: DType,
    main: Function,
    copy: Function,
}

fn reduction_code(r: ScatterReduction) -> i32 {
    match r {
        ScatterReduction::None => 0,
        ScatterReduction::Add => 1,
        ScatterReduction::Mul => 2,
        ScatterReduction::Max => 3,
        ScatterReduction::Min => 4,
    }
}

impl DeviceKernel for TupleKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        let what = self.what;
        let n_in = 2 + usize::from(self.reduction.is_some());
        expect_arity(what, inputs, outputs, n_in, 1)?;
        let (data, idx, out) = (&inputs[0], &inputs[1], &outputs[0]);
        if idx.desc.dtype != self.index
            || data.desc.dtype != self.dtype
            || out.desc.dtype != self.dtype
        {
            return Err(format!(
                "{what}: prepared for {} data and {} indices, got {} and {}",
                self.dtype, self.index, data.desc.dtype, idx.desc.dtype
            ));
        }
        let dshape = dims(&data.desc)?;
        let ishape = dims(&idx.desc)?;
        let g = TupleGeometry::new(what, &dshape, &ishape, self.batch_dims)?;
        let tuples: usize = ishape[..ishape.len() - 1].iter().product();
        let n = tuples * g.slice;
        let launch = |f: &Function, mut args: KernelArgs, items: usize| {
            if items == 0 {
                return Ok(());
            }
            // SAFETY: the arguments match the entry point's parameters; the data, indices,
            // updates and output hold the elements the shapes describe and outlive the work.
            unsafe { f.launch(stream, (blocks(items), 1, 1), (THREADS, 1, 1), 0, &mut args) }
                .map_err(|e| format!("{what}: {e}"))
        };
        match self.reduction {
            None => {
                let args = KernelArgs::new().ptr(data.ptr).ptr(idx.ptr).ptr(out.ptr);
                launch(&self.main, g.push(args, n), n)
            }
            Some(r) => {
                let upd = &inputs[2];
                if dims(&upd.desc)?.iter().product::<usize>() != n || upd.desc.dtype != self.dtype {
                    return Err(format!(
                        "{what}: updates {:?} do not hold {tuples} slices of {}",
                        upd.desc.shape, g.slice
                    ));
                }
                let total: usize = dshape.iter().product();
                let copy = KernelArgs::new()
                    .ptr(data.ptr)
                    .ptr(out.ptr)
                    .i64(total as i64);
                launch(&self.copy, copy, total)?;
                let args = KernelArgs::new().ptr(upd.ptr).ptr(idx.ptr).ptr(out.ptr);
                let mut args = g.push(args, n);
                if r != ScatterReduction::None {
                    args = args.i32(reduction_code(r));
                }
                launch(&self.main, args, n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TupleGeometry;

    #[test]
    fn program_compiles_with_nvrtc() {
        super::super::prelude::assert_compiles(&super::PROGRAM);
    }

    #[test]
    fn tuples_resolve_axes_after_the_batch() {
        let g = TupleGeometry::new("t", &[2, 3, 4, 5], &[2, 6, 2], 1).unwrap();
        assert_eq!((g.k, g.slice, g.per_batch, g.batch_stride), (2, 5, 6, 60));
        assert_eq!((&g.dims[..2], &g.strides[..2]), (&[3, 4][..], &[20, 5][..]));
        assert!(TupleGeometry::new("t", &[2, 3], &[4, 3], 0).is_err());
    }
}
