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

use torchtrt_plugin_api::{DimExpr, ShapeValues};

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
    /// Explicit sizes sampled with given scales (ONNX `keep_aspect_ratio_policy`: one scale
    /// for every axis, sizes rounded half up).
    Fixed {
        /// Spatial output sizes.
        sizes: Vec<i64>,
        /// The scale each axis samples with.
        scales: Vec<f64>,
    },
    /// Sizes or scales read from the plugin's second input, a shape input.
    Input(SizeInput),
}

/// What the shape input of an `Interpolate` layer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Output sizes (i32 or i64).
    Sizes,
    /// Scale factors (floating point).
    Scales,
}

/// ONNX `Resize`'s `keep_aspect_ratio_policy` for sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AspectPolicy {
    /// Each axis gets its size.
    Stretch,
    /// One scale, the smallest `size / dim`.
    NotLarger,
    /// One scale, the largest `size / dim`.
    NotSmaller,
}

impl AspectPolicy {
    /// The accepted field values.
    pub const NAMES: [&'static str; 3] = ["stretch", "not_larger", "not_smaller"];

    /// Parses a field value.
    pub fn parse(name: &str) -> Option<AspectPolicy> {
        Some(match name {
            "stretch" => AspectPolicy::Stretch,
            "not_larger" => AspectPolicy::NotLarger,
            "not_smaller" => AspectPolicy::NotSmaller,
            _ => return None,
        })
    }

    /// The field value.
    pub fn name(self) -> &'static str {
        AspectPolicy::NAMES[self as usize]
    }
}

/// The output size as a shape input gives it: `skip` leading entries belong to the two
/// axes before the spatial ones (scales 1, sizes equal to the input's), the rest to the
/// spatial axes in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeInput {
    /// Sizes or scales.
    pub kind: InputKind,
    /// Entries before the spatial ones: 0 or 2.
    pub skip: usize,
    /// How sizes keep the aspect ratio.
    pub policy: AspectPolicy,
}

impl SizeInput {
    /// The concrete rule for these values and input dims (`None` for dims not known yet):
    /// `Ok(None)` when the values, or dims a policy needs, are not known yet.
    pub fn resolve(
        &self,
        values: &ShapeValues,
        dims: &[Option<i64>],
    ) -> Result<Option<SizeRule>, String> {
        let Some(len) = values.len() else {
            return Ok(None);
        };
        let spatial = dims.len().saturating_sub(2);
        if len != self.skip + spatial {
            return Err(format!(
                "the shape input has {len} entries, expected {} for a rank-{} input",
                self.skip + spatial,
                dims.len()
            ));
        }
        match self.kind {
            InputKind::Scales => {
                let v = values.floats().unwrap_or_default();
                if let Some((a, s)) = v[..self.skip].iter().enumerate().find(|(_, s)| **s != 1.0) {
                    return Err(format!("scale {s} for axis {a}: only spatial axes resize"));
                }
                let scales = v[self.skip..].to_vec();
                let ratios = scales
                    .iter()
                    .map(|&s| {
                        Ratio::from_scale(s).ok_or_else(|| {
                            format!("scale {s} is not a finite number in (0, {MAX_SCALE}]")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Some(SizeRule::Scales(scales, ratios)))
            }
            InputKind::Sizes => {
                let Some(v) = values.ints() else {
                    return Err("sizes must be an integer tensor".into());
                };
                for (a, (&s, d)) in v[..self.skip].iter().zip(dims).enumerate() {
                    if d.is_some_and(|d| d != s) {
                        return Err(format!(
                            "size {s} for axis {a} of length {}: only spatial axes resize",
                            d.unwrap_or_default()
                        ));
                    }
                }
                let sizes = &v[self.skip..];
                if let Some(s) = sizes.iter().find(|&&s| s <= 0) {
                    return Err(format!("sizes must be positive, got {s}"));
                }
                if self.policy == AspectPolicy::Stretch {
                    return Ok(Some(SizeRule::Sizes(sizes.to_vec())));
                }
                let Some(dims) = dims[2..].iter().copied().collect::<Option<Vec<i64>>>() else {
                    return Ok(None);
                };
                let ratios = sizes.iter().zip(&dims).map(|(&s, &d)| s as f64 / d as f64);
                let scale = match self.policy {
                    AspectPolicy::NotLarger => ratios.fold(f64::INFINITY, f64::min),
                    _ => ratios.fold(f64::NEG_INFINITY, f64::max),
                };
                let sizes = dims
                    .iter()
                    .map(|&d| ((scale * d as f64 + 0.5).floor() as i64).max(1))
                    .collect();
                Ok(Some(SizeRule::Fixed {
                    sizes,
                    scales: vec![scale; spatial],
                }))
            }
        }
    }
}

impl SizeRule {
    /// Number of spatial dimensions; `None` when it follows from the input's rank.
    pub fn spatial(&self) -> Option<usize> {
        match self {
            SizeRule::Sizes(v) => Some(v.len()),
            SizeRule::Scales(v, _) => Some(v.len()),
            SizeRule::Fixed { sizes, .. } => Some(sizes.len()),
            SizeRule::Input(_) => None,
        }
    }

    /// The output length of spatial axis `axis` for the input length `dim`.
    pub fn out_dim(&self, axis: usize, dim: &DimExpr) -> DimExpr {
        match self {
            SizeRule::Sizes(v) => DimExpr::Const(v[axis]),
            SizeRule::Scales(_, r) => r[axis].apply(dim),
            SizeRule::Fixed { sizes, .. } => DimExpr::Const(sizes[axis]),
            SizeRule::Input(_) => DimExpr::unknown(),
        }
    }

    /// The output length of spatial axis `axis` for a known input length.
    pub fn out_len(&self, axis: usize, dim: i64) -> Option<i64> {
        match self {
            SizeRule::Sizes(v) => Some(v[axis]),
            SizeRule::Scales(_, r) => r[axis].apply_len(dim),
            SizeRule::Fixed { sizes, .. } => Some(sizes[axis]),
            SizeRule::Input(_) => None,
        }
    }

    /// The user's scale of spatial axis `axis`, when sizes come from scales.
    pub fn scale(&self, axis: usize) -> Option<f64> {
        match self {
            SizeRule::Sizes(_) | SizeRule::Input(_) => None,
            SizeRule::Scales(s, _) => Some(s[axis]),
            SizeRule::Fixed { scales, .. } => Some(scales[axis]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(skip: usize, policy: AspectPolicy) -> SizeInput {
        SizeInput {
            kind: InputKind::Sizes,
            skip,
            policy,
        }
    }

    #[test]
    fn aspect_policies_take_one_scale_and_round_half_up() {
        let dims = [Some(1), Some(1), Some(2), Some(4)];
        let values = ShapeValues::Ints(vec![1, 3]);
        let larger = sizes(0, AspectPolicy::NotLarger).resolve(&values, &dims);
        assert_eq!(
            larger,
            Ok(Some(SizeRule::Fixed {
                sizes: vec![1, 2],
                scales: vec![0.5, 0.5]
            }))
        );
        let smaller = sizes(0, AspectPolicy::NotSmaller).resolve(&values, &dims);
        assert_eq!(
            smaller,
            Ok(Some(SizeRule::Fixed {
                sizes: vec![2, 3],
                scales: vec![0.75, 0.75]
            }))
        );
        let symbolic = [Some(1), Some(1), None, Some(4)];
        assert_eq!(
            sizes(0, AspectPolicy::NotLarger).resolve(&values, &symbolic),
            Ok(None)
        );
    }

    #[test]
    fn leading_entries_keep_their_axes() {
        let dims = [Some(2), Some(3), Some(4), Some(5)];
        let ok = ShapeValues::Ints(vec![2, 3, 8, 10]);
        assert_eq!(
            sizes(2, AspectPolicy::Stretch).resolve(&ok, &dims),
            Ok(Some(SizeRule::Sizes(vec![8, 10])))
        );
        let channels = ShapeValues::Ints(vec![2, 6, 8, 10]);
        let e = sizes(2, AspectPolicy::Stretch)
            .resolve(&channels, &dims)
            .unwrap_err();
        assert!(e.contains("axis 1"), "{e}");
        let scales = SizeInput {
            kind: InputKind::Scales,
            skip: 2,
            policy: AspectPolicy::Stretch,
        };
        let e = scales
            .resolve(&ShapeValues::Floats(vec![1.0, 2.0, 2.0, 2.0]), &dims)
            .unwrap_err();
        assert!(e.contains("axis 1"), "{e}");
        let e = scales
            .resolve(&ShapeValues::Floats(vec![1.0, 1.0, 2.0]), &dims)
            .unwrap_err();
        assert!(e.contains("3 entries, expected 4"), "{e}");
        assert_eq!(scales.resolve(&ShapeValues::Unknown, &dims), Ok(None));
    }
}
