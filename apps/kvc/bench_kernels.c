/* kvc bench kernels: exact attention over n cached tokens (d = dv = 64, one
 * kv head with 3 query heads, like SmolLM2) through every kernel table this
 * CPU runs, every storage type and 1..T threads: GB/s of cache read, the ratio
 * to this machine's read bandwidth measured in the same run (a streaming read
 * of the same bytes on as many threads), the ratio to the reference table and
 * to an OpenBLAS version of the same attention (f32). With more than one
 * thread the attend runs split-K (one part per thread, kvc_attend_merge), as
 * the decoder does; the library itself starts no threads. Medians of
 * repeated runs. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "kvc/kvc.h"
#include "openblas_peer.h"
#include "pool.h"

#define HD    64u
#define NQ    3u
#define MAX_T 16

/* ---- the streaming read: the machine's read bandwidth on the same footprint ---- */
static volatile uint64_t g_sink[MAX_T * 8];

typedef struct read_job {
    const unsigned char *p;
    size_t bytes, parts;
} read_job;

/* Part i of a streaming read: 32-byte vectors (GCC/clang vector extension),
 * four independent accumulators, an AVX2 clone where the CPU has it, so that
 * the read runs at the memory's pace and not at the loop's: the attend must
 * not look faster than reading its bytes because this loop is slow. */
typedef uint64_t u64x4 __attribute__((vector_size(32), aligned(1)));
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
static uint64_t
read_range(const unsigned char *p, size_t bytes)
{
    u64x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    size_t o = 0;
    for (; o + 128 <= bytes; o += 128) {
        u64x4 w0, w1, w2, w3;
        memcpy(&w0, p + o, 32), memcpy(&w1, p + o + 32, 32), memcpy(&w2, p + o + 64, 32), memcpy(&w3, p + o + 96, 32);
        a0 += w0, a1 ^= w1, a2 += w2, a3 ^= w3;
    }
    const u64x4 a = a0 + a1 + a2 + a3;
    return a[0] + a[1] + a[2] + a[3] + o;
}

static void read_part(void *ctx, size_t i)
{
    const read_job *j = (const read_job *)ctx;
    const size_t per = j->bytes / j->parts / 128 * 128, b0 = i * per, b1 = i + 1 == j->parts ? j->bytes : b0 + per;
    g_sink[i * 8] = read_range(j->p + b0, b1 - b0);
}

/* ---- split-K attend on the pool ---- */
typedef struct attend_job {
    const kvc_kernels *kt;
    const kvc_view *view;
    const float *q;
    size_t parts;
    double *state; /* parts x NQ x KVC_ATTEND_STATE(HD) */
    double *work;  /* parts x NQ x (HD + 3) */
    float *out;    /* parts x NQ x HD: each part's own normalised answer (not used: the merge writes the result) */
    int failed;
} attend_job;

static void attend_part(void *ctx, size_t i)
{
    attend_job *a = (attend_job *)ctx;
    const kvc_segment *s = &a->view->seg[0];
    const size_t n0 = s->n * i / a->parts, n1 = s->n * (i + 1) / a->parts;
    const size_t kb = (size_t)kvc_row_bytes(s->dtype, HD),
                 vb = (size_t)kvc_row_bytes(kvc_segment_value_dtype(s->dtype), HD);
    kvc_view v = *a->view;
    v.seg[0].n = n1 - n0;
    if (s->dtype == KVC_DTYPE_F32) {
        v.seg[0].keys = s->keys + n0 * HD, v.seg[0].values = s->values + n0 * HD;
    } else if (s->dtype == KVC_DTYPE_KIVI4) { /* a part starts inside its first key block */
        v.seg[0].keys_q = (const unsigned char *)s->keys_q + n0 / KVC_KIVI_BLOCK * KVC_KIVI4_KEY_BLOCK_BYTES(HD);
        v.seg[0].first = n0 % KVC_KIVI_BLOCK;
        v.seg[0].values_q = (const unsigned char *)s->values_q + n0 * vb;
    } else {
        v.seg[0].keys_q = (const unsigned char *)s->keys_q + n0 * kb,
        v.seg[0].values_q = (const unsigned char *)s->values_q + n0 * vb;
    }
    const kvc_attend_batch b = {a->q, 1, NQ, 0, a->out + i * NQ * HD, NULL, a->state + i * NQ * KVC_ATTEND_STATE(HD)};
    if (a->kt->attend_batch(a->kt, &v, &b, a->work + i * NQ * (HD + 3), NQ * (HD + 3) * sizeof(double)) != KVC_OK)
        a->failed = 1;
}

static int attend_threads(attend_job *a, float *out, size_t threads)
{
    if (threads == 1) { /* one call, as a single-threaded decoder makes it */
        const kvc_attend_batch b = {a->q, 1, NQ, 0, out, NULL, NULL};
        return a->kt->attend_batch(a->kt, a->view, &b, a->work, NQ * (HD + 3) * sizeof(double)) == KVC_OK ? 0 : 1;
    }
    a->parts = threads, a->failed = 0;
    kvc_pool_run(threads, attend_part, a);
    const double *ptr[MAX_T];
    for (size_t i = 0; i < threads; i++) ptr[i] = a->state + i * NQ * KVC_ATTEND_STATE(HD);
    return a->failed || kvc_attend_merge(ptr, threads, NQ, HD, out) != KVC_OK;
}

static void kernels_usage(FILE *f)
{
    fprintf(f, "usage: kvc bench kernels [--n N,..] [--threads T,..] [--reps R] [--seed S]\n"
               "  Exact attention (d = 64, 3 query heads per kv head) over n cached tokens, every kernel\n"
               "  table this CPU runs x every storage type x thread counts: GB/s of cache read, ratio to a\n"
               "  streaming read of the same bytes on as many threads (bw_ratio), to the reference\n"
               "  table (vs_ref) and to OpenBLAS (vs_blas: sgemm, softmax, sgemm on f32 rows; libopenblas\n"
               "  loaded at run time, $KVC_OPENBLAS or Debian's libopenblas0-pthread). Ends with one\n"
               "  line per storage type and thread count at the largest n, the best table (time per\n"
               "  query, bw_ratio, speed-up over f32), then the summary line for f32, n = 16384, one\n"
               "  thread. --tables best runs the best table alone (no vs_ref: for n = 1M and more).\n");
}

int kvc_bench_kernels(int argc, char **argv)
{
    const char *n_list = NULL, *t_list = NULL, *tables = "all";
    uint64_t reps = 20, seed = 1;
    const kvc_flag fl[] = {
        {"--n", 's', &n_list, 0, 0, NULL, "N,..\tcached tokens (default 1024,4096,16384,65536)"},
        {"--threads", 's', &t_list, 0, 0, NULL, "T,..\tthread counts; several run the attend split-K (default 1,2)"},
        {"--reps", 'u', &reps, 3, 10000, NULL, "R\trepetitions, medians (default 20)"},
        {"--seed", 'u', &seed, 0, 18446744073709551615.0, NULL, "S\tseed of the cached rows (default 1)"},
        {"--tables", 's', &tables, 0, 0, NULL, "all|best\tevery table this CPU runs (default) or the best alone"}};
    const int prc = kvc_cli_parse("bench kernels", argc, argv, fl, sizeof fl / sizeof fl[0], NULL, kernels_usage);
    if (prc) return prc == 1 ? 0 : 2;
    int ns[KVC_BENCH_MAX_LIST] = {1024, 4096, 16384, 65536}, n_n = 4;
    int ts[KVC_BENCH_MAX_LIST] = {1, 2}, n_t = 2;
    if (n_list && (n_n = kvc_bench_int_list("--n", n_list, 1, 1 << 22, ns, KVC_BENCH_MAX_LIST)) < 0) return 2;
    if (t_list && (n_t = kvc_bench_int_list("--threads", t_list, 1, MAX_T, ts, KVC_BENCH_MAX_LIST)) < 0) return 2;
    if (strcmp(tables, "all") != 0 && strcmp(tables, "best") != 0) {
        fprintf(stderr, "kvc bench kernels: --tables %s: want all or best\n", tables);
        return 2;
    }
    const int best_only = strcmp(tables, "best") == 0;
    const uint32_t have = kvc_cpu_features();
    const kvc_kernels *best = kvc_kernels_best();
    const char *blas_why = kvc_openblas_load();
    printf("kvc bench kernels: d=%u dv=%u query heads=%u, seed %" PRIu64 ", %" PRIu64
           " reps, best table %s, OpenBLAS %s\n",
           HD, HD, NQ, seed, reps, best->name, blas_why ? blas_why : "loaded");
    printf("%-6s %-5s %8s %7s %9s %12s %9s %9s %8s %8s\n", "table", "dtype", "n", "threads", "MB read", "time/query",
           "GB/s", "bw_ratio", "vs_ref", "vs_blas");
    kvc_rng r;
    kvc_rng_seed(&r, seed);
    double summary_bw = NAN, summary_blas = NAN;
    /* the best table at the largest n: time per query and bw_ratio per type and thread count */
    size_t n_top = 0;
    for (int ni = 0; ni < n_n; ni++)
        if ((size_t)ns[ni] > n_top) n_top = (size_t)ns[ni];
    double top_tm[KVC_DTYPE_COUNT][KVC_BENCH_MAX_LIST], top_bw[KVC_DTYPE_COUNT][KVC_BENCH_MAX_LIST];
    for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++)
        for (int tj = 0; tj < KVC_BENCH_MAX_LIST; tj++) top_tm[t][tj] = top_bw[t][tj] = NAN;
    int rc = 0;
    float x[HD], xb[KVC_KIVI_BLOCK * HD], q[NQ * HD], out[NQ * HD];
    double *state = malloc(MAX_T * NQ * KVC_ATTEND_STATE(HD) * sizeof(double));
    double *work = malloc(MAX_T * NQ * (HD + 3) * sizeof(double));
    float *outs = malloc(MAX_T * NQ * HD * sizeof(float));
    if (!state || !work || !outs) {
        free(state), free(work), free(outs);
        return 1;
    }
    for (int ni = 0; ni < n_n; ni++) {
        const size_t n = (size_t)ns[ni];
        for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) {
            /* every storage type the reference attend reads (the registry, not a list kept here) */
            if (!kvc_kernels_support(kvc_kernels_ref(), t)) continue;
            const int kivi = t == KVC_DTYPE_KIVI4;
            const unsigned vt = kvc_segment_value_dtype(t);
            const size_t rb = (size_t)kvc_row_bytes(t, HD), vrb = (size_t)kvc_row_bytes(vt, HD);
            const size_t kbytes = kivi ? (size_t)kvc_kivi4_key_bytes(n, HD) : n * rb, bytes = kbytes + n * vrb;
            unsigned char *k = malloc(kbytes), *v = malloc(n * vrb), *flat = malloc(bytes);
            float *scores = malloc(n * NQ * sizeof(float));
            if (!k || !v || !flat || !scores) {
                free(k), free(v), free(flat), free(scores);
                fprintf(stderr, "kvc bench kernels: out of memory at n=%zu\n", n);
                rc = 1;
                goto done;
            }
            for (size_t i = 0; i < n; i++) {
                float *kx = kivi ? xb + (i % KVC_KIVI_BLOCK) * HD : x;
                for (size_t c = 0; c < HD; c++) kx[c] = (float)kvc_rng_normal(&r);
                if (!kivi)
                    kvc_kernels_ref()->rows[t].store(k + i * rb, kx, HD);
                else if (i % KVC_KIVI_BLOCK == KVC_KIVI_BLOCK - 1u || i + 1u == n)
                    kvc_kivi4_key_block_store(k + i / KVC_KIVI_BLOCK * KVC_KIVI4_KEY_BLOCK_BYTES(HD), xb,
                                              i % KVC_KIVI_BLOCK + 1u, HD);
                for (size_t c = 0; c < HD; c++) x[c] = (float)kvc_rng_normal(&r);
                kvc_kernels_ref()->rows[vt].store(v + i * vrb, x, HD);
            }
            memcpy(flat, k, kbytes), memcpy(flat + kbytes, v, n * vrb);
            for (size_t c = 0; c < NQ * HD; c++) q[c] = (float)kvc_rng_normal(&r);
            kvc_view view;
            memset(&view, 0, sizeof view);
            view.d = HD, view.dv = HD, view.beta = 0.125f, view.n_seg = 1;
            view.seg[0].n = n, view.seg[0].dtype = t, view.seg[0].scale = 1.0, view.seg[0].role = KVC_SET_BOTH;
            if (t == KVC_DTYPE_F32)
                view.seg[0].keys = (const float *)(void *)k, view.seg[0].values = (const float *)(void *)v;
            else
                view.seg[0].keys_q = k, view.seg[0].values_q = v;
            double *tr = malloc(reps * sizeof(double)), *tb = malloc(reps * sizeof(double));
            for (int tj = 0; tj < n_t && tr && tb; tj++) {
                const size_t T = (size_t)ts[tj];
                if (kvc_pool_set_threads((int)T) != 0) {
                    fprintf(stderr, "kvc bench kernels: cannot start %zu threads\n", T);
                    rc = 1;
                    break;
                }
                read_job rj = {flat, bytes, T};
                for (uint64_t i = 0; i < reps; i++) {
                    const double t0 = kvc_bench_now();
                    kvc_pool_run(T, read_part, &rj);
                    tr[i] = kvc_bench_now() - t0;
                }
                const double t_read = kvc_bench_median(tr, (int)reps);
                double t_blas = NAN;
                if (!blas_why && t == KVC_DTYPE_F32) {
                    kvc_openblas_threads((int)T);
                    for (uint64_t i = 0; i < reps; i++) {
                        const double t0 = kvc_bench_now();
                        kvc_openblas_attend((const float *)(void *)k, (const float *)(void *)v, n, HD, q, NQ, 0.125f,
                                            scores, out);
                        tb[i] = kvc_bench_now() - t0;
                    }
                    t_blas = kvc_bench_median(tb, (int)reps);
                }
                double t_ref = NAN;
                for (size_t ti = 0; ti < kvc_kernels_count(); ti++) {
                    const kvc_kernels *kt = kvc_kernels_at(ti);
                    if ((kt->needs & have) != kt->needs || (best_only && kt != best)) continue;
                    attend_job aj = {kt, &view, q, T, state, work, outs, 0};
                    for (uint64_t i = 0; i < reps; i++) {
                        const double t0 = kvc_bench_now();
                        if (attend_threads(&aj, out, T)) rc = 1;
                        tb[i] = kvc_bench_now() - t0;
                    }
                    const double tm = kvc_bench_median(tb, (int)reps);
                    if (ti == 0) t_ref = tm;
                    const double gbs = (double)bytes / tm * 1e-9, bw = t_read / tm;
                    printf("%-6s %-5s %8zu %7zu %9.2f %9.1f us %9.2f %9.3f %8.2f %8.2f\n", kt->name,
                           kvc_dtype_name((kvc_dtype)t), n, T, (double)bytes * 1e-6, tm * 1e6, gbs, bw, t_ref / tm,
                           t_blas / tm);
                    if (kt == best && t == KVC_DTYPE_F32 && n == 16384 && T == 1)
                        summary_bw = bw, summary_blas = t_blas / tm;
                    if (kt == best && n == n_top) top_tm[t][tj] = tm, top_bw[t][tj] = bw;
                }
                if (!blas_why && t == KVC_DTYPE_F32)
                    printf("%-6s %-5s %8zu %7zu %9.2f %9.1f us %9.2f %9.3f %8s %8s   (sgemm, softmax, sgemm)\n", "blas",
                           "f32", n, T, (double)bytes * 1e-6, t_blas * 1e6, (double)bytes / t_blas * 1e-9,
                           t_read / t_blas, "-", "1");
                printf("%-6s %-5s %8zu %7zu %9.2f %9.1f us %9.2f %9s %8s %8s   (streaming read of the same bytes)\n",
                       "read", kvc_dtype_name((kvc_dtype)t), n, T, (double)bytes * 1e-6, t_read * 1e6,
                       (double)bytes / t_read * 1e-9, "1", "-", "-");
            }
            free(tr), free(tb), free(k), free(v), free(flat), free(scores);
        }
    }
    for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++)
        for (int tj = 0; tj < n_t; tj++)
            if (!isnan(top_tm[t][tj]))
                printf("kvc bench kernels: table=%s n=%zu dtype=%s threads=%d time=%.1f us bw_ratio=%.3f "
                       "vs_f32=%.2f\n",
                       best->name, n_top, kvc_dtype_name((kvc_dtype)t), ts[tj], top_tm[t][tj] * 1e6, top_bw[t][tj],
                       top_tm[KVC_DTYPE_F32][tj] / top_tm[t][tj]);
    printf("kvc bench kernels: table=%s n=16384 dtype=f32 threads=1 bw_ratio=%.3f openblas_ratio=%.3f%s\n", best->name,
           summary_bw, summary_blas, blas_why ? " (OpenBLAS not loaded)" : "");
done:
    kvc_pool_set_threads(1);
    free(state), free(work), free(outs);
    return rc;
}
