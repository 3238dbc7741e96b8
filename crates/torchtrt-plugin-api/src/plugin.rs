//! The `Plugin` and `PluginCreator` traits and the tensors a plugin's `enqueue` receives.

use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use crate::capabilities::Capabilities;
use crate::cuda_runtime::CudaRuntime;
#[cfg(doc)]
use crate::dims::DimExpr;
use crate::dims::ShapeExpr;
use crate::dtype::{DType, DeviceKind, Element, PortDesc, TensorDesc};
use crate::error::{PluginError, PluginResult};
use crate::field::{FieldCollection, FieldSpec, validate_fields};
use crate::shape_values::ShapeValues;
use crate::sized_output::SizedOutput;
use crate::tactic::Tactic;

/// A plugin's identity in the registry: `(namespace, name, version)`. The namespace `""`
/// holds the engine's standard plugins, `"torch_tensorrt"` the compiler's own.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PluginKey {
    /// Namespace, possibly empty.
    pub namespace: String,
    /// Plugin name, e.g. `Interpolate`.
    pub name: String,
    /// Version string, e.g. `1`.
    pub version: String,
}

impl PluginKey {
    /// Builds a key.
    pub fn new(namespace: &str, name: &str, version: &str) -> PluginKey {
        PluginKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
            version: version.to_string(),
        }
    }
}

impl fmt::Display for PluginKey {
    /// Formats as `namespace::name@version` (`::name@version` for the empty namespace).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}@{}", self.namespace, self.name, self.version)
    }
}

/// Creates plugins of one key from fields; published by libraries and held by the registry
/// (TensorRT's `IPluginCreator`).
pub trait PluginCreator: Send + Sync {
    /// The key plugins of this creator are registered under.
    fn key(&self) -> PluginKey;

    /// The fields `create` accepts, each with its type, length rule, default and doc line.
    fn field_schema(&self) -> Vec<FieldSpec>;

    /// Creates a plugin for the layer `layer_name`. `fields` have been checked against
    /// [`PluginCreator::field_schema`] and defaults filled in when called through
    /// [`create_plugin`]; values still need their semantic checks here.
    fn create(&self, layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>>;

    /// What its plugins may do beyond plugin API v1 (listed by `torchtrt plugins`). None by
    /// default.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
}

/// Validates `fields` against the creator's schema, fills in defaults, and creates the plugin.
/// This is how hosts create plugins, so every creator reports bad fields the same way.
pub fn create_plugin(
    creator: &dyn PluginCreator,
    layer_name: &str,
    fields: &FieldCollection,
) -> PluginResult<Box<dyn Plugin>> {
    let fields = validate_fields(&creator.key(), &creator.field_schema(), fields)?;
    creator.create(layer_name, &fields)
}

/// One layer's worth of computation that the engine does not know natively (TensorRT's
/// `IPluginV3`). A plugin is immutable once configured: `enqueue` takes `&self` and may run
/// from many execution contexts on many threads at once.
pub trait Plugin: Send + Sync {
    /// Number of outputs.
    fn num_outputs(&self) -> usize;

    /// Output dtypes for the given input dtypes.
    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>>;

    /// Output shapes as expressions of the input shapes. With constant input dimensions the
    /// results must fold to constants (build them with the [`crate::DimExpr`] operators).
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>>;

    /// The inputs (by index) that are shape inputs: small 1-D tensors whose *values* decide
    /// the output shapes (TensorRT's `addPluginV3(inputs, shapeInputs)`), such as the sizes
    /// or scales of a resize. The host keeps them on the host and hands their values to
    /// [`Plugin::output_shapes_of`] and, on CUDA, to the launch. None by default.
    fn shape_inputs(&self) -> Vec<usize> {
        Vec::new()
    }

    /// Output shapes from the input shapes and what is known of the shape inputs' values
    /// (`values[i]` belongs to input `i`; other inputs are [`ShapeValues::Unknown`]). A
    /// dimension that depends on values not known yet is [`DimExpr::unknown`]: the host
    /// asks again at run time, when they are. Defaults to [`Plugin::output_shapes`].
    fn output_shapes_of(
        &self,
        inputs: &[ShapeExpr],
        _values: &[ShapeValues],
    ) -> PluginResult<Vec<ShapeExpr>> {
        self.output_shapes(inputs)
    }

    /// The outputs whose length along one axis the kernel decides, each with the scalar
    /// `i64` output that holds it ([`SizedOutput`]). None by default.
    fn sized_outputs(&self) -> Vec<SizedOutput> {
        Vec::new()
    }

    /// The input that output `output` aliases (TensorRT's `getAliasedInput`): the output has
    /// that input's dtype and shape (the builder checks), holds the input's values when
    /// `enqueue` starts, and the plugin updates it in place — a cache or state tensor written
    /// at a few positions, say. The host copies the input into the output before each launch
    /// (TensorRT may insert such copies too), so other readers of the input still see it as it
    /// was. None by default.
    fn aliased_input(&self, _output: usize) -> Option<usize> {
        None
    }

    /// Whether the port `pos` (inputs first, then outputs) may have the dtype and layout in
    /// `io[pos]` on `device`, given the choices already made for `io[..pos]`.
    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, device: DeviceKind) -> bool;

    /// Called once the builder has fixed dtypes and shape ranges (`-1` for dynamic
    /// dimensions); the place to reject combinations the kernels cannot do.
    fn configure(&mut self, _inputs: &[TensorDesc], _outputs: &[TensorDesc]) -> PluginResult<()> {
        Ok(())
    }

    /// The implementations this plugin offers on `device` for these concrete descriptions
    /// (the profile's optimum shapes), for the builder to time ([`Tactic`]). Fewer than two:
    /// nothing to choose, the default runs. Called on a configured plugin.
    fn tactics(
        &self,
        _inputs: &[TensorDesc],
        _outputs: &[TensorDesc],
        _device: DeviceKind,
    ) -> Vec<Tactic> {
        Vec::new()
    }

    /// Selects the implementation `enqueue` runs: an id from [`Plugin::tactics`], or `0`
    /// for the default. Called on a configured copy, by the builder while it times and when
    /// an engine that chose a tactic is loaded. A tactic is a preference: at shapes it
    /// cannot serve, the plugin runs its default. An id it does not know is an error.
    fn set_tactic(&mut self, tactic: u32) -> PluginResult<()> {
        if tactic == 0 {
            Ok(())
        } else {
            Err(PluginError::InvalidInput(format!(
                "tactic {tactic}: this plugin offers no tactics"
            )))
        }
    }

    /// Scratch bytes `enqueue` needs for these concrete shapes.
    fn workspace_size(&self, _inputs: &[TensorDesc], _outputs: &[TensorDesc]) -> usize {
        0
    }

    /// Runs the plugin. CPU launches get host slices; CUDA launches get device pointers and
    /// the context's stream. A device the plugin has no kernel for is
    /// [`PluginError::Unsupported`].
    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()>;

    /// The fields that re-create this plugin through its creator (its serialized form).
    fn fields_to_serialize(&self) -> FieldCollection;

    /// A copy of this plugin, configuration included.
    fn clone_plugin(&self) -> Box<dyn Plugin>;
}

/// A read-only host tensor handed to `enqueue`.
#[derive(Debug)]
pub struct HostTensor<'d> {
    /// Concrete description.
    pub desc: TensorDesc,
    /// The elements' bytes, aligned to at least 16 bytes.
    pub data: &'d [u8],
}

/// A writable host tensor handed to `enqueue`.
#[derive(Debug)]
pub struct HostTensorMut<'d> {
    /// Concrete description.
    pub desc: TensorDesc,
    /// The elements' bytes, aligned to at least 16 bytes.
    pub data: &'d mut [u8],
}

impl HostTensor<'_> {
    /// The elements as `T`; an error when `T` is not the tensor's dtype.
    pub fn typed<T: Element>(&self) -> PluginResult<&[T]> {
        typed_check::<T>(&self.desc)?;
        bytemuck::try_cast_slice(self.data)
            .map_err(|e| PluginError::InvalidInput(format!("tensor {}: {e}", self.desc)))
    }
}

impl HostTensorMut<'_> {
    /// The elements as `T`; an error when `T` is not the tensor's dtype.
    pub fn typed_mut<T: Element>(&mut self) -> PluginResult<&mut [T]> {
        typed_check::<T>(&self.desc)?;
        let desc = &self.desc;
        bytemuck::try_cast_slice_mut(self.data)
            .map_err(|e| PluginError::InvalidInput(format!("tensor {desc}: {e}")))
    }
}

fn typed_check<T: Element>(desc: &TensorDesc) -> PluginResult<()> {
    let same = T::DTYPE == desc.dtype || (T::DTYPE == DType::U8 && desc.dtype == DType::Bool);
    if same {
        Ok(())
    } else {
        Err(PluginError::InvalidInput(format!(
            "tensor {desc} viewed as {}",
            T::DTYPE
        )))
    }
}

/// A device tensor handed to a CUDA `enqueue`.
#[derive(Clone, Debug)]
pub struct DeviceTensor {
    /// Concrete description.
    pub desc: TensorDesc,
    /// Device address (`CUdeviceptr`).
    pub ptr: u64,
}

/// The arguments of one CPU launch.
#[derive(Debug)]
pub struct CpuLaunch<'a, 'd> {
    /// Inputs in order.
    pub inputs: &'a [HostTensor<'d>],
    /// Outputs in order, to be written entirely.
    pub outputs: &'a mut [HostTensorMut<'d>],
    /// Scratch memory of [`Plugin::workspace_size`] bytes.
    pub workspace: &'a mut [u8],
    /// Threads the plugin may use.
    pub threads: usize,
}

/// The arguments of one CUDA launch.
pub struct CudaLaunch<'a> {
    /// Inputs in order.
    pub inputs: &'a [DeviceTensor],
    /// Outputs in order.
    pub outputs: &'a [DeviceTensor],
    /// Scratch memory (device address) of [`Plugin::workspace_size`] bytes.
    pub workspace: u64,
    /// CUDA device ordinal.
    pub device: i32,
    /// The execution context's `CUstream`; work must be queued on it.
    pub stream: *mut c_void,
    /// The host's CUDA runtime: compiles, caches and launches the plugin's programs on
    /// `stream` (see [`CudaRuntime`]).
    pub runtime: &'a dyn CudaRuntime,
    /// The values of the shape inputs ([`Plugin::shape_inputs`]), read on the host, one
    /// entry per input (others [`ShapeValues::Unknown`]); empty when the plugin has none.
    pub shape_values: &'a [ShapeValues],
}

impl fmt::Debug for CudaLaunch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaLaunch")
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .field("workspace", &self.workspace)
            .field("device", &self.device)
            .field("stream", &self.stream)
            .field("shape_values", &self.shape_values)
            .finish_non_exhaustive()
    }
}

/// One launch of a plugin, on the CPU or on a CUDA stream.
#[derive(Debug)]
pub enum Launch<'a, 'd> {
    /// Host buffers.
    Cpu(CpuLaunch<'a, 'd>),
    /// Device buffers and a stream.
    Cuda(CudaLaunch<'a>),
}

impl Launch<'_, '_> {
    /// The device of this launch.
    pub fn device(&self) -> DeviceKind {
        match self {
            Launch::Cpu(_) => DeviceKind::Cpu,
            Launch::Cuda(_) => DeviceKind::Cuda,
        }
    }
}

/// Where a library's creators go: implemented by the host's plugin registry, so that a
/// plugin library can register itself without depending on the host.
pub trait Registrar {
    /// Registers `creator` on behalf of `provider` (a library's identity, e.g.
    /// `torchtrt_plugins 0.1.0`). A key already registered by the same provider is a no-op;
    /// by another provider, [`PluginError::Registration`].
    fn register_creator(&self, creator: Arc<dyn PluginCreator>, provider: &str)
    -> PluginResult<()>;

    /// Registers a library's creators together. Registries that can should make this
    /// atomic (all or none); the default registers them one by one.
    fn register_creators(
        &self,
        creators: Vec<Arc<dyn PluginCreator>>,
        provider: &str,
    ) -> PluginResult<()> {
        creators
            .into_iter()
            .try_for_each(|c| self.register_creator(c, provider))
    }
}
