/* Method tuning flags, generated from the library's parameter descriptors. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "method_opts.h"

/* The first method that has parameter `name`, and its descriptor. */
static const kvc_param_desc *find(const char *name, kvc_method *owner)
{
    for (size_t i = 0; i < kvc_method_count(); i++) {
        const kvc_method m = kvc_method_at(i);
        for (size_t j = 0; j < kvc_method_param_count(m); j++) {
            const kvc_param_desc *d = kvc_method_param_at(m, j);
            if (strcmp(d->name, name) == 0) {
                *owner = m;
                return d;
            }
        }
    }
    return NULL;
}

/* The flags every cache-building command takes besides the methods' own
 * parameters: one table for the help text, --list-flags and the parser. */
static const struct {
    const char *name, *meta, *help;
} app_flags[] = {
    {"--beta", "X", "score scale (default 1/sqrt(d))"},
    {"--dtype", "T", NULL}, /* the storage types, from the library's list */
    {"--protect", "P",
     "percent of the budget (0..50) kept for protected spans: tokens near a key outlier, exact (default 0: off)"},
    {"--protect-radius", "R", "tokens either side of an outlier a protected span keeps (1..4096, default 25)"},
};
#define N_APP_FLAGS (sizeof app_flags / sizeof app_flags[0])

void kvc_method_opts_list_flags(FILE *f)
{
    for (size_t i = 0; i < N_APP_FLAGS; i++) fprintf(f, "%s\n", app_flags[i].name);
    for (size_t i = 0; i < kvc_method_count(); i++) {
        const kvc_method m = kvc_method_at(i);
        for (size_t j = 0; j < kvc_method_param_count(m); j++) {
            const kvc_param_desc *d = kvc_method_param_at(m, j);
            kvc_method first;
            if (find(d->name, &first) != NULL && first == m) fprintf(f, "--%s\n", d->name);
        }
    }
}

void kvc_method_opts_param_range(const kvc_param_desc *d, char *buf, size_t cap)
{
    if (d->type == KVC_PARAM_CHOICE)
        snprintf(buf, cap, "%s", d->choices);
    else if (d->type == KVC_PARAM_U32)
        snprintf(buf, cap, "%.0f..%.0f", d->min, d->max);
    else
        snprintf(buf, cap, "%g..%g%s%s", d->min, d->max, d->choices ? "|" : "", d->choices ? d->choices : "");
}

void kvc_method_opts_usage_print(FILE *f)
{
    for (size_t i = 0; i < N_APP_FLAGS; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s %s", app_flags[i].name, app_flags[i].meta);
        fprintf(f, "  %-28s ", left);
        if (app_flags[i].help) {
            fprintf(f, "%s\n", app_flags[i].help);
            continue;
        }
        fprintf(f, "storage type of cached keys and values (default f32):"); /* --dtype */
        for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) /* the library's list, not a hand-kept one */
            if (kvc_dtype_implemented((kvc_dtype)t)) fprintf(f, " %s", kvc_dtype_name((kvc_dtype)t));
        fprintf(f, "\n");
    }
    for (size_t i = 0; i < kvc_method_count(); i++) {
        const kvc_method m = kvc_method_at(i);
        for (size_t j = 0; j < kvc_method_param_count(m); j++) {
            const kvc_param_desc *d = kvc_method_param_at(m, j);
            kvc_method first;
            if (find(d->name, &first) == NULL || first != m) continue; /* shared with an earlier method: listed once */
            char arg[96];
            kvc_method_opts_param_range(d, arg, sizeof arg);
            char left[160];
            snprintf(left, sizeof left, "--%s %s", d->name, arg);
            fprintf(f, "  %-28s %s (default %s)\n", left, d->help, d->dflt);
        }
    }
}

int kvc_method_opts_take(kvc_method_opts *o, const char *a, const char *val)
{
    for (size_t i = 0; i < N_APP_FLAGS; i++) /* a value flag given twice is an error */
        if (!strcmp(a, app_flags[i].name)) {
            if (o->app_given & (1u << i)) {
                fprintf(stderr, "kvc: %s given twice; give it once\n", a);
                return -1;
            }
            o->app_given |= 1u << i;
        }
    if (strncmp(a, "--", 2) != 0) return 0;
    if (!strcmp(a, "--beta")) {
        if (!val) {
            fprintf(stderr, "kvc: --beta needs a value\n");
            return -1;
        }
        return kvc_cli_f64(a, val, 1e-6, 1e6, &o->beta) ? -1 : 1;
    }
    if (!strcmp(a, "--protect")) {
        if (!val) {
            fprintf(stderr, "kvc: --protect needs a value\n");
            return -1;
        }
        return kvc_cli_f64(a, val, 0, 50, &o->protect_pct) ? -1 : 1;
    }
    if (!strcmp(a, "--protect-radius")) {
        double r;
        if (!val || kvc_cli_f64(a, val, 1, 4096, &r) || r != (double)(uint64_t)r) {
            fprintf(stderr, "kvc: --protect-radius expects a whole number in 1..4096, got '%s'\n", val ? val : "");
            return -1;
        }
        o->protect_radius = (uint64_t)r;
        return 1;
    }
    if (!strcmp(a, "--dtype")) {
        kvc_dtype t;
        if (!val || kvc_dtype_parse(val, &t) != KVC_OK || !kvc_dtype_implemented(t)) {
            fprintf(stderr, "kvc: --dtype must be one of");
            for (unsigned u = 0; u < KVC_DTYPE_COUNT; u++)
                if (kvc_dtype_implemented((kvc_dtype)u)) fprintf(stderr, " %s", kvc_dtype_name((kvc_dtype)u));
            fprintf(stderr, ", got '%s'\n", val ? val : "");
            return -1;
        }
        o->dtype = t, o->have_dtype = 1;
        return 1;
    }
    kvc_method owner;
    const kvc_param_desc *d = find(a + 2, &owner);
    if (d == NULL) return 0;
    if (!val) {
        fprintf(stderr, "kvc: %s needs a value\n", a);
        return -1;
    }
    /* check the value now, on a configuration of the method that owns it */
    kvc_stream_config probe = kvc_stream_config_default(owner, 8, 8, 64, 1);
    if (kvc_stream_config_set(&probe, d->name, val) != KVC_OK) {
        if (d->type == KVC_PARAM_CHOICE)
            fprintf(stderr, "kvc: %s must be one of %s, got '%s'\n", a, d->choices, val);
        else
            fprintf(stderr, "kvc: %s expects a %s in %g..%g%s%s, got '%s'\n", a,
                    d->type == KVC_PARAM_U32 ? "whole number" : "number", d->min, d->max, d->choices ? " or " : "",
                    d->choices ? d->choices : "", val);
        return -1;
    }
    for (size_t i = 0; i < o->n; i++)
        if (o->name[i] == d->name) { /* given twice: an error, as for every value flag */
            fprintf(stderr, "kvc: %s given twice; give it once\n", a);
            return -1;
        }
    if (o->n == KVC_METHOD_OPTS_MAX) {
        fprintf(stderr, "kvc: too many method flags\n");
        return -1;
    }
    o->name[o->n] = d->name, o->value[o->n] = val, o->n++;
    return 1;
}

void kvc_method_opts_apply(const kvc_method_opts *o, kvc_stream_config *cfg)
{
    if (o->beta > 0) cfg->beta = (float)o->beta;
    if (o->have_dtype) cfg->dtype = o->dtype;
    for (size_t i = 0; i < o->n; i++)
        (void)kvc_stream_config_set(cfg, o->name[i], o->value[i]); /* other methods' flags: no-op */
    kvc_method_opts_protect(o, cfg);
}

/* 1 when method m has a parameter named `name`. */
static int method_has(kvc_method m, const char *name)
{
    for (size_t j = 0; j < kvc_method_param_count(m); j++)
        if (strcmp(kvc_method_param_at(m, j)->name, name) == 0) return 1;
    return 0;
}

int kvc_method_opts_check(const kvc_method_opts *o, const char *cmd, const kvc_method *methods, size_t n)
{
    for (size_t i = 0; i < o->n; i++) {
        int used = 0;
        for (size_t k = 0; k < n && !used; k++) used = method_has(methods[k], o->name[i]);
        if (used) continue;
        char owners[256] = "";
        size_t len = 0;
        for (size_t k = 0; k < kvc_method_count() && len < sizeof owners; k++)
            if (method_has(kvc_method_at(k), o->name[i]))
                len += (size_t)snprintf(owners + len, sizeof owners - len, "%s%s", len ? ", " : "",
                                        kvc_method_name(kvc_method_at(k)));
        fprintf(stderr, "kvc %s: --%s does not apply to %s %s (it tunes %s)\n", cmd, o->name[i],
                n == 1 ? "method" : "any of the methods", n == 1 ? kvc_method_name(methods[0]) : "given", owners);
        return 1;
    }
    return 0;
}

void kvc_method_opts_protect(const kvc_method_opts *o, kvc_stream_config *cfg)
{
    /* exact keeps every token anyway: protection would only take its slots */
    cfg->n_protect = o->protect_pct > 0 && cfg->method != KVC_METHOD_EXACT
                         ? (uint32_t)((double)cfg->budget * o->protect_pct / 100.0)
                         : 0u;
    cfg->protect_radius = (uint32_t)o->protect_radius;
}

void kvc_method_opts_describe(const kvc_method_opts *o, char *buf, size_t cap)
{
    size_t n = strlen(buf);
    if (o->beta > 0 && n < cap) n += (size_t)snprintf(buf + n, cap - n, " --beta %g", o->beta);
    if (o->have_dtype && n < cap) n += (size_t)snprintf(buf + n, cap - n, " --dtype %s", kvc_dtype_name(o->dtype));
    if (o->protect_pct > 0 && n < cap) n += (size_t)snprintf(buf + n, cap - n, " --protect %g", o->protect_pct);
    if (o->protect_radius && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, " --protect-radius %u", (unsigned)o->protect_radius);
    for (size_t i = 0; i < o->n && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, " --%s %s", o->name[i], o->value[i]);
}

uint32_t kvc_method_opts_fit_bytes(const kvc_method_opts *o, kvc_stream_config *cfg, uint64_t bytes,
                                   uint32_t max_tokens)
{
    kvc_stream_config c = *cfg;
    c.n_protect = 0;
    uint32_t b = kvc_stream_budget_for_bytes(&c, bytes);
    if (b == 0) return 0;
    c.budget = b < max_tokens ? b : max_tokens;
    /* protected spans take tokens from the method, which can change its
       metadata: shrink until the arena fits */
    kvc_method_opts_protect(o, &c);
    while (c.n_protect && c.budget > 1 && (kvc_stream_arena_bytes(&c) == 0 || kvc_stream_arena_bytes(&c) > bytes)) {
        c.budget--;
        kvc_method_opts_protect(o, &c);
    }
    if (kvc_stream_arena_bytes(&c) == 0) return 0;
    *cfg = c;
    return c.budget;
}
