/* SPDX-License-Identifier: MIT */
/* Unit tests of src/netpolicy/proxy-request: every accepted form of an HTTP
 * proxy request and of SOCKS5, every refusal with its status, and the
 * promise that the answer never depends on how the bytes were split (each
 * case is fed all at once and one byte at a time, from an exactly sized
 * copy, so a sanitizer build sees any read past the input). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proxy-request.h"

static void assert_same(ProxyStatus s1, const ProxyResult *a, ProxyStatus s2, const ProxyResult *b) {
        assert_int_equal(s1, s2);
        if (s1 == PROXY_DONE) {
                assert_int_equal(a->consumed, b->consumed);
                assert_int_equal(a->target.kind, b->target.kind);
                assert_string_equal(a->target.host, b->target.host);
                assert_int_equal(a->target.port, b->target.port);
        } else if (s1 == PROXY_REFUSED) {
                assert_ptr_equal(a->refusal.reason, b->refusal.reason);
                assert_int_equal(a->refusal.http_status, b->refusal.http_status);
                assert_int_equal(a->refusal.socks_answer, b->refusal.socks_answer);
                assert_int_equal(a->refusal.socks_reply, b->refusal.socks_reply);
        }
}

/* Feed s both ways; the rewritten head (absolute-form) goes to rw. */
static ProxyStatus http_n(const char *s, size_t len, ProxyResult *ret, char *rw, size_t *rw_len) {
        char *copy = malloc(len ? len : 1);
        ProxyHttp one, bytes;
        ProxyResult r1, r2 = {};
        ProxyStatus s1, s2 = PROXY_MORE;

        assert_non_null(copy);
        memcpy(copy, s, len);
        proxy_http_init(&one);
        s1 = proxy_http_feed(&one, copy, len, &r1);

        proxy_http_init(&bytes);
        for (size_t k = 0; k <= len && s2 == PROXY_MORE; k++) {
                char *prefix = malloc(k ? k : 1);
                assert_non_null(prefix);
                memcpy(prefix, s, k);
                /* The parser may keep nothing but offsets: a fresh copy of
                 * the same bytes must do. */
                s2 = proxy_http_feed(&bytes, prefix, k, &r2);
                if (s2 == PROXY_DONE && rw && r2.target.kind == PROXY_HTTP_ABSOLUTE) {
                        char out2[PROXY_REWRITE_MAX];
                        size_t n2;
                        assert_int_equal(proxy_http_rewrite(&bytes, prefix, out2, sizeof(out2), &n2), 0);
                        assert_int_equal(proxy_http_rewrite(&one, copy, rw, PROXY_REWRITE_MAX, rw_len), 0);
                        assert_int_equal(n2, *rw_len);
                        assert_memory_equal(out2, rw, n2);
                }
                free(prefix);
        }
        assert_same(s1, &r1, s2, &r2);
        if (s1 == PROXY_DONE)
                assert_true(r1.consumed <= len && r1.consumed <= PROXY_HEAD_MAX);
        /* Asked again, the same answer. */
        ProxyResult r3;
        assert_int_equal(proxy_http_feed(&one, copy, len, &r3), s1);
        free(copy);
        *ret = r1;
        return s1;
}

static ProxyStatus http(const char *s, ProxyResult *ret) {
        return http_n(s, strlen(s), ret, NULL, NULL);
}

static void refused(const char *s, unsigned status, const char *why) {
        ProxyResult r;
        assert_int_equal(http(s, &r), PROXY_REFUSED);
        if (r.refusal.http_status != status || !strstr(r.refusal.reason, why))
                fail_msg("%s: got %u \"%s\", want %u \"%s\"", s, r.refusal.http_status, r.refusal.reason, status, why);
}

static void connect_ok(const char *s, const char *host, unsigned port) {
        ProxyResult r;
        assert_int_equal(http(s, &r), PROXY_DONE);
        assert_int_equal(r.target.kind, PROXY_HTTP_CONNECT);
        assert_string_equal(r.target.host, host);
        assert_int_equal(r.target.port, port);
        assert_int_equal(r.consumed, strlen(s));
}

static void test_connect_forms(void **state) {
        (void) state;
        connect_ok("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nUser-Agent: curl/8\r\n\r\n",
                   "example.com", 443);
        connect_ok("CONNECT 192.0.2.1:8443 HTTP/1.0\r\n\r\n", "192.0.2.1", 8443);
        connect_ok("CONNECT [2001:db8::1]:22 HTTP/1.1\r\n\r\n", "2001:db8::1", 22);
        connect_ok("CONNECT Example.COM.:1 HTTP/1.1\r\n\r\n", "Example.COM.", 1);
        connect_ok("CONNECT a.test:65535 HTTP/1.1\nHost: a.test\n\n", "a.test", 65535);
        /* Empty header values and tabs are fine. */
        connect_ok("CONNECT a.test:443 HTTP/1.1\r\nX-Empty:\r\nX-Tab:\tv\r\n\r\n", "a.test", 443);
}

static void test_connect_payload_follows(void **state) {
        (void) state;
        /* A client that sends its TLS hello before the 200: the head ends
         * where the blank line does, the rest is payload. */
        const char head[] = "CONNECT a.test:443 HTTP/1.1\r\n\r\n";
        const char all[] = "CONNECT a.test:443 HTTP/1.1\r\n\r\n\x16\x03\x01\x02\x00";
        ProxyResult r;
        assert_int_equal(http_n(all, sizeof(all) - 1, &r, NULL, NULL), PROXY_DONE);
        assert_int_equal(r.consumed, sizeof(head) - 1);
}

static void absolute(const char *s, const char *host, unsigned port, const char *want) {
        ProxyResult r;
        char out[PROXY_REWRITE_MAX];
        size_t n = 0;
        assert_int_equal(http_n(s, strlen(s), &r, out, &n), PROXY_DONE);
        assert_int_equal(r.target.kind, PROXY_HTTP_ABSOLUTE);
        assert_string_equal(r.target.host, host);
        assert_int_equal(r.target.port, port);
        if (n != strlen(want) || memcmp(out, want, n) != 0)
                fail_msg("rewrite of %s:\n%.*s\nwant:\n%s", s, (int) n, out, want);
}

static void test_absolute_form(void **state) {
        (void) state;
        absolute("GET http://example.com/path?q=1 HTTP/1.1\r\n"
                 "Host: example.com\r\n"
                 "Proxy-Connection: Keep-Alive\r\n"
                 "proxy-authorization: Basic eDp5\r\n"
                 "User-Agent: curl/8.5.0\r\n"
                 "Connection: keep-alive\r\n"
                 "Keep-Alive: timeout=5\r\n"
                 "Accept: */*\r\n\r\n",
                 "example.com", 80,
                 "GET /path?q=1 HTTP/1.1\r\n"
                 "Host: example.com\r\n"
                 "User-Agent: curl/8.5.0\r\n"
                 "Accept: */*\r\n"
                 "Connection: close\r\n\r\n");
        /* No Host: added from the target as written; no path: "/". */
        absolute("GET http://Example.com:8080 HTTP/1.0\r\n\r\n", "Example.com", 8080,
                 "GET / HTTP/1.0\r\nHost: Example.com:8080\r\nConnection: close\r\n\r\n");
        absolute("HEAD HTTP://a.test?x=1 HTTP/1.1\n\n", "a.test", 80,
                 "HEAD /?x=1 HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
        absolute("DELETE http://[::1]:81/a/b HTTP/1.1\nX: y\n\n", "::1", 81,
                 "DELETE /a/b HTTP/1.1\r\nX: y\r\nHost: [::1]:81\r\nConnection: close\r\n\r\n");
        absolute("PUT http://10.0.0.1/ HTTP/1.1\r\nhost: other\r\n\r\n", "10.0.0.1", 80,
                 "PUT / HTTP/1.1\r\nhost: other\r\nConnection: close\r\n\r\n");
        /* '@' in the path is not userinfo. */
        absolute("GET http://a.test/u@b HTTP/1.1\r\n\r\n", "a.test", 80,
                 "GET /u@b HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
}

static void test_absolute_body_follows(void **state) {
        (void) state;
        const char all[] = "POST http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
        ProxyResult r;
        char out[PROXY_REWRITE_MAX];
        size_t n;
        assert_int_equal(http_n(all, sizeof(all) - 1, &r, out, &n), PROXY_DONE);
        assert_int_equal(r.consumed, sizeof(all) - 1 - 3);
}

static void test_rewrite_only_absolute(void **state) {
        (void) state;
        const char s[] = "CONNECT a.test:443 HTTP/1.1\r\n\r\n";
        ProxyHttp p;
        ProxyResult r;
        char out[PROXY_REWRITE_MAX];
        size_t n;
        proxy_http_init(&p);
        assert_int_equal(proxy_http_rewrite(&p, s, out, sizeof(out), &n), -EINVAL);
        assert_int_equal(proxy_http_feed(&p, s, sizeof(s) - 1, &r), PROXY_DONE);
        assert_int_equal(proxy_http_rewrite(&p, s, out, sizeof(out), &n), -EINVAL);

        const char a[] = "GET http://a.test/ HTTP/1.1\r\n\r\n";
        proxy_http_init(&p);
        assert_int_equal(proxy_http_feed(&p, a, sizeof(a) - 1, &r), PROXY_DONE);
        assert_int_equal(proxy_http_rewrite(&p, a, out, 10, &n), -ENOBUFS);
}

static void test_need_more(void **state) {
        (void) state;
        ProxyResult r;
        assert_int_equal(http("", &r), PROXY_MORE);
        assert_int_equal(http("CONNECT a.test:443 HTTP/1.1\r\n", &r), PROXY_MORE);
        assert_int_equal(http("CONNECT a.test:443 HTTP/1.1\r\nHost: a\r\n\r", &r), PROXY_MORE);
}

static void test_head_size(void **state) {
        (void) state;
        /* Exactly PROXY_HEAD_MAX bytes is accepted; one more is not. */
        static char s[PROXY_HEAD_MAX + 64];
        const char *start = "CONNECT a.test:443 HTTP/1.1\r\nX: ";
        size_t fixed = strlen(start) + 4;
        memset(s, 0, sizeof(s));
        strcpy(s, start);
        memset(s + strlen(start), 'a', PROXY_HEAD_MAX - fixed);
        strcat(s, "\r\n\r\n");
        assert_int_equal(strlen(s), PROXY_HEAD_MAX);
        ProxyResult r;
        assert_int_equal(http(s, &r), PROXY_DONE);
        assert_int_equal(r.consumed, PROXY_HEAD_MAX);

        memset(s + strlen(start), 'a', PROXY_HEAD_MAX - fixed + 1);
        strcpy(s + strlen(start) + PROXY_HEAD_MAX - fixed + 1, "\r\n\r\n");
        refused(s, 431, "header over 8 KiB");
        /* A head that never ends. */
        memset(s, 'a', sizeof(s) - 1);
        memcpy(s, "GET http://a/ HTTP/1.1\r\nX: ", 27);
        s[sizeof(s) - 1] = '\0';
        refused(s, 431, "header over 8 KiB");
}

static void test_refused_request_line(void **state) {
        (void) state;
        refused("CONNECT user@a.test:443 HTTP/1.1\r\n\r\n", 400, "userinfo");
        refused("GET http://user:pw@a.test/ HTTP/1.1\r\n\r\n", 400, "userinfo");
        refused("CONNECT :443 HTTP/1.1\r\n\r\n", 400, "empty host");
        refused("GET http:///x HTTP/1.1\r\n\r\n", 400, "empty host");
        refused("GET http://:80/ HTTP/1.1\r\n\r\n", 400, "empty host");
        refused("CONNECT []:443 HTTP/1.1\r\n\r\n", 400, "empty host");
        refused("CONNECT a.test HTTP/1.1\r\n\r\n", 400, "CONNECT needs host:port");
        refused("CONNECT [::1] HTTP/1.1\r\n\r\n", 400, "CONNECT needs host:port");
        refused("CONNECT http://a.test:443 HTTP/1.1\r\n\r\n", 400, "CONNECT needs host:port");
        refused("CONNECT a.test:0 HTTP/1.1\r\n\r\n", 400, "bad port");
        refused("CONNECT a.test:65536 HTTP/1.1\r\n\r\n", 400, "bad port");
        refused("CONNECT a.test:443x HTTP/1.1\r\n\r\n", 400, "bad port");
        refused("CONNECT a.test:+443 HTTP/1.1\r\n\r\n", 400, "bad port");
        refused("CONNECT a.test:000443 HTTP/1.1\r\n\r\n", 400, "bad port");
        refused("CONNECT a.test: HTTP/1.1\r\n\r\n", 400, "bad port");
        refused("GET http://a.test:x/ HTTP/1.1\r\n\r\n", 400, "bad port");
        refused("CONNECT ::1:443 HTTP/1.1\r\n\r\n", 400, "in brackets");
        refused("CONNECT [::1:443 HTTP/1.1\r\n\r\n", 400, "closing ']'");
        refused("CONNECT [::1]x:443 HTTP/1.1\r\n\r\n", 400, "not a port");
        refused("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", 400, "zone");
        refused("CONNECT [a.test]:443 HTTP/1.1\r\n\r\n", 400, "not an IPv6 address");
        refused("CONNECT [1::2::3]:443 HTTP/1.1\r\n\r\n", 400, "not an IPv6 address");
        /* Bytes outside the host alphabet, '%00' among them: refused here,
         * never handed on for the broker to decode. */
        refused("CONNECT a%00.test:443 HTTP/1.1\r\n\r\n", 400, "not a letter, digit, hyphen or dot");
        refused("CONNECT a_b.test:443 HTTP/1.1\r\n\r\n", 400, "not a letter, digit, hyphen or dot");
        refused("GET http://a.test#x/ HTTP/1.1\r\n\r\n", 400, "not a letter, digit, hyphen or dot");
        refused("CONNECT a\xc3\xa9.test:443 HTTP/1.1\r\n\r\n", 400, "not visible ASCII");
        refused("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 405, "not a proxy request");
        refused("OPTIONS * HTTP/1.1\r\n\r\n", 405, "not a proxy request");
        refused("GET https://a.test/ HTTP/1.1\r\n\r\n", 400, "use CONNECT");
        refused("GET ftp://a.test/ HTTP/1.1\r\n\r\n", 400, "only http://");
        refused("GET a.test:80 HTTP/1.1\r\n\r\n", 400, "bad request target");
        refused("GET http://a.test/\r\n\r\n", 400, "missing HTTP version");
        refused("GET\r\n\r\n", 400, "without a request target");
        refused("GET  http://a.test/ HTTP/1.1\r\n\r\n", 400, "empty request target");
        refused(" GET http://a.test/ HTTP/1.1\r\n\r\n", 400, "without a method");
        refused("G(T http://a.test/ HTTP/1.1\r\n\r\n", 400, "token");
        refused("GET http://a.test/ HTTP/2.0\r\n\r\n", 505, "HTTP version not supported");
        refused("GET http://a.test/ HTTP/1.2\r\n\r\n", 505, "HTTP version not supported");
        refused("GET http://a.test/ HTTP/1.1 \r\n\r\n", 400, "bad HTTP version");
        refused("GET http://a.test/ http/1.1\r\n\r\n", 400, "bad HTTP version");
        refused("\r\nGET http://a.test/ HTTP/1.1\r\n\r\n", 400, "empty request line");
        refused("GET http://a.test/\x01 HTTP/1.1\r\n\r\n", 400, "not visible ASCII");
}

static void test_refused_bytes_and_headers(void **state) {
        (void) state;
        static const char nul1[] = "CONNECT a\0.test:443 HTTP/1.1\r\n\r\n";
        static const char nul2[] = "CONNECT a.test:443 HTTP/1.1\r\nX: a\0b\r\n\r\n";
        ProxyResult r;
        assert_int_equal(http_n(nul1, sizeof(nul1) - 1, &r, NULL, NULL), PROXY_REFUSED);
        assert_string_equal(r.refusal.reason, "a NUL byte in the request head");
        assert_int_equal(r.refusal.http_status, 400);
        assert_int_equal(http_n(nul2, sizeof(nul2) - 1, &r, NULL, NULL), PROXY_REFUSED);
        assert_string_equal(r.refusal.reason, "a NUL byte in the request head");
        /* A NUL is refused as soon as it arrives, before the line ends. */
        assert_int_equal(http_n(nul1, 10, &r, NULL, NULL), PROXY_REFUSED);

        refused("CONNECT a.test:443 HTTP/1.1\rX: y\r\n\r\n", 400, "bare CR");
        refused("CONNECT a.test:443 HTTP/1.1\r\nX: a\rb\r\n\r\n", 400, "bare CR");
        refused("CONNECT a.test:443 HTTP/1.1\r\nX: a\r\r\n\r\n", 400, "bare CR");
        refused("CONNECT a.test:443 HTTP/1.1\r\nno colon here\r\n\r\n", 400, "without ':'");
        refused("CONNECT a.test:443 HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400, "obs-fold");
        refused("CONNECT a.test:443 HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n", 400, "obs-fold");
        refused("CONNECT a.test:443 HTTP/1.1\r\nX : a\r\n\r\n", 400, "token");
        refused("CONNECT a.test:443 HTTP/1.1\r\n: a\r\n\r\n", 400, "empty name");
        refused("CONNECT a.test:443 HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400, "control byte");
        refused("CONNECT a.test:443 HTTP/1.1\r\nX: a\x1b[0m\r\n\r\n", 400, "control byte");
        refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nhost: b.test\r\n\r\n", 400, "more than one Host");
        /* The first fault in the byte stream is the one named. */
        refused("GET / HTTP/1.1\r\nbad\r\n\r\n", 405, "not a proxy request");
}

static ProxyStatus socks_n(bool greeting, const uint8_t *s, size_t len, ProxyResult *ret) {
        ProxyResult r1 = {}, r2 = {};
        ProxyStatus s1, s2 = PROXY_MORE;
        uint8_t *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, s, len);
        s1 = greeting ? proxy_socks_greeting(copy, len, &r1) : proxy_socks_request(copy, len, &r1);
        for (size_t k = 0; k <= len && s2 == PROXY_MORE; k++) {
                uint8_t *prefix = malloc(k ? k : 1);
                assert_non_null(prefix);
                memcpy(prefix, s, k);
                s2 = greeting ? proxy_socks_greeting(prefix, k, &r2) : proxy_socks_request(prefix, k, &r2);
                free(prefix);
        }
        free(copy);
        if (greeting && s1 == PROXY_DONE) {
                assert_int_equal(s2, PROXY_DONE);
                assert_int_equal(r1.consumed, r2.consumed);
        } else
                assert_same(s1, &r1, s2, &r2);
        *ret = r1;
        return s1;
}

#define GREETING(r, ...) socks_n(true, (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }), r)
#define REQUEST(r, ...)  socks_n(false, (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }), r)

static void test_socks_greeting(void **state) {
        (void) state;
        ProxyResult r;
        assert_int_equal(GREETING(&r, 5, 1, 0), PROXY_DONE);
        assert_int_equal(r.consumed, 3);
        assert_int_equal(GREETING(&r, 5, 3, 2, 1, 0), PROXY_DONE);
        assert_int_equal(r.consumed, 5);
        /* A request sent at once (optimistic clients): the greeting ends. */
        assert_int_equal(GREETING(&r, 5, 1, 0, 5, 1, 0, 3), PROXY_DONE);
        assert_int_equal(r.consumed, 3);
        assert_int_equal(GREETING(&r, 5, 2, 0), PROXY_MORE);

        assert_int_equal(GREETING(&r, 4, 1, 0, 80, 192, 0, 2, 1, 0), PROXY_REFUSED);
        assert_int_equal(r.refusal.socks_answer, PROXY_SOCKS_SOCKS4_REJECT);
        assert_non_null(strstr(r.refusal.reason, "SOCKS4"));
        assert_int_equal(GREETING(&r, 5, 1, 2), PROXY_REFUSED);
        assert_int_equal(r.refusal.socks_answer, PROXY_SOCKS_NO_METHOD);
        assert_non_null(strstr(r.refusal.reason, "no authentication"));
        assert_int_equal(GREETING(&r, 5, 0), PROXY_REFUSED);
        assert_int_equal(r.refusal.socks_answer, PROXY_SOCKS_NO_METHOD);
        assert_int_equal(GREETING(&r, 'G', 'E', 'T'), PROXY_REFUSED);
        assert_int_equal(r.refusal.socks_answer, PROXY_SOCKS_CLOSE);
}

static void socks_refused(ProxyStatus s, const ProxyResult *r, uint8_t reply, const char *why) {
        assert_int_equal(s, PROXY_REFUSED);
        assert_int_equal(r->refusal.socks_answer, PROXY_SOCKS_REPLY);
        if (r->refusal.socks_reply != reply || !strstr(r->refusal.reason, why))
                fail_msg("got %u \"%s\", want %u \"%s\"", r->refusal.socks_reply, r->refusal.reason, reply, why);
}

static void test_socks_request(void **state) {
        (void) state;
        ProxyResult r;
        assert_int_equal(REQUEST(&r, 5, 1, 0, 3, 6, 'a', '.', 't', 'e', 's', 't', 1, 187), PROXY_DONE);
        assert_int_equal(r.target.kind, PROXY_SOCKS5);
        assert_string_equal(r.target.host, "a.test");
        assert_int_equal(r.target.port, 443);
        assert_int_equal(r.consumed, 13);
        /* IP literals go on to the broker as text: a CIDR rule may permit
         * them, and without one the broker answers ip-literal. */
        assert_int_equal(REQUEST(&r, 5, 1, 0, 1, 192, 0, 2, 7, 0, 22), PROXY_DONE);
        assert_string_equal(r.target.host, "192.0.2.7");
        assert_int_equal(r.target.port, 22);
        assert_int_equal(REQUEST(&r, 5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80),
                         PROXY_DONE);
        assert_string_equal(r.target.host, "2001:db8::1");
        assert_int_equal(REQUEST(&r, 5, 1, 0, 3, 6, 'a', '.', 't', 'e', 's', 't', 1), PROXY_MORE);
        /* Payload after the request (consumed says where it begins). */
        assert_int_equal(REQUEST(&r, 5, 1, 0, 3, 1, 'a', 0, 80, 'x', 'y'), PROXY_DONE);
        assert_int_equal(r.consumed, 8);

        socks_refused(REQUEST(&r, 5, 2, 0, 3, 1, 'a', 0, 80), &r, 0x07, "BIND");
        socks_refused(REQUEST(&r, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0), &r, 0x07, "UDP ASSOCIATE");
        socks_refused(REQUEST(&r, 5, 9), &r, 0x07, "unknown SOCKS5 command");
        socks_refused(REQUEST(&r, 5, 1, 0, 5), &r, 0x08, "address type");
        socks_refused(REQUEST(&r, 5, 1, 1, 3), &r, 0x01, "reserved");
        socks_refused(REQUEST(&r, 4, 1), &r, 0x01, "not a SOCKS5 request");
        socks_refused(REQUEST(&r, 5, 1, 0, 3, 6, 'a', '%', '0', '0', 'b', 'c', 0, 80), &r, 0x02, "not a letter");
        socks_refused(REQUEST(&r, 5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80), &r, 0x02, "not a letter");
        socks_refused(REQUEST(&r, 5, 1, 0, 3, 3, 'a', ':', 'b', 0, 80), &r, 0x02, "not a letter");
        socks_refused(REQUEST(&r, 5, 1, 0, 3, 0, 0, 80), &r, 0x02, "empty host");
        socks_refused(REQUEST(&r, 5, 1, 0, 3, 1, 'a', 0, 0), &r, 0x01, "port 0");
        /* The first fault wins: a bad name is named before a zero port. */
        socks_refused(REQUEST(&r, 5, 1, 0, 3, 1, '_', 0, 0), &r, 0x02, "not a letter");
}

static void test_socks_long_name(void **state) {
        (void) state;
        uint8_t s[5 + 255 + 2];
        ProxyResult r;
        s[0] = 5, s[1] = 1, s[2] = 0, s[3] = 3, s[4] = 255;
        memset(s + 5, 'a', 255);
        s[260] = 0, s[261] = 80;
        socks_refused(socks_n(false, s, sizeof(s), &r), &r, 0x02, "longer than 254");
        s[4] = 254;
        assert_int_equal(socks_n(false, s, sizeof(s) - 1, &r), PROXY_DONE);
        assert_int_equal(strlen(r.target.host), 254);
}

static void test_host_parse(void **state) {
        (void) state;
        char h[PROXY_HOST_MAX + 1];
        const char *why;
        assert_int_equal(proxy_host_parse("github.com", 10, h, &why), 0);
        assert_string_equal(h, "github.com");
        assert_int_equal(proxy_host_parse("[::1]", 5, h, &why), 0);
        assert_string_equal(h, "::1");
        assert_int_equal(proxy_host_parse("2001:db8::5", 11, h, &why), 0);
        assert_string_equal(h, "2001:db8::5");
        assert_int_equal(proxy_host_parse("10.1.2.3", 8, h, &why), 0);
        assert_int_equal(proxy_host_parse("", 0, h, &why), -EINVAL);
        assert_string_equal(why, "empty host");
        assert_int_equal(proxy_host_parse("a b", 3, h, &why), -EINVAL);
        assert_int_equal(proxy_host_parse("a\0b", 3, h, &why), -EINVAL);
        assert_int_equal(proxy_host_parse("[a.test]", 8, h, &why), -EINVAL);

        uint16_t port;
        assert_int_equal(proxy_port_parse("22", 2, &port), 0);
        assert_int_equal(port, 22);
        assert_int_equal(proxy_port_parse("0", 1, &port), -EINVAL);
        assert_int_equal(proxy_port_parse("-1", 2, &port), -EINVAL);
        assert_int_equal(proxy_port_parse("", 0, &port), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_connect_forms),
                cmocka_unit_test(test_connect_payload_follows),
                cmocka_unit_test(test_absolute_form),
                cmocka_unit_test(test_absolute_body_follows),
                cmocka_unit_test(test_rewrite_only_absolute),
                cmocka_unit_test(test_need_more),
                cmocka_unit_test(test_head_size),
                cmocka_unit_test(test_refused_request_line),
                cmocka_unit_test(test_refused_bytes_and_headers),
                cmocka_unit_test(test_socks_greeting),
                cmocka_unit_test(test_socks_request),
                cmocka_unit_test(test_socks_long_name),
                cmocka_unit_test(test_host_parse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
