/* GGUF reader: see kvc_gguf.h. Little-endian files on a little-endian host
 * (the format's default); a big-endian file fails the magic check. */
#include "kvc_gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_npy.h" /* kvc_half_to_float */

#define GGUF_MAGIC             0x46554747u /* "GGUF" */
#define GGUF_DEFAULT_ALIGNMENT 32u

typedef struct cursor {
    const uint8_t *buf;
    size_t len, pos;
    char *err;
    size_t errlen;
} cursor;

static kvc_status fail(cursor *c, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return KVC_E_FORMAT;
}

static int take(cursor *c, size_t n, size_t *at)
{
    if (n > c->len - c->pos) return 0;
    *at = c->pos;
    c->pos += n;
    return 1;
}

static int rd_u32(cursor *c, uint32_t *v)
{
    size_t at;
    if (!take(c, 4, &at)) return 0;
    memcpy(v, c->buf + at, 4);
    return 1;
}

static int rd_u64(cursor *c, uint64_t *v)
{
    size_t at;
    if (!take(c, 8, &at)) return 0;
    memcpy(v, c->buf + at, 8);
    return 1;
}

/* A GGUF string: uint64 length, bytes. */
static int rd_str(cursor *c, size_t *off, size_t *len)
{
    uint64_t n;
    if (!rd_u64(c, &n) || n > c->len - c->pos) return 0;
    *off = c->pos;
    *len = (size_t)n;
    c->pos += (size_t)n;
    return 1;
}

static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case KVC_GGUF_U8:
    case KVC_GGUF_I8:
    case KVC_GGUF_BOOL: return 1;
    case KVC_GGUF_U16:
    case KVC_GGUF_I16: return 2;
    case KVC_GGUF_U32:
    case KVC_GGUF_I32:
    case KVC_GGUF_F32: return 4;
    case KVC_GGUF_U64:
    case KVC_GGUF_I64:
    case KVC_GGUF_F64: return 8;
    }
    return 0;
}

/* ggml storage: elements per block and bytes per block (0 = unknown type). */
static void type_block(uint32_t t, uint64_t *elems, uint64_t *bytes)
{
    static const struct {
        uint32_t t;
        uint32_t e, b;
    } tab[] = {{0, 1, 4},      {1, 1, 2},      {2, 32, 18},    {3, 32, 20},    {6, 32, 22},
               {7, 32, 24},    {8, 32, 34},    {9, 32, 36},    {10, 256, 84},  {11, 256, 110},
               {12, 256, 144}, {13, 256, 176}, {14, 256, 210}, {15, 256, 292}, {24, 1, 1},
               {25, 1, 2},     {26, 1, 4},     {27, 1, 8},     {28, 1, 8},     {30, 1, 2}};
    *elems = *bytes = 0;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (tab[i].t == t) *elems = tab[i].e, *bytes = tab[i].b;
}

static kvc_status parse_value(cursor *c, kvc_gguf_kv *kv)
{
    kv->count = 1;
    kv->elem_type = kv->type;
    if (kv->type == KVC_GGUF_STRING) {
        size_t off, len;
        kv->value_off = c->pos;
        if (!rd_str(c, &off, &len)) return fail(c, "string value runs past the end of the file");
        return KVC_OK;
    }
    if (kv->type == KVC_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (!rd_u32(c, &et) || !rd_u64(c, &n)) return fail(c, "array header runs past the end of the file");
        kv->elem_type = et;
        kv->count = n;
        kv->value_off = c->pos;
        if (et == KVC_GGUF_STRING) {
            if (n > (c->len - c->pos) / 8) return fail(c, "array of %llu strings cannot fit", (unsigned long long)n);
            for (uint64_t i = 0; i < n; i++) {
                size_t off, len;
                if (!rd_str(c, &off, &len))
                    return fail(c, "string %llu of an array runs past the end", (unsigned long long)i);
            }
            return KVC_OK;
        }
        const size_t es = scalar_size(et);
        if (es == 0) return fail(c, "array element type %u is not supported (nested arrays included)", et);
        if (n > (c->len - c->pos) / es)
            return fail(c, "array of %llu elements runs past the end", (unsigned long long)n);
        c->pos += (size_t)n * es;
        return KVC_OK;
    }
    const size_t es = scalar_size(kv->type);
    if (es == 0) return fail(c, "unknown metadata value type %u", kv->type);
    size_t at;
    if (!take(c, es, &at)) return fail(c, "value runs past the end of the file");
    kv->value_off = at;
    return KVC_OK;
}

static int key_is(const kvc_gguf *g, size_t off, size_t len, const char *key)
{
    return strlen(key) == len && memcmp(g->buf + off, key, len) == 0;
}

typedef struct extent {
    size_t off, bytes;
    uint64_t index;
} extent;

static int by_offset(const void *a, const void *b)
{
    const size_t x = ((const extent *)a)->off, y = ((const extent *)b)->off;
    return x < y ? -1 : x > y;
}

/* Tensor data must not overlap: a file whose tensors share bytes is not what
 * a writer produces, and a loader would read one tensor's bytes as another's. */
static kvc_status check_no_overlap(const kvc_gguf *g, cursor *c)
{
    extent *e = malloc((size_t)g->n_tensors * sizeof(extent));
    if (!e) return fail(c, "out of memory checking %llu tensors", (unsigned long long)g->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        e[i].off = g->tensors[i].data_off, e[i].bytes = g->tensors[i].data_bytes, e[i].index = i;
    }
    qsort(e, (size_t)g->n_tensors, sizeof(extent), by_offset);
    kvc_status rc = KVC_OK;
    size_t last_end = 0;
    uint64_t last = 0;
    for (uint64_t i = 0; i < g->n_tensors && rc == KVC_OK; i++) {
        if (e[i].bytes == 0) continue;
        if (i > 0 && e[i].off < last_end)
            rc = fail(c, "tensor %llu data (at %zu) overlaps tensor %llu (which ends at %zu)",
                      (unsigned long long)e[i].index, e[i].off, (unsigned long long)last, last_end);
        last_end = e[i].off + e[i].bytes, last = e[i].index;
    }
    free(e);
    return rc;
}

kvc_status kvc_gguf_parse(const uint8_t *buf, size_t len, kvc_gguf *g, char *err, size_t errlen)
{
    if (g == NULL) return KVC_E_ARG;
    memset(g, 0, sizeof *g);
    if (err && errlen) err[0] = 0;
    cursor c = {buf, buf ? len : 0, 0, err, errlen};
    uint32_t magic, version = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    if (!rd_u32(&c, &magic) || magic != GGUF_MAGIC) return fail(&c, "not a GGUF file (bad magic)");
    if (!rd_u32(&c, &version) || (version != 2 && version != 3))
        return fail(&c, "GGUF version %u is not supported (2 or 3)", version);
    if (!rd_u64(&c, &n_tensors) || !rd_u64(&c, &n_kv)) return fail(&c, "truncated header");
    /* every entry takes at least 12 bytes (kv) or 24 (tensor): bound the counts before allocating */
    if (n_kv > len / 12 || n_tensors > len / 24)
        return fail(&c, "implausible counts: %llu key-values, %llu tensors in %zu bytes", (unsigned long long)n_kv,
                    (unsigned long long)n_tensors, len);
    g->version = version, g->n_tensors = n_tensors, g->n_kv = n_kv;
    g->buf = buf, g->len = len;
    g->kv = calloc(g->n_kv ? (size_t)g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) {
        kvc_gguf_free(g);
        return KVC_E_CAPACITY;
    }
    kvc_status rc = KVC_OK;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < g->n_kv && rc == KVC_OK; i++) {
        kvc_gguf_kv *kv = &g->kv[i];
        if (!rd_str(&c, &kv->key_off, &kv->key_len)) {
            rc = fail(&c, "key %llu runs past the end of the file", (unsigned long long)i);
            break;
        }
        if (!rd_u32(&c, &kv->type)) {
            rc = fail(&c, "type of key %llu runs past the end of the file", (unsigned long long)i);
            break;
        }
        rc = parse_value(&c, kv);
        if (rc == KVC_OK && key_is(g, kv->key_off, kv->key_len, "general.alignment")) {
            uint32_t a;
            if (kv->type != KVC_GGUF_U32)
                rc = fail(&c, "general.alignment is not a uint32");
            else {
                memcpy(&a, buf + kv->value_off, 4);
                if (a == 0 || (a & (a - 1)) != 0 || a > 65536)
                    rc = fail(&c, "general.alignment %u is not a power of two <= 65536", a);
                else
                    g->alignment = a;
            }
        }
    }
    for (uint64_t i = 0; i < g->n_tensors && rc == KVC_OK; i++) {
        kvc_gguf_tensor *t = &g->tensors[i];
        uint64_t off;
        if (!rd_str(&c, &t->name_off, &t->name_len) || !rd_u32(&c, &t->n_dims)) {
            rc = fail(&c, "tensor info %llu runs past the end of the file", (unsigned long long)i);
            break;
        }
        if (t->n_dims < 1 || t->n_dims > 4) {
            rc = fail(&c, "tensor %llu has %u dimensions (1..4 supported)", (unsigned long long)i, t->n_dims);
            break;
        }
        t->n_elems = 1;
        for (uint32_t dd = 0; dd < t->n_dims && rc == KVC_OK; dd++) {
            if (!rd_u64(&c, &t->dims[dd]))
                rc = fail(&c, "tensor %llu dims run past the end", (unsigned long long)i);
            else if (t->dims[dd] == 0 || t->dims[dd] > ((uint64_t)1 << 40) / t->n_elems)
                rc = fail(&c, "tensor %llu has an empty or huge shape", (unsigned long long)i);
            else
                t->n_elems *= t->dims[dd];
        }
        if (rc != KVC_OK) break;
        if (!rd_u32(&c, &t->type) || !rd_u64(&c, &off)) {
            rc = fail(&c, "tensor %llu type/offset run past the end", (unsigned long long)i);
            break;
        }
        uint64_t be, bb;
        type_block(t->type, &be, &bb);
        if (be == 0) {
            rc = fail(&c, "tensor %llu has unknown storage type %u", (unsigned long long)i, t->type);
            break;
        }
        if (t->dims[0] % be != 0) {
            rc = fail(&c, "tensor %llu: row of %llu elements is not a whole number of %llu-element blocks",
                      (unsigned long long)i, (unsigned long long)t->dims[0], (unsigned long long)be);
            break;
        }
        t->data_bytes = (size_t)(t->n_elems / be * bb);
        t->data_off = (size_t)off; /* relative until the data section is known */
    }
    if (rc == KVC_OK) {
        size_t start = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
        if (start > len && g->n_tensors > 0) rc = fail(&c, "data section starts past the end of the file");
        g->data_start = start;
        for (uint64_t i = 0; i < g->n_tensors && rc == KVC_OK; i++) {
            kvc_gguf_tensor *t = &g->tensors[i];
            if (t->data_off % g->alignment != 0)
                rc = fail(&c, "tensor %llu offset %zu is not aligned to %u", (unsigned long long)i, t->data_off,
                          g->alignment);
            else if (t->data_off > len - start || t->data_bytes > len - start - t->data_off)
                rc = fail(&c, "tensor %llu data (%zu bytes at %zu) runs past the end of the file",
                          (unsigned long long)i, t->data_bytes, t->data_off);
            else
                t->data_off += start;
        }
    }
    if (rc == KVC_OK && g->n_tensors > 1) rc = check_no_overlap(g, &c);
    if (rc != KVC_OK) kvc_gguf_free(g);
    return rc;
}

void kvc_gguf_free(kvc_gguf *g)
{
    if (!g) return;
    free(g->kv);
    free(g->tensors);
    memset(g, 0, sizeof *g);
}

const kvc_gguf_kv *kvc_gguf_find(const kvc_gguf *g, const char *key)
{
    for (uint64_t i = 0; g && i < g->n_kv; i++)
        if (key_is(g, g->kv[i].key_off, g->kv[i].key_len, key)) return &g->kv[i];
    return NULL;
}

kvc_status kvc_gguf_get_uint(const kvc_gguf *g, const char *key, uint64_t *out)
{
    const kvc_gguf_kv *kv = kvc_gguf_find(g, key);
    if (!kv || !out) return KVC_E_ARG;
    const uint8_t *p = g->buf + kv->value_off;
    uint64_t u = 0;
    int64_t s = 0;
    switch (kv->type) {
    case KVC_GGUF_U8: u = p[0]; break;
    case KVC_GGUF_U16: {
        uint16_t x;
        memcpy(&x, p, 2);
        u = x;
        break;
    }
    case KVC_GGUF_U32: {
        uint32_t x;
        memcpy(&x, p, 4);
        u = x;
        break;
    }
    case KVC_GGUF_U64: memcpy(&u, p, 8); break;
    case KVC_GGUF_I8: s = (int8_t)p[0]; goto sgn;
    case KVC_GGUF_I16: {
        int16_t x;
        memcpy(&x, p, 2);
        s = x;
        goto sgn;
    }
    case KVC_GGUF_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        s = x;
        goto sgn;
    }
    case KVC_GGUF_I64: memcpy(&s, p, 8); goto sgn;
    default: return KVC_E_ARG;
    }
    *out = u;
    return KVC_OK;
sgn:
    if (s < 0) return KVC_E_FORMAT;
    *out = (uint64_t)s;
    return KVC_OK;
}

kvc_status kvc_gguf_get_float(const kvc_gguf *g, const char *key, double *out)
{
    const kvc_gguf_kv *kv = kvc_gguf_find(g, key);
    if (!kv || !out) return KVC_E_ARG;
    if (kv->type == KVC_GGUF_F32) {
        float f;
        memcpy(&f, g->buf + kv->value_off, 4);
        *out = f;
    } else if (kv->type == KVC_GGUF_F64) {
        memcpy(out, g->buf + kv->value_off, 8);
    } else {
        return KVC_E_ARG;
    }
    return KVC_OK;
}

kvc_status kvc_gguf_get_string(const kvc_gguf *g, const char *key, const char **s, size_t *len)
{
    const kvc_gguf_kv *kv = kvc_gguf_find(g, key);
    if (!kv || kv->type != KVC_GGUF_STRING || !s || !len) return KVC_E_ARG;
    uint64_t n;
    memcpy(&n, g->buf + kv->value_off, 8);
    *s = (const char *)g->buf + kv->value_off + 8;
    *len = (size_t)n;
    return KVC_OK;
}

kvc_status kvc_gguf_array_strings(const kvc_gguf *g, const kvc_gguf_kv *kv, size_t *offs, size_t *lens)
{
    if (!g || !kv || kv->type != KVC_GGUF_ARRAY || kv->elem_type != KVC_GGUF_STRING) return KVC_E_ARG;
    size_t pos = kv->value_off;
    for (uint64_t i = 0; i < kv->count; i++) { /* bounds were checked by the parser */
        uint64_t n;
        memcpy(&n, g->buf + pos, 8);
        offs[i] = pos + 8;
        lens[i] = (size_t)n;
        pos += 8 + (size_t)n;
    }
    return KVC_OK;
}

const kvc_gguf_tensor *kvc_gguf_tensor_find(const kvc_gguf *g, const char *name)
{
    for (uint64_t i = 0; g && i < g->n_tensors; i++)
        if (key_is(g, g->tensors[i].name_off, g->tensors[i].name_len, name)) return &g->tensors[i];
    return NULL;
}

static float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return kvc_half_to_float(h);
}

kvc_status kvc_gguf_dequantize(const kvc_gguf *g, const kvc_gguf_tensor *t, float *out)
{
    const uint8_t *p = g->buf + t->data_off;
    const uint64_t n = t->n_elems;
    switch (t->type) {
    case KVC_GGML_F32: memcpy(out, p, (size_t)n * 4); return KVC_OK;
    case KVC_GGML_F16:
        for (uint64_t i = 0; i < n; i++) out[i] = half_at(p + 2 * i);
        return KVC_OK;
    case KVC_GGML_Q8_0: /* blocks of 32: f16 scale d, 32 int8; x = d q */
        for (uint64_t b = 0; b < n / 32; b++, p += 34) {
            const float d = half_at(p);
            for (int i = 0; i < 32; i++) out[b * 32 + i] = d * (float)(int8_t)p[2 + i];
        }
        return KVC_OK;
    case KVC_GGML_Q4_0: /* f16 d, 16 bytes; low nibbles are elements 0..15, high 16..31; x = d (q - 8) */
        for (uint64_t b = 0; b < n / 32; b++, p += 18) {
            const float d = half_at(p);
            for (int i = 0; i < 16; i++) {
                out[b * 32 + i] = d * (float)((p[2 + i] & 0x0F) - 8);
                out[b * 32 + 16 + i] = d * (float)((p[2 + i] >> 4) - 8);
            }
        }
        return KVC_OK;
    case KVC_GGML_Q4_1: /* f16 d, f16 m, 16 bytes; x = d q + m */
        for (uint64_t b = 0; b < n / 32; b++, p += 20) {
            const float d = half_at(p), m = half_at(p + 2);
            for (int i = 0; i < 16; i++) {
                out[b * 32 + i] = d * (float)(p[4 + i] & 0x0F) + m;
                out[b * 32 + 16 + i] = d * (float)(p[4 + i] >> 4) + m;
            }
        }
        return KVC_OK;
    }
    return KVC_E_UNSUPPORTED;
}
