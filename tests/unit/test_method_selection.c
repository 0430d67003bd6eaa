/* A build that keeps only some methods (CMake KVC_METHODS; here a private
 * build of the core with KVC_METHODS_ONLY, KVC_WITH_exact and KVC_WITH_knorm):
 * the registry lists exactly those, the others are refused with a status
 * that names the build option, and the kept ones work. The size a firmware
 * saves is measured by bench/mcu_code_size.sh. */
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"

static int registry_holds_the_chosen_methods(void)
{
    CHECK(kvc_method_count() == 2);
    CHECK(kvc_method_at(0) == KVC_METHOD_EXACT && kvc_method_at(1) == KVC_METHOD_KNORM);
    CHECK(kvc_method_name(KVC_METHOD_SUBGEN) == NULL);
    kvc_method m;
    CHECK(kvc_method_parse("knorm", &m) == KVC_OK && m == KVC_METHOD_KNORM);
    CHECK(kvc_method_parse("subgen", &m) == KVC_E_ARG);
    kvc_stream_config c = kvc_stream_config_default(KVC_METHOD_SUBGEN, 8, 8, 64, 1);
    const char *why = kvc_stream_config_problem(&c);
    printf("subgen in this build: %s\n", why ? why : "(accepted)");
    CHECK(why != NULL && strstr(why, "KVC_METHODS") != NULL);
    CHECK(kvc_stream_arena_bytes(&c) == 0);
    /* a kept method streams */
    c = kvc_stream_config_default(KVC_METHOD_KNORM, 8, 8, 64, 1);
    c.n_sink = 4, c.n_window = 8;
    const size_t bytes = kvc_stream_arena_bytes(&c);
    void *a = aligned_alloc(KVC_ARENA_ALIGN, (bytes + 63) / 64 * 64);
    kvc_stream *st;
    CHECK(a != NULL && kvc_stream_init(a, bytes, &c, &st) == KVC_OK);
    float k[8] = {1, 0, 0, 0, 0, 0, 0, 0}, out[8];
    for (int i = 0; i < 100; i++) {
        k[i % 8] += 0.5f;
        CHECK(kvc_stream_append(st, NULL, k, k) == KVC_OK);
    }
    CHECK(kvc_stream_attend(st, NULL, k, 1, out) == KVC_OK);
    free(a);
    return 0;
}

static const kvc_test_case cases[] = {{"registry_holds_the_chosen_methods", registry_holds_the_chosen_methods}};
KVC_TEST_MAIN(cases)
