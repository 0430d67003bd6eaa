/* Thinformer Express (docs/express.md sections 3-5): the coreset C (all of weight
 * t = 4^r), streaming Compress2 (a base-4 counter of Halve groups) fed by a
 * stratified Subsample, and the three phases:
 *   exact  - the first s tokens enter C with weight 1;
 *   thin   - blocks of t*s tokens: subsample to k*s (k = min(t, c), strata of
 *            q = max(1, t/c)), Compress2 down to s points of weight t, appended
 *            to C (for t = 1, k = 1: the block itself);
 *   halve  - after three thin blocks |C| = 4s: C <- Halve(Halve(C)), t <- 4t.
 * Every random draw is keyed by the call - Compress2 (round, sibling, level,
 * group), Halve phase (round, 0|1), Subsample (round, sibling, stratum) - so an
 * offline run over a known prefix makes exactly the same choices.
 * Exposed to attend: C with weight t, every live Compress2 buffer with weight
 * q 2^l (per-slot weights). Worst case after an update: 6s - 2s/k - 1 points. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "arena.h"
#include "shared/kernel_halving.h"
#include "kvc/kvc_rng.h"
#include "methods.h"
#include "internal/kvc_internal.h"

#define KVC_MAGIC_EXPRESS 0x4B565831u /* "KVX1" */
#define MAX_LEVELS        32u

enum { TAG_C2 = 1, TAG_HALVE = 2, TAG_SUB = 3, TAG_TAIL = 4 };

typedef struct express_state {
    uint32_t magic;
    uint32_t d, dv, s, c, l_mode, center;
    float L, delta, beta;
    uint64_t seed;
    uint64_t n;     /* updates so far */
    uint32_t round; /* t = 4^round */
    uint32_t j;     /* thin blocks since the last Halve phase */
    uint64_t t, pos, q, iota;
    uint32_t k, h;
    uint64_t G0;
    uint32_t c_count;
    uint32_t lvl_count[MAX_LEVELS];
    uint32_t tail_uniform;           /* express-prefill: 1 when the tail is a reservoir (Algorithm R) */
    uint64_t lvl_groups[MAX_LEVELS]; /* Halve calls at each level in this block (draw keys) */
    uint64_t halvings;
    uint64_t c_cap, l_cap;
    uint32_t prefix_tokens; /* express-prefill: prompt tokens that reach the method (0: streaming) */
    uint32_t tail_cap, tail_n;
    uint32_t is_prefill; /* express-prefill (its prompt may have 0 method tokens: then all is tail) */
    uint64_t tail_seen;  /* tokens after the prompt (== tail_n for an exact tail) */
    uint64_t off_ck, off_cv, off_ct, off_lk, off_lv, off_lw, off_lt, off_scratch, off_keep, off_tk, off_tv;
} express_state;
_Static_assert(sizeof(express_state) == 640, "express_state must be the same on every ABI");

/*@ // the plan fields Express's layout reads, in the ranges x_plan gives
    predicate express_sizes_ok(kvc_stream_plan *p) =
      kvc_plan_dims_ok(p) && 2 <= p->xp.s <= 4194304 && 1 <= p->xp.c <= p->xp.s &&
      p->tail_capacity <= p->method_tokens <= 16777216;
*/

/*@ requires 1 <= c && s <= 4194304;
    assigns \nothing;
    ensures \result <= 4 * s;
*/
static uint64_t level_region(uint32_t s, uint32_t c) { return (uint64_t)4 * s - (uint64_t)4 * s / c; }

/* Region sizes. Streaming: C holds up to 4s (inside a Halve phase), the
 * Compress2 levels 4s - 4s/c. express-prefill only ever holds what its prompt
 * makes it hold (the worst case the plan simulated, <= 4s), and a prompt that
 * fits the exact phase (worst <= s) never thins: no level region at all. */
/*@ requires express_sizes_ok(p) && \valid(cap) && \valid(lcap) && \separated(cap, lcap, p);
    assigns *cap, *lcap;
    ensures *cap <= 4 * p->xp.s && *lcap <= 4 * p->xp.s;
*/
static void x_caps(const kvc_stream_plan *p, uint64_t *cap, uint64_t *lcap)
{
    *cap = 4ull * p->xp.s;
    *lcap = level_region(p->xp.s, p->xp.c);
    if (p->method == KVC_METHOD_EXPRESS_PREFILL) {
        const uint64_t worst = (uint64_t)p->method_tokens - p->tail_capacity;
        if (worst < *cap) *cap = worst;
        if (worst <= p->xp.s) *lcap = 0;
    }
}

/*@ requires express_sizes_ok(p) && \valid(g) && \separated(g, p);
    assigns g->c_cap, g->l_cap, g->off_ck, g->off_cv, g->off_ct, g->off_lk, g->off_lv, g->off_lw, g->off_lt,
            g->off_scratch, g->off_keep, g->off_tk, g->off_tv;
    ensures g->c_cap <= 4 * p->xp.s && g->l_cap <= 4 * p->xp.s;
    ensures sizeof(express_state) <= g->off_ck;
    ensures kvc_region_before(g->off_ck, kvc_stream_rows_l(p, g->c_cap, p->d), g->off_cv);
    ensures kvc_region_before(g->off_cv, kvc_stream_rows_l(p, g->c_cap, p->dv), g->off_ct);
    ensures kvc_region_before(g->off_ct, 4 * g->c_cap, g->off_lk);
    ensures kvc_region_before(g->off_lk, kvc_stream_rows_l(p, g->l_cap ? g->l_cap : 1, p->d), g->off_lv);
    ensures kvc_region_before(g->off_lv, kvc_stream_rows_l(p, g->l_cap ? g->l_cap : 1, p->dv), g->off_lw);
    ensures kvc_region_before(g->off_lw, 4 * (g->l_cap ? g->l_cap : 1), g->off_lt);
    ensures kvc_region_before(g->off_lt, 4 * (g->l_cap ? g->l_cap : 1), g->off_scratch);
    ensures kvc_region_before(g->off_scratch, 8 * (p->d + 2 * g->c_cap), g->off_keep);
    ensures kvc_region_before(g->off_keep, g->c_cap, g->off_tk);
    ensures kvc_region_before(g->off_tk, kvc_stream_rows_l(p, p->tail_capacity, p->d), g->off_tv);
    ensures kvc_region_before(g->off_tv, kvc_stream_rows_l(p, p->tail_capacity, p->dv), \result);
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t x_layout(express_state *g, const kvc_stream_plan *p)
{
    uint64_t cap, lcap;
    x_caps(p, &cap, &lcap);
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(express_state));
    g->c_cap = cap, g->l_cap = lcap;
    g->off_ck = kvc_carve(&cur, kvc_rows_bytes(p->dtype, cap, p->d));
    g->off_cv = kvc_carve(&cur, kvc_rows_bytes(p->dtype, cap, p->dv));
    g->off_ct = kvc_carve(&cur, cap * sizeof(uint32_t));
    g->off_lk = kvc_carve(&cur, kvc_rows_bytes(p->dtype, lcap ? lcap : 1, p->d));
    g->off_lv = kvc_carve(&cur, kvc_rows_bytes(p->dtype, lcap ? lcap : 1, p->dv));
    g->off_lw = kvc_carve(&cur, (lcap ? lcap : 1) * sizeof(float));
    g->off_lt = kvc_carve(&cur, (lcap ? lcap : 1) * sizeof(uint32_t));
    g->off_scratch = kvc_carve(&cur, (uint64_t)kvc_kh_scratch_doubles(p->d, (size_t)cap) * sizeof(double));
    g->off_keep = kvc_carve(&cur, cap);
    g->off_tk = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->tail_capacity, p->d));
    g->off_tv = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->tail_capacity, p->dv));
    return cur;
}

/* The row arrays of C, the Compress2 levels and the prefill tail. */
typedef struct x_rows {
    kvc_rows ck, cv, lk, lv, tk, tv;
} x_rows;

static x_rows rows_of(const express_state *g, unsigned dtype, const kvc_kernels *kern)
{
    x_rows r;
    r.ck = kvc_rows_at(g, g->off_ck, g->d, dtype, kern), r.cv = kvc_rows_at(g, g->off_cv, g->dv, dtype, kern);
    r.lk = kvc_rows_at(g, g->off_lk, g->d, dtype, kern), r.lv = kvc_rows_at(g, g->off_lv, g->dv, dtype, kern);
    r.tk = kvc_rows_at(g, g->off_tk, g->d, dtype, kern), r.tv = kvc_rows_at(g, g->off_tv, g->dv, dtype, kern);
    return r;
}

/*@ requires express_sizes_ok(p);
    assigns \nothing;
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t x_arena_size(const kvc_stream_plan *p)
{
    express_state tmp;
    return x_layout(&tmp, p);
}

uint64_t kvc_express_scratch_bytes(const kvc_stream_plan *p)
{
    uint64_t cap, lcap;
    x_caps(p, &cap, &lcap);
    return (uint64_t)kvc_kh_scratch_doubles(p->d, (size_t)cap) * sizeof(double) + cap;
}

static uint32_t log2u(uint64_t x)
{
    uint32_t r = 0;
    while ((1ull << r) < x) r++;
    return r;
}

static size_t level_off(const express_state *g, uint32_t l) { return ((size_t)1 << l) * g->G0 - g->G0; }
static size_t level_size(const express_state *g, uint32_t l) { return ((size_t)1 << l) * g->G0; }

static int x_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    const express_state *g = (const express_state *)st;
    express_state w;
    x_layout(&w, p);
    const int prefill = p->method == KVC_METHOD_EXPRESS_PREFILL;
    if (g->magic != KVC_MAGIC_EXPRESS || g->d != p->d || g->dv != p->dv || g->s != p->xp.s || g->c != p->xp.c ||
        g->l_mode != p->xp.l_mode || g->center != (p->xp.center == 1) ||
        g->prefix_tokens != (prefill ? p->prefix_method_tokens : 0u) || g->is_prefill != (uint32_t)prefill ||
        g->tail_cap != (prefill ? p->tail_capacity : 0u) ||
        g->tail_uniform != (uint32_t)(prefill && p->xp.tail_method == KVC_METHOD_UNIFORM) || g->c_cap != w.c_cap ||
        g->l_cap != w.l_cap || g->off_ck != w.off_ck || g->off_cv != w.off_cv || g->off_ct != w.off_ct ||
        g->off_lk != w.off_lk || g->off_lv != w.off_lv || g->off_lw != w.off_lw || g->off_lt != w.off_lt ||
        g->off_scratch != w.off_scratch || g->off_keep != w.off_keep || g->off_tk != w.off_tk || g->off_tv != w.off_tv)
        return 0;
    /* token counts: prompt (or stream) updates plus the prefill tail, which
       holds min(seen, capacity) of what it saw */
    if (g->tail_seen > method_in || g->n != method_in - g->tail_seen ||
        g->tail_n != (g->tail_seen < g->tail_cap ? g->tail_seen : g->tail_cap) ||
        (g->tail_seen > g->tail_cap && !g->tail_uniform) || (g->tail_seen > 0 && g->n != g->prefix_tokens) ||
        (prefill && g->n > g->prefix_tokens))
        return 0;
    /* the phase registers are what start_block derives from t = 4^round */
    if (g->round > 30 || g->t != 1ull << (2 * g->round) || g->t > (1ull << 60) / g->s || g->j > 2) return 0;
    const uint64_t k = g->t < g->c ? g->t : g->c;
    if (g->k != k || g->h != log2u(k) || g->q != (g->t > g->c ? g->t / g->c : 1u) || g->G0 != 4ull * g->s / k ||
        g->iota >= g->q || g->pos >= g->t * g->s || g->c_count > g->c_cap)
        return 0;
    for (uint32_t l = 0; l < MAX_LEVELS; l++) {
        const uint64_t size = ((uint64_t)1 << (l < g->h ? l : 0)) * g->G0;
        if (l >= g->h ? g->lvl_count[l] != 0
                      : (g->lvl_count[l] >= size || (l > 0 && g->lvl_count[l] % (size / 4) != 0)))
            return 0;
    }
    if (g->n <= g->s) /* exact phase: C is the stream so far */
        return g->c_count == g->n && g->round == 0 && g->j == 0 && g->pos == 0;
    if (g->n != g->t * g->s * (1u + g->j) + g->pos) return 0;
    /* points subsampled in this block so far; with h > 0, Compress2 hands C
       its s points when the block's last point arrives (before its last
       stratum may be over) */
    const uint64_t u = g->pos / g->q + (g->pos % g->q > g->iota);
    const uint64_t block_points = g->h == 0 ? u : (u == (uint64_t)g->k * g->s ? g->s : 0u);
    return g->c_count == (uint64_t)g->s * (1u + g->j) + block_points;
}

static void start_block(express_state *g)
{
    g->k = (uint32_t)(g->t < g->c ? g->t : g->c);
    g->h = log2u(g->k);
    g->q = g->t > g->c ? g->t / g->c : 1;
    g->G0 = (size_t)4 * g->s / g->k;
    g->pos = 0;
    memset(g->lvl_count, 0, sizeof g->lvl_count);
    memset(g->lvl_groups, 0, sizeof g->lvl_groups);
    float *lw = KVC_AT(g, g->off_lw, float);
    for (size_t i = 0; i < g->l_cap; i++) lw[i] = 0.0f;
}

static void x_init(void *arena, const kvc_stream_plan *p, uint64_t seed)
{
    express_state *g = (express_state *)arena;
    x_layout(g, p);
    g->magic = KVC_MAGIC_EXPRESS;
    g->d = p->d, g->dv = p->dv, g->s = p->xp.s, g->c = p->xp.c;
    g->l_mode = p->xp.l_mode, g->center = p->xp.center == 1;
    g->L = p->xp.L, g->delta = p->xp.delta, g->beta = p->beta;
    g->seed = seed;
    g->t = 1;
    if (p->method == KVC_METHOD_EXPRESS_PREFILL) {
        g->is_prefill = 1;
        g->prefix_tokens = p->prefix_method_tokens;
        g->tail_cap = p->tail_capacity;
        g->tail_uniform = p->xp.tail_method == KVC_METHOD_UNIFORM;
    }
    start_block(g);
}

static int x_can_accept(const void *st)
{
    const express_state *g = (const express_state *)st;
    return !g->is_prefill || g->n < g->prefix_tokens || g->tail_n < g->tail_cap || g->tail_uniform;
}

/* Halve n points at slots [first, first+n) of (k, v, tok) in place: the
 * survivors, in order, end up in [first, first + n/2). */
static void halve_in_place(express_state *g, const kvc_rows *K, const kvc_rows *V, uint32_t *T, size_t first, size_t n,
                           uint64_t key)
{
    kvc_kh_io io;
    io.keys = *K, io.values = *V, io.d = g->d, io.dv = g->dv, io.first = first, io.S = n;
    io.beta = g->beta, io.center = g->center;
    io.L = g->l_mode == KVC_EXPRESS_L_THEORY ? kvc_kh_theory_L(g->delta, g->round, g->k, n) : g->L;
    io.key = key;
    io.scratch = KVC_AT(g, g->off_scratch, double);
    io.keep = KVC_AT(g, g->off_keep, uint8_t);
    kvc_kh_select(&io);
    g->halvings++;
    size_t out = first;
    for (size_t i = 0; i < n; i++) {
        if (!io.keep[i]) continue;
        const size_t src = first + i;
        if (src != out) {
            kvc_row_copy(K, out, K, src);
            kvc_row_copy(V, out, V, src);
            T[out] = T[src];
        }
        out++;
    }
}

/* A point into C: an f32 vector (k != NULL, quantised by the store kernel)
   or level slot `src` (moved as bytes). */
static void c_append(express_state *g, const x_rows *R, const float *k, const float *v, size_t src, uint32_t tok)
{
    if (g->c_count >= g->c_cap) return; /* unreachable for a state that passed kvc_express_check */
    if (k != NULL) {
        kvc_row_store(&R->ck, g->c_count, k);
        kvc_row_store(&R->cv, g->c_count, v);
    } else {
        kvc_row_copy(&R->ck, g->c_count, &R->lk, src);
        kvc_row_copy(&R->cv, g->c_count, &R->lv, src);
    }
    KVC_AT(g, g->off_ct, uint32_t)[g->c_count] = tok;
    g->c_count++;
}

/* Append `n` points from level slots [src, src+n) to level l (or to C when l == h). */
static void lift(express_state *g, const x_rows *R, uint32_t l, size_t src, size_t n)
{
    float *lw = KVC_AT(g, g->off_lw, float);
    uint32_t *lt = KVC_AT(g, g->off_lt, uint32_t);
    if (l == g->h) {
        for (size_t i = 0; i < n; i++) c_append(g, R, NULL, NULL, src + i, lt[src + i]);
        return;
    }
    const size_t dst = level_off(g, l) + g->lvl_count[l];
    for (size_t i = 0; i < n; i++) {
        kvc_row_copy(&R->lk, dst + i, &R->lk, src + i);
        kvc_row_copy(&R->lv, dst + i, &R->lv, src + i);
        lt[dst + i] = lt[src + i];
        lw[dst + i] = (float)((double)g->q * ldexp(1.0, (int)l));
    }
    g->lvl_count[l] += (uint32_t)n;
}

/* Streaming Compress2: push one subsampled point (weight q) and carry. */
static void compress2_push(express_state *g, const x_rows *R, const float *k, const float *v, uint32_t tok)
{
    if (g->h == 0) {
        c_append(g, R, k, v, 0, tok); /* k = 1: the identity (round 0: weight t = 1) */
        return;
    }
    float *lw = KVC_AT(g, g->off_lw, float);
    uint32_t *lt = KVC_AT(g, g->off_lt, uint32_t);
    const size_t slot = g->lvl_count[0];
    kvc_row_store(&R->lk, slot, k);
    kvc_row_store(&R->lv, slot, v);
    lt[slot] = tok;
    lw[slot] = (float)g->q;
    g->lvl_count[0]++;
    for (uint32_t l = 0; l < g->h && g->lvl_count[l] == level_size(g, l); l++) {
        const size_t off = level_off(g, l), n = level_size(g, l);
        const uint64_t key = kvc_kh_key(g->seed, TAG_C2, g->round, g->j, l, g->lvl_groups[l]++);
        halve_in_place(g, &R->lk, &R->lv, lt, off, n, key);
        for (size_t i = 0; i < n; i++) lw[off + i] = 0.0f;
        g->lvl_count[l] = 0;
        lift(g, R, l + 1, off, n / 2);
    }
}

static void x_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    express_state *g = (express_state *)st;
    const x_rows R = rows_of(g, cx->plan->dtype, cx->kern);
    if (g->is_prefill && g->n >= g->prefix_tokens) {
        /* express-prefill after the prompt: the tail, exact until full, then
           (reservoir only: x_can_accept refuses an exact one) Algorithm R
           with a counter-based draw, so the state is the same on every ABI */
        uint64_t slot = g->tail_n;
        if (g->tail_n == g->tail_cap) {
            kvc_rng draw = {kvc_kh_key(g->seed, TAG_TAIL, 0, 0, 0, g->tail_seen), 0};
            slot = (uint64_t)(kvc_rng_unit(&draw) * (double)(g->tail_seen + 1));
        } else
            g->tail_n++;
        g->tail_seen++;
        if (slot < g->tail_cap) {
            kvc_row_store(&R.tk, (size_t)slot, k);
            kvc_row_store(&R.tv, (size_t)slot, v);
        }
        return;
    }
    g->n++;
    if (g->n <= g->s) { /* exact phase */
        c_append(g, &R, k, v, 0, (uint32_t)token);
        return;
    }
    /* Subsample: one pre-drawn offset per stratum of q tokens */
    const uint64_t r = g->pos % g->q;
    if (r == 0)
        g->iota = g->q > 1 ? kvc_rng_at(kvc_kh_key(g->seed, TAG_SUB, g->round, g->j, 0, g->pos / g->q), 0) % g->q : 0;
    if (r == g->iota) compress2_push(g, &R, k, v, (uint32_t)token);
    g->pos++;
    if (g->pos == g->t * g->s) { /* the block is complete: its s points are in C */
        g->j++;
        if (g->j == 3) { /* Halve phase: 4s -> 2s -> s, weight x4 */
            uint32_t *ct = KVC_AT(g, g->off_ct, uint32_t);
            halve_in_place(g, &R.ck, &R.cv, ct, 0, g->c_count, kvc_kh_key(g->seed, TAG_HALVE, g->round, 0, 0, 0));
            halve_in_place(g, &R.ck, &R.cv, ct, 0, g->c_count / 2, kvc_kh_key(g->seed, TAG_HALVE, g->round, 1, 0, 0));
            g->c_count /= 4;
            g->t *= 4;
            g->round++;
            g->j = 0;
        }
        start_block(g);
    }
}

static size_t x_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const express_state *g = (const express_state *)st;
    const x_rows R = rows_of(g, p->dtype, NULL);
    kvc_segment_rows(&seg[0], &R.ck, &R.cv, 0);
    seg[0].weights = NULL;
    seg[0].scale = (double)g->t;
    seg[0].n = g->c_count;
    seg[0].role = KVC_SET_BOTH;
    kvc_segment_rows(&seg[1], &R.lk, &R.lv, 0);
    seg[1].weights = KVC_AT_C(g, g->off_lw, float);
    seg[1].scale = 1.0;
    seg[1].n = g->l_cap;
    seg[1].role = KVC_SET_BOTH;
    if (!g->is_prefill) return 2;
    kvc_segment_rows(&seg[2], &R.tk, &R.tv, 0);
    seg[2].weights = NULL;
    seg[2].scale = g->tail_n ? (double)g->tail_seen / (double)g->tail_n : 1.0;
    seg[2].n = g->tail_n;
    seg[2].role = KVC_SET_BOTH;
    return 3;
}

static uint64_t x_elements(const void *st)
{
    const express_state *g = (const express_state *)st;
    uint64_t n = g->c_count;
    for (uint32_t l = 0; l < g->h; l++) n += g->lvl_count[l];
    return (n + g->tail_n) * (g->d + g->dv);
}

static void x_fill_stats(const void *st, kvc_stream_stats *s)
{
    const express_state *g = (const express_state *)st;
    s->counters.halvings = g->halvings;
    s->counters.round = g->round;
}

static const express_state *x_of(const kvc_stream *st)
{
    const kvc_stream_plan *p = kvc_stream_get_plan(st);
    if (p == NULL || (p->method != KVC_METHOD_EXPRESS && p->method != KVC_METHOD_EXPRESS_PREFILL)) return NULL;
    return (const express_state *)kvc_stream_method_state(st);
}

kvc_status kvc_express_info(const kvc_stream *st, kvc_express_state_info *out)
{
    const express_state *g = x_of(st);
    if (g == NULL) return KVC_E_STATE;
    if (out == NULL) return KVC_E_ARG;
    memset(out, 0, sizeof *out);
    out->s = g->s, out->c = g->c, out->round = g->round, out->j = g->j;
    out->t = g->t, out->q = g->q, out->k = g->k, out->h = g->h, out->updates = g->n;
    out->c_count = g->c_count;
    out->c_tokens = KVC_AT_C(g, g->off_ct, uint32_t);
    for (uint32_t l = 0; l < g->h && l < 32; l++) {
        out->level_count[l] = g->lvl_count[l];
        out->level_tokens[l] = KVC_AT_C(g, g->off_lt, uint32_t) + level_off(g, l);
    }
    double w = (double)g->c_count * (double)g->t;
    const float *lw = KVC_AT_C(g, g->off_lw, float);
    for (size_t i = 0; i < g->l_cap; i++) w += lw[i];
    out->weight_sum = w;
    return KVC_OK;
}

/* Largest cache Express exposes at any of the first m updates with (s, c):
 * a count-only simulation of the phases (no data), O(m). */
uint64_t kvc_express_prefix_worst(uint64_t m, uint64_t s, uint64_t c)
{
    const uint64_t formula = 6 * s - 2 * s / c - 1 > 4 * s ? 6 * s - 2 * s / c - 1 : 4 * s;
    /* long prompts, or rounds that subsample (where the chosen offset moves a
       point between counts): the streaming worst case, which bounds them all */
    if (m > (1u << 24) || (s * c <= UINT64_MAX / s && m > s * c * s) || s * c > UINT64_MAX / s) return formula;
    uint64_t best = 0, C = 0, t = 1, pos = 0, j = 0, lv[MAX_LEVELS] = {0};
    uint64_t k = 1, h = 0, q = 1, G0 = 4 * s;
    for (uint64_t n = 1; n <= m; n++) {
        if (n <= s) {
            C++;
        } else {
            if (pos % q == 0) { /* the stratum's point: position does not matter for counts */
                if (h == 0) {
                    C++;
                } else {
                    lv[0]++;
                    for (uint64_t l = 0; l < h && lv[l] == (G0 << l); l++) {
                        lv[l] = 0;
                        if (l + 1 == h)
                            C += (G0 << l) / 2;
                        else
                            lv[l + 1] += (G0 << l) / 2;
                    }
                }
            }
            pos++;
            if (pos == t * s) {
                if (++j == 3) {
                    if (C > best) best = C; /* 4s inside the Halve phase */
                    C /= 4, t *= 4, j = 0;
                }
                k = t < c ? t : c;
                h = 0;
                while ((1ull << h) < k) h++;
                q = t > c ? t / c : 1;
                G0 = 4 * s / k;
                pos = 0;
                for (uint64_t l = 0; l < MAX_LEVELS; l++) lv[l] = 0;
            }
        }
        uint64_t exposed = C;
        for (uint64_t l = 0; l < h; l++) exposed += lv[l];
        if (exposed > best) best = exposed;
    }
    return best;
}

/* ---- registry entries ---- */
#define KVC_EXPRESS_DEFAULT_L_MODE KVC_EXPRESS_L_CONST
#define KVC_EXPRESS_DEFAULT_CENTER 1u

static const char *ops_fields(const kvc_stream_config *c)
{
    if (c->method == KVC_METHOD_EXPRESS_PREFILL && (c->prefix_len < 1 || c->prefix_len > KVC_MAX_BUDGET * 16u))
        return "express-prefill needs prefix_len, the prompt length it compresses (1 .. 2^28)";
    const kvc_express_params *x = &c->params.express;
    if (x->s != 0 && (x->s < 2 || (x->s & (x->s - 1)) != 0 || x->s > (1u << 22)))
        return "express s must be a power of two in 2..2^22 (0 = derive)";
    if (x->c != 0 && ((x->c & (x->c - 1)) != 0 || (x->s != 0 && x->c > x->s)))
        return "express c must be a power of two dividing s (0 = s)";
    if (x->l_mode > KVC_EXPRESS_L_CONST) return "express l_mode must be theory or const";
    if (!(x->L >= 0.0f) || !isfinite(x->L)) return "express L must be finite and > 0 (0 = 1)";
    if (!(x->delta >= 0.0f && x->delta < 1.0f)) return "express delta must be in (0, 1) (0 = 0.5)";
    if (x->center > 2) return "express center must be 1 (on) or 2 (off)";
    if (c->method == KVC_METHOD_EXPRESS_PREFILL && !kvc_prefill_tail_ok(x->tail_method))
        return "express-prefill tail_method must be exact or uniform (0 = uniform)";
    return NULL;
}

/* The plan's search (s, c, the prefill simulation of kvc_express_prefix_worst).
 * trusted-by: writes the fields in its assigns clause only (read it: every
 * write is to x, p->xp, p->prefix_method_tokens, p->tail_capacity,
 * p->metadata_bytes or *method_worst); plan_build re-checks the worst case
 * and the metadata bytes at run time, x_plan the ranges its layout needs;
 * tests/unit/test_express.c checks the plans' s, c and worst cases. */
/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->prefix_method_tokens, p->xp, p->tail_capacity, p->metadata_bytes, *method_worst;
*/
static const char *x_plan_search(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    const uint64_t tok = (uint64_t)c->d + c->dv;
    const int prefill = c->method == KVC_METHOD_EXPRESS_PREFILL;
    const uint64_t exact_regions = (uint64_t)c->n_sink + c->n_window + 1u;
    const uint64_t m = prefill && c->prefix_len > exact_regions ? c->prefix_len - exact_regions : 0;
    if (prefill) p->prefix_method_tokens = (uint32_t)m;
    kvc_express_params x = c->params.express;
    x.l_mode = x.l_mode ? x.l_mode : KVC_EXPRESS_DEFAULT_L_MODE;
    x.L = x.L > 0.0f ? x.L : 1.0f;
    x.delta = x.delta > 0.0f ? x.delta : 0.5f;
    /* a reservoir by default after a prompt: a decoder never stops; the
       streaming form has no tail (0) */
    x.tail_method = prefill ? kvc_prefill_tail_resolved(x.tail_method) : 0u;
    x.center = x.center ? x.center : KVC_EXPRESS_DEFAULT_CENTER;
    if (x.s == 0) {
        for (uint64_t s = 2; s <= (1u << 22); s *= 2) {
            const uint64_t cc = x.c ? x.c : s;
            if (cc > s) continue;
            const uint64_t worst = prefill ? kvc_express_prefix_worst(m, s, cc)
                                           : (6 * s - 2 * s / cc - 1 > 4 * s ? 6 * s - 2 * s / cc - 1 : 4 * s);
            if (worst > p->method_tokens) break;
            x.s = (uint32_t)s;
            /* a prompt whose method part fits the exact phase (m <= s) is
               held exactly by every larger s too: stop at the smallest
               (the search used to run to s = 2^22, a 17.7 GB arena) */
            if (prefill && s >= m) break;
        }
        if (x.s == 0) return "budget too small for express: even s = 2 (worst case 9 tokens) does not fit";
    }
    x.c = x.c ? x.c : x.s;
    if (x.c > x.s) return "express c must divide s";
    const uint64_t wx = 6ull * x.s - 2ull * x.s / x.c - 1;
    const uint64_t worst = prefill ? kvc_express_prefix_worst(m, x.s, x.c) : (wx > 4ull * x.s ? wx : 4ull * x.s);
    if (worst > p->method_tokens) return "express s does not fit the method budget (worst case 6s - 2s/c - 1)";
    p->xp = x;
    if (prefill) p->tail_capacity = (uint32_t)(p->method_tokens - worst);
    *method_worst = (worst + p->tail_capacity) * tok;
    p->metadata_bytes = (8ull * x.s) * (sizeof(uint32_t) + sizeof(float)) + kvc_express_scratch_bytes(p);
    return NULL;
}

/*@ requires \valid_read(p);
    assigns \nothing;
    ensures \result != 0 ==> express_sizes_ok(p);
*/
static int x_sizes_in_range(const kvc_stream_plan *p)
{
    return kvc_plan_dims_in_range(p) && 2 <= p->xp.s && p->xp.s <= (1u << 22) && 1 <= p->xp.c && p->xp.c <= p->xp.s &&
           p->tail_capacity <= p->method_tokens && p->method_tokens <= KVC_MAX_BUDGET;
}

/* The search, then the ranges the layout assumes, checked: a search that
 * left them (none does: the 227 tests) is refused, never carved. */
/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->prefix_method_tokens, p->xp, p->tail_capacity, p->metadata_bytes, *method_worst;
    ensures \result == \null ==> express_sizes_ok(p);
*/
static const char *x_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    const char *why = x_plan_search(c, p, method_worst);
    if (why == NULL && !x_sizes_in_range(p)) why = "express: the plan left the ranges its layout assumes";
    return why;
}

/* "theory" or a constant L: two fields, one flag ("0": both to their default) */
static const kvc_method_param L_number = {.desc = {"express-L", KVC_PARAM_F32, 1e-6, 1e6, NULL, NULL, NULL},
                                          .offset = offsetof(kvc_stream_config, params.express.L)};

static kvc_status set_L(kvc_stream_config *c, const char *text)
{
    if (strcmp(text, "theory") == 0) {
        c->params.express.l_mode = KVC_EXPRESS_L_THEORY;
        return KVC_OK;
    }
    if (strcmp(text, "0") == 0) {
        c->params.express.l_mode = 0u, c->params.express.L = 0.0f;
        return KVC_OK;
    }
    kvc_stream_config tmp = *c;
    if (kvc_param_set_number(&tmp, &L_number, text) != KVC_OK || tmp.params.express.L == 0.0f) return KVC_E_ARG;
    tmp.params.express.l_mode = KVC_EXPRESS_L_CONST;
    *c = tmp;
    return KVC_OK;
}

static kvc_status get_L(const kvc_stream_config *c, char *buf, size_t cap)
{
    if (c->params.express.l_mode != KVC_EXPRESS_L_THEORY) return kvc_param_get_number(c, &L_number, buf, cap);
    return kvc_param_put_text(buf, cap, "theory", strlen("theory"));
}

static const uint32_t center_values[] = {1, 2};
static const kvc_method_param params[] = {
    {.desc = {"express-s", KVC_PARAM_U32, 2, 1u << 22, NULL, "largest whose worst case fits",
              "cache size s (power of two)"},
     .offset = offsetof(kvc_stream_config, params.express.s)},
    {.desc = {"express-c", KVC_PARAM_U32, 1, 1u << 22, NULL, "s", "inflation factor c (power of two dividing s)"},
     .offset = offsetof(kvc_stream_config, params.express.c)},
    {.desc = {"express-L", KVC_PARAM_F32, 1e-6, 1e6, "theory", "1",
              "kernel-halving threshold scale: a constant or theory"},
     .offset = offsetof(kvc_stream_config, params.express.L),
     .set = set_L,
     .get = get_L},
    {.desc = {"express-delta", KVC_PARAM_F32, 1e-12, 0.999999, NULL, "0.5", "theory L: total failure probability"},
     .offset = offsetof(kvc_stream_config, params.express.delta)},
    {.desc = {"express-center", KVC_PARAM_CHOICE, 0, 0, "on|off", "on", "centre keys on each halving call's mean"},
     .offset = offsetof(kvc_stream_config, params.express.center),
     .choice_values = center_values},
    /* prefill only: the streaming form lists the entries before this one */
    {.desc = {"express-tail", KVC_PARAM_CHOICE, 0, 0, "exact|uniform", "uniform",
              "prefill: what holds the tokens after the prompt (exact refuses when full)"},
     .offset = offsetof(kvc_stream_config, params.express.tail_method),
     .choice_values = kvc_prefill_tail_values},
};

static void x_describe(const kvc_stream_config *c, const kvc_stream_plan *p, kvc_text *out)
{
    if (p->method == KVC_METHOD_EXPRESS_PREFILL)
        kvc_text_add(out, " prefix=%u tail=%u (%s)", (unsigned)c->prefix_len, (unsigned)p->tail_capacity,
                     p->xp.tail_method == KVC_METHOD_EXACT ? "exact" : "reservoir");
    const int theory = p->xp.l_mode == KVC_EXPRESS_L_THEORY;
    kvc_text_add(out, " s=%u c=%u L=%s%g center=%s", (unsigned)p->xp.s, (unsigned)p->xp.c,
                 theory ? "theory,delta=" : "", theory ? (double)p->xp.delta : (double)p->xp.L,
                 (unsigned)p->xp.center == 1 ? "on" : "off");
}

/* The two forms share every entry but their id and parameters (the
 * streaming form has no tail: express-tail is the last parameter). */
#define EXPRESS_OPS(ID, N_PARAMS)                                                                                      \
    {                                                                                                                  \
        .id = (ID), KVC_METHOD_STATE_OPS(x), .fields = ops_fields, .can_accept = x_can_accept,                         \
        .fill_stats = x_fill_stats, .params = params, .n_params = (N_PARAMS), .choices_read_values = 1,                \
        .describe = x_describe                                                                                         \
    }
const kvc_method_ops kvc_method_ops_express = EXPRESS_OPS(KVC_METHOD_EXPRESS, sizeof params / sizeof params[0] - 1u);
const kvc_method_ops kvc_method_ops_express_prefill =
    EXPRESS_OPS(KVC_METHOD_EXPRESS_PREFILL, sizeof params / sizeof params[0]);
