/* Arena carving: every array of a state is an aligned byte offset from the
 * state header, never a stored pointer, so states copy and restore bytewise.
 *
 * Offsets and sizes are uint64_t everywhere (header fields included), so the
 * arena bytes are the same on 32- and 64-bit targets and a size computation
 * cannot wrap on a 32-bit size_t: a plan whose arena exceeds SIZE_MAX is
 * refused (plan.c). Every header is plain fixed-width data with explicit
 * padding, its size checked by _Static_assert. */
#ifndef KVC_ARENA_H
#define KVC_ARENA_H

#include <stdint.h>
#include <string.h>

#include "kvc/kvc_sizes.h"
#include "kvc/kvc_types.h"

/* Magics carry the arena format version in their last byte (format 2 =
 * fixed-width headers with validation digests; the stream's format 3 adds
 * the estimator fields of SubGen and BalanceKV to the configuration; format 4
 * gathers the methods' parameters in one block with room to grow, Express's
 * own tail among them). A snapshot written by
 * another format version is refused with KVC_E_CORRUPT, never reinterpreted. */
#define KVC_MAGIC_STREAM  0x4B565334u /* "KVS4" */
#define KVC_MAGIC_EXACT   0x4B564532u /* "KVE2" */
#define KVC_MAGIC_UNIFORM 0x4B565532u /* "KVU2" */
#define KVC_MAGIC_SUBGEN  0x4B564732u /* "KVG2" */
/* The first three bytes without the version, to tell "another version" from garbage. */
#define KVC_MAGIC_FAMILY(m) ((m)&0xFFFFFF00u)

/* Reserve `bytes` at the cursor; returns the offset of the reservation.
 * The callers' bounds (budgets <= 2^24 tokens, rows <= 1032 bytes) keep the
 * cursor below 2^62, far from the wrap the precondition excludes. */
/*@ requires \valid(cursor);
    requires *cursor + bytes <= 4611686018427387904;
    assigns *cursor;
    ensures \result == \old(*cursor);
    ensures *cursor == kvc_align_l(\old(*cursor) + bytes);
    ensures *cursor % 64 == 0;
    ensures \old(*cursor) + bytes <= *cursor <= \old(*cursor) + bytes + 63;
*/
static inline uint64_t kvc_carve(uint64_t *cursor, uint64_t bytes)
{
    uint64_t off = *cursor;
    *cursor = KVC_ALIGN_UP(off + bytes);
    return off;
}

#define KVC_AT(base, off, type)   ((type *)((unsigned char *)(base) + (size_t)(off)))
#define KVC_AT_C(base, off, type) ((const type *)((const unsigned char *)(base) + (size_t)(off)))

static inline int kvc_arena_ok(const void *arena, size_t have, uint64_t need)
{
    return arena != NULL && ((uintptr_t)arena % KVC_ARENA_ALIGN) == 0 && need > 0 && have >= need;
}

/* trusted-by: assigns nothing (a pointer-to-integer cast, outside WP's
 * model); tests/unit/test_trust.c passes misaligned arenas. */
/*@ assigns \nothing; */
static inline int kvc_aligned(const void *p) { return ((uintptr_t)p % KVC_ARENA_ALIGN) == 0; }

/* 64-bit digest of a byte range (FNV-1a over 8-byte words, then a final
 * avalanche): detects any flipped bit of a header with probability 1 - 2^-64.
 * Not cryptographic: it guards against corruption, not against forgery. */
static inline uint64_t kvc_digest(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
}
#define KVC_DIGEST_SEED 0xCBF29CE484222325ull

/* a region [off, off + bytes) lies inside [lo, hi) and off is 64-aligned */
/*@ assigns \nothing;
    ensures \result != 0 <==> off % 64 == 0 && lo <= off <= hi && off + bytes <= hi;
*/
static inline int kvc_region_ok(uint64_t off, uint64_t bytes, uint64_t lo, uint64_t hi)
{
    return off % KVC_ARENA_ALIGN == 0 && off >= lo && off <= hi && bytes <= hi - off;
}

#endif
