#ifndef KVC_APP_PPL_H
#define KVC_APP_PPL_H
#include <stdint.h>

#include "kvc/kvc_stream.h"
#include "budget.h"
#include "method_opts.h"

typedef struct kvc_ppl_result {
    int tokens; /**< predicted tokens (text tokens - 1) */
    double nll; /**< mean negative log-likelihood, compressed cache */
    double perplexity, exact_perplexity;
    double mean_rel_attn; /**< mean relative attention error (layers, heads, compressing positions);
                                  NaN with KVC_PPL_NO_ERROR */
    uint64_t box_outside; /**< (layer, position, head) outputs outside the box of the values seen
                                  (beyond rounding): 0 for every self-normalised method */
    double box_excess;    /**< largest distance outside that box / the box's diagonal */
    int box_worst_layer;  /**< the layer of box_excess */
} kvc_ppl_result;

/** kvc_ppl_run flags. */
enum {
    KVC_PPL_VERBOSE = 1, /**< print the per-layer table and the result line */
    KVC_PPL_NO_ERROR =
        2 /**< skip the attention-error measurement (exact attention per position); the box check stays */
};

/** One perplexity run; NULL model/tokenizer paths use the defaults. Returns 0 or 1. */
int kvc_ppl_run(const char *model_path, const char *tok_path, const char *text_path, kvc_method method,
                const kvc_budget *budget, uint32_t sink, uint32_t window, uint64_t seed, int pyramid, unsigned flags,
                const kvc_method_opts *mo, kvc_ppl_result *out);
#endif
