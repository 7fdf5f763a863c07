/* SPDX-License-Identifier: MIT */
/* The Storage Catalog's bookkeeping: one mount per artifact however many
 * leases, the last release unmounts, a crash between mount and record is
 * found by the next user, a vanished mount is made again, a failed unmount
 * is retried. The mounter here counts calls; the real one (Podman) is
 * exercised by tests/integration/test_state.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog.h"

typedef struct Counter {
        int mounts, unmounts;
        int fail_unmount; /* the next unmounts fail */
        bool invalid; /* valid() says no */
        bool crash_after_mount; /* _exit in mount (run in a child) */
        char last_unmounted[80];
} Counter;

static int fake_mount(void *ud, const char *id, char **ret_path, char **ret_error) {
        Counter *c = ud;
        (void) ret_error;
        c->mounts++;
        if (c->crash_after_mount)
                _exit(0);
        if (asprintf(ret_path, "/mnt/%s/%d", id, c->mounts) < 0)
                return -ENOMEM;
        return 0;
}

static int fake_unmount(void *ud, const char *id) {
        Counter *c = ud;
        c->unmounts++;
        snprintf(c->last_unmounted, sizeof(c->last_unmounted), "%s", id);
        if (c->fail_unmount > 0) {
                c->fail_unmount--;
                return -EBUSY;
        }
        return 0;
}

static bool fake_valid(void *ud, const char *path) {
        Counter *c = ud;
        (void) path;
        return !c->invalid;
}

static char dir[64];

static int setup(void **state) {
        (void) state;
        strcpy(dir, "/tmp/lazaret-catalog-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
        (void) state;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static const char *sub(void) {
        static char p[96];
        snprintf(p, sizeof(p), "%s/catalog", dir);
        return p;
}

static size_t count(const char *table) {
        json_t *j = NULL;
        assert_int_equal(catalog_dump(sub(), &j), 0);
        size_t n = json_array_size(json_object_get(j, table));
        json_decref(j);
        return n;
}

static void lease(Counter *c, const char *art, const char *dom, uint64_t gen, const char *want_path) {
        CatalogMounter m = { fake_mount, fake_unmount, fake_valid, c };
        CatalogLease l = { art, "localhost/img:1", dom, gen };
        char *path = NULL, *err = NULL;
        assert_int_equal(catalog_lease(sub(), &l, &m, &path, &err), 0);
        assert_null(err);
        assert_string_equal(path, want_path);
        free(path);
}

static int release(Counter *c, const char *art, const char *dom, uint64_t gen) {
        CatalogMounter m = { fake_mount, fake_unmount, fake_valid, c };
        return catalog_release(sub(), art, dom, gen, &m);
}

static void test_shared_and_last_release(void **state) {
        (void) state;
        Counter c = {};
        lease(&c, "img-a", "d1", 1, "/mnt/img-a/1");
        lease(&c, "img-a", "d2", 4, "/mnt/img-a/1");
        lease(&c, "img-a", "d2", 4, "/mnt/img-a/1"); /* the same lease again is one */
        assert_int_equal(c.mounts, 1);
        assert_int_equal(count("leases"), 2);
        assert_int_equal(count("artifacts"), 1);

        assert_int_equal(release(&c, "img-a", "d1", 1), 0);
        assert_int_equal(c.unmounts, 0);
        assert_int_equal(release(&c, "img-a", "d1", 1), 0); /* twice: nothing */
        assert_int_equal(release(&c, "img-b", "d1", 1), 0); /* never held: nothing */
        assert_int_equal(c.unmounts, 0);
        assert_int_equal(release(&c, "img-a", "d2", 4), 0);
        assert_int_equal(c.unmounts, 1);
        assert_string_equal(c.last_unmounted, "img-a");
        assert_int_equal(count("artifacts"), 0);
        assert_int_equal(count("leases"), 0);

        /* Another generation of the same Domain is another lease. */
        lease(&c, "img-a", "d1", 2, "/mnt/img-a/2");
        lease(&c, "img-a", "d1", 3, "/mnt/img-a/2");
        assert_int_equal(release(&c, "img-a", "d1", 2), 0);
        assert_int_equal(c.unmounts, 1);
        assert_int_equal(release(&c, "img-a", "d1", 3), 0);
        assert_int_equal(c.unmounts, 2);
}

static void test_crash_between_mount_and_record(void **state) {
        (void) state;
        Counter c = { .crash_after_mount = true };
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                CatalogMounter m = { fake_mount, fake_unmount, fake_valid, &c };
                CatalogLease l = { "img-c", "localhost/img:1", "d1", 1 };
                char *path = NULL, *err = NULL;
                (void) catalog_lease(sub(), &l, &m, &path, &err);
                _exit(1); /* not reached: the mount "crashed" */
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_int_equal(count("operations"), 1);
        assert_int_equal(count("artifacts"), 0);

        /* The next user, for anything, gives the orphaned mount back. */
        Counter d = {};
        lease(&d, "img-other", "d9", 1, "/mnt/img-other/1");
        assert_int_equal(d.unmounts, 1);
        assert_string_equal(d.last_unmounted, "img-c");
        assert_int_equal(count("operations"), 0);
        assert_int_equal(release(&d, "img-other", "d9", 1), 0);
}

static void test_vanished_mount_is_made_again(void **state) {
        (void) state;
        Counter c = {};
        lease(&c, "img-v", "d1", 1, "/mnt/img-v/1");
        c.invalid = true; /* say, Podman's namespace was made anew */
        lease(&c, "img-v", "d2", 1, "/mnt/img-v/2");
        assert_int_equal(c.mounts, 2);
        c.invalid = false;
        assert_int_equal(release(&c, "img-v", "d1", 1), 0);
        assert_int_equal(release(&c, "img-v", "d2", 1), 0);
        assert_int_equal(count("artifacts"), 0);
}

static void test_failed_unmount_is_retried(void **state) {
        (void) state;
        Counter c = { .fail_unmount = 1 };
        lease(&c, "img-f", "d1", 1, "/mnt/img-f/1");
        assert_int_equal(release(&c, "img-f", "d1", 1), -EBUSY);
        assert_int_equal(count("leases"), 0);
        json_t *j = NULL;
        assert_int_equal(catalog_dump(sub(), &j), 0);
        assert_string_equal(
                json_string_value(json_object_get(json_array_get(json_object_get(j, "artifacts"), 0), "state")),
                "Reclaiming");
        json_decref(j);
        /* The next call, whatever it is for, tries again. */
        assert_int_equal(release(&c, "img-x", "d1", 1), 0);
        assert_int_equal(c.unmounts, 2);
        assert_int_equal(count("artifacts"), 0);
}

static int refuse_mount(void *ud, const char *id, char **ret_path, char **ret_error) {
        (void) ud;
        (void) ret_path;
        return asprintf(ret_error, "no such image %s", id) < 0 ? -ENOMEM : -EIO;
}

static void test_failed_mount_leaves_nothing(void **state) {
        (void) state;
        Counter c = {};
        CatalogMounter m = { refuse_mount, fake_unmount, fake_valid, &c };
        CatalogLease l = { "img-n", "localhost/img:1", "d1", 1 };
        char *path = NULL, *err = NULL;
        assert_int_equal(catalog_lease(sub(), &l, &m, &path, &err), -EIO);
        assert_null(path);
        assert_string_equal(err, "no such image img-n");
        free(err);
        assert_int_equal(count("artifacts") + count("leases") + count("operations"), 0);
        assert_int_equal(c.unmounts, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_shared_and_last_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash_between_mount_and_record, setup, teardown),
                cmocka_unit_test_setup_teardown(test_vanished_mount_is_made_again, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_unmount_is_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_mount_leaves_nothing, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
