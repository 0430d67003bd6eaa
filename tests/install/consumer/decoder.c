/* A decoder-shaped consumer of the installed package: a cache manager for a
 * 2-layer, 4-head (2 kv-head) model, 300 decode steps, every status checked,
 * and the compressed cache compared with the exact one it approximates. It
 * includes kvc.h without KVC_ADVANCED: the stable tier is enough for a
 * decoder. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <kvc/kvc.h>

#define LAYERS   2u
#define HEADS    4u
#define KV_HEADS 2u
#define HD       16u

/* the consumer's own normal draws (the library's RNG is advanced tier) */
static double normal(uint64_t *state)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((double)(*state >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static void *new_cache(kvc_method m, uint32_t budget, kvc_cache **c)
{
    kvc_cache_config cc = {.n_layers = LAYERS,
                           .n_heads = HEADS,
                           .n_kv_heads = KV_HEADS,
                           .head_dim = HD,
                           .stream = kvc_stream_config_default(m, HD, HD, budget, 1),
                           .policy = KVC_BUDGET_UNIFORM};
    cc.stream.n_sink = 4, cc.stream.n_window = 16;
    const size_t bytes = kvc_cache_arena_bytes(&cc);
    if (bytes == 0) {
        fprintf(stderr, "config: %s\n", kvc_cache_config_problem(&cc));
        return NULL;
    }
    void *arena = aligned_alloc(KVC_ARENA_ALIGN, (bytes + KVC_ARENA_ALIGN - 1) / KVC_ARENA_ALIGN * KVC_ARENA_ALIGN);
    if (!arena || kvc_cache_init(arena, bytes, &cc, c) != KVC_OK) return NULL;
    return arena;
}

int main(void)
{
    kvc_cache *exact, *small;
    void *a = new_cache(KVC_METHOD_EXACT, 320, &exact), *b = new_cache(KVC_METHOD_UNIFORM, 96, &small);
    if (!a || !b) return 1;
    uint64_t r = 7;
    float k[KV_HEADS * HD], v[KV_HEADS * HD], q[HEADS * HD], ze[HEADS * HD], zs[HEADS * HD];
    double err = 0, ref = 0;
    for (int pos = 0; pos < 300; pos++) {
        for (uint32_t l = 0; l < LAYERS; l++) {
            for (size_t i = 0; i < KV_HEADS * HD; i++) k[i] = (float)normal(&r), v[i] = (float)normal(&r);
            for (size_t i = 0; i < HEADS * HD; i++) q[i] = (float)normal(&r);
            kvc_status s1 = kvc_cache_append(exact, NULL, l, k, v), s2 = kvc_cache_append(small, NULL, l, k, v);
            kvc_status s3 = kvc_cache_attend(exact, NULL, l, q, ze), s4 = kvc_cache_attend(small, NULL, l, q, zs);
            if (s1 || s2 || s3 || s4) {
                fprintf(stderr, "step %d layer %u: %s\n", pos, l, kvc_status_str(s1 ? s1 : s2 ? s2 : s3 ? s3 : s4));
                return 1;
            }
            for (size_t i = 0; i < HEADS * HD; i++) err += fabs((double)zs[i] - ze[i]), ref += fabs((double)ze[i]);
        }
    }
    if (kvc_cache_checksum(small) == 0) return 1; /* a valid cache has a checksum */
    uint64_t el, peak;
    kvc_cache_get_usage(small, &el, &peak);
    printf("300 steps: uniform cache at 96 of 300 tokens, relative L1 error %.3f, %llu elements held\n", err / ref,
           (unsigned long long)el);
    free(a), free(b);
    return err / ref < 1.0 ? 0 : 1;
}
