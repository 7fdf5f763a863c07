/* SPDX-License-Identifier: MIT */
/* Egress by name (issue 18): the Domain's broker, a Participant (a Helper
 * in the schema's roles). The coordinator makes the broker's socket in a
 * directory of its own (mounted read-only in the sandbox at
 * /run/lazaret/broker, where lazaret-relay connects), starts
 * lazaret-broker with it, the rules and the policy, and reads the
 * broker's decisions from a pipe: it counts them for `lazaret status` and
 * puts each on the Domain's event record (source "network", kind
 * "connection"). Enforcement never reads that record; a decision that does
 * not fit the pipe is counted by the broker, never waited for. */
#include <poll.h>
#include <sys/uio.h>

#include "broker-proto.h"
#include "coordinator-internal.h"

#define BROKER_STOP_USEC  (UINT64_C(2) * 1000000)
#define PROBE_UNLISTED    "unlisted.lazaret-probe.invalid" /* a name no rule can list (.invalid) */
#define EGRESS_PROBE_USEC (UINT64_C(15) * 1000000)

static size_t strv_count(char *const *v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static int broker_config_fd(const Coordinator *co, int *ret) {
        json_t *rules = json_array(), *res = json_array();
        for (char **p = co->spec.domains; rules && p && *p; p++)
                json_array_append_new(rules, json_string(*p));
        for (char **p = co->spec.broker_resolvers; res && p && *p; p++)
                json_array_append_new(res, json_string(*p));
        /* The policy in force: the declared one, with the host's own
         * addresses denied. */
        const char *canon = co->net.canonical ?: co->spec.netpolicy;
        json_t *j = json_pack("{s:i, s:o*, s:b, s:I, s:i, s:i, s:s, s:o*}", "version", 1, "rules", rules,
                              "check_server_name", co->spec.check_server_name, "max_connections",
                              (json_int_t) co->spec.broker_connections, "idle_timeout", 600, "connect_timeout", 10,
                              "netpolicy", canon, "resolvers", res);
        if (!j)
                return -ENOMEM;
        return co_json_memfd("lazaret-broker-config", j, ret);
}

/* The broker's socket, bound through the directory's descriptor (the
 * runtime directory's path may be too long for sun_path). */
static int broker_bind(const char *dir, int *ret) {
        _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd < 0)
                return negative_errno();
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/sock", dfd);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        (void) unlinkat(dfd, "sock", 0);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 512) < 0) {
                int e = negative_errno();
                safe_close(fd);
                return e;
        }
        *ret = fd;
        return 0;
}

static void broker_remove_dir(const char *dir) {
        if (!dir)
                return;
        _cleanup_free_ char *sock = path_join(dir, "sock");
        if (sock)
                (void) unlink(sock);
        (void) rmdir(dir);
}

static int broker_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        (void) obj;
        const char *dir = json_string_value(json_object_get(intent, "socket_dir"));
        const char *why = NULL;
        _cleanup_close_ int listen_fd = -EBADF, cfg = -EBADF, ev_w = -EBADF;
        int p[2], r;

        if (!dir)
                return -EINVAL;
        r = private_dir(dir, &why);
        if (r < 0) {
                if (asprintf(ret_error, "cannot make the broker's directory %s: %s", dir, why ?: strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        r = broker_bind(dir, &listen_fd);
        if (r < 0) {
                if (asprintf(ret_error, "cannot make the broker's socket in %s: %s", dir, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        r = broker_config_fd(co, &cfg);
        if (r < 0)
                return r;
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return negative_errno();
        co->broker_lines.fd = p[0];
        ev_w = p[1];
        /* Its decisions may queue up while the loop is busy. */
        (void) fcntl(ev_w, F_SETPIPE_SZ, 1024 * 1024);

        SpawnFd fds[] = { { listen_fd, 3 }, { cfg, 4 }, { ev_w, 5 } };
        SpawnSpec sp =
                SPAWN_SPEC_INIT(co->spec.broker, (char *const[]){ (char *) "lazaret-broker", (char *) "--listen-fd",
                                                                  (char *) "3", (char *) "--config-fd", (char *) "4",
                                                                  (char *) "--events-fd", (char *) "5", NULL });
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.cwd = "/";
        /* It parses what the sandbox sends: none of the person's
         * environment (secrets, c-ares' LOCALDOMAIN and RES_OPTIONS). */
        sp.envp = (char *const[]){ (char *) "PATH=/usr/bin:/bin", NULL };
        r = spawn(&sp, &co->broker_pid);
        if (r < 0) {
                co->broker_lines.fd = safe_close(co->broker_lines.fd);
                if (asprintf(ret_error, "cannot start %s: %s", co->spec.broker, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        (void) process_identity_of(co->broker_pid, &co->broker_ident);
        *ret_commit = json_pack("{s:o}", "daemon", process_identity_to_json(&co->broker_ident));
        log_info("broker %d for %zu name rule%s, socket %s/sock", (int) co->broker_pid, strv_count(co->spec.domains),
                 strv_count(co->spec.domains) == 1 ? "" : "s", dir);
        return 0;
}

static void broker_kill(Coordinator *co) {
        if (co->broker_pid <= 0)
                return;
        (void) kill(co->broker_pid, SIGTERM);
        uint64_t deadline = now_usec() + BROKER_STOP_USEC;
        for (;;) {
                if (waitpid(co->broker_pid, NULL, WNOHANG) == co->broker_pid)
                        break;
                if (now_usec() > deadline) {
                        (void) kill(co->broker_pid, SIGKILL);
                        (void) waitpid(co->broker_pid, NULL, 0);
                        break;
                }
                (void) usleep(10000);
        }
        co->broker_pid = 0;
}

static int broker_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        if (obj) {
                broker_kill(co);
                co_lines_drain(co, &co->broker_lines); /* its last decisions */
        } else {
                /* A dead coordinator's: by pid and start time. */
                ProcessIdentity pi;
                if (process_identity_from_json(json_object_get(own, "daemon"), &pi) >= 0 && process_identity_alive(&pi))
                        (void) kill(pi.pid, SIGKILL);
        }
        broker_remove_dir(json_string_value(json_object_get(own, "socket_dir")));
        return 0;
}

const PartKind kind_broker = {
        .role = ROLE_HELPER,
        .acquire = broker_acquire,
        .release = broker_release,
};

int start_broker(Coordinator *co, char **ret_error) {
        if (!co->spec.broker || strv_count(co->spec.domains) == 0)
                return 0;
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "%s/lazaret_broker_%s", co->spec.runtime_dir, co->spec.domain_hash);
        co->broker_dir = strbuf_steal(&b);
        if (!co->broker_dir)
                return -ENOMEM;
        return part_begin(&co->ps, co->generation, &kind_broker, json_pack("{s:s}", "socket_dir", co->broker_dir), co,
                          co, &co->p_broker, ret_error);
}

void stop_broker(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_broker, co, co);
}

/* The policy in force changed (a CLI joined with another): the broker
 * takes it. Its process is started anew on a new socket in the same
 * directory, which the sandbox has mounted; connections open through the
 * old one end. Failing, names are unreachable (never less guarded). */
void co_broker_refresh(Coordinator *co) {
        if (co->p_broker.id == 0)
                return;
        broker_kill(co);
        co_lines_drain(co, &co->broker_lines); /* its last decisions */
        _cleanup_free_ char *err = NULL;
        json_t *intent = json_pack("{s:s}", "socket_dir", co->broker_dir), *commit = NULL;
        int r = intent ? broker_acquire(co, co, intent, &commit, &err) : -ENOMEM;
        json_decref(intent);
        if (r >= 0)
                r = co_lines_watch(co, &co->broker_lines);
        if (r < 0) {
                log_error("cannot start the broker again for the new policy: %s", err ?: strerror(-r));
                json_decref(commit);
                return;
        }
        (void) part_update(&co->ps, &co->p_broker, -1, commit);
        log_info("the broker takes the new policy (pid %d)", (int) co->broker_pid);
}

void co_broker_reap(Coordinator *co) {
        if (co->broker_pid > 0 && waitpid(co->broker_pid, NULL, WNOHANG) == co->broker_pid) {
                co->broker_pid = 0;
                /* No broker is no egress by name: nothing is let through
                 * that should not be; the sandbox goes on without it. */
                log_error("the broker stopped unexpectedly: names are unreachable until the sandbox restarts");
                co->broker_lost = true;
        }
}

void co_broker_line(Coordinator *co, const char *line, size_t len) {
        json_t *j = json_loadb(line, len, 0, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return;
        }
        const char *verdict = json_string_value(json_object_get(j, "verdict"));
        /* status counts the agent's connections, not the launch's probes. */
        if (co->egress_probing)
                co->probe_lines++;
        else if (verdict && streq(verdict, "allowed"))
                co->egress_allowed++;
        else if (verdict && streq(verdict, "refused")) {
                co->egress_refused++;
                co_status_touch(co);
        }
        json_t *d = json_object_get(j, "dropped");
        if (json_is_integer(d))
                co->egress_dropped += (uint64_t) json_integer_value(d);
        /* The record's own time stamps it. */
        json_object_del(j, "time");
        if (co->egress_probing)
                json_object_set_new(j, "probe", json_true());
        else if (verdict && streq(verdict, "refused")) {
                /* The agent can be refused as often as it likes: per
                 * destination, the first few in full, then counted. */
                json_t *key = json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}", "verdict",
                                        json_object_get(j, "verdict"), "via", json_object_get(j, "via"), "host",
                                        json_object_get(j, "host"), "name", json_object_get(j, "name"), "port",
                                        json_object_get(j, "port"), "reason", json_object_get(j, "reason"));
                bool full = event_limiter_admit(co->limiter, "network", "connection", key,
                                                json_is_integer(d) ? (uint64_t) json_integer_value(d) : 0, now_usec());
                json_decref(key);
                if (!full) {
                        json_decref(j);
                        return;
                }
        }
        event_emit(co->events, "network", "connection", NULL, j);
}

json_t *co_broker_status(const Coordinator *co) {
        if (strv_count(co->spec.domains) == 0)
                return NULL;
        json_t *rules = json_array();
        for (char **p = co->spec.domains; rules && *p; p++)
                json_array_append_new(rules, json_string(*p));
        return json_pack("{s:o*, s:s, s:I, s:I, s:I, s:b, s:s, s:i, s:i}", "rules", rules, "broker",
                         co->broker_pid > 0 ? "running" : "stopped", "allowed", (json_int_t) co->egress_allowed,
                         "refused", (json_int_t) co->egress_refused, "dropped_records", (json_int_t) co->egress_dropped,
                         "check_server_name", co->spec.check_server_name, "relay", "127.0.0.1", "http_port",
                         RELAY_HTTP_PORT, "socks_port", RELAY_SOCKS_PORT);
}

/* One probe through the relay in the sandbox: its one line of output. */
static int egress_probe(Coordinator *co, const char *name, const char *port, char **ret_line) {
        return co->sb.backend->egress_probe(&co->sb, name, port, EGRESS_PROBE_USEC, ret_line);
}

/* Readiness evidence of egress by name: each probe_domains name answers
 * through the relay and the broker, and a name no rule lists is refused.
 * Recorded on the broker's participant; a mismatch stops the launch. */
/* The broker's lines for the n probes just made (each written as its
 * connection is decided or closed, so a little after the probe returns),
 * read now and marked as the launch's own; at most 2 s. */
static void read_probe_lines(Coordinator *co, unsigned n) {
        LinePipe *p = &co->broker_lines;
        uint64_t deadline = now_usec() + 2000000;
        co->egress_probing = true;
        co->probe_lines = 0;
        while (p->fd >= 0 && co->probe_lines < n) {
                uint64_t now = now_usec();
                if (now >= deadline)
                        break;
                struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
                if (poll(&pfd, 1, (int) ((deadline - now) / 1000) + 1) <= 0)
                        continue;
                co_lines_readable(co, p);
        }
        co_trace_readable(co); /* the probes' processes, as the launch's own */
        co->egress_probing = false;
}

int prove_egress(Coordinator *co, char **ret_error) {
        if (co->p_broker.id == 0)
                return 0;
        json_t *probes = json_array();
        int r = 0;
        _cleanup_free_ char *bad = NULL;
        for (size_t i = 0; r >= 0 && !bad && co->spec.probe_domains && co->spec.probe_domains[i]; i++) {
                _cleanup_free_ char *name = strdup(co->spec.probe_domains[i]), *line = NULL;
                if (!name) {
                        r = -ENOMEM;
                        break;
                }
                char *colon = strrchr(name, ':');
                const char *port = "443";
                if (colon) {
                        *colon = '\0';
                        port = colon + 1;
                }
                r = egress_probe(co, name, port, &line);
                if (r < 0)
                        break;
                bool ok = startswith(line, "ok ");
                json_array_append_new(probes, json_pack("{s:s, s:s, s:s, s:b}", "kind", "listed", "destination",
                                                        co->spec.probe_domains[i], "result", line, "expected", ok));
                if (!ok && asprintf(&bad, "the listed name %s is not reachable through the broker (%s)",
                                    co->spec.probe_domains[i], line) < 0)
                        r = -ENOMEM;
        }
        if (r >= 0 && !bad) {
                _cleanup_free_ char *line = NULL;
                r = egress_probe(co, PROBE_UNLISTED, "443", &line);
                if (r >= 0) {
                        bool ok = startswith(line, "refused " BROKER_ERR_NAME);
                        json_array_append_new(probes,
                                              json_pack("{s:s, s:s, s:s, s:b}", "kind", "unlisted", "destination",
                                                        PROBE_UNLISTED ":443", "result", line, "expected", ok));
                        if (!ok && asprintf(&bad, "a name no rule lists was not refused by the broker (%s)", line) < 0)
                                r = -ENOMEM;
                }
        }
        read_probe_lines(co, (unsigned) json_array_size(probes));
        (void) part_update(&co->ps, &co->p_broker, -1,
                           json_pack("{s:{s:s, s:o, s:b}}", "readiness_evidence", "method",
                                     "lazaret-relay --probe inside the sandbox (runsc exec)", "probes", probes,
                                     "accepted", r >= 0 && !bad));
        if (r < 0) {
                if (asprintf(ret_error, "cannot run the egress probe: %s", strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (bad) {
                if (asprintf(ret_error, "egress readiness check failed: %s", bad) < 0)
                        *ret_error = NULL;
                return -EPROTO;
        }
        log_info("egress by name proved: %zu listed name%s answered, an unlisted one was refused",
                 strv_count(co->spec.probe_domains), strv_count(co->spec.probe_domains) == 1 ? "" : "s");
        return 0;
}
