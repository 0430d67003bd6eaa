/* The compile-time arena sizes (kvc_sizes.h) against the size functions:
 * for every registered method that has a macro, every implemented storage
 * type, head dimensions at the edges, and budgets, sinks and windows from
 * the smallest valid to large, the macro equals kvc_stream_arena_bytes; and a
 * cache of such streams equals kvc_cache_arena_bytes. The macros are also
 * used where only a constant expression is allowed (a static array), so a
 * macro that stopped being one fails to compile. Methods without a macro
 * (their parameters are derived at run time) are listed. */
#include <stdio.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"

/* a static buffer sized at compile time, as a firmware would */
static _Alignas(KVC_ARENA_ALIGN) unsigned char g_static_arena[KVC_CACHE_ARENA_BYTES(
    2, 2, KVC_SINK_WINDOW_ARENA_BYTES(KVC_DTYPE_I8, 8, 8, 64, 4))];

/* The macro for method m, or 0 when it has none. The one place the macros
   are named; which methods the registry holds comes from the registry. */
static uint64_t macro_bytes(const kvc_stream_config *c)
{
    const unsigned t = (unsigned)c->dtype;
    switch (c->method) {
    case KVC_METHOD_EXACT: return KVC_EXACT_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink, c->n_window);
    case KVC_METHOD_SINK_WINDOW: return KVC_SINK_WINDOW_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink);
    case KVC_METHOD_UNIFORM: return KVC_UNIFORM_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink, c->n_window);
    case KVC_METHOD_KNORM: return KVC_KNORM_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink, c->n_window);
    case KVC_METHOD_KEYDIFF: return KVC_KEYDIFF_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink, c->n_window);
    case KVC_METHOD_H2O: return KVC_H2O_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink, c->n_window);
    case KVC_METHOD_TOVA: return KVC_TOVA_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink, c->n_window);
    case KVC_METHOD_SNAPKV: return KVC_SNAPKV_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink, c->n_window);
    case KVC_METHOD_EXPECTED_ATTENTION:
        return KVC_EXPECTED_ATTENTION_ARENA_BYTES(t, c->d, c->dv, c->budget, c->n_sink, c->n_window);
    default: return 0;
    }
}

static int macros_equal_size_functions(void)
{
    static const uint32_t dims[] = {1, 7, 8, 33, 64, 255, 256};
    static const uint32_t budgets[] = {3, 10, 77, 128, 1000, 65536};
    static const uint32_t sinks[] = {0, 1, 4, 32};
    static const uint32_t windows[] = {0, 1, 8, 32};
    size_t covered = 0, compared = 0;
    for (size_t i = 0; i < kvc_method_count(); i++) {
        const kvc_method m = kvc_method_at(i);
        kvc_stream_config probe = kvc_stream_config_default(m, 8, 8, 128, 1);
        if (macro_bytes(&probe) == 0) {
            printf("%-18s no compile-time macro: size it with kvc_stream_arena_bytes\n", kvc_method_name(m));
            continue;
        }
        covered++;
        for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) {
            if (!kvc_dtype_implemented((kvc_dtype)t)) continue;
            if (t == KVC_DTYPE_KIVI4) continue; /* no macro: its plan rounds the window (kvc_sizes.h says so) */
            for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++)
                for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++)
                    for (size_t s = 0; s < sizeof sinks / sizeof sinks[0]; s++)
                        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
                            kvc_stream_config c =
                                kvc_stream_config_default(m, dims[a], dims[(a + 3) % 7], budgets[b], 1);
                            c.dtype = (kvc_dtype)t, c.n_sink = sinks[s], c.n_window = windows[w];
                            const size_t want = kvc_stream_arena_bytes(&c);
                            if (want == 0) continue; /* an invalid configuration: the macro does not check */
                            compared++;
                            CHECK_MSG(macro_bytes(&c) == want,
                                      "%s %s d %u dv %u budget %u sink %u window %u: %llu vs %zu", kvc_method_name(m),
                                      kvc_dtype_name((kvc_dtype)t), c.d, c.dv, c.budget, c.n_sink, c.n_window,
                                      (unsigned long long)macro_bytes(&c), want);
                            /* a cache of 3 layers x 2 kv-heads of that stream */
                            if (b < 4 && s == 2 && w == 2) {
                                kvc_cache_config cc;
                                memset(&cc, 0, sizeof cc);
                                cc.n_layers = 3, cc.n_kv_heads = 2, cc.n_heads = 4, cc.head_dim = c.d;
                                cc.stream = c, cc.stream.dv = c.d, cc.policy = KVC_BUDGET_UNIFORM;
                                kvc_stream_config one = c;
                                one.dv = c.d;
                                const size_t cache = kvc_cache_arena_bytes(&cc);
                                CHECK(cache != 0 && KVC_CACHE_ARENA_BYTES(3, 2, macro_bytes(&one)) == cache);
                            }
                        }
        }
    }
    printf("%zu methods with a macro, %zu configurations compared\n", covered, compared);
    CHECK(covered > 0 && compared > 1000);
    /* the static buffer holds exactly the cache it was sized for */
    kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_SINK_WINDOW, 8, 8, 64, 1);
    sc.dtype = KVC_DTYPE_I8, sc.n_sink = 4, sc.n_window = 8;
    kvc_cache_config cc;
    memset(&cc, 0, sizeof cc);
    cc.n_layers = 2, cc.n_kv_heads = 2, cc.n_heads = 2, cc.head_dim = 8, cc.stream = sc, cc.policy = KVC_BUDGET_UNIFORM;
    kvc_cache *cache;
    if (kvc_method_name(KVC_METHOD_SINK_WINDOW) != NULL) {
        CHECK(kvc_cache_arena_bytes(&cc) == sizeof g_static_arena);
        CHECK(kvc_cache_init(g_static_arena, sizeof g_static_arena, &cc, &cache) == KVC_OK);
    }
    return 0;
}

static const kvc_test_case cases[] = {{"macros_equal_size_functions", macros_equal_size_functions}};
KVC_TEST_MAIN(cases)
