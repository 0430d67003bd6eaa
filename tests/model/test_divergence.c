/* No method diverges on a real model: SmolLM2-135M teacher-forced over the
 * first ~970 tokens of the GPL-3 text with every token through the cache, at
 * 5% of the tokens (budget 51, 6 sinks, 6 window: the configuration where
 * SubGen reached perplexity 9e9 and streaming BalanceKV 4e8 before the
 * self-normalised estimators).
 *
 * The per-layer bound asserted is deterministic, so the test has no
 * false-alarm rate: every head's output at every position of every layer lies
 * in the box of the values its kv head has seen (per coordinate, beyond a
 * derived rounding slack; apps/kvc/ppl.c box_slack). Exact attention lies in
 * the same box, so each layer's attention error is at most the box's
 * diagonal, and no layer can feed the next an out-of-range vector, which is
 * how the paper estimators' error cascaded (1 -> 17 -> 1e13 over layers).
 * Perplexity must be finite. The second case shows the check has teeth: the
 * papers' estimators, same text and budget, leave the box.
 *
 * Methods come from the registry (kvc_method_at), never from a list here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_test.h"
#include "method_opts.h"
#include "ppl.h"
#include "smollm2_path.h"

#define GPL3_PATH  "/usr/share/common-licenses/GPL-3"
#define TEXT_BYTES 4400 /* ~970 SmolLM2 tokens */
#define SEED       1u

/* The head of the GPL-3 text, written beside the test binary; NULL (skip) without it. */
static const char *text_or_skip(void)
{
    static char path[256];
    FILE *in = fopen(GPL3_PATH, "rb");
    if (!in) {
        printf("SKIP: %s not found (Debian's base-files ships it)\n", GPL3_PATH);
        return NULL;
    }
    char buf[TEXT_BYTES];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    snprintf(path, sizeof path, "divergence_text_%d.txt", (int)sizeof buf);
    FILE *out = fopen(path, "wb");
    if (!out || fwrite(buf, 1, n, out) != n) {
        if (out) fclose(out);
        printf("cannot write %s\n", path);
        return NULL;
    }
    fclose(out);
    return path;
}

static int run_one(const char *model, const char *text, kvc_method m, const kvc_method_opts *mo, kvc_ppl_result *r)
{
    /* exact holds every token (it refuses a smaller budget); the rest get 5% */
    const kvc_budget budget = {KVC_BUDGET_TOKENS, m == KVC_METHOD_EXACT ? 4096.0 : 51.0};
    return kvc_ppl_run(model, NULL, text, m, &budget, 6, 6, SEED, 0, KVC_PPL_NO_ERROR, mo, r);
}

static int every_method_stays_in_the_value_box(void)
{
    const char *model = kvc_test_smollm2_or_skip();
    if (!model) return KVC_TEST_SKIP;
    const char *text = text_or_skip();
    if (!text) return KVC_TEST_SKIP;
    printf("SmolLM2, %s (first %d bytes), budget 51 (exact: all), sink 6, window 6, seed %u\n", GPL3_PATH, TEXT_BYTES,
           SEED);
    printf("%-18s %10s %12s %12s %12s\n", "method", "tokens", "perplexity", "out_of_box", "box_excess");
    int bad = 0;
    for (size_t i = 0; i < kvc_method_count(); i++) {
        const kvc_method m = kvc_method_at(i);
        kvc_ppl_result r;
        if (run_one(model, text, m, NULL, &r) != 0) {
            printf("%-18s failed (non-finite activations or a refused configuration)\n", kvc_method_name(m));
            bad = 1;
            continue;
        }
        printf("%-18s %10d %12.4f %12llu %12.3e (exact %.4f)\n", kvc_method_name(m), r.tokens, r.perplexity,
               (unsigned long long)r.box_outside, r.box_excess, r.exact_perplexity);
        fflush(stdout);
        if (!isfinite(r.perplexity) || r.box_outside != 0) bad = 1;
    }
    CHECK_MSG(!bad, "a method left the value box or diverged (table above)");
    return 0;
}

static int paper_estimators_leave_the_box(void)
{
    const char *model = kvc_test_smollm2_or_skip();
    if (!model) return KVC_TEST_SKIP;
    const char *text = text_or_skip();
    if (!text) return KVC_TEST_SKIP;
    const kvc_method ms[2] = {KVC_METHOD_SUBGEN, KVC_METHOD_BALANCEKV};
    const char *flag[2] = {"--subgen-estimator", "--bkv-estimator"};
    for (int i = 0; i < 2; i++) {
        kvc_method_opts mo;
        memset(&mo, 0, sizeof mo);
        CHECK(kvc_method_opts_take(&mo, flag[i], "paper") == 1);
        kvc_ppl_result r;
        const int rc = run_one(model, text, ms[i], &mo, &r);
        printf("%s (estimator paper): rc %d perplexity %.4g out_of_box %llu box_excess %.3e (layer %d)\n",
               kvc_method_name(ms[i]), rc, rc ? NAN : r.perplexity, rc ? 0ull : (unsigned long long)r.box_outside,
               rc ? NAN : r.box_excess, rc ? -1 : r.box_worst_layer);
        /* diverging (rc != 0: non-finite activations) also shows the point */
        CHECK(rc != 0 || r.box_outside > 0);
    }
    return 0;
}

static const kvc_test_case cases[] = {
    {"every_method_stays_in_the_value_box", every_method_stays_in_the_value_box},
    {"paper_estimators_leave_the_box", paper_estimators_leave_the_box},
};
KVC_TEST_MAIN(cases)
