//! The plugin registry: listing it, and loading extension libraries (plugins, custom
//! converters, custom torch ops) into it.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use torchtrt::plugin_api::{FieldSpec, FieldType};

use crate::error::raise;

/// One dict per registered plugin creator: `namespace`, `name`, `version`, `fields` (dicts
/// of `name`, `type`, `list`, `required`, `default`, `doc`), `provider`, `library` (a path,
/// or `None` when built in), `source` (as `torchtrtc plugins` prints it) and
/// `capabilities` (plugin API v2: `shape inputs`, `sized outputs`, `tactics`,
/// `aliased outputs`).
#[pyfunction]
pub fn plugins(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    torchtrt::init_plugins().map_err(|e| raise("", &e))?;
    let list = PyList::empty(py);
    for c in torchtrt::registry().creators() {
        let d = PyDict::new(py);
        d.set_item("namespace", &c.key.namespace)?;
        d.set_item("name", &c.key.name)?;
        d.set_item("version", &c.key.version)?;
        let fields = PyList::empty(py);
        for f in &c.fields {
            fields.append(field(py, f)?)?;
        }
        d.set_item("fields", fields)?;
        d.set_item("provider", &c.provider)?;
        d.set_item(
            "library",
            c.library.as_ref().map(|p| p.display().to_string()),
        )?;
        let source = match &c.library {
            Some(p) => format!("{} ({})", p.display(), c.provider),
            None => format!("built in ({})", c.provider),
        };
        d.set_item("source", source)?;
        d.set_item("capabilities", c.capabilities.names())?;
        list.append(d)?;
    }
    Ok(list)
}

fn field<'py>(py: Python<'py>, f: &FieldSpec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &f.name)?;
    d.set_item("type", f.ty.to_string())?;
    let scalar = f.ty == FieldType::Char || (f.min_len == 1 && f.max_len == Some(1));
    d.set_item("list", !scalar)?;
    d.set_item("required", f.required)?;
    d.set_item("default", f.default.as_ref().map(ToString::to_string))?;
    d.set_item("doc", &f.doc)?;
    Ok(d)
}

/// Loads an extension library whole (its plugins, converters and custom ops, whichever
/// `flag` — `--plugins`, `--custom-converters`, `--custom-torch-ops` — names it, as
/// `torchtrtc` does); returns what it added: `path`, `provider`, `plugins`, `converters`,
/// `torch_ops` (keys as strings).
#[pyfunction]
#[pyo3(signature = (path, flag = "--plugins", override_converters = false))]
pub fn load_library<'py>(
    py: Python<'py>,
    path: PathBuf,
    flag: &str,
    override_converters: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let options = torchtrt::LoadOptions {
        override_converters,
    };
    let info = py
        .detach(|| {
            torchtrt::init_plugins()?;
            torchtrt::load_extensions(&path, &options)
        })
        .map_err(|e| raise(&format!("{flag} {}", path.display()), &e))?;
    let d = PyDict::new(py);
    d.set_item("path", info.path.display().to_string())?;
    d.set_item("provider", &info.provider)?;
    let plugins: Vec<String> = info.plugins.iter().map(ToString::to_string).collect();
    d.set_item("plugins", plugins)?;
    let converters: Vec<String> = info
        .converters
        .iter()
        .map(|c| format!("{}::{}", c.domain, c.op_type))
        .collect();
    d.set_item("converters", converters)?;
    let torch_ops: Vec<String> = info
        .torch_ops
        .iter()
        .map(|o| format!("{}::{}", o.namespace, o.name))
        .collect();
    d.set_item("torch_ops", torch_ops)?;
    Ok(d)
}

/// Compiles a kernel-plugin spec (TOML) and registers it (`torchtrtc --kernel-plugins`);
/// returns its key.
#[pyfunction]
pub fn load_kernel_plugin(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| -> torchtrt::Result<String> {
        torchtrt::init_plugins()?;
        let creator =
            torchtrt::kernel_plugin::load_spec(&path).map_err(torchtrt::Error::Registry)?;
        let key = torchtrt::plugin_api::PluginCreator::key(&creator).to_string();
        torchtrt::registry().register_kernel_plugin(creator, &path.display().to_string())?;
        Ok(key)
    })
    .map_err(|e| raise(&format!("kernel_plugins {}", path.display()), &e))
}

/// Allows or forbids loading engines that carry kernel plugins' native CPU code.
#[pyfunction]
pub fn set_engine_host_code_allowed(allowed: bool) {
    torchtrt::kernel_plugin::set_engine_host_code_allowed(allowed);
}

/// Whether `cuda:0` can run engines here: `(True, "")`, or `(False, why)`.
#[pyfunction]
pub fn cuda_available(py: Python<'_>) -> (bool, String) {
    match py.detach(|| torchtrt::backend_for("cuda")) {
        Ok(_) => (true, String::new()),
        Err(e) => (false, crate::error::one_line(&e)),
    }
}
