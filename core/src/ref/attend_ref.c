/* Reference weighted attend: one online softmax per query over every segment
 * of the view. Scores are x_i = beta<q,k_i> + ln(scale) + ln(w_i); the running
 * maximum M is taken over N u D, and both accumulators hold values scaled by
 * e^{-M}, so their ratio is exact while neither can overflow however large the
 * weights grow. Accumulation is in double: this kernel is the ground truth.  */
#include "kvc/kvc_kernels.h"

/* One query against the whole view; acc is caller scratch of view->dv doubles. */
/*@ requires kvc_view_ok(view);
    requires \valid_read(q + (0 .. view->d - 1));
    requires \valid(out + (0 .. view->dv - 1));
    requires \valid(acc + (0 .. view->dv - 1));
    requires \separated(acc + (0 .. view->dv - 1), out + (0 .. view->dv - 1));
    requires \separated(out + (0 .. view->dv - 1), view);
    requires \forall integer i; 0 <= i < view->n_seg ==>
        \separated(out + (0 .. view->dv - 1), view->seg[i].keys + (0 .. view->seg[i].n * view->d - 1)) &&
        ((view->seg[i].role & 1) != 0 ==> \separated(out + (0 .. view->dv - 1), view->seg[i].values + (0 .. view->seg[i].n * view->dv - 1))) &&
        (view->seg[i].weights != \null ==> \separated(out + (0 .. view->dv - 1), view->seg[i].weights + (0 .. view->seg[i].n - 1)));
    requires \forall integer i; 0 <= i < view->n_seg ==>
        \separated(acc + (0 .. view->dv - 1), view->seg[i].keys + (0 .. view->seg[i].n * view->d - 1)) &&
        ((view->seg[i].role & 1) != 0 ==> \separated(acc + (0 .. view->dv - 1), view->seg[i].values + (0 .. view->seg[i].n * view->dv - 1))) &&
        (view->seg[i].weights != \null ==> \separated(acc + (0 .. view->dv - 1), view->seg[i].weights + (0 .. view->seg[i].n - 1)));
    requires \separated(acc + (0 .. view->dv - 1), view, q + (0 .. view->d - 1));
    assigns out[0 .. view->dv - 1], acc[0 .. view->dv - 1];
*/
static void attend_one_query(const kvc_view *view, const float *q, float *out, double *acc)
{
    const size_t d = view->d, dv = view->dv;
    double m = 0.0;     /* running max of x over entries seen (valid once have_m) */
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
        const size_t n = seg->n;
        const unsigned role = seg->role;
        const double ln_scale = kvc_log_pos(seg->scale);
        /*@ loop invariant 0 <= i <= n;
            loop assigns i, m, have_m, den, acc[0 .. dv - 1];
            loop variant n - i;
        */
        for (size_t i = 0; i < n; i++) {
            double x = ln_scale;
            if (seg->weights != 0) {
                const double w = (double)seg->weights[i];
                if (!(w > 0.0)) continue; /* weight 0 excludes the entry */
                x += kvc_log_pos(w);
            }
            //@ assert i * d + d <= n * d;
            x += (double)view->beta * kvc_k_dot_f32__ref(q, seg->keys + i * d, d);
            if (!have_m || x > m) {
                /* new maximum: rescale what was accumulated under the old one */
                const double r = have_m ? kvc_exp_nonpos(m - x) : 0.0;
                den *= r;
                /*@ loop invariant 0 <= c <= dv;
                    loop assigns c, acc[0 .. dv - 1];
                    loop variant dv - c;
                */
                for (size_t c = 0; c < dv; c++) acc[c] *= r;
                m = x;
                have_m = 1;
            }
            const double p = kvc_exp_nonpos(x - m);
            if ((role & KVC_SET_DEN) != 0u) den += p;
            if ((role & KVC_SET_NUM) != 0u) {
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
        //@ assert h * d + d <= n_q * d;
        //@ assert h * dv + dv <= n_q * dv;
        attend_one_query(view, q + h * d, out + h * dv, acc);
    }
    return KVC_OK;
}
