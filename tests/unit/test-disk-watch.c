/* SPDX-License-Identifier: MIT */
/* Unit tests of the work files' measure (disk_limit, issue 16): what a
 * tree takes on disk, against GNU du as an independent oracle; a file
 * with two links counted once, a sparse file by its blocks, a symlink not
 * followed, a tree that is not there counted as nothing. */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "disk-watch.h"
#include "fd-util.h"
#include "path-util.h"
#include "string-util.h"

static char dir[] = "/tmp/lazaret-diskwatch-XXXXXX";

static void write_bytes(const char *name, size_t n) {
        _cleanup_free_ char *p = path_join(dir, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        char buf[4096];
        memset(buf, 'x', sizeof(buf));
        for (size_t done = 0; done < n; done += sizeof(buf))
                assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t) sizeof(buf));
        assert_int_equal(fsync(fd), 0);
        close(fd);
}

static uint64_t du(const char *path) {
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof(cmd), "du -s -x -B1 '%s'", path);
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        unsigned long long v = 0;
        assert_int_equal(fscanf(f, "%llu", &v), 1);
        assert_int_equal(pclose(f), 0);
        return v;
}

static void test_measure_against_du(void **state) {
        (void) state;
        assert_non_null(mkdtemp(dir));
        write_bytes("a", 1 << 20);
        _cleanup_free_ char *a = path_join(dir, "a"), *b = path_join(dir, "b"), *c = path_join(dir, "c"),
                            *d = path_join(dir, "sparse"), *sub = path_join(dir, "sub");
        assert_int_equal(link(a, b), 0);
        assert_int_equal(symlink("/usr", c), 0);
        int fd = open(d, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 100 << 20), 0);
        close(fd);
        assert_int_equal(mkdir(sub, 0755), 0);
        write_bytes("sub/f", 512 << 10);

        char *paths[] = { dir, NULL };
        uint64_t bytes = 0, unreadable = 99;
        assert_int_equal(diskwatch_measure(paths, &bytes, &unreadable), 0);
        assert_int_equal(unreadable, 0);
        assert_int_equal(bytes, du(dir));
        /* 1 MiB once (two links), half a MiB, the sparse file's few
         * blocks, the directories: well under 2 MiB. */
        assert_true(bytes >= (3u << 19) && bytes < (2u << 20));

        /* Measured twice, the same (the link table starts over). */
        uint64_t again = 0;
        assert_int_equal(diskwatch_measure(paths, &again, NULL), 0);
        assert_int_equal(again, bytes);

        /* Two trees: the sum; one not there: nothing. */
        char *two[] = { dir, (char *) "/nonexistent/lazaret", NULL };
        assert_int_equal(diskwatch_measure(two, &again, NULL), 0);
        assert_int_equal(again, bytes);

        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
}

/* Issue 41: a file unlinked while held open takes the disk all the same;
 * it is counted until the last descriptor closes. Others on the same file
 * system (this host's) may be there too: the difference is what counts. */
static void test_unlinked_open_file(void **state) {
        (void) state;
        char tmpl[] = "/tmp/test-disk-watch-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        char *paths[] = { tmpl, NULL };
        uint64_t before = 0, held = 0, after = 0;
        pid_t me = getpid();
        assert_int_equal(diskwatch_unlinked(paths, &me, 1, &before), 0);
        _cleanup_free_ char *f = path_join(tmpl, "h");
        int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(unlink(f), 0);
        char buf[64 << 10] = { 1 };
        for (int i = 0; i < 64; i++) /* 4 MiB, written */
                assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t) sizeof(buf));
        assert_int_equal(fsync(fd), 0);
        int fd2 = dup(fd); /* one inode, counted once */
        assert_true(fd2 >= 0);
        assert_int_equal(diskwatch_unlinked(paths, &me, 1, &held), 0);
        assert_true(held >= before + (4u << 20));
        /* The walk does not find it. */
        uint64_t walked = 0;
        assert_int_equal(diskwatch_measure(paths, &walked, NULL), 0);
        assert_true(walked < (1u << 20));
        close(fd);
        close(fd2);
        assert_int_equal(diskwatch_unlinked(paths, &me, 1, &after), 0);
        assert_true(after < held);
        assert_int_equal(rmdir(tmpl), 0);
}

/* Only the roots' trees count: a file another program holds on the same
 * file system is not the sandbox's (a person's browser deleting its
 * cache must not stop the agent); a child of a root's is. */
static void test_unlinked_only_of_the_roots_trees(void **state) {
        (void) state;
        char tmpl[] = "/tmp/test-disk-watch-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        char *paths[] = { tmpl, NULL };
        int ready[2];
        assert_int_equal(pipe(ready), 0);
        /* holder: a child of ours that holds 4 MiB unlinked; other: a
         * child of ours that holds nothing, the root of its own tree. */
        pid_t holder = fork();
        assert_true(holder >= 0);
        if (holder == 0) {
                _cleanup_free_ char *f = path_join(tmpl, "h");
                int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                if (fd < 0 || unlink(f) < 0)
                        _exit(1);
                char buf[64 << 10] = { 1 };
                for (int i = 0; i < 64; i++)
                        if (write(fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf))
                                _exit(1);
                (void) fsync(fd);
                (void) !write(ready[1], "r", 1);
                pause();
                _exit(0);
        }
        pid_t other = fork();
        assert_true(other >= 0);
        if (other == 0) {
                pause();
                _exit(0);
        }
        char c;
        assert_int_equal(read(ready[0], &c, 1), 1);
        uint64_t mine = 0, others = 0, holders = 0;
        pid_t me = getpid();
        assert_int_equal(diskwatch_unlinked(paths, &me, 1, &mine), 0); /* the holder descends from us */
        assert_int_equal(diskwatch_unlinked(paths, &other, 1, &others), 0);
        assert_int_equal(diskwatch_unlinked(paths, &holder, 1, &holders), 0);
        assert_true(mine >= (4u << 20));
        assert_true(holders >= (4u << 20));
        assert_true(others < (4u << 20)); /* not its tree's */
        (void) kill(holder, SIGKILL);
        (void) kill(other, SIGKILL);
        (void) waitpid(holder, NULL, 0);
        (void) waitpid(other, NULL, 0);
        close(ready[0]);
        close(ready[1]);
        assert_int_equal(rmdir(tmpl), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_measure_against_du),
                cmocka_unit_test(test_unlinked_open_file),
                cmocka_unit_test(test_unlinked_only_of_the_roots_trees),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
