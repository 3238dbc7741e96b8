/* Bad input through the lean libtorchtrt_runtime.so, from C: every call returns the
 * expected status and its last error names the problem.
 *
 *   runtime_errors MODEL.engine libtorchtrt_plugins.so
 *
 * Prints one line per failed expectation and exits 1 if any failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torchtrt_runtime.h"

static int failures = 0;

static void expect(int line, TtrtStatus got, TtrtStatus want, const char* part) {
  const char* msg = ttrt_last_error();
  if (got != want || strstr(msg, part) == NULL) {
    printf("line %d: status %d (want %d), message \"%s\" (want \"%s\" in it)\n", line, (int)got,
           (int)want, msg, part);
    failures++;
  }
}

#define EXPECT(call, want, part) expect(__LINE__, (call), (want), (part))

static unsigned char* read_file(const char* path, size_t* size) {
  unsigned char* data;
  long n;
  FILE* f = fopen(path, "rb");
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    return NULL;
  }
  data = malloc((size_t)n + 1);
  if (data != NULL && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

int main(int argc, char** argv) {
  TtrtRuntime* rt = NULL;
  TtrtEngine* engine = NULL;
  TtrtContext* ctx = NULL;
  TtrtTensor in, out;
  float x[150], y[600];
  int32_t n = 0;
  size_t size = 0;
  unsigned char* bytes;
  if (argc != 3 || (bytes = read_file(argv[1], &size)) == NULL) {
    fprintf(stderr, "usage: %s MODEL.engine libtorchtrt_plugins.so\n", argv[0]);
    return 2;
  }
  if (ttrt_has_builtin_plugins() != 0) {
    printf("the runtime has built-in plugins; this test needs the lean build\n");
    return 1;
  }
  EXPECT(ttrt_runtime_create(NULL), TTRT_ERROR_INVALID_ARGUMENT, "`out` is NULL");
  EXPECT(ttrt_runtime_create(&rt), TTRT_OK, "`out` is NULL");
  EXPECT(ttrt_runtime_load_library(rt, "/nonexistent/libnothing.so"), TTRT_ERROR_LIBRARY,
         "/nonexistent/libnothing.so");
  EXPECT(ttrt_runtime_load_library(rt, argv[1]), TTRT_ERROR_LIBRARY, argv[1]);
  EXPECT(ttrt_engine_deserialize(rt, bytes, size / 2, &engine), TTRT_ERROR_INVALID_ENGINE,
         "invalid engine");
  EXPECT(ttrt_engine_deserialize(rt, bytes, size, &engine), TTRT_ERROR_PLUGIN_NOT_FOUND,
         "is not registered");
  EXPECT(ttrt_engine_num_inputs(NULL, &n), TTRT_ERROR_INVALID_ARGUMENT, "`engine` is NULL");
  EXPECT(ttrt_context_execute(NULL, NULL, 0, NULL, 0, NULL), TTRT_ERROR_INVALID_ARGUMENT,
         "`context` is NULL");
  EXPECT(ttrt_runtime_load_library(rt, argv[2]), TTRT_OK, "");
  EXPECT(ttrt_engine_deserialize(rt, bytes, size, &engine), TTRT_OK, "");
  if (engine != NULL) {
    EXPECT(ttrt_context_create(engine, &ctx), TTRT_OK, "");
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    memset(x, 0, sizeof x);
    in.name = "image";
    in.dtype = TTRT_DTYPE_F32;
    in.device = TTRT_DEVICE_CPU;
    in.nb_dims = 4;
    in.dims[0] = 2;
    in.dims[1] = 3;
    in.dims[2] = 5;
    in.dims[3] = 5;
    in.data = x;
    in.size = sizeof x - 4;
    out.name = "y";
    out.dtype = TTRT_DTYPE_F32;
    out.data = y;
    out.size = sizeof y;
    EXPECT(ttrt_context_execute(ctx, &in, 1, &out, 1, NULL), TTRT_ERROR_INVALID_ARGUMENT,
           "input `image`: the buffer has 596 bytes");
    in.size = sizeof x;
    in.name = "picture";
    EXPECT(ttrt_context_execute(ctx, &in, 1, &out, 1, NULL), TTRT_ERROR_INVALID_ARGUMENT,
           "no input `picture`");
    in.name = "image";
    in.device = TTRT_DEVICE_CUDA;
    EXPECT(ttrt_context_execute(ctx, &in, 1, &out, 1, NULL), TTRT_ERROR_UNSUPPORTED, "CUDA");
    in.device = TTRT_DEVICE_CPU;
    EXPECT(ttrt_context_execute(ctx, &in, 1, &out, 1, NULL), TTRT_OK, "");
    if (out.nb_dims != 4 || out.dims[0] != 2 || out.dims[3] != 10) {
      printf("output shape not written\n");
      failures++;
    }
  }
  ttrt_context_destroy(ctx);
  ttrt_engine_destroy(engine);
  ttrt_runtime_destroy(rt);
  free(bytes);
  if (failures == 0) {
    printf("all checks passed\n");
  }
  return failures == 0 ? 0 : 1;
}
