//! Running a configured layer on host tensors.

use torchtrt_plugin_api::{HostTensor, HostTensorMut};

use super::config::Config;

/// Runs `config` from `input` into `output` (shapes already checked) on up to `threads`
/// threads; errors are messages for the caller to attach the layer to.
pub fn run(
    _config: &Config,
    _input: &HostTensor<'_>,
    _output: &mut HostTensorMut<'_>,
    _threads: usize,
) -> Result<(), String> {
    Err("kernels not implemented yet".to_string())
}
