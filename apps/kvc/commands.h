/* The entry points of the `kvc` commands (main.c's table): one function a
 * command, each returning a process exit code. What a command shares with
 * others lives in its own module header (eval.h, bench.h, generate.h, ...). */
#ifndef KVC_APP_COMMANDS_H
#define KVC_APP_COMMANDS_H

/** `kvc demo`: synthesise a clustered trace and evaluate every method at one
 *  budget; prints one table. Returns a process exit code. */
int kvc_cmd_demo(int argc, char **argv);
/** `kvc generate`: text from a llama2.c model on a compressed cache. */
int kvc_cmd_generate(int argc, char **argv);
/** `kvc ppl` command. */
int kvc_cmd_ppl(int argc, char **argv);
/** `kvc bench ...`: dispatch to recall, ppl, decode or kernels. */
int kvc_cmd_bench(int argc, char **argv);
/** `kvc eval` command. Returns a process exit code. */
int kvc_cmd_eval(int argc, char **argv);
/** `kvc fig1`: the BalanceKV paper's Figure 1 protocol on a trace. Returns a process exit code. */
int kvc_cmd_fig1(int argc, char **argv);
/** `kvc floor`: the error each storage type alone adds, every token held. Returns a process exit code. */
int kvc_cmd_floor(int argc, char **argv);
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
/** `kvc dump`: write each layer's q/k/v of a greedy run as .npy traces. */
int kvc_cmd_dump(int argc, char **argv);
/** `kvc profile`: score every (layer, kv head) of a model as streaming,
 *  retrieval or diffuse, and write the head profile kvc bench --head-profile reads. */
int kvc_cmd_profile(int argc, char **argv);
/** `kvc oracle`: bound checks against the MPFR oracle. */
int kvc_cmd_oracle(int argc, char **argv);
/** `kvc gguf`: inspect a GGUF file, dump a dequantised tensor. */
int kvc_cmd_gguf(int argc, char **argv);
/** `kvc logits`: logits of a model over token ids (decoder check). */
int kvc_cmd_logits(int argc, char **argv);

#endif
