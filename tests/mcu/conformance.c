/* Conformance of every method and storage type, in static memory: the same
 * program runs on the host and as Cortex-M firmware under QEMU (label mcu),
 * and tests/mcu/run_firmware.cmake requires the same output from both.
 *
 * For each method of the registry x each implemented storage type, one stream
 * at stories260K's shape (head dim 8, two query heads per kv head) takes 240
 * seeded tokens through the reference kernel table. Checked at every token:
 *  - attend outputs are finite (h2o/tova attend observed, snapkv first gets
 *    query rows, as a decoder drives them);
 *  - every 17th token a non-finite key, and a non-finite query, are refused
 *    with a status and leave every arena byte as it was;
 *  - the stream's peak elements never exceed the plan's worst case.
 * Printed per configuration: tokens, arena bytes, peak, the arena checksum
 * and a digest of every output bit, so a platform that computes one bit
 * differently (libm, contraction, word size) shows up in the comparison.
 * Ends with "N passed, M failed"; exit status 0 only when M is 0. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fw_util.h"
#include "kvc/kvc.h"

enum { D = 8, N_Q = 2, N_TOKENS = 240, BUDGET = 96, BAD_EVERY = 17 };

static void fill_normal(kvc_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)kvc_rng_normal(r);
}

/* One configuration; returns 0 on success, prints why otherwise. */
static int run_one(kvc_method m, kvc_dtype t)
{
    const kvc_kernels *kern = kvc_kernels_ref();
    kvc_stream_config c = kvc_stream_config_default(m, D, D, BUDGET, 7);
    c.dtype = t;
    /* KIVI4 windows are whole blocks of 32: 8 held none (and is now refused), so 0 there */
    c.n_sink = 4, c.n_window = t == KVC_DTYPE_KIVI4 ? 0u : 8u, c.prefix_len = 160;
    const char *why = kvc_stream_config_problem(&c);
    const size_t bytes = kvc_stream_arena_bytes(&c);
    const char *mname = kvc_method_name(m), *tname = kvc_dtype_name(t);
    if (why != NULL || bytes == 0 || bytes > ARENA_CAP) {
        printf("FAIL %s %s: %s (arena %lu B, cap %u B)\n", mname, tname, why ? why : "size", (unsigned long)bytes,
               ARENA_CAP);
        return 1;
    }
    kvc_stream *st = NULL;
    if (kvc_stream_init(g_arena, bytes, &c, &st) != KVC_OK) {
        printf("FAIL %s %s: init\n", mname, tname);
        return 1;
    }
    kvc_rng r;
    kvc_rng_seed(&r, 1000u + (uint64_t)m * 16u + (uint64_t)t);
    float k[D], v[D], q[N_Q * D], out[N_Q * D];
    {
        /* the prompt's last query rows: snapkv keeps them, the others ignore them */
        float rows[4 * D];
        fill_normal(&r, rows, 4 * D);
        (void)kvc_stream_prefill_queries(st, kern, rows, 4);
    }
    const kvc_stream_plan *plan = kvc_stream_get_plan(st);
    uint64_t out_digest = FNV_SEED;
    for (unsigned i = 0; i < N_TOKENS; i++) {
        fill_normal(&r, k, D), fill_normal(&r, v, D), fill_normal(&r, q, N_Q * D);
        if (i % BAD_EVERY == 5) {
            /* refused input leaves the arena byte for byte */
            const uint64_t before = fnv(FNV_SEED, g_arena, bytes);
            float bad[D];
            memcpy(bad, k, sizeof bad);
            bad[i % D] = NAN;
            const kvc_status a = kvc_stream_append(st, kern, bad, v);
            memcpy(bad, q, sizeof bad);
            bad[(i + 3) % D] = INFINITY;
            const kvc_status b = kvc_stream_attend(st, kern, bad, 1, out);
            if (a == KVC_OK || b == KVC_OK || fnv(FNV_SEED, g_arena, bytes) != before) {
                printf("FAIL %s %s: token %u: non-finite input gave %s / %s or changed the arena\n", mname, tname, i,
                       kvc_status_str(a), kvc_status_str(b));
                return 1;
            }
        }
        const uint64_t before = fnv(FNV_SEED, g_arena, bytes);
        kvc_status s = kvc_stream_append(st, kern, k, v);
        /* exact and the prefill forms' exact tails refuse when full, as documented: state unchanged */
        if (s == KVC_E_CAPACITY && (m == KVC_METHOD_EXACT || plan->prefix_method_tokens > 0)) {
            if (fnv(FNV_SEED, g_arena, bytes) != before) {
                printf("FAIL %s %s: the refused append %u changed the arena\n", mname, tname, i);
                return 1;
            }
            break;
        }
        if (s != KVC_OK) {
            printf("FAIL %s %s: append %u: %s\n", mname, tname, i, kvc_status_str(s));
            return 1;
        }
        const size_t wb = kvc_stream_attend_observed_work_bytes(st, N_Q);
        if (wb > WORK_CAP) {
            printf("FAIL %s %s: work %lu B > cap\n", mname, tname, (unsigned long)wb);
            return 1;
        }
        s = kvc_stream_attend_observed(st, kern, q, N_Q, out, g_work, WORK_CAP);
        if (s != KVC_OK) {
            printf("FAIL %s %s: attend %u: %s\n", mname, tname, i, kvc_status_str(s));
            return 1;
        }
        for (int j = 0; j < N_Q * D; j++)
            if (!isfinite(out[j])) {
                printf("FAIL %s %s: token %u: output not finite\n", mname, tname, i);
                return 1;
            }
        out_digest = fnv(out_digest, out, sizeof out);
        kvc_stream_stats stats;
        if (kvc_stream_get_stats(st, &stats) != KVC_OK || stats.peak_elements > plan->worst_elements) {
            printf("FAIL %s %s: peak %lu elements > worst case %lu\n", mname, tname, (unsigned long)stats.peak_elements,
                   (unsigned long)plan->worst_elements);
            return 1;
        }
    }
    kvc_stream_stats stats;
    kvc_stream_get_stats(st, &stats);
    char h1[17], h2[17];
    printf("ok %-17s %-4s tokens %3lu arena %6lu B peak %5lu / %5lu checksum %s outputs %s\n", mname, tname,
           (unsigned long)stats.tokens_seen, (unsigned long)bytes, (unsigned long)stats.peak_elements,
           (unsigned long)plan->worst_elements, hex64(h1, kvc_stream_checksum(st)), hex64(h2, out_digest));
    return 0;
}

static int run_config(kvc_method m, kvc_dtype t, void *ctx)
{
    (void)ctx;
    return run_one(m, t);
}

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    return fw_for_each_config(run_config, NULL);
}
