/* SPDX-License-Identifier: MIT */
/* A group in the background (issue 22): lazaret up --detach and --attach
 * NAME, lazaret attach, lazaret down.
 *
 * up checks everything, then forks a supervisor in a session of its own
 * that starts every agent on a terminal of its own (a pseudo-terminal: the
 * agent's `lazaret run` filters what the sandbox prints, as on the person's
 * own terminal) and listens on a socket in a directory of the private
 * runtime directory, one per manifest:
 *
 *   RUNTIME/up-<first 16 hex of SHA-256 of the manifest's canonical path>/
 *       lock      held by the supervisor while the group runs (one group
 *                 per manifest)
 *       sock      attach and down connect here (only our own uid)
 *       sock.key  the socket's key (ctl-key.h), made before it listens: a
 *                 client's first frame must carry it (issue 41)
 *       agents    "manifest PATH", then one agent name per line
 *       up.log    the supervisor's own messages
 *       NAME.log  what agent NAME's terminal showed (at most 16 MiB)
 *       up-report.md  the table, once all have ended
 *
 * Frames both ways: a type byte, a zero byte, a 16-bit big-endian length
 * and at most 4096 bytes. To the supervisor: k (the key, first and only
 * first; anything else first, or another key, drops the client), A
 * (attach NAME), D (down), i
 * (keys for the attached terminal), w (its size: rows, columns, 16-bit
 * each). From it: o (terminal output), x (the agent's exit status, 32-bit),
 * e (an error, text), r (the table, in pieces, then the end of the
 * connection). lazaret down removes the directory once the supervisor has
 * gone: nothing is left behind. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include <dirent.h>

#include "ctl-key.h"
#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "manifest.h"
#include "path-util.h"
#include "runtime-dir.h"
#include "strbuf.h"
#include "string-util.h"
#include "up.h"
#include "verbs.h"
#include "workspace-trust.h"

#define FRAME_MAX     4096u
#define CLIENTS_MAX   16u
#define SCROLLBACK    65536u
#define AGENT_LOG_MAX (16u << 20)
#define DETACH_KEY    0x1c /* Ctrl-\ */

enum {
        F_KEY = 'k',
        F_ATTACH = 'A',
        F_DOWN = 'D',
        F_INPUT = 'i',
        F_WINSIZE = 'w',
        F_OUTPUT = 'o',
        F_EXIT = 'x',
        F_ERROR = 'e',
        F_REPORT = 'r',
};

typedef struct GroupPaths {
        char *dir, *lock, *sock, *key, *agents, *log, *report;
} GroupPaths;

static void group_paths_done(GroupPaths *p) {
        free(p->dir);
        free(p->lock);
        free(p->sock);
        free(p->key);
        free(p->agents);
        free(p->log);
        free(p->report);
        *p = (GroupPaths){};
}

static int group_paths_in(const char *dir, GroupPaths *ret) {
        GroupPaths p = { .dir = strdup(dir),
                         .lock = path_join(dir, "lock"),
                         .sock = path_join(dir, "sock"),
                         .key = path_join(dir, "sock.key"),
                         .agents = path_join(dir, "agents"),
                         .log = path_join(dir, "up.log"),
                         .report = path_join(dir, "up-report.md") };
        if (!p.dir || !p.lock || !p.sock || !p.key || !p.agents || !p.log || !p.report) {
                group_paths_done(&p);
                return -ENOMEM;
        }
        if (strlen(p.sock) >= sizeof(((struct sockaddr_un *) NULL)->sun_path)) {
                log_error("the group's socket %s would be longer than a socket's name may be; set XDG_RUNTIME_DIR to "
                          "a shorter directory",
                          p.sock);
                group_paths_done(&p);
                return -ENAMETOOLONG;
        }
        *ret = p;
        return 0;
}

/* The runtime directory (made and verified), or NULL after saying why. */
static char *runtime_base(void) {
        RuntimePaths rp = {};
        _cleanup_free_ char *why = NULL;
        if (runtime_paths("up", &rp, &why) < 0) {
                log_error("%s", why ? why : "cannot make the runtime directory");
                return NULL;
        }
        char *dir = TAKE_PTR(rp.dir);
        runtime_paths_done(&rp);
        return dir;
}

static int group_paths(const char *canonical, GroupPaths *ret) {
        char sha[WSTRUST_SHA256_HEX_LEN + 1];
        _cleanup_free_ char *base = runtime_base(), *dir = NULL;
        if (!base || wstrust_sha256_hex(canonical, strlen(canonical), sha) < 0)
                return -EIO;
        sha[16] = '\0';
        if (asprintf(&dir, "%s/up-%s", base, sha) < 0)
                return -ENOMEM;
        return group_paths_in(dir, ret);
}

/* Every file of a group's directory, then the directory. */
static void group_remove(const GroupPaths *p) {
        DIR *d = opendir(p->dir);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        (void) rmdir(p->dir);
}

/* Frames. */
static int frame_send(int fd, char type, const void *data, size_t n, int flags) {
        uint8_t buf[4 + FRAME_MAX];
        if (n > FRAME_MAX)
                return -EMSGSIZE;
        buf[0] = (uint8_t) type;
        buf[1] = 0;
        buf[2] = (uint8_t) (n >> 8);
        buf[3] = (uint8_t) n;
        if (n)
                memcpy(buf + 4, data, n);
        size_t off = 0;
        while (off < 4 + n) {
                ssize_t k = send(fd, buf + off, 4 + n - off, MSG_NOSIGNAL | flags);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (flags && (size_t) k != 4 + n)
                        return -EAGAIN; /* a reader too slow: dropped, never waited for */
                off += (size_t) k;
        }
        return 0;
}

static int read_full(int fd, void *buf, size_t n) {
        size_t off = 0;
        while (off < n) {
                ssize_t k = read(fd, (uint8_t *) buf + off, n - off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return off == 0 ? 0 : -EPROTO;
                off += (size_t) k;
        }
        return 1;
}

/* One frame, blocking: 1, 0 at a clean end, or -errno. */
static int frame_recv(int fd, char *type, uint8_t *data, size_t *n) {
        uint8_t h[4];
        int r = read_full(fd, h, 4);
        if (r <= 0)
                return r;
        *type = (char) h[0];
        *n = (size_t) h[2] << 8 | h[3];
        if (h[1] != 0 || *n > FRAME_MAX)
                return -EPROTO;
        r = read_full(fd, data, *n);
        return *n == 0 ? 1 : r == 0 ? -EPROTO : r;
}

/* The supervisor. */

typedef struct Term {
        int master;
        int log;
        uint64_t logged;
        uint8_t ring[SCROLLBACK];
        size_t ring_len, ring_head; /* ring_head: where the next byte goes */
} Term;

typedef struct Client {
        int fd;
        pid_t pid; /* SO_PEERCRED at accept, for the log */
        bool authed; /* its first frame carried the key */
        int agent; /* attached to, or -1 */
        bool down;
        uint8_t in[4 + FRAME_MAX];
        size_t in_len;
} Client;

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) {
        stop_signal = sig;
}

static void client_drop(Client *c) {
        c->fd = safe_close(c->fd);
        c->authed = false;
        c->agent = -1;
        c->down = false;
        c->in_len = 0;
}

static void ring_add(Term *t, const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                t->ring[t->ring_head] = p[i];
                t->ring_head = (t->ring_head + 1) % SCROLLBACK;
        }
        t->ring_len = t->ring_len + n > SCROLLBACK ? SCROLLBACK : t->ring_len + n;
}

/* What the terminal showed lately, to a client that attaches. */
static int ring_send(const Term *t, int fd) {
        size_t start = (t->ring_head + SCROLLBACK - t->ring_len) % SCROLLBACK, left = t->ring_len;
        uint8_t chunk[FRAME_MAX];
        while (left > 0) {
                size_t n = left < FRAME_MAX ? left : FRAME_MAX;
                for (size_t i = 0; i < n; i++)
                        chunk[i] = t->ring[(start + i) % SCROLLBACK];
                int r = frame_send(fd, F_OUTPUT, chunk, n, 0);
                if (r < 0)
                        return r;
                start = (start + n) % SCROLLBACK;
                left -= n;
        }
        return 0;
}

/* Read what the agent's terminal shows: to its log, its scrollback and
 * every client attached. false when the terminal is gone. */
static bool term_pump(Term *t, Client *clients, int index) {
        uint8_t buf[FRAME_MAX];
        ssize_t k = read(t->master, buf, sizeof(buf));
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
                return true;
        if (k <= 0) /* EIO: no process holds the terminal any more */
                return false;
        ring_add(t, buf, (size_t) k);
        if (t->log >= 0 && t->logged + (uint64_t) k <= AGENT_LOG_MAX) {
                (void) loop_write(t->log, buf, (size_t) k);
                t->logged += (uint64_t) k;
        }
        for (size_t c = 0; c < CLIENTS_MAX; c++)
                if (clients[c].fd >= 0 && clients[c].agent == index &&
                    frame_send(clients[c].fd, F_OUTPUT, buf, (size_t) k, MSG_DONTWAIT) < 0)
                        client_drop(&clients[c]);
        return true;
}

static void term_close(Term *t, Client *clients, int index, int status) {
        if (t->master >= 0)
                while (term_pump(t, clients, index)) {
                        struct pollfd pf = { .fd = t->master, .events = POLLIN };
                        if (poll(&pf, 1, 0) <= 0)
                                break;
                }
        t->master = safe_close(t->master);
        t->log = safe_close(t->log);
        int32_t st = status;
        uint8_t b[4] = { (uint8_t) (st >> 24), (uint8_t) (st >> 16), (uint8_t) (st >> 8), (uint8_t) st };
        for (size_t c = 0; c < CLIENTS_MAX; c++)
                if (clients[c].fd >= 0 && clients[c].agent == index) {
                        (void) frame_send(clients[c].fd, F_EXIT, b, sizeof(b), MSG_DONTWAIT);
                        client_drop(&clients[c]);
                }
}

static int open_pty(int *ret_master, int *ret_slave) {
        _cleanup_close_ int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        char name[64];
        if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 || ptsname_r(master, name, sizeof(name)) != 0)
                return -errno;
        int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return -errno;
        struct winsize ws = { .ws_row = 24, .ws_col = 80 };
        (void) ioctl(master, TIOCSWINSZ, &ws);
        if (fcntl(master, F_SETFL, O_NONBLOCK) < 0) {
                safe_close(slave);
                return -errno;
        }
        *ret_master = TAKE_FD(master);
        *ret_slave = slave;
        return 0;
}

/* One frame from a client, in its buffer. */
static void client_frame(Client *c, const char *key, UpAgent *run, Term *terms, size_t n, bool *stopping) {
        char type = (char) c->in[0];
        size_t len = (size_t) c->in[2] << 8 | c->in[3];
        const uint8_t *p = c->in + 4;
        if (!c->authed) {
                /* The uid alone lets in any process of the user: only the
                 * person's CLI reads the key (issue 41). */
                char given[CTL_KEY_TEXT + 1] = "";
                if (type == F_KEY && len == CTL_KEY_TEXT)
                        memcpy(given, p, len);
                if (!ctl_key_equal(key, given)) {
                        log_warning("refused a connection from pid %d: its first frame did not carry the group "
                                    "socket's key",
                                    (int) c->pid);
                        client_drop(c);
                        return;
                }
                c->authed = true;
                return;
        }
        switch (type) {
        case F_ATTACH: {
                char name[64];
                snprintf(name, sizeof(name), "%.*s", (int) (len < 63 ? len : 63), (const char *) p);
                for (size_t k = 0; k < n; k++)
                        if (streq(run[k].agent->name, name)) {
                                if (run[k].status >= 0 || terms[k].master < 0) {
                                        char msg[160];
                                        snprintf(msg, sizeof(msg), "agent %s has ended (exit %d)", name, run[k].status);
                                        (void) frame_send(c->fd, F_ERROR, msg, strlen(msg), 0);
                                        client_drop(c);
                                        return;
                                }
                                c->agent = (int) k;
                                if (ring_send(&terms[k], c->fd) < 0)
                                        client_drop(c);
                                return;
                        }
                char msg[160];
                snprintf(msg, sizeof(msg), "the group has no agent %s", name);
                (void) frame_send(c->fd, F_ERROR, msg, strlen(msg), 0);
                client_drop(c);
                return;
        }
        case F_DOWN:
                c->down = true;
                *stopping = true;
                return;
        case F_INPUT:
                /* Keys: dropped when the agent reads none (never blocks the group). */
                if (c->agent >= 0 && terms[c->agent].master >= 0)
                        if (write(terms[c->agent].master, p, len) < 0)
                                log_debug("keys for agent %d dropped: %s", c->agent, strerror(errno));
                return;
        case F_WINSIZE:
                if (c->agent >= 0 && terms[c->agent].master >= 0 && len == 4) {
                        struct winsize ws = { .ws_row = (unsigned short) (p[0] << 8 | p[1]),
                                              .ws_col = (unsigned short) (p[2] << 8 | p[3]) };
                        if (ws.ws_row > 0 && ws.ws_col > 0)
                                (void) ioctl(terms[c->agent].master, TIOCSWINSZ, &ws);
                }
                return;
        case F_KEY: /* only first */
        default:
                client_drop(c);
        }
}

static void client_read(Client *c, const char *key, UpAgent *run, Term *terms, size_t n, bool *stopping) {
        ssize_t k = read(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (k <= 0) {
                /* A down client that goes away still ended the group. */
                client_drop(c);
                return;
        }
        c->in_len += (size_t) k;
        while (c->fd >= 0 && c->in_len >= 4) {
                size_t len = (size_t) c->in[2] << 8 | c->in[3];
                if (c->in[1] != 0 || len > FRAME_MAX) {
                        client_drop(c);
                        return;
                }
                if (c->in_len < 4 + len)
                        return;
                client_frame(c, key, run, terms, n, stopping);
                if (c->fd < 0)
                        return;
                memmove(c->in, c->in + 4 + len, c->in_len - 4 - len);
                c->in_len -= 4 + len;
        }
}

static void client_accept(int listen_fd, Client *clients) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
                return;
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != geteuid()) {
                safe_close(fd);
                return;
        }
        for (size_t c = 0; c < CLIENTS_MAX; c++)
                if (clients[c].fd < 0) {
                        clients[c] = (Client){ .fd = fd, .pid = cred.pid, .agent = -1 };
                        return;
                }
        (void) frame_send(fd, F_ERROR, "too many clients attached", 25, MSG_DONTWAIT);
        safe_close(fd);
}

/* Tell up in the foreground how the start went: "ok MS" or "fail NAME". */
static void notify(int *fd, const char *line) {
        if (*fd < 0)
                return;
        (void) loop_write(*fd, line, strlen(line));
        *fd = safe_close(*fd);
}

static void notify_fail(int *fd, const char *what) {
        char line[128];
        snprintf(line, sizeof(line), "fail %s\n", what);
        notify(fd, line);
}

static int supervise(const Globals *g, const char *self, const Manifest *m, const char *report_dir,
                     const GroupPaths *gp, const char *key, int listen_fd, int notify_fd, uint64_t up_started) {
        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGHUP, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        size_t n = m->n_agents;
        UpAgent *run = calloc(n, sizeof(UpAgent));
        Term *terms = calloc(n, sizeof(Term));
        Client clients[CLIENTS_MAX];
        for (size_t c = 0; c < CLIENTS_MAX; c++)
                clients[c] = (Client){ .fd = -EBADF, .agent = -1 };
        if (!run || !terms) {
                notify_fail(&notify_fd, "(out of memory)");
                return EXIT_LAZARET;
        }
        size_t started = 0, n_ready = 0, left;
        const char *failed = NULL;
        for (size_t i = 0; i < n; i++) {
                run[i].agent = &m->agents[i];
                run[i].out.fd = run[i].err.fd = run[i].ready_fd = terms[i].master = terms[i].log = -EBADF;
                int slave = -EBADF, r;
                _cleanup_free_ char *logp = NULL;
                if (asprintf(&logp, "%s/%s.log", gp->dir, m->agents[i].name) < 0)
                        logp = NULL;
                terms[i].log = logp ? open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
                r = open_pty(&terms[i].master, &slave);
                if (r >= 0)
                        r = up_start_agent(g, self, &run[i], slave);
                safe_close(slave);
                if (r < 0) {
                        if (r != -ESTALE) /* up_start_agent said why */
                                log_error("cannot start agent %s: %s", m->agents[i].name, strerror(-r));
                        terms[i].master = safe_close(terms[i].master);
                        terms[i].log = safe_close(terms[i].log);
                        failed = m->agents[i].name;
                        break;
                }
                started++;
        }
        left = started;
        bool stopping = false, forwarded = false;
        while (left > 0) {
                if (stop_signal)
                        stopping = true;
                if ((stopping || failed) && !forwarded) {
                        for (size_t k = 0; k < started; k++)
                                if (run[k].status < 0)
                                        (void) kill(run[k].pid, SIGTERM);
                        forwarded = true;
                }
                struct pollfd pf[1 + CLIENTS_MAX + 2 * MANIFEST_AGENTS_MAX];
                size_t np = 0;
                pf[np++] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
                for (size_t c = 0; c < CLIENTS_MAX; c++)
                        pf[np++] = (struct pollfd){ .fd = clients[c].fd, .events = POLLIN };
                for (size_t k = 0; k < started; k++) {
                        pf[np++] = (struct pollfd){ .fd = terms[k].master, .events = POLLIN };
                        pf[np++] = (struct pollfd){ .fd = run[k].ready_fd, .events = POLLIN };
                }
                int r = poll(pf, np, 200);
                if (r < 0 && errno != EINTR)
                        break;
                if (r > 0) {
                        if (pf[0].revents)
                                client_accept(listen_fd, clients);
                        for (size_t c = 0; c < CLIENTS_MAX; c++)
                                if (pf[1 + c].revents && clients[c].fd >= 0)
                                        client_read(&clients[c], key, run, terms, started, &stopping);
                        for (size_t k = 0; k < started; k++) {
                                struct pollfd *t = &pf[1 + CLIENTS_MAX + 2 * k];
                                if (t[0].revents && terms[k].master >= 0 && !term_pump(&terms[k], clients, (int) k))
                                        terms[k].master = safe_close(terms[k].master);
                                if (!t[1].revents)
                                        continue;
                                char ch;
                                ssize_t got = read(run[k].ready_fd, &ch, 1);
                                if (got < 0 && (errno == EINTR || errno == EAGAIN))
                                        continue;
                                run[k].ready = got == 1;
                                run[k].ready_fd = safe_close(run[k].ready_fd);
                                if (run[k].ready && ++n_ready == n) {
                                        char line[64];
                                        snprintf(line, sizeof(line), "ok %.0f\n",
                                                 (double) (now_usec() - up_started) / 1000);
                                        notify(&notify_fd, line);
                                }
                                if (!run[k].ready && !failed && !stopping)
                                        failed = run[k].agent->name;
                        }
                }
                for (size_t k = 0; k < started; k++) {
                        int st;
                        if (run[k].status >= 0 || waitpid(run[k].pid, &st, WNOHANG) != run[k].pid)
                                continue;
                        run[k].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                        run[k].ended = now_usec();
                        run[k].ready_fd = safe_close(run[k].ready_fd);
                        term_close(&terms[k], clients, (int) k, run[k].status);
                        log_info("agent %s exited with %d", run[k].agent->name, run[k].status);
                        left--;
                }
        }
        int ret = 0;
        if (failed) {
                notify_fail(&notify_fd, failed);
                ret = EXIT_LAZARET;
        } else {
                /* The comparison: for down, the group's directory and --report. */
                _cleanup_free_ char *md = up_compare(g, self, m, run, started, report_dir, &ret, NULL);
                if (md && write_file_atomic(gp->report, md, strlen(md), 0600, 0) < 0)
                        log_error("cannot write %s", gp->report);
                for (size_t c = 0; c < CLIENTS_MAX; c++) {
                        if (clients[c].fd < 0 || !clients[c].down)
                                continue;
                        int fl = fcntl(clients[c].fd, F_GETFL);
                        (void) fcntl(clients[c].fd, F_SETFL, fl & ~O_NONBLOCK);
                        for (size_t off = 0; md && off < strlen(md); off += FRAME_MAX)
                                if (frame_send(clients[c].fd, F_REPORT, md + off,
                                               strlen(md) - off < FRAME_MAX ? strlen(md) - off : FRAME_MAX, 0) < 0)
                                        break;
                }
                notify_fail(&notify_fd, "(the group ended before all its agents started)");
        }
        (void) unlink(gp->sock);
        (void) unlink(gp->key);
        for (size_t c = 0; c < CLIENTS_MAX; c++)
                safe_close(clients[c].fd);
        free(terms);
        free(run);
        return ret;
}

/* The client side. */

/* Connect to the group's socket and show its key, or -errno; -ENOKEY
 * after saying why the key cannot be read. */
static int group_connect(const GroupPaths *gp) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", gp->sock);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        char key[CTL_KEY_TEXT + 1];
        int r = ctl_key_read(gp->key, key);
        if (r < 0) {
                if (r == -EACCES)
                        log_error("cannot read the group socket's key %s: permission denied (this process is "
                                  "confined, or runs as another user); run lazaret as yourself outside every sandbox",
                                  gp->key);
                else
                        log_error("the group socket's key %s %s, so the group cannot be reached; end its "
                                  "supervisor (the process holding %s), then 'lazaret down MANIFEST' removes the rest",
                                  gp->key,
                                  r == -ENOENT    ? "is missing (a group started by an earlier lazaret has none)"
                                  : r == -EPERM   ? "is not a private file of yours (mode 0600)"
                                  : r == -EBADMSG ? "holds no key"
                                                  : strerror(-r),
                                  gp->lock);
                return -ENOKEY;
        }
        r = frame_send(fd, F_KEY, key, CTL_KEY_TEXT, 0);
        OPENSSL_cleanse(key, sizeof(key));
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

static volatile sig_atomic_t winched;

static void on_winch(int sig) {
        (void) sig;
        winched = 1;
}

static void send_winsize(int fd) {
        struct winsize ws;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0)
                return;
        uint8_t b[4] = { (uint8_t) (ws.ws_row >> 8), (uint8_t) ws.ws_row, (uint8_t) (ws.ws_col >> 8),
                         (uint8_t) ws.ws_col };
        (void) frame_send(fd, F_WINSIZE, b, sizeof(b), 0);
}

/* Attach this terminal to agent name of the group at sock until the agent
 * ends or Ctrl-\. Returns the exit status: the agent's when it ended, 0
 * when detached. */
static int attach_to(const GroupPaths *gp, const char *name, const char *manifest) {
        _cleanup_close_ int fd = group_connect(gp);
        if (fd == -ENOKEY)
                return EXIT_LAZARET;
        if (fd < 0) {
                log_error("cannot reach the group of %s: %s", manifest, strerror(-fd));
                return EXIT_LAZARET;
        }
        if (frame_send(fd, F_ATTACH, name, strlen(name), 0) < 0) {
                log_error("cannot reach the group of %s", manifest);
                return EXIT_LAZARET;
        }
        bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
        struct termios saved;
        if (tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
                struct termios raw = saved;
                cfmakeraw(&raw);
                (void) tcsetattr(STDIN_FILENO, TCSANOW, &raw);
                struct sigaction sa = { .sa_handler = on_winch };
                sigaction(SIGWINCH, &sa, NULL);
                send_winsize(fd);
        } else
                tty = false;
        if (tty)
                fprintf(stderr, "[attached to %s; Ctrl-\\ detaches]\r\n", name);
        bool in_open = true, detached = false;
        int status = -1;
        const char *gone = NULL;
        char errmsg[FRAME_MAX + 1] = "";
        while (!detached && status < 0 && !gone && !*errmsg) {
                if (winched) {
                        winched = 0;
                        send_winsize(fd);
                }
                struct pollfd pf[2] = { { .fd = fd, .events = POLLIN },
                                        { .fd = in_open ? STDIN_FILENO : -1, .events = POLLIN } };
                if (poll(pf, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pf[1].revents) {
                        uint8_t buf[FRAME_MAX];
                        ssize_t k = read(STDIN_FILENO, buf, sizeof(buf));
                        if (k <= 0 && !(k < 0 && errno == EINTR))
                                in_open = false;
                        if (k > 0) {
                                uint8_t *key = tty ? memchr(buf, DETACH_KEY, (size_t) k) : NULL;
                                size_t send_n = key ? (size_t) (key - buf) : (size_t) k;
                                if (send_n > 0)
                                        (void) frame_send(fd, F_INPUT, buf, send_n, 0);
                                detached = key != NULL;
                        }
                }
                if (pf[0].revents) {
                        char type;
                        uint8_t data[FRAME_MAX + 1];
                        size_t n = 0;
                        int r = frame_recv(fd, &type, data, &n);
                        if (r <= 0)
                                gone = "the group ended";
                        else if (type == F_OUTPUT)
                                (void) loop_write(STDOUT_FILENO, data, n);
                        else if (type == F_EXIT && n == 4)
                                status = (int) ((uint32_t) data[0] << 24 | (uint32_t) data[1] << 16 |
                                                (uint32_t) data[2] << 8 | data[3]);
                        else if (type == F_ERROR)
                                snprintf(errmsg, sizeof(errmsg), "%.*s", (int) n, (const char *) data);
                        else
                                gone = "the group spoke out of turn";
                }
        }
        if (tty) {
                /* What the agent's program may have left on: the alternate
                 * screen, a hidden cursor, mouse reports, bracketed paste. */
                static const char undo[] = "\033[?1049l\033[?25h\033[?1l\033>\033[?2004l\033[?1000l\033[?1002l"
                                           "\033[?1003l\033[?1006l\033[?1004l\033[0m";
                (void) loop_write(STDOUT_FILENO, undo, sizeof(undo) - 1);
                (void) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        }
        if (*errmsg) {
                log_error("%s (%s)", errmsg, manifest);
                return EXIT_PROBLEMS;
        }
        if (detached) {
                fprintf(stderr, "\r\n[detached from %s; it runs on: lazaret attach %s, lazaret down %s]\n", name, name,
                        manifest);
                return 0;
        }
        if (status >= 0) {
                fprintf(stderr, "%s[agent %s exited with %d]\n", tty ? "\r\n" : "", name, status);
                return status;
        }
        log_error("%s before agent %s did", gone ? gone : "the connection broke", name);
        return EXIT_LAZARET;
}

/* The tail of an agent's log, inert: why its start failed. */
static void show_log_tail(const GroupPaths *gp, const char *name) {
        _cleanup_free_ char *p = NULL, *data = NULL;
        size_t n = 0;
        if (asprintf(&p, "%s/%s.log", gp->dir, name) < 0 || read_file_capped(p, AGENT_LOG_MAX, &data, &n) < 0)
                return;
        size_t from = n > 2048 ? n - 2048 : 0;
        up_print_inert(stderr, name, data + from, n - from);
}

int up_group(const Globals *g, const char *self, const Manifest *m, const char *report_dir, const char *attach,
             uint64_t started) {
        _cleanup_(group_paths_done) GroupPaths gp = {};
        if (group_paths(m->canonical, &gp) < 0)
                return EXIT_LAZARET;
        const char *why = NULL;
        if (private_dir(gp.dir, &why) < 0) {
                log_error("the group's directory %s: %s", gp.dir, why ? why : "cannot be made");
                return EXIT_LAZARET;
        }
        _cleanup_close_ int lock = open(gp.lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock < 0) {
                log_error("cannot open %s: %s", gp.lock, strerror(errno));
                return EXIT_LAZARET;
        }
        if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
                log_error("%s is already up: lazaret attach NAME to see an agent, lazaret down %s to end it", m->path,
                          m->path);
                return EXIT_PROBLEMS;
        }
        /* What an earlier group of this manifest left (its report and
         * logs, when down never came): replaced. */
        (void) unlink(gp.sock);
        (void) unlink(gp.report);
        StrBuf ab = STRBUF_INIT;
        strbuf_printf(&ab, "manifest %s\n", m->canonical);
        for (size_t i = 0; i < m->n_agents; i++)
                strbuf_printf(&ab, "%s\n", m->agents[i].name);
        int r = ab.oom ? -ENOMEM : write_file_atomic(gp.agents, strbuf_str(&ab), ab.len, 0600, 0);
        strbuf_done(&ab);
        /* The key before the socket: a client that can connect can read it. */
        char key[CTL_KEY_TEXT + 1] = "";
        if (r >= 0)
                r = ctl_key_create(gp.key, key);
        _cleanup_close_ int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", gp.sock);
        if (r < 0 || listen_fd < 0 || bind(listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            chmod(gp.sock, 0600) < 0 || listen(listen_fd, 16) < 0) {
                log_error("cannot make the group's socket %s: %s", gp.sock, strerror(r < 0 ? -r : errno));
                group_remove(&gp);
                return EXIT_LAZARET;
        }
        int pipe_fd[2];
        if (pipe2(pipe_fd, O_CLOEXEC) < 0) {
                group_remove(&gp);
                return EXIT_LAZARET;
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                log_error("cannot start the group: %s", strerror(errno));
                safe_close(pipe_fd[0]);
                safe_close(pipe_fd[1]);
                group_remove(&gp);
                return EXIT_LAZARET;
        }
        if (pid == 0) {
                /* The supervisor: a session of its own, its messages in
                 * up.log; it holds the lock until the group has ended. */
                safe_close(pipe_fd[0]);
                (void) setsid();
                int null = open("/dev/null", O_RDWR | O_CLOEXEC),
                    logfd = open(gp.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (null < 0 || logfd < 0 || dup2(null, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
                        _exit(EXIT_LAZARET);
                safe_close(null);
                safe_close(logfd);
                _exit(supervise(g, self, m, report_dir, &gp, key, listen_fd, pipe_fd[1], started));
        }
        safe_close(pipe_fd[1]);
        listen_fd = safe_close(listen_fd);
        lock = safe_close(lock); /* the supervisor's copy holds it */
        char line[256] = "";
        size_t got = 0;
        /* Interrupted while the agents start: the group is ended, not left
         * behind in the background. */
        struct sigaction stop = { .sa_handler = on_signal };
        sigaction(SIGINT, &stop, NULL);
        sigaction(SIGTERM, &stop, NULL);
        sigaction(SIGHUP, &stop, NULL);
        for (;;) {
                ssize_t k = read(pipe_fd[0], line + got, sizeof(line) - 1 - got);
                if (k < 0 && errno == EINTR) {
                        if (stop_signal)
                                (void) kill(pid, SIGTERM);
                        continue;
                }
                if (k <= 0)
                        break;
                got += (size_t) k;
        }
        safe_close(pipe_fd[0]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        line[got] = '\0';
        if (stop_signal) {
                (void) kill(pid, SIGTERM);
                (void) waitpid(pid, NULL, 0);
                group_remove(&gp);
                log_error("interrupted: every agent of the group was ended");
                return 128 + stop_signal;
        }
        if (startswith(line, "ok ")) {
                fprintf(stderr, "lazaret: %s%zu agent%s started in %ld ms\n", m->n_agents > 1 ? "all " : "",
                        m->n_agents, m->n_agents > 1 ? "s" : "", strtol(line + 3, NULL, 10));
                if (!attach) {
                        fprintf(stderr,
                                "lazaret: they run on in the background: lazaret attach NAME shows one (Ctrl-\\ "
                                "detaches), lazaret down %s ends them all\n",
                                m->path);
                        return 0;
                }
                return attach_to(&gp, attach, m->path);
        }
        /* The start failed: the supervisor ended the others and is gone
         * (its pipe closed at its end). */
        char *nl = strchr(line, '\n');
        if (nl)
                *nl = '\0';
        const char *name = startswith(line, "fail ") ? line + 5 : NULL;
        bool an_agent = false;
        for (size_t i = 0; name && i < m->n_agents; i++)
                an_agent = an_agent || streq(m->agents[i].name, name);
        if (an_agent) {
                show_log_tail(&gp, name);
                log_error("agent %s did not start (its lines above say why): the other agents were ended", name);
        } else
                log_error("the group did not start: %s; its log: %s", name ? name : "its supervisor ended", gp.log);
        (void) waitpid(pid, NULL, 0);
        group_remove(&gp);
        return EXIT_LAZARET;
}

/* lazaret attach [--manifest FILE] NAME: the group by its manifest, or the
 * one group that has an agent NAME. */
static int find_group(const char *manifest, const char *name, GroupPaths *ret, char **ret_manifest) {
        if (manifest) {
                _cleanup_free_ char *canonical = NULL;
                if (manifest_canonical(manifest, &canonical) < 0) {
                        log_error("--manifest %s: cannot resolve it", manifest);
                        return EXIT_USAGE;
                }
                if (group_paths(canonical, ret) < 0)
                        return EXIT_LAZARET;
                *ret_manifest = strdup(manifest);
                return *ret_manifest ? 0 : EXIT_LAZARET;
        }
        _cleanup_free_ char *base = runtime_base();
        if (!base)
                return EXIT_LAZARET;
        DIR *d = opendir(base);
        if (!d) {
                log_error("no group is up (%s): %s", base, strerror(errno));
                return EXIT_PROBLEMS;
        }
        size_t found = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!startswith(de->d_name, "up-"))
                        continue;
                _cleanup_free_ char *dir = path_join(base, de->d_name), *agents = NULL, *data = NULL;
                size_t len = 0;
                if (!dir || !(agents = path_join(dir, "agents")) ||
                    read_file_capped(agents, 64 * 1024, &data, &len) < 0 || !startswith(data, "manifest "))
                        continue;
                char *nl = strchr(data, '\n');
                if (!nl)
                        continue;
                *nl = '\0';
                bool has = false;
                for (char *l = nl + 1, *e; *l; l = e + 1) {
                        e = strchr(l, '\n');
                        if (!e)
                                break;
                        *e = '\0';
                        has = has || streq(l, name);
                }
                /* Only a group that runs: one that ended keeps its
                 * directory (its report) until down, but no socket. */
                _cleanup_free_ char *sock = path_join(dir, "sock");
                if (!has || !sock || access(sock, F_OK) < 0)
                        continue;
                if (found++ == 0) {
                        if (group_paths_in(dir, ret) < 0 || !(*ret_manifest = strdup(data + 9))) {
                                closedir(d);
                                return EXIT_LAZARET;
                        }
                }
        }
        closedir(d);
        if (found == 1)
                return 0;
        if (found == 0)
                log_error("no group that is up has an agent %s (lazaret up --detach MANIFEST starts one)", name);
        else
                log_error("more than one group has an agent %s: name its manifest with --manifest FILE", name);
        group_paths_done(ret);
        *ret_manifest = mfree(*ret_manifest);
        return EXIT_PROBLEMS;
}

int verb_attach(int argc, char **argv, const Globals *g) {
        const char *manifest = NULL, *name = NULL;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
                        printf("Usage: lazaret attach [--manifest FILE] NAME\n\n"
                               "Show agent NAME's terminal, of a group started by lazaret up --detach (or\n"
                               "--attach): what it showed lately, then live; your keys go to it. Ctrl-\\\n"
                               "detaches and leaves it running. Exit: the agent's own status when it ends\n"
                               "while attached, 0 when detached.\n");
                        return 0;
                }
                if (streq(argv[i], "--manifest") && i + 1 < argc)
                        manifest = argv[++i];
                else if (argv[i][0] != '-' && !name)
                        name = argv[i];
                else {
                        name = NULL;
                        break;
                }
        }
        if (!name || g->agent || g->workspace) {
                log_error("usage: lazaret attach [--manifest FILE] NAME (the manifest names each agent's workspace)");
                return EXIT_USAGE;
        }
        _cleanup_(group_paths_done) GroupPaths gp = {};
        _cleanup_free_ char *mpath = NULL;
        int r = find_group(manifest, name, &gp, &mpath);
        if (r != 0)
                return r;
        if (access(gp.sock, F_OK) < 0) {
                log_error("the group of %s is not running (lazaret down %s shows how it ended)", mpath, mpath);
                return EXIT_PROBLEMS;
        }
        signal(SIGPIPE, SIG_IGN);
        return attach_to(&gp, name, mpath);
}

int verb_down(int argc, char **argv, const Globals *g) {
        if (argc == 2 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
                printf("Usage: lazaret down MANIFEST\n\n"
                       "End every agent of the group lazaret up --detach started from MANIFEST, wait\n"
                       "until each sandbox is gone, print the table that compares them, and remove\n"
                       "the group's directory: nothing is left behind. A group that already ended by\n"
                       "itself: its table, then the same cleanup.\n");
                return 0;
        }
        if (argc != 2 || argv[1][0] == '-' || g->agent || g->workspace) {
                log_error("usage: lazaret down MANIFEST");
                return EXIT_USAGE;
        }
        _cleanup_free_ char *canonical = NULL;
        if (manifest_canonical(argv[1], &canonical) < 0) {
                log_error("%s: cannot resolve it", argv[1]);
                return EXIT_USAGE;
        }
        _cleanup_(group_paths_done) GroupPaths gp = {};
        if (group_paths(canonical, &gp) < 0)
                return EXIT_LAZARET;
        struct stat st;
        if (lstat(gp.dir, &st) < 0) {
                log_error("%s is not up: nothing to end", argv[1]);
                return EXIT_PROBLEMS;
        }
        signal(SIGPIPE, SIG_IGN);
        StrBuf report = STRBUF_INIT;
        _cleanup_close_ int fd = group_connect(&gp);
        if (fd == -ENOKEY)
                return EXIT_LAZARET;
        if (fd >= 0 && frame_send(fd, F_DOWN, NULL, 0, 0) == 0) {
                fprintf(stderr, "lazaret: ending every agent of %s\n", argv[1]);
                char type;
                uint8_t data[FRAME_MAX];
                size_t n;
                while (frame_recv(fd, &type, data, &n) > 0)
                        if (type == F_REPORT)
                                strbuf_printf(&report, "%.*s", (int) n, (const char *) data);
        }
        /* The supervisor ends once every agent has: its lock says when. */
        _cleanup_close_ int lock = open(gp.lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        bool free_now = lock < 0;
        for (int i = 0; !free_now && i < 1200; i++) {
                free_now = flock(lock, LOCK_EX | LOCK_NB) == 0;
                if (!free_now)
                        (void) usleep(50 * 1000);
        }
        if (!free_now) {
                strbuf_done(&report);
                log_error("the group of %s did not end within a minute; see %s", argv[1], gp.log);
                return EXIT_LAZARET;
        }
        if (report.len == 0) {
                _cleanup_free_ char *saved = NULL;
                size_t n = 0;
                if (read_file_capped(gp.report, 1 << 20, &saved, &n) == 0) {
                        fprintf(stderr, "lazaret: the group had ended by itself\n");
                        strbuf_puts(&report, saved);
                }
        }
        if (report.len > 0)
                fputs(strbuf_str(&report), stdout);
        strbuf_done(&report);
        group_remove(&gp);
        return 0;
}
