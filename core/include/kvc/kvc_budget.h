/**
 * @file kvc_budget.h
 * @brief The one budget grammar (advanced tier): the spellings a user gives a
 *        cache's size in, parsed once here for the command line and Python.
 *
 *   512        tokens per (layer, kv head) stream
 *   25%        a share of the context (tokens)
 *   25%f16     a share of the bytes an f16 exact cache of the context takes,
 *              context x (d + dv) x 2 per stream
 *   96KiB, 1.5MiB, 2GiB, 4096B
 *              bytes of the whole cache, split evenly over its streams,
 *              everything in each stream's arena counted
 *
 * A number is ASCII digits with an optional fraction and decimal exponent
 * (the grammar of every numeric input, kvc_stream_config_set's included):
 * no sign, no blank, no hex, no "inf". The byte forms become tokens with
 * kvc_stream_budget_for_bytes, which knows the method and storage type.
 */
#ifndef KVC_BUDGET_H
#define KVC_BUDGET_H

#if !defined(KVC_ADVANCED)
#error "kvc_budget.h is in the advanced tier: #define KVC_ADVANCED before including it (docs/api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The one number grammar of every numeric input of the library and
 *         its command line: the length of the longest prefix of @p s that is
 *         ASCII digits (@p integer != 0), or digits with an optional fraction
 *         and decimal exponent ("2", "0.5", ".5", "1e-3"); 0 when none, or
 *         for NULL. Hex, a sign, blanks, "inf" and "nan" are not numbers here. */
size_t kvc_decimal_prefix(const char *s, int integer);

/** What a budget's number counts. */
typedef enum kvc_budget_kind {
    KVC_BUDGET_TOKENS = 0, /**< value: tokens per stream, 1 .. KVC_MAX_BUDGET */
    KVC_BUDGET_CONTEXT,    /**< value: percent of the context, (0, 100] */
    KVC_BUDGET_F16,        /**< value: percent of an f16 exact cache's bytes, (0, 1000] */
    KVC_BUDGET_BYTES       /**< value: bytes of the whole cache, 1 .. 1e15 */
} kvc_budget_kind;

/** One parsed budget. */
typedef struct kvc_budget {
    kvc_budget_kind kind;
    double value;
} kvc_budget;

/** The grammar in words, for messages and help texts. */
#define KVC_BUDGET_SYNTAX "N tokens | P% of the context | P%f16 of an f16 exact cache's bytes | N{B,KiB,MiB,GiB}"

/**
 * @brief Parse one budget spelling.
 * @return NULL with @p out written, or (out unchanged) a static phrase saying
 *         why @p text is not a budget, to follow the text in a message
 *         ("is empty", "has an unknown unit", ...).
 */
const char *kvc_budget_parse(const char *text, kvc_budget *out);

/**
 * @brief What budget @p b asks of each of @p n_streams streams of key and
 *        value dimensions @p d, @p dv over a context of @p context tokens.
 * @param[out] tokens  the token forms: tokens per stream, 1 .. KVC_MAX_BUDGET; 0 for the byte forms.
 * @param[out] bytes   the byte forms: bytes of one stream's arena (fit them with
 *                     kvc_stream_budget_for_bytes); 0 for the token forms.
 * @return NULL, or (outputs unchanged) why not: a share of the context with
 *         @p context 0, a NULL argument, or @p n_streams 0.
 */
const char *kvc_budget_per_stream(const kvc_budget *b, uint32_t d, uint32_t dv, uint64_t context, uint64_t n_streams,
                                  uint32_t *tokens, uint64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif /* KVC_BUDGET_H */
