/* What tests/unit/test_hooks.c reads back from the toy method
 * (tests/unit/method_toy.c) without including the core's internal headers. */
#ifndef KVC_TOY_METHOD_H
#define KVC_TOY_METHOD_H

#include "kvc/kvc.h"

typedef struct toy_info {
    uint32_t count;
    uint64_t observes, prefill_rows;
    double prefill_sum;
    const uint32_t *tokens;
    const double *score;
} toy_info;

/* The toy's counters and arrays; -1 when the stream is not a toy stream. */
int toy_get(const kvc_stream *st, toy_info *out);

#endif
