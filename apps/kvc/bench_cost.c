/* kvc bench cost: per-token update cost and per-query attend cost of each
 * method on a trace, as ratios to exact attention's query cost at the same
 * context, for the reference kernel table and for the best one this CPU runs,
 * all measured in one run (absolute times on shared machines mean little;
 * ratios measured together do).
 *
 *   kvc bench cost --trace DIR --budget B [--methods a,b,c|all] [--head H] [--sink A] [--window W] [--reps R]
 *
 * Exact query cost: the table's attend over all n tokens (one segment,
 * weight 1), timed over R repetitions at the last position.
 * Method update cost: total time of the n appends / n (through the table).
 * Method query cost: the table's attend over the method's cache after the
 * whole trace, R repetitions. update/query is the per-token
 * maintenance cost as a fraction of one query over the compressed cache (the
 * Express paper reports 470 ms of updates against 35 000 ms of attention). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cli.h"
#include "method_opts.h"
#include "kvc/kvc.h"
#include "trace.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cost_usage(FILE *f)
{
    fprintf(f, "usage: kvc bench cost --trace DIR --budget B [--methods a,b,..|all] [--head H] [--sink A]\n"
               "                      [--window W] [--reps R] [method flags]\n"
               "  Per-token update cost and per-query attend cost of each method on the trace, as\n"
               "  ratios to exact attention's query over all n tokens, for the reference table and the\n"
               "  best one this CPU runs, measured in one run.\n");
}

int kvc_bench_cost(int argc, char **argv)
{
    const char *trace = NULL, *methods = "all";
    uint64_t head = 0, reps = 20;
    kvc_common_flags cf = kvc_common_flags_default();
    kvc_method_opts mo;
    memset(&mo, 0, sizeof mo);
    kvc_flag fl[16];
    size_t nf = kvc_common_flags_add(&cf, "bkw", fl, 0);
    fl[nf++] =
        (kvc_flag){"--trace", 's', &trace, 0, 0, NULL, "DIR\ttrace folder (q.npy, k.npy, v.npy; kvc synth, kvc dump)"};
    fl[nf++] = (kvc_flag){"--methods", 's', &methods, 0, 0, NULL, "a,b,..\tmethods, or all (default)"};
    fl[nf++] = (kvc_flag){"--head", 'u', &head, 0, 1u << 20, NULL, "H\thead of a (heads, n, d) trace (default 0)"};
    fl[nf++] = (kvc_flag){"--reps", 'u', &reps, 1, 100000, NULL, "R\trepetitions of each timed query (default 20)"};
    const int prc = kvc_cli_parse("bench cost", argc, argv, fl, nf, &mo, cost_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (kvc_common_flags_finish("bench cost", &cf)) return 2;
    const uint64_t sink = cf.sink, window = cf.window;
    if (!trace || !cf.have_budget) {
        fprintf(stderr, "kvc bench cost: --trace and --budget are required\n");
        return 2;
    }
    kvc_trace tr;
    if (kvc_trace_load(trace, (size_t)head, &tr)) return 1;
    const size_t n = tr.n, d = tr.d, dv = tr.dv;
    float *z = malloc(dv * sizeof(float));
    char all[1024];
    if (!strcmp(methods, "all")) { /* the registry, not a list kept here */
        all[0] = '\0';
        for (size_t i = 0; i < kvc_method_count(); i++) {
            if (i) strcat(all, ",");
            strcat(all, kvc_method_name(kvc_method_at(i)));
        }
        methods = all;
    }
    const kvc_kernels *tables[2] = {kvc_kernels_ref(), kvc_kernels_best()};
    const size_t n_tables = tables[1] == tables[0] ? 1 : 2;
    char budget_text[48];
    kvc_budget_format(&cf.budget, budget_text, sizeof budget_text);
    printf("trace %s: n=%zu d=%zu, budget %s (sink %llu, window %llu), tables ref and %s\n", trace, n, d, budget_text,
           (unsigned long long)sink, (unsigned long long)window, tables[1]->name);
    double exact_q[2];
    for (size_t ti = 0; ti < n_tables; ti++) { /* exact query cost over all n tokens */
        kvc_view ev;
        memset(&ev, 0, sizeof ev);
        ev.d = d, ev.dv = dv, ev.beta = (float)(1.0 / sqrt((double)d)), ev.n_seg = 1;
        ev.seg[0] = (kvc_segment){tr.k, tr.v, NULL, 1.0, n, KVC_SET_BOTH, KVC_DTYPE_F32, NULL, NULL, 0};
        const double t0 = now_s();
        for (uint64_t r = 0; r < reps; r++) kvc_attend(tables[ti], &ev, tr.q + (n - 1) * d, 1, z);
        exact_q[ti] = (now_s() - t0) / (double)reps;
        printf("exact query over %zu tokens, table %s: %.3g s\n", n, tables[ti]->name, exact_q[ti]);
    }
    printf("%-18s %-6s %14s %14s %16s %16s %14s\n", "method", "table", "update/token", "query", "update/exact_q",
           "query/exact_q", "update/query");
    char *list = strdup(methods), *save = NULL;
    for (char *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        kvc_method meth;
        if (kvc_method_parse(m, &meth) != KVC_OK) {
            fprintf(stderr, "kvc bench cost: unknown method '%s'\n", m);
            continue;
        }
        kvc_stream_config cfg = kvc_stream_config_default(meth, (uint32_t)d, (uint32_t)dv, 1, 1);
        cfg.n_sink = (uint32_t)sink, cfg.n_window = (uint32_t)window, cfg.prefix_len = (uint32_t)n;
        kvc_method_opts_apply(&mo, &cfg);
        if (kvc_budget_resolve("bench cost", &cf.budget, n, 1, &mo, &cfg, 0, 0, NULL)) continue;
        if (meth == KVC_METHOD_EXACT) cfg.budget = (uint32_t)n; /* exact keeps everything */
        size_t bytes = kvc_stream_arena_bytes(&cfg);
        if (!bytes) {
            fprintf(stderr, "kvc bench cost: %s: %s\n", m, kvc_stream_config_problem(&cfg));
            continue;
        }
        void *arena = aligned_alloc(KVC_ARENA_ALIGN, KVC_ALIGN_UP(bytes));
        for (size_t ti = 0; ti < n_tables && arena; ti++) {
            const kvc_kernels *kt = tables[ti];
            kvc_stream *st;
            if (kvc_stream_init(arena, bytes, &cfg, &st) != KVC_OK) break;
            double t0 = now_s();
            int failed = 0;
            for (size_t j = 0; j < n && !failed; j++)
                failed = kvc_stream_append(st, kt, tr.k + j * d, tr.v + j * dv) != KVC_OK;
            const double upd = (now_s() - t0) / (double)n;
            t0 = now_s();
            for (uint64_t r = 0; r < reps && !failed; r++)
                failed = kvc_stream_attend(st, kt, tr.q + (n - 1) * d, 1, z) != KVC_OK;
            const double qry = (now_s() - t0) / (double)reps;
            if (failed) {
                printf("%-18s %-6s %14s\n", m, kt->name, "failed");
                continue;
            }
            printf("%-18s %-6s %14.3g %14.3g %16.4f %16.4f %14.4f\n", m, kt->name, upd, qry, upd / exact_q[ti],
                   qry / exact_q[ti], upd / qry);
            fflush(stdout);
        }
        free(arena);
    }
    free(list);
    free(z);
    kvc_trace_free(&tr);
    return 0;
}
