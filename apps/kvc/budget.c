/* The command line's one budget vocabulary (budget.h). */
#define _POSIX_C_SOURCE 200809L
#include "budget.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "kvc/kvc_attend.h"
#include "method_opts.h"

static int refuse(const char *flag, const char *text, const char *why)
{
    fprintf(stderr, "kvc: %s: '%s' %s; a budget is %s\n", flag, text ? text : "(missing)", why, KVC_BUDGET_SYNTAX);
    return 1;
}

int kvc_budget_parse(const char *flag, const char *text, kvc_budget *out)
{
    if (!text || !*text) return refuse(flag, text, "is empty");
    char *end = NULL;
    errno = 0;
    const double v = strtod(text, &end);
    if (end == text || errno || !isfinite(v) || v <= 0 || text[0] == '-' || text[0] == '+' ||
        (size_t)(end - text) != kvc_decimal_prefix(text, 0))
        return refuse(flag, text, "does not start with a positive decimal number");
    kvc_budget b = {KVC_BUDGET_TOKENS, v};
    if (*end == '\0') {
        if (v != floor(v) || v < 1 || v > KVC_MAX_BUDGET)
            return refuse(flag, text, "is not a whole number of tokens in range");
    } else if (!strcmp(end, "%")) {
        b.kind = KVC_BUDGET_CONTEXT;
        if (v > 100) return refuse(flag, text, "is more than the whole context");
    } else if (!strcmp(end, "%f16")) {
        b.kind = KVC_BUDGET_F16;
        if (v > 1000) return refuse(flag, text, "is more than 10 times an f16 exact cache");
    } else {
        static const struct {
            const char *unit;
            double scale;
        } units[] = {{"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
        size_t u = 0;
        while (u < sizeof units / sizeof units[0] && strcmp(end, units[u].unit) != 0) u++;
        if (u == sizeof units / sizeof units[0]) return refuse(flag, text, "has an unknown unit");
        b.kind = KVC_BUDGET_BYTES, b.value = v * units[u].scale;
        if (b.value < 1 || b.value > 1.0e15) return refuse(flag, text, "is out of range");
    }
    *out = b;
    return 0;
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
        if (kvc_budget_parse(flag, tok, &out[n])) return -1;
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
    if (b->kind == KVC_BUDGET_TOKENS || b->kind == KVC_BUDGET_CONTEXT) {
        double t = b->kind == KVC_BUDGET_TOKENS ? b->value : ceil(b->value / 100.0 * (double)context);
        if (t < 1) t = 1;
        if (t > KVC_MAX_BUDGET) t = KVC_MAX_BUDGET;
        cfg->budget = (uint32_t)t;
        if (usable) cfg->budget = kvc_cli_clamp_budget(cmd, cfg->budget, usable, usable_what);
        if (mo) kvc_method_opts_protect(mo, cfg);
        return 0;
    }
    /* bytes per stream: a share of the f16 exact cache of the context, or the whole cache's bytes split */
    const double per_stream = b->kind == KVC_BUDGET_F16
                                  ? b->value / 100.0 * (double)context * (double)(cfg->d + cfg->dv) * 2.0
                                  : b->value / (double)n_streams;
    const uint64_t bytes = (uint64_t)per_stream;
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
