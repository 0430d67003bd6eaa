// Every method on the paged decode: the core's streams decide on the host,
// their mirrors (kvc_mirror.h) say what changed, kvc_cuda_stage_edits and
// kvc_cuda_batch_put_rows / _set_rows carry it to the pool, one
// kvc_cuda_batch_attend answers the batch. For every method of the registry
// x the page types the core has rows of (f16, int8, int4), a batch of 8
// sequences (8 streams), a prompt in one call, then decode steps past the
// budget (evictions, merges, halvings). After every step the pool is
// compared with the views; every 4th step and the last the batch is attended
// (the CPU runtime's cost is the attend):
//   - the pool holds exactly each stream's view: its rows with a weight,
//     read back through page_row_to_core, equal the view's codes bit for bit,
//     with the same weight and role (a multiset; the current token, f32 on the
//     host, stored in the page type by the reference kernel), and nothing else;
//   - the device's output equals the reference attend over those rows within
//     the batched kernel's derived tolerance (batch_bound).
// The two together: the paged path computes the host stream's attend within
// the kernel's bound, the current token stored in the page type.
// Also: put_rows round trips every core row type into pages and back.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kvc/kvc.h"
#include "kvc/kvc_cuda_batch.h"
#include "kernels/batch_layout.cuh"
#include "kvc_cuda_compat.h"
#include "test_support.h"
#include "batch_reference.h"

namespace
{

using namespace kvc_batch_ref;

const char *page_type_name_of(unsigned t)
{
    return t == KVC_CUDA_DTYPE_I4_ROW ? "int4-row" : kvc_dtype_name((kvc_dtype)t);
}

const uint64_t kMirrorSeed = 20261129u;
constexpr uint32_t kD = 64, kG = 2, kHkv = 1;

// The run's shape: the full run (every method and type) and the bug matrix's
// (H2O on int8, fewer and longer streams: entries of 5 pages, split over
// several work items, so that a wrong merge of the mass shows).
struct mirror_shape {
    uint32_t B, budget, prompt, steps;
};
const mirror_shape kFull{8, 96, 88, 28}, kMatrix{2, 280, 284, 8};

template <typename T> T *dev_copy(const T *h, size_t n)
{
    void *p = nullptr;
    cudaMalloc(&p, (n ? n : 1u) * sizeof(T));
    if (n) cudaMemcpy(p, h, n * sizeof(T), cudaMemcpyHostToDevice);
    return static_cast<T *>(p);
}

// put_rows: random core rows into random slots of a poisoned pool, read back by page_row_to_core.
void put_rows_round_trip(test_rng &r)
{
    const unsigned types[3] = {KVC_DTYPE_F16, KVC_DTYPE_I8, KVC_DTYPE_I4};
    for (unsigned t : types)
        for (uint32_t d = 64; d <= 128; d += 64) {
            const size_t PB = kvc_cuda_page_bytes(t, d), rb = (size_t)kvc_row_bytes(t, d), n_pages = 3, n = 100;
            std::vector<unsigned char> pool(n_pages * PB, 0xFF), rows(n * rb);
            std::vector<int32_t> slots(n);
            std::vector<uint8_t> halves(n);
            std::vector<float> x(d);
            std::vector<int32_t> perm(n_pages * 64);
            for (size_t i = 0; i < perm.size(); i++) perm[i] = (int32_t)i;
            for (size_t i = perm.size() - 1; i > 0; i--) std::swap(perm[i], perm[r.below(i + 1)]);
            for (size_t i = 0; i < n; i++) {
                for (uint32_t c = 0; c < d; c++) x[c] = (float)(r.normal() * 3.0);
                kvc_kernels_ref()->rows[t].store(rows.data() + i * rb, x.data(), d);
                slots[i] = perm[i / 2], halves[i] = (uint8_t)(i % 2); // a slot's key, then its value
            }
            // two rows the device must skip: slot -1 and a slot past the pool (their bytes are garbage)
            slots[n - 2] = -1, slots[n - 1] = (int32_t)(n_pages * 64);
            std::memset(rows.data() + (n - 2) * rb, 0x5A, 2 * rb);
            kvc_cuda_paged c{t, d, 1, 1, 0.125f, nullptr, (uint32_t)n_pages, 0};
            cudaMalloc(&c.pool, pool.size());
            cudaMemcpy(c.pool, pool.data(), pool.size(), cudaMemcpyHostToDevice);
            int32_t *sd = dev_copy(slots.data(), n);
            uint8_t *hd = dev_copy(halves.data(), n);
            unsigned char *rd = dev_copy(rows.data(), rows.size());
            CHECK(kvc_cuda_batch_put_rows(&c, n, sd, hd, rd, nullptr) == KVC_OK &&
                      cudaDeviceSynchronize() == cudaSuccess,
                  "put_rows %s d=%u", kvc_dtype_name((kvc_dtype)t), d);
            cudaMemcpy(pool.data(), c.pool, pool.size(), cudaMemcpyDeviceToHost);
            std::vector<unsigned char> back(rb);
            size_t same = 0;
            for (size_t i = 0; i < n - 2; i++) {
                kvc_cuda::page_row_to_core((int)t, d, pool.data() + (size_t)(slots[i] / 64) * PB,
                                           (uint32_t)(slots[i] % 64), halves[i] != 0, back.data());
                same += std::memcmp(back.data(), rows.data() + i * rb, rb) == 0;
            }
            CHECK(same == n - 2, "put_rows %s d=%u: %zu of %zu rows read back equal", kvc_dtype_name((kvc_dtype)t), d,
                  same, n - 2);
            size_t untouched = 0; // the slots no row was put in keep the pool's 0xFF
            for (size_t p = 0; p < n_pages * 64; p++) {
                bool used = false;
                for (size_t i = 0; i < n - 2 && !used; i++) used = slots[i] == (int32_t)p;
                if (used) continue;
                kvc_cuda::page_row_to_core((int)t, d, pool.data() + (p / 64) * PB, (uint32_t)(p % 64), false,
                                           back.data());
                untouched += back[rb - 1] == 0xFF;
            }
            CHECK(untouched == n_pages * 64 - (n - 2) / 2, "put_rows %s d=%u: a skipped row was written",
                  kvc_dtype_name((kvc_dtype)t), d);
            // refusals
            CHECK(kvc_cuda_batch_put_rows(&c, 0, nullptr, nullptr, nullptr, nullptr) == KVC_OK, "n = 0");
            CHECK(kvc_cuda_batch_put_rows(&c, 1, nullptr, hd, rd, nullptr) == KVC_E_ARG, "NULL slots");
            kvc_cuda_paged c4 = c;
            c4.dtype = KVC_CUDA_DTYPE_I4_ROW;
            CHECK(kvc_cuda_batch_put_rows(&c4, 1, sd, hd, rd, nullptr) == KVC_E_UNSUPPORTED, "int4-row refused");
            cudaFree(c.pool), cudaFree(sd), cudaFree(hd), cudaFree(rd);
        }
    std::printf("  mirror: put_rows round trip of f16, int8, int4 rows at d = 64, 128\n");
}

// The attention mass on every page type and head dimension (the mirror's runs
// cover int8 at d = 64 in the matrix): one entry of 150 rows over a poisoned
// pool, weights in [1/2, 2], mixed roles, one row excluded; weighted and
// unweighted caches, exact and fixed grids. Against the reference's mass on
// the stored rows, within sum over the group of p (the bound's relative term) + u.
void mass_checks(test_rng &r)
{
    const unsigned types[4] = {KVC_DTYPE_F16, KVC_DTYPE_I8, KVC_DTYPE_I4, KVC_CUDA_DTYPE_I4_ROW};
    double worst = 0;
    size_t cases = 0;
    for (unsigned t : types)
        for (uint32_t d = 64; d <= 128; d += 64)
            for (uint32_t unweighted = 0; unweighted <= 1; unweighted++) {
                const size_t PB = kvc_cuda_page_bytes(t, d), n = 150, n_pages = 4;
                kvc_cuda_paged c{t, d, 1, kG, 0.125f, nullptr, (uint32_t)n_pages, unweighted};
                cudaMalloc(&c.pool, n_pages * PB);
                cudaMemset(c.pool, 0xFF, n_pages * PB);
                // rows by the device's own append (every page type, int4-row included), then weights and roles
                std::vector<float> kx(n * d), vx(n * d), w(n, 1.0f);
                std::vector<uint8_t> role(n, 3u);
                for (auto &x : kx) x = (float)r.normal();
                for (auto &x : vx) x = (float)r.normal();
                const int32_t pages[3] = {2, 0, 3};
                std::vector<int32_t> slot(n);
                for (size_t i = 0; i < n; i++) slot[i] = pages[i / 64] * 64 + (int32_t)(i % 64);
                { // one launch: row i is "sequence" i of a one-head layer
                    int32_t *sd = dev_copy(slot.data(), n);
                    float *kd = dev_copy(kx.data(), n * d), *vd = dev_copy(vx.data(), n * d);
                    const kvc_cuda_tensor kt{kd, KVC_CUDA_F32, (int64_t)d, (int64_t)d},
                        vt{vd, KVC_CUDA_F32, (int64_t)d, (int64_t)d};
                    CHECK(kvc_cuda_batch_append(&c, n, sd, kt, vt, nullptr) == KVC_OK, "append");
                    cudaFree(sd), cudaFree(kd), cudaFree(vd);
                }
                if (!unweighted) {
                    for (size_t i = 0; i < n; i++)
                        w[i] = (float)(0.5 + 1.5 * r.uniform()), role[i] = (uint8_t)(1u + r.below(3));
                    w[7] = 0.0f; // excluded
                    int32_t *sd = dev_copy(slot.data(), n);
                    float *wd = dev_copy(w.data(), n);
                    uint8_t *rd = dev_copy(role.data(), n);
                    CHECK(kvc_cuda_batch_set_rows(&c, n, sd, wd, rd, nullptr) == KVC_OK, "set_rows");
                    cudaFree(sd), cudaFree(wd), cudaFree(rd);
                }
                const int32_t n_rows = (int32_t)n, indptr[2] = {0, 3};
                const size_t wsb = kvc_cuda_batch_workspace_bytes(&c, 1, 3),
                             hb = kvc_cuda_batch_plan_host_bytes(&c, 1, 3);
                void *ws = nullptr;
                cudaMalloc(&ws, wsb);
                std::vector<unsigned char> host(hb);
                kvc_cuda_batch_plan plan;
                CHECK(kvc_cuda_batch_plan_step(&c, 1, &n_rows, 3, (int)(cases % 2), host.data(), hb, ws, wsb, nullptr,
                                               &plan) == KVC_OK,
                      "plan");
                std::vector<float> q(kG * d), out(kG * d), mass(n_pages * 64, -1.0f);
                for (auto &x : q) x = (float)(2.0 * r.normal());
                float *qd = dev_copy(q.data(), q.size()), *od = dev_copy(out.data(), out.size());
                float *md = dev_copy(mass.data(), mass.size());
                int32_t *ip = dev_copy(indptr, 2), *ids = dev_copy(pages, 3);
                const kvc_cuda_tensor qt{qd, KVC_CUDA_F32, (int64_t)(kG * d), (int64_t)d},
                    ot{od, KVC_CUDA_F32, (int64_t)(kG * d), (int64_t)d};
                CHECK(kvc_cuda_batch_attend_mass(&c, &plan, ip, ids, qt, ot, ws, md, nullptr) == KVC_OK &&
                          cudaDeviceSynchronize() == cudaSuccess,
                      "attend_mass");
                CHECK(kvc_cuda_batch_attend_mass(&c, &plan, ip, ids, qt, ot, ws, nullptr, nullptr) == KVC_E_ARG,
                      "a NULL mass");
                cudaMemcpy(mass.data(), md, mass.size() * 4, cudaMemcpyDeviceToHost);
                std::vector<unsigned char> pool(n_pages * PB);
                cudaMemcpy(pool.data(), c.pool, pool.size(), cudaMemcpyDeviceToHost);
                // the reference on the rows as stored, read back as f32 (every page type has them)
                std::vector<stored_row> rows;
                std::vector<float> kf, vf, wf;
                std::vector<unsigned> ro;
                std::vector<size_t> idx;
                for (size_t i = 0; i < n; i++) {
                    if (!(w[i] > 0.0f)) continue;
                    rows.push_back(read_row(t, d, pool.data() + (size_t)pages[i / 64] * PB, (uint32_t)(i % 64)));
                    kf.insert(kf.end(), rows.back().k.begin(), rows.back().k.end());
                    vf.insert(vf.end(), rows.back().v.begin(), rows.back().v.end());
                    wf.push_back(w[i]), ro.push_back(role[i]), idx.push_back(i);
                }
                // one segment per row keeps each row's role (the reference's segments share one)
                std::vector<double> ref(rows.size(), 0.0), tol(rows.size(), kU);
                std::vector<double> work(kvc_attend_work_bytes(1, kG, d) / sizeof(double) + 1);
                for (uint32_t h = 0; h < kG; h++) {
                    const out_bound ob = batch_bound(t, d, c.beta, q.data() + h * d, rows, wf, ro, 3, 3);
                    // rows by role: N+D, N, D segments
                    kvc_view view;
                    std::memset(&view, 0, sizeof view);
                    view.d = view.dv = d, view.beta = c.beta, view.n_seg = 3;
                    const unsigned roles3[3] = {KVC_SET_BOTH, KVC_SET_NUM, KVC_SET_DEN};
                    std::vector<float> sk[3], sv[3], sw[3];
                    std::vector<size_t> where[3];
                    for (size_t i = 0; i < rows.size(); i++) {
                        const size_t g = ro[i] == 3u ? 0u : ro[i] == 1u ? 1u : 2u;
                        sk[g].insert(sk[g].end(), kf.begin() + i * d, kf.begin() + (i + 1) * d);
                        sv[g].insert(sv[g].end(), vf.begin() + i * d, vf.begin() + (i + 1) * d);
                        sw[g].push_back(wf[i]), where[g].push_back(i);
                    }
                    for (size_t g = 0; g < 3; g++) {
                        kvc_segment &sg = view.seg[g];
                        sg.n = sw[g].size(), sg.role = roles3[g], sg.scale = 1.0, sg.dtype = KVC_DTYPE_F32;
                        sg.keys = sg.n ? sk[g].data() : nullptr, sg.values = sg.n ? sv[g].data() : nullptr;
                        sg.weights = sg.n ? sw[g].data() : nullptr;
                    }
                    std::vector<float> one(d);
                    std::vector<double> pm(rows.size(), 0.0);
                    kvc_attend_batch b1 = {q.data() + h * d, 1, 1, 0, one.data(), pm.data(), nullptr};
                    CHECK(kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &view, &b1, work.data(),
                                                          work.size() * 8) == KVC_OK,
                          "reference");
                    size_t e = 0;
                    for (size_t g = 0; g < 3; g++)
                        for (size_t i : where[g]) ref[i] += pm[e], tol[i] += ob.rel * pm[e], e++;
                }
                for (size_t i = 0; i < rows.size(); i++) {
                    const double got = mass[(size_t)slot[idx[i]]];
                    CHECK(std::fabs(got - ref[i]) <= tol[i], "mass %s d=%u%s row %zu: %.9g, want %.9g (tol %.3g)",
                          page_type_name_of(t), d, unweighted ? " unweighted" : "", idx[i], got, ref[i], tol[i]);
                    worst = std::fmax(worst, std::fabs(got - ref[i]) / tol[i]);
                }
                cudaFree(c.pool), cudaFree(ws), cudaFree(qd), cudaFree(od), cudaFree(md), cudaFree(ip), cudaFree(ids);
                cases++;
            }
    std::printf("  mirror: mass on %zu page type x d x weighting cases, worst err/tol %.3g\n", cases, worst);
}

// One row, as comparable bytes (key codes, value codes or none, role) and its weight.
typedef std::pair<std::vector<unsigned char>, float> row_record;

row_record record(const unsigned char *k, const unsigned char *v, size_t rb, float w, unsigned role)
{
    std::vector<unsigned char> x(2 * rb + 1 + 4, 0);
    std::memcpy(x.data(), k, rb);
    if (v) std::memcpy(x.data() + rb, v, rb), x[2 * rb] = 1;
    std::memcpy(x.data() + 2 * rb + 1, &role, 4);
    return row_record(x, w);
}

std::vector<row_record> view_records(const kvc_stream *st, unsigned t)
{
    kvc_view v;
    kvc_stream_view(st, &v);
    const size_t rb = (size_t)kvc_row_bytes(t, kD);
    std::vector<row_record> out;
    std::vector<unsigned char> kq(rb), vq(rb);
    for (size_t i = 0; i < v.n_seg; i++) {
        const kvc_segment &g = v.seg[i];
        for (size_t j = 0; j < g.n; j++) {
            const float w = (float)((g.weights ? (double)g.weights[j] : 1.0) * g.scale);
            if (!(w > 0.0f) || !(w < INFINITY)) continue;
            if (g.dtype == KVC_DTYPE_F32) { // the current token: the page type's codes
                kvc_kernels_ref()->rows[t].store(kq.data(), g.keys + j * kD, kD);
                if (g.values) kvc_kernels_ref()->rows[t].store(vq.data(), g.values + j * kD, kD);
                out.push_back(record(kq.data(), g.values ? vq.data() : nullptr, rb, w, g.role));
            } else {
                const unsigned char *k = static_cast<const unsigned char *>(g.keys_q) + j * rb;
                const unsigned char *val =
                    g.values_q ? static_cast<const unsigned char *>(g.values_q) + j * rb : nullptr;
                out.push_back(record(k, val, rb, w, g.role));
            }
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

struct mirrored_stream {
    std::vector<unsigned char> arena_mem, mirror_mem;
    size_t bytes = 0; // the stream's arena
    kvc_stream *st = nullptr;
    kvc_mirror *m = nullptr;
    std::vector<int32_t> pages;
    uint32_t n_rows = 0;
    std::vector<float> k, v;         // its tokens
    std::vector<kvc_row_write> runs; // its journal: the rows written since its mirror's last step
    kvc_row_journal journal{nullptr, 0, nullptr, 0, 0, 0};
    kvc_kernels kern{}; // the reference table, with the journal on
};

// One method x page type: returns the worst error / tolerance (negative when it could not run).
double run_method(kvc_method meth, unsigned t, const mirror_shape &sh, test_rng &r, size_t *checked_rows)
{
    const uint32_t kB = sh.B, kE = kB * kHkv, kBudget = sh.budget, kPrompt = sh.prompt, kSteps = sh.steps;
    const char *mname = kvc_method_name(meth), *tname = kvc_dtype_name((kvc_dtype)t);
    const size_t PB = kvc_cuda_page_bytes(t, kD), rb = (size_t)kvc_row_bytes(t, kD);
    const uint32_t pages_per_entry = (kBudget + 16u) / 64u + 2u, n_pages = kE * pages_per_entry + 2;
    kvc_cuda_paged c{t, kD, kHkv, kG, 0.125f, nullptr, n_pages, 0};
    cudaMalloc(&c.pool, (size_t)n_pages * PB);
    cudaMemset(c.pool, 0xFF, (size_t)n_pages * PB); // NaN: rows not written must never be read
    std::vector<int32_t> free_pages;
    for (uint32_t p = 0; p < n_pages; p++) free_pages.push_back((int32_t)p);
    for (size_t i = free_pages.size() - 1; i > 0; i--) std::swap(free_pages[i], free_pages[r.below(i + 1)]);
    const uint32_t n_tok = kPrompt + kSteps;
    std::vector<mirrored_stream> S(kE);
    for (uint32_t e = 0; e < kE; e++) {
        kvc_stream_config cfg = kvc_stream_config_default(meth, kD, kD, kBudget, 100 + e);
        cfg.dtype = (kvc_dtype)t, cfg.n_sink = 4, cfg.n_window = 8, cfg.prefix_len = kPrompt;
        const size_t ab = kvc_stream_arena_bytes(&cfg);
        if (ab == 0) {
            std::printf("  mirror %-18s %-4s: %s\n", mname, tname, kvc_stream_config_problem(&cfg));
            cudaFree(c.pool);
            return -1.0;
        }
        S[e].arena_mem.assign(ab + KVC_ARENA_ALIGN, 0), S[e].bytes = ab;
        void *a = S[e].arena_mem.data() + (KVC_ARENA_ALIGN - (uintptr_t)S[e].arena_mem.data() % KVC_ARENA_ALIGN);
        CHECK(kvc_stream_init(a, ab, &cfg, &S[e].st) == KVC_OK, "%s %s: init", mname, tname);
        const size_t mb = kvc_mirror_bytes(S[e].st);
        S[e].mirror_mem.assign(mb + 8, 0);
        void *mm = S[e].mirror_mem.data() + (8 - (uintptr_t)S[e].mirror_mem.data() % 8) % 8;
        CHECK(kvc_mirror_init(mm, mb, S[e].st, &S[e].m) == KVC_OK, "%s %s: mirror init", mname, tname);
        S[e].runs.resize(8192);
        S[e].journal = kvc_row_journal{
            reinterpret_cast<const unsigned char *>(S[e].st), ab, S[e].runs.data(), (uint32_t)S[e].runs.size(), 0, 0};
        S[e].kern = *kvc_kernels_ref();
        S[e].kern.journal = &S[e].journal;
        S[e].k.resize((size_t)n_tok * kD), S[e].v.resize((size_t)n_tok * kD);
        for (auto &x : S[e].k) x = (float)r.normal();
        for (auto &x : S[e].v) x = (float)(r.normal() + 0.3);
    }
    const uint32_t slots = kvc_mirror_slots(S[0].m);
    std::vector<kvc_mirror_edit> edits(slots);
    const bool observes = kvc_method_observes(meth) != 0;
    // staging, sized for every slot of every entry twice (rows) and once (weights)
    const uint32_t cap = slots * kE * 2u;
    std::vector<int32_t> row_slots(cap), weight_slots(cap);
    std::vector<uint8_t> halves(cap), roles(cap);
    std::vector<unsigned char> rows((size_t)cap * rb);
    std::vector<float> weights(cap);
    kvc_cuda_staging sg{cap, 0, row_slots.data(),    halves.data(),  rows.data(),
                        cap, 0, weight_slots.data(), weights.data(), roles.data()};
    // the plan's buffers
    const size_t max_pages = (size_t)kE * pages_per_entry;
    const size_t wsb = kvc_cuda_batch_workspace_bytes(&c, kB, max_pages),
                 hb = kvc_cuda_batch_plan_host_bytes(&c, kB, max_pages);
    void *ws = nullptr;
    cudaMalloc(&ws, wsb);
    std::vector<unsigned char> host_plan(hb);
    // queries and output, f32 [B][Hkv G][d]
    const size_t qn = (size_t)kB * kHkv * kG * kD;
    std::vector<float> q(qn), out(qn);
    void *qd = nullptr, *od = nullptr;
    cudaMalloc(&qd, qn * 4), cudaMalloc(&od, qn * 4);
    const kvc_cuda_tensor qt{qd, KVC_CUDA_F32, (int64_t)(kHkv * kG * kD), (int64_t)kD};
    const kvc_cuda_tensor ot{od, KVC_CUDA_F32, (int64_t)(kHkv * kG * kD), (int64_t)kD};
    // the mass of every slot (methods that observe) and its scratch
    void *mass_v = nullptr;
    cudaMalloc(&mass_v, (size_t)n_pages * 64u * 4u);
    float *mass_d = static_cast<float *>(mass_v);
    std::vector<float> dev_mass((size_t)n_pages * 64u);
    double worst_mass = 0;
    size_t split_steps = 0; // attends whose plan split an entry over several items
    double worst = 0;
    std::vector<double> work(kvc_attend_work_bytes(1, kG, kD) / sizeof(double) + 1);
    for (uint32_t step = 0; step <= kSteps; step++) {
        sg.n_rows = sg.n_weights = 0;
        for (auto &x : q) x = (float)r.normal();
        bool stop = false;
        for (uint32_t e = 0; e < kE && !stop; e++) {
            mirrored_stream &ms = S[e];
            kvc_status rc;
            if (step == 0) {
                const size_t wb = kvc_stream_prefill_work_bytes(ms.st, kPrompt);
                std::vector<double> w8(wb / 8 + 1);
                rc = kvc_stream_prefill(ms.st, &ms.kern, ms.k.data(), kD, ms.v.data(), kD, kPrompt,
                                        wb ? w8.data() : nullptr, wb);
            } else {
                const size_t tok = kPrompt + step - 1;
                rc = kvc_stream_append(ms.st, &ms.kern, ms.k.data() + tok * kD, ms.v.data() + tok * kD);
            }
            if (rc == KVC_E_CAPACITY) { // exact and the exact tails: full
                stop = true;
                break;
            }
            CHECK(rc == KVC_OK, "%s %s step %u entry %u: %s", mname, tname, step, e, kvc_status_str(rc));
            size_t n_edits = 0;
            CHECK(kvc_mirror_step(ms.m, ms.st, &ms.journal, edits.data(), edits.size(), &n_edits, &ms.n_rows) == KVC_OK,
                  "%s %s: mirror step", mname, tname);
            ms.journal.count = 0, ms.journal.dropped = 0;
            while (ms.pages.size() * 64u < ms.n_rows && !free_pages.empty())
                ms.pages.push_back(free_pages.back()), free_pages.pop_back();
            CHECK(ms.pages.size() * 64u >= ms.n_rows, "%s %s: the pool is too small (%u rows)", mname, tname,
                  ms.n_rows);
            CHECK(kvc_cuda_stage_edits(&sg, &c, ms.st, edits.data(), n_edits, ms.pages.data(), ms.pages.size()) ==
                      KVC_OK,
                  "%s %s: stage", mname, tname);
        }
        if (stop) break;
        // every step for a method that observes (its mass comes from this attend), else every 4th
        const bool attend_now = observes || step % 4u == 0 || step == kSteps;
        // to the device: the rows, the weights, then the step's plan and attend
        int32_t *rs_d = dev_copy(row_slots.data(), sg.n_rows);
        uint8_t *h_d = dev_copy(halves.data(), sg.n_rows);
        unsigned char *r_d = dev_copy(rows.data(), (size_t)sg.n_rows * rb);
        int32_t *ws_d = dev_copy(weight_slots.data(), sg.n_weights);
        float *w_d = dev_copy(weights.data(), sg.n_weights);
        uint8_t *ro_d = dev_copy(roles.data(), sg.n_weights);
        CHECK(kvc_cuda_batch_put_rows(&c, sg.n_rows, rs_d, h_d, r_d, nullptr) == KVC_OK, "put_rows");
        CHECK(kvc_cuda_batch_set_rows(&c, sg.n_weights, ws_d, w_d, ro_d, nullptr) == KVC_OK, "set_rows");
        std::vector<int32_t> n_rows(kE), indptr(kE + 1, 0), ids;
        for (uint32_t e = 0; e < kE; e++) {
            n_rows[e] = (int32_t)S[e].n_rows;
            for (uint32_t p = 0; p < (S[e].n_rows + 63u) / 64u; p++) ids.push_back(S[e].pages[p]);
            indptr[e + 1] = (int32_t)ids.size();
        }
        int32_t *ip_d = dev_copy(indptr.data(), indptr.size()), *id_d = dev_copy(ids.data(), ids.size());
        if (attend_now) {
            kvc_cuda_batch_plan plan;
            const int fixed = (int)(step % 2u); // both grids: a fixed one has surplus blocks that return at once
            CHECK(kvc_cuda_batch_plan_step(&c, kB, n_rows.data(), max_pages, fixed, host_plan.data(), hb, ws, wsb,
                                           nullptr, &plan) == KVC_OK,
                  "plan");
            split_steps += plan.n_items > kE;
            cudaMemcpy(qd, q.data(), qn * 4, cudaMemcpyHostToDevice);
            const kvc_status ra = observes
                                      ? kvc_cuda_batch_attend_mass(&c, &plan, ip_d, id_d, qt, ot, ws, mass_d, nullptr)
                                      : kvc_cuda_batch_attend(&c, &plan, ip_d, id_d, qt, ot, ws, nullptr);
            CHECK(ra == KVC_OK && cudaDeviceSynchronize() == cudaSuccess, "%s %s: attend", mname, tname);
            cudaMemcpy(out.data(), od, qn * 4, cudaMemcpyDeviceToHost);
            if (observes) cudaMemcpy(dev_mass.data(), mass_d, dev_mass.size() * 4, cudaMemcpyDeviceToHost);
        }
        std::vector<unsigned char> pool((size_t)n_pages * PB);
        cudaMemcpy(pool.data(), c.pool, pool.size(), cudaMemcpyDeviceToHost);
        cudaFree(rs_d), cudaFree(h_d), cudaFree(r_d), cudaFree(ws_d), cudaFree(w_d), cudaFree(ro_d), cudaFree(ip_d),
            cudaFree(id_d);
        // each entry: the pool's rows are the view's; the output is the reference's on them
        const size_t lwoff = kvc_cuda::page_lw_offset((int)t, kD), roff = kvc_cuda::page_role_offset((int)t, kD);
        for (uint32_t e = 0; e < kE; e++) {
            std::vector<row_record> have;
            std::vector<stored_row> srows;
            std::vector<float> w;
            std::vector<unsigned> role;
            std::vector<unsigned char> segk[3], segv[3];
            std::vector<float> segw[3];
            std::vector<size_t> segslot[3]; // the pool slot of each segment row (the mass's index)
            std::vector<unsigned char> kk(rb), vv(rb);
            for (uint32_t s = 0; s < S[e].n_rows; s++) {
                const unsigned char *page = pool.data() + (size_t)S[e].pages[s / 64u] * PB;
                const uint32_t pr = s % 64u;
                const unsigned ro = page[roff + pr];
                if (ro == 0) continue;
                float lw;
                std::memcpy(&lw, page + lwoff + 4u * pr, 4);
                kvc_cuda::page_row_to_core((int)t, kD, page, pr, false, kk.data());
                kvc_cuda::page_row_to_core((int)t, kD, page, pr, true, vv.data());
                const float wt = std::exp(lw); // the page keeps ln w; the view's weight is compared through it
                const bool has_v = ro != KVC_SET_DEN;
                have.push_back(record(kk.data(), has_v ? vv.data() : nullptr, rb, wt, ro));
                srows.push_back(read_row(t, kD, page, pr));
                w.push_back(wt), role.push_back(ro);
                const size_t g = ro == 3u ? 0u : ro == 1u ? 1u : 2u;
                segk[g].insert(segk[g].end(), kk.begin(), kk.end());
                if (has_v) segv[g].insert(segv[g].end(), vv.begin(), vv.end());
                segw[g].push_back(wt);
                segslot[g].push_back((size_t)S[e].pages[s / 64u] * 64u + pr);
            }
            // rows and roles bit for bit; weights through the page's ln w, within 8u (1 + |ln w|)
            const std::vector<row_record> want = view_records(S[e].st, t);
            std::vector<row_record> got_rows = have;
            std::sort(got_rows.begin(), got_rows.end());
            bool same = got_rows.size() == want.size();
            for (size_t i = 0; same && i < want.size(); i++) {
                const double a = got_rows[i].second, b = want[i].second;
                same = got_rows[i].first == want[i].first &&
                       std::fabs(a - b) <= 8.0 * kU * (1.0 + std::fabs(std::log(b))) * b;
            }
            CHECK(same, "%s %s step %u entry %u: the pool holds %zu rows, the view %zu, or other codes or weights",
                  mname, tname, step, e, got_rows.size(), want.size());
            *checked_rows += have.size();
            const kvc_view view = role_view(t, false, kD, c.beta, segk, segv, segw);
            if (!attend_now) continue;
            const float *qe = q.data() + (size_t)e * kG * kD;
            std::vector<float> ref(kG * kD);
            std::vector<double> ref_mass(have.size(), 0.0);
            kvc_attend_batch bt = {qe, 1, kG, 0, ref.data(), observes ? ref_mass.data() : nullptr, nullptr};
            CHECK(kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &view, &bt, work.data(), work.size() * 8) ==
                      KVC_OK,
                  "reference");
            const size_t pages = (S[e].n_rows + 63u) / 64u;
            std::vector<double> mass_tol(have.size(), 1e-30);
            for (uint32_t j = 0; j < kG; j++) {
                const out_bound ob = batch_bound(t, kD, c.beta, qe + j * kD, srows, w, role, pages, pages);
                if (observes) { // each row's probability for this query row, relative error within ob.rel
                    std::vector<float> one(kD);
                    std::vector<double> pj(have.size(), 0.0);
                    kvc_attend_batch b1 = {qe + j * kD, 1, 1, 0, one.data(), pj.data(), nullptr};
                    kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &view, &b1, work.data(), work.size() * 8);
                    for (size_t i = 0; i < pj.size(); i++) mass_tol[i] += ob.rel * pj[i] + kU;
                }
                for (uint32_t cc = 0; cc < kD && attend_now; cc++) {
                    const double want_o = ref[j * kD + cc], got = out[(size_t)e * kG * kD + j * kD + cc];
                    const double tol = ob.rel * ob.A + ob.H + kU * std::fabs(want_o) + 1e-30;
                    const double err = std::fabs(got - want_o);
                    CHECK(err <= tol, "%s %s step %u entry %u head %u col %u: |%.9g - %.9g| > %.3g", mname, tname, step,
                          e, j, cc, got, want_o, tol);
                    worst = std::fmax(worst, err / tol);
                }
            }
            if (observes) { // the device's mass against the reference's, segment order
                size_t i = 0;
                for (size_t g = 0; g < 3; g++)
                    for (size_t k = 0; k < segslot[g].size(); k++, i++) {
                        const double got = dev_mass[segslot[g][k]], want_m = ref_mass[i];
                        CHECK(std::fabs(got - want_m) <= mass_tol[i],
                              "%s %s step %u entry %u: mass %.9g, want %.9g (tol %.3g)", mname, tname, step, e, got,
                              want_m, mass_tol[i]);
                        worst_mass = std::fmax(worst_mass, std::fabs(got - want_m) / mass_tol[i]);
                    }
            }
        }
        // the methods that observe: the device's mass, in view order, to the stream (the journal sees its evictions)
        for (uint32_t e = 0; e < kE && observes && attend_now; e++) {
            std::vector<float> slot_mass(kvc_mirror_slots(S[e].m), 0.0f);
            for (uint32_t sl = 0; sl < S[e].n_rows; sl++)
                slot_mass[sl] = dev_mass[(size_t)S[e].pages[sl / 64u] * 64u + sl % 64u];
            std::vector<double> vm(kvc_stream_view_entries(S[e].st));
            CHECK(kvc_mirror_view_mass(S[e].m, S[e].st, slot_mass.data(), vm.data(), vm.size()) == KVC_OK,
                  "%s %s: view mass", mname, tname);
            CHECK(kvc_stream_observe(S[e].st, &S[e].kern, vm.data(), vm.size()) == KVC_OK, "%s %s: observe", mname,
                  tname);
        }
        if (test_failures() > 20) std::exit(1);
    }
    cudaFree(c.pool), cudaFree(ws), cudaFree(qd), cudaFree(od), cudaFree(mass_d);
    if (observes)
        std::printf("  mirror %-18s %-4s: mass from the device, worst err/tol %.3g (%zu attends with split entries)\n",
                    mname, tname, worst_mass, split_steps);
    return worst;
}

} // namespace

// Called by test_cuda_kernels' main ("mirror", and in the full run; "matrix":
// one method and type, for the bug matrix). Returns its failures.
int run_mirror_checks(bool matrix)
{
    test_rng r{kMirrorSeed};
    const int before = test_failures();
    const mirror_shape &sh = matrix ? kMatrix : kFull;
    std::printf("mirror: seed %" PRIu64
                "; d = %u, group %u, %u sequences x %u kv heads, budget %u, prompt %u, %u steps\n",
                kMirrorSeed, kD, kG, sh.B, kHkv, sh.budget, sh.prompt, sh.steps);
    put_rows_round_trip(r);
    mass_checks(r);
    const unsigned types[3] = {KVC_DTYPE_F16, KVC_DTYPE_I8, KVC_DTYPE_I4};
    size_t methods = 0;
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const kvc_method m = kvc_method_at(mi);
        if (matrix && m != KVC_METHOD_H2O) continue;
        bool ran = false;
        for (unsigned t : types) {
            if (matrix && t != KVC_DTYPE_I8) continue;
            size_t rows = 0;
            const double worst = run_method(m, t, sh, r, &rows);
            if (worst < 0) continue;
            ran = true;
            std::printf("  mirror %-18s %-4s: %6zu rows checked bit for bit, err/tol %.3g\n", kvc_method_name(m),
                        kvc_dtype_name((kvc_dtype)t), rows, worst);
        }
        methods += ran;
    }
    std::printf("mirror: %zu methods on the paged decode; %d failures\n", methods, test_failures() - before);
    if (!matrix)
        CHECK(methods == kvc_method_count(), "every method on the device path (%zu of %zu)", methods,
              kvc_method_count());
    return test_failures() - before;
}
