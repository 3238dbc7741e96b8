//! Kernel-plugin specs: the TOML a user writes, checked and resolved into [`KernelSpec`].
//! Every name, count and length is checked against limits before anything is built, and
//! every error names the spec and the entry it is about.

use std::collections::BTreeMap;

use serde::Deserialize;
use torchtrt_plugin_api::{DType, FieldType, FieldValue, PluginKey};

use super::expr::{self, Expr, Names};

/// Largest spec text, and largest kernel source, in bytes.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;
const MAX_NAME: usize = 128;
const MAX_PORTS: usize = 64;
const MAX_FIELDS: usize = 64;
const MAX_KERNELS: usize = 16;
const MAX_ARGS: usize = 64;
const MAX_COMBOS: usize = 64;
const MAX_FLAGS: usize = 64;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    namespace: String,
    name: String,
    #[serde(default = "default_version")]
    version: String,
    #[serde(default)]
    doc: String,
    #[serde(default)]
    types: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    fields: Vec<RawField>,
    inputs: Vec<RawPort>,
    outputs: Vec<RawPort>,
    cpu: Option<RawDevice>,
    cuda: Option<RawDevice>,
}

fn default_version() -> String {
    "1".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawField {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    default: Option<Text>,
    #[serde(default)]
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    name: String,
    dtype: String,
    #[serde(default)]
    shape_input: bool,
    shape: Option<Vec<Text>>,
    like: Option<String>,
    alias: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    source: Option<String>,
    source_file: Option<String>,
    #[serde(default)]
    types: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    cflags: Vec<String>,
    #[serde(default)]
    prelude: bool,
    kernels: Vec<RawKernel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    name: String,
    tactic: Option<String>,
    #[serde(default)]
    args: Vec<Text>,
    grid: Option<Vec<Text>>,
    block: Option<Vec<Text>>,
    shared_bytes: Option<Text>,
}

/// A number or an expression where the spec accepts either.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Text {
    Int(i64),
    Float(f64),
    Str(String),
}

impl Text {
    fn as_expr_text(&self) -> String {
        match self {
            Text::Int(v) => v.to_string(),
            Text::Float(v) => v.to_string(),
            Text::Str(s) => s.clone(),
        }
    }
}

/// A port's dtype: fixed, or one of the spec's type variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortType {
    /// This dtype always.
    Fixed(DType),
    /// Type variable `index` of [`KernelSpec::types`].
    Var(usize),
}

/// How an output's shape is stated.
#[derive(Clone, Debug)]
pub(crate) enum OutShape {
    /// The shape of input `index`.
    Like(usize),
    /// Dimensions, in order.
    Dims(Vec<DimEntry>),
}

/// One entry of an output's `shape`.
#[derive(Clone, Debug)]
pub(crate) enum DimEntry {
    /// One dimension.
    One(Expr),
    /// The dimensions `start..end` of input `port` (`x.shape[:-1]`), Python's slice rules.
    Splat {
        port: usize,
        start: Option<i64>,
        end: Option<i64>,
    },
}

/// Parses `NAME.shape[a:b]` (either bound may be missing or negative).
fn parse_splat(text: &str, inputs: &[String]) -> Option<Result<DimEntry, String>> {
    let (name, rest) = text.trim().split_once(".shape[")?;
    let inner = rest.strip_suffix(']')?;
    let (a, b) = inner.split_once(':')?;
    let bound = |t: &str| -> Result<Option<i64>, String> {
        let t = t.trim();
        if t.is_empty() {
            Ok(None)
        } else {
            t.parse::<i64>()
                .map(Some)
                .map_err(|_| format!("`{text}`: slice bounds are integers"))
        }
    };
    let port = match inputs.iter().position(|p| p == name.trim()) {
        Some(p) => p,
        None => return Some(Err(format!("`{text}`: `{}` is not an input", name.trim()))),
    };
    Some(bound(a).and_then(|start| {
        Ok(DimEntry::Splat {
            port,
            start,
            end: bound(b)?,
        })
    }))
}

/// An input or an output.
#[derive(Clone, Debug)]
pub struct Port {
    /// Its name (a C identifier).
    pub name: String,
    /// Its dtype.
    pub dtype: PortType,
    /// Whether it is a shape input (inputs only).
    pub shape_input: bool,
    /// The input it aliases (outputs only): it starts with that input's values and the
    /// kernel updates it in place.
    pub alias: Option<usize>,
    pub(crate) shape: Option<OutShape>,
}

/// A field: a named scalar with a type and maybe a default.
#[derive(Clone, Debug)]
pub struct FieldDef {
    /// Its name.
    pub name: String,
    /// Its type: `i64`, `i32`, `f32` or `f64`.
    pub ty: FieldType,
    /// Its default, when it has one.
    pub default: Option<FieldValue>,
    /// What it means.
    pub doc: String,
}

/// One argument a kernel receives.
#[derive(Clone, Debug)]
pub(crate) enum Arg {
    /// The data of input or output `index` (inputs first).
    Port(usize),
    /// Float field `index`, as its own type (`float` or `double`).
    Float(usize, FieldType),
    /// An integer expression, as `int64_t`.
    Int(Expr),
}

/// One kernel of a device: a function name (with `{T}` standing for the dtype a type
/// variable takes), a tactic name, its arguments and, on CUDA, its launch geometry.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The function's name, with `{VAR}` placeholders.
    pub name: String,
    /// The tactic's name.
    pub tactic: String,
    pub(crate) args: Vec<Arg>,
    pub(crate) grid: Vec<Expr>,
    pub(crate) block: Vec<Expr>,
    pub(crate) shared_bytes: Option<Expr>,
}

/// What a spec gives for one device.
#[derive(Clone, Debug)]
pub struct DeviceSpec {
    /// The C (CPU) or CUDA C source.
    pub source: String,
    /// Per type variable, the dtypes this device implements.
    pub types: Vec<Vec<DType>>,
    /// Extra flags for the C compiler (CPU).
    pub cflags: Vec<String>,
    /// Whether torchtrt's CUDA C elements header is prepended (CUDA).
    pub prelude: bool,
    /// The kernels, the first the default; more than one are tactics.
    pub kernels: Vec<Kernel>,
}

/// A checked kernel-plugin spec.
#[derive(Clone, Debug)]
pub struct KernelSpec {
    /// Its registry key.
    pub key: PluginKey,
    /// What it computes.
    pub doc: String,
    /// Type variables and the dtypes each may take.
    pub types: Vec<(String, Vec<DType>)>,
    /// Fields.
    pub fields: Vec<FieldDef>,
    /// Inputs.
    pub inputs: Vec<Port>,
    /// Outputs.
    pub outputs: Vec<Port>,
    /// The CPU implementation.
    pub cpu: Option<DeviceSpec>,
    /// The CUDA implementation.
    pub cuda: Option<DeviceSpec>,
}

/// Reads the file a spec names (`source_file`), relative to the spec.
pub trait SourceFiles {
    /// The text of `name`; the error says why not.
    fn read(&self, name: &str) -> Result<String, String>;
}

fn check_ident(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.as_bytes()[0].is_ascii_digit()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} `{}` is not an identifier (letters, digits and `_`, at most {MAX_NAME})",
            name.escape_debug()
        ))
    }
}

fn check_count(what: &str, n: usize, max: usize) -> Result<(), String> {
    if n > max {
        Err(format!("{n} {what} (at most {max})"))
    } else {
        Ok(())
    }
}

fn dtype(name: &str) -> Result<DType, String> {
    DType::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        format!("unknown dtype `{name}` (known: {})", known.join(", "))
    })
}

impl KernelSpec {
    /// Parses and checks a spec's TOML; `files` resolves `source_file` entries.
    pub fn parse(text: &str, files: &dyn SourceFiles) -> Result<KernelSpec, String> {
        if text.len() > MAX_SOURCE_BYTES {
            return Err(format!(
                "spec of {} bytes (at most {MAX_SOURCE_BYTES})",
                text.len()
            ));
        }
        let raw: RawSpec = toml::from_str(text).map_err(|e| e.to_string())?;
        let key = PluginKey::new(&raw.namespace, &raw.name, &raw.version);
        resolve(raw, files).map_err(|e| format!("kernel plugin {key}: {e}"))
    }

    /// Names of the ports, inputs then outputs.
    pub(crate) fn port_names(&self) -> Vec<String> {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .map(|p| p.name.clone())
            .collect()
    }

    /// Every assignment of dtypes to the type variables that `device` implements, in a
    /// fixed order (the last variable varies fastest).
    pub fn combos(&self, device: &DeviceSpec) -> Vec<Vec<DType>> {
        device.types.iter().fold(vec![Vec::new()], |acc, options| {
            acc.iter()
                .flat_map(|prefix| {
                    options.iter().map(move |&d| {
                        let mut v = prefix.clone();
                        v.push(d);
                        v
                    })
                })
                .collect()
        })
    }

    /// The dtype of a port under an assignment of the type variables.
    pub fn port_dtype(&self, port: &Port, combo: &[DType]) -> DType {
        match port.dtype {
            PortType::Fixed(d) => d,
            PortType::Var(v) => combo[v],
        }
    }

    /// A kernel's function name under an assignment of the type variables.
    pub fn kernel_name(&self, kernel: &Kernel, combo: &[DType]) -> String {
        self.types
            .iter()
            .zip(combo)
            .fold(kernel.name.clone(), |name, ((var, _), d)| {
                name.replace(&format!("{{{var}}}"), d.name())
            })
    }
}

fn resolve(raw: RawSpec, files: &dyn SourceFiles) -> Result<KernelSpec, String> {
    for (what, s) in [
        ("namespace", &raw.namespace),
        ("name", &raw.name),
        ("version", &raw.version),
    ] {
        if s.len() > MAX_NAME || s.chars().any(char::is_control) {
            return Err(format!(
                "{what} is longer than {MAX_NAME} or holds control characters"
            ));
        }
    }
    check_ident("name", &raw.name)?;
    check_count("type variables", raw.types.len(), 8)?;
    let mut types = Vec::new();
    for (var, names) in &raw.types {
        check_ident("type variable", var)?;
        check_count(&format!("dtypes of `{var}`"), names.len(), 16)?;
        if names.is_empty() {
            return Err(format!("type variable `{var}` lists no dtypes"));
        }
        let ds = names
            .iter()
            .map(|n| dtype(n))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("type variable `{var}`: {e}"))?;
        types.push((var.clone(), ds));
    }
    let fields = resolve_fields(&raw.fields)?;
    check_count("inputs", raw.inputs.len(), MAX_PORTS)?;
    check_count("outputs", raw.outputs.len(), MAX_PORTS)?;
    if raw.outputs.is_empty() {
        return Err("no outputs".into());
    }
    let mut names: Vec<String> = Vec::new();
    for p in raw.inputs.iter().chain(&raw.outputs) {
        check_ident("port", &p.name)?;
        if names.contains(&p.name) || fields.iter().any(|f| f.name == p.name) {
            return Err(format!("`{}` is declared twice", p.name));
        }
        names.push(p.name.clone());
    }
    let port_type = |p: &RawPort| -> Result<PortType, String> {
        match types.iter().position(|(v, _)| *v == p.dtype) {
            Some(i) => Ok(PortType::Var(i)),
            None => dtype(&p.dtype)
                .map(PortType::Fixed)
                .map_err(|e| format!("port `{}`: {e} or type variable", p.name)),
        }
    };
    let shape_ports: Vec<usize> = raw
        .inputs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.shape_input)
        .map(|(i, _)| i)
        .collect();
    let int_fields: Vec<(usize, &str)> = fields
        .iter()
        .enumerate()
        .filter(|(_, f)| is_int(f.ty))
        .map(|(i, f)| (i, f.name.as_str()))
        .collect();
    let input_names = &names[..raw.inputs.len()];
    let shape_names = Names {
        ports: input_names,
        shape_ports: &shape_ports,
        int_fields: &int_fields,
        threads: false,
    };
    let mut inputs = Vec::new();
    for p in &raw.inputs {
        if p.shape.is_some() || p.like.is_some() || p.alias.is_some() {
            return Err(format!(
                "input `{}`: only outputs have `shape`, `like` or `alias`",
                p.name
            ));
        }
        let dtype = port_type(p)?;
        if p.shape_input && !matches!(dtype, PortType::Fixed(DType::I64 | DType::I32)) {
            return Err(format!("shape input `{}` must be i64 or i32", p.name));
        }
        inputs.push(Port {
            name: p.name.clone(),
            dtype,
            shape_input: p.shape_input,
            alias: None,
            shape: None,
        });
    }
    let mut outputs = Vec::new();
    for p in &raw.outputs {
        if p.shape_input {
            return Err(format!("output `{}` cannot be a shape input", p.name));
        }
        let input_index = |what: &str, name: &str| {
            input_names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| format!("output `{}`: `{what} = \"{name}\"` names no input", p.name))
        };
        let alias = p
            .alias
            .as_deref()
            .map(|a| input_index("alias", a))
            .transpose()?;
        let shape = match (&p.shape, &p.like, alias) {
            (Some(dims), None, None) => {
                check_count("dimensions", dims.len(), 8)?;
                OutShape::Dims(
                    dims.iter()
                        .map(|d| {
                            let text = d.as_expr_text();
                            parse_splat(&text, input_names).unwrap_or_else(|| {
                                expr::parse(&text, &shape_names).map(DimEntry::One)
                            })
                        })
                        .collect::<Result<_, _>>()
                        .map_err(|e| format!("output `{}` shape: {e}", p.name))?,
                )
            }
            (None, Some(like), None) => OutShape::Like(input_index("like", like)?),
            (None, None, Some(i)) => OutShape::Like(i),
            _ => {
                return Err(format!(
                    "output `{}` needs exactly one of `shape` (expressions), `like` (an input) \
                     or `alias` (an input it updates in place)",
                    p.name
                ));
            }
        };
        let dtype = port_type(p)?;
        if let Some(i) = alias
            && inputs[i].dtype != dtype
        {
            return Err(format!(
                "output `{}` aliases input `{}` but has another dtype",
                p.name, inputs[i].name
            ));
        }
        if let PortType::Var(v) = dtype
            && !inputs.iter().any(|i| i.dtype == dtype)
        {
            return Err(format!(
                "output `{}` has type `{}`, which no input has",
                p.name, types[v].0
            ));
        }
        outputs.push(Port {
            name: p.name.clone(),
            dtype,
            shape_input: false,
            alias,
            shape: Some(shape),
        });
    }
    let mut spec = KernelSpec {
        key: PluginKey::new(&raw.namespace, &raw.name, &raw.version),
        doc: raw.doc,
        types,
        fields,
        inputs,
        outputs,
        cpu: None,
        cuda: None,
    };
    if raw.cpu.is_none() && raw.cuda.is_none() {
        return Err("neither a `[cpu]` nor a `[cuda]` implementation".into());
    }
    spec.cpu = raw
        .cpu
        .as_ref()
        .map(|d| resolve_device(&spec, d, files, false))
        .transpose()
        .map_err(|e| format!("[cpu]: {e}"))?;
    spec.cuda = raw
        .cuda
        .as_ref()
        .map(|d| resolve_device(&spec, d, files, true))
        .transpose()
        .map_err(|e| format!("[cuda]: {e}"))?;
    Ok(spec)
}

fn is_int(ty: FieldType) -> bool {
    matches!(ty, FieldType::I64 | FieldType::I32)
}

fn resolve_fields(raw: &[RawField]) -> Result<Vec<FieldDef>, String> {
    check_count("fields", raw.len(), MAX_FIELDS)?;
    let mut out: Vec<FieldDef> = Vec::new();
    for f in raw {
        check_ident("field", &f.name)?;
        if f.name == "threads" || out.iter().any(|o| o.name == f.name) {
            return Err(format!("field `{}` is declared twice or reserved", f.name));
        }
        let ty = match f.ty.as_str() {
            "i64" => FieldType::I64,
            "i32" => FieldType::I32,
            "f32" => FieldType::F32,
            "f64" => FieldType::F64,
            other => {
                return Err(format!(
                    "field `{}`: type `{other}` (kernel plugins take i64, i32, f32 or f64)",
                    f.name
                ));
            }
        };
        let default = f
            .default
            .as_ref()
            .map(|d| field_value(ty, d))
            .transpose()
            .map_err(|e| format!("field `{}` default: {e}", f.name))?;
        out.push(FieldDef {
            name: f.name.clone(),
            ty,
            default,
            doc: f.doc.clone(),
        });
    }
    Ok(out)
}

fn field_value(ty: FieldType, v: &Text) -> Result<FieldValue, String> {
    let value = match (ty, v) {
        (FieldType::I64, Text::Int(i)) => FieldValue::I64(vec![*i]),
        (FieldType::I32, Text::Int(i)) => FieldValue::I32(vec![
            i32::try_from(*i).map_err(|_| format!("{i} does not fit i32"))?,
        ]),
        (FieldType::F32, Text::Int(i)) => FieldValue::F32(vec![*i as f32]),
        (FieldType::F32, Text::Float(x)) => FieldValue::F32(vec![*x as f32]),
        (FieldType::F64, Text::Int(i)) => FieldValue::F64(vec![*i as f64]),
        (FieldType::F64, Text::Float(x)) => FieldValue::F64(vec![*x]),
        _ => return Err(format!("not a {ty} number")),
    };
    Ok(value)
}

fn resolve_device(
    spec: &KernelSpec,
    raw: &RawDevice,
    files: &dyn SourceFiles,
    cuda: bool,
) -> Result<DeviceSpec, String> {
    let source = match (&raw.source, &raw.source_file) {
        (Some(s), None) => s.clone(),
        (None, Some(f)) => files
            .read(f)
            .map_err(|e| format!("source_file `{f}`: {e}"))?,
        _ => return Err("needs exactly one of `source` or `source_file`".into()),
    };
    if source.len() > MAX_SOURCE_BYTES {
        return Err(format!(
            "source of {} bytes (at most {MAX_SOURCE_BYTES})",
            source.len()
        ));
    }
    if cuda && !raw.cflags.is_empty() {
        return Err("`cflags` are for the CPU's C compiler".into());
    }
    if !cuda && raw.prelude {
        return Err("`prelude` is for CUDA sources".into());
    }
    check_count("cflags", raw.cflags.len(), MAX_FLAGS)?;
    for flag in &raw.cflags {
        if !flag.starts_with('-') || flag.len() > 256 || flag.chars().any(char::is_control) {
            return Err(format!(
                "cflag `{}` is not a compiler option",
                flag.escape_debug()
            ));
        }
        if ["-o", "-shared", "-c", "-E", "-S"].contains(&flag.as_str()) {
            return Err(format!("cflag `{flag}` would change what is built"));
        }
    }
    for var in raw.types.keys() {
        if !spec.types.iter().any(|(v, _)| v == var) {
            return Err(format!("`types.{var}` is not a type variable of the spec"));
        }
    }
    let mut types = Vec::new();
    for (var, all) in &spec.types {
        let narrowed = match raw.types.get(var) {
            None => all.clone(),
            Some(names) => {
                let ds = names
                    .iter()
                    .map(|n| dtype(n))
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(d) = ds.iter().find(|d| !all.contains(d)) {
                    return Err(format!(
                        "`types.{var}` lists {d}, which the spec's `{var}` does not"
                    ));
                }
                if ds.is_empty() {
                    return Err(format!("`types.{var}` lists no dtypes"));
                }
                ds
            }
        };
        types.push(narrowed);
    }
    check_count("kernels", raw.kernels.len(), MAX_KERNELS)?;
    if raw.kernels.is_empty() {
        return Err("no kernels".into());
    }
    let device = DeviceSpec {
        source,
        types,
        cflags: raw.cflags.clone(),
        prelude: raw.prelude,
        kernels: Vec::new(),
    };
    let combos = spec.combos(&device).len();
    check_count("dtype combinations", combos, MAX_COMBOS)?;
    let mut kernels: Vec<Kernel> = Vec::new();
    for k in &raw.kernels {
        let kernel =
            resolve_kernel(spec, k, cuda).map_err(|e| format!("kernel `{}`: {e}", k.name))?;
        if kernels.iter().any(|o| o.tactic == kernel.tactic) {
            return Err(format!(
                "two kernels are tactic `{}`; give each a distinct `tactic`",
                kernel.tactic
            ));
        }
        for combo in spec.combos(&device) {
            check_ident("kernel name", &spec.kernel_name(&kernel, &combo))
                .map_err(|e| format!("{e} (placeholders are the type variables in braces)"))?;
        }
        kernels.push(kernel);
    }
    Ok(DeviceSpec { kernels, ..device })
}

fn resolve_kernel(spec: &KernelSpec, raw: &RawKernel, cuda: bool) -> Result<Kernel, String> {
    if raw.name.len() > MAX_NAME {
        return Err(format!("name longer than {MAX_NAME}"));
    }
    let tactic = raw.tactic.clone().unwrap_or_else(|| raw.name.clone());
    if tactic.is_empty() || tactic.len() > 63 || tactic.chars().any(char::is_control) {
        return Err("a tactic name has 1 to 63 printable characters".into());
    }
    check_count("arguments", raw.args.len(), MAX_ARGS)?;
    let ports = spec.port_names();
    let shape_ports: Vec<usize> = spec
        .inputs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.shape_input)
        .map(|(i, _)| i)
        .collect();
    let int_fields: Vec<(usize, &str)> = spec
        .fields
        .iter()
        .enumerate()
        .filter(|(_, f)| is_int(f.ty))
        .map(|(i, f)| (i, f.name.as_str()))
        .collect();
    let names = Names {
        ports: &ports,
        shape_ports: &shape_ports,
        int_fields: &int_fields,
        threads: !cuda,
    };
    let args = raw
        .args
        .iter()
        .map(|a| {
            let text = a.as_expr_text();
            let t = text.trim();
            if let Some(i) = ports.iter().position(|p| p == t) {
                return Ok(Arg::Port(i));
            }
            if let Some((i, f)) = spec
                .fields
                .iter()
                .enumerate()
                .find(|(_, f)| f.name == t && !is_int(f.ty))
            {
                return Ok(Arg::Float(i, f.ty));
            }
            expr::parse(t, &names).map(Arg::Int)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let geometry = |what: &str, v: &Option<Vec<Text>>| -> Result<Vec<Expr>, String> {
        match (cuda, v) {
            (true, Some(dims)) if (1..=3).contains(&dims.len()) => dims
                .iter()
                .map(|d| expr::parse(&d.as_expr_text(), &names))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{what}: {e}")),
            (true, _) => Err(format!("`{what}` needs 1 to 3 expressions")),
            (false, None) => Ok(Vec::new()),
            (false, Some(_)) => Err(format!("`{what}` is for CUDA kernels")),
        }
    };
    let grid = geometry("grid", &raw.grid)?;
    let block = geometry("block", &raw.block)?;
    let shared_bytes = match (&raw.shared_bytes, cuda) {
        (None, _) => None,
        (Some(t), true) => {
            Some(expr::parse(&t.as_expr_text(), &names).map_err(|e| format!("shared_bytes: {e}"))?)
        }
        (Some(_), false) => return Err("`shared_bytes` is for CUDA kernels".into()),
    };
    Ok(Kernel {
        name: raw.name.clone(),
        tactic,
        args,
        grid,
        block,
        shared_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoFiles;

    impl SourceFiles for NoFiles {
        fn read(&self, name: &str) -> Result<String, String> {
            Err(format!("no file {name}"))
        }
    }

    const GOOD: &str = r#"
namespace = "t"
name = "Op"
[types]
T = ["f32", "f16"]
[[fields]]
name = "k"
type = "i64"
default = 3
[[fields]]
name = "scale"
type = "f32"
[[inputs]]
name = "x"
dtype = "T"
[[inputs]]
name = "sizes"
dtype = "i64"
shape_input = true
[[outputs]]
name = "y"
dtype = "T"
shape = ["x.shape[:-1]", "sizes.value[0] * k"]
[[outputs]]
name = "count"
dtype = "i64"
shape = [1]
[cuda]
source = "extern \"C\" __global__ void op_f32() {}"
types = { T = ["f32"] }
[[cuda.kernels]]
name = "op_{T}"
grid = ["cdiv(numel(y), 128)"]
block = [128]
args = ["x", "y", "numel(x)", "scale", "k"]
"#;

    fn parse(text: &str) -> Result<KernelSpec, String> {
        KernelSpec::parse(text, &NoFiles)
    }

    #[test]
    fn a_good_spec_resolves_ports_fields_and_kernels() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.key.to_string(), "t::Op@1");
        assert_eq!(s.inputs.len(), 2);
        assert!(s.inputs[1].shape_input);
        assert_eq!(s.fields[0].default, Some(FieldValue::I64(vec![3])));
        let cuda = s.cuda.as_ref().unwrap();
        assert_eq!(s.combos(cuda), [vec![DType::F32]]);
        assert_eq!(s.kernel_name(&cuda.kernels[0], &[DType::F32]), "op_f32");
        let kinds: Vec<&str> = cuda.kernels[0]
            .args
            .iter()
            .map(|a| match a {
                Arg::Port(_) => "port",
                Arg::Float(..) => "float",
                Arg::Int(_) => "int",
            })
            .collect();
        assert_eq!(kinds, ["port", "port", "int", "float", "int"]);
    }

    #[test]
    fn bad_specs_are_refused_naming_what_and_where() {
        let cases: &[(&str, &str, &str)] = &[
            ("name = \"Op\"", "name = \"Op-1\"", "not an identifier"),
            (
                "T = [\"f32\", \"f16\"]",
                "T = [\"f32\", \"f17\"]",
                "unknown dtype `f17`",
            ),
            ("type = \"i64\"", "type = \"string\"", "kernel plugins take"),
            ("default = 3", "default = 3.5", "not a i64 number"),
            ("shape_input = true", "shape_input = 1", "invalid type"),
            (
                "\"sizes.value[0] * k\"",
                "\"sizes.value[0] * q\"",
                "output `y` shape: `sizes.value[0] * q`: `q` is not an integer field",
            ),
            (
                "\"x.shape[:-1]\"",
                "\"z.shape[:-1]\"",
                "`z` is not an input",
            ),
            (
                "types = { T = [\"f32\"] }",
                "types = { T = [\"i8\"] }",
                "lists i8",
            ),
            (
                "types = { T = [\"f32\"] }",
                "types = { U = [\"f32\"] }",
                "`types.U`",
            ),
            (
                "name = \"op_{T}\"",
                "name = \"op_{U}\"",
                "kernel name `op_{U}`",
            ),
            ("block = [128]", "block = []", "`block` needs 1 to 3"),
            (
                "args = [\"x\",",
                "args = [\"w\",",
                "`w` is not an integer field",
            ),
            (
                "[cuda]",
                "[cuda]\ncflags = [\"-O3\"]",
                "`cflags` are for the CPU",
            ),
            ("name = \"count\"", "name = \"x\"", "`x` is declared twice"),
            (
                "dtype = \"i64\"\nshape_input",
                "dtype = \"f32\"\nshape_input",
                "must be i64 or i32",
            ),
            ("shape = [1]", "like = \"y\"", "names no input"),
            ("shape = [1]", "", "exactly one of `shape`"),
            (
                "[[fields]]\nname = \"k\"",
                "[[fields]]\nname = \"threads\"",
                "reserved",
            ),
            (
                "namespace = \"t\"",
                "namespace = \"t\"\nextra = 1",
                "unknown field `extra`",
            ),
        ];
        for (from, to, want) in cases {
            assert!(GOOD.contains(from), "{from}");
            let e = parse(&GOOD.replacen(from, to, 1)).unwrap_err();
            assert!(e.contains(want), "{from} → {to}: {e}");
        }
        let no_impl = GOOD[..GOOD.find("[cuda]").unwrap()].to_string();
        assert!(
            parse(&no_impl)
                .unwrap_err()
                .contains("neither a `[cpu]` nor a `[cuda]`")
        );
        let file = GOOD.replace("source = \"extern", "source_file = \"k.cu\"\n#\"extern");
        assert!(
            parse(&file)
                .unwrap_err()
                .contains("source_file `k.cu`: no file k.cu")
        );
        let many =
            format!("{GOOD}[[cuda.kernels]]\nname = \"op_{{T}}\"\ngrid = [1]\nblock = [1]\n");
        assert!(parse(&many).unwrap_err().contains("two kernels are tactic"));
        let huge = format!("{GOOD}#{}", "x".repeat(MAX_SOURCE_BYTES));
        assert!(parse(&huge).unwrap_err().contains("at most"));
    }
}
