/* Tests: error against memory on a fixed trace for one configuration (4
 * budgets, 16 seeds x 16 positions, kvc oracle), printed as one line with the
 * log-log slope and its 99.8% interval. */
#ifndef KVC_SLOPE_UTIL_H
#define KVC_SLOPE_UTIL_H

#include <stdio.h>

#include "kvc/kvc.h"
#include "kvc_oracle/kvc_bounds.h"

/* Returns 0 and the slope's interval in lo/hi, or 1 when measuring failed. */
static int tu_slope_line(const kvc_oracle_trace *tr, const kvc_stream_config *cfg, const uint32_t budgets[4],
                         double *lo, double *hi)
{
    kvc_oracle_opts o = {budgets, 4, 16, 1, 16, 0, NULL, NULL};
    kvc_oracle_row rows[4];
    double slope;
    if (kvc_oracle_measure(tr, cfg, &o, rows, NULL) != 0) return 1;
    int rc = kvc_oracle_slope(rows, 4, 0.998, &slope, lo, hi);
    if (rc == 0)
        printf("%-18s mean e at m=%u..%u: %.4g .. %.4g; slope %.3f [99.8%% CI %.3f, %.3f]\n",
               kvc_method_name(cfg->method), rows[0].memory, rows[3].memory, rows[0].mean, rows[3].mean, slope, *lo,
               *hi);
    kvc_oracle_rows_free(rows, 4);
    return rc != 0;
}

#endif
