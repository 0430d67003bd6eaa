#ifndef KVC_PLAN_H
#define KVC_PLAN_H

#include "kvc/kvc_stream.h"

typedef struct kvc_stream_layout {
    uint64_t off_sink_k, off_sink_v, off_win_k, off_win_v, off_pend_k, off_pend_v, off_method;
    uint64_t off_prot_k, off_prot_v, off_wflag; /* protected rows, one outlier flag per window slot */
    uint64_t method_bytes;
} kvc_stream_layout;

uint64_t kvc_stream_layout_make(const kvc_stream_plan *p, uint64_t method_bytes, kvc_stream_layout *lay);
size_t kvc_stream_header_bytes(void);
/* The method's own arena bytes for a plan (0 for sink-window). */
uint64_t kvc_stream_method_bytes(const kvc_stream_plan *p);

/* For the cache manager (cache.c): the per-call check once, then the entry
 * points and fields of a stream that has just passed it (no second check). */
kvc_status kvc_stream_check(const kvc_stream *st);
const kvc_stream_plan *kvc_stream_plan_of(const kvc_stream *st);
const kvc_stream_config *kvc_stream_config_of(const kvc_stream *st);
kvc_status kvc_stream_append_prechecked(kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v);
kvc_status kvc_stream_attend_prechecked(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                        float *out);

#endif
