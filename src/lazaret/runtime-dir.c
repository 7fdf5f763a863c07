/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "path-util.h"
#include "runtime-dir.h"
#include "strbuf.h"

int private_dir(const char *dir, const char **ret_why) {
        _cleanup_free_ char *p = strdup(dir);
        if (!p)
                return -ENOMEM;
        /* Parents as needed (for XDG dirs they exist already). */
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                if (mkdir(p, 0700) < 0 && errno != EEXIST)
                        return negative_errno();
                *s = '/';
        }
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return negative_errno();

        struct stat st;
        if (lstat(dir, &st) < 0)
                return negative_errno();
        if (S_ISLNK(st.st_mode)) {
                *ret_why = "is a symbolic link";
                return -EPERM;
        }
        if (!S_ISDIR(st.st_mode)) {
                *ret_why = "is not a directory";
                return -EPERM;
        }
        if (st.st_uid != geteuid()) {
                *ret_why = "belongs to another user";
                return -EPERM;
        }
        if (st.st_mode & 0077) {
                *ret_why = "is accessible to group or others (it must be mode 0700)";
                return -EPERM;
        }
        return 0;
}

int runtime_paths(const char *domain_hash, RuntimePaths *ret, const char **ret_why) {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        StrBuf b = STRBUF_INIT;
        struct stat st;

        /* XDG_RUNTIME_DIR only when it is really ours (su and sudo sessions
         * often carry another user's). */
        if (xdg && path_is_absolute(xdg) && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
                strbuf_printf(&b, "%s/lazaret", xdg);
        else
                strbuf_printf(&b, "/tmp/lazaret-%u", (unsigned) geteuid());
        _cleanup_free_ char *dir = strbuf_steal(&b);
        if (!dir)
                return -ENOMEM;
        int r = private_dir(dir, ret_why);
        if (r < 0)
                return r;

        RuntimePaths p = { .dir = TAKE_PTR(dir) };
        strbuf_printf(&b, "%s/lazaret_coord_%s.lock", p.dir, domain_hash);
        p.lock = strbuf_steal(&b);
        strbuf_printf(&b, "%s/lazaret_coord_%s.sock", p.dir, domain_hash);
        p.socket = strbuf_steal(&b);
        if (!p.lock || !p.socket) {
                runtime_paths_done(&p);
                return -ENOMEM;
        }
        *ret = p;
        return 0;
}

void runtime_paths_done(RuntimePaths *p) {
        free(p->dir);
        free(p->lock);
        free(p->socket);
        *p = (RuntimePaths){};
}
