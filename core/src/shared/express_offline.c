/* Offline-Express (docs/express.md section 4, the paper's Alg. 9) for a prefix of
 * n = 4^R s tokens held by the caller: recursive, no allocation (the caller
 * passes scratch), with the same keyed draws as the streaming method, so it selects
 * exactly the coreset the stream holds after n tokens. Each recursion level
 * is independent work a prefill kernel can run in parallel; this reference
 * runs it in order. */
#include <math.h>
#include <string.h>

#include "kernel_halving.h"
#include "kvc/kvc_rng.h"
#include "plan.h"
#include "internal/kvc_internal.h"

enum { TAG_C2 = 1, TAG_HALVE = 2, TAG_SUB = 3 }; /* as in method_express.c */

typedef struct oe_env {
    const float *K, *V;
    size_t d, dv;
    uint32_t s, c, l_mode, center;
    double L, delta, beta;
    uint64_t seed;
    float *kb, *vb;  /* gather buffers, 4s rows */
    double *scratch; /* kernel-halving scratch for 4s points */
    uint8_t *keep;   /* 4s flags */
    uint32_t *ids;   /* R levels x (4s + c s) ids */
} oe_env;

static uint32_t log2u(uint64_t x)
{
    uint32_t r = 0;
    while ((1ull << r) < x) r++;
    return r;
}

static size_t oe_halve(oe_env *o, uint32_t *ids, size_t n, uint32_t round, uint32_t k, uint64_t key)
{
    for (size_t i = 0; i < n; i++) {
        memcpy(o->kb + i * o->d, o->K + (size_t)ids[i] * o->d, o->d * sizeof(float));
        memcpy(o->vb + i * o->dv, o->V + (size_t)ids[i] * o->dv, o->dv * sizeof(float));
    }
    kvc_kh_io io;
    /* the gather buffers are f32: the reference row kernels read them */
    io.keys = kvc_rows_at(o->kb, 0, o->d, KVC_DTYPE_F32, kvc_kernels_ref());
    io.values = kvc_rows_at(o->vb, 0, o->dv, KVC_DTYPE_F32, kvc_kernels_ref());
    io.d = o->d, io.dv = o->dv, io.first = 0, io.S = n;
    io.beta = o->beta, io.center = o->center;
    io.L = o->l_mode == KVC_EXPRESS_L_THEORY ? kvc_kh_theory_L(o->delta, round, k, n) : o->L;
    io.key = key, io.scratch = o->scratch, io.keep = o->keep;
    kvc_kh_select(&io);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (o->keep[i]) ids[m++] = ids[i];
    return m;
}

/* OE over tokens [0, n) into out[0..s); `depth` picks this call's id buffers. */
static void oe(oe_env *o, uint64_t n, uint32_t *out, uint32_t depth)
{
    const uint32_t s = o->s;
    if (n == s) {
        for (uint32_t i = 0; i < s; i++) out[i] = i;
        return;
    }
    const uint64_t t = n / (4ull * s);
    const uint32_t round = log2u(t) / 2; /* t = 4^round */
    uint32_t *all = o->ids + (size_t)depth * (5ull * s + (size_t)o->c * s), *blk = all + 4 * s;
    oe(o, t * s, all, depth + 1); /* S0: the previous rounds' summary */
    const uint64_t k = t < o->c ? t : o->c, q = t > o->c ? t / o->c : 1;
    for (uint32_t b = 1; b <= 3; b++) {
        /* Offline-Subsample: one token per stratum of q (the streaming draw) */
        size_t m = 0;
        for (uint64_t st = 0; st < k * s; st++) {
            const uint64_t iota = q > 1 ? kvc_rng_at(kvc_kh_key(o->seed, TAG_SUB, round, b - 1, 0, st), 0) % q : 0;
            blk[m++] = (uint32_t)(b * t * s + st * q + iota);
        }
        /* Offline-Compress2: halve groups of G = 4s^2/|X| until s points remain */
        for (uint32_t level = 0; m > s; level++) {
            const size_t G = (size_t)((4ull * s * s) / m);
            size_t out_m = 0;
            for (size_t g = 0; g * G < m; g++) {
                uint32_t *grp = blk + g * G;
                size_t h = oe_halve(o, grp, G, round, (uint32_t)k, kvc_kh_key(o->seed, TAG_C2, round, b - 1, level, g));
                memmove(blk + out_m, grp, h * sizeof(uint32_t));
                out_m += h;
            }
            m = out_m;
        }
        memcpy(all + (size_t)b * s, blk, (size_t)s * sizeof(uint32_t));
    }
    size_t m = oe_halve(o, all, 4 * (size_t)s, round, (uint32_t)k, kvc_kh_key(o->seed, TAG_HALVE, round, 0, 0, 0));
    oe_halve(o, all, m, round, (uint32_t)k, kvc_kh_key(o->seed, TAG_HALVE, round, 1, 0, 0));
    memcpy(out, all, (size_t)s * sizeof(uint32_t));
}

/* Depth of the recursion for n = 4^R s (R), or -1 when n is not of that form. */
static int rounds_of(uint64_t n, uint64_t s)
{
    int R = 0;
    uint64_t m = s;
    while (m < n) m *= 4, R++;
    return m == n ? R : -1;
}

size_t kvc_express_offline_scratch_bytes(const kvc_stream_config *cfg, size_t n)
{
    kvc_stream_plan p;
    if (kvc_stream_plan_make(cfg, &p) != KVC_OK || p.method != KVC_METHOD_EXPRESS) return 0;
    const int R = rounds_of(n, p.xp.s);
    if (R < 0) return 0;
    const size_t s = p.xp.s;
    return 4 * s * (p.d + p.dv) * sizeof(float) + kvc_kh_scratch_doubles(p.d, 4 * s) * sizeof(double) + 4 * s +
           (size_t)(R + 1) * (5 * s + (size_t)p.xp.c * s) * sizeof(uint32_t) + 64;
}

kvc_status kvc_express_offline(const kvc_stream_config *cfg, const float *K, const float *V, size_t n, void *scratch,
                               size_t scratch_bytes, uint32_t *out)
{
    kvc_stream_plan p;
    if (cfg == NULL || K == NULL || V == NULL || out == NULL || scratch == NULL) return KVC_E_ARG;
    if (cfg->method != KVC_METHOD_EXPRESS || kvc_stream_plan_make(cfg, &p) != KVC_OK) return KVC_E_ARG;
    if (rounds_of(n, p.xp.s) < 0) return KVC_E_ARG;
    const size_t need = kvc_express_offline_scratch_bytes(cfg, n);
    if (scratch_bytes < need || ((uintptr_t)scratch % sizeof(double)) != 0) return KVC_E_ARENA;
    const size_t s = p.xp.s;
    unsigned char *cur = (unsigned char *)scratch;
    oe_env o;
    o.K = K, o.V = V, o.d = p.d, o.dv = p.dv, o.s = p.xp.s, o.c = p.xp.c;
    o.l_mode = p.xp.l_mode, o.center = p.xp.center == 1, o.L = p.xp.L, o.delta = p.xp.delta, o.beta = p.beta;
    o.seed = cfg->seed;
    o.scratch = (double *)cur, cur += kvc_kh_scratch_doubles(p.d, 4 * s) * sizeof(double);
    o.kb = (float *)cur, cur += 4 * s * p.d * sizeof(float);
    o.vb = (float *)cur, cur += 4 * s * p.dv * sizeof(float);
    o.ids = (uint32_t *)cur, cur += (size_t)(rounds_of(n, s) + 1) * (5 * s + (size_t)p.xp.c * s) * sizeof(uint32_t);
    o.keep = cur;
    oe(&o, n, out, 0);
    return KVC_OK;
}
