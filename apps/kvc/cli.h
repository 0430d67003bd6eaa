#ifndef KVC_APP_CLI_H
#define KVC_APP_CLI_H
#include <stdint.h>

/** Parse a decimal unsigned integer in [lo, hi] for flag @p flag; on error
 *  print "kvc: <flag> expects an integer in lo..hi, got '<s>'" and return 1. */
int kvc_cli_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/** Parse a finite double in [lo, hi]; same error convention. */
int kvc_cli_f64(const char *flag, const char *s, double lo, double hi, double *out);
/** Create @p dir and any missing parents (like mkdir -p); prints why and
 *  returns 1 on failure (naming @p cmd), 0 on success. */
int kvc_mkdirs(const char *cmd, const char *dir);
#endif
