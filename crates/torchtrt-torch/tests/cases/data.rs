//! The generated programs: where they are, the manifest, `.npy` files.

use std::path::{Path, PathBuf};

use torchtrt::Tensor;
use torchtrt::plugin_api::DType;

/// `target/torch-programs`, or `TORCHTRT_TORCH_PROGRAMS`.
pub fn root() -> PathBuf {
    let root = std::env::var_os("TORCHTRT_TORCH_PROGRAMS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/torch-programs")
        });
    assert!(
        root.join("manifest.json").is_file(),
        "PyTorch test programs missing at {}: run `scripts/gen_torch_programs.py {}` with torch installed (scripts/test does)",
        root.display(),
        root.display()
    );
    root
}

/// One program of the manifest.
pub struct Program {
    pub name: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub decomposed_outputs: Vec<String>,
    pub plugins: Vec<String>,
    pub cases: Vec<String>,
}

pub fn manifest() -> Vec<Program> {
    let text = std::fs::read_to_string(root().join("manifest.json")).expect("manifest");
    let v: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    v["programs"]
        .as_array()
        .expect("programs")
        .iter()
        .map(|p| Program {
            name: p["name"].as_str().expect("name").to_string(),
            inputs: strings(&p["inputs"]),
            outputs: strings(&p["outputs"]),
            decomposed_outputs: strings(&p["decomposed_outputs"]),
            plugins: strings(&p["plugins"]),
            cases: p["cases"]
                .as_array()
                .expect("cases")
                .iter()
                .map(|c| c["name"].as_str().expect("case name").to_string())
                .collect(),
        })
        .collect()
}

/// Reads a little-endian, C-order `.npy` file of f32, f64, i64, i32 or bool.
pub fn read_npy(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.starts_with(b"\x93NUMPY"),
        "{}: not .npy",
        path.display()
    );
    let (hlen, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[start..start + hlen]).unwrap();
    let descr = header
        .split("'descr': '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap();
    assert!(
        !header.contains("'fortran_order': True"),
        "{}: Fortran order",
        path.display()
    );
    let shape_text = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape: Vec<usize> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let dtype = match descr {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "|b1" => DType::Bool,
        other => panic!("{}: dtype {other}", path.display()),
    };
    Tensor::from_bytes(dtype, &shape, &bytes[start + hlen..]).unwrap()
}

/// The worst `|got − want| / (|want| + scale)` over the elements, `scale` being the
/// largest `|want|` (so tiny elements are compared against the tensor's magnitude).
pub fn relative_error(got: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(got.shape(), want.shape(), "shapes differ");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = w.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    g.iter()
        .zip(&w)
        .map(|(a, b)| {
            if a == b {
                0.0
            } else if !a.is_finite() || !b.is_finite() {
                f64::INFINITY
            } else {
                (a - b).abs() / (b.abs() + scale)
            }
        })
        .fold(0.0, f64::max)
}
