/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy-request.h"

static bool is_tchar(char c) {
        /* RFC 9110 token characters. */
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static bool span_eq(const char *s, size_t n, const char *lit) {
        return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static bool span_eq_nocase(const char *s, size_t n, const char *lit) {
        if (strlen(lit) != n)
                return false;
        for (size_t i = 0; i < n; i++) {
                char a = s[i], b = lit[i];
                if (a >= 'A' && a <= 'Z')
                        a = (char) (a - 'A' + 'a');
                if (b >= 'A' && b <= 'Z')
                        b = (char) (b - 'A' + 'a');
                if (a != b)
                        return false;
        }
        return true;
}

static ProxyStatus refuse(ProxyResult *ret, unsigned http_status, const char *reason) {
        ret->refusal = (ProxyRefusal){
                .reason = reason,
                .http_status = http_status,
                .socks_answer = PROXY_SOCKS_REPLY,
                .socks_reply = PROXY_SOCKS_REP_GENERAL,
        };
        return PROXY_REFUSED;
}

static ProxyStatus refuse_socks(ProxyResult *ret, ProxySocksAnswer answer, uint8_t reply, const char *reason) {
        ret->refusal = (ProxyRefusal){
                .reason = reason,
                .http_status = 400,
                .socks_answer = answer,
                .socks_reply = reply,
        };
        return PROXY_REFUSED;
}

int proxy_port_parse(const char *s, size_t len, uint16_t *ret) {
        unsigned v = 0;
        if (len == 0 || len > 5)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

static int host_name(const char *s, size_t len, char ret[static PROXY_HOST_MAX + 1], const char **ret_error) {
        if (len == 0) {
                *ret_error = "empty host";
                return -EINVAL;
        }
        if (len > PROXY_HOST_MAX) {
                *ret_error = "the host is longer than 254 bytes";
                return -EINVAL;
        }
        for (size_t i = 0; i < len; i++)
                if (!is_name_char(s[i])) {
                        *ret_error = "the host has a byte that is not a letter, digit, hyphen or dot "
                                     "(an IPv6 address goes in brackets)";
                        return -EINVAL;
                }
        memcpy(ret, s, len);
        ret[len] = '\0';
        return 0;
}

static int host_ipv6(const char *s, size_t len, char ret[static PROXY_HOST_MAX + 1], const char **ret_error) {
        char tmp[INET6_ADDRSTRLEN];
        unsigned char bin[16];
        if (len == 0) {
                *ret_error = "empty host";
                return -EINVAL;
        }
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F') ||
                      s[i] == ':' || s[i] == '.')) {
                        *ret_error = "not an IPv6 address (zone identifiers are not accepted)";
                        return -EINVAL;
                }
        if (len >= sizeof(tmp)) {
                *ret_error = "not an IPv6 address";
                return -EINVAL;
        }
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        if (inet_pton(AF_INET6, tmp, bin) != 1) {
                *ret_error = "not an IPv6 address";
                return -EINVAL;
        }
        memcpy(ret, tmp, len + 1);
        return 0;
}

int proxy_host_parse(const char *s, size_t len, char ret[static PROXY_HOST_MAX + 1], const char **ret_error) {
        if (len >= 2 && s[0] == '[' && s[len - 1] == ']')
                return host_ipv6(s + 1, len - 2, ret, ret_error);
        if (memchr(s, ':', len))
                return host_ipv6(s, len, ret, ret_error);
        return host_name(s, len, ret, ret_error);
}

/* host[:port] of a request target; a port is required for CONNECT. */
static ProxyStatus parse_authority(const char *s, size_t n, bool need_port, ProxyTarget *t, ProxyResult *ret) {
        const char *why;
        size_t host_len;
        const char *port = NULL;
        size_t port_len = 0;
        int r;

        if (memchr(s, '@', n))
                return refuse(ret, 400, "a userinfo part (user@host) is not accepted");
        if (n == 0)
                return refuse(ret, 400, "empty host");
        if (s[0] == '[') {
                const char *close = memchr(s, ']', n);
                if (!close)
                        return refuse(ret, 400, "an IPv6 address without its closing ']'");
                host_len = (size_t) (close - s) + 1;
                if (host_len < n) {
                        if (s[host_len] != ':')
                                return refuse(ret, 400, "bytes after the IPv6 address that are not a port");
                        port = s + host_len + 1;
                        port_len = n - host_len - 1;
                }
                if (host_len == 2)
                        return refuse(ret, 400, "empty host");
                r = host_ipv6(s + 1, host_len - 2, t->host, &why);
        } else {
                const char *colon = memchr(s, ':', n);
                host_len = colon ? (size_t) (colon - s) : n;
                if (colon && memchr(colon + 1, ':', n - host_len - 1))
                        return refuse(ret, 400, "an IPv6 address must be written in brackets");
                if (colon) {
                        port = colon + 1;
                        port_len = n - host_len - 1;
                }
                r = host_name(s, host_len, t->host, &why);
        }
        if (r < 0)
                return refuse(ret, 400, why);
        if (port) {
                if (proxy_port_parse(port, port_len, &t->port) < 0)
                        return refuse(ret, 400, "bad port (a decimal number 1..65535)");
        } else if (need_port)
                return refuse(ret, 400, "CONNECT needs host:port");
        else
                t->port = 80;
        return PROXY_DONE;
}

static ProxyStatus request_line(ProxyHttp *p, const char *buf, size_t start, size_t end) {
        const char *l = buf + start;
        size_t n = end - start;
        ProxyResult *ret = &p->result;
        ProxyTarget *t = &ret->target;

        if (n == 0)
                return refuse(ret, 400, "empty request line");
        const char *sp1 = memchr(l, ' ', n);
        if (!sp1)
                return refuse(ret, 400, "a request line without a request target");
        size_t mlen = (size_t) (sp1 - l);
        if (mlen == 0)
                return refuse(ret, 400, "a request line without a method");
        for (size_t i = 0; i < mlen; i++)
                if (!is_tchar(l[i]))
                        return refuse(ret, 400, "the method has a byte that is not a token character");
        const char *tg = sp1 + 1;
        const char *sp2 = memchr(tg, ' ', n - mlen - 1);
        if (!sp2)
                return refuse(ret, 400, "missing HTTP version");
        size_t tlen = (size_t) (sp2 - tg);
        if (tlen == 0)
                return refuse(ret, 400, "empty request target");
        for (size_t i = 0; i < tlen; i++)
                if ((unsigned char) tg[i] <= 0x20 || (unsigned char) tg[i] >= 0x7f)
                        return refuse(ret, 400, "the request target has a byte that is not visible ASCII");
        const char *v = sp2 + 1;
        size_t vlen = (size_t) (l + n - v);
        if (!span_eq(v, vlen, "HTTP/1.1") && !span_eq(v, vlen, "HTTP/1.0")) {
                if (vlen == 8 && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' && v[5] <= '9' && v[6] == '.' &&
                    v[7] >= '0' && v[7] <= '9')
                        return refuse(ret, 505, "HTTP version not supported (HTTP/1.0 and HTTP/1.1 only)");
                return refuse(ret, 400, "bad HTTP version");
        }
        p->method_len = mlen;
        p->version_off = (size_t) (v - buf);

        if (span_eq(l, mlen, "CONNECT")) {
                if (tg[0] == '/' || memmem(tg, tlen, "://", 3))
                        return refuse(ret, 400, "CONNECT needs host:port");
                t->kind = PROXY_HTTP_CONNECT;
                return parse_authority(tg, tlen, true, t, ret);
        }
        if (tg[0] == '/' || span_eq(tg, tlen, "*"))
                return refuse(ret, 405, "not a proxy request (origin-form: the target has no host)");
        const char *sep = memmem(tg, tlen, "://", 3);
        if (!sep)
                return refuse(ret, 400, "bad request target (want http://host/path, or CONNECT host:port)");
        size_t slen = (size_t) (sep - tg);
        if (span_eq_nocase(tg, slen, "https"))
                return refuse(ret, 400, "https:// in absolute-form: use CONNECT");
        if (!span_eq_nocase(tg, slen, "http"))
                return refuse(ret, 400, "scheme not supported (only http://, or CONNECT)");
        const char *a = sep + 3, *tend = tg + tlen, *e = a;
        while (e < tend && *e != '/' && *e != '?')
                e++;
        t->kind = PROXY_HTTP_ABSOLUTE;
        p->authority_off = (size_t) (a - buf);
        p->authority_len = (size_t) (e - a);
        p->path_off = (size_t) (e - buf);
        p->path_len = (size_t) (tend - e);
        return parse_authority(a, (size_t) (e - a), false, t, ret);
}

static ProxyStatus header_line(ProxyHttp *p, const char *l, size_t n) {
        ProxyResult *ret = &p->result;
        if (l[0] == ' ' || l[0] == '\t')
                return refuse(ret, 400, "an obs-fold continuation line (a header line starting with a space)");
        const char *colon = memchr(l, ':', n);
        if (!colon)
                return refuse(ret, 400, "a header line without ':'");
        size_t nlen = (size_t) (colon - l);
        if (nlen == 0)
                return refuse(ret, 400, "a header line with an empty name");
        for (size_t i = 0; i < nlen; i++)
                if (!is_tchar(l[i]))
                        return refuse(ret, 400, "a header name has a byte that is not a token character");
        for (size_t i = nlen + 1; i < n; i++) {
                unsigned char c = (unsigned char) l[i];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return refuse(ret, 400, "a control byte in a header value");
        }
        if (span_eq_nocase(l, nlen, "host") && ++p->n_host > 1)
                return refuse(ret, 400, "more than one Host header");
        return PROXY_MORE;
}

void proxy_http_init(ProxyHttp *p) {
        *p = (ProxyHttp){ .status = PROXY_MORE };
}

ProxyStatus proxy_http_feed(ProxyHttp *p, const char *buf, size_t len, ProxyResult *ret) {
        size_t end = len < PROXY_HEAD_MAX ? len : PROXY_HEAD_MAX;

        for (size_t i = p->scanned; p->status == PROXY_MORE && i < end; i++) {
                char c = buf[i];
                p->scanned = i + 1;
                if (c == '\0') {
                        p->status = refuse(&p->result, 400, "a NUL byte in the request head");
                        break;
                }
                if (p->cr && c != '\n') {
                        p->status = refuse(&p->result, 400, "a bare CR in the request head");
                        break;
                }
                if (c == '\r') {
                        p->cr = true;
                        continue;
                }
                if (c != '\n')
                        continue;
                size_t line_end = i - (p->cr ? 1 : 0);
                p->cr = false;
                if (!p->have_request_line) {
                        p->status = request_line(p, buf, p->line_start, line_end);
                        if (p->status == PROXY_DONE)
                                p->status = PROXY_MORE;
                        p->have_request_line = true;
                } else if (line_end == p->line_start) {
                        p->result.consumed = i + 1;
                        p->status = PROXY_DONE;
                } else
                        p->status = header_line(p, buf + p->line_start, line_end - p->line_start);
                p->line_start = i + 1;
        }
        if (p->status == PROXY_MORE && len > PROXY_HEAD_MAX)
                p->status = refuse(&p->result, 431, "header over 8 KiB");
        *ret = p->result;
        return p->status;
}

typedef struct Out {
        char *p;
        size_t n, size;
        bool overflow;
} Out;

static void put(Out *o, const char *s, size_t n) {
        if (o->overflow || o->size - o->n < n) {
                o->overflow = true;
                return;
        }
        memcpy(o->p + o->n, s, n);
        o->n += n;
}

static void puts_lit(Out *o, const char *s) {
        put(o, s, strlen(s));
}

int proxy_http_rewrite(const ProxyHttp *p, const char *buf, char *out, size_t size, size_t *ret_len) {
        Out o = { .p = out, .size = size };

        if (p->status != PROXY_DONE || p->result.target.kind != PROXY_HTTP_ABSOLUTE)
                return -EINVAL;
        put(&o, buf, p->method_len);
        puts_lit(&o, " ");
        if (p->path_len == 0 || buf[p->path_off] == '?')
                puts_lit(&o, "/");
        put(&o, buf + p->path_off, p->path_len);
        puts_lit(&o, " ");
        put(&o, buf + p->version_off, 8);
        puts_lit(&o, "\r\n");

        /* The lines were all checked by proxy_http_feed: skip the request
         * line, copy the headers up to the blank line. */
        const char *s = memchr(buf, '\n', p->result.consumed);
        const char *end = buf + p->result.consumed;
        for (s = s + 1; s < end;) {
                const char *nl = memchr(s, '\n', (size_t) (end - s));
                size_t n = (size_t) (nl - s);
                if (n > 0 && s[n - 1] == '\r')
                        n--;
                if (n == 0)
                        break;
                size_t nlen = (size_t) ((const char *) memchr(s, ':', n) - s);
                if (!span_eq_nocase(s, nlen, "proxy-connection") && !span_eq_nocase(s, nlen, "proxy-authorization") &&
                    !span_eq_nocase(s, nlen, "connection") && !span_eq_nocase(s, nlen, "keep-alive")) {
                        put(&o, s, n);
                        puts_lit(&o, "\r\n");
                }
                s = nl + 1;
        }
        if (p->n_host == 0) {
                puts_lit(&o, "Host: ");
                put(&o, buf + p->authority_off, p->authority_len);
                puts_lit(&o, "\r\n");
        }
        puts_lit(&o, "Connection: close\r\n\r\n");
        if (o.overflow)
                return -ENOBUFS;
        *ret_len = o.n;
        return 0;
}

ProxyStatus proxy_socks_greeting(const uint8_t *buf, size_t len, ProxyResult *ret) {
        if (len < 1)
                return PROXY_MORE;
        if (buf[0] == 4)
                return refuse_socks(ret, PROXY_SOCKS_SOCKS4_REJECT, 0, "SOCKS4 is not supported (use SOCKS5)");
        if (buf[0] != 5)
                return refuse_socks(ret, PROXY_SOCKS_CLOSE, 0, "not a SOCKS5 greeting");
        if (len < 2)
                return PROXY_MORE;
        if (buf[1] == 0)
                return refuse_socks(ret, PROXY_SOCKS_NO_METHOD, 0, "a SOCKS5 greeting without methods");
        size_t n = 2u + buf[1];
        if (len < n)
                return PROXY_MORE;
        if (!memchr(buf + 2, 0x00, buf[1]))
                return refuse_socks(ret, PROXY_SOCKS_NO_METHOD, 0,
                                    "only SOCKS5 method 0 (no authentication) is accepted");
        ret->consumed = n;
        return PROXY_DONE;
}

ProxyStatus proxy_socks_request(const uint8_t *buf, size_t len, ProxyResult *ret) {
        ProxyTarget *t = &ret->target;
        size_t alen;
        const char *why;

        /* Each check needs only the bytes up to the field it looks at, in
         * order, so a split request is refused for the same reason. */
        if (len < 1)
                return PROXY_MORE;
        if (buf[0] != 5)
                return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_GENERAL, "not a SOCKS5 request");
        if (len < 2)
                return PROXY_MORE;
        switch (buf[1]) {
        case 1:
                break;
        case 2:
                return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_COMMAND, "SOCKS5 BIND is not supported");
        case 3:
                return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_COMMAND,
                                    "SOCKS5 UDP ASSOCIATE is not supported");
        default:
                return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_COMMAND, "unknown SOCKS5 command");
        }
        if (len < 3)
                return PROXY_MORE;
        if (buf[2] != 0)
                return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_GENERAL,
                                    "the reserved byte of a SOCKS5 request is not 0");
        if (len < 4)
                return PROXY_MORE;
        switch (buf[3]) {
        case 1:
                alen = 4;
                break;
        case 4:
                alen = 16;
                break;
        case 3:
                if (len < 5)
                        return PROXY_MORE;
                alen = 1u + buf[4];
                break;
        default:
                return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_ATYP, "unknown SOCKS5 address type");
        }
        if (len < 4 + alen)
                return PROXY_MORE;
        if (buf[3] == 3) {
                if (host_name((const char *) buf + 5, alen - 1, t->host, &why) < 0)
                        return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_NOT_ALLOWED, why);
        } else if (!inet_ntop(buf[3] == 1 ? AF_INET : AF_INET6, buf + 4, t->host, PROXY_HOST_MAX + 1))
                return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_GENERAL, "bad SOCKS5 address");
        if (len < 4 + alen + 2)
                return PROXY_MORE;
        unsigned port = (unsigned) buf[4 + alen] << 8 | buf[4 + alen + 1];
        if (port == 0)
                return refuse_socks(ret, PROXY_SOCKS_REPLY, PROXY_SOCKS_REP_GENERAL, "port 0");
        t->kind = PROXY_SOCKS5;
        t->port = (uint16_t) port;
        ret->consumed = 4 + alen + 2;
        return PROXY_DONE;
}
