/* SPDX-License-Identifier: MIT */
/* lazaret-broker: a Domain's egress-by-name broker (issue 18).
 *
 *   lazaret-broker --listen-fd N --config-fd M --events-fd K
 *
 * The coordinator starts one per Domain, as the user who runs Lazaret, in
 * the host's network namespace. The relay inside the sandbox connects to
 * the listening Unix socket (fd N) and asks for one destination per
 * connection (src/shared/broker-proto.h); the broker checks the name and
 * port against the rules, looks the name up once, refuses the whole answer
 * set when any address is one it must not reach (src/netpolicy/egress-addr.h),
 * connects, answers OK and pumps bytes both ways with splice(2) until both
 * sides are done or the connection is idle.
 *
 * The configuration is JSON in a memfd (fd M, broker-config.c). Every
 * decision is one JSON line on the events pipe (fd K, nonblocking; a line
 * that does not fit is dropped and counted in the next one's "dropped").
 * When the pipe's reader goes away (the coordinator died) the broker exits
 * 0; so it does on SIGTERM and SIGINT, and on the parent's death
 * (PR_SET_PDEATHSIG). Bad usage or configuration: exit 2, one line on
 * stderr. stderr is the log; refusals are logged at info level at a bounded
 * rate (the events pipe is the record).
 *
 * One thread and one epoll loop: client sockets, server sockets, c-ares'
 * sockets, the listening socket, a signalfd and the events pipe. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker.h"
#include "fd-util.h"
#include "log.h"

#define CONFIG_MAX   (NETPOLICY_CANONICAL_MAX + 1024u * 1024u)
#define EPOLL_BATCH  64
#define FDS_PER_CONN 6u /* two sockets, two pipes */

/* ---- DNS (c-ares, driven by the loop) ---- */

static void ares_sock_state(void *data, ares_socket_t fd, int readable, int writable) {
        Broker *b = data;
        Watch **pp = &b->ares_watches, *w = NULL;
        for (; *pp; pp = &(*pp)->next)
                if ((*pp)->fd == fd) {
                        w = *pp;
                        break;
                }
        if (!readable && !writable) {
                if (!w)
                        return;
                broker_unwatch(b, w);
                *pp = w->next;
                /* An event for it may still be in this batch. */
                w->fd = -EBADF;
                w->next = b->dead_watches;
                b->dead_watches = w;
                return;
        }
        if (!w) {
                w = calloc(1, sizeof(Watch));
                if (!w) {
                        log_error("out of memory watching a DNS socket");
                        return;
                }
                *w = (Watch){ .kind = WATCH_ARES, .fd = fd, .next = b->ares_watches };
                b->ares_watches = w;
        }
        int r = broker_watch(b, w, (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0));
        if (r < 0)
                log_full_errno(LOG_LEVEL_WARNING, r, "cannot watch a DNS socket: %m");
}

static int ares_setup(Broker *b) {
        int r = ares_library_init(ARES_LIB_INIT_ALL);
        if (r != ARES_SUCCESS)
                return log_error_errno(EIO, "c-ares: %s", ares_strerror(r));
        /* How many servers: the per-try timeout spreads ~5 s over two tries
         * of each (c-ares doubles it on the second round). */
        size_t nservers = b->cfg.n_resolvers;
        if (nservers == 0) {
                ares_channel probe;
                struct ares_addr_port_node *servers = NULL;
                if (ares_init(&probe) != ARES_SUCCESS)
                        return log_error_errno(EIO, "c-ares cannot read /etc/resolv.conf");
                if (ares_get_servers_ports(probe, &servers) == ARES_SUCCESS)
                        for (struct ares_addr_port_node *s = servers; s; s = s->next)
                                nservers++;
                ares_free_data(servers);
                ares_destroy(probe);
        }
        unsigned timeout_ms = (unsigned) (BROKER_DNS_TIMEOUT_SEC * 1000u / (3u * (nservers ?: 1)));
        if (timeout_ms < 250)
                timeout_ms = 250;
        struct ares_options o = {
                .flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES,
                .timeout = (int) timeout_ms,
                .tries = 2,
                .ndomains = 0,
                .domains = NULL,
                .lookups = (char *) "b", /* DNS only, never /etc/hosts */
                .sock_state_cb = ares_sock_state,
                .sock_state_cb_data = b,
        };
        int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_DOMAINS | ARES_OPT_LOOKUPS |
                   ARES_OPT_SOCK_STATE_CB;
        r = ares_init_options(&b->ares, &o, mask);
        if (r != ARES_SUCCESS)
                return log_error_errno(EIO, "c-ares: %s", ares_strerror(r));
        if (b->cfg.resolvers_csv) {
                r = ares_set_servers_ports_csv(b->ares, b->cfg.resolvers_csv);
                if (r != ARES_SUCCESS)
                        return log_error_errno(EIO, "c-ares refuses the resolvers %s: %s", b->cfg.resolvers_csv,
                                               ares_strerror(r));
        }
        return 0;
}

/* ---- setup ---- */

static _noreturn_ void die_usage(const char *fmt, ...) _printf_(1, 2);
static _noreturn_ void die_usage(const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        log_error("%s", msg);
        exit(2);
}

static int parse_fd(const char *s, const char *opt) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || v < 0 || v > INT_MAX)
                die_usage("%s: \"%s\" is not a file descriptor number", opt, s);
        if (fcntl((int) v, F_GETFD) < 0)
                die_usage("%s: file descriptor %ld is not open", opt, v);
        return (int) v;
}

static char *read_config(int fd, size_t *ret_len) {
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                die_usage("--config-fd: not a memfd or regular file");
        if ((uint64_t) st.st_size > CONFIG_MAX)
                die_usage("--config-fd: the configuration is larger than %u bytes", CONFIG_MAX);
        size_t len = (size_t) st.st_size;
        char *buf = malloc(len + 1);
        if (!buf)
                die_usage("out of memory");
        size_t got = 0;
        while (got < len) {
                ssize_t k = pread(fd, buf + got, len - got, (off_t) got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        die_usage("--config-fd: cannot read the configuration: %s",
                                  k < 0 ? strerror(errno) : "it shrank");
                got += (size_t) k;
        }
        buf[len] = '\0';
        *ret_len = len;
        return buf;
}

static void check_listen_fd(int fd) {
        int v;
        socklen_t l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_UNIX)
                die_usage("--listen-fd: not a Unix socket");
        l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_STREAM)
                die_usage("--listen-fd: not a stream socket");
        l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v)
                die_usage("--listen-fd: the socket is not listening");
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                die_usage("--listen-fd: cannot make it nonblocking: %s", strerror(errno));
}

static void check_events_fd(int fd) {
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
                die_usage("--events-fd: not a pipe");
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
                die_usage("--events-fd: not the write end of a pipe");
        if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                die_usage("--events-fd: cannot make it nonblocking: %s", strerror(errno));
}

/* Enough descriptors for max_connections; EMFILE pauses accepting anyway. */
static void raise_nofile(unsigned max_connections) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        rlim_t want = (rlim_t) max_connections * FDS_PER_CONN + 64;
        if (rl.rlim_cur >= want)
                return;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < want)
                log_warning("at most %llu open files: fewer than %u connections may be served at once",
                            (unsigned long long) rl.rlim_cur, max_connections);
}

/* ---- the loop ---- */

static void on_listen(Broker *b) {
        for (;;) {
                int fd = accept4(b->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                                /* Out of descriptors: stop accepting until a
                                 * connection ends or a second passed. */
                                broker_log_refusal(b, "cannot accept: %s; pausing", strerror(errno));
                                broker_unwatch(b, &b->listen);
                                b->listen_paused = true;
                                b->listen_paused_at = now_usec();
                                broker_deadline(b, b->listen_paused_at + USEC_PER_SEC);
                        } else if (errno != EAGAIN)
                                log_full_errno(LOG_LEVEL_WARNING, errno, "accept: %m");
                        return;
                }
                if (b->n_conns >= b->cfg.max_connections)
                        conn_refuse_limit(b, fd);
                else
                        conn_accept(b, fd);
        }
}

static void resume_listen(Broker *b) {
        if (!b->listen_paused)
                return;
        if (broker_watch(b, &b->listen, EPOLLIN) == 0)
                b->listen_paused = false;
}

static void sweep(Broker *b, usec_t now) {
        b->next_deadline = USEC_INFINITY;
        for (Conn *c = b->conns, *next; c; c = next) {
                next = c->next;
                if (c->state == CONN_PUMP)
                        c->deadline = c->last_activity + (usec_t) b->cfg.idle_timeout * USEC_PER_SEC;
                if (c->deadline <= now)
                        conn_timeout(c, now);
                if (c->state != CONN_DEAD)
                        broker_deadline(b, c->deadline);
        }
        if (b->listen_paused) {
                if (now >= b->listen_paused_at + USEC_PER_SEC || b->n_conns < b->cfg.max_connections / 2)
                        resume_listen(b);
                else
                        broker_deadline(b, b->listen_paused_at + USEC_PER_SEC);
        }
}

static void free_dead(Broker *b) {
        while (b->dead_conns) {
                Conn *c = b->dead_conns;
                b->dead_conns = c->next;
                conn_free(c);
        }
        while (b->dead_watches) {
                Watch *w = b->dead_watches;
                b->dead_watches = w->next;
                free(w);
        }
        if (b->listen_paused && b->n_conns < b->cfg.max_connections)
                resume_listen(b);
}

static int loop_timeout(Broker *b, usec_t now) {
        usec_t until = b->next_deadline;
        struct timeval tv;
        if (ares_timeout(b->ares, NULL, &tv)) {
                usec_t t = now + (usec_t) tv.tv_sec * USEC_PER_SEC + (usec_t) tv.tv_usec;
                if (t < until)
                        until = t;
        }
        if (until == USEC_INFINITY)
                return -1;
        if (until <= now)
                return 0;
        usec_t ms = (until - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        return ms > INT_MAX ? INT_MAX : (int) ms;
}

static void dispatch(Broker *b, Watch *w, uint32_t events) {
        switch (w->kind) {
        case WATCH_LISTEN:
                on_listen(b);
                break;
        case WATCH_EVENTS:
                /* POLLERR on a pipe's write end: the reader is gone. */
                if (events & (EPOLLERR | EPOLLHUP)) {
                        log_info("the events pipe's reader closed; exiting");
                        b->quit = true;
                }
                break;
        case WATCH_SIGNAL: {
                struct signalfd_siginfo si;
                if (read(w->fd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
                        log_info("signal %u; exiting", si.ssi_signo);
                        b->quit = true;
                }
                break;
        }
        case WATCH_ARES:
                if (w->fd >= 0)
                        ares_process_fd(b->ares, events & (EPOLLIN | EPOLLERR | EPOLLHUP) ? w->fd : ARES_SOCKET_BAD,
                                        events & EPOLLOUT ? w->fd : ARES_SOCKET_BAD);
                break;
        case WATCH_CLIENT:
        case WATCH_SERVER:
                if (w->conn && w->conn->state != CONN_DEAD)
                        conn_handle(w->conn, w, events);
                break;
        case _WATCH_KIND_MAX:
                break;
        }
}

static int run(Broker *b) {
        struct epoll_event evs[EPOLL_BATCH];
        while (!b->quit) {
                usec_t now = now_usec();
                int n = epoll_wait(b->epoll_fd, evs, EPOLL_BATCH, loop_timeout(b, now));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(errno, "epoll_wait: %m");
                }
                for (int i = 0; i < n && !b->quit; i++)
                        dispatch(b, evs[i].data.ptr, evs[i].events);
                free_dead(b);
                /* c-ares' timeouts, then ours. */
                ares_process_fd(b->ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
                now = now_usec();
                if (now >= b->next_deadline)
                        sweep(b, now);
                free_dead(b);
        }
        return 0;
}

static void shutdown_all(Broker *b) {
        while (b->conns)
                conn_close(b->conns, "the broker is stopping");
        if (b->ares) {
                ares_destroy(b->ares); /* calls back with ARES_EDESTRUCTION */
                b->ares = NULL;
        }
        free_dead(b);
        while (b->ares_watches) {
                Watch *w = b->ares_watches;
                b->ares_watches = w->next;
                free(w);
        }
        ares_library_cleanup();
        safe_close(b->epoll_fd);
        safe_close(b->listen.fd);
        safe_close(b->signal.fd);
        safe_close(b->events.fd);
        broker_config_done(&b->cfg);
        free(b->host_addrs);
}

static void usage(FILE *f) {
        fputs("usage: lazaret-broker --listen-fd N --config-fd M --events-fd K\n"
              "       lazaret-broker --serve SOCKET --config FILE\n",
              f);
}

/* --serve: a broker of its own (a container of an egress pod, issue 23),
 * without a coordinator to hand it descriptors. The socket is made at
 * path (a stale socket there is replaced; anything else is refused), the
 * configuration read from file, and the events copied to standard output
 * one line each by this process while a child runs the broker; SIGTERM
 * and SIGINT are passed on. Returns the child's exit status, or 2. */
static volatile sig_atomic_t serve_child = 0;

static void serve_forward(int sig) {
        if (serve_child > 0)
                (void) kill((pid_t) serve_child, sig);
}

static int serve_main(const char *path, const char *file, char *argv0) {
        struct stat st;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                die_usage("--serve: the socket path is longer than %zu bytes", sizeof(sa.sun_path) - 1);
        if (path[0] != '/')
                die_usage("--serve: the socket path must be absolute");
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int config_fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (config_fd < 0)
                die_usage("--config %s: %s", file, strerror(errno));
        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode))
                        die_usage("--serve %s: exists and is not a socket; remove it or choose another path", path);
                (void) unlink(path);
        }
        int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        /* The relay's container may run as another user of the pod: the
         * socket's directory, the pod's own, is what guards it. */
        mode_t old = umask(0);
        int k = listen_fd < 0 ? -1 : bind(listen_fd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (k < 0 || listen(listen_fd, 128) < 0)
                die_usage("--serve %s: %s", path, strerror(errno));
        int p[2];
        pid_t pid = pipe2(p, O_CLOEXEC) < 0 ? -1 : fork();
        if (pid < 0) {
                int e = errno;
                (void) unlink(path);
                die_usage("cannot start the broker: %s", strerror(e));
        }
        if (pid == 0) {
                /* The broker, with the three descriptors it takes. */
                char a[3][16];
                snprintf(a[0], sizeof(a[0]), "%d", listen_fd);
                snprintf(a[1], sizeof(a[1]), "%d", config_fd);
                snprintf(a[2], sizeof(a[2]), "%d", p[1]);
                int keep[] = { listen_fd, config_fd, p[1] };
                for (size_t i = 0; i < ELEMENTSOF(keep); i++) {
                        int fl = fcntl(keep[i], F_GETFD);
                        (void) fcntl(keep[i], F_SETFD, fl & ~FD_CLOEXEC);
                }
                char *args[] = { argv0, (char *) "--listen-fd", a[0], (char *) "--config-fd",
                                 a[1],  (char *) "--events-fd", a[2], NULL };
                execv("/proc/self/exe", args);
                log_error("cannot run the broker: %s", strerror(errno));
                _exit(2);
        }
        serve_child = pid;
        safe_close(p[1]);
        safe_close(listen_fd);
        safe_close(config_fd);
        /* Standard output that nobody reads loses the decisions, not the
         * broker. */
        signal(SIGPIPE, SIG_IGN);
        struct sigaction sa_fwd = { .sa_handler = serve_forward };
        sigemptyset(&sa_fwd.sa_mask);
        (void) sigaction(SIGTERM, &sa_fwd, NULL);
        (void) sigaction(SIGINT, &sa_fwd, NULL);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        (void) sigprocmask(SIG_UNBLOCK, &mask, NULL);
        char buf[65536];
        for (;;) {
                ssize_t n = read(p[0], buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(STDOUT_FILENO, buf + off, (size_t) (n - off));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w <= 0)
                                break; /* nobody reads the events: they go */
                        off += w;
                }
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        (void) unlink(path);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
        log_set_program("lazaret-broker");
        /* SIGTERM and SIGINT come through the loop (a signalfd). */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "sigprocmask: %m"), 1;
        static const struct option opts[] = {
                { "listen-fd", required_argument, NULL, 'l' },
                { "config-fd", required_argument, NULL, 'c' },
                { "events-fd", required_argument, NULL, 'e' },
                { "serve", required_argument, NULL, 's' },
                { "config", required_argument, NULL, 'C' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int listen_fd = -1, config_fd = -1, events_fd = -1, c;
        const char *serve = NULL, *config_file = NULL;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0)
                switch (c) {
                case 'l':
                        listen_fd = parse_fd(optarg, "--listen-fd");
                        break;
                case 'c':
                        config_fd = parse_fd(optarg, "--config-fd");
                        break;
                case 'e':
                        events_fd = parse_fd(optarg, "--events-fd");
                        break;
                case 's':
                        serve = optarg;
                        break;
                case 'C':
                        config_file = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        if (optind < argc)
                die_usage("unexpected argument \"%s\"", argv[optind]);
        if (serve || config_file) {
                if (!serve || !config_file || listen_fd >= 0 || config_fd >= 0 || events_fd >= 0)
                        die_usage("--serve SOCKET and --config FILE go together, without the descriptors");
                return serve_main(serve, config_file, argv[0]);
        }
        if (listen_fd < 0 || config_fd < 0 || events_fd < 0)
                die_usage("--listen-fd, --config-fd and --events-fd are all required");
        if (listen_fd == config_fd || listen_fd == events_fd || config_fd == events_fd)
                die_usage("--listen-fd, --config-fd and --events-fd must be three different descriptors");

        /* The coordinator's death ends us, whichever way we hear of it. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
                die_usage("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));

        static Broker broker = {
                .epoll_fd = -EBADF,
                .listen = { .kind = WATCH_LISTEN, .fd = -EBADF },
                .events = { .kind = WATCH_EVENTS, .fd = -EBADF },
                .signal = { .kind = WATCH_SIGNAL, .fd = -EBADF },
                .next_deadline = USEC_INFINITY,
                .log_tokens = LOG_BURST,
        };
        Broker *b = &broker;
        b->log_tokens_at = now_usec();

        check_listen_fd(listen_fd);
        check_events_fd(events_fd);
        size_t cfg_len;
        _cleanup_free_ char *cfg = read_config(config_fd, &cfg_len);
        char error[512] = "";
        int r = broker_config_parse(cfg, cfg_len, &b->cfg, error, sizeof(error));
        if (r < 0)
                die_usage("configuration: %s", error[0] ? error : strerror(-r));
        safe_close(config_fd);
        b->listen.fd = listen_fd;
        b->events.fd = events_fd;

        signal(SIGPIPE, SIG_IGN);
        b->signal.fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        b->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (b->signal.fd < 0 || b->epoll_fd < 0)
                return log_error_errno(errno, "signalfd/epoll: %m"), 1;
        raise_nofile(b->cfg.max_connections);
        if (ares_setup(b) < 0)
                return 1;
        /* The events pipe is watched for POLLERR alone (reported always). */
        if (broker_watch(b, &b->listen, EPOLLIN) < 0 || broker_watch(b, &b->signal, EPOLLIN) < 0 ||
            broker_watch(b, &b->events, 0) < 0)
                return log_error_errno(errno, "epoll_ctl: %m"), 1;
        const NetAddr *ha;
        size_t nha;
        broker_host_addresses(b, &ha, &nha);

        log_info("serving %zu rules, at most %u connections%s", b->cfg.n_rules, b->cfg.max_connections,
                 b->cfg.check_server_name ? ", checking server names" : "");
        r = run(b);
        shutdown_all(b);
        return r < 0 ? 1 : 0;
}
