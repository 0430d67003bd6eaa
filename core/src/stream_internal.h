/* The stream's internals, shared by the files that implement it (private to
 * core/src; the cache manager's entries are stream_private.h):
 *   stream.c          the header, its checks, init, validate, the proved append;
 *   stream_protect.c  protected spans: the outlier test, kvc_stream_mark;
 *   stream_blocks.c   KIVI4 key blocks in the in-order regions;
 *   stream_attend.c   the read side: view, attend, batched attend, split-K;
 *   stream_hooks.c    the query-aware hooks: observe, observed attend, prefill queries;
 *   stream_prefill.c  a whole prompt in one call.
 * The ACSL below is what the proofs know of a stream (verify wp_stream,
 * wp_stream_append, wp_lemmas; docs/proofs.md); the contracts of the functions
 * one file calls in another are on their prototypes here. */
#ifndef KVC_STREAM_INTERNAL_H
#define KVC_STREAM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "kvc/kvc_attend.h"
#include "methods.h"
#include "plan.h"
#include "stream_private.h"
#include "shared/rows.h"
#include "internal/kvc_internal.h"

struct kvc_stream {
    uint32_t magic; /* KVC_MAGIC_STREAM, written last by init */
    uint32_t has_pending;
    uint32_t sink_used;
    uint32_t win_head, win_count;
    uint32_t prot_count; /* tokens in the protected spans */
    uint64_t n_seen;     /* tokens appended */
    uint64_t method_in;  /* tokens handed to the method (or dropped by sink-window) */
    uint64_t peak_elements;
    uint64_t last_flag;       /* 1 + id of the latest outlier that left the window; 0 = none */
    double flag_mu, flag_var; /* moving mean and variance of the keys' cosine to their window */
    uint64_t digest;          /* of cfg, plan and lay, which never change after init */
    kvc_stream_config cfg;
    kvc_stream_plan plan;
    kvc_stream_layout lay;
};
/* Same bytes on 32- and 64-bit targets: a snapshot moves between a device and a host. */
_Static_assert(sizeof(kvc_method) == 4 && sizeof(kvc_dtype) == 4, "enums stored in arenas are 4 bytes on every ABI");
#if !defined(__FRAMAC__) /* Frama-C does not parse _Alignof; the compilers check it */
_Static_assert(sizeof(kvc_method_params) == 4 * KVC_METHOD_PARAMS_WORDS && _Alignof(kvc_method_params) == 4,
               "the methods' parameters have the stable tier's opaque layout");
_Static_assert(sizeof(kvc_method_counters) == 8 * KVC_METHOD_COUNTERS_WORDS &&
                   _Alignof(kvc_method_counters) == _Alignof(uint64_t),
               "the methods' counters have the stable tier's opaque layout");
#endif
_Static_assert(sizeof(kvc_stream_config) == 152, "kvc_stream_config must be the same on every ABI");
_Static_assert(sizeof(kvc_stream_plan) == 176, "kvc_stream_plan must be the same on every ABI");
_Static_assert(sizeof(struct kvc_stream) == KVC_SIZE_STREAM_HEADER, "the stream header must be the same on every ABI");

/* ---- what the proofs know of a stream (verify wp_stream, docs/proofs.md) ----
 * stream_header_ok: the plan's dimensions in range and the stored layout the
 * proved one (kvc_stream_layout_make), which stream_check recomputes;
 * stream_counters_ok: the wrapper's counters against each other and the plan,
 * the exact regions' worst case inside the plan's (the budget theorem's
 * wrapper part). stream_check establishes both; an append preserves them. */
/*@ // a storage type stored row by row (KIVI's types have no rows yet)
    predicate kvc_stream_dtype_ok(integer t) = kvc_dtype_rows_l(t);
    logic integer stream_exact_capacity(kvc_stream_plan *p) = p->n_sink + p->n_window + p->n_protect + 1;
    logic integer stream_exact_tokens(struct kvc_stream *st) =
      st->sink_used + st->win_count + st->has_pending + st->prot_count;
    // the plan's fields the append path reads, in range
    predicate stream_plan_ok(struct kvc_stream *st) =
      \valid_read(st) && kvc_plan_dims_ok(&st->plan) && kvc_stream_dtype_ok(st->plan.dtype) &&
      st->plan.protect_radius <= 4096 &&
      stream_exact_capacity(&st->plan) * (st->plan.d + st->plan.dv) <= st->plan.worst_elements;
    predicate stream_header_ok(struct kvc_stream *st) =
      stream_plan_ok(st) &&
      kvc_stream_layout_ok(&st->lay, &st->plan, st->plan.arena_bytes) && st->plan.arena_bytes <= PTRDIFF_MAX &&
      st->lay.method_bytes <= 4503599627370496;
    // the bounds every state between two appends keeps (the token count aside)
    predicate stream_shape_ok(struct kvc_stream *st) =
      st->sink_used <= st->plan.n_sink && st->win_count <= st->plan.n_window &&
      (st->plan.n_window == 0 ? st->win_head == 0 : st->win_head < st->plan.n_window) &&
      (st->sink_used < st->plan.n_sink ==> st->win_count == 0) &&
      ((st->method_in > 0 || st->prot_count > 0) ==>
         st->sink_used == st->plan.n_sink && st->win_count == st->plan.n_window) &&
      st->prot_count <= st->plan.n_protect && st->peak_elements <= st->plan.worst_elements;
    predicate stream_counters_ok(struct kvc_stream *st) =
      stream_shape_ok(st) && st->has_pending <= 1 && (st->has_pending == 1 <==> st->n_seen > 0) &&
      st->last_flag <= st->n_seen && st->n_seen <= 4294967295 &&
      st->n_seen == stream_exact_tokens(st) + st->method_in;
    predicate stream_ok(struct kvc_stream *st) = stream_header_ok(st) && stream_counters_ok(st);
    // stream_header_ok reads these fields only: an append, which writes the
    // counters and the regions, keeps it (the lemma carries the predicate
    // across the writes in a small context; verify wp_lemmas)
    predicate stream_header_same{L1, L2}(struct kvc_stream *st) =
      \at(st->plan.d, L1) == \at(st->plan.d, L2) &&
      \at(st->plan.dv, L1) == \at(st->plan.dv, L2) &&
      \at(st->plan.n_sink, L1) == \at(st->plan.n_sink, L2) &&
      \at(st->plan.n_window, L1) == \at(st->plan.n_window, L2) &&
      \at(st->plan.n_protect, L1) == \at(st->plan.n_protect, L2) &&
      \at(st->plan.protect_radius, L1) == \at(st->plan.protect_radius, L2) &&
      \at(st->plan.dtype, L1) == \at(st->plan.dtype, L2) &&
      \at(st->plan.worst_elements, L1) == \at(st->plan.worst_elements, L2) &&
      \at(st->plan.arena_bytes, L1) == \at(st->plan.arena_bytes, L2) &&
      \at(st->lay.off_sink_k, L1) == \at(st->lay.off_sink_k, L2) &&
      \at(st->lay.off_sink_v, L1) == \at(st->lay.off_sink_v, L2) &&
      \at(st->lay.off_win_k, L1) == \at(st->lay.off_win_k, L2) &&
      \at(st->lay.off_win_v, L1) == \at(st->lay.off_win_v, L2) &&
      \at(st->lay.off_pend_k, L1) == \at(st->lay.off_pend_k, L2) &&
      \at(st->lay.off_pend_v, L1) == \at(st->lay.off_pend_v, L2) &&
      \at(st->lay.off_method, L1) == \at(st->lay.off_method, L2) &&
      \at(st->lay.off_prot_k, L1) == \at(st->lay.off_prot_k, L2) &&
      \at(st->lay.off_prot_v, L1) == \at(st->lay.off_prot_v, L2) &&
      \at(st->lay.off_wflag, L1) == \at(st->lay.off_wflag, L2) &&
      \at(st->lay.method_bytes, L1) == \at(st->lay.method_bytes, L2);
    predicate stream_counters_same{L1, L2}(struct kvc_stream *st) =
      \at(st->sink_used, L1) == \at(st->sink_used, L2) && \at(st->win_count, L1) == \at(st->win_count, L2) &&
      \at(st->win_head, L1) == \at(st->win_head, L2) && \at(st->prot_count, L1) == \at(st->prot_count, L2) &&
      \at(st->method_in, L1) == \at(st->method_in, L2) &&
      \at(st->peak_elements, L1) == \at(st->peak_elements, L2) &&
      \at(st->has_pending, L1) == \at(st->has_pending, L2) && \at(st->n_seen, L1) == \at(st->n_seen, L2) &&
      \at(st->last_flag, L1) == \at(st->last_flag, L2);
*/
/* The frame lemmas, for the jobs that need them only (wp_stream_append, and
 * wp_lemmas, which proves them): WP adds every lemma of a file to every goal
 * of it, and in wp_sizes' context they cost the layout's postcondition its
 * proof (measured: kvc_stream_layout_make_ensures_2 timed out). */
#ifdef KVC_WP_FRAME_LEMMAS
/*@
    lemma stream_header_ok_frame{L1, L2}: \forall struct kvc_stream *st;
      stream_header_ok{L1}(st) && stream_header_same{L1, L2}(st) && \valid_read{L2}(st) ==> stream_header_ok{L2}(st);
    lemma stream_ok_frame{L1, L2}: \forall struct kvc_stream *st;
      stream_ok{L1}(st) && stream_header_same{L1, L2}(st) && stream_counters_same{L1, L2}(st) &&
      \valid_read{L2}(st) && stream_header_ok{L2}(st) ==> stream_ok{L2}(st);
*/
#endif

/* The wrapper's regions, typed: what append and commit read and write. Only
 * the accessor stream_regions_of makes them (from the proved layout). */
typedef struct stream_regions {
    kvc_rows sk, sv, wk, wv, rk, rv; /* sinks, window ring, protected rows */
    float *pk, *pv;                  /* the pending token (f32: d, dv) */
    float *stage;                    /* quantised types: the staging row (d + dv floats) */
    uint8_t *wflag;                  /* protected spans: an outlier flag per window slot */
    unsigned char *method;           /* the method's sub-arena (lay.method_bytes) */
    unsigned char *open;             /* KIVI4 plans: the open block, the last bytes of the method's sub-arena
                                        (kvc_stream_open_block_bytes); NULL otherwise */
    kvc_prompt_call *call;           /* inside kvc_stream_prefill: the call (the method's update sees it) */
} stream_regions;

/*@ // the arena behind a handle, as bytes and as floats: what the accessor
    // gives (the casts themselves are outside WP's typed memory model)
    axiomatic KvcStreamArena {
      logic unsigned char *stream_bytes_l(struct kvc_stream *st);
      logic float *stream_floats_l(struct kvc_stream *st);
    }
    predicate stream_rows_at(struct kvc_stream *st, kvc_rows *r, integer off, integer dim) =
      r->base == stream_bytes_l(st) + off && r->dim == dim && r->dtype == st->plan.dtype &&
      r->stride == kvc_row_bytes_l(st->plan.dtype, dim);
    predicate stream_regions_at(struct kvc_stream *st, stream_regions *R) =
      \valid(stream_bytes_l(st) + (0 .. st->plan.arena_bytes - 1)) &&
      \valid(stream_floats_l(st) + (0 .. st->plan.arena_bytes / 4 - 1)) &&
      stream_rows_at(st, &R->sk, st->lay.off_sink_k, st->plan.d) &&
      stream_rows_at(st, &R->sv, st->lay.off_sink_v, st->plan.dv) &&
      stream_rows_at(st, &R->wk, st->lay.off_win_k, st->plan.d) &&
      stream_rows_at(st, &R->wv, st->lay.off_win_v, st->plan.dv) &&
      stream_rows_at(st, &R->rk, st->lay.off_prot_k, st->plan.d) &&
      stream_rows_at(st, &R->rv, st->lay.off_prot_v, st->plan.dv) &&
      R->pk == stream_floats_l(st) + st->lay.off_pend_k / 4 &&
      R->pv == stream_floats_l(st) + st->lay.off_pend_v / 4 &&
      R->stage == R->pv + st->plan.dv &&
      R->wflag == stream_bytes_l(st) + st->lay.off_wflag &&
      R->method == stream_bytes_l(st) + st->lay.off_method;
    // what the code uses: each region valid, the byte regions pairwise apart
    predicate stream_regions_ok(struct kvc_stream *st, stream_regions *R) =
      \valid_read(R) && \separated(R, st) &&
      R->sk.dim == st->plan.d && R->sv.dim == st->plan.dv && R->wk.dim == st->plan.d && R->wv.dim == st->plan.dv &&
      R->rk.dim == st->plan.d && R->rv.dim == st->plan.dv &&
      R->sk.dtype == st->plan.dtype && R->sv.dtype == st->plan.dtype && R->wk.dtype == st->plan.dtype &&
      R->wv.dtype == st->plan.dtype && R->rk.dtype == st->plan.dtype && R->rv.dtype == st->plan.dtype &&
      R->wk.stride == R->rk.stride && R->wv.stride == R->rv.stride && R->stage == R->pv + st->plan.dv &&
      kvc_rows_ok(&R->sk, st->plan.n_sink) && kvc_rows_ok(&R->sv, st->plan.n_sink) &&
      kvc_rows_ok(&R->wk, st->plan.n_window) && kvc_rows_ok(&R->wv, st->plan.n_window) &&
      kvc_rows_ok(&R->rk, st->plan.n_protect) && kvc_rows_ok(&R->rv, st->plan.n_protect) &&
      \valid(R->pk + (0 .. st->plan.d - 1)) && \valid(R->pv + (0 .. st->plan.dv - 1)) &&
      (st->plan.dtype != 0 ==> \valid(R->stage + (0 .. st->plan.d + st->plan.dv - 1))) &&
      (st->plan.n_protect > 0 ==> \valid(R->wflag + (0 .. st->plan.n_window - 1))) &&
      \valid(R->method + (0 .. st->lay.method_bytes - 1)) &&
      // only what the append path needs apart: a row is copied window ->
      // protected, and the pending token is stored into sinks and window
      \separated(R->rk.base + (0 .. st->plan.n_protect * R->rk.stride - 1),
                 R->wk.base + (0 .. st->plan.n_window * R->wk.stride - 1)) &&
      \separated(R->rv.base + (0 .. st->plan.n_protect * R->rv.stride - 1),
                 R->wv.base + (0 .. st->plan.n_window * R->wv.stride - 1)) &&
      \separated(R->pk + (0 .. st->plan.d - 1), R->sk.base + (0 .. st->plan.n_sink * R->sk.stride - 1),
                 R->wk.base + (0 .. st->plan.n_window * R->wk.stride - 1)) &&
      \separated(R->pv + (0 .. st->plan.dv - 1), R->sv.base + (0 .. st->plan.n_sink * R->sv.stride - 1),
                 R->wv.base + (0 .. st->plan.n_window * R->wv.stride - 1));
*/

/* The first view segments that hold the most recent tokens in token order
 * (sinks in blocks and in rows, the window ring in two pieces, the open
 * block, the current token): a batched attend's causal block. */
#define KVC_STREAM_CAUSAL_SEGMENTS 6u
_Static_assert(KVC_STREAM_CAUSAL_SEGMENTS + 1u == KVC_STREAM_EXACT_SEGMENTS,
               "the protected spans follow the causal block");

/* The method's sub-arena. */
static inline void *kvc_stream_method_of(kvc_stream *st) { return KVC_AT(st, st->lay.off_method, void); }
static inline const void *kvc_stream_method_of_c(const kvc_stream *st)
{
    return KVC_AT_C(st, st->lay.off_method, void);
}

/* Entries of view segments [from, n_seg). */
static inline size_t kvc_view_entries_from(const kvc_view *v, size_t from)
{
    size_t n = 0;
    for (size_t i = from; i < v->n_seg; i++) n += v->seg[i].n;
    return n;
}

/* ---- protected spans (stream_protect.c) ---- */
/* sum += the key of window slot `slot`, the i-th oldest of the window (KIVI4
 * plans read it from its closed block or from the open block: stream_blocks.c). */
/*@ requires stream_plan_ok(st) && stream_shape_ok(st) && st->plan.n_window >= 1;
    requires stream_regions_ok(st, R) && \valid_read(R);
    requires i < st->win_count && slot < st->plan.n_window;
    requires \valid(sum + (0 .. st->plan.d - 1));
    assigns sum[0 .. st->plan.d - 1];
*/
void kvc_stream_window_key_add(const kvc_stream *st, const stream_regions *R, uint32_t i, uint32_t slot, double *sum);

/* Is the key k (entering the window) an outlier against the window before it? */
/*@ requires stream_plan_ok(st) && stream_shape_ok(st) && \valid(st) && st->plan.n_window >= 1;
    requires stream_regions_ok(st, R) && \valid_read(R);
    requires \valid_read(k + (0 .. st->plan.d - 1));
    assigns st->flag_mu, st->flag_var;
    ensures \result <= 1;
*/
uint8_t kvc_stream_outlier_flag(kvc_stream *st, const stream_regions *R, const float *k);

/* Is an outlier within protect_radius positions of the leaving token (id `token`, in `slot`)? */
/*@ requires stream_plan_ok(st) && stream_shape_ok(st) && st->plan.n_window >= 1 && st->plan.n_protect >= 1;
    requires stream_regions_ok(st, R) && \valid_read(R);
    requires slot < st->plan.n_window;
    assigns \nothing;
*/
int kvc_stream_leaves_protected(const kvc_stream *st, const stream_regions *R, uint32_t slot, uint64_t token);

/* Set the window's i-th oldest token's protected-span-centre flag to `centre`
 * (0 or 1): the caller's verdict (kvc_stream_mark) replaces the outlier
 * test's, and the token leaves the window as that flag says. */
/*@ requires 1 <= st->plan.n_window <= 16777216 && \valid_read(st);
    requires st->win_count <= st->plan.n_window && st->win_head < st->plan.n_window;
    requires i < st->win_count && centre <= 1;
    requires \valid(wflag + (0 .. st->plan.n_window - 1)) && \separated(wflag + (0 .. st->plan.n_window - 1), st);
    assigns wflag[0 .. st->plan.n_window - 1];
    ensures wflag[(st->win_head + i) % st->plan.n_window] == centre;
*/
void kvc_stream_window_mark(const kvc_stream *st, uint8_t *wflag, uint32_t i, uint8_t centre);

/* ---- KIVI4 key blocks (stream_blocks.c) ---- */
/* KIVI4 blocks (stream_blocks.c): slot i of an n-slot in-order region gets the key (is_key) or the value x. */
/*@ requires kvc_rows_ok(r, n) && i < n;
    requires \valid_read(x + (0 .. r->dim - 1));
    requires \separated(r->base + (0 .. n * r->stride - 1), x + (0 .. r->dim - 1));
    requires \valid_read(st) && \valid_read(R) && \valid(R->method + (0 .. st->lay.method_bytes - 1));
    assigns r->base[0 .. n * r->stride - 1], R->method[0 .. st->lay.method_bytes - 1];
*/
void kvc_stream_blocks_store(const kvc_stream *st, const stream_regions *R, const kvc_rows *r, uint32_t i, uint32_t n,
                             const float *x, int is_key);

/* The key of window slot `slot` (closed) into x. */
/*@ requires stream_plan_ok(st) && stream_regions_ok(st, R) && \valid_read(R);
    requires slot < st->plan.n_window && \valid(x + (0 .. st->plan.d - 1));
    assigns x[0 .. st->plan.d - 1];
*/
void kvc_stream_window_key_load(const kvc_stream *st, const stream_regions *R, uint32_t slot, float *x);

/* The key of window slot `slot` (closed) into protected row `at`. */
/*@ requires stream_plan_ok(st) && stream_regions_ok(st, R) && \valid_read(R);
    requires at < st->plan.n_protect && slot < st->plan.n_window;
    assigns R->rk.base[0 .. st->plan.n_protect * R->rk.stride - 1],
            R->stage[0 .. (st->plan.dtype == 0 ? 0 : st->plan.d + st->plan.dv) - 1];
*/
void kvc_stream_window_key_protect(const kvc_stream *st, const stream_regions *R, uint32_t at, uint32_t slot);

/* Slots [0, blocked) of an n-slot region hold KIVI4 blocks (0 without key blocks). */
uint32_t kvc_stream_blocked_slots(const kvc_stream *st, uint32_t n);

/* Tokens in the open block: the newest of the sinks (while they fill) or of the window. */
uint32_t kvc_stream_open_count(const kvc_stream *st);

/* ---- the read side (stream_attend.c) ---- */
/* The view of a checked stream: the sinks in blocks and in rows, the window
 * ring's closed tokens in two pieces, the open block, the current token
 * (those six in token order: the causal block), the protected spans, then
 * the method's segments. */
void kvc_stream_view_fill(const kvc_stream *st, kvc_view *view);

/* ---- a whole prompt (stream_prefill.c) ---- */
/* One append inside a kvc_stream_prefill call: the append's own checks and
 * commit, with the call visible to the method's update (stream.c). */
kvc_status kvc_stream_append_in_call(kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v,
                                     kvc_prompt_call *call);

#endif
