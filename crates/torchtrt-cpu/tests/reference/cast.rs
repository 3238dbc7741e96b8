//! `Cast` of one value, by the ONNX rules.

use torchtrt_core::plugin_api::DType;

/// `v` (a value of dtype `from`) converted to `to` and back to f64: floats round to the
/// target precision, floats to integers truncate and saturate (NaN is 0), integers wrap,
/// anything to bool is `v != 0`.
pub fn cast(v: f64, from: DType, to: DType) -> f64 {
    let int = |min: f64, max: f64, bits: u32| {
        if v.is_nan() {
            0.0
        } else if from.is_float() {
            v.trunc().clamp(min, max)
        } else {
            let m = 1i128 << bits;
            let w = (v as i128).rem_euclid(m);
            let w = if min < 0.0 && w >= m / 2 { w - m } else { w };
            w as f64
        }
    };
    match to {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        DType::F64 => v,
        DType::I64 => int(i64::MIN as f64, i64::MAX as f64, 64),
        DType::I32 => int(i32::MIN as f64, i32::MAX as f64, 32),
        DType::I16 => int(i16::MIN as f64, i16::MAX as f64, 16),
        DType::I8 => int(i8::MIN as f64, i8::MAX as f64, 8),
        DType::U8 => int(0.0, 255.0, 8),
        DType::U16 => int(0.0, 65535.0, 16),
        DType::U32 => int(0.0, u32::MAX as f64, 32),
        DType::U64 => int(0.0, u64::MAX as f64, 64),
        DType::Bool => f64::from(u8::from(v != 0.0)),
    }
}
