/* A torchtrt plugin in plain C: y = scale * x + shift, the last axis tiled `repeat` times.
 * Output shape: the input's, last dimension times `repeat` (a symbolic expression).
 * With IN_PLACE defined, the output aliases the input (repeat must be 1) and the kernel
 * reads only the output, which the host fills with the input first. The ABI version the
 * library declares comes from ABI_VERSION. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "torchtrt_plugin.h"

#ifndef ABI_VERSION
#define ABI_VERSION TTRT_ABI_VERSION
#endif

typedef struct ScaleShift {
  TtrtPlugin table;
  float scale;
  float shift;
  int32_t repeat;
  TtrtField fields[3];
} ScaleShift;

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

static TtrtStatus ss_num_outputs(void* self, int32_t* nb, TtrtErrorBuf* err) {
  (void)self;
  (void)err;
  *nb = 1;
  return TTRT_OK;
}

static TtrtStatus ss_output_dtypes(void* self, const int32_t* in, int32_t nb_in, int32_t* out,
                                   int32_t nb_out, TtrtErrorBuf* err) {
  (void)self;
  if (nb_in != 1 || nb_out != 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "ScaleShift takes one input");
  }
  out[0] = in[0];
  return TTRT_OK;
}

static TtrtStatus ss_output_shapes(void* self, const TtrtShapeExpr* in, int32_t nb_in,
                                   TtrtShapeExpr* out, int32_t nb_out, const TtrtExprBuilder* b,
                                   TtrtErrorBuf* err) {
  const ScaleShift* p = self;
  int32_t last;
  TtrtDimHandle times;
  if (nb_in != 1 || nb_out != 1 || in[0].nb_dims < 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "ScaleShift takes one input of rank >= 1");
  }
  last = in[0].nb_dims - 1;
  out[0] = in[0];
  times = b->constant(b->ctx, p->repeat);
  out[0].dims[last] = b->operation(b->ctx, TTRT_DIM_MUL, in[0].dims[last], times);
  if (times == TTRT_DIM_INVALID || out[0].dims[last] == TTRT_DIM_INVALID) {
    return fail(err, TTRT_ERROR_EXECUTION, "the expression builder failed");
  }
  return TTRT_OK;
}

static int32_t ss_supports(void* self, int32_t pos, const TtrtPortDesc* io, int32_t nb_io,
                           int32_t nb_in, int32_t device) {
  (void)self;
  (void)nb_in;
  return device == TTRT_DEVICE_CPU && pos < nb_io && io[pos].dtype == TTRT_DTYPE_F32 &&
         io[pos].format == TTRT_FORMAT_LINEAR;
}

static TtrtStatus ss_enqueue(void* self, const TtrtLaunch* l, TtrtErrorBuf* err) {
  const ScaleShift* p = self;
  const TtrtTensorDesc* d;
  const float* x;
  float* y;
  int64_t outer = 1, inner, o, r, j, i;
  if (l->device != TTRT_DEVICE_CPU) {
    return fail(err, TTRT_ERROR_UNSUPPORTED, "ScaleShift runs on the CPU only");
  }
  if (l->nb_inputs != 1 || l->nb_outputs != 1 || l->input_descs[0].dtype != TTRT_DTYPE_F32 ||
      l->output_descs[0].dtype != TTRT_DTYPE_F32 || l->input_descs[0].nb_dims < 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "ScaleShift takes one f32 input of rank >= 1");
  }
  d = &l->input_descs[0];
  for (i = 0; i + 1 < d->nb_dims; i++) {
    outer *= d->dims[i];
  }
  inner = d->dims[d->nb_dims - 1];
  x = l->inputs[0];
  y = l->outputs[0];
#ifdef IN_PLACE
  x = y; /* the host filled the aliased output with the input; repeat is 1 */
#endif
  for (o = 0; o < outer; o++) {
    for (r = 0; r < p->repeat; r++) {
      for (j = 0; j < inner; j++) {
        y[(o * p->repeat + r) * inner + j] = p->scale * x[o * inner + j] + p->shift;
      }
    }
  }
  return TTRT_OK;
}

static TtrtStatus ss_serialize(void* self, const TtrtField** fields, int32_t* nb,
                               TtrtErrorBuf* err) {
  ScaleShift* p = self;
  const TtrtField scale = {"scale", TTRT_FIELD_F32, 0, 1, &p->scale};
  const TtrtField shift = {"shift", TTRT_FIELD_F32, 0, 1, &p->shift};
  const TtrtField repeat = {"repeat", TTRT_FIELD_I32, 0, 1, &p->repeat};
  (void)err;
  p->fields[0] = scale;
  p->fields[1] = shift;
  p->fields[2] = repeat;
  *fields = p->fields;
  *nb = 3;
  return TTRT_OK;
}

static ScaleShift* ss_new(float scale, float shift, int32_t repeat);

static TtrtStatus ss_clone(void* self, TtrtPlugin** out, TtrtErrorBuf* err) {
  const ScaleShift* p = self;
  ScaleShift* copy = ss_new(p->scale, p->shift, p->repeat);
  if (copy == NULL) {
    return fail(err, TTRT_ERROR_EXECUTION, "out of memory");
  }
  *out = &copy->table;
  return TTRT_OK;
}

static void ss_destroy(void* self) { free(self); }

#ifdef IN_PLACE
static int32_t ss_aliased_input(void* self, int32_t output) {
  (void)self;
  return output == 0 ? 0 : -1;
}
#endif

static ScaleShift* ss_new(float scale, float shift, int32_t repeat) {
  ScaleShift* p = calloc(1, sizeof(ScaleShift));
  if (p == NULL) {
    return NULL;
  }
  p->table.self = p;
  p->table.num_outputs = ss_num_outputs;
  p->table.output_dtypes = ss_output_dtypes;
  p->table.output_shapes = ss_output_shapes;
  p->table.supports = ss_supports;
  p->table.configure = NULL;
  p->table.workspace_size = NULL;
  p->table.enqueue = ss_enqueue;
  p->table.serialize_fields = ss_serialize;
  p->table.clone = ss_clone;
  p->table.destroy = ss_destroy;
#ifdef IN_PLACE
  p->table.aliased_input = ss_aliased_input;
#endif
  p->scale = scale;
  p->shift = shift;
  p->repeat = repeat;
  return p;
}

static int scalar(const TtrtField* f, const char* name, int32_t type) {
  return strcmp(f->name, name) == 0 && f->field_type == type && f->length == 1;
}

static TtrtStatus ss_create(void* self, const char* layer_name, const TtrtField* fields,
                            int32_t nb_fields, TtrtPlugin** out, TtrtErrorBuf* err) {
  float scale = NAN, shift = 0.0f;
  int32_t repeat = 1, i;
  ScaleShift* p;
  (void)self;
  (void)layer_name;
  for (i = 0; i < nb_fields; i++) {
    if (scalar(&fields[i], "scale", TTRT_FIELD_F32)) {
      scale = *(const float*)fields[i].data;
    } else if (scalar(&fields[i], "shift", TTRT_FIELD_F32)) {
      shift = *(const float*)fields[i].data;
    } else if (scalar(&fields[i], "repeat", TTRT_FIELD_I32)) {
      repeat = *(const int32_t*)fields[i].data;
    } else {
      return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "ScaleShift: unexpected field");
    }
  }
  if (!isfinite(scale) || !isfinite(shift)) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "ScaleShift: scale and shift must be finite");
  }
  if (repeat < 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "ScaleShift: repeat must be at least 1");
  }
#ifdef IN_PLACE
  if (repeat != 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "ScaleShift in place: repeat must be 1");
  }
#endif
  p = ss_new(scale, shift, repeat);
  if (p == NULL) {
    return fail(err, TTRT_ERROR_EXECUTION, "out of memory");
  }
  *out = &p->table;
  return TTRT_OK;
}

static const float shift_default = 0.0f;
static const int32_t repeat_default = 1;
static const TtrtField shift_field = {"shift", TTRT_FIELD_F32, 0, 1, &shift_default};
static const TtrtField repeat_field = {"repeat", TTRT_FIELD_I32, 0, 1, &repeat_default};

static const TtrtFieldSpec schema[] = {
    {"scale", TTRT_FIELD_F32, 1, 1, 1, NULL, "multiplier"},
    {"shift", TTRT_FIELD_F32, 0, 1, 1, &shift_field, "added after scaling"},
    {"repeat", TTRT_FIELD_I32, 0, 1, 1, &repeat_field, "times the last axis is tiled"},
};

#ifdef IN_PLACE
#define CAPABILITIES TTRT_CAPABILITY_ALIASED_OUTPUTS
#else
#define CAPABILITIES 0
#endif

static const TtrtCreator creator = {
    NULL, "test_c", "ScaleShift", "1", schema, 3, CAPABILITIES, ss_create,
};

static const TtrtCreator* const creators[] = {&creator};

static const TtrtExtension extension = {
    ABI_VERSION, 1, "scale_shift_c 1.0", creators, 0, 0, NULL, 0, 0, NULL,
};

const TtrtExtension* torchtrt_extension_v1(void) { return &extension; }
