/**
 * @file synth.h
 * @brief `kvc synth`: synthetic attention traces with structure.
 *
 * Writes DIR/q.npy, DIR/k.npy (float32, shape (n, d)) and DIR/v.npy (float32,
 * shape (n, dv)) for one of four kinds (clustered, gaussian, heavy-values,
 * lowrank; see synth.c for what each one models and why), then prints one
 * line with the parameters and summary statistics (key and value norms, value
 * mean ratio, and how peaked softmax attention is at 64 sampled positions).
 * All randomness comes from kvc_rng, so a seed gives the same bytes everywhere
 * the C library's log, cos and pow agree.
 */
#ifndef KVC_APPS_SYNTH_H
#define KVC_APPS_SYNTH_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdint.h>

/** What `kvc synth` writes: 0 in dv, clusters, rank means the default (dv = d,
 *  32 clusters, rank min(4, d)). */
typedef struct kvc_synth_params {
    const char *kind; /**< clustered | gaussian | heavy-values | lowrank */
    uint64_t n, d, dv, seed, clusters, rank;
    const char *out; /**< directory (created with its parents) */
} kvc_synth_params;

/** Write the trace and print its summary line; same return codes as kvc_cmd_synth. */
int kvc_synth_run(const kvc_synth_params *p);

#ifdef __cplusplus
}
#endif
#endif /* KVC_APPS_SYNTH_H */
