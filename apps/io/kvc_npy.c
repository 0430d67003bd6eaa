/**
 * @file kvc_npy.c
 * @brief NumPy .npy reader and writer (see kvc_npy.h for the accepted subset).
 *
 * The reader never trusts a length from the file: the header length is checked
 * against the buffer, every shape integer is bounded while it is parsed, the
 * element count is multiplied with an overflow check, and the data size must
 * match the bytes that are left exactly. Nothing is allocated until the whole
 * header has been validated and the data size is known to be present, so an
 * allocation is never larger than twice the input.
 */
#include "kvc_npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* messages                                                           */
/* ------------------------------------------------------------------ */

#if defined(__GNUC__) || defined(__clang__)
#define KVC_NPY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KVC_NPY_PRINTF(a, b)
#endif

static void set_err(char *err, size_t errlen, const char *fmt, ...) KVC_NPY_PRINTF(3, 4);

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (n < 0) err[0] = '\0';
    err[errlen - 1] = '\0';
}

/* ------------------------------------------------------------------ */
/* half precision                                                     */
/* ------------------------------------------------------------------ */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float kvc_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float32 */
        float mag = (float)man * 5.9604644775390625e-8f;
        return bits_f32(sign | f32_bits(mag));
    }
    if (exp == 0x1fu) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t kvc_float_to_half(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
        return (uint16_t)(sign | 0x7c00u | 0x0200u | ((ax >> 13) & 0x03ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (incl. inf): rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {           /* >= 2^-14: normal half */
        uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 */
        r = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13;
        return (uint16_t)(sign | r);
    }
    if (ax <= 0x33000000u) /* <= 2^-25: ties to even give 0 */
        return sign;
    /* subnormal half: man * 2^-24 */
    uint32_t e = ax >> 23;                        /* 102 .. 112 */
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u; /* value = mant * 2^(e-150) */
    uint32_t shift = 126u - e;                    /* 14 .. 24 */
    uint32_t m = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (m & 1u))) m++;
    return (uint16_t)(sign | m); /* m == 0x400 is the smallest normal: still right */
}

/* ------------------------------------------------------------------ */
/* header parsing                                                     */
/* ------------------------------------------------------------------ */

typedef struct hdr {
    const uint8_t *s; /* header text (the dict and its padding) */
    size_t n;         /* its length */
    size_t i;         /* cursor */
    char *err;
    size_t errlen;
} hdr;

typedef struct hdr_fields {
    int have_descr, have_fortran, have_shape;
    kvc_npy_dtype dtype;
    int big_endian;
    size_t ndim;
    size_t shape[KVC_NPY_MAX_DIMS];
} hdr_fields;

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void skip_ws(hdr *h)
{
    while (h->i < h->n && is_ws(h->s[h->i])) h->i++;
}

static int at_end(const hdr *h) { return h->i >= h->n; }

/* A quoted string without escapes; on success (str, slen) point into the header. */
static kvc_status parse_string(hdr *h, const uint8_t **str, size_t *slen, const char *what)
{
    if (at_end(h) || (h->s[h->i] != '\'' && h->s[h->i] != '"')) {
        set_err(h->err, h->errlen, "header: expected a quoted %s at header offset %zu", what, h->i);
        return KVC_E_FORMAT;
    }
    uint8_t q = h->s[h->i++];
    size_t start = h->i;
    while (h->i < h->n && h->s[h->i] != q) {
        uint8_t c = h->s[h->i];
        if (c == '\\') {
            set_err(h->err, h->errlen, "header: escape sequences in strings are not supported (offset %zu)", h->i);
            return KVC_E_FORMAT;
        }
        if (c == '\n' || c == '\r') break;
        h->i++;
    }
    if (at_end(h) || h->s[h->i] != q) {
        set_err(h->err, h->errlen, "header: unterminated string starting at header offset %zu", start - 1);
        return KVC_E_FORMAT;
    }
    *str = h->s + start;
    *slen = h->i - start;
    h->i++; /* closing quote */
    return KVC_OK;
}

static int str_eq(const uint8_t *s, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    return n == m && memcmp(s, lit, m) == 0;
}

static kvc_status parse_descr(hdr *h, hdr_fields *f)
{
    if (!at_end(h) && h->s[h->i] == '[') {
        set_err(h->err, h->errlen, "unsupported descr: structured dtypes are not supported");
        return KVC_E_FORMAT;
    }
    const uint8_t *s;
    size_t n;
    kvc_status st = parse_string(h, &s, &n, "descr");
    if (st != KVC_OK) return st;
    if (str_eq(s, n, "<f4")) {
        f->dtype = KVC_NPY_F32;
        f->big_endian = 0;
    } else if (str_eq(s, n, ">f4")) {
        f->dtype = KVC_NPY_F32;
        f->big_endian = 1;
    } else if (str_eq(s, n, "<f2")) {
        f->dtype = KVC_NPY_F16;
        f->big_endian = 0;
    } else if (str_eq(s, n, ">f2")) {
        f->dtype = KVC_NPY_F16;
        f->big_endian = 1;
    } else {
        int shown = n > 24 ? 24 : (int)n;
        set_err(h->err, h->errlen, "unsupported descr '%.*s'%s (only '<f4', '>f4', '<f2', '>f2' are accepted)", shown,
                (const char *)s, n > 24 ? "..." : "");
        return KVC_E_FORMAT;
    }
    return KVC_OK;
}

static kvc_status parse_fortran(hdr *h)
{
    size_t start = h->i;
    while (h->i < h->n) {
        uint8_t c = h->s[h->i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) break;
        h->i++;
    }
    const uint8_t *w = h->s + start;
    size_t n = h->i - start;
    if (str_eq(w, n, "False")) return KVC_OK;
    if (str_eq(w, n, "True")) {
        set_err(h->err, h->errlen, "fortran_order arrays are not supported");
        return KVC_E_FORMAT;
    }
    set_err(h->err, h->errlen, "header: fortran_order must be True or False (header offset %zu)", start);
    return KVC_E_FORMAT;
}

/* One non-negative decimal integer (an optional Python 2 'L' suffix is
 * accepted). Values above KVC_NPY_MAX_ELEMS are rejected while the digits are
 * read, so the accumulator can never overflow. */
static kvc_status parse_dim(hdr *h, size_t *out)
{
    size_t start = h->i;
    if (!at_end(h) && (h->s[h->i] == '-' || h->s[h->i] == '+')) {
        set_err(h->err, h->errlen, "shape: %s dimension at header offset %zu",
                h->s[h->i] == '-' ? "negative" : "signed", start);
        return KVC_E_FORMAT;
    }
    uint64_t v = 0;
    size_t digits = 0;
    while (h->i < h->n && h->s[h->i] >= '0' && h->s[h->i] <= '9') {
        v = v * 10u + (uint64_t)(h->s[h->i] - '0');
        if (v > (uint64_t)KVC_NPY_MAX_ELEMS) {
            set_err(h->err, h->errlen,
                    "shape: dimension at header offset %zu is larger than the limit of %llu elements", start,
                    (unsigned long long)KVC_NPY_MAX_ELEMS);
            return KVC_E_FORMAT;
        }
        digits++;
        h->i++;
    }
    if (digits == 0) {
        set_err(h->err, h->errlen, "shape: expected an integer at header offset %zu", start);
        return KVC_E_FORMAT;
    }
    if (!at_end(h) && (h->s[h->i] == 'L' || h->s[h->i] == 'l')) h->i++;
    if (!at_end(h)) {
        uint8_t c = h->s[h->i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == '.') {
            set_err(h->err, h->errlen, "shape: dimension at header offset %zu is not a plain integer", start);
            return KVC_E_FORMAT;
        }
    }
    if (v == 0) {
        set_err(h->err, h->errlen, "shape: zero-size dimension (empty arrays are not supported)");
        return KVC_E_FORMAT;
    }
    *out = (size_t)v;
    return KVC_OK;
}

static kvc_status parse_shape(hdr *h, hdr_fields *f)
{
    if (at_end(h) || h->s[h->i] != '(') {
        set_err(h->err, h->errlen, "shape: expected a tuple '(' at header offset %zu", h->i);
        return KVC_E_FORMAT;
    }
    size_t open = h->i++;
    size_t nd = 0;
    int trailing_comma = 0;
    skip_ws(h);
    while (!at_end(h) && h->s[h->i] != ')') {
        if (nd == KVC_NPY_MAX_DIMS) {
            set_err(h->err, h->errlen, "shape: more than %u dimensions are not supported", (unsigned)KVC_NPY_MAX_DIMS);
            return KVC_E_FORMAT;
        }
        kvc_status st = parse_dim(h, &f->shape[nd]);
        if (st != KVC_OK) return st;
        nd++;
        trailing_comma = 0;
        skip_ws(h);
        if (at_end(h)) break;
        if (h->s[h->i] == ',') {
            h->i++;
            trailing_comma = 1;
            skip_ws(h);
        } else if (h->s[h->i] != ')') {
            set_err(h->err, h->errlen, "shape: expected ',' or ')' at header offset %zu", h->i);
            return KVC_E_FORMAT;
        }
    }
    if (at_end(h)) {
        set_err(h->err, h->errlen, "shape: unterminated tuple starting at header offset %zu", open);
        return KVC_E_FORMAT;
    }
    h->i++; /* ')' */
    if (nd == 0) {
        set_err(h->err, h->errlen, "shape: () (0-d arrays) are not supported");
        return KVC_E_FORMAT;
    }
    if (nd == 1 && !trailing_comma) {
        set_err(h->err, h->errlen, "shape: (%zu) is not a tuple (a 1-d shape is written (%zu,))", f->shape[0],
                f->shape[0]);
        return KVC_E_FORMAT;
    }
    f->ndim = nd;
    return KVC_OK;
}

static kvc_status parse_dict(hdr *h, hdr_fields *f)
{
    skip_ws(h);
    if (at_end(h) || h->s[h->i] != '{') {
        set_err(h->err, h->errlen, "header is not a dict literal (no '{')");
        return KVC_E_FORMAT;
    }
    h->i++;
    for (;;) {
        skip_ws(h);
        if (at_end(h)) break;
        if (h->s[h->i] == '}') break;

        size_t key_at = h->i;
        const uint8_t *key;
        size_t klen;
        kvc_status st = parse_string(h, &key, &klen, "key");
        if (st != KVC_OK) return st;
        skip_ws(h);
        if (at_end(h) || h->s[h->i] != ':') {
            set_err(h->err, h->errlen, "header: expected ':' after the key at header offset %zu", key_at);
            return KVC_E_FORMAT;
        }
        h->i++;
        skip_ws(h);

        int *seen;
        if (str_eq(key, klen, "descr"))
            seen = &f->have_descr;
        else if (str_eq(key, klen, "fortran_order"))
            seen = &f->have_fortran;
        else if (str_eq(key, klen, "shape"))
            seen = &f->have_shape;
        else {
            int shown = klen > 24 ? 24 : (int)klen;
            set_err(h->err, h->errlen, "header: unexpected key '%.*s'%s", shown, (const char *)key,
                    klen > 24 ? "..." : "");
            return KVC_E_FORMAT;
        }
        if (*seen) {
            set_err(h->err, h->errlen, "header: duplicate key '%.*s'", (int)klen, (const char *)key);
            return KVC_E_FORMAT;
        }
        *seen = 1;
        if (seen == &f->have_descr)
            st = parse_descr(h, f);
        else if (seen == &f->have_fortran)
            st = parse_fortran(h);
        else
            st = parse_shape(h, f);
        if (st != KVC_OK) return st;

        skip_ws(h);
        if (at_end(h)) break;
        if (h->s[h->i] == ',') {
            h->i++;
            continue;
        }
        if (h->s[h->i] != '}') {
            set_err(h->err, h->errlen, "header: expected ',' or '}' at header offset %zu", h->i);
            return KVC_E_FORMAT;
        }
    }
    if (at_end(h)) {
        set_err(h->err, h->errlen, "header: unterminated dict (no closing '}')");
        return KVC_E_FORMAT;
    }
    h->i++; /* '}' */
    skip_ws(h);
    if (!at_end(h)) {
        set_err(h->err, h->errlen, "header: unexpected text after the dict at header offset %zu", h->i);
        return KVC_E_FORMAT;
    }
    if (!f->have_descr || !f->have_fortran || !f->have_shape) {
        set_err(h->err, h->errlen, "header: missing key%s%s%s", f->have_descr ? "" : " 'descr'",
                f->have_fortran ? "" : " 'fortran_order'", f->have_shape ? "" : " 'shape'");
        return KVC_E_FORMAT;
    }
    return KVC_OK;
}

/* ------------------------------------------------------------------ */
/* parse                                                              */
/* ------------------------------------------------------------------ */

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

kvc_status kvc_npy_parse(const uint8_t *buf, size_t len, kvc_npy_array *out, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0) err[0] = '\0';
    if (out == NULL) {
        set_err(err, errlen, "kvc_npy_parse: out is NULL");
        return KVC_E_ARG;
    }
    memset(out, 0, sizeof *out);
    if (buf == NULL && len != 0) {
        set_err(err, errlen, "kvc_npy_parse: buf is NULL but len is %zu", len);
        return KVC_E_ARG;
    }

    /* preamble */
    if (len == 0) {
        set_err(err, errlen, "empty file (0 bytes): not a .npy file (bad magic)");
        return KVC_E_FORMAT;
    }
    if (len < sizeof npy_magic || memcmp(buf, npy_magic, sizeof npy_magic) != 0) {
        set_err(err, errlen, "not a .npy file (bad magic, %zu bytes)", len);
        return KVC_E_FORMAT;
    }
    if (len < 8) {
        set_err(err, errlen, "truncated preamble (%zu bytes)", len);
        return KVC_E_FORMAT;
    }
    unsigned major = buf[6], minor = buf[7];
    size_t start;
    uint64_t hlen;
    if (major == 1 && minor == 0) {
        if (len < 10) {
            set_err(err, errlen, "truncated preamble (%zu bytes)", len);
            return KVC_E_FORMAT;
        }
        hlen = (uint64_t)buf[8] | ((uint64_t)buf[9] << 8);
        start = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (len < 12) {
            set_err(err, errlen, "truncated preamble (%zu bytes)", len);
            return KVC_E_FORMAT;
        }
        hlen = (uint64_t)buf[8] | ((uint64_t)buf[9] << 8) | ((uint64_t)buf[10] << 16) | ((uint64_t)buf[11] << 24);
        start = 12;
    } else {
        set_err(err, errlen, "unsupported .npy format version %u.%u (1.0, 2.0 and 3.0 are read)", major, minor);
        return KVC_E_FORMAT;
    }
    if (hlen == 0) {
        set_err(err, errlen, "empty header (header length 0)");
        return KVC_E_FORMAT;
    }
    if (hlen > (uint64_t)(len - start)) {
        set_err(err, errlen, "header length %llu exceeds the file (%zu bytes after the preamble)",
                (unsigned long long)hlen, len - start);
        return KVC_E_FORMAT;
    }

    /* header text: ASCII only, ends with '\n' */
    const uint8_t *hs = buf + start;
    size_t hn = (size_t)hlen;
    for (size_t k = 0; k < hn; k++) {
        uint8_t c = hs[k];
        if ((c < 0x20 || c > 0x7e) && !is_ws(c)) {
            set_err(err, errlen, "header: non-ASCII or control byte 0x%02x at header offset %zu", (unsigned)c, k);
            return KVC_E_FORMAT;
        }
    }
    if (hs[hn - 1] != '\n') {
        set_err(err, errlen, "header does not end with a newline");
        return KVC_E_FORMAT;
    }

    hdr h = {hs, hn, 0, err, errlen};
    hdr_fields f;
    memset(&f, 0, sizeof f);
    kvc_status st = parse_dict(&h, &f);
    if (st != KVC_OK) return st;

    /* element count, overflow-safe: every dim is in [1, MAX_ELEMS] */
    size_t count = 1;
    for (size_t d = 0; d < f.ndim; d++) {
        if (f.shape[d] > KVC_NPY_MAX_ELEMS / count) {
            set_err(err, errlen, "shape: more than %llu elements", (unsigned long long)KVC_NPY_MAX_ELEMS);
            return KVC_E_FORMAT;
        }
        count *= f.shape[d];
    }

    /* data size must match exactly (computed in 64 bits: count <= 2^31) */
    size_t esize = f.dtype == KVC_NPY_F32 ? 4u : 2u;
    size_t data_off = start + hn;
    uint64_t have = (uint64_t)(len - data_off);
    uint64_t want = (uint64_t)count * esize;
    if (have < want) {
        set_err(err, errlen, "truncated data: expected %llu bytes, found %llu", (unsigned long long)want,
                (unsigned long long)have);
        return KVC_E_FORMAT;
    }
    if (have > want) {
        set_err(err, errlen, "trailing bytes: expected %llu data bytes, found %llu", (unsigned long long)want,
                (unsigned long long)have);
        return KVC_E_FORMAT;
    }
    if (count > SIZE_MAX / sizeof(float)) {
        set_err(err, errlen, "array of %zu elements does not fit in memory", count);
        return KVC_E_CAPACITY;
    }
    float *data = (float *)malloc(count * sizeof(float));
    if (data == NULL) {
        set_err(err, errlen, "out of memory for %zu elements", count);
        return KVC_E_CAPACITY;
    }

    const uint8_t *p = buf + data_off;
    if (f.dtype == KVC_NPY_F32) {
        for (size_t k = 0; k < count; k++, p += 4) {
            uint32_t u = f.big_endian
                             ? ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]
                             : (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
            data[k] = bits_f32(u);
        }
    } else {
        for (size_t k = 0; k < count; k++, p += 2) {
            uint16_t u =
                f.big_endian ? (uint16_t)(((unsigned)p[0] << 8) | p[1]) : (uint16_t)(p[0] | ((unsigned)p[1] << 8));
            data[k] = kvc_half_to_float(u);
        }
    }

    out->ndim = f.ndim;
    for (size_t d = 0; d < f.ndim; d++) out->shape[d] = f.shape[d];
    out->count = count;
    out->stored = f.dtype;
    out->data = data;
    return KVC_OK;
}

void kvc_npy_free(kvc_npy_array *a)
{
    if (a == NULL) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------------ */
/* load                                                               */
/* ------------------------------------------------------------------ */

/* Largest file that can hold a valid array: v2/v3 preamble, 4 GiB header, 2^31 floats. */
#define KVC_NPY_MAX_FILE ((uint64_t)12 + 0xffffffffu + (uint64_t)KVC_NPY_MAX_ELEMS * 4u)

kvc_status kvc_npy_load(const char *path, kvc_npy_array *out, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0) err[0] = '\0';
    if (out != NULL) memset(out, 0, sizeof *out);
    if (path == NULL || out == NULL) {
        set_err(err, errlen, "kvc_npy_load: %s is NULL", path == NULL ? "path" : "out");
        return KVC_E_ARG;
    }
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        set_err(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return KVC_E_ARG;
    }

    /* size hint; the read loop below does not depend on it being right */
    size_t cap = 4096;
    if (fseek(fp, 0, SEEK_END) == 0) {
        long end = ftell(fp);
        if (end > 0 && (uint64_t)end <= KVC_NPY_MAX_FILE && (uint64_t)end < SIZE_MAX)
            cap = (size_t)end + 1; /* +1: the final read sees EOF without growing */
    }
    if (fseek(fp, 0, SEEK_SET) != 0) {
        /* not seekable (a pipe): read from where we are, which is the start */
        clearerr(fp);
    }

    uint8_t *buf = (uint8_t *)malloc(cap);
    if (buf == NULL) {
        fclose(fp);
        set_err(err, errlen, "out of memory reading '%s'", path);
        return KVC_E_CAPACITY;
    }
    size_t n = 0;
    kvc_status st = KVC_OK;
    for (;;) {
        if (n == cap) {
            if ((uint64_t)cap >= KVC_NPY_MAX_FILE || cap > SIZE_MAX / 2) {
                set_err(err, errlen, "'%s' is too large to be a supported .npy file", path);
                st = KVC_E_FORMAT;
                break;
            }
            size_t ncap = cap * 2;
            uint8_t *nb = (uint8_t *)realloc(buf, ncap);
            if (nb == NULL) {
                set_err(err, errlen, "out of memory reading '%s'", path);
                st = KVC_E_CAPACITY;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - n, fp);
        n += r;
        if (r == 0) {
            if (ferror(fp)) {
                set_err(err, errlen, "cannot read '%s': %s", path, strerror(errno));
                st = KVC_E_ARG;
            }
            break;
        }
    }
    fclose(fp);
    if (st == KVC_OK) {
        st = kvc_npy_parse(buf, n, out, err, errlen);
        if (st != KVC_OK && err != NULL && errlen > 0) {
            /* prefix the path: "path: message" */
            char msg[256];
            snprintf(msg, sizeof msg, "%s", err);
            set_err(err, errlen, "%s: %s", path, msg);
        }
    }
    free(buf);
    return st;
}

/* ------------------------------------------------------------------ */
/* save                                                               */
/* ------------------------------------------------------------------ */

/* Same constants as numpy.lib.format. */
#define NPY_ARRAY_ALIGN            64u
#define NPY_GROWTH_AXIS_MAX_DIGITS 21u

kvc_status kvc_npy_save(const char *path, const float *data, size_t ndim, const size_t *shape, kvc_npy_dtype dtype,
                        char *err, size_t errlen)
{
    if (err != NULL && errlen > 0) err[0] = '\0';
    if (path == NULL || data == NULL || shape == NULL) {
        set_err(err, errlen, "kvc_npy_save: %s is NULL", path == NULL ? "path" : data == NULL ? "data" : "shape");
        return KVC_E_ARG;
    }
    if (ndim < 1 || ndim > KVC_NPY_MAX_DIMS) {
        set_err(err, errlen, "kvc_npy_save: ndim %zu is outside 1..%u", ndim, (unsigned)KVC_NPY_MAX_DIMS);
        return KVC_E_ARG;
    }
    if (dtype != KVC_NPY_F32 && dtype != KVC_NPY_F16) {
        set_err(err, errlen, "kvc_npy_save: unknown dtype %d", (int)dtype);
        return KVC_E_ARG;
    }
    size_t count = 1;
    for (size_t d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            set_err(err, errlen, "kvc_npy_save: shape[%zu] is 0", d);
            return KVC_E_ARG;
        }
        if (shape[d] > KVC_NPY_MAX_ELEMS / count) {
            set_err(err, errlen, "kvc_npy_save: more than %llu elements", (unsigned long long)KVC_NPY_MAX_ELEMS);
            return KVC_E_ARG;
        }
        count *= shape[d];
    }

    /* the dict exactly as numpy writes it (sorted keys, repr of the tuple) */
    char dict[256];
    int pos = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       dtype == KVC_NPY_F32 ? "<f4" : "<f2");
    for (size_t d = 0; d < ndim; d++)
        pos += snprintf(dict + pos, sizeof dict - (size_t)pos, d == 0 ? "%zu" : ", %zu", shape[d]);
    pos += snprintf(dict + pos, sizeof dict - (size_t)pos, "%s), }", ndim == 1 ? "," : "");
    /* numpy's spare room so the first axis can grow in place */
    char first[32];
    size_t first_len = (size_t)snprintf(first, sizeof first, "%zu", shape[0]);
    size_t dict_len = (size_t)pos + (NPY_GROWTH_AXIS_MAX_DIGITS - first_len);
    size_t hlen = dict_len + 1; /* + '\n' */
    size_t pad = NPY_ARRAY_ALIGN - ((10u + hlen) % NPY_ARRAY_ALIGN);
    size_t total_hdr = 10u + hlen + pad; /* multiple of 64 */

    uint8_t header[512];
    memcpy(header, npy_magic, sizeof npy_magic);
    header[6] = 1;
    header[7] = 0;
    header[8] = (uint8_t)((hlen + pad) & 0xffu);
    header[9] = (uint8_t)((hlen + pad) >> 8);
    memcpy(header + 10, dict, (size_t)pos);
    memset(header + 10 + pos, ' ', total_hdr - 10u - (size_t)pos - 1u);
    header[total_hdr - 1] = '\n';

    FILE *fp = fopen(path, "wb");
    if (fp == NULL) {
        set_err(err, errlen, "cannot create '%s': %s", path, strerror(errno));
        return KVC_E_ARG;
    }
    int ok = fwrite(header, 1, total_hdr, fp) == total_hdr;

    uint8_t chunk[4096];
    size_t per = dtype == KVC_NPY_F32 ? sizeof chunk / 4 : sizeof chunk / 2;
    for (size_t k = 0; ok && k < count; k += per) {
        size_t m = count - k < per ? count - k : per;
        size_t bytes = 0;
        for (size_t j = 0; j < m; j++) {
            if (dtype == KVC_NPY_F32) {
                uint32_t u = f32_bits(data[k + j]);
                chunk[bytes++] = (uint8_t)(u & 0xffu);
                chunk[bytes++] = (uint8_t)((u >> 8) & 0xffu);
                chunk[bytes++] = (uint8_t)((u >> 16) & 0xffu);
                chunk[bytes++] = (uint8_t)(u >> 24);
            } else {
                uint16_t u = kvc_float_to_half(data[k + j]);
                chunk[bytes++] = (uint8_t)(u & 0xffu);
                chunk[bytes++] = (uint8_t)(u >> 8);
            }
        }
        ok = fwrite(chunk, 1, bytes, fp) == bytes;
    }
    int saved_errno = errno;
    if (fclose(fp) != 0 && ok) {
        ok = 0;
        saved_errno = errno;
    }
    if (!ok) {
        /* the partial file is left in place: path may name something other
         * than a regular file (a device, a FIFO) that must not be removed */
        set_err(err, errlen, "cannot write '%s': %s", path, strerror(saved_errno));
        return KVC_E_ARG;
    }
    return KVC_OK;
}
