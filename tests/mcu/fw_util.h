/* What the firmware test programs share (conformance.c, snapshot.c): static
 * arenas, an FNV-1a digest, 64-bit hex without %llu (which newlib-nano's
 * printf lacks). Included by one program each, host or firmware. */
#ifndef KVC_FW_UTIL_H
#define KVC_FW_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "kvc/kvc.h"

/* every configuration's arena fits (checked: a larger one fails, never skips) */
#define ARENA_CAP (48u * 1024u)
#define WORK_CAP  (16u * 1024u)
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

/* Every method of the registry x every implemented storage type through
 * run(method, type, ctx) (0 = passed); prints the closing "N passed, M
 * failed" and returns the exit status. */
static int fw_for_each_config(int (*run)(kvc_method, kvc_dtype, void *), void *ctx)
{
    int passed = 0, failed = 0;
    for (size_t mi = 0; mi < kvc_method_count(); mi++)
        for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) {
            if (!kvc_dtype_implemented((kvc_dtype)t)) continue;
            if (run(kvc_method_at(mi), (kvc_dtype)t, ctx) == 0)
                passed++;
            else
                failed++;
        }
    printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout);
    return failed == 0 ? 0 : 1;
}

#endif
