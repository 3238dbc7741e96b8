//! The backend contract: a device that turns layers into ready-to-run kernels, and the
//! per-context device resources ([`DeviceContext`]) the one execution context runs them on.

mod device;
mod plugin_kernel;

pub use device::{CapturedRun, DeviceContext, DeviceMemory};
pub(crate) use plugin_kernel::PluginKernel;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use torchtrt_plugin_api::{DeviceKind, DeviceTensor, Plugin};

use crate::layers::{InferInput, LayerKind};
use crate::tensor::Tensor;

/// Where a kernel reads and writes its tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Host memory, through [`Kernel::execute`].
    Host,
    /// The backend's device memory, queued through [`Kernel::enqueue`].
    Device,
}

/// How a backend runs a convolution channels last ([`Backend::channels_last`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelsLast {
    /// Channels first only.
    No,
    /// Either way at about the same cost: channels last pays where it spares the transposes
    /// a network makes around it (a channels-last normalisation beside a depthwise
    /// convolution).
    Either,
    /// Faster channels last: run channels first, it would copy its input channels last
    /// itself, which channels-last edges spare.
    Faster,
}

/// A layer prepared for one device: parameters resolved, constant weights packed.
/// Shared by every execution context of an engine, so it runs through `&self`.
pub trait Kernel: Send + Sync {
    /// Computes `outputs` (already shaped and allocated by the runtime; contents undefined)
    /// from host `inputs`. Device kernels return an error saying they run on the device.
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String>;

    /// Where the kernel's tensors live; [`Placement::Host`] by default.
    fn placement(&self) -> Placement {
        Placement::Host
    }

    /// Queues the layer on `device` (the context's resources on the backend that prepared
    /// this kernel) over device tensors; outputs are shaped and allocated by the runtime.
    /// Only called for [`Placement::Device`] kernels.
    fn enqueue(
        &self,
        _inputs: &[DeviceTensor],
        _outputs: &[DeviceTensor],
        _device: &mut dyn DeviceContext,
    ) -> Result<(), String> {
        Err("this kernel runs on the host".into())
    }

    /// [`Kernel::enqueue`] for a layer with value inputs ([`crate::layers::LayerOp::value_inputs`]):
    /// `values[i]` is the host copy of input `i` when it is a value input. Kernels that read
    /// such values on the host (plugins with shape inputs) override it; the default ignores
    /// them.
    fn enqueue_with_values(
        &self,
        inputs: &[DeviceTensor],
        _values: &[Option<&Tensor>],
        outputs: &[DeviceTensor],
        device: &mut dyn DeviceContext,
    ) -> Result<(), String> {
        self.enqueue(inputs, outputs, device)
    }

    /// For a device kernel of a layer computing small integer tensors (shape arithmetic), a
    /// host kernel of the same layer: the runtime runs it instead when every input is
    /// already on the host, so shape arithmetic never waits for the device.
    fn host_twin(&self) -> Option<&dyn Kernel> {
        None
    }
}

/// Engine-wide build options a backend honours when it prepares kernels (TensorRT's builder
/// flags). Stored in the engine, so a deserialized engine prepares its kernels alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrepareOptions {
    /// f32 matrix products (MatMul, convolution GEMMs) may use TF32 tensor cores: a 10-bit
    /// mantissa for the products, f32 accumulation (`BuilderFlag::kTF32`). Backends without
    /// TF32 ignore it.
    pub tf32: bool,
}

/// A device's kernel factory.
pub trait Backend: Send + Sync {
    /// The device kind this backend runs on.
    fn device(&self) -> DeviceKind;

    /// A short name for logs and `inspect` (`cpu`, `cuda:0`).
    fn name(&self) -> String;

    /// The CUDA compute capability `(major, minor)` of the device, `None` for the CPU.
    fn compute_capability(&self) -> Option<(u32, u32)> {
        None
    }

    /// Prepares `layer` (any kind but `Constant` and `Plugin`, which the runtime runs
    /// itself) for inputs of these dtypes and shapes; `value` is set for inputs that
    /// are constants of the engine. `Err` when the backend has no kernel for this layer or
    /// these dtypes, with a message saying which.
    fn prepare(
        &self,
        layer: &LayerKind,
        inputs: &[InferInput<'_>],
    ) -> Result<Box<dyn Kernel>, String>;

    /// [`Backend::prepare`] under the engine's build `options`; the default ignores them.
    fn prepare_with(
        &self,
        layer: &LayerKind,
        inputs: &[InferInput<'_>],
        _options: &PrepareOptions,
    ) -> Result<Box<dyn Kernel>, String> {
        self.prepare(layer, inputs)
    }

    /// Whether the builder should group element-wise layers placed on this backend into
    /// `Fused` layers (`LayerKind::Fused`), which the backend then prepares as one kernel.
    /// The default is `false`.
    fn fuses_elementwise(&self) -> bool {
        false
    }

    /// Whether the builder should compute a product whose output is only sliced along its
    /// columns as one product per slice (`split_products`): worth it where a slice is a copy
    /// that costs more than the narrower products lose (a GPU), not where one wide product
    /// is cheaper than several (the CPU's packed products). The default is `false`.
    fn splits_sliced_products(&self) -> bool {
        false
    }

    /// How `layer`, a channels-first convolution over `inputs` (dtypes, shapes, constant
    /// weights), runs on this backend reading and writing its activations channels last
    /// ([`Convolution::channels_last`](crate::layers::Convolution::channels_last)): the
    /// builder's layout pass gives groups of such convolutions, and the element-wise layers
    /// between them, channels-last edges where that moves fewer elements than it adds, with
    /// reformats where a neighbour needs channels first. The default is
    /// [`ChannelsLast::No`].
    fn channels_last(
        &self,
        _layer: &crate::layers::Convolution,
        _inputs: &[InferInput<'_>],
    ) -> ChannelsLast {
        ChannelsLast::No
    }

    /// How `layer`, a channels-first 8-bit convolution over `inputs` (the integer input, the
    /// constant `I8` weights, then float bias and residual), runs on this backend reading and
    /// writing its activations channels last (its [`conv`](crate::layers::QuantizedConvolution::conv)'s
    /// `channels_last`), as [`Backend::channels_last`] tells for float convolutions: the
    /// layout pass groups such layers with the per-tensor quantizations between them. The
    /// default is [`ChannelsLast::No`].
    fn quantized_channels_last(
        &self,
        _layer: &crate::layers::QuantizedConvolution,
        _inputs: &[InferInput<'_>],
    ) -> ChannelsLast {
        ChannelsLast::No
    }

    /// Whether this backend runs `layer`, an integer layer the builder's quantize pass
    /// would make (`QuantizedConvolution`, `QuantizedMatMul`) over `inputs` (the integer
    /// input, the constant `I8` weights, then float bias and residual), on integer
    /// arithmetic: the pass leaves the layers it would not in float. The default is `false`.
    fn runs_integer(&self, _layer: &LayerKind, _inputs: &[InferInput<'_>]) -> bool {
        false
    }

    /// Threads a plugin's CPU launch may use: the size of the pool this backend runs host
    /// kernels in (one per core by default).
    fn host_threads(&self) -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// A kernel that runs `plugin` on this backend's device, for plugin layers the builder
    /// placed there. `None` (the default) runs the plugin's CPU kernel through the runtime.
    fn plugin_kernel(&self, _plugin: &Arc<dyn Plugin>) -> Option<Result<Box<dyn Kernel>, String>> {
        None
    }

    /// Named opaque blobs to store in engines this backend prepared (e.g. compiled GPU
    /// kernel images), so that loading the engine on another machine needs no compiler.
    /// Called when an engine is serialized; the default stores nothing.
    fn engine_blobs(&self) -> Vec<EngineBlob> {
        Vec::new()
    }

    /// Receives the blobs stored in an engine, before its kernels are prepared on this
    /// backend. Blobs the backend does not know are ignored; `Err` for a blob it knows but
    /// cannot use, with the reason.
    fn install_blobs(&self, _blobs: &[EngineBlob]) -> Result<(), String> {
        Ok(())
    }

    /// The device resources of one new execution context (stream, memory pool, copies,
    /// recorded runs); `None` (the default) for backends whose kernels all run on the host.
    fn create_device_context(&self) -> Result<Option<Box<dyn DeviceContext>>, String> {
        Ok(None)
    }

    /// Runs `f`, one whole execution of an engine, where this backend's kernels run best:
    /// a thread-pooled backend runs it on one of its workers, so each parallel layer hands
    /// work to the other workers without waking the calling thread. The default runs `f`
    /// on the calling thread.
    fn run_scope(&self, f: &mut (dyn FnMut() + Send)) {
        f()
    }
}

/// A named opaque blob stored in an engine file for its backend (see
/// [`Backend::engine_blobs`]), e.g. a compiled GPU program `cuda/core/elementwise`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineBlob {
    /// Unique name, `<backend>/<source>/<item>` by convention.
    pub name: String,
    /// The bytes, opaque to the engine.
    pub data: Vec<u8>,
}
