/* Whole spans for the protected rows from a caller's per-token scores
 * (kvc_spans_choose, kvc_stream.h): the bench's sentences-of-highest-
 * surprisal selector (kvc bench recall --protect-marks sentences) as a
 * library call a decoder or a press can make, and the spans it takes from
 * the tokens' texts (kvc_sentence_ends). No allocation: the spans are
 * visited in falling order of their mean score by repeated selection of the
 * next (mean, index) below the last one visited, O(spans x n). */
#define KVC_ADVANCED 1 /* kvc_spans_choose is in the advanced tier */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc/kvc_stream.h"

/* The mean score of span i: [from, to). */
static double span_mean(const float *scores, uint32_t from, uint32_t to)
{
    double sum = 0.0;
    for (uint32_t t = from; t < to; t++) sum += scores[t];
    return sum / (double)(to - from);
}

/* Does (m, i) come after (pm, pi) in the order of falling mean, ties by
 * rising index? */
static int comes_after(double m, uint32_t i, double pm, uint32_t pi) { return m < pm || (m == pm && i > pi); }

kvc_status kvc_spans_choose(const float *scores, uint32_t n, const uint32_t *span_end, uint32_t n_spans, uint32_t first,
                            uint32_t budget, uint32_t radius, uint8_t *marks)
{
    if (scores == NULL || span_end == NULL || marks == NULL || n == 0 || n_spans == 0 || span_end[n_spans - 1] != n)
        return KVC_E_ARG;
    for (uint32_t i = 0; i < n_spans; i++)
        if (span_end[i] <= (i ? span_end[i - 1] : 0u)) return KVC_E_ARG; /* empty or out of order */
    for (uint32_t t = 0; t < n; t++)
        if (!isfinite(scores[t])) return KVC_E_NONFINITE;
    memset(marks, 0, n);
    uint64_t used = 0;
    double last_mean = INFINITY;
    uint32_t last = UINT32_MAX; /* nothing visited yet: every (mean, i) comes after (+inf, -1) */
    for (uint32_t visit = 0; visit < n_spans; visit++) {
        uint32_t best = UINT32_MAX;
        double best_mean = 0.0;
        for (uint32_t i = 0; i < n_spans; i++) {
            const uint32_t from = i ? span_end[i - 1] : 0u;
            const double m = span_mean(scores, from, span_end[i]);
            if (last != UINT32_MAX && !comes_after(m, i, last_mean, last)) continue;
            if (best == UINT32_MAX || m > best_mean) best = i, best_mean = m; /* ties: the first, the lower index */
        }
        if (best == UINT32_MAX) break;
        last = best, last_mean = best_mean;
        const uint32_t from = best ? span_end[best - 1] : 0u;
        const uint64_t cost = (uint64_t)(span_end[best] - from) + 2u * (uint64_t)radius;
        if (from < first || used + cost > budget) continue; /* in the sinks, or too long for what is left */
        memset(marks + from, 1, span_end[best] - from);
        used += cost;
    }
    return KVC_OK;
}

/* Does the token's text end a sentence? */
static int ends_sentence(const char *text) { return strpbrk(text, ".!?\n") != NULL; }

/* Is it a space and an ASCII capital letter on (a capitalised word)? */
static int capitalised_word(const char *text) { return text[0] == ' ' && text[1] >= 'A' && text[1] <= 'Z'; }

kvc_status kvc_sentence_ends(const char *const *texts, const float *surprisal, uint32_t n, float split_sigma,
                             uint32_t *span_end, uint32_t *n_spans)
{
    if (texts == NULL || span_end == NULL || n_spans == NULL || n == 0 || !(split_sigma >= 0.0f) ||
        split_sigma > 100.0f)
        return KVC_E_ARG;
    for (uint32_t t = 0; t < n; t++)
        if (texts[t] == NULL) return KVC_E_ARG;
    double bar = INFINITY; /* no split without surprisal, nor with fewer than 3 tokens */
    if (surprisal != NULL) {
        for (uint32_t t = 0; t < n; t++)
            if (!isfinite(surprisal[t])) return KVC_E_NONFINITE;
        if (n > 2) { /* mean and (population) deviation of tokens 1 .. n-1: token 0 has no context */
            double sum = 0.0, sq = 0.0;
            for (uint32_t t = 1; t < n; t++) sum += surprisal[t];
            const double mean = sum / (double)(n - 1);
            for (uint32_t t = 1; t < n; t++) sq += (surprisal[t] - mean) * (surprisal[t] - mean);
            bar = mean + (double)split_sigma * sqrt(sq / (double)(n - 1));
        }
    }
    uint32_t k = 0;
    for (uint32_t t = 1; t < n; t++) /* a span ends before token t when t-1 ends a sentence or t starts one */
        if (ends_sentence(texts[t - 1]) ||
            (surprisal != NULL && capitalised_word(texts[t]) && (double)surprisal[t] > bar))
            span_end[k++] = t;
    span_end[k++] = n;
    *n_spans = k;
    return KVC_OK;
}
