/* The smallest use of the library a firmware makes: the first method of its
 * registry (a build with KVC_METHODS=<one method> has only that one) on a
 * static arena, 100 appends and one attend, no stdio. bench/mcu_code_size.sh
 * links it once per method to report the code each method costs alone. */
#include "kvc/kvc.h"

static _Alignas(64) unsigned char g_arena[32768];

int main(void)
{
    if (kvc_method_count() == 0) return 1;
    kvc_stream_config c = kvc_stream_config_default(kvc_method_at(0), 8, 8, 64, 1);
    c.n_sink = 4, c.n_window = 8, c.prefix_len = 32;
    kvc_stream *st;
    if (kvc_stream_init(g_arena, sizeof g_arena, &c, &st) != KVC_OK) return 2;
    float k[8] = {0}, out[16];
    for (int i = 0; i < 100; i++) {
        k[i % 8] += 0.25f;
        if (kvc_stream_append(st, NULL, k, k) != KVC_OK) break;
    }
    const float q[16] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    return kvc_stream_attend(st, NULL, q, 2, out) == KVC_OK ? 0 : 3;
}
