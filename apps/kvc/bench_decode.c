/* kvc bench decode: decode speed after a long context, every method in one
 * run. The context (a long text, repeated as needed) is prefilled once at full
 * attention while its k/v rows are recorded; each method's cache is filled with
 * them (prefill methods compress them as the prompt) and then decodes greedily
 * one token at a time. Rounds interleave the methods so that a noisy machine
 * slows them alike; the ratio to exact is taken per round and the median
 * reported. --threads N runs the one decoder on N threads (products by output
 * rows, attention split-K); default 1. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "kv_record.h"
#include "lmrun.h"

typedef struct dec {
    int status; /* 1 ok, -1 n/a, -2 failed */
    const char *why;
    void *arena;
    kvc_cache *cache;
    kvc_l2c_state s;
    int pos, next;
    double build_s, peak_bytes;
    double tps[64];
} dec;

static void decode_usage(FILE *f)
{
    fprintf(f,
            "usage: kvc bench decode [--context N] [--steps S] [--rounds R] [--text FILE] [options]\n"
            "  Decode tokens per second after N context tokens of FILE (repeated as needed), S greedy\n"
            "  steps per method per round, R rounds; prints tokens/s, the median per-round ratio to\n"
            "  exact, the time to fill each cache from the recorded context and its peak bytes.\n%s",
            kvc_bench_shared_usage);
}

int kvc_bench_decode(int argc, char **argv)
{
    kvc_bench_opts o;
    kvc_bench_opts_init(&o, "decode");
    const char *text_path = "/usr/share/common-licenses/GPL-3";
    uint64_t context = 0, steps = 32, rounds = 5;
    kvc_flag fl[24];
    size_t nf = kvc_bench_flags_add(&o, fl, 0);
    for (size_t j = 0; j < nf; j++) /* here --threads are the decoder's, not workers */
        if (!strcmp(fl[j].name, "--threads"))
            fl[j].help = "N\tdecoder threads (default 1; products by output rows, split-K attention)";
    fl[nf++] = (kvc_flag){"--context",
                          'u',
                          &context,
                          16,
                          1u << 20,
                          NULL,
                          "N\tcontext tokens before decoding (default: the model's context minus R*S)"};
    fl[nf++] = (kvc_flag){"--steps", 'u', &steps, 1, 4096, NULL, "S\tgreedy steps per method per round (default 32)"};
    fl[nf++] = (kvc_flag){"--rounds", 'u', &rounds, 1, 64, NULL, "R\trounds (default 5)"};
    fl[nf++] = (kvc_flag){"--text", 's', &text_path, 0, 0, NULL, "FILE\tthe context's text (default the GPL-3 text)"};
    const int prc = kvc_cli_parse("bench decode", argc, argv, fl, nf, &o.mo, decode_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (kvc_bench_finish(&o)) return 2;
    const int threads = o.threads_flag ? (int)o.threads_flag : 1;
    if (kvc_l2c_set_threads(threads) != 0) {
        fprintf(stderr, "kvc bench decode: cannot start %d decoder threads\n", threads);
        return 1;
    }
    char *text = kvc_lm_read_text("bench decode", text_path);
    if (!text) {
        return 1;
    }
    kvc_lm lm;
    if (kvc_bench_open(&o, &lm)) {
        free(text);
        return 1;
    }
    const kvc_l2c_model *m = &lm.m;
    const int extra = (int)(steps * rounds);
    if (context == 0) context = m->cfg.seq_len > extra + 16 ? (uint64_t)(m->cfg.seq_len - extra) : 16;
    int ret = 1;
    FILE *csv = NULL;
    const int N = (int)context;
    if (N + extra > m->cfg.seq_len) {
        fprintf(stderr, "kvc bench decode: context %d + %d decode steps is beyond the model's %d tokens\n", N, extra,
                m->cfg.seq_len);
        free(text);
        kvc_lm_close(&lm);
        return 2;
    }
    const size_t tcap = strlen(text) + 3;
    int *piece = malloc(tcap * sizeof(int)), *toks = malloc((size_t)N * sizeof(int));
    dec *d = calloc((size_t)o.n_cfg, sizeof(dec));
    kvc_kv_record rec = {0};
    kvc_l2c_state s0 = {0};
    int np = piece ? kvc_lm_encode(&lm, text_path, text, piece, (int)tcap) : -1;
    if (!toks || !d || np < 1) {
        if (np == KVC_BPE_E_BYTE) goto done; /* named where it was found */
        fprintf(stderr, "kvc bench decode: no tokens from '%s'\n", text_path);
        goto done;
    }
    for (int i = 0; i < N; i++) toks[i] = piece[i % np];
    if (kvc_bench_csv_open(&o, &csv) || kvc_kv_record_alloc(&rec, &m->cfg, N) ||
        kvc_l2c_state_alloc_chunk(&m->cfg, KVC_LM_CHUNK, &s0) != KVC_OK)
        goto done;
    printf("kvc bench decode: %d context tokens, %d rounds x %d steps, %d configurations, kernels %s, %d threads\n", N,
           (int)rounds, (int)steps, o.n_cfg, kvc_l2c_kernels()->name, threads);
    fprintf(stderr, "[decode] prefilling %d tokens at full attention...\n", N);
    /* all but the last context token are recorded; the last one is each
     * method's first decode input, so every cache holds N-1 rows before timing */
    if (kvc_kv_record_prefill(&rec, m, &s0, toks, N - 1) != KVC_OK) goto done;
    for (int g = 0; g < o.n_cfg; g++) {
        kvc_stream_config sc;
        dec *x = &d[g];
        x->status = -2;
        x->why = kvc_bench_stream(&o, &o.cfg[g], &m->cfg, N + extra, N + extra, &sc);
        if (x->why) {
            x->status = -1;
            continue;
        }
        x->arena = kvc_bench_cache_new(&o, &o.cfg[g], &m->cfg, N + extra, N + extra, &x->cache, NULL);
        if (!x->arena || kvc_l2c_state_alloc(&m->cfg, &x->s) != KVC_OK) continue;
        const double t0 = kvc_bench_now();
        if (kvc_kv_record_replay(&rec, x->cache, N - 1) != KVC_OK) continue;
        x->build_s = kvc_bench_now() - t0;
        x->pos = N - 1, x->next = toks[N - 1], x->status = 1;
        fprintf(stderr, "[decode] %s: cache filled in %.2f s\n", o.cfg[g].label, x->build_s);
    }
    for (int r = 0; r < (int)rounds; r++)
        for (int g = 0; g < o.n_cfg; g++) {
            dec *x = &d[g];
            if (x->status != 1) continue;
            const double t0 = kvc_bench_now();
            for (int k = 0; k < (int)steps; k++) {
                kvc_status st = kvc_l2c_forward(m, &x->s, x->next, x->pos, kvc_l2c_cache_attention, x->cache);
                if (st != KVC_OK) {
                    char why[160];
                    fprintf(stderr, "kvc bench decode: %s failed at %d: %s\n", o.cfg[g].label, x->pos,
                            kvc_l2c_failure(m, &x->s, st, why, sizeof why));
                    x->status = -2;
                    break;
                }
                x->next = kvc_lm_argmax(x->s.logits, m->cfg.vocab_size);
                x->pos++;
            }
            x->tps[r] = (double)steps / (kvc_bench_now() - t0);
        }
    printf("\ndecode after %d tokens: tokens/s (median of %d rounds), ratio to exact (median of per-round ratios)\n"
           "%-26s %10s %10s %12s %14s\n",
           N, (int)rounds, "method budget", "tokens/s", "vs exact", "fill s", "peak cache B");
    if (csv)
        fprintf(csv, "method,budget_pct,context,threads,steps,rounds,tokens_per_s,ratio_to_exact,fill_seconds,cache_"
                     "peak_bytes\n");
    for (int g = 0; g < o.n_cfg; g++) {
        dec *x = &d[g];
        if (x->status == 1) {
            uint64_t el, peak;
            kvc_cache_get_usage_bytes(x->cache, &el, &peak);
            double ratio[64], tps[64];
            for (int r = 0; r < (int)rounds; r++)
                ratio[r] = d[0].status == 1 ? x->tps[r] / d[0].tps[r] : 0, tps[r] = x->tps[r];
            const double mt = kvc_bench_median(tps, (int)rounds), mr = kvc_bench_median(ratio, (int)rounds);
            printf("%-26s %10.2f %10.2f %12.2f %14" PRIu64 "\n", o.cfg[g].label, mt, mr, x->build_s, peak);
            if (csv)
                fprintf(csv, "%s,%g,%d,%d,%d,%d,%.4f,%.4f,%.3f,%" PRIu64 "\n", kvc_method_name(o.cfg[g].method),
                        o.cfg[g].pct, N, threads, (int)steps, (int)rounds, mt, mr, x->build_s, peak);
        } else {
            printf("%-26s %10s\n", o.cfg[g].label, x->status == -1 ? "n/a" : "error");
            if (x->status == -1) printf("  n/a: %s\n", x->why);
        }
    }
    ret = 0;
    for (int g = 0; g < o.n_cfg; g++)
        if (d[g].status == -2) ret = 1;
done:
    if (csv) fclose(csv);
    for (int g = 0; d && g < o.n_cfg; g++) {
        free(d[g].arena);
        kvc_l2c_state_free(&d[g].s);
    }
    kvc_kv_record_free(&rec);
    kvc_l2c_state_free(&s0);
    free(d), free(piece), free(toks), free(text);
    kvc_lm_close(&lm);
    return ret;
}
