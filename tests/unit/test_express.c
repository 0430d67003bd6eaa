/* Thinformer Express: kernel halving, the streaming cache's invariants
 * (docs/express.md section 8.2), exactness, and the offline twin. */
#include <math.h>
#include <stdlib.h>

#include "shared/kernel_halving.h"
#include "kvc/kvc.h"
#include "kvc_oracle/kvc_bounds.h"
#include "kvc_oracle/kvc_oracle.h"
#include "kvc_oracle/kvc_suite.h"
#include "kvc_slope_util.h"
#include "kvc_stats.h"
#include "kvc_test.h"
#include "kvc_testutil.h"
#include "internal/kvc_internal.h"

/* f32 rows read through the reference row kernels. */
static kvc_rows f32_rows(const float *x, size_t dim)
{
    return kvc_rows_at(x, 0, dim, KVC_DTYPE_F32, kvc_kernels_ref());
}

enum { TAG_C2 = 1, TAG_HALVE = 2, TAG_SUB = 3 }; /* as in core/src/methods/express.c */

static kvc_kh_io kh_io(const float *k, const float *v, size_t d, size_t dv, size_t S, double L, uint64_t key,
                       double *scratch, uint8_t *keep)
{
    kvc_kh_io io = {f32_rows(k, d), f32_rows(v, dv), d, dv, 0, S, 1.0 / sqrt((double)d), 1, L, key, scratch, keep};
    return io;
}

/* Exactly one point per pair; with symmetrization each point survives with
 * probability 1/2: survival counts over 4000 keyed calls, two-sided binomial
 * tests, Bonferroni over 64 points at a total false-alarm rate of 1e-4. */
static int kh_one_per_pair_and_half(void)
{
    const size_t S = 64, d = 8, dv = 8, reps = 4000;
    printf("data seed 601, keys 0..%zu\n", reps - 1);
    kvc_rng r;
    kvc_rng_seed(&r, 601);
    float *k = tu_normal(&r, S, d, 1.0), *v = tu_normal(&r, S, dv, 1.0);
    double *scratch = malloc(kvc_kh_scratch_doubles(d, S) * sizeof(double)), count[64] = {0};
    uint8_t keep[64];
    for (size_t rep = 0; rep < reps; rep++) {
        kvc_kh_io io = kh_io(k, v, d, dv, S, 1.0, kvc_kh_key(9, 7, 0, 0, 0, rep), scratch, keep);
        kvc_kh_select(&io);
        for (size_t i = 0; i < S / 2; i++) CHECK(keep[2 * i] + keep[2 * i + 1] == 1);
        for (size_t i = 0; i < S; i++) count[i] += keep[i];
    }
    double worst = 0;
    for (size_t i = 0; i < S; i++) {
        double z = (count[i] - reps / 2.0) / sqrt(reps / 4.0);
        if (fabs(z) > worst) worst = fabs(z);
    }
    double p = kvc_normal_2sided(worst) * S;
    if (p > 1) p = 1;
    printf("largest |z| %.2f, Bonferroni p = %.4f (fail below 1e-4)\n", worst, p);
    CHECK(p >= 1e-4);
    free(k), free(v), free(scratch);
    return 0;
}

/* Decisions do not change when the kernel is scaled by a constant: values
 * times 3 scale (<v,v'> + B^2) by 9. */
static int kh_scale_invariant(void)
{
    const size_t S = 128, d = 8, dv = 8;
    kvc_rng r;
    kvc_rng_seed(&r, 602);
    printf("seed 602\n");
    float *k = tu_normal(&r, S, d, 1.0), *v = tu_normal(&r, S, dv, 1.0), *v3 = malloc(S * dv * sizeof(float));
    for (size_t i = 0; i < S * dv; i++) v3[i] = 3.0f * v[i];
    double *scratch = malloc(kvc_kh_scratch_doubles(d, S) * sizeof(double));
    uint8_t a[128], b[128];
    int same = 1;
    for (uint64_t key = 0; key < 50; key++) {
        kvc_kh_io io = kh_io(k, v, d, dv, S, 1.0, key, scratch, a);
        kvc_kh_select(&io);
        io = kh_io(k, v3, d, dv, S, 1.0, key, scratch, b);
        kvc_kh_select(&io);
        same &= memcmp(a, b, S) == 0;
    }
    CHECK(same);
    free(k), free(v), free(v3), free(scratch);
    return 0;
}

/* MMD^2 in k_attn between the full set and its halving, eta^T K eta / S^2,
 * against random halving, for S = 256 and 1024 under both threshold settings
 * (theory L for round 1, constant L = 1). Asserted: the default (constant)
 * setting beats random halving at both sizes; the ratios are printed. */
static double mmd2(const float *k, const float *v, size_t d, size_t dv, size_t S, const uint8_t *keep)
{
    double beta = 1.0 / sqrt((double)d), B = 0, sum = 0;
    for (size_t i = 0; i < S * dv; i++)
        if (fabs(v[i]) > B) B = fabs(v[i]);
    for (size_t i = 0; i < S; i++)
        for (size_t j = 0; j < S; j++) {
            double kk = 0, vv = 0;
            for (size_t c = 0; c < d; c++) kk += (double)k[i * d + c] * k[j * d + c];
            for (size_t c = 0; c < dv; c++) vv += (double)v[i * dv + c] * v[j * dv + c];
            sum += (keep[i] ? 1 : -1) * (keep[j] ? 1 : -1) * exp(beta * kk) * (vv + B * B);
        }
    return sum / ((double)S * S);
}

static int kh_beats_random_halving(void)
{
    const size_t d = 8, dv = 8, sizes[2] = {256, 1024};
    printf("seed 603 (clustered keys, values with a mean)\n");
    for (int si = 0; si < 2; si++) {
        const size_t S = sizes[si];
        kvc_rng r;
        kvc_rng_seed(&r, 603);
        float *k = malloc(S * d * sizeof(float)), *v = malloc(S * dv * sizeof(float));
        for (size_t i = 0; i < S; i++) {
            for (size_t c = 0; c < d; c++) k[i * d + c] = (float)(0.4 * kvc_rng_normal(&r) + (c == i % 4 ? 2.0 : 0.0));
            for (size_t c = 0; c < dv; c++) v[i * dv + c] = (float)(kvc_rng_normal(&r) + 0.5);
        }
        double *scratch = malloc(kvc_kh_scratch_doubles(d, S) * sizeof(double));
        uint8_t *keep = malloc(S);
        double m_theory = 0, m_const = 0, m_rand = 0;
        const int reps = S > 256 ? 3 : 10;
        for (int rep = 0; rep < reps; rep++) {
            kvc_kh_io io =
                kh_io(k, v, d, dv, S, kvc_kh_theory_L(0.5, 1, 4, S), kvc_kh_key(1, 9, 0, 0, 0, rep), scratch, keep);
            kvc_kh_select(&io);
            m_theory += mmd2(k, v, d, dv, S, keep) / reps;
            io = kh_io(k, v, d, dv, S, 1.0, kvc_kh_key(1, 9, 0, 0, 0, rep), scratch, keep);
            kvc_kh_select(&io);
            m_const += mmd2(k, v, d, dv, S, keep) / reps;
            for (size_t i = 0; i < S / 2; i++) {
                int first = kvc_rng_unit(&r) < 0.5;
                keep[2 * i] = (uint8_t)first, keep[2 * i + 1] = (uint8_t)!first;
            }
            m_rand += mmd2(k, v, d, dv, S, keep) / reps;
        }
        printf("S=%zu: MMD^2 theory-L %.4g, L=1 %.4g, random %.4g; ratios to random %.3f and %.3f\n", S, m_theory,
               m_const, m_rand, m_theory / m_rand, m_const / m_rand);
        CHECK(m_const < m_rand);
        free(k), free(v), free(scratch), free(keep);
    }
    return 0;
}

static kvc_stream_config bare(uint32_t d, uint32_t s, uint32_t c, uint64_t seed)
{
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_EXPRESS, d, d, 1, seed);
    cfg.n_sink = 0, cfg.n_window = 0;
    cfg.params.express.s = s, cfg.params.express.c = c;
    cfg.budget = 6 * s + 1;
    return cfg;
}

/* Section 8.2 checks 2 and 3 after every update, and the worst case reached:
 * |C| = (1+j) s, exposed points <= 6s - 2s/k - 1, every Compress2 level below
 * its group size, weights summing to n exactly while t <= c. */
static int express_invariants(void)
{
    const uint32_t cases[4][2] = {{8, 8}, {16, 16}, {16, 4}, {32, 8}};
    const uint32_t expect_max[4] = {45, 93, 87, 183};
    printf("data seed 604\n");
    for (int ci = 0; ci < 4; ci++) {
        const uint32_t s = cases[ci][0], c = cases[ci][1], d = 4, n = 64u * s + 7;
        kvc_rng r;
        kvc_rng_seed(&r, 604);
        kvc_stream_config cfg = bare(d, s, c, 5);
        kvc_stream *st = tu_stream(&cfg);
        CHECK(st != NULL);
        uint32_t maxc = 0;
        for (uint32_t i = 0; i < n; i++) {
            float k[4], v[4];
            for (int a = 0; a < 4; a++) k[a] = (float)kvc_rng_normal(&r), v[a] = (float)kvc_rng_normal(&r);
            CHECK(kvc_stream_append(st, NULL, k, v) == KVC_OK);
            if (i == 0) continue;
            kvc_express_state_info x;
            CHECK(kvc_express_info(st, &x) == KVC_OK);
            CHECK(x.updates == i);
            /* |C| = (1+j)s, plus, in round 0 (k = 1), the current block's raw
               points, which go straight into C with C's weight (t = 1) */
            if (x.updates > s && x.h > 0)
                CHECK_MSG(x.c_count == (1 + x.j) * s, "|C| %u, j %u at %u", x.c_count, x.j, i);
            if (x.updates > s && x.h == 0) CHECK(x.c_count >= (1 + x.j) * s && x.c_count < (2 + x.j) * s);
            uint32_t exposed = x.c_count;
            for (uint32_t l = 0; l < x.h; l++) {
                CHECK(x.level_count[l] < (4u * s / x.k) << l);
                exposed += x.level_count[l];
            }
            CHECK(exposed <= 6 * s - 2 * s / x.k - 1);
            if (exposed > maxc) maxc = exposed;
            if (x.t <= c)
                CHECK_MSG(x.weight_sum == (double)x.updates, "weights %.17g vs n %llu", x.weight_sum,
                          (unsigned long long)x.updates);
        }
        printf("s=%u c=%u: largest exposed cache %u (6s - 2s/c - 1 = %u)\n", s, c, maxc, expect_max[ci]);
        CHECK(maxc == expect_max[ci]);
        free(st);
    }
    return 0;
}

/* Under the wrapper, the first 4s + n_sink + n_window queries are exact
 * (1e-6 relative, the float-storage rounding of every method). */
static int express_first_queries_exact(void)
{
    const uint32_t d = 8, s = 16, sink = 4, window = 4, n = 4 * s + sink + window;
    printf("seed 605\n");
    kvc_rng r;
    kvc_rng_seed(&r, 605);
    float *q = tu_normal(&r, n + 20, d, 1.0), *k = tu_normal(&r, n + 20, d, 1.0), *v = tu_normal(&r, n + 20, d, 1.0);
    for (uint32_t i = 0; i < (n + 20) * d; i++) v[i] += 0.5f;
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_EXPRESS, d, d, 200, 3);
    cfg.n_sink = sink, cfg.n_window = window, cfg.params.express.s = s;
    kvc_stream *st = tu_stream(&cfg);
    CHECK(st != NULL);
    float z[8];
    double ex[8], worst = 0, after = 0;
    for (uint32_t j = 0; j < n + 20; j++) {
        CHECK(kvc_stream_append(st, NULL, k + j * d, v + j * d) == KVC_OK);
        CHECK(kvc_stream_attend(st, NULL, q + j * d, 1, z) == KVC_OK);
        kvc_exact_attention_f64(q + j * d, k, v, j + 1, d, d, 1.0 / sqrt((double)d), ex, NULL);
        double e = 0, a = 0;
        for (uint32_t c = 0; c < d; c++) e += (z[c] - ex[c]) * (z[c] - ex[c]), a += ex[c] * ex[c];
        if (j < n && sqrt(e / a) > worst) worst = sqrt(e / a);
        if (j >= n && sqrt(e / a) > after) after = sqrt(e / a);
    }
    printf("first %u queries: max relative error %.3e; later ones up to %.3e\n", n, worst, after);
    CHECK(worst <= 1e-6);
    CHECK(after > 1e-6); /* compression really starts after them */
    free(q), free(k), free(v), free(st);
    return 0;
}

/* ---- Offline-Express (docs/express.md section 4, Alg. 9), written independently
 * here over token ids, with the same keyed draws ---- */
typedef struct oe_ctx {
    const float *K, *V;
    size_t d;
    uint32_t s, c;
    uint64_t seed;
    float *kb, *vb; /* gather buffers */
    double *scratch;
    uint8_t *keep;
} oe_ctx;

/* Halve a list of token ids with the given key; returns the new length. */
static size_t oe_halve(oe_ctx *o, uint32_t *ids, size_t n, double L, uint64_t key)
{
    for (size_t i = 0; i < n; i++) {
        memcpy(o->kb + i * o->d, o->K + (size_t)ids[i] * o->d, o->d * sizeof(float));
        memcpy(o->vb + i * o->d, o->V + (size_t)ids[i] * o->d, o->d * sizeof(float));
    }
    kvc_kh_io io = {f32_rows(o->kb, o->d),
                    f32_rows(o->vb, o->d),
                    o->d,
                    o->d,
                    0,
                    n,
                    1.0 / sqrt((double)o->d),
                    1,
                    L,
                    key,
                    o->scratch,
                    o->keep};
    kvc_kh_select(&io);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (o->keep[i]) ids[m++] = ids[i];
    return m;
}

/* OE over tokens [0, n); writes s ids into out; round = log4(n / s) - 1. */
static void oe(oe_ctx *o, uint32_t n, uint32_t *out)
{
    const uint32_t s = o->s;
    if (n == s) {
        for (uint32_t i = 0; i < s; i++) out[i] = i;
        return;
    }
    const uint32_t t = n / (4 * s);
    uint32_t round = 0;
    while ((4u << (2 * round)) * s < n) round++;
    uint32_t *all = malloc(4 * s * sizeof(uint32_t)), *blk = malloc((size_t)t * s * sizeof(uint32_t));
    oe(o, t * s, all); /* S0 */
    const uint32_t k = t < o->c ? t : o->c, q = t > o->c ? t / o->c : 1;
    for (uint32_t b = 1; b <= 3; b++) {
        /* Offline-Subsample: one token per stratum of q */
        uint32_t m = 0;
        for (uint32_t st = 0; st < k * s; st++) {
            uint32_t iota =
                q > 1 ? (uint32_t)(kvc_rng_at(kvc_kh_key(o->seed, TAG_SUB, round, b - 1, 0, st), 0) % q) : 0;
            blk[m++] = b * t * s + st * q + iota;
        }
        /* Offline-Compress2: halve groups of G = 4s^2/|X| until s points remain */
        for (uint32_t level = 0; m > s; level++) {
            const uint32_t G = (uint32_t)((4ull * s * s) / m);
            uint32_t out_m = 0;
            for (uint32_t g = 0; g * G < m; g++) {
                uint32_t *grp = blk + g * G;
                size_t h = oe_halve(o, grp, G, 1.0, kvc_kh_key(o->seed, TAG_C2, round, b - 1, level, g));
                memmove(blk + out_m, grp, h * sizeof(uint32_t));
                out_m += (uint32_t)h;
            }
            m = out_m;
        }
        memcpy(all + b * s, blk, s * sizeof(uint32_t));
    }
    size_t m = oe_halve(o, all, 4 * s, 1.0, kvc_kh_key(o->seed, TAG_HALVE, round, 0, 0, 0));
    m = oe_halve(o, all, m, 1.0, kvc_kh_key(o->seed, TAG_HALVE, round, 1, 0, 0));
    memcpy(out, all, s * sizeof(uint32_t));
    free(all), free(blk);
}

/* Offline-Express selects exactly the streaming cache's C at n = 4^R s, for
 * R = 1, 2, 3, with and without subsampling (c = s and c < s). The method's
 * seed key is the stream seed mixed as in kvc_rng_seed... both sides use the
 * same `seed` value passed to the method (cfg.seed). */
static int offline_equals_streaming(void)
{
    const uint32_t configs[3][2] = {{8, 8}, {8, 2}, {16, 4}};
    printf("data seed 606, method seed 11\n");
    for (int ci = 0; ci < 3; ci++) {
        const uint32_t s = configs[ci][0], c = configs[ci][1], d = 4, nmax = 64 * s;
        kvc_rng r;
        kvc_rng_seed(&r, 606);
        float *K = tu_normal(&r, nmax + 1, d, 1.0), *V = tu_normal(&r, nmax + 1, d, 1.0);
        oe_ctx o = {K,
                    V,
                    d,
                    s,
                    c,
                    11,
                    malloc(4 * (size_t)s * 16 * d * sizeof(float)),
                    malloc(4 * (size_t)s * 16 * d * sizeof(float)),
                    malloc(kvc_kh_scratch_doubles(d, 64 * s) * sizeof(double)),
                    malloc(64 * s)};
        kvc_stream_config cfg = bare(d, s, c, 11);
        kvc_stream *st = tu_stream(&cfg);
        uint32_t R_done = 0;
        for (uint32_t i = 0; i <= nmax; i++) {
            CHECK(kvc_stream_append(st, NULL, K + (size_t)i * d, V + (size_t)i * d) == KVC_OK);
            const uint32_t n = i; /* tokens that entered Express (the last one is pending) */
            if (n == 4 * s || n == 16 * s || n == 64 * s) {
                kvc_express_state_info x;
                kvc_express_info(st, &x);
                uint32_t *off = malloc(s * sizeof(uint32_t));
                oe(&o, n, off);
                CHECK(x.c_count == s);
                CHECK_MSG(memcmp(off, x.c_tokens, s * sizeof(uint32_t)) == 0, "s=%u c=%u n=%u: sets differ", s, c, n);
                /* and the library's Offline-Express gives the same sets */
                size_t sb = kvc_express_offline_scratch_bytes(&cfg, n);
                CHECK(sb > 0);
                double *scr = malloc(sb);
                uint32_t *lib = malloc(s * sizeof(uint32_t));
                CHECK(kvc_express_offline(&cfg, K, V, n, scr, sb, lib) == KVC_OK);
                CHECK(memcmp(lib, x.c_tokens, s * sizeof(uint32_t)) == 0);
                CHECK(kvc_express_offline(&cfg, K, V, n + 1, scr, sb, lib) == KVC_E_ARG);
                CHECK(kvc_express_offline(&cfg, K, V, n, scr, sb - 1, lib) == KVC_E_ARENA);
                free(scr), free(lib);
                free(off);
                R_done++;
            }
        }
        printf("s=%u c=%u: offline (test's and library's) and streaming select the same C at n = 4s, 16s, 64s\n", s, c);
        CHECK(R_done == 3);
        free(K), free(V), free(o.kb), free(o.vb), free(o.scratch), free(o.keep), free(st);
    }
    return 0;
}

/* express-prefill: s sized for the known prompt (never smaller than the
 * streaming s at the same budget), the same states as streaming Express with
 * that s (so, at n = 4^R s, the Offline-Express sets), and the exact tail
 * asked for (express-tail exact) after the prompt refuses when full with the
 * arena unchanged. */
static int express_prefill_sizes_and_tail(void)
{
    const uint32_t d = 4, prompt = 1000;
    printf("data seed 607\n");
    kvc_rng r;
    kvc_rng_seed(&r, 607);
    float *k = tu_normal(&r, 2000, d, 1.0), *v = tu_normal(&r, 2000, d, 1.0);
    kvc_stream_config pc = kvc_stream_config_default(KVC_METHOD_EXPRESS_PREFILL, d, d, 300, 4);
    pc.n_sink = 4, pc.n_window = 4, pc.prefix_len = prompt;
    CHECK(kvc_stream_config_set(&pc, "express-tail", "exact") == KVC_OK);
    kvc_stream_config sc = pc;
    sc.method = KVC_METHOD_EXPRESS;
    kvc_stream_plan pp, sp;
    CHECK(kvc_stream_plan_make(&pc, &pp) == KVC_OK && kvc_stream_plan_make(&sc, &sp) == KVC_OK);
    printf("budget 300, prompt %u: express s=%u, express-prefill s=%u with a tail of %u\n", prompt, sp.xp.s, pp.xp.s,
           pp.tail_capacity);
    CHECK(pp.xp.s >= sp.xp.s);
    /* same s: identical caches over the prompt */
    sc.params.express.s = pp.xp.s;
    sc.budget = 6 * pp.xp.s + 10;
    kvc_stream *a = tu_stream(&pc), *b = tu_stream(&sc);
    CHECK(a != NULL && b != NULL);
    const kvc_stream_plan *ap = kvc_stream_get_plan(a);
    for (uint32_t j = 0; j < prompt; j++) {
        CHECK(kvc_stream_append(a, NULL, k + j * d, v + j * d) == KVC_OK);
        CHECK(kvc_stream_append(b, NULL, k + j * d, v + j * d) == KVC_OK);
        kvc_express_state_info xa, xb;
        kvc_express_info(a, &xa);
        kvc_express_info(b, &xb);
        CHECK(xa.c_count == xb.c_count && memcmp(xa.c_tokens, xb.c_tokens, xa.c_count * sizeof(uint32_t)) == 0);
        kvc_stream_stats st;
        kvc_stream_get_stats(a, &st);
        CHECK(st.elements <= ap->worst_elements);
    }
    uint32_t j = prompt;
    for (; j < prompt + ap->tail_capacity; j++) CHECK(kvc_stream_append(a, NULL, k + j * d, v + j * d) == KVC_OK);
    size_t bytes = kvc_stream_arena_bytes(&pc);
    unsigned char *copy = malloc(bytes);
    memcpy(copy, a, bytes);
    CHECK(kvc_stream_append(a, NULL, k + j * d, v + j * d) == KVC_E_CAPACITY);
    CHECK(memcmp(copy, a, bytes) == 0);
    free(copy), free(a), free(b), free(k), free(v);
    return 0;
}

/* express-prefill's default tail is a uniform reservoir (Algorithm R with a
 * counter-based draw): after T tail tokens into C slots every tail token is
 * kept with probability C/T, and the tail segment weighs T/C. Each token's
 * value carries its index; inclusion counts over 2,000 seeds against the
 * uniform expectation, chi-square (false alarm 1e-4). */
static int express_prefill_tail_is_a_uniform_reservoir(void)
{
    const uint32_t d = 4, prompt = 64, tail = 100, seeds = 2000;
    double counts[100] = {0}, ex[100];
    printf("seeds 1..%u\n", seeds);
    float k[4], v[4];
    uint32_t cap = 0;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        kvc_stream_config c = kvc_stream_config_default(KVC_METHOD_EXPRESS_PREFILL, d, d, 48, seed);
        c.n_sink = 0, c.n_window = 0, c.prefix_len = prompt;
        kvc_stream *st = tu_stream(&c);
        CHECK(st != NULL);
        const kvc_stream_plan *p = kvc_stream_get_plan(st);
        cap = p->tail_capacity;
        CHECK(cap >= 1 && cap < tail);
        /* the method takes prompt - 1 prompt tokens (the current one is exact),
           so its tail starts at token prompt - 1; one more token stays current */
        const uint32_t first = p->prefix_method_tokens, n = first + tail + 1;
        for (uint32_t j = 0; j < n; j++) {
            for (uint32_t i = 0; i < d; i++) k[i] = (float)((j * 7 + i * 3) % 11) / 11.0f, v[i] = 0.0f;
            v[0] = (float)j;
            CHECK(kvc_stream_append(st, NULL, k, v) == KVC_OK);
        }
        kvc_view view;
        CHECK(kvc_stream_view(st, &view) == KVC_OK);
        uint32_t kept = 0;
        double tail_scale = 0.0;
        for (size_t sgi = 0; sgi < view.n_seg; sgi++) {
            const kvc_segment *sg = &view.seg[sgi];
            uint32_t here = 0;
            for (size_t r = 0; r < sg->n; r++) {
                const float j = sg->values[r * d];
                if (j >= (float)first && j < (float)(first + tail)) counts[(uint32_t)j - first] += 1, here++;
            }
            if (here) kept += here, tail_scale = sg->scale;
        }
        CHECK(kept == cap);
        CHECK(fabs(tail_scale - (double)tail / cap) < 1e-12);
        free(st);
    }
    for (uint32_t i = 0; i < tail; i++) ex[i] = (double)seeds * cap / tail;
    const double stat = kvc_chi2_stat(counts, ex, (int)tail), pv = kvc_chi2_sf(stat, (double)tail - 1);
    printf("tail capacity %u of %u tail tokens: inclusion chi2 = %.2f (99 dof), p = %.4f (fail below 1e-4)\n", cap,
           tail, stat, pv);
    CHECK(pv >= 1e-4);
    return 0;
}

/* Quality trend (section 8.2 check 6) on a fixed stream: log-log slopes of
 * the normalised error against memory for express and for uniform sampling
 * of the same memory, with 99.8% intervals. Asserted: Express's error falls
 * with memory; the slopes are printed next to each other. */
static int error_vs_memory_next_to_uniform(void)
{
    kvc_suite_stream st;
    CHECK(kvc_suite_stream_make(&st, 2048, 16, 6, 0.02, 12) == 0);
    printf("suite stream seed 12, n=2048, d=16; method seeds 1..16, 16 positions\n");
    const uint32_t budgets[4] = {160, 288, 544, 1056};
    const kvc_method ms[2] = {KVC_METHOD_UNIFORM, KVC_METHOD_EXPRESS};
    double hi_express = 0;
    for (int i = 0; i < 2; i++) {
        kvc_stream_config cfg = kvc_stream_config_default(ms[i], 16, 16, 160, 0);
        cfg.n_sink = 16, cfg.n_window = 16;
        double lo, hi;
        CHECK(tu_slope_line(&st.tr, &cfg, budgets, &lo, &hi) == 0);
        if (ms[i] == KVC_METHOD_EXPRESS) hi_express = hi;
    }
    CHECK(hi_express < 0.0);
    kvc_suite_stream_free(&st);
    return 0;
}

static const kvc_test_case cases[] = {
    {"error_vs_memory_next_to_uniform", error_vs_memory_next_to_uniform},
    {"express_prefill_sizes_and_tail", express_prefill_sizes_and_tail},
    {"express_prefill_tail_is_a_uniform_reservoir", express_prefill_tail_is_a_uniform_reservoir},
    {"kh_one_per_pair_and_half", kh_one_per_pair_and_half},
    {"kh_scale_invariant", kh_scale_invariant},
    {"kh_beats_random_halving", kh_beats_random_halving},
    {"express_invariants", express_invariants},
    {"express_first_queries_exact", express_first_queries_exact},
    {"offline_equals_streaming", offline_equals_streaming},
};
KVC_TEST_MAIN(cases)
