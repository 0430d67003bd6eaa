/* The budget grammar (kvc_budget.h): one parser for the command line and
 * Python, which each wrote their own and disagreed (exponents, the bytes of
 * "25%f16"). */
#include "kvc/kvc_budget.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *kvc_budget_parse(const char *text, kvc_budget *out)
{
    if (text == NULL || out == NULL || text[0] == '\0') return "is empty";
    const size_t digits = kvc_decimal_prefix(text, 0);
    char *end = NULL;
    errno = 0;
    const double v = strtod(text, &end);
    if (digits == 0 || end != text + digits || errno || !isfinite(v) || v <= 0)
        return "does not start with a positive decimal number";
    kvc_budget b = {KVC_BUDGET_TOKENS, v};
    if (*end == '\0') {
        if (v != floor(v) || v < 1 || v > KVC_MAX_BUDGET) return "is not a whole number of tokens in 1..16777216";
    } else if (strcmp(end, "%") == 0) {
        b.kind = KVC_BUDGET_CONTEXT;
        if (v > 100) return "is more than the whole context";
    } else if (strcmp(end, "%f16") == 0) {
        b.kind = KVC_BUDGET_F16;
        if (v > 1000) return "is more than 10 times an f16 exact cache";
    } else {
        static const struct {
            const char *unit;
            double scale;
        } units[] = {{"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
        size_t u = 0;
        while (u < sizeof units / sizeof units[0] && strcmp(end, units[u].unit) != 0) u++;
        if (u == sizeof units / sizeof units[0]) return "has an unknown unit";
        b.kind = KVC_BUDGET_BYTES, b.value = v * units[u].scale;
        if (b.value < 1 || b.value > 1.0e15) return "is out of range (1 B .. 1e15 B)";
    }
    *out = b;
    return NULL;
}

const char *kvc_budget_per_stream(const kvc_budget *b, uint32_t d, uint32_t dv, uint64_t context, uint64_t n_streams,
                                  uint32_t *tokens, uint64_t *bytes)
{
    if (b == NULL || tokens == NULL || bytes == NULL) return "needs a budget and its outputs";
    if (n_streams == 0) return "is split over no stream";
    if ((b->kind == KVC_BUDGET_CONTEXT || b->kind == KVC_BUDGET_F16) && context == 0)
        return "is a share of the context: the context length is needed";
    switch (b->kind) {
    case KVC_BUDGET_TOKENS:
    case KVC_BUDGET_CONTEXT: {
        const double t = b->kind == KVC_BUDGET_TOKENS ? b->value : ceil(b->value / 100.0 * (double)context);
        *tokens = t < 1 ? 1u : t > KVC_MAX_BUDGET ? KVC_MAX_BUDGET : (uint32_t)t;
        *bytes = 0;
        return NULL;
    }
    case KVC_BUDGET_F16:
    case KVC_BUDGET_BYTES: {
        /* F16: the f16 exact cache's rows of the context, context x (d + dv) x 2 bytes */
        const double by = b->kind == KVC_BUDGET_F16 ? b->value / 100.0 * (double)context * ((double)d + dv) * 2.0
                                                    : b->value / (double)n_streams;
        *tokens = 0;
        *bytes = by >= 1.8e19 ? UINT64_MAX : (uint64_t)by;
        return NULL;
    }
    default: return "is of an unknown kind";
    }
}
