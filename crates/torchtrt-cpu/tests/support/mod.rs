//! Test plumbing: random tensors, running one layer through the CPU backend, and comparing
//! its output with a reference under per-dtype tolerances.

use std::sync::OnceLock;

use proptest::test_runner::TestCaseError;
use torchtrt_core::plugin_api::{DType, ShapeExpr, const_shape, shape_values};
use torchtrt_core::tensor::shape_i64;
use torchtrt_core::{Backend, InferInput, LayerKind, Tensor};
use torchtrt_cpu::CpuBackend;

use crate::reference::Nd;

/// A small deterministic generator (splitmix64), seeded by proptest.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer in `lo..=hi`.
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    /// A fair coin.
    pub fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }
}

/// A tensor of `dtype` with values uniform in `[lo, hi)` (integers: `lo..=hi`; bool: 0/1),
/// rounded to the dtype.
pub fn random(dtype: DType, shape: &[usize], rng: &mut Rng, lo: f64, hi: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n)
        .map(|_| match dtype {
            DType::Bool => rng.int(0, 1) as f64,
            d if d.is_integer() => rng.int(lo as i64, hi as i64) as f64,
            _ => rng.uniform(lo, hi),
        })
        .collect();
    from_f64(dtype, shape, &values)
}

/// A tensor of `dtype` holding `values` (rounded or truncated to the dtype).
pub fn from_f64(dtype: DType, shape: &[usize], values: &[f64]) -> Tensor {
    let t = match dtype {
        DType::F32 => Tensor::from_vec(shape, values.iter().map(|&v| v as f32).collect()),
        DType::F16 => Tensor::from_vec(
            shape,
            values.iter().map(|&v| half::f16::from_f64(v)).collect(),
        ),
        DType::BF16 => Tensor::from_vec(
            shape,
            values.iter().map(|&v| half::bf16::from_f64(v)).collect(),
        ),
        DType::F64 => Tensor::from_vec(shape, values.to_vec()),
        DType::I64 => Tensor::from_vec(shape, values.iter().map(|&v| v as i64).collect()),
        DType::I32 => Tensor::from_vec(shape, values.iter().map(|&v| v as i32).collect()),
        DType::I16 => Tensor::from_vec(shape, values.iter().map(|&v| v as i16).collect()),
        DType::I8 => Tensor::from_vec(shape, values.iter().map(|&v| v as i8).collect()),
        DType::U8 => Tensor::from_vec(shape, values.iter().map(|&v| v as u8).collect()),
        DType::U16 => Tensor::from_vec(shape, values.iter().map(|&v| v as u16).collect()),
        DType::U32 => Tensor::from_vec(shape, values.iter().map(|&v| v as u32).collect()),
        DType::U64 => Tensor::from_vec(shape, values.iter().map(|&v| v as u64).collect()),
        DType::Bool => Tensor::from_bytes(
            DType::Bool,
            shape,
            &values
                .iter()
                .map(|&v| u8::from(v != 0.0))
                .collect::<Vec<_>>(),
        ),
    };
    t.expect("values match the shape")
}

/// The values of a tensor as an [`Nd`].
pub fn nd(t: &Tensor) -> Nd {
    Nd::new(t.shape().to_vec(), t.to_f64_vec())
}

/// The backend on rayon's global pool.
pub fn global() -> &'static CpuBackend {
    static B: OnceLock<CpuBackend> = OnceLock::new();
    B.get_or_init(CpuBackend::new)
}

/// A backend with a pool of its own (3 threads, so work splits unevenly).
pub fn pooled() -> &'static CpuBackend {
    static B: OnceLock<CpuBackend> = OnceLock::new();
    B.get_or_init(|| CpuBackend::with_threads(3).expect("thread pool"))
}

/// Shapes of `inputs` as constant expressions.
fn const_shapes(inputs: &[&Tensor]) -> Vec<ShapeExpr> {
    inputs
        .iter()
        .map(|t| const_shape(&shape_i64(t.shape())))
        .collect()
}

/// `f` of `inputs` as the builder describes them to a backend: constant shapes and values.
pub fn with_infer<R>(inputs: &[&Tensor], f: impl FnOnce(&[InferInput<'_>]) -> R) -> R {
    let shapes = const_shapes(inputs);
    let infer: Vec<InferInput<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|(t, s)| InferInput {
            dtype: t.dtype(),
            shape: s,
            value: Some(t),
        })
        .collect();
    f(&infer)
}

/// Runs `layer` on `inputs` through `backend`: output shapes from the layer's own shape
/// rule, outputs pre-filled with the sentinel so unwritten elements fail.
pub fn run_on(
    backend: &dyn Backend,
    layer: impl Into<LayerKind>,
    inputs: &[&Tensor],
) -> Result<Vec<Tensor>, String> {
    let layer = layer.into();
    with_infer(inputs, |infer| run_prepared(backend, &layer, inputs, infer))
}

fn run_prepared(
    backend: &dyn Backend,
    layer: &LayerKind,
    inputs: &[&Tensor],
    infer: &[InferInput<'_>],
) -> Result<Vec<Tensor>, String> {
    let types = layer.op().infer(infer)?;
    let kernel = backend.prepare(layer, infer)?;
    let mut outputs: Vec<Tensor> = types
        .iter()
        .map(|ts| {
            let dims = shape_values(&ts.shape).ok_or("the shape rule left a symbolic dim")?;
            let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            Ok::<_, String>(torchtrt_testing::sentinel_tensor(ts.dtype, &dims))
        })
        .collect::<Result<_, _>>()?;
    kernel.execute(inputs, &mut outputs)?;
    Ok(outputs)
}

/// [`run_on`] the global-pool backend, returning the one output.
pub fn run(layer: impl Into<LayerKind>, inputs: &[&Tensor]) -> Result<Tensor, TestCaseError> {
    let mut outs = run_on(global(), layer, inputs).map_err(TestCaseError::fail)?;
    outs.pop().ok_or_else(|| TestCaseError::fail("no output"))
}

pub use torchtrt_testing::Tol;

/// Checks `got` against `want` element by element with the shared comparison: floats
/// within `tol` of each element (NaN only NaN, an infinity only itself), integers and bools
/// exactly; a failure names the worst element.
pub fn check(got: &Tensor, want: &Nd, tol: Tol) -> Result<(), TestCaseError> {
    if got.shape() != want.shape.as_slice() {
        return Err(TestCaseError::fail(format!(
            "shape {:?}, reference {:?}",
            got.shape(),
            want.shape
        )));
    }
    let result = if got.dtype().is_float() {
        torchtrt_testing::check_floats(&got.to_f64_vec(), &want.data, tol)
    } else if got.dtype() == DType::Bool {
        let w: Vec<u8> = want.data.iter().map(|&v| u8::from(v != 0.0)).collect();
        torchtrt_testing::check_exact(got.bytes(), &w)
    } else {
        let g = got
            .to_i64_vec()
            .ok_or_else(|| TestCaseError::fail("integer output"))?;
        let w: Vec<i64> = want.data.iter().map(|&v| v as i64).collect();
        torchtrt_testing::check_exact(&g, &w)
    };
    result.map_err(|m| TestCaseError::fail(format!("{} {}", got.dtype(), m.in_shape(got.shape()))))
}

/// Like [`random`] with magnitudes in `[lo, hi)` and random signs (floats), or values in
/// `lo..=hi` with random signs (signed integers): never zero when `lo > 0`.
pub fn random_signed(dtype: DType, shape: &[usize], rng: &mut Rng, lo: f64, hi: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let signed = !(dtype.is_unsigned() || dtype == DType::Bool);
    let values: Vec<f64> = (0..n)
        .map(|_| {
            let m = if dtype.is_float() {
                rng.uniform(lo, hi)
            } else {
                rng.int(lo as i64, hi as i64) as f64
            };
            if signed && rng.coin() { -m } else { m }
        })
        .collect();
    from_f64(dtype, shape, &values)
}

/// The floating-point dtypes.
pub fn float_dtype() -> impl proptest::strategy::Strategy<Value = DType> {
    proptest::sample::select(vec![DType::F32, DType::F16, DType::BF16, DType::F64])
}

/// The integer dtypes.
pub fn int_dtype() -> impl proptest::strategy::Strategy<Value = DType> {
    proptest::sample::select(vec![
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ])
}

/// Every numeric dtype: the floating-point ones, then the integers.
pub fn numeric_dtype() -> impl proptest::strategy::Strategy<Value = DType> {
    proptest::sample::select(vec![
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U8,
    ])
}

/// A shape of rank `0..=max_rank` with dims in `1..=max_dim`.
pub fn shape(
    max_rank: usize,
    max_dim: usize,
) -> impl proptest::strategy::Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1..=max_dim, 0..=max_rank)
}

/// Two shapes that broadcast together: each drops some leading dims of a common shape and
/// turns some of the rest into 1.
pub fn broadcast_pair(
    max_dim: usize,
) -> impl proptest::strategy::Strategy<Value = (Vec<usize>, Vec<usize>)> {
    use proptest::strategy::Strategy;
    (shape(4, max_dim), proptest::prelude::any::<u64>()).prop_map(|(out, seed)| {
        let mut rng = Rng::new(seed);
        let pick = |rng: &mut Rng| -> Vec<usize> {
            let drop = rng.int(0, out.len() as i64) as usize;
            let drop = if rng.coin() { 0 } else { drop };
            out[drop..]
                .iter()
                .map(|&d| if rng.int(0, 3) == 0 { 1 } else { d })
                .collect()
        };
        (pick(&mut rng), pick(&mut rng))
    })
}
