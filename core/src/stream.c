/* The exact-region wrapper: sinks, a FIFO window, the current ("pending")
 * token, and the compression method behind them. State machine per append:
 *   pending token (if any) -> sink (while sinks are not full)
 *                          -> window (while the window is not full)
 *                          -> else the window's oldest token goes to the
 *                             method (or is dropped by sink-window) and the
 *                             pending token takes its slot;
 *   the new token becomes pending.
 * Every check happens before the first write, so a rejected append leaves the
 * arena byte-identical (the method's RNG included).
 *
 * Storage: sinks and window hold rows of the stream's storage type (stored by
 * the table's `store` kernel); the pending token stays f32 (it is the
 * current token, attended at full precision), and with a quantised type a
 * staging row beside it receives the window's oldest token, dequantised,
 * on its way to the method.
 *
 * Proof structure (verify wp_stream, docs/proofs.md): stream_check proves
 * stream_ok; an append's checks (append_admit) write nothing; the typed core
 * of the append (commit_pending and its helpers) works on the regions one
 * trusted accessor (stream_regions_of) makes from the checked layout; the
 * method table is reached through trusted one-line dispatches. */
#include <math.h>
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
_Static_assert(sizeof(kvc_stream_config) == 136, "kvc_stream_config must be the same on every ABI");
_Static_assert(sizeof(kvc_stream_plan) == 176, "kvc_stream_plan must be the same on every ABI");
_Static_assert(sizeof(struct kvc_stream) == KVC_SIZE_STREAM_HEADER, "the stream header must be the same on every ABI");

size_t kvc_stream_header_bytes(void) { return sizeof(struct kvc_stream); }

/* ---- what the proofs know of a stream (verify wp_stream, docs/proofs.md) ----
 * stream_header_ok: the plan's dimensions in range and the stored layout the
 * proved one (kvc_stream_layout_make), which stream_check recomputes;
 * stream_counters_ok: the wrapper's counters against each other and the plan,
 * the exact regions' worst case inside the plan's (the budget theorem's
 * wrapper part). stream_check establishes both; an append preserves them. */
/*@ // a storage type stored row by row (KIVI's types have no rows yet)
    predicate kvc_stream_dtype_ok(integer t) = t == 0 || t == 1 || t == 2 || t == 3 || t == 6;
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

/* The accessor of the wrapper's regions (the trusted base, docs/proofs.md):
 * byte offsets of the validated layout turned into typed pointers.
 * trusted-by: stream_check compares the stored layout with the one
 * kvc_stream_layout_make gives (wp_sizes proves it inside arena_bytes on
 * LP64 and ILP32), and the handle promises arena_bytes bytes behind it
 * (kvc_stream_init, kvc_stream_validate); the corrupted-arena tests
 * (tests/unit/test_trust.c) and the API fuzzer under ASan. */
/*@ requires stream_header_ok(st) && \valid(R) && \separated(R, st);
    assigns *R;
    ensures stream_regions_at(st, R) && stream_regions_ok(st, R);
    ensures R->sk.rk == R->sv.rk == R->wk.rk == R->wv.rk == R->rk.rk == R->rv.rk;
*/
static void stream_regions_of(kvc_stream *st, const kvc_kernels *kern, stream_regions *R)
{
    const kvc_stream_plan *p = &st->plan;
    const kvc_stream_layout *l = &st->lay;
    R->sk = kvc_rows_at(st, l->off_sink_k, p->d, p->dtype, kern);
    R->sv = kvc_rows_at(st, l->off_sink_v, p->dv, p->dtype, kern);
    R->wk = kvc_rows_at(st, l->off_win_k, p->d, p->dtype, kern);
    R->wv = kvc_rows_at(st, l->off_win_v, p->dv, p->dtype, kern);
    R->rk = kvc_rows_at(st, l->off_prot_k, p->d, p->dtype, kern);
    R->rv = kvc_rows_at(st, l->off_prot_v, p->dv, p->dtype, kern);
    R->pk = KVC_AT(st, l->off_pend_k, float);
    R->pv = KVC_AT(st, l->off_pend_v, float);
    R->stage = R->pv + p->dv;
    R->wflag = KVC_AT(st, l->off_wflag, uint8_t);
    R->method = KVC_AT(st, l->off_method, unsigned char);
    R->open = p->key_blocks ? R->method + (l->method_bytes - kvc_stream_open_block_bytes(p)) : NULL;
    R->call = NULL;
}

/* The first view segments that hold the most recent tokens in token order
 * (sinks in blocks and in rows, the window ring in two pieces, the open
 * block, the current token): a batched attend's causal block. */
#define KVC_STREAM_CAUSAL_SEGMENTS 6u
_Static_assert(KVC_STREAM_CAUSAL_SEGMENTS + 1u == KVC_STREAM_EXACT_SEGMENTS,
               "the protected spans follow the causal block");

/* The digest of the fixed header (cfg, plan, lay).
 * trusted-by: assigns nothing (it reads the header as bytes, a cast outside
 * WP's typed model); tests/unit/test_trust.c flips header bits. */
/*@ requires \valid_read(st);
    assigns \nothing;
*/
static uint64_t header_digest(const kvc_stream *st)
{
    uint64_t h = kvc_digest(KVC_DIGEST_SEED, &st->cfg, sizeof st->cfg);
    h = kvc_digest(h, &st->plan, sizeof st->plan);
    return kvc_digest(h, &st->lay, sizeof st->lay);
}

/* trusted-by: assigns nothing (the pointer-to-integer cast of kvc_aligned,
 * outside WP's model); tests/unit/test_trust.c passes misaligned arenas. */
/*@ assigns \nothing; */
static int stream_aligned(const kvc_stream *st) { return kvc_aligned(st); }

/* The method's own check, through the method table.
 * trusted-by: assigns nothing, a dispatch through the method table (outside
 * WP); exact's and uniform's checks are proved (wp_exact, wp_uniform). */
/*@ requires \valid_read(st);
    assigns \nothing;
*/
static int method_check(const kvc_stream *st)
{
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    return o != NULL && o->check(KVC_AT_C(st, st->lay.off_method, void), &st->plan, st->method_in);
}

/* A header without this format's magic: another format version of ours
 * (corrupt for this build) or never initialised. */
/*@ assigns \nothing;
    ensures \result == KVC_E_CORRUPT || \result == KVC_E_STATE;
*/
static kvc_status magic_status(uint32_t magic)
{
    return KVC_MAGIC_FAMILY(magic) == KVC_MAGIC_FAMILY(KVC_MAGIC_STREAM) ? KVC_E_CORRUPT : KVC_E_STATE;
}

/*@ predicate layout_same(kvc_stream_layout *a, kvc_stream_layout *b) =
      a->off_sink_k == b->off_sink_k && a->off_sink_v == b->off_sink_v &&
      a->off_win_k == b->off_win_k && a->off_win_v == b->off_win_v && a->off_pend_k == b->off_pend_k &&
      a->off_pend_v == b->off_pend_v && a->off_method == b->off_method && a->off_prot_k == b->off_prot_k &&
      a->off_prot_v == b->off_prot_v && a->off_wflag == b->off_wflag && a->method_bytes == b->method_bytes;
*/

/* Everything an append may write besides the header's counters: the
 * wrapper's regions and the method's sub-arena. */
/* clang-format off */
#define STREAM_REGION_BYTES(st, R)                                                                                     \
    R->sk.base[0 .. st->plan.n_sink * R->sk.stride - 1], R->sv.base[0 .. st->plan.n_sink * R->sv.stride - 1],          \
        R->wk.base[0 .. st->plan.n_window * R->wk.stride - 1], R->wv.base[0 .. st->plan.n_window * R->wv.stride - 1],  \
        R->rk.base[0 .. st->plan.n_protect * R->rk.stride - 1], R->rv.base[0 .. st->plan.n_protect * R->rv.stride - 1], \
        R->wflag[0 .. st->plan.n_window - 1], R->method[0 .. st->lay.method_bytes - 1], R->pk[0 .. st->plan.d - 1],    \
        R->pv[0 .. st->plan.dv - 1], R->stage[0 .. (st->plan.dtype == 0 ? 0 : st->plan.d + st->plan.dv) - 1]
/* clang-format on */

/*@ ghost
  // the proved layout's facts carry over to an equal copy (proved once, in a
  // small context: in header_ok's, the provers time out on it)
  /@ requires \valid_read(a) && \valid_read(b) && layout_same(a, b) && kvc_stream_layout_ok(a, p, bytes);
     assigns \nothing;
     ensures kvc_stream_layout_ok(b, p, bytes);
  @/
  static void layout_ok_copy(kvc_stream_layout *a, kvc_stream_layout *b, kvc_stream_plan *p, uint64_t bytes) {}
*/

/*@ requires \valid_read(a) && \valid_read(b);
    assigns \nothing;
    ensures \result != 0 ==> layout_same(a, b);
*/
static int layout_equal(const kvc_stream_layout *a, const kvc_stream_layout *b)
{
    return a->off_sink_k == b->off_sink_k && a->off_sink_v == b->off_sink_v && a->off_win_k == b->off_win_k &&
           a->off_win_v == b->off_win_v && a->off_pend_k == b->off_pend_k && a->off_pend_v == b->off_pend_v &&
           a->off_method == b->off_method && a->off_prot_k == b->off_prot_k && a->off_prot_v == b->off_prot_v &&
           a->off_wflag == b->off_wflag && a->method_bytes == b->method_bytes;
}

/* The fixed header: the plan's ranges, and the stored layout the one the
 * plan gives (wp_sizes proves that one inside arena_bytes). The digest
 * already makes a corrupted plan unlikely; these checks make it impossible
 * for the accessor's offsets. */
/*@ requires \valid_read(st);
    assigns \nothing;
    ensures \result != 0 ==> stream_header_ok(st);
*/
static int header_ok(const kvc_stream *st)
{
    const kvc_stream_plan *p = &st->plan;
    if (p->d < 1 || p->d > KVC_MAX_HEAD_DIM || p->dv < 1 || p->dv > KVC_MAX_HEAD_DIM || p->n_sink > KVC_MAX_BUDGET ||
        p->n_window > KVC_MAX_BUDGET || p->n_protect > KVC_MAX_BUDGET || p->protect_radius > 4096u ||
        p->dtype >= KVC_DTYPE_COUNT || kvc_row_bytes(p->dtype, 1) == 0)
        return 0;
    /* KIVI4 plans: int4 rows, a window of whole blocks */
    if (p->key_blocks > 1u || p->reserved_ != 0u ||
        (p->key_blocks && (p->dtype != (uint32_t)KVC_DTYPE_I4 || p->n_window % KVC_KIVI_BLOCK != 0u)))
        return 0;
    //@ assert kvc_stream_dtype_ok(p->dtype);
    const uint64_t exact_capacity = (uint64_t)p->n_sink + p->n_window + p->n_protect + 1u;
    const uint64_t tok = (uint64_t)p->d + p->dv;
    //@ ghost kvc_mul_le(exact_capacity, 3 * 16777216 + 1, tok, 512);
    if (exact_capacity * tok > p->worst_elements || p->arena_bytes > (uint64_t)PTRDIFF_MAX) return 0;
    //@ assert exact_capacity * tok <= p->worst_elements;
    //@ assert stream_exact_capacity(&st->plan) * (st->plan.d + st->plan.dv) <= st->plan.worst_elements;
    const uint64_t method_bytes = kvc_stream_method_bytes(p);
    if (method_bytes > KVC_METHOD_BYTES_MAX) return 0;
    kvc_stream_layout lay;
    if (kvc_stream_layout_make(p, method_bytes, &lay) != p->arena_bytes || !layout_equal(&lay, &st->lay)) return 0;
    //@ ghost layout_ok_copy(&lay, (kvc_stream_layout *)&st->lay, (kvc_stream_plan *)p, p->arena_bytes);
    //@ assert st->lay.method_bytes <= 4503599627370496;
    //@ assert kvc_plan_dims_ok(&st->plan);
    return 1;
}

/* The wrapper's counters: sinks fill first, then the window, then tokens
 * reach the method; every appended token is held exactly once. */
/*@ requires stream_header_ok(st);
    assigns \nothing;
    ensures \result != 0 ==> stream_counters_ok(st);
*/
static int counters_ok(const kvc_stream *st)
{
    const kvc_stream_plan *p = &st->plan;
    if (st->n_seen > UINT32_MAX || st->method_in > st->n_seen || st->has_pending > 1u ||
        st->has_pending != (st->n_seen > 0) || st->sink_used > p->n_sink || st->win_count > p->n_window ||
        st->prot_count > p->n_protect)
        return 0;
    if (p->n_window ? st->win_head >= p->n_window : st->win_head != 0) return 0;
    if (st->sink_used < p->n_sink && st->win_count != 0) return 0;
    if ((st->method_in > 0 || st->prot_count > 0) && (st->sink_used < p->n_sink || st->win_count < p->n_window))
        return 0;
    const uint64_t held = (uint64_t)st->sink_used + st->win_count + st->has_pending + st->prot_count;
    return st->last_flag <= st->n_seen && st->n_seen - st->method_in == held && st->peak_elements <= p->worst_elements;
}

/* The check every entry point runs before it reads anything else: the
 * handle, the fixed header (digest, and the layout recomputed from the plan),
 * the wrapper's counters against each other, and the method's own check.
 * Read-only: a refused call leaves the arena as it was. */
/*@ requires st == \null || \valid_read(st);
    assigns \nothing;
    ensures \result == KVC_OK ==> stream_ok(st);
*/
static kvc_status stream_check(const kvc_stream *st)
{
    if (st == NULL) return KVC_E_STATE;
    if (!stream_aligned(st)) return KVC_E_ARENA;
    if (st->magic != KVC_MAGIC_STREAM) return magic_status(st->magic);
    if (st->digest != header_digest(st)) return KVC_E_CORRUPT;
    if (!header_ok(st)) return KVC_E_CORRUPT;
    if (!counters_ok(st)) return KVC_E_CORRUPT;
    if (!method_check(st)) return KVC_E_CORRUPT;
    return KVC_OK;
}

static void *method_of(kvc_stream *st) { return KVC_AT(st, st->lay.off_method, void); }
static const void *method_of_c(const kvc_stream *st) { return KVC_AT_C(st, st->lay.off_method, void); }

/* *dst = *src for the configuration stored in a stream.
 * trusted-by: a struct assignment (the proofs read no field of the stored
 * configuration; the digest covers it: tests/unit/test_trust.c). */
/*@ requires \valid(dst) && \valid_read(src) && \separated(dst, src);
    assigns *dst;
*/
static void config_store(kvc_stream_config *dst, const kvc_stream_config *src) { *dst = *src; }

/* The method's bytes of a stream whose header init has written.
 * trusted-by: the region stream_regions_of hands out as R->method (the
 * layout's off_method .. off_method + method_bytes, inside arena_bytes by
 * wp_sizes' layout theorem, which init's caller allocated). */
/*@ requires \valid_read(st);
    assigns \nothing;
    ensures \valid(\result + (0 .. st->lay.method_bytes - 1));
    ensures \separated(\result + (0 .. st->lay.method_bytes - 1), st);
*/
static unsigned char *method_bytes_of(kvc_stream *st) { return KVC_AT(st, st->lay.off_method, unsigned char); }

/* The method's init through its table.
 * trusted-by: writes the method's bytes only (each method's init lays its
 * state out inside the bytes its arena_size asked for: exact's and uniform's
 * inits are proved, wp_exact and wp_uniform); the corrupted-arena tests and
 * the API fuzzer under ASan. */
/*@ requires \valid_read(p) && \valid(m + (0 .. bytes - 1));
    assigns m[0 .. bytes - 1];
*/
static void method_init(kvc_method method, unsigned char *m, uint64_t bytes, const kvc_stream_plan *p, uint64_t seed)
{
    const kvc_method_ops *o = kvc_method_ops_of(method);
    (void)bytes;
    if (o != NULL && o->init) o->init(m, p, seed);
}

/* Every counter of a new stream zero: nothing held, nothing seen. */
/*@ requires \valid(st);
    assigns st->has_pending, st->sink_used, st->win_head, st->win_count, st->prot_count, st->n_seen,
            st->method_in, st->peak_elements, st->last_flag, st->flag_mu, st->flag_var;
    ensures st->has_pending == 0 && st->sink_used == 0 && st->win_head == 0 && st->win_count == 0;
    ensures st->prot_count == 0 && st->n_seen == 0 && st->method_in == 0 && st->peak_elements == 0;
    ensures st->last_flag == 0;
*/
static void stream_counters_zero(kvc_stream *st)
{
    st->has_pending = 0, st->sink_used = 0, st->win_head = 0, st->win_count = 0, st->prot_count = 0;
    st->n_seen = 0, st->method_in = 0, st->peak_elements = 0, st->last_flag = 0;
    st->flag_mu = 0.0, st->flag_var = 0.0;
}

/* The rest of init once the header's plan and layout are stored: the
 * method's state, the configuration, the counters, the digest, the magic
 * last. stream_header_ok is carried across these writes by the frame lemma,
 * field by field (one large frame after these calls is beyond the provers,
 * measured). */
/*@ requires stream_header_ok(st) && \valid(st) && \valid_read(cfg) && \separated(st, cfg);
    ensures stream_ok(st) && st->magic == KVC_MAGIC_STREAM;
*/
static void stream_init_rest(kvc_stream *st, const kvc_stream_config *cfg, uint64_t seed)
{
    unsigned char *m = method_bytes_of(st);
    method_init(st->plan.method, m, st->lay.method_bytes, &st->plan, seed);
    config_store(&st->cfg, cfg);
    stream_counters_zero(st);
    st->digest = header_digest(st);
    st->magic = KVC_MAGIC_STREAM;
    //@ assert zeros: st->has_pending == 0 && st->sink_used == 0 && st->win_head == 0 && st->win_count == 0;
    //@ assert zeros2: st->prot_count == 0 && st->n_seen == 0 && st->method_in == 0 && st->peak_elements == 0;
    //@ assert zeros3: st->last_flag == 0;
    //@ assert st->plan.d == \at(st->plan.d, Pre) && st->plan.dv == \at(st->plan.dv, Pre);
    //@ assert st->plan.n_sink == \at(st->plan.n_sink, Pre) && st->plan.n_window == \at(st->plan.n_window, Pre);
    //@ assert st->plan.n_protect == \at(st->plan.n_protect, Pre) && st->plan.dtype == \at(st->plan.dtype, Pre);
    //@ assert st->plan.protect_radius == \at(st->plan.protect_radius, Pre);
    //@ assert st->plan.worst_elements == \at(st->plan.worst_elements, Pre);
    //@ assert st->plan.arena_bytes == \at(st->plan.arena_bytes, Pre);
    //@ assert st->lay.off_sink_k == \at(st->lay.off_sink_k, Pre) && st->lay.off_sink_v == \at(st->lay.off_sink_v, Pre);
    //@ assert st->lay.off_win_k == \at(st->lay.off_win_k, Pre) && st->lay.off_win_v == \at(st->lay.off_win_v, Pre);
    //@ assert st->lay.off_pend_k == \at(st->lay.off_pend_k, Pre) && st->lay.off_pend_v == \at(st->lay.off_pend_v, Pre);
    //@ assert st->lay.off_prot_k == \at(st->lay.off_prot_k, Pre) && st->lay.off_prot_v == \at(st->lay.off_prot_v, Pre);
    //@ assert st->lay.off_wflag == \at(st->lay.off_wflag, Pre) && st->lay.off_method == \at(st->lay.off_method, Pre);
    //@ assert st->lay.method_bytes == \at(st->lay.method_bytes, Pre);
    //@ assert same: stream_header_same{Pre, Here}(st);
    //@ assert header: stream_header_ok(st);
    //@ assert counters: stream_counters_ok(st);
}

/* kvc_stream_init on the typed header, once the plan is accepted and the
 * arena zeroed: the plan and the layout, then stream_init_rest. The layout
 * is recomputed from the plan as plan_build computed the plan's bytes; the
 * check that it gives the same bytes cannot fail (it makes the proof
 * independent of the method's arena_size returning the same answer twice). */
/*@ requires \valid(st) && \valid_read(cfg) && \valid_read(plan) && \separated(st, cfg, plan);
    requires kvc_plan_accepted(plan);
    ensures \result == KVC_OK ==> stream_ok(st) && st->magic == KVC_MAGIC_STREAM;
*/
static kvc_status stream_init_st(kvc_stream *st, const kvc_stream_config *cfg, const kvc_stream_plan *plan)
{
    const uint64_t method_bytes = kvc_stream_method_bytes(plan);
    const uint64_t seed = cfg->seed;
    if (method_bytes > KVC_METHOD_BYTES_MAX) return KVC_E_STATE;
    kvc_plan_copy(&st->plan, plan);
    //@ assert plan_stored: stream_plan_ok(st);
    if (kvc_stream_layout_make(&st->plan, method_bytes, &st->lay) != st->plan.arena_bytes) return KVC_E_STATE;
    //@ assert laid_out: stream_header_ok(st);
    stream_init_rest(st, cfg, seed);
    return KVC_OK;
}

kvc_status kvc_stream_init(void *arena, size_t arena_bytes, const kvc_stream_config *cfg, kvc_stream **out)
{
    kvc_stream_plan plan;
    if (cfg == NULL || out == NULL) return KVC_E_ARG;
    kvc_status rc = kvc_stream_plan_make(cfg, &plan);
    if (rc != KVC_OK) return rc;
    if (!kvc_arena_ok(arena, arena_bytes, plan.arena_bytes)) return KVC_E_ARENA;

    memset(arena, 0, (size_t)plan.arena_bytes);
    /* the one cast from the caller's bytes to the header (the accessor layer) */
    kvc_stream *st = (kvc_stream *)arena;
    rc = stream_init_st(st, cfg, &plan);
    if (rc != KVC_OK) return rc;
    *out = st;
    return KVC_OK;
}

/* Two plans equal byte for byte (a plan holds floats: compared as stored).
 * trusted-by: a memcmp of two whole plans, outside WP's typed model, whose
 * equality implies that of every integer field; tests/unit/test_trust.c
 * flips plan bits of a stored stream. */
/*@ requires \valid_read(a) && \valid_read(b);
    assigns \nothing;
    ensures \result != 0 ==> a->arena_bytes == b->arena_bytes;
*/
static int plan_bits_equal(const kvc_stream_plan *a, const kvc_stream_plan *b) { return memcmp(a, b, sizeof *a) == 0; }

/* kvc_stream_validate on the typed header: the magic, the plan recomputed
 * from the stored configuration bit for bit, the caller's bytes, then the
 * check every entry point runs. A stream it accepts satisfies stream_ok and
 * every region of its layout lies inside the caller's bytes. */
/*@ requires \valid_read(st);
    assigns \nothing;
    ensures \result == KVC_OK ==> stream_ok(st) && st->plan.arena_bytes <= arena_bytes;
*/
static kvc_status stream_validate_st(const kvc_stream *st, size_t arena_bytes)
{
    if (st->magic != KVC_MAGIC_STREAM) return magic_status(st->magic);
    kvc_stream_plan p;
    if (kvc_stream_plan_make(&st->cfg, &p) != KVC_OK || !plan_bits_equal(&p, &st->plan)) return KVC_E_CORRUPT;
    if (arena_bytes < p.arena_bytes) return KVC_E_ARENA;
    return stream_check(st);
}

kvc_status kvc_stream_validate(const void *arena, size_t arena_bytes)
{
    if (arena == NULL) return KVC_E_ARG;
    if (!kvc_aligned(arena) || arena_bytes < sizeof(struct kvc_stream)) return KVC_E_ARENA;
    /* the one cast from the caller's bytes to the header (the accessor layer) */
    return stream_validate_st((const kvc_stream *)arena, arena_bytes);
}

uint64_t kvc_stream_checksum(const kvc_stream *st)
{
    if (stream_check(st) != KVC_OK) return 0;
    const uint64_t h = kvc_digest(KVC_DIGEST_SEED, st, (size_t)st->plan.arena_bytes);
    return h ? h : 1u;
}

/* The method's cache elements, through the method table.
 * trusted-by: each method's elements never exceed the worst case its plan
 * reserved (worst_elements minus the exact regions'): proved for exact and
 * uniform (wp_exact, wp_uniform: count <= capacity = method_tokens); for
 * every method, stream_check refuses peak_elements > worst_elements, and
 * tests/unit/test_stream.c appends past the budget through every method of
 * the registry and checks it. */
/*@ requires stream_plan_ok(st);
    assigns \nothing;
    ensures \result + stream_exact_capacity(&st->plan) * (st->plan.d + st->plan.dv) <= st->plan.worst_elements;
*/
static uint64_t method_elements(const kvc_stream *st)
{
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    return o->elements ? o->elements(method_of_c(st)) : 0;
}

/* Cache elements held now: the exact regions' and the method's. Never more
 * than the plan's worst case (the budget theorem at run time). */
/*@ requires stream_plan_ok(st) && stream_shape_ok(st) && st->has_pending <= 1;
    assigns \nothing;
    ensures \result <= st->plan.worst_elements;
*/
static uint64_t stream_elements(const kvc_stream *st)
{
    const uint64_t exact_tokens = (uint64_t)st->sink_used + st->win_count + st->has_pending + st->prot_count;
    const uint64_t tok = (uint64_t)st->plan.d + st->plan.dv;
    //@ ghost kvc_mul_le(exact_tokens, (uint64_t)st->plan.n_sink + st->plan.n_window + st->plan.n_protect + 1u, tok, tok);
    //@ assert exact_tokens * tok <= stream_exact_capacity(&st->plan) * tok;
    //@ assert stream_exact_capacity(&st->plan) * tok <= st->plan.worst_elements;
    const uint64_t exact = exact_tokens * tok;
    const uint64_t m = method_elements(st);
    //@ assert m + exact <= st->plan.worst_elements;
    return exact + m;
}

/* Hand one token that leaves the window to the method (sink-window has
 * none: StreamingLLM drops the middle).
 * trusted-by: a dispatch through the method table (outside WP); the update
 * writes only the method's sub-arena: proved for exact and uniform
 * (wp_exact, wp_uniform), the others under ASan (tests/unit/test_stream.c,
 * tests/fuzz/fuzz_api.c). */
/*@ requires stream_plan_ok(st) && \valid_read(R);
    requires \valid_read(k + (0 .. st->plan.d - 1)) && \valid_read(v + (0 .. st->plan.dv - 1));
    assigns R->method[0 .. st->lay.method_bytes - 1];
*/
static void method_hand(const kvc_stream *st, const stream_regions *R, const kvc_kernels *kern, const float *k,
                        const float *v, uint64_t token)
{
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    const kvc_method_ctx cx = {kern, &st->plan, R->call};
    if (o->update) o->update(R->method, &cx, k, v, token);
}

/* Protected spans. A token entering the window is an outlier when its key
 * points away from the (at most 32) most recent keys already there: its
 * cosine to their sum falls more than KVC_FLAG_Z moving standard deviations
 * below the moving mean of that cosine (rate KVC_FLAG_RATE). The raw test of BalanceKV's augmented
 * variant, <k, sum> <= 0, never fires on SmolLM2: every key shares one
 * dominant direction (measured: 0 of 2016 tokens in 15 heads of the GPL-3
 * text). With z = 3 and rate 1/32, a passkey needle is flagged in 14 of 15
 * heads (layers 0, 7, 15, 22, 29), and 0-2.3% of natural-text tokens are
 * (README "Protected spans"). A near-empty window (fewer than 8 keys, or
 * before 64 tokens) flags nothing. Window rows are read through
 * the table's row kernels, so any storage type works. */
#define KVC_FLAG_Z       3.0
#define KVC_FLAG_RATE    (1.0 / 32.0)
#define KVC_FLAG_MIN_DEV 0.005
#define KVC_FLAG_CONTEXT 32u

/* sum += the key of window slot `slot`, the i-th oldest of the window (KIVI4
 * plans read it from its closed block or from the open block). */
/*@ requires stream_plan_ok(st) && stream_shape_ok(st) && st->plan.n_window >= 1;
    requires stream_regions_ok(st, R) && \valid_read(R);
    requires i < st->win_count && slot < st->plan.n_window;
    requires \valid(sum + (0 .. st->plan.d - 1));
    assigns sum[0 .. st->plan.d - 1];
*/
static void window_key_add(const kvc_stream *st, const stream_regions *R, uint32_t i, uint32_t slot, double *sum);

/* sum = the n most recent keys of the window ring. */
/*@ requires stream_plan_ok(st) && stream_shape_ok(st) && st->plan.n_window >= 1;
    requires stream_regions_ok(st, R) && \valid_read(R);
    requires 1 <= n <= st->win_count;
    requires \valid(sum + (0 .. st->plan.d - 1));
    assigns sum[0 .. st->plan.d - 1];
*/
static void window_key_sum(const kvc_stream *st, const stream_regions *R, uint32_t n, double *sum)
{
    const uint32_t W = st->plan.n_window, d = st->plan.d, head = st->win_head, count = st->win_count;
    /*@ loop invariant 0 <= c <= d;
        loop assigns c, sum[0 .. d - 1];
        loop variant d - c;
    */
    for (uint32_t c = 0; c < d; c++) sum[c] = 0.0;
    /*@ loop invariant count - n <= i <= count;
        loop assigns i, sum[0 .. d - 1];
        loop variant count - i;
    */
    for (uint32_t i = count - n; i < count; i++) {
        const uint32_t slot = head + i < W ? head + i : head + i - W;
        window_key_add(st, R, i, slot, sum);
    }
}

/* The cosine of k to the window's key sum against its moving statistics:
 * 1 for an outlier. Floating-point only (no memory but k, sum and the two
 * moving statistics).
 * trusted-by: its memory: it reads k[0 .. d-1] and sum[0 .. d-1] in one
 * loop bounded by d, and writes the two statistics; its statistics:
 * tests/unit/test_stream.c protected_spans_keep_needles (a planted needle is
 * flagged, for every method, also under ASan). */
/*@ requires \valid(st) && 1 <= st->plan.d <= 256;
    requires \valid_read(k + (0 .. st->plan.d - 1)) && \valid_read(sum + (0 .. st->plan.d - 1));
    assigns st->flag_mu, st->flag_var;
    ensures \result <= 1;
*/
static uint8_t flag_statistics(kvc_stream *st, const float *k, const double *sum)
{
    const uint32_t d = st->plan.d;
    double kk = 0.0, ss = 0.0, ks = 0.0;
    for (uint32_t c = 0; c < d; c++) kk += (double)k[c] * k[c], ss += sum[c] * sum[c], ks += (double)k[c] * sum[c];
    if (!(kk > 0.0) || !(ss > 0.0)) return 0u;
    const double cosv = ks / sqrt(kk * ss);
    /* the first cosine starts the averages (a zeroed arena has none yet);
       non-finite ones (corrupted data) restart them */
    if ((st->flag_mu == 0.0 && st->flag_var == 0.0) || !isfinite(st->flag_mu) || !(st->flag_var >= 0.0) ||
        !isfinite(st->flag_var))
        st->flag_mu = cosv, st->flag_var = 0.0;
    const int warm = st->n_seen >= 2u * (uint64_t)KVC_FLAG_CONTEXT;
    /* a deviation below KVC_FLAG_MIN_DEV is no evidence (rounding, a
       perfectly periodic filler whose variance is ~0) */
    const double sd = sqrt(st->flag_var) > KVC_FLAG_MIN_DEV ? sqrt(st->flag_var) : KVC_FLAG_MIN_DEV;
    const uint8_t flag = warm && cosv < st->flag_mu - KVC_FLAG_Z * sd ? 1u : 0u;
    const double dev = cosv - st->flag_mu;
    st->flag_mu += KVC_FLAG_RATE * dev;
    st->flag_var = (1.0 - KVC_FLAG_RATE) * (st->flag_var + KVC_FLAG_RATE * dev * dev);
    return flag;
}

/* Is the key k (entering the window) an outlier against the window before it? */
/*@ requires stream_plan_ok(st) && stream_shape_ok(st) && \valid(st) && st->plan.n_window >= 1;
    requires stream_regions_ok(st, R) && \valid_read(R);
    requires \valid_read(k + (0 .. st->plan.d - 1));
    assigns st->flag_mu, st->flag_var;
    ensures \result <= 1;
*/
static uint8_t outlier_flag(kvc_stream *st, const stream_regions *R, const float *k)
{
    const uint32_t W = st->plan.n_window, count = st->win_count;
    /* the KVC_FLAG_CONTEXT most recent keys, however long the window (sink-window's is the budget) */
    const uint32_t n = count < KVC_FLAG_CONTEXT ? count : KVC_FLAG_CONTEXT;
    if (n < 8u && n < W) return 0u;
    double sum[KVC_MAX_HEAD_DIM];
    window_key_sum(st, R, n, sum);
    return flag_statistics(st, k, sum);
}

/* The window's oldest token (id `token`, in `slot`) is leaving: is an outlier
 * within protect_radius positions of it? Earlier outliers: the latest that
 * left (last_flag); itself and later ones: the flags of the next slots. */
/*@ requires stream_plan_ok(st) && stream_shape_ok(st) && st->plan.n_window >= 1 && st->plan.n_protect >= 1;
    requires stream_regions_ok(st, R) && \valid_read(R);
    requires slot < st->plan.n_window;
    assigns \nothing;
*/
static int leaves_protected(const kvc_stream *st, const stream_regions *R, uint32_t slot, uint64_t token)
{
    const uint32_t W = st->plan.n_window, radius = st->plan.protect_radius, count = st->win_count;
    const uint64_t last = st->last_flag;
    if (last && last - 1u <= token && token - (last - 1u) <= radius) return 1;
    const uint32_t ahead = radius < count ? radius + 1u : count;
    /*@ loop invariant 0 <= i <= ahead;
        loop assigns i;
        loop variant ahead - i;
    */
    for (uint32_t i = 0; i < ahead; i++) {
        uint32_t s = slot + i;
        if (s >= W) s -= W;
        if (R->wflag[s]) return 1;
    }
    return 0;
}

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
static void window_mark(const kvc_stream *st, uint8_t *wflag, uint32_t i, uint8_t centre)
{
    const uint32_t W = st->plan.n_window, head = st->win_head;
    const uint32_t slot = head + i < W ? head + i : head + i - W;
    wflag[slot] = centre;
}

/* Would committing the pending token push a token into the method? */
/*@ requires \valid_read(st);
    assigns \nothing;
*/
static int commit_reaches_method(const kvc_stream *st)
{
    return st->has_pending && st->sink_used >= st->plan.n_sink && st->win_count >= st->plan.n_window;
}

/* Row kernels on row i of an n-row array, stated on the whole array: the
 * append path's callers then reason about arrays, not byte ranges (their
 * provers time out on the row arithmetic inside the stream's predicates). */
/*@ requires kvc_rows_ok(r, n) && i < n;
    requires \valid_read(x + (0 .. r->dim - 1));
    requires \separated(r->base + (0 .. n * r->stride - 1), x + (0 .. r->dim - 1));
    assigns r->base[0 .. n * r->stride - 1];
*/
static void row_store_in(const kvc_rows *r, uint32_t i, uint32_t n, const float *x)
{
    (void)n; /* read by the proof only */
    //@ ghost kvc_row_in(i, n, r->stride);
    kvc_row_store(r, i, x);
}

/*@ requires kvc_rows_ok(to, n_to) && kvc_rows_ok(from, n_from) && to->stride == from->stride;
    requires j < n_to && i < n_from;
    requires \separated(to->base + (0 .. n_to * to->stride - 1), from->base + (0 .. n_from * from->stride - 1));
    assigns to->base[0 .. n_to * to->stride - 1];
*/
static void row_copy_in(const kvc_rows *to, uint32_t j, uint32_t n_to, const kvc_rows *from, uint32_t i,
                        uint32_t n_from)
{
    (void)n_to, (void)n_from; /* read by the proof only */
    //@ ghost kvc_row_in(j, n_to, to->stride);
    //@ ghost kvc_row_in(i, n_from, from->stride);
    kvc_row_copy(to, j, from, i);
}

/*@ requires kvc_rows_ok(r, n) && i < n && \valid(x + (0 .. r->dim - 1));
    assigns x[0 .. r->dim - 1];
*/
static void row_load_in(const kvc_rows *r, uint32_t i, uint32_t n, float *x)
{
    (void)n; /* read by the proof only */
    //@ ghost kvc_row_in(i, n, r->stride);
    kvc_row_load(r, i, x);
}

/*@ requires kvc_rows_ok(r, n) && i < n && r->dtype == 0;
    assigns \nothing;
    ensures \valid_read(\result + (0 .. r->dim - 1));
*/
static const float *row_f32_in(const kvc_rows *r, uint32_t i, uint32_t n)
{
    (void)n; /* read by the proof only */
    //@ ghost kvc_row_in(i, n, r->stride);
    return kvc_row_f32(r, i);
}

/* ---- KIVI4 key blocks in the in-order regions (plan.key_blocks) ----
 * docs/architecture.md "KIVI4 in the in-order regions". The sinks and the
 * window keep their keys in KIVI4 blocks of 32 tokens wherever whole blocks
 * fit (a KIVI4 plan's window is a multiple of 32; the sinks' last
 * n_sink mod 32 tokens stay int4 rows), each block in the bytes of its 32
 * int4 rows, so no region changes size. A block's new tokens wait in the
 * open block (32 f16 key rows, 32 f16 value rows, after the method's bytes)
 * and are quantised together when the block's last slot is written: by then
 * every older token of that ring block has left the window (eviction stays
 * one token at a time, oldest first, so the counters and their proofs are
 * the row types'). Values are int4 rows, written at once; the open block's
 * f16 copy is what the view reads until the block closes.
 *
 * trusted-by (the helpers below, outside the proof jobs): each writes only
 * the row array and the open block it is given, inside the regions the
 * proved layout places apart (wp_sizes); tests/unit/test_stream.c
 * kivi4_regions_match_blocks checks every token of KIVI4 streams against
 * blocks quantised independently, also under ASan in CI. */

/* Slots [0, blocked) of an n-slot region hold KIVI4 blocks. */
static uint32_t blocked_slots(const kvc_stream *st, uint32_t n)
{
    return st->plan.key_blocks ? n / KVC_KIVI_BLOCK * KVC_KIVI_BLOCK : 0u;
}

/* Tokens in the open block: the newest of the sinks (while they fill) or of the window. */
static uint32_t open_count(const kvc_stream *st)
{
    const kvc_stream_plan *p = &st->plan;
    if (!p->key_blocks) return 0;
    if (st->sink_used < p->n_sink) {
        const uint32_t sb = blocked_slots(st, p->n_sink);
        return st->sink_used < sb ? st->sink_used % KVC_KIVI_BLOCK : 0u;
    }
    if (p->n_window == 0) return 0;
    uint32_t next = st->win_head + st->win_count; /* the slot the next token takes */
    if (next >= p->n_window) next -= p->n_window;
    return next % KVC_KIVI_BLOCK;
}

static const kvc_row_kernels *f16_rows(void) { return &kvc_kernels_ref()->rows[KVC_DTYPE_F16]; }
static unsigned char *open_key_row(const stream_regions *R, const kvc_stream_plan *p, uint32_t slot)
{
    return R->open + (size_t)(slot % KVC_KIVI_BLOCK) * kvc_row_bytes(KVC_DTYPE_F16, p->d);
}
static unsigned char *open_value_row(const stream_regions *R, const kvc_stream_plan *p, uint32_t slot)
{
    return R->open + KVC_ALIGN_UP((uint64_t)KVC_KIVI_BLOCK * kvc_row_bytes(KVC_DTYPE_F16, p->d)) +
           (size_t)(slot % KVC_KIVI_BLOCK) * kvc_row_bytes(KVC_DTYPE_F16, p->dv);
}

/* Slot i of an n-slot in-order region gets the key (is_key) or the value x. */
/*@ requires kvc_rows_ok(r, n) && i < n;
    requires \valid_read(x + (0 .. r->dim - 1));
    requires \separated(r->base + (0 .. n * r->stride - 1), x + (0 .. r->dim - 1));
    requires \valid_read(st) && \valid_read(R) && \valid(R->method + (0 .. st->lay.method_bytes - 1));
    assigns r->base[0 .. n * r->stride - 1], R->method[0 .. st->lay.method_bytes - 1];
*/
static void blocks_store(const kvc_stream *st, const stream_regions *R, const kvc_rows *r, uint32_t i, uint32_t n,
                         const float *x, int is_key)
{
    if (i >= blocked_slots(st, n)) { /* the sinks' int4 tail */
        kvc_row_store(r, i, x);
        return;
    }
    if (!is_key) { /* values: the int4 row now, the f16 copy for the view until the block closes */
        kvc_row_store(r, i, x);
        f16_rows()->store(open_value_row(R, &st->plan, i), x, r->dim);
        return;
    }
    f16_rows()->store(open_key_row(R, &st->plan, i), x, r->dim);
    if (i % KVC_KIVI_BLOCK == KVC_KIVI_BLOCK - 1u) /* the block's last slot: quantise the block */
        kvc_kivi4_key_block_store_f16(r->base + (size_t)(i / KVC_KIVI_BLOCK) * KVC_KIVI_BLOCK * r->stride, R->open,
                                      KVC_KIVI_BLOCK, r->dim);
}

/* The key of window slot `slot` (a closed one: the oldest token, leaving) into x. */
/*@ requires stream_plan_ok(st) && stream_regions_ok(st, R) && \valid_read(R);
    requires slot < st->plan.n_window && \valid(x + (0 .. st->plan.d - 1));
    assigns x[0 .. st->plan.d - 1];
*/
static void window_key_load(const kvc_stream *st, const stream_regions *R, uint32_t slot, float *x)
{
    if (st->plan.key_blocks)
        kvc_kivi4_key_load(R->wk.base, slot, x, st->plan.d);
    else
        kvc_row_load(&R->wk, slot, x);
}

/* The key of window slot `slot` (closed) into protected row `at`, through
 * the staging row (which a quantised plan has: header_ok refuses key blocks
 * on any type but int4; the guard keeps this contract true regardless). */
/*@ requires stream_plan_ok(st) && stream_regions_ok(st, R) && \valid_read(R);
    requires at < st->plan.n_protect && slot < st->plan.n_window;
    assigns R->rk.base[0 .. st->plan.n_protect * R->rk.stride - 1],
            R->stage[0 .. (st->plan.dtype == 0 ? 0 : st->plan.d + st->plan.dv) - 1];
*/
static void window_key_protect(const kvc_stream *st, const stream_regions *R, uint32_t at, uint32_t slot)
{
    if (st->plan.dtype == KVC_DTYPE_F32) return;
    kvc_kivi4_key_load(R->wk.base, slot, R->stage, st->plan.d);
    kvc_row_store(&R->rk, at, R->stage);
}

static void window_key_add(const kvc_stream *st, const stream_regions *R, uint32_t i, uint32_t slot, double *sum)
{
    const uint32_t d = st->plan.d;
    if (!st->plan.key_blocks) {
        kvc_row_axpy(&R->wk, slot, sum, 1.0);
    } else if (i >= st->win_count - open_count(st)) { /* still in the open block */
        f16_rows()->axpy(sum, 1.0, open_key_row(R, &st->plan, slot), d);
    } else {
        float x[KVC_MAX_HEAD_DIM];
        kvc_kivi4_key_load(R->wk.base, slot, x, d);
        for (uint32_t c = 0; c < d; c++) sum[c] += (double)x[c];
    }
}

/* The window is full and the pending token needs its oldest slot (`slot`,
 * the ring's head, holding token `oldest`): that token leaves for the
 * protected rows (an outlier near it, and room) or for the method. Returns 1
 * when it went to the method (the caller counts it: this function writes no
 * 64-bit counter, so the regions' descriptions stay as they were). */
/*@ requires stream_plan_ok(st) && stream_counters_ok(st) && \valid(st) && st->has_pending == 1;
    requires st->plan.n_window >= 1 && st->win_count == st->plan.n_window && st->sink_used == st->plan.n_sink;
    requires slot == st->win_head && oldest == st->n_seen - 1 - st->win_count;
    requires stream_regions_ok(st, R) && \valid_read(kern) && \separated(R, st);
    assigns st->prot_count,
            R->rk.base[0 .. st->plan.n_protect * R->rk.stride - 1], R->rv.base[0 .. st->plan.n_protect * R->rv.stride - 1],
            R->method[0 .. st->lay.method_bytes - 1],
            R->stage[0 .. (st->plan.dtype == 0 ? 0 : st->plan.d + st->plan.dv) - 1];
    ensures \result == 0 || \result == 1;
    ensures st->prot_count + \result == \old(st->prot_count) + 1;
    ensures st->prot_count <= st->plan.n_protect;
*/
static int window_evict(kvc_stream *st, const stream_regions *R, const kvc_kernels *kern, uint32_t slot,
                        uint64_t oldest)
{
    const uint32_t W = st->plan.n_window, n_protect = st->plan.n_protect, d = st->plan.d;
    if (n_protect && st->prot_count < n_protect && leaves_protected(st, R, slot, oldest)) {
        /* kept exactly: the stored row moves as bytes, no requantisation */
        const uint32_t at = st->prot_count;
        if (st->plan.key_blocks) /* the key leaves its block as an int4 row */
            window_key_protect(st, R, at, slot);
        else
            row_copy_in(&R->rk, at, n_protect, &R->wk, slot, W);
        row_copy_in(&R->rv, at, n_protect, &R->wv, slot, W);
        st->prot_count = at + 1u;
        return 0;
    }
    if (st->plan.dtype == KVC_DTYPE_F32) {
        method_hand(st, R, kern, row_f32_in(&R->wk, slot, W), row_f32_in(&R->wv, slot, W), oldest);
    } else { /* the oldest row, dequantised into the staging row after the pending value */
        window_key_load(st, R, slot, R->stage);
        row_load_in(&R->wv, slot, W, R->stage + d);
        method_hand(st, R, kern, R->stage, R->stage + d, oldest);
    }
    return 1;
}

/* The sinks are full and there is a window: the pending token takes a free
 * window slot, or the oldest one's (which leaves: window_evict). */
/*@ requires stream_plan_ok(st) && stream_counters_ok(st) && \valid(st) && st->has_pending == 1;
    requires st->plan.n_window >= 1 && st->sink_used == st->plan.n_sink;
    requires stream_regions_ok(st, R) && \valid_read(kern) && \separated(R, st);
    assigns st->win_count, st->win_head, st->prot_count, st->method_in, st->last_flag,
            st->flag_mu, st->flag_var, STREAM_REGION_BYTES(st, R);
    ensures st->win_count <= st->plan.n_window && st->win_head < st->plan.n_window;
    ensures (st->method_in > 0 || st->prot_count > 0) ==> st->win_count == st->plan.n_window;
    ensures st->prot_count <= st->plan.n_protect && st->last_flag <= st->n_seen;
    ensures st->win_count + st->prot_count + st->method_in ==
            \old(st->win_count + st->prot_count + st->method_in) + 1;
*/
static void commit_to_window(kvc_stream *st, const stream_regions *R, const kvc_kernels *kern)
{
    const uint32_t W = st->plan.n_window, n_protect = st->plan.n_protect;
    const uint8_t flag = n_protect ? outlier_flag(st, R, R->pk) : 0u; /* against the window before it */
    uint32_t slot;
    int to_method = 0, evicted = 0;
    const uint64_t oldest = st->n_seen - 1u - st->win_count; /* the window's oldest token, when full */
    if (st->win_count < W) {
        slot = st->win_head + st->win_count;
        if (slot >= W) slot -= W;
        st->win_count++;
    } else {
        slot = st->win_head;
        to_method = window_evict(st, R, kern, slot, oldest);
        evicted = 1;
        st->win_head = slot + 1u == W ? 0u : slot + 1u;
    }
    const int was_outlier = evicted && n_protect && R->wflag[slot];
    if (st->plan.key_blocks) {
        blocks_store(st, R, &R->wk, slot, W, R->pk, 1);
        blocks_store(st, R, &R->wv, slot, W, R->pv, 0);
    } else {
        row_store_in(&R->wk, slot, W, R->pk);
        row_store_in(&R->wv, slot, W, R->pv);
    }
    if (n_protect) R->wflag[slot] = flag;
    /* the 64-bit counters last */
    if (to_method) st->method_in++;
    if (was_outlier) st->last_flag = oldest + 1u;
}

/* The pending token moves into the exact regions: a sink, a window slot, or
 * (window full) the window's oldest token leaves for the protected rows or
 * the method and the pending token takes its slot. Writes only the regions;
 * afterwards the token sits in exactly one place (the count of held and
 * handed tokens grows by one, n_seen does not: append counts it). */
/*@ requires stream_plan_ok(st) && stream_counters_ok(st) && \valid(st) && st->has_pending == 1;
    requires stream_regions_ok(st, R) && \valid_read(kern) && \separated(R, st);
    assigns st->sink_used, st->win_count, st->win_head, st->prot_count, st->method_in, st->last_flag,
            st->flag_mu, st->flag_var, STREAM_REGION_BYTES(st, R);
    ensures st->sink_used <= st->plan.n_sink && st->win_count <= st->plan.n_window;
    ensures st->plan.n_window == 0 ? st->win_head == 0 : st->win_head < st->plan.n_window;
    ensures st->sink_used < st->plan.n_sink ==> st->win_count == 0;
    ensures (st->method_in > 0 || st->prot_count > 0) ==>
              st->sink_used == st->plan.n_sink && st->win_count == st->plan.n_window;
    ensures st->prot_count <= st->plan.n_protect && st->peak_elements <= st->plan.worst_elements;
    ensures st->last_flag <= st->n_seen;
    ensures st->sink_used + st->win_count + st->prot_count + st->method_in ==
            \old(st->sink_used + st->win_count + st->prot_count + st->method_in) + 1;
*/
static void commit_pending(kvc_stream *st, const stream_regions *R, const kvc_kernels *kern)
{
    const uint32_t n_sink = st->plan.n_sink;
    if (st->sink_used < n_sink) {
        const uint32_t at = st->sink_used;
        if (st->plan.key_blocks) {
            blocks_store(st, R, &R->sk, at, n_sink, R->pk, 1);
            blocks_store(st, R, &R->sv, at, n_sink, R->pv, 0);
        } else {
            row_store_in(&R->sk, at, n_sink, R->pk);
            row_store_in(&R->sv, at, n_sink, R->pv);
        }
        st->sink_used = at + 1u;
    } else if (st->plan.n_window == 0) {
        method_hand(st, R, kern, R->pk, R->pv, st->n_seen - 1u);
        st->method_in++;
    } else {
        commit_to_window(st, R, kern);
    }
}

kvc_status kvc_stream_append(kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    return kvc_stream_append_prechecked(st, kern, k, v);
}

/* Whether the method (through its table) takes one more token.
 * trusted-by: assigns nothing, a dispatch through the method table; exact's
 * is proved (wp_exact). */
/*@ requires stream_header_ok(st);
    assigns \nothing;
*/
static int method_can_accept(const kvc_stream *st)
{
    const kvc_method_ops *ops = kvc_method_ops_of(st->plan.method);
    return ops->can_accept == NULL || ops->can_accept(method_of_c(st));
}

/* Every check of an append, before its first write (so a refused append
 * leaves the arena byte-identical, the method's RNG included): the inputs,
 * the kernel table, finiteness, the 32-bit token ids, the method's room. */
/*@ requires stream_ok(st) && \valid(table) && (kern == \null || \valid_read(kern));
    requires k == \null || \valid_read(k + (0 .. st->plan.d - 1));
    requires v == \null || \valid_read(v + (0 .. st->plan.dv - 1));
    requires \separated(table, st);
    assigns *table;
    ensures \result == KVC_OK ==> k != \null && v != \null && \valid_read(*table) && st->n_seen < 4294967295;
*/
static kvc_status append_admit(const kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v,
                               const kvc_kernels **table)
{
    if (k == NULL || v == NULL) return KVC_E_ARG;
    kern = kvc_kernels_or_best(kern); /* NULL: the best table this CPU runs */
    if (kern->version != KVC_KERNELS_VERSION || kern->sqdist_f32 == NULL || kern->dot_f32 == NULL) return KVC_E_BACKEND;
    if (!kvc_kernels_support(kern, st->plan.dtype)) return KVC_E_UNSUPPORTED;
    if (st->plan.key_blocks && !kvc_kernels_support(kern, KVC_DTYPE_KIVI4)) return KVC_E_UNSUPPORTED;
    if (!kvc_all_finite(k, st->plan.d) || !kvc_all_finite(v, st->plan.dv)) return KVC_E_NONFINITE;
    if (st->n_seen >= UINT32_MAX) return KVC_E_CAPACITY; /* token ids are 32-bit */
    if (commit_reaches_method(st) && !method_can_accept(st)) return KVC_E_CAPACITY;
    *table = kern;
    return KVC_OK;
}

/* n floats from `from` to `to` (the pending rows: typed loops, where a
 * memcpy would be a byte cast outside WP's typed model). */
/*@ requires \valid(to + (0 .. n - 1)) && \valid_read(from + (0 .. n - 1));
    assigns to[0 .. n - 1];
*/
static void floats_copy(float *to, const float *from, uint32_t n)
{
    /*@ loop invariant 0 <= c <= n;
        loop assigns c, to[0 .. n - 1];
        loop variant n - c;
    */
    for (uint32_t c = 0; c < n; c++) to[c] = from[c];
}

/* The token just copied in is pending: the counters that say so, and the
 * peak (a small context of its own: after the commit's writes, the provers
 * need 10-20 s to carry the header across these stores). */
/*@ requires stream_header_ok(st) && stream_shape_ok(st) && \valid(st) && st->n_seen < 4294967295;
    requires st->sink_used + st->win_count + st->prot_count + st->method_in == st->n_seen;
    requires st->last_flag <= st->n_seen;
    assigns st->has_pending, st->n_seen, st->peak_elements;
    ensures stream_ok(st) && st->n_seen == \old(st->n_seen) + 1;
*/
static void count_pending(kvc_stream *st)
{
    st->has_pending = 1;
    st->n_seen++;
    const uint64_t e = stream_elements(st);
    if (e > st->peak_elements) st->peak_elements = e;
}

/* An admitted append: the pending token committed, the new one pending.
 * The pending rows' addresses and sizes are read before the commit (the
 * commit writes only region bytes and counters, but the proof then needs
 * no frame over the regions' descriptions). */
/*@ requires stream_ok(st) && \valid(st) && st->n_seen < 4294967295;
    requires stream_regions_ok(st, R) && \valid_read(R) && \valid_read(kern) && \separated(R, st);
    requires \valid_read(k + (0 .. st->plan.d - 1)) && \valid_read(v + (0 .. st->plan.dv - 1));
    assigns st->sink_used, st->win_count, st->win_head, st->prot_count, st->method_in, st->last_flag,
            st->flag_mu, st->flag_var, st->has_pending, st->n_seen, st->peak_elements,
            STREAM_REGION_BYTES(st, R);
    ensures stream_ok(st) && st->n_seen == \old(st->n_seen) + 1;
*/
static void append_commit(kvc_stream *st, const stream_regions *R, const kvc_kernels *kern, const float *k,
                          const float *v)
{
    const uint32_t d = st->plan.d, dv = st->plan.dv;
    float *pk = R->pk, *pv = R->pv;
    if (st->has_pending) commit_pending(st, R, kern);
    floats_copy(pk, k, d);
    floats_copy(pv, v, dv);
    //@ assert stream_header_same{Pre, Here}(st);
    //@ assert stream_header_ok(st) && stream_shape_ok(st);
    //@ assert st->sink_used + st->win_count + st->prot_count + st->method_in == \at(st->n_seen, Pre);
    //@ assert st->last_flag <= \at(st->n_seen, Pre);
    count_pending(st);
}

/* An admitted append, with the regions described in R (the caller's). */
/*@ requires stream_ok(st) && \valid(st) && st->n_seen < 4294967295;
    requires \valid(R) && \separated(R, st) && \valid_read(kern);
    requires \valid_read(k + (0 .. st->plan.d - 1)) && \valid_read(v + (0 .. st->plan.dv - 1));
    ensures stream_ok(st) && st->n_seen == \old(st->n_seen) + 1;
*/
static void append_admitted(kvc_stream *st, stream_regions *R, const kvc_kernels *kern, const float *k, const float *v)
{
    stream_regions_of(st, kern, R);
    /* the accessor wrote *R only: the header's fields one by one (as one
     * predicate, the provers need 20 s; field by field, 0.1 s each) */
    //@ assert st->plan.d == \at(st->plan.d, Pre) && st->plan.dv == \at(st->plan.dv, Pre);
    //@ assert st->plan.n_sink == \at(st->plan.n_sink, Pre) && st->plan.n_window == \at(st->plan.n_window, Pre);
    //@ assert st->plan.n_protect == \at(st->plan.n_protect, Pre) && st->plan.dtype == \at(st->plan.dtype, Pre);
    //@ assert st->plan.protect_radius == \at(st->plan.protect_radius, Pre);
    //@ assert st->plan.worst_elements == \at(st->plan.worst_elements, Pre);
    //@ assert st->plan.arena_bytes == \at(st->plan.arena_bytes, Pre);
    //@ assert st->lay.off_sink_k == \at(st->lay.off_sink_k, Pre) && st->lay.off_sink_v == \at(st->lay.off_sink_v, Pre);
    //@ assert st->lay.off_win_k == \at(st->lay.off_win_k, Pre) && st->lay.off_win_v == \at(st->lay.off_win_v, Pre);
    //@ assert st->lay.off_pend_k == \at(st->lay.off_pend_k, Pre) && st->lay.off_pend_v == \at(st->lay.off_pend_v, Pre);
    //@ assert st->lay.off_prot_k == \at(st->lay.off_prot_k, Pre) && st->lay.off_prot_v == \at(st->lay.off_prot_v, Pre);
    //@ assert st->lay.off_wflag == \at(st->lay.off_wflag, Pre) && st->lay.off_method == \at(st->lay.off_method, Pre);
    //@ assert st->lay.method_bytes == \at(st->lay.method_bytes, Pre);
    //@ assert stream_header_same{Pre, Here}(st);
    //@ assert stream_counters_same{Pre, Here}(st);
    //@ assert stream_header_ok(st);
    //@ assert stream_ok(st);
    append_commit(st, R, kern, k, v);
}

/* The append after the handle's check (the cache manager checks once per
 * call): every refusal comes from append_admit, before the first write; an
 * admitted token keeps stream_ok (the budget theorem's wrapper part
 * included). The contract is here, not on the prototype in plan.h: its
 * predicates read the header, which only this file defines. */
/*@ requires stream_ok(st) && \valid(st);
    requires kern == \null || \valid_read(kern);
    requires k == \null || \valid_read(k + (0 .. st->plan.d - 1));
    requires v == \null || \valid_read(v + (0 .. st->plan.dv - 1));
    ensures stream_ok(st);
    ensures \result == KVC_OK ? st->n_seen == \old(st->n_seen) + 1 : st->n_seen == \old(st->n_seen);
*/
kvc_status kvc_stream_append_prechecked(kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v)
{
    const kvc_kernels *table = NULL;
    const kvc_status rc = append_admit(st, kern, k, v, &table);
    if (rc != KVC_OK) {
        //@ assert stream_header_same{Pre, Here}(st) && stream_counters_same{Pre, Here}(st);
        //@ assert stream_header_ok(st);
        return rc;
    }
    //@ assert stream_header_same{Pre, Here}(st) && stream_counters_same{Pre, Here}(st);
    //@ assert stream_header_ok(st);
    //@ assert stream_ok(st);
    stream_regions R;
    append_admitted(st, &R, table, k, v);
    return KVC_OK;
}

static kvc_rows exact_rows(const kvc_stream *st, uint64_t off, uint32_t dim, const kvc_kernels *kern)
{
    return kvc_rows_at(st, off, dim, st->plan.dtype, kern);
}

/* An exact segment: rows [first, first + n) of keys and values, weight 1. */
static void put_segment(kvc_view *view, const kvc_rows *k, const kvc_rows *v, size_t first, size_t n)
{
    kvc_segment *s = &view->seg[view->n_seg++];
    kvc_segment_rows(s, k, v, first);
    s->weights = NULL;
    s->scale = 1.0;
    s->n = n;
    s->role = KVC_SET_BOTH;
}

static void view_fill(const kvc_stream *st, kvc_view *view);

kvc_status kvc_stream_view(const kvc_stream *st, kvc_view *view)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    if (view == NULL) return KVC_E_ARG;
    view_fill(st, view);
    return KVC_OK;
}

/* Slots [first, first + n) of an in-order region, in blocks (KIVI4 keys:
 * the first slot's block, from its token) or as rows. */
static void put_region(kvc_view *view, const kvc_rows *k, const kvc_rows *v, size_t first, size_t n, int blocks)
{
    if (!blocks) {
        put_segment(view, k, v, first, n);
        return;
    }
    kvc_segment *s = &view->seg[view->n_seg++];
    s->dtype = KVC_DTYPE_KIVI4;
    s->keys_q = k->base + first / KVC_KIVI_BLOCK * KVC_KIVI_BLOCK * k->stride;
    s->first = first % KVC_KIVI_BLOCK;
    s->values_q = v->base + first * v->stride;
    s->weights = NULL;
    s->scale = 1.0;
    s->n = n;
    s->role = KVC_SET_BOTH;
}

/* The view of a checked stream: the sinks in blocks and in rows, the window
 * ring's closed tokens in two pieces, the open block, the current token
 * (those six in token order: the causal block), the protected spans, then
 * the method's segments. A plan without key blocks leaves the blocks' and
 * the open block's segments empty. */
static void view_fill(const kvc_stream *st, kvc_view *view)
{
    const kvc_stream_plan *p = &st->plan;
    memset(view, 0, sizeof *view);
    view->d = p->d;
    view->dv = p->dv;
    view->beta = p->beta;
    const int blocks = p->key_blocks != 0;
    const uint32_t open = open_count(st), sink_phase = st->sink_used < p->n_sink;
    const uint32_t sink_open = sink_phase ? open : 0u, win_open = sink_phase ? 0u : open;
    const kvc_rows sk = exact_rows(st, st->lay.off_sink_k, p->d, NULL),
                   sv = exact_rows(st, st->lay.off_sink_v, p->dv, NULL);
    const uint32_t sb = blocked_slots(st, p->n_sink);
    put_region(view, &sk, &sv, 0, (st->sink_used < sb ? st->sink_used : sb) - sink_open, blocks);
    put_segment(view, &sk, &sv, sb, st->sink_used > sb ? st->sink_used - sb : 0u);
    /* the window ring's closed tokens in two pieces: [head, end) then [0, wrap) */
    const kvc_rows wk = exact_rows(st, st->lay.off_win_k, p->d, NULL),
                   wv = exact_rows(st, st->lay.off_win_v, p->dv, NULL);
    const uint32_t closed = st->win_count - win_open;
    const uint32_t first = closed < p->n_window - st->win_head ? closed : p->n_window - st->win_head;
    put_region(view, &wk, &wv, st->win_head, first, blocks);
    put_region(view, &wk, &wv, 0, closed - first, blocks);
    /* the open block: its tokens in f16, the newest of the in-order regions
       (an empty f16 segment, no rows, for a plan without key blocks) */
    if (blocks) {
        kvc_rows ok = {NULL, 0, p->d, KVC_DTYPE_F16, NULL}, ov = {NULL, 0, p->dv, KVC_DTYPE_F16, NULL};
        ok.base = (unsigned char *)KVC_AT_C(
            st, st->lay.off_method + st->lay.method_bytes - kvc_stream_open_block_bytes(p), unsigned char);
        ok.stride = (size_t)kvc_row_bytes(KVC_DTYPE_F16, p->d);
        ov.base = ok.base + KVC_ALIGN_UP((uint64_t)KVC_KIVI_BLOCK * ok.stride);
        ov.stride = (size_t)kvc_row_bytes(KVC_DTYPE_F16, p->dv);
        put_segment(view, &ok, &ov, 0, open);
    } else {
        kvc_segment *g = &view->seg[view->n_seg++]; /* the view is zeroed: no rows, no weights */
        g->dtype = KVC_DTYPE_F16;
        g->scale = 1.0;
        g->role = KVC_SET_BOTH;
    }
    /* the pending token is f32 whatever the storage type */
    const kvc_rows pk = kvc_rows_at(st, st->lay.off_pend_k, p->d, KVC_DTYPE_F32, NULL);
    const kvc_rows pv = kvc_rows_at(st, st->lay.off_pend_v, p->dv, KVC_DTYPE_F32, NULL);
    put_segment(view, &pk, &pv, 0, st->has_pending);
    /* the protected spans: exact, older than the window (not causal) */
    const kvc_rows rk = exact_rows(st, st->lay.off_prot_k, p->d, NULL),
                   rv = exact_rows(st, st->lay.off_prot_v, p->dv, NULL);
    put_segment(view, &rk, &rv, 0, st->prot_count);
    const kvc_method_ops *o = kvc_method_ops_of(p->method);
    if (o->view) view->n_seg += o->view(method_of_c(st), p, &view->seg[view->n_seg]);
}

kvc_status kvc_stream_attend(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q, float *out)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    return kvc_stream_attend_prechecked(st, kern, q, n_q, out);
}

kvc_status kvc_stream_attend_prechecked(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                        float *out)
{
    kvc_view view;
    if (q == NULL || out == NULL || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return KVC_E_ARG;
    if (!st->has_pending) return KVC_E_STATE; /* nothing appended yet */
    if (!kvc_all_finite(q, n_q * st->plan.d)) return KVC_E_NONFINITE;
    view_fill(st, &view);
    return kvc_attend(kern, &view, q, n_q, out);
}

kvc_status kvc_stream_check(const kvc_stream *st) { return stream_check(st); }
const kvc_stream_plan *kvc_stream_plan_of(const kvc_stream *st) { return &st->plan; }
const kvc_stream_config *kvc_stream_config_of(const kvc_stream *st) { return &st->cfg; }

const kvc_stream_config *kvc_stream_get_config(const kvc_stream *st)
{
    return stream_check(st) == KVC_OK ? &st->cfg : NULL;
}

const kvc_stream_plan *kvc_stream_get_plan(const kvc_stream *st)
{
    return stream_check(st) == KVC_OK ? &st->plan : NULL;
}

const void *kvc_stream_method_state(const kvc_stream *st)
{
    if (stream_check(st) != KVC_OK || kvc_method_ops_of(st->plan.method)->arena_size == NULL) return NULL;
    return method_of_c(st);
}

kvc_status kvc_stream_get_stats(const kvc_stream *st, kvc_stream_stats *stats)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    if (stats == NULL) return KVC_E_ARG;
    memset(stats, 0, sizeof *stats);
    stats->tokens_seen = st->n_seen;
    stats->elements = stream_elements(st);
    stats->peak_elements = st->peak_elements;
    stats->method_tokens_in = st->method_in;
    stats->protected_tokens = st->prot_count;
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    if (o->fill_stats) o->fill_stats(method_of_c(st), stats);
    return KVC_OK;
}

/* ---- batched attend and the query-aware hooks ---- */

static size_t view_entries(const kvc_view *v, size_t from)
{
    size_t n = 0;
    for (size_t i = from; i < v->n_seg; i++) n += v->seg[i].n;
    return n;
}

size_t kvc_stream_view_entries(const kvc_stream *st)
{
    kvc_view v;
    if (stream_check(st) != KVC_OK) return 0;
    view_fill(st, &v);
    return view_entries(&v, 0);
}

size_t kvc_stream_attend_work_bytes(const kvc_stream *st, size_t n_pos, size_t n_q)
{
    if (stream_check(st) != KVC_OK || n_pos > KVC_MAX_BATCH_POSITIONS || n_q > KVC_MAX_QUERY_HEADS) return 0;
    return (size_t)kvc_attend_work_bytes(n_pos, n_q, st->plan.dv);
}

kvc_status kvc_stream_attend_batch(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_pos,
                                   size_t n_q, float *out, double *mass, void *work, size_t work_bytes)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    if (q == NULL || out == NULL || work == NULL || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS || n_pos < 1 ||
        n_pos > KVC_MAX_BATCH_POSITIONS)
        return KVC_E_ARG;
    if (!st->has_pending) return KVC_E_STATE;
    /* the positions must be the last tokens of the exact block (in token order) */
    const uint64_t recent = st->method_in == 0 && st->prot_count == 0 ? st->n_seen : (uint64_t)st->win_count + 1u;
    if (n_pos > recent) return KVC_E_ARG;
    kern = kvc_kernels_or_best(kern); /* NULL: the best table this CPU runs */
    if (kern->version != KVC_KERNELS_VERSION || kern->attend_batch == NULL) return KVC_E_BACKEND;
    if (!kvc_kernels_support(kern, st->plan.dtype) || !kvc_kernels_support(kern, KVC_DTYPE_F32))
        return KVC_E_UNSUPPORTED;
    if (st->plan.key_blocks &&
        (!kvc_kernels_support(kern, KVC_DTYPE_KIVI4) || !kvc_kernels_support(kern, KVC_DTYPE_F16)))
        return KVC_E_UNSUPPORTED;
    if (!kvc_all_finite(q, n_pos * n_q * st->plan.d)) return KVC_E_NONFINITE;
    kvc_view view;
    view_fill(st, &view);
    if (mass != NULL)
        for (size_t i = 0, n = view_entries(&view, 0); i < n; i++) mass[i] = 0.0;
    kvc_attend_batch b = {q, n_pos, n_q, KVC_STREAM_CAUSAL_SEGMENTS, out, mass, NULL};
    const kvc_status rc = kern->attend_batch(kern, &view, &b, work, work_bytes);
    if (rc != KVC_OK) return rc;
    if (!kvc_all_finite(out, n_pos * n_q * st->plan.dv)) {
        for (size_t i = 0; i < n_pos * n_q * st->plan.dv; i++) out[i] = 0.0f;
        return KVC_E_RANGE;
    }
    return KVC_OK;
}

kvc_status kvc_stream_observe(kvc_stream *st, const kvc_kernels *kern, const double *mass, size_t n_entries)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    kvc_view view;
    view_fill(st, &view);
    if (mass == NULL || n_entries != view_entries(&view, 0)) return KVC_E_ARG;
    for (size_t i = 0; i < n_entries; i++) {
        if (!isfinite(mass[i])) return KVC_E_NONFINITE;
        if (mass[i] < 0.0) return KVC_E_ARG;
    }
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    if (o->observe == NULL) return KVC_OK;
    kern = kvc_kernels_or_best(kern); /* NULL: the best table this CPU runs */
    const kvc_method_ctx cx = {kern, &st->plan, NULL};
    const size_t exact = view_entries(&view, 0) - view_entries(&view, KVC_STREAM_EXACT_SEGMENTS);
    /* the window and the current token follow the sinks in the view, oldest
       first: consecutive tokens ending with the current one (n_seen - 1) */
    const size_t n_recent = (size_t)st->win_count + st->has_pending;
    o->observe(method_of(st), &cx, mass + exact, n_entries - exact, mass + st->sink_used, n_recent,
               st->n_seen - n_recent);
    return KVC_OK;
}

size_t kvc_stream_attend_observed_work_bytes(const kvc_stream *st, size_t n_q)
{
    if (stream_check(st) != KVC_OK || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return 0;
    kvc_view view;
    view_fill(st, &view);
    const size_t aw = (size_t)kvc_attend_work_bytes(1, n_q, st->plan.dv);
    return KVC_ALIGN_UP(aw) + view_entries(&view, 0) * sizeof(double);
}

kvc_status kvc_stream_attend_observed(kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q, float *out,
                                      void *work, size_t work_bytes)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    if (kvc_method_ops_of(st->plan.method)->observe == NULL) return kvc_stream_attend_prechecked(st, kern, q, n_q, out);
    const size_t need = kvc_stream_attend_observed_work_bytes(st, n_q);
    if (work == NULL || need == 0 || work_bytes < need || ((uintptr_t)work % sizeof(double)) != 0) return KVC_E_ARG;
    const size_t aw = KVC_ALIGN_UP((size_t)kvc_attend_work_bytes(1, n_q, st->plan.dv));
    double *mass = (double *)(void *)((unsigned char *)work + aw);
    const size_t n = (need - aw) / sizeof(double);
    kvc_status rc = kvc_stream_attend_batch(st, kern, q, 1, n_q, out, mass, work, aw);
    if (rc != KVC_OK) return rc;
    return kvc_stream_observe(st, kern, mass, n);
}

kvc_status kvc_stream_prefill_queries(kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_rows)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    if (q == NULL || n_rows < 1 || n_rows > KVC_MAX_BATCH_POSITIONS) return KVC_E_ARG;
    if (!kvc_all_finite(q, n_rows * st->plan.d)) return KVC_E_NONFINITE;
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    if (o->prefill_queries == NULL) return KVC_OK;
    kern = kvc_kernels_or_best(kern); /* NULL: the best table this CPU runs */
    const kvc_method_ctx cx = {kern, &st->plan, NULL};
    o->prefill_queries(method_of(st), &cx, q, n_rows);
    return KVC_OK;
}

kvc_status kvc_stream_mark(kvc_stream *st, uint64_t token, int centre)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    if (centre != 0 && centre != 1) return KVC_E_ARG;
    if (st->plan.n_protect == 0 || st->plan.n_window == 0) return KVC_E_UNSUPPORTED;
    if (token < st->sink_used) return KVC_OK; /* a sink: held exactly for good */
    /* the window holds the win_count tokens before the pending one (n_seen - 1) */
    if (st->n_seen == 0 || token >= st->n_seen - 1u) return KVC_E_ARG;
    const uint64_t oldest = st->n_seen - 1u - st->win_count;
    if (token < oldest) return KVC_E_ARG; /* it has left the window */
    window_mark(st, KVC_AT(st, st->lay.off_wflag, uint8_t), (uint32_t)(token - oldest), (uint8_t)centre);
    return KVC_OK;
}

/* ---- a whole prompt at once ---- */

/* The method's scratch for a kvc_stream_prefill call of n rows (0: none). */
static size_t prefill_work_need(const kvc_stream *st, size_t n)
{
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    return o->prefill_work_bytes ? o->prefill_work_bytes(method_of_c(st), &st->plan, n) : 0;
}

size_t kvc_stream_prefill_work_bytes(const kvc_stream *st, size_t n)
{
    if (stream_check(st) != KVC_OK || n < 1 || n > KVC_MAX_PREFILL_TOKENS) return 0;
    return prefill_work_need(st, n);
}

kvc_status kvc_stream_prefill(kvc_stream *st, const kvc_kernels *kern, const float *keys, size_t key_stride,
                              const float *values, size_t value_stride, size_t n, void *work, size_t work_bytes)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    const size_t d = st->plan.d, dv = st->plan.dv;
    if (keys == NULL || values == NULL || n < 1 || n > KVC_MAX_PREFILL_TOKENS || key_stride < d || value_stride < dv)
        return KVC_E_ARG;
    if (work != NULL && work_bytes > 0 &&
        (kvc_bytes_overlap(work, work_bytes, keys, ((n - 1) * key_stride + d) * sizeof(float)) ||
         kvc_bytes_overlap(work, work_bytes, values, ((n - 1) * value_stride + dv) * sizeof(float))))
        return KVC_E_ARG; /* the call writes work while it reads the rows */
    for (size_t i = 0; i < n; i++)
        if (!kvc_all_finite(keys + i * key_stride, d) || !kvc_all_finite(values + i * value_stride, dv))
            return KVC_E_NONFINITE;
    return kvc_stream_prefill_counted(st, kern, keys, key_stride, values, value_stride, n, work, work_bytes, NULL);
}

/* One append inside a kvc_stream_prefill call: the append's own checks
 * and commit (kvc_stream_append_prechecked), with the call visible to the
 * method's update. */
static kvc_status append_in_call(kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v,
                                 kvc_prompt_call *call)
{
    const kvc_kernels *table = NULL;
    const kvc_status rc = append_admit(st, kern, k, v, &table);
    if (rc != KVC_OK) return rc;
    stream_regions R;
    stream_regions_of(st, table, &R);
    R.call = call;
    append_commit(st, &R, table, k, v);
    return KVC_OK;
}

/* After the handle, the rows' pointers, n, the strides and finiteness are
 * checked (by kvc_stream_prefill, or by the cache manager once for a layer).
 * Stops at the first token the stream refuses (the tokens before it stay,
 * as a loop of appends leaves them); *appended (may be NULL) counts those taken. */
kvc_status kvc_stream_prefill_counted(kvc_stream *st, const kvc_kernels *kern, const float *keys, size_t key_stride,
                                      const float *values, size_t value_stride, size_t n, void *work, size_t work_bytes,
                                      size_t *appended)
{
    if (appended) *appended = 0;
    const size_t need = prefill_work_need(st, n);
    if (need > 0 && (work == NULL || work_bytes < need || ((uintptr_t)work & 7u) != 0)) return KVC_E_ARENA;
    if ((uint64_t)st->n_seen + n > UINT32_MAX) return KVC_E_CAPACITY; /* token ids are 32-bit */
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    kvc_prompt_call call = {{keys, values, key_stride, value_stride, st->n_seen, 0}, n, work, work_bytes, 0};
    if (o->prefill_open) o->prefill_open(method_of(st));
    kvc_status rc = KVC_OK;
    for (; call.rows.n < n; call.rows.n++) {
        rc = append_in_call(st, kern, keys + call.rows.n * key_stride, values + call.rows.n * value_stride, &call);
        if (rc != KVC_OK) break;
    }
    const kvc_method_ctx cx = {kvc_kernels_or_best(kern), &st->plan, &call};
    if (o->prefill_close) o->prefill_close(method_of(st), &cx);
    if (appended) *appended = call.rows.n;
    return rc;
}

/* ---- split-K ---- */

size_t kvc_stream_attend_part_work_bytes(const kvc_stream *st, size_t n_q)
{
    if (stream_check(st) != KVC_OK || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return 0;
    return (size_t)kvc_attend_work_bytes(1, n_q, st->plan.dv) + n_q * st->plan.dv * sizeof(float);
}

/* Entries [first, first + count) of a view (in segment order), as a view. */
static void view_slice(const kvc_view *in, size_t first, size_t count, kvc_view *out)
{
    *out = *in;
    out->n_seg = 0;
    size_t at = 0;
    for (size_t s = 0; s < in->n_seg && count > 0; s++) {
        const kvc_segment *g = &in->seg[s];
        if (first >= at + g->n) {
            at += g->n;
            continue;
        }
        const size_t i0 = first > at ? first - at : 0, n = g->n - i0 < count ? g->n - i0 : count;
        kvc_segment *o = &out->seg[out->n_seg++];
        *o = *g;
        o->n = n;
        if (g->dtype == KVC_DTYPE_F32) {
            o->keys = g->keys ? g->keys + i0 * in->d : NULL;
            o->values = g->values ? g->values + i0 * in->dv : NULL;
        } else if (g->dtype == KVC_DTYPE_KIVI4) { /* from token first + i0 of the key blocks */
            const size_t tok = g->first + i0;
            o->keys_q = g->keys_q ? (const unsigned char *)g->keys_q +
                                        tok / KVC_KIVI_BLOCK * (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(in->d)
                                  : NULL;
            o->first = tok % KVC_KIVI_BLOCK;
            o->values_q = g->values_q
                              ? (const unsigned char *)g->values_q + i0 * (size_t)kvc_row_bytes(KVC_DTYPE_I4, in->dv)
                              : NULL;
        } else {
            o->keys_q =
                g->keys_q ? (const unsigned char *)g->keys_q + i0 * (size_t)kvc_row_bytes(g->dtype, in->d) : NULL;
            o->values_q =
                g->values_q ? (const unsigned char *)g->values_q + i0 * (size_t)kvc_row_bytes(g->dtype, in->dv) : NULL;
        }
        if (g->weights) o->weights = g->weights + i0;
        first += n, count -= n;
        at += g->n;
    }
}

kvc_status kvc_stream_attend_part(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                  size_t part, size_t n_parts, double *state, void *work, size_t work_bytes)
{
    const kvc_status chk = stream_check(st);
    if (chk != KVC_OK) return chk;
    if (q == NULL || state == NULL || work == NULL || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS || n_parts < 1 ||
        n_parts > 1024 || part >= n_parts || ((uintptr_t)work % sizeof(double)) != 0 ||
        work_bytes < kvc_stream_attend_part_work_bytes(st, n_q))
        return KVC_E_ARG;
    if (!st->has_pending) return KVC_E_STATE;
    kern = kvc_kernels_or_best(kern); /* NULL: the best table this CPU runs */
    if (kern->version != KVC_KERNELS_VERSION || kern->attend_batch == NULL) return KVC_E_BACKEND;
    if (!kvc_kernels_support(kern, st->plan.dtype) || !kvc_kernels_support(kern, KVC_DTYPE_F32))
        return KVC_E_UNSUPPORTED;
    if (st->plan.key_blocks &&
        (!kvc_kernels_support(kern, KVC_DTYPE_KIVI4) || !kvc_kernels_support(kern, KVC_DTYPE_F16)))
        return KVC_E_UNSUPPORTED;
    if (!kvc_all_finite(q, n_q * st->plan.d)) return KVC_E_NONFINITE;
    kvc_view view, sub;
    view_fill(st, &view);
    const size_t E = view_entries(&view, 0);
    const size_t first = (size_t)((uint64_t)E * part / n_parts), last = (size_t)((uint64_t)E * (part + 1) / n_parts);
    view_slice(&view, first, last - first, &sub);
    const size_t kw = (size_t)kvc_attend_work_bytes(1, n_q, st->plan.dv);
    float *out = (float *)(void *)((unsigned char *)work + kw);
    kvc_attend_batch b = {q, 1, n_q, 0, out, NULL, state};
    return kern->attend_batch(kern, &sub, &b, work, kw);
}
