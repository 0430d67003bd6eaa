/* kvc: the kvcompress command line. */
#include <stdio.h>
#include <string.h>

#include "kvc/kvc.h"
#include "llama2c.h"

#include "bench.h"
#include "eval.h"
#include "generate.h"
#include "logits_cmd.h"
#include "ppl.h"
#include "synth.h"
#include "cli.h"
#include "commands.h"
#include "method_opts.h"
#include "budget.h"

static int cmd_methods(int argc, char **argv);
static int cmd_version(int argc, char **argv);

/* The commands: one table for the dispatch and the usage text. */
static const struct {
    const char *name, *what;
    int (*run)(int, char **);
} commands[] = {
    {"demo", "generation on the recommended compressed cache and a table of every method", kvc_cmd_demo},
    {"generate", "text from a llama2.c or GGUF model on a compressed cache (-m -p -n)", kvc_cmd_generate},
    {"ppl", "perplexity of a text with a compressed cache and with exact", kvc_cmd_ppl},
    {"bench", "recall | ppl | decode | kernels | cost: every method x budget, ratios in one run", kvc_cmd_bench},
    {"eval", "stream a q/k/v trace through a method and compare with exact attention", kvc_cmd_eval},
    {"fig1", "BalanceKV's Figure 1 protocol: offline BalanceKV vs uniform on a trace's middle", kvc_cmd_fig1},
    {"floor", "the error each storage type alone adds (every token of a trace held)", kvc_cmd_floor},
    {"synth", "write a synthetic q/k/v trace with structure (.npy)", kvc_cmd_synth},
    {"dump", "write each layer's q/k/v of a model run as .npy traces", kvc_cmd_dump},
    {"profile", "score each (layer, kv head) as streaming, retrieval or diffuse", kvc_cmd_profile},
    {"oracle", "check error bounds statistically against MPFR exact attention", kvc_cmd_oracle},
    {"gguf", "inspect a GGUF file, dump a dequantised tensor as .npy", kvc_cmd_gguf},
    {"logits", "a model's logits over token ids (.bin or .gguf), as .npy", kvc_cmd_logits},
    {"methods", "the library's methods (name, kvpress name, summary) and storage types; --params", cmd_methods},
    {"version", "print the version", cmd_version},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: kvc <command> [options]   (kvc <command> --help for its options)\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "Budgets, everywhere: --budget %s\n", KVC_BUDGET_SYNTAX);
}

static void methods_usage(FILE *f)
{
    fprintf(f, "usage: kvc methods [--params]\n"
               "  One line per method of this build: the name every interface spells, the kvpress press\n"
               "  that computes the same thing (accepted as an alias; '-' when none), and what it keeps;\n"
               "  then the storage types. --params: each method's parameters, ranges and defaults.\n");
}

/* the registry, for scripts: first column = the --method name */
static int cmd_methods(int argc, char **argv)
{
    int params = 0;
    const kvc_flag fl[] = {{"--params", 'b', &params, 0, 0, NULL, "\teach method's parameters, ranges and defaults"}};
    const int prc = kvc_cli_parse("methods", argc, argv, fl, 1, NULL, methods_usage);
    if (prc) return prc == 1 ? 0 : 2;
    for (size_t i = 0; i < kvc_method_count(); i++) {
        const kvc_method m = kvc_method_at(i);
        const char *kp = kvc_method_kvpress_name(m);
        printf("%-18s %-19s %s\n", kvc_method_name(m), kp ? kp : "-", kvc_method_summary(m));
        for (size_t j = 0; params && j < kvc_method_param_count(m); j++) {
            const kvc_param_desc *d = kvc_method_param_at(m, j);
            char range[96];
            kvc_method_opts_param_range(d, range, sizeof range);
            printf("    --%-18s %-26s %s (default %s)\n", d->name, range, d->help, d->dflt);
        }
    }
    printf("# storage types (--dtype):");
    for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++)
        if (kvc_dtype_implemented((kvc_dtype)t)) printf(" %s", kvc_dtype_name((kvc_dtype)t));
    printf("\n");
    return 0;
}

static void version_usage(FILE *f) { fprintf(f, "usage: kvc version\n"); }

static int cmd_version(int argc, char **argv)
{
    const int prc = kvc_cli_parse("version", argc, argv, NULL, 0, NULL, version_usage);
    if (prc) return prc == 1 ? 0 : 2;
    printf("kvc %s\n", KVC_VERSION_STRING);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    char why[512];
    if (kvc_l2c_kernels_env_problem(why, sizeof why)) { /* a forced table that would be ignored */
        fprintf(stderr, "kvc: %s\n", why);
        return 2;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    if (!strcmp(cmd, "--version")) return cmd_version(1, argv + 1);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "kvc: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
