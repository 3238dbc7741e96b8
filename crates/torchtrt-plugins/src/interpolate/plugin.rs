//! `InterpolatePlugin`: shapes, capabilities, validation and launch of one layer.

use torchtrt_plugin_api::{
    DType, DeviceKind, DimExpr, FieldCollection, Launch, Plugin, PluginError, PluginResult,
    PortDesc, ShapeDisplay, ShapeExpr, ShapeValues, Tactic, TensorDesc, TensorFormat,
};

use super::config::Config;
use super::creator::key;
use super::launch;
use super::maxpool::{MaxPool2dPlan, TACTIC_NARROW, TACTIC_SLIDING, TACTIC_WINDOWS};
use super::mode::Mode;
use super::size::{InputKind, SizeInput, SizeRule};

/// One `Interpolate` layer: its name and validated configuration.
#[derive(Clone, Debug)]
pub struct InterpolatePlugin {
    layer: String,
    config: Config,
}

fn kind_name(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Sizes => "sizes",
        InputKind::Scales => "scales",
    }
}

/// The element types the kernels handle.
fn supported(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

impl InterpolatePlugin {
    /// A plugin for layer `layer` with a validated configuration.
    pub fn new(layer: &str, config: Config) -> InterpolatePlugin {
        InterpolatePlugin {
            layer: layer.to_string(),
            config,
        }
    }

    fn input_error(&self, what: String) -> PluginError {
        PluginError::InvalidInput(format!("plugin {} layer `{}`: {what}", key(), self.layer))
    }

    /// The shape input the size comes from, if any.
    fn size_input(&self) -> Option<SizeInput> {
        match self.config.size {
            SizeRule::Input(input) => Some(input),
            _ => None,
        }
    }

    fn num_inputs(&self) -> usize {
        1 + usize::from(self.size_input().is_some()) + usize::from(self.config.roi_input)
    }

    /// The input holding the region of interest, if any: the last one.
    fn roi_index(&self) -> Option<usize> {
        self.config.roi_input.then(|| self.num_inputs() - 1)
    }

    /// Entries of the shape inputs before the spatial ones.
    fn skip(&self) -> usize {
        self.size_input().map_or(0, |i| i.skip)
    }

    /// `config` with the region of interest read from `values` (`spatial` axes).
    fn with_roi(
        &self,
        mut config: Config,
        values: &ShapeValues,
        spatial: usize,
    ) -> PluginResult<Config> {
        if !self.config.roi_input {
            return Ok(config);
        }
        let skip = self.skip();
        let roi = values
            .floats()
            .ok_or_else(|| self.input_error("the region of interest is not known".into()))?;
        let len = skip + spatial;
        if roi.len() != 2 * len {
            return Err(self.input_error(format!(
                "the region of interest has {} entries, expected {} (starts, then ends)",
                roi.len(),
                2 * len
            )));
        }
        config.roi = Some((skip..len).map(|a| (roi[a], roi[len + a])).collect());
        Ok(config)
    }

    fn check_counts(&self, inputs: usize, outputs: Option<usize>) -> PluginResult<()> {
        let want = self.num_inputs();
        if inputs != want || outputs.is_some_and(|n| n != 1) {
            return Err(self.input_error(format!(
                "takes {want} input{} and 1 output, got {inputs} and {}",
                if want == 1 { "" } else { "s" },
                outputs.unwrap_or(1)
            )));
        }
        Ok(())
    }

    /// The configuration for one input shape: the shape input's values resolved into a
    /// size rule (`Ok(None)` while they, or dims they need, are unknown).
    fn resolve(&self, values: &ShapeValues, dims: &[Option<i64>]) -> PluginResult<Option<Config>> {
        let Some(input) = self.size_input() else {
            return Ok(Some(self.config.clone()));
        };
        self.check_rank(&self.config, dims.len())?;
        let rule = input
            .resolve(values, dims)
            .map_err(|e| self.input_error(format!("{} input: {e}", kind_name(input.kind))))?;
        Ok(rule.map(|r| self.config.with_size(r)))
    }

    /// The configuration for a launch with concrete input dims.
    fn resolve_for_launch(&self, values: &ShapeValues, dims: &[i64]) -> PluginResult<Config> {
        let dims: Vec<Option<i64>> = dims.iter().map(|&d| Some(d)).collect();
        self.resolve(values, &dims)?.ok_or_else(|| {
            self.input_error("the shape input's values are not known at launch".to_string())
        })
    }

    fn check_dtype(&self, dtype: DType) -> PluginResult<()> {
        if supported(dtype) {
            Ok(())
        } else {
            Err(PluginError::Unsupported(format!(
                "plugin {} layer `{}`: dtype {dtype} (f32, f16 and bf16 only)",
                key(),
                self.layer
            )))
        }
    }

    fn check_rank(&self, config: &Config, rank: usize) -> PluginResult<()> {
        let mode = config.mode;
        match config.spatial() {
            Some(spatial) if rank != spatial + 2 => Err(self.input_error(format!(
                "mode {} with {spatial} spatial sizes needs a rank-{} input, got rank {rank}",
                mode.name(),
                spatial + 2
            ))),
            None if !(3..=5).contains(&rank)
                || mode.spatial_dims().is_some_and(|n| n + 2 != rank) =>
            {
                Err(self.input_error(format!(
                    "mode {} cannot resize a rank-{rank} input",
                    mode.name()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Checks an input/output shape pair under `config`; `-1` dimensions are unknown and
    /// pass.
    pub(crate) fn check_shapes(
        &self,
        config: &Config,
        input: &[i64],
        output: &[i64],
    ) -> PluginResult<()> {
        self.check_rank(config, input.len())?;
        let known = |d: i64| d >= 0;
        let mismatch = || {
            self.input_error(format!(
                "output shape {} does not match input shape {}",
                ShapeDisplay(output),
                ShapeDisplay(input)
            ))
        };
        if output.len() != input.len() {
            return Err(mismatch());
        }
        for i in 0..2 {
            if known(input[i]) && known(output[i]) && input[i] != output[i] {
                return Err(mismatch());
            }
        }
        for (axis, &d) in input[2..].iter().enumerate() {
            if d == 0 {
                return Err(self.input_error(format!(
                    "input shape {} has an empty spatial dimension",
                    ShapeDisplay(input)
                )));
            }
            if !known(d) {
                continue;
            }
            let Some(expect) = config.size.out_len(axis, d) else {
                continue;
            };
            if expect <= 0 {
                return Err(self.input_error(format!(
                    "input shape {} gives an empty output along spatial axis {axis}",
                    ShapeDisplay(input)
                )));
            }
            let out = output[2 + axis];
            if known(out) && out != expect {
                return Err(mismatch());
            }
        }
        Ok(())
    }
}

impl Plugin for InterpolatePlugin {
    fn num_outputs(&self) -> usize {
        1
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        self.check_counts(inputs.len(), None)?;
        self.check_dtype(inputs[0])?;
        Ok(vec![inputs[0]])
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        self.output_shapes_of(inputs, &[])
    }

    fn shape_inputs(&self) -> Vec<usize> {
        let size = self.size_input().map(|_| 1);
        size.into_iter().chain(self.roi_index()).collect()
    }

    fn output_shapes_of(
        &self,
        inputs: &[ShapeExpr],
        values: &[ShapeValues],
    ) -> PluginResult<Vec<ShapeExpr>> {
        self.check_counts(inputs.len(), None)?;
        let input = &inputs[0];
        let dims: Vec<Option<i64>> = input.iter().map(DimExpr::as_const).collect();
        let unknown = ShapeValues::Unknown;
        let config = self
            .resolve(values.get(1).unwrap_or(&unknown), &dims)?
            .unwrap_or_else(|| self.config.clone());
        self.check_rank(&config, input.len())?;
        let mut out: Vec<DimExpr> = input[..2].to_vec();
        for (axis, d) in input[2..].iter().enumerate() {
            let o = config.size.out_dim(axis, d);
            if o.as_const().is_some_and(|v| v <= 0) || d.as_const() == Some(0) {
                return Err(self.input_error(format!(
                    "spatial axis {axis} of length {d} gives output length {o}"
                )));
            }
            out.push(o);
        }
        Ok(vec![out])
    }

    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, device: DeviceKind) -> bool {
        let Some(port) = io.get(pos) else {
            return false;
        };
        let shape_port = match self.size_input() {
            Some(input) if pos == 1 => Some(input.kind),
            _ if self.roi_index() == Some(pos) => Some(InputKind::Scales),
            _ => None,
        };
        let dtype_ok = match shape_port {
            Some(InputKind::Sizes) => matches!(port.dtype, DType::I64 | DType::I32),
            Some(InputKind::Scales) => matches!(port.dtype, DType::F32 | DType::F64),
            None => supported(port.dtype) && (pos == 0 || io[0].dtype == port.dtype),
        };
        let on_device = match device {
            DeviceKind::Cpu => true,
            DeviceKind::Cuda => !self.config.roi_input,
        };
        on_device
            && num_inputs == self.num_inputs()
            && pos <= num_inputs
            && port.format == TensorFormat::Linear
            && dtype_ok
    }

    fn configure(&mut self, inputs: &[TensorDesc], outputs: &[TensorDesc]) -> PluginResult<()> {
        self.check_counts(inputs.len(), Some(outputs.len()))?;
        let (input, output) = (&inputs[0], &outputs[0]);
        self.check_dtype(input.dtype)?;
        if output.dtype != input.dtype {
            return Err(self.input_error(format!(
                "output dtype {} differs from input dtype {}",
                output.dtype, input.dtype
            )));
        }
        match self.size_input() {
            Some(_) => self.check_rank(&self.config, input.shape.len()),
            None => self.check_shapes(&self.config, &input.shape, &output.shape),
        }
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        match launch {
            Launch::Cpu(cpu) => {
                self.check_counts(cpu.inputs.len(), Some(cpu.outputs.len()))?;
                let input = &cpu.inputs[0];
                let output = &mut cpu.outputs[0];
                self.check_dtype(input.desc.dtype)?;
                if output.desc.dtype != input.desc.dtype {
                    return Err(self.input_error(format!(
                        "output dtype {} differs from input dtype {}",
                        output.desc.dtype, input.desc.dtype
                    )));
                }
                if input
                    .desc
                    .shape
                    .iter()
                    .chain(&output.desc.shape)
                    .any(|&d| d < 0)
                {
                    return Err(self.input_error("enqueue needs concrete shapes".to_string()));
                }
                let values_of = |i: Option<usize>| match i.and_then(|i| cpu.inputs.get(i)) {
                    Some(t) => ShapeValues::from_bytes(t.desc.dtype, t.data),
                    None => Ok(ShapeValues::Unknown),
                };
                let sizes = values_of(self.size_input().map(|_| 1))?;
                let config = self.resolve_for_launch(&sizes, &input.desc.shape)?;
                let spatial = input.desc.shape.len().saturating_sub(2);
                let config = self.with_roi(config, &values_of(self.roi_index())?, spatial)?;
                self.check_shapes(&config, &input.desc.shape, &output.desc.shape)?;
                launch::run(&config, input, output, cpu.threads).map_err(|e| self.input_error(e))
            }
            Launch::Cuda(c) => {
                self.check_counts(c.inputs.len(), Some(c.outputs.len()))?;
                let (x, y) = (&c.inputs[0], &c.outputs[0]);
                self.check_dtype(x.desc.dtype)?;
                if y.desc.dtype != x.desc.dtype {
                    return Err(self.input_error(format!(
                        "output dtype {} differs from input dtype {}",
                        y.desc.dtype, x.desc.dtype
                    )));
                }
                if self.config.roi_input {
                    return Err(PluginError::Unsupported(format!(
                        "plugin {} layer `{}`: tf_crop_and_resize runs on the CPU only",
                        key(),
                        self.layer
                    )));
                }
                let values = c.shape_values.get(1).cloned().unwrap_or_default();
                let config = self.resolve_for_launch(&values, &x.desc.shape)?;
                self.check_shapes(&config, &x.desc.shape, &y.desc.shape)?;
                super::cuda::enqueue(&config, x, y, &c).map_err(|e| match e {
                    PluginError::InvalidInput(m) => self.input_error(m),
                    other => other,
                })
            }
        }
    }

    fn tactics(
        &self,
        inputs: &[TensorDesc],
        outputs: &[TensorDesc],
        device: DeviceKind,
    ) -> Vec<Tactic> {
        let (Some(x), Some(y)) = (inputs.first(), outputs.first()) else {
            return Vec::new();
        };
        let spatial = |d: &TensorDesc| -> Option<[usize; 2]> {
            match d.shape[..] {
                [_, _, h, w] => Some([usize::try_from(h).ok()?, usize::try_from(w).ok()?]),
                _ => None,
            }
        };
        match (device, &self.config.mode, spatial(x), spatial(y)) {
            (DeviceKind::Cpu, Mode::AdaptiveMax { .. }, Some(i), Some(o))
                if i.iter().chain(&o).all(|&d| d > 0) =>
            {
                MaxPool2dPlan::tactics(i, o)
            }
            _ => Vec::new(),
        }
    }

    fn set_tactic(&mut self, tactic: u32) -> PluginResult<()> {
        let known = [0, TACTIC_SLIDING, TACTIC_WINDOWS, TACTIC_NARROW];
        if !known.contains(&tactic)
            || tactic != 0 && !matches!(self.config.mode, Mode::AdaptiveMax { .. })
        {
            return Err(self.input_error(format!(
                "tactic {tactic}: mode {} has no such implementation",
                self.config.mode.name()
            )));
        }
        self.config.tactic = tactic;
        Ok(())
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        self.config.to_fields()
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
