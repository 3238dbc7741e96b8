//! The [`Backend`] for engines targeted at a CUDA device.

use std::collections::HashMap;
use std::sync::Arc;

use torchtrt_core::backend::{Backend, DeviceContext, Kernel, PrepareOptions};
use torchtrt_core::layers::{Convolution, InferInput, LayerKind, QuantizedConvolution};
use torchtrt_core::{ChannelsLast, EngineBlob};
use torchtrt_plugin_api::{DType, DeviceKind, Plugin};

use crate::context::CudaDeviceContext;
use crate::device::CudaDevice;
use crate::error::CudaResult;
use crate::images;
use crate::kernels::{self, PrepareCtx, Programs};
use crate::layer_kernel::DeviceLayerKernel;
use crate::nvrtc::{Arch, KernelImage};
use crate::plugin_kernel::DevicePluginKernel;
use crate::plugin_runtime::PluginPrograms;

/// The CUDA backend of one device. Engines built with it are stamped with the device's
/// compute capability and carry the GPU programs they use. Core layers with a CUDA kernel
/// ([`kernels::prepare`]) and plugin layers placed on CUDA run on the device; other layers
/// are prepared by the `host` backend and run on the host with copies around them.
///
/// Each execution context of its engines gets a [`CudaDeviceContext`] (a stream and device
/// memory of its own), so activations stay on the device.
#[derive(Clone)]
pub struct CudaBackend {
    device: CudaDevice,
    host: Arc<dyn Backend>,
    programs: Programs,
    plugins: Arc<PluginPrograms>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaBackend({:?}, host {})",
            self.device,
            self.host.name()
        )
    }
}

impl CudaBackend {
    /// The backend of `cuda:ordinal`, with `host` preparing the layers that have no CUDA
    /// kernel, and an empty program cache; `Err(NoDevice)` without a GPU.
    pub fn new(ordinal: usize, host: Arc<dyn Backend>) -> CudaResult<CudaBackend> {
        let device = CudaDevice::open(ordinal)?;
        Ok(CudaBackend {
            programs: Programs::new(&device),
            plugins: Arc::new(PluginPrograms::new(&device)),
            device,
            host,
        })
    }

    /// The device.
    pub fn cuda_device(&self) -> &CudaDevice {
        &self.device
    }

    /// The core layers' program cache of this backend.
    pub fn programs(&self) -> &Programs {
        &self.programs
    }

    /// The CUDA runtime plugins launch their kernels through on this device, with the
    /// programs they compiled.
    pub fn plugin_programs(&self) -> &Arc<PluginPrograms> {
        &self.plugins
    }

    /// The backend preparing layers that have no CUDA kernel.
    pub fn host(&self) -> &Arc<dyn Backend> {
        &self.host
    }

    fn arch(&self) -> Arch {
        Arch::new(self.device.compute_capability())
    }
}

/// Whether a layer's outputs are all integer or boolean: shape arithmetic, worth keeping on
/// the host when its inputs are there.
fn integer_outputs(layer: &LayerKind, inputs: &[InferInput<'_>]) -> bool {
    layer.op().infer(inputs).is_ok_and(|outs| {
        !outs.is_empty()
            && outs
                .iter()
                .all(|o| matches!(o.dtype, DType::I64 | DType::I32 | DType::Bool))
    })
}

impl Backend for CudaBackend {
    fn device(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn name(&self) -> String {
        format!("cuda:{}", self.device.ordinal())
    }

    fn compute_capability(&self) -> Option<(u32, u32)> {
        Some(self.device.compute_capability())
    }

    fn prepare(
        &self,
        layer: &LayerKind,
        inputs: &[InferInput<'_>],
    ) -> Result<Box<dyn Kernel>, String> {
        self.prepare_with(layer, inputs, &PrepareOptions::default())
    }

    fn prepare_with(
        &self,
        layer: &LayerKind,
        inputs: &[InferInput<'_>],
        options: &PrepareOptions,
    ) -> Result<Box<dyn Kernel>, String> {
        if touches_wide_unsigned(layer, inputs) {
            return self.host.prepare(layer, inputs);
        }
        let ctx = PrepareCtx {
            device: &self.device,
            programs: &self.programs,
            tf32: options.tf32,
            conv_tactic: kernels::ConvTactic::from_env(),
        };
        match kernels::prepare(layer, inputs, &ctx) {
            None => self.host.prepare(layer, inputs),
            Some(Err(e)) => Err(e),
            Some(Ok(device_kernel)) => {
                let host = integer_outputs(layer, inputs)
                    .then(|| self.host.prepare(layer, inputs).ok())
                    .flatten();
                Ok(Box::new(DeviceLayerKernel::new(device_kernel, host)))
            }
        }
    }

    fn fuses_elementwise(&self) -> bool {
        true
    }

    fn splits_sliced_products(&self) -> bool {
        true
    }

    fn channels_last(&self, layer: &Convolution, inputs: &[InferInput<'_>]) -> ChannelsLast {
        kernels::channels_last(layer, inputs, self.device.compute_capability())
    }

    fn quantized_channels_last(
        &self,
        layer: &QuantizedConvolution,
        inputs: &[InferInput<'_>],
    ) -> ChannelsLast {
        let cc = self.device.compute_capability();
        match kernels::runs_quantized_convolution(layer, inputs, cc) {
            true => ChannelsLast::Faster,
            false => ChannelsLast::No,
        }
    }

    fn runs_integer(&self, layer: &LayerKind, inputs: &[InferInput<'_>]) -> bool {
        let cc = self.device.compute_capability();
        match layer {
            LayerKind::QuantizedConvolution(l) => {
                kernels::runs_quantized_convolution(l, inputs, cc)
            }
            _ => false,
        }
    }

    fn plugin_kernel(&self, plugin: &Arc<dyn Plugin>) -> Option<Result<Box<dyn Kernel>, String>> {
        Some(Ok(Box::new(DevicePluginKernel::new(
            plugin.clone(),
            self.device.ordinal(),
            &self.plugins,
        ))))
    }

    fn create_device_context(&self) -> Result<Option<Box<dyn DeviceContext>>, String> {
        let context = CudaDeviceContext::new(&self.device).map_err(|e| e.to_string())?;
        Ok(Some(Box::new(context)))
    }

    fn engine_blobs(&self) -> Vec<EngineBlob> {
        let arch = self.arch();
        let sources = [
            (images::CORE, &self.programs),
            (images::PLUGINS, self.plugins.programs()),
        ];
        sources
            .into_iter()
            .flat_map(|(source, programs)| {
                programs
                    .images()
                    .into_iter()
                    .filter(|i| i.arch == arch)
                    .map(move |i| images::to_blob(source, &i))
            })
            .collect()
    }

    fn install_blobs(&self, blobs: &[EngineBlob]) -> Result<(), String> {
        let arch = self.arch();
        let mut by_source: HashMap<&str, Vec<KernelImage>> = HashMap::new();
        for blob in blobs {
            let Some(decoded) = images::from_blob(blob) else {
                continue;
            };
            let (source, image) = decoded?;
            if image.arch > arch {
                return Err(format!(
                    "kernel image `{}` is for {} but {} is {arch}",
                    blob.name,
                    image.arch,
                    self.name()
                ));
            }
            by_source.entry(source).or_default().push(image);
        }
        for (name, list) in by_source {
            match name {
                images::CORE => self.programs.install(list),
                images::PLUGINS => self.plugins.programs().install(list),
                other => return Err(format!("kernel images of unknown source `{other}`")),
            }
        }
        Ok(())
    }
}

/// Whether the layer reads or writes u16, u32 or u64 tensors, which the device kernels do
/// not instantiate: such layers run on the host.
fn touches_wide_unsigned(layer: &LayerKind, inputs: &[InferInput<'_>]) -> bool {
    let wide = |d: DType| matches!(d, DType::U16 | DType::U32 | DType::U64);
    inputs.iter().any(|i| wide(i.dtype))
        || layer
            .op()
            .infer(inputs)
            .is_ok_and(|outs| outs.iter().any(|o| wide(o.dtype)))
}
