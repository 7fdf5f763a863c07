/* SPDX-License-Identifier: MIT */
/* Unit tests of src/git/git-policy: the git router's decision table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "git-policy.h"

#define A  GIT_DECISION_ALLOW
#define I  GIT_DECISION_ISOLATED
#define D  GIT_DECISION_DENY
#define RO EROFS
#define AC EACCES

static const GitPolicy branch = { .worktree = "agent", .allow_main_head = false };
static const GitPolicy direct = { .worktree = NULL, .allow_main_head = false };
static const GitPolicy direct_head = { .worktree = NULL, .allow_main_head = true };

static void expect(const GitPolicy *p, const char *path, GitOp op, GitDecision want, int want_errno) {
        int e = -1;
        GitDecision d = git_policy_check(p, path, op, &e);
        if (d != want || (want == D && e != want_errno)) {
                print_error("%s %s: got %s/%d, want %s/%d\n", path, git_op_to_string(op), git_decision_to_string(d), e,
                            git_decision_to_string(want), want_errno);
                fail();
        }
        if (want != D)
                assert_int_equal(e, -1);
}

/* The errno rule: changes to an existing name EROFS, new names EACCES,
 * links EPERM. */
static int deny_errno(GitOp op) {
        switch (op) {
        case GIT_OP_CREATE:
        case GIT_OP_MKDIR:
        case GIT_OP_RENAME_TO:
                return EACCES;
        case GIT_OP_LINK:
                return EPERM;
        default:
                return EROFS;
        }
}

static void expect_readonly(const GitPolicy *p, const char *path) {
        expect(p, path, GIT_OP_READ, A, 0);
        for (GitOp op = GIT_OP_WRITE; op < _GIT_OP_MAX; op++)
                expect(p, path, op, D, deny_errno(op));
}

static void expect_file_writable(const GitPolicy *p, const char *path) {
        static const GitOp ops[] = { GIT_OP_READ,        GIT_OP_WRITE,     GIT_OP_CREATE, GIT_OP_UNLINK,
                                     GIT_OP_RENAME_FROM, GIT_OP_RENAME_TO, GIT_OP_SETATTR };
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
                expect(p, path, ops[i], A, 0);
        expect(p, path, GIT_OP_LINK, D, EPERM);
}

static void test_reads(void **state) {
        (void) state;
        const char *paths[] = { "",
                                "config",
                                "config.worktree",
                                "objects/info/alternates",
                                "refs/heads/main",
                                "packed-refs",
                                "worktrees/other/index",
                                "modules/a/config",
                                "info/exclude" };
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
                expect(&branch, paths[i], GIT_OP_READ, A, 0);
                expect(&direct, paths[i], GIT_OP_READ, A, 0);
        }
}

static void test_config_readonly(void **state) {
        (void) state;
        const char *paths[] = {
                "config",
                "config.lock",
                "config.worktree",
                "config.worktree.lock",
                "commondir",
                "modules/a/config",
                "modules/a/b/config",
                "modules/a/modules/b/config",
                "worktrees/agent/config.worktree",
                "worktrees/agent/commondir",
                "worktrees/agent/gitdir",
                "worktrees/agent/locked",
                "worktrees/other/config.worktree",
                "packed-refs",
                "packed-refs.lock",
                "shallow",
                "FETCH_HEAD",
                "description",
                "info/exclude",
                "info/attributes",
                "branches/x",
                "modules",
                "worktrees",
                "worktrees/agent",
                "objects",
                "refs",
                "refs/heads",
                "logs/refs/tags",
        };
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
                expect_readonly(&branch, paths[i]);
                expect_readonly(&direct_head, paths[i]);
        }
        /* The root itself. */
        expect_readonly(&branch, "");
}

static void test_refs(void **state) {
        (void) state;
        expect_file_writable(&branch, "refs/heads/lazaret/agent-x");
        expect_file_writable(&branch, "refs/heads/lazaret/agent-x.lock");
        expect_file_writable(&branch, "refs/heads/lazaret/a/b/c");
        expect(&branch, "refs/heads/lazaret/a", GIT_OP_MKDIR, A, 0);
        expect(&branch, "refs/heads/lazaret/a", GIT_OP_RMDIR, A, 0);
        expect_file_writable(&branch, "logs/refs/heads/lazaret/agent-x");
        expect_file_writable(&direct, "logs/refs/heads/lazaret/agent-x");

        /* The lazaret directory itself: only as a directory. */
        expect(&branch, "refs/heads/lazaret", GIT_OP_MKDIR, A, 0);
        expect(&branch, "refs/heads/lazaret", GIT_OP_RMDIR, A, 0);
        expect(&branch, "refs/heads/lazaret", GIT_OP_CREATE, D, AC);
        expect(&branch, "refs/heads/lazaret", GIT_OP_WRITE, D, RO);
        expect(&branch, "refs/heads/lazaret", GIT_OP_RENAME_FROM, D, RO);
        expect(&branch, "refs/heads/lazaret", GIT_OP_RENAME_TO, D, AC);
        expect(&branch, "refs/heads/lazaret.lock", GIT_OP_CREATE, D, AC);
        expect(&branch, "logs/refs/heads/lazaret", GIT_OP_MKDIR, A, 0);
        expect(&branch, "logs/refs/heads/lazaret", GIT_OP_CREATE, D, AC);
        expect(&branch, "logs", GIT_OP_MKDIR, A, 0);
        expect(&branch, "logs/refs", GIT_OP_MKDIR, A, 0);
        expect(&branch, "logs/refs/heads", GIT_OP_MKDIR, A, 0);
        expect(&branch, "logs/refs/tags", GIT_OP_MKDIR, D, AC);

        /* Look-alikes. */
        expect_readonly(&branch, "refs/heads/lazaretX/y");
        expect_readonly(&branch, "refs/heads/lazaret-x");
        expect_readonly(&branch, "refs/heads/main");
        expect_readonly(&branch, "refs/heads/main.lock");
        expect_readonly(&branch, "refs/tags/lazaret/x");
        expect_readonly(&branch, "refs/tags/v1");
        expect_readonly(&branch, "refs/remotes/origin/lazaret/x");
        expect_readonly(&branch, "refs/lazaret/x");
        expect_readonly(&branch, "logs/refs/heads/main");
        expect_readonly(&branch, "logs/refs/heads/lazaretX/y");
        expect_readonly(&branch, "modules/a/refs/heads/lazaret/x");
        expect_readonly(&branch, "worktrees/agent/refs/heads/lazaret/x");
}

static void test_objects(void **state) {
        (void) state;
        /* New loose objects. */
        expect(&branch, "objects/ab", GIT_OP_MKDIR, A, 0);
        expect(&branch, "objects/ab", GIT_OP_RMDIR, A, 0);
        expect(&branch, "objects/ab/tmp_obj_XYZ", GIT_OP_CREATE, A, 0);
        expect(&branch, "objects/ab/tmp_obj_XYZ", GIT_OP_WRITE, A, 0);
        expect(&branch, "objects/ab/tmp_obj_XYZ", GIT_OP_RENAME_FROM, A, 0);
        expect(&branch, "objects/ab/tmp_obj_XYZ", GIT_OP_UNLINK, A, 0);
        expect(&branch, "objects/ab/cdef0123", GIT_OP_RENAME_TO, A, 0);
        expect(&branch, "objects/ab/cdef0123", GIT_OP_CREATE, A, 0);
        expect(&branch, "objects/ab/cdef0123", GIT_OP_SETATTR, A, 0);
        /* Existing objects never change. */
        expect(&branch, "objects/ab/cdef0123", GIT_OP_WRITE, D, RO);
        expect(&branch, "objects/ab/cdef0123", GIT_OP_UNLINK, D, RO);
        expect(&branch, "objects/ab/cdef0123", GIT_OP_RENAME_FROM, D, RO);
        expect(&branch, "objects/ab", GIT_OP_RENAME_FROM, D, RO);
        expect(&branch, "objects/pack", GIT_OP_RENAME_FROM, D, RO);
        assert_true(git_policy_rename_noreplace("objects/ab/cdef0123"));
        assert_true(git_policy_rename_noreplace("objects/pack/pack-1.pack"));
        assert_false(git_policy_rename_noreplace("refs/heads/lazaret/x"));
        /* Packs and quarantine. */
        expect(&branch, "objects/pack/tmp_pack_123", GIT_OP_CREATE, A, 0);
        expect(&branch, "objects/pack/tmp_pack_123", GIT_OP_RENAME_FROM, A, 0);
        expect(&branch, "objects/pack/pack-1.pack", GIT_OP_RENAME_TO, A, 0);
        expect(&branch, "objects/pack/pack-1.pack", GIT_OP_UNLINK, D, RO);
        expect(&branch, "objects/incoming-abc", GIT_OP_MKDIR, A, 0);
        expect_file_writable(&branch, "objects/incoming-abc/pack/x.pack");
        expect_file_writable(&branch, "objects/incoming-abc/ab/cd");
        /* objects/info is read-only. */
        expect_readonly(&branch, "objects/info");
        expect_readonly(&branch, "objects/info/alternates");
        expect_readonly(&branch, "objects/info/http-alternates");
        expect_readonly(&branch, "objects/info/packs");
        expect_readonly(&branch, "objects/info/tmp_obj_x");
        expect(&direct, "objects/info/alternates", GIT_OP_CREATE, D, AC);
        expect(&branch, "objects/info/alternates", GIT_OP_RENAME_TO, D, AC);
        expect(&branch, "objects/ab", GIT_OP_LINK, D, EPERM);
        /* Object files git reads come only by a rename the router checks
         * (issue 40): never created under their final names. */
        const char *loose = "objects/ce/013625030ba8dba906f756967f9e9ca394464a";
        const char *loose256 = "objects/2c/f8d83d9ee29543b34a87727421fdecb7e3f3a183d337639025de576db9ebb4";
        const char *finals[] = { loose,
                                 loose256,
                                 "objects/pack/pack-1.pack",
                                 "objects/pack/pack-1.idx",
                                 "objects/pack/anything.idx",
                                 "objects/pack/x.pack",
                                 "objects/pack/tmp_x.idx" };
        for (size_t i = 0; i < sizeof(finals) / sizeof(finals[0]); i++) {
                expect(&branch, finals[i], GIT_OP_CREATE, D, AC);
                expect(&direct, finals[i], GIT_OP_CREATE, D, AC);
                expect(&branch, finals[i], GIT_OP_RENAME_TO, A, 0);
                expect(&branch, finals[i], GIT_OP_WRITE, D, RO);
        }
        /* What changes how git reads the packs never comes from the sandbox. */
        const char *aux[] = { "objects/pack/pack-1.rev", "objects/pack/pack-1.bitmap", "objects/pack/pack-1.mtimes",
                              "objects/pack/multi-pack-index", "objects/pack/multi-pack-index-1.bitmap" };
        for (size_t i = 0; i < sizeof(aux) / sizeof(aux[0]); i++) {
                expect(&branch, aux[i], GIT_OP_CREATE, D, AC);
                expect(&branch, aux[i], GIT_OP_RENAME_TO, D, AC);
        }
        /* Scratch names, flags and names git does not read stay creatable. */
        const char *free_names[] = { "objects/pack/tmp_idx_1",
                                     "objects/pack/pack-1.keep",
                                     "objects/pack/pack-1.promisor",
                                     "objects/pack/multi-pack-index.lock",
                                     "objects/ce/tmp_obj_1",
                                     "objects/ce/013625030ba8dba906f756967f9e9ca39446",
                                     "objects/CE/013625030ba8dba906f756967f9e9ca394464a" };
        for (size_t i = 0; i < sizeof(free_names) / sizeof(free_names[0]); i++)
                expect(&branch, free_names[i], GIT_OP_CREATE, A, 0);
        assert_int_equal(git_policy_object_file(loose), GIT_OBJECT_FILE_LOOSE);
        assert_int_equal(git_policy_object_file(loose256), GIT_OBJECT_FILE_LOOSE);
        assert_int_equal(git_policy_object_file("objects/pack/p.pack"), GIT_OBJECT_FILE_PACK);
        assert_int_equal(git_policy_object_file("objects/pack/p.idx"), GIT_OBJECT_FILE_INDEX);
        assert_int_equal(git_policy_object_file("objects/pack/p.rev"), GIT_OBJECT_FILE_AUX);
        assert_int_equal(git_policy_object_file("objects/pack/tmp_pack_1"), GIT_OBJECT_FILE_NONE);
        /* git reads any *.idx in objects/pack, a scratch name's too. */
        assert_int_equal(git_policy_object_file("objects/pack/tmp_pack_1.pack"), GIT_OBJECT_FILE_PACK);
        assert_int_equal(git_policy_object_file("objects/pack/.tmp-1-pack-2.idx"), GIT_OBJECT_FILE_INDEX);
        assert_int_equal(git_policy_object_file("objects/pack/sub/p.idx"), GIT_OBJECT_FILE_NONE);
        assert_int_equal(git_policy_object_file("objects/incoming-1/pack/p.idx"), GIT_OBJECT_FILE_NONE);
        assert_int_equal(git_policy_object_file("refs/heads/lazaret/p.idx"), GIT_OBJECT_FILE_NONE);
        assert_int_equal(git_policy_object_file("objects/../x"), GIT_OBJECT_FILE_NONE);
        expect(&branch, "objects/ab/cd", GIT_OP_LINK, D, EPERM);
}

static void test_worktree(void **state) {
        (void) state;
        const char *files[] = { "index",      "index.lock", "HEAD",      "HEAD.lock",  "ORIG_HEAD", "COMMIT_EDITMSG",
                                "AUTO_MERGE", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "logs/HEAD", "sequencer/todo" };
        char buf[256];
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
                snprintf(buf, sizeof buf, "worktrees/agent/%s", files[i]);
                expect_file_writable(&branch, buf);
                snprintf(buf, sizeof buf, "worktrees/other/%s", files[i]);
                expect_readonly(&branch, buf);
                /* Branch mode: the main worktree's files are read-only. */
                expect_readonly(&branch, files[i]);
                /* Not a worktree of anybody in direct mode. */
                snprintf(buf, sizeof buf, "worktrees/agent/%s", files[i]);
                expect_readonly(&direct, buf);
        }
        expect(&branch, "worktrees/agent/logs", GIT_OP_MKDIR, A, 0);
        expect(&branch, "worktrees/agent/sequencer", GIT_OP_MKDIR, A, 0);
        expect(&branch, "worktrees/agent/sequencer", GIT_OP_RMDIR, A, 0);
        expect(&branch, "worktrees/agent/index", GIT_OP_MKDIR, D, AC);
        expect(&branch, "worktrees/agent/modules", GIT_OP_MKDIR, D, AC);
        expect_readonly(&branch, "worktrees/agent/modules/a/config");
        expect_readonly(&branch, "worktrees/agent/FETCH_HEAD");
        expect_readonly(&branch, "worktrees/agent/logs/refs/x");

        /* An invalid worktree name disables worktree writes. */
        const GitPolicy bad[] = { { .worktree = "" }, { .worktree = ".." }, { .worktree = "a/b" } };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                expect_readonly(&bad[i], "worktrees/a/b/index");
                expect_readonly(&bad[i], "index");
                expect_file_writable(&bad[i], "refs/heads/lazaret/x");
        }
}

static void test_direct(void **state) {
        (void) state;
        const char *files[] = { "index", "index.lock", "COMMIT_EDITMSG", "ORIG_HEAD", "logs/HEAD" };
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
                expect_file_writable(&direct, files[i]);
        expect_readonly(&direct, "HEAD");
        expect_readonly(&direct, "HEAD.lock");
        expect_file_writable(&direct_head, "HEAD");
        expect_file_writable(&direct_head, "HEAD.lock");
        expect_readonly(&direct, "worktrees/x/HEAD");
        expect_readonly(&direct_head, "worktrees/x/HEAD");
        expect(&direct, "logs", GIT_OP_MKDIR, A, 0);
}

static void test_isolated(void **state) {
        (void) state;
        const char *iso[] = { "hooks",
                              "hooks/pre-commit",
                              "hooks/a/b",
                              "modules/a/hooks",
                              "modules/a/hooks/post-checkout",
                              "modules/a/b/hooks/x",
                              "modules/a/modules/b/hooks/pre-commit",
                              "worktrees/agent/hooks/x",
                              "worktrees/other/modules/a/hooks/x" };
        for (size_t i = 0; i < sizeof iso / sizeof iso[0]; i++)
                for (GitOp op = 0; op < _GIT_OP_MAX; op++) {
                        expect(&branch, iso[i], op, I, 0);
                        expect(&direct, iso[i], op, I, 0);
                }
        /* Not a hooks directory of a git dir. */
        expect_readonly(&branch, "modules/hooks");
        expect_readonly(&branch, "modules/hooks/config");
        expect_readonly(&branch, "hooksx/pre-commit");
        expect_readonly(&branch, "info/hooks");
        expect_readonly(&branch, "worktrees/hooks");
        expect(&branch, "refs/heads/lazaret/hooks", GIT_OP_CREATE, A, 0);
}

static void test_invalid(void **state) {
        (void) state;
        const char *bad[] = {
                "/config", "config/", "a//b", "./config", "refs/heads/lazaret/../main", "refs/heads/lazaret/./x",
                "..",      "."
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
                for (GitOp op = 0; op < _GIT_OP_MAX; op++)
                        expect(&branch, bad[i], op, D, EINVAL);
        int e = 0;
        assert_int_equal(git_policy_check(&branch, "config", (GitOp) 99, &e), D);
        assert_int_equal(e, EINVAL);
        assert_int_equal(git_policy_check(&branch, "config", _GIT_OP_INVALID, &e), D);
        assert_int_equal(git_policy_check(NULL, "config", GIT_OP_READ, &e), D);
        assert_int_equal(git_policy_check(&branch, NULL, GIT_OP_READ, NULL), D);
}

static void test_normalize(void **state) {
        (void) state;
        char *s = NULL;
        assert_int_equal(git_policy_normalize("/", &s), 0);
        assert_string_equal(s, "");
        free(s);
        assert_int_equal(git_policy_normalize("/refs/heads/lazaret/x", &s), 0);
        assert_string_equal(s, "refs/heads/lazaret/x");
        free(s);
        assert_int_equal(git_policy_normalize("config", &s), 0);
        assert_string_equal(s, "config");
        free(s);
        assert_int_equal(git_policy_normalize("...", &s), 0);
        assert_string_equal(s, "...");
        free(s);

        s = NULL;
        const char *bad[] = {
                "//config", "/refs/heads/lazaret/../main", "/a/./b", "/a//b", "/a/", "..", "/..", "/.", "a/..", "/x/"
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                assert_int_equal(git_policy_normalize(bad[i], &s), -EINVAL);
                assert_null(s);
        }
        char seg[300];
        memset(seg, 'a', sizeof seg - 1);
        seg[sizeof seg - 1] = '\0';
        assert_int_equal(git_policy_normalize(seg, &s), -ENAMETOOLONG);
        char *big = malloc(5000);
        assert_non_null(big);
        for (size_t i = 0; i < 4999; i++)
                big[i] = i % 2 ? '/' : 'a';
        big[4999] = '\0';
        assert_int_equal(git_policy_normalize(big, &s), -ENAMETOOLONG);
        /* 4095 bytes of a/a/...: accepted, and check copes. */
        big[4095] = '\0';
        big[4094] = 'a';
        assert_int_equal(git_policy_normalize(big, &s), 0);
        assert_int_equal(git_policy_check(&branch, s, GIT_OP_READ, NULL), A);
        free(s);
        free(big);
        assert_int_equal(git_policy_normalize(NULL, &s), -EINVAL);
}

/* No protected or isolated name lies below a path whose rename is allowed. */
static void test_rename_invariant(void **state) {
        (void) state;
        const char *movable[] = { "objects/incoming-1",
                                  "objects/ab/tmp_obj_1",
                                  "objects/pack/tmp_pack_1",
                                  "refs/heads/lazaret/d",
                                  "logs/refs/heads/lazaret/d",
                                  "worktrees/agent/sequencer/d",
                                  "objects/ab",
                                  "objects/tmp_x" };
        const char *below[] = { "config", "hooks/x", "modules/a/hooks/x", "info/alternates", "HEAD", "index" };
        char buf[512];
        for (size_t i = 0; i < sizeof movable / sizeof movable[0]; i++) {
                bool from = git_policy_check(&branch, movable[i], GIT_OP_RENAME_FROM, NULL) == A;
                bool to = git_policy_check(&branch, movable[i], GIT_OP_RENAME_TO, NULL) == A;
                if (!from && !to)
                        continue;
                for (size_t j = 0; j < sizeof below / sizeof below[0]; j++) {
                        snprintf(buf, sizeof buf, "%s/%s", movable[i], below[j]);
                        assert_int_equal(git_policy_check(&branch, buf, GIT_OP_READ, NULL), A);
                        assert_int_equal(git_policy_check(&branch, buf, GIT_OP_CREATE, NULL), A);
                }
        }
}

static void test_strings(void **state) {
        (void) state;
        for (GitOp op = 0; op < _GIT_OP_MAX; op++)
                assert_non_null(git_op_to_string(op));
        assert_null(git_op_to_string(_GIT_OP_MAX));
        assert_null(git_op_to_string(_GIT_OP_INVALID));
        for (GitDecision d = 0; d < _GIT_DECISION_MAX; d++)
                assert_non_null(git_decision_to_string(d));
        assert_null(git_decision_to_string(_GIT_DECISION_INVALID));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_reads),     cmocka_unit_test(test_config_readonly),
                cmocka_unit_test(test_refs),      cmocka_unit_test(test_objects),
                cmocka_unit_test(test_worktree),  cmocka_unit_test(test_direct),
                cmocka_unit_test(test_isolated),  cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_normalize), cmocka_unit_test(test_rename_invariant),
                cmocka_unit_test(test_strings),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
