//! `Quantize` to 8 bits and `Dequantize` from 8 or 32 bits with one constant scale and zero
//! point, as element-wise maps (`map`); per-axis scales, 16-bit types and scales computed at
//! run time are declined and run on the host.

use torchtrt_core::layers::{InferInput, LayerKind, scalar_quantization};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::map::{MapSpec, prepare_map};
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

/// `quantize_byte(v, s, z, i8)`: saturate(round_half_even(v / s) + z) into a signed (`i8`) or
/// unsigned byte, NaN giving z, as the CPU's `quantize_value`.
pub(super) const QUANTIZE_BYTE: &str = r#"
__device__ __forceinline__ unsigned char quantize_byte(float v, float s, int z, bool i8) {
    float q = rintf(v / s);
    if (q != q) q = 0.0f;
    q = fminf(fmaxf(q + (float)z, i8 ? -128.0f : 0.0f), i8 ? 127.0f : 255.0f);
    return (unsigned char)(int)q;
}
"#;

/// Prepares a `Quantize` (float to `I8`/`U8`) or `Dequantize` (`I8`/`U8`/`I32` to float).
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let (scale, zero_point) =
        scalar_quantization(inputs).filter(|&(_, z)| z.unsigned_abs() < 1 << 24)?;
    let from = inputs.first()?.dtype;
    let to = match layer {
        LayerKind::Quantize(q) => q.to,
        LayerKind::Dequantize(_) => inputs[1].dtype,
        _ => return None,
    };
    let mut spec = spec(from, to)?;
    spec.params = [scale, zero_point as f32];
    Some(prepare_map(spec, ctx).map(|map| Box::new(ValuesOnly(map)) as Box<dyn DeviceKernel>))
}

/// The map of a layer whose scale and zero point (its other inputs) were read at prepare
/// time: it runs over the first input alone.
struct ValuesOnly(Box<dyn DeviceKernel>);

impl DeviceKernel for ValuesOnly {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        self.0
            .execute(&inputs[..inputs.len().min(1)], outputs, stream)
    }
}

/// The map quantizing float `from` to `to` (`I8`/`U8`), or dequantizing `from` (`I8`, `U8`,
/// `I32`) to float `to`; `p0` is the scale, `p1` the zero point.
fn spec(from: DType, to: DType) -> Option<MapSpec> {
    let bytes = matches!(to, DType::I8 | DType::U8);
    if from.is_float() && bytes {
        return Some(MapSpec {
            what: "Quantize",
            name: "quantize".into(),
            from,
            to,
            expr: format!(
                "(TO::C)quantize_byte((float)x, p0, (int)p1, {})",
                to == DType::I8
            ),
            helpers: QUANTIZE_BYTE,
            params: [1.0, 0.0],
        });
    }
    (matches!(from, DType::I8 | DType::U8 | DType::I32) && to.is_float()).then(|| MapSpec {
        what: "Dequantize",
        name: "dequantize".into(),
        from,
        to,
        expr: "((float)x - p1) * p0".into(),
        helpers: "",
        params: [1.0, 0.0],
    })
}

/// Every map the layers may need (for compile tests).
#[cfg(test)]
pub(super) fn all_specs() -> Vec<MapSpec> {
    let floats = [DType::F32, DType::F16, DType::BF16];
    let ints = [DType::I8, DType::U8, DType::I32];
    floats
        .iter()
        .flat_map(|&f| ints.iter().flat_map(move |&i| [spec(f, i), spec(i, f)]))
        .flatten()
        .collect()
}
