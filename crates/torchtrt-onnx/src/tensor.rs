//! `TensorProto` ↔ engine tensors, including external data.

use std::path::Path;

use torchtrt_core::Tensor;
use torchtrt_core::plugin_api::DType;

use crate::proto::TensorProto;
use crate::proto::tensor_proto::{DataLocation, DataType};

/// The engine dtype of an ONNX `TensorProto.DataType` code.
pub fn dtype_from_onnx(code: i32) -> Result<DType, String> {
    let dt = DataType::try_from(code).map_err(|_| format!("unknown ONNX data type {code}"))?;
    Ok(match dt {
        DataType::Float => DType::F32,
        DataType::Float16 => DType::F16,
        DataType::Bfloat16 => DType::BF16,
        DataType::Double => DType::F64,
        DataType::Int64 => DType::I64,
        DataType::Int32 => DType::I32,
        DataType::Int16 => DType::I16,
        DataType::Int8 => DType::I8,
        DataType::Uint8 => DType::U8,
        DataType::Uint16 => DType::U16,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Bool => DType::Bool,
        other => {
            return Err(format!(
                "ONNX data type {} is not supported",
                other.as_str_name()
            ));
        }
    })
}

/// The ONNX data type code of an engine dtype.
pub fn dtype_to_onnx(dtype: DType) -> i32 {
    (match dtype {
        DType::F32 => DataType::Float,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::F64 => DataType::Double,
        DType::I64 => DataType::Int64,
        DType::I32 => DataType::Int32,
        DType::I16 => DataType::Int16,
        DType::I8 => DataType::Int8,
        DType::U8 => DataType::Uint8,
        DType::U16 => DataType::Uint16,
        DType::U32 => DataType::Uint32,
        DType::U64 => DataType::Uint64,
        DType::Bool => DataType::Bool,
    }) as i32
}

/// Converts a `TensorProto` to a tensor; external data is read relative to `base_dir`.
pub fn tensor_from_proto(t: &TensorProto, base_dir: Option<&Path>) -> Result<Tensor, String> {
    let name = t.name();
    let ctx = |m: String| format!("tensor `{name}`: {m}");
    let dtype = dtype_from_onnx(t.data_type()).map_err(ctx)?;
    let shape: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| ctx(format!("negative dim {d}"))))
        .collect::<Result<_, _>>()?;
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| ctx("element count overflows".into()))?;
    let bytes = numel
        .checked_mul(dtype.size())
        .ok_or_else(|| ctx("byte size overflows".into()))?;
    if t.data_location() == DataLocation::External {
        let raw = read_external(t, base_dir, bytes).map_err(ctx)?;
        return Tensor::from_bytes(dtype, &shape, &raw).map_err(|e| ctx(e.to_string()));
    }
    if let Some(raw) = &t.raw_data {
        if raw.len() != bytes {
            return Err(ctx(format!(
                "raw_data has {} bytes, {dtype}{shape:?} needs {bytes}",
                raw.len()
            )));
        }
        return Tensor::from_bytes(dtype, &shape, raw).map_err(|e| ctx(e.to_string()));
    }
    let typed = typed_bytes(t, dtype).map_err(ctx)?;
    if typed.len() != bytes {
        return Err(ctx(format!(
            "{} values stored, {dtype}{shape:?} needs {numel}",
            typed.len() / dtype.size()
        )));
    }
    Tensor::from_bytes(dtype, &shape, &typed).map_err(|e| ctx(e.to_string()))
}

/// Little-endian bytes of the typed `*_data` fields.
fn typed_bytes(t: &TensorProto, dtype: DType) -> Result<Vec<u8>, String> {
    fn le<T: bytemuck::Pod>(v: &[T]) -> Vec<u8> {
        bytemuck::cast_slice(v).to_vec()
    }
    let i32s = &t.int32_data;
    Ok(match dtype {
        DType::F32 => le(&t.float_data),
        DType::F64 => le(&t.double_data),
        DType::I64 => le(&t.int64_data),
        DType::I32 => le(i32s),
        DType::I16 => le(&i32s.iter().map(|&v| v as i16).collect::<Vec<_>>()),
        DType::I8 => i32s.iter().map(|&v| v as i8 as u8).collect(),
        DType::U8 | DType::Bool => i32s.iter().map(|&v| v as u8).collect(),
        DType::F16 | DType::BF16 | DType::U16 => {
            le(&i32s.iter().map(|&v| v as u16).collect::<Vec<_>>())
        }
        DType::U32 => le(&t.uint64_data.iter().map(|&v| v as u32).collect::<Vec<_>>()),
        DType::U64 => le(&t.uint64_data),
    })
}

fn read_external(
    t: &TensorProto,
    base_dir: Option<&Path>,
    bytes: usize,
) -> Result<Vec<u8>, String> {
    let entry = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key() == k)
            .map(|e| e.value())
    };
    let location = entry("location").ok_or("external data without a location")?;
    let rel = Path::new(location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "external data location `{location}` must stay inside the model's folder"
        ));
    }
    let base =
        base_dir.ok_or("external data needs the model's folder (load the model from a file)")?;
    let path = base.join(rel);
    let parse = |k: &str| -> Result<Option<u64>, String> {
        entry(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("external data {k} `{v}` is not a number"))
            })
            .transpose()
    };
    let offset = parse("offset")?.unwrap_or(0);
    let length = parse("length")?.unwrap_or(bytes as u64);
    if length != bytes as u64 {
        return Err(format!(
            "external data length {length}, the tensor needs {bytes} bytes"
        ));
    }
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = vec![0u8; bytes];
    f.read_exact(&mut buf).map_err(|e| {
        format!(
            "{}: {e} (reading {bytes} bytes at offset {offset})",
            path.display()
        )
    })?;
    Ok(buf)
}
