/* SPDX-License-Identifier: MIT */
/* The control sockets' key files (shared/ctl-key, issue 41): made fresh,
 * read back only from a private regular file of ours holding a key, and
 * compared whole. */
#include <errno.h>
#include <fcntl.h>
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

#include "ctl-key.h"

static char dir[] = "/tmp/test-ctl-key-XXXXXX";

static char *in_dir(const char *name) {
        static char p[256];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        return p;
}

static void write_text(const char *path, const char *text, mode_t mode) {
        (void) unlink(path);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

static void test_path(void **state) {
        (void) state;
        char *p = ctl_key_path("/run/user/1000/lazaret/lazaret_coord_ab.sock");
        assert_string_equal(p, "/run/user/1000/lazaret/lazaret_coord_ab.key");
        free(p);
        p = ctl_key_path("/tmp/lazaret-1000/up-0123/sock");
        assert_string_equal(p, "/tmp/lazaret-1000/up-0123/sock.key");
        free(p);
}

static void test_create_read(void **state) {
        (void) state;
        char a[CTL_KEY_TEXT + 1], b[CTL_KEY_TEXT + 1], got[CTL_KEY_TEXT + 1];
        const char *p = in_dir("k.key");
        assert_int_equal(ctl_key_create(p, a), 0);
        assert_int_equal(strlen(a), CTL_KEY_TEXT);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(st.st_size, CTL_KEY_TEXT);
        assert_int_equal(ctl_key_read(p, got), 0);
        assert_string_equal(got, a);
        assert_true(ctl_key_equal(a, got));
        /* A new server, a new key: the old one no longer opens it. */
        assert_int_equal(ctl_key_create(p, b), 0);
        assert_string_not_equal(a, b);
        assert_false(ctl_key_equal(b, a));
        assert_int_equal(ctl_key_read(p, got), 0);
        assert_string_equal(got, b);
}

static void test_read_refuses(void **state) {
        (void) state;
        char got[CTL_KEY_TEXT + 1], key[CTL_KEY_TEXT + 1];
        const char *p = in_dir("r.key");
        assert_int_equal(ctl_key_read(in_dir("none.key"), got), -ENOENT);
        assert_int_equal(ctl_key_create(p, key), 0);
        /* Open to others: someone else could have read or written it. */
        assert_int_equal(chmod(p, 0640), 0);
        assert_int_equal(ctl_key_read(p, got), -EPERM);
        assert_int_equal(chmod(p, 0602), 0);
        assert_int_equal(ctl_key_read(p, got), -EPERM);
        assert_int_equal(chmod(p, 0600), 0);
        /* A symbolic link is never followed, even to a good key. */
        const char *l = in_dir("link.key");
        (void) unlink(l);
        assert_int_equal(symlink(p, l), 0);
        assert_int_equal(ctl_key_read(l, got), -EPERM);
        /* Not a key: short, long, upper case, not hex, a newline after. */
        const char *bad[] = {
                "",
                "0011",
                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeef",
                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0",
                "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff",
                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeegg",
                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                write_text(in_dir("bad.key"), bad[i], 0600);
                assert_int_equal(ctl_key_read(in_dir("bad.key"), got), -EBADMSG);
        }
        /* A directory is no key either. */
        (void) mkdir(in_dir("d.key"), 0700);
        assert_int_equal(ctl_key_read(in_dir("d.key"), got), -EPERM);
}

static void test_equal(void **state) {
        (void) state;
        const char *k = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        assert_true(ctl_key_equal(k, k));
        assert_false(ctl_key_equal(k, NULL));
        assert_false(ctl_key_equal(NULL, k));
        assert_false(ctl_key_equal(k, ""));
        assert_false(ctl_key_equal(k, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeef"));
        assert_false(ctl_key_equal(k, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0"));
        assert_false(ctl_key_equal(k, "10112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"));
        assert_false(ctl_key_equal(k, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeefe"));
        /* The server's key not made yet (empty): nothing matches it. */
        assert_false(ctl_key_equal("", ""));
}

int main(void) {
        assert_non_null(mkdtemp(dir));
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_path),
                cmocka_unit_test(test_create_read),
                cmocka_unit_test(test_read_refuses),
                cmocka_unit_test(test_equal),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void) !system(cmd);
        return r;
}
