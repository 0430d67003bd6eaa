#ifndef KVC_APP_EVAL_H
#define KVC_APP_EVAL_H
#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc_stream.h"
#include "trace.h"

/** Summary of one evaluation (errors over compressing positions). */
typedef struct kvc_eval_result {
    size_t positions;
    double mean_rel, p99_rel, mean_norm, p99_norm;
    uint64_t max_tokens; /**< peak cache held, in tokens (elements / (d+dv), rounded up) */
    size_t arena_bytes;
} kvc_eval_result;

/** Run one evaluation; prints the plan, table and summary line when verbose.
 *  Returns 0, or 1 after printing why (exact refusing a too-small budget,
 *  invalid configuration, ...). */
int kvc_eval_run(const kvc_trace *tr, const kvc_stream_config *cfg, const char *label, size_t head, int verbose,
                 kvc_eval_result *out);
/** Same, choosing the reference: MPFR oracle (use_mp = 1) or the double path,
 *  and the first scored position (score_from; 0 = where the method compresses). */
int kvc_eval_run_ref(const kvc_trace *tr, const kvc_stream_config *cfg, const char *label, size_t head, int verbose,
                     int use_mp, size_t score_from, kvc_eval_result *out);
#endif
