#ifndef KVC_APP_CLI_H
#define KVC_APP_CLI_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "budget.h"

/* ---- one flag table for every command ---- */

/** One command-line flag: "--name value" or "--name=value". An entry named ""
 *  of type 's' with a `seen` pointer takes one bare word (a positional argument).
 *  The table is the one source of a command's flags: kvc_cli_parse parses
 *  with it and prints the option list of --help from it (so help names every
 *  flag the command accepts; tests/cli/test_cli_help.py checks it), and a
 *  value flag given twice is an error. */
typedef struct kvc_flag {
    const char *name; /**< with the dashes, e.g. "--budget" */
    char type;        /**< 's' string, 'u' unsigned integer in [lo, hi], 'f' finite number in [lo, hi],
                           'b' a switch without a value */
    void *dst;        /**< const char ** / uint64_t * / double * / int * */
    double lo, hi;
    int *seen;        /**< set to 1 when given (may be NULL) */
    const char *help; /**< "METAVAR\tone line" for --help (a switch: no METAVAR); NULL: the name only */
} kvc_flag;

/** The flags most commands share, defined once (defaults: seed 1, sink = window = 32). */
typedef struct kvc_common_flags {
    const char *model, *tokenizer, *method;
    const char *budget_text;  /* --budget, in the one vocabulary of budget.h */
    double compression_ratio; /* --compression-ratio (kvpress): the share of the context removed */
    int have_ratio;
    uint64_t seed, sink, window;
    uint64_t threads; /* decoder threads (1 .. 64) */
    int have_budget;  /* --budget or --compression-ratio given; then `budget` holds it */
    kvc_budget budget;
} kvc_common_flags;

/** After kvc_cli_parse: turn --budget / --compression-ratio into c->budget
 *  (one of them at most); prints why and returns 1 when they do not parse. */
int kvc_common_flags_finish(const char *cmd, kvc_common_flags *c);

/** Defaults of the shared flags. */
kvc_common_flags kvc_common_flags_default(void);

/** Append the shared flags of @p c that a command takes (a string of letters:
 *  m model, t tokenizer, M method, b budget (and --compression-ratio), s seed,
 *  k sink, w window, T decoder threads) to @p fl;
 *  returns the new count. */
size_t kvc_common_flags_add(kvc_common_flags *c, const char *which, kvc_flag *fl, size_t n);

struct kvc_method_opts;
/**
 * @brief Parse argv[1..] against @p fl (and the method flags into @p mo when
 *        not NULL). "--help" / "-h" prints @p usage (the synopsis and what the
 *        command does) and then the option list generated from @p fl (and the
 *        method flags) to stdout; "--list-flags" prints every accepted flag
 *        name, one per line (for tests and shell completion). The llama-cli
 *        short forms -m -p -n -t -s stand for --model --prompt --steps
 *        --threads --seed where the command has them. A flag retired in favour
 *        of the one budget vocabulary (--budgets, --bytes, --bytes-pct) is
 *        refused with its replacement.
 * @return 0 parsed; 1 help printed (exit 0); 2 bad command line (a message
 *         naming @p cmd was printed).
 */
int kvc_cli_parse(const char *cmd, int argc, char **argv, const kvc_flag *fl, size_t n, struct kvc_method_opts *mo,
                  void (*usage)(FILE *));
#endif
