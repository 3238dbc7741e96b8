//! Activations (`Activation` layers): each kind is a CUDA C expression of `x` and its
//! parameters `p0`, `p1`, computed in f32 for f32, f16 and bf16 (ONNX definitions, the
//! CPU kernels' formulas, NaN handled alike).

use torchtrt_core::layers::{ActivationKind, InferInput, LayerKind};
use torchtrt_plugin_api::DType;

use super::map::{MapSpec, prepare_map};
use super::{DeviceKernel, PrepareCtx};

/// Device functions the expressions use.
const HELPERS: &str = r#"
__device__ __forceinline__ float mx(float a, float b) { return a > b ? a : b; }
__device__ __forceinline__ float mn(float a, float b) { return a < b ? a : b; }
__device__ __forceinline__ float sigmoid_of(float v) {
    if (v >= 0.0f) return 1.0f / (1.0f + expf(-v));
    float e = expf(v);
    return e / (1.0f + e);
}
__device__ __forceinline__ float softplus_of(float v) {
    return mx(v, 0.0f) + log1pf(expf(-fabsf(v)));
}
/* min(max(x, lo), hi) in the CPU kernel's order (NaN passes through). */
__device__ __forceinline__ float mn_clip(float v, float lo, float hi) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}
"#;

/// The expression, its parameters and a name for the program.
fn spec(kind: ActivationKind) -> (&'static str, &'static str, [f32; 2]) {
    use ActivationKind as A;
    match kind {
        A::Relu => ("relu", "x < 0.0f ? 0.0f : x", [0.0; 2]),
        A::LeakyRelu { alpha } => ("leaky_relu", "x < 0.0f ? p0 * x : x", [alpha, 0.0]),
        A::Sigmoid => ("sigmoid", "sigmoid_of(x)", [0.0; 2]),
        A::Tanh => ("tanh", "tanhf(x)", [0.0; 2]),
        A::Elu { alpha } => ("elu", "x < 0.0f ? p0 * expm1f(x) : x", [alpha, 0.0]),
        A::Selu { alpha, gamma } => (
            "selu",
            "p1 * (x <= 0.0f ? p0 * expm1f(x) : x)",
            [alpha, gamma],
        ),
        A::Celu { alpha } => (
            "celu",
            "mx(0.0f, x) + mn(0.0f, p0 * expm1f(x / p0))",
            [alpha, 0.0],
        ),
        A::Softplus => ("softplus", "softplus_of(x)", [0.0; 2]),
        A::Softsign => ("softsign", "x / (1.0f + fabsf(x))", [0.0; 2]),
        A::HardSigmoid { alpha, beta } => (
            "hard_sigmoid",
            "mx(0.0f, mn(1.0f, p0 * x + p1))",
            [alpha, beta],
        ),
        A::HardSwish => (
            "hard_swish",
            "x * mx(0.0f, mn(1.0f, x * (1.0f / 6.0f) + 0.5f))",
            [0.0; 2],
        ),
        A::Clip { min, max } => ("clip", "mn_clip(x, p0, p1)", [min, max]),
        A::Gelu { tanh: false } => (
            "gelu",
            "0.5f * x * erfcf(-x * 0.70710678118654752f)",
            [0.0; 2],
        ),
        A::Gelu { tanh: true } => (
            "gelu_tanh",
            "0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)))",
            [0.0; 2],
        ),
        A::Mish => ("mish", "x * tanhf(softplus_of(x))", [0.0; 2]),
        A::Silu => ("silu", "x * sigmoid_of(x)", [0.0; 2]),
        A::ThresholdedRelu { alpha } => ("thresholded_relu", "x > p0 ? x : 0.0f", [alpha, 0.0]),
    }
}

/// Prepares an `Activation` layer for f32, f16 or bf16 (and integer `Relu`); `None`
/// otherwise.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Activation(l) = layer else {
        return None;
    };
    Some(prepare_map(map_spec(l.kind, inputs.first()?.dtype)?, ctx))
}

/// The map of `kind` on `dtype`: f32, f16 and bf16, and `Relu` on i32 and i64.
pub(crate) fn map_spec(kind: ActivationKind, dtype: DType) -> Option<MapSpec> {
    let (name, expr, params) = match dtype {
        DType::F32 | DType::F16 | DType::BF16 => spec(kind),
        DType::I32 | DType::I64 if kind == ActivationKind::Relu => {
            ("relu", "x < 0 ? (TI::C)0 : x", [0.0; 2])
        }
        _ => return None,
    };
    Some(MapSpec {
        what: "Activation",
        name: format!("act_{name}"),
        from: dtype,
        to: dtype,
        expr: expr.into(),
        helpers: HELPERS,
        params,
    })
}

/// One map per activation and dtype, for tests that compile them all.
#[cfg(test)]
pub(crate) fn all_specs() -> Vec<MapSpec> {
    use ActivationKind as A;
    let kinds = [
        A::Relu,
        A::LeakyRelu { alpha: 0.1 },
        A::Sigmoid,
        A::Tanh,
        A::Elu { alpha: 1.0 },
        A::Selu {
            alpha: 1.0,
            gamma: 1.0,
        },
        A::Celu { alpha: 1.0 },
        A::Softplus,
        A::Softsign,
        A::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        A::HardSwish,
        A::Clip { min: 0.0, max: 1.0 },
        A::Gelu { tanh: false },
        A::Gelu { tanh: true },
        A::Mish,
        A::ThresholdedRelu { alpha: 1.0 },
        A::Silu,
    ];
    let dtypes = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64];
    kinds
        .iter()
        .flat_map(|&k| dtypes.iter().filter_map(move |&d| map_spec(k, d)))
        .collect()
}
