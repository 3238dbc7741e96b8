//! Binary element-wise layers (`Elementwise`) with numpy broadcasting: each operation is a
//! CUDA C expression of `x`, `y` per element family (float arithmetic in f32 for f32, f16 and
//! bf16; wrapping integer arithmetic; comparisons to bool; logic on bools). Same-shape and
//! scalar operands run flat in 16-byte packs; other broadcasts walk merged dims with
//! per-operand strides.

use torchtrt_core::layers::{ElementwiseOp, InferInput, LayerKind};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::layout::{THREADS, Walk, blocks, broadcast_strides, generated, suffix, tag};
use super::map::{numel, pack_len};
use super::operands::{dims, expect_arity};
use super::{DeviceKernel, PrepareCtx, ProgramSource};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Elementwise";

/// Device functions the expressions use.
pub(super) const HELPERS: &str = r#"
__device__ __forceinline__ float py_mod(float x, float y) {
    float r = fmodf(x, y);
    return (r != 0.0f && ((r < 0.0f) != (y < 0.0f))) ? r + y : r;
}
"#;

/// Element families of an operation's inputs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Float,
    Int,
    Bool,
}

/// The expression of `op` on `x`, `y` for `family`, if it has a CUDA kernel. Integer
/// division, remainder and power stay on the host (it reports division by zero).
fn expr(op: ElementwiseOp, fmod: bool, family: Family) -> Option<&'static str> {
    use ElementwiseOp as E;
    use Family::{Bool, Float, Int};
    Some(match (op, family) {
        (E::Add, Float) => "x + y",
        (E::Sub, Float) => "x - y",
        (E::Mul, Float) => "x * y",
        (E::Div, Float) => "x / y",
        (E::Pow, Float) => "powf(x, y)",
        (E::Max, Float) => "(x > y || x != x) ? x : y",
        (E::Min, Float) => "(x < y || x != x) ? x : y",
        (E::Mod, Float) if fmod => "fmodf(x, y)",
        (E::Mod, Float) => "py_mod(x, y)",
        (E::PRelu, Float) => "x < 0.0f ? y * x : x",
        (E::Add, Int) => "(u64)x + (u64)y",
        (E::Sub, Int) => "(u64)x - (u64)y",
        (E::Mul, Int) => "(u64)x * (u64)y",
        (E::Max, Int) => "x > y ? x : y",
        (E::Min, Int) => "x < y ? x : y",
        (E::Equal, Float | Int) => "x == y",
        (E::Less, Float | Int) => "x < y",
        (E::LessOrEqual, Float | Int) => "x <= y",
        (E::Greater, Float | Int) => "x > y",
        (E::GreaterOrEqual, Float | Int) => "x >= y",
        (E::And, Bool) => "(x != 0) && (y != 0)",
        (E::Or, Bool) => "(x != 0) || (y != 0)",
        (E::Xor, Bool) => "(x != 0) != (y != 0)",
        (E::ShiftLeft, Int) => "(y < 0 || y >= (TI::C)(8 * sizeof(TI::S))) ? 0 : (u64)x << y",
        (E::ShiftRight, Int) => {
            "(y < 0 || y >= (TI::C)(8 * sizeof(TI::S))) ? (x < 0 ? -1 : 0) : (x >> y)"
        }
        _ => return None,
    })
}

/// The f32 expression of `op` on `x`, `y` (float arithmetic only, no comparisons or logic),
/// for generated kernels that compute several layers at once; helpers in [`HELPERS`].
pub(super) fn float_expr(op: ElementwiseOp, fmod: bool) -> Option<&'static str> {
    if op.is_comparison() {
        return None;
    }
    expr(op, fmod, Family::Float)
}

const BODY: &str = r#"
__device__ __forceinline__ TO::C op_fn(TI::C x, TI::C y) { return (TO::C)(EXPR); }

template <int V>
__device__ __forceinline__ void zip_flat(const TI::S* a, const TI::S* b, TO::S* o, u64 n,
                                         int sa, int sb) {
    TI::C a0 = sa ? (TI::C)0 : TI::ld(a[0]);
    TI::C b0 = sb ? (TI::C)0 : TI::ld(b[0]);
    u64 packs = n / V;
    GRID_STRIDE(u64, p, packs) {
        Pack<TI::S, V> pa, pb;
        if (sa) pa = ld_pack<TI::S, V>(a + p * V);
        if (sb) pb = ld_pack<TI::S, V>(b + p * V);
        Pack<TO::S, V> r;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            TI::C x = sa ? TI::ld(pa.e[k]) : a0;
            TI::C y = sb ? TI::ld(pb.e[k]) : b0;
            r.e[k] = TO::st(op_fn(x, y));
        }
        st_pack<TO::S, V>(o + p * V, r);
    }
    GRID_STRIDE(u64, i, n - packs * V) {
        u64 j = packs * V + i;
        TI::C x = sa ? TI::ld(a[j]) : a0;
        TI::C y = sb ? TI::ld(b[j]) : b0;
        o[j] = TO::st(op_fn(x, y));
    }
}
extern "C" __global__ void zip_vec(const TI::S* a, const TI::S* b, TO::S* o, u64 n, int sa,
                                   int sb) {
    zip_flat<VEC>(a, b, o, n, sa, sb);
}
extern "C" __global__ void zip_one(const TI::S* a, const TI::S* b, TO::S* o, u64 n, int sa,
                                   int sb) {
    zip_flat<1>(a, b, o, n, sa, sb);
}

template <typename I>
__device__ __forceinline__ void zip_walk(const TI::S* a, const TI::S* b, TO::S* o, u64 n,
                                         const FastDiv* dv, int rank, const i64 (*st)[MAX_RANK]) {
    GRID_STRIDE(I, i, n) {
        typename Index<I>::SI off[2];
        walk<I, 2>(i, rank, dv, st, off);
        o[i] = TO::st(op_fn(TI::ld(a[off[0]]), TI::ld(b[off[1]])));
    }
}
#define ZIP_WALK(NAME, I) \
extern "C" __global__ void NAME(const TI::S* a, const TI::S* b, TO::S* o, u64 n, int rank, \
                                DIMS_PARAMS, STRIDE_PARAMS(x), STRIDE_PARAMS(y)) { \
    DIMS_INIT(dv); \
    const i64 st[2][MAX_RANK] = {STRIDES_INIT(x), STRIDES_INIT(y)}; \
    zip_walk<I>(a, b, o, n, dv, rank, st); \
}
ZIP_WALK(zip_walk32, u32)
ZIP_WALK(zip_walk64, u64)

/* A walk whose innermost dim holds whole packs: operand j reads a pack when its inner
   stride is 1 (inner[j]) and one element to repeat when it is 0. */
template <typename I>
__device__ __forceinline__ void zip_walk_vec(const TI::S* a, const TI::S* b, TO::S* o,
                                             u64 packs, const FastDiv* dv, int rank,
                                             const i64 (*st)[MAX_RANK], int ia, int ib) {
    GRID_STRIDE(I, p, packs) {
        I i = p * VEC;
        typename Index<I>::SI off[2];
        walk<I, 2>(i, rank, dv, st, off);
        Pack<TI::S, VEC> pa, pb;
        TI::C a0 = (TI::C)0, b0 = (TI::C)0;
        if (ia) pa = ld_pack<TI::S, VEC>(a + off[0]); else a0 = TI::ld(a[off[0]]);
        if (ib) pb = ld_pack<TI::S, VEC>(b + off[1]); else b0 = TI::ld(b[off[1]]);
        Pack<TO::S, VEC> r;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            r.e[k] = TO::st(op_fn(ia ? TI::ld(pa.e[k]) : a0, ib ? TI::ld(pb.e[k]) : b0));
        }
        st_pack<TO::S, VEC>(o + i, r);
    }
}
#define ZIP_WALK_VEC(NAME, I) \
extern "C" __global__ void NAME(const TI::S* a, const TI::S* b, TO::S* o, u64 packs, int ia, \
                                int ib, int rank, DIMS_PARAMS, STRIDE_PARAMS(x), \
                                STRIDE_PARAMS(y)) { \
    DIMS_INIT(dv); \
    const i64 st[2][MAX_RANK] = {STRIDES_INIT(x), STRIDES_INIT(y)}; \
    zip_walk_vec<I>(a, b, o, packs, dv, rank, st, ia, ib); \
}
ZIP_WALK_VEC(zip_wvec32, u32)
ZIP_WALK_VEC(zip_wvec64, u64)
"#;

/// Prepares an `Elementwise` layer; `None` for operations and dtypes without a CUDA kernel.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Elementwise(l) = layer else {
        return None;
    };
    let (program, out) = program(l.op, l.fmod, inputs.first()?.dtype)?;
    Some(program.and_then(|p| build(l.op, p, inputs[0].dtype, out, ctx)))
}

/// The program of `op` on `dtype` and its output dtype, if it has a CUDA kernel.
fn program(
    op: ElementwiseOp,
    fmod: bool,
    dtype: DType,
) -> Option<(Result<ProgramSource, String>, DType)> {
    let family = match dtype {
        DType::F32 | DType::F16 | DType::BF16 => Family::Float,
        DType::I32 | DType::I64 => Family::Int,
        DType::I16 | DType::I8 | DType::U8 if op.is_shift() => Family::Int,
        DType::Bool => Family::Bool,
        _ => return None,
    };
    let expr = expr(op, fmod, family)?;
    let out = if op.is_comparison() {
        DType::Bool
    } else {
        dtype
    };
    let stem = format!("{op:?}{}", if fmod { "_fmod" } else { "" }).to_lowercase();
    let name = format!("core_binary_{stem}_{}", suffix(dtype));
    let vec = pack_len(dtype, out);
    let program = generated(name, || {
        format!(
            "typedef Ty<{ti}> TI;\ntypedef Ty<{to}> TO;\n#define VEC {vec}\n#define EXPR {expr}\n\
             {HELPERS}{BODY}",
            ti = tag(dtype),
            to = tag(out),
        )
    });
    Some((program, out))
}

/// Every binary program with a CUDA kernel, for tests that compile them all.
#[cfg(test)]
pub(crate) fn all_programs() -> Vec<ProgramSource> {
    use ElementwiseOp as E;
    let ops = [
        E::Add,
        E::Sub,
        E::Mul,
        E::Div,
        E::Pow,
        E::Max,
        E::Min,
        E::Mod,
        E::And,
        E::Or,
        E::Xor,
        E::Equal,
        E::Less,
        E::LessOrEqual,
        E::Greater,
        E::GreaterOrEqual,
        E::PRelu,
        E::ShiftLeft,
        E::ShiftRight,
    ];
    let dtypes = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::I16,
        DType::I8,
        DType::U8,
        DType::Bool,
    ];
    let mut out = Vec::new();
    for op in ops {
        for fmod in [false, true] {
            for &d in &dtypes {
                if let Some((Ok(p), _)) = program(op, fmod, d) {
                    out.push(p);
                }
            }
        }
    }
    out
}

fn build(
    op: ElementwiseOp,
    program: ProgramSource,
    dtype: DType,
    out: DType,
    ctx: &PrepareCtx<'_>,
) -> Result<Box<dyn DeviceKernel>, String> {
    let vec = pack_len(dtype, out);
    let load = |entry: &str| {
        ctx.programs
            .function(&program, entry)
            .map_err(|e| format!("{WHAT} {op:?}: {e}"))
    };
    Ok(Box::new(ZipKernel {
        dtype,
        out,
        vec: load("zip_vec")?,
        one: load("zip_one")?,
        walk32: load("zip_walk32")?,
        walk64: load("zip_walk64")?,
        wvec32: load("zip_wvec32")?,
        wvec64: load("zip_wvec64")?,
        pack: vec,
    }))
}

struct ZipKernel {
    dtype: DType,
    out: DType,
    vec: Function,
    one: Function,
    walk32: Function,
    walk64: Function,
    wvec32: Function,
    wvec64: Function,
    pack: usize,
}

impl DeviceKernel for ZipKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(WHAT, inputs, outputs, 2, 1)?;
        let (a, b, o) = (&inputs[0], &inputs[1], &outputs[0]);
        if a.desc.dtype != self.dtype || b.desc.dtype != self.dtype || o.desc.dtype != self.out {
            return Err(format!(
                "{WHAT}: prepared for {} → {}, got {}, {} → {}",
                self.dtype, self.out, a.desc.dtype, b.desc.dtype, o.desc.dtype
            ));
        }
        let shape = dims(&o.desc)?;
        let n = numel(&o.desc.shape);
        if n == 0 {
            return Ok(());
        }
        let (pa, pb) = (a.ptr, b.ptr);
        let sa = broadcast_strides(&dims(&a.desc)?, &shape).map_err(|e| format!("{WHAT}: {e}"))?;
        let sb = broadcast_strides(&dims(&b.desc)?, &shape).map_err(|e| format!("{WHAT}: {e}"))?;
        let strides = sa.iter().zip(&sb).map(|(&x, &y)| [x, y]).collect();
        let walk = Walk::new(shape, strides).merged();
        let flat_step = |j: usize| match walk.strides.as_slice() {
            [] => Some(0),
            [s] if s[j] <= 1 => Some(s[j] as i32),
            _ => None,
        };
        let launch = |f: &Function, items: usize, args: &mut KernelArgs| {
            // SAFETY: the arguments match the entry point's parameters; the operands hold
            // the elements the strides reach and outlive the queued work.
            unsafe { f.launch(stream, (blocks(items), 1, 1), (THREADS, 1, 1), 0, args) }
                .map_err(|e| format!("{WHAT}: {e}"))
        };
        if let (Some(xa), Some(xb)) = (flat_step(0), flat_step(1)) {
            let aligned = [(pa, xa), (pb, xb)]
                .iter()
                .all(|&(p, s)| s == 0 || p.is_multiple_of(16))
                && o.ptr.is_multiple_of(16);
            let (f, items) = if aligned && n >= self.pack {
                (&self.vec, n / self.pack)
            } else {
                (&self.one, n)
            };
            let mut args = KernelArgs::new()
                .ptr(pa)
                .ptr(pb)
                .ptr(o.ptr)
                .i64(n as i64)
                .i32(xa)
                .i32(xb);
            return launch(f, items, &mut args);
        }
        let fits = walk.fits_u32();
        if let Some([ia, ib]) = self.packed_rows(&walk, [pa, pb], o.ptr) {
            let f = if fits { &self.wvec32 } else { &self.wvec64 };
            let packs = n / self.pack;
            let args = KernelArgs::new()
                .ptr(pa)
                .ptr(pb)
                .ptr(o.ptr)
                .i64(packs as i64)
                .i32(ia)
                .i32(ib);
            let mut args = walk.push_args(args, WHAT)?;
            return launch(f, packs, &mut args);
        }
        let f = if fits { &self.walk32 } else { &self.walk64 };
        let args = KernelArgs::new().ptr(pa).ptr(pb).ptr(o.ptr).i64(n as i64);
        let mut args = walk.push_args(args, WHAT)?;
        launch(f, n, &mut args)
    }
}

impl ZipKernel {
    /// Whether the walk's innermost dim holds whole packs for every operand: its extent a
    /// multiple of the pack, each operand's inner stride 0 (repeated) or 1 (packed, with
    /// aligned address and outer strides); the inner strides, as pack flags.
    fn packed_rows(&self, walk: &Walk<2>, ptrs: [u64; 2], out: u64) -> Option<[i32; 2]> {
        let v = self.pack;
        let (&inner, inner_st) = walk.dims.last().zip(walk.strides.last())?;
        if v < 2 || !inner.is_multiple_of(v) || !out.is_multiple_of(16) {
            return None;
        }
        let outer = &walk.strides[..walk.strides.len() - 1];
        let mut flags = [0; 2];
        for j in 0..2 {
            match inner_st[j] {
                0 => {}
                1 if ptrs[j].is_multiple_of(16) && outer.iter().all(|s| s[j] % v as i64 == 0) => {
                    flags[j] = 1
                }
                _ => return None,
            }
        }
        Some(flags)
    }
}
