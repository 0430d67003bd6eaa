#include "kvc_err.h"

#include <stdarg.h>
#include <stdio.h>

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
