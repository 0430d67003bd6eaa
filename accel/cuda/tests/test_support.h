// What the kernel tests of accel/cuda share: a seeded splitmix64 generator
// (the seeds are printed by each test) and CHECK, which prints a failure
// with its place and counts it in test_failures().
#ifndef KVC_CUDA_TEST_SUPPORT_H
#define KVC_CUDA_TEST_SUPPORT_H

#include <cmath>
#include <cstdint>
#include <cstdio>

struct test_rng {
    uint64_t s;
    uint64_t next()
    {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return (double)(next() >> 11) * 0x1.0p-53; }
    double normal()
    {
        const double a = uniform() + 1e-300, b = uniform();
        return std::sqrt(-2.0 * std::log(a)) * std::cos(6.283185307179586 * b);
    }
    size_t below(size_t n) { return (size_t)(next() % n); }
};

inline int &test_failures()
{
    static int n = 0;
    return n;
}

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            std::printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                           \
            std::printf(__VA_ARGS__);                                                                                  \
            std::printf("\n");                                                                                         \
            test_failures()++;                                                                                         \
        }                                                                                                              \
    } while (0)

#endif
