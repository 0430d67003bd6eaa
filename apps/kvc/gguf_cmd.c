/* kvc gguf: inspect a GGUF file (metadata summary, tensor types) and dump a
 * dequantised tensor as .npy (rows = the outer dimension). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvc_gguf.h"
#include "kvc_npy.h"
#include "kvc_err.h"
#include "commands.h"

static uint8_t *read_all(const char *path, size_t *len, char *err, size_t errlen)
{
    uint8_t *b;
    return kvc_read_regular_file(path, &b, len, err, errlen) == KVC_OK ? b : NULL;
}

static void gguf_usage(FILE *f)
{
    fprintf(f, "usage: kvc gguf FILE.gguf [--dump TENSOR --out FILE.npy]\n"
               "  Lists the file's metadata and tensors; --dump writes one tensor, dequantised, as .npy.\n");
}

int kvc_cmd_gguf(int argc, char **argv)
{
    const char *path = NULL, *dump = NULL, *out = NULL;
    int have_path = 0;
    const kvc_flag fl[] = {
        {"", 's', &path, 0, 0, &have_path, NULL},
        {"--dump", 's', &dump, 0, 0, NULL, "TENSOR\tdequantise this tensor (needs --out)"},
        {"--out", 's', &out, 0, 0, NULL, "FILE.npy\twhere --dump writes it"},
    };
    const int prc = kvc_cli_parse("gguf", argc, argv, fl, sizeof fl / sizeof fl[0], NULL, gguf_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (!path || (dump && !out)) {
        fprintf(stderr, "kvc gguf: a FILE (and --out with --dump) is required\n");
        return 2;
    }
    size_t len;
    char err[256];
    uint8_t *buf = read_all(path, &len, err, sizeof err);
    if (!buf) {
        fprintf(stderr, "kvc gguf: %s\n", err);
        return 1;
    }
    kvc_gguf g;
    if (kvc_gguf_parse(buf, len, &g, err, sizeof err) != KVC_OK) {
        fprintf(stderr, "kvc gguf: %s: %s\n", path, err);
        free(buf);
        return 1;
    }
    int rc = 0;
    if (!dump) {
        const char *arch = "?";
        size_t alen = 1;
        kvc_gguf_get_string(&g, "general.architecture", &arch, &alen);
        printf("%s: GGUF v%u, %" PRIu64 " key-values, %" PRIu64 " tensors, alignment %u, architecture %.*s\n", path,
               g.version, g.n_kv, g.n_tensors, g.alignment, (int)alen, arch);
        uint64_t count[32] = {0};
        for (uint64_t i = 0; i < g.n_tensors; i++)
            if (g.tensors[i].type < 32) count[g.tensors[i].type]++;
        for (int t = 0; t < 32; t++)
            if (count[t]) printf("  ggml type %d: %" PRIu64 " tensors\n", t, count[t]);
    } else {
        const kvc_gguf_tensor *t = kvc_gguf_tensor_find(&g, dump);
        float *data = t ? malloc((size_t)t->n_elems * sizeof(float)) : NULL;
        if (!t) {
            fprintf(stderr, "kvc gguf: no tensor '%s'\n", dump);
            rc = 1;
        } else if (!data || kvc_gguf_dequantize(&g, t, data) != KVC_OK) {
            fprintf(stderr, "kvc gguf: cannot dequantise '%s' (type %u)\n", dump, t->type);
            rc = 1;
        } else {
            size_t shape[2] = {(size_t)(t->n_elems / t->dims[0]), (size_t)t->dims[0]};
            if (kvc_npy_save(out, data, t->n_dims == 1 ? 1 : 2, t->n_dims == 1 ? &shape[1] : shape, KVC_NPY_F32, err,
                             sizeof err) != KVC_OK) {
                fprintf(stderr, "kvc gguf: %s\n", err);
                rc = 1;
            }
        }
        free(data);
    }
    kvc_gguf_free(&g);
    free(buf);
    return rc;
}
