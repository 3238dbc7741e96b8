/* An extension whose tables break the ABI in the way the one defined CASE_* macro says;
 * with none defined it is well-formed. The ABI version comes from ABI_VERSION. */
#include <stddef.h>

#include "torchtrt_plugin.h"

#ifndef ABI_VERSION
#define ABI_VERSION TTRT_ABI_VERSION
#endif

TtrtStatus malformed_create(void* self, const char* layer_name, const TtrtField* fields,
                            int32_t nb_fields, TtrtPlugin** out, TtrtErrorBuf* err);
extern const TtrtCreator malformed_creator;

TtrtStatus malformed_create(void* self, const char* layer_name, const TtrtField* fields,
                            int32_t nb_fields, TtrtPlugin** out, TtrtErrorBuf* err) {
  (void)self;
  (void)layer_name;
  (void)fields;
  (void)nb_fields;
  (void)out;
  (void)err;
  return TTRT_ERROR_EXECUTION;
}

#if defined(CASE_BAD_FIELD_TYPE)
#define FIELD_TYPE 99
#else
#define FIELD_TYPE TTRT_FIELD_I32
#endif

static const TtrtFieldSpec schema[] = {
    {"x", FIELD_TYPE, 1, 1, 1, NULL, "a field"},
};

#if defined(CASE_NULL_NAME)
#define NAME NULL
#else
#define NAME "Malformed"
#endif

#if defined(CASE_NULL_CREATE)
#define CREATE NULL
#else
#define CREATE malformed_create
#endif

const TtrtCreator malformed_creator = {NULL, "test_c", NAME, "1", schema, 1, 0, CREATE};

#if defined(CASE_DUPLICATE_KEY)
static const TtrtCreator* const creators[] = {&malformed_creator, &malformed_creator};
#define NB_CREATORS 2
#elif defined(CASE_NULL_CREATORS)
static const TtrtCreator* const* const creators = NULL;
#define NB_CREATORS 1
#else
static const TtrtCreator* const creators[] = {&malformed_creator};
#define NB_CREATORS 1
#endif

#if defined(CASE_BAD_UTF8)
#define PROVIDER "malformed \xff\xfe"
#else
#define PROVIDER "malformed_c 1.0"
#endif

static const TtrtExtension extension = {
    ABI_VERSION, NB_CREATORS, PROVIDER, creators, 0, 0, NULL, 0, 0, NULL,
};

const TtrtExtension* torchtrt_extension_v1(void) {
#if defined(CASE_NULL_EXTENSION)
  (void)extension;
  return NULL;
#else
  return &extension;
#endif
}
