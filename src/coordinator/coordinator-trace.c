/* SPDX-License-Identifier: MIT */
/* The processes started inside the sandbox (issue 19), from gVisor's
 * runtime monitoring: runsc starts the sandbox with a trace session
 * (--pod-init-config) whose remote sink connects to a SOCK_SEQPACKET
 * socket of ours and sends a message at each execve, clone and thread
 * group exit. Each exec becomes a "process"/"started" record, attributed
 * to the session whose process tree it belongs to: a session's first
 * process is the one runsc exec writes to its --internal-pid-file, and
 * clones and execs carry their parent's session on.
 *
 * The sentry is not trusted: it writes, we only read (bounded reads per
 * wakeup, messages of at most TRACE_MSG_MAX bytes, decoded by
 * shared/trace-wire); a flood of execs is recorded at a bounded rate and
 * the rest counted. The sentry never waits on us (its sink drops what the
 * socket cannot take, and says how many). Losing the feed weakens nothing:
 * status says the processes are not observed, and why. */
#include <dirent.h>

#include "coordinator-internal.h"
#include "trace-wire.h"
#include "thread-util.h"

#define TRACE_SOCKET       "sink.sock"
#define TRACE_CONFIG       "trace.json"
#define TRACE_HANDSHAKE_MS 5000
#define TRACE_READS        64 /* messages per wakeup */
#define TRACE_PIDS         16384u /* slots of the tgid -> session map (a power of two) */
#define TRACE_PIDS_FILL    12288u
#define TRACE_RATE         50u /* records a second, after a burst of */
#define TRACE_BURST        500u
#define TRACE_PATH_MAX     512u
#define TRACE_ARG_MAX      256u

struct TracePid {
        int32_t tgid; /* 0: empty */
        uint32_t sid; /* index + 1 in Trace.sids */
};

static size_t pid_slot(int32_t tgid) {
        return ((uint32_t) tgid * 2654435761u) & (TRACE_PIDS - 1);
}

static uint32_t pid_get(const Trace *t, int32_t tgid) {
        if (tgid <= 0 || !t->pids)
                return 0;
        for (size_t i = pid_slot(tgid);; i = (i + 1) & (TRACE_PIDS - 1)) {
                if (t->pids[i].tgid == 0)
                        return 0;
                if (t->pids[i].tgid == tgid)
                        return t->pids[i].sid;
        }
}

static void pid_put(Trace *t, int32_t tgid, uint32_t sid) {
        if (tgid <= 0 || !t->pids)
                return;
        size_t i = pid_slot(tgid);
        for (; t->pids[i].tgid != 0; i = (i + 1) & (TRACE_PIDS - 1))
                if (t->pids[i].tgid == tgid) {
                        t->pids[i].sid = sid;
                        return;
                }
        if (t->n_pids >= TRACE_PIDS_FILL) {
                t->map_full++;
                return;
        }
        t->pids[i] = (struct TracePid){ tgid, sid };
        t->n_pids++;
}

/* Linear probing's deletion: the entries behind move up, no tombstones. */
static void pid_del(Trace *t, int32_t tgid) {
        if (tgid <= 0 || !t->pids)
                return;
        size_t i = pid_slot(tgid);
        for (; t->pids[i].tgid != tgid; i = (i + 1) & (TRACE_PIDS - 1))
                if (t->pids[i].tgid == 0)
                        return;
        for (size_t j = i;;) {
                t->pids[i].tgid = 0;
                for (;;) {
                        j = (j + 1) & (TRACE_PIDS - 1);
                        if (t->pids[j].tgid == 0) {
                                t->n_pids--;
                                return;
                        }
                        size_t k = pid_slot(t->pids[j].tgid);
                        /* j's entry may move to i when its home k is not
                         * in the cyclic range (i, j]. */
                        if (i <= j ? (k <= i || k > j) : (k <= i && k > j))
                                break;
                }
                t->pids[i] = t->pids[j];
                i = j;
        }
}

static int trace_write_config(Trace *t, const char *endpoint) {
        json_t *ctx_exec = json_pack("[s, s, s, s, s, s, s]", "time", "group_id", "container_id", "credentials", "cwd",
                                     "parent_thread_group_id", "is_exec_session");
        json_t *j =
                json_pack("{s:{s:s, s:[{s:s, s:o}, {s:s, s:[s, s, s]}, {s:s, s:[s]}], s:[{s:s, s:{s:s, s:i}, s:b}]}}",
                          "trace_session", "name", "Default", "points", "name", "sentry/execve", "context_fields",
                          ctx_exec, "name", "sentry/clone", "context_fields", "group_id", "parent_thread_group_id",
                          "is_exec_session", "name", "sentry/exit_notify_parent", "context_fields", "group_id", "sinks",
                          "name", "remote", "config", "endpoint", endpoint, "retries", 0, "ignore_setup_error", 1);
        if (!j)
                return -ENOMEM;
        char *text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!text)
                return -ENOMEM;
        _cleanup_free_ char *path = path_join(t->dir, TRACE_CONFIG);
        int r = path ? write_file_atomic(path, text, strlen(text), 0600, 0) : -ENOMEM;
        free(text);
        return r;
}

static void trace_remove_dir(const char *dir) {
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return;
        DIR *d = fdopendir(dfd);
        if (!d)
                return;
        dfd = -EBADF;
        struct dirent *e;
        while ((e = readdir(d)))
                if (!streq(e->d_name, ".") && !streq(e->d_name, ".."))
                        (void) unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
        (void) rmdir(dir);
}

/* Until runsc has connected: accept its one connection and answer its
 * Handshake. runsc's create connects while `podman run` runs, so a
 * thread does it beside the coordinator's wait for Podman. */
static void *trace_accept(void *arg) {
        Trace *t = arg;
        struct pollfd p[2] = { { .fd = t->listen_fd, .events = POLLIN }, { .fd = t->cancel[0], .events = POLLIN } };
        for (;;) {
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        snprintf(t->thread_error, sizeof(t->thread_error), "poll: %s", strerror(errno));
                        return NULL;
                }
                if (p[1].revents)
                        return NULL;
                if (p[0].revents)
                        break;
        }
        _cleanup_close_ int fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
                snprintf(t->thread_error, sizeof(t->thread_error), "accept: %s", strerror(errno));
                return NULL;
        }
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != geteuid()) {
                snprintf(t->thread_error, sizeof(t->thread_error), "the sink's peer is not this user");
                return NULL;
        }
        struct pollfd q[2] = { { .fd = fd, .events = POLLIN }, { .fd = t->cancel[0], .events = POLLIN } };
        int k;
        while ((k = poll(q, 2, TRACE_HANDSHAKE_MS)) < 0 && errno == EINTR)
                ;
        if (k <= 0 || q[1].revents || !(q[0].revents & POLLIN)) {
                snprintf(t->thread_error, sizeof(t->thread_error), "runsc sent no handshake");
                return NULL;
        }
        uint8_t buf[256];
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_TRUNC | MSG_DONTWAIT);
        uint32_t version = 0;
        if (n < 0 || (size_t) n > sizeof(buf) || trace_handshake_parse(buf, (size_t) n, &version) < 0 ||
            version < TRACE_WIRE_VERSION) {
                snprintf(t->thread_error, sizeof(t->thread_error), "runsc's handshake is not version %u or later",
                         TRACE_WIRE_VERSION);
                return NULL;
        }
        size_t hl = trace_handshake_write(buf, TRACE_WIRE_VERSION);
        if (send(fd, buf, hl, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t) hl) {
                snprintf(t->thread_error, sizeof(t->thread_error), "cannot answer runsc's handshake: %s",
                         strerror(errno));
                return NULL;
        }
        t->thread_fd = TAKE_FD(fd);
        return NULL;
}

static char *trace_dir(const Coordinator *co) {
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "%s/lazaret_trace_%s", co->spec.runtime_dir, co->spec.domain_hash);
        return strbuf_steal(&b);
}

void trace_remove_stale(Coordinator *co) {
        _cleanup_free_ char *dir = trace_dir(co);
        if (dir)
                trace_remove_dir(dir);
}

int trace_begin(Coordinator *co, char **ret_config) {
        Trace *t = &co->trace;
        *ret_config = NULL;
        if (!co->events) {
                snprintf(t->why, sizeof(t->why), "there is no event record to keep them");
                return 0;
        }
        t->dir = trace_dir(co);
        if (!t->dir)
                return -ENOMEM;
        trace_remove_dir(t->dir); /* an earlier coordinator's */
        _cleanup_free_ char *sock = path_join(t->dir, TRACE_SOCKET);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (!sock)
                return -ENOMEM;
        if (strlen(sock) >= sizeof(sa.sun_path)) {
                snprintf(t->why, sizeof(t->why), "the trace socket's path is too long: %s", sock);
                return 0;
        }
        memcpy(sa.sun_path, sock, strlen(sock) + 1);
        if (mkdir(t->dir, 0700) < 0) {
                snprintf(t->why, sizeof(t->why), "cannot make %s: %s", t->dir, strerror(errno));
                return 0;
        }
        t->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (t->listen_fd < 0 || bind(t->listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            listen(t->listen_fd, 1) < 0) {
                snprintf(t->why, sizeof(t->why), "cannot listen on %s: %s", sock, strerror(errno));
                t->listen_fd = safe_close(t->listen_fd);
                return 0;
        }
        int r = trace_write_config(t, sock);
        if (r < 0) {
                snprintf(t->why, sizeof(t->why), "cannot write the trace session's configuration: %s", strerror(-r));
                t->listen_fd = safe_close(t->listen_fd);
                return 0;
        }
        if (pipe2(t->cancel, O_CLOEXEC) < 0) {
                snprintf(t->why, sizeof(t->why), "pipe: %s", strerror(errno));
                t->listen_fd = safe_close(t->listen_fd);
                return 0;
        }
        t->thread_fd = -EBADF;
        int e = thread_create_no_signals(&t->thread, trace_accept, t);
        if (e < 0) {
                snprintf(t->why, sizeof(t->why), "cannot start a thread: %s", strerror(-e));
                t->listen_fd = safe_close(t->listen_fd);
                return 0;
        }
        t->thread_running = true;
        *ret_config = path_join(t->dir, TRACE_CONFIG);
        return *ret_config ? 0 : -ENOMEM;
}

/* The sandbox has started (started) or not: runsc has connected by now,
 * or never will. */
void trace_attached(Coordinator *co, bool started) {
        Trace *t = &co->trace;
        if (t->thread_running) {
                if (write(t->cancel[1], "x", 1) < 0)
                        log_warning("cannot stop the trace thread: %s", strerror(errno));
                (void) pthread_join(t->thread, NULL);
                t->thread_running = false;
        }
        safe_close(t->cancel[0]);
        safe_close(t->cancel[1]);
        t->cancel[0] = t->cancel[1] = -EBADF;
        t->listen_fd = safe_close(t->listen_fd);
        _cleanup_free_ char *sock = t->dir ? path_join(t->dir, TRACE_SOCKET) : NULL;
        if (sock)
                (void) unlink(sock); /* nobody else is to connect */
        if (!started) {
                t->thread_fd = safe_close(t->thread_fd);
                if (t->fd < 0 && t->dir) {
                        trace_remove_dir(t->dir); /* the start failed: nothing of it stays */
                        t->dir = mfree(t->dir);
                }
                return;
        }
        if (t->thread_fd < 0) {
                if (!t->why[0])
                        snprintf(t->why, sizeof(t->why), "runsc did not connect to the trace socket%s%s",
                                 t->thread_error[0] ? ": " : "", t->thread_error);
                log_warning("the processes inside are not observed: %s", t->why);
                return;
        }
        t->pids = calloc(TRACE_PIDS, sizeof(*t->pids));
        t->buf = malloc(TRACE_MSG_MAX);
        if (!t->pids || !t->buf) {
                snprintf(t->why, sizeof(t->why), "out of memory");
                t->thread_fd = safe_close(t->thread_fd);
                return;
        }
        t->fd = TAKE_FD(t->thread_fd);
        int fl = fcntl(t->fd, F_GETFL);
        if (fl >= 0)
                (void) fcntl(t->fd, F_SETFL, fl | O_NONBLOCK);
        t->tokens = TRACE_BURST;
        t->refill_usec = now_usec();
        log_info("the processes inside are observed (gVisor's trace points)");
}

int trace_watch(Coordinator *co) {
        Trace *t = &co->trace;
        if (t->fd < 0 || co->epfd < 0)
                return 0;
        t->w = (Watch){ WATCH_TRACE, co };
        return co_epoll_add(co, t->fd, EPOLLIN, &t->w);
}

void trace_end(Coordinator *co) {
        Trace *t = &co->trace;
        trace_attached(co, false);
        if (t->fd >= 0) {
                co_trace_readable(co); /* what it sent last */
                t->fd = co_close_watched(co, t->fd);
                if (!t->why[0])
                        snprintf(t->why, sizeof(t->why), "the sandbox has stopped");
        }
        if (t->dir)
                trace_remove_dir(t->dir);
        t->dir = mfree(t->dir);
        t->pids = mfree(t->pids);
        t->buf = mfree(t->buf);
        free(t->sids);
        t->sids = NULL;
        t->n_sids = 0;
}

char *trace_pid_file(const Coordinator *co, const Session *s) {
        if (co->trace.fd < 0 || !co->trace.dir)
                return NULL;
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "%s/%s.pid", co->trace.dir, s->id);
        return strbuf_steal(&b);
}

/* s's first process in the sandbox, from runsc exec's pid file, once it
 * is there. */
static int32_t session_guest_pid(Coordinator *co, Session *s) {
        if (s->guest_pid || co->trace.fd < 0)
                return s->guest_pid;
        _cleanup_free_ char *path = trace_pid_file(co, s);
        _cleanup_close_ int fd = path ? open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -EBADF;
        char buf[24];
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        char *end;
        long v = strtol(buf, &end, 10);
        if (v > 0 && v <= INT32_MAX && (*end == '\0' || *end == '\n'))
                s->guest_pid = (int32_t) v;
        return s->guest_pid;
}

uint32_t trace_session_sid(Coordinator *co, Session *s) {
        Trace *t = &co->trace;
        if (s->trace_sid)
                return s->trace_sid;
        char(*v)[37] = reallocarray(t->sids, t->n_sids + 1, sizeof(*t->sids));
        if (!v)
                return 0;
        t->sids = v;
        memcpy(t->sids[t->n_sids], s->id, sizeof(s->id));
        s->trace_sid = (uint32_t) ++t->n_sids;
        return s->trace_sid;
}

/* A session's first process: not an exec of its own (runsc exec makes
 * it), known by its pid. */
static uint32_t session_root(Coordinator *co, int32_t pid) {
        if (pid <= 0)
                return 0;
        for (Session *s = co->sessions; s; s = s->next)
                if (session_guest_pid(co, s) == pid) {
                        uint32_t sid = trace_session_sid(co, s);
                        pid_put(&co->trace, pid, sid);
                        return sid;
                }
        return 0;
}

/* The parent's session first: an entry of the process's own pid may be a
 * dead process's whose exit gVisor's sink dropped (the pid since reused). */
static uint32_t attribute(Coordinator *co, const TraceContext *c) {
        Trace *t = &co->trace;
        uint32_t sid = pid_get(t, c->ppid);
        if (!sid)
                sid = pid_get(t, c->tgid);
        if (!sid && c->exec_session) {
                sid = session_root(co, c->ppid);
                if (!sid)
                        sid = session_root(co, c->tgid);
        }
        if (sid)
                pid_put(t, c->tgid, sid);
        return sid;
}

static json_t *bounded(TraceBytes b, size_t max, bool *cut) {
        if (!b.p)
                return json_null();
        if (b.len > max)
                *cut = true;
        return event_string(b.p, MIN(b.len, max));
}

bool trace_take_token(Trace *t) {
        uint64_t now = now_usec();
        uint64_t add = (now - t->refill_usec) * TRACE_RATE / 1000000;
        if (add > 0) {
                t->tokens = MIN(t->tokens + add, (uint64_t) TRACE_BURST);
                t->refill_usec = now;
        }
        if (t->tokens == 0)
                return false;
        t->tokens--;
        return true;
}

static void trace_exec(Coordinator *co, const TraceMessage *m) {
        Trace *t = &co->trace;
        uint32_t sid = attribute(co, &m->ctx);
        if (!sid)
                t->unattributed++;
        if (!trace_take_token(t)) {
                t->over_rate++;
                t->unreported++;
                return;
        }
        bool cut = m->truncated;
        json_t *argv = json_array();
        for (size_t i = 0; argv && i < MIN(m->argc, (size_t) TRACE_ARGV_MAX); i++)
                json_array_append_new(argv, bounded(m->argv[i], TRACE_ARG_MAX, &cut));
        json_t *d = json_pack("{s:i, s:i, s:o, s:o*, s:I, s:o, s:I, s:I}", "pid", (int) m->ctx.tgid, "ppid",
                              (int) m->ctx.ppid, "path", bounded(m->path, TRACE_PATH_MAX, &cut), "argv", argv, "argc",
                              (json_int_t) m->argc, "cwd", bounded(m->ctx.cwd, TRACE_PATH_MAX, &cut), "uid",
                              (json_int_t) m->ctx.uid, "gid", (json_int_t) m->ctx.gid);
        if (d && (cut || m->argc > TRACE_ARGV_MAX))
                json_object_set_new(d, "cut", json_true());
        if (d && co->egress_probing)
                json_object_set_new(d, "probe", json_true());
        if (d && t->unreported) {
                json_object_set_new(d, "not_recorded", json_integer((json_int_t) t->unreported));
                t->unreported = 0;
        }
        if (d && t->sink_unreported) {
                json_object_set_new(d, "dropped_by_gvisor", json_integer((json_int_t) t->sink_unreported));
                t->sink_unreported = 0;
        }
        if (event_emit(co->events, "process", "started", sid ? t->sids[sid - 1] : NULL, d))
                t->recorded++;
}

static void trace_message(Coordinator *co, const uint8_t *buf, size_t len, bool cut) {
        Trace *t = &co->trace;
        TraceMessage m;
        if (trace_message_parse(buf, len, cut, &m) < 0) {
                t->malformed++;
                return;
        }
        /* The sink's count of points it could not send (it wraps). */
        uint32_t lost = m.dropped - t->last_dropped;
        t->last_dropped = m.dropped;
        t->sink_dropped += lost;
        t->sink_unreported += lost;
        switch (m.type) {
        case TRACE_MSG_EXEC:
                t->execs++;
                trace_exec(co, &m);
                break;
        case TRACE_MSG_CLONE:
                /* A new thread group carries its parent's session on. */
                if (!(m.clone_flags & TRACE_CLONE_THREAD)) {
                        uint32_t sid = attribute(co, &m.ctx);
                        if (sid)
                                pid_put(t, m.child_tgid, sid);
                }
                break;
        case TRACE_MSG_EXIT:
                pid_del(t, m.ctx.tgid);
                break;
        default:
                break;
        }
}

void co_trace_readable(Coordinator *co) {
        Trace *t = &co->trace;
        for (int i = 0; t->fd >= 0 && i < TRACE_READS; i++) {
                struct iovec iov = { t->buf, TRACE_MSG_MAX };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
                ssize_t n = recvmsg(t->fd, &mh, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        /* The sandbox is gone, or its sentry closed the
                         * sink: nothing more comes. */
                        t->fd = co_close_watched(co, t->fd);
                        snprintf(t->why, sizeof(t->why), "%s",
                                 n < 0 ? "the trace connection failed" : "gVisor closed the trace connection");
                        log_info("the processes inside are no longer observed: %s", t->why);
                        return;
                }
                trace_message(co, t->buf, (size_t) n, (mh.msg_flags & MSG_TRUNC) != 0);
        }
}

void trace_session_gone(Coordinator *co, const Session *s) {
        _cleanup_free_ char *path = trace_pid_file(co, s);
        if (path)
                (void) unlink(path);
}

json_t *trace_status(const Coordinator *co) {
        const Trace *t = &co->trace;
        if (t->fd < 0)
                return json_pack("{s:b, s:s}", "observed", 0, "why", t->why[0] ? t->why : "not set up");
        return json_pack("{s:b, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "observed", 1, "via",
                         "gVisor's trace points (runsc's remote sink)", "execs", (json_int_t) t->execs, "recorded",
                         (json_int_t) t->recorded, "over_rate", (json_int_t) t->over_rate, "dropped_by_gvisor",
                         (json_int_t) t->sink_dropped, "unattributed", (json_int_t) t->unattributed, "malformed",
                         (json_int_t) t->malformed);
}

int co_trace_begin_hook(void *host, char **ret_config) {
        return trace_begin(host, ret_config);
}

void co_trace_attached_hook(void *host, bool started) {
        trace_attached(host, started);
}
