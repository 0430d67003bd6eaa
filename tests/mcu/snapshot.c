/* A snapshot moves between targets: arena bytes written on one target are
 * valid on another and continue there bit for bit.
 *   snapshot write DIR   every method x storage type: a stream of 240 seeded
 *                        tokens; the arena after token 60 goes to
 *                        DIR/<method>-<type>.kvc; prints the uninterrupted run
 *   snapshot resume DIR  reads each file, checks it (kvc_stream_validate),
 *                        continues with tokens 60..239; prints the same line
 * Built for the host and as Cortex-M firmware (semihosting file I/O): the
 * mcu label writes on x86-64 and resumes under QEMU, and requires the
 * lines to be equal (the arena checksum and a digest of every output bit
 * after the snapshot). Ends with "N passed, M failed". */
#include <stdio.h>
#include <string.h>

#include "fw_util.h"
#include "kvc/kvc.h"

enum { D = 8, N_Q = 2, N_TOKENS = 240, SNAP_AT = 60, BUDGET = 96 };

/* token i's key, value and queries: the same draws on every target */
static void token(kvc_rng *r, float *k, float *v, float *q)
{
    for (int j = 0; j < D; j++) k[j] = (float)kvc_rng_normal(r), v[j] = (float)kvc_rng_normal(r);
    for (int j = 0; j < N_Q * D; j++) q[j] = (float)kvc_rng_normal(r);
}

static int run_one(kvc_method m, kvc_dtype t, const char *dir, int resume)
{
    const kvc_kernels *kern = kvc_kernels_ref();
    kvc_stream_config c = kvc_stream_config_default(m, D, D, BUDGET, 11);
    c.dtype = t;
    /* KIVI4 windows are whole blocks of 32: 8 held none (and is now refused), so 0 there */
    c.n_sink = 4, c.n_window = t == KVC_DTYPE_KIVI4 ? 0u : 8u, c.prefix_len = 160;
    const size_t bytes = kvc_stream_arena_bytes(&c);
    const char *mname = kvc_method_name(m), *tname = kvc_dtype_name(t);
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%s.kvc", dir, mname, tname);
    if (bytes == 0 || bytes > ARENA_CAP) {
        printf("FAIL %s %s: arena %lu B\n", mname, tname, (unsigned long)bytes);
        return 1;
    }
    kvc_rng r;
    kvc_rng_seed(&r, 77u + (uint64_t)m * 16u + (uint64_t)t);
    float k[D], v[D], q[N_Q * D], out[N_Q * D];
    kvc_stream *st = NULL;
    unsigned first = 0;
    if (resume) {
        FILE *f = fopen(path, "rb");
        const size_t got = f ? fread(g_arena, 1, bytes, f) : 0;
        if (f) fclose(f);
        const kvc_status s = got == bytes ? kvc_stream_validate(g_arena, bytes) : KVC_E_ARG;
        if (s != KVC_OK) {
            printf("FAIL %s %s: %s: %lu of %lu B read, %s\n", mname, tname, path, (unsigned long)got,
                   (unsigned long)bytes, kvc_status_str(s));
            return 1;
        }
        st = (kvc_stream *)(void *)g_arena;
        for (first = 0; first < SNAP_AT; first++) token(&r, k, v, q); /* the draws the writer used */
    } else {
        if (kvc_stream_init(g_arena, bytes, &c, &st) != KVC_OK) {
            printf("FAIL %s %s: init\n", mname, tname);
            return 1;
        }
        float rows[4 * D];
        for (int j = 0; j < 4 * D; j++) rows[j] = (float)(j % 7) * 0.25f - 0.5f;
        (void)kvc_stream_prefill_queries(st, kern, rows, 4); /* snapkv keeps them */
    }
    uint64_t digest = FNV_SEED;
    for (unsigned i = first; i < N_TOKENS; i++) {
        if (!resume && i == SNAP_AT) {
            FILE *f = fopen(path, "wb");
            const size_t put = f ? fwrite(g_arena, 1, bytes, f) : 0;
            if (f == NULL || fclose(f) != 0 || put != bytes) {
                printf("FAIL %s %s: cannot write %s\n", mname, tname, path);
                return 1;
            }
        }
        token(&r, k, v, q);
        kvc_status s = kvc_stream_append(st, kern, k, v);
        if (s == KVC_E_CAPACITY && (m == KVC_METHOD_EXACT || kvc_stream_get_plan(st)->prefix_method_tokens > 0))
            break; /* full, as documented; the same token on every target */
        if (s == KVC_OK) s = kvc_stream_attend_observed(st, kern, q, N_Q, out, g_work, WORK_CAP);
        if (s != KVC_OK) {
            printf("FAIL %s %s: token %u: %s\n", mname, tname, i, kvc_status_str(s));
            return 1;
        }
        if (i >= SNAP_AT) digest = fnv(digest, out, sizeof out);
    }
    char h1[17], h2[17];
    printf("ok %-17s %-4s checksum %s outputs after the snapshot %s\n", mname, tname,
           hex64(h1, kvc_stream_checksum(st)), hex64(h2, digest));
    return 0;
}

typedef struct snapshot_job {
    const char *dir;
    int resume;
} snapshot_job;

static int run_config(kvc_method m, kvc_dtype t, void *ctx)
{
    const snapshot_job *job = (const snapshot_job *)ctx;
    return run_one(m, t, job->dir, job->resume);
}

int main(int argc, char **argv)
{
    /* argv[0] is the program (QEMU: the kernel file) */
    if (argc != 3 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "resume") != 0)) {
        printf("usage: snapshot write|resume DIR\n");
        return 2;
    }
    snapshot_job job = {argv[2], strcmp(argv[1], "resume") == 0};
    return fw_for_each_config(run_config, &job);
}
