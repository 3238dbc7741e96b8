/* A torchtrt converter and a custom op in plain C.
 *   converter test_c::AddScalar(x; value: float) -> x + value, through the host's builder;
 *   custom op test_c::Square(x; gain: float = 1) -> gain * x * x, f32 on the CPU. */
#include <string.h>

#include "torchtrt_plugin.h"

static TtrtStatus fail(TtrtErrorBuf* err, TtrtStatus status, const char* msg) {
  if (err != NULL && err->data != NULL && err->capacity > 0) {
    size_t n = strlen(msg);
    if (n >= err->capacity) {
      n = err->capacity - 1;
    }
    memcpy(err->data, msg, n);
    err->data[n] = '\0';
  }
  return status;
}

static const TtrtField* find(const TtrtField* fields, int32_t nb, const char* name) {
  int32_t i;
  for (i = 0; i < nb; ++i) {
    if (strcmp(fields[i].name, name) == 0) {
      return &fields[i];
    }
  }
  return NULL;
}

static TtrtStatus add_scalar_convert(void* self, const TtrtNode* node,
                                     const TtrtNetworkBuilder* net, TtrtErrorBuf* err) {
  const TtrtField* value = find(node->attributes, node->nb_attributes, "value");
  TtrtTensorDesc scalar;
  TtrtTensorHandle c, y;
  TtrtStatus s;
  (void)self;
  if (net->abi_version != TTRT_CONVERTER_ABI_VERSION || net->size < sizeof(TtrtNetworkBuilder)) {
    return fail(err, TTRT_ERROR_UNSUPPORTED, "unknown network builder version");
  }
  if (value == NULL || value->field_type != TTRT_FIELD_F32 || value->length != 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "attribute `value` (float) is required");
  }
  if (node->nb_inputs != 1 || node->nb_outputs != 1 || node->inputs[0] == TTRT_TENSOR_NONE) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "AddScalar takes one input and one output");
  }
  memset(&scalar, 0, sizeof scalar);
  scalar.dtype = TTRT_DTYPE_F32;
  scalar.format = TTRT_FORMAT_LINEAR;
  scalar.nb_dims = 0;
  s = net->add_constant(net->ctx, &scalar, value->data, sizeof(float), &c, err);
  if (s != TTRT_OK) {
    return s;
  }
  s = net->add_binary(net->ctx, TTRT_BINARY_ADD, node->inputs[0], c, &y, err);
  if (s != TTRT_OK) {
    return s;
  }
  return net->set_output(net->ctx, 0, y, err);
}

/* Variants for the loader's checks: -DCONVERTER_VERSION=99, -DNO_CPU_KERNEL, -DTWICE. */
#ifndef CONVERTER_VERSION
#define CONVERTER_VERSION TTRT_CONVERTER_ABI_VERSION
#endif

static TtrtConverter add_scalar = {CONVERTER_VERSION, 0, NULL, "test_c", "AddScalar", 1, -1,
                                   add_scalar_convert};

static float gain_default_value = 1.0f;
static const TtrtField gain_default = {"gain", TTRT_FIELD_F32, 0, 1, &gain_default_value};
static const TtrtFieldSpec square_attrs[1] = {
    {"gain", TTRT_FIELD_F32, 0, 1, 1, &gain_default, "factor of the square"}};

static float gain_of(const TtrtField* attrs, int32_t nb) {
  const TtrtField* g = find(attrs, nb, "gain");
  return g != NULL && g->length == 1 ? *(const float*)g->data : 1.0f;
}

static TtrtStatus square_dtypes(void* self, const TtrtField* attrs, int32_t nb_attrs,
                                const int32_t* in, int32_t nb_in, int32_t* out, int32_t nb_out,
                                TtrtErrorBuf* err) {
  (void)self;
  (void)attrs;
  (void)nb_attrs;
  if (nb_in != 1 || nb_out != 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "Square takes one input");
  }
  out[0] = in[0];
  return TTRT_OK;
}

static TtrtStatus square_shapes(void* self, const TtrtField* attrs, int32_t nb_attrs,
                                const TtrtShapeExpr* in, int32_t nb_in, TtrtShapeExpr* out,
                                int32_t nb_out, const TtrtExprBuilder* exprs, TtrtErrorBuf* err) {
  (void)self;
  (void)attrs;
  (void)nb_attrs;
  (void)exprs;
  if (nb_in != 1 || nb_out != 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "Square takes one input");
  }
  out[0] = in[0];
  return TTRT_OK;
}

static int32_t square_supports(void* self, int32_t pos, const TtrtPortDesc* io, int32_t nb_io,
                               int32_t nb_inputs, int32_t device) {
  (void)self;
  (void)nb_io;
  (void)nb_inputs;
  return device == TTRT_DEVICE_CPU && io[pos].dtype == TTRT_DTYPE_F32 &&
         io[pos].format == TTRT_FORMAT_LINEAR;
}

static TtrtStatus square_cpu(void* self, const TtrtField* attrs, int32_t nb_attrs,
                             const TtrtLaunch* l, TtrtErrorBuf* err) {
  float gain = gain_of(attrs, nb_attrs);
  const float* x;
  float* y;
  int64_t n = 1, i;
  int32_t d;
  (void)self;
  if (l->device != TTRT_DEVICE_CPU || l->nb_inputs != 1 || l->nb_outputs != 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "Square runs on the CPU with one input");
  }
  for (d = 0; d < l->input_descs[0].nb_dims; ++d) {
    n *= l->input_descs[0].dims[d];
  }
  x = l->inputs[0];
  y = l->outputs[0];
  for (i = 0; i < n; ++i) {
    y[i] = gain * x[i] * x[i];
  }
  return TTRT_OK;
}

static TtrtCustomOp square = {TTRT_CUSTOM_OP_ABI_VERSION,
                              0,
                              NULL,
                              "test_c",
                              "Square",
                              1,
                              1,
                              square_attrs,
                              1,
                              0,
                              square_dtypes,
                              square_shapes,
                              square_supports,
#ifdef NO_CPU_KERNEL
                              NULL,
                              square_cpu};
#else
                              square_cpu,
                              NULL};
#endif

#ifdef TWICE
static const TtrtConverter* const converters[2] = {&add_scalar, &add_scalar};
#define NB_CONVERTERS 2
#else
static const TtrtConverter* const converters[1] = {&add_scalar};
#define NB_CONVERTERS 1
#endif
static const TtrtCustomOp* const custom_ops[1] = {&square};
static const TtrtExtension extension = {
    TTRT_ABI_VERSION, 0, "test_c_ext_ops 1", NULL, NB_CONVERTERS, 0, converters, 1, 0, custom_ops};

const TtrtExtension* torchtrt_extension_v1(void) { return &extension; }
