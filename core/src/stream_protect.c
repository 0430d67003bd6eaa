/* Protected spans: tokens near an outlier key leave the window for exact
 * protected rows instead of the method. The outlier test runs as each token
 * enters the window (stream.c's commit_to_window), the span test as the
 * oldest token leaves it (window_evict), and a caller's verdict
 * (kvc_stream_mark, stream.c) sets a window token's flag here. Proved in
 * verify wp_stream with stream.c. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "stream_internal.h"

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
        kvc_stream_window_key_add(st, R, i, slot, sum);
    }
}

/* The cosine of k to the sum of the keys before it against the moving
 * statistics (*mu, *var) of that cosine: 1 for an outlier (never before
 * `warm`). Floating-point only (no memory but k, sum and the two moving
 * statistics). Shared by the stream's test and kvc_outlier_flags, so that an
 * engine scoring its own blocks (kvcompress's vLLM plugin) flags what a
 * stream would.
 * trusted-by: its memory: it reads k[0 .. d-1] and sum[0 .. d-1] in one
 * loop bounded by d, and writes the two statistics; its statistics:
 * tests/unit/test_stream.c protected_spans_keep_needles (a planted needle is
 * flagged, for every method, also under ASan). */
/*@ requires \valid(mu) && \valid(var) && \separated(mu, var) && 1 <= d <= 256;
    requires \valid_read(k + (0 .. d - 1)) && \valid_read(sum + (0 .. d - 1));
    assigns *mu, *var;
    ensures \result <= 1;
*/
static uint8_t outlier_step(double *mu, double *var, int warm, const float *k, const double *sum, uint32_t d)
{
    double kk = 0.0, ss = 0.0, ks = 0.0;
    for (uint32_t c = 0; c < d; c++) kk += (double)k[c] * k[c], ss += sum[c] * sum[c], ks += (double)k[c] * sum[c];
    if (!(kk > 0.0) || !(ss > 0.0)) return 0u;
    const double cosv = ks / sqrt(kk * ss);
    /* the first cosine starts the averages (a zeroed arena has none yet);
       non-finite ones (corrupted data) restart them */
    if ((*mu == 0.0 && *var == 0.0) || !isfinite(*mu) || !(*var >= 0.0) || !isfinite(*var)) *mu = cosv, *var = 0.0;
    /* a deviation below KVC_FLAG_MIN_DEV is no evidence (rounding, a
       perfectly periodic filler whose variance is ~0) */
    const double sd = sqrt(*var) > KVC_FLAG_MIN_DEV ? sqrt(*var) : KVC_FLAG_MIN_DEV;
    const uint8_t flag = warm && cosv < *mu - KVC_FLAG_Z * sd ? 1u : 0u;
    const double dev = cosv - *mu;
    *mu += KVC_FLAG_RATE * dev;
    *var = (1.0 - KVC_FLAG_RATE) * (*var + KVC_FLAG_RATE * dev * dev);
    return flag;
}

/* The stream's statistics through outlier_step (warm after 2 contexts of tokens).
 * trusted-by: outlier_step's contract (its one call, with the stream's two
 * statistics). */
/*@ requires \valid(st) && 1 <= st->plan.d <= 256;
    requires \valid_read(k + (0 .. st->plan.d - 1)) && \valid_read(sum + (0 .. st->plan.d - 1));
    assigns st->flag_mu, st->flag_var;
    ensures \result <= 1;
*/
static uint8_t flag_statistics(kvc_stream *st, const float *k, const double *sum)
{
    return outlier_step(&st->flag_mu, &st->flag_var, st->n_seen >= 2u * (uint64_t)KVC_FLAG_CONTEXT, k, sum, st->plan.d);
}

/* Is the key k (entering the window) an outlier against the window before it? */
uint8_t kvc_stream_outlier_flag(kvc_stream *st, const stream_regions *R, const float *k)
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
int kvc_stream_leaves_protected(const kvc_stream *st, const stream_regions *R, uint32_t slot, uint64_t token)
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
void kvc_stream_window_mark(const kvc_stream *st, uint8_t *wflag, uint32_t i, uint8_t centre)
{
    const uint32_t W = st->plan.n_window, head = st->win_head;
    const uint32_t slot = head + i < W ? head + i : head + i - W;
    wflag[slot] = centre;
}

/* kvc_outlier_flags: the window's key sum kept as a running sum over the
 * sequence context ++ keys (add the newest, drop the one 32 back) instead of
 * recomputed from a ring; the rows are the caller's floats, not the stream's
 * stored rows (which may be quantised), so flags agree with a stream's on
 * f32 rows up to rounding.
 * trusted-by: tests/unit/test_stream.c outlier_flags_match_stream (every
 * flag of a planted-needle run equals an f32 sink-window stream's). */
kvc_status kvc_outlier_flags(kvc_outlier_state *state, const float *context, uint32_t n_context, const float *keys,
                             uint32_t n, uint32_t d, size_t stride, uint8_t *flags)
{
    if (state == NULL || d < 1u || d > KVC_MAX_HEAD_DIM || stride < d || n_context > KVC_FLAG_CONTEXT ||
        (n_context > 0u && context == NULL) || (n > 0u && (keys == NULL || flags == NULL)))
        return KVC_E_ARG;
    for (uint32_t i = 0; i < n_context + n; i++) {
        const float *k = i < n_context ? context + (size_t)i * stride : keys + (size_t)(i - n_context) * stride;
        for (uint32_t c = 0; c < d; c++)
            if (!isfinite(k[c])) return KVC_E_NONFINITE;
    }
    double sum[KVC_MAX_HEAD_DIM];
    for (uint32_t c = 0; c < d; c++) sum[c] = 0.0;
    for (uint32_t i = 0; i < n_context; i++)
        for (uint32_t c = 0; c < d; c++) sum[c] += (double)context[(size_t)i * stride + c];
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t before = n_context + i < KVC_FLAG_CONTEXT ? n_context + i : KVC_FLAG_CONTEXT;
        const float *k = keys + (size_t)i * stride;
        /* warm as a stream is when it tests its 64th token: 64 appended */
        const int warm = state->seen + 1u >= 2u * (uint64_t)KVC_FLAG_CONTEXT;
        flags[i] = before >= 8u ? outlier_step(&state->mu, &state->var, warm, k, sum, d) : 0u;
        state->seen++;
        for (uint32_t c = 0; c < d; c++) sum[c] += (double)k[c];
        if (n_context + i + 1u > KVC_FLAG_CONTEXT) { /* the key 32 back leaves the sum */
            const uint32_t old = n_context + i - KVC_FLAG_CONTEXT;
            const float *o =
                old < n_context ? context + (size_t)old * stride : keys + (size_t)(old - n_context) * stride;
            for (uint32_t c = 0; c < d; c++) sum[c] -= (double)o[c];
        }
    }
    return KVC_OK;
}
