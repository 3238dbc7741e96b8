//! The model configuration (Triton's `config.pbtxt`, handed to the backend as JSON): the
//! backend's parameters, and completing or checking inputs, outputs and `max_batch_size`
//! against the engine.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use torchtrt::plugin_api::{DType, DimExpr};
use torchtrt::{Dim, Engine};

use crate::dtype;
use crate::error::{BackendError, Result};

/// The backend's `parameters` of a model configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Extension libraries (plugins, converters, custom ops) to load before the model:
    /// `plugins`, `custom_converters` and `custom_torch_ops`, comma-separated, relative to
    /// the model's folder unless absolute.
    pub libraries: Vec<PathBuf>,
    /// `precision`: `f32` (default), `f16` or `bf16`, for models compiled at load.
    pub precision: DType,
    /// `dynamic_range`: `MIN;OPT;MAX` of the dims an ONNX model leaves dynamic (default:
    /// `1;B;B` with `B` = `max_batch_size` when it is set, else the importer's default).
    pub dynamic_range: Option<(i64, i64, i64)>,
    /// `device`: the device of `KIND_MODEL` instances and of the engine the configuration
    /// is completed from (`cpu`, `cuda`, `cuda:N`); by default the first instance group's.
    pub device: Option<String>,
}

impl Params {
    /// Reads the parameters of `config`; library paths are resolved against `model_dir`.
    pub fn parse(config: &Value, model_dir: &Path) -> Result<Params> {
        let get = |key: &str| -> Option<String> {
            config
                .get("parameters")?
                .get(key)?
                .get("string_value")?
                .as_str()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        let mut libraries = Vec::new();
        for key in ["plugins", "custom_converters", "custom_torch_ops"] {
            for lib in get(key).iter().flat_map(|v| v.split(',')) {
                let lib = Path::new(lib.trim());
                libraries.push(if lib.is_absolute() {
                    lib.to_path_buf()
                } else {
                    model_dir.join(lib)
                });
            }
        }
        let precision = match get("precision").as_deref() {
            None | Some("f32" | "fp32") => DType::F32,
            Some("f16" | "fp16") => DType::F16,
            Some("bf16") => DType::BF16,
            Some(other) => {
                return Err(BackendError::invalid(format!(
                    "parameter precision = `{other}` is not f32, f16 or bf16"
                )));
            }
        };
        let dynamic_range = get("dynamic_range").map(|v| parse_range(&v)).transpose()?;
        Ok(Params {
            libraries,
            precision,
            dynamic_range,
            device: get("device"),
        })
    }
}

/// The device of the configuration's first instance group: `cuda:N` for `KIND_GPU` (its
/// first GPU), else `cpu`.
pub fn first_group_device(config: &Value) -> String {
    let Some(group) = config
        .get("instance_group")
        .and_then(Value::as_array)
        .and_then(|g| g.first())
    else {
        return "cpu".into();
    };
    if group.get("kind").and_then(Value::as_str) != Some("KIND_GPU") {
        return "cpu".into();
    }
    let gpu = group
        .get("gpus")
        .and_then(Value::as_array)
        .and_then(|g| g.first())
        .and_then(Value::as_i64)
        .unwrap_or(0);
    format!("cuda:{gpu}")
}

fn parse_range(text: &str) -> Result<(i64, i64, i64)> {
    let bad = || {
        BackendError::invalid(format!(
            "parameter dynamic_range = `{text}` is not MIN;OPT;MAX with 1 <= MIN <= OPT <= MAX"
        ))
    };
    let v: Vec<i64> = text
        .split(';')
        .map(|p| p.trim().parse::<i64>().map_err(|_| bad()))
        .collect::<Result<_>>()?;
    match v[..] {
        [min, opt, max] if 1 <= min && min <= opt && opt <= max => Ok((min, opt, max)),
        _ => Err(bad()),
    }
}

/// One engine input or output as the configuration sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dims, `-1` where the size is known only at run time.
    pub dims: Vec<i64>,
}

/// An engine's inputs and outputs, and whether it batches along its first dim.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineIo {
    /// Inputs in engine order.
    pub inputs: Vec<TensorInfo>,
    /// Outputs in engine order.
    pub outputs: Vec<TensorInfo>,
    /// The largest batch when every input's first dim is one dynamic dim (from 1) that is
    /// also every output's first dim, and no output is [`EngineIo::sized`] (such an output
    /// cannot be split back into requests): what `max_batch_size` may be at most.
    pub batch_max: Option<i64>,
    /// Some output's length is decided by the run (non-maximum suppression's selection).
    pub sized: bool,
}

impl EngineIo {
    /// The description of `engine`.
    pub fn of(engine: &Engine) -> EngineIo {
        let plan = engine.plan();
        let inputs = plan
            .inputs
            .iter()
            .map(|i| TensorInfo {
                name: i.name.clone(),
                dtype: i.dtype,
                dims: i
                    .dims
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(v) => *v,
                        Dim::Dynamic { .. } => -1,
                    })
                    .collect(),
            })
            .collect();
        let outputs: Vec<TensorInfo> = engine
            .outputs()
            .into_iter()
            .map(|o| TensorInfo {
                dims: o.shape.iter().map(|d| d.as_const().unwrap_or(-1)).collect(),
                name: o.name,
                dtype: o.dtype,
            })
            .collect();
        let mut symbol = None;
        let mut batch_max = Some(i64::MAX);
        for i in &plan.inputs {
            match i.dims.first() {
                Some(Dim::Dynamic { name, min, max, .. })
                    if *min <= 1 && symbol.get_or_insert(name.clone()) == name =>
                {
                    batch_max = batch_max.map(|b| b.min(*max));
                }
                _ => batch_max = None,
            }
        }
        let batched_outputs = symbol.as_ref().is_some_and(|s| {
            engine
                .outputs()
                .iter()
                .all(|o| o.shape.first() == Some(&DimExpr::sym(s)))
        });
        let sized = engine.data_dependent_outputs().contains(&true);
        if plan.inputs.is_empty() || !batched_outputs || sized {
            batch_max = None;
        }
        EngineIo {
            inputs,
            outputs,
            batch_max,
            sized,
        }
    }
}

/// Completes `config` from the engine when `auto` (Triton's auto-complete is on), and checks
/// it: `max_batch_size` (set to the engine's largest batch when it is 0 and the engine
/// batches, unless the listed inputs keep the batch dim), inputs and outputs (missing ones
/// added with the engine's dtype and dims; listed ones checked for name, dtype and dims).
/// Returns the `max_batch_size` in force.
pub fn complete(config: &mut Value, io: &EngineIo, auto: bool) -> Result<i64> {
    let listed_rank = |key: &str| -> Vec<(String, usize)> {
        config
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|e| {
                        let name = e.get("name").and_then(Value::as_str).unwrap_or("");
                        (name.to_string(), dims_of(e).map_or(0, |d| d.len()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut max_batch = config
        .get("max_batch_size")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if max_batch > 0 {
        let Some(limit) = io.batch_max else {
            return Err(BackendError::invalid(format!(
                "max_batch_size is {max_batch}, but the engine does not batch: its inputs \
                 need one shared dynamic first dim from 1 that is also its outputs' first \
                 dim (inputs: {})",
                describe(&io.inputs)
            )));
        };
        if max_batch > limit {
            return Err(BackendError::invalid(format!(
                "max_batch_size is {max_batch}, above the engine's largest batch {limit}"
            )));
        }
    } else if auto && let Some(limit) = io.batch_max {
        let keeps_batch_dim = listed_rank("input").iter().any(|(name, rank)| {
            io.inputs
                .iter()
                .any(|i| &i.name == name && i.dims.len() == *rank)
        });
        if !keeps_batch_dim {
            max_batch = limit.min(i32::MAX as i64);
            config["max_batch_size"] = json!(max_batch);
        }
    }
    let skip = usize::from(max_batch > 0);
    for (key, tensors) in [("input", &io.inputs), ("output", &io.outputs)] {
        let mut listed = match config.get(key).and_then(Value::as_array) {
            Some(a) => a.clone(),
            None => Vec::new(),
        };
        if auto {
            for entry in &mut listed {
                fill_entry(entry, tensors, skip);
            }
        }
        for entry in &listed {
            check_entry(key, entry, tensors, skip)?;
        }
        if !auto {
            continue;
        }
        let mut all = listed.clone();
        for t in tensors.iter() {
            let present = listed
                .iter()
                .any(|e| e.get("name").and_then(Value::as_str) == Some(t.name.as_str()));
            if !present && (key == "input" || listed.is_empty()) {
                all.push(json!({
                    "name": t.name,
                    "data_type": dtype::config_name(t.dtype),
                    "dims": t.dims[skip..],
                }));
            }
        }
        config[key] = Value::Array(all);
    }
    Ok(max_batch)
}

fn dims_of(entry: &Value) -> Option<Vec<i64>> {
    entry
        .get("dims")?
        .as_array()?
        .iter()
        .map(|d| {
            d.as_i64()
                .or_else(|| d.as_str().and_then(|s| s.parse().ok()))
        })
        .collect()
}

/// Fills what a listed entry leaves unset (`data_type` `TYPE_INVALID`, no `dims`) from the
/// engine's tensor of the same name.
fn fill_entry(entry: &mut Value, tensors: &[TensorInfo], skip: usize) {
    let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
    let Some(t) = tensors.iter().find(|t| t.name == name) else {
        return;
    };
    let unset_type = entry
        .get("data_type")
        .and_then(Value::as_str)
        .is_none_or(|ty| ty == "TYPE_INVALID");
    if unset_type {
        entry["data_type"] = json!(dtype::config_name(t.dtype));
    }
    if dims_of(entry).is_none_or(|d| d.is_empty()) && t.dims.len() > skip {
        entry["dims"] = json!(t.dims[skip..]);
    }
}

fn check_entry(key: &str, entry: &Value, tensors: &[TensorInfo], skip: usize) -> Result<()> {
    let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
    let Some(t) = tensors.iter().find(|t| t.name == name) else {
        return Err(BackendError::invalid(format!(
            "{key} `{name}` of the configuration is not one of the engine's: {}",
            describe(tensors)
        )));
    };
    if let Some(ty) = entry.get("data_type").and_then(Value::as_str)
        && dtype::from_config_name(ty) != Some(t.dtype)
    {
        return Err(BackendError::invalid(format!(
            "{key} `{name}` is {ty} in the configuration, {} in the engine",
            dtype::config_name(t.dtype)
        )));
    }
    let dims = dims_of(entry).unwrap_or_default();
    let want = &t.dims[skip.min(t.dims.len())..];
    let fits = dims.len() == want.len()
        && dims
            .iter()
            .zip(want)
            .all(|(&c, &e)| c == -1 || e == -1 || c == e);
    if !fits {
        let batch = if skip == 1 {
            " (max_batch_size > 0: the batch dim is left out)"
        } else {
            ""
        };
        return Err(BackendError::invalid(format!(
            "{key} `{name}` has dims {dims:?} in the configuration, the engine's are \
             {want:?}{batch}"
        )));
    }
    Ok(())
}

fn describe(tensors: &[TensorInfo]) -> String {
    tensors
        .iter()
        .map(|t| format!("{} {} {:?}", t.name, dtype::config_name(t.dtype), t.dims))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(batch_max: Option<i64>) -> EngineIo {
        EngineIo {
            inputs: vec![TensorInfo {
                name: "x".into(),
                dtype: DType::F32,
                dims: vec![-1, 3, 8, 8],
            }],
            outputs: vec![TensorInfo {
                name: "y".into(),
                dtype: DType::F32,
                dims: vec![-1, 10],
            }],
            batch_max,
            sized: false,
        }
    }

    #[test]
    fn auto_complete_fills_batch_inputs_and_outputs() {
        let mut c = json!({"name": "m", "max_batch_size": 0});
        assert_eq!(complete(&mut c, &io(Some(16)), true), Ok(16));
        assert_eq!(c["max_batch_size"], 16);
        assert_eq!(c["input"][0]["dims"], json!([3, 8, 8]));
        assert_eq!(c["input"][0]["data_type"], "TYPE_FP32");
        assert_eq!(c["output"][0]["dims"], json!([10]));
    }

    #[test]
    fn listed_full_rank_inputs_keep_batching_off() {
        let mut c = json!({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": ["-1", "3", "8", "8"]}]});
        assert_eq!(complete(&mut c, &io(Some(16)), true), Ok(0));
        assert_eq!(c["output"][0]["dims"], json!([-1, 10]));
    }

    #[test]
    fn listed_entries_get_their_unset_fields() {
        let mut c =
            json!({"max_batch_size": 4, "output": [{"name": "y", "data_type": "TYPE_INVALID"}]});
        assert_eq!(complete(&mut c, &io(Some(16)), true), Ok(4));
        assert_eq!(c["output"][0]["data_type"], "TYPE_FP32");
        assert_eq!(c["output"][0]["dims"], json!([10]));
        let mut c =
            json!({"max_batch_size": 4, "output": [{"name": "y", "data_type": "TYPE_INVALID"}]});
        assert!(complete(&mut c, &io(Some(16)), false).is_err());
    }

    #[test]
    fn mismatches_name_the_tensor() {
        let mut c = json!({"max_batch_size": 4, "input": [{"name": "x", "data_type": "TYPE_FP16", "dims": [3, 8, 8]}]});
        let e = complete(&mut c, &io(Some(16)), false).unwrap_err();
        assert!(e.message.contains("`x` is TYPE_FP16"), "{e}");
        let mut c = json!({"max_batch_size": 4, "input": [{"name": "x", "dims": [3, 9, 8]}]});
        let e = complete(&mut c, &io(Some(16)), false).unwrap_err();
        assert!(e.message.contains("[3, 9, 8]"), "{e}");
        let mut c = json!({"max_batch_size": 4, "output": [{"name": "z", "dims": [10]}]});
        let e = complete(&mut c, &io(Some(16)), true).unwrap_err();
        assert!(e.message.contains("output `z`"), "{e}");
        let mut c = json!({"max_batch_size": 32});
        let e = complete(&mut c, &io(Some(16)), true).unwrap_err();
        assert!(e.message.contains("largest batch 16"), "{e}");
        let mut c = json!({"max_batch_size": 2});
        let e = complete(&mut c, &io(None), true).unwrap_err();
        assert!(e.message.contains("does not batch"), "{e}");
    }

    #[test]
    fn parameters_parse_and_reject_bad_values() {
        let c = json!({"parameters": {
            "plugins": {"string_value": "libs/a.so, /abs/b.so"},
            "precision": {"string_value": "f16"},
            "dynamic_range": {"string_value": "1;4;8"},
        }});
        let p = Params::parse(&c, Path::new("/m")).unwrap();
        assert_eq!(
            p.libraries,
            vec![PathBuf::from("/m/libs/a.so"), PathBuf::from("/abs/b.so")]
        );
        assert_eq!(p.precision, DType::F16);
        assert_eq!(p.dynamic_range, Some((1, 4, 8)));
        let bad = json!({"parameters": {"dynamic_range": {"string_value": "8;4;1"}}});
        assert!(Params::parse(&bad, Path::new("/m")).is_err());
        let bad = json!({"parameters": {"precision": {"string_value": "int4"}}});
        let e = Params::parse(&bad, Path::new("/m")).unwrap_err();
        assert!(e.message.contains("int4"), "{e}");
    }
}
