/* Every built-in kernel table against the reference (ggml's test-backend-ops
 * idea): for each table this CPU can run other than "ref", random and
 * adversarial views (d, dv in 1..256 with odd sizes, n from 0 to 10^5,
 * weights 0 and huge, score spreads up to 10^3, f32/f16/int8 rows, several
 * segments with separate numerator and denominator sets, causal batches) go
 * through both tables' batched and one-position attends and row kernels.
 *
 * Tolerance, derived per query and output channel from the data (u = 2^-24,
 * the backend sums in f32 where the reference sums in double):
 *   every score may move by delta_j <= beta sum_c |q_c k_jc| (d + 4) u
 *        + |ln w_j| u + 2 (|s_j| + |M|) u + 4e-7 (the vector exp),
 *   so with A = sum_N a_j e^{s_j - M} |v_j| and D = sum_D b_j e^{s_j - M}
 *   |z' - z| <= (e^delta - 1)(e^delta + 1) A / D          (scores)
 *             + 4 (n + 16) u A / D + 4 u |z|               (the f32 sums)
 * (Higham's gamma_n for the numerator and the denominator sums, the rescales
 * and the int8 scale products). Exits 77 when no table but the reference
 * runs here. Seeds are printed; the test is deterministic. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_attend_bound.h"
#include "kvc_testutil.h"
#include "ref/rows_typed.h"
#include "shared/rows.h"
#include "internal/kvc_internal.h"

typedef struct view_data {
    kvc_view v;
    unsigned char *rows[KVC_VIEW_MAX_SEGMENTS][2];
    float *w[KVC_VIEW_MAX_SEGMENTS];
} view_data;

static void free_view(view_data *vd)
{
    for (size_t s = 0; s < KVC_VIEW_MAX_SEGMENTS; s++) free(vd->rows[s][0]), free(vd->rows[s][1]), free(vd->w[s]);
}

/* A random view: n_seg segments of storage type t (the first one f32, like a stream's current token). */
static void make_view(kvc_rng *r, view_data *vd, size_t d, size_t dv, size_t n_total, size_t n_seg, unsigned t,
                      double key_scale, int weights, int split_sets)
{
    memset(vd, 0, sizeof *vd);
    vd->v.d = d, vd->v.dv = dv, vd->v.beta = (float)(1.0 / sqrt((double)d)), vd->v.n_seg = n_seg;
    float *x = malloc(KVC_KIVI_BLOCK * 256 * sizeof(float));
    for (size_t s = 0; s < n_seg; s++) {
        kvc_segment *g = &vd->v.seg[s];
        const size_t n = s + 1 == n_seg ? n_total - (n_total / n_seg) * (n_seg - 1) : n_total / n_seg;
        const unsigned ts = s == 0 ? KVC_DTYPE_F32 : t, vt = kvc_segment_value_dtype(ts);
        const int kivi = ts == KVC_DTYPE_KIVI4;
        const size_t kb = kivi ? 0u : (size_t)kvc_row_bytes(ts, d), vb = (size_t)kvc_row_bytes(vt, dv);
        /* KIVI4: the segment may start inside its first block (a cache's
           oldest block, partly evicted): `first` tokens before it */
        const size_t first = kivi ? kvc_rng_below(r, KVC_KIVI_BLOCK) : 0u, nk = first + n;
        vd->rows[s][0] = malloc((kivi ? (size_t)kvc_kivi4_key_bytes(nk, d) : n * kb) + 1);
        vd->rows[s][1] = malloc(n * vb + 1);
        for (size_t i = 0; i < nk; i++) {
            /* KIVI4 keys: a block's tokens gathered, stored when it is full or the segment ends */
            float *k = kivi ? x + (i % KVC_KIVI_BLOCK) * d : x;
            for (size_t c = 0; c < d; c++) k[c] = (float)(kvc_rng_normal(r) * key_scale);
            if (!kivi)
                kvc_kernels_ref()->rows[ts].store(vd->rows[s][0] + i * kb, k, d);
            else if (i % KVC_KIVI_BLOCK == KVC_KIVI_BLOCK - 1u || i + 1u == nk)
                kvc_kivi4_key_block_store(vd->rows[s][0] + i / KVC_KIVI_BLOCK * KVC_KIVI4_KEY_BLOCK_BYTES(d), x,
                                          i % KVC_KIVI_BLOCK + 1u, d);
            if (i < first) continue;
            float y[256];
            for (size_t c = 0; c < dv; c++) y[c] = (float)kvc_rng_normal(r);
            kvc_kernels_ref()->rows[vt].store(vd->rows[s][1] + (i - first) * vb, y, dv);
        }
        g->first = first;
        g->n = n, g->dtype = ts, g->scale = weights ? 0.5 + 3.0 * kvc_rng_unit(r) : 1.0;
        g->role = split_sets ? (s % 3 == 1 ? KVC_SET_NUM : s % 3 == 2 ? KVC_SET_DEN : KVC_SET_BOTH) : KVC_SET_BOTH;
        if (ts == KVC_DTYPE_F32)
            g->keys = (const float *)(void *)vd->rows[s][0], g->values = (const float *)(void *)vd->rows[s][1];
        else
            g->keys_q = vd->rows[s][0], g->values_q = vd->rows[s][1];
        if (weights && n) {
            vd->w[s] = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) {
                const double u = kvc_rng_unit(r);
                vd->w[s][i] = u < 0.1 ? 0.0f : u < 0.2 ? 1e30f : (float)(1.0 + 1000.0 * kvc_rng_unit(r));
            }
            g->weights = vd->w[s];
        }
    }
    free(x);
}

/* Cases per storage type, printed with each table's summary. */
static size_t g_type_cases[KVC_DTYPE_COUNT];
/* The largest error / bound per storage type (a bound far above every error
 * would say little: printed, so that a loose one shows). */
static double g_type_worst[KVC_DTYPE_COUNT];

static int compare_table(const kvc_kernels *t, kvc_rng *r, int only_i4, size_t *cases, double *worst_ratio)
{
    static const size_t dims[] = {1, 3, 7, 8, 16, 33, 64, 100, 128, 255, 256};
    static const size_t ns[] = {0, 1, 5, 8, 9, 100, 1000, 20000, 100000};
    for (size_t trial = 0; trial < 60; trial++) {
        size_t d = dims[kvc_rng_below(r, 11)];
        size_t dv = dims[kvc_rng_below(r, 11)];
        size_t n = ns[kvc_rng_below(r, 9)];
        if (n * (d + dv) > 4000000) n = 4000000 / (d + dv); /* keep each case fast */
        /* any storage type the reference attend reads (the registry of types
           and the reference table's capabilities, not a list kept here): the
           streams' types and KIVI4's blocks */
        unsigned types[KVC_DTYPE_COUNT], n_types = 0;
        for (unsigned ty = 0; ty < KVC_DTYPE_COUNT; ty++)
            if (kvc_kernels_support(kvc_kernels_ref(), ty)) types[n_types++] = ty;
        const unsigned dt = only_i4 ? (unsigned)KVC_DTYPE_I4 : types[trial % n_types]; /* every type alike */
        /* only_i4: int4 with d a multiple of 64, where a table with
           KVC_CAP_Q8_INT4 scores on integers (its bound has the extra term) */
        if (only_i4) d = (size_t)64 << kvc_rng_below(r, 3);
        /* and every other one dv too, where KVC_CAP_Q8_PV_INT4 accumulates the values on integers */
        if (only_i4 && trial % 2 == 0) dv = (size_t)64 << kvc_rng_below(r, 3);
        const size_t n_seg = 1 + kvc_rng_below(r, 4);
        const double spread = kvc_rng_unit(r) < 0.2 ? 30.0 : 1.0; /* scores up to ~10^3 apart */
        const int weights = kvc_rng_unit(r) < 0.5, split = kvc_rng_unit(r) < 0.3 && !only_i4;
        /* (only_i4 keeps N and D one set: its cases test the integer scores;
           split views are the main cases' concern) */
        view_data vd;
        make_view(r, &vd, d, dv, n, n_seg, dt, spread, weights, split);
        const size_t n_pos = 1 + kvc_rng_below(r, 3), n_q = 1 + kvc_rng_below(r, 4);
        const size_t causal = n_pos > 1 && vd.v.seg[0].n >= n_pos ? 1 : 0;
        float *q = tu_normal(r, n_pos * n_q, d, 1.0);
        float *za = malloc(n_pos * n_q * dv * sizeof(float)), *zb = malloc(n_pos * n_q * dv * sizeof(float));
        const size_t wb = (size_t)kvc_attend_work_bytes(n_pos, n_q, dv);
        double *work = malloc(wb);
        /* half the cases also ask for the attention mass of every entry */
        const int want_mass = kvc_rng_unit(r) < 0.5;
        double *ma = want_mass ? calloc(n + 1, sizeof(double)) : NULL,
               *mb = want_mass ? calloc(n + 1, sizeof(double)) : NULL;
        kvc_attend_batch ba = {q, n_pos, n_q, causal, za, ma, NULL}, bb = {q, n_pos, n_q, causal, zb, mb, NULL};
        const kvc_status ra = kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &vd.v, &ba, work, wb);
        const kvc_status rb = t->attend_batch(t, &vd.v, &bb, work, wb);
        CHECK_MSG(ra == rb, "%s: status %d vs ref %d", t->name, (int)rb, (int)ra);
        if (ra == KVC_OK) {
            double bounds[256];
            for (size_t p = 0; p < n_pos; p++)
                for (size_t h = 0; h < n_q; h++) {
                    bounds_of(&vd.v, q + (p * n_q + h) * d, za + (p * n_q + h) * dv, causal ? n_pos - 1 - p : 0, causal,
                              t->caps, bounds);
                    for (size_t c = 0; c < dv; c++) {
                        const size_t o = (p * n_q + h) * dv + c;
                        const double bd = bounds[c];
                        const double err = fabs((double)za[o] - zb[o]);
                        if (isfinite(bd) && bd > 0 && err / bd > *worst_ratio) *worst_ratio = err / bd;
                        if (isfinite(bd) && bd > 0 && err / bd > g_type_worst[dt]) g_type_worst[dt] = err / bd;
                        CHECK_MSG(
                            isinf(bd) ? zb[o] == 0.0f && za[o] == 0.0f : err <= bd,
                            "%s: d %zu dv %zu n %zu dtype %u seg %zu weights %d split %d pos %zu head %zu ch %zu: "
                            "%.9g vs ref %.9g (bound %.3g)",
                            t->name, d, dv, n, dt, n_seg, weights, split, p, h, c, zb[o], za[o], bd);
                    }
                }
            if (want_mass) {
                /* each entry's share e^{x - m} / den moves by at most e^{2 delta} - 1 (score and
                   maximum, delta as in the output bound) plus the f32 denominator's rounding,
                   relative, summed over the queries: the largest factor bounds the sum */
                double factor = 0.0;
                for (size_t qi = 0; qi < n_pos * n_q; qi++) {
                    double A[256], tail[KVC_BOUND_TAIL], den, delta;
                    size_t seen;
                    softmax_sums(&vd.v, q + qi * d, causal ? n_pos - 1 - qi / n_q : 0, causal, t->caps, A, tail, &den,
                                 &delta, &seen);
                    const double f = expm1(2.0 * delta) + 4.0 * (double)(seen + 16) * U;
                    if (f > factor) factor = f;
                }
                /* a table that computes the shares in float (single) rounds a share
                   below 2^-126 in the subnormal range: at most 2^-149 absolute for its
                   exponential and 2^-149 for the division (den >= 1), per query */
                const double underflow = (double)(n_pos * n_q) * 0x1p-148;
                for (size_t e = 0; e < n; e++)
                    CHECK_MSG(fabs(ma[e] - mb[e]) <= factor * ma[e] + underflow,
                              "%s: mass of entry %zu: %.9g vs ref %.9g (d %zu n %zu dtype %u, factor %g, weights %d "
                              "causal %zu)",
                              t->name, e, mb[e], ma[e], d, n, dt, factor, weights, causal);
            }
            (*cases)++;
            g_type_cases[dt]++;
        }
        free(ma), free(mb);
        /* the row kernels the table overrides: the score dot and the double reductions of every storage type */
        for (unsigned ti = 0; ti < n_types; ti++) {
            const unsigned ty = types[ti];
            if (kvc_kernels_ref()->rows[ty].store == NULL) continue; /* KIVI4: no rows of its own (values: int4) */
            unsigned char row[4 * 256 + 8];
            float x[256];
            for (size_t c = 0; c < d; c++) x[c] = (float)kvc_rng_normal(r);
            kvc_kernels_ref()->rows[ty].store(row, x, d);
            const double a = kvc_kernels_ref()->rows[ty].dot_f32(row, q, d), b2 = t->rows[ty].dot_f32(row, q, d);
            double mag = 0.0;
            float lx[256];
            kvc_kernels_ref()->rows[ty].load(row, lx, d);
            for (size_t c = 0; c < d; c++) mag += fabs((double)lx[c] * q[c]);
            CHECK_MSG(fabs(a - b2) <= (double)(d + 4) * U * mag * 2.0, "%s dot dtype %u d %zu: %.9g vs %.9g", t->name,
                      ty, d, b2, a);
            /* the double reductions (walks, SubGen): the same terms, summed in
               another order, so |difference| <= 2 gamma_d sum |term| with
               gamma_d = d u / (1 - d u), u = 2^-53 (Higham, both sums) */
            unsigned char row2[4 * 256 + 8];
            float y[256];
            double mu[256], xd[256];
            for (size_t c = 0; c < d; c++)
                y[c] = (float)kvc_rng_normal(r), mu[c] = 0.3 * kvc_rng_normal(r), xd[c] = kvc_rng_normal(r);
            kvc_kernels_ref()->rows[ty].store(row2, y, d);
            float ly[256];
            kvc_kernels_ref()->rows[ty].load(row2, ly, d);
            const double g =
                2.0 * (double)d * 0x1p-53 / (1.0 - (double)d * 0x1p-53) * 1.01; /* 1%: the scale products */
            double m_rows = 0.0, m_mu = 0.0, m_f64 = 0.0, m_sq = 0.0;
            for (size_t c = 0; c < d; c++) {
                m_rows += fabs((double)lx[c] * ly[c]), m_mu += fabs(((double)lx[c] - mu[c]) * ((double)ly[c] - mu[c]));
                m_f64 += fabs((double)lx[c] * xd[c]), m_sq += ((double)lx[c] - y[c]) * ((double)lx[c] - y[c]);
            }
            const kvc_row_kernels *rr = &kvc_kernels_ref()->rows[ty], *rt = &t->rows[ty];
            const double e1 = fabs(rr->dot_rows(row, row2, NULL, d) - rt->dot_rows(row, row2, NULL, d));
            const double e2 = fabs(rr->dot_rows(row, row2, mu, d) - rt->dot_rows(row, row2, mu, d));
            const double e3 = fabs(rr->dot_f64(row, xd, d) - rt->dot_f64(row, xd, d));
            const double e4 = fabs(rr->sqdist_f32(row, y, d) - rt->sqdist_f32(row, y, d));
            CHECK_MSG(e1 <= g * m_rows && e2 <= g * m_mu && e3 <= g * m_f64 && e4 <= g * m_sq,
                      "%s dtype %u d %zu: double reductions off by %.3g %.3g %.3g %.3g", t->name, ty, d, e1, e2, e3,
                      e4);
        }
        free(q), free(za), free(zb), free(work);
        free_view(&vd);
    }
    return 0;
}

/* Table i against the reference (seed 31 + i); only_i4: its int4 cases
 * alone (`table_int4_<name>`: for a table whose code differs from another's
 * only in its int4 scores, as neon_dotprod's from neon's, under qemu, where
 * every case costs minutes). */
static int test_table(const kvc_kernels *t, size_t i, int only_i4)
{
    kvc_rng r;
    kvc_rng_seed(&r, 31 + i);
    printf("table %s: seed %zu\n", t->name, 31 + i);
    size_t cases = 0;
    double worst = 0.0;
    memset(g_type_cases, 0, sizeof g_type_cases);
    memset(g_type_worst, 0, sizeof g_type_worst);
    if (!only_i4 && compare_table(t, &r, 0, &cases, &worst)) return 1;
    /* and 60 int4 cases at d = 64, 128, 256 from a generator of their own
       (the cases above stay what they were) */
    kvc_rng r4;
    kvc_rng_seed(&r4, 131 + i);
    printf("table %s: int4 at d = 64..256, seed %zu\n", t->name, 131 + i);
    if (compare_table(t, &r4, 1, &cases, &worst)) return 1;
    printf("table %s: %zu batched-attend cases within the derived bound (largest error / bound %.3g); by type:",
           t->name, cases, worst);
    for (unsigned ty = 0; ty < KVC_DTYPE_COUNT; ty++)
        if (kvc_kernels_support(kvc_kernels_ref(), ty))
            printf(" %s %zu (worst %.3g)", kvc_dtype_name((kvc_dtype)ty), g_type_cases[ty], g_type_worst[ty]);
    printf("\n");
    /* every type the reference reads was compared (not only refused alike) */
    for (unsigned ty = 0; ty < KVC_DTYPE_COUNT; ty++)
        CHECK_MSG(!kvc_kernels_support(kvc_kernels_ref(), ty) || g_type_cases[ty] > 0 ||
                      (only_i4 && ty != KVC_DTYPE_I4),
                  "%s: no %s case compared", t->name, kvc_dtype_name((kvc_dtype)ty));
    return 0;
}

static int every_table_matches_reference(void)
{
    const uint32_t have = kvc_cpu_features();
    size_t tested = 0;
    for (size_t i = 0; i < kvc_kernels_count(); i++) {
        const kvc_kernels *t = kvc_kernels_at(i);
        if (strcmp(t->name, "ref") == 0) continue;
        /* an opt-in table (single precision) is never what best() picks unasked */
        const char *forced = getenv("KVC_KERNELS");
        if ((t->caps & KVC_CAP_OPT_IN) && (forced == NULL || strcmp(forced, t->name) != 0))
            CHECK_MSG(kvc_kernels_best() != t, "kvc_kernels_best() picked the opt-in table %s", t->name);
        if ((t->needs & have) != t->needs) {
            printf("table %s: not runnable on this CPU, skipped\n", t->name);
            continue;
        }
        if (test_table(t, i, 0)) return 1;
        tested++;
    }
    if (tested == 0) {
        printf("no table but the reference runs here\n");
        return KVC_TEST_SKIP;
    }
    return 0;
}

/* `table_<name>`: that one table (`table_int4_<name>`: its int4 cases), or
 * 77 where it is not built in or this CPU lacks its ISA. */
static int one_table(const char *name)
{
    const int only_i4 = strncmp(name, "int4_", 5) == 0;
    if (only_i4) name += 5;
    printf("== table_%s\n", name);
    for (size_t i = 0; i < kvc_kernels_count(); i++) {
        const kvc_kernels *t = kvc_kernels_at(i);
        if (strcmp(t->name, name) != 0) continue;
        if ((t->needs & kvc_cpu_features()) != t->needs) {
            printf("table %s: built in, but this CPU lacks its ISA: skipped\n", name);
            return KVC_TEST_SKIP;
        }
        const int rc = test_table(t, i, only_i4);
        printf("%s table_%s\n", rc ? "FAIL" : "PASS", name);
        return rc;
    }
    /* CMake says which folders it built for this target: a folder built but
       missing from the library's tables is a wiring fault, not a skip */
    const char *built = getenv("KVC_SIMD_BUILT");
    if (built) {
        char padded[256];
        snprintf(padded, sizeof padded, ",%s,", built);
        char key[64];
        snprintf(key, sizeof key, ",%s,", name);
        if (strstr(padded, key)) {
            printf("FAIL table_%s: accel/cpu_simd/%s was built, but the library has no table of that name\n", name,
                   name);
            return 1;
        }
    }
    printf("table %s: not built into this library (another architecture or KVC_SIMD=OFF): skipped\n", name);
    return KVC_TEST_SKIP;
}

#define D  ((size_t)8)
#define NQ ((size_t)2)

/* max over channels of A_c / D = sum_N a e^{s - M} |v_c| / sum_D b e^{s - M}, for query q. */
static double a_over_d(const kvc_view *v, const float *q)
{
    double A[256], tail[KVC_BOUND_TAIL], Dn, delta, worst = 0.0;
    size_t n;
    softmax_sums(v, q, 0, 0, 0u, A, tail, &Dn, &delta, &n); /* A / D only: no table's score term */
    for (size_t c = 0; c < v->dv; c++) worst = fmax(worst, Dn > 0.0 ? A[c] / Dn : 0.0);
    return worst;
}

/* Split-K: the states of n parts, merged, give kvc_stream_attend's output
 * (every method x storage type x the reference and the best table). The
 * parts regroup the same terms: |difference| <= 4 (E + 16) u A/D + 4 u |z|,
 * u = 2^-24 (the final float rounding bounds the reference's double sums
 * too), plus 1e-6 A/D on a table with a vector exp (2e-7 relative per exp,
 * taken in different places). */
static int split_k_merges_to_attend(void)
{
    const size_t n = 260;
    kvc_rng r;
    kvc_rng_seed(&r, 15);
    printf("seed 15, n %zu\n", n);
    float *k = tu_normal(&r, n, D, 1.0), *v = tu_normal(&r, n, D, 1.0), *q = tu_normal(&r, NQ, D, 1.0);
    const kvc_kernels *tables[2] = {kvc_kernels_ref(), kvc_kernels_best()};
    printf("tables: ref and %s\n", tables[1]->name);
    double worst = 0.0;
    size_t checked = 0;
    for (int ti = 0; ti < 2; ti++) {
        const kvc_kernels *kt = tables[ti];
        if (ti == 1 && kt == tables[0]) break;
        for (size_t mi = 0; mi < kvc_method_count(); mi++) {
            const kvc_method m = kvc_method_at(mi);
            for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) {
                if (!kvc_dtype_implemented((kvc_dtype)t)) continue;
                kvc_stream_config c = kvc_stream_config_default(m, D, D, m == KVC_METHOD_EXACT ? 300 : 64, 3);
                /* KIVI4 windows are whole blocks of 32: 12 held none (and is now refused), so 0 there */
                c.n_sink = 4, c.n_window = t == KVC_DTYPE_KIVI4 ? 0u : 12u, c.dtype = (kvc_dtype)t,
                c.prefix_len = (uint32_t)n;
                kvc_stream *st = tu_stream(&c);
                for (size_t j = 0; j < n; j++) CHECK(kvc_stream_append(st, kt, k + j * D, v + j * D) == KVC_OK);
                float whole[NQ * D], split[NQ * D];
                if (kvc_stream_attend(st, kt, q, NQ, whole) != KVC_OK) {
                    free(st);
                    continue; /* a collapsed estimate (KVC_E_RANGE): nothing to compare */
                }
                kvc_view view;
                CHECK(kvc_stream_view(st, &view) == KVC_OK);
                const size_t E = kvc_stream_view_entries(st), wb = kvc_stream_attend_part_work_bytes(st, NQ);
                double *work = malloc(wb);
                static const size_t parts_of[] = {1, 2, 3, 7};
                for (size_t pi = 0; pi < 4; pi++) {
                    const size_t P = parts_of[pi];
                    double *states = malloc(P * NQ * KVC_ATTEND_STATE(D) * sizeof(double));
                    const double *ptr[7];
                    for (size_t p = 0; p < P; p++) {
                        ptr[p] = states + p * NQ * KVC_ATTEND_STATE(D);
                        CHECK(kvc_stream_attend_part(st, kt, q, NQ, p, P, states + p * NQ * KVC_ATTEND_STATE(D), work,
                                                     wb) == KVC_OK);
                    }
                    CHECK(kvc_attend_merge(ptr, P, NQ, D, split) == KVC_OK);
                    for (size_t h = 0; h < NQ; h++) {
                        const double ad = a_over_d(&view, q + h * D), u = 0x1p-24;
                        for (size_t cc = 0; cc < D; cc++) {
                            const double z = whole[h * D + cc], e = fabs((double)split[h * D + cc] - z);
                            const double bound =
                                4.0 * (double)(E + 16) * u * ad + 4.0 * u * fabs(z) + (ti ? 1e-6 * ad : 0.0);
                            if (bound > 0 && e / bound > worst) worst = e / bound;
                            CHECK_MSG(e <= bound, "%s %s %s parts %zu head %zu ch %zu: %.9g vs %.9g (bound %.3g)",
                                      kt->name, kvc_method_name(m), kvc_dtype_name((kvc_dtype)t), P, h, cc,
                                      split[h * D + cc], z, bound);
                        }
                    }
                    checked++;
                    free(states);
                }
                /* bad arguments */
                CHECK(kvc_stream_attend_part(st, kt, q, NQ, 3, 3, (double *)work, work, wb) == KVC_E_ARG);
                CHECK(kvc_stream_attend_part(st, kt, q, NQ, 0, 1, (double *)work, work, wb - 8) == KVC_E_ARG);
                free(work), free(st);
            }
        }
    }
    const double *none = NULL;
    CHECK(kvc_attend_merge(&none, 1, 1, D, (float[8]){0}) == KVC_E_ARG);
    /* issue 49: a state no attend writes (a NaN or +inf maximum, a sum that is
       not finite) is refused with out untouched; it merged as "nothing seen" */
    {
        const double bad_max[4][2 + 8] = {{NAN, 1.0}, {INFINITY, 1.0}, {0.0, NAN}, {0.0, 1.0, INFINITY}};
        const double good[2 + 8] = {0.5, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
        for (size_t b = 0; b < 4; b++) {
            const double *two[2] = {good, bad_max[b]};
            float out8[8] = {7, 7, 7, 7, 7, 7, 7, 7};
            CHECK_MSG(kvc_attend_merge(two, 2, 1, 8, out8) == KVC_E_NONFINITE && out8[0] == 7.0f,
                      "a merge of state %zu (max %g, den %g) is refused, out untouched", b, bad_max[b][0],
                      bad_max[b][1]);
        }
    }
    printf("%zu (method, dtype, table, parts) cases: merged parts == one attend within the bound (largest error / "
           "bound %.3g)\n",
           checked, worst);
    free(k), free(v), free(q);
    return 0;
}

/* ---- every method on every table ---- */

/* A counting copy of the reference table: each row-kernel entry that table
 * `t` replaces counts its calls, so a run tells whether a method's updates
 * call anything whose rounding differs between the two tables. */
static size_t g_calls;
#define KVC_COUNTED(dt, name, ret, params, args)                                                                       \
    static ret counted_##name##_##dt params                                                                            \
    {                                                                                                                  \
        g_calls++;                                                                                                     \
        return kvc_kernels_ref()->rows[dt].name args;                                                                  \
    }
#define KVC_COUNTED_ALL(dt)                                                                                            \
    KVC_COUNTED(dt, dot_f32, double, (const void *r, const float *x, size_t n), (r, x, n))                             \
    KVC_COUNTED(dt, dot_f64, double, (const void *r, const double *x, size_t n), (r, x, n))                            \
    KVC_COUNTED(dt, dot_rows, double, (const void *a, const void *b, const double *mu, size_t n), (a, b, mu, n))       \
    KVC_COUNTED(dt, sqdist_f32, double, (const void *r, const float *x, size_t n), (r, x, n))                          \
    KVC_COUNTED(dt, absmax, double, (const void *r, size_t n), (r, n))                                                 \
    static void counted_store_##dt(void *r, const float *x, size_t n)                                                  \
    {                                                                                                                  \
        g_calls++, kvc_kernels_ref()->rows[dt].store(r, x, n);                                                         \
    }                                                                                                                  \
    static void counted_load_##dt(const void *r, float *x, size_t n)                                                   \
    {                                                                                                                  \
        g_calls++, kvc_kernels_ref()->rows[dt].load(r, x, n);                                                          \
    }                                                                                                                  \
    static void counted_axpy_##dt(double *a, double p, const void *r, size_t n)                                        \
    {                                                                                                                  \
        g_calls++, kvc_kernels_ref()->rows[dt].axpy(a, p, r, n);                                                       \
    }
KVC_COUNTED_ALL(0)
KVC_COUNTED_ALL(1)
KVC_COUNTED_ALL(2)
static double counted_dot(const float *a, const float *b, size_t n) { return g_calls++, kvc_k_dot_f32__ref(a, b, n); }
static double counted_sqdist(const float *a, const float *b, size_t n)
{
    return g_calls++, kvc_k_sqdist_f32__ref(a, b, n);
}
static kvc_status counted_attend_f32(const kvc_view *v, const float *q, size_t n_q, float *out)
{
    g_calls++;
    return kvc_kernels_ref()->attend_f32(v, q, n_q, out);
}
static kvc_status counted_attend_batch(const kvc_kernels *k, const kvc_view *v, const kvc_attend_batch *b, void *w,
                                       size_t wb)
{
    g_calls++;
    return kvc_kernels_ref()->attend_batch(k, v, b, w, wb);
}

#define SWAP_IF(field, counted)                                                                                        \
    if (t->field != ref->field) c->field = counted
static void counting_table(const kvc_kernels *t, kvc_kernels *c)
{
    const kvc_kernels *ref = kvc_kernels_ref();
    *c = *ref;
    SWAP_IF(attend_f32, counted_attend_f32);
    SWAP_IF(attend_batch, counted_attend_batch);
    SWAP_IF(dot_f32, counted_dot);
    SWAP_IF(sqdist_f32, counted_sqdist);
#define SWAP_ROWS(dt)                                                                                                  \
    SWAP_IF(rows[dt].store, counted_store_##dt);                                                                       \
    SWAP_IF(rows[dt].load, counted_load_##dt);                                                                         \
    SWAP_IF(rows[dt].dot_f32, counted_dot_f32_##dt);                                                                   \
    SWAP_IF(rows[dt].dot_f64, counted_dot_f64_##dt);                                                                   \
    SWAP_IF(rows[dt].dot_rows, counted_dot_rows_##dt);                                                                 \
    SWAP_IF(rows[dt].sqdist_f32, counted_sqdist_f32_##dt);                                                             \
    SWAP_IF(rows[dt].axpy, counted_axpy_##dt);                                                                         \
    SWAP_IF(rows[dt].absmax, counted_absmax_##dt);
    SWAP_ROWS(0)
    SWAP_ROWS(1)
    SWAP_ROWS(2)
}

/* Every method x storage type x table this CPU runs, fed the same tokens as
 * through the reference table: the same statuses, the cache never above its
 * worst case, finite answers; and byte-identical arenas when the method's
 * updates call no entry the table replaces (found by running the updates
 * through a counting table, not by a list of methods). Where they do call
 * one, the method's choices compare sums whose rounding differs between
 * tables, so its cache may legitimately differ: the test says so and checks
 * the invariants only. */
static int methods_on_every_table(void)
{
    const size_t d = 16, n = 600;
    kvc_rng r;
    kvc_rng_seed(&r, 77);
    printf("seed 77, d %zu, n %zu\n", d, n);
    float *k = tu_normal(&r, n, d, 3.0), *v = tu_normal(&r, n, d, 1.0), *q = tu_normal(&r, 2, d, 1.0);
    const uint32_t have = kvc_cpu_features();
    size_t identical = 0, rounding = 0;
    for (size_t ti = 1; ti < kvc_kernels_count(); ti++) {
        const kvc_kernels *t = kvc_kernels_at(ti);
        if ((t->needs & have) != t->needs) continue;
        kvc_kernels counting;
        counting_table(t, &counting);
        for (size_t mi = 0; mi < kvc_method_count(); mi++) {
            const kvc_method m = kvc_method_at(mi);
            for (unsigned dt = 0; dt < KVC_DTYPE_COUNT; dt++) {
                if (!kvc_dtype_implemented((kvc_dtype)dt)) continue;
                kvc_stream_config c = kvc_stream_config_default(m, d, d, m == KVC_METHOD_EXACT ? (uint32_t)n : 64, 5);
                /* KIVI4 windows are whole blocks of 32: 8 held none (and is now refused), so 0 there */
                c.n_sink = 4, c.n_window = dt == KVC_DTYPE_KIVI4 ? 0u : 8u, c.dtype = (kvc_dtype)dt,
                c.prefix_len = (uint32_t)n;
                kvc_stream_plan plan;
                CHECK(kvc_stream_plan_make(&c, &plan) == KVC_OK);
                const size_t bytes = kvc_stream_arena_bytes(&c);
                kvc_stream *sa = tu_stream(&c), *sb = tu_stream(&c), *sc = tu_stream(&c);
                g_calls = 0;
                for (size_t j = 0; j < n; j++) {
                    const kvc_status ra = kvc_stream_append(sa, kvc_kernels_ref(), k + j * d, v + j * d);
                    const kvc_status rb = kvc_stream_append(sb, t, k + j * d, v + j * d);
                    CHECK_MSG(ra == rb, "%s %s %s: append %zu: %s vs %s", t->name, kvc_method_name(m),
                              kvc_dtype_name((kvc_dtype)dt), j, kvc_status_str(rb), kvc_status_str(ra));
                    CHECK(kvc_stream_append(sc, &counting, k + j * d, v + j * d) == ra);
                    kvc_stream_stats stats;
                    CHECK(kvc_stream_get_stats(sb, &stats) == KVC_OK && stats.elements <= plan.worst_elements);
                }
                const size_t calls = g_calls;
                float za[2 * 16], zb[2 * 16];
                /* the counting works: a query calls the table's replaced attend */
                if (kvc_stream_attend(sc, &counting, q, 2, za) == KVC_OK) CHECK(g_calls > calls);
                const kvc_status qa = kvc_stream_attend(sa, kvc_kernels_ref(), q, 2, za);
                const kvc_status qb = kvc_stream_attend(sb, t, q, 2, zb);
                if (calls == 0) {
                    CHECK_MSG(memcmp((const void *)sa, (const void *)sb, bytes) == 0,
                              "%s %s %s: the updates call no replaced kernel, yet the caches differ", t->name,
                              kvc_method_name(m), kvc_dtype_name((kvc_dtype)dt));
                    CHECK(qa == qb);
                    identical++;
                } else {
                    printf("  %s %s %s: updates call %zu replaced kernel entries (rounding-dependent choices): "
                           "invariants only\n",
                           t->name, kvc_method_name(m), kvc_dtype_name((kvc_dtype)dt), calls);
                    rounding++;
                }
                if (qb == KVC_OK)
                    for (size_t i = 0; i < 2 * d; i++) CHECK(isfinite(zb[i]));
                free(sa), free(sb), free(sc); /* the handle is the arena's start */
            }
        }
    }
    free(k), free(v), free(q);
    if (identical + rounding == 0) {
        printf("no table but the reference runs here\n");
        return KVC_TEST_SKIP;
    }
    printf("%zu (table, method, dtype) runs with byte-identical caches, %zu with rounding-dependent choices "
           "(invariants checked)\n",
           identical, rounding);
    return 0;
}

/* Exact attention (one BOTH segment) over values near FLT_MAX / n: the
 * result is a convex combination of finite floats, so kvc_attend promises
 * KVC_OK (kvc_attend.h: only views whose N and D sets differ may give
 * KVC_E_RANGE). The SIMD tables sum in f32, which overflowed: they returned
 * KVC_E_RANGE (issue 27). Every runnable table, batched and one-position,
 * must now give the reference's answer within the f32 bound of the header
 * (4 (n + 16) u max|v| + 4 u |z|; the scores are all 0 here). */
static int exact_huge_values_on_every_table(void)
{
    enum { N = 1000, DD = 16 };
    float *k = malloc((size_t)N * DD * sizeof(float)), *v = malloc((size_t)N * DD * sizeof(float));
    CHECK(k != NULL && v != NULL);
    kvc_rng r;
    kvc_rng_seed(&r, 2027);
    printf("seed 2027\n");
    float vmax = 0.0f;
    for (size_t i = 0; i < (size_t)N * DD; i++) {
        k[i] = 0.0f; /* equal scores: every value weighs 1/N */
        v[i] = (float)(0.5 + 0.5 * kvc_rng_unit(&r)) * (FLT_MAX / 4.0f) * (i % 3 == 0 ? -1.0f : 1.0f);
        if (fabsf(v[i]) > vmax) vmax = fabsf(v[i]);
    }
    kvc_view view;
    memset(&view, 0, sizeof view);
    view.d = DD, view.dv = DD, view.beta = 0.25f, view.n_seg = 1;
    view.seg[0] = (kvc_segment){k, v, NULL, 1.0, N, KVC_SET_BOTH, KVC_DTYPE_F32, NULL, NULL, 0};
    float q[2 * DD], ref[2 * DD], out[2 * DD];
    for (size_t c = 0; c < 2 * DD; c++) q[c] = (float)kvc_rng_normal(&r);
    CHECK(kvc_attend(kvc_kernels_ref(), &view, q, 2, ref) == KVC_OK);
    const double bound_abs = 4.0 * (N + 16) * U * (double)vmax;
    for (size_t i = 0; i < kvc_kernels_count(); i++) {
        const kvc_kernels *t = kvc_kernels_at(i);
        if ((t->needs & kvc_cpu_features()) != t->needs) continue;
        const kvc_status st = kvc_attend(t, &view, q, 2, out);
        CHECK_MSG(st == KVC_OK, "table %s: exact attention over |v| ~ FLT_MAX/4 gave %s", t->name, kvc_status_str(st));
        double worst = 0.0;
        for (size_t c = 0; c < 2 * DD; c++) {
            const double e = fabs((double)out[c] - ref[c]), b = bound_abs + 4.0 * U * fabs((double)ref[c]);
            CHECK_MSG(e <= b, "table %s: channel %zu differs by %g, bound %g", t->name, c, e, b);
            worst = fmax(worst, e / b);
        }
        /* the batched entry with a split-K state: finite too */
        double work[(KVC_MAX_HEAD_DIM + 3) * 2 + 8], state[2 * KVC_ATTEND_STATE(DD)];
        const kvc_attend_batch b = {q, 1, 2, 0, out, NULL, state};
        CHECK_MSG(t->attend_batch(t, &view, &b, work, sizeof work) == KVC_OK, "table %s: batched", t->name);
        const double *parts[1] = {state};
        CHECK_MSG(kvc_attend_merge(parts, 1, 2, DD, out) == KVC_OK, "table %s: its state merges to a finite output",
                  t->name);
        printf("table %s: KVC_OK, largest error / bound %.3g\n", t->name, worst);
    }
    free(k), free(v);
    return 0;
}

/* Issue 49 item 5: every table against the reference over magnitude sweeps
 * and planted NaNs. Keys and queries of scale M from 1e-30 (scores that
 * underflow f32) through f16's range (6e4, 1e5) to past f32's score range
 * (|q.k| > FLT_MAX from M ~ 1.8e19 on), in every storage type the table
 * reads; then the same views with a NaN planted in one stored key or value
 * row (the f32 segment, and the rows of f16, int8 and Q15, whose layouts put
 * a float or half at a known place). The statuses must be the reference's
 * on every input. When both answer KVC_OK the outputs must agree within the
 * header's f32 bound (bounds_of) where that bound is finite; where it is not
 * (scores so large that e^{2 delta} overflows), both outputs must be finite.
 * Seed 4905. The SIMD tables computed such scores in f32 and returned
 * KVC_OK with a relative error of 0.99 (and dropped a NaN row silently). */
static int magnitude_and_nan_sweeps_on_every_table(void)
{
    static const double scales[] = {1e-30, 1e-12, 1e-4, 1.0, 300.0, 6e4, 1e5, 1e9, 1e16, 1e19, 1e20, 1e25};
    kvc_rng r;
    kvc_rng_seed(&r, 4905);
    printf("seed 4905\n");
    size_t runs = 0, ranges = 0, unbounded = 0;
    for (size_t ti = 1; ti < kvc_kernels_count(); ti++) {
        const kvc_kernels *t = kvc_kernels_at(ti);
        if ((t->needs & kvc_cpu_features()) != t->needs) continue;
        for (unsigned dt = 0; dt < KVC_DTYPE_COUNT; dt++) {
            if (!kvc_kernels_support(kvc_kernels_ref(), dt) || !kvc_kernels_support(t, dt)) continue;
            for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++)
                for (int plant = 0; plant < 5; plant++) { /* none, f32 key, f32 value, typed key, typed value */
                    const size_t d = 16, dv = 16, n = 40, n_seg = 2;
                    const int typed_plant = plant >= 3;
                    if (typed_plant && dt != KVC_DTYPE_F32 && dt != KVC_DTYPE_F16 && dt != KVC_DTYPE_I8 &&
                        dt != KVC_DTYPE_Q15)
                        continue;
                    view_data vd;
                    make_view(&r, &vd, d, dv, n, n_seg, dt, scales[si], 0, 0);
                    if (plant) {
                        const size_t sg = typed_plant ? 1 : 0, which = (plant - 1) % 2; /* 0 keys, 1 values */
                        const unsigned ts = vd.v.seg[sg].dtype;
                        const size_t row = kvc_rng_below(&r, vd.v.seg[sg].n);
                        const size_t rb = (size_t)kvc_row_bytes(ts, which ? dv : d);
                        unsigned char *at = vd.rows[sg][which] + row * rb;
                        if (ts == KVC_DTYPE_F16) {
                            const uint16_t h = 0x7E00u;
                            memcpy(at + 2 * kvc_rng_below(&r, d), &h, 2);
                        } else {
                            const float nan = NAN; /* f32: an element; int8, Q15: the row's scale */
                            memcpy(at + (ts == KVC_DTYPE_F32 ? 4 * kvc_rng_below(&r, d) : 0), &nan, 4);
                        }
                    }
                    float *q = tu_normal(&r, 2, d, scales[si]);
                    float za[2 * 16], zb[2 * 16];
                    const kvc_status ra = kvc_attend(kvc_kernels_ref(), &vd.v, q, 2, za);
                    const kvc_status rb = kvc_attend(t, &vd.v, q, 2, zb);
                    CHECK_MSG(ra == rb, "table %s, dtype %u, scale %g, NaN plant %d: status %s, reference %s", t->name,
                              dt, scales[si], plant, kvc_status_str(rb), kvc_status_str(ra));
                    if (ra == KVC_OK) {
                        double bounds[256];
                        for (size_t h = 0; h < 2; h++) {
                            bounds_of(&vd.v, q + h * d, za + h * dv, 0, 0, t->caps, bounds);
                            for (size_t c = 0; c < dv; c++) {
                                const double e = fabs((double)za[h * dv + c] - zb[h * dv + c]);
                                if (!isfinite(bounds[c])) {
                                    unbounded++;
                                    CHECK_MSG(isfinite(zb[h * dv + c]), "table %s: a non-finite output", t->name);
                                } else {
                                    CHECK_MSG(e <= bounds[c],
                                              "table %s, dtype %u, scale %g: head %zu ch %zu %.9g vs reference "
                                              "%.9g (bound %.3g)",
                                              t->name, dt, scales[si], h, c, zb[h * dv + c], za[h * dv + c], bounds[c]);
                                }
                            }
                        }
                    } else {
                        ranges++;
                    }
                    runs++;
                    free(q);
                    free_view(&vd);
                }
        }
    }
    printf("%zu runs over the other tables: statuses equal to the reference's, %zu of them refused by both; %zu "
           "outputs past a finite bound checked finite only\n",
           runs, ranges, unbounded);
    return 0;
}

/* The far-apart split views (shared/f32_state.h): a view whose numerator
 * set alone holds the largest scores, its denominator Delta below them
 * (segment 1 in N only, weighted e^Delta; segments 0 and 2 in D). The true
 * output is about e^Delta times the values: finite up to Delta ~ 88, then
 * KVC_E_RANGE. An f32 table's den is e^-Delta, subnormal from Delta ~ 87.3
 * and 0 (flushed weights) from ~ 103: the SIMD tables answered such views
 * with zeros or infinities and KVC_OK. Every table must give the
 * reference's status; where both answer, the error within the header's
 * bound, with its flush term (2^-126 per flushed weight over den) replaced
 * by what a table that gates on den >= (n + 1) 2^-100 can lose:
 * 2^-126 (S_c + n |z|) / den <= 2^-26 (S_c + n |z|) / (n + 1). Seed 5501. */
static int far_apart_split_views_on_every_table(void)
{
    static const double gaps[] = {0.0, 40.0, 80.0, 86.0, 87.5, 88.0, 88.5, 95.0, 104.0, 110.0, 300.0, 700.0};
    kvc_rng r;
    kvc_rng_seed(&r, 5501);
    printf("seed 5501\n");
    size_t runs = 0, ranges = 0;
    for (size_t ti = 1; ti < kvc_kernels_count(); ti++) {
        const kvc_kernels *t = kvc_kernels_at(ti);
        if ((t->needs & kvc_cpu_features()) != t->needs) continue;
        double worst = 0.0;
        for (unsigned dt = 0; dt < KVC_DTYPE_COUNT; dt++) {
            if (!kvc_kernels_support(kvc_kernels_ref(), dt) || !kvc_kernels_support(t, dt)) continue;
            for (size_t gi = 0; gi < sizeof gaps / sizeof gaps[0]; gi++) {
                const size_t d = 64, dv = 16, n = 96, n_seg = 3, n_q = 3;
                view_data vd;
                make_view(&r, &vd, d, dv, n, n_seg, dt, 1.0, 0, 1); /* roles: D+N, N, D */
                vd.v.seg[1].scale = exp(gaps[gi]);
                float *q = tu_normal(&r, n_q, d, 1.0);
                float za[3 * 16], zb[3 * 16];
                const kvc_status ra = kvc_attend(kvc_kernels_ref(), &vd.v, q, n_q, za);
                const kvc_status rb = kvc_attend(t, &vd.v, q, n_q, zb);
                CHECK_MSG(ra == rb, "table %s, dtype %s, gap %g: status %s, reference %s", t->name,
                          kvc_dtype_name((kvc_dtype)dt), gaps[gi], kvc_status_str(rb), kvc_status_str(ra));
                if (ra == KVC_OK) {
                    for (size_t h = 0; h < n_q; h++) {
                        double A[KVC_MAX_HEAD_DIM], tail[KVC_BOUND_TAIL], Dn, delta, bounds[KVC_MAX_HEAD_DIM];
                        size_t seen;
                        softmax_sums(&vd.v, q + h * d, 0, 0, t->caps, A, tail, &Dn, &delta, &seen);
                        bounds_of(&vd.v, q + h * d, za + h * dv, 0, 0, t->caps, bounds);
                        for (size_t c = 0; c < dv; c++) {
                            const double S = tail[KVC_MAX_HEAD_DIM + c], za_c = za[h * dv + c], zb_c = zb[h * dv + c];
                            const double flush = 0x1p-126 * (S + (double)seen * fabs(za_c)) / Dn;
                            const double gated =
                                0x1p-26 * (S + (double)seen * (fabs(za_c) + fabs(zb_c))) / (double)(seen + 1);
                            const double bd = bounds[c] - flush + gated, e = fabs(za_c - zb_c);
                            CHECK_MSG(isfinite(zb_c) && e <= bd,
                                      "table %s, dtype %s, gap %g: head %zu ch %zu %.9g vs reference %.9g (bound "
                                      "%.3g)",
                                      t->name, kvc_dtype_name((kvc_dtype)dt), gaps[gi], h, c, zb_c, za_c, bd);
                            if (bd > 0 && e / bd > worst) worst = e / bd;
                        }
                    }
                } else {
                    ranges++;
                }
                runs++;
                free(q);
                free_view(&vd);
            }
        }
        printf("table %s: largest error / bound %.3g\n", t->name, worst);
    }
    printf("%zu runs: statuses equal to the reference's, %zu refused by both\n", runs, ranges);
    return 0;
}

int main(int argc, char **argv)
{
    static const kvc_test_case cases[] = {
        {"every_table_matches_reference", every_table_matches_reference},
        {"split_k_merges_to_attend", split_k_merges_to_attend},
        {"methods_on_every_table", methods_on_every_table},
        {"exact_huge_values_on_every_table", exact_huge_values_on_every_table},
        {"magnitude_and_nan_sweeps_on_every_table", magnitude_and_nan_sweeps_on_every_table},
        {"far_apart_split_views_on_every_table", far_apart_split_views_on_every_table}};
    if (argc > 1 && strncmp(argv[1], "table_", 6) == 0) return one_table(argv[1] + 6);
    return kvc_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
