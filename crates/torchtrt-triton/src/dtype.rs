//! Element types: torchtrt's `DType`, Triton's `TRITONSERVER_DataType` and the model
//! configuration's `TYPE_*` names, from one table.

use torchtrt::plugin_api::DType;

/// `(dtype, TRITONSERVER_DataType, model-configuration name)`.
const TABLE: [(DType, u32, &str); 13] = [
    (DType::Bool, 1, "TYPE_BOOL"),
    (DType::U8, 2, "TYPE_UINT8"),
    (DType::U16, 3, "TYPE_UINT16"),
    (DType::U32, 4, "TYPE_UINT32"),
    (DType::U64, 5, "TYPE_UINT64"),
    (DType::I8, 6, "TYPE_INT8"),
    (DType::I16, 7, "TYPE_INT16"),
    (DType::I32, 8, "TYPE_INT32"),
    (DType::I64, 9, "TYPE_INT64"),
    (DType::F16, 10, "TYPE_FP16"),
    (DType::F32, 11, "TYPE_FP32"),
    (DType::F64, 12, "TYPE_FP64"),
    (DType::BF16, 14, "TYPE_BF16"),
];

/// The `TRITONSERVER_DataType` of `dtype`.
pub fn to_triton(dtype: DType) -> u32 {
    TABLE.iter().find(|e| e.0 == dtype).map_or(0, |e| e.1)
}

/// The dtype of a `TRITONSERVER_DataType`; `None` for types torchtrt has not (`BYTES`).
pub fn from_triton(t: u32) -> Option<DType> {
    TABLE.iter().find(|e| e.1 == t).map(|e| e.0)
}

/// The model configuration's name of `dtype` (`TYPE_FP32`).
pub fn config_name(dtype: DType) -> &'static str {
    TABLE
        .iter()
        .find(|e| e.0 == dtype)
        .map_or("TYPE_INVALID", |e| e.2)
}

/// The dtype of a model-configuration name; `None` for types torchtrt has not.
pub fn from_config_name(name: &str) -> Option<DType> {
    TABLE.iter().find(|e| e.2 == name).map(|e| e.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_both_names() {
        for dtype in DType::ALL {
            assert_eq!(from_triton(to_triton(dtype)), Some(dtype), "{dtype}");
            assert_eq!(from_config_name(config_name(dtype)), Some(dtype), "{dtype}");
        }
        assert_eq!(from_triton(13), None, "BYTES");
        assert_eq!(from_config_name("TYPE_STRING"), None);
    }
}
