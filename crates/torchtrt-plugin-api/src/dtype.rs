//! Element types, memory layouts, devices and tensor descriptions.

use std::fmt;

/// Element type of a tensor.
///
/// The discriminants are part of the C ABI (`TtrtDType` in `torchtrt_plugin.h`) and of the
/// engine format: never renumber, only append.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(i32)]
pub enum DType {
    /// IEEE-754 binary32.
    F32 = 0,
    /// IEEE-754 binary16.
    F16 = 1,
    /// bfloat16.
    BF16 = 2,
    /// IEEE-754 binary64.
    F64 = 3,
    /// Signed 64-bit integer.
    I64 = 4,
    /// Signed 32-bit integer.
    I32 = 5,
    /// Signed 16-bit integer.
    I16 = 6,
    /// Signed 8-bit integer.
    I8 = 7,
    /// Unsigned 8-bit integer.
    U8 = 8,
    /// Boolean, one byte per element (0 or 1).
    Bool = 9,
    /// Unsigned 16-bit integer.
    U16 = 10,
    /// Unsigned 32-bit integer.
    U32 = 11,
    /// Unsigned 64-bit integer.
    U64 = 12,
}

impl DType {
    /// Every dtype, in discriminant order.
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U8,
        DType::Bool,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// True for the floating-point types.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// True for the signed and unsigned integer types (not `Bool`).
    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            DType::I64
                | DType::I32
                | DType::I16
                | DType::I8
                | DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
        )
    }

    /// True for the unsigned integer types (not `Bool`).
    pub const fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// Lower-case name as used on the command line and in error messages (`f32`, `bf16`, …).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::Bool => "bool",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }

    /// Parses a name produced by [`DType::name`].
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Converts a C ABI discriminant back into a dtype.
    pub fn from_raw(raw: i32) -> Option<DType> {
        DType::ALL.get(usize::try_from(raw).ok()?).copied()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Memory layout of a tensor. Only dense row-major (`Linear`) exists today; the enum leaves
/// room for vectorised formats (TensorRT's `kHWC8`, …) without an ABI break.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(i32)]
pub enum TensorFormat {
    /// Dense, row-major, innermost dimension contiguous.
    #[default]
    Linear = 0,
}

impl TensorFormat {
    /// Converts a C ABI discriminant back into a format.
    pub fn from_raw(raw: i32) -> Option<TensorFormat> {
        (raw == 0).then_some(TensorFormat::Linear)
    }
}

/// The kind of device a layer or plugin runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(i32)]
pub enum DeviceKind {
    /// The host CPU.
    Cpu = 0,
    /// An NVIDIA GPU through CUDA.
    Cuda = 1,
}

impl DeviceKind {
    /// Converts a C ABI discriminant back into a device kind.
    pub fn from_raw(raw: i32) -> Option<DeviceKind> {
        match raw {
            0 => Some(DeviceKind::Cpu),
            1 => Some(DeviceKind::Cuda),
            _ => None,
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
        })
    }
}

/// The dtype and layout of one plugin input or output: what a plugin is asked about when the
/// builder negotiates formats (TensorRT's `supportsFormatCombination`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortDesc {
    /// Element type.
    pub dtype: DType,
    /// Memory layout.
    pub format: TensorFormat,
}

impl PortDesc {
    /// A linear-layout port of the given dtype.
    pub const fn linear(dtype: DType) -> PortDesc {
        PortDesc {
            dtype,
            format: TensorFormat::Linear,
        }
    }
}

/// A tensor's dtype, shape and layout. In a build-time description a dimension of `-1` is
/// dynamic; at execution every dimension is known.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TensorDesc {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, outermost first; `-1` marks a dimension unknown at build time.
    pub shape: Vec<i64>,
    /// Memory layout.
    pub format: TensorFormat,
}

impl TensorDesc {
    /// A linear-layout description.
    pub fn new(dtype: DType, shape: impl Into<Vec<i64>>) -> TensorDesc {
        TensorDesc {
            dtype,
            shape: shape.into(),
            format: TensorFormat::Linear,
        }
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements, or `None` when a dimension is dynamic or the product overflows.
    pub fn numel(&self) -> Option<usize> {
        numel(&self.shape)
    }

    /// Size in bytes, or `None` when a dimension is dynamic.
    pub fn byte_len(&self) -> Option<usize> {
        self.numel()?.checked_mul(self.dtype.size())
    }

    /// The port description (dtype and layout) of this tensor.
    pub fn port(&self) -> PortDesc {
        PortDesc {
            dtype: self.dtype,
            format: self.format,
        }
    }
}

impl fmt::Display for TensorDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, ShapeDisplay(&self.shape))
    }
}

/// Number of elements of a concrete shape; `None` when a dimension is negative or the
/// product overflows `usize`.
pub fn numel(shape: &[i64]) -> Option<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
}

/// Displays a shape as `[2,3,?]`, with `?` for dynamic dimensions.
pub struct ShapeDisplay<'a>(pub &'a [i64]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if *d < 0 {
                f.write_str("?")?;
            } else {
                write!(f, "{d}")?;
            }
        }
        f.write_str("]")
    }
}

/// Rust element types that map onto a [`DType`], for typed views of tensor bytes.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The matching dtype.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => { $(impl Element for $t { const DTYPE: DType = DType::$d; })* };
}
element!(f32 => F32, half::f16 => F16, half::bf16 => BF16, f64 => F64, i64 => I64, i32 => I32,
    i16 => I16, i8 => I8, u8 => U8, u16 => U16, u32 => U32, u64 => U64);
