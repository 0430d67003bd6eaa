/* Shared helpers for the unit tests: aligned arenas, random streams, and a
 * stream-building shortcut. Tests may allocate. */
#ifndef KVC_TESTUTIL_H
#define KVC_TESTUTIL_H

#include <stdio.h>
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

/* The configurations the harnesses enumerate: every method of the registry x
 * every implemented storage type, with its defaults and then each value of
 * each of its choice parameters in turn (from the descriptors, so a method or
 * mode added later is covered without a word here). `shape` fixes the cache
 * and the stream's budget, sinks, window and seed; fn gets each one and a
 * label "method/type[/name=value]"; a configuration kvc_stream_config_set
 * refuses is skipped. Stops at, and returns, the first nonzero fn. */
typedef struct tu_shape {
    kvc_cache_config cache; /* dimensions and policy; .stream is filled per configuration */
    uint32_t budget, n_sink, n_window, prefix_len;
    uint64_t seed;
} tu_shape;

typedef int (*tu_config_fn)(kvc_cache_config *cc, const char *label, void *ctx);

static int tu_each_config(const tu_shape *shape, tu_config_fn fn, void *ctx)
{
    static const kvc_dtype types[] = {
#define KVC_DT(NAME, value, name, bits, impl, ...) KVC_DTYPE_##NAME,
        KVC_DTYPE_LIST(KVC_DT)
#undef KVC_DT
    };
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const kvc_method m = kvc_method_at(mi);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            if (!kvc_dtype_implemented(types[ti])) continue;
            kvc_cache_config cc = shape->cache;
            const uint32_t hd = cc.head_dim;
            cc.stream = kvc_stream_config_default(m, hd, hd, shape->budget, shape->seed);
            cc.stream.dtype = types[ti];
            cc.stream.n_sink = shape->n_sink, cc.stream.n_window = shape->n_window;
            cc.stream.prefix_len = shape->prefix_len;
            const char *mn = kvc_method_name(m), *tn = kvc_dtype_name(types[ti]);
            char label[160];
            snprintf(label, sizeof label, "%s/%s", mn, tn);
            int rc = fn(&cc, label, ctx);
            if (rc) return rc;
            for (size_t pi = 0; pi < kvc_method_param_count(m); pi++) {
                const kvc_param_desc *pd = kvc_method_param_at(m, pi);
                if (pd->type != KVC_PARAM_CHOICE || pd->choices == NULL) continue;
                for (const char *c = pd->choices; *c;) {
                    char word[64];
                    const size_t len = strcspn(c, "|");
                    snprintf(word, sizeof word, "%.*s", (int)len, c);
                    c += len + (c[len] == '|');
                    kvc_cache_config v = cc;
                    if (kvc_stream_config_set(&v.stream, pd->name, word) != KVC_OK) continue;
                    snprintf(label, sizeof label, "%s/%s/%s=%s", mn, tn, pd->name, word);
                    rc = fn(&v, label, ctx);
                    if (rc) return rc;
                }
            }
        }
    }
    return 0;
}

#endif
