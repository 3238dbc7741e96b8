//! Repeating a tensor along each dim (ONNX `Tile`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, format_shape};

use super::value_input::{input_vector, known_len};
use super::{InferInput, LayerOp, TypeShape, unknown_dim};

/// Repeats the input `repeats[i]` times along each dim `i` (ONNX `Tile`); `repeats` is
/// input 1, a 1-D integer tensor with one non-negative entry per input dim.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Tile;

impl LayerOp for Tile {
    fn kind(&self) -> &'static str {
        "Tile"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (x, r) = (&inputs[0], &inputs[1]);
        let what = "the repeats input of Tile";
        let rank = x.shape.len();
        let bad_len = |n: usize| {
            format!(
                "{what} has {n} entries, but {} has {rank} dims",
                format_shape(x.shape)
            )
        };
        let shape = match input_vector(what, r)? {
            Some(repeats) => {
                if repeats.len() != rank {
                    return Err(bad_len(repeats.len()));
                }
                if let Some(n) = repeats.iter().find(|&&n| n < 0) {
                    return Err(format!("{what} has a negative entry {n}: {repeats:?}"));
                }
                x.shape
                    .iter()
                    .zip(&repeats)
                    .map(|(d, &n)| d * n)
                    .collect::<Vec<DimExpr>>()
            }
            None => {
                let n = known_len(what, r)?;
                if n != rank {
                    return Err(bad_len(n));
                }
                vec![unknown_dim(); rank]
            }
        };
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
