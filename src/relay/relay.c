/* SPDX-License-Identifier: MIT */
/* lazaret-relay: the sandbox's proxy for egress by name (issue 18).
 *
 *   lazaret-relay [--broker PATH] [--listen ADDR] [--http-port N] [--socks-port N]
 *
 * Listens on 127.0.0.1 (or ADDR, an IPv4 or IPv6 literal: a broker's own
 * container listening for another's clients) at RELAY_HTTP_PORT (HTTP CONNECT and plain-HTTP
 * absolute-form) and RELAY_SOCKS_PORT (SOCKS5, no authentication). Each
 * client's request is read (at most 10 s; netpolicy/proxy-request parses it),
 * refused here when it is malformed, and otherwise handed to the Domain's
 * broker over its Unix socket (broker-proto.h): "CONNECT host port via".
 * On the broker's OK the client is told so and bytes are pumped both ways
 * (half-close passed on); on ERR the client gets an HTTP status or SOCKS5
 * reply for the broker's code, and the HTTP body and an X-Lazaret-Refused
 * header name the reason. One thread, one epoll loop, nonblocking
 * descriptors, a bounded number of clients and bounded buffers.
 *
 *   lazaret-relay --connect HOST PORT
 *
 * For OpenSSH's ProxyCommand (ProxyCommand /run/lazaret/relay --connect %h
 * %p): asks the broker with via "stream" and pumps stdin to the broker and
 * the broker to stdout. A refusal is one line on stderr,
 * "lazaret-relay: refused: CODE MESSAGE", and exit 1.
 *
 *   lazaret-relay [--listening] --probe HOST PORT
 *
 * Asks like --connect and hangs up: prints "ok ADDRESS PORT" (exit 0),
 * "refused CODE MESSAGE" (exit 3) or "error MESSAGE" (exit 1: no broker, or
 * an answer that is not the protocol's), for the readiness probes. With
 * --listening it first waits (up to 5 s) until the relay accepts
 * connections on both of its ports, so the probe proves the whole path.
 *
 * The relay is a convenience for proxy-aware clients, not the enforcement:
 * the broker checks everything again, and nothing the broker says is
 * printed or sent on without its control bytes escaped. Static, like
 * lazaret-init: images may have no libc. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "broker-proto.h"
#include "dispense.h"
#include "fd-util.h"
#include "proxy-request.h"

#define RELAY_CLIENTS_MAX        1024u
#define RELAY_REQUEST_TIMEOUT_MS 10000u /* the whole request, from accept */
/* The broker looks the name up and connects before it answers. */
#define RELAY_ANSWER_TIMEOUT_MS 30000u
#define RELAY_LISTEN_WAIT_MS    5000u /* --probe --listening */
#define RELAY_DRAIN_TIMEOUT_MS  2000u /* reading what a refused client still sends */
#define RELAY_ANSWER_MAX        1024u /* the broker's answer line */
#define RELAY_BUF_SIZE          (64u * 1024u) /* per direction and client */
#define RELAY_SOCKS_READ_MAX    (PROXY_SOCKS_GREETING_MAX + PROXY_SOCKS_REQUEST_MAX)
#define RELAY_HTTP_READ_MAX     (PROXY_HEAD_MAX + 1u) /* enough for the parser to decide */

/* Codes of the relay's own, in X-Lazaret-Refused and on stderr, beside the
 * broker's (BROKER_ERR_*). */
#define RELAY_ERR_UNREACHABLE "broker-unreachable" /* cannot connect to the broker's socket */
#define RELAY_ERR_PROTOCOL    "broker-protocol" /* the broker's answer is not OK or ERR */

#define HTTP_ESTABLISHED "HTTP/1.1 200 Connection established\r\n\r\n"

static const char *arg_broker = BROKER_SOCKET_PATH;
static bool arg_broker_given;
static unsigned arg_http_port = RELAY_HTTP_PORT;
static bool arg_wait_listeners = false; /* --probe --listening */
static unsigned arg_socks_port = RELAY_SOCKS_PORT;

static _noreturn_ void die_usage(const char *msg) {
        fprintf(stderr, "lazaret-relay: %s\n", msg);
        fputs("usage: lazaret-relay [--broker PATH] [--listen ADDR] [--http-port N] [--socks-port N]\n"
              "       lazaret-relay [--broker PATH] --connect HOST PORT\n"
              "       lazaret-relay [--broker PATH] [--listening] --probe HOST PORT\n",
              stderr);
        exit(2);
}

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* Printable ASCII stays, backslash and everything else becomes \\ or
 * \xHH: a broker message (or a host from the command line) never puts a
 * control byte on a terminal or into an HTTP response. */
static void escape(const char *in, size_t n, char *out, size_t size) {
        size_t o = 0;
        for (size_t i = 0; i < n && o + 5 <= size; i++) {
                unsigned char c = (unsigned char) in[i];
                if (c == '\\') {
                        out[o++] = '\\';
                        out[o++] = '\\';
                } else if (c >= 0x20 && c < 0x7f)
                        out[o++] = (char) c;
                else
                        o += (size_t) snprintf(out + o, size - o, "\\x%02x", c);
        }
        if (size > 0)
                out[o < size ? o : size - 1] = '\0';
}

/* The broker's answer line. */
typedef struct Answer {
        bool ok;
        char address[64]; /* OK */
        char port[8]; /* OK */
        char code[32]; /* ERR */
        char message[4 * RELAY_ANSWER_MAX + 1]; /* ERR, escaped */
} Answer;

static bool span_all(const char *s, size_t n, const char *set) {
        for (size_t i = 0; i < n; i++)
                if (s[i] == '\0' || !strchr(set, s[i]))
                        return false;
        return true;
}

/* line without its "\n". -EPROTO for anything but the two forms. */
static int answer_parse(const char *line, size_t n, Answer *ret) {
        *ret = (Answer){};
        if (n > 3 && memcmp(line, "OK ", 3) == 0) {
                const char *a = line + 3, *sp = memchr(a, ' ', n - 3);
                if (!sp)
                        return -EPROTO;
                size_t alen = (size_t) (sp - a), plen = n - 3 - alen - 1;
                uint16_t port;
                if (alen == 0 || alen >= sizeof(ret->address) || !span_all(a, alen, "0123456789abcdefABCDEF.:") ||
                    proxy_port_parse(sp + 1, plen, &port) < 0)
                        return -EPROTO;
                ret->ok = true;
                memcpy(ret->address, a, alen);
                snprintf(ret->port, sizeof(ret->port), "%u", port);
                return 0;
        }
        if (n > 4 && memcmp(line, "ERR ", 4) == 0) {
                const char *c = line + 4, *sp = memchr(c, ' ', n - 4);
                size_t clen = sp ? (size_t) (sp - c) : n - 4;
                if (clen == 0 || clen >= sizeof(ret->code) ||
                    !span_all(c, clen, "abcdefghijklmnopqrstuvwxyz0123456789-"))
                        return -EPROTO;
                memcpy(ret->code, c, clen);
                if (sp)
                        escape(sp + 1, (size_t) (line + n - sp - 1), ret->message, sizeof(ret->message));
                return 0;
        }
        return -EPROTO;
}

static bool code_is(const char *code, const char *what) {
        return strcmp(code, what) == 0;
}

static unsigned http_status_for(const char *code) {
        if (code_is(code, BROKER_ERR_NAME) || code_is(code, BROKER_ERR_PORT) || code_is(code, BROKER_ERR_IP_LITERAL) ||
            code_is(code, BROKER_ERR_ADDRESS) || code_is(code, BROKER_ERR_BAD_NAME))
                return 403;
        if (code_is(code, BROKER_ERR_LIMIT))
                return 503;
        if (code_is(code, BROKER_ERR_BAD_REQUEST))
                return 400;
        if (code_is(code, BROKER_ERR_TIMEOUT))
                return 504;
        return 502; /* dns-failed, connect-failed, the relay's own, unknown */
}

static uint8_t socks_reply_for(const char *code) {
        if (code_is(code, BROKER_ERR_NAME) || code_is(code, BROKER_ERR_PORT) || code_is(code, BROKER_ERR_IP_LITERAL) ||
            code_is(code, BROKER_ERR_ADDRESS) || code_is(code, BROKER_ERR_BAD_NAME))
                return PROXY_SOCKS_REP_NOT_ALLOWED;
        if (code_is(code, BROKER_ERR_DNS))
                return PROXY_SOCKS_REP_HOST;
        if (code_is(code, BROKER_ERR_CONNECT))
                return PROXY_SOCKS_REP_REFUSED;
        return PROXY_SOCKS_REP_GENERAL;
}

static const char *http_reason(unsigned status) {
        switch (status) {
        case 400:
                return "Bad Request";
        case 403:
                return "Forbidden";
        case 405:
                return "Method Not Allowed";
        case 408:
                return "Request Timeout";
        case 431:
                return "Request Header Fields Too Large";
        case 503:
                return "Service Unavailable";
        case 504:
                return "Gateway Timeout";
        case 505:
                return "HTTP Version Not Supported";
        default:
                return "Bad Gateway";
        }
}

/* A complete refusal; message already free of control bytes. */
static size_t http_refusal(char *buf, size_t size, unsigned status, const char *code, const char *message) {
        char body[4 * RELAY_ANSWER_MAX + 128];
        int b = snprintf(body, sizeof(body), "lazaret-relay: refused (%s): %s\n", code, message);
        if (b < 0)
                return 0;
        if ((size_t) b >= sizeof(body))
                b = (int) sizeof(body) - 1;
        int n = snprintf(buf, size,
                         "HTTP/1.1 %u %s\r\n"
                         "Content-Type: text/plain; charset=us-ascii\r\n"
                         "X-Lazaret-Refused: %s\r\n"
                         "Content-Length: %d\r\n"
                         "Connection: close\r\n"
                         "\r\n"
                         "%s",
                         status, http_reason(status), code, b, body);
        if (n < 0)
                return 0;
        return (size_t) n < size ? (size_t) n : size - 1;
}

static void socks_reply(uint8_t out[static 10], uint8_t rep) {
        const uint8_t r[10] = { 5, rep, 0, 1, 0, 0, 0, 0, 0, 0 };
        memcpy(out, r, 10);
}

/* The broker: through the sandbox's dispenser when there is one (gVisor,
 * shared/dispense.h), else at arg_broker; an explicit --broker is always
 * connected to directly. *via: what was tried, for messages. */
static int broker_connect(bool nonblock, const char **via) {
        return dispense_connect(arg_broker_given ? 0 : DISPENSE_BROKER, arg_broker, nonblock, via);
}

static size_t broker_request(char *buf, size_t size, const char *host, unsigned port, const char *via) {
        int n = snprintf(buf, size, "CONNECT %s %u %s\n", host, port, via);
        return n > 0 && (size_t) n < size ? (size_t) n : 0;
}

/* ---- the daemon ---- */

typedef enum ConnState {
        CONN_HTTP, /* reading the request head */
        CONN_SOCKS_GREETING,
        CONN_SOCKS_REQUEST,
        CONN_ANSWER, /* the broker has the request; waiting for its line */
        CONN_PUMP,
        CONN_CLOSING, /* writing a refusal to the client */
        CONN_DRAIN, /* refusal written, write side shut: reading to EOF */
        _CONN_STATE_MAX,
        _CONN_STATE_INVALID = -EINVAL,
} ConnState;

typedef struct Buf {
        char *data;
        size_t start, end;
} Buf;

typedef struct Conn {
        unsigned slot;
        ConnState state;
        int client, broker;
        uint32_t client_mask, broker_mask; /* registered with epoll; 0: not registered */
        uint64_t deadline; /* 0: none */
        bool dead;
        ProxyHttp http;
        ProxyTarget target;
        size_t greeting_len; /* SOCKS: bytes of the greeting at the start of c2b */
        size_t consumed; /* the request's bytes at the start of c2b */
        char answer[RELAY_ANSWER_MAX];
        size_t answer_len;
        bool c2b_eof, b2c_eof, c2b_shut, b2c_shut;
        bool c2b_lost; /* the broker took no more: the client's bytes are read and dropped until its end */
        Buf c2b, b2c; /* client to broker (the request first), broker to client */
} Conn;

typedef struct Relay {
        int epoll;
        int listen_http, listen_socks;
        Conn **conns;
        unsigned max_conns, n_conns;
        char rewrite[PROXY_REWRITE_MAX];
} Relay;

#define TAG_LISTEN_HTTP  (UINT64_C(1) << 62)
#define TAG_LISTEN_SOCKS ((UINT64_C(1) << 62) | 1u)

static bool buf_empty(const Buf *b) {
        return b->start == b->end;
}

static bool buf_room(Buf *b) {
        if (b->start == b->end)
                b->start = b->end = 0;
        if (b->end == RELAY_BUF_SIZE && b->start > 0) {
                memmove(b->data, b->data + b->start, b->end - b->start);
                b->end -= b->start;
                b->start = 0;
        }
        return b->end < RELAY_BUF_SIZE;
}

static void buf_append(Buf *b, const void *p, size_t n) {
        buf_room(b);
        if (RELAY_BUF_SIZE - b->end < n) /* never: every caller stays far below */
                n = RELAY_BUF_SIZE - b->end;
        memcpy(b->data + b->end, p, n);
        b->end += n;
}

static void set_mask(Relay *r, Conn *c, int fd, uint32_t *cur, uint32_t want, unsigned side) {
        if (fd < 0 || *cur == want)
                return;
        if (want == 0) {
                /* Unregistered rather than registered for nothing: a hung
                 * up socket reports EPOLLHUP whatever the mask. */
                (void) epoll_ctl(r->epoll, EPOLL_CTL_DEL, fd, NULL);
                *cur = 0;
                return;
        }
        struct epoll_event ev = { .events = want, .data.u64 = (uint64_t) c->slot << 1 | side };
        if (epoll_ctl(r->epoll, *cur ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) == 0)
                *cur = want;
}

static void conn_close(Relay *r, Conn *c) {
        if (c->dead)
                return;
        set_mask(r, c, c->client, &c->client_mask, 0, 0);
        set_mask(r, c, c->broker, &c->broker_mask, 0, 1);
        c->client = safe_close(c->client);
        c->broker = safe_close(c->broker);
        c->dead = true;
}

static void conn_free(Relay *r, Conn *c) {
        r->conns[c->slot] = NULL;
        r->n_conns--;
        free(c->c2b.data);
        free(c->b2c.data);
        free(c);
}

/* Answer the client and close. What b2c holds goes out first: before the
 * broker's OK that is at most the SOCKS5 method reply, which the answer must
 * follow. */
static void conn_refuse_http(Conn *c, unsigned status, const char *code, const char *message) {
        char out[8192];
        size_t n = http_refusal(out, sizeof(out), status, code, message);
        c->broker = safe_close(c->broker); /* which takes it out of the epoll set too */
        c->broker_mask = 0;
        buf_append(&c->b2c, out, n);
        c->state = CONN_CLOSING;
        c->deadline = now_ms() + RELAY_DRAIN_TIMEOUT_MS;
}

static void conn_refuse_socks(Conn *c, ProxySocksAnswer answer, uint8_t rep) {
        static const uint8_t socks4_reject[8] = { 0, 0x5b };
        static const uint8_t no_method[2] = { 5, 0xff };
        uint8_t rep_buf[10];
        c->broker = safe_close(c->broker); /* which takes it out of the epoll set too */
        c->broker_mask = 0;
        switch (answer) {
        case PROXY_SOCKS_CLOSE:
                break;
        case PROXY_SOCKS_SOCKS4_REJECT:
                buf_append(&c->b2c, socks4_reject, sizeof(socks4_reject));
                break;
        case PROXY_SOCKS_NO_METHOD:
                buf_append(&c->b2c, no_method, sizeof(no_method));
                break;
        case PROXY_SOCKS_REPLY:
                socks_reply(rep_buf, rep);
                buf_append(&c->b2c, rep_buf, sizeof(rep_buf));
                break;
        case _PROXY_SOCKS_ANSWER_MAX:
        case _PROXY_SOCKS_ANSWER_INVALID:
                break;
        }
        c->state = CONN_CLOSING;
        c->deadline = now_ms() + RELAY_DRAIN_TIMEOUT_MS;
}

static bool conn_is_socks(const Conn *c) {
        return c->target.kind == PROXY_SOCKS5;
}

/* A refusal in the broker's terms (its ERR, or the relay's own codes). */
static void conn_refuse(Conn *c, const char *code, const char *message) {
        if (conn_is_socks(c))
                conn_refuse_socks(c, PROXY_SOCKS_REPLY, socks_reply_for(code));
        else
                conn_refuse_http(c, http_status_for(code), code, message);
}

static void conn_ask_broker(Conn *c) {
        const char *via = c->target.kind == PROXY_HTTP_CONNECT    ? BROKER_VIA_CONNECT
                          : c->target.kind == PROXY_HTTP_ABSOLUTE ? BROKER_VIA_HTTP
                                                                  : BROKER_VIA_SOCKS;
        char line[BROKER_REQUEST_MAX + 1], why[160];
        size_t n = broker_request(line, sizeof(line), c->target.host, c->target.port, via);
        if (n == 0 || n > BROKER_REQUEST_MAX)
                return conn_refuse(c, BROKER_ERR_BAD_REQUEST, "the request does not fit the broker's line");
        const char *where = arg_broker;
        int fd = broker_connect(true, &where);
        if (fd < 0) {
                snprintf(why, sizeof(why), "cannot connect to the broker at %s: %s", where, strerror(-fd));
                return conn_refuse(c, RELAY_ERR_UNREACHABLE, why);
        }
        /* A fresh socket's send buffer takes the short line whole. */
        ssize_t k = send(fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k != (ssize_t) n) {
                safe_close(fd);
                snprintf(why, sizeof(why), "cannot send to the broker: %s", k < 0 ? strerror(errno) : "short write");
                return conn_refuse(c, RELAY_ERR_UNREACHABLE, why);
        }
        c->broker = fd;
        c->state = CONN_ANSWER;
        c->deadline = now_ms() + RELAY_ANSWER_TIMEOUT_MS;
}

/* The broker said OK: tell the client, queue what both sides sent early. */
static void conn_established(Relay *r, Conn *c, const char *early, size_t early_n) {
        Buf *in = &c->c2b;
        size_t left = in->end - c->consumed;
        switch (c->target.kind) {
        case PROXY_HTTP_CONNECT:
                buf_append(&c->b2c, HTTP_ESTABLISHED, strlen(HTTP_ESTABLISHED));
                memmove(in->data, in->data + c->consumed, left);
                in->start = 0, in->end = left;
                break;
        case PROXY_SOCKS5: {
                uint8_t ok[10];
                socks_reply(ok, 0);
                buf_append(&c->b2c, ok, sizeof(ok));
                memmove(in->data, in->data + c->consumed, left);
                in->start = 0, in->end = left;
                break;
        }
        case PROXY_HTTP_ABSOLUTE: {
                size_t n;
                if (proxy_http_rewrite(&c->http, in->data, r->rewrite, sizeof(r->rewrite), &n) < 0 ||
                    n + left > RELAY_BUF_SIZE)
                        return conn_refuse(c, BROKER_ERR_BAD_REQUEST, "cannot rewrite the request head");
                memmove(in->data + n, in->data + c->consumed, left);
                memcpy(in->data, r->rewrite, n);
                in->start = 0, in->end = n + left;
                break;
        }
        case _PROXY_KIND_MAX:
        case _PROXY_KIND_INVALID:
                return conn_refuse(c, BROKER_ERR_BAD_REQUEST, "no request");
        }
        buf_append(&c->b2c, early, early_n);
        c->state = CONN_PUMP;
        c->deadline = 0;
}

static void conn_parse(Relay *r, Conn *c) {
        ProxyResult res;
        ProxyStatus s;
        (void) r;
        if (c->state == CONN_HTTP) {
                s = proxy_http_feed(&c->http, c->c2b.data, c->c2b.end, &res);
                if (s == PROXY_REFUSED)
                        return conn_refuse_http(c, res.refusal.http_status, BROKER_ERR_BAD_REQUEST, res.refusal.reason);
                if (s != PROXY_DONE)
                        return;
                c->target = res.target;
                c->consumed = res.consumed;
                return conn_ask_broker(c);
        }
        if (c->state == CONN_SOCKS_GREETING) {
                s = proxy_socks_greeting((const uint8_t *) c->c2b.data, c->c2b.end, &res);
                if (s == PROXY_REFUSED)
                        return conn_refuse_socks(c, res.refusal.socks_answer, res.refusal.socks_reply);
                if (s != PROXY_DONE)
                        return;
                static const uint8_t no_auth[2] = { 5, 0 };
                buf_append(&c->b2c, no_auth, sizeof(no_auth));
                c->greeting_len = res.consumed;
                c->state = CONN_SOCKS_REQUEST;
                /* The request may have come with the greeting. */
        }
        if (c->state == CONN_SOCKS_REQUEST) {
                s = proxy_socks_request((const uint8_t *) c->c2b.data + c->greeting_len, c->c2b.end - c->greeting_len,
                                        &res);
                if (s == PROXY_REFUSED)
                        return conn_refuse_socks(c, res.refusal.socks_answer, res.refusal.socks_reply);
                if (s != PROXY_DONE)
                        return;
                c->target = res.target;
                c->consumed = c->greeting_len + res.consumed;
                return conn_ask_broker(c);
        }
}

static void conn_read_answer(Relay *r, Conn *c) {
        ssize_t k = read(c->broker, c->answer + c->answer_len, sizeof(c->answer) - c->answer_len);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (k <= 0)
                return conn_refuse(c, RELAY_ERR_PROTOCOL, "the broker closed the connection without an answer");
        c->answer_len += (size_t) k;
        const char *nl = memchr(c->answer, '\n', c->answer_len);
        if (!nl) {
                if (c->answer_len == sizeof(c->answer))
                        conn_refuse(c, RELAY_ERR_PROTOCOL, "the broker's answer line is too long");
                return;
        }
        size_t n = (size_t) (nl - c->answer);
        Answer a;
        if (answer_parse(c->answer, n, &a) < 0)
                return conn_refuse(c, RELAY_ERR_PROTOCOL, "the broker's answer is neither OK nor ERR");
        if (!a.ok)
                return conn_refuse(c, a.code, a.message);
        conn_established(r, c, nl + 1, c->answer_len - n - 1);
}

/* Read from fd into b; false when the connection must go. */
static bool pump_in(int fd, Buf *b, bool *eof) {
        if (!buf_room(b))
                return true;
        ssize_t k = read(fd, b->data + b->end, RELAY_BUF_SIZE - b->end);
        if (k < 0)
                return errno == EAGAIN || errno == EINTR;
        if (k == 0)
                *eof = true;
        b->end += (size_t) k;
        return true;
}

static bool pump_out(int fd, Buf *b) {
        if (buf_empty(b))
                return true;
        ssize_t k = send(fd, b->data + b->start, b->end - b->start, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0)
                return errno == EAGAIN || errno == EINTR;
        b->start += (size_t) k;
        return true;
}

static void conn_client_event(Relay *r, Conn *c, uint32_t ev) {
        if ((ev & EPOLLOUT) && !pump_out(c->client, &c->b2c))
                return conn_close(r, c);
        if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) || !(c->client_mask & EPOLLIN))
                return;
        switch (c->state) {
        case CONN_HTTP:
        case CONN_SOCKS_GREETING:
        case CONN_SOCKS_REQUEST: {
                size_t cap = c->state == CONN_HTTP ? RELAY_HTTP_READ_MAX : RELAY_SOCKS_READ_MAX;
                ssize_t k = read(c->client, c->c2b.data + c->c2b.end, cap - c->c2b.end);
                if (k < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (k <= 0) /* gone before asking anything: no one to answer */
                        return conn_close(r, c);
                c->c2b.end += (size_t) k;
                return conn_parse(r, c);
        }
        case CONN_PUMP:
                if (c->c2b_lost) {
                        /* Read and dropped (unread, it would make our close
                         * a reset, which may cost the client what we sent
                         * last), to its end. */
                        char sink[4096];
                        ssize_t k = read(c->client, sink, sizeof(sink));
                        if (k == 0)
                                c->c2b_lost = false;
                        else if (k < 0 && errno != EAGAIN && errno != EINTR)
                                return conn_close(r, c);
                        return;
                }
                if (!pump_in(c->client, &c->c2b, &c->c2b_eof))
                        return conn_close(r, c);
                return;
        case CONN_DRAIN: {
                char sink[4096];
                ssize_t k = read(c->client, sink, sizeof(sink));
                if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
                        conn_close(r, c);
                return;
        }
        case CONN_ANSWER:
        case CONN_CLOSING:
        case _CONN_STATE_MAX:
        case _CONN_STATE_INVALID:
                return;
        }
}

static void conn_broker_event(Relay *r, Conn *c, uint32_t ev) {
        if (c->state == CONN_ANSWER) {
                if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
                        conn_read_answer(r, c);
                return;
        }
        if (c->state != CONN_PUMP)
                return;
        /* The broker's end takes no more (the server closed while the
         * client still sent): what the client sends from here has nowhere
         * to go and is dropped, and what the broker sent still reaches the
         * client, as it does before a reset from the broker. */
        if ((ev & EPOLLOUT) && !pump_out(c->broker, &c->c2b)) {
                c->c2b_lost = !c->c2b_eof;
                c->c2b_eof = c->c2b_shut = true;
                c->c2b.start = c->c2b.end = 0;
        }
        if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && (c->broker_mask & EPOLLIN) &&
            !pump_in(c->broker, &c->b2c, &c->b2c_eof))
                c->b2c_eof = true;
}

/* Shut what is done, register what is wanted, close what is over. */
static void conn_update(Relay *r, Conn *c) {
        uint32_t cm = 0, bm = 0;
        if (c->dead)
                return;
        if (!buf_empty(&c->b2c))
                cm |= EPOLLOUT;
        switch (c->state) {
        case CONN_HTTP:
        case CONN_SOCKS_GREETING:
        case CONN_SOCKS_REQUEST:
                cm |= EPOLLIN;
                break;
        case CONN_ANSWER:
                bm |= EPOLLIN;
                break;
        case CONN_PUMP:
                if (c->c2b_eof && buf_empty(&c->c2b) && !c->c2b_shut) {
                        (void) shutdown(c->broker, SHUT_WR);
                        c->c2b_shut = true;
                }
                if (c->b2c_eof && buf_empty(&c->b2c) && !c->b2c_shut) {
                        (void) shutdown(c->client, SHUT_WR);
                        c->b2c_shut = true;
                }
                if (c->c2b_shut && c->b2c_shut)
                        return conn_close(r, c);
                if ((!c->c2b_eof && buf_room(&c->c2b)) || c->c2b_lost)
                        cm |= EPOLLIN;
                if (!buf_empty(&c->c2b))
                        bm |= EPOLLOUT;
                if (!c->b2c_eof && buf_room(&c->b2c))
                        bm |= EPOLLIN;
                break;
        case CONN_CLOSING:
                if (buf_empty(&c->b2c)) {
                        /* Read what the client still sends before closing, so
                         * the kernel does not reset the connection under the
                         * answer it has not read yet. */
                        (void) shutdown(c->client, SHUT_WR);
                        c->state = CONN_DRAIN;
                        c->deadline = now_ms() + RELAY_DRAIN_TIMEOUT_MS;
                        cm |= EPOLLIN;
                }
                break;
        case CONN_DRAIN:
                cm |= EPOLLIN;
                break;
        case _CONN_STATE_MAX:
        case _CONN_STATE_INVALID:
                return conn_close(r, c);
        }
        set_mask(r, c, c->client, &c->client_mask, cm, 0);
        set_mask(r, c, c->broker, &c->broker_mask, bm, 1);
}

static void conn_expire(Relay *r, Conn *c) {
        switch (c->state) {
        case CONN_HTTP:
                conn_refuse_http(c, 408, BROKER_ERR_TIMEOUT, "the request did not come in time");
                break;
        case CONN_SOCKS_GREETING:
        case CONN_SOCKS_REQUEST:
                conn_close(r, c);
                break;
        case CONN_ANSWER:
                conn_refuse(c, BROKER_ERR_TIMEOUT, "the broker did not answer in time");
                break;
        case CONN_PUMP:
        case CONN_CLOSING:
        case CONN_DRAIN:
        case _CONN_STATE_MAX:
        case _CONN_STATE_INVALID:
                conn_close(r, c);
                break;
        }
        conn_update(r, c);
}

static void relay_accept(Relay *r, int lfd, bool socks) {
        for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == ECONNABORTED || errno == EINTR)
                                continue;
                        return; /* EAGAIN; or out of descriptors: the limit below keeps clear of that */
                }
                unsigned slot = 0;
                while (slot < r->max_conns && r->conns[slot])
                        slot++;
                Conn *c = slot < r->max_conns ? calloc(1, sizeof(*c)) : NULL;
                if (c) {
                        c->c2b.data = malloc(RELAY_BUF_SIZE);
                        c->b2c.data = malloc(RELAY_BUF_SIZE);
                }
                if (!c || !c->c2b.data || !c->b2c.data) {
                        if (c) {
                                free(c->c2b.data);
                                free(c->b2c.data);
                                free(c);
                        }
                        if (!socks) {
                                char out[512];
                                size_t n = http_refusal(out, sizeof(out), 503, BROKER_ERR_LIMIT,
                                                        "too many clients of the relay");
                                (void) send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
                        }
                        safe_close(fd);
                        continue;
                }
                c->slot = slot;
                c->client = fd;
                c->broker = -EBADF;
                c->state = socks ? CONN_SOCKS_GREETING : CONN_HTTP;
                c->target.kind = socks ? PROXY_SOCKS5 : _PROXY_KIND_INVALID;
                c->deadline = now_ms() + RELAY_REQUEST_TIMEOUT_MS;
                proxy_http_init(&c->http);
                r->conns[slot] = c;
                r->n_conns++;
                conn_update(r, c);
        }
}

/* --listen ADDR: 127.0.0.1 unless told (an egress pod listens on its
 * own address for the agent's pod); an IPv4 or IPv6 literal. */
static const char *arg_listen = "127.0.0.1";

static int listen_on(unsigned port) {
        struct sockaddr_storage ss = {};
        socklen_t len;
        struct sockaddr_in *in4 = (struct sockaddr_in *) &ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
        if (inet_pton(AF_INET, arg_listen, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons((uint16_t) port);
                len = sizeof(*in4);
        } else if (inet_pton(AF_INET6, arg_listen, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t) port);
                len = sizeof(*in6);
        } else
                return -EINVAL;
        int one = 1;
        _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ss.ss_family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, 128) < 0)
                return -errno;
        return TAKE_FD(fd);
}

static int serve(void) {
        Relay r = { .epoll = -EBADF, .listen_http = -EBADF, .listen_socks = -EBADF };
        struct rlimit rl;

        /* Two descriptors a client, and a few of our own. */
        r.max_conns = RELAY_CLIENTS_MAX;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                if (rl.rlim_cur < rl.rlim_max) {
                        rl.rlim_cur = rl.rlim_max;
                        (void) setrlimit(RLIMIT_NOFILE, &rl);
                        (void) getrlimit(RLIMIT_NOFILE, &rl);
                }
                if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 2u * RELAY_CLIENTS_MAX + 16u)
                        r.max_conns = rl.rlim_cur > 32 ? (unsigned) (rl.rlim_cur - 16u) / 2u : 8u;
        }
        r.conns = calloc(r.max_conns, sizeof(*r.conns));
        if (!r.conns) {
                fputs("lazaret-relay: out of memory\n", stderr);
                return 1;
        }
        r.listen_http = listen_on(arg_http_port);
        if (r.listen_http < 0) {
                fprintf(stderr, "lazaret-relay: cannot listen on %s port %u: %s\n", arg_listen, arg_http_port,
                        strerror(-r.listen_http));
                return 1;
        }
        r.listen_socks = listen_on(arg_socks_port);
        if (r.listen_socks < 0) {
                fprintf(stderr, "lazaret-relay: cannot listen on %s port %u: %s\n", arg_listen, arg_socks_port,
                        strerror(-r.listen_socks));
                return 1;
        }
        r.epoll = epoll_create1(EPOLL_CLOEXEC);
        if (r.epoll < 0) {
                fprintf(stderr, "lazaret-relay: epoll: %s\n", strerror(errno));
                return 1;
        }
        struct epoll_event lh = { .events = EPOLLIN, .data.u64 = TAG_LISTEN_HTTP };
        struct epoll_event ls = { .events = EPOLLIN, .data.u64 = TAG_LISTEN_SOCKS };
        if (epoll_ctl(r.epoll, EPOLL_CTL_ADD, r.listen_http, &lh) < 0 ||
            epoll_ctl(r.epoll, EPOLL_CTL_ADD, r.listen_socks, &ls) < 0) {
                fprintf(stderr, "lazaret-relay: epoll: %s\n", strerror(errno));
                return 1;
        }

        for (;;) {
                struct epoll_event ev[64];
                uint64_t now = now_ms(), next = 0;
                for (unsigned i = 0; i < r.max_conns; i++)
                        if (r.conns[i] && r.conns[i]->deadline && (!next || r.conns[i]->deadline < next))
                                next = r.conns[i]->deadline;
                int timeout = !next ? -1 : next <= now ? 0 : (int) (next - now);
                int n = epoll_wait(r.epoll, ev, (int) ELEMENTSOF(ev), timeout);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        fprintf(stderr, "lazaret-relay: epoll_wait: %s\n", strerror(errno));
                        return 1;
                }
                for (int i = 0; i < n; i++) {
                        uint64_t tag = ev[i].data.u64;
                        if (tag == TAG_LISTEN_HTTP || tag == TAG_LISTEN_SOCKS) {
                                relay_accept(&r, tag == TAG_LISTEN_HTTP ? r.listen_http : r.listen_socks,
                                             tag == TAG_LISTEN_SOCKS);
                                continue;
                        }
                        Conn *c = r.conns[tag >> 1];
                        if (!c || c->dead)
                                continue;
                        if (tag & 1)
                                conn_broker_event(&r, c, ev[i].events);
                        else
                                conn_client_event(&r, c, ev[i].events);
                        conn_update(&r, c);
                }
                now = now_ms();
                for (unsigned i = 0; i < r.max_conns; i++) {
                        Conn *c = r.conns[i];
                        if (c && !c->dead && c->deadline && c->deadline <= now)
                                conn_expire(&r, c);
                }
                /* Freed only now: an event later in this batch may name a
                 * connection closed earlier in it. */
                for (unsigned i = 0; i < r.max_conns; i++)
                        if (r.conns[i] && r.conns[i]->dead)
                                conn_free(&r, r.conns[i]);
        }
}

/* ---- --connect and --probe ---- */

static int write_all(int fd, const char *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/* Ask the broker; *ret_fd the connection, early the bytes after the answer
 * line. Returns 0 with the answer, or -errno with why set (no broker, or
 * not its protocol). */
static int stream_open(const char *host, unsigned port, Answer *ret, int *ret_fd, char *early, size_t *early_n,
                       char *why, size_t why_size) {
        char line[BROKER_REQUEST_MAX + 1], buf[RELAY_ANSWER_MAX];
        size_t n = broker_request(line, sizeof(line), host, port, BROKER_VIA_STREAM), got = 0;
        if (n == 0 || n > BROKER_REQUEST_MAX) {
                snprintf(why, why_size, "the request does not fit the broker's line");
                return -EINVAL;
        }
        const char *via = arg_broker;
        _cleanup_close_ int fd = broker_connect(false, &via);
        if (fd < 0) {
                snprintf(why, why_size, "cannot connect to the broker at %s: %s", via, strerror(-fd));
                return fd;
        }
        int r = write_all(fd, line, n);
        if (r < 0) {
                snprintf(why, why_size, "cannot send to the broker: %s", strerror(-r));
                return r;
        }
        uint64_t deadline = now_ms() + RELAY_ANSWER_TIMEOUT_MS;
        for (;;) {
                const char *nl = memchr(buf, '\n', got);
                if (nl) {
                        size_t ln = (size_t) (nl - buf);
                        if (answer_parse(buf, ln, ret) < 0) {
                                snprintf(why, why_size, "the broker's answer is neither OK nor ERR");
                                return -EPROTO;
                        }
                        *early_n = got - ln - 1;
                        memcpy(early, nl + 1, *early_n);
                        *ret_fd = TAKE_FD(fd);
                        return 0;
                }
                if (got == sizeof(buf)) {
                        snprintf(why, why_size, "the broker's answer line is too long");
                        return -EPROTO;
                }
                uint64_t now = now_ms();
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int k = now >= deadline ? 0 : poll(&p, 1, (int) (deadline - now));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k == 0) {
                        snprintf(why, why_size, "the broker did not answer in time");
                        return -ETIMEDOUT;
                }
                ssize_t m = k < 0 ? -1 : read(fd, buf + got, sizeof(buf) - got);
                if (m < 0 && errno == EINTR)
                        continue;
                if (m <= 0) {
                        snprintf(why, why_size, "the broker closed the connection without an answer");
                        return -EPROTO;
                }
                got += (size_t) m;
        }
}

static void parse_target(const char *host_arg, const char *port_arg, char host[static PROXY_HOST_MAX + 1],
                         uint16_t *port) {
        const char *why;
        char shown[4 * 64 + 1];
        if (proxy_host_parse(host_arg, strlen(host_arg), host, &why) < 0) {
                char msg[512];
                escape(host_arg, strnlen(host_arg, 64), shown, sizeof(shown));
                snprintf(msg, sizeof(msg), "bad host '%s': %s", shown, why);
                die_usage(msg);
        }
        if (proxy_port_parse(port_arg, strlen(port_arg), port) < 0)
                die_usage("bad port (a decimal number 1..65535)");
}

/* Does something accept TCP connections on 127.0.0.1:port? Tried until
 * the deadline: init may have started the relay a moment ago. */
static bool listening(unsigned port, uint64_t deadline) {
        for (;;) {
                _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_in sa = { .sin_family = AF_INET,
                                          .sin_port = htons((uint16_t) port),
                                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                if (fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0)
                        return true;
                if (now_ms() >= deadline)
                        return false;
                (void) usleep(20000);
        }
}

static int probe(const char *host_arg, const char *port_arg) {
        char host[PROXY_HOST_MAX + 1], early[RELAY_ANSWER_MAX], why[256];
        uint16_t port;
        size_t early_n;
        Answer a;
        int fd;
        parse_target(host_arg, port_arg, host, &port);
        if (arg_wait_listeners) {
                uint64_t deadline = now_ms() + RELAY_LISTEN_WAIT_MS;
                for (unsigned p = 0; p < 2; p++) {
                        unsigned lp = p == 0 ? arg_http_port : arg_socks_port;
                        if (!listening(lp, deadline)) {
                                printf("error the relay does not listen on 127.0.0.1:%u\n", lp);
                                return 1;
                        }
                }
        }
        if (stream_open(host, port, &a, &fd, early, &early_n, why, sizeof(why)) < 0) {
                printf("error %s\n", why);
                return 1;
        }
        safe_close(fd);
        if (a.ok) {
                printf("ok %s %s\n", a.address, a.port);
                return 0;
        }
        printf("refused %s %s\n", a.code, a.message);
        return 3;
}

static int connect_stream(const char *host_arg, const char *port_arg) {
        char host[PROXY_HOST_MAX + 1], early[RELAY_ANSWER_MAX], why[256];
        uint16_t port;
        size_t early_n;
        Answer a;
        _cleanup_close_ int fd = -EBADF;
        parse_target(host_arg, port_arg, host, &port);
        if (stream_open(host, port, &a, &fd, early, &early_n, why, sizeof(why)) < 0) {
                fprintf(stderr, "lazaret-relay: %s\n", why);
                return 1;
        }
        if (!a.ok) {
                fprintf(stderr, "lazaret-relay: refused: %s %s\n", a.code, a.message);
                return 1;
        }
        if (write_all(STDOUT_FILENO, early, early_n) < 0)
                return 1;

        /* stdin to the broker, the broker to stdout. Writes block: the
         * other end (ssh, the broker) reads as it can, and neither waits on
         * us to read before reading itself. When the broker takes no more
         * (the server closed while ssh still sent), what it sent before
         * still goes to stdout, to its end: exit 0 on its end, 1 on a
         * reset or a failed write to stdout. */
        static char buf[RELAY_BUF_SIZE];
        bool in_eof = false;
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = in_eof ? -1 : STDIN_FILENO, .events = POLLIN },
                        { .fd = fd, .events = POLLIN },
                };
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return 1;
                }
                if (p[0].revents) {
                        ssize_t k = read(STDIN_FILENO, buf, sizeof(buf));
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0) {
                                in_eof = true;
                                (void) shutdown(fd, SHUT_WR);
                        } else if (write_all(fd, buf, (size_t) k) < 0)
                                in_eof = true; /* the broker's side is gone: ours too */
                }
                if (p[1].revents) {
                        ssize_t k = read(fd, buf, sizeof(buf));
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0)
                                return k < 0 ? 1 : 0;
                        if (write_all(STDOUT_FILENO, buf, (size_t) k) < 0)
                                return 1;
                }
        }
}

static unsigned parse_port_arg(const char *s) {
        uint16_t p;
        if (!s || proxy_port_parse(s, strlen(s), &p) < 0)
                die_usage("bad port (a decimal number 1..65535)");
        return p;
}

int main(int argc, char **argv) {
        const char *mode = NULL, *host = NULL, *port = NULL;

        signal(SIGPIPE, SIG_IGN);
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--broker") == 0 && i + 1 < argc) {
                        arg_broker = argv[++i];
                        arg_broker_given = true;
                } else if (strcmp(a, "--http-port") == 0 && i + 1 < argc)
                        arg_http_port = parse_port_arg(argv[++i]);
                else if (strcmp(a, "--socks-port") == 0 && i + 1 < argc)
                        arg_socks_port = parse_port_arg(argv[++i]);
                else if (strcmp(a, "--listen") == 0 && i + 1 < argc)
                        arg_listen = argv[++i];
                else if (strcmp(a, "--listening") == 0)
                        arg_wait_listeners = true;
                else if ((strcmp(a, "--connect") == 0 || strcmp(a, "--probe") == 0) && i + 2 < argc && !mode) {
                        mode = a;
                        host = argv[++i];
                        port = argv[++i];
                } else
                        die_usage("bad arguments");
        }
        if (strlen(arg_broker) >= sizeof(((struct sockaddr_un *) NULL)->sun_path))
                die_usage("the broker's socket path is too long");
        {
                unsigned char addr[16];
                if (inet_pton(AF_INET, arg_listen, addr) != 1 && inet_pton(AF_INET6, arg_listen, addr) != 1)
                        die_usage("--listen takes an IPv4 or IPv6 address (no name)");
        }
        if (mode && strcmp(mode, "--probe") == 0)
                return probe(host, port);
        if (mode)
                return connect_stream(host, port);
        return serve();
}
