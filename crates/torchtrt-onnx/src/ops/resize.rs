//! `Resize` and `Upsample`, read into a [`Target`] and [`Sampling`] that
//! [`interpolate`](super::interpolate) turns into the `torch_tensorrt::Interpolate` plugin.

use torchtrt_core::TensorId;
use torchtrt_core::layers::normalize_axis;

use super::interpolate::{Sampling, ShapeInput, Target, interpolate, interpolate_by_input};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Resize", resize);
    r.add("Upsample", upsample);
}

/// Resize-11 and later with all its attributes; Resize-10 (`X`, `scales`) as `Upsample`.
fn resize(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let mode = node.string_or("mode", "nearest")?;
    if ctx.opset() < 11 {
        return legacy(ctx, node, x, 1, mode);
    }
    let sampling = Sampling {
        mode,
        coord: node.string_or("coordinate_transformation_mode", "half_pixel")?,
        nearest: node.string_or("nearest_mode", "round_prefer_floor")?,
        cubic_a: node.float_or("cubic_coeff_a", -0.75)?,
        exclude_outside: node.bool_or("exclude_outside", false)?,
        extrapolation: node.float_or("extrapolation_value", 0.0)?,
        antialias: node.bool_or("antialias", false)?,
    };
    let roi = match sampling.coord.as_str() {
        "tf_crop_and_resize" => Some(ctx.opt_input(node, 1)?.ok_or_else(|| {
            node.err("coordinate_transformation_mode tf_crop_and_resize needs input 1 (`roi`)")
        })?),
        _ => None,
    };
    let rank = ctx.rank(x);
    let axes = match node.ints("axes")? {
        None => (0..rank).collect(),
        Some(a) => a
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| node.err(format!("attribute `axes`: {m}")))?,
    };
    let policy = node.string_or("keep_aspect_ratio_policy", "stretch")?;
    let scales = given(ctx, node, 2, Ctx::value_f64s)?;
    let sizes = given(ctx, node, 3, Ctx::value_i64s)?;
    let by_input = |values, kind| ShapeInput {
        values,
        kind,
        axes: &axes,
        policy: &policy,
        roi,
    };
    let input = match (&scales, &sizes) {
        (Given::Tensor(t), Given::Absent) => Some(by_input(*t, "scales")),
        (Given::Known(_, t), Given::Absent) if roi.is_some() => Some(by_input(*t, "scales")),
        (Given::Absent, Given::Tensor(t)) => Some(by_input(*t, "sizes")),
        (Given::Absent, Given::Known(_, t)) if policy != "stretch" || roi.is_some() => {
            Some(by_input(*t, "sizes"))
        }
        _ => None,
    };
    if let Some(input) = input {
        return Ok(vec![interpolate_by_input(ctx, node, x, &input, &sampling)?]);
    }
    let target = match (scales, sizes) {
        (Given::Known(s, _), Given::Absent) => {
            let mut full = vec![1.0; rank];
            for (&a, v) in axes.iter().zip(check_len(node, "scales", s, axes.len())?) {
                full[a] = v;
            }
            Target::Scales(full)
        }
        (Given::Absent, Given::Known(s, _)) => {
            let s = check_len(node, "sizes", s, axes.len())?;
            sizes_target(&axes, &s, rank)
        }
        (Given::Absent, Given::Absent) => return Err(node.err("needs `scales` or `sizes`")),
        _ => return Err(node.err("give `scales` or `sizes`, not both")),
    };
    Ok(vec![interpolate(ctx, node, x, &target, &sampling)?])
}

/// Upsample-7 (`scales` attribute) and Upsample-9 (`scales` input).
fn upsample(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let mode = node.string_or("mode", "nearest")?;
    match ctx.opset() {
        ..7 => {
            Err(node.err("Upsample before opset 7 (height_scale, width_scale) is not supported"))
        }
        7..9 => {
            let scales = node
                .floats("scales")?
                .ok_or_else(|| node.err("attribute `scales` is required"))?
                .into_iter()
                .map(f64::from)
                .collect();
            legacy_scales(ctx, node, x, scales, mode)
        }
        _ => legacy(ctx, node, x, 1, mode),
    }
}

/// Upsample-9 and Resize-10 with their `scales` input `i`: one scale per axis.
fn legacy(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    i: usize,
    mode: String,
) -> Result<Vec<TensorId>> {
    match given(ctx, node, i, Ctx::value_f64s)? {
        Given::Absent => Err(node.err(format!("input {i} (`scales`) is required"))),
        Given::Known(scales, _) => legacy_scales(ctx, node, x, scales, mode),
        Given::Tensor(values) => {
            let sampling = legacy_sampling(mode);
            let axes: Vec<usize> = (0..ctx.rank(x)).collect();
            let input = ShapeInput {
                values,
                kind: "scales",
                axes: &axes,
                policy: "stretch",
                roi: None,
            };
            Ok(vec![interpolate_by_input(ctx, node, x, &input, &sampling)?])
        }
    }
}

/// Upsample and Resize-10 by scales known at import time.
fn legacy_scales(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    scales: Vec<f64>,
    mode: String,
) -> Result<Vec<TensorId>> {
    let scales = check_len(node, "scales", scales, ctx.rank(x))?;
    let target = Target::Scales(scales);
    Ok(vec![interpolate(
        ctx,
        node,
        x,
        &target,
        &legacy_sampling(mode),
    )?])
}

/// Upsample and Resize-10 sampling: asymmetric coordinates, nearest rounds down.
fn legacy_sampling(mode: String) -> Sampling {
    Sampling {
        mode,
        coord: "asymmetric".into(),
        nearest: "floor".into(),
        cubic_a: -0.75,
        exclude_outside: false,
        extrapolation: 0.0,
        antialias: false,
    }
}

/// What optional input `i` gives: nothing (absent or empty), values known at import time
/// (with the tensor), or a tensor computed at run time.
enum Given<T> {
    Absent,
    Known(Vec<T>, TensorId),
    Tensor(TensorId),
}

fn given<'c, T>(
    ctx: &Ctx<'c>,
    node: &Node<'_>,
    i: usize,
    value: fn(&Ctx<'c>, TensorId) -> Option<Vec<T>>,
) -> Result<Given<T>> {
    let Some(t) = ctx.opt_input(node, i)? else {
        return Ok(Given::Absent);
    };
    if ctx.known_shape(t).is_some_and(|s| s.contains(&0)) {
        return Ok(Given::Absent);
    }
    Ok(match value(ctx, t) {
        Some(v) if v.is_empty() => Given::Absent,
        Some(v) => Given::Known(v, t),
        None => Given::Tensor(t),
    })
}

fn check_len<T>(node: &Node<'_>, what: &str, v: Vec<T>, want: usize) -> Result<Vec<T>> {
    if v.len() == want {
        Ok(v)
    } else {
        Err(node.err(format!("`{what}` has {} entries, expected {want}", v.len())))
    }
}

/// The target for `sizes` on `axes` (each axis gets its size).
fn sizes_target(axes: &[usize], sizes: &[i64], rank: usize) -> Target {
    let mut full = vec![None; rank];
    for (&a, &s) in axes.iter().zip(sizes) {
        full[a] = Some(s);
    }
    Target::Sizes(full)
}
