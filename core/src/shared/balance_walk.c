/* SoftmaxBalance, pairing variant: a self-balancing walk over the pair
 * differences u_i = phi(x_2i) - phi(x_2i+1) in the feature space of the
 * kernel K(x, x') = e^{beta<kbar,kbar'>} (<v,v'> + kappa), keys centred on
 * the batch mean (attention is invariant to a common key shift, so centring
 * only changes which points are kept). Inner products <u_l, u_i> come from
 * four kernel values computed on the fly: O(S) scratch, O(S^2 (d+dv)) time.
 * The sign rule p = 1/2 - f(a) is odd in a, so the walk is symmetric under
 * eta -> -eta and every point survives with probability exactly 1/2.
 * Value products are divided by the batch's largest ||v||^2, so the walk's
 * choices do not depend on the scale of the values (attention is linear in
 * V: scaling every value by c must scale the output by c) and kappa is
 * relative to that norm; without values (the denominator) they are 1. */
#include <math.h>
#include <string.h>

#include "balance.h"
#include "portable_math.h"

/* Largest exponent passed to exp(): keeps kernel values finite in double. */
#define KVC_BALANCE_MAX_EXP 700.0

typedef struct walk {
    const kvc_balance_io *io;
    const double *mu_dot; /* <k_i, mu> per batch position */
    double mu2;           /* <mu, mu> */
    double inv_v2;        /* 1 / max ||v_i||^2 over the batch (0 when every value is 0) */
} walk;

static size_t slot_of(const kvc_balance_io *io, size_t i) { return i < io->na ? io->a0 + i : io->b0 + (i - io->na); }

/* One pair-Gram entry, from the table's row kernels (any storage type). */
static double kernel(const walk *w, size_t i, size_t j)
{
    const kvc_balance_io *io = w->io;
    const size_t si = slot_of(io, i), sj = slot_of(io, j);
    const double kk = io->keys.rk->dot_rows(kvc_row(&io->keys, si), kvc_row(&io->keys, sj), NULL, io->d) -
                      w->mu_dot[i] - w->mu_dot[j] + w->mu2;
    double x = io->beta * kk;
    if (x > KVC_BALANCE_MAX_EXP) x = KVC_BALANCE_MAX_EXP;
    const double vv =
        io->values.base
            ? io->values.rk->dot_rows(kvc_row(&io->values, si), kvc_row(&io->values, sj), NULL, io->dv) * w->inv_v2
            : 1.0;
    return kvc_pm_exp(x) * (vv + io->kappa);
}

/* Probability of eta = +1 given the walk's current inner product a; counts clips. */
static double sign_probability(kvc_balance_io *io, double a, double cr2)
{
    double p, limit;
    if (io->mode == KVC_BALANCE_THEORY) {
        p = 0.5 - a / (2.0 * cr2);
        limit = cr2;
    } else {
        p = 0.5 - io->gamma * a;
        limit = 1.0 / (2.0 * io->gamma);
    }
    if (fabs(a) > limit) io->clips++;
    if (p < 0.0) p = 0.0;
    if (p > 1.0) p = 1.0;
    return p;
}

/* The authors' split of S signs (flags: 1 = +1), in place: at the first c
 * where a sign class reaches S/2, that class's points up to c are dropped,
 * the other class's up to c kept, and the points after c kept in order until
 * S/2 are (their code weights the last ones 1 instead of 2; a tree level has
 * one weight, so here every survivor stands for two). Returns S/2. */
/*@ requires 1 <= S <= 16777216 && \valid(keep + (0 .. S - 1));
    assigns keep[0 .. S - 1];
    ensures \result <= S / 2;
    ensures \forall integer i; 0 <= i < S ==> keep[i] <= 1;
*/
static size_t split_batch(uint8_t *keep, size_t S)
{
    const size_t half = S / 2;
    size_t plus = 0, minus = 0, c = 0;
    /*@ loop invariant 0 <= c <= S && plus + minus == c;
        loop assigns c, plus, minus;
        loop variant S - c;
    */
    for (; c < S; c++) {
        if (keep[c])
            plus++;
        else
            minus++;
        if (plus == half || minus == half) break;
    }
    const uint8_t winner = plus == half ? 1u : 0u;
    size_t kept = 0;
    /*@ loop invariant 0 <= i <= S && kept <= half && kept <= i;
        loop invariant \forall integer j; 0 <= j < i ==> keep[j] <= 1;
        loop assigns i, kept, keep[0 .. S - 1];
        loop variant S - i;
    */
    for (size_t i = 0; i < S; i++) {
        const int stays = i <= c ? keep[i] != winner : kept < half;
        keep[i] = (uint8_t)(stays && kept < half ? 1u : 0u);
        kept += keep[i];
    }
    return kept;
}

size_t kvc_balance_select(kvc_balance_io *io)
{
    const size_t S = io->na + io->nb, d = io->d;
    double *mu = io->scratch, *mu_dot = mu + d, *self = mu_dot + S;
    /* batch mean of the keys */
    for (size_t c = 0; c < d; c++) mu[c] = 0.0;
    for (size_t i = 0; i < S; i++) io->keys.rk->axpy(mu, 1.0, kvc_row(&io->keys, slot_of(io, i)), d);
    for (size_t c = 0; c < d; c++) mu[c] /= (double)S;
    double mu2 = 0.0;
    for (size_t c = 0; c < d; c++) mu2 += mu[c] * mu[c];
    double r_key2 = 0.0, max_v2 = 0.0;
    for (size_t i = 0; i < S; i++) {
        const size_t si = slot_of(io, i);
        const void *k = kvc_row(&io->keys, si);
        const double md = io->keys.rk->dot_f64(k, mu, d);
        mu_dot[i] = md;
        self[i] = io->keys.rk->dot_rows(k, k, NULL, d) - 2.0 * md + mu2; /* ||k_i - mu||^2 */
        if (self[i] > r_key2) r_key2 = self[i];
        const void *vr = io->values.base ? kvc_row(&io->values, si) : NULL;
        const double v2 = vr ? io->values.rk->dot_rows(vr, vr, NULL, io->dv) : 1.0;
        if (v2 > max_v2) max_v2 = v2;
    }
    walk w = {io, mu_dot, mu2, io->values.base && max_v2 > 0.0 ? 1.0 / max_v2 : 1.0};
    /* the largest value factor of the kernel: <v,v>/max + kappa <= 1 + kappa */
    const double r_val2 = (max_v2 > 0.0 ? 1.0 : 0.0) + io->kappa;
    /* theory mode: R = 2 e^{beta r_key^2 / 2} r_val, c = 30 ln(S / delta) */
    double half = io->beta * r_key2 / 2.0;
    if (half > KVC_BALANCE_MAX_EXP / 2) half = KVC_BALANCE_MAX_EXP / 2;
    const double R2 = 4.0 * kvc_pm_exp(2.0 * half) * r_val2;
    const double cr2 = 30.0 * kvc_pm_log((double)S / io->delta) * R2;

    if (io->mode != KVC_BALANCE_SMALLER_CLASS && io->mode != KVC_BALANCE_SPLIT) {
        const size_t P = S / 2;
        for (size_t i = 0; i < P; i++) {
            double a = 0.0;
            for (size_t l = 0; l < i; l++) {
                const double g = kernel(&w, 2 * l, 2 * i) - kernel(&w, 2 * l, 2 * i + 1) -
                                 kernel(&w, 2 * l + 1, 2 * i) + kernel(&w, 2 * l + 1, 2 * i + 1);
                a += io->keep[2 * l] ? g : -g; /* eta_l = +1 iff the first point was kept */
            }
            const double p = sign_probability(io, a, cr2);
            const int plus = kvc_rng_unit(io->rng) < p;
            io->keep[2 * i] = (uint8_t)plus;
            io->keep[2 * i + 1] = (uint8_t)!plus;
        }
        return P;
    }
    /* signs for single points: the paper's literal Alg. 2 (smaller-class), or
       the authors' code (split: the first point +1, then the split below) */
    const int split = io->mode == KVC_BALANCE_SPLIT;
    size_t plus_count = 0;
    for (size_t i = 0; i < S; i++) {
        double a = 0.0;
        for (size_t l = 0; l < i; l++) a += io->keep[l] ? kernel(&w, l, i) : -kernel(&w, l, i);
        const double p = sign_probability(io, a, cr2);
        io->keep[i] = (uint8_t)((split && i == 0) || kvc_rng_unit(io->rng) < p);
        plus_count += io->keep[i];
    }
    if (split) return split_batch(io->keep, S);
    const int keep_plus = plus_count <= S - plus_count;
    for (size_t i = 0; i < S; i++) io->keep[i] = (uint8_t)(keep_plus ? io->keep[i] : !io->keep[i]);
    return keep_plus ? plus_count : S - plus_count;
}
