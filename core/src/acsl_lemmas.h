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

#endif
