//! CUDA kernels for core layers, looked up by layer kind.
//!
//! Each module prepares one layer family: it reads the layer's parameters and the inputs'
//! dtypes (and constant values, e.g. weights to upload once), and returns a
//! [`DeviceKernel`] that queues the layer on a stream over device tensors. A layer kind
//! with no entry here, or whose preparer declines these dtypes, runs on the host backend
//! with copies around it.

mod access;
mod activation;
mod attention;
mod cast;
mod concat;
mod conv_cuda;
mod conv_tactic;
mod convolution;
mod copy;
mod depthwise;
mod depthwise_nhwc;
mod elementwise;
mod epilogue;
mod expand;
mod flash_attention;
mod fused;
mod gather;
mod gather_nd;
mod im2col;
mod implicit_gemm;
mod layout;
mod map;
mod matmul;
mod mma;
mod non_zero;
mod normalization;
mod operands;
mod pad;
mod pooling;
pub(crate) mod prelude;
mod programs;
mod quantize;
mod quantized_convolution;
mod reduce;
mod reshape;
mod rotary_embedding;
mod rows;
mod select;
mod slice;
mod softmax;
mod transpose;
mod unary;
mod value_test;

pub use conv_tactic::Tactic as ConvTactic;
pub(crate) use convolution::channels_last;
pub(crate) use quantized_convolution::runs as runs_quantized_convolution;

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::{DType, DeviceTensor};

use crate::blas::GemmType;

use crate::device::CudaDevice;
use crate::stream::Stream;

pub use programs::{ProgramSource, Programs};

/// A core layer prepared for a CUDA device. Shared by every execution context of an
/// engine, so `execute` takes `&self`; per-run scratch comes from the device's caching
/// allocator.
pub trait DeviceKernel: Send + Sync {
    /// Queues the layer on `stream`. `inputs` and `outputs` have concrete shapes; outputs
    /// are allocated by the caller, contents undefined.
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String>;
}

/// What a preparer gets besides the layer: the device and its program cache.
pub struct PrepareCtx<'a> {
    /// The device the kernel will run on.
    pub device: &'a CudaDevice,
    /// Compiled programs of this device (NVRTC on first use, or images from an engine).
    pub programs: &'a Programs,
    /// f32 matrix products may use TF32 tensor cores (the engine's `BuildConfig::tf32`).
    pub tf32: bool,
    /// The tactic every convolution with a tensor-core kernel takes; `None`: each times
    /// its tactics on the first run of an input shape.
    pub conv_tactic: Option<ConvTactic>,
}

impl PrepareCtx<'_> {
    /// The GEMM type of a float dtype: plain f32 arithmetic for f32 unless TF32 is allowed.
    pub(crate) fn gemm_type(&self, dtype: DType) -> Option<GemmType> {
        match matmul::gemm_type(dtype)? {
            GemmType::F32 if self.tf32 => Some(GemmType::Tf32),
            ty => Some(ty),
        }
    }
}

/// Prepares a layer of one kind: `None` when these dtypes or parameters have no CUDA
/// kernel (the layer then runs on the host), `Some(Err)` for a layer that is invalid.
pub type Preparer = fn(
    &LayerKind,
    &[InferInput<'_>],
    &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>>;

/// The registry: layer kind (as `LayerKind::op().kind()` names it) → preparer.
const PREPARERS: &[(&str, Preparer)] = &[
    ("MatMul", matmul::prepare),
    ("Convolution", convolution::prepare),
    ("Pooling", pooling::prepare),
    ("Normalization", normalization::prepare),
    ("RmsNormalization", normalization::prepare),
    ("Softmax", softmax::prepare),
    ("Reduce", reduce::prepare),
    ("Elementwise", elementwise::prepare),
    ("Unary", unary::prepare),
    ("Activation", activation::prepare),
    ("Cast", cast::prepare),
    ("Transpose", transpose::prepare),
    ("Concat", concat::prepare),
    ("Slice", slice::prepare),
    ("Gather", gather::prepare),
    ("Pad", pad::prepare),
    ("Expand", expand::prepare),
    ("Reshape", reshape::prepare),
    ("Flatten", reshape::prepare),
    ("Squeeze", reshape::prepare),
    ("Unsqueeze", reshape::prepare),
    ("Fused", fused::prepare),
    ("GatherNd", gather_nd::prepare),
    ("ScatterNd", gather_nd::prepare),
    ("NonZero", non_zero::prepare),
    ("ValueTest", value_test::prepare),
    ("RotaryEmbedding", rotary_embedding::prepare),
    ("Attention", attention::prepare),
    ("Select", select::prepare),
    ("QuantizedConvolution", quantized_convolution::prepare),
    ("Quantize", quantize::prepare),
    ("Dequantize", quantize::prepare),
];

/// A device kernel for `layer` on these inputs, or `None` when it has none.
pub fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let kind = layer.op().kind();
    PREPARERS
        .iter()
        .filter(|(k, _)| *k == kind)
        .find_map(|(_, p)| p(layer, inputs, ctx))
}

/// Layer kinds with a CUDA kernel, for `inspect` and tests.
pub fn kinds() -> impl Iterator<Item = &'static str> {
    PREPARERS.iter().map(|(k, _)| *k)
}
