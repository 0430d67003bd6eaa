#ifndef KVC_APP_FLOOR_H
#define KVC_APP_FLOOR_H

/** `kvc floor`: the error each storage type alone adds, every token held. Returns a process exit code. */
int kvc_cmd_floor(int argc, char **argv);
#endif
