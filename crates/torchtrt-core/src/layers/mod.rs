//! Layer kinds: each module holds one kind's parameters and its shape and dtype rule.
//! Kernels live in the backend crates; adding a kind is one module here plus one line in
//! [`layer_kinds!`] (and a kernel per backend).

mod activation;
mod arg_reduce;
mod attention;
mod cast;
mod concat;
mod constant;
mod constant_of_shape;
mod convolution;
mod cum_sum;
mod deconvolution;
mod depth_to_space;
mod dequantize;
mod einsum;
mod elementwise;
mod expand;
mod flatten;
mod fused;
mod gather;
mod gather_elements;
mod gather_nd;
mod matmul;
mod non_zero;
mod normalization;
mod pad;
mod plugin;
mod pooling;
mod quantize;
mod quantized_convolution;
mod quantized_matmul;
mod range;
mod reduce;
mod reshape;
mod rms_normalization;
mod rotary_embedding;
mod scalar_input;
mod scatter_elements;
mod scatter_nd;
mod select;
mod shape;
mod shape_util;
mod size;
mod slice;
mod softmax;
mod space_to_depth;
mod squeeze;
mod tile;
mod top_k;
mod transpose;
mod trilu;
mod unary;
mod unsqueeze;
mod value_input;
mod value_test;

pub use activation::{Activation, ActivationKind};
pub use arg_reduce::ArgReduce;
pub use attention::{Attention, ScoreStage};
pub use cast::Cast;
pub use concat::Concat;
pub use constant::Constant;
pub use constant_of_shape::ConstantOfShape;
pub use convolution::{
    ACTIVATION_INPUTS, Convolution, channels_first_shapes, permuted, to_channels_first,
    to_channels_last,
};
pub use cum_sum::CumSum;
pub use deconvolution::Deconvolution;
pub use depth_to_space::{DepthToSpace, DepthToSpaceMode};
pub use dequantize::Dequantize;
pub use einsum::{Einsum, EinsumPlan};
pub use elementwise::{Elementwise, ElementwiseOp};
pub use expand::Expand;
pub use flatten::Flatten;
pub use fused::{Fused, FusedOperand, FusedStep, fusible_kind};
pub use gather::Gather;
pub use gather_elements::GatherElements;
pub use gather_nd::GatherNd;
pub use matmul::MatMul;
pub use non_zero::{NonZero, count_non_zero};
pub use normalization::Normalization;
pub use pad::{Pad, PadMode, resolve_pads};
pub use plugin::PluginLayer;
pub use pooling::{PoolKind, Pooling};
pub use quantize::{Quantize, quantize_value, quantized_range, scalar_quantization};
pub use quantized_convolution::{OutputQuantization, QuantizedConvolution};
pub use quantized_matmul::QuantizedMatMul;
pub use range::{Range, range_len};
pub use reduce::{Reduce, ReduceOp};
pub use reshape::Reshape;
pub use rms_normalization::RmsNormalization;
pub use rotary_embedding::{RotaryDims, RotaryEmbedding};
pub use scatter_elements::{ScatterElements, ScatterReduction};
pub use scatter_nd::ScatterNd;
pub use select::Select;
pub use shape::Shape;
pub use shape_util::{broadcast_shapes, may_equal, normalize_axis};
pub use size::Size;
pub use slice::{Slice, resolve_slice};
pub use softmax::Softmax;
pub use space_to_depth::SpaceToDepth;
pub use squeeze::{Squeeze, squeeze_shape};
pub use tile::Tile;
pub use top_k::TopK;
pub use transpose::Transpose;
pub use trilu::Trilu;
pub use unary::{Unary, UnaryOp};
pub use unsqueeze::{Unsqueeze, unsqueeze_shape};
pub use value_input::{input_vector, int_vector, known_len};
pub use value_test::{ValueTest, ValueTestKind};

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, ShapeExpr, SizedOutput, TensorDesc};

use crate::tensor::Tensor;

/// What shape inference knows about one input: dtype, symbolic shape, and the value when it
/// is a build-time constant (or, at run time, always).
#[derive(Clone, Copy, Debug)]
pub struct InferInput<'a> {
    /// Element type.
    pub dtype: DType,
    /// Shape, possibly symbolic.
    pub shape: &'a [DimExpr],
    /// The value, when known.
    pub value: Option<&'a Tensor>,
}

/// The inferred dtype and shape of one output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeShape {
    /// Element type.
    pub dtype: DType,
    /// Shape, possibly symbolic.
    pub shape: ShapeExpr,
}

impl TypeShape {
    /// The tensor as plugins see it at build time: dtype and shape with `-1` for symbolic
    /// dims.
    pub(crate) fn build_desc(&self) -> TensorDesc {
        TensorDesc::new(
            self.dtype,
            self.shape
                .iter()
                .map(|d| d.as_const().unwrap_or(-1))
                .collect::<Vec<_>>(),
        )
    }
}

impl TypeShape {
    /// Builds a type-shape.
    pub fn new(dtype: DType, shape: ShapeExpr) -> TypeShape {
        TypeShape { dtype, shape }
    }
}

/// The name a shape rule gives a dimension it cannot know at build time, because it depends
/// on the value of an input that is only computed at run time. The builder renames each such
/// dimension to a unique symbol; at run time every value is known and shapes are concrete.
pub use torchtrt_plugin_api::UNKNOWN_DIM;

/// A dimension known only at run time (see [`UNKNOWN_DIM`]).
pub fn unknown_dim() -> DimExpr {
    DimExpr::unknown()
}

/// Nodes of a dimension expression past which the builder stops tracking it: a dim that
/// broadcasting joins with a structurally different one becomes `max(a, b)`, and through a
/// transformer's residual chain those double with every block (timm ViT-S under a dynamic
/// batch reached megabytes of text per dim).
pub const MOST_DIM_NODES: usize = 1024;

/// The output types of a layer as the layers reading them see them at build time: each
/// axis that `op` sizes at run time ([`LayerOp::sized_outputs`], whose `infer` gave its
/// upper bound) becomes unknown, and every [`UNKNOWN_DIM`] is renamed to a symbol unique to
/// this layer, output and dimension (`layer#0.2`), as is every dim of more than
/// [`MOST_DIM_NODES`] nodes (its value is computed at run time as any shape is).
pub fn name_unknown_dims(op: &dyn LayerOp, layer: &str, outputs: &mut [TypeShape]) {
    for s in op.sized_outputs() {
        if let Some(dim) = outputs
            .get_mut(s.output)
            .and_then(|ty| ty.shape.get_mut(s.axis))
        {
            *dim = unknown_dim();
        }
    }
    for (o, ty) in outputs.iter_mut().enumerate() {
        for (d, dim) in ty.shape.iter_mut().enumerate() {
            if dim.exceeds(MOST_DIM_NODES) {
                *dim = DimExpr::sym(&format!("{layer}#{o}.{d}"));
            } else if dim.symbols().iter().any(|s| &**s == UNKNOWN_DIM) {
                let name = format!("{layer}#{o}.{d}");
                *dim = dim.substitute(&|s| (s == UNKNOWN_DIM).then(|| DimExpr::sym(&name)));
            }
        }
    }
}

/// The contract every layer kind fulfils: its name, how many inputs it takes, and its
/// shape/dtype rule. Errors are plain messages; the builder adds the layer's name and kind.
pub trait LayerOp {
    /// The kind's name, e.g. `Convolution`.
    fn kind(&self) -> &'static str;

    /// Fewest and most inputs accepted.
    fn arity(&self) -> (usize, usize);

    /// Number of outputs.
    fn num_outputs(&self) -> usize {
        1
    }

    /// Output dtypes and shapes for these inputs.
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String>;

    /// Indices of inputs whose *values* (not only shapes) `infer` needs, e.g. a reshape's
    /// shape tensor. When such a value is unknown at build time, `infer` returns
    /// [`unknown_dim`]s for what depends on it.
    fn value_inputs(&self) -> &[usize] {
        &[]
    }

    /// Outputs whose length along one axis the kernel decides and writes into another
    /// output ([`SizedOutput`]): `infer` gives that axis its upper bound, which is what a
    /// runtime allocates; layers reading the output see the axis as unknown at build time
    /// ([`name_unknown_dims`]) and its actual length at run time.
    fn sized_outputs(&self) -> &[SizedOutput] {
        &[]
    }

    /// Whether the layer may be evaluated at build time when all inputs are constant.
    fn foldable(&self) -> bool {
        true
    }

    /// The outputs, when they follow from the inputs' dtypes and shapes alone (`Shape`,
    /// `Size`) and those are known; lets the builder fold such layers without input values.
    fn eval_from_shapes(&self, _inputs: &[InferInput<'_>]) -> Option<Vec<Tensor>> {
        None
    }
}

macro_rules! layer_kinds {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// A layer's kind and parameters. Serialized into engines by variant index:
        /// append new kinds at the end, never reorder.
        #[derive(Clone, Debug, Serialize, Deserialize)]
        pub enum LayerKind {
            $(
                #[doc = concat!("See [`", stringify!($ty), "`].")]
                $variant($ty),
            )*
        }

        impl LayerKind {
            /// The kind's shape rule and metadata.
            pub fn op(&self) -> &dyn LayerOp {
                match self {
                    $(LayerKind::$variant(l) => l,)*
                }
            }

            /// Whether the output is the first input's data under another shape (Reshape,
            /// Flatten, Squeeze, Unsqueeze), so a runtime may alias it.
            pub fn is_view(&self) -> bool {
                matches!(
                    self,
                    LayerKind::Reshape(_)
                        | LayerKind::Flatten(_)
                        | LayerKind::Squeeze(_)
                        | LayerKind::Unsqueeze(_)
                )
            }
        }

        $(impl From<$ty> for LayerKind {
            fn from(l: $ty) -> LayerKind {
                LayerKind::$variant(l)
            }
        })*
    };
}

layer_kinds! {
    Constant(Constant),
    Elementwise(Elementwise),
    Unary(Unary),
    Activation(Activation),
    MatMul(MatMul),
    Convolution(Convolution),
    Pooling(Pooling),
    Reduce(Reduce),
    Softmax(Softmax),
    Reshape(Reshape),
    Transpose(Transpose),
    Concat(Concat),
    Slice(Slice),
    Gather(Gather),
    Cast(Cast),
    Plugin(PluginLayer),
    Deconvolution(Deconvolution),
    Normalization(Normalization),
    ArgReduce(ArgReduce),
    CumSum(CumSum),
    TopK(TopK),
    DepthToSpace(DepthToSpace),
    SpaceToDepth(SpaceToDepth),
    Trilu(Trilu),
    Einsum(Einsum),
    Shape(Shape),
    Size(Size),
    ConstantOfShape(ConstantOfShape),
    Flatten(Flatten),
    Squeeze(Squeeze),
    Unsqueeze(Unsqueeze),
    Expand(Expand),
    Tile(Tile),
    Pad(Pad),
    Range(Range),
    Select(Select),
    GatherElements(GatherElements),
    ScatterElements(ScatterElements),
    Fused(Fused),
    GatherNd(GatherNd),
    ScatterNd(ScatterNd),
    NonZero(NonZero),
    ValueTest(ValueTest),
    RmsNormalization(RmsNormalization),
    RotaryEmbedding(RotaryEmbedding),
    Attention(Attention),
    Quantize(Quantize),
    Dequantize(Dequantize),
    QuantizedConvolution(QuantizedConvolution),
    QuantizedMatMul(QuantizedMatMul),
}

fn require_float(what: &str, dtype: DType) -> Result<(), String> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(format!("{what} needs a floating-point input, got {dtype}"))
    }
}
