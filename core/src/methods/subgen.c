/* SubGen (docs/methods.md section 1): online key clustering for the softmax
 * denominator, a ||v||^2-proportional reservoir for the numerator, and the
 * bounded-memory rule (start radius, doubling, greedy merge, key re-test).
 *
 * Two ways to read it (kvc_estimator):
 *  - paper: D = the cluster samples (weights n_i/t), N = the reservoir
 *    (weights mu/(s ||v||^2)). Each is unbiased, but on SmolLM2 the worst
 *    queries put 82-99% of their mass in the middle, D's sample misses the
 *    few tokens that carry it (D at 1-10% of the truth) while N holds one of
 *    them with a large weight (2-12x over): the output leaves the hull of
 *    the values by 25-95x, the next layer's input is out of distribution,
 *    and perplexity reaches 1e9 (README, "Why SubGen and BalanceKV diverged").
 *  - self (default): the cluster samples also keep their values, and both
 *    estimators are read as one self-normalised mixture,
 *        out = (N_c + N_r) / (D_c + D_r),
 *    N_c, D_c from the cluster samples (weights n_i/t), N_r, D_r from the
 *    reservoir (weights mu/(s ||v||^2)), each pair scaled by 1/2. Every one of
 *    the four is an unbiased estimate of its sum (importance sampling with any
 *    proposal is), so the ratio is consistent with bias O(1/samples); and
 *    since one weight multiplies both the key's score and its value, the
 *    output is a convex combination of held values: it cannot leave their
 *    box, so no layer can feed the next an out-of-range vector. The price is
 *    t * dv more elements per cluster (fewer clusters for a budget).
 *
 * Arrays (offsets from the header): representatives m_max x d, their token
 * ids and counts; samples m_max x t key rows with token ids and per-slot
 * weights n_i/t (the denominator segment reads them directly); reservoir s
 * key rows, s value rows, s inverse squared norms and token ids. Live
 * clusters are kept compacted at the front, in order of creation. Sample and
 * reservoir rows are in the stream's storage type; the representatives stay
 * f32: they only steer the clustering (never attended), and quantising them
 * would move every cluster boundary. */
#include <float.h>
#include <math.h>

#include "arena.h"
#include "kvc/kvc_rng.h"
#include "methods.h"
#include "shared/rows.h"
#include "internal/kvc_internal.h"

typedef struct subgen_state {
    uint32_t magic;
    uint32_t d, dv, t, s, m_max;
    uint32_t m;         /* live clusters */
    uint32_t doublings; /* radius doublings */
    uint32_t merges;    /* clusters absorbed */
    uint32_t has_ref;   /* a token with ||v|| > 0 arrived: every reservoir slot is filled */
    int32_t ref_exp;    /* slot weights are 2^ref_exp / ||v||^2 (see reservoir_update) */
    uint32_t self_norm; /* 1: KVC_ESTIMATOR_SELF (samples hold values too) */
    double delta;       /* current radius */
    double mu;          /* sum of ||v||^2 */
    uint64_t n_total;   /* tokens seen by the method */
    kvc_rng rng;
    uint64_t off_rep, off_rep_tok, off_cnt;
    uint64_t off_samp, off_samp_v, off_samp_tok, off_samp_w;
    uint64_t off_res_k, off_res_v, off_res_w, off_res_tok;
} subgen_state;
_Static_assert(sizeof(subgen_state) == 176, "subgen_state must be the same on every ABI");

/*@ // the plan fields SubGen's layout reads, in the ranges subgen_plan gives
    // (m_max (t + 1) <= the budget's elements <= 2^24 * 512)
    predicate subgen_sizes_ok(integer d, integer dv, integer t, integer s, integer m_max) =
      1 <= d <= 256 && 1 <= dv <= 256 && 1 <= t <= 4096 && 1 <= s <= 16777216 && 1 <= m_max &&
      m_max * (t + 1) <= 8589934592;
*/

/*@ requires \valid_read(p);
    assigns \nothing;
    ensures \result == (p->subgen_estimator != KVC_ESTIMATOR_PAPER);
*/
static int is_self(const kvc_stream_plan *p) { return p->subgen_estimator != KVC_ESTIMATOR_PAPER; }

/*@ requires subgen_sizes_ok(d, dv, t, s, m_max) && \valid(g);
    assigns g->off_rep, g->off_rep_tok, g->off_cnt, g->off_samp, g->off_samp_v, g->off_samp_tok, g->off_samp_w,
            g->off_res_k, g->off_res_v, g->off_res_w, g->off_res_tok;
    ensures sizeof(subgen_state) <= g->off_rep;
    ensures kvc_region_before(g->off_rep, m_max * d * 4, g->off_rep_tok);
    ensures kvc_region_before(g->off_rep_tok, m_max * 4, g->off_cnt);
    ensures kvc_region_before(g->off_cnt, m_max * 8, g->off_samp);
    ensures kvc_region_before(g->off_samp, m_max * t * kvc_row_bytes_l(dtype, d), g->off_samp_v);
    ensures kvc_region_before(g->off_samp_v, self_norm ? m_max * t * kvc_row_bytes_l(dtype, dv) : 0, g->off_samp_tok);
    ensures kvc_region_before(g->off_samp_tok, m_max * t * 4, g->off_samp_w);
    ensures kvc_region_before(g->off_samp_w, m_max * t * 4, g->off_res_k);
    ensures kvc_region_before(g->off_res_k, s * kvc_row_bytes_l(dtype, d), g->off_res_v);
    ensures kvc_region_before(g->off_res_v, s * kvc_row_bytes_l(dtype, dv), g->off_res_w);
    ensures kvc_region_before(g->off_res_w, s * 4, g->off_res_tok);
    ensures kvc_region_before(g->off_res_tok, s * 4, \result);
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t subgen_layout(subgen_state *g, uint32_t d, uint32_t dv, uint32_t t, uint32_t s, uint32_t m_max,
                              unsigned dtype, int self_norm)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(subgen_state));
    //@ ghost kvc_mul_le(m_max, m_max, t, t + 1);
    //@ ghost kvc_mul_le(m_max, m_max, 1, t + 1);
    //@ ghost kvc_mul_le(m_max, 8589934592, d, 256);
    const uint64_t slots = (uint64_t)m_max * t;
    g->off_rep = kvc_carve(&cur, (uint64_t)m_max * d * sizeof(float));
    g->off_rep_tok = kvc_carve(&cur, (uint64_t)m_max * sizeof(uint32_t));
    g->off_cnt = kvc_carve(&cur, (uint64_t)m_max * sizeof(uint64_t));
    g->off_samp = kvc_carve(&cur, kvc_rows_bytes(dtype, slots, d));
    g->off_samp_v = kvc_carve(&cur, self_norm ? kvc_rows_bytes(dtype, slots, dv) : 0u);
    g->off_samp_tok = kvc_carve(&cur, slots * sizeof(uint32_t));
    g->off_samp_w = kvc_carve(&cur, slots * sizeof(float));
    g->off_res_k = kvc_carve(&cur, kvc_rows_bytes(dtype, s, d));
    g->off_res_v = kvc_carve(&cur, kvc_rows_bytes(dtype, s, dv));
    g->off_res_w = kvc_carve(&cur, (uint64_t)s * sizeof(float));
    g->off_res_tok = kvc_carve(&cur, (uint64_t)s * sizeof(uint32_t));
    return cur;
}

static int subgen_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    const subgen_state *g = (const subgen_state *)st;
    subgen_state w;
    subgen_layout(&w, p->d, p->dv, p->t, p->s, p->m_max, p->dtype, is_self(p));
    return g->magic == KVC_MAGIC_SUBGEN && g->d == p->d && g->dv == p->dv && g->t == p->t && g->s == p->s &&
           g->m_max == p->m_max && g->off_rep == w.off_rep && g->off_rep_tok == w.off_rep_tok &&
           g->off_cnt == w.off_cnt && g->off_samp == w.off_samp && g->off_samp_v == w.off_samp_v &&
           g->self_norm == (uint32_t)is_self(p) && g->off_samp_tok == w.off_samp_tok && g->off_samp_w == w.off_samp_w &&
           g->off_res_k == w.off_res_k && g->off_res_v == w.off_res_v && g->off_res_w == w.off_res_w &&
           g->off_res_tok == w.off_res_tok && g->m <= g->m_max && (g->m == 0) == (g->n_total == 0) &&
           g->n_total == method_in && g->has_ref <= 1u &&
           /* a NaN radius never lets a full single cluster accept a key: the
              doubling loop would not end */
           g->delta >= 0.0 && isfinite(g->delta) && g->mu >= 0.0 && isfinite(g->mu) && g->ref_exp > -4000 &&
           g->ref_exp < 4000;
}

/*@ requires kvc_plan_dims_ok(p) && subgen_sizes_ok(p->d, p->dv, p->t, p->s, p->m_max);
    assigns \nothing;
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t subgen_arena_size(const kvc_stream_plan *p)
{
    subgen_state tmp;
    return subgen_layout(&tmp, p->d, p->dv, p->t, p->s, p->m_max, p->dtype, is_self(p));
}

static void subgen_init(void *arena, const kvc_stream_plan *p, uint64_t seed)
{
    subgen_state *g = (subgen_state *)arena;
    subgen_layout(g, p->d, p->dv, p->t, p->s, p->m_max, p->dtype, is_self(p));
    g->magic = KVC_MAGIC_SUBGEN;
    g->self_norm = (uint32_t)is_self(p);
    g->d = p->d;
    g->dv = p->dv;
    g->t = p->t;
    g->s = p->s;
    g->m_max = p->m_max;
    g->delta = p->delta0;
    kvc_rng_seed(&g->rng, seed);
}

/* The row arrays of one update: samples (m_max * t key rows, and value rows
 * when self-normalised; SV.base is NULL otherwise), reservoir keys and values. */
typedef struct sg_rows {
    kvc_rows S, SV, RK, RV;
} sg_rows;

static sg_rows rows_of(const subgen_state *g, unsigned dtype, const kvc_kernels *kern)
{
    sg_rows r;
    r.S = kvc_rows_at(g, g->off_samp, g->d, dtype, kern);
    r.SV = kvc_rows_at(g, g->off_samp_v, g->dv, dtype, kern);
    if (!g->self_norm) r.SV.base = NULL;
    r.RK = kvc_rows_at(g, g->off_res_k, g->d, dtype, kern);
    r.RV = kvc_rows_at(g, g->off_res_v, g->dv, dtype, kern);
    return r;
}

/* ---- accessors ---- */
static float *rep(subgen_state *g, uint32_t i) { return KVC_AT(g, g->off_rep, float) + (size_t)i * g->d; }
static uint32_t *rep_tok(subgen_state *g) { return KVC_AT(g, g->off_rep_tok, uint32_t); }
static uint64_t *cnt(subgen_state *g) { return KVC_AT(g, g->off_cnt, uint64_t); }
static size_t samp(const subgen_state *g, uint32_t i, uint32_t j) { return (size_t)i * g->t + j; }
static uint32_t *samp_tok(subgen_state *g, uint32_t i)
{
    return KVC_AT(g, g->off_samp_tok, uint32_t) + (size_t)i * g->t;
}
static float *samp_w(subgen_state *g, uint32_t i) { return KVC_AT(g, g->off_samp_w, float) + (size_t)i * g->t; }

static void set_cluster_weights(subgen_state *g, uint32_t i)
{
    const float w = (float)((double)cnt(g)[i] / (double)g->t);
    float *wi = samp_w(g, i);
    for (uint32_t j = 0; j < g->t; j++) wi[j] = w;
}

/* Sample slot `dst` becomes a copy of slot `src` (key, and value when held). */
static void copy_slot(const sg_rows *r, size_t dst, size_t src)
{
    kvc_row_copy(&r->S, dst, &r->S, src);
    if (r->SV.base) kvc_row_copy(&r->SV, dst, &r->SV, src);
}

static void store_slot(const sg_rows *r, size_t j, const float *k, const float *v)
{
    kvc_row_store(&r->S, j, k);
    if (r->SV.base) kvc_row_store(&r->SV, j, v);
}

static void open_cluster(subgen_state *g, const sg_rows *r, const float *k, const float *v, uint32_t token)
{
    const uint32_t i = g->m++;
    memcpy(rep(g, i), k, g->d * sizeof(float));
    rep_tok(g)[i] = token;
    cnt(g)[i] = 1;
    store_slot(r, samp(g, i, 0), k, v); /* quantised once, copied as bytes */
    for (uint32_t j = 0; j < g->t; j++) {
        copy_slot(r, samp(g, i, j), samp(g, i, 0));
        samp_tok(g, i)[j] = token;
    }
    set_cluster_weights(g, i);
}

static void join_cluster(subgen_state *g, const sg_rows *r, uint32_t i, const float *k, const float *v, uint32_t token)
{
    const uint64_t n = ++cnt(g)[i];
    const double p = 1.0 / (double)n;
    /* each slot independently becomes k with probability 1/n: reservoir
       sampling with replacement keeps t i.i.d. uniform samples of C_i */
    for (uint32_t j = 0; j < g->t; j++) {
        if (kvc_rng_unit(&g->rng) < p) {
            store_slot(r, samp(g, i, j), k, v);
            samp_tok(g, i)[j] = token;
        }
    }
    set_cluster_weights(g, i);
}

static void copy_cluster(subgen_state *g, const sg_rows *r, uint32_t dst, uint32_t src)
{
    memcpy(rep(g, dst), rep(g, src), g->d * sizeof(float));
    rep_tok(g)[dst] = rep_tok(g)[src];
    cnt(g)[dst] = cnt(g)[src];
    kvc_rows_copy(&r->S, samp(g, dst, 0), &r->S, samp(g, src, 0), g->t);
    if (r->SV.base) kvc_rows_copy(&r->SV, samp(g, dst, 0), &r->SV, samp(g, src, 0), g->t);
    memcpy(samp_tok(g, dst), samp_tok(g, src), (size_t)g->t * sizeof(uint32_t));
    memcpy(samp_w(g, dst), samp_w(g, src), (size_t)g->t * sizeof(float));
}

/* Greedy merge at the current radius: in creation order, each surviving
 * cluster absorbs every later surviving cluster whose representative lies
 * within delta of its own (not transitive). Absorbed clusters are marked with
 * count 0, then the survivors are compacted in order. */
static void merge_clusters(subgen_state *g, const sg_rows *rw, const kvc_kernels *kern)
{
    const double d2 = g->delta * g->delta;
    for (uint32_t a = 0; a < g->m; a++) {
        if (cnt(g)[a] == 0) continue;
        for (uint32_t b = a + 1; b < g->m; b++) {
            if (cnt(g)[b] == 0) continue;
            if (kern->sqdist_f32(rep(g, a), rep(g, b), g->d) > d2) continue;
            const uint64_t na = cnt(g)[a], nb = cnt(g)[b];
            const double keep_a = (double)na / (double)(na + nb);
            /* slot j of the union is uniform over C_a u C_b: take S_a[j] with
               probability n_a/(n_a+n_b), else S_b[j] */
            for (uint32_t j = 0; j < g->t; j++) {
                if (kvc_rng_unit(&g->rng) >= keep_a) {
                    copy_slot(rw, samp(g, a, j), samp(g, b, j));
                    samp_tok(g, a)[j] = samp_tok(g, b)[j];
                }
            }
            cnt(g)[a] = na + nb;
            cnt(g)[b] = 0;
            g->merges++;
        }
        set_cluster_weights(g, a);
    }
    uint32_t w = 0;
    for (uint32_t r = 0; r < g->m; r++) {
        if (cnt(g)[r] == 0) continue;
        if (w != r) copy_cluster(g, rw, w, r);
        w++;
    }
    /* clear the freed tail so equal histories give equal arena bytes */
    for (uint32_t r = w; r < g->m; r++) {
        memset(rep(g, r), 0, g->d * sizeof(float));
        rep_tok(g)[r] = 0;
        memset(kvc_row(&rw->S, samp(g, r, 0)), 0, (size_t)g->t * rw->S.stride);
        if (rw->SV.base) memset(kvc_row(&rw->SV, samp(g, r, 0)), 0, (size_t)g->t * rw->SV.stride);
        memset(samp_tok(g, r), 0, (size_t)g->t * sizeof(uint32_t));
        memset(samp_w(g, r), 0, (size_t)g->t * sizeof(float));
    }
    g->m = w;
}

/* Half the minimum pairwise distance among the representatives and k. */
static double start_radius(subgen_state *g, const kvc_kernels *kern, const float *k)
{
    double best = INFINITY;
    for (uint32_t a = 0; a < g->m; a++) {
        double dk = kern->sqdist_f32(rep(g, a), k, g->d);
        if (dk < best) best = dk;
        for (uint32_t b = a + 1; b < g->m; b++) {
            double dab = kern->sqdist_f32(rep(g, a), rep(g, b), g->d);
            if (dab < best) best = dab;
        }
    }
    return 0.5 * sqrt(best);
}

static void cluster_update(subgen_state *g, const sg_rows *r, const kvc_kernels *kern, const float *k, const float *v,
                           uint32_t token)
{
    for (;;) {
        uint32_t best_i = 0;
        double best = INFINITY;
        for (uint32_t i = 0; i < g->m; i++) {
            const double dist2 = kern->sqdist_f32(rep(g, i), k, g->d);
            if (dist2 < best) {
                best = dist2;
                best_i = i;
            }
        }
        if (g->m > 0 && best <= g->delta * g->delta) {
            join_cluster(g, r, best_i, k, v, token);
            return;
        }
        if (g->m < g->m_max) {
            open_cluster(g, r, k, v, token);
            return;
        }
        /* full: grow the radius, merge, re-test the key */
        if (g->delta == 0.0) {
            g->delta = start_radius(g, kern, k);
        } else {
            g->delta *= 2.0;
            g->doublings++;
        }
        merge_clusters(g, r, kern);
    }
}

/* The numerator reservoir (docs/methods.md section 1): every slot
 * independently takes the token with probability ||v||^2 / mu. A slot's
 * weight mu / (s ||v||^2) is stored as the float 2^ref_exp / ||v||^2 times
 * the segment scale mu / (s 2^ref_exp): ref_exp is taken from the first
 * nonzero value, so the floats stay near 1 whatever the value scale, and
 * scaling V by c scales the output by c (a float 1/||v||^2 would round to 0
 * above ||v|| ~ 4e22 and overflow below ~ 5e-20). The first nonzero value has
 * probability 1 and fills every slot. */
static void reservoir_rebase(subgen_state *g, int32_t shift)
{
    float *rw = KVC_AT(g, g->off_res_w, float);
    for (uint32_t j = 0; j < g->s; j++) {
        const double w = ldexp((double)rw[j], shift);
        rw[j] = w > (double)FLT_MAX ? FLT_MAX : (float)w; /* clamped only with probability < 2^-100 */
    }
    g->ref_exp += shift;
}

static void reservoir_update(subgen_state *g, const sg_rows *r, const kvc_kernels *kern, const float *k, const float *v,
                             uint32_t token)
{
    const double sq = kern->dot_f32(v, v, g->dv); /* of the incoming value, before quantisation */
    if (!(sq > 0.0)) return;                      /* a zero value: probability 0, adds nothing to mu */
    if (!g->has_ref) {
        int e;
        frexp(sq, &e);
        g->ref_exp = e;
        g->has_ref = 1;
    }
    double w = ldexp(1.0 / sq, g->ref_exp);
    if (w > (double)FLT_MAX) {
        /* ||v||^2 is below 2^-128 of the first value's: its probability is
           below 2^-128, so it is treated as never drawn; mu stays exact */
        g->mu += sq;
        return;
    }
    if (w < 0x1p-100) { /* a value 2^50 times larger than the reference: move the reference up */
        int e;
        frexp(w, &e);
        reservoir_rebase(g, -e);
        w = ldexp(1.0 / sq, g->ref_exp);
    }
    const double p = sq / (g->mu + sq);
    float *rw = KVC_AT(g, g->off_res_w, float);
    uint32_t *rt = KVC_AT(g, g->off_res_tok, uint32_t);
    for (uint32_t j = 0; j < g->s; j++) {
        if (kvc_rng_unit(&g->rng) < p) {
            kvc_row_store(&r->RK, j, k);
            kvc_row_store(&r->RV, j, v);
            rw[j] = (float)w;
            rt[j] = token;
        }
    }
    g->mu += sq;
}

static void subgen_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    subgen_state *g = (subgen_state *)st;
    const sg_rows r = rows_of(g, cx->plan->dtype, cx->kern);
    cluster_update(g, &r, cx->kern, k, v, (uint32_t)token);
    reservoir_update(g, &r, cx->kern, k, v, (uint32_t)token);
    g->n_total++;
}

static size_t subgen_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const subgen_state *g = (const subgen_state *)st;
    const sg_rows r = rows_of(g, p->dtype, NULL);
    const int res_live = g->has_ref && g->mu > 0.0;
    /* self-normalised: the mixture's halves; before any nonzero value the
       reservoir is empty and the clusters carry the whole estimate */
    const double half = g->self_norm && res_live ? 0.5 : 1.0;
    kvc_segment_rows(&seg[0], &r.S, g->self_norm ? &r.SV : NULL, 0);
    seg[0].weights = KVC_AT_C(g, g->off_samp_w, float);
    seg[0].scale = half;
    seg[0].n = (size_t)g->m * g->t;
    seg[0].role = g->self_norm ? KVC_SET_BOTH : KVC_SET_DEN;
    kvc_segment_rows(&seg[1], &r.RK, &r.RV, 0);
    seg[1].weights = KVC_AT_C(g, g->off_res_w, float);
    seg[1].scale = res_live ? ldexp(g->mu / (double)g->s, -g->ref_exp) : 1.0;
    if (!(seg[1].scale > 0.0) || !(seg[1].scale < INFINITY)) seg[1].scale = 1.0; /* corrupted data only */
    seg[1].scale *= half;
    seg[1].n = g->self_norm && !res_live ? 0u : g->s;
    seg[1].role = g->self_norm ? KVC_SET_BOTH : KVC_SET_NUM;
    return 2;
}

static uint64_t subgen_elements(const void *st)
{
    const subgen_state *g = (const subgen_state *)st;
    return (uint64_t)g->m * ((g->t + 1u) * g->d + (g->self_norm ? (uint64_t)g->t * g->dv : 0u)) +
           (g->has_ref ? (uint64_t)g->s * (g->d + g->dv) : 0u);
}

static void subgen_fill_stats(const void *st, kvc_stream_stats *stats)
{
    const subgen_state *g = (const subgen_state *)st;
    stats->counters.clusters = g->m;
    stats->counters.doublings = g->doublings;
    stats->counters.merges = g->merges;
    stats->counters.delta = g->delta;
}

static const subgen_state *subgen_of(const kvc_stream *st)
{
    const kvc_stream_plan *p = kvc_stream_get_plan(st);
    /* the introspection hands out float rows: f32 storage only */
    if (p == NULL || p->method != KVC_METHOD_SUBGEN || p->dtype != KVC_DTYPE_F32) return NULL;
    return (const subgen_state *)kvc_stream_method_state(st);
}

uint32_t kvc_subgen_num_clusters(const kvc_stream *st)
{
    const subgen_state *g = subgen_of(st);
    return g ? g->m : 0;
}

kvc_status kvc_subgen_cluster(const kvc_stream *st, uint32_t i, kvc_subgen_cluster_info *out)
{
    const subgen_state *g = subgen_of(st);
    if (g == NULL) return KVC_E_STATE;
    if (out == NULL || i >= g->m) return KVC_E_ARG;
    subgen_state *gm = (subgen_state *)(uintptr_t)g; /* accessors are shared; nothing is written */
    out->rep = rep(gm, i);
    out->rep_token = rep_tok(gm)[i];
    out->count = cnt(gm)[i];
    out->t = g->t;
    const sg_rows r = rows_of(gm, KVC_DTYPE_F32, NULL);
    out->samples = (const float *)kvc_row(&r.S, samp(gm, i, 0));
    out->sample_tokens = samp_tok(gm, i);
    return KVC_OK;
}

kvc_status kvc_subgen_reservoir(const kvc_stream *st, kvc_subgen_reservoir_info *out)
{
    const subgen_state *g = subgen_of(st);
    if (g == NULL) return KVC_E_STATE;
    if (out == NULL) return KVC_E_ARG;
    out->s = g->s;
    out->mu = g->mu;
    out->keys = KVC_AT_C(g, g->off_res_k, float);
    out->values = KVC_AT_C(g, g->off_res_v, float);
    out->inv_sqnorm = KVC_AT_C(g, g->off_res_w, float);
    out->ref_exp = g->ref_exp;
    out->tokens = KVC_AT_C(g, g->off_res_tok, uint32_t);
    return KVC_OK;
}

/* ---- registry entry ---- */
#define KVC_SUBGEN_DEFAULT_T 8u
#define KVC_SUBGEN_MAX_T     4096u

static const char *ops_fields(const kvc_stream_config *c)
{
    const kvc_subgen_params *p = &c->params.subgen;
    if (p->t > KVC_SUBGEN_MAX_T) return "subgen t must be in 1..4096 (0 = 8)";
    if (p->estimator != 0 && p->estimator != KVC_ESTIMATOR_SELF && p->estimator != KVC_ESTIMATOR_PAPER)
        return "subgen estimator must be self or paper";
    if (!(p->delta0 >= 0.0f) || !isfinite(p->delta0)) return "subgen delta0 must be finite and >= 0";
    return NULL;
}

/* Why subgen_fit_of refuses a configuration (0: it fits). It refuses t >
 * 4096 itself (ops_fields does too): its proof then needs nothing of the
 * fields check. The codes keep string literals out of the proof. */
enum { SG_FITS, SG_T_RANGE, SG_S_BUDGET, SG_NO_CLUSTER, SG_M_MAX_BUDGET };

/* A SubGen plan's sizes, before they are written to the plan. */
typedef struct subgen_fit {
    uint32_t t, s, m_max, estimator;
    uint64_t worst, metadata;
} subgen_fit;

/*@ requires \valid_read(sp) && \valid(f) && \separated(f, sp);
    requires 1 <= d <= 256 && 1 <= dv <= 256 && tokens <= 16777216;
    assigns *f;
    ensures \result == SG_FITS ==> f->worst <= tokens * (d + dv) && kvc_metadata_bytes_ok(f->metadata);
    ensures \result == SG_FITS ==> 1 <= f->t <= 4096 && 1 <= f->s <= 16777216 && 1 <= f->m_max;
    ensures \result == SG_FITS ==> f->m_max * (f->t + 1) <= 8589934592;
*/
static int subgen_fit_of(const kvc_subgen_params *sp, uint32_t tokens, uint32_t d, uint32_t dv, subgen_fit *f)
{
    const uint64_t tok = (uint64_t)d + dv;
    //@ ghost kvc_mul_le(tokens, 16777216, tok, 512);
    const uint64_t elems = (uint64_t)tokens * tok;
    const uint32_t t = sp->t ? sp->t : KVC_SUBGEN_DEFAULT_T;
    const uint32_t s_asked = sp->s, estimator = sp->estimator ? sp->estimator : KVC_ESTIMATOR_SELF;
    const uint32_t m_max_asked = sp->m_max;
    if (t > KVC_SUBGEN_MAX_T) return SG_T_RANGE;
    uint32_t s = s_asked ? s_asked : tokens / 2u;
    if (s < 1) s = 1;
    if (s > tokens) return SG_S_BUDGET;
    //@ ghost kvc_mul_le(s, tokens, tok, tok);
    const uint64_t t1 = (uint64_t)t + 1u; /* a cluster's representative and its t samples */
    //@ ghost kvc_mul_le(t1, 4097, d, 256);
    //@ ghost kvc_mul_le(t, 4096, dv, 256);
    //@ ghost kvc_mul_le(t1, t1, 1, d);
    const uint64_t key_part = t1 * d, value_part = estimator == KVC_ESTIMATOR_SELF ? (uint64_t)t * dv : 0u;
    const uint64_t per_cluster = key_part + value_part;
    //@ assert t1 <= per_cluster <= 2097408;
    const uint64_t reservoir = (uint64_t)s * tok;
    const uint64_t rest = elems - reservoir; /* elements beside the reservoir */
    const uint64_t m_fit = rest / per_cluster;
    //@ ghost kvc_div_mul_le(rest, per_cluster, m_fit);
    const uint32_t m_max = m_max_asked ? m_max_asked : (uint32_t)(m_fit > UINT32_MAX ? UINT32_MAX : m_fit);
    if (m_fit < 1) return SG_NO_CLUSTER;
    if (m_max < 1 || m_max > m_fit) return SG_M_MAX_BUDGET;
    //@ ghost kvc_mul_le(m_max, m_fit, per_cluster, per_cluster);
    //@ assert m_max * per_cluster <= rest;
    //@ ghost kvc_mul_le(m_max, m_max, t1, per_cluster);
    //@ assert m_max * t1 <= 8589934592;
    //@ ghost kvc_mul_le(m_max, 4294967295, t, 4096);
    const uint64_t clusters = (uint64_t)m_max * per_cluster;
    //@ assert clusters + reservoir <= elems;
    f->t = t;
    f->s = s;
    f->m_max = m_max;
    f->estimator = estimator;
    f->worst = clusters + reservoir;
    f->metadata = (uint64_t)m_max * (sizeof(uint32_t) + sizeof(uint64_t)) +
                  (uint64_t)m_max * t * (sizeof(uint32_t) + sizeof(float)) +
                  (uint64_t)s * (sizeof(uint32_t) + sizeof(float));
    return SG_FITS;
}

/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->t, p->s, p->subgen_estimator, p->m_max, p->delta0, *method_worst, p->metadata_bytes;
    ensures \result == \null ==> *method_worst <= \old(p->method_tokens) * (\old(c->d) + \old(c->dv));
    ensures \result == \null ==> kvc_metadata_bytes_ok(p->metadata_bytes);
    ensures \result == \null ==> subgen_sizes_ok(p->d, p->dv, p->t, p->s, p->m_max);
*/
static const char *subgen_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    const uint32_t tokens = p->method_tokens, d = c->d, dv = c->dv;
    subgen_fit f;
    switch (subgen_fit_of(&c->params.subgen, tokens, d, dv, &f)) {
    case SG_FITS: break;
    case SG_T_RANGE: return "subgen t must be in 1..4096 (0 = 8)";
    case SG_S_BUDGET: return "subgen s does not fit the method budget";
    case SG_NO_CLUSTER: return "budget too small for subgen: no room for one cluster beside the reservoir";
    default: return "subgen m_max does not fit the method budget";
    }
    p->t = f.t;
    p->s = f.s;
    p->subgen_estimator = f.estimator;
    p->m_max = f.m_max;
    p->delta0 = c->params.subgen.delta0;
    *method_worst = f.worst;
    p->metadata_bytes = f.metadata;
    return NULL;
}
#include <stddef.h>
static const uint32_t estimator_values[] = {KVC_ESTIMATOR_SELF, KVC_ESTIMATOR_PAPER};
static const kvc_method_param params[] = {
    {.desc = {"subgen-t", KVC_PARAM_U32, 1, KVC_SUBGEN_MAX_T, NULL, "8", "key samples per cluster"},
     .offset = offsetof(kvc_stream_config, params.subgen.t)},
    {.desc = {"subgen-s", KVC_PARAM_U32, 1, KVC_MAX_BUDGET, NULL, "half the method budget", "value-reservoir slots"},
     .offset = offsetof(kvc_stream_config, params.subgen.s)},
    {.desc = {"subgen-mmax", KVC_PARAM_U32, 1, KVC_MAX_BUDGET, NULL, "what the rest of the budget holds",
              "cluster capacity"},
     .offset = offsetof(kvc_stream_config, params.subgen.m_max)},
    {.desc = {"subgen-delta0", KVC_PARAM_F32, 0, 1e30, NULL, "set at the first overflow", "starting cluster radius"},
     .offset = offsetof(kvc_stream_config, params.subgen.delta0)},
    {.desc = {"subgen-estimator", KVC_PARAM_CHOICE, 0, 0, "self|paper", "self",
              "self: one self-normalised mixture (bounded); paper: separate N and D (may diverge)"},
     .offset = offsetof(kvc_stream_config, params.subgen.estimator),
     .choice_values = estimator_values},
};

static void subgen_describe(const kvc_stream_config *c, const kvc_stream_plan *p, kvc_text *out)
{
    (void)c;
    kvc_text_add(out, " t=%u s=%u m_max=%u delta0=%g estimator=%s", (unsigned)p->t, (unsigned)p->s, (unsigned)p->m_max,
                 (double)p->delta0, p->subgen_estimator == KVC_ESTIMATOR_PAPER ? "paper" : "self");
}
static void subgen_describe_stats(const kvc_stream_stats *s, kvc_text *out)
{
    const kvc_method_counters *c = &s->counters;
    kvc_text_add(out, "subgen: clusters=%u doublings=%u merges=%u delta=%.4g", (unsigned)c->clusters,
                 (unsigned)c->doublings, (unsigned)c->merges, c->delta);
}

const kvc_method_ops kvc_method_ops_subgen = {
    .id = KVC_METHOD_SUBGEN,
    KVC_METHOD_STATE_OPS(subgen),
    .fields = ops_fields,
    .fill_stats = subgen_fill_stats,
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .choices_read_values = 1,
    .describe = subgen_describe,
    .describe_stats = subgen_describe_stats,
};
