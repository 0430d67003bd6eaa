/* libFuzzer target over the core API, in the style of zstd's round-trip
 * fuzzers: the input picks a configuration (any method of the enumeration,
 * any parameters, valid or not), then a sequence of operations: append
 * (values from a palette with NaN, Inf, 1e38, subnormals), attend, view,
 * stats, validate, snapshot to another address, byte corruption of a copy,
 * and calls with bad arguments. Asserted (abort() = a finding):
 *  - a configuration is refused iff kvc_stream_config_problem names a rule,
 *    and an accepted one has peak <= worst <= budget elements;
 *  - every invalid call gets a status; a rejected append leaves the arena
 *    byte-identical; NaN/Inf input gives KVC_E_NONFINITE;
 *  - a snapshot copied to another address continues identically (statuses,
 *    outputs, arena bytes);
 *  - a corrupted copy gives a status or succeeds, never a crash (ASan);
 *  - outputs are finite, and inside the hull of the appended values (within
 *    rounding and the storage type's quantisation) whenever the view is a
 *    convex combination (every segment in both sets: read from the view,
 *    not from a list of methods);
 *  - the batched attend of one position gives kvc_stream_attend's bits, its
 *    masses are >= 0 and sum to one per query over the denominator set, and
 *    observe / prefill_queries accept them (storage types f32, f16, int8);
 *  - a span-centre mark (kvc_stream_mark) answers alike on both copies, and a
 *    refused one, or one on a corrupted copy, changes nothing;
 *  - a prompt of 1-8 tokens in one call (kvc_stream_prefill, with exactly the
 *    scratch it asks for) answers alike on both copies, refuses finite tokens
 *    only for capacity, and changes nothing when it appended none;
 *  - every other kernel table this build runs here (kvc_kernels_at: the
 *    single-precision one and the SIMD ISAs the CPU has; the CUDA table on
 *    the CPU SIMT runtime in builds with KVC_FUZZ_CUDA, for the first attend
 *    of an input whose op byte has bit 3 set: a launch there runs every CUDA
 *    thread as a fiber, ~100x an attend's time under ASan) answers each attend with the
 *    reference's status and, where both succeed, within the f32 bound of
 *    tests/kvc_attend_bound.h derived from the view; where the view is a
 *    convex combination a table must succeed whenever the reference does.
 * The seed corpus (corpus/api, make_api_corpus.py) is replayed under ctest. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_attend_bound.h"
#ifdef KVC_FUZZ_CUDA
#include "kvc/kvc_cuda.h"
#endif

#define MAXD    16u
#define MAX_OPS 400u

typedef struct reader {
    const uint8_t *p;
    size_t n, at;
} reader;

static uint8_t u8(reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }
static uint32_t u16(reader *r)
{
    const uint32_t lo = u8(r); /* two statements: the order of the reads is fixed */
    return lo | (uint32_t)u8(r) << 8;
}

static void fail(const char *what, int line)
{
    fprintf(stderr, "fuzz_api: %s (line %d)\n", what, line);
    abort();
}
#define REQUIRE(c) ((c) ? (void)0 : fail(#c, __LINE__))

static float palette(uint8_t b)
{
    if (b < 200) return ((float)b - 100.0f) / 16.0f;
    static const float special[] = {NAN,   INFINITY, -INFINITY, 1e38f,  -1e38f,   1e-38f, 1e-45f,    0.0f,
                                    -0.0f, 3e20f,    -3e20f,    1e-20f, 65504.0f, 1e-7f,  123456.0f, -7.5f};
    return special[(b - 200) % 16];
}

static float small_float(reader *r, const float *choices, size_t n) { return choices[u8(r) % n]; }

/* Registry position b % 64; past the last method: an unknown one. Positions
 * do not move when a method is added, so corpus inputs keep their meaning. */
static int method_at(uint8_t b)
{
    const size_t want = b % 64u;
    return want < kvc_method_count() ? (int)kvc_method_at(want) : 200;
}

/* The estimator is a convex combination of cached values when every segment
 * of the view is in both sets (numerator weights = denominator weights). */
static int convex(const kvc_stream *st)
{
    kvc_view v;
    if (kvc_stream_view(st, &v) != KVC_OK) return 0;
    for (size_t i = 0; i < v.n_seg; i++)
        if (v.seg[i].n > 0 && v.seg[i].role != KVC_SET_BOTH) return 0;
    return 1;
}

/* The largest error storage adds to one value (of magnitude <= mag, in a row
 * whose largest |value| is <= vmax), over the f32 output's own n eps |v|:
 *  f16: half an ulp, 2^-11 relative, 2^-25 absolute below the normals (taken 2^-24);
 *  int8 / Q15: half a step of scale = max|row| / 127 (/ 32767), the f32 scale's
 *    rounding on top (x 1.001);
 *  int4: half a step of its group; the step is the smallest half with
 *    min + 15 step >= the group's largest value, min the largest half <= its
 *    smallest, so step <= (2 vmax (1 + 2^-10)) / 15 (1 + 2^-10) + 2^-24;
 *  KIVI4: its values are int4 rows (KIVI's per-token value layout), or f16
 *    in the open block, whose error is smaller: int4's bound. */
static double quantisation(kvc_dtype t, double mag, double vmax)
{
    switch (t) {
    case KVC_DTYPE_F16: return mag * 0x1p-11 + 0x1p-24;
    case KVC_DTYPE_I8: return vmax / 254.0 * 1.001;
    case KVC_DTYPE_Q15: return vmax / 65534.0 * 1.001;
    case KVC_DTYPE_I4:
    case KVC_DTYPE_KIVI4: return 0.5 * ((2.0 * vmax * (1.0 + 0x1p-10)) / 15.0 * (1.0 + 0x1p-10) + 0x1p-24);
    default: return 0.0;
    }
}

static kvc_stream_config read_config(reader *r)
{
    static const float fparams[] = {0.0f, 0.5f, 1.0f, 4.0f, 0.01f, 0.99f, -1.0f, NAN, INFINITY, 1e30f, 0.3f};
    /* one read per statement: argument evaluation order is unspecified in C,
       and an input must mean the same configuration to every compiler */
    const int method = method_at(u8(r));
    const uint32_t d = 1 + u8(r) % MAXD;
    const uint32_t dv = 1 + u8(r) % MAXD;
    const uint32_t budget = u16(r) % 600;
    const uint64_t seed = u8(r);
    kvc_stream_config c = kvc_stream_config_default((kvc_method)method, d, dv, budget, seed);
    c.n_sink = u8(r) % 40;
    c.n_window = u8(r) % 40;
    if (u8(r) % 4 == 0) c.dtype = (kvc_dtype)(u8(r) % (KVC_DTYPE_COUNT + 1)); /* + one unknown value */
    if (u8(r) % 4 == 0) c.beta = small_float(r, fparams, 11);
    c.prefix_len = u16(r) % 700;
    const uint8_t which = u8(r);
    if (which & 1) {
        c.params.subgen.t = u8(r) % 20;
        c.params.subgen.s = u8(r) % 80;
        c.params.subgen.m_max = u8(r) % 40;
        c.params.subgen.delta0 = small_float(r, fparams, 11);
    }
    if (which & 2) {
        c.params.balancekv.t = u8(r) % 70;
        c.params.balancekv.levels = u8(r) % 20;
        c.params.balancekv.b_max = u8(r) % 70;
        c.params.balancekv.mode = u8(r) % 5;
        c.params.balancekv.gamma = small_float(r, fparams, 11);
        c.params.balancekv.delta = small_float(r, fparams, 11);
        c.params.balancekv.rho = small_float(r, fparams, 11);
        c.params.balancekv.kappa = small_float(r, fparams, 11);
        c.params.balancekv.tail_method = u8(r) % 5;
    }
    if (which & 4) {
        c.params.express.s = (uint32_t)1 << (u8(r) % 10);
        if (u8(r) % 8 == 0) c.params.express.s = u8(r);
        c.params.express.c = (uint32_t)1 << (u8(r) % 8);
        c.params.express.l_mode = u8(r) % 4;
        c.params.express.L = small_float(r, fparams, 11);
        c.params.express.delta = small_float(r, fparams, 11);
        c.params.express.center = u8(r) % 4;
        c.params.express.tail_method = u8(r) % 5;
    }
    return c;
}

/* The tables besides the reference, found by enumeration (never a kept
 * list); the CUDA table last, when built in. */
#define MAX_TABLES 16
static size_t g_n_tables, g_cuda_at = MAX_TABLES;
static const kvc_kernels *g_tables[MAX_TABLES];

static void find_tables(void)
{
    if (g_n_tables) return;
    for (size_t i = 0; i < kvc_kernels_count() && g_n_tables < MAX_TABLES - 1; i++) {
        const kvc_kernels *t = kvc_kernels_at(i);
        if (t != kvc_kernels_ref() && (t->needs & kvc_cpu_features()) == t->needs) g_tables[g_n_tables++] = t;
    }
#ifdef KVC_FUZZ_CUDA
    if (kvc_kernels_cuda() != NULL) g_cuda_at = g_n_tables, g_tables[g_n_tables++] = kvc_kernels_cuda();
#endif
    if (g_n_tables == 0)
        g_tables[g_n_tables++] = kvc_kernels_ref(); /* nothing else here: the reference against itself */
}

/* The attend of every other table against the reference's (status ra, outputs za). */
static void compare_tables(const kvc_stream *st, const kvc_stream_config *cfg, const float *q, size_t nq, kvc_status ra,
                           const float *za, int cvx, int with_cuda)
{
    kvc_view view;
    const int have_view = kvc_stream_view(st, &view) == KVC_OK;
    for (size_t ti = 0; ti < g_n_tables; ti++) {
        const kvc_kernels *t = g_tables[ti];
        if (ti == g_cuda_at && !with_cuda) continue;
        if (!kvc_kernels_support(t, cfg->dtype) || !kvc_kernels_support(t, KVC_DTYPE_F32)) continue;
        float zt[3 * MAXD];
        const kvc_status rt = kvc_stream_attend(st, t, q, nq, zt);
        const int range_pair = (ra == KVC_OK || ra == KVC_E_RANGE) && (rt == KVC_OK || rt == KVC_E_RANGE);
        if (rt != ra && !(range_pair && !cvx)) {
            /* only where the numerator and denominator sets differ may float and double disagree on range */
            fprintf(stderr, "table %s: %s where the reference gives %s (%s %s, convex %d)\n", t->name,
                    kvc_status_str(rt), kvc_status_str(ra), kvc_method_name(cfg->method), kvc_dtype_name(cfg->dtype),
                    cvx);
            fail("a table's status differs from the reference's", __LINE__);
        }
        if (ra != KVC_OK || rt != KVC_OK || !have_view) continue;
        for (size_t i = 0; i < nq; i++) {
            double bound[MAXD];
            bounds_of(&view, q + i * view.d, za + i * view.dv, 0, 0, t->caps, bound);
            for (size_t c = 0; c < view.dv; c++) {
                const double e = fabs((double)zt[i * view.dv + c] - (double)za[i * view.dv + c]);
                if (!(e <= bound[c])) { /* e is finite (rt == KVC_OK): an infinite bound always holds */
                    fprintf(stderr, "table %s, %s %s: z[%zu][%zu] = %.9g, reference %.9g, bound %.3g\n", t->name,
                            kvc_method_name(cfg->method), kvc_dtype_name(cfg->dtype), i, c, (double)zt[i * view.dv + c],
                            (double)za[i * view.dv + c], bound[c]);
                    for (size_t sg = 0; sg < view.n_seg; sg++) /* what the view held, for the reproducer */
                        fprintf(stderr, "  segment %zu: %zu entries, role %u, %s, scale %g, %s\n", sg, view.seg[sg].n,
                                view.seg[sg].role, kvc_dtype_name((kvc_dtype)view.seg[sg].dtype), view.seg[sg].scale,
                                view.seg[sg].weights ? "weighted" : "unweighted");
                    fail("a table's output is outside the derived bound", __LINE__);
                }
            }
        }
    }
}

typedef struct run {
    kvc_stream *st;
    unsigned char *arena;
    size_t bytes;
} run;

static unsigned char *aligned_copy(const unsigned char *src, size_t bytes, size_t shift)
{
    /* exact-size allocations (plus the shift) so ASan sees any overrun */
    unsigned char *p =
        aligned_alloc(KVC_ARENA_ALIGN, ((bytes + shift + KVC_ARENA_ALIGN - 1) / KVC_ARENA_ALIGN) * KVC_ARENA_ALIGN);
    if (p && src) memcpy(p + shift, src, bytes);
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size, 0};
    find_tables();
    const kvc_stream_config cfg = read_config(&r);
    const char *why = kvc_stream_config_problem(&cfg);
    const size_t bytes = kvc_stream_arena_bytes(&cfg);
    kvc_stream_plan plan;
    const kvc_status prc = kvc_stream_plan_make(&cfg, &plan);
    REQUIRE((why == NULL) == (bytes > 0));
    REQUIRE((prc == KVC_OK) == (bytes > 0));
    if (bytes == 0) {
        REQUIRE(prc == KVC_E_ARG || prc == KVC_E_UNSUPPORTED);
        unsigned char buf[64 * 8] __attribute__((aligned(64)));
        kvc_stream *st = NULL;
        REQUIRE(kvc_stream_init(buf, sizeof buf, &cfg, &st) != KVC_OK && st == NULL);
        return 0;
    }
    REQUIRE(plan.worst_elements <= plan.budget_elements && plan.arena_bytes == bytes);
    if (bytes > ((size_t)64 << 20)) return 0; /* keep each input fast */

    run a = {NULL, aligned_copy(NULL, bytes, 0), bytes}, b = {NULL, NULL, bytes};
    if (a.arena == NULL) return 0;
    REQUIRE(kvc_stream_init(a.arena, bytes - 1, &cfg, &a.st) == KVC_E_ARENA);
    REQUIRE(kvc_stream_init(a.arena + 8, bytes, &cfg, &a.st) == KVC_E_ARENA);
    REQUIRE(kvc_stream_init(a.arena, bytes, &cfg, &a.st) == KVC_OK);
    const size_t d = plan.d, dv = plan.dv;
    float k[MAXD], v[MAXD], q[3 * MAXD], za[3 * MAXD], zb[3 * MAXD], lo[MAXD], hi[MAXD];
    for (size_t c = 0; c < MAXD; c++) lo[c] = INFINITY, hi[c] = -INFINITY;
    float vmax = 0.0f; /* largest |value| appended: int8 rows quantise with steps of max|row| / 127 */
    size_t last_nq = 0;
    unsigned char *before = malloc(bytes);
    uint32_t appended = 0;
    int cuda_done = 0; /* the CUDA table answers one attend per input */
    for (uint32_t op = 0; op < MAX_OPS && r.at < r.n; op++) {
        const uint8_t code = u8(&r);
        if (code % 8 == 1 && (code & 0x40)) { /* a prompt in one call (kvc_stream_prefill), on both copies */
            const size_t n = 1u + u8(&r) % 8u;
            float pk[8 * MAXD], pv[8 * MAXD];
            for (size_t i = 0; i < n * d; i++) pk[i] = ((float)u8(&r) - 128.0f) / 32.0f;
            for (size_t i = 0; i < n * dv; i++) pv[i] = ((float)u8(&r) - 128.0f) / 32.0f;
            const size_t wb = kvc_stream_prefill_work_bytes(a.st, n);
            void *work = wb ? aligned_alloc(8, (wb + 7u) / 8u * 8u) : NULL; /* ASan sees an overrun */
            kvc_stream_stats s0, s1;
            REQUIRE(kvc_stream_get_stats(a.st, &s0) == KVC_OK);
            memcpy(before, a.arena, bytes);
            const kvc_status ra = kvc_stream_prefill(a.st, kvc_kernels_ref(), pk, d, pv, dv, n, work, wb);
            if (b.st) REQUIRE(kvc_stream_prefill(b.st, kvc_kernels_ref(), pk, d, pv, dv, n, work, wb) == ra);
            free(work);
            REQUIRE(kvc_stream_get_stats(a.st, &s1) == KVC_OK);
            if (ra != KVC_OK && ra != KVC_E_CAPACITY) fail("prefill refused finite tokens", __LINE__);
            if (s1.tokens_seen == s0.tokens_seen) REQUIRE(memcmp(before, a.arena, bytes) == 0);
            for (size_t i = 0; i < s1.tokens_seen - s0.tokens_seen; i++, appended++)
                for (size_t c = 0; c < dv; c++) {
                    lo[c] = fminf(lo[c], pv[i * dv + c]), hi[c] = fmaxf(hi[c], pv[i * dv + c]);
                    vmax = fmaxf(vmax, fabsf(pv[i * dv + c]));
                }
            continue;
        }
        switch (code % 8) {
        case 0:
        case 1:
        case 2: { /* append, mostly finite */
            int finite = 1;
            const int plain = code % 8 != 2;
            for (size_t c = 0; c < d; c++) {
                k[c] = plain ? ((float)u8(&r) - 128.0f) / 32.0f : palette(u8(&r));
                finite &= isfinite(k[c]) != 0;
            }
            for (size_t c = 0; c < dv; c++) {
                v[c] = plain ? ((float)u8(&r) - 128.0f) / 32.0f : palette(u8(&r));
                finite &= isfinite(v[c]) != 0;
            }
            memcpy(before, a.arena, bytes);
            const kvc_status ra = kvc_stream_append(a.st, kvc_kernels_ref(), k, v);
            if (b.st) REQUIRE(kvc_stream_append(b.st, kvc_kernels_ref(), k, v) == ra);
            if (!finite) REQUIRE(ra == KVC_E_NONFINITE);
            if (ra != KVC_OK) {
                if (ra != KVC_E_NONFINITE && ra != KVC_E_CAPACITY) {
                    fprintf(stderr, "append %u of %s: %s\n", appended, kvc_method_name(cfg.method), kvc_status_str(ra));
                    fail("append refused a finite token", __LINE__);
                }
                REQUIRE(memcmp(before, a.arena, bytes) == 0);
            } else {
                appended++;
                for (size_t c = 0; c < dv; c++) {
                    lo[c] = fminf(lo[c], v[c]), hi[c] = fmaxf(hi[c], v[c]);
                    vmax = fmaxf(vmax, fabsf(v[c]));
                }
            }
            break;
        }
        case 3: { /* attend a GQA group */
            const size_t nq = 1 + u8(&r) % 3;
            int finite = 1;
            for (size_t c = 0; c < nq * d; c++) {
                q[c] = palette(u8(&r));
                finite &= isfinite(q[c]) != 0;
            }
            /* the ground truth is the reference table; NULL must be kvc_kernels_best(), bit for bit */
            const kvc_status ra = kvc_stream_attend(a.st, kvc_kernels_ref(), q, nq, za);
            {
                float zn[3 * MAXD], zbest[3 * MAXD];
                const kvc_status rn = kvc_stream_attend(a.st, NULL, q, nq, zn);
                REQUIRE(rn == kvc_stream_attend(a.st, kvc_kernels_best(), q, nq, zbest));
                if (rn == KVC_OK) REQUIRE(memcmp(zn, zbest, nq * dv * sizeof(float)) == 0);
            }
            const int cvx = convex(a.st);
            if (finite) last_nq = nq;
            if (appended == 0)
                REQUIRE(ra == KVC_E_STATE);
            else if (!finite)
                REQUIRE(ra == KVC_E_NONFINITE);
            else
                REQUIRE(ra == KVC_OK || (ra == KVC_E_RANGE && !cvx));
            if (b.st) {
                REQUIRE(kvc_stream_attend(b.st, kvc_kernels_ref(), q, nq, zb) == ra);
                if (ra == KVC_OK) REQUIRE(memcmp(za, zb, nq * dv * sizeof(float)) == 0);
            }
            compare_tables(a.st, &cfg, q, nq, ra, za, cvx, ((code >> 3) & 1) && !cuda_done);
            cuda_done |= (code >> 3) & 1;
            /* f16 storage and int4's f16 group headers saturate at +-65504 (documented);
               past that range the stored values are not the appended ones */
            const int f16_family =
                cfg.dtype == KVC_DTYPE_F16 || cfg.dtype == KVC_DTYPE_I4 || cfg.dtype == KVC_DTYPE_KIVI4;
            const int in_range = !f16_family || vmax <= 65504.0f;
            if (ra == KVC_OK) {
                for (size_t i = 0; i < nq; i++)
                    for (size_t c = 0; c < dv; c++) {
                        const float z = za[i * dv + c];
                        REQUIRE(isfinite(z));
                        if (cvx && in_range) {
                            const double mag = fmax(fabs((double)lo[c]), fabs((double)hi[c]));
                            const double quant = quantisation(cfg.dtype, mag, (double)vmax);
                            const double tol = 1e-4 * mag + 1e-30 + quant;
                            const int inside = (double)z >= (double)lo[c] - tol && (double)z <= (double)hi[c] + tol;
                            if (!inside)
                                fprintf(stderr, "%s %s: z[%zu][%zu] = %.9g outside [%.9g, %.9g] +- %.3g\n",
                                        kvc_method_name(cfg.method), kvc_dtype_name(cfg.dtype), i, c, (double)z,
                                        (double)lo[c], (double)hi[c], tol);
                            REQUIRE(inside);
                        }
                    }
            }
            break;
        }
        case 4: { /* stats, view, validation */
            kvc_stream_stats s;
            kvc_view view;
            REQUIRE(kvc_stream_get_stats(a.st, &s) == KVC_OK);
            REQUIRE(s.peak_elements <= plan.worst_elements && s.elements <= s.peak_elements);
            REQUIRE(s.tokens_seen == appended);
            REQUIRE(kvc_stream_view(a.st, &view) == KVC_OK);
            REQUIRE(kvc_stream_validate(a.arena, bytes) == KVC_OK);
            REQUIRE(kvc_stream_checksum(a.st) != 0);
            /* the batched attend of the last finite query group: attend's bits, masses that sum to one.
               On the reference table, whose double sums the 1e-9 below is derived for (NULL is the
               best table, which sums in f32; every table is held to the reference in case 3) */
            if (appended > 0 && last_nq > 0) {
                const kvc_kernels *ref = kvc_kernels_ref();
                double work[3 * (MAXD + 3)];
                const size_t E = kvc_stream_view_entries(a.st);
                double *mass = malloc((E ? E : 1) * sizeof(double));
                REQUIRE(kvc_stream_attend_work_bytes(a.st, 1, last_nq) <= sizeof work);
                const kvc_status r1 = kvc_stream_attend(a.st, ref, q, last_nq, za);
                const kvc_status r2 = kvc_stream_attend_batch(a.st, ref, q, 1, last_nq, zb, mass, work, sizeof work);
                REQUIRE(r1 == r2);
                if (r1 == KVC_OK) {
                    REQUIRE(memcmp(za, zb, last_nq * dv * sizeof(float)) == 0);
                    double den = 0.0;
                    size_t e = 0;
                    for (size_t sgi = 0; sgi < view.n_seg; sgi++)
                        for (size_t i = 0; i < view.seg[sgi].n; i++, e++) {
                            REQUIRE(mass[e] >= 0.0 && isfinite(mass[e]));
                            if (view.seg[sgi].role & KVC_SET_DEN) den += mass[e];
                        }
                    REQUIRE(e == E);
                    /* one per query whose denominator is positive (a query whose every
                       score underflows or is excluded has none): an integer in 0..nq */
                    REQUIRE(den <= (double)last_nq * (1.0 + 1e-9) &&
                            fabs(den - nearbyint(den)) <= 1e-9 * (double)last_nq);
                    memcpy(before, a.arena, bytes);
                    REQUIRE(kvc_stream_observe(a.st, ref, mass, E) == KVC_OK);
                    REQUIRE(kvc_stream_prefill_queries(a.st, ref, q, last_nq) == KVC_OK);
                    if (b.st) {
                        REQUIRE(kvc_stream_observe(b.st, ref, mass, E) == KVC_OK);
                        REQUIRE(kvc_stream_prefill_queries(b.st, ref, q, last_nq) == KVC_OK);
                    }
                }
                free(mass);
            }
            { /* a caller's span-centre mark (kvc_stream_mark): in lockstep on both copies;
                 a refusal leaves the arena unchanged */
                const uint64_t t = u16(&r) % ((uint64_t)appended + 2u);
                const int centre = u8(&r) & 1;
                memcpy(before, a.arena, bytes);
                const kvc_status m1 = kvc_stream_mark(a.st, t, centre);
                REQUIRE(m1 == KVC_OK || m1 == KVC_E_ARG || m1 == KVC_E_UNSUPPORTED);
                if (m1 != KVC_OK) REQUIRE(memcmp(before, a.arena, bytes) == 0);
                if (b.st) REQUIRE(kvc_stream_mark(b.st, t, centre) == m1);
            }
            break;
        }
        case 5: { /* snapshot to another address; both continue in lockstep */
            if (b.st) {
                REQUIRE(memcmp(a.arena, b.arena, bytes) == 0);
                free(b.arena);
            }
            b.arena = aligned_copy(a.arena, bytes, 0);
            if (b.arena == NULL) break;
            REQUIRE(kvc_stream_validate(b.arena, bytes) == KVC_OK);
            b.st = (kvc_stream *)b.arena;
            break;
        }
        case 6: { /* corrupt a copy: a status or success, never a crash */
            const size_t shift = u8(&r) % 4 == 0 ? 4u * (1u + u8(&r) % 15u) : 0u;
            unsigned char *c = aligned_copy(a.arena, bytes, shift);
            if (c == NULL) break;
            unsigned char *cs = c + shift;
            const uint32_t flips = 1 + u8(&r) % 4;
            for (uint32_t i = 0; i < flips; i++) {
                const size_t at = u8(&r) % 4 ? u16(&r) % (bytes < 1024 ? bytes : 1024) : u16(&r) * 97u % bytes;
                cs[at] ^= (uint8_t)(1 + u8(&r) % 255);
            }
            (void)kvc_stream_validate(cs, bytes);
            memcpy(before, cs, bytes);
            for (size_t x = 0; x < MAXD; x++) k[x] = v[x] = 0.5f;
            if (kvc_stream_append((kvc_stream *)cs, kvc_kernels_ref(), k, v) != KVC_OK)
                REQUIRE(memcmp(before, cs, bytes) == 0);
            for (size_t x = 0; x < 3 * MAXD; x++) q[x] = 0.25f;
            (void)kvc_stream_attend((kvc_stream *)cs, NULL, q, 1, za);
            kvc_stream_stats s;
            (void)kvc_stream_get_stats((kvc_stream *)cs, &s);
            memcpy(before, cs, bytes);
            if (kvc_stream_mark((kvc_stream *)cs, u8(&r), 1) != KVC_OK) REQUIRE(memcmp(before, cs, bytes) == 0);
            free(c);
            break;
        }
        default: { /* invalid calls: a status, nothing changed */
            memcpy(before, a.arena, bytes);
            for (size_t x = 0; x < MAXD; x++) k[x] = v[x] = 1.0f;
            REQUIRE(kvc_stream_append(a.st, NULL, NULL, v) == KVC_E_ARG);
            REQUIRE(kvc_stream_append(a.st, NULL, k, NULL) == KVC_E_ARG);
            REQUIRE(kvc_stream_append(NULL, NULL, k, v) == KVC_E_STATE);
            REQUIRE(kvc_stream_attend(a.st, NULL, q, 0, za) == KVC_E_ARG);
            REQUIRE(kvc_stream_attend(a.st, NULL, q, KVC_MAX_QUERY_HEADS + 1, za) == KVC_E_ARG);
            REQUIRE(kvc_stream_attend(a.st, NULL, NULL, 1, za) == KVC_E_ARG);
            REQUIRE(kvc_stream_view(a.st, NULL) == KVC_E_ARG);
            REQUIRE(kvc_stream_get_stats(a.st, NULL) == KVC_E_ARG);
            double w8[8];
            REQUIRE(kvc_stream_attend_batch(a.st, NULL, q, 0, 1, za, NULL, w8, sizeof w8) == KVC_E_ARG);
            REQUIRE(kvc_stream_attend_batch(a.st, NULL, q, 1, 1, za, NULL, NULL, 0) == KVC_E_ARG);
            REQUIRE(kvc_stream_observe(a.st, NULL, NULL, 0) == KVC_E_ARG);
            REQUIRE(kvc_stream_prefill_queries(a.st, NULL, NULL, 1) == KVC_E_ARG);
            REQUIRE(kvc_stream_mark(a.st, 0, 2) == KVC_E_ARG);
            const kvc_status future = kvc_stream_mark(a.st, (uint64_t)appended + 1u, 1);
            REQUIRE(future == KVC_E_ARG || future == KVC_E_UNSUPPORTED);
            REQUIRE(kvc_stream_mark(NULL, 0, 1) == KVC_E_STATE);
            REQUIRE(kvc_stream_prefill(NULL, NULL, k, d, v, dv, 1, NULL, 0) == KVC_E_STATE);
            REQUIRE(kvc_stream_prefill(a.st, NULL, k, d, v, dv, 0, NULL, 0) == KVC_E_ARG);
            REQUIRE(kvc_stream_prefill(a.st, NULL, NULL, d, v, dv, 1, NULL, 0) == KVC_E_ARG);
            REQUIRE(kvc_stream_prefill(a.st, NULL, k, d - 1, v, dv, 1, NULL, 0) == KVC_E_ARG);
            REQUIRE(memcmp(before, a.arena, bytes) == 0);
            break;
        }
        }
    }
    if (b.st) REQUIRE(memcmp(a.arena, b.arena, bytes) == 0);
    free(before), free(a.arena), free(b.arena);
    return 0;
}
