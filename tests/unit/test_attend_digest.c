/* The refactor guard: every method x implemented storage type x value of each
 * choice parameter, driven through one fixed sequence of calls (a prompt in
 * one prefill, appends, attends, observed attends for the methods that
 * observe, a batched causal attend and a split-K attend on one stream), on
 * the reference kernel table. A 64-bit FNV-1a digest of every output's bits
 * and every status is compared with tests/unit/attend_digest.txt, written by
 * this program (`test_attend_digest write FILE`) before the core's files were
 * rearranged. A change that moves code without changing what it computes
 * keeps every line; one that changes a result names its configuration.
 *
 * The digests are of float bits, so they hold for one floating-point
 * environment: x86-64 with SSE2 arithmetic (no FMA contraction in the
 * reference path, glibc's libm). Elsewhere the check skips (exit 77) and says
 * so; the lockstep and kernel harnesses cover other machines.
 * Deterministic: data seed 5100, stream seed 51. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"

#define NL      2u
#define NKV     2u
#define NH      4u
#define HD      32u
#define NTOK    200u
#define NPROMPT 48u

typedef struct digest {
    uint64_t h;
} digest;

static void eat(digest *d, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) d->h = (d->h ^ b[i]) * 1099511628211ull;
}
static void eat_status(digest *d, kvc_status s)
{
    const int32_t v = (int32_t)s;
    eat(d, &v, sizeof v);
}

/* The sequence of calls; every result goes into the digest. */
static uint64_t run_one(const kvc_cache_config *cc, const float *K, const float *V, const float *Q)
{
    const kvc_kernels *ref = kvc_kernels_ref();
    digest d = {14695981039346656037ull};
    const size_t bytes = kvc_cache_arena_bytes(cc);
    void *arena = tu_arena(bytes);
    kvc_cache *c = NULL;
    eat_status(&d, kvc_cache_init(arena, bytes, cc, &c));
    if (c == NULL) return d.h;
    const size_t pw = kvc_cache_prefill_work_bytes(c, NPROMPT);
    void *work = pw ? malloc(pw) : NULL;
    for (uint32_t l = 0; l < NL; l++) eat_status(&d, kvc_cache_prefill(c, ref, l, K, V, NPROMPT, work, pw));
    free(work);
    const int observes = kvc_cache_observes(c);
    float out[NH * HD];
    for (size_t t = NPROMPT; t < NTOK; t++) {
        for (uint32_t l = 0; l < NL; l++) {
            eat_status(&d, kvc_cache_append(c, ref, l, K + t * NKV * HD, V + t * NKV * HD));
            const float *q = Q + (t % 17) * NH * HD;
            if (observes && t % 3 == 0) {
                const size_t wb = kvc_cache_attend_observed_work_bytes(c, l);
                void *w = malloc(wb ? wb : 1);
                memset(out, 0, sizeof out);
                eat_status(&d, kvc_cache_attend_observed(c, ref, l, q, out, w, wb));
                free(w);
                eat(&d, out, sizeof out);
            } else if (t % 5 == 0) {
                memset(out, 0, sizeof out);
                eat_status(&d, kvc_cache_attend(c, ref, l, q, out));
                eat(&d, out, sizeof out);
            }
        }
    }
    /* one stream's batched causal attend (two positions, with mass) and a
       split-K attend merged from three parts */
    const kvc_stream *st = kvc_cache_get_stream(c, 0, 1);
    const size_t n_q = NH / NKV, ne = kvc_stream_view_entries(st);
    const size_t bw = kvc_stream_attend_work_bytes(st, 2, n_q);
    void *w = malloc(bw ? bw : 1);
    double *mass = calloc(ne ? ne : 1, sizeof *mass);
    float bout[2 * (NH / NKV) * HD] = {0};
    eat_status(&d, kvc_stream_attend_batch(st, ref, Q, 2, n_q, bout, mass, w, bw));
    eat(&d, bout, sizeof bout);
    eat(&d, mass, ne * sizeof *mass);
    free(w), free(mass);
    const size_t sw = kvc_stream_attend_part_work_bytes(st, n_q);
    double *states[3];
    w = malloc(sw ? sw : 1);
    for (size_t p = 0; p < 3; p++) {
        states[p] = calloc(n_q * KVC_ATTEND_STATE(HD), sizeof(double));
        eat_status(&d, kvc_stream_attend_part(st, ref, Q, n_q, p, 3, states[p], w, sw));
        eat(&d, states[p], n_q * KVC_ATTEND_STATE(HD) * sizeof(double));
    }
    float mout[(NH / NKV) * HD] = {0};
    eat_status(&d, kvc_attend_merge((const double *const *)states, 3, n_q, HD, mout));
    eat(&d, mout, sizeof mout);
    for (size_t p = 0; p < 3; p++) free(states[p]);
    free(w);
    kvc_stream_stats s;
    eat_status(&d, kvc_stream_get_stats(st, &s));
    eat(&d, &s.tokens_seen, sizeof s.tokens_seen);
    free(arena);
    return d.h;
}

typedef struct line {
    char label[160];
    uint64_t h;
} line;

typedef struct digests {
    line *lines;
    size_t n, cap;
    const float *K, *V, *Q;
} digests;

static int digest_one(kvc_cache_config *cc, const char *label, void *ctx)
{
    digests *d = ctx;
    if (d->n >= d->cap || kvc_cache_config_problem(cc) != NULL) return 0;
    snprintf(d->lines[d->n].label, sizeof d->lines[d->n].label, "%s", label);
    d->lines[d->n++].h = run_one(cc, d->K, d->V, d->Q);
    return 0;
}

/* Every configuration, in registry x type-list x choice order (tu_each_config). */
static size_t all_digests(line *lines, size_t cap)
{
    kvc_rng r;
    kvc_rng_seed(&r, 5100);
    float *K = tu_normal(&r, NTOK * NKV, HD, 1.0), *V = tu_normal(&r, NTOK * NKV, HD, 1.0),
          *Q = tu_normal(&r, 17 * NH, HD, 1.0);
    tu_shape shape;
    memset(&shape, 0, sizeof shape);
    shape.cache.n_layers = NL, shape.cache.n_heads = NH, shape.cache.n_kv_heads = NKV, shape.cache.head_dim = HD;
    shape.cache.policy = KVC_BUDGET_UNIFORM;
    shape.budget = 96, shape.n_sink = 4, shape.n_window = 32, shape.prefix_len = 100, shape.seed = 51;
    digests d = {lines, 0, cap, K, V, Q};
    tu_each_config(&shape, digest_one, &d);
    free(K), free(V), free(Q);
    return d.n;
}

#define CAP 1024

static int same_environment(void)
{
#if defined(__x86_64__) && !defined(__FMA__) && defined(__GLIBC__)
    return 1;
#else
    return 0;
#endif
}

int main(int argc, char **argv)
{
    static line lines[CAP];
    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        const size_t n = all_digests(lines, CAP);
        FILE *f = fopen(argv[2], "w");
        if (f == NULL) return 1;
        fprintf(f, "# test_attend_digest: method/type[/choice=value] FNV-1a-64 of every output and status\n"
                   "# (x86-64, reference kernel table; data seed 5100, stream seed 51)\n");
        for (size_t i = 0; i < n; i++) fprintf(f, "%s %016llx\n", lines[i].label, (unsigned long long)lines[i].h);
        fclose(f);
        printf("%zu configurations written\n", n);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: test_attend_digest EXPECTED_FILE | write FILE\n");
        return 2;
    }
    if (!same_environment()) {
        printf("SKIP: the digests are of float bits on x86-64 without FMA contraction (glibc)\n");
        return 77;
    }
    FILE *f = fopen(argv[1], "r");
    if (f == NULL) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 1;
    }
    const size_t n = all_digests(lines, CAP);
    size_t expected = 0, matched = 0, differ = 0;
    char buf[256];
    while (fgets(buf, sizeof buf, f)) {
        if (buf[0] == '#') continue;
        char label[160];
        unsigned long long h;
        if (sscanf(buf, "%159s %llx", label, &h) != 2) continue;
        expected++;
        size_t i = 0;
        while (i < n && strcmp(lines[i].label, label) != 0) i++;
        if (i == n) {
            printf("MISSING now: %s\n", label);
            differ++;
        } else if (lines[i].h != h) {
            printf("DIFFERS: %s (expected %016llx, got %016llx)\n", label, h, (unsigned long long)lines[i].h);
            differ++;
        } else {
            matched++;
        }
    }
    fclose(f);
    printf("%zu configurations now, %zu expected, %zu bit-identical, %zu differ or are missing\n", n, expected, matched,
           differ);
    if (n != expected) printf("configurations added since the digests were written: %zu\n", n - matched);
    return differ == 0 && expected > 0 ? 0 : 1;
}
