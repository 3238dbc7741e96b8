//! A loaded program: the ExportedProgram of a `.pt2` archive with its parameters, buffers
//! and constants, its user inputs (with the dims its range constraints allow) and its
//! output names.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek};
use std::path::Path;

use torchtrt_core::Tensor;
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::{DType, DimExpr};

use crate::archive::{Archive, open_file};
use crate::dtype::dtype_from_torch;
use crate::error::{Result, TorchError};
use crate::schema::{
    Argument, ExportedProgram, InputSpec, OutputSpec, PayloadConfig, SCHEMA_MAJOR, SCHEMA_MINOR,
    SymInt, TensorMeta,
};
use crate::sym::parse_expr;
use crate::weights::tensor_from_storage;

/// A program read from an archive.
pub struct Program {
    /// The archive's name, for errors.
    pub label: String,
    /// The program.
    pub exported: ExportedProgram,
    /// Parameters, buffers and tensor constants, by placeholder name.
    pub tensors: HashMap<String, (String, Tensor)>,
}

/// A user input: its name, dtype and sizes (symbolic ones as expressions).
#[derive(Clone, Debug)]
pub struct UserInput {
    /// The placeholder's name, which is the engine input's name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Sizes: literals, or expressions over the program's symbols with their example value.
    pub sizes: Vec<SymInt>,
}

/// Reads a `.pt2` archive.
pub fn load_program(path: impl AsRef<Path>) -> Result<Program> {
    let mut archive = open_file(path.as_ref())?;
    read_program(&mut archive)
}

/// Reads a program from an open archive.
pub fn read_program<R: Read + Seek>(archive: &mut Archive<R>) -> Result<Program> {
    let record = archive.model_record();
    if let Ok(format) = archive.read(&archive.path("archive_format"), 64)
        && format != b"pt2"
    {
        return Err(archive.err(format!(
            "archive_format is `{}`, not `pt2`",
            String::from_utf8_lossy(&format)
        )));
    }
    if let Ok(order) = archive.read(&archive.path("byteorder"), 64)
        && order != b"little"
    {
        return Err(archive.err(format!(
            "byteorder is `{}`; only little-endian archives are read",
            String::from_utf8_lossy(&order)
        )));
    }
    let raw: serde_json::Value = archive.json(&record)?;
    let version = raw.get("schema_version").cloned().unwrap_or_default();
    let major = version.get("major").and_then(|v| v.as_i64()).unwrap_or(-1);
    let minor = version.get("minor").and_then(|v| v.as_i64()).unwrap_or(-1);
    if major != SCHEMA_MAJOR {
        return Err(TorchError::Version {
            path: archive.label().to_string(),
            found_major: major,
            found_minor: minor,
            supported_major: SCHEMA_MAJOR,
            supported_minor: SCHEMA_MINOR,
        });
    }
    if minor > SCHEMA_MINOR {
        tracing::warn!(
            archive = archive.label(),
            "ExportedProgram schema {major}.{minor} is newer than {SCHEMA_MAJOR}.{SCHEMA_MINOR}; reading it as {SCHEMA_MAJOR}.{SCHEMA_MINOR}"
        );
    }
    let exported: ExportedProgram =
        serde_json::from_value(raw).map_err(|e| archive.err(format!("record `{record}`: {e}")))?;
    let tensors = read_payloads(archive, &exported)?;
    Ok(Program {
        label: archive.label().to_string(),
        exported,
        tensors,
    })
}

fn read_config<R: Read + Seek>(archive: &mut Archive<R>, dir: &str) -> Result<PayloadConfig> {
    let prefix = archive.path(&format!("data/{dir}/"));
    let names: Vec<String> = archive
        .names()
        .into_iter()
        .filter(|n| n.starts_with(&prefix) && n.ends_with("_config.json"))
        .collect();
    let mut config = PayloadConfig::default();
    for n in names {
        let part: PayloadConfig = archive.json(&n)?;
        config.config.extend(part.config);
    }
    Ok(config)
}

fn read_payloads<R: Read + Seek>(
    archive: &mut Archive<R>,
    program: &ExportedProgram,
) -> Result<HashMap<String, (String, Tensor)>> {
    let weights = read_config(archive, "weights")?;
    let constants = read_config(archive, "constants")?;
    let mut storages: HashMap<String, Vec<u8>> = HashMap::new();
    let mut out = HashMap::new();
    for spec in &program.graph_module.signature.input_specs {
        let (placeholder, fqn, tables): (&str, &str, &[(&PayloadConfig, &str)]) = match spec {
            InputSpec::Parameter(p, f) => (p, f, &[(&weights, "weights")]),
            InputSpec::Buffer(p, f, _) => {
                (p, f, &[(&weights, "weights"), (&constants, "constants")])
            }
            InputSpec::TensorConstant(p, f) => (p, f, &[(&constants, "constants")]),
            _ => continue,
        };
        let Some((meta, dir)) = tables
            .iter()
            .find_map(|(t, dir)| t.config.get(fqn).map(|m| (m, *dir)))
        else {
            return Err(archive.err(format!(
                "`{fqn}` (input `{placeholder}`) has no entry in data/weights or data/constants"
            )));
        };
        let what = format!("`{fqn}` (data/{dir}/{})", meta.path_name);
        if meta.use_pickle {
            return Err(archive.err(format!(
                "{what} is pickled (a custom object or tensor subclass), which this reader does not read"
            )));
        }
        let tm = meta
            .tensor_meta
            .as_ref()
            .ok_or_else(|| archive.err(format!("{what} has no tensor metadata")))?;
        let record = archive.path(&format!("data/{dir}/{}", meta.path_name));
        if !storages.contains_key(&record) {
            let bytes = archive.read(&record, u64::MAX)?;
            storages.insert(record.clone(), bytes);
        }
        let t = tensor_from_storage(&storages[&record], tm)
            .map_err(|m| archive.err(format!("{what}: {m}")))?;
        out.insert(placeholder.to_string(), (fqn.to_string(), t));
    }
    Ok(out)
}

impl Program {
    /// The program's graph.
    pub fn graph(&self) -> &crate::schema::Graph {
        &self.exported.graph_module.graph
    }

    /// The metadata of the tensor value `name`.
    pub fn meta(&self, name: &str) -> Option<&TensorMeta> {
        self.graph().tensor_values.get(name)
    }

    /// `(min, max)` of every symbol with a range constraint (`None`: unbounded).
    pub fn symbol_ranges(&self) -> BTreeMap<String, (Option<i64>, Option<i64>)> {
        self.exported
            .range_constraints
            .iter()
            .map(|(k, r)| {
                (
                    k.clone(),
                    (r.min_val.and_then(|n| n.0), r.max_val.and_then(|n| n.0)),
                )
            })
            .collect()
    }

    /// The user inputs, in order.
    pub fn user_inputs(&self) -> Result<Vec<UserInput>> {
        let mut out = Vec::new();
        for spec in &self.exported.graph_module.signature.input_specs {
            match spec {
                InputSpec::User(Argument::Tensor(name)) => {
                    let meta = self.meta(name).ok_or_else(|| {
                        TorchError::Program(format!("user input `{name}` has no tensor metadata"))
                    })?;
                    let dtype = dtype_from_torch(meta.dtype)
                        .map_err(|m| TorchError::Program(format!("user input `{name}`: {m}")))?;
                    out.push(UserInput {
                        name: name.clone(),
                        dtype,
                        sizes: meta.sizes.clone(),
                    });
                }
                InputSpec::User(other) => {
                    return Err(TorchError::Program(format!(
                        "a user input of kind {} is not supported: engine inputs are tensors",
                        other.kind()
                    )));
                }
                InputSpec::Other(kind) => {
                    return Err(TorchError::Program(format!(
                        "input spec `{kind}` is not supported (custom objects and effect tokens \
                         have no engine equivalent)"
                    )));
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// The engine dims of a user input: literal sizes fixed, symbolic ones dynamic over the
    /// range the program's constraints allow (an unbounded maximum becomes `default_max`),
    /// optimised for the example value the program was exported with. A size that is a
    /// bare symbol is named after it, so inputs sharing it share the dim; a derived size
    /// (`32*s0`) gets the range of its expression.
    pub fn input_dims(&self, input: &UserInput, default_max: i64) -> Result<Vec<Dim>> {
        let ranges = self.symbol_ranges();
        input
            .sizes
            .iter()
            .enumerate()
            .map(|(axis, s)| match s {
                SymInt::Int(v) => Ok(Dim::Fixed(*v)),
                SymInt::Expr(text, hint) => {
                    let bad = |m: String| {
                        TorchError::Program(format!("user input `{}` dim {axis}: {m}", input.name))
                    };
                    let e = parse_expr(text).map_err(bad)?;
                    let bound = |pick_max: bool| {
                        e.eval(&|s| {
                            let (lo, hi) = ranges.get(s).copied().unwrap_or((Some(0), None));
                            if pick_max {
                                Some(hi.unwrap_or(default_max).min(default_max))
                            } else {
                                Some(lo.unwrap_or(0).max(0))
                            }
                        })
                        .map_err(|e| bad(e.to_string()))
                    };
                    let (min, max) = (bound(false)?, bound(true)?);
                    let opt = hint.unwrap_or(min).clamp(min, max.max(min));
                    let name = match &e {
                        DimExpr::Sym(s) => s.to_string(),
                        _ => format!("{}.{axis}", input.name),
                    };
                    Ok(Dim::dynamic(&name, min, opt, max.max(min)))
                }
            })
            .collect()
    }

    /// The names of the user outputs: the keys of the returned mapping when the program
    /// returns one flat dict (or dict-like model output), else the output specs' names.
    pub fn output_names(&self) -> Result<Vec<String>> {
        let args = self.user_output_args();
        let keys = self.output_keys().filter(|k| k.len() == args.len());
        let mut names: Vec<String> = match keys {
            Some(k) => k,
            None => args
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Argument::Tensor(n) => n.clone(),
                    Argument::SymInt(crate::schema::SymIntArg::Name(n)) => n.clone(),
                    _ => format!("output_{i}"),
                })
                .collect(),
        };
        for i in 0..names.len() {
            let mut k = 1;
            while names[..i].contains(&names[i]) {
                names[i] = format!("{}_{k}", names[i]);
                k += 1;
            }
        }
        Ok(names)
    }

    /// The arguments of the user outputs, in order.
    pub fn user_output_args(&self) -> Vec<&Argument> {
        self.exported
            .graph_module
            .signature
            .output_specs
            .iter()
            .filter_map(|s| match s {
                OutputSpec::User(a) => Some(a),
                OutputSpec::Other(_) => None,
            })
            .collect()
    }

    /// Mapping keys from the root's output pytree spec, when it is one flat mapping.
    fn output_keys(&self) -> Option<Vec<String>> {
        let root = self
            .exported
            .graph_module
            .module_call_graph
            .iter()
            .find(|e| e.fqn.is_empty())?;
        let spec: serde_json::Value =
            serde_json::from_str(&root.signature.as_ref()?.out_spec).ok()?;
        let tree = spec.get(1)?;
        let ty = tree.get("type")?.as_str()?;
        if matches!(
            ty,
            "builtins.tuple" | "builtins.list" | "collections.namedtuple"
        ) {
            return None;
        }
        let children = tree.get("children_spec")?.as_array()?;
        if children
            .iter()
            .any(|c| !c.get("type").is_some_and(|t| t.is_null()))
        {
            return None;
        }
        let keys: Vec<String> = serde_json::from_str(tree.get("context")?.as_str()?).ok()?;
        (keys.len() == children.len()).then_some(keys)
    }
}
