//! One module per sub-command, plus what they share: loading libraries and models.

pub mod bench;
pub mod compile;
pub mod inspect;
pub mod plugins;
pub mod pt2;
pub mod run;

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use torchtrt::onnx::proto::ModelProto;
use torchtrt::onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use torchtrt::onnx::proto::type_proto::Value as TypeValue;
use torchtrt::plugin_api::{DType, PluginCreator};
use torchtrt::{BuildConfig, Dim, Engine};

use crate::progress::Progress;
use crate::{BuildOptions, Precision};

/// Registers the built-ins and loads every `--plugins`, `--custom-converters` and
/// `--custom-torch-ops` library, before any model is read, and opens the `--device`. Each library is loaded whole
/// (plugins, converters, custom ops) whichever flag names it; a failure names the flag.
pub fn load_libraries(opts: &BuildOptions) -> Result<()> {
    torchtrt::init_plugins()?;
    let options = torchtrt::LoadOptions {
        override_converters: opts.override_converters,
    };
    let flagged = [
        ("--plugins", &opts.plugins),
        ("--custom-converters", &opts.custom_converters),
        ("--custom-torch-ops", &opts.custom_torch_ops),
    ];
    for (flag, libs) in flagged {
        for lib in libs {
            let info = torchtrt::load_extensions(lib, &options)
                .with_context(|| format!("{flag} {}", lib.display()))?;
            tracing::info!(library = %info.path.display(), provider = info.provider, plugins = info.plugins.len(), converters = info.converters.len(), "loaded extension library");
        }
    }
    register_kernel_plugins(&opts.kernel_plugins)?;
    torchtrt::kernel_plugin::set_engine_host_code_allowed(opts.allow_engine_host_code);
    if opts.device != "cpu" {
        torchtrt::backend_for(&opts.device).with_context(|| format!("--device {}", opts.device))?;
    }
    Ok(())
}

/// Compiles and registers every `--kernel-plugins` spec.
pub fn register_kernel_plugins(specs: &[std::path::PathBuf]) -> Result<()> {
    for spec in specs {
        let flag = || format!("--kernel-plugins {}", spec.display());
        let creator = torchtrt::kernel_plugin::load_spec(spec)
            .map_err(anyhow::Error::msg)
            .with_context(flag)?;
        let key = creator.key();
        torchtrt::registry()
            .register_kernel_plugin(creator, &spec.display().to_string())
            .with_context(flag)?;
        tracing::info!(spec = %spec.display(), plugin = %key, "registered kernel plugin");
    }
    Ok(())
}

/// The build configuration the options ask for.
pub fn build_config(opts: &BuildOptions) -> BuildConfig {
    BuildConfig {
        precision: match opts.precision {
            Precision::Int8 if opts.device != "cpu" => DType::F16,
            Precision::F32 | Precision::Int8 => DType::F32,
            Precision::F16 => DType::F16,
            Precision::Bf16 => DType::BF16,
        },
        tf32: opts.tf32,
        fuse_elementwise: !opts.no_fuse,
        layouts: !opts.no_layouts,
        max_memory: opts.max_memory,
        ..BuildConfig::default()
    }
}

/// Builds `net` for the options' device, through the options' timing cache when one is
/// given (read before, written after).
pub fn build_network(net: &torchtrt::NetworkDefinition, opts: &BuildOptions) -> Result<Engine> {
    let mut config = build_config(opts);
    let int8 = matches!(opts.precision, Precision::Int8);
    if !int8 && (opts.calibration.is_some() || opts.calibration_cache.is_some()) {
        bail!("--calibration and --calibration-cache need --precision int8");
    }
    if int8 {
        config.int8 = Some(crate::calibration::for_network(net, opts)?);
    }
    let cache = match &opts.timing_cache {
        Some(path) => {
            let cache = torchtrt::TimingCache::load(path)?;
            Some(Arc::new(Mutex::new(cache)))
        }
        None => None,
    };
    config.timing_cache = cache.clone();
    let engine = torchtrt::compile_for(net, &config, &opts.device)?;
    if let (Some(path), Some(cache)) = (&opts.timing_cache, cache) {
        let cache = cache
            .lock()
            .map_err(|_| anyhow::anyhow!("the timing cache lock is poisoned"))?;
        tracing::info!(path = %path.display(), hits = cache.hits(), timed = cache.timed(), "timing cache");
        if cache.timed() > 0 || !path.exists() {
            cache.save(path)?;
        }
    }
    Ok(engine)
}

/// An engine from an `.engine` file, or compiled from an ONNX model or `.pt2` program.
/// `shapes` are the shapes
/// of the tensors `run` was given, which fix the model's dynamic input dims.
pub fn load_or_compile(
    path: &Path,
    opts: &BuildOptions,
    shapes: &[(String, Vec<usize>)],
    progress: &Progress,
) -> Result<Engine> {
    progress.stage("loading libraries");
    load_libraries(opts)?;
    let is_engine = starts_like_engine(path)?;
    if is_engine {
        progress.set_total(2);
        progress.stage("loading engine");
        return torchtrt::Runtime::new()?
            .deserialize_file(path)
            .with_context(|| format!("loading engine {}", path.display()));
    }
    compile_model(path, opts, shapes, progress)
}

/// Whether the file begins with the engine magic, or with most of it (a damaged engine,
/// which the engine reader then names), rather than being a model.
fn starts_like_engine(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut head = Vec::with_capacity(8);
    std::fs::File::open(path)
        .and_then(|f| f.take(8).read_to_end(&mut head))
        .with_context(|| format!("reading {}", path.display()))?;
    let magic = &torchtrt::ENGINE_MAGIC;
    let same = head.iter().zip(magic).filter(|(a, b)| a == b).count();
    Ok(head.len() == magic.len() && same >= magic.len() - 2)
}

/// Imports and compiles an ONNX model or a `.pt2` program.
pub fn compile_model(
    path: &Path,
    opts: &BuildOptions,
    shapes: &[(String, Vec<usize>)],
    progress: &Progress,
) -> Result<Engine> {
    if pt2::is_pt2(path) {
        pt2::compile_pt2(path, opts, shapes, progress)
    } else {
        compile_onnx(path, opts, shapes, progress)
    }
}

/// Imports and compiles an ONNX model, reporting the stages to `progress`.
pub fn compile_onnx(
    path: &Path,
    opts: &BuildOptions,
    shapes: &[(String, Vec<usize>)],
    progress: &Progress,
) -> Result<Engine> {
    progress.stage("reading model");
    let model = torchtrt::onnx::load_model(path)
        .with_context(|| format!("importing {}", path.display()))?;
    let mut options = torchtrt::onnx::ImportOptions {
        evaluator: Some(torchtrt::evaluator()),
        ..Default::default()
    };
    let declared = model_inputs(&model.proto);
    let names = || {
        let n: Vec<&str> = declared.iter().map(|(n, _)| n.as_str()).collect();
        n.join(", ")
    };
    for spec in &opts.input_shapes {
        let (name, dims) = crate::args::parse_input_shape(spec)?;
        let Some((_, declared_dims)) = declared.iter().find(|(n, _)| *n == name) else {
            bail!(
                "--input {spec}: the model has no input `{name}` (inputs: {})",
                names()
            );
        };
        check_declared_dims(spec, declared_dims.as_deref(), &dims)?;
        options.input_dims.insert(name, dims);
    }
    for (name, shape) in shapes {
        let Some((_, dims)) = declared.iter().find(|(n, _)| n == name) else {
            bail!(
                "--input {name}: the model has no input `{name}` (inputs: {})",
                names()
            );
        };
        if options.input_dims.contains_key(name) {
            continue;
        }
        check_declared(name, dims.as_deref(), shape)?;
        let fixed = shape.iter().map(|&d| Dim::Fixed(d as i64)).collect();
        options.input_dims.insert(name.clone(), fixed);
    }
    progress.stage("converting");
    let net = torchtrt::onnx::import_model(
        &model.proto,
        model.base_dir.as_deref(),
        torchtrt::registry(),
        &options,
    )
    .with_context(|| format!("importing {}", path.display()))?;
    progress.stage("building");
    build_network(&net, opts)
        .with_context(|| format!("compiling {} for {}", path.display(), opts.device))
}

/// The graph's inputs that are not initializers, with their declared dims
/// (`Some(n)` fixed, `None` symbolic or unknown) when the model gives a shape.
fn model_inputs(model: &ModelProto) -> Vec<(String, Option<Vec<Option<i64>>>)> {
    let Some(graph) = &model.graph else {
        return Vec::new();
    };
    graph
        .input
        .iter()
        .filter(|i| !graph.initializer.iter().any(|w| w.name() == i.name()))
        .map(|i| {
            let dims = match i.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(TypeValue::TensorType(tt)) => tt.shape.as_ref().map(|s| {
                    s.dim
                        .iter()
                        .map(|d| match d.value {
                            Some(DimValue::DimValue(v)) if v >= 0 => Some(v),
                            _ => None,
                        })
                        .collect()
                }),
                _ => None,
            };
            (i.name().to_string(), dims)
        })
        .collect()
}

/// Checks a given tensor's shape against the dims the model declares for that input.
/// Checks a `--input-shape` against the model's declared dims: the same rank, and fixed
/// dims within every shape of the range.
fn check_declared_dims(spec: &str, declared: Option<&[Option<i64>]>, dims: &[Dim]) -> Result<()> {
    let Some(want) = declared else {
        return Ok(());
    };
    if want.len() != dims.len() {
        bail!(
            "--input-shape {spec}: rank {}, the model declares rank {} for this input",
            dims.len(),
            want.len()
        );
    }
    for (i, (w, d)) in want.iter().zip(dims).enumerate() {
        let (lo, hi) = match d {
            Dim::Fixed(v) => (*v, *v),
            Dim::Dynamic { min, max, .. } => (*min, *max),
        };
        if let Some(w) = w
            && (lo != *w || hi != *w)
        {
            bail!("--input-shape {spec}: dim {i} must be {w}, as the model declares");
        }
    }
    Ok(())
}

fn check_declared(name: &str, declared: Option<&[Option<i64>]>, shape: &[usize]) -> Result<()> {
    let Some(dims) = declared else {
        return Ok(());
    };
    let fits = dims.len() == shape.len()
        && dims
            .iter()
            .zip(shape)
            .all(|(d, &s)| d.is_none_or(|d| d == s as i64));
    if !fits {
        let want: Vec<String> = dims
            .iter()
            .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
            .collect();
        let got: Vec<String> = shape.iter().map(ToString::to_string).collect();
        bail!(
            "input `{name}` has shape [{}], the model declares [{}]",
            got.join(","),
            want.join(",")
        );
    }
    Ok(())
}
