//! A tiny reader for the `.npy` files of the golden tests: little-endian `f4` or `f2`,
//! C order, format versions 1 to 3.

#![allow(dead_code)]

use half::f16;

/// An array read from a `.npy` file, widened to f32.
#[derive(Debug)]
pub struct Npy {
    /// Shape.
    pub shape: Vec<i64>,
    /// Elements in C order.
    pub values: Vec<f32>,
    /// `"f32"` or `"f16"`: the stored element type.
    pub dtype: &'static str,
}

/// Reads `path`.
pub fn read(path: &std::path::Path) -> Result<Npy, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the bytes of a `.npy` file.
pub fn parse(bytes: &[u8]) -> Result<Npy, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not an .npy file".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = bytes
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or("bad header")?;
    let data = &bytes[start + header_len..];
    let descr = quoted_value(header, "descr").ok_or("no descr")?;
    if header.contains("'fortran_order': True") {
        return Err("Fortran order is not supported".into());
    }
    let shape = shape_value(header).ok_or("no shape")?;
    let n: i64 = shape.iter().product();
    let (values, dtype): (Vec<f32>, _) = match descr {
        "<f4" => (
            data.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            "f32",
        ),
        "<f2" => (
            data.chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            "f16",
        ),
        other => return Err(format!("unsupported dtype {other}")),
    };
    if values.len() as i64 != n {
        return Err(format!("{} elements for shape {shape:?}", values.len()));
    }
    Ok(Npy {
        shape,
        values,
        dtype,
    })
}

fn quoted_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let rest = &header[header.find(&format!("'{key}'"))? + key.len() + 2..];
    let rest = &rest[rest.find('\'')? + 1..];
    Some(&rest[..rest.find('\'')?])
}

fn shape_value(header: &str) -> Option<Vec<i64>> {
    let rest = &header[header.find("'shape'")?..];
    let inner = &rest[rest.find('(')? + 1..rest.find(')')?];
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().ok())
        .collect()
}
