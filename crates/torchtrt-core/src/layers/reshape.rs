//! Reshape by fixed dims or by a shape tensor.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, ShapeExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape};

/// Gives the input a new shape with the same element count. Dims follow ONNX `Reshape`:
/// `0` copies the input's dim (unless `allow_zero`), one `-1` is inferred. With a second
/// input (an integer shape tensor) its values replace `dims`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reshape {
    /// Target dims, used when there is no shape input.
    pub dims: Vec<i64>,
    /// `0` means a zero-sized dim rather than "copy".
    pub allow_zero: bool,
}

impl Reshape {
    /// A reshape to fixed dims.
    pub fn new(dims: Vec<i64>) -> Reshape {
        Reshape {
            dims,
            allow_zero: false,
        }
    }
}

/// Resolves ONNX reshape dims against an input shape.
pub fn resolve_reshape(
    input: &[DimExpr],
    dims: &[i64],
    allow_zero: bool,
) -> Result<ShapeExpr, String> {
    let mut out = Vec::with_capacity(dims.len());
    let mut infer_at = None;
    for (i, &d) in dims.iter().enumerate() {
        match d {
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                out.push(DimExpr::Const(1));
            }
            -1 => return Err("reshape dims contain more than one -1".into()),
            0 if !allow_zero => out.push(input.get(i).cloned().ok_or_else(|| {
                format!(
                    "reshape dim {i} is 0 but the input has rank {}",
                    input.len()
                )
            })?),
            d if d < 0 => return Err(format!("reshape dim {d} is negative")),
            d => out.push(DimExpr::Const(d)),
        }
    }
    let total = input.iter().fold(DimExpr::Const(1), |a, d| a * d.clone());
    let known = out.iter().fold(DimExpr::Const(1), |a, d| a * d.clone());
    if let Some(i) = infer_at {
        if known.as_const() == Some(0) {
            return Err("cannot infer a -1 dim next to a zero-sized dim".into());
        }
        out[i] = total.clone().floor_div(known.clone());
        if let (Some(t), Some(k)) = (total.as_const(), known.as_const())
            && t % k != 0
        {
            return Err(format!(
                "cannot reshape {} ({t} elements) into {dims:?}",
                format_shape(input)
            ));
        }
    } else if let (Some(t), Some(k)) = (total.as_const(), known.as_const())
        && t != k
    {
        return Err(format!(
            "cannot reshape {} ({t} elements) into {dims:?} ({k} elements)",
            format_shape(input)
        ));
    }
    Ok(out)
}

impl LayerOp for Reshape {
    fn kind(&self) -> &'static str {
        "Reshape"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let dims = match inputs.get(1) {
            None => self.dims.clone(),
            Some(s) => {
                let Some(v) = s.value else {
                    let rank = match s.shape {
                        [n] => n
                            .as_const()
                            .ok_or("the shape input of Reshape needs a known length")?,
                        _ => return Err("the shape input must be 1-D".into()),
                    };
                    let shape = (0..rank).map(|_| super::unknown_dim()).collect();
                    return Ok(vec![TypeShape::new(x.dtype, shape)]);
                };
                if v.rank() != 1 {
                    return Err(format!("the shape input must be 1-D, got {v}"));
                }
                v.to_i64_vec()
                    .ok_or_else(|| format!("the shape input must be integer, got {v}"))?
            }
        };
        let shape = resolve_reshape(x.shape, &dims, self.allow_zero)?;
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
