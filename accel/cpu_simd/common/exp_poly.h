/* The vector exp every SIMD table uses, as constants (one set for every ISA):
 * e^x for x <= 0 by Cody-Waite reduction x = n ln2 + r (|r| <= ln2/2, ln2
 * split in a high part exact in 9 bits and a low correction), a degree-6
 * polynomial for e^r (relative error < 2e-7), and 2^n through the exponent
 * bits; below KVC_EXP_LO the result flushes to 0. The ISA files evaluate
 *   y = ((((P0 r + P1) r + P2) r + P3) r + P4) r + P5;  e^r = y r^2 + r + 1. */
#ifndef KVC_EXP_POLY_H
#define KVC_EXP_POLY_H
#define KVC_EXP_LO     (-87.3f)
#define KVC_EXP_LOG2E  1.44269504088896341f
#define KVC_EXP_LN2_HI 0.693359375f
#define KVC_EXP_LN2_LO (-2.12194440e-4f)
#define KVC_EXP_P0     1.9875691500e-4f
#define KVC_EXP_P1     1.3981999507e-3f
#define KVC_EXP_P2     8.3334519073e-3f
#define KVC_EXP_P3     4.1665795894e-2f
#define KVC_EXP_P4     1.6666665459e-1f
#define KVC_EXP_P5     5.0000001201e-1f
#endif
