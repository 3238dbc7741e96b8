//! N-d transposed convolution (1-D to 3-D) with groups, dilation and output padding.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, format_shape};

use super::convolution::{check_operands, check_window_params};
use super::{InferInput, LayerOp, TypeShape};

/// Transposed convolution of `x [N, C, *S]` with `w [C, M/groups, *K]`, plus an optional
/// bias `[M]` as third input (ONNX `ConvTranspose`, pads resolved: no `auto_pad` or
/// `output_shape`).
///
/// Each input element scatters `x[n, c, i…] · w[c, m, k…]` to output position
/// `o = i·s + k·d − pb` of channel `g·M/groups + m` (`g` the group of `c`); the output
/// extent per spatial dim is `s·(in − 1) + op + (k − 1)·d + 1 − pb − pe`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Deconvolution {
    /// Stride per spatial dim.
    pub strides: Vec<i64>,
    /// Padding removed from the start of each spatial dim of the full output.
    pub pads_begin: Vec<i64>,
    /// Padding removed from the end of each spatial dim of the full output.
    pub pads_end: Vec<i64>,
    /// Dilation per spatial dim.
    pub dilations: Vec<i64>,
    /// Extra positions added at the end of each spatial dim (they receive only the bias).
    pub output_padding: Vec<i64>,
    /// Number of groups.
    pub groups: i64,
}

impl Deconvolution {
    /// Stride 1, no padding, dilation 1, no output padding, one group, for `spatial` dims.
    pub fn new(spatial: usize) -> Deconvolution {
        Deconvolution {
            strides: vec![1; spatial],
            pads_begin: vec![0; spatial],
            pads_end: vec![0; spatial],
            dilations: vec![1; spatial],
            output_padding: vec![0; spatial],
            groups: 1,
        }
    }

    /// Checks the per-dim parameters for `spatial` dims.
    pub fn check_params(&self, spatial: usize) -> Result<(), String> {
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
                ("output_padding", &self.output_padding),
            ],
            0,
        )?;
        if self.groups < 1 {
            return Err(format!("groups {} must be positive", self.groups));
        }
        Ok(())
    }

    /// The output extent of spatial dim `i` for an input extent `input` and `k` taps,
    /// `s·(in − 1) + op + (k − 1)·d + 1 − pb − pe`; `None` when the parameters overflow.
    pub fn output_extent(&self, i: usize, input: &DimExpr, k: i64) -> Option<DimExpr> {
        let fixed = k
            .checked_sub(1)?
            .checked_mul(self.dilations[i])?
            .checked_add(self.output_padding[i])?
            .checked_add(1)?
            .checked_sub(self.pads_begin[i])?
            .checked_sub(self.pads_end[i])?;
        Some((input.clone() - 1) * self.strides[i] + fixed)
    }
}

impl LayerOp for Deconvolution {
    fn kind(&self) -> &'static str {
        "Deconvolution"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (x, w) = (&inputs[0], &inputs[1]);
        let spatial = check_operands("Deconvolution", inputs)?;
        self.check_params(spatial)?;
        let known = |d: &DimExpr| {
            d.as_const()
                .ok_or("Deconvolution weights need a known shape")
        };
        let c = known(&w.shape[0])?;
        let mg = known(&w.shape[1])?;
        let kernel: Vec<i64> = w.shape[2..].iter().map(known).collect::<Result<_, _>>()?;
        let g = self.groups;
        if c % g != 0 {
            return Err(format!("groups {g} must divide the {c} input channels"));
        }
        if let Some(xc) = x.shape[1].as_const()
            && xc != c
        {
            return Err(format!("input has {xc} channels, weights expect {c}"));
        }
        let m = mg * g;
        if let Some(b) = inputs.get(2)
            && (b.shape.len() != 1 || b.shape[0].as_const().is_some_and(|n| n != m))
        {
            return Err(format!("bias must be [{m}], got {}", format_shape(b.shape)));
        }
        let mut shape = vec![x.shape[0].clone(), DimExpr::Const(m)];
        for (i, (input, &k)) in x.shape[2..].iter().zip(&kernel).enumerate() {
            let o = self
                .output_extent(i, input, k)
                .ok_or_else(|| format!("the parameters of spatial dim {i} overflow"))?;
            if o.as_const().is_some_and(|v| v < 1) {
                return Err(format!("spatial dim {i} of the output would be {o}"));
            }
            shape.push(o);
        }
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
