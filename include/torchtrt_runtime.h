/*
 * torchtrt_runtime.h - the C API of libtorchtrt_runtime.so: deserialize torchtrt engines
 * and run them. No compiler; see torchtrt.h for the library that also compiles.
 *
 * Builds. The default libtorchtrt_runtime.so has the built-in plugins (Interpolate,
 * NormalizePlugin, InstanceNormalization_TRT, CustomGeluPluginDynamic) baked in. The lean
 * build (cargo's --no-default-features) has none: load libtorchtrt_plugins.so, or any
 * other extension library, with ttrt_runtime_load_library before deserializing an engine
 * that uses plugins. ttrt_has_builtin_plugins() says which build is loaded.
 *
 * Errors. Every fallible function returns a TtrtStatus (TTRT_OK = 0, the codes of
 * torchtrt_plugin.h and those below). On failure the calling thread's last error, read
 * with ttrt_last_error(), says what failed and where. Successful calls leave it alone.
 * No panic crosses this API: one is caught and reported as TTRT_ERROR_PANIC.
 *
 * Handles. TtrtRuntime, TtrtEngine and TtrtContext are opaque; each create function has a
 * destroy function, which accepts NULL. A context keeps its engine alive, so an engine may
 * be destroyed before its contexts. An engine may be shared by threads; a context is used
 * by one thread at a time.
 *
 * Strings returned by the API (names, versions) belong to the library: those of an engine
 * stay valid until the engine is destroyed, the others for the life of the process.
 *
 * Devices. Tensors carry a TtrtDevice. Only TTRT_DEVICE_CPU (host memory) is accepted in
 * this version; TTRT_DEVICE_CUDA and a non-NULL stream return TTRT_ERROR_UNSUPPORTED.
 */
#ifndef TORCHTRT_RUNTIME_H
#define TORCHTRT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "torchtrt_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this API (ttrt_runtime_api_version()). */
#define TTRT_RUNTIME_API_VERSION 1u

/* Status codes of the runtime API, after the plugin ABI's (0..15 belong to it). */
#define TTRT_ERROR_INVALID_ENGINE 16   /* truncated, corrupted, other version or target */
#define TTRT_ERROR_PLUGIN_NOT_FOUND 17 /* an engine's plugin has no creator registered */
#define TTRT_ERROR_LIBRARY 18          /* an extension library failed to load */
#define TTRT_ERROR_IO 19               /* a file could not be read or written */
#define TTRT_ERROR_BUFFER_TOO_SMALL 20 /* an output buffer is smaller than the output */
#define TTRT_ERROR_MODEL 21            /* a model could not be imported (torchtrt.h) */

typedef struct TtrtRuntime TtrtRuntime;
typedef struct TtrtEngine TtrtEngine;
typedef struct TtrtContext TtrtContext;

/* One input or output of an execution. `name` selects the engine's tensor; when it is
 * NULL, `index` does (inputs and outputs are numbered separately, from 0). */
typedef struct TtrtTensor {
  const char* name;       /* NUL-terminated UTF-8, or NULL */
  int32_t index;          /* used when name is NULL */
  int32_t dtype;          /* TtrtDType; must be the engine's */
  int32_t device;         /* TtrtDevice: TTRT_DEVICE_CPU, or TTRT_DEVICE_CUDA for a CUDA engine */
  int32_t device_ordinal; /* 0 on the CPU; the engine's GPU for TTRT_DEVICE_CUDA */
  int32_t nb_dims;        /* inputs: the rank; outputs: written by ttrt_context_execute */
  int32_t reserved;       /* 0 */
  int64_t dims[TTRT_MAX_DIMS]; /* inputs: the shape; outputs: written */
  void* data;             /* inputs: read (dense, row-major); outputs: written; a device
                           * address (CUdeviceptr) for TTRT_DEVICE_CUDA */
  size_t size;            /* bytes at `data`; inputs: exactly the tensor's size */
} TtrtTensor;

/* Library identity, e.g. "torchtrt-runtime 0.1.0". */
const char* ttrt_version(void);
/* TTRT_RUNTIME_API_VERSION of the loaded library. */
uint32_t ttrt_runtime_api_version(void);
/* 1 when the built-in plugins are baked in, 0 for the lean build. */
int32_t ttrt_has_builtin_plugins(void);
/* Allows (nonzero) or forbids (0, the default) loading engines that carry native CPU code of
 * kernel plugins, for the whole process. Loading such an engine runs that code: allow it only
 * for engines you trust as you would a plugin library. */
void ttrt_allow_engine_host_code(int32_t allowed);
/* The message of the calling thread's last failed call ("" if none). Valid until the next
 * failing call on this thread. */
const char* ttrt_last_error(void);

/* A runtime over the CPU backend; registers the built-in plugins when baked in. */
TtrtStatus ttrt_runtime_create(TtrtRuntime** out);
void ttrt_runtime_destroy(TtrtRuntime* runtime);
/* Loads an extension library (plugin creators) into the process-wide plugin registry. */
TtrtStatus ttrt_runtime_load_library(TtrtRuntime* runtime, const char* path);
/* *found = 1 when a creator for (plugin_namespace, name, version) is registered, else 0. */
TtrtStatus ttrt_runtime_has_plugin(const TtrtRuntime* runtime, const char* plugin_namespace,
                                   const char* name, const char* version, int32_t* found);

/* Reads an engine from `size` bytes at `data`. */
TtrtStatus ttrt_engine_deserialize(TtrtRuntime* runtime, const void* data, size_t size,
                                   TtrtEngine** out);
/* Reads an engine from a file. */
TtrtStatus ttrt_engine_deserialize_file(TtrtRuntime* runtime, const char* path,
                                        TtrtEngine** out);
void ttrt_engine_destroy(TtrtEngine* engine);
/* Serializes an engine into a new buffer, freed with ttrt_bytes_free(*data, *size). */
TtrtStatus ttrt_engine_serialize(const TtrtEngine* engine, void** data, size_t* size);
/* Writes the serialized engine to a file. */
TtrtStatus ttrt_engine_save(const TtrtEngine* engine, const char* path);
/* Frees a buffer returned by this library; NULL is ignored. */
void ttrt_bytes_free(void* data, size_t size);

TtrtStatus ttrt_engine_num_inputs(const TtrtEngine* engine, int32_t* count);
TtrtStatus ttrt_engine_num_outputs(const TtrtEngine* engine, int32_t* count);
/* The name of input / output `index`; owned by the engine. */
TtrtStatus ttrt_engine_input_name(const TtrtEngine* engine, int32_t index, const char** name);
TtrtStatus ttrt_engine_output_name(const TtrtEngine* engine, int32_t index, const char** name);
/* The index of the input / output called `name`. */
TtrtStatus ttrt_engine_input_index(const TtrtEngine* engine, const char* name, int32_t* index);
TtrtStatus ttrt_engine_output_index(const TtrtEngine* engine, const char* name, int32_t* index);
/* dtype, rank and dims of input / output `index`; -1 for a dimension known only at run
 * time. */
TtrtStatus ttrt_engine_input_desc(const TtrtEngine* engine, int32_t index, TtrtTensorDesc* desc);
TtrtStatus ttrt_engine_output_desc(const TtrtEngine* engine, int32_t index,
                                   TtrtTensorDesc* desc);
/* The shape range input `index` accepts (and the one the engine was tuned for); any of
 * the three may be NULL. */
TtrtStatus ttrt_engine_input_profile(const TtrtEngine* engine, int32_t index,
                                     TtrtTensorDesc* min, TtrtTensorDesc* opt,
                                     TtrtTensorDesc* max);

/* A context with its own activation memory. */
TtrtStatus ttrt_context_create(const TtrtEngine* engine, TtrtContext** out);
void ttrt_context_destroy(TtrtContext* context);
/* Fixes the shape of input `name` for ttrt_context_output_desc; checked against the
 * engine's range. ttrt_context_execute sets it from its inputs too. */
TtrtStatus ttrt_context_set_input_shape(TtrtContext* context, const char* name,
                                        const int64_t* dims, int32_t nb_dims);
/* The shape of output `name` given the input shapes set so far (or those of the last
 * execution); -1 where it is not known yet (an input shape not set, or a shape that
 * depends on values). */
TtrtStatus ttrt_context_output_desc(const TtrtContext* context, const char* name,
                                    TtrtTensorDesc* desc);
/* Runs the engine and waits for it. Every input is given once; each output given is
 * written with its shape in `nb_dims`/`dims`, and outputs not given are discarded. If an
 * output buffer is too small, the shapes are still written and
 * TTRT_ERROR_BUFFER_TOO_SMALL returned. Host buffers (TTRT_DEVICE_CPU) work for every
 * engine, with `stream` NULL; a CUDA engine copies them to and from its device. A CUDA
 * engine also takes device buffers (TTRT_DEVICE_CUDA, every input and output given) with
 * `stream` a CUstream of the device's primary context or NULL (the legacy default stream):
 * as ttrt_context_enqueue, then waits for the stream. */
TtrtStatus ttrt_context_execute(TtrtContext* context, const TtrtTensor* inputs,
                                int32_t nb_inputs, TtrtTensor* outputs, int32_t nb_outputs,
                                void* stream);
/* Queues a CUDA engine on `stream` (a CUstream of the device's primary context, or NULL
 * for the legacy default stream) over device buffers, and returns (TensorRT's enqueueV3):
 * every input and output is given, in the memory of the engine's device
 * (TTRT_DEVICE_CUDA, its ordinal), valid until the queued work completes; outputs get
 * their shapes written first (ttrt_context_output_desc tells them in advance). Nothing
 * waits for the device, except a layer that runs on the host (see `torchtrtc inspect`) or
 * a shape that depends on a device tensor's values. TTRT_ERROR_UNSUPPORTED for a CPU
 * engine. */
TtrtStatus ttrt_context_enqueue(TtrtContext* context, const TtrtTensor* inputs,
                                int32_t nb_inputs, TtrtTensor* outputs, int32_t nb_outputs,
                                void* stream);

#ifdef __cplusplus
}
#endif

#endif /* TORCHTRT_RUNTIME_H */
