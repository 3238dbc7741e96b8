//! One module per layer kind, and the table that maps a [`LayerKind`] to its kernel.

mod activation;
mod cast;
mod concat;
mod convolution;
mod copy;
mod elementwise;
mod elementwise_ops;
mod gather;
mod map;
mod matmul;
mod pooling;
mod reduce;
mod reduce_int;
mod reshape;
mod slice;
mod softmax;
mod transpose;
mod unary;

use torchtrt_core::{InferInput, Kernel, LayerKind};

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
        LayerKind::Constant(_) | LayerKind::Plugin(_) => Err(format!(
            "{} layers are executed by the runtime itself",
            op.kind()
        )),
    }
}
