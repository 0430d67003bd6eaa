/* SplitMix64 in counter mode: draw n of key K is mix64(K + (n+1) * gamma).
 * Unsigned wrap-around is intended in every arithmetic operation of this file. */
#include "kvc/kvc_rng.h"

#include <math.h>

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

uint64_t kvc_rng_at(uint64_t key, uint64_t index)
{
    return kvc_rng_mix64(key + (index + 1u) * KVC_RNG_GAMMA);
}

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
    uint32_t threshold = (uint32_t)((0u - bound) % bound); /* 2^32 mod bound */
    uint64_t m = 0;
    /*@ loop invariant 0 <= tries <= 64;
        loop invariant r->counter == \at(r->counter, Pre) + tries;
        loop assigns tries, m, r->counter;
        loop variant 64 - tries;
    */
    for (uint32_t tries = 0; tries < KVC_RNG_MAX_TRIES; tries++) {
        uint32_t x = (uint32_t)(kvc_rng_next(r) / 4294967296ull);
        m = (uint64_t)x * (uint64_t)bound;
        if ((uint32_t)(m % 4294967296ull) >= threshold) break;
    }
    return (uint32_t)(m / 4294967296ull);
}

double kvc_rng_unit(kvc_rng *r)
{
    return (double)(kvc_rng_next(r) / 2048u) * (1.0 / 9007199254740992.0);
}

double kvc_rng_normal(kvc_rng *r)
{
    double u1 = kvc_rng_unit(r);
    double u2 = kvc_rng_unit(r);
    /* 1 - u1 lies in (0, 1]: log never sees 0. */
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}
