/* Chunked teacher forcing and cache set-up for the commands that run a model. */
#include "lmrun.h"

#include <errno.h>

#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *kvc_lm_cache_new(const char *cmd, const kvc_l2c_config *c, const kvc_stream_config *sc, kvc_budget_policy policy,
                       kvc_cache **cache, size_t *bytes)
{
    kvc_cache_config cc = kvc_l2c_cache_config(c, sc);
    cc.policy = policy;
    const char *why = kvc_cache_config_problem(&cc);
    if (why) {
        fprintf(stderr, "kvc %s: %s, budget %u: %s\n", cmd, kvc_method_name(sc->method), sc->budget, why);
        return NULL;
    }
    const size_t b = kvc_cache_arena_bytes(&cc);
    if (kvc_cli_arena_refused(cmd, b)) return NULL;
    void *arena = kvc_l2c_arena_alloc(b);
    if (!arena) {
        fprintf(stderr, "kvc %s: out of memory for a %zu-byte cache\n", cmd, b);
        return NULL;
    }
    kvc_status rc = kvc_cache_init(arena, b, &cc, cache);
    if (rc != KVC_OK) {
        fprintf(stderr, "kvc %s: cache init failed: %s\n", cmd, kvc_status_str(rc));
        kvc_l2c_arena_free(arena);
        return NULL;
    }
    if (bytes) *bytes = b;
    return arena;
}

int kvc_lm_argmax(const float *logits, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

double kvc_lm_nll(const float *logits, int n, int target)
{
    double mx = logits[0], z = 0.0;
    for (int i = 1; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    for (int i = 0; i < n; i++) z += exp((double)logits[i] - mx);
    return -((double)logits[target] - mx - log(z));
}

kvc_status kvc_lm_feed(const kvc_l2c_model *m, kvc_l2c_state *s, const int *toks, int n, int pos0, kvc_l2c_attn_fn attn,
                       void *ctx, const int *targets, double *nll, kvc_lm_progress_fn progress, void *pctx)
{
    const int V = m->cfg.vocab_size;
    double sum = 0.0;
    for (int p = 0; p < n; p += s->chunk) {
        const int k = n - p < s->chunk ? n - p : s->chunk;
        kvc_status rc = kvc_l2c_forward_chunk(m, s, toks + p, k, pos0 + p, attn, ctx, targets ? 0 : k);
        if (rc != KVC_OK) return rc;
        if (targets)
            for (int t = 0; t < k; t++) {
                if (targets[p + t] < 0 || targets[p + t] >= V) return KVC_E_ARG;
                sum += kvc_lm_nll(s->logits + (size_t)t * V, V, targets[p + t]);
            }
        if (progress) progress(pctx, p + k);
    }
    if (targets && nll) *nll = sum;
    return KVC_OK;
}

char *kvc_lm_read_text(const char *cmd, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kvc %s: cannot read text file '%s': %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    size_t got;
    int too_big = 0;
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = cap < (1u << 26) ? realloc(b, 2 * cap + 1) : NULL;
            too_big = cap >= (1u << 26);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb, cap *= 2;
        }
    }
    const int read_error = ferror(f);
    fclose(f);
    if (!b || read_error) {
        fprintf(stderr, "kvc %s: cannot read text file '%s': %s\n", cmd, path,
                read_error ? "read error"
                : too_big  ? "over 64 MiB"
                           : "out of memory");
        free(b);
        return NULL;
    }
    /* the commands take text as a C string: a NUL byte would end it early and
       the rest would be dropped without a word */
    const char *nul = memchr(b, 0, n);
    if (nul) {
        fprintf(stderr, "kvc %s: '%s': byte %zu is a NUL byte; a text file cannot hold one\n", cmd, path,
                (size_t)(nul - b));
        free(b);
        return NULL;
    }
    b[n] = 0;
    return b;
}
