/* kvc bench kernels: exact attention over n cached tokens (d = dv = 64, one
 * kv head with 3 query heads, like SmolLM2) through every kernel table this
 * CPU runs and every storage type: GB/s of cache read, the ratio to this
 * machine's read bandwidth measured in the same run (a streaming read of the
 * same number of bytes), and the ratio to the reference table. Medians of
 * repeated runs; one thread (the library starts none). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "kvc/kvc.h"

#define HD 64u
#define NQ 3u

/* A streaming read of `bytes` (4 independent 64-bit accumulators): the
 * machine's read bandwidth on the same footprint, in seconds. */
static volatile uint64_t g_sink;
static double read_pass(const unsigned char *p, size_t bytes)
{
    const double t0 = kvc_bench_now();
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, w[4];
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32) {
        memcpy(w, p + i, 32);
        a0 += w[0], a1 ^= w[1], a2 += w[2], a3 ^= w[3];
    }
    g_sink = a0 + a1 + a2 + a3;
    return kvc_bench_now() - t0;
}

static void kernels_usage(FILE *f)
{
    fprintf(f, "usage: kvc bench kernels [--n 1024,4096,16384,65536] [--reps R] [--seed S]\n"
               "  Exact attention (d = 64, 3 query heads per kv head) over n cached tokens, every kernel\n"
               "  table this CPU runs x {f32, f16, int8}: GB/s of cache read, ratio to a streaming read of\n"
               "  the same bytes measured in the same run, ratio to the reference table. R repetitions\n"
               "  (default 20), medians. Ends with the summary line for f32, n = 16384, the best table.\n");
}

int kvc_bench_kernels(int argc, char **argv)
{
    const char *n_list = NULL;
    uint64_t reps = 20, seed = 1;
    const kvc_flag fl[] = {{"--n", 's', &n_list, 0, 0, NULL},
                           {"--reps", 'u', &reps, 3, 10000, NULL},
                           {"--seed", 'u', &seed, 0, 18446744073709551615.0, NULL}};
    const int prc = kvc_cli_parse("bench kernels", argc, argv, fl, sizeof fl / sizeof fl[0], NULL, kernels_usage);
    if (prc) return prc == 1 ? 0 : 2;
    int ns[KVC_BENCH_MAX_LIST] = {1024, 4096, 16384, 65536}, n_n = 4;
    if (n_list && (n_n = kvc_bench_int_list("--n", n_list, 1, 1 << 22, ns, KVC_BENCH_MAX_LIST)) < 0) return 2;
    const uint32_t have = kvc_cpu_features();
    const kvc_kernels *best = kvc_kernels_best();
    printf("kvc bench kernels: d=%u dv=%u query heads=%u, seed %" PRIu64 ", %" PRIu64 " reps, threads=1, best table %s\n",
           HD, HD, NQ, seed, reps, best->name);
    printf("%-6s %-5s %8s %10s %12s %10s %10s %10s\n", "table", "dtype", "n", "MB read", "time/query", "GB/s",
           "bw_ratio", "vs_ref");
    kvc_rng r;
    kvc_rng_seed(&r, seed);
    double summary_bw = NAN;
    int rc = 0;
    float x[HD], q[NQ * HD], out[NQ * HD];
    double work[NQ * (HD + 3)];
    for (int ni = 0; ni < n_n; ni++) {
        const size_t n = (size_t)ns[ni];
        for (unsigned t = 0; t < 3; t++) {
            const size_t rb = (size_t)kvc_row_bytes(t, HD), bytes = 2 * n * rb;
            unsigned char *k = malloc(n * rb), *v = malloc(n * rb), *flat = malloc(bytes);
            if (!k || !v || !flat) {
                free(k), free(v), free(flat);
                fprintf(stderr, "kvc bench kernels: out of memory at n=%zu\n", n);
                return 1;
            }
            for (size_t i = 0; i < n; i++) {
                for (size_t c = 0; c < HD; c++) x[c] = (float)kvc_rng_normal(&r);
                kvc_kernels_ref()->rows[t].store(k + i * rb, x, HD);
                for (size_t c = 0; c < HD; c++) x[c] = (float)kvc_rng_normal(&r);
                kvc_kernels_ref()->rows[t].store(v + i * rb, x, HD);
            }
            memcpy(flat, k, n * rb), memcpy(flat + n * rb, v, n * rb);
            for (size_t c = 0; c < NQ * HD; c++) q[c] = (float)kvc_rng_normal(&r);
            kvc_view view;
            memset(&view, 0, sizeof view);
            view.d = HD, view.dv = HD, view.beta = 0.125f, view.n_seg = 1;
            view.seg[0].n = n, view.seg[0].dtype = t, view.seg[0].scale = 1.0, view.seg[0].role = KVC_SET_BOTH;
            if (t == KVC_DTYPE_F32) view.seg[0].keys = (const float *)(void *)k, view.seg[0].values = (const float *)(void *)v;
            else view.seg[0].keys_q = k, view.seg[0].values_q = v;
            const kvc_attend_batch b = {q, 1, NQ, 0, out, NULL, NULL};
            double *tr = malloc(reps * sizeof(double)), *tb = malloc(reps * sizeof(double));
            for (uint64_t i = 0; i < reps; i++) tr[i] = read_pass(flat, bytes);
            const double t_read = kvc_bench_median(tr, (int)reps);
            double t_ref = NAN;
            for (size_t ti = 0; ti < kvc_kernels_count(); ti++) {
                const kvc_kernels *kt = kvc_kernels_at(ti);
                if ((kt->needs & have) != kt->needs) continue;
                for (uint64_t i = 0; i < reps; i++) {
                    const double t0 = kvc_bench_now();
                    if (kt->attend_batch(kt, &view, &b, work, sizeof work) != KVC_OK) rc = 1;
                    tb[i] = kvc_bench_now() - t0;
                }
                const double tm = kvc_bench_median(tb, (int)reps);
                if (ti == 0) t_ref = tm;
                const double gbs = (double)bytes / tm * 1e-9, bw = t_read / tm;
                printf("%-6s %-5s %8zu %10.2f %10.1f us %10.2f %10.3f %10.2f\n", kt->name, kvc_dtype_name((kvc_dtype)t), n,
                       (double)bytes * 1e-6, tm * 1e6, gbs, bw, t_ref / tm);
                if (kt == best && t == KVC_DTYPE_F32 && n == 16384) summary_bw = bw;
            }
            printf("%-6s %-5s %8zu %10.2f %10.1f us %10.2f %10s %10s   (streaming read of the same bytes)\n", "read",
                   kvc_dtype_name((kvc_dtype)t), n, (double)bytes * 1e-6, t_read * 1e6, (double)bytes / t_read * 1e-9,
                   "1", "-");
            free(tr), free(tb), free(k), free(v), free(flat);
        }
    }
    printf("kvc bench kernels: table=%s n=16384 dtype=f32 threads=1 bw_ratio=%.3f openblas_ratio=nan (OpenBLAS not built in)\n",
           best->name, summary_bw);
    return rc;
}
