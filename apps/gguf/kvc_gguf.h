/**
 * @file kvc_gguf.h
 * @brief GGUF (v2/v3) reader: header, metadata key-values (every scalar type,
 *        strings, arrays), tensor infos, alignment, data offset, and
 *        dequantisation of F32, F16, Q8_0, Q4_0 and Q4_1 tensors.
 *
 * The file is parsed from memory and treated as hostile: every length, count,
 * offset and size product is checked before use; a malformed file gets
 * KVC_E_FORMAT and a one-line message, never a crash or an over-read. The
 * parsed object keeps offsets into the caller's buffer (which must outlive it)
 * and owns only its index arrays.
 */
#ifndef KVC_GGUF_H
#define KVC_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Metadata value types (the GGUF numbering). */
typedef enum kvc_gguf_type {
    KVC_GGUF_U8 = 0,
    KVC_GGUF_I8 = 1,
    KVC_GGUF_U16 = 2,
    KVC_GGUF_I16 = 3,
    KVC_GGUF_U32 = 4,
    KVC_GGUF_I32 = 5,
    KVC_GGUF_F32 = 6,
    KVC_GGUF_BOOL = 7,
    KVC_GGUF_STRING = 8,
    KVC_GGUF_ARRAY = 9,
    KVC_GGUF_U64 = 10,
    KVC_GGUF_I64 = 11,
    KVC_GGUF_F64 = 12
} kvc_gguf_type;

/** Tensor storage types this reader dequantises (the ggml numbering). */
enum { KVC_GGML_F32 = 0, KVC_GGML_F16 = 1, KVC_GGML_Q4_0 = 2, KVC_GGML_Q4_1 = 3, KVC_GGML_Q8_0 = 8 };

/** One metadata entry: offsets into the file buffer. */
typedef struct kvc_gguf_kv {
    size_t key_off, key_len;
    uint32_t type;      /**< kvc_gguf_type */
    uint32_t elem_type; /**< arrays: element type */
    uint64_t count;     /**< arrays: element count; 1 otherwise */
    size_t value_off;   /**< scalar value / string length prefix / first array element */
} kvc_gguf_kv;

/** One tensor: its name, shape (ggml order: dims[0] is the contiguous one), type and data. */
typedef struct kvc_gguf_tensor {
    size_t name_off, name_len;
    uint32_t n_dims;
    uint64_t dims[4];
    uint32_t type;
    uint64_t n_elems;
    size_t data_off; /**< absolute offset in the buffer */
    size_t data_bytes;
} kvc_gguf_tensor;

/** A parsed file. */
typedef struct kvc_gguf {
    const uint8_t *buf;
    size_t len;
    uint32_t version;
    uint64_t n_kv, n_tensors;
    kvc_gguf_kv *kv;          /**< owned */
    kvc_gguf_tensor *tensors; /**< owned */
    uint32_t alignment;
    size_t data_start;
} kvc_gguf;

/**
 * @brief Parse a GGUF file held in @p buf (not copied; it must outlive @p g).
 * @return KVC_OK; KVC_E_FORMAT with a message in @p err; KVC_E_ARG; KVC_E_CAPACITY (allocation).
 */
kvc_status kvc_gguf_parse(const uint8_t *buf, size_t len, kvc_gguf *g, char *err, size_t errlen);
void kvc_gguf_free(kvc_gguf *g);

/** @brief The entry named @p key, or NULL. */
const kvc_gguf_kv *kvc_gguf_find(const kvc_gguf *g, const char *key);
/** @brief An unsigned/signed integer entry (any integer type, range-checked) as uint64. */
kvc_status kvc_gguf_get_uint(const kvc_gguf *g, const char *key, uint64_t *out);
/** @brief A float entry (F32 or F64) as double. */
kvc_status kvc_gguf_get_float(const kvc_gguf *g, const char *key, double *out);
/** @brief A string entry: pointer into the buffer (not NUL-terminated) and length. */
kvc_status kvc_gguf_get_string(const kvc_gguf *g, const char *key, const char **s, size_t *len);
/**
 * @brief Every element of a string array in one pass: offsets into the buffer
 *        and lengths, @p kv->count entries each (caller arrays).
 * @return KVC_OK, or KVC_E_ARG when @p kv is not an array of strings.
 */
kvc_status kvc_gguf_array_strings(const kvc_gguf *g, const kvc_gguf_kv *kv, size_t *offs, size_t *lens);
/** @brief The tensor named @p name, or NULL. */
const kvc_gguf_tensor *kvc_gguf_tensor_find(const kvc_gguf *g, const char *name);

/**
 * @brief Dequantise a whole tensor into @p out (n_elems floats).
 * @return KVC_OK, or KVC_E_UNSUPPORTED for another storage type.
 */
kvc_status kvc_gguf_dequantize(const kvc_gguf *g, const kvc_gguf_tensor *t, float *out);

#ifdef __cplusplus
}
#endif
#endif
