/**
 * @file kvc_mirror.h
 * @brief A mirror of one stream's view in another memory (advanced tier): the
 *        edits that keep a device's pages equal to what the host's next attend
 *        reads, from the rows the core wrote (a ::kvc_row_journal) and the view.
 *
 * A stream decides on the host; its rows live in its arena. A mirror gives each
 * row of the stream's view a **slot** (a row of the device's pages) and says,
 * after the calls of a step, which slots must change:
 *
 *   - ::KVC_MIRROR_KEY, ::KVC_MIRROR_VALUE: copy the key row (the value row)
 *     bytes at the given offset of the stream into the slot: the same codes,
 *     never requantised; a row rewritten in place sends only the half the
 *     core wrote;
 *   - ::KVC_MIRROR_F32 with KEY and VALUE: the rows are f32 (the current
 *     token, which a stream keeps unquantised): the mirror stores them in its
 *     own type;
 *   - ::KVC_MIRROR_WEIGHT: the slot's weight and role (weight 0 and role 0:
 *     the slot holds nothing, exclude it).
 *
 * Each slot gets at most one edit a step. A row keeps its slot while it stays
 * in the view (an eviction that overwrites a row in place is one KEY | VALUE edit); a
 * row that leaves frees its slot, which the next new row takes, so the slots
 * in use never exceed the view's rows and the pages read (`n_rows`) stay
 * within one step's arrivals of them.
 *
 * Use, per step:
 * @code
 *   kvc_kernels k = *kvc_kernels_best();   // or any table
 *   kvc_row_journal j = {arena, arena_bytes, runs, cap, 0, 0};
 *   k.journal = &j;
 *   kvc_stream_append(st, &k, key, value);  // any calls that write rows
 *   kvc_mirror_step(m, st, &j, edits, cap_edits, &n_edits, &n_rows);
 *   // apply edits[0 .. n_edits) to the pages, attend over rows [0, n_rows)
 *   j.count = 0, j.dropped = 0;
 * @endcode
 * One journal may serve a whole ::kvc_cache (base = its arena): each stream's
 * mirror reads the runs inside its own arena. Cost on the host: one walk of
 * the view per step (docs/gpu.md gives it per method, measured).
 *
 * KIVI4 plans are not mirrored (their keys are 32-token channel blocks, which
 * no page type holds): kvc_mirror_bytes is 0 for them.
 */
#ifndef KVC_MIRROR_H
#define KVC_MIRROR_H

#if !defined(KVC_ADVANCED)
#error "kvc_mirror.h is in the advanced tier: #define KVC_ADVANCED before including it (docs/api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "kvc_kernels.h"
#include "kvc_stream.h"
#include "kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What an edit changes (bits of ::kvc_mirror_edit::what). */
enum {
    KVC_MIRROR_KEY = 1u,    /**< the slot's key row: copy it from the stream */
    KVC_MIRROR_VALUE = 2u,  /**< the slot's value row: copy it (or, with no value row, clear it) */
    KVC_MIRROR_WEIGHT = 4u, /**< the slot's weight and role */
    KVC_MIRROR_F32 = 8u,    /**< with KEY and VALUE: the source rows are f32 (d and dv floats),
                                 store them in the mirror's type */
    KVC_MIRROR_ROW = KVC_MIRROR_KEY | KVC_MIRROR_VALUE /**< both rows (a new row) */
};

/** A value offset that says "no value row" (a denominator-only row). */
#define KVC_MIRROR_NO_VALUE UINT64_MAX

/** One slot's change. */
typedef struct kvc_mirror_edit {
    uint32_t slot;         /**< 0 .. kvc_mirror_slots() - 1 */
    uint32_t what;         /**< KVC_MIRROR_* bits, nonzero */
    uint64_t key_offset;   /**< KEY: the key row, in bytes from the stream handle */
    uint64_t value_offset; /**< VALUE: the value row, or KVC_MIRROR_NO_VALUE */
    float weight;          /**< WEIGHT: the row's weight times its segment's scale, finite and > 0; 0 with role 0 */
    uint32_t role;         /**< WEIGHT: KVC_SET_NUM, KVC_SET_DEN, KVC_SET_BOTH; 0 = the slot is empty */
} kvc_mirror_edit;

/** A mirror's host state (in caller memory). */
typedef struct kvc_mirror kvc_mirror;

/** @brief Bytes of a mirror's state for stream @p st (8-aligned memory); 0 for
 *         a bad handle or a plan that cannot be mirrored (KIVI4). */
size_t kvc_mirror_bytes(const kvc_stream *st);

/** @brief A mirror of @p st in @p mem, holding nothing yet: its first step
 *         sends every row of the view.
 * @return KVC_OK; KVC_E_ARG (NULL, misaligned or short memory);
 *         KVC_E_UNSUPPORTED (KIVI4); the status of a bad handle. */
kvc_status kvc_mirror_init(void *mem, size_t bytes, const kvc_stream *st, kvc_mirror **out);

/** @brief Slots the mirror may use (the bound of its pages and of one step's
 *         edits): the stream's view rows at most, plus the current token. 0 for NULL. */
uint32_t kvc_mirror_slots(const kvc_mirror *m);

/**
 * @brief The edits that bring the mirror to the stream's current view.
 * @param st       the stream the mirror was made for (same plan).
 * @param journal  the rows written since the last step, or NULL when the
 *                 caller did not record them (then every row is re-sent).
 *                 Its base must be at or below the stream handle; runs outside
 *                 the stream are ignored; dropped > 0 re-sends every row.
 * @param edits    kvc_mirror_slots(m) entries of caller memory (@p cap).
 * @param n_edits  out: edits written, in no particular order, one per slot.
 * @param n_rows   out: the slots in use lie in [0, n_rows).
 * @return KVC_OK; KVC_E_ARG (NULL, cap < slots, a journal whose base is above
 *         the stream); KVC_E_STATE (another plan's stream); KVC_E_CORRUPT (a
 *         view row outside the stream's arena or listed twice); the status of
 *         a bad handle. On any error the mirror is unchanged.
 */
kvc_status kvc_mirror_step(kvc_mirror *m, const kvc_stream *st, const kvc_row_journal *journal, kvc_mirror_edit *edits,
                           size_t cap, size_t *n_edits, uint32_t *n_rows);

/**
 * @brief The attention mass of the stream's view entries, from a mass per
 *        mirror slot (a device's, kvc_cuda_batch_attend_mass, gathered by the
 *        entry's page list): what kvc_stream_observe takes. Call it after the
 *        step whose view the mass was computed on, before the next call that
 *        changes the stream.
 * @param slot_mass  kvc_mirror_slots(m) floats (those below the step's n_rows are read).
 * @param mass       out: @p n = kvc_stream_view_entries(st) doubles, view order; 0 for entries
 *                   without a weight.
 * @return KVC_OK; KVC_E_ARG (NULL, n not the view's entries); KVC_E_STATE
 *         (another plan's stream, or a view the last step did not see); a bad handle's status.
 */
kvc_status kvc_mirror_view_mass(const kvc_mirror *m, const kvc_stream *st, const float *slot_mass, double *mass,
                                size_t n);

#ifdef __cplusplus
}
#endif

#endif /* KVC_MIRROR_H */
