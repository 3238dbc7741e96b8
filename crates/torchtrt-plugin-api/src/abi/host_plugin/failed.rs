//! The plugin `clone_plugin` returns when the library could not clone.

use crate::dims::ShapeExpr;
use crate::dtype::{DType, DeviceKind, PortDesc, TensorDesc};
use crate::error::{PluginError, PluginResult};
use crate::field::FieldCollection;
use crate::plugin::{Launch, Plugin};

/// Every fallible call fails with the library's error, and nothing is supported; the
/// original's output count and fields stay readable.
#[derive(Clone)]
pub(super) struct FailedClone {
    pub(super) error: PluginError,
    pub(super) num_outputs: usize,
    pub(super) fields: FieldCollection,
}

impl Plugin for FailedClone {
    fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    fn output_dtypes(&self, _inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Err(self.error.clone())
    }

    fn output_shapes(&self, _inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Err(self.error.clone())
    }

    fn supports(&self, _pos: usize, _io: &[PortDesc], _n: usize, _device: DeviceKind) -> bool {
        false
    }

    fn configure(&mut self, _inputs: &[TensorDesc], _outputs: &[TensorDesc]) -> PluginResult<()> {
        Err(self.error.clone())
    }

    fn enqueue(&self, _launch: Launch<'_, '_>) -> PluginResult<()> {
        Err(self.error.clone())
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        self.fields.clone()
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
