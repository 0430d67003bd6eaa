#define _POSIX_C_SOURCE 200809L
#include "kvc_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

kvc_status kvc_errf(char *err, size_t errlen, kvc_status rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

kvc_status kvc_read_regular_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    *buf = NULL, *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return kvc_errf(err, errlen, KVC_E_ARG, "cannot open '%s'", path);
    /* stat the opened file: ftell on a directory reports 2^63 - 1 */
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return kvc_errf(err, errlen, KVC_E_ARG, "'%s' is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > ((uint64_t)1 << 40)) {
        fclose(f);
        return kvc_errf(err, errlen, KVC_E_ARG, "'%s' is larger than 1 TiB", path);
    }
    const size_t n = (size_t)sb.st_size;
    uint8_t *b = malloc(n + 1);
    if (!b) {
        fclose(f);
        return kvc_errf(err, errlen, KVC_E_CAPACITY, "out of memory reading '%s' (%zu bytes)", path, n);
    }
    const size_t got = fread(b, 1, n, f);
    const int bad = ferror(f) || got != n;
    fclose(f);
    if (bad) {
        free(b);
        return kvc_errf(err, errlen, KVC_E_ARG, "cannot read '%s'", path);
    }
    b[n] = 0;
    *buf = b, *len = n;
    return KVC_OK;
}
