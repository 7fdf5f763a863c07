/* SPDX-License-Identifier: MIT */
/* Unit tests of src/git/workspace-policy: the workspace router's
 * decisions in direct mode (issue 13). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "path-pattern.h"
#include "workspace-policy.h"

#define A WS_DECISION_ALLOW
#define I WS_DECISION_ISOLATED
#define M WS_DECISION_MASKED
#define H WS_DECISION_HIDDEN
#define D WS_DECISION_DENY

static const GitPolicy direct = { .worktree = NULL, .allow_main_head = false };
static const char *const extra_protect[] = { "/ci/", "deploy.sh" };

static WorkspacePolicy make(bool repo) {
        return (WorkspacePolicy){
                .git = repo ? &direct : NULL,
                .protect = path_pattern_protect_default,
                .n_protect = path_pattern_count(path_pattern_protect_default),
                .mask = path_pattern_mask_default,
                .n_mask = path_pattern_count(path_pattern_mask_default),
        };
}

static void expect(const WorkspacePolicy *p, const char *path, GitOp op, WsDecision want, int want_errno) {
        int e = -1;
        WsDecision d = workspace_policy_check(p, path, op, &e, NULL);
        if (d != want || (want == D && e != want_errno)) {
                print_error("%s %s: got %s/%d, want %s/%d\n", path, git_op_to_string(op), ws_decision_to_string(d), e,
                            ws_decision_to_string(want), want_errno);
                fail();
        }
}

static const GitOp changes[] = { GIT_OP_WRITE, GIT_OP_UNLINK, GIT_OP_RMDIR, GIT_OP_RENAME_FROM, GIT_OP_SETATTR };
static const GitOp creations[] = { GIT_OP_CREATE, GIT_OP_MKDIR, GIT_OP_RENAME_TO };

static void expect_read_only(const WorkspacePolicy *p, const char *path, WsDecision read) {
        expect(p, path, GIT_OP_READ, read, 0);
        for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
                expect(p, path, changes[i], D, EROFS);
        for (size_t i = 0; i < sizeof(creations) / sizeof(creations[0]); i++)
                expect(p, path, creations[i], D, EACCES);
        expect(p, path, GIT_OP_LINK, D, EPERM);
}

static void test_protected(void **state) {
        (void) state;
        WorkspacePolicy p = make(false);
        const char *paths[] = {
                "lazaret.toml",
                "sub/lazaret.toml",
                ".vscode",
                ".vscode/tasks.json",
                ".idea/workspace.xml",
                ".devcontainer/devcontainer.json",
                ".envrc",
                "a/b/.envrc",
                ".claude/settings.json",
                ".cursor/rules",
                ".pre-commit-config.yaml",
                ".git",
                "sub/.git",
                "sub/.git/config",
                ".git/hooks/pre-commit",
        };
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                expect_read_only(&p, paths[i], A);
        /* Ordinary names are the sandbox's to change. */
        const char *free_paths[] = { "src/main.c", "vscode/x", "lazaret.toml.bak", ".github/workflows/ci.yml" };
        for (size_t i = 0; i < sizeof(free_paths) / sizeof(free_paths[0]); i++)
                for (GitOp op = 0; op < _GIT_OP_MAX; op++)
                        expect(&p, free_paths[i], op, A, 0);
        /* The root itself only reads. */
        expect(&p, "", GIT_OP_READ, A, 0);
        expect(&p, "", GIT_OP_RENAME_FROM, D, EROFS);

        /* [workspace] protect adds to them, anchored or at any depth. */
        p.protect = extra_protect;
        p.n_protect = 2;
        expect_read_only(&p, "ci/run.sh", A);
        expect_read_only(&p, "tools/deploy.sh", A);
        expect(&p, "sub/ci/run.sh", GIT_OP_WRITE, A, 0);
}

static void test_masked(void **state) {
        (void) state;
        WorkspacePolicy p = make(false);
        /* Masked names read as empty and are never changed. */
        const char *masked[] = { ".env",
                                 "config/.env.production",
                                 "certs/server.pem",
                                 "x.key",
                                 "id_rsa",
                                 "deploy/id_ed25519.pub",
                                 ".netrc",
                                 ".npmrc",
                                 ".pypirc",
                                 ".aws",
                                 ".ssh",
                                 ".docker/config.json" };
        for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++)
                expect_read_only(&p, masked[i], M);
        /* What lies beneath a masked directory does not exist. */
        expect(&p, ".ssh/id_rsa", GIT_OP_READ, H, 0);
        expect(&p, ".aws/credentials", GIT_OP_READ, H, 0);
        expect(&p, ".aws/credentials", GIT_OP_CREATE, D, ENOENT);
        expect(&p, ".docker/other.json", GIT_OP_READ, A, 0);
        expect(&p, "environment.txt", GIT_OP_READ, A, 0);
}

static void test_repository(void **state) {
        (void) state;
        WorkspacePolicy p = make(true);
        const char *g = NULL;
        int e = 0;
        /* The top-level .git follows the git policy, on the path below it. */
        assert_int_equal(workspace_policy_check(&p, ".git/config", GIT_OP_READ, &e, &g), A);
        assert_string_equal(g, "config");
        expect(&p, ".git/config", GIT_OP_WRITE, D, EROFS);
        expect(&p, ".git/objects/ab/cdef", GIT_OP_CREATE, A, 0);
        expect(&p, ".git/index", GIT_OP_WRITE, A, 0);
        assert_int_equal(workspace_policy_check(&p, ".git/hooks/pre-commit", GIT_OP_CREATE, &e, &g), I);
        assert_string_equal(g, "hooks/pre-commit");
        expect(&p, ".git", GIT_OP_RENAME_FROM, D, EROFS);
        assert_true(workspace_policy_in_git(&p, ".git/objects"));
        assert_false(workspace_policy_in_git(&p, ".github"));
        /* A nested repository stays a protected name. */
        expect_read_only(&p, "sub/.git", A);
        expect(&p, "sub/.git/config", GIT_OP_WRITE, D, EROFS);
        /* Without a repository, .git is a protected name at the top too. */
        WorkspacePolicy q = make(false);
        assert_false(workspace_policy_in_git(&q, ".git/objects"));
        expect(&q, ".git/objects/ab/cdef", GIT_OP_CREATE, D, EACCES);
}

static void test_guarded(void **state) {
        (void) state;
        WorkspacePolicy p = make(true);
        assert_true(workspace_policy_guarded(&p, "pkg/.envrc"));
        assert_true(workspace_policy_guarded(&p, "a/b/.git"));
        assert_true(workspace_policy_guarded(&p, "x/.env"));
        assert_true(workspace_policy_guarded(&p, ".git/objects"));
        assert_false(workspace_policy_guarded(&p, "pkg/code.txt"));
        expect(&p, "x", (GitOp) 99, D, EINVAL);
}

/* Git's discovery and venvs: a directory is known by the names it holds
 * (issue 40), whatever order they arrive in. */
static void test_markers(void **state) {
        (void) state;
        const unsigned H_ = WS_MARKER_HEAD, O = WS_MARKER_OBJECTS, R = WS_MARKER_REFS, C = WS_MARKER_COMMONDIR;
        assert_int_equal(workspace_marker_of("HEAD"), H_);
        assert_int_equal(workspace_marker_of("objects"), O);
        assert_int_equal(workspace_marker_of("refs"), R);
        assert_int_equal(workspace_marker_of("commondir"), C);
        assert_int_equal(workspace_marker_of("pyvenv.cfg"), WS_MARKER_PYVENV);
        assert_int_equal(workspace_marker_of("head"), 0);
        assert_int_equal(workspace_marker_of("config"), 0);
        assert_int_equal(workspace_marker_of("refs.bak"), 0);
        for (size_t i = 0; workspace_marker_names[i]; i++)
                assert_int_equal(workspace_marker_of(workspace_marker_names[i]), 1u << i);

#define KIND(m)      workspace_markers_kind(m)
#define MAY(m, name) (KIND((m) | workspace_marker_of(name)) == WS_MARKED_NONE)
        assert_int_equal(KIND(0), WS_MARKED_NONE);
        assert_int_equal(KIND(H_), WS_MARKED_NONE);
        assert_int_equal(KIND(O | R), WS_MARKED_NONE); /* no HEAD: not git's */
        assert_int_equal(KIND(H_ | O), WS_MARKED_NONE);
        assert_int_equal(KIND(H_ | R), WS_MARKED_NONE);
        assert_int_equal(KIND(H_ | O | R), WS_MARKED_GIT);
        assert_int_equal(KIND(H_ | C), WS_MARKED_GIT);
        assert_int_equal(KIND(WS_MARKER_PYVENV), WS_MARKED_VENV);
        assert_int_equal(KIND(WS_MARKER_PYVENV | H_ | O | R), WS_MARKED_GIT);
        assert_string_equal(ws_marked_to_string(WS_MARKED_GIT), "git-directory");
        assert_string_equal(ws_marked_to_string(WS_MARKED_VENV), "venv");
        assert_null(ws_marked_to_string(WS_MARKED_NONE));
        assert_null(ws_marked_to_string(_WS_MARKED_INVALID));

        /* The last of the three is refused, whichever it is. */
        assert_false(MAY(O | R, "HEAD"));
        assert_false(MAY(H_ | R, "objects"));
        assert_false(MAY(H_ | O, "refs"));
        assert_false(MAY(H_, "commondir"));
        assert_false(MAY(C, "HEAD"));
        /* Two of them, or other names, are plain files. */
        assert_true(MAY(0, "HEAD"));
        assert_true(MAY(H_, "objects"));
        assert_true(MAY(O, "refs"));
        assert_true(MAY(O | R, "config"));
        /* A venv is never made inside the workspace. */
        assert_false(MAY(0, "pyvenv.cfg"));
#undef MAY
#undef KIND
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_protected), cmocka_unit_test(test_masked),  cmocka_unit_test(test_repository),
                cmocka_unit_test(test_guarded),   cmocka_unit_test(test_markers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
