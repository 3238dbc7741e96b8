//! A channels-last 1×1 convolution: each position's row of channels times the weights,
//! packed once as the constant right operand of [`PackedRhs`] (input × output channels),
//! with the bias, residual and activation applied as each register tile is stored. The
//! images' positions are the product's rows, so no plane size leaves lanes idle.

use torchtrt_core::layers::Convolution;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Kernel, Tensor};

use super::{Operands, WHAT, epilogue};
use crate::linalg::{Epilogue, Finish, PackedRhs};
use crate::tensor_access::{elems, elems_mut};

struct Pointwise {
    weights: PackedRhs,
    out_channels: usize,
    epilogue: Epilogue,
}

/// The kernel for `layer` (1×1, one group) with f32 weights `w` (`[M, C, 1, 1]`).
pub(super) fn prepare(layer: &Convolution, w: &Tensor) -> Result<Box<dyn Kernel>, String> {
    let (m, c) = (w.shape()[0], w.shape()[1]);
    let weights = PackedRhs::new(w.as_slice::<f32>().map_err(|e| e.to_string())?, c, m, 1, c)
        .ok_or_else(|| format!("{WHAT}: weights {w} do not pack"))?;
    Ok(Box::new(Pointwise {
        weights,
        out_channels: m,
        epilogue: epilogue(layer)?,
    }))
}

impl Kernel for Pointwise {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let channels = self.weights.depth();
        let op = Operands::new(inputs, outputs, self.out_channels, |x| {
            let mut shape = x.shape().to_vec();
            match shape.last_mut() {
                Some(c) if *c == channels && x.rank() >= 2 && x.dtype() == DType::F32 => {
                    *c = self.out_channels;
                    Ok(shape)
                }
                _ => Err(format!(
                    "{WHAT}: x {x} must be f32 channels last with {channels} channels"
                )),
            }
        })?;
        let finish = Finish {
            bias: op.bias,
            residual: op.residual,
            epilogue: self.epilogue,
        };
        let x = op.x;
        let rows = x.numel() / channels.max(1);
        self.weights.product(
            elems(x)?,
            channels,
            rows,
            finish,
            elems_mut(op.y)?,
            rayon::current_num_threads(),
        )
    }
}
