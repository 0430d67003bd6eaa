// Every CUDA kernel of accel/cuda against the reference kernels of the
// library (core/src/ref), on the storage types the CUDA table supports
// (enumerated from the table, never listed by hand):
//  - the split-K attend + merge (+ mass and split-K state) on shapes with
//    tails, exact tile multiples, many and single blocks, empty splits
//    (whole blocks of weight-0 entries, empty segments), separate N and D
//    sets, a causal batch of positions with more query rows than one launch
//    takes, odd and maximal head dimensions;
//  - the store (quantise) kernel against the reference `store`, byte for byte;
//  - the pair-Gram kernel against the reference `dot_rows`;
//  - the "cuda" kernel table as a drop-in for the reference one (rows in
//    kvc_cuda_alloc_shared memory).
// Tolerances are derived from f32 rounding (u = 2^-24), not picked: see
// attend_tolerance. The same file builds with nvcc for a GPU, and as C++
// against the CPU SIMT runtime. Mode "matrix" runs the bug matrix's shapes;
// mode "batch" only the batched decode's checks (test_cuda_batch.cu);
// mode "one-type" (for ThreadSanitizer, which is slow) runs every attend
// shape in f16 (plus the f32 shapes of the wide configuration) and a shorter
// table run, and every store and Gram case.
#include <cfloat>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kvc/kvc.h"
#include "kvc/kvc_cuda.h"
#include "kvc_cuda_compat.h"
#include "test_support.h"

namespace
{

constexpr double kU = 5.9604644775390625e-08; // 2^-24, f32 unit roundoff
const uint64_t kSeed = 20261124u;

using rng = test_rng;

template <typename T> T *to_device(const std::vector<T> &h)
{
    void *p = nullptr;
    if (h.empty()) return nullptr;
    if (cudaMalloc(&p, h.size() * sizeof(T)) != cudaSuccess) {
        std::printf("cudaMalloc of %zu B failed\n", h.size() * sizeof(T));
        std::exit(1);
    }
    cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return static_cast<T *>(p);
}

template <typename T> std::vector<T> to_host(const T *p, size_t n)
{
    std::vector<T> h(n);
    if (n) cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
}

const char *type_name(unsigned t) { return kvc_dtype_name((kvc_dtype)t); }

// One segment of a test view: rows stored by the reference `store`.
struct seg_spec {
    size_t n;
    unsigned role;
    int weights; // 0: none; 1: random in (0, 2]; 2: random with runs of zeros; 3: all zero
    double scale;
    size_t zero_from, zero_to; // weights 2: entries [from, to) get 0
};

struct built_seg {
    std::vector<unsigned char> k, v;
    std::vector<float> w;
    double scale;
    size_t n, first; // first: KIVI4, the first entry's token in its first key block
    unsigned role;
};

struct shape {
    const char *name;
    size_t d, dv, n_q, n_pos, causal_segs;
    std::vector<seg_spec> segs;
    uint32_t tiles_per_block; // 0: automatic
    bool mass, state;
};

// KIVI4 keys are stored as key blocks (kvc_kivi4_key_block_store) from a
// random token `first` of the first block on, values as int4 rows; every
// other type row by row with the reference's store.
built_seg build_segment(rng &r, unsigned t, size_t d, size_t dv, const seg_spec &sp, double kscale)
{
    const bool kivi = t == KVC_DTYPE_KIVI4;
    const unsigned vt = kvc_segment_value_dtype(t);
    const kvc_row_kernels &rk = kvc_kernels_ref()->rows[t], &rv = kvc_kernels_ref()->rows[vt];
    built_seg b;
    b.n = sp.n, b.role = sp.role, b.scale = sp.scale;
    b.first = kivi ? (size_t)(r.uniform() * KVC_KIVI_BLOCK) % KVC_KIVI_BLOCK : 0u;
    const size_t kb = (size_t)kvc_row_bytes(t, d), vb = (size_t)kvc_row_bytes(vt, dv);
    b.k.assign(kivi ? (size_t)kvc_kivi4_key_bytes(b.first + sp.n, d) : sp.n * kb, 0);
    if (sp.role & KVC_SET_NUM) b.v.assign(sp.n * vb, 0);
    std::vector<float> x(d > dv ? d : dv), keys(kivi ? (b.first + sp.n) * d : 0);
    // KIVI4: the block's tokens before `first` (not in the segment, as in a
    // ring whose oldest tokens left) still set its channels' grids
    for (size_t j = 0; j < b.first * d; j++) keys[j] = (float)(kscale * r.normal());
    for (size_t i = 0; i < sp.n; i++) {
        for (size_t c = 0; c < d; c++) x[c] = (float)(kscale * r.normal());
        if (kivi)
            std::copy(x.begin(), x.begin() + (long)d, keys.begin() + (long)((b.first + i) * d));
        else
            rk.store(b.k.data() + i * kb, x.data(), d);
        if (sp.role & KVC_SET_NUM) {
            for (size_t c = 0; c < dv; c++) x[c] = (float)r.normal();
            rv.store(b.v.data() + i * vb, x.data(), dv);
        }
    }
    for (size_t i = 0; kivi && sp.n > 0 && i < b.first + sp.n; i += KVC_KIVI_BLOCK)
        kvc_kivi4_key_block_store(b.k.data() + i / KVC_KIVI_BLOCK * (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d),
                                  keys.data() + i * d, std::min((size_t)KVC_KIVI_BLOCK, b.first + sp.n - i), d);
    if (sp.weights) {
        b.w.resize(sp.n);
        for (size_t i = 0; i < sp.n; i++) {
            b.w[i] = (float)(0.05 + 1.95 * r.uniform());
            if (sp.weights == 2 && i >= sp.zero_from && i < sp.zero_to) b.w[i] = 0.0f;
            if (sp.weights == 3) b.w[i] = 0.0f;
        }
    }
    return b;
}

// The view of built segments, on host rows (for the reference) or on
// device copies (for the kernels).
struct view_pair {
    kvc_view host, dev;
    std::vector<void *> owned;
    ~view_pair()
    {
        for (void *p : owned) cudaFree(p);
    }
};

void fill_view(kvc_view &v, unsigned t, size_t d, size_t dv, const std::vector<built_seg> &segs,
               std::vector<void *> *owned)
{
    std::memset(&v, 0, sizeof v);
    v.d = d, v.dv = dv, v.n_seg = segs.size(), v.beta = (float)(1.0 / std::sqrt((double)d));
    for (size_t s = 0; s < segs.size(); s++) {
        const built_seg &b = segs[s];
        kvc_segment &g = v.seg[s];
        g.n = b.n, g.role = b.role, g.scale = b.scale, g.dtype = t, g.first = b.first;
        const void *k = b.k.data(), *vv = b.v.empty() ? nullptr : b.v.data();
        const float *w = b.w.empty() ? nullptr : b.w.data();
        if (owned != nullptr) { // device copies, exact sizes (ASan sees one byte past)
            if (!b.k.empty()) k = to_device(b.k), owned->push_back(const_cast<void *>(k));
            if (vv != nullptr) vv = to_device(b.v), owned->push_back(const_cast<void *>(vv));
            if (w != nullptr) w = to_device(b.w), owned->push_back(const_cast<float *>(w));
        }
        if (b.n == 0) k = nullptr, vv = nullptr;
        if (t == KVC_DTYPE_F32)
            g.keys = static_cast<const float *>(k), g.values = static_cast<const float *>(vv);
        else
            g.keys_q = k, g.values_q = vv;
        g.weights = w;
    }
}

// What the tolerance needs, per query row, computed in double from the rows
// (the reference's own row kernels): with u = 2^-24,
//   score error   dx_i <= beta (d + 3) u sum_c |k_ic q_c| + 3u (|ln w_i| + |ln scale| + |x_i|)
//   weight error  eta_i <= dx_i + dx_max + u |x_i - m| + 6u
//                 (the block max m, e^{x-m} to 2 ulp, the merge factor e^{m_b-M})
//   sums          (n + n_blocks + 16) u relative, for the numerator and the denominator
// and out = sum_N p v / sum_D p moves by at most
//   tol = (2 eta_max + 2 (n + n_blocks + 16) u) * (sum_N p |v|_max / sum_D p) + (one rounding of out).
struct query_bound {
    double rel;     // 2 eta_max + 2 (n + n_blocks + 16) u
    double num_abs; // sum_N p |v|_max / sum_D p  (the scale of out)
    double dx_max;
    size_t visible;
};

std::vector<query_bound> attend_bounds(const kvc_view &v, const kvc_attend_batch &b, size_t n_blocks)
{
    const size_t Q = b.n_pos * b.n_q;
    std::vector<query_bound> out(Q);
    size_t causal_total = 0, n = 0;
    for (size_t s = 0; s < v.n_seg; s++) {
        if (s < b.causal_segs) causal_total += v.seg[s].n;
        n += v.seg[s].n;
    }
    std::vector<float> row(v.d > v.dv ? v.d : v.dv);
    for (size_t qi = 0; qi < Q; qi++) {
        const float *q = b.q + qi * v.d;
        const size_t pos = qi / b.n_q;
        struct ent {
            double x, dx, vmax;
            unsigned role;
        };
        std::vector<ent> es;
        size_t ec = 0;
        for (size_t s = 0; s < v.n_seg; s++) {
            const kvc_segment &g = v.seg[s];
            for (size_t i = 0; i < g.n; i++) {
                const bool causal = s < b.causal_segs;
                const size_t c = causal ? ec++ : 0;
                if (causal && c + (b.n_pos - 1 - pos) >= causal_total) continue;
                const double w = g.weights ? (double)g.weights[i] : 1.0;
                if (!(w > 0.0)) continue;
                kvc_segment_key_load(&g, v.d, i, row.data()); // the reference's element values
                double dot = 0, sabs = 0;
                for (size_t cc = 0; cc < v.d; cc++)
                    dot += (double)row[cc] * q[cc], sabs += std::fabs((double)row[cc] * q[cc]);
                const double x = std::log(g.scale) + std::log(w) + (double)v.beta * dot;
                const double dx = (double)v.beta * ((double)v.d + 3.0) * kU * sabs +
                                  3.0 * kU * (std::fabs(std::log(w)) + std::fabs(std::log(g.scale)) + std::fabs(x));
                double vmax = 0;
                if (g.role & KVC_SET_NUM) {
                    kvc_segment_value_load(&g, v.dv, i, row.data());
                    for (size_t cc = 0; cc < v.dv; cc++) vmax = std::fmax(vmax, std::fabs((double)row[cc]));
                }
                es.push_back({x, dx, vmax, g.role});
            }
        }
        query_bound &o = out[qi];
        o.visible = es.size();
        double m = -INFINITY, dxm = 0;
        for (const ent &e : es) m = std::fmax(m, e.x), dxm = std::fmax(dxm, e.dx);
        double eta = 0, num = 0, den = 0;
        for (const ent &e : es) {
            const double p = std::exp(e.x - m);
            eta = std::fmax(eta, e.dx + dxm + kU * std::fabs(e.x - m) + 6.0 * kU);
            if (e.role & KVC_SET_NUM) num += p * e.vmax;
            if (e.role & KVC_SET_DEN) den += p;
        }
        o.dx_max = dxm;
        o.rel = 2.0 * eta + 2.0 * ((double)n + (double)n_blocks + 16.0) * kU;
        o.num_abs = den > 0 ? num / den : 0.0;
    }
    return out;
}

struct case_result {
    double worst_ratio = 0; // max error / tolerance
};

void run_attend_case(const shape &sh, unsigned t, rng &r, case_result &res)
{
    std::vector<built_seg> segs;
    for (const seg_spec &sp : sh.segs) segs.push_back(build_segment(r, t, sh.d, sh.dv, sp, 1.5));
    view_pair vp;
    fill_view(vp.host, t, sh.d, sh.dv, segs, nullptr);
    fill_view(vp.dev, t, sh.d, sh.dv, segs, &vp.owned);
    const size_t Q = sh.n_pos * sh.n_q, E = [&] {
        size_t e = 0;
        for (const built_seg &b : segs) e += b.n;
        return e;
    }();
    std::vector<float> q(Q * sh.d);
    for (float &x : q) x = (float)r.normal();

    // the reference
    std::vector<float> out_ref(Q * sh.dv), out_gpu(Q * sh.dv, NAN);
    std::vector<double> mass_ref(E, 0.25), mass_gpu(E, 0.25); // added to what is there
    std::vector<double> st_ref(Q * KVC_ATTEND_STATE(sh.dv)), st_gpu(Q * KVC_ATTEND_STATE(sh.dv), NAN);
    std::vector<double> work(kvc_attend_work_bytes(sh.n_pos, sh.n_q, sh.dv) / sizeof(double) + 1);
    kvc_attend_batch br = {q.data(),
                           sh.n_pos,
                           sh.n_q,
                           sh.causal_segs,
                           out_ref.data(),
                           sh.mass ? mass_ref.data() : nullptr,
                           sh.state ? st_ref.data() : nullptr};
    const kvc_status rc_ref =
        kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &vp.host, &br, work.data(), work.size() * sizeof(double));
    CHECK(rc_ref == KVC_OK, "%s %s: reference says %d", sh.name, type_name(t), (int)rc_ref);

    kvc_attend_batch bg = br;
    bg.out = out_gpu.data(), bg.mass = sh.mass ? mass_gpu.data() : nullptr,
    bg.state = sh.state ? st_gpu.data() : nullptr;
    kvc_cuda_attend_info info;
    const kvc_status rc = kvc_cuda_attend(&vp.dev, &bg, sh.tiles_per_block, nullptr, &info);
    CHECK(rc == KVC_OK, "%s %s: kvc_cuda_attend says %d", sh.name, type_name(t), (int)rc);
    if (rc != KVC_OK || rc_ref != KVC_OK) return;

    // the device entry point (queries and outputs on the device, caller
    // scratch, asynchronous) runs the same launches: the same bits
    if (!sh.state && !sh.mass) {
        float *qd = to_device(q), *od = nullptr;
        cudaMalloc(reinterpret_cast<void **>(&od), Q * sh.dv * sizeof(float));
        const size_t sb = kvc_cuda_attend_device_scratch_bytes(&vp.dev, sh.n_pos, sh.n_q, sh.tiles_per_block);
        void *scratch = nullptr;
        CHECK(sb > 0 && cudaMalloc(&scratch, sb) == cudaSuccess, "%s: device scratch of %zu B", sh.name, sb);
        const kvc_status rd = kvc_cuda_attend_device(&vp.dev, qd, sh.n_pos, sh.n_q, sh.causal_segs, od,
                                                     sh.tiles_per_block, scratch, sb, nullptr);
        CHECK(rd == KVC_OK && cudaDeviceSynchronize() == cudaSuccess, "%s: kvc_cuda_attend_device says %d", sh.name,
              (int)rd);
        CHECK(kvc_cuda_attend_device(&vp.dev, qd, sh.n_pos, sh.n_q, sh.causal_segs, od, sh.tiles_per_block, scratch,
                                     sb - 1, nullptr) == KVC_E_ARG,
              "%s: a scratch one byte short accepted", sh.name);
        const std::vector<float> od_h = to_host(od, Q * sh.dv);
        CHECK(!std::memcmp(od_h.data(), out_gpu.data(), Q * sh.dv * sizeof(float)),
              "%s %s: the device entry point's output differs from kvc_cuda_attend's", sh.name, type_name(t));
        cudaFree(qd), cudaFree(od), cudaFree(scratch);
    }

    const std::vector<query_bound> qb = attend_bounds(vp.host, br, info.n_blocks);
    double worst = 0, worst_state = 0, worst_mass = 0;
    for (size_t qi = 0; qi < Q; qi++) {
        const double tol = qb[qi].rel * qb[qi].num_abs + 2.0 * kU * qb[qi].num_abs + 1e-30;
        for (size_t c = 0; c < sh.dv; c++) {
            const double e = std::fabs((double)out_gpu[qi * sh.dv + c] - (double)out_ref[qi * sh.dv + c]);
            CHECK(e <= tol, "%s %s: query %zu col %zu: |%.9g - %.9g| = %.3g > tol %.3g", sh.name, type_name(t), qi, c,
                  (double)out_gpu[qi * sh.dv + c], (double)out_ref[qi * sh.dv + c], e, tol);
            worst = std::fmax(worst, e / tol);
        }
        if (sh.state) {
            const double *a = &st_gpu[qi * KVC_ATTEND_STATE(sh.dv)], *b = &st_ref[qi * KVC_ATTEND_STATE(sh.dv)];
            if (b[0] == -INFINITY) {
                CHECK(a[0] == -INFINITY && a[1] == 0.0, "%s %s: query %zu saw nothing but state m=%g den=%g", sh.name,
                      type_name(t), qi, a[0], a[1]);
            } else {
                // the same state up to the stabiliser: a * e^{m_gpu - m_ref} against b
                const double f = std::exp(a[0] - b[0]), rel = qb[qi].rel + 2.0 * kU;
                CHECK(std::fabs(a[0] - b[0]) <= 2.0 * qb[qi].dx_max + 4.0 * kU * std::fabs(b[0]) + 1e-30,
                      "%s %s: query %zu state m %.9g vs %.9g", sh.name, type_name(t), qi, a[0], b[0]);
                const double ed = std::fabs(a[1] * f - b[1]), td = rel * b[1] + 1e-300;
                CHECK(ed <= td, "%s %s: query %zu state den %.9g vs %.9g", sh.name, type_name(t), qi, a[1] * f, b[1]);
                worst_state = std::fmax(worst_state, ed / td);
                const double ta = rel * qb[qi].num_abs * b[1] + 1e-300;
                for (size_t c = 0; c < sh.dv; c++) {
                    const double ea = std::fabs(a[2 + c] * f - b[2 + c]);
                    CHECK(ea <= ta, "%s %s: query %zu state acc[%zu] %.9g vs %.9g (tol %.3g)", sh.name, type_name(t),
                          qi, c, a[2 + c] * f, b[2 + c], ta);
                    worst_state = std::fmax(worst_state, ea / ta);
                }
            }
        }
    }
    if (sh.mass) {
        double rel = 0;
        for (const query_bound &b : qb) rel = std::fmax(rel, b.rel + 4.0 * kU);
        for (size_t e = 0; e < E; e++) {
            const double got = mass_gpu[e] - 0.25, want = mass_ref[e] - 0.25;
            const double tol = rel * std::fabs(want) + (double)Q * FLT_MIN + 0.25 * 2.0 * 1.1102230246251565e-16;
            CHECK(std::fabs(got - want) <= tol, "%s %s: mass[%zu] %.9g vs %.9g", sh.name, type_name(t), e, got, want);
            worst_mass = std::fmax(worst_mass, std::fabs(got - want) / tol);
        }
    }
    // every entry of weight > 0 was scored once per launch
    uint64_t with_weight = 0;
    for (const built_seg &b : segs)
        for (size_t i = 0; i < b.n; i++) with_weight += b.w.empty() || b.w[i] > 0.0f ? 1u : 0u;
    CHECK(info.included == with_weight * info.launches, "%s %s: %" PRIu64 " entries scored, want %" PRIu64, sh.name,
          type_name(t), info.included, with_weight * info.launches);
    std::printf("  attend %-22s %-3s n=%5zu Q=%2zu blocks=%4u x %u tiles launches=%u: err/tol %.3g%s%s\n", sh.name,
                type_name(t), E, Q, info.n_blocks, info.tiles_per_block, info.launches, worst,
                sh.state ? (std::string(", state ") + std::to_string(worst_state)).c_str() : "",
                sh.mass ? (std::string(", mass ") + std::to_string(worst_mass)).c_str() : "");
    res.worst_ratio = std::fmax(res.worst_ratio, std::fmax(worst, std::fmax(worst_state, worst_mass)));
}

std::vector<shape> attend_shapes(bool matrix)
{
    const unsigned B = KVC_SET_BOTH, N = KVC_SET_NUM, D = KVC_SET_DEN;
    if (matrix) // the study's shapes: a tail, and an exact multiple of the tile
        return {{"tail-4001", 64, 64, 3, 1, 0, {{4001, B, 0, 1.0, 0, 0}}, 1, false, false},
                {"multiple-4096", 64, 64, 3, 1, 0, {{4096, B, 0, 1.0, 0, 0}}, 2, false, false},
                {"small-1001", 64, 64, 3, 1, 0, {{1001, B, 1, 1.0, 0, 0}}, 0, false, false}};
    return {
        {"tail-1001-gqa3", 64, 64, 3, 1, 0, {{1001, B, 0, 1.0, 0, 0}}, 1, false, false},
        {"multiple-4096-q8", 128, 128, 8, 1, 0, {{4096, B, 1, 1.0, 0, 0}}, 0, false, true},
        {"one-block-4096", 64, 64, 2, 1, 0, {{4096, B, 0, 1.0, 0, 0}}, 32, false, false},
        // f32: split_kernel's wide configuration (all rows f32, <= 2 query rows, d % 32 == 0)
        {"grouped-auto-5000", 128, 128, 2, 1, 0, {{5000, B, 1, 1.0, 0, 0}}, 0, true, true},
        {"empty-splits",
         64,
         64,
         3,
         1,
         0,
         {{0, B, 0, 1.0, 0, 0}, {1500, B, 2, 1.0, 200, 700}, {130, B, 3, 1.0, 0, 0}},
         1,
         true,
         true},
        {"subgen-like-N-D",
         32,
         48,
         4,
         1,
         0,
         {{700, N, 1, 3.5, 0, 0}, {300, D, 1, 0.25, 0, 0}, {40, B, 0, 1.0, 0, 0}},
         1,
         true,
         true},
        {"causal-5pos-x-2heads",
         64,
         64,
         2,
         5,
         3,
         {{4, B, 0, 1.0, 0, 0}, {200, B, 0, 1.0, 0, 0}, {9, B, 0, 1.0, 0, 0}, {333, B, 1, 2.0, 0, 0}},
         1,
         true,
         true},
        {"causal-12pos-x-1head", 40, 24, 1, 12, 1, {{12, B, 0, 1.0, 0, 0}}, 0, true, true},
        {"odd-dims-33x17", 33, 17, 3, 1, 0, {{129, B, 1, 1.0, 0, 0}}, 1, true, false},
        {"dv1-d1", 1, 1, 5, 1, 0, {{257, B, 0, 1.0, 0, 0}}, 1, true, true},
        {"max-dims-256", 256, 256, 4, 1, 0, {{300, B, 0, 1.0, 0, 0}}, 1, false, true},
        {"dv100-auto", 96, 100, 6, 1, 0, {{2000, B, 1, 1.0, 0, 0}, {5, B, 0, 1.0, 0, 0}}, 0, true, false},
    };
}

// the store kernel against the reference store, byte for byte (int8 codes
// may differ by one only where x/scale is within f32 rounding of a half)
void run_store_case(unsigned t, size_t n, size_t dim, rng &r)
{
    const size_t rb = (size_t)kvc_row_bytes(t, dim);
    std::vector<float> x(n * dim);
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < dim; c++) {
            double v = r.normal() * std::exp(4.0 * r.uniform() - 2.0);
            if (i == 0) v = 0.0;                                            // an all-zero row
            if (i == 1) v = (c % 2 ? -1.0 : 1.0) * (double)(c % 255) / 2.0; // exact halves of the scale
            x[i * dim + c] = (float)v;
        }
    std::vector<unsigned char> want(n * rb);
    for (size_t i = 0; i < n; i++) kvc_kernels_ref()->rows[t].store(want.data() + i * rb, x.data() + i * dim, dim);
    float *xd = to_device(x);
    void *dst = nullptr;
    cudaMalloc(&dst, n * rb);
    const kvc_status rc = kvc_cuda_store_rows(t, dst, xd, n, dim, nullptr);
    CHECK(rc == KVC_OK, "store %s: %d", type_name(t), (int)rc);
    const std::vector<unsigned char> got = to_host(static_cast<unsigned char *>(dst), n * rb);
    size_t exact = 0, near_ties = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *g = got.data() + i * rb, *w = want.data() + i * rb;
        if (!std::memcmp(g, w, rb)) {
            exact++;
            continue;
        }
        if (t != KVC_DTYPE_I8 || std::memcmp(g, w, 4)) {
            bad++;
            continue;
        }
        float scale;
        std::memcpy(&scale, w, 4);
        for (size_t c = 0; c < rb - 4; c++) {
            const int a = (signed char)g[4 + c], b = (signed char)w[4 + c];
            if (a == b) continue;
            const double tq = c < dim ? (double)x[i * dim + c] / (double)scale : 0.0;
            const double frac = std::fabs(tq) - std::floor(std::fabs(tq));
            if (std::abs(a - b) == 1 && std::fabs(frac - 0.5) <= 2.0 * kU * std::fabs(tq))
                near_ties++;
            else
                bad++;
        }
    }
    CHECK(bad == 0, "store %s dim %zu: %zu rows differ beyond a near-tie code", type_name(t), dim, bad);
    std::printf("  store  %-3s n=%zu dim=%zu: %zu/%zu rows byte-identical, %zu near-tie codes\n", type_name(t), n, dim,
                exact, n, near_ties);
    cudaFree(xd);
    cudaFree(dst);
}

void run_gram_case(unsigned t, size_t na, size_t nb, size_t dim, bool with_mu, rng &r)
{
    const size_t rb = (size_t)kvc_row_bytes(t, dim);
    const kvc_row_kernels &rk = kvc_kernels_ref()->rows[t];
    std::vector<unsigned char> a(na * rb), b(nb * rb);
    std::vector<float> x(dim), mu(dim);
    for (float &m : mu) m = (float)(0.3 * r.normal());
    for (size_t i = 0; i < na; i++) {
        for (float &v : x) v = (float)r.normal();
        rk.store(a.data() + i * rb, x.data(), dim);
    }
    for (size_t i = 0; i < nb; i++) {
        for (float &v : x) v = (float)r.normal();
        rk.store(b.data() + i * rb, x.data(), dim);
    }
    unsigned char *ad = to_device(a), *bd = to_device(b);
    float *mud = with_mu ? to_device(mu) : nullptr, *gd = nullptr;
    cudaMalloc(reinterpret_cast<void **>(&gd), na * nb * sizeof(float));
    const kvc_status rc = kvc_cuda_pair_gram(t, ad, na, bd, nb, dim, mud, gd, nullptr);
    CHECK(rc == KVC_OK, "gram %s: %d", type_name(t), (int)rc);
    const std::vector<float> g = to_host(gd, na * nb);
    std::vector<double> mu_d(mu.begin(), mu.end());
    std::vector<float> ra(dim), rbv(dim);
    double worst = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++) {
            const double want = rk.dot_rows(a.data() + i * rb, b.data() + j * rb, with_mu ? mu_d.data() : nullptr, dim);
            rk.load(a.data() + i * rb, ra.data(), dim);
            rk.load(b.data() + j * rb, rbv.data(), dim);
            double s = 0;
            for (size_t c = 0; c < dim; c++) {
                const double m = with_mu ? std::fabs((double)mu[c]) : 0.0;
                s += (std::fabs((double)ra[c]) + m) * (std::fabs((double)rbv[c]) + m);
            }
            // dim terms summed in f32, each from two subtractions, a product and (int8) two dequantisations
            const double tol = ((double)dim + 6.0) * kU * s + 1e-30;
            const double e = std::fabs((double)g[i * nb + j] - want);
            CHECK(e <= tol, "gram %s (%zu,%zu): %.9g vs %.9g", type_name(t), i, j, (double)g[i * nb + j], want);
            worst = std::fmax(worst, e / tol);
        }
    std::printf("  gram   %-3s %zux%zu dim=%zu mu=%s: err/tol %.3g\n", type_name(t), na, nb, dim,
                with_mu ? "yes" : "no", worst);
    cudaFree(ad), cudaFree(bd), cudaFree(mud), cudaFree(gd);
}

// The table as a drop-in: a stream attend through kvc_stream_attend on the
// "cuda" table against the same on the reference table, rows in shared memory.
void run_table_case(unsigned t, rng &r, int steps)
{
    const kvc_kernels *cu = kvc_kernels_cuda(), *ref = kvc_kernels_ref();
    CHECK(cu != nullptr && kvc_kernels_support(cu, t), "the cuda table lacks %s", type_name(t));
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_H2O, 64, 64, 64, kSeed);
    cfg.dtype = (kvc_dtype)t;
    cfg.n_sink = 4, cfg.n_window = t == KVC_DTYPE_KIVI4 ? 32 : 8; // KIVI4: a window of one block
    const size_t bytes = kvc_stream_arena_bytes(&cfg);
    if (bytes == 0 && !kvc_dtype_implemented((kvc_dtype)t)) { // a view type streams do not hold yet
        std::printf("  table  %-3s no stream holds it yet (views only): attend cases only\n", type_name(t));
        return;
    }
    void *arena = kvc_cuda_alloc_shared(bytes);
    kvc_stream *st = nullptr;
    CHECK(arena != nullptr && kvc_stream_init(arena, bytes, &cfg, &st) == KVC_OK, "stream init");
    if (st == nullptr) return;
    std::vector<float> k(64), v(64), q(2 * 64), o_cu(2 * 64), o_ref(2 * 64);
    const size_t wb = kvc_stream_attend_observed_work_bytes(st, 2) + 4096;
    std::vector<double> work(wb / sizeof(double) + 1);
    double worst = 0;
    for (int step = 0; step < steps; step++) {
        for (float &x : k) x = (float)r.normal();
        for (float &x : v) x = (float)r.normal();
        for (float &x : q) x = (float)r.normal();
        CHECK(kvc_stream_append(st, ref, k.data(), v.data()) == KVC_OK, "append");
        // the reference first, without observing, then the cuda table observing (both see the same rows)
        CHECK(kvc_stream_attend(st, ref, q.data(), 2, o_ref.data()) == KVC_OK, "ref attend");
        const kvc_status rc = kvc_stream_attend_observed(st, cu, q.data(), 2, o_cu.data(), work.data(), wb);
        CHECK(rc == KVC_OK, "cuda attend at step %d: %d", step, (int)rc);
        for (size_t c = 0; c < o_ref.size(); c++) {
            // a loose consequence of attend_tolerance for this shape (n <= 97, d = 64, |q|,|k| ~ N(0,1)):
            // (2 (beta (d + 3) u sum|kq| + ...) + 2 (n + 16) u) max|v|, with sum|kq| <= 64 * 25
            const double tol = (2.0 * (0.125 * 67.0 * 1600.0 + 64.0) + 2.0 * (97.0 + 16.0)) * kU * 5.0;
            const double e = std::fabs((double)o_cu[c] - (double)o_ref[c]);
            CHECK(e <= tol, "table %s step %d col %zu: %.9g vs %.9g", type_name(t), step, c, (double)o_cu[c],
                  (double)o_ref[c]);
            worst = std::fmax(worst, e / tol);
        }
    }
    std::printf("  table  %-3s h2o stream, %d steps, budget 64 on the cuda table: err/tol %.3g\n", type_name(t), steps,
                worst);
    kvc_cuda_free_shared(arena);
}

// The far-apart split views (core/src/shared/f32_state.h): N alone holds
// the largest scores, D `gap` below them. The true output is about e^gap
// times the values (KVC_E_RANGE past ~88); an f32 denominator of e^-gap
// loses its bits and then flushes to 0. The raw kvc_cuda_attend must give a
// result within the tolerance or NaN (its mark for "ask the reference"),
// never another finite number; the "cuda" table must give the reference's
// status, and within the tolerance where both answer. Rows in shared memory,
// as the table's fallback reads them on the host.
void run_far_apart_case(unsigned t, rng &r)
{
    const kvc_kernels *cu = kvc_kernels_cuda(), *ref = kvc_kernels_ref();
    const unsigned B = KVC_SET_BOTH, N = KVC_SET_NUM, D = KVC_SET_DEN;
    static const double gaps[] = {0.0, 60.0, 66.0, 75.0, 86.0, 95.0, 110.0, 300.0};
    const size_t d = 64, dv = 16, nq = 3;
    double worst = 0;
    int marked = 0, refused = 0;
    for (double gap : gaps) {
        std::vector<built_seg> segs;
        for (const seg_spec &sp :
             std::vector<seg_spec>{{64, B, 0, 1.0, 0, 0}, {96, N, 0, std::exp(gap), 0, 0}, {64, D, 0, 1.0, 0, 0}})
            segs.push_back(build_segment(r, t, d, dv, sp, 1.0));
        kvc_view v;
        fill_view(v, t, d, dv, segs, nullptr);
        std::vector<void *> shared;
        for (size_t s = 0; s < v.n_seg; s++) { // the rows again, in memory both sides read
            const built_seg &b = segs[s];
            kvc_segment &g = v.seg[s];
            void *k = kvc_cuda_alloc_shared(b.k.size()),
                 *vv = b.v.empty() ? nullptr : kvc_cuda_alloc_shared(b.v.size());
            std::memcpy(k, b.k.data(), b.k.size());
            if (vv != nullptr) std::memcpy(vv, b.v.data(), b.v.size());
            shared.push_back(k), shared.push_back(vv);
            if (t == KVC_DTYPE_F32)
                g.keys = static_cast<const float *>(k), g.values = static_cast<const float *>(vv);
            else
                g.keys_q = k, g.values_q = vv;
        }
        std::vector<float> q(nq * d), o_ref(nq * dv), o_raw(nq * dv), o_tab(nq * dv);
        for (float &x : q) x = (float)r.normal();
        std::vector<double> work(kvc_attend_work_bytes(1, nq, dv) / sizeof(double) + 1);
        kvc_attend_batch br = {q.data(), 1, nq, 0, o_ref.data(), nullptr, nullptr};
        const kvc_status rs = ref->attend_batch(ref, &v, &br, work.data(), work.size() * sizeof(double));
        kvc_attend_batch bw = br, bt = br;
        bw.out = o_raw.data(), bt.out = o_tab.data();
        kvc_cuda_attend_info info;
        CHECK(kvc_cuda_attend(&v, &bw, 0, nullptr, &info) == KVC_OK, "far-apart %s gap %g: raw attend", type_name(t),
              gap);
        const kvc_status rt = cu->attend_batch(cu, &v, &bt, work.data(), work.size() * sizeof(double));
        CHECK(rt == rs, "far-apart %s gap %g: the table says %d, the reference %d", type_name(t), gap, (int)rt,
              (int)rs);
        bool nan_raw = false;
        for (float x : o_raw) nan_raw |= std::isnan(x);
        bool range = rs != KVC_OK;
        for (float x : o_ref) range |= !std::isfinite(x);
        marked += nan_raw, refused += range;
        if (rs == KVC_OK && rt == KVC_OK) {
            const std::vector<query_bound> qb = attend_bounds(v, br, info.n_blocks);
            for (size_t qi = 0; qi < nq; qi++) {
                const double tol = qb[qi].rel * qb[qi].num_abs + 2.0 * kU * qb[qi].num_abs + 1e-30;
                for (size_t c = 0; c < dv; c++) {
                    const double z = o_ref[qi * dv + c], et = std::fabs((double)o_tab[qi * dv + c] - z),
                                 ew = std::fabs((double)o_raw[qi * dv + c] - z);
                    if (!std::isfinite(z)) { // past FLT_MAX (kvc_attend's KVC_E_RANGE): not finite on every path
                        CHECK(!std::isfinite(o_tab[qi * dv + c]) && !std::isfinite(o_raw[qi * dv + c]),
                              "far-apart %s gap %g: q %zu col %zu: reference %g, table %g, raw %g", type_name(t), gap,
                              qi, c, z, (double)o_tab[qi * dv + c], (double)o_raw[qi * dv + c]);
                        continue;
                    }
                    CHECK(et <= tol, "far-apart %s gap %g: table q %zu col %zu %.9g vs %.9g (tol %.3g)", type_name(t),
                          gap, qi, c, (double)o_tab[qi * dv + c], z, tol);
                    CHECK(std::isnan(o_raw[qi * dv + c]) || ew <= tol,
                          "far-apart %s gap %g: raw q %zu col %zu %.9g vs %.9g (tol %.3g), neither right nor NaN",
                          type_name(t), gap, qi, c, (double)o_raw[qi * dv + c], z, tol);
                    worst = std::fmax(worst, et / tol);
                }
            }
        }
        for (void *p : shared) kvc_cuda_free_shared(p);
    }
    std::printf(
        "  far-apart N/D %-3s gaps 0..300: statuses the reference's (%d past FLT_MAX), %d raw calls marked NaN, "
        "err/tol %.3g\n",
        type_name(t), refused, marked, worst);
}

} // namespace

int run_batch_checks(bool matrix, bool one_type, double *worst_ratio); // test_cuda_batch.cu
int run_mirror_checks(bool matrix);                                    // test_cuda_mirror.cu

// The injected-bug matrix's switch (kernels/injected_bug.cuh): the kernels of a
// KVC_BUG_MATRIX build read it; in every other build nothing does.
int kvc_injected_bug = 0;
constexpr int kFirstBatchBug = 9; // bugs 9.. are in batch_decode.cuh, 1..8 in the per-stream kernels
constexpr int kMirrorBug = 17;    // kvc_cuda_stage_edits drops an in-place rewrite (kvc_cuda_batch.cu)
constexpr int kMassBug = 18;      // batch_mass_kernel takes an item's own state for the entry's merged one

int main(int argc, char **argv)
{
    if (const char *bug = std::getenv("KVC_BUG")) {
        kvc_injected_bug = std::atoi(bug);
        std::printf("KVC_BUG=%d: the injected bug (in a KVC_BUG_MATRIX build; other builds ignore it)\n",
                    kvc_injected_bug);
    }
    const bool matrix = argc > 1 && !std::strcmp(argv[1], "matrix");
    const bool one_type = argc > 1 && !std::strcmp(argv[1], "one-type");
    if (argc > 1 && !std::strcmp(argv[1], "batch")) { // the batched decode's checks alone
        double worst = 0;
        const int failures = run_batch_checks(false, false, &worst);
        return failures ? 1 : 0;
    }
    if (argc > 1 && !std::strcmp(argv[1], "mirror")) // every method through the core's mirrors alone
        return run_mirror_checks(false) ? 1 : 0;
    if (argc > 1 && !std::strcmp(argv[1], "mirror-matrix")) // the matrix's one method and type
        return run_mirror_checks(true) ? 1 : 0;
#if !defined(KVC_SIMT_CPU)
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev < 1) {
        std::printf("no CUDA device: skipped\n");
        return 77;
    }
#endif
    const kvc_kernels *cu = kvc_kernels_cuda();
    if (cu == nullptr) {
        std::printf("kvc_kernels_cuda() is NULL\n");
        return 1;
    }
    std::printf("test_cuda_kernels: seed %" PRIu64 ", %s, table '%s'\n", kSeed,
                kvc_cuda_is_cpu_runtime() ? "CPU SIMT runtime" : "GPU", cu->name);
    rng r{kSeed};
    case_result res;
    size_t types = 0;
    for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) {
        if (!kvc_kernels_support(cu, t)) continue;
        types++;
        if (matrix && t != KVC_DTYPE_F16) continue; // the study's matrix runs f16
        // a bug of the batched decode (9 and up) cannot be in these kernels: its matrix rows run the batch cases only
        if (matrix && kvc_injected_bug >= kFirstBatchBug) continue;
        for (const shape &sh : attend_shapes(matrix)) {
            // one-type: f16, and in f32 the shapes that take split_kernel's wide
            // configuration (f32 rows, <= 2 query rows, d % 32 == 0), so that
            // ThreadSanitizer sees both instantiations
            const bool wide = t == KVC_DTYPE_F32 && sh.n_q * sh.n_pos <= 2 && sh.d % 32 == 0;
            if (!one_type || t == KVC_DTYPE_F16 || wide) run_attend_case(sh, t, r, res);
        }
        if (matrix) continue;
        // the device row kernels (store, Gram) cover the types they accept;
        // the attend reads every type the table supports
        if (kvc_cuda_store_rows(t, nullptr, nullptr, 0, 4, nullptr) == KVC_OK) {
            run_store_case(t, 97, 64, r);
            run_store_case(t, 9, 33, r);
            run_store_case(t, 5, 256, r);
            run_gram_case(t, 7, 13, 64, true, r);
            run_gram_case(t, 3, 5, 33, false, r);
        } else {
            CHECK(kvc_cuda_pair_gram(t, nullptr, 0, nullptr, 0, 4, nullptr, nullptr, nullptr) == KVC_E_UNSUPPORTED,
                  "%s: the Gram kernel accepts a type the store refuses", type_name(t));
            std::printf("  store, gram %s: device row kernels refuse it (KVC_E_UNSUPPORTED), attend only\n",
                        type_name(t));
        }
        if (!one_type || t == KVC_DTYPE_F16) run_table_case(t, r, one_type ? 40 : 300);
        if (!one_type) run_far_apart_case(t, r);
    }
    // every type the reference reads (kvc_kernels_support), not a list kept here
    size_t ref_types = 0;
    for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) ref_types += kvc_kernels_support(kvc_kernels_ref(), t) ? 1u : 0u;
    CHECK(types == ref_types, "the cuda table supports %zu storage types, the reference %zu", types, ref_types);
    // bad input gets a status
    kvc_view empty;
    std::memset(&empty, 0, sizeof empty);
    float qq[4] = {0}, oo[4];
    kvc_attend_batch bad = {qq, 1, 1, 0, oo, nullptr, nullptr};
    CHECK(kvc_cuda_attend(&empty, &bad, 0, nullptr, nullptr) == KVC_E_ARG, "d = 0 accepted");
    empty.d = empty.dv = 4, empty.beta = 1.0f, empty.n_seg = 1, empty.seg[0].n = 3, empty.seg[0].role = KVC_SET_BOTH,
    empty.seg[0].scale = 1.0, empty.seg[0].dtype = KVC_DTYPE_KIVI2, empty.seg[0].keys_q = qq,
    empty.seg[0].values_q = qq;
    CHECK(kvc_cuda_attend(&empty, &bad, 0, nullptr, nullptr) == KVC_E_UNSUPPORTED, "kivi2 accepted");
    empty.seg[0].dtype = KVC_DTYPE_KIVI4, empty.seg[0].first = KVC_KIVI_BLOCK;
    CHECK(kvc_cuda_attend(&empty, &bad, 0, nullptr, nullptr) == KVC_E_ARG, "a KIVI4 segment starting past its block");
    CHECK(kvc_cuda_store_rows(KVC_DTYPE_I4, nullptr, nullptr, 0, 4, nullptr) == KVC_E_UNSUPPORTED, "int4 store");
    double batch_worst = 0;
    // (and a bug of the per-stream kernels, 1..8, cannot be in the batched decode's)
    if (!matrix || kvc_injected_bug == 0 || kvc_injected_bug >= kFirstBatchBug)
        run_batch_checks(matrix, one_type, &batch_worst); // counts in test_failures() too
    // the core's mirrors on the pages, one method and type: the matrix's clean and mirror rows (every
    // method and type: `test_cuda_kernels mirror`, ctest cuda.mirror)
    if (matrix && (kvc_injected_bug == 0 || kvc_injected_bug == kMirrorBug || kvc_injected_bug == kMassBug))
        run_mirror_checks(true);
    res.worst_ratio = std::fmax(res.worst_ratio, batch_worst);
    std::printf("test_cuda_kernels: worst error/tolerance %.3g; %d failures\n", res.worst_ratio, test_failures());
    kvc_cuda_release();
    return test_failures() ? 1 : 0;
}
