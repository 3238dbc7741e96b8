//! Folding a per-channel affine step into the convolution before it: `conv(x, W, b) · s`
//! becomes `conv(x, W·s, b·s)` and `conv(x, W, b) + t` becomes `conv(x, W, b + t)` (also `−`
//! and `÷` with the convolution on the left). Exported BatchNormalization is exactly such a
//! `Mul` + `Add` pair, so inference BN disappears into the convolution's weights.

use std::sync::Arc;

use torchtrt_plugin_api::{DType, DeviceKind};

use super::Work;
use crate::error::Result;
use crate::layers::{
    Activation, ActivationKind, Constant, Convolution, ElementwiseOp, LayerKind, TypeShape,
};
use crate::network::{Layer, TensorId};
use crate::tensor::Tensor;

/// Folds the element-wise `layer` into the convolution producing one of its inputs, when
/// that is possible; returns whether it did (the layer is then not emitted). `uses` counts
/// the readers of the network's tensors; tensors the builder made itself have one reader.
pub(crate) fn fold_into_conv(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    uses: &[usize],
) -> Result<bool> {
    let LayerKind::Elementwise(e) = kind else {
        return Ok(false);
    };
    let sides = match e.op {
        ElementwiseOp::Mul | ElementwiseOp::Add => 2,
        ElementwiseOp::Sub | ElementwiseOp::Div => 1,
        _ => return Ok(false),
    };
    let sole = |t: TensorId| uses.get(t.index()).is_none_or(|&u| u == 1);
    for conv_side in 0..sides {
        let (c, k) = (inputs[conv_side], inputs[1 - conv_side]);
        let Some(pos) = sole_producer(work, c, uses) else {
            continue;
        };
        let conv = &work.layers[pos];
        let plain = matches!(&conv.kind, LayerKind::Convolution(v) if v.activation.is_none() && !v.channels_last)
            && conv.inputs.len() <= 3;
        if !plain {
            continue;
        }
        let Some(factor) = work.tensors[k.index()].value.clone() else {
            continue;
        };
        let w_id = conv.inputs[1];
        let b_id = conv.inputs.get(2).copied();
        if !sole(w_id) || b_id.is_some_and(|b| !sole(b)) {
            continue;
        }
        let Some(w) = work.tensors[w_id.index()].value.clone() else {
            continue;
        };
        let b = match b_id {
            Some(b) => match work.tensors[b.index()].value.clone() {
                Some(v) => Some(v),
                None => continue,
            },
            None => None,
        };
        let out_rank = types[0].shape.len();
        let m = w.shape()[0];
        let (Some(per), true) = (per_channel(&factor, out_rank, m), w.dtype() == DType::F32) else {
            continue;
        };
        let mut wv = w.as_slice::<f32>()?.to_vec();
        let mut bv = match &b {
            Some(b) => b.as_slice::<f32>()?.to_vec(),
            None => vec![0.0; m],
        };
        let per_m = wv.len() / m.max(1);
        match e.op {
            ElementwiseOp::Mul | ElementwiseOp::Div => {
                let f = |x: f32| {
                    if e.op == ElementwiseOp::Mul {
                        x
                    } else {
                        1.0 / x
                    }
                };
                for (o, chunk) in wv.chunks_mut(per_m).enumerate() {
                    let s = f(per[o]);
                    chunk.iter_mut().for_each(|v| *v *= s);
                    bv[o] *= s;
                }
            }
            ElementwiseOp::Add => bv.iter_mut().zip(&per).for_each(|(v, t)| *v += t),
            _ => bv.iter_mut().zip(&per).for_each(|(v, t)| *v -= t),
        }
        let quantized = work.tensors[w_id.index()].quantized.clone();
        replace_constant(work, w_id, Tensor::from_vec(w.shape(), wv)?);
        work.tensors[w_id.index()].quantized = quantized.map(|q| {
            let factors: Vec<f32> = match e.op {
                ElementwiseOp::Mul => per.clone(),
                ElementwiseOp::Div => per.iter().map(|x| 1.0 / x).collect(),
                _ => vec![1.0; m],
            };
            Arc::new(q.scaled(&factors))
        });
        let bias = Tensor::from_vec(&[m], bv)?;
        match b_id {
            Some(b) => replace_constant(work, b, bias),
            None => {
                let name = format!("{}/bias", work.layers[pos].name);
                let t = work.insert_constant(pos, name, bias);
                work.layers[pos + 1].inputs.push(t);
            }
        }
        let conv_pos = if b_id.is_some() { pos } else { pos + 1 };
        work.layers[conv_pos].outputs = layer.outputs.clone();
        work.tensors[layer.outputs[0].index()].ty = Some(types[0].clone());
        return Ok(true);
    }
    Ok(false)
}

/// Turns a per-channel `Mul` by a constant on the CPU (an exported BatchNormalization that no
/// convolution precedes) into a depthwise 1×1 convolution, so the `Add` after it folds into
/// that convolution's bias and a following activation into its epilogue: one pass instead
/// of three. Returns whether it did (the layer is then not emitted).
pub(crate) fn affine_as_conv(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    device: DeviceKind,
) -> Result<bool> {
    let LayerKind::Elementwise(e) = kind else {
        return Ok(false);
    };
    if e.op != ElementwiseOp::Mul || device != DeviceKind::Cpu {
        return Ok(false);
    }
    for side in 0..2 {
        let (x, k) = (inputs[side], inputs[1 - side]);
        let Some(factor) = work.tensors[k.index()].value.clone() else {
            continue;
        };
        let xt = work.ty(x).clone();
        let rank = xt.shape.len();
        let Some(channels) = xt.shape.get(1).and_then(|d| d.as_const()) else {
            continue;
        };
        if !(3..=5).contains(&rank)
            || xt.dtype != DType::F32
            || types[0].shape != xt.shape
            || channels <= 0
        {
            continue;
        }
        let m = channels as usize;
        let Some(per) = per_channel(&factor, rank, m).filter(|_| factor.numel() == m && m > 1)
        else {
            continue;
        };
        let mut dims = vec![m, 1];
        dims.resize(rank, 1);
        let w = work.new_tensor(format!("{}/scale", layer.name));
        let w_ty = TypeShape::new(
            DType::F32,
            dims.iter().map(|&d| (d as i64).into()).collect(),
        );
        work.emit(
            Layer {
                name: format!("{}/scale", layer.name),
                kind: LayerKind::Constant(Constant::new(Tensor::from_vec(&dims, per)?)),
                inputs: vec![],
                outputs: vec![w],
            },
            vec![w_ty],
            DeviceKind::Cpu,
        );
        let mut conv = Convolution::new(rank - 2);
        conv.groups = channels;
        work.emit(
            Layer {
                name: layer.name.clone(),
                kind: LayerKind::Convolution(conv),
                inputs: vec![x, w],
                outputs: layer.outputs.clone(),
            },
            types.to_vec(),
            device,
        );
        return Ok(true);
    }
    Ok(false)
}

/// Fuses the activation `layer` into the convolution producing its input, when that
/// convolution runs on the CPU or a CUDA device, has no activation yet, and nothing else
/// reads its output; returns whether it did (the layer is then not emitted). Only the kinds
/// both convolutions apply as an epilogue are fused: `Relu`, `LeakyRelu`, `Clip`, `Silu`.
pub(crate) fn fuse_activation(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    uses: &[usize],
) -> bool {
    let LayerKind::Activation(a) = kind else {
        return false;
    };
    let fusable = matches!(
        a.kind,
        ActivationKind::Relu
            | ActivationKind::LeakyRelu { .. }
            | ActivationKind::Clip { .. }
            | ActivationKind::Silu
    );
    if !fusable {
        return false;
    }
    let Some(pos) = plain_conv_producing(work, inputs[0], uses, 1) else {
        return false;
    };
    work.tensors[layer.outputs[0].index()].ty = Some(types[0].clone());
    give_activation(work, pos, a.kind, layer);
    true
}

/// Fuses `Mul(x, Sigmoid(x))` (either operand order; how exporters write SiLU) into one
/// `Silu` activation, when nothing else reads the sigmoid: the `Sigmoid` layer becomes the
/// `Silu` and takes the `Mul`'s output, so the tensor is read and written once instead of
/// three times. When `x` comes from a convolution that only these two layers read, the
/// `Silu` goes on into that convolution's epilogue (as [`fuse_activation`]) and no layer
/// is left. Returns whether it fused (the `Mul` is then not emitted).
pub(crate) fn fuse_silu(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    uses: &[usize],
) -> bool {
    let LayerKind::Elementwise(e) = kind else {
        return false;
    };
    if e.op != ElementwiseOp::Mul || inputs.len() != 2 || inputs[0] == inputs[1] {
        return false;
    }
    for side in 0..2 {
        let (s, x) = (inputs[side], inputs[1 - side]);
        let Some(pos) = sole_producer(work, s, uses) else {
            continue;
        };
        let sigmoid = &work.layers[pos];
        let is_sigmoid = matches!(
            &sigmoid.kind,
            LayerKind::Activation(a) if a.kind == ActivationKind::Sigmoid
        );
        if !is_sigmoid || sigmoid.inputs.as_slice() != [x] || work.ty(x) != &types[0] {
            continue;
        }
        work.tensors[layer.outputs[0].index()].ty = Some(types[0].clone());
        if let Some(conv) = plain_conv_producing(work, x, uses, 2) {
            work.layers.remove(pos);
            work.devices.remove(pos);
            give_activation(work, conv, ActivationKind::Silu, layer);
            return true;
        }
        let sigmoid = &mut work.layers[pos];
        sigmoid.kind = LayerKind::Activation(Activation {
            kind: ActivationKind::Silu,
        });
        sigmoid.outputs = layer.outputs.clone();
        return true;
    }
    false
}

/// Fuses a residual `Add` of a convolution's output and another tensor of the same shape into
/// that convolution, as its fourth input (see [`Convolution`]), when the convolution runs on
/// the CPU or a CUDA device, has no activation or residual yet, and nothing else reads its output; a following
/// activation then fuses too. The convolution moves to the `Add`'s place in the layer order,
/// after the residual's producer. A zero bias is added when the convolution has none. Returns
/// whether it fused (the `Add` is then not emitted).
pub(crate) fn fuse_residual(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    uses: &[usize],
) -> Result<bool> {
    let LayerKind::Elementwise(e) = kind else {
        return Ok(false);
    };
    if e.op != ElementwiseOp::Add || inputs.len() != 2 || inputs[0] == inputs[1] {
        return Ok(false);
    }
    for conv_side in 0..2 {
        let (c, r) = (inputs[conv_side], inputs[1 - conv_side]);
        let Some(pos) = sole_producer(work, c, uses) else {
            continue;
        };
        let plain = is_plain_conv(work, pos) && work.layers[pos].inputs.len() <= 3;
        if !plain || work.ty(c) != &types[0] || work.ty(r) != &types[0] {
            continue;
        }
        let mut conv = work.layers.remove(pos);
        let device = work.devices.remove(pos);
        if conv.inputs.len() == 2 {
            let m = work.ty(conv.inputs[1]).shape[0].as_const();
            let Some(m) = m.and_then(|m| usize::try_from(m).ok()) else {
                work.layers.insert(pos, conv);
                work.devices.insert(pos, device);
                continue;
            };
            let zeros = Tensor::zeros(types[0].dtype, &[m]);
            let b = work.emit_constant(format!("{}/bias", conv.name), zeros);
            conv.inputs.push(b);
        }
        conv.inputs.push(r);
        conv.outputs = layer.outputs.clone();
        work.emit(conv, types.to_vec(), device);
        return Ok(true);
    }
    Ok(false)
}

/// The position of the convolution producing `t` when exactly `readers` layers (and
/// outputs) read `t`, the convolution has no activation yet and its device applies one as
/// it writes.
fn plain_conv_producing(work: &Work, t: TensorId, uses: &[usize], readers: usize) -> Option<usize> {
    if uses.get(t.index()) != Some(&readers) {
        return None;
    }
    let pos = work
        .layers
        .iter()
        .rposition(|l| l.outputs.first() == Some(&t))?;
    is_plain_conv(work, pos).then_some(pos)
}

/// Whether the layer at `pos` is a convolution with no activation yet on a device that
/// applies activations and residuals as it writes.
fn is_plain_conv(work: &Work, pos: usize) -> bool {
    matches!(&work.layers[pos].kind, LayerKind::Convolution(c) if c.activation.is_none())
        && work.devices.get(pos).is_some_and(fuses_epilogue)
}

/// Makes the convolution at `pos` apply `kind` and write `layer`'s output instead of its own.
fn give_activation(work: &mut Work, pos: usize, kind: ActivationKind, layer: &Layer) {
    let conv = &mut work.layers[pos];
    if let LayerKind::Convolution(c) = &mut conv.kind {
        c.activation = Some(kind);
    }
    conv.outputs = layer.outputs.clone();
}

/// Whether convolutions on `device` apply activations and residuals as they write (both the
/// CPU and the CUDA convolution do; a CUDA engine's convolution the GPU kernel declines
/// runs on the CPU, which does too).
fn fuses_epilogue(device: &DeviceKind) -> bool {
    matches!(device, DeviceKind::Cpu | DeviceKind::Cuda)
}

/// The f32 values of a tensor that broadcasts along the channel axis (1) of a rank-`rank`
/// output with `m` channels and is 1 everywhere else, expanded to `m` values.
fn per_channel(t: &Tensor, rank: usize, m: usize) -> Option<Vec<f32>> {
    if t.dtype() != DType::F32 {
        return None;
    }
    let values = along_axis(t, rank, 1, m)?;
    Some(values.into_iter().map(|v| v as f32).collect())
}

/// The values of a tensor that broadcasts along `axis` of a rank-`rank` output with `m`
/// elements on that axis and is 1 on every other, expanded to `m` values.
pub(super) fn along_axis(t: &Tensor, rank: usize, axis: usize, m: usize) -> Option<Vec<f64>> {
    let shape = t.shape();
    let offset = rank.checked_sub(shape.len())?;
    for (i, &d) in shape.iter().enumerate() {
        if d != 1 && !(i + offset == axis && d == m) {
            return None;
        }
    }
    let v = t.to_f64_vec();
    Some(if v.len() == m {
        v
    } else {
        vec![*v.first()?; m]
    })
}

fn replace_constant(work: &mut Work, t: TensorId, value: Tensor) {
    let value = Arc::new(value);
    work.tensors[t.index()].value = Some(value.clone());
    work.tensors[t.index()].quantized = None;
    if let Some(l) = work
        .layers
        .iter_mut()
        .find(|l| l.outputs.first() == Some(&t))
    {
        l.kind = LayerKind::Constant(Constant { value, slot: 0 });
    }
}

/// Fuses `MatMul(a, W) + bias` into the MatMul as its third input, when the MatMul has a
/// constant 2-D `W` and an untransposed `a`, runs where a bias costs nothing extra (the CPU's
/// packed f32 product; the CUDA product's epilogue in f32, f16 or bf16), nothing else reads
/// its output, and `bias` is a constant of the same dtype holding one value per column
/// (shape `[N]`, or `[1, …, 1, N]`). The MatMul moves to the `Add`'s place. Returns whether
/// it fused (the `Add` is then not emitted).
pub(crate) fn fuse_matmul_bias(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    uses: &[usize],
) -> Result<bool> {
    let dtype = types[0].dtype;
    for (m, b) in add_sides(kind, inputs) {
        let Some(bias) = work.tensors[b.index()].value.clone() else {
            continue;
        };
        let Some(pos) = linear_producer(work, m, uses, dtype, fuses_matmul_bias) else {
            continue;
        };
        let plain = work.layers[pos].inputs.len() == 2;
        let n = types[0].shape.last().and_then(|d| d.as_const());
        let per_column = bias.dtype() == dtype
            && n.is_some_and(|n| {
                let shape = bias.shape();
                shape.last() == Some(&(n as usize))
                    && shape[..shape.len() - 1].iter().all(|&d| d == 1)
                    && shape.len() <= types[0].shape.len()
            });
        if !plain || !per_column || work.ty(m) != &types[0] {
            continue;
        }
        let mut value = Tensor::clone(&bias);
        value.reshape(&[bias.numel()])?;
        return move_matmul(work, pos, layer, types, |w, mm| {
            let bias = w.emit_constant(format!("{}/bias", mm.name), value);
            mm.inputs.push(bias);
        });
    }
    Ok(false)
}

/// Fuses `MatMul(a, W) (+ bias) + r` into the MatMul as its fourth input (after a bias, a
/// zero one when it has none), when the MatMul is one [`fuse_matmul_bias`] takes, runs on
/// CUDA (the product's epilogue adds `r` as it writes), nothing else reads its output, and
/// `r` has the sum's type (no broadcast). The MatMul moves to the `Add`'s place. Returns
/// whether it fused.
pub(crate) fn fuse_matmul_residual(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    uses: &[usize],
) -> Result<bool> {
    let dtype = types[0].dtype;
    for (m, r) in add_sides(kind, inputs) {
        let Some(pos) = linear_producer(work, m, uses, dtype, fuses_matmul_residual) else {
            continue;
        };
        let n = types[0].shape.last().and_then(|d| d.as_const());
        let (Some(n), 2..=3) = (n, work.layers[pos].inputs.len()) else {
            continue;
        };
        if work.ty(m) != &types[0] || work.ty(r) != &types[0] {
            continue;
        }
        return move_matmul(work, pos, layer, types, |w, mm| {
            take_residual(mm, r, dtype, n as usize, |name, v| w.emit_constant(name, v));
        });
    }
    Ok(false)
}

/// Gives the linear layer `mm` the residual `r` (of `dtype`, `n` columns) as its fourth
/// input, after a zero bias that `constant` makes from its name and value where it has none.
pub(super) fn take_residual(
    mm: &mut Layer,
    r: TensorId,
    dtype: DType,
    n: usize,
    constant: impl FnOnce(String, Tensor) -> TensorId,
) {
    if mm.inputs.len() == 2 {
        let bias = constant(format!("{}/bias", mm.name), Tensor::zeros(dtype, &[n]));
        mm.inputs.push(bias);
    }
    mm.inputs.push(r);
}

/// The operands of an `Add` of two different tensors, each way round; none for anything
/// else.
pub(super) fn add_sides(kind: &LayerKind, inputs: &[TensorId]) -> Vec<(TensorId, TensorId)> {
    match (kind, inputs) {
        (LayerKind::Elementwise(e), &[x, y]) if e.op == ElementwiseOp::Add && x != y => {
            vec![(x, y), (y, x)]
        }
        _ => Vec::new(),
    }
}

/// Moves the MatMul at `pos` to the place of `layer` (the layer it absorbs), writing its
/// outputs, after `edit` has changed its inputs (emitting the constants they need). Always
/// `Ok(true)`: it fused.
pub(super) fn move_matmul(
    work: &mut Work,
    pos: usize,
    layer: &Layer,
    types: &[TypeShape],
    edit: impl FnOnce(&mut Work, &mut Layer),
) -> Result<bool> {
    let mut mm = work.layers.remove(pos);
    let device = work.devices.remove(pos);
    edit(work, &mut mm);
    mm.outputs = layer.outputs.clone();
    work.emit(mm, types.to_vec(), device);
    Ok(true)
}

/// The position of the MatMul producing `t` that a bias or residual can ride on: `t` has
/// one reader, and the MatMul is [`is_linear`].
fn linear_producer(
    work: &Work,
    t: TensorId,
    uses: &[usize],
    dtype: DType,
    fuses: impl Fn(&DeviceKind, DType) -> bool,
) -> Option<usize> {
    let pos = sole_producer(work, t, uses)?;
    is_linear(work, pos, dtype, fuses).then_some(pos)
}

/// Whether the layer at `pos` is a MatMul whose A is not transposed and whose B is a
/// constant matrix, on a device where `fuses(device, dtype)`.
pub(super) fn is_linear(
    work: &Work,
    pos: usize,
    dtype: DType,
    fuses: impl Fn(&DeviceKind, DType) -> bool,
) -> bool {
    let mm = &work.layers[pos];
    let weights_2d = mm.inputs.get(1).is_some_and(|&w| {
        work.tensors[w.index()]
            .value
            .as_ref()
            .is_some_and(|v| v.rank() == 2)
    });
    matches!(&mm.kind, LayerKind::MatMul(l) if !l.transpose_a)
        && weights_2d
        && work.devices.get(pos).is_some_and(|d| fuses(d, dtype))
}

/// Whether a MatMul on `device` adds a residual of `dtype` as it writes its product.
pub(super) fn fuses_matmul_residual(device: &DeviceKind, dtype: DType) -> bool {
    *device == DeviceKind::Cuda && fuses_matmul_bias(device, dtype)
}

/// Whether MatMuls on `device` add a bias of `dtype` as they write their product.
fn fuses_matmul_bias(device: &DeviceKind, dtype: DType) -> bool {
    match device {
        DeviceKind::Cpu => dtype == DType::F32,
        DeviceKind::Cuda => matches!(dtype, DType::F32 | DType::F16 | DType::BF16),
    }
}

/// The position of the layer producing `t`, when `t` has exactly one reader (the layer being
/// fused): a producer it can absorb.
pub(super) fn sole_producer(work: &Work, t: TensorId, uses: &[usize]) -> Option<usize> {
    if uses.get(t.index()).is_some_and(|&u| u != 1) {
        return None;
    }
    work.layers
        .iter()
        .rposition(|l| l.outputs.first() == Some(&t))
}
