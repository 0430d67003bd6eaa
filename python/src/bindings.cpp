// The Python module kvcompress._core (nanobind): the stable C API of the core
// over numpy arrays and torch CPU tensors, without copies where the layout
// allows (float32, C-contiguous: anything else is converted once by the
// Python layer). A kvc_status other than KVC_OK becomes kvcompress.KvcError
// carrying the code and kvc_status_str's message. Python-level behaviour
// (budget spellings, defaults, docstrings) is in python/kvcompress/__init__.py.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <thread>
#include <chrono>
#include <cmath>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#define KVC_ADVANCED // the device path and the vLLM plugin's rows use the advanced tier (kvc_kernels.h, kvc_cuda_batch.h)
#include "kvc/kvc.h"
#ifdef KVC_PY_CUDA
#include "kvc/kvc_cuda_batch.h"
#include "kernels/batch_layout.cuh"
#endif

namespace nb = nanobind;

namespace
{

PyObject *g_error_class = nullptr; // kvcompress.KvcError

// Raised as kvcompress.KvcError(code, message).
struct status_error {
    int code;
    std::string message;
};

void check(kvc_status s, const char *what)
{
    if (s != KVC_OK) throw status_error{(int)s, std::string(what) + ": " + kvc_status_str(s)};
}

// a storage type by its command-line name, or a status_error naming it
kvc_dtype parse_dtype(const std::string &dtype)
{
    kvc_dtype t;
    check(kvc_dtype_parse(dtype.c_str(), &t), ("storage type '" + dtype + "'").c_str());
    return t;
}

// Protected spans take pct percent of the budget (none for exact, which
// keeps every token anyway), as the command line's --protect does.
void apply_protect(kvc_stream_config &c, double pct)
{
    c.n_protect = pct > 0 && c.method != KVC_METHOD_EXACT ? (uint32_t)((double)c.budget * pct / 100.0) : 0u;
}

// A stream configuration from the command line's names (method, storage
// type, parameter name/value pairs), every refusal a status_error. Beside the
// method's own parameters (the registry's), the command line's settings of
// every stream: "sink" and "window" (first and last tokens kept exactly,
// default 32 each), "protect" (percent of the budget, 0..50, for protected
// spans: tokens near a key outlier kept exact; ignored by exact, as on the
// command line), "protect-radius" (1..4096) and "prefix-len" (the prompt
// length the prefill methods compress).
kvc_stream_config stream_config(const std::string &method, const std::string &dtype, uint32_t head_dim, uint32_t budget,
                                uint64_t seed, const std::vector<std::string> &params, double *protect_pct = nullptr)
{
    kvc_method m;
    check(kvc_method_parse(method.c_str(), &m), ("method '" + method + "'").c_str());
    const kvc_dtype t = parse_dtype(dtype);
    kvc_stream_config c = kvc_stream_config_default(m, head_dim, head_dim, budget, seed);
    c.dtype = t;
    double pct = 0;
    for (size_t i = 0; i + 1 < params.size(); i += 2) {
        const std::string &name = params[i], &text = params[i + 1];
        const std::string what = "parameter '" + name + "' = '" + text + "'";
        char *end = nullptr;
        if (name == "protect" || name == "protect-radius" || name == "prefix-len" || name == "sink" ||
            name == "window") {
            const double x = std::strtod(text.c_str(), &end);
            const bool whole = x >= 0 && x <= (double)KVC_MAX_BUDGET * 16 && x == (double)(uint32_t)x;
            const bool sized = name == "sink" || name == "window";
            const double lo = sized || name == "protect" ? 0 : 1;
            const double hi = name == "protect"          ? 50
                              : name == "protect-radius" ? 4096
                              : sized                    ? KVC_MAX_BUDGET
                                                         : 1u << 28;
            if (end == text.c_str() || *end != 0 || !(x >= lo && x <= hi) || (name != "protect" && !whole))
                throw status_error{(int)KVC_E_ARG, what + ": want sink and window 0..2^24 tokens, protect 0..50 "
                                                          "(percent of the budget), protect-radius 1..4096, "
                                                          "prefix-len 1..2^28"};
            if (name == "protect")
                pct = x;
            else if (name == "protect-radius")
                c.protect_radius = (uint32_t)x;
            else if (name == "prefix-len")
                c.prefix_len = (uint32_t)x;
            else if (name == "sink")
                c.n_sink = (uint32_t)x;
            else
                c.n_window = (uint32_t)x;
            continue;
        }
        check(kvc_stream_config_set(&c, name.c_str(), text.c_str()), what.c_str());
    }
    if (protect_pct != nullptr) *protect_pct = pct;
    apply_protect(c, pct);
    return c;
}

using f32_matrix = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using f32_out = nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using f32_rows3 = nb::ndarray<const float, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using f32_out3 = nb::ndarray<float, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using u8_rows2 = nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// The object's lock, taken with the GIL released: a thread never waits for
// it while holding the GIL, so a thread inside the core with the GIL released
// (extend) and a thread waiting here cannot deadlock. Every method of a cache
// holds it for its whole call: a second thread's call on the same Cache waits
// (docs/threads.md), it never sees or frees an arena being written.
class cache_lock
{
  public:
    explicit cache_lock(std::mutex &m) : lk_(m, std::defer_lock)
    {
        if (lk_.try_lock()) return;
        nb::gil_scoped_release unlocked;
        lk_.lock();
    }

  private:
    std::unique_lock<std::mutex> lk_;
};

// A cache and the arena it lives in (caller memory for the core: this object owns it).
class cache
{
  public:
    cache(uint32_t n_layers, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim, const std::string &method,
          uint32_t budget, const std::string &dtype, uint64_t seed, const std::vector<std::string> &params)
    {
        std::memset(&cfg_, 0, sizeof cfg_);
        cfg_.n_layers = n_layers, cfg_.n_heads = n_heads, cfg_.n_kv_heads = n_kv_heads, cfg_.head_dim = head_dim;
        cfg_.policy = KVC_BUDGET_UNIFORM;
        cfg_.stream = stream_config(method, dtype, head_dim, budget, seed, params);
        if (const char *why = kvc_cache_config_problem(&cfg_)) throw status_error{(int)KVC_E_ARG, why};
        bytes_ = kvc_cache_arena_bytes(&cfg_);
        allocate(bytes_);
        check(kvc_cache_init(arena_.get(), bytes_, &cfg_, &c_), "kvc_cache_init");
        keep_shape();
    }

    // A snapshot's bytes, validated before use (kvc_cache_validate).
    explicit cache(nb::bytes snapshot)
    {
        bytes_ = snapshot.size();
        allocate(bytes_);
        std::memcpy(arena_.get(), snapshot.c_str(), bytes_);
        check(kvc_cache_validate(arena_.get(), bytes_), "snapshot");
        c_ = static_cast<kvc_cache *>(arena_.get()); // the cache state is at the start of its arena
        keep_shape();
    }

    void append(uint32_t layer, f32_matrix k, f32_matrix v)
    {
        cache_lock held(mu_);
        need(k, cfg_kv_heads(), "k"), need(v, cfg_kv_heads(), "v");
        check(kvc_cache_append(c_, nullptr, layer, k.data(), v.data()), "append");
        check(apply_pending_centres(layer), "append: the previous extend's last centre");
    }

    // One position's attention. A method that scores the attention its rows
    // receive (kvc_cache_observes: H2O, TOVA) is given it (the observed
    // attend), as the C decoders do; the others take the plain attend.
    void attend(uint32_t layer, f32_matrix q, f32_out out)
    {
        cache_lock held(mu_);
        need(q, heads(), "q");
        if (out.shape(0) != heads() || out.shape(1) != head_dim())
            throw status_error{(int)KVC_E_ARG, "out: wrong shape"};
        attend_rows(layer, q.data(), out.data());
    }

    // n tokens of one layer in order (k, v: n x n_kv_heads x head_dim); with
    // q (n x n_heads x head_dim) each token's queries attend right after the
    // token is appended, into out: a prompt read through the cache, causal by
    // construction. One call for the prompt instead of 2n from Python; the
    // GIL is released. On a failure at token t, tokens before t stay appended
    // (the error says which t).
    //
    // With centres (n x n_kv_heads bytes, 0 or 1: kvc_cache_mark's verdict for
    // each token and head, a caller's own selector in place of the key-outlier
    // test) the tokens go in one by one, token t - 1 marked right after token
    // t is appended (a mark needs its token followed by one more append); the
    // last token's mark waits for the layer's next append.
    void extend(uint32_t layer, f32_rows3 k, f32_rows3 v, std::optional<f32_rows3> q, std::optional<f32_out3> out,
                std::optional<u8_rows2> centres)
    {
        cache_lock held(mu_);
        const size_t n = k.shape(0);
        need3(k, n, cfg_kv_heads(), "k"), need3(v, n, cfg_kv_heads(), "v");
        if (q.has_value() != out.has_value()) throw status_error{(int)KVC_E_ARG, "extend: give q and out together"};
        if (q) need3(*q, n, heads(), "q"), need3(*out, n, heads(), "out");
        const size_t kv_row = (size_t)cfg_kv_heads() * head_dim(), q_row = (size_t)heads() * head_dim();
        const uint8_t *mark = nullptr;
        if (centres) {
            if (centres->shape(0) != n || centres->shape(1) != cfg_kv_heads())
                throw status_error{(int)KVC_E_ARG, "extend: centres must be n x n_kv_heads"};
            for (size_t i = 0; i < n * cfg_kv_heads(); i++)
                if (centres->data()[i] > 1) throw status_error{(int)KVC_E_ARG, "extend: a centre is 0 or 1"};
            const kvc_stream_plan *plan = kvc_stream_get_plan(kvc_cache_get_stream(c_, 0, 0));
            if (plan == nullptr || plan->n_protect == 0 || plan->n_window == 0)
                throw status_error{(int)KVC_E_UNSUPPORTED,
                                   "extend: centres need protected spans and a window (protect > 0)"};
            if (layer >= layers()) throw status_error{(int)KVC_E_ARG, "extend: layer out of range"};
            mark = centres->data();
        }
        if (layer < layers() && !q && !mark &&
            pending_token_[layer] ==
                no_pending) { // the prompt alone: one kvc_cache_prefill (balancekv-prefill offline compresses it there)
            std::vector<double> work((kvc_cache_prefill_work_bytes(c_, n) + 7) / 8);
            kvc_status s;
            {
                nb::gil_scoped_release unlocked;
                s = kvc_cache_prefill(c_, nullptr, layer, k.data(), v.data(), n, work.data(),
                                      work.size() * sizeof(double));
            }
            check(s, "extend");
            return;
        }
        nb::gil_scoped_release unlocked;
        const uint64_t first = mark ? tokens_seen(layer) : 0;
        for (size_t t = 0; t < n; t++) {
            kvc_status s = kvc_cache_append(c_, nullptr, layer, k.data() + t * kv_row, v.data() + t * kv_row);
            if (s == KVC_OK) s = apply_pending_centres(layer);
            if (s == KVC_OK && mark) { // token t pending: its mark after the next append
                pending_token_[layer] = first + t;
                pending_centre_[layer].assign(mark + t * cfg_kv_heads(), mark + (t + 1) * cfg_kv_heads());
            }
            if (s == KVC_OK && q) s = attend_status(layer, q->data() + t * q_row, out->data() + t * q_row);
            if (s != KVC_OK) {
                nb::gil_scoped_acquire locked;
                check(s, ("extend: token " + std::to_string(t)).c_str());
            }
        }
    }

    // The prompt's last queries (n x n_heads x head_dim) for the query-aware
    // methods (SnapKV), given before the prompt is appended.
    void prefill_queries(uint32_t layer, f32_rows3 q)
    {
        cache_lock held(mu_);
        need3(q, q.shape(0), heads(), "q");
        check(kvc_cache_prefill_queries(c_, nullptr, layer, q.data(), q.shape(0)), "prefill_queries");
    }

    // Token `token` of (layer, kv_head) is a protected-span centre or not
    // (kvc_cache_mark): a caller's own importance score picks what to keep.
    void mark(uint32_t layer, uint32_t kv_head, uint64_t token, bool centre)
    {
        cache_lock held(mu_);
        check(kvc_cache_mark(c_, layer, kv_head, token, centre ? 1 : 0), "mark");
    }

    // Puts a snapshot of this cache's own size back (validated first: on a
    // bad snapshot nothing changes).
    void restore(nb::bytes snapshot)
    {
        cache_lock held(mu_);
        if (snapshot.size() != bytes_)
            throw status_error{(int)KVC_E_ARG, "restore: the snapshot is not this cache's size"};
        std::unique_ptr<void, freer> fresh(aligned(bytes_));
        std::memcpy(fresh.get(), snapshot.c_str(), bytes_);
        check(kvc_cache_validate(fresh.get(), bytes_), "restore");
        const kvc_cache_config *g = kvc_cache_get_config(static_cast<const kvc_cache *>(fresh.get()));
        if (g == nullptr || g->n_layers != shape_[0] || g->n_heads != shape_[1] || g->n_kv_heads != shape_[2] ||
            g->head_dim != shape_[3])
            throw status_error{(int)KVC_E_ARG, "restore: the snapshot is of a cache of another shape"};
        arena_.swap(fresh);
        c_ = static_cast<kvc_cache *>(arena_.get());
        std::fill(pending_token_.begin(), pending_token_.end(), no_pending); // marks of the state left behind
    }

    // The plan every stream of this cache follows (uniform policy): the exact
    // regions and the protected spans' budget, as a caller choosing centres
    // (kvc_spans_choose) needs them.
    nb::dict plan() const
    {
        cache_lock held(mu_);
        const kvc_stream_plan *p = kvc_stream_get_plan(kvc_cache_get_stream(c_, 0, 0));
        if (p == nullptr) throw status_error{(int)KVC_E_CORRUPT, "plan"};
        nb::dict d;
        d["n_sink"] = p->n_sink, d["n_window"] = p->n_window, d["n_protect"] = p->n_protect;
        d["protect_radius"] = p->protect_radius, d["method_tokens"] = p->method_tokens;
        return d;
    }

    bool observes() const
    {
        cache_lock held(mu_);
        return kvc_cache_observes(c_) != 0;
    }

    // bench/python_overhead.py's peer: `iters` attends timed inside C on this
    // very cache and buffers (no Python between them); nanoseconds per call.
    double c_attend_ns(uint32_t layer, f32_matrix q, f32_out out, uint32_t iters)
    {
        cache_lock held(mu_);
        need(q, heads(), "q");
        if (out.shape(0) != heads() || out.shape(1) != head_dim() || iters < 1)
            throw status_error{(int)KVC_E_ARG, "c_attend_ns: wrong out shape or iters < 1"};
        const auto t0 = std::chrono::steady_clock::now();
        for (uint32_t i = 0; i < iters; i++) attend_rows(layer, q.data(), out.data());
        const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
        return dt.count() / iters;
    }

    nb::bytes snapshot() const
    {
        cache_lock held(mu_);
        return nb::bytes(static_cast<const char *>(arena_.get()), bytes_);
    }
    size_t arena_bytes() const { return bytes_; }
    std::vector<uint64_t> usage() const
    {
        cache_lock held(mu_);
        uint64_t e = 0, pe = 0, b = 0, pb = 0;
        check(kvc_cache_get_usage(c_, &e, &pe), "usage");
        check(kvc_cache_get_usage_bytes(c_, &b, &pb), "usage");
        return {e, pe, b, pb};
    }
    uint64_t checksum() const
    {
        cache_lock held(mu_);
        return kvc_cache_checksum(c_);
    }
    // the shape, fixed at construction (restore takes snapshots of this size
    // only, and refuses one of another shape): read without the lock
    uint32_t heads() const { return shape_[1]; }
    uint32_t cfg_kv_heads() const { return shape_[2]; }
    uint32_t head_dim() const { return shape_[3]; }
    uint32_t layers() const { return shape_[0]; }
    // what a snapshot says of itself (Cache.from_bytes)
    std::string method_name() const
    {
        cache_lock held(mu_);
        return kvc_method_name(kvc_cache_get_config(c_)->stream.method);
    }
    std::string dtype_name() const
    {
        cache_lock held(mu_);
        return kvc_dtype_name(kvc_cache_get_config(c_)->stream.dtype);
    }
    uint32_t budget() const
    {
        cache_lock held(mu_);
        return kvc_cache_get_config(c_)->stream.budget;
    }

  private:
    struct freer {
        void operator()(void *p) const { std::free(p); }
    };
    static void *aligned(size_t bytes)
    {
        void *p =
            std::aligned_alloc(KVC_ARENA_ALIGN, (bytes + KVC_ARENA_ALIGN - 1) / KVC_ARENA_ALIGN * KVC_ARENA_ALIGN);
        if (p == nullptr) throw std::bad_alloc();
        return p;
    }
    void allocate(size_t bytes) { arena_.reset(aligned(bytes)); }
    kvc_status attend_status(uint32_t layer, const float *q, float *out)
    {
        if (!kvc_cache_observes(c_)) return kvc_cache_attend(c_, nullptr, layer, q, out);
        const size_t wb = kvc_cache_attend_observed_work_bytes(c_, layer);
        if (wb == 0) return KVC_E_ARG; // a layer out of range (the cache is validated)
        if (work_.size() < (wb + 7) / 8) work_.resize((wb + 7) / 8);
        return kvc_cache_attend_observed(c_, nullptr, layer, q, out, work_.data(), work_.size() * 8);
    }
    void attend_rows(uint32_t layer, const float *q, float *out) { check(attend_status(layer, q, out), "attend"); }
    // an (n, rows, head_dim) array's shape, or a status_error naming it
    template <class A> void need3(const A &a, size_t n, uint32_t rows, const char *name) const
    {
        if (a.shape(0) != n || a.shape(1) != rows || a.shape(2) != head_dim())
            throw status_error{(int)KVC_E_ARG, std::string(name) + ": want shape (" + std::to_string(n) + ", " +
                                                   std::to_string(rows) + ", " + std::to_string(head_dim()) + ")"};
    }
    void need(const f32_matrix &a, uint32_t rows, const char *name) const
    {
        if (a.shape(0) != rows || a.shape(1) != head_dim())
            throw status_error{(int)KVC_E_ARG, std::string(name) + ": want shape (" + std::to_string(rows) + ", " +
                                                   std::to_string(head_dim()) + ")"};
    }
    kvc_cache_config cfg_;
    std::unique_ptr<void, freer> arena_;
    size_t bytes_ = 0;
    kvc_cache *c_ = nullptr;
    // extend(centres=...): the last token's marks, given after the layer's next append
    static constexpr uint64_t no_pending = UINT64_MAX;
    std::vector<uint64_t> pending_token_;
    std::vector<std::vector<uint8_t>> pending_centre_;

    uint64_t tokens_seen(uint32_t layer) const
    {
        kvc_stream_stats st{};
        return kvc_stream_get_stats(kvc_cache_get_stream(c_, layer, 0), &st) == KVC_OK ? st.tokens_seen : 0;
    }
    // Called with the lock held, after an append of the layer succeeded.
    kvc_status apply_pending_centres(uint32_t layer)
    {
        if (layer >= pending_token_.size() || pending_token_[layer] == no_pending) return KVC_OK;
        const uint64_t token = pending_token_[layer];
        pending_token_[layer] = no_pending;
        for (uint32_t h = 0; h < cfg_kv_heads(); h++) {
            const kvc_status s = kvc_cache_mark(c_, layer, h, token, pending_centre_[layer][h]);
            if (s != KVC_OK) return s;
        }
        return KVC_OK;
    }
    std::vector<uint64_t> work_; // the observed attend's workspace (8-aligned), grown as the views grow
    mutable std::mutex mu_;      // cache_lock: one call at a time on this object
    uint32_t shape_[4] = {0, 0, 0, 0};
    void keep_shape()
    {
        const kvc_cache_config *g = kvc_cache_get_config(c_);
        shape_[0] = g->n_layers, shape_[1] = g->n_heads, shape_[2] = g->n_kv_heads, shape_[3] = g->head_dim;
        pending_token_.assign(g->n_layers, no_pending);
        pending_centre_.assign(g->n_layers, std::vector<uint8_t>(g->n_kv_heads, 0));
    }
};

#ifdef KVC_PY_CUDA
// The device path (python/kvcompress/device.py): one layer's paged pool of
// kvc_cuda_batch.h. Tensors and buffers arrive as addresses (torch's
// data_ptr) with element type and strides; device.py owns the memory, checks
// devices, shapes and sizes, and keeps everything alive across the calls.
// On the SIMT runtime "device" memory is host memory.
struct dev_tensor {
    uintptr_t data;
    int elem; // kvc_cuda_elem
    int64_t seq_stride, head_stride;
    kvc_cuda_tensor view() const
    {
        return kvc_cuda_tensor{reinterpret_cast<void *>(data), (kvc_cuda_elem)elem, seq_stride, head_stride};
    }
};

template <class T> T *addr(uintptr_t p) { return reinterpret_cast<T *>(p); }

struct paged_layer {
    paged_layer(const std::string &dtype, uint32_t head_dim, uint32_t n_kv_heads, uint32_t group, float beta,
                uintptr_t pool, uint32_t n_pages)
    {
        c_.dtype = (unsigned)parse_dtype(dtype), c_.head_dim = head_dim, c_.n_kv_heads = n_kv_heads, c_.group = group;
        c_.beta = beta, c_.pool = addr<void>(pool), c_.n_pages = n_pages;
        // the device path keeps exact and sink-window only (kvcompress.device), whose rows all have weight 1
        // and role both, and binds no set_rows: attend need not read the pages' weights and roles
        c_.unweighted = 1u;
        check(kvc_cuda_paged_check(&c_), "paged layer");
    }
    void set_pool(uintptr_t pool, uint32_t n_pages)
    {
        cache_lock held(mu_);
        kvc_cuda_paged c = c_;
        c.pool = addr<void>(pool), c.n_pages = n_pages;
        check(kvc_cuda_paged_check(&c), "paged layer's pool");
        c_ = c;
    }
    void set_beta(float beta)
    {
        cache_lock held(mu_);
        kvc_cuda_paged c = c_;
        c.beta = beta;
        check(kvc_cuda_paged_check(&c), "paged layer's score scale");
        c_ = c;
    }
    void append(size_t n_seqs, uintptr_t slots, const dev_tensor &k, const dev_tensor &v, uintptr_t stream)
    {
        cache_lock held(mu_);
        kvc_status s;
        {
            nb::gil_scoped_release unlocked;
            s = kvc_cuda_batch_append(&c_, n_seqs, addr<const int32_t>(slots), k.view(), v.view(), addr<void>(stream));
        }
        check(s, "kvc_cuda_batch_append");
    }
    size_t workspace_bytes(size_t n_seqs, size_t max_pages) const
    {
        cache_lock held(mu_);
        return kvc_cuda_batch_workspace_bytes(&c_, n_seqs, max_pages);
    }
    size_t plan_host_bytes(size_t n_seqs, size_t max_pages) const
    {
        cache_lock held(mu_);
        return kvc_cuda_batch_plan_host_bytes(&c_, n_seqs, max_pages);
    }
    // plans the step and attends it: the plan is this step's alone, so the
    // two calls are one here
    void attend(size_t n_seqs, nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> n_rows,
                size_t max_pages, uintptr_t host_buf, size_t host_bytes, uintptr_t workspace, size_t workspace_bytes,
                uintptr_t page_indptr, uintptr_t page_ids, const dev_tensor &q, const dev_tensor &out, uintptr_t stream)
    {
        cache_lock held(mu_);
        if (n_rows.shape(0) != n_seqs * c_.n_kv_heads)
            throw status_error{(int)KVC_E_ARG, "n_rows: want one count per (sequence, kv head)"};
        kvc_status s;
        {
            nb::gil_scoped_release unlocked;
            kvc_cuda_batch_plan plan{};
            s = kvc_cuda_batch_plan_step(&c_, n_seqs, n_rows.data(), max_pages, 0, addr<void>(host_buf), host_bytes,
                                         addr<void>(workspace), workspace_bytes, addr<void>(stream), &plan);
            if (s == KVC_OK)
                s = kvc_cuda_batch_attend(&c_, &plan, addr<const int32_t>(page_indptr), addr<const int32_t>(page_ids),
                                          q.view(), out.view(), addr<void>(workspace), addr<void>(stream));
        }
        check(s, "kvc_cuda_batch_attend");
    }
    kvc_cuda_paged c_{};
    // cache_lock: append and attend run without the GIL; set_pool / set_beta
    // from another thread must not change c_ under them. The pool, pages and
    // buffers themselves are device.py's, kept alive by it across the calls.
    mutable std::mutex mu_;
};

// The stored rows of the given slots, dequantised by the reference row
// kernels, from a host copy of a pool: (keys, values), each (n, head_dim).
nb::tuple paged_rows(const std::string &dtype, uint32_t head_dim, uintptr_t pool, size_t pool_bytes,
                     const std::vector<int64_t> &slots)
{
    const kvc_dtype t = parse_dtype(dtype);
    const size_t pb = kvc_cuda_page_bytes((unsigned)t, head_dim);
    if (pb == 0) throw status_error{(int)KVC_E_UNSUPPORTED, "paged_rows: a type or dimension the pages refuse"};
    const kvc_row_kernels &rk = kvc_kernels_ref()->rows[t];
    const size_t rb = (size_t)kvc_row_bytes((unsigned)t, head_dim);
    const size_t n = slots.size();
    std::vector<unsigned char> row(rb);
    float *kd = new float[n * head_dim], *vd = new float[n * head_dim];
    nb::capsule kown(kd, [](void *p) noexcept { delete[] static_cast<float *>(p); });
    nb::capsule vown(vd, [](void *p) noexcept { delete[] static_cast<float *>(p); });
    const unsigned char *base = addr<const unsigned char>(pool);
    for (size_t i = 0; i < n; i++) {
        const int64_t sl = slots[i];
        if (sl < 0 || (size_t)(sl / 64 + 1) * pb > pool_bytes)
            throw status_error{(int)KVC_E_ARG, "paged_rows: slot " + std::to_string(sl) + " is outside the pool"};
        const unsigned char *page = base + (size_t)(sl / 64) * pb;
        // the page's row in the core's layout (int8 pages keep scales apart and values transposed)
        kvc_cuda::page_row_to_core((int)t, head_dim, page, (uint32_t)(sl % 64), false, row.data());
        rk.load(row.data(), kd + i * head_dim, head_dim);
        kvc_cuda::page_row_to_core((int)t, head_dim, page, (uint32_t)(sl % 64), true, row.data());
        rk.load(row.data(), vd + i * head_dim, head_dim);
    }
    using f32_out = nb::ndarray<nb::numpy, float, nb::ndim<2>>;
    return nb::make_tuple(f32_out(kd, {n, (size_t)head_dim}, kown), f32_out(vd, {n, (size_t)head_dim}, vown));
}
} // namespace
#include "mirrored_cache.h"
namespace
{
#endif

// Helper threads for attend_blocks, started on first use and parked between
// calls: a decode step calls it once per layer, so a thread started per call
// would cost about what it saves. run() shares items [0, n) out through an
// atomic counter among the caller and `helpers` of them, and returns once
// every item is done. One run at a time (calls from several Python threads
// take turns). The threads are detached and the pool never destroyed (an
// exiting process must not join parked threads); a forked child, which has
// none of them, starts a pool of its own.
class helper_pool
{
  public:
    static helper_pool &get()
    {
        static std::mutex made_mu;
        static helper_pool *pool = nullptr;
        std::lock_guard<std::mutex> lock(made_mu);
        if (pool == nullptr || pool->pid_ != getpid()) pool = new helper_pool(); // the old one: a parent's, left
        return *pool;
    }

    void run(size_t helpers, size_t n, const std::function<void(size_t)> &item)
    {
        std::lock_guard<std::mutex> one_run(run_mu_);
        std::unique_lock<std::mutex> lock(mu_);
        while (started_ < helpers) std::thread([this, id = started_++] { loop(id); }).detach();
        item_ = &item, n_ = n, next_ = 0, wanted_ = helpers, active_ = helpers, generation_++;
        wake_.notify_all();
        lock.unlock();
        work();
        lock.lock();
        done_.wait(lock, [this] { return active_ == 0; });
        item_ = nullptr;
    }

  private:
    helper_pool() : pid_(getpid()) {}

    void work()
    {
        for (size_t i; (i = next_.fetch_add(1)) < n_;) (*item_)(i);
    }

    void loop(size_t id)
    {
        uint64_t seen = 0;
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            wake_.wait(lock, [&] { return generation_ != seen; });
            seen = generation_;
            if (id >= wanted_) continue;
            lock.unlock();
            work();
            lock.lock();
            if (--active_ == 0) done_.notify_one();
        }
    }

    const pid_t pid_;
    std::mutex run_mu_, mu_;
    std::condition_variable wake_, done_;
    const std::function<void(size_t)> *item_ = nullptr;
    size_t n_ = 0, wanted_ = 0, active_ = 0, started_ = 0;
    std::atomic<size_t> next_{0};
    uint64_t generation_ = 0;
};

// One kv head's query group (n_pos positions x g heads of d floats) over n
// rows of type t (keys and values apart, kvc_row_bytes each), causal over the
// last n_pos rows when asked: the core's batched attend with the best table,
// as the vLLM plugin's bindings call it. No GIL needed: caller memory only.
kvc_status attend_group(kvc_dtype t, size_t d, const void *keys, const void *values, size_t n, const float *q,
                        size_t n_pos, size_t g, float beta, bool causal, float *out, std::vector<double> &work)
{
    kvc_view view{};
    view.n_seg = 1, view.d = view.dv = d, view.beta = beta;
    view.seg[0].scale = 1.0, view.seg[0].n = n, view.seg[0].role = KVC_SET_BOTH, view.seg[0].dtype = (unsigned)t;
    view.seg[0].keys_q = keys, view.seg[0].values_q = values;
    kvc_attend_batch b{q, n_pos, g, causal ? 1u : 0u, out, nullptr, nullptr};
    work.resize(kvc_attend_work_bytes(n_pos, g, d) / sizeof(double) + 1);
    const kvc_kernels *k = kvc_kernels_best();
    return k->attend_batch(k, &view, &b, work.data(), work.size() * sizeof(double));
}

} // namespace

NB_MODULE(_core, m)
{
    m.doc() = "kvcompress's C core (use the kvcompress package, not this module)";
    // caches still referenced at interpreter exit (a traceback's frames) are
    // not leaks worth a warning: the process is ending
    nb::set_leak_warnings(false);
    // kvcompress.KvcError (defined in Python) is given once at import: a
    // status_error becomes KvcError(code, message)
    m.def("set_error_class", [](nb::object cls) { g_error_class = cls.release().ptr(); });
    nb::register_exception_translator([](const std::exception_ptr &p, void *) {
        try {
            std::rethrow_exception(p);
        } catch (const status_error &e) {
            PyObject *cls = g_error_class != nullptr ? g_error_class : PyExc_RuntimeError;
            PyErr_SetObject(cls, nb::make_tuple(e.code, e.message).ptr());
        }
    });
    m.def("methods", [] {
        nb::list out;
        for (size_t i = 0; i < kvc_method_count(); i++) {
            const kvc_method mm = kvc_method_at(i);
            nb::list params;
            for (size_t j = 0; j < kvc_method_param_count(mm); j++) {
                const kvc_param_desc *d = kvc_method_param_at(mm, j);
                nb::dict p;
                p["name"] = d->name;
                p["type"] = d->type == KVC_PARAM_U32 ? "int" : d->type == KVC_PARAM_F32 ? "float" : "choice";
                p["min"] = d->min, p["max"] = d->max;
                p["choices"] = d->choices ? d->choices : "";
                p["default"] = d->dflt ? d->dflt : "";
                p["help"] = d->help ? d->help : "";
                params.append(p);
            }
            nb::dict e;
            e["name"] = kvc_method_name(mm);
            e["summary"] = kvc_method_summary(mm);
            const char *kp = kvc_method_kvpress_name(mm);
            e["kvpress"] = kp ? nb::cast(kp) : nb::none();
            e["observes"] = kvc_method_observes(mm) != 0;
            e["params"] = params;
            out.append(e);
        }
        return out;
    });
    m.def("dtypes", [] {
        nb::list out;
        for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++)
            if (kvc_dtype_implemented((kvc_dtype)t)) out.append(kvc_dtype_name((kvc_dtype)t));
        return out;
    });
    nb::class_<cache>(m, "Cache")
        .def(nb::init<uint32_t, uint32_t, uint32_t, uint32_t, const std::string &, uint32_t, const std::string &,
                      uint64_t, const std::vector<std::string> &>())
        .def(nb::init<nb::bytes>())
        .def("append", &cache::append)
        .def("attend", &cache::attend, nb::arg("layer"), nb::arg("q"), nb::arg("out").noconvert())
        .def("extend", &cache::extend, nb::arg("layer"), nb::arg("k"), nb::arg("v"), nb::arg("q").none() = nb::none(),
             nb::arg("out").noconvert().none() = nb::none(), nb::arg("centres").noconvert().none() = nb::none())
        .def("plan", &cache::plan)
        .def("prefill_queries", &cache::prefill_queries)
        .def("mark", &cache::mark, nb::arg("layer"), nb::arg("kv_head"), nb::arg("token"), nb::arg("centre") = true)
        .def("restore", &cache::restore)
        .def("observes", &cache::observes)
        .def("c_attend_ns", &cache::c_attend_ns)
        .def("snapshot", &cache::snapshot)
        .def("arena_bytes", &cache::arena_bytes)
        .def("usage", &cache::usage)
        .def("checksum", &cache::checksum)
        .def_prop_ro("n_layers", &cache::layers)
        .def_prop_ro("n_heads", &cache::heads)
        .def_prop_ro("n_kv_heads", &cache::cfg_kv_heads)
        .def_prop_ro("head_dim", &cache::head_dim)
        .def_prop_ro("method", &cache::method_name)
        .def_prop_ro("dtype", &cache::dtype_name)
        .def_prop_ro("budget", &cache::budget);
    m.def("stream_budget_for_bytes", [](const std::string &method, const std::string &dtype, uint32_t head_dim,
                                        uint64_t bytes, const std::vector<std::string> &params) {
        // the command line's fit: the budget for the bytes without protected
        // spans, then shrunk until the arena with its spans fits
        double pct = 0;
        kvc_stream_config c = stream_config(method, dtype, head_dim, 1, 1, params, &pct);
        apply_protect(c, 0);
        c.budget = kvc_stream_budget_for_bytes(&c, bytes);
        if (c.budget == 0) return 0u;
        if (c.budget >= KVC_MAX_BUDGET) { // the largest budget: refuse bytes it cannot use, never clamp
            kvc_stream_config one_less = c;
            one_less.budget = c.budget - 1;
            const size_t at_max = kvc_stream_arena_bytes(&c), per_token = at_max - kvc_stream_arena_bytes(&one_less);
            if (bytes >= at_max + per_token)
                throw status_error{(int)KVC_E_ARG, "budget: " + std::to_string(bytes) +
                                                       " bytes per stream is more than the largest budget (" +
                                                       std::to_string(KVC_MAX_BUDGET) + " tokens, " +
                                                       std::to_string(at_max) + " bytes) can use"};
        }
        apply_protect(c, pct);
        while (c.n_protect && c.budget > 1 && (kvc_stream_arena_bytes(&c) == 0 || kvc_stream_arena_bytes(&c) > bytes)) {
            c.budget--;
            apply_protect(c, pct);
        }
        return kvc_stream_arena_bytes(&c) == 0 ? 0u : c.budget;
    });
#ifdef KVC_PY_CUDA
    m.attr("cuda_backend") = KVC_PY_CUDA_BACKEND;
    m.attr("cuda_page_rows") = (int)KVC_CUDA_PAGE_ROWS;
    m.attr("cuda_max_group") = (int)KVC_CUDA_BATCH_MAX_GROUP;
    m.def("cuda_page_bytes", [](const std::string &dtype, uint32_t head_dim) {
        return kvc_cuda_page_bytes((unsigned)parse_dtype(dtype), head_dim);
    });
    nb::class_<dev_tensor>(m, "DevTensor")
        .def(nb::init<uintptr_t, int, int64_t, int64_t>(), nb::arg("data"), nb::arg("elem"), nb::arg("seq_stride"),
             nb::arg("head_stride"));
    nb::class_<paged_layer>(m, "PagedLayer")
        .def(nb::init<const std::string &, uint32_t, uint32_t, uint32_t, float, uintptr_t, uint32_t>())
        .def("set_pool", &paged_layer::set_pool)
        .def("set_beta", &paged_layer::set_beta)
        .def("append", &paged_layer::append)
        .def("workspace_bytes", &paged_layer::workspace_bytes)
        .def("plan_host_bytes", &paged_layer::plan_host_bytes)
        .def("attend", &paged_layer::attend);
    m.def("paged_rows", &paged_rows);
    nb::class_<mirrored_cache>(m, "MirroredCache")
        .def(nb::init<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, const std::string &, uint32_t,
                      const std::string &, uint64_t, const std::vector<std::string> &>())
        .def("extend", &mirrored_cache::extend)
        .def("checksum", &mirrored_cache::checksum)
        .def("usage", &mirrored_cache::usage)
        .def_prop_ro("nbytes", &mirrored_cache::nbytes)
        .def_prop_ro("host_bytes", &mirrored_cache::host_bytes)
        .def_prop_ro("slots", &mirrored_cache::slots)
        .def_prop_ro("pages_per_entry", &mirrored_cache::pages_per_entry)
        .def_prop_ro("observes", &mirrored_cache::observes);
#else
    m.attr("cuda_backend") = nb::none();
#endif
    // The vLLM plugin's rows (kvcompress.vllm): rows stored by the best
    // table's row kernel (the core's own codes), and the attend of one
    // kv head's query group over such rows, causal over the last positions.
    m.def("row_bytes", [](const std::string &dtype, uint32_t d) {
        const kvc_dtype t = parse_dtype(dtype);
        if (d < 1 || d > KVC_MAX_HEAD_DIM) throw status_error{(int)KVC_E_ARG, "head_dim out of range"};
        return (size_t)kvc_row_bytes((unsigned)t, d);
    });
    m.def("rows_store",
          [](const std::string &dtype, nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu> x,
             nb::ndarray<uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> out) {
              const kvc_dtype t = parse_dtype(dtype);
              const size_t n = x.shape(0), d = x.shape(1);
              const kvc_row_kernels &rk = kvc_kernels_best()->rows[t];
              if (d < 1 || d > KVC_MAX_HEAD_DIM || rk.store == nullptr || t == KVC_DTYPE_F32 || t == KVC_DTYPE_KIVI4)
                  throw status_error{(int)KVC_E_UNSUPPORTED, "rows_store: a type with per-token rows (f16, int8, int4) "
                                                             "of dimension 1 .. 256"};
              const size_t rb = (size_t)kvc_row_bytes((unsigned)t, d);
              if (out.shape(0) != n || out.shape(1) != rb)
                  throw status_error{(int)KVC_E_ARG, "rows_store: out wants (n, row_bytes)"};
              for (size_t i = 0; i < n * d; i++)
                  if (!std::isfinite(x.data()[i])) throw status_error{(int)KVC_E_NONFINITE, "rows_store: a NaN or Inf"};
              for (size_t i = 0; i < n; i++) rk.store(out.data() + i * rb, x.data() + i * d, d);
          });
    // keys or values (n, kv heads, d) stored as rows straight into vLLM's
    // pool layout (blocks, kv heads, block, key row | value row) at the given
    // slots (block * block_size + offset; negative: padding, skipped); `half`
    // 0 writes the key rows, 1 the value rows. Every check before any write.
    m.def("rows_store_slots",
          [](const std::string &dtype, nb::ndarray<const float, nb::ndim<3>, nb::c_contig, nb::device::cpu> x,
             nb::ndarray<uint8_t, nb::ndim<4>, nb::c_contig, nb::device::cpu> pool,
             nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> slots, int half) {
              const kvc_dtype t = parse_dtype(dtype);
              const size_t n = x.shape(0), h = x.shape(1), d = x.shape(2);
              const size_t n_blk = pool.shape(0), bs = pool.shape(2), c = pool.shape(3);
              const kvc_row_kernels &rk = kvc_kernels_best()->rows[t];
              if (d < 1 || d > KVC_MAX_HEAD_DIM || rk.store == nullptr || t == KVC_DTYPE_F32 || t == KVC_DTYPE_KIVI4)
                  throw status_error{(int)KVC_E_UNSUPPORTED, "rows_store_slots: a type with per-token rows (f16, int8, "
                                                             "int4) of dimension 1 .. 256"};
              const size_t rb = (size_t)kvc_row_bytes((unsigned)t, d);
              if (pool.shape(1) != h || c != 2 * rb || bs < 1 || slots.shape(0) != n || (half != 0 && half != 1))
                  throw status_error{(int)KVC_E_ARG, "rows_store_slots: x (n, kv heads, d), pool (blocks, kv heads, "
                                                     "block, 2 row bytes), n slots, half 0 or 1"};
              const int64_t *sl = slots.data();
              for (size_t i = 0; i < n; i++)
                  if (sl[i] >= (int64_t)(n_blk * bs))
                      throw status_error{(int)KVC_E_ARG, "rows_store_slots: a slot outside the pool"};
              for (size_t i = 0; i < n; i++)
                  if (sl[i] >= 0)
                      for (size_t j = 0; j < h * d; j++)
                          if (!std::isfinite(x.data()[i * h * d + j]))
                              throw status_error{(int)KVC_E_NONFINITE, "rows_store_slots: a NaN or Inf"};
              for (size_t i = 0; i < n; i++) {
                  if (sl[i] < 0) continue;
                  const size_t blk = (size_t)sl[i] / bs, off = (size_t)sl[i] % bs;
                  for (size_t j = 0; j < h; j++)
                      rk.store(pool.data() + ((blk * h + j) * bs + off) * c + (size_t)half * rb,
                               x.data() + (i * h + j) * d, d);
              }
          });
    // whole spans for the protected rows by per-token scores (kvc_spans_choose):
    // scores (n,), span ends (spans,) strictly increasing to n; the marks (n,)
    // to give Cache.mark as the tokens enter the window
    // span ends from the tokens' texts (kvc_sentence_ends): a list of str,
    // the surprisal (n,) or None; returns (spans,) uint32
    m.def(
        "sentence_ends",
        [](const std::vector<std::string> &texts,
           std::optional<nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>> surprisal,
           float split_sigma) {
            const size_t n = texts.size();
            if (n == 0 || n > UINT32_MAX) throw status_error{(int)KVC_E_ARG, "sentence_ends: 1 .. 2^32-1 tokens"};
            if (surprisal && surprisal->shape(0) != n)
                throw status_error{(int)KVC_E_ARG, "sentence_ends: a surprisal per token"};
            std::vector<const char *> ptrs(n);
            for (size_t i = 0; i < n; i++) ptrs[i] = texts[i].c_str();
            uint32_t *ends = new uint32_t[n];
            nb::capsule owner(ends, [](void *p) noexcept { delete[] static_cast<uint32_t *>(p); });
            uint32_t n_spans = 0;
            check(kvc_sentence_ends(ptrs.data(), surprisal ? surprisal->data() : nullptr, (uint32_t)n, split_sigma,
                                    ends, &n_spans),
                  "sentence_ends");
            return nb::ndarray<nb::numpy, uint32_t, nb::ndim<1>>(ends, {n_spans}, owner);
        },
        nb::arg("texts"), nb::arg("surprisal").none(), nb::arg("split_sigma"));
    m.def("spans_choose",
          [](nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu> scores,
             nb::ndarray<const uint32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> span_end, uint32_t first,
             uint32_t budget, uint32_t radius, nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> marks) {
              if (scores.shape(0) > UINT32_MAX || span_end.shape(0) > UINT32_MAX || marks.shape(0) != scores.shape(0))
                  throw status_error{(int)KVC_E_ARG, "spans_choose: marks as long as scores"};
              check(kvc_spans_choose(scores.data(), (uint32_t)scores.shape(0), span_end.data(),
                                     (uint32_t)span_end.shape(0), first, budget, radius, marks.data()),
                    "spans_choose");
          });
    // the protected spans' outlier test per kv head (kvc_outlier_flags), for
    // an engine that keeps its own pool (the vLLM plugin scores its blocks):
    // keys (n, heads, d); context (m <= 32, heads, d), the keys just before;
    // state (heads, 3): moving mean, moving variance, keys seen, updated in
    // place; flags (n, heads) written. Every check before any write.
    m.def("outlier_flags", [](nb::ndarray<const float, nb::ndim<3>, nb::c_contig, nb::device::cpu> keys,
                              nb::ndarray<const float, nb::ndim<3>, nb::c_contig, nb::device::cpu> context,
                              nb::ndarray<double, nb::ndim<2>, nb::c_contig, nb::device::cpu> state,
                              nb::ndarray<uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> flags) {
        const size_t n = keys.shape(0), h = keys.shape(1), d = keys.shape(2), m = context.shape(0);
        if (d < 1 || d > KVC_MAX_HEAD_DIM || m > 32 || context.shape(1) != h || context.shape(2) != d ||
            state.shape(0) != h || state.shape(1) != 3 || flags.shape(0) != n || flags.shape(1) != h || n > UINT32_MAX)
            throw status_error{(int)KVC_E_ARG, "outlier_flags: keys (n, heads, d <= 256), context (<= 32, heads, d), "
                                               "state (heads, 3), flags (n, heads)"};
        for (size_t i = 0; i < n * h * d; i++)
            if (!std::isfinite(keys.data()[i])) throw status_error{(int)KVC_E_NONFINITE, "outlier_flags: a NaN or Inf"};
        for (size_t i = 0; i < m * h * d; i++)
            if (!std::isfinite(context.data()[i]))
                throw status_error{(int)KVC_E_NONFINITE, "outlier_flags: a NaN or Inf in the context"};
        for (size_t j = 0; j < h; j++) {
            const double *st = state.data() + j * 3;
            if (!(st[2] >= 0.0 && st[2] <= 9007199254740992.0 && st[2] == std::floor(st[2])))
                throw status_error{(int)KVC_E_ARG, "outlier_flags: state's third column counts keys"};
        }
        std::vector<uint8_t> head_flags(n);
        for (size_t j = 0; j < h; j++) {
            double *st = state.data() + j * 3;
            kvc_outlier_state s{st[0], st[1], (uint64_t)st[2]};
            check(kvc_outlier_flags(&s, m ? context.data() + j * d : nullptr, (uint32_t)m, keys.data() + j * d,
                                    (uint32_t)n, (uint32_t)d, h * d, head_flags.data()),
                  "outlier_flags");
            st[0] = s.mu, st[1] = s.var, st[2] = (double)s.seen;
            for (size_t i = 0; i < n; i++) flags.data()[i * h + j] = head_flags[i];
        }
    });
    m.def("attend_rows", [](const std::string &dtype,
                            nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> keys,
                            nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> values,
                            nb::ndarray<const float, nb::ndim<3>, nb::c_contig, nb::device::cpu> q, float beta,
                            bool causal, nb::ndarray<float, nb::ndim<3>, nb::c_contig, nb::device::cpu> out) {
        const kvc_dtype t = parse_dtype(dtype);
        const size_t n = keys.shape(0), n_pos = q.shape(0), g = q.shape(1), d = q.shape(2);
        if (d < 1 || d > KVC_MAX_HEAD_DIM || t == KVC_DTYPE_F32 || t == KVC_DTYPE_KIVI4)
            throw status_error{(int)KVC_E_UNSUPPORTED, "attend_rows: f16, int8 or int4 rows of dimension 1 .. 256"};
        const size_t rb = (size_t)kvc_row_bytes((unsigned)t, d);
        if (keys.shape(1) != rb || values.shape(0) != n || values.shape(1) != rb || out.shape(0) != n_pos ||
            out.shape(1) != g || out.shape(2) != d || n_pos < 1 || n_pos > KVC_MAX_BATCH_POSITIONS || g < 1 ||
            g > KVC_MAX_QUERY_HEADS || (causal && n_pos > n) || !(std::isfinite(beta) && beta > 0))
            throw status_error{(int)KVC_E_ARG, "attend_rows: shapes (n, row_bytes) x2, (n_pos, group, d) x2; "
                                               "n_pos <= n when causal; beta finite > 0"};
        std::vector<double> work;
        kvc_status s;
        {
            nb::gil_scoped_release unlocked; // caller arrays only (nanobind holds them): no object of ours to lock
            s = attend_group(t, d, keys.data(), values.data(), n, q.data(), n_pos, g, beta, causal, out.data(), work);
        }
        check(s, "attend_rows");
    });
    // The vLLM plugin's attention for one layer (kvcompress.vllm_backend):
    // every request of the step over its blocks of vLLM's pool
    // [n_blocks][kv heads][block][key row | value row], each kv head's query
    // group attended by the core (causal over the request's last positions).
    // A sink-window gap [gap_first, gap_last) of block indices, computed from
    // (sink, window) and the tokens computed before the step, is skipped (the
    // manager freed those blocks); window 0: no gap. The GIL is released:
    // the arrays are the caller's, held by nanobind for the call.
    m.def("attend_blocks", [](const std::string &dtype,
                              nb::ndarray<const uint8_t, nb::ndim<4>, nb::c_contig, nb::device::cpu> pool,
                              nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> block_table,
                              nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> seq_lens,
                              nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> query_start,
                              nb::ndarray<const float, nb::ndim<3>, nb::c_contig, nb::device::cpu> q,
                              nb::ndarray<float, nb::ndim<3>, nb::c_contig, nb::device::cpu> out, float beta,
                              int threads) {
        const kvc_dtype t = parse_dtype(dtype);
        const size_t n_blk = pool.shape(0), hkv = pool.shape(1), bs = pool.shape(2), c = pool.shape(3);
        const size_t n_tok = q.shape(0), hq = q.shape(1), d = q.shape(2), n_req = seq_lens.shape(0);
        if (d < 1 || d > KVC_MAX_HEAD_DIM || t == KVC_DTYPE_F32 || t == KVC_DTYPE_KIVI4)
            throw status_error{(int)KVC_E_UNSUPPORTED, "attend_blocks: f16, int8 or int4 rows of dimension 1 .. 256"};
        const size_t rb = (size_t)kvc_row_bytes((unsigned)t, d);
        if (c != 2 * rb || hkv < 1 || hq % hkv != 0 || hq / hkv > KVC_MAX_QUERY_HEADS || out.shape(0) != n_tok ||
            out.shape(1) != hq || out.shape(2) != d || query_start.shape(0) != n_req + 1 ||
            block_table.shape(0) < n_req || bs < 1 || !(std::isfinite(beta) && beta > 0))
            throw status_error{(int)KVC_E_ARG, "attend_blocks: shapes: pool (blocks, kv heads, block, 2 row "
                                               "bytes), q and out (tokens, heads, d), query_start n + 1"};
        if (threads < 1 || threads > 256) throw status_error{(int)KVC_E_ARG, "attend_blocks: threads 1 .. 256"};
        const size_t g = hq / hkv, width = block_table.shape(1);
        const int32_t *qs = query_start.data(), *lens = seq_lens.data(), *table = block_table.data();
        for (size_t r = 0; r < n_req; r++) { // every index checked before any work
            const int64_t q0 = qs[r], q1 = qs[r + 1], len = lens[r];
            if (q0 < 0 || q1 < q0 || (size_t)q1 > n_tok || len < q1 - q0 || (size_t)((len + bs - 1) / bs) > width)
                throw status_error{(int)KVC_E_ARG, "attend_blocks: request " + std::to_string(r) +
                                                       ": its queries, length or blocks are out of range"};
            // -1: a block the engine freed (evicted), not read; the queries' own blocks are read
            for (int64_t b = 0; b < (int64_t)((len + bs - 1) / bs); b++)
                if (table[r * width + b] < (b >= (len - (q1 - q0)) / (int64_t)bs ? 0 : -1) ||
                    table[r * width + b] >= (int64_t)n_blk)
                    throw status_error{(int)KVC_E_ARG, "attend_blocks: a block id outside the pool, or a "
                                                       "query's own block marked freed (-1)"};
        }
        // one item per (request with queries, kv head), shared out among the
        // caller and threads - 1 parked helpers (helper_pool)
        std::vector<std::pair<uint32_t, uint32_t>> items;
        for (size_t r = 0; r < n_req; r++)
            if (qs[r + 1] > qs[r])
                for (size_t h = 0; h < hkv; h++) items.emplace_back((uint32_t)r, (uint32_t)h);
        std::atomic<int> failed{(int)KVC_OK};
        const std::function<void(size_t)> one = [&](size_t it) {
            thread_local std::vector<uint8_t> keys, values;
            thread_local std::vector<float> qh, oh;
            thread_local std::vector<double> work;
            const size_t r = items[it].first, h = items[it].second;
            const size_t q0 = (size_t)qs[r], n_pos = (size_t)(qs[r + 1] - qs[r]), len = (size_t)lens[r];
            // the tokens read: those of the blocks not freed
            size_t n = 0;
            for (size_t b = 0; b * bs < len; b++)
                if (table[r * width + b] >= 0) n += std::min(bs, len - b * bs);
            keys.resize(n * rb), values.resize(n * rb), qh.resize(n_pos * g * d), oh.resize(n_pos * g * d);
            size_t row = 0;
            for (size_t tok = 0; tok < len; tok++) {
                if (table[r * width + tok / bs] < 0) continue;
                const size_t blk = (size_t)table[r * width + tok / bs];
                const uint8_t *src = pool.data() + ((blk * hkv + h) * bs + tok % bs) * c;
                std::memcpy(keys.data() + row * rb, src, rb);
                std::memcpy(values.data() + row * rb, src + rb, rb);
                row++;
            }
            for (size_t i = 0; i < n_pos; i++)
                std::memcpy(qh.data() + i * g * d, q.data() + ((q0 + i) * hq + h * g) * d, g * d * 4);
            const kvc_status st =
                attend_group(t, d, keys.data(), values.data(), n, qh.data(), n_pos, g, beta, true, oh.data(), work);
            if (st != KVC_OK) {
                int expected = (int)KVC_OK;
                failed.compare_exchange_strong(expected, (int)st);
                return;
            }
            for (size_t i = 0; i < n_pos; i++)
                std::memcpy(out.data() + ((q0 + i) * hq + h * g) * d, oh.data() + i * g * d, g * d * 4);
        };
        {
            nb::gil_scoped_release unlocked; // caller arrays only (nanobind holds them): no object of ours to lock
            const size_t helpers = std::min<size_t>(threads > 1 ? (size_t)threads - 1 : 0, items.size() / 8);
            if (helpers == 0)
                for (size_t i = 0; i < items.size(); i++) one(i);
            else
                helper_pool::get().run(helpers, items.size(), one);
        }
        const kvc_status s = (kvc_status)failed.load();
        check(s, "attend_blocks");
    });
    // the core's budget grammar (kvc_budget.h): (tokens, 0) for the token
    // forms, (0, bytes of one stream's arena) for the byte forms
    m.def("budget_per_stream", [](const std::string &text, uint32_t head_dim, uint64_t context, uint64_t n_streams) {
        kvc_budget b;
        const char *why = kvc_budget_parse(text.c_str(), &b);
        uint32_t tokens = 0;
        uint64_t bytes = 0;
        if (why == nullptr) why = kvc_budget_per_stream(&b, head_dim, head_dim, context, n_streams, &tokens, &bytes);
        if (why != nullptr)
            throw nb::value_error(("budget '" + text + "' " + why + "; a budget is " KVC_BUDGET_SYNTAX).c_str());
        return std::make_pair(tokens, bytes);
    });
    m.def("stream_arena_bytes", [](const std::string &method, const std::string &dtype, uint32_t head_dim,
                                   uint32_t budget, const std::vector<std::string> &params) {
        const kvc_stream_config c = stream_config(method, dtype, head_dim, budget, 1, params);
        return kvc_stream_arena_bytes(&c);
    });
}
