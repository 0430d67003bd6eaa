/* Passkey prompt builder (see passkey.h). The pieces begin with a space and
 * end without one, so that the byte-level BPE splits them the same alone and
 * joined; the builder still checks that the haystack's tokens are a prefix of
 * the whole prompt's before trusting the boundary. */
#include "passkey.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char INTRO[] = "There is an important info hidden inside a lot of irrelevant text. Find it and "
                            "memorize it. I will quiz you about the important information there.";
static const char FILL[] = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
static const char QUESTION[] = " What is the pass key? The pass key is";

static char *compose(int blocks, int needle_at, const char *needle, int with_question)
{
    const size_t len = sizeof INTRO + (size_t)blocks * (sizeof FILL - 1) + strlen(needle) + sizeof QUESTION + 1;
    char *t = malloc(len), *p = t;
    if (!t) return NULL;
    p += sprintf(p, "%s", INTRO);
    for (int b = 0; b <= blocks; b++) {
        if (b == needle_at) p += sprintf(p, "%s", needle);
        if (b < blocks) p += sprintf(p, "%s", FILL);
    }
    if (with_question) sprintf(p, "%s", QUESTION);
    return t;
}

/* Token count of a composed text (-1 on failure); the first min(count, cap)
 * ids go to toks. */
static int count(const kvc_lm *lm, int blocks, int needle_at, const char *needle, int q, int *toks, int cap)
{
    char *t = compose(blocks, needle_at, needle, q);
    const size_t room = t ? strlen(t) + 3 : 0; /* no tokenizer makes more ids than bytes + 3 */
    int *ids = t ? malloc(room * sizeof(int)) : NULL;
    int n = ids ? kvc_lm_encode(lm, t, ids, (int)room) : -1;
    if (n > 0) memcpy(toks, ids, (size_t)(n < cap ? n : cap) * sizeof(int));
    free(t), free(ids);
    return n;
}

int kvc_passkey_build(const kvc_lm *lm, int context, int answer_room, double depth, unsigned key, int *toks,
                      kvc_passkey *pk)
{
    memset(pk, 0, sizeof *pk);
    char needle[96];
    snprintf(pk->key, sizeof pk->key, "%05u", key % 100000u);
    snprintf(needle, sizeof needle, " The pass key is %s. Remember it. %s is the pass key.", pk->key, pk->key);
    const int limit = context - answer_room;
    const int cap = context;
    int *tmp = malloc((size_t)cap * sizeof(int));
    if (!tmp || depth < 0 || depth > 1) goto fail;
    const int base = count(lm, 0, 0, needle, 1, tmp, cap), one = count(lm, 1, 0, needle, 1, tmp, cap);
    if (base < 0 || one <= base || base > limit) goto fail;
    int blocks = (limit - base) / (one - base) + 1, n = 0, at = 0;
    for (; blocks >= 0; blocks--) {
        at = (int)(depth * blocks + 0.5);
        n = count(lm, blocks, at, needle, 1, tmp, cap);
        if (n < 0) goto fail;
        if (n <= limit) break;
    }
    if (blocks < 0) goto fail;
    const int nh = count(lm, blocks, at, needle, 0, toks, context);
    if (nh <= 0 || nh >= n || memcmp(toks, tmp, (size_t)nh * sizeof(int))) {
        fprintf(stderr, "kvc bench: the question does not start on a token boundary\n");
        goto fail;
    }
    memcpy(toks, tmp, (size_t)n * sizeof(int));
    pk->n_hay = nh, pk->n_question = n - nh;
    /* the needle starts where the haystack before it ends */
    const int before = count(lm, at, -1, "", 0, tmp, cap);
    pk->needle_tok = before < 0 ? 0 : before;
    free(tmp);
    return 0;
fail:
    free(tmp);
    fprintf(stderr, "kvc bench: cannot build a passkey prompt of %d tokens (depth %.2f)\n", context, depth);
    return 1;
}

void kvc_passkey_answer(const char *text, char out[16])
{
    int n = 0;
    while (*text && !isdigit((unsigned char)*text)) text++;
    while (isdigit((unsigned char)*text) && n < 15) out[n++] = *text++;
    out[n] = 0;
}
