/* SPDX-License-Identifier: MIT */
/* The dispenser's wire (shared/dispense, issue 41): one status byte, the
 * descriptor with it when 0; refusals, an end of file and a descriptor
 * missing each told apart; dispense_connect's fallback where there is no
 * dispenser (this host has no /run/lazaret/dispense). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "dispense.h"

static void pair(int sp[2]) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
}

static void test_paths(void **state) {
        (void) state;
        assert_string_equal(dispense_path(DISPENSE_ESCALATE), "/run/lazaret/dispense/escalate");
        assert_string_equal(dispense_path(DISPENSE_BROKER), "/run/lazaret/dispense/broker");
        assert_null(dispense_path('X'));
        assert_null(dispense_path(0));
}

static void test_descriptor_passes(void **state) {
        (void) state;
        int sp[2], data[2], got = -1;
        pair(sp);
        pair(data);
        assert_int_equal(dispense_send(sp[0], 0, data[0]), 0);
        close(data[0]);
        assert_int_equal(dispense_recv(sp[1], &got), 0);
        assert_true(got >= 0);
        assert_true(fcntl(got, F_GETFD) & FD_CLOEXEC);
        /* The very socket: what is written on it arrives at its peer. */
        assert_int_equal(write(got, "hi", 2), 2);
        char buf[4] = {};
        assert_int_equal(read(data[1], buf, sizeof buf), 2);
        assert_string_equal(buf, "hi");
        close(got);
        close(data[1]);
        close(sp[0]);
        close(sp[1]);
}

static void test_refusals_and_ends(void **state) {
        (void) state;
        int sp[2], got = -1;
        pair(sp);
        /* A refusal carries its errno and no descriptor. */
        assert_int_equal(dispense_send(sp[0], ECONNREFUSED, -1), 0);
        assert_int_equal(dispense_recv(sp[1], &got), -ECONNREFUSED);
        assert_int_equal(got, -1);
        /* A 0 without a descriptor is no answer. */
        assert_int_equal(dispense_send(sp[0], 0, -1), 0);
        assert_int_equal(dispense_recv(sp[1], &got), -EBADMSG);
        /* A refusal that carries one anyway: refused, and nothing leaks
         * (the descriptor is closed, not handed out). */
        int data[2];
        pair(data);
        assert_int_equal(dispense_send(sp[0], EACCES, data[0]), 0);
        assert_int_equal(dispense_recv(sp[1], &got), -EACCES);
        assert_int_equal(got, -1);
        close(data[0]);
        char c;
        assert_int_equal(read(data[1], &c, 1), 0); /* every copy of the other end closed */
        close(data[1]);
        /* The other end gone. */
        close(sp[0]);
        assert_int_equal(dispense_recv(sp[1], &got), -EPIPE);
        close(sp[1]);
}

static void test_connect_falls_back(void **state) {
        (void) state;
        if (access(DISPENSE_DIR, F_OK) == 0)
                skip(); /* inside a sandbox: the dispenser's own */
        char dir[] = "/tmp/test-dispense-XXXXXX", path[128];
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/sock", dir);
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strcpy(sa.sun_path, path);
        assert_int_equal(bind(l, (struct sockaddr *) &sa, sizeof sa), 0);
        assert_int_equal(listen(l, 4), 0);
        const char *via = NULL;
        int fd = dispense_connect(DISPENSE_BROKER, path, 1, &via);
        assert_true(fd >= 0);
        assert_ptr_equal(via, path);
        assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
        int a = accept(l, NULL, NULL);
        assert_true(a >= 0);
        close(a);
        close(fd);
        /* Nothing there: its errno, and the path tried. */
        unlink(path);
        assert_int_equal(dispense_connect(DISPENSE_BROKER, path, 0, &via), -ENOENT);
        /* No dispenser and no fallback. */
        assert_int_equal(dispense_connect(DISPENSE_ESCALATE, NULL, 0, &via), -ENOENT);
        close(l);
        rmdir(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_paths),
                cmocka_unit_test(test_descriptor_passes),
                cmocka_unit_test(test_refusals_and_ends),
                cmocka_unit_test(test_connect_falls_back),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
