// The batched decode's work plan (kvc_cuda_batch.cu), a pure host function
// so that the tests can enumerate it: every entry's pages are cut into work
// items of whole pages for `slots` resident blocks (the split kernel's
// occupancy times the multiprocessors).
//
//   - An entry's items have equal page counts (floor or ceil of pages /
//     splits; no remainder stubs), at most the chunk unless that would leave
//     an item below kMinItemPages pages (FlashInfer's 128 tokens), which
//     only an entry with fewer pages has.
//   - Every entry gets one item at least, an empty entry a 0-page one: the
//     split kernel writes the output of an entry with one item itself, and
//     the merge runs only over the entries with more.
//   - The split size: for k = 1 .. kMaxWaves waves of slots, the smallest
//     chunk whose items fit k * slots (a binary search, as FlashInfer's
//     scheduler); of those, the one whose modelled time is least (whole waves
//     of the largest item, plus a per-item cost; FlashAttention's wave
//     efficiency in another form). When the entries alone fill the slots,
//     k = 1 leaves them whole, and more waves split only when that evens the
//     waves out.
// Items never exceed kMaxWaves * slots + entries: the workspace's capacity.
#ifndef KVC_CUDA_BATCH_PLAN_H
#define KVC_CUDA_BATCH_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/batch_layout.cuh"

namespace kvc_cuda
{

constexpr size_t kMinItemPages = 2;
constexpr size_t kMaxWaves = 4;
// An item's fixed cost in pages of streaming (its prologue, its state, its
// share of the merge): a modelling constant, to be measured on a device.
constexpr double kItemCostPages = 0.5;

inline size_t pages_of(int32_t rows) { return ((size_t)rows + 63u) / 64u; }

// The items an entry of p pages is cut into with chunk c: ceil(p / c), but
// no more than leave kMinItemPages pages to each (and one at least).
inline size_t splits_of(size_t p, size_t c)
{
    const size_t by_chunk = (p + c - 1u) / c, by_min = p / kMinItemPages;
    return p == 0 || by_min <= 1u ? 1u : by_chunk < by_min ? by_chunk : by_min;
}

// Items made with chunk c.
inline size_t items_for_chunk(const int32_t *n_rows, size_t E, size_t c)
{
    size_t n = 0;
    for (size_t e = 0; e < E; e++) n += splits_of(pages_of(n_rows[e]), c);
    return n;
}

inline size_t plan_capacity(size_t slots, size_t E) { return kMaxWaves * slots + E; }

// The chunk (pages per item at most) the plan cuts entries with; n_rows[e] >= 0.
inline size_t plan_chunk(const int32_t *n_rows, size_t E, size_t slots)
{
    size_t max_p = 0;
    for (size_t e = 0; e < E; e++) max_p = pages_of(n_rows[e]) > max_p ? pages_of(n_rows[e]) : max_p;
    if (max_p <= kMinItemPages || slots == 0) return max_p > 0 ? max_p : 1u;
    size_t best_c = max_p;
    double best_cost = -1.0;
    for (size_t k = 1; k <= kMaxWaves; k++) {
        // the smallest chunk in [kMinItemPages, max_p] whose items fit k * slots (max_p: one per entry)
        size_t lo = kMinItemPages, hi = max_p;
        if (items_for_chunk(n_rows, E, hi) > k * slots) {
            lo = hi; // the entries alone pass k waves: leave them whole
        } else {
            while (lo < hi) {
                const size_t mid = lo + (hi - lo) / 2u;
                if (items_for_chunk(n_rows, E, mid) <= k * slots)
                    hi = mid;
                else
                    lo = mid + 1u;
            }
        }
        const size_t items = items_for_chunk(n_rows, E, lo);
        const double waves = (double)((items + slots - 1u) / slots);
        const double cost = waves * (double)lo + kItemCostPages * (double)items / (double)slots;
        if (best_cost < 0.0 || cost < best_cost - 1e-9) best_cost = cost, best_c = lo;
    }
    return best_c;
}

// Writes the items of chunk c and each entry's first item (first[E] = the
// count); items must hold items_for_chunk(n_rows, E, c). Returns the count.
inline size_t plan_items(const int32_t *n_rows, size_t E, size_t c, batch_item *items, int32_t *first)
{
    size_t n = 0;
    for (size_t e = 0; e < E; e++) {
        first[e] = (int32_t)n;
        const size_t p = pages_of(n_rows[e]);
        if (p == 0) {
            items[n++] = batch_item{(int32_t)e, 0, 0, 0};
            continue;
        }
        const size_t s = splits_of(p, c), base = p / s, extra = p % s; // the first `extra` take one more
        size_t p0 = 0;
        for (size_t i = 0; i < s; i++) {
            const size_t np = base + (i < extra ? 1u : 0u);
            const size_t rows = (size_t)n_rows[e] - p0 * 64u;
            items[n++] = batch_item{(int32_t)e, (int32_t)p0, (int32_t)np, (int32_t)(rows < np * 64u ? rows : np * 64u)};
            p0 += np;
        }
    }
    first[E] = (int32_t)n;
    return n;
}

} // namespace kvc_cuda

#endif
