//! The output-size rule: explicit sizes, or `floor(in·scale)` evaluated exactly.
//!
//! A scale is read as the fraction `p/q` given by the last continued-fraction convergent of
//! its `f64` value with `q ≤ 2^20` (stopping early once within `1e-12` relative), and the
//! output length of an input length `d` is `floor(d·p/q)`. Every scale written as a short
//! decimal or a small fraction (`2`, `0.5`, `1.5`, `1/3`, `0.29`) is thereby read exactly,
//! and the same rule serves constant and symbolic dimensions: for a symbolic `d` the output
//! is the expression `(d·p) floor_div q`. It equals PyTorch's `floor(double(d)·scale)`
//! except where floating-point rounding of the product lands just below an integer (e.g.
//! `100·0.29`, which PyTorch computes as 28): there this rule gives the exact value.

use torchtrt_plugin_api::DimExpr;

/// The largest denominator a scale is approximated with.
const MAX_DEN: i64 = 1 << 20;
/// The largest numerator (bounds `d·p` far from `i64` overflow for any real tensor).
const MAX_NUM: i64 = 1 << 30;

/// The largest scale accepted.
pub const MAX_SCALE: f64 = 1024.0;

/// A scale as an exact fraction `num/den`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    /// Numerator, ≥ 0.
    pub num: i64,
    /// Denominator, ≥ 1.
    pub den: i64,
}

impl Ratio {
    /// Reads a finite, positive scale as a fraction; `None` for other values or scales
    /// above [`MAX_SCALE`].
    pub fn from_scale(scale: f64) -> Option<Ratio> {
        if !scale.is_finite() || scale <= 0.0 || scale > MAX_SCALE {
            return None;
        }
        let (mut h1, mut h2) = (1i64, 0i64);
        let (mut k1, mut k2) = (0i64, 1i64);
        let mut best = Ratio { num: 0, den: 1 };
        let mut x = scale;
        for _ in 0..64 {
            let a = x.floor();
            if a > MAX_NUM as f64 {
                break;
            }
            let a = a as i64;
            let (Some(h), Some(k)) = (
                a.checked_mul(h1).and_then(|v| v.checked_add(h2)),
                a.checked_mul(k1).and_then(|v| v.checked_add(k2)),
            ) else {
                break;
            };
            if h > MAX_NUM || k > MAX_DEN {
                break;
            }
            best = Ratio { num: h, den: k };
            if (h as f64 / k as f64 - scale).abs() <= scale * 1e-12 {
                break;
            }
            let frac = x - a as f64;
            if frac <= 0.0 {
                break;
            }
            x = 1.0 / frac;
            (h2, h1) = (h1, h);
            (k2, k1) = (k1, k);
        }
        Some(best)
    }

    /// `floor(dim·num/den)` as an expression of `dim` (a constant when `dim` is).
    pub fn apply(self, dim: &DimExpr) -> DimExpr {
        (dim * self.num).floor_div(self.den)
    }

    /// `floor(dim·num/den)` for a known length; `None` on overflow.
    pub fn apply_len(self, dim: i64) -> Option<i64> {
        Some(dim.checked_mul(self.num)?.div_euclid(self.den))
    }
}

/// Where the output size comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeRule {
    /// Explicit spatial output sizes (`out_size`, or the spatial part of `out_shape`).
    Sizes(Vec<i64>),
    /// Per-axis scale factors (`scales` with `use_scales = 1`) and their exact fractions.
    Scales(Vec<f64>, Vec<Ratio>),
}

impl SizeRule {
    /// Number of spatial dimensions.
    pub fn spatial(&self) -> usize {
        match self {
            SizeRule::Sizes(v) => v.len(),
            SizeRule::Scales(v, _) => v.len(),
        }
    }

    /// The output length of spatial axis `axis` for the input length `dim`.
    pub fn out_dim(&self, axis: usize, dim: &DimExpr) -> DimExpr {
        match self {
            SizeRule::Sizes(v) => DimExpr::Const(v[axis]),
            SizeRule::Scales(_, r) => r[axis].apply(dim),
        }
    }

    /// The output length of spatial axis `axis` for a known input length.
    pub fn out_len(&self, axis: usize, dim: i64) -> Option<i64> {
        match self {
            SizeRule::Sizes(v) => Some(v[axis]),
            SizeRule::Scales(_, r) => r[axis].apply_len(dim),
        }
    }

    /// The user's scale of spatial axis `axis`, when sizes come from scales.
    pub fn scale(&self, axis: usize) -> Option<f64> {
        match self {
            SizeRule::Sizes(_) => None,
            SizeRule::Scales(s, _) => Some(s[axis]),
        }
    }
}
