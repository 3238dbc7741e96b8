//! torch `ScalarType` codes ↔ engine dtypes.

use torchtrt_core::plugin_api::DType;

/// The engine dtype of a torch `ScalarType` code.
pub fn dtype_from_torch(code: i64) -> Result<DType, String> {
    Ok(match code {
        1 => DType::U8,
        2 => DType::I8,
        3 => DType::I16,
        4 => DType::I32,
        5 => DType::I64,
        6 => DType::F16,
        7 => DType::F32,
        8 => DType::F64,
        12 => DType::Bool,
        13 => DType::BF16,
        28 => DType::U16,
        other => return Err(format!("torch dtype {} is not supported", name(other))),
    })
}

/// The torch `ScalarType` code of an engine dtype; `None` for u32 and u64, which the
/// export schema has no code for.
pub fn dtype_to_torch(dtype: DType) -> Option<i64> {
    Some(match dtype {
        DType::U8 => 1,
        DType::I8 => 2,
        DType::I16 => 3,
        DType::I32 => 4,
        DType::I64 => 5,
        DType::F16 => 6,
        DType::F32 => 7,
        DType::F64 => 8,
        DType::Bool => 12,
        DType::BF16 => 13,
        DType::U16 => 28,
        DType::U32 | DType::U64 => return None,
    })
}

fn name(code: i64) -> String {
    let n = match code {
        9 => "complex32",
        10 => "complex64",
        11 => "complex128",
        29 => "float8_e4m3fn",
        30 => "float8_e5m2",
        31 => "float8_e4m3fnuz",
        32 => "float8_e5m2fnuz",
        _ => return format!("code {code}"),
    };
    n.to_string()
}
