/* Issue 49 item 6: a KIVI4 window is whole key blocks of 32 tokens, so a
 * window of 1-31 tokens held none (byte-identical to a window of 0) and
 * sink-window at a small budget gave its whole window to the sinks, all
 * accepted without a word. For every method of the registry: KIVI4 with a
 * window of 1..31 is refused with a message that names the rounding, 0 and
 * 32 are accepted; sink-window's budget must leave a window of a block. */
#include <stdio.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"

static int kivi4_window_that_holds_nothing_is_refused(void)
{
    unsigned refused = 0;
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const kvc_method m = kvc_method_at(mi);
        kvc_stream_config c = kvc_stream_config_default(m, 32, 32, 512, 1);
        c.dtype = KVC_DTYPE_KIVI4, c.n_sink = 8, c.prefix_len = 400;
        if (m == KVC_METHOD_SINK_WINDOW) {
            c.budget = 8 + 1 + 31; /* leaves a window of 31 tokens: no block */
            const char *why = kvc_stream_config_problem(&c);
            CHECK_MSG(why != NULL && strstr(why, "32") != NULL, "sink-window kivi4 budget 40, sink 8: %s",
                      why ? why : "accepted");
            c.budget = 8 + 1 + 32;
            CHECK_MSG(kvc_stream_config_problem(&c) == NULL, "sink-window kivi4 budget 41 refused");
            refused++;
            continue;
        }
        for (uint32_t w = 0; w <= 32; w++) {
            c.n_window = w;
            const char *why = kvc_stream_config_problem(&c);
            if (w == 0 || w == 32)
                CHECK_MSG(why == NULL, "%s kivi4 window %u: %s", kvc_method_name(m), w, why);
            else
                CHECK_MSG(why != NULL && strstr(why, "32") != NULL, "%s kivi4 window %u: %s", kvc_method_name(m), w,
                          why ? why : "accepted");
        }
        /* the other storage types keep any window */
        c.dtype = KVC_DTYPE_I8, c.n_window = 8;
        CHECK_MSG(kvc_stream_config_problem(&c) == NULL, "%s int8 window 8 refused", kvc_method_name(m));
        refused++;
    }
    printf("%u methods: a kivi4 window that holds no block is refused\n", refused);
    return 0;
}

static const kvc_test_case cases[] = {
    {"kivi4_window_that_holds_nothing_is_refused", kivi4_window_that_holds_nothing_is_refused}};
KVC_TEST_MAIN(cases)
