#ifndef KVC_APP_ARGS_H
#define KVC_APP_ARGS_H
/* The command line's leaf helpers: numbers in a range (one grammar with the
 * core, kvc_decimal_prefix), directories, the arena limit and the budget a
 * run can use. They depend on nothing of the app; the flag tables (cli.h),
 * the budget grammar (budget.h) and the method options (method_opts.h)
 * build on them. */
#include <stdint.h>

/** Parse a decimal unsigned integer in [lo, hi] for flag @p flag; on error
 *  print "kvc: <flag> expects an integer in lo..hi, got '<s>'" and return 1. */
int kvc_cli_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/** Parse a finite double in [lo, hi]; same error convention. */
int kvc_cli_f64(const char *flag, const char *s, double lo, double hi, double *out);
/** Create @p dir and any missing parents (like mkdir -p); prints why and
 *  returns 1 on failure (naming @p cmd), 0 on success. */
int kvc_mkdirs(const char *cmd, const char *dir);
/** Largest cache arena the command line allocates, in bytes: $KVC_MAX_ARENA_MB
 *  MiB when set (a decimal number, 1/1024 .. 2^30), else 8192 MiB. */
uint64_t kvc_cli_arena_limit(void);
/** Refuse, before allocating, a cache of @p bytes above kvc_cli_arena_limit()
 *  (or 0 = an invalid configuration): prints why naming @p cmd, returns 1. */
int kvc_cli_arena_refused(const char *cmd, uint64_t bytes);
/** The budget a run can use: a per-stream budget above the @p usable tokens
 *  this run can ever append holds nothing more, so it is clamped to it (with a
 *  note naming @p cmd and @p what the tokens are). */
uint32_t kvc_cli_clamp_budget(const char *cmd, uint64_t budget, uint64_t usable, const char *what);
/** The most tokens a run's budget can use: the @p tokens it will append, but
 *  not below the sink + window + 2 (current token + one method token) the
 *  stream layout needs, so that a short text, trace or context is not refused
 *  for a budget the user never asked for. */
uint64_t kvc_cli_usable_tokens(uint64_t tokens, uint64_t sink, uint64_t window);

#endif
