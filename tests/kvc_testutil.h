/* Shared helpers for the unit tests: aligned arenas, random streams, and a
 * stream-building shortcut. Tests may allocate. */
#ifndef KVC_TESTUTIL_H
#define KVC_TESTUTIL_H

#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"

static void *tu_arena(size_t bytes)
{
    size_t b = KVC_ALIGN_UP(bytes ? bytes : 1);
    void *p = aligned_alloc(KVC_ARENA_ALIGN, b);
    if (p) memset(p, 0xA5, b); /* garbage, so init must clear what it uses */
    return p;
}

/* n x d standard normal floats times scale. */
static float *tu_normal(kvc_rng *r, size_t n, size_t d, double scale)
{
    float *x = malloc(n * d * sizeof(float));
    for (size_t i = 0; i < n * d; i++) x[i] = (float)(scale * kvc_rng_normal(r));
    return x;
}

/* Build a stream (arena malloc'd; the handle is the arena's start: free(st)). */
static kvc_stream *tu_stream(const kvc_stream_config *cfg)
{
    size_t bytes = kvc_stream_arena_bytes(cfg);
    if (bytes == 0) return NULL;
    void *a = tu_arena(bytes);
    kvc_stream *st = NULL;
    if (kvc_stream_init(a, bytes, cfg, &st) != KVC_OK) {
        free(a);
        return NULL;
    }
    return st;
}

#endif
