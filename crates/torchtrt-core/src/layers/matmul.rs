//! Batched matrix multiplication with numpy semantics.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape, broadcast_shapes, may_equal, require_float};

/// `op(A) · op(B)` where `op` optionally swaps the last two dims. Rank-1 operands are
/// promoted as in `numpy.matmul` (and the promoted dim removed from the result); leading
/// dims broadcast. An optional third input is a bias of B's column count, added along the
/// result's last axis (the builder fuses a following `Add` of a constant into MatMuls with
/// constant weights); an optional fourth, after a bias, is a residual of the result's type
/// added to it (the builder fuses a following `Add` into CUDA MatMuls).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MatMul {
    /// Transpose the last two dims of A first.
    pub transpose_a: bool,
    /// Transpose the last two dims of B first.
    pub transpose_b: bool,
}

impl LayerOp for MatMul {
    fn kind(&self) -> &'static str {
        "MatMul"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 4)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (a, b) = (&inputs[0], &inputs[1]);
        require_float("MatMul", a.dtype)?;
        if a.dtype != b.dtype {
            return Err(format!(
                "MatMul needs equal dtypes, got {} and {}",
                a.dtype, b.dtype
            ));
        }
        if a.shape.is_empty() || b.shape.is_empty() {
            return Err("MatMul operands must have rank ≥ 1".into());
        }
        let one = DimExpr::Const(1);
        let (am, ak) = match a.shape.len() {
            1 => (one.clone(), a.shape[0].clone()),
            n if self.transpose_a => (a.shape[n - 1].clone(), a.shape[n - 2].clone()),
            n => (a.shape[n - 2].clone(), a.shape[n - 1].clone()),
        };
        let (bk, bn) = match b.shape.len() {
            1 => (b.shape[0].clone(), one.clone()),
            n if self.transpose_b => (b.shape[n - 1].clone(), b.shape[n - 2].clone()),
            n => (b.shape[n - 2].clone(), b.shape[n - 1].clone()),
        };
        if let (Some(x), Some(y)) = (ak.as_const(), bk.as_const())
            && x != y
        {
            return Err(format!(
                "MatMul inner dimensions differ: {} · {} ({x} vs {y})",
                format_shape(a.shape),
                format_shape(b.shape)
            ));
        }
        let batch_a = &a.shape[..a.shape.len().saturating_sub(2)];
        let batch_b = &b.shape[..b.shape.len().saturating_sub(2)];
        let mut shape = broadcast_shapes(batch_a, batch_b)?;
        if a.shape.len() > 1 {
            shape.push(am);
        }
        if let Some(bias) = inputs.get(2) {
            let fits = b.shape.len() > 1
                && bias.dtype == a.dtype
                && bias.shape.len() == 1
                && (bias.shape[0] == bn || bias.shape[0].as_const().is_none());
            if !fits {
                return Err(format!(
                    "MatMul bias {}{} does not fit the {} columns of {}",
                    bias.dtype,
                    format_shape(bias.shape),
                    bn,
                    format_shape(b.shape)
                ));
            }
        }
        if b.shape.len() > 1 {
            shape.push(bn);
        }
        if let Some(r) = inputs.get(3)
            && (r.dtype != a.dtype || !may_equal(r.shape, &shape))
        {
            return Err(format!(
                "MatMul residual {}{} is not the result's {}{}",
                r.dtype,
                format_shape(r.shape),
                a.dtype,
                format_shape(&shape)
            ));
        }
        Ok(vec![TypeShape::new(a.dtype, shape)])
    }
}

#[cfg(test)]
mod tests {
    use torchtrt_plugin_api::DType;

    use super::*;

    fn input(shape: &[DimExpr]) -> InferInput<'_> {
        InferInput {
            dtype: DType::F32,
            shape,
            value: None,
        }
    }

    fn linear_with_residual(a: &[DimExpr], residual: &[DimExpr]) -> Result<Vec<TypeShape>, String> {
        let (w, bias) = ([DimExpr::Const(8), DimExpr::Const(4)], [DimExpr::Const(4)]);
        MatMul::default().infer(&[input(a), input(&w), input(&bias), input(residual)])
    }

    #[test]
    fn a_residual_named_otherwise_may_still_be_the_result() {
        let a = [
            DimExpr::sym("layer#0.0"),
            DimExpr::sym("layer#0.1"),
            DimExpr::Const(8),
        ];
        let residual = [
            DimExpr::sym("batch"),
            DimExpr::sym("seq"),
            DimExpr::Const(4),
        ];
        let out = linear_with_residual(&a, &residual).unwrap();
        assert_eq!(
            out[0].shape,
            [a[0].clone(), a[1].clone(), DimExpr::Const(4)]
        );
    }

    #[test]
    fn a_residual_that_cannot_be_the_result_is_refused() {
        let a = [DimExpr::sym("batch"), DimExpr::Const(3), DimExpr::Const(8)];
        for residual in [
            vec![DimExpr::sym("batch"), DimExpr::Const(5), DimExpr::Const(4)],
            vec![DimExpr::sym("batch"), DimExpr::Const(3), DimExpr::Const(8)],
            vec![DimExpr::Const(3), DimExpr::Const(4)],
        ] {
            let err = linear_with_residual(&a, &residual).unwrap_err();
            assert!(err.contains("MatMul residual"), "{err}");
        }
    }
}
