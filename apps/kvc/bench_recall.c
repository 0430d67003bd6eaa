/* kvc bench recall: passkey retrieval for every method x budget x context.
 *
 * Per (context, depth, trial) item, the haystack (instruction, filler, needle)
 * is prefilled once with full attention while its k/v rows are recorded
 * (--prefill exact, the default: the usual protocol for KV-cache compression,
 * where the prompt is read at full attention and the cache is compressed for
 * decoding). Each method's cache is then filled with those rows in token
 * order, exactly as a decoder appends them; the question and the answer go
 * through the compressed cache. Streaming methods see every token; prefill
 * methods are told the whole context (haystack, question and answer room) as
 * their prompt length: their state at every position is the causal replay of
 * compressing the prompt so far, so the question and answer are compressed
 * the same way instead of spilling into the small tail after the prompt. With
 * --prefill stream every haystack token is also computed through the
 * compressed cache (one full prefill per method and budget: slower).
 * Query-aware methods: under the exact protocol every cache first gets the
 * queries of the haystack's last 32 positions (kvc_cache_prefill_queries:
 * SnapKV's observation window, question-agnostic), and h2o / tova, which
 * score the attention they receive, always prefill through the cache. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "kv_record.h"
#include "lmrun.h"
#include "passkey.h"

#define MAX_ANSWER 12

typedef struct item {
    int context, depth_pct, trial;
    unsigned key;
    kvc_passkey pk;
    int *toks;
} item;

typedef struct outcome {
    int status; /* 1 correct, 0 wrong, -1 n/a, -2 failed */
    char answer[16];
    char text[48]; /* what the model said, commas and line breaks blanked (CSV) */
    uint64_t peak_bytes;
    int needle_marked; /* --protect-marks kvzip|needle: streams with a mark on the needle; -1 otherwise */
} outcome;

/* --protect-marks kvzip repeats the context in chunks of at most this many
 * tokens (KVzip's chunked scoring), after the context in the model's
 * positions: fewer where the model's positions end first, and at least
 * KVC_KVZIP_MIN_CHUNK. */
#define KVC_KVZIP_CHUNK     1024
#define KVC_KVZIP_MIN_CHUNK 16

typedef struct worker {
    kvc_l2c_state s;
    kvc_kv_record rec;
    unsigned char *marks;     /* [layer][kv head][position] of one configuration */
    float *pooled;            /* kvzip-pooled, surprisal: [position] */
    int *order;               /* sentences: positions by their sentence's falling mean surprisal */
    int *sent_from, *sent_to; /* sentences: the sentence of each position, [from, to) */
    int ready;
} worker;

typedef struct recall_ctx {
    const kvc_bench_opts *o;
    const kvc_lm *lm;
    item *items;
    int n_items, max_context, stream_prefill;
    int kvzip;          /* --protect-marks kvzip */
    int oracle;         /* --protect-marks needle: the needle's own tokens (a diagnostic bound) */
    int pooled;         /* --protect-marks kvzip-pooled: one ranking for every stream */
    int surprisal;      /* --protect-marks surprisal: one ranking by each token's surprisal */
    int sentences;      /* --protect-marks sentences: the most surprising sentences, whole */
    int kvzip_chunk;    /* its repeat chunk: KVC_KVZIP_CHUNK, less where the model's positions end first */
    const int *ask_ids; /* its repeat instruction's tokens */
    int n_ask;
    outcome *out; /* [item][cfg] */
    worker *workers;
    kvc_bench_progress prog;
    FILE *csv; /* rows written as each prompt finishes (under csv_mu), so a stopped run keeps them */
    pthread_mutex_t csv_mu;
} recall_ctx;

static void write_item_rows(recall_ctx *rc, int idx);

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Question + greedy answer through @p cache; fills o->answer. */
static kvc_status ask(const recall_ctx *rc, kvc_l2c_state *s, const item *it, kvc_cache *cache, outcome *o)
{
    const kvc_l2c_model *m = &rc->lm->m;
    const int V = m->cfg.vocab_size, nh = it->pk.n_hay, nq = it->pk.n_question;
    kvc_status st = kvc_l2c_forward_chunk(m, s, it->toks + nh, nq, nh, kvc_l2c_cache_attention, cache, nq - 1);
    if (st != KVC_OK) return st;
    const float *logits = s->logits + (size_t)(nq - 1) * V;
    char text[MAX_ANSWER * 32 + 1] = "", piece[64];
    int prev = it->toks[nh + nq - 1], pos = nh + nq, digits = 0;
    for (int a = 0; a < MAX_ANSWER && pos < it->context; a++) {
        const int next = kvc_lm_argmax(logits, V);
        if (next == kvc_lm_end_token(rc->lm)) break;
        kvc_lm_piece(rc->lm, prev, next, piece, sizeof piece);
        strncat(text, piece, sizeof text - strlen(text) - 1);
        /* stop once a digit run has ended: the answer is in */
        int has_digit = 0, ends_nondigit = 0;
        for (const char *c = piece; *c; c++) has_digit |= (*c >= '0' && *c <= '9');
        if (has_digit)
            digits = 1;
        else if (digits)
            ends_nondigit = 1;
        if (ends_nondigit) break;
        if (a + 1 == MAX_ANSWER || pos + 1 >= it->context) break;
        st = kvc_l2c_forward_chunk(m, s, &next, 1, pos, kvc_l2c_cache_attention, cache, 0);
        if (st != KVC_OK) return st;
        logits = s->logits;
        prev = next, pos++;
    }
    kvc_passkey_answer(text, o->answer);
    snprintf(o->text, sizeof o->text, "%s", text);
    /* cut before a UTF-8 sequence the copy truncated, so the CSV stays valid UTF-8 */
    size_t len = strlen(o->text), lead = len;
    while (lead > 0 && ((unsigned char)o->text[lead - 1] & 0xC0u) == 0x80u) lead--;
    if (lead > 0 && ((unsigned char)o->text[lead - 1] & 0x80u)) {
        const unsigned char b = (unsigned char)o->text[lead - 1];
        const size_t need = b >= 0xF0u ? 4 : b >= 0xE0u ? 3 : b >= 0xC0u ? 2 : 1;
        if (lead - 1 + need > len) o->text[lead - 1] = 0;
    }
    for (char *c = o->text; *c; c++)
        if (*c == ',' || *c == '\n' || *c == '\r' || *c == '"') *c = ' ';
    o->status = strcmp(o->answer, it->pk.key) == 0;
    return KVC_OK;
}

/* KVzip marks for one cache: per stream, the positions with the highest
 * reconstruction scores, as many as its protected rows hold spans of
 * 2 protect_radius + 1 tokens (at least one), among the positions after its
 * sinks (a sink is kept anyway). Returns how many streams have protected
 * spans (0: nothing to mark). */
/* Whole sentences, most surprising first: positions in order (order[0 .. n)),
 * each taking the sentence around it (positions sent_from[j] ..
 * sent_to[j]) while its tokens and the span's radius on either side fit the
 * protected rows; sentences reaching into the sinks are skipped (the sinks
 * hold them anyway). */
static void mark_sentences(unsigned char *mk, int n, const int *order, const int *sent_from, const int *sent_to,
                           const kvc_stream_plan *p)
{
    uint32_t used = 0;
    for (int i = 0; i < n; i++) {
        const int j = order[i], a = sent_from[j], b = sent_to[j];
        if (mk[j] || a < (int)p->n_sink) continue;
        const uint32_t cost = (uint32_t)(b - a) + 2u * p->protect_radius;
        if (used + cost > p->n_protect) continue;
        for (int t = a; t < b; t++) mk[t] = 1;
        used += cost;
    }
}

static int kvzip_marks(const kvc_kv_record *r, const kvc_cache *cache, int n, unsigned char *marks,
                       const kvc_passkey *pk, int oracle, const float *pooled, const worker *sw, int *needle_marked)
{
    int with = 0;
    *needle_marked = 0;
    memset(marks, 0, (size_t)r->n_layers * (size_t)r->n_kv * (size_t)n);
    for (int l = 0; l < r->n_layers; l++)
        for (int h = 0; h < r->n_kv; h++) {
            const kvc_stream_plan *p = kvc_stream_get_plan(kvc_cache_get_stream(cache, (uint32_t)l, (uint32_t)h));
            if (!p || p->n_protect == 0) continue;
            with++;
            unsigned char *mk = marks + ((size_t)l * (size_t)r->n_kv + (size_t)h) * (size_t)n;
            int want = (int)(p->n_protect / (2u * p->protect_radius + 1u));
            if (want < 1) want = 1;
            if (oracle) /* the needle's tokens themselves, as many as fit */
                for (int j = pk->needle_tok; j < pk->needle_tok + pk->needle_len && j < n; j++)
                    if (j >= (int)p->n_sink) mk[j] = 1;
            if (oracle) want = 0;
            if (sw) { /* surprising sentences, whole */
                mark_sentences(mk, n, sw->order, sw->sent_from, sw->sent_to, p);
                want = 0;
            }
            /* repeated selection of the largest unmarked score: want is small
               (the protected rows' share of the budget over the span width) */
            for (int w = 0; w < want; w++) {
                int best = -1;
                for (int j = (int)p->n_sink; j < n; j++) {
                    if (mk[j]) continue;
                    if (best < 0 || (pooled ? pooled[j] > pooled[best]
                                            : kvc_kv_record_score(r, l, h, j) > kvc_kv_record_score(r, l, h, best)))
                        best = j;
                }
                if (best < 0) break;
                mk[best] = 1;
            }
            int hit = 0;
            for (int j = pk->needle_tok; j < pk->needle_tok + pk->needle_len && j < n; j++) hit |= mk[j];
            *needle_marked += hit;
        }
    if (!with) *needle_marked = -1;
    return with;
}

/* kvzip-pooled: each position's reconstruction scores summed over every
 * layer and kv head, one ranking that every stream marks from. */
static void kvzip_pool(const kvc_kv_record *r, int n, float *pooled)
{
    for (int j = 0; j < n; j++) {
        double sum = 0.0;
        for (int l = 0; l < r->n_layers; l++)
            for (int h = 0; h < r->n_kv; h++) sum += kvc_kv_record_score(r, l, h, j);
        pooled[j] = (float)sum;
    }
}

/* sentences: each position's sentence (a sentence ends after a token whose
 * text holds '.', '!', '?' or a line break) and the positions in order of
 * their sentence's falling mean surprisal (the information per token, so a
 * short surprising sentence ranks above a long one with one rare word). */
static _Thread_local const float *order_key; /* the sort's key, per worker thread */
static int by_falling_key(const void *a, const void *b)
{
    const float x = order_key[*(const int *)a], y = order_key[*(const int *)b];
    return x > y ? -1 : x < y ? 1 : *(const int *)a - *(const int *)b;
}

static void sentence_spans(const kvc_lm *lm, const int *toks, int n, float *score, worker *w)
{
    char piece[64];
    int from = 0;
    for (int j = 0; j < n; j++) {
        kvc_lm_piece(lm, j > 0 ? toks[j - 1] : toks[j], toks[j], piece, sizeof piece);
        w->sent_from[j] = from;
        if (strpbrk(piece, ".!?\n") || j == n - 1) {
            double sum = 0.0;
            for (int t = from; t <= j; t++) sum += score[t];
            for (int t = from; t <= j; t++) w->sent_to[t] = j + 1, score[t] = (float)(sum / (j + 1 - from));
            from = j + 1;
        }
        w->order[j] = j;
    }
    order_key = score; /* qsort has no context argument in C11 */
    qsort(w->order, (size_t)n, sizeof(int), by_falling_key);
}

static void run_configs(void *vctx, int idx, int wid)
{
    recall_ctx *rc = (recall_ctx *)vctx;
    const kvc_bench_opts *o = rc->o;
    const kvc_l2c_model *m = &rc->lm->m;
    const item *it = &rc->items[idx];
    worker *w = &rc->workers[wid];
    outcome *res = rc->out + (size_t)idx * o->n_cfg;
    for (int g = 0; g < o->n_cfg; g++) res[g].status = -2, res[g].needle_marked = -1;
    if (!w->ready) {
        if (kvc_l2c_state_alloc_chunk(&m->cfg, KVC_LM_CHUNK, &w->s) != KVC_OK) return;
        /* kvzip: room for the haystack, the instruction and the haystack again */
        const int cap = rc->kvzip ? rc->max_context + rc->n_ask + rc->kvzip_chunk : rc->max_context;
        if ((rc->kvzip || rc->oracle || rc->surprisal) &&
            !(w->marks = malloc((size_t)m->cfg.n_layers * (size_t)m->cfg.n_kv_heads * (size_t)rc->max_context)))
            return;
        if ((rc->pooled || rc->surprisal) && !(w->pooled = malloc((size_t)rc->max_context * sizeof(float)))) return;
        if (!rc->stream_prefill && kvc_kv_record_alloc(&w->rec, &m->cfg, cap)) return;
        w->rec.want_surprise = rc->surprisal; /* after the alloc, which zeroes the record */
        if (rc->sentences) {
            w->order = malloc((size_t)rc->max_context * sizeof(int));
            w->sent_from = malloc((size_t)rc->max_context * sizeof(int));
            w->sent_to = malloc((size_t)rc->max_context * sizeof(int));
            if (!w->order || !w->sent_from || !w->sent_to) return;
        }
        w->ready = 1;
    }
    const int nh = it->pk.n_hay;
    if (!rc->stream_prefill && kvc_kv_record_prefill(&w->rec, m, &w->s, it->toks, nh) != KVC_OK) {
        fprintf(stderr, "kvc bench recall: full-attention prefill failed\n");
        return;
    }
    if (rc->surprisal) memcpy(w->pooled, w->rec.surprise, (size_t)nh * sizeof(float));
    if (rc->sentences) sentence_spans(rc->lm, it->toks, nh, w->pooled, w);
    if (rc->kvzip) {
        if (kvc_kv_record_reconstruct(&w->rec, m, &w->s, it->toks, nh, rc->ask_ids, rc->n_ask, rc->kvzip_chunk) !=
            KVC_OK) {
            fprintf(stderr, "kvc bench recall: the KVzip reconstruction pass failed\n");
            return;
        }
        if (rc->pooled) kvzip_pool(&w->rec, nh, w->pooled);
    }
    for (int g = 0; g < o->n_cfg; g++) {
        kvc_stream_config sc;
        if (kvc_bench_stream(o, &o->cfg[g], &m->cfg, it->context, it->context, &sc)) {
            res[g].status = -1;
            continue;
        }
        kvc_cache *cache;
        void *arena = kvc_bench_cache_new(o, &o->cfg[g], &m->cfg, it->context, it->context, &cache, NULL);
        if (!arena) continue;
        /* H2O / TOVA score tokens by the attention they receive, so their
           prompt goes through the cache even under the exact protocol */
        kvc_status st =
            rc->stream_prefill || kvc_method_observes(sc.method)
                ? kvc_lm_feed(m, &w->s, it->toks, nh, 0, kvc_l2c_cache_attention, cache, NULL, NULL, NULL, NULL)
            : kvc_kv_record_prefill_queries(&w->rec, cache) != KVC_OK ? KVC_E_STATE
            : (rc->kvzip || rc->oracle || rc->surprisal) &&
                    kvzip_marks(&w->rec, cache, nh, w->marks, &it->pk, rc->oracle,
                                rc->pooled || rc->surprisal ? w->pooled : NULL, rc->sentences ? w : NULL,
                                &res[g].needle_marked)
                ? kvc_kv_record_replay_marked(&w->rec, cache, nh, w->marks)
                : kvc_kv_record_replay(&w->rec, cache, nh);
        if (st == KVC_OK) st = ask(rc, &w->s, it, cache, &res[g]);
        if (st != KVC_OK)
            fprintf(stderr, "\nkvc bench recall: %s at %d tokens failed: %s\n", o->cfg[g].label, it->context,
                    kvc_status_str(st));
        uint64_t el, peak;
        if (kvc_cache_get_usage_bytes(cache, &el, &peak) == KVC_OK) res[g].peak_bytes = peak;
        free(arena);
    }
    char what[64];
    snprintf(what, sizeof what, "%d tokens, depth %d%%", it->context, it->depth_pct);
    kvc_bench_progress_add(&rc->prog, (double)it->context, what);
}

/* One prompt through every configuration, then its CSV rows (also when a
 * setup step failed: those rows say "error"). */
static void run_item(void *vctx, int idx, int wid)
{
    run_configs(vctx, idx, wid);
    write_item_rows((recall_ctx *)vctx, idx);
}

/* The CSV rows of one prompt, every configuration, flushed at once. */
static void write_item_rows(recall_ctx *rc, int idx)
{
    if (!rc->csv) return;
    const kvc_bench_opts *o = rc->o;
    const kvc_l2c_config *mc = &rc->lm->m.cfg;
    const item *it = &rc->items[idx];
    pthread_mutex_lock(&rc->csv_mu);
    for (int g = 0; g < o->n_cfg; g++) {
        const outcome *r = &rc->out[(size_t)idx * o->n_cfg + g];
        kvc_stream_config sc;
        kvc_bench_stream(o, &o->cfg[g], mc, it->context, it->context, &sc);
        char marked[16] = "";
        if (r->needle_marked >= 0) snprintf(marked, sizeof marked, "%d", r->needle_marked);
        const double exact_bytes = (double)(it->pk.n_hay + it->pk.n_question) * mc->n_layers * mc->n_kv_heads * 2.0 *
                                   (mc->dim / mc->n_heads) * sizeof(float);
        fprintf(rc->csv, "%s,%g,%u,%d,%d,%d,%s,%d,%d,%s,%s,%" PRIu64 ",%.0f,%s,%s\n", kvc_method_name(o->cfg[g].method),
                o->cfg[g].pct, sc.budget, it->context, it->depth_pct, it->trial, it->pk.key, it->pk.needle_tok,
                it->pk.n_hay, r->answer,
                r->status == 1    ? "1"
                : r->status == 0  ? "0"
                : r->status == -1 ? "n/a"
                                  : "error",
                r->peak_bytes, exact_bytes, marked, r->text);
    }
    fflush(rc->csv);
    pthread_mutex_unlock(&rc->csv_mu);
}

/* The 95% Wilson score interval of ok successes in n trials, in percent
 * (it stays inside [0, 100] and is honest at 0/n and n/n, where the normal
 * approximation collapses to a point). */
static void wilson95(int ok, int n, double *lo, double *hi)
{
    const double z = 1.959963984540054, p = (double)ok / n, z2n = z * z / n;
    const double mid = (p + z2n / 2.0) / (1.0 + z2n);
    const double half = z * sqrt(p * (1.0 - p) / n + z2n / (4.0 * n)) / (1.0 + z2n);
    *lo = 100.0 * (mid - half < 0.0 ? 0.0 : mid - half);
    *hi = 100.0 * (mid + half > 1.0 ? 1.0 : mid + half);
}

/* One cell of the table: "ok/n [lo,hi]", or why there is no number. */
static void recall_cell(char *cell, size_t cap, int ok, int n, int na, int failed)
{
    double lo, hi;
    if (failed)
        snprintf(cell, cap, "error");
    else if (n == 0)
        snprintf(cell, cap, na ? "n/a" : "-");
    else
        wilson95(ok, n, &lo, &hi), snprintf(cell, cap, "%d/%d [%.0f,%.0f]", ok, n, lo, hi);
}

static void print_table(const recall_ctx *rc, const int *ctxs, int n_ctx)
{
    const kvc_bench_opts *o = rc->o;
    printf("\npasskey recall: correct / trials per context length, [95%% Wilson interval, %%] (prefill %s)\n%-26s",
           rc->stream_prefill ? "through each cache"
                              : "at full attention, then compressed; h2o and tova: through the cache, whose "
                                "attention they score",
           "method budget");
    for (int c = 0; c < n_ctx; c++) printf(" %16d", ctxs[c]);
    printf(" %16s\n", "all");
    for (int g = 0; g < o->n_cfg; g++) {
        printf("%-26s", o->cfg[g].label);
        int all_ok = 0, all_n = 0, all_failed = 0;
        for (int c = 0; c <= n_ctx; c++) {
            if (c == n_ctx) { /* the row's total */
                char cell[40];
                recall_cell(cell, sizeof cell, all_ok, all_n, 0, all_failed);
                printf(" %16s", cell);
                break;
            }
            int ok = 0, n = 0, na = 0, failed = 0;
            for (int i = 0; i < rc->n_items; i++) {
                if (rc->items[i].context != ctxs[c]) continue;
                const int st = rc->out[(size_t)i * o->n_cfg + g].status;
                if (st == -1)
                    na++;
                else if (st == -2)
                    failed++;
                else
                    ok += st, n++;
            }
            char cell[40];
            recall_cell(cell, sizeof cell, ok, n, na, failed);
            printf(" %16s", cell);
            all_ok += ok, all_n += n, all_failed += failed;
        }
        printf("\n");
    }
    /* why a cell is n/a: the library's reason, once per configuration */
    const kvc_l2c_config *mc = &rc->lm->m.cfg;
    for (int g = 0; g < o->n_cfg; g++)
        for (int c = 0; c < n_ctx; c++) {
            kvc_stream_config sc;
            const char *why = kvc_bench_stream(o, &o->cfg[g], mc, ctxs[c], ctxs[c], &sc);
            if (why) printf("  n/a: %s at %d tokens: %s\n", o->cfg[g].label, ctxs[c], why);
        }
}

static void recall_usage(FILE *f)
{
    fprintf(f,
            "usage: kvc bench recall [--contexts 1024,2048,4096,8192] [--depths 10,30,50,70,90] [options]\n"
            "  Passkey retrieval: a random 5-digit key (seeded) at each depth (percent of the\n"
            "  haystack) of each context length (prompt + answer tokens); greedy answer of at most\n"
            "  %d tokens; correct when its first run of digits is the key. Prints accuracy per\n"
            "  method x budget x context; CSV: one row per answer. Under --prefill exact every cache\n"
            "  first gets the queries of the haystack's last 32 positions (snapkv's observation window,\n"
            "  without the question); h2o and tova prefill through the cache (they score its attention).\n%s",
            MAX_ANSWER, kvc_bench_shared_usage);
}

int kvc_bench_recall(int argc, char **argv)
{
    kvc_bench_opts o;
    kvc_bench_opts_init(&o, "recall");
    int ctxs[KVC_BENCH_MAX_LIST] = {1024, 2048, 4096, 8192}, n_ctx = 4;
    int depths[KVC_BENCH_MAX_LIST] = {10, 30, 50, 70, 90}, n_dep = 5;
    uint64_t trials = 1;
    int stream_prefill = 0;
    const char *contexts = NULL, *depth_list = NULL, *prefill = NULL, *haystack = NULL, *marks = NULL;
    kvc_flag fl[24];
    size_t nf = kvc_bench_flags_add(&o, fl, 0);
    fl[nf++] = (kvc_flag){
        "--contexts", 's', &contexts, 0, 0, NULL, "N,..\tcontext lengths in tokens (default 1024,2048,4096,8192)"};
    fl[nf++] = (kvc_flag){"--depths",
                          's',
                          &depth_list,
                          0,
                          0,
                          NULL,
                          "P,..\tneedle depths, percent of the haystack (default 10,30,50,70,90)"};
    fl[nf++] = (kvc_flag){"--trials", 'u', &trials, 1, 1000, NULL, "N\tkeys per (context, depth) (default 1)"};
    fl[nf++] = (kvc_flag){
        "--prefill", 's', &prefill, 0, 0, NULL, "exact|stream\thow the prompt enters each cache (default exact)"};
    fl[nf++] =
        (kvc_flag){"--haystack",
                   's',
                   &haystack,
                   0,
                   0,
                   NULL,
                   "FILE\tnatural text instead of the repeated filler sentences (blocks of ~100 bytes, in order)"};
    fl[nf++] = (kvc_flag){"--protect-marks",
                          's',
                          &marks,
                          0,
                          0,
                          NULL,
                          "outliers|kvzip|kvzip-pooled|surprisal|needle\twhat centres the protected spans (--protect): "
                          "key outliers (default); KVzip's reconstruction scores instead, each stream its own top "
                          "tokens (--prefill exact; an extra pass), or one ranking of the scores summed over every "
                          "stream (kvzip-pooled); surprisal: the tokens the model predicted worst during the "
                          "prefill; sentences: the sentences of highest mean surprisal, whole; needle: the needle's "
                          "own tokens (a diagnostic bound, not a method)"};
    const int prc = kvc_cli_parse("bench recall", argc, argv, fl, nf, &o.mo, recall_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (contexts && (n_ctx = kvc_bench_int_list("--contexts", contexts, 64, 1 << 20, ctxs, KVC_BENCH_MAX_LIST)) < 0)
        return 2;
    if (depth_list && (n_dep = kvc_bench_int_list("--depths", depth_list, 0, 100, depths, KVC_BENCH_MAX_LIST)) < 0)
        return 2;
    if (prefill) {
        if (strcmp(prefill, "exact") && strcmp(prefill, "stream")) {
            fprintf(stderr, "kvc bench recall: --prefill is exact or stream\n");
            return 2;
        }
        stream_prefill = !strcmp(prefill, "stream");
    }
    int kvzip = 0, oracle = 0, pooled = 0, surprisal = 0, sentences = 0;
    if (marks) {
        if (strcmp(marks, "outliers") && strcmp(marks, "kvzip") && strcmp(marks, "kvzip-pooled") &&
            strcmp(marks, "surprisal") && strcmp(marks, "sentences") && strcmp(marks, "needle")) {
            fprintf(
                stderr,
                "kvc bench recall: --protect-marks is outliers, kvzip, kvzip-pooled, surprisal, sentences or needle\n");
            return 2;
        }
        pooled = !strcmp(marks, "kvzip-pooled"), sentences = !strcmp(marks, "sentences");
        surprisal = sentences || !strcmp(marks, "surprisal");
        kvzip = pooled || !strcmp(marks, "kvzip"), oracle = !strcmp(marks, "needle");
        if ((kvzip || oracle || surprisal) && stream_prefill) {
            fprintf(stderr, "kvc bench recall: --protect-marks %s marks the exact prefill: not with --prefill stream\n",
                    marks);
            return 2;
        }
    }
    if (kvc_bench_finish(&o)) return 2;
    if (haystack) {
        char *text = kvc_lm_read_text("bench recall", haystack);
        if (!text) return 2;
        const int bad = kvc_passkey_set_haystack(text);
        free(text);
        if (bad) {
            fprintf(stderr, "kvc bench recall: cannot use '%s' as the haystack (unreadable or empty)\n", haystack);
            return 2;
        }
    }
    kvc_lm lm;
    if (kvc_bench_open(&o, &lm)) return 1;
    recall_ctx rc;
    memset(&rc, 0, sizeof rc);
    rc.o = &o, rc.lm = &lm, rc.stream_prefill = stream_prefill, rc.kvzip = kvzip, rc.oracle = oracle,
    rc.pooled = pooled, rc.surprisal = surprisal, rc.sentences = sentences;
    pthread_mutex_init(&rc.csv_mu, NULL);
    /* KVzip's instruction (its paper's "Repeat the previous context"), then the haystack again */
    static const char repeat_text[] = "\n\nRepeat the previous context exactly.\n";
    int ask_ids[sizeof repeat_text + 3];
    if (kvzip) {
        rc.n_ask =
            kvc_lm_encode(&lm, "the KVzip instruction", repeat_text, ask_ids, (int)(sizeof ask_ids / sizeof *ask_ids));
        if (rc.n_ask < 1) {
            kvc_lm_close(&lm);
            return 1;
        }
        rc.ask_ids = ask_ids;
        rc.kvzip_chunk = KVC_KVZIP_CHUNK;
        for (int c = 0; c < n_ctx; c++) {
            const int room = lm.m.cfg.seq_len - ctxs[c] - rc.n_ask;
            if (room < rc.kvzip_chunk) rc.kvzip_chunk = room;
            if (ctxs[c] < rc.kvzip_chunk) rc.kvzip_chunk = ctxs[c];
        }
        if (rc.kvzip_chunk < KVC_KVZIP_MIN_CHUNK) {
            fprintf(stderr,
                    "kvc bench recall: --protect-marks kvzip repeats the context in chunks after it: the model's %d "
                    "positions leave fewer than %d beyond the longest context and the instruction\n",
                    lm.m.cfg.seq_len, KVC_KVZIP_MIN_CHUNK);
            kvc_lm_close(&lm);
            return 2;
        }
    }
    for (int c = 0; c < n_ctx; c++) {
        if (ctxs[c] > lm.m.cfg.seq_len) {
            fprintf(stderr, "kvc bench recall: context %d is beyond the model's %d tokens\n", ctxs[c],
                    lm.m.cfg.seq_len);
            kvc_lm_close(&lm);
            return 2;
        }
        if (ctxs[c] > rc.max_context) rc.max_context = ctxs[c];
    }
    FILE *csv = NULL;
    int ret = 1;
    rc.n_items = n_ctx * n_dep * (int)trials;
    rc.items = calloc((size_t)rc.n_items, sizeof(item));
    rc.out = calloc((size_t)rc.n_items * o.n_cfg, sizeof(outcome));
    rc.workers = calloc((size_t)o.threads, sizeof(worker));
    if (!rc.items || !rc.out || !rc.workers) goto done;
    if (kvc_bench_csv_open(&o, &csv)) goto done;
    printf("kvc bench recall: seed %" PRIu64
           ", %d contexts x %d depths x %d trials, %d configurations, %d threads, kernels %s\n",
           o.seed, n_ctx, n_dep, (int)trials, o.n_cfg, o.threads, kvc_l2c_kernels()->name);
    for (int c = 0; c < n_ctx; c++) kvc_bench_print_bytes(&o, &lm.m.cfg, ctxs[c], ctxs[c]);
    /* items, longest context first (they take longest), keys from the seed */
    uint64_t rng = o.seed;
    int k = 0;
    double work = 0;
    for (int c = n_ctx - 1; c >= 0; c--)
        for (int d = 0; d < n_dep; d++)
            for (int t = 0; t < (int)trials; t++, k++) {
                item *it = &rc.items[k];
                it->context = ctxs[c], it->depth_pct = depths[d], it->trial = t;
                it->key = 10000u + (unsigned)(splitmix(&rng) % 90000u);
                it->toks = malloc((size_t)it->context * sizeof(int));
                if (!it->toks ||
                    kvc_passkey_build(&lm, it->context, MAX_ANSWER, depths[d] / 100.0, it->key, it->toks, &it->pk))
                    goto done;
                if (it->pk.n_question > KVC_LM_CHUNK) {
                    fprintf(stderr, "kvc bench recall: question longer than a chunk\n");
                    goto done;
                }
                work += it->context;
            }
    if (csv) {
        fprintf(csv, "method,budget_pct,budget_tokens,context,depth_pct,trial,key,needle_token,haystack_tokens,"
                     "answer,correct,cache_peak_bytes,exact_cache_bytes,needle_marked_streams,said\n");
        fflush(csv);
        rc.csv = csv; /* each prompt's rows as it finishes (in finishing order) */
    }
    kvc_bench_progress_start(&rc.prog, "recall", rc.n_items, work, o.quiet);
    kvc_bench_parallel(o.threads, rc.n_items, run_item, &rc);
    kvc_bench_progress_end(&rc.prog);
    print_table(&rc, ctxs, n_ctx);
    ret = 0;
    for (int i = 0; i < rc.n_items * o.n_cfg; i++)
        if (rc.out[i].status == -2) ret = 1;
done:
    if (csv) fclose(csv);
    for (int i = 0; rc.items && i < rc.n_items; i++) free(rc.items[i].toks);
    for (int w = 0; rc.workers && w < o.threads; w++) {
        kvc_l2c_state_free(&rc.workers[w].s);
        kvc_kv_record_free(&rc.workers[w].rec);
        free(rc.workers[w].marks), free(rc.workers[w].pooled);
        free(rc.workers[w].order), free(rc.workers[w].sent_from), free(rc.workers[w].sent_to);
    }
    free(rc.items), free(rc.out), free(rc.workers);
    kvc_lm_close(&lm);
    return ret;
}
