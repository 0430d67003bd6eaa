#ifndef KVC_PLAN_H
#define KVC_PLAN_H

#include "kvc/kvc_stream.h"

typedef struct kvc_stream_layout {
    uint64_t off_sink_k, off_sink_v, off_win_k, off_win_v, off_pend_k, off_pend_v, off_method;
    uint64_t method_bytes;
} kvc_stream_layout;

uint64_t kvc_stream_layout_make(const kvc_stream_plan *p, uint64_t method_bytes, kvc_stream_layout *lay);
size_t kvc_stream_header_bytes(void);
/* The method's own arena bytes for a plan (0 for sink-window). */
uint64_t kvc_stream_method_bytes(const kvc_stream_plan *p);

#endif
