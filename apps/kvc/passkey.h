#ifndef KVC_APP_PASSKEY_H
#define KVC_APP_PASSKEY_H
/* Passkey retrieval prompts (kvc bench recall): an instruction, repeated filler
 * sentences with "The pass key is NNNNN. Remember it. NNNNN is the pass key."
 * placed at a chosen depth, then " What is the pass key? The pass key is". */
#include "generate.h"

typedef struct kvc_passkey {
    int n_hay;      /**< tokens of the context before the question (instruction, filler, needle) */
    int n_question; /**< tokens of the question, right after the haystack */
    int needle_tok; /**< index of the needle's first token in the haystack */
    int needle_len; /**< tokens of the needle sentence encoded alone (its span in the haystack, +-1 at the edges) */
    char key[8];    /**< the 5 digits */
} kvc_passkey;

/**
 * @brief Tokens of a passkey prompt whose haystack + question fill at most
 *        @p context - @p answer_room tokens, with the needle after
 *        round(depth * blocks) filler blocks.
 * @param depth  0 .. 1.  @param key  10000 .. 99999.
 * @param toks   room for @p context tokens.
 * @return 0, or 1 after printing why (context too small, tokenizer trouble).
 */
int kvc_passkey_build(const kvc_lm *lm, int context, int answer_room, double depth, unsigned key, int *toks,
                      kvc_passkey *pk);

/**
 * @brief Use natural text as the haystack instead of the repeated filler:
 *        @p text cut into blocks of about 100 bytes at spaces (whitespace
 *        runs become one space), block b of a prompt being block b modulo
 *        their count. NULL restores the filler. Not thread-safe: call it
 *        before building prompts.
 * @return 0, or 1 when out of memory or the text is empty.
 */
int kvc_passkey_set_haystack(const char *text);

/**
 * @brief The key the model answered: the first run of digits in @p text
 *        (copied into @p out, at most 15 digits), "" when there is none.
 */
void kvc_passkey_answer(const char *text, char out[16]);
#endif
