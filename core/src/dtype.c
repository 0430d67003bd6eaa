/* Storage types: names and layout descriptors (kvc_types.h). */
#include <string.h>

#include "kvc/kvc_kernels.h"

#define NAME_ENTRY(NAME, value, name, bits, implemented, ...) [value] = name,
static const char *const g_names[KVC_DTYPE_COUNT] = {KVC_DTYPE_LIST(NAME_ENTRY)};
#undef NAME_ENTRY
#define IMPL_ENTRY(NAME, value, name, bits, implemented, ...) [value] = implemented,
static const unsigned char g_implemented[KVC_DTYPE_COUNT] = {KVC_DTYPE_LIST(IMPL_ENTRY)};
#undef IMPL_ENTRY
/* the layout columns: bits, rows, scale bytes per group, group, has a minimum */
typedef struct dtype_layout {
    unsigned char bits, rows, scale_bytes, group, has_min;
} dtype_layout;
#define LAYOUT_ENTRY(NAME, value, name, bits, implemented, rows, scale_bytes, group, has_min, doc)                     \
    [value] = {bits, rows, scale_bytes, group, has_min},
static const dtype_layout g_layout[KVC_DTYPE_COUNT] = {KVC_DTYPE_LIST(LAYOUT_ENTRY)};
#undef LAYOUT_ENTRY

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
    const dtype_layout *l = &g_layout[t];
    s.bits = l->bits, s.implemented = g_implemented[t];
    s.has_scale = l->scale_bytes != 0, s.has_min = l->has_min;
    if (l->rows) { /* every vector one row: groups along it, or none */
        s.axis = s.has_scale ? KVC_GROUP_ROW : KVC_GROUP_NONE;
        s.group = l->group;
    } else {
        /* KIVI (Liu et al. 2024): keys per channel over blocks of 32 tokens,
           values per token in groups of 32, asymmetric; the open block of
           the most recent tokens stays in f16 until it fills */
        s.axis = is_key ? KVC_GROUP_CHANNEL : KVC_GROUP_ROW;
        s.group = is_key ? 0u : l->group;
        s.block = is_key ? KVC_KIVI_BLOCK : 0u;
    }
    *out = s;
    return KVC_OK;
}

int kvc_dtype_implemented(kvc_dtype t) { return (unsigned)t < KVC_DTYPE_COUNT && g_implemented[t]; }
