/* Unit tests for the .npy reader/writer (apps/io/kvc_npy.c). */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvc_npy.h"
#include "kvc_test.h"

/* ------------------------------------------------------------------ */
/* helpers                                                            */
/* ------------------------------------------------------------------ */

static uint64_t rng_state;
static uint32_t rng_next(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static float rng_uniform(float lo, float hi)
{
    return lo + (hi - lo) * ((float)(rng_next() & 0xffffffu) / 16777216.0f);
}

/* A temporary directory with up to 16 files, removed by tmp_cleanup. */
typedef struct tmpdir {
    char dir[512];
    char files[16][600];
    int nfiles;
} tmpdir;

static int tmp_make(tmpdir *t)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    snprintf(t->dir, sizeof t->dir, "%s/kvc_npy_XXXXXX", base);
    t->nfiles = 0;
    if (mkdtemp(t->dir) == NULL) {
        fprintf(stderr, "mkdtemp(%s) failed\n", t->dir);
        return 1;
    }
    return 0;
}

static const char *tmp_path(tmpdir *t, const char *name)
{
    size_t dl = strlen(t->dir), nl = strlen(name);
    if (t->nfiles == 16 || dl + 1 + nl + 1 > sizeof t->files[0]) {
        fprintf(stderr, "tmp_path: too many files or name too long\n");
        exit(1);
    }
    char *p = t->files[t->nfiles++];
    memcpy(p, t->dir, dl); /* (memcpy, not snprintf: both live in *t) */
    p[dl] = '/';
    memcpy(p + dl + 1, name, nl + 1);
    return p;
}

static void tmp_cleanup(tmpdir *t)
{
    for (int i = 0; i < t->nfiles; i++) remove(t->files[i]);
    remove(t->dir);
}

static long read_file(const char *path, uint8_t *buf, size_t cap)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) return -1;
    size_t n = fread(buf, 1, cap, fp);
    fclose(fp);
    return (long)n;
}

/* Build an .npy image: magic, version major.0, header length (2 bytes for
 * v1, 4 otherwise), the header text, then the data. When pad is set the text
 * is padded with spaces and a '\n' to a 64-byte boundary like numpy does;
 * otherwise it is used as is. Returns the length. */
static size_t mk(uint8_t *out, size_t cap, unsigned major, const char *text, int pad, const void *data, size_t dlen)
{
    size_t pre = major == 1 ? 10 : 12;
    size_t tl = strlen(text);
    size_t hl = tl;
    if (pad) {
        hl = tl + 1;
        hl += (64 - (pre + hl) % 64) % 64;
    }
    if (pre + hl + dlen > cap) {
        fprintf(stderr, "mk: buffer too small\n");
        exit(1);
    }
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    memcpy(out, magic, 6);
    out[6] = (uint8_t)major;
    out[7] = 0;
    out[8] = (uint8_t)(hl & 0xff);
    out[9] = (uint8_t)((hl >> 8) & 0xff);
    if (major != 1) {
        out[10] = (uint8_t)((hl >> 16) & 0xff);
        out[11] = (uint8_t)((hl >> 24) & 0xff);
    }
    memcpy(out + pre, text, tl);
    if (pad) {
        memset(out + pre + tl, ' ', hl - tl - 1);
        out[pre + hl - 1] = '\n';
    }
    if (dlen) memcpy(out + pre + hl, data, dlen);
    return pre + hl + dlen;
}

static void put_f32(uint8_t *p, float f, int big)
{
    uint32_t u = kvc_test_f32_bits(f);
    for (int k = 0; k < 4; k++) p[big ? 3 - k : k] = (uint8_t)(u >> (8 * k));
}

static void put_f16(uint8_t *p, uint16_t h, int big)
{
    p[big ? 1 : 0] = (uint8_t)(h & 0xff);
    p[big ? 0 : 1] = (uint8_t)(h >> 8);
}

static int same_bits(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (kvc_test_f32_bits(a[i]) != kvc_test_f32_bits(b[i])) {
            fprintf(stderr, "element %zu: %08x != %08x\n", i, (unsigned)kvc_test_f32_bits(a[i]),
                    (unsigned)kvc_test_f32_bits(b[i]));
            return 0;
        }
    return 1;
}

/* ------------------------------------------------------------------ */
/* round trips                                                        */
/* ------------------------------------------------------------------ */

static int roundtrip_f32(size_t ndim, const size_t *shape)
{
    tmpdir t;
    if (tmp_make(&t)) return 1;
    size_t count = 1;
    for (size_t d = 0; d < ndim; d++) count *= shape[d];
    float *src = malloc(count * sizeof *src);
    CHECK(src != NULL);
    rng_state = 12345;
    printf("seed 12345\n");
    for (size_t i = 0; i < count; i++) src[i] = rng_uniform(-1000.0f, 1000.0f);
    /* specials, bit-exact including NaN payload and -0 */
    src[0] = -0.0f;
    if (count > 4) {
        src[1] = kvc_test_bits_f32(0x7fc01234u);
        src[2] = INFINITY;
        src[3] = -FLT_MIN / 8.0f;
        src[4] = FLT_MAX;
    }
    const char *path = tmp_path(&t, "a.npy");
    char err[256];
    kvc_status st = kvc_npy_save(path, src, ndim, shape, KVC_NPY_F32, err, sizeof err);
    CHECK_MSG(st == KVC_OK, "%s", err);
    kvc_npy_array a;
    st = kvc_npy_load(path, &a, err, sizeof err);
    int ok = st == KVC_OK && a.ndim == ndim && a.count == count && a.stored == KVC_NPY_F32;
    for (size_t d = 0; ok && d < KVC_NPY_MAX_DIMS; d++) ok = a.shape[d] == (d < ndim ? shape[d] : 0);
    ok = ok && same_bits(a.data, src, count);
    if (!ok) fprintf(stderr, "load: status %d, %s\n", (int)st, err);
    kvc_npy_free(&a);
    free(src);
    tmp_cleanup(&t);
    CHECK(ok);
    return 0;
}

static int roundtrip_f32_2d(void)
{
    const size_t s[2] = {5, 7};
    const size_t s1[1] = {9};
    if (roundtrip_f32(2, s)) return 1;
    return roundtrip_f32(1, s1);
}

static int roundtrip_f32_3d(void)
{
    const size_t s[3] = {2, 3, 64};
    const size_t s2[3] = {1, 1, 1};
    if (roundtrip_f32(3, s)) return 1;
    return roundtrip_f32(3, s2);
}

static int roundtrip_f16(void)
{
    tmpdir t;
    if (tmp_make(&t)) return 1;
    enum { N = 4 * 50 };
    static float src[N];
    rng_state = 777;
    printf("seed 777\n");
    int exact[N];
    for (int i = 0; i < N; i++) {
        if (i % 2 == 0) { /* exactly representable */
            static const float ex[] = {0.0f,
                                       -0.0f,
                                       1.0f,
                                       -2.5f,
                                       0.125f,
                                       65504.0f,
                                       -65504.0f,
                                       5.9604644775390625e-8f /* 2^-24 */,
                                       6.103515625e-5f /* 2^-14 */,
                                       1025.0f,
                                       3.140625f};
            src[i] = ex[(i / 2) % (int)(sizeof ex / sizeof ex[0])];
            exact[i] = 1;
        } else {
            src[i] = rng_uniform(-100.0f, 100.0f);
            exact[i] = 0;
        }
    }
    const size_t shape[2] = {4, 50};
    const char *path = tmp_path(&t, "h.npy");
    char err[256];
    kvc_status st = kvc_npy_save(path, src, 2, shape, KVC_NPY_F16, err, sizeof err);
    CHECK_MSG(st == KVC_OK, "%s", err);
    uint8_t raw[1024];
    long n = read_file(path, raw, sizeof raw);
    CHECK_MSG(n == 128 + 2 * N, "file size %ld", n);
    kvc_npy_array a;
    st = kvc_npy_load(path, &a, err, sizeof err);
    CHECK_MSG(st == KVC_OK, "%s", err);
    int ok = a.stored == KVC_NPY_F16 && a.ndim == 2 && a.shape[0] == 4 && a.shape[1] == 50;
    for (int i = 0; ok && i < N; i++) {
        if (exact[i]) {
            ok = kvc_test_f32_bits(a.data[i]) == kvc_test_f32_bits(src[i]);
        } else {
            ok = fabsf(a.data[i] - src[i]) <= fabsf(src[i]) * 0x1p-11f;
        }
        if (!ok) fprintf(stderr, "element %d: %.9g -> %.9g\n", i, (double)src[i], (double)a.data[i]);
    }
    kvc_npy_free(&a);
    tmp_cleanup(&t);
    CHECK(ok);
    return 0;
}

/* ------------------------------------------------------------------ */
/* half conversions                                                   */
/* ------------------------------------------------------------------ */

static int half_special_values(void)
{
    /* half -> float */
    CHECK(kvc_test_f32_bits(kvc_half_to_float(0x0000)) == 0x00000000u);
    CHECK(kvc_test_f32_bits(kvc_half_to_float(0x8000)) == 0x80000000u);
    CHECK(kvc_half_to_float(0x0001) == 0x1p-24f);
    CHECK(kvc_half_to_float(0x03ff) == 1023.0f * 0x1p-24f);
    CHECK(kvc_half_to_float(0x0400) == 0x1p-14f);
    CHECK(kvc_half_to_float(0x3c00) == 1.0f);
    CHECK(kvc_half_to_float(0xc000) == -2.0f);
    CHECK(kvc_half_to_float(0x7bff) == 65504.0f);
    CHECK(kvc_half_to_float(0x7c00) == INFINITY);
    CHECK(kvc_half_to_float(0xfc00) == -INFINITY);
    CHECK(isnan(kvc_half_to_float(0x7e00)));
    CHECK(isnan(kvc_half_to_float(0x7c01)));
    CHECK(signbit(kvc_half_to_float(0xfe00)));

    /* float -> half */
    CHECK(kvc_float_to_half(0.0f) == 0x0000);
    CHECK(kvc_float_to_half(-0.0f) == 0x8000);
    CHECK(kvc_float_to_half(0x1p-24f) == 0x0001);
    CHECK(kvc_float_to_half(-0x1p-24f) == 0x8001);
    CHECK(kvc_float_to_half(0x1p-25f) == 0x0000);        /* tie -> even (0) */
    CHECK(kvc_float_to_half(0x1.000002p-25f) == 0x0001); /* just above the tie */
    CHECK(kvc_float_to_half(3.0f * 0x1p-25f) == 0x0002); /* 1.5 ulp: tie -> even (2) */
    CHECK(kvc_float_to_half(5.0f * 0x1p-25f) == 0x0002); /* 2.5 ulp: tie -> even (2) */
    CHECK(kvc_float_to_half(0x1p-14f) == 0x0400);
    CHECK(kvc_float_to_half(0x1.ff8p-15f) == 0x03ff); /* 1023 * 2^-24: largest subnormal */
    CHECK(kvc_float_to_half(0x1.ffcp-15f) == 0x0400); /* 1023.5 * 2^-24: tie, up to normal */
    CHECK(kvc_float_to_half(1.0f) == 0x3c00);
    CHECK(kvc_float_to_half(1.0f + 0x1p-11f) == 0x3c00);        /* tie -> even */
    CHECK(kvc_float_to_half(1.0f + 3.0f * 0x1p-11f) == 0x3c02); /* tie -> even (up) */
    CHECK(kvc_float_to_half(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
    CHECK(kvc_float_to_half(65504.0f) == 0x7bff);
    CHECK(kvc_float_to_half(65519.99f) == 0x7bff);
    CHECK(kvc_float_to_half(65520.0f) == 0x7c00); /* tie -> even is inf */
    CHECK(kvc_float_to_half(-65520.0f) == 0xfc00);
    CHECK(kvc_float_to_half(1e10f) == 0x7c00);
    CHECK(kvc_float_to_half(INFINITY) == 0x7c00);
    CHECK(kvc_float_to_half(-INFINITY) == 0xfc00);
    CHECK(kvc_float_to_half(FLT_MIN) == 0x0000);
    uint16_t qn = kvc_float_to_half(NAN);
    CHECK((qn & 0x7c00) == 0x7c00 && (qn & 0x03ff) != 0 && (qn & 0x0200) != 0);
    /* a signalling NaN whose payload lives only in the low bits stays a NaN */
    uint16_t sn = kvc_float_to_half(kvc_test_bits_f32(0xff800001u));
    CHECK((sn & 0x7c00) == 0x7c00 && (sn & 0x0200) != 0 && (sn & 0x8000) != 0);
    return 0;
}

static int half_exhaustive(void)
{
    /* every half survives half -> float -> half */
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        float f = kvc_half_to_float((uint16_t)h);
        uint16_t back = kvc_float_to_half(f);
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) {
            CHECK_MSG(isnan(f), "h=%04x", (unsigned)h);
            CHECK_MSG((back & 0x7c00u) == 0x7c00u && (back & 0x200u) && (back & 0x8000u) == (h & 0x8000u),
                      "h=%04x back=%04x", (unsigned)h, (unsigned)back);
            CHECK_MSG((back & 0x1ffu) == (h & 0x1ffu), "payload h=%04x back=%04x", (unsigned)h, (unsigned)back);
        } else {
            CHECK_MSG(back == h, "h=%04x back=%04x", (unsigned)h, (unsigned)back);
        }
    }
    /* float -> half is the nearest half, ties to even (sweep of float bits) */
    size_t checked = 0;
    for (uint64_t u = 0; u < 0x7f800000u; u += 997u) {
        for (int s = 0; s < 2; s++) {
            float f = kvc_test_bits_f32((uint32_t)u | (s ? 0x80000000u : 0u));
            uint16_t h = kvc_float_to_half(f);
            double x = fabs((double)f);
            uint16_t m = h & 0x7fffu;
            CHECK_MSG((h & 0x8000u) == (s ? 0x8000u : 0u), "sign of %a", (double)f);
            if (x >= 65520.0) {
                CHECK_MSG(m == 0x7c00u, "%a -> %04x (want inf)", (double)f, (unsigned)h);
                continue;
            }
            CHECK_MSG(m < 0x7c00u, "%a -> %04x", (double)f, (unsigned)h);
            double d = fabs((double)kvc_half_to_float(m) - x);
            double dlo = m > 0 ? fabs((double)kvc_half_to_float((uint16_t)(m - 1)) - x) : INFINITY;
            double dhi = m < 0x7bffu ? fabs((double)kvc_half_to_float((uint16_t)(m + 1)) - x) : INFINITY;
            CHECK_MSG(d <= dlo && d <= dhi, "%a -> %04x is not nearest", (double)f, (unsigned)h);
            if (d == dlo || d == dhi) CHECK_MSG((m & 1u) == 0, "%a -> %04x: tie not even", (double)f, (unsigned)h);
            checked++;
        }
    }
    printf("checked %zu floats\n", checked);
    return 0;
}

/* ------------------------------------------------------------------ */
/* parsing                                                            */
/* ------------------------------------------------------------------ */

static int parse_big_endian(void)
{
    uint8_t data[64], buf[256];
    const float v[6] = {1.0f, -2.5f, 0x1p-130f, 1e30f, -0.0f, 3.25f};
    for (int i = 0; i < 6; i++) put_f32(data + 4 * i, v[i], 1);
    size_t n = mk(buf, sizeof buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 1, data, 24);
    kvc_npy_array a;
    char err[256];
    kvc_status st = kvc_npy_parse(buf, n, &a, err, sizeof err);
    CHECK_MSG(st == KVC_OK, "%s", err);
    CHECK(a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 0 && a.count == 6);
    CHECK(a.stored == KVC_NPY_F32);
    CHECK(same_bits(a.data, v, 6));
    kvc_npy_free(&a);

    const uint16_t hv[4] = {0x3c00, 0xc100, 0x0001, 0x7bff};
    const float hf[4] = {1.0f, -2.5f, 0x1p-24f, 65504.0f};
    for (int i = 0; i < 4; i++) put_f16(data + 2 * i, hv[i], 1);
    n = mk(buf, sizeof buf, 1, "{'descr': '>f2', 'fortran_order': False, 'shape': (4,), }", 1, data, 8);
    st = kvc_npy_parse(buf, n, &a, err, sizeof err);
    CHECK_MSG(st == KVC_OK, "%s", err);
    CHECK(a.ndim == 1 && a.shape[0] == 4 && a.count == 4 && a.stored == KVC_NPY_F16);
    CHECK(same_bits(a.data, hf, 4));
    kvc_npy_free(&a);

    /* the same values little-endian */
    for (int i = 0; i < 4; i++) put_f16(data + 2 * i, hv[i], 0);
    n = mk(buf, sizeof buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", 1, data, 8);
    st = kvc_npy_parse(buf, n, &a, err, sizeof err);
    CHECK_MSG(st == KVC_OK, "%s", err);
    CHECK(same_bits(a.data, hf, 4));
    kvc_npy_free(&a);
    return 0;
}

static int parse_versions_and_spellings(void)
{
    uint8_t data[96], buf[512];
    float v[24];
    for (int i = 0; i < 24; i++) {
        v[i] = (float)i * 0.5f - 3.0f;
        put_f32(data + 4 * i, v[i], 0);
    }
    static const struct {
        unsigned major;
        const char *text;
        size_t ndim, s0, s1, s2;
    } ok_cases[] = {
        {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6), }", 2, 4, 6, 0},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", 3, 2, 3, 4},
        {1, "{'shape': (24,), 'fortran_order': False, 'descr': '<f4'}", 1, 24, 0, 0},
        {1, "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,12)}", 2, 2, 12, 0},
        {1, "  {\n 'fortran_order' :\tFalse ,\r\n 'descr' : '<f4' , 'shape' : ( 2 , 3 , 4 , ) , }  ", 3, 2, 3, 4},
        {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 8L), }", 2, 3, 8, 0},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0024,), }", 1, 24, 0, 0},
    };
    for (size_t c = 0; c < sizeof ok_cases / sizeof ok_cases[0]; c++) {
        size_t n = mk(buf, sizeof buf, ok_cases[c].major, ok_cases[c].text, 1, data, 96);
        kvc_npy_array a;
        char err[256];
        kvc_status st = kvc_npy_parse(buf, n, &a, err, sizeof err);
        CHECK_MSG(st == KVC_OK, "case %zu: %s", c, err);
        CHECK_MSG(a.ndim == ok_cases[c].ndim && a.shape[0] == ok_cases[c].s0 && a.shape[1] == ok_cases[c].s1 &&
                      a.shape[2] == ok_cases[c].s2 && a.count == 24,
                  "case %zu: ndim %zu shape %zu %zu %zu", c, a.ndim, a.shape[0], a.shape[1], a.shape[2]);
        CHECK(same_bits(a.data, v, 24));
        kvc_npy_free(&a);
    }
    /* header padded with a minimal newline only, no 64-byte alignment */
    {
        const char *text = "{'descr':'<f4','fortran_order':False,'shape':(24,)}\n";
        size_t n = mk(buf, sizeof buf, 1, text, 0, data, 96);
        kvc_npy_array a;
        char err[256];
        CHECK_MSG(kvc_npy_parse(buf, n, &a, err, sizeof err) == KVC_OK, "%s", err);
        CHECK(a.count == 24 && same_bits(a.data, v, 24));
        kvc_npy_free(&a);
    }
    return 0;
}

typedef struct hostile {
    const char *name;
    size_t len;
    uint8_t bytes[400];
} hostile;

static int check_rejected(const char *name, const uint8_t *buf, size_t n, const char *want)
{
    kvc_npy_array a;
    char err[256];
    memset(&a, 0x5a, sizeof a);
    memset(err, 0, sizeof err);
    kvc_status st = kvc_npy_parse(buf, n, &a, err, sizeof err);
    printf("  %-24s -> %d: %s\n", name, (int)st, err);
    CHECK_MSG(st == KVC_E_FORMAT, "%s: status %d", name, (int)st);
    CHECK_MSG(err[0] != '\0', "%s: empty message", name);
    CHECK_MSG(a.data == NULL && a.count == 0 && a.ndim == 0, "%s: out not zeroed", name);
    if (want != NULL) CHECK_MSG(strstr(err, want) != NULL, "%s: message lacks '%s'", name, want);
    /* without a message buffer, and with a tiny one: same verdict, NUL-terminated */
    CHECK(kvc_npy_parse(buf, n, &a, NULL, 0) == KVC_E_FORMAT);
    char tiny[6];
    memset(tiny, 'x', sizeof tiny);
    CHECK(kvc_npy_parse(buf, n, &a, tiny, sizeof tiny) == KVC_E_FORMAT);
    CHECK(tiny[5] == '\0' && strlen(tiny) == 5);
    kvc_npy_free(&a);
    return 0;
}

static int hostile_inputs(void)
{
    static uint8_t buf[1024], data[64];
    memset(data, 0, sizeof data);
    static const struct {
        const char *name;
        unsigned major;
        const char *text;
        size_t dlen;
        const char *want; /* substring of the message, or NULL */
    } cases[] = {
        {"fortran_order", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", 12,
         "fortran_order arrays are not supported"},
        {"fortran_order_int", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }", 12, "fortran_order"},
        {"descr_f8", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 24, "descr"},
        {"descr_i4", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 12, "descr"},
        {"descr_native", 1, "{'descr': '=f4', 'fortran_order': False, 'shape': (3,), }", 12, "descr"},
        {"descr_u1", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", 3, "descr"},
        {"descr_struct", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", 12, "structured"},
        {"descr_escape", 1, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (3,), }", 12, "escape"},
        {"shape_empty", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, "shape"},
        {"shape_4d", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 3), }", 12, "dimensions"},
        {"shape_not_tuple", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12, "not a tuple"},
        {"shape_list", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3], }", 12, "shape"},
        {"shape_negative", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", 12, "negative"},
        {"shape_zero", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 0, "zero"},
        {"shape_huge", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }", 16,
         "limit"},
        {"shape_digits", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999999999999999999999999,), }",
         16, "limit"},
        {"shape_product", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }", 16, "elements"},
        {"shape_product3", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2048, 2048, 513), }", 16, "elements"},
        {"shape_max_no_data", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648,), }", 16,
         "truncated data"},
        {"shape_float", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,), }", 12, "shape"},
        {"shape_unterminated", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,", 12, "shape"},
        {"missing_shape", 1, "{'descr': '<f4', 'fortran_order': False, }", 12, "missing key 'shape'"},
        {"missing_all", 1, "{}", 0, "missing"},
        {"unknown_key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1, }", 12, "unexpected key"},
        {"duplicate_key", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12,
         "duplicate"},
        {"unterminated_dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), ", 12, "unterminated dict"},
        {"unterminated_string", 1, "{'descr': '<f4, 'fortran_order': False, 'shape': (3,), }", 12, NULL},
        {"not_a_dict", 1, "['descr', '<f4']", 12, "not a dict"},
        {"text_after_dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x", 12, "after the dict"},
        {"double_comma", 1, "{'descr': '<f4',, 'fortran_order': False, 'shape': (3,), }", 12, NULL},
        {"missing_colon", 1, "{'descr' '<f4', 'fortran_order': False, 'shape': (3,), }", 12, "':'"},
        {"non_ascii", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), '\xc3\xa9': 1}", 12, "non-ASCII"},
        {"truncated_data", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 47,
         "truncated data: expected 48 bytes, found 47"},
        {"trailing_bytes", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 13, "trailing bytes"},
        {"odd_f16_data", 3, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", 7, "trailing bytes"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = mk(buf, sizeof buf, cases[c].major, cases[c].text, 1, data, cases[c].dlen);
        if (check_rejected(cases[c].name, buf, n, cases[c].want)) return 1;
    }

    /* byte-level damage on a valid file */
    uint8_t good[256];
    size_t gn = mk(good, sizeof good, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 1, data, 12);
    CHECK(gn == 128 + 12);
    {
        kvc_npy_array a;
        char err[128];
        CHECK_MSG(kvc_npy_parse(good, gn, &a, err, sizeof err) == KVC_OK, "%s", err);
        kvc_npy_free(&a);
    }
    if (check_rejected("empty", good, 0, "empty file")) return 1;
    if (check_rejected("null_empty", NULL, 0, "empty file")) return 1;
    if (check_rejected("magic_only", good, 6, "preamble")) return 1;
    if (check_rejected("truncated_preamble", good, 9, "preamble")) return 1;
    if (check_rejected("truncated_header", good, 40, "exceeds")) return 1;
    memcpy(buf, good, gn);
    buf[0] = 0x92;
    if (check_rejected("bad_magic", buf, gn, "magic")) return 1;
    memcpy(buf, good, gn);
    buf[6] = 4;
    if (check_rejected("version_4", buf, gn, "version")) return 1;
    memcpy(buf, good, gn);
    buf[7] = 1;
    if (check_rejected("version_1_1", buf, gn, "version")) return 1;
    memcpy(buf, good, gn);
    buf[8] = 0;
    buf[9] = 0;
    if (check_rejected("header_len_zero", buf, gn, "header length 0")) return 1;
    memcpy(buf, good, gn);
    buf[8] = 0xff;
    buf[9] = 0xff;
    if (check_rejected("header_len_beyond", buf, gn, "exceeds")) return 1;
    memcpy(buf, good, gn);
    buf[127] = ' '; /* final '\n' of the header */
    if (check_rejected("no_newline", buf, gn, "newline")) return 1;
    memcpy(buf, good, gn);
    buf[40] = 0x01;
    if (check_rejected("control_byte", buf, gn, "control")) return 1;
    /* version 2.0 with a 4 GiB header length */
    size_t n2 = mk(buf, sizeof buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 1, data, 12);
    buf[8] = buf[9] = buf[10] = buf[11] = 0xff;
    if (check_rejected("v2_header_len_huge", buf, n2, "exceeds")) return 1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* save format and API errors                                         */
/* ------------------------------------------------------------------ */

static int save_header_layout(void)
{
    tmpdir t;
    if (tmp_make(&t)) return 1;
    static const struct {
        size_t ndim, shape[3];
        kvc_npy_dtype dt;
        const char *dict;
    } cases[] = {
        {2, {3, 4, 0}, KVC_NPY_F32, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"},
        {1, {5, 0, 0}, KVC_NPY_F32, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"},
        {3, {2, 3, 4}, KVC_NPY_F16, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3, 4), }"},
        {2, {1000000, 1, 0}, KVC_NPY_F16, "{'descr': '<f2', 'fortran_order': False, 'shape': (1000000, 1), }"},
    };
    float *zeros = calloc(1000000, sizeof(float));
    CHECK(zeros != NULL);
    static uint8_t raw[2100000];
    int rc = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] && rc == 0; c++) {
        char name[32];
        snprintf(name, sizeof name, "s%zu.npy", c);
        const char *path = tmp_path(&t, name);
        char err[256];
        kvc_status st = kvc_npy_save(path, zeros, cases[c].ndim, cases[c].shape, cases[c].dt, err, sizeof err);
        if (st != KVC_OK) {
            fprintf(stderr, "save: %s\n", err);
            rc = 1;
            break;
        }
        long n = read_file(path, raw, sizeof raw);
        size_t count = 1;
        for (size_t d = 0; d < cases[c].ndim; d++) count *= cases[c].shape[d];
        size_t es = cases[c].dt == KVC_NPY_F32 ? 4 : 2;
        size_t hdr = (size_t)raw[8] | ((size_t)raw[9] << 8);
        size_t total = 10 + hdr;
        size_t dl = strlen(cases[c].dict);
        int ok = n > 10 && memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0 && total % 64 == 0 &&
                 (size_t)n == total + count * es && raw[total - 1] == '\n' && memcmp(raw + 10, cases[c].dict, dl) == 0;
        for (size_t k = 10 + dl; ok && k < total - 1; k++) ok = raw[k] == ' ';
        if (!ok) {
            fprintf(stderr, "case %zu: bad layout (file %ld bytes, header %zu): %.*s\n", c, n, total,
                    (int)(total > 10 ? total - 10 : 0), (const char *)raw + 10);
            rc = 1;
        }
    }
    free(zeros);
    tmp_cleanup(&t);
    return rc;
}

static int api_errors(void)
{
    char err[256];
    kvc_npy_array a;
    const float v[4] = {1, 2, 3, 4};
    size_t shape[4] = {2, 2, 1, 1};

    CHECK(kvc_npy_parse((const uint8_t *)"x", 1, NULL, err, sizeof err) == KVC_E_ARG && err[0]);
    memset(&a, 0x5a, sizeof a);
    CHECK(kvc_npy_parse(NULL, 5, &a, err, sizeof err) == KVC_E_ARG && a.data == NULL);
    CHECK(kvc_npy_load(NULL, &a, err, sizeof err) == KVC_E_ARG);

    memset(&a, 0x5a, sizeof a);
    kvc_status st = kvc_npy_load("/nonexistent-dir/none.npy", &a, err, sizeof err);
    printf("  missing file -> %d: %s\n", (int)st, err);
    CHECK(st == KVC_E_ARG && a.data == NULL);
    CHECK(strstr(err, "cannot open") != NULL && strstr(err, "No such file") != NULL);

    tmpdir t;
    if (tmp_make(&t)) return 1;
    /* a directory cannot be loaded */
    st = kvc_npy_load(t.dir, &a, err, sizeof err);
    printf("  directory -> %d: %s\n", (int)st, err);
    int ok = st != KVC_OK && err[0] != '\0' && a.data == NULL;

    const char *p = tmp_path(&t, "e.npy");
    ok = ok && kvc_npy_save(NULL, v, 2, shape, KVC_NPY_F32, err, sizeof err) == KVC_E_ARG;
    ok = ok && kvc_npy_save(p, NULL, 2, shape, KVC_NPY_F32, err, sizeof err) == KVC_E_ARG;
    ok = ok && kvc_npy_save(p, v, 2, NULL, KVC_NPY_F32, err, sizeof err) == KVC_E_ARG;
    ok = ok && kvc_npy_save(p, v, 0, shape, KVC_NPY_F32, err, sizeof err) == KVC_E_ARG;
    ok = ok && kvc_npy_save(p, v, 4, shape, KVC_NPY_F32, err, sizeof err) == KVC_E_ARG;
    ok = ok && kvc_npy_save(p, v, 2, shape, (kvc_npy_dtype)7, err, sizeof err) == KVC_E_ARG;
    shape[1] = 0;
    ok = ok && kvc_npy_save(p, v, 2, shape, KVC_NPY_F32, err, sizeof err) == KVC_E_ARG;
    shape[1] = 2;
    size_t big[2] = {(size_t)1 << 20, (size_t)1 << 12};
    ok = ok && kvc_npy_save(p, v, 2, big, KVC_NPY_F32, err, sizeof err) == KVC_E_ARG;
    if (!ok) fprintf(stderr, "argument checks failed: %s\n", err);
    /* unwritable path */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no-such-dir/x.npy", t.dir);
    st = kvc_npy_save(bad, v, 2, shape, KVC_NPY_F32, err, sizeof err);
    printf("  unwritable -> %d: %s\n", (int)st, err);
    ok = ok && st == KVC_E_ARG && strstr(err, "cannot create") != NULL;
    /* a write error (disk full) is reported */
    if (access("/dev/full", W_OK) == 0) {
        st = kvc_npy_save("/dev/full", v, 2, shape, KVC_NPY_F32, err, sizeof err);
        printf("  /dev/full -> %d: %s\n", (int)st, err);
        ok = ok && st == KVC_E_ARG && strstr(err, "cannot write") != NULL;
    }
    /* a hostile file on disk: message names the file */
    FILE *fp = fopen(p, "wb");
    ok = ok && fp != NULL;
    if (fp) {
        fputs("\x93NUMPY\x01", fp);
        fclose(fp);
    }
    st = kvc_npy_load(p, &a, err, sizeof err);
    printf("  truncated file -> %d: %s\n", (int)st, err);
    ok = ok && st == KVC_E_FORMAT && strstr(err, "e.npy") != NULL && a.data == NULL;
    /* free is safe twice and on a zeroed array */
    kvc_npy_free(&a);
    kvc_npy_free(&a);
    kvc_npy_free(NULL);
    tmp_cleanup(&t);
    CHECK(ok);
    return 0;
}

/* kvc_npy_load on a pipe: no size hint, the read loop has to grow its buffer. */
static int load_from_pipe(void)
{
    enum { N = 100 * 50 };
    static uint8_t img[128 + 4 * N];
    static uint8_t data[4 * N];
    static float v[N];
    for (int i = 0; i < N; i++) {
        v[i] = (float)i * 0.125f - 7.0f;
        put_f32(data + 4 * i, v[i], 0);
    }
    size_t n =
        mk(img, sizeof img, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (100, 50), }", 1, data, sizeof data);
    CHECK(n == sizeof img);
    int fds[2];
    if (pipe(fds) != 0) {
        printf("pipe() failed: skipping\n");
        return KVC_TEST_SKIP;
    }
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
    if (access(path, R_OK) != 0) {
        printf("%s is not available: skipping\n", path);
        close(fds[0]);
        close(fds[1]);
        return KVC_TEST_SKIP;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        printf("fork() failed: skipping\n");
        return KVC_TEST_SKIP;
    }
    if (pid == 0) { /* writer */
        close(fds[0]);
        size_t off = 0;
        while (off < n) {
            ssize_t w = write(fds[1], img + off, n - off);
            if (w <= 0) _exit(1);
            off += (size_t)w;
        }
        close(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    kvc_npy_array a;
    char err[256];
    kvc_status st = kvc_npy_load(path, &a, err, sizeof err);
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    CHECK_MSG(st == KVC_OK, "%s", err);
    CHECK(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    int ok = a.ndim == 2 && a.shape[0] == 100 && a.shape[1] == 50 && same_bits(a.data, v, N);
    kvc_npy_free(&a);
    CHECK(ok);
    return 0;
}

/* The committed fuzz seed corpus (tests/fuzz/corpus/npy, found next to this
 * source file): every valid_* file parses, every bad_* file is rejected. */
static int corpus_verdicts(void)
{
    char dir[1024];
    const char *src = __FILE__;
    const char *slash = strrchr(src, '/');
    if (slash == NULL) {
        printf("source path '%s' is not absolute: skipping\n", src);
        return KVC_TEST_SKIP;
    }
    snprintf(dir, sizeof dir, "%.*s/../fuzz/corpus/npy", (int)(slash - src), src);
    DIR *d = opendir(dir);
    if (d == NULL) {
        printf("corpus directory %s not found: skipping\n", dir);
        return KVC_TEST_SKIP;
    }
    int rc = 0, nvalid = 0, nbad = 0;
    struct dirent *e;
    static uint8_t raw[1 << 16];
    while ((e = readdir(d)) != NULL && rc == 0) {
        int is_valid = strncmp(e->d_name, "valid_", 6) == 0;
        int is_bad = strncmp(e->d_name, "bad_", 4) == 0;
        if (!is_valid && !is_bad) continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        long n = read_file(path, raw, sizeof raw);
        if (n < 0 || n == (long)sizeof raw) {
            fprintf(stderr, "cannot read %s\n", path);
            rc = 1;
            break;
        }
        kvc_npy_array a;
        char err[256];
        kvc_status st = kvc_npy_parse(raw, (size_t)n, &a, err, sizeof err);
        printf("  %-32s -> %d %s\n", e->d_name, (int)st, st == KVC_OK ? "" : err);
        if (is_valid && st != KVC_OK) rc = 1;
        if (is_bad && (st != KVC_E_FORMAT || a.data != NULL || err[0] == '\0')) rc = 1;
        nvalid += is_valid;
        nbad += is_bad;
        kvc_npy_free(&a);
    }
    closedir(d);
    CHECK(rc == 0);
    CHECK_MSG(nvalid > 0 && nbad > 0, "%d valid, %d bad files", nvalid, nbad);
    return 0;
}

/* ------------------------------------------------------------------ */
/* numpy interoperability (skipped without python3 + numpy)           */
/* ------------------------------------------------------------------ */

static const char *interop_py =
    "import sys, numpy as np\n"
    "d = sys.argv[1]\n"
    "for name, shape, dt in (('o2.npy', (3, 4), '<f4'), ('o1.npy', (5,), '<f4'), ('o3.npy', (2, 3, 4), '<f2')):\n"
    "    a = np.load(d + '/' + name)\n"
    "    print(name, a.shape, a.dtype)\n"
    "    assert a.shape == shape and a.dtype == np.dtype(dt), (a.shape, a.dtype)\n"
    "    want = (np.arange(a.size, dtype=np.float32) * 0.5 - 1.0).reshape(shape)\n"
    "    assert np.array_equal(a.astype(np.float32), want)\n"
    "    np.save(d + '/np_' + name, a)\n"
    "a = (np.arange(12, dtype=np.float32) * 0.25 - 1).reshape(3, 4)\n"
    "np.save(d + '/be.npy', a.astype('>f4'))\n"
    "np.save(d + '/h.npy', a.astype('<f2'))\n"
    "with open(d + '/v2.npy', 'wb') as f:\n"
    "    np.lib.format.write_array(f, a.reshape(2, 3, 2), version=(2, 0))\n";

static int numpy_interop(void)
{
    if (system("python3 -c \"import numpy\" >/dev/null 2>&1") != 0) {
        printf("python3 with numpy not available: skipping\n");
        return KVC_TEST_SKIP;
    }
    tmpdir t;
    if (tmp_make(&t)) return 1;
    int ok = 1;
    const char *script = tmp_path(&t, "interop.py");
    FILE *fp = fopen(script, "w");
    ok = fp != NULL;
    if (fp) {
        fputs(interop_py, fp);
        fclose(fp);
    }
    static const char *names[3] = {"o2.npy", "o1.npy", "o3.npy"};
    const size_t shapes[3][3] = {{3, 4, 0}, {5, 0, 0}, {2, 3, 4}};
    const size_t ndims[3] = {2, 1, 3};
    const kvc_npy_dtype dts[3] = {KVC_NPY_F32, KVC_NPY_F32, KVC_NPY_F16};
    float vals[24];
    for (int i = 0; i < 24; i++) vals[i] = (float)i * 0.5f - 1.0f;
    char err[256];
    const char *ours[3];
    for (int k = 0; ok && k < 3; k++) {
        ours[k] = tmp_path(&t, names[k]);
        ok = kvc_npy_save(ours[k], vals, ndims[k], shapes[k], dts[k], err, sizeof err) == KVC_OK;
        if (!ok) fprintf(stderr, "save: %s\n", err);
    }
    const char *theirs[3];
    for (int k = 0; k < 3; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "np_%s", names[k]);
        theirs[k] = tmp_path(&t, nm);
    }
    const char *be = tmp_path(&t, "be.npy");
    const char *h = tmp_path(&t, "h.npy");
    const char *v2 = tmp_path(&t, "v2.npy");
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", script, t.dir);
    if (ok && system(cmd) != 0) {
        fprintf(stderr, "numpy could not read the files written here\n");
        ok = 0;
    }
    /* numpy re-saves our arrays byte for byte identically */
    static uint8_t a_raw[4096], b_raw[4096];
    for (int k = 0; ok && k < 3; k++) {
        long na = read_file(ours[k], a_raw, sizeof a_raw);
        long nb = read_file(theirs[k], b_raw, sizeof b_raw);
        ok = na > 0 && na == nb && memcmp(a_raw, b_raw, (size_t)na) == 0;
        if (!ok) fprintf(stderr, "%s differs from numpy's own output (%ld vs %ld bytes)\n", names[k], na, nb);
    }
    /* files written by numpy load here */
    const char *loads[3] = {be, h, v2};
    const kvc_npy_dtype ldt[3] = {KVC_NPY_F32, KVC_NPY_F16, KVC_NPY_F32};
    for (int k = 0; ok && k < 3; k++) {
        kvc_npy_array a;
        kvc_status st = kvc_npy_load(loads[k], &a, err, sizeof err);
        ok = st == KVC_OK && a.count == 12 && a.stored == ldt[k];
        for (size_t i = 0; ok && i < 12; i++) ok = a.data[i] == (float)i * 0.25f - 1.0f;
        if (!ok) fprintf(stderr, "%s: status %d %s\n", loads[k], (int)st, err);
        kvc_npy_free(&a);
    }
    tmp_cleanup(&t);
    CHECK(ok);
    return 0;
}

static const kvc_test_case cases[] = {
    {"roundtrip_f32_2d", roundtrip_f32_2d},
    {"roundtrip_f32_3d", roundtrip_f32_3d},
    {"roundtrip_f16", roundtrip_f16},
    {"half_special_values", half_special_values},
    {"half_exhaustive", half_exhaustive},
    {"parse_big_endian", parse_big_endian},
    {"parse_versions_and_spellings", parse_versions_and_spellings},
    {"hostile_inputs", hostile_inputs},
    {"save_header_layout", save_header_layout},
    {"api_errors", api_errors},
    {"load_from_pipe", load_from_pipe},
    {"corpus_verdicts", corpus_verdicts},
    {"numpy_interop", numpy_interop},
};

KVC_TEST_MAIN(cases)
