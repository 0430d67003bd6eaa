// The host side of the batched decode (include/kvc/kvc_cuda_batch.h):
// argument checks, the split plan over ragged lengths, the launches. Built
// by nvcc for a GPU or as C++ against the CPU SIMT runtime, from this source.
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "batch_plan.h"
#include "kernels/batch_decode.cuh"
#include "kvc/kvc_cuda_batch.h"

namespace kvc_cuda
{
int device_multiprocessors(); // kvc_cuda.cu
}

namespace
{

using namespace kvc_cuda;

bool batch_type(unsigned t)
{
    return t == KVC_DTYPE_F16 || t == KVC_DTYPE_I8 || t == KVC_DTYPE_I4 || t == KVC_CUDA_DTYPE_I4_ROW;
}
static_assert(KVC_CUDA_DTYPE_I4_ROW == (unsigned)BT_I4R, "the device page type's number");
bool batch_dim(size_t d) { return d == 64u || d == 128u; }
cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

kvc_status check_cache(const kvc_cuda_paged *c)
{
    if (c == nullptr || c->pool == nullptr || ((uintptr_t)c->pool % 256u) != 0) return KVC_E_ARG;
    if (c->n_kv_heads < 1u || c->n_kv_heads > 1024u || c->group < 1u || c->group > KVC_CUDA_BATCH_MAX_GROUP)
        return KVC_E_ARG;
    if (c->n_pages < 1u || c->n_pages > (1u << 31) / KVC_CUDA_PAGE_ROWS) return KVC_E_ARG;
    if (!(c->beta > 0.0f) || !std::isfinite(c->beta) || c->unweighted > 1u) return KVC_E_ARG;
    if ((c->dtype >= KVC_DTYPE_COUNT && c->dtype != KVC_CUDA_DTYPE_I4_ROW) || c->head_dim < 1u ||
        c->head_dim > KVC_MAX_HEAD_DIM)
        return KVC_E_ARG;
    if (!batch_type(c->dtype) || !batch_dim(c->head_dim)) return KVC_E_UNSUPPORTED;
    return KVC_OK;
}

bool check_tensor(const kvc_cuda_tensor &t)
{
    if (t.data == nullptr || t.elem > KVC_CUDA_BF16 || t.seq_stride < 0 || t.head_stride < 0) return false;
    return (uintptr_t)t.data % (t.elem == KVC_CUDA_F32 ? 4u : 2u) == 0;
}

batch_tensor as_batch(const kvc_cuda_tensor &t)
{
    return batch_tensor{t.data, t.seq_stride, t.head_stride, (uint32_t)t.elem};
}

// The compiled (type, head_dim) pairs, one switch for every launch.
template <template <int, uint32_t> class Op, typename... A> void dispatch(unsigned dtype, uint32_t d, A &&...args)
{
    if (dtype == KVC_DTYPE_F16)
        d == 64u ? Op<BT_F16, 64>::run(args...) : Op<BT_F16, 128>::run(args...);
    else if (dtype == KVC_DTYPE_I8)
        d == 64u ? Op<BT_I8, 64>::run(args...) : Op<BT_I8, 128>::run(args...);
    else if (dtype == KVC_DTYPE_I4)
        d == 64u ? Op<BT_I4, 64>::run(args...) : Op<BT_I4, 128>::run(args...);
    else
        d == 64u ? Op<BT_I4R, 64>::run(args...) : Op<BT_I4R, 128>::run(args...);
}

constexpr int kDevices = 16; // devices whose per-kernel facts are cached (others ask every time)

int current_device()
{
    int dev = 0;
    return cudaGetDevice(&dev) == cudaSuccess ? dev : -1;
}

// Per device and kernel: the split kernel's dynamic shared memory is past the
// default 48 KiB for f16 rows of d = 128 (sm_80 allows 163 KiB, sm_90 227),
// an opt-in CUDA keeps per device; then its resident blocks per
// multiprocessor (registers, shared memory) times the multiprocessors: the
// plan's slots. Asked by the plan, so that a captured attend makes no
// attribute call; 0 when the device refuses.
template <int DT, uint32_t D> struct split_slots {
    static void run(int dev, size_t &slots)
    {
        static std::atomic<int> known[kDevices];
        const bool cacheable = dev >= 0 && dev < kDevices;
        int n = cacheable ? known[dev].load(std::memory_order_relaxed) : 0;
        if (n <= 0) {
            void (*const split)(batch_args) = batch_split_kernel<DT, D>;
            const void *fn = reinterpret_cast<const void *>(split);
            int per_sm = 0;
            (void)cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, 100); // a hint
            if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)batch_smem_bytes(DT, D)) !=
                    cudaSuccess ||
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, (int)kBatchThreads,
                                                              batch_smem_bytes(DT, D)) != cudaSuccess ||
                per_sm < 1)
                return (void)(slots = 0);
            n = per_sm * device_multiprocessors();
            if (cacheable) known[dev].store(n, std::memory_order_relaxed);
        }
        slots = (size_t)n;
    }
};

#if !defined(KVC_SIMT_CPU)
// Programmatic dependent launch (sm_90): the merge's launch overlaps the
// split's last blocks, and its griddepcontrol.wait holds it until the
// split's states are written. Elsewhere (and on the CPU runtime) a plain launch.
bool device_has_pdl(int dev)
{
    static std::atomic<int> known[kDevices]; // 0 unknown, 1 no, 2 yes
    const bool cacheable = dev >= 0 && dev < kDevices;
    if (cacheable && known[dev].load(std::memory_order_relaxed) != 0) return known[dev].load() == 2;
    int major = 0;
    const bool yes =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
    if (cacheable) known[dev].store(yes ? 2 : 1, std::memory_order_relaxed);
    return yes;
}
#endif

template <int DT, uint32_t D> struct launch_split {
    static void run(const batch_args &a, uint32_t grid, uint32_t merge_grid, int dev, cudaStream_t st)
    {
        void (*const split)(batch_args) = batch_split_kernel<DT, D>; // (a template-id's comma would split the macro)
        void (*const merge)(batch_args) = batch_merge_kernel<D>;
        KVC_LAUNCH(split, grid, kBatchThreads, batch_smem_bytes(DT, D), st, a);
        if (merge_grid == 0) return;
#if !defined(KVC_SIMT_CPU)
        if (device_has_pdl(dev)) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(merge_grid), cfg.blockDim = dim3(kMergeThreads), cfg.dynamicSmemBytes = 0,
            cfg.stream = st;
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = attr, cfg.numAttrs = 1;
            (void)cudaLaunchKernelEx(&cfg, merge, a);
            return;
        }
#else
        (void)dev;
#endif
        KVC_LAUNCH(merge, merge_grid, kMergeThreads, 0, st, a);
    }
};

template <int DT, uint32_t D> struct launch_append {
    static void run(const append_args &a, cudaStream_t st)
    {
        void (*const append)(append_args) = batch_append_kernel<DT, D>;
        KVC_LAUNCH(append, (a.n_entries + 3u) / 4u, kBatchThreads, 0, st, a);
    }
};

template <int DT, uint32_t D> struct launch_mass {
    static void run(const mass_args &a, uint32_t grid, cudaStream_t st)
    {
        void (*const mass)(mass_args) = batch_mass_kernel<DT, D>;
        KVC_LAUNCH(mass, grid, kBatchThreads, 0, st, a);
    }
};

template <int DT, uint32_t D> struct launch_put_rows {
    static void run(const put_rows_args &a, cudaStream_t st)
    {
        void (*const put)(put_rows_args) = batch_put_rows_kernel<DT, D>;
        KVC_LAUNCH(put, (a.n + kBatchThreads - 1u) / kBatchThreads, kBatchThreads, 0, st, a);
    }
};

template <int DT, uint32_t D> struct page_layout {
    static void run(uint32_t &bytes, uint32_t &lw, uint32_t &role)
    {
        bytes = page_bytes(DT, D), lw = page_lw_offset(DT, D), role = page_role_offset(DT, D);
    }
};

// The workspace of a plan with `slots` (the split kernel's resident blocks):
// items never exceed plan_capacity(slots, entries), nor pages + entries.
batch_ws workspace_of(const kvc_cuda_paged *c, size_t n_seqs, size_t max_pages, size_t slots)
{
    const size_t E = n_seqs * c->n_kv_heads, by_pages = max_pages + E, by_slots = plan_capacity(slots, E);
    return batch_ws{(uint32_t)(by_pages < by_slots ? by_pages : by_slots), (uint32_t)E, c->group, c->head_dim};
}

size_t slots_now(const kvc_cuda_paged *c)
{
    size_t slots = 0;
    dispatch<split_slots>(c->dtype, c->head_dim, current_device(), slots);
    return slots;
}

// The host buffers whose last plan's copy may still be in flight: the next
// plan into the same buffer waits for it (a pinned buffer reused for the
// next layer before the copy ran would hand the device that layer's plan).
std::mutex g_plan_events_lock;
std::map<std::pair<const void *, int>, cudaEvent_t> g_plan_events;

cudaEvent_t plan_event(const void *host_buf, int dev)
{
    std::lock_guard<std::mutex> hold(g_plan_events_lock);
    cudaEvent_t &ev = g_plan_events[{host_buf, dev}];
    if (ev == nullptr && cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) ev = nullptr;
    return ev;
}

bool plan_shape_ok(const kvc_cuda_paged *c, size_t n_seqs, size_t max_pages)
{
    // max_pages counts page reads: entries may share pages (a prompt's
    // positions read one kv head's list, kvcompress.device), so it may pass
    // n_pages; its ceiling is the pool's (the items' count is 32-bit)
    return check_cache(c) == KVC_OK && n_seqs >= 1u && n_seqs <= 65535u &&
           max_pages <= (size_t)(1u << 31) / kPageRows && n_seqs * c->n_kv_heads <= (1u << 24);
}

kvc_status attend_impl(const kvc_cuda_paged *c, const kvc_cuda_batch_plan *plan, const int32_t *page_indptr,
                       const int32_t *page_ids, kvc_cuda_tensor q, kvc_cuda_tensor out, void *workspace, float *mass,
                       void *stream);

} // namespace

extern "C" {

size_t kvc_cuda_page_bytes(unsigned dtype, size_t head_dim)
{
    if (!batch_type(dtype) || !batch_dim(head_dim)) return 0;
    uint32_t bytes = 0, lw = 0, role = 0;
    dispatch<page_layout>(dtype, (uint32_t)head_dim, bytes, lw, role);
    return bytes;
}

kvc_status kvc_cuda_paged_check(const kvc_cuda_paged *c) { return check_cache(c); }

kvc_status kvc_cuda_batch_append(const kvc_cuda_paged *c, size_t n_seqs, const int32_t *slots, kvc_cuda_tensor k,
                                 kvc_cuda_tensor v, void *stream)
{
    const kvc_status rc = check_cache(c);
    if (rc != KVC_OK) return rc;
    if (n_seqs < 1u || n_seqs > 65535u || slots == nullptr || !check_tensor(k) || !check_tensor(v)) return KVC_E_ARG;
    append_args a;
    a.pool = static_cast<unsigned char *>(c->pool);
    a.n_pages = c->n_pages, a.n_kv_heads = c->n_kv_heads, a.n_entries = (uint32_t)(n_seqs * c->n_kv_heads);
    a.slots = slots, a.k = as_batch(k), a.v = as_batch(v);
    dispatch<launch_append>(c->dtype, c->head_dim, a, as_stream(stream));
    return cudaGetLastError() == cudaSuccess ? KVC_OK : KVC_E_BACKEND;
}

kvc_status kvc_cuda_batch_set_rows(const kvc_cuda_paged *c, size_t n, const int32_t *slots, const float *weights,
                                   const uint8_t *roles, void *stream)
{
    const kvc_status rc = check_cache(c);
    if (rc != KVC_OK) return rc;
    if (n > ((size_t)1 << 31)) return KVC_E_ARG;
    if (c->unweighted) return KVC_E_ARG; // its pages' weights and roles are never read
    if (n == 0) return KVC_OK;
    if (slots == nullptr || weights == nullptr || roles == nullptr) return KVC_E_ARG;
    set_rows_args a;
    a.pool = static_cast<unsigned char *>(c->pool), a.n_pages = c->n_pages, a.n = (uint32_t)n;
    dispatch<page_layout>(c->dtype, c->head_dim, a.page_bytes, a.lw_offset, a.role_offset);
    a.slots = slots, a.weights = weights, a.roles = roles;
    KVC_LAUNCH(batch_set_rows_kernel, (unsigned)((n + kBatchThreads - 1u) / kBatchThreads), kBatchThreads, 0,
               as_stream(stream), a);
    return cudaGetLastError() == cudaSuccess ? KVC_OK : KVC_E_BACKEND;
}

kvc_status kvc_cuda_batch_put_rows(const kvc_cuda_paged *c, size_t n, const int32_t *slots, const uint8_t *halves,
                                   const void *rows, void *stream)
{
    const kvc_status rc = check_cache(c);
    if (rc != KVC_OK) return rc;
    if (c->dtype == KVC_CUDA_DTYPE_I4_ROW) return KVC_E_UNSUPPORTED;
    if (n > ((size_t)1 << 31)) return KVC_E_ARG;
    if (n == 0) return KVC_OK;
    if (slots == nullptr || halves == nullptr || rows == nullptr) return KVC_E_ARG;
    put_rows_args a;
    a.pool = static_cast<unsigned char *>(c->pool), a.n_pages = c->n_pages, a.n = (uint32_t)n;
    a.row_bytes = (uint32_t)kvc_row_bytes(c->dtype, c->head_dim);
    a.slots = slots, a.halves = halves, a.rows = static_cast<const unsigned char *>(rows);
    dispatch<launch_put_rows>(c->dtype, c->head_dim, a, as_stream(stream));
    return cudaGetLastError() == cudaSuccess ? KVC_OK : KVC_E_BACKEND;
}

kvc_status kvc_cuda_stage_edits(kvc_cuda_staging *s, const kvc_cuda_paged *c, const kvc_stream *st,
                                const kvc_mirror_edit *edits, size_t n_edits, const int32_t *pages, size_t n_pages)
{
    if (s == nullptr || c == nullptr || st == nullptr || (n_edits > 0 && (edits == nullptr || pages == nullptr)))
        return KVC_E_ARG;
    const kvc_status rc = check_cache(c);
    if (rc != KVC_OK) return rc;
    if (c->dtype == KVC_CUDA_DTYPE_I4_ROW) return KVC_E_UNSUPPORTED;
    const kvc_stream_config *cfg = kvc_stream_get_config(st);
    if (cfg == nullptr || cfg->dtype != c->dtype || cfg->d != c->head_dim || cfg->dv != c->head_dim)
        return KVC_E_UNSUPPORTED;
    // count first: a call that does not fit stages nothing
    size_t rows = 0, weights = 0;
    for (size_t i = 0; i < n_edits; i++) {
        const kvc_mirror_edit &e = edits[i];
        if ((size_t)e.slot / kPageRows >= n_pages) return KVC_E_ARG;
        rows += ((e.what & KVC_MIRROR_KEY) != 0) +
                ((e.what & KVC_MIRROR_VALUE) != 0 && e.value_offset != KVC_MIRROR_NO_VALUE);
        weights += (e.what & KVC_MIRROR_WEIGHT) != 0;
    }
    if (rows > (size_t)(s->row_capacity - s->n_rows) || weights > (size_t)(s->weight_capacity - s->n_weights))
        return KVC_E_ARG;
    const size_t rb = (size_t)kvc_row_bytes(c->dtype, c->head_dim);
    const unsigned char *base = reinterpret_cast<const unsigned char *>(st);
    const kvc_row_kernels *rk = &kvc_kernels_ref()->rows[c->dtype];
#if KVC_BUG_MATRIX
    bool dropped = false; // 17: the first in-place rewrite of the call is lost
#endif
    for (size_t i = 0; i < n_edits; i++) {
        const kvc_mirror_edit &e = edits[i];
#if KVC_BUG_MATRIX
        if (kvc_injected_bug == 17 && !dropped && (e.what & KVC_MIRROR_KEY) && !(e.what & KVC_MIRROR_WEIGHT)) {
            dropped = true;
            continue;
        }
#endif
        const int32_t slot = pages[e.slot / kPageRows] * (int32_t)kPageRows + (int32_t)(e.slot % kPageRows);
        for (int half = 0; half < 2; half++) {
            const uint32_t bit = half ? KVC_MIRROR_VALUE : KVC_MIRROR_KEY;
            const uint64_t off = half ? e.value_offset : e.key_offset;
            if (!(e.what & bit) || off == KVC_MIRROR_NO_VALUE) continue;
            unsigned char *to = s->rows + (size_t)s->n_rows * rb;
            if (e.what & KVC_MIRROR_F32)
                rk->store(to, reinterpret_cast<const float *>(base + off), c->head_dim);
            else
                std::memcpy(to, base + off, rb);
            s->row_slots[s->n_rows] = slot;
            s->halves[s->n_rows] = (uint8_t)half;
            s->n_rows++;
        }
        if (e.what & KVC_MIRROR_WEIGHT) {
            s->weight_slots[s->n_weights] = slot;
            s->weights[s->n_weights] = e.weight;
            s->roles[s->n_weights] = (uint8_t)e.role;
            s->n_weights++;
        }
    }
    return KVC_OK;
}

size_t kvc_cuda_batch_workspace_bytes(const kvc_cuda_paged *c, size_t n_seqs, size_t max_pages)
{
    if (!plan_shape_ok(c, n_seqs, max_pages)) return 0;
    const size_t slots = slots_now(c);
    return slots == 0 ? 0 : workspace_of(c, n_seqs, max_pages, slots).bytes();
}

size_t kvc_cuda_batch_plan_host_bytes(const kvc_cuda_paged *c, size_t n_seqs, size_t max_pages)
{
    if (!plan_shape_ok(c, n_seqs, max_pages)) return 0;
    const size_t slots = slots_now(c);
    return slots == 0 ? 0 : workspace_of(c, n_seqs, max_pages, slots).ml_offset();
}

kvc_status kvc_cuda_batch_plan_step(const kvc_cuda_paged *c, size_t n_seqs, const int32_t *n_rows, size_t max_pages,
                                    int fixed_grid, void *host_buf, size_t host_bytes, void *workspace,
                                    size_t workspace_bytes, void *stream, kvc_cuda_batch_plan *plan)
{
    const kvc_status rc = check_cache(c);
    if (rc != KVC_OK) return rc;
    if (!plan_shape_ok(c, n_seqs, max_pages)) return KVC_E_ARG;
    if (n_rows == nullptr || plan == nullptr || host_buf == nullptr || workspace == nullptr ||
        ((uintptr_t)host_buf % 16u) != 0 || ((uintptr_t)workspace % 256u) != 0)
        return KVC_E_ARG;
    const int dev = current_device();
    const size_t slots = slots_now(c);
    if (slots == 0) return KVC_E_BACKEND;
    const batch_ws ws = workspace_of(c, n_seqs, max_pages, slots);
    if (host_bytes < ws.ml_offset() || workspace_bytes < ws.bytes()) return KVC_E_ARG;
    const size_t E = ws.n_entries;
    size_t total = 0;
    for (size_t e = 0; e < E; e++) {
        if (n_rows[e] < 0) return KVC_E_ARG;
        total += pages_of(n_rows[e]);
    }
    if (total > max_pages) return KVC_E_ARG;
    const size_t chunk = plan_chunk(n_rows, E, slots);
    if (items_for_chunk(n_rows, E, chunk) > ws.capacity) return KVC_E_ARG; // (cannot happen: plan_capacity)
    // the previous plan built in this buffer has reached the device
    const cudaEvent_t ev = plan_event(host_buf, dev);
    if (ev == nullptr || cudaEventSynchronize(ev) != cudaSuccess) return KVC_E_BACKEND;
    unsigned char *h = static_cast<unsigned char *>(host_buf);
    batch_item *items = reinterpret_cast<batch_item *>(h + ws.items_offset());
    int32_t *first = reinterpret_cast<int32_t *>(h + ws.entry_offset());
    int32_t *merge = reinterpret_cast<int32_t *>(h + ws.merge_offset());
    const uint32_t n_items = (uint32_t)plan_items(n_rows, E, chunk, items, first);
    uint32_t n_merge = 0, largest = 0;
    for (size_t e = 0; e < E; e++)
        if (first[e + 1] - first[e] > 1) merge[n_merge++] = (int32_t)e;
    for (uint32_t i = 0; i < n_items; i++)
        largest = (uint32_t)items[i].n_pages > largest ? (uint32_t)items[i].n_pages : largest;
    const uint32_t header[4] = {n_items, n_merge, 0u, 0u};
    std::memcpy(h, header, sizeof header);
    // two copies: the header and the items used, then the entries' first items and the merge list
    unsigned char *w = static_cast<unsigned char *>(workspace);
    const cudaStream_t st = as_stream(stream);
    if (cudaMemcpyAsync(w, h, ws.items_offset() + (size_t)n_items * sizeof(batch_item), cudaMemcpyHostToDevice, st) !=
            cudaSuccess ||
        cudaMemcpyAsync(w + ws.entry_offset(), first, 4u * (E + 1u) + 4u * (size_t)n_merge, cudaMemcpyHostToDevice,
                        st) != cudaSuccess ||
        cudaEventRecord(ev, st) != cudaSuccess)
        return KVC_E_BACKEND;
    plan->n_entries = (uint32_t)E, plan->n_items = n_items, plan->capacity = ws.capacity;
    plan->grid = fixed_grid ? ws.capacity : n_items;
    plan->merge_grid = fixed_grid ? (uint32_t)E * c->group : n_merge * c->group;
    plan->pages_per_item = largest;
    plan->dtype = c->dtype, plan->head_dim = c->head_dim, plan->group = c->group;
    return KVC_OK;
}

kvc_status kvc_cuda_batch_attend(const kvc_cuda_paged *c, const kvc_cuda_batch_plan *plan, const int32_t *page_indptr,
                                 const int32_t *page_ids, kvc_cuda_tensor q, kvc_cuda_tensor out, void *workspace,
                                 void *stream)
{
    return attend_impl(c, plan, page_indptr, page_ids, q, out, workspace, nullptr, stream);
}

kvc_status kvc_cuda_batch_attend_mass(const kvc_cuda_paged *c, const kvc_cuda_batch_plan *plan,
                                      const int32_t *page_indptr, const int32_t *page_ids, kvc_cuda_tensor q,
                                      kvc_cuda_tensor out, void *workspace, float *mass, void *stream)
{
    if (mass == nullptr) return KVC_E_ARG;
    return attend_impl(c, plan, page_indptr, page_ids, q, out, workspace, mass, stream);
}

} // extern "C"

namespace
{

kvc_status attend_impl(const kvc_cuda_paged *c, const kvc_cuda_batch_plan *plan, const int32_t *page_indptr,
                       const int32_t *page_ids, kvc_cuda_tensor q, kvc_cuda_tensor out, void *workspace, float *mass,
                       void *stream)
{
    const kvc_status rc = check_cache(c);
    if (rc != KVC_OK) return rc;
    if (plan == nullptr || page_indptr == nullptr || page_ids == nullptr || workspace == nullptr ||
        ((uintptr_t)workspace % 256u) != 0 || !check_tensor(q) || !check_tensor(out))
        return KVC_E_ARG;
    // the plan must be this cache's: its workspace layout follows (group, head_dim), its kernel the type
    if (plan->dtype != c->dtype || plan->head_dim != c->head_dim || plan->group != c->group) return KVC_E_ARG;
    if (plan->n_entries < 1u || plan->n_entries % c->n_kv_heads != 0 || plan->capacity < 1u ||
        plan->grid > plan->capacity || plan->n_items > plan->capacity || plan->grid < 1u ||
        plan->merge_grid > plan->n_entries * c->group)
        return KVC_E_ARG;
    batch_args a;
    a.pool = static_cast<const unsigned char *>(c->pool);
    a.n_pages = c->n_pages, a.n_kv_heads = c->n_kv_heads, a.group = c->group, a.beta = c->beta;
    a.page_indptr = page_indptr, a.page_ids = page_ids;
    a.q = as_batch(q);
    a.out = out.data, a.out_seq_stride = out.seq_stride, a.out_head_stride = out.head_stride,
    a.out_elem = (uint32_t)out.elem;
    a.ws = static_cast<unsigned char *>(workspace);
    a.capacity = plan->capacity, a.n_entries = plan->n_entries, a.unweighted = c->unweighted;
    dispatch<launch_split>(c->dtype, c->head_dim, a, plan->grid, plan->merge_grid, current_device(), as_stream(stream));
    if (mass != nullptr) {
        const mass_args ma{a, mass};
        dispatch<launch_mass>(c->dtype, c->head_dim, ma, plan->grid, as_stream(stream));
    }
    return cudaGetLastError() == cudaSuccess ? KVC_OK : KVC_E_BACKEND;
}

} // namespace
