//! The raw `#[repr(C)]` types of the ABI (version 4), member for member as declared in
//! `include/torchtrt_plugin.h`. Layouts never change within a version: later versions only
//! append members (see `docs/plugin-abi.md`). The header holds the ownership rules.

use std::ffi::{c_char, c_void};

use super::ext_types::{TtrtConverter, TtrtCustomOp};

/// The ABI version this crate speaks; the first member of [`TtrtExtension`]. Version 2
/// appended [`TtrtLaunch::cuda`]; version 3 shape inputs ([`TtrtPlugin::shape_inputs`],
/// [`TtrtPlugin::output_shapes_of`], [`TtrtLaunch::shape_values`],
/// [`TtrtExprBuilder::unknown`]), outputs sized by a count and tactics; version 4
/// [`TtrtPlugin::aliased_input`]. Hosts still load libraries of versions 1 to 3.
pub const TTRT_ABI_VERSION: u32 = 4;
/// The oldest ABI version hosts load.
pub const TTRT_ABI_VERSION_MIN: u32 = 1;
/// Most dimensions a tensor or a shape may have across the ABI.
pub const TTRT_MAX_DIMS: usize = 8;
/// Name of the one symbol an extension library exports.
pub const TTRT_ENTRY_POINT: &str = "torchtrt_extension_v1";

/// Result of a fallible ABI function: [`TTRT_OK`] or one of the `TTRT_ERROR_*` codes.
pub type TtrtStatus = i32;
/// Success.
pub const TTRT_OK: TtrtStatus = 0;
/// Bad fields, inputs or arguments.
pub const TTRT_ERROR_INVALID_ARGUMENT: TtrtStatus = 1;
/// A device, dtype or layout the plugin has no kernel for.
pub const TTRT_ERROR_UNSUPPORTED: TtrtStatus = 2;
/// A kernel or any other step failed.
pub const TTRT_ERROR_EXECUTION: TtrtStatus = 3;
/// A panic (or C++ exception) was caught at the boundary.
pub const TTRT_ERROR_PANIC: TtrtStatus = 4;

/// An opaque handle to a dimension expression kept by the host.
pub type TtrtDimHandle = i64;
/// The handle expression builders return on failure.
pub const TTRT_DIM_INVALID: TtrtDimHandle = -1;

/// A caller-owned buffer that a failing function writes its message into: UTF-8, truncated
/// to fit, always NUL-terminated when `capacity > 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtErrorBuf {
    /// Start of the buffer; may be NULL when `capacity` is 0.
    pub data: *mut c_char,
    /// Size of the buffer in bytes, NUL included.
    pub capacity: usize,
}

/// A tensor's dtype, layout and dimensions (`-1` for dimensions unknown at build time).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtrtTensorDesc {
    /// A [`crate::DType`] discriminant.
    pub dtype: i32,
    /// A [`crate::TensorFormat`] discriminant.
    pub format: i32,
    /// Number of dimensions, `0..=TTRT_MAX_DIMS`.
    pub nb_dims: i32,
    /// Zero.
    pub reserved: i32,
    /// Dimensions, outermost first; entries past `nb_dims` are ignored.
    pub dims: [i64; TTRT_MAX_DIMS],
}

/// The dtype and layout of one plugin input or output.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtrtPortDesc {
    /// A [`crate::DType`] discriminant.
    pub dtype: i32,
    /// A [`crate::TensorFormat`] discriminant.
    pub format: i32,
}

/// One named field value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtField {
    /// NUL-terminated UTF-8 name.
    pub name: *const c_char,
    /// A [`crate::FieldType`] discriminant.
    pub field_type: i32,
    /// Zero.
    pub reserved: i32,
    /// Number of elements (bytes for strings, which need no NUL).
    pub length: usize,
    /// `length` elements, aligned for their type; may be NULL when `length` is 0.
    pub data: *const c_void,
}

/// One entry of a creator's field schema.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtFieldSpec {
    /// NUL-terminated UTF-8 name.
    pub name: *const c_char,
    /// A [`crate::FieldType`] discriminant.
    pub field_type: i32,
    /// Nonzero when the field must be given.
    pub required: i32,
    /// Fewest elements accepted.
    pub min_len: i64,
    /// Most elements accepted; `-1` for no limit.
    pub max_len: i64,
    /// Value used when the optional field is absent, or NULL; its name is ignored.
    pub default_value: *const TtrtField,
    /// One NUL-terminated line saying what the field means, or NULL.
    pub doc: *const c_char,
}

/// A symbolic shape: one dimension handle per dimension.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtrtShapeExpr {
    /// Number of dimensions, `0..=TTRT_MAX_DIMS`.
    pub nb_dims: i32,
    /// Zero.
    pub reserved: i32,
    /// Handles from the expression builder; entries past `nb_dims` are ignored.
    pub dims: [TtrtDimHandle; TTRT_MAX_DIMS],
}

/// Makes a handle for a constant.
pub type TtrtDimConstantFn = unsafe extern "C" fn(ctx: *mut c_void, value: i64) -> TtrtDimHandle;
/// Makes a handle for `op(a, b)` (`op` a [`crate::DimOp`] discriminant).
pub type TtrtDimOperationFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    op: i32,
    a: TtrtDimHandle,
    b: TtrtDimHandle,
) -> TtrtDimHandle;
/// Returns 1 and writes the value when the handle is a known constant, else 0.
pub type TtrtDimConstantValueFn =
    unsafe extern "C" fn(ctx: *mut c_void, dim: TtrtDimHandle, value: *mut i64) -> i32;

/// The host's dimension-expression builder handed to `output_shapes` (TensorRT's
/// `IExprBuilder`); handles are valid for that call only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtExprBuilder {
    /// The host's state, passed back to every function.
    pub ctx: *mut c_void,
    /// See [`TtrtDimConstantFn`].
    pub constant: Option<TtrtDimConstantFn>,
    /// See [`TtrtDimOperationFn`].
    pub operation: Option<TtrtDimOperationFn>,
    /// See [`TtrtDimConstantValueFn`].
    pub constant_value: Option<TtrtDimConstantValueFn>,
    /// See [`TtrtDimUnknownFn`]; since version 3.
    pub unknown: Option<TtrtDimUnknownFn>,
}

/// `unknown(ctx)`: a dimension that depends on shape-input values not known yet (the host
/// asks again when they are); [`TTRT_DIM_INVALID`] on failure.
pub type TtrtDimUnknownFn = unsafe extern "C" fn(ctx: *mut c_void) -> TtrtDimHandle;

/// [`TtrtShapeValues::kind`]: the values are not known yet (or the input is no shape input).
pub const TTRT_SHAPE_VALUES_UNKNOWN: i32 = 0;
/// [`TtrtShapeValues::kind`]: `count` integers at `ints`.
pub const TTRT_SHAPE_VALUES_INTS: i32 = 1;
/// [`TtrtShapeValues::kind`]: `count` floating-point values at `floats`.
pub const TTRT_SHAPE_VALUES_FLOATS: i32 = 2;

/// What is known of one input's values, for shape inputs (see
/// [`crate::ShapeValues`]); since version 3. Valid for the call it is passed to.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtShapeValues {
    /// One of the `TTRT_SHAPE_VALUES_*` kinds.
    pub kind: i32,
    /// Number of values.
    pub count: i32,
    /// The integers when `kind` is [`TTRT_SHAPE_VALUES_INTS`], else NULL.
    pub ints: *const i64,
    /// The values when `kind` is [`TTRT_SHAPE_VALUES_FLOATS`], else NULL.
    pub floats: *const f64,
}

/// The arguments of one `enqueue`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtLaunch {
    /// A [`crate::DeviceKind`] discriminant: 0 CPU, 1 CUDA.
    pub device: i32,
    /// CUDA device ordinal; 0 on the CPU.
    pub device_ordinal: i32,
    /// Number of inputs.
    pub nb_inputs: i32,
    /// Number of outputs.
    pub nb_outputs: i32,
    /// `nb_inputs` concrete descriptions.
    pub input_descs: *const TtrtTensorDesc,
    /// `nb_outputs` concrete descriptions.
    pub output_descs: *const TtrtTensorDesc,
    /// `nb_inputs` host or device pointers.
    pub inputs: *const *const c_void,
    /// `nb_outputs` host or device pointers, to be written entirely.
    pub outputs: *const *mut c_void,
    /// Scratch memory of `workspace_size` bytes (NULL when 0).
    pub workspace: *mut c_void,
    /// Bytes of scratch memory.
    pub workspace_size: usize,
    /// The `CUstream` on CUDA; NULL on the CPU.
    pub stream: *mut c_void,
    /// Threads a CPU kernel may use (at least 1).
    pub threads: i32,
    /// Zero.
    pub reserved: i32,
    /// The host's CUDA runtime on CUDA launches (NULL on the CPU); since version 2.
    pub cuda: *const TtrtCudaRuntime,
    /// `nb_inputs` entries (kind unknown for inputs that are not shape inputs), or NULL when
    /// the plugin has no shape inputs; since version 3.
    pub shape_values: *const TtrtShapeValues,
}

/// One kernel launch a library asks of the host (see [`crate::KernelLaunch`]). Strings are
/// UTF-8 with explicit lengths, not NUL-terminated.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtKernelLaunch {
    /// The program's name.
    pub program: *const c_char,
    /// Bytes of `program`.
    pub program_len: usize,
    /// The program's complete CUDA C source; it must stay unchanged at this address while
    /// the plugin lives.
    pub source: *const c_char,
    /// Bytes of `source`.
    pub source_len: usize,
    /// The kernel's name.
    pub kernel: *const c_char,
    /// Bytes of `kernel`.
    pub kernel_len: usize,
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: u32,
    /// Number of parameters.
    pub nb_args: i32,
    /// `nb_args` pointers to each parameter's bytes.
    pub args: *const *const c_void,
    /// `nb_args` byte sizes.
    pub arg_sizes: *const usize,
}

/// `launch(self, launch, err)`: queues a kernel on the launch's stream.
pub type TtrtCudaLaunchFn = unsafe extern "C" fn(
    this: *const c_void,
    launch: *const TtrtKernelLaunch,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `resident_blocks(self, launch, &blocks, err)`: blocks of `launch.block` threads and
/// `launch.shared_bytes` bytes the kernel keeps resident on the device (grid and arguments
/// are ignored).
pub type TtrtCudaResidentBlocksFn = unsafe extern "C" fn(
    this: *const c_void,
    launch: *const TtrtKernelLaunch,
    blocks: *mut u32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `constant(self, bytes, len, &device_ptr, err)`: a device copy of `bytes` kept by the host.
pub type TtrtCudaConstantFn = unsafe extern "C" fn(
    this: *const c_void,
    bytes: *const c_void,
    len: usize,
    ptr: *mut u64,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;

/// The host's CUDA services for one launch; valid until `enqueue` returns.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtCudaRuntime {
    /// The host's state, passed to every function.
    pub self_: *const c_void,
    /// See [`TtrtCudaLaunchFn`].
    pub launch: Option<TtrtCudaLaunchFn>,
    /// See [`TtrtCudaResidentBlocksFn`].
    pub resident_blocks: Option<TtrtCudaResidentBlocksFn>,
    /// See [`TtrtCudaConstantFn`].
    pub constant: Option<TtrtCudaConstantFn>,
}

/// `num_outputs(self, &nb_outputs, err)`.
pub type TtrtNumOutputsFn =
    unsafe extern "C" fn(this: *mut c_void, nb: *mut i32, err: *mut TtrtErrorBuf) -> TtrtStatus;
/// `output_dtypes(self, input_dtypes, nb_inputs, output_dtypes, nb_outputs, err)`.
pub type TtrtOutputDtypesFn = unsafe extern "C" fn(
    this: *mut c_void,
    inputs: *const i32,
    nb_inputs: i32,
    outputs: *mut i32,
    nb_outputs: i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `output_shapes(self, inputs, nb_inputs, outputs, nb_outputs, builder, err)`.
pub type TtrtOutputShapesFn = unsafe extern "C" fn(
    this: *mut c_void,
    inputs: *const TtrtShapeExpr,
    nb_inputs: i32,
    outputs: *mut TtrtShapeExpr,
    nb_outputs: i32,
    builder: *const TtrtExprBuilder,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `supports(self, pos, io, nb_io, nb_inputs, device)`: 1 when supported, else 0.
pub type TtrtSupportsFn = unsafe extern "C" fn(
    this: *mut c_void,
    pos: i32,
    io: *const TtrtPortDesc,
    nb_io: i32,
    nb_inputs: i32,
    device: i32,
) -> i32;
/// `configure(self, inputs, nb_inputs, outputs, nb_outputs, err)`.
pub type TtrtConfigureFn = unsafe extern "C" fn(
    this: *mut c_void,
    inputs: *const TtrtTensorDesc,
    nb_inputs: i32,
    outputs: *const TtrtTensorDesc,
    nb_outputs: i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `workspace_size(self, inputs, nb_inputs, outputs, nb_outputs, &size, err)`.
pub type TtrtWorkspaceSizeFn = unsafe extern "C" fn(
    this: *mut c_void,
    inputs: *const TtrtTensorDesc,
    nb_inputs: i32,
    outputs: *const TtrtTensorDesc,
    nb_outputs: i32,
    size: *mut usize,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `enqueue(self, launch, err)`.
pub type TtrtEnqueueFn = unsafe extern "C" fn(
    this: *mut c_void,
    launch: *const TtrtLaunch,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `serialize_fields(self, &fields, &nb_fields, err)`.
pub type TtrtSerializeFieldsFn = unsafe extern "C" fn(
    this: *mut c_void,
    fields: *mut *const TtrtField,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `clone(self, &plugin, err)`.
pub type TtrtCloneFn = unsafe extern "C" fn(
    this: *mut c_void,
    out: *mut *mut TtrtPlugin,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `destroy(self)`.
pub type TtrtDestroyFn = unsafe extern "C" fn(this: *mut c_void);
/// `shape_inputs(self, indices, capacity, &nb, err)`: writes the indices of the shape inputs
/// (at most `capacity`) and their number.
pub type TtrtShapeInputsFn = unsafe extern "C" fn(
    this: *mut c_void,
    indices: *mut i32,
    capacity: i32,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;
/// `output_shapes_of(self, inputs, values, nb_inputs, outputs, nb_outputs, builder, err)`:
/// `output_shapes` with what is known of each input's values.
pub type TtrtOutputShapesOfFn = unsafe extern "C" fn(
    this: *mut c_void,
    inputs: *const TtrtShapeExpr,
    values: *const TtrtShapeValues,
    nb_inputs: i32,
    outputs: *mut TtrtShapeExpr,
    nb_outputs: i32,
    builder: *const TtrtExprBuilder,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;

/// One output sized by a count (version 3); see [`crate::SizedOutput`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TtrtSizedOutput {
    /// The output whose axis the count sizes.
    pub output: i32,
    /// The axis of that output.
    pub axis: i32,
    /// The scalar `i64` output holding the length.
    pub count: i32,
}

/// `sized_outputs(self, sized, capacity, &nb, err)`: writes the outputs sized by a count (at
/// most `capacity`) and their number.
pub type TtrtSizedOutputsFn = unsafe extern "C" fn(
    this: *mut c_void,
    sized: *mut TtrtSizedOutput,
    capacity: i32,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;

/// Bytes of [`TtrtTactic::name`], its terminating NUL included.
pub const TTRT_TACTIC_NAME_LEN: usize = 64;

/// One implementation a plugin offers (version 3); see [`crate::Tactic`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtrtTactic {
    /// Nonzero identifier.
    pub id: u32,
    /// NUL-terminated UTF-8 name.
    pub name: [c_char; TTRT_TACTIC_NAME_LEN],
}

impl Default for TtrtTactic {
    fn default() -> TtrtTactic {
        TtrtTactic {
            id: 0,
            name: [0; TTRT_TACTIC_NAME_LEN],
        }
    }
}

/// `tactics(self, inputs, nb_inputs, outputs, nb_outputs, device, tactics, capacity, &nb,
/// err)`: writes the tactics offered on `device` for these concrete descriptions (at most
/// `capacity`) and their number.
pub type TtrtTacticsFn = unsafe extern "C" fn(
    this: *mut c_void,
    inputs: *const TtrtTensorDesc,
    nb_inputs: i32,
    outputs: *const TtrtTensorDesc,
    nb_outputs: i32,
    device: i32,
    tactics: *mut TtrtTactic,
    capacity: i32,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;

/// `set_tactic(self, tactic, err)`: selects the tactic `enqueue` runs (`0`: the default).
pub type TtrtSetTacticFn =
    unsafe extern "C" fn(this: *mut c_void, tactic: u32, err: *mut TtrtErrorBuf) -> TtrtStatus;

/// `aliased_input(self, output)`: the input that output `output` aliases, or `-1` for none.
pub type TtrtAliasedInputFn = unsafe extern "C" fn(this: *mut c_void, output: i32) -> i32;

/// A plugin: its state and its functions. Owned by the library; valid until `destroy`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtPlugin {
    /// The plugin's state, passed to every function.
    pub self_: *mut c_void,
    /// Required.
    pub num_outputs: Option<TtrtNumOutputsFn>,
    /// Required.
    pub output_dtypes: Option<TtrtOutputDtypesFn>,
    /// Required.
    pub output_shapes: Option<TtrtOutputShapesFn>,
    /// Required.
    pub supports: Option<TtrtSupportsFn>,
    /// Optional (NULL: nothing to check).
    pub configure: Option<TtrtConfigureFn>,
    /// Optional (NULL: no workspace).
    pub workspace_size: Option<TtrtWorkspaceSizeFn>,
    /// Required.
    pub enqueue: Option<TtrtEnqueueFn>,
    /// Required.
    pub serialize_fields: Option<TtrtSerializeFieldsFn>,
    /// Required.
    pub clone: Option<TtrtCloneFn>,
    /// Required.
    pub destroy: Option<TtrtDestroyFn>,
    /// Optional (NULL: no shape inputs); since version 3.
    pub shape_inputs: Option<TtrtShapeInputsFn>,
    /// Optional (NULL: `output_shapes`); since version 3.
    pub output_shapes_of: Option<TtrtOutputShapesOfFn>,
    /// Optional (NULL: none); since version 3.
    pub sized_outputs: Option<TtrtSizedOutputsFn>,
    /// Optional (NULL: no tactics); since version 3.
    pub tactics: Option<TtrtTacticsFn>,
    /// Optional (NULL: only tactic 0); since version 3.
    pub set_tactic: Option<TtrtSetTacticFn>,
    /// Optional (NULL: no output aliases an input); since version 4.
    pub aliased_input: Option<TtrtAliasedInputFn>,
}

/// `create(self, layer_name, fields, nb_fields, &plugin, err)`.
pub type TtrtCreateFn = unsafe extern "C" fn(
    this: *mut c_void,
    layer_name: *const c_char,
    fields: *const TtrtField,
    nb_fields: i32,
    out: *mut *mut TtrtPlugin,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus;

/// A plugin creator: its key, its field schema and its `create`. Owned by the library.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtCreator {
    /// The creator's state, passed to `create`.
    pub self_: *mut c_void,
    /// NUL-terminated namespace, possibly empty.
    pub plugin_namespace: *const c_char,
    /// NUL-terminated plugin name.
    pub name: *const c_char,
    /// NUL-terminated version.
    pub version: *const c_char,
    /// `nb_fields` schema entries.
    pub fields: *const TtrtFieldSpec,
    /// Number of schema entries.
    pub nb_fields: i32,
    /// Version 3: the `TTRT_CAPABILITY_*` bits of what its plugins may do (0 in versions 1
    /// and 2, where it was reserved).
    pub capabilities: i32,
    /// Required.
    pub create: Option<TtrtCreateFn>,
}

/// What `torchtrt_extension_v1` returns: the library's identity and what it provides.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtExtension {
    /// [`TTRT_ABI_VERSION`]; first in every version, so any host can read it.
    pub abi_version: u32,
    /// Number of entries in `creators`.
    pub nb_creators: i32,
    /// NUL-terminated library identity, e.g. `torchtrt_plugins 0.1.0`.
    pub provider: *const c_char,
    /// `nb_creators` pointers to creators.
    pub creators: *const *const TtrtCreator,
    /// Number of entries in `converters` (0 for a plugin-only library).
    pub nb_converters: i32,
    /// Zero.
    pub reserved0: i32,
    /// `nb_converters` pointers to converters (NULL when there are none).
    pub converters: *const *const TtrtConverter,
    /// Number of entries in `custom_ops` (0 for a library without custom ops).
    pub nb_custom_ops: i32,
    /// Zero.
    pub reserved1: i32,
    /// `nb_custom_ops` pointers to custom ops (NULL when there are none).
    pub custom_ops: *const *const TtrtCustomOp,
}

/// The type of `torchtrt_extension_v1`.
pub type TtrtEntryPoint = unsafe extern "C" fn() -> *const TtrtExtension;
