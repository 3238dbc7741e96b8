//! `NormalizePlugin` v1 (namespace `torch_tensorrt`): the p-norm of the input over `axes`
//! (`torch.norm`), or, with `mode = "normalize"`, the input divided by that norm
//! (`F.normalize`: `x / max(‖x‖ₚ, eps)`).

pub(crate) mod cuda;
mod fused;
mod kernel;
mod loops;
mod reduce;

use std::sync::Arc;

use torchtrt_plugin_api::{
    DType, DeviceKind, DimExpr, FieldCollection, FieldSpec, FieldType, Launch, Plugin,
    PluginCreator, PluginKey, PluginResult, PortDesc, ShapeExpr, TensorDesc, bf16, f16,
    validate_fields,
};

use crate::kernels::{Float, par};
use crate::support::{Origin, flag, supports_unary_float};
use reduce::Order;

/// Creates `NormalizePlugin` plugins.
#[derive(Clone, Copy, Debug, Default)]
pub struct NormalizeCreator;

/// What a `NormalizePlugin` outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The norm itself, reduced shape (`torch.norm`).
    Norm,
    /// The input divided by its norm, same shape (`F.normalize`).
    Normalize,
}

impl Mode {
    fn parse(name: &str) -> Option<Mode> {
        match name {
            "norm" => Some(Mode::Norm),
            "normalize" => Some(Mode::Normalize),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Norm => "norm",
            Mode::Normalize => "normalize",
        }
    }
}

impl PluginCreator for NormalizeCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("torch_tensorrt", "NormalizePlugin", "1")
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::with_default("order", 2f32, "p of the p-norm: any positive number or inf")
                .scalar(),
            FieldSpec::required(
                "axes",
                FieldType::I32,
                "dimensions to reduce over, distinct; negative counts from the end",
            ),
            FieldSpec::with_default(
                "keep_dims",
                0i32,
                "1: reduced dimensions stay as size 1 (mode norm)",
            )
            .scalar(),
            FieldSpec::with_default(
                "eps",
                0f32,
                "lower bound of the divisor in mode normalize; finite, >= 0",
            )
            .scalar(),
            FieldSpec::with_default(
                "mode",
                "norm",
                "`norm`: output ‖x‖ₚ (torch.norm); `normalize`: x / max(‖x‖ₚ, eps) (F.normalize)",
            ),
        ]
    }

    fn create(&self, layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let fields = validate_fields(&self.key(), &self.field_schema(), fields)?;
        let origin = Origin::new(self.key(), layer_name);
        let order = fields.f32("order").unwrap_or(2.0);
        if order.is_nan() || order <= 0.0 {
            return Err(
                origin.field_error("order", format!("p must be positive or inf, got {order}"))
            );
        }
        let axes = fields.i32s("axes").unwrap_or_default();
        if let Some(dup) = axes
            .iter()
            .enumerate()
            .find_map(|(i, a)| axes[..i].contains(a).then_some(a))
        {
            return Err(origin.field_error("axes", format!("axis {dup} appears twice")));
        }
        let keep_dims = flag(&origin, "keep_dims", fields.i32("keep_dims").unwrap_or(0))?;
        let eps = fields.f32("eps").unwrap_or(0.0);
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(origin.field_error("eps", format!("must be finite and >= 0, got {eps}")));
        }
        let mode_name = fields.string("mode").unwrap_or("norm");
        let mode = Mode::parse(mode_name).ok_or_else(|| {
            origin.field_error(
                "mode",
                format!("unknown mode `{mode_name}` (expected `norm` or `normalize`)"),
            )
        })?;
        Ok(Box::new(NormalizePlugin {
            origin,
            order,
            axes: Arc::from(axes),
            keep_dims,
            eps,
            mode,
        }))
    }
}

/// A configured norm layer.
#[derive(Clone, Debug)]
struct NormalizePlugin {
    origin: Origin,
    order: f32,
    axes: Arc<[i32]>,
    keep_dims: bool,
    eps: f32,
    mode: Mode,
}

impl NormalizePlugin {
    /// Which of `rank` dimensions are reduced; an axis out of range or named twice (once
    /// negative) is an error.
    fn reduced(&self, rank: usize) -> PluginResult<Vec<bool>> {
        let mut mask = vec![false; rank];
        for &a in self.axes.iter() {
            let i = if a < 0 {
                i64::from(a) + rank as i64
            } else {
                i64::from(a)
            };
            let Some(slot) = usize::try_from(i).ok().and_then(|i| mask.get_mut(i)) else {
                return Err(self.origin.field_error(
                    "axes",
                    format!("axis {a} is out of range for an input of rank {rank}"),
                ));
            };
            if *slot {
                return Err(self.origin.field_error(
                    "axes",
                    format!("axis {a} names dimension {i} a second time"),
                ));
            }
            *slot = true;
        }
        Ok(mask)
    }

    /// The output shape for an input shape (generic over concrete and symbolic dims).
    fn out_shape<D: Clone>(&self, shape: &[D], one: D) -> PluginResult<Vec<D>> {
        let mask = self.reduced(shape.len())?;
        Ok(match self.mode {
            Mode::Normalize => shape.to_vec(),
            Mode::Norm => shape
                .iter()
                .zip(&mask)
                .filter_map(|(d, &r)| match (r, self.keep_dims) {
                    (false, _) => Some(d.clone()),
                    (true, true) => Some(one.clone()),
                    (true, false) => None,
                })
                .collect(),
        })
    }

    fn run<T: Float>(&self, x: &[u8], y: &mut [u8], shape: &[i64]) -> PluginResult<()> {
        let x: &[T] = bytemuck::try_cast_slice(x).map_err(|e| self.origin.input_error(e))?;
        let y: &mut [T] =
            bytemuck::try_cast_slice_mut(y).map_err(|e| self.origin.input_error(e))?;
        let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        let mask = self.reduced(dims.len())?;
        let order = Order::new(self.order);
        match self.mode {
            Mode::Norm => kernel::norm(x, &dims, &mask, order, y),
            Mode::Normalize => kernel::normalize(x, &dims, &mask, order, self.eps, y),
        }
        Ok(())
    }
}

impl Plugin for NormalizePlugin {
    fn num_outputs(&self) -> usize {
        1
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![self.origin.single_float_dtype(inputs)?])
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        match inputs {
            [shape] => Ok(vec![self.out_shape(shape, DimExpr::Const(1))?]),
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
            .check_unary_descs(inputs, outputs, 1..=usize::MAX)?;
        self.reduced(inputs[0].rank()).map(drop)
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        if let Launch::Cuda(c) = &launch {
            let shape = c.inputs.first().map(|t| t.desc.shape.clone());
            let shape = shape.unwrap_or_default();
            let params = cuda::Params {
                mask: &self.reduced(shape.len())?,
                order: Order::new(self.order),
                mode: self.mode,
                eps: self.eps,
                expected_out: &self.out_shape(&shape, 1)?,
            };
            return cuda::enqueue(&self.origin, &params, c);
        }
        let cpu = self.origin.cpu_launch(launch)?;
        let shape = cpu
            .inputs
            .first()
            .map(|t| t.desc.shape.clone())
            .unwrap_or_default();
        let expected = self.out_shape(&shape, 1)?;
        let dtype = self.origin.check_unary_launch(&cpu, &expected)?;
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
            .with("order", self.order)
            .with("axes", self.axes.to_vec())
            .with("keep_dims", i32::from(self.keep_dims))
            .with("eps", self.eps)
            .with("mode", self.mode.name())
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}
