//! The `mode` field: which resampling or pooling an `Interpolate` layer performs.

/// The computation an `Interpolate` plugin performs, as named by PyTorch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `nearest`: nearest-neighbour sampling, 1-D to 3-D.
    Nearest,
    /// `linear` / `bilinear` / `trilinear`: separable linear interpolation over `dims` axes.
    Linear {
        /// Spatial dimensions (1, 2 or 3).
        dims: usize,
    },
    /// `bicubic`: separable cubic convolution over two axes.
    Cubic,
    /// `adaptive_avg_pool{1,2,3}d`: mean over adaptive windows.
    AdaptiveAvg {
        /// Spatial dimensions (1, 2 or 3).
        dims: usize,
    },
    /// `adaptive_max_pool{1,2,3}d`: maximum over adaptive windows.
    AdaptiveMax {
        /// Spatial dimensions (1, 2 or 3).
        dims: usize,
    },
}

impl Mode {
    /// Every accepted spelling of the `mode` field.
    pub const NAMES: [&'static str; 11] = [
        "nearest",
        "linear",
        "bilinear",
        "bicubic",
        "trilinear",
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "adaptive_avg_pool3d",
        "adaptive_max_pool1d",
        "adaptive_max_pool2d",
        "adaptive_max_pool3d",
    ];

    /// Parses the `mode` field.
    pub fn parse(name: &str) -> Option<Mode> {
        Some(match name {
            "nearest" => Mode::Nearest,
            "linear" => Mode::Linear { dims: 1 },
            "bilinear" => Mode::Linear { dims: 2 },
            "trilinear" => Mode::Linear { dims: 3 },
            "bicubic" => Mode::Cubic,
            _ => {
                let (avg, rest) = if let Some(r) = name.strip_prefix("adaptive_avg_pool") {
                    (true, r)
                } else {
                    (false, name.strip_prefix("adaptive_max_pool")?)
                };
                let dims = match rest {
                    "1d" => 1,
                    "2d" => 2,
                    "3d" => 3,
                    _ => return None,
                };
                if avg {
                    Mode::AdaptiveAvg { dims }
                } else {
                    Mode::AdaptiveMax { dims }
                }
            }
        })
    }

    /// The canonical name, as [`Mode::parse`] accepts it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Nearest => "nearest",
            Mode::Linear { dims: 1 } => "linear",
            Mode::Linear { dims: 2 } => "bilinear",
            Mode::Linear { .. } => "trilinear",
            Mode::Cubic => "bicubic",
            Mode::AdaptiveAvg { dims: 1 } => "adaptive_avg_pool1d",
            Mode::AdaptiveAvg { dims: 2 } => "adaptive_avg_pool2d",
            Mode::AdaptiveAvg { .. } => "adaptive_avg_pool3d",
            Mode::AdaptiveMax { dims: 1 } => "adaptive_max_pool1d",
            Mode::AdaptiveMax { dims: 2 } => "adaptive_max_pool2d",
            Mode::AdaptiveMax { .. } => "adaptive_max_pool3d",
        }
    }

    /// The number of spatial dimensions the mode requires, or `None` when any of 1 to 3
    /// is accepted (`nearest`).
    pub fn spatial_dims(self) -> Option<usize> {
        match self {
            Mode::Nearest => None,
            Mode::Cubic => Some(2),
            Mode::Linear { dims } | Mode::AdaptiveAvg { dims } | Mode::AdaptiveMax { dims } => {
                Some(dims)
            }
        }
    }

    /// True for the adaptive pooling modes.
    pub fn is_pool(self) -> bool {
        matches!(self, Mode::AdaptiveAvg { .. } | Mode::AdaptiveMax { .. })
    }
}
