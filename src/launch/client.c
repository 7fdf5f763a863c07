/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "client.h"
#include "ctl-key.h"
#include "exec-util.h"
#include "fd-util.h"
#include "log.h"
#include "path-util.h"
#include "runtime-dir.h"
#include "spawn-util.h"
#include "strbuf.h"

#define SPAWN_TIMEOUT_USEC (UINT64_C(10) * 1000000)
/* The longest a "wait" line may ask for. */
#define SPAWN_STEP_MAX_SEC 600u
#define FOLLOW_TIMEOUT_SEC 60

static void on_alarm(int sig) {
        (void) sig;
}

int write_all(int fd, const void *buf, size_t n) {
        const uint8_t *p = buf;
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                                (void) poll(&pfd, 1, -1);
                                continue;
                        }
                        return negative_errno();
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

int client_connect(const char *socket_path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = negative_errno();
                safe_close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

int client_send(int fd, const CtlMessage *m) {
        _cleanup_free_ uint8_t *frame = NULL;
        size_t len = 0;
        int r = ctl_message_encode(m, &frame, &len);
        if (r < 0)
                return r;
        return write_all(fd, frame, len);
}

int client_send_hello(int fd, const char *socket_path, CtlMessage *hello, char **ret_error) {
        _cleanup_free_ char *key_path = ctl_key_path(socket_path);
        char key[CTL_KEY_TEXT + 1];
        *ret_error = NULL;
        if (!key_path)
                return -ENOMEM;
        int r = ctl_key_read(key_path, key);
        if (r < 0) {
                StrBuf b = STRBUF_INIT;
                if (r == -ENOENT)
                        strbuf_printf(&b,
                                      "the control socket's key %s is missing (its coordinator was made by another "
                                      "lazaret, or is stopping); run 'lazaret stop', then run again",
                                      key_path);
                else if (r == -EACCES)
                        strbuf_printf(&b,
                                      "cannot read the control socket's key %s: permission denied (this process is "
                                      "confined, or runs as another user); run lazaret as yourself outside every "
                                      "sandbox",
                                      key_path);
                else
                        strbuf_printf(&b,
                                      "the control socket's key %s is not one Lazaret made (%s): it must be a "
                                      "regular file of yours, mode 0600; run 'lazaret stop', then run again",
                                      key_path, r == -EBADMSG ? "no key in it" : strerror(-r));
                *ret_error = strbuf_steal(&b);
                return r;
        }
        hello->key = key;
        r = client_send(fd, hello);
        hello->key = NULL;
        OPENSSL_cleanse(key, sizeof(key));
        return r;
}

int client_recv(int fd, CtlReader *rd, CtlMessage *ret, int timeout_ms) {
        for (;;) {
                const uint8_t *p;
                size_t len;
                int k = ctl_reader_next(rd, &p, &len);
                if (k < 0)
                        return k;
                if (k > 0) {
                        const char *why = NULL;
                        return ctl_message_decode(p, len, ret, &why);
                }
                if (timeout_ms >= 0) {
                        struct pollfd pfd = { .fd = fd, .events = POLLIN };
                        int n = poll(&pfd, 1, timeout_ms);
                        if (n == 0)
                                return -ETIMEDOUT;
                        if (n < 0 && errno != EINTR)
                                return negative_errno();
                }
                uint8_t buf[65536];
                size_t room = ctl_reader_room(rd);
                ssize_t n = read(fd, buf, room < sizeof(buf) && room > 0 ? room : sizeof(buf));
                if (n == 0)
                        return -ECONNRESET;
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return negative_errno();
                }
                k = ctl_reader_feed(rd, buf, (size_t) n);
                if (k < 0)
                        return k;
        }
}

_printf_(2, 3) static int fail(char **ret_error, const char *fmt, ...) {
        StrBuf b = STRBUF_INIT;
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(&b, fmt, ap);
        va_end(ap);
        *ret_error = strbuf_steal(&b);
        return *ret_error ? -EIO : -ENOMEM;
}

/* The spec as a sealed memfd: the coordinator reads exactly what the leader
 * validated. */
static int spec_memfd(const LaunchSpec *spec, int *ret_fd) {
        char *text = NULL;
        size_t len = 0;
        int r = launch_spec_serialize(spec, &text, &len);
        if (r < 0)
                return r;
        int fd = memfd_create("lazaret-launch-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0) {
                free(text);
                return negative_errno();
        }
        r = write_all(fd, text, len);
        free(text);
        if (r >= 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                r = negative_errno();
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

/* Start the coordinator fully detached: a new session, no controlling
 * terminal (the double fork), stdio to the log in the Domain Root. Returns
 * the read end of its status pipe. */
static int spawn_coordinator(const LaunchSpec *spec, int *ret_status_fd, char **ret_error) {
        _cleanup_close_ int spec_fd = -EBADF, log_fd = -EBADF, st_r = -EBADF, st_w = -EBADF;
        const char *why = NULL;
        char self[PATH_MAX];
        int p[2], r;

        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n < 0)
                return negative_errno();
        self[n] = '\0';

        r = private_dir(spec->domain_dir, &why);
        if (r == -EPERM)
                return fail(ret_error, "the domain directory %s %s", spec->domain_dir, why);
        if (r < 0)
                return fail(ret_error, "cannot create the domain directory %s: %s", spec->domain_dir, strerror(-r));
        _cleanup_free_ char *log_path = path_join(spec->domain_dir, "coordinator.log");
        if (!log_path)
                return -ENOMEM;
        log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (log_fd < 0)
                return fail(ret_error, "cannot open %s: %s", log_path, strerror(errno));
        r = spec_memfd(spec, &spec_fd);
        if (r < 0)
                return r;
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        st_r = p[0];
        st_w = p[1];

        /* Detached (not our child: it outlives this CLI), in / , its log
         * as stdout and stderr, the LaunchSpec and the status pipe. */
        SpawnFd fds[] = {
                { log_fd, 1 },
                { log_fd, 2 },
                { spec_fd, COORDINATOR_SPEC_FD },
                { st_w, COORDINATOR_STATUS_FD },
        };
        SpawnSpec sp = SPAWN_SPEC_INIT(self, (char *const[]){ (char *) "lazaret", (char *) "__coordinator", NULL });
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.cwd = "/";
        sp.detach = true;
        r = spawn(&sp, NULL);
        if (r < 0)
                return fail(ret_error, "cannot start the coordinator process: %s", strerror(-r));
        *ret_status_fd = TAKE_FD(st_r);
        return 0;
}

/* Wait for the coordinator's "ok" (or its error line) within the limit.
 * Before a step that may take longer (making the agent's worktree of a
 * large repository) the coordinator writes "wait SECONDS STEP", which sets
 * the limit from then on and names the step a timeout reports. */
static int await_coordinator(const LaunchSpec *spec, int status_fd, char **ret_error) {
        char buf[2048], step[256] = "start";
        size_t len = 0;
        uint64_t deadline = now_usec() + SPAWN_TIMEOUT_USEC, limit = SPAWN_TIMEOUT_USEC;
        for (;;) {
                char *nl;
                while ((nl = memchr(buf, '\n', len))) {
                        *nl = '\0';
                        unsigned secs = 0;
                        int used = 0;
                        if (strcmp(buf, "ok") == 0)
                                return 0;
                        if (strncmp(buf, "error: ", 7) == 0)
                                return fail(ret_error, "%s", buf + 7);
                        if (strncmp(buf, "warn ", 5) == 0) {
                                log_warning("%s", buf + 5);
                                size_t rest = len - (size_t) (nl + 1 - buf);
                                memmove(buf, nl + 1, rest);
                                len = rest;
                                continue;
                        }
                        if (sscanf(buf, "wait %u %n", &secs, &used) != 1 || used == 0 || secs == 0 ||
                            secs > SPAWN_STEP_MAX_SEC)
                                return fail(ret_error, "the coordinator exited during start; see %s/coordinator.log",
                                            spec->domain_dir);
                        snprintf(step, sizeof(step), "%s", buf + used);
                        limit = (uint64_t) secs * 1000000;
                        deadline = now_usec() + limit;
                        size_t rest = len - (size_t) (nl + 1 - buf);
                        memmove(buf, nl + 1, rest);
                        len = rest;
                }
                uint64_t now = now_usec();
                if (now >= deadline)
                        return fail(ret_error,
                                    "the coordinator did not accept connections within %u s (%s); see "
                                    "%s/coordinator.log",
                                    (unsigned) (limit / 1000000), step, spec->domain_dir);
                if (len >= sizeof(buf) - 1)
                        return fail(ret_error, "the coordinator exited during start; see %s/coordinator.log",
                                    spec->domain_dir);
                struct pollfd pfd = { .fd = status_fd, .events = POLLIN };
                int n = poll(&pfd, 1, (int) ((deadline - now) / 1000) + 1);
                if (n < 0 && errno != EINTR)
                        return negative_errno();
                if (n <= 0)
                        continue;
                ssize_t k = read(status_fd, buf + len, sizeof(buf) - 1 - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        /* Closed without "ok": whatever came last is the
                         * reason, if it is one. */
                        buf[len] = '\0';
                        if (strncmp(buf, "error: ", 7) == 0)
                                return fail(ret_error, "%s", buf + 7);
                        return fail(ret_error, "the coordinator exited during start; see %s/coordinator.log",
                                    spec->domain_dir);
                }
                len += (size_t) k;
        }
}

int client_connect_or_spawn(const LaunchSpec *spec, int *ret_fd, char **ret_error) {
        _cleanup_close_ int lock = open(spec->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        int fd = -EBADF, r;

        if (lock < 0)
                return fail(ret_error, "cannot open the lock file %s: %s", spec->lock_path, strerror(errno));

        if (flock(lock, LOCK_EX | LOCK_NB) == 0) {
                /* Leader: a live coordinator may already listen. */
                if (client_connect(spec->socket_path, &fd) >= 0) {
                        *ret_fd = fd;
                        return 0; /* the lock goes with the fd's close */
                }
                _cleanup_close_ int status_fd = -EBADF;
                r = spawn_coordinator(spec, &status_fd, ret_error);
                if (r < 0)
                        return r;
                r = await_coordinator(spec, status_fd, ret_error);
                if (r < 0)
                        return r;
                r = client_connect(spec->socket_path, &fd);
                if (r < 0)
                        return fail(ret_error, "cannot connect to the coordinator at %s: %s", spec->socket_path,
                                    strerror(-r));
                *ret_fd = fd;
                return 1; /* hold-to-bind: the lock is released only now */
        }
        if (errno != EWOULDBLOCK)
                return fail(ret_error, "cannot lock %s: %s", spec->lock_path, strerror(errno));

        /* Follower: block on the lock until the leader has bound the
         * socket (spec §4.3.5), with an alarm as the limit. */
        struct sigaction sa = { .sa_handler = on_alarm }, old;
        sigemptyset(&sa.sa_mask); /* no SA_RESTART: the alarm interrupts flock */
        (void) sigaction(SIGALRM, &sa, &old);
        alarm(FOLLOW_TIMEOUT_SEC);
        r = flock(lock, LOCK_EX);
        int e = errno;
        alarm(0);
        (void) sigaction(SIGALRM, &old, NULL);
        if (r < 0 && e == EINTR)
                return fail(ret_error, "another lazaret has held %s for %d s; is it stuck?", spec->lock_path,
                            FOLLOW_TIMEOUT_SEC);
        if (r < 0)
                return fail(ret_error, "cannot lock %s: %s", spec->lock_path, strerror(e));
        (void) flock(lock, LOCK_UN);
        r = client_connect(spec->socket_path, &fd);
        if (r < 0)
                return r; /* the caller retries as a leader */
        *ret_fd = fd;
        return 0;
}
