/* libFuzzer target for the .npy reader (kvc_npy_parse).
 *
 * Build with -DKVC_FUZZ=ON (clang) to get the fuzz_npy binary; the same file is
 * linked with replay_main.c into fuzz_npy_replay, which runs the seed corpus
 * as a normal ctest test with any compiler.
 *
 * Invariants checked on every input:
 *  - success: 1 <= ndim <= 3, every used dim >= 1, unused dims 0,
 *    count == product of shape, data != NULL; every element is read so that
 *    ASan reports an allocation shorter than count floats;
 *  - failure: data == NULL, count == 0, and a non-empty NUL-terminated message;
 *  - the status does not depend on the error buffer (NULL, tiny, normal);
 *  - kvc_npy_free is safe to call twice.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvc_npy_array a;
    char err[256];
    memset(err, 'x', sizeof err);
    kvc_status st = kvc_npy_parse(data, size, &a, err, sizeof err);

    if (st == KVC_OK) {
        check(a.ndim >= 1 && a.ndim <= KVC_NPY_MAX_DIMS);
        check(a.data != NULL);
        check(a.stored == KVC_NPY_F32 || a.stored == KVC_NPY_F16);
        size_t prod = 1;
        for (size_t d = 0; d < KVC_NPY_MAX_DIMS; d++) {
            if (d < a.ndim) {
                check(a.shape[d] >= 1);
                prod *= a.shape[d];
            } else {
                check(a.shape[d] == 0);
            }
        }
        check(prod == a.count);
        check(a.count <= KVC_NPY_MAX_ELEMS);
        /* the stored payload cannot be larger than the input */
        check(a.count * (a.stored == KVC_NPY_F32 ? 4u : 2u) <= size);
        volatile float sink = 0.0f;
        for (size_t i = 0; i < a.count; i++) sink += a.data[i];
        (void)sink;
    } else {
        check(a.data == NULL && a.count == 0 && a.ndim == 0);
        check(memchr(err, '\0', sizeof err) != NULL);
        check(err[0] != '\0');
    }

    /* same verdict without an error buffer and with a tiny one */
    kvc_npy_array b;
    check(kvc_npy_parse(data, size, &b, NULL, 0) == st);
    kvc_npy_free(&b);
    char tiny[5];
    memset(tiny, 'x', sizeof tiny);
    check(kvc_npy_parse(data, size, &b, tiny, sizeof tiny) == st);
    check(memchr(tiny, '\0', sizeof tiny) != NULL);
    kvc_npy_free(&b);

    kvc_npy_free(&a);
    kvc_npy_free(&a);
    check(a.data == NULL);
    return 0;
}
