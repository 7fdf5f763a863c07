/* SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "persist.h"

/* a equals b, or a is a directory above b. */
static bool covers(const char *a, const char *b) {
        size_t n = strlen(a);
        if (strncmp(a, b, n) != 0)
                return false;
        return b[n] == '\0' || b[n] == '/' || (n == 1 && a[0] == '/');
}

char *persist_dir_canonical(const char *entry, const char **ret_why) {
        static const char *const reserved[] = { "/workspace", "/run/lazaret", "/proc", "/sys", "/dev" };
        *ret_why = NULL;
        if (!entry || entry[0] != '/') {
                *ret_why = "must be an absolute path in the sandbox";
                return NULL;
        }
        char *out = malloc(strlen(entry) + 2);
        if (!out)
                return NULL;
        size_t n = 0;
        for (const char *p = entry; *p;) {
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                size_t len = strcspn(p, "/");
                if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
                        *ret_why = "contains a '.' or '..' segment";
                        free(out);
                        return NULL;
                }
                out[n++] = '/';
                memcpy(out + n, p, len);
                n += len;
                p += len;
        }
        if (n == 0) {
                *ret_why = "is the root directory: name the directories to keep, such as /usr";
                free(out);
                return NULL;
        }
        out[n] = '\0';
        for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
                if (covers(out, reserved[i]) || covers(reserved[i], out)) {
                        *ret_why = covers(out, reserved[i])
                                           ? "covers a directory the sandbox needs as it is (/workspace, "
                                             "/run/lazaret, /proc, /sys or /dev)"
                                           : "lies inside a directory the sandbox needs as it is (/workspace, "
                                             "/run/lazaret, /proc, /sys or /dev)";
                        free(out);
                        return NULL;
                }
        return out;
}

int persist_dirs_overlap(const char *a, const char *b) {
        return covers(a, b) || covers(b, a);
}

char *persist_dir_name(const char *canonical) {
        const char *p = canonical[0] == '/' ? canonical + 1 : canonical;
        size_t need = 1;
        for (const char *q = p; *q; q++)
                need += (*q == '/' || *q == '_') ? 3 : 1;
        char *out = malloc(need);
        if (!out)
                return NULL;
        size_t n = 0;
        for (const char *q = p; *q; q++) {
                if (*q == '/' || *q == '_') {
                        memcpy(out + n, *q == '/' ? "_2f" : "_5f", 3);
                        n += 3;
                } else
                        out[n++] = *q;
        }
        out[n] = '\0';
        return out;
}
