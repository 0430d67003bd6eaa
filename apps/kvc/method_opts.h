#ifndef KVC_APP_METHOD_OPTS_H
#define KVC_APP_METHOD_OPTS_H
/* The method tuning flags of every command that builds a cache: --beta, --dtype and
 * one flag per parameter descriptor of the library's methods
 * (kvc_method_param_at: --subgen-t, --bkv-mode, --express-L, ...). Nothing is
 * listed here by hand: a parameter added to a method is a flag everywhere.
 * Unset flags leave the library's defaults (0 = derive). */
#include <stdio.h>

#include "kvc/kvc.h"

#define KVC_METHOD_OPTS_MAX 32

typedef struct kvc_method_opts {
    double beta;
    int have_dtype;
    kvc_dtype dtype;         /* --dtype: storage type of cached keys and values */
    double protect_pct;      /* --protect P: percent of the budget for protected spans (0 = off) */
    uint64_t protect_radius; /* --protect-radius R (0 = the library's 25) */
    unsigned app_given;      /* which of --beta, --dtype, --protect, --protect-radius were given */
    size_t n;
    const char *name[KVC_METHOD_OPTS_MAX];  /* descriptor names (static strings of the library) */
    const char *value[KVC_METHOD_OPTS_MAX]; /* as given (argv strings) */
} kvc_method_opts;

/** Print the usage lines of the flags (two-space indent), from the descriptors. */
void kvc_method_opts_usage_print(FILE *f);

/** A parameter's values as help texts write them: "a|b|c", "1..4096" or "1e-06..1e+06|theory". */
void kvc_method_opts_param_range(const kvc_param_desc *d, char *buf, size_t cap);

/** Print every method flag's name (--beta, --dtype, --protect, --protect-radius,
 *  then each descriptor once), one per line: kvc_cli_parse's --list-flags. */
void kvc_method_opts_list_flags(FILE *f);

/**
 * @brief Take @p flag with value @p val if it is a method flag; the value is
 *        checked against the descriptor's range or choices now.
 * @return 1 taken, 0 not a method flag, -1 bad value (a message was printed).
 */
int kvc_method_opts_take(kvc_method_opts *o, const char *flag, const char *val);

/** Set the taken flags that belong to @p cfg's method into @p cfg (protected
 *  spans sized from cfg->budget: set the budget first). */
void kvc_method_opts_apply(const kvc_method_opts *o, kvc_stream_config *cfg);

/**
 * @brief Refuse method flags that tune none of the @p n methods a command
 *        runs (e.g. --subgen-t with --method h2o): a flag that would be
 *        ignored is named, with the methods it does tune.
 * @return 0 every flag applies to one of them; 1 a message naming @p cmd was printed.
 */
int kvc_method_opts_check(const kvc_method_opts *o, const char *cmd, const kvc_method *methods, size_t n);

/** Size the protected spans (--protect P %) from cfg->budget again, after a caller changed the budget. */
void kvc_method_opts_protect(const kvc_method_opts *o, kvc_stream_config *cfg);

/**
 * @brief Budgets in bytes: set cfg->budget to the most tokens (at most
 *        @p max_tokens) whose arena fits @p bytes, with the protected spans
 *        (--protect) sized from that budget (shrunk until the arena fits).
 * @return the budget, or 0 when nothing fits (cfg->budget then unchanged).
 */
uint32_t kvc_method_opts_fit_bytes(const kvc_method_opts *o, kvc_stream_config *cfg, uint64_t bytes,
                                   uint32_t max_tokens);

/** Append " --flag value" for every set flag to @p buf (for labels and CSV). */
void kvc_method_opts_describe(const kvc_method_opts *o, char *buf, size_t cap);
#endif
