/* Kernel halving with the key-value kernel
 *     K(x, x') = e^{tau<k,k'> - sigma} (<v,v'> + B^2),
 * B = max |v_c| over the call's points, sigma an upper bound of tau||k||^2
 * over them (a constant factor: no decision changes, docs/express.md section 1),
 * keys optionally centred on the call's mean. Pair differences
 * f_i = K(x_2i, .) - K(x_2i+1, .); running a_j = <psi, f_j> over the pairs
 * already decided; pair i keeps its second point when u_i b_i M_i <= a_i,
 * u_i ~ U(-L, L), b_i = ||f_i||, M_i = max_{l<=i} b_l. Rows of the pair Gram
 * matrix are computed on the fly: O(S) scratch, O(S^2 (d+dv)) time. */
#include "kernel_halving.h"

#include <math.h>

#include "kvc/kvc_rng.h"
#include "portable_math.h"

typedef struct kh_ctx {
    const kvc_kh_io *io;
    const double *mu; /* centre (d), or NULL */
    double sigma, B2;
} kh_ctx;

/* One kernel value, from the table's row kernels (any storage type). */
static double kval(const kh_ctx *c, size_t i, size_t j)
{
    const kvc_kh_io *io = c->io;
    const size_t si = io->first + i, sj = io->first + j;
    const double kk = io->keys.rk->dot_rows(kvc_row(&io->keys, si), kvc_row(&io->keys, sj), c->mu, io->d);
    const double vv = io->values.rk->dot_rows(kvc_row(&io->values, si), kvc_row(&io->values, sj), NULL, io->dv);
    return kvc_pm_exp(io->beta * kk - c->sigma) * (vv + c->B2);
}

static double pair_gram(const kh_ctx *c, size_t i, size_t j)
{
    return kval(c, 2 * i, 2 * j) - kval(c, 2 * i, 2 * j + 1) - kval(c, 2 * i + 1, 2 * j) +
           kval(c, 2 * i + 1, 2 * j + 1);
}

/* Uniform in [0, 1) from a keyed draw. */
static double unit_at(uint64_t key, uint64_t i)
{
    return (double)(kvc_rng_at(key, i) >> 11) * (1.0 / 9007199254740992.0);
}

void kvc_kh_select(kvc_kh_io *io)
{
    const size_t S = io->S, m = S / 2, d = io->d;
    double *mu = io->scratch, *a = mu + d, *b = a + m;
    kh_ctx c = {io, io->center ? mu : NULL, 0.0, 0.0};
    if (io->center) {
        for (size_t t = 0; t < d; t++) mu[t] = 0.0;
        for (size_t i = 0; i < S; i++) io->keys.rk->axpy(mu, 1.0, kvc_row(&io->keys, io->first + i), d);
        for (size_t t = 0; t < d; t++) mu[t] /= (double)S;
    }
    double sigma = 0.0, B = 0.0;
    for (size_t i = 0; i < S; i++) {
        const void *k = kvc_row(&io->keys, io->first + i);
        const double n2 = io->keys.rk->dot_rows(k, k, io->center ? mu : NULL, d);
        if (io->beta * n2 > sigma) sigma = io->beta * n2;
        const double vmax = io->values.rk->absmax(kvc_row(&io->values, io->first + i), io->dv);
        if (vmax > B) B = vmax;
    }
    c.sigma = sigma; /* Cauchy-Schwarz: every exponent is <= 0 */
    c.B2 = B * B;
    for (size_t i = 0; i < m; i++) {
        double g = pair_gram(&c, i, i);
        b[i] = sqrt(g > 0.0 ? g : 0.0);
    }
    /* pair 0 provisionally keeps its first point: a_j = G[0][j] */
    for (size_t j = 1; j < m; j++) a[j] = pair_gram(&c, 0, j);
    io->keep[0] = 1, io->keep[1] = 0;
    double M = b[0];
    for (size_t i = 1; i < m; i++) {
        if (b[i] > M) M = b[i];
        const double u = (2.0 * unit_at(io->key, i) - 1.0) * io->L;
        const int second = u * b[i] * M <= a[i];
        io->keep[2 * i] = (uint8_t)!second;
        io->keep[2 * i + 1] = (uint8_t)second;
        const double eta = second ? -1.0 : 1.0;
        for (size_t j = i + 1; j < m; j++) a[j] += eta * pair_gram(&c, i, j);
    }
    /* symmetrization: return the complement with probability 1/2 */
    if (kvc_rng_at(io->key, S) & 1u)
        for (size_t i = 0; i < S; i++) io->keep[i] = (uint8_t)!io->keep[i];
}

uint64_t kvc_kh_key(uint64_t seed, uint32_t tag, uint32_t round, uint32_t sibling, uint32_t level, uint64_t index)
{
    uint64_t h = kvc_rng_mix64(seed ^ 0x243F6A8885A308D3ull);
    h = kvc_rng_mix64(h ^ ((uint64_t)tag << 56 ^ (uint64_t)round << 40 ^ (uint64_t)sibling << 32 ^ level));
    return kvc_rng_mix64(h ^ index);
}

double kvc_kh_theory_L(double delta, uint32_t round, uint32_t k_r, size_t S)
{
    const double pi2 = 9.869604401089358;
    const double delta_r = delta * 6.0 / (pi2 * (double)(round + 1) * (double)(round + 1));
    const double delta_call = delta_r / ((double)k_r * (double)k_r + 1.0);
    return 0.5 + kvc_pm_log(2.0 * (double)S / delta_call);
}
