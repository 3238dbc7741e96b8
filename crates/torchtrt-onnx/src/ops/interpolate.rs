//! ONNX resampling onto the `torch_tensorrt::Interpolate` plugin, which resizes the 1 to 3
//! trailing axes of an `[N, C, spatial…]` tensor: the resized axes must be trailing, and
//! the axes in front of them are folded into (or padded out to) `N` and `C`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Concat, Gather, Reshape, Shape, Squeeze, Unsqueeze};
use torchtrt_core::plugin_api::{DType, FieldCollection, PluginKey};

use super::util::i64s;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;

/// The output size, one entry per input axis.
pub(super) enum Target {
    /// Scale factors (1 keeps an axis); output dims are `floor(dim·scale)`.
    Scales(Vec<f64>),
    /// Output dims; `None` keeps the input's.
    Sizes(Vec<Option<i64>>),
}

/// How to sample, with ONNX `Resize`'s attribute names and values.
pub(super) struct Sampling {
    /// `nearest`, `linear` or `cubic`.
    pub mode: String,
    /// `coordinate_transformation_mode`.
    pub coord: String,
    /// `nearest_mode`.
    pub nearest: String,
    /// `cubic_coeff_a`.
    pub cubic_a: f32,
    /// `exclude_outside`.
    pub exclude_outside: bool,
    /// `extrapolation_value`.
    pub extrapolation: f32,
    /// `antialias`.
    pub antialias: bool,
}

impl Target {
    fn resizes(&self, axis: usize, dim: Option<i64>) -> bool {
        match self {
            Target::Scales(s) => s[axis] != 1.0,
            Target::Sizes(s) => s[axis].is_some_and(|n| Some(n) != dim),
        }
    }
}

/// `x` resampled to `target`: the input itself when no axis changes, else one plugin
/// layer, with reshapes around it when the input has other than two leading axes.
pub(super) fn interpolate(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    target: &Target,
    sampling: &Sampling,
) -> Result<TensorId> {
    let ty = resizable(ctx, node, x)?;
    let rank = ty.shape.len();
    let Some(first) = (0..rank).find(|&a| target.resizes(a, ty.shape[a].as_const())) else {
        return Ok(x);
    };
    let (mode, first) = plugin_mode(node, &sampling.mode, rank, first)?;
    let mut fields = sampling_fields(mode, sampling);
    match target {
        Target::Scales(s) => {
            fields.set("scales", s[first..].to_vec());
            fields.set("use_scales", 1i32);
        }
        Target::Sizes(s) => {
            let sizes = (first..rank)
                .map(|a| {
                    s[a].or(ty.shape[a].as_const()).ok_or_else(|| {
                        node.err(format!(
                            "axis {a} is kept, but its size is unknown at import time and the plugin takes sizes as fields"
                        ))
                    })
                })
                .collect::<Result<Vec<i64>>>()?;
            fields.set("out_size", sizes);
        }
    }
    with_two_leading_axes(ctx, node, x, first, |ctx, x| {
        Ok(ctx.plugin(node, &plugin_key(), &fields, &[x])?[0])
    })
}

/// The type of `x`, which must be a float tensor the plugin takes.
fn resizable(ctx: &Ctx<'_>, node: &Node<'_>, x: TensorId) -> Result<torchtrt_core::TypeShape> {
    let ty = ctx.ty(x).clone();
    if !matches!(ty.dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Err(node.err(format!(
            "resizing {} tensors: the Interpolate plugin takes f32, f16 and bf16",
            ty.dtype
        )));
    }
    Ok(ty)
}

fn plugin_key() -> PluginKey {
    PluginKey::new("torch_tensorrt", "Interpolate", "1")
}

fn sampling_fields(mode: &str, sampling: &Sampling) -> FieldCollection {
    FieldCollection::new()
        .with("mode", mode)
        .with("coordinate_transformation_mode", sampling.coord.as_str())
        .with("nearest_mode", sampling.nearest.as_str())
        .with("cubic_coeff_a", sampling.cubic_a)
        .with("exclude_outside", i32::from(sampling.exclude_outside))
        .with("extrapolation_value", sampling.extrapolation)
        .with("antialias", i32::from(sampling.antialias))
}

/// Sizes or scales given by a tensor (computed in the graph, or a constant under a
/// `keep_aspect_ratio_policy`), one entry per axis of `axes`.
pub(super) struct ShapeInput<'a> {
    /// The values.
    pub values: TensorId,
    /// `"sizes"` or `"scales"`.
    pub kind: &'a str,
    /// The axes the entries belong to, in order.
    pub axes: &'a [usize],
    /// `keep_aspect_ratio_policy`.
    pub policy: &'a str,
    /// The `tf_crop_and_resize` region of interest: starts, then ends, one per axis of
    /// `axes`.
    pub roi: Option<TensorId>,
}

/// `x` resampled to the sizes or scales of a tensor: the plugin takes it as a shape input
/// and sizes its output when the values are known (at build time for constants, else at
/// run time). The spatial axes are those of `axes` from axis 2 on (all of them for inputs of
/// rank 1 and 2); they must be the trailing axes.
pub(super) fn interpolate_by_input(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    input: &ShapeInput<'_>,
    sampling: &Sampling,
) -> Result<TensorId> {
    let ty = resizable(ctx, node, x)?;
    let rank = ty.shape.len();
    let lead = if rank >= 3 { 2 } else { 0 };
    let mut spatial: Vec<usize> = input.axes.iter().copied().filter(|&a| a >= lead).collect();
    spatial.sort_unstable();
    let Some(&first) = spatial.first() else {
        return Err(node.err(format!(
            "{} for axes {:?} resize no axis from {lead} on",
            input.kind, input.axes
        )));
    };
    if spatial != (first..rank).collect::<Vec<_>>() {
        return Err(node.err(format!(
            "{} computed at run time for axes {:?}: the Interpolate plugin resizes trailing axes only",
            input.kind, input.axes
        )));
    }
    let (mode, plugin_first) = plugin_mode(node, &sampling.mode, rank, first)?;
    if plugin_first != first {
        return Err(node.err(format!(
            "{} resizing of one axis by {} computed at run time is not supported",
            sampling.mode, input.kind
        )));
    }
    let whole = input.axes.iter().copied().eq(0..rank);
    let skip = if whole && first == 2 { 2 } else { 0 };
    let picks: Vec<i64> = (first..rank)
        .map(|a| input.axes.iter().position(|&b| b == a).unwrap_or_default() as i64)
        .collect();
    let pick = |ctx: &mut Ctx<'_>, values: TensorId, picks: &[i64]| -> Result<TensorId> {
        if skip == 2 {
            return Ok(values);
        }
        let picks = i64s(ctx, node, picks)?;
        ctx.add(node, Gather { axis: 0 }, &[values, picks])
    };
    let mut inputs = vec![pick(ctx, input.values, &picks)?];
    if let Some(roi) = input.roi {
        let n = input.axes.len() as i64;
        let both: Vec<i64> = picks
            .iter()
            .copied()
            .chain(picks.iter().map(|p| p + n))
            .collect();
        inputs.push(pick(ctx, roi, &both)?);
    }
    let fields = sampling_fields(mode, sampling)
        .with("size_input", input.kind)
        .with("size_input_skip", skip)
        .with("keep_aspect_ratio_policy", input.policy)
        .with("roi_input", i32::from(input.roi.is_some()));
    with_two_leading_axes(ctx, node, x, first, |ctx, x| {
        let all: Vec<TensorId> = std::iter::once(x).chain(inputs.iter().copied()).collect();
        Ok(ctx.plugin(node, &plugin_key(), &fields, &all)?[0])
    })
}

/// The plugin's mode for ONNX `mode` resizing axes `first..rank`, and the first axis the
/// plugin treats as spatial: cubic of one axis becomes bicubic over that axis and the one
/// before it (scale 1).
fn plugin_mode(
    node: &Node<'_>,
    mode: &str,
    rank: usize,
    first: usize,
) -> Result<(&'static str, usize)> {
    Ok(match (mode, rank - first) {
        ("nearest", 1..=3) => ("nearest", first),
        ("linear", 1) => ("linear", first),
        ("linear", 2) => ("bilinear", first),
        ("linear", 3) => ("trilinear", first),
        ("cubic", 2) => ("bicubic", first),
        ("cubic", 1) if first > 0 => ("bicubic", first - 1),
        (m @ ("nearest" | "linear" | "cubic"), k) => {
            return Err(node.err(format!(
                "{m} resizing of axes {first}..{rank} ({k} axes): the Interpolate plugin resizes the last {} axes only",
                if m == "cubic" { "2" } else { "1 to 3" }
            )));
        }
        (m, _) => return Err(node.err(format!("attribute `mode`: unknown mode `{m}`"))),
    })
}

/// `apply` run on `x` laid out with exactly two axes before axis `lead`: leading axes of
/// size 1 are added (and removed after) when there are fewer, and the first `lead − 1` are
/// merged into one (and split again after, from the input's run-time shape) when more.
fn with_two_leading_axes(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    lead: usize,
    apply: impl FnOnce(&mut Ctx<'_>, TensorId) -> Result<TensorId>,
) -> Result<TensorId> {
    if lead == 2 {
        return apply(ctx, x);
    }
    if lead < 2 {
        let axes: Vec<i64> = (0..(2 - lead) as i64).collect();
        let x = ctx.add(node, Unsqueeze { axes: axes.clone() }, &[x])?;
        let y = apply(ctx, x)?;
        return ctx.add(node, Squeeze { axes: Some(axes) }, &[y]);
    }
    let keep = (lead - 1) as i64;
    let shape_of = |ctx: &mut Ctx<'_>, t, start, end| ctx.add(node, Shape { start, end }, &[t]);
    let tail = shape_of(ctx, x, keep, None)?;
    let merged = i64s(ctx, node, &[-1])?;
    let folded_shape = ctx.add(node, Concat { axis: 0 }, &[merged, tail])?;
    let folded = ctx.add(node, Reshape::default(), &[x, folded_shape])?;
    let y = apply(ctx, folded)?;
    let head = shape_of(ctx, x, 0, Some(keep))?;
    let rest = shape_of(ctx, y, 1, None)?;
    let shape = ctx.add(node, Concat { axis: 0 }, &[head, rest])?;
    ctx.add(node, Reshape::default(), &[y, shape])
}
