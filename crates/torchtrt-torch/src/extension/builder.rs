//! The import context as the [`NetworkBuilder`] a custom converter emits layers through.

use torchtrt_core::layers::{
    Activation, ActivationKind, Cast, Concat, Elementwise, ElementwiseOp, LayerKind, MatMul,
    Reshape, Transpose, Unary, UnaryOp as CoreUnary,
};
use torchtrt_core::plugin_api::{
    BinaryOp, DType, FieldCollection, NetworkBuilder, PluginError, PluginKey, PluginResult,
    TensorDesc, TensorHandle, UnaryOp,
};
use torchtrt_core::{Tensor, TensorId};

use crate::ctx::Ctx;
use crate::error::TorchError;
use crate::node::Node;

/// A converter's view of the import: handles are tensor ids.
pub(crate) struct CtxBuilder<'c, 'a, 'n> {
    pub(crate) ctx: &'c mut Ctx<'a>,
    pub(crate) node: &'c Node<'n>,
}

fn bad(e: TorchError) -> PluginError {
    match e {
        TorchError::Node { message, .. } => PluginError::InvalidInput(message),
        other => PluginError::InvalidInput(other.to_string()),
    }
}

/// The handle of a tensor.
pub(crate) fn handle(t: TensorId) -> TensorHandle {
    TensorHandle(i64::from(t.0))
}

impl CtxBuilder<'_, '_, '_> {
    fn id(&self, t: TensorHandle) -> PluginResult<TensorId> {
        u32::try_from(t.0)
            .ok()
            .map(TensorId)
            .filter(|id| self.ctx.types.contains_key(id))
            .ok_or_else(|| PluginError::InvalidInput(format!("tensor handle {} is unknown", t.0)))
    }

    fn ids(&self, ts: &[TensorHandle]) -> PluginResult<Vec<TensorId>> {
        ts.iter().map(|&t| self.id(t)).collect()
    }

    fn layer(
        &mut self,
        kind: impl Into<LayerKind>,
        inputs: &[TensorHandle],
    ) -> PluginResult<TensorHandle> {
        let ids = self.ids(inputs)?;
        self.ctx.add(self.node, kind, &ids).map(handle).map_err(bad)
    }
}

fn core_unary(op: UnaryOp) -> LayerKind {
    let u = |op| LayerKind::Unary(Unary { op });
    let a = |kind| LayerKind::Activation(Activation { kind });
    match op {
        UnaryOp::Abs => u(CoreUnary::Abs),
        UnaryOp::Neg => u(CoreUnary::Neg),
        UnaryOp::Exp => u(CoreUnary::Exp),
        UnaryOp::Log => u(CoreUnary::Log),
        UnaryOp::Sqrt => u(CoreUnary::Sqrt),
        UnaryOp::Reciprocal => u(CoreUnary::Reciprocal),
        UnaryOp::Erf => u(CoreUnary::Erf),
        UnaryOp::Relu => a(ActivationKind::Relu),
        UnaryOp::Sigmoid => a(ActivationKind::Sigmoid),
        UnaryOp::Tanh => a(ActivationKind::Tanh),
        UnaryOp::LeakyRelu { alpha } => a(ActivationKind::LeakyRelu { alpha }),
        UnaryOp::Clip { min, max } => a(ActivationKind::Clip { min, max }),
        UnaryOp::HardSigmoid { alpha, beta } => a(ActivationKind::HardSigmoid { alpha, beta }),
        UnaryOp::HardSwish => a(ActivationKind::HardSwish),
        UnaryOp::Softplus => a(ActivationKind::Softplus),
        UnaryOp::Gelu => a(ActivationKind::Gelu { tanh: false }),
    }
}

fn core_binary(op: BinaryOp) -> ElementwiseOp {
    match op {
        BinaryOp::Add => ElementwiseOp::Add,
        BinaryOp::Sub => ElementwiseOp::Sub,
        BinaryOp::Mul => ElementwiseOp::Mul,
        BinaryOp::Div => ElementwiseOp::Div,
        BinaryOp::Pow => ElementwiseOp::Pow,
        BinaryOp::Max => ElementwiseOp::Max,
        BinaryOp::Min => ElementwiseOp::Min,
    }
}

impl NetworkBuilder for CtxBuilder<'_, '_, '_> {
    fn tensor_desc(&self, t: TensorHandle) -> PluginResult<TensorDesc> {
        let ty = &self.ctx.types[&self.id(t)?];
        let dims: Vec<i64> = ty
            .shape
            .iter()
            .map(|d| d.as_const().unwrap_or(-1))
            .collect();
        Ok(TensorDesc::new(ty.dtype, dims))
    }

    fn tensor_value(&self, t: TensorHandle) -> Option<&[u8]> {
        self.ctx.value(self.id(t).ok()?).map(Tensor::bytes)
    }

    fn add_constant(&mut self, desc: &TensorDesc, data: &[u8]) -> PluginResult<TensorHandle> {
        let dims = desc
            .shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| {
                PluginError::InvalidInput(format!("constant {desc}: negative dimension"))
            })?;
        let value = Tensor::from_bytes(desc.dtype, &dims, data)
            .map_err(|e| PluginError::InvalidInput(format!("constant {desc}: {e}")))?;
        self.ctx.constant(self.node, value).map(handle).map_err(bad)
    }

    fn add_binary(
        &mut self,
        op: BinaryOp,
        a: TensorHandle,
        b: TensorHandle,
    ) -> PluginResult<TensorHandle> {
        self.layer(Elementwise::new(core_binary(op)), &[a, b])
    }

    fn add_unary(&mut self, op: UnaryOp, x: TensorHandle) -> PluginResult<TensorHandle> {
        self.layer(core_unary(op), &[x])
    }

    fn add_matmul(
        &mut self,
        a: TensorHandle,
        b: TensorHandle,
        transpose_a: bool,
        transpose_b: bool,
    ) -> PluginResult<TensorHandle> {
        self.layer(
            MatMul {
                transpose_a,
                transpose_b,
            },
            &[a, b],
        )
    }

    fn add_reshape(&mut self, x: TensorHandle, dims: &[i64]) -> PluginResult<TensorHandle> {
        self.layer(Reshape::new(dims.to_vec()), &[x])
    }

    fn add_transpose(&mut self, x: TensorHandle, perm: &[usize]) -> PluginResult<TensorHandle> {
        self.layer(
            Transpose {
                perm: perm.to_vec(),
            },
            &[x],
        )
    }

    fn add_concat(&mut self, inputs: &[TensorHandle], axis: i64) -> PluginResult<TensorHandle> {
        self.layer(Concat { axis }, inputs)
    }

    fn add_cast(&mut self, x: TensorHandle, dtype: DType) -> PluginResult<TensorHandle> {
        self.layer(Cast { to: dtype }, &[x])
    }

    fn add_plugin(
        &mut self,
        key: &PluginKey,
        fields: &FieldCollection,
        inputs: &[TensorHandle],
    ) -> PluginResult<Vec<TensorHandle>> {
        let ids = self.ids(inputs)?;
        let outs = self.ctx.plugin(self.node, key, fields, &ids).map_err(bad)?;
        Ok(outs.into_iter().map(handle).collect())
    }

    fn set_output(&mut self, _index: usize, t: TensorHandle) -> PluginResult<()> {
        self.id(t).map(|_| ())
    }
}
