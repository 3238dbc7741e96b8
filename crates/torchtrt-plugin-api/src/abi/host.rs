//! The host side: loading an extension library and reading its tables back into
//! [`PluginCreator`]s.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::converter::ForeignConverter;
use super::custom_op::ForeignCustomOp;
use super::host_creator::ForeignCreator;
use super::ptr;
use super::types::{
    TTRT_ABI_VERSION, TTRT_ABI_VERSION_MIN, TTRT_ENTRY_POINT, TtrtEntryPoint, TtrtExtension,
};
use crate::converter::Converter;
use crate::custom_op::{CustomOp, CustomOpCreator};
use crate::plugin::{PluginCreator, PluginKey};

/// Why a library could not be loaded. Every variant names the library.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file does not exist.
    #[error("plugin library {} does not exist", .path.display())]
    NotFound {
        /// The library.
        path: PathBuf,
    },
    /// The file exists but cannot be read (permission denied, …).
    #[error("cannot read plugin library {}: {reason}", .path.display())]
    Unreadable {
        /// The library.
        path: PathBuf,
        /// The system's message.
        reason: String,
    },
    /// The file is not a shared library this host can load (checked before the loader
    /// maps it).
    #[error("plugin library {} is not a loadable shared library: {reason}", .path.display())]
    NotLoadable {
        /// The library.
        path: PathBuf,
        /// What is wrong with the file.
        reason: String,
    },
    /// The dynamic loader refused the file.
    #[error("cannot load plugin library {}: {reason}", .path.display())]
    Open {
        /// The library.
        path: PathBuf,
        /// The loader's message (`dlerror`).
        reason: String,
    },
    /// The library has no `torchtrt_extension_v1` symbol.
    #[error(
        "{} is not a torchtrt extension: it exports no `{TTRT_ENTRY_POINT}` symbol",
        .path.display()
    )]
    NotAnExtension {
        /// The library.
        path: PathBuf,
    },
    /// The library speaks another ABI version.
    #[error(
        "plugin library {} has torchtrt ABI version {found}; this host speaks versions 1 to {expected}",
        .path.display()
    )]
    AbiVersion {
        /// The library.
        path: PathBuf,
        /// The library's version.
        found: u32,
        /// This host's version.
        expected: u32,
    },
    /// The tables the library returned break the ABI's rules.
    #[error("plugin library {} is malformed: {reason}", .path.display())]
    Malformed {
        /// The library.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// What keeps a library's code mapped: every creator and plugin from it holds one.
pub(crate) struct LibHandle {
    _lib: Option<libloading::Library>,
    /// The library's ABI version, set once its extension table is read.
    version: std::sync::OnceLock<u32>,
}

impl LibHandle {
    fn new(lib: Option<libloading::Library>) -> LibHandle {
        LibHandle {
            _lib: lib,
            version: std::sync::OnceLock::new(),
        }
    }

    /// The ABI version the library was built for (1 until its table is read).
    pub(crate) fn version(&self) -> u32 {
        self.version.get().copied().unwrap_or(1)
    }
}

/// A loaded extension library: its identity and its plugin creators. Creators and plugins
/// keep the library loaded after the `Extension` is dropped.
pub struct Extension {
    path: PathBuf,
    provider: String,
    creators: Vec<Arc<ForeignCreator>>,
    converters: Vec<Arc<ForeignConverter>>,
    custom_ops: Vec<Arc<ForeignCustomOp>>,
}

impl fmt::Debug for Extension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<PluginKey> = self.creators.iter().map(|c| c.key()).collect();
        let converters: Vec<String> = self
            .converters
            .iter()
            .map(|c| format!("{}::{}", c.op().domain, c.op().op_type))
            .collect();
        let ops: Vec<String> = self
            .custom_ops
            .iter()
            .map(|o| format!("{}::{}", o.domain(), o.op_type()))
            .collect();
        f.debug_struct("Extension")
            .field("path", &self.path)
            .field("provider", &self.provider)
            .field("creators", &keys)
            .field("converters", &converters)
            .field("custom_ops", &ops)
            .finish()
    }
}

impl Extension {
    /// Loads the library at `path` and reads its `torchtrt_extension_v1` tables.
    ///
    /// Loading runs the library's initialisers, and the host then calls into its tables:
    /// the library is trusted code that must keep the contract of `torchtrt_plugin.h`.
    /// Everything it hands back is checked, so a library built against another ABI version
    /// or filling its tables wrongly is an error rather than a crash.
    pub fn load(path: impl AsRef<Path>) -> Result<Extension, LoadError> {
        let path = path.as_ref().to_path_buf();
        if path.components().count() > 1 {
            match std::fs::metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(LoadError::NotFound { path });
                }
                Err(e) => {
                    return Err(LoadError::Unreadable {
                        path,
                        reason: e.to_string(),
                    });
                }
                Ok(_) => {}
            }
            if let Err(reason) = super::elf::check_library(&path) {
                return Err(LoadError::NotLoadable { path, reason });
            }
        }
        // SAFETY: loading runs the library's initialisers; the caller trusts the library.
        let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| LoadError::Open {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        // SAFETY: the symbol, when present, has the entry point's type by the ABI's rules.
        let entry = unsafe { lib.get::<TtrtEntryPoint>(TTRT_ENTRY_POINT.as_bytes()) }
            .map(|s| *s)
            .map_err(|_| LoadError::NotAnExtension { path: path.clone() })?;
        let handle = Arc::new(LibHandle::new(Some(lib)));
        // SAFETY: `entry` comes from `lib`, which `handle` keeps loaded.
        unsafe { Extension::read(entry, handle, path) }
    }

    /// Reads the tables of an entry point linked into this process (e.g. the one
    /// [`export_plugins!`](crate::export_plugins) generated); `label` stands for the path.
    ///
    /// # Safety
    /// `entry` must keep the contract of `torchtrt_plugin.h`: return NULL or tables whose
    /// pointers are valid for as long as the process runs.
    pub unsafe fn from_entry(entry: TtrtEntryPoint, label: &str) -> Result<Extension, LoadError> {
        let handle = Arc::new(LibHandle::new(None));
        // SAFETY: forwarded from the caller.
        unsafe { Extension::read(entry, handle, PathBuf::from(label)) }
    }

    /// # Safety
    /// `entry` keeps the ABI's contract while `lib` is alive.
    unsafe fn read(
        entry: TtrtEntryPoint,
        lib: Arc<LibHandle>,
        path: PathBuf,
    ) -> Result<Extension, LoadError> {
        let malformed = |reason: String| LoadError::Malformed {
            path: path.clone(),
            reason,
        };
        // SAFETY: the library's entry point, called as the ABI prescribes.
        let raw = unsafe { entry() };
        if raw.is_null() {
            return Err(malformed(format!(
                "{TTRT_ENTRY_POINT} returned NULL (the library failed to initialise)"
            )));
        }
        if !raw.is_aligned() {
            return Err(malformed(format!(
                "{TTRT_ENTRY_POINT} returned a misaligned pointer"
            )));
        }
        // SAFETY: non-NULL and aligned; every version begins with the `u32` version.
        let found = unsafe { raw.cast::<u32>().read() };
        if !(TTRT_ABI_VERSION_MIN..=TTRT_ABI_VERSION).contains(&found) {
            return Err(LoadError::AbiVersion {
                path,
                found,
                expected: TTRT_ABI_VERSION,
            });
        }
        let _ = lib.version.set(found);
        // SAFETY: a table of a version this host reads (versions 1 to 3 share its layout),
        // valid while the library is loaded.
        let ext = unsafe { &*raw };
        // SAFETY: a NUL-terminated string by the ABI's rules.
        let provider = unsafe { ptr::string(ext.provider, "provider") }.map_err(malformed)?;
        let nb = ptr::count(ext.nb_creators, "creators").map_err(malformed)?;
        // SAFETY: `nb_creators` pointers by the ABI's rules.
        let raw_creators =
            unsafe { ptr::slice(ext.creators, nb, "creators") }.map_err(malformed)?;
        let mut creators: Vec<Arc<ForeignCreator>> = Vec::with_capacity(nb);
        for (i, &c) in raw_creators.iter().enumerate() {
            // SAFETY: NULL or a valid creator table by the ABI's rules.
            let creator = unsafe { ForeignCreator::new(lib.clone(), c) }
                .map_err(|e| malformed(format!("creator {i}: {e}")))?;
            let key = creator.key();
            if creators.iter().any(|o| o.key() == key) {
                return Err(malformed(format!("plugin {key} is provided twice")));
            }
            creators.push(Arc::new(creator));
        }
        // SAFETY: the converter and custom-op slots as the ABI's rules describe them.
        let (converters, custom_ops) = unsafe { read_ops(ext, &lib) }.map_err(malformed)?;
        Ok(Extension {
            path,
            provider,
            creators,
            converters,
            custom_ops,
        })
    }

    /// The library's identity, e.g. `torchtrt_plugins 0.1.0`.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The path the library was loaded from (the label for in-process entry points).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The library's custom converters, in the library's order.
    pub fn converters(&self) -> Vec<Arc<dyn Converter>> {
        self.converters
            .iter()
            .map(|c| c.clone() as Arc<dyn Converter>)
            .collect()
    }

    /// The library's custom ops, in the library's order.
    pub fn custom_ops(&self) -> Vec<Arc<dyn CustomOp>> {
        self.custom_ops
            .iter()
            .map(|c| c.clone() as Arc<dyn CustomOp>)
            .collect()
    }

    /// The plugin creators derived from the library's custom ops (see
    /// [`CustomOpCreator`]), in the library's order.
    pub fn custom_op_creators(&self) -> Vec<Arc<dyn PluginCreator>> {
        self.custom_ops()
            .into_iter()
            .map(|op| Arc::new(CustomOpCreator::new(op)) as Arc<dyn PluginCreator>)
            .collect()
    }

    /// The library's plugin creators, in the library's order.
    pub fn creators(&self) -> Vec<Arc<dyn PluginCreator>> {
        self.creators
            .iter()
            .map(|c| c.clone() as Arc<dyn PluginCreator>)
            .collect()
    }
}

type Ops = (Vec<Arc<ForeignConverter>>, Vec<Arc<ForeignCustomOp>>);

/// Reads the converter and custom-op tables; an op claimed twice is an error.
///
/// # Safety
/// `ext` is a version-1 table valid while `lib` is alive.
unsafe fn read_ops(ext: &TtrtExtension, lib: &Arc<LibHandle>) -> Result<Ops, String> {
    let nb = ptr::count(ext.nb_converters, "converters")?;
    // SAFETY: `nb_converters` pointers by the ABI's rules.
    let raw = unsafe { ptr::slice(ext.converters, nb, "converters") }?;
    let mut converters: Vec<Arc<ForeignConverter>> = Vec::with_capacity(nb);
    for (i, &c) in raw.iter().enumerate() {
        // SAFETY: NULL or a valid converter table by the ABI's rules.
        let c = unsafe { ForeignConverter::new(lib.clone(), c) }
            .map_err(|e| format!("converter {i}: {e}"))?;
        let op = c.op();
        if converters
            .iter()
            .any(|o| o.op().domain == op.domain && o.op().op_type == op.op_type)
        {
            return Err(format!(
                "converter {}::{} is provided twice",
                op.domain, op.op_type
            ));
        }
        converters.push(Arc::new(c));
    }
    let nb = ptr::count(ext.nb_custom_ops, "custom ops")?;
    // SAFETY: `nb_custom_ops` pointers by the ABI's rules.
    let raw = unsafe { ptr::slice(ext.custom_ops, nb, "custom ops") }?;
    let mut ops: Vec<Arc<ForeignCustomOp>> = Vec::with_capacity(nb);
    for (i, &o) in raw.iter().enumerate() {
        // SAFETY: NULL or a valid custom-op table by the ABI's rules.
        let o = unsafe { ForeignCustomOp::new(lib.clone(), o) }
            .map_err(|e| format!("custom op {i}: {e}"))?;
        let (d, t) = (o.domain(), o.op_type());
        let clash = ops.iter().any(|p| p.domain() == d && p.op_type() == t)
            || converters
                .iter()
                .any(|c| c.op().domain == d && c.op().op_type == t);
        if clash {
            return Err(format!("op {d}::{t} is provided twice"));
        }
        ops.push(Arc::new(o));
    }
    Ok((converters, ops))
}
