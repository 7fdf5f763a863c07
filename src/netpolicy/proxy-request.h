/* SPDX-License-Identifier: MIT */
#pragma once

/* What a proxy client sends first to lazaret-relay (issue 18): an HTTP
 * request head (CONNECT, or a plain-HTTP request in absolute-form) on the
 * HTTP port, a SOCKS5 greeting and request on the SOCKS port. Pure: libc
 * only, no allocation, no I/O, so the static relay, the unit tests and the
 * fuzzer link the same code. The relay is a convenience for proxy-aware
 * clients, not the enforcement: the broker checks every host and port
 * again, and the agent may talk to the broker itself.
 *
 * Feeding is incremental. The caller keeps every byte the client sent so
 * far in one buffer and calls the parser again with the longer buffer as
 * bytes arrive (the bytes already seen must not change). Each call answers
 * PROXY_MORE, PROXY_DONE (the request took the first ProxyResult.consumed
 * bytes; what follows is the client's payload) or PROXY_REFUSED (with a
 * static reason and what to answer). The result depends on the bytes only,
 * never on how they were split: one byte at a time gives the same answer
 * as all at once.
 *
 * Hosts are handed on as text: a name as written (letters, digits, '-' and
 * '.'; the broker canonicalizes and checks it), or an IP literal without
 * brackets. IP literals are passed on, from HTTP and from SOCKS5 (ATYP 1
 * and 4) alike: whether one may be reached is the broker's decision (a
 * CIDR rule may permit it; without one it answers "ip-literal"). */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROXY_HEAD_MAX 8192u /* an HTTP request head, its blank line included */
#define PROXY_HOST_MAX 254u /* a 253-byte name and a trailing dot */
/* Enough for any rewritten head of at most PROXY_HEAD_MAX bytes: every
 * line gains at most one byte (LF to CRLF), plus Host and Connection. */
#define PROXY_REWRITE_MAX        (2u * PROXY_HEAD_MAX)
#define PROXY_SOCKS_GREETING_MAX (2u + 255u)
#define PROXY_SOCKS_REQUEST_MAX  (5u + 255u + 2u)

/* SOCKS5 reply codes (RFC 1928 section 6). */
#define PROXY_SOCKS_REP_GENERAL     0x01u
#define PROXY_SOCKS_REP_NOT_ALLOWED 0x02u
#define PROXY_SOCKS_REP_HOST        0x04u
#define PROXY_SOCKS_REP_REFUSED     0x05u
#define PROXY_SOCKS_REP_COMMAND     0x07u
#define PROXY_SOCKS_REP_ATYP        0x08u

typedef enum ProxyKind {
        PROXY_HTTP_CONNECT, /* CONNECT host:port HTTP/1.x */
        PROXY_HTTP_ABSOLUTE, /* METHOD http://host[:port]/path HTTP/1.x */
        PROXY_SOCKS5, /* SOCKS5 CONNECT */
        _PROXY_KIND_MAX,
        _PROXY_KIND_INVALID = -EINVAL,
} ProxyKind;

typedef enum ProxyStatus {
        PROXY_MORE,
        PROXY_DONE,
        PROXY_REFUSED,
        _PROXY_STATUS_MAX,
        _PROXY_STATUS_INVALID = -EINVAL,
} ProxyStatus;

/* What a SOCKS client is told when it is refused. */
typedef enum ProxySocksAnswer {
        PROXY_SOCKS_CLOSE, /* not SOCKS at all: close without answering */
        PROXY_SOCKS_SOCKS4_REJECT, /* a SOCKS4 request: 00 5B and six zero bytes */
        PROXY_SOCKS_NO_METHOD, /* greeting: 05 FF, no acceptable method */
        PROXY_SOCKS_REPLY, /* request: a SOCKS5 reply with ProxyRefusal.socks_reply */
        _PROXY_SOCKS_ANSWER_MAX,
        _PROXY_SOCKS_ANSWER_INVALID = -EINVAL,
} ProxySocksAnswer;

typedef struct ProxyRefusal {
        const char *reason; /* static, one line of printable ASCII */
        unsigned http_status; /* HTTP: 400, 405, 431, 505 */
        ProxySocksAnswer socks_answer; /* SOCKS */
        uint8_t socks_reply; /* SOCKS, with PROXY_SOCKS_REPLY */
} ProxyRefusal;

typedef struct ProxyTarget {
        ProxyKind kind;
        char host[PROXY_HOST_MAX + 1]; /* NUL-terminated, see above */
        uint16_t port; /* 1..65535 */
} ProxyTarget;

typedef struct ProxyResult {
        size_t consumed; /* PROXY_DONE: bytes the request (or greeting) took */
        ProxyTarget target; /* PROXY_DONE, except for the SOCKS greeting */
        ProxyRefusal refusal; /* PROXY_REFUSED */
} ProxyResult;

/* The HTTP parser's state between feeds; the fields are its own. */
typedef struct ProxyHttp {
        size_t scanned; /* bytes examined */
        size_t line_start; /* where the line being read begins */
        bool cr; /* the last byte examined was a CR */
        bool have_request_line;
        unsigned n_host; /* Host header lines */
        ProxyStatus status;
        ProxyResult result;
        /* The request line, as offsets into the caller's buffer. */
        size_t method_len;
        size_t authority_off, authority_len; /* absolute-form: host[:port] as written */
        size_t path_off, path_len; /* absolute-form: path and query; may be empty or start with '?' */
        size_t version_off; /* "HTTP/1.x", 8 bytes */
} ProxyHttp;

void proxy_http_init(ProxyHttp *p);

/* Parse the head in buf[0..len) (the whole of what the client sent so far;
 * bytes examined by an earlier call must be unchanged). Accepted:
 *   CONNECT host:port HTTP/1.x       host a name, an IPv4 literal or [IPv6]
 *   METHOD http://host[:port]/path HTTP/1.x   (port 80 by default)
 * then header lines "name: value", then a blank line; lines end in CRLF or
 * LF. Refused (400 unless said): userinfo (user@host), an empty host, a
 * host byte outside letters, digits, '-', '.' (or an IPv6 literal in
 * brackets), a bad or (for CONNECT) missing port, https:// or another
 * scheme in absolute-form, origin-form and asterisk-form (405: not a proxy
 * request), a missing or unknown HTTP version (505 for HTTP/2 and the
 * like), header lines without ':', obs-fold continuation lines, more than
 * one Host header, control bytes in a header, a bare CR, a NUL, and a head
 * longer than PROXY_HEAD_MAX (431). Only the first PROXY_HEAD_MAX bytes are
 * ever examined. After PROXY_DONE or PROXY_REFUSED further calls return the
 * same answer. */
ProxyStatus proxy_http_feed(ProxyHttp *p, const char *buf, size_t len, ProxyResult *ret);

/* After PROXY_DONE for a PROXY_HTTP_ABSOLUTE request, with the same buf:
 * the head to send to the server, in origin-form ("GET /path HTTP/1.1"),
 * lines ending in CRLF, every header kept except Proxy-Connection,
 * Proxy-Authorization, Connection and Keep-Alive, "Host: host[:port]" (as
 * written in the request target) added when the client sent none, and
 * "Connection: close" added: the relay hands the rest of the client's
 * connection to this one server, so a client must not send its next
 * request (perhaps for another host) down the same connection. Writes at
 * most PROXY_REWRITE_MAX bytes to out (no NUL). Returns 0 and *ret_len,
 * -EINVAL when there is no such request, -ENOBUFS when size is too small. */
int proxy_http_rewrite(const ProxyHttp *p, const char *buf, char *out, size_t size, size_t *ret_len);

/* SOCKS5 greeting: VER 5, NMETHODS >= 1, METHODS. Done when method 0x00
 * (no authentication) is offered: the caller answers 05 00. Refused: a
 * SOCKS4 request (first byte 4), another version, no methods or no 0x00
 * among them. Stateless: call again with the longer buffer. */
ProxyStatus proxy_socks_greeting(const uint8_t *buf, size_t len, ProxyResult *ret);

/* SOCKS5 request after the greeting: VER 5, CMD, RSV 0, ATYP, address,
 * port. Only CMD 1 (CONNECT): BIND and UDP ASSOCIATE are refused with
 * reply 0x07. ATYP 3 (a name, checked like an HTTP host) and ATYP 1 and 4
 * (IP literals, handed on as text: see above); another ATYP gets 0x08.
 * Port 0 is refused. Stateless like the greeting. */
ProxyStatus proxy_socks_request(const uint8_t *buf, size_t len, ProxyResult *ret);

/* A host given on its own (lazaret-relay --connect HOST PORT): a name, an
 * IPv4 literal, or an IPv6 literal with or without brackets. Writes the
 * host as handed to the broker (brackets removed) to ret. Returns 0, or
 * -EINVAL with *ret_error a static reason. */
int proxy_host_parse(const char *s, size_t len, char ret[static PROXY_HOST_MAX + 1], const char **ret_error);

/* A decimal port 1..65535 (at most 5 digits, nothing else). Returns 0 or
 * -EINVAL. */
int proxy_port_parse(const char *s, size_t len, uint16_t *ret);
