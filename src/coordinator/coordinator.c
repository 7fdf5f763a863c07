/* SPDX-License-Identifier: MIT */
/* The Session Coordinator (coordinator.h): its start, step by step, each
 * resource a participant recorded before it is made; the event loop;
 * signals and children; recovery after a dead predecessor; teardown; the
 * watchdog. The connections, the network and the other participants are
 * in coordinator-session.c, coordinator-network.c and coordinator-parts.c
 * (coordinator-internal.h). */
#include "agent-trees.h"
#include "coordinator-internal.h"
#include "images.h"

/* ---- the store, with ownership ------------------------------------------ */

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

/* A warning the leader shows its user once, at launch. */
static void status_warn(Coordinator *co, const char *text) {
        if (co->status_fd < 0)
                return;
        char line[400];
        int n = snprintf(line, sizeof(line), "warn %s\n", text);
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
        const char *err = b.oom ? NULL : startswith(strbuf_str(&b), "error: ");
        if (err)
                event_emit(co->events, "sandbox", "start_failed", NULL, json_pack("{s:s}", "message", err));
        strbuf_putc(&b, '\n');
        ssize_t k = b.oom ? -1 : write(co->status_fd, strbuf_str(&b), b.len);
        bool ok = k >= 0 && (size_t) k == b.len;
        strbuf_done(&b);
        co->status_fd = safe_close(co->status_fd);
        return ok;
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
                co_begin_stop(co, "the git router stopped unexpectedly");
        }
        escalation_reap(co->esc);
        co_broker_reap(co);
        const char *why = NULL;
        if (co->sb.backend && co->sb.backend->reap(&co->sb, &why) < 0 && !co->stopping) {
                /* A part of the sandbox it cannot do without (the native
                 * relay: names would stop resolving for the agent,
                 * silently): stop instead. */
                log_error("%s", why);
                co_begin_stop(co, why);
        }
        if (sidecar_reap(&co->sidecar) && !co->stopping) {
                /* The native sidecar's uplink: without it the sandbox
                 * would sit cut off while status says otherwise. */
                log_error("the network sidecar's uplink (slirp4netns) stopped unexpectedly");
                co->runtime_lost = true;
                co_begin_stop(co, "the network sidecar's uplink (slirp4netns) stopped unexpectedly");
        }
        if (reaped(co->disk.pid, &st))
                co->disk.pid = 0; /* its pipe's end says the rest */
        if (reaped(co->layer_disk.pid, &st))
                co->layer_disk.pid = 0;
        for (Session *s = co->sessions; s; s = s->next)
                if (session_state_running(s->state) && reaped(s->pid, &st)) {
                        s->wstatus = st;
                        session_transition(s, SESSION_EVENT_REAPED);
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
                        co_begin_stop(co, "the sandbox's coordinator was asked to stop");
                        break;
                default:
                        break;
                }
        }
}

/* ---- start and teardown ------------------------------------------------- */

/* The spec (launch_spec_serialize's form); *ret_text and *ret_len: its
 * bytes, for the Domain's copy. */
static int read_spec(LaunchSpec *ret, char **ret_text, size_t *ret_len) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (lseek(COORDINATOR_SPEC_FD, 0, SEEK_SET) < 0)
                return negative_errno();
        int r = read_fd_capped(COORDINATOR_SPEC_FD, 4u * 1024u * 1024u, &text, &len);
        (void) close(COORDINATOR_SPEC_FD);
        if (r < 0)
                return r;
        r = launch_spec_deserialize(text, len, ret);
        if (r >= 0 && ret_text) {
                *ret_text = TAKE_PTR(text);
                *ret_len = len;
        }
        return r;
}

/* The Domain's copy of the spec, written and synced only when it is not
 * these bytes already: the same configuration makes the same spec, and a
 * policy of 10,000 prefixes makes it 260 KB to sync on every start. */
static int write_spec_copy(const char *path, const char *text, size_t len) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        struct stat st;
        _cleanup_free_ char *old = NULL;
        size_t old_len = 0;
        if (fd >= 0 && fstat(fd, &st) >= 0 && S_ISREG(st.st_mode) && (size_t) st.st_size == len &&
            (st.st_mode & 07777) == 0600 && read_fd_capped(fd, len + 1, &old, &old_len) >= 0 && old_len == len &&
            memcmp(old, text, len) == 0)
                return 0;
        return write_file_atomic(path, text, len, 0600, 0);
}

static const PartKind *const all_kinds[] = { &kind_sandbox, &kind_publication, &kind_network, &kind_broker,
                                             &kind_router,  &kind_lower,       &kind_layer };

/* Remove what a dead coordinator of this Domain left behind (decision 12).
 * Returns how many parts it removed. */
static int recover(Coordinator *co) {
        int removed = part_recover(&co->ps, all_kinds, ELEMENTSOF(all_kinds), co);
        if (removed < 0)
                return removed;
        trace_remove_stale(co); /* its trace sink's directory (no part: nothing runs there) */
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

void co_teardown(Coordinator *co) {
        co_sandbox_unpause(co);
        /* Sessions first: their CLIs hear why. */
        for (Session *s = co->sessions; s; s = s->next)
                if (session_state_live(s->state)) {
                        if (session_state_running(s->state) && s->pid > 0) {
                                (void) kill(s->pid, SIGKILL);
                                int st;
                                while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
                                        ;
                                s->wstatus = st;
                                session_transition(s, SESSION_EVENT_REAPED);
                        }
                        session_finish(s);
                }
        /* Let the CLIs have their last frames. */
        uint64_t deadline = now_usec() + 500000;
        for (Conn *c = co->conns; c; c = c->next)
                while (co_queue_pending(&c->out) > 0 && now_usec() < deadline) {
                        if (co_queue_flush(&c->out, c->fd) != 0)
                                break;
                        usleep(1000);
                }

        if (co->listen_fd >= 0) {
                co->listen_fd = co_close_watched(co, co->listen_fd);
                co_unlink_socket(co->spec.socket_path);
        }
        (void) part_end(&co->ps, &co->p_publication, co, co);
        (void) part_end(&co->ps, &co->p_sandbox, co, co);
        trace_end(co);
        scan_end(co);
        stop_disk_watch(co);
        stop_escalation(co);
        stop_broker(co);
        stop_network(co);
        stop_anchor(co);
        stop_router(co);
        if (co->generation)
                gen_decide(co, co->generation, GENERATION_TORN_DOWN);
        /* The run's summary: what was counted rather than recorded. */
        event_limiter_flush(co->limiter, co->events, now_usec(), true);
        event_emit(co->events, "sandbox", "stopped", NULL,
                   json_pack("{s:s, s:b, s:I, s:o*}", "reason", co->stop_reason ?: "no session is left", "runtime_lost",
                             co->runtime_lost, "uptime_seconds",
                             (json_int_t) ((now_usec() - co->started_usec) / 1000000), "records",
                             co->limiter ? event_limiter_totals(co->limiter) : NULL));
        log_info("torn down");
}

static uint64_t next_deadline(Coordinator *co) {
        uint64_t d = UINT64_MAX;
        for (Session *s = co->sessions; s; s = s->next) {
                if (s->state == SESSION_STATE_EXITED && s->drain_deadline < d)
                        d = s->drain_deadline;
                if (session_state_running(s->state) && s->kill_deadline && s->kill_deadline < d)
                        d = s->kill_deadline;
        }
        for (Conn *c = co->conns; c; c = c->next)
                if (c->shut && c->linger_deadline < d)
                        d = c->linger_deadline;
        if (!co->ever_had_session && co->started_usec + IDLE_USEC < d)
                d = co->started_usec + IDLE_USEC;
        if (co->mem_watched && !co->stopping && co->mem_next_check < d)
                d = co->mem_next_check;
        if (co->status_dirty && co->status_last + STATUS_LINE_USEC < d)
                d = co->status_last + STATUS_LINE_USEC;
        if (co->scan.on && !co->stopping && co->scan.next < d)
                d = co->scan.next;
        if (event_limiter_next(co->limiter) < d)
                d = event_limiter_next(co->limiter);
        return d;
}

static void run_timers(Coordinator *co) {
        uint64_t now = now_usec();
        if (co->mem_watched && !co->stopping && now >= co->mem_next_check)
                co_check_memory(co);
        if (co->status_dirty && now >= co->status_last + STATUS_LINE_USEC)
                co_status_line_send(co);
        scan_run(co);
        event_limiter_flush(co->limiter, co->events, now, false);
        for (Session *s = co->sessions; s; s = s->next) {
                if (session_state_running(s->state) && s->kill_deadline && now >= s->kill_deadline) {
                        (void) kill(s->pid, SIGKILL);
                        s->kill_deadline = 0;
                }
                if (s->state == SESSION_STATE_EXITED) {
                        bool drained = s->pty < 0 && s->out_fd < 0 && s->err_fd < 0;
                        if (drained || now >= s->drain_deadline)
                                session_finish(s);
                }
        }
        if (!co->ever_had_session && now >= co->started_usec + IDLE_USEC && co->refs == 0)
                co_begin_stop(co, NULL);
}

static void serve(Coordinator *co) {
        for (;;) {
                /* Drop finished things first. */
                for (Conn *c = co->conns, *next; c; c = next) {
                        next = c->next;
                        /* Closing with the peer's data unread would reset the
                         * connection and lose our last frames on its side:
                         * shut our half, then wait for the peer to close. */
                        if (!c->dead && c->close_after_flush && co_queue_pending(&c->out) == 0 && !c->shut) {
                                (void) shutdown(c->fd, SHUT_WR);
                                c->shut = true;
                                c->linger_deadline = now_usec() + LINGER_USEC;
                        }
                        if (c->dead || (c->shut && now_usec() >= c->linger_deadline))
                                conn_free(co, c);
                }
                for (Session *s = co->sessions, *next; s; s = next) {
                        next = s->next;
                        if (s->state == SESSION_STATE_FINISHED && !s->conn)
                                session_free(co, s);
                }
                bool sessions_left = co->sessions != NULL;
                if (co->stopping && !sessions_left)
                        return;
                if (!co->stopping && co->ever_had_session && co->refs == 0 && !sessions_left)
                        co_begin_stop(co, NULL);
                if (co->stopping && !sessions_left)
                        return;

                uint64_t d = next_deadline(co), now = now_usec();
                int timeout = d == UINT64_MAX ? -1 : d <= now ? 0 : (int) ((d - now + 999) / 1000);
                struct epoll_event evs[32];
                int n = epoll_wait(co->epfd, evs, 32, timeout);
                if (n < 0 && errno != EINTR) {
                        log_error("epoll_wait: %s", strerror(errno));
                        co_begin_stop(co, "internal error");
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
                                co->sidecar_fd = co_close_watched(co, co->sidecar_fd);
                                if (!co->stopping) {
                                        /* Like a lost runtime: the sessions end
                                         * with Lazaret's failure status. */
                                        log_error("the network sidecar stopped unexpectedly");
                                        co->runtime_lost = true;
                                        co_begin_stop(co, "the network sidecar stopped unexpectedly");
                                }
                                break;
                        case WATCH_DISK:
                                co_disk_readable(co, w->obj);
                                break;
                        case WATCH_LINES:
                                co_lines_readable(co, w->obj);
                                break;
                        case WATCH_TRACE:
                                co_trace_readable(co);
                                break;
                        case WATCH_RUNTIME:
                                /* conmon exited: the container is gone. */
                                if (!co->stopping)
                                        co_check_runtime(co, 0);
                                else
                                        co->runtime_fd = co_close_watched(co, co->runtime_fd);
                                break;
                        case WATCH_CONN: {
                                Conn *c = w->obj;
                                if (e & EPOLLIN)
                                        conn_readable(co, c);
                                if (e & (EPOLLERR | EPOLLHUP))
                                        c->dead = true;
                                if (!c->dead && co_queue_pending(&c->out) > 0) {
                                        if (co_queue_flush(&c->out, c->fd) < 0)
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
                                        if (co_queue_flush(&s->in, s->pty) < 0)
                                                co_queue_done(&s->in);
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
                                int k = s->in_fd >= 0 ? co_queue_flush(&s->in, s->in_fd) : -EBADF;
                                if (k < 0 || (k == 1 && s->in_eof))
                                        s->in_fd = co_close_watched(co, s->in_fd);
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

/* The start failed after the generation was recorded: release what was
 * made, mark the Sandbox participant Clean and the generation Failed. The
 * caller has already told the leader why. Returns the exit status. */
/* Everything the coordinator holds, freed or closed; safe to call twice and
 * on a partly made coordinator (every early return calls it, so the ASan
 * build's leak check sees a clean exit). */
void co_release(Coordinator *co) {
        co_policy_drop(co);
        co->esc_pending = mfree(co->esc_pending);
        co->n_esc_pending = 0;
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
        diskwatch_stop(&co->disk);
        diskwatch_stop(&co->layer_disk);
        for (size_t i = 0; co->disk_paths && co->disk_paths[i]; i++)
                free(co->disk_paths[i]);
        co->disk_paths = mfree(co->disk_paths);
        for (size_t i = 0; co->layer_paths && co->layer_paths[i]; i++)
                free(co->layer_paths[i]);
        co->layer_paths = mfree(co->layer_paths);
        co->sidecar_fd = safe_close(co->sidecar_fd);
        co->signal_fd = safe_close(co->signal_fd);
        co->epfd = safe_close(co->epfd);
        co->store = store_close(co->store);
        co->fsmon = fsmonitor_stop(co->fsmon);
        policy_in_force_done(&co->net);
        co->declared_netpolicy = mfree(co->declared_netpolicy);
        netpolicy_done(&co->declared_parsed);
        host_addrs_done(&co->host);
        if (co->sb.backend)
                sandbox_done(&co->sb);
        mount_plan_done(&co->sb.plan);
        sidecar_done(&co->sidecar);
        router_run_done(&co->router);
        anchor_done(&co->anchor);
        co->esc = escalation_free(co->esc);
        launch_spec_done(&co->spec);
        co->container_name = mfree(co->container_name);
        co->terminfo_dir = mfree(co->terminfo_dir);
        co->ca_bundle = mfree(co->ca_bundle);
        co->worktree = mfree(co->worktree);
        co->broker_lines.fd = safe_close(co->broker_lines.fd);
        co->router_lines.fd = safe_close(co->router_lines.fd);
        co->events = event_log_close(co->events);
        co->limiter = event_limiter_free(co->limiter);
        co->broker_dir = mfree(co->broker_dir);
}

int start_failed(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_publication, co, co);
        (void) part_end(&co->ps, &co->p_sandbox, co, co);
        trace_end(co);
        scan_end(co);
        stop_disk_watch(co);
        stop_escalation(co);
        stop_broker(co);
        stop_network(co);
        stop_anchor(co);
        stop_router(co);
        gen_decide(co, co->generation, GENERATION_FAILED);
        co_release(co);
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

/* ca_certificates: the bundle made again from the spec's files, the one
 * the CLI checked (same digest), for the sandbox to mount. -1 after
 * reporting why. */
static int write_ca_bundle(Coordinator *co) {
        _cleanup_free_ char *text = NULL, *why = NULL;
        size_t len = 0;
        char digest[65];
        int r = launch_ca_bundle(co->spec.ca_files, &text, &len, digest, &why);
        if (r < 0) {
                status_report(co, "error: ca_certificates: %s", why ?: strerror(-r));
                return -1;
        }
        if (!streq(digest, co->spec.ca_digest)) {
                status_report(co, "error: ca_certificates: a certificate file changed while the sandbox started; "
                                  "run it again");
                return -1;
        }
        co->ca_bundle = launch_ca_bundle_path(&co->spec);
        r = co->ca_bundle ? write_file_atomic(co->ca_bundle, text, len, 0644, 0) : -ENOMEM;
        if (r < 0) {
                status_report(co, "error: cannot write %s: %s", co->ca_bundle ?: "the CA bundle", strerror(-r));
                return -1;
        }
        return 0;
}

/* The fix for an image lazaret builds itself that is not there yet. */
static const char *image_hint(const char *image, const char *err) {
        if (!image || !err || !(strstr(err, "image not known") || strstr(err, "no such image")))
                return "";
        if (streq(image, NODE_IMAGE))
                return "; build it: lazaret image build node";
        if (streq(image, DEBIAN_IMAGE))
                return "; build it: lazaret image build debian";
        if (streq(image, "localhost/lazaret/busybox:latest"))
                return "; build it: lazaret image build busybox";
        return "";
}

#define COORDINATOR_INIT(status)                                                                                       \
        ((Coordinator){                                                                                                \
                .epfd = -EBADF,                                                                                        \
                .listen_fd = -EBADF,                                                                                   \
                .signal_fd = -EBADF,                                                                                   \
                .runtime_fd = -EBADF,                                                                                  \
                .sidecar_fd = -EBADF,                                                                                  \
                .sidecar = { .ctl_fd = -EBADF, .uplink_exit_fd = -EBADF, .go_fd = -EBADF, .uplink_ready_fd = -EBADF }, \
                .status_fd = (status),                                                                                 \
                .watchdog_fd = -EBADF,                                                                                 \
                .broker_lines = { .fd = -EBADF, .fn = co_broker_line },                                                \
                .router_lines = { .fd = -EBADF, .fn = co_router_line },                                                \
                .disk = { .fd = -EBADF },                                                                              \
                .layer_disk = { .fd = -EBADF },                                                                        \
                .trace = { .listen_fd = -EBADF, .fd = -EBADF, .cancel = { -EBADF, -EBADF }, .thread_fd = -EBADF } })

/* ps(1) and /proc/PID/cmdline show "lazaret __watchdog" for the
 * watchdog: written over our own arguments ("lazaret __coordinator",
 * contiguous, as the kernel laid them out), the rest of them zeroed. */
static void retitle_watchdog(int argc, char **argv) {
        static const char word[] = "__watchdog";
        if (argc < 2)
                return;
        char *start = argv[1], *end = argv[argc - 1] + strlen(argv[argc - 1]);
        if ((size_t) (end - start) < sizeof(word) - 1)
                return;
        memset(start, 0, (size_t) (end - start));
        memcpy(start, word, sizeof(word) - 1);
}

/* Start the watchdog: a copy of this process (a fork, not an exec of
 * `lazaret __watchdog`: it is the first thing the coordinator does, so
 * there is one thread and nothing open but descriptors 0-4, and a fork
 * saves a start's worth of loading and linking, about 3 ms of CPU for
 * each sandbox started, which several agents starting at once share two
 * cores for), in a session of its own and not our child (the double
 * fork). It keeps the LaunchSpec on fd 3 and has its end of the pipe on
 * fd 4, stdout and stderr the log, stdin /dev/null, nothing else.
 * Without it a killed coordinator's sandbox would run on until the next
 * `lazaret run`; so a failure here fails the start. */
static int start_watchdog(Coordinator *co, int argc, char **argv) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        pid_t pid = fork();
        if (pid < 0) {
                int e = negative_errno();
                safe_close(p[0]);
                safe_close(p[1]);
                return e;
        }
        if (pid == 0) {
                /* Every descriptor in place here, in the middle process:
                 * exit 0 from it means the watchdog has them. */
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (setsid() < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0 || close(p[1]) < 0 ||
                    dup2(p[0], WATCHDOG_PIPE_FD) < 0 || syscall(SYS_close_range, WATCHDOG_PIPE_FD + 1, ~0U, 0) < 0)
                        _exit(1);
                sigset_t none;
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                pid_t g = fork();
                if (g != 0)
                        _exit(g < 0 ? 1 : 0);
                retitle_watchdog(argc, argv);
                exit(coordinator_watchdog_main(false));
        }
        safe_close(p[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR) {
                        int e = negative_errno();
                        safe_close(p[1]);
                        return e;
                }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                safe_close(p[1]);
                return -ECHILD;
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
        int r = read_spec(&co.spec, NULL, NULL);
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
                co_release(&co);
                return WATCHDOG_EXIT_BUSY;
        }
        if (r == -EBUSY) {
                /* A new coordinator took the Domain first: it removed what
                 * was left before it started. */
                log_info("a new coordinator holds the domain store; it has removed what was left");
                co_release(&co);
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
        co_release(&co);
        return r < 0 ? 1 : r > 0 ? WATCHDOG_EXIT_REMOVED : 0;
}

int coordinator_main(int argc, char **argv) {
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
        r = start_watchdog(&co, argc, argv);
        if (r < 0) {
                status_report(&co, "error: cannot start the coordinator's watchdog: %s", strerror(-r));
                return 1;
        }

        _cleanup_free_ char *spec_text = NULL;
        size_t spec_len = 0;
        r = read_spec(&co.spec, &spec_text, &spec_len);
        if (r < 0) {
                status_report(&co, "error: the coordinator got no valid launch description (%s)", strerror(-r));
                co_release(&co);
                return 1;
        }
        if (co.spec.netpolicy)
                co_policy_begin(&co);
        r = sandbox_name(&co.spec, &co.container_name);
        if (r >= 0)
                r = ctl_uuid_v4(co.coordinator_id);
        if (r >= 0)
                r = ensure_dirs(&co);
        if (r < 0) {
                status_report(&co, "error: cannot prepare the domain directory %s: %s", co.spec.domain_dir,
                              strerror(-r));
                co_release(&co);
                return 1;
        }
        /* For 'lazaret stop' when no coordinator answers: what a watchdog
         * needs to remove what a dead one left. */
        _cleanup_free_ char *spec_copy = path_join(co.spec.domain_dir, WATCHDOG_SPEC_FILE);
        r = spec_copy ? write_spec_copy(spec_copy, spec_text, spec_len) : -ENOMEM;
        if (r < 0) {
                status_report(&co, "error: cannot write %s: %s", spec_copy ?: WATCHDOG_SPEC_FILE, strerror(-r));
                co_release(&co);
                return 1;
        }
        /* What its agent will write, recorded before it starts: a volume
         * later found below a link in it is refused (launch.c). */
        r = agent_trees_record_spec(&co.spec);
        if (r < 0) {
                status_report(&co, "error: cannot record the trees this sandbox writes in %s: %s", co.spec.agent_trees,
                              strerror(-r));
                co_release(&co);
                return 1;
        }
        if (co.spec.ca_files && write_ca_bundle(&co) < 0) {
                co_release(&co);
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
                co_release(&co);
                return 1;
        }
        r = recover(&co);
        if (r < 0) {
                status_report(&co, "error: cannot clean up after an earlier coordinator: %s", strerror(-r));
                co_release(&co);
                return 1;
        }

        r = own_gen_begin(co.store,
                          json_pack("{s:s, s:s, s:n, s:n, s:s}", "configuration_fingerprint", co.spec.fingerprint,
                                    "coordinator_id", co.coordinator_id, "network_sidecar_id", "sandbox_id",
                                    "durable_decision", generation_decision_to_string(GENERATION_STARTING)),
                          &co.generation);
        if (r < 0) {
                status_report(&co, "error: cannot record the new generation: %s", strerror(-r));
                co_release(&co);
                return 1;
        }
        /* The event record: losing it weakens nothing, so a start goes on
         * without it (status says why). */
        /* Tests make the record's segments small (a flood rotates them in
         * seconds); never larger than the default. */
        EventLimits lim = { EVENT_SEGMENT_MAX, EVENT_SEGMENTS, EVENT_QUEUE_RECORDS, EVENT_QUEUE_BYTES, 0 };
        const char *seg = getenv("LAZARET_TEST_EVENT_SEGMENT_BYTES");
        char *end = NULL;
        if (seg && (lim.segment_max = strtoull(seg, &end, 10)) >= 4096 && *end == '\0' &&
            lim.segment_max < EVENT_SEGMENT_MAX)
                log_warning("the event record's segments are %" PRIu64 " bytes (LAZARET_TEST_EVENT_SEGMENT_BYTES)",
                            lim.segment_max);
        else
                lim.segment_max = EVENT_SEGMENT_MAX;
        co.limiter = event_limiter_new(now_usec());
        r = event_log_open(co.spec.domain_dir, &lim, &co.events);
        if (r < 0) {
                snprintf(co.events_unwritten, sizeof(co.events_unwritten), "cannot open %s/%s: %s", co.spec.domain_dir,
                         EVENT_DIR, strerror(-r));
                log_warning("no event record: %s", co.events_unwritten);
                char w[300];
                snprintf(w, sizeof(w), "no event record: %s", co.events_unwritten);
                status_warn(&co, w);
        }
        event_log_set_generation(co.events, co.generation);

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
        co_sandbox_init(&co);
        const SandboxBackend *backend = co.sb.backend;
        /* FS-ONLY has no mount namespace to put the git router's mount at
         * .git's path: .git is read-only there. */
        bool fs_only_branch = co.spec.native_fs_only && co.spec.branch;
        /* The native backend's network sidecar (no container) starts its
         * namespace and uplink now, beside the router's start; the
         * network's own step below gives netd its policy (FR-3 still:
         * attested and probed before the sandbox starts). */
        /* The declared policy, parsed once (10,000 prefixes cost a few
         * milliseconds a parse) for the sidecar's two halves; a kept
         * namespace needs it only when the network starts (the thread
         * parses on beside the router's start). */
        if (!sidecar_prestart_kept(&co.spec, &co.sidecar)) {
                const NetPolicy *declared = NULL;
                if (co.spec.netpolicy && co_policy_wait_parsed(&co, &declared) == -ENOENT) {
                        const char *why = NULL;
                        /* Refused: start_network says what is wrong. */
                        co.have_declared_parsed = netpolicy_parse(co.spec.netpolicy, strlen(co.spec.netpolicy),
                                                                  &co.declared_parsed, &why) >= 0;
                        declared = co.have_declared_parsed ? &co.declared_parsed : NULL;
                }
                sidecar_prestart(&co.spec, declared, &co.sidecar);
        }
        /* The work files' first walk (the baseline, which the sandbox's
         * start waits for) beside the router's start. */
        r = start_disk_watch(&co, &err);
        if (r < 0) {
                status_report(&co, "error: %s", err ? err : strerror(-r));
                return start_failed(&co);
        }
        if ((!co.spec.branch || co.spec.git_dir) && !fs_only_branch) {
                r = start_router(&co, &err);
                /* A backend whose branch mode can do without (native):
                 * .git read-only, commits refused, and said so. */
                if (r < 0 && backend->git_router_optional && co.spec.branch) {
                        log_warning("no git router (%s): .git is read-only in the sandbox", err ?: strerror(-r));
                        status_warn(&co, "the repository's .git is read-only in the sandbox (commits are refused): "
                                         "the git router cannot run here ('lazaret status' says why)");
                        err = mfree(err);
                        r = 0;
                }
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
                        status_report(&co, "error: cannot start the sandbox from %s: %s%s", co.spec.image, err,
                                      image_hint(co.spec.image, err));
                return start_failed(&co);
        }
        err = mfree(err);
        r = start_layer_watch(&co, &err);
        if (r < 0) {
                status_report(&co, "error: %s", err ? err : strerror(-r));
                return start_failed(&co);
        }
        /* FR-3: the sidecar runs and has attested before the sandbox
         * starts; with the kernel's stack (runsc_network = "host", the
         * native backend) the probes run now, from its namespace, with
         * gVisor's own stack from inside the sandbox. */
        r = start_network(&co, &err);
        if (r < 0) {
                status_report(&co, "error: cannot enforce the network policy: %s", err ? err : strerror(-r));
                return start_failed(&co);
        }
        if (!launch_gvisor_netstack(&co.spec)) {
                r = prove_network(&co, co.readiness_fingerprint, &err);
                if (r < 0) {
                        status_report(&co, "error: %s", err ? err : strerror(-r));
                        return start_failed(&co);
                }
        }
        err = mfree(err);
        r = start_broker(&co, &err);
        if (r < 0) {
                status_report(&co, "error: cannot start the broker for allow_domains: %s", err ? err : strerror(-r));
                return start_failed(&co);
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
        r = co_mount_plan(&co, &err);
        if (r >= 0)
                r = part_begin(&co.ps, co.generation, &kind_sandbox, sandbox_part_intent(&co.sb, co_self_identity()),
                               &co, &co, &co.p_sandbox, &err);
        if (r < 0) {
                if (!backend->uses_image)
                        status_report(&co, "error: cannot start the %s sandbox: %s", backend->name,
                                      err ? err : strerror(-r));
                else
                        status_report(&co, "error: cannot start the sandbox from %s: %s%s", co.spec.image,
                                      err ? err : strerror(-r), image_hint(co.spec.image, err));
                return start_failed(&co);
        }
        if (launch_gvisor_netstack(&co.spec)) {
                r = prove_network(&co, co.readiness_fingerprint, &err);
                if (r < 0) {
                        status_report(&co, "error: %s", err ? err : strerror(-r));
                        return start_failed(&co); /* it removes the sandbox */
                }
        }
        err = mfree(err);
        r = prove_egress(&co, &err);
        if (r < 0) {
                status_report(&co, "error: %s", err ? err : strerror(-r));
                return start_failed(&co);
        }
        (void) own_gen_update(co.store, co.generation, json_pack("{s:s}", "sandbox_id", co.sb.id));

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
                r = co_epoll_add(&co, co.listen_fd, EPOLLIN, &co.w_listen);
                if (r >= 0)
                        r = co_epoll_add(&co, co.signal_fd, EPOLLIN, &co.w_signal);
                if (r >= 0)
                        r = co_epoll_add(&co, store_worker_fd(co.worker), EPOLLIN, &co.w_store);
                if (r >= 0)
                        r = co_epoll_add(&co, store_worker_fd(co.slow), EPOLLIN, &co.w_slow);
                int t = limits_cpu_apply(co.sb.supervisor, false, (unsigned) co.spec.cpu_limit, SANDBOX_NICE, co.cpus,
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
                snprintf(co.sb.cpus, sizeof(co.sb.cpus), "%s", co.cpus);
                /* The backend's measure (gVisor's memory file, the native
                 * sandbox's cgroup or processes), looked at once a second. */
                int k = backend->memory_open(&co.sb, co.mem_unwatched, sizeof(co.mem_unwatched));
                if (k < 0) {
                        log_warning("memory_limit is not enforced: %s", co.mem_unwatched);
                        char w[300];
                        snprintf(w, sizeof(w), "memory_limit is not enforced: %s ('lazaret doctor' explains)",
                                 co.mem_unwatched);
                        status_warn(&co, w);
                } else {
                        co.mem_watched = true;
                        co_check_memory(&co);
                }
                /* The sandbox's supervisor on the host, whose end is its
                 * end; FS-ONLY has none: its sessions are all. */
                const char *warning = backend->start_warning(&co.sb);
                if (warning)
                        status_warn(&co, warning);
                co.runtime_fd = co.sb.supervisor > 0 ? (int) syscall(SYS_pidfd_open, co.sb.supervisor, 0) : -EBADF;
                if (r >= 0 && co.runtime_fd >= 0)
                        r = co_epoll_add(&co, co.runtime_fd, EPOLLIN, &co.w_runtime);
                else if (co.sb.supervisor > 0 && co.runtime_fd < 0)
                        log_warning("cannot watch the sandbox's supervisor (pid %d): %s", (int) co.sb.supervisor,
                                    strerror(errno));
                co.w_esc = (Watch){ WATCH_ESCALATION, &co };
                if (r >= 0 && co.esc)
                        r = co_epoll_add(&co, escalation_fd(co.esc), EPOLLIN, &co.w_esc);
                co.w_sidecar = (Watch){ WATCH_SIDECAR, &co };
                if (r >= 0 && co.sidecar_fd >= 0)
                        r = co_epoll_add(&co, co.sidecar_fd, EPOLLIN, &co.w_sidecar);
                co.w_disk = (Watch){ WATCH_DISK, &co.disk };
                if (r >= 0 && co.disk.fd >= 0)
                        r = co_epoll_add(&co, co.disk.fd, EPOLLIN, &co.w_disk);
                co.w_layer_disk = (Watch){ WATCH_DISK, &co.layer_disk };
                if (r >= 0 && co.layer_disk.fd >= 0)
                        r = co_epoll_add(&co, co.layer_disk.fd, EPOLLIN, &co.w_layer_disk);
                if (r >= 0)
                        r = co_lines_watch(&co, &co.broker_lines);
                if (r >= 0)
                        r = co_lines_watch(&co, &co.router_lines);
                if (r >= 0)
                        r = trace_watch(&co);
        }
        if (r < 0) {
                status_report(&co, "error: cannot publish the control socket %s: %s", co.spec.socket_path,
                              strerror(-r));
                co.listen_fd = safe_close(co.listen_fd);
                co_teardown(&co);
                co_release(&co);
                return 1;
        }
        gen_decide(&co, co.generation, GENERATION_RUNNING);
        uint64_t start_ms = (now_usec() - co.started_usec) / 1000;
        log_info("sandbox %s running (generation %" PRIu64 ", +%" PRIu64 " ms), listening on %s", co.container_name,
                 co.generation, start_ms, co.spec.socket_path);
        /* The leader first, then the event (its policy cut as the record
         * keeps it: the first 2 KB of the 260 KB of 10,000 prefixes). */
        bool answered = status_report(&co, "ok");
        event_emit(co.events, "sandbox", "started", NULL,
                   json_pack("{s:s, s:s?, s:s, s:s, s:o, s:s?, s:I}", "profile", co.spec.profile, "image",
                             co.spec.image, "container", co.container_name, "workspace", co.spec.workspace,
                             "network_policy", event_str_cut(co.net.canonical ?: co.spec.netpolicy), "worktree",
                             co.worktree, "start_ms", (json_int_t) start_ms));
        if (!answered) {
                /* The lazaret that started us gave up waiting (its time
                 * limit) and told its user so: nobody will use this
                 * sandbox, and nothing may outlive that. */
                log_info("stopping: the lazaret that started this coordinator is gone");
                co.listen_fd = safe_close(co.listen_fd);
                co_unlink_socket(co.spec.socket_path);
                co.worker = store_worker_free(co.worker);
                co_teardown(&co);
                co_release(&co);
                return 1;
        }

        serve(&co);

        co.slow = store_worker_free(co.slow); /* an update's end goes to the CLIs still here */
        co.worker = store_worker_free(co.worker);
        co_teardown(&co);
        co_release(&co);
        return 0;
}
