//! One-input element-wise kernels (unary math, activations, casts): a program per
//! operation and dtype pair, generated from a CUDA C expression of `x` (the input in its
//! compute type) and the parameters `p0`, `p1`. Contiguous tensors move in 16-byte packs
//! when both addresses allow it, else element by element.

use torchtrt_plugin_api::{DType, DeviceTensor};

use super::layout::{THREADS, blocks, generated, suffix, tag};
use super::operands::expect_arity;
use super::{DeviceKernel, PrepareCtx, ProgramSource};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

/// Elements per 16-byte pack for an element-wise op from `a` to `b`.
pub(crate) fn pack_len(a: DType, b: DType) -> usize {
    16 / a.size().max(b.size())
}

const BODY: &str = r#"
template <int V>
__device__ __forceinline__ void map_flat(const TI::S* x, TO::S* o, u64 n, float p0, float p1) {
    u64 packs = n / V;
    GRID_STRIDE(u64, p, packs) {
        Pack<TI::S, V> a = ld_pack<TI::S, V>(x + p * V);
        Pack<TO::S, V> r;
#pragma unroll
        for (int k = 0; k < V; ++k) r.e[k] = TO::st(op_fn(TI::ld(a.e[k]), p0, p1));
        st_pack<TO::S, V>(o + p * V, r);
    }
    GRID_STRIDE(u64, i, n - packs * V) {
        u64 j = packs * V + i;
        o[j] = TO::st(op_fn(TI::ld(x[j]), p0, p1));
    }
}
extern "C" __global__ void map_vec(const TI::S* x, TO::S* o, u64 n, float p0, float p1) {
    map_flat<VEC>(x, o, n, p0, p1);
}
extern "C" __global__ void map_one(const TI::S* x, TO::S* o, u64 n, float p0, float p1) {
    map_flat<1>(x, o, n, p0, p1);
}
"#;

/// An element-wise map from `from` to `to` computing `expr` (CUDA C over `x: TI::C`, `p0`,
/// `p1`, returning something convertible to `TO::C`); `helpers` is CUDA C placed before it.
pub(crate) struct MapSpec {
    /// Layer kind, for errors.
    pub what: &'static str,
    /// Program name stem, unique per expression (`unary_exp`).
    pub name: String,
    /// Input dtype.
    pub from: DType,
    /// Output dtype.
    pub to: DType,
    /// The expression.
    pub expr: String,
    /// Device functions the expression calls.
    pub helpers: &'static str,
    /// Values of `p0` and `p1`.
    pub params: [f32; 2],
}

/// The program of `spec`, generated once per process.
pub(crate) fn program(spec: &MapSpec) -> Result<ProgramSource, String> {
    let name = format!(
        "core_{}_{}_{}",
        spec.name,
        suffix(spec.from),
        suffix(spec.to)
    );
    let vec = pack_len(spec.from, spec.to);
    generated(name, || {
        format!(
            "typedef Ty<{ti}> TI;\ntypedef Ty<{to}> TO;\n#define VEC {vec}\n{helpers}\n\
             __device__ __forceinline__ TO::C op_fn(TI::C x, float p0, float p1) {{\n\
             (void)p0; (void)p1;\n    return (TO::C)({expr});\n}}\n{BODY}",
            ti = tag(spec.from),
            to = tag(spec.to),
            helpers = spec.helpers,
            expr = spec.expr,
        )
    })
}

/// Compiles (once) and loads the program of `spec`.
pub(crate) fn prepare_map(
    spec: MapSpec,
    ctx: &PrepareCtx<'_>,
) -> Result<Box<dyn DeviceKernel>, String> {
    let program = program(&spec)?;
    let vec = pack_len(spec.from, spec.to);
    let load = |entry: &str| {
        ctx.programs
            .function(&program, entry)
            .map_err(|e| format!("{}: {e}", spec.what))
    };
    Ok(Box::new(MapKernel {
        what: spec.what,
        from: spec.from,
        to: spec.to,
        params: spec.params,
        vec: load("map_vec")?,
        one: load("map_one")?,
        pack: vec,
    }))
}

struct MapKernel {
    what: &'static str,
    from: DType,
    to: DType,
    params: [f32; 2],
    vec: Function,
    one: Function,
    pack: usize,
}

impl DeviceKernel for MapKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(self.what, inputs, outputs, 1, 1)?;
        let (x, o) = (&inputs[0], &outputs[0]);
        if x.desc.dtype != self.from || o.desc.dtype != self.to || x.desc.shape != o.desc.shape {
            return Err(format!(
                "{}: prepared for {} → {}, got {}{:?} → {}{:?}",
                self.what,
                self.from,
                self.to,
                x.desc.dtype,
                x.desc.shape,
                o.desc.dtype,
                o.desc.shape
            ));
        }
        let n = numel(&x.desc.shape);
        if n == 0 {
            return Ok(());
        }
        let aligned = x.ptr.is_multiple_of(16) && o.ptr.is_multiple_of(16);
        let (f, items) = if aligned && n >= self.pack {
            (&self.vec, n / self.pack)
        } else {
            (&self.one, n)
        };
        let mut args = KernelArgs::new()
            .ptr(x.ptr)
            .ptr(o.ptr)
            .i64(n as i64)
            .f32(self.params[0])
            .f32(self.params[1]);
        // SAFETY: the arguments match `map_vec`/`map_one`; both tensors hold `n` elements
        // of the prepared dtypes and outlive the queued work per the caller's contract.
        unsafe { f.launch(stream, (blocks(items), 1, 1), (THREADS, 1, 1), 0, &mut args) }
            .map_err(|e| format!("{}: {e}", self.what))
    }
}

/// Elements of a concrete shape (negative dims count as empty).
pub(crate) fn numel(shape: &[i64]) -> usize {
    shape.iter().map(|&d| d.max(0) as usize).product()
}
