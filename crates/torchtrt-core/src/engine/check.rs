//! Inputs checked against an engine's: dtypes, ranks, fixed dims, dynamic ranges.

use torchtrt_plugin_api::{DType, ShapeDisplay};

use crate::engine::EnginePlan;
use crate::error::{Error, Result};
use crate::network::Dim;
use crate::tensor::shape_i64;

/// The engine's input `k` as `f32[1,n∈[1,8],3]` for messages.
fn expected(plan: &EnginePlan, k: usize) -> String {
    let spec = &plan.inputs[k];
    let dims: Vec<String> = spec
        .dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(v) => v.to_string(),
            Dim::Dynamic { name, min, max, .. } => format!("{name}∈[{min},{max}]"),
        })
        .collect();
    format!("{}[{}]", spec.dtype, dims.join(","))
}

/// Checks input `k` alone: dtype, rank, fixed dims and dynamic ranges.
pub(crate) fn check_input(
    plan: &EnginePlan,
    k: usize,
    dtype: DType,
    shape: &[usize],
) -> Result<()> {
    let spec = &plan.inputs[k];
    if dtype != spec.dtype || shape.len() != spec.dims.len() {
        return Err(Error::Input(format!(
            "input `{}` is {dtype}{}, expected {}",
            spec.name,
            ShapeDisplay(&shape_i64(shape)),
            expected(plan, k)
        )));
    }
    for (&v, d) in shape.iter().zip(&spec.dims) {
        let v = v as i64;
        match d {
            Dim::Fixed(f) if *f != v => {
                return Err(Error::Input(format!(
                    "input `{}` has shape {}, expected {}",
                    spec.name,
                    ShapeDisplay(&shape_i64(shape)),
                    expected(plan, k)
                )));
            }
            Dim::Dynamic { name, min, max, .. } if v < *min || v > *max => {
                return Err(Error::Input(format!(
                    "input `{}`: dim `{name}` = {v} is outside the engine's range [{min}, {max}]",
                    spec.name
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks inputs given as dtype and shape against the engine's: count, dtypes, ranks, fixed
/// dims, dynamic ranges, and dims of one name agreeing across inputs. Allocates nothing
/// when they are valid.
pub(crate) fn check_input_shapes(plan: &EnginePlan, inputs: &[(DType, &[usize])]) -> Result<()> {
    if inputs.len() != plan.inputs.len() {
        return Err(Error::Input(format!(
            "the engine takes {} inputs, got {}",
            plan.inputs.len(),
            inputs.len()
        )));
    }
    check_metas(plan, |k| inputs[k])
}

/// [`check_input_shapes`] for one dtype and shape per engine input, given by index.
pub(crate) fn check_metas<'a>(
    plan: &EnginePlan,
    meta: impl Fn(usize) -> (DType, &'a [usize]),
) -> Result<()> {
    for k in 0..plan.inputs.len() {
        let (dtype, shape) = meta(k);
        check_input(plan, k, dtype, shape)?;
    }
    for (k, spec) in plan.inputs.iter().enumerate() {
        let shape = meta(k).1;
        for (d, &v) in spec.dims.iter().zip(shape) {
            let Dim::Dynamic { name, .. } = d else {
                continue;
            };
            for (j, other) in plan.inputs[..k].iter().enumerate() {
                for (od, &ov) in other.dims.iter().zip(meta(j).1) {
                    if matches!(od, Dim::Dynamic { name: n, .. } if n == name) && ov != v {
                        return Err(Error::Input(format!(
                            "dim `{name}` is {ov} in input `{}` but {v} in input `{}`",
                            other.name, spec.name
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}
