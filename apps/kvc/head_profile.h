#ifndef KVC_APP_HEAD_PROFILE_H
#define KVC_APP_HEAD_PROFILE_H
/* A model's head profile (written by kvc profile) and the head-wise budgets
 * it gives: each (layer, kv head) is streaming, retrieval or diffuse, and
 * each kind gets its own method and share of a global byte budget
 * (kvc_cache_init_heads stores the ragged result). */
#include <stdint.h>

#include "kvc/kvc.h"

typedef enum kvc_head_kind { KVC_HEAD_STREAMING = 0, KVC_HEAD_RETRIEVAL = 1, KVC_HEAD_DIFFUSE = 2 } kvc_head_kind;
#define KVC_HEAD_KINDS 3

/** Most (layer, kv head) entries a profile holds. */
#define KVC_HEAD_PROFILE_MAX 8192

typedef struct kvc_head_profile {
    int n_layers, n_kv_heads;
    unsigned char kind[KVC_HEAD_PROFILE_MAX]; /**< kvc_head_kind, layer-major */
    float local[KVC_HEAD_PROFILE_MAX];        /**< mean attention on sinks + window */
    float top[KVC_HEAD_PROFILE_MAX];          /**< mean share of the far mass in its 8 largest entries */
} kvc_head_profile;

/** The kind's name ("streaming", "retrieval", "diffuse"). */
const char *kvc_head_kind_name(int kind);

/** Write @p hp to @p path with a comment line @p note; 0, or 1 after printing why. */
int kvc_head_profile_write(const char *path, const kvc_head_profile *hp, const char *note);

/** Read a profile; 0, or 1 after printing why (unreadable, malformed, a head missing). */
int kvc_head_profile_read(const char *path, kvc_head_profile *hp);

/** How each kind is served: its method and its weight in the byte budget
 *  (a stream of kind k gets bytes in proportion to share[k]). */
typedef struct kvc_head_plan {
    kvc_method method[KVC_HEAD_KINDS];
    double share[KVC_HEAD_KINDS];
} kvc_head_plan;

/** Parse "s,r,d" shares (each > 0) into @p plan; 0, or 1 after printing why. */
int kvc_head_plan_shares(const char *text, kvc_head_plan *plan);
/** Parse "streaming=M,retrieval=M,diffuse=M" (any subset) into @p plan; 0, or 1 after printing why. */
int kvc_head_plan_methods(const char *text, kvc_head_plan *plan);
#endif
