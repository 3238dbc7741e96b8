/* example_c::ScaleBias@1 - a torchtrt plugin in plain C against torchtrt_plugin.h.
 *
 *   y[..., c, ...] = x[..., c, ...] * scale[c] + bias[c]     (c indexes axis `axis`)
 *
 * Fields: `scale` (f32[], required), `bias` (f32[], same length, required), `axis` (i32,
 * default 1). f32 on the CPU; the output has the input's shape and dtype. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torchtrt_plugin.h"

typedef struct ScaleBias {
  TtrtPlugin table; /* handed to the host; `self` points back here */
  int32_t axis;
  int64_t channels;
  float* scale;
  float* bias;
  TtrtField fields[3]; /* what serialize_fields returns */
} ScaleBias;

/* Writes a printf-style message into `err` (when given) and returns `status`. */
static TtrtStatus fail(TtrtErrorBuf* err, TtrtStatus status, const char* fmt, ...) {
  va_list args;
  if (err != NULL && err->data != NULL && err->capacity > 0) {
    va_start(args, fmt);
    vsnprintf(err->data, err->capacity, fmt, args);
    va_end(args);
  }
  return status;
}

static TtrtStatus sb_num_outputs(void* self, int32_t* nb, TtrtErrorBuf* err) {
  (void)self;
  (void)err;
  *nb = 1;
  return TTRT_OK;
}

static TtrtStatus sb_output_dtypes(void* self, const int32_t* in, int32_t nb_in, int32_t* out,
                                   int32_t nb_out, TtrtErrorBuf* err) {
  (void)self;
  if (nb_in != 1 || nb_out != 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT,
                "ScaleBias takes 1 input and 1 output, got %d and %d", (int)nb_in, (int)nb_out);
  }
  out[0] = in[0];
  return TTRT_OK;
}

/* The axis in [0, rank), or -1 when it is out of range. */
static int32_t sb_axis(const ScaleBias* p, int32_t rank) {
  int32_t a = p->axis < 0 ? p->axis + rank : p->axis;
  return a >= 0 && a < rank ? a : -1;
}

static TtrtStatus sb_output_shapes(void* self, const TtrtShapeExpr* in, int32_t nb_in,
                                   TtrtShapeExpr* out, int32_t nb_out, const TtrtExprBuilder* b,
                                   TtrtErrorBuf* err) {
  const ScaleBias* p = self;
  int64_t c;
  int32_t axis;
  if (nb_in != 1 || nb_out != 1) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT,
                "ScaleBias takes 1 input and 1 output, got %d and %d", (int)nb_in, (int)nb_out);
  }
  axis = sb_axis(p, in[0].nb_dims);
  if (axis < 0) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "ScaleBias: axis %d is out of range for rank %d",
                (int)p->axis, (int)in[0].nb_dims);
  }
  if (b->constant_value(b->ctx, in[0].dims[axis], &c) && c != p->channels) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT,
                "ScaleBias: the input has %lld channels, scale and bias have %lld", (long long)c,
                (long long)p->channels);
  }
  out[0] = in[0];
  return TTRT_OK;
}

static int32_t sb_supports(void* self, int32_t pos, const TtrtPortDesc* io, int32_t nb_io,
                           int32_t nb_in, int32_t device) {
  (void)self;
  (void)nb_in;
  return device == TTRT_DEVICE_CPU && pos < nb_io && io[pos].dtype == TTRT_DTYPE_F32 &&
         io[pos].format == TTRT_FORMAT_LINEAR;
}

static TtrtStatus sb_enqueue(void* self, const TtrtLaunch* l, TtrtErrorBuf* err) {
  const ScaleBias* p = self;
  const TtrtTensorDesc* d = &l->input_descs[0];
  const float* x = l->inputs[0];
  float* y = l->outputs[0];
  int64_t outer = 1, inner = 1, o, c, i;
  int32_t axis, k;
  if (l->device != TTRT_DEVICE_CPU || d->dtype != TTRT_DTYPE_F32) {
    return fail(err, TTRT_ERROR_UNSUPPORTED,
                "ScaleBias runs f32 on the CPU (got device %d, dtype %d)", (int)l->device,
                (int)d->dtype);
  }
  axis = sb_axis(p, d->nb_dims);
  if (axis < 0 || d->dims[axis] != p->channels) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT,
                "ScaleBias: axis %d of the input does not have %lld channels", (int)p->axis,
                (long long)p->channels);
  }
  for (k = 0; k < axis; k++) {
    outer *= d->dims[k];
  }
  for (k = axis + 1; k < d->nb_dims; k++) {
    inner *= d->dims[k];
  }
  for (o = 0; o < outer; o++) {
    for (c = 0; c < p->channels; c++) {
      const float* xs = x + (o * p->channels + c) * inner;
      float* ys = y + (o * p->channels + c) * inner;
      for (i = 0; i < inner; i++) {
        ys[i] = xs[i] * p->scale[c] + p->bias[c];
      }
    }
  }
  return TTRT_OK;
}

static TtrtStatus sb_serialize(void* self, const TtrtField** fields, int32_t* nb,
                               TtrtErrorBuf* err) {
  ScaleBias* p = self;
  const TtrtField scale = {"scale", TTRT_FIELD_F32, 0, (size_t)p->channels, p->scale};
  const TtrtField bias = {"bias", TTRT_FIELD_F32, 0, (size_t)p->channels, p->bias};
  const TtrtField axis = {"axis", TTRT_FIELD_I32, 0, 1, &p->axis};
  (void)err;
  p->fields[0] = scale;
  p->fields[1] = bias;
  p->fields[2] = axis;
  *fields = p->fields;
  *nb = 3;
  return TTRT_OK;
}

static void sb_destroy(void* self) {
  ScaleBias* p = self;
  free(p->scale);
  free(p->bias);
  free(p);
}

static ScaleBias* sb_new(const float* scale, const float* bias, int64_t channels, int32_t axis);

static TtrtStatus sb_clone(void* self, TtrtPlugin** out, TtrtErrorBuf* err) {
  const ScaleBias* p = self;
  ScaleBias* copy = sb_new(p->scale, p->bias, p->channels, p->axis);
  if (copy == NULL) {
    return fail(err, TTRT_ERROR_EXECUTION, "ScaleBias: out of memory (%lld channels)",
                (long long)p->channels);
  }
  *out = &copy->table;
  return TTRT_OK;
}

static ScaleBias* sb_new(const float* scale, const float* bias, int64_t channels, int32_t axis) {
  size_t bytes = (size_t)channels * sizeof(float);
  ScaleBias* p = calloc(1, sizeof(ScaleBias));
  if (p == NULL) {
    return NULL;
  }
  p->scale = malloc(bytes > 0 ? bytes : 1);
  p->bias = malloc(bytes > 0 ? bytes : 1);
  if (p->scale == NULL || p->bias == NULL) {
    sb_destroy(p);
    return NULL;
  }
  memcpy(p->scale, scale, bytes);
  memcpy(p->bias, bias, bytes);
  p->channels = channels;
  p->axis = axis;
  p->table.self = p;
  p->table.num_outputs = sb_num_outputs;
  p->table.output_dtypes = sb_output_dtypes;
  p->table.output_shapes = sb_output_shapes;
  p->table.supports = sb_supports;
  p->table.configure = NULL;
  p->table.workspace_size = NULL;
  p->table.enqueue = sb_enqueue;
  p->table.serialize_fields = sb_serialize;
  p->table.clone = sb_clone;
  p->table.destroy = sb_destroy;
  return p;
}

static TtrtStatus sb_create(void* self, const char* layer_name, const TtrtField* fields,
                            int32_t nb_fields, TtrtPlugin** out, TtrtErrorBuf* err) {
  const TtrtField* scale = NULL;
  const TtrtField* bias = NULL;
  int32_t axis = 1, i;
  size_t c;
  ScaleBias* p;
  (void)self;
  (void)layer_name;
  for (i = 0; i < nb_fields; i++) {
    if (strcmp(fields[i].name, "scale") == 0) {
      scale = &fields[i];
    } else if (strcmp(fields[i].name, "bias") == 0) {
      bias = &fields[i];
    } else if (strcmp(fields[i].name, "axis") == 0) {
      axis = *(const int32_t*)fields[i].data;
    }
  }
  if (scale == NULL || bias == NULL || scale->length != bias->length || scale->length == 0) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT,
                "ScaleBias: `scale` and `bias` need the same nonzero length");
  }
  for (c = 0; c < scale->length; c++) {
    float s = ((const float*)scale->data)[c], b = ((const float*)bias->data)[c];
    if (!isfinite(s) || !isfinite(b)) {
      return fail(err, TTRT_ERROR_INVALID_ARGUMENT,
                  "ScaleBias: scale and bias must be finite (channel %zu)", c);
    }
  }
  p = sb_new(scale->data, bias->data, (int64_t)scale->length, axis);
  if (p == NULL) {
    return fail(err, TTRT_ERROR_EXECUTION, "ScaleBias: out of memory (%zu channels)",
                scale->length);
  }
  *out = &p->table;
  return TTRT_OK;
}

static const int32_t axis_default = 1;
static const TtrtField axis_field = {"axis", TTRT_FIELD_I32, 0, 1, &axis_default};

static const TtrtFieldSpec schema[] = {
    {"scale", TTRT_FIELD_F32, 1, 1, -1, NULL, "per-channel multiplier"},
    {"bias", TTRT_FIELD_F32, 1, 1, -1, NULL, "per-channel offset, added after scaling"},
    {"axis", TTRT_FIELD_I32, 0, 1, 1, &axis_field,
     "the channel axis; negative counts from the end"},
};

static const TtrtCreator creator = {
    NULL, "example_c", "ScaleBias", "1", schema, 3, 0, sb_create,
};

static const TtrtCreator* const creators[] = {&creator};

static const TtrtExtension extension = {
    TTRT_ABI_VERSION, 1, "torchtrt_example_plugin_c 0.1.0", creators, 0, 0, NULL, 0, 0, NULL,
};

const TtrtExtension* torchtrt_extension_v1(void) { return &extension; }
