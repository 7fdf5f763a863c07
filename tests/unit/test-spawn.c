/* SPDX-License-Identifier: MIT */
/* Unit tests of spawn(), the one way Lazaret starts a program: only the
 * listed descriptors reach the child, signals are at their defaults and
 * unblocked whatever the parent does, a failure before exec is the call's
 * error, and the session, process group, working directory, environment
 * and detachment are what was asked. The child reports through /proc, an
 * independent view. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd-util.h"
#include "macro.h"
#include "spawn-util.h"
#include "string-util.h"

/* Run s with its stdout on a pipe; what it wrote, and its exit status. */
static int run(SpawnSpec s, char *out, size_t size) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        SpawnFd fds[8];
        size_t n = 0;
        for (size_t i = 0; i < s.n_fds; i++)
                fds[n++] = s.fds[i];
        fds[n++] = (SpawnFd){ p[1], 1 };
        s.fds = fds;
        s.n_fds = n;
        pid_t pid;
        int r = spawn(&s, &pid);
        close(p[1]);
        if (r < 0) {
                close(p[0]);
                return r;
        }
        size_t len = 0;
        ssize_t k;
        while (len + 1 < size && (k = read(p[0], out + len, size - 1 - len)) > 0)
                len += (size_t) k;
        out[len] = '\0';
        close(p[0]);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_failure_before_exec_is_the_error(void **state) {
        (void) state;
        pid_t pid = 0;
        SpawnSpec s = SPAWN_SPEC_INIT("/nonexistent/lazaret-program", (char *const[]){ (char *) "x", NULL });
        assert_int_equal(spawn(&s, &pid), -ENOENT);
        s = SPAWN_SPEC_INIT("/bin/true", (char *const[]){ (char *) "true", NULL });
        s.cwd = "/nonexistent/lazaret-dir";
        assert_int_equal(spawn(&s, &pid), -ENOENT);
        /* No child is left behind by either. */
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
}

static int refuse(void *userdata) {
        return -*(int *) userdata;
}

static int no_new_privs(void *userdata) {
        (void) userdata;
        return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? -errno : 0;
}

/* before_exec runs in the child, last: what it does holds for the program
 * (Landlock's restrict_self, for auto-approved escalations), and its error
 * is the call's, with no child left behind. */
static void test_before_exec(void **state) {
        (void) state;
        char out[4096];
        SpawnSpec s = SPAWN_SPEC_INIT("/bin/grep", (char *const[]){ (char *) "grep", (char *) "^NoNewPrivs:",
                                                                    (char *) "/proc/self/status", NULL });
        assert_int_equal(run(s, out, sizeof(out)), 0);
        assert_non_null(strstr(out, "\t0"));
        s.before_exec = no_new_privs;
        assert_int_equal(run(s, out, sizeof(out)), 0);
        assert_non_null(strstr(out, "\t1"));
        int e = EACCES;
        s.before_exec = refuse;
        s.before_exec_data = &e;
        pid_t pid = 0;
        assert_int_equal(spawn(&s, &pid), -EACCES);
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
}

static void test_only_listed_descriptors(void **state) {
        (void) state;
        char out[512], cmd[256];
        /* One of ours without close-on-exec (the way LMDB's data.mdb was),
         * one listed to land on 5. */
        int leak = open("/dev/null", O_RDONLY);
        int given = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(leak > 2 && given > 2);
        snprintf(cmd, sizeof(cmd),
                 "test -e /proc/self/fd/5 && echo five; test -e /proc/self/fd/%d && echo leaked; "
                 "test -e /proc/self/fd/%d && echo source; echo end",
                 leak, given);
        SpawnSpec s = SPAWN_SPEC_INIT("/bin/sh", (char *const[]){ (char *) "sh", (char *) "-c", cmd, NULL });
        SpawnFd fds[] = { { given, 5 } };
        s.fds = fds;
        s.n_fds = 1;
        assert_int_equal(run(s, out, sizeof(out)), 0);
        assert_string_equal(out, "five\nend\n");
        close(leak);
        close(given);
}

static void test_descriptors_swapped(void **state) {
        (void) state;
        char out[512], cmd[256];
        int a = open("/dev/null", O_RDONLY | O_CLOEXEC), b = open("/dev/zero", O_RDONLY | O_CLOEXEC);
        assert_true(a > 2 && b > 2);
        /* Each lands where the other was, and one more on 3 (where the
         * report pipe may be at first). */
        snprintf(cmd, sizeof(cmd), "readlink /proc/self/fd/%d /proc/self/fd/%d /proc/self/fd/3", a, b);
        SpawnSpec s = SPAWN_SPEC_INIT("/bin/sh", (char *const[]){ (char *) "sh", (char *) "-c", cmd, NULL });
        SpawnFd fds[] = { { a, b }, { b, a }, { b, 3 } };
        s.fds = fds;
        s.n_fds = ELEMENTSOF(fds);
        assert_int_equal(run(s, out, sizeof(out)), 0);
        assert_string_equal(out, "/dev/zero\n/dev/null\n/dev/zero\n");
        close(a);
        close(b);
}

static uint64_t status_mask(const char *text, const char *field) {
        const char *p = strstr(text, field);
        assert_non_null(p);
        return strtoull(p + strlen(field), NULL, 16);
}

static void test_signals_at_their_defaults(void **state) {
        (void) state;
        char out[4096];
        struct sigaction ign = { .sa_handler = SIG_IGN }, old_pipe, old_hup;
        sigset_t block, old_mask;
        sigemptyset(&block);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGCHLD);
        assert_int_equal(sigaction(SIGPIPE, &ign, &old_pipe), 0);
        assert_int_equal(sigaction(SIGHUP, &ign, &old_hup), 0);
        assert_int_equal(sigprocmask(SIG_BLOCK, &block, &old_mask), 0);
        SpawnSpec s =
                SPAWN_SPEC_INIT("/bin/cat", (char *const[]){ (char *) "cat", (char *) "/proc/self/status", NULL });
        int r = run(s, out, sizeof(out));
        /* Ours is as it was: SIGTERM and SIGCHLD blocked, SIGINT not. */
        sigset_t now;
        assert_int_equal(sigprocmask(SIG_BLOCK, NULL, &now), 0);
        assert_true(sigismember(&now, SIGTERM) && sigismember(&now, SIGCHLD) && !sigismember(&now, SIGINT));
        assert_int_equal(sigprocmask(SIG_SETMASK, &old_mask, NULL), 0);
        assert_int_equal(sigaction(SIGPIPE, &old_pipe, NULL), 0);
        assert_int_equal(sigaction(SIGHUP, &old_hup, NULL), 0);
        assert_int_equal(r, 0);
        assert_int_equal(status_mask(out, "\nSigIgn:"), 0);
        assert_int_equal(status_mask(out, "\nSigBlk:"), 0);
}

/* pid, pgrp and session of the child, from its /proc/self/stat. */
static void stat_ids(SpawnSpec s, long ids[3]) {
        char out[1024];
        assert_int_equal(run(s, out, sizeof(out)), 0);
        const char *close_paren = strrchr(out, ')');
        assert_non_null(close_paren);
        long pid = strtol(out, NULL, 10), ppid, pgrp, sid;
        char st;
        assert_int_equal(sscanf(close_paren + 1, " %c %ld %ld %ld", &st, &ppid, &pgrp, &sid), 4);
        ids[0] = pid;
        ids[1] = pgrp;
        ids[2] = sid;
}

static void test_group_and_session(void **state) {
        (void) state;
        long ids[3];
        char *const argv[] = { (char *) "cat", (char *) "/proc/self/stat", NULL };
        SpawnSpec s = SPAWN_SPEC_INIT("/bin/cat", argv);
        stat_ids(s, ids);
        assert_int_equal(ids[1], getpgrp());
        s.new_pgroup = true;
        stat_ids(s, ids);
        assert_int_equal(ids[1], ids[0]);
        assert_int_equal(ids[2], getsid(0));
        s = SPAWN_SPEC_INIT("/bin/cat", argv);
        s.new_session = true;
        stat_ids(s, ids);
        assert_int_equal(ids[2], ids[0]);
}

static void test_cwd_and_environment(void **state) {
        (void) state;
        char out[256];
        SpawnSpec s = SPAWN_SPEC_INIT("/bin/pwd", (char *const[]){ (char *) "pwd", NULL });
        s.cwd = "/tmp";
        assert_int_equal(run(s, out, sizeof(out)), 0);
        assert_string_equal(out, "/tmp\n");
        int dir = open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dir >= 0);
        s = SPAWN_SPEC_INIT("/bin/pwd", (char *const[]){ (char *) "pwd", NULL });
        s.cwd_fd = dir;
        assert_int_equal(run(s, out, sizeof(out)), 0);
        assert_string_equal(out, "/usr\n");
        close(dir);
        s = SPAWN_SPEC_INIT("/usr/bin/env", (char *const[]){ (char *) "env", NULL });
        s.envp = (char *const[]){ (char *) "ONLY=this", NULL };
        assert_int_equal(run(s, out, sizeof(out)), 0);
        assert_string_equal(out, "ONLY=this\n");
}

static void test_detach(void **state) {
        (void) state;
        char path[] = "/tmp/lazaret-spawn-XXXXXX", cmd[256];
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        snprintf(cmd, sizeof(cmd), "echo $PPID > %s.tmp && mv %s.tmp %s", path, path, path);
        SpawnSpec s = SPAWN_SPEC_INIT("/bin/sh", (char *const[]){ (char *) "sh", (char *) "-c", cmd, NULL });
        s.detach = true;
        assert_int_equal(spawn(&s, NULL), 0);
        /* Not ours: nothing to reap. */
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        long ppid = 0;
        for (int i = 0; i < 500 && ppid == 0; i++) {
                FILE *f = fopen(path, "r");
                if (f) {
                        if (fscanf(f, "%ld", &ppid) != 1)
                                ppid = 0;
                        fclose(f);
                }
                if (ppid == 0)
                        usleep(10000);
        }
        assert_true(ppid > 0);
        assert_true(ppid != getpid());
        unlink(path);
        /* Its failures come back too. */
        s = SPAWN_SPEC_INIT("/nonexistent/lazaret-program", (char *const[]){ (char *) "x", NULL });
        s.detach = true;
        assert_int_equal(spawn(&s, NULL), -ENOENT);
}

/* die_with_parent: the child gets SIGKILL when its parent ends (here an
 * intermediate process that spawns it and exits at once); without it, it
 * lives on. We are the subreaper, so the orphan comes back to us. */
static int orphan_status(bool die) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t mid = fork();
        assert_true(mid >= 0);
        if (mid == 0) {
                pid_t pid = 0;
                SpawnSpec s = SPAWN_SPEC_INIT("/bin/sleep", (char *const[]){ (char *) "sleep", (char *) "2", NULL });
                s.die_with_parent = die;
                if (spawn(&s, &pid) < 0)
                        _exit(1);
                (void) !write(p[1], &pid, sizeof(pid));
                _exit(0);
        }
        close(p[1]);
        pid_t pid = 0;
        assert_int_equal(read(p[0], &pid, sizeof(pid)), (ssize_t) sizeof(pid));
        close(p[0]);
        int st;
        assert_int_equal(waitpid(mid, &st, 0), mid);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return st;
}

static void test_die_with_parent(void **state) {
        (void) state;
        assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
        int st = orphan_status(true);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        st = orphan_status(false);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), 0);
}

static void test_wait(void **state) {
        (void) state;
        pid_t pid;
        SpawnSpec s =
                SPAWN_SPEC_INIT("/bin/sh", (char *const[]){ (char *) "sh", (char *) "-c", (char *) "exit 7", NULL });
        assert_int_equal(spawn(&s, &pid), 0);
        assert_int_equal(spawn_wait(pid), 7);
        s = SPAWN_SPEC_INIT("/bin/sh", (char *const[]){ (char *) "sh", (char *) "-c", (char *) "kill -TERM $$", NULL });
        assert_int_equal(spawn(&s, &pid), 0);
        assert_int_equal(spawn_wait(pid), 128 + SIGTERM);
        assert_int_equal(spawn_wait(pid), -ECHILD);
}

/* no_wait: spawn() returns before the exec; the child is set up the same
 * way (only the listed descriptors, signals at their defaults), and what
 * fails before its exec is its exit status 127. */
static void test_no_wait(void **state) {
        (void) state;
        char out[512];
        int leak = open("/dev/null", O_RDONLY);
        assert_true(leak > 2);
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "test -e /proc/self/fd/%d && echo leaked; grep -q '^SigBlk:\\s*0*$' /proc/self/status && echo "
                 "unblocked; exit 3",
                 leak);
        SpawnSpec s = SPAWN_SPEC_INIT("/bin/sh", (char *const[]){ (char *) "sh", (char *) "-c", cmd, NULL });
        s.no_wait = true;
        sigset_t all, old;
        sigfillset(&all);
        assert_int_equal(sigprocmask(SIG_SETMASK, &all, &old), 0);
        int st = run(s, out, sizeof(out));
        assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
        close(leak);
        assert_int_equal(st, 3);
        assert_string_equal(out, "unblocked\n");

        pid_t pid;
        s = SPAWN_SPEC_INIT("/nonexistent/lazaret-prog", (char *const[]){ (char *) "x", NULL });
        s.no_wait = true;
        assert_int_equal(spawn(&s, &pid), 0);
        assert_int_equal(spawn_wait(pid), 127);
        s.detach = true;
        assert_int_equal(spawn(&s, &pid), -EINVAL);
        s.detach = false;
        assert_int_equal(spawn(&s, NULL), -EINVAL);
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_wait),
                cmocka_unit_test(test_failure_before_exec_is_the_error),
                cmocka_unit_test(test_before_exec),
                cmocka_unit_test(test_only_listed_descriptors),
                cmocka_unit_test(test_descriptors_swapped),
                cmocka_unit_test(test_signals_at_their_defaults),
                cmocka_unit_test(test_group_and_session),
                cmocka_unit_test(test_cwd_and_environment),
                cmocka_unit_test(test_detach),
                cmocka_unit_test(test_wait),
                cmocka_unit_test(test_die_with_parent),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
