/* SPDX-License-Identifier: MIT */
/* Unit tests of coordinator/sidecar's check of netd's attestation: the
 * digest sent, the routes read back, and routes made for the stack that
 * reads them (gVisor's own stack ignores the kernel style's prohibit
 * routes, so a deny rule inside an allowed prefix would be reachable). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "sidecar.h"

static const char *const DIGEST = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

static json_t *attestation(const char *digest, const char *routes_for, bool attested) {
        json_t *a = json_pack("{s:s, s:s, s:{s:b}}", "type", "attestation", "derived_policy_digest", digest,
                              "observation", "routes_attested", attested);
        assert_non_null(a);
        if (routes_for)
                assert_int_equal(json_object_set_new(a, "routes_for", json_string(routes_for)), 0);
        return a;
}

static int check(json_t *a, bool kernel_stack, char **ret_error) {
        *ret_error = NULL;
        int r = sidecar_check_attestation(a, DIGEST, kernel_stack, ret_error);
        json_decref(a);
        return r;
}

static void test_routes_for_the_stack_that_reads_them(void **state) {
        (void) state;
        char *e;
        assert_int_equal(check(attestation(DIGEST, "kernel", true), true, &e), 0);
        assert_null(e);
        assert_int_equal(check(attestation(DIGEST, "gvisor", true), false, &e), 0);
        assert_null(e);
        /* The kernel's style for gVisor's own stack: refused, naming both. */
        assert_int_equal(check(attestation(DIGEST, "kernel", true), false, &e), -EPROTO);
        assert_non_null(strstr(e, "for the kernel's stack, not for gVisor's"));
        free(e);
        assert_int_equal(check(attestation(DIGEST, "gvisor", true), true, &e), -EPROTO);
        assert_non_null(strstr(e, "for gVisor's stack, not for the kernel's"));
        free(e);
        /* A netd that does not say (an older one): refused either way. */
        assert_int_equal(check(attestation(DIGEST, NULL, true), false, &e), -EPROTO);
        free(e);
        assert_int_equal(check(attestation(DIGEST, "other", true), true, &e), -EPROTO);
        free(e);
}

static void test_digest_and_routes_still_checked(void **state) {
        (void) state;
        char *e;
        assert_int_equal(check(attestation("bbbb", "kernel", true), true, &e), -EPROTO);
        assert_non_null(strstr(e, "not the one sent"));
        free(e);
        assert_int_equal(check(attestation(DIGEST, "kernel", false), true, &e), -EPROTO);
        assert_non_null(strstr(e, "could not attest the routes"));
        free(e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_routes_for_the_stack_that_reads_them),
                cmocka_unit_test(test_digest_and_routes_still_checked),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
