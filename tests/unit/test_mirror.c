/* The mirror of a stream (kvc_mirror.h), for every configuration the
 * harness enumerates (method x implemented storage type x choice parameter):
 *
 *  - replays_every_configuration: a prompt in one call, then decode steps
 *    (observed attends for the methods that observe, so H2O, TOVA and SnapKV
 *    evict), protected spans on, past the budget (evictions, merges, halvings).
 *    After every call the mirror's edits are applied to an emulated page pool,
 *    and the pool's non-empty slots must equal the stream's view as a multiset
 *    of (key codes, value codes, weight, role), bit for bit. The current
 *    token is f32 on the host: both sides store it in the pool's type with the
 *    reference row kernel. Prints the most runs a call recorded and the most
 *    edits a step made, per configuration (the bounds docs/gpu.md states).
 *  - dropped_runs_are_caught: the planted bug. At every step, each journal run
 *    is dropped in turn (from a snapshot of mirror and pool) and the pool
 *    compared: a drop must break the pool exactly when the run rewrote a row
 *    that stays in the view at the same place with different bytes (a new row
 *    is sent whole, so a lost run there is harmless), and the oracle for that
 *    is computed from the previous view's bytes, not from the mirror.
 *  - refusals_change_nothing: bad arguments leave the mirror's bytes as they were.
 *  - journal_bounds_and_coalescing: runs coalesce; a full journal counts
 *    dropped rows, and the mirror then re-sends every row (still equal). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KVC_ADVANCED 1
#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"

#define HD     32u
#define BUDGET 48u
#define PROMPT 40u
#define STEPS  160u
#define RUNS   4096u

typedef struct pool {
    uint32_t slots, ks, vs, dtype, d, dv;
    unsigned char *key, *value; /* slots rows each */
    unsigned char *has_value;
    float *weight;
    uint32_t *role;
} pool;

static pool pool_make(uint32_t slots, unsigned dtype, uint32_t d, uint32_t dv)
{
    pool p;
    p.slots = slots, p.dtype = dtype, p.d = d, p.dv = dv;
    p.ks = (uint32_t)kvc_row_bytes(dtype, d), p.vs = (uint32_t)kvc_row_bytes(dtype, dv);
    p.key = malloc((size_t)slots * p.ks), p.value = malloc((size_t)slots * p.vs);
    p.has_value = calloc(slots, 1), p.weight = malloc(slots * sizeof(float)), p.role = calloc(slots, sizeof(uint32_t));
    memset(p.key, 0xEE, (size_t)slots * p.ks), memset(p.value, 0xEE, (size_t)slots * p.vs);
    for (uint32_t i = 0; i < slots; i++) p.weight[i] = 0.0f;
    return p;
}

static void pool_free(pool *p) { free(p->key), free(p->value), free(p->has_value), free(p->weight), free(p->role); }

static void pool_copy(pool *to, const pool *from)
{
    memcpy(to->key, from->key, (size_t)from->slots * from->ks);
    memcpy(to->value, from->value, (size_t)from->slots * from->vs);
    memcpy(to->has_value, from->has_value, from->slots);
    memcpy(to->weight, from->weight, from->slots * sizeof(float));
    memcpy(to->role, from->role, from->slots * sizeof(uint32_t));
}

/* What a device does with an edit: rows copied as bytes (f32 ones stored in
 * the pool's type by the reference kernel), weight and role set. */
static void pool_apply(pool *p, const kvc_stream *st, const kvc_mirror_edit *e, size_t n)
{
    const unsigned char *base = (const unsigned char *)st;
    const kvc_row_kernels *rk = &kvc_kernels_ref()->rows[p->dtype];
    for (size_t i = 0; i < n; i++) {
        const uint32_t s = e[i].slot;
        unsigned char *k = p->key + (size_t)s * p->ks, *v = p->value + (size_t)s * p->vs;
        const int f32 = (e[i].what & KVC_MIRROR_F32) != 0;
        if (e[i].what & KVC_MIRROR_KEY) {
            if (f32)
                rk->store(k, (const float *)(const void *)(base + e[i].key_offset), p->d);
            else
                memcpy(k, base + e[i].key_offset, p->ks);
        }
        if (e[i].what & KVC_MIRROR_VALUE) {
            p->has_value[s] = e[i].value_offset != KVC_MIRROR_NO_VALUE;
            if (!p->has_value[s])
                memset(v, 0, p->vs);
            else if (f32)
                rk->store(v, (const float *)(const void *)(base + e[i].value_offset), p->dv);
            else
                memcpy(v, base + e[i].value_offset, p->vs);
        }
        if (e[i].what & KVC_MIRROR_WEIGHT) p->weight[s] = e[i].weight, p->role[s] = e[i].role;
    }
}

/* One row as a comparable record: key codes, value codes (zeros when none),
 * has-value, weight bits, role. */
typedef struct rec_set {
    size_t n, cap, width;
    unsigned char *b;
} rec_set;

static unsigned char *rec_add(rec_set *r)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->b = realloc(r->b, r->cap * r->width);
    }
    unsigned char *x = r->b + r->n++ * r->width;
    memset(x, 0, r->width);
    return x;
}

static size_t g_width;
static int rec_cmp(const void *a, const void *b) { return memcmp(a, b, g_width); }

static void rec_fill(unsigned char *x, const pool *p, const void *k, const void *v, float weight, uint32_t role)
{
    memcpy(x, k, p->ks);
    if (v) memcpy(x + p->ks, v, p->vs), x[p->ks + p->vs] = 1;
    memcpy(x + p->ks + p->vs + 1, &weight, sizeof weight);
    memcpy(x + p->ks + p->vs + 1 + sizeof weight, &role, sizeof role);
}

/* The view's rows with a weight, as records (the current token stored in the pool's type). */
static void view_records(const kvc_stream *st, const pool *p, rec_set *out)
{
    kvc_view v;
    kvc_stream_view(st, &v);
    const kvc_row_kernels *rk = &kvc_kernels_ref()->rows[p->dtype];
    unsigned char kq[1100], vq[1100];
    for (size_t i = 0; i < v.n_seg; i++) {
        const kvc_segment *g = &v.seg[i];
        for (size_t j = 0; j < g->n; j++) {
            const float w = (float)((g->weights ? (double)g->weights[j] : 1.0) * g->scale);
            if (!(w > 0.0f) || !(w < INFINITY)) continue;
            const void *k, *val;
            if (g->dtype == KVC_DTYPE_F32 && p->dtype != KVC_DTYPE_F32) { /* the current token */
                rk->store(kq, g->keys + j * v.d, p->d);
                if (g->values) rk->store(vq, g->values + j * v.dv, p->dv);
                k = kq, val = g->values ? vq : NULL;
            } else if (g->dtype == KVC_DTYPE_F32) {
                k = g->keys + j * v.d, val = g->values ? g->values + j * v.dv : NULL;
            } else {
                k = (const unsigned char *)g->keys_q + j * p->ks;
                val = g->values_q ? (const unsigned char *)g->values_q + j * p->vs : NULL;
            }
            rec_fill(rec_add(out), p, k, val, w, g->role);
        }
    }
}

static void pool_records(const pool *p, uint32_t n_rows, rec_set *out)
{
    for (uint32_t s = 0; s < n_rows; s++)
        if (p->role[s] != 0)
            rec_fill(rec_add(out), p, p->key + (size_t)s * p->ks, p->has_value[s] ? p->value + (size_t)s * p->vs : NULL,
                     p->weight[s], p->role[s]);
}

/* 1 when the pool holds exactly the view's rows. */
static int pool_equals_view(const kvc_stream *st, const pool *p, uint32_t n_rows)
{
    rec_set a = {0, 0, p->ks + p->vs + 1 + 8, NULL}, b = a;
    view_records(st, p, &a);
    pool_records(p, n_rows, &b);
    g_width = a.width;
    int same = a.n == b.n;
    if (same && a.n) {
        qsort(a.b, a.n, a.width, rec_cmp), qsort(b.b, b.n, b.width, rec_cmp);
        same = memcmp(a.b, b.b, a.n * a.width) == 0;
    }
    free(a.b), free(b.b);
    return same;
}

/* The previous view's rows by key offset (the drop oracle's memory). */
typedef struct prev_row {
    uint64_t koff, voff;
    unsigned char bytes[2 * 1032];
} prev_row;

typedef struct prev_view {
    size_t n;
    prev_row *r;
} prev_view;

static uint64_t off_of(const kvc_stream *st, const void *p)
{
    return (uint64_t)((const unsigned char *)p - (const unsigned char *)st);
}

static void prev_take(prev_view *pv, const kvc_stream *st, const pool *p)
{
    kvc_view v;
    kvc_stream_view(st, &v);
    pv->n = 0;
    for (size_t i = 0; i < v.n_seg; i++) {
        const kvc_segment *g = &v.seg[i];
        if (g->dtype != p->dtype) continue; /* the current token: always re-sent */
        const unsigned char *k = g->dtype == KVC_DTYPE_F32 ? (const void *)g->keys : g->keys_q;
        const unsigned char *val = g->dtype == KVC_DTYPE_F32 ? (const void *)g->values : g->values_q;
        for (size_t j = 0; j < g->n; j++) {
            const float w = (float)((g->weights ? (double)g->weights[j] : 1.0) * g->scale);
            if (!(w > 0.0f) || !(w < INFINITY)) continue;
            pv->r = realloc(pv->r, (pv->n + 1) * sizeof(prev_row));
            prev_row *r = &pv->r[pv->n++];
            r->koff = off_of(st, k + j * p->ks);
            r->voff = val ? off_of(st, val + j * p->vs) : UINT64_MAX;
            memcpy(r->bytes, k + j * p->ks, p->ks);
            if (val) memcpy(r->bytes + p->ks, val + j * p->vs, p->vs);
        }
    }
}

static int in_run(uint64_t off, const kvc_row_write *w, uint64_t delta)
{
    if (off + delta < w->offset) return 0;
    const uint64_t at = off + delta - w->offset;
    return at < (uint64_t)w->rows * w->stride && at % w->stride == 0;
}

/* Must dropping run w break the pool? When it rewrote a row that stays in
 * the view at the same key and value offsets with different bytes. */
static int covered_by_others(uint64_t off, const kvc_row_journal *j, uint32_t drop)
{
    for (uint32_t i = 0; i < j->count; i++)
        if (i != drop && in_run(off, &j->writes[i], 0)) return 1;
    return 0;
}

static int drop_matters(const kvc_stream *st, const pool *p, const prev_view *pv, const kvc_row_journal *jr,
                        uint32_t drop)
{
    const kvc_row_write *w = &jr->writes[drop];
    const uint64_t delta = 0;
    kvc_view v;
    kvc_stream_view(st, &v);
    for (size_t i = 0; i < v.n_seg; i++) {
        const kvc_segment *g = &v.seg[i];
        if (g->dtype != p->dtype) continue;
        const unsigned char *k = g->dtype == KVC_DTYPE_F32 ? (const void *)g->keys : g->keys_q;
        const unsigned char *val = g->dtype == KVC_DTYPE_F32 ? (const void *)g->values : g->values_q;
        for (size_t j = 0; j < g->n; j++) {
            const float wt = (float)((g->weights ? (double)g->weights[j] : 1.0) * g->scale);
            if (!(wt > 0.0f) || !(wt < INFINITY)) continue;
            const uint64_t ko = off_of(st, k + j * p->ks), vo = val ? off_of(st, val + j * p->vs) : UINT64_MAX;
            const int key_hit = in_run(ko, w, delta) && !covered_by_others(ko, jr, drop);
            const int value_hit = vo != UINT64_MAX && in_run(vo, w, delta) && !covered_by_others(vo, jr, drop);
            if (!key_hit && !value_hit) continue;
            for (size_t r = 0; r < pv->n; r++) {
                if (pv->r[r].koff != ko || pv->r[r].voff != vo) continue;
                if ((key_hit && memcmp(pv->r[r].bytes, k + j * p->ks, p->ks) != 0) ||
                    (value_hit && memcmp(pv->r[r].bytes + p->ks, val + j * p->vs, p->vs) != 0))
                    return 1;
            }
        }
    }
    return 0;
}

typedef struct replay_stats {
    size_t configs, skipped, steps, max_runs, max_edits, drops, drops_caught, mismatches, failures;
    int check_drops;
} replay_stats;

/* One configuration: prompt, then steps; the mirror checked after each call. */
static int replay(kvc_cache_config *cc, const char *label, void *ctx)
{
    replay_stats *rs = ctx;
    kvc_stream_config cfg = cc->stream;
    cfg.n_protect = 4, cfg.protect_radius = 1;
    kvc_stream *st = tu_stream(&cfg);
    if (st == NULL) { /* a configuration that needs a larger budget or other shape: not this test's */
        cfg.n_protect = 0, cfg.protect_radius = 0;
        st = tu_stream(&cfg);
    }
    if (st == NULL && cfg.dtype == KVC_DTYPE_KIVI4) { /* a KIVI4 window is whole blocks of 32 */
        cfg.n_window = 32, cfg.budget = 2 * BUDGET;
        st = tu_stream(&cfg);
    }
    if (st == NULL) {
        printf("%-44s no stream at this shape\n", label);
        rs->skipped++;
        return 0;
    }
    const size_t mb = kvc_mirror_bytes(st);
    if (mb == 0) {
        CHECK_MSG(cfg.dtype == KVC_DTYPE_KIVI4, "%s: only KIVI4 is refused", label);
        kvc_mirror *none = NULL;
        unsigned char small[64];
        CHECK(kvc_mirror_init(small, sizeof small, st, &none) == KVC_E_UNSUPPORTED && none == NULL);
        rs->skipped++;
        free(st);
        return 0;
    }
    rs->configs++;
    const size_t arena = kvc_stream_arena_bytes(&cfg);
    void *mmem = aligned_alloc(8, (mb + 7) & ~(size_t)7), *msave = aligned_alloc(8, (mb + 7) & ~(size_t)7);
    kvc_mirror *m = NULL;
    CHECK(kvc_mirror_init(mmem, mb, st, &m) == KVC_OK);
    const uint32_t slots = kvc_mirror_slots(m);
    pool p = pool_make(slots, cfg.dtype, cfg.d, cfg.dv), saved = pool_make(slots, cfg.dtype, cfg.d, cfg.dv);
    kvc_mirror_edit *edits = malloc(slots * sizeof *edits);
    kvc_row_write *runs = malloc(RUNS * sizeof *runs), *fewer = malloc(RUNS * sizeof *runs);
    kvc_row_journal j = {(const unsigned char *)st, arena, runs, RUNS, 0, 0};
    kvc_kernels kern = *kvc_kernels_ref();
    kern.journal = &j;
    kvc_rng r;
    kvc_rng_seed(&r, 909);
    const size_t n_tok = PROMPT + STEPS;
    float *K = tu_normal(&r, n_tok, cfg.d, 1.0), *V = tu_normal(&r, n_tok, cfg.dv, 1.0),
          *Q = tu_normal(&r, n_tok, cfg.d, 1.0);
    for (size_t i = 0; i < n_tok * cfg.dv; i++) V[i] += 0.3f;
    for (size_t i = 0; i < n_tok; i += 7) K[i * cfg.d] += 6.0f; /* key outliers: protected spans fill */
    prev_view pv = {0, NULL};
    uint32_t n_rows = 0;
    size_t n_edits = 0, step_max_runs = 0, step_max_edits = 0, prompt_runs = 0;
    int ok = 1;
    for (size_t t = 0; t <= STEPS && ok; t++) {
        prev_take(&pv, st, &p);
        j.count = 0, j.dropped = 0;
        kvc_status rc;
        if (t == 0) {
            const size_t wb = kvc_stream_prefill_work_bytes(st, PROMPT);
            void *work = wb ? aligned_alloc(8, (wb + 7) & ~(size_t)7) : NULL;
            rc = kvc_stream_prefill(st, &kern, K, cfg.d, V, cfg.dv, PROMPT, work, wb);
            free(work);
        } else {
            const size_t tok = PROMPT + t - 1;
            rc = kvc_stream_append(st, &kern, K + tok * cfg.d, V + tok * cfg.dv);
            if (rc == KVC_OK && kvc_method_observes(cfg.method)) {
                const size_t wb = kvc_stream_attend_observed_work_bytes(st, 1);
                void *work = aligned_alloc(8, (wb + 7) & ~(size_t)7);
                float z[HD];
                rc = kvc_stream_attend_observed(st, &kern, Q + tok * cfg.d, 1, z, work, wb);
                free(work);
            }
        }
        if (rc == KVC_E_CAPACITY) break; /* exact and the exact tails: full */
        CHECK_MSG(rc == KVC_OK, "%s step %zu: %s", label, t, kvc_status_str(rc));
        CHECK_MSG(j.dropped == 0, "%s: more than %u runs in one call", label, RUNS);
        if (t == 0) prompt_runs = j.count;
        if (t > 0 && j.count > step_max_runs) step_max_runs = j.count;
        if (rs->check_drops && t > 0) {
            for (uint32_t drop = 0; drop < j.count; drop++) {
                memcpy(msave, mmem, mb), pool_copy(&saved, &p);
                kvc_row_journal jd = j;
                jd.writes = fewer;
                for (uint32_t i = 0, o = 0; i < j.count; i++)
                    if (i != drop) fewer[o++] = runs[i];
                jd.count = j.count - 1;
                uint32_t nr = 0;
                CHECK(kvc_mirror_step(m, st, &jd, edits, slots, &n_edits, &nr) == KVC_OK);
                pool_apply(&p, st, edits, n_edits);
                const int broken = !pool_equals_view(st, &p, nr);
                const int matters = drop_matters(st, &p, &pv, &j, drop);
                rs->drops++;
                rs->drops_caught += (size_t)broken;
                if (broken != matters) {
                    printf("%s step %zu: run %u dropped: pool %s, oracle %s\n", label, t, drop,
                           broken ? "broken" : "equal", matters ? "matters" : "harmless");
                    rs->mismatches++;
                    ok = 0;
                }
                memcpy(mmem, msave, mb), pool_copy(&p, &saved);
            }
        }
        CHECK(kvc_mirror_step(m, st, &j, edits, slots, &n_edits, &n_rows) == KVC_OK);
        CHECK(n_rows <= slots && n_edits <= slots);
        for (size_t i = 0; i < n_edits; i++)
            for (size_t k = i + 1; k < n_edits; k++)
                CHECK_MSG(edits[i].slot != edits[k].slot, "%s: a slot edited twice", label);
        if (t > 0 && n_edits > step_max_edits) step_max_edits = n_edits;
        pool_apply(&p, st, edits, n_edits);
        if (!pool_equals_view(st, &p, n_rows)) {
            printf("%s step %zu: the pool differs from the view\n", label, t);
            ok = 0;
        }
        rs->steps++;
    }
    printf("%-44s prompt %3zu runs; a step <= %3zu runs, <= %3zu edits; rows %3u of %4u slots, view %zu\n", label,
           prompt_runs, step_max_runs, step_max_edits, n_rows, slots, kvc_stream_view_entries(st));
    if (step_max_runs > rs->max_runs) rs->max_runs = step_max_runs;
    if (step_max_edits > rs->max_edits) rs->max_edits = step_max_edits;
    if (!ok) rs->failures++;
    free(pv.r), free(K), free(V), free(Q), free(runs), free(fewer), free(edits);
    pool_free(&p), pool_free(&saved), free(mmem), free(msave), free(st);
    return 0;
}

static tu_shape shape(void)
{
    tu_shape s;
    memset(&s, 0, sizeof s);
    s.cache.n_layers = 1, s.cache.n_kv_heads = 1, s.cache.head_dim = HD;
    s.budget = BUDGET, s.n_sink = 2, s.n_window = 6, s.prefix_len = PROMPT, s.seed = 17;
    return s;
}

static int replays_every_configuration(void)
{
    printf("seed 909 (data), 17 (streams); budget %u, prompt %u in one call, %u steps\n", BUDGET, PROMPT, STEPS);
    replay_stats rs;
    memset(&rs, 0, sizeof rs);
    const tu_shape s = shape();
    CHECK(tu_each_config(&s, replay, &rs) == 0);
    printf("%zu configurations mirrored (%zu skipped), %zu steps; most runs in a step %zu, most edits in a step %zu\n",
           rs.configs, rs.skipped, rs.steps, rs.max_runs, rs.max_edits);
    CHECK(rs.configs >= 13 && rs.failures == 0);
    return 0;
}

static int dropped_runs_are_caught(void)
{
    printf("seed 909 (data), 17 (streams): every run of every step dropped in turn\n");
    replay_stats rs;
    memset(&rs, 0, sizeof rs);
    rs.check_drops = 1;
    const tu_shape s = shape();
    CHECK(tu_each_config(&s, replay, &rs) == 0);
    printf("%zu runs dropped, %zu broke the pool, %zu disagreed with the oracle\n", rs.drops, rs.drops_caught,
           rs.mismatches);
    CHECK(rs.failures == 0 && rs.mismatches == 0);
    CHECK(rs.drops_caught > 0); /* the planted bug is seen at all */
    return 0;
}

static int refusals_change_nothing(void)
{
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_SUBGEN, HD, HD, BUDGET, 3);
    cfg.dtype = KVC_DTYPE_I8;
    cfg.n_sink = 2, cfg.n_window = 6;
    kvc_stream *st = tu_stream(&cfg), *other;
    CHECK(st != NULL);
    kvc_stream_config cfg2 = cfg;
    cfg2.budget = BUDGET * 4;
    other = tu_stream(&cfg2);
    CHECK(other != NULL);
    float k[HD] = {1}, v[HD] = {2};
    CHECK(kvc_stream_append(st, NULL, k, v) == KVC_OK);
    const size_t mb = kvc_mirror_bytes(st);
    CHECK(mb > 0);
    unsigned char *mem = aligned_alloc(8, (mb + 7) & ~(size_t)7), *copy = malloc(mb);
    kvc_mirror *m = NULL;
    CHECK(kvc_mirror_init(mem, mb - 1, st, &m) == KVC_E_ARG && m == NULL);
    CHECK(kvc_mirror_init(mem + 1, mb, st, &m) == KVC_E_ARG && m == NULL);
    CHECK(kvc_mirror_init(NULL, mb, st, &m) == KVC_E_ARG);
    CHECK(kvc_mirror_init(mem, mb, st, &m) == KVC_OK && m != NULL);
    const uint32_t slots = kvc_mirror_slots(m);
    kvc_mirror_edit *e = malloc(slots * sizeof *e);
    size_t n = 7;
    uint32_t rows = 9;
    memcpy(copy, mem, mb);
    CHECK(kvc_mirror_step(m, st, NULL, e, slots - 1, &n, &rows) == KVC_E_ARG);
    CHECK(kvc_mirror_step(m, st, NULL, NULL, slots, &n, &rows) == KVC_E_ARG);
    CHECK(kvc_mirror_step(m, st, NULL, e, slots, NULL, &rows) == KVC_E_ARG);
    CHECK(kvc_mirror_step(m, other, NULL, e, slots, &n, &rows) == KVC_E_STATE);
    kvc_row_journal above = {(const unsigned char *)st + 8, 64, NULL, 0, 0, 0};
    CHECK(kvc_mirror_step(m, st, &above, e, slots, &n, &rows) == KVC_E_ARG);
    kvc_row_journal lying = {(const unsigned char *)st, 64, NULL, 0, 3, 0};
    CHECK(kvc_mirror_step(m, st, &lying, e, slots, &n, &rows) == KVC_E_ARG);
    CHECK(kvc_mirror_step(NULL, st, NULL, e, slots, &n, &rows) == KVC_E_ARG);
    CHECK(n == 7 && rows == 9);
    CHECK(memcmp(copy, mem, mb) == 0);
    CHECK(kvc_mirror_slots(NULL) == 0 && kvc_mirror_bytes(NULL) == 0);
    /* a good step after the refusals: the sink and the current token */
    CHECK(kvc_mirror_step(m, st, NULL, e, slots, &n, &rows) == KVC_OK);
    CHECK(n >= 1 && rows == n);
    /* the mass by slot back in view order: each slot's value lands on the one entry its row is */
    for (int i = 0; i < 40; i++) {
        for (unsigned c = 0; c < HD; c++) k[c] = (float)((i * 7 + c) % 5) - 2.0f, v[c] = (float)i;
        CHECK(kvc_stream_append(st, NULL, k, v) == KVC_OK);
    }
    CHECK(kvc_mirror_step(m, st, NULL, e, slots, &n, &rows) == KVC_OK);
    const size_t ve = kvc_stream_view_entries(st);
    float *sm = malloc(slots * sizeof *sm);
    double *vm = malloc(ve * sizeof *vm), got = 0.0, want = 0.0;
    for (uint32_t i = 0; i < slots; i++) sm[i] = (float)(i + 1);
    CHECK(kvc_mirror_view_mass(m, st, sm, vm, ve) == KVC_OK);
    kvc_view view;
    CHECK(kvc_stream_view(st, &view) == KVC_OK);
    size_t with_weight = 0, at = 0;
    for (size_t g = 0; g < view.n_seg; g++)
        for (size_t j = 0; j < view.seg[g].n; j++, at++) {
            const double w = (view.seg[g].weights ? (double)view.seg[g].weights[j] : 1.0) * view.seg[g].scale;
            CHECK((w > 0.0) == (vm[at] > 0.0)); /* a weightless entry gets 0 */
            with_weight += w > 0.0;
            got += vm[at];
        }
    memcpy(copy, mem, mb);
    for (uint32_t i = 0; i < rows; i++) want += (double)(i + 1); /* every slot below rows holds a row here */
    CHECK(with_weight == rows && got == want);
    CHECK(kvc_mirror_view_mass(m, st, sm, vm, ve - 1) == KVC_E_ARG);
    CHECK(kvc_mirror_view_mass(m, st, NULL, vm, ve) == KVC_E_ARG);
    CHECK(kvc_mirror_view_mass(m, other, sm, vm, ve) == KVC_E_STATE);
    CHECK(memcmp(copy, mem, mb) == 0); /* reading the mass changes nothing */
    free(sm), free(vm);
    free(e), free(copy), free(mem), free(st), free(other);
    return 0;
}

static int journal_bounds_and_coalescing(void)
{
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_EXACT, HD, HD, BUDGET, 3);
    cfg.dtype = KVC_DTYPE_F16;
    cfg.n_sink = 2, cfg.n_window = 6;
    kvc_stream *st = tu_stream(&cfg);
    CHECK(st != NULL);
    const size_t arena = kvc_stream_arena_bytes(&cfg);
    kvc_row_write one[1];
    kvc_row_journal j = {(const unsigned char *)st, arena, one, 1, 0, 0};
    kvc_kernels kern = *kvc_kernels_ref();
    kern.journal = &j;
    float k[HD], v[HD];
    for (int i = 0; i < 12; i++) {
        for (unsigned c = 0; c < HD; c++) k[c] = (float)(i + c), v[c] = (float)(i - (int)c);
        CHECK(kvc_stream_append(st, &kern, k, v) == KVC_OK);
    }
    /* key and value rows alternate: the first run fits, the rest are counted */
    CHECK(j.count == 1 && j.dropped > 0);
    printf("1-run journal: %u run, %llu rows dropped\n", j.count, (unsigned long long)j.dropped);
    const size_t mb = kvc_mirror_bytes(st);
    void *mem = aligned_alloc(8, (mb + 7) & ~(size_t)7);
    kvc_mirror *m = NULL;
    CHECK(kvc_mirror_init(mem, mb, st, &m) == KVC_OK);
    const uint32_t slots = kvc_mirror_slots(m);
    kvc_mirror_edit *e = malloc(slots * sizeof *e);
    pool p = pool_make(slots, cfg.dtype, cfg.d, cfg.dv);
    size_t n;
    uint32_t rows;
    CHECK(kvc_mirror_step(m, st, &j, e, slots, &n, &rows) == KVC_OK);
    pool_apply(&p, st, e, n);
    CHECK(pool_equals_view(st, &p, rows));
    /* the same again with a dropped count: every row re-sent, nothing else */
    CHECK(kvc_mirror_step(m, st, &j, e, slots, &n, &rows) == KVC_OK);
    CHECK(n == 12 && rows == 12);
    for (size_t i = 0; i < n; i++) CHECK(e[i].what & KVC_MIRROR_ROW);
    pool_apply(&p, st, e, n);
    CHECK(pool_equals_view(st, &p, rows));
    /* a journal with room: a run per row written, never more */
    kvc_row_write many[64];
    kvc_row_journal j2 = {(const unsigned char *)st, arena, many, 64, 0, 0};
    kern.journal = &j2;
    CHECK(kvc_stream_append(st, &kern, k, v) == KVC_OK);
    CHECK(j2.dropped == 0 && j2.count >= 1 && j2.count <= 4); /* window row, method row: keys and values */
    CHECK(kvc_mirror_step(m, st, &j2, e, slots, &n, &rows) == KVC_OK);
    pool_apply(&p, st, e, n);
    CHECK(pool_equals_view(st, &p, rows));
    pool_free(&p), free(e), free(mem), free(st);
    return 0;
}

static const kvc_test_case cases[] = {
    {"replays_every_configuration", replays_every_configuration},
    {"dropped_runs_are_caught", dropped_runs_are_caught},
    {"refusals_change_nothing", refusals_change_nothing},
    {"journal_bounds_and_coalescing", journal_bounds_and_coalescing},
};
KVC_TEST_MAIN(cases)
