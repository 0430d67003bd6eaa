#ifndef KVC_APP_ORACLE_H
#define KVC_APP_ORACLE_H
/** `kvc oracle`: bound checks against the MPFR oracle. */
int kvc_cmd_oracle(int argc, char **argv);
#endif
