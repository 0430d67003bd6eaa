/**
 * @file kvc_rng.h
 * @brief Seeded counter-based random numbers (SplitMix64 in counter mode).
 *
 * Why this generator: the n-th draw is a pure function mix64(key + n*gamma) of
 * the key and the counter, so
 *  - the whole generator state is 16 bytes stored inside a method's arena and
 *    copied with it (same seed + same stream -> same bytes on every platform);
 *  - any draw can be recomputed or keyed by a call (kvc_rng_at), which the
 *    streaming/offline twins of later methods need;
 *  - a rejected update restores nothing: it simply never touched the counter;
 *  - it uses only 64-bit adds, xors, shifts and multiplies (fine on Cortex-M);
 *  - SplitMix64's output function passes BigCrush, which is far more than the
 *    sampling tests here need.
 * It is not a cryptographic generator.
 */
#ifndef KVC_RNG_H
#define KVC_RNG_H

#if !defined(KVC_ADVANCED)
#error "kvc_rng.h is in the advanced tier: #define KVC_ADVANCED before including it (docs/api.md)"
#endif

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Generator state: a key derived from the seed and a draw counter. */
typedef struct kvc_rng {
    uint64_t key;     /**< mix of the user seed; never changes after seeding */
    uint64_t counter; /**< number of 64-bit words drawn so far */
} kvc_rng;

/*@ // -------- ACSL: counter-based generator --------
    predicate kvc_rng_ok(kvc_rng *r) = \valid(r);
*/

/**
 * @brief SplitMix64 finaliser: a bijective 64-bit mixing function.
 * @param x any value.
 * @return mixed value.
 */
/*@ assigns \nothing; */
uint64_t kvc_rng_mix64(uint64_t x);

/**
 * @brief Seed a generator; the same seed always gives the same sequence.
 * @param r     generator to initialise (must be valid).
 * @param seed  any 64-bit value.
 */
/*@ requires valid_r: \valid(r);
    assigns r->key, r->counter;
    ensures counter_zero: r->counter == 0;
*/
void kvc_rng_seed(kvc_rng *r, uint64_t seed);

/**
 * @brief Pure counter-based draw: the @p index-th word of the stream keyed by @p key.
 * @param key    a key (e.g. kvc_rng::key or a per-call key).
 * @param index  position in that stream, any value.
 */
/*@ assigns \nothing; */
uint64_t kvc_rng_at(uint64_t key, uint64_t index);

/**
 * @brief Next 64-bit word; advances the counter by exactly one.
 * @param r  seeded generator; its counter must not be UINT64_MAX.
 */
/*@ requires valid_r: \valid(r);
    requires room: r->counter < UINT64_MAX;
    assigns r->counter;
    ensures advanced: r->counter == \old(r->counter) + 1;
*/
uint64_t kvc_rng_next(kvc_rng *r);

/**
 * @brief Uniform integer in [0, bound) without bias (Lemire's multiply-shift
 *        with rejection); advances the counter by at least one.
 * @param r      seeded generator.
 * @param bound  1 .. UINT32_MAX.
 * @return a value in [0, bound).
 */
/*@ requires valid_r: \valid(r);
    requires bound_pos: 0 < bound;
    requires room: r->counter < UINT64_MAX - 64;
    assigns r->counter;
    ensures in_range: \result < bound;
    ensures advanced: r->counter > \old(r->counter);
    ensures bounded: r->counter <= \old(r->counter) + 64;
*/
uint32_t kvc_rng_below(kvc_rng *r, uint32_t bound);

/**
 * @brief Uniform double in [0, 1) with 53 random bits; advances the counter by one.
 * @param r  seeded generator; counter < UINT64_MAX.
 */
/*@ requires valid_r: \valid(r);
    requires room: r->counter < UINT64_MAX;
    assigns r->counter;
    ensures advanced: r->counter == \old(r->counter) + 1;
    ensures unit_range: \is_finite(\result) && 0.0 <= \result <= 1.0 - 1.0/9007199254740992;
*/
double kvc_rng_unit(kvc_rng *r);

/**
 * @brief Standard normal deviate (Box-Muller, both uniforms drawn; two words).
 * @param r  seeded generator; counter < UINT64_MAX - 1.
 */
/*@ requires valid_r: \valid(r);
    requires room: r->counter < UINT64_MAX - 1;
    assigns r->counter;
    ensures advanced: r->counter == \old(r->counter) + 2;
*/
double kvc_rng_normal(kvc_rng *r);

#ifdef __cplusplus
}
#endif
#endif /* KVC_RNG_H */
