//! `NonMaxSuppression` v1 (namespace `torch_tensorrt`): greedy non-maximum suppression,
//! as ONNX `NonMaxSuppression` (boxes `[B, N, 4]`, scores `[B, C, N]`, selected
//! `[K, 3]` triples of batch, class and box) or torchvision's `nms` (boxes `[N, 4]`, scores
//! `[N]`, selected `[K]` box indices). How many boxes survive depends on the values, so the
//! selection is an output sized by a count ([`SizedOutput`]): output 0 is allocated for
//! every box and holds the `K` selected ones, output 1 holds `K`.

mod cpu;
pub(crate) mod cuda;
mod rule;

use torchtrt_plugin_api::{
    Capabilities, DType, DeviceKind, DimExpr, FieldCollection, FieldSpec, Launch, Plugin,
    PluginCreator, PluginKey, PluginResult, PortDesc, ShapeExpr, ShapeValues, SizedOutput,
    TensorDesc, TensorFormat, validate_fields,
};

use crate::support::{FLOAT_DTYPES, Origin, flag};
pub(crate) use rule::{Layout, Rule, ValueInputs};

/// Creates `NonMaxSuppression` plugins.
#[derive(Clone, Copy, Debug, Default)]
pub struct NmsCreator;

impl PluginCreator for NmsCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("torch_tensorrt", "NonMaxSuppression", "1")
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::with_default(
                "layout",
                "onnx",
                "`onnx`: boxes [B,N,4], scores [B,C,N], selected [K,3] (batch, class, box); \
                 `torchvision`: boxes [N,4], scores [N], selected [K] box indices",
            ),
            FieldSpec::with_default(
                "center_point_box",
                0i32,
                "0: boxes are two opposite corners (any order); 1: centre x, centre y, width, height",
            )
            .scalar(),
            FieldSpec::with_default(
                "max_output_boxes_per_class",
                -1i64,
                "most boxes kept per batch and class; -1 for no limit",
            )
            .scalar(),
            FieldSpec::with_default(
                "iou_threshold",
                0f32,
                "a box is suppressed by a kept box whose IoU with it is greater",
            )
            .scalar(),
            FieldSpec::with_default(
                "score_threshold",
                0f32,
                "with use_score_threshold, boxes whose score is not greater are dropped",
            )
            .scalar(),
            FieldSpec::with_default(
                "use_score_threshold",
                0i32,
                "1: drop boxes scoring score_threshold or less",
            )
            .scalar(),
            FieldSpec::with_default(
                "max_output_input",
                -1i32,
                "the input (2 to 4) holding max_output_boxes_per_class at run time, or -1",
            )
            .scalar(),
            FieldSpec::with_default(
                "iou_input",
                -1i32,
                "the input (2 to 4) holding iou_threshold at run time, or -1",
            )
            .scalar(),
            FieldSpec::with_default(
                "score_input",
                -1i32,
                "the input (2 to 4) holding score_threshold at run time (empty: none), or -1",
            )
            .scalar(),
        ]
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            shape_inputs: true,
            sized_outputs: true,
            ..Capabilities::default()
        }
    }

    fn create(&self, layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let fields = validate_fields(&self.key(), &self.field_schema(), fields)?;
        let origin = Origin::new(self.key(), layer_name);
        let layout_name = fields.string("layout").unwrap_or("onnx");
        let layout = Layout::parse(layout_name).ok_or_else(|| {
            origin.field_error(
                "layout",
                format!("unknown layout `{layout_name}` (expected `onnx` or `torchvision`)"),
            )
        })?;
        let centered = flag(
            &origin,
            "center_point_box",
            fields.i32("center_point_box").unwrap_or(0),
        )?;
        let max_out = fields.i64("max_output_boxes_per_class").unwrap_or(-1);
        if max_out < -1 {
            return Err(origin.field_error(
                "max_output_boxes_per_class",
                format!("must be -1 (no limit) or >= 0, got {max_out}"),
            ));
        }
        let iou = fields.f32("iou_threshold").unwrap_or(0.0);
        let score = fields.f32("score_threshold").unwrap_or(0.0);
        for (name, v) in [("iou_threshold", iou), ("score_threshold", score)] {
            if v.is_nan() {
                return Err(origin.field_error(name, "is NaN"));
            }
        }
        let use_score = flag(
            &origin,
            "use_score_threshold",
            fields.i32("use_score_threshold").unwrap_or(0),
        )?;
        let mut taken = Vec::new();
        let mut input = |name: &str| -> PluginResult<Option<usize>> {
            match fields.i32(name).unwrap_or(-1) {
                -1 => Ok(None),
                i @ 2..=4 if !taken.contains(&i) => {
                    taken.push(i);
                    Ok(Some(i as usize))
                }
                i => Err(origin.field_error(name, format!("input {i} is not a free input 2 to 4"))),
            }
        };
        let inputs = ValueInputs {
            max_out: input("max_output_input")?,
            iou: input("iou_input")?,
            score: input("score_input")?,
        };
        let indices = inputs.indices();
        if indices.iter().enumerate().any(|(k, &i)| i != k + 2) {
            return Err(origin.field_error(
                "max_output_input",
                format!("value inputs {indices:?} must follow boxes and scores without gaps"),
            ));
        }
        Ok(Box::new(NmsPlugin {
            origin,
            inputs,
            rule: Rule {
                layout,
                centered,
                max_out: u64::try_from(max_out).ok(),
                iou,
                score: use_score.then_some(score),
            },
        }))
    }
}

/// A configured suppression layer.
#[derive(Clone, Debug)]
struct NmsPlugin {
    origin: Origin,
    rule: Rule,
    inputs: ValueInputs,
}

impl NmsPlugin {
    fn num_inputs(&self) -> usize {
        2 + self.inputs.indices().len()
    }

    /// The rule with the values of its inputs; an error when they are not known.
    fn resolved(&self, values: &[ShapeValues]) -> PluginResult<Rule> {
        self.inputs
            .apply(&self.rule, values)
            .map_err(|e| self.origin.input_error(e))?
            .ok_or_else(|| {
                self.origin
                    .input_error("the limit and thresholds are not known")
            })
    }

    /// The rule that bounds the selection: a limit not known yet bounds nothing.
    fn bounding(&self, values: &[ShapeValues]) -> PluginResult<Rule> {
        match self.inputs.apply(&self.rule, values) {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Ok(Rule {
                max_out: if self.inputs.max_out.is_some() {
                    None
                } else {
                    self.rule.max_out
                },
                ..self.rule
            }),
            Err(e) => Err(self.origin.input_error(e)),
        }
    }

    /// `(batches, classes, boxes)` of concrete input shapes, checked against the layout.
    fn problem(&self, boxes: &[i64], scores: &[i64]) -> PluginResult<(usize, usize, usize)> {
        self.rule
            .problem(boxes, scores)
            .map_err(|e| self.origin.input_error(e))
    }
}

impl Plugin for NmsPlugin {
    fn num_outputs(&self) -> usize {
        2
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        if inputs.len() != self.num_inputs() {
            return Err(self.origin.input_error(format!(
                "expects {} inputs, got {}",
                self.num_inputs(),
                inputs.len()
            )));
        }
        match inputs {
            [b, s, ..] if b == s && FLOAT_DTYPES.contains(b) => Ok(vec![DType::I64, DType::I64]),
            [b, s, ..] => Err(self.origin.input_error(format!(
                "boxes and scores must share one of f32, f16, bf16, got {b} and {s}"
            ))),
            _ => Err(self.origin.input_error("expects boxes and scores")),
        }
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        self.output_shapes_of(inputs, &[])
    }

    fn shape_inputs(&self) -> Vec<usize> {
        self.inputs.indices()
    }

    fn output_shapes_of(
        &self,
        inputs: &[ShapeExpr],
        values: &[ShapeValues],
    ) -> PluginResult<Vec<ShapeExpr>> {
        let [boxes, scores, ..] = inputs else {
            return Err(self.origin.input_error(format!(
                "expects boxes and scores, got {} inputs",
                inputs.len()
            )));
        };
        let upper = self
            .bounding(values)?
            .upper_bound(boxes, scores)
            .map_err(|e| self.origin.input_error(e))?;
        let selected = match self.rule.layout {
            Layout::Onnx => vec![upper, DimExpr::Const(3)],
            Layout::Torchvision => vec![upper],
        };
        Ok(vec![selected, Vec::new()])
    }

    fn sized_outputs(&self) -> Vec<SizedOutput> {
        vec![SizedOutput {
            output: 0,
            axis: 0,
            count: 1,
        }]
    }

    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, _: DeviceKind) -> bool {
        let Some(port) = io.get(pos) else {
            return false;
        };
        if port.format != TensorFormat::Linear || num_inputs != self.num_inputs() {
            return false;
        }
        match pos {
            0 => FLOAT_DTYPES.contains(&port.dtype),
            1 => port.dtype == io[0].dtype,
            p if Some(p) == self.inputs.max_out => matches!(port.dtype, DType::I64 | DType::I32),
            p if p < num_inputs => matches!(port.dtype, DType::F32 | DType::F64 | DType::F16),
            _ => port.dtype == DType::I64,
        }
    }

    fn configure(&mut self, inputs: &[TensorDesc], outputs: &[TensorDesc]) -> PluginResult<()> {
        let ([boxes, scores, ..], [_, _]) = (inputs, outputs) else {
            return Err(self.origin.input_error(format!(
                "expects boxes, scores and 2 outputs, got {} inputs and {} outputs",
                inputs.len(),
                outputs.len()
            )));
        };
        if inputs.len() != self.num_inputs() {
            return Err(self.origin.input_error(format!(
                "expects {} inputs, got {}",
                self.num_inputs(),
                inputs.len()
            )));
        }
        self.rule
            .check_ranks(boxes.rank(), scores.rank())
            .map_err(|e| self.origin.input_error(e))
    }

    fn workspace_size(&self, inputs: &[TensorDesc], _outputs: &[TensorDesc]) -> usize {
        match inputs {
            [boxes, scores, ..] => self
                .problem(&boxes.shape, &scores.shape)
                .map(|(b, c, n)| cuda::workspace_bytes(b, c, n))
                .unwrap_or(0),
            _ => 0,
        }
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        match launch {
            Launch::Cuda(c) => {
                let rule = self.resolved(c.shape_values)?;
                cuda::enqueue(&self.origin, &rule, &c)
            }
            Launch::Cpu(c) => {
                let mut values = vec![ShapeValues::Unknown; c.inputs.len()];
                for i in self.inputs.indices() {
                    if let (Some(t), Some(v)) = (c.inputs.get(i), values.get_mut(i)) {
                        *v = ShapeValues::from_bytes(t.desc.dtype, t.data)?;
                    }
                }
                let rule = self.resolved(&values)?;
                cpu::enqueue(&self.origin, &rule, c)
            }
        }
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        let r = &self.rule;
        let index = |i: Option<usize>| i.map_or(-1, |i| i as i32);
        FieldCollection::new()
            .with("layout", r.layout.name())
            .with("center_point_box", i32::from(r.centered))
            .with(
                "max_output_boxes_per_class",
                r.max_out
                    .map_or(-1, |m| i64::try_from(m).unwrap_or(i64::MAX)),
            )
            .with("iou_threshold", r.iou)
            .with("score_threshold", r.score.unwrap_or(0.0))
            .with("use_score_threshold", i32::from(r.score.is_some()))
            .with("max_output_input", index(self.inputs.max_out))
            .with("iou_input", index(self.inputs.iou))
            .with("score_input", index(self.inputs.score))
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
