//! Folding a constant per-column scale into the linear layer before it: `(a·W + b) · s`
//! becomes `a·(W·s) + b·s`, and `(a·W + b) ÷ s` becomes `a·(W÷s) + b÷s`, where `W` is a
//! constant matrix and `s` holds one value per output column or one for all. ConvNeXt's
//! layer scale (`γ · mlp(x)` in every block) is such a `Mul`: after the fold it costs
//! nothing, and the block's residual `Add` reads the product itself.

use torchtrt_plugin_api::{DType, Element};

use super::Work;
use super::fuse::{along_axis, is_linear, move_matmul, sole_producer};
use crate::error::Result;
use crate::layers::{ElementwiseOp, LayerKind, TypeShape};
use crate::network::{Layer, TensorId};
use crate::tensor::Tensor;

/// Folds the element-wise `layer` (a `Mul`, or a `Div` with the product on the left) into
/// the MatMul producing one of its inputs, as it is added, when [`scaled_product`] finds
/// one; returns whether it did (the layer is then not emitted and the MatMul takes its
/// place, reading the new constants).
pub(crate) fn fold_scale_into_matmul(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    uses: &[usize],
) -> Result<bool> {
    let producer = |t: TensorId| sole_producer(work, t, uses);
    let Some(scaled) = scaled_product(work, kind, inputs, &types[0], producer)? else {
        return Ok(false);
    };
    move_matmul(work, scaled.pos, layer, types, |w, mm| {
        scaled.apply(mm, |name, v| w.emit_constant(name, v));
    })
}

/// A linear layer's weights and bias with a scale folded in.
pub(super) struct Scaled {
    /// The position of the MatMul.
    pub pos: usize,
    /// Its weights times the scale of their column.
    pub weights: Tensor,
    /// Its bias times the scale, where it has one.
    pub bias: Option<Tensor>,
}

impl Scaled {
    /// Makes the MatMul `mm` read the scaled weights and bias, as constants that
    /// `constant` makes from their names and values (the weights first).
    pub fn apply(self, mm: &mut Layer, mut constant: impl FnMut(String, Tensor) -> TensorId) {
        mm.inputs[1] = constant(format!("{}/scaled", mm.name), self.weights);
        if let Some(b) = self.bias {
            mm.inputs[2] = constant(format!("{}/scaled_bias", mm.name), b);
        }
    }
}

/// The MatMul that an element-wise layer of `kind` over `inputs` with an output of type
/// `ty` scales, and its weights and bias with that scale folded in: the layer is a `Mul`
/// (or a `Div` with the product on the left) by a constant holding one value per output
/// column or one for all, and `producer` gives the position of the MatMul producing its
/// other input, whose product nothing else reads. The MatMul must be one a bias could ride
/// on (a constant 2-D `W`, `a` not transposed), of the output's type, carry no residual,
/// and hold weights that are not quantized; the scale must be finite.
pub(super) fn scaled_product(
    work: &Work,
    kind: &LayerKind,
    inputs: &[TensorId],
    ty: &TypeShape,
    producer: impl Fn(TensorId) -> Option<usize>,
) -> Result<Option<Scaled>> {
    let LayerKind::Elementwise(e) = kind else {
        return Ok(None);
    };
    let sides: &[(usize, usize)] = match e.op {
        ElementwiseOp::Mul => &[(0, 1), (1, 0)],
        ElementwiseOp::Div => &[(0, 1)],
        _ => return Ok(None),
    };
    let dtype = ty.dtype;
    if inputs.len() != 2 || !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Ok(None);
    }
    for &(product_side, scale_side) in sides {
        let (m, s) = (inputs[product_side], inputs[scale_side]);
        let Some(factor) = work.tensors[s.index()].value.clone() else {
            continue;
        };
        let Some(pos) = producer(m).filter(|&p| is_linear(work, p, dtype, |_, _| true)) else {
            continue;
        };
        let mm = &work.layers[pos];
        let LayerKind::MatMul(product) = &mm.kind else {
            continue;
        };
        if !(2..=3).contains(&mm.inputs.len())
            || work.ty(m) != ty
            || mm.inputs[1..].iter().any(|&t| work.ty(t).dtype != dtype)
            || work.tensors[mm.inputs[1].index()].quantized.is_some()
        {
            continue;
        }
        let values = |t: TensorId| work.tensors[t.index()].value.clone();
        let (Some(w), bias) = (values(mm.inputs[1]), mm.inputs.get(2).map(|&b| values(b))) else {
            continue;
        };
        let bias = match bias {
            Some(Some(b)) => Some(b),
            Some(None) => continue,
            None => None,
        };
        let n = w.shape()[usize::from(!product.transpose_b)];
        let Some(mut scale) = per_column(&factor, dtype, ty.shape.len(), n) else {
            continue;
        };
        if e.op == ElementwiseOp::Div {
            scale.iter_mut().for_each(|v| *v = 1.0 / *v);
        }
        if !scale.iter().all(|v| v.is_finite()) {
            continue;
        }
        let column = |i: usize| match product.transpose_b {
            true => i / w.shape()[1],
            false => i % n,
        };
        let scaled_w = scaled(&w, |i| scale[column(i)])?;
        let scaled_b = match &bias {
            Some(b) if b.numel() == n => Some(scaled(b, |i| scale[i])?),
            Some(_) => continue,
            None => None,
        };
        return Ok(Some(Scaled {
            pos,
            weights: scaled_w,
            bias: scaled_b,
        }));
    }
    Ok(None)
}

/// The values of a constant of `dtype` that broadcasts along the last axis of a rank-`rank`
/// output with `n` columns and is 1 everywhere else, expanded to `n` values.
fn per_column(t: &Tensor, dtype: DType, rank: usize, n: usize) -> Option<Vec<f64>> {
    if t.dtype() != dtype {
        return None;
    }
    along_axis(t, rank, rank.checked_sub(1)?, n)
}

/// The float tensor `t` with element `i` multiplied by `factor(i)` (in f64, rounded once
/// to `t`'s dtype).
fn scaled(t: &Tensor, factor: impl Fn(usize) -> f64) -> Result<Tensor> {
    match t.dtype() {
        DType::F16 => rescaled(t, half::f16::to_f64, half::f16::from_f64, factor),
        DType::BF16 => rescaled(t, half::bf16::to_f64, half::bf16::from_f64, factor),
        _ => rescaled(t, f64::from, |v| v as f32, factor),
    }
}

/// [`scaled`] for elements of type `T`, read and written through `to` and `from`.
fn rescaled<T: Element + Copy>(
    t: &Tensor,
    to: impl Fn(T) -> f64,
    from: impl Fn(f64) -> T,
    factor: impl Fn(usize) -> f64,
) -> Result<Tensor> {
    let values = t.as_slice::<T>()?.iter().enumerate();
    Tensor::from_vec(
        t.shape(),
        values.map(|(i, &x)| from(to(x) * factor(i))).collect(),
    )
}
