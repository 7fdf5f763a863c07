/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "path-util.h"
#include "strbuf.h"
#include "string-util.h"

bool path_has_dotdot(const char *path) {
        const char *p = path;
        while (*p) {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return true;
                p += n;
                while (*p == '/')
                        p++;
        }
        return false;
}

char *path_join(const char *a, const char *b) {
        StrBuf s = STRBUF_INIT;
        size_t la = strlen(a);
        while (la > 1 && a[la - 1] == '/')
                la--;
        strbuf_putn(&s, a, la);
        while (*b == '/')
                b++;
        if (la == 0 || a[la - 1] != '/')
                strbuf_putc(&s, '/');
        strbuf_puts(&s, b);
        return strbuf_steal(&s);
}

int path_canonicalize(const char *path, char **ret) {
        char *r = realpath(path, NULL);
        if (!r)
                return negative_errno();
        *ret = r;
        return 0;
}

const char *path_under(const char *path, const char *root) {
        size_t n = strlen(root);
        while (n > 1 && root[n - 1] == '/')
                n--;
        if (n == 1 && root[0] == '/')
                n = 0; /* everything absolute is below "/" */
        if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != '\0'))
                return NULL;
        const char *rest = path + n;
        while (*rest == '/')
                rest++;
        return rest;
}

int path_find_git_top(const char *dir, char **ret_top, bool *ret_is_dir) {
        if (!path_is_absolute(dir))
                return -EINVAL;
        _cleanup_free_ char *cur = strdup(dir);
        if (!cur)
                return -ENOMEM;
        size_t len = strlen(cur);
        while (len > 1 && cur[len - 1] == '/')
                cur[--len] = '\0';
        for (;;) {
                _cleanup_free_ char *gd = path_join(cur, ".git");
                if (!gd)
                        return -ENOMEM;
                struct stat st;
                if (lstat(gd, &st) == 0) {
                        *ret_is_dir = S_ISDIR(st.st_mode);
                        *ret_top = TAKE_PTR(cur);
                        return 1;
                }
                if (errno != ENOENT)
                        return negative_errno();
                if (streq(cur, "/"))
                        return 0;
                char *slash = strrchr(cur, '/');
                if (slash == cur)
                        slash[1] = '\0';
                else
                        *slash = '\0';
        }
}

bool path_relative_safe(const char *s, size_t max) {
        size_t n = strlen(s);
        if (n == 0 || n > max || s[0] == '/' || s[n - 1] == '/')
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c < 0x20 || c == 0x7f)
                        return false;
                if (c == 0xc2 && i + 1 < n && (unsigned char) s[i + 1] >= 0x80 && (unsigned char) s[i + 1] <= 0x9f)
                        return false;
        }
        for (const char *p = s; *p;) {
                size_t k = strcspn(p, "/");
                if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p += k;
                if (*p == '/')
                        p++;
        }
        return true;
}

int path_resolve_no_links_in(const char *path, char *const *roots, size_t n_roots, char **ret_canonical,
                             char **ret_link, size_t *ret_root) {
        if (!path_is_absolute(path))
                return -EINVAL;
        /* todo: what is left to resolve; cur: the canonical directory so
         * far ("" for "/"). */
        char todo[PATH_MAX + 1], cur[PATH_MAX + 1] = "", next[PATH_MAX + 1];
        if (strlen(path) >= sizeof(todo))
                return -ENAMETOOLONG;
        strcpy(todo, path);
        unsigned links = 0;
        size_t at = 0;
        for (;;) {
                while (todo[at] == '/')
                        at++;
                if (!todo[at])
                        break;
                size_t n = strcspn(todo + at, "/");
                const char *name = todo + at;
                at += n;
                if (n == 1 && name[0] == '.')
                        continue;
                if (n == 2 && name[0] == '.' && name[1] == '.') {
                        char *slash = strrchr(cur, '/');
                        if (slash)
                                *slash = '\0';
                        continue;
                }
                size_t cl = strlen(cur);
                if (cl + 1 + n >= sizeof(next))
                        return -ENAMETOOLONG;
                memcpy(next, cur, cl);
                next[cl] = '/';
                memcpy(next + cl + 1, name, n);
                next[cl + 1 + n] = '\0';
                struct stat st;
                if (lstat(next, &st) < 0)
                        return negative_errno();
                if (!S_ISLNK(st.st_mode)) {
                        memcpy(cur, next, cl + 1 + n + 1);
                        continue;
                }
                for (size_t i = 0; i < n_roots; i++)
                        if (path_under(cl ? cur : "/", roots[i])) {
                                char *link = strdup(next);
                                if (!link)
                                        return -ENOMEM;
                                *ret_link = link;
                                *ret_root = i;
                                return 1;
                        }
                if (++links > 40)
                        return -ELOOP;
                char target[PATH_MAX + 1];
                ssize_t k = readlink(next, target, sizeof(target) - 1);
                if (k < 0)
                        return negative_errno();
                target[k] = '\0';
                /* The link's target, then what was left after its name. */
                size_t rest = strlen(todo + at);
                if ((size_t) k + 1 + rest >= sizeof(todo))
                        return -ENAMETOOLONG;
                memmove(todo + k + 1, todo + at, rest + 1);
                memcpy(todo, target, (size_t) k);
                todo[k] = '/';
                at = 0;
                if (target[0] == '/')
                        cur[0] = '\0';
        }
        char *out = strdup(cur[0] ? cur : "/");
        if (!out)
                return -ENOMEM;
        *ret_canonical = out;
        return 0;
}
