/* Budget -> parameters for every method (ALGORITHMS.md section 0), and the
 * arena layout of the stream wrapper. One function derives everything so the
 * size function, init and the printed plan can never disagree. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "methods.h"
#include "plan.h"
#include "balance.h"

#define KVC_SUBGEN_DEFAULT_T 8u
#define KVC_SUBGEN_MAX_T 4096u
#define KVC_BKV_DEFAULT_LEVELS 3u
#define KVC_BKV_DEFAULT_BMAX 8u
/* Batches below this are mostly noise (the walk cannot balance a few points):
 * on the clustered n = 8192, budget 512 trace, b_max 8 with t = 20 gave mean
 * relative error 4.8, b_max 2 with t = 70 gave 0.77. */
#define KVC_BKV_MIN_AUTO_T 64u
#define KVC_BKV_DEFAULT_MODE KVC_BALANCE_PRACTICAL
#define KVC_BKV_PREFILL_DEFAULT_BLOCK 256u
#define KVC_EXPRESS_DEFAULT_L_MODE KVC_EXPRESS_L_CONST
#define KVC_EXPRESS_DEFAULT_CENTER 1u
/* Defaults chosen by measurement (mean relative error; bench/mode_report.sh):
 * stories260K (5 layers x 4 heads x 3 seeds, budget 128 of 512): streaming
 * practical 0.237 vs theory 0.275; prefill theory 0.161 vs practical 0.162.
 * SmolLM2-135M (GPL-3 text, n = 2048, 5 layers x 3 heads x 2 seeds, budgets
 * 10% / 25%): streaming practical 0.71 / 0.28 vs theory 0.39 / 0.33 (medians
 * 0.30 / 0.20 vs 0.38 / 0.25: practical is better but for one run at 10.5),
 * prefill practical 0.284 / 0.157 vs theory 0.313 / 0.180: the prefill
 * default moved to practical. */
#define KVC_BKV_PREFILL_DEFAULT_MODE KVC_BALANCE_PRACTICAL

kvc_stream_config kvc_stream_config_default(kvc_method m, uint32_t d, uint32_t dv, uint32_t budget,
                                            uint64_t seed)
{
    kvc_stream_config c;
    memset(&c, 0, sizeof c);
    c.method = m;
    c.dtype = KVC_DTYPE_F32;
    c.d = d;
    c.dv = dv;
    c.budget = budget;
    c.n_sink = 32;
    c.n_window = 32;
    c.beta = 0.0f;
    c.seed = seed;
    return c;
}

/* balancekv-prefill: slots of a tree with blocks of t over a prompt of m
 * method tokens, for the fewest rounds T in [lo, hi] that fit `room` slots
 * (or for T = hi when none fits). Writes the T chosen. */
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

/* The first field rule a configuration breaks, or NULL. */
static const char *field_problem(const kvc_stream_config *c)
{
    if (c == NULL) return "configuration is NULL";
    if (kvc_method_name(c->method) == NULL) return "unknown method";
    if (c->d < 1 || c->d > KVC_MAX_HEAD_DIM) return "d must be in 1..256";
    if (c->dv < 1 || c->dv > KVC_MAX_HEAD_DIM) return "dv must be in 1..256";
    if (c->budget < 1 || c->budget > KVC_MAX_BUDGET) return "budget must be in 1..16777216 tokens";
    if (c->n_sink > KVC_MAX_BUDGET || c->n_window > KVC_MAX_BUDGET) return "n_sink and n_window must be <= 16777216";
    if (!(c->beta >= 0.0f) || !isfinite(c->beta)) return "beta must be finite and >= 0 (0 = 1/sqrt(d))";
    if (c->method == KVC_METHOD_SINK_WINDOW) {
        if ((uint64_t)c->n_sink + 1u > c->budget)
            return "budget must be at least n_sink + 1 (the current token) for sink-window";
        return NULL;
    }
    if ((uint64_t)c->n_sink + c->n_window + 2u > c->budget)
        return "budget must be at least n_sink + n_window + 2 (current token + one method token)";
    if (c->method == KVC_METHOD_SUBGEN) {
        const kvc_subgen_params *p = &c->subgen;
        if (p->t > KVC_SUBGEN_MAX_T) return "subgen t must be in 1..4096 (0 = 8)";
        if (!(p->delta0 >= 0.0f) || !isfinite(p->delta0)) return "subgen delta0 must be finite and >= 0";
    }
    if (c->method == KVC_METHOD_EXPRESS_PREFILL && (c->prefix_len < 1 || c->prefix_len > KVC_MAX_BUDGET * 16u))
        return "express-prefill needs prefix_len, the prompt length it compresses (1 .. 2^28)";
    if (c->method == KVC_METHOD_EXPRESS || c->method == KVC_METHOD_EXPRESS_PREFILL) {
        const kvc_express_params *x = &c->express;
        if (x->s != 0 && (x->s < 2 || (x->s & (x->s - 1)) != 0 || x->s > (1u << 22)))
            return "express s must be a power of two in 2..2^22 (0 = derive)";
        if (x->c != 0 && ((x->c & (x->c - 1)) != 0 || (x->s != 0 && x->c > x->s)))
            return "express c must be a power of two dividing s (0 = s)";
        if (x->l_mode > KVC_EXPRESS_L_CONST) return "express l_mode must be theory or const";
        if (!(x->L >= 0.0f) || !isfinite(x->L)) return "express L must be finite and > 0 (0 = 1)";
        if (!(x->delta >= 0.0f && x->delta < 1.0f)) return "express delta must be in (0, 1) (0 = 0.5)";
        if (x->center > 2) return "express center must be 1 (on) or 2 (off)";
    }
    if (c->method == KVC_METHOD_BALANCEKV_PREFILL && (c->prefix_len < 1 || c->prefix_len > KVC_MAX_BUDGET * 16u))
        return "balancekv-prefill needs prefix_len, the prompt length it compresses (1 .. 2^28)";
    if (c->method == KVC_METHOD_BALANCEKV || c->method == KVC_METHOD_BALANCEKV_PREFILL) {
        const kvc_balancekv_params *b = &c->balancekv;
        if (b->t % 2 != 0 || b->t > KVC_MAX_BUDGET) return "balancekv t must be even (0 = derive)";
        if (b->levels > 16) return "balancekv levels must be in 1..16 (0 = 3)";
        if (b->b_max > 64) return "balancekv b_max must be in 1..64 (0 = 8)";
        if (b->mode > KVC_BALANCE_SMALLER_CLASS) return "balancekv mode must be practical, theory or smaller-class";
        if (!(b->gamma >= 0.0f) || !isfinite(b->gamma)) return "balancekv gamma must be finite and > 0 (0 = 4)";
        if (!(b->delta >= 0.0f && b->delta < 1.0f)) return "balancekv delta must be in (0, 1) (0 = 0.01)";
        if (!(b->rho >= 0.0f && b->rho < 1.0f)) return "balancekv rho must be in [0, 1)";
        if (!(b->kappa >= 0.0f) || !isfinite(b->kappa)) return "balancekv kappa must be finite and >= 0";
        if (b->tail_method != 0 && b->tail_method != KVC_METHOD_EXACT && b->tail_method != KVC_METHOD_UNIFORM)
            return "balancekv-prefill tail_method must be exact or uniform";
    }
    return NULL;
}

/* Derive the plan; returns NULL or the rule the configuration breaks. */
static const char *plan_build(const kvc_stream_config *c, kvc_stream_plan *plan)
{
    const char *why = field_problem(c);
    if (why != NULL) return why;
    if (c->dtype != KVC_DTYPE_F32) return "only f32 storage is implemented";

    kvc_stream_plan p;
    memset(&p, 0, sizeof p);
    const uint64_t tok = (uint64_t)c->d + c->dv;
    p.method = c->method;
    p.d = c->d;
    p.dv = c->dv;
    p.beta = c->beta > 0.0f ? c->beta : (float)(1.0 / sqrt((double)c->d));
    p.n_sink = c->n_sink;
    p.budget_elements = (uint64_t)c->budget * tok;
    uint64_t method_worst = 0;

    if (c->method == KVC_METHOD_SINK_WINDOW) {
        p.n_window = c->budget - c->n_sink - 1u; /* the FIFO is the rest of the budget */
        p.method_tokens = 0;
    } else {
        p.n_window = c->n_window;
        p.method_tokens = c->budget - c->n_sink - c->n_window - 1u;
    }

    switch (c->method) {
    case KVC_METHOD_SINK_WINDOW: break;
    case KVC_METHOD_EXACT:
        p.capacity = p.method_tokens;
        method_worst = (uint64_t)p.capacity * tok;
        break;
    case KVC_METHOD_UNIFORM:
        p.capacity = p.method_tokens;
        method_worst = (uint64_t)p.capacity * tok;
        p.metadata_bytes = (uint64_t)p.capacity * sizeof(uint32_t);
        break;
    case KVC_METHOD_SUBGEN: {
        const uint64_t elems = (uint64_t)p.method_tokens * tok;
        p.t = c->subgen.t ? c->subgen.t : KVC_SUBGEN_DEFAULT_T;
        p.s = c->subgen.s ? c->subgen.s : p.method_tokens / 2u;
        if (p.s < 1) p.s = 1;
        if ((uint64_t)p.s * tok > elems) return "subgen s does not fit the method budget";
        const uint64_t per_cluster = (uint64_t)(p.t + 1u) * c->d;
        const uint64_t m_fit = (elems - (uint64_t)p.s * tok) / per_cluster;
        p.m_max = c->subgen.m_max ? c->subgen.m_max : (uint32_t)(m_fit > UINT32_MAX ? UINT32_MAX : m_fit);
        if (m_fit < 1)
            return "budget too small for subgen: no room for one cluster beside the reservoir";
        if (p.m_max < 1 || p.m_max > m_fit) return "subgen m_max does not fit the method budget";
        p.delta0 = c->subgen.delta0;
        method_worst = (uint64_t)p.m_max * per_cluster + (uint64_t)p.s * tok;
        p.metadata_bytes = (uint64_t)p.m_max * (sizeof(uint32_t) + sizeof(uint64_t)) +
                           (uint64_t)p.m_max * p.t * (sizeof(uint32_t) + sizeof(float)) +
                           (uint64_t)p.s * (sizeof(uint32_t) + sizeof(float));
        break;
    }
    case KVC_METHOD_BALANCEKV: {
        kvc_balancekv_params b = c->balancekv;
        b.levels = b.levels ? b.levels : KVC_BKV_DEFAULT_LEVELS;
        if (b.b_max == 0) {
            /* 8 buckets unless that leaves batches below KVC_BKV_MIN_AUTO_T:
               then the most buckets that still give such batches (at least one) */
            b.b_max = KVC_BKV_DEFAULT_BMAX;
            while (b.b_max > 1 &&
                   ((uint64_t)KVC_BKV_MIN_AUTO_T + b.levels * (KVC_BKV_MIN_AUTO_T / 2) + 1u) *
                           ((uint64_t)b.b_max * tok + c->d) >
                       (uint64_t)p.method_tokens * tok)
                b.b_max--;
        }
        b.mode = b.mode ? b.mode : KVC_BKV_DEFAULT_MODE;
        b.gamma = b.gamma > 0.0f ? b.gamma : 4.0f;
        b.delta = b.delta > 0.0f ? b.delta : 0.01f;
        const uint64_t elems = (uint64_t)p.method_tokens * tok;
        /* elements of one slot set: b_max numerator stores + one keys-only store */
        const uint64_t per_slot = (uint64_t)b.b_max * tok + c->d;
        if (b.t == 0) {
            /* largest even t with slots(t) * per_slot <= elems; slots(t) = t + T t/2 + 1 */
            uint64_t slots_fit = elems / per_slot;
            uint64_t t = slots_fit > 1 ? (slots_fit - 1) * 2 / (2 + b.levels) : 0;
            t &= ~(uint64_t)1;
            while (t >= 2 && (t + b.levels * (t / 2) + 1) * per_slot > elems) t -= 2;
            if (t < 2) return "budget too small for balancekv: not even a batch of 2 fits every bucket";
            if (t > KVC_MAX_BUDGET) t = KVC_MAX_BUDGET;
            b.t = (uint32_t)t;
        }
        const uint64_t slots = (uint64_t)b.t + (uint64_t)b.levels * (b.t / 2) + 1;
        if (slots * per_slot > elems) return "balancekv t does not fit the method budget";
        p.bkv = b;
        method_worst = slots * per_slot;
        p.metadata_bytes = slots * (b.b_max + 1) * (sizeof(float) + sizeof(uint32_t)) +
                           kvc_balancekv_scratch_bytes(&p);
        break;
    }
    case KVC_METHOD_BALANCEKV_PREFILL: {
        kvc_balancekv_params b = c->balancekv;
        const int auto_block = b.t == 0;
        b.t = b.t ? b.t : KVC_BKV_PREFILL_DEFAULT_BLOCK;
        b.b_max = 1;
        b.mode = b.mode ? b.mode : KVC_BKV_PREFILL_DEFAULT_MODE;
        b.gamma = b.gamma > 0.0f ? b.gamma : 4.0f;
        b.delta = b.delta > 0.0f ? b.delta : 0.01f;
        b.kappa = b.kappa > 0.0f ? b.kappa : 0.025f;
        b.tail_method = b.tail_method ? b.tail_method : KVC_METHOD_EXACT;
        const uint64_t exact = (uint64_t)c->n_sink + c->n_window + 1u;
        const uint64_t m = c->prefix_len > exact ? c->prefix_len - exact : 0;
        p.prefix_method_tokens = (uint32_t)m;
        const uint32_t T_lo = b.levels ? b.levels : 1u, T_hi = b.levels ? b.levels : 16u;
        uint64_t slots = prefill_fewest_rounds(m, b.t, T_lo, T_hi, p.method_tokens, &b.levels);
        /* the default block of 256 is halved until the tree fits the budget */
        while (auto_block && slots > p.method_tokens && b.t > 4) {
            b.t /= 2;
            slots = prefill_fewest_rounds(m, b.t, T_lo, T_hi, p.method_tokens, &b.levels);
        }
        if (slots > p.method_tokens)
            return "budget too small for balancekv-prefill: its blocks do not fit (lower the block size t)";
        p.bkv = b;
        p.tail_capacity = (uint32_t)(p.method_tokens - slots);
        method_worst = (uint64_t)p.method_tokens * tok;
        p.metadata_bytes = slots * (sizeof(float) + sizeof(uint32_t)) +
                           ((uint64_t)kvc_balance_scratch_doubles(c->d, b.t) * sizeof(double) + b.t);
        break;
    }
    case KVC_METHOD_EXPRESS:
    case KVC_METHOD_EXPRESS_PREFILL: {
        const int prefill = c->method == KVC_METHOD_EXPRESS_PREFILL;
        const uint64_t exact_regions = (uint64_t)c->n_sink + c->n_window + 1u;
        const uint64_t m = prefill && c->prefix_len > exact_regions ? c->prefix_len - exact_regions : 0;
        if (prefill) p.prefix_method_tokens = (uint32_t)m;
        kvc_express_params x = c->express;
        x.l_mode = x.l_mode ? x.l_mode : KVC_EXPRESS_DEFAULT_L_MODE;
        x.L = x.L > 0.0f ? x.L : 1.0f;
        x.delta = x.delta > 0.0f ? x.delta : 0.5f;
        x.center = x.center ? x.center : KVC_EXPRESS_DEFAULT_CENTER;
        if (x.s == 0) {
            for (uint64_t s = 2; s <= (1u << 22); s *= 2) {
                const uint64_t cc = x.c ? x.c : s;
                if (cc > s) continue;
                const uint64_t worst = prefill ? kvc_express_prefix_worst(m, s, cc)
                                               : (6 * s - 2 * s / cc - 1 > 4 * s ? 6 * s - 2 * s / cc - 1 : 4 * s);
                if (worst > p.method_tokens) break;
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
        if (worst > p.method_tokens) return "express s does not fit the method budget (worst case 6s - 2s/c - 1)";
        p.xp = x;
        if (prefill) p.tail_capacity = (uint32_t)(p.method_tokens - worst);
        method_worst = (worst + p.tail_capacity) * tok;
        p.metadata_bytes = (8ull * x.s) * (sizeof(uint32_t) + sizeof(float)) + kvc_express_scratch_bytes(&p);
        break;
    }
    }
    p.worst_elements = ((uint64_t)p.n_sink + p.n_window + 1u) * tok + method_worst;
    kvc_stream_layout lay;
    p.arena_bytes = kvc_stream_layout_make(&p, kvc_stream_method_bytes(&p), &lay);
    /* sizes are computed in 64 bits; a 32-bit target refuses what it cannot address */
    if (p.arena_bytes > (uint64_t)PTRDIFF_MAX)
        return "the arena would exceed the largest object this platform can address (PTRDIFF_MAX bytes)";
    *plan = p;
    return NULL;
}

const char *kvc_stream_config_problem(const kvc_stream_config *c)
{
    kvc_stream_plan p;
    return plan_build(c, &p);
}

kvc_status kvc_stream_plan_make(const kvc_stream_config *c, kvc_stream_plan *plan)
{
    kvc_stream_plan p;
    if (c == NULL || plan == NULL) return KVC_E_ARG;
    if (plan_build(c, &p) != NULL) return c->dtype != KVC_DTYPE_F32 && field_problem(c) == NULL
                                               ? KVC_E_UNSUPPORTED
                                               : KVC_E_ARG;
    *plan = p;
    return KVC_OK;
}

uint64_t kvc_stream_method_bytes(const kvc_stream_plan *p)
{
    const kvc_method_ops *o = kvc_method_ops_of(p->method);
    return o && o->arena_size ? o->arena_size(p) : 0;
}

uint64_t kvc_stream_layout_make(const kvc_stream_plan *p, uint64_t method_bytes, kvc_stream_layout *lay)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)kvc_stream_header_bytes());
    lay->off_sink_k = kvc_carve(&cur, (uint64_t)p->n_sink * p->d * sizeof(float));
    lay->off_sink_v = kvc_carve(&cur, (uint64_t)p->n_sink * p->dv * sizeof(float));
    lay->off_win_k = kvc_carve(&cur, (uint64_t)p->n_window * p->d * sizeof(float));
    lay->off_win_v = kvc_carve(&cur, (uint64_t)p->n_window * p->dv * sizeof(float));
    lay->off_pend_k = kvc_carve(&cur, (uint64_t)p->d * sizeof(float));
    lay->off_pend_v = kvc_carve(&cur, (uint64_t)p->dv * sizeof(float));
    lay->off_method = kvc_carve(&cur, method_bytes);
    lay->method_bytes = method_bytes;
    return cur;
}

size_t kvc_stream_arena_size(const kvc_stream_config *cfg)
{
    kvc_stream_plan p;
    if (kvc_stream_plan_make(cfg, &p) != KVC_OK) return 0;
    return (size_t)p.arena_bytes;
}
