/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "coordinator.h"
#include "disk-watch.h"
#include "ctl-proto.h"
#include "exec-util.h"
#include "host-git.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "path-util.h"
#include "router-run.h"
#include "state-anchor.h"
#include "escalation.h"
#include "participant.h"
#include "session-anchor.h"
#include "spawn-util.h"
#include "runtime-dir.h"
#include "netpolicy-digest.h"
#include "netpolicy.h"
#include "host-addr.h"
#include "sandbox-limits.h"
#include "sandbox.h"
#include "sidecar.h"
#include "store.h"
#include "strbuf.h"
#include "string-util.h"

#define MAX_CONNECTIONS   64
#define OUT_QUEUE_MAX     (1024u * 1024u) /* stop reading a session while its CLI lags this much */
#define IN_QUEUE_MAX      (1024u * 1024u) /* input not yet taken by the session */
#define READ_CHUNK        (64u * 1024u)
#define IDLE_USEC         (UINT64_C(30) * 1000000) /* no session at all for this long: tear down */
#define DRAIN_USEC        (UINT64_C(200) * 1000) /* output still arriving after the exec client exited */
#define HANGUP_GRACE_USEC (UINT64_C(2) * 1000000)
#define STORE_WAIT_USEC   (UINT64_C(8) * 1000000)
/* How long the watchdog waits for the Domain Store after its coordinator
 * died (a new coordinator holds it while it recovers itself). */
#define WATCHDOG_STORE_WAIT_USEC (UINT64_C(30) * 1000000)
#define LINGER_USEC              (UINT64_C(5) * 1000000) /* for a dropped peer to close its end */
#define MEMORY_CHECK_USEC        (UINT64_C(1000000))
/* The sandbox's host threads run at this nice value, so that the person's
 * own work comes first. */
#define SANDBOX_NICE 10

typedef enum WatchKind {
        WATCH_LISTEN,
        WATCH_SIGNAL,
        WATCH_STORE, /* obj: the StoreWorker whose jobs finished */
        WATCH_RUNTIME,
        WATCH_SIDECAR,
        WATCH_ESCALATION,
        WATCH_DISK,
        WATCH_CONN,
        WATCH_PTY,
        WATCH_STDIN,
        WATCH_STDOUT,
        WATCH_STDERR,
} WatchKind;

typedef struct Watch {
        WatchKind kind;
        void *obj;
} Watch;

typedef struct Coordinator Coordinator;
typedef struct Conn Conn;
typedef struct Session Session;

typedef struct OutQueue {
        uint8_t *buf;
        size_t len, off;
} OutQueue;

struct Session {
        Coordinator *co;
        Conn *conn; /* NULL once the CLI is gone */
        char id[37];
        bool interactive;
        pid_t pid; /* runsc exec */
        ProcessIdentity ident;
        int pty, in_fd, out_fd, err_fd;
        Watch w_pty, w_in, w_out, w_err;
        OutQueue in; /* towards the session */
        bool in_eof; /* close stdin once the queue drains */
        bool exited;
        int wstatus;
        uint64_t drain_deadline;
        uint64_t kill_deadline; /* SIGKILL the exec client after a hangup */
        bool finished;
        bool pending; /* recorded, exec client not started yet */
        uint64_t started_usec;
        unsigned char anchor[SESSION_KEY_LEN]; /* the CLI's Session Anchor public key */
        bool has_anchor;
        char *cwd; /* in the sandbox: /workspace or a directory below it */
        Session *next;
};

typedef enum ConnState {
        CONN_NEW, /* waiting for Hello */
        CONN_HELLO_WAIT, /* Hello seen, its network policy being checked or applied: frames wait */
        CONN_READY, /* Hello accepted */
        CONN_SESSION, /* owns a session */
} ConnState;

struct Conn {
        Coordinator *co;
        int fd;
        Watch w;
        ConnState state;
        CtlReader rd;
        OutQueue out;
        bool counted; /* holds a reference on the sandbox */
        int cli_pid;
        char *hello_policy; /* CONN_HELLO_WAIT: the policy its Hello declared */
        bool close_after_flush;
        bool shut; /* our side is shut down; waiting for the peer's close */
        uint64_t linger_deadline;
        bool dead;
        Session *session;
        Conn *next;
};

struct Coordinator {
        struct stat self_exe; /* our own binary: every CLI is the same file */
        LaunchSpec spec;
        int epfd;
        int listen_fd, signal_fd, runtime_fd, status_fd;
        int watchdog_fd; /* the write end of the watchdog's pipe */
        Watch w_listen, w_signal, w_store, w_slow, w_runtime;
        Store *store;
        StoreWorker *worker;
        /* Long operations (netd, runsc exec, probes) run on a thread of
         * their own, so no terminal waits on them; one at a time. */
        StoreWorker *slow;
        struct NetUpdate *net_update; /* a policy update in progress (one at a time), or NULL */
        uint64_t generation;
        PartStore ps; /* the Domain Store, for the participant driver */
        Part p_sandbox, p_publication;
        Part p_escalation; /* a Publication: the escalation socket and certificates */
        char coordinator_id[37];
        char *container_name;
        SandboxInfo sandbox;
        RouterRun router;
        Part p_router;
        StateAnchor anchor;
        Escalation *esc; /* NULL: [escalation] enabled = false */
        Watch w_esc;
        Sidecar sidecar; /* name NULL: no sidecar (loopback only) */
        Part p_network;
        NetPolicy net; /* in force: the declared policy and the host's addresses denied */
        char *declared_netpolicy; /* canonical, as the configuration says it (the last Hello's) */
        HostAddrs host; /* the host's addresses last read, and what the declared policy made of them */
        int sidecar_fd; /* pidfd of the sidecar's conmon */
        char readiness_fingerprint[65]; /* of the evidence last recorded, or "" */
        Watch w_sidecar;
        char *terminfo_dir;
        char *worktree; /* branch mode: the agent's worktree, behind /workspace */
        Conn *conns;
        size_t n_conns;
        Session *sessions;
        unsigned refs;
        bool ever_had_session;
        uint64_t started_usec;
        bool stopping;
        const char *stop_reason;
        /* The memory limit (issue 16): gVisor's memory file, looked at
         * once a second; why it is not watched when it is not. */
        int mem_fd;
        uint64_t mem_next_check, mem_used;
        char mem_unwatched[160];
        char cpus[64], cpu_unset[160]; /* the CPUs the sandbox runs on, or why it runs anywhere */
        char limit_reason[300];
        bool runtime_lost;
        /* disk_limit for the work files: the helper that measures them,
         * and what it measures. */
        DiskWatch disk;
        Watch w_disk;
        char **disk_paths;
};

/* A network policy update in progress (update_network). */
typedef struct NetUpdate {
        Coordinator *co;
        Conn *conn; /* the CLI that asked; NULL once it is gone */
        char *declared; /* its declared policy, in force once proved */
        HostAddrs host; /* the host's addresses read for it */
        char fingerprint[65]; /* of the new readiness evidence */
        char *error;
        uint64_t started_usec;
} NetUpdate;

static void net_update_forget(NetUpdate *u, const Conn *c) {
        if (u->conn == c)
                u->conn = NULL;
}

/* ---- the store, with ownership ------------------------------------------ */

/* The store copies the JSON it is given; these wrappers take ownership of
 * it, so the objects the coordinator builds for each call with json_pack()
 * are freed (they leaked before). */
static int own_gen_update(Store *st, uint64_t generation, json_t *fields) {
        int r = store_generation_update(st, generation, fields);
        json_decref(fields);
        return r;
}

static void gen_decide(Coordinator *co, uint64_t generation, GenerationDecision d) {
        (void) own_gen_update(co->store, generation,
                              json_pack("{s:s}", "durable_decision", generation_decision_to_string(d)));
}

static int own_gen_begin(Store *st, json_t *info, uint64_t *ret) {
        int r = store_generation_begin(st, info, ret);
        json_decref(info);
        return r;
}

/* ---- small helpers ------------------------------------------------------ */

static int epoll_add(Coordinator *co, int fd, uint32_t events, Watch *w) {
        struct epoll_event ev = { .events = events, .data.ptr = w };
        return epoll_ctl(co->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? negative_errno() : 0;
}

static void epoll_mod(Coordinator *co, int fd, uint32_t events, Watch *w) {
        struct epoll_event ev = { .events = events, .data.ptr = w };
        (void) epoll_ctl(co->epfd, EPOLL_CTL_MOD, fd, &ev);
}

static int close_watched(Coordinator *co, int fd) {
        if (fd >= 0)
                (void) epoll_ctl(co->epfd, EPOLL_CTL_DEL, fd, NULL);
        return safe_close(fd);
}

static int queue_put(OutQueue *q, const uint8_t *data, size_t n) {
        if (q->off > 0 && q->off == q->len)
                q->off = q->len = 0;
        uint8_t *b = realloc(q->buf, q->len + n);
        if (!b)
                return -ENOMEM;
        memcpy(b + q->len, data, n);
        q->buf = b;
        q->len += n;
        return 0;
}

static size_t queue_pending(const OutQueue *q) {
        return q->len - q->off;
}

static void queue_done(OutQueue *q) {
        free(q->buf);
        *q = (OutQueue){};
}

/* Write what the queue holds to a non-blocking fd. 1: empty now, 0: more
 * left, -errno: the fd is broken. */
static int queue_flush(OutQueue *q, int fd) {
        while (queue_pending(q) > 0) {
                ssize_t n = write(fd, q->buf + q->off, queue_pending(q));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return negative_errno();
                }
                q->off += (size_t) n;
        }
        q->off = q->len = 0;
        return 1;
}

/* A warning the leader shows its user once, at launch. */
static void status_warn(Coordinator *co, const char *text) {
        if (co->status_fd < 0)
                return;
        char line[400];
        int n = snprintf(line, sizeof(line), "warn %s\n", text);
        if (n > 0 && (size_t) n < sizeof(line))
                (void) !write(co->status_fd, line, (size_t) n);
}

/* The next step may take up to secs (the leader's limit from now on). */
static void status_wait(Coordinator *co, unsigned secs, const char *step) {
        if (co->status_fd < 0)
                return;
        char line[160];
        int n = snprintf(line, sizeof(line), "wait %u %s\n", secs, step);
        if (n > 0 && (size_t) n < sizeof(line))
                (void) !write(co->status_fd, line, (size_t) n);
}

/* The one line that ends the start; false when the leader is gone. */
static bool status_report(Coordinator *co, const char *fmt, ...) _printf_(2, 3);
static bool status_report(Coordinator *co, const char *fmt, ...) {
        if (co->status_fd < 0)
                return false;
        StrBuf b = STRBUF_INIT;
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(&b, fmt, ap);
        va_end(ap);
        strbuf_putc(&b, '\n');
        ssize_t k = b.oom ? -1 : write(co->status_fd, strbuf_str(&b), b.len);
        bool ok = k >= 0 && (size_t) k == b.len;
        strbuf_done(&b);
        co->status_fd = safe_close(co->status_fd);
        return ok;
}

/* Our own pid + start time, as the store records process identities. */
static json_t *self_identity(void) {
        ProcessIdentity me = {};
        (void) process_identity_of(getpid(), &me);
        return process_identity_to_json(&me);
}

/* ---- connections -------------------------------------------------------- */

static void conn_update_events(Conn *c) {
        /* A Hello being checked: the frames after it wait (unread). */
        uint32_t ev = (c->state == CONN_HELLO_WAIT ? 0 : EPOLLIN) | EPOLLRDHUP;
        if (queue_pending(&c->out) > 0)
                ev |= EPOLLOUT;
        epoll_mod(c->co, c->fd, ev, &c->w);
}

static void session_update_events(Session *s);

static int conn_send(Conn *c, const CtlMessage *m) {
        _cleanup_free_ uint8_t *frame = NULL;
        size_t len = 0;
        if (!c || c->dead)
                return 0;
        int r = ctl_message_encode(m, &frame, &len);
        if (r < 0)
                return r;
        r = queue_put(&c->out, frame, len);
        if (r < 0)
                return r;
        r = queue_flush(&c->out, c->fd);
        if (r < 0) {
                c->dead = true;
                return r;
        }
        conn_update_events(c);
        return 0;
}

static void conn_send_error(Conn *c, const char *msg) {
        CtlMessage m = { .type = CTL_ERROR, .message = (char *) msg };
        log_info("dropping a client: %s", msg);
        (void) conn_send(c, &m);
        c->close_after_flush = true;
}

static void session_hangup(Session *s);

static void conn_free(Coordinator *co, Conn *c) {
        if (c->session) {
                c->session->conn = NULL;
                session_hangup(c->session);
                escalation_session_gone(co->esc, c->session->id);
                c->session = NULL;
        }
        if (c->counted && co->refs > 0)
                co->refs--;
        if (co->net_update)
                net_update_forget(co->net_update, c);
        free(c->hello_policy);
        close_watched(co, c->fd);
        ctl_reader_done(&c->rd);
        queue_done(&c->out);
        for (Conn **p = &co->conns; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        co->n_conns--;
        log_debug("client gone (dead=%d shut=%d), %u left", c->dead, c->shut, co->refs);
        free(c);
}

/* ---- store jobs --------------------------------------------------------- */

typedef struct TerminalJob {
        json_t *record;
        char session_id[37];
        TerminalState state;
} TerminalJob;

static int job_terminal(Store *st, void *userdata) {
        TerminalJob *j = userdata;
        if (j->state == TERMINAL_INTENT)
                return store_terminal_put(st, j->record);
        return store_terminal_set_state(st, j->session_id, j->state, j->record);
}

static void job_terminal_done(int result, void *userdata) {
        TerminalJob *j = userdata;
        if (result < 0)
                log_warning("store: terminal %s -> %s: %s", j->session_id, terminal_state_to_string(j->state),
                            strerror(-result));
        json_decref(j->record);
        free(j);
}

static void record_terminal(Coordinator *co, const char *session_id, TerminalState state, json_t *record) {
        TerminalJob *j = calloc(1, sizeof(TerminalJob));
        if (!j) {
                json_decref(record);
                return;
        }
        j->record = record;
        j->state = state;
        memcpy(j->session_id, session_id, 37);
        if (store_worker_submit(co->worker, job_terminal, job_terminal_done, j) < 0)
                job_terminal_done(-ENOMEM, j);
}

typedef struct SessionJob {
        char session_id[37];
        json_t *fields;
} SessionJob;

static int job_session(Store *st, void *userdata) {
        SessionJob *j = userdata;
        return store_session_update(st, j->session_id, j->fields);
}

static void job_session_done(int result, void *userdata) {
        SessionJob *j = userdata;
        if (result < 0)
                log_warning("store: session %s: %s", j->session_id, strerror(-result));
        json_decref(j->fields);
        free(j);
}

static void record_session_phase(Coordinator *co, const Session *s, SessionPhase phase) {
        SessionJob *j = calloc(1, sizeof(SessionJob));
        if (!j)
                return;
        memcpy(j->session_id, s->id, 37);
        j->fields = json_pack("{s:s}", "session_phase", session_phase_to_string(phase));
        if (!j->fields || store_worker_submit(co->worker, job_session, job_session_done, j) < 0)
                job_session_done(-ENOMEM, j);
}

/* ---- sessions ----------------------------------------------------------- */

static void session_update_events(Session *s) {
        Coordinator *co = s->co;
        /* Output waits while the CLI lags behind (backpressure). */
        bool lagging = s->conn && queue_pending(&s->conn->out) > OUT_QUEUE_MAX;
        uint32_t in = lagging ? 0 : EPOLLIN;
        if (s->interactive) {
                if (s->pty >= 0)
                        epoll_mod(co, s->pty, in | (queue_pending(&s->in) > 0 ? EPOLLOUT : 0), &s->w_pty);
                return;
        }
        if (s->out_fd >= 0)
                epoll_mod(co, s->out_fd, in, &s->w_out);
        if (s->err_fd >= 0)
                epoll_mod(co, s->err_fd, in, &s->w_err);
        if (s->in_fd >= 0)
                epoll_mod(co, s->in_fd, queue_pending(&s->in) > 0 ? EPOLLOUT : 0, &s->w_in);
}

/* Forward what one session fd holds. Returns 1 at end of file. */
static int session_pump(Session *s, int fd, int stream) {
        uint8_t buf[READ_CHUNK];
        for (int rounds = 0; rounds < 16; rounds++) {
                if (s->conn && queue_pending(&s->conn->out) > OUT_QUEUE_MAX)
                        return 0;
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n == 0)
                        return 1;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return 1; /* EIO: the PTY's other side is gone */
                }
                if (s->conn) {
                        CtlMessage m = {
                                .type = CTL_TERMINAL_OUTPUT, .stream = stream, .bytes = buf, .n_bytes = (size_t) n
                        };
                        memcpy(m.session_id, s->id, 37);
                        (void) conn_send(s->conn, &m);
                }
        }
        return 0;
}

static void session_close_output(Session *s, int *fd) {
        *fd = close_watched(s->co, *fd);
}

static void begin_stop(Coordinator *co, const char *reason);
static void stop_router(Coordinator *co);
static void stop_anchor(Coordinator *co);
static void stop_disk_watch(Coordinator *co);
static void stop_network(Coordinator *co);
static void stop_escalation(Coordinator *co);

/* An exec client that died abnormally may have lost its sandbox: conmon's
 * exit can trail the exec client's by a moment, so wait for it briefly
 * before calling the outcome. */
static void check_runtime(Coordinator *co, int timeout_ms) {
        if (co->runtime_lost || co->runtime_fd < 0)
                return;
        struct pollfd pfd = { .fd = co->runtime_fd, .events = POLLIN };
        if (poll(&pfd, 1, timeout_ms) > 0) {
                co->runtime_fd = close_watched(co, co->runtime_fd);
                log_error("the sandbox container stopped unexpectedly");
                co->runtime_lost = true;
                begin_stop(co, "the sandbox stopped unexpectedly");
        }
}

static void session_finish(Session *s) {
        Coordinator *co = s->co;
        if (s->finished)
                return;
        if (!co->stopping && (WIFSIGNALED(s->wstatus) || (WIFEXITED(s->wstatus) && WEXITSTATUS(s->wstatus) >= 126)))
                check_runtime(co, 1000);
        /* Whatever is still buffered goes out before the exit. */
        if (s->pty >= 0)
                (void) session_pump(s, s->pty, 1);
        if (s->out_fd >= 0)
                (void) session_pump(s, s->out_fd, 1);
        if (s->err_fd >= 0)
                (void) session_pump(s, s->err_fd, 2);
        s->finished = true;

        CtlMessage m = { .type = CTL_SESSION_EXIT };
        memcpy(m.session_id, s->id, 37);
        if (co->runtime_lost) {
                m.outcome = CTL_EXIT_RUNTIME_LOST;
                m.message = (char *) (co->stop_reason ?: "the sandbox stopped unexpectedly");
        } else if (co->stopping && co->stop_reason) {
                m.outcome = CTL_EXIT_TERMINATED;
                m.exit_signal = SIGTERM;
                m.message = (char *) co->stop_reason;
        } else if (WIFSIGNALED(s->wstatus)) {
                m.outcome = CTL_EXIT_TERMINATED;
                m.exit_signal = WTERMSIG(s->wstatus);
        } else {
                m.outcome = CTL_EXIT_EXITED;
                m.exit_code = WIFEXITED(s->wstatus) ? WEXITSTATUS(s->wstatus) : 255;
        }
        if (s->conn) {
                (void) conn_send(s->conn, &m);
                s->conn->close_after_flush = true;
                s->conn->session = NULL;
                s->conn = NULL;
        }
        escalation_session_gone(co->esc, s->id);
        log_info("session %s ended (%s)", s->id, ctl_exit_outcome_to_string(m.outcome));
        record_terminal(co, s->id, TERMINAL_CLEAN,
                        json_pack("{s:s}", "outcome", ctl_exit_outcome_to_string(m.outcome)));

        s->pty = close_watched(co, s->pty);
        s->in_fd = close_watched(co, s->in_fd);
        s->out_fd = close_watched(co, s->out_fd);
        s->err_fd = close_watched(co, s->err_fd);
}

static void session_free(Coordinator *co, Session *s) {
        for (Session **p = &co->sessions; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        break;
                }
        queue_done(&s->in);
        free(s->cwd);
        free(s);
}

/* The CLI is gone: the guest gets SIGHUP as from a closed terminal, the exec
 * client SIGKILL if it lingers. */
static void session_hangup(Session *s) {
        if (s->exited || s->pid <= 0)
                return;
        (void) kill(s->pid, SIGHUP);
        s->kill_deadline = now_usec() + HANGUP_GRACE_USEC;
}

static int write_process_file(const Coordinator *co, const Session *s, const CtlMessage *m, int *ret_fd) {
        json_t *env = json_array();
        /* The container's own environment (image ENV and Podman's), then
         * what the profile allows from this CLI, then ours. */
        for (char **p = co->sandbox.env; env && p && *p; p++) {
                if (startswith(*p, "TERM=") || startswith(*p, "LAZARET_"))
                        continue;
                json_array_append_new(env, json_string(*p));
        }
        for (size_t i = 0; env && i < m->n_env; i++)
                json_array_append_new(env, json_string(m->env[i]));
        if (env && m->interactive) {
                StrBuf b = STRBUF_INIT;
                strbuf_printf(&b, "TERM=%s", m->term ? m->term : "xterm");
                char *t = strbuf_steal(&b);
                if (t)
                        json_array_append_new(env, json_string(t));
                free(t);
                json_array_append_new(env, json_string("TERMINFO=/run/lazaret/terminfo"));
        }
        if (env) {
                StrBuf b = STRBUF_INIT;
                strbuf_printf(&b, "LAZARET_SESSION_ID=%s", s->id);
                char *t = strbuf_steal(&b);
                if (t)
                        json_array_append_new(env, json_string(t));
                free(t);
        }
        /* The session's delegated credential, for lazaret-escalate. */
        if (env && co->esc && s->has_anchor && m->credential) {
                StrBuf b = STRBUF_INIT;
                strbuf_printf(&b, "LAZARET_SESSION_CREDENTIAL=%s", m->credential);
                char *t = strbuf_steal(&b);
                if (t)
                        json_array_append_new(env, json_string(t));
                if (t)
                        explicit_bzero(t, strlen(t));
                free(t);
                b = (StrBuf) STRBUF_INIT;
                strbuf_printf(&b, "LAZARET_PROFILE=%s", co->spec.profile);
                t = strbuf_steal(&b);
                if (t)
                        json_array_append_new(env, json_string(t));
                free(t);
        }
        json_t *args = json_array();
        char **argv = m->argv;
        for (size_t i = 0; args && argv[i]; i++)
                json_array_append_new(args, json_string(argv[i]));
        json_t *proc = json_pack("{s:b, s:O, s:o*, s:o*, s:s}", "terminal", m->interactive, "user", co->sandbox.user,
                                 "args", args, "env", env, "cwd", s->cwd);
        if (!proc)
                return -ENOMEM;
        if (m->interactive)
                json_object_set_new(proc, "consoleSize",
                                    json_pack("{s:i, s:i}", "height", (int) m->rows, "width", (int) m->columns));
        char *text = json_dumps(proc, JSON_COMPACT);
        json_decref(proc);
        if (!text)
                return -ENOMEM;
        int fd = memfd_create("lazaret-process", MFD_CLOEXEC);
        if (fd < 0) {
                free(text);
                return negative_errno();
        }
        size_t len = strlen(text);
        ssize_t w = write(fd, text, len);
        free(text);
        if (w < 0 || (size_t) w != len) {
                safe_close(fd);
                return -EIO;
        }
        *ret_fd = fd;
        return 0;
}

/* Store a terminfo entry the CLI sent, so TERM resolves in the sandbox. */
static int install_terminfo(const Coordinator *co, const char *term, const uint8_t *data, size_t len) {
        char sub[2] = { term[0], 0 };
        _cleanup_free_ char *dir = path_join(co->terminfo_dir, sub);
        if (!dir)
                return -ENOMEM;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        _cleanup_free_ char *file = path_join(dir, term);
        if (!file)
                return -ENOMEM;
        return write_file_atomic(file, (const char *) data, len, 0644, 0);
}

static int set_nonblock(int fd) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return negative_errno();
        return 0;
}

static void strv_freep(char ***v) {
        if (*v)
                for (char **p = *v; *p; p++)
                        free(*p);
        free(*v);
}

static int session_spawn(Coordinator *co, Session *s, const CtlMessage *m) {
        _cleanup_close_ int proc_fd = -EBADF, slave = -EBADF;
        _cleanup_(strv_freep) char **argv = NULL;
        int pipes[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
        /* runsc reads the process description from the memfd at its fd 3. */
        static const char procpath[] = "/proc/self/fd/3";
        int r = write_process_file(co, s, m, &proc_fd);
        if (r < 0)
                return r;

        if (m->interactive) {
                s->pty = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
                if (s->pty < 0)
                        return negative_errno();
                char name[128];
                if (grantpt(s->pty) < 0 || unlockpt(s->pty) < 0 || ptsname_r(s->pty, name, sizeof(name)) != 0)
                        return negative_errno();
                slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
                if (slave < 0)
                        return negative_errno();
                struct winsize ws = { .ws_row = (unsigned short) m->rows, .ws_col = (unsigned short) m->columns };
                (void) ioctl(s->pty, TIOCSWINSZ, &ws);
                r = set_nonblock(s->pty);
                if (r < 0)
                        return r;
        } else {
                for (int i = 0; i < 3; i++)
                        if (pipe2(pipes[i], O_CLOEXEC) < 0) {
                                r = negative_errno();
                                goto fail_pipes;
                        }
        }

        argv = sandbox_exec_argv(&co->spec, &co->sandbox, procpath);
        if (!argv) {
                r = -ENOMEM;
                goto fail_pipes;
        }

        /* runsc exec in a session of its own: with a terminal, the PTY's
         * slave is its controlling terminal and stdin, stdout, stderr;
         * gVisor's process description is fd 3. */
        SpawnFd fds[4];
        if (m->interactive) {
                fds[0] = (SpawnFd){ slave, 0 };
                fds[1] = (SpawnFd){ slave, 1 };
                fds[2] = (SpawnFd){ slave, 2 };
        } else {
                fds[0] = (SpawnFd){ pipes[0][0], 0 };
                fds[1] = (SpawnFd){ pipes[1][1], 1 };
                fds[2] = (SpawnFd){ pipes[2][1], 2 };
        }
        fds[3] = (SpawnFd){ proc_fd, 3 };
        SpawnSpec sp = SPAWN_SPEC_INIT(co->spec.runsc, argv);
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.new_session = true;
        sp.controlling_tty = m->interactive;
        pid_t pid;
        r = spawn(&sp, &pid);
        if (r < 0)
                goto fail_pipes;
        s->pid = pid;
        (void) process_identity_of(pid, &s->ident);
        if (!m->interactive) {
                s->in_fd = pipes[0][1];
                s->out_fd = pipes[1][0];
                s->err_fd = pipes[2][0];
                safe_close(pipes[0][0]);
                safe_close(pipes[1][1]);
                safe_close(pipes[2][1]);
                if (set_nonblock(s->in_fd) < 0 || set_nonblock(s->out_fd) < 0 || set_nonblock(s->err_fd) < 0)
                        log_warning("session %s: cannot make pipes non-blocking", s->id);
                s->w_in = (Watch){ WATCH_STDIN, s };
                s->w_out = (Watch){ WATCH_STDOUT, s };
                s->w_err = (Watch){ WATCH_STDERR, s };
                (void) epoll_add(co, s->in_fd, 0, &s->w_in);
                (void) epoll_add(co, s->out_fd, EPOLLIN, &s->w_out);
                (void) epoll_add(co, s->err_fd, EPOLLIN, &s->w_err);
        } else {
                s->w_pty = (Watch){ WATCH_PTY, s };
                (void) epoll_add(co, s->pty, EPOLLIN, &s->w_pty);
        }
        return 0;

fail_pipes:
        for (int i = 0; i < 3; i++) {
                safe_close(pipes[i][0]);
                safe_close(pipes[i][1]);
        }
        return r;
}

typedef struct OpenJob {
        Coordinator *co;
        Session *s;
        CtlMessage m; /* the SessionOpen, owned */
        json_t *session_rec, *terminal_rec;
} OpenJob;

static int job_open(Store *st, void *userdata) {
        OpenJob *j = userdata;
        /* The terminfo entry the CLI sent, so TERM resolves in the
         * sandbox: written (and synced) here, off the loop, before the
         * session starts. */
        if (j->m.term && j->m.terminfo) {
                int k = install_terminfo(j->co, j->m.term, j->m.terminfo, j->m.terminfo_len);
                if (k < 0)
                        log_warning("cannot store terminfo for %s: %s", j->m.term, strerror(-k));
        }
        int r = store_session_put(st, j->session_rec);
        if (r >= 0)
                r = store_terminal_put(st, j->terminal_rec);
        return r;
}

/* Give up on a session that never ran: tell its CLI (if still there) and
 * leave it to be freed. */
static void session_abandon(Session *s, const char *why) {
        s->pending = false;
        s->finished = true;
        if (s->conn) {
                conn_send_error(s->conn, why);
                s->conn->session = NULL;
                s->conn = NULL;
        }
}

static void job_open_done(int result, void *userdata) {
        OpenJob *j = userdata;
        Coordinator *co = j->co;
        Session *s = j->s;

        if (result < 0) {
                log_error("store: cannot record session %s: %s", s->id, strerror(-result));
                session_abandon(s, "cannot record the session");
        } else if (!s->conn || co->stopping) {
                record_terminal(co, s->id, TERMINAL_CLEAN, NULL);
                session_abandon(s, "the sandbox is shutting down; run the command again");
        } else {
                int r = session_spawn(co, s, &j->m);
                if (r < 0) {
                        log_error("cannot start a session: %s", strerror(-r));
                        s->pty = close_watched(co, s->pty);
                        record_terminal(co, s->id, TERMINAL_CLEAN, NULL);
                        session_abandon(s, "cannot start the session's command in the sandbox");
                } else {
                        s->pending = false;
                        session_update_events(s);
                        record_session_phase(co, s, SESSION_RUNNING);
                        record_terminal(co, s->id, TERMINAL_RUNNING,
                                        json_pack("{s:o}", "exec_client", process_identity_to_json(&s->ident)));
                        CtlMessage reply = { .type = CTL_SESSION_OPENED, .generation_id = co->generation };
                        memcpy(reply.session_id, s->id, 37);
                        (void) conn_send(s->conn, &reply);
                        log_info("session %s started (%s, %zu args)", s->id, j->m.interactive ? "terminal" : "pipes",
                                 j->m.n_argv);
                }
        }
        ctl_message_done(&j->m);
        json_decref(j->session_rec);
        json_decref(j->terminal_rec);
        free(j);
}

static void handle_session_open(Coordinator *co, Conn *c, CtlMessage *m, int cli_pid) {
        if (co->stopping) {
                conn_send_error(c, "the sandbox is shutting down; run the command again");
                return;
        }
        for (size_t i = 0; i < m->n_env; i++)
                if (!launch_spec_env_allowed(&co->spec, m->env[i])) {
                        conn_send_error(c, "a variable the profile does not name was sent; only the profile's env "
                                           "enters the sandbox");
                        return;
                }
        /* A session of a branch-mode Domain may start in a directory below
         * /workspace (the CLI's own, relative to the repository's root).
         * Missing ones (the host's untracked directories) are made in the
         * agent's worktree, never through a symlink out of it. */
        _cleanup_free_ char *cwd = NULL;
        if (m->cwd) {
                if (!co->worktree) {
                        conn_send_error(c, "a working directory below /workspace needs workspace_mode = \"branch\" "
                                           "in a git repository");
                        return;
                }
                int r = sandbox_worktree_dir(co->worktree, m->cwd);
                if (r < 0) {
                        StrBuf e = STRBUF_INIT;
                        strbuf_printf(&e, "cannot enter /workspace/%s in the agent's worktree %s: %s", m->cwd,
                                      co->worktree, strerror(-r));
                        _cleanup_free_ char *why = strbuf_steal(&e);
                        conn_send_error(c, why ?: "cannot enter the session's directory");
                        return;
                }
        }
        cwd = m->cwd ? path_join("/workspace", m->cwd) : strdup("/workspace");
        if (!cwd) {
                conn_send_error(c, "out of memory");
                return;
        }
        Session *s = calloc(1, sizeof(Session));
        OpenJob *j = calloc(1, sizeof(OpenJob));
        if (!s || !j || ctl_uuid_v4(s->id) < 0) {
                free(s);
                free(j);
                conn_send_error(c, "cannot make a session");
                return;
        }
        *s = (Session){ .co = co,
                        .conn = c,
                        .interactive = m->interactive,
                        .pending = true,
                        .pty = -EBADF,
                        .in_fd = -EBADF,
                        .out_fd = -EBADF,
                        .err_fd = -EBADF,
                        .cwd = TAKE_PTR(cwd),
                        .started_usec = now_usec() };
        (void) ctl_uuid_v4(s->id);
        s->has_anchor = m->anchor && session_unb64(m->anchor, s->anchor, SESSION_KEY_LEN) == 0;
        s->next = co->sessions;
        co->sessions = s;
        c->session = s;
        c->state = CONN_SESSION;
        co->ever_had_session = true;

        /* Recorded before it is made (decision 12): the session and its
         * terminal in Intent, committed on the store thread; the exec client
         * starts when that transaction is done. */
        char cli[32];
        snprintf(cli, sizeof(cli), "pid:%d", cli_pid);
        *j = (OpenJob){ .co = co, .s = s, .m = *m };
        *m = (CtlMessage){};
        j->session_rec = json_pack("{s:I, s:s, s:s, s:n, s:s}", "generation_id", (json_int_t) co->generation,
                                   "session_id", s->id, "cli_id", cli, "session_anchor_id", "session_phase",
                                   session_phase_to_string(SESSION_OPENING));
        j->terminal_rec = json_pack("{s:I, s:s, s:s, s:s, s:o}", "generation_id", (json_int_t) co->generation,
                                    "session_id", s->id, "state", "Intent", "container_id", co->sandbox.id,
                                    "host_coordinator", self_identity());
        if (!j->session_rec || !j->terminal_rec || store_worker_submit(co->worker, job_open, job_open_done, j) < 0)
                job_open_done(-ENOMEM, j);
}

static json_t *strv_to_json(char **v) {
        json_t *a = json_array();
        for (char **p = v; a && p && *p; p++)
                json_array_append_new(a, json_string(*p));
        return a;
}

static json_t *status_json(Coordinator *co) {
        json_t *sessions = json_array();
        uint64_t now = now_usec();
        for (Session *s = co->sessions; sessions && s; s = s->next)
                if (!s->finished)
                        json_array_append_new(
                                sessions, json_pack("{s:s, s:b, s:i, s:I, s:s}", "session_id", s->id, "interactive",
                                                    s->interactive, "exec_pid", (int) s->pid, "age_seconds",
                                                    (json_int_t) ((now - s->started_usec) / 1000000), "cwd", s->cwd));
        /* The implicit rules: every address of the host, as last read. */
        json_t *host = json_array();
        for (size_t i = 0; host && i < co->host.n; i++) {
                char a[64];
                netaddr_format(&co->host.addrs[i], a, sizeof(a));
                json_array_append_new(host, json_pack("{s:s, s:s}", "address", a, "effect",
                                                      host_addr_effect_to_string(co->host.effects[i])));
        }
        json_t *network =
                json_pack("{s:s?, s:s, s:s, s:s?, s:o*, s:b}", "sidecar", co->sidecar.name, "policy_digest",
                          co->spec.netpolicy_digest, "mode", co->sidecar.name ? "sidecar" : "loopback-only",
                          "readiness_fingerprint", co->readiness_fingerprint[0] ? co->readiness_fingerprint : NULL,
                          "host_addresses", host, "update_in_progress", co->net_update != NULL);
        /* Direct mode: what the workspace router protects and masks. */
        json_t *guard = co->spec.branch ? json_pack("{s:s}", "mode", "branch")
                                        : json_pack("{s:s, s:o*, s:o*}", "mode", "direct", "protect_patterns",
                                                    strv_to_json(co->spec.protect), "mask_patterns",
                                                    strv_to_json(co->spec.mask));
        /* Each limit, and what enforces it; never one that nothing does. */
        json_t *cpu = co->cpus[0] ? json_pack("{s:I, s:s, s:i, s:b, s:s}", "limit", (json_int_t) co->spec.cpu_limit,
                                              "cpus", co->cpus, "nice", SANDBOX_NICE, "enforced", 1, "enforced_by",
                                              "the CPU affinity and nice value of every host thread of the sandbox")
                                  : json_pack("{s:I, s:b, s:s}", "limit", (json_int_t) co->spec.cpu_limit, "enforced",
                                              0, "enforced_by", co->cpu_unset);
        json_t *limits = json_pack(
                "{s:{s:I, s:s}, s:{s:I, s:o*, s:b, s:s}, s:o*, s:{s:I, s:b, s:s}}", "pids", "limit",
                (json_int_t) co->spec.nproc, "enforced_by",
                co->spec.rootless ? "gVisor (RLIMIT_NPROC for every task of the sandbox)"
                                  : "gVisor (RLIMIT_NPROC for every task of the sandbox), and a pids cgroup for "
                                    "runsc's host threads",
                "memory", "limit_mib", (json_int_t) co->spec.memory_limit_mib, "used_mib",
                co->mem_fd >= 0 ? json_integer((json_int_t) (co->mem_used >> 20)) : NULL, "enforced", co->mem_fd >= 0,
                "enforced_by",
                co->mem_fd < 0      ? co->mem_unwatched
                : co->spec.rootless ? "the coordinator, which stops the sandbox at the limit"
                                    : "the coordinator, which stops the sandbox at the limit, and a memory cgroup "
                                      "above it",
                "cpu", cpu, "disk", "limit_mib", (json_int_t) co->spec.disk_limit_mib, "enforced", 1, "enforced_by",
                co->anchor.n_layers > 0 ? "gVisor's overlay of the sandbox's own root file system, and an ext4 image "
                                          "of that size for each persistent directory's changes (ENOSPC inside); "
                                          "the work files' growth by the coordinator, which stops the sandbox past it"
                                        : "gVisor's overlay of the sandbox's own root file system (ENOSPC inside); "
                                          "the work files' growth by the coordinator, which stops the sandbox past "
                                          "it");
        json_t *disk = json_object_get(limits, "disk");
        if (disk) {
                json_t *layers = json_array();
                for (size_t i = 0; layers && i < co->anchor.n_layers; i++)
                        (void) json_array_append_new(layers, json_pack("{s:s, s:I}", "dir", co->anchor.layers[i].dir,
                                                                       "size_mib",
                                                                       (json_int_t) co->anchor.layers[i].fs_size_mib));
                (void) json_object_set_new(disk, "persistent", layers);
                (void) json_object_set_new(
                        disk, "work_files",
                        json_pack("{s:o, s:o?, s:b, s:s}", "paths", strv_to_json(co->disk_paths), "grown_mib",
                                  co->disk.have_base ? json_integer((json_int_t) (diskwatch_grown(&co->disk) >> 20))
                                                     : NULL,
                                  "enforced", co->disk.fd >= 0, "enforced_by",
                                  co->disk.fd >= 0 ? "the coordinator: a look at the file system every 2 s, a walk "
                                                     "when it grew or once a minute; past the limit the sandbox stops"
                                                   : "nothing: the measure has ended"));
        }
        json_t *st = json_pack(
                "{s:b, s:s, s:s, s:s, s:I, s:{s:s, s:s, s:s, s:s}, s:o*, s:o*, s:o*, s:I, s:i, s:I, s:s}", "running", 1,
                "profile", co->spec.profile, "domain_hash", co->spec.domain_hash, "workspace", co->spec.workspace,
                "generation", (json_int_t) co->generation, "sandbox", "name", co->container_name, "id", co->sandbox.id,
                "image", co->spec.image, "runsc_network", runsc_network_to_string(co->spec.runsc_network), "sessions",
                sessions, "network", network, "workspace_guard", guard, "uptime_seconds",
                (json_int_t) ((now - co->started_usec) / 1000000), "coordinator_pid", (int) getpid(), "clients",
                (json_int_t) co->refs, "coordinator_id", co->coordinator_id);
        if (st && limits)
                json_object_set(st, "limits", limits);
        json_decref(limits);
        return st;
}

static void begin_stop(Coordinator *co, const char *reason) {
        if (co->stopping)
                return;
        co->stopping = true;
        co->stop_reason = reason;
        log_info("stopping: %s", reason ? reason : "no clients left");
        /* Our hold on gVisor's memory file would keep its pages after the
         * sandbox ends. */
        co->mem_fd = safe_close(co->mem_fd);
        /* No new clients from now on. */
        if (co->listen_fd >= 0) {
                co->listen_fd = close_watched(co, co->listen_fd);
                (void) unlink(co->spec.socket_path);
        }
        for (Session *s = co->sessions; s; s = s->next)
                if (!s->exited && s->pid > 0) {
                        (void) kill(s->pid, SIGKILL);
                }
}

static int prove_network(Coordinator *co, char ret_fingerprint[65], char **ret_error);

/* The Derived Network Policy in force: the declared one, plus a deny rule
 * for every address of the host itself that it would permit, read now
 * (issue 14). *ret_why names what failed. */
static int effective_policy(const char *declared, NetPolicy *ret_net, char **ret_canon, HostAddrs *ret_host,
                            const char **ret_why) {
        NetPolicy np;
        int r = netpolicy_parse(declared, strlen(declared), &np, ret_why);
        if (r < 0)
                return r;
        _cleanup_(host_addrs_done) HostAddrs h = {};
        r = host_addresses_deny(&np, &h, NULL);
        if (r < 0) {
                *ret_why = r == -E2BIG ? "the host's addresses take the policy past its rule limit"
                                       : "cannot read the host's addresses";
                netpolicy_done(&np);
                return r;
        }
        r = netpolicy_format(&np, ret_canon, NULL);
        if (r < 0) {
                *ret_why = "out of memory";
                netpolicy_done(&np);
                return r;
        }
        *ret_net = np;
        *ret_host = h;
        h = (HostAddrs){};
        return 0;
}

/* An address of the host that the running policy permits: the first, or
 * NULL. */
static const NetAddr *host_permitted(const NetPolicy *running, const HostAddrs *h) {
        for (size_t i = 0; i < h->n; i++)
                if (h->effects[i] == HOST_ADDR_IMPLICIT_DENY && netpolicy_verdict(running, &h->addrs[i]) == NET_ALLOW)
                        return &h->addrs[i];
        return NULL;
}

/* co->net, the spec's canonical policy and its digest become np and canon
 * (both taken). */
static int set_policy(Coordinator *co, NetPolicy *np, char *canon) {
        char digest[65];
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, canon, strlen(canon), digest);
        char *d = strdup(digest);
        if (!d) {
                free(canon);
                netpolicy_done(np);
                return -ENOMEM;
        }
        free(co->spec.netpolicy);
        free(co->spec.netpolicy_digest);
        co->spec.netpolicy = canon;
        co->spec.netpolicy_digest = d;
        netpolicy_done(&co->net);
        co->net = *np;
        *np = (NetPolicy){};
        return launch_spec_fingerprint(&co->spec);
}

typedef enum HelloResult {
        HELLO_ACCEPTED,
        HELLO_REFUSED, /* the peer got an Error */
        HELLO_PENDING, /* a policy update runs; its end decides */
} HelloResult;

/* The slow thread's part of a policy update: netd replaces the routes,
 * gVisor's own stack takes them over, the probes run again and the
 * evidence is recorded. The loop changes none of what it reads while it
 * runs (one update at a time; other Hellos with a policy wait). */
static int job_net_update(Store *st, void *userdata) {
        NetUpdate *u = userdata;
        Coordinator *co = u->co;
        (void) st;
        int r = sidecar_update(&co->sidecar, co->spec.netpolicy, co->spec.netpolicy_digest, &u->error);
        if (r >= 0 && co->spec.runsc_network == RUNSC_NETWORK_SANDBOX)
                r = sidecar_update_gvisor(&co->spec, &co->sidecar, &co->sandbox, co->spec.netpolicy, &u->error);
        if (r >= 0)
                r = prove_network(co, u->fingerprint, &u->error);
        return r;
}

static void conn_hello(Coordinator *co, Conn *c, bool resume);

/* Back on the loop: the CLI that asked gets its session (its frames
 * waited), or the reason and the sandbox stops rather than stay between
 * two policies; then the Hellos that waited are looked at. */
static void job_net_update_done(int result, void *userdata) {
        NetUpdate *u = userdata;
        Coordinator *co = u->co;
        co->net_update = NULL;
        if (result < 0) {
                _cleanup_free_ char *msg = NULL;
                const char *e = u->error ? u->error : strerror(-result);
                log_error("network policy update failed: %s", e);
                if (asprintf(&msg, "cannot apply the new network policy: %s; the sandbox stops", e) < 0)
                        msg = NULL;
                if (u->conn)
                        conn_send_error(u->conn, msg ?: "cannot apply the new network policy");
                begin_stop(co, "a network policy update failed");
        } else {
                memcpy(co->readiness_fingerprint, u->fingerprint, sizeof(u->fingerprint));
                free(co->declared_netpolicy);
                co->declared_netpolicy = TAKE_PTR(u->declared);
                host_addrs_done(&co->host);
                co->host = u->host;
                u->host = (HostAddrs){};
                log_info("network policy update done (+%" PRIu64 " ms)", (now_usec() - u->started_usec) / 1000);
        }
        Conn *asker = u->conn;
        free(u->declared);
        host_addrs_done(&u->host);
        free(u->error);
        free(u);
        if (asker && result >= 0)
                conn_hello(co, asker, true);
        for (Conn *c = co->conns; c && !co->net_update; c = c->next)
                if (c->state == CONN_HELLO_WAIT && !c->dead && !c->close_after_flush) {
                        if (co->stopping)
                                conn_send_error(c, "the sandbox is stopping; run the command again");
                        else
                                conn_hello(co, c, true);
                }
}

/* A CLI joined with a different network policy (canonical, with the
 * host's addresses h denied; *decl is what it declared). The running
 * sandbox takes it over: netd replaces the routes (with gVisor's own
 * stack, gVisor's too) and the probes run again before the CLI gets its
 * session, all on the slow thread (HELLO_PENDING: *decl and *h taken).
 * What the running sandbox cannot take is refused with the reason; a
 * failure half-way stops the sandbox rather than leave it between two
 * policies. */
static HelloResult update_network(Coordinator *co, Conn *c, const char *canonical, const char *cause, char **decl,
                                  HostAddrs *h) {
        NetPolicy np;
        const char *why;
        if (netpolicy_parse(canonical, strlen(canonical), &np, &why) < 0) {
                conn_send_error(c, "the network policy sent is not canonical");
                return HELLO_REFUSED;
        }
        if (!co->sidecar.name && netpolicy_permits_nothing(&np)) {
                /* Loopback only before and after: nothing to apply. */
                char *c2 = strdup(canonical);
                if (!c2)
                        netpolicy_done(&np);
                if (!c2 || set_policy(co, &np, c2) < 0) {
                        conn_send_error(c, "out of memory");
                        return HELLO_REFUSED;
                }
                return HELLO_ACCEPTED;
        }
        const char *refuse = NULL;
        if (!co->sidecar.name)
                refuse = "the sandbox runs without a network sidecar (its policy permits nothing)";
        else if (np.enabled[NET_IPV6] != co->net.enabled[NET_IPV6])
                refuse = "the IPv6 disposition changed";
        else if (np.n_resolvers != co->net.n_resolvers ||
                 memcmp(np.resolvers, co->net.resolvers, np.n_resolvers * sizeof(NetAddr)) != 0)
                refuse = "the resolvers changed (they are in the sandbox's resolv.conf)";
        if (refuse) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg,
                             "the network policy changed%s%s%s, and the running sandbox cannot take it over: %s; "
                             "run 'lazaret stop' and start again to apply it",
                             cause ? " (" : "", cause ?: "", cause ? ")" : "", refuse) < 0)
                        msg = NULL;
                conn_send_error(c, msg ?: "the network policy changed");
                netpolicy_done(&np);
                return HELLO_REFUSED;
        }
        NetUpdate *u = calloc(1, sizeof(NetUpdate));
        char *canon_copy = strdup(canonical);
        if (!u || !canon_copy) {
                free(u);
                free(canon_copy);
                netpolicy_done(&np);
                conn_send_error(c, "out of memory");
                return HELLO_REFUSED;
        }
        char old[13];
        snprintf(old, sizeof(old), "%.12s", co->spec.netpolicy_digest);
        /* The new policy is the spec's (and the evidence names the
         * configuration it is made for) before the thread reads it. */
        int r = set_policy(co, &np, canon_copy);
        log_info("network policy update %s -> %.12s", old, co->spec.netpolicy_digest);
        *u = (NetUpdate){ .co = co, .conn = c, .started_usec = now_usec() };
        if (r < 0) {
                u->error = strdup("out of memory");
                job_net_update_done(r, u);
                return HELLO_REFUSED;
        }
        u->declared = TAKE_PTR(*decl);
        u->host = *h;
        *h = (HostAddrs){};
        co->net_update = u;
        r = store_worker_submit(co->slow, job_net_update, job_net_update_done, u);
        if (r < 0) {
                u->error = strdup("cannot start the update");
                job_net_update_done(r, u);
                return HELLO_REFUSED;
        }
        return HELLO_PENDING;
}

/* Every CLI that joins to open a session sends its declared policy: with
 * the host's addresses read again, the same policy in force, or the same
 * declaration and no new host address it permits, means nothing to do.
 * Otherwise the running sandbox takes it over or the CLI is told why not.
 * A Hello without a policy (status, stop) changes nothing. */
static HelloResult hello_network(Coordinator *co, Conn *c, const char *declared) {
        if (!declared || !co->declared_netpolicy)
                return HELLO_ACCEPTED;
        _cleanup_(netpolicy_done) NetPolicy np = {};
        _cleanup_free_ char *canon = NULL, *decl = strdup(declared);
        _cleanup_(host_addrs_done) HostAddrs h = {};
        const char *why = NULL;
        if (!decl) {
                conn_send_error(c, "out of memory");
                return HELLO_REFUSED;
        }
        int r = effective_policy(decl, &np, &canon, &h, &why);
        if (r == -EINVAL) {
                conn_send_error(c, "the network policy sent is not canonical");
                return HELLO_REFUSED;
        }
        if (r < 0) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "cannot check the network policy: %s (%s)", why, strerror(-r)) < 0)
                        msg = NULL;
                conn_send_error(c, msg ?: "cannot check the network policy");
                return HELLO_REFUSED;
        }
        bool same_declaration = streq(decl, co->declared_netpolicy);
        const NetAddr *fresh = same_declaration ? host_permitted(&co->net, &h) : NULL;
        if (streq(canon, co->spec.netpolicy) || (same_declaration && !fresh)) {
                host_addrs_done(&co->host);
                co->host = h;
                h = (HostAddrs){};
                return HELLO_ACCEPTED;
        }
        char cause[128] = "";
        if (fresh) {
                char a[64];
                netaddr_format(fresh, a, sizeof(a));
                snprintf(cause, sizeof(cause), "the host has a new address, %s, which it must deny", a);
        }
        HelloResult hr = update_network(co, c, canon, fresh ? cause : NULL, &decl, &h);
        if (hr == HELLO_ACCEPTED) {
                free(co->declared_netpolicy);
                co->declared_netpolicy = TAKE_PTR(decl);
                host_addrs_done(&co->host);
                co->host = h;
                h = (HostAddrs){};
        }
        return hr;
}

static void conn_process(Coordinator *co, Conn *c);

/* c's Hello (c->hello_policy) is looked at now: accepted, the CLI goes on
 * (resume: the frames that waited behind it are handled now); a Hello with
 * a policy waits while an update runs. */
static void conn_hello(Coordinator *co, Conn *c, bool resume) {
        if (co->net_update && c->hello_policy)
                return; /* after the update */
        if (hello_network(co, c, c->hello_policy) != HELLO_ACCEPTED)
                return;
        c->state = CONN_READY;
        c->hello_policy = mfree(c->hello_policy);
        conn_update_events(c);
        if (resume)
                conn_process(co, c);
}

static void conn_handle_frame(Coordinator *co, Conn *c, const uint8_t *payload, size_t len) {
        CtlMessage m = {};
        const char *why = NULL;
        if (ctl_message_decode(payload, len, &m, &why) < 0) {
                conn_send_error(c, why ? why : "malformed frame");
                return;
        }
        bool ok = true;
        switch (m.type) {
        case CTL_HELLO:
                if (c->state != CONN_NEW) {
                        ok = false;
                        break;
                }
                c->cli_pid = m.cli_pid;
                /* Hello takes the reference: the sandbox stays up while
                 * this client is connected (and while its policy is being
                 * applied). */
                c->counted = true;
                co->refs++;
                c->state = CONN_HELLO_WAIT;
                c->hello_policy = TAKE_PTR(m.netpolicy);
                conn_hello(co, c, false);
                break;
        case CTL_SESSION_OPEN:
                if (c->state != CONN_READY)
                        ok = false;
                else
                        handle_session_open(co, c, &m, c->cli_pid);
                break;
        case CTL_TERMINAL_INPUT: {
                Session *s = c->session;
                if (c->state != CONN_SESSION || !s || !streq(m.session_id, s->id)) {
                        ok = false;
                        break;
                }
                if (s->finished)
                        break;
                if (queue_pending(&s->in) + m.n_bytes > IN_QUEUE_MAX) {
                        conn_send_error(c, "too much input queued");
                        break;
                }
                if (m.n_bytes > 0)
                        (void) queue_put(&s->in, m.bytes, m.n_bytes);
                if (m.eof)
                        s->in_eof = true;
                int fd = s->interactive ? s->pty : s->in_fd;
                if (fd >= 0) {
                        int k = queue_flush(&s->in, fd);
                        if (k == 1 && s->in_eof && !s->interactive)
                                s->in_fd = close_watched(co, s->in_fd);
                }
                session_update_events(s);
                break;
        }
        case CTL_TERMINAL_RESIZE: {
                Session *s = c->session;
                if (c->state != CONN_SESSION || !s || !streq(m.session_id, s->id)) {
                        ok = false;
                        break;
                }
                if (s->pty >= 0) {
                        struct winsize ws = { .ws_row = (unsigned short) m.rows,
                                              .ws_col = (unsigned short) m.columns,
                                              .ws_xpixel = (unsigned short) m.pixel_width,
                                              .ws_ypixel = (unsigned short) m.pixel_height };
                        (void) ioctl(s->pty, TIOCSWINSZ, &ws);
                }
                break;
        }
        case CTL_TERMINAL_SIGNAL: {
                Session *s = c->session;
                if (c->state != CONN_SESSION || !s || !streq(m.session_id, s->id)) {
                        ok = false;
                        break;
                }
                int sig = m.signal == CTL_SIGNAL_INTERRUPT ? SIGINT : m.signal == CTL_SIGNAL_QUIT ? SIGQUIT : SIGTSTP;
                /* runsc exec forwards signals to the guest process. */
                if (!s->exited && s->pid > 0)
                        (void) kill(s->pid, sig);
                break;
        }
        case CTL_SESSION_CLOSE:
                if (c->state != CONN_SESSION || !c->session || !streq(m.session_id, c->session->id)) {
                        ok = false;
                        break;
                }
                session_hangup(c->session);
                break;
        case CTL_STATUS_REQUEST: {
                if (c->state == CONN_NEW) {
                        ok = false;
                        break;
                }
                CtlMessage reply = { .type = CTL_STATUS, .status = status_json(co) };
                (void) conn_send(c, &reply);
                json_decref(reply.status);
                /* A status query does not keep the sandbox up. */
                if (c->counted && c->state == CONN_READY) {
                        c->counted = false;
                        co->refs--;
                }
                break;
        }
        case CTL_STOP_REQUEST:
                if (c->state == CONN_NEW) {
                        ok = false;
                        break;
                }
                if (c->counted && c->state == CONN_READY) {
                        c->counted = false;
                        co->refs--;
                }
                begin_stop(co, "the sandbox was stopped with 'lazaret stop'");
                break;
        case CTL_PROMPT_ANSWER:
        case CTL_PROMPT_CANCEL: {
                Session *s = c->session;
                if (c->state != CONN_SESSION || !s || !streq(m.session_id, s->id)) {
                        ok = false;
                        break;
                }
                /* An answer to a prompt already taken down (withdrawn, or
                 * its session's requests refused) is stale, not an error. */
                if (m.type == CTL_PROMPT_CANCEL)
                        (void) escalation_cancel(co->esc, s->id, m.request_id);
                else if (escalation_answer(co->esc, s->id, m.request_id, m.decision, m.command) >= 0 &&
                         streq(m.decision, "abort")) {
                        /* [Q]: the person ends this session (and the
                         * sandbox, when it was the last). */
                        log_info("session %s: aborted at the escalation prompt", s->id);
                        session_hangup(s);
                }
                break;
        }
        case CTL_PROMPT_REQUEST:
        case CTL_PROMPT_DONE:
        case CTL_SESSION_OPENED:
        case CTL_TERMINAL_OUTPUT:
        case CTL_SESSION_EXIT:
        case CTL_STATUS:
        case CTL_ERROR:
        case _CTL_TYPE_MAX:
        case _CTL_TYPE_INVALID:
                ok = false;
                break;
        }
        if (!ok)
                conn_send_error(c, "unexpected message for this connection's state");
        ctl_message_done(&m);
}

static void conn_readable(Coordinator *co, Conn *c) {
        uint8_t buf[READ_CHUNK];
        if (c->state == CONN_HELLO_WAIT)
                return; /* read on once its Hello is settled */
        for (;;) {
                /* Never take more than the reader may hold unread. */
                size_t room = ctl_reader_room(&c->rd);
                ssize_t n = read(c->fd, buf, room < sizeof(buf) && room > 0 ? room : sizeof(buf));
                if (n == 0) {
                        c->dead = true;
                        return;
                }
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                c->dead = true;
                        return;
                }
                if (c->close_after_flush)
                        continue; /* dropping this peer: ignore the rest */
                if (ctl_reader_feed(&c->rd, buf, (size_t) n) < 0) {
                        conn_send_error(c, "frame too large or invalid");
                        return;
                }
                conn_process(co, c);
                if (c->close_after_flush || c->dead || c->state == CONN_HELLO_WAIT)
                        return;
        }
}

/* Handle the frames read so far; those behind a Hello being checked wait
 * in the reader. */
static void conn_process(Coordinator *co, Conn *c) {
        while (!c->close_after_flush && !c->dead && c->state != CONN_HELLO_WAIT) {
                const uint8_t *p;
                size_t len;
                int k = ctl_reader_next(&c->rd, &p, &len);
                if (k < 0) {
                        conn_send_error(c, "frame too large or invalid");
                        return;
                }
                if (k == 0)
                        return;
                conn_handle_frame(co, c, p, len);
        }
}

/* Is the peer a lazaret CLI outside every sandbox? It must be our own
 * binary: a process in a sandbox reaches the socket only through runsc
 * (host-uds), and any other program of this user has no business here. The
 * uid check alone passes for both (issue 14). */
static bool peer_is_cli(const Coordinator *co, pid_t pid) {
        char p[64];
        struct stat st;
        snprintf(p, sizeof(p), "/proc/%d/exe", (int) pid);
        return pid > 0 && stat(p, &st) == 0 && st.st_dev == co->self_exe.st_dev && st.st_ino == co->self_exe.st_ino;
}

static void accept_clients(Coordinator *co) {
        for (;;) {
                int fd = accept4(co->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                struct ucred cred;
                socklen_t len = sizeof(cred);
                /* Decision 2: only our own user may talk to us. */
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid()) {
                        log_warning("refused a control connection from uid %d", (int) cred.uid);
                        safe_close(fd);
                        continue;
                }
                if (!peer_is_cli(co, cred.pid)) {
                        char exe[PATH_MAX] = "?", p[64];
                        snprintf(p, sizeof(p), "/proc/%d/exe", (int) cred.pid);
                        ssize_t n = readlink(p, exe, sizeof(exe) - 1);
                        if (n >= 0)
                                exe[n] = '\0';
                        log_warning("refused a control connection from pid %d (%s): not this lazaret binary "
                                    "outside the sandbox",
                                    (int) cred.pid, exe);
                        safe_close(fd);
                        continue;
                }
                if (co->n_conns >= MAX_CONNECTIONS) {
                        log_warning("refused a control connection: %d clients already", MAX_CONNECTIONS);
                        safe_close(fd);
                        continue;
                }
                Conn *c = calloc(1, sizeof(Conn));
                if (!c) {
                        safe_close(fd);
                        continue;
                }
                *c = (Conn){ .co = co, .fd = fd, .state = CONN_NEW, .next = co->conns };
                c->w = (Watch){ WATCH_CONN, c };
                if (epoll_add(co, fd, EPOLLIN | EPOLLRDHUP, &c->w) < 0) {
                        safe_close(fd);
                        free(c);
                        continue;
                }
                co->conns = c;
                co->n_conns++;
        }
}

/* ---- signals and children ----------------------------------------------- */

/* pid (ours), if it has exited: reaped, its status in *ret. */
static bool reaped(pid_t pid, int *ret) {
        return pid > 0 && waitpid(pid, ret, WNOHANG) == pid;
}

/* SIGCHLD: each child of the loop's is reaped by its pid, never with
 * waitpid(-1), which would take the children the slow thread waits for
 * (runsc exec, netd probes) from under it. */
static void reap_children(Coordinator *co) {
        int st;
        if (reaped(co->router.pid, &st)) {
                /* Without its router the sandbox must not go on: it sees
                 * I/O errors on .git, never the host's. */
                co->router.pid = 0;
                log_error("the git router stopped unexpectedly");
                begin_stop(co, "the git router stopped unexpectedly");
        }
        escalation_reap(co->esc);
        if (reaped(co->disk.pid, &st))
                co->disk.pid = 0; /* its pipe's end says the rest */
        for (size_t i = 0; i < co->anchor.n_layers; i++) {
                AnchorLayer *l = &co->anchor.layers[i];
                if (reaped(l->pid, &st)) {
                        /* The sandbox would see I/O errors where its
                         * installed software was: stop it. */
                        l->pid = 0;
                        log_error("the overlay of %s stopped unexpectedly", l->dir);
                        begin_stop(co, "the overlay of a persistent directory stopped unexpectedly");
                }
                if (reaped(l->fs_pid, &st)) {
                        l->fs_pid = 0;
                        log_error("the file system of the changes to %s (fuse2fs) stopped unexpectedly", l->dir);
                        begin_stop(co, "the file system of a persistent directory stopped unexpectedly");
                }
        }
        for (Session *s = co->sessions; s; s = s->next)
                if (!s->exited && reaped(s->pid, &st)) {
                        s->exited = true;
                        s->wstatus = st;
                        s->drain_deadline = now_usec() + DRAIN_USEC;
                }
}

static void handle_signal(Coordinator *co) {
        struct signalfd_siginfo si;
        while (read(co->signal_fd, &si, sizeof(si)) == sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGCHLD:
                        reap_children(co);
                        break;
                case SIGTERM:
                case SIGINT:
                case SIGHUP:
                        begin_stop(co, "the sandbox's coordinator was asked to stop");
                        break;
                default:
                        break;
                }
        }
}

/* ---- start and teardown ------------------------------------------------- */

static int read_spec(LaunchSpec *ret, char **ret_text) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (lseek(COORDINATOR_SPEC_FD, 0, SEEK_SET) < 0)
                return negative_errno();
        int r = read_fd_capped(COORDINATOR_SPEC_FD, 4u * 1024u * 1024u, &text, &len);
        (void) close(COORDINATOR_SPEC_FD);
        if (r < 0)
                return r;
        json_error_t e;
        json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
        if (!j)
                return -EBADMSG;
        r = launch_spec_from_json(j, ret);
        json_decref(j);
        if (r >= 0 && ret_text)
                *ret_text = TAKE_PTR(text);
        return r;
}

/* The participants of a Domain (issue 17): each kind's acquire and release
 * are below; recovery, teardown and a failed start all go through the
 * participant driver with this table. Recovery's passes: the sandbox and
 * the sockets first (pass 0), then what the sandbox used (its network
 * namespace's sidecar, the router, the layers: 1), then the image mount
 * under the layers (2); a teardown ends them in the same order. */
static const PartKind kind_sandbox, kind_publication, kind_escalation, kind_network, kind_router, kind_lower,
        kind_layer;
static const PartKind *const all_kinds[] = { &kind_sandbox, &kind_publication, &kind_network,
                                             &kind_router,  &kind_lower,       &kind_layer };

/* Remove what a dead coordinator of this Domain left behind (decision 12).
 * Returns how many parts it removed. */
static int recover(Coordinator *co) {
        int removed = part_recover(&co->ps, all_kinds, ELEMENTSOF(all_kinds), co);
        if (removed < 0)
                return removed;
        json_t *list = NULL;
        size_t i;
        json_t *p;
        int r = store_list_unclean_terminals(co->store, &list);
        if (r < 0)
                return r;
        json_array_foreach(list, i, p) {
                const char *sid = json_string_value(json_object_get(p, "session_id"));
                ProcessIdentity pi;
                if (process_identity_from_json(json_object_get(p, "exec_client"), &pi) >= 0 &&
                    process_identity_alive(&pi)) {
                        (void) kill(pi.pid, SIGKILL);
                        removed++;
                }
                if (sid) {
                        (void) store_terminal_set_state(co->store, sid, TERMINAL_RELEASE_INTENT, NULL);
                        (void) store_terminal_set_state(co->store, sid, TERMINAL_CLEAN, NULL);
                }
        }
        json_decref(list);

        uint64_t last = 0;
        if (store_generation_last(co->store, &last) >= 0) {
                json_t *g = NULL;
                if (store_generation_get(co->store, last, &g) >= 0) {
                        GenerationDecision d = generation_decision_from_string(
                                json_string_value(json_object_get(g, "durable_decision")));
                        if (d != GENERATION_TORN_DOWN)
                                gen_decide(co, last, GENERATION_ABANDONED);
                        json_decref(g);
                }
        }
        return removed;
}

static int bind_socket(Coordinator *co) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(co->spec.socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, co->spec.socket_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        (void) unlink(co->spec.socket_path);
        mode_t old = umask(0077);
        int r = bind(fd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(fd, 64) < 0) {
                r = negative_errno();
                safe_close(fd);
                return r;
        }
        co->listen_fd = fd;
        return 0;
}

static void teardown(Coordinator *co) {
        /* Sessions first: their CLIs hear why. */
        for (Session *s = co->sessions; s; s = s->next)
                if (!s->finished) {
                        if (!s->exited && s->pid > 0) {
                                (void) kill(s->pid, SIGKILL);
                                int st;
                                while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
                                        ;
                                s->exited = true;
                                s->wstatus = st;
                        }
                        session_finish(s);
                }
        /* Let the CLIs have their last frames. */
        uint64_t deadline = now_usec() + 500000;
        for (Conn *c = co->conns; c; c = c->next)
                while (queue_pending(&c->out) > 0 && now_usec() < deadline) {
                        if (queue_flush(&c->out, c->fd) != 0)
                                break;
                        usleep(1000);
                }

        if (co->listen_fd >= 0) {
                co->listen_fd = close_watched(co, co->listen_fd);
                (void) unlink(co->spec.socket_path);
        }
        (void) part_end(&co->ps, &co->p_publication, co, co);
        (void) part_end(&co->ps, &co->p_sandbox, co, co);
        stop_disk_watch(co);
        stop_escalation(co);
        stop_network(co);
        stop_anchor(co);
        stop_router(co);
        if (co->generation)
                gen_decide(co, co->generation, GENERATION_TORN_DOWN);
        log_info("torn down");
}

static uint64_t next_deadline(Coordinator *co) {
        uint64_t d = UINT64_MAX;
        for (Session *s = co->sessions; s; s = s->next) {
                if (s->exited && !s->finished && s->drain_deadline < d)
                        d = s->drain_deadline;
                if (!s->exited && s->kill_deadline && s->kill_deadline < d)
                        d = s->kill_deadline;
        }
        for (Conn *c = co->conns; c; c = c->next)
                if (c->shut && c->linger_deadline < d)
                        d = c->linger_deadline;
        if (!co->ever_had_session && co->started_usec + IDLE_USEC < d)
                d = co->started_usec + IDLE_USEC;
        if (co->mem_fd >= 0 && !co->stopping && co->mem_next_check < d)
                d = co->mem_next_check;
        return d;
}

/* The memory limit: over it, the sandbox stops, and every terminal is told
 * why (the sessions end with Lazaret's failure status). */
static void check_memory(Coordinator *co) {
        uint64_t used = 0, limit = co->spec.memory_limit_mib << 20;
        co->mem_next_check = now_usec() + MEMORY_CHECK_USEC;
        if (limits_memory_used(co->mem_fd, &used) < 0)
                return;
        co->mem_used = used;
        if (used <= limit || co->stopping)
                return;
        snprintf(co->limit_reason, sizeof(co->limit_reason),
                 "the sandbox reached its memory limit (%" PRIu64 " MiB held; memory_limit = %" PRIu64
                 " MiB in the profile)",
                 used >> 20, co->spec.memory_limit_mib);
        log_error("%s", co->limit_reason);
        co->runtime_lost = true;
        begin_stop(co, co->limit_reason);
}

/* disk_limit for the work files: the helper's figures, or its end. */
static void disk_readable(Coordinator *co) {
        int k = diskwatch_read(&co->disk);
        if (k < 0) {
                co->disk.fd = close_watched(co, co->disk.fd);
                if (!co->stopping) {
                        /* Unmeasured, the limit would be a claim only. */
                        log_error("the measure of the work files stopped unexpectedly");
                        co->runtime_lost = true;
                        begin_stop(co, "the measure of the work files (disk_limit) stopped unexpectedly");
                }
                return;
        }
        uint64_t grown = diskwatch_grown(&co->disk), limit = co->spec.disk_limit_mib << 20;
        if (k == 0 || grown <= limit || co->stopping)
                return;
        StrBuf b = STRBUF_INIT;
        for (size_t i = 0; co->disk_paths[i]; i++)
                strbuf_printf(&b, "%s%s", i ? ", " : "", co->disk_paths[i]);
        _cleanup_free_ char *paths = strbuf_steal(&b);
        snprintf(co->limit_reason, sizeof(co->limit_reason),
                 "the work files grew by %" PRIu64 " MiB during this run, past disk_limit = %" PRIu64
                 " MiB in the profile (%s)",
                 grown >> 20, co->spec.disk_limit_mib, paths ? paths : "?");
        log_error("%s", co->limit_reason);
        co->runtime_lost = true;
        begin_stop(co, co->limit_reason);
}

static void run_timers(Coordinator *co) {
        uint64_t now = now_usec();
        if (co->mem_fd >= 0 && !co->stopping && now >= co->mem_next_check)
                check_memory(co);
        for (Session *s = co->sessions; s; s = s->next) {
                if (!s->exited && s->kill_deadline && now >= s->kill_deadline) {
                        (void) kill(s->pid, SIGKILL);
                        s->kill_deadline = 0;
                }
                if (s->exited && !s->finished) {
                        bool drained = s->pty < 0 && s->out_fd < 0 && s->err_fd < 0;
                        if (drained || now >= s->drain_deadline)
                                session_finish(s);
                }
        }
        if (!co->ever_had_session && now >= co->started_usec + IDLE_USEC && co->refs == 0)
                begin_stop(co, NULL);
}

static void serve(Coordinator *co) {
        for (;;) {
                /* Drop finished things first. */
                for (Conn *c = co->conns, *next; c; c = next) {
                        next = c->next;
                        /* Closing with the peer's data unread would reset the
                         * connection and lose our last frames on its side:
                         * shut our half, then wait for the peer to close. */
                        if (!c->dead && c->close_after_flush && queue_pending(&c->out) == 0 && !c->shut) {
                                (void) shutdown(c->fd, SHUT_WR);
                                c->shut = true;
                                c->linger_deadline = now_usec() + LINGER_USEC;
                        }
                        if (c->dead || (c->shut && now_usec() >= c->linger_deadline))
                                conn_free(co, c);
                }
                for (Session *s = co->sessions, *next; s; s = next) {
                        next = s->next;
                        if (s->finished && !s->conn)
                                session_free(co, s);
                }
                bool sessions_left = co->sessions != NULL;
                if (co->stopping && !sessions_left)
                        return;
                if (!co->stopping && co->ever_had_session && co->refs == 0 && !sessions_left)
                        begin_stop(co, NULL);
                if (co->stopping && !sessions_left)
                        return;

                uint64_t d = next_deadline(co), now = now_usec();
                int timeout = d == UINT64_MAX ? -1 : d <= now ? 0 : (int) ((d - now + 999) / 1000);
                struct epoll_event evs[32];
                int n = epoll_wait(co->epfd, evs, 32, timeout);
                if (n < 0 && errno != EINTR) {
                        log_error("epoll_wait: %s", strerror(errno));
                        begin_stop(co, "internal error");
                        return;
                }
                for (int i = 0; i < n; i++) {
                        Watch *w = evs[i].data.ptr;
                        uint32_t e = evs[i].events;
                        switch (w->kind) {
                        case WATCH_LISTEN:
                                accept_clients(co);
                                break;
                        case WATCH_SIGNAL:
                                handle_signal(co);
                                break;
                        case WATCH_STORE:
                                (void) store_worker_dispatch(w->obj);
                                break;
                        case WATCH_ESCALATION:
                                if (co->esc)
                                        escalation_dispatch(co->esc);
                                break;
                        case WATCH_SIDECAR:
                                /* Without netd nobody holds the policy:
                                 * stop rather than run unguarded. */
                                co->sidecar_fd = close_watched(co, co->sidecar_fd);
                                if (!co->stopping) {
                                        /* Like a lost runtime: the sessions end
                                         * with Lazaret's failure status. */
                                        log_error("the network sidecar stopped unexpectedly");
                                        co->runtime_lost = true;
                                        begin_stop(co, "the network sidecar stopped unexpectedly");
                                }
                                break;
                        case WATCH_DISK:
                                disk_readable(co);
                                break;
                        case WATCH_RUNTIME:
                                /* conmon exited: the container is gone. */
                                if (!co->stopping)
                                        check_runtime(co, 0);
                                else
                                        co->runtime_fd = close_watched(co, co->runtime_fd);
                                break;
                        case WATCH_CONN: {
                                Conn *c = w->obj;
                                if (e & EPOLLIN)
                                        conn_readable(co, c);
                                if (e & (EPOLLERR | EPOLLHUP))
                                        c->dead = true;
                                if (!c->dead && queue_pending(&c->out) > 0) {
                                        if (queue_flush(&c->out, c->fd) < 0)
                                                c->dead = true;
                                        else
                                                conn_update_events(c);
                                }
                                if (c->session)
                                        session_update_events(c->session);
                                if ((e & EPOLLRDHUP) && !(e & EPOLLIN))
                                        c->dead = true;
                                break;
                        }
                        case WATCH_PTY: {
                                Session *s = w->obj;
                                if (s->pty < 0)
                                        break;
                                if (e & EPOLLOUT) {
                                        if (queue_flush(&s->in, s->pty) < 0)
                                                queue_done(&s->in);
                                }
                                if (e & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                                        if (session_pump(s, s->pty, 1) == 1)
                                                session_close_output(s, &s->pty);
                                }
                                if (s->pty >= 0)
                                        session_update_events(s);
                                break;
                        }
                        case WATCH_STDIN: {
                                Session *s = w->obj;
                                int k = s->in_fd >= 0 ? queue_flush(&s->in, s->in_fd) : -EBADF;
                                if (k < 0 || (k == 1 && s->in_eof))
                                        s->in_fd = close_watched(co, s->in_fd);
                                if (s->in_fd >= 0)
                                        session_update_events(s);
                                break;
                        }
                        case WATCH_STDOUT:
                        case WATCH_STDERR: {
                                Session *s = w->obj;
                                int *fd = w->kind == WATCH_STDOUT ? &s->out_fd : &s->err_fd;
                                if (*fd >= 0 && session_pump(s, *fd, w->kind == WATCH_STDOUT ? 1 : 2) == 1)
                                        session_close_output(s, fd);
                                break;
                        }
                        }
                }
                run_timers(co);
        }
}

/* The git router is a Participant: recorded before it starts, Committed
 * with its process and mount identity, Clean once it is gone. obj: the
 * RouterRun. */
static int router_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        RouterRun *rr = obj;
        (void) intent;
        const char *wt = co->worktree ? strrchr(co->worktree, '/') : NULL;
        int r = router_start(&co->spec, wt ? wt + 1 : NULL, rr, ret_error);
        if (r < 0)
                return r;
        *ret_commit = json_pack("{s:o, s:{s:i}}", "daemon", process_identity_to_json(&rr->ident), "mount", "mount_id",
                                rr->mount_id);
        log_info("%s router %d serving %s on %s", co->spec.branch ? "git" : "workspace", (int) rr->pid,
                 co->spec.branch ? co->spec.git_dir : co->spec.workspace, rr->mountpoint);
        return 0;
}

static int router_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        if (obj) {
                router_stop(&co->spec, obj);
                router_run_done(obj);
                return 0;
        }
        /* A dead coordinator's: kill it (by pid and start time), then
         * detach the mount it leaves behind. */
        ProcessIdentity pi;
        if (process_identity_from_json(json_object_get(own, "daemon"), &pi) >= 0 && process_identity_alive(&pi))
                (void) kill(pi.pid, SIGKILL);
        const char *mp = json_string_value(json_object_get(own, "mountpoint"));
        if (mp)
                fuse_mount_detach(&co->spec, mp);
        return 0;
}

static const PartKind kind_router = {
        .role = ROLE_GIT_ROUTING,
        .recover_pass = 1, /* after the sandbox that has it mounted */
        .acquire = router_acquire,
        .release = router_release,
};

static int start_router(Coordinator *co, char **ret_error) {
        _cleanup_free_ char *mnt = path_join(co->spec.domain_dir, "git-mnt"),
                            *iso = path_join(co->spec.domain_dir, "git-isolated");
        if (!mnt || !iso)
                return -ENOMEM;
        return part_begin(&co->ps, co->generation, &kind_router,
                          json_pack("{s:s, s:s, s:s}", "mountpoint", mnt, "host_root",
                                    co->spec.branch ? co->spec.git_dir : co->spec.workspace, "isolated_root", iso),
                          co, &co->router, &co->p_router, ret_error);
}

static void stop_router(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_router, co, &co->router);
}

/* ---- host escalation ------------------------------------------------------ */

static int esc_session(void *userdata, const char *session_id, unsigned char ret_anchor[SESSION_KEY_LEN],
                       bool *ret_interactive) {
        Coordinator *co = userdata;
        for (Session *s = co->sessions; s; s = s->next)
                if (streq(s->id, session_id) && !s->finished && !s->exited && s->has_anchor) {
                        memcpy(ret_anchor, s->anchor, SESSION_KEY_LEN);
                        *ret_interactive = s->interactive && s->conn;
                        return 0;
                }
        return -ENOENT;
}

static Session *prompt_session(Coordinator *co, const char *session_id) {
        for (Session *s = co->sessions; s; s = s->next)
                if (streq(s->id, session_id) && !s->finished && s->interactive && s->conn && !s->conn->dead)
                        return s;
        return NULL;
}

static int esc_prompt(void *userdata, const EscalationPrompt *p) {
        Coordinator *co = userdata;
        Session *s = prompt_session(co, p->session_id);
        if (!s)
                return -ENOENT;
        CtlMessage m = { .type = CTL_PROMPT_REQUEST,
                         .profile = (char *) p->profile,
                         .command = (char *) p->command,
                         .justification = (char *) p->justification,
                         .queued = p->queued };
        memcpy(m.session_id, s->id, 37);
        memcpy(m.request_id, p->request_id, 37);
        return conn_send(s->conn, &m) < 0 ? -ENOENT : 0;
}

static void esc_prompt_done(void *userdata, const char *session_id, const char *request_id) {
        Coordinator *co = userdata;
        Session *s = prompt_session(co, session_id);
        if (!s)
                return;
        CtlMessage m = { .type = CTL_PROMPT_DONE };
        memcpy(m.session_id, s->id, 37);
        memcpy(m.request_id, request_id, 37);
        (void) conn_send(s->conn, &m);
}

static int job_audit(Store *st, void *userdata) {
        return store_audit_append(st, userdata, NULL);
}

static void job_audit_done(int result, void *userdata) {
        if (result < 0)
                log_error("cannot append to the audit trail: %s", strerror(-result));
        json_decref(userdata);
}

/* Appended on the store thread (an fsync), in order; once the loop has
 * ended (teardown), here. */
static int esc_audit(void *userdata, json_t *record) {
        Coordinator *co = userdata;
        if (!co->worker)
                return store_audit_append(co->store, record, NULL);
        json_incref(record);
        int r = store_worker_submit(co->worker, job_audit, job_audit_done, record);
        if (r < 0)
                json_decref(record);
        return r;
}

/* Publications: the control socket (obj: the coordinator, live) and the
 * escalation socket and certificates (obj: the coordinator, whose
 * Escalation goes). Release works from either ownership. */
static int publication_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        const char *sock = json_string_value(json_object_get(own, "socket_path"));
        if (sock)
                (void) unlink(sock);
        const char *state_dir = json_string_value(json_object_get(own, "escalation_state_dir")),
                   *socket_dir = json_string_value(json_object_get(own, "escalation_socket_dir"));
        if (state_dir || socket_dir) {
                if (obj)
                        co->esc = escalation_free(co->esc);
                escalation_remove(state_dir, socket_dir);
        }
        return 0;
}

static int socket_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        (void) obj;
        (void) intent;
        (void) ret_commit;
        (void) ret_error;
        return bind_socket(ctx);
}

static int escalation_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        (void) obj;
        (void) intent;
        (void) ret_commit;
        char sandbox_id[128];
        snprintf(sandbox_id, sizeof(sandbox_id), "%s-g%" PRIu64, co->container_name, co->generation);
        EscalationHost host = { esc_session, esc_audit, esc_prompt, esc_prompt_done, co };
        int r = escalation_new(&co->spec, sandbox_id, co->worktree ? co->worktree : co->spec.workspace, &host, &co->esc,
                               ret_error);
        if (r < 0)
                return r; /* escalation_new removed what it made */
        log_info("escalation socket %s/escalate.sock (sandbox %s)", escalation_socket_dir(co->esc), sandbox_id);
        return 0;
}

static const PartKind kind_publication = { .role = ROLE_PUBLICATION,
                                           .acquire = socket_acquire,
                                           .release = publication_release };
static const PartKind kind_escalation = { .role = ROLE_PUBLICATION,
                                          .acquire = escalation_acquire,
                                          .release = publication_release };

static void stop_escalation(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_escalation, co, co);
        co->esc = escalation_free(co->esc);
}

static int start_escalation(Coordinator *co, char **ret_error) {
        if (!co->spec.escalation_enabled)
                return 0;
        /* On record before anything is made: a successor removes what a
         * killed coordinator leaves. */
        _cleanup_free_ char *state_dir = NULL, *socket_dir = NULL;
        int r = escalation_paths(&co->spec, &state_dir, &socket_dir);
        if (r < 0)
                return r;
        return part_begin(
                &co->ps, co->generation, &kind_escalation,
                json_pack("{s:s, s:s}", "escalation_state_dir", state_dir, "escalation_socket_dir", socket_dir), co, co,
                &co->p_escalation, ret_error);
}

/* The State Anchor (spec §4.3.3): the image's mount is a PreparedLower
 * participant (Intent with the image id, Committed with its path), each
 * overlay a StateAnchor participant (Intent with its directories, Committed
 * with the daemon and the mount). Layers start after the image mount and
 * stop before it goes. */
/* obj: the StateAnchor. */
static int lower_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        StateAnchor *a = obj;
        (void) intent;
        int r = anchor_lease_image(&co->spec, a, co->generation, ret_error);
        if (r < 0)
                return r;
        *ret_commit = json_pack("{s:s, s:s}", "lease_state", "Held", "path", a->image_mount);
        return 0;
}

/* Our lease on the image's mount in the Storage Catalog, taken or not
 * (release is idempotent); the last lease unmounts it. */
static int lower_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        const char *image = json_string_value(json_object_get(own, "prepared_artifact_id"));
        if (image)
                (void) anchor_release_image(&co->spec, image, generation);
        if (obj) {
                StateAnchor *a = obj;
                a->image_mount = mfree(a->image_mount);
        }
        return 0;
}

/* obj: the AnchorLayer. */
static int layer_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        AnchorLayer *l = obj;
        (void) intent;
        int r = anchor_layer_start(&co->spec, &co->anchor, l, ret_error);
        if (r < 0)
                return r;
        *ret_commit = json_pack("{s:o, s:{s:i}, s:s, s:o, s:I}", "daemon", process_identity_to_json(&l->ident), "mount",
                                "mount_id", l->mount_id, "lower_path", l->lower, "layer_daemon",
                                process_identity_to_json(&l->fs_ident), "layer_size_mib", (json_int_t) l->fs_size_mib);
        r = anchor_record_image(&co->spec, &co->anchor, l);
        if (r > 0)
                log_info("the image under %s changed: its new copy is the lower layer now, the changes in %s "
                         "are kept",
                         l->dir, l->changes);
        else if (r < 0)
                log_warning("cannot record the image of %s: %s", l->dir, strerror(-r));
        log_info("persistent %s: fuse-overlayfs %d on %s (lower %s), changes in %s (fuse2fs %d, %" PRIu64 " MiB)",
                 l->dir, (int) l->pid, l->merged, l->lower, l->image, (int) l->fs_pid, l->fs_size_mib);
        return 0;
}

/* The overlay, then the layer's file system under it. */
static int layer_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        if (obj) {
                anchor_layer_stop(&co->spec, obj);
                return 0;
        }
        ProcessIdentity ov, fs;
        bool has_ov = process_identity_from_json(json_object_get(own, "daemon"), &ov) >= 0,
             has_fs = process_identity_from_json(json_object_get(own, "layer_daemon"), &fs) >= 0;
        anchor_layer_recover(&co->spec, has_ov ? &ov : NULL, json_string_value(json_object_get(own, "merged_path")),
                             has_fs ? &fs : NULL, json_string_value(json_object_get(own, "layer_mount")));
        return 0;
}

static const PartKind kind_lower = { .role = ROLE_PREPARED_LOWER,
                                     .recover_pass = 2, /* after the overlays above it */
                                     .acquire = lower_acquire,
                                     .release = lower_release };
static const PartKind kind_layer = {
        .role = ROLE_STATE_ANCHOR,
        .recover_pass = 1, /* after the sandbox that has it mounted */
        .acquire = layer_acquire,
        .release = layer_release,
};

/* The State Anchor (spec §4.3.3): the image's mount is a PreparedLower
 * participant (Intent with the image id, Committed with its path), each
 * overlay a StateAnchor participant (Intent with its directories, Committed
 * with the daemons and the mount). Layers start after the image mount and
 * stop before it goes. */
static void stop_anchor(Coordinator *co) {
        for (size_t i = co->anchor.n_layers; i > 0; i--) {
                AnchorLayer *l = &co->anchor.layers[i - 1];
                (void) part_end(&co->ps, &l->participant, co, l);
        }
        (void) part_end(&co->ps, &co->anchor.p_lower, co, &co->anchor);
}

static int start_anchor(Coordinator *co, char **ret_error) {
        StateAnchor *a = &co->anchor;
        int r = anchor_init(&co->spec, a);
        if (r < 0 || a->n_layers == 0)
                return r;
        r = anchor_check_domain_root(co->spec.domain_dir, ret_error);
        if (r < 0)
                return r;
        r = anchor_resolve_image(&co->spec, a, ret_error);
        if (r < 0)
                return r;
        r = part_begin(&co->ps, co->generation, &kind_lower,
                       json_pack("{s:s, s:s, s:s, s:n}", "prepared_artifact_id", a->image_id, "source_identity",
                                 co->spec.image, "lease_state", "Acquiring", "path"),
                       co, a, &a->p_lower, ret_error);
        if (r < 0)
                return r;
        /* Changes from before the layers' images are copied in once. */
        bool moving = false;
        for (size_t i = 0; i < a->n_layers; i++) {
                struct stat st;
                if (access(a->layers[i].image, F_OK) < 0 && lstat(a->layers[i].legacy_changes, &st) == 0)
                        moving = true;
        }
        if (moving)
                status_wait(co, 600, "moving the persistent directories' changes into their images");
        for (size_t i = 0; i < a->n_layers; i++) {
                AnchorLayer *l = &a->layers[i];
                r = part_begin(&co->ps, co->generation, &kind_layer,
                               json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:n, s:n, s:n}", "dir", l->dir,
                                         "lower_artifact_id", a->image_id, "layer_image", l->image, "layer_mount",
                                         l->fs_mnt, "upper_path", l->changes, "work_path", l->work, "merged_path",
                                         l->merged, "daemon", "mount", "layer_daemon"),
                               co, l, &l->participant, ret_error);
                if (r < 0)
                        return r; /* start_failed() ends the others */
        }
        if (moving)
                status_wait(co, 10, "starting the sandbox");
        return 0;
}

static void stop_network(Coordinator *co);

/* The network sidecar: acquired is attested (Prepared); the probes'
 * evidence commits it (prove_network). obj: the coordinator, live. */
static int network_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        (void) obj;
        (void) intent;
        int r = sidecar_start(&co->spec, &co->sidecar, ret_error);
        if (r < 0)
                return r;
        ProcessIdentity conmon = {};
        (void) process_identity_of(co->sidecar.conmon_pid, &conmon);
        *ret_commit = json_pack("{s:s, s:O?, s:o}", "container_id", co->sidecar.id, "namespace",
                                json_object_get(co->sidecar.attestation, "enforcement_namespace"), "runtime_supervisor",
                                process_identity_to_json(&conmon));
        return 0;
}

static int network_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        if (obj && co->sidecar_fd >= 0)
                co->sidecar_fd = close_watched(co, co->sidecar_fd);
        const char *name = json_string_value(json_object_get(own, "container_name"));
        _cleanup_free_ char *err = NULL;
        if (name && container_remove(&co->spec, name, &err) < 0) {
                log_error("cannot remove the network sidecar %s: %s", name, err ? err : "?");
                return -EIO;
        }
        if (obj)
                sidecar_done(&co->sidecar);
        return 0;
}

static const PartKind kind_network = {
        .role = ROLE_NETWORK,
        .recover_pass = 1, /* after the sandbox in its namespace */
        .acquire_prepares = true,
        .acquire = network_acquire,
        .release = network_release,
};

static int start_network(Coordinator *co, char **ret_error) {
        _cleanup_(netpolicy_done) NetPolicy np = {};
        _cleanup_free_ char *canon = NULL;
        const char *why = NULL;
        co->declared_netpolicy = strdup(co->spec.netpolicy);
        if (!co->declared_netpolicy)
                return -ENOMEM;
        int r = effective_policy(co->declared_netpolicy, &np, &canon, &co->host, &why);
        if (r >= 0)
                r = set_policy(co, &np, TAKE_PTR(canon));
        if (r < 0) {
                *ret_error = strdup(why ?: "out of memory");
                return r;
        }
        for (size_t i = 0; i < co->host.n; i++)
                if (co->host.effects[i] == HOST_ADDR_IMPLICIT_DENY) {
                        char a[64];
                        netaddr_format(&co->host.addrs[i], a, sizeof(a));
                        log_info("implicit rule: deny %s (an address of the host)", a);
                }
        if (!co->spec.sidecar_image) {
                log_info("the policy permits no destination: loopback only, no sidecar");
                (void) own_gen_update(co->store, co->generation, json_pack("{s:s}", "network", "LoopbackOnly"));
                return 0;
        }
        _cleanup_free_ char *name = NULL;
        r = sidecar_name(&co->spec, &name);
        if (r < 0)
                return r;
        for (int attempt = 0;; attempt++) {
                log_debug("starting the network sidecar (+%" PRIu64 " ms)", (now_usec() - co->started_usec) / 1000);
                r = part_begin(&co->ps, co->generation, &kind_network,
                               json_pack("{s:s, s:s}", "container_name", name, "derived_policy_digest",
                                         co->spec.netpolicy_digest),
                               co, co, &co->p_network, ret_error);
                if (r < 0)
                        return r;
                /* Podman may have given the host an address just now
                 * (rootful: its bridge, made with the first container on
                 * it). Read them again; one the policy permits means the
                 * sidecar starts again with it denied (in the main table,
                 * where gVisor's own stack reads the routes). */
                _cleanup_(netpolicy_done) NetPolicy again = {};
                _cleanup_free_ char *again_canon = NULL;
                _cleanup_(host_addrs_done) HostAddrs h = {};
                r = effective_policy(co->declared_netpolicy, &again, &again_canon, &h, &why);
                if (r < 0) {
                        stop_network(co);
                        *ret_error = strdup(why);
                        return r;
                }
                const NetAddr *fresh = host_permitted(&co->net, &h);
                if (!fresh) {
                        host_addrs_done(&co->host);
                        co->host = h;
                        h = (HostAddrs){};
                        break;
                }
                char a[64];
                netaddr_format(fresh, a, sizeof(a));
                stop_network(co);
                if (attempt > 0) {
                        if (asprintf(ret_error,
                                     "the host's addresses keep changing (%s is new since the sidecar started); "
                                     "try again when they are stable",
                                     a) < 0)
                                *ret_error = NULL;
                        return -EAGAIN;
                }
                log_info("the host has a new address, %s, since the sidecar started: starting it again with "
                         "that address denied",
                         a);
                host_addrs_done(&co->host);
                co->host = h;
                h = (HostAddrs){};
                r = set_policy(co, &again, TAKE_PTR(again_canon));
                if (r < 0)
                        return r;
        }
        (void) own_gen_update(co->store, co->generation, json_pack("{s:s}", "network_sidecar_id", co->sidecar.id));
        co->sidecar_fd = (int) syscall(SYS_pidfd_open, co->sidecar.conmon_pid, 0);
        log_info("network sidecar %s attested policy %.12s (+%" PRIu64 " ms)", co->sidecar.name,
                 co->spec.netpolicy_digest, (now_usec() - co->started_usec) / 1000);
        return 0;
}

/* Probe from where the agent's traffic originates and record the Network
 * Readiness Evidence; a mismatch is an error naming the destination. */
static int prove_network(Coordinator *co, char ret_fingerprint[65], char **ret_error) {
        if (!co->sidecar.name)
                return 0;
        json_t *probe = NULL;
        int r = sidecar_probe(&co->spec, &co->sidecar, &co->sandbox, &co->net, &probe, ret_error);
        json_t *ns = json_object_get(co->sidecar.attestation, "enforcement_namespace");
        json_t *identity =
                json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:O?}", "schema_id", "lazaret.network-readiness-identity.v1",
                          "domain_id", co->spec.domain_hash, "generation_id", (json_int_t) co->generation,
                          "configuration_fingerprint", co->spec.fingerprint, "network_sidecar_id", co->sidecar.id,
                          "derived_policy_digest", co->spec.netpolicy_digest, "enforcement_namespace", ns);
        char fp[65] = "";
        if (!identity || sidecar_readiness_fingerprint(identity, fp) < 0) {
                json_decref(identity);
                json_decref(probe);
                return -ENOMEM;
        }
        json_decref(identity);
        if (probe) {
                json_object_set_new(probe, "domain_id", json_string(co->spec.domain_hash));
                json_object_set_new(probe, "generation_id", json_integer((json_int_t) co->generation));
        }
        ProcessIdentity conmon = {};
        (void) process_identity_of(co->sidecar.conmon_pid, &conmon);
        json_t *attestation = json_deep_copy(co->sidecar.attestation);
        if (attestation)
                json_object_update_new(attestation,
                                       json_pack("{s:s, s:I, s:s, s:s, s:o, s:n}", "domain_id", co->spec.domain_hash,
                                                 "generation_id", (json_int_t) co->generation,
                                                 "configuration_fingerprint", co->spec.fingerprint,
                                                 "network_sidecar_id", co->sidecar.id, "runtime_supervisor",
                                                 process_identity_to_json(&conmon), "connectivity_helper"));
        json_t *evidence =
                json_pack("{s:s, s:I, s:s, s:s, s:o*, s:o*, s:b}", "domain_id", co->spec.domain_hash, "generation_id",
                          (json_int_t) co->generation, "network_sidecar_id", co->sidecar.id, "readiness_fingerprint",
                          fp, "attestation", attestation, "probe", probe, "accepted", r >= 0);
        if (r < 0) {
                /* Kept for the record on the participant being released. */
                (void) part_update(&co->ps, &co->p_network, -1, json_pack("{s:o*}", "rejected_evidence", evidence));
                return r;
        }
        json_t *own = json_pack("{s:s, s:s, s:O?, s:o, s:o*}", "derived_policy_digest", co->spec.netpolicy_digest,
                                "readiness_fingerprint", fp, "namespace", ns, "runtime_supervisor",
                                process_identity_to_json(&conmon), "readiness_evidence", evidence);
        /* The first proof commits the participant; an update's proof
         * replaces the evidence. */
        if (part_update(&co->ps, &co->p_network, PARTICIPANT_COMMITTED, json_incref(own)) == -EINVAL)
                (void) part_update(&co->ps, &co->p_network, -1, own);
        else
                json_decref(own);
        memcpy(ret_fingerprint, fp, sizeof(fp));
        log_info("network readiness proved (fingerprint %.12s, +%" PRIu64 " ms)", fp,
                 (now_usec() - co->started_usec) / 1000);
        return 0;
}

static void stop_network(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_network, co, co);
}

/* The start failed after the generation was recorded: release what was
 * made, mark the Sandbox participant Clean and the generation Failed. The
 * caller has already told the leader why. Returns the exit status. */
/* Everything the coordinator holds, freed or closed; safe to call twice and
 * on a partly made coordinator (every early return calls it, so the ASan
 * build's leak check sees a clean exit). */
static void release(Coordinator *co) {
        /* Whatever remains is recorded, and the next coordinator removes
         * it: the watchdog has nothing to do. */
        if (co->watchdog_fd >= 0) {
                (void) !write(co->watchdog_fd, "done", 4);
                co->watchdog_fd = safe_close(co->watchdog_fd);
        }
        co->slow = store_worker_free(co->slow);
        co->worker = store_worker_free(co->worker);
        while (co->conns)
                conn_free(co, co->conns);
        while (co->sessions)
                session_free(co, co->sessions);
        co->runtime_fd = safe_close(co->runtime_fd);
        co->mem_fd = safe_close(co->mem_fd);
        diskwatch_stop(&co->disk);
        for (size_t i = 0; co->disk_paths && co->disk_paths[i]; i++)
                free(co->disk_paths[i]);
        co->disk_paths = mfree(co->disk_paths);
        co->sidecar_fd = safe_close(co->sidecar_fd);
        co->signal_fd = safe_close(co->signal_fd);
        co->epfd = safe_close(co->epfd);
        co->store = store_close(co->store);
        netpolicy_done(&co->net);
        co->declared_netpolicy = mfree(co->declared_netpolicy);
        host_addrs_done(&co->host);
        sandbox_info_done(&co->sandbox);
        sidecar_done(&co->sidecar);
        router_run_done(&co->router);
        anchor_done(&co->anchor);
        co->esc = escalation_free(co->esc);
        launch_spec_done(&co->spec);
        co->container_name = mfree(co->container_name);
        co->terminfo_dir = mfree(co->terminfo_dir);
        co->worktree = mfree(co->worktree);
}

/* What the sandbox writes on the host outside its layers: the agent's
 * worktree and the repository's git directory in branch mode, the
 * workspace otherwise (with a git directory outside it). */
static int start_disk_watch(Coordinator *co, char **ret_error) {
        const char *v[3] = {};
        size_t n = 0;
        if (co->worktree) {
                v[n++] = co->worktree;
                if (co->spec.git_dir)
                        v[n++] = co->spec.git_dir;
        } else {
                v[n++] = co->spec.workspace;
                if (co->spec.git_dir && !path_under(co->spec.git_dir, co->spec.workspace))
                        v[n++] = co->spec.git_dir;
        }
        co->disk_paths = calloc(n + 1, sizeof(char *));
        if (!co->disk_paths)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (!(co->disk_paths[i] = strdup(v[i])))
                        return -ENOMEM;
        int r = diskwatch_start(&co->spec, co->disk_paths, co->spec.disk_limit_mib << 20, &co->disk);
        if (r < 0) {
                if (asprintf(ret_error, "cannot start the measure of the work files for disk_limit: %s", strerror(-r)) <
                    0)
                        *ret_error = NULL;
                return r;
        }
        log_info("work files measured by %d: the sandbox stops when they grow by more than %" PRIu64 " MiB",
                 (int) co->disk.pid, co->spec.disk_limit_mib);
        return 0;
}

/* The baseline is taken before the sandbox starts: a walk still going on
 * while the agent writes would count into it what the agent wrote in the
 * directories it had not reached yet, and that would escape the limit. The
 * walk runs beside the network's and escalation's start; what is left of it
 * is waited for here. */
static int wait_disk_base(Coordinator *co, char **ret_error) {
        bool said = false;
        uint64_t start = now_usec();
        while (!co->disk.have_base) {
                struct pollfd pfd = { .fd = co->disk.fd, .events = POLLIN };
                int k = poll(&pfd, 1, 1000);
                if (k < 0 && errno != EINTR)
                        return negative_errno();
                if (k > 0 && diskwatch_read(&co->disk) < 0) {
                        *ret_error = strdup("the measure of the work files (disk_limit) ended before its first walk; "
                                            "see the coordinator log");
                        return -EIO;
                }
                if (k == 0 && !said) {
                        status_wait(co, 600, "measuring the work files for disk_limit");
                        said = true;
                }
        }
        if (said)
                status_wait(co, 10, "starting the sandbox");
        log_info("work files: %" PRIu64 " MiB at the start (measured in %" PRIu64 " ms)", co->disk.base >> 20,
                 (now_usec() - start) / 1000);
        return 0;
}

static void stop_disk_watch(Coordinator *co) {
        if (co->disk.fd >= 0)
                co->disk.fd = close_watched(co, co->disk.fd);
        diskwatch_stop(&co->disk);
}

/* The sandbox's container: removed by name (Podman's --ignore makes that
 * idempotent). */
static int sandbox_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        (void) obj;
        (void) intent;
        int r = sandbox_start(&co->spec, co->generation, co->worktree ? co->worktree : co->spec.workspace,
                              co->router.pid > 0 ? co->router.mountpoint : NULL, co->terminfo_dir, co->sidecar.name,
                              co->anchor.n_layers ? &co->anchor : NULL, co->esc ? escalation_certs_dir(co->esc) : NULL,
                              co->esc ? escalation_socket_dir(co->esc) : NULL, &co->sandbox, ret_error);
        if (r < 0)
                return r;
        ProcessIdentity conmon = {};
        (void) process_identity_of(co->sandbox.conmon_pid, &conmon);
        *ret_commit = json_pack("{s:s, s:s, s:o}", "container_id", co->sandbox.id, "runtime_root",
                                co->sandbox.runsc_root, "runtime_supervisor", process_identity_to_json(&conmon));
        return 0;
}

static int sandbox_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) obj;
        (void) generation;
        const char *name = json_string_value(json_object_get(own, "container_name"));
        _cleanup_free_ char *err = NULL;
        if (name && container_remove(&co->spec, name, &err) < 0) {
                log_error("cannot remove the sandbox %s: %s", name, err ? err : "?");
                return -EIO;
        }
        return 0;
}

static const PartKind kind_sandbox = { .role = ROLE_SANDBOX, .acquire = sandbox_acquire, .release = sandbox_release };

static int start_failed(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_publication, co, co);
        (void) part_end(&co->ps, &co->p_sandbox, co, co);
        stop_disk_watch(co);
        stop_escalation(co);
        stop_network(co);
        stop_anchor(co);
        stop_router(co);
        gen_decide(co, co->generation, GENERATION_FAILED);
        release(co);
        return 1;
}

static int ensure_dirs(Coordinator *co) {
        const char *why = NULL;
        int r = private_dir(co->spec.domain_dir, &why);
        if (r < 0)
                return r;
        co->terminfo_dir = path_join(co->spec.domain_dir, "terminfo");
        if (!co->terminfo_dir)
                return -ENOMEM;
        if (mkdir(co->terminfo_dir, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

#define COORDINATOR_INIT(status)                                                                                       \
        ((Coordinator){ .epfd = -EBADF,                                                                                \
                        .listen_fd = -EBADF,                                                                           \
                        .signal_fd = -EBADF,                                                                           \
                        .runtime_fd = -EBADF,                                                                          \
                        .sidecar_fd = -EBADF,                                                                          \
                        .sidecar = { .ctl_fd = -EBADF },                                                               \
                        .status_fd = (status),                                                                         \
                        .watchdog_fd = -EBADF,                                                                         \
                        .mem_fd = -EBADF,                                                                              \
                        .disk = { .fd = -EBADF } })

/* Start the watchdog: `lazaret __watchdog` in a session of its own (not
 * our child: the double fork), with the LaunchSpec and its end of the
 * pipe. Without it a killed coordinator's sandbox would run on until the
 * next `lazaret run`; so a failure here fails the start. */
static int spawn_watchdog(Coordinator *co) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        /* The LaunchSpec on fd 3 (ours already), its end of the pipe on
         * fd 4; stdout and stderr the log; stdin /dev/null. */
        SpawnFd fds[] = { { COORDINATOR_SPEC_FD, COORDINATOR_SPEC_FD }, { p[0], WATCHDOG_PIPE_FD } };
        SpawnSpec sp =
                SPAWN_SPEC_INIT("/proc/self/exe", (char *const[]){ (char *) "lazaret", (char *) "__watchdog", NULL });
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.detach = true;
        int r = spawn(&sp, NULL);
        safe_close(p[0]);
        if (r < 0) {
                safe_close(p[1]);
                return r;
        }
        co->watchdog_fd = p[1];
        return 0;
}

int coordinator_watchdog_main(bool now) {
        Coordinator co = COORDINATOR_INIT(-EBADF);
        char name[64], buf[4];
        size_t got = 0;

        snprintf(name, sizeof(name), "lazaret-watchdog[%d]", (int) getpid());
        log_set_program(strdup(name) ?: "lazaret-watchdog");
        signal(SIGPIPE, SIG_IGN);
        /* Neither a terminal's signals nor a hang-up concern us. */
        signal(SIGHUP, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        while (!now && got < sizeof(buf)) {
                ssize_t k = read(WATCHDOG_PIPE_FD, buf + got, sizeof(buf) - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                got += (size_t) k;
        }
        if (!now)
                (void) close(WATCHDOG_PIPE_FD);
        if (got == sizeof(buf) && memcmp(buf, "done", 4) == 0) {
                (void) close(COORDINATOR_SPEC_FD);
                return 0;
        }
        int r = read_spec(&co.spec, NULL);
        if (r < 0) {
                log_error("the coordinator died, and its launch description cannot be read (%s); the next "
                          "'lazaret run' of this workspace removes what it left",
                          strerror(-r));
                return 1;
        }
        if (now)
                log_info("lazaret stop: no coordinator answers; removing what a dead one left");
        else
                log_info("the coordinator died: removing the sandbox and what else it left");
        StoreDomain dom = { .domain_id = co.spec.domain_hash,
                            .profile_name = co.spec.profile,
                            .canonical_workspace = co.spec.workspace };
        r = store_open(co.spec.domain_dir, &dom, now ? STORE_WAIT_USEC : WATCHDOG_STORE_WAIT_USEC, &co.store);
        if (r >= 0)
                co.ps = part_store_of(co.store);
        if (r == -EBUSY && now) {
                log_info("lazaret stop: a coordinator holds the domain store (starting or stopping)");
                release(&co);
                return WATCHDOG_EXIT_BUSY;
        }
        if (r == -EBUSY) {
                /* A new coordinator took the Domain first: it removed what
                 * was left before it started. */
                log_info("a new coordinator holds the domain store; it has removed what was left");
                release(&co);
                return 0;
        }
        if (r >= 0)
                r = recover(&co);
        if (r < 0)
                log_error("cannot remove what the coordinator left (%s); the next 'lazaret run' or 'lazaret stop' "
                          "of this workspace does",
                          strerror(-r));
        else
                log_info("nothing of the dead coordinator is left (%d parts removed)", r);
        release(&co);
        return r < 0 ? 1 : r > 0 ? WATCHDOG_EXIT_REMOVED : 0;
}

int coordinator_main(void) {
        Coordinator co = COORDINATOR_INIT(COORDINATOR_STATUS_FD);
        char name[64];
        int r;

        snprintf(name, sizeof(name), "lazaret-coordinator[%d]", (int) getpid());
        log_set_program(strdup(name) ?: "lazaret-coordinator");
        if (getenv("LAZARET_DEBUG"))
                log_set_max_level(LOG_LEVEL_DEBUG);
        (void) fcntl(co.status_fd, F_SETFD, FD_CLOEXEC);
        signal(SIGPIPE, SIG_IGN);
        co.started_usec = now_usec();
        if (stat("/proc/self/exe", &co.self_exe) < 0) {
                status_report(&co, "error: cannot examine the coordinator's own binary: %s", strerror(errno));
                return 1;
        }
        /* Host git (worktrees) must act on the workspace, not on a
         * repository the CLI's environment happened to point at. */
        (void) host_git_drop_environment();
        r = spawn_watchdog(&co);
        if (r < 0) {
                status_report(&co, "error: cannot start the coordinator's watchdog: %s", strerror(-r));
                return 1;
        }

        _cleanup_free_ char *spec_text = NULL;
        r = read_spec(&co.spec, &spec_text);
        if (r < 0) {
                status_report(&co, "error: the coordinator got no valid launch description (%s)", strerror(-r));
                release(&co);
                return 1;
        }
        r = sandbox_name(&co.spec, &co.container_name);
        if (r >= 0)
                r = ctl_uuid_v4(co.coordinator_id);
        if (r >= 0)
                r = ensure_dirs(&co);
        if (r < 0) {
                status_report(&co, "error: cannot prepare the domain directory %s: %s", co.spec.domain_dir,
                              strerror(-r));
                release(&co);
                return 1;
        }
        /* For 'lazaret stop' when no coordinator answers: what a watchdog
         * needs to remove what a dead one left. */
        _cleanup_free_ char *spec_copy = path_join(co.spec.domain_dir, WATCHDOG_SPEC_FILE);
        r = spec_copy ? write_file_atomic(spec_copy, spec_text, strlen(spec_text), 0600, 0) : -ENOMEM;
        if (r < 0) {
                status_report(&co, "error: cannot write %s: %s", spec_copy ?: WATCHDOG_SPEC_FILE, strerror(-r));
                release(&co);
                return 1;
        }
        log_info("coordinator %s starting for %s (%s)", co.coordinator_id, co.spec.profile, co.spec.workspace);

        StoreDomain dom = { .domain_id = co.spec.domain_hash,
                            .profile_name = co.spec.profile,
                            .canonical_workspace = co.spec.workspace };
        r = store_open(co.spec.domain_dir, &dom, STORE_WAIT_USEC, &co.store);
        if (r >= 0)
                co.ps = part_store_of(co.store);
        if (r < 0) {
                status_report(&co, "error: cannot open the domain store in %s: %s%s", co.spec.domain_dir, strerror(-r),
                              r == -EBUSY ? " (another coordinator of this domain is still shutting down)" : "");
                release(&co);
                return 1;
        }
        r = recover(&co);
        if (r < 0) {
                status_report(&co, "error: cannot clean up after an earlier coordinator: %s", strerror(-r));
                release(&co);
                return 1;
        }

        r = own_gen_begin(co.store,
                          json_pack("{s:s, s:s, s:n, s:n, s:s}", "configuration_fingerprint", co.spec.fingerprint,
                                    "coordinator_id", co.coordinator_id, "network_sidecar_id", "sandbox_id",
                                    "durable_decision", generation_decision_to_string(GENERATION_STARTING)),
                          &co.generation);
        if (r < 0) {
                status_report(&co, "error: cannot record the new generation: %s", strerror(-r));
                release(&co);
                return 1;
        }

        _cleanup_free_ char *err = NULL, *worktree = NULL;
        if (co.spec.git_dir && co.spec.branch) {
                /* A checkout of a large repository on a busy disk takes
                 * its time (each git call has 120 s). */
                status_wait(&co, 300, "making the agent's worktree");
                r = sandbox_prepare_worktree(&co.spec, &worktree, &err);
                if (r < 0) {
                        status_report(&co, "error: cannot prepare the agent's branch: %s", err ? err : strerror(-r));
                        return start_failed(&co);
                }
                log_info("agent worktree %s", worktree);
                status_wait(&co, 10, "starting the sandbox");
                co.worktree = strdup(worktree);
                if (!co.worktree) {
                        status_report(&co, "error: out of memory");
                        return start_failed(&co);
                }
        }
        /* Branch mode guards the repository's .git; direct mode serves the
         * whole working tree through the router (protected host-run files,
         * masked secrets, and .git under the same policy). */
        if (co.spec.git_dir || !co.spec.branch) {
                r = start_router(&co, &err);
                if (r < 0) {
                        status_report(&co, "error: cannot guard the %s: %s",
                                      co.spec.branch ? "repository's .git" : "workspace", err ? err : strerror(-r));
                        return start_failed(&co);
                }
        }
        r = start_anchor(&co, &err);
        if (r < 0) {
                if (co.anchor.image_id || !err)
                        status_report(&co, "error: cannot keep persistent_dirs: %s", err ? err : strerror(-r));
                else
                        status_report(&co, "error: cannot start the sandbox from %s: %s", co.spec.image, err);
                return start_failed(&co);
        }
        err = mfree(err);
        r = start_disk_watch(&co, &err);
        if (r < 0) {
                status_report(&co, "error: %s", err ? err : strerror(-r));
                return start_failed(&co);
        }
        /* FR-3: the sidecar runs and has attested before the sandbox
         * starts; with the kernel's stack the probes run now, from its
         * namespace, with gVisor's own stack from inside the sandbox. */
        r = start_network(&co, &err);
        if (r < 0) {
                status_report(&co, "error: cannot enforce the network policy: %s", err ? err : strerror(-r));
                return start_failed(&co);
        }
        if (co.spec.runsc_network == RUNSC_NETWORK_HOST) {
                r = prove_network(&co, co.readiness_fingerprint, &err);
                if (r < 0) {
                        status_report(&co, "error: %s", err ? err : strerror(-r));
                        return start_failed(&co);
                }
        }
        r = start_escalation(&co, &err);
        if (r < 0) {
                status_report(&co, "error: cannot open the escalation socket: %s", err ? err : strerror(-r));
                return start_failed(&co);
        }
        err = mfree(err);
        r = wait_disk_base(&co, &err);
        if (r < 0) {
                status_report(&co, "error: %s", err ? err : strerror(-r));
                return start_failed(&co);
        }
        r = part_begin(&co.ps, co.generation, &kind_sandbox,
                       json_pack("{s:s, s:n, s:o}", "container_name", co.container_name, "container_id",
                                 "host_coordinator", self_identity()),
                       &co, &co, &co.p_sandbox, &err);
        if (r < 0) {
                status_report(&co, "error: cannot start the sandbox from %s: %s", co.spec.image,
                              err ? err : strerror(-r));
                return start_failed(&co);
        }
        if (co.spec.runsc_network == RUNSC_NETWORK_SANDBOX) {
                r = prove_network(&co, co.readiness_fingerprint, &err);
                if (r < 0) {
                        status_report(&co, "error: %s", err ? err : strerror(-r));
                        return start_failed(&co); /* it removes the sandbox */
                }
        }
        (void) own_gen_update(co.store, co.generation, json_pack("{s:s}", "sandbox_id", co.sandbox.id));

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        co.signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        co.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (co.signal_fd < 0 || co.epfd < 0)
                r = negative_errno();
        if (r >= 0)
                r = store_worker_new(co.store, &co.worker);
        if (r >= 0)
                r = store_worker_new(co.store, &co.slow);
        if (r >= 0)
                r = part_begin(&co.ps, co.generation, &kind_publication,
                               json_pack("{s:s, s:n}", "socket_path", co.spec.socket_path, "identity_path"), &co, &co,
                               &co.p_publication, NULL);
        if (r >= 0) {
                co.w_listen = (Watch){ WATCH_LISTEN, &co };
                co.w_signal = (Watch){ WATCH_SIGNAL, &co };
                co.w_store = (Watch){ WATCH_STORE, co.worker };
                co.w_slow = (Watch){ WATCH_STORE, co.slow };
                co.w_runtime = (Watch){ WATCH_RUNTIME, &co };
                r = epoll_add(&co, co.listen_fd, EPOLLIN, &co.w_listen);
                if (r >= 0)
                        r = epoll_add(&co, co.signal_fd, EPOLLIN, &co.w_signal);
                if (r >= 0)
                        r = epoll_add(&co, store_worker_fd(co.worker), EPOLLIN, &co.w_store);
                if (r >= 0)
                        r = epoll_add(&co, store_worker_fd(co.slow), EPOLLIN, &co.w_slow);
                int t = limits_cpu_apply(co.sandbox.conmon_pid, (unsigned) co.spec.cpu_limit, SANDBOX_NICE, co.cpus,
                                         sizeof(co.cpus));
                if (t <= 0) {
                        snprintf(co.cpu_unset, sizeof(co.cpu_unset), "the sandbox's host threads cannot be set: %s",
                                 t < 0 ? strerror(-t) : "none found");
                        co.cpus[0] = '\0';
                        log_warning("cpu_limit is not enforced: %s", co.cpu_unset);
                        char w[300];
                        snprintf(w, sizeof(w), "cpu_limit is not enforced: %s", co.cpu_unset);
                        status_warn(&co, w);
                } else
                        log_info("the sandbox's %d host threads run on CPUs %s at nice %d", t, co.cpus, SANDBOX_NICE);
                int k = limits_memory_open(co.sandbox.conmon_pid, &co.mem_fd);
                if (k < 0) {
                        snprintf(co.mem_unwatched, sizeof(co.mem_unwatched),
                                 "gVisor's memory file of the sandbox cannot be read: %s", strerror(-k));
                        log_warning("memory_limit is not enforced: %s", co.mem_unwatched);
                        char w[300];
                        snprintf(w, sizeof(w), "memory_limit is not enforced: %s ('lazaret doctor' explains)",
                                 co.mem_unwatched);
                        status_warn(&co, w);
                } else
                        check_memory(&co);
                co.runtime_fd = (int) syscall(SYS_pidfd_open, co.sandbox.conmon_pid, 0);
                if (r >= 0 && co.runtime_fd >= 0)
                        r = epoll_add(&co, co.runtime_fd, EPOLLIN, &co.w_runtime);
                else if (co.runtime_fd < 0)
                        log_warning("cannot watch conmon (pid %d): %s", (int) co.sandbox.conmon_pid, strerror(errno));
                co.w_esc = (Watch){ WATCH_ESCALATION, &co };
                if (r >= 0 && co.esc)
                        r = epoll_add(&co, escalation_fd(co.esc), EPOLLIN, &co.w_esc);
                co.w_sidecar = (Watch){ WATCH_SIDECAR, &co };
                if (r >= 0 && co.sidecar_fd >= 0)
                        r = epoll_add(&co, co.sidecar_fd, EPOLLIN, &co.w_sidecar);
                co.w_disk = (Watch){ WATCH_DISK, &co };
                if (r >= 0 && co.disk.fd >= 0)
                        r = epoll_add(&co, co.disk.fd, EPOLLIN, &co.w_disk);
        }
        if (r < 0) {
                status_report(&co, "error: cannot publish the control socket %s: %s", co.spec.socket_path,
                              strerror(-r));
                co.listen_fd = safe_close(co.listen_fd);
                teardown(&co);
                release(&co);
                return 1;
        }
        gen_decide(&co, co.generation, GENERATION_RUNNING);
        log_info("sandbox %s running (generation %" PRIu64 ", +%" PRIu64 " ms), listening on %s", co.container_name,
                 co.generation, (now_usec() - co.started_usec) / 1000, co.spec.socket_path);
        if (!status_report(&co, "ok")) {
                /* The lazaret that started us gave up waiting (its time
                 * limit) and told its user so: nobody will use this
                 * sandbox, and nothing may outlive that. */
                log_info("stopping: the lazaret that started this coordinator is gone");
                co.listen_fd = safe_close(co.listen_fd);
                (void) unlink(co.spec.socket_path);
                co.worker = store_worker_free(co.worker);
                teardown(&co);
                release(&co);
                return 1;
        }

        serve(&co);

        co.slow = store_worker_free(co.slow); /* an update's end goes to the CLIs still here */
        co.worker = store_worker_free(co.worker);
        teardown(&co);
        release(&co);
        return 0;
}
