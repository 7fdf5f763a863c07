/* SPDX-License-Identifier: MIT */
/* Unit tests of the host's safe git command line: every option that keeps
 * a repository's own configuration from running a program is there, before
 * the subcommand, and no GIT_* variable of ours survives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "argv-util.h"
#include "host-git.h"

static void test_argv(void **state) {
        (void) state;
        Argv a = {};
        host_git_argv(&a, "/w");
        argv_add(&a, "status");
        assert_false(a.oom);
        const char *want[] = { "git",
                               "-C",
                               "/w",
                               "-c",
                               "core.hooksPath=/dev/null",
                               "-c",
                               "core.fsmonitor=false",
                               "-c",
                               "log.showSignature=false",
                               "--no-pager",
                               "status",
                               NULL };
        for (size_t i = 0; want[i]; i++)
                assert_string_equal(a.v[i], want[i]);
        assert_null(a.v[ELEMENTSOF(want) - 1]);
        argv_done(&a);
}

static void test_environment(void **state) {
        (void) state;
        assert_int_equal(setenv("GIT_DIR", "/elsewhere", 1), 0);
        assert_int_equal(setenv("GIT_CONFIG_PARAMETERS", "'core.pager=evil'", 1), 0);
        assert_int_equal(setenv("GIT_EXTERNAL_DIFF", "/tmp/x", 1), 0);
        assert_int_equal(setenv("NOT_GIT_DIR", "kept", 1), 0);
        assert_int_equal(host_git_drop_environment(), 0);
        assert_null(getenv("GIT_DIR"));
        assert_null(getenv("GIT_CONFIG_PARAMETERS"));
        assert_null(getenv("GIT_EXTERNAL_DIFF"));
        assert_string_equal(getenv("NOT_GIT_DIR"), "kept");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_argv),
                cmocka_unit_test(test_environment),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
