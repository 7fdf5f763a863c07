/* SPDX-License-Identifier: MIT */
/* The helper programs of lazaret image build (image-run.h), moved out of
 * verb-image.c (issue 43). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "image-run.h"
#include "log.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"

#define USEC_PER_SEC    UINT64_C(1000000)
#define KILL_GRACE_USEC (30 * USEC_PER_SEC)

uint64_t mono_usec(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

void run_done(Run *r) {
        free(r->out);
        free(r->why);
        *r = (Run){};
}

bool run_failed(const Run *r) {
        return r->spawn_error < 0 || r->timed_out || r->interrupted || r->status != 0;
}

/* Splits a helper's stderr into lines, remembers the telling one and passes
 * each to the progress callback. */
typedef struct LineSplitter {
        char buf[RUN_LINE_MAX];
        size_t n;
        LineFn on_line;
        char *first_error; /* first line that looks like an error */
        char *last_any;
        bool oom;
} LineSplitter;

static void splitter_done(LineSplitter *s) {
        free(s->first_error);
        free(s->last_any);
}

static void set_str(char **slot, const char *s, bool *oom) {
        char *c = strdup(s);
        if (!c) {
                *oom = true;
                return;
        }
        free(*slot);
        *slot = c;
}

static void splitter_line(LineSplitter *s) {
        while (s->n > 0 && (s->buf[s->n - 1] == '\r' || s->buf[s->n - 1] == ' '))
                s->n--;
        s->buf[s->n] = '\0';
        /* Helper output ends up on the user's terminal: no control characters. */
        for (size_t i = 0; i < s->n; i++)
                if ((unsigned char) s->buf[i] < 0x20 || s->buf[i] == 0x7f)
                        s->buf[i] = '?';
        if (s->n == 0)
                return;
        if (!s->first_error && (startswith(s->buf, "E: ") || startswith(s->buf, "Error: ") ||
                                startswith(s->buf, "error: ") || startswith(s->buf, "tar: ")))
                set_str(&s->first_error, s->buf, &s->oom);
        set_str(&s->last_any, s->buf, &s->oom);
        if (s->on_line)
                s->on_line(s->buf);
        s->n = 0;
}

static void splitter_feed(LineSplitter *s, const char *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (p[i] == '\n' || s->n == sizeof s->buf - 1) {
                        splitter_line(s);
                        s->n = 0;
                        if (p[i] == '\n')
                                continue;
                }
                s->buf[s->n++] = p[i];
        }
}

/* Read what fd holds now. Returns 1 at end of file, 0 when it would block,
 * -errno on error. to_out receives stdout (capped), to_split stderr. */
static int drain(int fd, StrBuf *to_out, bool *truncated, LineSplitter *to_split) {
        char buf[65536];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n == 0)
                        return 1;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : -errno;
                }
                if (to_out) {
                        size_t keep = to_out->len < RUN_STDOUT_MAX ? RUN_STDOUT_MAX - to_out->len : 0;
                        if ((size_t) n > keep)
                                *truncated = true;
                        strbuf_putn(to_out, buf, (size_t) n < keep ? (size_t) n : keep);
                } else
                        splitter_feed(to_split, buf, (size_t) n);
        }
}

/* Run argv (argv[0] an absolute path) with envp (NULL: ours). Lines of its
 * stderr go to on_line (may be NULL). A program that cannot start, fails,
 * runs past timeout_usec or is stopped because stop asked is
 * described in *ret; the return value is -errno only when it could not even
 * be attempted (pipes, fork, memory). */
int run(char *const *argv, char *const *envp, uint64_t timeout_usec, LineFn on_line, const ImageStop *stop, Run *ret) {
        _cleanup_close_ int null_fd = -EBADF, out_r = -EBADF, out_w = -EBADF, err_r = -EBADF, err_w = -EBADF;
        LineSplitter split = { .on_line = on_line };
        StrBuf out = STRBUF_INIT;
        Run res = {};
        int p[2], wstatus = 0, r = 0;

        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (null_fd < 0)
                return negative_errno();
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        out_r = p[0];
        out_w = p[1];
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        err_r = p[0];
        err_w = p[1];
        if (fcntl(out_r, F_SETFL, O_NONBLOCK) < 0 || fcntl(err_r, F_SETFL, O_NONBLOCK) < 0)
                return negative_errno();

        log_debug("running %s", argv[0]);
        fflush(stdout);
        fflush(stderr);
        /* Its own process group: an interruption or a timeout ends
         * everything it started. */
        SpawnFd fds[] = { { null_fd, 0 }, { out_w, 1 }, { err_w, 2 } };
        SpawnSpec sp = SPAWN_SPEC_INIT(argv[0], argv);
        sp.envp = envp;
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.new_pgroup = true;
        pid_t pid;
        r = spawn(&sp, &pid);
        out_w = safe_close(out_w);
        err_w = safe_close(err_w);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                *ret = (Run){ .spawn_error = r };
                return 0;
        }

        uint64_t deadline = mono_usec() + timeout_usec, kill_at = UINT64_MAX;
        bool exited = false, stopping = false;
        for (;;) {
                pid_t w = waitpid(pid, &wstatus, WNOHANG);
                if (w == pid)
                        exited = true;
                else if (w < 0 && errno != EINTR) {
                        r = negative_errno();
                        (void) kill(-pid, SIGKILL);
                        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                        break;
                }
                if (exited) {
                        /* Everything it wrote is in the pipes; a grandchild
                         * holding them open must not keep us waiting. */
                        if (out_r >= 0)
                                (void) drain(out_r, &out, &res.out_truncated, NULL);
                        if (err_r >= 0)
                                (void) drain(err_r, NULL, NULL, &split);
                        if (stopping)
                                (void) kill(-pid, SIGKILL);
                        break;
                }

                uint64_t now = mono_usec();
                bool asked = !stopping && image_stop_requested(stop);
                if (!stopping && (asked || now >= deadline)) {
                        if (asked)
                                res.interrupted = true;
                        else
                                res.timed_out = true;
                        (void) kill(-pid, SIGTERM);
                        stopping = true;
                        kill_at = now + KILL_GRACE_USEC;
                } else if (stopping && now >= kill_at) {
                        (void) kill(-pid, SIGKILL);
                        kill_at = UINT64_MAX;
                }

                struct pollfd pfd[2];
                nfds_t n = 0;
                if (out_r >= 0)
                        pfd[n++] = (struct pollfd){ .fd = out_r, .events = POLLIN };
                if (err_r >= 0)
                        pfd[n++] = (struct pollfd){ .fd = err_r, .events = POLLIN };
                /* 100 ms at most: the exit and a stop are noticed
                 * by polling, not by SIGCHLD. */
                if (poll(n > 0 ? pfd : NULL, n, 100) < 0 && errno != EINTR) {
                        r = negative_errno();
                        (void) kill(-pid, SIGKILL);
                        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                        break;
                }
                if (out_r >= 0 && drain(out_r, &out, &res.out_truncated, NULL) != 0)
                        out_r = safe_close(out_r);
                if (err_r >= 0 && drain(err_r, NULL, NULL, &split) != 0)
                        err_r = safe_close(err_r);
        }
        if (split.n > 0)
                splitter_line(&split);

        if (r >= 0 && split.oom)
                r = -ENOMEM;
        if (r >= 0) {
                res.out = strbuf_steal(&out);
                if (!res.out)
                        r = -ENOMEM;
        }
        if (r >= 0 && (split.first_error || split.last_any)) {
                res.why = strdup(split.first_error ?: split.last_any);
                if (!res.why)
                        r = -ENOMEM;
        }
        strbuf_done(&out);
        splitter_done(&split);
        if (r < 0) {
                run_done(&res);
                return r;
        }

        if (WIFEXITED(wstatus))
                res.status = WEXITSTATUS(wstatus);
        else if (WIFSIGNALED(wstatus))
                res.status = 128 + WTERMSIG(wstatus);
        else
                res.status = 255;
        *ret = res;
        return 0;
}
