/* SPDX-License-Identifier: MIT */
/* Unit tests of the agent's worktree (workspace_mode = "branch") made on
 * the host by real git: several agents of one repository starting at once
 * (lazaret up) each get theirs. Each start prunes the registrations of
 * deleted worktrees, and git's prune takes a worktree another `git worktree
 * add` has just registered but not yet locked for its initialization for a
 * stale one: that add then dies ("could not open .git/worktrees/X/locked").
 * A CI run of test_up lost an agent that way. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "launch.h"
#include "macro.h"
#include "sandbox.h"

enum { AGENTS = 6, ROUNDS = 25 };

static char root[] = "/tmp/lazaret-test-worktree.XXXXXX";

_printf_(1, 2) static void sh(const char *fmt, ...) {
        char cmd[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cmd, sizeof cmd, fmt, ap);
        va_end(ap);
        assert_int_equal(system(cmd), 0);
}

/* One child per agent, all started together: 0 when each made its
 * worktree, or the first child's error. */
static void prepare_all(const char *repo, const char *gitdir, const char *domain, int round) {
        pid_t pids[AGENTS];
        int go[2];
        assert_int_equal(pipe(go), 0);
        for (int i = 0; i < AGENTS; i++) {
                pids[i] = fork();
                assert_true(pids[i] >= 0);
                if (pids[i] == 0) {
                        close(go[1]);
                        char c;
                        (void) !read(go[0], &c, 1); /* EOF: all forked */
                        char agent[16];
                        snprintf(agent, sizeof agent, "a%d", i);
                        LaunchSpec s = {
                                .workspace = (char *) repo,
                                .git_dir = (char *) gitdir,
                                .domain_dir = (char *) domain,
                                .runtime_dir = root, /* where the lock is */
                                .profile = (char *) "p",
                                .agent = agent,
                                .branch = true,
                        };
                        char *path = NULL, *err = NULL;
                        int r = sandbox_prepare_worktree(&s, &path, &err);
                        if (r < 0) {
                                fprintf(stderr, "round %d agent %s: %s\n", round, agent, err ? err : strerror(-r));
                                _exit(1);
                        }
                        _exit(0);
                }
        }
        close(go[0]);
        close(go[1]);
        int failed = 0;
        for (int i = 0; i < AGENTS; i++) {
                int st;
                assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
                failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
        assert_int_equal(failed, 0);
}

static void test_agents_starting_together(void **state) {
        (void) state;
        assert_non_null(mkdtemp(root));
        char repo[256], gitdir[300], domain[256];
        snprintf(repo, sizeof repo, "%s/repo", root);
        snprintf(gitdir, sizeof gitdir, "%s/.git", repo);
        snprintf(domain, sizeof domain, "%s/domain", root);
        sh("git init -q %s && git -C %s -c user.name=t -c user.email=t@t commit -q --allow-empty -m one", repo, repo);
        assert_int_equal(mkdir(domain, 0700), 0);
        for (int round = 0; round < ROUNDS; round++) {
                prepare_all(repo, gitdir, domain, round);
                for (int i = 0; i < AGENTS; i++) {
                        char dotgit[320];
                        snprintf(dotgit, sizeof dotgit, "%s/agent-a%d/.git", domain, i);
                        struct stat st;
                        assert_int_equal(lstat(dotgit, &st), 0);
                }
                /* The worktrees deleted, as a reset does: the next round's
                 * starts prune their registrations while adding new ones. */
                sh("rm -rf %s/agent-*", domain);
        }
}

/* The repository goes, whether the test passed or not. */
static int teardown(void **state) {
        (void) state;
        if (!strstr(root, "XXXXXX"))
                sh("rm -rf %s", root);
        return 0;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_agents_starting_together, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
