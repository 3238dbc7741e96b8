//! Running a plugin the way a host does (fields → create → shapes → configure → enqueue)
//! on f32 values converted to the dtype under test, and comparing against f64 references
//! with per-dtype tolerances.

#![allow(dead_code)]

use half::{bf16, f16};
use torchtrt_plugin_api::{
    CpuLaunch, DType, FieldCollection, HostTensor, HostTensorMut, Launch, Plugin, PluginCreator,
    PluginResult, TensorDesc, const_shape, create_plugin, numel, shape_values,
};

/// The dtypes every built-in plugin supports.
pub const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Deterministic pseudo-random values in `[lo, hi)` (xorshift; never all zeros).
pub fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    torchtrt_testing::uniform(n, seed, lo, hi)
}

/// The bytes of `v` in `dtype` (rounded to nearest even).
pub fn encode(v: &[f32], dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F16 => {
            let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
            bytemuck::cast_slice(&h).to_vec()
        }
        DType::BF16 => {
            let h: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
            bytemuck::cast_slice(&h).to_vec()
        }
        _ => bytemuck::cast_slice(v).to_vec(),
    }
}

/// The values of `bytes` holding `dtype` elements, as f64.
pub fn decode(bytes: &[u8], dtype: DType) -> Vec<f64> {
    match dtype {
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
        DType::BF16 => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
    }
}

/// `v` as the plugin sees it: rounded to `dtype`, widened to f64.
pub fn rounded(v: &[f32], dtype: DType) -> Vec<f64> {
    decode(&encode(v, dtype), dtype)
}

/// A buffer of `len` bytes whose start is 16-byte aligned, as hosts hand to `enqueue`.
pub struct Aligned {
    words: Vec<u128>,
    len: usize,
}

impl Aligned {
    /// A copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Aligned {
        let mut a = Aligned::sentinel(bytes.len());
        a.bytes_mut().copy_from_slice(bytes);
        a
    }

    /// `len` bytes of the shared float sentinel (a NaN in every float dtype), so an output
    /// element the plugin never writes fails the comparison.
    pub fn sentinel(len: usize) -> Aligned {
        Aligned {
            words: vec![
                u128::from_ne_bytes([torchtrt_testing::sentinel::FLOAT_BYTE; 16]);
                len.div_ceil(16)
            ],
            len,
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// The bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

/// Runs one CPU launch of a configured plugin on `input` bytes of `in_desc`, writing an
/// output of `out_desc`.
pub fn enqueue(
    plugin: &dyn Plugin,
    in_desc: &TensorDesc,
    input: &[u8],
    out_desc: &TensorDesc,
    threads: usize,
) -> PluginResult<Vec<u8>> {
    let x = Aligned::from_bytes(input);
    let mut y = Aligned::sentinel(out_desc.byte_len().unwrap_or(0));
    let inputs = [HostTensor {
        desc: in_desc.clone(),
        data: x.bytes(),
    }];
    let mut outputs = [HostTensorMut {
        desc: out_desc.clone(),
        data: y.bytes_mut(),
    }];
    plugin.enqueue(Launch::Cpu(CpuLaunch {
        inputs: &inputs,
        outputs: &mut outputs,
        workspace: &mut [],
        threads,
    }))?;
    Ok(y.bytes().to_vec())
}

/// The output of a plugin run the way a host runs it.
pub struct Run {
    /// Output shape.
    pub shape: Vec<i64>,
    /// Output values, widened to f64.
    pub values: Vec<f64>,
}

/// Creates a plugin from `fields`, infers the output shape of `shape`, configures it for
/// `dtype`, and runs it on `input` (converted to `dtype`) with `threads` threads.
pub fn run(
    creator: &dyn PluginCreator,
    fields: &FieldCollection,
    shape: &[i64],
    input: &[f32],
    dtype: DType,
    threads: usize,
) -> PluginResult<Run> {
    let mut plugin = create_plugin(creator, "test_layer", fields)?;
    run_plugin(plugin.as_mut(), shape, input, dtype, threads)
}

/// [`run`] for an already created plugin.
pub fn run_plugin(
    plugin: &mut dyn Plugin,
    shape: &[i64],
    input: &[f32],
    dtype: DType,
    threads: usize,
) -> PluginResult<Run> {
    assert_eq!(plugin.output_dtypes(&[dtype])?, vec![dtype]);
    let out = plugin.output_shapes(&[const_shape(shape)])?;
    let out_shape = shape_values(&out[0]).expect("constant input shape gives a constant output");
    let in_desc = TensorDesc::new(dtype, shape.to_vec());
    let out_desc = TensorDesc::new(dtype, out_shape.clone());
    plugin.configure(
        std::slice::from_ref(&in_desc),
        std::slice::from_ref(&out_desc),
    )?;
    assert_eq!(numel(shape), Some(input.len()));
    let bytes = enqueue(plugin, &in_desc, &encode(input, dtype), &out_desc, threads)?;
    Ok(Run {
        shape: out_shape,
        values: decode(&bytes, dtype),
    })
}

/// `(atol, rtol)` for outputs of `dtype` whose magnitude is about `scale`.
pub fn tolerance(dtype: DType, scale: f64) -> (f64, f64) {
    match dtype {
        DType::F16 => (1e-3 * scale, 1e-2),
        DType::BF16 => (8e-3 * scale, 2e-2),
        _ => (1e-6 * scale, 1e-5),
    }
}

/// `v` rounded to `dtype` (so out-of-range values become infinite, as outputs do).
pub fn round_to(v: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        _ => f64::from(v as f32),
    }
}

/// Checks `got` against `want` with the shared comparison (`|got − want| ≤ atol + rtol·|want|`
/// per element, NaN only NaN, an infinity only itself; a `want` that rounds to infinity in
/// `dtype` expects that infinity); a failure names the worst element.
pub fn check_close(got: &[f64], want: &[f64], dtype: DType, scale: f64) -> Result<(), String> {
    let (atol, rtol) = tolerance(dtype, scale);
    let want: Vec<f64> = want
        .iter()
        .map(|&w| {
            let r = round_to(w, dtype);
            if r.is_infinite() { r } else { w }
        })
        .collect();
    torchtrt_testing::check_floats(got, &want, torchtrt_testing::Tol::new(rtol, atol))
        .map_err(|m| format!("{dtype}: {m}"))
}
