//! Checks every built-in plugin shares: which dtypes and devices it accepts, and the shape
//! and size of the tensors a launch hands it. Errors name the plugin key and the layer.

use torchtrt_plugin_api::{
    CpuLaunch, DType, DeviceKind, Launch, PluginError, PluginKey, PluginResult, PortDesc,
    ShapeDisplay, TensorDesc, TensorFormat, numel,
};

/// The element types every built-in plugin computes in (output dtype = input dtype).
pub(crate) const FLOAT_DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// A plugin instance, for error messages: its key and the layer it was created for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Origin {
    key: PluginKey,
    layer: String,
}

impl Origin {
    /// The instance of `key` created for `layer`.
    pub(crate) fn new(key: PluginKey, layer: &str) -> Origin {
        Origin {
            key,
            layer: layer.to_string(),
        }
    }

    /// An [`PluginError::InvalidInput`] naming this plugin and layer.
    pub(crate) fn input_error(&self, msg: impl std::fmt::Display) -> PluginError {
        PluginError::InvalidInput(format!("{} layer `{}`: {msg}", self.key, self.layer))
    }

    /// An [`PluginError::InvalidField`] for `field` of this plugin.
    pub(crate) fn field_error(&self, field: &str, reason: impl Into<String>) -> PluginError {
        PluginError::invalid_field(&self.key, field, reason)
    }

    /// The single input dtype of a one-input plugin, checked to be f32, f16 or bf16.
    pub(crate) fn single_float_dtype(&self, inputs: &[DType]) -> PluginResult<DType> {
        match inputs {
            [d] if FLOAT_DTYPES.contains(d) => Ok(*d),
            [d] => Err(self.input_error(format!("input dtype {d} is not f32, f16 or bf16"))),
            _ => Err(self.input_error(format!("expects 1 input, got {}", inputs.len()))),
        }
    }

    /// Checks build-time descriptions of a one-input, one-output plugin: counts, float
    /// dtypes, matching dtypes, and an input rank within `ranks`.
    pub(crate) fn check_unary_descs(
        &self,
        inputs: &[TensorDesc],
        outputs: &[TensorDesc],
        ranks: std::ops::RangeInclusive<usize>,
    ) -> PluginResult<()> {
        let dtypes: Vec<DType> = inputs.iter().map(|d| d.dtype).collect();
        let dtype = self.single_float_dtype(&dtypes)?;
        let [out] = outputs else {
            return Err(self.input_error(format!("expects 1 output, got {}", outputs.len())));
        };
        if out.dtype != dtype {
            return Err(self.input_error(format!(
                "output dtype {} differs from input dtype {dtype}",
                out.dtype
            )));
        }
        let rank = inputs[0].rank();
        if !ranks.contains(&rank) {
            return Err(self.input_error(format!(
                "input rank {rank} ({}) is outside {}..={}",
                inputs[0],
                ranks.start(),
                ranks.end()
            )));
        }
        Ok(())
    }

    /// The CPU arguments of `launch`; CUDA has no kernels yet and is
    /// [`PluginError::Unsupported`].
    pub(crate) fn cpu_launch<'a, 'd>(
        &self,
        launch: Launch<'a, 'd>,
    ) -> PluginResult<CpuLaunch<'a, 'd>> {
        match launch {
            Launch::Cpu(cpu) => Ok(cpu),
            Launch::Cuda(_) => Err(PluginError::Unsupported(format!(
                "{} layer `{}`: no CUDA kernel yet",
                self.key, self.layer
            ))),
        }
    }

    /// Checks a CPU launch of a one-input, one-output plugin: counts, float dtypes that
    /// match, byte sizes that match the shapes, and an output of shape `expected_out`
    /// (computed by the caller from the input shape). Returns the dtype.
    pub(crate) fn check_unary_launch(
        &self,
        cpu: &CpuLaunch<'_, '_>,
        expected_out: &[i64],
    ) -> PluginResult<DType> {
        let ([input], [output]) = (cpu.inputs, &*cpu.outputs) else {
            return Err(self.input_error(format!(
                "expects 1 input and 1 output, got {} and {}",
                cpu.inputs.len(),
                cpu.outputs.len()
            )));
        };
        let dtype = self.single_float_dtype(&[input.desc.dtype])?;
        if output.desc.dtype != dtype {
            return Err(self.input_error(format!(
                "output dtype {} differs from input dtype {dtype}",
                output.desc.dtype
            )));
        }
        if output.desc.shape != expected_out {
            return Err(self.input_error(format!(
                "output shape {} should be {} for input {}",
                ShapeDisplay(&output.desc.shape),
                ShapeDisplay(expected_out),
                input.desc
            )));
        }
        self.check_bytes("input", &input.desc, input.data.len())?;
        self.check_bytes("output", &output.desc, output.data.len())?;
        Ok(dtype)
    }

    fn check_bytes(&self, what: &str, desc: &TensorDesc, len: usize) -> PluginResult<()> {
        let want = numel(&desc.shape).and_then(|n| n.checked_mul(desc.dtype.size()));
        match want {
            Some(w) if w == len => Ok(()),
            Some(w) => Err(self.input_error(format!(
                "{what} {desc} needs {w} bytes, the buffer has {len}"
            ))),
            None => Err(self.input_error(format!("{what} shape {desc} is not concrete"))),
        }
    }
}

/// The `supports` answer of a one-input, one-output built-in plugin: CPU, linear layout,
/// f32/f16/bf16 input, output of the input's dtype.
pub(crate) fn supports_unary_float(
    pos: usize,
    io: &[PortDesc],
    num_inputs: usize,
    device: DeviceKind,
) -> bool {
    let Some(port) = io.get(pos) else {
        return false;
    };
    if !matches!(device, DeviceKind::Cpu | DeviceKind::Cuda) || num_inputs != 1 || pos > 1 {
        return false;
    }
    if port.format != TensorFormat::Linear || !FLOAT_DTYPES.contains(&port.dtype) {
        return false;
    }
    pos == 0 || io[0].dtype == port.dtype
}

/// Reads a 0/1 flag field.
pub(crate) fn flag(origin: &Origin, field: &str, value: i32) -> PluginResult<bool> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(origin.field_error(field, format!("must be 0 or 1, got {v}"))),
    }
}
