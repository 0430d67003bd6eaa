/* Byte-level BPE (GPT-2): bytes map to printable code points
 * (bytes_to_unicode), text is pre-tokenised, each piece is mapped to those
 * code points and merged pair by pair by merge rank. */
#include "bpe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_err.h"
#include "kvc_gguf.h"
#include "merge_heap.h"

typedef struct entry {
    const char *s; /* not owned: points into `text` storage */
    int len, value;
} entry;

typedef struct table {
    entry *e;
    size_t cap;
} table;

struct kvc_bpe {
    char *store;  /* copies of every token and merge string */
    table vocab;  /* token string (byte-level encoded) -> id */
    table merges; /* "left right" -> rank */
    char **tok;   /* id -> string */
    int *tok_len;
    int n_vocab, bos, eos;
    int max_token_bytes; /* the longest token's decoded bytes */
    uint16_t byte2cp[256];
    int16_t cp2byte[512];
};

static uint64_t hash(const char *s, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static int tbl_init(table *t, size_t n)
{
    t->cap = 16;
    while (t->cap < 2 * n) t->cap *= 2;
    t->e = calloc(t->cap, sizeof(entry));
    return t->e != NULL;
}

static void tbl_put(table *t, const char *s, int len, int value)
{
    size_t i = hash(s, len) & (t->cap - 1);
    while (t->e[i].s && !(t->e[i].len == len && !memcmp(t->e[i].s, s, (size_t)len))) i = (i + 1) & (t->cap - 1);
    if (!t->e[i].s) t->e[i] = (entry){s, len, value}; /* first occurrence wins */
}

static int tbl_get(const table *t, const char *s, int len)
{
    size_t i = hash(s, len) & (t->cap - 1);
    while (t->e[i].s) {
        if (t->e[i].len == len && !memcmp(t->e[i].s, s, (size_t)len)) return t->e[i].value;
        i = (i + 1) & (t->cap - 1);
    }
    return -1;
}

/* GPT-2 bytes_to_unicode: printable bytes keep their code point, the others
 * take 256, 257, ... in byte order. */
static void byte_tables(kvc_bpe *t)
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        t->byte2cp[b] = (uint16_t)(keep ? b : 256 + n++);
    }
    for (int i = 0; i < 512; i++) t->cp2byte[i] = -1;
    for (int b = 0; b < 256; b++) t->cp2byte[t->byte2cp[b]] = (int16_t)b;
}

static int put_cp(char *o, unsigned cp)
{
    if (cp < 0x80) return o[0] = (char)cp, 1;
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2; /* every mapped code point is < 0x800 */
}

void kvc_bpe_free(kvc_bpe *t)
{
    if (!t) return;
    free(t->store), free(t->vocab.e), free(t->merges.e), free(t->tok), free(t->tok_len);
    free(t);
}

kvc_bpe *kvc_bpe_load(const char *path, char *err, size_t errlen)
{
    uint8_t *buf;
    size_t n;
    if (kvc_read_regular_file(path, &buf, &n, err, errlen) != KVC_OK) return NULL;
    kvc_bpe *t = kvc_bpe_load_buffer(buf, n, path, err, errlen);
    free(buf);
    return t;
}

kvc_bpe *kvc_bpe_load_buffer(const uint8_t *buf, size_t n, const char *path, char *err, size_t errlen)
{
    kvc_gguf g;
    kvc_bpe *t = NULL;
    if (kvc_gguf_parse(buf, n, &g, err, errlen) != KVC_OK) return NULL;
    const kvc_gguf_kv *tk = kvc_gguf_find(&g, "tokenizer.ggml.tokens"),
                      *mk = kvc_gguf_find(&g, "tokenizer.ggml.merges");
    const char *model;
    size_t mlen;
    size_t *to = NULL, *tl = NULL, *mo = NULL, *ml = NULL;
    if (!tk || !mk || tk->type != KVC_GGUF_ARRAY || mk->type != KVC_GGUF_ARRAY || tk->elem_type != KVC_GGUF_STRING ||
        mk->elem_type != KVC_GGUF_STRING || tk->count == 0 || tk->count > (1u << 22) || mk->count > (1u << 22) ||
        kvc_gguf_get_string(&g, "tokenizer.ggml.model", &model, &mlen) != KVC_OK || mlen != 4 ||
        memcmp(model, "gpt2", 4)) {
        kvc_errf(err, errlen, KVC_E_FORMAT, "'%s' has no GPT-2 style tokenizer (tokens, merges)", path);
        goto done;
    }
    to = malloc(tk->count * sizeof(size_t)), tl = malloc(tk->count * sizeof(size_t));
    mo = malloc((mk->count + 1) * sizeof(size_t)), ml = malloc((mk->count + 1) * sizeof(size_t));
    t = calloc(1, sizeof *t);
    if (!to || !tl || !mo || !ml || !t) goto oom;
    kvc_gguf_array_strings(&g, tk, to, tl);
    kvc_gguf_array_strings(&g, mk, mo, ml);
    size_t total = 0;
    for (uint64_t i = 0; i < tk->count; i++) total += tl[i] + 1;
    for (uint64_t i = 0; i < mk->count; i++) total += ml[i] + 1;
    t->store = malloc(total ? total : 1);
    t->tok = calloc(tk->count, sizeof(char *));
    t->tok_len = calloc(tk->count, sizeof(int));
    if (!t->store || !t->tok || !t->tok_len || !tbl_init(&t->vocab, tk->count) || !tbl_init(&t->merges, mk->count + 1))
        goto oom;
    char *p = t->store;
    t->n_vocab = (int)tk->count;
    for (uint64_t i = 0; i < tk->count; i++) {
        memcpy(p, buf + to[i], tl[i]);
        p[tl[i]] = 0;
        t->tok[i] = p, t->tok_len[i] = (int)tl[i];
        tbl_put(&t->vocab, p, (int)tl[i], (int)i);
        if ((int)tl[i] > t->max_token_bytes) t->max_token_bytes = (int)tl[i]; /* >= its decoded bytes */
        p += tl[i] + 1;
    }
    for (uint64_t i = 0; i < mk->count; i++) {
        memcpy(p, buf + mo[i], ml[i]);
        p[ml[i]] = 0;
        tbl_put(&t->merges, p, (int)ml[i], (int)i);
        p += ml[i] + 1;
    }
    uint64_t v;
    t->bos = kvc_gguf_get_uint(&g, "tokenizer.ggml.bos_token_id", &v) == KVC_OK && v < tk->count ? (int)v : -1;
    t->eos = kvc_gguf_get_uint(&g, "tokenizer.ggml.eos_token_id", &v) == KVC_OK && v < tk->count ? (int)v : -1;
    byte_tables(t);
    goto done;
oom:
    kvc_errf(err, errlen, KVC_E_CAPACITY, "out of memory loading the tokenizer");
    kvc_bpe_free(t);
    t = NULL;
done:
    free(to), free(tl), free(mo), free(ml);
    kvc_gguf_free(&g);
    return t;
}

int kvc_bpe_vocab_size(const kvc_bpe *t) { return t->n_vocab; }
int kvc_bpe_bos(const kvc_bpe *t) { return t->bos; }
int kvc_bpe_eos(const kvc_bpe *t) { return t->eos; }

static int is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Length of the next GPT-2 pre-token starting at s[0] (n >= 1 bytes left;
 * a NUL byte is a byte like any other). */
static size_t pretoken(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    static const char *contr[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    for (size_t i = 0; i < 7; i++) {
        const size_t l = strlen(contr[i]);
        if (l <= n && !memcmp(s, contr[i], l)) return l;
    }
#define MORE(i) ((i) < n)
    size_t i = (u[0] == ' ' && MORE(1) && !is_space(u[1])) ? 1 : 0; /* optional leading space */
    if (is_letter(u[i])) {
        while (MORE(i) && is_letter(u[i])) i++;
        return i;
    }
    if (is_digit(u[i])) {
        while (MORE(i) && is_digit(u[i])) i++;
        return i;
    }
    if (!is_space(u[i])) {
        while (MORE(i) && !is_space(u[i]) && !is_letter(u[i]) && !is_digit(u[i])) i++;
        return i;
    }
    /* whitespace: \s+(?!\S) keeps the last space for the next word; else \s+ */
    size_t j = 0;
    while (MORE(j) && is_space(u[j])) j++;
    if (MORE(j) && j > 1) return j - 1;
#undef MORE
    return j ? j : 1;
}

/* Queue the merge of adjacent symbols a, b when the merges table ("left
 * right") has it; the earlier the rank, the higher the priority. */
static void push_pair(const kvc_bpe *t, const char *enc, const int *start, const int *len, const unsigned *ver, int a,
                      int b, kvc_merge_cand *heap, int *hn)
{
    char pair[4 * KVC_BPE_PIECE_MAX + 1];
    int pl = 0;
    memcpy(pair, enc + start[a], (size_t)len[a]), pl += len[a];
    pair[pl++] = ' ';
    memcpy(pair + pl, enc + start[b], (size_t)len[b]), pl += len[b];
    const int rank = tbl_get(&t->merges, pair, pl);
    if (rank >= 0) kvc_merge_push(heap, hn, (kvc_merge_cand){-(float)rank, a, b, ver[a], ver[b], rank});
}

/* BPE over one piece of at most KVC_BPE_PIECE_MAX bytes; appends ids.
 * Returns the new count, KVC_BPE_E_CAP when cap is exceeded, or
 * KVC_BPE_E_BYTE with *bad set to the piece's byte that has no token.
 * The merges run on merge_heap.h (priority: minus the rank, exact in a
 * float for the at most 2^22 merges a vocabulary may hold), O(m log m): a
 * rescan for the best pair after every merge took a million compares for a
 * run of 1,000 mergeable letters. */
static int bpe_piece(const kvc_bpe *t, const char *s, size_t n, int *ids, int cap, int k, size_t *bad)
{
    /* symbols: byte-level encoded code points (1-2 UTF-8 bytes each), one
       per byte of the piece, so a symbol's index is its first byte's offset */
    char enc[2 * KVC_BPE_PIECE_MAX];
    int start[KVC_BPE_PIECE_MAX], len[KVC_BPE_PIECE_MAX], next[KVC_BPE_PIECE_MAX], prev[KVC_BPE_PIECE_MAX];
    unsigned ver[KVC_BPE_PIECE_MAX];
    int m = 0, pos = 0;
    for (size_t i = 0; i < n; i++) {
        start[m] = pos;
        len[m] = put_cp(enc + pos, t->byte2cp[(unsigned char)s[i]]);
        pos += len[m];
        prev[m] = m - 1, next[m] = m + 1 < (int)n ? m + 1 : -1, ver[m] = 0;
        m++;
    }
    kvc_merge_cand heap[3 * KVC_BPE_PIECE_MAX]; /* m - 1 initial pairs, 2 more per merge */
    int hn = 0;
    for (int i = 0; i + 1 < m; i++) push_pair(t, enc, start, len, ver, i, i + 1, heap, &hn);
    while (hn > 0) {
        const kvc_merge_cand c = kvc_merge_pop(heap, &hn);
        if (next[c.left] != c.right || ver[c.left] != c.vl || ver[c.right] != c.vr) continue; /* stale */
        len[c.left] += len[c.right]; /* symbols stay contiguous in enc */
        ver[c.left]++, ver[c.right]++;
        next[c.left] = next[c.right];
        if (next[c.left] >= 0) prev[next[c.left]] = c.left;
        if (prev[c.left] >= 0) push_pair(t, enc, start, len, ver, prev[c.left], c.left, heap, &hn);
        if (next[c.left] >= 0) push_pair(t, enc, start, len, ver, c.left, next[c.left], heap, &hn);
    }
    for (int i = m > 0 ? 0 : -1; i >= 0; i = next[i]) {
        int id = tbl_get(&t->vocab, enc + start[i], len[i]);
        if (id < 0) { /* a merge whose result is not a token: fall back to its single bytes */
            for (int b = 0, byte = i; b < len[i]; byte++) {
                const int l = ((unsigned char)enc[start[i] + b] < 0x80) ? 1 : 2;
                const int bid = tbl_get(&t->vocab, enc + start[i] + b, l);
                if (bid < 0) { /* the vocabulary has no token for this byte: no id says it */
                    *bad = (size_t)byte;
                    return KVC_BPE_E_BYTE;
                }
                if (k >= cap) return KVC_BPE_E_CAP;
                ids[k++] = bid;
                b += l;
            }
            continue;
        }
        if (k >= cap) return KVC_BPE_E_CAP;
        ids[k++] = id;
    }
    return k;
}

/* Where to cut a pre-token longer than KVC_BPE_PIECE_MAX: at the last UTF-8
 * character start in the piece's last 3 bytes, so a character is not split
 * across two pieces when it can be helped (a split one stays lossless: its
 * bytes are byte tokens). */
static size_t piece_cut(const char *s, size_t n)
{
    if (n <= KVC_BPE_PIECE_MAX) return n;
    for (size_t c = KVC_BPE_PIECE_MAX; c > KVC_BPE_PIECE_MAX - 3; c--)
        if (((unsigned char)s[c] & 0xC0) != 0x80) return c;
    return KVC_BPE_PIECE_MAX;
}

int kvc_bpe_encode_n(const kvc_bpe *t, const char *text, size_t len, int *ids, int cap, size_t *bad_pos)
{
    int k = 0;
    size_t bad = 0;
    for (size_t at = 0; at < len;) {
        size_t n = pretoken(text + at, len - at);
        while (n > 0) { /* a long pre-token goes in pieces: every byte is encoded */
            const size_t p = piece_cut(text + at, n);
            k = bpe_piece(t, text + at, p, ids, cap, k, &bad);
            if (k == KVC_BPE_E_BYTE && bad_pos) *bad_pos = at + bad;
            if (k < 0) return k;
            at += p, n -= p;
        }
    }
    return k;
}

int kvc_bpe_encode(const kvc_bpe *t, const char *text, int *ids, int cap)
{
    return kvc_bpe_encode_n(t, text, strlen(text), ids, cap, NULL);
}

int kvc_bpe_max_token_bytes(const kvc_bpe *t) { return t->max_token_bytes; }

int kvc_bpe_decode(const kvc_bpe *t, int id, char *out, int cap)
{
    if (id < 0 || id >= t->n_vocab || cap < 1) return 0;
    const unsigned char *s = (const unsigned char *)t->tok[id];
    int n = 0;
    for (int i = 0; i < t->tok_len[id] && n + 1 < cap;) {
        unsigned cp;
        if (s[i] < 0x80)
            cp = s[i], i += 1;
        else if ((s[i] & 0xE0) == 0xC0 && i + 1 < t->tok_len[id])
            cp = ((s[i] & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu), i += 2;
        else { /* special tokens may hold other UTF-8: copy raw */
            out[n++] = (char)s[i++];
            continue;
        }
        out[n++] = cp < 512 && t->cp2byte[cp] >= 0 ? (char)t->cp2byte[cp] : '?';
    }
    out[n] = 0;
    return n;
}
