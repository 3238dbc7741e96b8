//! The raw `#[repr(C)]` tables of converters and custom ops (the `converters` and
//! `custom_ops` slots of [`TtrtExtension`](super::TtrtExtension)), member for member as
//! declared in `include/torchtrt_plugin.h`. Each table begins with its own version, so these
//! tables evolve by appending members without touching the plugin ABI.

use std::ffi::{c_char, c_void};

use super::types::{
    TtrtErrorBuf, TtrtExprBuilder, TtrtField, TtrtFieldSpec, TtrtLaunch, TtrtShapeExpr, TtrtStatus,
    TtrtSupportsFn, TtrtTensorDesc,
};

/// Version of the converter tables ([`TtrtConverter`], [`TtrtNode`], [`TtrtNetworkBuilder`]).
pub const TTRT_CONVERTER_ABI_VERSION: u32 = 1;
/// Version of the custom-op table ([`TtrtCustomOp`]).
pub const TTRT_CUSTOM_OP_ABI_VERSION: u32 = 1;

/// An opaque handle to a tensor of the network being built; valid during one `convert`.
pub type TtrtTensorHandle = i64;
/// The handle of an omitted optional input.
pub const TTRT_TENSOR_NONE: TtrtTensorHandle = -1;

/// The ONNX node a converter is asked to convert. Valid during the call only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtNode {
    /// NUL-terminated node name (`op_type#index` for unnamed nodes).
    pub name: *const c_char,
    /// NUL-terminated op type.
    pub op_type: *const c_char,
    /// NUL-terminated domain (`""` for the default ONNX domain).
    pub domain: *const c_char,
    /// The opset imported for the node's domain.
    pub opset: i64,
    /// `nb_attributes` attributes as fields (see `docs/plugin-abi.md` for the mapping).
    pub attributes: *const TtrtField,
    /// Number of attributes.
    pub nb_attributes: i32,
    /// Number of inputs, omitted optional ones included.
    pub nb_inputs: i32,
    /// `nb_inputs` handles; [`TTRT_TENSOR_NONE`] for omitted inputs.
    pub inputs: *const TtrtTensorHandle,
    /// Number of outputs the node declares; each must be set with `set_output`.
    pub nb_outputs: i32,
    /// Zero.
    pub reserved: i32,
}

/// `tensor_desc(ctx, t, &desc, err)`: dtype and shape (`-1` for dimensions unknown at build
/// time).
pub type TtrtTensorDescFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    t: TtrtTensorHandle,
    desc: *mut TtrtTensorDesc,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `tensor_value(ctx, t, &data, &nbytes)`: 1 and the bytes when the value is known at
/// build time (initializers, constants, folded layers), else 0.
pub type TtrtTensorValueFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    t: TtrtTensorHandle,
    data: *mut *const c_void,
    nbytes: *mut usize,
) -> i32;
/// `add_constant(ctx, desc, data, nbytes, &out, err)`.
pub type TtrtAddConstantFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    desc: *const TtrtTensorDesc,
    data: *const c_void,
    nbytes: usize,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `add_binary(ctx, op, a, b, &out, err)` with numpy broadcasting.
pub type TtrtAddBinaryFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    op: i32,
    a: TtrtTensorHandle,
    b: TtrtTensorHandle,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `add_unary(ctx, op, x, alpha, beta, &out, err)`.
pub type TtrtAddUnaryFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    op: i32,
    x: TtrtTensorHandle,
    alpha: f32,
    beta: f32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `add_matmul(ctx, a, b, transpose_a, transpose_b, &out, err)`.
pub type TtrtAddMatMulFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    a: TtrtTensorHandle,
    b: TtrtTensorHandle,
    transpose_a: i32,
    transpose_b: i32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `add_reshape(ctx, x, dims, nb_dims, &out, err)` (ONNX `Reshape`: 0 copies, -1 infers).
pub type TtrtAddReshapeFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    x: TtrtTensorHandle,
    dims: *const i64,
    nb_dims: i32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `add_transpose(ctx, x, perm, nb_perm, &out, err)`.
pub type TtrtAddTransposeFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    x: TtrtTensorHandle,
    perm: *const i32,
    nb_perm: i32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `add_concat(ctx, inputs, nb_inputs, axis, &out, err)`.
pub type TtrtAddConcatFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    inputs: *const TtrtTensorHandle,
    nb_inputs: i32,
    axis: i64,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `add_cast(ctx, x, dtype, &out, err)`.
pub type TtrtAddCastFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    x: TtrtTensorHandle,
    dtype: i32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `add_plugin(ctx, ns, name, version, fields, nb_fields, inputs, nb_inputs, outputs,
/// capacity, &nb_outputs, err)`.
pub type TtrtAddPluginFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    plugin_namespace: *const c_char,
    name: *const c_char,
    version: *const c_char,
    fields: *const TtrtField,
    nb_fields: i32,
    inputs: *const TtrtTensorHandle,
    nb_inputs: i32,
    outputs: *mut TtrtTensorHandle,
    capacity: i32,
    nb_outputs: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `set_output(ctx, index, t, err)`.
pub type TtrtSetOutputFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    index: i32,
    t: TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;

/// The host's network builder handed to `convert`; valid during that call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtNetworkBuilder {
    /// [`TTRT_CONVERTER_ABI_VERSION`].
    pub abi_version: u32,
    /// `sizeof(TtrtNetworkBuilder)` as the host knows it; members past it are absent.
    pub size: u32,
    /// The host's state, passed back to every function.
    pub ctx: *mut c_void,
    /// See [`TtrtTensorDescFn`].
    pub tensor_desc: Option<TtrtTensorDescFn>,
    /// See [`TtrtTensorValueFn`].
    pub tensor_value: Option<TtrtTensorValueFn>,
    /// See [`TtrtAddConstantFn`].
    pub add_constant: Option<TtrtAddConstantFn>,
    /// See [`TtrtAddBinaryFn`].
    pub add_binary: Option<TtrtAddBinaryFn>,
    /// See [`TtrtAddUnaryFn`].
    pub add_unary: Option<TtrtAddUnaryFn>,
    /// See [`TtrtAddMatMulFn`].
    pub add_matmul: Option<TtrtAddMatMulFn>,
    /// See [`TtrtAddReshapeFn`].
    pub add_reshape: Option<TtrtAddReshapeFn>,
    /// See [`TtrtAddTransposeFn`].
    pub add_transpose: Option<TtrtAddTransposeFn>,
    /// See [`TtrtAddConcatFn`].
    pub add_concat: Option<TtrtAddConcatFn>,
    /// See [`TtrtAddCastFn`].
    pub add_cast: Option<TtrtAddCastFn>,
    /// See [`TtrtAddPluginFn`].
    pub add_plugin: Option<TtrtAddPluginFn>,
    /// See [`TtrtSetOutputFn`].
    pub set_output: Option<TtrtSetOutputFn>,
}

/// `convert(self, node, net, err)`: adds the node's layers through `net` and sets every
/// output.
pub type TtrtConvertFn = unsafe extern "C" fn(
    this: *mut c_void,
    node: *const TtrtNode,
    net: *const TtrtNetworkBuilder,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;

/// A converter for `(domain, op_type)` over an opset range. Owned by the library.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtConverter {
    /// [`TTRT_CONVERTER_ABI_VERSION`].
    pub abi_version: u32,
    /// Zero.
    pub reserved: i32,
    /// The converter's state, passed to `convert`.
    pub self_: *mut c_void,
    /// NUL-terminated domain (`""` for the default ONNX domain).
    pub domain: *const c_char,
    /// NUL-terminated op type.
    pub op_type: *const c_char,
    /// First opset handled (at least 1).
    pub since_opset: i64,
    /// Last opset handled; `-1` for every later one.
    pub until_opset: i64,
    /// Required.
    pub convert: Option<TtrtConvertFn>,
}

/// `output_dtypes(self, attrs, nb_attrs, inputs, nb_inputs, outputs, nb_outputs, err)`.
pub type TtrtOpDtypesFn = unsafe extern "C" fn(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb_attrs: i32,
    inputs: *const i32,
    nb_inputs: i32,
    outputs: *mut i32,
    nb_outputs: i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `output_shapes(self, attrs, nb_attrs, inputs, nb_inputs, outputs, nb_outputs, exprs, err)`.
pub type TtrtOpShapesFn = unsafe extern "C" fn(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb_attrs: i32,
    inputs: *const TtrtShapeExpr,
    nb_inputs: i32,
    outputs: *mut TtrtShapeExpr,
    nb_outputs: i32,
    exprs: *const TtrtExprBuilder,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `kernel(self, attrs, nb_attrs, launch, err)`: the CPU or CUDA kernel.
pub type TtrtOpKernelFn = unsafe extern "C" fn(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb_attrs: i32,
    launch: *const TtrtLaunch,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;

/// An operator definition from which the host derives a plugin and a converter. Owned by
/// the library.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtCustomOp {
    /// [`TTRT_CUSTOM_OP_ABI_VERSION`].
    pub abi_version: u32,
    /// Zero.
    pub reserved: i32,
    /// The op's state, passed to every function.
    pub self_: *mut c_void,
    /// NUL-terminated domain; the derived plugin's namespace.
    pub domain: *const c_char,
    /// NUL-terminated op type; the derived plugin's name.
    pub op_type: *const c_char,
    /// Number of inputs.
    pub nb_inputs: i32,
    /// Number of outputs.
    pub nb_outputs: i32,
    /// The attribute schema (the derived plugin's field schema).
    pub attributes: *const TtrtFieldSpec,
    /// Number of schema entries.
    pub nb_attributes: i32,
    /// Zero.
    pub reserved1: i32,
    /// Required.
    pub output_dtypes: Option<TtrtOpDtypesFn>,
    /// Required.
    pub output_shapes: Option<TtrtOpShapesFn>,
    /// Required; `device` says which kernel would run.
    pub supports: Option<TtrtSupportsFn>,
    /// Required: the kernel on host buffers.
    pub cpu_kernel: Option<TtrtOpKernelFn>,
    /// Optional (NULL: no CUDA kernel): the kernel on device buffers and a stream.
    pub cuda_kernel: Option<TtrtOpKernelFn>,
}
