/* The command line's one budget vocabulary (budget.h). */
#define _POSIX_C_SOURCE 200809L
#include "budget.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "method_opts.h"

static int refuse(const char *flag, const char *text, const char *why)
{
    fprintf(stderr, "kvc: %s: '%s' %s; a budget is %s\n", flag, text ? text : "(missing)", why, KVC_BUDGET_SYNTAX);
    return 1;
}

int kvc_cli_budget_parse(const char *flag, const char *text, kvc_budget *out)
{
    const char *why = kvc_budget_parse(text, out);
    return why ? refuse(flag, text, why) : 0;
}

int kvc_budget_list(const char *flag, const char *text, kvc_budget *out, int cap)
{
    if (!text || !*text) {
        refuse(flag, text, "is empty");
        return -1;
    }
    char buf[1024];
    if (strlen(text) >= sizeof buf) {
        refuse(flag, "...", "is too long");
        return -1;
    }
    strcpy(buf, text);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == cap) {
            fprintf(stderr, "kvc: %s: at most %d budgets\n", flag, cap);
            return -1;
        }
        if (kvc_cli_budget_parse(flag, tok, &out[n])) return -1;
        n++;
    }
    if (n == 0) {
        refuse(flag, text, "names no budget");
        return -1;
    }
    return n;
}

void kvc_budget_format(const kvc_budget *b, char *buf, size_t cap)
{
    switch (b->kind) {
    case KVC_BUDGET_TOKENS: snprintf(buf, cap, "%.0f", b->value); break;
    case KVC_BUDGET_CONTEXT: snprintf(buf, cap, "%g%%", b->value); break;
    case KVC_BUDGET_F16: snprintf(buf, cap, "%g%%f16", b->value); break;
    default:
        if (fmod(b->value, 1048576.0) == 0)
            snprintf(buf, cap, "%gMiB", b->value / 1048576.0);
        else if (fmod(b->value, 1024.0) == 0)
            snprintf(buf, cap, "%gKiB", b->value / 1024.0);
        else
            snprintf(buf, cap, "%.0fB", b->value);
    }
}

kvc_budget kvc_budget_from_compression_ratio(double r)
{
    kvc_budget b = {KVC_BUDGET_CONTEXT, (1.0 - r) * 100.0};
    return b;
}

int kvc_budget_resolve(const char *cmd, const kvc_budget *b, uint64_t context, uint64_t n_streams,
                       const kvc_method_opts *mo, kvc_stream_config *cfg, int quiet, uint64_t usable,
                       const char *usable_what)
{
    if (context < 1) context = 1;
    if (n_streams < 1) n_streams = 1;
    const uint32_t max_tokens = context > KVC_MAX_BUDGET ? KVC_MAX_BUDGET : (uint32_t)context;
    uint32_t tokens = 0;
    uint64_t bytes = 0;
    (void)kvc_budget_per_stream(b, cfg->d, cfg->dv, context, n_streams, &tokens, &bytes); /* context, n_streams >= 1 */
    if (tokens) {
        cfg->budget = tokens;
        if (usable) cfg->budget = kvc_cli_clamp_budget(cmd, cfg->budget, usable, usable_what);
        if (mo) kvc_method_opts_protect(mo, cfg);
        return 0;
    }
    kvc_method_opts none;
    memset(&none, 0, sizeof none);
    const uint32_t got = kvc_method_opts_fit_bytes(mo ? mo : &none, cfg, bytes, max_tokens);
    char text[48];
    kvc_budget_format(b, text, sizeof text);
    if (got == 0) {
        fprintf(stderr, "kvc %s: --budget %s gives %llu B per stream, too few for any %s budget in %s rows\n", cmd,
                text, (unsigned long long)bytes, kvc_method_name(cfg->method), kvc_dtype_name(cfg->dtype));
        return 1;
    }
    fflush(stdout); /* the note goes after what the command printed so far */
    if (!quiet)
        fprintf(stderr, "kvc %s: --budget %s: %llu B per stream -> %u tokens (arena %zu B)\n", cmd, text,
                (unsigned long long)bytes, (unsigned)got, kvc_stream_arena_bytes(cfg));
    return 0;
}
