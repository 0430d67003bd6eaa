#ifndef KVC_APP_DUMP_H
#define KVC_APP_DUMP_H
/** `kvc dump`: write each layer's q/k/v of a greedy run as .npy traces. */
int kvc_cmd_dump(int argc, char **argv);
#endif
