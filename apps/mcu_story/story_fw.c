/* stories260K on a Cortex-M (QEMU MPS2): the model in flash as int8
 * (story_blob.S), the activations, a sink-window int8 cache and the stack in
 * a RAM budget of 256 KiB (the linker refuses more: KVC_RAM_BYTES). Prints
 * the same text as story_host with the same configuration, then its own
 * report on lines starting "# " (RAM map, flash, instructions per token
 * counted by the MPS2 timer under QEMU -icount shift=6). */
#include <stdio.h>
#include <string.h>

#include "story.h"

#ifndef KVC_STORY_STEPS
#define KVC_STORY_STEPS 512
#endif
#ifndef KVC_STORY_BUDGET
#define KVC_STORY_BUDGET 256
#endif
#define STORY_SINKS 4u
/* stories260K's shape; a blob of another shape is refused below (its cache
   size differs from this buffer's) */
#define STORY_LAYERS   5u
#define STORY_KV_HEADS 4u
#define STORY_HEAD_DIM 8u
/* the cache arena, sized at compile time (kvc_sizes.h) */
#define ARENA_BYTES                                                                                                    \
    KVC_CACHE_ARENA_BYTES(                                                                                             \
        STORY_LAYERS, STORY_KV_HEADS,                                                                                  \
        KVC_SINK_WINDOW_ARENA_BYTES(KVC_DTYPE_I8, STORY_HEAD_DIM, STORY_HEAD_DIM, KVC_STORY_BUDGET, STORY_SINKS))

extern const unsigned char kvc_story_blob[], kvc_story_blob_end[];
extern unsigned char __data_start__[], __bss_end__[], __stack_top[], __stack_limit[], __flash_bytes[];

static _Alignas(64) unsigned char g_arena[ARENA_BYTES];

#define TIMER0 ((volatile uint32_t *)0x40000000u)

/* The timer counts down 32 bits (2^32 ticks = 2.7e9 instructions): read it at
 * every token and add the modular differences, which cannot wrap twice. */
static uint64_t g_ticks;
static uint32_t g_last;

static void tick(void)
{
    const uint32_t now = TIMER0[1];
    g_ticks += (uint32_t)(g_last - now);
    g_last = now;
}

static void emit(const char *text, size_t len, void *ctx)
{
    (void)ctx;
    tick(); /* the printing is not counted: the timer is read before it */
    fwrite(text, 1, len, stdout);
    g_last = TIMER0[1];
}

/* paint the free stack below the current frame, to measure its high-water mark */
static void paint_stack(void)
{
    uintptr_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (volatile unsigned char *p = __stack_limit; (uintptr_t)p + 256u < sp; p++) *p = 0xA5;
}

static size_t stack_used(void)
{
    const unsigned char *p = __stack_limit;
    while (p < __stack_top && *p == 0xA5) p++;
    return (size_t)(__stack_top - p);
}

int main(void)
{
    paint_stack();
    static kvc_story s;
    const char *why = kvc_story_open(&s, kvc_story_blob, (size_t)(kvc_story_blob_end - kvc_story_blob));
    if (why != NULL) {
        printf("story: %s\n0 passed, 1 failed\n", why);
        return 1;
    }
    kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_SINK_WINDOW, 1, 1, KVC_STORY_BUDGET, 1);
    sc.dtype = KVC_DTYPE_I8, sc.n_sink = STORY_SINKS, sc.n_window = 8;
    const kvc_cache_config cc = kvc_story_cache_config(&s, &sc);
    const size_t bytes = kvc_cache_arena_bytes(&cc);
    kvc_cache *cache;
    if (bytes != sizeof g_arena || kvc_cache_init(g_arena, bytes, &cc, &cache) != KVC_OK) {
        printf("story: the cache (%lu B) is not the %lu B this firmware was built for\n0 passed, 1 failed\n",
               (unsigned long)bytes, (unsigned long)sizeof g_arena);
        return 1;
    }
    TIMER0[0] = 0, TIMER0[2] = 0xFFFFFFFFu, TIMER0[1] = 0xFFFFFFFFu, TIMER0[0] = 1;
    g_last = TIMER0[1];
    kvc_status st;
    const int tokens = kvc_story_generate(&s, cache, kvc_kernels_single(), KVC_STORY_STEPS, emit, NULL, &st);
    tick();
    if (tokens < 0) {
        printf("\nstory: %s\n0 passed, 1 failed\n", kvc_status_str(st));
        return 1;
    }
    printf("\n--- %d tokens; cache %s %s budget %d: %lu B; kernels %s\n", tokens, kvc_method_name(sc.method),
           kvc_dtype_name(sc.dtype), KVC_STORY_BUDGET, (unsigned long)bytes, kvc_kernels_single()->name);
    /* 40 ns per timer tick, 64 ns per instruction under -icount shift=6 */
    const double insn = (double)g_ticks * 40.0 / 64.0;
    printf("# instructions: %.0f in all, %.0f per token (QEMU -icount shift=6; printing not counted)\n", insn,
           insn / (double)tokens);
    printf(
        "# RAM budget %lu B: data+bss %lu B (the cache arena %lu B in a buffer of KVC_CACHE_ARENA_BYTES, activations "
        "%lu B, "
        "newlib and the library's tables the rest), stack %lu B reserved (%lu B used), %lu B free for newlib's heap\n",
        (unsigned long)(__stack_top - __data_start__), (unsigned long)(__bss_end__ - __data_start__),
        (unsigned long)bytes, (unsigned long)kvc_story_activation_bytes(), (unsigned long)(__stack_top - __stack_limit),
        (unsigned long)stack_used(), (unsigned long)(__stack_limit - __bss_end__));
    printf("# flash %lu B (code, read-only data and the %lu B model)\n", (unsigned long)(uintptr_t)__flash_bytes,
           (unsigned long)(kvc_story_blob_end - kvc_story_blob));
    printf("1 passed, 0 failed\n");
    return 0;
}
