//! Dtype conversion (`Cast` layers) between any two dtypes, as the CPU kernel does it:
//! floats to integers truncate toward zero and saturate (NaN becomes 0), integers narrow by
//! wrapping, anything to bool is `x != 0`, f16/bf16 round to nearest even.

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::DType;

use super::map::{MapSpec, prepare_map};
use super::{DeviceKernel, PrepareCtx};

/// Conversion functions by target family.
const HELPERS: &str = r#"
template <typename T> __device__ __forceinline__ T sat_int(double v, double lo, double hi) {
    if (v != v) return (T)0;
    if (v <= lo) return (T)lo;
    if (v >= hi) return (T)(hi == 9223372036854775807.0 ? 9223372036854775807ll : (i64)hi);
    return (T)v;
}
"#;

/// Integer range of `dtype` as f64 (`i64`'s upper bound is 2⁶³, which saturates).
fn int_range(dtype: DType) -> Option<(f64, f64)> {
    Some(match dtype {
        DType::I64 => (-9.223_372_036_854_776e18, 9.223_372_036_854_776e18),
        DType::I32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
        DType::I16 => (f64::from(i16::MIN), f64::from(i16::MAX)),
        DType::I8 => (f64::from(i8::MIN), f64::from(i8::MAX)),
        DType::U8 => (0.0, 255.0),
        _ => return None,
    })
}

/// The conversion expression of `x` from `from` to `to`.
fn expr(from: DType, to: DType) -> String {
    if to == DType::Bool {
        return "x != 0 ? 1 : 0".into();
    }
    match int_range(to) {
        Some((lo, hi)) if from.is_float() => {
            format!("sat_int<TO::C>((double)x, {lo:?}, {hi:?})")
        }
        Some(_) => "(TO::C)(u64)(i64)x".into(),
        None => "x".into(),
    }
}

/// Prepares a `Cast` layer.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Cast(l) = layer else {
        return None;
    };
    Some(prepare_map(spec(inputs.first()?.dtype, l.to), ctx))
}

/// The map converting `from` to `to`.
pub(crate) fn spec(from: DType, to: DType) -> MapSpec {
    MapSpec {
        what: "Cast",
        name: "cast".into(),
        from,
        to,
        expr: expr(from, to),
        helpers: HELPERS,
        params: [0.0; 2],
    }
}
