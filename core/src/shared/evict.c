/* The score-and-evict skeleton (shared/evict.h): layout, plan, init, check,
 * view, elements and update of every score method. */
#include "shared/evict.h"

_Static_assert(sizeof(kvc_evict_state) == KVC_SIZE_EVICT_STATE, "kvc_evict_state must be the same on every ABI");

/* The method's own region for a window of n_window tokens and keys of d dimensions. */
/*@ requires kvc_evict_own_sizes_ok(eo) && n_window <= 16777216 && d <= 256;
    assigns \nothing;
    ensures \result == eo->own_fixed + eo->own_per_window * (n_window + 1) + eo->own_per_dim * d;
    ensures \result <= 4096 + 64 * 16777217 + 4096 * 256;
*/
static uint64_t evict_own_bytes(const kvc_evict_ops *eo, uint32_t n_window, uint32_t d)
{
    //@ ghost kvc_mul_le(eo->own_per_window, 64, (uint64_t)n_window + 1u, 16777217);
    //@ ghost kvc_mul_le(eo->own_per_dim, 4096, d, 256);
    return (uint64_t)eo->own_fixed + (uint64_t)eo->own_per_window * ((uint64_t)n_window + 1u) +
           (uint64_t)eo->own_per_dim * d;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216 && kvc_evict_own_sizes_ok(eo);
    requires \valid(s) && \separated(s, p) && \separated(s, eo);
    assigns s->off_k, s->off_v, s->off_score, s->off_tok, s->off_own;
    ensures sizeof(kvc_evict_state) <= s->off_k == 128;
    ensures kvc_region_before(s->off_k, kvc_stream_rows_l(p, p->capacity, p->d), s->off_v);
    ensures kvc_region_before(s->off_v, kvc_stream_rows_l(p, p->capacity, p->dv), s->off_score);
    ensures kvc_region_before(s->off_score, 8 * p->capacity, s->off_tok);
    ensures kvc_region_before(s->off_tok, 4 * p->capacity, s->off_own);
    ensures kvc_region_before(s->off_own, kvc_evict_own_bytes_l(eo, p), \result);
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t evict_layout(kvc_evict_state *s, const kvc_evict_ops *eo, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(kvc_evict_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    s->off_score = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(double));
    s->off_tok = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(uint32_t));
    s->off_own = kvc_carve(&cur, evict_own_bytes(eo, p->n_window, p->d));
    return cur;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216 && kvc_evict_own_sizes_ok(eo);
    assigns \nothing;
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t evict_arena_size_st(const kvc_evict_ops *eo, const kvc_stream_plan *p)
{
    kvc_evict_state tmp;
    return evict_layout(&tmp, eo, p);
}

/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    requires kvc_evict_own_sizes_ok(eo) && p->n_window <= 16777216;
    assigns p->capacity, p->metadata_bytes, *method_worst;
    ensures kvc_method_plan_post(c, p, *method_worst) && p->capacity == p->method_tokens;
    ensures kvc_metadata_bytes_ok(p->metadata_bytes);
*/
static const char *evict_plan_st(const kvc_evict_ops *eo, const kvc_stream_config *c, kvc_stream_plan *p,
                                 uint64_t *method_worst)
{
    const uint64_t own = evict_own_bytes(eo, p->n_window, c->d); /* before p is written */
    p->capacity = p->method_tokens;
    //@ ghost kvc_mul_le(p->capacity, 16777216, (uint64_t)c->d + c->dv, 512);
    *method_worst = (uint64_t)p->capacity * ((uint64_t)c->d + c->dv);
    //@ ghost kvc_mul_le(p->capacity, 16777216, 12, 12);
    p->metadata_bytes = (uint64_t)p->capacity * (sizeof(double) + sizeof(uint32_t)) + own;
    return NULL;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216 && kvc_evict_own_sizes_ok(eo);
    requires \valid(s) && \separated(s, p) && \separated(s, eo);
    assigns s->magic, s->d, s->dv, s->capacity, s->count, s->pad_, s->seen,
            s->off_k, s->off_v, s->off_score, s->off_tok, s->off_own;
    ensures kvc_evict_ok(s, p) && s->count == 0 && s->seen == 0 && s->magic == eo->magic;
*/
static void evict_init_st(kvc_evict_state *s, const kvc_evict_ops *eo, const kvc_stream_plan *p)
{
    evict_layout(s, eo, p);
    s->magic = eo->magic;
    s->d = p->d, s->dv = p->dv, s->capacity = p->capacity;
    s->count = 0, s->pad_ = 0, s->seen = 0;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216 && kvc_evict_own_sizes_ok(eo);
    requires \valid(s) && \separated(s, p) && \separated(s, eo);
    assigns \nothing;
    ensures \result == 1 ==> kvc_evict_ok(s, p) && s->seen == method_in;
*/
static int evict_check_st(const kvc_evict_state *s, const kvc_evict_ops *eo, const kvc_stream_plan *p,
                          uint64_t method_in)
{
    kvc_evict_state w;
    evict_layout(&w, eo, p);
    return s->magic == eo->magic && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == w.off_k && s->off_v == w.off_v && s->off_score == w.off_score && s->off_tok == w.off_tok &&
           s->off_own == w.off_own && s->seen == method_in &&
           s->count == (method_in < s->capacity ? method_in : s->capacity);
}

/*@ requires \valid_read(s) && s->count <= s->capacity <= 16777216 && s->d <= 256 && s->dv <= 256;
    assigns \nothing;
    ensures \result == s->count * (s->d + s->dv) && \result <= s->capacity * (s->d + s->dv);
*/
static uint64_t evict_elements_st(const kvc_evict_state *s)
{
    //@ ghost kvc_mul_le(s->count, s->capacity, s->d + s->dv, s->d + s->dv);
    return (uint64_t)s->count * (s->d + s->dv);
}

/* The held slot with the lowest score; on equal scores the older token
 * (ties_keep_older = 0) or the newer one (1). */
/*@ requires 1 <= n <= 16777216 && \valid_read(score + (0 .. n - 1)) && \valid_read(tok + (0 .. n - 1));
    assigns \nothing;
    ensures 0 <= \result < n;
*/
static uint32_t evict_lowest(const double *score, const uint32_t *tok, uint32_t n, uint32_t ties_keep_older)
{
    uint32_t low = 0;
    /*@ loop invariant 1 <= i <= n && 0 <= low < n;
        loop assigns i, low;
        loop variant n - i;
    */
    for (uint32_t i = 1; i < n; i++) {
        const int tie_goes = ties_keep_older ? tok[i] > tok[low] : tok[i] < tok[low];
        if (score[i] < score[low] || (score[i] == score[low] && tie_goes)) low = i;
    }
    return low;
}

/* The slot the incoming token takes: the next free one, or (full) the one
 * `victim` names when it is a held slot (KVC_EVICT_NONE for the incoming
 * token itself, or with no capacity). */
/*@ requires kvc_evict_ok(s, p);
    assigns s->count;
    ensures kvc_evict_ok(s, p);
    ensures \old(s->count) < s->capacity ==> s->count == \old(s->count) + 1 && \result == \old(s->count);
    ensures \old(s->count) == s->capacity ==> s->count == \old(s->count) &&
            (\result == 4294967295 || \result < s->count);
*/
static uint32_t evict_slot(kvc_evict_state *s, const kvc_stream_plan *p, uint32_t victim)
{
    (void)p;
    if (s->count < s->capacity) return s->count++;
    return victim < s->count ? victim : KVC_EVICT_NONE;
}

/* Slot `slot` gets the token's rows, score and id. */
/*@ requires kvc_evict_ok(s, p) && slot < s->count;
    requires kvc_rows_ok(K, s->capacity) && kvc_rows_ok(V, s->capacity) && K->dim == p->d && V->dim == p->dv;
    requires \valid(score + (0 .. s->capacity - 1)) && \valid(tok + (0 .. s->capacity - 1));
    requires \valid_read(k + (0 .. p->d - 1)) && \valid_read(v + (0 .. p->dv - 1));
    requires \separated(K->base + (0 .. s->capacity * K->stride - 1), V->base + (0 .. s->capacity * V->stride - 1),
                        score + (0 .. s->capacity - 1), tok + (0 .. s->capacity - 1), s, p, K, V,
                        k + (0 .. p->d - 1), v + (0 .. p->dv - 1));
    assigns K->base[slot * K->stride .. slot * K->stride + K->stride - 1],
            V->base[slot * V->stride .. slot * V->stride + V->stride - 1], score[slot], tok[slot];
    ensures score[slot] == sc && tok[slot] == token;
*/
static void evict_store_st(const kvc_evict_state *s, const kvc_stream_plan *p, const kvc_rows *K, const kvc_rows *V,
                           double *score, uint32_t *tok, uint32_t slot, const float *k, const float *v, double sc,
                           uint32_t token)
{
    (void)s, (void)p; /* read by the proof only */
    //@ ghost kvc_mul_le(slot + 1, s->capacity, K->stride, K->stride);
    //@ ghost kvc_mul_le(slot + 1, s->capacity, V->stride, V->stride);
    kvc_row_store(K, slot, k);
    kvc_row_store(V, slot, v);
    score[slot] = sc, tok[slot] = token;
}

/* ---- the method table's entries: the accessor layer (trusted, docs/proofs.md)
 * Each casts the stream's void pointer to the typed state, finds the
 * method's kvc_evict_ops through its table and builds the arrays from the
 * offsets evict_check_st compared with the proved layout (the stream calls
 * check before every entry).
 * trusted-by: evict_check_st against the layout wp_sizes_ilp32 and
 * wp_methods prove inside the method's bytes; the corrupted-arena tests
 * (tests/unit/test_trust.c) and the API fuzzer (tests/fuzz/fuzz_api.c) under ASan. */
static const kvc_evict_ops *evict_of(kvc_method m) { return kvc_method_ops_of(m)->evict; }

const char *kvc_evict_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    return evict_plan_st(evict_of(c->method), c, p, method_worst);
}

uint64_t kvc_evict_arena_size(const kvc_stream_plan *p) { return evict_arena_size_st(evict_of(p->method), p); }

void kvc_evict_init(void *st, const kvc_stream_plan *p, uint64_t seed)
{
    kvc_evict_state *s = (kvc_evict_state *)st;
    const kvc_evict_ops *eo = evict_of(p->method);
    (void)seed; /* deterministic */
    evict_init_st(s, eo, p);
    if (eo->own_init) eo->own_init(s, kvc_evict_own(s), p);
}

int kvc_evict_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    const kvc_evict_state *s = (const kvc_evict_state *)st;
    const kvc_evict_ops *eo = evict_of(p->method);
    return evict_check_st(s, eo, p, method_in) && (eo->own_check == NULL || eo->own_check(s, kvc_evict_own_c(s), p));
}

uint64_t kvc_evict_elements(const void *st) { return evict_elements_st((const kvc_evict_state *)st); }

size_t kvc_evict_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const kvc_evict_state *s = (const kvc_evict_state *)st;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, p->dtype, NULL);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, NULL);
    return kvc_segment_rows_uniform(seg, &K, &V, 0, s->count, 1.0);
}

void kvc_evict_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    kvc_evict_state *s = (kvc_evict_state *)st;
    const kvc_evict_ops *eo = evict_of(cx->plan->method);
    double *score = KVC_AT(s, s->off_score, double);
    uint32_t *tok = KVC_AT(s, s->off_tok, uint32_t);
    const double sc = eo->score(s, cx, k, v, token);
    s->seen++;
    uint32_t victim = KVC_EVICT_NONE;
    if (s->count == s->capacity && s->capacity > 0) {
        if (eo->victim) {
            victim = eo->victim(s, cx, k, sc);
        } else { /* the lowest held score goes when the incoming one beats it (or ties it, newer kept) */
            const uint32_t low = evict_lowest(score, tok, s->count, eo->ties_keep_older);
            if (eo->ties_keep_older ? sc > score[low] : sc >= score[low]) victim = low;
        }
    }
    const uint32_t slot = evict_slot(s, cx->plan, victim);
    if (eo->placed) eo->placed(s, slot, token);
    if (slot == KVC_EVICT_NONE) return;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, cx->plan->dtype, cx->kern);
    evict_store_st(s, cx->plan, &K, &V, score, tok, slot, k, v, sc, (uint32_t)token);
}
