//! A product whose output is only ever sliced along its columns, computed as one product per
//! slice. Exported transformers project into one wide tensor and split it: GPT-2's `c_attn`
//! is `Reshape → Gemm(x, W[768, 2304], b) → Reshape → Split` into queries, keys and values.
//! The split copies every element of the product once more. When the product is a `MatMul`
//! with a constant 2-D `B` (and maybe a constant bias), and every reader of its output (or
//! of one `Reshape` of it) is a `Slice` of the last axis with step 1, each `Slice` becomes a
//! `MatMul` by the columns of `B` (and of the bias) it keeps. Its `A` is the product's own,
//! or the tensor a `Reshape` made it from, whichever gives the `Slice`'s type directly (so
//! `[batch, seq, hidden]` projections need no reshape back). The layers bypassed are left
//! unread, for `compact` to drop. Runs for backends that ask for it
//! ([`Backend::splits_sliced_products`](crate::Backend::splits_sliced_products)): on CUDA
//! GPT-2's 36 slices were 12 % of the layers' time at batch 32; on the CPU three narrower
//! products cost more than the copies.

use std::collections::HashMap;

use torchtrt_plugin_api::{DimExpr, const_shape};

use super::Work;
use super::uses::Uses;
use crate::layers::{InferInput, LayerKind, resolve_slice};
use crate::network::{Layer, TensorId};
use crate::tensor::{Tensor, shape_i64};

/// One `Slice` turned into a product: the product, the `A` it reads, its columns of `B`
/// and of the bias.
struct Part {
    kind: LayerKind,
    a: TensorId,
    weights: Tensor,
    bias: Option<Tensor>,
}

/// `t` as an inference input.
fn known(t: &Tensor) -> (Vec<DimExpr>, &Tensor) {
    (const_shape(&shape_i64(t.shape())), t)
}

/// The columns `[lo, lo + n)` of a row-major `rows × cols` constant.
fn columns(t: &Tensor, rows: usize, cols: usize, lo: usize, n: usize) -> Option<Tensor> {
    let size = t.dtype().size();
    let bytes = t.bytes();
    let mut out = Vec::with_capacity(rows * n * size);
    for r in 0..rows {
        let start = (r * cols + lo) * size;
        out.extend_from_slice(bytes.get(start..start + n * size)?);
    }
    let shape: &[usize] = if t.rank() == 1 { &[n] } else { &[rows, n] };
    Tensor::from_bytes(t.dtype(), shape, &out).ok()
}

/// The columns `[lo, lo + n)` a `Slice` layer keeps of its input's last axis of `cols`,
/// when it slices that axis alone, with step 1, by constants.
fn kept_columns(work: &Work, layer: &Layer, cols: usize) -> Option<(usize, usize)> {
    let LayerKind::Slice(s) = &layer.kind else {
        return None;
    };
    let s = s.with_values(&[]).ok()?;
    let rank = work.ty(layer.inputs[0]).shape.len() as i64;
    let last = matches!(s.axes[..], [a] if a == rank - 1 || a == -1);
    if layer.inputs.len() != 1 || !last || s.steps[..] != [1] {
        return None;
    }
    let (lo, n) = resolve_slice(cols as i64, s.starts[0], s.ends[0], 1);
    (n > 0).then_some((lo as usize, n as usize))
}

/// The parts of the product at `m`, keyed by the `Slice` layer each replaces; `None` when
/// the product cannot be split.
fn split(work: &Work, live: &Uses, m: usize) -> Option<Vec<(usize, Part)>> {
    let mm = &work.layers[m];
    let (LayerKind::MatMul(k), 2..=3) = (&mm.kind, mm.inputs.len()) else {
        return None;
    };
    if k.transpose_a || k.transpose_b {
        return None;
    }
    let value = |t: TensorId| work.tensors[t.index()].value.as_deref();
    let w = value(mm.inputs[1]).filter(|w| w.rank() == 2)?;
    let bias = match mm.inputs.get(2) {
        Some(&b) => Some(value(b).filter(|b| b.rank() == 1)?),
        None => None,
    };
    let (rows, cols) = (w.shape()[0], w.shape()[1]);
    let product = mm.outputs[0];
    let sliced = match live.only_reader(product) {
        Some(r) if matches!(work.layers[r].kind, LayerKind::Reshape(_)) => {
            let out = work.layers[r].outputs[0];
            let keeps_columns = work.ty(out).shape.last() == work.ty(product).shape.last();
            keeps_columns.then_some(out)?
        }
        _ => product,
    };
    if live.output[product.index()] || live.output[sliced.index()] {
        return None;
    }
    let a = mm.inputs[0];
    let unshaped = live.producer[a.index()]
        .filter(|&p| matches!(work.layers[p].kind, LayerKind::Reshape(_)))
        .map(|p| work.layers[p].inputs[0]);
    let device = *work.devices.get(m)?;
    let mut parts = Vec::new();
    let mut kept = 0;
    for s in live.reader_layers(sliced) {
        let (lo, n) = kept_columns(work, &work.layers[s], cols)?;
        kept += n;
        if work.devices.get(s) != Some(&device) || kept > cols {
            return None;
        }
        let weights = columns(w, rows, cols, lo, n)?;
        let bias = match bias {
            Some(b) => Some(columns(b, 1, cols, lo, n)?),
            None => None,
        };
        let want = work.ty(work.layers[s].outputs[0]);
        let kind = LayerKind::MatMul(k.clone());
        let constants: Vec<_> = [Some(&weights), bias.as_ref()]
            .into_iter()
            .flatten()
            .map(known)
            .collect();
        let a = unshaped.into_iter().chain([a]).find(|&a| {
            let mut ins = work.infer_inputs(&[a]);
            ins.extend(constants.iter().map(|(shape, value)| InferInput {
                dtype: value.dtype(),
                shape,
                value: Some(*value),
            }));
            kind.op().infer(&ins).ok().as_deref() == Some(std::slice::from_ref(want))
        })?;
        parts.push((
            s,
            Part {
                kind,
                a,
                weights,
                bias,
            },
        ));
    }
    (!parts.is_empty()).then_some(parts)
}

/// Splits every product of `work` whose output is only sliced along its columns.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)]) {
    let live = Uses::live(work, outputs);
    let mut parts: HashMap<usize, Part> = HashMap::new();
    for m in 0..work.layers.len() {
        if let Some(found) = split(work, &live, m) {
            parts.extend(found);
        }
    }
    if parts.is_empty() {
        return;
    }
    let layers = std::mem::take(&mut work.layers);
    let devices = std::mem::take(&mut work.devices);
    for (i, (mut layer, device)) in layers.into_iter().zip(devices).enumerate() {
        if let Some(part) = parts.remove(&i) {
            let w = work.emit_constant(format!("{}/weights", layer.name), part.weights);
            layer.inputs = vec![part.a, w];
            if let Some(b) = part.bias {
                let b = work.emit_constant(format!("{}/bias", layer.name), b);
                layer.inputs.push(b);
            }
            layer.kind = part.kind;
        }
        work.layers.push(layer);
        work.devices.push(device);
    }
}
