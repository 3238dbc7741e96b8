//! `Resize` and `Upsample`, read into a [`Target`] and [`Sampling`] that
//! [`interpolate`](super::interpolate) turns into the `torch_tensorrt::Interpolate` plugin.

use torchtrt_core::TensorId;
use torchtrt_core::layers::normalize_axis;

use super::interpolate::{Sampling, Target, interpolate};
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
        let scales = known(ctx, node, 1, "scales", Ctx::value_f64s)?
            .ok_or_else(|| node.err("input 1 (`scales`) is required"))?;
        return legacy(ctx, node, x, scales, mode);
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
    if sampling.coord == "tf_crop_and_resize" {
        return Err(node.err("coordinate_transformation_mode tf_crop_and_resize is not supported"));
    }
    let rank = ctx.rank(x);
    let axes = match node.ints("axes")? {
        None => (0..rank).collect(),
        Some(a) => a
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| node.err(format!("attribute `axes`: {m}")))?,
    };
    let scales = known(ctx, node, 2, "scales", Ctx::value_f64s)?;
    let sizes = known(ctx, node, 3, "sizes", Ctx::value_i64s)?;
    let target = match (scales, sizes) {
        (Some(s), None) => {
            let mut full = vec![1.0; rank];
            for (&a, v) in axes.iter().zip(check_len(node, "scales", s, axes.len())?) {
                full[a] = v;
            }
            Target::Scales(full)
        }
        (None, Some(s)) => {
            let s = check_len(node, "sizes", s, axes.len())?;
            let policy = node.string_or("keep_aspect_ratio_policy", "stretch")?;
            sizes_target(ctx, node, x, &axes, &s, &policy)?
        }
        (Some(_), Some(_)) => return Err(node.err("give `scales` or `sizes`, not both")),
        (None, None) => return Err(node.err("needs `scales` or `sizes`")),
    };
    Ok(vec![interpolate(ctx, node, x, &target, &sampling)?])
}

/// Upsample-7 (`scales` attribute) and Upsample-9 (`scales` input).
fn upsample(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let mode = node.string_or("mode", "nearest")?;
    let scales = match ctx.opset() {
        ..7 => {
            return Err(
                node.err("Upsample before opset 7 (height_scale, width_scale) is not supported")
            );
        }
        7..9 => node
            .floats("scales")?
            .ok_or_else(|| node.err("attribute `scales` is required"))?
            .into_iter()
            .map(f64::from)
            .collect(),
        _ => known(ctx, node, 1, "scales", Ctx::value_f64s)?
            .ok_or_else(|| node.err("input 1 (`scales`) is required"))?,
    };
    legacy(ctx, node, x, scales, mode)
}

/// Upsample and Resize-10: one scale per axis, asymmetric coordinates, nearest rounds down.
fn legacy(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    scales: Vec<f64>,
    mode: String,
) -> Result<Vec<TensorId>> {
    let scales = check_len(node, "scales", scales, ctx.rank(x))?;
    let sampling = Sampling {
        mode,
        coord: "asymmetric".into(),
        nearest: "floor".into(),
        cubic_a: -0.75,
        exclude_outside: false,
        extrapolation: 0.0,
        antialias: false,
    };
    Ok(vec![interpolate(
        ctx,
        node,
        x,
        &Target::Scales(scales),
        &sampling,
    )?])
}

/// The value of optional input `i` (`what`), `None` when absent or empty. The plugin takes
/// the output size as a field, so the value must be known at import time.
fn known<'c, T>(
    ctx: &Ctx<'c>,
    node: &Node<'_>,
    i: usize,
    what: &str,
    value: fn(&Ctx<'c>, TensorId) -> Option<Vec<T>>,
) -> Result<Option<Vec<T>>> {
    let Some(t) = ctx.opt_input(node, i)? else {
        return Ok(None);
    };
    if ctx.known_shape(t).is_some_and(|s| s.contains(&0)) {
        return Ok(None);
    }
    let v = value(ctx, t).ok_or_else(|| {
        node.err(format!(
            "input {i} (`{what}`) must be known at import time: the Interpolate plugin takes the output size as a field"
        ))
    })?;
    Ok((!v.is_empty()).then_some(v))
}

fn check_len<T>(node: &Node<'_>, what: &str, v: Vec<T>, want: usize) -> Result<Vec<T>> {
    if v.len() == want {
        Ok(v)
    } else {
        Err(node.err(format!("`{what}` has {} entries, expected {want}", v.len())))
    }
}

/// The target for `sizes` on `axes`. With `keep_aspect_ratio_policy` `not_larger` /
/// `not_smaller` one scale (the smallest / largest of `size / dim`) applies to every axis
/// and the size is `round(dim·scale)`; that is expressed as scales, so it needs the dims
/// known and `round` to agree with the plugin's `floor(dim·scale)`.
fn sizes_target(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    axes: &[usize],
    sizes: &[i64],
    policy: &str,
) -> Result<Target> {
    let rank = ctx.rank(x);
    if policy == "stretch" {
        let mut full = vec![None; rank];
        for (&a, &s) in axes.iter().zip(sizes) {
            full[a] = Some(s);
        }
        return Ok(Target::Sizes(full));
    }
    let dims: Vec<f64> = axes
        .iter()
        .map(|&a| ctx.ty(x).shape[a].as_const().map(|d| d as f64))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            node.err(format!(
                "keep_aspect_ratio_policy {policy} needs the resized dims known at import time"
            ))
        })?;
    let ratios = sizes.iter().zip(&dims).map(|(&s, &d)| s as f64 / d);
    let scale = match policy {
        "not_larger" => ratios.fold(f64::INFINITY, f64::min),
        "not_smaller" => ratios.fold(f64::NEG_INFINITY, f64::max),
        other => {
            return Err(node.err(format!(
                "attribute `keep_aspect_ratio_policy`: unknown policy `{other}`"
            )));
        }
    };
    if let Some((&a, d)) = axes
        .iter()
        .zip(&dims)
        .find(|(_, d)| (scale * *d + 0.5).floor() != (scale * *d).floor())
    {
        return Err(node.err(format!(
            "keep_aspect_ratio_policy {policy}: axis {a} becomes round({d}·{scale}) = {}, but the plugin sizes by floor(dim·scale)",
            (scale * d + 0.5).floor()
        )));
    }
    let mut full = vec![1.0; rank];
    for &a in axes {
        full[a] = scale;
    }
    Ok(Target::Scales(full))
}
