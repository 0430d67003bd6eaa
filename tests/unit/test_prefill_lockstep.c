/* Issue 49's cache-level lockstep harness: kvc_cache_prefill against the same
 * tokens through kvc_cache_append, on every method of the registry x every
 * implemented storage type x every value of each method's choice parameters
 * (bkv-mode, tail-method, ...), with 0, 5 and n_sink + n_window + 1 plain
 * appends before the prefill, past the capacity of the exact stores (160
 * tokens, budget 96). Enumerated from the registry and the type list, never
 * from a hand-kept list, so a method or mode added later is covered.
 *
 * Checked for each configuration: the prefill's status is the status of the
 * first append the loop refuses (KVC_OK when none), the two caches are byte
 * for byte equal (kvc_cache_checksum) and answer a query identically, and
 * every kv head of a layer has seen the same number of tokens. The mode that
 * refuses plain appends of its prompt (balancekv-prefill offline) is
 * compared with one call of the whole prompt instead: byte for byte in f32,
 * and in the lossy types by the rows held (the tokens appended before the
 * call reach its walk as the window's stored rows, not the caller's f32). Deterministic (data
 * seed 4900, stream seed 49). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"

#define NL   2u
#define NKV  2u
#define NH   4u
#define HD   32u
#define NTOK 160u

typedef struct run_cache {
    kvc_cache *c;
    void *arena;
} run_cache;

static int make(const kvc_cache_config *cc, run_cache *r)
{
    const size_t bytes = kvc_cache_arena_bytes(cc);
    if (bytes == 0) return 0;
    r->arena = tu_arena(bytes);
    return r->arena != NULL && kvc_cache_init(r->arena, bytes, cc, &r->c) == KVC_OK;
}

/* Tokens [from, to) of each layer by appends, layer after layer (a layer
 * stops at its first refusal: st[l] holds its status). */
static void appends(run_cache *r, const float *K, const float *V, size_t from, size_t to, kvc_status *st)
{
    for (uint32_t l = 0; l < NL; l++) {
        st[l] = KVC_OK;
        for (size_t t = from; t < to && st[l] == KVC_OK; t++)
            st[l] = kvc_cache_append(r->c, NULL, l, K + t * NKV * HD, V + t * NKV * HD);
    }
}

/* Tokens [from, to) of each layer in one kvc_cache_prefill per layer. */
static void prefill(run_cache *r, const float *K, const float *V, size_t from, size_t to, kvc_status *st)
{
    const size_t n = to - from, wb = kvc_cache_prefill_work_bytes(r->c, n);
    double *work = wb ? malloc(wb) : NULL;
    for (uint32_t l = 0; l < NL; l++)
        st[l] = kvc_cache_prefill(r->c, NULL, l, K + from * NKV * HD, V + from * NKV * HD, n, work, wb);
    free(work);
}

/* Every kv head of each layer has seen the same tokens. */
static int heads_in_step(const run_cache *r, uint64_t *seen0)
{
    for (uint32_t l = 0; l < NL; l++) {
        uint64_t first = 0;
        for (uint32_t h = 0; h < NKV; h++) {
            kvc_stream_stats s;
            if (kvc_stream_get_stats(kvc_cache_get_stream(r->c, l, h), &s) != KVC_OK) return 0;
            if (h == 0) first = s.tokens_seen;
            if (s.tokens_seen != first) return 0;
        }
        if (l == 0) *seen0 = first;
    }
    return 1;
}

static int same_answers(const run_cache *a, const run_cache *b, const float *q)
{
    float oa[NH * HD], ob[NH * HD];
    for (uint32_t l = 0; l < NL; l++) {
        const kvc_status sa = kvc_cache_attend(a->c, NULL, l, q, oa), sb = kvc_cache_attend(b->c, NULL, l, q, ob);
        if (sa != sb || (sa == KVC_OK && memcmp(oa, ob, sizeof oa) != 0)) return 0;
    }
    return 1;
}

typedef struct tally {
    unsigned configs, runs, refused_configs, capacity_edges;
} tally;

static int one_config(kvc_cache_config *cc, const char *label, const float *K, const float *V, const float *q,
                      tally *tl)
{
    if (kvc_cache_config_problem(cc) != NULL) {
        tl->refused_configs++;
        return 0;
    }
    tl->configs++;
    const int offline =
        cc->stream.method == KVC_METHOD_BALANCEKV_PREFILL && cc->stream.params.balancekv.mode == KVC_BALANCE_OFFLINE;
    const size_t befores[3] = {0, 5, (size_t)cc->stream.n_sink + cc->stream.n_window + 1};
    for (size_t i = 0; i < 3; i++) {
        const size_t a = befores[i];
        run_cache A = {0}, B = {0};
        CHECK_MSG(make(cc, &A) && make(cc, &B), "%s: init", label);
        kvc_status pre[NL], sta[NL], stb[NL];
        appends(&A, K, V, 0, a, pre);
        CHECK_MSG(pre[0] == KVC_OK && pre[NL - 1] == KVC_OK, "%s: %zu plain appends: %s", label, a,
                  kvc_status_str(pre[0]));
        prefill(&A, K, V, a, NTOK, sta);
        if (offline) /* its prompt must come through a call: the peer is one call of everything */
            prefill(&B, K, V, 0, NTOK, stb);
        else
            appends(&B, K, V, 0, NTOK, stb);
        const kvc_status sa = sta[0], sb = stb[0];
        int same_status = 1;
        for (uint32_t l = 0; l < NL; l++) same_status &= sta[l] == stb[l];
        uint64_t seen_a = 0, seen_b = 0;
        CHECK_MSG(heads_in_step(&A, &seen_a) && heads_in_step(&B, &seen_b),
                  "%s, %zu plain appends before: the kv heads of a layer hold different token counts", label, a);
        /* offline with a lossy type: tokens appended before the call reach
           the walk as the window's stored (quantised) rows, where one call
           hands it the caller's f32 rows, so the bytes may differ; what must
           agree is what is held (nothing dropped, the same survivors' count) */
        uint64_t ea = 0, eb = 0;
        CHECK(kvc_cache_get_usage(A.c, &ea, NULL) == KVC_OK && kvc_cache_get_usage(B.c, &eb, NULL) == KVC_OK);
        const int bytes_equal = offline && cc->stream.dtype != KVC_DTYPE_F32
                                    ? ea == eb
                                    : kvc_cache_checksum(A.c) == kvc_cache_checksum(B.c) && same_answers(&A, &B, q);
        CHECK_MSG(same_status && seen_a == seen_b && bytes_equal,
                  "%s, %zu plain appends then a prefill: status %s, %llu tokens; the %s: status %s, %llu tokens%s",
                  label, a, kvc_status_str(sa), (unsigned long long)seen_a, offline ? "one call" : "append loop",
                  kvc_status_str(sb), (unsigned long long)seen_b, bytes_equal ? "" : "; the caches differ");
        CHECK_MSG(kvc_cache_validate(A.arena, kvc_cache_arena_bytes(cc)) == KVC_OK, "%s: validate", label);
        if (sa == KVC_E_CAPACITY) tl->capacity_edges++;
        tl->runs++;
        free(A.arena), free(B.arena);
    }
    return 0;
}

typedef struct lockstep_ctx {
    const float *K, *V, *q;
    tally *tl;
} lockstep_ctx;

static int lockstep_one(kvc_cache_config *cc, const char *label, void *ctx)
{
    const lockstep_ctx *lc = ctx;
    return one_config(cc, label, lc->K, lc->V, lc->q, lc->tl);
}

static int prefill_equals_appends_everywhere(void)
{
    kvc_rng r;
    kvc_rng_seed(&r, 4900);
    float *K = tu_normal(&r, NTOK * NKV, HD, 1.0), *V = tu_normal(&r, NTOK * NKV, HD, 1.0),
          *q = tu_normal(&r, NH, HD, 1.0);
    tally tl = {0};
    lockstep_ctx lc = {K, V, q, &tl};
    tu_shape shape;
    memset(&shape, 0, sizeof shape);
    shape.cache.n_layers = NL, shape.cache.n_heads = NH, shape.cache.n_kv_heads = NKV, shape.cache.head_dim = HD;
    shape.cache.policy = KVC_BUDGET_UNIFORM;
    shape.budget = 96, shape.n_sink = 4, shape.n_window = 32, shape.prefix_len = 100, shape.seed = 49;
    if (tu_each_config(&shape, lockstep_one, &lc)) return 1;
    printf("%u configurations (methods x types x choice values), %u runs, %u of them refused at capacity mid-"
           "prefill; %u configurations refused by kvc_cache_config_problem (data seed 4900, stream seed 49)\n",
           tl.configs, tl.runs, tl.capacity_edges, tl.refused_configs);
    CHECK(tl.capacity_edges > 0 && tl.configs > 50);
    free(K), free(V), free(q);
    return 0;
}

/* Issue 49 item 9: prefill rows overlapping the caller's work changed the
 * output (the call writes work while it reads the rows). Now refused with
 * KVC_E_ARG before anything changes, at the cache and the stream level. */
static int prefill_scratch_overlapping_rows_is_refused(void)
{
    kvc_cache_config cc;
    memset(&cc, 0, sizeof cc);
    cc.n_layers = 1, cc.n_heads = NH, cc.n_kv_heads = NKV, cc.head_dim = HD, cc.policy = KVC_BUDGET_UNIFORM;
    cc.stream = kvc_stream_config_default(KVC_METHOD_BALANCEKV_PREFILL, HD, HD, 96, 49);
    cc.stream.n_sink = 4, cc.stream.n_window = 32, cc.stream.prefix_len = 100;
    CHECK(kvc_stream_config_set(&cc.stream, "bkv-mode", "offline") == KVC_OK);
    run_cache A = {0};
    CHECK(make(&cc, &A));
    const size_t n = 100, rows = n * NKV * HD, wb = kvc_cache_prefill_work_bytes(A.c, n);
    CHECK(wb > 0);
    /* one buffer: the rows, then the scratch starting inside the values */
    double *buf = malloc(2 * rows * sizeof(float) + wb + 64);
    float *K = (float *)(void *)buf, *V = K + rows;
    kvc_rng r;
    kvc_rng_seed(&r, 4901);
    for (size_t i = 0; i < 2 * rows; i++) K[i] = (float)kvc_rng_normal(&r);
    const uint64_t before = kvc_cache_checksum(A.c);
    void *inside = (void *)(V + rows / 2 - (rows / 2) % 2); /* 8-aligned, inside the values */
    CHECK(kvc_cache_prefill(A.c, NULL, 0, K, V, n, inside, wb) == KVC_E_ARG);
    CHECK(kvc_cache_prefill(A.c, NULL, 0, K, V, n, (void *)K, wb) == KVC_E_ARG);
    CHECK(kvc_cache_checksum(A.c) == before);
    kvc_stream *st = (kvc_stream *)(uintptr_t)kvc_cache_get_stream(A.c, 0, 0);
    CHECK(kvc_stream_prefill(st, NULL, K, NKV * HD, V, NKV * HD, n, inside, wb) == KVC_E_ARG);
    CHECK(kvc_cache_checksum(A.c) == before);
    void *after = (void *)(V + rows); /* right after the rows: allowed */
    CHECK(kvc_cache_prefill(A.c, NULL, 0, K, V, n, after, wb) == KVC_OK);
    printf("scratch inside the rows refused (cache and stream), right after them accepted (data seed 4901)\n");
    free(buf), free(A.arena);
    return 0;
}

static const kvc_test_case cases[] = {
    {"prefill_equals_appends_everywhere", prefill_equals_appends_everywhere},
    {"prefill_scratch_overlapping_rows_is_refused", prefill_scratch_overlapping_rows_is_refused}};
KVC_TEST_MAIN(cases)
