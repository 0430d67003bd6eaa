#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc_attend.h"
#include "kvc_npy.h"

static int load_one(const char *dir, const char *name, kvc_npy_array *a)
{
    char path[4096], err[256];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        fprintf(stderr, "kvc: trace path too long: %s\n", dir);
        return 1;
    }
    kvc_status rc = kvc_npy_load(path, a, err, sizeof err);
    if (rc != KVC_OK) {
        fprintf(stderr, "kvc: cannot read %s: %s\n", path, err);
        return 1;
    }
    if (a->ndim != 2 && a->ndim != 3) {
        fprintf(stderr, "kvc: %s: expected shape (n, d) or (heads, n, d), got %zu dims\n", path, a->ndim);
        return 1;
    }
    if (!kvc_all_finite(a->data, a->count)) {
        fprintf(stderr, "kvc: %s contains NaN or Inf\n", path);
        return 1;
    }
    return 0;
}

/* Copy head h of a (heads, n, d) array, or the whole (n, d) array. */
static float *take_head(const kvc_npy_array *a, size_t h, size_t *n, size_t *d)
{
    size_t heads = a->ndim == 3 ? a->shape[0] : 1;
    *n = a->shape[a->ndim - 2];
    *d = a->shape[a->ndim - 1];
    if (h >= heads) return NULL;
    float *out = malloc(*n * *d * sizeof(float));
    if (out) memcpy(out, a->data + h * *n * *d, *n * *d * sizeof(float));
    return out;
}

int kvc_trace_load(const char *dir, size_t head, kvc_trace *tr)
{
    kvc_npy_array q = {0}, k = {0}, v = {0};
    int rc = 1;
    memset(tr, 0, sizeof *tr);
    if (load_one(dir, "q.npy", &q) || load_one(dir, "k.npy", &k) || load_one(dir, "v.npy", &v)) goto done;
    if (q.ndim != k.ndim || k.ndim != v.ndim) {
        fprintf(stderr, "kvc: q, k, v must all be 2-d or all 3-d\n");
        goto done;
    }
    size_t hq = q.ndim == 3 ? q.shape[0] : 1, hk = k.ndim == 3 ? k.shape[0] : 1;
    size_t hv = v.ndim == 3 ? v.shape[0] : 1;
    if (head >= hq) {
        fprintf(stderr, "kvc: --head %zu out of range: q has %zu heads\n", head, hq);
        goto done;
    }
    if (hk != hv || hq % hk != 0) {
        fprintf(stderr, "kvc: head counts q=%zu k=%zu v=%zu are not a grouped-query layout\n", hq, hk, hv);
        goto done;
    }
    size_t kvh = head * hk / hq, nq, nk, nv, dq, dk, dv;
    tr->q = take_head(&q, head, &nq, &dq);
    tr->k = take_head(&k, kvh, &nk, &dk);
    tr->v = take_head(&v, kvh, &nv, &dv);
    if (!tr->q || !tr->k || !tr->v) {
        fprintf(stderr, "kvc: out of memory loading the trace\n");
        goto done;
    }
    if (nq != nk || nk != nv || dq != dk || nq == 0) {
        fprintf(stderr, "kvc: inconsistent trace: q (%zu x %zu), k (%zu x %zu), v (%zu x %zu)\n", nq, dq, nk, dk, nv,
                dv);
        goto done;
    }
    tr->n = nq;
    tr->d = dq;
    tr->dv = dv;
    rc = 0;
done:
    kvc_npy_free(&q);
    kvc_npy_free(&k);
    kvc_npy_free(&v);
    if (rc) kvc_trace_free(tr);
    return rc;
}

void kvc_trace_free(kvc_trace *tr)
{
    free(tr->q);
    free(tr->k);
    free(tr->v);
    memset(tr, 0, sizeof *tr);
}
