/* SPDX-License-Identifier: MIT */
/* Unit tests of src/git/git-object: loose objects are admitted only with
 * the content their name says. The IDs were computed by git hash-object
 * (the oracle), the files are made here with zlib. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "git-object.h"

#define HELLO_SHA1   "ce013625030ba8dba906f756967f9e9ca394464a"
#define HELLO_SHA256 "2cf8d83d9ee29543b34a87727421fdecb7e3f3a183d337639025de576db9ebb4"
/* 100000 bytes, byte i = (7i + 3) mod 251: more than one read and one
 * inflate buffer. */
#define BIG_SHA1 "d4dea3f0223df5241b578c8c9a75b6d0de0d1b17"

/* A memfd holding zlib(raw) followed by extra bytes. */
static int file_of(const void *raw, size_t n, const void *extra, size_t n_extra) {
        uLongf zn = compressBound((uLong) n);
        unsigned char *z = malloc(zn);
        assert_non_null(z);
        assert_int_equal(compress(z, &zn, raw, (uLong) n), Z_OK);
        int fd = memfd_create("obj", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, z, zn), (ssize_t) zn);
        if (n_extra)
                assert_int_equal(write(fd, extra, n_extra), (ssize_t) n_extra);
        free(z);
        return fd;
}

static int verify(const char *raw, size_t n, const char *hex) {
        int fd = file_of(raw, n, NULL, 0);
        int r = git_object_verify_loose(fd, hex);
        close(fd);
        return r;
}

#define LIT(s) s, sizeof(s) - 1

static void test_true_objects(void **state) {
        (void) state;
        assert_int_equal(verify(LIT("blob 6\0hello\n"), HELLO_SHA1), 0);
        assert_int_equal(verify(LIT("blob 6\0hello\n"), HELLO_SHA256), 0);

        size_t n = 100000, h = sizeof "blob 100000";
        char *raw = malloc(h + n);
        assert_non_null(raw);
        memcpy(raw, "blob 100000", h); /* with its NUL */
        for (size_t i = 0; i < n; i++)
                raw[h + i] = (char) ((i * 7 + 3) % 251);
        assert_int_equal(verify(raw, h + n, BIG_SHA1), 0);
        /* One byte changed at the end: another ID. */
        raw[h + n - 1] ^= 1;
        assert_int_equal(verify(raw, h + n, BIG_SHA1), -EBADMSG);
        free(raw);
}

static void test_lies(void **state) {
        (void) state;
        /* Other content under the name. */
        assert_int_equal(verify(LIT("blob 5\0evil\n"), HELLO_SHA1), -EBADMSG);
        /* The same bytes as another type. */
        assert_int_equal(verify(LIT("tree 6\0hello\n"), HELLO_SHA1), -EBADMSG);
        /* A header git would read but never write. */
        assert_int_equal(verify(LIT("blob 06\0hello\n"), HELLO_SHA1), -EBADMSG);
        assert_int_equal(verify(LIT("blob +6\0hello\n"), HELLO_SHA1), -EBADMSG);
        assert_int_equal(verify(LIT("blobx 6\0hello\n"), HELLO_SHA1), -EBADMSG);
        assert_int_equal(verify(LIT("blob6\0hello\n"), HELLO_SHA1), -EBADMSG);
        /* Sizes that do not match the payload. */
        assert_int_equal(verify(LIT("blob 5\0hello\n"), HELLO_SHA1), -EBADMSG);
        assert_int_equal(verify(LIT("blob 7\0hello\n"), HELLO_SHA1), -EBADMSG);
        /* No header end. */
        assert_int_equal(verify(LIT("blob 6 hello this goes on and on and on and on"), HELLO_SHA1), -EBADMSG);

        /* Bytes after the stream. */
        int fd = file_of(LIT("blob 6\0hello\n"), "x", 1);
        assert_int_equal(git_object_verify_loose(fd, HELLO_SHA1), -EBADMSG);
        close(fd);
        /* A stream cut short. */
        fd = file_of(LIT("blob 6\0hello\n"), NULL, 0);
        off_t size = lseek(fd, 0, SEEK_END);
        assert_int_equal(ftruncate(fd, size - 3), 0);
        assert_int_equal(git_object_verify_loose(fd, HELLO_SHA1), -EBADMSG);
        close(fd);
        /* Not zlib at all. */
        fd = memfd_create("obj", MFD_CLOEXEC);
        assert_int_equal(write(fd, "blob 6\0hello\n", 13), 13);
        assert_int_equal(git_object_verify_loose(fd, HELLO_SHA1), -EBADMSG);
        /* Empty. */
        assert_int_equal(ftruncate(fd, 0), 0);
        assert_int_equal(git_object_verify_loose(fd, HELLO_SHA1), -EBADMSG);
        close(fd);
}

static void test_names(void **state) {
        (void) state;
        int fd = file_of(LIT("blob 6\0hello\n"), NULL, 0);
        assert_int_equal(git_object_verify_loose(fd, "CE013625030BA8DBA906F756967F9E9CA394464A"), -EINVAL);
        assert_int_equal(git_object_verify_loose(fd, "ce013625030ba8dba906f756967f9e9ca394464"), -EINVAL);
        assert_int_equal(git_object_verify_loose(fd, HELLO_SHA1 "0"), -EINVAL);
        assert_int_equal(git_object_verify_loose(fd, ""), -EINVAL);
        assert_int_equal(git_object_verify_loose(fd, NULL), -EINVAL);
        assert_int_equal(git_object_verify_loose(-1, HELLO_SHA1), -EINVAL);
        /* The file's own offset is not used or moved. */
        assert_int_equal(lseek(fd, 0, SEEK_CUR), lseek(fd, 0, SEEK_END));
        assert_int_equal(git_object_verify_loose(fd, HELLO_SHA1), 0);
        close(fd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_true_objects),
                cmocka_unit_test(test_lies),
                cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
