//! Typed plugin fields: the values a plugin is created from and serialized as, and the
//! schema each creator publishes (TensorRT's `PluginField` / `PluginFieldCollection`).

use half::{bf16, f16};
use std::fmt;

use crate::error::PluginError;
use crate::plugin::PluginKey;

/// The type of a field. Discriminants are part of the C ABI (`TtrtFieldType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(i32)]
pub enum FieldType {
    /// Half-precision floats.
    F16 = 0,
    /// Single-precision floats.
    F32 = 1,
    /// Double-precision floats.
    F64 = 2,
    /// 8-bit integers.
    I8 = 3,
    /// 16-bit integers.
    I16 = 4,
    /// 32-bit integers.
    I32 = 5,
    /// 64-bit integers.
    I64 = 6,
    /// bfloat16 floats.
    BF16 = 7,
    /// A UTF-8 string (TensorRT's `kCHAR`).
    Char = 8,
    /// Dimensions (64-bit).
    Dims = 9,
    /// Opaque bytes.
    Bytes = 10,
}

impl FieldType {
    /// Every field type, in discriminant order.
    pub const ALL: [FieldType; 11] = [
        FieldType::F16,
        FieldType::F32,
        FieldType::F64,
        FieldType::I8,
        FieldType::I16,
        FieldType::I32,
        FieldType::I64,
        FieldType::BF16,
        FieldType::Char,
        FieldType::Dims,
        FieldType::Bytes,
    ];

    /// Converts a C ABI discriminant back into a field type.
    pub fn from_raw(raw: i32) -> Option<FieldType> {
        FieldType::ALL.get(usize::try_from(raw).ok()?).copied()
    }

    /// Size in bytes of one element.
    pub const fn element_size(self) -> usize {
        match self {
            FieldType::F64 | FieldType::I64 | FieldType::Dims => 8,
            FieldType::F32 | FieldType::I32 => 4,
            FieldType::F16 | FieldType::BF16 | FieldType::I16 => 2,
            FieldType::I8 | FieldType::Char | FieldType::Bytes => 1,
        }
    }

    /// Lower-case name (`f32`, `string`, `dims`, …).
    pub const fn name(self) -> &'static str {
        match self {
            FieldType::F16 => "f16",
            FieldType::F32 => "f32",
            FieldType::F64 => "f64",
            FieldType::I8 => "i8",
            FieldType::I16 => "i16",
            FieldType::I32 => "i32",
            FieldType::I64 => "i64",
            FieldType::BF16 => "bf16",
            FieldType::Char => "string",
            FieldType::Dims => "dims",
            FieldType::Bytes => "bytes",
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The value of a field: a vector of one element type, a string, dims or bytes.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum FieldValue {
    /// Half-precision floats.
    F16(Vec<f16>),
    /// Single-precision floats.
    F32(Vec<f32>),
    /// Double-precision floats.
    F64(Vec<f64>),
    /// 8-bit integers.
    I8(Vec<i8>),
    /// 16-bit integers.
    I16(Vec<i16>),
    /// 32-bit integers.
    I32(Vec<i32>),
    /// 64-bit integers.
    I64(Vec<i64>),
    /// bfloat16 floats.
    BF16(Vec<bf16>),
    /// A string.
    Char(String),
    /// Dimensions.
    Dims(Vec<i64>),
    /// Opaque bytes.
    Bytes(Vec<u8>),
}

impl FieldValue {
    /// The value's type.
    pub fn ty(&self) -> FieldType {
        match self {
            FieldValue::F16(_) => FieldType::F16,
            FieldValue::F32(_) => FieldType::F32,
            FieldValue::F64(_) => FieldType::F64,
            FieldValue::I8(_) => FieldType::I8,
            FieldValue::I16(_) => FieldType::I16,
            FieldValue::I32(_) => FieldType::I32,
            FieldValue::I64(_) => FieldType::I64,
            FieldValue::BF16(_) => FieldType::BF16,
            FieldValue::Char(_) => FieldType::Char,
            FieldValue::Dims(_) => FieldType::Dims,
            FieldValue::Bytes(_) => FieldType::Bytes,
        }
    }

    /// Number of elements (bytes for strings).
    pub fn len(&self) -> usize {
        match self {
            FieldValue::F16(v) => v.len(),
            FieldValue::F32(v) => v.len(),
            FieldValue::F64(v) => v.len(),
            FieldValue::I8(v) => v.len(),
            FieldValue::I16(v) => v.len(),
            FieldValue::I32(v) => v.len(),
            FieldValue::I64(v) | FieldValue::Dims(v) => v.len(),
            FieldValue::BF16(v) => v.len(),
            FieldValue::Char(s) => s.len(),
            FieldValue::Bytes(v) => v.len(),
        }
    }

    /// True when the value has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw little-endian bytes of the value, as they cross the C ABI.
    pub fn to_bytes(&self) -> Vec<u8> {
        fn le<T: bytemuck::Pod>(v: &[T]) -> Vec<u8> {
            bytemuck::cast_slice(v).to_vec()
        }
        match self {
            FieldValue::F16(v) => le(v),
            FieldValue::F32(v) => le(v),
            FieldValue::F64(v) => le(v),
            FieldValue::I8(v) => le(v),
            FieldValue::I16(v) => le(v),
            FieldValue::I32(v) => le(v),
            FieldValue::I64(v) | FieldValue::Dims(v) => le(v),
            FieldValue::BF16(v) => le(v),
            FieldValue::Char(s) => s.as_bytes().to_vec(),
            FieldValue::Bytes(v) => v.clone(),
        }
    }

    /// Rebuilds a value from its type and raw bytes; `None` when the byte count is not a
    /// multiple of the element size or a string is not UTF-8.
    pub fn from_bytes(ty: FieldType, bytes: &[u8]) -> Option<FieldValue> {
        fn vec<T: bytemuck::Pod>(b: &[u8]) -> Option<Vec<T>> {
            let n = std::mem::size_of::<T>();
            b.len().is_multiple_of(n).then(|| {
                b.chunks_exact(n)
                    .map(bytemuck::pod_read_unaligned)
                    .collect()
            })
        }
        Some(match ty {
            FieldType::F16 => FieldValue::F16(vec(bytes)?),
            FieldType::F32 => FieldValue::F32(vec(bytes)?),
            FieldType::F64 => FieldValue::F64(vec(bytes)?),
            FieldType::I8 => FieldValue::I8(vec(bytes)?),
            FieldType::I16 => FieldValue::I16(vec(bytes)?),
            FieldType::I32 => FieldValue::I32(vec(bytes)?),
            FieldType::I64 => FieldValue::I64(vec(bytes)?),
            FieldType::BF16 => FieldValue::BF16(vec(bytes)?),
            FieldType::Char => FieldValue::Char(String::from_utf8(bytes.to_vec()).ok()?),
            FieldType::Dims => FieldValue::Dims(vec(bytes)?),
            FieldType::Bytes => FieldValue::Bytes(bytes.to_vec()),
        })
    }

    /// The elements as `f64`, for numeric fields (floats and integers, not dims/bytes).
    pub fn as_f64s(&self) -> Option<Vec<f64>> {
        Some(match self {
            FieldValue::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            FieldValue::F32(v) => v.iter().map(|&x| x as f64).collect(),
            FieldValue::F64(v) => v.clone(),
            FieldValue::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            other => other.as_i64s()?.into_iter().map(|x| x as f64).collect(),
        })
    }

    /// The elements as `i64`, for integer and dims fields.
    pub fn as_i64s(&self) -> Option<Vec<i64>> {
        Some(match self {
            FieldValue::I8(v) => v.iter().map(|&x| x as i64).collect(),
            FieldValue::I16(v) => v.iter().map(|&x| x as i64).collect(),
            FieldValue::I32(v) => v.iter().map(|&x| x as i64).collect(),
            FieldValue::I64(v) | FieldValue::Dims(v) => v.clone(),
            _ => return None,
        })
    }

    /// Converts numbers into another numeric field type (as importers do with ONNX attributes
    /// whose width differs from the schema's), rejecting values that do not fit.
    pub fn convert(&self, ty: FieldType) -> Option<FieldValue> {
        if self.ty() == ty {
            return Some(self.clone());
        }
        let ints = || self.as_i64s();
        let floats = || self.as_f64s();
        fn narrow<T: TryFrom<i64>>(v: Vec<i64>) -> Option<Vec<T>> {
            v.into_iter().map(|x| T::try_from(x).ok()).collect()
        }
        Some(match ty {
            FieldType::F16 => FieldValue::F16(floats()?.into_iter().map(f16::from_f64).collect()),
            FieldType::F32 => FieldValue::F32(floats()?.into_iter().map(|x| x as f32).collect()),
            FieldType::F64 => FieldValue::F64(floats()?),
            FieldType::BF16 => {
                FieldValue::BF16(floats()?.into_iter().map(bf16::from_f64).collect())
            }
            FieldType::I8 => FieldValue::I8(narrow(ints()?)?),
            FieldType::I16 => FieldValue::I16(narrow(ints()?)?),
            FieldType::I32 => FieldValue::I32(narrow(ints()?)?),
            FieldType::I64 => FieldValue::I64(ints()?),
            FieldType::Dims => FieldValue::Dims(ints()?),
            FieldType::Char | FieldType::Bytes => return None,
        })
    }
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, v: &[T]) -> fmt::Result {
            if v.len() == 1 {
                return write!(f, "{}", v[0]);
            }
            f.write_str("[")?;
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                if i == 16 {
                    return write!(f, "… {} more]", v.len() - 16);
                }
                write!(f, "{x}")?;
            }
            f.write_str("]")
        }
        match self {
            FieldValue::F16(v) => list(f, v),
            FieldValue::F32(v) => list(f, v),
            FieldValue::F64(v) => list(f, v),
            FieldValue::I8(v) => list(f, v),
            FieldValue::I16(v) => list(f, v),
            FieldValue::I32(v) => list(f, v),
            FieldValue::I64(v) | FieldValue::Dims(v) => list(f, v),
            FieldValue::BF16(v) => list(f, v),
            FieldValue::Char(s) => write!(f, "{s:?}"),
            FieldValue::Bytes(v) => write!(f, "<{} bytes>", v.len()),
        }
    }
}

macro_rules! from_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for FieldValue { fn from(x: $t) -> FieldValue { FieldValue::$v(vec![x]) } }
        impl From<Vec<$t>> for FieldValue { fn from(x: Vec<$t>) -> FieldValue { FieldValue::$v(x) } }
        impl From<&[$t]> for FieldValue { fn from(x: &[$t]) -> FieldValue { FieldValue::$v(x.to_vec()) } }
    )*};
}
from_scalar!(f16 => F16, f32 => F32, f64 => F64, i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    bf16 => BF16);

impl From<&str> for FieldValue {
    fn from(s: &str) -> FieldValue {
        FieldValue::Char(s.to_string())
    }
}

impl From<String> for FieldValue {
    fn from(s: String) -> FieldValue {
        FieldValue::Char(s)
    }
}

/// A named field.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Field {
    /// Field name, as in the creator's schema.
    pub name: String,
    /// Field value.
    pub value: FieldValue,
}

/// An ordered set of named fields (names are unique; setting a name twice replaces it).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FieldCollection {
    fields: Vec<Field>,
}

macro_rules! getters {
    ($($scalar:ident, $slice:ident, $v:ident, $t:ty);*) => {$(
        /// The first element of a field of this type, if present.
        pub fn $scalar(&self, name: &str) -> Option<$t> {
            self.$slice(name)?.first().copied()
        }
        /// The elements of a field of this type, if present.
        pub fn $slice(&self, name: &str) -> Option<&[$t]> {
            match self.get(name)? {
                FieldValue::$v(v) => Some(v),
                _ => None,
            }
        }
    )*};
}

impl FieldCollection {
    /// An empty collection.
    pub fn new() -> FieldCollection {
        FieldCollection::default()
    }

    /// Adds or replaces a field, builder style.
    pub fn with(mut self, name: &str, value: impl Into<FieldValue>) -> FieldCollection {
        self.set(name, value);
        self
    }

    /// Adds or replaces a field.
    pub fn set(&mut self, name: &str, value: impl Into<FieldValue>) {
        let value = value.into();
        match self.fields.iter_mut().find(|f| f.name == name) {
            Some(f) => f.value = value,
            None => self.fields.push(Field {
                name: name.to_string(),
                value,
            }),
        }
    }

    /// Removes a field, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<FieldValue> {
        let i = self.fields.iter().position(|f| f.name == name)?;
        Some(self.fields.remove(i).value)
    }

    /// The value of a field.
    pub fn get(&self, name: &str) -> Option<&FieldValue> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.value)
    }

    /// True when the field is present.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The fields, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when there are no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// A string field.
    pub fn string(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            FieldValue::Char(s) => Some(s),
            _ => None,
        }
    }

    /// A dims field.
    pub fn dims(&self, name: &str) -> Option<&[i64]> {
        match self.get(name)? {
            FieldValue::Dims(v) => Some(v),
            _ => None,
        }
    }

    /// A bytes field.
    pub fn bytes(&self, name: &str) -> Option<&[u8]> {
        match self.get(name)? {
            FieldValue::Bytes(v) => Some(v),
            _ => None,
        }
    }

    getters!(f16, f16s, F16, f16; f32, f32s, F32, f32; f64, f64s, F64, f64; i8, i8s, I8, i8;
        i16, i16s, I16, i16; i32, i32s, I32, i32; i64, i64s, I64, i64; bf16, bf16s, BF16, bf16);
}

impl FromIterator<Field> for FieldCollection {
    fn from_iter<I: IntoIterator<Item = Field>>(iter: I) -> FieldCollection {
        let mut c = FieldCollection::new();
        for f in iter {
            c.set(&f.name, f.value);
        }
        c
    }
}

/// One entry of a creator's field schema.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldSpec {
    /// Field name.
    pub name: String,
    /// Field type; a value of another type is refused.
    pub ty: FieldType,
    /// Whether the field must be given. An optional field with a `default` is filled in.
    pub required: bool,
    /// Value used when an optional field is absent.
    pub default: Option<FieldValue>,
    /// Fewest elements accepted.
    pub min_len: usize,
    /// Most elements accepted (`None`: no limit).
    pub max_len: Option<usize>,
    /// One line saying what the field means.
    pub doc: String,
}

impl FieldSpec {
    /// A required field of any length ≥ 1.
    pub fn required(name: &str, ty: FieldType, doc: &str) -> FieldSpec {
        FieldSpec {
            name: name.to_string(),
            ty,
            required: true,
            default: None,
            min_len: 1,
            max_len: None,
            doc: doc.to_string(),
        }
    }

    /// An optional field with no default, of any length.
    pub fn optional(name: &str, ty: FieldType, doc: &str) -> FieldSpec {
        FieldSpec {
            required: false,
            min_len: 0,
            ..FieldSpec::required(name, ty, doc)
        }
    }

    /// An optional field filled with `default` when absent.
    pub fn with_default(name: &str, default: impl Into<FieldValue>, doc: &str) -> FieldSpec {
        let default = default.into();
        FieldSpec {
            default: Some(default.clone()),
            ..FieldSpec::optional(name, default.ty(), doc)
        }
    }

    /// Requires exactly one element.
    pub fn scalar(self) -> FieldSpec {
        self.len_range(1, Some(1))
    }

    /// Requires between `min` and `max` elements.
    pub fn len_range(mut self, min: usize, max: Option<usize>) -> FieldSpec {
        self.min_len = min;
        self.max_len = max;
        self
    }

    /// Human-readable length rule, for errors and listings.
    pub fn len_rule(&self) -> String {
        match (self.min_len, self.max_len) {
            (a, Some(b)) if a == b => format!("exactly {a}"),
            (0, None) => "any number of".to_string(),
            (a, None) => format!("at least {a}"),
            (a, Some(b)) => format!("{a} to {b}"),
        }
    }
}

/// Checks `fields` against `schema` for the plugin `key` and returns them with the defaults
/// of absent optional fields filled in. Unknown, missing, mistyped and wrongly sized fields
/// are errors naming the plugin and the field.
pub fn validate_fields(
    key: &PluginKey,
    schema: &[FieldSpec],
    fields: &FieldCollection,
) -> Result<FieldCollection, PluginError> {
    for f in fields.iter() {
        if !schema.iter().any(|s| s.name == f.name) {
            let known: Vec<&str> = schema.iter().map(|s| s.name.as_str()).collect();
            return Err(PluginError::UnknownField {
                key: key.clone(),
                field: f.name.clone(),
                known: known.join(", "),
            });
        }
    }
    let mut out = fields.clone();
    for spec in schema {
        let Some(value) = fields.get(&spec.name) else {
            if spec.required {
                return Err(PluginError::MissingField {
                    key: key.clone(),
                    field: spec.name.clone(),
                });
            }
            if let Some(d) = &spec.default {
                out.set(&spec.name, d.clone());
            }
            continue;
        };
        if value.ty() != spec.ty {
            return Err(PluginError::WrongFieldType {
                key: key.clone(),
                field: spec.name.clone(),
                expected: spec.ty,
                found: value.ty(),
            });
        }
        let n = value.len();
        if n < spec.min_len || spec.max_len.is_some_and(|m| n > m) {
            return Err(PluginError::WrongFieldLength {
                key: key.clone(),
                field: spec.name.clone(),
                expected: spec.len_rule(),
                found: n,
            });
        }
    }
    Ok(out)
}
