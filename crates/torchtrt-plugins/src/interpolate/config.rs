//! The validated, normalised configuration of an `Interpolate` layer: parsing the fields
//! and writing them back.

use torchtrt_plugin_api::{FieldCollection, PluginError, PluginKey, PluginResult};

use super::coord::{CoordMode, NearestMode};
use super::mode::Mode;
use super::size::{AspectPolicy, InputKind, Ratio, SizeInput, SizeRule};

/// Everything an `Interpolate` plugin needs from its fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// What is computed.
    pub mode: Mode,
    /// Where the output size comes from.
    pub size: SizeRule,
    /// PyTorch's `align_corners`.
    pub align_corners: bool,
    /// ONNX `coordinate_transformation_mode` (PyTorch's rule by default).
    pub coord: CoordMode,
    /// ONNX `nearest_mode` (PyTorch's floor by default).
    pub nearest: NearestMode,
    /// The cubic convolution coefficient `A`.
    pub cubic_a: f32,
    /// ONNX `exclude_outside`: taps outside the input get weight 0 and the rest renormalise.
    pub exclude_outside: bool,
    /// ONNX `extrapolation_value` (kept for round trips; only `tf_crop_and_resize` uses it).
    pub extrapolation_value: f32,
    /// ONNX opset-18 `antialias` for linear and cubic downsampling.
    pub antialias: bool,
    /// The last input is the `tf_crop_and_resize` region of interest (a shape input: the
    /// starts, then the ends, after `size_input_skip` entries each).
    pub roi_input: bool,
    /// The region of interest per spatial axis, once read from that input.
    pub roi: Option<Vec<(f64, f64)>>,
    /// The implementation the builder chose (`Plugin::set_tactic`; `0` the default). Not a
    /// field: the engine stores it beside them.
    pub tactic: u32,
}

/// Reads `fields` (already checked against the schema, defaults filled in) for `key`.
pub fn parse(key: &PluginKey, fields: &FieldCollection) -> PluginResult<Config> {
    let bad = |field: &str, reason: String| PluginError::invalid_field(key, field, reason);
    let mode_name = fields.string("mode").unwrap_or_default();
    let mode = Mode::parse(mode_name).ok_or_else(|| {
        bad(
            "mode",
            format!(
                "unknown mode `{mode_name}` (one of {})",
                Mode::NAMES.join(", ")
            ),
        )
    })?;
    let flag = |field: &str| -> PluginResult<bool> {
        match fields.i32(field).unwrap_or(0) {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(bad(field, format!("must be 0 or 1, got {v}"))),
        }
    };
    let align_corners = flag("align_corners")?;
    let use_scales = flag("use_scales")?;
    let exclude_outside = flag("exclude_outside")?;
    let antialias = flag("antialias")?;
    let roi_input = flag("roi_input")?;
    let size = size_rule(key, mode, fields, use_scales)?;

    let coord_name = fields
        .string("coordinate_transformation_mode")
        .unwrap_or("");
    let coord = CoordMode::parse(coord_name).ok_or_else(|| {
        bad(
            "coordinate_transformation_mode",
            format!(
                "unknown mode `{coord_name}` (one of {:?})",
                CoordMode::NAMES
            ),
        )
    })?;
    if (coord == CoordMode::TfCropAndResize) != roi_input {
        return Err(bad(
            "roi_input",
            "tf_crop_and_resize takes its region of interest as the last input (roi_input = 1), other modes none".to_string(),
        ));
    }
    let nearest_name = fields.string("nearest_mode").unwrap_or("");
    let nearest = NearestMode::parse(nearest_name).ok_or_else(|| {
        bad(
            "nearest_mode",
            format!(
                "unknown mode `{nearest_name}` (one of {:?})",
                NearestMode::NAMES
            ),
        )
    })?;
    let cubic_a = fields.f32("cubic_coeff_a").unwrap_or(-0.75);
    if !cubic_a.is_finite() {
        return Err(bad(
            "cubic_coeff_a",
            format!("must be finite, got {cubic_a}"),
        ));
    }
    let extrapolation_value = fields.f32("extrapolation_value").unwrap_or(0.0);

    if align_corners {
        if matches!(mode, Mode::Nearest) || mode.is_pool() {
            return Err(bad(
                "align_corners",
                format!("mode {} does not take align_corners", mode.name()),
            ));
        }
        if !matches!(coord, CoordMode::PyTorch | CoordMode::AlignCorners) {
            return Err(bad(
                "align_corners",
                format!(
                    "contradicts coordinate_transformation_mode `{}`",
                    coord.name()
                ),
            ));
        }
    }
    if antialias && !matches!(mode, Mode::Linear { .. } | Mode::Cubic) {
        return Err(bad(
            "antialias",
            format!("mode {} has no antialiasing filter", mode.name()),
        ));
    }
    if mode.is_pool() && coord != CoordMode::PyTorch {
        return Err(bad(
            "coordinate_transformation_mode",
            format!("mode {} does not resample", mode.name()),
        ));
    }
    Ok(Config {
        mode,
        size,
        align_corners,
        coord,
        nearest,
        cubic_a,
        exclude_outside,
        extrapolation_value,
        antialias,
        roi_input,
        roi: None,
        tactic: 0,
    })
}

fn size_rule(
    key: &PluginKey,
    mode: Mode,
    fields: &FieldCollection,
    use_scales: bool,
) -> PluginResult<SizeRule> {
    let bad = |field: &str, reason: String| PluginError::invalid_field(key, field, reason);
    let policy_name = fields
        .string("keep_aspect_ratio_policy")
        .unwrap_or("stretch");
    let policy = AspectPolicy::parse(policy_name).ok_or_else(|| {
        bad(
            "keep_aspect_ratio_policy",
            format!(
                "unknown policy `{policy_name}` (one of {:?})",
                AspectPolicy::NAMES
            ),
        )
    })?;
    let input_kind = match fields.string("size_input").unwrap_or("") {
        "" => None,
        "sizes" => Some(InputKind::Sizes),
        "scales" => Some(InputKind::Scales),
        other => {
            return Err(bad(
                "size_input",
                format!("unknown kind `{other}` (\"\", \"sizes\" or \"scales\")"),
            ));
        }
    };
    if policy != AspectPolicy::Stretch && input_kind != Some(InputKind::Sizes) {
        return Err(bad(
            "keep_aspect_ratio_policy",
            "a policy other than stretch needs size_input = \"sizes\"".to_string(),
        ));
    }
    if let Some(kind) = input_kind {
        let given = ["out_size", "scales", "out_shape"]
            .into_iter()
            .find(|f| fields.get(f).is_some_and(|v| !v.is_empty()));
        if let Some(f) = given.filter(|_| !mode.is_pool()) {
            return Err(bad(
                f,
                "the size comes from the shape input (size_input); give no other size".into(),
            ));
        }
        if mode.is_pool() {
            return Err(bad(
                "size_input",
                format!("mode {} takes out_size", mode.name()),
            ));
        }
        let skip = match fields.i32("size_input_skip").unwrap_or(0) {
            0 => 0,
            2 => 2,
            v => return Err(bad("size_input_skip", format!("must be 0 or 2, got {v}"))),
        };
        return Ok(SizeRule::Input(SizeInput { kind, skip, policy }));
    }
    let sizes = fields.i64s("out_size").filter(|v| !v.is_empty());
    let scales = fields.f64s("scales").filter(|v| !v.is_empty());
    if use_scales && mode.is_pool() {
        return Err(bad(
            "use_scales",
            format!("mode {} takes out_size, not scales", mode.name()),
        ));
    }
    if use_scales && scales.is_none() {
        return Err(bad("scales", "use_scales=1 needs scales".to_string()));
    }
    let (field, rule) = match (sizes, use_scales) {
        (Some(_), true) => {
            return Err(bad(
                "out_size",
                "both out_size and scales (use_scales=1) given; give exactly one".to_string(),
            ));
        }
        (Some(v), false) => ("out_size", SizeRule::Sizes(v.to_vec())),
        (None, true) => {
            let v = scales.unwrap_or_default();
            let mut ratios = Vec::with_capacity(v.len());
            for &s in v {
                ratios.push(Ratio::from_scale(s).ok_or_else(|| {
                    bad(
                        "scales",
                        format!(
                            "scale {s} is not a finite number in (0, {}]",
                            super::size::MAX_SCALE
                        ),
                    )
                })?);
            }
            ("scales", SizeRule::Scales(v.to_vec(), ratios))
        }
        (None, false) => match fields.i32s("out_shape").filter(|v| !v.is_empty()) {
            Some(shape) if (3..=5).contains(&shape.len()) => (
                "out_shape",
                SizeRule::Sizes(shape[2..].iter().map(|&d| i64::from(d)).collect()),
            ),
            Some(shape) => {
                return Err(bad(
                    "out_shape",
                    format!(
                        "must be a full output shape (N, C, 1 to 3 spatial sizes), got {} dims",
                        shape.len()
                    ),
                ));
            }
            None => {
                return Err(bad(
                    "out_size",
                    "neither out_size nor scales (use_scales=1) given; give exactly one"
                        .to_string(),
                ));
            }
        },
    };
    let n = rule.spatial().unwrap_or_default();
    let wanted = mode.spatial_dims();
    if !(1..=3).contains(&n) || wanted.is_some_and(|w| w != n) {
        let expect = wanted.map_or("1 to 3".to_string(), |w| w.to_string());
        return Err(bad(
            field,
            format!("mode {} needs {expect} spatial sizes, got {n}", mode.name()),
        ));
    }
    if let SizeRule::Sizes(v) = &rule
        && let Some(d) = v.iter().find(|&&d| d <= 0)
    {
        return Err(bad(field, format!("sizes must be positive, got {d}")));
    }
    Ok(rule)
}

impl Config {
    /// Number of spatial dimensions (the input rank is this plus 2); `None` when the size
    /// comes from a shape input, where the input's rank decides.
    pub fn spatial(&self) -> Option<usize> {
        self.size.spatial()
    }

    /// The region of interest of spatial axis `axis`, once read.
    pub fn roi_of(&self, axis: usize) -> Option<(f64, f64)> {
        self.roi.as_ref().and_then(|r| r.get(axis).copied())
    }

    /// This configuration with the size rule `size` (a shape input's values resolved).
    pub fn with_size(&self, size: SizeRule) -> Config {
        Config {
            size,
            ..self.clone()
        }
    }

    /// The normalised fields: re-creating from them gives an identical plugin.
    pub fn to_fields(&self) -> FieldCollection {
        let mut f = FieldCollection::new()
            .with("mode", self.mode.name())
            .with("size_input", "")
            .with("size_input_skip", 0i32)
            .with("keep_aspect_ratio_policy", AspectPolicy::Stretch.name());
        match &self.size {
            SizeRule::Sizes(v) => {
                f.set("out_size", v.clone());
                f.set("use_scales", 0i32);
            }
            SizeRule::Scales(s, _) => {
                f.set("scales", s.clone());
                f.set("use_scales", 1i32);
            }
            SizeRule::Fixed { sizes, .. } => {
                f.set("out_size", sizes.clone());
                f.set("use_scales", 0i32);
            }
            SizeRule::Input(input) => {
                let kind = match input.kind {
                    InputKind::Sizes => "sizes",
                    InputKind::Scales => "scales",
                };
                f.set("size_input", kind);
                f.set("size_input_skip", input.skip as i32);
                f.set("keep_aspect_ratio_policy", input.policy.name());
                f.set("use_scales", 0i32);
            }
        }
        f.with("align_corners", i32::from(self.align_corners))
            .with("coordinate_transformation_mode", self.coord.name())
            .with("nearest_mode", self.nearest.name())
            .with("cubic_coeff_a", self.cubic_a)
            .with("exclude_outside", i32::from(self.exclude_outside))
            .with("extrapolation_value", self.extrapolation_value)
            .with("antialias", i32::from(self.antialias))
            .with("roi_input", i32::from(self.roi_input))
    }
}
