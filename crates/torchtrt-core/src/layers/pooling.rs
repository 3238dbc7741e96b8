//! Max and average pooling over 1 to 3 spatial dims.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::format_shape;

use super::convolution::{check_window_params, window_out};
use super::{InferInput, LayerOp, TypeShape, require_float};

/// Which pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolKind {
    /// Maximum over the window (padding never wins).
    Max,
    /// Mean over the window.
    Average,
    /// `(Σ |x|^p)^(1/p)` over the window, padding contributing 0 (ONNX `LpPool`).
    Lp {
        /// The norm's order, at least 1.
        p: i64,
    },
}

/// Pools `x [N, C, *S]` with a sliding window (ONNX `MaxPool` / `AveragePool` / `LpPool`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pooling {
    /// Max, average or Lp.
    pub kind: PoolKind,
    /// Window size per spatial dim.
    pub kernel: Vec<i64>,
    /// Stride per spatial dim.
    pub strides: Vec<i64>,
    /// Padding at the start of each spatial dim.
    pub pads_begin: Vec<i64>,
    /// Padding at the end of each spatial dim.
    pub pads_end: Vec<i64>,
    /// Dilation per spatial dim.
    pub dilations: Vec<i64>,
    /// Round the output size up (a last window must start inside the input or left padding).
    pub ceil_mode: bool,
    /// Average: divide by the full window size, padding included.
    pub count_include_pad: bool,
}

impl Pooling {
    /// A pooling layer with stride = kernel, no padding.
    pub fn new(kind: PoolKind, kernel: Vec<i64>) -> Pooling {
        let n = kernel.len();
        Pooling {
            kind,
            strides: kernel.clone(),
            kernel,
            pads_begin: vec![0; n],
            pads_end: vec![0; n],
            dilations: vec![1; n],
            ceil_mode: false,
            count_include_pad: false,
        }
    }
}

impl LayerOp for Pooling {
    fn kind(&self) -> &'static str {
        "Pooling"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        require_float("Pooling", x.dtype)?;
        if let PoolKind::Lp { p } = self.kind
            && p < 1
        {
            return Err(format!("LpPool order p = {p} must be at least 1"));
        }
        let spatial = x.shape.len().saturating_sub(2);
        if !(1..=3).contains(&spatial) {
            return Err(format!(
                "Pooling needs [N,C,1-3 spatial dims], got {}",
                format_shape(x.shape)
            ));
        }
        check_window_params(
            spatial,
            &[
                ("kernel", &self.kernel),
                ("strides", &self.strides),
                ("dilations", &self.dilations),
            ],
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
        let mut shape = x.shape[..2].to_vec();
        for i in 0..spatial {
            let (k, s, d) = (self.kernel[i], self.strides[i], self.dilations[i]);
            let (pb, pe) = (self.pads_begin[i], self.pads_end[i]);
            let mut o = window_out(&x.shape[2 + i], k, s, d, pb, pe, self.ceil_mode);
            if self.ceil_mode
                && let (Some(ov), Some(iv)) = (o.as_const(), x.shape[2 + i].as_const())
                && (ov - 1) * s >= iv + pb
            {
                o = (ov - 1).into();
            }
            if o.as_const().is_some_and(|v| v < 1) {
                return Err(format!("spatial dim {i} of the output would be {o}"));
            }
            shape.push(o);
        }
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
