/* Prints, for every method, the checksum of its arena after a fixed stream,
 * its peak elements and arena size, then whether this platform refuses the
 * arenas it cannot address. Built for the host, for a 32-bit target (-m32)
 * and with GNU extensions + FMA; tests/abi/compare.cmake requires the same
 * output from all of them: a snapshot must move between a device and a host,
 * and a build that contracts multiply-adds must not change the arena. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"

int main(void)
{
#if defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
    if (!__builtin_cpu_supports("fma")) {
        puts("KVC_SKIP: this CPU has no FMA");
        return 0;
    }
#endif
    const uint32_t d = 8, n = 700;
    kvc_rng r;
    kvc_rng_seed(&r, 4242);
    float *k = malloc(sizeof(float) * n * d), *v = malloc(sizeof(float) * n * d), *q = malloc(sizeof(float) * d);
    for (uint32_t i = 0; i < n * d; i++) k[i] = (float)kvc_rng_normal(&r), v[i] = (float)kvc_rng_normal(&r);
    for (uint32_t i = 0; i < d; i++) q[i] = (float)kvc_rng_normal(&r);
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const int m = (int)kvc_method_at(mi);
        kvc_stream_config c = kvc_stream_config_default((kvc_method)m, d, d, 128, 7);
        c.n_sink = 4, c.n_window = 8, c.prefix_len = 400;
        if (m == KVC_METHOD_BALANCEKV) c.params.balancekv.rho = 0.01f; /* exercises the erase threshold */
        const size_t bytes = kvc_stream_arena_bytes(&c);
        void *a = aligned_alloc(KVC_ARENA_ALIGN, (bytes + 63) / 64 * 64);
        kvc_stream *st;
        if (a == NULL || kvc_stream_init(a, bytes, &c, &st) != KVC_OK) return 1;
        uint32_t used = 0;
        while (used < n && kvc_stream_append(st, kvc_kernels_ref(), k + used * d, v + used * d) == KVC_OK) used++;
        float out[8];
        const kvc_status rc = kvc_stream_attend(st, kvc_kernels_ref(), q, 1, out);
        kvc_stream_stats s;
        kvc_stream_get_stats(st, &s);
        uint32_t out_bits = 0;
        memcpy(&out_bits, &out[0], sizeof out_bits);
        printf("%-18s tokens %4u arena %7zu B peak %6" PRIu64 " checksum %016" PRIx64 " out0 %08" PRIx32 " rc %d\n",
               kvc_method_name((kvc_method)m), used, bytes, s.peak_elements, kvc_stream_checksum(st), out_bits, rc);
        free(a);
    }
    /* 8 GiB of payload: refused where size_t is 32 bits (it used to wrap to 448 B) */
    kvc_stream_config big = kvc_stream_config_default(KVC_METHOD_EXACT, 256, 256, 1u << 22, 1);
    const size_t bytes = kvc_stream_arena_bytes(&big);
    const int ok = sizeof(size_t) == 4 ? bytes == 0 && kvc_stream_config_problem(&big) != NULL
                                       : (uint64_t)bytes > ((uint64_t)1 << 33);
    printf("unaddressable arena refused or sized exactly: %s\n", ok ? "yes" : "NO");
    free(k), free(v), free(q);
    return ok ? 0 : 1;
}
