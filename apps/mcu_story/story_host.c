/* The microcontroller decoder on the host: the same story.c on a blob read
 * from a file, for the text the firmware must reproduce and for trying cache
 * configurations before flashing.
 *   story_host BLOB.kvs [--method M] [--budget N] [--dtype T] [--sinks N] [--steps N] [--kernels ref|single]
 * Defaults: the firmware's (sink-window, 256 tokens per layer and kv head,
 * int8, 4 sinks, 512 steps (the context), the single-precision table). Prints the text, then
 * a line starting "---" with the cache's bytes, and "1 passed, 0 failed" as the
 * firmware does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "story.h"

static void emit(const char *text, size_t len, void *ctx)
{
    (void)ctx;
    fwrite(text, 1, len, stdout);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: story_host BLOB.kvs [--method M] [--budget N] [--dtype T] [--sinks N] [--steps N] "
                        "[--kernels ref|single]\n");
        return 2;
    }
    kvc_method method = KVC_METHOD_SINK_WINDOW;
    kvc_dtype dtype = KVC_DTYPE_I8;
    long budget = 256, sinks = 4, steps = 512; /* story_fw.c's */
    const kvc_kernels *kern = kvc_kernels_single();
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (strcmp(o, "--method") == 0 && kvc_method_parse(v, &method) == KVC_OK) continue;
        if (strcmp(o, "--dtype") == 0 && kvc_dtype_parse(v, &dtype) == KVC_OK) continue;
        if (strcmp(o, "--budget") == 0 && (budget = strtol(v, NULL, 10)) > 0) continue;
        if (strcmp(o, "--sinks") == 0 && (sinks = strtol(v, NULL, 10)) >= 0) continue;
        if (strcmp(o, "--steps") == 0 && (steps = strtol(v, NULL, 10)) > 0) continue;
        if (strcmp(o, "--kernels") == 0 && (kern = kvc_kernels_by_name(v)) != NULL) continue;
        fprintf(stderr, "story_host: bad option %s %s\n", o, v);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        fprintf(stderr, "story_host: cannot open %s\n", argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *blob = malloc((size_t)n);
    if (blob == NULL || fread(blob, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "story_host: cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(f);
    static kvc_story s;
    const char *why = kvc_story_open(&s, blob, (size_t)n);
    if (why != NULL) {
        fprintf(stderr, "story_host: %s: %s\n", argv[1], why);
        return 1;
    }
    kvc_stream_config sc = kvc_stream_config_default(method, 1, 1, (uint32_t)budget, 1);
    sc.dtype = dtype, sc.n_sink = (uint32_t)sinks, sc.n_window = 8;
    const kvc_cache_config cc = kvc_story_cache_config(&s, &sc);
    const size_t bytes = kvc_cache_arena_bytes(&cc);
    if (bytes == 0) {
        fprintf(stderr, "story_host: cache: %s\n", kvc_cache_config_problem(&cc));
        return 1;
    }
    void *arena = aligned_alloc(KVC_ARENA_ALIGN, (bytes + 63) / 64 * 64);
    kvc_cache *cache;
    if (arena == NULL || kvc_cache_init(arena, bytes, &cc, &cache) != KVC_OK) {
        fprintf(stderr, "story_host: cache init failed\n");
        return 1;
    }
    kvc_status st;
    const int tokens = kvc_story_generate(&s, cache, kern, (int)steps, emit, NULL, &st);
    if (tokens < 0) {
        fprintf(stderr, "\nstory_host: %s\n", kvc_status_str(st));
        return 1;
    }
    printf("\n--- %d tokens; cache %s %s budget %ld: %zu B; kernels %s\n", tokens, kvc_method_name(method),
           kvc_dtype_name(dtype), budget, bytes, kern->name);
    printf("1 passed, 0 failed\n"); /* the firmware's closing line (tests/mcu/run_story.cmake compares them) */
    free(arena), free(blob);
    return 0;
}
