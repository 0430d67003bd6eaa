/* What the firmware test programs share (conformance.c, snapshot.c): static
 * arenas, an FNV-1a digest, 64-bit hex without %llu (which newlib-nano's
 * printf lacks). Included by one program each, host or firmware. */
#ifndef KVC_FW_UTIL_H
#define KVC_FW_UTIL_H

#include <stdint.h>
#include <stdio.h>

/* every configuration's arena fits (checked: a larger one fails, never skips) */
#define ARENA_CAP (48u * 1024u)
#define WORK_CAP (16u * 1024u)
static _Alignas(64) unsigned char g_arena[ARENA_CAP];
static _Alignas(64) unsigned char g_work[WORK_CAP];

#define FNV_SEED 0xcbf29ce484222325ull

/* FNV-1a over bytes: a digest of outputs and of whole arenas */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static const char *hex64(char buf[17], uint64_t x)
{
    snprintf(buf, 17, "%08lx%08lx", (unsigned long)(x >> 32), (unsigned long)(x & 0xffffffffu));
    return buf;
}

#endif
