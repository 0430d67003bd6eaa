/**
 * @file kvc_npy.h
 * @brief NumPy .npy reader and writer for traces (host side; may allocate).
 *
 * Reads format versions 1.0, 2.0 and 3.0, dtypes float32 and float16 in either
 * byte order ('<f4', '>f4', '<f2', '>f2', '|'-less forms as numpy writes
 * them), C order only, 1 to 3 dimensions. Data are always returned as float32.
 * Every length, offset and shape product is checked before it is used: a
 * hostile file gets KVC_E_FORMAT and a message, never a crash or an over-read.
 *
 * Accepted header (a subset of the Python dict literal numpy writes):
 *  - printable ASCII plus space, tab, CR and LF only, ending with '\n';
 *  - exactly the keys 'descr', 'fortran_order' and 'shape', each once, in any
 *    order, with any whitespace and an optional trailing comma; strings in
 *    single or double quotes without escape sequences;
 *  - 'fortran_order': False ('True' is rejected: "fortran_order arrays are not
 *    supported");
 *  - 'shape': a tuple of 1..3 decimal integers ("(5,)", "(3, 4)", "(2,3,4)";
 *    "(5)" is not a tuple and is rejected); a Python 2 'L' suffix is accepted.
 *    Zero-size dimensions are rejected (empty arrays are not supported), so a
 *    successful parse always returns count >= 1 and data != NULL; the product
 *    of the dimensions must not exceed ::KVC_NPY_MAX_ELEMS.
 * The data that follow the header must be exactly count * element size bytes
 * (a shorter file is "truncated data", a longer one has "trailing bytes").
 * NaN and Inf values are returned as they are: checking finiteness is the
 * caller's job.
 */
#ifndef KVC_NPY_H
#define KVC_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Element type as stored in the file. */
typedef enum kvc_npy_dtype { KVC_NPY_F32 = 0, KVC_NPY_F16 = 1 } kvc_npy_dtype;

/** Largest number of dimensions accepted. */
#define KVC_NPY_MAX_DIMS 3u
/** Largest element count accepted (2^31: keeps every byte count < 2^33). */
#define KVC_NPY_MAX_ELEMS ((size_t)1 << 31)

/** A loaded array: data is malloc'd float32 in C order; free with kvc_npy_free. */
typedef struct kvc_npy_array {
    size_t ndim;                    /**< 1 .. KVC_NPY_MAX_DIMS */
    size_t shape[KVC_NPY_MAX_DIMS]; /**< unused trailing entries are 0 */
    size_t count;                   /**< product of shape */
    kvc_npy_dtype stored;           /**< dtype found in the file */
    float *data;                    /**< count floats */
} kvc_npy_array;

/**
 * @brief Parse a whole .npy file held in memory.
 * @param buf,len   the bytes (len may be 0; buf may be NULL iff len == 0).
 * @param out       filled on success; zeroed (data NULL) on failure.
 * @param err       optional buffer for a one-line message (may be NULL).
 * @return KVC_OK, KVC_E_FORMAT (malformed / unsupported content),
 *         KVC_E_ARG (NULL out), KVC_E_CAPACITY (allocation failed).
 */
kvc_status kvc_npy_parse(const uint8_t *buf, size_t len, kvc_npy_array *out, char *err, size_t errlen);

/** @brief Read and parse a file; KVC_E_ARG when it cannot be opened/read. */
kvc_status kvc_npy_load(const char *path, kvc_npy_array *out, char *err, size_t errlen);

/** @brief Release an array (safe on a zeroed or already-freed array). */
void kvc_npy_free(kvc_npy_array *a);

/**
 * @brief Write float32 data as a version 1.0 .npy, stored as @p dtype
 *        ('<f4' or '<f2', float16 rounded to nearest even).
 * @param ndim 1 .. KVC_NPY_MAX_DIMS, every shape entry >= 1.
 */
kvc_status kvc_npy_save(const char *path, const float *data, size_t ndim, const size_t *shape, kvc_npy_dtype dtype,
                        char *err, size_t errlen);

/** @brief IEEE binary16 <-> binary32 conversions (round to nearest even). */
float kvc_half_to_float(uint16_t h);
uint16_t kvc_float_to_half(float f);

#ifdef __cplusplus
}
#endif
#endif
