#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "kvc/kvc_attend.h"
#include "method_opts.h"

#include <string.h>
#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

kvc_common_flags kvc_common_flags_default(void)
{
    kvc_common_flags c;
    memset(&c, 0, sizeof c);
    c.seed = 1, c.sink = 32, c.window = 32, c.threads = 1;
    return c;
}

size_t kvc_common_flags_add(kvc_common_flags *c, const char *which, kvc_flag *fl, size_t n)
{
    for (const char *w = which; *w; w++) {
        switch (*w) {
        case 'm':
            fl[n++] =
                (kvc_flag){"--model",
                           's',
                           &c->model,
                           0,
                           0,
                           NULL,
                           "M.bin|M.gguf\tmodel (llama2.c checkpoint or GGUF; default $KVC_MODEL, then stories260K)"};
            break;
        case 't':
            fl[n++] = (kvc_flag){"--tokenizer",
                                 's',
                                 &c->tokenizer,
                                 0,
                                 0,
                                 NULL,
                                 "T.bin\tllama2.c tokenizer (a GGUF model carries its own)"};
            break;
        case 'M':
            fl[n++] = (kvc_flag){"--method",
                                 's',
                                 &c->method,
                                 0,
                                 0,
                                 NULL,
                                 "M\tcompression method, a registry or kvpress name (kvc methods)"};
            break;
        case 'b':
            fl[n++] = (kvc_flag){"--budget", 's', &c->budget_text, 0, 0, NULL, "B\tcache budget: " KVC_BUDGET_SYNTAX};
            fl[n++] = (kvc_flag){"--compression-ratio",
                                 'f',
                                 &c->compression_ratio,
                                 0.0,
                                 0.999,
                                 &c->have_ratio,
                                 "R\tkvpress's ratio: the share of the context removed (= --budget (1-R)*100%)"};
            break;
        case 's':
            fl[n++] = (kvc_flag){"--seed", 'u', &c->seed, 0, 18446744073709551615.0, NULL, "S\tseed (default 1)"};
            break;
        case 'k':
            fl[n++] = (kvc_flag){
                "--sink", 'u', &c->sink, 0, KVC_MAX_BUDGET, NULL, "A\tfirst tokens kept exactly (default 32)"};
            break;
        case 'w':
            fl[n++] = (kvc_flag){"--window",
                                 'u',
                                 &c->window,
                                 0,
                                 KVC_MAX_BUDGET,
                                 NULL,
                                 "W\tmost recent tokens kept exactly (default 32)"};
            break;
        case 'T':
            fl[n++] = (kvc_flag){"--threads",
                                 'u',
                                 &c->threads,
                                 1,
                                 64,
                                 NULL,
                                 "N\tdecoder threads (default 1; products by output rows, split-K attention)"};
            break;
        default: break;
        }
    }
    return n;
}

int kvc_common_flags_finish(const char *cmd, kvc_common_flags *c)
{
    if (c->budget_text && c->have_ratio) {
        fprintf(stderr, "kvc %s: give --budget or --compression-ratio, not both\n", cmd);
        return 1;
    }
    if (c->budget_text) {
        if (kvc_cli_budget_parse("--budget", c->budget_text, &c->budget)) return 1;
        c->have_budget = 1;
    } else if (c->have_ratio) {
        c->budget = kvc_budget_from_compression_ratio(c->compression_ratio);
        c->have_budget = 1;
    }
    return 0;
}

/* the llama-cli short forms, where the command has the long flag */
static const char *const short_forms[][2] = {
    {"-m", "--model"}, {"-p", "--prompt"}, {"-n", "--steps"}, {"-t", "--threads"}, {"-s", "--seed"}};

/* flags replaced by the one budget vocabulary, with what to write instead */
static const char *const retired[][2] = {
    {"--budgets", "--budget (a comma-separated list where a command takes several, e.g. --budget 5%,10%,25%)"},
    {"--bytes", "--budget P%f16 (a share of an f16 exact cache's bytes) or --budget 96KiB"},
    {"--bytes-pct", "--budget P%f16 (a share of an f16 exact cache's bytes)"}};

static const char *short_of(const char *name, const kvc_flag *fl, size_t n)
{
    for (size_t s = 0; s < sizeof short_forms / sizeof short_forms[0]; s++)
        if (!strcmp(short_forms[s][1], name))
            for (size_t j = 0; j < n; j++)
                if (!strcmp(fl[j].name, name)) return short_forms[s][0];
    return NULL;
}

/* The option list of --help, from the table: every flag the command takes. */
static void print_options(FILE *f, const kvc_flag *fl, size_t n, const struct kvc_method_opts *mo)
{
    fprintf(f, "options (--flag value or --flag=value; a value flag at most once):\n");
    for (size_t j = 0; j < n; j++) {
        if (fl[j].name[0] == '\0') continue; /* the positional argument: in the synopsis */
        const char *help = fl[j].help ? fl[j].help : "";
        const char *tab = strchr(help, '\t');
        char left[96];
        const char *sh = short_of(fl[j].name, fl, n);
        const int meta_len = tab ? (int)(tab - help) : 0;
        const char *meta = tab ? help : (fl[j].type == 'b' ? "" : fl[j].type == 's' ? "VALUE" : "N");
        snprintf(left, sizeof left, "%s%s%s%s%.*s", sh ? sh : "", sh ? ", " : "", fl[j].name, *meta ? " " : "",
                 tab ? meta_len : (int)strlen(meta), meta);
        const char *text = tab ? tab + 1 : help;
        fprintf(f, "  %-28s %s", left, text);
        if (fl[j].type == 'u' && fl[j].hi >= 18446744073709551615.0)
            fprintf(f, "%s[0..2^64-1]", *text ? " " : "");
        else if (fl[j].type == 'u')
            fprintf(f, "%s[%.0f..%.0f]", *text ? " " : "", fl[j].lo, fl[j].hi);
        else if (fl[j].type == 'f')
            fprintf(f, "%s[%g..%g]", *text ? " " : "", fl[j].lo, fl[j].hi);
        fprintf(f, "\n");
    }
    fprintf(f, "  %-28s %s\n", "-h, --help", "this text");
    if (mo) {
        fprintf(f, "method flags (each tunes the methods that have the parameter):\n");
        kvc_method_opts_usage_print(f);
    }
}

int kvc_cli_parse(const char *cmd, int argc, char **argv, const kvc_flag *fl, size_t n, struct kvc_method_opts *mo,
                  void (*usage)(FILE *))
{
    unsigned char given[128] = {0}; /* per table entry: a value flag given twice is an error */
    if (n > sizeof given) {
        fprintf(stderr, "kvc %s: internal error: %zu flags in one table\n", cmd, n);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (usage) usage(stdout);
            print_options(stdout, fl, n, mo);
            return 1;
        }
        if (!strcmp(a, "--list-flags")) {
            for (size_t j = 0; j < n; j++)
                if (fl[j].name[0]) printf("%s\n", fl[j].name);
            if (mo) kvc_method_opts_list_flags(stdout);
            return 1;
        }
        for (size_t s = 0; s < sizeof short_forms / sizeof short_forms[0]; s++)
            if (!strcmp(a, short_forms[s][0]) && short_of(short_forms[s][1], fl, n)) a = short_forms[s][1];
        /* a bare word: the command's positional argument (a flag named "" of type 's'), once */
        if (strncmp(a, "-", 1) != 0) {
            const kvc_flag *pos = NULL;
            for (size_t j = 0; j < n && !pos; j++)
                if (fl[j].name[0] == '\0' && fl[j].type == 's' && !(fl[j].seen && *fl[j].seen)) pos = &fl[j];
            if (pos) {
                *(const char **)pos->dst = a;
                if (pos->seen) *pos->seen = 1;
                continue;
            }
        }
        /* "--name=value" or "--name value" */
        char name[128];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        const char *val;
        if (eq) {
            const size_t len = (size_t)(eq - a);
            if (len >= sizeof name) {
                fprintf(stderr, "kvc %s: unknown argument '%s'\n", cmd, a);
                return 2;
            }
            memcpy(name, a, len);
            name[len] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
            val = i + 1 < argc ? argv[i + 1] : NULL;
        }
        const kvc_flag *f = NULL;
        for (size_t j = 0; j < n && !f; j++)
            if (!strcmp(fl[j].name, name)) f = &fl[j];
        if (f == NULL && mo) {
            const int took = kvc_method_opts_take(mo, name, val);
            if (took < 0) return 2;
            if (took) {
                if (!eq) i++;
                continue;
            }
        }
        if (f == NULL) {
            for (size_t r = 0; r < sizeof retired / sizeof retired[0]; r++)
                if (!strcmp(name, retired[r][0])) {
                    fprintf(stderr, "kvc %s: %s was replaced by %s\n", cmd, name, retired[r][1]);
                    return 2;
                }
            fprintf(stderr, "kvc %s: unknown argument '%s'%s\n", cmd, a, usage ? " (see --help)" : "");
            return 2;
        }
        if (f->type != 'b' && given[f - fl]++) {
            fprintf(stderr, "kvc %s: %s given twice; give it once\n", cmd, name);
            return 2;
        }
        if (f->type == 'b') { /* a switch: no value */
            if (eq) {
                fprintf(stderr, "kvc %s: %s takes no value\n", cmd, name);
                return 2;
            }
            *(int *)f->dst = 1;
            if (f->seen) *f->seen = 1;
            continue;
        }
        if (val == NULL) {
            fprintf(stderr, "kvc %s: %s needs a value\n", cmd, name);
            return 2;
        }
        int bad = 0;
        if (f->type == 's')
            *(const char **)f->dst = val;
        else if (f->type == 'u')
            bad = kvc_cli_u64(name, val, (uint64_t)f->lo,
                              f->hi >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)f->hi, (uint64_t *)f->dst);
        else
            bad = kvc_cli_f64(name, val, f->lo, f->hi, (double *)f->dst);
        if (bad) return 2;
        if (f->seen) *f->seen = 1;
        if (!eq) i++;
    }
    return 0;
}
