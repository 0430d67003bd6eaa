/* A template, included once per type (no include guard): the reference row
 * kernels of a type stored as integer codes times one f32 scale per row
 * (int8, Q15). The includer defines
 *   KVC_SC_T          the code type (int8_t, int16_t);
 *   KVC_SC_FN(op)     the kernel's name (kvc_k_i8_##op##__ref, ...);
 *   KVC_SC_MAX        the largest code as a double (127.0, 32767.0), and
 *   KVC_SC_MAX_CODE   as an integer (127, 32767);
 *   KVC_SC_ROUND      round and clamp to +-KVC_SC_MAX (kvc_round_clamp127, ...);
 *   KVC_SC_PAD        the codes a row is padded to a multiple of (4, 2: the row
 *                     to a multiple of 4 bytes);
 * and KVC_SC_BODIES for the definitions (rows_typed.c), else the prototypes
 * with their contracts (rows_typed.h); it undefines all but KVC_SC_BODIES
 * at the end (rows_scaled_types.h lists the instances). The
 * ACSL below is preprocessed with those macros (Frama-C's -pp-annot, on by
 * default), so each instance is proved on its own (verify wp_rows).
 *
 * A float times a code has at most 24 + 15 significant bits, so every product
 * is exact in double, and so is a code-by-code product (at most 30 bits);
 * only the sums round. q holds dim codes padded with zeros; s is the row's
 * scale, x = s * q. */

#ifdef KVC_SC_BODIES

float KVC_SC_FN(quantise)(KVC_SC_T *q, const float *x, size_t dim)
{
    double amax = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, amax;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++)
        if (fabs((double)x[c]) > amax) amax = fabs((double)x[c]);
    const float scale = (float)(amax / KVC_SC_MAX);
    const double inv = scale > 0.0f ? 1.0 / (double)scale : 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, q[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        q[c] = (KVC_SC_T)KVC_SC_ROUND((double)x[c] * inv);
    }
    const size_t padded = (dim + KVC_SC_PAD - 1) / KVC_SC_PAD * KVC_SC_PAD;
    //@ assert padded == (dim + KVC_SC_PAD - 1) / KVC_SC_PAD * KVC_SC_PAD && dim <= padded <= 256;
    /*@ loop invariant dim <= c <= padded;
        loop assigns c, q[dim .. padded - 1];
        loop variant padded - c;
    */
    for (size_t c = dim; c < padded; c++) q[c] = 0;
    return scale;
}

void KVC_SC_FN(load)(float s, const KVC_SC_T *q, float *x, size_t dim)
{
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, x[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) x[c] = (float)((double)s * (double)q[c]);
}

double KVC_SC_FN(dot_f32)(float s, const KVC_SC_T *q, const float *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)x[c] * (double)q[c];
    return acc * (double)s;
}

double KVC_SC_FN(dot_f64)(float s, const KVC_SC_T *q, const double *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)q[c] * x[c];
    return acc * (double)s;
}

double KVC_SC_FN(dot_rows)(float sa, const KVC_SC_T *qa, float sb, const KVC_SC_T *qb, const double *mu, size_t dim)
{
    double acc = 0.0;
    if (mu != 0) {
        /*@ loop invariant 0 <= c <= dim;
            loop assigns c, acc;
            loop variant dim - c;
        */
        for (size_t c = 0; c < dim; c++)
            acc += ((double)sa * (double)qa[c] - mu[c]) * ((double)sb * (double)qb[c] - mu[c]);
        return acc;
    }
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)qa[c] * (double)qb[c]; /* exact: at most 256 x 2^30 < 2^53 */
    return acc * (double)sa * (double)sb;
}

double KVC_SC_FN(sqdist_f32)(float s, const KVC_SC_T *q, const float *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const double t = (double)s * (double)q[c] - (double)x[c];
        acc += t * t;
    }
    return acc;
}

void KVC_SC_FN(axpy)(double *acc, double p, float s, const KVC_SC_T *q, size_t dim)
{
    const double ps = p * (double)s;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc[c] += ps * (double)q[c];
}

double KVC_SC_FN(absmax)(float s, const KVC_SC_T *q, size_t dim)
{
    int m = 0;
    /*@ loop invariant 0 <= c <= dim;
        loop invariant 0 <= m <= KVC_SC_MAX_CODE + 1;
        loop assigns c, m;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const int a = q[c] < 0 ? -(int)q[c] : (int)q[c];
        if (a > m) m = a;
    }
    return (double)m * (double)s;
}

#else /* the prototypes */

/*@ requires 1 <= dim <= 256;
    requires \valid(q + (0 .. (dim + KVC_SC_PAD - 1) / KVC_SC_PAD * KVC_SC_PAD - 1)) && \valid_read(x + (0 .. dim - 1));
    requires \separated(q + (0 .. (dim + KVC_SC_PAD - 1) / KVC_SC_PAD * KVC_SC_PAD - 1), x + (0 .. dim - 1));
    assigns q[0 .. (dim + KVC_SC_PAD - 1) / KVC_SC_PAD * KVC_SC_PAD - 1];
*/
float KVC_SC_FN(quantise)(KVC_SC_T *q, const float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(q + (0 .. dim - 1)) && \valid(x + (0 .. dim - 1));
    requires \separated(q + (0 .. dim - 1), x + (0 .. dim - 1));
    assigns x[0 .. dim - 1];
*/
void KVC_SC_FN(load)(float s, const KVC_SC_T *q, float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(q + (0 .. dim - 1)) && \valid_read(x + (0 .. dim - 1));
    assigns \nothing;
*/
double KVC_SC_FN(dot_f32)(float s, const KVC_SC_T *q, const float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(q + (0 .. dim - 1)) && \valid_read(x + (0 .. dim - 1));
    assigns \nothing;
*/
double KVC_SC_FN(dot_f64)(float s, const KVC_SC_T *q, const double *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(qa + (0 .. dim - 1)) && \valid_read(qb + (0 .. dim - 1));
    requires mu == \null || \valid_read(mu + (0 .. dim - 1));
    assigns \nothing;
*/
double KVC_SC_FN(dot_rows)(float sa, const KVC_SC_T *qa, float sb, const KVC_SC_T *qb, const double *mu, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(q + (0 .. dim - 1)) && \valid_read(x + (0 .. dim - 1));
    assigns \nothing;
*/
double KVC_SC_FN(sqdist_f32)(float s, const KVC_SC_T *q, const float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid(acc + (0 .. dim - 1)) && \valid_read(q + (0 .. dim - 1));
    requires \separated(acc + (0 .. dim - 1), q + (0 .. dim - 1));
    assigns acc[0 .. dim - 1];
*/
void KVC_SC_FN(axpy)(double *acc, double p, float s, const KVC_SC_T *q, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(q + (0 .. dim - 1));
    assigns \nothing;
*/
double KVC_SC_FN(absmax)(float s, const KVC_SC_T *q, size_t dim);

#endif

#undef KVC_SC_T
#undef KVC_SC_FN
#undef KVC_SC_MAX
#undef KVC_SC_MAX_CODE
#undef KVC_SC_ROUND
#undef KVC_SC_PAD
