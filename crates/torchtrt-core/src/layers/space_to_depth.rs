//! Moving spatial blocks into channels.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::format_shape;

use super::depth_to_space::check_block;
use super::{InferInput, LayerOp, TypeShape};

/// Rearranges `x [N, C, H, W]` into `[N, C·b², H/b, W/b]` (ONNX `SpaceToDepth`), the
/// inverse of DCR [`DepthToSpace`](super::DepthToSpace): output `(n, (by·b + bx)·C + c, h, w)` is input
/// `(n, c, h·b + by, w·b + bx)`. Any dtype.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpaceToDepth {
    /// The block edge `b`, at least 1; divides H and W.
    pub blocksize: i64,
}

impl LayerOp for SpaceToDepth {
    fn kind(&self) -> &'static str {
        "SpaceToDepth"
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
                "SpaceToDepth needs [N,C,H,W], got {}",
                format_shape(x.shape)
            ));
        };
        for (name, d) in [("height", h), ("width", w)] {
            if let Some(v) = d.as_const()
                && v % b != 0
            {
                return Err(format!("{name} {v} is not a multiple of blocksize {b}"));
            }
        }
        let shape = vec![
            n.clone(),
            c * bb,
            h.clone().floor_div(b),
            w.clone().floor_div(b),
        ];
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
