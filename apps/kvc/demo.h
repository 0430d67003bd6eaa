#ifndef KVC_APP_DEMO_H
#define KVC_APP_DEMO_H
/** `kvc demo`: synthesise a clustered trace and evaluate every method at one
 *  budget; prints one table. Returns a process exit code. */
int kvc_cmd_demo(int argc, char **argv);
#endif
