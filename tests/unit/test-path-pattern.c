/* SPDX-License-Identifier: MIT */
/* Unit tests of src/shared/path-pattern: protected and masked paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "path-pattern.h"

static bool m1(const char *pattern, const char *rel) {
        assert_null(path_pattern_problem(pattern));
        return path_pattern_match_any(rel, (const char *const[]){ pattern }, 1);
}

static void expect_match(const char *pattern, const char *rel) {
        if (!m1(pattern, rel))
                fail_msg("'%s' should match '%s'", pattern, rel);
}

static void expect_no_match(const char *pattern, const char *rel) {
        if (m1(pattern, rel))
                fail_msg("'%s' should not match '%s'", pattern, rel);
}

static void test_depth(void **state) {
        (void) state;
        expect_match(".envrc", ".envrc");
        expect_match(".envrc", "sub/.envrc");
        expect_match(".envrc", "a/b/c/.envrc");
        expect_match(".vscode/tasks.json", "x/.vscode/tasks.json");
        expect_match(".docker/config.json", "home/.docker/config.json");
        expect_no_match(".docker/config.json", ".docker/other.json");
        expect_no_match(".docker/config.json", ".docker/x/config.json");
        expect_no_match(".envrc", "envrc");
        expect_no_match(".envrc", ".envrc2");
        expect_no_match(".envrc", "x.envrc");
        expect_no_match("lazaret.toml", "lazaret.toml.bak");
        expect_no_match("a/b", "a/x/b");
        expect_no_match("a/b", "b/a");
}

static void test_anchored(void **state) {
        (void) state;
        expect_match("/lazaret.toml", "lazaret.toml");
        expect_no_match("/lazaret.toml", "sub/lazaret.toml");
        expect_match("/a/b", "a/b");
        expect_match("/a/b", "a/b/c");
        expect_no_match("/a/b", "x/a/b");
        expect_match("/.vscode/", ".vscode/tasks.json");
        expect_no_match("/.vscode/", "sub/.vscode/tasks.json");
        /* A leading slash on the path is skipped, not taken as a component. */
        expect_match("/a", "/a/b");
}

static void test_beneath(void **state) {
        (void) state;
        expect_match(".git", "sub/.git/config");
        expect_match(".git", ".git/hooks/pre-commit");
        expect_match(".vscode/", ".vscode/tasks.json");
        expect_match(".vscode/", ".vscode");
        expect_match(".vscode", "a/.vscode/deep/er/settings.json");
        expect_match(".aws/", "home/.aws/credentials");
        expect_no_match(".vscode/", ".vscodex/tasks.json");
        expect_no_match(".git", ".gitignore");
        expect_no_match(".git", ".github/workflows/ci.yml");
}

static void test_globs(void **state) {
        (void) state;
        expect_match("*.pem", "server.pem");
        expect_match("*.pem", "certs/deep/server.pem");
        expect_match("*.pem", ".pem");
        expect_match(".env.*", ".env.local");
        expect_no_match(".env.*", ".env");
        expect_match("id_rsa*", "keys/id_rsa.pub");
        expect_match("?.c", "src/a.c");
        expect_no_match("?.c", "src/ab.c");
        expect_match("[ab].txt", "b.txt");
        expect_no_match("[ab].txt", "c.txt");
        expect_match("a\\*", "a*");
        expect_no_match("a\\*", "ab");
        /* '*' and '?' never cross '/': a component is matched by itself. */
        expect_no_match("a*b", "a/b");
        expect_no_match("a?b", "a/b");
        expect_no_match("/*.pem", "dir/x.pem");
        expect_match("/*.pem", "x.pem");
        expect_match("*", "anything/at/all");
        expect_match("*/config", "x/config");
        expect_no_match("*/config", "config");
        /* No '**': two stars are one component's glob. */
        expect_no_match("/**/x", "a/b/x");
        expect_match("/**/x", "a/x");
        /* A leading dot is nothing special (no FNM_PERIOD). */
        expect_match("*rc", ".envrc");
}

static void test_any(void **state) {
        (void) state;
        const char *const pats[] = { "a", "/b/c", "*.key" };
        assert_true(path_pattern_match_any("x/a", pats, 3));
        assert_true(path_pattern_match_any("b/c/d", pats, 3));
        assert_true(path_pattern_match_any("z/y.key", pats, 3));
        assert_false(path_pattern_match_any("x/b/c", pats, 3));
        assert_false(path_pattern_match_any("x/b/c", pats, 0));
        assert_false(path_pattern_match_any("", pats, 3));
        assert_false(path_pattern_match_any("/", pats, 3));
        assert_false(path_pattern_match_any(NULL, pats, 3));
        /* Refused patterns never match, even where their text would. */
        const char *const bad[] = { "a//b", "../a", "" };
        assert_false(path_pattern_match_any("a/b", bad, 3));
        assert_false(path_pattern_match_any("a", bad, 3));

        /* A path longer than the stack buffers. */
        char long_path[8192];
        size_t n = 0;
        while (n + 2 < sizeof long_path - 16) {
                long_path[n++] = 'd';
                long_path[n++] = '/';
        }
        memcpy(long_path + n, ".envrc", 7);
        assert_true(path_pattern_match_any(long_path, (const char *const[]){ ".envrc" }, 1));
        assert_false(path_pattern_match_any(long_path, (const char *const[]){ "/.envrc" }, 1));
        assert_true(path_pattern_match_any(long_path, (const char *const[]){ "/d/d" }, 1));
}

static void test_defaults(void **state) {
        (void) state;
        const char *const *prot = path_pattern_protect_default;
        const char *const *mask = path_pattern_mask_default;
        size_t np = path_pattern_count(prot), nm = path_pattern_count(mask);
        assert_int_equal(np, 17);
        assert_int_equal(nm, 12);
        for (size_t i = 0; i < np; i++)
                assert_null(path_pattern_problem(prot[i]));
        for (size_t i = 0; i < nm; i++)
                assert_null(path_pattern_problem(mask[i]));

        static const char *const protected[] = { "lazaret.toml",
                                                 ".vscode/tasks.json",
                                                 "sub/.idea/workspace.xml",
                                                 ".devcontainer/devcontainer.json",
                                                 ".envrc",
                                                 ".claude/settings.json",
                                                 ".cursor/rules",
                                                 ".pre-commit-config.yaml",
                                                 "pkg/.npmrc",
                                                 "vendor/x/.git/config",
                                                 ".git",
                                                 ".mcp.json",
                                                 ".claude/settings.local.json",
                                                 ".gemini/settings.json",
                                                 ".codex/config.toml",
                                                 "opencode.json",
                                                 "sub/opencode.jsonc",
                                                 ".opencode/plugin/x.js",
                                                 ".aider.conf.yml" };
        for (size_t i = 0; i < ELEMENTSOF(protected); i++)
                if (!path_pattern_match_any(protected[i], prot, np))
                        fail_msg("%s is not protected", protected[i]);
        static const char *const plain[] = { "README.md", "src/main.c", ".gitignore", ".github/x.yml",
                                             "lazaret.toml5" };
        for (size_t i = 0; i < ELEMENTSOF(plain); i++)
                if (path_pattern_match_any(plain[i], prot, np))
                        fail_msg("%s is protected", plain[i]);

        static const char *const masked[] = { ".env",        ".env.production",  "certs/server.pem",
                                              "tls/a.key",   "id_rsa",           "home/.ssh/id_ed25519.pub",
                                              ".netrc",      ".npmrc",           ".pypirc",
                                              ".aws/config", ".ssh/known_hosts", ".docker/config.json" };
        for (size_t i = 0; i < ELEMENTSOF(masked); i++)
                if (!path_pattern_match_any(masked[i], mask, nm))
                        fail_msg("%s is not masked", masked[i]);
        static const char *const shown[] = { "env", ".envrc", "src/key.c", "keys.txt", ".docker/other.json" };
        for (size_t i = 0; i < ELEMENTSOF(shown); i++)
                if (path_pattern_match_any(shown[i], mask, nm))
                        fail_msg("%s is masked", shown[i]);
}

static void expect_problem(const char *pattern, const char *why) {
        const char *got = path_pattern_problem(pattern);
        if (!got)
                fail_msg("'%s' should be refused (%s)", pattern ? pattern : "(null)", why);
        assert_string_equal(got, why);
        assert_null(strchr(got, '\n'));
        assert_int_not_equal(got[strlen(got) - 1], '.');
}

static void test_refused(void **state) {
        (void) state;
        expect_problem(NULL, "empty");
        expect_problem("", "empty");
        expect_problem("/", "'/' alone names no file");
        expect_problem("//", "'/' alone names no file");
        expect_problem(".", "a '.' or '..' component");
        expect_problem("..", "a '.' or '..' component");
        expect_problem("a/./b", "a '.' or '..' component");
        expect_problem("a/../b", "a '.' or '..' component");
        expect_problem("/..", "a '.' or '..' component");
        expect_problem("./", "a '.' or '..' component");
        expect_problem("a//b", "an empty component (a//b)");
        expect_problem("///a", "an empty component (a//b)");
        expect_problem("a//", "an empty component (a//b)");
        expect_problem("a\tb", "a control character");
        expect_problem("a\nb", "a control character");
        expect_problem("\x1b[2J", "a control character");
        expect_problem("a\x7f", "a control character");
        /* NUL ends a C string: what follows it is not part of the pattern,
         * and a pattern cannot carry one (the fuzzer checks from bytes). */
        assert_null(path_pattern_problem("a\0b"));

        char s[PATH_PATTERN_MAX + 2];
        memset(s, 'x', sizeof s - 1);
        s[sizeof s - 1] = '\0';
        expect_problem(s, "longer than 1024 bytes");
        s[PATH_PATTERN_MAX] = '\0';
        assert_null(path_pattern_problem(s));

        char comps[200] = "";
        for (int i = 0; i < 32; i++)
                strcat(comps, i ? "/c" : "c");
        assert_null(path_pattern_problem(comps));
        strcat(comps, "/c");
        expect_problem(comps, "more than 32 components");

        /* Accepted: the forms the syntax allows. */
        static const char *const ok[] = { "a", "/a", "a/", "/a/", "a/b/", "*", ".x", "..x", "x..", "[a-z]*", "é/ü" };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++)
                if (path_pattern_problem(ok[i]))
                        fail_msg("'%s' refused: %s", ok[i], path_pattern_problem(ok[i]));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_depth),   cmocka_unit_test(test_anchored), cmocka_unit_test(test_beneath),
                cmocka_unit_test(test_globs),   cmocka_unit_test(test_any),      cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
