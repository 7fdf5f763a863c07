/* SPDX-License-Identifier: MIT */
/* Unit tests of integrity_check_fd(): digests computed independently
 * (Python's hashlib, written down here), a mismatch names the file's own
 * digest, and anything but a well-formed sha512 string is refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "integrity.h"
#include "macro.h"

#define ABC   "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw=="
#define EMPTY "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="
/* 200000 times 'x': more than one read. */
#define XS "sha512-gQxNjkvGnCdSMvTkW01s3n/zfC3s3SF/4/pQKgGeJUrTrdyrt/f4NLYoGri2ZEEQLYb26DuUQV51eicZQAudEQ=="

static int file_with(const void *data, size_t n) {
        int fd = memfd_create("integrity", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, n), (ssize_t) n);
        return fd; /* at its end: the check reads from the start */
}

static void test_match(void **state) {
        (void) state;
        int fd = file_with("abc", 3);
        assert_int_equal(integrity_check_fd(fd, ABC, NULL), 1);
        close(fd);
        fd = file_with("", 0);
        assert_int_equal(integrity_check_fd(fd, EMPTY, NULL), 1);
        close(fd);
        char *big = malloc(200000);
        assert_non_null(big);
        memset(big, 'x', 200000);
        fd = file_with(big, 200000);
        assert_int_equal(integrity_check_fd(fd, XS, NULL), 1);
        close(fd);
        free(big);
}

static void test_mismatch(void **state) {
        (void) state;
        int fd = file_with("abd", 3);
        char *actual = NULL;
        assert_int_equal(integrity_check_fd(fd, ABC, &actual), 0);
        assert_non_null(actual);
        assert_true(strncmp(actual, "sha512-", 7) == 0 && strlen(actual) == 7 + 88);
        assert_string_not_equal(actual, ABC);
        free(actual);
        /* One bit of the digest changed. */
        char one_off[] = ABC;
        one_off[7] = one_off[7] == '3' ? '2' : '3';
        assert_int_equal(integrity_check_fd(fd, one_off, NULL), 0);
        close(fd);
        fd = file_with("abc", 3);
        assert_int_equal(integrity_check_fd(fd, one_off, NULL), 0);
        close(fd);
}

static void test_malformed(void **state) {
        (void) state;
        int fd = file_with("abc", 3);
        const char *bad[] = {
                NULL,
                "",
                "sha512-",
                "sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=",
                "SHA512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw==",
                /* no padding, one character short, one too many, a bad character */
                "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw",
                "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUykn==",
                "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknww==",
                "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUy-nw==",
                " sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw==",
                ABC " ",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(integrity_check_fd(fd, bad[i], NULL), -EINVAL);
        close(fd);
        /* Not a file one can read. */
        assert_true(integrity_check_fd(-1, ABC, NULL) < 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_match),
                cmocka_unit_test(test_mismatch),
                cmocka_unit_test(test_malformed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
