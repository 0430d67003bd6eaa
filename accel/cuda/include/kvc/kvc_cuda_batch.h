/**
 * @file kvc_cuda_batch.h
 * @brief The server build's decode step: a paged, device-resident KV cache
 *        for a batch of sequences, appended and attended with one launch per
 *        layer (docs/gpu.md has the design and a complete decoder example).
 *
 * The cache of one layer is a **pool of pages** in device memory. A page
 * holds KVC_CUDA_PAGE_ROWS rows of one storage type (f16; int8 with one f32
 * scale per row; int4 in groups of 32, or one group per row) for the keys,
 * the same number of value rows, and per row a log-weight and a role:
 *
 *     page = [K rows][V block][scales][float log_weight[64]][uint8 role[64]]   (each part 16-byte aligned)
 *
 * laid out for the kernel's loads (int8 values transposed, int4 values by
 * column pairs, scales and group headers apart: docs/gpu.md has the table).
 *
 * Every (sequence b, kv head h) of the layer is one **entry**,
 * e = b * n_kv_heads + h, with its own page list (CSR: page_indptr[e] ..
 * page_indptr[e+1] index page_ids) and its own row count: each kv head
 * evicts and weighs its own rows, as the core's streams do. A row's
 * **slot** is page_id * KVC_CUDA_PAGE_ROWS + row.
 *
 * What runs where. The host decides (the core's methods: which slot a new
 * token takes, which row an eviction frees, the weights and N/D roles of the
 * weighted methods); the device stores and reads. An eviction is an index
 * edit: the new token is appended into the victim's slot. A reweighting is
 * kvc_cuda_batch_set_rows. Nothing is copied between pages.
 *
 * Per step: kvc_cuda_batch_append (the step's K/V, quantised on the device),
 * kvc_cuda_batch_plan (host: split the ragged lengths into balanced work
 * items and copy them to the workspace), kvc_cuda_batch_attend (one split
 * launch for the whole layer, and a merge launch when an entry is split over
 * several blocks; no allocation, no host synchronisation, capturable in a
 * CUDA graph when the plan asked for a fixed grid). Query and output tensors
 * are f32, f16 or bf16 with strides.
 *
 * Arithmetic: the query-head group's score and value products run on tensor
 * cores (m16n8k16, f16 inputs, f32 accumulation); queries are rounded to f16
 * after a per-row power-of-two scaling (no overflow for any finite input).
 * int8 and int4 codes enter the products as exact f16 integers: the key
 * scale (int4: the group's scale and minimum) is applied to the score, the
 * value scale is folded into the probabilities and an int4 group's minimum
 * summed apart. The softmax and the merges are f32. The page layouts are
 * the kernel's (docs/gpu.md), not the core's rows.
 */
#ifndef KVC_CUDA_BATCH_H
#define KVC_CUDA_BATCH_H

#if !defined(KVC_ADVANCED)
#error                                                                                                                 \
    "kvc_cuda_batch.h is a backend's header, in the advanced tier: #define KVC_ADVANCED before including kvc headers (docs/api.md)"
#endif
#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc_kernels.h"
#include "kvc/kvc_mirror.h"
#include "kvc/kvc_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Rows per page (keys and values). */
#define KVC_CUDA_PAGE_ROWS 64u
/** Query heads per kv head at most (the M side of one tensor-core tile). */
#define KVC_CUDA_BATCH_MAX_GROUP 16u

/** A page type of the device only: int4 with one group (f16 scale and
 *  minimum) per row of head_dim elements, 4 header bytes a row instead of
 *  head_dim / 8: 68 B a row at d = 128, 0.266x of f16's 256 (141 B a cached
 *  token with both rows, its log-weight and role: 0.275x of f16's 512 + 5).
 *  Its error bound is int4's with the group's range over the whole row
 *  (docs/gpu.md). The core's storage types have no such row; the pool is
 *  read back with the layout in accel/cuda/kernels/batch_layout.cuh. */
#define KVC_CUDA_DTYPE_I4_ROW 32u

/** Element type of a query or output tensor. */
typedef enum kvc_cuda_elem {
    KVC_CUDA_F32 = 0,  /**< IEEE binary32 */
    KVC_CUDA_F16 = 1,  /**< IEEE binary16 */
    KVC_CUDA_BF16 = 2, /**< bfloat16 */
} kvc_cuda_elem;

/** A [n_seqs][n_heads][dim] device tensor whose last dimension is contiguous
 *  (a torch tensor's data_ptr and strides, in elements). */
typedef struct kvc_cuda_tensor {
    void *data;          /**< device memory, aligned to the element size */
    kvc_cuda_elem elem;  /**< KVC_CUDA_F32, _F16 or _BF16 */
    int64_t seq_stride;  /**< elements between sequences, >= 0 */
    int64_t head_stride; /**< elements between heads, >= 0 */
} kvc_cuda_tensor;

/** One layer's paged cache: the shape and the pool. */
typedef struct kvc_cuda_paged {
    unsigned dtype;      /**< row storage: KVC_DTYPE_F16, KVC_DTYPE_I8, KVC_DTYPE_I4 or KVC_CUDA_DTYPE_I4_ROW */
    uint32_t head_dim;   /**< d = dv: 64 or 128 */
    uint32_t n_kv_heads; /**< kv heads of the layer, 1 .. 1024 */
    uint32_t
        group;  /**< query heads per kv head, 1 .. KVC_CUDA_BATCH_MAX_GROUP (query head j reads kv head j / group) */
    float beta; /**< score scale (1/sqrt(d) usually), finite and > 0 */
    void *pool; /**< device memory, 256-byte aligned, n_pages * kvc_cuda_page_bytes(dtype, head_dim) bytes */
    uint32_t n_pages;    /**< pages in the pool, 1 .. 2^31 / KVC_CUDA_PAGE_ROWS */
    uint32_t unweighted; /**< 1: every row keeps weight 1 and role both (exact, sink-window, uniform and the
                              other eviction-only methods): attend reads no log-weights or roles (320 B a page
                              less) and kvc_cuda_batch_set_rows refuses; 0 (the default): rows carry weights */
} kvc_cuda_paged;

/** Role bits of a row (kvc_set_role's values): 1 numerator, 2 denominator, 3 both. */

/** @brief Bytes of one page of @p dtype rows of dimension @p head_dim
 *  (a multiple of 16); 0 for a type or dimension the batch kernels refuse. */
size_t kvc_cuda_page_bytes(unsigned dtype, size_t head_dim);

/** @brief KVC_OK when @p c describes a cache the batch calls accept;
 *  KVC_E_UNSUPPORTED for a storage type or head_dim they do not implement;
 *  KVC_E_ARG otherwise. */
kvc_status kvc_cuda_paged_check(const kvc_cuda_paged *c);

/**
 * @brief Stores one step's keys and values of a whole batch, quantised on the
 *        device into the slots the host chose: entry e = b * n_kv_heads + h
 *        writes k[b][h] and v[b][h] into slot slots[e] (the next free row, or
 *        the row an eviction frees), with log-weight 0 and role 3 (both).
 * @param slots device, n_seqs * n_kv_heads slots in 0 .. n_pages * 64 - 1, or -1 to skip the entry.
 * @param k, v [n_seqs][n_kv_heads][head_dim] device tensors (f32, f16 or bf16).
 * @param n_seqs 1 .. 65535. @param stream a cudaStream_t, NULL for the default.
 * @return KVC_OK (launched); KVC_E_ARG / KVC_E_UNSUPPORTED as kvc_cuda_paged_check,
 *         or a NULL or misaligned tensor; KVC_E_BACKEND for a launch error.
 *         Slots out of range are skipped by the device (it cannot report them).
 */
kvc_status kvc_cuda_batch_append(const kvc_cuda_paged *c, size_t n_seqs, const int32_t *slots, kvc_cuda_tensor k,
                                 kvc_cuda_tensor v, void *stream);

/**
 * @brief Sets the weight and role of n rows (device arrays): what the
 *        weighted methods decide (merged clusters' counts, halving levels,
 *        N/D roles) and what an exclusion is (weight 0).
 * @param slots device, n slots (-1 or out of range: skipped). @param weights device, n
 *        values >= 0 (0 excludes the row; NaN and negatives exclude it too).
 * @param roles device, n values 1, 2 or 3 (others exclude the row). @param n 0 .. 2^31.
 * @return KVC_OK (launched, or n = 0); KVC_E_ARG for NULL arrays, n past 2^31, or a cache
 *         declared unweighted (its weights are never read); KVC_E_BACKEND for a launch error.
 */
kvc_status kvc_cuda_batch_set_rows(const kvc_cuda_paged *c, size_t n, const int32_t *slots, const float *weights,
                                   const uint8_t *roles, void *stream);

/**
 * @brief Writes @p n rows given in the core's row layout (kvc_row_bytes(dtype,
 *        head_dim) bytes each: the codes a stream's arena holds) into their
 *        slots as the same codes, keys or values: what a mirror of the core's
 *        streams sends (kvc_mirror.h, kvc_cuda_stage_edits). f16, int8 and
 *        int4 pages (the core has no int4-row rows). Weights and roles are not
 *        touched (kvc_cuda_batch_set_rows).
 * @param slots device, n slots (-1 or out of range: skipped).
 * @param halves device, n bytes: 0 the slot's key row, 1 its value row.
 * @param rows device, n rows of kvc_row_bytes(dtype, head_dim) bytes, back to back.
 * @param n 0 .. 2^31.
 * @return KVC_OK (launched, or n = 0); KVC_E_UNSUPPORTED (int4-row pages);
 *         KVC_E_ARG (NULL arrays, n past 2^31, a bad cache); KVC_E_BACKEND for a launch error.
 */
kvc_status kvc_cuda_batch_put_rows(const kvc_cuda_paged *c, size_t n, const int32_t *slots, const uint8_t *halves,
                                   const void *rows, void *stream);

/** One layer's mirror edits gathered on the host (caller memory), for one
 *  kvc_cuda_batch_put_rows and one kvc_cuda_batch_set_rows: the rows' codes
 *  copied out of the streams' arenas (an f32 row, the current token, stored
 *  in the page type by the reference kernel), the slots translated through
 *  each entry's page list. */
typedef struct kvc_cuda_staging {
    uint32_t row_capacity;    /**< rows the arrays below hold */
    uint32_t n_rows;          /**< rows staged (set to 0 to start a step) */
    int32_t *row_slots;       /**< row_capacity device slots */
    uint8_t *halves;          /**< row_capacity: 0 key row, 1 value row */
    unsigned char *rows;      /**< row_capacity * kvc_row_bytes(dtype, head_dim) bytes */
    uint32_t weight_capacity; /**< weight edits the arrays below hold */
    uint32_t n_weights;       /**< weight edits staged (set to 0 to start a step) */
    int32_t *weight_slots;    /**< weight_capacity device slots */
    float *weights;           /**< weight_capacity weights (0 empties the slot) */
    uint8_t *roles;           /**< weight_capacity roles (0 empties the slot) */
} kvc_cuda_staging;

/**
 * @brief Stages one stream's mirror edits (kvc_mirror_step) for entry pages
 *        @p pages: mirror slot s is device slot pages[s / 64] * 64 + s % 64.
 * @param st the stream the edits were made for (their offsets are its).
 * @param pages host, the entry's page ids, enough for the mirror's n_rows.
 * @return KVC_OK; KVC_E_ARG (NULL, a slot past the pages, the staging full:
 *         nothing of this call is staged then); KVC_E_UNSUPPORTED (a page
 *         type the core has no rows of, or a stream of another type or dimension).
 */
kvc_status kvc_cuda_stage_edits(kvc_cuda_staging *s, const kvc_cuda_paged *c, const kvc_stream *st,
                                const kvc_mirror_edit *edits, size_t n_edits, const int32_t *pages, size_t n_pages);

/** What kvc_cuda_batch_plan_step decided, passed to kvc_cuda_batch_attend
 *  (which refuses a plan made for another storage type, head_dim or group). */
typedef struct kvc_cuda_batch_plan {
    uint32_t n_entries;  /**< n_seqs * n_kv_heads */
    uint32_t n_items;    /**< work items (split-K blocks) of this step; every entry has one at least */
    uint32_t grid;       /**< blocks the split launch has: n_items, or the workspace's capacity with fixed_grid */
    uint32_t merge_grid; /**< blocks of the merge launch (0: none; an entry with one item is written by its block) */
    uint32_t pages_per_item; /**< the largest item's pages (an entry's items differ by one page at most) */
    uint32_t capacity;       /**< items the workspace holds */
    unsigned dtype;          /**< the cache's storage type the plan was made for */
    uint32_t head_dim;       /**< ... its head_dim */
    uint32_t group;          /**< ... its group */
} kvc_cuda_batch_plan;

/** @brief Device workspace bytes for @p n_seqs sequences whose entries read
 *  at most @p max_pages pages in all (1 .. 2^25; a page two entries share
 *  counts twice, so this may exceed the pool's n_pages): the plan's items and
 *  their partial states, for the current device (the item capacity is
 *  min(max_pages + entries, 4 * slots + entries), slots = the split kernel's
 *  resident blocks on the device); 0 for arguments the plan would refuse. */
size_t kvc_cuda_batch_workspace_bytes(const kvc_cuda_paged *c, size_t n_seqs, size_t max_pages);

/** @brief Host bytes the plan builds its items in (pinned memory makes its copy asynchronous). */
size_t kvc_cuda_batch_plan_host_bytes(const kvc_cuda_paged *c, size_t n_seqs, size_t max_pages);

/**
 * @brief The host plan of one step: splits every entry's rows into work items
 *        of whole pages for the split kernel's resident blocks on the current
 *        device (its occupancy times the multiprocessors, asked once per
 *        device): an entry's items have equal page counts (within one page)
 *        and two pages at least; the split count fills whole waves of the
 *        slots (docs/gpu.md, the plan). Copies the items to the device
 *        workspace on @p stream (outside any graph capture).
 *
 * A host buffer may be reused at once for the next layer or step: the plan
 * waits for the previous copy out of the same buffer (an event per buffer
 * and device) before it writes. One workspace serves one stream at a time.
 * @param n_rows host, n_seqs * n_kv_heads row counts (>= 0; entry e reads the
 *        first ceil(n_rows[e] / 64) pages of its list, and rows below
 *        n_rows[e] of them; its page list must hold that many).
 * @param max_pages as given to kvc_cuda_batch_workspace_bytes.
 * @param fixed_grid 1: launch the workspace's capacity of split blocks and
 *        n_entries * group merge blocks every step (surplus blocks return at
 *        once) so that a captured graph replays; 0: what this step needs.
 * @return KVC_OK; KVC_E_ARG (a negative count, more pages than max_pages, a
 *         workspace or host buffer too small or NULL); KVC_E_BACKEND (the
 *         device refused the kernel's shared memory or an asynchronous copy).
 */
kvc_status kvc_cuda_batch_plan_step(const kvc_cuda_paged *c, size_t n_seqs, const int32_t *n_rows, size_t max_pages,
                                    int fixed_grid, void *host_buf, size_t host_bytes, void *workspace,
                                    size_t workspace_bytes, void *stream, kvc_cuda_batch_plan *plan);

/**
 * @brief Attends one layer for the whole batch: every query head of every
 *        sequence over its kv head's weighted rows,
 *        out = sum_N w_i e^{x_i} v_i / sum_D w_i e^{x_i}, x_i = beta <q, k_i>
 *        (0 where no row is in D), as kvc_k_attend_batch__ref computes it.
 *        One or two launches on @p stream (split; merge when an entry has
 *        several items, on sm_90 a programmatic dependent launch);
 *        asynchronous; no allocation. KVC_E_BACKEND reports
 *        cudaGetLastError(), which may be an earlier launch's error.
 * @param page_indptr device, n_entries + 1 offsets into @p page_ids.
 * @param page_ids device page numbers (0 .. n_pages - 1).
 * @param q [n_seqs][n_kv_heads * group][head_dim]. @param out the same shape, written.
 * @param workspace as given to the plan (its items must be this step's).
 */
kvc_status kvc_cuda_batch_attend(const kvc_cuda_paged *c, const kvc_cuda_batch_plan *plan, const int32_t *page_indptr,
                                 const int32_t *page_ids, kvc_cuda_tensor q, kvc_cuda_tensor out, void *workspace,
                                 void *stream);

/**
 * @brief kvc_cuda_batch_attend, and the attention mass each row received:
 *        what H2O, TOVA and SnapKV observe (kvc_stream_observe; the reference
 *        kvc_attend_batch's mass). mass[slot] = sum over the query-head
 *        group of w e^x / sum_D w e^x, the denominators merged exactly across
 *        the entry's splits. A third launch reads the keys a second time and
 *        scores them in f32 (the split kernel keeps no room for them). Slots
 *        past an entry's count, and pages no entry reads, are not written.
 * @param mass device, n_pages * 64 floats, indexed by slot.
 * @return as kvc_cuda_batch_attend; KVC_E_ARG also for a NULL mass.
 */
kvc_status kvc_cuda_batch_attend_mass(const kvc_cuda_paged *c, const kvc_cuda_batch_plan *plan,
                                      const int32_t *page_indptr, const int32_t *page_ids, kvc_cuda_tensor q,
                                      kvc_cuda_tensor out, void *workspace, float *mass, void *stream);

#ifdef __cplusplus
}
#endif

#endif
