//! A channels-last convolution ([`Convolution::channels_last`]) on the CPU: the input and
//! residual moved channels first, the channels-first kernel, its output moved back. Engines
//! built for the CPU never hold one (the CPU backend prefers channels first); this runs those
//! of a GPU engine whose layer falls back to the host, and serves as their reference.

use torchtrt_core::layers::{
    ACTIVATION_INPUTS as ACTIVATIONS, Convolution, Transpose, channels_first_shapes, permuted,
    to_channels_first, to_channels_last,
};
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::kernels::{convolution, transpose};

const WHAT: &str = "Convolution";

struct ChannelsLast {
    inner: Box<dyn Kernel>,
    to_first: Box<dyn Kernel>,
    to_last: Box<dyn Kernel>,
    rank: usize,
}

pub(super) fn prepare(
    layer: &Convolution,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let rank = inputs[0].shape.len();
    let shapes = channels_first_shapes(inputs);
    let moved: Vec<InferInput<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|(x, s)| InferInput { shape: s, ..*x })
        .collect();
    let plain = Convolution {
        channels_last: false,
        ..layer.clone()
    };
    let transpose = |perm: Vec<usize>| transpose::prepare(&Transpose { perm }, &inputs[..1]);
    Ok(Box::new(ChannelsLast {
        inner: convolution::prepare(&plain, &moved)?,
        to_first: transpose(to_channels_first(rank))?,
        to_last: transpose(to_channels_last(rank))?,
        rank,
    }))
}

impl ChannelsLast {
    /// `t` (channels last) moved channels first.
    fn first(&self, t: &Tensor) -> Result<Tensor, String> {
        let shape = permuted(t.shape(), &to_channels_first(self.rank));
        let mut out = [Tensor::zeros(t.dtype(), &shape)];
        self.to_first.execute(&[t], &mut out)?;
        let [out] = out;
        Ok(out)
    }
}

impl Kernel for ChannelsLast {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let [y] = outputs else {
            return Err(format!("{WHAT}: one output, got {}", outputs.len()));
        };
        let activations = ACTIVATIONS.iter().filter_map(|&i| inputs.get(i));
        if inputs.is_empty() || activations.chain([&&*y]).any(|t| t.rank() != self.rank) {
            return Err(format!(
                "{WHAT}: x, the residual and y must have rank {}",
                self.rank
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
        self.to_last.execute(&[&out[0]], outputs)
    }
}
