/* The budget grammar (kvc_budget.h): every spelling the command line and
 * Python document is read to the same kind and value, every other is refused
 * with its output unchanged, and the per-stream split is the documented one. */
#include <stdio.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"

static int spellings_read_and_refused(void)
{
    static const struct {
        const char *text;
        kvc_budget_kind kind;
        double value;
    } good[] = {{"512", KVC_BUDGET_TOKENS, 512},
                {"1", KVC_BUDGET_TOKENS, 1},
                {"16777216", KVC_BUDGET_TOKENS, 16777216},
                {"25%", KVC_BUDGET_CONTEXT, 25},
                {"0.5%", KVC_BUDGET_CONTEXT, 0.5},
                {"100%", KVC_BUDGET_CONTEXT, 100},
                {"25%f16", KVC_BUDGET_F16, 25},
                {"1e2%f16", KVC_BUDGET_F16, 100},
                {"4096B", KVC_BUDGET_BYTES, 4096},
                {"96KiB", KVC_BUDGET_BYTES, 96 * 1024.0},
                {"1.5MiB", KVC_BUDGET_BYTES, 1.5 * 1048576},
                {"2GiB", KVC_BUDGET_BYTES, 2 * 1073741824.0},
                {"1e3", KVC_BUDGET_TOKENS, 1000}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        kvc_budget b = {KVC_BUDGET_BYTES, -1};
        const char *why = kvc_budget_parse(good[i].text, &b);
        CHECK_MSG(why == NULL && b.kind == good[i].kind && b.value == good[i].value, "%s: %s", good[i].text,
                  why ? why : "wrong kind or value");
    }
    /* signs, blanks, hex, other scripts' digits, units by case, ranges, nothing */
    static const char *const bad[] = {"",
                                      "0",
                                      "-5",
                                      "+5",
                                      " 5",
                                      "5 ",
                                      "0x10",
                                      "inf",
                                      "nan",
                                      "1.5",
                                      "16777217",
                                      "0%",
                                      "101%",
                                      "1001%f16",
                                      "5kib",
                                      "5KB",
                                      "5%f32",
                                      "lots",
                                      "%",
                                      "KiB",
                                      "\xd9\xa1\xd9\xa2",
                                      "12\xd9\xa3\x42", /* "12" and an Arabic-Indic 3, then B */
                                      "1000000GiB",
                                      "0.5B",
                                      "5e"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvc_budget b = {KVC_BUDGET_F16, 7}, before = b;
        const char *why = kvc_budget_parse(bad[i], &b);
        CHECK_MSG(why != NULL && memcmp(&b, &before, sizeof b) == 0, "'%s' was read as a budget", bad[i]);
    }
    CHECK(kvc_budget_parse(NULL, &(kvc_budget){0}) != NULL);
    printf("%zu spellings read, %zu refused\n", sizeof good / sizeof good[0], sizeof bad / sizeof bad[0]);
    return 0;
}

static int per_stream_split(void)
{
    uint32_t tokens = 9;
    uint64_t bytes = 9;
    kvc_budget b;
    /* tokens: as given */
    CHECK(!kvc_budget_parse("300", &b) && !kvc_budget_per_stream(&b, 64, 64, 0, 7, &tokens, &bytes));
    CHECK(tokens == 300 && bytes == 0);
    /* a share of the context, rounded up: ceil(0.25 * 1001) = 251 */
    CHECK(!kvc_budget_parse("25%", &b) && !kvc_budget_per_stream(&b, 64, 64, 1001, 7, &tokens, &bytes));
    CHECK(tokens == 251 && bytes == 0);
    /* of the f16 exact cache's bytes: 0.25 * 1000 tokens * (64 + 32) elements * 2 bytes */
    CHECK(!kvc_budget_parse("25%f16", &b) && !kvc_budget_per_stream(&b, 64, 32, 1000, 7, &tokens, &bytes));
    CHECK(tokens == 0 && bytes == 48000);
    /* the whole cache's bytes split over the streams, rounded down */
    CHECK(!kvc_budget_parse("96KiB", &b) && !kvc_budget_per_stream(&b, 64, 64, 0, 7, &tokens, &bytes));
    CHECK(tokens == 0 && bytes == 98304 / 7);
    /* refusals write nothing */
    tokens = 5, bytes = 5;
    CHECK(!kvc_budget_parse("25%", &b) && kvc_budget_per_stream(&b, 64, 64, 0, 1, &tokens, &bytes) != NULL);
    CHECK(kvc_budget_per_stream(&b, 64, 64, 100, 0, &tokens, &bytes) != NULL);
    CHECK(kvc_budget_per_stream(NULL, 64, 64, 100, 1, &tokens, &bytes) != NULL);
    CHECK(tokens == 5 && bytes == 5);
    return 0;
}

static const kvc_test_case cases[] = {{"spellings_read_and_refused", spellings_read_and_refused},
                                      {"per_stream_split", per_stream_split}};
KVC_TEST_MAIN(cases)
