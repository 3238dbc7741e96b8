//! `ValueTest` layers (IsNaN, IsInf): an element-wise map from a float dtype to bool.

use torchtrt_core::layers::{InferInput, LayerKind, ValueTestKind};
use torchtrt_plugin_api::DType;

use super::map::{MapSpec, prepare_map};
use super::{DeviceKernel, PrepareCtx};

/// The map computing `test` on `dtype` (f32, f16, bf16).
pub(crate) fn spec(test: ValueTestKind, dtype: DType) -> Option<MapSpec> {
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        return None;
    }
    let (name, expr, params) = match test {
        ValueTestKind::Nan => ("is_nan", "x != x", [0.0, 0.0]),
        ValueTestKind::Inf { positive, negative } => (
            "is_inf",
            "(p0 != 0.0f && x == __int_as_float(0x7f800000)) || \
             (p1 != 0.0f && x == -__int_as_float(0x7f800000))",
            [f32::from(u8::from(positive)), f32::from(u8::from(negative))],
        ),
    };
    Some(MapSpec {
        what: "ValueTest",
        name: name.into(),
        from: dtype,
        to: DType::Bool,
        expr: expr.into(),
        helpers: "",
        params,
    })
}

/// Every map program, for the test that compiles them all.
#[cfg(test)]
pub(crate) fn all_specs() -> Vec<MapSpec> {
    let tests = [
        ValueTestKind::Nan,
        ValueTestKind::Inf {
            positive: true,
            negative: true,
        },
    ];
    tests
        .into_iter()
        .flat_map(|t| [DType::F32, DType::F16, DType::BF16].map(|d| spec(t, d)))
        .flatten()
        .collect()
}

/// Prepares a `ValueTest` layer.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::ValueTest(l) = layer else {
        return None;
    };
    let spec = spec(l.test, inputs.first()?.dtype)?;
    Some(prepare_map(spec, ctx))
}
