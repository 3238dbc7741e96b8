//! The sliding-window attributes shared by `Conv`, `ConvTranspose` and the pools:
//! `kernel_shape`, `strides`, `dilations`, `pads` and `auto_pad`.

use torchtrt_core::TensorId;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;

/// How `auto_pad` asks for padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AutoPad {
    /// Explicit `pads`.
    NotSet,
    /// No padding.
    Valid,
    /// Output extent `ceil(in / stride)`, the odd padding at the end.
    SameUpper,
    /// Output extent `ceil(in / stride)`, the odd padding at the start.
    SameLower,
}

impl AutoPad {
    /// The node's `auto_pad` attribute.
    pub(crate) fn of(node: &Node<'_>) -> Result<AutoPad> {
        match node.string_or("auto_pad", "NOTSET")?.as_str() {
            "NOTSET" | "" => Ok(AutoPad::NotSet),
            "VALID" => Ok(AutoPad::Valid),
            "SAME_UPPER" => Ok(AutoPad::SameUpper),
            "SAME_LOWER" => Ok(AutoPad::SameLower),
            other => Err(node.err(format!("unknown auto_pad `{other}`"))),
        }
    }

    /// Whether this is one of the `SAME_*` modes.
    pub(crate) fn is_same(self) -> bool {
        matches!(self, AutoPad::SameUpper | AutoPad::SameLower)
    }

    /// Splits a total padding into `(begin, end)`: `SAME_UPPER` puts the odd one at the end,
    /// the others at the start (ConvTranspose's rule for `NOTSET` with `output_shape`).
    pub(crate) fn split(self, total: i64) -> (i64, i64) {
        match self {
            AutoPad::SameUpper => (total / 2, total - total / 2),
            _ => (total - total / 2, total / 2),
        }
    }
}

/// The resolved window of a node over `spatial` dims.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    /// Taps per spatial dim.
    pub(crate) kernel: Vec<i64>,
    /// Stride per spatial dim.
    pub(crate) strides: Vec<i64>,
    /// Dilation per spatial dim.
    pub(crate) dilations: Vec<i64>,
    /// Padding at the start of each spatial dim.
    pub(crate) pads_begin: Vec<i64>,
    /// Padding at the end of each spatial dim.
    pub(crate) pads_end: Vec<i64>,
}

/// An INTS attribute of one value per spatial dim, or `default` for each.
pub(crate) fn per_dim(
    node: &Node<'_>,
    name: &str,
    spatial: usize,
    default: i64,
) -> Result<Vec<i64>> {
    match node.ints(name)? {
        None => Ok(vec![default; spatial]),
        Some(v) if v.len() == spatial => Ok(v),
        Some(v) => Err(node.err(format!(
            "attribute `{name}` has {} values for {spatial} spatial dims",
            v.len()
        ))),
    }
}

/// The explicit `pads` attribute as `(begin, end)`, zeros when absent.
pub(crate) fn explicit_pads(node: &Node<'_>, spatial: usize) -> Result<(Vec<i64>, Vec<i64>)> {
    match node.ints("pads")? {
        None => Ok((vec![0; spatial], vec![0; spatial])),
        Some(p) if p.len() == 2 * spatial => Ok((p[..spatial].to_vec(), p[spatial..].to_vec())),
        Some(p) => Err(node.err(format!(
            "attribute `pads` has {} values for {spatial} spatial dims (expected {})",
            p.len(),
            2 * spatial
        ))),
    }
}

/// The spatial extents of `x [N, C, …]`, which `what` needs known at import time.
pub(crate) fn known_spatial(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    what: &str,
) -> Result<Vec<i64>> {
    ctx.ty(x)
        .shape
        .iter()
        .skip(2)
        .map(|d| d.as_const())
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| {
            node.err(format!(
                "{what} needs the input's spatial dims known at import time"
            ))
        })
}

/// Resolves the window of a convolution or pooling node over `x`, whose taps per spatial
/// dim are `kernel`. `SAME_*` padding needs `x`'s spatial dims known at import time.
pub(crate) fn window(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    kernel: Vec<i64>,
) -> Result<Window> {
    let spatial = kernel.len();
    let strides = per_dim(node, "strides", spatial, 1)?;
    let dilations = per_dim(node, "dilations", spatial, 1)?;
    if let Some(bad) = strides
        .iter()
        .chain(&dilations)
        .chain(&kernel)
        .find(|&&v| v < 1)
    {
        return Err(node.err(format!(
            "kernel_shape, strides and dilations must be positive, got {bad}"
        )));
    }
    let auto_pad = AutoPad::of(node)?;
    let (pads_begin, pads_end) = match auto_pad {
        AutoPad::NotSet => explicit_pads(node, spatial)?,
        AutoPad::Valid => (vec![0; spatial], vec![0; spatial]),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let input = known_spatial(ctx, node, x, "auto_pad SAME_*")?;
            let mut begin = Vec::with_capacity(spatial);
            let mut end = Vec::with_capacity(spatial);
            for i in 0..spatial {
                let [n, s, k, d] = [input[i], strides[i], kernel[i], dilations[i]].map(i128::from);
                let out = (n + s - 1) / s;
                let total = ((out - 1) * s + (k - 1) * d + 1 - n).max(0);
                let (b, e) = auto_pad.split(fit(node, total)?);
                begin.push(b);
                end.push(e);
            }
            (begin, end)
        }
    };
    if let Some(bad) = pads_begin.iter().chain(&pads_end).find(|&&v| v < 0) {
        return Err(node.err(format!("pads must not be negative, got {bad}")));
    }
    Ok(Window {
        kernel,
        strides,
        dilations,
        pads_begin,
        pads_end,
    })
}

/// A padding or extent computed in i128, back in i64 or an error naming the node.
pub(crate) fn fit(node: &Node<'_>, v: i128) -> Result<i64> {
    i64::try_from(v).map_err(|_| node.err(format!("window arithmetic overflows: {v}")))
}
