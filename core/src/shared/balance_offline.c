/* BalanceKV offline, the authors' single-layer algorithm (kvc_offline.h;
 * ksheth96/BalanceKV at 4ccee30, src/balanced_walk.py): T rounds; each walks
 * the survivors in blocks with one sign per token and then splits all the
 * signs once. Written from the description in docs/methods.md, not from
 * their code. No allocation: the caller's scratch holds the survivors' ids
 * and weights (twice, the round's input and output), one sign per token and
 * one block of centred keys and weighted values in double. */
#include <math.h>
#include <string.h>

#include "kvc/kvc_offline.h"
#include "kvc/kvc_rng.h"
#include "kvc/kvc_stream.h"
#include "portable_math.h"

/* Largest exponent passed to exp(): kernel values stay finite in double. */
#define OFFLINE_MAX_EXP 700.0

typedef struct offline_work {
    uint32_t *ids, *next_ids;
    double *w, *next_w;
    int8_t *sign;
    double *kb, *vb, *mu; /* block x d centred keys, block x dv weighted values, d */
} offline_work;

static size_t align8(size_t x) { return (x + 7u) / 8u * 8u; }

static size_t block_of(size_t block) { return block ? block : 256u; }

size_t kvc_balancekv_offline_work_bytes(size_t n, size_t d, size_t dv, size_t block)
{
    block = block_of(block);
    if (n < 1 || n > ((size_t)1 << 24) || d < 1 || d > KVC_MAX_HEAD_DIM || dv < 1 || dv > KVC_MAX_HEAD_DIM ||
        block < 2 || block > 4096)
        return 0;
    return 2u * align8(n * sizeof(uint32_t)) + 2u * n * sizeof(double) + align8(n) +
           (block * (d + dv) + d) * sizeof(double);
}

static offline_work carve(void *work, size_t n, size_t d, size_t block)
{
    unsigned char *p = (unsigned char *)work;
    offline_work o;
    o.ids = (uint32_t *)(void *)p, p += align8(n * sizeof(uint32_t));
    o.next_ids = (uint32_t *)(void *)p, p += align8(n * sizeof(uint32_t));
    o.w = (double *)(void *)p, p += n * sizeof(double);
    o.next_w = (double *)(void *)p, p += n * sizeof(double);
    o.sign = (int8_t *)(void *)p, p += align8(n);
    o.kb = (double *)(void *)p, p += block * d * sizeof(double);
    o.mu = (double *)(void *)p, p += d * sizeof(double);
    o.vb = (double *)(void *)p;
    return o;
}

typedef struct walk_prm {
    size_t d, dv, block;
    double key_scale, gamma, kappa;
} walk_prm;

static double dot_d(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}

/* Signs of survivors [b0, b0 + r) (r <= block): centre the keys on the block
 * mean (the block's zero padding rows count in it), weight the values, walk. */
static void walk_block(const float *keys, const float *values, offline_work *o, size_t b0, size_t r, const walk_prm *wp,
                       kvc_rng *rng)
{
    const size_t d = wp->d, dv = wp->dv;
    for (size_t c = 0; c < d; c++) o->mu[c] = 0.0;
    for (size_t i = 0; i < r; i++) {
        const float *k = keys + (size_t)o->ids[b0 + i] * d;
        for (size_t c = 0; c < d; c++) o->mu[c] += (double)k[c];
    }
    for (size_t c = 0; c < d; c++) o->mu[c] /= (double)wp->block;
    for (size_t i = 0; i < r; i++) {
        const float *k = keys + (size_t)o->ids[b0 + i] * d, *v = values + (size_t)o->ids[b0 + i] * dv;
        for (size_t c = 0; c < d; c++) o->kb[i * d + c] = (double)k[c] - o->mu[c];
        for (size_t c = 0; c < dv; c++) o->vb[i * dv + c] = o->w[b0 + i] * (double)v[c];
    }
    for (size_t i = 0; i < r; i++) {
        double a = 0.0;
        for (size_t j = 0; j < i; j++) {
            double x = wp->key_scale * dot_d(o->kb + i * d, o->kb + j * d, d);
            if (x > OFFLINE_MAX_EXP) x = OFFLINE_MAX_EXP;
            const double kij = kvc_pm_exp(x) * (dot_d(o->vb + i * dv, o->vb + j * dv, dv) + wp->kappa + 1e-8);
            a += o->sign[b0 + j] > 0 ? kij : -kij;
        }
        /* the first token of a block is +1; then p = 1/2 - gamma a, clipped by the draw itself */
        const double p = 0.5 - wp->gamma * a;
        o->sign[b0 + i] = (int8_t)(i == 0 || kvc_rng_unit(rng) < p ? 1 : -1);
    }
}

/* The split of m signs: returns the survivors (floor(m/2)) in next_ids / next_w. */
static size_t split(offline_work *o, size_t m)
{
    const size_t half = m / 2u;
    size_t plus = 0, minus = 0, c = 0;
    int winner = 0;
    for (; c < m; c++) {
        if (o->sign[c] > 0)
            plus++;
        else
            minus++;
        if (plus == half || minus == half) {
            winner = plus == half ? 1 : -1;
            break;
        }
    }
    size_t out = 0;
    /* the class that did not reach half first, up to c: weight 2 */
    for (size_t i = 0; i <= c && i < m && out < half; i++)
        if (o->sign[i] != winner) o->next_ids[out] = o->ids[i], o->next_w[out] = 2.0 * o->w[i], out++;
    /* then the tokens after c, weight 1, in order */
    for (size_t i = c + 1; i < m && out < half; i++) o->next_ids[out] = o->ids[i], o->next_w[out] = o->w[i], out++;
    return out;
}

static int finite_rows(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

kvc_status kvc_balancekv_offline(const float *keys, const float *values, size_t n, size_t d, size_t dv,
                                 const kvc_balancekv_offline_params *prm, uint64_t seed, void *work, size_t work_bytes,
                                 uint32_t *kept, float *weight, size_t *n_kept)
{
    if (keys == NULL || values == NULL || prm == NULL || work == NULL || kept == NULL || weight == NULL ||
        n_kept == NULL)
        return KVC_E_ARG;
    const size_t block = block_of(prm->block);
    const size_t need = kvc_balancekv_offline_work_bytes(n, d, dv, block);
    if (need == 0 || prm->rounds < 1 || prm->rounds > 16 || (n >> prm->rounds) < 1) return KVC_E_ARG;
    const double gamma = prm->gamma == 0.0f ? 4.0 : (double)prm->gamma;
    const double temp = prm->temperature == 0.0f ? 0.1 : (double)prm->temperature;
    const double kappa = prm->kappa == 0.0f ? 0.025 : (double)prm->kappa;
    if (!(gamma > 0.0) || !isfinite(gamma) || !(temp > 0.0) || !isfinite(temp) || !(kappa >= 0.0) || !isfinite(kappa))
        return KVC_E_ARG;
    if (((uintptr_t)work % 8u) != 0 || work_bytes < need) return KVC_E_ARENA;
    if (!finite_rows(keys, n * d) || !finite_rows(values, n * dv)) return KVC_E_NONFINITE;

    offline_work o = carve(work, n, d, block);
    const walk_prm wp = {d, dv, block, temp / sqrt((double)d), gamma, kappa};
    kvc_rng rng;
    kvc_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) o.ids[i] = (uint32_t)i, o.w[i] = 1.0;
    size_t m = n;
    for (uint32_t round = 0; round < prm->rounds; round++) {
        for (size_t b0 = 0; b0 < m; b0 += block)
            walk_block(keys, values, &o, b0, m - b0 < block ? m - b0 : block, &wp, &rng);
        m = split(&o, m);
        uint32_t *ti = o.ids;
        o.ids = o.next_ids, o.next_ids = ti;
        double *tw = o.w;
        o.w = o.next_w, o.next_w = tw;
    }
    for (size_t i = 0; i < m; i++) kept[i] = o.ids[i], weight[i] = (float)o.w[i];
    *n_kept = m;
    return KVC_OK;
}
