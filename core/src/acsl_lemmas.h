/* Ghost "lemma functions" for the proofs (verify/): products bounded by the
 * products of their bounds. SMT solvers do not reliably instantiate a
 * quantified lemma about * in a large context; a ghost call states the one
 * instance a goal needs, and the function itself is proved once in its own
 * tiny context. Comments only: the compilers see nothing here. */
#ifndef KVC_ACSL_LEMMAS_H
#define KVC_ACSL_LEMMAS_H

#include <stdint.h>

/*@ ghost
  /@ requires a <= b && c <= e;
     assigns \nothing;
     ensures a * c <= b * e;
  @/
  static void kvc_mul_le(uint64_t a, uint64_t b, uint64_t c, uint64_t e) {}
*/

/*@ ghost
  // row i of an array of n rows of s bytes ends inside the array, and the
  // array is below the largest (2^24 rows of 1032 bytes)
  /@ requires i < n;
     assigns \nothing;
     ensures i * s + s <= n * s;
     ensures n <= 16777216 && s <= 1032 ==> n * s <= 17314086912;
  @/
  static void kvc_row_in(uint64_t i, uint64_t n, uint64_t s) {}
*/

/*@ ghost
  // a quotient times its divisor does not exceed the dividend
  /@ requires y > 0 && q == x / y;
     assigns \nothing;
     ensures q * y <= x;
  @/
  static void kvc_div_mul_le(uint64_t x, uint64_t y, uint64_t q) {}
*/

#endif
