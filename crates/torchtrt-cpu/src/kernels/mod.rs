//! One module per layer kind, and the table that maps a [`LayerKind`] to its kernel.

mod activation;
mod arg_reduce;
mod attention;
mod cast;
mod concat;
mod constant_of_shape;
mod conv_channels;
mod conv_direct;
mod conv_grid;
mod conv_nhwc;
mod conv_packed;
mod conv_phases;
mod conv_regions;
mod conv_taps;
mod conv_winograd;
mod convolution;
mod copy;
mod cum_sum;
mod deconvolution;
mod depth_to_space;
mod depthwise_lanes;
mod depthwise_octets;
mod dequantize;
mod einsum;
mod einsum_matmul;
mod element_index;
mod elementwise;
mod elementwise_ops;
mod expand;
mod fill;
mod gather;
mod gather_elements;
mod gather_nd;
mod map;
mod matmul;
mod max_pool3;
mod max_pool_inside;
mod non_zero;
mod normalization;
mod pad;
mod pooling;
mod quantize;
mod quantized_conv;
mod quantized_matmul;
mod range;
mod reduce;
mod reshape;
mod rotary_embedding;
mod scalar_arg;
mod scatter_elements;
mod scatter_nd;
mod select;
mod shape;
mod size;
mod slice;
mod softmax;
mod space_to_depth;
mod tap_rows;
mod tile;
mod top_k;
mod transpose;
mod transpose_tile;
mod trilu;
mod unary;
mod value_test;
mod winograd_f4;

use torchtrt_core::{InferInput, Kernel, LayerKind};

pub(crate) use conv_nhwc::channels_last;

/// Checks `inputs` against the layer's arity and shape rule, then builds its kernel.
pub(crate) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let op = layer.op();
    if let LayerKind::Constant(_) | LayerKind::Plugin(_) = layer {
        return Err(format!(
            "{} layers are executed by the runtime itself, not by a backend kernel",
            op.kind()
        ));
    }
    let (min, max) = op.arity();
    if inputs.len() < min || inputs.len() > max {
        return Err(format!(
            "{} takes {min} to {max} inputs, got {}",
            op.kind(),
            inputs.len()
        ));
    }
    op.infer(inputs)?;
    match layer {
        LayerKind::Elementwise(l) => elementwise::prepare(l, inputs),
        LayerKind::Unary(l) => unary::prepare(l, inputs),
        LayerKind::Activation(l) => activation::prepare(l, inputs),
        LayerKind::MatMul(l) => matmul::prepare(l, inputs),
        LayerKind::Convolution(l) if l.channels_last => conv_nhwc::prepare(l, inputs),
        LayerKind::Convolution(l) => convolution::prepare(l, inputs),
        LayerKind::Pooling(l) => pooling::prepare(l, inputs),
        LayerKind::Reduce(l) => reduce::prepare(l, inputs),
        LayerKind::Softmax(l) => softmax::prepare(l, inputs),
        LayerKind::Reshape(l) => reshape::prepare(l, inputs),
        LayerKind::Transpose(l) => transpose::prepare(l, inputs),
        LayerKind::Concat(l) => concat::prepare(l, inputs),
        LayerKind::Slice(l) => slice::prepare(l, inputs),
        LayerKind::Gather(l) => gather::prepare(l, inputs),
        LayerKind::Cast(l) => cast::prepare(l, inputs),
        LayerKind::Deconvolution(l) => deconvolution::prepare(l, inputs),
        LayerKind::Normalization(l) => normalization::prepare(l, inputs),
        LayerKind::ArgReduce(l) => arg_reduce::prepare(l, inputs),
        LayerKind::CumSum(l) => cum_sum::prepare(l, inputs),
        LayerKind::TopK(l) => top_k::prepare(l, inputs),
        LayerKind::DepthToSpace(l) => depth_to_space::prepare(l, inputs),
        LayerKind::SpaceToDepth(l) => space_to_depth::prepare(l, inputs),
        LayerKind::Trilu(l) => trilu::prepare(l, inputs),
        LayerKind::Einsum(l) => einsum::prepare(l, inputs),
        LayerKind::Shape(l) => shape::prepare(l, inputs),
        LayerKind::Size(l) => size::prepare(l, inputs),
        LayerKind::ConstantOfShape(l) => constant_of_shape::prepare(l, inputs),
        LayerKind::Flatten(_) | LayerKind::Squeeze(_) | LayerKind::Unsqueeze(_) => {
            Ok(reshape::copy_kernel(op.kind(), inputs))
        }
        LayerKind::Expand(l) => expand::prepare(l, inputs),
        LayerKind::Tile(l) => tile::prepare(l, inputs),
        LayerKind::Pad(l) => pad::prepare(l, inputs),
        LayerKind::Range(l) => range::prepare(l, inputs),
        LayerKind::Select(l) => select::prepare(l, inputs),
        LayerKind::GatherElements(l) => gather_elements::prepare(l, inputs),
        LayerKind::ScatterElements(l) => scatter_elements::prepare(l, inputs),
        LayerKind::Fused(l) => l.chain_kernel(inputs, prepare),
        LayerKind::GatherNd(l) => gather_nd::prepare(l, inputs),
        LayerKind::ScatterNd(l) => scatter_nd::prepare(l, inputs),
        LayerKind::NonZero(l) => non_zero::prepare(l, inputs),
        LayerKind::ValueTest(l) => value_test::prepare(l, inputs),
        LayerKind::RmsNormalization(l) => normalization::prepare_rms(l, inputs),
        LayerKind::RotaryEmbedding(l) => rotary_embedding::prepare(l, inputs),
        LayerKind::Attention(l) => attention::prepare(l, inputs),
        LayerKind::Quantize(l) => quantize::prepare(l, inputs),
        LayerKind::Dequantize(l) => dequantize::prepare(l, inputs),
        LayerKind::QuantizedConvolution(l) => quantized_conv::prepare(l, inputs),
        LayerKind::QuantizedMatMul(l) => quantized_matmul::prepare(l, inputs),
        LayerKind::Constant(_) | LayerKind::Plugin(_) => Err(format!(
            "{} layers are executed by the runtime itself",
            op.kind()
        )),
    }
}
