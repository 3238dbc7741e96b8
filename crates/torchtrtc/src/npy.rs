//! `.npy` files (NumPy format 1.0–3.0, little-endian, C order) and ONNX `TensorProto` `.pb`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use prost::Message;
use torchtrt::Tensor;
use torchtrt::plugin_api::DType;

fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::F64 => "<f8",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::I16 => "<i2",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        DType::BF16 => "<V2",
    }
}

/// Reads a `.npy` or ONNX `.pb` tensor file.
pub fn read_tensor(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "pb") {
        let proto = torchtrt::onnx::proto::TensorProto::decode(bytes.as_slice())
            .with_context(|| format!("{}: not an ONNX TensorProto", path.display()))?;
        return torchtrt::onnx::tensor_from_proto(&proto, None)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    parse_npy(&bytes).with_context(|| format!("{}: not a readable .npy file", path.display()))
}

fn parse_npy(b: &[u8]) -> Result<Tensor> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        bail!("missing the \\x93NUMPY magic");
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => bail!("unsupported .npy version {v}"),
    };
    let header = b.get(start..start + hlen).context("truncated header")?;
    let header = std::str::from_utf8(header).context("header is not text")?;
    let field = |key: &str| -> Result<&str> {
        let at = header
            .find(&format!("'{key}'"))
            .with_context(|| format!("no `{key}` in the header"))?;
        Ok(header[at + key.len() + 2..]
            .trim_start()
            .trim_start_matches(':')
            .trim_start())
    };
    let d = field("descr")?;
    let d = d
        .trim_start_matches('\'')
        .split('\'')
        .next()
        .unwrap_or_default();
    let dtype = [
        DType::F32,
        DType::F16,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U8,
        DType::Bool,
    ]
    .into_iter()
    .find(|t| {
        descr(*t) == d || descr(*t).replace('<', "|") == d || descr(*t).replace('|', "<") == d
    })
    .with_context(|| {
        format!("dtype `{d}` is not supported (little-endian numbers and bool only)")
    })?;
    if field("fortran_order")?.starts_with("True") {
        bail!("Fortran-order arrays are not supported");
    }
    let shape_text = field("shape")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .context("malformed shape")?;
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().with_context(|| format!("bad dim `{s}`")))
        .collect::<Result<_>>()?;
    let data = &b[start + hlen..];
    let need = shape.iter().product::<usize>() * dtype.size();
    if data.len() != need {
        bail!(
            "{} data bytes, shape {shape:?} of {dtype} needs {need}",
            data.len()
        );
    }
    Ok(Tensor::from_bytes(dtype, &shape, data)?)
}

/// Writes a tensor as `.npy` (bf16 is written as f32, which NumPy lacks natively).
pub fn write_npy(path: &Path, t: &Tensor) -> Result<()> {
    let widened;
    let t = if t.dtype() == DType::BF16 {
        let v: Vec<f32> = t.to_f64_vec().into_iter().map(|x| x as f32).collect();
        widened = Tensor::from_vec(t.shape(), v)?;
        &widened
    } else {
        t
    };
    let shape = match t.shape() {
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(t.dtype())
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(t.bytes());
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}
