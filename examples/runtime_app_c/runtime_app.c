/* The sample runtime application (case 3 of the plugin RFC): a standalone C program that
 * links only libtorchtrt_runtime.so (the lean build, no plugins inside), loads the plugin
 * libraries an engine needs at run time, runs a serialized engine on a deterministic
 * input and prints every output.
 *
 *   runtime_app MODEL.engine [--allow-engine-host-code] [PLUGIN_LIBRARY.so]...
 *
 * --allow-engine-host-code lets engines that carry kernel plugins' CPU code load it.
 *
 * Dynamic input dimensions take the engine's `opt` values. Input element i is
 * ((i * 7919) % 2001 - 1000) / 1000, so other programs can reproduce it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torchtrt_runtime.h"

#define CHECK(call)                                                              \
  do {                                                                           \
    if ((call) != TTRT_OK) {                                                     \
      fprintf(stderr, "runtime_app: %s\n", ttrt_last_error());                   \
      goto done;                                                                 \
    }                                                                            \
  } while (0)

/* Elements of a tensor of shape `d`; -1 when a dimension is unknown. */
static int64_t numel(const TtrtTensorDesc* d) {
  int64_t n = 1;
  int32_t i;
  for (i = 0; i < d->nb_dims; i++) {
    if (d->dims[i] < 0) {
      return -1;
    }
    n *= d->dims[i];
  }
  return n;
}

static void print_dims(const char* label, const char* name, const TtrtTensorDesc* d) {
  int32_t i;
  printf("%s %s [", label, name);
  for (i = 0; i < d->nb_dims; i++) {
    printf(i ? ",%lld" : "%lld", (long long)d->dims[i]);
  }
  printf("]\n");
}

int main(int argc, char** argv) {
  TtrtRuntime* rt = NULL;
  TtrtEngine* engine = NULL;
  TtrtContext* ctx = NULL;
  TtrtTensor* ins = NULL;
  TtrtTensor* outs = NULL;
  int32_t nb_in = 0, nb_out = 0, i;
  int64_t k;
  int status = 1;
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.engine [--allow-engine-host-code] [PLUGIN_LIBRARY.so]...\n",
            argv[0]);
    return 2;
  }
  printf("%s, built-in plugins: %s\n", ttrt_version(), ttrt_has_builtin_plugins() ? "yes" : "no");
  CHECK(ttrt_runtime_create(&rt));
  for (i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--allow-engine-host-code") == 0) {
      ttrt_allow_engine_host_code(1);
      continue;
    }
    CHECK(ttrt_runtime_load_library(rt, argv[i]));
    printf("loaded %s\n", argv[i]);
  }
  CHECK(ttrt_engine_deserialize_file(rt, argv[1], &engine));
  CHECK(ttrt_context_create(engine, &ctx));
  CHECK(ttrt_engine_num_inputs(engine, &nb_in));
  CHECK(ttrt_engine_num_outputs(engine, &nb_out));
  ins = calloc((size_t)nb_in, sizeof(TtrtTensor));
  outs = calloc((size_t)nb_out, sizeof(TtrtTensor));
  if ((nb_in > 0 && ins == NULL) || (nb_out > 0 && outs == NULL)) {
    fprintf(stderr, "runtime_app: out of memory\n");
    goto done;
  }
  for (i = 0; i < nb_in; i++) {
    TtrtTensorDesc desc, opt;
    float* x;
    CHECK(ttrt_engine_input_name(engine, i, &ins[i].name));
    CHECK(ttrt_engine_input_desc(engine, i, &desc));
    CHECK(ttrt_engine_input_profile(engine, i, NULL, &opt, NULL));
    print_dims("input", ins[i].name, &desc);
    if (desc.dtype != TTRT_DTYPE_F32) {
      fprintf(stderr, "runtime_app: input %s is not f32\n", ins[i].name);
      goto done;
    }
    CHECK(ttrt_context_set_input_shape(ctx, ins[i].name, opt.dims, opt.nb_dims));
    x = malloc((size_t)numel(&opt) * sizeof(float) + 1);
    if (x == NULL) {
      fprintf(stderr, "runtime_app: out of memory\n");
      goto done;
    }
    for (k = 0; k < numel(&opt); k++) {
      x[k] = (float)((k * 7919) % 2001 - 1000) / 1000.0f;
    }
    ins[i].dtype = TTRT_DTYPE_F32;
    ins[i].device = TTRT_DEVICE_CPU;
    ins[i].nb_dims = opt.nb_dims;
    for (k = 0; k < opt.nb_dims; k++) {
      ins[i].dims[k] = opt.dims[k];
    }
    ins[i].data = x;
    ins[i].size = (size_t)numel(&opt) * sizeof(float);
    print_dims("running", ins[i].name, &opt);
  }
  for (i = 0; i < nb_out; i++) {
    TtrtTensorDesc desc;
    CHECK(ttrt_engine_output_name(engine, i, &outs[i].name));
    CHECK(ttrt_context_output_desc(ctx, outs[i].name, &desc));
    if (desc.dtype != TTRT_DTYPE_F32 || numel(&desc) < 0) {
      fprintf(stderr, "runtime_app: output %s is not f32 of a known shape\n", outs[i].name);
      goto done;
    }
    outs[i].dtype = TTRT_DTYPE_F32;
    outs[i].device = TTRT_DEVICE_CPU;
    outs[i].size = (size_t)numel(&desc) * sizeof(float);
    outs[i].data = malloc(outs[i].size + 1);
    if (outs[i].data == NULL) {
      fprintf(stderr, "runtime_app: out of memory\n");
      goto done;
    }
  }
  CHECK(ttrt_context_execute(ctx, ins, nb_in, outs, nb_out, NULL));
  for (i = 0; i < nb_out; i++) {
    TtrtTensorDesc d;
    const float* y = outs[i].data;
    d.nb_dims = outs[i].nb_dims;
    for (k = 0; k < d.nb_dims; k++) {
      d.dims[k] = outs[i].dims[k];
    }
    print_dims("output", outs[i].name, &d);
    for (k = 0; k < numel(&d); k++) {
      printf(k % 8 == 7 ? "%.9g\n" : "%.9g ", y[k]);
    }
    if (numel(&d) % 8 != 0) {
      printf("\n");
    }
  }
  status = 0;
done:
  for (i = 0; ins != NULL && i < nb_in; i++) {
    free(ins[i].data);
  }
  for (i = 0; outs != NULL && i < nb_out; i++) {
    free(outs[i].data);
  }
  free(ins);
  free(outs);
  ttrt_context_destroy(ctx);
  ttrt_engine_destroy(engine);
  ttrt_runtime_destroy(rt);
  return status;
}
