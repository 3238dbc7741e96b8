//! `example::Swish@1`: `y = x * sigmoid(beta * x)`, elementwise, in f32, f16 and bf16.

use torchtrt_plugin_api::{
    DType, DeviceKind, Element, FieldCollection, FieldSpec, Launch, Plugin, PluginCreator,
    PluginError, PluginKey, PluginResult, PortDesc, ShapeExpr, TensorFormat, bf16, f16,
};

/// Creates [`Swish`] plugins from the field `beta` (f32, default 1.0).
pub struct SwishCreator;

fn key() -> PluginKey {
    PluginKey::new("example", "Swish", "1")
}

impl PluginCreator for SwishCreator {
    fn key(&self) -> PluginKey {
        key()
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![FieldSpec::with_default("beta", 1.0f32, "slope of the sigmoid gate").scalar()]
    }

    fn create(&self, _layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let beta = fields.f32("beta").unwrap_or(1.0);
        if !beta.is_finite() {
            return Err(PluginError::invalid_field(&key(), "beta", "must be finite"));
        }
        Ok(Box::new(Swish { beta }))
    }
}

/// The Swish activation with a fixed `beta`.
#[derive(Clone)]
pub struct Swish {
    beta: f32,
}

fn is_supported(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

impl Plugin for Swish {
    fn num_outputs(&self) -> usize {
        1
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        match inputs {
            [d] if is_supported(*d) => Ok(vec![*d]),
            _ => Err(PluginError::Unsupported(format!(
                "{}: one f32, f16 or bf16 input, got {inputs:?}",
                key()
            ))),
        }
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        match inputs {
            [shape] => Ok(vec![shape.clone()]),
            _ => Err(PluginError::InvalidInput(format!(
                "{}: one input, got {}",
                key(),
                inputs.len()
            ))),
        }
    }

    fn supports(
        &self,
        pos: usize,
        io: &[PortDesc],
        _num_inputs: usize,
        device: DeviceKind,
    ) -> bool {
        let Some(port) = io.get(pos) else {
            return false;
        };
        let linear = port.format == TensorFormat::Linear && device == DeviceKind::Cpu;
        match pos {
            0 => linear && is_supported(port.dtype),
            _ => linear && io.first().is_some_and(|i| i.dtype == port.dtype),
        }
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(cpu) = launch else {
            return Err(PluginError::Unsupported(format!("{}: CPU only", key())));
        };
        let ([x], [y]) = (cpu.inputs, &mut *cpu.outputs) else {
            return Err(PluginError::InvalidInput(format!(
                "{}: one input, one output",
                key()
            )));
        };
        if x.desc.shape != y.desc.shape {
            return Err(PluginError::InvalidInput(format!(
                "{}: input {} and output {} differ in shape",
                key(),
                x.desc,
                y.desc
            )));
        }
        let beta = self.beta;
        match x.desc.dtype {
            DType::F32 => swish(x.typed::<f32>()?, y.typed_mut()?, beta, |v| v, |v| v),
            DType::F16 => swish(
                x.typed::<f16>()?,
                y.typed_mut()?,
                beta,
                f16::to_f32,
                f16::from_f32,
            ),
            DType::BF16 => swish(
                x.typed::<bf16>()?,
                y.typed_mut()?,
                beta,
                bf16::to_f32,
                bf16::from_f32,
            ),
            other => {
                return Err(PluginError::Unsupported(format!(
                    "{}: dtype {other}",
                    key()
                )));
            }
        }
        Ok(())
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new().with("beta", self.beta)
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

/// The kernel, computing in f32 whatever the storage type.
fn swish<T: Element>(
    x: &[T],
    y: &mut [T],
    beta: f32,
    load: impl Fn(T) -> f32,
    store: impl Fn(f32) -> T,
) {
    for (o, &i) in y.iter_mut().zip(x) {
        let v = load(i);
        *o = store(v / (1.0 + (-beta * v).exp()));
    }
}
