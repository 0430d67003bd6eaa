// The paged cache's layout and the query scaling rule of the batched decode
// (batch_decode.cuh), shared by the kernels, the host side and the tests.
#ifndef KVC_CUDA_BATCH_LAYOUT_CUH
#define KVC_CUDA_BATCH_LAYOUT_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kvc_cuda_compat.h"

namespace kvc_cuda
{

constexpr uint32_t kPageRows = 64;      // KVC_CUDA_PAGE_ROWS
constexpr uint32_t kBatchThreads = 128; // 4 warps, 16 rows of a page each
constexpr uint32_t kMmaM = 16;          // query rows of one tensor-core tile
// Blocks per multiprocessor the split kernel's registers are budgeted for:
// three for every type (<= 170 registers each; two page buffers of f16
// d = 128 rows, 66 KiB, let three share an sm_90's shared memory). int8
// needed 195 registers (two blocks) while it kept a separate value product;
// with the value scale folded into the rescale it needs about 150.
__host__ __device__ constexpr int batch_min_blocks(int) { return 3; }
enum { BT_F16 = 1, BT_I8 = 2, BT_I4 = 6 }; // KVC_DTYPE_F16, _I8, _I4
enum { BT_I4R = 32 };                      // KVC_CUDA_DTYPE_I4_ROW: int4, one group per row (device pages only)
__host__ __device__ constexpr bool is_int4(int DT) { return DT == BT_I4 || DT == BT_I4R; }
// int4 groups per row: of 32 elements (the core's int4), or the whole row
__host__ __device__ constexpr uint32_t i4_groups(int DT, uint32_t d) { return DT == BT_I4 ? d / 32u : 1u; }
enum { EL_F32 = 0, EL_F16 = 1, EL_BF16 = 2 }; // kvc_cuda_elem

// One work item of the split kernel: pages [page0, page0 + n_pages) of entry
// `entry`'s list, of which the first `rows` rows are in the cache (an empty
// entry has one item of 0 pages, which writes its zero output).
struct batch_item {
    int32_t entry, page0, n_pages, rows;
};

// The workspace: [uint32 n_items, uint32 n_merge, pad to 16][items: capacity]
// [int32 entry_first[n_entries + 1]][int32 merge_entries[n_entries]]
// [pad to 16][states: capacity * group * {m, l}][capacity * group * d floats].
// An entry with one item needs no state (its block writes the output); the
// merge runs over merge_entries[0 .. n_merge), the entries with more.
struct batch_ws {
    uint32_t capacity, n_entries, group, d;
    __host__ __device__ size_t items_offset() const { return 16u; }
    __host__ __device__ size_t entry_offset() const { return 16u + (size_t)capacity * sizeof(batch_item); }
    __host__ __device__ size_t merge_offset() const { return entry_offset() + 4u * ((size_t)n_entries + 1u); }
    __host__ __device__ size_t ml_offset() const { return (merge_offset() + 4u * (size_t)n_entries + 15u) / 16u * 16u; }
    __host__ __device__ size_t acc_offset() const
    {
        return ml_offset() + ((size_t)capacity * group * 2u * 4u + 15u) / 16u * 16u;
    }
    __host__ __device__ size_t bytes() const { return acc_offset() + (size_t)capacity * group * d * 4u; }
};

// Row bytes of the core's layouts (KVC_ROW_BYTES) for a head_dim that is a multiple of 32.
__host__ __device__ constexpr uint32_t batch_row_bytes(int DT, uint32_t d)
{
    return DT == BT_F16 ? 2u * d : DT == BT_I8 ? 4u + d : 4u * (d / 32u) + d / 2u;
}
__host__ __device__ constexpr uint32_t align16(uint32_t x) { return (x + 15u) / 16u * 16u; }
// Bytes of a row in a page's key block: the core's row for f16; the d codes
// alone for int8 and the d / 2 nibble bytes for int4 (the scales and group
// headers have their own arrays, so that a code row is a whole number of
// 16-byte chunks and can be swizzled).
__host__ __device__ constexpr uint32_t page_row_bytes(int DT, uint32_t d)
{
    return DT == BT_I8 ? d : is_int4(DT) ? d / 2u : batch_row_bytes(DT, d);
}
// page = [K rows][V block][scales][float log_weight[64]][uint8 role[64]], each part 16-byte aligned:
//   f16   K and V rows in the core's row layout; no scales part
//   int8  K code rows [64][d]; V codes transposed, [d][64] (a column's 64 codes together, so that
//         the P V product's fragment, four rows of one column, is one 32-bit load); then
//         float k_scale[64], float v_scale[64]
//   int4  K nibble rows [64][d / 2] (the core's nibble order: element 2b in the low nibble of byte b);
//         V by column pairs, [d / 2][64]: byte (b, r) is row r's byte b (columns 2b, 2b + 1), so that a
//         32-bit load holds four rows of two columns; then the group headers {f16 scale, f16 minimum}
//         of the keys [64][groups] and of the values [64][groups] (groups of 32, or one per row)
__host__ __device__ constexpr uint32_t page_v_offset(int DT, uint32_t d)
{
    return align16(kPageRows * page_row_bytes(DT, d));
}
__host__ __device__ constexpr uint32_t page_scale_offset(int DT, uint32_t d) { return 2u * page_v_offset(DT, d); }
__host__ __device__ constexpr uint32_t page_scale_bytes(int DT, uint32_t d)
{
    return DT == BT_I8 ? 2u * 4u * kPageRows : is_int4(DT) ? align16(2u * 4u * kPageRows * i4_groups(DT, d)) : 0u;
}
__host__ __device__ constexpr uint32_t page_lw_offset(int DT, uint32_t d)
{
    return page_scale_offset(DT, d) + page_scale_bytes(DT, d);
}
__host__ __device__ constexpr uint32_t page_role_offset(int DT, uint32_t d)
{
    return page_lw_offset(DT, d) + 4u * kPageRows;
}
__host__ __device__ constexpr uint32_t page_bytes(int DT, uint32_t d)
{
    return align16(page_role_offset(DT, d) + kPageRows);
}

// Row r (0..63) of a page's keys (value = false) or values (true) in the
// core's row layout (KVC_ROW_BYTES; f16, int8 and int4 pages), whatever the
// page keeps: what the tests, the benchmark and the Python bindings hand the
// reference kernels.
inline void page_row_to_core(int DT, uint32_t d, const unsigned char *page, uint32_t r, bool value, unsigned char *out)
{
    const unsigned char *block = page + (value ? page_v_offset(DT, d) : 0u);
    if (DT == BT_F16) {
        memcpy(out, block + r * batch_row_bytes(DT, d), batch_row_bytes(DT, d));
    } else if (DT == BT_I8) {
        memcpy(out, page + page_scale_offset(DT, d) + (value ? 4u * kPageRows : 0u) + 4u * r, 4);
        for (uint32_t c = 0; c < d; c++) out[4u + c] = value ? block[c * kPageRows + r] : block[r * d + c];
    } else { // int4 in groups of 32: headers, then nibble bytes
        const uint32_t groups = i4_groups(DT, d);
        memcpy(out, page + page_scale_offset(DT, d) + (value ? 4u * kPageRows * groups : 0u) + 4u * groups * r,
               4u * groups);
        for (uint32_t b = 0; b < d / 2u; b++)
            out[4u * groups + b] = value ? block[b * kPageRows + r] : block[r * d / 2u + b];
    }
}

// The inverse: a row in the core's row layout (f16, int8, int4 in groups of
// 32) into row r of a page's keys (value = false) or values (true), as the
// same codes: what kvc_cuda_batch_put_rows writes for a mirror of a stream.
__host__ __device__ inline void core_row_to_page(int DT, uint32_t d, unsigned char *page, uint32_t r, bool value,
                                                 const unsigned char *in)
{
    unsigned char *block = page + (value ? page_v_offset(DT, d) : 0u);
    if (DT == BT_F16) {
        const uint32_t rb = batch_row_bytes(DT, d);
        for (uint32_t b = 0; b < rb; b++) block[r * rb + b] = in[b];
    } else if (DT == BT_I8) {
        unsigned char *scale = page + page_scale_offset(DT, d) + (value ? 4u * kPageRows : 0u) + 4u * r;
        for (uint32_t b = 0; b < 4u; b++) scale[b] = in[b];
        for (uint32_t c = 0; c < d; c++) (value ? block[c * kPageRows + r] : block[r * d + c]) = in[4u + c];
    } else { // int4 in groups of 32: headers, then nibble bytes
        const uint32_t groups = i4_groups(DT, d);
        unsigned char *hdr = page + page_scale_offset(DT, d) + (value ? 4u * kPageRows * groups : 0u) + 4u * groups * r;
        for (uint32_t b = 0; b < 4u * groups; b++) hdr[b] = in[b];
        for (uint32_t b = 0; b < d / 2u; b++)
            (value ? block[b * kPageRows + r] : block[r * d / 2u + b]) = in[4u * groups + b];
    }
}

// Row r of a page's keys or values as floats, as the kernel reads them
// (int4: minimum + code x scale of its group, in f32): the reference rows of
// a page type the core has no row layout for (int4, one group per row).
inline float page_half_at(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    const uint32_t sign = (h >> 15) & 1u, e = (h >> 10) & 31u, m = h & 1023u;
    float x = e == 0 ? (float)m * 5.9604644775390625e-08f : e == 31 ? (m ? NAN : INFINITY) : 0.0f;
    if (e > 0 && e < 31) {
        const uint32_t bits = (sign << 31) | ((e + 112u) << 23) | (m << 13);
        memcpy(&x, &bits, 4);
        return x;
    }
    return sign ? -x : x;
}
inline void page_row_to_f32(int DT, uint32_t d, const unsigned char *page, uint32_t r, bool value, float *out)
{
    const uint32_t groups = i4_groups(DT, d), gs = d / groups;
    const unsigned char *block = page + (value ? page_v_offset(DT, d) : 0u);
    const unsigned char *hdr =
        page + page_scale_offset(DT, d) + (value ? 4u * kPageRows * groups : 0u) + 4u * groups * r;
    for (uint32_t c = 0; c < d; c++) {
        const unsigned char byte = value ? block[(c / 2u) * kPageRows + r] : block[r * d / 2u + c / 2u];
        const float sc = page_half_at(hdr + 4u * (c / gs)), mn = page_half_at(hdr + 4u * (c / gs) + 2u);
        out[c] = mn + (float)((byte >> (4u * (c & 1u))) & 15u) * sc;
    }
}

// Dynamic shared memory of the split kernel: the f16 query tile, its row
// scales and group sums, then two page buffers (reused for the four warps' states at the end).
// (the f16 rows, their scales sigma, and int4's query sums per 32 dims: kMmaM x d / 32 floats)
__host__ __device__ constexpr uint32_t batch_q_bytes(uint32_t d)
{
    return kMmaM * d * 2u + kMmaM * 4u + kMmaM * (d / 32u) * 4u;
}
__host__ __device__ constexpr uint32_t batch_smem_bytes(int DT, uint32_t d)
{
    return batch_q_bytes(d) +
           (2u * page_bytes(DT, d) > 4u * kMmaM * (d + 2u) * 4u ? 2u * page_bytes(DT, d) : 4u * kMmaM * (d + 2u) * 4u);
}

// sigma of a query row: 2^(E - 126) for a normal max |q beta| of exponent
// field E (so that max / sigma is in [1/2, 1)), capped at 2^127; 1 for 0, a
// subnormal, an infinity or a NaN. (Bits, not frexpf: no local memory.)
__host__ __device__ inline float query_scale(float amax)
{
    uint32_t b;
    memcpy(&b, &amax, 4);
    const uint32_t E = (b >> 23) & 0xffu;
    if (E == 0u || E == 0xffu) return 1.0f;
    const uint32_t bits = (E < 254u ? E + 1u : 254u) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return s;
}

} // namespace kvc_cuda

#endif
