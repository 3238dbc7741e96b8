//! A channels-last convolution ([`Convolution::channels_last`], and the 8-bit one's) on the
//! CPU: the input and residual moved channels first, the channels-first kernel, its output
//! moved back. Engines built for the CPU hold one only where the CPU has no native
//! channels-last kernel for the layer; this runs those and the layers of a GPU engine that
//! fall back to the host, and serves as their reference.

use torchtrt_core::layers::{
    ACTIVATION_INPUTS as ACTIVATIONS, Convolution, Transpose, channels_first_shapes, permuted,
    to_channels_first, to_channels_last,
};
use torchtrt_core::plugin_api::shape_of_sizes;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::kernels::{convolution, transpose};

struct ChannelsLast {
    what: &'static str,
    inner: Box<dyn Kernel>,
    rank: usize,
}

pub(super) fn prepare(
    layer: &Convolution,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let plain = Convolution {
        channels_last: false,
        ..layer.clone()
    };
    around("Convolution", inputs, |moved| {
        convolution::prepare(&plain, moved)
    })
}

/// The channels-last layer `what` over `inputs` (x, weights, bias, residual): the kernel
/// `inner` prepares for the inputs moved channels first, between transposes.
pub(crate) fn around(
    what: &'static str,
    inputs: &[InferInput<'_>],
    inner: impl FnOnce(&[InferInput<'_>]) -> Result<Box<dyn Kernel>, String>,
) -> Result<Box<dyn Kernel>, String> {
    let rank = inputs.first().map_or(0, |x| x.shape.len());
    if rank < 3 {
        return Err(format!(
            "{what}: a channels-last input needs rank 3 or more"
        ));
    }
    let shapes = channels_first_shapes(inputs);
    let moved: Vec<InferInput<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|(x, s)| InferInput { shape: s, ..*x })
        .collect();
    Ok(Box::new(ChannelsLast {
        what,
        inner: inner(&moved)?,
        rank,
    }))
}

/// `t` with its dims permuted by `perm` into `out` (each tensor through a transpose of its
/// own dtype: an 8-bit layer reads bytes and writes floats).
fn permute(t: &Tensor, perm: Vec<usize>, out: &mut [Tensor]) -> Result<(), String> {
    let dims = shape_of_sizes(t.shape());
    let x = InferInput {
        dtype: t.dtype(),
        shape: &dims,
        value: None,
    };
    transpose::prepare(&Transpose { perm }, &[x])?.execute(&[t], out)
}

impl ChannelsLast {
    /// `t` (channels last) moved channels first.
    fn first(&self, t: &Tensor) -> Result<Tensor, String> {
        let shape = permuted(t.shape(), &to_channels_first(self.rank));
        let mut out = [Tensor::zeros(t.dtype(), &shape)];
        permute(t, to_channels_first(self.rank), &mut out)?;
        let [out] = out;
        Ok(out)
    }
}

impl Kernel for ChannelsLast {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let [y] = outputs else {
            return Err(format!("{}: one output, got {}", self.what, outputs.len()));
        };
        let activations = ACTIVATIONS.iter().filter_map(|&i| inputs.get(i));
        if inputs.is_empty() || activations.chain([&&*y]).any(|t| t.rank() != self.rank) {
            return Err(format!(
                "{}: x, the residual and y must have rank {}",
                self.what, self.rank
            ));
        }
        let moved: Vec<Option<Tensor>> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| ACTIVATIONS.contains(&i).then(|| self.first(t)).transpose())
            .collect::<Result<_, _>>()?;
        let args: Vec<&Tensor> = inputs
            .iter()
            .zip(&moved)
            .map(|(t, m)| m.as_ref().unwrap_or(t))
            .collect();
        let shape = permuted(y.shape(), &to_channels_first(self.rank));
        let mut out = [Tensor::zeros(y.dtype(), &shape)];
        self.inner.execute(&args, &mut out)?;
        permute(&out[0], to_channels_last(self.rank), outputs)
    }
}
