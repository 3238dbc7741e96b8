//! Exported scaled-dot-product attention into one `Attention` layer: a
//! `MatMul(Softmax(mask(scale(MatMul(q, kᵀ)))), v)` chain over `[batch, heads, seq, head]`
//! operands, each intermediate read by the next step alone, becomes an `Attention` layer
//! reading `q`, `k`, `v` and the mask, so the score matrix is never stored.
//!
//! Recognised around the scores `q·kᵀ` (the key transposed by a `Transpose` of any
//! permutation ending in the last two dims swapped, or by the MatMul's `transpose_b`):
//! multiplication or division by a one-element constant (the scale; 1 when there is none;
//! masks must come after it), of the scores or of `q` and `kᵀ` (or `k`) alone; an
//! additive mask (`Add` of a tensor whose last dim is the key count) or a boolean one
//! (`Where(keep, scores, fill)` with a fill of at most −10⁴); a causal mask (the same
//! `Where` with a constant lower-triangular condition over equal query and key counts);
//! softmax over the last axis, or PyTorch's safe softmax as `torch.export` writes it
//! (`Where(IsNaN(p), 0, p)` of the softmax `p`: rows where every key is masked become zeros,
//! as the `Attention` layer makes them). The fused layer must infer the MatMul's output
//! type. The layers bypassed are left unread, for `compact` to drop.

use torchtrt_plugin_api::{DType, DimExpr};

use super::Work;
use super::uses::Uses;
use crate::layers::{Attention, ElementwiseOp, LayerKind, Transpose, TypeShape, ValueTestKind};
use crate::network::{Layer, TensorId};
use crate::tensor::Tensor;

/// What was found around one attention: the operands and the layer's parameters.
#[derive(Clone)]
struct Found {
    q: TensorId,
    /// The key, or the tensor a new `Transpose` turns into the key.
    k: TensorId,
    k_perm: Option<Vec<usize>>,
    v: TensorId,
    mask: Option<TensorId>,
    scale: f64,
    /// A scale was met walking back: masks must lie outside it (applied after it).
    scaled: bool,
    causal: bool,
}

/// The one-element value of a constant tensor.
fn scalar(work: &Work, t: TensorId) -> Option<f64> {
    let v = work.tensors[t.index()].value.as_ref()?;
    (v.numel() == 1).then(|| v.to_f64_vec()[0])
}

fn rank4(ty: &TypeShape) -> bool {
    ty.shape.len() == 4 && ty.dtype.is_float()
}

/// Whether the constant `cond` keeps key `j` for query `i` exactly when `j ≤ i`, over
/// `[…, n, n]` with every leading dim 1.
fn lower_triangular(cond: &Tensor) -> bool {
    let s = cond.shape();
    let n = match s {
        [.., a, b] if a == b => *a,
        _ => return false,
    };
    if cond.dtype() != DType::Bool || s[..s.len() - 2].iter().any(|&d| d != 1) {
        return false;
    }
    let bytes = cond.bytes();
    (0..n).all(|i| (0..n).all(|j| (bytes[i * n + j] != 0) == (j <= i)))
}

/// Walks back from `t` (the softmax input `x` at first) through an optional mask, causal
/// mask and scale to the scores' MatMul.
fn scores(work: &Work, uses: &Uses, t: TensorId, x: TensorId, found: &mut Found) -> Option<usize> {
    let p = uses.sole(work, t)?;
    let layer = &work.layers[p];
    match &layer.kind {
        LayerKind::MatMul(m) if !m.transpose_a => Some(p),
        LayerKind::Elementwise(e) => {
            let [a, b] = layer.inputs[..] else {
                return None;
            };
            match e.op {
                ElementwiseOp::Mul | ElementwiseOp::Div => {
                    let (factor, other) = scaling(work, layer)?;
                    found.scaled = true;
                    found.scale *= factor;
                    scores(work, uses, other, x, found)
                }
                ElementwiseOp::Add if found.mask.is_none() && !found.scaled => {
                    for (s, m) in [(a, b), (b, a)] {
                        if work.ty(s).shape != work.ty(x).shape {
                            continue;
                        }
                        let mut trial = Found {
                            mask: Some(m),
                            ..found.clone()
                        };
                        if let Some(qk) = scores(work, uses, s, x, &mut trial) {
                            *found = trial;
                            return Some(qk);
                        }
                    }
                    None
                }
                _ => None,
            }
        }
        LayerKind::Select(_) if !found.scaled => {
            let [cond, s, fill] = layer.inputs[..] else {
                return None;
            };
            if scalar(work, fill).is_none_or(|f| f > -1e4) || work.ty(cond).dtype != DType::Bool {
                return None;
            }
            let tril = work.tensors[cond.index()]
                .value
                .as_ref()
                .is_some_and(|c| lower_triangular(c));
            if tril && !found.causal {
                found.causal = true;
            } else if !tril && found.mask.is_none() {
                found.mask = Some(cond);
            } else {
                return None;
            }
            scores(work, uses, s, x, found)
        }
        _ => None,
    }
}

/// `t` with the multiplications and divisions by one-element constants that only lead to
/// it peeled off, and the factor they applied (`(q·a)·(k·b)ᵀ = a·b·(q·kᵀ)`: exporters of
/// `scaled_dot_product_attention` scale both operands by the square root of the scale).
fn unscaled(work: &Work, uses: &Uses, mut t: TensorId) -> (TensorId, f64) {
    let mut factor = 1.0;
    while let Some(p) = uses.sole(work, t) {
        let Some((s, other)) = scaling(work, &work.layers[p]) else {
            break;
        };
        if s.is_infinite() || work.ty(other) != work.ty(t) {
            break;
        }
        factor *= s;
        t = other;
    }
    (t, factor)
}

/// A multiplication of one operand by a one-element constant (either side) or its division
/// by one: the factor it applies (`1/s` for a division by `s`) and that operand; `None` for
/// any other layer.
fn scaling(work: &Work, layer: &Layer) -> Option<(f64, TensorId)> {
    let LayerKind::Elementwise(e) = &layer.kind else {
        return None;
    };
    let [a, b] = layer.inputs[..] else {
        return None;
    };
    match (e.op, scalar(work, a), scalar(work, b)) {
        (ElementwiseOp::Mul, _, Some(s)) => Some((s, a)),
        (ElementwiseOp::Mul, Some(s), None) => Some((s, b)),
        (ElementwiseOp::Div, _, Some(s)) => Some((1.0 / s, a)),
        _ => None,
    }
}

/// The layer making the attention weights `p` when it is a softmax only they read, directly
/// or through a safe softmax `Where(IsNaN(s), 0, s)` of a softmax `s` nothing else reads.
fn softmax_of(work: &Work, uses: &Uses, p: TensorId) -> Option<usize> {
    let producer = uses.sole(work, p)?;
    let layer = &work.layers[producer];
    let LayerKind::Select(_) = layer.kind else {
        return Some(producer);
    };
    let [cond, zero, s] = layer.inputs[..] else {
        return None;
    };
    let test = uses.sole(work, cond)?;
    let LayerKind::ValueTest(t) = &work.layers[test].kind else {
        return None;
    };
    if t.test != ValueTestKind::Nan
        || work.layers[test].inputs[..] != [s]
        || scalar(work, zero) != Some(0.0)
    {
        return None;
    }
    let mut readers: Vec<usize> = uses.reader_layers(s).collect();
    readers.sort_unstable();
    let mut want = vec![test, producer];
    want.sort_unstable();
    if readers != want || uses.output[s.index()] {
        return None;
    }
    let softmax = uses.producer[s.index()]?;
    (work.layers[softmax].outputs.len() == 1).then_some(softmax)
}

/// The attention ending in the MatMul `m`, if it is one.
fn find(work: &Work, uses: &Uses, m: usize) -> Option<Found> {
    let layer = &work.layers[m];
    let LayerKind::MatMul(mm) = &layer.kind else {
        return None;
    };
    if mm.transpose_a || mm.transpose_b {
        return None;
    }
    let (p, v) = (layer.inputs[0], layer.inputs[1]);
    let sm = softmax_of(work, uses, p)?;
    let LayerKind::Softmax(s) = &work.layers[sm].kind else {
        return None;
    };
    if s.log || !(s.axis == -1 || s.axis == 3) {
        return None;
    }
    let x = work.layers[sm].inputs[0];
    let mut found = Found {
        q: x,
        k: x,
        k_perm: None,
        v,
        mask: None,
        scale: 1.0,
        scaled: false,
        causal: false,
    };
    let qk = scores(work, uses, x, x, &mut found)?;
    let LayerKind::MatMul(qk_mm) = &work.layers[qk].kind else {
        return None;
    };
    if work.ty(work.layers[qk].outputs[0]).shape != work.ty(x).shape {
        return None;
    }
    let (q, q_scale) = unscaled(work, uses, work.layers[qk].inputs[0]);
    let (kt, k_scale) = unscaled(work, uses, work.layers[qk].inputs[1]);
    found.q = q;
    found.scale *= q_scale * k_scale;
    if qk_mm.transpose_b {
        found.k = kt;
    } else {
        let tr = uses.sole(work, kt)?;
        let LayerKind::Transpose(t) = &work.layers[tr].kind else {
            return None;
        };
        let n = t.perm.len();
        let mut perm = t.perm.clone();
        if n != 4 {
            return None;
        }
        perm.swap(2, 3);
        let (k, k_scale) = unscaled(work, uses, work.layers[tr].inputs[0]);
        found.k = k;
        found.scale *= k_scale;
        if perm != [0, 1, 2, 3] {
            found.k_perm = Some(perm);
        }
    }
    let (qt, vt, xt) = (work.ty(found.q), work.ty(v), work.ty(x));
    let kv_batch = match &found.k_perm {
        Some(perm) => perm[..2]
            .iter()
            .map(|&d| work.ty(found.k).shape[d].clone())
            .collect::<Vec<DimExpr>>(),
        None => work.ty(found.k).shape.get(..2)?.to_vec(),
    };
    let fits = rank4(qt)
        && rank4(vt)
        && work.ty(found.k).shape.len() == 4
        && qt.shape[..2] == kv_batch[..]
        && vt.shape[..2] == qt.shape[..2]
        && xt.shape.len() == 4
        && qt.dtype == vt.dtype;
    if !fits {
        return None;
    }
    if let Some(mask) = found.mask {
        let ms = &work.ty(mask).shape;
        let keys = &xt.shape[3];
        if ms.is_empty()
            || ms.len() > 4
            || ms.last() != Some(keys)
            || !(work.ty(mask).dtype == qt.dtype || work.ty(mask).dtype == DType::Bool)
        {
            return None;
        }
    }
    if found.causal && xt.shape[2] != xt.shape[3] {
        return None;
    }
    Some(found)
}

/// Replaces every attention chain of `work` by one `Attention` layer.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)]) {
    let mut uses = Uses::new(work, outputs);
    let mut m = 0;
    while m < work.layers.len() {
        let Some(found) = find(work, &uses, m) else {
            m += 1;
            continue;
        };
        let key_ty = match &found.k_perm {
            Some(perm) => {
                let src = work.ty(found.k);
                let shape: Vec<DimExpr> = perm.iter().map(|&d| src.shape[d].clone()).collect();
                TypeShape::new(src.dtype, shape)
            }
            None => work.ty(found.k).clone(),
        };
        let kind = LayerKind::Attention(Attention {
            scale: Some(found.scale as f32),
            causal: found.causal,
            mask: found.mask.is_some(),
            ..Attention::default()
        });
        let mut ins = work.infer_inputs(&[found.q, found.k, found.v]);
        ins[1].dtype = key_ty.dtype;
        ins[1].shape = &key_ty.shape;
        ins[1].value = None;
        if let Some(mask) = found.mask {
            ins.extend(work.infer_inputs(&[mask]));
        }
        let want = work.ty(work.layers[m].outputs[0]);
        if kind.op().infer(&ins).ok().as_deref() != Some(std::slice::from_ref(want)) {
            m += 1;
            continue;
        }
        let mut k = found.k;
        if let Some(perm) = found.k_perm {
            let name = format!("{}/key", work.layers[m].name);
            let t = work.new_tensor(name.clone());
            work.tensors[t.index()].ty = Some(key_ty);
            let device = work.devices[m];
            work.layers.insert(
                m,
                Layer {
                    name,
                    kind: LayerKind::Transpose(Transpose { perm }),
                    inputs: vec![found.k],
                    outputs: vec![t],
                },
            );
            work.devices.insert(m, device);
            m += 1;
            k = t;
        }
        let mut inputs = vec![found.q, k, found.v];
        inputs.extend(found.mask);
        work.layers[m].kind = kind;
        work.layers[m].inputs = inputs;
        m += 1;
        uses = Uses::new(work, outputs);
    }
}
