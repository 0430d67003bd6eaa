/* GGUF reader: a file built in memory with every metadata type and the five
 * dequantised storage types, its lookups and values, and hostile variants
 * (every truncation, corrupted counts, offsets and types). */
#include <math.h>
#include <stdlib.h>

#include "kvc_gguf.h"
#include "kvc_npy.h"
#include "kvc_test.h"

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static void put(wbuf *w, const void *src, size_t n)
{
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 256;
        w->p = realloc(w->p, w->cap);
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}
static void put_u32(wbuf *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(wbuf *w, uint64_t v) { put(w, &v, 8); }
static void put_str(wbuf *w, const char *s)
{
    put_u64(w, strlen(s));
    put(w, s, strlen(s));
}
static void put_key(wbuf *w, const char *k, uint32_t type)
{
    put_str(w, k);
    put_u32(w, type);
}
static void put_f16(wbuf *w, float f)
{
    uint16_t h = kvc_float_to_half(f);
    put(w, &h, 2);
}

/* Offsets (relative to the data section) of the five tensors below. */
static size_t tensor_bytes[5] = {8 * 4, 8 * 2, 34, 18, 20};

static wbuf build(void)
{
    wbuf w = {0};
    put_u32(&w, 0x46554747u);
    put_u32(&w, 3);
    put_u64(&w, 5);  /* tensors */
    put_u64(&w, 10); /* kvs */
    put_key(&w, "general.architecture", KVC_GGUF_STRING);
    put_str(&w, "llama");
    put_key(&w, "llama.block_count", KVC_GGUF_U32);
    put_u32(&w, 30);
    put_key(&w, "llama.rope.freq_base", KVC_GGUF_F32);
    float fb = 100000.0f;
    put(&w, &fb, 4);
    put_key(&w, "x.u8", KVC_GGUF_U8);
    uint8_t u8 = 200;
    put(&w, &u8, 1);
    put_key(&w, "x.i16", KVC_GGUF_I16);
    int16_t i16 = -5;
    put(&w, &i16, 2);
    put_key(&w, "x.u64", KVC_GGUF_U64);
    put_u64(&w, 1ull << 40);
    put_key(&w, "x.f64", KVC_GGUF_F64);
    double f64 = 0.125;
    put(&w, &f64, 8);
    put_key(&w, "x.bool", KVC_GGUF_BOOL);
    uint8_t b = 1;
    put(&w, &b, 1);
    put_key(&w, "tokenizer.ggml.tokens", KVC_GGUF_ARRAY);
    put_u32(&w, KVC_GGUF_STRING);
    put_u64(&w, 3);
    put_str(&w, "<s>");
    put_str(&w, "hello");
    put_str(&w, "");
    put_key(&w, "x.arr_i32", KVC_GGUF_ARRAY);
    put_u32(&w, KVC_GGUF_I32);
    put_u64(&w, 2);
    put_u32(&w, 7);
    put_u32(&w, (uint32_t)-7);
    const char *names[5] = {"t.f32", "t.f16", "t.q8_0", "t.q4_0", "t.q4_1"};
    const uint32_t types[5] = {KVC_GGML_F32, KVC_GGML_F16, KVC_GGML_Q8_0, KVC_GGML_Q4_0, KVC_GGML_Q4_1};
    const uint64_t elems[5] = {8, 8, 32, 32, 32};
    uint64_t off = 0;
    for (int t = 0; t < 5; t++) {
        put_str(&w, names[t]);
        put_u32(&w, t == 0 ? 2 : 1);
        if (t == 0)
            put_u64(&w, 4), put_u64(&w, 2);
        else
            put_u64(&w, elems[t]);
        put_u32(&w, types[t]);
        put_u64(&w, off);
        off += (tensor_bytes[t] + 31) / 32 * 32;
    }
    while (w.n % 32) put(&w, "\0", 1);
    /* data */
    size_t start = w.n;
    for (int i = 0; i < 8; i++) {
        float f = (float)i - 2.5f;
        put(&w, &f, 4);
    }
    while ((w.n - start) % 32) put(&w, "\0", 1);
    for (int i = 0; i < 8; i++) put_f16(&w, 0.5f * (float)i);
    while ((w.n - start) % 32) put(&w, "\0", 1);
    put_f16(&w, 0.25f); /* Q8_0: d = 0.25, q = i - 16 */
    for (int i = 0; i < 32; i++) {
        int8_t q = (int8_t)(i - 16);
        put(&w, &q, 1);
    }
    while ((w.n - start) % 32) put(&w, "\0", 1);
    put_f16(&w, 2.0f); /* Q4_0: d = 2, nibble i%16 */
    for (int i = 0; i < 16; i++) {
        uint8_t q = (uint8_t)((i & 0x0F) | ((15 - i) << 4));
        put(&w, &q, 1);
    }
    while ((w.n - start) % 32) put(&w, "\0", 1);
    put_f16(&w, 0.5f); /* Q4_1: d = 0.5, m = -1 */
    put_f16(&w, -1.0f);
    for (int i = 0; i < 16; i++) {
        uint8_t q = (uint8_t)((i & 0x0F) | ((15 - i) << 4));
        put(&w, &q, 1);
    }
    return w;
}

static int gguf_parse_and_lookups(void)
{
    wbuf w = build();
    kvc_gguf g;
    char err[200];
    CHECK_MSG(kvc_gguf_parse(w.p, w.n, &g, err, sizeof err) == KVC_OK, "%s", err);
    CHECK(g.version == 3 && g.n_kv == 10 && g.n_tensors == 5 && g.alignment == 32);
    uint64_t u;
    double f;
    const char *s;
    size_t n;
    CHECK(kvc_gguf_get_uint(&g, "llama.block_count", &u) == KVC_OK && u == 30);
    CHECK(kvc_gguf_get_uint(&g, "x.u8", &u) == KVC_OK && u == 200);
    CHECK(kvc_gguf_get_uint(&g, "x.u64", &u) == KVC_OK && u == (1ull << 40));
    CHECK(kvc_gguf_get_uint(&g, "x.i16", &u) == KVC_E_FORMAT); /* negative */
    CHECK(kvc_gguf_get_float(&g, "llama.rope.freq_base", &f) == KVC_OK && f == 100000.0);
    CHECK(kvc_gguf_get_float(&g, "x.f64", &f) == KVC_OK && f == 0.125);
    CHECK(kvc_gguf_get_string(&g, "general.architecture", &s, &n) == KVC_OK && n == 5 && !memcmp(s, "llama", 5));
    CHECK(kvc_gguf_get_uint(&g, "missing", &u) == KVC_E_ARG);
    const kvc_gguf_kv *tk = kvc_gguf_find(&g, "tokenizer.ggml.tokens");
    CHECK(tk && tk->count == 3);
    size_t offs[3], lens[3];
    CHECK(kvc_gguf_array_strings(&g, tk, offs, lens) == KVC_OK);
    CHECK(lens[0] == 3 && lens[1] == 5 && lens[2] == 0 && !memcmp(w.p + offs[1], "hello", 5));
    CHECK(kvc_gguf_array_strings(&g, kvc_gguf_find(&g, "x.arr_i32"), offs, lens) == KVC_E_ARG);
    float out[32];
    const kvc_gguf_tensor *t = kvc_gguf_tensor_find(&g, "t.f32");
    CHECK(t && t->n_dims == 2 && t->dims[0] == 4 && t->dims[1] == 2 && t->n_elems == 8);
    CHECK(kvc_gguf_dequantize(&g, t, out) == KVC_OK);
    for (int i = 0; i < 8; i++) CHECK(out[i] == (float)i - 2.5f);
    CHECK(kvc_gguf_dequantize(&g, kvc_gguf_tensor_find(&g, "t.f16"), out) == KVC_OK);
    for (int i = 0; i < 8; i++) CHECK(out[i] == 0.5f * (float)i);
    CHECK(kvc_gguf_dequantize(&g, kvc_gguf_tensor_find(&g, "t.q8_0"), out) == KVC_OK);
    for (int i = 0; i < 32; i++) CHECK(out[i] == 0.25f * (float)(i - 16));
    CHECK(kvc_gguf_dequantize(&g, kvc_gguf_tensor_find(&g, "t.q4_0"), out) == KVC_OK);
    for (int i = 0; i < 16; i++) CHECK(out[i] == 2.0f * (float)(i - 8) && out[16 + i] == 2.0f * (float)(15 - i - 8));
    CHECK(kvc_gguf_dequantize(&g, kvc_gguf_tensor_find(&g, "t.q4_1"), out) == KVC_OK);
    for (int i = 0; i < 16; i++)
        CHECK(out[i] == 0.5f * (float)i - 1.0f && out[16 + i] == 0.5f * (float)(15 - i) - 1.0f);
    kvc_gguf_free(&g);
    free(w.p);
    return 0;
}

/* Every truncation and a set of corruptions: KVC_E_FORMAT with a message,
 * never a crash (run under ASan in CI). */
static int gguf_hostile_inputs(void)
{
    wbuf w = build();
    kvc_gguf g;
    char err[200];
    size_t rejected = 0;
    for (size_t cut = 0; cut < w.n; cut++) {
        kvc_status rc = kvc_gguf_parse(w.p, cut, &g, err, sizeof err);
        CHECK_MSG(rc == KVC_E_FORMAT, "cut %zu: status %d", cut, (int)rc);
        CHECK(err[0] != 0 && g.kv == NULL && g.n_kv == 0 && g.n_tensors == 0);
        rejected++;
    }
    printf("all %zu truncations rejected\n", rejected);
    struct {
        size_t at;
        uint64_t val;
        int width;
        const char *what;
    } bad[] = {{0, 0x12345678, 4, "magic"},
               {4, 4, 4, "version"},
               {8, 1ull << 60, 8, "tensor count"},
               {16, 1ull << 60, 8, "kv count"},
               {24, 1ull << 62, 8, "first key length"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *c = malloc(w.n);
        memcpy(c, w.p, w.n);
        memcpy(c + bad[i].at, &bad[i].val, (size_t)bad[i].width);
        CHECK(kvc_gguf_parse(c, w.n, &g, err, sizeof err) == KVC_E_FORMAT);
        CHECK(g.kv == NULL && g.n_kv == 0 && g.n_tensors == 0 && g.version == 0);
        printf("%s: %s\n", bad[i].what, err);
        free(c);
    }
    free(w.p);
    return 0;
}

static const kvc_test_case cases[] = {
    {"gguf_parse_and_lookups", gguf_parse_and_lookups},
    {"gguf_hostile_inputs", gguf_hostile_inputs},
};
KVC_TEST_MAIN(cases)
