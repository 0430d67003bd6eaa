#ifndef KVC_APP_GENERATE_H
#define KVC_APP_GENERATE_H

#include <stdint.h>

#include "budget.h"

/** What `kvc generate` runs (paths as kvc_model_paths fills them when NULL;
 *  no budget = the model's context; steps 0 = 256; temp 0 = greedy). A share
 *  of the context (P%, P%f16) is of the tokens the run appends: the prompt
 *  and the steps, at most the model's context. */
typedef struct kvc_generate_params {
    const char *model, *tokenizer, *prompt, *method;
    uint64_t steps, seed, sink, window;
    int have_budget;
    kvc_budget budget;
    double temp;
} kvc_generate_params;

struct kvc_method_opts;
/** Generate and print; @p mo (may be NULL) holds method flags and --dtype. 0 ok, 1 failure, 2 usage. */
int kvc_generate_run(const kvc_generate_params *p, const struct kvc_method_opts *mo);
/** Fill unset model/tokenizer paths from $KVC_MODEL, $KVC_TOKENIZER, $KVC_MODEL_DIR
 *  (default KVC_DEFAULT_MODEL_DIR: the source tree's models/stories260K, set by CMake). */
int kvc_model_paths(const char **model, const char **tok);
#include "llama2c.h"
/** Load a model and its tokenizer (paths as kvc_model_paths fills them);
 *  prints a clear message naming @p cmd and returns 1 on failure. */
int kvc_model_open(const char *cmd, const char *model_path, const char *tok_path, kvc_l2c_model *m,
                   kvc_l2c_tokenizer *tok);
#include "bpe.h"

/** A model with whichever tokenizer it comes with: llama2.c checkpoint +
 *  tok.bin, or a Llama GGUF with its byte-level BPE. */
typedef struct kvc_lm {
    kvc_l2c_model m;
    kvc_l2c_tokenizer tok; /* llama2.c */
    kvc_bpe *bpe;          /* GGUF */
    const char *cmd;       /* the command, for messages */
} kvc_lm;

/** Open by file type (".gguf" or llama2.c); prints why and returns 1 on failure (a
 *  --tokenizer given with a GGUF, which carries its own, is refused). */
int kvc_lm_open(const char *cmd, const char *model_path, const char *tok_path, kvc_lm *lm);
/** Encode text (llama2.c: BOS first; GGUF: as the file's tokenizer says), losslessly. Returns the
 *  count; -1 when @p cap is too small; KVC_BPE_E_BYTE (-2) when the vocabulary has no token for a
 *  byte, after printing one line naming @p source and the byte's offset. */
int kvc_lm_encode(const kvc_lm *lm, const char *source, const char *text, int *ids, int cap);
/** Encode only as much of @p text as its first @p max_tokens tokens need
 *  (the rest cannot reach a context of that length); *ids_out is malloc'd
 *  (free it), NULL on failure. Returns the count (<= max_tokens), < 0 on failure (as kvc_lm_encode). */
int kvc_lm_encode_prefix(const kvc_lm *lm, const char *source, const char *text, int max_tokens, int **ids_out);
void kvc_lm_close(kvc_lm *lm);
/** Text of token @p tok following @p prev into @p buf (@p cap >= 8 bytes, NUL-terminated); returns buf. */
const char *kvc_lm_piece(const kvc_lm *lm, int prev, int tok, char *buf, int cap);
/** The token that ends a generation (GGUF: its EOS; llama2.c: BOS, which starts the next story). */
int kvc_lm_end_token(const kvc_lm *lm);
#endif
