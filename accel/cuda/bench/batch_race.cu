// The batched decode (kvc_cuda_batch.h) at serving shapes on a GPU, for
// bench/gpu_race.sh, which runs PyTorch's SDPA on the same shapes in the
// same session and joins the two:
//   read     a plain streaming read (float4 loads, sum) over 4 GiB: what the GPU gives a read-only pass
//   single   one sequence, one kv head, 1 and 8 query heads, 1M and 16M rows
//   llama    Llama-3-8B's layer (32 query / 8 kv heads, d = 128), B in {1, 16, 64}, n in {4k, 32k, 128k}
// each in every page type (f16, int8, int4 in groups of 32, int4-row), and "sink-window int8 at 25%": the
// recommended compressed cache (docs/quality.md) holding as many int8 rows
// as fit in 25% of the f16 exact cache's bytes (pages and their metadata
// counted). One attend = kvc_cuda_batch_attend (split, and merge where an
// entry has several items) on queries and outputs in f16, timed as a cold
// decode step: the L2 flushed before every call, each call a CUDA graph
// replay between two events (bench_support.cuh, flushed_timer), the median
// of 5..200 calls; the plan's host time is printed beside it.
// The largest error against the reference kernel (double, CPU), max |out - ref| / max |ref|,
// at "tiny" (B = 4, 64 rows: one-page entries, written by their split block)
// and at llama B = 1, n = 4k (entries split over two-page items and merged), per row type.
// CSV on stdout: kvc,<shape>,<rows>,B,n,q_heads,kv_heads,us,kv_bytes,moved_bytes,TB_per_s,of_read,plan_us,err,
//   items,pages_per_item,timing -- kv_bytes: K and V rows as stored; moved_bytes: what the kernel reads (whole
//   pages of rows; the caches are declared unweighted, so no log-weights or roles); TB_per_s, of_read: of moved_bytes.
// usage: batch_race [quick|ncu]   (ncu: one untimed attend per type at single 1M, G = 8). Exits 77 without a GPU.
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_fp16.h>

#include "kvc/kvc.h"
#include "kvc/kvc_cuda_batch.h"
#include "bench_support.cuh"
#include "kernels/batch_layout.cuh"
#include "kvc_cuda_compat.h"

namespace
{

__device__ inline uint32_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

// Fills pages with valid rows in the page layout (kvc_cuda_batch.h), in
// three coalesced passes: every 4-byte word from a hash (f16 halves of
// magnitude in [1/2, 1), any int8 codes, any int4 nibbles); then each row's
// int8 scale (the scales' array) or int4 group headers; then log-weight 0 and role 3 per row.
__global__ void fill_words(uint32_t *pool, size_t n_words, unsigned dtype)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n_words; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = mix(i * 0x9e3779b97f4a7c15ull + 1u);
        pool[i] = dtype == KVC_DTYPE_F16 ? (h & 0x83ff83ffu) | 0x38003800u : h;
    }
}

__global__ void fill_headers(unsigned char *pool, size_t n_pages, size_t page_bytes, unsigned dtype, uint32_t d)
{
    const uint32_t groups = kvc_cuda::i4_groups((int)dtype, d);
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < n_pages * 128u;
         r += (size_t)gridDim.x * blockDim.x) {
        unsigned char *page = pool + (r / 128u) * page_bytes;
        const size_t i = r % 128u; // keys 0..63, values 64..127: the scales' and headers' arrays have that order
        unsigned char *scales = page + kvc_cuda::page_scale_offset((int)dtype, d);
        if (dtype == KVC_DTYPE_I8) reinterpret_cast<float *>(scales)[i] = 1.5f / 127.0f;
        if (dtype == KVC_DTYPE_I4 || dtype == KVC_CUDA_DTYPE_I4_ROW)
            for (uint32_t g = 0; g < groups; g++) {
                reinterpret_cast<__half *>(scales)[2u * (i * groups + g)] = __float2half_rn(0.2f);
                reinterpret_cast<__half *>(scales)[2u * (i * groups + g) + 1u] = __float2half_rn(-1.5f);
            }
        if (i < 64u) {
            reinterpret_cast<float *>(page + kvc_cuda::page_lw_offset((int)dtype, d))[i] = 0.0f;
            page[kvc_cuda::page_role_offset((int)dtype, d) + i] = 3u;
        }
    }
}

__global__ void fill_half(__half *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2half_rn(((float)(mix(i * 2654435761ull) & 0xffffu) / 65536.0f - 0.5f) * 4.0f);
}

double g_read_bw = 0;
flushed_timer *g_timer = nullptr;
bool g_ncu = false; // one untimed attend per shape, for a profiler

struct shape {
    std::string name;
    unsigned dtype;
    size_t B, n, Hq, Hkv;
    bool compressed; // sink-window int8 at 25% of the f16 exact cache's bytes
};

// The largest error against the reference kernel over every entry and query head.
double reference_error(const kvc_cuda_paged &c, const shape &s, size_t rows, const std::vector<int32_t> &ids,
                       const __half *q_dev, const __half *out_dev)
{
    const size_t d = c.head_dim, G = c.group, E = s.B * s.Hkv, PB = kvc_cuda_page_bytes(c.dtype, d);
    // the core's row layout for its types (the reference decodes the bytes); f32 rows for int4-row
    const bool as_f32 = c.dtype >= KVC_DTYPE_COUNT;
    const size_t pages = (rows + 63u) / 64u, row_bytes = as_f32 ? 4u * d : (size_t)kvc_row_bytes(c.dtype, d);
    std::vector<unsigned char> pool(c.n_pages * PB);
    CK(cudaMemcpy(pool.data(), c.pool, pool.size(), cudaMemcpyDeviceToHost));
    std::vector<__half> qh(s.B * s.Hq * d), oh(s.B * s.Hq * d);
    CK(cudaMemcpy(qh.data(), q_dev, qh.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(oh.data(), out_dev, oh.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0, top = 0;
    std::vector<unsigned char> K(rows * row_bytes), V(rows * row_bytes);
    std::vector<float> q(G * d), ref(G * d);
    std::vector<double> work(kvc_attend_work_bytes(1, G, d) / sizeof(double) + 1);
    for (size_t e = 0; e < E; e++) {
        for (size_t i = 0; i < rows; i++) {
            const unsigned char *page = pool.data() + (size_t)ids[e * pages + i / 64u] * PB;
            const uint32_t r = (uint32_t)(i % 64u);
            if (as_f32) {
                kvc_cuda::page_row_to_f32((int)c.dtype, (uint32_t)d, page, r, false,
                                          reinterpret_cast<float *>(&K[i * row_bytes]));
                kvc_cuda::page_row_to_f32((int)c.dtype, (uint32_t)d, page, r, true,
                                          reinterpret_cast<float *>(&V[i * row_bytes]));
            } else {
                kvc_cuda::page_row_to_core((int)c.dtype, (uint32_t)d, page, r, false, &K[i * row_bytes]);
                kvc_cuda::page_row_to_core((int)c.dtype, (uint32_t)d, page, r, true, &V[i * row_bytes]);
            }
        }
        kvc_view v;
        std::memset(&v, 0, sizeof v);
        v.d = v.dv = d, v.beta = c.beta, v.n_seg = 1;
        v.seg[0].n = rows, v.seg[0].role = KVC_SET_BOTH, v.seg[0].scale = 1.0;
        v.seg[0].dtype = as_f32 ? (unsigned)KVC_DTYPE_F32 : c.dtype;
        if (as_f32)
            v.seg[0].keys = reinterpret_cast<const float *>(K.data()),
            v.seg[0].values = reinterpret_cast<const float *>(V.data());
        else
            v.seg[0].keys_q = K.data(), v.seg[0].values_q = V.data();
        for (size_t i = 0; i < G * d; i++) q[i] = __half2float(qh[e * G * d + i]);
        kvc_attend_batch b = {q.data(), 1, G, 0, ref.data(), nullptr, nullptr};
        if (kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &v, &b, work.data(), work.size() * 8) != KVC_OK)
            return INFINITY;
        for (size_t i = 0; i < G * d; i++) {
            worst = std::fmax(worst, std::fabs((double)__half2float(oh[e * G * d + i]) - ref[i]));
            top = std::fmax(top, std::fabs((double)ref[i]));
        }
    }
    return top > 0 ? worst / top : worst;
}

void run(const shape &s, bool with_error)
{
    const size_t d = 128, G = s.Hq / s.Hkv, E = s.B * s.Hkv;
    const unsigned t = s.compressed ? (unsigned)KVC_DTYPE_I8 : s.dtype;
    const size_t PB = kvc_cuda_page_bytes(t, d);
    size_t rows = s.n;
    if (s.compressed) { // whole pages within 25% of the f16 exact cache's bytes (2 * 2 d bytes a token)
        const size_t budget = s.n * 4u * d / 4u;
        rows = budget / PB * 64u;
    }
    const size_t pages = (rows + 63u) / 64u, n_pages = E * pages;
    kvc_cuda_paged c = {
        t, (uint32_t)d, (uint32_t)s.Hkv, (uint32_t)G, (float)(1.0 / std::sqrt((double)d)), nullptr, (uint32_t)n_pages,
        1u}; // unweighted: every row weight 1, role both
    CK(cudaMalloc(&c.pool, n_pages * PB));
    fill_words<<<4096, 256>>>(static_cast<uint32_t *>(c.pool), n_pages * PB / 4u, t);
    fill_headers<<<4096, 128>>>(static_cast<unsigned char *>(c.pool), n_pages, PB, t, (uint32_t)d);
    std::vector<int32_t> indptr(E + 1), ids(n_pages), lens(E, (int32_t)rows);
    for (size_t e = 0; e <= E; e++) indptr[e] = (int32_t)(e * pages);
    for (size_t i = 0; i < n_pages; i++) ids[i] = (int32_t)i;
    int32_t *indptr_d = nullptr, *ids_d = nullptr;
    CK(cudaMalloc(reinterpret_cast<void **>(&indptr_d), indptr.size() * 4));
    CK(cudaMalloc(reinterpret_cast<void **>(&ids_d), ids.size() * 4));
    CK(cudaMemcpy(indptr_d, indptr.data(), indptr.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ids_d, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    __half *q = nullptr, *out = nullptr;
    CK(cudaMalloc(reinterpret_cast<void **>(&q), s.B * s.Hq * d * 2));
    CK(cudaMalloc(reinterpret_cast<void **>(&out), s.B * s.Hq * d * 2));
    fill_half<<<256, 256>>>(q, s.B * s.Hq * d);
    CK(cudaDeviceSynchronize()); // the timer's stream does not wait for the legacy default stream
    const size_t wsb = kvc_cuda_batch_workspace_bytes(&c, s.B, n_pages);
    const size_t hb = kvc_cuda_batch_plan_host_bytes(&c, s.B, n_pages);
    void *ws = nullptr, *host = nullptr;
    CK(cudaMalloc(&ws, wsb));
    CK(cudaMallocHost(&host, hb));
    kvc_cuda_batch_plan plan;
    const auto p0 = std::chrono::steady_clock::now();
    if (kvc_cuda_batch_plan_step(&c, s.B, lens.data(), n_pages, 0, host, hb, ws, wsb, g_timer->st, &plan) != KVC_OK) {
        std::printf("plan refused for %s\n", s.name.c_str());
        std::exit(1);
    }
    const double plan_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - p0).count();
    const kvc_cuda_tensor qt = {q, KVC_CUDA_F16, (int64_t)(s.Hq * d), (int64_t)d};
    const kvc_cuda_tensor ot = {out, KVC_CUDA_F16, (int64_t)(s.Hq * d), (int64_t)d};
    auto attend = [&](cudaStream_t st) {
        if (kvc_cuda_batch_attend(&c, &plan, indptr_d, ids_d, qt, ot, ws, st) != KVC_OK) {
            std::printf("attend failed for %s\n", s.name.c_str());
            std::exit(1);
        }
    };
    const char *how = "-";
    double us = NAN;
    if (g_ncu) {
        attend(g_timer->st);
        CK(cudaStreamSynchronize(g_timer->st));
    } else {
        us = g_timer->time_us(attend, &how);
    }
    // bytes of K and V as stored (row bytes), and bytes the kernel reads (the pages' rows; their weights and
    // roles too for a weighted cache, which these unweighted caches -- exact and sink-window -- are not)
    const double row_b = t == KVC_CUDA_DTYPE_I4_ROW ? d / 2.0 + 4.0 : (double)kvc_row_bytes(t, d);
    const double kv_bytes = (double)E * (double)rows * 2.0 * row_b;
    const double moved =
        (double)n_pages * (c.unweighted ? (double)kvc_cuda::page_lw_offset((int)t, (uint32_t)d) : (double)PB);
    const double err = with_error ? reference_error(c, s, rows, ids, q, out) : NAN;
    std::printf("kvc,%s,%s,%zu,%zu,%zu,%zu,%.2f,%.0f,%.0f,%.4f,%.4f,%.1f,%.3g,%u,%u,%s\n", s.name.c_str(),
                s.compressed                 ? "sink-window-int8-25pct"
                : t == KVC_CUDA_DTYPE_I4_ROW ? "int4-row"
                                             : kvc_dtype_name((kvc_dtype)t),
                s.B, s.n, s.Hq, s.Hkv, us, kv_bytes, moved, moved / (us * 1e-6) / 1e12, moved / (us * 1e-6) / g_read_bw,
                plan_us, err, plan.n_items, plan.pages_per_item, how);
    std::fflush(stdout);
    CK(cudaFree(c.pool));
    CK(cudaFree(indptr_d));
    CK(cudaFree(ids_d));
    CK(cudaFree(q));
    CK(cudaFree(out));
    CK(cudaFree(ws));
    CK(cudaFreeHost(host));
}

} // namespace

int main(int argc, char **argv)
{
    if (!bench_has_gpu()) return 77;
    const std::string mode = argc > 1 ? argv[1] : "";
    const bool quick = mode == "quick";
    g_ncu = mode == "ncu";
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    flushed_timer timer;
    g_timer = &timer;
    // every page type the batch kernels have (int4 in groups of 32, and in one group per row: the 0.30x goal's)
    std::vector<unsigned> types;
    for (unsigned t = 0; t < 64; t++)
        if (kvc_cuda_page_bytes(t, 128) > 0) types.push_back(t);
    if (g_ncu) { // one launch pair per type on one sequence of 1M rows, 8 query heads
        for (unsigned t : types) run(shape{"single", t, 1, (size_t)1 << 20, 8, 1, false}, false);
        return 0;
    }
    g_read_bw = read_kernel_bandwidth((size_t)4 << 30, 10, 4);
    const double nominal = nominal_bandwidth(prop.name);
    std::printf("# device %s, nominal %.2f TB/s, read kernel %.3f TB/s, L2 %d MiB flushed before every timed call\n",
                prop.name, nominal / 1e12, g_read_bw / 1e12, prop.l2CacheSize >> 20);
    std::printf("engine,shape,rows,B,n,q_heads,kv_heads,us,kv_bytes,moved_bytes,TB_per_s,of_read,plan_us,err,items,"
                "pages_per_item,timing\n");
    std::printf("read,read-kernel,-,-,-,-,-,-,-,-,%.4f,1,-,-,-,-,-\n", g_read_bw / 1e12);
    // the error check at one-page entries (every item alone, no merge) before the timed shapes
    for (unsigned t : types) run(shape{"tiny", t, 4, 64, 32, 8, false}, true);
    for (size_t n : {(size_t)1 << 20, (size_t)1 << 24})
        for (size_t hq : {1u, 8u})
            for (unsigned t : types) {
                if (quick && n > ((size_t)1 << 20)) continue;
                run(shape{"single", t, 1, n, hq, 1, false}, false);
            }
    for (size_t B : {1u, 16u, 64u})
        for (size_t n : {4096u, 32768u, 131072u}) {
            if (quick && (B > 16u || n > 32768u)) continue;
            // the error check at B = 1, n = 4k: every entry split over items of two pages and merged
            for (unsigned t : types) run(shape{"llama3-8b", t, B, n, 32, 8, false}, B == 1 && n == 4096);
            run(shape{"llama3-8b", KVC_DTYPE_I8, B, n, 32, 8, true}, B == 1 && n == 4096);
        }
    return 0;
}
