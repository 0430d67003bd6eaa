/* kvc floor: the error a storage type alone adds. Every token of a q/k/v
 * trace is held (nothing dropped) in each storage type the reference table
 * reads, and each position's attention over tokens 0..j is compared with
 * exact attention in double; KIVI4 holds the full blocks of 32 tokens in its
 * blocks and the open block's tokens in f16, as an in-order cache region
 * would. One line per type: the mean relative error over the positions
 * from --from on, and the bytes per token against f16. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_oracle/kvc_oracle.h"

#include "cli.h"
#include "trace.h"
#include "commands.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvc floor --trace DIR [--head H] [--from J]\n"
               "  Holds every token of the trace (query head H) in each storage type the reference\n"
               "  kernels read and prints the mean relative error ||z - z*|| / ||z*|| of the attention\n"
               "  outputs against exact attention in double over positions J..n-1, with the bytes per\n"
               "  token against f16. kivi4: full blocks of 32 tokens as KIVI blocks, the open block's\n"
               "  tokens in f16 (what an in-order region holds).\n");
}

/* Every token of the trace stored in type t (KIVI4: key blocks, int4 value
 * rows, and f16 rows of every token for the open block). */
typedef struct held {
    unsigned t;
    unsigned char *k, *v;   /* rows (KIVI4 keys: blocks) */
    unsigned char *hk, *hv; /* KIVI4: f16 rows of every token */
} held;

static int hold(const kvc_trace *tr, unsigned t, held *h)
{
    const kvc_kernels *ref = kvc_kernels_ref();
    const size_t n = tr->n, d = tr->d, dv = tr->dv;
    const unsigned vt = kvc_segment_value_dtype(t);
    memset(h, 0, sizeof *h);
    h->t = t;
    const size_t kbytes = t == KVC_DTYPE_KIVI4 ? (size_t)kvc_kivi4_key_bytes(n, d) : n * (size_t)kvc_row_bytes(t, d);
    h->k = malloc(kbytes), h->v = malloc(n * (size_t)kvc_row_bytes(vt, dv));
    if (!h->k || !h->v) return 1;
    if (t == KVC_DTYPE_KIVI4) {
        h->hk = malloc(n * (size_t)kvc_row_bytes(KVC_DTYPE_F16, d));
        h->hv = malloc(n * (size_t)kvc_row_bytes(KVC_DTYPE_F16, dv));
        if (!h->hk || !h->hv) return 1;
        for (size_t i = 0; i < n; i++) {
            ref->rows[KVC_DTYPE_F16].store(h->hk + i * kvc_row_bytes(KVC_DTYPE_F16, d), tr->k + i * d, d);
            ref->rows[KVC_DTYPE_F16].store(h->hv + i * kvc_row_bytes(KVC_DTYPE_F16, dv), tr->v + i * dv, dv);
        }
        for (size_t b = 0; b + KVC_KIVI_BLOCK <= n; b += KVC_KIVI_BLOCK)
            kvc_kivi4_key_block_store(h->k + b / KVC_KIVI_BLOCK * KVC_KIVI4_KEY_BLOCK_BYTES(d), tr->k + b * d,
                                      KVC_KIVI_BLOCK, d);
    } else {
        for (size_t i = 0; i < n; i++) ref->rows[t].store(h->k + i * kvc_row_bytes(t, d), tr->k + i * d, d);
    }
    for (size_t i = 0; i < n; i++) ref->rows[vt].store(h->v + i * kvc_row_bytes(vt, dv), tr->v + i * dv, dv);
    return 0;
}

static void held_free(held *h) { free(h->k), free(h->v), free(h->hk), free(h->hv); }

static void segment(kvc_segment *s, unsigned t, const void *k, const void *v, size_t n)
{
    memset(s, 0, sizeof *s);
    s->dtype = t, s->scale = 1.0, s->n = n, s->role = KVC_SET_BOTH;
    if (t == KVC_DTYPE_F32)
        s->keys = (const float *)k, s->values = (const float *)v;
    else
        s->keys_q = k, s->values_q = v;
}

/* The view of tokens 0..j held in h. */
static void view_at(const kvc_trace *tr, const held *h, size_t j, kvc_view *view)
{
    memset(view, 0, sizeof *view);
    view->d = tr->d, view->dv = tr->dv, view->beta = (float)(1.0 / sqrt((double)tr->d));
    if (h->t != KVC_DTYPE_KIVI4) {
        segment(&view->seg[view->n_seg++], h->t, h->k, h->v, j + 1);
        return;
    }
    const size_t full = (j + 1) / KVC_KIVI_BLOCK * KVC_KIVI_BLOCK;
    segment(&view->seg[view->n_seg++], KVC_DTYPE_KIVI4, h->k, h->v, full);
    segment(&view->seg[view->n_seg++], KVC_DTYPE_F16, h->hk + full * kvc_row_bytes(KVC_DTYPE_F16, tr->d),
            h->hv + full * kvc_row_bytes(KVC_DTYPE_F16, tr->dv), j + 1 - full);
}

int kvc_cmd_floor(int argc, char **argv)
{
    const char *dir = NULL;
    uint64_t head64 = 0, from64 = 0;
    kvc_flag fl[3];
    size_t nf = 0;
    fl[nf++] = (kvc_flag){"--trace", 's', &dir, 0, 0, NULL, "DIR\tthe trace: DIR/{q,k,v}.npy (kvc dump, kvc synth)"};
    fl[nf++] = (kvc_flag){"--head", 'u', &head64, 0, 4095, NULL, "H\tquery head (default 0)"};
    fl[nf++] = (kvc_flag){"--from", 'u', &from64, 0, 1u << 30, NULL, "J\tfirst scored position (default 0)"};
    const int prc = kvc_cli_parse("floor", argc, argv, fl, nf, NULL, usage);
    if (prc == 1) return 0;
    if (prc) return prc;
    const size_t head = (size_t)head64, from = (size_t)from64;
    if (dir == NULL) {
        fprintf(stderr, "kvc floor: --trace DIR is required\n");
        usage(stderr);
        return 2;
    }
    kvc_trace tr;
    if (kvc_trace_load(dir, head, &tr)) return 1;
    if (from >= tr.n) {
        fprintf(stderr, "kvc floor: --from %zu is past the trace's %zu tokens\n", from, tr.n);
        kvc_trace_free(&tr);
        return 2;
    }
    const kvc_kernels *kern = kvc_kernels_best();
    const size_t d = tr.d, dv = tr.dv, wb = (size_t)kvc_attend_work_bytes(1, 1, dv);
    double *work = malloc(wb), *ex = malloc(dv * sizeof(double));
    float *z = malloc(dv * sizeof(float));
    const double f16_token = (double)(kvc_row_bytes(KVC_DTYPE_F16, d) + kvc_row_bytes(KVC_DTYPE_F16, dv));
    int rc = 0;
    printf("kvc floor: trace %s head %zu, n %zu, d %zu, dv %zu, positions %zu..%zu, table %s\n", dir, head, tr.n, d, dv,
           from, tr.n - 1, kvc_kernels_name(kern));
    printf("%-6s %14s %12s\n", "dtype", "mean_rel_error", "bytes/f16");
    for (unsigned t = 0; t < KVC_DTYPE_COUNT && rc == 0; t++) {
        if (!kvc_kernels_support(kvc_kernels_ref(), t)) continue;
        held h;
        if (hold(&tr, t, &h)) {
            fprintf(stderr, "kvc floor: out of memory\n");
            held_free(&h);
            rc = 1;
            break;
        }
        double sum = 0.0;
        for (size_t j = from; j < tr.n; j++) {
            kvc_view view;
            view_at(&tr, &h, j, &view);
            const kvc_attend_batch b = {tr.q + j * d, 1, 1, 0, z, NULL, NULL};
            const kvc_status s = kern->attend_batch(kern, &view, &b, work, wb);
            if (s != KVC_OK) {
                fprintf(stderr, "kvc floor: %s attend at %zu: %s\n", kvc_dtype_name((kvc_dtype)t), j,
                        kvc_status_str(s));
                rc = 1;
                break;
            }
            kvc_exact_result er;
            kvc_exact_attention_f64(tr.q + j * d, tr.k, tr.v, j + 1, d, dv, (double)view.beta, ex, &er);
            double e2 = 0.0, a2 = 0.0;
            for (size_t c = 0; c < dv; c++) e2 += ((double)z[c] - ex[c]) * ((double)z[c] - ex[c]), a2 += ex[c] * ex[c];
            sum += a2 > 0.0 ? sqrt(e2 / a2) : 0.0;
        }
        /* bytes per token of a long context: KIVI4's keys at 20 d per 32 tokens, values int4 rows */
        const double token = t == KVC_DTYPE_KIVI4 ? (double)KVC_KIVI4_KEY_BLOCK_BYTES(d) / KVC_KIVI_BLOCK +
                                                        (double)kvc_row_bytes(KVC_DTYPE_I4, dv)
                                                  : (double)(kvc_row_bytes(t, d) + kvc_row_bytes(t, dv));
        if (rc == 0)
            printf("%-6s %14.6g %12.4f\n", kvc_dtype_name((kvc_dtype)t), sum / (double)(tr.n - from),
                   token / f16_token);
        held_free(&h);
    }
    free(work), free(ex), free(z);
    kvc_trace_free(&tr);
    return rc;
}
