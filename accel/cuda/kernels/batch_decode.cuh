// The server decode step over a paged cache (include/kvc/kvc_cuda_batch.h),
// one source for nvcc and for the CPU SIMT runtime:
//
//   batch_split_kernel   one block (4 warps) per work item: a run of whole
//                        pages of one entry (sequence, kv head). The entry's
//                        query-head group is the M side of m16n8k16 tensor-core
//                        tiles (rows >= group are zero). Each page lands in
//                        shared memory through cp.async while the previous one
//                        is computed (two buffers). Warp w owns rows 16w..16w+15
//                        of a page: S = Q K^T on tensor cores, the online
//                        softmax in registers (the score tile's C fragment is
//                        the probability tile's A fragment, as in
//                        FlashAttention-2), O += P V on tensor cores. The four
//                        warps' states are merged through shared memory into
//                        the item's state {m, l, acc[dv]} per query row.
//   batch_merge_kernel   one block per entry: the exact merge of its items'
//                        states (as merge_kernel), written as f32, f16 or bf16.
//   batch_append_kernel  one warp per entry: the step's k and v, quantised
//                        into the entry's slot (f16, int8, int4 row layouts of
//                        the core), log-weight 0, role both.
//   batch_set_rows_kernel one thread per edit: a row's log-weight and role.
//   batch_put_rows_kernel one thread per row: a row of the core's codes into a page.
//   batch_mass_kernel    one block per work item: each row's attention mass (optional third launch).
//
// Row types: f16 (keys and values as they are); int8 (the exact codes as
// f16, the key scale folded into the score, the value scale into the
// probabilities: P'_n = P_n s_n / s_max over the warp's 16 rows, and
// O += s_max (P' codes)); int4 (min + nibble * scale dequantised to f16 in
// registers). Queries: q beta / sigma rounded to f16, sigma a power of two
// per query row with max |q beta| / sigma in (1/2, 1], x = sigma S + log w.
//
// Bugs 9..11 of the test matrix (a wrong fragment index, a missing cp.async
// wait, a page-table off-by-one) are compiled in only when KVC_BUG_MATRIX is
// set (injected_bug.cuh); the library never sets it.
#ifndef KVC_CUDA_BATCH_DECODE_CUH
#define KVC_CUDA_BATCH_DECODE_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cp_async.cuh"
#include "dequant.cuh"
#include "injected_bug.cuh"
#include "ldmatrix.cuh"
#include "kvc_cuda_compat.h"
#include "batch_layout.cuh"
#include "mma_f16.cuh"

namespace kvc_cuda
{

struct batch_tensor {
    const void *data;
    int64_t seq_stride, head_stride;
    uint32_t elem;
};

struct batch_args {
    const unsigned char *pool;
    uint32_t n_pages, n_kv_heads, group;
    float beta;
    const int32_t *page_indptr, *page_ids;
    batch_tensor q;
    void *out;
    int64_t out_seq_stride, out_head_stride;
    uint32_t out_elem;
    unsigned char *ws;
    uint32_t capacity, n_entries;
    uint32_t unweighted; // every row weight 1, role both: the pages' log-weights and roles are not read
};

constexpr unsigned kLanes = 0xffffffffu;
constexpr float kLog2e = 1.44269504088896340736f; // the states' maxima are in log2 units: m2 = m log2 e

__device__ inline float warp_max32(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kLanes, v, o));
    return v;
}

__device__ inline float load_elem(const void *p, size_t i, uint32_t elem)
{
    if (elem == EL_F32) return static_cast<const float *>(p)[i];
    const uint16_t h = static_cast<const uint16_t *>(p)[i];
    if (elem == EL_F16) return __half2float(__ushort_as_half(h));
    return __uint_as_float((uint32_t)h << 16); // bf16: the high half of an f32
}

__device__ inline void store_elem(void *p, size_t i, uint32_t elem, float x)
{
    if (elem == EL_F32) {
        static_cast<float *>(p)[i] = x;
    } else if (elem == EL_F16) {
        static_cast<__half *>(p)[i] = __float2half_rn(x);
    } else { // bf16, round to nearest even (NaN kept quiet)
        const uint32_t b = __float_as_uint(x);
        const uint32_t r = (b & 0x7fffffffu) > 0x7f800000u ? (b | 0x00400000u) : b + 0x7fffu + ((b >> 16) & 1u);
        static_cast<uint16_t *>(p)[i] = (uint16_t)(r >> 16);
    }
}

__device__ inline uint32_t pack_f32(float lo, float hi)
{
    return kvc_mma_pack(__float2half_rn(lo), __float2half_rn(hi));
}

// Pages land in shared memory swizzled, so that the lanes of one load read
// eight different 16-byte bank groups where rows at their global stride
// would share them (rows of 128 or 256 bytes: 8-way conflicts):
//   f16   16-byte chunk c of K or V row r -> chunk c ^ (r & 7) of the row
//         (an ldmatrix tile: 8 consecutive rows, one chunk column);
//   int8  K code row r (d bytes) -> chunk c ^ i8_key_sw(r), for the 8 rows a
//         score fragment reads (rows 4(g/2) + (g%2) + 2j: see the kernel);
//         V column col (64 bytes) -> chunk c ^ ((col / 2) & 3), for the 8
//         columns a value fragment reads;
//   int4  K nibble row r (d / 2 bytes: 2 or 4 chunks, so 4 or 2 rows share a
//         128-byte line) -> its chunk's place in the line XOR i4_key_sw(r),
//         for the 8 rows a score fragment reads (the int8 rows);
//         V column pair p (64 bytes) as an int8 column.
// The scales, log-weights and roles after the rows are copied as they are.
template <uint32_t D> __device__ inline uint32_t i8_key_sw(uint32_t r)
{
    return D == 128u ? (r & 1u) | ((r >> 1) & 6u) : (r >> 2) & 3u;
}
__device__ inline uint32_t i8_col_sw(uint32_t col) { return (col >> 1) & 3u; }
template <uint32_t D> __device__ inline uint32_t i4_key_sw(uint32_t r)
{
    return D == 128u ? (r >> 2) & 3u : (((r >> 2) & 1u) << 2) | ((r >> 3) & 1u);
}
// int4 K block: where 16-byte unit u (of row u / (d / 32)) lands: its place within its 128-byte line permuted
template <uint32_t D> __device__ inline uint32_t i4_key_unit(uint32_t u)
{
    return u / 8u * 8u + ((u % 8u) ^ i4_key_sw<D>(u / (D / 32u)));
}

template <int DT, uint32_t D> __device__ inline uint32_t swizzled_chunk(uint32_t i)
{
    constexpr uint32_t cpr = page_row_bytes(DT, D) / 16u; // chunks per row (f16: 8 or 16; int8: 4 or 8)
    if (DT == BT_F16 && i < 2u * kPageRows * cpr) {
        const uint32_t row = i / cpr;
        return row * cpr + ((i % cpr) ^ (row & 7u));
    }
    if (DT == BT_I8 && i < kPageRows * cpr) {
        const uint32_t row = i / cpr;
        return row * cpr + ((i % cpr) ^ i8_key_sw<D>(row));
    }
    if (is_int4(DT) && i < kPageRows * cpr) return i4_key_unit<D>(i);
    if (DT != BT_F16 && i >= kPageRows * cpr && i < 2u * kPageRows * cpr) { // 64-byte value columns (int4: pairs)
        const uint32_t k = i - kPageRows * cpr, col = k / 4u;
        return kPageRows * cpr + col * 4u + ((k % 4u) ^ i8_col_sw(col));
    }
    return i;
}

// int4: the eight nibbles at bytes 4t .. 4t + 3 of unit c of key row r (dims 32 c + 8t .. 32 c + 8t + 7).
template <uint32_t D>
__device__ inline uint32_t i4_key_word(const unsigned char *page, uint32_t r, uint32_t c, uint32_t t)
{
    return *reinterpret_cast<const uint32_t *>(page + 16u * i4_key_unit<D>(r * (D / 32u) + c) + 4u * t);
}
// The int4 conversion's subtrahend (the bug matrix's row 16 subtracts 1032, a symmetric int4's offset).
__device__ inline float i4_magic()
{
#if KVC_BUG_MATRIX
    if (kvc_injected_bug == 16) return kI4Magic + 8.0f;
#endif
    return kI4Magic;
}

// A group header {f16 scale, f16 minimum} as two floats.
__device__ inline float2 i4_header(const unsigned char *h)
{
    const uint32_t w = *reinterpret_cast<const uint32_t *>(h);
    return make_float2(__half2float(__ushort_as_half((unsigned short)(w & 0xffffu))),
                       __half2float(__ushort_as_half((unsigned short)(w >> 16))));
}

// int8: the four codes at bytes 4t .. 4t + 3 of chunk c of key row r.
template <uint32_t D>
__device__ inline uint32_t i8_key_word(const unsigned char *page, uint32_t r, uint32_t c, uint32_t t)
{
    return *reinterpret_cast<const uint32_t *>(page + r * D + 16u * (c ^ i8_key_sw<D>(r)) + 4u * t);
}
// int8 and int4: the four rows' bytes 16c + 4t .. 16c + 4t + 3 of 64-byte value column col (int8: one column
// of codes; int4: a column pair), rows 16c + 4t ..
template <int DT, uint32_t D>
__device__ inline uint32_t value_column_word(const unsigned char *page, uint32_t col, uint32_t c, uint32_t t)
{
    return *reinterpret_cast<const uint32_t *>(page + page_v_offset(DT, D) + col * kPageRows +
                                               16u * (c ^ i8_col_sw(col)) + 4u * t);
}

// The int8 conversion's subtrahend (the bug matrix's row 15 forgets the 128).
__device__ inline float i8_magic()
{
#if KVC_BUG_MATRIX
    if (kvc_injected_bug == 15) return kI8Magic - 128.0f; // the sign flip's 128 forgotten
#endif
    return kI8Magic;
}

// The byte offset, in a swizzled f16 page, of the 16-byte chunk c of row r (K rows 0..63, V rows 64..127).
template <uint32_t D> __device__ inline uint32_t f16_chunk_at(uint32_t r, uint32_t c)
{
    constexpr uint32_t cpr = 2u * D / 16u;
    uint32_t sw = c ^ (r & 7u);
#if KVC_BUG_MATRIX
    if (kvc_injected_bug == 12) sw = c ^ (r & 3u); // a wrong swizzle: the reads disagree with the copies
#endif
    return 16u * (r * cpr + sw);
}

// A page is read warp by warp: warp w reads only its rows 16w .. 16w + 15
// (their keys, values, scales or headers, log-weights and roles), so each
// warp copies exactly those into shared memory itself and no block barrier
// is needed in the page loop: its lanes' cp.async waits and a __syncwarp
// make the bytes visible to the warp. Two groups per page: the keys with
// the rows' scales, headers, weights and roles first, then the values, so
// that the score product starts while the values land (FlashInfer's K and
// V stages). 16-byte chunks, spread over the lanes; each goes where
// swizzled_chunk puts it (within the warp's rows). An unweighted cache
// copies no log-weights or roles.
template <int DT, uint32_t D>
__device__ inline void issue_warp_page(unsigned char *dst, const unsigned char *src, uint32_t warp, uint32_t lane,
                                       bool weighted)
{
    constexpr uint32_t cpr = page_row_bytes(DT, D) / 16u, vo = page_v_offset(DT, D) / 16u;
    constexpr uint32_t so = page_scale_offset(DT, D) / 16u, sb = page_scale_bytes(DT, D) / 16u;
    auto copy = [&](uint32_t i) {
        const uint32_t to = swizzled_chunk<DT, D>(i);
        kvc_cp_async(dst + 16u * to, src + 16u * i, 16);
    };
    for (uint32_t k = lane; k < 16u * cpr; k += 32u) copy(16u * warp * cpr + k); // key rows
    if constexpr (sb > 0) // the warp's eighth of each half (keys', values') of the scales
        for (uint32_t k = lane; k < sb / 4u; k += 32u)
            copy(so + (k / (sb / 8u)) * (sb / 2u) + warp * (sb / 8u) + k % (sb / 8u));
    if (weighted && lane < 4u) copy(page_lw_offset(DT, D) / 16u + 4u * warp + lane);
    if (weighted && lane == 4u) copy(page_role_offset(DT, D) / 16u + warp);
    kvc_cp_async_commit();
    if (DT == BT_F16) { // value rows
        for (uint32_t k = lane; k < 16u * cpr; k += 32u) copy(vo + 16u * warp * cpr + k);
    } else { // the warp's 16 bytes (chunk w) of every value column (int8) or column pair (int4)
        for (uint32_t col = lane; col < (DT == BT_I8 ? D : D / 2u); col += 32u) copy(vo + 4u * col + warp);
    }
    kvc_cp_async_commit();
}

// The B fragments of the warp's two 8-key tiles for dims 16s .. 16s + 15 of
// a swizzled f16 page: one ldmatrix.x4, tile j's halves in kb[j][0..1].
template <uint32_t D>
__device__ inline void f16_key_frags(const unsigned char *page, uint32_t warp, uint32_t s, uint32_t kb[2][2])
{
    const uint32_t lane = threadIdx.x % 32u, mi = lane / 8u;
    uint32_t row = 16u * warp + 8u * (mi / 2u) + lane % 8u, chunk = 2u * s + (mi & 1u);
#if KVC_BUG_MATRIX
    if (kvc_injected_bug == 13) // a wrong lane map: the tiles' roles swapped (dims half <-> key tile)
        row = 16u * warp + 8u * (mi & 1u) + lane % 8u, chunk = 2u * s + mi / 2u;
#endif
    uint32_t r[4];
    kvc_ldmatrix_x4(r, page + f16_chunk_at<D>(row, chunk));
    kb[0][0] = r[0], kb[0][1] = r[1], kb[1][0] = r[2], kb[1][1] = r[3];
}

// The B fragments of P V for value columns 8 nt .. 8 nt + 15 (nt even) of the
// warp's 16 rows: one ldmatrix.x4.trans; vb[n][0] holds rows 2t, 2t + 1 and
// vb[n][1] rows 2t + 8, 2t + 9 of column 8 (nt + n) + g.
template <uint32_t D>
__device__ inline void f16_value_frags(const unsigned char *page, uint32_t warp, uint32_t nt, uint32_t vb[2][2])
{
    const uint32_t lane = threadIdx.x % 32u, mi = lane / 8u;
    const uint32_t row = kPageRows + 16u * warp + 8u * (mi & 1u) + lane % 8u, chunk = nt + mi / 2u;
    uint32_t r[4];
    kvc_ldmatrix_x4_trans(r, page + f16_chunk_at<D>(row, chunk));
    vb[0][0] = r[0], vb[0][1] = r[1], vb[1][0] = r[2], vb[1][1] = r[3];
}

template <int DT, uint32_t D>
__global__ void __launch_bounds__(kBatchThreads, batch_min_blocks(DT)) batch_split_kernel(const batch_args a)
{
    KVC_DYN_SMEM(unsigned char, smem);
    const batch_ws ws{a.capacity, a.n_entries, a.group, D};
    const uint32_t n_items = *reinterpret_cast<const uint32_t *>(a.ws);
    if (blockIdx.x >= n_items) return; // a fixed grid's surplus block
    const batch_item it = reinterpret_cast<const batch_item *>(a.ws + ws.items_offset())[blockIdx.x];
    const int32_t *first = reinterpret_cast<const int32_t *>(a.ws + ws.entry_offset());
    const bool alone = first[it.entry + 1] - first[it.entry] == 1; // this block writes the entry's output
    const uint32_t G = a.group, seq = (uint32_t)it.entry / a.n_kv_heads, head = (uint32_t)it.entry % a.n_kv_heads;
    const uint32_t warp = threadIdx.x / 32u, lane = threadIdx.x % 32u, g = lane / 4u, t = lane % 4u;
    __half *qh = reinterpret_cast<__half *>(smem);
    float *sigma = reinterpret_cast<float *>(smem + kMmaM * D * 2u);
    float *qsum = sigma + kMmaM;              // int4: [16 rows][NG groups] sums of the f16 query (the minimum's share)
    constexpr uint32_t NG = i4_groups(DT, D); // groups per int4 row (1 for the other types: unused)
    unsigned char *buf0 = smem + batch_q_bytes(D);
    constexpr uint32_t PB = page_bytes(DT, D);
    const int32_t *pages = a.page_ids + a.page_indptr[it.entry] + it.page0;
#if KVC_BUG_MATRIX
    if (kvc_injected_bug == 11) pages += 1; // the page-table off-by-one
#endif
    // first page in flight while q is prepared; the next page's id read one iteration ahead
    int32_t next_id = 0;
    const bool weighted = !a.unweighted;
    if (it.n_pages > 0) {
        issue_warp_page<DT, D>(buf0, a.pool + (size_t)pages[0] * PB, warp, lane, weighted);
        if (it.n_pages > 1) next_id = pages[1];
    }

    // the query-head group as f16, each row scaled by a power of two (warp w: rows w, w + 4, ...)
    for (uint32_t r = warp; r < kMmaM; r += 4u) {
        const bool real = r < G;
        const size_t base = (size_t)seq * a.q.seq_stride + (size_t)(head * G + (real ? r : 0u)) * a.q.head_stride;
        float amax = 0.0f;
        for (uint32_t c = lane; c < D; c += 32u)
            amax = fmaxf(amax, real ? fabsf(load_elem(a.q.data, base + c, a.q.elem) * a.beta) : 0.0f);
        amax = warp_max32(amax);
        const float s = query_scale(amax);
        float part[D / 32u]; // int4: element lane + 32 k is in group k (of 32) or in the row's one
        for (uint32_t c = lane; c < D; c += 32u) {
            const __half h = __float2half_rn(real ? load_elem(a.q.data, base + c, a.q.elem) * a.beta / s : 0.0f);
            qh[r * D + c] = h, part[c / 32u] = __half2float(h);
        }
        if (is_int4(DT))
            for (uint32_t grp = 0; grp < NG; grp++) {
                float sum = 0.0f;
                for (uint32_t k = grp * (D / 32u / NG); k < (grp + 1u) * (D / 32u / NG); k++) sum += part[k];
                for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kLanes, sum, o);
                if (lane == 0) qsum[r * NG + grp] = sum;
            }
        if (lane == 0) sigma[r] = s;
    }
    __syncthreads();
    // the A fragments of Q, kept in registers for the whole item. int8 and
    // int4 permute the k index within their key words, as their key
    // fragments do (a dot product does not see the order): int8 (16 dims a
    // step) k 2t, 2t+1 <-> dims 4t, 4t+1 and k 2t+8, 2t+9 <-> 4t+2, 4t+3, so
    // that four consecutive codes are one 32-bit load; int4 (32 dims, two
    // steps h) k 2t, 2t+1 <-> dims 8t+2h, 8t+2h+4 and k 2t+8, 2t+9 <->
    // 8t+2h+1, 8t+2h+5, the nibble pairs of one word.
    uint32_t qa[D / 16u][4];
#pragma unroll
    for (uint32_t s = 0; s < D / 16u; s++) {
        const uint32_t *row_g = reinterpret_cast<const uint32_t *>(qh + g * D + 16u * s);
        const uint32_t *row_g8 = reinterpret_cast<const uint32_t *>(qh + (g + 8u) * D + 16u * s);
        if (is_int4(DT)) {
            const uint32_t base = 32u * (s / 2u) + 8u * t + 2u * (s % 2u);
            for (uint32_t h = 0; h < 2u; h++) {
                const __half *q = qh + (g + 8u * h) * D + base;
                qa[s][h] = kvc_mma_pack(q[0], q[4]), qa[s][2u + h] = kvc_mma_pack(q[1], q[5]);
            }
        } else {
            const uint32_t k0 = DT == BT_I8 ? 2u * t : t, k1 = DT == BT_I8 ? 2u * t + 1u : t + 4u;
            qa[s][0] = row_g[k0], qa[s][1] = row_g8[k0], qa[s][2] = row_g[k1], qa[s][3] = row_g8[k1];
        }
#if KVC_BUG_MATRIX
        if (kvc_injected_bug == 9) qa[s][1] = row_g[4], qa[s][2] = row_g8[0]; // a wrong fragment: a[1], a[2] swapped
#endif
    }
    // scores in the log2 domain (exp2 is one MUFU.EX2; expf a sequence around it): x2 = x log2 e
    const float sig_g = sigma[g] * kLog2e, sig_g8 = sigma[g + 8u] * kLog2e;

    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    // int8, int4: the largest value scale of the warp's rows so far (acc holds sums of P s / vs_run times codes)
    float vs_run = 0.0f;
    float mnacc[2][NG]; // int4: sum of P times the value minimum, per query row and value group
#pragma unroll
    for (uint32_t h = 0; h < 2u; h++)
#pragma unroll
        for (uint32_t grp = 0; grp < NG; grp++) mnacc[h][grp] = 0.0f;
    float acc[D / 8u][4];
#pragma unroll
    for (uint32_t j = 0; j < D / 8u; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

    for (int32_t pi = 0; pi < it.n_pages; pi++) {
        unsigned char *page = buf0 + (uint32_t)(pi & 1) * PB;
        const bool more = pi + 1 < it.n_pages;
        if (more) { // the next page's two groups in flight; this page's keys (the oldest group but three) complete
            issue_warp_page<DT, D>(buf0 + (uint32_t)((pi + 1) & 1) * PB, a.pool + (size_t)next_id * PB, warp, lane,
                                   weighted);
            if (pi + 2 < it.n_pages) next_id = pages[pi + 2];
        }
#if KVC_BUG_MATRIX
        if (kvc_injected_bug != 10) // 10: no wait before the page's keys are read
#endif
        {
            if (more)
                kvc_cp_async_wait(3);
            else
                kvc_cp_async_wait(1);
        }
        __syncwarp(); // the warp's rows, copied by its lanes
        const float *LW = reinterpret_cast<const float *>(page + page_lw_offset(DT, D));
        const float *KS = reinterpret_cast<const float *>(page + page_scale_offset(DT, D)), *VS = KS + kPageRows;
        const unsigned char *RO = page + page_role_offset(DT, D);
        const int32_t valid = it.rows - pi * (int32_t)kPageRows; // rows of this page in the cache
        // this lane's four rows of the warp's 16 -- f16: 2t, 2t+1, 2t+8, 2t+9; int8, int4: 4t .. 4t+3 -- the
        // C fragment's columns of the two 8-key tiles, and the B fragment's rows of P V
        uint32_t rr[4];
        float lw[4], ks[4], vs[4];
        bool inc[4], num[4], den[4];
#pragma unroll
        for (uint32_t i = 0; i < 4u; i++) {
            rr[i] = DT != BT_F16 ? 16u * warp + 4u * t + i : 16u * warp + 2u * t + (i & 1u) + (i >= 2u ? 8u : 0u);
            const unsigned role = a.unweighted ? 3u : RO[rr[i]];
            lw[i] = a.unweighted ? 0.0f : LW[rr[i]] * kLog2e;
            inc[i] = (int32_t)rr[i] < valid && lw[i] > -INFINITY && role >= 1u && role <= 3u;
            num[i] = inc[i] && (role & 1u), den[i] = inc[i] && (role & 2u);
            ks[i] = DT == BT_I8 ? KS[rr[i]] : 1.0f;
            vs[i] = DT == BT_I8 ? VS[rr[i]] : 1.0f;
        }
        // S = Q K^T for the warp's two 8-key tiles
        float sc[2][4];
#pragma unroll
        for (uint32_t j = 0; j < 2u; j++) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
        if (DT == BT_F16) {
#pragma unroll
            for (uint32_t s = 0; s < D / 16u; s++) {
                uint32_t kb[2][2];
                f16_key_frags<D>(page, warp, s, kb);
                kvc_mma_m16n8k16(sc[0], qa[s], kb[0], sc[0]);
                kvc_mma_m16n8k16(sc[1], qa[s], kb[1], sc[1]);
            }
        } else if (DT == BT_I8) {
            // tile j's column n is row 4 (n / 2) + 2j + (n % 2): the lane's P entries are its rows 4t .. 4t+3
            const float magic = i8_magic();
#pragma unroll
            for (uint32_t j = 0; j < 2u; j++) {
                const uint32_t krow = 16u * warp + 4u * (g / 2u) + 2u * j + (g % 2u);
#pragma unroll
                for (uint32_t s = 0; s < D / 16u; s++) {
                    uint32_t kb[2];
                    kvc_i8x4_to_f16x2(i8_key_word<D>(page, krow, s, t), kb[0], kb[1], magic);
                    kvc_mma_m16n8k16(sc[j], qa[s], kb, sc[j]);
                }
            }
        } else {
            // int4: per key group, the codes' product on tensor cores (exact small integers as f16), then
            // score += scale x that + minimum x the group's query sum; tile j's columns as int8's
            const float magic = i4_magic();
            const unsigned char *KH = page + page_scale_offset(DT, D); // [64][NG] {scale, minimum}
#pragma unroll
            for (uint32_t j = 0; j < 2u; j++) {
                const uint32_t krow = 16u * warp + 4u * (g / 2u) + 2u * j + (g % 2u);
                float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (uint32_t c = 0; c < D / 32u; c++) {
                    const uint32_t w = i4_key_word<D>(page, krow, c, t);
                    const uint32_t b0[2] = {kvc_i4_pair(w, 0, magic), kvc_i4_pair(w, 4, magic)};
                    const uint32_t b1[2] = {kvc_i4_pair(w, 8, magic), kvc_i4_pair(w, 12, magic)};
                    kvc_mma_m16n8k16(part, qa[2u * c], b0, part);
                    kvc_mma_m16n8k16(part, qa[2u * c + 1u], b1, part);
                    const uint32_t grp = c * NG / (D / 32u);
                    if (NG > 1u || c + 1u == D / 32u) // the group is complete
#pragma unroll
                        for (uint32_t e = 0; e < 4u; e++) {
                            const float2 hm = i4_header(KH + 4u * (rr[2u * j + (e & 1u)] * NG + grp));
                            sc[j][e] += hm.x * part[e] + hm.y * qsum[(g + 8u * (e / 2u)) * NG + grp];
                            part[e] = 0.0f;
                        }
                }
            }
        }
        // x = sigma S (key scale) + log w; excluded rows -inf (a select: their bytes may be anything)
        float x[2][4], mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (uint32_t j = 0; j < 2u; j++)
#pragma unroll
            for (uint32_t e = 0; e < 4u; e++) {
                const uint32_t i = 2u * j + (e & 1u); // which of the lane's four rows
                const float xs = (e < 2u ? sig_g : sig_g8) * ks[i] * sc[j][e] + lw[i];
                x[j][e] = inc[i] ? xs : -INFINITY;
                mx[e / 2u] = fmaxf(mx[e / 2u], x[j][e]);
            }
        float corr[2], psum[2] = {0.0f, 0.0f}, p[2][4];
#pragma unroll
        for (uint32_t h = 0; h < 2u; h++) { // rows g and g + 8
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(kLanes, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(kLanes, mx[h], 2));
            const float mn = fmaxf(m[h], mx[h]);
            corr[h] = mn == -INFINITY ? 1.0f : exp2f(m[h] - mn);
            m[h] = mn;
        }
#pragma unroll
        for (uint32_t j = 0; j < 2u; j++)
#pragma unroll
            for (uint32_t e = 0; e < 4u; e++) {
                const uint32_t i = 2u * j + (e & 1u), h = e / 2u;
                const float pe = x[j][e] == -INFINITY ? 0.0f : exp2f(x[j][e] - m[h]);
                if (den[i]) psum[h] += pe;
                p[j][e] = num[i] ? pe : 0.0f;
            }
#pragma unroll
        for (uint32_t h = 0; h < 2u; h++) {
            psum[h] += __shfl_xor_sync(kLanes, psum[h], 1);
            psum[h] += __shfl_xor_sync(kLanes, psum[h], 2);
            l[h] = l[h] * corr[h] + psum[h];
        }
        // int8 values: each row's scale folded into its probability over the warp's running largest
        // scale (P' = P s / vs_run <= P keeps f16's precision), which rescales acc when it grows, as the
        // softmax maximum does; the product is multiplied by vs_run once, at the end of the item
        const float corr_s[2] = {corr[0], corr[1]}; // the softmax's alone (int4's minimum sums)
        if (DT != BT_F16) {
            const float *VS = KS + kPageRows;                                                // int8 value scales
            const unsigned char *VH = page + page_scale_offset(DT, D) + 4u * kPageRows * NG; // int4 value headers
            float smax = vs_run;
#pragma unroll
            for (uint32_t i = 0; i < 4u; i++)
#pragma unroll
                for (uint32_t grp = 0; grp < (DT == BT_I8 ? 1u : NG); grp++)
                    smax = fmaxf(smax, !num[i]       ? 0.0f
                                       : DT == BT_I8 ? VS[rr[i]]
                                                     : i4_header(VH + 4u * (rr[i] * NG + grp)).x);
            smax = warp_max32(smax);
            const float vcorr = vs_run > 0.0f ? vs_run / smax : 1.0f;
            vs_run = smax;
            corr[0] *= vcorr, corr[1] *= vcorr;
        }
        // no row maximum (nor int8 value scale) of the warp moved -- after the first pages, the usual case
        const bool rescale = __any_sync(kLanes, corr[0] != 1.0f || corr[1] != 1.0f);
        // the P fragment, each row's value scale folded in (int8; int4 per value group): P' = P s / vs_run, a
        // select for a row not in N (0, whatever its scale's bytes)
        const float inv_vs = vs_run > 0.0f ? 1.0f / vs_run : 0.0f;
        auto p_frag = [&](uint32_t pa[4], const float *scale) {
            float q[2][4];
#pragma unroll
            for (uint32_t j = 0; j < 2u; j++)
#pragma unroll
                for (uint32_t e = 0; e < 4u; e++) {
                    const uint32_t i = 2u * j + (e & 1u);
                    q[j][e] = DT == BT_F16 ? p[j][e] : num[i] ? p[j][e] * (scale[i] * inv_vs) : 0.0f;
                }
            pa[0] = pack_f32(q[0][0], q[0][1]), pa[1] = pack_f32(q[0][2], q[0][3]);
            pa[2] = pack_f32(q[1][0], q[1][1]), pa[3] = pack_f32(q[1][2], q[1][3]);
        };
        uint32_t pa[4];
        if (!is_int4(DT)) p_frag(pa, vs);
        // this page's values complete (the next page's two groups still in flight)
        if (more)
            kvc_cp_async_wait(2);
        else
            kvc_cp_async_wait(0);
        __syncwarp();
        // O = O corr + P V over the warp's 16 rows (rows not in N contribute a zero, whatever their bytes)
        if (DT == BT_F16) {
            // the lane's value halves are its own four rows (vb[.][0]: rows 2t, 2t + 1; vb[.][1]: 2t + 8, 2t + 9)
            const uint32_t keep0 = (num[0] ? 0x0000ffffu : 0u) | (num[1] ? 0xffff0000u : 0u);
            const uint32_t keep1 = (num[2] ? 0x0000ffffu : 0u) | (num[3] ? 0xffff0000u : 0u);
#pragma unroll
            for (uint32_t nt = 0; nt < D / 8u; nt += 2u) {
                uint32_t vb[2][2];
                f16_value_frags<D>(page, warp, nt, vb);
#pragma unroll
                for (uint32_t n = 0; n < 2u; n++) {
                    vb[n][0] &= keep0, vb[n][1] &= keep1;
                    float *o = acc[nt + n];
                    if (rescale) o[0] *= corr[0], o[1] *= corr[0], o[2] *= corr[1], o[3] *= corr[1];
                    kvc_mma_m16n8k16(o, pa, vb[n], o);
                }
            }
        } else if (DT == BT_I8) {
            // the lane's rows 4t .. 4t+3 of column 8 nt + g: one word of the transposed codes (a row not in N
            // has P' = 0, and its codes are finite whatever they are)
            const float magic = i8_magic();
#pragma unroll
            for (uint32_t nt = 0; nt < D / 8u; nt++) {
                uint32_t vb[2];
                kvc_i8x4_to_f16x2(value_column_word<DT, D>(page, 8u * nt + g, warp, t), vb[0], vb[1], magic);
                if (rescale) acc[nt][0] *= corr[0], acc[nt][1] *= corr[0], acc[nt][2] *= corr[1], acc[nt][3] *= corr[1];
                kvc_mma_m16n8k16(acc[nt], pa, vb, acc[nt]);
            }
        } else {
            // int4, per value group: P' from the rows' group scales, and the rows' P x minimum summed into
            // mnacc (rescaled by the softmax alone); column pair p of the group's tiles 2u (even columns
            // 16u + 2n) and 2u + 1 (odd columns): one word, four rows of both columns
            const float magic = i4_magic();
            const unsigned char *VH = page + page_scale_offset(DT, D) + 4u * kPageRows * NG;
#pragma unroll
            for (uint32_t grp = 0; grp < NG; grp++) {
                float vsc[4], mp[2] = {0.0f, 0.0f};
#pragma unroll
                for (uint32_t i = 0; i < 4u; i++) {
                    const float2 hm = i4_header(VH + 4u * (rr[i] * NG + grp));
                    vsc[i] = hm.x;
#pragma unroll
                    for (uint32_t h = 0; h < 2u; h++) mp[h] += num[i] ? p[i / 2u][2u * h + (i & 1u)] * hm.y : 0.0f;
                }
                p_frag(pa, vsc);
#pragma unroll
                for (uint32_t h = 0; h < 2u; h++) {
                    mp[h] += __shfl_xor_sync(kLanes, mp[h], 1);
                    mp[h] += __shfl_xor_sync(kLanes, mp[h], 2);
                    mnacc[h][grp] = mnacc[h][grp] * corr_s[h] + mp[h];
                }
#pragma unroll
                for (uint32_t u = grp * (D / 16u / NG); u < (grp + 1u) * (D / 16u / NG); u++) {
                    const uint32_t w = value_column_word<DT, D>(page, 8u * u + g, warp, t);
                    const uint32_t x0 = kvc_spread_bytes(w, 0), x1 = kvc_spread_bytes(w, 2);
                    const uint32_t va[2] = {kvc_i4_pair(x0, 0, magic), kvc_i4_pair(x1, 0, magic)};
                    const uint32_t vb[2] = {kvc_i4_pair(x0, 4, magic), kvc_i4_pair(x1, 4, magic)};
#pragma unroll
                    for (uint32_t n = 0; n < 2u; n++) {
                        float *o = acc[2u * u + n];
                        if (rescale) o[0] *= corr[0], o[1] *= corr[0], o[2] *= corr[1], o[3] *= corr[1];
                        kvc_mma_m16n8k16(o, pa, n == 0 ? va : vb, o);
                    }
                }
            }
        }
        __syncwarp(); // every lane is done with this buffer before the next iteration refills it
    }
    __syncthreads(); // every warp is done with the page buffers, which the states reuse

    // the four warps' states -> the item's state, rows < G (the page buffers are free: every group was waited for)
    float *wm = reinterpret_cast<float *>(buf0); // [4][16]
    float *wl = wm + 4u * kMmaM;                 // [4][16]
    float *wacc = wl + 4u * kMmaM;               // [4][16][D]
#pragma unroll
    for (uint32_t h = 0; h < 2u; h++) {
        const uint32_t row = g + 8u * h;
        if (t == 0) wm[warp * kMmaM + row] = m[h], wl[warp * kMmaM + row] = l[h];
        const float vscale = DT == BT_F16 ? 1.0f : vs_run;
#pragma unroll
        for (uint32_t nt = 0; nt < D / 8u; nt++)
#pragma unroll
            for (uint32_t q = 0; q < 2u; q++) {
                // int4's tiles 2u, 2u + 1 hold columns 16u + 2n and 16u + 2n + 1, and add the minimum's sum
                const uint32_t col = is_int4(DT) ? 16u * (nt / 2u) + 2u * (2u * t + q) + nt % 2u : 8u * nt + 2u * t + q;
                const float mn = is_int4(DT) ? mnacc[h][col * NG / D] : 0.0f;
                wacc[(warp * kMmaM + row) * D + col] = acc[nt][2u * h + q] * vscale + mn;
            }
    }
    __syncthreads();
    float *ml = reinterpret_cast<float *>(a.ws + ws.ml_offset()) + (size_t)blockIdx.x * G * 2u;
    float *st = reinterpret_cast<float *>(a.ws + ws.acc_offset()) + (size_t)blockIdx.x * G * D;
    for (uint32_t i = threadIdx.x; i < G * (D + 1u); i += kBatchThreads) {
        // i < G * D: element (row, c) of acc or of the output; past it: row i - G * D's {m, l}
        const bool is_ml = i >= G * D;
        const uint32_t row = is_ml ? i - G * D : i / D, c = i % D;
        float M = -INFINITY;
        for (uint32_t w = 0; w < 4u; w++) M = fmaxf(M, wm[w * kMmaM + row]);
        float num = 0.0f, den = 0.0f;
        for (uint32_t w = 0; w < 4u; w++) {
            const float mw = wm[w * kMmaM + row];
            const float f = mw == -INFINITY ? 0.0f : exp2f(mw - M);
            den += f * wl[w * kMmaM + row];
            if (!is_ml) num += f * wacc[(w * kMmaM + row) * D + c];
        }
        if (is_ml) {
            if (!alone) ml[2u * row] = M, ml[2u * row + 1u] = den;
        } else if (alone) {
            const size_t o = (size_t)seq * a.out_seq_stride + (size_t)(head * G + row) * a.out_head_stride + c;
            store_elem(a.out, o, a.out_elem, den > 0.0f ? num / den : 0.0f);
        } else {
            st[i] = num;
        }
    }
}

// The columns of one state row a lane owns: D / 32 consecutive floats (a float4 for d = 128).
template <uint32_t D> __device__ inline void load_lane_cols(const float *row, uint32_t lane, float v[D / 32u])
{
    if constexpr (D == 128u) {
        const float4 x = reinterpret_cast<const float4 *>(row)[lane];
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else {
        static_assert(D == 64u, "head dims 64 and 128");
        const float2 x = reinterpret_cast<const float2 *>(row)[lane];
        v[0] = x.x, v[1] = x.y;
    }
}

// The merge of the entries with more than one item: one block of 8 warps per
// (entry, query row); warp w folds items w, w + 8, ... into its running
// {m, l, acc} (the online softmax over states), lane c owns columns
// c D/32 .. (c + 1) D/32 - 1; then the 8 warps' states meet in shared memory:
// out = sum_i e^{m_i - M} acc_i / sum_i e^{m_i - M} l_i.
constexpr uint32_t kMergeThreads = 256;
template <uint32_t D> __global__ void __launch_bounds__(kMergeThreads) batch_merge_kernel(const batch_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory"); // launched as the split's dependent: its states are written
#endif
    const batch_ws ws{a.capacity, a.n_entries, a.group, D};
    const uint32_t G = a.group, n_merge = reinterpret_cast<const uint32_t *>(a.ws)[1];
    if (blockIdx.x >= n_merge * G) return; // a fixed grid's surplus block
    const int32_t *first = reinterpret_cast<const int32_t *>(a.ws + ws.entry_offset());
    const int32_t e = reinterpret_cast<const int32_t *>(a.ws + ws.merge_offset())[blockIdx.x / G];
    const uint32_t row = blockIdx.x % G, warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    const float *ml = reinterpret_cast<const float *>(a.ws + ws.ml_offset());
    const float *st = reinterpret_cast<const float *>(a.ws + ws.acc_offset());
    int32_t last = first[e + 1];
#if KVC_BUG_MATRIX
    if (kvc_injected_bug == 14) last -= 1; // the merge drops an entry's last split
#endif
    float m = -INFINITY, l = 0.0f, acc[D / 32u];
    for (uint32_t j = 0; j < D / 32u; j++) acc[j] = 0.0f;
    for (int32_t k = first[e] + (int32_t)warp; k < last; k += (int32_t)(kMergeThreads / 32u)) {
        const float mk = ml[((size_t)k * G + row) * 2u], lk = ml[((size_t)k * G + row) * 2u + 1u];
        if (mk == -INFINITY) continue; // an item with no row in D or N: nothing to add (warp-uniform)
        float x[D / 32u];
        load_lane_cols<D>(st + ((size_t)k * G + row) * D, lane, x);
        const float mn = fmaxf(m, mk), fo = m == -INFINITY ? 0.0f : exp2f(m - mn), fk = exp2f(mk - mn);
        l = l * fo + lk * fk;
        for (uint32_t j = 0; j < D / 32u; j++) acc[j] = acc[j] * fo + x[j] * fk;
        m = mn;
    }
    __shared__ float sm[kMergeThreads / 32u], sl[kMergeThreads / 32u], sacc[kMergeThreads / 32u][D];
    if (lane == 0) sm[warp] = m, sl[warp] = l;
    for (uint32_t j = 0; j < D / 32u; j++) sacc[warp][lane * (D / 32u) + j] = acc[j];
    __syncthreads();
    const uint32_t seq = (uint32_t)e / a.n_kv_heads, head = (uint32_t)e % a.n_kv_heads;
    for (uint32_t c = threadIdx.x; c < D; c += kMergeThreads) {
        float M = -INFINITY;
        for (uint32_t w = 0; w < kMergeThreads / 32u; w++) M = fmaxf(M, sm[w]);
        float num = 0.0f, den = 0.0f;
        for (uint32_t w = 0; w < kMergeThreads / 32u; w++) {
            const float f = sm[w] == -INFINITY ? 0.0f : exp2f(sm[w] - M);
            den += f * sl[w], num += f * sacc[w][c];
        }
        const size_t o = (size_t)seq * a.out_seq_stride + (size_t)(head * G + row) * a.out_head_stride + c;
        store_elem(a.out, o, a.out_elem, den > 0.0f ? num / den : 0.0f);
    }
}

// The attention mass of every row (kvc_cuda_batch_attend_mass): one block per
// work item, after the split (and the merge). Each row's scores are computed
// again in f32 from its stored codes: the split kernel's registers (168 of its
// 170 at int4, d = 128) have no room to keep them, and any code added to it
// spilled. An entry split over several items has its {M, L} per query row
// merged from the items' states, exactly as the merge does; an entry of one
// item (whose block wrote no state) has them from this kernel's own scores, in
// two more passes over its rows. A row's mass is sum over the group's query
// rows of exp2(x - M) / L, x with the row's log-weight: w e^x / sum_D w e^x,
// the reference's mass.
struct mass_args {
    batch_args b;
    float *mass; // [n_pages * 64]
};

template <int DT, uint32_t D> __device__ inline float page_key_elem(const unsigned char *page, uint32_t r, uint32_t c)
{
    if (DT == BT_F16) return __half2float(reinterpret_cast<const __half *>(page)[r * D + c]);
    if (DT == BT_I8)
        return (float)reinterpret_cast<const signed char *>(page)[r * D + c] *
               reinterpret_cast<const float *>(page + page_scale_offset(DT, D))[r];
    constexpr uint32_t NG = i4_groups(DT, D);
    const float2 hm = i4_header(page + page_scale_offset(DT, D) + 4u * (r * NG + c / (D / NG)));
    return hm.y + (float)((page[r * (D / 2u) + c / 2u] >> (4u * (c & 1u))) & 15u) * hm.x;
}

// Row pr of `page`: its weight's log2 (-inf: excluded) and role, and its score x for query row h (log2 units).
template <int DT, uint32_t D> struct mass_row {
    float lw2;
    uint32_t role;
    __device__ mass_row(const batch_args &a, const unsigned char *page, uint32_t pr)
    {
        const float lw = a.unweighted ? 0.0f : reinterpret_cast<const float *>(page + page_lw_offset(DT, D))[pr];
        role = a.unweighted ? 3u : page[page_role_offset(DT, D) + pr];
        lw2 = role >= 1u && role <= 3u && lw != -INFINITY ? lw * kLog2e : -INFINITY; // a select: bytes may be NaN
    }
    __device__ float score(const float (*qs)[D], const unsigned char *page, uint32_t pr, uint32_t h) const
    {
        float x = 0.0f;
#pragma unroll 8 // fully unrolled, int4 at d = 64 spilled 8 bytes (ptxas, sm_90)
        for (uint32_t c = 0; c < D; c++) x += qs[h][c] * page_key_elem<DT, D>(page, pr, c);
        return x + lw2;
    }
};

// The block's largest (max = true) or summed value of v.
__device__ inline float block_reduce(float v, bool max, float *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (uint32_t o = kBatchThreads / 2u; o > 0; o >>= 1) {
        if (threadIdx.x < o)
            red[threadIdx.x] =
                max ? fmaxf(red[threadIdx.x], red[threadIdx.x + o]) : red[threadIdx.x] + red[threadIdx.x + o];
        __syncthreads();
    }
    const float r = red[0];
    __syncthreads();
    return r;
}

template <int DT, uint32_t D> __global__ void __launch_bounds__(kBatchThreads) batch_mass_kernel(const mass_args ma)
{
    const batch_args &a = ma.b;
    const batch_ws ws{a.capacity, a.n_entries, a.group, D};
    const uint32_t n_items = *reinterpret_cast<const uint32_t *>(a.ws);
    if (blockIdx.x >= n_items) return; // a fixed grid's surplus block
    const batch_item it = reinterpret_cast<const batch_item *>(a.ws + ws.items_offset())[blockIdx.x];
    const int32_t *first = reinterpret_cast<const int32_t *>(a.ws + ws.entry_offset());
    const float *ml = reinterpret_cast<const float *>(a.ws + ws.ml_offset());
    const uint32_t G = a.group, seq = (uint32_t)it.entry / a.n_kv_heads, head = (uint32_t)it.entry % a.n_kv_heads;
    __shared__ float M[kMmaM], L[kMmaM], qs[kMmaM][D], red[kBatchThreads];
    for (uint32_t i = threadIdx.x; i < G * D; i += kBatchThreads) { // q beta log2 e, in f32
        const uint32_t h = i / D, c = i % D;
        qs[h][c] =
            load_elem(a.q.data, (size_t)seq * a.q.seq_stride + (size_t)(head * G + h) * a.q.head_stride + c, a.q.elem) *
            a.beta * kLog2e;
    }
    const int32_t *pages = a.page_ids + a.page_indptr[it.entry] + it.page0;
    const int32_t rows = min(it.rows, it.n_pages * (int32_t)kPageRows);
    const int32_t k0 = first[it.entry], k1 = first[it.entry + 1];
    if (k1 - k0 > 1) { // split: the items' states, merged
        if (threadIdx.x < G) {
            int32_t j0 = k0, j1 = k1;
#if KVC_BUG_MATRIX
            if (kvc_injected_bug == 18) j0 = (int32_t)blockIdx.x, j1 = j0 + 1; // 18: the item's own state, not merged
#endif
            float m = -INFINITY, l = 0.0f;
            for (int32_t k = j0; k < j1; k++) m = fmaxf(m, ml[((size_t)k * G + threadIdx.x) * 2u]);
            for (int32_t k = j0; k < j1; k++) {
                const float mk = ml[((size_t)k * G + threadIdx.x) * 2u];
                if (mk != -INFINITY) l += ml[((size_t)k * G + threadIdx.x) * 2u + 1u] * exp2f(mk - m);
            }
            M[threadIdx.x] = m, L[threadIdx.x] = l;
        }
        __syncthreads();
    } else {             // one item: the maximum over its rows, then the sum over its rows in D
        __syncthreads(); // qs written
        for (uint32_t h = 0; h < G; h++) {
            float m = -INFINITY;
            for (int32_t r = (int32_t)threadIdx.x; r < rows; r += (int32_t)kBatchThreads) {
                const unsigned char *page = a.pool + (size_t)pages[r / (int32_t)kPageRows] * page_bytes(DT, D);
                const uint32_t pr = (uint32_t)(r % (int32_t)kPageRows);
                const mass_row<DT, D> mr(a, page, pr);
                if (mr.lw2 != -INFINITY) m = fmaxf(m, mr.score(qs, page, pr, h));
            }
            m = block_reduce(m, true, red);
            float l = 0.0f;
            for (int32_t r = (int32_t)threadIdx.x; r < rows; r += (int32_t)kBatchThreads) {
                const unsigned char *page = a.pool + (size_t)pages[r / (int32_t)kPageRows] * page_bytes(DT, D);
                const uint32_t pr = (uint32_t)(r % (int32_t)kPageRows);
                const mass_row<DT, D> mr(a, page, pr);
                if (mr.lw2 != -INFINITY && (mr.role & 2u)) l += exp2f(mr.score(qs, page, pr, h) - m);
            }
            l = block_reduce(l, false, red);
            if (threadIdx.x == 0) M[h] = m, L[h] = l;
        }
        __syncthreads();
    }
    for (int32_t r = (int32_t)threadIdx.x; r < rows; r += (int32_t)kBatchThreads) {
        const int32_t pid = pages[r / (int32_t)kPageRows];
        const uint32_t pr = (uint32_t)(r % (int32_t)kPageRows);
        const unsigned char *page = a.pool + (size_t)pid * page_bytes(DT, D);
        const mass_row<DT, D> mr(a, page, pr);
        float s = 0.0f;
        if (mr.lw2 != -INFINITY)
            for (uint32_t h = 0; h < G; h++)
                if (L[h] > 0.0f) s += exp2f(mr.score(qs, page, pr, h) - M[h]) / L[h];
        ma.mass[(size_t)pid * kPageRows + pr] = s;
    }
}

struct append_args {
    unsigned char *pool;
    uint32_t n_pages, n_kv_heads, n_entries;
    const int32_t *slots;
    batch_tensor k, v;
};

// One warp quantises one row of D elements (f32 in x(c)) into `row`.
// (f16: a core row; int8: the codes at row[c * stride] and the scale at *scale_at; int4: element c's
// nibble in row[(c / 2) * stride], the group headers at hdr: the pages' layouts)
template <int DT, uint32_t D, typename X>
__device__ inline void quantise_row(unsigned char *row, X x, uint32_t stride = 1u, float *scale_at = nullptr,
                                    unsigned char *hdr = nullptr)
{
    const uint32_t lane = threadIdx.x % 32u;
    if (DT == BT_F16) {
        for (uint32_t c = lane; c < D; c += 32u) reinterpret_cast<__half *>(row)[c] = __float2half_rn(x(c));
    } else if (DT == BT_I8) { // as store_kernel and the reference: scale = max|x| / 127, round half away
        // (the page's int8 layout: code c at codes[c * stride], the scale at *scale)
        float amax = 0.0f;
        for (uint32_t c = lane; c < D; c += 32u) amax = fmaxf(amax, fabsf(x(c)));
        amax = warp_max32(amax);
        const float scale = amax / 127.0f;
        for (uint32_t c = lane; c < D; c += 32u) {
            const float q = scale > 0.0f ? fminf(fmaxf(x(c) / scale, -127.0f), 127.0f) : 0.0f;
            reinterpret_cast<signed char *>(row)[c * stride] = (signed char)(int)roundf(q);
        }
        if (lane == 0) *scale_at = scale;
    } else { // int4 (groups of GS = 32 or the whole row): the reference's grid (the stored halves cover [lo, hi])
        // codes: element c's nibble at nib[(c / 2) * stride], low nibble for even c; header g at hdr + 4 g
        constexpr uint32_t GS = D / i4_groups(DT, D);
        for (uint32_t g0 = 0; g0 < D; g0 += GS) {
            float lo = INFINITY, hi = -INFINITY;
            for (uint32_t c = g0 + lane; c < g0 + GS; c += 32u) lo = fminf(lo, x(c)), hi = fmaxf(hi, x(c));
            for (int o = 16; o > 0; o >>= 1)
                lo = fminf(lo, __shfl_xor_sync(kLanes, lo, o)), hi = fmaxf(hi, __shfl_xor_sync(kLanes, hi, o));
            uint16_t hm = __half_as_ushort(__float2half_rn(lo));
            if (__half2float(__ushort_as_half(hm)) > lo) // the next half toward -infinity
                hm = hm == 0x0000u     ? 0x8001u
                     : !(hm & 0x8000u) ? (uint16_t)(hm - 1u)
                     : hm < 0xFBFFu    ? (uint16_t)(hm + 1u)
                                       : hm;
            const float mn = __half2float(__ushort_as_half(hm));
            uint16_t hs = __half_as_ushort(__float2half_rn((hi - mn) / 15.0f));
            while (__half2float(__ushort_as_half(hs)) * 15.0f + mn < hi && hs < 0x7BFFu) hs++;
            const float sc = __half2float(__ushort_as_half(hs));
            for (uint32_t c = g0 + lane; c < g0 + GS; c += 32u) {
                const float tq = sc > 0.0f ? (x(c) - mn) / sc : 0.0f;
                const uint32_t k = tq >= 15.0f ? 15u : tq > 0.0f ? (uint32_t)roundf(tq) : 0u;
                const uint32_t hi_nib = __shfl_down_sync(kLanes, k, 1);
                if (lane % 2u == 0) row[(c / 2u) * stride] = (unsigned char)(k | (hi_nib << 4));
            }
            if (lane == 0) {
                unsigned char *h = hdr + 4u * (g0 / GS);
                h[0] = (unsigned char)(hs & 0xffu), h[1] = (unsigned char)(hs >> 8);
                h[2] = (unsigned char)(hm & 0xffu), h[3] = (unsigned char)(hm >> 8);
            }
        }
    }
}

template <int DT, uint32_t D> __global__ void __launch_bounds__(kBatchThreads) batch_append_kernel(const append_args a)
{
    const uint32_t e = blockIdx.x * (kBatchThreads / 32u) + threadIdx.x / 32u;
    if (e >= a.n_entries) return; // warp-uniform
    const int32_t slot = a.slots[e];
    if (slot < 0 || (uint32_t)slot / kPageRows >= a.n_pages) return;
    unsigned char *page = a.pool + (size_t)((uint32_t)slot / kPageRows) * page_bytes(DT, D);
    const uint32_t r = (uint32_t)slot % kPageRows, seq = e / a.n_kv_heads, head = e % a.n_kv_heads;
    const size_t kb = (size_t)seq * a.k.seq_stride + (size_t)head * a.k.head_stride;
    const size_t vb = (size_t)seq * a.v.seq_stride + (size_t)head * a.v.head_stride;
    auto kx = [&](uint32_t c) { return load_elem(a.k.data, kb + c, a.k.elem); };
    auto vx = [&](uint32_t c) { return load_elem(a.v.data, vb + c, a.v.elem); };
    if (DT == BT_I8) { // key codes as a row, value codes as a column of the transposed block, scales apart
        float *scales = reinterpret_cast<float *>(page + page_scale_offset(DT, D));
        quantise_row<DT, D>(page + r * D, kx, 1u, scales + r);
        quantise_row<DT, D>(page + page_v_offset(DT, D) + r, vx, kPageRows, scales + kPageRows + r);
    } else if (is_int4(DT)) { // key nibbles as a row, value bytes by column pair, headers apart
        unsigned char *hdr = page + page_scale_offset(DT, D);
        constexpr uint32_t NG = i4_groups(DT, D);
        quantise_row<DT, D>(page + r * (D / 2u), kx, 1u, nullptr, hdr + 4u * NG * r);
        quantise_row<DT, D>(page + page_v_offset(DT, D) + r, vx, kPageRows, nullptr, hdr + 4u * NG * (kPageRows + r));
    } else {
        quantise_row<DT, D>(page + r * batch_row_bytes(DT, D), kx);
        quantise_row<DT, D>(page + page_v_offset(DT, D) + r * batch_row_bytes(DT, D), vx);
    }
    if (threadIdx.x % 32u == 0) {
        reinterpret_cast<float *>(page + page_lw_offset(DT, D))[r] = 0.0f;
        page[page_role_offset(DT, D) + r] = 3u;
    }
}

struct put_rows_args {
    unsigned char *pool;
    uint32_t n_pages, n, row_bytes;
    const int32_t *slots;
    const uint8_t *halves;
    const unsigned char *rows;
};

// One thread per row: the core's codes into the page's layout (no arithmetic).
template <int DT, uint32_t D>
__global__ void __launch_bounds__(kBatchThreads) batch_put_rows_kernel(const put_rows_args a)
{
    const uint32_t i = blockIdx.x * kBatchThreads + threadIdx.x;
    if (i >= a.n) return;
    const int32_t slot = a.slots[i];
    if (slot < 0 || (uint32_t)slot / kPageRows >= a.n_pages) return;
    unsigned char *page = a.pool + (size_t)((uint32_t)slot / kPageRows) * page_bytes(DT, D);
    core_row_to_page(DT, D, page, (uint32_t)slot % kPageRows, a.halves[i] != 0u, a.rows + (size_t)i * a.row_bytes);
}

struct set_rows_args {
    unsigned char *pool;
    uint32_t n_pages, page_bytes, lw_offset, role_offset, n;
    const int32_t *slots;
    const float *weights;
    const uint8_t *roles;
};

__global__ void __launch_bounds__(kBatchThreads) batch_set_rows_kernel(const set_rows_args a)
{
    const uint32_t i = blockIdx.x * kBatchThreads + threadIdx.x;
    if (i >= a.n) return;
    const int32_t slot = a.slots[i];
    if (slot < 0 || (uint32_t)slot / kPageRows >= a.n_pages) return;
    unsigned char *page = a.pool + (size_t)((uint32_t)slot / kPageRows) * a.page_bytes;
    const float w = a.weights[i];
    const uint8_t role = a.roles[i];
    const bool ok = w > 0.0f && w <= 3.4e38f && role >= 1u && role <= 3u;
    reinterpret_cast<float *>(page + a.lw_offset)[slot % kPageRows] = ok ? logf(w) : -INFINITY;
    page[a.role_offset + slot % kPageRows] = ok ? role : 0u;
}

} // namespace kvc_cuda

#endif
