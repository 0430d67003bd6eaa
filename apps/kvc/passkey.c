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

/* A natural-text haystack (kvc_passkey_set_haystack): the file cut into
 * blocks of about HAY_BLOCK bytes at spaces, each starting with a space and
 * ending without one; block b of a prompt is hay[b % n_hay]. */
#define HAY_BLOCK 100
#define HAY_MAX   4096
static char *hay_text;
static const char *hay[HAY_MAX];
static size_t hay_len[HAY_MAX];
static int n_hay;

int kvc_passkey_set_haystack(const char *text)
{
    free(hay_text);
    hay_text = NULL, n_hay = 0;
    if (text == NULL) return 0;
    const size_t n = strlen(text);
    hay_text = malloc(n + 2);
    if (!hay_text) return 1;
    /* whitespace runs become one space; the text starts with a space */
    size_t w = 0;
    hay_text[w++] = ' ';
    for (size_t i = 0; i < n; i++) {
        const char c = isspace((unsigned char)text[i]) ? ' ' : text[i];
        if (c == ' ' && hay_text[w - 1] == ' ') continue;
        hay_text[w++] = c;
    }
    while (w > 1 && hay_text[w - 1] == ' ') w--;
    hay_text[w] = 0;
    size_t at = 0;
    while (at < w && n_hay < HAY_MAX) {
        size_t end = at + HAY_BLOCK < w ? at + HAY_BLOCK : w;
        while (end < w && hay_text[end] != ' ') end++; /* the next block starts at a space */
        hay[n_hay] = hay_text + at, hay_len[n_hay] = end - at, n_hay++;
        at = end;
    }
    return n_hay > 0 ? 0 : 1;
}

static const char *block_text(int b, size_t *len)
{
    if (n_hay == 0) {
        *len = sizeof FILL - 1;
        return FILL;
    }
    *len = hay_len[b % n_hay];
    return hay[b % n_hay];
}

static char *compose(int blocks, int needle_at, const char *needle, int with_question)
{
    size_t len = sizeof INTRO + strlen(needle) + sizeof QUESTION + 1;
    for (int b = 0; b < blocks; b++) {
        size_t l;
        block_text(b, &l);
        len += l;
    }
    char *t = malloc(len), *p = t;
    if (!t) return NULL;
    p += sprintf(p, "%s", INTRO);
    for (int b = 0; b <= blocks; b++) {
        if (b == needle_at) p += sprintf(p, "%s", needle);
        if (b < blocks) {
            size_t l;
            const char *x = block_text(b, &l);
            memcpy(p, x, l);
            p += l;
            *p = 0;
        }
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
    int n = ids ? kvc_lm_encode(lm, "the composed passkey text", t, ids, (int)room) : -1;
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
    /* natural-text blocks differ in length: move the first guess by the
       measured tokens per block (twice), then step down to the fit below */
    for (int it = 0; it < 2 && n_hay > 0 && blocks > 0; it++) {
        const int m = count(lm, blocks, (int)(depth * blocks + 0.5), needle, 1, tmp, cap);
        if (m <= base) break;
        const int next = (int)((double)blocks * (limit - base) / (double)(m - base)) + 1;
        if (next == blocks) break;
        blocks = next;
    }
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
    pk->needle_len = kvc_lm_encode(lm, "the needle", needle, tmp, cap);
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
