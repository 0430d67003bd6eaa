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
#endif
