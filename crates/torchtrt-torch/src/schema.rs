//! The ExportedProgram JSON (`torch/_export/serde/schema.py`, schema 8): the subset this
//! importer reads. Unknown fields are ignored; unions are objects with one key, and a union
//! member this reader does not know is kept by name so the error about it can name it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{Deserializer, Error as _};
use serde_json::Value;

/// The schema major version this reader reads.
pub const SCHEMA_MAJOR: i64 = 8;
/// The newest schema minor version this reader was written against.
pub const SCHEMA_MINOR: i64 = 17;

/// The top-level object of `models/<name>.json`.
#[derive(Clone, Debug, Deserialize)]
pub struct ExportedProgram {
    /// The graph, its signature and call structure.
    pub graph_module: GraphModule,
    /// Operator-set versions by namespace.
    #[serde(default)]
    pub opset_version: BTreeMap<String, i64>,
    /// Ranges of the program's symbols (and of derived expressions), by name.
    #[serde(default)]
    pub range_constraints: BTreeMap<String, RangeConstraint>,
    /// Schema version the program was written in.
    pub schema_version: SchemaVersion,
    /// The dialects the program was verified as (`ATEN`, `TRAINING`, …).
    #[serde(default)]
    pub verifiers: Vec<String>,
    /// The torch version that wrote it.
    #[serde(default)]
    pub torch_version: String,
}

/// Schema major and minor version.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct SchemaVersion {
    /// Bumped on breaking changes.
    pub major: i64,
    /// Bumped on compatible changes.
    pub minor: i64,
}

/// `min_val..=max_val` of a symbol (`None`: unbounded).
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct RangeConstraint {
    /// Smallest value.
    pub min_val: Option<Num>,
    /// Largest value.
    pub max_val: Option<Num>,
}

/// An integer bound, possibly written as a float or a string (`"Infinity"`) by torch.
#[derive(Clone, Copy, Debug)]
pub struct Num(pub Option<i64>);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        Ok(Num(match Value::deserialize(d)? {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            _ => None,
        }))
    }
}

/// The graph module.
#[derive(Clone, Debug, Deserialize)]
pub struct GraphModule {
    /// The graph.
    pub graph: Graph,
    /// Which graph inputs are user inputs, parameters, buffers or constants, and which
    /// outputs are user outputs.
    pub signature: GraphSignature,
    /// Call structure; entry `""` holds the pytree specs of the inputs and outputs.
    #[serde(default)]
    pub module_call_graph: Vec<ModuleCallEntry>,
}

/// A graph.
#[derive(Clone, Debug, Deserialize)]
pub struct Graph {
    /// Placeholders, in order.
    pub inputs: Vec<Argument>,
    /// Returned values, in order.
    pub outputs: Vec<Argument>,
    /// Nodes in execution order.
    pub nodes: Vec<Node>,
    /// Metadata of every tensor value, by name.
    #[serde(default)]
    pub tensor_values: BTreeMap<String, TensorMeta>,
    /// Symbolic integers, by name.
    #[serde(default)]
    pub sym_int_values: BTreeMap<String, SymInt>,
}

/// One node: `target(inputs) -> outputs`.
#[derive(Clone, Debug, Deserialize)]
pub struct Node {
    /// The op, e.g. `torch.ops.aten.conv2d.default` or `_operator.mul`.
    pub target: String,
    /// Arguments with their schema names.
    pub inputs: Vec<NamedArgument>,
    /// Produced values.
    pub outputs: Vec<Argument>,
    /// Free-form metadata (stack traces, module paths).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The node's name (schema ≥ 8.x; absent in older programs).
    #[serde(default)]
    pub name: Option<String>,
}

/// An argument with the name its operator schema gives it.
#[derive(Clone, Debug, Deserialize)]
pub struct NamedArgument {
    /// The schema name, e.g. `weight`.
    pub name: String,
    /// The value.
    pub arg: Argument,
    /// 1 positional, 2 keyword-only (absent in older programs).
    #[serde(default)]
    pub kind: Option<i64>,
}

/// A symbolic-int argument: a named SymInt value or a literal.
#[derive(Clone, Debug, PartialEq)]
pub enum SymIntArg {
    /// A SymInt produced by another node or a placeholder.
    Name(String),
    /// A literal.
    Int(i64),
}

/// An optional tensor in a list (`Tensor?[]`).
#[derive(Clone, Debug, PartialEq)]
pub enum OptionalTensor {
    /// A tensor, by name.
    Tensor(String),
    /// `None`.
    None,
}

/// A node argument or output (schema `Argument`).
#[derive(Clone, Debug, PartialEq)]
pub enum Argument {
    /// `None`.
    None,
    /// A tensor, by name.
    Tensor(String),
    /// Tensors, by name.
    Tensors(Vec<String>),
    /// An integer.
    Int(i64),
    /// Integers.
    Ints(Vec<i64>),
    /// A float.
    Float(f64),
    /// Floats.
    Floats(Vec<f64>),
    /// A string.
    String(String),
    /// Strings.
    Strings(Vec<String>),
    /// A bool.
    Bool(bool),
    /// Bools.
    Bools(Vec<bool>),
    /// A symbolic or literal int.
    SymInt(SymIntArg),
    /// Symbolic or literal ints.
    SymInts(Vec<SymIntArg>),
    /// A symbolic or literal float (`as_name` / `as_float`).
    SymFloat(SymIntArgFloat),
    /// A symbolic or literal bool.
    SymBool(SymBoolArg),
    /// A torch dtype (`ScalarType` code).
    ScalarType(i64),
    /// A memory format code.
    MemoryFormat(i64),
    /// A layout code.
    Layout(i64),
    /// A device.
    Device(String),
    /// Optional tensors (`Tensor?[]`).
    OptionalTensors(Vec<OptionalTensor>),
    /// One optional tensor (`Tensor?`).
    OptionalTensor(OptionalTensor),
    /// An operator (`as_operator`), by name.
    Operator(String),
    /// A union member this reader does not know, kept by its key (`as_graph`, …).
    Other(String),
}

/// A symbolic or literal float.
#[derive(Clone, Debug, PartialEq)]
pub enum SymIntArgFloat {
    /// A SymFloat, by name.
    Name(String),
    /// A literal.
    Float(f64),
}

/// A symbolic or literal bool.
#[derive(Clone, Debug, PartialEq)]
pub enum SymBoolArg {
    /// A SymBool, by name.
    Name(String),
    /// A literal.
    Bool(bool),
}

impl Argument {
    /// The schema's name for this kind (`as_tensor`, …), for errors.
    pub fn kind(&self) -> &str {
        match self {
            Argument::None => "as_none",
            Argument::Tensor(_) => "as_tensor",
            Argument::Tensors(_) => "as_tensors",
            Argument::Int(_) => "as_int",
            Argument::Ints(_) => "as_ints",
            Argument::Float(_) => "as_float",
            Argument::Floats(_) => "as_floats",
            Argument::String(_) => "as_string",
            Argument::Strings(_) => "as_strings",
            Argument::Bool(_) => "as_bool",
            Argument::Bools(_) => "as_bools",
            Argument::SymInt(_) => "as_sym_int",
            Argument::SymInts(_) => "as_sym_ints",
            Argument::SymFloat(_) => "as_sym_float",
            Argument::SymBool(_) => "as_sym_bool",
            Argument::ScalarType(_) => "as_scalar_type",
            Argument::MemoryFormat(_) => "as_memory_format",
            Argument::Layout(_) => "as_layout",
            Argument::Device(_) => "as_device",
            Argument::OptionalTensors(_) => "as_optional_tensors",
            Argument::OptionalTensor(_) => "as_optional_tensor",
            Argument::Operator(_) => "as_operator",
            Argument::Other(k) => k,
        }
    }
}

/// The one `(key, value)` of a union object.
fn single(v: Value) -> Result<(String, Value), String> {
    match v {
        Value::Object(m) if m.len() == 1 => Ok(m.into_iter().next().expect("one entry")),
        other => Err(format!(
            "expected a union (an object with one key), got {other}"
        )),
    }
}

fn name_of(v: &Value) -> Result<String, String> {
    v.get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("expected {{\"name\": …}}, got {v}"))
}

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// A JSON float as torch writes it (`"Infinity"`, `"-Infinity"`, `"NaN"` as strings).
pub fn float_of(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("bad number {n}")),
        Value::String(s) if s == "Infinity" => Ok(f64::INFINITY),
        Value::String(s) if s == "-Infinity" => Ok(f64::NEG_INFINITY),
        Value::String(s) if s == "NaN" => Ok(f64::NAN),
        other => Err(format!("expected a float, got {other}")),
    }
}

fn sym_int_arg(v: Value) -> Result<SymIntArg, String> {
    let (k, v) = single(v)?;
    match k.as_str() {
        "as_name" => Ok(SymIntArg::Name(parse(v)?)),
        "as_int" => Ok(SymIntArg::Int(parse(v)?)),
        _ => Err(format!("unknown SymIntArgument member `{k}`")),
    }
}

fn optional_tensor(v: Value) -> Result<OptionalTensor, String> {
    let (k, v) = single(v)?;
    match k.as_str() {
        "as_tensor" => Ok(OptionalTensor::Tensor(name_of(&v)?)),
        "as_none" => Ok(OptionalTensor::None),
        _ => Err(format!("unknown OptionalTensorArgument member `{k}`")),
    }
}

fn list<T>(v: Value, f: impl Fn(Value) -> Result<T, String>) -> Result<Vec<T>, String> {
    match v {
        Value::Array(items) => items.into_iter().map(f).collect(),
        other => Err(format!("expected a list, got {other}")),
    }
}

fn argument(v: Value) -> Result<Argument, String> {
    let (k, v) = single(v)?;
    Ok(match k.as_str() {
        "as_none" => Argument::None,
        "as_tensor" => Argument::Tensor(name_of(&v)?),
        "as_tensors" => Argument::Tensors(list(v, |t| name_of(&t))?),
        "as_int" => Argument::Int(parse(v)?),
        "as_ints" => Argument::Ints(parse(v)?),
        "as_float" => Argument::Float(float_of(&v)?),
        "as_floats" => Argument::Floats(list(v, |f| float_of(&f))?),
        "as_string" => Argument::String(parse(v)?),
        "as_strings" => Argument::Strings(parse(v)?),
        "as_bool" => Argument::Bool(parse(v)?),
        "as_bools" => Argument::Bools(parse(v)?),
        "as_sym_int" => Argument::SymInt(sym_int_arg(v)?),
        "as_sym_ints" => Argument::SymInts(list(v, sym_int_arg)?),
        "as_sym_float" => {
            let (k2, v2) = single(v)?;
            Argument::SymFloat(match k2.as_str() {
                "as_name" => SymIntArgFloat::Name(parse(v2)?),
                _ => SymIntArgFloat::Float(float_of(&v2)?),
            })
        }
        "as_sym_bool" => {
            let (k2, v2) = single(v)?;
            Argument::SymBool(match k2.as_str() {
                "as_name" => SymBoolArg::Name(parse(v2)?),
                _ => SymBoolArg::Bool(parse(v2)?),
            })
        }
        "as_scalar_type" => Argument::ScalarType(parse(v)?),
        "as_memory_format" => Argument::MemoryFormat(parse(v)?),
        "as_layout" => Argument::Layout(parse(v)?),
        "as_device" => Argument::Device(
            v.get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ),
        "as_optional_tensors" => Argument::OptionalTensors(list(v, optional_tensor)?),
        "as_optional_tensor" => Argument::OptionalTensor(optional_tensor(v)?),
        "as_operator" => Argument::Operator(parse(v)?),
        _ => Argument::Other(k),
    })
}

impl<'de> Deserialize<'de> for Argument {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Argument, D::Error> {
        argument(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// A symbolic integer: a sympy expression (srepr) over the program's symbols, or a literal.
#[derive(Clone, Debug, PartialEq)]
pub enum SymInt {
    /// `expr_str` with its example value.
    Expr(String, Option<i64>),
    /// A literal.
    Int(i64),
}

impl<'de> Deserialize<'de> for SymInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SymInt, D::Error> {
        let (k, v) = single(Value::deserialize(d)?).map_err(D::Error::custom)?;
        match k.as_str() {
            "as_int" => parse(v).map(SymInt::Int).map_err(D::Error::custom),
            "as_expr" => {
                let expr = v
                    .get("expr_str")
                    .and_then(Value::as_str)
                    .ok_or_else(|| D::Error::custom("SymExpr without expr_str"))?;
                let hint = v
                    .get("hint")
                    .and_then(|h| h.get("as_int"))
                    .and_then(Value::as_i64);
                Ok(SymInt::Expr(expr.to_string(), hint))
            }
            _ => Err(D::Error::custom(format!("unknown SymInt member `{k}`"))),
        }
    }
}

/// Metadata of a tensor value.
#[derive(Clone, Debug, Deserialize)]
pub struct TensorMeta {
    /// `ScalarType` code.
    pub dtype: i64,
    /// Sizes.
    pub sizes: Vec<SymInt>,
    /// Strides, in elements.
    #[serde(default)]
    pub strides: Vec<SymInt>,
    /// Offset into the storage, in elements.
    #[serde(default = "zero_offset")]
    pub storage_offset: SymInt,
    /// `Layout` code (7 strided).
    #[serde(default = "strided")]
    pub layout: i64,
}

fn zero_offset() -> SymInt {
    SymInt::Int(0)
}

fn strided() -> i64 {
    7
}

/// The graph signature.
#[derive(Clone, Debug, Deserialize)]
pub struct GraphSignature {
    /// One per graph input, in order.
    pub input_specs: Vec<InputSpec>,
    /// One per graph output, in order.
    pub output_specs: Vec<OutputSpec>,
}

/// What a graph input is.
#[derive(Clone, Debug)]
pub enum InputSpec {
    /// A user input (tensor or SymInt), by argument.
    User(Argument),
    /// A parameter: placeholder name, parameter FQN.
    Parameter(String, String),
    /// A buffer: placeholder name, buffer FQN, persistent.
    Buffer(String, String, bool),
    /// A lifted tensor constant: placeholder name, constant name.
    TensorConstant(String, String),
    /// A constant input: placeholder name, value.
    Constant(String, Value),
    /// Any other kind (custom objects, tokens), by its key.
    Other(String),
}

impl<'de> Deserialize<'de> for InputSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<InputSpec, D::Error> {
        let (k, v) = single(Value::deserialize(d)?).map_err(D::Error::custom)?;
        let field = |name: &str| -> Result<String, D::Error> {
            v.get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| D::Error::custom(format!("input spec `{k}` without `{name}`")))
        };
        let arg_name = || -> Result<String, D::Error> {
            v.get("arg")
                .ok_or_else(|| D::Error::custom(format!("input spec `{k}` without `arg`")))
                .and_then(|a| name_of(a).map_err(D::Error::custom))
        };
        Ok(match k.as_str() {
            "user_input" => InputSpec::User(
                argument(v.get("arg").cloned().unwrap_or(Value::Null)).map_err(D::Error::custom)?,
            ),
            "parameter" => InputSpec::Parameter(arg_name()?, field("parameter_name")?),
            "buffer" => InputSpec::Buffer(
                arg_name()?,
                field("buffer_name")?,
                v.get("persistent").and_then(Value::as_bool).unwrap_or(true),
            ),
            "tensor_constant" => {
                InputSpec::TensorConstant(arg_name()?, field("tensor_constant_name")?)
            }
            "constant_input" => InputSpec::Constant(
                field("name")?,
                v.get("value").cloned().unwrap_or(Value::Null),
            ),
            _ => InputSpec::Other(k),
        })
    }
}

/// What a graph output is.
#[derive(Clone, Debug)]
pub enum OutputSpec {
    /// A user output.
    User(Argument),
    /// Any other kind (buffer mutations, gradients, tokens), by its key.
    Other(String),
}

impl<'de> Deserialize<'de> for OutputSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OutputSpec, D::Error> {
        let (k, v) = single(Value::deserialize(d)?).map_err(D::Error::custom)?;
        Ok(match k.as_str() {
            "user_output" => OutputSpec::User(
                argument(v.get("arg").cloned().unwrap_or(Value::Null)).map_err(D::Error::custom)?,
            ),
            _ => OutputSpec::Other(k),
        })
    }
}

/// One entry of the module call graph.
#[derive(Clone, Debug, Deserialize)]
pub struct ModuleCallEntry {
    /// Module path (`""` for the root).
    pub fqn: String,
    /// Its signature, for the root at least.
    #[serde(default)]
    pub signature: Option<ModuleCallSignature>,
}

/// A module's pytree specs.
#[derive(Clone, Debug, Deserialize)]
pub struct ModuleCallSignature {
    /// The output pytree spec (JSON text).
    #[serde(default)]
    pub out_spec: String,
    /// The forward's argument names.
    #[serde(default)]
    pub forward_arg_names: Option<Vec<String>>,
}

/// One entry of `data/weights/*_config.json` / `data/constants/*_config.json`.
#[derive(Clone, Debug, Deserialize)]
pub struct PayloadMeta {
    /// The file's name in the payload folder.
    pub path_name: String,
    /// Whether it is pickled (custom objects, tensor subclasses).
    #[serde(default)]
    pub use_pickle: bool,
    /// The tensor's metadata (absent for custom objects).
    #[serde(default)]
    pub tensor_meta: Option<TensorMeta>,
}

/// A payload config: FQN → payload.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PayloadConfig {
    /// Payloads by FQN.
    #[serde(default)]
    pub config: BTreeMap<String, PayloadMeta>,
}
