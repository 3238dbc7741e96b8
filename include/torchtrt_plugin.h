/*
 * torchtrt_plugin.h - the C ABI between torchtrt hosts and extension libraries.
 *
 * An extension library (a shared object written in C, C++ or Rust) exports one function,
 *
 *     const TtrtExtension* torchtrt_extension_v1(void);
 *
 * which returns the library's identity and its plugin creators as tables of function
 * pointers. A host dlopens the library, calls the entry point, checks `abi_version`, and
 * from then on talks to the library only through the tables below.
 *
 * Versioning. `abi_version` is the first member of TtrtExtension in every version, so a host
 * can read it whatever the library was built against. Within a version nothing changes;
 * a new version only appends members to the end of structures and never renumbers
 * constants. A host refuses a library whose version it does not speak; a version-4 host
 * loads libraries of versions 1 to 4 (TTRT_ABI_VERSION_MIN..TTRT_ABI_VERSION) and reads
 * only the members their version has. Version 2 appended TtrtLaunch.cuda; version 3 shape
 * inputs (TtrtPlugin.shape_inputs and output_shapes_of, TtrtLaunch.shape_values,
 * TtrtExprBuilder.unknown), outputs sized by a count (TtrtPlugin.sized_outputs), tactics
 * (TtrtPlugin.tactics and set_tactic) and TtrtCreator.capabilities; version 4 outputs that
 * alias an input (TtrtPlugin.aliased_input).
 *
 * Errors. Every fallible function returns a TtrtStatus (TTRT_OK = 0) and, on failure,
 * writes a UTF-8 message into the caller's TtrtErrorBuf: at most `capacity - 1` bytes,
 * then a NUL. `err` may be NULL, and then nothing is written. No exception, panic or
 * longjmp may leave a function of this ABI.
 *
 * Ownership and lifetimes.
 *   - The TtrtExtension, the creators, their strings and their field schemas belong to the
 *     library and stay valid and unchanged until the library is unloaded. Hosts keep the
 *     library loaded while they hold any creator or plugin from it.
 *   - Everything a host passes in (strings, fields, descriptions, shapes, buffers, the
 *     expression builder) is valid only during the call. Copy what you keep.
 *   - A TtrtPlugin returned by `create` or `clone` is owned by the host, which calls its
 *     `destroy` exactly once. The TtrtPlugin structure itself must stay valid until then
 *     (typically it lives inside the plugin's state).
 *   - The fields `serialize_fields` returns belong to the plugin and stay valid until the
 *     next call to `serialize_fields` on that plugin or its `destroy`.
 *   - Field data is aligned for its element type. String fields are `length` bytes of
 *     UTF-8 without a NUL; hosts add a NUL after the data they pass, readers must use
 *     `length`.
 *
 * Threads. A creator's `create` may be called from any thread, concurrently. A plugin's
 * functions may be called from any thread, and `enqueue` concurrently with itself and with
 * the other queries; `configure` and `destroy` are never concurrent with any other call on
 * the same plugin, and neither is `serialize_fields` with itself.
 *
 * Symbolic shapes. `output_shapes` receives the input dimensions as opaque handles and an
 * expression builder (TensorRT's IExprBuilder); it writes one handle per output dimension,
 * made from input handles, `constant` and `operation`. Handles are valid during the call.
 */
#ifndef TORCHTRT_PLUGIN_H
#define TORCHTRT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TTRT_ABI_VERSION 4u
#define TTRT_ABI_VERSION_MIN 1u
#define TTRT_MAX_DIMS 8
#define TTRT_ENTRY_POINT "torchtrt_extension_v1"

/* Status codes. */
typedef int32_t TtrtStatus;
#define TTRT_OK 0
#define TTRT_ERROR_INVALID_ARGUMENT 1 /* bad fields, inputs or arguments */
#define TTRT_ERROR_UNSUPPORTED 2      /* no kernel for this device, dtype or layout */
#define TTRT_ERROR_EXECUTION 3        /* anything else that failed */
#define TTRT_ERROR_PANIC 4            /* a panic or exception caught at the boundary */

/* Element types (TtrtTensorDesc.dtype, TtrtPortDesc.dtype). */
typedef enum TtrtDType {
  TTRT_DTYPE_F32 = 0,
  TTRT_DTYPE_F16 = 1,
  TTRT_DTYPE_BF16 = 2,
  TTRT_DTYPE_F64 = 3,
  TTRT_DTYPE_I64 = 4,
  TTRT_DTYPE_I32 = 5,
  TTRT_DTYPE_I16 = 6,
  TTRT_DTYPE_I8 = 7,
  TTRT_DTYPE_U8 = 8,
  TTRT_DTYPE_BOOL = 9,
  TTRT_DTYPE_U16 = 10,
  TTRT_DTYPE_U32 = 11,
  TTRT_DTYPE_U64 = 12
} TtrtDType;

/* Memory layouts: dense row-major only, for now. */
typedef enum TtrtFormat { TTRT_FORMAT_LINEAR = 0 } TtrtFormat;

/* Devices (TtrtLaunch.device, `supports`). */
typedef enum TtrtDevice { TTRT_DEVICE_CPU = 0, TTRT_DEVICE_CUDA = 1 } TtrtDevice;

/* Field types (TtrtField.field_type, TtrtFieldSpec.field_type). */
typedef enum TtrtFieldType {
  TTRT_FIELD_F16 = 0,
  TTRT_FIELD_F32 = 1,
  TTRT_FIELD_F64 = 2,
  TTRT_FIELD_I8 = 3,
  TTRT_FIELD_I16 = 4,
  TTRT_FIELD_I32 = 5,
  TTRT_FIELD_I64 = 6,
  TTRT_FIELD_BF16 = 7,
  TTRT_FIELD_CHAR = 8,  /* a UTF-8 string; length in bytes */
  TTRT_FIELD_DIMS = 9,  /* int64 dimensions */
  TTRT_FIELD_BYTES = 10 /* opaque bytes */
} TtrtFieldType;

/* Operations on dimensions (`operation` of TtrtExprBuilder). */
typedef enum TtrtDimOp {
  TTRT_DIM_ADD = 0,
  TTRT_DIM_SUB = 1,
  TTRT_DIM_MUL = 2,
  TTRT_DIM_FLOOR_DIV = 3,
  TTRT_DIM_CEIL_DIV = 4,
  TTRT_DIM_MIN = 5,
  TTRT_DIM_MAX = 6
} TtrtDimOp;

/* An opaque handle to a dimension expression; TTRT_DIM_INVALID reports a failure. */
typedef int64_t TtrtDimHandle;
#define TTRT_DIM_INVALID ((TtrtDimHandle)-1)

/* Caller-owned buffer for an error message. */
typedef struct TtrtErrorBuf {
  char* data;      /* may be NULL when capacity is 0 */
  size_t capacity; /* bytes, NUL included */
} TtrtErrorBuf;

/* A tensor's dtype, layout and dimensions (-1 for a dimension unknown at build time). */
typedef struct TtrtTensorDesc {
  int32_t dtype;  /* TtrtDType */
  int32_t format; /* TtrtFormat */
  int32_t nb_dims; /* 0..TTRT_MAX_DIMS */
  int32_t reserved; /* 0 */
  int64_t dims[TTRT_MAX_DIMS];
} TtrtTensorDesc;

/* The dtype and layout of one plugin input or output. */
typedef struct TtrtPortDesc {
  int32_t dtype;  /* TtrtDType */
  int32_t format; /* TtrtFormat */
} TtrtPortDesc;

/* One named field value. */
typedef struct TtrtField {
  const char* name;   /* NUL-terminated UTF-8 */
  int32_t field_type; /* TtrtFieldType */
  int32_t reserved;   /* 0 */
  size_t length;      /* elements (bytes for strings) */
  const void* data;   /* `length` elements; may be NULL when length is 0 */
} TtrtField;

/* One entry of a creator's field schema. */
typedef struct TtrtFieldSpec {
  const char* name;                /* NUL-terminated UTF-8, unique within the schema */
  int32_t field_type;              /* TtrtFieldType */
  int32_t required;                /* nonzero: the field must be given */
  int64_t min_len;                 /* fewest elements */
  int64_t max_len;                 /* most elements, -1 for no limit */
  const TtrtField* default_value;  /* used when the optional field is absent; or NULL */
  const char* doc;                 /* one line, or NULL */
} TtrtFieldSpec;

/* A symbolic shape. */
typedef struct TtrtShapeExpr {
  int32_t nb_dims;  /* 0..TTRT_MAX_DIMS */
  int32_t reserved; /* 0 */
  TtrtDimHandle dims[TTRT_MAX_DIMS];
} TtrtShapeExpr;

/* The host's dimension-expression builder, valid during one `output_shapes` call. */
typedef struct TtrtExprBuilder {
  void* ctx;
  /* A handle for a constant. */
  TtrtDimHandle (*constant)(void* ctx, int64_t value);
  /* A handle for `op(a, b)`, `op` a TtrtDimOp. */
  TtrtDimHandle (*operation)(void* ctx, int32_t op, TtrtDimHandle a, TtrtDimHandle b);
  /* 1 and `*value` set when `dim` is a known constant; else 0. */
  int32_t (*constant_value)(void* ctx, TtrtDimHandle dim, int64_t* value);
  /* Version 3: a dimension that depends on shape-input values not known yet; the host asks
   * `output_shapes_of` again once they are. */
  TtrtDimHandle (*unknown)(void* ctx);
} TtrtExprBuilder;

/* What is known of one input's values (version 3), for shape inputs: small 1-D integer or
 * floating-point tensors whose values decide output shapes. Valid during the call. */
#define TTRT_SHAPE_VALUES_UNKNOWN 0
#define TTRT_SHAPE_VALUES_INTS 1
#define TTRT_SHAPE_VALUES_FLOATS 2
typedef struct TtrtShapeValues {
  int32_t kind;          /* TTRT_SHAPE_VALUES_* */
  int32_t count;
  const int64_t* ints;   /* `count` values when kind is INTS, else NULL */
  const double* floats;  /* `count` values when kind is FLOATS, else NULL */
} TtrtShapeValues;

/* One kernel launch a plugin asks of the host's CUDA runtime. Strings are UTF-8 with
 * explicit lengths (no NUL needed). `source` is the program's complete CUDA C, compiled by
 * the host's NVRTC as is (no toolkit headers); it must stay unchanged at its address for
 * the plugin's life. The host compiles each program once per device architecture (engines
 * store the images, so deployment needs no NVRTC), caches the modules, and refuses a launch
 * whose argument count or sizes differ from the kernel's parameters. Each argument is the
 * parameter's bytes: scalars little-endian, pointers as 8-byte device addresses, structs in
 * their C layout. */
typedef struct TtrtKernelLaunch {
  const char* program;
  size_t program_len;
  const char* source;
  size_t source_len;
  const char* kernel; /* the extern "C" kernel name */
  size_t kernel_len;
  uint32_t grid[3];   /* a zero dimension launches nothing */
  uint32_t block[3];
  uint32_t shared_bytes; /* dynamic shared memory per block */
  int32_t nb_args;
  const void* const* args;
  const size_t* arg_sizes;
} TtrtKernelLaunch;

/* The host's CUDA services during one CUDA `enqueue` (ABI version 2); valid until `enqueue`
 * returns. Work is queued on the launch's stream. */
typedef struct TtrtCudaRuntime {
  const void* self;
  TtrtStatus (*launch)(const void* self, const TtrtKernelLaunch* launch, TtrtErrorBuf* err);
  /* Blocks of `launch->block` threads with `launch->shared_bytes` bytes that the kernel
   * keeps resident on the whole device at once (at least 1); grid and args are ignored. */
  TtrtStatus (*resident_blocks)(const void* self, const TtrtKernelLaunch* launch,
                                uint32_t* blocks, TtrtErrorBuf* err);
  /* A device copy of `len` bytes, uploaded once per distinct content and kept by the host. */
  TtrtStatus (*constant)(const void* self, const void* bytes, size_t len, uint64_t* ptr,
                         TtrtErrorBuf* err);
} TtrtCudaRuntime;

/* The arguments of one `enqueue`. Descriptions are concrete (no -1). Outputs and the
 * workspace overlap nothing else. */
typedef struct TtrtLaunch {
  int32_t device;          /* TtrtDevice */
  int32_t device_ordinal;  /* CUDA device; 0 on the CPU */
  int32_t nb_inputs;
  int32_t nb_outputs;
  const TtrtTensorDesc* input_descs;
  const TtrtTensorDesc* output_descs;
  const void* const* inputs; /* host or device pointers */
  void* const* outputs;      /* host or device pointers, to be written entirely */
  void* workspace;           /* NULL when workspace_size is 0 */
  size_t workspace_size;     /* bytes */
  void* stream;              /* the CUstream on CUDA; NULL on the CPU */
  int32_t threads;           /* threads a CPU kernel may use, at least 1 */
  int32_t reserved;          /* 0 */
  const TtrtCudaRuntime* cuda; /* version 2: the host's CUDA runtime; NULL on the CPU */
  /* Version 3: nb_inputs entries (UNKNOWN for inputs that are no shape inputs), or NULL
   * when the plugin has no shape inputs. */
  const TtrtShapeValues* shape_values;
} TtrtLaunch;

/* Version 3: output `output` is as long along `axis` as the value the kernel writes into
 * output `count`, a scalar int64 (shape [] or [1]). `output_shapes` gives that axis its upper
 * bound, which the host allocates; the kernel writes the output as a contiguous tensor of
 * its actual shape and the count, which the host reads after the launch. */
typedef struct TtrtSizedOutput {
  int32_t output;
  int32_t axis;
  int32_t count;
} TtrtSizedOutput;

/* Version 3: one implementation a plugin offers for the builder to time. `id` is nonzero
 * (0 means the plugin's default); `name` is NUL-terminated UTF-8. */
#define TTRT_TACTIC_NAME_LEN 64
typedef struct TtrtTactic {
  uint32_t id;
  char name[TTRT_TACTIC_NAME_LEN];
} TtrtTactic;

/* A plugin: its state (`self`) and its functions. All functions are required except
 * `configure`, `workspace_size`, `shape_inputs`, `output_shapes_of`, `sized_outputs`,
 * `tactics` and `set_tactic`, which may be NULL. */
typedef struct TtrtPlugin {
  void* self;
  TtrtStatus (*num_outputs)(void* self, int32_t* nb_outputs, TtrtErrorBuf* err);
  /* Output dtypes (TtrtDType) for the given input dtypes. */
  TtrtStatus (*output_dtypes)(void* self, const int32_t* input_dtypes, int32_t nb_inputs,
                              int32_t* output_dtypes, int32_t nb_outputs, TtrtErrorBuf* err);
  /* Output shapes as expressions of the input shapes; see TtrtExprBuilder. */
  TtrtStatus (*output_shapes)(void* self, const TtrtShapeExpr* inputs, int32_t nb_inputs,
                              TtrtShapeExpr* outputs, int32_t nb_outputs,
                              const TtrtExprBuilder* exprs, TtrtErrorBuf* err);
  /* 1 when port `pos` (inputs first, then outputs) may have io[pos] on `device`, given
   * io[0..pos]; else 0. */
  int32_t (*supports)(void* self, int32_t pos, const TtrtPortDesc* io, int32_t nb_io,
                      int32_t nb_inputs, int32_t device);
  /* Dtypes and shape ranges are fixed (-1 for dynamic dimensions). */
  TtrtStatus (*configure)(void* self, const TtrtTensorDesc* inputs, int32_t nb_inputs,
                          const TtrtTensorDesc* outputs, int32_t nb_outputs, TtrtErrorBuf* err);
  /* Scratch bytes `enqueue` needs for these concrete shapes. */
  TtrtStatus (*workspace_size)(void* self, const TtrtTensorDesc* inputs, int32_t nb_inputs,
                               const TtrtTensorDesc* outputs, int32_t nb_outputs, size_t* size,
                               TtrtErrorBuf* err);
  TtrtStatus (*enqueue)(void* self, const TtrtLaunch* launch, TtrtErrorBuf* err);
  /* The fields that re-create this plugin through its creator; owned by the plugin. */
  TtrtStatus (*serialize_fields)(void* self, const TtrtField** fields, int32_t* nb_fields,
                                 TtrtErrorBuf* err);
  /* A copy, configuration included, owned by the caller. */
  TtrtStatus (*clone)(void* self, struct TtrtPlugin** out, TtrtErrorBuf* err);
  /* Frees the plugin, its table included. */
  void (*destroy)(void* self);
  /* Version 3. The indices of the shape inputs (at most `capacity`) and their number; NULL
   * for none. The host keeps them on the host and passes their values below. */
  TtrtStatus (*shape_inputs)(void* self, int32_t* indices, int32_t capacity, int32_t* nb,
                             TtrtErrorBuf* err);
  /* Version 3. `output_shapes` with `values[i]` for input i; NULL to use `output_shapes`. */
  TtrtStatus (*output_shapes_of)(void* self, const TtrtShapeExpr* inputs,
                                 const TtrtShapeValues* values, int32_t nb_inputs,
                                 TtrtShapeExpr* outputs, int32_t nb_outputs,
                                 const TtrtExprBuilder* exprs, TtrtErrorBuf* err);
  /* Version 3. The outputs sized by a count (at most `capacity`) and their number; NULL for
   * none. */
  TtrtStatus (*sized_outputs)(void* self, TtrtSizedOutput* sized, int32_t capacity,
                              int32_t* nb, TtrtErrorBuf* err);
  /* Version 3. The tactics offered on `device` (TtrtDevice) for these concrete
   * descriptions (at most `capacity`) and their number; NULL for none. The builder times
   * each at the profile's optimum shapes and keeps the fastest. */
  TtrtStatus (*tactics)(void* self, const TtrtTensorDesc* inputs, int32_t nb_inputs,
                        const TtrtTensorDesc* outputs, int32_t nb_outputs, int32_t device,
                        TtrtTactic* tactics, int32_t capacity, int32_t* nb, TtrtErrorBuf* err);
  /* Version 3. Selects the tactic `enqueue` runs (0: the default), on a configured plugin,
   * at build time and when an engine is loaded; NULL accepts only 0. */
  TtrtStatus (*set_tactic)(void* self, uint32_t tactic, TtrtErrorBuf* err);
  /* Version 4. The input that output `output` aliases, or -1 for none; NULL for none. An
   * aliased output has its input's dtype and shape (the builder checks), holds the input's
   * values when `enqueue` starts, and the kernel updates it in place. The host copies the
   * input into the output before each launch, so other readers of the input still see it
   * unchanged. May be called from any thread. */
  int32_t (*aliased_input)(void* self, int32_t output);
} TtrtPlugin;

/* Version 3: what a creator's plugins may do, in TtrtCreator.capabilities. */
#define TTRT_CAPABILITY_SHAPE_INPUTS 1
#define TTRT_CAPABILITY_SIZED_OUTPUTS 2
#define TTRT_CAPABILITY_TACTICS 4
#define TTRT_CAPABILITY_ALIASED_OUTPUTS 8 /* version 4 */

/* A plugin creator, identified by (plugin_namespace, name, version). */
typedef struct TtrtCreator {
  void* self;
  const char* plugin_namespace; /* possibly empty */
  const char* name;
  const char* version;
  const TtrtFieldSpec* fields; /* the schema `create` accepts */
  int32_t nb_fields;
  int32_t capabilities; /* version 3: TTRT_CAPABILITY_* bits; 0 before */
  /* Creates a plugin for layer `layer_name` from `fields` (already checked against the
   * schema by torchtrt hosts, defaults filled in); on success `*out` is owned by the
   * caller, on failure `*out` is left alone. */
  TtrtStatus (*create)(void* self, const char* layer_name, const TtrtField* fields,
                       int32_t nb_fields, TtrtPlugin** out, TtrtErrorBuf* err);
} TtrtCreator;

/* ---- Converters and custom ops ------------------------------------------------------
 *
 * A library may also export custom converters (TtrtConverter: turn one ONNX node of
 * (domain, op_type) into layers) and custom ops (TtrtCustomOp: an operator definition from
 * which the host derives a plugin and a converter). Each of these tables, and the builder the
 * host passes to `convert`, begins with its own version, so they grow by appending members
 * without changing TTRT_ABI_VERSION. A host refuses a table whose version it does not speak.
 *
 * Converters. `convert(self, node, net, err)` receives the node (valid during the call) and
 * the host's TtrtNetworkBuilder. Tensors are opaque TtrtTensorHandle values valid during the
 * call. The converter adds layers through `net` and binds every node output with
 * `set_output`; it may be called from any thread, but never concurrently for one network.
 * ONNX attributes arrive as fields: INT -> I64[1], INTS -> I64[n], FLOAT -> F32[1],
 * FLOATS -> F32[n], STRING -> CHAR, STRINGS -> CHAR with items separated by NUL bytes,
 * TENSOR -> the elements in their own field type (BOOL and U8 as BYTES) plus a DIMS field
 * "<name>.shape".
 *
 * Custom ops. The host registers a plugin under namespace = domain, name = op_type,
 * version "1" whose fields are the attributes (schema `attributes`), and a converter that
 * maps the ONNX node onto it. `output_dtypes`, `output_shapes` and `supports` follow the
 * TtrtPlugin functions of the same names with the attributes added; `cpu_kernel` runs on host
 * buffers, `cuda_kernel` (optional) on device buffers and the launch's stream. All of them
 * may be called from any thread, concurrently.
 */
#define TTRT_CONVERTER_ABI_VERSION 1u
#define TTRT_CUSTOM_OP_ABI_VERSION 1u

/* An opaque handle to a tensor of the network being built. */
typedef int64_t TtrtTensorHandle;
#define TTRT_TENSOR_NONE ((TtrtTensorHandle)-1) /* an omitted optional input */

/* Binary element-wise operations (`add_binary`), with numpy broadcasting. */
typedef enum TtrtBinaryOp {
  TTRT_BINARY_ADD = 0,
  TTRT_BINARY_SUB = 1,
  TTRT_BINARY_MUL = 2,
  TTRT_BINARY_DIV = 3,
  TTRT_BINARY_POW = 4,
  TTRT_BINARY_MAX = 5,
  TTRT_BINARY_MIN = 6
} TtrtBinaryOp;

/* Unary functions and activations (`add_unary`); `alpha`/`beta` as noted, else ignored. */
typedef enum TtrtUnaryOp {
  TTRT_UNARY_ABS = 0,
  TTRT_UNARY_NEG = 1,
  TTRT_UNARY_EXP = 2,
  TTRT_UNARY_LOG = 3,
  TTRT_UNARY_SQRT = 4,
  TTRT_UNARY_RECIPROCAL = 5,
  TTRT_UNARY_ERF = 6,
  TTRT_UNARY_RELU = 7,
  TTRT_UNARY_SIGMOID = 8,
  TTRT_UNARY_TANH = 9,
  TTRT_UNARY_LEAKY_RELU = 10,   /* alpha: negative slope */
  TTRT_UNARY_CLIP = 11,         /* alpha: min, beta: max */
  TTRT_UNARY_HARD_SIGMOID = 12, /* max(0, min(1, alpha*x + beta)) */
  TTRT_UNARY_HARD_SWISH = 13,
  TTRT_UNARY_SOFTPLUS = 14,
  TTRT_UNARY_GELU = 15
} TtrtUnaryOp;

/* The node being converted. */
typedef struct TtrtNode {
  const char* name;    /* "op_type#index" for unnamed nodes */
  const char* op_type;
  const char* domain;  /* "" for the default ONNX domain */
  int64_t opset;       /* the opset imported for the node's domain */
  const TtrtField* attributes;
  int32_t nb_attributes;
  int32_t nb_inputs;
  const TtrtTensorHandle* inputs; /* TTRT_TENSOR_NONE for omitted inputs */
  int32_t nb_outputs;  /* every output must be bound with `set_output` */
  int32_t reserved;    /* 0 */
} TtrtNode;

/* The host's network builder, valid during one `convert`. Every function returning a status
 * writes the new tensor's handle to `*out` on success. */
typedef struct TtrtNetworkBuilder {
  uint32_t abi_version; /* TTRT_CONVERTER_ABI_VERSION */
  uint32_t size;        /* sizeof(TtrtNetworkBuilder) as the host knows it */
  void* ctx;
  /* dtype and shape (-1 for dimensions unknown at build time). */
  TtrtStatus (*tensor_desc)(void* ctx, TtrtTensorHandle t, TtrtTensorDesc* desc,
                            TtrtErrorBuf* err);
  /* 1 and the value's bytes when known at build time (initializers, constants); else 0.
   * The bytes stay valid until `convert` returns. */
  int32_t (*tensor_value)(void* ctx, TtrtTensorHandle t, const void** data, size_t* nbytes);
  /* A constant of `desc` (concrete dims) from `nbytes` little-endian bytes. */
  TtrtStatus (*add_constant)(void* ctx, const TtrtTensorDesc* desc, const void* data,
                             size_t nbytes, TtrtTensorHandle* out, TtrtErrorBuf* err);
  TtrtStatus (*add_binary)(void* ctx, int32_t op, TtrtTensorHandle a, TtrtTensorHandle b,
                           TtrtTensorHandle* out, TtrtErrorBuf* err);
  TtrtStatus (*add_unary)(void* ctx, int32_t op, TtrtTensorHandle x, float alpha, float beta,
                          TtrtTensorHandle* out, TtrtErrorBuf* err);
  TtrtStatus (*add_matmul)(void* ctx, TtrtTensorHandle a, TtrtTensorHandle b,
                           int32_t transpose_a, int32_t transpose_b, TtrtTensorHandle* out,
                           TtrtErrorBuf* err);
  /* ONNX Reshape: 0 copies the input dimension, -1 is inferred. */
  TtrtStatus (*add_reshape)(void* ctx, TtrtTensorHandle x, const int64_t* dims, int32_t nb_dims,
                            TtrtTensorHandle* out, TtrtErrorBuf* err);
  TtrtStatus (*add_transpose)(void* ctx, TtrtTensorHandle x, const int32_t* perm,
                              int32_t nb_perm, TtrtTensorHandle* out, TtrtErrorBuf* err);
  TtrtStatus (*add_concat)(void* ctx, const TtrtTensorHandle* inputs, int32_t nb_inputs,
                           int64_t axis, TtrtTensorHandle* out, TtrtErrorBuf* err);
  TtrtStatus (*add_cast)(void* ctx, TtrtTensorHandle x, int32_t dtype, TtrtTensorHandle* out,
                         TtrtErrorBuf* err);
  /* Creates the plugin (namespace, name, version) from `fields` through the host's registry
   * and adds it; writes up to `capacity` output handles and their number. */
  TtrtStatus (*add_plugin)(void* ctx, const char* plugin_namespace, const char* name,
                           const char* version, const TtrtField* fields, int32_t nb_fields,
                           const TtrtTensorHandle* inputs, int32_t nb_inputs,
                           TtrtTensorHandle* outputs, int32_t capacity, int32_t* nb_outputs,
                           TtrtErrorBuf* err);
  /* Binds node output `index` to `t`. */
  TtrtStatus (*set_output)(void* ctx, int32_t index, TtrtTensorHandle t, TtrtErrorBuf* err);
} TtrtNetworkBuilder;

/* A converter for (domain, op_type) over opsets since_opset..=until_opset. */
typedef struct TtrtConverter {
  uint32_t abi_version; /* TTRT_CONVERTER_ABI_VERSION */
  int32_t reserved;     /* 0 */
  void* self;
  const char* domain;   /* "" for the default ONNX domain */
  const char* op_type;
  int64_t since_opset;  /* at least 1 */
  int64_t until_opset;  /* -1: every later opset */
  TtrtStatus (*convert)(void* self, const TtrtNode* node, const TtrtNetworkBuilder* net,
                        TtrtErrorBuf* err);
} TtrtConverter;

/* An operator definition; the host derives a plugin and a converter from it. */
typedef struct TtrtCustomOp {
  uint32_t abi_version; /* TTRT_CUSTOM_OP_ABI_VERSION */
  int32_t reserved;     /* 0 */
  void* self;
  const char* domain;   /* the derived plugin's namespace */
  const char* op_type;  /* the derived plugin's name */
  int32_t nb_inputs;
  int32_t nb_outputs;
  const TtrtFieldSpec* attributes; /* the attribute schema */
  int32_t nb_attributes;
  int32_t reserved1;    /* 0 */
  TtrtStatus (*output_dtypes)(void* self, const TtrtField* attrs, int32_t nb_attrs,
                              const int32_t* input_dtypes, int32_t nb_inputs,
                              int32_t* output_dtypes, int32_t nb_outputs, TtrtErrorBuf* err);
  TtrtStatus (*output_shapes)(void* self, const TtrtField* attrs, int32_t nb_attrs,
                              const TtrtShapeExpr* inputs, int32_t nb_inputs,
                              TtrtShapeExpr* outputs, int32_t nb_outputs,
                              const TtrtExprBuilder* exprs, TtrtErrorBuf* err);
  int32_t (*supports)(void* self, int32_t pos, const TtrtPortDesc* io, int32_t nb_io,
                      int32_t nb_inputs, int32_t device);
  TtrtStatus (*cpu_kernel)(void* self, const TtrtField* attrs, int32_t nb_attrs,
                           const TtrtLaunch* launch, TtrtErrorBuf* err);
  /* NULL when the op has no CUDA kernel. */
  TtrtStatus (*cuda_kernel)(void* self, const TtrtField* attrs, int32_t nb_attrs,
                            const TtrtLaunch* launch, TtrtErrorBuf* err);
} TtrtCustomOp;

/* What the entry point returns. */
typedef struct TtrtExtension {
  uint32_t abi_version; /* TTRT_ABI_VERSION; first in every version */
  int32_t nb_creators;
  const char* provider; /* library identity, e.g. "torchtrt_plugins 0.1.0" */
  const TtrtCreator* const* creators;
  /* Converters and custom ops: 0 and NULL when the library has none. */
  int32_t nb_converters;
  int32_t reserved0; /* 0 */
  const TtrtConverter* const* converters;
  int32_t nb_custom_ops;
  int32_t reserved1; /* 0 */
  const TtrtCustomOp* const* custom_ops;
} TtrtExtension;

/* The entry point every extension library exports. */
typedef const TtrtExtension* (*TtrtEntryPoint)(void);
const TtrtExtension* torchtrt_extension_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* TORCHTRT_PLUGIN_H */
