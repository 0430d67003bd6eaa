// The weighted attend of kvc_kernels.h in flash-decoding style, for nvcc and
// for the CPU SIMT runtime (one source):
//
//   out_q = sum_{i in N} w_i e^{x_qi} v_i / sum_{i in D} w_i e^{x_qi},
//   x_qi = beta <q, k_i> + ln scale_seg,   w_i = 0 excludes entry i,
//
// with the semantics of kvc_k_attend_batch__ref (roles N/D/both, per-entry
// weights, per-segment scales, the causal block of a batch of positions).
//
// split_kernel: grid (blocks of all segments), 128 threads. A block owns
//   `tiles_per_block` tiles of kTile entries of ONE segment (so its storage
//   type and role are block-uniform) and answers every query row of the
//   launch (all heads of a kv group, all positions) from one read of its rows:
//   1. scores: one thread per row reads the row once (16-byte chunks where
//      the rows are aligned) and dots it with every query; for 1-2 query
//      rows, 8 lanes per row instead (coalesced, 3 butterfly steps); into
//      dynamic shared memory;
//   2. per query (one warp each): the tile's max, the online rescale factor,
//      p = e^{x - m} written in place, the denominator;
//   3. numerators: each thread owns value columns (4 contiguous ones where
//      aligned) of a group of rows, so every value row is read once for all
//      queries; the groups' partial sums are added in a fixed order.
//   It writes the block's unnormalised state {m, den, acc[dv]} per query.
// merge_kernel: grid (query rows), the exact merge of the blocks' states:
//   M = max m_b, den = sum e^{m_b - M} den_b, out = sum e^{m_b - M} acc_b / den
//   (a block that saw nothing has m = -inf and weight 0).
// mass_kernel: the per-entry attention mass sum_q e^{x_qi - M_q} / den_q (the
//   score methods' observation), from the merged M and den.
//
// Bugs 1..8 of the test matrix (tests/bug_matrix.sh) are compiled in only
// when KVC_BUG_MATRIX is set (injected_bug.cuh); the library never sets it.
// Each site keeps the clean code in its #else, line for line.
#ifndef KVC_CUDA_ATTEND_SPLIT_CUH
#define KVC_CUDA_ATTEND_SPLIT_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "injected_bug.cuh"
#include "kvc_cuda_compat.h"

namespace kvc_cuda
{

constexpr int kThreads = 128; // 4 warps
// tuning (measured on an H100, see README.md): blocks per multiprocessor the
// register budget aims at, key chunks loaded ahead
#ifndef KVC_CUDA_MIN_BLOCKS
#define KVC_CUDA_MIN_BLOCKS 5
#endif
// The split kernel's second configuration, for launches whose rows are all
// f32 and take score_tile_grouped (at most KVC_CUDA_GROUPED_MAX_Q query
// rows): a lane's key chunks unrolled this many times, so their loads are in
// flight together, and the register budget of this many blocks per
// multiprocessor, which that unrolling needs (at 5 it spills). On the H100,
// f32 with one query head went from 84% to 91% of nominal bandwidth; f16 and
// int8 rows (conversions per element) were slower with it, so they keep the
// first configuration.
#ifndef KVC_CUDA_WIDE_UNROLL
#define KVC_CUDA_WIDE_UNROLL 4
#endif
#ifndef KVC_CUDA_WIDE_MIN_BLOCKS
#define KVC_CUDA_WIDE_MIN_BLOCKS 4
#endif
// The third configuration, for launches with a Q15, int4 or KIVI4 segment:
// their decoders, compiled into the same kernel as the first configuration's
// types, cost it registers it does not have at 5 blocks (ptxas spilled 24
// bytes), so they get their own instantiation with this register budget and
// the first configuration keeps the code it was measured with.
#ifndef KVC_CUDA_QUANT_MIN_BLOCKS
#define KVC_CUDA_QUANT_MIN_BLOCKS 4
#endif
#ifndef KVC_CUDA_KEY_UNROLL
#define KVC_CUDA_KEY_UNROLL 4
#endif
constexpr int kKeyUnroll = KVC_CUDA_KEY_UNROLL;
// 8 lanes per key row (score_tile_grouped) for launches of at most this many
// query rows; one thread per row above (fewer shuffles per row and query)
#ifndef KVC_CUDA_GROUPED_ROWS
#define KVC_CUDA_GROUPED_ROWS 1
#endif
#ifndef KVC_CUDA_GROUPED_MAX_Q
#define KVC_CUDA_GROUPED_MAX_Q 2
#endif
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 128;   // entries per tile
constexpr int kMaxQ = 8;     // query rows per launch (the host loops over groups)
constexpr int kMaxDim = 256; // KVC_MAX_HEAD_DIM
constexpr int kMaxSeg = 12;  // KVC_VIEW_MAX_SEGMENTS
constexpr unsigned kFull = 0xffffffffu;

// storage types (the values of kvc_dtype)
enum { DT_F32 = 0, DT_F16 = 1, DT_I8 = 2, DT_Q15 = 3, DT_KIVI4 = 4, DT_I4 = 6 };
constexpr uint32_t kKiviBlock = 32; // KVC_KIVI_BLOCK: tokens of a KIVI4 key block
constexpr uint32_t kI4Group = 32;   // int4 rows: elements per (f16 scale, f16 minimum)
// the row type of a segment's values: KIVI4 keeps its values as int4 rows
template <int DT> struct value_type {
    static constexpr int dt = DT == DT_KIVI4 ? DT_I4 : DT;
};
// roles (KVC_SET_*)
enum { ROLE_NUM = 1, ROLE_DEN = 2 };

struct seg_desc {
    const unsigned char *k, *v; // row bases (v may be null when the role has no N)
    const float *w;             // per-entry weights, or null for all 1
    float ln_scale;             // ln of the segment's scale
    uint32_t n, role, dtype;
    uint32_t kstride, vstride; // row bytes (KIVI4 keys: bytes of a key block)
    uint32_t first;            // KIVI4: the first entry's token in the first key block (0..31)
    uint32_t block0;           // first block of the segment in the grid
    int32_t causal0;           // index of its first entry in the causal block, -1: not causal
    uint32_t entry0;           // index of its first entry in the view (mass)
    uint32_t kvec, vvec;       // 1: rows aligned for chunk loads (key_chunk<DT>, 4 value columns)
};

struct attend_args {
    seg_desc seg[kMaxSeg];
    uint32_t n_seg, d, dv, nq, tiles_per_block, n_blocks;
    float beta;
    int32_t visible[kMaxQ]; // query row j sees causal entries c < visible[j]
    const float *q;         // nq rows of d floats
    float *part;            // n_blocks * nq * (dv + 2): per block and query {m, den, acc}
    float *stats;           // nq * 2: merged {M, den} (merge writes, mass reads)
    float *out;             // nq * dv
    float *state;           // nq * (dv + 2) unnormalised merged state, or null
    float *mass;            // one per view entry, or null
    unsigned *included;     // entries with weight > 0 the blocks scored (a check), or null
};

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
    return v;
}

// An int4 group's f16 scale and minimum (rows_int4.c), as floats.
struct i4_group {
    float scale, min;
};
__device__ __forceinline__ i4_group i4_header(const unsigned char *hdr)
{
    const unsigned h = __ldg(reinterpret_cast<const unsigned *>(hdr));
    return {__half2float(__ushort_as_half((unsigned short)(h & 0xffffu))),
            __half2float(__ushort_as_half((unsigned short)(h >> 16)))};
}
// An int4 element: min + q * scale, one rounding (the product of a 4-bit
// code and a half is exact in float), so it is the reference load's value
// (rows_int4.c evaluates it exactly in double and rounds once).
__device__ __forceinline__ float i4_value(const i4_group &g, unsigned q) { return fmaf((float)q, g.scale, g.min); }

// the nibbles of an int4 row of dim elements follow its ceil(dim / 32) group headers
__device__ __forceinline__ const unsigned char *i4_nibbles(const unsigned char *row, uint32_t dim)
{
    return row + 4u * ((dim + kI4Group - 1u) / kI4Group);
}

template <int DT> __device__ __forceinline__ float elem(const unsigned char *row, uint32_t c, uint32_t dim)
{
    if (DT == DT_F32) return __ldg(reinterpret_cast<const float *>(row) + c);
    if (DT == DT_F16) return __half2float(__ldg(reinterpret_cast<const __half *>(row) + c));
    if (DT == DT_Q15) return (float)__ldg(reinterpret_cast<const short *>(row + 4) + c);
    if (DT == DT_I4) {
        const unsigned b = __ldg(i4_nibbles(row, dim) + c / 2u);
        return i4_value(i4_header(row + 4u * (c / kI4Group)), (b >> ((c & 1u) * 4u)) & 15u);
    }
    return (float)__ldg(reinterpret_cast<const signed char *>(row + 4) + c);
}

// Channel c of token j (0..31) of a KIVI4 key block: channel c is an int4
// row of the block's 32 tokens, 20 bytes (rows_kivi.c).
__device__ __forceinline__ float kivi_elem(const unsigned char *block, uint32_t j, uint32_t c)
{
    const unsigned char *ch = block + (size_t)c * 20u;
    const unsigned b = __ldg(ch + 4u + j / 2u);
    return i4_value(i4_header(ch), (b >> ((j & 1u) * 4u)) & 15u);
}

template <int DT> __device__ __forceinline__ float row_scale(const unsigned char *row)
{
    return DT == DT_I8 || DT == DT_Q15 ? __ldg(reinterpret_cast<const float *>(row)) : 1.0f;
}

// Where entry i's key is read: its row, or for KIVI4 its block (the token's
// place in the block: key_token)
template <int DT> __device__ __forceinline__ const unsigned char *key_row(const seg_desc &s, uint32_t i)
{
    if (DT == DT_KIVI4) return s.k + (size_t)((s.first + i) / kKiviBlock) * s.kstride;
    return s.k + (size_t)i * s.kstride;
}
template <int DT> __device__ __forceinline__ uint32_t key_token(const seg_desc &s, uint32_t i)
{
    return DT == DT_KIVI4 ? (s.first + i) % kKiviBlock : 0u;
}

// key element c of an entry (row from key_row, j from key_token)
template <int DT>
__device__ __forceinline__ float key_elem(const unsigned char *row, uint32_t j, uint32_t c, uint32_t d)
{
    return DT == DT_KIVI4 ? kivi_elem(row, j, c) : elem<DT>(row, c, d);
}

__device__ __forceinline__ uint32_t block_segment(const attend_args &a)
{
    uint32_t s = 0;
    while (s + 1 < a.n_seg && blockIdx.x >= a.seg[s + 1].block0) s++;
    return s;
}

// ln w_i + ln scale, or -inf when the weight excludes the entry
__device__ __forceinline__ float entry_log_weight(const seg_desc &s, uint32_t i, bool *inc)
{
    if (s.w == nullptr) {
        *inc = true;
        return s.ln_scale;
    }
    const float w = __ldg(s.w + i);
    *inc = w > 0.0f;
    return *inc ? s.ln_scale + logf(w) : -INFINITY;
}

// Chunk loads: key_chunk<DT>::n key elements (16 bytes of f32 or f16, 4 int8
// or Q15 codes, 8 int4 codes) and 4 value columns (16, 8, 4 or 2 bytes), for
// segments whose rows are aligned for them (seg_desc::kvec, vvec; the host
// checks; KIVI4 key blocks are never read in chunks).
template <int DT> struct key_chunk {
    static constexpr int n = DT == DT_F16 || DT == DT_I4 ? 8 : 4;
};

__device__ __forceinline__ void halves_to_floats(unsigned w, float *x)
{
    // little-endian: the element with the lower address is the low half
    x[0] = __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
    x[1] = __half2float(__ushort_as_half((unsigned short)(w >> 16)));
}

template <int DT>
__device__ __forceinline__ void load_value4(const unsigned char *row, uint32_t c, float *x, uint32_t dim)
{
    if (DT == DT_I4) { // 4 codes of one group (c % 4 == 0): 2 bytes
        const unsigned b = __ldg(reinterpret_cast<const unsigned short *>(i4_nibbles(row, dim) + c / 2u));
        const i4_group hdr = i4_header(row + 4u * (c / kI4Group));
#pragma unroll
        for (int e = 0; e < 4; e++) x[e] = i4_value(hdr, (b >> (4 * e)) & 15u);
    } else if (DT == DT_Q15) { // 4 codes: two 4-byte reads
        const short2 u = __ldg(reinterpret_cast<const short2 *>(row + 4) + c / 2u);
        const short2 w = __ldg(reinterpret_cast<const short2 *>(row + 4) + c / 2u + 1u);
        x[0] = (float)u.x, x[1] = (float)u.y, x[2] = (float)w.x, x[3] = (float)w.y;
    } else if (DT == DT_F32) {
        const float4 v = __ldg(reinterpret_cast<const float4 *>(row) + c / 4u);
        x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    } else if (DT == DT_F16) {
        const uint2 u = __ldg(reinterpret_cast<const uint2 *>(row) + c / 4u);
        halves_to_floats(u.x, x), halves_to_floats(u.y, x + 2);
    } else {
        const char4 v = __ldg(reinterpret_cast<const char4 *>(row + 4) + c / 4u);
        x[0] = (float)v.x, x[1] = (float)v.y, x[2] = (float)v.z, x[3] = (float)v.w;
    }
}

// a key chunk: 8 halves in one 16-byte load for f16, 8 int4 codes of one
// group in one 4-byte load, else the 4 elements of load_value4
template <int DT>
__device__ __forceinline__ void load_key_chunk(const unsigned char *row, uint32_t c, float *x, uint32_t dim)
{
    if (DT == DT_I4) {
        const unsigned b = __ldg(reinterpret_cast<const unsigned *>(i4_nibbles(row, dim) + c / 2u));
        const i4_group hdr = i4_header(row + 4u * (c / kI4Group));
#pragma unroll
        for (int e = 0; e < 8; e++) x[e] = i4_value(hdr, (b >> (4 * e)) & 15u);
    } else if (DT == DT_F16) {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(row) + c / 8u);
        halves_to_floats(u.x, x), halves_to_floats(u.y, x + 2), halves_to_floats(u.z, x + 4),
            halves_to_floats(u.w, x + 6);
    } else {
        load_value4<DT>(row, c, x, dim);
    }
}

// Phase 1: the scores x of rows [r0, r0 + len) of segment s for every query
// row, into sc[qi * kTile + r] (-inf: excluded or not visible). One thread
// per row (kTile == kThreads): each thread reads its whole row once and
// dots it with every query (queries in shared memory, read as broadcasts),
// so no warp reduction is needed. Returns the number of rows with weight
// > 0 of the thread's warp on lane 0 (0 elsewhere).
template <int DT, bool KVEC>
__device__ __forceinline__ unsigned score_tile(const attend_args &a, const seg_desc &s, uint32_t r0, uint32_t len,
                                               const float *qs, float *sc)
{
    static_assert(kTile == kThreads, "one row per thread");
    const uint32_t r = threadIdx.x;
    bool inc = false;
    if (r < len) {
        const uint32_t i = r0 + r;
        const float x0 = entry_log_weight(s, i, &inc);
        float dot[kMaxQ];
#pragma unroll
        for (int qi = 0; qi < kMaxQ; qi++) dot[qi] = 0.0f;
        const unsigned char *row = key_row<DT>(s, i);
        const uint32_t j = key_token<DT>(s, i);
        if (inc) {
            if (KVEC) {
                constexpr int V = key_chunk<DT>::n;
#pragma unroll kKeyUnroll
                for (uint32_t c = 0; c < a.d; c += V) {
                    float x[V];
                    load_key_chunk<DT>(row, c, x, a.d);
#pragma unroll
                    for (int qi = 0; qi < kMaxQ; qi++)
                        if ((uint32_t)qi < a.nq) {
                            // 16-byte reads of the query (c is a multiple of 4): the
                            // shared-memory pipe, not the FMAs, bounds this loop
                            const float4 *q = reinterpret_cast<const float4 *>(qs + qi * kMaxDim + c);
#pragma unroll
                            for (int e = 0; e < V; e += 4) {
                                const float4 qq = q[e / 4];
                                dot[qi] += x[e] * qq.x + x[e + 1] * qq.y + x[e + 2] * qq.z + x[e + 3] * qq.w;
                            }
                        }
                }
            } else {
                for (uint32_t c = 0; c < a.d; c++) {
                    const float x = key_elem<DT>(row, j, c, a.d);
#pragma unroll
                    for (int qi = 0; qi < kMaxQ; qi++)
                        if ((uint32_t)qi < a.nq) dot[qi] += x * qs[qi * kMaxDim + c];
                }
            }
        }
        const float ks = inc ? row_scale<DT>(row) : 0.0f;
#pragma unroll
        for (int qi = 0; qi < kMaxQ; qi++)
            if ((uint32_t)qi < a.nq) {
                const bool vis = inc && (s.causal0 < 0 || s.causal0 + (int32_t)i < a.visible[qi]);
                sc[qi * kTile + r] = vis ? x0 + a.beta * (ks * dot[qi]) : -INFINITY;
            }
    }
    const unsigned counted = (unsigned)__popc(__ballot_sync(kFull, inc));
    return threadIdx.x % 32u == 0 ? counted : 0u;
}

// One key chunk c of two rows (zeros for a row not included), dotted with
// every query row.
template <int DT>
__device__ __forceinline__ void grouped_chunk(const attend_args &a, const unsigned char *const (&row)[2],
                                              const bool (&inc)[2], uint32_t c, const float *qs, float (&dot)[2][kMaxQ])
{
    constexpr int V = key_chunk<DT>::n;
    float x[2][V];
#pragma unroll
    for (int u = 0; u < 2; u++) {
        if (inc[u])
            load_key_chunk<DT>(row[u], c * V, x[u], a.d);
        else
#pragma unroll
            for (int e = 0; e < V; e++) x[u][e] = 0.0f;
    }
#pragma unroll
    for (int qi = 0; qi < kMaxQ; qi++)
        if ((uint32_t)qi < a.nq) {
            const float4 *q = reinterpret_cast<const float4 *>(qs + qi * kMaxDim + c * V);
#pragma unroll
            for (int e = 0; e < V; e += 4) {
                const float4 qq = q[e / 4];
#pragma unroll
                for (int u = 0; u < 2; u++)
                    dot[u][qi] += x[u][e] * qq.x + x[u][e + 1] * qq.y + x[u][e + 2] * qq.z + x[u][e + 3] * qq.w;
            }
        }
}

// Phase 1 for rows of at least 8 key chunks (d a multiple of 64 in f16, of
// 32 in f32 and int8): 8 lanes per row, so a warp's load instruction reads
// 4 rows' consecutive 128 bytes (coalesced; no reliance on L1 to catch a
// thread's later chunks), two rows per lane group loaded before use; each
// lane dots its chunks with every query and 3 butterfly steps within the
// 8 lanes finish the sums. Same results contract as score_tile.
template <int DT, int UNROLL>
__device__ __forceinline__ unsigned score_tile_grouped(const attend_args &a, const seg_desc &s, uint32_t r0,
                                                       uint32_t len, const float *qs, float *sc)
{
    constexpr int V = key_chunk<DT>::n;
    constexpr uint32_t kStep = kWarps * 4u; // rows of the block per step
    const uint32_t lane = threadIdx.x % 32u, warp = threadIdx.x / 32u, sub = lane % 8u, rsub = lane / 8u;
    const uint32_t chunks = a.d / (uint32_t)V;
    unsigned counted = 0;
    for (uint32_t base = warp * 4u + rsub; base < kTile; base += 2u * kStep) { // trip count uniform per warp
        uint32_t r[2];
        bool inc[2];
        float x0[2], dot[2][kMaxQ];
        const unsigned char *row[2];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            r[u] = base + (uint32_t)u * kStep;
            const bool have = r[u] < len;
            const uint32_t i = r0 + (have ? r[u] : 0u);
            x0[u] = entry_log_weight(s, i, &inc[u]);
            inc[u] = inc[u] && have;
            row[u] = key_row<DT>(s, i); // KVEC: a row
#pragma unroll
            for (int qi = 0; qi < kMaxQ; qi++) dot[u][qi] = 0.0f;
        }
        if (UNROLL > 1) {
#pragma unroll UNROLL
            for (uint32_t c = sub; c < chunks; c += 8u) grouped_chunk<DT>(a, row, inc, c, qs, dot);
        } else { // the compiler's own unrolling (an explicit 1 would forbid it)
            for (uint32_t c = sub; c < chunks; c += 8u) grouped_chunk<DT>(a, row, inc, c, qs, dot);
        }
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const float ks = inc[u] ? row_scale<DT>(row[u]) : 0.0f;
#pragma unroll
            for (int qi = 0; qi < kMaxQ; qi++)
                if ((uint32_t)qi < a.nq) {
                    float d = dot[u][qi];
                    d += __shfl_xor_sync(kFull, d, 4);
                    d += __shfl_xor_sync(kFull, d, 2);
                    d += __shfl_xor_sync(kFull, d, 1);
                    const uint32_t i = r0 + r[u];
                    const bool vis = inc[u] && (s.causal0 < 0 || s.causal0 + (int32_t)i < a.visible[qi]);
                    if (sub == 0 && r[u] < len) sc[qi * kTile + r[u]] = vis ? x0[u] + a.beta * (ks * d) : -INFINITY;
                }
            counted += (unsigned)__popc(__ballot_sync(kFull, sub == 0 && inc[u]));
        }
    }
    return lane == 0 ? counted : 0u;
}

// Phase 1, whichever mapping the rows allow.
template <int DT, bool KVEC, int UNROLL>
__device__ __forceinline__ unsigned score_rows(const attend_args &a, const seg_desc &s, uint32_t r0, uint32_t len,
                                               const float *qs, float *sc)
{
    if constexpr (KVEC) { // chunked rows only (never KIVI4's key blocks)
        if (KVC_CUDA_GROUPED_ROWS && a.nq <= KVC_CUDA_GROUPED_MAX_Q &&
            (a.d / (uint32_t)key_chunk<DT>::n) % 8u == 0) // block-uniform
            return score_tile_grouped<DT, UNROLL>(a, s, r0, len, qs, sc);
    }
    return score_tile<DT, KVEC>(a, s, r0, len, qs, sc);
}

// How phase 3 shares out the value columns: a thread owns 4 contiguous
// columns (VVEC) or columns col0 and col0 + per (scalar), of one row group;
// group g takes the tile's rows [g * span, (g + 1) * span), span a multiple
// of 4 so that the weights p of 4 rows are one 16-byte read.
struct value_split {
    uint32_t per, groups, g, col0, span;
};

template <bool VVEC> __device__ __forceinline__ value_split split_values(uint32_t dv)
{
    value_split v;
    if (VVEC)
        v.per = dv / 4u; // dv % 4 == 0, so per <= 64
    else
        v.per = dv <= kThreads / 2 ? dv : (uint32_t)kThreads; // dv > 64: one group, two columns each
    v.groups = kThreads / v.per;
    v.span = ((kTile + v.groups - 1) / v.groups + 3u) / 4u * 4u;
    v.g = threadIdx.x / v.per, v.col0 = threadIdx.x % v.per;
    return v;
}

// column e (0..3) of the thread, or >= dv when it has none
template <bool VVEC> __device__ __forceinline__ uint32_t value_column(const value_split &v, int e)
{
    return VVEC ? v.col0 * 4u + (uint32_t)e : (e < 2 ? v.col0 + (uint32_t)e * v.per : 0xffffffffu);
}

// Phase 3: acc[q][e] += sum_r p_qr v_r[column e] over this thread's rows,
// 4 rows at a time: their values loaded first, then one 16-byte read of
// their 4 weights per query.
template <int DT, bool VVEC>
__device__ __forceinline__ void value_tile(const attend_args &a, const seg_desc &s, uint32_t r0, uint32_t len,
                                           const float *sc, float (&acc)[kMaxQ][4], const value_split &vs)
{
    if (vs.g >= vs.groups) return;
#if KVC_BUG_MATRIX
    const uint32_t end = min(len + (kvc_injected_bug == 3 ? 1u : 0u), (vs.g + 1u) * vs.span); // 3: one row past
#else
    const uint32_t end = min(len, (vs.g + 1u) * vs.span);
#endif
    for (uint32_t rb = vs.g * vs.span; rb < end; rb += 4u) {
        float v[4][4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const uint32_t r = rb + (uint32_t)u;
            const unsigned char *row = s.v + (size_t)(r0 + (r < end ? r : rb)) * s.vstride;
            const float scale = r < end ? row_scale<DT>(row) : 0.0f;
            if (VVEC) {
                if (r < end) load_value4<DT>(row, vs.col0 * 4u, v[u], a.dv);
#pragma unroll
                for (int e = 0; e < 4; e++) v[u][e] = r < end ? scale * v[u][e] : 0.0f;
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const uint32_t c = value_column<false>(vs, e);
                    v[u][e] = (r < end && c < a.dv) ? scale * elem<DT>(row, c, a.dv) : 0.0f;
                }
            }
        }
#pragma unroll
        for (int qi = 0; qi < kMaxQ; qi++)
            if ((uint32_t)qi < a.nq) {
                float4 p4 = *reinterpret_cast<const float4 *>(sc + (uint32_t)qi * kTile + rb);
                // rows past the end hold stale or unwritten weights: p = 0 there
                const float p[4] = {p4.x, rb + 1u < end ? p4.y : 0.0f, rb + 2u < end ? p4.z : 0.0f,
                                    rb + 3u < end ? p4.w : 0.0f};
#pragma unroll
                for (int u = 0; u < 4; u++)
#pragma unroll
                    for (int e = 0; e < 4; e++) acc[qi][e] += p[u] * v[u][e];
            }
    }
}

// The block's shared memory, declared once in the kernel (statics in the
// templated bodies would be one copy per instantiation).
struct split_smem {
    float *qs;                      // kMaxQ * kMaxDim queries, zero-padded
    float *m_run, *den_run, *alpha; // kMaxQ each
    unsigned *n_included;
    float *acc_s; // kMaxQ * 4 * kThreads: each thread's numerators between tiles, [(q * 4 + e) * kThreads + t]
    float *sc;    // dynamic: kMaxQ * max(kTile, dv): scores, then weights p, then the groups' sums
};

template <int DT, bool KVEC, bool VVEC, int UNROLL>
__device__ __forceinline__ void split_body(const attend_args &a, const seg_desc &s, uint32_t blk, const split_smem &sm)
{
    float *const qs = sm.qs, *const m_run = sm.m_run, *const den_run = sm.den_run, *const alpha = sm.alpha;
    float *const sc = sm.sc;
    unsigned &n_included = *sm.n_included;

    const uint32_t t = threadIdx.x, lane = t % 32u, warp = t / 32u;
    for (uint32_t i = t; i < kMaxQ * kMaxDim; i += kThreads) {
        const uint32_t qi = i / kMaxDim, c = i % kMaxDim;
        qs[i] = (qi < a.nq && c < a.d) ? a.q[qi * a.d + c] : 0.0f;
    }
    if (t < kMaxQ) m_run[t] = -INFINITY, den_run[t] = 0.0f, alpha[t] = 1.0f;
    if (t == 0) n_included = 0;
    __syncthreads();

    const value_split vs = split_values<VVEC>(a.dv);
    // the numerators wait in shared memory (thread-private slots) while the
    // scores are computed: a thread holds either the score phase's registers
    // or the value phase's, so more blocks fit on a multiprocessor
    float *const acc_s = sm.acc_s + t;
#pragma unroll
    for (int k = 0; k < kMaxQ * 4; k++) acc_s[k * kThreads] = 0.0f;

    const uint32_t first = blk * a.tiles_per_block * kTile;
    const uint32_t last = min(s.n, first + a.tiles_per_block * kTile);
    for (uint32_t r0 = first; r0 < last; r0 += kTile) {
        const uint32_t len = min((uint32_t)kTile, last - r0);
        const unsigned counted = score_rows<DT, KVEC, UNROLL>(a, s, r0, len, qs, sc);
#if KVC_BUG_MATRIX
        if (counted && kvc_injected_bug == 7)
            n_included += counted; // 7: not atomic
        else if (counted)
            atomicAdd(&n_included, counted);
        if (kvc_injected_bug != 1) __syncthreads(); // 1: no barrier after the scores
#else
        if (counted) atomicAdd(&n_included, counted);
        __syncthreads();
#endif
        // phase 2: one warp per query row
        for (uint32_t qi = warp; qi < a.nq; qi += kWarps) {
            float x[kTile / 32];
            float tmax = -INFINITY;
#pragma unroll
            for (int k = 0; k < kTile / 32; k++) {
                const uint32_t r = lane + 32u * (uint32_t)k;
#if KVC_BUG_MATRIX
                x[k] = r < len || kvc_injected_bug == 6 ? sc[qi * kTile + r] : -INFINITY; // 6: written or not
#else
                x[k] = r < len ? sc[qi * kTile + r] : -INFINITY;
#endif
                tmax = fmaxf(tmax, x[k]);
            }
            tmax = warp_max(tmax);
            const float m_old = m_run[qi], m_new = fmaxf(m_old, tmax);
            const float al =
                m_new == -INFINITY || m_old == m_new ? 1.0f : (m_old == -INFINITY ? 0.0f : expf(m_old - m_new));
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < kTile / 32; k++) {
                const uint32_t r = lane + 32u * (uint32_t)k;
                const float p = x[k] == -INFINITY ? 0.0f : expf(x[k] - m_new);
                sum += p;
                if (r < len) sc[qi * kTile + r] = p;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                m_run[qi] = m_new;
                alpha[qi] = al;
                den_run[qi] = den_run[qi] * al + ((s.role & ROLE_DEN) ? sum : 0.0f);
            }
        }
        __syncthreads();
        if (s.role & ROLE_NUM) {
            float acc[kMaxQ][4];
#pragma unroll
            for (int qi = 0; qi < kMaxQ; qi++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[qi][e] = acc_s[(qi * 4 + e) * kThreads] * alpha[qi];
            value_tile<value_type<DT>::dt, VVEC>(a, s, r0, len, sc, acc, vs);
#pragma unroll
            for (int qi = 0; qi < kMaxQ; qi++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc_s[(qi * 4 + e) * kThreads] = acc[qi][e];
        }
        __syncthreads(); // the next tile's scores overwrite sc
    }

    // the row groups' partial numerators (in acc_s since the last tile's
    // barrier), added over the groups in a fixed order: one column of one
    // query per thread, the results independent of the schedule
    float *o = a.part + (size_t)blockIdx.x * a.nq * (a.dv + 2u);
    for (uint32_t i = t; i < a.nq * a.dv; i += kThreads) {
        const uint32_t qi = i / a.dv, c = i % a.dv;
        // the thread slot (col0) and register (e) that hold column c in every group
        const uint32_t col0 = VVEC ? c / 4u : (c < vs.per ? c : c - vs.per);
        const uint32_t e = VVEC ? c % 4u : (c < vs.per ? 0u : 1u);
        const float *slot = sm.acc_s + (qi * 4u + e) * kThreads + col0;
        float sum = 0.0f;
        for (uint32_t h = 0; h < vs.groups; h++) sum += slot[h * vs.per];
        o[qi * (a.dv + 2u) + 2u + c] = sum;
    }
    if (t < a.nq) o[t * (a.dv + 2u)] = m_run[t], o[t * (a.dv + 2u) + 1u] = den_run[t];
    if (t == 0 && a.included != nullptr) atomicAdd(a.included, n_included);
}

template <int DT, int UNROLL>
__device__ void split_vec(const attend_args &a, const seg_desc &g, uint32_t blk, const split_smem &sm)
{
    if constexpr (DT == DT_KIVI4) { // key blocks: element loads only
        if (g.vvec)
            split_body<DT, false, true, UNROLL>(a, g, blk, sm);
        else
            split_body<DT, false, false, UNROLL>(a, g, blk, sm);
    } else if (g.kvec && g.vvec) {
        split_body<DT, true, true, UNROLL>(a, g, blk, sm);
    } else if (g.kvec) {
        split_body<DT, true, false, UNROLL>(a, g, blk, sm);
    } else if (g.vvec) {
        split_body<DT, false, true, UNROLL>(a, g, blk, sm);
    } else {
        split_body<DT, false, false, UNROLL>(a, g, blk, sm);
    }
}

// MIN_BLOCKS, UNROLL: KVC_CUDA_MIN_BLOCKS and 1, or the wide configuration
// (KVC_CUDA_WIDE_*; the host launches it only on all-f32 rows, but it is
// correct on any). QUANT: the instantiation that also reads Q15, int4 and
// KIVI4 segments (KVC_CUDA_QUANT_MIN_BLOCKS); without it those types are not
// compiled in (the host never sends them there).
template <int MIN_BLOCKS, int UNROLL, bool QUANT>
__global__ void __launch_bounds__(kThreads, MIN_BLOCKS) split_kernel(const attend_args a)
{
    __shared__ __align__(16) float qs[kMaxQ * kMaxDim];
    __shared__ float m_run[kMaxQ], den_run[kMaxQ], alpha[kMaxQ];
    __shared__ unsigned n_included;
    __shared__ float acc_s[kMaxQ * 4 * kThreads];
    KVC_DYN_SMEM(float, sc);
    const split_smem sm = {qs, m_run, den_run, alpha, &n_included, acc_s, sc};
    const uint32_t s = block_segment(a);
    const seg_desc &g = a.seg[s];
    const uint32_t blk = blockIdx.x - g.block0;
    // block-uniform: one segment, one storage type, one alignment
    if (g.dtype == DT_F32)
        split_vec<DT_F32, UNROLL>(a, g, blk, sm);
    else if (g.dtype == DT_F16)
        split_vec<DT_F16, UNROLL>(a, g, blk, sm);
    else if (!QUANT || g.dtype == DT_I8)
        split_vec<DT_I8, UNROLL>(a, g, blk, sm);
    else if constexpr (QUANT) {
        if (g.dtype == DT_Q15)
            split_vec<DT_Q15, UNROLL>(a, g, blk, sm);
        else if (g.dtype == DT_I4)
            split_vec<DT_I4, UNROLL>(a, g, blk, sm);
        else
            split_vec<DT_KIVI4, UNROLL>(a, g, blk, sm);
    }
}

// A block-wide reduction (max or sum) of one value per thread; every thread
// gets the result. Warp 0 finishes the per-warp partials.
template <bool MAX> __device__ float block_reduce(float v, float *red, float *result)
{
    const uint32_t lane = threadIdx.x % 32u, warp = threadIdx.x / 32u;
#if KVC_BUG_MATRIX
    if (kvc_injected_bug == 5) { // a full-mask shuffle reached by 16 lanes
        if (lane < 16) v = MAX ? fmaxf(v, __shfl_xor_sync(kFull, v, 16)) : v + __shfl_xor_sync(kFull, v, 16);
        for (int o = 8; o > 0; o >>= 1)
            v = MAX ? fmaxf(v, __shfl_xor_sync(kFull, v, o)) : v + __shfl_xor_sync(kFull, v, o);
    } else {
        v = MAX ? warp_max(v) : warp_sum(v);
    }
#else
    v = MAX ? warp_max(v) : warp_sum(v);
#endif
    if (lane == 0) red[warp] = v;
#if KVC_BUG_MATRIX
    if (kvc_injected_bug != 2) __syncthreads(); // 2: no barrier between the write and the read
#else
    __syncthreads();
#endif
    if (warp == 0) {
        float w = lane < (uint32_t)kWarps ? red[lane] : (MAX ? -INFINITY : 0.0f);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float other = __shfl_down_sync(kFull, w, o);
            w = MAX ? fmaxf(w, other) : w + other;
        }
        if (lane == 0) *result = w;
#if KVC_BUG_MATRIX
        if (kvc_injected_bug == 4) __syncthreads(); // 4: a barrier inside if (warp == 0)
#endif
    }
    __syncthreads();
    return *result;
}

__global__ void __launch_bounds__(kThreads) merge_kernel(const attend_args a)
{
    __shared__ float red[kWarps];
    __shared__ float result;
    KVC_DYN_SMEM(float, factor); // n_blocks
    const uint32_t qi = blockIdx.x, t = threadIdx.x, W = a.dv + 2u;
    const float *p = a.part + (size_t)qi * W;
    const size_t stride = (size_t)a.nq * W;

    float m = -INFINITY;
    for (uint32_t b = t; b < a.n_blocks; b += kThreads) m = fmaxf(m, p[b * stride]);
    const float M = block_reduce<true>(m, red, &result);
    float den = 0.0f;
    for (uint32_t b = t; b < a.n_blocks; b += kThreads) {
        const float mb = p[b * stride];
        const float f = mb == -INFINITY ? 0.0f : expf(mb - M);
        factor[b] = f;
        den += f * p[b * stride + 1];
    }
#if KVC_BUG_MATRIX
    if (kvc_injected_bug != 8) __syncthreads(); // 8, the control: a redundant barrier dropped
#else
    __syncthreads(); // redundant: block_reduce below has barriers (the matrix's control)
#endif
    den = block_reduce<false>(den, red, &result);
    // A query that saw entries but whose f32 den is below (n + 1) 2^-100 (a
    // view with separate N and D sets, D far below N's maximum:
    // core/src/shared/f32_state.h) cannot be answered in f32: its outputs
    // are NaN, which the table (attend_or_reference) answers from the reference.
    uint32_t n_entries = 0;
    for (uint32_t s = 0; s < a.n_seg; s++) n_entries += a.seg[s].n;
    const bool gated = M != -INFINITY && !(den >= ((float)n_entries + 1.0f) * 0x1p-100f);
    const float inv = gated ? NAN : den > 0.0f ? 1.0f / den : 0.0f;
    for (uint32_t c = t; c < a.dv; c += kThreads) {
        float acc = 0.0f;
        for (uint32_t b = 0; b < a.n_blocks; b++) acc += factor[b] * p[b * stride + 2 + c];
        a.out[qi * a.dv + c] = acc * inv;
        if (a.state != nullptr) a.state[qi * W + 2 + c] = acc;
    }
    if (t == 0) {
        a.stats[qi * 2] = M, a.stats[qi * 2 + 1] = den;
        if (a.state != nullptr) a.state[qi * W] = M, a.state[qi * W + 1] = den;
    }
}

template <int DT, bool KVEC>
__device__ __forceinline__ void mass_body(const attend_args &a, const seg_desc &s, uint32_t blk, float *qs, float *sc)
{
    const uint32_t t = threadIdx.x;
    for (uint32_t i = t; i < kMaxQ * kMaxDim; i += kThreads) {
        const uint32_t qi = i / kMaxDim, c = i % kMaxDim;
        qs[i] = (qi < a.nq && c < a.d) ? a.q[qi * a.d + c] : 0.0f;
    }
    __syncthreads();
    const uint32_t first = blk * a.tiles_per_block * kTile;
    const uint32_t last = min(s.n, first + a.tiles_per_block * kTile);
    for (uint32_t r0 = first; r0 < last; r0 += kTile) {
        const uint32_t len = min((uint32_t)kTile, last - r0);
        (void)score_rows<DT, KVEC, 1>(a, s, r0, len, qs, sc);
        __syncthreads();
        for (uint32_t r = t; r < len; r += kThreads) {
            float sum = 0.0f;
            for (uint32_t qi = 0; qi < a.nq; qi++) {
                const float x = sc[qi * kTile + r], M = a.stats[qi * 2], den = a.stats[qi * 2 + 1];
                if (x != -INFINITY && den > 0.0f) sum += expf(x - M) / den;
            }
            a.mass[s.entry0 + r0 + r] = sum;
        }
        __syncthreads();
    }
}

template <int DT> __device__ void mass_vec(const attend_args &a, const seg_desc &g, uint32_t blk, float *qs, float *sc)
{
    if constexpr (DT == DT_KIVI4) // key blocks: element loads only
        mass_body<DT, false>(a, g, blk, qs, sc);
    else if (g.kvec)
        mass_body<DT, true>(a, g, blk, qs, sc);
    else
        mass_body<DT, false>(a, g, blk, qs, sc);
}

__global__ void __launch_bounds__(kThreads, KVC_CUDA_MIN_BLOCKS) mass_kernel(const attend_args a)
{
    __shared__ __align__(16) float qs[kMaxQ * kMaxDim];
    KVC_DYN_SMEM(float, sc);
    const uint32_t s = block_segment(a);
    const seg_desc &g = a.seg[s];
    const uint32_t blk = blockIdx.x - g.block0;
    if (g.dtype == DT_F32)
        mass_vec<DT_F32>(a, g, blk, qs, sc);
    else if (g.dtype == DT_F16)
        mass_vec<DT_F16>(a, g, blk, qs, sc);
    else if (g.dtype == DT_I8)
        mass_vec<DT_I8>(a, g, blk, qs, sc);
    else if (g.dtype == DT_Q15)
        mass_vec<DT_Q15>(a, g, blk, qs, sc);
    else if (g.dtype == DT_I4)
        mass_vec<DT_I4>(a, g, blk, qs, sc);
    else
        mass_vec<DT_KIVI4>(a, g, blk, qs, sc);
}

} // namespace kvc_cuda

#endif
