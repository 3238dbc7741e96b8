//! Moving blocks of channels into spatial positions.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::format_shape;

use super::{InferInput, LayerOp, TypeShape};

/// How [`DepthToSpace`] splits the channel dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepthToSpaceMode {
    /// Depth-column-row: channel `(by·b + bx)·C' + c` (ONNX default).
    Dcr,
    /// Column-row-depth: channel `c·b² + by·b + bx`.
    Crd,
}

/// Rearranges `x [N, C, H, W]` into `[N, C/b², H·b, W·b]` (ONNX `DepthToSpace`): output
/// `(n, c, h·b + by, w·b + bx)` is input `(n, channel(c, by, bx), h, w)`, with the channel
/// as `mode` says. Any dtype.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DepthToSpace {
    /// The block edge `b`, at least 1.
    pub blocksize: i64,
    /// The channel order.
    pub mode: DepthToSpaceMode,
}

impl LayerOp for DepthToSpace {
    fn kind(&self) -> &'static str {
        "DepthToSpace"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let b = self.blocksize;
        let bb = check_block(b, x.shape.len())?;
        let [n, c, h, w] = x.shape else {
            return Err(format!(
                "DepthToSpace needs [N,C,H,W], got {}",
                format_shape(x.shape)
            ));
        };
        if let Some(c) = c.as_const()
            && c % bb != 0
        {
            return Err(format!(
                "{c} channels are not a multiple of blocksize² = {bb}"
            ));
        }
        let shape = vec![n.clone(), c.clone().floor_div(bb), h * b, w * b];
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}

/// Checks a blocksize and the input rank; returns `b²`.
pub(super) fn check_block(b: i64, rank: usize) -> Result<i64, String> {
    if b < 1 {
        return Err(format!("blocksize {b} must be positive"));
    }
    if rank != 4 {
        return Err(format!("the input must have rank 4, got {rank}"));
    }
    b.checked_mul(b)
        .ok_or_else(|| format!("blocksize {b} is too large"))
}
