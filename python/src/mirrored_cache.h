// kvcompress._core.MirroredCache: every method on the device pages, for a
// batch (python/kvcompress/device.py, MirroredCache; docs/gpu.md, "The
// mirror"). Included by bindings.cpp inside its KVC_PY_CUDA block, after the
// helpers it uses (status_error, check, stream_config, cache_lock, dev_tensor).
//
// Each sequence b of the batch has its own kvc_cache, configured exactly as
// kvcompress.Cache would be (so a sequence's decisions are the host path's at
// batch 1), and every (layer, b, kv head) stream a kvc_mirror. Per position
// of a layer: the real sequences' rows are appended on the host (the rows
// they write recorded by a journal per (b, layer)), each stream's mirror
// turns the journal and the view into edits, kvc_cuda_stage_edits gathers
// them, one put_rows and one set_rows carry them to the layer's pool, and
// one plan and attend answer every sequence's queries; a method that
// observes gets the device's attention mass back (attend_mass, view_mass,
// kvc_cache_observe). The device memory (pools, staging, workspace, page
// tables, mass) is this object's, from cudaMalloc: the GPU's or, in the SIMT
// build, host memory.
#include <cmath>
#include <cuda_runtime_api.h>

#include "kvc/kvc_mirror.h"

namespace
{

// cudaMalloc'd memory freed with the object (errors at exit are ignored:
// the context may be gone).
struct dev_buffer {
    void *p = nullptr;
    size_t bytes = 0;
    dev_buffer() = default;
    dev_buffer(const dev_buffer &) = delete;
    dev_buffer &operator=(const dev_buffer &) = delete;
    dev_buffer(dev_buffer &&o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr, o.bytes = 0; }
    ~dev_buffer()
    {
        if (p != nullptr) cudaFree(p);
    }
    void allocate(size_t n)
    {
        if (cudaMalloc(&p, n == 0 ? 16 : n) != cudaSuccess || p == nullptr)
            throw status_error{(int)KVC_E_BACKEND,
                               "MirroredCache: cudaMalloc of " + std::to_string(n) + " bytes failed"};
        bytes = n;
        if (cudaMemset(p, 0, bytes == 0 ? 16 : bytes) != cudaSuccess)
            throw status_error{(int)KVC_E_BACKEND, "MirroredCache: cudaMemset failed"};
    }
    template <class T> T *as() const { return static_cast<T *>(p); }
};

// 8-aligned host memory in words (arenas want KVC_ARENA_ALIGN: allocated apart)
using words = std::vector<uint64_t>;

class mirrored_cache
{
  public:
    mirrored_cache(uint32_t n_layers, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim, uint32_t batch,
                   const std::string &method, uint32_t budget, const std::string &dtype, uint64_t seed,
                   const std::vector<std::string> &params)
        : L_(n_layers), B_(batch)
    {
        if (batch < 1 || batch > 65535) throw status_error{(int)KVC_E_ARG, "batch: want 1 .. 65535 sequences"};
        std::memset(&cfg_, 0, sizeof cfg_);
        cfg_.n_layers = n_layers, cfg_.n_heads = n_heads, cfg_.n_kv_heads = n_kv_heads, cfg_.head_dim = head_dim;
        cfg_.policy = KVC_BUDGET_UNIFORM;
        cfg_.stream = stream_config(method, dtype, head_dim, budget, seed, params);
        if (const char *why = kvc_cache_config_problem(&cfg_)) throw status_error{(int)KVC_E_ARG, why};
        Hkv_ = n_kv_heads, G_ = n_heads / n_kv_heads, d_ = head_dim, E_ = batch * n_kv_heads;
        paged_.dtype = (unsigned)cfg_.stream.dtype, paged_.head_dim = d_, paged_.n_kv_heads = Hkv_, paged_.group = G_;
        paged_.beta = 1.0f / std::sqrt((float)d_), paged_.unweighted = 0u;
        if (kvc_cuda_page_bytes(paged_.dtype, d_) == 0)
            throw status_error{(int)KVC_E_UNSUPPORTED, "the device pages store f16, int8 or int4 rows of dimension 64 "
                                                       "or 128; got " +
                                                           dtype + " at " + std::to_string(d_)};
        if (G_ < 1 || G_ > KVC_CUDA_BATCH_MAX_GROUP)
            throw status_error{(int)KVC_E_ARG,
                               "query heads per kv head: want 1 .. " + std::to_string(KVC_CUDA_BATCH_MAX_GROUP)};
        // the host side: a cache per sequence, a journal per (sequence, layer), a mirror per stream
        arena_bytes_ = kvc_cache_arena_bytes(&cfg_);
        for (uint32_t b = 0; b < B_; b++) {
            arenas_.emplace_back(std::aligned_alloc(KVC_ARENA_ALIGN, round_up(arena_bytes_, KVC_ARENA_ALIGN)));
            if (!arenas_.back()) throw std::bad_alloc();
            kvc_cache *c = nullptr;
            check(kvc_cache_init(arenas_.back().get(), arena_bytes_, &cfg_, &c), "kvc_cache_init");
            caches_.push_back(c);
        }
        runs_.assign((size_t)B_ * L_, std::vector<kvc_row_write>(kJournalRuns));
        journals_.resize((size_t)B_ * L_);
        for (uint32_t b = 0; b < B_; b++)
            for (uint32_t l = 0; l < L_; l++)
                journals_[b * L_ + l] = kvc_row_journal{static_cast<const unsigned char *>(arenas_[b].get()),
                                                        arena_bytes_,
                                                        runs_[b * L_ + l].data(),
                                                        kJournalRuns,
                                                        0,
                                                        0};
        const kvc_stream *st0 = kvc_cache_get_stream(caches_[0], 0, 0);
        mirror_bytes_ = kvc_mirror_bytes(st0);
        if (mirror_bytes_ == 0)
            throw status_error{(int)KVC_E_UNSUPPORTED, "method '" + method + "' with " + dtype +
                                                           " rows cannot be mirrored (KIVI4's channel blocks have no "
                                                           "page type: docs/gpu.md)"};
        const size_t mw = (mirror_bytes_ + 7) / 8;
        mirror_mem_.resize((size_t)L_ * E_);
        mirrors_.resize((size_t)L_ * E_);
        for (uint32_t l = 0; l < L_; l++)
            for (uint32_t b = 0; b < B_; b++)
                for (uint32_t h = 0; h < Hkv_; h++) {
                    const size_t i = index(l, b, h);
                    mirror_mem_[i].assign(mw, 0);
                    check(kvc_mirror_init(mirror_mem_[i].data(), mw * 8, kvc_cache_get_stream(caches_[b], l, h),
                                          &mirrors_[i]),
                          "kvc_mirror_init");
                }
        slots_ = kvc_mirror_slots(mirrors_[0]);
        pages_per_entry_ = (slots_ + KVC_CUDA_PAGE_ROWS - 1) / KVC_CUDA_PAGE_ROWS;
        n_pages_ = (size_t)E_ * pages_per_entry_;
        if (n_pages_ * KVC_CUDA_PAGE_ROWS > (size_t)INT32_MAX)
            throw status_error{(int)KVC_E_ARG, "the batch's pages pass 2^31 slots: a smaller batch or budget"};
        paged_.n_pages = (uint32_t)n_pages_;
        page_bytes_ = kvc_cuda_page_bytes(paged_.dtype, d_);
        row_bytes_ = (size_t)kvc_row_bytes(paged_.dtype, d_);
        // the device side: a pool per layer, then one set of buffers every layer's step reuses
        pools_.resize(L_);
        for (auto &p : pools_) p.allocate(n_pages_ * page_bytes_);
        std::vector<int32_t> tables((size_t)E_ + 1 + n_pages_);
        for (uint32_t e = 0; e <= E_; e++) tables[e] = (int32_t)(e * pages_per_entry_);
        for (size_t p = 0; p < n_pages_; p++) tables[E_ + 1 + p] = (int32_t)p;
        page_ids_.assign(tables.begin() + E_ + 1, tables.end());
        tables_.allocate(tables.size() * sizeof(int32_t));
        copy_in(tables_.p, tables.data(), tables.size() * sizeof(int32_t), nullptr);
        const size_t row_cap = 2u * (size_t)slots_ * E_, weight_cap = (size_t)slots_ * E_;
        h_row_slots_.resize(row_cap), h_halves_.resize(row_cap), h_rows_.resize(row_cap * row_bytes_);
        h_weight_slots_.resize(weight_cap), h_weights_.resize(weight_cap), h_roles_.resize(weight_cap);
        d_row_slots_.allocate(row_cap * 4), d_halves_.allocate(row_cap), d_rows_.allocate(row_cap * row_bytes_);
        d_weight_slots_.allocate(weight_cap * 4), d_weights_.allocate(weight_cap * 4), d_roles_.allocate(weight_cap);
        edits_.resize(slots_);
        n_rows_.assign(E_, 0);
        kvc_cuda_paged c = paged_;
        c.pool = pools_[0].p;
        check(kvc_cuda_paged_check(&c), "the layer's pages");
        const size_t wb = kvc_cuda_batch_workspace_bytes(&c, B_, n_pages_);
        if (wb == 0) throw status_error{(int)KVC_E_ARG, "the batch's plan: no workspace fits it"};
        workspace_.allocate(wb);
        plan_host_.resize((kvc_cuda_batch_plan_host_bytes(&c, B_, n_pages_) + 7) / 8);
        observes_ = kvc_cache_observes(caches_[0]) != 0;
        if (observes_) {
            d_mass_.allocate(n_pages_ * KVC_CUDA_PAGE_ROWS * 4);
            h_mass_.resize(n_pages_ * KVC_CUDA_PAGE_ROWS);
        }
        kern_ = *kvc_kernels_best();
    }

    /**
     * n positions of layer `layer` for the whole batch: sequence b's position
     * i is appended to b's cache when real[b][i] is 1 (padding, 0, never
     * enters a cache), then every sequence's queries of position i are
     * answered over its rows (a padded position's output is 0).
     * k, v: host f32 [B][n][n_kv_heads][head_dim]; q, out: device tensors
     * whose position i starts at data + i * pos_stride elements.
     */
    void extend(uint32_t layer, nb::ndarray<const float, nb::ndim<4>, nb::c_contig, nb::device::cpu> k,
                nb::ndarray<const float, nb::ndim<4>, nb::c_contig, nb::device::cpu> v,
                nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> real, const dev_tensor &q,
                int64_t q_pos_stride, const dev_tensor &out, int64_t out_pos_stride, float beta, uintptr_t stream)
    {
        cache_lock held(mu_);
        const size_t n = k.shape(1);
        if (layer >= L_)
            throw status_error{(int)KVC_E_ARG, "layer " + std::to_string(layer) + " of " + std::to_string(L_)};
        for (const auto *a : {&k, &v})
            if (a->shape(0) != B_ || a->shape(1) != n || a->shape(2) != Hkv_ || a->shape(3) != d_)
                throw status_error{(int)KVC_E_ARG, "k, v: want shape (batch, n, n_kv_heads, head_dim)"};
        if (real.shape(0) != B_ || real.shape(1) != n)
            throw status_error{(int)KVC_E_ARG, "real: want shape (batch, n)"};
        if (!(std::isfinite(beta) && beta > 0)) throw status_error{(int)KVC_E_ARG, "scaling: want finite and > 0"};
        const size_t tok = (size_t)Hkv_ * d_;
        // every input a stream could refuse, before the first change (bad input leaves every cache as it was)
        for (uint32_t b = 0; b < B_; b++)
            for (size_t i = 0; i < n; i++) {
                const uint8_t r = real.data()[b * n + i];
                if (r > 1) throw status_error{(int)KVC_E_ARG, "real: want 0 (padding) or 1"};
                if (r &&
                    (!all_finite(k.data() + (b * n + i) * tok, tok) || !all_finite(v.data() + (b * n + i) * tok, tok)))
                    throw status_error{(int)KVC_E_NONFINITE, "extend: the keys or values of sequence " +
                                                                 std::to_string(b) + ", position " + std::to_string(i) +
                                                                 " hold a NaN or Inf; nothing "
                                                                 "was appended"};
            }
        kvc_cuda_paged c = paged_;
        c.pool = pools_[layer].p, c.beta = beta;
        check(kvc_cuda_paged_check(&c), "the layer's pages");
        kvc_status s = KVC_OK;
        std::string where;
        {
            nb::gil_scoped_release unlocked;
            for (size_t i = 0; i < n && s == KVC_OK; i++)
                s = position(c, layer, k.data(), v.data(), real.data(), n, i, q, q_pos_stride, out, out_pos_stride,
                             reinterpret_cast<void *>(stream), where);
        }
        check(s, ("extend: " + where).c_str());
    }

    size_t nbytes() const { return n_pages_ * page_bytes_ * L_; }
    size_t host_bytes() const
    {
        return (size_t)B_ * arena_bytes_ + mirrors_.size() * mirror_bytes_ +
               runs_.size() * kJournalRuns * sizeof(kvc_row_write);
    }
    uint32_t slots() const { return slots_; }
    uint32_t pages_per_entry() const { return pages_per_entry_; }
    bool observes() const { return observes_; }
    uint64_t checksum(uint32_t b) const
    {
        cache_lock held(mu_);
        if (b >= B_) throw status_error{(int)KVC_E_ARG, "sequence out of range"};
        return kvc_cache_checksum(caches_[b]);
    }
    std::vector<uint64_t> usage(uint32_t b) const
    {
        cache_lock held(mu_);
        if (b >= B_) throw status_error{(int)KVC_E_ARG, "sequence out of range"};
        uint64_t e = 0, pe = 0, by = 0, pb = 0;
        check(kvc_cache_get_usage(caches_[b], &e, &pe), "usage");
        check(kvc_cache_get_usage_bytes(caches_[b], &by, &pb), "usage");
        return {e, pe, by, pb};
    }

  private:
    static constexpr uint32_t kJournalRuns = 4096; // past it the journal drops and the mirror re-sends everything
    static bool all_finite(const float *x, size_t n)
    {
        for (size_t i = 0; i < n; i++)
            if (!std::isfinite(x[i])) return false;
        return true;
    }
    static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
    size_t index(uint32_t l, uint32_t b, uint32_t h) const { return ((size_t)l * B_ + b) * Hkv_ + h; }

    static kvc_status copy_in(void *dst, const void *src, size_t bytes, void *stream)
    {
        if (bytes == 0) return KVC_OK;
        return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)) ==
                       cudaSuccess
                   ? KVC_OK
                   : KVC_E_BACKEND;
    }

    // one position of one layer for the whole batch (no GIL; the lock held)
    kvc_status position(const kvc_cuda_paged &c, uint32_t layer, const float *k, const float *v, const uint8_t *real,
                        size_t n, size_t i, const dev_tensor &q, int64_t q_pos_stride, const dev_tensor &out,
                        int64_t out_pos_stride, void *stream, std::string &where)
    {
        const size_t tok = (size_t)Hkv_ * d_;
        kvc_cuda_staging sg{(uint32_t)h_halves_.size(), 0, h_row_slots_.data(),    h_halves_.data(),  h_rows_.data(),
                            (uint32_t)h_roles_.size(),  0, h_weight_slots_.data(), h_weights_.data(), h_roles_.data()};
        kvc_status s = KVC_OK;
        for (uint32_t b = 0; b < B_; b++) {
            const bool is_real = real[b * n + i] != 0;
            if (!is_real) {
                for (uint32_t h = 0; h < Hkv_; h++) n_rows_[b * Hkv_ + h] = 0;
                continue;
            }
            kvc_row_journal &j = journals_[b * L_ + layer];
            kern_.journal = &j;
            s = kvc_cache_append(caches_[b], &kern_, layer, k + (b * n + i) * tok, v + (b * n + i) * tok);
            if (s != KVC_OK) return where = "sequence " + std::to_string(b) + ", position " + std::to_string(i), s;
            for (uint32_t h = 0; h < Hkv_; h++) {
                const uint32_t e = b * Hkv_ + h;
                const kvc_stream *st = kvc_cache_get_stream(caches_[b], layer, h);
                size_t n_edits = 0;
                uint32_t rows = 0;
                s = kvc_mirror_step(mirrors_[index(layer, b, h)], st, &j, edits_.data(), edits_.size(), &n_edits,
                                    &rows);
                if (s != KVC_OK) return where = "the mirror of sequence " + std::to_string(b), s;
                // entry e's pages are e * pages_per_entry_ onwards: its slice of the page table
                const int32_t *pages = page_ids_.data() + (size_t)e * pages_per_entry_;
                s = kvc_cuda_stage_edits(&sg, &c, st, edits_.data(), n_edits, pages, pages_per_entry_);
                if (s != KVC_OK) return where = "staging the edits of sequence " + std::to_string(b), s;
                n_rows_[e] = (int32_t)rows;
            }
            j.count = 0, j.dropped = 0;
        }
        // the edits to the device: one put_rows, one set_rows
        where = "position " + std::to_string(i) + ": the edits";
        if ((s = copy_in(d_row_slots_.p, h_row_slots_.data(), sg.n_rows * 4u, stream)) != KVC_OK ||
            (s = copy_in(d_halves_.p, h_halves_.data(), sg.n_rows, stream)) != KVC_OK ||
            (s = copy_in(d_rows_.p, h_rows_.data(), sg.n_rows * row_bytes_, stream)) != KVC_OK ||
            (s = copy_in(d_weight_slots_.p, h_weight_slots_.data(), sg.n_weights * 4u, stream)) != KVC_OK ||
            (s = copy_in(d_weights_.p, h_weights_.data(), sg.n_weights * 4u, stream)) != KVC_OK ||
            (s = copy_in(d_roles_.p, h_roles_.data(), sg.n_weights, stream)) != KVC_OK)
            return s;
        if ((s = kvc_cuda_batch_put_rows(&c, sg.n_rows, d_row_slots_.as<int32_t>(), d_halves_.as<uint8_t>(), d_rows_.p,
                                         stream)) != KVC_OK ||
            (s = kvc_cuda_batch_set_rows(&c, sg.n_weights, d_weight_slots_.as<int32_t>(), d_weights_.as<float>(),
                                         d_roles_.as<uint8_t>(), stream)) != KVC_OK)
            return s;
        // the plan and the attend over every entry's rows (a padded entry: none, out 0)
        where = "position " + std::to_string(i) + ": the attend";
        kvc_cuda_batch_plan plan{};
        s = kvc_cuda_batch_plan_step(&c, B_, n_rows_.data(), n_pages_, 0, plan_host_.data(), plan_host_.size() * 8,
                                     workspace_.p, workspace_.bytes, stream, &plan);
        if (s != KVC_OK) return s;
        const size_t qe = q.elem == KVC_CUDA_F32 ? 4 : 2, oe = out.elem == KVC_CUDA_F32 ? 4 : 2;
        dev_tensor qi = q, oi = out;
        qi.data += (uintptr_t)((int64_t)i * q_pos_stride * (int64_t)qe);
        oi.data += (uintptr_t)((int64_t)i * out_pos_stride * (int64_t)oe);
        const int32_t *indptr = tables_.as<int32_t>(), *ids = indptr + E_ + 1;
        if (!observes_)
            return kvc_cuda_batch_attend(&c, &plan, indptr, ids, qi.view(), oi.view(), workspace_.p, stream);
        s = kvc_cuda_batch_attend_mass(&c, &plan, indptr, ids, qi.view(), oi.view(), workspace_.p, d_mass_.as<float>(),
                                       stream);
        if (s != KVC_OK) return s;
        // the mass back to the host, mapped to each stream's view and observed
        if (cudaMemcpyAsync(h_mass_.data(), d_mass_.p, h_mass_.size() * 4, cudaMemcpyDeviceToHost,
                            static_cast<cudaStream_t>(stream)) != cudaSuccess ||
            cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) != cudaSuccess)
            return KVC_E_BACKEND;
        where = "position " + std::to_string(i) + ": observing the mass";
        for (uint32_t b = 0; b < B_; b++) {
            if (!real[b * n + i]) continue;
            kern_.journal = &journals_[b * L_ + layer]; // an observation may write rows: the next step sends them
            for (uint32_t h = 0; h < Hkv_; h++) {
                const uint32_t e = b * Hkv_ + h;
                const kvc_stream *st = kvc_cache_get_stream(caches_[b], layer, h);
                view_mass_.resize(kvc_stream_view_entries(st));
                s = kvc_mirror_view_mass(mirrors_[index(layer, b, h)], st,
                                         h_mass_.data() + (size_t)e * pages_per_entry_ * KVC_CUDA_PAGE_ROWS,
                                         view_mass_.data(), view_mass_.size());
                if (s == KVC_OK)
                    s = kvc_cache_observe(caches_[b], &kern_, layer, h, view_mass_.data(), view_mass_.size());
                if (s != KVC_OK) return s;
            }
        }
        return KVC_OK;
    }

    struct freer {
        void operator()(void *p) const { std::free(p); }
    };
    uint32_t L_, B_, Hkv_ = 0, G_ = 0, d_ = 0, E_ = 0;
    kvc_cache_config cfg_;
    size_t arena_bytes_ = 0, mirror_bytes_ = 0, n_pages_ = 0, page_bytes_ = 0, row_bytes_ = 0;
    uint32_t slots_ = 0, pages_per_entry_ = 0;
    bool observes_ = false;
    std::vector<std::unique_ptr<void, freer>> arenas_;
    std::vector<kvc_cache *> caches_;
    std::vector<std::vector<kvc_row_write>> runs_;
    std::vector<kvc_row_journal> journals_;
    std::vector<words> mirror_mem_;
    std::vector<kvc_mirror *> mirrors_;
    kvc_kernels kern_{};
    kvc_cuda_paged paged_{};
    std::vector<dev_buffer> pools_;
    dev_buffer tables_, workspace_, d_row_slots_, d_halves_, d_rows_, d_weight_slots_, d_weights_, d_roles_, d_mass_;
    std::vector<int32_t> h_row_slots_, h_weight_slots_, n_rows_;
    std::vector<int32_t> page_ids_; // the host copy of the page table's ids (entry e: e * pages_per_entry_ ...)
    std::vector<uint8_t> h_halves_, h_roles_;
    std::vector<unsigned char> h_rows_;
    std::vector<float> h_weights_, h_mass_;
    std::vector<double> view_mass_;
    std::vector<kvc_mirror_edit> edits_; // one stream's edits of a step (kvc_mirror_slots)
    words plan_host_;
    mutable std::mutex mu_; // cache_lock: one call at a time (extend runs without the GIL)
};

} // namespace
