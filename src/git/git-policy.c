/* SPDX-License-Identifier: MIT */
/* The git router's policy; the table is in git-policy.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "git-policy.h"

#define GIT_PATH_MAX    4095
#define GIT_SEGMENT_MAX 255
#define GIT_SEGMENTS    ((GIT_PATH_MAX + 1) / 2)

typedef struct Seg {
        const char *s;
        size_t n;
} Seg;

static bool seg_is(const Seg *g, const char *lit) {
        size_t n = strlen(lit);
        return g->n == n && memcmp(g->s, lit, n) == 0;
}

static bool seg_startswith(const Seg *g, const char *lit) {
        size_t n = strlen(lit);
        return g->n >= n && memcmp(g->s, lit, n) == 0;
}

static bool seg_endswith(const Seg *g, const char *lit) {
        size_t n = strlen(lit);
        return g->n >= n && memcmp(g->s + g->n - n, lit, n) == 0;
}

static bool seg_valid(const char *s, size_t n) {
        if (n == 0 || n > GIT_SEGMENT_MAX)
                return false;
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                return false;
        return true;
}

/* Split a normalized path into segments. Returns the count, or -1 when the
 * path is not normalized. "" has no segments. */
static int split(const char *path, Seg *segs) {
        size_t len = strnlen(path, GIT_PATH_MAX + 1);
        if (len > GIT_PATH_MAX)
                return -1;
        if (len == 0)
                return 0;
        int n = 0;
        const char *p = path;
        for (;;) {
                const char *slash = memchr(p, '/', (size_t) (path + len - p));
                size_t l = slash ? (size_t) (slash - p) : (size_t) (path + len - p);
                if (!seg_valid(p, l) || n >= GIT_SEGMENTS)
                        return -1;
                segs[n++] = (Seg){ p, l };
                if (!slash)
                        return n;
                p = slash + 1;
        }
}

static bool is_isolated(const Seg *g, int n) {
        if (n >= 1 && seg_is(&g[0], "hooks"))
                return true;
        /* modules/<name, possibly with slashes>/hooks: a submodule's git dir,
         * also nested (modules/a/modules/b/hooks). Any later `hooks` segment
         * counts; isolating a little too much is harmless. */
        if (n >= 1 && seg_is(&g[0], "modules"))
                for (int j = 2; j < n; j++)
                        if (seg_is(&g[j], "hooks"))
                                return true;
        if (n >= 3 && seg_is(&g[0], "worktrees"))
                return is_isolated(g + 2, n - 2);
        return false;
}

static bool op_is_file_op(GitOp op) {
        return op == GIT_OP_CREATE || op == GIT_OP_WRITE || op == GIT_OP_UNLINK || op == GIT_OP_RENAME_FROM ||
               op == GIT_OP_RENAME_TO || op == GIT_OP_SETATTR;
}

static bool op_is_dir_op(GitOp op) {
        return op == GIT_OP_MKDIR || op == GIT_OP_RMDIR;
}

static bool seg_is_hex(const Seg *g, size_t n) {
        if (g->n != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((g->s[i] >= '0' && g->s[i] <= '9') || (g->s[i] >= 'a' && g->s[i] <= 'f')))
                        return false;
        return true;
}

static GitObjectFile object_file(const Seg *g, int n) {
        if (n != 3 || !seg_is(&g[0], "objects"))
                return GIT_OBJECT_FILE_NONE;
        if (seg_is_hex(&g[1], 2) && (seg_is_hex(&g[2], 38) || seg_is_hex(&g[2], 62)))
                return GIT_OBJECT_FILE_LOOSE;
        if (!seg_is(&g[1], "pack"))
                return GIT_OBJECT_FILE_NONE;
        /* Git takes any name ending in .idx for a pack's index (and the
         * same stem's .pack for its pack), not only pack-<hash>: a tmp_
         * name too. */
        if (seg_endswith(&g[2], ".lock"))
                return GIT_OBJECT_FILE_NONE;
        if (seg_endswith(&g[2], ".pack"))
                return GIT_OBJECT_FILE_PACK;
        if (seg_endswith(&g[2], ".idx"))
                return GIT_OBJECT_FILE_INDEX;
        if (seg_endswith(&g[2], ".rev") || seg_endswith(&g[2], ".bitmap") || seg_endswith(&g[2], ".mtimes") ||
            seg_startswith(&g[2], "multi-pack-index"))
                return GIT_OBJECT_FILE_AUX;
        return GIT_OBJECT_FILE_NONE;
}

/* objects/..., but not objects/info/...: new objects may appear, existing ones
 * never change. An object file git reads comes only by a rename, which the
 * router admits after checking the content (git-object.h); one that would
 * change how git reads the packs (.rev, .bitmap, .mtimes, a multi-pack
 * index) never comes from the sandbox. */
static bool objects_writable(const Seg *g, int n, GitOp op) {
        if (n < 2 || !seg_is(&g[0], "objects") || seg_is(&g[1], "info"))
                return false;
        switch (op) {
        case GIT_OP_CREATE:
                return object_file(g, n) == GIT_OBJECT_FILE_NONE;
        case GIT_OP_RENAME_TO:
                return object_file(g, n) != GIT_OBJECT_FILE_AUX;
        case GIT_OP_MKDIR:
        case GIT_OP_RMDIR:
        case GIT_OP_SETATTR:
                return true;
        case GIT_OP_WRITE:
                if (object_file(g, n) != GIT_OBJECT_FILE_NONE)
                        return false;
                if (seg_startswith(&g[1], "incoming-"))
                        return true;
                return seg_startswith(&g[n - 1], "tmp_") || seg_endswith(&g[n - 1], ".lock");
        case GIT_OP_UNLINK:
        case GIT_OP_RENAME_FROM:
                if (seg_startswith(&g[1], "incoming-"))
                        return true;
                return seg_startswith(&g[n - 1], "tmp_") || seg_endswith(&g[n - 1], ".lock");
        case GIT_OP_READ:
        case GIT_OP_LINK:
        case _GIT_OP_MAX:
        case _GIT_OP_INVALID:
                return false;
        }
        return false;
}

/* refs/heads/lazaret/... and logs/refs/heads/lazaret/... */
static bool lazaret_refs_writable(const Seg *g, int n, GitOp op) {
        int base = 0;
        if (n >= 1 && seg_is(&g[0], "logs")) {
                base = 1;
                /* logs, logs/refs, logs/refs/heads may need creating. */
                if (n == 1 && op == GIT_OP_MKDIR)
                        return true;
                if (n == 2 && op == GIT_OP_MKDIR && seg_is(&g[1], "refs"))
                        return true;
                if (n == 3 && op == GIT_OP_MKDIR && seg_is(&g[1], "refs") && seg_is(&g[2], "heads"))
                        return true;
        }
        if (n < base + 3 || !seg_is(&g[base], "refs") || !seg_is(&g[base + 1], "heads") ||
            !seg_is(&g[base + 2], "lazaret"))
                return false;
        if (n == base + 3)
                return op_is_dir_op(op);
        return op != GIT_OP_READ && op != GIT_OP_LINK;
}

/* The worktree-private files git writes for add, commit, reset, merge. g
 * starts at the worktree's git dir (worktrees/<name>/, or the top level in
 * direct mode). */
static bool private_writable(const Seg *g, int n, GitOp op, bool head) {
        static const char *const files[] = {
                "index",      "index.lock",      "COMMIT_EDITMSG", "COMMIT_EDITMSG.lock", "ORIG_HEAD", "ORIG_HEAD.lock",
                "AUTO_MERGE", "AUTO_MERGE.lock", "MERGE_HEAD",     "MERGE_HEAD.lock",     "MERGE_MSG", "MERGE_MODE",
        };
        if (n == 1) {
                if (op_is_file_op(op)) {
                        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
                                if (seg_is(&g[0], files[i]))
                                        return true;
                        if (head && (seg_is(&g[0], "HEAD") || seg_is(&g[0], "HEAD.lock")))
                                return true;
                        return false;
                }
                if (op == GIT_OP_MKDIR && seg_is(&g[0], "logs"))
                        return true;
                if (op_is_dir_op(op) && seg_is(&g[0], "sequencer"))
                        return true;
                return false;
        }
        if (n == 2 && seg_is(&g[0], "logs") && op_is_file_op(op))
                return seg_is(&g[1], "HEAD") || seg_is(&g[1], "HEAD.lock");
        if (n >= 2 && seg_is(&g[0], "sequencer"))
                return op != GIT_OP_READ && op != GIT_OP_LINK;
        return false;
}

static bool worktree_name_valid(const char *name) {
        if (!name)
                return false;
        size_t l = strnlen(name, GIT_SEGMENT_MAX + 1);
        return seg_valid(name, l) && !memchr(name, '/', l);
}

static bool writable(const GitPolicy *p, const Seg *g, int n, GitOp op) {
        if (objects_writable(g, n, op) || lazaret_refs_writable(g, n, op))
                return true;
        if (p->worktree) {
                if (!worktree_name_valid(p->worktree))
                        return false;
                Seg w = { p->worktree, strlen(p->worktree) };
                if (n >= 3 && seg_is(&g[0], "worktrees") && g[1].n == w.n && memcmp(g[1].s, w.s, w.n) == 0)
                        return private_writable(g + 2, n - 2, op, true);
                return false;
        }
        return private_writable(g, n, op, p->allow_main_head);
}

int git_policy_refusal(GitOp op) {
        switch (op) {
        case GIT_OP_WRITE:
        case GIT_OP_SETATTR:
        case GIT_OP_UNLINK:
        case GIT_OP_RMDIR:
        case GIT_OP_RENAME_FROM:
                return EROFS;
        case GIT_OP_CREATE:
        case GIT_OP_MKDIR:
        case GIT_OP_RENAME_TO:
                return EACCES;
        case GIT_OP_LINK:
                return EPERM;
        case GIT_OP_READ:
        case _GIT_OP_MAX:
        case _GIT_OP_INVALID:
                return EINVAL;
        }
        return EINVAL;
}

GitDecision git_policy_check(const GitPolicy *p, const char *relpath, GitOp op, int *ret_errno) {
        Seg g[GIT_SEGMENTS];
        int e = EINVAL;

        if (!p || !relpath || op < 0 || op >= _GIT_OP_MAX)
                goto deny;
        int n = split(relpath, g);
        if (n < 0)
                goto deny;
        if (is_isolated(g, n))
                return GIT_DECISION_ISOLATED;
        if (op == GIT_OP_READ)
                return GIT_DECISION_ALLOW;
        if (n > 0 && op != GIT_OP_LINK && writable(p, g, n, op))
                return GIT_DECISION_ALLOW;
        e = git_policy_refusal(op);
deny:
        if (ret_errno)
                *ret_errno = e;
        return GIT_DECISION_DENY;
}

GitObjectFile git_policy_object_file(const char *relpath) {
        Seg g[GIT_SEGMENTS];
        int n = relpath ? split(relpath, g) : -1;
        return n < 0 ? GIT_OBJECT_FILE_NONE : object_file(g, n);
}

bool git_policy_rename_noreplace(const char *relpath) {
        return relpath && strncmp(relpath, "objects/", 8) == 0;
}

int git_policy_normalize(const char *in, char **ret) {
        if (!in || !ret)
                return -EINVAL;
        if (in[0] == '/')
                in++;
        size_t len = strnlen(in, GIT_PATH_MAX + 1);
        if (len > GIT_PATH_MAX)
                return -ENAMETOOLONG;
        if (len > 0) {
                const char *p = in;
                for (;;) {
                        const char *slash = memchr(p, '/', (size_t) (in + len - p));
                        size_t l = slash ? (size_t) (slash - p) : (size_t) (in + len - p);
                        if (l > GIT_SEGMENT_MAX)
                                return -ENAMETOOLONG;
                        if (!seg_valid(p, l))
                                return -EINVAL;
                        if (!slash)
                                break;
                        p = slash + 1;
                }
        }
        char *s = strndup(in, len);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

const char *git_op_to_string(GitOp op) {
        static const char *const table[_GIT_OP_MAX] = {
                [GIT_OP_READ] = "read",
                [GIT_OP_WRITE] = "write",
                [GIT_OP_CREATE] = "create",
                [GIT_OP_MKDIR] = "mkdir",
                [GIT_OP_UNLINK] = "unlink",
                [GIT_OP_RMDIR] = "rmdir",
                [GIT_OP_RENAME_FROM] = "rename-from",
                [GIT_OP_RENAME_TO] = "rename-to",
                [GIT_OP_SETATTR] = "setattr",
                [GIT_OP_LINK] = "link",
        };
        if (op < 0 || op >= _GIT_OP_MAX)
                return NULL;
        return table[op];
}

const char *git_decision_to_string(GitDecision d) {
        static const char *const table[_GIT_DECISION_MAX] = {
                [GIT_DECISION_ALLOW] = "allow",
                [GIT_DECISION_ISOLATED] = "isolated",
                [GIT_DECISION_DENY] = "deny",
        };
        if (d < 0 || d >= _GIT_DECISION_MAX)
                return NULL;
        return table[d];
}
