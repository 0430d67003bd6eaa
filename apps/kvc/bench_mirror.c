/* kvc bench mirror: the host's work per decode step for one (layer, kv head,
 * sequence) when the pages live on a device: the core's append (with the
 * journal on), the observe of a method that observes (mass as the device's
 * split launch would return it), and kvc_mirror_step. Every method of the
 * registry, S streams stepped in turn so that the working set is a server's
 * (many streams, cold caches), not one stream hot in L1.
 *
 *   kvc bench mirror [--budget B] [--dim D] [--dtype T] [--streams S] [--steps N] [--methods a,b|all]
 *
 * Output per method: microseconds per stream and step (append, observe,
 * mirror, total), the edits a step made on average, the host bytes per stream
 * (its arena, its mirror's state), and the total's share of
 * a GPU decode step at the Llama-3-8B shape (32 layers x 8 kv heads) for a
 * batch of 64: 16,384 streams a step against the time an H200 needs to read
 * the model's 16.06 GB of weights at 4.8 TB/s (3.35 ms; a floor of the real
 * step, so the share is an upper bound). The reference is that model, stated,
 * not a measurement. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KVC_ADVANCED 1
#include "bench.h"
#include "cli.h"
#include "kvc/kvc.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void mirror_usage(FILE *f)
{
    fprintf(f,
            "usage: kvc bench mirror [--budget B] [--dim D] [--dtype T] [--streams S] [--steps N] [--methods a,b|all]\n"
            "  Host microseconds per (layer, kv head, sequence) and decode step with the pages on a device:\n"
            "  append with the journal on, observe (methods that observe), kvc_mirror_step.\n");
}

/* One method: S streams filled past the budget, then N timed steps each. */
static int bench_one(kvc_method meth, unsigned dtype, uint32_t d, uint32_t budget, size_t S, size_t N)
{
    kvc_stream_config cfg = kvc_stream_config_default(meth, d, d, budget, 1);
    cfg.dtype = dtype;
    cfg.n_sink = 4, cfg.n_window = 32;
    const uint64_t fill = (uint64_t)budget + 64u; /* past the budget: evictions, merges, halvings */
    cfg.prefix_len = (uint32_t)fill;
    if (meth == KVC_METHOD_EXACT) cfg.budget = (uint32_t)(fill + N + 2);
    const size_t bytes = kvc_stream_arena_bytes(&cfg);
    if (bytes == 0) {
        printf("%-18s %s\n", kvc_method_name(meth), kvc_stream_config_problem(&cfg));
        return 0;
    }
    const size_t abytes = KVC_ALIGN_UP(bytes);
    unsigned char *arenas = aligned_alloc(KVC_ARENA_ALIGN, abytes * S);
    kvc_stream **st = calloc(S, sizeof *st);
    kvc_mirror **mi = calloc(S, sizeof *mi);
    size_t mbytes = 0;
    kvc_rng r;
    kvc_rng_seed(&r, 5);
    const size_t n_data = 4096;
    float *x = malloc(n_data * d * sizeof(float));
    for (size_t i = 0; i < n_data * d; i++) x[i] = (float)kvc_rng_normal(&r);
    kvc_row_write *runs = malloc(4096 * sizeof *runs);
    kvc_row_journal j = {NULL, abytes, runs, 4096, 0, 0};
    kvc_kernels kern = *kvc_kernels_best();
    kern.journal = &j;
    for (size_t s = 0; s < S; s++) {
        if (kvc_stream_init(arenas + s * abytes, abytes, &cfg, &st[s]) != KVC_OK) return 1;
        for (uint64_t t = 0; t < fill; t++) {
            const float *k = x + ((s * 7 + t) % n_data) * d, *v = x + ((s * 13 + t * 3) % n_data) * d;
            if (kvc_stream_append(st[s], &kern, k, v) != KVC_OK) return 1;
        }
    }
    mbytes = kvc_mirror_bytes(st[0]);
    if (mbytes == 0) {
        printf("%-18s not mirrored (%s)\n", kvc_method_name(meth), kvc_dtype_name(dtype));
        free(arenas), free(st), free(mi), free(x), free(runs);
        return 0;
    }
    const size_t mstride = (mbytes + 63) & ~(size_t)63;
    unsigned char *mmem = aligned_alloc(64, mstride * S);
    kvc_mirror_edit *edits = NULL;
    uint32_t most = 0;
    for (size_t s = 0; s < S; s++) {
        if (kvc_mirror_init(mmem + s * mstride, mbytes, st[s], &mi[s]) != KVC_OK) return 1;
        if (kvc_mirror_slots(mi[s]) > most) most = kvc_mirror_slots(mi[s]);
    }
    edits = malloc(most * sizeof *edits);
    size_t n_edits;
    uint32_t n_rows;
    for (size_t s = 0; s < S; s++) /* the first step sends everything: not timed */
        if (kvc_mirror_step(mi[s], st[s], NULL, edits, most, &n_edits, &n_rows) != KVC_OK) return 1;
    const int observes = kvc_method_observes(meth);
    double *mass = malloc((size_t)(budget + 4096) * sizeof(double));
    double t_append = 0.0, t_observe = 0.0, t_mirror = 0.0, edits_total = 0.0;
    for (size_t step = 0; step < N; step++) {
        for (size_t s = 0; s < S; s++) {
            const float *k = x + ((s * 7 + fill + step) % n_data) * d, *v = x + ((s * 5 + step * 3) % n_data) * d;
            j.base = (const unsigned char *)st[s], j.count = 0, j.dropped = 0;
            double t0 = now_s();
            if (kvc_stream_append(st[s], &kern, k, v) != KVC_OK) return 1;
            double t1 = now_s();
            t_append += t1 - t0;
            if (observes) {
                const size_t n = kvc_stream_view_entries(st[s]);
                for (size_t i = 0; i < n; i++) mass[i] = 1.0 / (double)(1 + (i * 2654435761u + step) % 97);
                t0 = now_s();
                if (kvc_stream_observe(st[s], &kern, mass, n) != KVC_OK) return 1;
                t1 = now_s();
                t_observe += t1 - t0;
            }
            t0 = now_s();
            if (kvc_mirror_step(mi[s], st[s], &j, edits, most, &n_edits, &n_rows) != KVC_OK) return 1;
            t_mirror += now_s() - t0;
            edits_total += (double)n_edits;
        }
    }
    const double per = 1e6 / (double)(S * N), total = (t_append + t_observe + t_mirror) * per;
    const double gpu_step_us = 16.06e9 / 4.8e12 * 1e6, streams = 64.0 * 32.0 * 8.0;
    printf("%-18s %-6s %9.3f %9.3f %9.3f %9.3f %9.1f %9zu %8.1f%% %9.1f %9.1f\n", kvc_method_name(meth),
           kvc_dtype_name(dtype), t_append * per, t_observe * per, t_mirror * per, total, edits_total / (double)(S * N),
           kvc_stream_view_entries(st[0]), 100.0 * total * streams / gpu_step_us, (double)bytes / 1024.0,
           (double)mbytes / 1024.0);
    fflush(stdout);
    free(mass), free(edits), free(mmem), free(arenas), free(st), free(mi), free(x), free(runs);
    return 0;
}

int kvc_bench_mirror(int argc, char **argv)
{
    const char *methods = "all", *dtype_name = "int8";
    uint64_t budget = 1024, dim = 128, streams = 256, steps = 64;
    kvc_flag fl[8];
    size_t nf = 0;
    fl[nf++] = (kvc_flag){"--budget", 'u', &budget, 64, 1u << 20, NULL, "B\ttokens per stream (default 1024)"};
    fl[nf++] = (kvc_flag){"--dim", 'u', &dim, 16, 256, NULL, "D\thead dimension (default 128)"};
    fl[nf++] = (kvc_flag){"--dtype", 's', &dtype_name, 0, 0, NULL, "T\tstorage type (default int8)"};
    fl[nf++] = (kvc_flag){"--streams", 'u', &streams, 1, 1u << 16, NULL, "S\tstreams stepped in turn (default 256)"};
    fl[nf++] = (kvc_flag){"--steps", 'u', &steps, 1, 1u << 20, NULL, "N\ttimed steps per stream (default 64)"};
    fl[nf++] = (kvc_flag){"--methods", 's', &methods, 0, 0, NULL, "a,b,..\tmethods, or all (default)"};
    const int prc = kvc_cli_parse("bench mirror", argc, argv, fl, nf, NULL, mirror_usage);
    if (prc) return prc == 1 ? 0 : 2;
    kvc_dtype dtype;
    if (kvc_dtype_parse(dtype_name, &dtype) != KVC_OK) {
        fprintf(stderr, "kvc bench mirror: unknown storage type '%s'\n", dtype_name);
        return 2;
    }
    printf("budget %llu, d %llu, %s rows, %llu streams x %llu steps, table %s\n", (unsigned long long)budget,
           (unsigned long long)dim, kvc_dtype_name(dtype), (unsigned long long)streams, (unsigned long long)steps,
           kvc_kernels_best()->name);
    printf("%-18s %-6s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "method", "type", "append", "observe", "mirror",
           "total_us", "edits", "view", "gpu_share", "arena_KiB", "mirror_KiB");
    for (size_t i = 0; i < kvc_method_count(); i++) {
        const kvc_method m = kvc_method_at(i);
        if (strcmp(methods, "all") != 0) {
            const char *name = kvc_method_name(m), *at = strstr(methods, name);
            const size_t len = strlen(name);
            if (!at || (at != methods && at[-1] != ',') || (at[len] != '\0' && at[len] != ',')) continue;
        }
        if (bench_one(m, (unsigned)dtype, (uint32_t)dim, (uint32_t)budget, (size_t)streams, (size_t)steps)) {
            fprintf(stderr, "kvc bench mirror: %s failed\n", kvc_method_name(m));
            return 1;
        }
    }
    return 0;
}
