/* kvc: the kvcompress command line. */
#include <stdio.h>
#include <string.h>

#include "kvc/kvc.h"
#include "llama2c.h"

#include "bench.h"
#include "demo.h"
#include "eval.h"
#include "dump.h"
#include "profile.h"
#include "generate.h"
#include "gguf_cmd.h"
#include "logits_cmd.h"
#include "oracle_cmd.h"
#include "ppl.h"
#include "synth.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvc <command> [options]   (kvc <command> --help for its options)\n"
            "  synth   write a synthetic q/k/v trace with structure (.npy)\n"
            "  eval    stream a trace through a method and compare with exact attention\n"
            "  generate text from a llama2.c model on a compressed cache\n"
            "  ppl     perplexity of a text with a compressed cache and with exact\n"
            "  dump    write each layer's q/k/v of a model run as .npy traces\n"
            "  profile score each (layer, kv head) as streaming, retrieval or diffuse (kvc bench --head-profile)\n"
            "  oracle  check error bounds statistically against MPFR exact attention\n"
            "  gguf    inspect a GGUF file, dump a dequantised tensor as .npy\n"
            "  logits  a model's logits over token ids (.bin or .gguf), as .npy\n"
            "  bench   recall | ppl | decode: every method x budget on a real model\n"
            "  demo    synth + eval of every method at one budget, as a table\n"
            "  methods list the library's methods (name, then what it keeps), and its storage types\n"
            "  version print the version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    char why[512];
    if (kvc_l2c_kernels_env_problem(why, sizeof why)) { /* a forced table that would be ignored */
        fprintf(stderr, "kvc: %s\n", why);
        return 2;
    }
    if (!strcmp(cmd, "eval")) return kvc_cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "synth")) return kvc_cmd_synth(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate")) return kvc_cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "ppl")) return kvc_cmd_ppl(argc - 1, argv + 1);
    if (!strcmp(cmd, "dump")) return kvc_cmd_dump(argc - 1, argv + 1);
    if (!strcmp(cmd, "profile")) return kvc_cmd_profile(argc - 1, argv + 1);
    if (!strcmp(cmd, "oracle")) return kvc_cmd_oracle(argc - 1, argv + 1);
    if (!strcmp(cmd, "gguf")) return kvc_cmd_gguf(argc - 1, argv + 1);
    if (!strcmp(cmd, "logits")) return kvc_cmd_logits(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return kvc_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "demo")) return kvc_cmd_demo(argc - 1, argv + 1);
    if (!strcmp(cmd, "methods")) { /* the registry, for scripts: first column = the --method name */
        for (size_t i = 0; i < kvc_method_count(); i++)
            printf("%-18s %s\n", kvc_method_name(kvc_method_at(i)), kvc_method_summary(kvc_method_at(i)));
        printf("# storage types (--dtype):");
        for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++)
            if (kvc_dtype_implemented((kvc_dtype)t)) printf(" %s", kvc_dtype_name((kvc_dtype)t));
        printf("\n");
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("kvc %s\n", KVC_VERSION_STRING);
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "kvc: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
