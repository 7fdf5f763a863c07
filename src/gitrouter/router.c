/* SPDX-License-Identifier: MIT */
/* The git router's file operations. Single-threaded: fuse_loop. Every
 * handler returns 0 or -errno and never exits; a refused or failing request
 * only fails that request. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "event-record.h"
#include "exec-util.h"
#include "fd-util.h"
#include "git-object.h"
#include "host-git.h"
#include "macro.h"
#include "path-pattern.h"
#include "router.h"

#define RESOLVE_FLAGS (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static Router *router(void) {
        return fuse_get_context()->private_data;
}

/* Which rule refused rel: the git policy, a protected or masked name,
 * or the workspace's root. */
static const char *refusal_rule(const Router *r, const char *rel) {
        if (!r->workspace || workspace_policy_in_git(&r->ws, rel))
                return "git";
        if (!*rel)
                return "root";
        if (path_pattern_match_any(rel, r->ws.mask, r->ws.n_mask))
                return "masked";
        if (path_pattern_match_any(rel, r->ws.protect, r->ws.n_protect))
                return "protected";
        return "guarded";
}

static void refused_as(Router *r, const char *rel, GitOp op, int err, const char *rule) {
        if (r->events_fd < 0)
                return;
        char path[4200];
        /* The path as the sandbox sees it below the workspace (branch mode
         * serves the repository's .git at its own path). */
        snprintf(path, sizeof path, "%s%s", r->workspace ? "" : *rel ? ".git/" : ".git", rel);
        /* Cut so the line stays under PIPE_BUF even when every byte is
         * escaped (at most six characters each): a longer one would be
         * dropped, and an agent could turn its refusals into a count. */
        json_t *pj = event_string(path, strnlen(path, 512));
        json_t *o = json_pack("{s:s, s:s, s:o*, s:s}", "rule", rule, "op", git_op_to_string(op) ?: "?", "path", pj,
                              "errno", strerrorname_np(err) ?: "?");
        if (o && r->events_dropped > 0)
                json_object_set_new(o, "dropped", json_integer((json_int_t) r->events_dropped));
        char *line = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(o);
        size_t len = line ? strlen(line) : 0;
        if (line)
                line[len++] = '\n'; /* the NUL becomes the newline */
        /* At most PIPE_BUF bytes: written whole or not at all. */
        ssize_t k = line && len <= PIPE_BUF ? write(r->events_fd, line, len) : -1;
        if (k == (ssize_t) len)
                r->events_dropped = 0;
        else
                r->events_dropped++;
        free(line);
}

void router_refused(Router *r, const char *rel, GitOp op, int err) {
        refused_as(r, rel, op, err, refusal_rule(r, rel));
}

static int openat2_beneath(int root, const char *rel, int flags, mode_t mode) {
        struct open_how how = {
                .flags = (unsigned) flags | O_CLOEXEC,
                .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
                .resolve = RESOLVE_FLAGS,
        };
        long fd = syscall(SYS_openat2, root, *rel ? rel : ".", &how, sizeof how);
        if (fd < 0)
                return negative_errno();
        return (int) fd;
}

/* Make the isolated directory that relpath lives in (its shortest isolated
 * prefix: "hooks", "modules/a/hooks") and that directory's parents, walking
 * one segment at a time without following symlinks. */
static int ensure_isolated(const Router *r, const char *rel) {
        char buf[4096];
        size_t len = strlen(rel);
        if (len >= sizeof buf)
                return -ENAMETOOLONG;
        memcpy(buf, rel, len + 1);

        /* Find the shortest prefix the policy isolates. */
        size_t end = 0;
        for (size_t i = 0; i <= len; i++) {
                if (buf[i] != '/' && buf[i] != '\0')
                        continue;
                char saved = buf[i];
                buf[i] = '\0';
                bool iso = git_policy_check(&r->policy, buf, GIT_OP_READ, NULL) == GIT_DECISION_ISOLATED;
                buf[i] = saved;
                if (iso) {
                        end = i;
                        break;
                }
        }
        if (end == 0)
                return -EINVAL;
        buf[end] = '\0';

        _cleanup_close_ int fd = fcntl(r->iso_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return negative_errno();
        char *save = NULL;
        for (char *seg = strtok_r(buf, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
                if (mkdirat(fd, seg, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                int nfd = openat2_beneath(fd, seg, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
                if (nfd < 0)
                        return nfd;
                safe_close(fd);
                fd = nfd;
        }
        return 0;
}

/* The markers (workspace-policy.h) directory dfd holds: each name that
 * exists as anything. A name that cannot be looked at counts as there. */
static unsigned dir_markers(int dfd) {
        unsigned m = 0;
        for (size_t i = 0; workspace_marker_names[i]; i++) {
                struct stat st;
                if (fstatat(dfd, workspace_marker_names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
                        m |= 1u << i;
        }
        return m;
}

/* Directories known by what they hold, in the working tree outside the
 * repository's .git: 0, or the refusal (-errno, on the record) of op on rel
 * because a directory above it is a git directory or a venv, or because
 * rel's name would make its directory one. Looked at each time: the
 * router is single-threaded, and the sandbox changes the tree only
 * through it. */
static int marker_check(Router *r, const char *rel, GitOp op) {
        char buf[4096];
        size_t len = strlen(rel);
        if (len >= sizeof buf)
                return -ENAMETOOLONG;
        memcpy(buf, rel, len + 1);
        _cleanup_close_ int fd = fcntl(r->host_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return negative_errno();
        bool creates = op == GIT_OP_CREATE || op == GIT_OP_MKDIR || op == GIT_OP_LINK || op == GIT_OP_RENAME_TO;
        for (char *seg = buf;;) {
                unsigned m = dir_markers(fd);
                char *slash = strchr(seg, '/');
                WsMarked k = workspace_markers_kind(m);
                if (k == WS_MARKED_NONE && !slash && creates)
                        k = workspace_markers_kind(m | workspace_marker_of(seg));
                if (k != WS_MARKED_NONE) {
                        int e = git_policy_refusal(op);
                        refused_as(r, rel, op, e, ws_marked_to_string(k) ?: "guarded");
                        return -e;
                }
                if (!slash)
                        return 0;
                *slash = '\0';
                int nfd = openat2_beneath(fd, seg, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
                if (nfd < 0)
                        return 0; /* not a directory here: the operation itself fails */
                safe_close(fd);
                fd = nfd;
                seg = slash + 1;
        }
}

/* route() succeeded on a masked name (reads only): serve it empty. */
#define ROUTE_MASKED 1

/* Normalize path, check op, and pick the root. On success *ret_rel (caller
 * frees) is relative to *ret_root; returns 0, or ROUTE_MASKED for a read
 * of a masked name. */
static int route(const char *path, GitOp op, char **ret_rel, int *ret_root) {
        Router *r = router();
        _cleanup_free_ char *rel = NULL;
        int e = 0, q;

        q = git_policy_normalize(path, &rel);
        if (q < 0)
                return q;
        if (r->workspace) {
                const char *git_rel = NULL;
                switch (workspace_policy_check(&r->ws, rel, op, &e, &git_rel)) {
                case WS_DECISION_ALLOW:
                        if (op != GIT_OP_READ && !git_rel && (q = marker_check(r, rel, op)) < 0)
                                return q;
                        *ret_root = r->host_fd;
                        *ret_rel = TAKE_PTR(rel);
                        return 0;
                case WS_DECISION_MASKED:
                        *ret_root = r->host_fd;
                        *ret_rel = TAKE_PTR(rel);
                        return ROUTE_MASKED;
                case WS_DECISION_ISOLATED: {
                        /* The hooks of the workspace's .git: the isolated
                         * root holds them at their path below .git. */
                        char *g = strdup(git_rel);
                        if (!g)
                                return -ENOMEM;
                        free(rel);
                        rel = g;
                        q = ensure_isolated(r, rel);
                        if (q < 0)
                                return q;
                        *ret_root = r->iso_fd;
                        *ret_rel = TAKE_PTR(rel);
                        return 0;
                }
                case WS_DECISION_HIDDEN:
                        return -ENOENT;
                case WS_DECISION_DENY:
                        if (e != ENOENT)
                                router_refused(r, rel, op, e);
                        return -e;
                case _WS_DECISION_MAX:
                case _WS_DECISION_INVALID:
                        break;
                }
                return -EIO;
        }
        switch (git_policy_check(&r->policy, rel, op, &e)) {
        case GIT_DECISION_ALLOW:
                *ret_root = r->host_fd;
                break;
        case GIT_DECISION_ISOLATED:
                q = ensure_isolated(r, rel);
                if (q < 0)
                        return q;
                *ret_root = r->iso_fd;
                break;
        case GIT_DECISION_DENY:
                router_refused(r, rel, op, e);
                return -e;
        case _GIT_DECISION_MAX:
        case _GIT_DECISION_INVALID:
                return -EIO;
        }
        *ret_rel = TAKE_PTR(rel);
        return 0;
}

/* May the sandbox write rel (a normalized path on the host root)? */
static bool writable(const char *rel) {
        Router *r = router();
        int e = 0;
        if (r->workspace)
                return workspace_policy_check(&r->ws, rel, GIT_OP_WRITE, &e, NULL) != WS_DECISION_DENY;
        return git_policy_check(&r->policy, rel, GIT_OP_WRITE, &e) != GIT_DECISION_DENY;
}

/* Open the parent directory of rel beneath root; *ret_base points into rel
 * (a single segment, never "." or ".."). */
static int open_parent(int root, const char *rel, const char **ret_base) {
        const char *slash = strrchr(rel, '/');
        if (!*rel)
                return -EBUSY; /* the mount root itself */
        if (!slash) {
                *ret_base = rel;
                return openat2_beneath(root, "", O_PATH | O_DIRECTORY, 0);
        }
        _cleanup_free_ char *dir = strndup(rel, (size_t) (slash - rel));
        if (!dir)
                return -ENOMEM;
        int fd = openat2_beneath(root, dir, O_PATH | O_DIRECTORY, 0);
        if (fd < 0)
                return fd;
        *ret_base = slash + 1;
        return fd;
}

/* How long the kernel may keep rel's entry and attributes (rel relative to
 * the served root, NULL for a file no longer in the tree). Only plain names
 * of the working tree are kept, and only for ROUTER_TREE_TIMEOUT: what the
 * sandbox sees of them may be that much older than the host's (a size, a
 * time, a name the host made or removed). Every change and every open
 * still reaches the router, which decides on the current tree: a kept
 * entry is only a path here (the library serves paths, never inodes), so
 * no decision is made on a stale one. The repository's .git (any .git),
 * protected and masked names, and whatever lies beneath them are never
 * kept: the host's git rewrites config by rename, and the sandbox must
 * read its current size at once. */
static double tree_timeout(const Router *r, const char *rel) {
        if (!r->workspace || !rel || workspace_policy_guarded(&r->ws, rel))
                return 0;
        return ROUTER_TREE_TIMEOUT;
}

/* The library reads the timeouts of the reply it is about to make from
 * cfg: every reply that carries an entry or attributes (lookup, getattr,
 * setattr, create, mkdir, symlink, link), and a lookup's ENOENT, calls
 * rt_getattr just before, so rt_getattr sets them for its path, 0 until it
 * knows better. (A lookup whose parent the library no longer has answers
 * ENOENT without asking: it may keep the last value, for a name beneath a
 * directory that is gone.) */
static void set_timeouts(Router *r, double t, double negative) {
        if (!r->cfg)
                return;
        r->cfg->entry_timeout = t;
        r->cfg->attr_timeout = t;
        r->cfg->negative_timeout = negative;
}

static int rt_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int pfd = -EBADF;
        Router *r = router();
        const char *base;
        int root, q;

        set_timeouts(r, 0, 0);
        if (fi && fi->fh) {
                if (fstat((int) fi->fh, st) < 0)
                        return negative_errno();
                if (path && git_policy_normalize(path, &rel) >= 0)
                        set_timeouts(r, tree_timeout(r, rel), 0);
                return 0;
        }
        q = route(path, GIT_OP_READ, &rel, &root);
        if (q < 0)
                return q;
        if (!*rel) {
                if (fstat(root, st) < 0)
                        return negative_errno();
                set_timeouts(r, tree_timeout(r, rel), 0);
                return 0;
        }
        pfd = open_parent(root, rel, &base);
        if (pfd < 0)
                return pfd;
        if (fstatat(pfd, base, st, AT_SYMLINK_NOFOLLOW) < 0) {
                /* A plain name that is not there may be kept as missing
                 * too: creating it still reaches the router. */
                q = negative_errno();
                if (q == -ENOENT && root == r->host_fd)
                        set_timeouts(r, 0, tree_timeout(r, rel));
                return q;
        }
        if (q == 0 && root == r->host_fd)
                set_timeouts(r, tree_timeout(r, rel), 0);
        if (q == ROUTE_MASKED && !S_ISDIR(st->st_mode)) {
                /* A masked secret: an empty, read-only regular file,
                 * whatever it is on the host. */
                st->st_mode = S_IFREG | (st->st_mode & 0444);
                st->st_size = 0;
                st->st_blocks = 0;
                st->st_nlink = 1;
        }
        return 0;
}

static int rt_readlink(const char *path, char *buf, size_t size) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int pfd = -EBADF;
        const char *base;
        int root, q;

        if (size == 0)
                return -EINVAL;
        q = route(path, GIT_OP_READ, &rel, &root);
        if (q < 0)
                return q;
        if (q == ROUTE_MASKED)
                return -EINVAL; /* shown as an empty regular file */
        pfd = open_parent(root, rel, &base);
        if (pfd < 0)
                return pfd;
        ssize_t n = readlinkat(pfd, base, buf, size - 1);
        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        return 0;
}

static int rt_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags) {
        _cleanup_free_ char *rel = NULL;
        int root, q;
        (void) off, (void) fi, (void) flags;

        q = route(path, GIT_OP_READ, &rel, &root);
        if (q < 0)
                return q;
        if (q == ROUTE_MASKED) {
                /* A masked directory lists as empty. */
                (void) filler(buf, ".", NULL, 0, 0);
                (void) filler(buf, "..", NULL, 0, 0);
                return 0;
        }
        int fd = openat2_beneath(root, rel, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return fd;
        DIR *d = fdopendir(fd);
        if (!d) {
                q = negative_errno();
                safe_close(fd);
                return q;
        }
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        q = errno ? -errno : 0;
                        break;
                }
                if (filler(buf, de->d_name, NULL, 0, 0) != 0)
                        break;
        }
        closedir(d);
        return q;
}

static int rt_mkdir(const char *path, mode_t mode) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int pfd = -EBADF;
        const char *base;
        int root, q;

        q = route(path, GIT_OP_MKDIR, &rel, &root);
        if (q < 0)
                return q;
        pfd = open_parent(root, rel, &base);
        if (pfd < 0)
                return pfd;
        return mkdirat(pfd, base, mode & 07777) < 0 ? negative_errno() : 0;
}

static int remove_at(const char *path, GitOp op, int flags) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int pfd = -EBADF;
        const char *base;
        int root, q;

        q = route(path, op, &rel, &root);
        if (q < 0)
                return q;
        pfd = open_parent(root, rel, &base);
        if (pfd < 0)
                return pfd;
        return unlinkat(pfd, base, flags) < 0 ? negative_errno() : 0;
}

static int rt_unlink(const char *path) {
        return remove_at(path, GIT_OP_UNLINK, 0);
}

static int rt_rmdir(const char *path) {
        return remove_at(path, GIT_OP_RMDIR, AT_REMOVEDIR);
}

/* Moving a directory moves every name beneath it. In workspace mode a
 * directory may move only when no name beneath it is guarded (protected,
 * masked or the repository's .git), under its old path or its new one,
 * and no directory in it is a git directory or a venv (marker_check):
 * otherwise the agent could carry a protected file to where a host program
 * runs it, or make one appear by renaming a directory onto a guarded
 * path. The walk has a budget; a larger tree gets EXDEV, so mv falls back
 * to moving file by file, each name checked on its own. */
#define MOVE_WALK_MAX 4096

typedef struct MoveWalk {
        const char *from, *to; /* the directory's old and new relative paths */
        bool check_from, check_to; /* not in the repository's .git, where the git policy decides */
        size_t seen;
} MoveWalk;

static int move_walk(MoveWalk *w, int dfd, char *sub, size_t sublen) {
        /* A git directory or a venv moves nowhere, nor does what holds one. */
        WsMarked k = w->check_from ? workspace_markers_kind(dir_markers(dfd)) : WS_MARKED_NONE;
        if (k != WS_MARKED_NONE) {
                char a[8192];
                snprintf(a, sizeof a, "%s%s%s", w->from, sublen ? "/" : "", sub);
                refused_as(router(), a, GIT_OP_RENAME_FROM, EACCES, ws_marked_to_string(k) ?: "guarded");
                return -EACCES;
        }
        int fd = openat2_beneath(dfd, "", O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return fd;
        DIR *d = fdopendir(fd);
        if (!d) {
                int q = negative_errno();
                safe_close(fd);
                return q;
        }
        int q = 0;
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        q = errno ? -errno : 0;
                        break;
                }
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (++w->seen > MOVE_WALK_MAX) {
                        q = -EXDEV;
                        break;
                }
                size_t n = strlen(de->d_name);
                if (sublen + 1 + n + 1 > 4096) {
                        q = -EXDEV;
                        break;
                }
                size_t at = sublen;
                if (sublen)
                        sub[at++] = '/';
                memcpy(sub + at, de->d_name, n + 1);
                char a[8192], b[8192];
                snprintf(a, sizeof a, "%s/%s", w->from, sub);
                snprintf(b, sizeof b, "%s/%s", w->to, sub);
                bool bad_from = w->check_from && workspace_policy_guarded(&router()->ws, a);
                if (bad_from || (w->check_to && workspace_policy_guarded(&router()->ws, b))) {
                        router_refused(router(), bad_from ? a : b, bad_from ? GIT_OP_RENAME_FROM : GIT_OP_RENAME_TO,
                                       EACCES);
                        q = -EACCES;
                        break;
                }
                if (de->d_type == DT_DIR) {
                        int cfd = openat2_beneath(dirfd(d), de->d_name, O_PATH | O_DIRECTORY, 0);
                        if (cfd < 0) {
                                q = cfd;
                                break;
                        }
                        q = move_walk(w, cfd, sub, at + n);
                        safe_close(cfd);
                        if (q < 0)
                                break;
                }
                sub[sublen] = '\0';
        }
        closedir(d);
        return q;
}

/* 0 when the directory (or file) at rel_from may move to rel_to. */
static int move_allowed(int root, const char *rel_from, const char *rel_to) {
        _cleanup_close_ int fd = openat2_beneath(root, rel_from, O_PATH | O_NOFOLLOW, 0);
        struct stat st;
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return 0;
        const WorkspacePolicy *p = &router()->ws;
        MoveWalk w = { .from = rel_from,
                       .to = rel_to,
                       .check_from = !workspace_policy_in_git(p, rel_from),
                       .check_to = !workspace_policy_in_git(p, rel_to) };
        if (!w.check_from && !w.check_to)
                return 0;
        char sub[4096] = "";
        return move_walk(&w, fd, sub, 0);
}

/* The path below the repository's .git for rel (relative to the served
 * root), or NULL when rel is not in it. */
static const char *git_rel_of(const Router *r, const char *rel) {
        if (!r->workspace)
                return rel;
        if (!workspace_policy_in_git(&r->ws, rel))
                return NULL;
        return rel[4] == '/' ? rel + 5 : "";
}

/* rel with its last `from` suffix replaced by `to` (caller frees). */
static char *swap_suffix(const char *rel, const char *from, const char *to) {
        size_t n = strlen(rel), f = strlen(from);
        if (n < f || strcmp(rel + n - f, from) != 0)
                return NULL;
        char *s = malloc(n - f + strlen(to) + 1);
        if (!s)
                return NULL;
        memcpy(s, rel, n - f);
        strcpy(s + n - f, to);
        return s;
}

static bool exists_beneath(int root, const char *rel) {
        _cleanup_close_ int fd = openat2_beneath(root, rel, O_PATH | O_NOFOLLOW, 0);
        return fd >= 0;
}

/* The host's git checks that the index at idx_fd is the one the pack at
 * pack_fd makes: `index-pack --verify` re-hashes every object of the pack
 * and compares the index it computes with idx_fd's byte for byte. It wants
 * the two as <stem>.idx and <stem>.pack in one directory: symbolic links
 * to its own descriptors, in a directory of the isolated root that no
 * request path reaches (hooks are the only way into that root). */
static int verify_pack(Router *r, int idx_fd, int pack_fd) {
        static char *git = NULL;
        int q;

        if (!git) {
                const char *path = getenv("PATH");
                q = exec_find_program(path && *path ? path : DEFAULT_SEARCH_PATH, "git", &git);
                if (q < 0)
                        return q;
        }
        if (mkdirat(r->iso_fd, ".lazaret-verify", 0700) < 0 && errno != EEXIST)
                return negative_errno();
        _cleanup_close_ int dir = openat2_beneath(r->iso_fd, ".lazaret-verify", O_PATH | O_DIRECTORY, 0);
        if (dir < 0)
                return dir;
        _cleanup_close_ int dir_rw = openat2_beneath(r->iso_fd, ".lazaret-verify", O_RDONLY | O_DIRECTORY, 0);
        if (dir_rw < 0)
                return dir_rw;
        static const char *const links[][2] = { { "v.idx", "/proc/self/fd/4" }, { "v.pack", "/proc/self/fd/5" } };
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                if (unlinkat(dir_rw, links[i][0], 0) < 0 && errno != ENOENT)
                        return negative_errno();
                if (symlinkat(links[i][1], dir_rw, links[i][0]) < 0)
                        return negative_errno();
        }
        const char *argv[32];
        size_t n = 0;
        argv[n++] = "git";
        for (const char *const *o = host_git_options; *o; o++)
                argv[n++] = *o;
        argv[n++] = "--git-dir=/proc/self/fd/3";
        argv[n++] = "index-pack";
        argv[n++] = "--verify";
        argv[n++] = "-o";
        argv[n++] = "/proc/self/fd/6/v.idx";
        argv[n++] = "/proc/self/fd/6/v.pack";
        argv[n] = NULL;
        int gitdir = r->workspace ? openat2_beneath(r->host_fd, ".git", O_PATH | O_DIRECTORY, 0)
                                  : fcntl(r->host_fd, F_DUPFD_CLOEXEC, 3);
        if (gitdir < 0)
                return gitdir < -1 ? gitdir : negative_errno();
        const int fds[] = { gitdir, idx_fd, pack_fd, dir };
        ExecResult res = {};
        q = exec_capture_fds(git, argv, fds, ELEMENTSOF(fds), 600ULL * 1000000, &res);
        safe_close(gitdir);
        if (q >= 0 && exec_result_failed(&res))
                q = res.spawn_error < 0 ? res.spawn_error : -EBADMSG;
        exec_result_done(&res);
        (void) unlinkat(dir_rw, "v.idx", 0);
        (void) unlinkat(dir_rw, "v.pack", 0);
        return q;
}

/* A rename onto an object file of the repository (git_rel names it below
 * .git): 0 when its content is what its name says, so host git may take
 * it; -EACCES otherwise. A loose object is re-hashed; a pack may come only
 * while its index is not there yet, and the index only when the pack it
 * indexes is in place and `git index-pack --verify` agrees with it. */
static int admit_object(Router *r, int root_from, const char *rel_from, const char *rel_to, const char *git_rel,
                        GitObjectFile kind) {
        _cleanup_close_ int fd = openat2_beneath(root_from, rel_from, O_RDONLY | O_NOFOLLOW, 0);
        struct stat st;
        int q = 0;

        if (fd < 0)
                return fd == -ELOOP || fd == -EISDIR ? -EACCES : fd;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EACCES;
        switch (kind) {
        case GIT_OBJECT_FILE_LOOSE: {
                /* objects/ab/cdef...: the ID is the two names joined. */
                char hex[65];
                const char *dir = git_rel + strlen("objects/"), *slash = strchr(dir, '/');
                if (!slash ||
                    snprintf(hex, sizeof hex, "%.*s%s", (int) (slash - dir), dir, slash + 1) >= (int) sizeof hex)
                        return -EACCES;
                q = git_object_verify_loose(fd, hex);
                break;
        }
        case GIT_OBJECT_FILE_PACK: {
                _cleanup_free_ char *idx = swap_suffix(rel_to, ".pack", ".idx");
                if (!idx)
                        return -ENOMEM;
                if (exists_beneath(r->host_fd, idx))
                        return -EACCES;
                return 0;
        }
        case GIT_OBJECT_FILE_INDEX: {
                _cleanup_free_ char *pack = swap_suffix(rel_to, ".idx", ".pack");
                if (!pack)
                        return -ENOMEM;
                _cleanup_close_ int pack_fd = openat2_beneath(r->host_fd, pack, O_RDONLY | O_NOFOLLOW, 0);
                if (pack_fd < 0)
                        return -EACCES;
                if (fstat(pack_fd, &st) < 0)
                        return negative_errno();
                if (!S_ISREG(st.st_mode))
                        return -EACCES;
                q = verify_pack(r, fd, pack_fd);
                break;
        }
        case GIT_OBJECT_FILE_AUX:
        case GIT_OBJECT_FILE_NONE:
        case _GIT_OBJECT_FILE_MAX:
        case _GIT_OBJECT_FILE_INVALID:
                return kind == GIT_OBJECT_FILE_NONE ? 0 : -EACCES;
        }
        return q == -EBADMSG ? -EACCES : q;
}

static int rt_rename(const char *from, const char *to, unsigned int flags) {
        _cleanup_free_ char *rel_from = NULL, *rel_to = NULL, *x1 = NULL, *x2 = NULL;
        _cleanup_close_ int pfd_from = -EBADF, pfd_to = -EBADF;
        const char *base_from, *base_to;
        int root_from, root_to, r1, r2, q;

        if (flags & ~(unsigned) (RENAME_NOREPLACE | RENAME_EXCHANGE))
                return -EINVAL;
        q = route(from, GIT_OP_RENAME_FROM, &rel_from, &root_from);
        if (q < 0)
                return q;
        q = route(to, GIT_OP_RENAME_TO, &rel_to, &root_to);
        if (q < 0)
                return q;
        if (flags & RENAME_EXCHANGE) {
                /* Both names move: each side must allow both directions. */
                q = route(from, GIT_OP_RENAME_TO, &x1, &r1);
                if (q < 0)
                        return q;
                q = route(to, GIT_OP_RENAME_FROM, &x2, &r2);
                if (q < 0)
                        return q;
                if (git_policy_rename_noreplace(rel_from) || git_policy_rename_noreplace(rel_to))
                        return -EPERM;
        } else if (git_policy_rename_noreplace(rel_to))
                flags |= RENAME_NOREPLACE;
        if (root_from != root_to)
                return -EXDEV;
        if (router()->workspace && root_from == router()->host_fd) {
                q = move_allowed(root_from, rel_from, rel_to);
                if (q >= 0 && (flags & RENAME_EXCHANGE))
                        q = move_allowed(root_to, rel_to, rel_from);
                if (q < 0 && q != -ENOENT)
                        return q;
        }
        /* An object file comes into the host's store only with the
         * content its name says (issue 40): checked here, where no other
         * request runs (one thread), so nothing changes it between the
         * check and the rename; later writes to it are refused (rt_write). */
        const char *git_to = root_to == router()->host_fd ? git_rel_of(router(), rel_to) : NULL;
        GitObjectFile kind = git_to ? git_policy_object_file(git_to) : GIT_OBJECT_FILE_NONE;
        if (kind == GIT_OBJECT_FILE_NONE && git_to && strncmp(git_to, "objects/", 8) == 0 &&
            strncmp(git_to, "objects/incoming-", 17) != 0) {
                /* A directory moved into the store would bring unchecked
                 * objects with it (git itself moves files one by one). */
                _cleanup_close_ int src = openat2_beneath(root_from, rel_from, O_PATH | O_NOFOLLOW, 0);
                struct stat st;
                if (src >= 0 && fstat(src, &st) == 0 && S_ISDIR(st.st_mode)) {
                        router_refused(router(), rel_to, GIT_OP_RENAME_TO, EACCES);
                        return -EACCES;
                }
        }
        if (kind != GIT_OBJECT_FILE_NONE) {
                q = (flags & RENAME_EXCHANGE) ? -EPERM
                                              : admit_object(router(), root_from, rel_from, rel_to, git_to, kind);
                if (q < 0) {
                        if (q == -EACCES || q == -EPERM)
                                router_refused(router(), rel_to, GIT_OP_RENAME_TO, -q);
                        return q;
                }
        }
        pfd_from = open_parent(root_from, rel_from, &base_from);
        if (pfd_from < 0)
                return pfd_from;
        pfd_to = open_parent(root_to, rel_to, &base_to);
        if (pfd_to < 0)
                return pfd_to;
        return renameat2(pfd_from, base_from, pfd_to, base_to, flags) < 0 ? negative_errno() : 0;
}

static int rt_symlink(const char *target, const char *linkpath) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int pfd = -EBADF;
        const char *base;
        int root, q;

        q = route(linkpath, GIT_OP_LINK, &rel, &root);
        if (q < 0)
                return q;
        pfd = open_parent(root, rel, &base);
        if (pfd < 0)
                return pfd;
        return symlinkat(target, pfd, base) < 0 ? negative_errno() : 0;
}

static int rt_link(const char *from, const char *to) {
        _cleanup_free_ char *rel_from = NULL, *rel_to = NULL;
        _cleanup_close_ int pfd_from = -EBADF, pfd_to = -EBADF;
        const char *base_from, *base_to;
        int root_from, root_to, q;

        /* git stores every object by link(2) first and falls back to
         * rename(2) when the file system refuses (finalize_object_file):
         * refused quietly, that fallback is no refusal of the person's
         * policy, and a commit inside leaves no record of one (issue 42). */
        {
                _cleanup_free_ char *f = NULL, *t = NULL;
                if (git_policy_normalize(from, &f) >= 0 && git_policy_normalize(to, &t) >= 0) {
                        const char *gf = git_rel_of(router(), f), *gt = git_rel_of(router(), t);
                        if (gf && gt && strncmp(gf, "objects/", 8) == 0 && strncmp(gt, "objects/", 8) == 0)
                                return -EPERM;
                }
        }
        /* A hard link is a second name for the same inode: both names must be
         * creatable, which the policy allows only inside the isolated root. */
        q = route(from, GIT_OP_LINK, &rel_from, &root_from);
        if (q < 0)
                return q;
        q = route(to, GIT_OP_LINK, &rel_to, &root_to);
        if (q < 0)
                return q;
        if (root_from != root_to)
                return -EXDEV;
        pfd_from = open_parent(root_from, rel_from, &base_from);
        if (pfd_from < 0)
                return pfd_from;
        pfd_to = open_parent(root_to, rel_to, &base_to);
        if (pfd_to < 0)
                return pfd_to;
        return linkat(pfd_from, base_from, pfd_to, base_to, 0) < 0 ? negative_errno() : 0;
}

static int rt_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        char proc[64];
        int root, q;

        q = route(path, GIT_OP_SETATTR, &rel, &root);
        if (q < 0)
                return q;
        if (fi && fi->fh)
                return fchmod((int) fi->fh, mode & 07777) < 0 ? negative_errno() : 0;
        fd = openat2_beneath(root, rel, O_PATH | O_NOFOLLOW, 0);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISLNK(st.st_mode))
                return -EOPNOTSUPP;
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        return chmod(proc, mode & 07777) < 0 ? negative_errno() : 0;
}

/* Ownership never changes through the router. A chown to the owner it
 * already has is allowed as the no-op it is: gVisor's gofer sets the owner
 * of every file it creates, and refusing that would refuse the creation. */
static int rt_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int pfd = -EBADF;
        const char *base;
        struct stat st;
        int root, q;

        q = route(path, GIT_OP_SETATTR, &rel, &root);
        if (q < 0)
                return q;
        if (fi && fi->fh) {
                if (fstat((int) fi->fh, &st) < 0)
                        return negative_errno();
        } else if (!*rel) {
                if (fstat(root, &st) < 0)
                        return negative_errno();
        } else {
                pfd = open_parent(root, rel, &base);
                if (pfd < 0)
                        return pfd;
                if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return negative_errno();
        }
        if ((uid == (uid_t) -1 || uid == st.st_uid) && (gid == (gid_t) -1 || gid == st.st_gid))
                return 0;
        return -EPERM;
}

static int rt_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int fd = -EBADF;
        int root, q;

        q = route(path, GIT_OP_WRITE, &rel, &root);
        if (q < 0)
                return q;
        if (fi && fi->fh)
                return ftruncate((int) fi->fh, size) < 0 ? negative_errno() : 0;
        fd = openat2_beneath(root, rel, O_WRONLY | O_NOFOLLOW, 0);
        if (fd < 0)
                return fd;
        return ftruncate(fd, size) < 0 ? negative_errno() : 0;
}

static int rt_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int pfd = -EBADF;
        const char *base;
        int root, q;

        q = route(path, GIT_OP_SETATTR, &rel, &root);
        if (q < 0)
                return q;
        if (fi && fi->fh)
                return futimens((int) fi->fh, tv) < 0 ? negative_errno() : 0;
        pfd = open_parent(root, rel, &base);
        if (pfd < 0)
                return pfd;
        return utimensat(pfd, base, tv, AT_SYMLINK_NOFOLLOW) < 0 ? negative_errno() : 0;
}

static void set_file_info(struct fuse_file_info *fi, const char *rel, int fd) {
        fi->fh = (uint64_t) fd;
        /* No direct_io: git mmaps the index and packs, and direct_io files
         * cannot be mapped (git then dies, under gVisor with SIGSEGV).
         * keep_cache = 0 drops the page cache at every open, and lookups
         * are never cached, so each open still reads the host's current
         * file, also after the host replaced it by rename. */
        (void) rel;
        fi->keep_cache = 0;
        fi->direct_io = 0;
}

static int open_existing(const char *path, struct fuse_file_info *fi) {
        _cleanup_free_ char *rel = NULL;
        int root, q;
        int acc = fi->flags & O_ACCMODE;
        GitOp op = (acc != O_RDONLY || (fi->flags & O_TRUNC)) ? GIT_OP_WRITE : GIT_OP_READ;

        /* When git stores an object that is already there, gVisor opens
         * the existing file for writing (git itself only freshens its
         * time): refused quietly, since an object file never changes and
         * that is no refusal of the agent's (issue 42). A truncation is
         * still recorded. */
        if (acc != O_RDONLY && !(fi->flags & O_TRUNC)) {
                _cleanup_free_ char *n = NULL;
                const char *g = git_policy_normalize(path, &n) >= 0 ? git_rel_of(router(), n) : NULL;
                if (g && git_policy_object_file(g) != GIT_OBJECT_FILE_NONE)
                        return -git_policy_refusal(GIT_OP_WRITE);
        }
        q = route(path, op, &rel, &root);
        if (q < 0)
                return q;
        if (q == ROUTE_MASKED) {
                /* Nothing of a masked secret is opened: reads see EOF. */
                fi->fh = 0;
                fi->keep_cache = 0;
                fi->direct_io = 0;
                return 0;
        }
        int flags = fi->flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_DIRECTORY | O_PATH | O_TMPFILE);
        int fd = openat2_beneath(root, rel, flags | O_NOFOLLOW, 0);
        if (fd < 0)
                return fd;
        /* A file the sandbox may not write (config above all) is read from
         * the host path at every read, not through the fd opened now: a
         * client may keep one open handle for a long time (gVisor's gofer
         * does), and the host replaces such files by rename. */
        if (op == GIT_OP_READ && root == router()->host_fd && !writable(rel)) {
                safe_close(fd);
                fi->fh = 0;
                fi->keep_cache = 0;
                fi->direct_io = 0;
                return 0;
        }
        set_file_info(fi, rel, fd);
        return 0;
}

static int rt_open(const char *path, struct fuse_file_info *fi) {
        return open_existing(path, fi);
}

static int rt_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
        _cleanup_free_ char *rel = NULL;
        int root, q, fd;

        q = route(path, GIT_OP_CREATE, &rel, &root);
        if (q >= 0) {
                int flags = fi->flags & ~(O_NOCTTY | O_DIRECTORY | O_PATH | O_TMPFILE);
                fd = openat2_beneath(root, rel, flags | O_CREAT | O_EXCL | O_NOFOLLOW, mode & 07777);
                if (fd >= 0) {
                        set_file_info(fi, rel, fd);
                        return 0;
                }
                if (fd != -EEXIST || (fi->flags & O_EXCL))
                        return fd;
        } else if (q != -EACCES || (fi->flags & O_EXCL))
                return q;
        else {
                /* Creation refused: EACCES unless the name exists. */
                struct stat st;
                if (rt_getattr(path, &st, NULL) < 0)
                        return q;
        }
        /* The name exists on the host although the kernel's lookup did not
         * see it (a race): without O_EXCL this is an open of an existing
         * file, checked as such. */
        fd = open_existing(path, fi);
        if (fd == -ENOENT)
                return q < 0 ? q : -EEXIST;
        return fd;
}

static int rt_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
        if (fi->fh) {
                ssize_t n = pread((int) fi->fh, buf, size, off);
                return n < 0 ? negative_errno() : (int) n;
        }
        /* A protected file (see open_existing): the host's current one. */
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int fd = -EBADF;
        int root, q = route(path, GIT_OP_READ, &rel, &root);
        if (q < 0)
                return q;
        if (q == ROUTE_MASKED)
                return 0;
        fd = openat2_beneath(root, rel, O_RDONLY | O_NOFOLLOW, 0);
        if (fd < 0)
                return fd;
        ssize_t n = pread(fd, buf, size, off);
        return n < 0 ? negative_errno() : (int) n;
}

/* A file opened for writing under a scratch name may have been renamed
 * since: one that is now an object file of the store (admitted by
 * rt_rename) never changes through a descriptor opened before. Renames
 * into other read-only names are refused by the policy itself; a path of
 * NULL is a file no longer in the tree. */
static int still_writable(const char *path) {
        Router *r = router();
        _cleanup_free_ char *rel = NULL;
        int e = 0;

        if (!path)
                return 0;
        int q = git_policy_normalize(path, &rel);
        if (q < 0)
                return q;
        const char *g = git_rel_of(r, rel);
        if (!g || git_policy_object_file(g) == GIT_OBJECT_FILE_NONE)
                return 0;
        e = git_policy_refusal(GIT_OP_WRITE);
        router_refused(r, rel, GIT_OP_WRITE, e);
        return -e;
}

static int rt_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
        int q = still_writable(path);
        if (q < 0)
                return q;
        /* On an O_APPEND fd Linux pwrite appends, whatever the kernel's idea
         * of the file size was. */
        ssize_t n = pwrite((int) fi->fh, buf, size, off);
        return n < 0 ? negative_errno() : (int) n;
}

static int rt_statfs(const char *path, struct statvfs *st) {
        (void) path;
        return fstatvfs(router()->host_fd, st) < 0 ? negative_errno() : 0;
}

static int rt_release(const char *path, struct fuse_file_info *fi) {
        (void) path;
        if (fi->fh)
                safe_close((int) fi->fh);
        fi->fh = 0;
        return 0;
}

static int rt_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
        (void) path;
        if (!fi->fh)
                return 0; /* a protected file, opened for reading only */
        int r = datasync ? fdatasync((int) fi->fh) : fsync((int) fi->fh);
        return r < 0 ? negative_errno() : 0;
}

static void *rt_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
        Router *r = fuse_get_context()->private_data;
        (void) conn;
        /* No attribute, entry or negative caching but what rt_getattr
         * allows for each path (tree_timeout): the host changes files (git
         * config replaces config by rename) and the sandbox must see that
         * at once. */
        r->cfg = cfg;
        cfg->entry_timeout = 0;
        cfg->attr_timeout = 0;
        cfg->negative_timeout = 0;
        cfg->kernel_cache = 0;
        cfg->auto_cache = 0;
        /* Never rename an unlinked open file to .fuse_hidden*: that would be
         * a rename the policy did not ask for. */
        cfg->hard_remove = 1;
        cfg->use_ino = 0;
        return r;
}

static const struct fuse_operations ops = {
        .init = rt_init,
        .getattr = rt_getattr,
        .readlink = rt_readlink,
        .readdir = rt_readdir,
        .mkdir = rt_mkdir,
        .unlink = rt_unlink,
        .rmdir = rt_rmdir,
        .rename = rt_rename,
        .symlink = rt_symlink,
        .link = rt_link,
        .chmod = rt_chmod,
        .chown = rt_chown,
        .truncate = rt_truncate,
        .utimens = rt_utimens,
        .open = rt_open,
        .create = rt_create,
        .read = rt_read,
        .write = rt_write,
        .statfs = rt_statfs,
        /* No flush: every write reaches the host file when it is made
         * (no writeback cache), so a close has nothing to report. The
         * library answers ENOSYS and the kernel stops sending a FLUSH at
         * each close (gVisor closes each file two or three times). */
        .release = rt_release,
        .fsync = rt_fsync,
};

const struct fuse_operations *router_operations(void) {
        return &ops;
}
