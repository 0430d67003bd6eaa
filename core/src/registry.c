#include <stdarg.h>
#include <stdio.h>
/* The method registry, generated from kvc_method_list.h: lookups by value, by
 * name and by position, for the library and for everything that iterates
 * over methods (command line, oracle, tests, scripts). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc_attend.h"
#include "kvc/kvc_budget.h"
#include "methods.h"

/* Which methods this build holds. By default all of them. A small build
 * (CMake: KVC_METHODS=exact;sink_window) compiles with KVC_METHODS_ONLY and
 * KVC_WITH_<ident>=1 for each method it keeps: the registry then points at
 * those only, so a static link leaves the others' code out. The test of
 * "KVC_WITH_<ident> is defined as 1" inside a macro expansion is the
 * placeholder idiom (a macro defined as 1 pastes into a name that expands
 * to "0," and shifts the 1 into the second argument). */
#define KVC_PLACEHOLDER_1                 0,
#define KVC_SECOND_ARG(ignored, val, ...) val
#define KVC_IS_ONE(x)                     KVC_IS_ONE_(x)
#define KVC_IS_ONE_(val)                  KVC_IS_ONE__(KVC_PLACEHOLDER_##val)
#define KVC_IS_ONE__(arg1_or_junk)        KVC_SECOND_ARG(arg1_or_junk 1, 0, 0)
#define KVC_CAT(a, b)                     KVC_CAT_(a, b)
#define KVC_CAT_(a, b)                    a##b
#define KVC_KEEP_1(x)                     x,
#define KVC_KEEP_0(x)
#if defined(KVC_METHODS_ONLY)
#define KVC_OPS_PTR(ident, NAME, value, name, kvpress, summary)                                                        \
    KVC_CAT(KVC_KEEP_, KVC_IS_ONE(KVC_WITH_##ident))(&kvc_method_ops_##ident)
#else
#define KVC_OPS_PTR(ident, NAME, value, name, kvpress, summary) &kvc_method_ops_##ident,
#endif
static const kvc_method_ops *const registry[] = {KVC_METHOD_LIST(KVC_OPS_PTR) NULL};
#undef KVC_OPS_PTR
#define N_METHODS (sizeof(registry) / sizeof(registry[0]) - 1u) /* the NULL ends the list */

const kvc_method_ops *kvc_method_ops_of(kvc_method m)
{
    /*@ loop invariant 0 <= i <= N_METHODS;
        loop assigns i;
        loop variant N_METHODS - i;
    */
    for (size_t i = 0; i < N_METHODS; i++)
        if (registry[i]->id == m) return registry[i];
    return NULL;
}

/* names and summaries, from the same list */
typedef struct method_text {
    kvc_method id;
    const char *name, *kvpress, *summary;
} method_text;
#define KVC_TEXT_ENTRY(ident, NAME, value, name, kvpress, summary) {KVC_METHOD_##NAME, name, kvpress, summary},
static const method_text g_text[] = {KVC_METHOD_LIST(KVC_TEXT_ENTRY)};
#undef KVC_TEXT_ENTRY
#define N_TEXT (sizeof(g_text) / sizeof(g_text[0]))

/* the text of a method this build holds, NULL otherwise */
/*@ assigns \nothing;
    ensures \result == \null || (\valid_read(\result) && \result->id == m);
*/
static const method_text *text_of(kvc_method m)
{
    if (kvc_method_ops_of(m) == NULL) return NULL;
    /*@ loop invariant 0 <= i <= N_TEXT;
        loop assigns i;
        loop variant N_TEXT - i;
    */
    for (size_t i = 0; i < N_TEXT; i++)
        if (g_text[i].id == m) return &g_text[i];
    return NULL;
}

size_t kvc_method_count(void) { return N_METHODS; }

kvc_method kvc_method_at(size_t i) { return i < N_METHODS ? registry[i]->id : (kvc_method)0; }

const char *kvc_method_name(kvc_method m)
{
    const method_text *t = text_of(m);
    return t ? t->name : NULL;
}

const char *kvc_method_summary(kvc_method m)
{
    const method_text *t = text_of(m);
    return t ? t->summary : NULL;
}

const char *kvc_method_kvpress_name(kvc_method m)
{
    const method_text *t = text_of(m);
    return t && t->kvpress[0] ? t->kvpress : NULL;
}

int kvc_method_observes(kvc_method m)
{
    const kvc_method_ops *o = kvc_method_ops_of(m);
    return o != NULL && o->observe != NULL;
}

kvc_status kvc_method_parse(const char *name, kvc_method *out)
{
    if (name == NULL || out == NULL) return KVC_E_ARG;
    for (size_t i = 0; i < N_METHODS; i++) { /* the name first: an alias never shadows it */
        const method_text *t = text_of(registry[i]->id);
        if (strcmp(name, t->name) == 0) {
            *out = registry[i]->id;
            return KVC_OK;
        }
    }
    for (size_t i = 0; i < N_METHODS; i++) {
        const method_text *t = text_of(registry[i]->id);
        if (t->kvpress[0] && strcmp(name, t->kvpress) == 0) {
            *out = registry[i]->id;
            return KVC_OK;
        }
    }
    return KVC_E_ARG;
}

size_t kvc_method_names(char *buf, size_t cap)
{
    size_t need = 0;
    for (size_t i = 0; i < N_METHODS; i++) {
        const size_t len = strlen(kvc_method_name(registry[i]->id));
        if (buf && need + len + 2 < cap) {
            if (i) memcpy(buf + need, ", ", 2);
            memcpy(buf + need + (i ? 2 : 0), kvc_method_name(registry[i]->id), len);
            buf[need + (i ? 2 : 0) + len] = 0;
        }
        need += len + (i ? 2 : 0);
    }
    if (buf && cap && need >= cap) buf[cap - 1] = 0;
    return need;
}

size_t kvc_method_param_count(kvc_method m)
{
    const kvc_method_ops *o = kvc_method_ops_of(m);
    return o ? o->n_params : 0;
}

const kvc_param_desc *kvc_method_param_at(kvc_method m, size_t i)
{
    const kvc_method_ops *o = kvc_method_ops_of(m);
    return o && i < o->n_params ? &o->params[i].desc : NULL;
}

/* Index of `word` in a "|"-separated list, or -1. */
static int choice_index(const char *list, const char *word)
{
    const size_t wl = strlen(word);
    int i = 0;
    for (const char *p = list; p && *p; i++) {
        const char *bar = strchr(p, '|');
        const size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == wl && strncmp(p, word, len) == 0) return i;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

/* The one number grammar of every numeric input (issue 49: hex, a leading
 * '+' or blank, "inf" and exponents were taken by some flags and refused by
 * others): an integer is ASCII digits only; a real is digits with an
 * optional fraction and decimal exponent ("0.5", "2", "1e-3", ".5"). The
 * length of the longest such prefix of s, 0 when there is none. */
size_t kvc_decimal_prefix(const char *s, int integer)
{
    if (s == NULL) return 0;
    size_t i = 0, digits = 0;
    while (s[i] >= '0' && s[i] <= '9') i++, digits++;
    if (integer) return digits ? i : 0;
    if (s[i] == '.') {
        i++;
        while (s[i] >= '0' && s[i] <= '9') i++, digits++;
    }
    if (digits == 0) return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        size_t j = i + 1;
        if (s[j] == '+' || s[j] == '-') j++;
        if (s[j] >= '0' && s[j] <= '9') {
            while (s[j] >= '0' && s[j] <= '9') j++;
            i = j;
        }
    }
    return i;
}

kvc_status kvc_param_set_number(kvc_stream_config *c, const kvc_method_param *p, const char *text)
{
    char *end = NULL;
    errno = 0;
    const double v = strtod(text, &end);
    const char *digits = text[0] == '-' ? text + 1 : text;
    if (kvc_decimal_prefix(digits, p->desc.type == KVC_PARAM_U32) != strlen(digits)) return KVC_E_ARG;
    if (end == text || *end || errno || !isfinite(v) || (v != 0.0 && (v < p->desc.min || v > p->desc.max)))
        return KVC_E_ARG;
    unsigned char *field = (unsigned char *)c + p->offset;
    if (p->desc.type == KVC_PARAM_U32) {
        if (v != floor(v) || v < 0) return KVC_E_ARG;
        const uint32_t u = (uint32_t)v;
        memcpy(field, &u, sizeof u);
    } else {
        const float f = (float)v;
        memcpy(field, &f, sizeof f);
    }
    return KVC_OK;
}

kvc_status kvc_stream_config_set(kvc_stream_config *cfg, const char *name, const char *text)
{
    if (cfg == NULL || name == NULL || text == NULL) return KVC_E_ARG;
    const kvc_method_ops *o = kvc_method_ops_of(cfg->method);
    if (o == NULL) return KVC_E_ARG;
    for (size_t i = 0; i < o->n_params; i++) {
        const kvc_method_param *p = &o->params[i];
        if (strcmp(p->desc.name, name) != 0) continue;
        if (p->set) return p->set(cfg, text);
        if (p->desc.type == KVC_PARAM_CHOICE) {
            static const uint32_t unset = 0; /* "0": the default, as for numbers */
            const int k = choice_index(p->desc.choices, text);
            if (k < 0 && strcmp(text, "0") != 0) return KVC_E_ARG;
            memcpy((unsigned char *)cfg + p->offset, k < 0 ? &unset : &p->choice_values[k], sizeof(uint32_t));
            return KVC_OK;
        }
        return kvc_param_set_number(cfg, p, text);
    }
    return KVC_E_ARG;
}

/* methods.h: the text a getter writes, or "" and KVC_E_ARG when it does not fit */
kvc_status kvc_param_put_text(char *buf, size_t cap, const char *text, size_t len)
{
    if (len >= cap) {
        buf[0] = '\0';
        return KVC_E_ARG;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    return KVC_OK;
}

/* A decimal integer into buf. */
static kvc_status put_u32(char *buf, size_t cap, uint32_t u)
{
    char text[10];
    size_t n = 0;
    do text[sizeof text - 1 - n++] = (char)('0' + u % 10u);
    while ((u /= 10u) != 0u);
    return kvc_param_put_text(buf, cap, text + sizeof text - n, n);
}

kvc_status kvc_param_get_number(const kvc_stream_config *c, const kvc_method_param *p, char *buf, size_t cap)
{
    const unsigned char *field = (const unsigned char *)c + p->offset;
    if (p->desc.type != KVC_PARAM_F32) {
        uint32_t u;
        memcpy(&u, field, sizeof u);
        return put_u32(buf, cap, u);
    }
    char text[32];
    float f;
    memcpy(&f, field, sizeof f);
    if (f == 0.0f) return kvc_param_put_text(buf, cap, "0", 1);
#if defined(KVC_NO_DESCRIBE)
    buf[0] = '\0';
    return KVC_E_UNSUPPORTED;
#else
    /* the shortest of 6 .. 9 significant digits that reads back as the same
       float (9 always does), so what a user typed comes back as typed */
    for (int digits = 6; digits <= 9; digits++) {
        const int n = snprintf(text, sizeof text, "%.*g", digits, (double)f);
        if (n > 0 && (size_t)n < sizeof text && (strtof(text, NULL) == f || digits == 9))
            return kvc_param_put_text(buf, cap, text, (size_t)n);
    }
    buf[0] = '\0';
    return KVC_E_ARG;
#endif
}

kvc_status kvc_stream_config_get(const kvc_stream_config *cfg, const char *name, char *buf, size_t cap)
{
    if (buf == NULL || cap == 0) return KVC_E_ARG;
    buf[0] = '\0';
    if (cfg == NULL || name == NULL) return KVC_E_ARG;
    const kvc_method_ops *o = kvc_method_ops_of(cfg->method);
    if (o == NULL) return KVC_E_ARG;
    for (size_t i = 0; i < o->n_params; i++) {
        const kvc_method_param *p = &o->params[i];
        if (strcmp(p->desc.name, name) != 0) continue;
        if (p->get) return p->get(cfg, buf, cap);
        if (p->desc.type == KVC_PARAM_CHOICE) {
            uint32_t v;
            memcpy(&v, (const unsigned char *)cfg + p->offset, sizeof v);
            if (v == 0u) return kvc_param_put_text(buf, cap, "0", 1);
            /* the word whose value it is: one walk of the "|"-separated words, one value each */
            const char *w = p->desc.choices;
            for (size_t k = 0; w != NULL; k++) {
                const char *bar = strchr(w, '|');
                if (p->choice_values[k] == v)
                    return kvc_param_put_text(buf, cap, w, bar ? (size_t)(bar - w) : strlen(w));
                w = bar ? bar + 1 : NULL;
            }
            return put_u32(buf, cap, v); /* a value set by field that no word names: as a number */
        }
        return kvc_param_get_number(cfg, p, buf, cap);
    }
    return KVC_E_ARG;
}

/* The plan and stats descriptions (kvc_stream_plan_describe, ..._stats_describe)
 * format with vsnprintf, which costs a microcontroller 15-25 KB of newlib's
 * printf. A build with KVC_NO_DESCRIBE (CMake KVC_DESCRIBE=OFF) leaves them
 * empty strings, and the printf machinery out of the link. */
#if defined(KVC_NO_DESCRIBE)
void kvc_text_add(kvc_text *t, const char *fmt, ...) { (void)t, (void)fmt; }
#else
void kvc_text_add(kvc_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const size_t room = t->len < t->cap ? t->cap - t->len : 0;
    const int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}
#endif

/*@ requires \valid(t) && (t->cap == 0 || \valid(t->buf + (0 .. t->cap - 1)));
    requires \separated(t, t->buf + (0 .. t->cap - 1));
    assigns t->buf[t->cap - 1];
    ensures \result == t->len;
    ensures t->cap > 0 && t->len >= t->cap ==> t->buf[t->cap - 1] == '\0';
*/
static size_t text_done(kvc_text *t)
{
    if (t->cap > 0 && t->len >= t->cap) t->buf[t->cap - 1] = '\0';
    return t->len;
}

size_t kvc_stream_plan_describe(const kvc_stream_config *cfg, const kvc_stream_plan *plan, char *buf, size_t cap)
{
    kvc_text t = {buf, buf ? cap : 0, 0};
    if (t.cap) buf[0] = '\0';
    const kvc_method_ops *o = plan ? kvc_method_ops_of(plan->method) : NULL;
    if (o && o->describe && cfg) o->describe(cfg, plan, &t);
    return text_done(&t);
}

size_t kvc_stream_stats_describe(kvc_method m, const kvc_stream_stats *stats, char *buf, size_t cap)
{
    kvc_text t = {buf, buf ? cap : 0, 0};
    if (t.cap) buf[0] = '\0';
    const kvc_method_ops *o = kvc_method_ops_of(m);
    if (o && o->describe_stats && stats) o->describe_stats(stats, &t);
    return text_done(&t);
}
