//! Compiling ONNX models and `torch.export` programs (files or bytes) into engines, with the
//! `torchtrtc compile` options and messages.

use std::collections::HashMap;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use torchtrt::plugin_api::DType;
use torchtrt::{BuildConfig, Dim, onnx, torch};

use crate::engine::PyEngine;
use crate::error::{msg, raise};
use crate::progress::Progress;

/// A model given as a file or as bytes.
enum Source {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl Source {
    fn from_py(model: &Bound<'_, PyAny>) -> PyResult<Source> {
        if let Ok(b) = model.cast::<PyBytes>() {
            return Ok(Source::Bytes(b.as_bytes().to_vec()));
        }
        model
            .extract::<PathBuf>()
            .map(Source::File)
            .map_err(|_| msg("model: expected a path or bytes"))
    }

    fn label(&self, bytes: &str) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Bytes(_) => bytes.to_string(),
        }
    }
}

/// One `Input`: its name (or `None`: the model's input at its position) and per dim
/// `(min, opt, max)`.
type InputSpec = (Option<String>, Vec<Range>);

/// `(min, opt, max)` of one dim.
type Range = (i64, i64, i64);

/// The build options of `torchtrtc compile`.
struct Options {
    device: String,
    precision: DType,
    tf32: bool,
    /// `precision = "int8"`: calibration batches, each input named or (`None`) taking the
    /// next declared input's name.
    calibration: Option<Vec<Batch>>,
}

/// One calibration batch: each input's name (or `None` for the next declared input) and
/// value.
type Batch = Vec<(Option<String>, torchtrt::Tensor)>;

/// One input of a calibration batch as Python hands it over: its name (or `None` for the
/// next declared input), dtype name, shape and bytes.
type Feed<'py> = (Option<String>, String, Vec<usize>, Bound<'py, PyBytes>);

impl Options {
    fn new(
        device: String,
        precision: &str,
        tf32: bool,
        calibration: Option<Vec<Vec<Feed<'_>>>>,
    ) -> PyResult<Options> {
        let float = match precision {
            "f32" | "int8" => DType::F32,
            "f16" | "int8+f16" => DType::F16,
            "bf16" => DType::BF16,
            other => {
                return Err(msg(format!(
                    "precision `{other}`: expected f32, f16, bf16, int8 or int8+f16"
                )));
            }
        };
        match (precision.starts_with("int8"), &calibration) {
            (true, None) => return Err(msg("precision int8 needs calibration batches")),
            (false, Some(_)) => return Err(msg("calibration batches need precision int8")),
            _ => {}
        }
        if precision == "int8+f16" && device == "cpu" {
            return Err(msg(
                "precision int8 with f16 elsewhere runs on CUDA; on the CPU int8 runs with f32 \
                 (enabled_precisions={torch.int8})",
            ));
        }
        let calibration = calibration.map(|batches| tensors(&batches)).transpose()?;
        Ok(Options {
            device,
            precision: float,
            tf32,
            calibration,
        })
    }

    /// The build configuration for `net`, calibrated on the batches when INT8 is asked.
    fn config(&self, net: &torchtrt::NetworkDefinition) -> torchtrt::Result<BuildConfig> {
        let int8 = match &self.calibration {
            Some(batches) => Some(std::sync::Arc::new(torchtrt::calibrate(
                net,
                &calibration_batches(net, batches)?,
            )?)),
            None => None,
        };
        Ok(BuildConfig {
            precision: self.precision,
            tf32: self.tf32,
            int8,
            ..BuildConfig::default()
        })
    }
}

/// The calibration batches' inputs as tensors (copied from Python's bytes).
fn tensors(batches: &[Vec<Feed<'_>>]) -> PyResult<Vec<Batch>> {
    batches
        .iter()
        .enumerate()
        .map(|(b, feeds)| {
            feeds
                .iter()
                .map(|(name, dtype, shape, bytes)| {
                    let d = DType::from_name(dtype)
                        .ok_or_else(|| msg(format!("calibration batch {b}: dtype `{dtype}`")))?;
                    let t = torchtrt::Tensor::from_bytes(d, shape, bytes.as_bytes())
                        .map_err(|e| msg(format!("calibration batch {b}: {e}")))?;
                    Ok((name.clone(), t))
                })
                .collect()
        })
        .collect()
}

/// The calibration batches with every input named: unnamed ones take the network's input
/// names in order.
fn calibration_batches(
    net: &torchtrt::NetworkDefinition,
    batches: &[Batch],
) -> torchtrt::Result<Vec<Vec<(String, torchtrt::Tensor)>>> {
    let declared: Vec<&str> = net.inputs().iter().map(|i| i.name.as_str()).collect();
    batches
        .iter()
        .enumerate()
        .map(|(b, feeds)| {
            feeds
                .iter()
                .enumerate()
                .map(|(k, (name, t))| {
                    let name = match name {
                        Some(n) => n.clone(),
                        None => declared.get(k).map(|n| n.to_string()).ok_or_else(|| {
                            torchtrt::Error::InvalidArgument(format!(
                                "calibration batch {b}: {} inputs given, the model has {}",
                                feeds.len(),
                                declared.len()
                            ))
                        })?,
                    };
                    Ok((name, t.clone()))
                })
                .collect()
        })
        .collect()
}

/// `inputs` by input name; positional entries (no name) take the names of `declared` in
/// order.
fn resolve<'a>(
    inputs: &'a [InputSpec],
    declared: &[String],
    what: &str,
) -> PyResult<Vec<(String, &'a [Range])>> {
    inputs
        .iter()
        .enumerate()
        .map(|(k, (name, ranges))| {
            let name = match name {
                Some(n) if declared.contains(n) => n.clone(),
                Some(n) => {
                    return Err(msg(format!(
                        "Input `{n}`: the {what} has no input `{n}` (inputs: {})",
                        declared.join(", ")
                    )));
                }
                None => declared.get(k).cloned().ok_or_else(|| {
                    msg(format!(
                        "{} Inputs given, the {what} has {} ({})",
                        inputs.len(),
                        declared.len(),
                        declared.join(", ")
                    ))
                })?,
            };
            for (i, &(min, opt, max)) in ranges.iter().enumerate() {
                if !(0 <= min && min <= opt && opt <= max) {
                    return Err(msg(format!(
                        "Input `{name}`: dim {i} needs 0 ≤ MIN ≤ OPT ≤ MAX, got {min}, {opt}, {max}"
                    )));
                }
            }
            Ok((name, ranges.as_slice()))
        })
        .collect()
}

/// A dim of `(min, opt, max)`: fixed when all three agree, else dynamic and called `name`.
fn dim(name: &str, (min, opt, max): Range) -> Dim {
    if min == max {
        Dim::Fixed(min)
    } else {
        Dim::dynamic(name, min, opt, max)
    }
}

/// The ONNX importer's dims for `inputs`: dynamic dims named `INPUT.AXIS`, as `torchtrtc
/// --input` names them.
fn onnx_dims(inputs: &[InputSpec], declared: &[String]) -> PyResult<HashMap<String, Vec<Dim>>> {
    Ok(resolve(inputs, declared, "model")?
        .into_iter()
        .map(|(name, ranges)| {
            let dims = ranges
                .iter()
                .enumerate()
                .map(|(i, &r)| dim(&format!("{name}.{i}"), r))
                .collect();
            (name, dims)
        })
        .collect())
}

/// The PyTorch importer's dims for `inputs`: the program's dims with the ranges `inputs`
/// give, so inputs sharing a symbol (a batch) keep sharing it; a dim the program fixed
/// stays fixed.
fn program_dims(
    program: &torch::Program,
    inputs: &[InputSpec],
) -> Result<HashMap<String, Vec<Dim>>, PyErr> {
    let users = program.user_inputs().map_err(|e| raise("", &e))?;
    let declared: Vec<String> = users.iter().map(|u| u.name.clone()).collect();
    let mut out = HashMap::new();
    for (name, ranges) in resolve(inputs, &declared, "program")? {
        let Some(user) = users.iter().find(|u| u.name == name) else {
            continue;
        };
        let base = program
            .input_dims(user, torch::ImportOptions::default().default_max)
            .map_err(|e| raise("", &e))?;
        if base.len() != ranges.len() {
            return Err(msg(format!(
                "Input `{name}` has {} dims, the program's input has {}",
                ranges.len(),
                base.len()
            )));
        }
        let dims = base
            .iter()
            .zip(ranges)
            .enumerate()
            .map(|(i, (d, &r))| match d {
                Dim::Dynamic { name: symbol, .. } => Ok(dim(symbol, r)),
                Dim::Fixed(v) if r == (*v, *v, *v) => Ok(Dim::Fixed(*v)),
                Dim::Fixed(v) => Err(msg(format!(
                    "Input `{name}`: dim {i} is {v} in the exported program (torch.export made it static), not {}..{}",
                    r.0, r.2
                ))),
            })
            .collect::<PyResult<Vec<Dim>>>()?;
        out.insert(name, dims);
    }
    Ok(out)
}

/// The graph inputs of an ONNX model that are not initializers.
fn onnx_inputs(model: &onnx::proto::ModelProto) -> Vec<String> {
    let Some(graph) = &model.graph else {
        return Vec::new();
    };
    graph
        .input
        .iter()
        .filter(|i| !graph.initializer.iter().any(|w| w.name() == i.name()))
        .map(|i| i.name().to_string())
        .collect()
}

/// Compiles an ONNX model (a path or the model's bytes) for `device` (`cpu`, `cuda`,
/// `cuda:N`) at `precision` (`f32`, `f16`, `bf16`, or `int8` with `calibration` batches:
/// CPU integer convolutions and linear layers, calibrated on them).
#[pyfunction]
#[pyo3(signature = (model, inputs = Vec::new(), device = String::from("cpu"), precision = "f32", tf32 = false, calibration = None))]
pub fn compile_onnx(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    inputs: Vec<InputSpec>,
    device: String,
    precision: &str,
    tf32: bool,
    calibration: Option<Vec<Vec<Feed<'_>>>>,
) -> PyResult<PyEngine> {
    let source = Source::from_py(model)?;
    let options = Options::new(device, precision, tf32, calibration)?;
    let label = source.label("ONNX model bytes");
    let mut progress = Progress::stages(4);
    progress.stage("reading model");
    let (proto, base_dir) = py
        .detach(|| match &source {
            Source::File(p) => onnx::load_model(p).map(|m| (m.proto, m.base_dir)),
            Source::Bytes(b) => onnx::decode_model(b, &label).map(|m| (m, None)),
        })
        .map_err(|e| raise(&format!("importing {label}"), &e))?;
    let import = onnx::ImportOptions {
        evaluator: Some(torchtrt::evaluator()),
        input_dims: onnx_dims(&inputs, &onnx_inputs(&proto))?,
        ..Default::default()
    };
    progress.stage("converting");
    let net = py
        .detach(|| {
            torchtrt::init_plugins()?;
            onnx::import_model(&proto, base_dir.as_deref(), torchtrt::registry(), &import)
        })
        .map_err(|e| raise(&format!("importing {label}"), &e))?;
    progress.stage("building");
    let engine = py
        .detach(|| torchtrt::compile_for(&net, &options.config(&net)?, &options.device))
        .map_err(|e| raise(&format!("compiling {label} for {}", options.device), &e))?;
    progress.stage("preparing");
    PyEngine::new(engine)
}

/// Compiles a `torch.export` program (a `.pt2` path or the archive's bytes); see
/// [`compile_onnx`].
#[pyfunction]
#[pyo3(signature = (program, inputs = Vec::new(), device = String::from("cpu"), precision = "f32", tf32 = false, calibration = None))]
pub fn compile_pt2(
    py: Python<'_>,
    program: &Bound<'_, PyAny>,
    inputs: Vec<InputSpec>,
    device: String,
    precision: &str,
    tf32: bool,
    calibration: Option<Vec<Vec<Feed<'_>>>>,
) -> PyResult<PyEngine> {
    let source = Source::from_py(program)?;
    let options = Options::new(device, precision, tf32, calibration)?;
    let label = source.label("the exported program");
    let mut progress = Progress::stages(4);
    progress.stage("reading program");
    let program = py
        .detach(|| {
            torchtrt::init_plugins()?;
            match &source {
                Source::File(p) => torch::load_program(p),
                Source::Bytes(b) => torch::load_program_bytes(b, &label),
            }
        })
        .map_err(|e| raise(&format!("importing {label}"), &e))?;
    let import = torch::ImportOptions {
        input_dims: program_dims(&program, &inputs)?,
        ..Default::default()
    };
    progress.stage("converting");
    let net = py
        .detach(|| torchtrt::import_program(&program, import))
        .map_err(|e| raise(&format!("importing {label}"), &e))?;
    progress.stage("building");
    let engine = py
        .detach(|| torchtrt::compile_for(&net, &options.config(&net)?, &options.device))
        .map_err(|e| raise(&format!("compiling {label} for {}", options.device), &e))?;
    progress.stage("preparing");
    PyEngine::new(engine)
}
