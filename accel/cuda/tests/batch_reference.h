// The reference side of the batched decode's tests (test_cuda_batch.cu,
// test_cuda_mirror.cu): a stored row read back from a page as the kernel
// reads it, and the output tolerance derived from the rows as stored.
#ifndef KVC_CUDA_BATCH_REFERENCE_H
#define KVC_CUDA_BATCH_REFERENCE_H

#include <cmath>
#include <cstring>
#include <vector>

#include "kvc/kvc.h"
#include "kvc/kvc_cuda_batch.h"
#include "kernels/batch_layout.cuh"

namespace kvc_batch_ref
{

constexpr double kU = 5.9604644775390625e-08;        // 2^-24, f32 unit roundoff
constexpr double kUh = 4.8828125e-04;                // 2^-11, f16 unit roundoff
constexpr double kHalfSub = 2.98023223876953125e-08; // 2^-25: half of the smallest f16 subnormal

// A stored row as the kernel reads it: its keys and values as floats, and
// what the int4 and int8 bounds need (the key minimum of each element's
// group, the value row's largest |minimum| and its largest scale).
struct stored_row {
    std::vector<float> k, v, kmn; // kmn: |minimum| of element c's key group (int4), else empty
    double vmn = 0, vscale = 0;   // int4: max |value minimum|, max value group scale; int8: the value scale
};

inline bool int4_type(unsigned t) { return t == KVC_DTYPE_I4 || t == KVC_CUDA_DTYPE_I4_ROW; }

inline stored_row read_row(unsigned t, size_t d, const unsigned char *page, uint32_t r)
{
    stored_row s;
    s.k.resize(d), s.v.resize(d);
    if (int4_type(t)) {
        kvc_cuda::page_row_to_f32((int)t, (uint32_t)d, page, r, false, s.k.data());
        kvc_cuda::page_row_to_f32((int)t, (uint32_t)d, page, r, true, s.v.data());
        const uint32_t ng = kvc_cuda::i4_groups((int)t, (uint32_t)d);
        const unsigned char *kh = page + kvc_cuda::page_scale_offset((int)t, (uint32_t)d) + 4u * ng * r;
        const unsigned char *vh = kh + 4u * ng * 64u;
        for (size_t c = 0; c < d; c++) s.kmn.push_back(std::fabs(kvc_cuda::page_half_at(kh + 4u * (c * ng / d) + 2u)));
        for (uint32_t g = 0; g < ng; g++)
            s.vmn = std::fmax(s.vmn, std::fabs(kvc_cuda::page_half_at(vh + 4u * g + 2u))),
            s.vscale = std::fmax(s.vscale, kvc_cuda::page_half_at(vh + 4u * g));
        return s;
    }
    std::vector<unsigned char> row((size_t)kvc_row_bytes(t, d));
    kvc_cuda::page_row_to_core((int)t, (uint32_t)d, page, r, false, row.data());
    kvc_kernels_ref()->rows[t].load(row.data(), s.k.data(), d);
    kvc_cuda::page_row_to_core((int)t, (uint32_t)d, page, r, true, row.data());
    kvc_kernels_ref()->rows[t].load(row.data(), s.v.data(), d);
    if (t == KVC_DTYPE_I8) {
        float sc;
        std::memcpy(&sc, row.data(), 4);
        s.vscale = sc;
    }
    return s;
}

// The tolerance of one output row, from the rows as stored and the query
// the device read (tensor-core path; u = 2^-24, u_h = 2^-11, h = 2^-25):
//   score   dx_i <= (u_h + (d + 40) u) S_i + h sigma K_i + 8u (|x_i| + |ln w_i|)
//           S_i = sum_c |q_c beta k_ic|, K_i = sum_c |k_ic|
//           (q beta / sigma rounded to f16; the tensor core's sums, measured within 34u of sum |ab|
//           per k = 16 product on an H100; the kernel works in log2 units: sigma log2 e and
//           ln w log2 e are two more roundings on top of the 6u of sigma k_s S + ln w; exp2f's error is expf's)
//           int4: the codes' products exact, the group's scale and minimum applied after the sums:
//           (u_h + (d + 44) u) S_i + (2d + 50) u MQ_i + h sigma K_i + 8u (...), MQ_i = sum_c |q_c beta| |mn_g(c)|
//   weight  eta_i <= dx_i + dx_max + 4u |x_i - m| + 8u   (exp2, the stabiliser, the rescales)
//   numerator terms p_i v_i: relative u_h + 2u and absolute h vabs_i (P' rounded to f16; int8: vabs =
//           127 s_max, s_max the entry's largest value scale in N; int4: P' carries the group scale,
//           vabs = 15 s_max, and |v| is counted with its group minimum, |v|max + |mn|max, since
//           the minimum's share is summed apart in f32; |v_i|max otherwise), summed in f32 with
//           (40 + 4 (pages + items)) u relative (8 for int8 and int4: the value scale folded into
//           the rescale); denominator (16 + 4 (pages + items)) u
//   out     |dout| <= (2 eta_max + rel_num + rel_den + u_h) A + H / den + u_out |out| + h [f16/bf16 out]
//           A = sum_N p |v|max / sum_D p,  H = sum_N h vabs_i
struct out_bound {
    double A = 0, H = 0, rel = 0;
};

inline out_bound batch_bound(unsigned t, size_t d, float beta, const float *q, const std::vector<stored_row> &rows,
                             const std::vector<float> &w, const std::vector<unsigned> &role, size_t pages, size_t items)
{
    const size_t n = rows.size();
    double qmax = 0;
    for (size_t c = 0; c < d; c++) qmax = std::fmax(qmax, std::fabs((double)q[c] * beta));
    const double sigma = kvc_cuda::query_scale((float)qmax); // the kernel's own rule
    const bool i4 = int4_type(t);
    std::vector<double> x(n, -INFINITY), dx(n, 0), vmax(n, 0), vabs(n, 0);
    double m = -INFINITY, dxm = 0, smax = 0;
    for (size_t i = 0; i < n; i++)
        if ((role[i] & KVC_SET_NUM) && w[i] > 0.0f) smax = std::fmax(smax, rows[i].vscale);
    for (size_t i = 0; i < n; i++) {
        if (!(w[i] > 0.0f)) continue;
        const std::vector<float> &k = rows[i].k, &v = rows[i].v;
        double s = 0, S = 0, K = 0, MQ = 0;
        for (size_t c = 0; c < d; c++) {
            s += (double)q[c] * k[c], S += std::fabs((double)q[c] * beta * k[c]), K += std::fabs((double)k[c]);
            if (i4) MQ += std::fabs((double)q[c] * beta) * rows[i].kmn[c];
        }
        const double lw = std::log((double)w[i]);
        x[i] = beta * s + lw;
        dx[i] = (kUh + ((double)d + (i4 ? 44.0 : 40.0)) * kU) * S + (2.0 * (double)d + 50.0) * kU * MQ +
                kHalfSub * sigma * K + 8.0 * kU * (std::fabs(x[i]) + std::fabs(lw));
        m = std::fmax(m, x[i]), dxm = std::fmax(dxm, dx[i]);
        if (role[i] & KVC_SET_NUM) {
            for (size_t c = 0; c < d; c++) vmax[i] = std::fmax(vmax[i], std::fabs((double)v[c]));
            vabs[i] = t == KVC_DTYPE_I8 ? 127.0 * smax : i4 ? 15.0 * smax : vmax[i];
            if (i4) vmax[i] += rows[i].vmn;
        }
    }
    out_bound o;
    double eta = 0, num = 0, den = 0, H = 0;
    for (size_t i = 0; i < n; i++) {
        if (x[i] == -INFINITY) continue;
        const double p = std::exp(x[i] - m);
        eta = std::fmax(eta, dx[i] + dxm + 4.0 * kU * std::fabs(x[i] - m) + 8.0 * kU);
        if (role[i] & KVC_SET_NUM) num += p * vmax[i], H += kHalfSub * vabs[i];
        if (role[i] & KVC_SET_DEN) den += p;
    }
    // per page and item, the accumulator's rescale: 4u; int8 and int4 fold their value scale into the same
    // factor (the quotient S_old / S_new, the product, and the item's final multiply by S): 3u more
    const double pi = (t == KVC_DTYPE_F16 ? 4.0 : 8.0) * (double)(pages + items) * kU;
    o.rel = 2.0 * eta + (kUh + 2.0 * kU + 40.0 * kU + pi) + (16.0 * kU + pi) + kUh;
    o.A = den > 0 ? num / den : 0.0;
    o.H = den > 0 ? H / den : 0.0;
    return o;
}

// The reference's view of an entry's rows grouped by role: segment 0 both N
// and D, 1 N only, 2 D only; keys and values as rows of `dtype` (the core's
// layout), or f32 rows when as_f32 (a page type the core has no rows of).
inline kvc_view role_view(unsigned dtype, bool as_f32, size_t d, float beta, const std::vector<unsigned char> *segk,
                          const std::vector<unsigned char> *segv, const std::vector<float> *segw)
{
    kvc_view view;
    std::memset(&view, 0, sizeof view);
    view.d = view.dv = d, view.beta = beta, view.n_seg = 3;
    const unsigned roles[3] = {KVC_SET_BOTH, KVC_SET_NUM, KVC_SET_DEN};
    for (size_t g = 0; g < 3; g++) {
        kvc_segment &sg = view.seg[g];
        sg.n = segw[g].size(), sg.role = roles[g], sg.scale = 1.0, sg.dtype = as_f32 ? (unsigned)KVC_DTYPE_F32 : dtype;
        const void *kp = sg.n ? segk[g].data() : nullptr;
        const void *vp = sg.n && roles[g] != KVC_SET_DEN ? segv[g].data() : nullptr;
        if (as_f32)
            sg.keys = static_cast<const float *>(kp), sg.values = static_cast<const float *>(vp);
        else
            sg.keys_q = kp, sg.values_q = vp;
        sg.weights = sg.n ? segw[g].data() : nullptr;
    }
    return view;
}

} // namespace kvc_batch_ref

#endif
