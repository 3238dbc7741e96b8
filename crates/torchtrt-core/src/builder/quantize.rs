//! INT8: convolutions and matrix products that read 8-bit integers
//! ([`QuantizedConvolution`], [`QuantizedMatMul`]).
//!
//! Two sources, one result. *Explicit* (a Q/DQ model): a convolution whose input is a
//! `Dequantize` of 8-bit integers with one scale, and whose weights were folded from a
//! `Dequantize` of constant `I8` weights with zero zero points ([`QuantizedWeights`]),
//! reads the integers and the integer weights instead. *Calibrated* (an INT8 build,
//! [`Int8Calibration`]): a convolution or a MatMul with constant 2-D weights whose input has
//! a calibrated range reads it quantized ([`TensorRange::quantization`]; one `Quantize`
//! layer per tensor, shared by its readers), with its f32 weights quantized per output
//! channel. Either way the layer keeps its bias (and a convolution its residual and
//! activation). Depthwise convolutions (one channel per group) stay in float: their
//! products are too short to gain from integers.

use std::collections::HashMap;
use std::sync::Arc;

use torchtrt_plugin_api::{DType, DeviceKind, shape_of_sizes};

use super::uses::Uses;
use super::{BuildConfig, Work};
use crate::backend::Backend;
use crate::layers::{
    InferInput, LayerKind, OutputQuantization, Quantize, QuantizedConvolution, QuantizedMatMul,
    TypeShape, scalar_quantization,
};
use crate::network::{Layer, TensorId};
use crate::tensor::Tensor;

/// Calibrated ranges for an INT8 build: the least and largest value each tensor took over
/// the calibration inputs, by tensor name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Int8Calibration {
    /// Tensor name → range.
    pub ranges: HashMap<String, TensorRange>,
}

/// The least and largest (finite) value a tensor took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TensorRange {
    /// The least value.
    pub min: f32,
    /// The largest value.
    pub max: f32,
}

impl TensorRange {
    /// How a tensor of this range is quantized: `U8` with `scale = max / 255` when it is
    /// never negative (ReLU outputs: twice the resolution of a signed byte), else `I8` with
    /// `scale = max(|min|, |max|) / 127` (TensorRT's symmetric quantization); the zero
    /// point is 0. `None` when the range is all zeros or not finite.
    pub fn quantization(&self) -> Option<(DType, f32)> {
        let (dtype, scale) = if self.min >= 0.0 {
            (DType::U8, self.max / 255.0)
        } else {
            (DType::I8, self.min.abs().max(self.max.abs()) / 127.0)
        };
        (scale.is_finite() && scale > 0.0).then_some((dtype, scale))
    }
}

/// The first line of a calibration cache ([`Int8Calibration::to_text`]).
const CACHE_HEADER: &str = "torchtrt-int8-calibration 1";

impl Int8Calibration {
    /// The calibration as a cache file's text (TensorRT's calibration cache): a header line,
    /// then one line per tensor, `<min> <max> <name>` with the f32 bits in hex, sorted by
    /// name, so the values round-trip exactly.
    pub fn to_text(&self) -> String {
        let mut names: Vec<&String> = self.ranges.keys().collect();
        names.sort();
        let mut text = format!("{CACHE_HEADER}\n");
        for name in names {
            let r = self.ranges[name];
            text += &format!("{:08x} {:08x} {name}\n", r.min.to_bits(), r.max.to_bits());
        }
        text
    }

    /// Reads [`Self::to_text`]'s format; errors name the line. Ranges must be finite, with
    /// `min ≤ max`.
    pub fn from_text(text: &str) -> Result<Int8Calibration, String> {
        let mut lines = text.lines();
        if lines.next() != Some(CACHE_HEADER) {
            return Err(format!(
                "not a calibration cache: the first line is not `{CACHE_HEADER}`"
            ));
        }
        let mut ranges = HashMap::new();
        for (i, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
            let at = || format!("calibration cache line {}", i + 2);
            let mut parts = line.splitn(3, ' ');
            let (Some(lo), Some(hi), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("{}: expected `<min> <max> <tensor name>`", at()));
            };
            let bits = |b: &str| {
                u32::from_str_radix(b, 16)
                    .ok()
                    .filter(|_| b.len() == 8)
                    .map(f32::from_bits)
                    .ok_or_else(|| format!("{}: `{b}` is not 8 hex digits", at()))
            };
            let (min, max) = (bits(lo)?, bits(hi)?);
            if !(min.is_finite() && max.is_finite() && min <= max) {
                return Err(format!(
                    "{}: range [{min}, {max}] of `{name}` is not finite and ordered",
                    at()
                ));
            }
            if ranges
                .insert(name.to_string(), TensorRange { min, max })
                .is_some()
            {
                return Err(format!("{}: `{name}` appears twice", at()));
            }
        }
        Ok(Int8Calibration { ranges })
    }
}

/// Constant weights known to be `values · scales[m]` (per output channel `m`): what folding
/// a `Dequantize` of constant `I8` weights leaves next to their f32 value.
#[derive(Clone, Debug)]
pub(crate) struct QuantizedWeights {
    /// The `I8` values.
    pub values: Arc<Tensor>,
    /// One scale per index of the first axis.
    pub scales: Vec<f32>,
}

impl QuantizedWeights {
    /// The record of a folded `Dequantize` of `x` by `scale` along `axis`, with `zero_point`:
    /// when `x` is `I8` of rank 2 or more, the scale is one value or one per index of axis
    /// 0, and every zero point is 0.
    pub(crate) fn of_dequantize(
        x: &Arc<Tensor>,
        scale: &Tensor,
        zero_point: Option<&Tensor>,
        axis: i64,
    ) -> Option<QuantizedWeights> {
        if x.dtype() != DType::I8 || x.rank() < 2 || !scale.dtype().is_float() {
            return None;
        }
        if zero_point.is_some_and(|z| z.to_i64_vec().is_none_or(|v| v.iter().any(|&v| v != 0))) {
            return None;
        }
        let s: Vec<f32> = scale.to_f64_vec().into_iter().map(|v| v as f32).collect();
        let channels = x.shape()[0];
        let axis0 = axis == 0 || axis == -(x.rank() as i64);
        let scales = match s.len() {
            1 => vec![s[0]; channels],
            n if n == channels && axis0 && scale.rank() == 1 => s.to_vec(),
            _ => return None,
        };
        Some(QuantizedWeights {
            values: x.clone(),
            scales,
        })
    }

    /// The record after the weights' output channels were multiplied by `factors`.
    pub(crate) fn scaled(&self, factors: &[f32]) -> QuantizedWeights {
        QuantizedWeights {
            values: self.values.clone(),
            scales: self
                .scales
                .iter()
                .zip(factors)
                .map(|(s, f)| s * f)
                .collect(),
        }
    }
}

/// Where a convolution's quantized input comes from.
enum Source {
    /// A tensor of 8-bit integers already in the graph (a `Dequantize`'s input).
    Integers {
        tensor: TensorId,
        scale: f32,
        zero_point: i32,
    },
    /// A float tensor to quantize to `dtype` with this scale (zero point 0).
    Float {
        tensor: TensorId,
        dtype: DType,
        scale: f32,
    },
}

/// One convolution to replace.
struct Plan {
    source: Source,
    weights: QuantizedWeights,
}

impl Source {
    /// The quantized tensor's id and byte type (the float tensor's, quantized, for a
    /// calibrated source), scale and zero point.
    fn quantized(&self, work: &Work) -> (TensorId, DType, f32, i32) {
        match *self {
            Source::Integers {
                tensor,
                scale,
                zero_point,
            } => (tensor, work.ty(tensor).dtype, scale, zero_point),
            Source::Float {
                tensor,
                dtype,
                scale,
            } => (tensor, dtype, scale, 0),
        }
    }
}

impl Plan {
    /// The integer layer replacing `layer`, computing in `dtype`.
    fn kind(&self, work: &Work, layer: &Layer) -> LayerKind {
        let (_, _, input_scale, input_zero_point) = self.source.quantized(work);
        let weight_scales = self.weights.scales.clone();
        let dtype = work.ty(layer.outputs[0]).dtype;
        match &layer.kind {
            LayerKind::Convolution(conv) => LayerKind::QuantizedConvolution(QuantizedConvolution {
                conv: conv.clone(),
                input_scale,
                input_zero_point,
                weight_scales,
                dtype,
                output: None,
            }),
            _ => LayerKind::QuantizedMatMul(QuantizedMatMul {
                input_scale,
                input_zero_point,
                weight_scales,
                dtype,
                output: None,
            }),
        }
    }
}

/// Replaces every convolution and MatMul that qualifies (see the module docs) and that the
/// backend runs on integers ([`Backend::runs_integer`]), then fuses the quantizations of
/// their outputs.
pub(super) fn run(
    work: &mut Work,
    outputs: &[(String, TensorId)],
    backend: &dyn Backend,
    config: &BuildConfig,
) {
    let uses = Uses::new(work, outputs);
    let plans: Vec<Option<(Plan, LayerKind)>> = (0..work.layers.len())
        .map(|i| {
            let plan = plan(work, &uses, i, config.int8.as_deref(), backend.device())?;
            let kind = plan.kind(work, &work.layers[i]);
            runs_integer(work, &work.layers[i], &plan, &kind, backend).then_some((plan, kind))
        })
        .collect();
    if plans.iter().all(Option::is_none) {
        return;
    }
    let layers = std::mem::take(&mut work.layers);
    let devices = std::mem::take(&mut work.devices);
    let mut quantized: HashMap<TensorId, TensorId> = HashMap::new();
    for ((mut layer, device), plan) in layers.into_iter().zip(devices).zip(plans) {
        let Some((plan, kind)) = plan else {
            work.layers.push(layer);
            work.devices.push(device);
            continue;
        };
        let x = match plan.source {
            Source::Integers { tensor, .. } => tensor,
            Source::Float {
                tensor,
                dtype,
                scale,
            } => *quantized
                .entry(tensor)
                .or_insert_with(|| emit_quantize(work, tensor, dtype, scale, device)),
        };
        let w = work.emit_constant(
            format!("{}/weights_int8", layer.name),
            plan.weights.values.as_ref().clone(),
        );
        layer.kind = kind;
        layer.inputs[0] = x;
        layer.inputs[1] = w;
        work.layers.push(layer);
        work.devices.push(device);
    }
    quantize_outputs(work, outputs);
}

/// Whether `backend` runs `kind`, the integer layer `plan` makes of `layer`, on integers.
fn runs_integer(
    work: &Work,
    layer: &Layer,
    plan: &Plan,
    kind: &LayerKind,
    backend: &dyn Backend,
) -> bool {
    let (x, dtype, _, _) = plan.source.quantized(work);
    let values = &plan.weights.values;
    let w_shape = shape_of_sizes(values.shape());
    let mut inputs = work.infer_inputs(&layer.inputs);
    inputs[0] = InferInput {
        dtype,
        shape: &work.ty(x).shape,
        value: None,
    };
    inputs[1] = InferInput {
        dtype: DType::I8,
        shape: &w_shape,
        value: Some(values),
    };
    backend.runs_integer(kind, &inputs)
}

/// Fuses each `Quantize` to 8 bits with one constant scale into the integer convolution or
/// product producing its input, when nothing else reads that input: the convolution writes the
/// bytes instead of the floats.
fn quantize_outputs(work: &mut Work, outputs: &[(String, TensorId)]) {
    let uses = Uses::new(work, outputs);
    let mut fused = vec![false; work.layers.len()];
    for (i, done) in fused.iter_mut().enumerate() {
        let LayerKind::Quantize(q) = &work.layers[i].kind else {
            continue;
        };
        let t = work.layers[i].inputs[0];
        let Some(p) = uses.producer[t.index()] else {
            continue;
        };
        let quantization = output_quantization(work, &work.layers[i], q.to);
        let sole = uses.only_reader(t) == Some(i) && work.layers[p].outputs.len() == 1;
        let (Some(quantization), true) = (quantization, sole) else {
            continue;
        };
        let slot = match &mut work.layers[p].kind {
            LayerKind::QuantizedConvolution(c) => &mut c.output,
            LayerKind::QuantizedMatMul(m) => &mut m.output,
            _ => continue,
        };
        if slot.is_some() {
            continue;
        }
        *slot = Some(quantization);
        work.layers[p].outputs = work.layers[i].outputs.clone();
        *done = true;
    }
    let mut keep = fused.iter().map(|f| !f);
    work.layers.retain(|_| keep.next().unwrap_or(true));
    let mut keep = fused.iter().map(|f| !f);
    work.devices.retain(|_| keep.next().unwrap_or(true));
}

/// The output quantization a `Quantize` layer to `to` applies, when it is 8-bit with one
/// constant f32 scale and zero point.
fn output_quantization(work: &Work, layer: &Layer, to: DType) -> Option<OutputQuantization> {
    let (scale, zero_point) = scalar_parameters(work, layer)?;
    matches!(to, DType::I8 | DType::U8).then_some(OutputQuantization {
        dtype: to,
        scale,
        zero_point,
    })
}

/// The one constant scalar scale and zero point of a quantize or dequantize layer
/// ([`scalar_quantization`]).
fn scalar_parameters(work: &Work, layer: &Layer) -> Option<(f32, i32)> {
    scalar_quantization(&work.infer_inputs(&layer.inputs))
}

/// The plan for layer `i`, when it is a convolution or matrix product on `device` that
/// qualifies.
fn plan(
    work: &Work,
    uses: &Uses,
    i: usize,
    int8: Option<&Int8Calibration>,
    device: DeviceKind,
) -> Option<Plan> {
    let layer = &work.layers[i];
    let weights = work.tensors[layer.inputs.get(1)?.index()].value.as_ref()?;
    if work.devices[i] != device
        || !work.ty(layer.outputs[0]).dtype.is_float()
        || !weights.dtype().is_float()
    {
        return None;
    }
    match &layer.kind {
        LayerKind::Convolution(_) => conv_plan(work, uses, i, int8),
        LayerKind::MatMul(_) => matmul_plan(work, i, int8),
        _ => None,
    }
}

fn conv_plan(work: &Work, uses: &Uses, i: usize, int8: Option<&Int8Calibration>) -> Option<Plan> {
    let layer = &work.layers[i];
    let LayerKind::Convolution(conv) = &layer.kind else {
        return None;
    };
    let (x, w) = (layer.inputs[0], layer.inputs[1]);
    let weights = work.tensors[w.index()].value.as_ref()?;
    let depthwise = conv.groups > 1 && weights.shape().get(1) == Some(&1);
    if conv.channels_last || depthwise {
        return None;
    }
    let recorded = work.tensors[w.index()].quantized.as_deref();
    if let Some(source) = dequantized(work, uses, x) {
        return Some(Plan {
            source,
            weights: recorded?.clone(),
        });
    }
    Some(Plan {
        source: calibrated(work, x, int8?)?,
        weights: match recorded {
            Some(r) => r.clone(),
            None => per_channel(weights)?,
        },
    })
}

/// A calibrated MatMul: an f32 input with a range times constant f32 weights `[K, N]` (or
/// `[N, K]` transposed), with at most a bias; the weights become `[N, K]` rows quantized
/// per output column.
fn matmul_plan(work: &Work, i: usize, int8: Option<&Int8Calibration>) -> Option<Plan> {
    let layer = &work.layers[i];
    let LayerKind::MatMul(mm) = &layer.kind else {
        return None;
    };
    let (x, w) = (layer.inputs[0], layer.inputs[1]);
    let weights = work.tensors[w.index()].value.as_ref()?;
    if mm.transpose_a || layer.inputs.len() > 3 || weights.rank() != 2 || work.ty(x).shape.len() < 2
    {
        return None;
    }
    let source = calibrated(work, x, int8?)?;
    let values = weights.to_f64_vec();
    let rows = match mm.transpose_b {
        true => weights.clone(),
        false => {
            let (k, n) = (weights.shape()[0], weights.shape()[1]);
            let t: Vec<f64> = (0..n * k).map(|j| values[(j % k) * n + j / k]).collect();
            Arc::new(Tensor::from_vec(&[n, k], t).ok()?)
        }
    };
    Some(Plan {
        source,
        weights: per_channel(&rows)?,
    })
}

/// The quantization of the f32 tensor `x` its calibrated range gives.
fn calibrated(work: &Work, x: TensorId, int8: &Int8Calibration) -> Option<Source> {
    let range = int8.ranges.get(&work.tensors[x.index()].name)?;
    let (dtype, scale) = range.quantization()?;
    work.ty(x).dtype.is_float().then_some(Source::Float {
        tensor: x,
        dtype,
        scale,
    })
}

/// The integers `x` dequantizes, when a `Dequantize` with one constant scale and zero point
/// produces it.
fn dequantized(work: &Work, uses: &Uses, x: TensorId) -> Option<Source> {
    let p = uses.producer[x.index()]?;
    let layer = &work.layers[p];
    let LayerKind::Dequantize(_) = layer.kind else {
        return None;
    };
    let q = layer.inputs[0];
    if !matches!(work.ty(q).dtype, DType::I8 | DType::U8) {
        return None;
    }
    let (scale, zero_point) = scalar_parameters(work, layer)?;
    Some(Source::Integers {
        tensor: q,
        scale,
        zero_point,
    })
}

/// Float weights `[M, …]` quantized symmetrically per output channel: `scale[m] = max|w[m]| /
/// 127`, values rounded half to even into `[−127, 127]`.
fn per_channel(w: &Tensor) -> Option<QuantizedWeights> {
    let values: Vec<f32> = w.to_f64_vec().into_iter().map(|v| v as f32).collect();
    let m = *w.shape().first()?;
    let per = values.len().checked_div(m)?;
    if values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut scales = Vec::with_capacity(m);
    let mut q = Vec::with_capacity(values.len());
    for row in values.chunks_exact(per.max(1)).take(m) {
        let amax = row.iter().fold(0f32, |a, v| a.max(v.abs()));
        let s = if amax > 0.0 { amax / 127.0 } else { 1.0 };
        scales.push(s);
        q.extend(
            row.iter()
                .map(|v| (v / s).round_ties_even().clamp(-127.0, 127.0) as i8),
        );
    }
    Some(QuantizedWeights {
        values: Arc::new(Tensor::from_vec(w.shape(), q).ok()?),
        scales,
    })
}

/// Emits `Quantize(x, scale)` to `to` on `device` and returns its output.
fn emit_quantize(
    work: &mut Work,
    x: TensorId,
    to: DType,
    scale: f32,
    device: DeviceKind,
) -> TensorId {
    let name = format!("{}/{to}", work.tensors[x.index()].name);
    let s = work.emit_constant(format!("{name}/scale"), Tensor::scalar(scale));
    let out = work.new_tensor(name.clone());
    let ty = TypeShape::new(to, work.ty(x).shape.clone());
    work.emit(
        Layer {
            name,
            kind: LayerKind::Quantize(Quantize { axis: 0, to }),
            inputs: vec![x, s],
            outputs: vec![out],
        },
        vec![ty],
        device,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_caches_round_trip_and_refuse_damage() {
        let mut ranges = HashMap::new();
        let range = |min, max| TensorRange { min, max };
        ranges.insert("conv1 input".to_string(), range(0.0, 0.1f32));
        ranges.insert("x".to_string(), range(-1.5, 3.75));
        let c = Int8Calibration { ranges };
        assert_eq!(Int8Calibration::from_text(&c.to_text()).unwrap(), c);
        for bad in [
            "",
            "torchtrt-int8-calibration 2\n",
            "torchtrt-int8-calibration 1\n3f800000 x\n",
            "torchtrt-int8-calibration 1\nzz 3f800000 x\n",
            "torchtrt-int8-calibration 1\n3f80000 3f800000 x\n",
            "torchtrt-int8-calibration 1\n00000000 7f800000 x\n",
            "torchtrt-int8-calibration 1\n3f800000 00000000 x\n",
            "torchtrt-int8-calibration 1\n00000000 3f800000 x\n00000000 3f800000 x\n",
        ] {
            assert!(Int8Calibration::from_text(bad).is_err(), "{bad:?}");
        }
    }
}

#[cfg(test)]
mod range_tests {
    use super::*;

    #[test]
    fn non_negative_ranges_take_unsigned_bytes() {
        let q = |min, max| TensorRange { min, max }.quantization();
        assert_eq!(q(0.0, 2.55), Some((DType::U8, 0.01)));
        assert_eq!(q(-0.5, 1.27), Some((DType::I8, 0.01)));
        assert_eq!(q(-2.54, 1.0), Some((DType::I8, 0.02)));
        assert_eq!(q(0.0, 0.0), None);
    }
}
