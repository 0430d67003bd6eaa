/* BalanceKV prefill mode (docs/methods.md section 2.4): the prompt's middle
 * tokens in blocks of b, T rounds of the pairing walk with the combined kernel
 * e^{beta<kbar,kbar'>} (<v,v'> + kappa), survivors re-blocked each round,
 * weights multiplying; incomplete blocks stay exact. Run as a MergeAndReduce
 * tree whose top level accumulates (merge_reduce.c, prefill mode): processing
 * the prompt in order, its state after token j is exactly the causal replay
 * for a query at j (completed blocks' round outputs, the incomplete block
 * exact). One set for numerator and denominator (a = b = weight). Tokens that
 * reach the method after the prompt go to a tail of the rest of the budget: a
 * uniform reservoir by default (Algorithm R, weight seen/kept), so a decoder
 * never stops; or exact, which refuses when full. */
#include <math.h>
#include <string.h>

#include "arena.h"
#include "kvc/kvc_offline.h"
#include "shared/merge_reduce.h"
#include "methods.h"

#define KVC_MAGIC_BKV_PREFILL 0x4B565031u /* "KVP1" */

typedef struct bkvp_state {
    uint32_t magic;
    uint32_t d, dv, t, T, mode;
    uint32_t prefix_tokens; /* method tokens that belong to the prompt */
    uint32_t tail_cap, tail_n;
    uint32_t tail_uniform; /* 1: the tail is a reservoir (Algorithm R), weight seen/kept */
    uint64_t tail_seen;
    float gamma, delta, kappa, beta;
    uint64_t seen, clips, halvings;
    uint64_t slots, top_cap;
    kvc_rng rng;
    kvc_mr mr;
    uint64_t off_k, off_v, off_w, off_tok, off_tail_k, off_tail_v, off_scratch, off_keep;
    /* offline mode (KVC_BALANCE_OFFLINE): the survivors' store is off_k ..
       (top_cap rows), off_scratch the staging bitmap (one bit per position
       from n_sink on), and the tree (mr) stays empty */
    uint32_t in_prompt;   /* 1 inside a kvc_stream_prefill call */
    uint32_t prompt_done; /* 1 once a kvc_stream_prefill call appended: later tokens go to the tail */
    uint64_t marked;      /* prompt tokens staged (bit set) in this call, compressed at its end */
    uint64_t walked;      /* prompt tokens the walk compressed: walked >> T survive */
    uint64_t n_surv;      /* survivors held */
    uint64_t dropped;     /* staged tokens whose rows the call did not hold (a corrupted arena only) */
    uint64_t bits;        /* the bitmap's bits */
} bkvp_state;
_Static_assert(sizeof(bkvp_state) == 336, "bkvp_state must be the same on every ABI");

/* Tokens the tree may hold for a prompt of m method tokens, blocks of t, T rounds. */
uint64_t kvc_bkv_prefill_top_cap(uint64_t m, uint32_t t, uint32_t T)
{
    /* top blocks: m / (t 2^(T-1)) prompt tokens behind each, computed as
       floor(m / t) halved T - 1 times (floors compose), without a shift */
    uint64_t blocks = m / t;
    //@ ghost kvc_div_mul_le(m, t, blocks);
    /*@ loop invariant 1 <= r <= T && blocks * t <= m;
        loop assigns r, blocks;
        loop variant T - r;
    */
    for (uint32_t r = 1; r < T; r++) {
        //@ ghost kvc_mul_le(blocks / 2, blocks, t, t);
        blocks /= 2;
    }
    //@ ghost kvc_mul_le(blocks, blocks, t / 2, t);
    return blocks * (t / 2);
}

/*@ // the plan fields the prefill layout reads, in the ranges bkvp_plan gives
    predicate bkvp_sizes_ok(kvc_stream_plan *p) =
      kvc_plan_dims_ok(p) && 2 <= p->bkv.t <= 16777216 && 1 <= p->bkv.levels <= 16 &&
      p->prefix_method_tokens <= 268435456 && p->tail_capacity <= 16777216;
*/

/*@ requires bkvp_sizes_ok(p) && \valid(g) && \separated(g, p);
    assigns g->top_cap, g->slots, g->off_k, g->off_v, g->off_w, g->off_tok, g->off_tail_k, g->off_tail_v,
            g->off_scratch, g->off_keep;
    ensures g->top_cap <= 268435456 && g->slots <= 411041793;
    ensures sizeof(bkvp_state) <= g->off_k;
    ensures kvc_region_before(g->off_k, kvc_stream_rows_l(p, g->slots, p->d), g->off_v);
    ensures kvc_region_before(g->off_v, kvc_stream_rows_l(p, g->slots, p->dv), g->off_w);
    ensures kvc_region_before(g->off_w, 4 * g->slots, g->off_tok);
    ensures kvc_region_before(g->off_tok, 4 * g->slots, g->off_tail_k);
    ensures kvc_region_before(g->off_tail_k, kvc_stream_rows_l(p, p->tail_capacity, p->d), g->off_tail_v);
    ensures kvc_region_before(g->off_tail_v, kvc_stream_rows_l(p, p->tail_capacity, p->dv), g->off_scratch);
    ensures kvc_region_before(g->off_scratch, 8 * (p->d + 2 * p->bkv.t), g->off_keep);
    ensures kvc_region_before(g->off_keep, p->bkv.t, \result);
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t bkvp_layout(bkvp_state *g, const kvc_stream_plan *p)
{
    const kvc_balancekv_params *b = &p->bkv;
    g->top_cap = kvc_bkv_prefill_top_cap(p->prefix_method_tokens, b->t, b->levels);
    if (g->top_cap < b->t / 2) g->top_cap = b->t / 2;
    g->slots = kvc_mr_slots(b->t, b->levels, g->top_cap);
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(bkvp_state));
    g->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, g->slots, p->d));
    g->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, g->slots, p->dv));
    g->off_w = kvc_carve(&cur, g->slots * sizeof(float));
    g->off_tok = kvc_carve(&cur, g->slots * sizeof(uint32_t));
    g->off_tail_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->tail_capacity, p->d));
    g->off_tail_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->tail_capacity, p->dv));
    g->off_scratch = kvc_carve(&cur, (uint64_t)kvc_balance_scratch_doubles(p->d, b->t) * sizeof(double));
    g->off_keep = kvc_carve(&cur, b->t);
    return cur;
}

/* Offline mode: the survivors of a prompt of m method tokens (m >> T rows,
 * their weights and positions), the staging bitmap (a bit per position from
 * n_sink on: a method token's position is below n_sink + m + n_protect),
 * the tail. The walk's buffers are the caller's (kvc_stream_prefill). */
static uint64_t bkvo_layout(bkvp_state *g, const kvc_stream_plan *p)
{
    g->top_cap = p->prefix_method_tokens >> p->bkv.levels;
    g->slots = g->top_cap;
    g->bits = (uint64_t)p->prefix_method_tokens + p->n_protect;
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(bkvp_state));
    g->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, g->slots, p->d));
    g->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, g->slots, p->dv));
    g->off_w = kvc_carve(&cur, g->slots * sizeof(float));
    g->off_tok = kvc_carve(&cur, g->slots * sizeof(uint32_t));
    g->off_tail_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->tail_capacity, p->d));
    g->off_tail_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->tail_capacity, p->dv));
    g->off_scratch = kvc_carve(&cur, (g->bits + 7u) / 8u);
    g->off_keep = cur;
    return cur;
}

static int is_offline(const kvc_stream_plan *p) { return p->bkv.mode == KVC_BALANCE_OFFLINE; }

/* The layout of either mode (the tree's is proved: wp_bkv_prefill). */
static uint64_t layout_of(bkvp_state *g, const kvc_stream_plan *p)
{
    return is_offline(p) ? bkvo_layout(g, p) : bkvp_layout(g, p);
}

/* Offline mode's counters: every token the method received is staged,
 * walked, in the tail, or dropped; survivors are the walked tokens halved
 * T times (floors compose); staging happens only inside a call. */
static int bkvo_check(const bkvp_state *g, uint64_t method_in)
{
    if (g->in_prompt > 1 || g->prompt_done > 1 || (!g->in_prompt && g->marked != 0)) return 0;
    if (g->marked > g->prefix_tokens || g->walked > g->prefix_tokens || g->marked + g->walked > g->prefix_tokens)
        return 0;
    if (g->n_surv != g->walked >> g->T || g->n_surv > g->top_cap) return 0;
    if (g->seen != method_in || g->dropped > method_in ||
        g->marked + g->walked + g->tail_seen + g->dropped != method_in)
        return 0;
    if (g->tail_n != (g->tail_seen < g->tail_cap ? g->tail_seen : g->tail_cap)) return 0;
    if (!g->tail_uniform && g->tail_seen > g->tail_cap) return 0;
    const uint8_t *zero = (const uint8_t *)&g->mr;
    for (size_t i = 0; i < sizeof g->mr; i++)
        if (zero[i]) return 0;
    return 1;
}

static int bkvp_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    const bkvp_state *g = (const bkvp_state *)st;
    bkvp_state w;
    w.bits = 0;
    layout_of(&w, p);
    if (g->magic != KVC_MAGIC_BKV_PREFILL || g->d != p->d || g->dv != p->dv || g->t != p->bkv.t ||
        g->T != p->bkv.levels || g->mode != p->bkv.mode || g->prefix_tokens != p->prefix_method_tokens ||
        g->tail_cap != p->tail_capacity || g->tail_uniform != (p->bkv.tail_method == KVC_METHOD_UNIFORM) ||
        g->slots != w.slots || g->top_cap != w.top_cap || g->off_k != w.off_k || g->off_v != w.off_v ||
        g->off_w != w.off_w || g->off_tok != w.off_tok || g->off_tail_k != w.off_tail_k ||
        g->off_tail_v != w.off_tail_v || g->off_scratch != w.off_scratch || g->off_keep != w.off_keep ||
        g->bits != (is_offline(p) ? w.bits : 0))
        return 0;
    if (is_offline(p)) return bkvo_check(g, method_in);
    if (g->in_prompt || g->prompt_done || g->marked || g->walked || g->n_surv || g->dropped) return 0;
    const uint64_t in_prompt = method_in < g->prefix_tokens ? method_in : g->prefix_tokens;
    const uint64_t after = method_in - in_prompt;
    if (g->seen != method_in || g->mr.tokens != in_prompt || g->tail_seen != after ||
        g->tail_n != (after < g->tail_cap ? after : g->tail_cap) || g->mr.store != 0)
        return 0;
    return kvc_mr_ok(&g->mr, g->t, g->T, g->top_cap, 0);
}

/*@ requires bkvp_sizes_ok(p);
    assigns \nothing;
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t bkvp_arena_size(const kvc_stream_plan *p)
{
    bkvp_state tmp;
    return bkvp_layout(&tmp, p);
}

static uint64_t bkvp_arena_bytes(const kvc_stream_plan *p)
{
    bkvp_state tmp;
    return is_offline(p) ? bkvo_layout(&tmp, p) : bkvp_arena_size(p);
}

static kvc_mr_env env_of(bkvp_state *g, unsigned dtype, const kvc_kernels *kern)
{
    kvc_mr_env e;
    memset(&e, 0, sizeof e);
    e.keys = kvc_rows_at(g, g->off_k, g->d, dtype, kern);
    e.values = kvc_rows_at(g, g->off_v, g->dv, dtype, kern);
    e.weights = KVC_AT(g, g->off_w, float);
    e.tokens = KVC_AT(g, g->off_tok, uint32_t);
    e.d = g->d, e.dv = g->dv, e.t = g->t, e.T = g->T;
    e.slots_per_store = g->slots;
    e.top_cap = g->top_cap;
    e.bounded = 0;
    kvc_mr_env_walk(&e, g->beta, g->kappa, g->mode, g->gamma, g->delta, KVC_AT(g, g->off_scratch, double),
                    KVC_AT(g, g->off_keep, uint8_t), &g->rng);
    return e;
}

static void bkvp_init(void *arena, const kvc_stream_plan *p, uint64_t seed)
{
    bkvp_state *g = (bkvp_state *)arena;
    layout_of(g, p);
    if (!is_offline(p)) g->bits = 0;
    g->in_prompt = 0, g->prompt_done = 0;
    g->marked = 0, g->walked = 0, g->n_surv = 0, g->dropped = 0;
    g->magic = KVC_MAGIC_BKV_PREFILL;
    g->d = p->d, g->dv = p->dv, g->t = p->bkv.t, g->T = p->bkv.levels, g->mode = p->bkv.mode;
    g->prefix_tokens = p->prefix_method_tokens;
    g->tail_cap = p->tail_capacity;
    g->tail_uniform = p->bkv.tail_method == KVC_METHOD_UNIFORM;
    g->gamma = p->bkv.gamma, g->delta = p->bkv.delta, g->kappa = p->bkv.kappa, g->beta = p->beta;
    kvc_rng_seed(&g->rng, seed);
    if (is_offline(p)) {
        memset(&g->mr, 0, sizeof g->mr);
        memset(KVC_AT(g, g->off_scratch, uint8_t), 0, (size_t)((g->bits + 7u) / 8u));
        return;
    }
    kvc_mr_env e = env_of(g, p->dtype, NULL);
    kvc_mr_reset(&e, &g->mr, 0);
}

static int bkvp_can_accept(const void *st)
{
    const bkvp_state *g = (const bkvp_state *)st;
    if (g->mode == KVC_BALANCE_OFFLINE) {
        /* the prompt's middle must come whole, through kvc_stream_prefill;
           past prefix_len (a longer prompt than planned) tokens go to the tail */
        if (!g->prompt_done && g->prefix_tokens > 0 && !g->in_prompt) return 0;
        if (g->in_prompt && !g->prompt_done && g->marked + g->walked < g->prefix_tokens) return 1;
        return g->tail_n < g->tail_cap || g->tail_uniform;
    }
    /* a reservoir tail never refuses; with no slots it keeps none of what
       leaves the window (sinks, window and tree still answer) */
    return g->seen < g->prefix_tokens || g->tail_n < g->tail_cap || g->tail_uniform;
}

/* One token into the tail: exact slots, then (uniform tail) Algorithm R. */
static void tail_push(bkvp_state *g, const kvc_method_ctx *cx, const float *k, const float *v)
{
    uint64_t slot = g->tail_n;
    if (g->tail_n == g->tail_cap) { /* full: a uniform tail samples, an exact one cannot take it */
        if (!g->tail_uniform) {
            g->dropped++;
            return;
        }
        slot = (uint64_t)(kvc_rng_unit(&g->rng) * (double)(g->tail_seen + 1));
    } else {
        g->tail_n++;
    }
    g->tail_seen++;
    if (slot < g->tail_cap) {
        const kvc_rows K = kvc_rows_at(g, g->off_tail_k, g->d, cx->plan->dtype, cx->kern);
        const kvc_rows V = kvc_rows_at(g, g->off_tail_v, g->dv, cx->plan->dtype, cx->kern);
        kvc_row_store(&K, (size_t)slot, k);
        kvc_row_store(&V, (size_t)slot, v);
    }
}

/* The caller scratch of a call of n rows: the staged rows gathered (f32),
 * their positions, the walk's survivors and weights, its own scratch. Besides
 * the call's rows, the tokens appended before it that are still in the
 * window (and the pending one) reach the method during the call: room for
 * n_window + 1 more, at most the prompt's method tokens in all. */
typedef struct bkvo_work {
    size_t off_k, off_v, off_pos, off_kept, off_w, off_walk, walk_bytes, total;
} bkvo_work;

static int bkvo_work_of(const bkvp_state *g, const kvc_stream_plan *p, size_t n, bkvo_work *w)
{
    n += (size_t)p->n_window + 1u;
    if (n > g->prefix_tokens) n = g->prefix_tokens; /* at most the prompt's method tokens are staged */
    if (n < 2) n = 2;
    const size_t walk = kvc_balancekv_offline_work_bytes(n, g->d, g->dv, g->t);
    if (walk == 0) return 0;
    size_t cur = 0;
#define BKVO_CARVE(field, bytes) (w->field = cur, cur += ((bytes) + 7u) / 8u * 8u)
    BKVO_CARVE(off_k, n * g->d * sizeof(float));
    BKVO_CARVE(off_v, n * g->dv * sizeof(float));
    BKVO_CARVE(off_pos, n * sizeof(uint64_t));
    BKVO_CARVE(off_kept, n * sizeof(uint32_t));
    BKVO_CARVE(off_w, n * sizeof(float));
    BKVO_CARVE(off_walk, walk);
#undef BKVO_CARVE
    w->walk_bytes = walk;
    w->total = cur;
    return 1;
}

/* The call's scratch, laid out for its n rows, when the caller gave enough. */
static int bkvo_call_work(const bkvp_state *g, const kvc_method_ctx *cx, bkvo_work *w)
{
    const kvc_prompt_call *c = cx->call;
    return c != NULL && c->work != NULL && bkvo_work_of(g, cx->plan, c->n_call, w) && w->total <= c->work_bytes;
}

/* Offline mode: a prompt token of the call is staged by its bit (its rows
 * are the caller's, read at the call's end); one appended before the call
 * (the window's, reaching the method now) has its rows copied into the
 * call's scratch at once, since the caller does not hold them; any other
 * token goes to the tail. */
static void bkvo_update(bkvp_state *g, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    const uint64_t first = cx->plan->n_sink;
    bkvo_work w;
    if (g->in_prompt && !g->prompt_done && g->marked + g->walked < g->prefix_tokens && token >= first &&
        token - first < g->bits && cx->call != NULL && token >= cx->call->rows.first) {
        uint8_t *bits = KVC_AT(g, g->off_scratch, uint8_t);
        const uint64_t b = token - first;
        bits[b / 8u] |= (uint8_t)(1u << (b % 8u));
        g->marked++;
    } else if (g->in_prompt && !g->prompt_done && g->marked + g->walked < g->prefix_tokens &&
               bkvo_call_work(g, cx, &w) && token < cx->call->rows.first && cx->call->pre_n < g->prefix_tokens) {
        kvc_prompt_call *c = cx->call;
        unsigned char *base = (unsigned char *)c->work;
        memcpy((float *)(void *)(base + w.off_k) + c->pre_n * g->d, k, g->d * sizeof(float));
        memcpy((float *)(void *)(base + w.off_v) + c->pre_n * g->dv, v, g->dv * sizeof(float));
        ((uint64_t *)(void *)(base + w.off_pos))[c->pre_n] = token;
        c->pre_n++;
        g->marked++;
    } else {
        tail_push(g, cx, k, v);
    }
    g->seen++;
}

static void bkvp_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    bkvp_state *g = (bkvp_state *)st;
    if (g->mode == KVC_BALANCE_OFFLINE) {
        bkvo_update(g, cx, k, v, token);
        return;
    }
    if (g->seen < g->prefix_tokens) {
        kvc_mr_env e = env_of(g, cx->plan->dtype, cx->kern);
        kvc_mr_push_raw(&e, &g->mr, k, v, (uint32_t)token);
        g->clips += e.bal.clips;
        g->halvings += e.halvings;
    } else {
        tail_push(g, cx, k, v);
    }
    g->seen++;
}

static size_t bkvp_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const bkvp_state *g = (const bkvp_state *)st;
    const kvc_rows K = kvc_rows_at(g, g->off_k, g->d, p->dtype, NULL),
                   V = kvc_rows_at(g, g->off_v, g->dv, p->dtype, NULL);
    const kvc_rows TK = kvc_rows_at(g, g->off_tail_k, g->d, p->dtype, NULL);
    const kvc_rows TV = kvc_rows_at(g, g->off_tail_v, g->dv, p->dtype, NULL);
    kvc_segment_rows(&seg[0], &K, &V, 0);
    seg[0].weights = KVC_AT_C(g, g->off_w, float);
    seg[0].scale = 1.0;
    seg[0].n = is_offline(p) ? g->n_surv : g->slots;
    seg[0].role = KVC_SET_BOTH;
    kvc_segment_rows(&seg[1], &TK, &TV, 0);
    seg[1].weights = NULL;
    seg[1].scale = g->tail_n ? (double)g->tail_seen / (double)g->tail_n : 1.0;
    seg[1].n = g->tail_n;
    seg[1].role = KVC_SET_BOTH;
    return 2;
}

/* ---- offline mode's whole-prompt hooks ---- */

static size_t bkvp_prefill_work_bytes(const void *st, const kvc_stream_plan *p, size_t n)
{
    const bkvp_state *g = (const bkvp_state *)st;
    bkvo_work w;
    if (!is_offline(p) || g->prompt_done || g->prefix_tokens == 0 || !bkvo_work_of(g, p, n, &w)) return 0;
    return w.total;
}

static void bkvp_prefill_open(void *st)
{
    bkvp_state *g = (bkvp_state *)st;
    if (g->mode == KVC_BALANCE_OFFLINE && !g->prompt_done) g->in_prompt = 1;
}

/* The call's end: gather the staged tokens' rows (those of earlier tokens
 * already copied in by bkvo_update, then the caller's f32 rows by their
 * bits), walk them as the authors' code does (kvc_balancekv_offline: T
 * rounds over blocks of t, one sign per token, one split per round), store
 * the survivors with their weights. Fewer staged tokens than 2^T (a prompt
 * barely longer than the exact regions) go to the tail instead. */
static void bkvp_prefill_close(void *st, const kvc_method_ctx *cx)
{
    bkvp_state *g = (bkvp_state *)st;
    if (g->mode != KVC_BALANCE_OFFLINE || !g->in_prompt) return;
    const kvc_prompt_rows *r = &cx->call->rows;
    g->in_prompt = 0;
    if (r->n > 0) g->prompt_done = 1;
    if (g->marked == 0) return;
    bkvo_work w;
    uint8_t *bits = KVC_AT(g, g->off_scratch, uint8_t);
    const uint64_t first = cx->plan->n_sink;
    size_t got = 0;
    if (bkvo_call_work(g, cx, &w)) {
        unsigned char *work = (unsigned char *)cx->call->work;
        float *K = (float *)(void *)(work + w.off_k), *V = (float *)(void *)(work + w.off_v);
        uint64_t *pos = (uint64_t *)(void *)(work + w.off_pos);
        got = cx->call->pre_n; /* the earlier tokens' rows, in place */
        for (size_t i = 0; i < r->n && got < g->marked; i++) {
            const uint64_t t = r->first + i;
            if (t < first || t - first >= g->bits) continue;
            const uint64_t b = t - first;
            if (!(bits[b / 8u] >> (b % 8u) & 1u)) continue;
            memcpy(K + got * g->d, r->keys + i * r->key_stride, g->d * sizeof(float));
            memcpy(V + got * g->dv, r->values + i * r->value_stride, g->dv * sizeof(float));
            pos[got++] = t;
        }
        uint32_t *kept = (uint32_t *)(void *)(work + w.off_kept);
        float *wt = (float *)(void *)(work + w.off_w);
        size_t n_kept = 0;
        const kvc_balancekv_offline_params prm = {g->T, g->t, g->gamma, 0.0f, g->kappa};
        if (got >> g->T == 0) {
            for (size_t i = 0; i < got; i++) tail_push(g, cx, K + i * g->d, V + i * g->dv);
        } else if (kvc_balancekv_offline(K, V, got, g->d, g->dv, &prm, kvc_rng_next(&g->rng), work + w.off_walk,
                                         w.walk_bytes, kept, wt, &n_kept) == KVC_OK) {
            const kvc_rows SK = kvc_rows_at(g, g->off_k, g->d, cx->plan->dtype, cx->kern);
            const kvc_rows SV = kvc_rows_at(g, g->off_v, g->dv, cx->plan->dtype, cx->kern);
            float *sw = KVC_AT(g, g->off_w, float);
            uint32_t *stok = KVC_AT(g, g->off_tok, uint32_t);
            for (size_t i = 0; i < n_kept; i++) {
                kvc_row_store(&SK, i, K + (size_t)kept[i] * g->d);
                kvc_row_store(&SV, i, V + (size_t)kept[i] * g->dv);
                sw[i] = wt[i];
                stok[i] = (uint32_t)pos[kept[i]];
            }
            g->walked = got;
            g->n_surv = n_kept;
        } else {
            g->dropped += got; /* unreachable: the rows were checked finite, the sizes planned */
        }
    }
    g->dropped += g->marked - got;
    g->marked = 0;
    memset(bits, 0, (size_t)((g->bits + 7u) / 8u));
}

static uint64_t bkvp_elements(const void *st)
{
    const bkvp_state *g = (const bkvp_state *)st;
    if (g->mode == KVC_BALANCE_OFFLINE) return (g->n_surv + g->tail_n) * (g->d + g->dv);
    return ((uint64_t)kvc_mr_held(&g->mr, g->T) + g->tail_n) * (g->d + g->dv);
}

static void bkvp_fill_stats(const void *st, kvc_stream_stats *s)
{
    const bkvp_state *g = (const bkvp_state *)st;
    s->counters.clip_events = g->clips;
    s->counters.halvings = g->halvings;
}

/* ---- registry entry ---- */
#define KVC_BKV_PREFILL_DEFAULT_BLOCK 256u
#define KVC_BKV_OFFLINE_MAX_BLOCK     4096u
/* Measured (bench/mode_report.sh, before the walk kernel was normalised):
 * stories260K prefill theory 0.161 vs practical 0.162; SmolLM2-135M (n =
 * 2048, budgets 10% / 25%) practical 0.284 / 0.157 vs theory 0.313 / 0.180:
 * the prefill default moved to practical. */
#define KVC_BKV_PREFILL_DEFAULT_MODE KVC_BALANCE_PRACTICAL

/* Slots of a tree with blocks of t over a prompt of m method tokens, for the
 * fewest rounds T in [lo, hi] that fit `room` slots (or for T = hi when none
 * fits). Writes the T chosen. */
static uint64_t prefill_fewest_rounds(uint64_t m, uint32_t t, uint32_t lo, uint32_t hi, uint64_t room, uint32_t *T_out)
{
    uint64_t slots = 0;
    for (uint32_t T = lo; T <= hi; T++) {
        uint64_t top = kvc_bkv_prefill_top_cap(m, t, T);
        if (top < t / 2) top = t / 2;
        slots = (uint64_t)t + (uint64_t)(T - 1) * (t / 2) + top + 1;
        *T_out = T;
        if (slots <= room) break;
    }
    return slots;
}

/* Offline mode: blocks of 256 (the authors'), the fewest rounds whose
 * survivors fit the method's tokens, the rest to the tail. No working
 * buffer is paid here: the walk runs in kvc_stream_prefill's caller scratch,
 * one buffer for every stream of a cache. */
static const char *bkvo_plan_search(const kvc_stream_config *c, kvc_stream_plan *p, kvc_balancekv_params *b, uint64_t m,
                                    uint64_t *method_worst)
{
    if (b->t > KVC_BKV_OFFLINE_MAX_BLOCK)
        return "balancekv-prefill mode offline: block t must be at most 4096 (kvc_balancekv_offline)";
    const uint32_t T_lo = b->levels ? b->levels : 1u, T_hi = b->levels ? b->levels : 16u;
    uint64_t surv = m;
    for (uint32_t T = T_lo; T <= T_hi; T++) {
        surv = m >> T;
        b->levels = T;
        if (surv <= p->method_tokens) break;
    }
    if (surv > p->method_tokens)
        return "budget too small for balancekv-prefill offline: the survivors of its rounds do not fit (more rounds)";
    p->bkv = *b;
    p->tail_capacity = (uint32_t)(p->method_tokens - surv);
    *method_worst = (uint64_t)p->method_tokens * ((uint64_t)c->d + c->dv);
    p->metadata_bytes = surv * (sizeof(float) + sizeof(uint32_t)) + (m + c->n_protect + 7u) / 8u;
    return NULL;
}

static const char *ops_fields(const kvc_stream_config *c)
{
    if (c->prefix_len < 1 || c->prefix_len > KVC_MAX_BUDGET * 16u)
        return "balancekv-prefill needs prefix_len, the prompt length it compresses (1 .. 2^28)";
    return kvc_balancekv_fields(c);
}

/* The plan's search (block size, rounds).
 * trusted-by: writes the fields in its assigns clause only (read it: every
 * write is to b, p->bkv, p->prefix_method_tokens, p->tail_capacity,
 * p->metadata_bytes or *method_worst); plan_build re-checks the worst case
 * and the metadata bytes at run time, bkvp_plan the ranges its layout needs;
 * tests/unit/test_balancekv.c checks the prefill plans. */
/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->prefix_method_tokens, p->bkv, p->tail_capacity, p->metadata_bytes, *method_worst;
*/
static const char *bkvp_plan_search(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    const uint64_t tok = (uint64_t)c->d + c->dv;
    kvc_balancekv_params b = c->params.balancekv;
    const int auto_block = b.t == 0;
    b.t = b.t ? b.t : KVC_BKV_PREFILL_DEFAULT_BLOCK;
    b.b_max = 1;
    b.mode = b.mode ? b.mode : KVC_BKV_PREFILL_DEFAULT_MODE;
    b.gamma = b.gamma > 0.0f ? b.gamma : 4.0f;
    b.delta = b.delta > 0.0f ? b.delta : 0.01f;
    b.kappa = b.kappa > 0.0f ? b.kappa : 0.025f;
    b.tail_method = kvc_prefill_tail_resolved(b.tail_method);
    if (b.estimator == KVC_ESTIMATOR_PAPER)
        return "balancekv-prefill has one joint tree, always read self-normalised: estimator paper is for streaming "
               "balancekv";
    b.estimator = KVC_ESTIMATOR_SELF;
    const uint64_t exact = (uint64_t)c->n_sink + c->n_window + 1u;
    const uint64_t m = c->prefix_len > exact ? c->prefix_len - exact : 0;
    p->prefix_method_tokens = (uint32_t)m;
    if (b.mode == KVC_BALANCE_OFFLINE) return bkvo_plan_search(c, p, &b, m, method_worst);
    const uint32_t T_lo = b.levels ? b.levels : 1u, T_hi = b.levels ? b.levels : 16u;
    uint64_t slots = prefill_fewest_rounds(m, b.t, T_lo, T_hi, p->method_tokens, &b.levels);
    /* the default block of 256 is halved until the tree fits the budget */
    while (auto_block && slots > p->method_tokens && b.t > 4) {
        b.t /= 2;
        slots = prefill_fewest_rounds(m, b.t, T_lo, T_hi, p->method_tokens, &b.levels);
    }
    if (slots > p->method_tokens)
        return "budget too small for balancekv-prefill: its blocks do not fit (lower the block size t)";
    p->bkv = b;
    p->tail_capacity = (uint32_t)(p->method_tokens - slots);
    *method_worst = (uint64_t)p->method_tokens * tok;
    p->metadata_bytes = slots * (sizeof(float) + sizeof(uint32_t)) +
                        ((uint64_t)kvc_balance_scratch_doubles(c->d, b.t) * sizeof(double) + b.t);
    return NULL;
}
/*@ requires \valid_read(p);
    assigns \nothing;
    ensures \result != 0 ==> bkvp_sizes_ok(p);
*/
static int bkvp_sizes_in_range(const kvc_stream_plan *p)
{
    return kvc_plan_dims_in_range(p) && 2 <= p->bkv.t && p->bkv.t <= KVC_MAX_BUDGET && 1 <= p->bkv.levels &&
           p->bkv.levels <= 16 && p->prefix_method_tokens <= KVC_MAX_BUDGET * 16u && p->tail_capacity <= KVC_MAX_BUDGET;
}

/* The search, then the ranges the layout assumes, checked: a search that
 * left them (none does: the 227 tests) is refused, never carved. */
/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->prefix_method_tokens, p->bkv, p->tail_capacity, p->metadata_bytes, *method_worst;
    ensures \result == \null ==> bkvp_sizes_ok(p);
*/
static const char *bkvp_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    const char *why = bkvp_plan_search(c, p, method_worst);
    if (why == NULL && !bkvp_sizes_in_range(p)) why = "balancekv-prefill: the plan left the ranges its layout assumes";
    return why;
}

static void bkvp_describe(const kvc_stream_config *c, const kvc_stream_plan *p, kvc_text *out)
{
    kvc_text_add(out, " prefix=%u (method %u) tail=%u kappa=%g", (unsigned)c->prefix_len,
                 (unsigned)p->prefix_method_tokens, (unsigned)p->tail_capacity, (double)p->bkv.kappa);
    kvc_balancekv_describe(c, p, out);
}

const kvc_method_ops kvc_method_ops_balancekv_prefill = {
    .id = KVC_METHOD_BALANCEKV_PREFILL,
    .fields = ops_fields,
    .plan = bkvp_plan,
    .arena_size = bkvp_arena_bytes,
    .init = bkvp_init,
    .can_accept = bkvp_can_accept,
    .update = bkvp_update,
    .view = bkvp_view,
    .elements = bkvp_elements,
    .fill_stats = bkvp_fill_stats,
    .check = bkvp_check,
    .params = kvc_balancekv_param_table,
    .n_params = KVC_BKV_PREFILL_N_PARAMS,
    .choices_read_values = 1,
    .describe = bkvp_describe,
    .describe_stats = kvc_balancekv_describe_stats,
    .prefill_work_bytes = bkvp_prefill_work_bytes,
    .prefill_open = bkvp_prefill_open,
    .prefill_close = bkvp_prefill_close,
};
