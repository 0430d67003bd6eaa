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
#include <string.h>

#include "stream_internal.h"

size_t kvc_stream_header_bytes(void) { return sizeof(struct kvc_stream); }

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
    if (p->key_blocks > 1u ||
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
    return o->elements ? o->elements(kvc_stream_method_of_c(st)) : 0;
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
    if (n_protect && st->prot_count < n_protect && kvc_stream_leaves_protected(st, R, slot, oldest)) {
        /* kept exactly: the stored row moves as bytes, no requantisation */
        const uint32_t at = st->prot_count;
        if (st->plan.key_blocks) /* the key leaves its block as an int4 row */
            kvc_stream_window_key_protect(st, R, at, slot);
        else
            row_copy_in(&R->rk, at, n_protect, &R->wk, slot, W);
        row_copy_in(&R->rv, at, n_protect, &R->wv, slot, W);
        st->prot_count = at + 1u;
        return 0;
    }
    if (st->plan.dtype == KVC_DTYPE_F32) {
        method_hand(st, R, kern, row_f32_in(&R->wk, slot, W), row_f32_in(&R->wv, slot, W), oldest);
    } else { /* the oldest row, dequantised into the staging row after the pending value */
        kvc_stream_window_key_load(st, R, slot, R->stage);
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
    const uint8_t flag = n_protect ? kvc_stream_outlier_flag(st, R, R->pk) : 0u; /* against the window before it */
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
        kvc_stream_blocks_store(st, R, &R->wk, slot, W, R->pk, 1);
        kvc_stream_blocks_store(st, R, &R->wv, slot, W, R->pv, 0);
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
            kvc_stream_blocks_store(st, R, &R->sk, at, n_sink, R->pk, 1);
            kvc_stream_blocks_store(st, R, &R->sv, at, n_sink, R->pv, 0);
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
    return ops->can_accept == NULL || ops->can_accept(kvc_stream_method_of_c(st));
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
    return kvc_stream_method_of_c(st);
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
    if (o->fill_stats) o->fill_stats(kvc_stream_method_of_c(st), stats);
    return KVC_OK;
}

/* One append inside a kvc_stream_prefill call: the append's own checks
 * and commit (kvc_stream_append_prechecked), with the call visible to the
 * method's update. */
kvc_status kvc_stream_append_in_call(kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v,
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
    kvc_stream_window_mark(st, KVC_AT(st, st->lay.off_wflag, uint8_t), (uint32_t)(token - oldest), (uint8_t)centre);
    return KVC_OK;
}
