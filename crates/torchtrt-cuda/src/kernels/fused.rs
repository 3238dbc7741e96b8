//! `Fused` layers (element-wise groups the builder formed): one generated kernel per group.
//! Each step is the CUDA C expression its own layer's kernel uses (`unary.rs`,
//! `activation.rs`, `elementwise.rs`; a float cast is `x`), computed in f32 and rounded to
//! the step's dtype, so results match the unfused layers. Every input is broadcast to the
//! output by strides (merged dims, as `Elementwise` walks them); when the innermost dim
//! holds whole 16-byte packs for every operand, threads move packs.

use std::fmt::Write as _;

use torchtrt_core::layers::{Fused, FusedOperand, InferInput, LayerKind};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::layout::{THREADS, Walk, blocks, broadcast_strides, generated, tag};
use super::map::numel;
use super::operands::dims;
use super::{DeviceKernel, PrepareCtx, ProgramSource, activation, elementwise, unary};
use crate::launch::KernelArgs;
use crate::module::Function;
use crate::stream::Stream;

const WHAT: &str = "Fused";

/// Inputs a fused kernel takes (the builder groups no more).
pub(crate) const MAX_INPUTS: usize = 8;

/// One step as CUDA C: its expression, parameters and helpers.
struct StepCode {
    expr: String,
    params: [f32; 2],
    helpers: &'static str,
}

/// The code of one step on operands of `dtype` producing `out`, if it has a CUDA kernel.
fn step_code(kind: &LayerKind, dtype: DType, out: DType) -> Option<StepCode> {
    let float = |d: DType| matches!(d, DType::F32 | DType::F16 | DType::BF16);
    if !float(dtype) || !float(out) {
        return None;
    }
    let map = |spec: super::map::MapSpec| StepCode {
        expr: spec.expr,
        params: spec.params,
        helpers: spec.helpers,
    };
    match kind {
        LayerKind::Unary(l) => unary::spec(l.op, dtype).map(map),
        LayerKind::Activation(l) => activation::map_spec(l.kind, dtype).map(map),
        LayerKind::Cast(_) => Some(StepCode {
            expr: "x".into(),
            params: [0.0; 2],
            helpers: "",
        }),
        LayerKind::Elementwise(l) => Some(StepCode {
            expr: elementwise::float_expr(l.op, l.fmod)?.into(),
            params: [0.0; 2],
            helpers: elementwise::HELPERS,
        }),
        _ => None,
    }
}

/// `v` as a bit-exact CUDA C float.
fn float_literal(v: f32) -> String {
    format!("__uint_as_float({:#010x}u)", v.to_bits())
}

/// The rounding of an f32 value to `dtype` and back.
fn round_to(dtype: DType, v: &str) -> String {
    match dtype {
        DType::F16 => format!("h2f(f2h({v}))"),
        DType::BF16 => format!("b2f(f2b({v}))"),
        _ => v.to_string(),
    }
}

/// The CUDA C body of a fused group: input and output types, `fused_fn`, entry points.
fn source(fused: &Fused, inputs: &[DType], out: DType, steps: &[(DType, StepCode)]) -> String {
    let n = inputs.len();
    let mut src = String::new();
    for (i, d) in inputs.iter().enumerate() {
        let _ = writeln!(src, "typedef Ty<{}> T{i};", tag(*d));
    }
    let _ = writeln!(src, "typedef Ty<{}> TO;\n#define N_IN {n}", tag(out));
    let mut helpers: Vec<&str> = Vec::new();
    for (_, code) in steps {
        if !helpers.contains(&code.helpers) {
            helpers.push(code.helpers);
        }
    }
    src.extend(helpers);
    let args: Vec<String> = (0..n).map(|i| format!("float a{i}")).collect();
    let _ = writeln!(
        src,
        "__device__ __forceinline__ float fused_fn({}) {{",
        args.join(", ")
    );
    for (k, (step, (dtype, code))) in fused.steps.iter().zip(steps).enumerate() {
        let operand = |o: &FusedOperand| match o {
            FusedOperand::Input(i) => format!("a{i}"),
            FusedOperand::Step(s) => format!("s{s}"),
        };
        let x = step.operands.first().map_or("0.0f".into(), operand);
        let y = step.operands.get(1).map_or("0.0f".into(), operand);
        let _ = writeln!(
            src,
            "    float s{k};\n    {{ float x = {x}; float y = {y}; const float p0 = {}, p1 = {};\n      \
             (void)y; (void)p0; (void)p1; s{k} = (float)({}); }}\n    s{k} = {};",
            float_literal(code.params[0]),
            float_literal(code.params[1]),
            code.expr,
            round_to(*dtype, &format!("s{k}")),
        );
    }
    let _ = writeln!(src, "    return s{};\n}}", fused.steps.len() - 1);
    let loads: Vec<String> = (0..n)
        .map(|i| format!("T{i}::ld(in{i}[off[{i}]])"))
        .collect();
    let strides: Vec<String> = (0..n).map(|i| format!("STRIDES_INIT(x{i})")).collect();
    let pack_loads: String = (0..n)
        .map(|i| {
            format!(
                "        Pack<T{i}::S, VEC> p{i}; T{i}::S e{i} = in{i}[off[{i}]];\n        \
                 if (flags & {bit}) p{i} = ld_pack<T{i}::S, VEC>(in{i} + off[{i}]);\n",
                bit = 1 << i
            )
        })
        .collect();
    let pack_args: Vec<String> = (0..n)
        .map(|i| format!("T{i}::ld((flags & {}) ? p{i}.e[k] : e{i})", 1 << i))
        .collect();
    let params: Vec<String> = (0..MAX_INPUTS)
        .map(|i| {
            if i < n {
                format!("const T{i}::S* in{i}")
            } else {
                format!("const void* in{i}")
            }
        })
        .collect();
    let stride_params: Vec<String> = (0..MAX_INPUTS)
        .map(|i| format!("STRIDE_PARAMS(x{i})"))
        .collect();
    let _ = write!(
        src,
        r#"
#define FUSED_PARAMS {params}, TO::S* o, u64 n, int flags, int rank, DIMS_PARAMS, {stride_params}
#define FUSED_INIT DIMS_INIT(dv); const i64 st[N_IN][MAX_RANK] = {{{strides}}}
template <typename I>
__device__ __forceinline__ void fused_walk(FUSED_PARAMS) {{
    FUSED_INIT;
    GRID_STRIDE(I, i, n) {{
        typename Index<I>::SI off[N_IN];
        walk<I, N_IN>(i, rank, dv, st, off);
        o[i] = TO::st(fused_fn({loads}));
    }}
}}
/* n counts packs of VEC elements along an innermost dim that holds whole packs; operand j
   reads a pack when bit j of flags is set (inner stride 1), else one element to repeat. */
template <typename I>
__device__ __forceinline__ void fused_wvec(FUSED_PARAMS) {{
    FUSED_INIT;
    GRID_STRIDE(I, p, n) {{
        I i = p * VEC;
        typename Index<I>::SI off[N_IN];
        walk<I, N_IN>(i, rank, dv, st, off);
{pack_loads}        Pack<TO::S, VEC> r;
#pragma unroll
        for (int k = 0; k < VEC; ++k) r.e[k] = TO::st(fused_fn({pack_args}));
        st_pack<TO::S, VEC>(o + i, r);
    }}
}}
extern "C" __global__ void fused_walk32(FUSED_PARAMS) {{ fused_walk<u32>(FUSED_ARGS); }}
extern "C" __global__ void fused_walk64(FUSED_PARAMS) {{ fused_walk<u64>(FUSED_ARGS); }}
extern "C" __global__ void fused_wvec32(FUSED_PARAMS) {{ fused_wvec<u32>(FUSED_ARGS); }}
extern "C" __global__ void fused_wvec64(FUSED_PARAMS) {{ fused_wvec<u64>(FUSED_ARGS); }}
"#,
        params = params.join(", "),
        stride_params = stride_params.join(", "),
        strides = strides.join(", "),
        loads = loads.join(", "),
        pack_args = pack_args.join(", "),
    );
    src
}

/// Elements per 16-byte pack for a group reading `inputs` and writing `out`.
fn pack_len(inputs: &[DType], out: DType) -> usize {
    16 / inputs
        .iter()
        .chain([&out])
        .map(|d| d.size())
        .max()
        .unwrap_or(4)
}

/// A 64-bit FNV-1a hash, stable across processes (program names must be).
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The program of a fused group on these inputs and its output dtype; `None` when a step
/// has no CUDA expression.
pub(crate) fn program(
    fused: &Fused,
    inputs: &[InferInput<'_>],
) -> Option<Result<(ProgramSource, DType), String>> {
    let types = match fused.step_types(inputs) {
        Ok(t) => t,
        Err(e) => return Some(Err(e)),
    };
    if inputs.len() > MAX_INPUTS {
        return None;
    }
    let mut steps = Vec::with_capacity(fused.steps.len());
    for (step, ty) in fused.steps.iter().zip(&types) {
        let first = match step.operands.first()? {
            FusedOperand::Input(i) => inputs.get(*i as usize)?.dtype,
            FusedOperand::Step(k) => types.get(*k as usize)?.dtype,
        };
        steps.push((ty.dtype, step_code(&step.kind, first, ty.dtype)?));
    }
    let dtypes: Vec<DType> = inputs.iter().map(|i| i.dtype).collect();
    let out = types.last()?.dtype;
    if !dtypes
        .iter()
        .all(|d| matches!(d, DType::F32 | DType::F16 | DType::BF16))
    {
        return None;
    }
    let vec = pack_len(&dtypes, out);
    let body = format!(
        "#define VEC {vec}\n#define FUSED_ARGS {}, o, n, flags, rank, {}, {}\n{}",
        (0..MAX_INPUTS)
            .map(|i| format!("in{i}"))
            .collect::<Vec<_>>()
            .join(", "),
        (0..6)
            .map(|k| format!("d{k}, m{k}, s{k}"))
            .collect::<Vec<_>>()
            .join(", "),
        (0..MAX_INPUTS)
            .map(|i| (0..6)
                .map(|k| format!("x{i}{k}"))
                .collect::<Vec<_>>()
                .join(", "))
            .collect::<Vec<_>>()
            .join(", "),
        source(fused, &dtypes, out, &steps)
    );
    let name = format!("core_fused_{:016x}", fnv(&body));
    Some(generated(name, || body).map(|p| (p, out)))
}

/// Prepares a `Fused` layer; `None` when a step or dtype has no CUDA code (the backend then
/// runs the steps on the host).
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Fused(fused) = layer else {
        return None;
    };
    let (program, out) = match program(fused, inputs)? {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let load = |entry: &str| {
        ctx.programs
            .function(&program, entry)
            .map_err(|e| format!("{WHAT}: {e}"))
    };
    let dtypes: Vec<DType> = inputs.iter().map(|i| i.dtype).collect();
    Some((|| {
        Ok(Box::new(FusedKernel {
            pack: pack_len(&dtypes, out),
            dtypes,
            out,
            walk32: load("fused_walk32")?,
            walk64: load("fused_walk64")?,
            wvec32: load("fused_wvec32")?,
            wvec64: load("fused_wvec64")?,
        }) as Box<dyn DeviceKernel>)
    })())
}

struct FusedKernel {
    dtypes: Vec<DType>,
    out: DType,
    pack: usize,
    walk32: Function,
    walk64: Function,
    wvec32: Function,
    wvec64: Function,
}

impl DeviceKernel for FusedKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        let [o] = outputs else {
            return Err(format!("{WHAT}: 1 output expected, got {}", outputs.len()));
        };
        let got: Vec<DType> = inputs.iter().map(|t| t.desc.dtype).collect();
        if got != self.dtypes || o.desc.dtype != self.out {
            return Err(format!(
                "{WHAT}: prepared for {:?} → {}, got {got:?} → {}",
                self.dtypes, self.out, o.desc.dtype
            ));
        }
        let shape = dims(&o.desc)?;
        let n = numel(&o.desc.shape);
        if n == 0 {
            return Ok(());
        }
        let mut per_input = Vec::with_capacity(inputs.len());
        for t in inputs {
            per_input.push(
                broadcast_strides(&dims(&t.desc)?, &shape).map_err(|e| format!("{WHAT}: {e}"))?,
            );
        }
        let strides: Vec<[i64; MAX_INPUTS]> = (0..shape.len())
            .map(|d| {
                let mut s = [0i64; MAX_INPUTS];
                for (j, st) in per_input.iter().enumerate() {
                    s[j] = st[d];
                }
                s
            })
            .collect();
        let walk = Walk::new(shape, strides).merged();
        let mut ptrs = [0u64; MAX_INPUTS];
        for (p, t) in ptrs.iter_mut().zip(inputs) {
            *p = t.ptr;
        }
        let fits = walk.fits_u32();
        let (f, items, flags) = match self.packed_rows(&walk, &ptrs, inputs.len(), o.ptr) {
            Some(flags) => (
                if fits { &self.wvec32 } else { &self.wvec64 },
                n / self.pack,
                flags,
            ),
            None => (if fits { &self.walk32 } else { &self.walk64 }, n, 0),
        };
        let mut args = KernelArgs::new();
        for p in ptrs {
            args = args.ptr(p);
        }
        let args = args.ptr(o.ptr).i64(items as i64).i32(flags);
        let mut args = walk.push_args(args, WHAT)?;
        // SAFETY: the arguments match the entry point's parameters (unused inputs are null
        // with zero strides, never read); every operand holds the elements its broadcast
        // strides reach, and all outlive the queued work per the caller's contract.
        unsafe { f.launch(stream, (blocks(items), 1, 1), (THREADS, 1, 1), 0, &mut args) }
            .map_err(|e| format!("{WHAT}: {e}"))
    }
}

impl FusedKernel {
    /// Pack flags when the walk's innermost dim holds whole packs for every operand: its
    /// extent a multiple of the pack, each input's inner stride 0 (repeated) or 1 (packed,
    /// with an aligned address and outer strides).
    fn packed_rows(
        &self,
        walk: &Walk<MAX_INPUTS>,
        ptrs: &[u64; MAX_INPUTS],
        count: usize,
        out: u64,
    ) -> Option<i32> {
        let v = self.pack;
        let (&inner, inner_st) = walk.dims.last().zip(walk.strides.last())?;
        if v < 2 || !inner.is_multiple_of(v) || !out.is_multiple_of(16) {
            return None;
        }
        let outer = &walk.strides[..walk.strides.len() - 1];
        let mut flags = 0;
        for j in 0..count {
            match inner_st[j] {
                0 => {}
                1 if ptrs[j].is_multiple_of(16) && outer.iter().all(|s| s[j] % v as i64 == 0) => {
                    flags |= 1 << j
                }
                _ => return None,
            }
        }
        Some(flags)
    }
}

#[cfg(test)]
mod tests {
    use torchtrt_core::layers::{
        Activation, ActivationKind, Cast, Elementwise, ElementwiseOp, FusedStep, Unary, UnaryOp,
    };
    use torchtrt_plugin_api::{DimExpr, const_shape};

    use super::*;

    fn step(kind: impl Into<LayerKind>, operands: &[FusedOperand]) -> FusedStep {
        FusedStep {
            kind: kind.into(),
            operands: operands.to_vec(),
        }
    }

    /// `gelu(x + b)` exported as `(x+b)·0.5·(1 + erf((x+b)/√2))`, plus a residual, a
    /// sigmoid and a cast to `to`.
    pub(crate) fn gelu_chain(to: DType) -> Fused {
        use FusedOperand::{Input, Step};
        let bin = |op| Elementwise::new(op);
        Fused {
            inputs: 4,
            steps: vec![
                step(bin(ElementwiseOp::Add), &[Input(0), Input(1)]),
                step(bin(ElementwiseOp::Div), &[Step(0), Input(2)]),
                step(Unary { op: UnaryOp::Erf }, &[Step(1)]),
                step(bin(ElementwiseOp::Mul), &[Step(0), Step(2)]),
                step(bin(ElementwiseOp::Add), &[Step(3), Input(3)]),
                step(
                    Activation {
                        kind: ActivationKind::LeakyRelu { alpha: 0.1 },
                    },
                    &[Step(4)],
                ),
                step(Cast { to }, &[Step(5)]),
            ],
        }
    }

    #[test]
    fn fused_programs_compile() {
        if !crate::kernels::prelude::nvrtc_or_skip("fused programs") {
            return;
        }
        let shapes: Vec<Vec<DimExpr>> = [vec![3, 5, 64], vec![64], vec![], vec![3, 1, 64]]
            .iter()
            .map(|s| const_shape(s))
            .collect();
        for (dtype, to) in [
            (DType::F32, DType::F32),
            (DType::F16, DType::F32),
            (DType::BF16, DType::BF16),
        ] {
            let inputs: Vec<InferInput<'_>> = shapes
                .iter()
                .map(|s| InferInput {
                    dtype,
                    shape: s,
                    value: None,
                })
                .collect();
            let (p, out) = program(&gelu_chain(to), &inputs)
                .expect("has CUDA code")
                .expect("valid");
            assert_eq!(out, to);
            for &arch in crate::kernels::prelude::archs_of(p.source) {
                crate::compile(p.name, p.source, crate::Arch::new(arch), &[])
                    .unwrap_or_else(|e| panic!("sm_{}{}: {e}\n{}", arch.0, arch.1, p.source));
            }
        }
    }

    #[test]
    fn comparisons_are_refused() {
        let fused = Fused {
            inputs: 2,
            steps: vec![step(
                Elementwise::new(ElementwiseOp::Less),
                &[FusedOperand::Input(0), FusedOperand::Input(1)],
            )],
        };
        let shape = const_shape(&[4]);
        let x = InferInput {
            dtype: DType::F32,
            shape: &shape,
            value: None,
        };
        assert!(!matches!(program(&fused, &[x, x]), Some(Ok(_))));
    }
}
