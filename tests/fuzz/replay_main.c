/* Replays fuzz inputs through LLVMFuzzerTestOneInput without libFuzzer, so a
 * corpus can run as an ordinary test with any compiler (and under ASan/UBSan
 * when the build enables them).
 *
 *   usage: <exe> FILE_OR_DIR...
 *
 * A directory is read non-recursively: its regular files are replayed in
 * strcmp order of their names; names starting with '.' and sub-directories
 * are skipped. Each input is copied into a malloc'd buffer of exactly its size
 * so that a sanitizer sees any read past the end. Prints "replayed N inputs";
 * exits 1 if a path cannot be read or if no input was replayed.
 *
 * Generic: it links against any fuzz target that defines
 * LLVMFuzzerTestOneInput.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path, size_t *count)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "cannot open '%s': %s\n", path, strerror(errno));
        return 1;
    }
    /* read into a growing buffer, then copy into one of exactly the size */
    size_t cap = 4096, n = 0;
    uint8_t *tmp = malloc(cap);
    if (tmp == NULL) {
        fclose(fp);
        fprintf(stderr, "out of memory reading '%s'\n", path);
        return 1;
    }
    for (;;) {
        if (n == cap) {
            uint8_t *t2 = cap <= SIZE_MAX / 2 ? realloc(tmp, cap * 2) : NULL;
            if (t2 == NULL) {
                free(tmp);
                fclose(fp);
                fprintf(stderr, "out of memory reading '%s'\n", path);
                return 1;
            }
            tmp = t2;
            cap *= 2;
        }
        size_t r = fread(tmp + n, 1, cap - n, fp);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(fp);
    int saved = errno;
    fclose(fp);
    if (bad) {
        free(tmp);
        fprintf(stderr, "cannot read '%s': %s\n", path, strerror(saved));
        return 1;
    }
    uint8_t *buf = malloc(n); /* malloc(0) may return NULL: fine for size 0 */
    if (buf == NULL && n > 0) {
        free(tmp);
        fprintf(stderr, "out of memory reading '%s'\n", path);
        return 1;
    }
    if (n > 0) memcpy(buf, tmp, n);
    free(tmp);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    (*count)++;
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int replay_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "cannot open directory '%s': %s\n", dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nn = realloc(names, ncap * sizeof *names);
            if (nn == NULL) {
                rc = 1;
                break;
            }
            names = nn;
            cap = ncap;
        }
        names[n] = malloc(strlen(e->d_name) + 1);
        if (names[n] == NULL) {
            rc = 1;
            break;
        }
        strcpy(names[n], e->d_name);
        n++;
    }
    if (rc == 0 && errno != 0) {
        fprintf(stderr, "cannot list '%s': %s\n", dir, strerror(errno));
        rc = 1;
    } else if (rc != 0) {
        fprintf(stderr, "out of memory listing '%s'\n", dir);
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_names);

    for (size_t i = 0; i < n; i++) {
        size_t plen = strlen(dir) + 1 + strlen(names[i]) + 1;
        char *path = malloc(plen);
        if (path == NULL) {
            fprintf(stderr, "out of memory\n");
            rc = 1;
        } else {
            snprintf(path, plen, "%s/%s", dir, names[i]);
            struct stat sb;
            if (stat(path, &sb) != 0) {
                fprintf(stderr, "cannot stat '%s': %s\n", path, strerror(errno));
                rc = 1;
            } else if (S_ISREG(sb.st_mode)) {
                rc |= replay_file(path, count);
            }
            free(path);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "cannot stat '%s': %s\n", argv[i], strerror(errno));
            rc = 1;
        } else if (S_ISDIR(sb.st_mode)) {
            rc |= replay_dir(argv[i], &count);
        } else {
            rc |= replay_file(argv[i], &count);
        }
    }
    printf("replayed %zu inputs\n", count);
    if (count == 0) {
        fprintf(stderr, "no inputs were replayed\n");
        rc = 1;
    }
    return rc;
}
