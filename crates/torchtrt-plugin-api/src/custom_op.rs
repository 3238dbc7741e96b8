//! Custom ops: an operator definition (schema, type and shape inference, kernels) from which
//! a host derives a plugin creator and a converter by itself (Torch-TensorRT's
//! auto-generated plugins). [`CustomOpCreator`] is that derived creator.

use std::sync::Arc;

use crate::dims::ShapeExpr;
use crate::dtype::{DType, DeviceKind, PortDesc, TensorFormat};
use crate::error::{PluginError, PluginResult};
use crate::field::{FieldCollection, FieldSpec};
use crate::plugin::{CpuLaunch, CudaLaunch, Launch, Plugin, PluginCreator, PluginKey};

/// An operator definition. The derived plugin is registered under namespace = `domain`,
/// name = `op_type`, version [`CUSTOM_OP_VERSION`], with the attribute schema as its fields.
pub trait CustomOp: Send + Sync {
    /// The ONNX domain of the op (and the derived plugin's namespace).
    fn domain(&self) -> String;

    /// The ONNX op type (and the derived plugin's name).
    fn op_type(&self) -> String;

    /// Number of inputs.
    fn num_inputs(&self) -> usize;

    /// Number of outputs.
    fn num_outputs(&self) -> usize;

    /// The attributes the op accepts, as plugin fields.
    fn attributes(&self) -> Vec<FieldSpec>;

    /// Output dtypes for the given input dtypes; by default every output has input 0's.
    fn output_dtypes(
        &self,
        _attrs: &FieldCollection,
        inputs: &[DType],
    ) -> PluginResult<Vec<DType>> {
        let d = inputs
            .first()
            .copied()
            .ok_or_else(|| PluginError::InvalidInput("the op has no inputs".into()))?;
        Ok(vec![d; self.num_outputs()])
    }

    /// Output shapes as expressions of the input shapes; by default every output has input
    /// 0's shape.
    fn output_shapes(
        &self,
        _attrs: &FieldCollection,
        inputs: &[ShapeExpr],
    ) -> PluginResult<Vec<ShapeExpr>> {
        let s = inputs
            .first()
            .cloned()
            .ok_or_else(|| PluginError::InvalidInput("the op has no inputs".into()))?;
        Ok(vec![s; self.num_outputs()])
    }

    /// Whether port `pos` (inputs first) may have `io[pos]` on `device`; by default linear
    /// f32 everywhere, on the CPU and, when [`CustomOp::has_cuda_kernel`], on CUDA.
    fn supports(
        &self,
        pos: usize,
        io: &[PortDesc],
        _num_inputs: usize,
        device: DeviceKind,
    ) -> bool {
        let device_ok = device == DeviceKind::Cpu || self.has_cuda_kernel();
        device_ok && io.get(pos) == Some(&PortDesc::linear(DType::F32))
    }

    /// The kernel on host buffers.
    fn cpu_kernel(&self, attrs: &FieldCollection, launch: CpuLaunch<'_, '_>) -> PluginResult<()>;

    /// Whether [`CustomOp::cuda_kernel`] is implemented.
    fn has_cuda_kernel(&self) -> bool {
        false
    }

    /// The kernel on device buffers, queued on the launch's stream.
    fn cuda_kernel(&self, _attrs: &FieldCollection, _launch: &CudaLaunch<'_>) -> PluginResult<()> {
        Err(PluginError::Unsupported(format!(
            "custom op {}::{} has no CUDA kernel",
            self.domain(),
            self.op_type()
        )))
    }
}

/// The version of every plugin derived from a custom op.
pub const CUSTOM_OP_VERSION: &str = "1";

/// The registry key of the plugin derived from `op`.
pub fn custom_op_key(op: &dyn CustomOp) -> PluginKey {
    PluginKey::new(&op.domain(), &op.op_type(), CUSTOM_OP_VERSION)
}

/// The plugin creator derived from a custom op.
pub struct CustomOpCreator {
    op: Arc<dyn CustomOp>,
    key: PluginKey,
}

impl CustomOpCreator {
    /// The creator of `op`'s plugin.
    pub fn new(op: Arc<dyn CustomOp>) -> CustomOpCreator {
        let key = custom_op_key(op.as_ref());
        CustomOpCreator { op, key }
    }

    /// The op behind the creator.
    pub fn op(&self) -> &Arc<dyn CustomOp> {
        &self.op
    }
}

impl PluginCreator for CustomOpCreator {
    fn key(&self) -> PluginKey {
        self.key.clone()
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        self.op.attributes()
    }

    fn create(&self, _layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(CustomOpPlugin {
            op: self.op.clone(),
            key: self.key.clone(),
            attrs: fields.clone(),
        }))
    }
}

/// A custom op with its attributes, as a plugin.
#[derive(Clone)]
struct CustomOpPlugin {
    op: Arc<dyn CustomOp>,
    key: PluginKey,
    attrs: FieldCollection,
}

impl CustomOpPlugin {
    fn check_inputs(&self, n: usize) -> PluginResult<()> {
        let want = self.op.num_inputs();
        if n == want {
            Ok(())
        } else {
            Err(PluginError::InvalidInput(format!(
                "custom op {}: {n} inputs given, it takes {want}",
                self.key
            )))
        }
    }

    fn check_outputs(&self, what: &str, n: usize) -> PluginResult<()> {
        let want = self.op.num_outputs();
        if n == want {
            Ok(())
        } else {
            Err(PluginError::InvalidInput(format!(
                "custom op {}: {what} gave {n} outputs, the op has {want}",
                self.key
            )))
        }
    }
}

impl Plugin for CustomOpPlugin {
    fn num_outputs(&self) -> usize {
        self.op.num_outputs()
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        self.check_inputs(inputs.len())?;
        let out = self.op.output_dtypes(&self.attrs, inputs)?;
        self.check_outputs("output_dtypes", out.len())?;
        Ok(out)
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        self.check_inputs(inputs.len())?;
        let out = self.op.output_shapes(&self.attrs, inputs)?;
        self.check_outputs("output_shapes", out.len())?;
        Ok(out)
    }

    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, device: DeviceKind) -> bool {
        io.get(pos)
            .is_some_and(|p| p.format == TensorFormat::Linear)
            && self.op.supports(pos, io, num_inputs, device)
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        match launch {
            Launch::Cpu(c) => self.op.cpu_kernel(&self.attrs, c),
            Launch::Cuda(c) if self.op.has_cuda_kernel() => self.op.cuda_kernel(&self.attrs, &c),
            Launch::Cuda(_) => Err(PluginError::Unsupported(format!(
                "custom op {} has no CUDA kernel",
                self.key
            ))),
        }
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        self.attrs.clone()
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
