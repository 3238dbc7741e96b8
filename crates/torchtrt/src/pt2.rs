//! Importing PyTorch programs (`torch.export` `.pt2` archives).

use std::path::Path;

use crate::{evaluator, init_plugins, registry, torch};

/// Reads a `torch.export` archive into a network: parameters and buffers as constants,
/// user inputs with the dynamic dims the program's range constraints allow (unless
/// `options.input_dims` narrows them), ATen ops through the built-in converters, and ops
/// no converter knows through custom-op libraries and plugins of the same namespace and
/// name. Layers whose inputs are known are evaluated on the CPU while importing.
pub fn import_pt2(
    path: impl AsRef<Path>,
    options: torch::ImportOptions,
) -> std::result::Result<crate::NetworkDefinition, torch::TorchError> {
    init_plugins()?;
    let program = torch::load_program(path)?;
    import_program(&program, options)
}

/// [`import_pt2`] for a program already read (to list its inputs first, for instance).
pub fn import_program(
    program: &torch::Program,
    options: torch::ImportOptions,
) -> std::result::Result<crate::NetworkDefinition, torch::TorchError> {
    init_plugins()?;
    let options = torch::ImportOptions {
        evaluator: options.evaluator.or_else(|| Some(evaluator())),
        ..options
    };
    torch::import_program(program, registry(), &options)
}
