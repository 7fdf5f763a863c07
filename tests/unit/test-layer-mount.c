/* SPDX-License-Identifier: MIT */
/* Unit tests of `lazaret __layer convert` (issue 44): a tree of changes in
 * fuse-overlayfs's form turned into the kernel overlay's, in place: `.wh.`
 * files into 0:0 whiteouts, `.wh..wh..opq` and fuse-overlayfs's opaque
 * attribute into user.overlay.opaque, a name beside its own whiteout kept;
 * a symbolic link to a directory outside is never followed (the tree is
 * what the agent wrote). And the persistent directories' measure counts
 * what they hold, not what they grew by. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "disk-watch.h"
#include "fd-util.h"
#include "layer-mount.h"
#include "path-util.h"
#include "string-util.h"

static char *at(const char *dir, const char *rel) {
        char *p = path_join(dir, rel);
        assert_non_null(p);
        return p;
}

static void touch(const char *dir, const char *rel) {
        _cleanup_free_ char *p = at(dir, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "x", 1), 1);
        close(fd);
}

static void mkd(const char *dir, const char *rel) {
        _cleanup_free_ char *p = at(dir, rel);
        assert_int_equal(mkdir(p, 0755), 0);
}

static bool is_whiteout(const char *dir, const char *rel) {
        _cleanup_free_ char *p = at(dir, rel);
        struct stat st;
        return lstat(p, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
}

static bool exists(const char *dir, const char *rel) {
        _cleanup_free_ char *p = at(dir, rel);
        struct stat st;
        return lstat(p, &st) == 0;
}

static bool opaque(const char *dir, const char *rel) {
        _cleanup_free_ char *p = at(dir, rel);
        char v[4] = {};
        return lgetxattr(p, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
}

static void test_convert(void **state) {
        (void) state;
        char base[] = "/tmp/lazaret-layer-XXXXXX";
        assert_non_null(mkdtemp(base));
        _cleanup_free_ char *dir = at(base, "changes"), *outside = at(base, "outside");
        assert_int_equal(mkdir(dir, 0755), 0);
        assert_int_equal(mkdir(outside, 0755), 0);
        mkd(dir, "bin");
        touch(dir, "bin/.wh.env");
        touch(dir, "bin/kept");
        touch(dir, "bin/.wh.kept"); /* the name wins over its whiteout */
        mkd(dir, "lib");
        mkd(dir, "lib/again");
        touch(dir, "lib/again/.wh..wh..opq");
        touch(dir, "lib/again/new");
        mkd(dir, "share");
        _cleanup_free_ char *share = at(dir, "share");
        if (setxattr(share, "user.fuseoverlayfs.opaque", "y", 1, 0) < 0) {
                fprintf(stderr, "SKIP test_convert: /tmp keeps no user extended attributes here (%m); the "
                                "conversion needs them\n");
                skip();
        }
        /* A link out of the tree, with a .wh. file behind it: untouched. */
        _cleanup_free_ char *victim = at(outside, ".wh.victim"), *link = at(dir, "out");
        int fd = open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(symlink(outside, link), 0);

        char *argv[] = { (char *) "convert", dir, NULL };
        assert_int_equal(layer_helper_main(2, argv), 0);

        assert_true(is_whiteout(dir, "bin/env"));
        assert_false(exists(dir, "bin/.wh.env"));
        assert_true(exists(dir, "bin/kept") && !is_whiteout(dir, "bin/kept"));
        assert_false(exists(dir, "bin/.wh.kept"));
        assert_true(opaque(dir, "lib/again"));
        assert_false(exists(dir, "lib/again/.wh..wh..opq"));
        assert_true(exists(dir, "lib/again/new"));
        assert_true(opaque(dir, "share"));
        assert_false(opaque(dir, "bin"));
        char v[4];
        assert_true(lgetxattr(share, "user.fuseoverlayfs.opaque", v, sizeof(v)) < 0);
        assert_true(exists(outside, ".wh.victim"));
        assert_false(exists(outside, "victim"));

        /* Run again: nothing left to change. */
        assert_int_equal(layer_helper_main(2, argv), 0);
        assert_true(is_whiteout(dir, "bin/env"));

        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
        assert_int_equal(system(cmd), 0);
}

static void test_absolute_measure(void **state) {
        (void) state;
        DiskWatch w = DISKWATCH_INIT;
        w.have_base = true;
        w.base = 100 << 20;
        w.used = 150 << 20;
        assert_int_equal(diskwatch_grown(&w), 50 << 20);
        w.absolute = true;
        assert_int_equal(diskwatch_grown(&w), 150 << 20);
        w.have_base = false;
        assert_int_equal(diskwatch_grown(&w), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_convert),
                cmocka_unit_test(test_absolute_measure),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
