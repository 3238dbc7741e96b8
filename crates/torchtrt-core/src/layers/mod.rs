//! Layer kinds: each module holds one kind's parameters and its shape and dtype rule.
//! Kernels live in the backend crates; adding a kind is one module here plus one line in
//! [`layer_kinds!`] (and a kernel per backend).

mod activation;
mod cast;
mod concat;
mod constant;
mod convolution;
mod elementwise;
mod gather;
mod matmul;
mod plugin;
mod pooling;
mod reduce;
mod reshape;
mod shape_util;
mod slice;
mod softmax;
mod transpose;
mod unary;

pub use activation::{Activation, ActivationKind};
pub use cast::Cast;
pub use concat::Concat;
pub use constant::Constant;
pub use convolution::Convolution;
pub use elementwise::{Elementwise, ElementwiseOp};
pub use gather::Gather;
pub use matmul::MatMul;
pub use plugin::PluginLayer;
pub use pooling::{PoolKind, Pooling};
pub use reduce::{Reduce, ReduceOp};
pub use reshape::Reshape;
pub use shape_util::{broadcast_shapes, normalize_axis};
pub use slice::Slice;
pub use softmax::Softmax;
pub use transpose::Transpose;
pub use unary::{Unary, UnaryOp};

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, ShapeExpr};

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
    /// Builds a type-shape.
    pub fn new(dtype: DType, shape: ShapeExpr) -> TypeShape {
        TypeShape { dtype, shape }
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
    /// shape tensor.
    fn value_inputs(&self) -> &'static [usize] {
        &[]
    }

    /// Whether the layer may be evaluated at build time when all inputs are constant.
    fn foldable(&self) -> bool {
        true
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
}

fn require_float(what: &str, dtype: DType) -> Result<(), String> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(format!("{what} needs a floating-point input, got {dtype}"))
    }
}
