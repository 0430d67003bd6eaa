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

/**
 * @brief Run `kvc synth`.
 *
 * Usage: kvc synth --kind clustered|gaussian|heavy-values|lowrank --n N --d D
 *        --seed S --out DIR [--dv DV] [--clusters C] [--rank R]
 *
 * @param argc  number of entries in @p argv (at least 1).
 * @param argv  argv[0] is "synth"; flags follow (`--flag value` or `--flag=value`).
 * @return 0 on success (also for --help, which prints usage to stdout),
 *         2 on a usage error (message on stderr naming the flag and its range),
 *         1 on an I/O or memory error.
 */
int kvc_cmd_synth(int argc, char **argv);

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
