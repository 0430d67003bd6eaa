/*
 * kvc synth: synthetic attention traces with structure.
 *
 * Why structure: with i.i.d. zero-mean values ||Attn|| ~ 0 and every
 * compression method looks the same (docs/methods.md §0). Each kind below plants
 * one structure a method may or may not exploit, and the printed statistics
 * show how much of it there is. The designs assume the library's default score
 * scale beta = 1/sqrt(D); with SubGen's beta = 1 every score gap below grows by
 * sqrt(D) and attention becomes almost one-hot.
 *
 * Common to every kind: values carry a global mean mu = 0.5 sqrt(DV) * u (u a
 * random unit vector), so ||mean v|| / mean ||v|| is visibly non-zero (0.4-0.5)
 * and so is ||Attn||.
 *
 * clustered (parameter C = --clusters, default 32) - SubGen's setting (its
 *   Fig. 1: keys in well-separated clusters).
 *   - C centres c_m = r_c u_m, u_m uniform on the sphere, r_c = sqrt(6) D^(1/4)
 *     (~2.45 D^(1/4)), so beta ||c_m||^2 = 6 while beta <c_a, c_b> ~ 6 N(0, 1/D)
 *     for a != b: a query on centre a scores its own cluster about 6 units
 *     above the others (e^6 ~ 400). With C = 32 that puts ~90% of the softmax
 *     mass on the attended cluster and spreads it almost evenly inside it:
 *     peaked at the cluster level, not one-hot. (A lead of 4 left a third of
 *     the mass on the other 31 clusters and the entropy barely below the
 *     gaussian control's; many more clusters dilute the lead the same way.)
 *   - key j = c_{z_j} + N(0, s^2 I) with s = r_c / (4 sqrt(D)): noise norm
 *     ~ r_c / 4 against inter-centre distances ~ sqrt(2) r_c, so clusters are
 *     separable by a factor of about 5.7 (nearest-centre test passes).
 *   - z_j is a sticky random walk: z_0 uniform; stay with probability 0.9,
 *     otherwise jump to one of the other C - 1 clusters uniformly (mean run 10
 *     tokens), so every cluster recurs throughout the stream.
 *   - query j = c_a + N(0, s^2 I), a drawn uniformly among the clusters visited
 *     in tokens 0..j (not necessarily z_j), so the attended cluster usually
 *     lies far behind any recency window while always being in the prefix.
 *   - value j = mu + o_{z_j} + N(0, 0.25 I), per-cluster offsets o_m ~ N(0, I):
 *     which cluster is attended changes Attn by about sqrt(DV).
 * gaussian - the control: keys and queries N(0, I) (scores ~ N(0, 1): mildly
 *   peaked, nearly maximal entropy), values mu + N(0, I).
 * heavy-values - value norms heavy-tailed, for methods that sample or bucket
 *   by ||v|| (SubGen's ||v||^2 reservoir, BalanceKV's norm buckets): keys and
 *   queries N(0, I), byte-identical to gaussian's for the same seed (the pair
 *   isolates the effect of the values); value j = mu + r_j g_j, g_j ~ N(0, I), r_j Pareto with
 *   tail index 1.5 and scale 1/3 (E r = 1, infinite variance: at n = 8192 the
 *   largest ||v|| is ~400x the median, ~9 octaves, more than BalanceKV's
 *   default window of 8 buckets; the tail grows like n^(2/3), so at n = 10^6
 *   the top 1% of tokens hold >99% of sum ||v||^2).
 * lowrank (parameter R = --rank, default min(4, D)) - attention peaked on a few
 *   tokens: U a random orthonormal D x R basis; key j = sigma U a_j, query
 *   j = sigma U c_j with a_j, c_j ~ N(0, I_R) and sigma^2 = 3 sqrt(D / R), so
 *   beta <q, k> has standard deviation about 3 across keys (scores spread over
 *   several units; the top tokens take a visible share). Value j = mu + W b_j,
 *   W a DV x R matrix with N(0, 1/R) entries, b_j ~ N(0, I_R) (rank R, and
 *   E ||W b||^2 = DV like the other kinds).
 *
 * Randomness: one kvc_rng per role (structure, cluster path, keys, queries,
 * values, value mean), each seeded from the user seed through kvc_rng_at, so
 * changing DV does not change q or k, and a given seed gives the same bytes on
 * every platform whose libm log/cos/pow agree (the normals use log and cos).
 *
 * Statistics (printed): mean ||k||, mean ||v||, ||mean v|| / mean ||v|| over
 * all tokens, and two value-norm tail measures (max ||v|| / median ||v||, and
 * the share of sum ||v||^2 held by the top 1% of tokens: what norm-sampling
 * and norm-bucketing methods see). Then, at 64 query positions j spread
 * evenly over the stream (all of them when n < 64), causal softmax over keys
 * 0..j with beta = 1/sqrt(D): mean max probability, mean entropy (nats), mean
 * entropy / ln(j+1) (1 means uniform attention; positions j >= 1) and mean
 * ||Attn(q_j)|| / mean ||v||. Cost O(64 n (D + DV)), small next to writing.
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* mkdir, stat under -std=c11 */
#endif

#include "synth.h"
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#ifdef _WIN32
#include <direct.h>
#endif

#include "kvc/kvc_rng.h"
#include "kvc_npy.h"
#include "commands.h"

#if defined(__clang__)
/* Keep a*b+c as two roundings so the traces do not depend on FMA contraction
 * (gcc's -std=c11 already defaults to -ffp-contract=off). */
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- limits and design constants (see the comment above) ---- */
#define SYNTH_MAX_N          4000000u
#define SYNTH_MAX_DIM        256u
#define SYNTH_MAX_CLUSTERS   65536u
#define SYNTH_DEF_CLUSTERS   32u
#define SYNTH_DEF_RANK       4u
#define SYNTH_SAMPLE_QUERIES 64u

#define SYNTH_MEAN_FRAC     0.5  /* ||mu|| = 0.5 sqrt(DV) */
#define SYNTH_CL_GAP        6.0  /* beta ||c||^2: own-cluster score lead */
#define SYNTH_CL_NOISE_FRAC 0.25 /* key/query noise norm / centre norm */
#define SYNTH_CL_STAY       0.9  /* sticky walk: stay probability */
#define SYNTH_CL_OFFSET_SD  1.0  /* per-cluster value offset, per coordinate */
#define SYNTH_CL_VNOISE_SD  0.5  /* value noise, per coordinate */
#define SYNTH_HV_ALPHA      1.5  /* Pareto tail index of value norms */
#define SYNTH_LR_SCORE_SD   3.0  /* spread of beta <q, k> in units */

/* Sub-stream ids passed to kvc_rng_at. */
enum { RS_STRUCT = 1, RS_PATH = 2, RS_KEYS = 3, RS_QUERIES = 4, RS_VALUES = 5, RS_MEAN = 6 };

typedef enum synth_kind { SYNTH_CLUSTERED = 0, SYNTH_GAUSSIAN = 1, SYNTH_HEAVY = 2, SYNTH_LOWRANK = 3 } synth_kind;

static const char *const synth_kind_names[] = {"clustered", "gaussian", "heavy-values", "lowrank"};

typedef struct synth_opts {
    synth_kind kind;
    size_t n, d, dv, clusters, rank;
    uint64_t seed;
    const char *out;
    int have_clusters, have_rank;
} synth_opts;

typedef struct synth_stats {
    double mean_knorm, mean_vnorm, vmean_ratio, vnorm_max_med, v2_top1;
    double max_p, entropy, entropy_rel, attn_ratio;
    size_t queries, rel_count;
} synth_stats;

static void synth_usage(FILE *f)
{
    fprintf(f,
            "usage: kvc synth --kind K --n N --d D --seed S --out DIR [--dv DV] [--clusters C] [--rank R]\n"
            "  Writes DIR/q.npy, DIR/k.npy (float32, (N, D)) and DIR/v.npy (float32, (N, DV)); DIR\n"
            "  (and missing parents) is created. Kinds:\n"
            "    clustered     keys in C separated clusters visited by a sticky walk; queries aim at any\n"
            "                  visited cluster; values = mean + per-cluster offset + noise\n"
            "    gaussian      control: i.i.d. N(0, I) keys/queries, values with a mean\n"
            "    heavy-values  gaussian keys/queries, Pareto(1.5) value norms + mean\n"
            "    lowrank       keys/queries in a rank-R subspace (peaked attention), rank-R values + mean\n"
            "  Prints one line: parameters, mean ||k||, mean ||v||, ||mean v||/mean ||v||, max ||v||/median\n"
            "  ||v||, the share of sum ||v||^2 in the top 1%% of tokens, and at %u evenly spaced query\n"
            "  positions (beta = 1/sqrt(D), causal) the mean max softmax probability, entropy (nats),\n"
            "  entropy/ln(j+1) and ||Attn||/mean ||v||.\n",
            SYNTH_SAMPLE_QUERIES);
}

/* The checked parameters of a run, into the generator's options; 0 on success, 2 (message printed) otherwise. */
static int synth_resolve(const kvc_synth_params *p, synth_opts *o)
{
    memset(o, 0, sizeof *o);
    size_t k = 0;
    if (p->kind != NULL)
        for (; k < sizeof synth_kind_names / sizeof synth_kind_names[0]; k++)
            if (strcmp(p->kind, synth_kind_names[k]) == 0) break;
    if (p->kind == NULL || k == sizeof synth_kind_names / sizeof synth_kind_names[0]) {
        fprintf(stderr, "kvc synth: --kind must be one of clustered, gaussian, heavy-values, lowrank (got '%s')\n",
                p->kind ? p->kind : "");
        return 2;
    }
    if (p->out == NULL || *p->out == '\0') {
        fprintf(stderr, "kvc synth: --out must be a non-empty directory path\n");
        return 2;
    }
    if (p->n < 1 || p->n > SYNTH_MAX_N || p->d < 1 || p->d > SYNTH_MAX_DIM || p->dv > SYNTH_MAX_DIM ||
        p->clusters > SYNTH_MAX_CLUSTERS) {
        fprintf(stderr, "kvc synth: n must be in 1..%u, d and dv in 1..%u, clusters in 1..%u\n", SYNTH_MAX_N,
                SYNTH_MAX_DIM, SYNTH_MAX_CLUSTERS);
        return 2;
    }
    o->kind = (synth_kind)k;
    o->n = (size_t)p->n, o->d = (size_t)p->d, o->dv = p->dv ? (size_t)p->dv : (size_t)p->d;
    o->seed = p->seed, o->out = p->out;
    o->clusters = p->clusters ? (size_t)p->clusters : SYNTH_DEF_CLUSTERS;
    o->have_clusters = p->clusters != 0, o->have_rank = p->rank != 0;
    o->rank = p->rank ? (size_t)p->rank : (SYNTH_DEF_RANK < o->d ? SYNTH_DEF_RANK : o->d); /* default min(4, D) */
    if (o->rank > o->d) {
        fprintf(stderr, "kvc synth: --rank must be an integer in 1..%zu (= --d) (got %zu)\n", o->d, o->rank);
        return 2;
    }
    if (o->have_clusters && o->kind != SYNTH_CLUSTERED)
        fprintf(stderr, "kvc synth: note: --clusters is ignored for --kind %s\n", synth_kind_names[o->kind]);
    if (o->have_rank && o->kind != SYNTH_LOWRANK)
        fprintf(stderr, "kvc synth: note: --rank is ignored for --kind %s\n", synth_kind_names[o->kind]);
    return 0;
}

/* Create DIR and its missing parents. 0 on success. */
static int make_dir(const char *dir) { return kvc_mkdirs("synth", dir) ? -1 : 0; }

/* Seed the generator of one role from the user seed. */
static void sub_rng(kvc_rng *r, uint64_t seed, uint64_t role)
{
    kvc_rng base;
    kvc_rng_seed(&base, seed);
    kvc_rng_seed(r, kvc_rng_at(base.key, role));
}

static void fill_normal(kvc_rng *r, float *x, size_t len, double sd)
{
    for (size_t i = 0; i < len; i++) x[i] = (float)(sd * kvc_rng_normal(r));
}

/* A uniformly random unit vector (redraws the all-zero draw, which needs
 * kvc_rng_unit to return exactly 0 in every coordinate). */
static void unit_vector(kvc_rng *r, double *u, size_t d)
{
    double ss = 0.0;
    for (int tries = 0; tries < 64 && ss == 0.0; tries++) {
        ss = 0.0;
        for (size_t i = 0; i < d; i++) {
            u[i] = kvc_rng_normal(r);
            ss += u[i] * u[i];
        }
    }
    if (ss == 0.0) {
        u[0] = 1.0;
        ss = 1.0;
    }
    ss = sqrt(ss);
    for (size_t i = 0; i < d; i++) u[i] /= ss;
}

/* Orthonormal columns: basis[i * rank + c] is entry i of column c (D x R).
 * Modified Gram-Schmidt applied twice; returns -1 if a column keeps vanishing
 * (probability far below 2^-64). */
static int orthonormal_basis(kvc_rng *r, double *basis, size_t d, size_t rank, double *col)
{
    for (size_t c = 0; c < rank; c++) {
        double nrm = 0.0;
        int tries;
        for (tries = 0; tries < 64; tries++) {
            for (size_t i = 0; i < d; i++) col[i] = kvc_rng_normal(r);
            for (int pass = 0; pass < 2; pass++) {
                for (size_t t = 0; t < c; t++) {
                    double dot = 0.0;
                    for (size_t i = 0; i < d; i++) dot += col[i] * basis[i * rank + t];
                    for (size_t i = 0; i < d; i++) col[i] -= dot * basis[i * rank + t];
                }
            }
            nrm = 0.0;
            for (size_t i = 0; i < d; i++) nrm += col[i] * col[i];
            nrm = sqrt(nrm);
            if (nrm > 1e-6) break;
        }
        if (tries == 64) return -1;
        for (size_t i = 0; i < d; i++) basis[i * rank + c] = col[i] / nrm;
    }
    return 0;
}

/* ---- the four generators; each fills q, k (n x d) and v (n x dv) ---- */

static int gen_clustered(const synth_opts *o, const double *mu, float *q, float *k, float *v)
{
    const size_t n = o->n, d = o->d, dv = o->dv, nc = o->clusters;
    const double rc = sqrt(SYNTH_CL_GAP * sqrt((double)d));
    const double sd = SYNTH_CL_NOISE_FRAC * rc / sqrt((double)d);
    kvc_rng rs, rp, rk, rq, rv;
    float *centre = malloc(nc * d * sizeof *centre);
    float *offset = malloc(nc * dv * sizeof *offset);
    uint32_t *visited = malloc(nc * sizeof *visited);
    unsigned char *seen = calloc(nc, 1);
    double *u = malloc(d * sizeof *u);
    size_t nvisited = 0;
    uint32_t z = 0;

    if (centre == NULL || offset == NULL || visited == NULL || seen == NULL || u == NULL) {
        free(centre);
        free(offset);
        free(visited);
        free(seen);
        free(u);
        return -1;
    }
    sub_rng(&rs, o->seed, RS_STRUCT);
    sub_rng(&rp, o->seed, RS_PATH);
    sub_rng(&rk, o->seed, RS_KEYS);
    sub_rng(&rq, o->seed, RS_QUERIES);
    sub_rng(&rv, o->seed, RS_VALUES);

    for (size_t m = 0; m < nc; m++) {
        unit_vector(&rs, u, d);
        for (size_t i = 0; i < d; i++) centre[m * d + i] = (float)(rc * u[i]);
    }
    fill_normal(&rs, offset, nc * dv, SYNTH_CL_OFFSET_SD);

    for (size_t j = 0; j < n; j++) {
        const float *c;
        uint32_t a;
        if (j == 0) {
            z = kvc_rng_below(&rp, (uint32_t)nc);
        } else if (nc > 1 && kvc_rng_unit(&rp) >= SYNTH_CL_STAY) {
            uint32_t w = kvc_rng_below(&rp, (uint32_t)(nc - 1));
            z = w >= z ? w + 1u : w; /* any cluster but the current one */
        }
        if (!seen[z]) {
            seen[z] = 1;
            visited[nvisited++] = z;
        }
        c = centre + (size_t)z * d;
        for (size_t i = 0; i < d; i++) k[j * d + i] = (float)((double)c[i] + sd * kvc_rng_normal(&rk));

        a = visited[kvc_rng_below(&rq, (uint32_t)nvisited)];
        c = centre + (size_t)a * d;
        for (size_t i = 0; i < d; i++) q[j * d + i] = (float)((double)c[i] + sd * kvc_rng_normal(&rq));

        for (size_t i = 0; i < dv; i++)
            v[j * dv + i] =
                (float)(mu[i] + (double)offset[(size_t)z * dv + i] + SYNTH_CL_VNOISE_SD * kvc_rng_normal(&rv));
    }
    free(centre);
    free(offset);
    free(visited);
    free(seen);
    free(u);
    return 0;
}

static void gen_gaussian_qk(const synth_opts *o, float *q, float *k)
{
    kvc_rng rk, rq;
    sub_rng(&rk, o->seed, RS_KEYS);
    sub_rng(&rq, o->seed, RS_QUERIES);
    fill_normal(&rk, k, o->n * o->d, 1.0);
    fill_normal(&rq, q, o->n * o->d, 1.0);
}

static int gen_gaussian(const synth_opts *o, const double *mu, float *q, float *k, float *v)
{
    kvc_rng rv;
    gen_gaussian_qk(o, q, k);
    sub_rng(&rv, o->seed, RS_VALUES);
    for (size_t j = 0; j < o->n; j++)
        for (size_t i = 0; i < o->dv; i++) v[j * o->dv + i] = (float)(mu[i] + kvc_rng_normal(&rv));
    return 0;
}

static int gen_heavy(const synth_opts *o, const double *mu, float *q, float *k, float *v)
{
    const double alpha = SYNTH_HV_ALPHA;
    const double xm = (alpha - 1.0) / alpha; /* E r = xm alpha / (alpha - 1) = 1 */
    kvc_rng rv;
    gen_gaussian_qk(o, q, k);
    sub_rng(&rv, o->seed, RS_VALUES);
    for (size_t j = 0; j < o->n; j++) {
        /* 1 - u lies in (0, 1]: r in [xm, xm 2^(53/alpha)], finite in float. */
        double r = xm * pow(1.0 - kvc_rng_unit(&rv), -1.0 / alpha);
        for (size_t i = 0; i < o->dv; i++) v[j * o->dv + i] = (float)(mu[i] + r * kvc_rng_normal(&rv));
    }
    return 0;
}

static int gen_lowrank(const synth_opts *o, const double *mu, float *q, float *k, float *v)
{
    const size_t n = o->n, d = o->d, dv = o->dv, rank = o->rank;
    const double sigma = sqrt(SYNTH_LR_SCORE_SD * sqrt((double)d / (double)rank));
    const double wsd = 1.0 / sqrt((double)rank);
    kvc_rng rs, rk, rq, rv;
    double *basis = malloc(d * rank * sizeof *basis);
    double *w = malloc(dv * rank * sizeof *w);
    double *col = malloc(d * sizeof *col);
    double *coef = malloc(rank * sizeof *coef);
    int rc = -1;

    if (basis == NULL || w == NULL || col == NULL || coef == NULL) goto done;
    sub_rng(&rs, o->seed, RS_STRUCT);
    sub_rng(&rk, o->seed, RS_KEYS);
    sub_rng(&rq, o->seed, RS_QUERIES);
    sub_rng(&rv, o->seed, RS_VALUES);
    if (orthonormal_basis(&rs, basis, d, rank, col) != 0) {
        rc = -2;
        goto done;
    }
    for (size_t i = 0; i < dv * rank; i++) w[i] = wsd * kvc_rng_normal(&rs);

    for (size_t j = 0; j < n; j++) {
        for (size_t c = 0; c < rank; c++) coef[c] = sigma * kvc_rng_normal(&rk);
        for (size_t i = 0; i < d; i++) {
            double s = 0.0;
            for (size_t c = 0; c < rank; c++) s += basis[i * rank + c] * coef[c];
            k[j * d + i] = (float)s;
        }
        for (size_t c = 0; c < rank; c++) coef[c] = sigma * kvc_rng_normal(&rq);
        for (size_t i = 0; i < d; i++) {
            double s = 0.0;
            for (size_t c = 0; c < rank; c++) s += basis[i * rank + c] * coef[c];
            q[j * d + i] = (float)s;
        }
        for (size_t c = 0; c < rank; c++) coef[c] = kvc_rng_normal(&rv);
        for (size_t i = 0; i < dv; i++) {
            double s = mu[i];
            for (size_t c = 0; c < rank; c++) s += w[i * rank + c] * coef[c];
            v[j * dv + i] = (float)s;
        }
    }
    rc = 0;
done:
    free(basis);
    free(w);
    free(col);
    free(coef);
    return rc;
}

/* ---- statistics ---- */

static double row_norm(const float *x, size_t len)
{
    double s = 0.0;
    for (size_t i = 0; i < len; i++) s += (double)x[i] * (double)x[i];
    return sqrt(s);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int compute_stats(const synth_opts *o, const float *q, const float *k, const float *v, synth_stats *st)
{
    const size_t n = o->n, d = o->d, dv = o->dv;
    const double beta = 1.0 / sqrt((double)d);
    const size_t m = n < SYNTH_SAMPLE_QUERIES ? n : SYNTH_SAMPLE_QUERIES;
    double *score = malloc(n * sizeof *score);
    double *acc = malloc(dv * sizeof *acc);
    double sum_k = 0.0, sum_v = 0.0, vmean_norm = 0.0;

    memset(st, 0, sizeof *st);
    if (score == NULL || acc == NULL) {
        free(score);
        free(acc);
        return -1;
    }
    for (size_t j = 0; j < n; j++) {
        sum_k += row_norm(k + j * d, d);
        score[j] = row_norm(v + j * dv, dv); /* the score buffer holds ||v_j|| for now */
        sum_v += score[j];
    }
    {
        const size_t top = (n + 99u) / 100u; /* ceil(1% of n), at least 1 */
        double med, all2 = 0.0, top2 = 0.0;
        qsort(score, n, sizeof *score, cmp_double);
        med = (n % 2u) != 0 ? score[n / 2u] : 0.5 * (score[n / 2u - 1u] + score[n / 2u]);
        for (size_t j = 0; j < n; j++) {
            all2 += score[j] * score[j];
            if (j >= n - top) top2 += score[j] * score[j];
        }
        st->vnorm_max_med = med > 0.0 ? score[n - 1u] / med : HUGE_VAL;
        st->v2_top1 = all2 > 0.0 ? top2 / all2 : 0.0;
    }
    for (size_t i = 0; i < dv; i++) {
        double s = 0.0;
        for (size_t j = 0; j < n; j++) s += (double)v[j * dv + i];
        s /= (double)n;
        vmean_norm += s * s;
    }
    st->mean_knorm = sum_k / (double)n;
    st->mean_vnorm = sum_v / (double)n;
    st->vmean_ratio = st->mean_vnorm > 0.0 ? sqrt(vmean_norm) / st->mean_vnorm : 0.0;

    st->queries = m;
    for (size_t s = 0; s < m; s++) {
        const size_t j = ((s + 1u) * n) / m - 1u; /* evenly spaced, last = n - 1 */
        const float *qj = q + j * d;
        double mx = -HUGE_VAL, z = 0.0, a = 0.0, h, anorm = 0.0;
        for (size_t i = 0; i <= j; i++) {
            double dot = 0.0;
            for (size_t t = 0; t < d; t++) dot += (double)qj[t] * (double)k[i * d + t];
            score[i] = beta * dot;
            if (score[i] > mx) mx = score[i];
        }
        for (size_t t = 0; t < dv; t++) acc[t] = 0.0;
        for (size_t i = 0; i <= j; i++) {
            const double x = score[i] - mx;
            const double e = exp(x);
            z += e;
            a += e * x;
            for (size_t t = 0; t < dv; t++) acc[t] += e * (double)v[i * dv + t];
        }
        h = log(z) - a / z; /* -sum p ln p with p = e / z */
        if (h < 0.0) h = 0.0;
        for (size_t t = 0; t < dv; t++) anorm += (acc[t] / z) * (acc[t] / z);
        st->max_p += 1.0 / z;
        st->entropy += h;
        if (j >= 1) {
            st->entropy_rel += h / log((double)(j + 1u));
            st->rel_count++;
        }
        st->attn_ratio += st->mean_vnorm > 0.0 ? sqrt(anorm) / st->mean_vnorm : 0.0;
    }
    st->max_p /= (double)m;
    st->entropy /= (double)m;
    st->attn_ratio /= (double)m;
    if (st->rel_count > 0) st->entropy_rel /= (double)st->rel_count;
    free(score);
    free(acc);
    return 0;
}

static char *join_path(const char *dir, const char *file)
{
    const size_t ld = strlen(dir), lf = strlen(file);
    const int slash = ld > 0 && dir[ld - 1] != '/';
    char *p = malloc(ld + (size_t)slash + lf + 1u);
    if (p == NULL) return NULL;
    memcpy(p, dir, ld);
    if (slash) p[ld] = '/';
    memcpy(p + ld + (size_t)slash, file, lf + 1u);
    return p;
}

static int save_one(const char *dir, const char *file, const float *data, size_t rows, size_t cols)
{
    char err[256];
    size_t shape[2];
    kvc_status s;
    char *path = join_path(dir, file);
    if (path == NULL) {
        fprintf(stderr, "kvc synth: out of memory\n");
        return -1;
    }
    shape[0] = rows;
    shape[1] = cols;
    err[0] = '\0';
    s = kvc_npy_save(path, data, 2, shape, KVC_NPY_F32, err, sizeof err);
    if (s != KVC_OK) {
        if (err[0] != '\0')
            fprintf(stderr, "kvc synth: cannot write %s: %s\n", path, err);
        else
            fprintf(stderr, "kvc synth: cannot write %s (status %d)\n", path, (int)s);
        free(path);
        return -1;
    }
    free(path);
    return 0;
}

int kvc_cmd_synth(int argc, char **argv)
{
    kvc_synth_params p;
    memset(&p, 0, sizeof p);
    int have_kind = 0, have_n = 0, have_d = 0, have_seed = 0, have_out = 0;
    const kvc_flag fl[] = {
        {"--kind", 's', &p.kind, 0, 0, &have_kind, "K\tclustered|gaussian|heavy-values|lowrank"},
        {"--n", 'u', &p.n, 1, SYNTH_MAX_N, &have_n, "N\ttokens"},
        {"--d", 'u', &p.d, 1, SYNTH_MAX_DIM, &have_d, "D\tkey/query dimension"},
        {"--dv", 'u', &p.dv, 1, SYNTH_MAX_DIM, NULL, "DV\tvalue dimension (default D)"},
        {"--seed", 'u', &p.seed, 0, 18446744073709551615.0, &have_seed, "S\tany unsigned 64-bit integer"},
        {"--out", 's', &p.out, 0, 0, &have_out, "DIR\toutput directory"},
        {"--clusters", 'u', &p.clusters, 1, SYNTH_MAX_CLUSTERS, NULL, "C\tclustered only (default 8)"},
        {"--rank", 'u', &p.rank, 1, SYNTH_MAX_DIM, NULL, "R\tlowrank only, at most D (default min(8, D))"},
    };
    const int prc = kvc_cli_parse("synth", argc, argv, fl, sizeof fl / sizeof fl[0], NULL, synth_usage);
    if (prc) return prc == 1 ? 0 : 2;
    static const char *const req[] = {"--kind", "--n", "--d", "--seed", "--out"};
    const int have[] = {have_kind, have_n, have_d, have_seed, have_out};
    for (size_t r = 0; r < sizeof req / sizeof req[0]; r++)
        if (!have[r]) {
            fprintf(stderr, "kvc synth: missing required flag %s (see kvc synth --help)\n", req[r]);
            return 2;
        }
    return kvc_synth_run(&p);
}

int kvc_synth_run(const kvc_synth_params *p)
{
    synth_opts o;
    synth_stats st;
    float *q = NULL, *k = NULL, *v = NULL;
    double *mu = NULL;
    int rc, ret = 1;

    if (synth_resolve(p, &o) != 0) return 2;

    if (o.n > SIZE_MAX / sizeof(float) / SYNTH_MAX_DIM) {
        fprintf(stderr, "kvc synth: --n %zu is too large for this platform\n", o.n);
        return 1;
    }
    if (make_dir(o.out) != 0) return 1;

    q = malloc(o.n * o.d * sizeof *q);
    k = malloc(o.n * o.d * sizeof *k);
    v = malloc(o.n * o.dv * sizeof *v);
    mu = malloc(o.dv * sizeof *mu);
    if (q == NULL || k == NULL || v == NULL || mu == NULL) {
        fprintf(stderr, "kvc synth: out of memory for n=%zu d=%zu dv=%zu\n", o.n, o.d, o.dv);
        goto done;
    }

    {
        /* The value mean has its own stream, shared by every kind. */
        kvc_rng rm;
        const double scale = SYNTH_MEAN_FRAC * sqrt((double)o.dv);
        sub_rng(&rm, o.seed, RS_MEAN);
        unit_vector(&rm, mu, o.dv);
        for (size_t i = 0; i < o.dv; i++) mu[i] *= scale;
    }

    switch (o.kind) {
    case SYNTH_CLUSTERED: rc = gen_clustered(&o, mu, q, k, v); break;
    case SYNTH_GAUSSIAN: rc = gen_gaussian(&o, mu, q, k, v); break;
    case SYNTH_HEAVY: rc = gen_heavy(&o, mu, q, k, v); break;
    default: rc = gen_lowrank(&o, mu, q, k, v); break;
    }
    if (rc == -2) {
        fprintf(stderr, "kvc synth: could not draw an orthonormal basis\n");
        goto done;
    }
    if (rc != 0 || compute_stats(&o, q, k, v, &st) != 0) {
        fprintf(stderr, "kvc synth: out of memory\n");
        goto done;
    }

    if (save_one(o.out, "q.npy", q, o.n, o.d) != 0 || save_one(o.out, "k.npy", k, o.n, o.d) != 0 ||
        save_one(o.out, "v.npy", v, o.n, o.dv) != 0)
        goto done;

    printf("synth kind=%s n=%zu d=%zu dv=%zu seed=%llu", synth_kind_names[o.kind], o.n, o.d, o.dv,
           (unsigned long long)o.seed);
    switch (o.kind) {
    case SYNTH_CLUSTERED:
        printf(" clusters=%zu centre_norm=%.4g key_noise_sd=%.4g stay=%.2g", o.clusters,
               sqrt(SYNTH_CL_GAP * sqrt((double)o.d)),
               SYNTH_CL_NOISE_FRAC * sqrt(SYNTH_CL_GAP * sqrt((double)o.d)) / sqrt((double)o.d), SYNTH_CL_STAY);
        break;
    case SYNTH_HEAVY: printf(" pareto_alpha=%.2g", SYNTH_HV_ALPHA); break;
    case SYNTH_LOWRANK: printf(" rank=%zu score_sd=%.2g", o.rank, SYNTH_LR_SCORE_SD); break;
    default: break;
    }
    printf(" out=%s mean_knorm=%.4g mean_vnorm=%.4g vmean_ratio=%.4g vnorm_max_med=%.4g"
           " v2_top1pct=%.4g queries=%zu beta=%.4g max_p=%.4g entropy=%.4g",
           o.out, st.mean_knorm, st.mean_vnorm, st.vmean_ratio, st.vnorm_max_med, st.v2_top1, st.queries,
           1.0 / sqrt((double)o.d), st.max_p, st.entropy);
    if (st.rel_count > 0)
        printf(" entropy_rel=%.4g", st.entropy_rel);
    else
        printf(" entropy_rel=n/a");
    printf(" attn_ratio=%.4g\n", st.attn_ratio);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "kvc synth: cannot write to stdout\n");
        goto done;
    }
    ret = 0;
done:
    free(q);
    free(k);
    free(v);
    free(mu);
    return ret;
}
