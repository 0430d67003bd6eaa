/* Method tuning flags shared by kvc eval and kvc bench. */
#include "method_opts.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

const char kvc_method_opts_usage[] =
    "  [--beta X] [--subgen-t T] [--subgen-s S] [--subgen-mmax M] [--subgen-delta0 R]\n"
    "  [--bkv-t T] [--bkv-levels L] [--bkv-bmax B] [--bkv-mode practical|theory|smaller-class]\n"
    "  [--bkv-gamma G] [--bkv-rho R] [--bkv-kappa K] [--bkv-tail exact|uniform]\n"
    "  [--express-s S] [--express-c C] [--express-L theory|<L>] [--express-delta D]\n"
    "  [--express-center on|off]\n";

static int choice(const char *flag, const char *val, const char *const *names, const uint32_t *codes, int n,
                  uint32_t *out)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(val, names[i])) {
            *out = codes[i];
            return 1;
        }
    fprintf(stderr, "kvc: %s must be", flag);
    for (int i = 0; i < n; i++) fprintf(stderr, "%s %s", i ? (i + 1 == n ? " or" : ",") : "", names[i]);
    fprintf(stderr, ", got '%s'\n", val);
    return -1;
}

int kvc_method_opts_take(kvc_method_opts *o, const char *a, const char *val)
{
    if (strncmp(a, "--subgen-", 9) && strncmp(a, "--bkv-", 6) && strncmp(a, "--express-", 10) && strcmp(a, "--beta"))
        return 0;
    if (!val) {
        fprintf(stderr, "kvc: %s needs a value\n", a);
        return -1;
    }
    int bad = 0;
    if (!strcmp(a, "--beta")) bad = kvc_cli_f64(a, val, 1e-6, 1e6, &o->beta);
    else if (!strcmp(a, "--subgen-t")) bad = kvc_cli_u64(a, val, 1, 4096, &o->sg_t);
    else if (!strcmp(a, "--subgen-s")) bad = kvc_cli_u64(a, val, 1, KVC_MAX_BUDGET, &o->sg_s);
    else if (!strcmp(a, "--subgen-mmax")) bad = kvc_cli_u64(a, val, 1, KVC_MAX_BUDGET, &o->sg_mmax);
    else if (!strcmp(a, "--subgen-delta0")) bad = kvc_cli_f64(a, val, 0.0, 1e30, &o->sg_delta0);
    else if (!strcmp(a, "--bkv-t")) bad = kvc_cli_u64(a, val, 2, KVC_MAX_BUDGET, &o->bkv_t);
    else if (!strcmp(a, "--bkv-levels")) bad = kvc_cli_u64(a, val, 1, 16, &o->bkv_levels);
    else if (!strcmp(a, "--bkv-bmax")) bad = kvc_cli_u64(a, val, 1, 64, &o->bkv_bmax);
    else if (!strcmp(a, "--bkv-gamma")) bad = kvc_cli_f64(a, val, 1e-9, 1e9, &o->bkv_gamma);
    else if (!strcmp(a, "--bkv-rho")) bad = kvc_cli_f64(a, val, 0.0, 0.999, &o->bkv_rho);
    else if (!strcmp(a, "--bkv-kappa")) bad = kvc_cli_f64(a, val, 0.0, 1e6, &o->bkv_kappa);
    else if (!strcmp(a, "--bkv-mode")) {
        static const char *const n[] = {"practical", "theory", "smaller-class"};
        static const uint32_t c[] = {KVC_BALANCE_PRACTICAL, KVC_BALANCE_THEORY, KVC_BALANCE_SMALLER_CLASS};
        return choice(a, val, n, c, 3, &o->bkv_mode);
    } else if (!strcmp(a, "--bkv-tail")) {
        static const char *const n[] = {"exact", "uniform"};
        static const uint32_t c[] = {KVC_METHOD_EXACT, KVC_METHOD_UNIFORM};
        return choice(a, val, n, c, 2, &o->bkv_tail);
    } else if (!strcmp(a, "--express-s")) bad = kvc_cli_u64(a, val, 2, 1u << 22, &o->x_s);
    else if (!strcmp(a, "--express-c")) bad = kvc_cli_u64(a, val, 1, 1u << 22, &o->x_c);
    else if (!strcmp(a, "--express-delta")) bad = kvc_cli_f64(a, val, 1e-12, 0.999999, &o->x_delta);
    else if (!strcmp(a, "--express-center")) {
        static const char *const n[] = {"on", "off"};
        static const uint32_t c[] = {1, 2};
        return choice(a, val, n, c, 2, &o->x_center);
    } else if (!strcmp(a, "--express-L")) {
        if (!strcmp(val, "theory")) {
            o->x_lmode = KVC_EXPRESS_L_THEORY;
            return 1;
        }
        bad = kvc_cli_f64(a, val, 1e-6, 1e6, &o->x_L);
        if (!bad) o->x_lmode = KVC_EXPRESS_L_CONST;
    } else {
        fprintf(stderr, "kvc: unknown method flag '%s'\n", a);
        return -1;
    }
    return bad ? -1 : 1;
}

void kvc_method_opts_apply(const kvc_method_opts *o, kvc_stream_config *cfg)
{
    if (o->beta > 0) cfg->beta = (float)o->beta;
    if (o->sg_t) cfg->subgen.t = (uint32_t)o->sg_t;
    if (o->sg_s) cfg->subgen.s = (uint32_t)o->sg_s;
    if (o->sg_mmax) cfg->subgen.m_max = (uint32_t)o->sg_mmax;
    if (o->sg_delta0 > 0) cfg->subgen.delta0 = (float)o->sg_delta0;
    if (o->bkv_t) cfg->balancekv.t = (uint32_t)o->bkv_t;
    if (o->bkv_levels) cfg->balancekv.levels = (uint32_t)o->bkv_levels;
    if (o->bkv_bmax) cfg->balancekv.b_max = (uint32_t)o->bkv_bmax;
    if (o->bkv_gamma > 0) cfg->balancekv.gamma = (float)o->bkv_gamma;
    if (o->bkv_rho > 0) cfg->balancekv.rho = (float)o->bkv_rho;
    if (o->bkv_kappa > 0) cfg->balancekv.kappa = (float)o->bkv_kappa;
    if (o->bkv_mode) cfg->balancekv.mode = o->bkv_mode;
    if (o->bkv_tail) cfg->balancekv.tail_method = o->bkv_tail;
    if (o->x_s) cfg->express.s = (uint32_t)o->x_s;
    if (o->x_c) cfg->express.c = (uint32_t)o->x_c;
    if (o->x_delta > 0) cfg->express.delta = (float)o->x_delta;
    if (o->x_lmode) cfg->express.l_mode = o->x_lmode;
    if (o->x_lmode == KVC_EXPRESS_L_CONST) cfg->express.L = (float)o->x_L;
    if (o->x_center) cfg->express.center = o->x_center;
}

void kvc_method_opts_describe(const kvc_method_opts *o, char *buf, size_t cap)
{
    size_t n = strlen(buf);
#define ADD(...)                                                             \
    do {                                                                     \
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);   \
    } while (0)
    if (o->beta > 0) ADD(" --beta %g", o->beta);
    if (o->sg_t) ADD(" --subgen-t %llu", (unsigned long long)o->sg_t);
    if (o->sg_s) ADD(" --subgen-s %llu", (unsigned long long)o->sg_s);
    if (o->sg_mmax) ADD(" --subgen-mmax %llu", (unsigned long long)o->sg_mmax);
    if (o->sg_delta0 > 0) ADD(" --subgen-delta0 %g", o->sg_delta0);
    if (o->bkv_t) ADD(" --bkv-t %llu", (unsigned long long)o->bkv_t);
    if (o->bkv_levels) ADD(" --bkv-levels %llu", (unsigned long long)o->bkv_levels);
    if (o->bkv_bmax) ADD(" --bkv-bmax %llu", (unsigned long long)o->bkv_bmax);
    if (o->bkv_gamma > 0) ADD(" --bkv-gamma %g", o->bkv_gamma);
    if (o->bkv_rho > 0) ADD(" --bkv-rho %g", o->bkv_rho);
    if (o->bkv_kappa > 0) ADD(" --bkv-kappa %g", o->bkv_kappa);
    if (o->bkv_mode)
        ADD(" --bkv-mode %s", o->bkv_mode == KVC_BALANCE_PRACTICAL ? "practical"
                              : o->bkv_mode == KVC_BALANCE_THEORY  ? "theory"
                                                                   : "smaller-class");
    if (o->bkv_tail) ADD(" --bkv-tail %s", o->bkv_tail == KVC_METHOD_EXACT ? "exact" : "uniform");
    if (o->x_s) ADD(" --express-s %llu", (unsigned long long)o->x_s);
    if (o->x_c) ADD(" --express-c %llu", (unsigned long long)o->x_c);
    if (o->x_lmode == KVC_EXPRESS_L_THEORY) ADD(" --express-L theory");
    if (o->x_lmode == KVC_EXPRESS_L_CONST) ADD(" --express-L %g", o->x_L);
    if (o->x_delta > 0) ADD(" --express-delta %g", o->x_delta);
    if (o->x_center) ADD(" --express-center %s", o->x_center == 1 ? "on" : "off");
#undef ADD
}
