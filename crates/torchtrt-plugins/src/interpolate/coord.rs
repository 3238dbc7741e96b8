//! Where an output index samples the input: the coordinate transformation (PyTorch's rule or
//! one of ONNX `Resize`'s `coordinate_transformation_mode`s) and the nearest-pixel rounding.

/// How an output index maps to a continuous input coordinate along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordMode {
    /// `""`: PyTorch's `F.interpolate` rule (`align_corners`, or half-pixel clamped at 0 for
    /// linear; `floor(dst·scale)` for nearest).
    PyTorch,
    /// `half_pixel`: `(x + 0.5)/scale − 0.5`.
    HalfPixel,
    /// `asymmetric`: `x/scale`.
    Asymmetric,
    /// `pytorch_half_pixel`: like `half_pixel`, but `−0.5` when the output has length 1.
    PytorchHalfPixel,
    /// `align_corners`: `x·(in − 1)/(out − 1)`, `0` when the output has length 1.
    AlignCorners,
    /// `tf_half_pixel_for_nn`: `(x + 0.5)/scale`.
    TfHalfPixelForNn,
    /// `half_pixel_symmetric`: `half_pixel` shifted so the centres of input and output align
    /// when `floor(in·scale)` truncates.
    HalfPixelSymmetric,
    /// `tf_crop_and_resize`: samples the region of interest `[start, end]` (fractions of
    /// `in − 1`); outputs whose coordinate falls outside the input take
    /// `extrapolation_value`.
    TfCropAndResize,
}

impl CoordMode {
    /// The accepted values of `coordinate_transformation_mode`.
    pub const NAMES: [&'static str; 8] = [
        "",
        "half_pixel",
        "asymmetric",
        "pytorch_half_pixel",
        "align_corners",
        "tf_half_pixel_for_nn",
        "half_pixel_symmetric",
        "tf_crop_and_resize",
    ];

    /// Parses `coordinate_transformation_mode`.
    pub fn parse(name: &str) -> Option<CoordMode> {
        Some(match name {
            "" => CoordMode::PyTorch,
            "half_pixel" => CoordMode::HalfPixel,
            "asymmetric" => CoordMode::Asymmetric,
            "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
            "align_corners" => CoordMode::AlignCorners,
            "tf_half_pixel_for_nn" => CoordMode::TfHalfPixelForNn,
            "half_pixel_symmetric" => CoordMode::HalfPixelSymmetric,
            "tf_crop_and_resize" => CoordMode::TfCropAndResize,
            _ => return None,
        })
    }

    /// The field value [`CoordMode::parse`] accepts.
    pub fn name(self) -> &'static str {
        match self {
            CoordMode::PyTorch => "",
            CoordMode::HalfPixel => "half_pixel",
            CoordMode::Asymmetric => "asymmetric",
            CoordMode::PytorchHalfPixel => "pytorch_half_pixel",
            CoordMode::AlignCorners => "align_corners",
            CoordMode::TfHalfPixelForNn => "tf_half_pixel_for_nn",
            CoordMode::HalfPixelSymmetric => "half_pixel_symmetric",
            CoordMode::TfCropAndResize => "tf_crop_and_resize",
        }
    }

    /// The input coordinate of output index `dst` under one of ONNX's modes, in `f64` and
    /// in the order of operations of ONNX's reference implementation. [`CoordMode::PyTorch`] is answered as `asymmetric`
    /// (what PyTorch's rule is for nearest); the PyTorch rule for linear and cubic is
    /// [`pytorch_source`].
    pub fn onnx_source(self, axis: &AxisGeom, dst: usize) -> f64 {
        let x = dst as f64;
        let scale = axis.onnx_scale();
        let input = axis.input as f64;
        let resized = axis.resized_len();
        match self {
            CoordMode::PyTorch | CoordMode::Asymmetric => x / scale,
            CoordMode::HalfPixel => (x + 0.5) / scale - 0.5,
            CoordMode::PytorchHalfPixel if resized == 1.0 => -0.5,
            CoordMode::PytorchHalfPixel => (x + 0.5) / scale - 0.5,
            CoordMode::AlignCorners if resized == 1.0 => 0.0,
            CoordMode::AlignCorners => x * (input - 1.0) / (resized - 1.0),
            CoordMode::TfHalfPixelForNn => (x + 0.5) / scale,
            CoordMode::HalfPixelSymmetric => {
                let adjustment = axis.output as f64 / resized;
                let offset = input / 2.0 * (1.0 - adjustment);
                offset + (x + 0.5) / scale - 0.5
            }
            CoordMode::TfCropAndResize => {
                let (start, end) = axis.roi.unwrap_or((0.0, 1.0));
                let span = if resized == 1.0 {
                    (end - start) * (input - 1.0) / 2.0
                } else {
                    x * (end - start) * (input - 1.0) / (resized - 1.0)
                };
                span + start * (input - 1.0)
            }
        }
    }

    /// Whether output index `dst` samples outside the input, and so takes the
    /// extrapolation value (`tf_crop_and_resize` only).
    pub fn extrapolates(self, axis: &AxisGeom, dst: usize) -> bool {
        if self != CoordMode::TfCropAndResize {
            return false;
        }
        let x = self.onnx_source(axis, dst);
        x < 0.0 || x > (axis.input - 1) as f64
    }
}

/// How a fractional coordinate picks the nearest input index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NearestMode {
    /// `""`: PyTorch's `floor` (with PyTorch's `f32` arithmetic under the PyTorch rule).
    PyTorch,
    /// `round_prefer_floor`: round, halves down.
    RoundPreferFloor,
    /// `round_prefer_ceil`: round, halves up.
    RoundPreferCeil,
    /// `floor`.
    Floor,
    /// `ceil`.
    Ceil,
}

impl NearestMode {
    /// The accepted values of `nearest_mode`.
    pub const NAMES: [&'static str; 5] = [
        "",
        "round_prefer_floor",
        "round_prefer_ceil",
        "floor",
        "ceil",
    ];

    /// Parses `nearest_mode`.
    pub fn parse(name: &str) -> Option<NearestMode> {
        Some(match name {
            "" => NearestMode::PyTorch,
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            _ => return None,
        })
    }

    /// The field value [`NearestMode::parse`] accepts.
    pub fn name(self) -> &'static str {
        match self {
            NearestMode::PyTorch => "",
            NearestMode::RoundPreferFloor => "round_prefer_floor",
            NearestMode::RoundPreferCeil => "round_prefer_ceil",
            NearestMode::Floor => "floor",
            NearestMode::Ceil => "ceil",
        }
    }

    /// The input index nearest to coordinate `x`, before clamping. An integral `x` is
    /// itself; otherwise the mode decides between `floor(x)` and `floor(x) + 1`.
    pub fn pick(self, x: f64) -> i64 {
        let lo = x.floor();
        let frac = x - lo;
        let up = match self {
            _ if frac == 0.0 => false,
            NearestMode::PyTorch | NearestMode::Floor => false,
            NearestMode::Ceil => true,
            NearestMode::RoundPreferFloor => frac > 0.5,
            NearestMode::RoundPreferCeil => frac >= 0.5,
        };
        lo as i64 + i64::from(up)
    }
}

/// The geometry of one resampled axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AxisGeom {
    /// Input length (≥ 1).
    pub input: usize,
    /// Output length (≥ 1).
    pub output: usize,
    /// The user's scale factor (output/input sense) when the size came from `scales`.
    pub scale: Option<f64>,
    /// The region of interest `(start, end)` of `tf_crop_and_resize`.
    pub roi: Option<(f64, f64)>,
}

impl AxisGeom {
    /// The scale factor in ONNX's sense: the given scale, else `out / in`.
    pub fn onnx_scale(&self) -> f64 {
        self.scale.unwrap_or(self.output as f64 / self.input as f64)
    }

    /// ONNX's real-valued output length `in·scale` (exactly `out` when sizes were given).
    pub fn resized_len(&self) -> f64 {
        match self.scale {
            Some(s) => self.input as f64 * s,
            None => self.output as f64,
        }
    }

    /// True when ONNX's reference leaves this axis untouched: same length, a scale within
    /// 1e-9 of 1 and no cropping region.
    pub fn is_onnx_identity(&self) -> bool {
        self.input == self.output
            && (self.onnx_scale() - 1.0).abs() <= 1e-9
            && self.roi.is_none_or(|r| r == (0.0, 1.0))
    }

    /// PyTorch's `area_pixel_compute_scale`: input units per output index, `(in − 1)/(out − 1)`
    /// with `align_corners` (0 for a single output), else `1/scale` when a scale was given,
    /// else `in/out`.
    pub fn pytorch_scale(&self, align_corners: bool) -> f64 {
        if align_corners {
            if self.output > 1 {
                return (self.input - 1) as f64 / (self.output - 1) as f64;
            }
            return 0.0;
        }
        match self.scale {
            Some(s) => 1.0 / s,
            None => self.input as f64 / self.output as f64,
        }
    }

    /// The input coordinate of output index `dst` under PyTorch's rule for linear and
    /// cubic modes (PyTorch's `area_pixel_compute_source_index`, here in `f64`). `clamp`
    /// clamps negative coordinates to 0 (linear does, cubic does not).
    pub fn pytorch_source(&self, dst: usize, align_corners: bool, clamp: bool) -> f64 {
        let r = self.pytorch_scale(align_corners);
        if align_corners {
            return r * dst as f64;
        }
        let src = r * (dst as f64 + 0.5) - 0.5;
        if clamp && src < 0.0 { 0.0 } else { src }
    }

    /// PyTorch's `compute_scales_value<float>`, which its nearest kernels index with:
    /// `1/scale` when a scale was given, else `in/out`, in `f32`.
    pub fn pytorch_ratio(&self) -> f32 {
        match self.scale {
            Some(s) if s > 0.0 => (1.0 / s) as f32,
            _ => self.input as f32 / self.output as f32,
        }
    }
}

impl CoordMode {
    /// The input coordinate of output index `dst` for linear and cubic sampling: PyTorch's
    /// rule (with `align_corners`, clamping negative coordinates when `clamp`) or the ONNX
    /// mode.
    pub fn source(self, axis: &AxisGeom, dst: usize, align_corners: bool, clamp: bool) -> f64 {
        match self {
            CoordMode::PyTorch => axis.pytorch_source(dst, align_corners, clamp),
            mode => mode.onnx_source(axis, dst),
        }
    }
}
