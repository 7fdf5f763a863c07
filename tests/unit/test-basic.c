/* SPDX-License-Identifier: MIT */
/* Unit tests of src/basic: strbuf, path-util, fileio. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd-util.h"
#include "fileio.h"
#include "path-util.h"
#include "proc-util.h"
#include "strbuf.h"
#include "string-util.h"

static void test_strbuf(void **state) {
        (void) state;
        StrBuf b = STRBUF_INIT;
        assert_string_equal(strbuf_str(&b), "");
        strbuf_puts(&b, "abc");
        strbuf_putc(&b, '-');
        strbuf_printf(&b, "%d/%s", 42, "x");
        assert_string_equal(strbuf_str(&b), "abc-42/x");
        assert_int_equal(b.len, 8);
        for (int i = 0; i < 1000; i++)
                strbuf_putc(&b, 'y');
        assert_int_equal(b.len, 1008);
        char *s = strbuf_steal(&b);
        assert_non_null(s);
        assert_int_equal(strlen(s), 1008);
        assert_null(b.data);
        free(s);

        s = strbuf_steal(&b);
        assert_string_equal(s, "");
        free(s);

        /* Room written by the caller: only what it says it wrote counts. */
        strbuf_puts(&b, "ab");
        char *p = strbuf_room(&b, 5000);
        assert_non_null(p);
        memcpy(p, "cdefgh", 6);
        strbuf_grew(&b, 3);
        assert_string_equal(strbuf_str(&b), "abcde");
        assert_int_equal(b.len, 5);
        assert_true(b.cap >= 5002);
        strbuf_done(&b);
}

static void test_path_has_dotdot(void **state) {
        (void) state;
        assert_true(path_has_dotdot(".."));
        assert_true(path_has_dotdot("/a/../b"));
        assert_true(path_has_dotdot("a/.."));
        assert_true(path_has_dotdot("/a//..//b"));
        assert_true(path_has_dotdot("../"));
        assert_false(path_has_dotdot("/a/..b/c"));
        assert_false(path_has_dotdot("/a/b../c"));
        assert_false(path_has_dotdot("/a/.../c"));
        assert_false(path_has_dotdot("/a/./c"));
        assert_false(path_has_dotdot(""));
        assert_false(path_has_dotdot("/"));
}

static void test_path_join(void **state) {
        (void) state;
        const struct {
                const char *a, *b, *want;
        } cases[] = {
                { "/a", "b", "/a/b" }, { "/a/", "b", "/a/b" }, { "/a//", "/b", "/a/b" },
                { "/", "b", "/b" },    { "/a", "", "/a/" },    { "rel", "x/y", "rel/x/y" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *j = path_join(cases[i].a, cases[i].b);
                assert_non_null(j);
                assert_string_equal(j, cases[i].want);
                free(j);
        }
}

static char tmpdir[64];

static int setup_tmp(void **state) {
        (void) state;
        strcpy(tmpdir, "/tmp/lazaret-unit-XXXXXX");
        return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state) {
        (void) state;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

static void test_read_file_capped(void **state) {
        (void) state;
        char p[128], *data = NULL;
        size_t n = 0;
        snprintf(p, sizeof(p), "%s/f", tmpdir);

        assert_int_equal(write_file_atomic(p, "hello\0world", 11, 0600, 1), 0);
        assert_int_equal(read_file_capped(p, 11, &data, &n), 0);
        assert_int_equal(n, 11);
        assert_memory_equal(data, "hello\0world", 11);
        assert_int_equal(data[11], '\0');
        free(data);

        data = NULL;
        assert_int_equal(read_file_capped(p, 10, &data, &n), -EFBIG);
        assert_null(data);

        /* Exclusive creation refuses an existing file and leaves it alone. */
        assert_int_equal(write_file_atomic(p, "x", 1, 0600, 1), -EEXIST);
        assert_int_equal(read_file_capped(p, 100, &data, &n), 0);
        assert_int_equal(n, 11);
        free(data);
        assert_int_equal(write_file_atomic(p, "x", 1, 0640, 0), 0);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_int_equal(st.st_size, 1);

        /* Directories and FIFOs are refused without blocking. */
        assert_int_equal(read_file_capped(tmpdir, 100, &data, &n), -EISDIR);
        char fifo[128];
        snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        assert_int_equal(read_file_capped(fifo, 100, &data, &n), -EINVAL);

        char missing[128];
        snprintf(missing, sizeof(missing), "%s/missing", tmpdir);
        assert_int_equal(read_file_capped(missing, 100, &data, &n), -ENOENT);
}

static void test_canonicalize(void **state) {
        (void) state;
        char link[128], target[128], *c = NULL;
        snprintf(target, sizeof(target), "%s/real", tmpdir);
        snprintf(link, sizeof(link), "%s/link", tmpdir);
        assert_int_equal(mkdir(target, 0700), 0);
        assert_int_equal(symlink(target, link), 0);
        assert_int_equal(path_canonicalize(link, &c), 0);
        assert_string_equal(c, target);
        free(c);
}

static void mk(const char *rel, const char *what) {
        char p[256];
        snprintf(p, sizeof(p), "%s%s", tmpdir, rel);
        if (streq(what, "dir"))
                assert_int_equal(mkdir(p, 0700), 0);
        else if (streq(what, "file"))
                assert_int_equal(write_file_atomic(p, "gitdir: /elsewhere\n", 19, 0600, 1), 0);
        else
                assert_int_equal(symlink(what, p), 0);
}

static void expect_top(const char *rel, int want, const char *want_top_rel, bool want_dir) {
        char dir[256], top_want[256];
        snprintf(dir, sizeof(dir), "%s%s", tmpdir, rel);
        snprintf(top_want, sizeof(top_want), "%s%s", tmpdir, want_top_rel ? want_top_rel : "");
        char *top = NULL;
        bool is_dir = !want_dir;
        assert_int_equal(path_find_git_top(dir, &top, &is_dir), want);
        if (want > 0) {
                assert_string_equal(top, top_want);
                assert_true(is_dir == want_dir);
        } else
                assert_null(top);
        free(top);
}

static void test_find_git_top(void **state) {
        (void) state;
        /* repo/.git (directory), repo/a/b; repo/wt/.git (a worktree's file);
         * repo/ln/.git a symlink to a directory (not followed: not a
         * directory); repo/a/.git/x (a directory inside .git). */
        mk("/repo", "dir");
        mk("/repo/.git", "dir");
        mk("/repo/.git/x", "dir");
        mk("/repo/a", "dir");
        mk("/repo/a/b", "dir");
        mk("/repo/wt", "dir");
        mk("/repo/wt/.git", "file");
        mk("/repo/wt/sub", "dir");
        mk("/repo/ln", "dir");
        mk("/repo/ln/.git", "/tmp");
        mk("/plain", "dir");

        expect_top("/repo", 1, "/repo", true);
        expect_top("/repo/a/b", 1, "/repo", true);
        expect_top("/repo/a/b/", 1, "/repo", true);
        expect_top("/repo/.git/x", 1, "/repo", true);
        expect_top("/repo/wt/sub", 1, "/repo/wt", false);
        expect_top("/repo/ln", 1, "/repo/ln", false);
        /* Nothing above a plain directory, unless this machine has a /.git
         * or /tmp/.git of its own. */
        struct stat st;
        if (lstat("/.git", &st) < 0 && lstat("/tmp/.git", &st) < 0)
                expect_top("/plain", 0, NULL, false);

        char *top = NULL;
        bool d = false;
        assert_int_equal(path_find_git_top("relative/dir", &top, &d), -EINVAL);
        assert_null(top);

        assert_string_equal(path_under("/a/b/c", "/a/b"), "c");
        assert_string_equal(path_under("/a/b", "/a/b"), "");
        assert_string_equal(path_under("/a/b", "/"), "a/b");
        assert_null(path_under("/a/bc", "/a/b"));
        assert_null(path_under("/a", "/a/b"));
}

static void test_relative_safe(void **state) {
        (void) state;
        static const char *const good[] = { "a", "a/b", "src/lazaret", "é/ü", "a b", ".hidden/x", "..x", "x..", NULL };
        static const char *const bad[] = { "",      "/a",  "a/",   "a//b", ".",     "..",       "a/..",      "../a",
                                           "a/./b", "a/.", "a\nb", "a\tb", "a\x7f", "\x1b[31m", "a\xc2\x85", NULL };
        for (const char *const *p = good; *p; p++)
                assert_true(path_relative_safe(*p, 64));
        for (const char *const *p = bad; *p; p++)
                assert_false(path_relative_safe(*p, 64));
        assert_true(path_relative_safe("abcd", 4));
        assert_false(path_relative_safe("abcde", 4));
}

static void test_safe_close(void **state) {
        (void) state;
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        fd = safe_close(fd);
        assert_int_equal(fd, -EBADF);
        assert_int_equal(safe_close(-1), -EBADF);
}

/* proc_children: the processes this thread forked, and none once they
 * are gone. */
static void test_proc_children(void **state) {
        (void) state;
        pid_t kids[3];
        for (int i = 0; i < 3; i++) {
                kids[i] = fork();
                assert_true(kids[i] >= 0);
                if (kids[i] == 0) {
                        pause();
                        _exit(0);
                }
        }
        pid_t *v = NULL;
        size_t n = 0;
        assert_int_equal(proc_children(getpid(), getpid(), &v, &n), 0);
        assert_int_equal(n, 3);
        for (int i = 0; i < 3; i++) {
                bool found = false;
                for (size_t k = 0; k < n; k++)
                        found |= v[k] == kids[i];
                assert_true(found);
        }
        free(v);
        for (int i = 0; i < 3; i++) {
                kill(kids[i], SIGKILL);
                waitpid(kids[i], NULL, 0);
        }
        v = NULL;
        assert_int_equal(proc_children(getpid(), getpid(), &v, &n), 0);
        assert_int_equal(n, 0);
        free(v);
        assert_int_equal(proc_children(0, 0, &v, &n), -ENOENT);
}

/* open_pinned_dir: the directory at a canonical path as long as it is the
 * one pinned; a symbolic link anywhere in the path, or another directory
 * put there, is refused. */
/* path_resolve_no_links_in: links followed but for those inside a root
 * (whoever writes the root may have made them), ".." and relative link
 * targets resolved, a missing name and loops refused. */
static void test_path_resolve_no_links_in(void **state) {
        (void) state;
        _cleanup_free_ char *base = NULL;
        assert_int_equal(path_canonicalize(tmpdir, &base), 0);
        char ws[200], cache[256], secret[256], outside[256], p[600], want[8];
        snprintf(ws, sizeof ws, "%s/rws", base);
        snprintf(cache, sizeof cache, "%s/cache", ws);
        snprintf(secret, sizeof secret, "%s/rsecret", base);
        snprintf(outside, sizeof outside, "%s/rlink", base);
        assert_int_equal(mkdir(ws, 0700), 0);
        assert_int_equal(mkdir(cache, 0700), 0);
        assert_int_equal(mkdir(secret, 0700), 0);
        char *roots[] = { ws };
        _cleanup_free_ char *canon = NULL, *link = NULL;
        size_t root = 9;

        /* No link at all: the path itself. */
        assert_int_equal(path_resolve_no_links_in(cache, roots, 1, &canon, &link, &root), 0);
        assert_string_equal(canon, cache);
        canon = mfree(canon);
        /* A link outside the roots is followed (relative target), and ".". */
        assert_int_equal(symlink("rws", outside), 0);
        snprintf(p, sizeof p, "%s/./cache", outside);
        assert_int_equal(path_resolve_no_links_in(p, roots, 1, &canon, &link, &root), 0);
        assert_string_equal(canon, cache);
        canon = mfree(canon);
        /* ".." in a link's target. */
        snprintf(p, sizeof p, "%s/up", base);
        assert_int_equal(symlink("rws/../rsecret", p), 0);
        assert_int_equal(path_resolve_no_links_in(p, roots, 1, &canon, &link, &root), 0);
        assert_string_equal(canon, secret);
        canon = mfree(canon);
        /* The volume made a link inside the root: not followed, named. */
        assert_int_equal(rmdir(cache), 0);
        assert_int_equal(symlink(secret, cache), 0);
        assert_int_equal(path_resolve_no_links_in(cache, roots, 1, &canon, &link, &root), 1);
        assert_string_equal(link, cache);
        assert_int_equal(root, 0);
        assert_null(canon);
        link = mfree(link);
        /* Reached through the outside link, the same. */
        snprintf(p, sizeof p, "%s/cache/x", outside);
        assert_int_equal(path_resolve_no_links_in(p, roots, 1, &canon, &link, &root), 1);
        assert_string_equal(link, cache);
        link = mfree(link);
        /* With no roots it is followed: the link's target. */
        assert_int_equal(path_resolve_no_links_in(cache, NULL, 0, &canon, &link, &root), 0);
        assert_string_equal(canon, secret);
        canon = mfree(canon);
        /* Missing, looping, relative. */
        snprintf(p, sizeof p, "%s/missing/x", base);
        assert_int_equal(path_resolve_no_links_in(p, roots, 1, &canon, &link, &root), -ENOENT);
        snprintf(p, sizeof p, "%s/loop", base);
        assert_int_equal(symlink("loop", p), 0);
        assert_int_equal(path_resolve_no_links_in(p, NULL, 0, &canon, &link, &root), -ELOOP);
        assert_int_equal(path_resolve_no_links_in("rel", roots, 1, &canon, &link, &root), -EINVAL);
        snprintf(want, sizeof want, "%s", "/");
        assert_int_equal(path_resolve_no_links_in("/", roots, 1, &canon, &link, &root), 0);
        assert_string_equal(canon, want);
}

static void test_open_pinned_dir(void **state) {
        (void) state;
        char ws[160], parent[96], link[96], secret[128], moved[200];
        snprintf(parent, sizeof parent, "%s/p", tmpdir);
        snprintf(ws, sizeof ws, "%s/ws", parent);
        snprintf(secret, sizeof secret, "%s/secret", tmpdir);
        snprintf(moved, sizeof moved, "%s/ws.real", parent);
        assert_int_equal(mkdir(parent, 0700), 0);
        assert_int_equal(mkdir(ws, 0700), 0);
        assert_int_equal(mkdir(secret, 0700), 0);

        char id[FD_IDENTITY_MAX], again[FD_IDENTITY_MAX];
        int fd = -EBADF;
        assert_int_equal(open_pinned_dir(ws, NULL, &fd, id), 0);
        assert_true(fd >= 0);
        assert_int_equal(fd_identity(fd, again), 0);
        assert_string_equal(id, again);
        fd = safe_close(fd);
        assert_int_equal(open_pinned_dir(ws, id, NULL, NULL), 0);
        assert_int_equal(open_pinned_dir("relative/path", NULL, NULL, NULL), -EINVAL);

        /* Swapped for a link to another directory. */
        assert_int_equal(rename(ws, moved), 0);
        assert_int_equal(symlink(secret, ws), 0);
        assert_int_equal(open_pinned_dir(ws, NULL, NULL, NULL), -ELOOP);
        assert_int_equal(open_pinned_dir(ws, id, NULL, NULL), -ELOOP);
        /* A link higher up the path. */
        assert_int_equal(unlink(ws), 0);
        assert_int_equal(rename(moved, ws), 0);
        snprintf(link, sizeof link, "%s/l", tmpdir);
        assert_int_equal(symlink("p", link), 0);
        snprintf(moved, sizeof moved, "%s/ws", link);
        assert_int_equal(open_pinned_dir(moved, id, NULL, NULL), -ELOOP);
        /* Another directory of the same name. */
        snprintf(moved, sizeof moved, "%s/ws.real", parent);
        assert_int_equal(rename(ws, moved), 0);
        assert_int_equal(mkdir(ws, 0700), 0);
        assert_int_equal(open_pinned_dir(ws, NULL, NULL, NULL), 0);
        assert_int_equal(open_pinned_dir(ws, id, NULL, NULL), -ESTALE);
        /* Gone. */
        assert_int_equal(rmdir(ws), 0);
        assert_int_equal(open_pinned_dir(ws, id, NULL, NULL), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_open_pinned_dir, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_path_resolve_no_links_in, setup_tmp, teardown_tmp),
                cmocka_unit_test(test_strbuf),
                cmocka_unit_test(test_path_has_dotdot),
                cmocka_unit_test(test_path_join),
                cmocka_unit_test_setup_teardown(test_read_file_capped, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_canonicalize, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_find_git_top, setup_tmp, teardown_tmp),
                cmocka_unit_test(test_relative_safe),
                cmocka_unit_test(test_safe_close),
                cmocka_unit_test(test_proc_children),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
