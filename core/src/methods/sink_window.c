/* sink-window (StreamingLLM): the sinks and the window are the stream
 * wrapper's own exact regions, so the method has no state: a token that
 * leaves the window is dropped. Its plan gives the window the whole budget
 * but the sinks and the current token (plan.c). */
#include "methods.h"

/* No state of its own: every state is consistent. */
/*@ assigns \nothing;
    ensures \result == 1;
*/
static int ops_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    (void)st, (void)p, (void)method_in;
    return 1;
}

const kvc_method_ops kvc_method_ops_sink_window = {
    .id = KVC_METHOD_SINK_WINDOW,
    .window_is_budget = 1,
    .check = ops_check,
};
