/* kvc bench: shared options, the method x budget grid, the worker pool and
 * the progress line (see bench.h). */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "lmrun.h"
#include "commands.h"

const char kvc_bench_shared_usage[] =
    "  The shared options, model to budgets, are listed below; budgets (--budget) are shares of each\n"
    "  context, P% of its tokens or P%f16 of an f16 exact cache's bytes, per layer and kv head; sinks =\n"
    "  window = min(32, budget/8) (kivi4: window 32, one block). With P%f16 each method keeps the most\n"
    "  tokens whose arena (rows in\n"
    "  --dtype, metadata, scratch) fits; exact may then be listed in --methods; the reference stays f32.\n";

static const char *tok_path_opt;

static const char *head_table(const kvc_bench_opts *o, const kvc_bench_cfg *g, const kvc_l2c_config *c, int context,
                              const kvc_stream_config *base, kvc_cache_head *t);
static const char *heads_summary(const kvc_bench_opts *o, const kvc_bench_cfg *g, const kvc_l2c_config *c, int context,
                                 const kvc_stream_config *base, double *tokens, double *bytes);

double kvc_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kvc_bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int kvc_bench_int_list(const char *flag, const char *s, int lo, int hi, int *out, int cap)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < lo || v > hi || n == cap) {
            fprintf(stderr, "kvc bench: %s expects up to %d comma-separated integers in %d..%d, got '%s'\n", flag, cap,
                    lo, hi, s);
            return -1;
        }
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (n == 0) fprintf(stderr, "kvc bench: %s is empty\n", flag);
    return n ? n : -1;
}

static int parse_methods(kvc_bench_opts *o, const char *list)
{
    char buf[512];
    if (strlen(list) >= sizeof buf) {
        fprintf(stderr, "kvc bench: --methods list too long\n");
        return 1;
    }
    strcpy(buf, list);
    o->n_methods = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        kvc_method m;
        if (kvc_method_parse(t, &m) != KVC_OK) {
            char names[512];
            kvc_method_names(names, sizeof names);
            fprintf(stderr, "kvc bench: unknown method '%s' (%s)\n", t, names);
            return 1;
        }
        if (m == KVC_METHOD_EXACT && !o->bytes) continue; /* always there */
        if (o->n_methods == KVC_BENCH_MAX_LIST) {
            fprintf(stderr, "kvc bench: at most %d methods\n", KVC_BENCH_MAX_LIST);
            return 1;
        }
        o->methods[o->n_methods++] = m;
    }
    return 0;
}

void kvc_bench_opts_init(kvc_bench_opts *o, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->seed = 1;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = n > 0 ? (int)(n > 64 ? 64 : n) : 1;
    o->pcts[0] = 5, o->pcts[1] = 10, o->pcts[2] = 25, o->n_pct = 3;
    char all[512];
    kvc_method_names(all, sizeof all);    /* the registry: ", "-separated */
    for (char *c = all, *w = all;; c++) { /* to the --methods syntax: "," */
        if (*c == ' ') continue;
        *w++ = *c;
        if (!*c) break;
    }
    parse_methods(o, all);
    tok_path_opt = NULL;
}

size_t kvc_bench_flags_add(kvc_bench_opts *o, kvc_flag *fl, size_t n)
{
    fl[n++] = (kvc_flag){"--model",
                         's',
                         &o->model_path,
                         0,
                         0,
                         NULL,
                         "M.gguf|M.bin\tmodel (default $KVC_SMOLLM2, else the path apps/fetch-smollm2.sh writes)"};
    fl[n++] = (kvc_flag){"--tokenizer", 's', &o->tokenizer_path, 0, 0, NULL, "T.bin\tllama2.c models only"};
    fl[n++] = (kvc_flag){"--csv", 's', &o->csv_path, 0, 0, NULL, "FILE\tone row per measurement"};
    fl[n++] =
        (kvc_flag){"--seed", 'u', &o->seed, 0, 18446744073709551615.0, NULL, "S\tkeys, sampling seeds (default 1)"};
    fl[n++] = (kvc_flag){"--threads", 'u', &o->threads_flag, 1, 64, NULL, "N\tworkers (default: online CPUs)"};
    fl[n++] = (kvc_flag){"--quiet", 'b', &o->quiet, 0, 0, NULL, "\tno progress line"};
    fl[n++] = (kvc_flag){"--methods",
                         's',
                         &o->methods_text,
                         0,
                         0,
                         NULL,
                         "a,b,..\tdefault: every method (exact always runs as the reference)"};
    fl[n++] = (kvc_flag){
        "--budget", 's', &o->budgets_text, 0, 0, NULL, "P%,..|P%f16,..\tbudgets, all of one kind (default 5%,10%,25%)"};
    fl[n++] = (kvc_flag){"--compression-ratio",
                         's',
                         &o->ratios_text,
                         0,
                         0,
                         NULL,
                         "r,..\tkvpress's ratios (the share of each context removed): --budget (1-r)*100%"};
    fl[n++] = (kvc_flag){"--head-profile",
                         's',
                         &o->head_profile_path,
                         0,
                         0,
                         NULL,
                         "FILE\t(with P%f16) a head-wise twin of every column: each head of the profile (kvc profile) "
                         "gets a share of the same bytes by its kind"};
    fl[n++] = (kvc_flag){"--head-shares",
                         's',
                         &o->head_shares_text,
                         0,
                         0,
                         NULL,
                         "s,r,d\tbyte weights of streaming, retrieval, diffuse heads (default 0.25,2,1)"};
    fl[n++] = (kvc_flag){"--head-methods",
                         's',
                         &o->head_methods_text,
                         0,
                         0,
                         NULL,
                         "k=M,..\tmethod per kind (streaming=, retrieval=, diffuse=; default the column's)"};
    return n;
}

int kvc_bench_finish(kvc_bench_opts *o)
{
    if (o->threads_flag) o->threads = (int)o->threads_flag;
    if (o->methods_text && parse_methods(o, o->methods_text)) return 1;
    if (kvc_method_opts_check(&o->mo, o->cmd, o->methods, (size_t)o->n_methods)) return 1;
    if (!o->methods_text) /* the default list: exact is the reference only */
        for (int i = 0; i < o->n_methods; i++)
            if (o->methods[i] == KVC_METHOD_EXACT) o->methods[i--] = o->methods[--o->n_methods];
    if (o->budgets_text && o->ratios_text) {
        fprintf(stderr, "kvc bench: give --budget or --compression-ratio, not both\n");
        return 1;
    }
    if (o->ratios_text) { /* kvpress's ratios: the share removed */
        double r[KVC_BENCH_MAX_LIST];
        int nr = 0;
        char buf[512];
        snprintf(buf, sizeof buf, "%s", o->ratios_text);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (nr == KVC_BENCH_MAX_LIST || kvc_cli_f64("--compression-ratio", t, 0.0, 0.99, &r[nr])) return 1;
            nr++;
        }
        o->n_pct = 0;
        for (int i = 0; i < nr; i++) {
            const double pct = (1.0 - r[i]) * 100.0;
            if (!(pct >= 0.01 && pct <= 100.0)) { /* unreachable for r in [0, 0.99]: kept as the range's statement */
                fprintf(stderr, "kvc bench: --compression-ratio %g: a share of 0.01 .. 100%%\n", r[i]);
                return 1;
            }
            o->pcts[o->n_pct++] = pct;
        }
    }
    if (o->budgets_text) {
        kvc_budget b[KVC_BENCH_MAX_LIST];
        const int nb = kvc_budget_list("--budget", o->budgets_text, b, KVC_BENCH_MAX_LIST);
        if (nb < 0) return 1;
        o->n_pct = 0;
        o->bytes = b[0].kind == KVC_BUDGET_F16;
        for (int i = 0; i < nb; i++) {
            if ((b[i].kind != KVC_BUDGET_CONTEXT && b[i].kind != KVC_BUDGET_F16) || !(b[i].value >= 0.01) ||
                b[i].value > 100) {
                fprintf(stderr, "kvc bench: --budget: the grid runs several contexts, so its budgets are shares of "
                                "each, P%% (of its tokens) or P%%f16 (of its f16 exact cache's bytes), 0.01..100\n");
                return 1;
            }
            if ((b[i].kind == KVC_BUDGET_F16) != o->bytes) {
                fprintf(stderr,
                        "kvc bench: --budget: give all budgets as P%% or all as P%%f16 (one reference column)\n");
                return 1;
            }
            o->pcts[o->n_pct++] = b[i].value;
        }
    }
    tok_path_opt = o->tokenizer_path;
    o->head_plan.share[KVC_HEAD_STREAMING] = 0.25, o->head_plan.share[KVC_HEAD_RETRIEVAL] = 2.0;
    o->head_plan.share[KVC_HEAD_DIFFUSE] = 1.0;
    if ((o->head_shares_text || o->head_methods_text) && !o->head_profile_path) {
        fprintf(stderr, "kvc bench: --head-shares and --head-methods need --head-profile\n");
        return 1;
    }
    if (o->head_profile_path) {
        if (!o->bytes) {
            fprintf(stderr, "kvc bench: --head-profile shares a byte budget: give --budget P%%f16\n");
            return 1;
        }
        static kvc_head_profile profile; /* one per process: a command runs one bench */
        o->heads = &profile;
        if (kvc_head_profile_read(o->head_profile_path, o->heads)) return 1;
        if (o->head_shares_text && kvc_head_plan_shares(o->head_shares_text, &o->head_plan)) return 1;
        if (o->head_methods_text && kvc_head_plan_methods(o->head_methods_text, &o->head_plan)) return 1;
    }
    o->n_cfg = 0;
    kvc_bench_cfg *g = &o->cfg[o->n_cfg++];
    g->method = KVC_METHOD_EXACT, g->pct = 100, g->reference = 1;
    snprintf(g->label, sizeof g->label, "exact");
    for (int i = 0; i < o->n_methods; i++)
        for (int j = 0; j < o->n_pct; j++) {
            if (o->n_cfg == KVC_BENCH_MAX_CFG) {
                fprintf(stderr, "kvc bench: at most %d method x budget pairs\n", KVC_BENCH_MAX_CFG - 1);
                return 1;
            }
            g = &o->cfg[o->n_cfg++];
            g->method = o->methods[i], g->pct = o->pcts[j], g->reference = 0;
            snprintf(g->label, sizeof g->label, "%s %g%%%s", kvc_method_name(g->method), g->pct, o->bytes ? "f16" : "");
            if (o->heads && !(o->methods[i] == KVC_METHOD_EXACT)) { /* its head-wise twin */
                if (o->n_cfg == KVC_BENCH_MAX_CFG) {
                    fprintf(stderr, "kvc bench: at most %d columns\n", KVC_BENCH_MAX_CFG - 1);
                    return 1;
                }
                kvc_bench_cfg *t = &o->cfg[o->n_cfg++];
                *t = *g;
                t->headwise = 1;
                snprintf(t->label, sizeof t->label, "%s %g%%f16 heads", kvc_method_name(g->method), g->pct);
            }
        }
    return 0;
}

/* The head-wise table of column g (see kvc_bench_cache_new); NULL or why not. */
static const char *head_table(const kvc_bench_opts *o, const kvc_bench_cfg *g, const kvc_l2c_config *c, int context,
                              const kvc_stream_config *base, kvc_cache_head *t)
{
    const kvc_head_profile *hp = o->heads;
    if (hp->n_layers != c->n_layers || hp->n_kv_heads != c->n_kv_heads)
        return "the head profile is of another model (layers x kv heads differ)";
    const int n = hp->n_layers * hp->n_kv_heads;
    double total_share = 0.0;
    for (int i = 0; i < n; i++) total_share += o->head_plan.share[hp->kind[i]];
    const double all = (double)context * 2.0 * base->d * 2.0 * g->pct / 100.0 * n;
    for (int i = 0; i < n; i++) {
        const int k = hp->kind[i];
        kvc_stream_config sc = *base;
        if (o->head_plan.method[k]) sc.method = o->head_plan.method[k];
        const uint64_t bytes = (uint64_t)(all * o->head_plan.share[k] / total_share);
        const uint32_t b = kvc_method_opts_fit_bytes(&o->mo, &sc, bytes, (uint32_t)context);
        if (b == 0) return "a head's share of the bytes fits no budget of its method";
        sc.n_sink = sc.n_window = b / 8 < 32 ? b / 8 : 32;
        if (kvc_method_opts_fit_bytes(&o->mo, &sc, bytes, (uint32_t)context) == 0)
            return "a head's share of the bytes fits no budget of its method";
        if (sc.method == KVC_METHOD_EXACT && sc.budget < (uint32_t)context)
            return "an exact head's share holds fewer tokens than the context";
        t[i].method = (uint32_t)sc.method, t[i].budget = sc.budget, t[i].n_sink = sc.n_sink,
        t[i].n_window = sc.n_window, t[i].n_protect = sc.n_protect;
    }
    return NULL;
}

void *kvc_bench_cache_new(const kvc_bench_opts *o, const kvc_bench_cfg *g, const kvc_l2c_config *c, int context,
                          int prefix_len, kvc_cache **cache, size_t *bytes)
{
    kvc_stream_config sc;
    const char *why = kvc_bench_stream(o, g, c, context, prefix_len, &sc);
    if (why) {
        fprintf(stderr, "kvc bench %s: %s: %s\n", o->cmd, g->label, why);
        return NULL;
    }
    if (!g->headwise) return kvc_lm_cache_new(o->cmd, c, &sc, KVC_BUDGET_UNIFORM, cache, bytes);
    kvc_cache_head *t = malloc(sizeof(kvc_cache_head) * (size_t)c->n_layers * (size_t)c->n_kv_heads);
    if (!t) return NULL;
    why = head_table(o, g, c, context, &sc, t);
    kvc_cache_config cc = kvc_l2c_cache_config(c, &sc);
    cc.policy = KVC_BUDGET_HEADS;
    uint32_t bl, bh;
    if (!why) why = kvc_cache_heads_problem(&cc, t, &bl, &bh);
    const size_t b = why ? 0 : kvc_cache_arena_bytes_heads(&cc, t);
    void *arena = b ? aligned_alloc(KVC_ARENA_ALIGN, KVC_ALIGN_UP(b)) : NULL;
    if (why || !arena || kvc_cache_init_heads(arena, b, &cc, t, cache) != KVC_OK) {
        fprintf(stderr, "kvc bench %s: %s: %s\n", o->cmd, g->label, why ? why : "out of memory");
        free(arena), free(t);
        return NULL;
    }
    if (bytes) *bytes = b;
    free(t);
    return arena;
}

/* Sinks = window = min(32, budget / 8); a KIVI4 window is one block of 32
 * (its plan rounds windows down to whole blocks). */
static void exact_regions(kvc_stream_config *sc, uint32_t budget)
{
    sc->n_sink = sc->n_window = budget / 8 < 32 ? budget / 8 : 32;
    if (sc->dtype == KVC_DTYPE_KIVI4) sc->n_window = 32;
}

const char *kvc_bench_stream(const kvc_bench_opts *o, const kvc_bench_cfg *g, const kvc_l2c_config *c, int context,
                             int prefix_len, kvc_stream_config *sc)
{
    memset(sc, 0, sizeof *sc);
    sc->method = g->method;
    sc->dtype = KVC_DTYPE_F32;
    uint64_t budget = (uint64_t)floor((double)context * g->pct / 100.0);
    if (budget < 1) budget = 1;
    sc->budget = (uint32_t)budget;
    sc->seed = o->seed;
    sc->prefix_len = (uint32_t)(prefix_len > 0 ? prefix_len : 1);
    kvc_method_opts_apply(&o->mo, sc);
    exact_regions(sc, sc->budget);
    sc->d = sc->dv = (uint32_t)(c->dim / c->n_heads);        /* as kvc_l2c_cache_config sets them */
    if (o->bytes && g->reference) sc->dtype = KVC_DTYPE_F32; /* the ground truth */
    if (o->bytes && !g->reference) {
        const uint64_t target = (uint64_t)floor((double)context * 2.0 * sc->d * 2.0 * g->pct / 100.0);
        /* sinks and window follow the budget they help decide: size them from
           a first fit, then fit the budget to the bytes with them fixed */
        const uint32_t b = kvc_method_opts_fit_bytes(&o->mo, sc, target, (uint32_t)context);
        if (b == 0) return "no budget of this method fits that many bytes";
        exact_regions(sc, b);
        if (kvc_method_opts_fit_bytes(&o->mo, sc, target, (uint32_t)context) == 0)
            return "no budget of this method fits that many bytes";
        if (g->method == KVC_METHOD_EXACT && sc->budget < (uint32_t)context)
            return "exact in that many bytes holds fewer tokens than the context";
    }
    kvc_cache_config cc = kvc_l2c_cache_config(c, sc);
    const char *why = kvc_cache_config_problem(&cc);
    if (why || !g->headwise) return why;
    double tokens, bytes;
    return heads_summary(o, g, c, context, sc, &tokens, &bytes);
}

/* The mean tokens and arena bytes per stream of a head-wise column, and how
 * many streams of each kind; NULL or why it cannot be built. */
static const char *heads_summary(const kvc_bench_opts *o, const kvc_bench_cfg *g, const kvc_l2c_config *c, int context,
                                 const kvc_stream_config *base, double *tokens, double *bytes)
{
    const int n = c->n_layers * c->n_kv_heads;
    kvc_cache_head *t = malloc(sizeof(kvc_cache_head) * (size_t)n);
    if (!t) return "out of memory";
    const char *why = head_table(o, g, c, context, base, t);
    *tokens = *bytes = 0.0;
    for (int i = 0; !why && i < n; i++) {
        kvc_stream_config sc = *base;
        sc.method = (kvc_method)t[i].method, sc.budget = t[i].budget;
        sc.n_sink = t[i].n_sink, sc.n_window = t[i].n_window, sc.n_protect = t[i].n_protect;
        const size_t a = kvc_stream_arena_bytes(&sc);
        if (a == 0) why = kvc_stream_config_problem(&sc);
        *tokens += sc.budget < (uint32_t)context ? sc.budget : (uint32_t)context;
        *bytes += (double)a;
    }
    free(t);
    *tokens /= n, *bytes /= n;
    return why;
}

int kvc_bench_find(const kvc_bench_opts *o, kvc_method m, double pct, int headwise)
{
    for (int g = 1; g < o->n_cfg; g++)
        if (o->cfg[g].method == m && o->cfg[g].pct == pct && o->cfg[g].headwise == headwise) return g;
    return -1;
}

void kvc_bench_print_bytes(const kvc_bench_opts *o, const kvc_l2c_config *c, int context, int prefix_len)
{
    const uint64_t hd = (uint64_t)(c->dim / c->n_heads), f16 = (uint64_t)context * 2u * hd * 2u;
    printf("bytes per (layer, kv head) at %d tokens: f16 exact %" PRIu64 " B, f32 exact %" PRIu64 " B\n", context, f16,
           2u * f16);
    for (int g = 0; g < o->n_cfg; g++) {
        kvc_stream_config sc;
        const char *why = kvc_bench_stream(o, &o->cfg[g], c, context, prefix_len, &sc);
        if (why) {
            printf("  %-24s n/a: %s\n", o->cfg[g].label, why);
            continue;
        }
        double kept = sc.budget < (uint32_t)context ? sc.budget : (uint32_t)context;
        double a = (double)kvc_stream_arena_bytes(&sc);
        if (o->cfg[g].headwise) heads_summary(o, &o->cfg[g], c, context, &sc, &kept, &a); /* checked above */
        printf("  %-24s %-5s %6.0f tokens (%5.1f%%)  %9.0f B  %6.1f%% of f16  %6.1f%% of f32%s\n", o->cfg[g].label,
               kvc_dtype_name(sc.dtype), kept, 100.0 * kept / context, a, 100.0 * a / (double)f16,
               50.0 * a / (double)f16, o->cfg[g].headwise ? "  (mean over the heads)" : "");
    }
}

int kvc_bench_open(const kvc_bench_opts *o, kvc_lm *lm)
{
    static char def[4096];
    const char *path = o->model_path;
    if (!path || !*path) path = getenv("KVC_SMOLLM2");
    if (!path || !*path) {
        const char *cache = getenv("KVC_CACHE"), *home = getenv("HOME");
        if (cache)
            snprintf(def, sizeof def, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
        else
            snprintf(def, sizeof def, "%s/.cache/kvcompress/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
        path = def;
        if (access(path, R_OK) != 0) {
            fprintf(stderr,
                    "kvc bench %s: no model: pass --model X.gguf, set KVC_SMOLLM2, or fetch SmolLM2-135M with\n"
                    "  apps/fetch-smollm2.sh   (expected at %s)\n",
                    o->cmd, path);
            return 1;
        }
    }
    char name[32];
    snprintf(name, sizeof name, "bench %s", o->cmd);
    return kvc_lm_open(name, path, tok_path_opt, lm);
}

int kvc_bench_csv_open(const kvc_bench_opts *o, FILE **f)
{
    *f = NULL;
    if (!o->csv_path) return 0;
    *f = fopen(o->csv_path, "w");
    if (!*f) {
        fprintf(stderr, "kvc bench %s: cannot write '%s'\n", o->cmd, o->csv_path);
        return 1;
    }
    return 0;
}

/* ---- worker pool ---- */
typedef struct pool {
    pthread_mutex_t mu;
    int next, n;
    void (*fn)(void *, int, int);
    void *ctx;
} pool;

typedef struct worker_arg {
    pool *p;
    int id;
} worker_arg;

static void *worker_main(void *va)
{
    worker_arg *w = (worker_arg *)va;
    for (;;) {
        pthread_mutex_lock(&w->p->mu);
        int item = w->p->next < w->p->n ? w->p->next++ : -1;
        pthread_mutex_unlock(&w->p->mu);
        if (item < 0) return NULL;
        w->p->fn(w->p->ctx, item, w->id);
    }
}

void kvc_bench_parallel(int threads, int n_items, void (*fn)(void *ctx, int item, int worker), void *ctx)
{
    pool p = {PTHREAD_MUTEX_INITIALIZER, 0, n_items, fn, ctx};
    if (threads > n_items) threads = n_items;
    if (threads < 1) threads = 1;
    pthread_t tid[64];
    worker_arg args[64];
    int started = 0;
    for (int i = 1; i < threads; i++) {
        args[i].p = &p, args[i].id = i;
        if (pthread_create(&tid[i], NULL, worker_main, &args[i]) != 0) break;
        started = i;
    }
    args[0].p = &p, args[0].id = 0;
    worker_main(&args[0]); /* the caller works too; a failed thread start only means fewer workers */
    for (int i = 1; i <= started; i++) pthread_join(tid[i], NULL);
}

/* ---- progress ---- */
static pthread_mutex_t progress_mu = PTHREAD_MUTEX_INITIALIZER;

static void fmt_time(double s, char *b, size_t cap)
{
    if (s < 0) s = 0;
    int t = (int)(s + 0.5);
    if (t >= 3600)
        snprintf(b, cap, "%dh%02dm", t / 3600, t / 60 % 60);
    else
        snprintf(b, cap, "%dm%02ds", t / 60, t % 60);
}

void kvc_bench_progress_start(kvc_bench_progress *p, const char *cmd, int total_items, double total_work, int quiet)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd, p->total_items = total_items, p->total_work = total_work, p->quiet = quiet;
    p->t0 = kvc_bench_now();
}

void kvc_bench_progress_add(kvc_bench_progress *p, double work, const char *what)
{
    pthread_mutex_lock(&progress_mu);
    p->done_work += work;
    p->done_items++;
    if (!p->quiet) {
        const double el = kvc_bench_now() - p->t0;
        const double eta = p->done_work > 0 ? el * (p->total_work - p->done_work) / p->done_work : 0;
        char e[16], r[16];
        fmt_time(el, e, sizeof e), fmt_time(eta, r, sizeof r);
        fprintf(stderr, "%s[%s] %d/%d done (%s), elapsed %s, left ~%s%s", isatty(2) ? "\r\033[K" : "", p->cmd,
                p->done_items, p->total_items, what, e, r, isatty(2) ? "" : "\n");
        fflush(stderr);
    }
    pthread_mutex_unlock(&progress_mu);
}

void kvc_bench_progress_end(kvc_bench_progress *p)
{
    if (!p->quiet && isatty(2)) fputc('\n', stderr);
}

/* the benchmarks: one table for the dispatch and the usage text */
static const struct {
    const char *name, *what;
    int (*run)(int, char **);
} benches[] = {
    {"recall", "passkey retrieval accuracy per method x budget x context length", kvc_bench_recall},
    {"ppl", "perplexity of a long text, every token through each method's cache", kvc_bench_ppl},
    {"decode", "decode tokens per second after a long context, ratio to exact", kvc_bench_decode},
    {"kernels", "attention GB/s per kernel table and storage type, ratio to the read bandwidth", kvc_bench_kernels},
    {"cost", "per-token update and per-query cost of each method, ratio to exact attention", kvc_bench_cost},
    {"mirror", "host microseconds per stream and decode step with the pages on a device", kvc_bench_mirror},
};

int kvc_cmd_bench(int argc, char **argv)
{
    const size_t nb = sizeof benches / sizeof benches[0];
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: kvc bench <which> [options]   (kvc bench <which> --help)\n");
        for (size_t i = 0; i < nb; i++) fprintf(f, "  %-8s %s\n", benches[i].name, benches[i].what);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < nb; i++)
        if (!strcmp(argv[1], benches[i].name)) return benches[i].run(argc - 1, argv + 1);
    fprintf(stderr, "kvc bench: unknown benchmark '%s' (", argv[1]);
    for (size_t i = 0; i < nb; i++) fprintf(stderr, "%s%s", i ? ", " : "", benches[i].name);
    fprintf(stderr, ")\n");
    return 2;
}
