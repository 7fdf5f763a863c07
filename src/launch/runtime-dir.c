/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "log.h"
#include "path-util.h"
#include "runtime-dir.h"
#include "strbuf.h"
#include "string-util.h"

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

int safe_private_dir(const char *dir, const char *what, const char *fix, char **ret_why, bool *ret_other_owner) {
        uid_t me = geteuid();
        struct stat st;
        int r;

        if (ret_other_owner)
                *ret_other_owner = false;
        /* The directory itself, before anything is made: another user's is
         * never used, whatever its mode. */
        if (lstat(dir, &st) == 0 && st.st_uid != me) {
                if (ret_other_owner)
                        *ret_other_owner = true;
                r = asprintf(ret_why,
                             "%s %s belongs to another user (uid %u), who may have made it first to block or watch "
                             "Lazaret; remove it (as root or as that user) or %s",
                             what, dir, (unsigned) st.st_uid, fix);
                return r < 0 ? -ENOMEM : -EPERM;
        }
        /* Every directory above it, from the root down, as far as they
         * exist (the rest we make). */
        _cleanup_free_ char *p = strdup(dir);
        if (!p)
                return -ENOMEM;
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                const char *problem = NULL;
                if (lstat(p, &st) < 0) {
                        if (errno == ENOENT)
                                break;
                        return negative_errno();
                }
                if (S_ISLNK(st.st_mode) && st.st_uid != 0 && st.st_uid != me)
                        problem = "is a symbolic link of another user";
                else if (stat(p, &st) < 0)
                        return negative_errno();
                else if (st.st_uid != 0 && st.st_uid != me)
                        problem = "belongs to another user";
                else if ((st.st_mode & 0022) && !(st.st_mode & S_ISVTX))
                        problem = "is writable by others and not sticky";
                if (problem) {
                        r = asprintf(ret_why,
                                     "%s %s lies in %s, which %s (uid %u, mode %04o), so its owner could put "
                                     "another directory in its place; %s",
                                     what, dir, p, problem, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777), fix);
                        return r < 0 ? -ENOMEM : -EPERM;
                }
                *s = '/';
        }
        const char *why = NULL;
        r = private_dir(dir, &why);
        if (r == -EPERM) {
                r = streq(why, "is accessible to group or others (it must be mode 0700)")
                            ? asprintf(ret_why, "%s %s %s; run 'chmod 0700 %s'", what, dir, why, dir)
                            : asprintf(ret_why, "%s %s %s; remove it or %s", what, dir, why, fix);
                return r < 0 ? -ENOMEM : -EPERM;
        }
        if (r < 0)
                return r;
        return 0;
}

/* ${XDG_CACHE_HOME:-$HOME/.cache}/lazaret/run, when short enough for the
 * sockets in it; NULL when there is none. */
static char *home_runtime_dir(void) {
        const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        char *d = NULL;
        if (cache && path_is_absolute(cache))
                d = path_join(cache, "lazaret/run");
        else if (home && path_is_absolute(home))
                d = path_join(home, ".cache/lazaret/run");
        /* sun_path holds 108 bytes: the directory, '/', the socket's name
         * (lazaret_coord_<12 hex>.sock) and a NUL. */
        if (d && strlen(d) + 1 + strlen("lazaret_coord_.sock") + 12 + 1 > 108)
                d = mfree(d);
        return d;
}

int runtime_paths(const char *domain_hash, RuntimePaths *ret, char **ret_why) {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        StrBuf b = STRBUF_INIT;
        struct stat st;
        bool other = false;
        int r;

        /* XDG_RUNTIME_DIR only when it is really ours (su and sudo sessions
         * often carry another user's). */
        bool use_xdg =
                xdg && path_is_absolute(xdg) && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
        if (use_xdg)
                strbuf_printf(&b, "%s/lazaret", xdg);
        else
                strbuf_printf(&b, "/tmp/lazaret-%u", (unsigned) geteuid());
        _cleanup_free_ char *dir = strbuf_steal(&b);
        if (!dir)
                return -ENOMEM;
        _cleanup_free_ char *why = NULL;
        r = safe_private_dir(dir, "the runtime directory", "set XDG_RUNTIME_DIR to a directory of your own", &why,
                             &other);
        if (r == -EPERM && !use_xdg && other) {
                /* Squatted: another user made /tmp/lazaret-<uid> first. A
                 * directory in our home is safe from them. */
                _cleanup_free_ char *alt = home_runtime_dir(), *why2 = NULL;
                if (alt && safe_private_dir(alt, "the runtime directory", "set XDG_RUNTIME_DIR", &why2, NULL) == 0) {
                        log_warning("%s; using %s instead", why, alt);
                        free(dir);
                        dir = TAKE_PTR(alt);
                        why = mfree(why);
                        r = 0;
                }
        }
        if (r < 0) {
                if (ret_why)
                        *ret_why = TAKE_PTR(why);
                return r;
        }

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
