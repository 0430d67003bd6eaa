/* Head-wise budgets (KVC_BUDGET_HEADS): every (layer, kv head) has its own
 * method, budget, sinks and window from a table the cache keeps in its arena.
 * Checked: the arena is exactly the header, the tables and each stream sized
 * for its own budget (ragged, not masked); every stream answers bit for bit
 * like a standalone stream of its settings fed the same tokens; bad tables
 * are refused with the entry named and nothing written; a snapshot carries
 * the table, and a corrupted table is refused (the header's digest covers it),
 * never followed. Deterministic (seeds printed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"

#define L  2u
#define H  3u
#define G  2u /* query heads per kv head */
#define HD 8u

static kvc_cache_config config(void)
{
    kvc_cache_config c;
    memset(&c, 0, sizeof c);
    c.n_layers = L, c.n_kv_heads = H, c.n_heads = H * G, c.head_dim = HD;
    c.stream = kvc_stream_config_default(KVC_METHOD_UNIFORM, HD, HD, 64, 7);
    c.policy = KVC_BUDGET_HEADS;
    return c;
}

/* A mixed table: a streaming head, a retrieval head, a diffuse head per layer,
 * two of them with protected spans. */
static void table(kvc_cache_head *t)
{
    const kvc_cache_head rows[L * H] = {{KVC_METHOD_SINK_WINDOW, 24, 4, 0, 0}, {KVC_METHOD_EXACT, 300, 0, 0, 0},
                                        {KVC_METHOD_UNIFORM, 48, 4, 8, 6},     {KVC_METHOD_KEYDIFF, 40, 4, 8, 0},
                                        {KVC_METHOD_H2O, 56, 4, 8, 8},         {KVC_METHOD_SUBGEN, 96, 4, 8, 0}};
    memcpy(t, rows, sizeof rows);
}

static kvc_stream_config standalone(const kvc_cache_config *c, const kvc_cache_head *e, uint32_t l, uint32_t h)
{
    kvc_stream_config s = c->stream;
    s.method = (kvc_method)e->method, s.budget = e->budget, s.n_sink = e->n_sink, s.n_window = e->n_window;
    s.n_protect = e->n_protect;
    s.seed = c->stream.seed + (uint64_t)l * H + h;
    return s;
}

static int ragged_streams_answer_as_their_own(void)
{
    const size_t n = 250;
    kvc_cache_config c = config();
    kvc_cache_head t[L * H];
    table(t);
    printf("seed 21, %zu tokens, %u layers x %u kv heads\n", n, L, H);
    CHECK(kvc_cache_heads_problem(&c, t, NULL, NULL) == NULL);
    const size_t bytes = kvc_cache_arena_bytes_heads(&c, t);
    /* header + offset table + head table, then each stream at its own size */
    size_t want = KVC_ALIGN_UP(KVC_ALIGN_UP(KVC_SIZE_ALIGN(KVC_SIZE_CACHE_HEADER) + L * H * 8) +
                               L * H * sizeof(kvc_cache_head)),
           uniform_max = 0;
    kvc_stream *solo[L * H];
    for (uint32_t i = 0; i < L * H; i++) {
        const kvc_stream_config s = standalone(&c, &t[i], i / H, i % H);
        const size_t b = kvc_stream_arena_bytes(&s);
        CHECK(b > 0);
        want += KVC_ALIGN_UP(b);
        if (b > uniform_max) uniform_max = b;
        solo[i] = tu_stream(&s);
        CHECK(solo[i] != NULL);
    }
    printf("arena %zu B; the same streams padded to the largest would take %zu B\n", bytes,
           (size_t)L * H * uniform_max);
    CHECK(bytes == want);
    void *arena = tu_arena(bytes);
    kvc_cache *cache;
    CHECK(kvc_cache_init(arena, bytes, &c, &cache) == KVC_E_ARG); /* the policy needs its table */
    CHECK(kvc_cache_init_heads(arena, bytes - 8, &c, t, &cache) == KVC_E_ARENA);
    CHECK(kvc_cache_init_heads(arena, bytes, &c, t, &cache) == KVC_OK);
    CHECK(kvc_cache_observes(cache) == 1); /* layer 1 has an H2O head */
    for (uint32_t i = 0; i < L * H; i++) {
        kvc_cache_head e;
        CHECK(kvc_cache_get_head(cache, i / H, i % H, &e) == KVC_OK && memcmp(&e, &t[i], sizeof e) == 0);
        CHECK(kvc_stream_get_plan(kvc_cache_get_stream(cache, i / H, i % H))->arena_bytes ==
              kvc_stream_arena_bytes(kvc_stream_get_config(solo[i])));
    }
    kvc_rng r;
    kvc_rng_seed(&r, 21);
    float *k = tu_normal(&r, n * L, H * HD, 1.0), *v = tu_normal(&r, n * L, H * HD, 1.0);
    float *q = tu_normal(&r, n * L, H * G * HD, 1.0);
    const size_t wb = 1u << 16;
    double *work = malloc(wb), *work2 = malloc(wb);
    float out[H * G * HD], ref[G * HD];
    for (size_t j = 0; j < n; j++) {
        for (uint32_t l = 0; l < L; l++) {
            const float *kj = k + (j * L + l) * H * HD, *vj = v + (j * L + l) * H * HD;
            const float *qj = q + (j * L + l) * H * G * HD;
            CHECK(kvc_cache_append(cache, NULL, l, kj, vj) == KVC_OK);
            CHECK(kvc_cache_attend_observed_work_bytes(cache, l) <= wb);
            CHECK(kvc_cache_attend_observed(cache, NULL, l, qj, out, work, wb) == KVC_OK);
            for (uint32_t h = 0; h < H; h++) {
                kvc_stream *s = solo[l * H + h];
                CHECK(kvc_stream_append(s, NULL, kj + h * HD, vj + h * HD) == KVC_OK);
                CHECK(kvc_stream_attend_observed(s, NULL, qj + h * G * HD, G, ref, work2, wb) == KVC_OK);
                CHECK_MSG(memcmp(ref, out + h * G * HD, sizeof ref) == 0, "layer %u head %u token %zu", l, h, j);
            }
        }
    }
    for (uint32_t i = 0; i < L * H; i++) {
        const kvc_stream *s = kvc_cache_get_stream(cache, i / H, i % H);
        CHECK(memcmp(s, solo[i], kvc_stream_get_plan(s)->arena_bytes) == 0);
        free(solo[i]);
    }
    printf("every stream bit-identical to its standalone twin after %zu tokens\n", n);
    free(arena), free(k), free(v), free(q), free(work), free(work2);
    return 0;
}

static int bad_tables_are_refused(void)
{
    kvc_cache_config c = config();
    kvc_cache_head t[L * H];
    uint32_t bl, bh;
    table(t);
    CHECK(kvc_cache_heads_problem(&c, NULL, &bl, &bh) != NULL && bl == UINT32_MAX && bh == UINT32_MAX);
    CHECK(kvc_cache_arena_bytes(&c) == 0 && kvc_cache_config_problem(&c) != NULL);
    t[4].method = 999;
    const char *why = kvc_cache_heads_problem(&c, t, &bl, &bh);
    CHECK(why != NULL && bl == 1 && bh == 1);
    printf("unknown method at (1, 1): %s\n", why);
    table(t);
    t[5].budget = 0;
    why = kvc_cache_heads_problem(&c, t, &bl, &bh);
    CHECK(why != NULL && bl == 1 && bh == 2);
    printf("budget 0 at (1, 2): %s\n", why);
    CHECK(kvc_cache_arena_bytes_heads(&c, t) == 0);
    unsigned char *arena = tu_arena(1u << 20);
    memset(arena, 0xA5, 1u << 20);
    kvc_cache *cache = NULL;
    CHECK(kvc_cache_init_heads(arena, 1u << 20, &c, t, &cache) == KVC_E_ARG && cache == NULL);
    for (size_t i = 0; i < (1u << 20); i++) CHECK(arena[i] == 0xA5); /* nothing written */
    table(t);
    c.policy = KVC_BUDGET_UNIFORM; /* a table without its policy */
    CHECK(kvc_cache_heads_problem(&c, t, NULL, NULL) != NULL);
    CHECK(kvc_cache_init_heads(arena, 1u << 20, &c, t, &cache) == KVC_E_ARG);
    free(arena);
    return 0;
}

static int snapshot_carries_the_table(void)
{
    kvc_cache_config c = config();
    kvc_cache_head t[L * H];
    table(t);
    const size_t bytes = kvc_cache_arena_bytes_heads(&c, t);
    unsigned char *a = tu_arena(bytes), *b = tu_arena(bytes);
    kvc_cache *cache;
    CHECK(kvc_cache_init_heads(a, bytes, &c, t, &cache) == KVC_OK);
    kvc_rng r;
    kvc_rng_seed(&r, 4);
    printf("seed 4\n");
    float *k = tu_normal(&r, 100, H * HD, 1.0), *v = tu_normal(&r, 100, H * HD, 1.0);
    for (size_t j = 0; j < 100; j++)
        for (uint32_t l = 0; l < L; l++)
            CHECK(kvc_cache_append(cache, NULL, l, k + j * H * HD, v + j * H * HD) == KVC_OK);
    memcpy(b, a, bytes);
    CHECK(kvc_cache_validate(b, bytes) == KVC_OK);
    CHECK(kvc_cache_validate(b, KVC_SIZE_ALIGN(KVC_SIZE_CACHE_HEADER) + 8) ==
          KVC_E_ARENA); /* the tables are not all there */
    /* every byte of the head table, changed, is refused */
    const size_t heads_at = KVC_ALIGN_UP(KVC_SIZE_ALIGN(KVC_SIZE_CACHE_HEADER) + L * H * 8);
    size_t refused = 0;
    for (size_t i = heads_at; i < heads_at + sizeof t; i++) {
        memcpy(b, a, bytes);
        b[i] ^= 0x10;
        const kvc_status s = kvc_cache_validate(b, bytes);
        refused += s == KVC_E_CORRUPT;
        float q[H * G * HD] = {0}, out[H * G * HD];
        CHECK(kvc_cache_attend((const kvc_cache *)b, NULL, 0, q, out) == KVC_E_CORRUPT);
    }
    printf("%zu of %zu flipped table bytes refused by validate and attend\n", refused, sizeof t);
    CHECK(refused == sizeof t);
    free(a), free(b), free(k), free(v);
    return 0;
}

static const kvc_test_case cases[] = {{"ragged_streams_answer_as_their_own", ragged_streams_answer_as_their_own},
                                      {"bad_tables_are_refused", bad_tables_are_refused},
                                      {"snapshot_carries_the_table", snapshot_carries_the_table}};
KVC_TEST_MAIN(cases)
