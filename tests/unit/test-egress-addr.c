/* SPDX-License-Identifier: MIT */
/* Unit tests of src/netpolicy/egress-addr: which answers of a name lookup the
 * broker may connect to, and the server name of a client's first bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "egress-addr.h"

static NetAddr A(const char *s) {
        NetAddr a;
        assert_int_equal(netaddr_parse(s, &a), 0);
        return a;
}

/* A policy from canonical text lines (after the schema line). */
static NetPolicy P(const char *body) {
        char buf[2048];
        snprintf(buf, sizeof(buf), "%s\n%s", NETPOLICY_SCHEMA, body);
        NetPolicy p;
        const char *why = NULL;
        int r = netpolicy_parse(buf, strlen(buf), &p, &why);
        if (r < 0)
                fail_msg("policy: %s", why);
        return p;
}

static const char *const DENY_ALL = "family ipv4 enabled default deny\nfamily ipv6 enabled default deny\n";

/* The verdict as a string: "ok" or the reason's range/embedding. */
static const char *verdict(const NetPolicy *p, const NetAddr *host, size_t n, const char *addr) {
        static char buf[256];
        NetAddr a = A(addr);
        EgressRefusal why;
        if (egress_address_check(p, host, n, &a, &why) == 0)
                return "ok";
        egress_refusal_format(&a, &why, buf, sizeof(buf));
        return buf;
}

static void test_public_passes_without_rules(void **state) {
        (void) state;
        /* The family's default (deny) is not used for names. */
        NetPolicy p = P(DENY_ALL);
        assert_string_equal(verdict(&p, NULL, 0, "192.0.2.1"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "2001:db8::1"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "8.8.8.8"), "ok");
        netpolicy_done(&p);
}

static void test_builtin_ranges_refused(void **state) {
        (void) state;
        NetPolicy p = P(DENY_ALL);
        static const char *const bad[] = {
                "0.0.0.0",
                "0.1.2.3",
                "10.1.2.3",
                "100.64.0.1",
                "127.0.0.1",
                "127.255.0.1",
                "169.254.169.254",
                "172.16.0.1",
                "172.31.255.255",
                "192.168.1.1",
                "224.0.0.1",
                "239.1.2.3",
                "240.0.0.1",
                "255.255.255.255",
                "::",
                "::1",
                "fe80::1",
                "fd00:ec2::254",
                "fc00::1",
                "ff02::1",
                /* Issue 41, item 9: local-use NAT64 and site-local. */
                "64:ff9b:1::1",
                "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
                "fec0::1",
                "feff:ffff::1",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                const char *v = verdict(&p, NULL, 0, bad[i]);
                if (strcmp(v, "ok") == 0)
                        fail_msg("%s passed", bad[i]);
        }
        /* Just outside the ranges. */
        assert_string_equal(verdict(&p, NULL, 0, "100.128.0.1"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "172.32.0.1"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "11.0.0.1"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "fe7f::1"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "64:ff9b:2::1"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "64:ff9b:1::a01:203"),
                            "64:ff9b:1::a01:203 is in 64:ff9b:1::/48: a non-public range that no rule of the network "
                            "policy allows");
        assert_string_equal(verdict(&p, NULL, 0, "fec0::1"),
                            "fec0::1 is in fec0::/10: a non-public range that no rule of the network policy allows");
        assert_string_equal(verdict(&p, NULL, 0, "223.255.255.255"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "10.1.2.3"),
                            "10.1.2.3 is in 10.0.0.0/8: a non-public range that no rule of the network policy "
                            "allows");
        assert_string_equal(verdict(&p, NULL, 0, "169.254.169.254"),
                            "169.254.169.254 is in 169.254.0.0/16: a non-public range that no rule of the network "
                            "policy allows");
        assert_string_equal(verdict(&p, NULL, 0, "127.0.0.1"),
                            "127.0.0.1 is in 127.0.0.0/8: the host itself (loopback or unspecified)");
        netpolicy_done(&p);
}

static void test_explicit_rules(void **state) {
        (void) state;
        NetPolicy p = P("family ipv4 enabled default deny\n"
                        "family ipv6 enabled default allow\n"
                        "rule 10.0.0.0/8 allow\n"
                        "rule 10.9.0.0/16 deny\n"
                        "rule 100.0.0.0/8 allow\n"
                        "rule 127.0.0.0/8 allow\n"
                        "rule 192.0.2.0/24 deny\n"
                        "rule 192.168.7.0/24 allow\n"
                        "rule 198.51.100.0/24 allow\n"
                        "rule 2001:db8::/32 allow\n"
                        "rule 2001:db8:bad::/48 deny\n"
                        "rule fd00:ec2::/32 allow\n");
        /* An allow rule inside or equal to the range lets it through. */
        assert_string_equal(verdict(&p, NULL, 0, "10.1.2.3"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "192.168.7.9"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "fd00:ec2::254"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "198.51.100.7"), "ok");
        assert_string_equal(verdict(&p, NULL, 0, "2001:db8::7"), "ok");
        /* The longest rule decides. */
        assert_string_equal(verdict(&p, NULL, 0, "10.9.1.1"),
                            "10.9.1.1 is refused: a deny rule of the network policy covers it");
        assert_string_equal(verdict(&p, NULL, 0, "2001:db8:bad::1"),
                            "2001:db8:bad::1 is refused: a deny rule of the network policy covers it");
        /* A deny rule applies to public addresses too. */
        assert_string_equal(verdict(&p, NULL, 0, "192.0.2.1"),
                            "192.0.2.1 is refused: a deny rule of the network policy covers it");
        /* 192.168.8.1: no rule, built-in range. */
        assert_string_equal(verdict(&p, NULL, 0, "192.168.8.1"),
                            "192.168.8.1 is in 192.168.0.0/16: a non-public range that no rule of the network "
                            "policy allows");
        /* An allow wider than the range does not open it: 100/8 holds
         * 100.64/10. */
        assert_string_equal(verdict(&p, NULL, 0, "100.64.0.1"),
                            "100.64.0.1 is in 100.64.0.0/10: a non-public range that no rule of the network "
                            "policy allows");
        assert_string_equal(verdict(&p, NULL, 0, "100.1.0.1"), "ok");
        /* No rule opens the host's loopback to the broker. */
        assert_string_equal(verdict(&p, NULL, 0, "127.0.0.1"),
                            "127.0.0.1 is in 127.0.0.0/8: the host itself (loopback or unspecified)");
        /* The family's default allow does not open ranges either. */
        assert_string_equal(verdict(&p, NULL, 0, "fe80::1"),
                            "fe80::1 is in fe80::/10: a non-public range that no rule of the network policy allows");
        netpolicy_done(&p);
}

static void test_host_addresses(void **state) {
        (void) state;
        NetPolicy p = P("family ipv4 enabled default allow\nfamily ipv6 enabled default allow\n"
                        "rule 198.51.100.0/24 allow\n");
        NetAddr host[] = { A("198.51.100.1"), A("203.0.113.5"), A("2001:db8:10::1") };
        assert_string_equal(verdict(&p, host, 3, "198.51.100.1"),
                            "198.51.100.1 is refused: one of the host's own addresses");
        assert_string_equal(verdict(&p, host, 3, "203.0.113.5"),
                            "203.0.113.5 is refused: one of the host's own addresses");
        assert_string_equal(verdict(&p, host, 3, "2001:db8:10::1"),
                            "2001:db8:10::1 is refused: one of the host's own addresses");
        assert_string_equal(verdict(&p, host, 3, "198.51.100.2"), "ok");
        assert_string_equal(verdict(&p, host, 3, "2001:db8:10::2"), "ok");
        netpolicy_done(&p);
}

static void test_embedded_ipv4(void **state) {
        (void) state;
        NetPolicy p = P("family ipv4 enabled default deny\nfamily ipv6 enabled default deny\n"
                        "rule 10.1.2.0/24 allow\n"
                        "rule 192.0.2.0/24 deny\n");
        NetAddr host[] = { A("203.0.113.5") };
        assert_string_equal(verdict(&p, host, 1, "::ffff:127.0.0.1"),
                            "::ffff:127.0.0.1 embeds 127.0.0.1 (IPv4-mapped), which is in 127.0.0.0/8: the host "
                            "itself (loopback or unspecified)");
        assert_string_equal(verdict(&p, host, 1, "::ffff:10.9.9.9"),
                            "::ffff:10.9.9.9 embeds 10.9.9.9 (IPv4-mapped), which is in 10.0.0.0/8: a non-public "
                            "range that no rule of the network policy allows");
        assert_string_equal(verdict(&p, host, 1, "64:ff9b::a9fe:a9fe"),
                            "64:ff9b::a9fe:a9fe embeds 169.254.169.254 (NAT64), which is in 169.254.0.0/16: a "
                            "non-public range that no rule of the network policy allows");
        /* 6to4: 2002:AABB:CCDD::/48 embeds AA.BB.CC.DD. */
        assert_string_equal(verdict(&p, host, 1, "2002:c0a8:101::1"),
                            "2002:c0a8:101::1 embeds 192.168.1.1 (6to4), which is in 192.168.0.0/16: a non-public "
                            "range that no rule of the network policy allows");
        assert_string_equal(verdict(&p, host, 1, "2002:cb00:7105::1"),
                            "2002:cb00:7105::1 embeds 203.0.113.5 (6to4), which is refused: one of the host's own "
                            "addresses");
        assert_string_equal(verdict(&p, host, 1, "64:ff9b::c000:201"),
                            "64:ff9b::c000:201 embeds 192.0.2.1 (NAT64), which is refused: a deny rule of the "
                            "network policy covers it");
        assert_string_equal(verdict(&p, host, 1, "::10.9.9.9"),
                            "::10.9.9.9 embeds 10.9.9.9 (IPv4-compatible), which is in 10.0.0.0/8: a non-public "
                            "range that no rule of the network policy allows");
        /* An explicit allow of the IPv4 range covers its embedded forms. */
        assert_string_equal(verdict(&p, host, 1, "::ffff:10.1.2.3"), "ok");
        assert_string_equal(verdict(&p, host, 1, "64:ff9b::a01:203"), "ok");
        /* Public embedded addresses pass. */
        assert_string_equal(verdict(&p, host, 1, "::ffff:8.8.8.8"), "ok");
        assert_string_equal(verdict(&p, host, 1, "2002:808:808::1"), "ok");
        netpolicy_done(&p);
}

static void test_literals(void **state) {
        (void) state;
        NetPolicy p = P("family ipv4 enabled default deny\nfamily ipv6 disabled\n"
                        "rule 10.1.2.0/24 allow\n"
                        "rule 198.51.100.0/24 allow\n");
        NetAddr host[] = { A("198.51.100.1") };
        EgressRefusal why;
        NetAddr a = A("198.51.100.2");
        assert_int_equal(egress_literal_check(&p, host, 1, &a, &why), 0);
        a = A("10.1.2.3");
        assert_int_equal(egress_literal_check(&p, host, 1, &a, &why), 0);
        a = A("192.0.2.1"); /* public, but no rule permits it */
        assert_int_equal(egress_literal_check(&p, host, 1, &a, &why), -EPERM);
        assert_int_equal(why.why, EGRESS_WHY_POLICY);
        a = A("198.51.100.1");
        assert_int_equal(egress_literal_check(&p, host, 1, &a, &why), -EPERM);
        assert_int_equal(why.why, EGRESS_WHY_HOST_ADDRESS);
        a = A("::ffff:198.51.100.2"); /* the IPv6 family is disabled */
        assert_int_equal(egress_literal_check(&p, host, 1, &a, &why), -EPERM);
        netpolicy_done(&p);

        p = P("family ipv4 enabled default allow\nfamily ipv6 enabled default allow\n");
        a = A("192.0.2.1");
        assert_int_equal(egress_literal_check(&p, NULL, 0, &a, &why), 0);
        a = A("127.0.0.1");
        assert_int_equal(egress_literal_check(&p, NULL, 0, &a, &why), -EPERM);
        assert_int_equal(why.why, EGRESS_WHY_HOST_ITSELF);
        a = A("::ffff:127.0.0.1");
        assert_int_equal(egress_literal_check(&p, NULL, 0, &a, &why), -EPERM);
        assert_string_equal(why.embedding, "IPv4-mapped");
        a = A("::");
        assert_int_equal(egress_literal_check(&p, NULL, 0, &a, &why), -EPERM);
        netpolicy_done(&p);
}

/* ---- server names ---- */

typedef struct Buf {
        uint8_t b[20000];
        size_t n;
} Buf;

static void put(Buf *b, const void *p, size_t n) {
        assert_true(b->n + n <= sizeof(b->b));
        memcpy(b->b + b->n, p, n);
        b->n += n;
}

static void put8(Buf *b, unsigned v) {
        uint8_t x = (uint8_t) v;
        put(b, &x, 1);
}

static void put16(Buf *b, unsigned v) {
        put8(b, v >> 8);
        put8(b, v & 0xff);
}

/* A ClientHello body with the given extensions block (already encoded). */
static void client_hello(Buf *out, const Buf *exts, bool with_exts) {
        Buf body = { .n = 0 };
        put16(&body, 0x0303);
        uint8_t random[32] = { 1, 2, 3 };
        put(&body, random, 32);
        put8(&body, 32);
        uint8_t sid[32] = { 9 };
        put(&body, sid, 32);
        put16(&body, 4);
        put16(&body, 0x1301);
        put16(&body, 0x1302);
        put8(&body, 1);
        put8(&body, 0);
        if (with_exts) {
                put16(&body, (unsigned) exts->n);
                put(&body, exts->b, exts->n);
        }
        out->n = 0;
        put8(out, 1);
        put8(out, (unsigned) (body.n >> 16));
        put16(out, (unsigned) (body.n & 0xffff));
        put(out, body.b, body.n);
}

static void sni_ext(Buf *exts, const char *name) {
        size_t l = strlen(name);
        put16(exts, 0);
        put16(exts, (unsigned) (l + 5));
        put16(exts, (unsigned) (l + 3));
        put8(exts, 0);
        put16(exts, (unsigned) l);
        put(exts, name, l);
}

static void other_ext(Buf *exts, unsigned type, size_t len) {
        put16(exts, type);
        put16(exts, (unsigned) len);
        for (size_t i = 0; i < len; i++)
                put8(exts, 0x42);
}

/* Records of at most frag bytes each. */
static void records(Buf *out, const Buf *hs, size_t frag) {
        out->n = 0;
        for (size_t pos = 0; pos < hs->n; pos += frag) {
                size_t k = hs->n - pos < frag ? hs->n - pos : frag;
                put8(out, 0x16);
                put16(out, 0x0301);
                put16(out, (unsigned) k);
                put(out, hs->b + pos, k);
        }
}

static int sn(const Buf *b, size_t len, char *out, const char **why) {
        return egress_server_name(b->b, len, out, 256, why);
}

static void test_tls_sni(void **state) {
        (void) state;
        static Buf exts, hs, rec;
        char name[256];
        const char *why;

        exts.n = 0;
        other_ext(&exts, 0x002b, 3);
        sni_ext(&exts, "Example.TEST");
        other_ext(&exts, 0x0033, 1200); /* a big key share */
        client_hello(&hs, &exts, true);
        records(&rec, &hs, 16384);
        assert_int_equal(sn(&rec, rec.n, name, &why), 1);
        assert_string_equal(name, "Example.TEST");
        /* Every proper prefix needs more. */
        for (size_t k = 0; k < rec.n; k++)
                assert_int_equal(sn(&rec, k, name, &why), 0);
        /* Split over records of 100 bytes. */
        records(&rec, &hs, 100);
        assert_int_equal(sn(&rec, rec.n, name, &why), 1);
        assert_string_equal(name, "Example.TEST");
        assert_int_equal(sn(&rec, rec.n - 1, name, &why), 0);

        /* No SNI. */
        exts.n = 0;
        other_ext(&exts, 0x002b, 3);
        client_hello(&hs, &exts, true);
        records(&rec, &hs, 16384);
        assert_int_equal(sn(&rec, rec.n, name, &why), -ENOENT);
        /* No extensions at all. */
        client_hello(&hs, &exts, false);
        records(&rec, &hs, 16384);
        assert_int_equal(sn(&rec, rec.n, name, &why), -ENOENT);

        /* Two SNI extensions. */
        exts.n = 0;
        sni_ext(&exts, "a.test");
        sni_ext(&exts, "b.test");
        client_hello(&hs, &exts, true);
        records(&rec, &hs, 16384);
        assert_int_equal(sn(&rec, rec.n, name, &why), -EINVAL);
        assert_string_equal(why, "the TLS ClientHello has two server_name extensions");

        /* An extension length past the end. */
        exts.n = 0;
        sni_ext(&exts, "a.test");
        client_hello(&hs, &exts, true);
        hs.b[hs.n - 7 - 3] = 0xff; /* the extension's length, high byte */
        records(&rec, &hs, 16384);
        assert_int_equal(sn(&rec, rec.n, name, &why), -EINVAL);

        /* A name with a NUL. */
        exts.n = 0;
        sni_ext(&exts, "a.test");
        client_hello(&hs, &exts, true);
        hs.b[hs.n - 2] = 0;
        records(&rec, &hs, 16384);
        assert_int_equal(sn(&rec, rec.n, name, &why), -EINVAL);

        /* A name longer than out. */
        char big[300];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        exts.n = 0;
        sni_ext(&exts, big);
        client_hello(&hs, &exts, true);
        records(&rec, &hs, 16384);
        assert_int_equal(sn(&rec, rec.n, name, &why), -EINVAL);

        /* Not a ClientHello (a ServerHello, type 2). */
        exts.n = 0;
        sni_ext(&exts, "a.test");
        client_hello(&hs, &exts, true);
        hs.b[0] = 2;
        records(&rec, &hs, 16384);
        assert_int_equal(sn(&rec, rec.n, name, &why), -EINVAL);

        /* A record of another type after a partial handshake. */
        client_hello(&hs, &exts, true);
        records(&rec, &hs, 20);
        rec.b[25] = 0x17;
        assert_int_equal(sn(&rec, rec.n, name, &why), -EINVAL);

        /* A handshake message that claims to be longer than the cap. */
        rec.n = 0;
        put8(&rec, 0x16);
        put16(&rec, 0x0301);
        put16(&rec, 4);
        put8(&rec, 1);
        put8(&rec, 0x01);
        put16(&rec, 0);
        assert_int_equal(sn(&rec, rec.n, name, &why), -EINVAL);
}

static int http(const char *s, char *out, const char **why) {
        return egress_server_name((const uint8_t *) s, strlen(s), out, 256, why);
}

static void test_http_host(void **state) {
        (void) state;
        char name[256];
        const char *why;
        assert_int_equal(http("GET / HTTP/1.1\r\nHost: example.test\r\n\r\n", name, &why), 1);
        assert_string_equal(name, "example.test");
        assert_int_equal(http("GET / HTTP/1.1\r\nUser-Agent: x\r\nhOsT:\t Example.Test:8080 \r\n\r\nbody", name, &why),
                         1);
        assert_string_equal(name, "Example.Test");
        assert_int_equal(http("GET / HTTP/1.0\n\n", name, &why), -ENOENT);
        assert_int_equal(http("GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", name, &why), -EINVAL);
        /* Absolute form: the target names the host, and Host must agree. */
        assert_int_equal(http("GET http://a.test:80/x HTTP/1.1\r\n\r\n", name, &why), 1);
        assert_string_equal(name, "a.test");
        assert_int_equal(http("GET http://a.test/x HTTP/1.1\r\nHost: A.test\r\n\r\n", name, &why), 1);
        assert_int_equal(http("GET http://evil.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", name, &why), -EINVAL);
        assert_int_equal(http("GET http://u@a.test/x HTTP/1.1\r\n\r\n", name, &why), -EINVAL);
        /* Not yet complete. */
        assert_int_equal(http("GET / HTTP/1.1\r\nHost: a.test\r\n", name, &why), 0);
        assert_int_equal(http("GE", name, &why), 0);
        /* Not HTTP at all. */
        assert_int_equal(http("SSH-2.0-OpenSSH_9.2\r\n", name, &why), -ENOENT);
        assert_int_equal(http("\x01\x02", name, &why), -ENOENT);
        assert_int_equal(http("get / HTTP/1.1\r\n\r\n", name, &why), -ENOENT);
        assert_int_equal(http("GET / SPDY/3\r\n\r\n", name, &why), -EINVAL);
        assert_int_equal(http("GET / HTTP/1.1\r\nHost: \r\n\r\n", name, &why), -ENOENT);
        assert_int_equal(egress_server_name((const uint8_t *) "", 0, name, 256, &why), 0);
}

static int req_len(const char *s, uint64_t *len, const char **why) {
        return egress_http_request_length((const uint8_t *) s, strlen(s), len, why);
}

/* Issue 41, item 9: the length of each request, so that the server-name
 * check looks at every request of a kept-alive connection. */
static void test_http_request_length(void **state) {
        (void) state;
        uint64_t len = 0;
        const char *why = NULL;
        static const char get[] = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
        assert_int_equal(req_len(get, &len, &why), 1);
        assert_int_equal(len, strlen(get));
        /* What follows the request is not counted. */
        assert_int_equal(req_len("GET / HTTP/1.1\r\nHost: a.test\r\n\r\nGET /evil HTTP/1.1\r\n", &len, &why), 1);
        assert_int_equal(len, strlen(get));
        /* A body by its Content-Length (any case, spaces around it). */
        assert_int_equal(req_len("POST / HTTP/1.1\r\nhost: a.test\r\ncontent-LENGTH:  12 \r\n\r\nxx", &len, &why), 1);
        assert_int_equal(len, strlen("POST / HTTP/1.1\r\nhost: a.test\r\ncontent-LENGTH:  12 \r\n\r\n") + 12);
        assert_int_equal(req_len("GET / HTTP/1.1\nHost: a\n\n", &len, &why), 1);
        assert_int_equal(len, strlen("GET / HTTP/1.1\nHost: a\n\n"));
        assert_int_equal(req_len("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", &len, &why), 1);
        /* Not complete yet. */
        assert_int_equal(req_len("GET / HTTP/1.1\r\nHost: a.test\r\n", &len, &why), 0);
        /* Lengths that cannot be known: refused. */
        static const char *const bad[] = {
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                why = NULL;
                if (req_len(bad[i], &len, &why) != -EINVAL || !why)
                        fail_msg("%s: not refused", bad[i]);
        }
        assert_true(egress_is_http((const uint8_t *) get, strlen(get)));
        assert_false(egress_is_http((const uint8_t *) "\x16\x03\x01", 3));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_public_passes_without_rules),
                cmocka_unit_test(test_builtin_ranges_refused),
                cmocka_unit_test(test_explicit_rules),
                cmocka_unit_test(test_host_addresses),
                cmocka_unit_test(test_embedded_ipv4),
                cmocka_unit_test(test_literals),
                cmocka_unit_test(test_tls_sni),
                cmocka_unit_test(test_http_host),
                cmocka_unit_test(test_http_request_length),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
