/* exp, log and cos computed the same way on every target. libm's results
 * differ in the last bit between C libraries (glibc and newlib do), and the
 * methods keep such results in their state (scores, kernel sums, random
 * normals), so a snapshot taken on one target would continue differently on
 * another. These use only IEEE basic operations (+ - * /, exact in the sense
 * of IEEE 754 on every target the core supports, with contraction off) and
 * the exact frexp/ldexp, so their bits are the same everywhere. Accuracy: a
 * few ulp (unit test tests/unit/test_portable_math.c bounds them against the
 * host libm). */
#ifndef KVC_PORTABLE_MATH_H
#define KVC_PORTABLE_MATH_H

/* e^x for any double: +inf above 709.78, 0 below -745.2, NaN for NaN. */
double kvc_pm_exp(double x);

/* Natural logarithm: -inf at 0, NaN below 0 or for NaN, +inf at +inf. */
double kvc_pm_log(double x);

/* cos x for finite |x| <= 2^20 (the random normals need [0, 2 pi)); NaN outside. */
double kvc_pm_cos(double x);

#endif
