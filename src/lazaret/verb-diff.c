/* SPDX-License-Identifier: MIT */
/* lazaret diff [PROFILE] [-- GIT-DIFF-ARGS...] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec-util.h"
#include "fd-util.h"
#include "log.h"
#include "path-util.h"
#include "profile-pick.h"
#include "strbuf.h"
#include "string-util.h"
#include "verbs.h"

int verb_diff(int argc, char **argv, const Globals *g) {
        const char *name = NULL;
        int extra = argc;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--")) {
                        extra = i + 1;
                        break;
                }
                if (streq(argv[i], "-h") || streq(argv[i], "--help")) {
                        printf("Usage: lazaret diff [PROFILE] [-- GIT-DIFF-ARGS...]\n\n"
                               "Show the agent's branch (lazaret/agent-PROFILE) against the host's HEAD.\n"
                               "Runs the host's git without pager, hooks, fsmonitor, external diff or\n"
                               "textconv drivers, none of which the sandbox may choose.\n");
                        return 0;
                }
                if (name) {
                        log_error("unexpected argument '%s': git diff options go after '--'", argv[i]);
                        return EXIT_USAGE;
                }
                name = argv[i];
        }

        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        if (profile_load(g, name, &cfg, &p) < 0)
                return EXIT_LAZARET;
        _cleanup_free_ char *gd = path_join(cfg->workspace, ".git");
        struct stat st;
        if (!gd || lstat(gd, &st) < 0 || !S_ISDIR(st.st_mode)) {
                log_error("%s is not the top of a git repository: there is no agent branch to show", cfg->workspace);
                return EXIT_LAZARET;
        }
        _cleanup_free_ char *git = NULL;
        const char *search = getenv("PATH");
        if (exec_find_program(search && *search ? search : "/usr/bin:/bin", "git", &git) < 0) {
                log_error("git is not installed: sudo apt-get install git");
                return EXIT_LAZARET;
        }
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "refs/heads/lazaret/agent-%s", p->name);
        _cleanup_free_ char *ref = strbuf_steal(&b);
        if (!ref)
                return EXIT_LAZARET;

        size_t n = 0;
        const char *args[64 + 16];
        const char *fixed[] = { "git",
                                "-C",
                                cfg->workspace,
                                "-c",
                                "core.hooksPath=/dev/null",
                                "-c",
                                "core.fsmonitor=false",
                                "--no-pager",
                                "diff",
                                "--no-ext-diff",
                                "--no-textconv" };
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                args[n++] = fixed[i];
        for (int i = extra; i < argc; i++) {
                if (n >= ELEMENTSOF(args) - 4) {
                        log_error("too many git diff arguments");
                        return EXIT_USAGE;
                }
                args[n++] = argv[i];
        }
        args[n++] = "HEAD";
        args[n++] = ref;
        args[n] = NULL;

        /* The branch must exist: a clear word rather than git's. */
        _cleanup_(exec_result_done) ExecResult have = {};
        const char *verify[] = { "git", "-C", cfg->workspace, "rev-parse", "--verify", "--quiet", ref, NULL };
        if (exec_capture(git, verify, UINT64_C(30) * 1000000, &have) < 0 || exec_result_failed(&have)) {
                log_error("the agent has no branch lazaret/agent-%s yet: run 'lazaret run %s' first", p->name, p->name);
                return EXIT_LAZARET;
        }
        fflush(stdout);
        execv(git, (char *const *) args);
        log_error("cannot run %s: %s", git, strerror(errno));
        return EXIT_LAZARET;
}
