//! PyTorch-program import for torchtrt. A `torch.export` archive (`.pt2`: a zip holding the
//! ExportedProgram JSON and raw weights) is read without Python, and each node converted
//! into layers by the converter registered for its torch op (`aten::conv2d`, overload
//! aware); ops no converter knows fall back to custom ops and plugins of the same
//! namespace and name.

mod archive;
mod ctx;
mod dtype;
mod error;
mod extension;
mod fallback;
mod import;
mod node;
mod ops;
mod patterns;
mod program;
mod registry;
pub mod schema;
mod sym;
mod weights;

pub use archive::{Archive, MAX_JSON_BYTES};
pub use ctx::{Ctx, Sym};
pub use dtype::{dtype_from_torch, dtype_to_torch};
pub use error::{Result, TorchError, UnsupportedOp};
pub use extension::{
    ExtensionError, ExtensionOp, ExtensionOpKind, extension_ops, register_extension_ops,
};
pub use fallback::plugin_key;
pub use import::{ImportOptions, import_program, unsupported_ops};
pub use node::{Node, OpName};
pub use program::{Program, UserInput, load_program, read_program};
pub use registry::{Converter, ConverterEntry, ConverterRegistry};
pub use sym::parse_expr;

/// Reads a `.pt2` archive and imports it.
pub fn import_file(
    path: impl AsRef<std::path::Path>,
    registry: &torchtrt_core::PluginRegistry,
    options: &ImportOptions,
) -> Result<torchtrt_core::NetworkDefinition> {
    let program = load_program(path)?;
    import_program(&program, registry, options)
}

/// Reads an archive held in memory (`label` names it in errors).
pub fn load_program_bytes(bytes: &[u8], label: &str) -> Result<Program> {
    let mut archive = Archive::new(
        std::io::Cursor::new(bytes),
        bytes.len() as u64,
        label.to_string(),
    )?;
    read_program(&mut archive)
}

/// The built-in converters as a Markdown table, one row per op family (the table of
/// `docs/pytorch.md`, printed by `cargo run -p torchtrt-torch --example supported_ops`).
pub fn supported_ops_markdown() -> String {
    let mut families: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (op, source) in ConverterRegistry::builtin().ops() {
        let family = source.trim_start_matches("builtin: ").to_string();
        families.entry(family).or_default().push(format!("`{op}`"));
    }
    let mut out = String::from("| family | ops |\n|---|---|\n");
    for (family, ops) in families {
        out.push_str(&format!("| {family} | {} |\n", ops.join(", ")));
    }
    out
}
