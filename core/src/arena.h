/* Arena carving: every array of a state is an aligned byte offset from the
 * state header, never a stored pointer, so states copy and restore bytewise. */
#ifndef KVC_ARENA_H
#define KVC_ARENA_H

#include <stdint.h>
#include <string.h>

#include "kvc/kvc_types.h"

#define KVC_MAGIC_STREAM 0x4B565331u  /* "KVS1" */
#define KVC_MAGIC_EXACT 0x4B564531u   /* "KVE1" */
#define KVC_MAGIC_UNIFORM 0x4B565531u /* "KVU1" */
#define KVC_MAGIC_SUBGEN 0x4B564731u  /* "KVG1" */

/* Reserve `bytes` at the cursor; returns the offset of the reservation. */
static inline size_t kvc_carve(size_t *cursor, size_t bytes)
{
    size_t off = *cursor;
    *cursor = KVC_ALIGN_UP(off + bytes);
    return off;
}

#define KVC_AT(base, off, type) ((type *)((unsigned char *)(base) + (off)))
#define KVC_AT_C(base, off, type) ((const type *)((const unsigned char *)(base) + (off)))

static inline int kvc_arena_ok(const void *arena, size_t have, size_t need)
{
    return arena != NULL && ((uintptr_t)arena % KVC_ARENA_ALIGN) == 0 && need > 0 && have >= need;
}

#endif
