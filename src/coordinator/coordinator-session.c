/* SPDX-License-Identifier: MIT */
/* The coordinator's control connections and sessions: frames from the
 * CLIs, Hello (the policy check is coordinator-network.c's), sessions on
 * PTYs or pipes through runsc exec, their store records on the store
 * thread, status. */
#include <limits.h>
#include <pwd.h>

#include "broker-proto.h"
#include "coordinator-internal.h"

/* Who ran a session: only the coordinator's own user may connect
 * (decision 2), so it is its name; looked up once. */
static const char *owner_name(void) {
        static char name[LOGIN_NAME_MAX + 1];
        static bool looked;
        if (!looked) {
                looked = true;
                struct passwd pw, *res = NULL;
                char buf[4096];
                if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) == 0 && res)
                        snprintf(name, sizeof(name), "%s", res->pw_name);
        }
        return name[0] ? name : NULL;
}

/* ---- connections -------------------------------------------------------- */

static void session_hangup(Session *s);

void conn_free(Coordinator *co, Conn *c) {
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
        free(c->status_sent);
        co_close_watched(co, c->fd);
        ctl_reader_done(&c->rd);
        co_queue_done(&c->out);
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

void session_update_events(Session *s) {
        Coordinator *co = s->co;
        /* Output waits while the CLI lags behind (backpressure). */
        bool lagging = s->conn && co_queue_pending(&s->conn->out) > OUT_QUEUE_MAX;
        uint32_t in = lagging ? 0 : EPOLLIN;
        if (s->interactive) {
                if (s->pty >= 0)
                        co_epoll_mod(co, s->pty, in | (co_queue_pending(&s->in) > 0 ? EPOLLOUT : 0), &s->w_pty);
                return;
        }
        if (s->out_fd >= 0)
                co_epoll_mod(co, s->out_fd, in, &s->w_out);
        if (s->err_fd >= 0)
                co_epoll_mod(co, s->err_fd, in, &s->w_err);
        if (s->in_fd >= 0)
                co_epoll_mod(co, s->in_fd, co_queue_pending(&s->in) > 0 ? EPOLLOUT : 0, &s->w_in);
}

/* Forward what one session fd holds. Returns 1 at end of file. */
int session_pump(Session *s, int fd, int stream) {
        uint8_t buf[READ_CHUNK];
        for (int rounds = 0; rounds < 16; rounds++) {
                if (s->conn && co_queue_pending(&s->conn->out) > OUT_QUEUE_MAX)
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

void session_close_output(Session *s, int *fd) {
        *fd = co_close_watched(s->co, *fd);
}

/* An exec client that died abnormally may have lost its sandbox: conmon's
 * exit can trail the exec client's by a moment, so wait for it briefly
 * before calling the outcome. */
void co_check_runtime(Coordinator *co, int timeout_ms) {
        if (co->runtime_lost || co->runtime_fd < 0)
                return;
        struct pollfd pfd = { .fd = co->runtime_fd, .events = POLLIN };
        if (poll(&pfd, 1, timeout_ms) > 0) {
                co->runtime_fd = co_close_watched(co, co->runtime_fd);
                log_error("the sandbox container stopped unexpectedly");
                co->runtime_lost = true;
                co_begin_stop(co, "the sandbox stopped unexpectedly");
        }
}

bool session_transition(Session *s, SessionEvent event) {
        SessionState next = session_state_next(s->state, event);
        if (next < 0) {
                log_error("session %s: no transition for %s when %s", s->id, session_event_to_string(event),
                          session_state_to_string(s->state));
                return false;
        }
        s->state = next;
        return true;
}

void session_finish(Session *s) {
        Coordinator *co = s->co;
        if (s->state == SESSION_STATE_FINISHED)
                return;
        bool abnormal = WIFSIGNALED(s->wstatus) || (WIFEXITED(s->wstatus) && WEXITSTATUS(s->wstatus) >= 126);
        if (!co->stopping && abnormal)
                co_check_runtime(co, 1000);
        /* The kernel may have ended it at the memory cgroup's limit: that
         * is the sandbox's end, and the terminal is told so. */
        if (!co->stopping && abnormal && co->mem_watched &&
            co->sb.backend->memory_killed(&co->sb, &(uint64_t){ 0 }) != -EOPNOTSUPP)
                co_check_memory(co);
        /* Whatever is still buffered goes out before the exit. */
        if (s->pty >= 0)
                (void) session_pump(s, s->pty, 1);
        if (s->out_fd >= 0)
                (void) session_pump(s, s->out_fd, 1);
        if (s->err_fd >= 0)
                (void) session_pump(s, s->err_fd, 2);
        session_transition(s, SESSION_EVENT_FINISHED);
        co_status_touch(s->co);

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
        json_t *ended = json_pack("{s:s, s:I}", "outcome", ctl_exit_outcome_to_string(m.outcome), "duration_ms",
                                  (json_int_t) ((now_usec() - s->started_usec) / 1000));
        if (ended && m.outcome == CTL_EXIT_EXITED)
                json_object_set_new(ended, "exit_code", json_integer(m.exit_code));
        else if (ended && m.outcome == CTL_EXIT_TERMINATED)
                json_object_set_new(ended, "signal", json_integer(m.exit_signal));
        if (ended && m.message)
                json_object_set_new(ended, "message", json_string(m.message));
        event_emit(co->events, "session", "ended", s->id, ended);
        co_files_session_ended(co, s);
        record_terminal(co, s->id, TERMINAL_CLEAN,
                        json_pack("{s:s}", "outcome", ctl_exit_outcome_to_string(m.outcome)));

        s->pty = co_close_watched(co, s->pty);
        s->in_fd = co_close_watched(co, s->in_fd);
        s->out_fd = co_close_watched(co, s->out_fd);
        s->err_fd = co_close_watched(co, s->err_fd);
}

void session_free(Coordinator *co, Session *s) {
        co_files_session_ended(co, s);
        trace_session_gone(co, s);
        for (Session **p = &co->sessions; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        break;
                }
        co_queue_done(&s->in);
        free(s->cwd);
        free(s);
}

/* The CLI is gone: the guest gets SIGHUP as from a closed terminal, the exec
 * client SIGKILL if it lingers. */
static void session_hangup(Session *s) {
        if (!session_state_running(s->state) || s->pid <= 0)
                return;
        (void) kill(s->pid, SIGHUP);
        s->kill_deadline = now_usec() + HANGUP_GRACE_USEC;
}

static const char *const egress_env[] = {
        "HTTP_PROXY=" RELAY_HTTP_URL, "HTTPS_PROXY=" RELAY_HTTP_URL,
        "ALL_PROXY=" RELAY_SOCKS_URL, "NO_PROXY=localhost,127.0.0.1,::1",
        "http_proxy=" RELAY_HTTP_URL, "https_proxy=" RELAY_HTTP_URL,
        "all_proxy=" RELAY_SOCKS_URL, "no_proxy=localhost,127.0.0.1,::1",
        "NODE_USE_ENV_PROXY=1",       "GIT_SSH_COMMAND=ssh -o ProxyCommand='/run/lazaret/relay --connect %h %p'",
};

/* A session's environment: the container's own (image ENV and Podman's),
 * then what the profile allows from this CLI, then ours. */
/* One NAME=VALUE entry more (none on OOM: the caller's check of env
 * stands). */
_printf_(2, 3) static void env_addf(json_t *env, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *t = NULL;
        int k = vasprintf(&t, fmt, ap);
        va_end(ap);
        if (k >= 0)
                json_array_append_new(env, json_string(t));
        free(t);
}

static json_t *session_env(const Coordinator *co, const Session *s, const CtlMessage *m) {
        json_t *env = json_array();
        /* The container's own environment (image ENV and Podman's), then
         * what the profile allows from this CLI, then ours. */
        for (char **p = co->sb.backend->base_env(&co->sb); env && p && *p; p++) {
                if (startswith(*p, "TERM=") || startswith(*p, "LAZARET_"))
                        continue;
                json_array_append_new(env, json_string(*p));
        }
        for (size_t i = 0; env && i < m->n_env; i++)
                json_array_append_new(env, json_string(m->env[i]));
        /* Egress by name: proxy-aware clients find the relay; git over
         * SSH goes through it as well. A variable the profile sets itself
         * stays the profile's. */
        for (size_t i = 0; env && co->p_broker.id && i < ELEMENTSOF(egress_env); i++) {
                size_t nl = strcspn(egress_env[i], "=") + 1;
                bool set = false;
                for (size_t k = 0; k < m->n_env && !set; k++)
                        set = strncmp(m->env[k], egress_env[i], nl) == 0;
                if (!set)
                        json_array_append_new(env, json_string(egress_env[i]));
        }
        /* ca_certificates: the TLS clients people use read the bundle from
         * these (OpenSSL's, Node's, Python's requests, git); a variable the
         * profile sets itself stays the profile's. */
        static const char *const ca_env[] = { "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
                                              "GIT_SSL_CAINFO" };
        for (size_t i = 0; env && co->ca_bundle && i < ELEMENTSOF(ca_env); i++) {
                size_t nl = strlen(ca_env[i]);
                bool set = false;
                for (size_t k = 0; k < m->n_env && !set; k++)
                        set = strncmp(m->env[k], ca_env[i], nl) == 0 && m->env[k][nl] == '=';
                if (!set)
                        env_addf(env, "%s=%s", ca_env[i], co->sb.backend->inside_path(&co->sb, SANDBOX_PATH_CA_BUNDLE));
        }
        /* git's file system monitor, answered from the host (fsmonitor.h),
         * and the untracked cache it makes worth keeping: for this
         * session's git only, never in the repository's configuration. A
         * profile that sets GIT_CONFIG_COUNT itself keeps its own. */
        bool git_config = false;
        for (size_t k = 0; k < m->n_env && !git_config; k++)
                git_config = startswith(m->env[k], "GIT_CONFIG_COUNT=");
        if (env && co->sb.plan.fsmonitor_socket && !git_config) {
                env_addf(env, "GIT_CONFIG_COUNT=3");
                env_addf(env, "GIT_CONFIG_KEY_0=core.fsmonitor");
                env_addf(env, "GIT_CONFIG_VALUE_0=/run/lazaret/init --fsmonitor");
                env_addf(env, "GIT_CONFIG_KEY_1=core.fsmonitorHookVersion");
                env_addf(env, "GIT_CONFIG_VALUE_1=2");
                env_addf(env, "GIT_CONFIG_KEY_2=core.untrackedCache");
                env_addf(env, "GIT_CONFIG_VALUE_2=true");
        }
        if (env && m->interactive) {
                env_addf(env, "TERM=%s", m->term ? m->term : "xterm");
                env_addf(env, "TERMINFO=%s", co->sb.backend->inside_path(&co->sb, SANDBOX_PATH_TERMINFO));
        }
        if (env)
                env_addf(env, "LAZARET_SESSION_ID=%s", s->id);
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
                env_addf(env, "LAZARET_PROFILE=%s", co->spec.profile);
        }
        return env;
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
        _cleanup_free_ char *pidfile = NULL;
        int pipes[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
        const SandboxBackend *b = co->sb.backend;
        /* What the backend's runner reads at its fd 3: gVisor's process
         * description, the native joiner's environment. */
        pidfile = b->traced ? trace_pid_file(co, s) : NULL;
        SessionExec x = { .argv = m->argv,
                          .cwd = s->cwd,
                          .interactive = m->interactive,
                          .rows = m->rows,
                          .columns = m->columns,
                          .pidfile = pidfile };
        json_t *env = session_env(co, s, m);
        int r = env ? b->session_input(&co->sb, &x, env, &proc_fd) : -ENOMEM;
        json_decref(env);
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

        argv = b->session_argv(&co->sb, &x);
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
        SpawnSpec sp = SPAWN_SPEC_INIT(b->session_program(&co->sb), argv);
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.new_session = true;
        sp.controlling_tty = m->interactive;
        pid_t pid;
        r = spawn(&sp, &pid);
        if (r < 0)
                goto fail_pipes;
        s->pid = pid;
        b->session_started(&co->sb, pid);
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
                (void) co_epoll_add(co, s->in_fd, 0, &s->w_in);
                (void) co_epoll_add(co, s->out_fd, EPOLLIN, &s->w_out);
                (void) co_epoll_add(co, s->err_fd, EPOLLIN, &s->w_err);
        } else {
                s->w_pty = (Watch){ WATCH_PTY, s };
                (void) co_epoll_add(co, s->pty, EPOLLIN, &s->w_pty);
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
        session_transition(s, SESSION_EVENT_ABANDONED);
        co_status_touch(s->co);
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
                        s->pty = co_close_watched(co, s->pty);
                        record_terminal(co, s->id, TERMINAL_CLEAN, NULL);
                        session_abandon(s, "cannot start the session's command in the sandbox");
                } else {
                        session_transition(s, SESSION_EVENT_STARTED);
                        session_update_events(s);
                        record_session_phase(co, s, SESSION_RUNNING);
                        record_terminal(co, s->id, TERMINAL_RUNNING,
                                        json_pack("{s:o}", "exec_client", process_identity_to_json(&s->ident)));
                        CtlMessage reply = { .type = CTL_SESSION_OPENED, .generation_id = co->generation };
                        memcpy(reply.session_id, s->id, 37);
                        (void) conn_send(s->conn, &reply);
                        log_info("session %s started (%s, %zu args)", s->id, j->m.interactive ? "terminal" : "pipes",
                                 j->m.n_argv);
                        json_t *argv = json_array();
                        for (size_t i = 0; argv && i < j->m.n_argv; i++)
                                json_array_append_new(argv, event_str(j->m.argv[i]));
                        event_emit(co->events, "session", "started", s->id,
                                   json_pack("{s:o*, s:s, s:b, s:i, s:s?, s:i}", "argv", argv, "cwd", s->cwd,
                                             "terminal", s->interactive, "cli_pid", s->cli_pid, "user", owner_name(),
                                             "uid", (int) geteuid()));
                        co_files_session_started(co, s);
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
                        .state = SESSION_STATE_OPENING,
                        .pty = -EBADF,
                        .in_fd = -EBADF,
                        .out_fd = -EBADF,
                        .err_fd = -EBADF,
                        .cwd = TAKE_PTR(cwd),
                        .cli_pid = cli_pid,
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
        j->terminal_rec =
                json_pack("{s:I, s:s, s:s, s:s, s:o}", "generation_id", (json_int_t) co->generation, "session_id",
                          s->id, "state", "Intent", "container_id", co->sb.id, "host_coordinator", co_self_identity());
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
                if (session_state_live(s->state))
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
        json_t *network = json_pack(
                "{s:s?, s:s, s:s, s:s?, s:o*, s:b, s:s}", "sidecar", co->sidecar.name, "policy_digest", co->net.digest,
                "mode", co->sidecar.name ? "sidecar" : "loopback-only", "readiness_fingerprint",
                co->readiness_fingerprint[0] ? co->readiness_fingerprint : NULL, "host_addresses", host,
                "update_in_progress", co->net_update != NULL, "address_rules", co->net.own_rules ? "own" : "global");
        /* What holds the policy: netd (on the host) and whether a container
         * holds it or a namespace of the coordinator's own. */
        if (network && co->sidecar.name) {
                (void) json_object_set_new(network, "netd_pid", json_integer(co->sidecar.netd_pid));
                (void) json_object_set_new(network, "sidecar_kind",
                                           json_string(co->sidecar.own_namespace ? "namespace" : "container"));
                if (co->sidecar.own_namespace) {
                        (void) json_object_set_new(network, "uplink_pid", json_integer(co->sidecar.uplink_pid));
                        /* netd and its namespace from an earlier run (issue 45). */
                        (void) json_object_set_new(network, "kept_from_earlier_run", json_boolean(co->sidecar.kept));
                }
        }
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
        const SandboxBackend *b = co->sb.backend;
        bool pids_on = false, mem_on = false, disk_on = false;
        const char *pids_by = b->limit_enforcer(&co->sb, SANDBOX_LIMIT_PIDS, &pids_on),
                   *mem_by = b->limit_enforcer(&co->sb, SANDBOX_LIMIT_MEMORY, &mem_on),
                   *disk_by = b->limit_enforcer(&co->sb, SANDBOX_LIMIT_DISK, &disk_on);
        json_t *limits = json_pack("{s:{s:I, s:b, s:s}, s:{s:I, s:o*, s:b, s:s}, s:o*, s:{s:I, s:b, s:s}}", "pids",
                                   "limit", (json_int_t) co->spec.nproc, "enforced", pids_on, "enforced_by", pids_by,
                                   "memory", "limit_mib", (json_int_t) co->spec.memory_limit_mib, "used_mib",
                                   co->mem_watched ? json_integer((json_int_t) (co->mem_used >> 20)) : NULL, "enforced",
                                   co->spec.memory_limit_mib > 0 && co->mem_watched && mem_on, "enforced_by",
                                   co->spec.memory_limit_mib == 0
                                           ? "nothing: memory_limit = 0 in the profile turns the limit off"
                                   : !co->mem_watched ? co->mem_unwatched
                                                      : mem_by,
                                   "cpu", cpu, "disk", "limit_mib", (json_int_t) co->spec.disk_limit_mib, "enforced",
                                   disk_on, "enforced_by", disk_by);
        json_t *disk = json_object_get(limits, "disk");
        if (disk) {
                json_t *layers = json_array();
                for (size_t i = 0; layers && i < co->anchor.n_layers; i++)
                        (void) json_array_append_new(layers, json_pack("{s:s, s:I}", "dir", co->anchor.layers[i].dir,
                                                                       "size_mib",
                                                                       (json_int_t) co->anchor.layers[i].fs_size_mib));
                (void) json_object_set_new(disk, "persistent", layers);
                if (co->layer_disk.have_base)
                        (void) json_object_set_new(disk, "persistent_held_mib",
                                                   json_integer((json_int_t) (diskwatch_grown(&co->layer_disk) >> 20)));
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
                "{s:b, s:s, s:s, s:s, s:I, s:{s:s, s:s, s:s?, s:s}, s:o*, s:o*, s:o*, s:I, s:i, s:I, s:s}", "running",
                1, "profile", co->spec.profile, "domain_hash", co->spec.domain_hash, "workspace", co->spec.workspace,
                "generation", (json_int_t) co->generation, "sandbox", "name", co->container_name, "id", co->sb.id,
                "image", co->spec.image, "runsc_network", runsc_network_to_string(co->spec.runsc_network), "sessions",
                sessions, "network", network, "workspace_guard", guard, "uptime_seconds",
                (json_int_t) ((now - co->started_usec) / 1000000), "coordinator_pid", (int) getpid(), "clients",
                (json_int_t) co->refs, "coordinator_id", co->coordinator_id);
        if (st && co->spec.agent)
                (void) json_object_set_new(st, "agent", json_string(co->spec.agent));
        if (st && limits)
                json_object_set(st, "limits", limits);
        /* The boundary: which backend draws it, and what it says of it. */
        json_t *sbj = json_object_get(st, "sandbox");
        if (sbj) {
                (void) json_object_set_new(sbj, "backend", json_string(b->name));
                b->describe(&co->sb, sbj, json_object_get(st, "limits"));
        }
        EventCounts ec;
        event_log_counts(co->events, &ec);
        if (st)
                json_object_set_new(st, "events",
                                    co->events ? json_pack("{s:b, s:s, s:I, s:I, s:I, s:I, s:I, s:o}", "recorded", 1,
                                                           "path", ec.path, "written", (json_int_t) ec.written,
                                                           "dropped", (json_int_t) ec.dropped, "write_errors",
                                                           (json_int_t) ec.write_errors, "router_refusals",
                                                           (json_int_t) co->router_refused, "router_dropped",
                                                           (json_int_t) co->router_dropped, "processes",
                                                           co->scan.on ? scan_status(co) : trace_status(co))
                                               : json_pack("{s:b, s:s}", "recorded", 0, "why", co->events_unwritten));
        if (st && co->fsmon) {
                FsMonitorStats fs;
                fsmonitor_stats(co->fsmon, &fs);
                json_object_set_new(st, "git_fsmonitor",
                                    json_pack("{s:b, s:I, s:I, s:I, s:I, s:s?}", "on", 1, "directories",
                                              (json_int_t) fs.dirs, "queries", (json_int_t) fs.queries,
                                              "trivial_answers", (json_int_t) fs.trivial, "queue_overflows",
                                              (json_int_t) fs.overflows, "why_trivial", fs.why[0] ? fs.why : NULL));
        } else if (st)
                json_object_set_new(st, "git_fsmonitor", json_pack("{s:b}", "on", 0));
        json_t *egress = co_broker_status(co);
        if (st && egress)
                json_object_set(json_object_get(st, "network"), "egress_by_name", egress);
        json_decref(egress);
        json_decref(limits);
        return st;
}

/* The session a frame names, when it is this connection's own; NULL
 * otherwise (the frame is unexpected). */
static Session *frame_session(const Conn *c, const CtlMessage *m) {
        Session *s = c->session;
        return c->state == CONN_SESSION && s && streq(m->session_id, s->id) ? s : NULL;
}

static json_t *status_line_json(Coordinator *co) {
        unsigned sessions = 0;
        for (Session *s = co->sessions; s; s = s->next)
                if (session_state_live(s->state))
                        sessions++;
        char network[64];
        bool names = co->spec.domains && co->spec.domains[0];
        /* Whose address rules hold (decision 20): the profile's own are
         * marked; with no address at all, it is names only. */
        if (co->net.own_rules && !co->sidecar.name && names)
                snprintf(network, sizeof(network), "names-only");
        else
                snprintf(network, sizeof(network), "%s%s%s", co->net.own_rules ? "own " : "",
                         co->sidecar.name ? "sidecar" : "loopback-only", names ? "+names" : "");
        json_t *j =
                json_pack("{s:I, s:I, s:I, s:I, s:b, s:s, s:s}", "sessions", (json_int_t) sessions,
                          "refused_connections", (json_int_t) co->egress_refused, "refused_git",
                          (json_int_t) co->git_refused, "escalations_pending", (json_int_t) co->n_esc_pending, "paused",
                          pause_state_paused(co->pause), "network", network, "policy_digest", co->net.digest);
        if (j && co->pause_error[0])
                json_object_set_new(j, "pause_error", json_string(co->pause_error));
        return j;
}

/* A StatusLine to each connection that watches, when what it would say
 * changed. */
static void status_line_send_to(Coordinator *co, Conn *c, json_t *j, const char *text) {
        (void) co;
        if (!c->status_watch || c->dead || (c->status_sent && streq(c->status_sent, text)))
                return;
        CtlMessage m = { .type = CTL_STATUS_LINE, .status = j };
        if (conn_send(c, &m) < 0)
                return;
        free(c->status_sent);
        c->status_sent = strdup(text);
}

void co_status_line_send(Coordinator *co) {
        co->status_dirty = false;
        co->status_last = now_usec();
        json_t *j = status_line_json(co);
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (text)
                for (Conn *c = co->conns; c; c = c->next)
                        status_line_send_to(co, c, j, text);
        json_decref(j);
}
static void hello_resumed(Coordinator *co, Conn *c);

/* c's Hello (c->hello_policy) is looked at now: accepted, the CLI goes on
 * (resume: the frames that waited behind it are handled now); a Hello with
 * a policy waits while an update runs. */
static void conn_hello(Coordinator *co, Conn *c, bool resume) {
        if (co->net_update && c->hello_policy) {
                log_info("a join waits for the network policy update in progress");
                return; /* looked at again after it */
        }
        if (hello_network(co, c, c->hello_policy, hello_resumed) != HELLO_ACCEPTED)
                return;
        /* Its policy holds now: say whose address rules made it. */
        if (c->hello_policy && c->hello_own_rules >= 0 && co->net.own_rules != (c->hello_own_rules == 1)) {
                co->net.own_rules = c->hello_own_rules == 1;
                co_status_touch(co);
        }
        c->state = CONN_READY;
        c->hello_policy = mfree(c->hello_policy);
        conn_update_events(c);
        if (resume)
                conn_process(co, c);
}

static void hello_resumed(Coordinator *co, Conn *c) {
        conn_hello(co, c, true);
}

/* The handlers of the messages conn-dispatch's table lets in, each for
 * its state (and, where the rule says so, its connection's own session s).
 * False: the message is unexpected here after all. */
typedef bool (*FrameHandler)(Coordinator *co, Conn *c, CtlMessage *m, Session *s);

static bool on_hello(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) s;
        /* The key proves the person's CLI: our binary can be run by any
         * process of the user (under LD_PRELOAD, or exec'd over a
         * connection already made), but only one that reads the runtime
         * directory has the key (issue 41). Nothing else is looked at
         * before it. */
        if (!ctl_key_equal(co->ctl_key, m->key)) {
                log_warning("refused a control connection from pid %d: its Hello carried %s, not the control "
                            "socket's key",
                            (int) c->peer_pid, m->key ? "another key" : "no key");
                conn_send_error(c, "this connection did not show the control socket's key, which only the "
                                   "lazaret CLI of this user, outside every sandbox, can read; if this is it, "
                                   "run it again");
                return true;
        }
        c->cli_pid = m->cli_pid;
        /* Never a silent switch of the boundary: a CLI that asked for
         * another backend does not join this one. */
        if (m->backend && !streq(m->backend, backend_to_string(co->spec.backend))) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg,
                             "this Domain's sandbox runs with backend \"%s\", and this lazaret asked for "
                             "\"%s\": run 'lazaret stop' first to start it with the other, or use the same",
                             backend_to_string(co->spec.backend), m->backend) < 0)
                        msg = NULL;
                conn_send_error(c, msg ?: "the sandbox runs with another backend");
                return true;
        }
        /* The policy by its digest (the CLI that started us): the one we
         * were declared, unless another terminal's changed it since. */
        _cleanup_free_ char *policy = TAKE_PTR(m->netpolicy);
        if (!policy && m->netpolicy_digest) {
                char d[65] = "";
                if (co->declared_netpolicy)
                        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, co->declared_netpolicy,
                                          strlen(co->declared_netpolicy), d);
                if (!streq(d, m->netpolicy_digest)) {
                        conn_send_error(c, "the sandbox's network policy changed since this command started it "
                                           "(another terminal's); run the command again");
                        return true;
                }
                policy = strdup(co->declared_netpolicy);
                if (!policy) {
                        conn_send_error(c, "out of memory");
                        return true;
                }
        }
        /* Hello takes the reference: the sandbox stays up while this
         * client is connected (and while its policy is being applied). */
        c->counted = true;
        co->refs++;
        c->state = CONN_HELLO_WAIT;
        c->hello_policy = TAKE_PTR(policy);
        c->hello_own_rules = streq_ptr(m->address_rules, "own") ? 1 : streq_ptr(m->address_rules, "global") ? 0 : -1;
        conn_hello(co, c, false);
        return true;
}

static bool on_session_open(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) s;
        handle_session_open(co, c, m, c->cli_pid);
        return true;
}

static bool on_terminal_input(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        if (!session_state_live(s->state))
                return true;
        if (co_queue_pending(&s->in) + m->n_bytes > IN_QUEUE_MAX) {
                conn_send_error(c, "too much input queued");
                return true;
        }
        if (m->n_bytes > 0)
                (void) co_queue_put(&s->in, m->bytes, m->n_bytes);
        if (m->eof)
                s->in_eof = true;
        int fd = s->interactive ? s->pty : s->in_fd;
        if (fd >= 0) {
                int k = co_queue_flush(&s->in, fd);
                if (k == 1 && s->in_eof && !s->interactive)
                        s->in_fd = co_close_watched(co, s->in_fd);
        }
        session_update_events(s);
        return true;
}

static bool on_terminal_resize(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) co;
        (void) c;
        if (s->pty >= 0) {
                struct winsize ws = { .ws_row = (unsigned short) m->rows,
                                      .ws_col = (unsigned short) m->columns,
                                      .ws_xpixel = (unsigned short) m->pixel_width,
                                      .ws_ypixel = (unsigned short) m->pixel_height };
                (void) ioctl(s->pty, TIOCSWINSZ, &ws);
        }
        return true;
}

static bool on_terminal_signal(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) co;
        (void) c;
        int sig = m->signal == CTL_SIGNAL_INTERRUPT ? SIGINT : m->signal == CTL_SIGNAL_QUIT ? SIGQUIT : SIGTSTP;
        /* runsc exec forwards signals to the guest process. */
        if (session_state_running(s->state) && s->pid > 0)
                (void) kill(s->pid, sig);
        return true;
}

static bool on_session_close(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) co;
        (void) c;
        (void) m;
        session_hangup(s);
        return true;
}

/* Status and stop: neither keeps the sandbox up. */
static void conn_drop_reference(Coordinator *co, Conn *c) {
        if (c->counted && c->state == CONN_READY) {
                c->counted = false;
                co->refs--;
        }
}

static bool on_status_request(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) m;
        (void) s;
        CtlMessage reply = { .type = CTL_STATUS, .status = status_json(co) };
        (void) conn_send(c, &reply);
        json_decref(reply.status);
        conn_drop_reference(co, c);
        return true;
}

static bool on_stop_request(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) m;
        (void) s;
        conn_drop_reference(co, c);
        co_begin_stop(co, "the sandbox was stopped with 'lazaret stop'");
        return true;
}

static bool on_prompt(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) c;
        /* An answer to a prompt already taken down (withdrawn, or its
         * session's requests refused) is stale, not an error. */
        if (m->type == CTL_PROMPT_CANCEL)
                (void) escalation_cancel(co->esc, s->id, m->request_id);
        else if (escalation_answer(co->esc, s->id, m->request_id, m->decision, m->command) >= 0 &&
                 streq(m->decision, "abort")) {
                /* [Q]: the person ends this session (and the sandbox,
                 * when it was the last). */
                log_info("session %s: aborted at the escalation prompt", s->id);
                session_hangup(s);
        }
        return true;
}

static bool on_status_watch(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) m;
        (void) s;
        c->status_watch = true;
        /* The first one now. */
        json_t *j = status_line_json(co);
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (text)
                status_line_send_to(co, c, j, text);
        json_decref(j);
        /* The others see one more session. */
        co_status_touch(co);
        return true;
}

static bool on_sandbox_pause(Coordinator *co, Conn *c, CtlMessage *m, Session *s) {
        (void) c;
        (void) s;
        co_sandbox_pause(co, m->pause);
        return true;
}

static const FrameHandler frame_handlers[_CTL_TYPE_MAX] = {
        [CTL_HELLO] = on_hello,
        [CTL_SESSION_OPEN] = on_session_open,
        [CTL_TERMINAL_INPUT] = on_terminal_input,
        [CTL_TERMINAL_RESIZE] = on_terminal_resize,
        [CTL_TERMINAL_SIGNAL] = on_terminal_signal,
        [CTL_SESSION_CLOSE] = on_session_close,
        [CTL_STATUS_REQUEST] = on_status_request,
        [CTL_STOP_REQUEST] = on_stop_request,
        [CTL_PROMPT_ANSWER] = on_prompt,
        [CTL_PROMPT_CANCEL] = on_prompt,
        [CTL_STATUS_WATCH] = on_status_watch,
        [CTL_SANDBOX_PAUSE] = on_sandbox_pause,
};

static void conn_handle_frame(Coordinator *co, Conn *c, const uint8_t *payload, size_t len) {
        CtlMessage m = {};
        const char *why = NULL;
        if (ctl_message_decode(payload, len, &m, &why) < 0) {
                conn_send_error(c, why ? why : "malformed frame");
                return;
        }
        const ConnFrameRule *rule = conn_frame_rule(m.type);
        Session *s = rule && rule->session ? frame_session(c, &m) : NULL;
        bool ok = conn_frame_allowed(m.type, c->state) && (!rule->session || s) && frame_handlers[m.type] &&
                  frame_handlers[m.type](co, c, &m, s);
        if (!ok)
                conn_send_error(c, "unexpected message for this connection's state");
        ctl_message_done(&m);
}

void conn_readable(Coordinator *co, Conn *c) {
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
void conn_process(Coordinator *co, Conn *c) {
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

void accept_clients(Coordinator *co) {
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
                *c = (Conn){ .co = co, .fd = fd, .state = CONN_NEW, .peer_pid = cred.pid, .next = co->conns };
                c->w = (Watch){ WATCH_CONN, c };
                if (co_epoll_add(co, fd, EPOLLIN | EPOLLRDHUP, &c->w) < 0) {
                        safe_close(fd);
                        free(c);
                        continue;
                }
                co->conns = c;
                co->n_conns++;
        }
}
