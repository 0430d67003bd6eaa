#ifndef KVC_APP_LMRUN_H
#define KVC_APP_LMRUN_H
/* Running a model over token sequences with a compressed cache: shared by
 * kvc ppl, kvc dump and kvc bench. */
#include "llama2c.h"

/** Tokens per chunk of the chunked forward (products run on this many tokens at once). */
#define KVC_LM_CHUNK 64

/**
 * @brief A cache manager for model @p c with per-stream settings @p sc and
 *        budget policy @p policy, in a fresh 64-byte-aligned arena.
 * @return the arena (free() it), or NULL after printing why (naming @p cmd).
 */
void *kvc_lm_cache_new(const char *cmd, const kvc_l2c_config *c, const kvc_stream_config *sc, kvc_budget_policy policy,
                       kvc_cache **cache, size_t *bytes);

/** Called after each chunk with the number of tokens done so far. */
typedef void (*kvc_lm_progress_fn)(void *pctx, int done);

/**
 * @brief Feed toks[0..n) at positions pos0.. through the model in chunks of
 *        s->chunk, attending through @p attn / @p ctx.
 * @param targets  NULL (no logits are made), or n token ids: then *nll gets
 *                 the sum over i of -log p(targets[i] | toks[..i]); teacher
 *                 forcing feeds toks[0..n-1) with targets toks + 1.
 * @return KVC_OK or the first failing status.
 */
kvc_status kvc_lm_feed(const kvc_l2c_model *m, kvc_l2c_state *s, const int *toks, int n, int pos0, kvc_l2c_attn_fn attn,
                       void *ctx, const int *targets, double *nll, kvc_lm_progress_fn progress, void *pctx);

/** Index of the largest of @p n logits (the first one on ties). */
int kvc_lm_argmax(const float *logits, int n);

/** -log softmax(logits)[target], in double. */
double kvc_lm_nll(const float *logits, int n, int target);
/** The whole file as a NUL-terminated string (free() it); NULL after one line naming @p cmd, the
 *  file and why when it is unreadable, over 64 MiB, or holds a NUL byte (named by its offset). */
char *kvc_lm_read_text(const char *cmd, const char *path);
#endif
