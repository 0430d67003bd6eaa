#ifndef KVC_APP_FIG1_H
#define KVC_APP_FIG1_H

/** `kvc fig1`: the BalanceKV paper's Figure 1 protocol on a trace. Returns a process exit code. */
int kvc_cmd_fig1(int argc, char **argv);
#endif
