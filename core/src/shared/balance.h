/* SoftmaxBalance (docs/methods.md section 2.1): choose which points of a batch
 * survive a halving. Internal to the core. */
#ifndef KVC_BALANCE_H
#define KVC_BALANCE_H

#include <stdint.h>

#include "kvc/kvc_rng.h"
#include "kvc/kvc_stream.h"
#include "rows.h"

/* One halving. The batch is slots [a0, a0+na) followed by [b0, b0+nb) of the
 * key (and value) arrays; `keep` receives one flag per batch position. */
typedef struct kvc_balance_io {
    kvc_rows keys;   /* slot rows of d elements, read through keys.rk */
    kvc_rows values; /* slot rows of dv elements, or base NULL: every value is the scalar 1 */
    size_t d, dv;
    size_t a0, na, b0, nb;
    double beta;
    double kappa; /* kernel e^{beta<k,k'>} (<v,v'> + kappa) */
    kvc_balance_mode mode;
    double gamma, delta;
    double *scratch; /* kvc_balance_scratch_doubles(d, S) doubles */
    uint8_t *keep;   /* S flags, written */
    kvc_rng *rng;
    uint64_t clips; /* incremented per clipped step */
} kvc_balance_io;

/* Scratch (doubles) for a batch of S points in d dimensions. */
/*@ requires d <= 256 && S <= 16777216;
    assigns \nothing;
    ensures \result == d + 2 * S;
*/
static inline size_t kvc_balance_scratch_doubles(size_t d, size_t S) { return d + 2 * S; }

/* Run the walk. Pairing modes keep exactly one point of each consecutive
 * pair (S must be even); the smaller-class mode keeps the smaller sign class
 * of a walk over single points (<= S/2 points); the split mode walks single
 * points and keeps floor(S/2) by the authors' split. Returns the number kept. */
size_t kvc_balance_select(kvc_balance_io *io);

#endif
