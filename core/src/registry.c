/* The method registry, generated from kvc_method_list.h: lookups by value, by
 * name and by position, for the library and for everything that iterates
 * over methods (command line, oracle, tests, scripts). */
#include <string.h>

#include "methods.h"

#define KVC_OPS_PTR(ident, NAME, value, doc) &kvc_method_ops_##ident,
static const kvc_method_ops *const registry[] = {KVC_METHOD_LIST(KVC_OPS_PTR)};
#undef KVC_OPS_PTR
#define N_METHODS (sizeof registry / sizeof registry[0])

const kvc_method_ops *kvc_method_ops_of(kvc_method m)
{
    for (size_t i = 0; i < N_METHODS; i++)
        if (registry[i]->id == m) return registry[i];
    return NULL;
}

size_t kvc_method_count(void) { return N_METHODS; }

kvc_method kvc_method_at(size_t i) { return i < N_METHODS ? registry[i]->id : (kvc_method)0; }

const char *kvc_method_name(kvc_method m)
{
    const kvc_method_ops *o = kvc_method_ops_of(m);
    return o ? o->name : NULL;
}

const char *kvc_method_summary(kvc_method m)
{
    const kvc_method_ops *o = kvc_method_ops_of(m);
    return o ? o->summary : NULL;
}

kvc_status kvc_method_parse(const char *name, kvc_method *out)
{
    if (name == NULL || out == NULL) return KVC_E_ARG;
    for (size_t i = 0; i < N_METHODS; i++) {
        if (strcmp(name, registry[i]->name) == 0) {
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
        const size_t len = strlen(registry[i]->name);
        if (buf && need + len + 2 < cap) {
            if (i) memcpy(buf + need, ", ", 2);
            memcpy(buf + need + (i ? 2 : 0), registry[i]->name, len);
            buf[need + (i ? 2 : 0) + len] = 0;
        }
        need += len + (i ? 2 : 0);
    }
    if (buf && cap && need >= cap) buf[cap - 1] = 0;
    return need;
}
