/* SPDX-License-Identifier: MIT */
/* Fuzz the relay's request parser (netpolicy/proxy-request). The first byte
 * picks the parser: 0 mod 3 the HTTP head, 1 the SOCKS5 greeting, 2 the
 * SOCKS5 request; the rest is what the client sent. Invariants:
 *  - nothing is read past the bytes fed (each feed sees an exactly sized
 *    buffer, the bytes beyond it poisoned under ASan);
 *  - consumed <= len (and <= PROXY_HEAD_MAX for HTTP), a refusal has a
 *    reason and an HTTP status of 4xx/5xx;
 *  - feeding everything at once and one byte at a time give the same
 *    answer, reason and target;
 *  - the target's host is non-empty text of the host alphabet;
 *  - a rewritten absolute-form head is a valid origin-form head: CRLF
 *    lines, "METHOD /path HTTP/1.x", token ":" value headers without
 *    control bytes, exactly one Host, no Proxy-* or Connection header but
 *    the one "Connection: close", the blank line last; and fed back to the
 *    parser it is refused as origin-form (405), never read differently. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy-request.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#endif
#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n)   ((void) (p), (void) (n))
#define UNPOISON(p, n) ((void) (p), (void) (n))
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool nocase_prefix(const char *s, size_t n, const char *name) {
        size_t l = strlen(name);
        if (n != l)
                return false;
        for (size_t i = 0; i < l; i++) {
                char c = s[i];
                if (c >= 'A' && c <= 'Z')
                        c = (char) (c - 'A' + 'a');
                if (c != name[i])
                        return false;
        }
        return true;
}

static void check_origin_head(const char *h, size_t n) {
        size_t i = 0, lines = 0, hosts = 0, closes = 0;
        bool blank = false;
        while (i < n) {
                const char *nl = memchr(h + i, '\n', n - i);
                if (!nl || nl == h + i || nl[-1] != '\r')
                        abort();
                size_t len = (size_t) (nl - (h + i)) - 1;
                const char *l = h + i;
                for (size_t k = 0; k < len; k++)
                        if (l[k] == '\r' || l[k] == '\0')
                                abort();
                if (lines == 0) {
                        size_t m = 0;
                        while (m < len && tchar(l[m]))
                                m++;
                        if (m == 0 || m + 1 >= len || l[m] != ' ' || l[m + 1] != '/')
                                abort();
                        const char *sp = memchr(l + m + 1, ' ', len - m - 1);
                        if (!sp)
                                abort();
                        for (const char *q = l + m + 1; q < sp; q++)
                                if ((unsigned char) *q <= 0x20 || (unsigned char) *q >= 0x7f)
                                        abort();
                        size_t vl = (size_t) (l + len - sp - 1);
                        if (vl != 8 || (memcmp(sp + 1, "HTTP/1.1", 8) != 0 && memcmp(sp + 1, "HTTP/1.0", 8) != 0))
                                abort();
                } else if (len == 0) {
                        if (i + 2 != n)
                                abort();
                        blank = true;
                } else {
                        const char *colon = memchr(l, ':', len);
                        if (!colon || colon == l)
                                abort();
                        size_t nl_ = (size_t) (colon - l);
                        for (size_t k = 0; k < nl_; k++)
                                if (!tchar(l[k]))
                                        abort();
                        for (size_t k = nl_ + 1; k < len; k++)
                                if (((unsigned char) l[k] < 0x20 && l[k] != '\t') || l[k] == 0x7f)
                                        abort();
                        if (nocase_prefix(l, nl_, "host"))
                                hosts++;
                        if (nocase_prefix(l, nl_, "proxy-connection") || nocase_prefix(l, nl_, "proxy-authorization") ||
                            nocase_prefix(l, nl_, "keep-alive"))
                                abort();
                        if (nocase_prefix(l, nl_, "connection")) {
                                if (len != strlen("Connection: close") || memcmp(l, "Connection: close", len) != 0)
                                        abort();
                                closes++;
                        }
                }
                lines++;
                i = (size_t) (nl - h) + 1;
        }
        if (!blank || hosts != 1 || closes != 1)
                abort();

        ProxyHttp p;
        ProxyResult r;
        proxy_http_init(&p);
        if (n <= PROXY_HEAD_MAX && (proxy_http_feed(&p, h, n, &r) != PROXY_REFUSED || r.refusal.http_status != 405))
                abort();
}

static void check_target(const ProxyTarget *t) {
        size_t n = strnlen(t->host, sizeof(t->host));
        if (n == 0 || n > PROXY_HOST_MAX || t->port == 0)
                abort();
        for (size_t i = 0; i < n; i++) {
                char c = t->host[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == ':'))
                        abort();
        }
}

static void same(ProxyStatus s1, const ProxyResult *a, ProxyStatus s2, const ProxyResult *b, bool target) {
        if (s1 != s2)
                abort();
        if (s1 == PROXY_DONE) {
                if (a->consumed != b->consumed)
                        abort();
                if (target && (a->target.kind != b->target.kind || strcmp(a->target.host, b->target.host) != 0 ||
                               a->target.port != b->target.port))
                        abort();
        }
        if (s1 == PROXY_REFUSED) {
                if (a->refusal.reason != b->refusal.reason || a->refusal.http_status != b->refusal.http_status ||
                    a->refusal.socks_answer != b->refusal.socks_answer ||
                    a->refusal.socks_reply != b->refusal.socks_reply)
                        abort();
                if (!a->refusal.reason || !a->refusal.reason[0] || a->refusal.http_status < 400 ||
                    a->refusal.http_status > 599)
                        abort();
        }
}

static void fuzz_http(const uint8_t *d, size_t n) {
        /* An exactly sized copy; the one-byte-at-a-time feed poisons the
         * bytes not yet "received". */
        char *buf = malloc(n ? n : 1);
        char out[PROXY_REWRITE_MAX];
        size_t out_len = 0;
        if (!buf)
                return;
        memcpy(buf, d, n);

        ProxyHttp one, bytes;
        ProxyResult r1, r2 = {};
        ProxyStatus s1, s2 = PROXY_MORE;
        proxy_http_init(&one);
        s1 = proxy_http_feed(&one, buf, n, &r1);
        if (s1 == PROXY_DONE) {
                if (r1.consumed > n || r1.consumed > PROXY_HEAD_MAX || buf[r1.consumed - 1] != '\n')
                        abort();
                check_target(&r1.target);
                int r = proxy_http_rewrite(&one, buf, out, sizeof(out), &out_len);
                if (r1.target.kind == PROXY_HTTP_ABSOLUTE) {
                        if (r < 0 || out_len > PROXY_REWRITE_MAX)
                                abort();
                        check_origin_head(out, out_len);
                } else if (r1.target.kind != PROXY_HTTP_CONNECT || r != -EINVAL)
                        abort();
        }

        POISON(buf, n);
        proxy_http_init(&bytes);
        for (size_t k = 0; k <= n && s2 == PROXY_MORE; k++) {
                if (k > 0)
                        UNPOISON(buf + k - 1, 1);
                s2 = proxy_http_feed(&bytes, buf, k, &r2);
        }
        UNPOISON(buf, n);
        same(s1, &r1, s2, &r2, true);
        if (s1 == PROXY_DONE && r1.target.kind == PROXY_HTTP_ABSOLUTE) {
                char out2[PROXY_REWRITE_MAX];
                size_t out2_len;
                if (proxy_http_rewrite(&bytes, buf, out2, sizeof(out2), &out2_len) < 0 || out2_len != out_len ||
                    memcmp(out, out2, out_len) != 0)
                        abort();
        }
        free(buf);
}

static void fuzz_socks(bool greeting, const uint8_t *d, size_t n) {
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return;
        memcpy(buf, d, n);
        ProxyResult r1 = {}, r2 = {};
        ProxyStatus s1 = greeting ? proxy_socks_greeting(buf, n, &r1) : proxy_socks_request(buf, n, &r1),
                    s2 = PROXY_MORE;
        if (s1 == PROXY_DONE) {
                if (r1.consumed > n || r1.consumed > (greeting ? PROXY_SOCKS_GREETING_MAX : PROXY_SOCKS_REQUEST_MAX))
                        abort();
                if (!greeting) {
                        check_target(&r1.target);
                        if (r1.target.kind != PROXY_SOCKS5)
                                abort();
                }
        }
        POISON(buf, n);
        for (size_t k = 0; k <= n && s2 == PROXY_MORE; k++) {
                if (k > 0)
                        UNPOISON(buf + k - 1, 1);
                s2 = greeting ? proxy_socks_greeting(buf, k, &r2) : proxy_socks_request(buf, k, &r2);
        }
        UNPOISON(buf, n);
        same(s1, &r1, s2, &r2, !greeting);
        free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > PROXY_HEAD_MAX + 1024)
                return 0;
        switch (data[0] % 3) {
        case 0:
                fuzz_http(data + 1, size - 1);
                break;
        case 1:
                fuzz_socks(true, data + 1, size - 1);
                break;
        default:
                fuzz_socks(false, data + 1, size - 1);
                break;
        }
        return 0;
}
