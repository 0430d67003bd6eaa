/* Budget -> parameters for every method (docs/methods.md section 0), and the
 * arena layout of the stream wrapper. One function derives everything so the
 * size function, init and the printed plan can never disagree. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "methods.h"
#include "plan.h"
#include "shared/rows.h"

/* " f32 f16 ..." from kvc_dtype_list.h: the implemented column picks the names */
#define IMPLEMENTED_IF_1(name) " " name
#define IMPLEMENTED_IF_0(name)
#define IMPLEMENTED_NAME(NAME, value, name, bits, implemented, doc) IMPLEMENTED_IF_##implemented(name)

kvc_stream_config kvc_stream_config_default(kvc_method m, uint32_t d, uint32_t dv, uint32_t budget, uint64_t seed)
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

/* The first field rule a configuration breaks, or NULL. */
static const char *field_problem(const kvc_stream_config *c)
{
    if (c == NULL) return "configuration is NULL";
    if (kvc_method_name(c->method) == NULL)
        return "unknown method, or one this library was built without (CMake KVC_METHODS)";
    if (c->d < 1 || c->d > KVC_MAX_HEAD_DIM) return "d must be in 1..KVC_MAX_HEAD_DIM (256 unless the build sets it)";
    if (c->dv < 1 || c->dv > KVC_MAX_HEAD_DIM)
        return "dv must be in 1..KVC_MAX_HEAD_DIM (256 unless the build sets it)";
    if (c->budget < 1 || c->budget > KVC_MAX_BUDGET) return "budget must be in 1..16777216 tokens";
    if (c->n_sink > KVC_MAX_BUDGET || c->n_window > KVC_MAX_BUDGET) return "n_sink and n_window must be <= 16777216";
    if (!(c->beta >= 0.0f) || !isfinite(c->beta)) return "beta must be finite and >= 0 (0 = 1/sqrt(d))";
    if (c->n_protect > KVC_MAX_BUDGET || c->protect_radius > 4096u)
        return "n_protect must be <= 16777216 and protect_radius <= 4096 (0 = 25)";
    const kvc_method_ops *o = kvc_method_ops_of(c->method);
    if (o->window_is_budget) {
        if ((uint64_t)c->n_sink + c->n_protect + 1u > c->budget)
            return "budget must be at least n_sink + n_protect + 1 (the current token) for sink-window";
        if (c->n_protect > 0 && (uint64_t)c->n_sink + c->n_protect + 1u == c->budget)
            return "protected spans need a window: budget must exceed n_sink + n_protect + 1";
        return NULL;
    }
    if (c->n_protect > 0 && c->n_window == 0) return "protected spans need a window (n_window >= 1)";
    if ((uint64_t)c->n_sink + c->n_window + c->n_protect + 2u > c->budget)
        return c->n_protect
                   ? "budget must be at least n_sink + n_window + n_protect + 2 (current token + one method token)"
                   : "budget must be at least n_sink + n_window + 2 (current token + one method token)";
    return o->fields ? o->fields(c) : NULL;
}

/* The budget split between the exact regions and the method: sinks, window,
 * protected rows, the current token, and what is left to the method (0 for
 * sink-window, whose window takes the rest). field_problem's rules hold. */
/*@ requires \valid_read(c) && \valid(p) && \separated(c, p);
    requires 1 <= c->d <= 256 && 1 <= c->dv <= 256 && 1 <= c->budget <= 16777216;
    requires c->n_sink <= 16777216 && c->n_window <= 16777216 && c->n_protect <= 16777216;
    requires tok == c->d + c->dv;
    requires window_is_budget != 0 ==> c->n_sink + c->n_protect + 1 <= c->budget;
    requires window_is_budget == 0 ==> c->n_sink + c->n_window + c->n_protect + 2 <= c->budget;
    assigns p->n_sink, p->n_protect, p->n_window, p->method_tokens, p->budget_elements;
    ensures p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens == c->budget;
    ensures p->budget_elements == \old(c->budget) * tok;
    ensures p->n_window <= 16777216 && p->method_tokens <= 16777216;
    ensures window_is_budget == 0 ==> p->method_tokens >= 1;
*/
static void plan_split(const kvc_stream_config *c, unsigned window_is_budget, uint64_t tok, kvc_stream_plan *p)
{
    const uint64_t budget = c->budget;
    p->n_sink = c->n_sink;
    p->n_protect = c->n_protect;
    if (window_is_budget) {
        p->n_window = c->budget - c->n_sink - c->n_protect - 1u; /* the FIFO is the rest of the budget */
        p->method_tokens = 0;
    } else {
        p->n_window = c->n_window;
        p->method_tokens = c->budget - c->n_sink - c->n_window - c->n_protect - 1u;
    }
    //@ ghost kvc_mul_le(budget, 16777216, tok, 512);
    p->budget_elements = budget * tok;
}

/* The plan's worst case: the exact regions at their full size plus the
 * method's worst case. With the method's plan contract (worst <=
 * method_tokens * (d + dv), kvc_method_plan_post) it never exceeds the
 * budget: the budget theorem at plan time. */
/*@ requires \valid(p) && 1 <= p->d <= 256 && 1 <= p->dv <= 256;
    requires p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens <= 16777216;
    requires p->budget_elements == (p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens) * (p->d + p->dv);
    requires method_worst <= p->method_tokens * (p->d + p->dv);
    assigns p->worst_elements;
    ensures p->worst_elements <= p->budget_elements;
*/
static void plan_worst(kvc_stream_plan *p, uint64_t method_worst)
{
    const uint64_t tok = (uint64_t)p->d + p->dv;
    const uint64_t exact_tokens = (uint64_t)p->n_sink + p->n_window + p->n_protect + 1u;
    //@ ghost kvc_mul_le(exact_tokens, 16777216, tok, 512);
    //@ assert split: exact_tokens * tok + p->method_tokens * tok == (exact_tokens + p->method_tokens) * tok;
    p->worst_elements = exact_tokens * tok + method_worst;
}

/* Derive the plan; returns NULL or the rule the configuration breaks. */
static const char *plan_build(const kvc_stream_config *c, kvc_stream_plan *plan)
{
    const char *why = field_problem(c);
    if (why != NULL) return why;
    if (!kvc_dtype_implemented(c->dtype))
        return "storage type not implemented in this build (implemented:" KVC_DTYPE_LIST(IMPLEMENTED_NAME) ")";

    kvc_stream_plan p;
    memset(&p, 0, sizeof p);
    p.method = c->method;
    p.dtype = (uint32_t)c->dtype;
    p.d = c->d;
    p.dv = c->dv;
    p.beta = c->beta > 0.0f ? c->beta : (float)(1.0 / sqrt((double)c->d));
    p.protect_radius = c->n_protect ? (c->protect_radius ? c->protect_radius : 25u) : 0u;
    uint64_t method_worst = 0;

    const kvc_method_ops *o = kvc_method_ops_of(c->method);
    plan_split(c, o->window_is_budget, (uint64_t)c->d + c->dv, &p);
    if (o->plan) {
        why = o->plan(c, &p, &method_worst);
        if (why != NULL) return why;
    }
    plan_worst(&p, method_worst);
    if (p.n_protect) p.metadata_bytes += p.n_window; /* the window's outlier flags */
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
    if (plan_build(c, &p) != NULL)
        return field_problem(c) == NULL && (unsigned)c->dtype < KVC_DTYPE_COUNT && !kvc_dtype_implemented(c->dtype)
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
    lay->off_sink_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->n_sink, p->d));
    lay->off_sink_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->n_sink, p->dv));
    lay->off_win_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->n_window, p->d));
    lay->off_win_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->n_window, p->dv));
    /* the pending token in f32; a quantised type adds the f32 staging row (d + dv) after it */
    const uint64_t stage = p->dtype == KVC_DTYPE_F32 ? 0u : (uint64_t)p->d + p->dv;
    lay->off_pend_k = kvc_carve(&cur, (uint64_t)p->d * sizeof(float));
    lay->off_pend_v = kvc_carve(&cur, ((uint64_t)p->dv + stage) * sizeof(float));
    lay->off_prot_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->n_protect, p->d));
    lay->off_prot_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->n_protect, p->dv));
    lay->off_wflag = kvc_carve(&cur, p->n_protect ? p->n_window : 0u);
    lay->off_method = kvc_carve(&cur, method_bytes);
    lay->method_bytes = method_bytes;
    return cur;
}

size_t kvc_stream_arena_bytes(const kvc_stream_config *cfg)
{
    kvc_stream_plan p;
    if (kvc_stream_plan_make(cfg, &p) != KVC_OK) return 0;
    return (size_t)p.arena_bytes;
}

/* Arena bytes of cfg at budget b, or 0 when that budget is invalid. */
static uint64_t arena_at(const kvc_stream_config *cfg, uint32_t b)
{
    kvc_stream_config c = *cfg;
    c.budget = b;
    kvc_stream_plan p;
    return kvc_stream_plan_make(&c, &p) == KVC_OK ? p.arena_bytes : 0u;
}

uint32_t kvc_stream_budget_for_bytes(const kvc_stream_config *cfg, uint64_t bytes)
{
    if (cfg == NULL) return 0;
    /* Every method is valid from a smallest budget up and its arena grows
       with the budget (tests/unit/test_stream.c budget_for_bytes_is_largest
       checks both for every method), so two binary searches find the
       answer: the smallest valid budget, then the largest that fits. */
    uint32_t lo = 1, hi = KVC_MAX_BUDGET;
    if (arena_at(cfg, hi) == 0) return 0; /* invalid at every budget */
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2u;
        if (arena_at(cfg, mid) != 0)
            hi = mid;
        else
            lo = mid + 1u;
    }
    const uint64_t smallest = arena_at(cfg, lo);
    if (smallest == 0 || smallest > bytes) return 0;
    hi = KVC_MAX_BUDGET;
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo + 1u) / 2u;
        const uint64_t a = arena_at(cfg, mid);
        if (a != 0 && a <= bytes)
            lo = mid;
        else
            hi = mid - 1u;
    }
    return lo;
}
