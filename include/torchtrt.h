/*
 * torchtrt.h - the C API of libtorchtrt.so: everything of torchtrt_runtime.h (the same
 * functions, exported by this library too) plus compiling ONNX models into engines. The
 * built-in plugins are baked in; more plugins, converters and custom ops come from
 * extension libraries loaded with ttrt_runtime_load_library before compiling.
 *
 *     TtrtRuntime* rt;  TtrtEngine* engine;  TtrtCompileOptions opts;
 *     ttrt_runtime_create(&rt);
 *     ttrt_compile_options_init(&opts);          // f32, CPU, the model's shapes
 *     if (ttrt_compile_onnx_file(rt, "model.onnx", &opts, &engine) != TTRT_OK)
 *       fprintf(stderr, "%s\n", ttrt_last_error());
 *     ttrt_engine_save(engine, "model.engine");
 */
#ifndef TORCHTRT_H
#define TORCHTRT_H

#include "torchtrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shape range of one model input, replacing the model's (torchtrtc's --input).
 * A dimension with min == opt == max is fixed; others are dynamic. */
typedef struct TtrtInputSpec {
  const char* name; /* the ONNX input's name */
  int32_t nb_dims;  /* 0..TTRT_MAX_DIMS */
  int32_t reserved; /* 0 */
  int64_t min[TTRT_MAX_DIMS];
  int64_t opt[TTRT_MAX_DIMS];
  int64_t max[TTRT_MAX_DIMS];
} TtrtInputSpec;

/* How to compile. Initialise with ttrt_compile_options_init, then change fields. */
typedef struct TtrtCompileOptions {
  int32_t device;               /* TtrtDevice: TTRT_DEVICE_CPU, or TTRT_DEVICE_CUDA (cuda:0;
                                 * TTRT_ERROR_UNSUPPORTED without a GPU) */
  int32_t precision;            /* TtrtDType: TTRT_DTYPE_F32, _F16 or _BF16 */
  const TtrtInputSpec* inputs;  /* nb_inputs input shapes, or NULL */
  int32_t nb_inputs;
  int32_t reserved;             /* 0 */
} TtrtCompileOptions;

/* Loads an extension library with everything it exports: plugin creators, custom
 * converters for the ONNX importer and custom ops (each gives a plugin and a converter).
 * ttrt_runtime_load_library registers plugin creators only, which is what running an
 * engine needs; compiling a model whose ops come from a library needs this function.
 * A nonzero `override_converters` lets the library's converters replace built-in ones.
 * All or nothing: a key or op another library holds refuses the whole library. */
TtrtStatus ttrt_load_extension(TtrtRuntime* runtime, const char* path,
                               int32_t override_converters);

/* Defaults: CPU, f32, the model's own input shapes. */
TtrtStatus ttrt_compile_options_init(TtrtCompileOptions* options);
/* Compiles the ONNX model at `path` (external data next to it). `options` may be NULL. */
TtrtStatus ttrt_compile_onnx_file(TtrtRuntime* runtime, const char* path,
                                  const TtrtCompileOptions* options, TtrtEngine** out);
/* Compiles an ONNX model held in memory (no external data). `options` may be NULL. */
TtrtStatus ttrt_compile_onnx(TtrtRuntime* runtime, const void* data, size_t size,
                             const TtrtCompileOptions* options, TtrtEngine** out);

#ifdef __cplusplus
}
#endif

#endif /* TORCHTRT_H */
