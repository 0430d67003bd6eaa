/* Where the model tests look for SmolLM2-135M: $KVC_SMOLLM2, else the path
 * apps/fetch-smollm2.sh writes ($KVC_CACHE, default ~/.cache/kvcompress). */
#ifndef KVC_TEST_SMOLLM2_PATH_H
#define KVC_TEST_SMOLLM2_PATH_H
#include <stdio.h>
#include <stdlib.h>

static const char *kvc_test_smollm2_path(void)
{
    static char buf[4096];
    const char *path = getenv("KVC_SMOLLM2");
    if (path && *path) return path;
    const char *cache = getenv("KVC_CACHE"), *home = getenv("HOME");
    if (cache && *cache)
        snprintf(buf, sizeof buf, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
    else
        snprintf(buf, sizeof buf, "%s/.cache/kvcompress/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
    return buf;
}

/** The model's path when the file is readable; NULL after printing the skip
 *  reason the model tests give (then return KVC_TEST_SKIP). */
static const char *kvc_test_smollm2_or_skip(void)
{
    const char *path = kvc_test_smollm2_path();
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP: %s not found (apps/fetch-smollm2.sh fetches it)\n", path);
        return NULL;
    }
    fclose(f);
    return path;
}
#endif
