/* SPDX-License-Identifier: MIT */
/* One client connection of lazaret-broker, in order (issue 18):
 *
 *   REQUEST      read "CONNECT host port via\n" (BROKER_REQUEST_MAX bytes,
 *                BROKER_REQUEST_TIMEOUT_SEC); an IP literal must be one the
 *                policy permits, a name must be canonical and listed
 *   RESOLVING    one lookup (A, and AAAA when the policy's IPv6 family is
 *                enabled); the whole answer set is refused when any address
 *                is (egress-addr.h)
 *   CONNECTING   to the validated addresses in answer order, connect_timeout
 *                each; the first that answers wins; then "OK addr port\n"
 *   SERVER_NAME  with check_server_name: the client's first bytes must name
 *                the server asked for (TLS SNI or HTTP Host); never decrypted.
 *                Plain HTTP goes on request by request: the pump passes
 *                one request's length (head and Content-Length body), then
 *                the next must name the same server (a kept-alive or
 *                pipelined request for another host closes the connection)
 *   PUMP         splice(2) both ways through a pipe per direction; a
 *                half-close is passed on; idle_timeout without a byte either
 *                way ends it
 *
 * The request line and the first bytes are read with MSG_PEEK into one
 * static buffer and consumed only as far as they were used, so what the
 * client sent after them stays in the socket for the pump: a connection
 * holds no buffer of its own, only its Conn and the kernel's pipes. Every
 * socket is edge-triggered; each event runs a state's handler until it
 * would block. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker.h"
#include "egress-addr.h"
#include "fd-util.h"
#include "log.h"

#define EV_ERRS (EPOLLERR | EPOLLHUP)

static uint8_t scratch[EGRESS_FIRST_BYTES_MAX];

/* Printable ASCII for a message: anything else becomes "\xNN"; at most
 * BROKER_HOST_SHOWN_MAX bytes, then "...". */
static void escape(const char *in, size_t len, char *out, size_t size) {
        static const char hex[] = "0123456789abcdef";
        size_t o = 0, max = size - 4 < BROKER_HOST_SHOWN_MAX ? size - 4 : BROKER_HOST_SHOWN_MAX;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char) in[i];
                bool plain = ch >= 0x21 && ch <= 0x7e && ch != '\\';
                if (o + (plain ? 1 : 4) > max) {
                        memcpy(out + o, "...", 3);
                        o += 3;
                        break;
                }
                if (plain)
                        out[o++] = (char) ch;
                else {
                        out[o++] = '\\';
                        out[o++] = 'x';
                        out[o++] = hex[ch >> 4];
                        out[o++] = hex[ch & 15];
                }
        }
        out[o] = '\0';
}

/* One line of printable ASCII. */
static void sanitize(char *s) {
        for (; *s; s++)
                if (*s < 0x20 || *s > 0x7e)
                        *s = '?';
}

static void conn_teardown(Conn *c) {
        Broker *b = c->broker;
        broker_unwatch(b, &c->client);
        broker_unwatch(b, &c->server);
        c->client.fd = safe_close(c->client.fd);
        c->server.fd = safe_close(c->server.fd);
        for (size_t i = 0; i < 2; i++) {
                c->up.pipe[i] = safe_close(c->up.pipe[i]);
                c->down.pipe[i] = safe_close(c->down.pipe[i]);
        }
        if (c->lookup) {
                c->lookup->conn = NULL; /* c-ares calls back later; nobody listens */
                c->lookup = NULL;
        }
        if (c->prev)
                c->prev->next = c->next;
        else
                b->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        b->n_conns--;
        c->state = CONN_DEAD;
        /* Events for it may still be in this batch: freed after it. */
        c->prev = NULL;
        c->next = b->dead_conns;
        b->dead_conns = c;
}

void conn_free(Conn *c) {
        free(c);
}

void conn_close(Conn *c, const char *message) {
        if (c->state == CONN_DEAD)
                return;
        /* Allowed once connected; a client that left before that was given
         * nothing (no reason: the broker refused nothing). */
        if (c->connected >= 0)
                broker_event(c->broker, c, "allowed", NULL, message);
        else if (c->have_request)
                broker_event(c->broker, c, "refused", NULL, message);
        conn_teardown(c);
}

static void send_line(Conn *c, const char *line) {
        size_t len = strlen(line);
        /* The socket's buffer is empty: the line goes whole or the client is
         * gone. */
        (void) send(c->client.fd, line, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void refuse(Conn *c, const char *code, const char *fmt, ...) _printf_(3, 4);
static void refuse(Conn *c, const char *code, const char *fmt, ...) {
        char msg[BROKER_MESSAGE_MAX], line[BROKER_MESSAGE_MAX + 64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        sanitize(msg);
        snprintf(line, sizeof(line), "ERR %s %s\n", code, msg);
        send_line(c, line);
        broker_event(c->broker, c, "refused", code, msg);
        if (c->have_request)
                broker_log_refusal(c->broker, "refused %s port %u: %s: %s", c->host, c->port, code, msg);
        else
                broker_log_refusal(c->broker, "refused a request: %s: %s", code, msg);
        conn_teardown(c);
}

static void mismatch(Conn *c, const char *fmt, ...) _printf_(2, 3);
static void mismatch(Conn *c, const char *fmt, ...) {
        char msg[BROKER_MESSAGE_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        sanitize(msg);
        broker_event(c->broker, c, "refused", BROKER_ERR_SERVER_NAME, msg);
        broker_log_refusal(c->broker, "closed %s port %u: %s: %s", c->host, c->port, BROKER_ERR_SERVER_NAME, msg);
        conn_teardown(c);
}

static void set_deadline(Conn *c, usec_t when) {
        c->deadline = when;
        broker_deadline(c->broker, when);
}

static Conn *conn_new(Broker *b, int fd) {
        Conn *c = calloc(1, sizeof(Conn));
        if (!c)
                return NULL;
        *c = (Conn){
                .broker = b,
                .state = CONN_REQUEST,
                .client = { .kind = WATCH_CLIENT, .fd = fd, .conn = c },
                .server = { .kind = WATCH_SERVER, .fd = -EBADF, .conn = c },
                .start = now_usec(),
                .connected = -1,
                .up = { .pipe = { -EBADF, -EBADF } },
                .down = { .pipe = { -EBADF, -EBADF } },
        };
        c->next = b->conns;
        if (b->conns)
                b->conns->prev = c;
        b->conns = c;
        b->n_conns++;
        return c;
}

void conn_refuse_limit(Broker *b, int fd) {
        Conn c = {
                .broker = b,
                .client = { .kind = WATCH_CLIENT, .fd = fd },
                .start = now_usec(),
                .connected = -1,
        };
        char msg[BROKER_MESSAGE_MAX], line[BROKER_MESSAGE_MAX + 64];
        snprintf(msg, sizeof(msg), "at most %u connections at once", b->cfg.max_connections);
        snprintf(line, sizeof(line), "ERR %s %s\n", BROKER_ERR_LIMIT, msg);
        send_line(&c, line);
        broker_event(b, &c, "refused", BROKER_ERR_LIMIT, msg);
        broker_log_refusal(b, "refused a connection: %s: %s", BROKER_ERR_LIMIT, msg);
        safe_close(fd);
}

void conn_accept(Broker *b, int fd) {
        Conn *c = conn_new(b, fd);
        if (!c) {
                log_error("out of memory for a connection");
                safe_close(fd);
                return;
        }
        set_deadline(c, c->start + BROKER_REQUEST_TIMEOUT_SEC * USEC_PER_SEC);
        /* Edge-triggered: reported at once when bytes are there already. */
        int r = broker_watch(b, &c->client, EPOLLIN | EPOLLRDHUP | EPOLLET);
        if (r < 0) {
                log_full_errno(LOG_LEVEL_WARNING, r, "cannot watch a connection: %m");
                conn_teardown(c);
        }
}

/* ---- CONNECTING ---- */

static void start_pump(Conn *c);
static void check_server_name(Conn *c, uint32_t events);

static void on_connected(Conn *c) {
        Broker *b = c->broker;
        char a[64], line[128];
        c->connected = (int) c->next_addr - 1;
        netaddr_format(&c->addrs[c->connected], a, sizeof(a));
        snprintf(line, sizeof(line), "OK %s %u\n", a, c->port);
        if (send(c->client.fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t) strlen(line)) {
                conn_close(c, "the client went away before the answer");
                return;
        }
        if (b->cfg.check_server_name && c->name[0]) {
                c->state = CONN_SERVER_NAME;
                set_deadline(c, now_usec() + BROKER_SERVER_NAME_TIMEOUT_SEC * USEC_PER_SEC);
                if (broker_watch(b, &c->client, EPOLLIN | EPOLLRDHUP | EPOLLET) < 0 ||
                    broker_watch(b, &c->server, EPOLLET) < 0) {
                        conn_close(c, "cannot watch the connection");
                        return;
                }
                check_server_name(c, 0);
                return;
        }
        start_pump(c);
}

static void connect_next(Conn *c) {
        Broker *b = c->broker;
        char a[64];
        while (c->next_addr < c->n_addrs) {
                const NetAddr *addr = &c->addrs[c->next_addr++];
                struct sockaddr_storage ss = {};
                socklen_t sl;
                if (addr->family == AF_INET) {
                        struct sockaddr_in *sin = (struct sockaddr_in *) &ss;
                        sin->sin_family = AF_INET;
                        sin->sin_port = htons(c->port);
                        memcpy(&sin->sin_addr, addr->addr, 4);
                        sl = sizeof(*sin);
                } else {
                        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &ss;
                        sin6->sin6_family = AF_INET6;
                        sin6->sin6_port = htons(c->port);
                        memcpy(&sin6->sin6_addr, addr->addr, 16);
                        sl = sizeof(*sin6);
                }
                int fd = socket(addr->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (fd < 0) {
                        c->connect_errno = errno;
                        continue;
                }
                if (connect(fd, (struct sockaddr *) &ss, sl) < 0 && errno != EINPROGRESS) {
                        c->connect_errno = errno;
                        safe_close(fd);
                        continue;
                }
                c->server.fd = fd;
                c->state = CONN_CONNECTING;
                set_deadline(c, now_usec() + (usec_t) b->cfg.connect_timeout * USEC_PER_SEC);
                if (broker_watch(b, &c->server, EPOLLOUT | EPOLLET) < 0 || broker_watch(b, &c->client, EPOLLET) < 0) {
                        conn_close(c, "cannot watch the connection");
                        return;
                }
                return;
        }
        netaddr_format(&c->addrs[c->n_addrs - 1], a, sizeof(a));
        refuse(c, BROKER_ERR_CONNECT, "no address of %s answered on port %u (%s: %s)", c->name[0] ? c->name : a,
               c->port, a, strerror(c->connect_errno ?: ECONNREFUSED));
}

static void connect_failed(Conn *c, int error) {
        broker_unwatch(c->broker, &c->server);
        c->server.fd = safe_close(c->server.fd);
        c->connect_errno = error;
        connect_next(c);
}

static void on_connect_event(Conn *c, uint32_t events) {
        int err = 0;
        socklen_t l = sizeof(err);
        if (getsockopt(c->server.fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
                err = errno;
        if (err != 0 || (events & EV_ERRS)) {
                connect_failed(c, err ?: ECONNREFUSED);
                return;
        }
        if (events & EPOLLOUT)
                on_connected(c);
}

/* ---- REQUEST ---- */

static bool parse_port(const char *s, size_t len, uint16_t *ret) {
        if (len == 0 || len > 5 || s[0] < '1' || s[0] > '9')
                return false;
        unsigned v = 0;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v > 65535)
                return false;
        *ret = (uint16_t) v;
        return true;
}

static const char *parse_via(const char *s, size_t len) {
        static const char *const vias[] = { BROKER_VIA_CONNECT, BROKER_VIA_HTTP, BROKER_VIA_SOCKS, BROKER_VIA_STREAM };
        for (size_t i = 0; i < ELEMENTSOF(vias); i++)
                if (strlen(vias[i]) == len && memcmp(vias[i], s, len) == 0)
                        return vias[i];
        return NULL;
}

static void start_literal(Conn *c, const NetAddr *a) {
        Broker *b = c->broker;
        const NetAddr *ha;
        size_t nha;
        EgressRefusal why;
        c->addrs[0] = *a;
        c->n_addrs = 1;
        broker_host_addresses(b, &ha, &nha);
        if (egress_literal_check(&b->cfg.policy, ha, nha, a, &why) < 0) {
                char msg[BROKER_MESSAGE_MAX];
                egress_refusal_format(a, &why, msg, sizeof(msg));
                refuse(c, BROKER_ERR_IP_LITERAL, "%s", msg);
                return;
        }
        connect_next(c);
}

static void start_name(Conn *c, const char *host, size_t len) {
        Broker *b = c->broker;
        const char *why = NULL;
        if (domain_name_canonical(host, len, c->name, &why) < 0) {
                c->name[0] = '\0';
                refuse(c, BROKER_ERR_BAD_NAME, "%s is not a host name: %s", c->host, why ?: "invalid");
                return;
        }
        bool listed = false;
        if (!domain_rules_find(b->cfg.rules, b->cfg.n_rules, c->name, c->port, &listed)) {
                if (listed)
                        refuse(c, BROKER_ERR_PORT, "%s is allowed on other ports, not on %u", c->name, c->port);
                else
                        refuse(c, BROKER_ERR_NAME, "%s is not an allowed name of this Domain", c->name);
                return;
        }
        c->state = CONN_RESOLVING;
        set_deadline(c, now_usec() + BROKER_DNS_TIMEOUT_SEC * USEC_PER_SEC);
        /* Only the client's hangup matters now. */
        if (broker_watch(b, &c->client, EPOLLET) < 0) {
                conn_close(c, "cannot watch the connection");
                return;
        }
        if (broker_resolve(b, c) < 0)
                conn_close(c, "out of memory");
}

/* line: len bytes without the "\n". */
static void handle_request(Conn *c, const char *line, size_t len) {
        static const char prefix[] = "CONNECT ";
        const size_t pl = sizeof(prefix) - 1;
        const char *bad = "the request is not \"CONNECT <host> <port> <via>\"";
        if (len < pl || memcmp(line, prefix, pl) != 0) {
                refuse(c, BROKER_ERR_BAD_REQUEST, "%s", bad);
                return;
        }
        const char *host = line + pl, *end = line + len;
        const char *sp1 = memchr(host, ' ', (size_t) (end - host));
        if (!sp1 || sp1 == host) {
                refuse(c, BROKER_ERR_BAD_REQUEST, "%s", bad);
                return;
        }
        const char *port = sp1 + 1;
        const char *sp2 = memchr(port, ' ', (size_t) (end - port));
        if (!sp2) {
                refuse(c, BROKER_ERR_BAD_REQUEST, "%s", bad);
                return;
        }
        const char *via = sp2 + 1;
        size_t hl = (size_t) (sp1 - host);
        uint16_t p;
        const char *v = parse_via(via, (size_t) (end - via));
        if (!parse_port(port, (size_t) (sp2 - port), &p) || !v) {
                refuse(c, BROKER_ERR_BAD_REQUEST, "%s: %s", bad,
                       !v ? "unknown <via>" : "<port> is not a decimal number from 1 to 65535");
                return;
        }
        c->have_request = true;
        c->port = p;
        c->via = v;
        escape(host, hl, c->host, sizeof(c->host));

        /* An IP literal, without brackets? */
        char lit[INET6_ADDRSTRLEN + 1];
        NetAddr a;
        if (hl < sizeof(lit) && !memchr(host, '\0', hl)) {
                memcpy(lit, host, hl);
                lit[hl] = '\0';
                if (netaddr_parse(lit, &a) == 0) {
                        start_literal(c, &a);
                        return;
                }
        }
        start_name(c, host, hl);
}

static void on_request(Conn *c, uint32_t events) {
        char *buf = (char *) scratch;
        ssize_t n = recv(c->client.fd, buf, BROKER_REQUEST_MAX, MSG_PEEK);
        if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return;
                conn_close(c, NULL);
                return;
        }
        if (n == 0) {
                /* Gone without a byte: nothing was asked, nothing to record. */
                conn_close(c, NULL);
                return;
        }
        const char *nl = memchr(buf, '\n', (size_t) n);
        if (!nl) {
                if ((size_t) n >= BROKER_REQUEST_MAX)
                        refuse(c, BROKER_ERR_BAD_REQUEST, "the request line is longer than %u bytes",
                               BROKER_REQUEST_MAX);
                else if (events & (EPOLLRDHUP | EV_ERRS))
                        refuse(c, BROKER_ERR_BAD_REQUEST, "the client ended its request line without a newline");
                return;
        }
        size_t len = (size_t) (nl - buf) + 1;
        /* Consume the line alone; what follows stays for the pump. */
        char line[BROKER_REQUEST_MAX + 1];
        ssize_t k = recv(c->client.fd, line, len, 0);
        if (k != (ssize_t) len) {
                conn_close(c, NULL);
                return;
        }
        handle_request(c, line, len - 1);
}

/* ---- RESOLVING ---- */

static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
        (void) timeouts;
        Lookup *l = arg;
        if (l->conn) {
                l->conn->lookup = NULL;
                conn_resolved(l->conn, status, res);
        }
        if (res)
                ares_freeaddrinfo(res);
        free(l);
}

int broker_resolve(Broker *b, Conn *c) {
        Lookup *l = calloc(1, sizeof(Lookup));
        if (!l)
                return -ENOMEM;
        l->conn = c;
        c->lookup = l;
        /* The trailing dot: the name as it is, never a search domain. */
        char q[DOMAIN_NAME_MAX + 2];
        snprintf(q, sizeof(q), "%s.", c->name);
        struct ares_addrinfo_hints h = {
                .ai_flags = ARES_AI_NOSORT,
                .ai_family = b->cfg.policy.enabled[NET_IPV6] ? AF_UNSPEC : AF_INET,
                .ai_socktype = SOCK_STREAM,
                .ai_protocol = IPPROTO_TCP,
        };
        /* May call back at once. */
        ares_getaddrinfo(b->ares, q, NULL, &h, on_addrinfo, l);
        return 0;
}

static void addrinfo_to_netaddr(const struct ares_addrinfo_node *n, NetAddr *ret) {
        *ret = (NetAddr){ .family = n->ai_family };
        if (n->ai_family == AF_INET)
                memcpy(ret->addr, &((const struct sockaddr_in *) n->ai_addr)->sin_addr, 4);
        else
                memcpy(ret->addr, &((const struct sockaddr_in6 *) n->ai_addr)->sin6_addr, 16);
}

void conn_resolved(Conn *c, int status, const struct ares_addrinfo *res) {
        Broker *b = c->broker;
        if (c->state != CONN_RESOLVING)
                return;
        if (status != ARES_SUCCESS) {
                refuse(c, BROKER_ERR_DNS, "the lookup of %s failed: %s", c->name, ares_strerror(status));
                return;
        }
        const NetAddr *ha;
        size_t nha;
        broker_host_addresses(b, &ha, &nha);
        bool any = false;
        const NetAddr *denied = NULL;
        NetAddr bad;
        EgressRefusal why;
        for (const struct ares_addrinfo_node *n = res ? res->nodes : NULL; n; n = n->ai_next) {
                if ((n->ai_family != AF_INET && n->ai_family != AF_INET6) || !n->ai_addr)
                        continue;
                NetAddr a;
                addrinfo_to_netaddr(n, &a);
                any = true;
                bool seen = false;
                for (size_t i = 0; i < c->n_addrs && !seen; i++)
                        seen = c->addrs[i].family == a.family && memcmp(c->addrs[i].addr, a.addr, 16) == 0;
                if (!seen && c->n_addrs < BROKER_ADDRS_MAX)
                        c->addrs[c->n_addrs++] = a;
                if (!denied && egress_address_check(&b->cfg.policy, ha, nha, &a, &why) < 0) {
                        bad = a;
                        denied = &bad;
                }
        }
        if (!any) {
                refuse(c, BROKER_ERR_DNS, "%s has no addresses", c->name);
                return;
        }
        if (denied) {
                char msg[BROKER_MESSAGE_MAX];
                egress_refusal_format(denied, &why, msg, sizeof(msg));
                refuse(c, BROKER_ERR_ADDRESS, "%s resolves to %s", c->name, msg);
                return;
        }
        connect_next(c);
}

/* ---- SERVER_NAME ---- */

static void check_server_name(Conn *c, uint32_t events) {
        ssize_t n = recv(c->client.fd, scratch, sizeof(scratch), MSG_PEEK);
        if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return;
                conn_close(c, "the client's connection failed");
                return;
        }
        if (n == 0) {
                conn_close(c, "the client closed before sending anything");
                return;
        }
        char sn[DOMAIN_NAME_MAX + 2], shown[BROKER_HOST_SHOWN_MAX + 8], canon[DOMAIN_NAME_MAX + 1];
        const char *why = NULL;
        int r = egress_server_name(scratch, (size_t) n, sn, sizeof(sn), &why);
        if (r == 0) {
                if ((size_t) n >= sizeof(scratch) || (events & (EPOLLRDHUP | EV_ERRS)))
                        mismatch(c, "no server name in the first %zd bytes the client sent", n);
                return;
        }
        if (r < 0) {
                mismatch(c, "%s", why ?: "no server name");
                return;
        }
        escape(sn, strlen(sn), shown, sizeof(shown));
        if (domain_name_canonical(sn, strlen(sn), canon, &why) < 0) {
                mismatch(c, "the server name %s is no host name: %s", shown, why ?: "invalid");
                return;
        }
        if (strcmp(canon, c->name) != 0) {
                mismatch(c, "the client names the server %s, not %s", canon, c->name);
                return;
        }
        if (egress_is_http(scratch, (size_t) n)) {
                uint64_t len = 0;
                r = egress_http_request_length(scratch, (size_t) n, &len, &why);
                if (r <= 0) {
                        mismatch(c, "%s", r < 0 && why ? why : "the HTTP request's length is unknown");
                        return;
                }
                c->up.per_request = true;
                c->up.budget = len;
        }
        start_pump(c);
}

/* Plain HTTP under check_server_name, the current request passed whole:
 * the next one's head, peeked, must name the same server before any of it
 * goes on. Whether it may (a budget set, or the client's end seen). */
static bool next_request(Conn *c) {
        ssize_t n = recv(c->client.fd, scratch, sizeof(scratch), MSG_PEEK);
        if (n < 0)
                return false; /* EAGAIN: wait for more; a failure shows in the flow */
        if (n == 0) {
                c->up.eof = true; /* the client is done: pass the end on */
                return true;
        }
        char sn[DOMAIN_NAME_MAX + 2], shown[BROKER_HOST_SHOWN_MAX + 8], canon[DOMAIN_NAME_MAX + 1];
        const char *why = NULL;
        int r = egress_server_name(scratch, (size_t) n, sn, sizeof(sn), &why);
        if (r == 0) {
                if ((size_t) n >= sizeof(scratch))
                        mismatch(c, "no server name in the %zd bytes of the client's next request", n);
                return false;
        }
        if (r < 0 || !egress_is_http(scratch, (size_t) n)) {
                mismatch(c, "the client's next request: %s", r < 0 && why ? why : "not HTTP");
                return false;
        }
        escape(sn, strlen(sn), shown, sizeof(shown));
        if (domain_name_canonical(sn, strlen(sn), canon, &why) < 0) {
                mismatch(c, "the server name %s of the client's next request is no host name: %s", shown,
                         why ?: "invalid");
                return false;
        }
        if (strcmp(canon, c->name) != 0) {
                mismatch(c, "the client's next request names the server %s, not %s", canon, c->name);
                return false;
        }
        uint64_t len = 0;
        r = egress_http_request_length(scratch, (size_t) n, &len, &why);
        if (r <= 0) {
                mismatch(c, "the client's next request: %s", r < 0 && why ? why : "its length is unknown");
                return false;
        }
        c->up.budget = len;
        return true;
}

/* ---- PUMP ---- */

static int open_flow(Flow *f) {
        if (pipe2(f->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
                return negative_errno();
        int sz = fcntl(f->pipe[0], F_GETPIPE_SZ);
        f->cap = sz > 0 ? (size_t) sz : 4096;
        return 0;
}

/* Move what can move without blocking; whether anything moved. A failure
 * ends the flow (f->error): writing dst's at once, reading src's once what
 * the pipe holds is delivered (a reset after the last bytes loses none of
 * them). */
static bool flow_run(Flow *f, int src, int dst) {
        bool moved_any = false;
        while (f->error == 0) {
                bool moved = false;
                size_t room = f->cap - f->bytes;
                if (f->per_request && f->budget < room)
                        room = (size_t) f->budget;
                if (!f->eof && !f->full && room > 0) {
                        ssize_t n = splice(src, NULL, f->pipe[1], NULL, room, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                        if (n > 0) {
                                f->bytes += (size_t) n;
                                if (f->per_request)
                                        f->budget -= (uint64_t) n;
                                moved = true;
                        } else if (n == 0) {
                                f->eof = true;
                                moved = true;
                        } else if (errno == EAGAIN) {
                                /* The socket is empty, or the pipe's slots are
                                 * full of small pieces: wait for the drain. */
                                if (f->bytes > 0)
                                        f->full = true;
                        } else if (errno != EINTR) {
                                f->read_error = negative_errno();
                                f->eof = true;
                                moved = true;
                        }
                }
                if (f->bytes > 0) {
                        ssize_t n = splice(f->pipe[0], NULL, dst, NULL, f->bytes, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                        if (n > 0) {
                                f->bytes -= (size_t) n;
                                f->total += (uint64_t) n;
                                f->full = false;
                                moved = true;
                        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                                f->error = n == 0 ? -EPIPE : negative_errno();
                                f->dst_failed = true;
                                return true;
                        }
                }
                if (f->eof && f->bytes == 0 && f->read_error < 0) {
                        f->error = f->read_error;
                        return true;
                }
                if (f->eof && f->bytes == 0 && !f->shut) {
                        (void) shutdown(dst, SHUT_WR);
                        f->shut = true;
                }
                if (!moved)
                        return moved_any;
                moved_any = true;
        }
        return moved_any;
}

/* A failure ends the connection, but for one: writing to the server. A
 * server that closes while its client still sends (its last window
 * updates, the upload it refused) has the kernel reset the connection, and
 * what it sent before that is still the client's: the other way goes on
 * until it ends too. */
static void pump(Conn *c) {
        bool r = flow_run(&c->up, c->client.fd, c->server.fd);
        /* The current request passed: the next is checked before it goes
         * (the edge that announced it may be spent already). */
        while (c->up.per_request && c->up.budget == 0 && !c->up.eof && c->up.error == 0 && next_request(c))
                r = flow_run(&c->up, c->client.fd, c->server.fd) || r;
        if (c->state == CONN_DEAD)
                return;
        bool s = flow_run(&c->down, c->server.fd, c->client.fd);
        if (r || s)
                c->last_activity = now_usec();
        bool up_over = c->up.error < 0 && (!c->up.dst_failed || c->down.shut);
        if (up_over || c->down.error < 0) {
                char msg[BROKER_MESSAGE_MAX];
                bool down = c->down.error < 0;
                snprintf(msg, sizeof(msg), "%s: %s", down ? "server to client" : "client to server",
                         strerror(-(down ? c->down.error : c->up.error)));
                conn_close(c, msg);
                return;
        }
        if (c->up.shut && c->down.shut)
                conn_close(c, "closed");
        else if (c->client_hup && c->up.shut)
                conn_close(c, "the client closed");
        else if (c->server_hup && c->down.shut)
                conn_close(c, "the server closed");
}

static void start_pump(Conn *c) {
        Broker *b = c->broker;
        int r = open_flow(&c->up);
        if (r >= 0)
                r = open_flow(&c->down);
        if (r < 0) {
                conn_close(c, "cannot make the pump's pipes");
                return;
        }
        c->state = CONN_PUMP;
        c->last_activity = now_usec();
        set_deadline(c, c->last_activity + (usec_t) b->cfg.idle_timeout * USEC_PER_SEC);
        uint32_t ev = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        if (broker_watch(b, &c->client, ev) < 0 || broker_watch(b, &c->server, ev) < 0) {
                conn_close(c, "cannot watch the connection");
                return;
        }
        pump(c);
}

/* ---- dispatch ---- */

void conn_handle(Conn *c, Watch *w, uint32_t events) {
        bool client = w == &c->client;
        switch (c->state) {
        case CONN_REQUEST:
                if (client)
                        on_request(c, events);
                break;
        case CONN_RESOLVING:
                if (client && (events & EV_ERRS))
                        conn_close(c, "the client closed during the lookup");
                break;
        case CONN_CONNECTING:
                if (!client)
                        on_connect_event(c, events);
                else if (events & EV_ERRS)
                        conn_close(c, "the client closed while the broker connected");
                break;
        case CONN_SERVER_NAME:
                if (client)
                        check_server_name(c, events);
                else if (events & EV_ERRS)
                        conn_close(c, "the server closed before the client's first bytes");
                break;
        case CONN_PUMP:
                if (events & EV_ERRS) {
                        if (client)
                                c->client_hup = true;
                        else
                                c->server_hup = true;
                }
                pump(c);
                break;
        case CONN_DEAD:
        case _CONN_STATE_MAX:
                break;
        }
}

void conn_timeout(Conn *c, usec_t now) {
        Broker *b = c->broker;
        (void) now;
        switch (c->state) {
        case CONN_REQUEST:
                refuse(c, BROKER_ERR_TIMEOUT, "no request line within %u s", BROKER_REQUEST_TIMEOUT_SEC);
                break;
        case CONN_RESOLVING:
                refuse(c, BROKER_ERR_DNS, "the lookup of %s took longer than %u s", c->name, BROKER_DNS_TIMEOUT_SEC);
                break;
        case CONN_CONNECTING:
                connect_failed(c, ETIMEDOUT);
                break;
        case CONN_SERVER_NAME:
                mismatch(c, "no server name within %u s", BROKER_SERVER_NAME_TIMEOUT_SEC);
                break;
        case CONN_PUMP: {
                char msg[64];
                snprintf(msg, sizeof(msg), "idle for %u s", b->cfg.idle_timeout);
                conn_close(c, msg);
                break;
        }
        case CONN_DEAD:
        case _CONN_STATE_MAX:
                break;
        }
}
