/* Internal interface every compression method implements for the stream
 * wrapper (stream.c). Each method's state is the header at the start of its
 * own sub-arena; `update` is only called after `can_accept` said yes, and it
 * cannot fail, so a rejected append never leaves a half-updated state.
 *
 * `*_check(st, plan, method_in)` returns 1 when the method header is what
 * init made of `plan` (magic, dimensions, offsets recomputed) and every
 * counter that indexes memory is inside the range the invariants allow for a
 * method that has received `method_in` tokens; the stream calls it before
 * every operation, so a corrupted header is refused, never followed. */
#ifndef KVC_METHODS_H
#define KVC_METHODS_H

#include "kvc/kvc_stream.h"
#include "shared/rows.h"

/* A tunable parameter: its public description, and where it lives in
 * kvc_stream_config (or a setter for parameters that span fields). */
typedef struct kvc_method_param {
    kvc_param_desc desc;
    size_t offset;                                                        /* of a uint32_t or float field */
    const uint32_t *choice_values;                                        /* CHOICE: value of each word */
    kvc_status (*set)(kvc_stream_config *c, const char *text);            /* NULL: generic by type and offset */
    kvc_status (*get)(const kvc_stream_config *c, char *buf, size_t cap); /* NULL: generic; with set */
} kvc_method_param;

/* A bounded text buffer for describe(): appends never overflow, the text is
 * always NUL-terminated, `len` counts what the whole text needs. */
typedef struct kvc_text {
    char *buf;
    size_t cap, len;
} kvc_text;
void kvc_text_add(kvc_text *t, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The rows of one kvc_stream_prefill call, as the caller holds them (f32). */
typedef struct kvc_prompt_rows {
    const float *keys, *values;
    size_t key_stride, value_stride; /* floats from one token's row to the next */
    uint64_t first;                  /* the token position of row 0 */
    size_t n;                        /* rows appended */
} kvc_prompt_rows;

/* One kvc_stream_prefill call while it runs (on the caller's stack, never in
 * an arena): its rows, the caller's scratch, and what the method gathered
 * there from tokens appended before the call that reached it during the call
 * (their rows are not among the caller's: a window of plain appends before
 * the prompt's last part). */
typedef struct kvc_prompt_call {
    kvc_prompt_rows rows;
    size_t n_call; /* rows the caller gave (rows.n counts those appended so far) */
    void *work;    /* kvc_stream_prefill_work_bytes(st, n_call) bytes, 8-aligned */
    size_t work_bytes;
    size_t pre_n; /* rows the method copied into work from earlier tokens */
} kvc_prompt_call;

/* What a method's update receives besides its state: the kernel table (every
 * touch of a cached row goes through it), the stream's validated plan
 * (dimensions, storage type), and inside a kvc_stream_prefill call the call
 * (NULL otherwise). */
typedef struct kvc_method_ctx {
    const kvc_kernels *kern;
    const kvc_stream_plan *plan;
    kvc_prompt_call *call;
} kvc_method_ctx;

/* What the stream wrapper needs from a method, in one table per method (its
 * own file defines it). Entries a method does not need are NULL: no
 * `can_accept` = always accepts; no `fill_stats` = no method counters; a
 * method without state (sink-window) has `arena_size` NULL and drops the
 * tokens that leave the window. */
typedef struct kvc_method_ops {
    kvc_method id;             /* its name and summary come from kvc_method_list.h (registry.c) */
    unsigned window_is_budget; /* 1: the exact window takes the budget but the sinks (sink-window) */
    /* the first rule of the method's own parameters a configuration breaks, or NULL */
    const char *(*fields)(const kvc_stream_config *c);
    /* derive the method's part of the plan from the budget (p->method_tokens
       is set); writes the method's worst-case elements; NULL or why not */
    const char *(*plan)(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst);
    uint64_t (*arena_size)(const kvc_stream_plan *p);
    void (*init)(void *st, const kvc_stream_plan *p, uint64_t seed);
    int (*can_accept)(const void *st);
    void (*update)(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token);
    size_t (*view)(const void *st, const kvc_stream_plan *p, kvc_segment *seg); /* returns segments written */
    uint64_t (*elements)(const void *st);
    void (*fill_stats)(const void *st, kvc_stream_stats *stats);
    int (*check)(const void *st, const kvc_stream_plan *p, uint64_t method_in);
    const kvc_method_param *params; /* tunable parameters (may be NULL) */
    size_t n_params;
    /* 1 when which entries are kept, or their weights, depend on the values of
       keys or values (norms, distances, walks): the tokens a method receives
       come out of the quantised window, so a storage type changes such a
       method's choices, not only its numbers (tests/unit/test_dtype.c) */
    unsigned choices_read_values;
    /* query-aware hooks (NULL: not used). observe: the attention mass each
       entry of the method's own view segments received over one batched
       attend (view order, `n` entries), and that of the `n_recent` tokens of
       the window and the current token (tokens first_recent, first_recent +
       1, ..., oldest first), which reach the method later. prefill_queries: the prompt's last
       queries, n_rows rows of d floats (SnapKV's observation window). */
    void (*observe)(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                    size_t n_recent, uint64_t first_recent);
    void (*prefill_queries)(void *st, const kvc_method_ctx *cx, const float *q, size_t n_rows);
    /* printing (NULL: nothing to add): the method's derived parameters as
       " name=value" pairs, and its live counters as one line */
    void (*describe)(const kvc_stream_config *c, const kvc_stream_plan *p, kvc_text *out);
    void (*describe_stats)(const kvc_stream_stats *s, kvc_text *out);
    /* whole-prompt hooks (NULL: not used; kvc_stream_prefill is then a loop
       of appends). prefill_work_bytes: caller scratch for a prompt of n
       tokens. prefill_open: the appends that follow belong to one prompt
       call. prefill_close: that call ended after rows->n tokens (the
       caller's f32 rows of tokens rows->first ..), compress what it staged. */
    size_t (*prefill_work_bytes)(const void *st, const kvc_stream_plan *p, size_t n);
    void (*prefill_open)(void *st);
    void (*prefill_close)(void *st, const kvc_method_ctx *cx); /* cx->call: the call */
    /* a score-and-evict method's score and hooks (shared/evict.h), NULL otherwise */
    const struct kvc_evict_ops *evict;
} kvc_method_ops;

/* The seven entries of a method's state machine, named by one prefix:
 * <p>_plan, <p>_arena_size, <p>_init, <p>_update, <p>_view, <p>_elements and
 * <p>_check (a table lists what else its method has after them). */
#define KVC_METHOD_STATE_OPS(p)                                                                                        \
    .plan = p##_plan, .arena_size = p##_arena_size, .init = p##_init, .update = p##_update, .view = p##_view,          \
    .elements = p##_elements, .check = p##_check

#define KVC_DECLARE_OPS(ident, NAME, value, name, kvpress, summary) extern const kvc_method_ops kvc_method_ops_##ident;
KVC_METHOD_LIST(KVC_DECLARE_OPS)
#undef KVC_DECLARE_OPS

/* Set a U32 / F32 parameter from text by its descriptor (range-checked; 0 = derive). */
kvc_status kvc_param_set_number(kvc_stream_config *c, const kvc_method_param *p, const char *text);
/* Copy `text` (length len) into buf; KVC_E_ARG (buf "") when it does not fit (cap >= 1). */
kvc_status kvc_param_put_text(char *buf, size_t cap, const char *text, size_t len);
/* A U32 or F32 field as the text kvc_param_set_number reads back to it (buf: cap >= 1). */
kvc_status kvc_param_get_number(const kvc_stream_config *c, const kvc_method_param *p, char *buf, size_t cap);

/* BalanceKV's parameters, shared by its streaming and prefill forms. */
#define KVC_BALANCEKV_N_PARAMS 10
/* the prefill form takes the first nine (it is always self-normalised) */
#define KVC_BKV_PREFILL_N_PARAMS 9
extern const kvc_method_param kvc_balancekv_param_table[KVC_BALANCEKV_N_PARAMS];

/* BalanceKV's printing, shared by its streaming and prefill forms. */
void kvc_balancekv_describe(const kvc_stream_config *c, const kvc_stream_plan *p, kvc_text *out);
void kvc_balancekv_describe_stats(const kvc_stream_stats *s, kvc_text *out);

/* BalanceKV's parameter rules, shared by its streaming and prefill forms. */
const char *kvc_balancekv_fields(const kvc_stream_config *c);

/*@ // the fields of a plan the layout reads, in the ranges the planner allows
    predicate kvc_plan_dims_ok(kvc_stream_plan *p) =
      \valid_read(p) && 1 <= p->d <= 256 && 1 <= p->dv <= 256 &&
      p->n_sink <= 16777216 && p->n_window <= 16777216 && p->n_protect <= 16777216;
    logic integer kvc_stream_rows_l(kvc_stream_plan *p, integer n, integer dim) =
      n * kvc_row_bytes_l(p->dtype, dim);
*/

/* kvc_plan_dims_ok checked at run time (the plans whose search is trusted
 * check their ranges with it before any layout reads them). */
/*@ requires \valid_read(p);
    assigns \nothing;
    ensures \result != 0 ==> kvc_plan_dims_ok(p);
*/
static inline int kvc_plan_dims_in_range(const kvc_stream_plan *p)
{
    return 1 <= p->d && p->d <= 256 && 1 <= p->dv && p->dv <= 256 && p->n_sink <= KVC_MAX_BUDGET &&
           p->n_window <= KVC_MAX_BUDGET && p->n_protect <= KVC_MAX_BUDGET;
}

/* The bound kvc_stream_layout_make assumes of the method's region, which
 * plan_build checks of every method's arena and metadata bytes. */
#define KVC_METHOD_BYTES_MAX   4503599627370496ull /* 2^52 */
#define KVC_METADATA_BYTES_MAX 4503599627370496ull

/*@ // what a method's plan function may assume and must give (verify wp_sizes):
    // its worst-case elements never exceed the tokens the budget left it
    predicate kvc_method_plan_pre(kvc_stream_config *c, kvc_stream_plan *p) =
      \valid_read(c) && \valid(p) && \separated(c, p) && 1 <= c->d <= 256 && 1 <= c->dv <= 256 &&
      p->d == c->d && p->dv == c->dv && p->method_tokens <= 16777216 && p->n_window <= 16777216;
    predicate kvc_method_plan_post(kvc_stream_config *c, kvc_stream_plan *p, integer worst) =
      0 <= worst <= p->method_tokens * (c->d + c->dv);
    // a method's arena and metadata bytes stay below 2^52, the bound
    // kvc_stream_layout_make assumes of the method's region (plan.h)
    predicate kvc_method_bytes_ok(integer bytes) = 0 <= bytes <= 4503599627370496;
    predicate kvc_metadata_bytes_ok(integer bytes) = 0 <= bytes <= 4503599627370496;
*/

/* Rows [first, first + n) of K and V as one segment in both sets, all of weight `scale`. */
/*@ requires \valid(seg) && \valid_read(K) && \valid_read(V) && \separated(seg, K, V);
    assigns *seg;
    ensures \result == 1 && seg->n == n && seg->scale == scale && seg->role == KVC_SET_BOTH && seg->weights == \null;
*/
static inline size_t kvc_segment_rows_uniform(kvc_segment *seg, const kvc_rows *K, const kvc_rows *V, size_t first,
                                              size_t n, double scale)
{
    kvc_segment_rows(seg, K, V, first);
    seg->weights = NULL;
    seg->scale = scale, seg->n = n, seg->role = KVC_SET_BOTH;
    return 1;
}

/* The table of a method, NULL for an unknown value. */
/*@ assigns \nothing;
    ensures \result == \null || \valid_read(\result);
*/
const kvc_method_ops *kvc_method_ops_of(kvc_method m);

/* ---- balancekv: the walk scratch in its arena (also Express's metadata count) ---- */
/*@ requires \valid_read(p) && p->d <= 256 && p->bkv.t <= 16777216;
    assigns \nothing;
    ensures \result == 8 * (p->d + 2 * p->bkv.t) + p->bkv.t;
*/
uint64_t kvc_balancekv_scratch_bytes(const kvc_stream_plan *p);

/* ---- the prefill methods' tail after the prompt (kvc_balancekv_params::tail_method
 * and kvc_express_params::tail_method: one rule, a knob each) ---- */
/** The choice values of the bkv-tail and express-tail parameters (balancekv.c). */
extern const uint32_t kvc_prefill_tail_values[2];
/** 1 when @p t is 0 (default), KVC_METHOD_EXACT or KVC_METHOD_UNIFORM. */
/*@ assigns \nothing;
    ensures \result != 0 <==> (t == 0 || t == KVC_METHOD_EXACT || t == KVC_METHOD_UNIFORM);
*/
static inline int kvc_prefill_tail_ok(uint32_t t) { return t == 0 || t == KVC_METHOD_EXACT || t == KVC_METHOD_UNIFORM; }
/** The tail a plan uses: a uniform reservoir unless exact was asked for (a decoder never stops). */
/*@ assigns \nothing;
    ensures \result == (t != 0 ? t : KVC_METHOD_UNIFORM);
*/
static inline uint32_t kvc_prefill_tail_resolved(uint32_t t) { return t ? t : KVC_METHOD_UNIFORM; }

/* ---- balancekv-prefill: tokens its tree may hold for a prompt of m method tokens ---- */
/*@ requires 2 <= t <= 16777216 && 1 <= T <= 16 && m <= 268435456;
    assigns \nothing;
    ensures \result <= m;
*/
uint64_t kvc_bkv_prefill_top_cap(uint64_t m, uint32_t t, uint32_t T);

/* ---- express: the halving scratch in its arena, and the worst cache of a known prompt ---- */
/*@ requires kvc_plan_dims_ok(p) && 2 <= p->xp.s <= 4194304 && 1 <= p->xp.c <= p->xp.s &&
             p->tail_capacity <= p->method_tokens <= 16777216;
    assigns \nothing;
    ensures \result <= 8 * (256 + 2 * 16777216) + 16777216;
*/
uint64_t kvc_express_scratch_bytes(const kvc_stream_plan *p);
uint64_t kvc_express_prefix_worst(uint64_t m, uint64_t s, uint64_t c);

#endif
