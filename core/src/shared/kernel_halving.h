/* Kernel halving (docs/express.md section 2), the Thinformer variant: a
 * self-balancing walk over consecutive pairs with the cumulative-max
 * threshold, symmetrized by one coin per call. Internal to the core. */
#ifndef KVC_KERNEL_HALVING_H
#define KVC_KERNEL_HALVING_H

#include <stddef.h>
#include <stdint.h>

#include "rows.h"

/* One Halve call over slots [first, first + S) of the key/value arrays. */
typedef struct kvc_kh_io {
    kvc_rows keys, values; /* slot rows of d and dv elements, read through their row kernels */
    size_t d, dv;
    size_t first, S; /* S even, >= 2 */
    double beta;     /* score scale tau */
    int center;      /* 1: keys minus their mean over the call */
    double L;        /* threshold scale (> 0) */
    uint64_t key;    /* random draws: u_i = draw(key, i), coin = draw(key, S) */
    double *scratch; /* kvc_kh_scratch_doubles(d, S) doubles */
    uint8_t *keep;   /* S flags, written: exactly one per pair */
} kvc_kh_io;

/*@ requires d <= 256 && S <= 16777216;
    assigns \nothing;
    ensures \result == d + 2 * S;
*/
static inline size_t kvc_kh_scratch_doubles(size_t d, size_t S) { return d + S + S; }

/* Run the walk; fills io->keep. */
void kvc_kh_select(kvc_kh_io *io);

/* Key of a random draw group: mixes the parts (seed, tag, round, sibling, level, index). */
uint64_t kvc_kh_key(uint64_t seed, uint32_t tag, uint32_t round, uint32_t sibling, uint32_t level, uint64_t index);

/* The L of the docs/express.md section 6.4 delta schedule for round r with k_r = min(4^r, c). */
double kvc_kh_theory_L(double delta, uint32_t round, uint32_t k_r, size_t S);

#endif
