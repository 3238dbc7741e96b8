/* A C plugin that fails on purpose, where its field `fail_in` says: "create", "enqueue" and
 * "clone" report an error; "dtype" and "shape" hand back values the host must refuse. */
#include <stdlib.h>
#include <string.h>

#include "torchtrt_plugin.h"

typedef struct Failing {
  TtrtPlugin table;
  char mode[16];
  TtrtField field;
} Failing;

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

static int is(const Failing* p, const char* mode) { return strcmp(p->mode, mode) == 0; }

static TtrtStatus f_num_outputs(void* self, int32_t* nb, TtrtErrorBuf* err) {
  (void)self;
  (void)err;
  *nb = 1;
  return TTRT_OK;
}

static TtrtStatus f_output_dtypes(void* self, const int32_t* in, int32_t nb_in, int32_t* out,
                                  int32_t nb_out, TtrtErrorBuf* err) {
  (void)nb_in;
  (void)nb_out;
  (void)err;
  out[0] = is(self, "dtype") ? 99 : in[0];
  return TTRT_OK;
}

static TtrtStatus f_output_shapes(void* self, const TtrtShapeExpr* in, int32_t nb_in,
                                  TtrtShapeExpr* out, int32_t nb_out, const TtrtExprBuilder* b,
                                  TtrtErrorBuf* err) {
  (void)nb_in;
  (void)nb_out;
  (void)b;
  (void)err;
  out[0] = in[0];
  if (is(self, "shape")) {
    out[0].dims[0] = 12345;
  }
  return TTRT_OK;
}

static int32_t f_supports(void* self, int32_t pos, const TtrtPortDesc* io, int32_t nb_io,
                          int32_t nb_in, int32_t device) {
  (void)self;
  (void)pos;
  (void)io;
  (void)nb_io;
  (void)nb_in;
  return device == TTRT_DEVICE_CPU;
}

static TtrtStatus f_enqueue(void* self, const TtrtLaunch* l, TtrtErrorBuf* err) {
  (void)l;
  if (is(self, "enqueue")) {
    return fail(err, TTRT_ERROR_EXECUTION, "Failing: the kernel exploded");
  }
  return TTRT_OK;
}

static TtrtStatus f_serialize(void* self, const TtrtField** fields, int32_t* nb,
                              TtrtErrorBuf* err) {
  Failing* p = self;
  const TtrtField f = {"fail_in", TTRT_FIELD_CHAR, 0, 0, p->mode};
  (void)err;
  p->field = f;
  p->field.length = strlen(p->mode);
  *fields = &p->field;
  *nb = 1;
  return TTRT_OK;
}

static TtrtStatus f_clone(void* self, TtrtPlugin** out, TtrtErrorBuf* err) {
  (void)self;
  (void)out;
  return fail(err, TTRT_ERROR_EXECUTION, "Failing: cannot clone");
}

static void f_destroy(void* self) { free(self); }

static TtrtStatus f_create(void* self, const char* layer_name, const TtrtField* fields,
                           int32_t nb_fields, TtrtPlugin** out, TtrtErrorBuf* err) {
  Failing* p;
  (void)self;
  (void)layer_name;
  if (nb_fields != 1 || fields[0].field_type != TTRT_FIELD_CHAR || fields[0].length >= 16) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "Failing: bad fail_in");
  }
  if (fields[0].length == 6 && memcmp(fields[0].data, "create", 6) == 0) {
    return fail(err, TTRT_ERROR_INVALID_ARGUMENT, "Failing: refused to create");
  }
  p = calloc(1, sizeof(Failing));
  if (p == NULL) {
    return fail(err, TTRT_ERROR_EXECUTION, "out of memory");
  }
  memcpy(p->mode, fields[0].data, fields[0].length);
  p->table.self = p;
  p->table.num_outputs = f_num_outputs;
  p->table.output_dtypes = f_output_dtypes;
  p->table.output_shapes = f_output_shapes;
  p->table.supports = f_supports;
  p->table.enqueue = f_enqueue;
  p->table.serialize_fields = f_serialize;
  p->table.clone = f_clone;
  p->table.destroy = f_destroy;
  *out = &p->table;
  return TTRT_OK;
}

static const TtrtFieldSpec schema[] = {
    {"fail_in", TTRT_FIELD_CHAR, 1, 1, -1, NULL, "where to fail"},
};

static const TtrtCreator creator = {NULL, "test_c", "Failing", "1", schema, 1, 0, f_create};

static const TtrtCreator* const creators[] = {&creator};

static const TtrtExtension extension = {
    TTRT_ABI_VERSION, 1, "failing_c 1.0", creators, 0, 0, NULL, 0, 0, NULL,
};

const TtrtExtension* torchtrt_extension_v1(void) { return &extension; }
