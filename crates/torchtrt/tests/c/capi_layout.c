/* Prints the size, alignment and member offsets of the structures of torchtrt.h and
 * torchtrt_runtime.h and the value of their constants, one "name value" pair per line,
 * for tests/c_api_header.rs. Taking every function's address with its declared type makes
 * the link fail if libtorchtrt.so lacks one. */
#include <stdio.h>

#include "torchtrt.h"

#define SIZE(T) printf(#T " %zu\n" #T ".align %zu\n", sizeof(T), _Alignof(T))
#define OFF(T, m) printf(#T "." #m " %zu\n", offsetof(T, m))
#define CONST(c) printf(#c " %lld\n", (long long)(c))
#define FN(f) (void)(f)

int main(void) {
  const char* (*version)(void) = ttrt_version;
  uint32_t (*api_version)(void) = ttrt_runtime_api_version;
  int32_t (*builtin)(void) = ttrt_has_builtin_plugins;
  const char* (*last_error)(void) = ttrt_last_error;
  TtrtStatus (*runtime_create)(TtrtRuntime**) = ttrt_runtime_create;
  void (*runtime_destroy)(TtrtRuntime*) = ttrt_runtime_destroy;
  TtrtStatus (*load)(TtrtRuntime*, const char*) = ttrt_runtime_load_library;
  TtrtStatus (*has)(const TtrtRuntime*, const char*, const char*, const char*, int32_t*) =
      ttrt_runtime_has_plugin;
  TtrtStatus (*deser)(TtrtRuntime*, const void*, size_t, TtrtEngine**) = ttrt_engine_deserialize;
  TtrtStatus (*deser_file)(TtrtRuntime*, const char*, TtrtEngine**) = ttrt_engine_deserialize_file;
  void (*engine_destroy)(TtrtEngine*) = ttrt_engine_destroy;
  TtrtStatus (*ser)(const TtrtEngine*, void**, size_t*) = ttrt_engine_serialize;
  TtrtStatus (*save)(const TtrtEngine*, const char*) = ttrt_engine_save;
  void (*bytes_free)(void*, size_t) = ttrt_bytes_free;
  TtrtStatus (*count[2])(const TtrtEngine*, int32_t*) = {ttrt_engine_num_inputs,
                                                         ttrt_engine_num_outputs};
  TtrtStatus (*names[2])(const TtrtEngine*, int32_t, const char**) = {ttrt_engine_input_name,
                                                                      ttrt_engine_output_name};
  TtrtStatus (*index[2])(const TtrtEngine*, const char*, int32_t*) = {ttrt_engine_input_index,
                                                                      ttrt_engine_output_index};
  TtrtStatus (*descs[2])(const TtrtEngine*, int32_t, TtrtTensorDesc*) = {
      ttrt_engine_input_desc, ttrt_engine_output_desc};
  TtrtStatus (*profile)(const TtrtEngine*, int32_t, TtrtTensorDesc*, TtrtTensorDesc*,
                        TtrtTensorDesc*) = ttrt_engine_input_profile;
  TtrtStatus (*ctx_create)(const TtrtEngine*, TtrtContext**) = ttrt_context_create;
  void (*ctx_destroy)(TtrtContext*) = ttrt_context_destroy;
  TtrtStatus (*set_shape)(TtrtContext*, const char*, const int64_t*, int32_t) =
      ttrt_context_set_input_shape;
  TtrtStatus (*out_desc)(const TtrtContext*, const char*, TtrtTensorDesc*) =
      ttrt_context_output_desc;
  TtrtStatus (*execute)(TtrtContext*, const TtrtTensor*, int32_t, TtrtTensor*, int32_t, void*) =
      ttrt_context_execute;
  TtrtStatus (*load_extension)(TtrtRuntime*, const char*, int32_t) = ttrt_load_extension;
  TtrtStatus (*options_init)(TtrtCompileOptions*) = ttrt_compile_options_init;
  TtrtStatus (*compile_file)(TtrtRuntime*, const char*, const TtrtCompileOptions*,
                             TtrtEngine**) = ttrt_compile_onnx_file;
  TtrtStatus (*compile)(TtrtRuntime*, const void*, size_t, const TtrtCompileOptions*,
                        TtrtEngine**) = ttrt_compile_onnx;
  FN(version);
  FN(api_version);
  FN(builtin);
  FN(last_error);
  FN(runtime_create);
  FN(runtime_destroy);
  FN(load);
  FN(has);
  FN(deser);
  FN(deser_file);
  FN(engine_destroy);
  FN(ser);
  FN(save);
  FN(bytes_free);
  FN(count);
  FN(names);
  FN(index);
  FN(descs);
  FN(profile);
  FN(ctx_create);
  FN(ctx_destroy);
  FN(set_shape);
  FN(out_desc);
  FN(execute);
  FN(load_extension);
  FN(options_init);
  FN(compile_file);
  FN(compile);

  SIZE(TtrtTensor);
  OFF(TtrtTensor, name);
  OFF(TtrtTensor, index);
  OFF(TtrtTensor, dtype);
  OFF(TtrtTensor, device);
  OFF(TtrtTensor, device_ordinal);
  OFF(TtrtTensor, nb_dims);
  OFF(TtrtTensor, reserved);
  OFF(TtrtTensor, dims);
  OFF(TtrtTensor, data);
  OFF(TtrtTensor, size);

  SIZE(TtrtInputSpec);
  OFF(TtrtInputSpec, name);
  OFF(TtrtInputSpec, nb_dims);
  OFF(TtrtInputSpec, reserved);
  OFF(TtrtInputSpec, min);
  OFF(TtrtInputSpec, opt);
  OFF(TtrtInputSpec, max);

  SIZE(TtrtCompileOptions);
  OFF(TtrtCompileOptions, device);
  OFF(TtrtCompileOptions, precision);
  OFF(TtrtCompileOptions, inputs);
  OFF(TtrtCompileOptions, nb_inputs);
  OFF(TtrtCompileOptions, reserved);

  CONST(TTRT_RUNTIME_API_VERSION);
  CONST(TTRT_ERROR_INVALID_ENGINE);
  CONST(TTRT_ERROR_PLUGIN_NOT_FOUND);
  CONST(TTRT_ERROR_LIBRARY);
  CONST(TTRT_ERROR_IO);
  CONST(TTRT_ERROR_BUFFER_TOO_SMALL);
  CONST(TTRT_ERROR_MODEL);
  printf("api_version() %u\n", ttrt_runtime_api_version());
  return 0;
}
