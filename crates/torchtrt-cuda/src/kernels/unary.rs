//! Unary math (`Unary` layers): each operation is a CUDA C expression per element family,
//! computed in f32 for f32, f16 and bf16 as the CPU kernels do.

use torchtrt_core::layers::{InferInput, LayerKind, UnaryOp};
use torchtrt_plugin_api::DType;

use super::map::{MapSpec, prepare_map};
use super::{DeviceKernel, PrepareCtx};

/// Device functions the expressions use.
const HELPERS: &str = r#"
template <typename C> __device__ __forceinline__ C sign_of(C v) {
    return v > (C)0 ? (C)1 : (v < (C)0 ? (C)-1 : v);
}
template <typename C> __device__ __forceinline__ C wrap_neg(C v) { return (C)(0ull - (u64)v); }
"#;

/// `(op, float expression, integer expression, bool expression)`.
const OPS: &[(UnaryOp, &str, Option<&str>, Option<&str>)] = &[
    (
        UnaryOp::Abs,
        "fabsf(x)",
        Some("x < 0 ? wrap_neg(x) : x"),
        None,
    ),
    (UnaryOp::Neg, "-x", Some("wrap_neg(x)"), None),
    (UnaryOp::Exp, "expf(x)", None, None),
    (UnaryOp::Log, "logf(x)", None, None),
    (UnaryOp::Sqrt, "sqrtf(x)", None, None),
    (UnaryOp::Reciprocal, "1.0f / x", None, None),
    (UnaryOp::Floor, "floorf(x)", None, None),
    (UnaryOp::Ceil, "ceilf(x)", None, None),
    (UnaryOp::Round, "rintf(x)", None, None),
    (UnaryOp::Sign, "sign_of(x)", Some("sign_of(x)"), None),
    (UnaryOp::Sin, "sinf(x)", None, None),
    (UnaryOp::Cos, "cosf(x)", None, None),
    (UnaryOp::Tan, "tanf(x)", None, None),
    (UnaryOp::Asin, "asinf(x)", None, None),
    (UnaryOp::Acos, "acosf(x)", None, None),
    (UnaryOp::Atan, "atanf(x)", None, None),
    (UnaryOp::Sinh, "sinhf(x)", None, None),
    (UnaryOp::Cosh, "coshf(x)", None, None),
    (UnaryOp::Asinh, "asinhf(x)", None, None),
    (UnaryOp::Acosh, "acoshf(x)", None, None),
    (UnaryOp::Atanh, "atanhf(x)", None, None),
    (UnaryOp::Erf, "erff(x)", None, None),
    (UnaryOp::Not, "", None, Some("x == 0")),
];

/// The expression of `op` for `dtype`, if it has a CUDA kernel.
fn expr(op: UnaryOp, dtype: DType) -> Option<&'static str> {
    let (_, float, int, boolean) = OPS.iter().find(|(o, ..)| *o == op)?;
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => Some(*float).filter(|e| !e.is_empty()),
        DType::I32 | DType::I64 => *int,
        DType::Bool => *boolean,
        _ => None,
    }
}

/// Prepares a `Unary` layer; `None` for dtypes without a CUDA kernel.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Unary(l) = layer else {
        return None;
    };
    Some(prepare_map(spec(l.op, inputs.first()?.dtype)?, ctx))
}

/// The map of `op` on `dtype`, if it has a CUDA kernel.
pub(crate) fn spec(op: UnaryOp, dtype: DType) -> Option<MapSpec> {
    Some(MapSpec {
        what: "Unary",
        name: format!("unary_{op:?}").to_lowercase(),
        from: dtype,
        to: dtype,
        expr: expr(op, dtype)?.into(),
        helpers: HELPERS,
        params: [0.0; 2],
    })
}

/// Every unary map with a CUDA kernel, for tests that compile them all.
#[cfg(test)]
pub(crate) fn all_specs() -> Vec<MapSpec> {
    let dtypes = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::Bool,
    ];
    OPS.iter()
        .flat_map(|(op, ..)| dtypes.iter().filter_map(move |&d| spec(*op, d)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_float_op_has_an_expression() {
        for (op, ..) in OPS {
            let float = op.accepts(DType::F32);
            assert_eq!(expr(*op, DType::F16).is_some(), float, "{op:?}");
        }
    }
}
