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
#define IMPLEMENTED_NAME(NAME, value, name, bits, implemented, ...) IMPLEMENTED_IF_##implemented(name)

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

/*@ // the fields field_problem checks, and the budget split they allow
    predicate kvc_config_fields_ok(kvc_stream_config *c, kvc_method_ops *o) =
      \valid_read(c) && \valid_read(o) && 1 <= c->d <= 256 && 1 <= c->dv <= 256 && 1 <= c->budget <= 16777216 &&
      c->n_sink <= 16777216 && c->n_window <= 16777216 && c->n_protect <= 16777216 && c->protect_radius <= 4096 &&
      (o->window_is_budget != 0 ==> c->n_sink + c->n_protect + 1 <= c->budget) &&
      (o->window_is_budget == 0 ==> c->n_sink + c->n_window + c->n_protect + 2 <= c->budget);
*/

/* ---- the method table's entries the planner calls (trusted dispatches,
 * docs/proofs.md "Trusted base"): WP cannot follow a function pointer, so
 * each call goes through one helper whose contract every method's entry
 * must meet. */

/* The method's own field rules, or NULL.
 * trusted-by: assigns nothing (each fields function reads the configuration
 * and returns a string literal); the configuration tests of every method
 * (tests/unit/test_stream.c, test_params.c) and the API fuzzer. */
/*@ requires \valid_read(o) && \valid_read(c);
    assigns \nothing;
*/
static const char *method_fields(const kvc_method_ops *o, const kvc_stream_config *c)
{
    return o->fields ? o->fields(c) : NULL;
}

/* The method's plan: its parameters, its worst case and its metadata.
 * trusted-by: writes the method's fields of the plan only; wp_exact,
 * wp_uniform and wp_methods prove this contract (and the worst case within
 * method_tokens * (d + dv)) for the plans of exact, uniform, K-norm, KeyDiff,
 * H2O, TOVA and SnapKV; plan_build re-checks the worst case and the
 * metadata bytes at run time for every method, so what the proof of
 * plan_build assumes of the others is this assigns clause only. */
/*@ requires \valid_read(o) && \valid_read(c) && \valid(p) && \valid(method_worst);
    requires \separated(c, p, method_worst);
    assigns p->capacity, p->t, p->s, p->m_max, p->delta0, p->subgen_estimator, p->bkv, p->prefix_method_tokens,
            p->tail_capacity, p->xp, p->metadata_bytes, *method_worst;
*/
static const char *method_plan(const kvc_method_ops *o, const kvc_stream_config *c, kvc_stream_plan *p,
                               uint64_t *method_worst)
{
    return o->plan ? o->plan(c, p, method_worst) : NULL;
}

/* Every byte of a plan zero, padding included: plans are compared bytewise
 * (kvc_stream_validate).
 * trusted-by: a memset of the whole object (WP's typed memory model cannot
 * see a struct through the byte pointer memset takes). */
/*@ requires \valid(p);
    assigns *p;
*/
static void plan_zero(kvc_stream_plan *p) { memset(p, 0, sizeof *p); }

/* A KIVI4 window is whole key blocks of 32 tokens: one that would round to
 * no block at all is refused rather than silently dropped (issue 49: a
 * decoder without its recent window degenerates). A larger window is
 * rounded down, its remainder going to the method (or to the sinks for
 * sink-window), which keeps the budget's split (docs/methods.md). */
#define KIVI4_SMALL_WINDOW                                                                                             \
    "kivi4: the window is held in whole key blocks of 32 tokens, so a window of 1-31 tokens would hold none: "         \
    "n_window must be 0 or at least 32"
#define KIVI4_WINDOW_BUDGET                                                                                            \
    "kivi4: sink-window's window (the budget after n_sink + n_protect + 1) is held in whole key blocks of 32 "         \
    "tokens: the budget must be at least n_sink + n_protect + 33, or the window would hold none"
#define KIVI4_PROTECT_WINDOW                                                                                           \
    "kivi4: protected spans need a window of at least 32 tokens (its window holds whole key blocks of 32)"

_Static_assert(sizeof(((kvc_stream_config *)0)->params.reserved_) == 2 * sizeof(uint32_t),
               "field_problem checks every reserved word of the parameters");

/* The first field rule a configuration breaks, or NULL. o is the method's
 * table (NULL for a method this build does not know). */
/*@ requires c == \null || \valid_read(c);
    requires o == \null || \valid_read(o);
    assigns \nothing;
    ensures \result == \null ==> kvc_config_fields_ok(c, o);
*/
static const char *field_problem(const kvc_stream_config *c, const kvc_method_ops *o)
{
    if (c == NULL) return "configuration is NULL";
    if (o == NULL) return "unknown method, or one this library was built without (CMake KVC_METHODS)";
    if (c->d < 1 || c->d > KVC_MAX_HEAD_DIM) return "d must be in 1..KVC_MAX_HEAD_DIM (256 unless the build sets it)";
    if (c->dv < 1 || c->dv > KVC_MAX_HEAD_DIM)
        return "dv must be in 1..KVC_MAX_HEAD_DIM (256 unless the build sets it)";
    if (c->budget < 1 || c->budget > KVC_MAX_BUDGET) return "budget must be in 1..16777216 tokens";
    if (c->n_sink > KVC_MAX_BUDGET || c->n_window > KVC_MAX_BUDGET) return "n_sink and n_window must be <= 16777216";
    if (!(c->beta >= 0.0f) || !isfinite(c->beta)) return "beta must be finite and >= 0 (0 = 1/sqrt(d))";
    if (c->n_protect > KVC_MAX_BUDGET || c->protect_radius > 4096u)
        return "n_protect must be <= 16777216 and protect_radius <= 4096 (0 = 25)";
    /* the room left for parameters to come: a 0 there is what they will read as "default" */
    if (c->reserved_ != 0u || (c->params.reserved_[0] | c->params.reserved_[1]) != 0u)
        return "reserved fields of the configuration must be 0 (start from kvc_stream_config_default)";
    if (o->window_is_budget) {
        if ((uint64_t)c->n_sink + c->n_protect + 1u > c->budget)
            return "budget must be at least n_sink + n_protect + 1 (the current token) for sink-window";
        if (c->n_protect > 0 && (uint64_t)c->n_sink + c->n_protect + 1u == c->budget)
            return "protected spans need a window: budget must exceed n_sink + n_protect + 1";
        if (c->dtype == KVC_DTYPE_KIVI4 && c->n_protect > 0 && (uint64_t)c->n_sink + c->n_protect + 33u > c->budget)
            return KIVI4_PROTECT_WINDOW;
        if (c->dtype == KVC_DTYPE_KIVI4 && (uint64_t)c->n_sink + c->n_protect + 33u > c->budget)
            return KIVI4_WINDOW_BUDGET;
        return NULL;
    }
    if (c->dtype == KVC_DTYPE_KIVI4 && c->n_window > 0 && c->n_window < 32u) return KIVI4_SMALL_WINDOW;
    if (c->n_protect > 0 && c->n_window == 0) return "protected spans need a window (n_window >= 1)";
    if (c->dtype == KVC_DTYPE_KIVI4 && c->n_protect > 0 && c->n_window < 32u) return KIVI4_PROTECT_WINDOW;
    if ((uint64_t)c->n_sink + c->n_window + c->n_protect + 2u > c->budget)
        return c->n_protect
                   ? "budget must be at least n_sink + n_window + n_protect + 2 (current token + one method token)"
                   : "budget must be at least n_sink + n_window + 2 (current token + one method token)";
    return method_fields(o, c);
}

/* The budget split between the exact regions and the method: sinks, window,
 * protected rows, the current token, and what is left to the method (0 for
 * sink-window, whose window takes the rest). field_problem's rules hold.
 * KIVI4 plans (key_blocks) keep a window of whole blocks of 32 tokens: its
 * remainder goes to the sinks (sink-window) or to the method, so the split
 * still sums to the budget.
 * Scalars in, so that the proof of the caller need not show that writing
 * the plan leaves the configuration as it was. */
/*@ requires \valid(p);
    requires 1 <= budget <= 16777216 && n_sink <= 16777216 && n_window <= 16777216 && n_protect <= 16777216;
    requires 2 <= tok <= 512;
    requires window_is_budget != 0 ==> n_sink + n_protect + 1 <= budget;
    requires window_is_budget == 0 ==> n_sink + n_window + n_protect + 2 <= budget;
    assigns p->n_sink, p->n_protect, p->n_window, p->method_tokens, p->budget_elements;
    ensures p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens == budget;
    ensures p->budget_elements == budget * tok;
    ensures p->n_window <= 16777216 && p->method_tokens <= 16777216;
    ensures window_is_budget == 0 ==> p->method_tokens >= 1;
    ensures key_blocks != 0 ==> p->n_window % 32 == 0;
*/
static void plan_split(uint32_t budget, uint32_t n_sink, uint32_t n_window, uint32_t n_protect,
                       unsigned window_is_budget, uint32_t key_blocks, uint64_t tok, kvc_stream_plan *p)
{
    p->n_protect = n_protect;
    if (window_is_budget) {
        const uint32_t w = budget - n_sink - n_protect - 1u; /* the FIFO is the rest of the budget */
        const uint32_t r = key_blocks ? w % KVC_KIVI_BLOCK : 0u;
        p->n_window = w - r;
        p->n_sink = n_sink + r;
        p->method_tokens = 0;
    } else {
        const uint32_t w = key_blocks ? n_window / KVC_KIVI_BLOCK * KVC_KIVI_BLOCK : n_window;
        p->n_sink = n_sink;
        p->n_window = w;
        p->method_tokens = budget - n_sink - w - n_protect - 1u;
    }
    //@ ghost kvc_mul_le(budget, 16777216, tok, 512);
    p->budget_elements = (uint64_t)budget * tok;
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
    ensures p->worst_elements == (p->n_sink + p->n_window + p->n_protect + 1) * (p->d + p->dv) + method_worst;
*/
static void plan_worst(kvc_stream_plan *p, uint64_t method_worst)
{
    const uint64_t tok = (uint64_t)p->d + p->dv;
    const uint64_t exact_tokens = (uint64_t)p->n_sink + p->n_window + p->n_protect + 1u;
    //@ ghost kvc_mul_le(exact_tokens, 16777216, tok, 512);
    //@ assert split: exact_tokens * tok + p->method_tokens * tok == (exact_tokens + p->method_tokens) * tok;
    p->worst_elements = exact_tokens * tok + method_worst;
}

/* 1/sqrt(d), the default softmax scale.
 * trusted-by: assigns nothing (Frama-C's libc gives sqrt an 'assigns errno',
 * which a domain error alone would change, and d >= 1 excludes it; the proof
 * jobs see this prototype only, as rng.c's libm wrappers);
 * tests/unit/test_stream.c checks the printed plan's beta. */
/*@ requires 1 <= d <= 256;
    assigns \nothing;
*/
static float default_beta(uint32_t d);
#ifndef KVC_WP_TRUSTED_LIBM
static float default_beta(uint32_t d) { return (float)(1.0 / sqrt((double)d)); }
#endif

/* The budget split and the method's plan of a configuration whose fields
 * field_problem accepted. The check after the method's plan cannot fail for
 * a method whose plan meets its contract (proved for seven, docs/proofs.md);
 * it makes the budget theorem at plan time hold for every method, by proof
 * and check, with nothing assumed of a method's arithmetic. */
/*@ requires kvc_config_fields_ok(c, o);
    requires kvc_dtype_implemented_l(c->dtype);
    requires \valid(p) && \valid(method_worst) && \separated(c, p, method_worst);
    assigns *p, *method_worst;
    ensures \result == \null ==> 1 <= p->d <= 256 && 1 <= p->dv <= 256 && p->protect_radius <= 4096;
    ensures \result == \null ==> p->n_sink <= 16777216 && p->n_window <= 16777216 && p->n_protect <= 16777216;
    ensures \result == \null ==> p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens <= 16777216;
    ensures \result == \null ==> kvc_dtype_rows_l(p->dtype);
    ensures \result == \null ==>
              p->budget_elements == (p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens) * (p->d + p->dv);
    ensures \result == \null ==> 0 <= *method_worst <= p->method_tokens * (p->d + p->dv);
    ensures \result == \null ==> p->metadata_bytes <= 4503599627370496;
*/
static const char *plan_fill(const kvc_stream_config *c, const kvc_method_ops *o, kvc_stream_plan *p,
                             uint64_t *method_worst)
{
    /* every field of c read before the first write to *p */
    const uint32_t d = c->d, dv = c->dv, budget = c->budget;
    const uint32_t n_sink = c->n_sink, n_window = c->n_window, n_protect = c->n_protect;
    const uint32_t radius = n_protect ? (c->protect_radius ? c->protect_radius : 25u) : 0u;
    const float beta = c->beta > 0.0f ? c->beta : default_beta(d);
    const kvc_method method = c->method;
    const uint32_t dtype = (uint32_t)c->dtype;
    /* KIVI4: int4 rows everywhere, the sinks' and window's keys in blocks */
    const uint32_t key_blocks = dtype == (uint32_t)KVC_DTYPE_KIVI4 ? 1u : 0u;
    const unsigned window_is_budget = o->window_is_budget;
    const uint64_t tok = (uint64_t)d + dv;

    plan_zero(p);
    p->method = method;
    p->dtype = key_blocks ? (uint32_t)KVC_DTYPE_I4 : dtype;
    p->key_blocks = key_blocks;
    p->d = d;
    p->dv = dv;
    p->beta = beta;
    p->protect_radius = radius;
    plan_split(budget, n_sink, n_window, n_protect, window_is_budget, key_blocks, tok, p);
    *method_worst = 0;
    const char *why = method_plan(o, c, p, method_worst);
    if (why != NULL) return why;
    const uint64_t method_tokens = p->method_tokens;
    //@ ghost kvc_mul_le(method_tokens, 16777216, tok, 512);
    //@ ghost kvc_mul_le(0, method_tokens, 0, tok);
    if (*method_worst > method_tokens * tok) return "internal: the method's plan exceeds its budget";
    if (p->metadata_bytes > KVC_METADATA_BYTES_MAX) return "internal: the method's metadata bytes out of range";
    //@ assert f5: p->budget_elements == (p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens) * (p->d + p->dv);
    //@ assert f6: *method_worst <= p->method_tokens * (p->d + p->dv);
    return NULL;
}

/* The arena and the worst case of a split plan. The check of the method's
 * bytes, like plan_fill's, cannot fail for a method whose arena_size meets
 * its contract (kvc_method_bytes_ok, proved for seven). */
/*@ requires \valid(p) && 1 <= p->d <= 256 && 1 <= p->dv <= 256 && p->protect_radius <= 4096;
    requires p->n_sink <= 16777216 && p->n_window <= 16777216 && p->n_protect <= 16777216;
    requires p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens <= 16777216;
    requires kvc_dtype_rows_l(p->dtype);
    requires p->budget_elements == (p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens) * (p->d + p->dv);
    requires 0 <= method_worst <= p->method_tokens * (p->d + p->dv);
    requires p->metadata_bytes <= 4503599627370496;
    assigns p->arena_bytes, p->worst_elements, p->metadata_bytes;
    ensures \result == \null ==> kvc_plan_accepted(p);
*/
static const char *plan_finish(kvc_stream_plan *p, uint64_t method_worst)
{
    const uint64_t method_bytes = kvc_stream_method_bytes(p);
    if (method_bytes > KVC_METHOD_BYTES_MAX) return "internal: the method's arena bytes out of range";
    kvc_stream_layout lay;
    const uint64_t bytes = kvc_stream_layout_make(p, method_bytes, &lay);
    /* sizes are computed in 64 bits; a 32-bit target refuses what it cannot address */
    if (bytes > (uint64_t)PTRDIFF_MAX)
        return "the arena would exceed the largest object this platform can address (PTRDIFF_MAX bytes)";
    p->arena_bytes = bytes;
    plan_worst(p, method_worst);
    //@ ghost kvc_mul_le(0, p->n_sink + p->n_window + p->n_protect + 1, 0, (uint64_t)p->d + p->dv);
    if (p->n_protect) p->metadata_bytes += p->n_window; /* the window's outlier flags */
    return NULL;
}

/* The sizes of a plan whose fields field_problem accepted. */
/*@ requires kvc_config_fields_ok(c, o);
    requires kvc_dtype_implemented_l(c->dtype);
    requires \valid(p) && \separated(c, p);
    assigns *p;
    ensures \result == \null ==> kvc_plan_accepted(p);
*/
static const char *plan_sizes(const kvc_stream_config *c, const kvc_method_ops *o, kvc_stream_plan *p)
{
    uint64_t method_worst;
    const char *why = plan_fill(c, o, p, &method_worst);
    return why != NULL ? why : plan_finish(p, method_worst);
}

void kvc_plan_copy(kvc_stream_plan *dst, const kvc_stream_plan *src) { *dst = *src; }

/* plan_sizes into a local plan, copied out when accepted (a local, so
 * that a refusal leaves *plan as it was). */
/*@ requires kvc_config_fields_ok(c, o);
    requires kvc_dtype_implemented_l(c->dtype);
    requires \valid(plan) && \separated(c, plan);
    assigns *plan;
    ensures \result == \null ==> kvc_plan_accepted(plan);
    ensures \result != \null ==> *plan == \old(*plan);
*/
static const char *plan_into(const kvc_stream_config *c, const kvc_method_ops *o, kvc_stream_plan *plan)
{
    kvc_stream_plan p;
    const char *why = plan_sizes(c, o, &p);
    if (why != NULL) return why;
    kvc_plan_copy(plan, &p);
    return NULL;
}

/* Derive the plan; returns NULL or the rule the configuration breaks, and
 * writes *plan only when it returns NULL. */
/*@ requires c == \null || \valid_read(c);
    requires \valid(plan) && \separated(c, plan);
    assigns *plan;
    ensures \result == \null ==> kvc_plan_accepted(plan);
    ensures \result != \null ==> *plan == \old(*plan);
*/
static const char *plan_build(const kvc_stream_config *c, kvc_stream_plan *plan)
{
    if (c == NULL) return field_problem(c, NULL);
    const kvc_method_ops *o = kvc_method_ops_of(c->method);
    const char *why = field_problem(c, o);
    if (why != NULL) return why;
    if (!kvc_dtype_implemented(c->dtype))
        return "storage type not implemented in this build (implemented:" KVC_DTYPE_LIST(IMPLEMENTED_NAME) ")";
    return plan_into(c, o, plan);
}

const char *kvc_stream_config_problem(const kvc_stream_config *c)
{
    kvc_stream_plan p;
    return plan_build(c, &p);
}

kvc_status kvc_stream_plan_make(const kvc_stream_config *c, kvc_stream_plan *plan)
{
    if (c == NULL || plan == NULL) return KVC_E_ARG;
    if (plan_build(c, plan) != NULL)
        return field_problem(c, kvc_method_ops_of(c->method)) == NULL && (unsigned)c->dtype < KVC_DTYPE_COUNT &&
                       !kvc_dtype_implemented(c->dtype)
                   ? KVC_E_UNSUPPORTED
                   : KVC_E_ARG;
    return KVC_OK;
}

uint64_t kvc_stream_open_block_bytes(const kvc_stream_plan *p)
{
    if (!p->key_blocks) return 0;
    return KVC_ALIGN_UP((uint64_t)KVC_KIVI_BLOCK * kvc_row_bytes(KVC_DTYPE_F16, p->d)) +
           KVC_ALIGN_UP((uint64_t)KVC_KIVI_BLOCK * kvc_row_bytes(KVC_DTYPE_F16, p->dv));
}

uint64_t kvc_stream_method_bytes(const kvc_stream_plan *p)
{
    const kvc_method_ops *o = kvc_method_ops_of(p->method);
    /* a KIVI4 plan's open block follows the method's own bytes */
    return (o && o->arena_size ? o->arena_size(p) : 0) + kvc_stream_open_block_bytes(p);
}

uint64_t kvc_stream_layout_make(const kvc_stream_plan *p, uint64_t method_bytes, kvc_stream_layout *lay)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)KVC_SIZE_STREAM_HEADER); /* sizeof(struct kvc_stream), stream.c */
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
