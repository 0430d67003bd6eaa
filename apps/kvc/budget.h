#ifndef KVC_APP_BUDGET_H
#define KVC_APP_BUDGET_H
/* One budget vocabulary for every command (docs/cli.md, "Budgets"): the
 * core's grammar (kvc_budget.h: tokens, P% of the context the run appends,
 * P%f16 of an f16 exact cache's bytes, bytes of the whole cache the command
 * builds), which Python parses with too, and kvpress's --compression-ratio r
 * (the share of the context removed): the same as --budget (1-r)*100%. The
 * byte forms keep, per stream, the most tokens whose arena fits
 * (kvc_stream_budget_for_bytes, with --protect). */
#include <stdint.h>

#include "kvc/kvc.h"

struct kvc_method_opts;

/** Parse one budget; prints "kvc: FLAG: ..." and returns 1 when @p text is not one. */
int kvc_cli_budget_parse(const char *flag, const char *text, kvc_budget *out);

/** Parse a comma-separated list of at most @p cap budgets; returns the count, or -1 (message printed). */
int kvc_budget_list(const char *flag, const char *text, kvc_budget *out, int cap);

/** "512", "25%", "25%f16", "96KiB"-style text of @p b (for labels and CSV). */
void kvc_budget_format(const kvc_budget *b, char *buf, size_t cap);

/** Budget of kvpress's --compression-ratio @p r (0 <= r < 1): (1-r)*100% of the context. */
kvc_budget kvc_budget_from_compression_ratio(double r);

/**
 * @brief Set cfg->budget (tokens per stream) from @p b for a run that appends
 *        @p context tokens through @p n_streams streams configured like
 *        @p cfg (method, dtype, d, dv, sinks, window set). The token forms are
 *        clamped to @p usable (0: not clamped) with a note naming @p usable_what
 *        (kvc_cli_clamp_budget); the byte forms fit the arena (with @p mo's
 *        protected spans) and print what they chose on stderr unless @p quiet.
 * @return 0, or 1 when no budget fits (a message naming @p cmd was printed).
 */
int kvc_budget_resolve(const char *cmd, const kvc_budget *b, uint64_t context, uint64_t n_streams,
                       const struct kvc_method_opts *mo, kvc_stream_config *cfg, int quiet, uint64_t usable,
                       const char *usable_what);
#endif
