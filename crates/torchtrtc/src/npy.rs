//! `.npy` files (NumPy format 1.0–3.0, little-endian, C order) and ONNX `TensorProto` `.pb`.

use std::io::Read;
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
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        DType::BF16 => "<V2",
    }
}

/// The largest `.npy` header read (NumPy itself refuses headers over 10,000 bytes by
/// default).
const MAX_NPY_HEADER: usize = 1 << 20;

/// Reads a `.npy` or ONNX `.pb` tensor file, reading no more than the format allows: the
/// `.npy` header and then exactly the data it declares, a `.pb` up to protobuf's 2 GiB.
pub fn read_tensor(path: &Path) -> Result<Tensor> {
    if path.extension().is_some_and(|e| e == "pb") {
        let bytes = torchtrt::onnx::read_protobuf(path, "an ONNX TensorProto")
            .with_context(|| format!("reading {}", path.display()))?;
        let proto = torchtrt::onnx::proto::TensorProto::decode(bytes.as_slice())
            .with_context(|| format!("{}: not an ONNX TensorProto", path.display()))?;
        return torchtrt::onnx::tensor_from_proto(&proto, None)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    read_npy(file).with_context(|| format!("{}: not a readable .npy file", path.display()))
}

/// Reads one `.npy` array from `r`: magic, header, then the declared data and nothing more.
pub(crate) fn read_npy(mut r: impl Read) -> Result<Tensor> {
    let mut prefix = [0u8; 8];
    r.read_exact(&mut prefix)
        .context("missing the \\x93NUMPY magic")?;
    if &prefix[..6] != b"\x93NUMPY" {
        bail!("missing the \\x93NUMPY magic");
    }
    let hlen = match prefix[6] {
        1 => {
            let mut n = [0u8; 2];
            r.read_exact(&mut n).context("truncated header length")?;
            usize::from(u16::from_le_bytes(n))
        }
        2 | 3 => {
            let mut n = [0u8; 4];
            r.read_exact(&mut n).context("truncated header length")?;
            u32::from_le_bytes(n) as usize
        }
        v => bail!("unsupported .npy version {v}"),
    };
    if hlen > MAX_NPY_HEADER {
        bail!("header of {hlen} bytes, over the {MAX_NPY_HEADER}-byte limit");
    }
    let mut header = vec![0u8; hlen];
    r.read_exact(&mut header).context("truncated header")?;
    let header = std::str::from_utf8(&header).context("header is not text")?;
    let (dtype, shape) = parse_header(header)?;
    let need = shape
        .iter()
        .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d as u64))
        .with_context(|| format!("shape {shape:?} of {dtype} overflows"))?;
    let limit = torchtrt::limits::physical_memory();
    if need > limit {
        bail!("shape {shape:?} of {dtype} needs {need} bytes, more than this machine's {limit}");
    }
    let mut data = Vec::new();
    data.try_reserve_exact(need as usize)
        .with_context(|| format!("cannot allocate {need} bytes"))?;
    r.take(need + 1).read_to_end(&mut data)?;
    if data.len() as u64 != need {
        bail!(
            "{}{} data bytes, shape {shape:?} of {dtype} needs {need}",
            data.len().min(need as usize),
            if data.len() as u64 > need { "+" } else { "" }
        );
    }
    Ok(Tensor::from_bytes(dtype, &shape, &data)?)
}

/// The dtype and shape of a `.npy` header: a Python dict literal, `{` to `}`, with
/// `descr`, `fortran_order` (`True` or `False`) and `shape`.
fn parse_header(header: &str) -> Result<(DType, Vec<usize>)> {
    let body = header.trim_end_matches([' ', '\n', '\0']);
    let Some(body) = body.strip_prefix('{').and_then(|b| b.strip_suffix('}')) else {
        bail!(
            "the header is not a dict (`{{…}}`): {:?}",
            header.escape_debug().to_string()
        );
    };
    let field = |key: &str| -> Result<&str> {
        let at = body
            .find(&format!("'{key}'"))
            .with_context(|| format!("no `{key}` in the header"))?;
        Ok(body[at + key.len() + 2..]
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
        format!(
            "dtype `{}` is not supported (little-endian numbers and bool only)",
            d.escape_debug()
        )
    })?;
    let order = field("fortran_order")?;
    let value = order.split([',', '}']).next().unwrap_or_default().trim();
    match value {
        "False" => {}
        "True" => bail!("Fortran-order arrays are not supported"),
        v => bail!(
            "fortran_order is `{}`, expected True or False",
            v.escape_debug()
        ),
    }
    let shape_text = field("shape")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split_once(')'))
        .map(|(inner, _)| inner)
        .context("malformed shape")?;
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .with_context(|| format!("bad dim `{}`", s.escape_debug()))
        })
        .collect::<Result<_>>()?;
    Ok((dtype, shape))
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
