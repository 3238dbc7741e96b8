//! `torchtrt._torchtrt`: the extension module under the `torchtrt` Python package. It
//! compiles ONNX models and `torch.export` programs into engines, loads and saves them, runs
//! them on numpy arrays and torch tensors without copies (DLPack), and lists and loads
//! plugin libraries. The pure-Python layer (`torchtrt/__init__.py`) builds the public API on
//! these functions.

mod arrays;
mod compile;
mod dlpack;
mod engine;
mod error;
mod logging;
mod progress;
mod registry;

use pyo3::prelude::*;

#[pymodule]
fn _torchtrt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logging::init();
    m.add("Error", m.py().get_type::<error::Error>())?;
    m.add_class::<engine::PyEngine>()?;
    m.add_function(wrap_pyfunction!(compile::compile_onnx, m)?)?;
    m.add_function(wrap_pyfunction!(compile::compile_pt2, m)?)?;
    m.add_function(wrap_pyfunction!(engine::deserialize, m)?)?;
    m.add_function(wrap_pyfunction!(engine::load_file, m)?)?;
    m.add_function(wrap_pyfunction!(registry::plugins, m)?)?;
    m.add_function(wrap_pyfunction!(registry::load_library, m)?)?;
    m.add_function(wrap_pyfunction!(registry::load_kernel_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(registry::set_engine_host_code_allowed, m)?)?;
    m.add_function(wrap_pyfunction!(registry::cuda_available, m)?)?;
    m.add(
        "ENGINE_MAGIC",
        pyo3::types::PyBytes::new(m.py(), &torchtrt::ENGINE_MAGIC),
    )?;
    Ok(())
}
