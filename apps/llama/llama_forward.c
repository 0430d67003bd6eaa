/* The decoder's forward pass (RMSNorm, RoPE, GQA, SwiGLU, shared or separate
 * classifier) over a chunk of tokens, layer by layer. The products of a layer
 * run on the whole chunk (gemm.h: the weights are read once per chunk instead
 * of once per token); attention goes token by token, in order, through the
 * hook (the cache manager), so the cache sees exactly what single steps show. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "gemm_quant.h"
#include "llama2c.h"
#include "kvc/kvc_attend.h"
#include "pool.h"
#ifdef KVC_WITH_CUDA_TABLE
#include "kvc/kvc_cuda.h"
#endif

#define KVC_L2C_MAX_CHUNK 4096

kvc_status kvc_l2c_state_alloc_chunk(const kvc_l2c_config *c, int chunk, kvc_l2c_state *s)
{
    memset(s, 0, sizeof *s);
    if (chunk < 1 || chunk > KVC_L2C_MAX_CHUNK) return KVC_E_ARG;
    const size_t n = (size_t)chunk, D = (size_t)c->dim, H = (size_t)c->hidden_dim;
    const size_t hs = D / (size_t)c->n_heads, kvd = hs * (size_t)c->n_kv_heads;
    s->chunk = chunk;
    s->x = malloc(n * D * sizeof(float));
    s->xb = malloc(n * D * sizeof(float));
    s->xb2 = malloc(n * D * sizeof(float));
    s->qkv = malloc(n * (D + 2 * kvd) * sizeof(float));
    s->att_out = malloc(n * D * sizeof(float));
    s->hb = malloc(n * 2 * H * sizeof(float));
    s->rope = malloc(n * hs * sizeof(float));
    s->logits = calloc(n * (size_t)c->vocab_size, sizeof(float));
    if (!s->x || !s->xb || !s->xb2 || !s->qkv || !s->att_out || !s->hb || !s->rope || !s->logits) {
        kvc_l2c_state_free(s);
        return KVC_E_CAPACITY;
    }
    return KVC_OK;
}

kvc_status kvc_l2c_state_alloc(const kvc_l2c_config *c, kvc_l2c_state *s) { return kvc_l2c_state_alloc_chunk(c, 1, s); }

void kvc_l2c_state_free(kvc_l2c_state *s)
{
    free(s->x), free(s->xb), free(s->xb2), free(s->qkv), free(s->att_out), free(s->hb), free(s->rope);
    free(s->logits);
    memset(s, 0, sizeof *s);
}

kvc_cache_config kvc_l2c_cache_config(const kvc_l2c_config *c, const kvc_stream_config *stream)
{
    kvc_cache_config cc;
    memset(&cc, 0, sizeof cc);
    cc.n_layers = (uint32_t)c->n_layers;
    cc.n_heads = (uint32_t)c->n_heads;
    cc.n_kv_heads = (uint32_t)c->n_kv_heads;
    cc.head_dim = (uint32_t)(c->dim / c->n_heads);
    cc.stream = *stream;
    cc.policy = KVC_BUDGET_UNIFORM;
    return cc;
}

/* The best table this CPU runs (KVC_KERNELS=ref|avx2|cuda forces one), chosen
 * once per process: the cache calls run per layer per token, and the choice
 * reads the environment and the CPU id. The tables' method decisions are the
 * same; only attention sums differ. */
static const kvc_kernels *g_kernels;
static pthread_once_t g_kernels_once = PTHREAD_ONCE_INIT;
#ifdef KVC_WITH_CUDA_TABLE
static int g_kernels_cuda_gpu; /* the cuda table on a GPU: arenas in managed memory */
#endif
static void choose_kernels(void)
{
#ifdef KVC_WITH_CUDA_TABLE
    /* KVC_KERNELS=cuda: the CUDA table of accel/cuda (on the CPU SIMT runtime
       in builds without a GPU: slow, for tests and demos) */
    const char *want = getenv("KVC_KERNELS");
    if (want != NULL && strcmp(want, "cuda") == 0) {
        g_kernels = kvc_kernels_cuda();
        if (g_kernels != NULL) {
            g_kernels_cuda_gpu = !kvc_cuda_is_cpu_runtime();
            return;
        }
        fprintf(stderr, "kvc: KVC_KERNELS=cuda but no CUDA device can be used; using the CPU tables\n");
    }
#endif
    g_kernels = kvc_kernels_best();
}

const char *kvc_l2c_kernels_env_problem(char *buf, size_t cap)
{
    const char *want = getenv("KVC_KERNELS");
    if (want == NULL || *want == '\0') return NULL;
#ifdef KVC_WITH_CUDA_TABLE
    if (strcmp(want, "cuda") == 0) return NULL; /* said at the first use when no device can run it */
#endif
    const kvc_kernels *t = kvc_kernels_by_name(want);
    const uint32_t have = kvc_cpu_features();
    if (t != NULL && (t->needs & have) == t->needs) return NULL;
    size_t n = (size_t)snprintf(buf, cap, "KVC_KERNELS=%s %s; this build runs here:", want,
                                t ? "needs CPU features this machine lacks" : "names no kernel table");
    for (size_t i = 0; i < kvc_kernels_count() && n < cap; i++) {
        const kvc_kernels *k = kvc_kernels_at(i);
        if ((k->needs & have) == k->needs) n += (size_t)snprintf(buf + n, cap - n, " %s", k->name);
    }
#ifdef KVC_WITH_CUDA_TABLE
    if (n < cap) snprintf(buf + n, cap - n, " cuda");
#endif
    return buf;
}

void *kvc_l2c_arena_alloc(size_t bytes)
{
    pthread_once(&g_kernels_once, choose_kernels);
#ifdef KVC_WITH_CUDA_TABLE
    if (g_kernels_cuda_gpu) return kvc_cuda_alloc_shared(KVC_ALIGN_UP(bytes));
#endif
    return aligned_alloc(KVC_ARENA_ALIGN, KVC_ALIGN_UP(bytes ? bytes : 1));
}

void kvc_l2c_arena_free(void *arena)
{
#ifdef KVC_WITH_CUDA_TABLE
    if (g_kernels_cuda_gpu) {
        kvc_cuda_free_shared(arena);
        return;
    }
#endif
    free(arena);
}

const kvc_kernels *kvc_l2c_kernels(void)
{
    pthread_once(&g_kernels_once, choose_kernels);
    return g_kernels;
}

int kvc_l2c_set_threads(int n) { return kvc_pool_set_threads(n); }
int kvc_l2c_threads(void) { return kvc_pool_threads(); }

/* Split-K attend of one layer on the pool: task (h, p) answers kv head h's
 * query group over part p of its cache into its own state; the states of a
 * head are merged afterwards (kvc_attend_merge), flash-decoding style. The
 * buffers grow to the largest layer seen and are reused (the decoder runs one
 * step at a time). */
typedef struct split_attend {
    const kvc_cache *c;
    const kvc_kernels *kern;
    uint32_t layer;
    const float *q;
    size_t group, hd, parts, state_per_task, work_per_task;
    double *state;
    unsigned char *work;
    kvc_status *rc;
} split_attend;

static void split_task(void *ctx, size_t i)
{
    const split_attend *a = (const split_attend *)ctx;
    const size_t h = i / a->parts, p = i % a->parts;
    const kvc_stream *st = kvc_cache_get_stream(a->c, a->layer, (uint32_t)h);
    a->rc[i] =
        kvc_stream_attend_part(st, a->kern, a->q + h * a->group * a->hd, a->group, p, a->parts,
                               a->state + i * a->state_per_task, a->work + i * a->work_per_task, a->work_per_task);
}

static struct {
    double *state;
    unsigned char *work;
    kvc_status *rc;
    size_t state_cap, work_cap, rc_cap;
} g_split;

static int grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    void *n = realloc(*p, need);
    if (!n) return -1;
    *p = n, *cap = need;
    return 0;
}

/* The observed attend's workspace, one per thread (benchmarks run one decoder
 * per worker thread), grown as the views grow. The buffers live in a global
 * table, so they stay reachable after their thread ends; a thread takes the
 * next slot the first time it needs one. */
#define KVC_OBSERVED_SLOTS 256
static struct {
    void *work;
    size_t cap;
} g_observed[KVC_OBSERVED_SLOTS];
static atomic_int g_observed_next;
static _Thread_local int g_observed_slot = -1;

/* Entries per part below which the split does not pay for itself (waking the
 * workers costs about what the attend of a few hundred entries does). */
static size_t g_split_min = 512;

void kvc_l2c_set_split_min(size_t entries) { g_split_min = entries > 0 ? entries : 1; }

kvc_status kvc_l2c_cache_attention(void *ctx, int layer, int pos, const float *q, const float *k, const float *v,
                                   float *out)
{
    kvc_cache *c = (kvc_cache *)ctx;
    const kvc_kernels *kern = kvc_l2c_kernels();
    (void)pos;
    kvc_status rc = kvc_cache_append(c, kern, (uint32_t)layer, k, v);
    if (rc != KVC_OK) return rc;
    if (kvc_cache_observes(c)) {
        /* H2O / TOVA choose from the attention they receive: one observed
           attend per kv head (serial: it writes the streams' scores) */
        const size_t wb = kvc_cache_attend_observed_work_bytes(c, (uint32_t)layer);
        if (wb == 0) return KVC_E_CORRUPT;
        if (g_observed_slot < 0) g_observed_slot = atomic_fetch_add(&g_observed_next, 1);
        if (g_observed_slot >= KVC_OBSERVED_SLOTS) return KVC_E_CAPACITY;
        const int o = g_observed_slot;
        if (grow(&g_observed[o].work, &g_observed[o].cap, wb)) return KVC_E_CAPACITY;
        return kvc_cache_attend_observed(c, kern, (uint32_t)layer, q, out, g_observed[o].work, g_observed[o].cap);
    }
    const size_t threads = (size_t)kvc_pool_threads();
    const kvc_stream *st0 = kvc_cache_get_stream(c, (uint32_t)layer, 0);
    if (threads < 2 || st0 == NULL || kvc_stream_view_entries(st0) < 2 * g_split_min)
        return kvc_cache_attend(c, kern, (uint32_t)layer, q, out);
    const kvc_cache_config *cc = kvc_cache_get_config(c);
    if (cc == NULL) return KVC_E_CORRUPT;
    const size_t hd = cc->head_dim, nkv = cc->n_kv_heads, group = cc->n_heads / nkv;
    size_t parts = kvc_stream_view_entries(st0) / g_split_min;
    if (parts > threads) parts = threads;
    if (parts * nkv < threads && nkv < threads) parts = (threads + nkv - 1) / nkv;
    const size_t tasks = nkv * parts, spt = group * KVC_ATTEND_STATE(hd);
    size_t wpt = 0;
    for (uint32_t h = 0; h < nkv; h++) {
        const size_t w = kvc_stream_attend_part_work_bytes(kvc_cache_get_stream(c, (uint32_t)layer, h), group);
        if (w > wpt) wpt = w;
    }
    wpt = (wpt + 63) / 64 * 64;
    if (grow((void **)&g_split.state, &g_split.state_cap, tasks * spt * sizeof(double)) ||
        grow((void **)&g_split.work, &g_split.work_cap, tasks * wpt) ||
        grow((void **)&g_split.rc, &g_split.rc_cap, tasks * sizeof(kvc_status)))
        return KVC_E_CAPACITY;
    split_attend a = {c, kern, (uint32_t)layer, q, group, hd, parts, spt, wpt, g_split.state, g_split.work, g_split.rc};
    kvc_pool_run(tasks, split_task, &a);
    for (size_t i = 0; i < tasks; i++)
        if (a.rc[i] != KVC_OK) return a.rc[i];
    for (size_t h = 0; h < nkv; h++) {
        const double *ptr[KVC_POOL_MAX];
        for (size_t p = 0; p < parts; p++) ptr[p] = a.state + (h * parts + p) * spt;
        rc = kvc_attend_merge(ptr, parts, group, hd, out + h * group * hd);
        if (rc != KVC_OK) return rc;
    }
    return KVC_OK;
}

/* llama2.c's RMSNorm, bit for bit; returns 1 when its sum of squares
 * overflowed float (|x| past ~1e19: the output would be all zeros, finite and
 * wrong), so the forward can stop there rather than hand out those logits. */
static int rmsnorm(float *o, const float *x, const float *w, int n, float eps)
{
    float ss = 0.0f;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss /= (float)n;
    ss += eps;
    const int overflow = !isfinite(ss);
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
    return overflow;
}

/* cos/sin of position pos for each pair (2i, 2i+1) of a head, as llama2.c
 * computes them (float powf / cosf / sinf), once per token for all layers. */
static void rope_table(float *cs, int pos, int hs, float base)
{
    for (int i = 0; i < hs; i += 2) {
        const float freq = 1.0f / powf(base, (float)i / (float)hs);
        const float val = (float)pos * freq;
        cs[i] = cosf(val), cs[i + 1] = sinf(val);
    }
}

/* Rotate consecutive pairs of every head of vec (n floats, heads of hs). */
static void rope_apply(float *vec, int n, int hs, const float *cs)
{
    for (int i = 0; i < n; i += 2) {
        const float fcr = cs[i % hs], fci = cs[i % hs + 1];
        const float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * fcr - v1 * fci;
        vec[i + 1] = v0 * fci + v1 * fcr;
    }
}

/* y = x W^T for matrix `kind` of layer l (l ignored for the classifier): the
 * quantised panels when the model kept them, else the f32 ones. */
static void matmul(const kvc_l2c_model *m, int kind, int l, size_t rows, size_t cols, const float *x, size_t ldx,
                   size_t n, float *y, size_t ldy)
{
    if (m->qtype[kind] != KVC_QPANEL_NONE) {
        const size_t off = kind == KVC_L2C_CLS ? m->q_off[kind] : (size_t)l * m->q_layer_bytes + m->q_off[kind];
        kvc_gemm_q(m->qtype[kind], m->qpacked + off, rows, cols, x, ldx, n, y, ldy);
        return;
    }
    const float *pk = m->packed + (size_t)l * m->packed_layer_floats;
    const float *w = kind == KVC_L2C_QKV   ? pk
                     : kind == KVC_L2C_WO  ? pk + m->off_wo
                     : kind == KVC_L2C_W13 ? pk + m->off_w13
                     : kind == KVC_L2C_W2  ? pk + m->off_w2
                                           : m->packed + m->off_cls;
    kvc_gemm(w, rows, cols, x, ldx, n, y, ldy);
}

/* Records where the forward went out of float's range; KVC_E_RANGE. */
static kvc_status nonfinite_at(kvc_l2c_state *s, int layer, int pos)
{
    s->bad_layer = layer, s->bad_pos = pos;
    return KVC_E_RANGE;
}

/* 1 when a row of x (rows of n floats) holds a NaN or Inf: records the
 * layer and the row's position in the state. */
static int nonfinite_row(const float *x, size_t rows, size_t n, kvc_l2c_state *s, int layer, int pos0)
{
    for (size_t r = 0; r < rows; r++)
        if (!kvc_all_finite(x + r * n, n)) {
            s->bad_layer = layer, s->bad_pos = pos0 + (int)r;
            return 1;
        }
    return 0;
}

kvc_status kvc_l2c_forward_chunk(const kvc_l2c_model *m, kvc_l2c_state *s, const int *tokens, int n, int pos0,
                                 kvc_l2c_attn_fn attn, void *ctx, int logits_from)
{
    const kvc_l2c_config *c = &m->cfg;
    if (n < 1 || n > s->chunk || pos0 < 0 || pos0 > INT32_MAX - n || tokens == NULL || logits_from < 0 ||
        logits_from > n)
        return KVC_E_ARG;
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size) return KVC_E_ARG;
    s->bad_layer = -1, s->bad_pos = -1;
    const int D = c->dim, hs = D / c->n_heads, kvd = hs * c->n_kv_heads, H = c->hidden_dim;
    const size_t qkv_w = (size_t)D + 2 * (size_t)kvd, N = (size_t)n;
    for (int t = 0; t < n; t++) {
        memcpy(s->x + (size_t)t * D, m->emb + (size_t)tokens[t] * D, (size_t)D * sizeof(float));
        rope_table(s->rope + (size_t)t * hs, pos0 + t, hs, c->rope_base);
    }
    for (int l = 0; l < c->n_layers; l++) {
        for (int t = 0; t < n; t++)
            if (rmsnorm(s->xb + (size_t)t * D, s->x + (size_t)t * D, m->rms_att + (size_t)l * D, D, c->norm_eps))
                return nonfinite_at(s, l, pos0 + t);
        matmul(m, KVC_L2C_QKV, l, qkv_w, (size_t)D, s->xb, (size_t)D, N, s->qkv, qkv_w);
        /* q, k and v overflowing here would reach the cache, which refuses
           them (KVC_E_NONFINITE): say which layer instead */
        if (nonfinite_row(s->qkv, N, qkv_w, s, l, pos0)) return KVC_E_RANGE;
        for (int t = 0; t < n; t++) {
            float *row = s->qkv + (size_t)t * qkv_w;
            rope_apply(row, D, hs, s->rope + (size_t)t * hs);       /* q */
            rope_apply(row + D, kvd, hs, s->rope + (size_t)t * hs); /* k */
            kvc_status rc = attn(ctx, l, pos0 + t, row, row + D, row + D + kvd, s->att_out + (size_t)t * D);
            if (rc != KVC_OK) return rc;
        }
        matmul(m, KVC_L2C_WO, l, (size_t)D, (size_t)D, s->att_out, (size_t)D, N, s->xb2, (size_t)D);
        for (size_t i = 0; i < N * (size_t)D; i++) s->x[i] += s->xb2[i];
        for (int t = 0; t < n; t++)
            if (rmsnorm(s->xb + (size_t)t * D, s->x + (size_t)t * D, m->rms_ffn + (size_t)l * D, D, c->norm_eps))
                return nonfinite_at(s, l, pos0 + t);
        matmul(m, KVC_L2C_W13, l, 2 * (size_t)H, (size_t)D, s->xb, (size_t)D, N, s->hb, 2 * (size_t)H);
        for (int t = 0; t < n; t++) {
            float *g = s->hb + (size_t)t * 2 * H; /* gate in [0, H), up in [H, 2H) */
            for (int i = 0; i < H; i++) {
                float val = g[i];
                val *= 1.0f / (1.0f + expf(-val)); /* SiLU */
                g[i] = val * g[H + i];
            }
        }
        matmul(m, KVC_L2C_W2, l, (size_t)D, (size_t)H, s->hb, 2 * (size_t)H, N, s->xb, (size_t)D);
        for (size_t i = 0; i < N * (size_t)D; i++) s->x[i] += s->xb[i];
        /* an overflow here would reach the logits as NaN, and a NaN logit
           reads as token 0 to an argmax: stop at the layer that made it */
        if (nonfinite_row(s->x, N, (size_t)D, s, l, pos0)) return KVC_E_RANGE;
    }
    if (logits_from < n) {
        for (int t = logits_from; t < n; t++)
            if (rmsnorm(s->xb + (size_t)t * D, s->x + (size_t)t * D, m->rms_final, D, c->norm_eps))
                return nonfinite_at(s, c->n_layers, pos0 + t);
        matmul(m, KVC_L2C_CLS, 0, (size_t)c->vocab_size, (size_t)D, s->xb + (size_t)logits_from * D, (size_t)D,
               (size_t)(n - logits_from), s->logits + (size_t)logits_from * c->vocab_size, (size_t)c->vocab_size);
        if (nonfinite_row(s->logits + (size_t)logits_from * c->vocab_size, (size_t)(n - logits_from),
                          (size_t)c->vocab_size, s, c->n_layers, pos0 + logits_from))
            return KVC_E_RANGE;
    }
    return KVC_OK;
}

const char *kvc_l2c_failure(const kvc_l2c_model *m, const kvc_l2c_state *s, kvc_status st, char *buf, size_t cap)
{
    if (st != KVC_E_RANGE || s->bad_layer < 0)
        snprintf(buf, cap, "%s", kvc_status_str(st));
    else if (s->bad_layer >= m->cfg.n_layers)
        snprintf(buf, cap, "the logits at position %d are not finite (NaN or Inf, or the final norm overflowed)",
                 s->bad_pos);
    else
        snprintf(buf, cap,
                 "layer %d at position %d left float's range (a NaN or Inf, or a norm's sum of squares overflowed): "
                 "the weights are too large for float",
                 s->bad_layer, s->bad_pos);
    return buf;
}

kvc_status kvc_l2c_forward(const kvc_l2c_model *m, kvc_l2c_state *s, int token, int pos, kvc_l2c_attn_fn attn,
                           void *ctx)
{
    return kvc_l2c_forward_chunk(m, s, &token, 1, pos, attn, ctx, 0);
}
