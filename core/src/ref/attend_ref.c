/* Reference weighted attend: one online softmax per query over every segment
 * of the view. Scores are x_i = beta<q,k_i> + ln(scale) + ln(w_i); the running
 * maximum M is taken over N u D, and both accumulators hold values scaled by
 * e^{-M}, so their ratio is exact while neither can overflow however large the
 * weights grow. Accumulation is in double: this kernel is the ground truth.  */
#include "kvc/kvc_kernels.h"
#include "internal/kvc_internal.h"

#include <math.h>

/*@ ghost
  // Index bounds such as i*d + d <= n*d are non-linear, and a lemma about *
  // is not reliably instantiated by the SMT solvers in these big contexts
  // (the factors get reordered). This ghost "lemma function" is proved once,
  // in its own tiny context; each call instantiates it exactly.
  /@ requires a <= b;
     assigns \nothing;
     ensures a * c <= b * c;
  @/
  static void kvc_mul_mono(size_t a, size_t b, size_t c) {}
*/

/* e^t for t <= 0, where t = x - m may also be -inf or NaN once a score has
 * overflowed. Returns what kvc_exp_nonpos(t) returns for every t; the branches
 * only keep each call inside that function's contract (finite t <= 0).
 * t > 0 is never produced by the caller (it would give kvc_exp_nonpos's
 * clamp, 1.0); e^-inf = 0; NaN propagates. */
/*@ assigns \nothing; */
static double exp_nonpos_ext(double t)
{
    if (t > 0.0) return 1.0;
    if (isfinite(t)) return kvc_exp_nonpos(t);
    return t < 0.0 ? 0.0 : t;
}

/* One query against the whole view; acc is caller scratch of view->dv doubles. */
/*@ requires kvc_view_ok(view);
    requires \valid_read(q + (0 .. view->d - 1));
    requires \valid(out + (0 .. view->dv - 1));
    requires \valid(acc + (0 .. view->dv - 1));
    requires \separated(acc + (0 .. view->dv - 1), out + (0 .. view->dv - 1));
    requires \separated(out + (0 .. view->dv - 1), view);
    requires \forall integer i; 0 <= i < view->n_seg ==>
        \separated(out + (0 .. view->dv - 1), view->seg[i].keys + (0 .. view->seg[i].n * view->d - 1)) &&
        ((view->seg[i].role == 1 || view->seg[i].role == 3) ==> \separated(out + (0 .. view->dv - 1), view->seg[i].values + (0 .. view->seg[i].n * view->dv - 1))) &&
        (view->seg[i].weights != \null ==> \separated(out + (0 .. view->dv - 1), view->seg[i].weights + (0 .. view->seg[i].n - 1)));
    requires \forall integer i; 0 <= i < view->n_seg ==>
        \separated(acc + (0 .. view->dv - 1), view->seg[i].keys + (0 .. view->seg[i].n * view->d - 1)) &&
        ((view->seg[i].role == 1 || view->seg[i].role == 3) ==> \separated(acc + (0 .. view->dv - 1), view->seg[i].values + (0 .. view->seg[i].n * view->dv - 1))) &&
        (view->seg[i].weights != \null ==> \separated(acc + (0 .. view->dv - 1), view->seg[i].weights + (0 .. view->seg[i].n - 1)));
    requires \separated(acc + (0 .. view->dv - 1), view);
    requires \separated(acc + (0 .. view->dv - 1), q + (0 .. view->d - 1));
    assigns out[0 .. view->dv - 1], acc[0 .. view->dv - 1];
*/
static void attend_one_query(const kvc_view *view, const float *q, float *out, double *acc)
{
    const size_t d = view->d, dv = view->dv;
    //@ assert dims: 1 <= d <= 256 && 1 <= dv <= 256;
    double m = 0.0; /* running max of x over entries seen (valid once have_m) */
    int have_m = 0;
    double den = 0.0;

    /*@ loop invariant 0 <= c <= dv;
        loop assigns c, acc[0 .. dv - 1];
        loop variant dv - c;
    */
    for (size_t c = 0; c < dv; c++) acc[c] = 0.0;

    /*@ loop invariant 0 <= s <= view->n_seg;
        loop assigns s, m, have_m, den, acc[0 .. dv - 1];
        loop variant view->n_seg - s;
    */
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        //@ assert seg_ok: kvc_segment_ok(seg, d, dv);
        const size_t n = seg->n;
        const unsigned role = seg->role;
        //@ assert n_max: n <= 16777216;
        //@ ghost kvc_mul_mono(n, 16777216, d);
        //@ ghost kvc_mul_mono(n, 16777216, dv);
        //@ assert nd: n * d <= 4294967296 && n * dv <= 4294967296;
        const double ln_scale = kvc_log_pos(seg->scale);
        /*@ loop invariant 0 <= i <= n;
            loop assigns i, m, have_m, den, acc[0 .. dv - 1];
            loop variant n - i;
        */
        for (size_t i = 0; i < n; i++) {
            //@ ghost kvc_mul_mono(i + 1, n, d);
            //@ ghost kvc_mul_mono(i + 1, n, dv);
            double x = ln_scale;
            if (seg->weights != 0) {
                const double w = (double)seg->weights[i];
                if (!(w > 0.0)) continue; /* weight 0 excludes the entry */
                /* log(+inf) = +inf: call kvc_log_pos on finite weights only */
                x += isfinite(w) ? kvc_log_pos(w) : w;
            }
            //@ assert i * d + d <= n * d;
            x += (double)view->beta * kvc_k_dot_f32__ref(q, seg->keys + i * d, d);
            if (!have_m || x > m) {
                /* new maximum: rescale what was accumulated under the old one */
                const double r = have_m ? exp_nonpos_ext(m - x) : 0.0;
                den *= r;
                /*@ loop invariant 0 <= c <= dv;
                    loop assigns c, acc[0 .. dv - 1];
                    loop variant dv - c;
                */
                for (size_t c = 0; c < dv; c++) acc[c] *= r;
                m = x;
                have_m = 1;
            }
            const double p = exp_nonpos_ext(x - m);
            /* role is KVC_SET_NUM, KVC_SET_DEN or KVC_SET_BOTH (no bit tests:
               they are opaque to the provers) */
            if (role == KVC_SET_DEN || role == KVC_SET_BOTH) den += p;
            if (role == KVC_SET_NUM || role == KVC_SET_BOTH) {
                //@ assert i * dv + dv <= n * dv;
                const float *v = seg->values + i * dv;
                /*@ loop invariant 0 <= c <= dv;
                    loop assigns c, acc[0 .. dv - 1];
                    loop variant dv - c;
                */
                for (size_t c = 0; c < dv; c++) acc[c] += p * (double)v[c];
            }
        }
    }

    const double inv = den > 0.0 ? 1.0 / den : 0.0;
    /*@ loop invariant 0 <= c <= dv;
        loop assigns c, out[0 .. dv - 1];
        loop variant dv - c;
    */
    for (size_t c = 0; c < dv; c++) out[c] = (float)(acc[c] * inv);
}

kvc_status kvc_k_attend_f32__ref(const kvc_view *view, const float *q, size_t n_q, float *out)
{
    double acc[KVC_MAX_HEAD_DIM];
    const size_t d = view->d, dv = view->dv;
    /*@ loop invariant 0 <= h <= n_q;
        loop assigns h, out[0 .. n_q * dv - 1], acc[0 .. 255];
        loop variant n_q - h;
    */
    for (size_t h = 0; h < n_q; h++) {
        //@ ghost kvc_mul_mono(h + 1, n_q, d);
        //@ ghost kvc_mul_mono(h + 1, n_q, dv);
        //@ assert h * d + d <= n_q * d;
        //@ assert h * dv + dv <= n_q * dv;
        attend_one_query(view, q + h * d, out + h * dv, acc);
    }
    return KVC_OK;
}
