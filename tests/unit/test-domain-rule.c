/* SPDX-License-Identifier: MIT */
/* Unit tests of src/netpolicy/domain-rule: the host names and NAME[:PORT]
 * rules of egress by name (allow_domains). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "domain-rule.h"

/* Canonicalize a C string; returns the canonical name (static buffer). */
static const char *canon(const char *s) {
        static char out[DOMAIN_NAME_MAX + 1];
        const char *why = NULL;
        int r = domain_name_canonical(s, strlen(s), out, &why);
        if (r < 0)
                fail_msg("\"%s\" refused: %s", s, why);
        assert_null(why);
        return out;
}

/* The reason the len bytes at s are refused (which must be static, end
 * without a period, and leave out untouched). */
static const char *refused_n(const char *s, size_t len) {
        char out[DOMAIN_NAME_MAX + 1];
        const char *why = NULL;
        memset(out, 'Z', sizeof(out));
        assert_int_equal(domain_name_canonical(s, len, out, &why), -EINVAL);
        assert_non_null(why);
        assert_true(strlen(why) > 0);
        assert_true(why[strlen(why) - 1] != '.');
        for (size_t i = 0; i < sizeof(out); i++)
                assert_int_equal(out[i], 'Z');
        return why;
}

static const char *refused(const char *s) {
        return refused_n(s, strlen(s));
}

static DomainRule rule(const char *s) {
        DomainRule r;
        const char *why = NULL;
        if (domain_rule_parse(s, &r, &why) < 0)
                fail_msg("rule \"%s\" refused: %s", s, why);
        return r;
}

static const char *rule_refused(const char *s) {
        DomainRule r;
        const char *why = NULL;
        assert_int_equal(domain_rule_parse(s, &r, &why), -EINVAL);
        assert_non_null(why);
        assert_true(why[strlen(why) - 1] != '.');
        return why;
}

static const char *fmt(const DomainRule *r) {
        static char buf[DOMAIN_NAME_MAX + 9];
        domain_rule_format(r, buf, sizeof(buf));
        return buf;
}

/* A name of n bytes made of labels of at most 63 bytes: "aaa...a.bbb...". */
static char *long_name(size_t n) {
        char *s = malloc(n + 2);
        assert_non_null(s);
        for (size_t i = 0; i < n; i++)
                s[i] = (i + 1) % 64 == 0 ? '.' : (char) ('a' + (i / 64) % 26);
        assert_true(s[n - 1] != '.');
        s[n] = '\0';
        return s;
}

static void test_canonical_folds(void **state) {
        (void) state;
        assert_string_equal(canon("EXAMPLE.Test."), "example.test");
        assert_string_equal(canon("example.test"), "example.test");
        assert_string_equal(canon("Api.GitHub.COM"), "api.github.com");
        assert_string_equal(canon("a"), "a");
        assert_string_equal(canon("localhost"), "localhost");
        assert_string_equal(canon("a-b.c-d"), "a-b.c-d");
        assert_string_equal(canon("a--b.example"), "a--b.example");
        assert_string_equal(canon("1.2.3.example"), "1.2.3.example");
        assert_string_equal(canon("123.example.4a"), "123.example.4a");
        assert_string_equal(canon("0x7f.example"), "0x7f.example");
        assert_string_equal(canon("a.0x1"), "a.0x1");
        /* IDN only as punycode. */
        assert_string_equal(canon("xn--bcher-kva.example"), "xn--bcher-kva.example");
        assert_string_equal(canon("XN--BCHER-KVA.Example"), "xn--bcher-kva.example");
        /* len is honoured; no NUL needed after the name. */
        char out[DOMAIN_NAME_MAX + 1];
        const char *why;
        assert_int_equal(domain_name_canonical("example.testXYZ", 12, out, &why), 0);
        assert_string_equal(out, "example.test");
}

static void test_canonical_trailing_dots(void **state) {
        (void) state;
        assert_string_equal(canon("example.test."), "example.test");
        assert_string_equal(canon("a."), "a");
        assert_string_equal(refused("example.test.."), "the name has an empty label (\"..\" or a leading dot)");
        assert_string_equal(refused(".example.test"), "the name has an empty label (\"..\" or a leading dot)");
        assert_string_equal(refused("example..test"), "the name has an empty label (\"..\" or a leading dot)");
        assert_string_equal(refused("."), "the name is empty");
        assert_string_equal(refused(".."), "the name has an empty label (\"..\" or a leading dot)");
        assert_string_equal(refused(""), "the name is empty");
        assert_string_equal(refused_n(NULL, 0), "the name is empty");
}

static void test_canonical_bytes(void **state) {
        (void) state;
        /* A NUL among the len bytes, even where strlen would stop. */
        assert_string_equal(refused_n("example\0.test", 13), "the name has a NUL byte");
        assert_string_equal(refused_n("example.test\0", 13), "the name has a NUL byte");
        assert_string_equal(refused_n("\0", 1), "the name has a NUL byte");
        assert_string_equal(refused("example.test%00"), "the name has a '%' (percent-encoding is not a host name)");
        assert_string_equal(refused("ex%61mple.test"), "the name has a '%' (percent-encoding is not a host name)");
        assert_string_equal(refused("example.test "), "the name has a space");
        assert_string_equal(refused(" example.test"), "the name has a space");
        assert_string_equal(refused("exa mple.test"), "the name has a space");
        assert_string_equal(refused("*.example.test"), "the name has a '*' (a wildcard is not a host name)");
        const char *bad[] = { "ex_ample.test", "example.test\n", "example.test\t", "a/b.test", "a:b.test",
                              "a@b.test",      "[::1]",          "a\\b.test",      "a+b.test", "a,b",
                              "a;b",           "\x7f.test",      "a\rb.test",      "a=b.test", "a\"b.test" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_string_equal(refused(bad[i]), "the name has a byte that is not a letter, digit, hyphen or dot");
        /* UTF-8 is refused and points at punycode. */
        const char *utf8[] = { "b\xc3\xbc"
                               "cher.example",
                               "\xe2\x80\x8b"
                               "example.test",
                               "example.t\xc3\xa9st", "\xff",
                               "ex\x80"
                               "ample.test" };
        for (size_t i = 0; i < sizeof(utf8) / sizeof(utf8[0]); i++) {
                const char *why = refused(utf8[i]);
                assert_non_null(strstr(why, "non-ASCII"));
                assert_non_null(strstr(why, "xn--"));
        }
        /* The byte reason wins over a length reason. */
        char *s = long_name(300);
        s[150] = '%';
        assert_string_equal(refused(s), "the name has a '%' (percent-encoding is not a host name)");
        free(s);
}

static void test_canonical_upper_case_tricks(void **state) {
        (void) state;
        /* Only A-Z fold; look-alikes in Latin-1 or UTF-8 do not. */
        assert_string_equal(canon("EXAMPLE.TEST"), "example.test");
        assert_string_equal(canon("eXaMpLe.TeSt"), "example.test");
        assert_non_null(strstr(refused("EXAMPL\xc9.TEST"), "non-ASCII")); /* Latin-1 E-acute */
        assert_non_null(strstr(refused("\xc4\xb0"
                                       "NSTAGRAM.COM"),
                               "non-ASCII")); /* dotted capital I */
        assert_non_null(strstr(refused("\xef\xbc\xa5"
                                       "XAMPLE.TEST"),
                               "non-ASCII")); /* fullwidth E */
        /* The bytes next to the A-Z and a-z ranges are not letters. */
        assert_string_equal(refused("@example.test"), "the name has a byte that is not a letter, digit, hyphen or dot");
        assert_string_equal(refused("[example.test"), "the name has a byte that is not a letter, digit, hyphen or dot");
        assert_string_equal(refused("`example.test"), "the name has a byte that is not a letter, digit, hyphen or dot");
        assert_string_equal(refused("{example.test"), "the name has a byte that is not a letter, digit, hyphen or dot");
        /* Folding happens before the IP check. */
        assert_string_equal(refused("0X7F.1"), "an IP address, not a name");
}

static void test_canonical_labels(void **state) {
        (void) state;
        char l63[64], l64[65], name[200];
        memset(l63, 'a', 63);
        l63[63] = '\0';
        memset(l64, 'b', 64);
        l64[64] = '\0';

        snprintf(name, sizeof(name), "%s.example", l63);
        assert_string_equal(canon(name), name);
        snprintf(name, sizeof(name), "x.%s", l63);
        assert_string_equal(canon(name), name);
        snprintf(name, sizeof(name), "%s.example", l64);
        assert_string_equal(refused(name), "a label is longer than 63 bytes");
        snprintf(name, sizeof(name), "x.%s.test", l64);
        assert_string_equal(refused(name), "a label is longer than 63 bytes");
        snprintf(name, sizeof(name), "x.%s", l64);
        assert_string_equal(refused(name), "a label is longer than 63 bytes");
        assert_string_equal(refused(l64), "a label is longer than 63 bytes");

        assert_string_equal(refused("-a.example"), "a label starts or ends with a hyphen");
        assert_string_equal(refused("a-.example"), "a label starts or ends with a hyphen");
        assert_string_equal(refused("a.-example"), "a label starts or ends with a hyphen");
        assert_string_equal(refused("a.example-"), "a label starts or ends with a hyphen");
        assert_string_equal(refused("-"), "a label starts or ends with a hyphen");
        assert_string_equal(refused("a.-.b"), "a label starts or ends with a hyphen");
}

static void test_canonical_length(void **state) {
        (void) state;
        char *s = long_name(253);
        assert_string_equal(canon(s), s);
        free(s);

        /* 253 bytes and the one trailing dot that may be written. */
        s = long_name(253);
        char with_dot[256];
        snprintf(with_dot, sizeof(with_dot), "%s.", s);
        assert_string_equal(canon(with_dot), s);
        free(s);

        s = long_name(254);
        assert_string_equal(refused(s), "the name is longer than 253 bytes");
        free(s);

        s = long_name(5000);
        assert_string_equal(refused(s), "the name is longer than 253 bytes");
        free(s);
}

static void test_canonical_digits(void **state) {
        (void) state;
        assert_string_equal(refused("127.0.0.1"), "an IP address, not a name");
        assert_string_equal(refused("127.1"), "an IP address, not a name");
        assert_string_equal(refused("127.0.0.1."), "an IP address, not a name");
        assert_string_equal(refused("2130706433"), "an IP address, not a name");
        assert_string_equal(refused("999.999.999.999"), "an IP address, not a name");
        assert_string_equal(refused("0177.0.0.01"), "an IP address, not a name");
        /* What inet_aton also reads as an address. */
        assert_string_equal(refused("0x7f.0.0.1"), "an IP address, not a name");
        assert_string_equal(refused("0x7f000001"), "an IP address, not a name");
        assert_string_equal(refused("0x7f.0x1"), "an IP address, not a name");
        /* All digits but not address-like. */
        assert_string_equal(refused("1.2.3.4.5"), "the last label is all digits");
        assert_string_equal(refused("example.123"), "the last label is all digits");
        assert_string_equal(refused("a.b.c.0"), "the last label is all digits");
        assert_string_equal(refused("0x7f.0.0.0.1"), "the last label is all digits");
        /* Five numeric labels, the last hex: not an inet_aton address. */
        assert_string_equal(canon("1.2.3.4.0x5"), "1.2.3.4.0x5");
        assert_string_equal(canon("example.1a"), "example.1a");
        assert_string_equal(canon("1.example"), "1.example");
}

static void test_parse_exact_and_ports(void **state) {
        (void) state;
        DomainRule r = rule("api.example.com");
        assert_false(r.wildcard);
        assert_string_equal(r.name, "api.example.com");
        assert_int_equal(r.port, 443);

        r = rule("API.Example.COM.:22");
        assert_false(r.wildcard);
        assert_string_equal(r.name, "api.example.com");
        assert_int_equal(r.port, 22);

        assert_int_equal(rule("a.test:1").port, 1);
        assert_int_equal(rule("a.test:65535").port, 65535);
        assert_int_equal(rule("a.test:443").port, 443);
        assert_int_equal(rule("a.test:80").port, 80);

        assert_string_equal(rule_refused("a.test:0"), "the port must be 1..65535");
        assert_string_equal(rule_refused("a.test:65536"), "the port must be 1..65535");
        assert_string_equal(rule_refused("a.test:99999999999999999999999"), "the port must be 1..65535");
        const char *bad_port[] = { "a.test:00443", "a.test:00",   "a.test:+443", "a.test:-1", "a.test: 443",
                                   "a.test:443 ",  "a.test:0x50", "a.test:44a",  "a.test:1e3" };
        for (size_t i = 0; i < sizeof(bad_port) / sizeof(bad_port[0]); i++)
                assert_string_equal(rule_refused(bad_port[i]),
                                    "the port must be a decimal number without sign or leading zeros");
        assert_string_equal(rule_refused("a.test:"), "the port after ':' is empty");
        assert_string_equal(rule_refused("a.test:443:443"), "the rule has more than one ':'");
        assert_string_equal(rule_refused(":443"), "the name is empty");
        assert_string_equal(rule_refused(""), "the name is empty");
}

static void test_parse_refusals(void **state) {
        (void) state;
        /* The name's own refusals come through. */
        assert_string_equal(rule_refused("a..test"), "the name has an empty label (\"..\" or a leading dot)");
        assert_string_equal(rule_refused("a.test..:22"), "the name has an empty label (\"..\" or a leading dot)");
        assert_string_equal(rule_refused("a b.test"), "the name has a space");
        assert_string_equal(rule_refused("a.test%00"), "the name has a '%' (percent-encoding is not a host name)");
        assert_string_equal(rule_refused("example.123"), "the last label is all digits");
        assert_non_null(strstr(rule_refused("b\xc3\xbc"
                                            "cher.example"),
                               "xn--"));

        /* IP literals, with the hint where to put them. */
        const char *ip[] = { "10.0.0.1", "10.0.0.1:22", "127.1",   "[::1]",           "[::1]:443", "[2001:db8::1]:22",
                             "::1",      "2001:db8::1", "fe80::1", "::ffff:10.0.0.1", "0x7f.1:80" };
        for (size_t i = 0; i < sizeof(ip) / sizeof(ip[0]); i++)
                assert_string_equal(rule_refused(ip[i]), "an IP address, not a name: use a CIDR rule in allow_egress");

        /* Wildcards. */
        assert_string_equal(rule_refused("*"), "a wildcard needs a suffix of at least two labels");
        assert_string_equal(rule_refused("*:443"), "a wildcard needs a suffix of at least two labels");
        assert_string_equal(rule_refused("*."), "a wildcard needs a suffix of at least two labels");
        assert_string_equal(rule_refused("*.."), "a wildcard needs a suffix of at least two labels");
        assert_string_equal(rule_refused("*.com"), "a wildcard needs a suffix of at least two labels");
        assert_string_equal(rule_refused("*.COM.:22"), "a wildcard needs a suffix of at least two labels");
        const char *star[] = { "**.example.com",  "*a.example.com", "a*.example.com", "a.*.example.com",
                               "*.*.example.com", "example.*",      "*example.com",   "a.example.com*",
                               "*.example.com*",  "*.ex*ample.com" };
        for (size_t i = 0; i < sizeof(star) / sizeof(star[0]); i++)
                assert_string_equal(rule_refused(star[i]), "a '*' may only be the whole first label");
        assert_string_equal(rule_refused("*..example.com"), "the name has an empty label (\"..\" or a leading dot)");
        assert_string_equal(rule_refused("*.example.com:0"), "the port must be 1..65535");
        assert_string_equal(rule_refused("*.10.0.0.1"), "an IP address, not a name: use a CIDR rule in allow_egress");

        /* A suffix no name of 253 bytes can end in. */
        char *s = long_name(251);
        char w[300];
        snprintf(w, sizeof(w), "*.%s", s);
        DomainRule r = rule(w);
        assert_true(r.wildcard);
        assert_string_equal(r.name, s);
        free(s);
        s = long_name(252);
        snprintf(w, sizeof(w), "*.%s", s);
        assert_string_equal(rule_refused(w), "the wildcard's suffix is too long for any name to match it");
        free(s);
}

static void test_wildcard_match(void **state) {
        (void) state;
        DomainRule r = rule("*.Example.Test");
        assert_true(r.wildcard);
        assert_string_equal(r.name, "example.test");
        assert_int_equal(r.port, 443);

        assert_true(domain_rule_match(&r, "a.example.test", 443));
        assert_true(domain_rule_match(&r, "xn--bcher-kva.example.test", 443));
        assert_false(domain_rule_match(&r, "a.b.example.test", 443));
        assert_false(domain_rule_match(&r, "example.test", 443));
        assert_false(domain_rule_match(&r, "xexample.test", 443));
        assert_false(domain_rule_match(&r, ".example.test", 443));
        assert_false(domain_rule_match(&r, "a.example.test.evil", 443));
        assert_false(domain_rule_match(&r, "a.example.testx", 443));
        assert_false(domain_rule_match(&r, "test", 443));
        assert_false(domain_rule_match(&r, "", 443));
        assert_false(domain_rule_match(&r, "a.example.test", 80));

        DomainRule e = rule("example.test:8443");
        assert_true(domain_rule_match(&e, "example.test", 8443));
        assert_false(domain_rule_match(&e, "example.test", 443));
        assert_false(domain_rule_match(&e, "a.example.test", 8443));
        assert_false(domain_rule_match(&e, "example.tes", 8443));
        assert_false(domain_rule_match(&e, "example.testt", 8443));
        assert_false(domain_rule_match(&e, "xexample.test", 8443));
}

static void test_find(void **state) {
        (void) state;
        DomainRule rules[] = { rule("api.example.com"), rule("*.example.org:22"), rule("git.example.org:443"),
                               rule("*.example.org:2222") };
        const size_t n = sizeof(rules) / sizeof(rules[0]);
        bool listed;

        listed = false;
        assert_ptr_equal(domain_rules_find(rules, n, "api.example.com", 443, &listed), &rules[0]);
        assert_true(listed);
        assert_ptr_equal(domain_rules_find(rules, n, "git.example.org", 22, &listed), &rules[1]);
        assert_ptr_equal(domain_rules_find(rules, n, "git.example.org", 443, &listed), &rules[2]);
        assert_ptr_equal(domain_rules_find(rules, n, "x.example.org", 2222, &listed), &rules[3]);

        /* Name listed, port not. */
        listed = false;
        assert_null(domain_rules_find(rules, n, "api.example.com", 80, &listed));
        assert_true(listed);
        listed = false;
        assert_null(domain_rules_find(rules, n, "x.example.org", 443, &listed));
        assert_true(listed);

        /* Name not listed at all. */
        listed = true;
        assert_null(domain_rules_find(rules, n, "example.org", 22, &listed));
        assert_false(listed);
        listed = true;
        assert_null(domain_rules_find(rules, n, "a.b.example.org", 22, &listed));
        assert_false(listed);
        listed = true;
        assert_null(domain_rules_find(rules, n, "www.example.com", 443, &listed));
        assert_false(listed);

        /* ret_name_listed may be NULL; no rules is no match. */
        assert_null(domain_rules_find(rules, n, "api.example.com", 80, NULL));
        assert_ptr_equal(domain_rules_find(rules, n, "api.example.com", 443, NULL), &rules[0]);
        listed = true;
        assert_null(domain_rules_find(NULL, 0, "api.example.com", 443, &listed));
        assert_false(listed);
}

static void test_format_round_trip(void **state) {
        (void) state;
        const char *cases[][2] = {
                { "api.example.com", "api.example.com:443" },
                { "*.example.org:22", "*.example.org:22" },
                { "EXAMPLE.Test.:8080", "example.test:8080" },
                { "*.A.B.C:65535", "*.a.b.c:65535" },
                { "x.test:1", "x.test:1" },
                { "xn--bcher-kva.example", "xn--bcher-kva.example:443" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                DomainRule r = rule(cases[i][0]);
                assert_string_equal(fmt(&r), cases[i][1]);
                DomainRule back = rule(fmt(&r));
                assert_int_equal(back.wildcard, r.wildcard);
                assert_int_equal(back.port, r.port);
                assert_string_equal(back.name, r.name);
        }

        /* The longest rule fits the documented buffer. */
        char *s = long_name(251);
        char w[300], buf[DOMAIN_NAME_MAX + 9];
        snprintf(w, sizeof(w), "*.%s:65535", s);
        DomainRule r = rule(w);
        domain_rule_format(&r, buf, sizeof(buf));
        assert_string_equal(buf, w);
        free(s);
        s = long_name(253);
        snprintf(w, sizeof(w), "%s:65535", s);
        r = rule(w);
        domain_rule_format(&r, buf, sizeof(buf));
        assert_string_equal(buf, w);
        free(s);

        /* A short buffer truncates but stays terminated. */
        char small[8];
        r = rule("api.example.com");
        domain_rule_format(&r, small, sizeof(small));
        assert_string_equal(small, "api.exa");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_canonical_folds),
                cmocka_unit_test(test_canonical_trailing_dots),
                cmocka_unit_test(test_canonical_bytes),
                cmocka_unit_test(test_canonical_upper_case_tricks),
                cmocka_unit_test(test_canonical_labels),
                cmocka_unit_test(test_canonical_length),
                cmocka_unit_test(test_canonical_digits),
                cmocka_unit_test(test_parse_exact_and_ports),
                cmocka_unit_test(test_parse_refusals),
                cmocka_unit_test(test_wildcard_match),
                cmocka_unit_test(test_find),
                cmocka_unit_test(test_format_round_trip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
