/* kvc fig1: the BalanceKV paper's Figure 1 protocol on a q/k/v trace. The
 * first F tokens and the last R are kept exactly; the middle is compressed
 * to 2^-T of its tokens by offline BalanceKV (kvc_balancekv_offline, the
 * authors' algorithm) and, as the baseline, by a uniform sample without
 * replacement of the same size (each kept token weighted middle/kept). The
 * last R queries are scored causally (query i sees the first tokens, the
 * compressed middle and recent[0..i]) against exact attention over every
 * token before it, in double; the error of a query is ||z - z*|| / ||z*||.
 * Per round count the line gives both means over heads x seeds x queries
 * and their ratio (below 1: BalanceKV beats uniform). One CSV row per
 * (head, T, seed, method) is written as it finishes. */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_oracle/kvc_oracle.h"

#include "bench.h"
#include "cli.h"
#include "method_opts.h"
#include "trace.h"
#include "commands.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvc fig1 --trace DIR [--heads 0,3,6] [--rounds 1,2,3,4] [--seeds 20] [--first 256]\n"
               "                [--recent 256] [--csv FILE]\n"
               "  The BalanceKV paper's Figure 1 protocol: the first and last tokens exact, the middle\n"
               "  compressed to 2^-T by offline BalanceKV and by a uniform sample of the same size; the\n"
               "  last queries scored causally against exact attention. Prints the mean errors and their\n"
               "  ratio per T. --methods: registered methods too, as streams at a budget of the kept\n"
               "  tokens; the method flags below (--bkv-mode, --dtype, ...) apply to those streams.\n");
}

typedef struct fig1_case {
    const kvc_trace *tr;
    size_t first, recent, mid0, mid;
    float *kc, *vc, *wc; /* the compressed middle, gathered */
    double *exact;       /* recent x dv: exact attention of each scored query */
    double *work;        /* one query's attend workspace */
    float *z;
    const kvc_method_opts *mo; /* the method flags, for the streams (--bkv-mode, --dtype, ...) */
} fig1_case;

/* Mean relative error over the scored queries: the first tokens, the
 * middle's segments (n_mid of them), recent[0..i]. */
static double score_view(fig1_case *c, const kvc_segment *mid, size_t n_mid)
{
    const kvc_trace *tr = c->tr;
    const size_t d = tr->d, dv = tr->dv, n = tr->n;
    kvc_view view;
    memset(&view, 0, sizeof view);
    view.d = d, view.dv = dv, view.beta = (float)(1.0 / sqrt((double)d)), view.n_seg = n_mid + 2;
    const kvc_segment first = {tr->k, tr->v, NULL, 1.0, c->first, KVC_SET_BOTH, KVC_DTYPE_F32, NULL, NULL, 0};
    view.seg[0] = first;
    for (size_t s = 0; s < n_mid; s++) view.seg[1 + s] = mid[s];
    double sum = 0.0;
    for (size_t i = 0; i < c->recent; i++) {
        const size_t j = n - c->recent + i;
        const kvc_segment rec = {tr->k + (n - c->recent) * d,
                                 tr->v + (n - c->recent) * dv,
                                 NULL,
                                 1.0,
                                 i + 1,
                                 KVC_SET_BOTH,
                                 KVC_DTYPE_F32,
                                 NULL,
                                 NULL,
                                 0};
        view.seg[1 + n_mid] = rec;
        const kvc_attend_batch b = {tr->q + j * d, 1, 1, 0, c->z, NULL, NULL};
        if (kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &view, &b, c->work,
                                            (size_t)kvc_attend_work_bytes(1, 1, dv)) != KVC_OK)
            return NAN;
        double e2 = 0.0, a2 = 0.0;
        const double *ex = c->exact + i * dv;
        for (size_t ch = 0; ch < dv; ch++)
            e2 += ((double)c->z[ch] - ex[ch]) * ((double)c->z[ch] - ex[ch]), a2 += ex[ch] * ex[ch];
        sum += a2 > 0.0 ? sqrt(e2 / a2) : 0.0;
    }
    return sum / (double)c->recent;
}

/* The same for the gathered middle of n_c weighted entries. */
static double score(fig1_case *c, size_t n_c)
{
    const kvc_segment mid = {c->kc, c->vc, c->wc, 1.0, n_c, KVC_SET_BOTH, KVC_DTYPE_F32, NULL, NULL, 0};
    return score_view(c, &mid, 1);
}

/* A registered method compressing the middle as a stream (no sinks, no
 * window: every middle token reaches the method; a prefill method is told
 * the middle is its prompt) at a budget of `budget` tokens; its view's
 * non-empty segments are the middle. NAN when the method refuses the
 * configuration or a token; *held gets the view's entries. */
static double score_stream(fig1_case *c, kvc_method m, uint32_t budget, uint64_t seed, size_t *held)
{
    const kvc_trace *tr = c->tr;
    const size_t d = tr->d, dv = tr->dv;
    kvc_stream_config cfg = kvc_stream_config_default(m, (uint32_t)d, (uint32_t)dv, budget, seed);
    cfg.n_sink = 0, cfg.n_window = 0, cfg.prefix_len = (uint32_t)c->mid;
    kvc_method_opts_apply(c->mo, &cfg);
    const size_t bytes = kvc_stream_arena_bytes(&cfg);
    if (bytes == 0) return NAN;
    void *arena = aligned_alloc(KVC_ARENA_ALIGN, (bytes + KVC_ARENA_ALIGN - 1) / KVC_ARENA_ALIGN * KVC_ARENA_ALIGN);
    kvc_stream *st = NULL;
    double e = NAN;
    if (arena && kvc_stream_init(arena, bytes, &cfg, &st) == KVC_OK) {
        /* a query-aware method gets the queries of the trace's last 32 positions first (SnapKV's window) */
        const size_t obs = c->recent < 32 ? c->recent : 32;
        (void)kvc_stream_prefill_queries(st, NULL, tr->q + (tr->n - obs) * d, obs);
        /* the middle in one call: the same as appending it token by token,
           except that balancekv-prefill in mode offline compresses it there
           with the authors' walk, in this scratch */
        const size_t wb = kvc_stream_prefill_work_bytes(st, c->mid);
        void *work = wb ? aligned_alloc(8, (wb + 7) / 8 * 8) : NULL;
        kvc_status s = wb && !work ? KVC_E_ARENA
                                   : kvc_stream_prefill(st, NULL, tr->k + c->mid0 * d, d, tr->v + c->mid0 * dv, dv,
                                                        c->mid, work, wb);
        free(work);
        kvc_view v;
        if (s == KVC_OK && kvc_stream_view(st, &v) == KVC_OK) {
            kvc_segment mid[KVC_VIEW_MAX_SEGMENTS];
            size_t n_mid = 0;
            *held = 0;
            for (size_t g = 0; g < v.n_seg; g++)
                if (v.seg[g].n > 0) mid[n_mid++] = v.seg[g], *held += v.seg[g].n;
            e = score_view(c, mid, n_mid);
        }
    }
    free(arena);
    return e;
}

static void gather(fig1_case *c, size_t i, size_t tok, float w)
{
    const kvc_trace *tr = c->tr;
    memcpy(c->kc + i * tr->d, tr->k + (c->mid0 + tok) * tr->d, tr->d * sizeof(float));
    memcpy(c->vc + i * tr->dv, tr->v + (c->mid0 + tok) * tr->dv, tr->dv * sizeof(float));
    c->wc[i] = w;
}

int kvc_cmd_fig1(int argc, char **argv)
{
    const char *dir = NULL, *heads_s = "0,3,6", *rounds_s = "1,2,3,4", *csv_path = NULL, *methods_s = NULL;
    uint64_t seeds = 20, first = 256, recent = 256;
    kvc_flag fl[9];
    size_t nf = 0;
    fl[nf++] = (kvc_flag){"--trace", 's', &dir, 0, 0, NULL, "DIR\tthe trace: DIR/{q,k,v}.npy (kvc dump)"};
    fl[nf++] = (kvc_flag){"--heads", 's', &heads_s, 0, 0, NULL, "a,b,..\tquery heads (default 0,3,6)"};
    fl[nf++] = (kvc_flag){"--rounds", 's', &rounds_s, 0, 0, NULL, "T1,T2,..\thalvings of the middle (default 1,2,3,4)"};
    fl[nf++] = (kvc_flag){"--seeds", 'u', &seeds, 1, 1000, NULL, "S\tseeds 1..S per cell (default 20)"};
    fl[nf++] = (kvc_flag){"--first", 'u', &first, 0, 1u << 20, NULL, "F\texact first tokens (default 256)"};
    fl[nf++] = (kvc_flag){
        "--recent", 'u', &recent, 1, 1u << 20, NULL, "R\texact last tokens, the scored queries (default 256)"};
    fl[nf++] = (kvc_flag){"--csv", 's', &csv_path, 0, 0, NULL, "FILE\tone row per (head, T, seed, method)"};
    fl[nf++] = (kvc_flag){"--methods",
                          's',
                          &methods_s,
                          0,
                          0,
                          NULL,
                          "a,b|all\tregistered methods too, as streams at a budget of the kept tokens (all: every one "
                          "that does not observe)"};
    kvc_method_opts mo;
    memset(&mo, 0, sizeof mo);
    const int prc = kvc_cli_parse("fig1", argc, argv, fl, nf, &mo, usage);
    if (prc == 1) return 0;
    if (prc) return prc;
    /* the lists through the benchmarks' parser (ranges checked, the flag named) */
    int heads_i[64], rounds_i[16];
    const int nh = heads_s ? kvc_bench_int_list("--heads", heads_s, 0, 4095, heads_i, 64) : -1;
    const int nr = rounds_s ? kvc_bench_int_list("--rounds", rounds_s, 1, 16, rounds_i, 16) : -1;
    const size_t n_heads = nh > 0 ? (size_t)nh : 0, n_rounds = nr > 0 ? (size_t)nr : 0;
    size_t heads[64], rounds[16];
    for (size_t i = 0; i < n_heads; i++) heads[i] = (size_t)heads_i[i];
    for (size_t i = 0; i < n_rounds; i++) rounds[i] = (size_t)rounds_i[i];
    if (dir == NULL || n_heads == 0 || n_rounds == 0) {
        fprintf(stderr, "kvc fig1: %s\n", dir == NULL ? "--trace DIR is required" : "--heads / --rounds: a,b,.. lists");
        return 2;
    }
    kvc_method methods[32];
    size_t n_methods = 0;
    if (methods_s && strcmp(methods_s, "all") == 0) {
        for (size_t i = 0; i < kvc_method_count() && n_methods < 32; i++)
            if (!kvc_method_observes(kvc_method_at(i))) methods[n_methods++] = kvc_method_at(i);
    } else if (methods_s) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", methods_s);
        for (char *tok = strtok(buf, ","); tok && n_methods < 32; tok = strtok(NULL, ",")) {
            if (kvc_method_parse(tok, &methods[n_methods]) != KVC_OK) {
                fprintf(stderr, "kvc fig1: --methods: unknown method %s\n", tok);
                return 2;
            }
            n_methods++;
        }
    }
    if (kvc_method_opts_check(&mo, "fig1", methods, n_methods)) return 2;
    FILE *csv = NULL;
    if (csv_path && !(csv = fopen(csv_path, "w"))) {
        fprintf(stderr, "kvc fig1: cannot write %s\n", csv_path);
        return 1;
    }
    if (csv) fprintf(csv, "head,T,seed,method,kept,mean_rel_error\n");
    double sum_b[16] = {0}, sum_u[16] = {0}, sum_m[16][32] = {{0}};
    size_t held_m[16][32] = {{0}}, fail_m[16][32] = {{0}};
    size_t cells[16] = {0}, kept_at[16] = {0};
    int rc = 0;
    for (size_t hi = 0; hi < n_heads && rc == 0; hi++) {
        kvc_trace tr;
        if (kvc_trace_load(dir, heads[hi], &tr)) return 1;
        const size_t n = tr.n, d = tr.d, dv = tr.dv;
        if (first + recent + 2 > n) {
            fprintf(stderr, "kvc fig1: %zu tokens leave no middle after --first %" PRIu64 " and --recent %" PRIu64 "\n",
                    n, first, recent);
            kvc_trace_free(&tr);
            rc = 2;
            break;
        }
        fig1_case c = {
            &tr, (size_t)first, (size_t)recent, (size_t)first, n - first - recent, NULL, NULL, NULL, NULL, NULL, NULL,
            &mo};
        c.kc = malloc(c.mid * d * sizeof(float)), c.vc = malloc(c.mid * dv * sizeof(float));
        c.wc = malloc(c.mid * sizeof(float)), c.exact = malloc(c.recent * dv * sizeof(double));
        c.work = malloc((size_t)kvc_attend_work_bytes(1, 1, dv)), c.z = malloc(dv * sizeof(float));
        uint32_t *kept = malloc(c.mid * sizeof(uint32_t)), *perm = malloc(c.mid * sizeof(uint32_t));
        float *w = malloc(c.mid * sizeof(float));
        const size_t wb = kvc_balancekv_offline_work_bytes(c.mid, d, dv, 0);
        void *work = malloc(wb);
        if (!c.kc || !c.vc || !c.wc || !c.exact || !c.work || !c.z || !kept || !perm || !w || !work) {
            fprintf(stderr, "kvc fig1: out of memory\n");
            rc = 1;
        }
        for (size_t i = 0; i < c.recent && rc == 0; i++) {
            kvc_exact_result er;
            const size_t j = n - c.recent + i;
            kvc_exact_attention_f64(tr.q + j * d, tr.k, tr.v, j + 1, d, dv, 1.0 / sqrt((double)d), c.exact + i * dv,
                                    &er);
        }
        for (size_t ri = 0; ri < n_rounds && rc == 0; ri++) {
            const size_t T = rounds[ri];
            for (uint64_t seed = 1; seed <= seeds && rc == 0; seed++) {
                kvc_balancekv_offline_params prm;
                memset(&prm, 0, sizeof prm);
                prm.rounds = (uint32_t)T;
                size_t nk = 0;
                const kvc_status s = kvc_balancekv_offline(tr.k + c.mid0 * d, tr.v + c.mid0 * dv, c.mid, d, dv, &prm,
                                                           seed, work, wb, kept, w, &nk);
                if (s != KVC_OK) {
                    fprintf(stderr, "kvc fig1: offline BalanceKV: %s\n", kvc_status_str(s));
                    rc = 1;
                    break;
                }
                for (size_t i = 0; i < nk; i++) gather(&c, i, kept[i], w[i]);
                const double eb = score(&c, nk);
                /* uniform without replacement, the same count (a partial Fisher-Yates shuffle) */
                kvc_rng r;
                kvc_rng_seed(&r, 0x5eedu ^ (seed * 0x9E3779B97F4A7C15ull) ^ (heads[hi] << 8) ^ T);
                for (size_t i = 0; i < c.mid; i++) perm[i] = (uint32_t)i;
                for (size_t i = 0; i < nk; i++) {
                    const size_t j = i + (size_t)kvc_rng_below(&r, c.mid - i);
                    const uint32_t t = perm[i];
                    perm[i] = perm[j], perm[j] = t;
                    gather(&c, i, perm[i], (float)((double)c.mid / (double)nk));
                }
                const double eu = score(&c, nk);
                if (csv) {
                    fprintf(csv, "%zu,%zu,%" PRIu64 ",balancekv-offline,%zu,%.6g\n", heads[hi], T, seed, nk, eb);
                    fprintf(csv, "%zu,%zu,%" PRIu64 ",uniform-sample,%zu,%.6g\n", heads[hi], T, seed, nk, eu);
                    fflush(csv);
                }
                sum_b[ri] += eb, sum_u[ri] += eu, cells[ri]++, kept_at[ri] = nk;
                for (size_t mi = 0; mi < n_methods; mi++) {
                    size_t held = 0;
                    /* a seed per head, as the uniform sample has: a sampler that ignores the data
                       would otherwise keep the same tokens for every head */
                    const double em = score_stream(&c, methods[mi], (uint32_t)nk, seed * 1000003u + heads[hi], &held);
                    if (isnan(em)) {
                        fail_m[ri][mi]++;
                        continue;
                    }
                    sum_m[ri][mi] += em, held_m[ri][mi] = held;
                    if (csv) {
                        fprintf(csv, "%zu,%zu,%" PRIu64 ",%s,%zu,%.6g\n", heads[hi], T, seed,
                                kvc_method_name(methods[mi]), held, em);
                        fflush(csv);
                    }
                }
            }
        }
        free(c.kc), free(c.vc), free(c.wc), free(c.exact), free(c.work), free(c.z), free(kept), free(perm), free(w);
        free(work);
        kvc_trace_free(&tr);
    }
    if (csv) fclose(csv);
    if (rc) return rc;
    printf("kvc fig1: trace %s, heads %s, %" PRIu64 " seeds, first %" PRIu64 " and last %" PRIu64 " exact\n", dir,
           heads_s, seeds, first, recent);
    printf("%3s %6s %12s %12s %8s\n", "T", "kept", "balancekv", "uniform", "ratio");
    for (size_t ri = 0; ri < n_rounds; ri++) {
        const double b = sum_b[ri] / (double)cells[ri], u = sum_u[ri] / (double)cells[ri];
        printf("%3zu %6zu %12.5g %12.5g %8.3f\n", rounds[ri], kept_at[ri], b, u, b / u);
    }
    if (n_methods) {
        printf("streams at a budget of the kept tokens (held: the view's entries at the end; ratio to uniform):\n");
        printf("%-18s", "method");
        for (size_t ri = 0; ri < n_rounds; ri++) printf("   T=%zu held   ratio", rounds[ri]);
        printf("\n");
        for (size_t mi = 0; mi < n_methods; mi++) {
            printf("%-18s", kvc_method_name(methods[mi]));
            for (size_t ri = 0; ri < n_rounds; ri++) {
                if (fail_m[ri][mi]) {
                    printf(" %16s", "refused");
                    continue;
                }
                const double u = sum_u[ri] / (double)cells[ri];
                printf("   %9zu %7.3f", held_m[ri][mi], sum_m[ri][mi] / (double)cells[ri] / u);
            }
            printf("\n");
        }
    }
    return 0;
}
