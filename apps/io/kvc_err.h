#ifndef KVC_ERR_H
#define KVC_ERR_H
#include <stddef.h>

#include "kvc/kvc_types.h"

/** Write a printf-style one-line message into @p err (when not NULL) and
 *  return @p rc: the loaders' common error path. */
kvc_status kvc_errf(char *err, size_t errlen, kvc_status rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#include <stdint.h>

/** Read a whole regular file (a directory, device or FIFO is refused with a
 *  message before any allocation; so is a file above 2^40 bytes). On success
 *  *buf is malloc'd with one extra NUL byte. Errors: KVC_E_ARG (cannot open,
 *  not a regular file, cannot read) or KVC_E_CAPACITY (out of memory). */
kvc_status kvc_read_regular_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen);
#endif
