//! `InstanceNormalization_TRT` v1 (namespace `""`): per-(sample, channel) normalisation of
//! 3-D to 5-D `[N, C, …]` inputs, a per-channel scale and bias, and an optional fused
//! (leaky) relu.

pub(crate) mod cuda;
mod kernel;

use std::sync::Arc;

use torchtrt_plugin_api::{
    DType, DeviceKind, FieldCollection, FieldSpec, FieldType, Launch, Plugin, PluginCreator,
    PluginKey, PluginResult, PortDesc, ShapeExpr, TensorDesc, bf16, f16, validate_fields,
};

use crate::kernels::{Float, par};
use crate::support::{Origin, flag, supports_unary_float};

/// Creates `InstanceNormalization_TRT` plugins.
#[derive(Clone, Copy, Debug, Default)]
pub struct InstanceNormCreator;

impl PluginCreator for InstanceNormCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("", "InstanceNormalization_TRT", "1")
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::with_default("epsilon", 1e-5f32, "added to the variance; finite, >= 0")
                .scalar(),
            FieldSpec::required("scales", FieldType::F32, "per-channel scale, length C"),
            FieldSpec::required("bias", FieldType::F32, "per-channel bias, length C"),
            FieldSpec::with_default(
                "relu",
                0i32,
                "1: apply a (leaky) relu after the affine step",
            )
            .scalar(),
            FieldSpec::with_default(
                "alpha",
                0f32,
                "slope for negative values when relu = 1 (0: plain relu)",
            )
            .scalar(),
        ]
    }

    fn create(&self, layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let fields = validate_fields(&self.key(), &self.field_schema(), fields)?;
        let origin = Origin::new(self.key(), layer_name);
        let epsilon = fields.f32("epsilon").unwrap_or(1e-5);
        if !(epsilon.is_finite() && epsilon >= 0.0) {
            return Err(
                origin.field_error("epsilon", format!("must be finite and >= 0, got {epsilon}"))
            );
        }
        let scales = fields.f32s("scales").unwrap_or_default();
        let bias = fields.f32s("bias").unwrap_or_default();
        if scales.len() != bias.len() {
            return Err(origin.field_error(
                "bias",
                format!(
                    "has {} elements but scales has {}",
                    bias.len(),
                    scales.len()
                ),
            ));
        }
        let relu = flag(&origin, "relu", fields.i32("relu").unwrap_or(0))?;
        let alpha = fields.f32("alpha").unwrap_or(0.0);
        if !alpha.is_finite() {
            return Err(origin.field_error("alpha", format!("must be finite, got {alpha}")));
        }
        Ok(Box::new(InstanceNormPlugin {
            origin,
            epsilon,
            scales: Arc::from(scales),
            bias: Arc::from(bias),
            relu,
            alpha,
        }))
    }
}

/// A configured instance-normalisation layer.
#[derive(Clone, Debug)]
struct InstanceNormPlugin {
    origin: Origin,
    epsilon: f32,
    scales: Arc<[f32]>,
    bias: Arc<[f32]>,
    relu: bool,
    alpha: f32,
}

impl InstanceNormPlugin {
    fn check_channels(&self, shape: &[i64]) -> PluginResult<()> {
        match shape.get(1) {
            Some(&c) if c >= 0 && c as usize != self.scales.len() => {
                Err(self.origin.input_error(format!(
                    "input has {c} channels (dimension 1) but scales and bias have {}",
                    self.scales.len()
                )))
            }
            _ => Ok(()),
        }
    }

    fn run<T: Float>(&self, x: &[u8], y: &mut [u8], shape: &[i64]) -> PluginResult<()> {
        let x: &[T] = bytemuck::try_cast_slice(x).map_err(|e| self.origin.input_error(e))?;
        let y: &mut [T] =
            bytemuck::try_cast_slice_mut(y).map_err(|e| self.origin.input_error(e))?;
        let plane = shape[2..].iter().map(|&d| d as usize).product();
        let params = kernel::Params {
            scales: &self.scales,
            bias: &self.bias,
            epsilon: self.epsilon,
            leaky_slope: self.relu.then_some(self.alpha),
        };
        kernel::instance_norm(x, y, plane, &params);
        Ok(())
    }
}

impl Plugin for InstanceNormPlugin {
    fn num_outputs(&self) -> usize {
        1
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![self.origin.single_float_dtype(inputs)?])
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        match inputs {
            [shape] if (3..=5).contains(&shape.len()) => Ok(vec![shape.clone()]),
            [shape] => Err(self
                .origin
                .input_error(format!("input rank {} is outside 3..=5", shape.len()))),
            _ => Err(self
                .origin
                .input_error(format!("expects 1 input, got {}", inputs.len()))),
        }
    }

    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, device: DeviceKind) -> bool {
        supports_unary_float(pos, io, num_inputs, device)
    }

    fn configure(&mut self, inputs: &[TensorDesc], outputs: &[TensorDesc]) -> PluginResult<()> {
        self.origin.check_unary_descs(inputs, outputs, 3..=5)?;
        self.check_channels(&inputs[0].shape)
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        if let Launch::Cuda(c) = &launch {
            if let Some(x) = c.inputs.first() {
                self.check_channels(&x.desc.shape)?;
            }
            let params = cuda::Params {
                scales: &self.scales,
                bias: &self.bias,
                epsilon: self.epsilon,
                leaky_slope: self.relu.then_some(self.alpha),
            };
            return cuda::enqueue(&self.origin, &params, c);
        }
        let cpu = self.origin.cpu_launch(launch)?;
        let shape = cpu
            .inputs
            .first()
            .map(|t| t.desc.shape.clone())
            .unwrap_or_default();
        let dtype = self.origin.check_unary_launch(&cpu, &shape)?;
        if !(3..=5).contains(&shape.len()) {
            return Err(self
                .origin
                .input_error(format!("input rank {} is outside 3..=5", shape.len())));
        }
        self.check_channels(&shape)?;
        let x = cpu.inputs[0].data;
        let y = &mut *cpu.outputs[0].data;
        par::install(cpu.threads, x.len(), || match dtype {
            DType::F32 => self.run::<f32>(x, y, &shape),
            DType::F16 => self.run::<f16>(x, y, &shape),
            DType::BF16 => self.run::<bf16>(x, y, &shape),
            other => Err(self.origin.input_error(format!("no kernel for {other}"))),
        })
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new()
            .with("epsilon", self.epsilon)
            .with("scales", self.scales.to_vec())
            .with("bias", self.bias.to_vec())
            .with("relu", i32::from(self.relu))
            .with("alpha", self.alpha)
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
