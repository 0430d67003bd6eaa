#define _POSIX_C_SOURCE 200809L
#include "args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvc/kvc_budget.h" /* kvc_decimal_prefix */

int kvc_cli_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || kvc_decimal_prefix(s, 1) != strlen(s) || errno || *end || v < lo || v > hi) {
        fprintf(stderr, "kvc: %s expects an integer in %" PRIu64 "..%" PRIu64 ", got '%s'\n", flag, lo, hi,
                s ? s : "(missing)");
        return 1;
    }
    *out = v;
    return 0;
}

int kvc_cli_f64(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : NAN;
    if (!s || !*s || kvc_decimal_prefix(s[0] == '-' ? s + 1 : s, 0) != strlen(s[0] == '-' ? s + 1 : s) || errno ||
        *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "kvc: %s expects a number in %g..%g, got '%s'\n", flag, lo, hi, s ? s : "(missing)");
        return 1;
    }
    *out = v;
    return 0;
}

int kvc_mkdirs(const char *cmd, const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) {
        fprintf(stderr, "kvc %s: invalid directory '%s'\n", cmd, dir);
        return 1;
    }
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != 0) continue;
        char saved = path[i];
        path[i] = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "kvc %s: cannot create '%s': %s\n", cmd, path, strerror(errno));
            return 1;
        }
        path[i] = saved;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kvc %s: '%s' exists and is not a directory\n", cmd, dir);
        return 1;
    }
    return 0;
}

uint64_t kvc_cli_arena_limit(void)
{
    const char *e = getenv("KVC_MAX_ARENA_MB");
    if (e && *e) {
        char *end = NULL;
        errno = 0;
        const double mb = strtod(e, &end);
        if (!errno && end && !*end && mb >= 1.0 / 1024.0 && mb <= 1073741824.0) return (uint64_t)(mb * 1048576.0);
        fprintf(stderr, "kvc: ignoring KVC_MAX_ARENA_MB='%s' (expects a number of MiB in 0.001..1073741824)\n", e);
    }
    return (uint64_t)8192 << 20;
}

int kvc_cli_arena_refused(const char *cmd, uint64_t bytes)
{
    const uint64_t limit = kvc_cli_arena_limit();
    if (bytes == 0) {
        fprintf(stderr, "kvc %s: the cache configuration is invalid\n", cmd);
        return 1;
    }
    if (bytes <= limit) return 0;
    fprintf(stderr,
            "kvc %s: the cache would take %.3f MiB, above the limit of %.3f MiB; lower --budget, or raise "
            "KVC_MAX_ARENA_MB\n",
            cmd, (double)bytes / 1048576.0, (double)limit / 1048576.0);
    return 1;
}

uint32_t kvc_cli_clamp_budget(const char *cmd, uint64_t budget, uint64_t usable, const char *what)
{
    if (usable < 1) usable = 1;
    if (budget <= usable) return (uint32_t)budget;
    fprintf(stderr, "kvc %s: note: budget %" PRIu64 " clamped to %" PRIu64 ", the %s\n", cmd, budget, usable, what);
    return (uint32_t)usable;
}

uint64_t kvc_cli_usable_tokens(uint64_t tokens, uint64_t sink, uint64_t window)
{
    const uint64_t layout_min = sink + window + 2u;
    return tokens > layout_min ? tokens : layout_min;
}
