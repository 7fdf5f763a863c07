/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "autoapprove.h"
#include "exec-util.h"
#include "fd-util.h"
#include "macro.h"
#include "string-util.h"
#include "words.h"

static const char *const never_git[] = { "git", NULL };
static const char *const never_shell[] = { "sh",   "bash", "dash",    "ash",   "zsh",  "ksh",    "mksh", "csh",
                                           "tcsh", "fish", "busybox", "rbash", "yash", "elvish", "nu",   NULL };
/* Interpreters, also with a version suffix (python3.11, perl5.36.0, lua5.4). */
static const char *const never_interpreter[] = { "python",  "pypy",   "perl",   "ruby",   "irb",    "php",   "lua",
                                                 "luajit",  "node",   "nodejs", "deno",   "bun",    "tclsh", "wish",
                                                 "Rscript", "R",      "java",   "jshell", "pwsh",   "awk",   "gawk",
                                                 "mawk",    "nawk",   "sed",    "guile",  "racket", "ghci",  "julia",
                                                 "octave",  "expect", NULL };
static const char *const never_runner[] = { "env",
                                            "sudo",
                                            "doas",
                                            "su",
                                            "pkexec",
                                            "runuser",
                                            "setpriv",
                                            "xargs",
                                            "find",
                                            "timeout",
                                            "nice",
                                            "ionice",
                                            "nohup",
                                            "setsid",
                                            "stdbuf",
                                            "chroot",
                                            "unshare",
                                            "nsenter",
                                            "flock",
                                            "watch",
                                            "strace",
                                            "ltrace",
                                            "gdb",
                                            "valgrind",
                                            "time",
                                            "parallel",
                                            "script",
                                            "systemd-run",
                                            "at",
                                            "batch",
                                            "crontab",
                                            "chrt",
                                            "taskset",
                                            "numactl",
                                            "prlimit",
                                            "fakeroot",
                                            "firejail",
                                            "bwrap",
                                            "podman",
                                            "docker",
                                            "buildah",
                                            "kubectl",
                                            "ssh",
                                            "scp",
                                            "sftp",
                                            "rsync",
                                            "tar",
                                            "zip",
                                            "make",
                                            "gmake",
                                            "cmake",
                                            "ninja",
                                            "meson",
                                            "npm",
                                            "npx",
                                            "yarn",
                                            "pnpm",
                                            "pip",
                                            "pip3",
                                            "pipx",
                                            "cargo",
                                            "rustup",
                                            "go",
                                            "gradle",
                                            "mvn",
                                            "ant",
                                            "pytest",
                                            "py.test",
                                            "tox",
                                            "nox",
                                            "vi",
                                            "vim",
                                            "nvim",
                                            "view",
                                            "emacs",
                                            "less",
                                            "more",
                                            "most",
                                            "man",
                                            "pager",
                                            "editor",
                                            "sensible-editor",
                                            "sensible-pager",
                                            "xdg-open",
                                            "lazaret",
                                            NULL };

static bool in_list(const char *name, const char *const *list, bool versioned) {
        for (const char *const *p = list; *p; p++) {
                const char *rest = startswith(name, *p);
                if (rest && (*rest == '\0' || (versioned && (strchr("0123456789.-", *rest)))))
                        return true;
        }
        return false;
}

static const char *name_refused(const char *name) {
        if (in_list(name, never_git, true))
                return "git runs hooks, aliases, pagers and configuration the sandbox can plant";
        if (in_list(name, never_shell, false))
                return "a shell runs any command it is given";
        if (in_list(name, never_interpreter, true))
                return "an interpreter runs any code it is given";
        if (in_list(name, never_runner, false))
                return "it runs other programs, or code from the workspace";
        return NULL;
}

static const char *base(const char *p) {
        const char *s = strrchr(p, '/');
        return s ? s + 1 : p;
}

const char *autoapprove_refused(const char *program) {
        const char *why = name_refused(base(program));
        if (why)
                return why;
        char real[PATH_MAX];
        if (realpath(program, real) && !streq(base(real), "busybox"))
                /* A link to a refused program (sh -> dash, python3 -> python3.11);
                 * busybox itself runs as the applet it is called by. */
                return name_refused(base(real));
        return NULL;
}

void autoapprove_rule_done(AutoApproveRule *r) {
        words_free(r->argv);
        *r = (AutoApproveRule){};
}

int autoapprove_rule_parse(const char *entry, const char *search, AutoApproveRule *ret, char **ret_why) {
        *ret_why = NULL;
        const char *m = words_metachar(entry, strlen(entry));
        if (m) {
                unsigned char c = (unsigned char) *m;
                if (c < 0x20 || c == 0x7f)
                        return asprintf(ret_why,
                                        "contains a control character (0x%02x); an entry is an argument "
                                        "vector, run without a shell",
                                        c) < 0
                                       ? -ENOMEM
                                       : -EINVAL;
                return asprintf(ret_why, "contains '%c'; an entry is an argument vector, run without a shell", c) < 0
                               ? -ENOMEM
                               : -EINVAL;
        }
        char **v = NULL;
        size_t n = 0;
        const char *bad = NULL;
        int r = words_split(entry, strlen(entry), &v, &n, &bad);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return asprintf(ret_why, "cannot be split into words: %s", bad) < 0 ? -ENOMEM : -EINVAL;
        bool prefix = n > 0 && streq(v[n - 1], AUTOAPPROVE_PREFIX_MARK);
        if (prefix) {
                free(v[--n]);
                v[n] = NULL;
        }
        for (size_t i = 0; i < n; i++)
                if (streq(v[i], AUTOAPPROVE_PREFIX_MARK)) {
                        words_free(v);
                        return asprintf(ret_why, "has '...' before its last word; only the last word may be '...' "
                                                 "(a prefix entry)") < 0
                                       ? -ENOMEM
                                       : -EINVAL;
                }
        if (n == 0) {
                words_free(v);
                return asprintf(ret_why, "has no program") < 0 ? -ENOMEM : -EINVAL;
        }
        char *prog = NULL;
        if (strchr(v[0], '/')) {
                struct stat st;
                if (v[0][0] != '/')
                        r = asprintf(ret_why,
                                     "names the program by the relative path '%s'; give a name looked up in "
                                     "%s, or an absolute path",
                                     v[0], search);
                else if (stat(v[0], &st) < 0 || !S_ISREG(st.st_mode) || access(v[0], X_OK) < 0)
                        r = asprintf(ret_why, "names '%s', which is no executable file", v[0]);
                else
                        r = (prog = strdup(v[0])) ? 0 : -1;
        } else {
                r = exec_find_program(search, v[0], &prog);
                if (r == -ENOENT)
                        r = asprintf(ret_why, "names '%s', which is not in %s", v[0], search);
        }
        if (!prog) {
                bool said = r >= 0 && *ret_why;
                words_free(v);
                return said ? -EINVAL : -ENOMEM;
        }
        const char *why = autoapprove_refused(prog);
        if (why) {
                r = asprintf(ret_why, "runs %s, which may never be auto-approved: %s", base(v[0]), why);
                free(prog);
                words_free(v);
                return r < 0 ? -ENOMEM : -EINVAL;
        }
        free(v[0]);
        v[0] = prog;
        *ret = (AutoApproveRule){ .argv = v, .argc = n, .prefix = prefix };
        return 0;
}

/* Does word name an existing file beneath dirfd, reached without leaving
 * it (no "..", absolute path or symlink out)? */
static bool beneath(int dirfd, const char *word) {
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        if (dirfd < 0 || !*word)
                return false;
        long fd = syscall(SYS_openat2, dirfd, word, &how, sizeof how);
        if (fd < 0)
                return false;
        close((int) fd);
        return true;
}

bool autoapprove_reads_files(const char *program) {
        static const char *const readers[] = {
                "cat",    "tac",     "head",      "tail",      "less", "more", "grep", "egrep", "fgrep", "rg", "wc",
                "od",     "xxd",     "hexdump",   "strings",   "diff", "cmp",  "sort", "uniq",  "cut",   "nl", "base64",
                "md5sum", "sha1sum", "sha256sum", "sha512sum", "file", "stat", "ls",   "cp",    "tee",   "dd", NULL
        };
        const char *b = base(program);
        for (const char *const *r = readers; *r; r++)
                if (streq(b, *r))
                        return true;
        return false;
}

bool autoapprove_match(const AutoApproveRule *rule, char *const *req, size_t req_n, const char *search,
                       int workspace_fd) {
        if (req_n == 0 || req_n < rule->argc || (!rule->prefix && req_n != rule->argc))
                return false;
        if (strchr(req[0], '/')) {
                if (req[0][0] != '/' || !streq(req[0], rule->argv[0]))
                        return false;
        } else {
                _cleanup_free_ char *prog = NULL;
                if (exec_find_program(search, req[0], &prog) < 0 || !streq(prog, rule->argv[0]))
                        return false;
        }
        for (size_t i = 1; i < rule->argc; i++)
                if (!streq(req[i], rule->argv[i]))
                        return false;
        /* What the words name must lie in the workspace. The entry's own
         * absolute words and options are the person's; a relative one is
         * resolved now, as the agent may have made it a symlink. */
        for (size_t i = 1; i < req_n; i++) {
                const char *w = req[i];
                bool configured = i < rule->argc;
                if (w[0] == '-' && w[1] != '\0') {
                        /* Only the person's own options: an added one may
                         * name a program to run (sort --compress-program,
                         * rg --pre) or carry a file in it (-m/etc/shadow,
                         * --output=x). */
                        if (!configured)
                                return false;
                        continue;
                }
                if (configured && w[0] == '/')
                        continue;
                /* The entry's own word ("9876" in "sleep 9876") is a file
                 * only when something of that name exists; then it must be
                 * reached beneath the workspace. */
                struct stat st;
                if (configured && workspace_fd >= 0 && fstatat(workspace_fd, w, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
                    (errno == ENOENT || errno == ENOTDIR))
                        continue;
                if (!beneath(workspace_fd, w))
                        return false;
        }
        return true;
}
