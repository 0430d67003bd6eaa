/* The candidate merges of a tokenizer's merge loop, in a binary heap: the
 * one machinery of both tokenizers (llama2c_tokenizer.c: merges by the merged
 * token's score; bpe.c: by merge rank). Symbols form a linked list over
 * their original positions; a merge bumps the versions of its two symbols,
 * which makes every queued candidate naming them stale. The next merge is
 * the highest priority, then the leftmost: both references' tie rule. A loop
 * over n symbols costs O(n log n) instead of a rescan after every merge. */
#ifndef KVC_MERGE_HEAP_H
#define KVC_MERGE_HEAP_H

typedef struct kvc_merge_cand {
    float priority;  /* higher merges first */
    int left, right; /* symbol indices (positions in the original list) */
    unsigned vl, vr; /* their versions when the pair was looked up */
    int id;          /* what the merge makes (the caller's meaning) */
} kvc_merge_cand;

static inline int kvc_merge_before(const kvc_merge_cand *a, const kvc_merge_cand *b)
{
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

static inline void kvc_merge_push(kvc_merge_cand *h, int *hn, kvc_merge_cand c)
{
    int i = (*hn)++;
    while (i > 0 && kvc_merge_before(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static inline kvc_merge_cand kvc_merge_pop(kvc_merge_cand *h, int *hn)
{
    const kvc_merge_cand top = h[0], last = h[--*hn];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *hn) break;
        if (c + 1 < *hn && kvc_merge_before(&h[c + 1], &h[c])) c++;
        if (!kvc_merge_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*hn > 0) h[i] = last;
    return top;
}
#endif
