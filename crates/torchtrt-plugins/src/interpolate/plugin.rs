//! `InterpolatePlugin`: shapes, capabilities, validation and launch of one layer.

use torchtrt_plugin_api::{
    DType, DeviceKind, DimExpr, FieldCollection, Launch, Plugin, PluginError, PluginResult,
    PortDesc, ShapeDisplay, ShapeExpr, TensorDesc, TensorFormat,
};

use super::config::Config;
use super::creator::key;
use super::launch;

/// One `Interpolate` layer: its name and validated configuration.
#[derive(Clone, Debug)]
pub struct InterpolatePlugin {
    layer: String,
    config: Config,
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

    fn check_counts(&self, inputs: usize, outputs: Option<usize>) -> PluginResult<()> {
        if inputs != 1 || outputs.is_some_and(|n| n != 1) {
            return Err(self.input_error(format!(
                "takes 1 input and 1 output, got {inputs} and {}",
                outputs.unwrap_or(1)
            )));
        }
        Ok(())
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

    fn check_rank(&self, rank: usize) -> PluginResult<()> {
        let want = self.config.spatial() + 2;
        if rank != want {
            return Err(self.input_error(format!(
                "mode {} with {} spatial sizes needs a rank-{want} input, got rank {rank}",
                self.config.mode.name(),
                self.config.spatial()
            )));
        }
        Ok(())
    }

    /// Checks an input/output shape pair; `-1` dimensions are unknown and pass.
    pub(crate) fn check_shapes(&self, input: &[i64], output: &[i64]) -> PluginResult<()> {
        self.check_rank(input.len())?;
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
            let expect = self.config.size.out_len(axis, d).unwrap_or(0);
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
        self.check_counts(inputs.len(), None)?;
        let input = &inputs[0];
        self.check_rank(input.len())?;
        let mut out: Vec<DimExpr> = input[..2].to_vec();
        for (axis, d) in input[2..].iter().enumerate() {
            let o = self.config.size.out_dim(axis, d);
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
        matches!(device, DeviceKind::Cpu | DeviceKind::Cuda)
            && num_inputs == 1
            && pos < 2
            && port.format == TensorFormat::Linear
            && supported(port.dtype)
            && (pos == 0 || io[0].dtype == port.dtype)
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
        self.check_shapes(&input.shape, &output.shape)
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
                self.check_shapes(&input.desc.shape, &output.desc.shape)?;
                launch::run(&self.config, input, output, cpu.threads)
                    .map_err(|e| self.input_error(e))
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
                self.check_shapes(&x.desc.shape, &y.desc.shape)?;
                super::cuda::enqueue(&self.config, x, y, &c).map_err(|e| match e {
                    PluginError::InvalidInput(m) => self.input_error(m),
                    other => other,
                })
            }
        }
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        self.config.to_fields()
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
