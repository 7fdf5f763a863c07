/* SPDX-License-Identifier: MIT */
#include "dispenser.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "argv-util.h"
#include "dispense.h"
#include "exec-util.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"
#include "thread-util.h"

#define EXEC_USEC        (UINT64_C(30) * 1000000)
#define RESTART_MIN_USEC (UINT64_C(2) * 1000000)
#define RESTART_MAX_USEC (UINT64_C(30) * 1000000)

struct Dispenser {
        char *runsc, *runsc_root, *sandbox_id, *escalate_socket, *broker_socket, *fsmonitor_socket;
        bool rootless;
        int ctl; /* our end of the socket pair, nonblocking */
        int stop_fd; /* eventfd: the thread ends */
        uint64_t started_usec, backoff_usec;
        unsigned restarts;
        bool thread_started;
        pthread_t thread;
};

static void free_fields(Dispenser *d) {
        free(d->runsc);
        free(d->runsc_root);
        free(d->sandbox_id);
        free(d->escalate_socket);
        free(d->broker_socket);
        free(d->fsmonitor_socket);
        safe_close(d->ctl);
        safe_close(d->stop_fd);
        free(d);
}

/* runsc exec --detach the dispenser with the other end of a new socket
 * pair, and wait for its DISPENSE_READY. */
static int run_in_sandbox(Dispenser *d, char **ret_error) {
        _cleanup_close_ int ours = -EBADF, theirs = -EBADF;
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
                return negative_errno();
        ours = sp[0];
        theirs = sp[1];
        char services[4] = {}, *s = services;
        if (d->escalate_socket)
                *s++ = DISPENSE_ESCALATE;
        if (d->broker_socket)
                *s++ = DISPENSE_BROKER;
        if (d->fsmonitor_socket)
                *s++ = DISPENSE_FSMONITOR;
        Argv a = {};
        argv_add(&a, "runsc");
        argv_addf(&a, "--root=%s", d->runsc_root);
        if (d->rootless)
                argv_add(&a, "--ignore-cgroups");
        argv_add(&a, "exec");
        argv_add(&a, "--detach");
        /* Root in the sandbox: DISPENSE_DIR (a tmpfs, mode 0755) is
         * root's, so an agent of another uid cannot take the sockets. */
        argv_add(&a, "--user=0:0");
        argv_add(&a, "--pass-fd=3:3");
        argv_add(&a, d->sandbox_id);
        argv_add(&a, "/run/lazaret/init");
        argv_add(&a, "--dispense");
        argv_add(&a, "3");
        argv_add(&a, services);
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture_fds(d->runsc, (const char *const *) a.v, &theirs, 1, EXEC_USEC, &res);
        argv_done(&a);
        theirs = safe_close(theirs);
        if (r < 0)
                return r;
        if (exec_result_failed(&res)) {
                const char *e = res.err && *res.err ? res.err : res.out ? res.out : "";
                StrBuf b = STRBUF_INIT;
                strbuf_printf(&b, "runsc exec of the sandbox's dispenser failed: %.*s", (int) strcspn(e, "\n"), e);
                *ret_error = strbuf_steal(&b);
                return -EIO;
        }
        struct pollfd p = { .fd = ours, .events = POLLIN };
        char c = 0;
        if (poll(&p, 1, DISPENSE_TIMEOUT_MS) <= 0 || read(ours, &c, 1) != 1 || c != DISPENSE_READY) {
                *ret_error = strdup("the sandbox's dispenser did not start listening within 10 s");
                return -ETIMEDOUT;
        }
        if (fcntl(ours, F_SETFL, O_NONBLOCK) < 0)
                return negative_errno();
        d->ctl = TAKE_FD(ours);
        d->started_usec = now_usec();
        return 0;
}

/* A connected, blocking descriptor to path; or -errno. */
static int connect_host(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        /* A Unix stream connect completes at once or fails (EAGAIN: the
         * backlog is full): never blocks us. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return negative_errno();
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

/* The requests that came: false when the channel must close (the
 * sandbox's end closed, or spoke out of turn). */
static bool answer(Dispenser *d) {
        char buf[64];
        ssize_t n = read(d->ctl, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return true;
        if (n <= 0)
                return false;
        for (ssize_t i = 0; i < n; i++) {
                const char *path = buf[i] == DISPENSE_ESCALATE    ? d->escalate_socket
                                   : buf[i] == DISPENSE_BROKER    ? d->broker_socket
                                   : buf[i] == DISPENSE_FSMONITOR ? d->fsmonitor_socket
                                                                  : NULL;
                if (!path) {
                        log_warning("the sandbox's dispenser asked for something it may not (byte 0x%02x); closed",
                                    (unsigned char) buf[i]);
                        return false;
                }
                int fd = connect_host(path);
                int r = dispense_send(d->ctl, fd < 0 ? (uint8_t) MIN(-fd, 255) : 0, fd);
                safe_close(fd);
                if (r < 0) {
                        /* Its answers unread (EAGAIN), or gone. */
                        if (r != -EPIPE && r != -ECONNRESET)
                                log_warning("cannot answer the sandbox's dispenser: %s; closed", strerror(-r));
                        return false;
                }
        }
        return true;
}

/* Wait for usec, or until asked to stop: false when stopping. */
static bool sleep_unless_stopped(Dispenser *d, uint64_t usec) {
        struct pollfd p = { .fd = d->stop_fd, .events = POLLIN };
        int k;
        do
                k = poll(&p, 1, (int) (usec / 1000));
        while (k < 0 && errno == EINTR);
        return k == 0;
}

static void *thread_main(void *userdata) {
        Dispenser *d = userdata;
        for (;;) {
                if (d->ctl >= 0) {
                        struct pollfd p[2] = { { .fd = d->stop_fd, .events = POLLIN },
                                               { .fd = d->ctl, .events = POLLIN } };
                        if (poll(p, 2, -1) < 0) {
                                if (errno == EINTR)
                                        continue;
                                return NULL;
                        }
                        if (p[0].revents)
                                return NULL;
                        if (!p[1].revents || answer(d))
                                continue;
                        d->ctl = safe_close(d->ctl);
                        continue;
                }
                /* The sandbox's end is gone: run it again, not too often. */
                uint64_t next = d->started_usec + d->backoff_usec, now = now_usec();
                if (!sleep_unless_stopped(d, next > now ? next - now : 0))
                        return NULL;
                _cleanup_free_ char *err = NULL;
                int r = run_in_sandbox(d, &err);
                if (r < 0) {
                        d->started_usec = now_usec();
                        d->backoff_usec = MIN(d->backoff_usec * 2, RESTART_MAX_USEC);
                        log_warning("cannot run the sandbox's dispenser again: %s", err ? err : strerror(-r));
                        continue;
                }
                d->backoff_usec = RESTART_MIN_USEC;
                log_info("the sandbox's dispenser ended; running again (%u)", ++d->restarts);
        }
}

int dispenser_start(const DispenserConfig *c, Dispenser **ret, char **ret_error) {
        Dispenser *d = calloc(1, sizeof(Dispenser));
        if (!d)
                return -ENOMEM;
        d->ctl = d->stop_fd = -EBADF;
        d->rootless = c->rootless;
        d->backoff_usec = RESTART_MIN_USEC;
        if (!(d->runsc = strdup(c->runsc)) || !(d->runsc_root = strdup(c->runsc_root)) ||
            !(d->sandbox_id = strdup(c->sandbox_id)) ||
            (c->escalate_socket && !(d->escalate_socket = strdup(c->escalate_socket))) ||
            (c->broker_socket && !(d->broker_socket = strdup(c->broker_socket))) ||
            (c->fsmonitor_socket && !(d->fsmonitor_socket = strdup(c->fsmonitor_socket)))) {
                free_fields(d);
                return -ENOMEM;
        }
        d->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        int r = d->stop_fd < 0 ? negative_errno() : run_in_sandbox(d, ret_error);
        if (r < 0) {
                free_fields(d);
                return r;
        }
        r = thread_create_no_signals(&d->thread, thread_main, d);
        if (r < 0) {
                free_fields(d);
                return r;
        }
        d->thread_started = true;
        *ret = d;
        return 0;
}

Dispenser *dispenser_stop(Dispenser *d) {
        if (!d)
                return NULL;
        if (d->thread_started) {
                uint64_t one = 1;
                (void) !write(d->stop_fd, &one, sizeof one);
                (void) pthread_join(d->thread, NULL);
        }
        free_fields(d);
        return NULL;
}
