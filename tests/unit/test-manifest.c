/* SPDX-License-Identifier: MIT */
/* The multi-agent manifest (issue 22): a valid one read whole (argv kept
 * literal, workspaces resolved against the manifest's directory and "~");
 * every kind of bad input one error naming the file, line and column. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "manifest.h"

static char dir[PATH_MAX];

static int setup(void **state) {
        (void) state;
        snprintf(dir, sizeof(dir), "/tmp/test-manifest-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        char sub[PATH_MAX + 16];
        snprintf(sub, sizeof(sub), "%s/repo", dir);
        if (mkdir(sub, 0700) < 0)
                return -1;
        snprintf(sub, sizeof(sub), "%s/home", dir);
        if (mkdir(sub, 0700) < 0)
                return -1;
        snprintf(sub, sizeof(sub), "%s/home/src", dir);
        return mkdir(sub, 0700);
}

static int teardown(void **state) {
        (void) state;
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

/* The manifest text in DIR/m.toml; its path in path. */
static void write_manifest(const char *text, char *path, size_t size) {
        snprintf(path, size, "%s/m.toml", dir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(fputs(text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

static void test_valid(void **state) {
        (void) state;
        char path[PATH_MAX + 16], home[PATH_MAX + 16], want[PATH_MAX + 32];
        write_manifest("[agents.alpha]\n"
                       "profile = \"shell\"\n"
                       "command = [\"sh\", \"-c\", \"echo $HOME; rm -rf / ; `x`\"]\n"
                       "[agents.beta-2]\n"
                       "profile = \"codex_like\"\n"
                       "command = [\"codex\"]\n"
                       "workspace = \"repo\"\n"
                       "[agents.gamma]\n"
                       "profile = \"shell\"\n"
                       "command = [\"true\"]\n"
                       "workspace = \"~/src\"\n",
                       path, sizeof(path));
        snprintf(home, sizeof(home), "%s/home", dir);
        Manifest m = {};
        char *err = NULL;
        assert_int_equal(manifest_load(path, home, &m, &err), 0);
        assert_null(err);
        assert_int_equal(m.n_agents, 3);
        assert_string_equal(m.agents[0].name, "alpha");
        assert_string_equal(m.agents[0].profile, "shell");
        assert_int_equal(m.agents[0].argc, 3);
        /* Literal: no shell language is interpreted. */
        assert_string_equal(m.agents[0].argv[2], "echo $HOME; rm -rf / ; `x`");
        assert_null(m.agents[0].argv[3]);
        assert_string_equal(m.agents[0].workspace, dir);
        assert_int_equal(m.agents[0].pos.line, 1);
        assert_string_equal(m.agents[1].name, "beta-2");
        snprintf(want, sizeof(want), "%s/repo", dir);
        assert_string_equal(m.agents[1].workspace, want);
        snprintf(want, sizeof(want), "%s/home/src", dir);
        assert_string_equal(m.agents[2].workspace, want);
        manifest_done(&m);
}

/* What trust records: the canonical path of the file read and the SHA-256
 * of its bytes (sha256sum is the independent oracle); a symlink or a FIFO
 * refused without blocking. */
static void test_identity(void **state) {
        (void) state;
        char path[PATH_MAX + 16], cmd[PATH_MAX + 64], want[80] = "", link[PATH_MAX + 16];
        write_manifest("[agents.alpha]\nprofile = \"shell\"\ncommand = [\"true\"]\n", path, sizeof(path));
        snprintf(cmd, sizeof(cmd), "sha256sum '%s'", path);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        assert_non_null(fgets(want, 65, p));
        pclose(p);
        Manifest m = {};
        char *err = NULL, *canonical = NULL, sha[65];
        /* Named through "..": recorded by its canonical path. */
        snprintf(link, sizeof(link), "%s/repo/../m.toml", dir);
        assert_int_equal(manifest_load(link, NULL, &m, &err), 0);
        assert_string_equal(m.canonical, path);
        assert_string_equal(m.sha256, want);
        manifest_done(&m);
        assert_int_equal(manifest_identify(path, &canonical, sha, &err), 0);
        assert_string_equal(canonical, path);
        assert_string_equal(sha, want);
        free(canonical);

        snprintf(link, sizeof(link), "%s/link.toml", dir);
        assert_int_equal(symlink(path, link), 0);
        assert_int_equal(manifest_load(link, NULL, &m, &err), -EINVAL);
        assert_non_null(strstr(err, "is a symbolic link; a manifest must be a regular file"));
        free(err);
        snprintf(link, sizeof(link), "%s/fifo.toml", dir);
        assert_int_equal(mkfifo(link, 0600), 0);
        assert_int_equal(manifest_identify(link, &canonical, sha, &err), -EINVAL);
        assert_non_null(strstr(err, "is not a regular file"));
        free(err);
}

/* Issue 40, item 5: trust covers the directories the agents resolved to.
 * The same bytes with a workspace replaced by a symbolic link to another
 * directory give the same SHA-256 of the bytes but another trust digest;
 * the directory put back gives the first again. */
static void test_trust_digest(void **state) {
        (void) state;
        char path[PATH_MAX + 16], b[PATH_MAX + 16], other[PATH_MAX + 16], aside[PATH_MAX + 16];
        snprintf(b, sizeof(b), "%s/repo/b", dir);
        snprintf(other, sizeof(other), "%s/home/src", dir);
        snprintf(aside, sizeof(aside), "%s/repo/b.aside", dir);
        assert_int_equal(mkdir(b, 0700), 0);
        write_manifest("[agents.aa]\nprofile = \"shell\"\ncommand = [\"true\"]\nworkspace = \"repo\"\n"
                       "[agents.bb]\nprofile = \"shell\"\ncommand = [\"true\"]\nworkspace = \"repo/b\"\n",
                       path, sizeof(path));
        Manifest m = {};
        char *err = NULL, first[65], sha[65], now[65];
        assert_int_equal(manifest_load(path, NULL, &m, &err), 0);
        assert_int_equal(manifest_trust_digest(&m, first), 0);
        assert_int_equal(strlen(first), 64);
        assert_string_not_equal(first, m.sha256); /* not the bytes' alone */
        memcpy(sha, m.sha256, sizeof(sha));
        manifest_done(&m);

        /* The agent's swap: its directory moved aside, a symlink in its place. */
        assert_int_equal(rename(b, aside), 0);
        assert_int_equal(symlink(other, b), 0);
        assert_int_equal(manifest_load(path, NULL, &m, &err), 0);
        assert_string_equal(m.sha256, sha);
        assert_string_equal(m.agents[1].workspace, other);
        assert_int_equal(manifest_trust_digest(&m, now), 0);
        assert_string_not_equal(now, first);
        manifest_done(&m);

        /* Put back: trusted again. */
        assert_int_equal(unlink(b), 0);
        assert_int_equal(rename(aside, b), 0);
        assert_int_equal(manifest_load(path, NULL, &m, &err), 0);
        assert_int_equal(manifest_trust_digest(&m, now), 0);
        assert_string_equal(now, first);
        manifest_done(&m);
}

typedef struct Bad {
        const char *text;
        const char *want; /* in the error, after "PATH:" */
} Bad;

static void test_bad(void **state) {
        (void) state;
        static const Bad bad[] = {
                { "", ":1:1: no agents" },
                { "[agents]\n", ":1:1: no agents" },
                { "x = 1\n[agents.a1]\nprofile = \"p1\"\ncommand = [\"t\"]\n",
                  ":1:1: unknown key 'x' at the top level" },
                { "[agents.A]\nprofile = \"p1\"\ncommand = [\"t\"]\n", ":1:9: agent name 'A' must be 2 to 32" },
                { "[agents.a1]\nprofile = \"p1\"\ncommand = [\"t\"]\nshell = true\n",
                  ":4:1: unknown key 'shell' in agents.a1" },
                { "[agents.a1]\ncommand = [\"t\"]\n", ":1:9: agents.a1 has no profile" },
                { "[agents.a1]\nprofile = \"p1\"\n", ":1:9: agents.a1 has no command" },
                { "[agents.a1]\nprofile = 3\ncommand = [\"t\"]\n",
                  ":2:11: agents.a1.profile must be a profile's name" },
                { "[agents.a1]\nprofile = \"p1\"\ncommand = \"claude --yes\"\n",
                  ":3:11: agents.a1.command must be a non-empty array of strings" },
                { "[agents.a1]\nprofile = \"p1\"\ncommand = []\n", ":3:11: agents.a1.command must be a non-empty" },
                { "[agents.a1]\nprofile = \"p1\"\ncommand = [\"t\", 2]\n",
                  ":3:17: agents.a1.command[1] must be a string" },
                { "[agents.a1]\nprofile = \"p1\"\ncommand = [\"\"]\n",
                  ":3:12: agents.a1.command[0] must be a string without NUL bytes, and the program's name not empty" },
                { "[agents.a1]\nprofile = \"p1\"\ncommand = [\"t\"]\nworkspace = \"nowhere\"\n",
                  ":4:13: agents.a1.workspace: " },
                { "[agents.a1]\nprofile = \"p1\"\ncommand = [\"t\"]\nworkspace = \"m.toml\"\n", "not a directory" },
                { "[agents.a1]\nprofile = \"p1\"\ncommand = [\"t\"]\nworkspace = \"~/x\"\n",
                  ":4:13: agents.a1.workspace: " },
                { "agents = 3\n", ":1:10: no agents" },
                { "[agents.a1]\nprofile = \"p1\"\n[agents.a1]\n", ":3:" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char path[PATH_MAX + 16];
                write_manifest(bad[i].text, path, sizeof(path));
                Manifest m = {};
                char *err = NULL;
                int r = manifest_load(path, NULL, &m, &err);
                if (r >= 0 || !err || !strstr(err, bad[i].want) || strncmp(err, path, strlen(path)) != 0)
                        fail_msg("case %zu: %d, %s (wanted \"%s\")", i, r, err ?: "(no error)", bad[i].want);
                assert_int_equal(m.n_agents, 0);
                assert_null(m.agents);
                free(err);
        }
}

static void test_too_many(void **state) {
        (void) state;
        char text[8192] = "", path[PATH_MAX + 16];
        for (unsigned i = 0; i <= MANIFEST_AGENTS_MAX; i++) {
                char one[96];
                snprintf(one, sizeof(one), "[agents.a%u]\nprofile = \"p1\"\ncommand = [\"t\"]\n", i);
                strcat(text, one);
        }
        write_manifest(text, path, sizeof(path));
        Manifest m = {};
        char *err = NULL;
        assert_int_equal(manifest_load(path, NULL, &m, &err), -EINVAL);
        assert_non_null(strstr(err, "more than 32 agents"));
        free(err);
        snprintf(path, sizeof(path), "%s/none.toml", dir);
        assert_int_equal(manifest_load(path, NULL, &m, &err), -ENOENT);
        assert_non_null(strstr(err, "cannot read the manifest"));
        free(err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid),        cmocka_unit_test(test_bad),      cmocka_unit_test(test_identity),
                cmocka_unit_test(test_trust_digest), cmocka_unit_test(test_too_many),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
