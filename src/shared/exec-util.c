/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec-util.h"
#include "spawn-util.h"
#include "fd-util.h"
#include "path-util.h"
#include "strbuf.h"

static inline size_t size_min(size_t a, size_t b) {
        return a < b ? a : b;
}

/* Look name up in the ':'-separated absolute directories of search (empty
 * and relative entries are skipped: they would mean the current directory).
 * Returns 0 and the path, -ENOENT, or -ENOMEM. */
int exec_find_program(const char *search, const char *name, char **ret) {
        for (const char *p = search; *p;) {
                size_t n = strcspn(p, ":");
                if (n > 0 && p[0] == '/') {
                        _cleanup_free_ char *dir = strndup(p, n);
                        if (!dir)
                                return -ENOMEM;
                        _cleanup_free_ char *f = path_join(dir, name);
                        if (!f)
                                return -ENOMEM;
                        struct stat st;
                        if (stat(f, &st) == 0 && S_ISREG(st.st_mode) && access(f, X_OK) == 0) {
                                *ret = TAKE_PTR(f);
                                return 0;
                        }
                }
                p += n;
                if (*p == ':')
                        p++;
        }
        return -ENOENT;
}

uint64_t now_usec(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

void exec_result_done(ExecResult *c) {
        free(c->out);
        free(c->err);
        *c = (ExecResult){};
}

bool exec_result_failed(const ExecResult *c) {
        return c->spawn_error < 0 || c->timed_out || c->status != 0;
}

/* Read what the pipe holds into b (keeping at most max bytes; the rest is
 * read and dropped so the child never blocks on a full pipe). Returns 1 at
 * end of file, 0 when the pipe is empty for now, or -errno. */
static int drain_pipe(int fd, StrBuf *b, size_t max) {
        char buf[16384];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n == 0)
                        return 1;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : -errno;
                }
                if (b->len < max)
                        strbuf_putn(b, buf, size_min((size_t) n, max - b->len));
        }
}

static int exec_capture_high(const char *path, const char *const *argv, const int *fds, size_t n_fds,
                             uint64_t timeout_usec, ExecResult *ret);

static int spawn_child(const char *path, const char *const *argv, int out_fd, int err_fd, const int *fds, size_t n_fds,
                       pid_t *ret_pid) {
        SpawnFd map[2 + 8];
        if (n_fds > 8)
                return -E2BIG;
        map[0] = (SpawnFd){ out_fd, STDOUT_FILENO };
        map[1] = (SpawnFd){ err_fd, STDERR_FILENO };
        for (size_t i = 0; i < n_fds; i++)
                map[2 + i] = (SpawnFd){ fds[i], 3 + (int) i };
        SpawnSpec s = SPAWN_SPEC_INIT(path, (char *const *) argv);
        s.fds = map;
        s.n_fds = 2 + n_fds;
        /* Its own process group, so a timeout can kill everything it forked;
         * and it dies with its caller: a `podman run` left going by a
         * coordinator that was killed could make its container after the
         * watchdog has read what to remove. */
        s.new_pgroup = true;
        s.die_with_parent = true;
        return spawn(&s, ret_pid);
}

int exec_capture(const char *path, const char *const *argv, uint64_t timeout_usec, ExecResult *ret) {
        return exec_capture_fds(path, argv, NULL, 0, timeout_usec, ret);
}

int exec_capture_fds(const char *path, const char *const *argv, const int *fds, size_t n_fds, uint64_t timeout_usec,
                     ExecResult *ret) {
        /* Copies above the range the child's fds land in, so no dup2
         * overwrites a source that is still to come. */
        int high[8];
        if (n_fds > ELEMENTSOF(high))
                return -E2BIG;
        for (size_t i = 0; i < n_fds; i++) {
                high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
                if (high[i] < 0) {
                        int e = negative_errno();
                        for (size_t j = 0; j < i; j++)
                                close(high[j]);
                        return e;
                }
        }
        int r = exec_capture_high(path, argv, high, n_fds, timeout_usec, ret);
        for (size_t i = 0; i < n_fds; i++)
                close(high[i]);
        return r;
}

static int exec_capture_high(const char *path, const char *const *argv, const int *fds, size_t n_fds,
                             uint64_t timeout_usec, ExecResult *ret) {
        _cleanup_close_ int out_r = -EBADF, out_w = -EBADF, err_r = -EBADF, err_w = -EBADF;
        StrBuf out = STRBUF_INIT, err = STRBUF_INIT;
        ExecResult cmd = {};
        int p[2], r, wstatus = 0;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        out_r = p[0];
        out_w = p[1];
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        err_r = p[0];
        err_w = p[1];
        /* Only our ends: the child's stdout must stay blocking. */
        if (fcntl(out_r, F_SETFL, O_NONBLOCK) < 0 || fcntl(err_r, F_SETFL, O_NONBLOCK) < 0)
                return negative_errno();

        r = spawn_child(path, argv, out_w, err_w, fds, n_fds, &pid);
        if (r < 0) {
                if (r == -ENOMEM)
                        return r;
                *ret = (ExecResult){ .spawn_error = r };
                return 0;
        }
        out_w = safe_close(out_w);
        err_w = safe_close(err_w);

        uint64_t deadline = now_usec() + timeout_usec;
        bool exited = false;
        for (;;) {
                pid_t w = waitpid(pid, &wstatus, WNOHANG);
                if (w == pid)
                        exited = true;
                else if (w < 0 && errno != EINTR) {
                        r = negative_errno();
                        (void) kill(-pid, SIGKILL);
                        break;
                }
                if (exited) {
                        /* Whatever the child wrote is in the pipes now; a
                         * grandchild holding them open must not keep us. */
                        if (out_r >= 0)
                                (void) drain_pipe(out_r, &out, EXEC_STDOUT_MAX);
                        if (err_r >= 0)
                                (void) drain_pipe(err_r, &err, EXEC_STDERR_MAX);
                        break;
                }

                uint64_t now = now_usec();
                if (now >= deadline) {
                        (void) kill(-pid, SIGKILL);
                        (void) kill(pid, SIGKILL);
                        while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
                                ;
                        cmd.timed_out = true;
                        break;
                }

                /* Wake at least every 20 ms to notice the exit. */
                uint64_t slice = deadline - now;
                if (slice > 20000)
                        slice = 20000;
                struct pollfd pfd[2];
                nfds_t n = 0;
                if (out_r >= 0)
                        pfd[n++] = (struct pollfd){ .fd = out_r, .events = POLLIN };
                if (err_r >= 0)
                        pfd[n++] = (struct pollfd){ .fd = err_r, .events = POLLIN };
                if (poll(n > 0 ? pfd : NULL, n, (int) ((slice + 999) / 1000)) < 0 && errno != EINTR) {
                        r = negative_errno();
                        (void) kill(-pid, SIGKILL);
                        break;
                }
                if (out_r >= 0) {
                        int k = drain_pipe(out_r, &out, EXEC_STDOUT_MAX);
                        if (k != 0)
                                out_r = safe_close(out_r);
                }
                if (err_r >= 0) {
                        int k = drain_pipe(err_r, &err, EXEC_STDERR_MAX);
                        if (k != 0)
                                err_r = safe_close(err_r);
                }
        }
        if (r < 0) {
                while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
                        ;
                strbuf_done(&out);
                strbuf_done(&err);
                return r;
        }

        if (WIFEXITED(wstatus))
                cmd.status = WEXITSTATUS(wstatus);
        else if (WIFSIGNALED(wstatus))
                cmd.status = 128 + WTERMSIG(wstatus);
        else
                cmd.status = 255;
        cmd.out = strbuf_steal(&out);
        cmd.err = strbuf_steal(&err);
        if (!cmd.out || !cmd.err) {
                exec_result_done(&cmd);
                return -ENOMEM;
        }
        *ret = cmd;
        return 0;
}
