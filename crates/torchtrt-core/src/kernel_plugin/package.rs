//! What an engine carries of a kernel plugin, and how creators are made from a spec file or
//! from that package: the spec's TOML as written, the source files it names, and (for
//! layers that run on the CPU) the compiled object. Loading a package with a compiled
//! object runs native code from the engine, so it needs [`set_engine_host_code_allowed`]
//! (TensorRT's `IRuntime::setEngineHostCodeAllowed`); CUDA code needs no permission: it runs
//! on the device through the driver.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::PluginKey;

use super::cpu::{self, CpuObject};
use super::plugin::{KernelPluginCreator, Loaded};
use super::spec::{KernelSpec, MAX_SOURCE_BYTES, SourceFiles};
use crate::backend::EngineBlob;

/// Blob-name prefix of kernel-plugin packages in engine files.
pub const BLOB_PREFIX: &str = "kernel-plugins/";

static HOST_CODE: AtomicBool = AtomicBool::new(false);

/// Allows (or forbids again) loading engines that carry native CPU code of kernel plugins,
/// process-wide. Forbidden by default: such an engine is a program, to be loaded only from
/// a source as trusted as a plugin library.
pub fn set_engine_host_code_allowed(allowed: bool) {
    HOST_CODE.store(allowed, Ordering::SeqCst);
}

/// Whether engines may carry native CPU code ([`set_engine_host_code_allowed`]).
pub fn engine_host_code_allowed() -> bool {
    HOST_CODE.load(Ordering::SeqCst)
}

/// A kernel plugin as an engine stores it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KernelPackage {
    /// The spec's TOML, as written.
    pub toml: String,
    /// The files its `source_file` entries name, with their text.
    pub files: Vec<(String, String)>,
    /// The compiled CPU object, when the spec has a CPU part.
    pub cpu_object: Option<Vec<u8>>,
}

impl KernelPackage {
    /// The engine blob of this package; `with_cpu` keeps the compiled object (only engines
    /// with layers of it on the CPU need it).
    pub fn to_blob(&self, key: &PluginKey, with_cpu: bool) -> EngineBlob {
        let stored = KernelPackage {
            toml: self.toml.clone(),
            files: self.files.clone(),
            cpu_object: if with_cpu {
                self.cpu_object.clone()
            } else {
                None
            },
        };
        EngineBlob {
            name: format!("{BLOB_PREFIX}{key}"),
            data: postcard::to_stdvec(&stored).unwrap_or_default(),
        }
    }
}

/// Source files read from the spec's folder, remembered for the package.
struct FolderFiles {
    dir: PathBuf,
    read: std::cell::RefCell<Vec<(String, String)>>,
}

impl SourceFiles for FolderFiles {
    fn read(&self, name: &str) -> Result<String, String> {
        let path = self.dir.join(name);
        let len = std::fs::metadata(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        if len > MAX_SOURCE_BYTES as u64 {
            return Err(format!(
                "{}: {len} bytes (at most {MAX_SOURCE_BYTES})",
                path.display()
            ));
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        self.read
            .borrow_mut()
            .push((name.to_string(), text.clone()));
        Ok(text)
    }
}

/// Source files from a package.
struct PackedFiles<'a>(&'a [(String, String)]);

impl SourceFiles for PackedFiles<'_> {
    fn read(&self, name: &str) -> Result<String, String> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| "not in the engine's package".into())
    }
}

/// Reads a spec file, compiles its CPU part with the system C compiler, and returns its
/// creator (to register with [`crate::PluginRegistry::register_kernel_plugin`]).
pub fn load_spec(path: impl AsRef<Path>) -> Result<KernelPluginCreator, String> {
    let path = path.as_ref();
    let at = |e: String| format!("{}: {e}", path.display());
    let len = std::fs::metadata(path)
        .map_err(|e| at(e.to_string()))?
        .len();
    if len > MAX_SOURCE_BYTES as u64 {
        return Err(at(format!("{len} bytes (at most {MAX_SOURCE_BYTES})")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    let files = FolderFiles {
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        read: Default::default(),
    };
    let spec = KernelSpec::parse(&text, &files).map_err(at)?;
    let files = files.read.into_inner();
    from_spec(spec, text, files).map_err(at)
}

/// Makes a creator from spec text held in memory; `files` are the sources it names.
pub fn load_spec_text(
    text: &str,
    files: &[(String, String)],
) -> Result<KernelPluginCreator, String> {
    let spec = KernelSpec::parse(text, &PackedFiles(files))?;
    from_spec(spec, text.to_string(), files.to_vec())
}

fn from_spec(
    spec: KernelSpec,
    toml: String,
    files: Vec<(String, String)>,
) -> Result<KernelPluginCreator, String> {
    let key = spec.key.clone();
    let (object, loaded) = match &spec.cpu {
        None => (None, None),
        Some(device) => {
            let bytes =
                cpu::compile(&spec, device).map_err(|e| format!("kernel plugin {key}: {e}"))?;
            // SAFETY: the object was just compiled from the spec the caller handed in.
            let loaded = unsafe { CpuObject::load(&spec, device, &bytes) }
                .map_err(|e| format!("kernel plugin {key}: {e}"))?;
            (Some(bytes), Some(loaded))
        }
    };
    let package = Arc::new(KernelPackage {
        toml,
        files,
        cpu_object: object,
    });
    Ok(KernelPluginCreator {
        loaded: Arc::new(Loaded::new(spec, package, loaded)),
    })
}

/// Re-creates a creator from an engine blob named [`BLOB_PREFIX`]`<key>`. A package with a
/// compiled object loads only where engine host code is allowed.
pub(crate) fn from_blob(blob: &EngineBlob) -> Result<KernelPluginCreator, String> {
    let named = blob.name.strip_prefix(BLOB_PREFIX).unwrap_or(&blob.name);
    let err = |m: String| format!("kernel plugin `{named}` stored in the engine: {m}");
    let package: KernelPackage =
        postcard::from_bytes(&blob.data).map_err(|e| err(format!("does not decode: {e}")))?;
    let spec = KernelSpec::parse(&package.toml, &PackedFiles(&package.files)).map_err(err)?;
    if spec.key.to_string() != named {
        return Err(err(format!("holds the spec of {}", spec.key)));
    }
    let cpu = match (&spec.cpu, &package.cpu_object) {
        (Some(device), Some(bytes)) => {
            if !engine_host_code_allowed() {
                return Err(err(
                    "the engine carries native CPU code for it, and loading engine host code \
                     is not allowed (torchtrtc: --allow-engine-host-code; C: \
                     ttrt_allow_engine_host_code(1); Python: torchtrt.allow_engine_host_code(); \
                     Rust: kernel_plugin::set_engine_host_code_allowed(true))"
                        .into(),
                ));
            }
            // SAFETY: the caller allowed engine host code, vouching for the engine.
            Some(unsafe { CpuObject::load(&spec, device, bytes) }.map_err(err)?)
        }
        _ => None,
    };
    Ok(KernelPluginCreator {
        loaded: Arc::new(Loaded::new(spec, Arc::new(package), cpu)),
    })
}
