// The host side of accel/cuda: argument checks, the split-K plan, the
// launches, and the "cuda" kernel table. Built by nvcc for a GPU or as C++
// against the CPU SIMT runtime (KVC_SIMT_CPU), from this one source.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/attend_split.cuh"
#include "kernels/rows_kernels.cuh"
#include "kvc/kvc_attend.h"
#include "kvc/kvc_cuda.h"

namespace
{

using namespace kvc_cuda;

// the types the device row kernels store and compare (kvc_cuda_store_rows, kvc_cuda_pair_gram)
bool gpu_type(unsigned t) { return t == KVC_DTYPE_F32 || t == KVC_DTYPE_F16 || t == KVC_DTYPE_I8; }
// the types the attend reads: every type the reference reads
bool attend_type(unsigned t) { return gpu_type(t) || t == KVC_DTYPE_Q15 || t == KVC_DTYPE_I4 || t == KVC_DTYPE_KIVI4; }

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

// The table's device scratch, grown on demand (one user at a time).
std::mutex g_scratch_lock;
void *g_scratch = nullptr;
size_t g_scratch_bytes = 0;

bool scratch_at_least(size_t bytes)
{
    if (bytes <= g_scratch_bytes) return true;
    if (g_scratch != nullptr) cudaFree(g_scratch);
    g_scratch = nullptr, g_scratch_bytes = 0;
    if (cudaMalloc(&g_scratch, bytes) != cudaSuccess) return false;
    g_scratch_bytes = bytes;
    return true;
}

// Asked of the runtime once per device: every automatic plan (each attend
// call) needs it.
int multiprocessors()
{
    constexpr int kDevices = 16;
    static std::atomic<int> known[kDevices];
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 1;
    const bool cacheable = dev >= 0 && dev < kDevices;
    if (cacheable && (n = known[dev].load(std::memory_order_relaxed)) > 0) return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) return 1;
    if (cacheable) known[dev].store(n, std::memory_order_relaxed);
    return n;
}

const unsigned char *key_rows(const kvc_segment &s)
{
    return s.dtype == KVC_DTYPE_F32 ? reinterpret_cast<const unsigned char *>(s.keys)
                                    : static_cast<const unsigned char *>(s.keys_q);
}
const unsigned char *value_rows(const kvc_segment &s)
{
    return s.dtype == KVC_DTYPE_F32 ? reinterpret_cast<const unsigned char *>(s.values)
                                    : static_cast<const unsigned char *>(s.values_q);
}

size_t align_up(size_t x) { return (x + 255u) / 256u * 256u; }

// The merge keeps one factor per block in dynamic shared memory.
constexpr uint32_t kMaxBlocks = 8192;

// The split-K plan of a view: segment descriptors, blocks of
// tiles_per_block tiles (none across segments), the causal block.
struct attend_plan {
    attend_args a;
    size_t n_blocks = 0, entries = 0, causal_total = 0, group = 0;
    uint32_t tpb = 0;
    bool wide = false;  // split_kernel's wide configuration (KVC_CUDA_WIDE_*)
    bool quant = false; // a Q15, int4 or KIVI4 segment: split_kernel's QUANT instantiation
};

kvc_status make_plan(const kvc_view *view, size_t n_pos, size_t n_q, size_t causal_segs, uint32_t tiles_per_block,
                     attend_plan &p)
{
    if (view == nullptr) return KVC_E_ARG;
    const size_t d = view->d, dv = view->dv;
    if (d < 1 || d > KVC_MAX_HEAD_DIM || dv < 1 || dv > KVC_MAX_HEAD_DIM || view->n_seg > KVC_VIEW_MAX_SEGMENTS)
        return KVC_E_ARG;
    if (n_pos < 1 || n_pos > KVC_MAX_BATCH_POSITIONS || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return KVC_E_ARG;
    if (causal_segs > view->n_seg || tiles_per_block > 65536u) return KVC_E_ARG;
    if (!(view->beta > 0.0f) || !std::isfinite(view->beta)) return KVC_E_ARG;
    attend_args &a = p.a;
    std::memset(&a, 0, sizeof a);
    a.n_seg = (uint32_t)view->n_seg, a.d = (uint32_t)d, a.dv = (uint32_t)dv, a.beta = view->beta;
    size_t tiles = 0;
    bool all_f32_chunked = true;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment &g = view->seg[s];
        if (g.role != KVC_SET_NUM && g.role != KVC_SET_DEN && g.role != KVC_SET_BOTH) return KVC_E_ARG;
        if (!(g.scale > 0.0) || !std::isfinite(g.scale) || g.n > ((size_t)1 << 31)) return KVC_E_ARG;
        if (g.n > 0 && !attend_type(g.dtype)) return g.dtype < KVC_DTYPE_COUNT ? KVC_E_UNSUPPORTED : KVC_E_ARG;
        const bool kivi = g.dtype == KVC_DTYPE_KIVI4;
        if (g.n > 0 && kivi && g.first >= KVC_KIVI_BLOCK) return KVC_E_ARG;
        if (g.n > 0 && (key_rows(g) == nullptr || ((g.role & KVC_SET_NUM) && value_rows(g) == nullptr)))
            return KVC_E_ARG;
        seg_desc &o = a.seg[s];
        o.k = key_rows(g), o.v = (g.role & KVC_SET_NUM) ? value_rows(g) : nullptr, o.w = g.weights;
        o.ln_scale = (float)std::log(g.scale);
        o.n = (uint32_t)g.n, o.role = g.role, o.dtype = g.dtype;
        const unsigned vt = kvc_segment_value_dtype(g.dtype);
        o.kstride = (uint32_t)(kivi ? KVC_KIVI4_KEY_BLOCK_BYTES(d) : kvc_row_bytes(g.dtype, d));
        o.vstride = (uint32_t)kvc_row_bytes(vt, dv);
        o.first = kivi ? (uint32_t)g.first : 0u;
        o.causal0 = s < causal_segs ? (int32_t)p.causal_total : -1;
        o.entry0 = (uint32_t)p.entries;
        // chunk loads where the rows allow them: 16 bytes of f32/f16 keys, 4
        // int8 or Q15 codes, 8 int4 codes (4 bytes); 4 value columns (16, 8 or
        // 4 bytes, 2 of int4 codes read with 4-byte alignment). KIVI4 key
        // blocks: element loads.
        const uintptr_t ka = (uintptr_t)o.k, va = (uintptr_t)o.v;
        const size_t kc = g.dtype == KVC_DTYPE_F16 || g.dtype == KVC_DTYPE_I4 ? 8u : 4u;
        const size_t kal = g.dtype == KVC_DTYPE_F32 || g.dtype == KVC_DTYPE_F16 ? 16u : 4u;
        const size_t val = vt == KVC_DTYPE_F32 ? 16u : vt == KVC_DTYPE_F16 ? 8u : 4u;
        o.kvec = !kivi && d % kc == 0 && ka % kal == 0 && o.kstride % kal == 0;
        o.vvec = o.v != nullptr && dv % 4u == 0 && va % val == 0 && o.vstride % val == 0;
        if (g.n > 0 && (g.dtype != KVC_DTYPE_F32 || !o.kvec)) all_f32_chunked = false;
        if (g.n > 0 && !gpu_type(g.dtype)) p.quant = true;
        if (s < causal_segs) p.causal_total += g.n;
        p.entries += g.n;
        tiles += (g.n + kTile - 1) / kTile;
    }
    if (causal_segs > 0 && p.causal_total < n_pos) return KVC_E_ARG; // the positions must be in the block
    if (p.entries > ((size_t)1 << 31)) return KVC_E_ARG;
    const size_t Q = n_pos * n_q;
    p.group = Q < (size_t)kMaxQ ? Q : (size_t)kMaxQ;
    // the wide configuration where it was measured faster: f32 rows that every
    // launch scores with 8 lanes per row (score_rows' test, made for the plan)
    p.wide =
        all_f32_chunked && KVC_CUDA_GROUPED_ROWS && p.group <= (size_t)KVC_CUDA_GROUPED_MAX_Q && (d / 4u) % 8u == 0;
    uint32_t tpb = tiles_per_block;
    if (tpb == 0) { // one wave: as many blocks as the launch bounds let every multiprocessor hold
        const size_t per_sm = p.wide    ? KVC_CUDA_WIDE_MIN_BLOCKS
                              : p.quant ? KVC_CUDA_QUANT_MIN_BLOCKS
                                        : KVC_CUDA_MIN_BLOCKS;
        const size_t target = per_sm * (size_t)multiprocessors();
        tpb = (uint32_t)((tiles + target - 1) / target);
        if (tpb < 1) tpb = 1;
    }
    for (;;) {
        p.n_blocks = 0;
        for (size_t s = 0; s < view->n_seg; s++) {
            a.seg[s].block0 = (uint32_t)p.n_blocks;
            p.n_blocks += (view->seg[s].n + (size_t)tpb * kTile - 1) / ((size_t)tpb * kTile);
        }
        if (p.n_blocks <= kMaxBlocks) break;
        if (tiles_per_block != 0) return KVC_E_ARG; // the caller's split needs too many blocks
        tpb *= 2;
    }
    p.tpb = tpb;
    a.tiles_per_block = tpb, a.n_blocks = (uint32_t)p.n_blocks;
    return KVC_OK;
}

// The device scratch of one call: [part][stats][included][q][out][state][mass],
// each 256-byte aligned; the device entry point uses the first three only.
struct scratch_layout {
    size_t part, stats, included, q, out, state, mass, device_only, total;
};

scratch_layout layout(const attend_plan &p, const kvc_view *view, bool host_io, bool state, bool mass)
{
    scratch_layout l;
    const size_t W = view->dv + 2u;
    size_t at = 0;
    l.part = at, at += align_up(p.n_blocks * p.group * W * sizeof(float));
    l.stats = at, at += align_up(p.group * 2u * sizeof(float));
    l.included = at, at += align_up(sizeof(unsigned));
    l.device_only = at;
    l.q = at, at += host_io ? align_up(p.group * view->d * sizeof(float)) : 0u;
    l.out = at, at += host_io ? align_up(p.group * view->dv * sizeof(float)) : 0u;
    l.state = at, at += host_io && state ? align_up(p.group * W * sizeof(float)) : 0u;
    l.mass = at, at += host_io && mass ? align_up(p.entries * sizeof(float)) : 0u;
    l.total = at;
    return l;
}

// Query rows [q0, q0 + nq) of the batch: the visibility of the causal block.
void set_group(attend_plan &p, size_t q0, size_t Q, size_t n_pos, size_t n_q)
{
    attend_args &a = p.a;
    a.nq = (uint32_t)(Q - q0 < (size_t)kMaxQ ? Q - q0 : (size_t)kMaxQ);
    for (uint32_t j = 0; j < a.nq; j++) {
        const size_t pos = (q0 + j) / n_q;
        a.visible[j] = (int32_t)(p.causal_total - (n_pos - 1u - pos)); // unused without a causal block
    }
}

void launch_group(const attend_plan &p, cudaStream_t st)
{
    const attend_args &a = p.a;
    const size_t split_smem = kMaxQ * (a.dv > (uint32_t)kTile ? a.dv : (uint32_t)kTile) * sizeof(float);
    void (*const split)(attend_args) = p.wide    ? split_kernel<KVC_CUDA_WIDE_MIN_BLOCKS, KVC_CUDA_WIDE_UNROLL, false>
                                       : p.quant ? split_kernel<KVC_CUDA_QUANT_MIN_BLOCKS, 1, true>
                                                 : split_kernel<KVC_CUDA_MIN_BLOCKS, 1, false>;
    if (p.n_blocks > 0) KVC_LAUNCH(split, (unsigned)p.n_blocks, kThreads, split_smem, st, a);
    KVC_LAUNCH(merge_kernel, a.nq, kThreads, p.n_blocks * sizeof(float), st, a);
    if (a.mass != nullptr && p.n_blocks > 0)
        KVC_LAUNCH(mass_kernel, (unsigned)p.n_blocks, kThreads, kMaxQ * kTile * sizeof(float), st, a);
}

} // namespace

namespace kvc_cuda
{
// for the batched decode's plan (kvc_cuda_batch.cu)
int device_multiprocessors() { return multiprocessors(); }
} // namespace kvc_cuda

extern "C" {

size_t kvc_cuda_attend_device_scratch_bytes(const kvc_view *view, size_t n_pos, size_t n_q, uint32_t tiles_per_block)
{
    attend_plan p;
    if (make_plan(view, n_pos, n_q, 0, tiles_per_block, p) != KVC_OK) return 0;
    return layout(p, view, false, false, false).total;
}

kvc_status kvc_cuda_attend_device(const kvc_view *view, const float *q, size_t n_pos, size_t n_q, size_t causal_segs,
                                  float *out, uint32_t tiles_per_block, void *scratch, size_t scratch_bytes,
                                  void *stream)
{
    if (q == nullptr || out == nullptr || scratch == nullptr || ((uintptr_t)scratch % 256u) != 0) return KVC_E_ARG;
    attend_plan p;
    const kvc_status rc = make_plan(view, n_pos, n_q, causal_segs, tiles_per_block, p);
    if (rc != KVC_OK) return rc;
    const scratch_layout l = layout(p, view, false, false, false);
    if (scratch_bytes < l.total) return KVC_E_ARG;
    unsigned char *base = static_cast<unsigned char *>(scratch);
    p.a.part = reinterpret_cast<float *>(base + l.part);
    p.a.stats = reinterpret_cast<float *>(base + l.stats);
    p.a.included = nullptr;
    const cudaStream_t st = as_stream(stream);
    const size_t Q = n_pos * n_q;
    for (size_t q0 = 0; q0 < Q; q0 += kMaxQ) {
        set_group(p, q0, Q, n_pos, n_q);
        p.a.q = q + q0 * view->d;
        p.a.out = out + q0 * view->dv;
        launch_group(p, st);
    }
    return cudaGetLastError() == cudaSuccess ? KVC_OK : KVC_E_BACKEND;
}

kvc_status kvc_cuda_attend(const kvc_view *view, const kvc_attend_batch *b, uint32_t tiles_per_block, void *stream,
                           kvc_cuda_attend_info *info)
{
    if (view == nullptr || b == nullptr || b->q == nullptr || b->out == nullptr) return KVC_E_ARG;
    attend_plan p;
    const kvc_status rc = make_plan(view, b->n_pos, b->n_q, b->causal_segs, tiles_per_block, p);
    if (rc != KVC_OK) return rc;
    const size_t d = view->d, dv = view->dv, Q = b->n_pos * b->n_q, W = dv + 2u;
    const scratch_layout l = layout(p, view, true, b->state != nullptr, b->mass != nullptr);

    std::lock_guard<std::mutex> hold(g_scratch_lock);
    if (!scratch_at_least(l.total)) return KVC_E_BACKEND;
    unsigned char *base = static_cast<unsigned char *>(g_scratch);
    attend_args &a = p.a;
    a.part = reinterpret_cast<float *>(base + l.part);
    a.stats = reinterpret_cast<float *>(base + l.stats);
    a.included = reinterpret_cast<unsigned *>(base + l.included);
    a.q = reinterpret_cast<float *>(base + l.q);
    a.out = reinterpret_cast<float *>(base + l.out);
    a.state = b->state != nullptr ? reinterpret_cast<float *>(base + l.state) : nullptr;
    a.mass = b->mass != nullptr ? reinterpret_cast<float *>(base + l.mass) : nullptr;
    const cudaStream_t st = as_stream(stream);

    // host staging only for what comes back converted (state) or added (mass)
    std::vector<float> host(b->mass != nullptr    ? (p.entries > p.group * W ? p.entries : p.group * W)
                            : b->state != nullptr ? p.group * W
                                                  : 0u);
    uint32_t launches = 0;
    bool ok = cudaMemsetAsync(a.included, 0, sizeof(unsigned), st) == cudaSuccess;
    for (size_t q0 = 0; ok && q0 < Q; q0 += kMaxQ) {
        set_group(p, q0, Q, b->n_pos, b->n_q);
        ok = cudaMemcpyAsync(const_cast<float *>(a.q), b->q + q0 * d, (size_t)a.nq * d * sizeof(float),
                             cudaMemcpyHostToDevice, st) == cudaSuccess;
        if (!ok) break;
        launches++;
        launch_group(p, st);
        ok = cudaGetLastError() == cudaSuccess &&
             cudaMemcpyAsync(b->out + q0 * dv, a.out, (size_t)a.nq * dv * sizeof(float), cudaMemcpyDeviceToHost, st) ==
                 cudaSuccess;
        if (ok && b->state != nullptr) {
            ok = cudaMemcpyAsync(host.data(), a.state, (size_t)a.nq * W * sizeof(float), cudaMemcpyDeviceToHost, st) ==
                     cudaSuccess &&
                 cudaStreamSynchronize(st) == cudaSuccess;
            for (uint32_t j = 0; ok && j < a.nq; j++) {
                double *o = b->state + (q0 + j) * KVC_ATTEND_STATE(dv);
                const float *h = host.data() + (size_t)j * W;
                o[0] = h[0] == -INFINITY ? -INFINITY : (double)h[0];
                for (size_t c = 0; c < dv + 1u; c++) o[1 + c] = (double)h[1 + c];
            }
        }
        if (ok && b->mass != nullptr && p.entries > 0) {
            ok = cudaMemcpyAsync(host.data(), a.mass, p.entries * sizeof(float), cudaMemcpyDeviceToHost, st) ==
                     cudaSuccess &&
                 cudaStreamSynchronize(st) == cudaSuccess;
            // added to what is there, as kvc_attend_batch documents (0 for excluded entries)
            for (size_t e = 0; ok && e < p.entries; e++) b->mass[e] += (double)host[e];
        }
    }
    unsigned counted = 0;
    ok = ok && cudaMemcpyAsync(&counted, a.included, sizeof counted, cudaMemcpyDeviceToHost, st) == cudaSuccess &&
         cudaStreamSynchronize(st) == cudaSuccess;
    if (!ok) return KVC_E_BACKEND;
    if (info != nullptr)
        info->n_blocks = (uint32_t)p.n_blocks, info->tiles_per_block = p.tpb, info->launches = launches,
        info->included = counted;
    return KVC_OK;
}

kvc_status kvc_cuda_store_rows(unsigned dtype, void *dst, const float *x, size_t n, size_t dim, void *stream)
{
    if (dim < 1 || dim > KVC_MAX_HEAD_DIM || n > ((size_t)1 << 31) || (n > 0 && (dst == nullptr || x == nullptr)))
        return KVC_E_ARG;
    if (!gpu_type(dtype)) return dtype < KVC_DTYPE_COUNT ? KVC_E_UNSUPPORTED : KVC_E_ARG;
    if (n == 0) return KVC_OK;
    store_args a{x,     static_cast<unsigned char *>(dst),  (uint32_t)n, (uint32_t)dim,
                 dtype, (uint32_t)kvc_row_bytes(dtype, dim)};
    const cudaStream_t st = as_stream(stream);
    KVC_LAUNCH(store_kernel, (unsigned)((n + kWarps - 1) / kWarps), kThreads, 0, st, a);
    return cudaGetLastError() == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess ? KVC_OK : KVC_E_BACKEND;
}

kvc_status kvc_cuda_pair_gram(unsigned dtype, const void *a_rows, size_t na, const void *b_rows, size_t nb, size_t dim,
                              const float *mu, float *g, void *stream)
{
    if (dim < 1 || dim > KVC_MAX_HEAD_DIM || na > 65535u || nb > 65535u) return KVC_E_ARG;
    if (na > 0 && nb > 0 && (a_rows == nullptr || b_rows == nullptr || g == nullptr)) return KVC_E_ARG;
    if (!gpu_type(dtype)) return dtype < KVC_DTYPE_COUNT ? KVC_E_UNSUPPORTED : KVC_E_ARG;
    if (na == 0 || nb == 0) return KVC_OK;
    gram_args a{static_cast<const unsigned char *>(a_rows),
                static_cast<const unsigned char *>(b_rows),
                mu,
                g,
                (uint32_t)na,
                (uint32_t)nb,
                (uint32_t)dim,
                dtype,
                (uint32_t)kvc_row_bytes(dtype, dim)};
    const cudaStream_t st = as_stream(stream);
    KVC_LAUNCH(pair_gram_kernel, dim3((unsigned)((nb + kWarps - 1) / kWarps), (unsigned)na), kThreads, 0, st, a);
    return cudaGetLastError() == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess ? KVC_OK : KVC_E_BACKEND;
}

void *kvc_cuda_alloc_shared(size_t bytes)
{
    void *p = nullptr;
    if (bytes == 0 || cudaMallocManaged(&p, bytes, cudaMemAttachGlobal) != cudaSuccess) return nullptr;
    return p;
}

void kvc_cuda_free_shared(void *p)
{
    if (p != nullptr) cudaFree(p);
}

void kvc_cuda_release(void)
{
    std::lock_guard<std::mutex> hold(g_scratch_lock);
    if (g_scratch != nullptr) cudaFree(g_scratch);
    g_scratch = nullptr, g_scratch_bytes = 0;
}

int kvc_cuda_is_cpu_runtime(void)
{
#if defined(KVC_SIMT_CPU)
    return 1;
#else
    return 0;
#endif
}

} // extern "C"

// ---- the kernel table ----
namespace
{

// The kernels sum in f32, which overflows where the reference's doubles do
// not (values near FLT_MAX / n, scores past FLT_MAX) and its denominator may
// underflow where theirs holds (merge_kernel marks such a query NaN); exact attention is a
// convex combination of finite values, so a batch whose results are not all
// finite is answered by the reference instead (kvc_attend.h: only views whose
// N and D sets differ may give KVC_E_RANGE). The table is synchronous and
// its memory host-readable, so the check costs one pass over the outputs;
// the mass it adds is kept aside first and put back for the rerun. `work`
// NULL (the one-position entry, which has none): taken for the rerun only.
kvc_status attend_or_reference(const kvc_view *view, const kvc_attend_batch *b, void *work, size_t work_bytes)
{
    if (view == nullptr || b == nullptr || b->out == nullptr) return KVC_E_ARG;
    size_t entries = 0;
    for (size_t s = 0; s < view->n_seg && s < KVC_VIEW_MAX_SEGMENTS; s++) entries += view->seg[s].n;
    std::vector<double> mass_before(b->mass != nullptr ? entries : 0u);
    if (b->mass != nullptr) std::memcpy(mass_before.data(), b->mass, entries * sizeof(double));
    const kvc_status rc = kvc_cuda_attend(view, b, 0, nullptr, nullptr);
    if (rc != KVC_OK) return rc;
    const size_t Q = b->n_pos * b->n_q;
    bool finite = kvc_all_finite(b->out, Q * view->dv) != 0;
    for (size_t i = 0; finite && b->state != nullptr && i < Q * KVC_ATTEND_STATE(view->dv); i++)
        finite = i % KVC_ATTEND_STATE(view->dv) == 0 || std::isfinite(b->state[i]); // [0] is the max, -inf when empty
    for (size_t e = 0; finite && b->mass != nullptr && e < entries; e++) finite = std::isfinite(b->mass[e]);
    if (finite) return KVC_OK;
    if (b->mass != nullptr) std::memcpy(b->mass, mass_before.data(), entries * sizeof(double));
    const kvc_kernels *ref = kvc_kernels_ref();
    std::vector<double> own;
    if (work == nullptr) {
        own.resize(kvc_attend_work_bytes(b->n_pos, b->n_q, view->dv) / sizeof(double) + 1);
        work = own.data(), work_bytes = own.size() * sizeof(double);
    }
    return ref->attend_batch(ref, view, b, work, work_bytes);
}

// the same checks and workspace contract as kvc_k_attend_batch__ref, so the
// table is a drop-in for the reference one
kvc_status table_attend_batch(const kvc_kernels *kern, const kvc_view *view, const kvc_attend_batch *b, void *work,
                              size_t work_bytes)
{
    if (kern == nullptr || view == nullptr || b == nullptr || work == nullptr) return KVC_E_ARG;
    if (b->n_pos > KVC_MAX_BATCH_POSITIONS || b->n_q > KVC_MAX_QUERY_HEADS || view->dv > KVC_MAX_HEAD_DIM)
        return KVC_E_ARG;
    if (((uintptr_t)work % sizeof(double)) != 0 || work_bytes < kvc_attend_work_bytes(b->n_pos, b->n_q, view->dv))
        return KVC_E_ARG;
    for (size_t s = 0; s < view->n_seg && s < KVC_VIEW_MAX_SEGMENTS; s++)
        if (view->seg[s].n > 0 && !kvc_kernels_support(kern, view->seg[s].dtype)) return KVC_E_ARG;
    return attend_or_reference(view, b, work, work_bytes);
}

kvc_status table_attend_f32(const kvc_view *view, const float *q, size_t n_q, float *out)
{
    const kvc_attend_batch b = {q, 1, n_q, 0, out, nullptr, nullptr};
    return attend_or_reference(view, &b, nullptr, 0);
}

kvc_kernels make_table()
{
    kvc_kernels t = *kvc_kernels_ref();
    t.name = "cuda";
    t.needs = 0;
    t.caps = KVC_CAP_F32 | KVC_CAP_F16 | KVC_CAP_I8 | KVC_CAP_Q15 | KVC_CAP_I4 | KVC_CAP_KIVI4 | KVC_CAP_BATCH |
             KVC_CAP_MASS;
    t.attend_f32 = table_attend_f32;
    t.attend_batch = table_attend_batch;
    for (unsigned d = 0; d < KVC_DTYPE_COUNT; d++)
        if (!attend_type(d)) std::memset(&t.rows[d], 0, sizeof t.rows[d]);
    return t;
}

} // namespace

extern "C" const kvc_kernels *kvc_kernels_cuda(void)
{
    static const kvc_kernels table = make_table();
#if !defined(KVC_SIMT_CPU)
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return nullptr;
#endif
    return &table;
}
