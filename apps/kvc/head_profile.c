/* Reading and writing head profiles (kvc profile), and the flags that say how
 * each kind of head is served (kvc bench --head-profile). File format, one
 * line per (layer, kv head) after '#' comment lines:
 *   # kvc head profile v1
 *   # layers L kv_heads H
 *   <layer> <head> <streaming|retrieval|diffuse> <local> <top>          */
#include "head_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[KVC_HEAD_KINDS] = {"streaming", "retrieval", "diffuse"};

const char *kvc_head_kind_name(int kind) { return kind >= 0 && kind < KVC_HEAD_KINDS ? kind_names[kind] : "?"; }

static int kind_parse(const char *s)
{
    for (int k = 0; k < KVC_HEAD_KINDS; k++)
        if (strcmp(s, kind_names[k]) == 0) return k;
    return -1;
}

int kvc_head_profile_write(const char *path, const kvc_head_profile *hp, const char *note)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kvc profile: cannot write '%s'\n", path);
        return 1;
    }
    fprintf(f, "# kvc head profile v1\n# %s\n# layers %d kv_heads %d\n# layer head kind local top8\n", note,
            hp->n_layers, hp->n_kv_heads);
    for (int l = 0; l < hp->n_layers; l++)
        for (int h = 0; h < hp->n_kv_heads; h++) {
            const int i = l * hp->n_kv_heads + h;
            fprintf(f, "%d %d %s %.4f %.4f\n", l, h, kind_names[hp->kind[i]], (double)hp->local[i], (double)hp->top[i]);
        }
    if (fclose(f) != 0) {
        fprintf(stderr, "kvc profile: writing '%s' failed\n", path);
        return 1;
    }
    return 0;
}

int kvc_head_profile_read(const char *path, kvc_head_profile *hp)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "kvc: cannot read head profile '%s'\n", path);
        return 1;
    }
    memset(hp, 0, sizeof *hp);
    static unsigned char seen[KVC_HEAD_PROFILE_MAX];
    memset(seen, 0, sizeof seen);
    char line[256];
    int lineno = 0, rc = 1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        int L, H;
        if (line[0] == '#') {
            if (sscanf(line, "# layers %d kv_heads %d", &L, &H) == 2) {
                if (L < 1 || H < 1 || L * H > KVC_HEAD_PROFILE_MAX) {
                    fprintf(stderr, "kvc: %s:%d: %d x %d heads is beyond what a profile holds\n", path, lineno, L, H);
                    goto done;
                }
                hp->n_layers = L, hp->n_kv_heads = H;
            }
            continue;
        }
        char kind[32];
        float local, top;
        if (sscanf(line, "%d %d %31s %f %f", &L, &H, kind, &local, &top) != 5 || hp->n_layers == 0 || L < 0 ||
            L >= hp->n_layers || H < 0 || H >= hp->n_kv_heads || kind_parse(kind) < 0) {
            fprintf(stderr,
                    "kvc: %s:%d: expected '<layer> <head> streaming|retrieval|diffuse <local> <top>' after"
                    " the '# layers L kv_heads H' line\n",
                    path, lineno);
            goto done;
        }
        const int i = L * hp->n_kv_heads + H;
        hp->kind[i] = (unsigned char)kind_parse(kind), hp->local[i] = local, hp->top[i] = top, seen[i] = 1;
    }
    if (hp->n_layers == 0) {
        fprintf(stderr, "kvc: %s: no '# layers L kv_heads H' line\n", path);
        goto done;
    }
    for (int i = 0; i < hp->n_layers * hp->n_kv_heads; i++)
        if (!seen[i]) {
            fprintf(stderr, "kvc: %s: layer %d head %d is missing\n", path, i / hp->n_kv_heads, i % hp->n_kv_heads);
            goto done;
        }
    rc = 0;
done:
    fclose(f);
    return rc;
}

int kvc_head_plan_shares(const char *text, kvc_head_plan *plan)
{
    double s[KVC_HEAD_KINDS];
    char tail;
    if (sscanf(text, "%lf,%lf,%lf%c", &s[0], &s[1], &s[2], &tail) != 3 || !(s[0] > 0) || !(s[1] > 0) || !(s[2] > 0) ||
        s[0] > 1e6 || s[1] > 1e6 || s[2] > 1e6) {
        fprintf(stderr, "kvc: --head-shares expects three positive weights 'streaming,retrieval,diffuse', got '%s'\n",
                text);
        return 1;
    }
    for (int k = 0; k < KVC_HEAD_KINDS; k++) plan->share[k] = s[k];
    return 0;
}

int kvc_head_plan_methods(const char *text, kvc_head_plan *plan)
{
    char buf[256];
    if (strlen(text) >= sizeof buf) goto bad;
    strcpy(buf, text);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq) goto bad;
        *eq = 0;
        const int k = kind_parse(tok);
        kvc_method m;
        if (k < 0 || kvc_method_parse(eq + 1, &m) != KVC_OK) goto bad;
        plan->method[k] = m;
    }
    return 0;
bad:
    fprintf(stderr,
            "kvc: --head-methods expects 'streaming=M,retrieval=M,diffuse=M' (any of them) with method"
            " names, got '%s'\n",
            text);
    return 1;
}
