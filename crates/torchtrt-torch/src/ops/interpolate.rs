//! `upsample_*` onto the `torch_tensorrt::Interpolate` plugin, with PyTorch's rules: scale
//! factors give `floor(in·scale)` sizes and `1/scale` coordinates, output sizes their own
//! ratio. A size computed at run time is taken as a scale when the program's symbols make
//! `out = in·r` for one constant `r` over their whole range (the plugin takes sizes as
//! fields); otherwise the error says so.

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::{DType, DimExpr, FieldCollection, PluginKey};

use crate::ctx::{Ctx, Sym};
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;
use crate::schema::{Argument, SymInt};
use crate::sym::parse_expr;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("interpolate");
    r.add(
        &[
            "aten::upsample_nearest1d",
            "aten::upsample_nearest2d",
            "aten::upsample_nearest3d",
            "aten::upsample_linear1d",
            "aten::upsample_bilinear2d",
            "aten::upsample_trilinear3d",
            "aten::upsample_bicubic2d",
        ],
        upsample,
    );
}

enum Target {
    Sizes(Vec<i64>),
    Scales(Vec<f64>),
}

fn upsample(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = match ctx.opt_tensor(node, "input")? {
        Some(x) => x,
        None => ctx.tensor(node, "self")?,
    };
    let name = node.op.name.as_str();
    let n = name
        .chars()
        .rev()
        .nth(1)
        .and_then(|c| c.to_digit(10))
        .unwrap_or(2) as usize;
    let mode = match name {
        "upsample_nearest1d" | "upsample_nearest2d" | "upsample_nearest3d" => "nearest",
        "upsample_linear1d" => "linear",
        "upsample_bilinear2d" => "bilinear",
        "upsample_trilinear3d" => "trilinear",
        _ => "bicubic",
    };
    if ctx.rank(x) != n + 2 {
        return Err(node.err(format!(
            "the input must be [N, C, {n} spatial dims], got rank {}",
            ctx.rank(x)
        )));
    }
    if !matches!(ctx.dtype(x), DType::F32 | DType::F16 | DType::BF16) {
        return Err(node.err(format!(
            "the Interpolate plugin takes f32, f16 and bf16, got {}",
            ctx.dtype(x)
        )));
    }
    let target = target(ctx, node, x, n)?;
    let mut fields = FieldCollection::new().with("mode", mode).with(
        "align_corners",
        i32::from(ctx.bool_or(node, "align_corners", false)?),
    );
    match target {
        Target::Sizes(s) => fields.set("out_size", s),
        Target::Scales(s) => {
            fields.set("scales", s);
            fields.set("use_scales", 1i32);
        }
    }
    let key = PluginKey::new("torch_tensorrt", "Interpolate", "1");
    Ok(vec![ctx.plugin(node, &key, &fields, &[x])?[0]])
}

fn target(ctx: &Ctx<'_>, node: &Node<'_>, x: TensorId, n: usize) -> Result<Target> {
    let size = ctx.syms(node, "output_size")?.filter(|s| !s.is_empty());
    let scales = match ctx.floats(node, "scale_factors")? {
        Some(s) => Some(s),
        None => {
            let per: Vec<Option<f64>> = ["scales", "scales_d", "scales_h", "scales_w"]
                .iter()
                .map(|k| ctx.float(node, k))
                .collect::<Result<_>>()?;
            let given: Vec<f64> = per.into_iter().flatten().collect();
            (given.len() == n && size.is_none()).then_some(given)
        }
    };
    match (size, scales) {
        (Some(size), _) => {
            if size.len() != n {
                return Err(node.err(format!("{} output sizes for {n} spatial dims", size.len())));
            }
            if let Some(s) = size
                .iter()
                .map(|s| match s {
                    Sym::Known(v) => Some(*v),
                    Sym::Tensor(_) => None,
                })
                .collect::<Option<Vec<i64>>>()
            {
                return Ok(Target::Sizes(s));
            }
            exact_scales(ctx, node, x, n).map(Target::Scales)
        }
        (None, Some(s)) if s.len() == n => Ok(Target::Scales(s)),
        (None, Some(s)) if s.len() == 1 => Ok(Target::Scales(vec![s[0]; n])),
        _ => Err(node.err("needs output_size or one scale factor per spatial dim")),
    }
}

/// The constant ratios `out / in` of the spatial dims, checked over the symbols' ranges.
fn exact_scales(ctx: &Ctx<'_>, node: &Node<'_>, x: TensorId, n: usize) -> Result<Vec<f64>> {
    let input = match node.arg("input").or(node.arg("self")) {
        Some(Argument::Tensor(name)) => ctx.meta(name),
        _ => None,
    };
    let output = match node.raw.outputs.first() {
        Some(Argument::Tensor(name)) => ctx.meta(name),
        _ => None,
    };
    let (Some(input), Some(output)) = (input, output) else {
        return Err(node.err("the output size is computed at run time and the program has no sizes to relate it to the input's"));
    };
    let rank = ctx.rank(x);
    let ranges = ctx.program.symbol_ranges();
    let expr = |s: &SymInt| match s {
        SymInt::Int(v) => Ok(DimExpr::Const(*v)),
        SymInt::Expr(e, _) => parse_expr(e).map_err(|m| node.err(m)),
    };
    (rank - n..rank)
        .map(|d| {
            let (i, o) = (expr(&input.sizes[d])?, expr(&output.sizes[d])?);
            let syms: Vec<_> = i.symbols().into_iter().chain(o.symbols()).collect();
            let sym = syms.first().cloned();
            let bad = || {
                node.err(format!(
                    "the output size `{o}` of spatial dim {d} is computed at run time and is not a constant multiple of the input's `{i}` over the program's range; the Interpolate plugin takes sizes as fields (run-time sizes need plugin shape inputs)"
                ))
            };
            if syms.iter().any(|s| Some(s) != sym.as_ref()) {
                return Err(bad());
            }
            let (lo, hi) = match &sym {
                Some(s) => ranges.get(&**s).copied().unwrap_or((Some(1), Some(1))),
                None => (Some(1), Some(1)),
            };
            let (lo, hi) = (lo.unwrap_or(1).max(1), hi.unwrap_or(lo.unwrap_or(1) + 4096));
            let at = |e: &DimExpr, v: i64| e.eval(&|_| Some(v)).ok();
            let (i0, o0) = (at(&i, lo).ok_or_else(bad)?, at(&o, lo).ok_or_else(bad)?);
            if i0 <= 0 {
                return Err(bad());
            }
            let r = o0 as f64 / i0 as f64;
            for v in lo..=hi.min(lo + 4096) {
                let (iv, ov) = (at(&i, v).ok_or_else(bad)?, at(&o, v).ok_or_else(bad)?);
                if (iv as f64 * r).floor() as i64 != ov || (ov as f64 / iv as f64 - r).abs() > 1e-12 {
                    return Err(bad());
                }
            }
            Ok(r)
        })
        .collect()
}
