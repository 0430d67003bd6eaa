/* The reference row kernels (rows_ref.c) and the f16 conversions, internal. */
#ifndef KVC_ROWS_REF_H
#define KVC_ROWS_REF_H

#include "kvc/kvc_kernels.h"

extern const kvc_kernels kvc_kernels_ref_table;

/* IEEE binary16 round-to-nearest-even (finite inputs saturate at +-65504): rows_typed.h */
#include "rows_typed.h"

kvc_status kvc_k_attend_batch__ref(const kvc_kernels *kern, const kvc_view *view, const kvc_attend_batch *b,
                                   void *work, size_t work_bytes);

#endif
