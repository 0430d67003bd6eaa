#ifndef KVC_APP_PPL_H
#define KVC_APP_PPL_H
#include <stdint.h>

#include "kvc/kvc_stream.h"
#include "method_opts.h"

typedef struct kvc_ppl_result {
    int tokens;              /**< predicted tokens (text tokens - 1) */
    double nll;              /**< mean negative log-likelihood, compressed cache */
    double perplexity, exact_perplexity;
    double mean_rel_attn;    /**< mean relative attention error (layers, heads, compressing positions) */
} kvc_ppl_result;

/** `kvc ppl` command. */
int kvc_cmd_ppl(int argc, char **argv);
/** One perplexity run; NULL model/tokenizer paths use the defaults. Returns 0 or 1. */
int kvc_ppl_run(const char *model_path, const char *tok_path, const char *text_path, kvc_method method,
                uint32_t budget, uint32_t sink, uint32_t window, uint64_t seed, int pyramid, int verbose,
                const kvc_method_opts *mo, kvc_ppl_result *out);
#endif
