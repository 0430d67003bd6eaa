#ifndef KVC_APP_BENCH_H
#define KVC_APP_BENCH_H
/* kvc bench recall|ppl|decode: every method at budgets that are fractions of
 * the context, on a real model, as a table and a CSV. This header holds what
 * the three share: options, the method x budget grid, a worker pool and the
 * progress line. */
#include <stdint.h>
#include <stdio.h>

#include "generate.h"
#include "head_profile.h"
#include "method_opts.h"

/** `kvc bench kernels`: attention GB/s per kernel table and storage type, against the read bandwidth. */
int kvc_bench_kernels(int argc, char **argv);
/** kvc bench cost: update and query cost per method against exact attention (bench_cost.c). */
int kvc_bench_cost(int argc, char **argv);
/** kvc bench mirror: host work per stream and step with the pages on a device (bench_mirror.c). */
int kvc_bench_mirror(int argc, char **argv);

#define KVC_BENCH_MAX_CFG  64
#define KVC_BENCH_MAX_LIST 16

/** One grid column: a method at pct % of the context (exact: 100). */
typedef struct kvc_bench_cfg {
    kvc_method method;
    double pct;     /* a share in percent, 0.01 .. 100 (6.25 and 12.5 included) */
    int reference;  /* 1: the exact reference column (f32 with P%f16 budgets) */
    int headwise;   /* 1: budgets per (layer, kv head) from --head-profile (P%f16 only) */
    char label[40]; /* "subgen 10%", or "subgen 10%f16" in bytes, "subgen 10%f16 heads" head-wise */
} kvc_bench_cfg;

/** Options the three benchmarks share. */
typedef struct kvc_bench_opts {
    const char *cmd;        /* "recall", "ppl", "decode" */
    const char *model_path; /* NULL: $KVC_SMOLLM2, else the fetch script's cache path */
    const char *csv_path;   /* NULL: no CSV */
    uint64_t seed;
    int threads;
    int quiet; /* no progress line */
    int bytes; /* --budget P%f16: budgets are percent of the f16 exact cache's bytes */
    kvc_bench_cfg cfg[KVC_BENCH_MAX_CFG];
    int n_cfg; /* cfg[0] is exact */
    double pcts[KVC_BENCH_MAX_LIST];
    int n_pct;
    kvc_method methods[KVC_BENCH_MAX_LIST];
    int n_methods;
    kvc_method_opts mo;
    kvc_head_profile *heads; /* --head-profile (static storage), NULL without */
    kvc_head_plan head_plan; /* --head-shares, --head-methods (methods 0: the column's own) */
    /* as given on the command line, turned into the fields above by kvc_bench_finish */
    const char *tokenizer_path, *methods_text, *budgets_text, *ratios_text;
    const char *head_profile_path, *head_shares_text, *head_methods_text;
    uint64_t threads_flag; /* 0: not given */
} kvc_bench_opts;

/** Default methods and budgets; seed 1, threads = online CPUs. */
void kvc_bench_opts_init(kvc_bench_opts *o, const char *cmd);

#include "cli.h"

/** Append the shared flags (--model --tokenizer --csv --seed --threads --quiet
 *  --methods a,b,.. --budget P%,..|P%f16,.. --compression-ratio r,..) to @p fl for
 *  kvc_cli_parse, which also takes the method tuning flags into o->mo.
 *  --head-profile --head-shares --head-methods). Returns the new count (12 more). */
size_t kvc_bench_flags_add(kvc_bench_opts *o, kvc_flag *fl, size_t n);

/** Turn the lists into o->cfg; prints why and returns 1 on failure. */
int kvc_bench_finish(kvc_bench_opts *o);

/**
 * @brief A cache for column @p g on a context of @p context tokens: the
 *        uniform cache of kvc_bench_stream, or, for a head-wise column, the
 *        ragged cache of the profile (kvc_cache_init_heads): stream i of kind
 *        k gets pct % x (f16 exact bytes) x n x share[k] / (sum of the shares
 *        of all n streams) bytes, at most the context's tokens, filled as
 *        P%f16 budgets fill every method (kvc_method_opts_fit_bytes).
 * @param bytes  the arena's bytes (may be NULL).
 * @return the arena (free() it), or NULL after printing why.
 */
void *kvc_bench_cache_new(const kvc_bench_opts *o, const kvc_bench_cfg *g, const kvc_l2c_config *c, int context,
                          int prefix_len, kvc_cache **cache, size_t *bytes);

/** Usage lines of the shared flags. */
extern const char kvc_bench_shared_usage[];

/**
 * @brief The stream configuration of @p g on a context of @p context tokens
 *        (budget = pct % of it, sinks = window = min(32, budget / 8), a KIVI4 window 32; prefill
 *        methods compress the first @p prefix_len tokens). With P%f16 the
 *        budget is the largest whose arena fits pct % of the f16 exact
 *        cache's bytes, context x (d + dv) x 2 (kvc_stream_budget_for_bytes),
 *        and the reference column stores f32. For a head-wise column @p sc is
 *        the base every stream starts from (budget: the uniform twin's), and
 *        the head-wise table is checked too.
 * @return NULL when usable, else why the library rejects it (a static sentence).
 */
const char *kvc_bench_stream(const kvc_bench_opts *o, const kvc_bench_cfg *g, const kvc_l2c_config *c, int context,
                             int prefix_len, kvc_stream_config *sc);

/** One line per configuration: tokens kept and arena bytes per (layer, kv head),
 *  against the f16 and f32 exact caches of @p context tokens. */
void kvc_bench_print_bytes(const kvc_bench_opts *o, const kvc_l2c_config *c, int context, int prefix_len);

/** Index of the column of method @p m at @p pct (head-wise twin or not), -1 when none. */
int kvc_bench_find(const kvc_bench_opts *o, kvc_method m, double pct, int headwise);

/** Open the model (o->model_path or the default); prints why and returns 1 on failure. */
int kvc_bench_open(const kvc_bench_opts *o, kvc_lm *lm);

/** Median of @p n >= 1 values (sorts them in place). */
double kvc_bench_median(double *v, int n);

/** Parse "a,b,c" integers in [lo, hi] into out (at most cap); prints why and returns -1, else the count. */
int kvc_bench_int_list(const char *flag, const char *s, int lo, int hi, int *out, int cap);

/** Run fn(ctx, item, worker) for every item on o->threads workers, biggest
 *  item first is the caller's job (items are taken in index order). */
void kvc_bench_parallel(int threads, int n_items, void (*fn)(void *ctx, int item, int worker), void *ctx);

/** Progress line on stderr: "[cmd] done/total what  elapsed  eta". Thread-safe. */
typedef struct kvc_bench_progress {
    const char *cmd;
    double total_work, done_work, t0;
    int done_items, total_items, quiet;
} kvc_bench_progress;
void kvc_bench_progress_start(kvc_bench_progress *p, const char *cmd, int total_items, double total_work, int quiet);
void kvc_bench_progress_add(kvc_bench_progress *p, double work, const char *what);
void kvc_bench_progress_end(kvc_bench_progress *p);

/** Seconds on a monotonic clock. */
double kvc_bench_now(void);

/** Open the CSV (NULL path: NULL file, no error); prints why and returns 1 on failure. */
int kvc_bench_csv_open(const kvc_bench_opts *o, FILE **f);

int kvc_bench_recall(int argc, char **argv);
int kvc_bench_ppl(int argc, char **argv);
int kvc_bench_decode(int argc, char **argv);
#endif
