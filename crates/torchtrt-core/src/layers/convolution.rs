//! N-d convolution (1-D to 3-D) with groups and dilation.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, format_shape};

use super::{ActivationKind, InferInput, LayerOp, TypeShape, may_equal, require_float};

/// Cross-correlation of `x [N, C, *S]` with `w [M, C/groups, *K]`, plus an optional bias
/// `[M]` as third input (ONNX `Conv`). A fourth input, a residual of the output's shape, is
/// added to the result before the activation: `act(conv(x, w) + b + r)`. The builder makes
/// that form on the CPU by fusing a residual `Add` (ResNet's shortcut) into the convolution.
/// With [`Convolution::channels_last`], `x`, the output and the residual hold their channels
/// last (`[N, *S, C]`); the weights keep `[M, C/groups, *K]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Convolution {
    /// Stride per spatial dim.
    pub strides: Vec<i64>,
    /// Padding at the start of each spatial dim.
    pub pads_begin: Vec<i64>,
    /// Padding at the end of each spatial dim.
    pub pads_end: Vec<i64>,
    /// Dilation per spatial dim.
    pub dilations: Vec<i64>,
    /// Number of groups.
    pub groups: i64,
    /// An activation applied to the output as it is written (the builder fuses a following
    /// `Relu`, `LeakyRelu` or `Clip` layer into the convolution on the CPU).
    #[serde(default)]
    pub activation: Option<ActivationKind>,
    /// The input, output and residual are channels last, `[N, *S, C]` (NHWC for 2-D): the
    /// builder's layout pass sets it where the backend runs the convolution faster so.
    #[serde(default)]
    pub channels_last: bool,
}

/// The permutation taking a channels-first tensor of `rank` dims to channels last.
pub fn to_channels_last(rank: usize) -> Vec<usize> {
    let mut perm = vec![0];
    perm.extend(2..rank);
    perm.extend((rank > 1).then_some(1));
    perm
}

/// The permutation taking a channels-last tensor of `rank` dims back to channels first.
pub fn to_channels_first(rank: usize) -> Vec<usize> {
    let mut perm = vec![0];
    perm.extend((rank > 1).then_some(rank - 1));
    perm.extend(1..rank.saturating_sub(1));
    perm
}

/// `shape` permuted by `perm` (`perm` indexes `shape`).
pub fn permuted<T: Clone>(shape: &[T], perm: &[usize]) -> Vec<T> {
    perm.iter().map(|&p| shape[p].clone()).collect()
}

/// The inputs of a convolution that share its output's layout: `x` and the residual.
pub const ACTIVATION_INPUTS: [usize; 2] = [0, 3];

/// The shapes of a channels-last convolution's `inputs` as its channels-first twin takes
/// them: `x` and the residual moved channels first, the weights and bias as they are.
pub fn channels_first_shapes(inputs: &[InferInput<'_>]) -> Vec<Vec<DimExpr>> {
    inputs
        .iter()
        .enumerate()
        .map(|(i, x)| match ACTIVATION_INPUTS.contains(&i) {
            true => permuted(x.shape, &to_channels_first(x.shape.len())),
            false => x.shape.to_vec(),
        })
        .collect()
}

impl Convolution {
    /// Stride 1, no padding, dilation 1, one group, for `spatial` dims.
    pub fn new(spatial: usize) -> Convolution {
        Convolution {
            strides: vec![1; spatial],
            pads_begin: vec![0; spatial],
            pads_end: vec![0; spatial],
            dilations: vec![1; spatial],
            groups: 1,
            activation: None,
            channels_last: false,
        }
    }
}

/// Output size of a sliding window: `(in + pb + pe − d·(k−1) − 1) / s + 1`.
pub(crate) fn window_out(
    input: &DimExpr,
    k: i64,
    s: i64,
    d: i64,
    pb: i64,
    pe: i64,
    ceil: bool,
) -> DimExpr {
    let span = input.clone() + (pb + pe - d * (k - 1) - 1);
    let q = if ceil {
        span.ceil_div(s)
    } else {
        span.floor_div(s)
    };
    q + 1
}

pub(crate) fn check_window_params(
    spatial: usize,
    params: &[(&str, &[i64])],
    min: i64,
) -> Result<(), String> {
    for (name, v) in params {
        if v.len() != spatial {
            return Err(format!(
                "{name} has {} values for {spatial} spatial dims",
                v.len()
            ));
        }
        if let Some(x) = v.iter().find(|&&x| x < min) {
            return Err(format!("{name} value {x} is below {min}"));
        }
    }
    Ok(())
}

/// Checks the operands of a `kind` (convolution or deconvolution) layer — float `x`
/// `[N, C, 1–3 spatial dims]`, `w` of the same rank, one dtype for all — and returns the
/// number of spatial dims.
pub(crate) fn check_operands(kind: &str, inputs: &[InferInput<'_>]) -> Result<usize, String> {
    let (x, w) = (&inputs[0], &inputs[1]);
    require_float(kind, x.dtype)?;
    if inputs.iter().any(|i| i.dtype != x.dtype) {
        return Err(format!("{kind} inputs must share one dtype"));
    }
    let spatial = x.shape.len().saturating_sub(2);
    if !(1..=3).contains(&spatial) || w.shape.len() != x.shape.len() {
        return Err(format!(
            "{kind} needs x [N,C,1-3 spatial dims] and w of the same rank, got {} and {}",
            format_shape(x.shape),
            format_shape(w.shape)
        ));
    }
    Ok(spatial)
}

impl LayerOp for Convolution {
    fn kind(&self) -> &'static str {
        "Convolution"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 4)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        if self.channels_last {
            return self.infer_channels_last(inputs);
        }
        let (x, w) = (&inputs[0], &inputs[1]);
        let spatial = check_operands("Convolution", inputs)?;
        let residual = inputs.get(3).map(|r| r.shape);
        check_window_params(
            spatial,
            &[("strides", &self.strides), ("dilations", &self.dilations)],
            1,
        )?;
        check_window_params(
            spatial,
            &[
                ("pads_begin", &self.pads_begin),
                ("pads_end", &self.pads_end),
            ],
            0,
        )?;
        let kernel: Vec<i64> = w.shape[2..]
            .iter()
            .map(|d| d.as_const().ok_or("Convolution weights need a known shape"))
            .collect::<Result<_, _>>()?;
        let g = self.groups;
        let m = w.shape[0]
            .as_const()
            .ok_or("Convolution weights need a known shape")?;
        let cg = w.shape[1]
            .as_const()
            .ok_or("Convolution weights need a known shape")?;
        if g < 1 || m % g != 0 {
            return Err(format!("groups {g} must divide the {m} output channels"));
        }
        if let Some(c) = x.shape[1].as_const()
            && c != cg * g
        {
            return Err(format!(
                "input has {c} channels, weights expect {cg}×{g} groups = {}",
                cg * g
            ));
        }
        if let Some(b) = inputs.get(2)
            && (b.shape.len() != 1 || b.shape[0].as_const().is_some_and(|n| n != m))
        {
            return Err(format!("bias must be [{m}], got {}", format_shape(b.shape)));
        }
        let mut shape = vec![x.shape[0].clone(), DimExpr::Const(m)];
        for (i, (input, &k)) in x.shape[2..].iter().zip(&kernel).enumerate() {
            let o = window_out(
                input,
                k,
                self.strides[i],
                self.dilations[i],
                self.pads_begin[i],
                self.pads_end[i],
                false,
            );
            if o.as_const().is_some_and(|v| v < 1) {
                return Err(format!("spatial dim {i} of the output would be {o}"));
            }
            shape.push(o);
        }
        if let Some(r) = residual
            && !may_equal(r, &shape)
        {
            return Err(format!(
                "residual must have the output's shape {}, got {}",
                format_shape(&shape),
                format_shape(r)
            ));
        }
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}

impl Convolution {
    /// [`LayerOp::infer`] of a channels-last convolution: that of the channels-first one on
    /// the permuted input and residual, its output permuted back.
    fn infer_channels_last(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let rank = inputs[0].shape.len();
        if rank < 3 {
            return Err(format!(
                "a channels-last Convolution needs x [N, 1-3 spatial dims, C], got {}",
                format_shape(inputs[0].shape)
            ));
        }
        let shapes = channels_first_shapes(inputs);
        let moved: Vec<InferInput<'_>> = inputs
            .iter()
            .zip(&shapes)
            .map(|(x, s)| InferInput { shape: s, ..*x })
            .collect();
        let plain = Convolution {
            channels_last: false,
            ..self.clone()
        };
        let mut out = plain.infer(&moved)?;
        for t in &mut out {
            t.shape = permuted(&t.shape, &to_channels_last(rank));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_permutations_invert_each_other() {
        for rank in 3..=5 {
            let (last, first) = (to_channels_last(rank), to_channels_first(rank));
            let dims: Vec<usize> = (0..rank).collect();
            assert_eq!(
                permuted(&permuted(&dims, &last), &first),
                dims,
                "rank {rank}"
            );
        }
        assert_eq!(to_channels_last(4), [0, 2, 3, 1]);
        assert_eq!(to_channels_first(4), [0, 3, 1, 2]);
    }
}
