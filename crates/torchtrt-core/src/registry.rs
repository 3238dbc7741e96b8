//! The process-wide plugin registry, keyed by `(namespace, name, version)`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use torchtrt_plugin_api::{
    FieldCollection, FieldSpec, Plugin, PluginCreator, PluginError, PluginKey, PluginResult,
    Registrar, create_plugin,
};

use crate::error::{Error, Result};
use crate::kernel_plugin::{KernelPackage, KernelPluginCreator};

/// What `register` does when the key is already taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDuplicate {
    /// Refuse with an error (the default).
    Error,
    /// Replace the registered creator.
    Replace,
    /// Keep the registered creator and return without error.
    Skip,
}

/// A registered creator and where it came from.
#[derive(Clone)]
pub struct RegisteredCreator {
    /// The creator.
    pub creator: Arc<dyn PluginCreator>,
    /// Who registered it: a library's identity (`torchtrt_plugins 0.1.0`) or a caller's label.
    pub provider: String,
    /// The shared library it was loaded from, if any.
    pub library: Option<PathBuf>,
    /// For a kernel plugin, what engines built with it carry so that loading them needs no
    /// spec and no library.
    pub package: Option<Arc<KernelPackage>>,
}

/// One row of [`PluginRegistry::creators`].
#[derive(Clone, Debug)]
pub struct CreatorInfo {
    /// Registry key.
    pub key: PluginKey,
    /// Who registered it.
    pub provider: String,
    /// The library it was loaded from, if any (`None`: built into this process).
    pub library: Option<PathBuf>,
    /// The creator's field schema.
    pub fields: Vec<FieldSpec>,
    /// What its plugins may do beyond plugin API v1.
    pub capabilities: torchtrt_plugin_api::Capabilities,
}

struct LoadedLibrary {
    path: PathBuf,
    provider: String,
    keys: Vec<PluginKey>,
}

#[derive(Default)]
struct Inner {
    creators: BTreeMap<PluginKey, RegisteredCreator>,
    libraries: Vec<LoadedLibrary>,
}

/// The plugin registry (TensorRT's `IPluginRegistry`). One per process through
/// [`registry()`]; separate instances are useful in tests. Thread-safe.
#[derive(Default)]
pub struct PluginRegistry {
    inner: RwLock<Inner>,
}

/// The process-wide registry.
pub fn registry() -> &'static PluginRegistry {
    static REGISTRY: OnceLock<PluginRegistry> = OnceLock::new();
    REGISTRY.get_or_init(PluginRegistry::new)
}

/// A summary of a loaded library.
#[derive(Clone, Debug)]
pub struct LibraryInfo {
    /// The path it was loaded from.
    pub path: PathBuf,
    /// The identity the library reports.
    pub provider: String,
    /// Keys it registered (keys it shares with the same provider already present are
    /// not repeated).
    pub registered: Vec<PluginKey>,
}

impl PluginRegistry {
    /// An empty registry.
    pub fn new() -> PluginRegistry {
        PluginRegistry::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `creator` under its key on behalf of `provider`.
    pub fn register(
        &self,
        creator: Arc<dyn PluginCreator>,
        provider: &str,
        on_duplicate: OnDuplicate,
    ) -> Result<()> {
        let key = creator.key();
        let mut inner = self.write();
        if let Some(existing) = inner.creators.get(&key) {
            match on_duplicate {
                OnDuplicate::Skip => return Ok(()),
                OnDuplicate::Replace => {}
                OnDuplicate::Error => {
                    return Err(Error::Registry(format!(
                        "plugin {key} is already registered by `{}`",
                        existing.provider
                    )));
                }
            }
        }
        inner.creators.insert(
            key,
            RegisteredCreator {
                creator,
                provider: provider.to_string(),
                library: None,
                package: None,
            },
        );
        Ok(())
    }

    /// Registers a kernel plugin made from a spec ([`crate::kernel_plugin::load_spec`]);
    /// engines built with it carry its package. The same spec (text and sources) again is a
    /// no-op; another holder of the key is an error, and the registry is left as it was.
    pub fn register_kernel_plugin(&self, creator: KernelPluginCreator, source: &str) -> Result<()> {
        let key = creator.key();
        let package = creator.package();
        let mut inner = self.write();
        if let Some(existing) = inner.creators.get(&key) {
            let same = existing
                .package
                .as_ref()
                .is_some_and(|p| p.toml == package.toml && p.files == package.files);
            if same {
                return Ok(());
            }
            return Err(Error::Registry(format!(
                "kernel plugin {key} from {source}: the key is already registered by `{}`",
                existing.provider
            )));
        }
        inner.creators.insert(
            key,
            RegisteredCreator {
                creator: Arc::new(creator),
                provider: format!("kernel plugin spec {source}"),
                library: None,
                package: Some(package),
            },
        );
        Ok(())
    }

    /// Removes a creator; plugins already created from it keep working.
    pub fn deregister(&self, key: &PluginKey) -> Result<Arc<dyn PluginCreator>> {
        let mut inner = self.write();
        let removed = inner
            .creators
            .remove(key)
            .ok_or_else(|| Error::Registry(format!("plugin {key} is not registered")))?;
        for lib in &mut inner.libraries {
            lib.keys.retain(|k| k != key);
        }
        Ok(removed.creator)
    }

    /// The creator registered under `key`.
    pub fn get(&self, key: &PluginKey) -> Option<Arc<dyn PluginCreator>> {
        self.read().creators.get(key).map(|r| r.creator.clone())
    }

    /// The creator registered under `key`, with its provenance.
    pub fn entry(&self, key: &PluginKey) -> Option<RegisteredCreator> {
        self.read().creators.get(key).cloned()
    }

    /// Validates `fields` against the creator's schema and creates a plugin; errors name the
    /// layer and the key, and a missing key is [`Error::PluginNotFound`].
    pub fn create(
        &self,
        key: &PluginKey,
        layer_name: &str,
        fields: &FieldCollection,
    ) -> Result<(Box<dyn Plugin>, RegisteredCreator)> {
        let entry = self.entry(key).ok_or_else(|| Error::PluginNotFound {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            version: key.version.clone(),
            library: None,
        })?;
        let plugin = guard_plugin(|| create_plugin(entry.creator.as_ref(), layer_name, fields))
            .map_err(|source| Error::Plugin {
                context: format!("layer `{layer_name}`"),
                source,
            })?;
        Ok((plugin, entry))
    }

    /// Every registered creator, sorted by key.
    pub fn creators(&self) -> Vec<CreatorInfo> {
        let entries: Vec<(PluginKey, RegisteredCreator)> = self
            .read()
            .creators
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        entries
            .into_iter()
            .map(|(key, r)| CreatorInfo {
                fields: guard_plugin(|| Ok(r.creator.field_schema())).unwrap_or_default(),
                capabilities: guard_plugin(|| Ok(r.creator.capabilities())).unwrap_or_default(),
                key,
                provider: r.provider,
                library: r.library,
            })
            .collect()
    }

    /// Number of registered creators.
    pub fn len(&self) -> usize {
        self.read().creators.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Providers of loaded libraries and their paths.
    pub fn libraries(&self) -> Vec<(PathBuf, String)> {
        self.read()
            .libraries
            .iter()
            .map(|l| (l.path.clone(), l.provider.clone()))
            .collect()
    }

    /// Forgets a loaded library and deregisters the keys it registered.
    pub(crate) fn remove_library(&self, path: &Path) -> Option<()> {
        let mut inner = self.write();
        let i = inner.libraries.iter().position(|l| l.path == path)?;
        let lib = inner.libraries.remove(i);
        for k in &lib.keys {
            inner.creators.remove(k);
        }
        Some(())
    }

    /// Registers a batch of creators from one provider atomically: a key held by another
    /// provider refuses the whole batch and leaves the registry unchanged; keys already
    /// held by the same provider are skipped. Returns the keys newly registered.
    pub fn register_all(
        &self,
        creators: Vec<Arc<dyn PluginCreator>>,
        provider: &str,
        library: Option<&Path>,
    ) -> Result<Vec<PluginKey>> {
        let keyed: Vec<(PluginKey, Arc<dyn PluginCreator>)> =
            creators.into_iter().map(|c| (c.key(), c)).collect();
        let mut inner = self.write();
        let mut seen = std::collections::BTreeSet::new();
        for (key, _) in &keyed {
            if !seen.insert(key.clone()) {
                return Err(Error::Registry(format!(
                    "`{provider}` provides plugin {key} twice"
                )));
            }
            if let Some(existing) = inner.creators.get(key)
                && existing.provider != provider
            {
                return Err(Error::Registry(format!(
                    "`{provider}` provides plugin {key}, which `{}` already registered{}",
                    existing.provider,
                    existing
                        .library
                        .as_ref()
                        .map(|p| format!(" from {}", p.display()))
                        .unwrap_or_default()
                )));
            }
        }
        let mut added = Vec::new();
        for (key, creator) in keyed {
            if inner.creators.contains_key(&key) {
                continue;
            }
            inner.creators.insert(
                key.clone(),
                RegisteredCreator {
                    creator,
                    provider: provider.to_string(),
                    library: library.map(Path::to_path_buf),
                    package: None,
                },
            );
            added.push(key);
        }
        if let Some(path) = library {
            inner.libraries.push(LoadedLibrary {
                path: path.to_path_buf(),
                provider: provider.to_string(),
                keys: added.clone(),
            });
        }
        Ok(added)
    }
}

impl Registrar for PluginRegistry {
    fn register_creator(
        &self,
        creator: Arc<dyn PluginCreator>,
        provider: &str,
    ) -> PluginResult<()> {
        self.register_all(vec![creator], provider, None)
            .map(|_| ())
            .map_err(|e| PluginError::Registration(e.to_string()))
    }

    fn register_creators(
        &self,
        creators: Vec<Arc<dyn PluginCreator>>,
        provider: &str,
    ) -> PluginResult<()> {
        self.register_all(creators, provider, None)
            .map(|_| ())
            .map_err(|e| PluginError::Registration(e.to_string()))
    }
}

/// Runs plugin code, turning a panic into [`PluginError::Panic`].
pub(crate) fn guard_plugin<T>(f: impl FnOnce() -> PluginResult<T>) -> PluginResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(PluginError::Panic(msg))
    })
}
