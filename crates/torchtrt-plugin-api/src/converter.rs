//! Custom converters: Rust code that turns one ONNX node into layers of the network being
//! built. A converter sees the node ([`ConverterNode`]) and emits layers through a
//! [`NetworkBuilder`]; libraries export converters with
//! [`export_extension!`](crate::export_extension), and hosts call them through the C ABI.

use crate::dtype::{DType, TensorDesc};
use crate::error::PluginResult;
use crate::field::FieldCollection;
use crate::plugin::PluginKey;

/// An opaque handle to a tensor of the network being built, valid during one conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorHandle(pub i64);

/// A binary element-wise operation with numpy broadcasting. Discriminants are part of the
/// C ABI (`TtrtBinaryOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum BinaryOp {
    /// `a + b`
    Add = 0,
    /// `a - b`
    Sub = 1,
    /// `a * b`
    Mul = 2,
    /// `a / b`
    Div = 3,
    /// `a ^ b`
    Pow = 4,
    /// `max(a, b)`
    Max = 5,
    /// `min(a, b)`
    Min = 6,
}

impl BinaryOp {
    /// Every operation, in discriminant order.
    pub const ALL: [BinaryOp; 7] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
    ];

    /// Converts a C ABI discriminant back into an operation.
    pub fn from_raw(raw: i32) -> Option<BinaryOp> {
        BinaryOp::ALL.get(usize::try_from(raw).ok()?).copied()
    }
}

/// A unary function or activation. The C ABI passes a code (`TtrtUnaryOp`) and two
/// parameters, `alpha` and `beta`, used by the variants that have them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `|x|`
    Abs,
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// `ln x`
    Log,
    /// `√x`
    Sqrt,
    /// `1/x`
    Reciprocal,
    /// Error function.
    Erf,
    /// `max(x, 0)`
    Relu,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `tanh x`
    Tanh,
    /// `x < 0 ? alpha·x : x`
    LeakyRelu {
        /// Negative slope.
        alpha: f32,
    },
    /// `min(max(x, min), max)`
    Clip {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// `max(0, min(1, alpha·x + beta))`
    HardSigmoid {
        /// Slope.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// `x · max(0, min(1, x/6 + 1/2))`
    HardSwish,
    /// `ln(1 + e^x)`
    Softplus,
    /// GELU, erf form.
    Gelu,
}

impl UnaryOp {
    /// The C code and parameters of the operation.
    pub fn to_raw(self) -> (i32, f32, f32) {
        match self {
            UnaryOp::Abs => (0, 0.0, 0.0),
            UnaryOp::Neg => (1, 0.0, 0.0),
            UnaryOp::Exp => (2, 0.0, 0.0),
            UnaryOp::Log => (3, 0.0, 0.0),
            UnaryOp::Sqrt => (4, 0.0, 0.0),
            UnaryOp::Reciprocal => (5, 0.0, 0.0),
            UnaryOp::Erf => (6, 0.0, 0.0),
            UnaryOp::Relu => (7, 0.0, 0.0),
            UnaryOp::Sigmoid => (8, 0.0, 0.0),
            UnaryOp::Tanh => (9, 0.0, 0.0),
            UnaryOp::LeakyRelu { alpha } => (10, alpha, 0.0),
            UnaryOp::Clip { min, max } => (11, min, max),
            UnaryOp::HardSigmoid { alpha, beta } => (12, alpha, beta),
            UnaryOp::HardSwish => (13, 0.0, 0.0),
            UnaryOp::Softplus => (14, 0.0, 0.0),
            UnaryOp::Gelu => (15, 0.0, 0.0),
        }
    }

    /// The operation of a C code and parameters.
    pub fn from_raw(code: i32, alpha: f32, beta: f32) -> Option<UnaryOp> {
        Some(match code {
            0 => UnaryOp::Abs,
            1 => UnaryOp::Neg,
            2 => UnaryOp::Exp,
            3 => UnaryOp::Log,
            4 => UnaryOp::Sqrt,
            5 => UnaryOp::Reciprocal,
            6 => UnaryOp::Erf,
            7 => UnaryOp::Relu,
            8 => UnaryOp::Sigmoid,
            9 => UnaryOp::Tanh,
            10 => UnaryOp::LeakyRelu { alpha },
            11 => UnaryOp::Clip {
                min: alpha,
                max: beta,
            },
            12 => UnaryOp::HardSigmoid { alpha, beta },
            13 => UnaryOp::HardSwish,
            14 => UnaryOp::Softplus,
            15 => UnaryOp::Gelu,
            _ => return None,
        })
    }
}

/// The node a converter converts.
#[derive(Clone, Debug, PartialEq)]
pub struct ConverterNode {
    /// Node name (`op_type#index` for unnamed nodes); put it in error messages.
    pub name: String,
    /// Op type.
    pub op_type: String,
    /// Domain (`""` for the default ONNX domain).
    pub domain: String,
    /// The opset imported for the node's domain.
    pub opset: i64,
    /// Attributes as fields: INT → `i64[1]`, INTS → `i64[n]`, FLOAT → `f32[1]`, FLOATS →
    /// `f32[n]`, STRING → string, STRINGS → string with items separated by NUL bytes,
    /// TENSOR → its elements in their own type (bool and u8 as bytes) plus a `dims` field
    /// `<name>.shape`.
    pub attributes: FieldCollection,
    /// Inputs in order; `None` for omitted optional inputs.
    pub inputs: Vec<Option<TensorHandle>>,
    /// Number of outputs the node declares.
    pub num_outputs: usize,
}

impl ConverterNode {
    /// Input `i`, which must be present; the error names the node.
    pub fn input(&self, i: usize) -> PluginResult<TensorHandle> {
        self.inputs.get(i).copied().flatten().ok_or_else(|| {
            crate::PluginError::InvalidInput(format!("node `{}`: input {i} is required", self.name))
        })
    }
}

/// What a converter builds layers with: the host's network during one conversion (the C
/// table `TtrtNetworkBuilder`). Errors name the layer and the reason.
pub trait NetworkBuilder {
    /// The dtype and shape of a tensor (`-1` for dimensions unknown at build time).
    fn tensor_desc(&self, t: TensorHandle) -> PluginResult<TensorDesc>;

    /// The value's bytes when known at build time (initializers, constants).
    fn tensor_value(&self, t: TensorHandle) -> Option<&[u8]>;

    /// Adds a constant of `desc` (concrete dims) from its little-endian bytes.
    fn add_constant(&mut self, desc: &TensorDesc, data: &[u8]) -> PluginResult<TensorHandle>;

    /// Adds `op(a, b)` with broadcasting.
    fn add_binary(
        &mut self,
        op: BinaryOp,
        a: TensorHandle,
        b: TensorHandle,
    ) -> PluginResult<TensorHandle>;

    /// Adds `op(x)`.
    fn add_unary(&mut self, op: UnaryOp, x: TensorHandle) -> PluginResult<TensorHandle>;

    /// Adds a matrix product (batched, numpy rules), optionally transposing the operands.
    fn add_matmul(
        &mut self,
        a: TensorHandle,
        b: TensorHandle,
        transpose_a: bool,
        transpose_b: bool,
    ) -> PluginResult<TensorHandle>;

    /// Adds an ONNX `Reshape` (0 copies a dimension, -1 is inferred).
    fn add_reshape(&mut self, x: TensorHandle, dims: &[i64]) -> PluginResult<TensorHandle>;

    /// Adds a transpose by `perm`.
    fn add_transpose(&mut self, x: TensorHandle, perm: &[usize]) -> PluginResult<TensorHandle>;

    /// Adds a concatenation along `axis` (negative counts from the end).
    fn add_concat(&mut self, inputs: &[TensorHandle], axis: i64) -> PluginResult<TensorHandle>;

    /// Adds a cast to `dtype`.
    fn add_cast(&mut self, x: TensorHandle, dtype: DType) -> PluginResult<TensorHandle>;

    /// Creates the plugin `key` from `fields` through the registry and adds it as a layer.
    fn add_plugin(
        &mut self,
        key: &PluginKey,
        fields: &FieldCollection,
        inputs: &[TensorHandle],
    ) -> PluginResult<Vec<TensorHandle>>;

    /// Binds the node's output `index` to `t`.
    fn set_output(&mut self, index: usize, t: TensorHandle) -> PluginResult<()>;
}

/// Which nodes a converter handles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConverterOp {
    /// Domain (`""` for the default ONNX domain).
    pub domain: String,
    /// Op type.
    pub op_type: String,
    /// First opset handled.
    pub since_opset: i64,
    /// Last opset handled (`None`: every later one).
    pub until_opset: Option<i64>,
}

impl ConverterOp {
    /// Every opset of `domain::op_type`.
    pub fn new(domain: &str, op_type: &str) -> ConverterOp {
        ConverterOp {
            domain: domain.to_string(),
            op_type: op_type.to_string(),
            since_opset: 1,
            until_opset: None,
        }
    }
}

/// A custom converter (Torch-TensorRT's `--custom-converters`).
pub trait Converter: Send + Sync {
    /// The op and opsets handled.
    fn op(&self) -> ConverterOp;

    /// Adds `node`'s layers through `net` and returns its outputs, one per declared node
    /// output, in order. An error should say what is wrong; the host adds the node's name.
    fn convert(
        &self,
        node: &ConverterNode,
        net: &mut dyn NetworkBuilder,
    ) -> PluginResult<Vec<TensorHandle>>;
}
