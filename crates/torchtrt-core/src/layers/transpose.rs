//! Axis permutation.

use serde::{Deserialize, Serialize};

use super::{InferInput, LayerOp, TypeShape};

/// Output dim `i` is input dim `perm[i]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Transpose {
    /// The permutation.
    pub perm: Vec<usize>,
}

impl LayerOp for Transpose {
    fn kind(&self) -> &'static str {
        "Transpose"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let mut seen = vec![false; x.shape.len()];
        for &p in &self.perm {
            match seen.get_mut(p) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(format!(
                        "{:?} is not a permutation of rank {}",
                        self.perm,
                        x.shape.len()
                    ));
                }
            }
        }
        if self.perm.len() != x.shape.len() {
            return Err(format!(
                "{:?} is not a permutation of rank {}",
                self.perm,
                x.shape.len()
            ));
        }
        let shape = self.perm.iter().map(|&p| x.shape[p].clone()).collect();
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
