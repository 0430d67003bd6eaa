/* SplitMix64 in counter mode: draw n of key K is mix64(K + (n+1) * gamma).
 * Unsigned wrap-around is intended in every arithmetic operation of this file. */
#include "kvc/kvc_rng.h"

#include <math.h>
#include "portable_math.h"
#include "internal/kvc_internal.h"

/* libm behind small contracts that the proofs take as trusted (like
 * kvc_exp_nonpos / kvc_log_pos in kvc_kernels.h). Frama-C's own libc gives
 * log, sqrt and cos an 'assigns errno' (errno only changes on a domain or range
 * error, which the arguments below exclude), which would otherwise leak into
 * kvc_rng_normal's assigns clause. The proof jobs define KVC_WP_TRUSTED_LIBM
 * (verify/CMakeLists.txt) so that WP sees these prototypes only; every build
 * compiles the bodies. */
/* trusted-by: tests/unit/test_portable_math.c (rng_wrapper_contracts: kvc_pm_log on (0, 1]). */
/*@ requires 0.0 < x <= 1.0;
    assigns \nothing;
    ensures \is_finite(\result) && -746.0 <= \result <= 0.0;
*/
static double rng_log01(double x);
/* trusted-by: tests/unit/test_portable_math.c (rng_wrapper_contracts: sqrt on [0, 1521]). */
/*@ requires \is_finite(x) && 0.0 <= x <= 1521.0;
    assigns \nothing;
    ensures \is_finite(\result) && 0.0 <= \result <= 39.0;
*/
static double rng_sqrt(double x);
/* kvc_pm_cos answers NaN past |x| = 2^20, hence the range in the precondition
 * (the caller's argument, 2 pi u, is below 6.3).
 * trusted-by: tests/unit/test_portable_math.c (rng_wrapper_contracts: kvc_pm_cos on [-2^20, 2^20]). */
/*@ requires \is_finite(x) && -1048576.0 <= x <= 1048576.0;
    assigns \nothing;
    ensures \is_finite(\result) && -1.0 <= \result <= 1.0;
*/
static double rng_cos(double x);
#ifndef KVC_WP_TRUSTED_LIBM
static double rng_log01(double x) { return kvc_pm_log(x); }
static double rng_sqrt(double x) { return sqrt(x); }
static double rng_cos(double x) { return kvc_pm_cos(x); }
#endif

/*@ axiomatic KvcRngExactConversion {
      // IEEE binary64 represents every integer of magnitude <= 2^53 exactly
      // (C11 F.4 / 6.3.1.4: such a conversion is exact). True, but the provers
      // here cannot derive it from WP's rounding model, so it is an axiom.
      axiom kvc_u53_exact: \forall integer k; 0 <= k <= 9007199254740992 ==>
        \is_finite((double)k) && (double)k == k;
    }
*/

/*@ ghost
  // a*c <= b*c: proved here once, in a tiny context; each call instantiates
  // it exactly (SMT solvers do not reliably find such non-linear instances).
  /@ requires a <= b;
     assigns \nothing;
     ensures a * c <= b * c;
  @/
  static void rng_mul_mono(uint64_t a, uint64_t b, uint64_t c) {}
*/

#define KVC_RNG_GAMMA 0x9E3779B97F4A7C15ull
/* Rejection rounds for kvc_rng_below: each round rejects with probability
 * < bound / 2^32, so 64 rounds leave a bias below 2^-64 for any bound < 2^31;
 * bounding the loop keeps the counter contract (and the proof) simple. */
#define KVC_RNG_MAX_TRIES 64u

uint64_t kvc_rng_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void kvc_rng_seed(kvc_rng *r, uint64_t seed)
{
    /* Mixing the seed keeps seeds 1, 2, 3 ... on unrelated streams. */
    r->key = kvc_rng_mix64(seed ^ 0x6A09E667F3BCC909ull);
    r->counter = 0;
}

uint64_t kvc_rng_at(uint64_t key, uint64_t index) { return kvc_rng_mix64(key + (index + 1u) * KVC_RNG_GAMMA); }

uint64_t kvc_rng_next(kvc_rng *r)
{
    uint64_t x = kvc_rng_at(r->key, r->counter);
    r->counter = r->counter + 1u;
    return x;
}

uint32_t kvc_rng_below(kvc_rng *r, uint32_t bound)
{
    /* Lemire (2019): m = x * bound; the high word is uniform once the low word
     * is not in the biased zone [0, 2^32 mod bound). '/ 2^32' instead of '>> 32'
     * compiles the same and keeps the arithmetic linear for the prover. */
    /* 2^32 mod bound, as (2^32 - bound) mod bound: UINT32_MAX - bound + 1 is
     * the value 0u - bound wraps to, computed without wrapping (bound > 0). */
    uint32_t threshold = (uint32_t)((UINT32_MAX - bound + 1u) % bound);
    uint64_t m = 0;
    /*@ loop invariant 0 <= tries <= 64;
        loop invariant r->counter == \at(r->counter, Pre) + tries;
        loop invariant m_range: m <= 4294967295 * bound;
        loop assigns tries, m, r->counter;
        loop variant 64 - tries;
    */
    for (uint32_t tries = 0; tries < KVC_RNG_MAX_TRIES; tries++) {
        uint32_t x = (uint32_t)(kvc_rng_next(r) / 4294967296ull);
        //@ ghost rng_mul_mono(x, 4294967295, bound);
        m = (uint64_t)x * (uint64_t)bound;
        if ((uint32_t)(m % 4294967296ull) >= threshold) break;
    }
    return (uint32_t)(m / 4294967296ull);
}

double kvc_rng_unit(kvc_rng *r)
{
    const uint64_t k = kvc_rng_next(r) / 2048u; /* the top 53 bits */
    //@ assert k_range: k <= 9007199254740991;
    const double u = (double)k; /* exact */
    //@ assert u_range: \is_finite(u) && 0.0 <= u <= 9007199254740991.0;
    return u * (1.0 / 9007199254740992.0); /* exact: times 2^-53 */
}

double kvc_rng_normal(kvc_rng *r)
{
    double u1 = kvc_rng_unit(r);
    double u2 = kvc_rng_unit(r);
    /* 1 - u1 lies in (0, 1]: log never sees 0. */
    return rng_sqrt(-2.0 * rng_log01(1.0 - u1)) * rng_cos(6.283185307179586 * u2);
}
