/* Storage types: names and layout descriptors (kvc_types.h). */
#include <string.h>

#include "kvc/kvc_kernels.h"

#define NAME_ENTRY(NAME, value, name, bits, implemented, doc) [value] = name,
static const char *const g_names[KVC_DTYPE_COUNT] = {KVC_DTYPE_LIST(NAME_ENTRY)};
#undef NAME_ENTRY
#define IMPL_ENTRY(NAME, value, name, bits, implemented, doc) [value] = implemented,
static const unsigned char g_implemented[KVC_DTYPE_COUNT] = {KVC_DTYPE_LIST(IMPL_ENTRY)};
#undef IMPL_ENTRY
#define BITS_ENTRY(NAME, value, name, bits, implemented, doc) [value] = bits,
static const unsigned char g_bits[KVC_DTYPE_COUNT] = {KVC_DTYPE_LIST(BITS_ENTRY)};
#undef BITS_ENTRY

const char *kvc_dtype_name(kvc_dtype t) { return (unsigned)t < KVC_DTYPE_COUNT ? g_names[t] : NULL; }

kvc_status kvc_dtype_parse(const char *name, kvc_dtype *out)
{
    if (name == NULL || out == NULL) return KVC_E_ARG;
    for (unsigned i = 0; i < KVC_DTYPE_COUNT; i++)
        if (strcmp(name, g_names[i]) == 0) {
            *out = (kvc_dtype)i;
            return KVC_OK;
        }
    return KVC_E_ARG;
}

kvc_status kvc_storage_describe(kvc_dtype t, uint32_t dim, int is_key, kvc_storage_desc *out)
{
    if (out == NULL || (unsigned)t >= KVC_DTYPE_COUNT || dim < 1 || dim > KVC_MAX_HEAD_DIM) return KVC_E_ARG;
    kvc_storage_desc s;
    memset(&s, 0, sizeof s);
    s.dtype = t;
    s.row_bytes = kvc_row_bytes(t, dim);
    s.bits = g_bits[t], s.implemented = g_implemented[t];
    switch (t) {
    case KVC_DTYPE_F32: break;
    case KVC_DTYPE_F16: break;
    case KVC_DTYPE_I8: s.axis = KVC_GROUP_ROW, s.has_scale = 1; break;
    case KVC_DTYPE_Q15: s.axis = KVC_GROUP_ROW, s.has_scale = 1; break;
    case KVC_DTYPE_I4: s.axis = KVC_GROUP_ROW, s.group = 32, s.has_scale = s.has_min = 1; break;
    case KVC_DTYPE_KIVI4:
    case KVC_DTYPE_KIVI2:
        /* KIVI (Liu et al. 2024): keys per channel over blocks of 32 tokens,
           values per token in groups of 32, asymmetric; the open block of
           the most recent tokens stays in f16 until it fills */
        s.axis = is_key ? KVC_GROUP_CHANNEL : KVC_GROUP_ROW;
        s.group = is_key ? 0u : 32u;
        s.block = is_key ? 32u : 0u;
        s.has_scale = s.has_min = 1;
        break;
    case KVC_DTYPE_ENUM_32BIT: /* not a type; refused above (t >= KVC_DTYPE_COUNT) */ return KVC_E_ARG;
    }
    *out = s;
    return KVC_OK;
}

int kvc_dtype_implemented(kvc_dtype t) { return (unsigned)t < KVC_DTYPE_COUNT && g_implemented[t]; }
