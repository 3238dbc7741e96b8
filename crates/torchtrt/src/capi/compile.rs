//! `ttrt_compile_onnx*`: ONNX model → engine, with precision and input shape ranges.

use std::collections::HashMap;
use std::ffi::{c_char, c_void};

use torchtrt_capi::{
    CapiError, TTRT_ERROR_IO, TTRT_ERROR_MODEL, TtrtEngine, TtrtRuntime, c_str, engine_out, guard,
    out_ptr, reference,
};
use torchtrt_core::{BuildConfig, Dim, NetworkDefinition};
use torchtrt_plugin_api::abi::{TTRT_MAX_DIMS, TtrtStatus};
use torchtrt_plugin_api::{DType, DeviceKind};

use crate::onnx::{ImportOptions, OnnxError};

/// The shape range of one model input (see `torchtrt.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtInputSpec {
    /// The ONNX input's name.
    pub name: *const c_char,
    /// Rank, `0..=TTRT_MAX_DIMS`.
    pub nb_dims: i32,
    /// Zero.
    pub reserved: i32,
    /// Smallest accepted dims.
    pub min: [i64; TTRT_MAX_DIMS],
    /// Dims to optimise for.
    pub opt: [i64; TTRT_MAX_DIMS],
    /// Largest accepted dims.
    pub max: [i64; TTRT_MAX_DIMS],
}

/// How to compile (see `torchtrt.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtCompileOptions {
    /// A [`DeviceKind`] discriminant.
    pub device: i32,
    /// A [`DType`] discriminant: F32, F16 or BF16.
    pub precision: i32,
    /// `nb_inputs` input shapes, or NULL.
    pub inputs: *const TtrtInputSpec,
    /// Entries at `inputs`.
    pub nb_inputs: i32,
    /// Zero.
    pub reserved: i32,
}

impl Default for TtrtCompileOptions {
    fn default() -> TtrtCompileOptions {
        TtrtCompileOptions {
            device: DeviceKind::Cpu as i32,
            precision: DType::F32 as i32,
            inputs: std::ptr::null(),
            nb_inputs: 0,
            reserved: 0,
        }
    }
}

fn model_error(e: OnnxError) -> CapiError {
    match e {
        OnnxError::Core(core) => CapiError::from(core),
        OnnxError::Io { .. } => CapiError::new(TTRT_ERROR_IO, e.to_string()),
        other => CapiError::new(TTRT_ERROR_MODEL, other.to_string()),
    }
}

fn input_dims(spec: &TtrtInputSpec, position: usize) -> Result<(String, Vec<Dim>), CapiError> {
    let what = format!("options.inputs[{position}].name");
    // SAFETY: the exported caller's contract for `name`.
    let name = unsafe { c_str(spec.name, &what) }?;
    let rank = usize::try_from(spec.nb_dims)
        .ok()
        .filter(|&n| n <= TTRT_MAX_DIMS)
        .ok_or_else(|| {
            CapiError::invalid(format!(
                "input `{name}`: nb_dims {} is outside [0, {TTRT_MAX_DIMS}]",
                spec.nb_dims
            ))
        })?;
    let dims = (0..rank)
        .map(|i| {
            let (min, opt, max) = (spec.min[i], spec.opt[i], spec.max[i]);
            if min < 0 || min > opt || opt > max {
                return Err(CapiError::invalid(format!(
                    "input `{name}`: dimension {i} needs 0 <= min <= opt <= max, got {min}, {opt}, {max}"
                )));
            }
            Ok(if min == max {
                Dim::Fixed(min)
            } else {
                Dim::dynamic(&format!("{name}.{i}"), min, opt, max)
            })
        })
        .collect::<Result<_, _>>()?;
    Ok((name.to_string(), dims))
}

/// Reads the C options into import options and a build configuration.
fn read_options(
    options: *const TtrtCompileOptions,
) -> Result<(ImportOptions, BuildConfig), CapiError> {
    // SAFETY: the exported caller's contract: NULL or valid.
    let options = unsafe { options.as_ref() }.copied().unwrap_or_default();
    let device = match DeviceKind::from_raw(options.device) {
        Some(DeviceKind::Cpu) => DeviceKind::Cpu,
        Some(DeviceKind::Cuda) => {
            crate::cuda_backend(0).map_err(|e| {
                CapiError::unsupported(format!("options.device is TTRT_DEVICE_CUDA: {e}"))
            })?;
            DeviceKind::Cuda
        }
        None => {
            return Err(CapiError::invalid(format!(
                "options.device {} is not a TtrtDevice",
                options.device
            )));
        }
    };
    let precision = DType::from_raw(options.precision)
        .filter(|d| matches!(d, DType::F32 | DType::F16 | DType::BF16))
        .ok_or_else(|| {
            CapiError::invalid(format!(
                "options.precision {} is not TTRT_DTYPE_F32, _F16 or _BF16",
                options.precision
            ))
        })?;
    let n = usize::try_from(options.nb_inputs).map_err(|_| {
        CapiError::invalid(format!(
            "options.nb_inputs is negative ({})",
            options.nb_inputs
        ))
    })?;
    let specs: &[TtrtInputSpec] = match (n, options.inputs.is_null()) {
        (0, _) => &[],
        (_, true) => {
            return Err(CapiError::invalid(format!(
                "options.inputs is NULL but options.nb_inputs is {n}"
            )));
        }
        // SAFETY: non-NULL and holding `nb_inputs` entries by the caller's contract.
        (_, false) => unsafe { std::slice::from_raw_parts(options.inputs, n) },
    };
    let mut input_dims_by_name = HashMap::new();
    for (i, spec) in specs.iter().enumerate() {
        let (name, dims) = input_dims(spec, i)?;
        if input_dims_by_name.insert(name.clone(), dims).is_some() {
            return Err(CapiError::invalid(format!(
                "input `{name}` is given twice in options.inputs"
            )));
        }
    }
    let import = ImportOptions {
        input_dims: input_dims_by_name,
        evaluator: Some(crate::evaluator()),
        ..ImportOptions::default()
    };
    let config = BuildConfig {
        device,
        precision,
        ..BuildConfig::default()
    };
    Ok((import, config))
}

fn build(
    out: &mut *mut TtrtEngine,
    network: NetworkDefinition,
    config: &BuildConfig,
) -> Result<(), CapiError> {
    engine_out(out, crate::compile(&network, config)?)
}

/// Sets `*options` to the defaults: CPU, f32, the model's input shapes.
///
/// # Safety
/// `options` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_compile_options_init(options: *mut TtrtCompileOptions) -> TtrtStatus {
    guard("ttrt_compile_options_init", || {
        // SAFETY: the caller's contract.
        *unsafe { out_ptr(options, "options") }? = TtrtCompileOptions::default();
        Ok(())
    })
}

/// Compiles the ONNX model at `path`.
///
/// # Safety
/// Pointers NULL or valid as in `torchtrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_compile_onnx_file(
    runtime: *mut TtrtRuntime,
    path: *const c_char,
    options: *const TtrtCompileOptions,
    out: *mut *mut TtrtEngine,
) -> TtrtStatus {
    guard("ttrt_compile_onnx_file", || {
        // SAFETY: the caller's contract.
        let (_, path, out) = unsafe {
            (
                reference(runtime, "runtime")?,
                c_str(path, "path")?,
                out_ptr(out, "out")?,
            )
        };
        let (import, config) = read_options(options)?;
        let network = crate::import_onnx(path, import).map_err(model_error)?;
        build(out, network, &config).map_err(|mut e| {
            e.message = format!("{path}: {}", e.message);
            e
        })
    })
}

/// Compiles an ONNX model of `size` bytes at `data`.
///
/// # Safety
/// `data` is NULL or readable for `size` bytes; other pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_compile_onnx(
    runtime: *mut TtrtRuntime,
    data: *const c_void,
    size: usize,
    options: *const TtrtCompileOptions,
    out: *mut *mut TtrtEngine,
) -> TtrtStatus {
    guard("ttrt_compile_onnx", || {
        // SAFETY: the caller's contract.
        let (_, out) = unsafe { (reference(runtime, "runtime")?, out_ptr(out, "out")?) };
        if data.is_null() {
            return Err(CapiError::invalid("`data` is NULL"));
        }
        // SAFETY: non-NULL and readable for `size` bytes by the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
        let (import, config) = read_options(options)?;
        crate::init_plugins()?;
        let model = crate::onnx::decode_model(bytes, "<memory>").map_err(model_error)?;
        let network = crate::onnx::import_model(&model, None, crate::registry(), &import)
            .map_err(model_error)?;
        build(out, network, &config)
    })
}
