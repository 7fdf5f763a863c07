/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "spawn-util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

/* Where the child's copies of the sources go before they are put in
 * place: above every target, so no dup2 overwrites a source still to
 * come. */
#define SPAWN_HIGH_FD 64

/* In the child: report errno through the pipe and end. Only
 * async-signal-safe calls from here on (the parent may have threads). */
_noreturn_ _no_sanitize_address_ static void child_fail(int report) {
        int e = errno ? errno : EIO;
        (void) !write(report, &e, sizeof(e));
        _exit(127);
}

_noreturn_ _no_sanitize_address_ static void child(const SpawnSpec *s, int report) {
        int high[SPAWN_HIGH_FD];
        int top = 2;

        /* The report pipe out of the way of every target first (none:
         * no_wait). */
        if (report >= 0) {
                int moved = fcntl(report, F_DUPFD_CLOEXEC, SPAWN_HIGH_FD);
                if (moved < 0)
                        child_fail(report);
                report = moved;
        }

        if (s->die_with_parent && !s->detach && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != s->parent_pid))
                child_fail(report);
        if (s->userns_fd >= 0 && setns(s->userns_fd, CLONE_NEWUSER) < 0)
                child_fail(report);
        if (s->mntns_fd >= 0 && setns(s->mntns_fd, CLONE_NEWNS) < 0)
                child_fail(report);
        if (s->netns_fd >= 0 && setns(s->netns_fd, CLONE_NEWNET) < 0)
                child_fail(report);
        if (s->new_session && setsid() < 0)
                child_fail(report);
        if (s->new_pgroup && !s->new_session && setpgid(0, 0) < 0)
                child_fail(report);
        if (s->cwd && chdir(s->cwd) < 0)
                child_fail(report);
        if (s->cwd_fd >= 0 && fchdir(s->cwd_fd) < 0)
                child_fail(report);

        /* Copies first, above every target; then into place (dup2 clears
         * close-on-exec on the copy it makes). */
        if (s->n_fds > ELEMENTSOF(high)) {
                errno = E2BIG;
                child_fail(report);
        }
        for (size_t i = 0; i < s->n_fds; i++) {
                if (s->fds[i].to < 0 || s->fds[i].to >= SPAWN_HIGH_FD) {
                        errno = EBADF;
                        child_fail(report);
                }
                high[i] = fcntl(s->fds[i].from, F_DUPFD_CLOEXEC, SPAWN_HIGH_FD);
                if (high[i] < 0)
                        child_fail(report);
                if (s->fds[i].to > top)
                        top = s->fds[i].to;
        }
        bool has[3] = {};
        for (size_t i = 0; i < s->n_fds; i++) {
                if (dup2(high[i], s->fds[i].to) < 0)
                        child_fail(report);
                if (s->fds[i].to < 3)
                        has[s->fds[i].to] = true;
        }
        if (!has[0]) {
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (devnull < 0 || dup2(devnull, 0) < 0)
                        child_fail(report);
        }
        if (s->controlling_tty && ioctl(0, TIOCSCTTY, 0) < 0)
                child_fail(report);
        /* Everything else goes at exec: the report pipe (close-on-exec
         * already) stays open until then. Below the highest target, what
         * is not a target goes too. */
        for (int fd = 3; fd < top; fd++) {
                bool target = false;
                for (size_t i = 0; i < s->n_fds; i++)
                        target = target || s->fds[i].to == fd;
                if (!target && fd != report && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 && errno != EBADF)
                        child_fail(report);
        }
        if (syscall(SYS_close_range, (unsigned) top + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                child_fail(report);

        struct sigaction dfl = { .sa_handler = SIG_DFL };
        for (int sig = 1; sig < _NSIG; sig++)
                if (sigaction(sig, &dfl, NULL) < 0 && errno == EINVAL && sig != SIGKILL && sig != SIGSTOP) {
                        /* libc keeps its own real-time signals (32, 33) to
                         * itself, but an ancestor may have ignored one, and
                         * an ignored signal outlives exec: the kernel's call
                         * resets it. */
                        struct {
                                void *handler;
                                unsigned long flags;
                                void *restorer;
                                uint64_t mask;
                        } k = { .handler = (void *) SIG_DFL };
                        (void) syscall(SYS_rt_sigaction, sig, &k, NULL, sizeof(k.mask));
                }

        /* Unblocked only now (spawn() blocked them all for the fork): a
         * signal pending since then meets its default, never a handler of
         * ours. */
        sigset_t none;
        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
                child_fail(report);

        if (s->before_exec) {
                int r = s->before_exec(s->before_exec_data);
                if (r < 0) {
                        errno = -r;
                        child_fail(report);
                }
        }
        execve(s->path, s->argv, s->envp ? s->envp : environ);
        child_fail(report);
}

typedef struct SpawnChild {
        const SpawnSpec *s;
        int report;
} SpawnChild;

/* The child runs in our memory, on a stack of its own, until its execve
 * or _exit (CLONE_VM | CLONE_VFORK, as posix_spawn(3) does): no copy of
 * our page tables and no copy-on-write faults after it, which in the
 * coordinator (a few spawns for each start) were a good part of a start's
 * CPU. It has its own descriptors and signal dispositions; it only makes
 * system calls, on its own stack. */
_no_sanitize_address_ static int child_main(void *arg) {
        const SpawnChild *c = arg;
        if (c->s->detach) {
                /* A session of its own, then the grandchild runs it:
                 * whoever we are, it is not our child. A real fork (the
                 * system call, not libc's, whose bookkeeping is our
                 * parent's memory): the grandchild has a copy, so our
                 * parent may go on the moment this child exits. */
                if (setsid() < 0)
                        child_fail(c->report);
                long g = syscall(SYS_clone, (unsigned long) SIGCHLD, NULL, NULL, NULL, NULL);
                if (g < 0)
                        child_fail(c->report);
                if (g > 0)
                        _exit(0);
        }
        child(c->s, c->report);
}

#define SPAWN_STACK (256u * 1024u)

/* no_wait: a fork (the child runs beside us, so not in our memory), and
 * no report: what fails before the exec is its exit status 127. */
static int spawn_no_wait(const SpawnSpec *s, pid_t *ret_pid) {
        sigset_t all, old;
        sigfillset(&all);
        (void) pthread_sigmask(SIG_SETMASK, &all, &old);
        pid_t pid = fork();
        if (pid == 0)
                child(s, -EBADF);
        int e = pid < 0 ? -errno : 0;
        (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                return e;
        *ret_pid = pid;
        return 0;
}

int spawn(const SpawnSpec *spec, pid_t *ret_pid) {
        /* The child checks its parent against ours. */
        SpawnSpec copy = *spec;
        copy.parent_pid = getpid();
        const SpawnSpec *s = &copy;
        int p[2];
        if (!s->path || !s->argv || (!ret_pid && !s->detach) || (s->no_wait && (s->detach || !ret_pid)))
                return -EINVAL;
        if (s->no_wait)
                return spawn_no_wait(s, ret_pid);
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        /* The child's stack, a guard page below it. */
        uint8_t *stack =
                mmap(NULL, SPAWN_STACK + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED)
                return negative_errno();
        if (mprotect(stack, page, PROT_NONE) < 0 || pipe2(p, O_CLOEXEC) < 0) {
                int e = negative_errno();
                (void) munmap(stack, SPAWN_STACK + page);
                return e;
        }
        /* The read end is not the child's: closed in it at its exec
         * (close-on-exec), and it never reads. */
        SpawnChild c = { s, p[1] };
        /* Every signal blocked across the clone: none reaches a handler of
         * ours in the child before its dispositions are reset. */
        sigset_t all, old;
        sigfillset(&all);
        (void) pthread_sigmask(SIG_SETMASK, &all, &old);
        int saved = errno;
        pid_t pid = clone(child_main, stack + page + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
        int e = pid < 0 ? -errno : 0;
        errno = saved; /* the child shares our errno until its exec */
        (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        (void) munmap(stack, SPAWN_STACK + page);
        safe_close(p[1]);
        if (pid < 0) {
                safe_close(p[0]);
                return e;
        }
        if (s->detach) {
                int st;
                while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                        ;
        }
        int err = 0;
        ssize_t n;
        while ((n = read(p[0], &err, sizeof(err))) < 0 && errno == EINTR)
                ;
        safe_close(p[0]);
        if (n == (ssize_t) sizeof(err)) {
                if (!s->detach)
                        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                return -(err > 0 ? err : EIO);
        }
        if (ret_pid)
                *ret_pid = s->detach ? 0 : pid;
        return 0;
}

int spawn_wait(pid_t pid) {
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int spawn_netns_of(pid_t pid, int *ret_netns, int *ret_userns) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) pid);
        _cleanup_close_ int net = open(path, O_RDONLY | O_CLOEXEC);
        if (net < 0)
                return negative_errno();
        _cleanup_close_ int user = ioctl(net, NS_GET_USERNS);
        if (user < 0)
                return negative_errno();
        struct stat a, b;
        if (fstat(user, &a) < 0 || stat("/proc/self/ns/user", &b) < 0)
                return negative_errno();
        if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                user = safe_close(user);
        *ret_netns = TAKE_FD(net);
        *ret_userns = TAKE_FD(user);
        return 0;
}
