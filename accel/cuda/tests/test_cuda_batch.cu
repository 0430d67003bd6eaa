// The batched decode (kvc_cuda_batch.h) against the reference kernels: a
// paged pool filled by kvc_cuda_batch_append one step at a time (pages
// assigned to entries in a shuffled order, fresh pool memory that is garbage,
// ragged lengths with empty entries and partial last pages), an eviction made
// as an index edit (a new token appended into the victim's slot), weights and
// N/D roles set by kvc_cuda_batch_set_rows, then one kvc_cuda_batch_attend.
// The pool is read back and every entry's rows go, as they are stored, to
// kvc_k_attend_batch__ref (three segments: both, N only, D only); the
// outputs must agree within the tolerance derived in batch_bound. Every
// storage type and head dimension the batch kernels compile is enumerated
// (kvc_cuda_page_bytes says which), with f32, f16 and bf16 tensors.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cstdint>
#include <vector>

#include <cuda_fp16.h>

#include "kvc/kvc.h"
#include "kvc/kvc_cuda_batch.h"
#include "batch_plan.h"
#include "kernels/batch_layout.cuh"
#include "kvc_cuda_compat.h"
#include "test_support.h"
#include "batch_reference.h"

namespace
{

using namespace kvc_batch_ref;

const uint64_t kSeed = 20261126u;
const unsigned kPageTypeLimit = 64; // page types are numbered below (kvc_cuda_page_bytes says which exist)

using rng = test_rng;

const char *page_type_name(unsigned t)
{
    return t == KVC_CUDA_DTYPE_I4_ROW ? "int4-row" : kvc_dtype_name((kvc_dtype)t);
}
const char *elem_name(kvc_cuda_elem e) { return e == KVC_CUDA_F32 ? "f32" : e == KVC_CUDA_F16 ? "f16" : "bf16"; }
double elem_unit(kvc_cuda_elem e) { return e == KVC_CUDA_F32 ? kU : e == KVC_CUDA_F16 ? kUh : 0.00390625; }

// f32 -> the element type's bits and back (round to nearest even), on the host
uint16_t to_f16(float x) { return __half_as_ushort(__float2half_rn(x)); }
float from_f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }
uint16_t to_bf16(float x)
{
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h)
{
    const uint32_t b = (uint32_t)h << 16;
    float x;
    std::memcpy(&x, &b, 4);
    return x;
}

// A [n_seqs][n_heads][dim] tensor with padded strides, on the host and the device.
struct tensor {
    kvc_cuda_elem elem;
    size_t n_seqs, n_heads, dim, hs, ss;
    std::vector<unsigned char> host;
    void *dev = nullptr;
    tensor(kvc_cuda_elem e, size_t s, size_t h, size_t d) : elem(e), n_seqs(s), n_heads(h), dim(d)
    {
        hs = d + 8u, ss = h * hs + 16u; // gaps between heads and between sequences
        host.assign(s * ss * esize(), 0xEE);
        cudaMalloc(&dev, host.size());
    }
    ~tensor() { cudaFree(dev); }
    size_t esize() const { return elem == KVC_CUDA_F32 ? 4u : 2u; }
    size_t at(size_t s, size_t h, size_t c) const { return s * ss + h * hs + c; }
    // stores x rounded to the element type; returns the value the device reads
    float set(size_t s, size_t h, size_t c, float x)
    {
        unsigned char *p = host.data() + at(s, h, c) * esize();
        if (elem == KVC_CUDA_F32) return std::memcpy(p, &x, 4), x;
        const uint16_t b = elem == KVC_CUDA_F16 ? to_f16(x) : to_bf16(x);
        std::memcpy(p, &b, 2);
        return elem == KVC_CUDA_F16 ? from_f16(b) : from_bf16(b);
    }
    float get(size_t s, size_t h, size_t c) const
    {
        const unsigned char *p = host.data() + at(s, h, c) * esize();
        if (elem == KVC_CUDA_F32) {
            float x;
            return std::memcpy(&x, p, 4), x;
        }
        uint16_t b;
        std::memcpy(&b, p, 2);
        return elem == KVC_CUDA_F16 ? from_f16(b) : from_bf16(b);
    }
    void upload() { cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice); }
    void download() { cudaMemcpy(host.data(), dev, host.size(), cudaMemcpyDeviceToHost); }
    kvc_cuda_tensor view() const { return kvc_cuda_tensor{dev, elem, (int64_t)ss, (int64_t)hs}; }
};

template <typename T> T *upload(const std::vector<T> &h)
{
    void *p = nullptr;
    cudaMalloc(&p, (h.empty() ? 1u : h.size()) * sizeof(T));
    if (!h.empty()) cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return static_cast<T *>(p);
}

struct batch_case {
    const char *name;
    unsigned dtype;
    uint32_t d, group, n_kv_heads, n_seqs;
    std::vector<int32_t> lens; // per entry
    kvc_cuda_elem kv_elem, q_elem, out_elem;
    int fixed_grid;
    uint32_t unweighted = 0; // the cache declared unweighted: no set_rows edits (refused), attend skips the metadata
};

// Where a stored row came from: the f32 values the device read.
struct row_src {
    std::vector<float> k, v;
};

// The largest error of a stored row (keys or values) against its source, within the bound of its type:
//   f16  |x - h| <= 2^-11 |x| + 2^-25 (the subnormal step);
//   int8 |x - s c| <= s (1/2 + 2^-20) + 2u |x| (x / s rounded in f32 before rounding to a code);
//   int4 |x - (mn + q sc)| <= sc (1/2 + 2^-20) + 4u (|x| + |mn|) (the same, and mn + 15 sc >= hi in f32),
//        sc and mn the element's group's (of 32, or the whole row).
double store_error_ratio(unsigned t, size_t d, const unsigned char *page, uint32_t r, bool value,
                         const std::vector<float> &y, const std::vector<float> &x)
{
    double worst = 0;
    for (size_t c = 0; c < d; c++) {
        double bound;
        if (t == KVC_DTYPE_F16) {
            bound = kUh * std::fabs(x[c]) + kHalfSub;
        } else if (t == KVC_DTYPE_I8) {
            float s;
            std::memcpy(&s, page + kvc_cuda::page_scale_offset((int)t, (uint32_t)d) + (value ? 256u : 0u) + 4u * r, 4);
            bound = (double)s * (0.5 + 0x1p-20) + 2.0 * kU * std::fabs(x[c]);
        } else {
            const uint32_t ng = kvc_cuda::i4_groups((int)t, (uint32_t)d);
            const unsigned char *h = page + kvc_cuda::page_scale_offset((int)t, (uint32_t)d) +
                                     4u * ng * (r + (value ? 64u : 0u)) + 4u * (c * ng / d);
            const double sc = kvc_cuda::page_half_at(h), mn = kvc_cuda::page_half_at(h + 2);
            bound = sc * (0.5 + 0x1p-20) + 4.0 * kU * (std::fabs(x[c]) + std::fabs(mn));
        }
        worst = std::fmax(worst, std::fabs((double)x[c] - (double)y[c]) / (bound + 1e-300));
    }
    return worst;
}

double run_batch_case(const batch_case &bc, rng &r)
{
    const size_t d = bc.d, G = bc.group, Hkv = bc.n_kv_heads, B = bc.n_seqs, E = B * Hkv;
    const size_t PB = kvc_cuda_page_bytes(bc.dtype, d);
    // pages: each entry its own, in a shuffled order over the pool, plus unused ones
    std::vector<int32_t> indptr(E + 1, 0), ids;
    size_t used = 0;
    for (size_t e = 0; e < E; e++) used += ((size_t)bc.lens[e] + 63u) / 64u, indptr[e + 1] = (int32_t)used;
    const size_t n_pages = used + 3u;
    std::vector<int32_t> perm(n_pages);
    for (size_t i = 0; i < n_pages; i++) perm[i] = (int32_t)i;
    for (size_t i = n_pages; i > 1; i--) std::swap(perm[i - 1], perm[r.below(i)]);
    ids.assign(perm.begin(), perm.begin() + (long)used);
    kvc_cuda_paged c;
    c.dtype = bc.dtype, c.head_dim = (uint32_t)d, c.n_kv_heads = (uint32_t)Hkv, c.group = (uint32_t)G;
    c.beta = (float)(1.0 / std::sqrt((double)d)), c.n_pages = (uint32_t)n_pages, c.pool = nullptr;
    c.unweighted = bc.unweighted;
    cudaMalloc(&c.pool, n_pages * PB); // garbage (the CPU runtime poisons it): unwritten rows must not matter
    CHECK(kvc_cuda_paged_check(&c) == KVC_OK, "%s: the cache is refused", bc.name);
    auto slot_of = [&](size_t e, size_t row) {
        return (int32_t)(ids[(size_t)indptr[e] + row / 64u] * 64 + (int32_t)(row % 64u));
    };

    // append step by step; row_src keeps what each slot was given
    std::vector<row_src> src(n_pages * 64u);
    tensor k(bc.kv_elem, B, Hkv, d), v(bc.kv_elem, B, Hkv, d);
    int32_t *slots_d = nullptr;
    cudaMalloc(reinterpret_cast<void **>(&slots_d), E * sizeof(int32_t));
    auto append = [&](const std::vector<int32_t> &slots) {
        for (size_t e = 0; e < E; e++) {
            if (slots[e] < 0) continue;
            row_src &s = src[(size_t)slots[e]];
            s.k.assign(d, 0), s.v.assign(d, 0);
            const double ks = e % 3u == 1u ? 40.0 : 1.5; // one head with large keys: sharp softmax
            for (size_t cc = 0; cc < d; cc++) {
                s.k[cc] = k.set(e / Hkv, e % Hkv, cc, (float)(ks * r.normal()));
                s.v[cc] = v.set(e / Hkv, e % Hkv, cc, (float)(r.normal() + (cc % 7u == 0 ? 3.0 : 0.0)));
            }
        }
        k.upload(), v.upload();
        cudaMemcpy(slots_d, slots.data(), E * sizeof(int32_t), cudaMemcpyHostToDevice);
        const kvc_status rc = kvc_cuda_batch_append(&c, B, slots_d, k.view(), v.view(), nullptr);
        CHECK(rc == KVC_OK, "%s: append says %d", bc.name, (int)rc);
    };
    int32_t max_len = 0;
    for (int32_t L : bc.lens) max_len = L > max_len ? L : max_len;
    for (int32_t step = 0; step < max_len; step++) {
        std::vector<int32_t> slots(E, -1);
        for (size_t e = 0; e < E; e++)
            if (step < bc.lens[e]) slots[e] = slot_of(e, (size_t)step);
        append(slots);
    }
    // an eviction as an index edit: a new token into a victim's slot
    {
        std::vector<int32_t> slots(E, -1);
        for (size_t e = 0; e < E; e++)
            if (bc.lens[e] >= 2) slots[e] = slot_of(e, r.below((size_t)bc.lens[e]));
        append(slots);
    }
    // host view of weights and roles; then edits: reweight, exclude, N-only, D-only (and skipped slots)
    std::vector<float> wt(n_pages * 64u, 1.0f);
    std::vector<unsigned> ro(n_pages * 64u, 3u);
    std::vector<int32_t> es;
    std::vector<float> ew;
    std::vector<uint8_t> er;
    for (size_t e = 0; e < E && !bc.unweighted; e++)
        for (int32_t i = 0; i < bc.lens[e]; i++) {
            if (r.uniform() > 0.3) continue;
            const int32_t s = slot_of(e, (size_t)i);
            const double u = r.uniform();
            const float w = u < 0.2 ? 0.0f : u < 0.3 ? 1000.0f : (float)(0.1 + 4.9 * r.uniform());
            const uint8_t role = (uint8_t)(1u + r.below(3));
            es.push_back(s), ew.push_back(w), er.push_back(role);
            wt[(size_t)s] = w, ro[(size_t)s] = role;
        }
    es.push_back(-1), ew.push_back(0.0f), er.push_back(3);                       // skipped
    es.push_back((int32_t)(n_pages * 64u)), ew.push_back(0.0f), er.push_back(3); // out of range: skipped
    int32_t *es_d = upload(es);
    float *ew_d = upload(ew);
    uint8_t *er_d = upload(er);
    CHECK(kvc_cuda_batch_set_rows(&c, es.size(), es_d, ew_d, er_d, nullptr) == (bc.unweighted ? KVC_E_ARG : KVC_OK),
          "%s: set_rows", bc.name);

    // the step: plan, attend
    tensor q(bc.q_elem, B, Hkv * G, d), out(bc.out_elem, B, Hkv * G, d);
    std::vector<float> qv(B * Hkv * G * d);
    for (size_t s = 0; s < B; s++)
        for (size_t h = 0; h < Hkv * G; h++)
            for (size_t cc = 0; cc < d; cc++) qv[(s * Hkv * G + h) * d + cc] = q.set(s, h, cc, (float)r.normal());
    q.upload();
    out.upload(); // 0xEE bytes where nothing may be written
    const size_t max_pages = used + 1u;
    const size_t wsb = kvc_cuda_batch_workspace_bytes(&c, B, max_pages),
                 hb = kvc_cuda_batch_plan_host_bytes(&c, B, max_pages);
    void *ws = nullptr;
    cudaMalloc(&ws, wsb);
    std::vector<unsigned char> host_buf(hb + 16u);
    unsigned char *hp = host_buf.data() + (16u - (uintptr_t)host_buf.data() % 16u) % 16u;
    kvc_cuda_batch_plan plan;
    CHECK(kvc_cuda_batch_plan_step(&c, B, bc.lens.data(), max_pages, bc.fixed_grid, hp, hb, ws, wsb - 1, nullptr,
                                   &plan) == KVC_E_ARG,
          "%s: a workspace one byte short accepted", bc.name);
    const kvc_status rp =
        kvc_cuda_batch_plan_step(&c, B, bc.lens.data(), max_pages, bc.fixed_grid, hp, hb, ws, wsb, nullptr, &plan);
    CHECK(rp == KVC_OK, "%s: plan says %d", bc.name, (int)rp);
    int32_t *indptr_d = upload(indptr), *ids_d = upload(ids);
    // an unweighted cache: every page's log-weights and roles made garbage (NaN, role 255), which
    // would exclude every row if attend read them
    if (bc.unweighted)
        for (size_t pg = 0; pg < n_pages; pg++)
            cudaMemset(static_cast<unsigned char *>(c.pool) + pg * PB +
                           kvc_cuda::page_lw_offset((int)bc.dtype, (uint32_t)d),
                       0xFF, 64u * 5u);
    const kvc_status ra = kvc_cuda_batch_attend(&c, &plan, indptr_d, ids_d, q.view(), out.view(), ws, nullptr);
    CHECK(ra == KVC_OK && cudaDeviceSynchronize() == cudaSuccess, "%s: attend says %d", bc.name, (int)ra);
    out.download();

    // the reference on the stored rows
    std::vector<unsigned char> pool(n_pages * PB);
    cudaMemcpy(pool.data(), c.pool, pool.size(), cudaMemcpyDeviceToHost);
    const size_t lwoff = kvc_cuda::page_lw_offset((int)bc.dtype, (uint32_t)d), roff = lwoff + 256u;
    double worst = 0, worst_store = 0;
    std::vector<double> work(kvc_attend_work_bytes(1, G, d) / sizeof(double) + 1);
    for (size_t e = 0; e < E; e++) {
        // rows in order, grouped by role into the reference's segments: the core's row layout for
        // f16, int8 and int4 pages (the reference decodes the bytes: the layouts must be the core's),
        // f32 rows for a device-only page type (int4 in one group per row)
        const bool as_f32 = bc.dtype >= KVC_DTYPE_COUNT;
        const size_t rowb = as_f32 ? 4u * d : (size_t)kvc_row_bytes(bc.dtype, d);
        std::vector<std::vector<unsigned char>> segk(3), segv(3);
        std::vector<std::vector<float>> segw(3);
        std::vector<stored_row> rows;
        std::vector<float> w;
        std::vector<unsigned> role;
        std::vector<unsigned char> kk(rowb), vv(rowb);
        for (int32_t i = 0; i < bc.lens[e]; i++) {
            const size_t s = (size_t)slot_of(e, (size_t)i);
            const unsigned char *page = pool.data() + (s / 64u) * PB;
            const uint32_t pr = (uint32_t)(s % 64u);
            rows.push_back(read_row(bc.dtype, d, page, pr));
            if (as_f32) {
                std::memcpy(kk.data(), rows.back().k.data(), rowb), std::memcpy(vv.data(), rows.back().v.data(), rowb);
            } else {
                kvc_cuda::page_row_to_core((int)bc.dtype, (uint32_t)d, page, pr, false, kk.data());
                kvc_cuda::page_row_to_core((int)bc.dtype, (uint32_t)d, page, pr, true, vv.data());
            }
            float lw;
            std::memcpy(&lw, page + lwoff + 4u * pr, 4);
            const unsigned rr = page[roff + pr];
            const unsigned want_role = wt[s] > 0.0f ? ro[s] : 0u; // weight 0: excluded, whatever the role
            CHECK(bc.unweighted || (rr == want_role && (wt[s] > 0.0f ? std::fabs(lw - std::log(wt[s])) <=
                                                                           4.0 * kU * (1.0 + std::fabs(std::log(wt[s])))
                                                                     : lw == -INFINITY)),
                  "%s: slot %zu holds log-weight %g role %u, want weight %g role %u", bc.name, s, (double)lw, rr,
                  (double)wt[s], ro[s]);
            worst_store =
                std::fmax(worst_store, store_error_ratio(bc.dtype, d, page, pr, false, rows.back().k, src[s].k));
            worst_store =
                std::fmax(worst_store, store_error_ratio(bc.dtype, d, page, pr, true, rows.back().v, src[s].v));
            const size_t g = ro[s] == 3u ? 0u : ro[s] == 1u ? 1u : 2u;
            segk[g].insert(segk[g].end(), kk.begin(), kk.end()), segv[g].insert(segv[g].end(), vv.begin(), vv.end());
            segw[g].push_back(wt[s]);
            w.push_back(wt[s]), role.push_back(ro[s]);
        }
        const kvc_view view = role_view(bc.dtype, as_f32, d, c.beta, segk.data(), segv.data(), segw.data());
        const float *qe = qv.data() + e * G * d; // entry (s, h): query heads h G .. h G + G - 1 of sequence s
        std::vector<float> ref(G * d);
        kvc_attend_batch b = {qe, 1, G, 0, ref.data(), nullptr, nullptr};
        const kvc_status rr =
            kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &view, &b, work.data(), work.size() * sizeof(double));
        CHECK(rr == KVC_OK, "%s: the reference says %d", bc.name, (int)rr);
        const size_t pages = ((size_t)bc.lens[e] + 63u) / 64u;
        const size_t items = pages; // the entry's items, at most one per page (the bound grows with them)
        for (size_t j = 0; j < G; j++) {
            const out_bound ob = batch_bound(bc.dtype, d, c.beta, qe + j * d, rows, w, role, pages, items);
            const size_t s = e / Hkv, h = (e % Hkv) * G + j;
            for (size_t cc = 0; cc < d; cc++) {
                const double want = ref[j * d + cc], got = out.get(s, h, cc);
                const double tol = ob.rel * ob.A + ob.H + elem_unit(bc.out_elem) * std::fabs(want) +
                                   (bc.out_elem == KVC_CUDA_F32 ? 0.0 : kHalfSub) + 1e-30;
                // f16 rounds to infinity from 65520 on: a true output that far out must give it
                const double top = bc.out_elem == KVC_CUDA_F16 ? 65520.0 : INFINITY;
                if (std::fabs(want) - tol >= top) {
                    CHECK(got == std::copysign(INFINITY, want),
                          "%s: entry %zu head %zu col %zu: %.9g is past f16, got %.9g", bc.name, e, j, cc, want, got);
                    continue;
                }
                const double err = std::isinf(got) && std::fabs(want) + tol >= top ? 0.0 : std::fabs(got - want);
                CHECK(err <= tol, "%s: entry %zu head %zu col %zu: |%.9g - %.9g| = %.3g > tol %.3g", bc.name, e, j, cc,
                      got, want, err, tol);
                if (err > tol && test_failures() > 20) std::exit(1);
                worst = std::fmax(worst, err / tol);
            }
        }
    }
    // nothing outside the output's rows was written (the gaps keep their 0xEE bytes)
    size_t gaps_ok = 0, gaps = 0;
    for (size_t i = 0; i < out.host.size() / out.esize(); i++) {
        const size_t s = i / out.ss, rem = i % out.ss, h = rem / out.hs, cc = rem % out.hs;
        if (s < B && h < Hkv * G && cc < d) continue;
        gaps++;
        gaps_ok += out.host[i * out.esize()] == 0xEE ? 1u : 0u;
    }
    CHECK(gaps_ok == gaps, "%s: %zu of %zu bytes between output rows were written", bc.name, gaps - gaps_ok, gaps);
    CHECK(worst_store <= 1.0, "%s: a stored row is off its source by %.3g of the bound", bc.name, worst_store);
    std::printf(
        "  batch  %-28s %-5s d=%3zu G=%2zu kv=%zu B=%zu kv %-4s q %-4s out %-4s items=%3u (x%u pages, grid %u): "
        "err/tol %.3g, store err/bound %.3g\n",
        bc.name, page_type_name(bc.dtype), d, G, Hkv, B, elem_name(bc.kv_elem), elem_name(bc.q_elem),
        elem_name(bc.out_elem), plan.n_items, plan.pages_per_item, plan.grid, worst, worst_store);
    cudaFree(c.pool), cudaFree(slots_d), cudaFree(es_d), cudaFree(ew_d), cudaFree(er_d), cudaFree(ws);
    cudaFree(indptr_d), cudaFree(ids_d);
    return worst;
}

// The plan (batch_plan.h) on every shape class, for slot counts of the CPU
// runtime and of an H200's f16/int4 (3 x 132) and int8 (2 x 132) kernels:
// every page of every entry is in exactly one item, in order; each entry has
// one item at least (0 pages when empty); an entry's items differ by one page
// at most and have kMinItemPages pages unless the entry has fewer; items fit
// plan_capacity; equal entries that fill the slots in whole waves are not
// split. Then the plan's purpose at the issue's goal shapes on those slots:
// the wave efficiency (pages / (slots x waves x largest item)) must be >= 0.9,
// since a plan below it would cap the kernel under the 90%-of-read goal by
// itself -- except where the step has less work than two minimal items per
// slot (B = 1, n = 4k: 512 pages for 396 slots), which no plan can fill.
void plan_checks(rng &r)
{
    using namespace kvc_cuda;
    size_t shapes = 0;
    auto check_plan = [&](const std::vector<int32_t> &rows, size_t slots, const char *what) {
        const size_t E = rows.size();
        const size_t c = plan_chunk(rows.data(), E, slots), n = items_for_chunk(rows.data(), E, c);
        std::vector<batch_item> items(n);
        std::vector<int32_t> first(E + 1);
        CHECK(plan_items(rows.data(), E, c, items.data(), first.data()) == n && n <= plan_capacity(slots, E),
              "plan %s: %zu items, capacity %zu", what, n, plan_capacity(slots, E));
        size_t total = 0, largest = 0;
        for (size_t e = 0; e < E; e++) {
            const size_t p = pages_of(rows[e]);
            total += p;
            CHECK(first[e + 1] > first[e], "plan %s: entry %zu has no item", what, e);
            size_t next = 0, lo = SIZE_MAX, hi = 0;
            for (int32_t k = first[e]; k < first[e + 1]; k++) {
                const batch_item &it = items[(size_t)k];
                const size_t np = (size_t)it.n_pages;
                CHECK(it.entry == (int32_t)e && (size_t)it.page0 == next, "plan %s: entry %zu item %d out of order",
                      what, e, k);
                const size_t want_rows = std::min((size_t)rows[e] - std::min((size_t)rows[e], next * 64u), np * 64u);
                CHECK((size_t)it.rows == want_rows, "plan %s: entry %zu item %d rows %d, want %zu", what, e, k, it.rows,
                      want_rows);
                next += np, lo = std::min(lo, np), hi = std::max(hi, np), largest = std::max(largest, np);
            }
            CHECK(next == p, "plan %s: entry %zu covers %zu of %zu pages", what, e, next, p);
            CHECK(hi - lo <= 1u && (lo >= kMinItemPages || first[e + 1] - first[e] == 1),
                  "plan %s: entry %zu items of %zu .. %zu pages", what, e, lo, hi);
        }
        shapes++;
        const double waves = (double)((n + slots - 1u) / slots);
        return largest > 0 ? (double)total / ((double)slots * waves * (double)largest) : 1.0;
    };
    for (size_t slots : {1u, 6u, 264u, 396u})
        for (int kind = 0; kind < 3; kind++)
            for (size_t E : {1u, 8u, 128u, 512u, 1000u}) {
                std::vector<int32_t> rows(E);
                for (size_t e = 0; e < E; e++)
                    rows[e] = kind == 0   ? 64 * (int32_t)(1u + E % 7u) // equal
                              : kind == 1 ? (int32_t)r.below(200000)
                                          : (r.below(4) == 0 ? 0 : (int32_t)r.below(3000)); // ragged, some empty
                check_plan(rows, slots, "ragged");
                if (kind == 0 && E % slots == 0) {
                    const size_t c = plan_chunk(rows.data(), E, slots);
                    CHECK(items_for_chunk(rows.data(), E, c) == E, "plan: %zu equal entries on %zu slots were split", E,
                          slots);
                }
            }
    // the goal shapes: one sequence (1M, 16M rows) and Llama-3-8B's layer (8 kv heads) at B 1, 16, 64
    double worst = 1.0;
    for (size_t slots : {264u, 396u})
        for (int s = 0; s < 11; s++) {
            const size_t E = s < 2 ? 1u : 8u * (s < 5 ? 1u : s < 8 ? 16u : 64u);
            const int32_t n = s == 0 ? (1 << 20) : s == 1 ? (1 << 24) : (4096 << (s % 3 == 2 ? 0 : s % 3 == 0 ? 3 : 5));
            const std::vector<int32_t> rows(E, n);
            const double eff = check_plan(rows, slots, "goal shape");
            if ((size_t)E * pages_of(n) < 2u * kMinItemPages * slots) continue; // not enough work to fill the device
            CHECK(eff >= 0.9, "plan: %zu entries of %d rows on %zu slots: wave efficiency %.3f", E, n, slots, eff);
            worst = std::fmin(worst, eff);
        }
    std::printf(
        "  plan   %zu shapes: pages covered once, even splits, capacity; goal shapes' wave efficiency >= %.3f\n",
        shapes, worst);
}

// The edges a device run found nowhere: a workspace sized by the plan's
// slots, not by max_pages (B = 64, 8 kv heads, 128k rows: 1M pages); a plan
// made for another cache refused by attend; a second device (SIMT_DEVICES=2
// on the CPU runtime) that needs its own shared-memory opt-in.
void edge_checks(rng &r)
{
    void *pool = nullptr;
    cudaMalloc(&pool, 1u << 20);
    kvc_cuda_paged c = {KVC_DTYPE_F16, 128, 8, 4, 0.088f, pool, 16, 0};
    const size_t E = 64u * 8u, max_pages = E * 2048u;
    const size_t wsb = kvc_cuda_batch_workspace_bytes(&c, 64, max_pages);
    const size_t by_pages = (max_pages + E) * c.group * (c.head_dim + 2u) * 4u;
    CHECK(wsb > 0 && wsb * 100u < by_pages, "workspace at B=64, n=128k: %zu B (sized by pages: %zu B)", wsb, by_pages);
    // a plan of another group, head_dim or type is refused (its state layout differs)
    std::vector<int32_t> lens(8, 100);
    const size_t hb = kvc_cuda_batch_plan_host_bytes(&c, 1, 32), wb = kvc_cuda_batch_workspace_bytes(&c, 1, 32);
    void *ws = nullptr;
    cudaMalloc(&ws, wb);
    std::vector<unsigned char> h(hb + 16u);
    unsigned char *hp = h.data() + (16u - (uintptr_t)h.data() % 16u) % 16u;
    kvc_cuda_batch_plan plan;
    CHECK(kvc_cuda_batch_plan_step(&c, 1, lens.data(), 32, 0, hp, hb, ws, wb, nullptr, &plan) == KVC_OK, "edge plan");
    tensor q(KVC_CUDA_F16, 1, 32, 128), out(KVC_CUDA_F16, 1, 32, 128);
    int32_t *z = upload(std::vector<int32_t>(64, 0));
    for (int which = 0; which < 3; which++) {
        kvc_cuda_paged o = c;
        if (which == 0) o.group = 2;
        if (which == 1) o.head_dim = 64;
        if (which == 2) o.dtype = KVC_DTYPE_I8;
        CHECK(kvc_cuda_batch_attend(&o, &plan, z, z, q.view(), out.view(), ws, nullptr) == KVC_E_ARG,
              "attend accepted a plan made for another cache (%s)",
              which == 0   ? "group"
              : which == 1 ? "head_dim"
                           : "dtype");
    }
    cudaFree(z), cudaFree(ws), cudaFree(pool);
    std::printf(
        "  edges  workspace at B=64 n=128k %zu B (%.2g of a max_pages sizing), a foreign plan refused (3 ways)\n", wsb,
        (double)wsb / (double)by_pages);
    // a second device: its own opt-in for f16 d = 128's 70 KiB of shared memory
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices >= 2) {
        CHECK(cudaSetDevice(1) == cudaSuccess, "cudaSetDevice(1)");
        const kvc_cuda_elem F16 = KVC_CUDA_F16;
        batch_case bc{"second device", KVC_DTYPE_F16, 128, 4, 1, 1, {300}, F16, F16, F16, 0};
        run_batch_case(bc, r);
        cudaSetDevice(0);
    }
}

void bad_input_checks()
{
    void *pool = nullptr;
    cudaMalloc(&pool, 4096);
    kvc_cuda_paged c = {KVC_DTYPE_F16, 128, 8, 4, 0.088f, pool, 1, 0};
    CHECK(kvc_cuda_paged_check(&c) == KVC_OK, "a valid cache refused");
    kvc_cuda_paged b = c;
    b.head_dim = 96;
    CHECK(kvc_cuda_paged_check(&b) == KVC_E_UNSUPPORTED && kvc_cuda_page_bytes(KVC_DTYPE_F16, 96) == 0, "d = 96");
    b = c, b.dtype = KVC_DTYPE_F32;
    CHECK(kvc_cuda_paged_check(&b) == KVC_E_UNSUPPORTED, "f32 rows in pages");
    b = c, b.group = KVC_CUDA_BATCH_MAX_GROUP + 1u;
    CHECK(kvc_cuda_paged_check(&b) == KVC_E_ARG, "group 17");
    b = c, b.beta = NAN;
    CHECK(kvc_cuda_paged_check(&b) == KVC_E_ARG, "beta NaN");
    b = c, b.pool = static_cast<char *>(pool) + 16;
    CHECK(kvc_cuda_paged_check(&b) == KVC_E_ARG, "a misaligned pool");
    CHECK(kvc_cuda_paged_check(nullptr) == KVC_E_ARG, "NULL cache");
    // the plan: lengths past max_pages, negative lengths, a NULL tensor
    const size_t wsb = kvc_cuda_batch_workspace_bytes(&c, 1, 1), hb = kvc_cuda_batch_plan_host_bytes(&c, 1, 1);
    // max_pages counts page reads, which shared pages make more than the pool's
    CHECK(wsb > 0 && hb > 0 && kvc_cuda_batch_workspace_bytes(&c, 1, 2) > wsb &&
              kvc_cuda_batch_workspace_bytes(&c, 1, (1u << 25) + 1u) == 0,
          "workspace sizes");
    void *ws = nullptr;
    cudaMalloc(&ws, wsb);
    std::vector<unsigned char> h(hb + 16u);
    unsigned char *hp = h.data() + (16u - (uintptr_t)h.data() % 16u) % 16u;
    kvc_cuda_batch_plan plan;
    std::vector<int32_t> lens(8, 0);
    lens[3] = 65; // two pages, one allowed
    CHECK(kvc_cuda_batch_plan_step(&c, 1, lens.data(), 1, 0, hp, hb, ws, wsb, nullptr, &plan) == KVC_E_ARG,
          "more pages than max_pages");
    lens[3] = -1;
    CHECK(kvc_cuda_batch_plan_step(&c, 1, lens.data(), 1, 0, hp, hb, ws, wsb, nullptr, &plan) == KVC_E_ARG,
          "a negative length");
    lens[3] = 3;
    CHECK(kvc_cuda_batch_plan_step(&c, 1, lens.data(), 1, 0, hp, hb, ws, wsb, nullptr, &plan) == KVC_OK,
          "a valid plan");
    kvc_cuda_tensor none = {nullptr, KVC_CUDA_F16, 0, 0};
    int32_t *z = upload(std::vector<int32_t>(9, 0));
    CHECK(kvc_cuda_batch_attend(&c, &plan, z, z, none, none, ws, nullptr) == KVC_E_ARG, "NULL tensors");
    CHECK(kvc_cuda_batch_append(&c, 1, z, none, none, nullptr) == KVC_E_ARG, "append of NULL tensors");
    CHECK(kvc_cuda_batch_set_rows(&c, 3, nullptr, nullptr, nullptr, nullptr) == KVC_E_ARG, "set_rows of NULL");
    cudaFree(z), cudaFree(ws), cudaFree(pool);
}

} // namespace

// Called by test_cuda_kernels' main. matrix: the bug matrix's one small case;
// one_type: f16 only (ThreadSanitizer). Returns the number of its failures
// (counted in test_failures() as well).
int run_batch_checks(bool matrix, bool one_type, double *worst_ratio)
{
    rng r{kSeed};
    const int failures_before = test_failures();
    std::printf("batch decode: seed %" PRIu64 "\n", kSeed);
    const kvc_cuda_elem F32 = KVC_CUDA_F32, F16 = KVC_CUDA_F16, BF16 = KVC_CUDA_BF16;
    std::vector<batch_case> cases;
    if (matrix) {
        cases.push_back({"matrix", KVC_DTYPE_F16, 64, 4, 2, 2, {250, 64, 0, 70}, F16, F16, F16, 0});
        cases.push_back({"matrix", KVC_DTYPE_I8, 64, 4, 2, 2, {250, 64, 0, 70}, F16, F16, F16, 0});
        cases.push_back({"matrix", KVC_DTYPE_I4, 64, 4, 2, 2, {250, 64, 0, 70}, F16, F16, F16, 0});
    } else {
        // every storage type x head dimension the kernels compile (kvc_cuda_page_bytes > 0), tensors rotated
        const kvc_cuda_elem el[3] = {F16, BF16, F32};
        size_t k = 0;
        for (unsigned t = 0; t < kPageTypeLimit; t++) // the core's types and the device's own (int4-row)
            for (uint32_t d = 16; d <= KVC_MAX_HEAD_DIM; d += 16) {
                if (kvc_cuda_page_bytes(t, d) == 0 || (one_type && t != KVC_DTYPE_F16)) continue;
                const uint32_t groups[3] = {4, 16, 1};
                batch_case bc{"ragged, evict, reweight",
                              t,
                              d,
                              groups[k % 3],
                              k % 3 == 2 ? 3u : 2u,
                              k % 3 == 1 ? 1u : 2u,
                              {},
                              el[k % 3],
                              el[(k + 1) % 3],
                              el[(k + 2) % 3],
                              (int)(k % 2)};
                const size_t E = (size_t)bc.n_kv_heads * bc.n_seqs;
                const int32_t pattern[6] = {200, 1, 0, 64, 65, 129};
                for (size_t e = 0; e < E; e++) bc.lens.push_back(e == 0 ? 200 : pattern[(e + k) % 6]);
                cases.push_back(bc);
                k++;
            }
        // many items per entry (a long entry split over blocks) and the maximal group
        cases.push_back({"long entry, split", KVC_DTYPE_F16, 128, 16, 1, 1, {700}, F16, F32, F16, 1});
        // an unweighted cache (attend reads no weights or roles; the pool's are garbage) in every row type
        for (unsigned t = 0; t < kPageTypeLimit; t++)
            if (kvc_cuda_page_bytes(t, 64) > 0)
                cases.push_back({"unweighted", t, 64, 4, 2, 2, {300, 0, 130, 64}, F16, F16, F32, 0, 1});
    }
    double worst = 0;
    for (const batch_case &bc : cases) worst = std::fmax(worst, run_batch_case(bc, r));
    if (!matrix) plan_checks(r), edge_checks(r), bad_input_checks();
    *worst_ratio = worst;
    std::printf("batch decode: %zu cases, worst error/tolerance %.3g; %d failures\n", cases.size(), worst,
                test_failures() - failures_before);
    return test_failures() - failures_before;
}
