/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "native-layers.h"
#include "path-util.h"
#include "persist.h"

char *native_layer_dir(const char *domain_dir, const char *dir) {
        char *name = persist_dir_name(dir), *leaf = NULL;
        if (!name || asprintf(&leaf, "%s" NATIVE_LAYER_SUFFIX, name) < 0) {
                free(name);
                return NULL;
        }
        free(name);
        char *p = path_join(domain_dir, leaf);
        free(leaf);
        return p;
}

int native_layers_args(const LaunchSpec *s, Argv *a, char **ret_error) {
        for (char **d = s->persistent_dirs; d && *d; d++) {
                char *layer = native_layer_dir(s->domain_dir, *d);
                if (!layer)
                        return -ENOMEM;
                struct stat st;
                if (mkdir(layer, 0700) < 0 && errno != EEXIST) {
                        int r = -errno;
                        if (asprintf(ret_error, "cannot make %s for persistent directory %s: %s", layer, *d,
                                     strerror(-r)) < 0)
                                *ret_error = NULL;
                        free(layer);
                        return r;
                }
                if (lstat(layer, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0077)) {
                        if (asprintf(ret_error,
                                     "%s (persistent directory %s) is not a private directory (0700) of yours; "
                                     "remove it ('lazaret reset --dir %s') or make it so",
                                     layer, *d, *d) < 0)
                                *ret_error = NULL;
                        free(layer);
                        return -EPERM;
                }
                argv_add(a, "--persist");
                argv_addf(a, "%s:%s", layer, *d);
                free(layer);
        }
        return a->oom ? -ENOMEM : 0;
}

bool native_layers_new(const LaunchSpec *s) {
        for (char **d = s->persistent_dirs; d && *d; d++) {
                char *layer = native_layer_dir(s->domain_dir, *d);
                char *upper = layer ? path_join(layer, "upper") : NULL;
                struct stat st;
                bool missing = upper && lstat(upper, &st) < 0;
                free(layer);
                free(upper);
                if (missing)
                        return true;
        }
        return false;
}

char **native_layers_uppers(const LaunchSpec *s) {
        size_t n = 0;
        for (char **d = s->persistent_dirs; d && *d; d++)
                n++;
        char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                char *layer = native_layer_dir(s->domain_dir, s->persistent_dirs[i]);
                v[i] = layer ? path_join(layer, "upper") : NULL;
                free(layer);
                if (!v[i]) {
                        for (size_t k = 0; k < i; k++)
                                free(v[k]);
                        free(v);
                        return NULL;
                }
        }
        return v;
}
