/* int4 rows (KVC_DTYPE_I4): groups of 32 elements along the row, each an f16
 * scale and an f16 minimum, then the nibbles, two per byte (element 2i in the
 * low nibble). Row: [ng x (u16 scale, u16 min)][ceil(dim/2) bytes][zeros to
 * a multiple of 4], ng = ceil(dim / 32).
 *
 * An element's value is min + q * scale, evaluated in double from the two
 * stored halves (exact: a half has 11 significant bits and q 4), so every
 * kernel reads the same numbers; quantisation uses the *stored* (rounded)
 * scale and minimum, so the round trip error is at most scale / 2 per element
 * plus the halves' rounding of the group's range (relative 2^-11).
 *
 * Not yet covered by the WP proofs of rows_typed.c (tests/unit/test_dtype
 * checks them against the definition above). */
#include <math.h>
#include <string.h>

#include "rows_ref.h"
#include "rows_typed.h"

#define I4_GROUP 32u

static size_t n_groups(size_t dim) { return (dim + I4_GROUP - 1u) / I4_GROUP; }

static void group_header(const void *row, size_t g, double *scale, double *min)
{
    uint16_t h[2];
    memcpy(h, (const unsigned char *)row + 4u * g, sizeof h);
    *scale = (double)kvc_f16_to_f32(h[0]);
    *min = (double)kvc_f16_to_f32(h[1]);
}

static const unsigned char *nibbles(const void *row, size_t dim)
{
    return (const unsigned char *)row + 4u * n_groups(dim);
}

static unsigned nib(const unsigned char *q, size_t c) { return (q[c >> 1] >> ((c & 1u) * 4u)) & 15u; }

/* Element c of a row whose group headers are already read. */
#define I4_ELEM(c) (mn[(c) / I4_GROUP] + (double)nib(q, c) * sc[(c) / I4_GROUP])

/* The next half toward -infinity (finite halves only; -65504 stays). */
static uint16_t half_below(uint16_t h)
{
    if (h == 0x0000u) return 0x8001u;                  /* +0 -> the smallest negative subnormal */
    if ((h & 0x8000u) == 0) return (uint16_t)(h - 1u); /* positive: one ulp down */
    return h < 0xFBFFu ? (uint16_t)(h + 1u) : h;       /* negative: one ulp more negative */
}

static void headers(const void *row, size_t dim, double *sc, double *mn)
{
    for (size_t g = 0; g < n_groups(dim); g++) group_header(row, g, &sc[g], &mn[g]);
}

void kvc_k_i4_store__ref(void *row, const float *x, size_t dim)
{
    unsigned char *r = (unsigned char *)row;
    const size_t ng = n_groups(dim), nb = ((dim + 1u) / 2u + 3u) / 4u * 4u;
    unsigned char *q = r + 4u * ng;
    memset(q, 0, nb); /* padding included: arenas stay deterministic */
    for (size_t g = 0; g < ng; g++) {
        const size_t c0 = g * I4_GROUP, c1 = c0 + I4_GROUP < dim ? c0 + I4_GROUP : dim;
        float lo = x[c0], hi = x[c0];
        for (size_t c = c0 + 1; c < c1; c++) {
            if (x[c] < lo) lo = x[c];
            if (x[c] > hi) hi = x[c];
        }
        /* the stored halves define the grid: the minimum is the largest half
           at or below lo, the step the smallest half with min + 15 step >= hi
           (both saturate at +-65504, like f16 storage) */
        uint16_t hm = kvc_f32_to_f16(lo);
        if ((double)kvc_f16_to_f32(hm) > (double)lo) hm = half_below(hm);
        const double mn = (double)kvc_f16_to_f32(hm);
        uint16_t hs = kvc_f32_to_f16((float)(((double)hi - mn) / 15.0));
        while ((double)kvc_f16_to_f32(hs) * 15.0 + mn < (double)hi && hs < 0x7BFFu) hs++;
        const double sc = (double)kvc_f16_to_f32(hs);
        const uint16_t h[2] = {hs, hm};
        memcpy(r + 4u * g, h, sizeof h);
        for (size_t c = c0; c < c1; c++) {
            const double t = sc > 0.0 ? ((double)x[c] - mn) / sc : 0.0;
            /* clamp before rounding: past +-65504 the grid saturates and t can
               exceed a long (lround's result is then unspecified) */
            const long k = t >= 15.0 ? 15 : t > 0.0 ? lround(t) : 0;
            q[c >> 1] |= (unsigned char)((unsigned)k << ((c & 1u) * 4u));
        }
    }
}

void kvc_k_i4_load__ref(const void *row, float *x, size_t dim)
{
    double sc[KVC_I4_MAX_GROUPS], mn[KVC_I4_MAX_GROUPS];
    headers(row, dim, sc, mn);
    const unsigned char *q = nibbles(row, dim);
    for (size_t c = 0; c < dim; c++) x[c] = (float)I4_ELEM(c);
}

double kvc_k_i4_dot_f32__ref(const void *row, const float *x, size_t dim)
{
    double sc[KVC_I4_MAX_GROUPS], mn[KVC_I4_MAX_GROUPS], s = 0.0;
    headers(row, dim, sc, mn);
    const unsigned char *q = nibbles(row, dim);
    for (size_t c = 0; c < dim; c++) s += I4_ELEM(c) * (double)x[c];
    return s;
}

double kvc_k_i4_dot_f64__ref(const void *row, const double *x, size_t dim)
{
    double sc[KVC_I4_MAX_GROUPS], mn[KVC_I4_MAX_GROUPS], s = 0.0;
    headers(row, dim, sc, mn);
    const unsigned char *q = nibbles(row, dim);
    for (size_t c = 0; c < dim; c++) s += I4_ELEM(c) * x[c];
    return s;
}

double kvc_k_i4_dot_rows__ref(const void *a, const void *b, const double *mu, size_t dim)
{
    double sa[KVC_I4_MAX_GROUPS], ma[KVC_I4_MAX_GROUPS], sb[KVC_I4_MAX_GROUPS], mb[KVC_I4_MAX_GROUPS], s = 0.0;
    headers(a, dim, sa, ma);
    headers(b, dim, sb, mb);
    const unsigned char *qa = nibbles(a, dim), *qb = nibbles(b, dim);
    for (size_t c = 0; c < dim; c++) {
        const double m = mu != NULL ? mu[c] : 0.0;
        const size_t gi = c / I4_GROUP;
        const double xa = ma[gi] + (double)nib(qa, c) * sa[gi], xb = mb[gi] + (double)nib(qb, c) * sb[gi];
        s += (xa - m) * (xb - m);
    }
    return s;
}

double kvc_k_i4_sqdist_f32__ref(const void *row, const float *x, size_t dim)
{
    double sc[KVC_I4_MAX_GROUPS], mn[KVC_I4_MAX_GROUPS], s = 0.0;
    headers(row, dim, sc, mn);
    const unsigned char *q = nibbles(row, dim);
    for (size_t c = 0; c < dim; c++) {
        const double e = I4_ELEM(c) - (double)x[c];
        s += e * e;
    }
    return s;
}

void kvc_k_i4_axpy__ref(double *acc, double p, const void *row, size_t dim)
{
    double sc[KVC_I4_MAX_GROUPS], mn[KVC_I4_MAX_GROUPS];
    headers(row, dim, sc, mn);
    const unsigned char *q = nibbles(row, dim);
    for (size_t c = 0; c < dim; c++) acc[c] += p * I4_ELEM(c);
}

double kvc_k_i4_absmax__ref(const void *row, size_t dim)
{
    double sc[KVC_I4_MAX_GROUPS], mn[KVC_I4_MAX_GROUPS], m = 0.0;
    headers(row, dim, sc, mn);
    const unsigned char *q = nibbles(row, dim);
    for (size_t c = 0; c < dim; c++) {
        const double a = fabs(I4_ELEM(c));
        if (a > m) m = a;
    }
    return m;
}
