/* llama2.c tokenizer: int32 max_token_length, then per token a float score,
 * an int32 length and that many bytes. Encoding follows llama2.c: BOS, a
 * dummy-prefix space, UTF-8 code points (byte fallback <0xXX> = id byte+3),
 * then repeated merge of the best-scoring adjacent pair. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_err.h"
#include "llama2c.h"
#include "merge_heap.h"

static const kvc_l2c_tokenizer *g_sort_tok; /* qsort context (host code, single-threaded use) */

static int cmp_piece(const void *a, const void *b)
{
    const kvc_l2c_tokenizer *t = g_sort_tok;
    return strcmp(t->vocab[*(const int *)a], t->vocab[*(const int *)b]);
}

kvc_status kvc_l2c_tokenizer_parse(const uint8_t *buf, size_t len, int vocab_size, kvc_l2c_tokenizer *t, char *err,
                                   size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (err && errlen) err[0] = 0;
    if (vocab_size < 1 || vocab_size > 1000000)
        return kvc_errf(err, errlen, KVC_E_FORMAT, "vocab size %d out of range", vocab_size);
    if (buf == NULL || len < 4) return kvc_errf(err, errlen, KVC_E_FORMAT, "tokenizer truncated: no header");
    int32_t maxlen;
    memcpy(&maxlen, buf, 4);
    if (maxlen < 1 || maxlen > 65536)
        return kvc_errf(err, errlen, KVC_E_FORMAT, "tokenizer max_token_length %d out of range", maxlen);
    t->vocab_size = vocab_size;
    t->max_token_length = maxlen;
    t->vocab = calloc((size_t)vocab_size, sizeof(char *));
    t->lens = calloc((size_t)vocab_size, sizeof(int));
    t->scores = calloc((size_t)vocab_size, sizeof(float));
    t->sorted = calloc((size_t)vocab_size, sizeof(int));
    if (!t->vocab || !t->lens || !t->scores || !t->sorted) {
        kvc_l2c_tokenizer_free(t);
        return KVC_E_CAPACITY;
    }
    size_t off = 4;
    for (int i = 0; i < vocab_size; i++) {
        int32_t n;
        if (len - off < 8) {
            kvc_l2c_tokenizer_free(t);
            return kvc_errf(err, errlen, KVC_E_FORMAT, "tokenizer truncated at token %d of %d", i, vocab_size);
        }
        memcpy(&t->scores[i], buf + off, 4);
        memcpy(&n, buf + off + 4, 4);
        off += 8;
        if (n < 0 || n > maxlen || (size_t)n > len - off || !isfinite(t->scores[i])) {
            kvc_l2c_tokenizer_free(t);
            return kvc_errf(err, errlen, KVC_E_FORMAT,
                            "tokenizer token %d: bad length %d or score (max %d, %zu bytes left)", i, n, maxlen,
                            len - off);
        }
        t->vocab[i] = malloc((size_t)n + 1);
        if (!t->vocab[i]) {
            kvc_l2c_tokenizer_free(t);
            return KVC_E_CAPACITY;
        }
        memcpy(t->vocab[i], buf + off, (size_t)n);
        t->vocab[i][n] = 0;
        t->lens[i] = n;
        off += (size_t)n;
        t->sorted[i] = i;
    }
    if (off != len) {
        kvc_l2c_tokenizer_free(t);
        return kvc_errf(err, errlen, KVC_E_FORMAT,
                        "tokenizer has %zu trailing bytes (vocab size mismatch with the model?)", len - off);
    }
    g_sort_tok = t;
    qsort(t->sorted, (size_t)vocab_size, sizeof(int), cmp_piece);
    return KVC_OK;
}

void kvc_l2c_tokenizer_free(kvc_l2c_tokenizer *t)
{
    if (t->vocab)
        for (int i = 0; i < t->vocab_size; i++) free(t->vocab[i]);
    free(t->vocab), free(t->lens), free(t->scores), free(t->sorted);
    memset(t, 0, sizeof *t);
}

static int lookup(const kvc_l2c_tokenizer *t, const char *s)
{
    int lo = 0, hi = t->vocab_size - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(s, t->vocab[t->sorted[mid]]);
        if (c == 0) return t->sorted[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

/* The reference merge loop (llama2.c) rescans every adjacent pair after
 * each merge: O(n^2) lookups for n symbols, 18 s for 11 KB of text. This
 * does the same merges in the same order in O(n log n) (merge_heap.h): the
 * priority is the merged token's score. */
typedef kvc_merge_cand cand;

typedef struct sym_list {
    int *tok, *next, *prev;
    unsigned *ver;
} sym_list;

static void push_pair(const kvc_l2c_tokenizer *t, const sym_list *L, int a, char *pair, cand *h, int *hn)
{
    const int b = L->next[a];
    if (a <= 0 || b < 0) return; /* never merge BOS (symbol 0) */
    snprintf(pair, (size_t)t->max_token_length * 2 + 3, "%s%s", t->vocab[L->tok[a]], t->vocab[L->tok[b]]);
    const int id = lookup(t, pair);
    if (id < 0 || !(t->scores[id] > -1e10f)) return; /* the reference's floor for a merge */
    cand c = {t->scores[id], a, b, L->ver[a], L->ver[b], id};
    kvc_merge_push(h, hn, c);
}

static int merge_pairs(const kvc_l2c_tokenizer *t, int *out, int n, char *pair)
{
    sym_list L;
    L.tok = malloc((size_t)n * sizeof(int)), L.next = malloc((size_t)n * sizeof(int));
    L.prev = malloc((size_t)n * sizeof(int)), L.ver = calloc((size_t)n, sizeof(unsigned));
    /* each merge adds at most two candidates: n initial + 2n */
    cand *h = malloc((size_t)(3 * n + 1) * sizeof(cand));
    if (!L.tok || !L.next || !L.prev || !L.ver || !h) {
        free(L.tok), free(L.next), free(L.prev), free(L.ver), free(h);
        return n; /* out of memory: symbols unmerged (still a valid encoding) */
    }
    int hn = 0;
    for (int i = 0; i < n; i++) L.tok[i] = out[i], L.next[i] = i + 1 < n ? i + 1 : -1, L.prev[i] = i - 1;
    for (int i = 1; i + 1 < n; i++) push_pair(t, &L, i, pair, h, &hn);
    while (hn > 0) {
        const cand c = kvc_merge_pop(h, &hn);
        if (L.next[c.left] != c.right || L.ver[c.left] != c.vl || L.ver[c.right] != c.vr) continue; /* stale */
        L.tok[c.left] = c.id;
        L.ver[c.left]++;
        L.ver[c.right]++;
        L.next[c.left] = L.next[c.right];
        if (L.next[c.right] >= 0) L.prev[L.next[c.right]] = c.left;
        L.next[c.right] = -2; /* gone */
        if (L.prev[c.left] >= 0) push_pair(t, &L, L.prev[c.left], pair, h, &hn);
        push_pair(t, &L, c.left, pair, h, &hn);
    }
    int m = 0;
    for (int i = 0; i >= 0; i = L.next[i]) out[m++] = L.tok[i];
    free(L.tok), free(L.next), free(L.prev), free(L.ver), free(h);
    return m;
}

int kvc_l2c_encode(const kvc_l2c_tokenizer *t, const char *text, int *out)
{
    int n = 0;
    out[n++] = 1; /* BOS */
    size_t tl = strlen(text);
    char *buf = malloc((size_t)t->max_token_length * 2 + 3);
    char *pair = malloc((size_t)t->max_token_length * 2 + 3);
    if (!buf || !pair) {
        free(buf), free(pair);
        return n;
    }
    if (tl > 0) {
        int sp = lookup(t, " ");
        if (sp >= 0) out[n++] = sp;
    }
    size_t bl = 0;
    for (const char *c = text; *c; c++) {
        if ((*c & 0xC0) != 0x80) bl = 0; /* start of a new code point */
        buf[bl++] = *c;
        buf[bl] = 0;
        if ((*(c + 1) & 0xC0) == 0x80 && bl < 4) continue;
        int id = lookup(t, buf);
        if (id >= 0) {
            out[n++] = id;
        } else {
            /* byte fallback: <0xXX> is id XX + 3; a vocabulary without byte
               tokens maps the byte to <unk> (0) instead of an invalid id */
            for (size_t i = 0; i < bl; i++) {
                int b = (unsigned char)buf[i] + 3;
                out[n++] = b < t->vocab_size ? b : 0;
            }
        }
        bl = 0;
    }
    n = merge_pairs(t, out, n, pair);
    free(buf), free(pair);
    return n;
}

const char *kvc_l2c_decode(const kvc_l2c_tokenizer *t, int prev, int token, char byte_buf[2])
{
    if (token < 0 || token >= t->vocab_size) return "";
    const char *piece = t->vocab[token];
    if (prev == 1 && piece[0] == ' ') piece++;
    unsigned int byte;
    if (sscanf(piece, "<0x%02X>", &byte) == 1 && strlen(piece) == 6) {
        byte_buf[0] = (char)byte;
        byte_buf[1] = 0;
        return byte_buf;
    }
    return piece;
}
