//! A model of the repository: its file (`model.engine`, or `model.onnx` / `model.pt2`
//! compiled at load and cached next to it), its parameters, and its engines, one per device
//! its instances run on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;
use torchtrt::{BuildConfig, Engine};

use crate::config::{EngineIo, Params};
use crate::error::{BackendError, Result};

/// What the version folder holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A serialized engine.
    Engine(PathBuf),
    /// An ONNX model, compiled at load.
    Onnx(PathBuf),
    /// A `torch.export` archive, compiled at load.
    Pt2(PathBuf),
}

impl Source {
    /// The model file of `version_dir`: `default_model_filename` when the configuration
    /// names one, else the first of `model.engine`, `model.onnx`, `model.pt2` present.
    pub fn find(version_dir: &Path, default_name: Option<&str>) -> Result<Source> {
        let candidates: Vec<String> = match default_name {
            Some(name) => vec![name.to_string()],
            None => ["model.engine", "model.onnx", "model.pt2"]
                .map(String::from)
                .to_vec(),
        };
        for name in &candidates {
            let path = version_dir.join(name);
            if path.is_file() {
                return Ok(match path.extension().and_then(|e| e.to_str()) {
                    Some("onnx") => Source::Onnx(path),
                    Some("pt2") => Source::Pt2(path),
                    _ => Source::Engine(path),
                });
            }
        }
        Err(BackendError::new(
            crate::ffi::code::NOT_FOUND,
            format!(
                "no model file in {}: looked for {}",
                version_dir.display(),
                candidates.join(", ")
            ),
        ))
    }
}

/// The state Triton keeps for one loaded model.
pub struct ModelState {
    /// `name` (version `version`), for messages.
    pub label: String,
    /// The model file.
    pub source: Source,
    /// The device of `KIND_MODEL` instances and of the engine the configuration was
    /// completed from.
    pub device: String,
    /// The backend's parameters.
    pub params: Params,
    /// `max_batch_size` in force (0: the model does not batch).
    pub max_batch: i64,
    /// The engine's inputs and outputs.
    pub io: EngineIo,
    engines: Mutex<HashMap<String, Engine>>,
}

impl ModelState {
    /// Loads the libraries the parameters name and the engine for the model's device (the
    /// `device` parameter, else the first instance group's), then completes
    /// (when `auto`) and checks `config`. Returns the state and whether `config` changed.
    pub fn load(
        label: String,
        version_dir: &Path,
        config: &mut Value,
        auto: bool,
    ) -> Result<(ModelState, bool)> {
        let model_dir = version_dir.parent().unwrap_or(version_dir);
        let params = Params::parse(config, model_dir)?;
        let device = params
            .device
            .clone()
            .unwrap_or_else(|| crate::config::first_group_device(config));
        load_libraries(&params)?;
        let default_name = config
            .get("default_model_filename")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let source = Source::find(version_dir, default_name)?;
        let requested_batch = config
            .get("max_batch_size")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let mut state = ModelState {
            label,
            device: device.clone(),
            source,
            params,
            max_batch: requested_batch,
            io: EngineIo {
                inputs: Vec::new(),
                outputs: Vec::new(),
                batch_max: None,
                sized: false,
            },
            engines: Mutex::new(HashMap::new()),
        };
        let engine = state.engine(&device)?;
        state.io = EngineIo::of(&engine);
        let before = config.clone();
        state.max_batch = crate::config::complete(config, &state.io, auto)
            .map_err(|e| e.context(format!("model {}", state.label)))?;
        Ok((state, before != *config))
    }

    /// The engine for `device` (`cpu`, `cuda:N`): loaded once per device and shared by the
    /// instances there.
    pub fn engine(&self, device: &str) -> Result<Engine> {
        let mut engines = self
            .engines
            .lock()
            .map_err(|_| BackendError::internal("engine cache poisoned"))?;
        if let Some(e) = engines.get(device) {
            return Ok(e.clone());
        }
        let engine = self
            .build(device)
            .map_err(|e| e.context(format!("model {} on {device}", self.label)))?;
        engines.insert(device.to_string(), engine.clone());
        Ok(engine)
    }

    fn build(&self, device: &str) -> Result<Engine> {
        let wanted = torchtrt::backend_for(device)?;
        let mut backends = vec![wanted.clone()];
        if device != "cpu" {
            backends.push(torchtrt::evaluator());
        }
        let runtime = torchtrt::Runtime::with_backends(backends)?;
        let path = match &self.source {
            Source::Engine(path) => {
                let engine = runtime.deserialize_file(path)?;
                let built_for = engine.target().device();
                if engine.backend().name() != wanted.name() {
                    return Err(BackendError::invalid(format!(
                        "{} was built for {built_for:?}, the instance runs on {device}: give \
                         the model.onnx to compile for each device, or an engine for it",
                        path.display()
                    )));
                }
                return Ok(engine);
            }
            Source::Onnx(p) | Source::Pt2(p) => p,
        };
        let cache = self.cache_path(path, device)?;
        if let Ok(engine) = runtime.deserialize_file(&cache) {
            return Ok(engine);
        }
        let engine = self.compile(path, device)?;
        if let Err(e) = save_atomically(&engine, &cache) {
            crate::error::log(
                crate::ffi::log::WARN,
                &format!("not caching {}: {e}", cache.display()),
            );
        }
        Ok(engine)
    }

    fn compile(&self, path: &Path, device: &str) -> Result<Engine> {
        let range = self
            .params
            .dynamic_range
            .or((self.max_batch > 0).then_some((1, self.max_batch, self.max_batch)));
        let net = match &self.source {
            Source::Pt2(_) => {
                let mut options = torchtrt::torch::ImportOptions::default();
                if let Some((_, _, max)) = range {
                    options.default_max = max;
                }
                torchtrt::import_pt2(path, options)
                    .map_err(|e| BackendError::invalid(e.to_string()))?
            }
            _ => {
                let mut options = torchtrt::onnx::ImportOptions::default();
                if let Some(r) = range {
                    options.default_range = r;
                }
                torchtrt::import_onnx(path, options)
                    .map_err(|e| BackendError::invalid(e.to_string()))?
            }
        };
        let config = BuildConfig {
            precision: self.params.precision,
            ..BuildConfig::default()
        };
        Ok(torchtrt::compile_for(&net, &config, device)?)
    }

    /// `<model>.<device>.<key>.engine` next to the model, `key` a digest of the model's
    /// bytes and everything the build depends on.
    fn cache_path(&self, path: &Path, device: &str) -> Result<PathBuf> {
        let mut key = hash_file(path).map_err(|e| {
            BackendError::new(
                crate::ffi::code::NOT_FOUND,
                format!("reading {}: {e}", path.display()),
            )
        })?;
        let settings = format!(
            "{device}|{}|{:?}|{}|{}",
            self.params.precision,
            self.params.dynamic_range,
            self.max_batch,
            env!("CARGO_PKG_VERSION")
        );
        key = fnv1a(key, settings.as_bytes());
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
        let device = device.replace(':', "");
        Ok(path.with_file_name(format!("{stem}.{device}.{key:016x}.engine")))
    }
}

/// Loads the parameter's extension libraries (again for each model that names them: a
/// library loaded before adds nothing).
fn load_libraries(params: &Params) -> Result<()> {
    torchtrt::init_plugins()?;
    for lib in &params.libraries {
        torchtrt::load_extensions(lib, &torchtrt::LoadOptions::default())
            .map_err(|e| BackendError::from(e).context(format!("library {}", lib.display())))?;
    }
    Ok(())
}

fn save_atomically(engine: &Engine, path: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, engine.serialize())?;
    std::fs::rename(&tmp, path)
}

/// The FNV-1a digest of a regular file's bytes, read in blocks up to the length it had when
/// opened (a device or a pipe, which could be endless, is refused).
fn hash_file(path: &Path) -> std::io::Result<u64> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut reader = file.take(meta.len());
    let mut block = vec![0u8; 1 << 20];
    let mut hash = 0xcbf2_9ce4_8422_2325;
    loop {
        let n = reader.read(&mut block)?;
        if n == 0 {
            return Ok(hash);
        }
        hash = fnv1a(hash, &block[..n]);
    }
}

fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_hashes_as_its_bytes_and_a_device_is_refused() {
        let dir = std::env::temp_dir().join(format!("ttrt-hash-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("model.onnx");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("written");
        assert_eq!(
            hash_file(&path).expect("hashed"),
            fnv1a(0xcbf2_9ce4_8422_2325, &bytes)
        );
        let e = hash_file(Path::new("/dev/zero")).expect_err("a device");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
