//! Padding and cropping (ONNX `Pad`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, format_shape};

use super::value_input::{input_vector, known_len};
use super::{InferInput, LayerOp, TypeShape, normalize_axis, unknown_dim};

/// How `Pad` fills the new elements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PadMode {
    /// The constant value (input 2, else 0).
    #[default]
    Constant,
    /// The mirror image without repeating the edge (`[1,2,3]` → `…3,2,|1,2,3|,2,1…`),
    /// repeated for pads longer than the dim (numpy's `reflect`).
    Reflect,
    /// The edge element repeated.
    Edge,
    /// The dim repeated periodically (`[1,2,3]` → `…2,3,|1,2,3|,1,2…`).
    Wrap,
}

/// Pads the input (ONNX `Pad-19`). Inputs: data; `pads`, a 1-D integer tensor
/// `[b₁…b_n, e₁…e_n]` adding `bᵢ` elements before and `eᵢ` after axis `i`; optionally the
/// constant value, a scalar of the data's dtype (an empty tensor means 0); optionally `axes`,
/// a 1-D integer tensor naming the padded axes (default: all, in order). Negative pads crop:
/// as in onnxruntime, cropping happens first and the other modes pad relative to the cropped
/// tensor. Output dim `i` is `dᵢ + bᵢ + eᵢ`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Pad {
    /// The fill mode.
    pub mode: PadMode,
}

/// The `(begin, end)` pads of every dim of a rank-`rank` input, from the `pads` values and
/// the optional `axes` values.
pub fn resolve_pads(
    rank: usize,
    pads: &[i64],
    axes: Option<&[i64]>,
) -> Result<Vec<(i64, i64)>, String> {
    let all: Vec<i64> = (0..rank as i64).collect();
    let axes = axes.unwrap_or(&all);
    if pads.len() != 2 * axes.len() {
        return Err(format!(
            "pads has {} entries, expected 2 × {} axes",
            pads.len(),
            axes.len()
        ));
    }
    let mut out = vec![(0, 0); rank];
    let mut seen = vec![false; rank];
    for (i, &a) in axes.iter().enumerate() {
        let axis = normalize_axis(a, rank)?;
        if std::mem::replace(&mut seen[axis], true) {
            return Err(format!("axis {a} is repeated in {axes:?}"));
        }
        out[axis] = (pads[i], pads[axes.len() + i]);
    }
    Ok(out)
}

impl LayerOp for Pad {
    fn kind(&self) -> &'static str {
        "Pad"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 4)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1, 3]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if let Some(c) = inputs.get(2) {
            let elements = c
                .shape
                .iter()
                .map(DimExpr::as_const)
                .product::<Option<i64>>();
            if c.dtype != x.dtype || elements.is_some_and(|n| n > 1) {
                return Err(format!(
                    "the constant value must be a {} scalar, got {}{}",
                    x.dtype,
                    c.dtype,
                    format_shape(c.shape)
                ));
            }
        }
        let rank = x.shape.len();
        let pads = input_vector("the pads input of Pad", &inputs[1])?;
        let axes = match inputs.get(3) {
            Some(a) => match input_vector("the axes input of Pad", a)? {
                Some(v) => Some(Some(v)),
                None => {
                    known_len("the axes input of Pad", a)?;
                    None
                }
            },
            None => Some(None),
        };
        let (Some(pads), Some(axes)) = (pads, axes) else {
            known_len("the pads input of Pad", &inputs[1])?;
            return Ok(vec![TypeShape::new(x.dtype, vec![unknown_dim(); rank])]);
        };
        let pads = resolve_pads(rank, &pads, axes.as_deref())?;
        let shape = x
            .shape
            .iter()
            .zip(&pads)
            .map(|(d, &(b, e))| {
                let out = d + b
                    .checked_add(e)
                    .ok_or_else(|| format!("pads ({b}, {e}) overflow"))?;
                let cropped = d
                    .as_const()
                    .map(|d| d.saturating_add(b.min(0)).saturating_add(e.min(0)));
                if out.as_const().is_some_and(|n| n < 0) || cropped.is_some_and(|n| n < 0) {
                    Err(format!(
                        "pads ({b}, {e}) crop more than the {d} elements of a dim of {}",
                        format_shape(x.shape)
                    ))
                } else {
                    Ok(out)
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
