/* Panel packing, the scalar product and the run-time choice of implementation. */
#define _POSIX_C_SOURCE 200809L
#include "gemm.h"
#include "gemm_quant.h"
#include "kvc/kvc_kernels.h"
#include "pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t kvc_gemm_packed_floats(size_t rows, size_t cols)
{
    return (rows + KVC_GEMM_PANEL - 1) / KVC_GEMM_PANEL * KVC_GEMM_PANEL * cols;
}

void kvc_gemm_pack(const float *w, size_t rows, size_t cols, float *packed)
{
    const size_t P = KVC_GEMM_PANEL, panels = (rows + P - 1) / P;
    for (size_t p = 0; p < panels; p++) {
        float *dst = packed + p * P * cols;
        for (size_t j = 0; j < cols; j++)
            for (size_t i = 0; i < P; i++) {
                const size_t r = p * P + i;
                dst[j * P + i] = r < rows ? w[r * cols + j] : 0.0f;
            }
    }
}

/* One panel for one token: P sums over j in order (the compiler may vectorise
 * across the P independent sums; no reassociation happens without -ffast-math). */
void kvc_gemm__scalar(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
                      size_t ldy)
{
    const size_t P = KVC_GEMM_PANEL, panels = (rows + P - 1) / P;
    for (size_t p = 0; p < panels; p++) {
        const float *wp = packed + p * P * cols;
        const size_t live = rows - p * P < P ? rows - p * P : P;
        for (size_t t = 0; t < n; t++) {
            float acc[KVC_GEMM_PANEL] = {0};
            const float *xt = x + t * ldx;
            for (size_t j = 0; j < cols; j++) {
                const float xj = xt[j];
                for (size_t i = 0; i < P; i++) acc[i] += wp[j * P + i] * xj;
            }
            memcpy(y + t * ldy + p * P, acc, live * sizeof(float));
        }
    }
}

typedef void (*gemm_fn)(const float *, size_t, size_t, const float *, size_t, size_t, float *, size_t);

static struct {
    const char *name;
    gemm_fn fn;
} g_impl = {"scalar", kvc_gemm__scalar};
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The project's one run-time CPU detection (kvc_cpu_features, which also
 * picks the attention kernel table). */
static int have(const char *name)
{
#if KVC_GEMM_X86
    const uint32_t f = kvc_cpu_features();
    if (!strcmp(name, "avx512")) return (f & KVC_CPU_AVX512) != 0;
    if (!strcmp(name, "avx2")) return (f & KVC_CPU_AVX2) != 0;
#endif
    return !strcmp(name, "scalar");
}

static void set(const char *name)
{
    (void)name; /* only the x86 paths are named */
#if KVC_GEMM_X86
    if (!strcmp(name, "avx512")) {
        g_impl.name = "avx512", g_impl.fn = kvc_gemm__avx512;
        return;
    }
    if (!strcmp(name, "avx2")) {
        g_impl.name = "avx2", g_impl.fn = kvc_gemm__avx2;
        return;
    }
#endif
    g_impl.name = "scalar", g_impl.fn = kvc_gemm__scalar;
}

static void choose(void)
{
    const char *want = getenv("KVC_GEMM");
    if (want && have(want)) {
        set(want);
        return;
    }
    if (have("avx512"))
        set("avx512");
    else if (have("avx2"))
        set("avx2");
    else
        set("scalar");
}

int kvc_gemm_select(const char *name)
{
    pthread_once(&g_once, choose);
    if (!name || !have(name)) return -1;
    set(name);
    return 0;
}

const char *kvc_gemm_impl(void)
{
    pthread_once(&g_once, choose);
    return g_impl.name;
}

/* With worker threads (pool.h): the panels cut into one range per thread.
 * Each output element is the same one sum whoever computes it, so the result
 * does not depend on the thread count. */
typedef struct gemm_split {
    const float *packed, *x;
    size_t rows, cols, ldx, n, ldy, panels, parts;
    float *y;
    int qtype; /* KVC_QPANEL_*: quantised panels in qpanels */
    const uint8_t *qpanels;
} gemm_split;

/* The quantised panels through the implementation kvc_gemm uses: the scalar
 * one on the scalar path, else the AVX2 one (the same FMA chains as the AVX2
 * and AVX-512 f32 products, so the same bits). */
static void gemm_q_impl(int type, const uint8_t *qp, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                        float *y, size_t ldy)
{
    if (g_impl.fn == kvc_gemm__scalar)
        kvc_gemm_q__scalar(type, qp, rows, cols, x, ldx, n, y, ldy);
    else
        kvc_gemm_q__avx2(type, qp, rows, cols, x, ldx, n, y, ldy);
}

static void gemm_part(void *ctx, size_t i)
{
    const gemm_split *g = (const gemm_split *)ctx;
    const size_t P = KVC_GEMM_PANEL, p0 = g->panels * i / g->parts, p1 = g->panels * (i + 1) / g->parts;
    if (p1 <= p0) return;
    const size_t r0 = p0 * P, r1 = p1 * P < g->rows ? p1 * P : g->rows;
    if (g->qtype)
        gemm_q_impl(g->qtype, g->qpanels + p0 * (g->cols / 32) * kvc_qpanel_block_bytes(g->qtype), r1 - r0, g->cols,
                    g->x, g->ldx, g->n, g->y + r0, g->ldy);
    else
        g_impl.fn(g->packed + p0 * P * g->cols, r1 - r0, g->cols, g->x, g->ldx, g->n, g->y + r0, g->ldy);
}

void kvc_gemm(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y, size_t ldy)
{
    pthread_once(&g_once, choose);
    const size_t panels = (rows + KVC_GEMM_PANEL - 1) / KVC_GEMM_PANEL, threads = (size_t)kvc_pool_threads();
    /* split only products big enough to pay for waking the workers (~64k multiply-adds each) */
    if (threads > 1 && panels >= 2 && rows * cols * n >= 65536u * threads) {
        const gemm_split g = {packed, x, rows, cols, ldx, n, ldy, panels, threads < panels ? threads : panels,
                              y,      0, NULL};
        kvc_pool_run(g.parts, gemm_part, (void *)&g);
        return;
    }
    g_impl.fn(packed, rows, cols, x, ldx, n, y, ldy);
}

void kvc_gemm_q(int type, const uint8_t *panels, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                float *y, size_t ldy)
{
    pthread_once(&g_once, choose);
    const size_t np = (rows + KVC_GEMM_PANEL - 1) / KVC_GEMM_PANEL, threads = (size_t)kvc_pool_threads();
    if (threads > 1 && np >= 2 && rows * cols * n >= 65536u * threads) {
        const gemm_split g = {NULL, x, rows, cols, ldx, n, ldy, np, threads < np ? threads : np, y, type, panels};
        kvc_pool_run(g.parts, gemm_part, (void *)&g);
        return;
    }
    gemm_q_impl(type, panels, rows, cols, x, ldx, n, y, ldy);
}

#if !KVC_GEMM_X86
/* Not x86-64: the SIMD entry points exist (the headers declare them) and are the scalar path. */
void kvc_gemm_q__avx2(int type, const uint8_t *panels, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                      float *y, size_t ldy)
{
    kvc_gemm_q__scalar(type, panels, rows, cols, x, ldx, n, y, ldy);
}
void kvc_gemm__avx2(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
                    size_t ldy)
{
    kvc_gemm__scalar(packed, rows, cols, x, ldx, n, y, ldy);
}
void kvc_gemm__avx512(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
                      size_t ldy)
{
    kvc_gemm__scalar(packed, rows, cols, x, ldx, n, y, ldy);
}
#endif
