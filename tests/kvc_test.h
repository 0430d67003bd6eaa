/* Minimal test harness: one executable holds several named cases; ctest runs
 * each case as its own test (`exe case_name`). A case returns 0 (pass),
 * 1 (fail) or 77 (skip, after printing why). Every random case prints its seed. */
#ifndef KVC_TEST_H
#define KVC_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct kvc_test_case {
    const char *name;
    int (*fn)(void);
} kvc_test_case;

#define KVC_TEST_SKIP 77

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                                   \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                           \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                                   \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

/* A float's bits and back (memcpy: no aliasing question). */
static inline uint32_t kvc_test_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float kvc_test_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Run the case named argv[1], or every case when no name is given. */
static inline int kvc_test_main(int argc, char **argv, const kvc_test_case *cases, size_t n)
{
    int failed = 0, ran = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) continue;
        ran++;
        printf("== %s\n", cases[i].name);
        fflush(stdout);
        int rc = cases[i].fn();
        if (rc == KVC_TEST_SKIP && argc > 1) return KVC_TEST_SKIP;
        if (rc != 0 && rc != KVC_TEST_SKIP) {
            printf("FAIL %s\n", cases[i].name);
            failed++;
        } else {
            printf("%s %s\n", rc == 0 ? "PASS" : "SKIP", cases[i].name);
        }
    }
    if (ran == 0) {
        fprintf(stderr, "no test case named '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return failed ? 1 : 0;
}

#define KVC_TEST_MAIN(cases)                                                                                           \
    int main(int argc, char **argv) { return kvc_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0])); }

#endif
