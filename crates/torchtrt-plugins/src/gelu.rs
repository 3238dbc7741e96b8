//! `CustomGeluPluginDynamic` v1 (namespace `""`): GELU in its exact (erf) or tanh form, with
//! an optional bias added along the last dimension first.

pub(crate) mod cuda;
mod kernel;

use std::sync::Arc;

use torchtrt_plugin_api::{
    DType, DeviceKind, FieldCollection, FieldSpec, FieldType, Launch, Plugin, PluginCreator,
    PluginKey, PluginResult, PortDesc, ShapeExpr, TensorDesc, bf16, f16, validate_fields,
};

use crate::kernels::{Float, par};
use crate::support::{Origin, supports_unary_float};

pub(crate) use kernel::Form;

/// TensorRT `DataType` codes accepted in `type_id`: float, half, bfloat16.
const TYPE_IDS: [i32; 3] = [0, 1, 7];

/// Creates `CustomGeluPluginDynamic` plugins.
#[derive(Clone, Copy, Debug, Default)]
pub struct GeluCreator;

impl PluginCreator for GeluCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("", "CustomGeluPluginDynamic", "1")
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::with_default(
                "type_id",
                0i32,
                "TensorRT data type the layer was built for (0 f32, 1 f16, 7 bf16); kernels follow the input dtype",
            )
            .scalar(),
            FieldSpec::with_default(
                "approximate",
                "none",
                "`none`: exact x·Φ(x) through erf; `tanh`: the tanh approximation",
            ),
            FieldSpec::optional(
                "bias",
                FieldType::F32,
                "added along the last dimension before GELU; its length must equal the last dimension",
            )
            .len_range(1, None),
        ]
    }

    fn create(&self, layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let fields = validate_fields(&self.key(), &self.field_schema(), fields)?;
        let origin = Origin::new(self.key(), layer_name);
        let type_id = fields.i32("type_id").unwrap_or(0);
        if !TYPE_IDS.contains(&type_id) {
            return Err(origin.field_error(
                "type_id",
                format!("{type_id} is not 0 (f32), 1 (f16) or 7 (bf16)"),
            ));
        }
        let approximate = fields.string("approximate").unwrap_or("none");
        let form = Form::parse(approximate).ok_or_else(|| {
            origin.field_error(
                "approximate",
                format!("unknown value `{approximate}` (expected `none` or `tanh`)"),
            )
        })?;
        let bias = fields.f32s("bias").map(Arc::<[f32]>::from);
        Ok(Box::new(GeluPlugin {
            origin,
            type_id,
            form,
            bias,
        }))
    }
}

/// A configured GELU layer.
#[derive(Clone, Debug)]
struct GeluPlugin {
    origin: Origin,
    type_id: i32,
    form: Form,
    bias: Option<Arc<[f32]>>,
}

impl GeluPlugin {
    fn check_bias(&self, shape: &[i64]) -> PluginResult<()> {
        let Some(bias) = &self.bias else {
            return Ok(());
        };
        match shape.last() {
            None => Err(self
                .origin
                .input_error("a bias needs an input of rank 1 or more, got a scalar")),
            Some(&last) if last >= 0 && last as usize != bias.len() => {
                Err(self.origin.input_error(format!(
                    "bias has {} elements but the last input dimension is {last}",
                    bias.len()
                )))
            }
            Some(_) => Ok(()),
        }
    }

    fn run<T: Float>(&self, x: &[u8], y: &mut [u8]) -> PluginResult<()> {
        let x: &[T] = bytemuck::try_cast_slice(x).map_err(|e| self.origin.input_error(e))?;
        let y: &mut [T] =
            bytemuck::try_cast_slice_mut(y).map_err(|e| self.origin.input_error(e))?;
        kernel::gelu(x, y, self.bias.as_deref(), self.form);
        Ok(())
    }
}

impl Plugin for GeluPlugin {
    fn num_outputs(&self) -> usize {
        1
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![self.origin.single_float_dtype(inputs)?])
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        match inputs {
            [shape] => Ok(vec![shape.clone()]),
            _ => Err(self
                .origin
                .input_error(format!("expects 1 input, got {}", inputs.len()))),
        }
    }

    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, device: DeviceKind) -> bool {
        supports_unary_float(pos, io, num_inputs, device)
    }

    fn configure(&mut self, inputs: &[TensorDesc], outputs: &[TensorDesc]) -> PluginResult<()> {
        self.origin
            .check_unary_descs(inputs, outputs, 0..=usize::MAX)?;
        self.check_bias(&inputs[0].shape)
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        if let Launch::Cuda(c) = &launch {
            if let Some(x) = c.inputs.first() {
                self.check_bias(&x.desc.shape)?;
            }
            return cuda::enqueue(&self.origin, self.form, self.bias.as_deref(), c);
        }
        let cpu = self.origin.cpu_launch(launch)?;
        let shape = cpu
            .inputs
            .first()
            .map(|t| t.desc.shape.clone())
            .unwrap_or_default();
        let dtype = self.origin.check_unary_launch(&cpu, &shape)?;
        self.check_bias(&shape)?;
        let x = cpu.inputs[0].data;
        let y = &mut *cpu.outputs[0].data;
        par::install(cpu.threads, x.len(), || match dtype {
            DType::F32 => self.run::<f32>(x, y),
            DType::F16 => self.run::<f16>(x, y),
            DType::BF16 => self.run::<bf16>(x, y),
            other => Err(self.origin.input_error(format!("no kernel for {other}"))),
        })
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        let mut fields = FieldCollection::new()
            .with("type_id", self.type_id)
            .with("approximate", self.form.name());
        if let Some(bias) = &self.bias {
            fields.set("bias", bias.to_vec());
        }
        fields
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
