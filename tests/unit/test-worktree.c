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

#include "fd-util.h"
#include "fileio.h"
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
                        char repo_id[FD_IDENTITY_MAX], git_id[FD_IDENTITY_MAX];
                        if (open_pinned_dir(repo, NULL, NULL, repo_id) < 0 ||
                            open_pinned_dir(gitdir, NULL, NULL, git_id) < 0)
                                _exit(2);
                        LaunchSpec s = {
                                .workspace = (char *) repo,
                                .workspace_id = repo_id,
                                .git_dir = (char *) gitdir,
                                .git_dir_id = git_id,
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

static char root2[] = "/tmp/lazaret-test-worktree.XXXXXX";

static int prepare_one(const char *repo, const char *repo_id, const char *gitdir, const char *id, const char *domain,
                       const char *agent, char **ret_err) {
        LaunchSpec s = {
                .workspace = (char *) repo,
                .workspace_id = (char *) repo_id,
                .git_dir = (char *) gitdir,
                .git_dir_id = (char *) id,
                .domain_dir = (char *) domain,
                .runtime_dir = root2,
                .profile = (char *) "p",
                .agent = (char *) agent,
                .branch = true,
        };
        char *path = NULL;
        int r = sandbox_prepare_worktree(&s, &path, ret_err);
        free(path);
        return r;
}

/* The repository the leader checked replaced by a symbolic link to another
 * one (an agent that may rename entries of its parent): the host's git
 * would make the worktree from that other repository, whose files the
 * sandbox would then get. Refused, for a new worktree and for one made so
 * before; the repository's own worktree still starts once it is back. */
static void test_repository_replaced_by_link(void **state) {
        (void) state;
        assert_non_null(mkdtemp(root2));
        char repo[256], gitdir[300], other[256], domain[256], id[FD_IDENTITY_MAX];
        snprintf(repo, sizeof repo, "%s/mine", root2);
        snprintf(gitdir, sizeof gitdir, "%s/.git", repo);
        snprintf(other, sizeof other, "%s/other", root2);
        snprintf(domain, sizeof domain, "%s/domain", root2);
        sh("git init -q %s && git -C %s -c user.name=t -c user.email=t@t commit -q --allow-empty -m one", repo, repo);
        sh("git init -q %s && echo secret > %s/SECRET && git -C %s add SECRET && "
           "git -C %s -c user.name=t -c user.email=t@t commit -q -m other",
           other, other, other, other);
        assert_int_equal(mkdir(domain, 0700), 0);
        char repo_id[FD_IDENTITY_MAX];
        assert_int_equal(open_pinned_dir(gitdir, NULL, NULL, id), 0);
        assert_int_equal(open_pinned_dir(repo, NULL, NULL, repo_id), 0);

        char *err = NULL;
        assert_int_equal(prepare_one(repo, repo_id, gitdir, id, domain, "a", &err), 0);

        sh("mv %s %s.real && ln -s other %s", repo, repo, repo);
        /* With the repository pinned, git never runs in the other one. */
        int r = prepare_one(repo, repo_id, gitdir, id, domain, "c", &err);
        if (r != -ESTALE)
                fail_msg("a worktree made from the repository a link put in place: %d %s", r, err ? err : "");
        assert_non_null(strstr(err, "is no longer the directory lazaret checked"));
        free(err);
        err = NULL;
        char secret[320];
        snprintf(secret, sizeof secret, "%s/agent-c", domain);
        assert_int_equal(access(secret, F_OK), -1);
        /* Git by the repository's name (as if the link came while git ran):
         * the worktree it makes names the other .git, and is refused. */
        r = prepare_one(repo, NULL, gitdir, id, domain, "b", &err);
        if (r != -ESTALE)
                fail_msg("a worktree made from the repository a link put in place: %d %s", r, err ? err : "");
        assert_non_null(strstr(err, "is not one of the repository"));
        free(err);
        err = NULL;
        /* Its worktree holds the other repository's files... */
        snprintf(secret, sizeof secret, "%s/agent-b/SECRET", domain);
        assert_int_equal(access(secret, F_OK), 0);
        /* ...and is refused when reused with the repository back, too. */
        sh("rm %s && mv %s.real %s", repo, repo, repo);
        assert_int_equal(prepare_one(repo, repo_id, gitdir, id, domain, "b", &err), -ESTALE);
        free(err);
        err = NULL;
        assert_int_equal(prepare_one(repo, repo_id, gitdir, id, domain, "a", &err), 0);
        /* The worktree's .git file is the agent's: one naming a git
         * directory of its making is put back at the next start... */
        char dotgit[320], want[400], *got = NULL;
        size_t n = 0;
        snprintf(dotgit, sizeof dotgit, "%s/agent-a/.git", domain);
        snprintf(want, sizeof want, "gitdir: %s/worktrees/agent-a\n", gitdir);
        sh("echo 'gitdir: .evil' > %s", dotgit);
        assert_int_equal(prepare_one(repo, repo_id, gitdir, id, domain, "a", &err), 0);
        assert_int_equal(read_file_capped(dotgit, 4096, &got, &n), 0);
        assert_string_equal(got, want);
        free(got);
        /* ...so is a FIFO (whose open must not wait for a writer)... */
        sh("rm %s && mkfifo %s", dotgit, dotgit);
        assert_int_equal(prepare_one(repo, repo_id, gitdir, id, domain, "a", &err), 0);
        assert_int_equal(read_file_capped(dotgit, 4096, &got, &n), 0);
        assert_string_equal(got, want);
        free(got);
        /* ...and one made a directory, which cannot be, refuses it. */
        sh("rm %s && mkdir %s", dotgit, dotgit);
        assert_int_equal(prepare_one(repo, repo_id, gitdir, id, domain, "a", &err), -ESTALE);
        assert_non_null(strstr(err, "cannot be put back"));
        free(err);
        err = NULL;
        sh("rmdir %s && printf '%%s' '%s' > %s", dotgit, want, dotgit);
        assert_int_equal(prepare_one(repo, repo_id, gitdir, id, domain, "a", &err), 0);
        /* A .git replaced by another directory of the same name: not the
         * one the leader checked. */
        sh("mv %s %s/.git.real && git init -q %s", gitdir, repo, repo);
        assert_int_equal(prepare_one(repo, repo_id, gitdir, id, domain, "a", &err), -ESTALE);
        free(err);
}

/* The repository goes, whether the test passed or not. */
static int teardown(void **state) {
        (void) state;
        if (!strstr(root, "XXXXXX"))
                sh("rm -rf %s", root);
        if (!strstr(root2, "XXXXXX"))
                sh("rm -rf %s", root2);
        return 0;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_agents_starting_together, teardown),
                cmocka_unit_test_teardown(test_repository_replaced_by_link, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
