/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "egress-addr.h"

typedef struct Range {
        const char *text;
        int family;
        uint8_t addr[16];
        unsigned prefixlen;
        bool host_itself; /* no rule lets it through */
} Range;

/* The built-in non-public ranges (RFC 6890 and friends). */
static const Range ranges[] = {
        { "0.0.0.0/8", AF_INET, { 0 }, 8, true },
        { "10.0.0.0/8", AF_INET, { 10 }, 8, false },
        { "100.64.0.0/10", AF_INET, { 100, 64 }, 10, false },
        { "127.0.0.0/8", AF_INET, { 127 }, 8, true },
        { "169.254.0.0/16", AF_INET, { 169, 254 }, 16, false },
        { "172.16.0.0/12", AF_INET, { 172, 16 }, 12, false },
        { "192.168.0.0/16", AF_INET, { 192, 168 }, 16, false },
        { "224.0.0.0/4", AF_INET, { 224 }, 4, false },
        { "240.0.0.0/4", AF_INET, { 240 }, 4, false },
        { "255.255.255.255/32", AF_INET, { 255, 255, 255, 255 }, 32, false },
        { "::/128", AF_INET6, { 0 }, 128, true },
        { "::1/128", AF_INET6, { [15] = 1 }, 128, true },
        /* Local-use NAT64 (RFC 8215): an operator's own translator, with
         * whatever IPv4 behind it, embedded as the operator chooses. */
        { "64:ff9b:1::/48", AF_INET6, { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, false },
        { "fe80::/10", AF_INET6, { 0xfe, 0x80 }, 10, false },
        /* Site-local (RFC 3879 deprecated it; old networks still route it). */
        { "fec0::/10", AF_INET6, { 0xfe, 0xc0 }, 10, false },
        { "fc00::/7", AF_INET6, { 0xfc }, 7, false },
        { "ff00::/8", AF_INET6, { 0xff }, 8, false },
};

static bool prefix_contains(int family, const uint8_t *net, unsigned prefixlen, const NetAddr *a) {
        if (family != a->family)
                return false;
        unsigned full = prefixlen / 8, rest = prefixlen % 8;
        if (memcmp(net, a->addr, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t) (0xffu << (8 - rest));
        return (net[full] & mask) == (a->addr[full] & mask);
}

/* The most specific built-in range holding a; ranges do not nest except
 * 240/4 and 255.255.255.255, which say the same. */
static const Range *builtin_range(const NetAddr *a) {
        const Range *best = NULL;
        for (size_t i = 0; i < ELEMENTSOF(ranges); i++)
                if (prefix_contains(ranges[i].family, ranges[i].addr, ranges[i].prefixlen, a) &&
                    (!best || ranges[i].prefixlen > best->prefixlen))
                        best = &ranges[i];
        return best;
}

static const NetRule *longest_rule(const NetPolicy *p, const NetAddr *a) {
        const NetRule *best = NULL;
        for (size_t i = 0; i < p->n_rules; i++)
                if (cidr_contains(&p->rules[i].prefix, a) &&
                    (!best || p->rules[i].prefix.prefixlen > best->prefix.prefixlen))
                        best = &p->rules[i];
        return best;
}

static bool is_host_address(const NetAddr *host_addrs, size_t n, const NetAddr *a) {
        for (size_t i = 0; i < n; i++)
                if (host_addrs[i].family == a->family &&
                    memcmp(host_addrs[i].addr, a->addr, a->family == AF_INET ? 4 : 16) == 0)
                        return true;
        return false;
}

/* The IPv4 address an IPv6 form embeds, and the form's name. */
static const char *embedded_ipv4(const NetAddr *a, NetAddr *ret) {
        static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
        static const uint8_t compat[12] = { 0 };
        static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
        if (a->family != AF_INET6)
                return NULL;
        *ret = (NetAddr){ .family = AF_INET };
        if (memcmp(a->addr, mapped, 12) == 0) {
                memcpy(ret->addr, a->addr + 12, 4);
                return "IPv4-mapped";
        }
        if (memcmp(a->addr, nat64, 12) == 0) {
                memcpy(ret->addr, a->addr + 12, 4);
                return "NAT64";
        }
        if (a->addr[0] == 0x20 && a->addr[1] == 0x02) {
                memcpy(ret->addr, a->addr + 2, 4);
                return "6to4";
        }
        /* ::/96 holds :: and ::1 too, which the ranges refuse already. */
        if (memcmp(a->addr, compat, 12) == 0) {
                memcpy(ret->addr, a->addr + 12, 4);
                return "IPv4-compatible";
        }
        return NULL;
}

static int refuse(EgressRefusal *ret, EgressWhy why, const Range *range) {
        if (ret)
                *ret = (EgressRefusal){ .why = why, .range = range ? range->text : NULL };
        return -EPERM;
}

/* The checks both kinds share: the host itself, then what the policy and
 * the built-in ranges say (literal: the policy's verdict alone). */
static int check_one(const NetPolicy *p, const NetAddr *host_addrs, size_t n, const NetAddr *a, bool literal,
                     EgressRefusal *ret) {
        const Range *range = builtin_range(a);
        if (range && range->host_itself)
                return refuse(ret, EGRESS_WHY_HOST_ITSELF, range);
        if (is_host_address(host_addrs, n, a))
                return refuse(ret, EGRESS_WHY_HOST_ADDRESS, NULL);
        if (literal)
                return netpolicy_verdict(p, a) == NET_ALLOW ? 0 : refuse(ret, EGRESS_WHY_POLICY, NULL);
        const NetRule *rule = longest_rule(p, a);
        if (rule && rule->action == NET_DENY)
                return refuse(ret, EGRESS_WHY_DENY_RULE, NULL);
        if (range && (!rule || rule->prefix.prefixlen < range->prefixlen))
                return refuse(ret, EGRESS_WHY_NON_PUBLIC, range);
        return 0;
}

static int check(const NetPolicy *p, const NetAddr *host_addrs, size_t n, const NetAddr *a, bool literal,
                 EgressRefusal *ret) {
        int r = check_one(p, host_addrs, n, a, literal, ret);
        if (r < 0)
                return r;
        NetAddr v4;
        const char *embedding = embedded_ipv4(a, &v4);
        if (!embedding)
                return 0;
        r = check_one(p, host_addrs, n, &v4, literal, ret);
        if (r < 0 && ret) {
                ret->embedding = embedding;
                ret->embedded = v4;
        }
        return r;
}

int egress_address_check(const NetPolicy *p, const NetAddr *host_addrs, size_t n, const NetAddr *a,
                         EgressRefusal *ret) {
        return check(p, host_addrs, n, a, false, ret);
}

int egress_literal_check(const NetPolicy *p, const NetAddr *host_addrs, size_t n, const NetAddr *a,
                         EgressRefusal *ret) {
        return check(p, host_addrs, n, a, true, ret);
}

const char *egress_why_to_string(EgressWhy why) {
        switch (why) {
        case EGRESS_WHY_HOST_ADDRESS:
                return "one of the host's own addresses";
        case EGRESS_WHY_HOST_ITSELF:
                return "the host itself (loopback or unspecified)";
        case EGRESS_WHY_DENY_RULE:
                return "a deny rule of the network policy covers it";
        case EGRESS_WHY_NON_PUBLIC:
                return "a non-public range that no rule of the network policy allows";
        case EGRESS_WHY_POLICY:
                return "the network policy does not permit it";
        case _EGRESS_WHY_MAX:
        case _EGRESS_WHY_INVALID:
                break;
        }
        return "refused";
}

void egress_refusal_format(const NetAddr *a, const EgressRefusal *r, char *buf, size_t size) {
        char s[64], e[128] = "";
        netaddr_format(a, s, sizeof(s));
        if (r->embedding) {
                char v4[64];
                netaddr_format(&r->embedded, v4, sizeof(v4));
                snprintf(e, sizeof(e), " embeds %s (%s), which", v4, r->embedding);
        }
        if (r->range)
                snprintf(buf, size, "%s%s is in %s: %s", s, e, r->range, egress_why_to_string(r->why));
        else
                snprintf(buf, size, "%s%s is refused: %s", s, e, egress_why_to_string(r->why));
}

/* ---- The server name of a client's first bytes ---- */

#define TLS_RECORD_HANDSHAKE 0x16u
#define TLS_CLIENT_HELLO     0x01u
#define TLS_EXT_SERVER_NAME  0x0000u
#define TLS_RECORD_MAX       (16384u + 2048u)

typedef struct Reader {
        const uint8_t *p;
        size_t left;
} Reader;

static bool rd_u8(Reader *r, uint32_t *v) {
        if (r->left < 1)
                return false;
        *v = r->p[0];
        r->p++;
        r->left--;
        return true;
}

static bool rd_u16(Reader *r, uint32_t *v) {
        if (r->left < 2)
                return false;
        *v = (uint32_t) r->p[0] << 8 | r->p[1];
        r->p += 2;
        r->left -= 2;
        return true;
}

static bool rd_u24(Reader *r, uint32_t *v) {
        if (r->left < 3)
                return false;
        *v = (uint32_t) r->p[0] << 16 | (uint32_t) r->p[1] << 8 | r->p[2];
        r->p += 3;
        r->left -= 3;
        return true;
}

/* A sub-reader over the next len bytes. */
static bool rd_sub(Reader *r, size_t len, Reader *sub) {
        if (r->left < len)
                return false;
        *sub = (Reader){ .p = r->p, .left = len };
        r->p += len;
        r->left -= len;
        return true;
}

static int fail(const char **ret_error, int r, const char *why) {
        if (ret_error)
                *ret_error = why;
        return r;
}

static int copy_name(const uint8_t *name, size_t len, char *out, size_t size, const char **ret_error) {
        if (len == 0)
                return fail(ret_error, -ENOENT, "the server name is empty");
        if (len >= size)
                return fail(ret_error, -EINVAL, "the server name is too long");
        if (memchr(name, '\0', len))
                return fail(ret_error, -EINVAL, "the server name has a NUL byte");
        memcpy(out, name, len);
        out[len] = '\0';
        return 1;
}

static int client_hello_sni(Reader hello, char *out, size_t size, const char **ret_error) {
        uint32_t v, len;
        Reader x;
        const char *bad = "the TLS ClientHello is malformed";
        /* legacy_version, random */
        if (!rd_sub(&hello, 2 + 32, &x))
                return fail(ret_error, -EINVAL, bad);
        /* legacy_session_id, cipher_suites, legacy_compression_methods */
        if (!rd_u8(&hello, &len) || len > 32 || !rd_sub(&hello, len, &x))
                return fail(ret_error, -EINVAL, bad);
        if (!rd_u16(&hello, &len) || len < 2 || len % 2 != 0 || !rd_sub(&hello, len, &x))
                return fail(ret_error, -EINVAL, bad);
        if (!rd_u8(&hello, &len) || len < 1 || !rd_sub(&hello, len, &x))
                return fail(ret_error, -EINVAL, bad);
        if (hello.left == 0)
                return fail(ret_error, -ENOENT, "the TLS ClientHello has no extensions (no server name)");
        Reader exts;
        if (!rd_u16(&hello, &len) || !rd_sub(&hello, len, &exts) || hello.left != 0)
                return fail(ret_error, -EINVAL, bad);
        bool found = false;
        while (exts.left > 0) {
                uint32_t type;
                Reader ext;
                if (!rd_u16(&exts, &type) || !rd_u16(&exts, &len) || !rd_sub(&exts, len, &ext))
                        return fail(ret_error, -EINVAL, bad);
                if (type != TLS_EXT_SERVER_NAME)
                        continue;
                if (found)
                        return fail(ret_error, -EINVAL, "the TLS ClientHello has two server_name extensions");
                found = true;
                Reader list;
                if (!rd_u16(&ext, &len) || !rd_sub(&ext, len, &list) || ext.left != 0)
                        return fail(ret_error, -EINVAL, bad);
                bool have_host = false;
                while (list.left > 0) {
                        Reader name;
                        if (!rd_u8(&list, &v) || !rd_u16(&list, &len) || !rd_sub(&list, len, &name))
                                return fail(ret_error, -EINVAL, bad);
                        if (v != 0) /* only host_name (0) is defined */
                                continue;
                        if (have_host)
                                return fail(ret_error, -EINVAL, "the TLS server_name extension has two host names");
                        have_host = true;
                        int r = copy_name(name.p, name.left, out, size, ret_error);
                        if (r < 0)
                                return r;
                }
                if (!have_host)
                        return fail(ret_error, -ENOENT, "the TLS server_name extension has no host name");
        }
        if (!found)
                return fail(ret_error, -ENOENT, "the TLS ClientHello has no server name (SNI)");
        return 1;
}

static int tls_server_name(const uint8_t *buf, size_t len, char *out, size_t size, const char **ret_error) {
        /* The handshake message may span records: gather its bytes. */
        uint8_t hs[EGRESS_FIRST_BYTES_MAX];
        size_t hs_len = 0, pos = 0;
        for (;;) {
                if (len - pos < 5)
                        return 0;
                if (buf[pos] != TLS_RECORD_HANDSHAKE)
                        return fail(ret_error, -EINVAL, "a TLS record before the ClientHello's end is no handshake");
                if (buf[pos + 1] != 0x03)
                        return fail(ret_error, -EINVAL, "the TLS record has an unknown version");
                size_t rlen = (size_t) buf[pos + 3] << 8 | buf[pos + 4];
                if (rlen == 0 || rlen > TLS_RECORD_MAX)
                        return fail(ret_error, -EINVAL, "the TLS record's length is out of range");
                if (len - pos - 5 < rlen)
                        return 0;
                if (rlen > sizeof(hs) - hs_len)
                        return fail(ret_error, -EINVAL, "the TLS ClientHello is too long");
                memcpy(hs + hs_len, buf + pos + 5, rlen);
                hs_len += rlen;
                pos += 5 + rlen;
                if (hs_len < 4)
                        continue;
                if (hs[0] != TLS_CLIENT_HELLO)
                        return fail(ret_error, -EINVAL, "the first TLS handshake message is no ClientHello");
                size_t mlen = (size_t) hs[1] << 16 | (size_t) hs[2] << 8 | hs[3];
                if (mlen > sizeof(hs) - 4)
                        return fail(ret_error, -EINVAL, "the TLS ClientHello is too long");
                if (hs_len - 4 < mlen)
                        continue;
                Reader r = { .p = hs, .left = hs_len }, hello;
                uint32_t t, l;
                if (!rd_u8(&r, &t) || !rd_u24(&r, &l) || !rd_sub(&r, l, &hello))
                        return fail(ret_error, -EINVAL, "the TLS ClientHello is malformed");
                return client_hello_sni(hello, out, size, ret_error);
        }
}

/* Strip a ":port" from an authority (not touching "[v6]" brackets' inside). */
static size_t host_of_authority(const char *s, size_t len) {
        if (len > 0 && s[0] == '[') {
                const char *close = memchr(s, ']', len);
                return close ? (size_t) (close - s) + 1 : len;
        }
        const char *colon = memchr(s, ':', len);
        return colon ? (size_t) (colon - s) : len;
}

static bool is_ows(char c) {
        return c == ' ' || c == '\t';
}

static int http_server_name(const uint8_t *ubuf, size_t len, char *out, size_t size, const char **ret_error) {
        const char *buf = (const char *) ubuf;
        /* Complete headers first: an empty line ends them. */
        const char *end = NULL;
        for (size_t i = 0; i + 1 < len; i++)
                if (buf[i] == '\n' &&
                    (buf[i + 1] == '\n' || (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n'))) {
                        end = buf + i + 1;
                        break;
                }
        const char *nl = memchr(buf, '\n', len);
        /* Request line: METHOD SP TARGET SP HTTP/x.y */
        if (nl) {
                const char *sp1 = memchr(buf, ' ', (size_t) (nl - buf));
                if (!sp1 || sp1 == buf)
                        return fail(ret_error, -ENOENT, "the first bytes are neither TLS nor HTTP");
                for (const char *c = buf; c < sp1; c++)
                        if (*c < 'A' || *c > 'Z')
                                return fail(ret_error, -ENOENT, "the first bytes are neither TLS nor HTTP");
        } else {
                for (size_t i = 0; i < len; i++)
                        if (buf[i] == ' ')
                                break;
                        else if (buf[i] < 'A' || buf[i] > 'Z')
                                return fail(ret_error, -ENOENT, "the first bytes are neither TLS nor HTTP");
        }
        if (!end)
                return 0;
        const char *sp1 = memchr(buf, ' ', (size_t) (nl - buf));
        const char *target = sp1 + 1;
        const char *sp2 = memchr(target, ' ', (size_t) (nl - target));
        if (!sp2 || (size_t) (nl - sp2) < 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
                return fail(ret_error, -EINVAL, "the HTTP request line is malformed");
        const char *abs_host = NULL;
        size_t abs_len = 0;
        const char *sep = NULL;
        for (const char *c = target; c + 2 < sp2; c++)
                if (c[0] == ':' && c[1] == '/' && c[2] == '/') {
                        sep = c;
                        break;
                }
        if (target[0] != '/' && sep) {
                const char *auth = sep + 3, *auth_end = auth;
                while (auth_end < sp2 && *auth_end != '/' && *auth_end != '?' && *auth_end != '#')
                        auth_end++;
                if (memchr(auth, '@', (size_t) (auth_end - auth)))
                        return fail(ret_error, -EINVAL, "the HTTP request target has a user name");
                abs_host = auth;
                abs_len = host_of_authority(auth, (size_t) (auth_end - auth));
        }
        const char *host = NULL;
        size_t host_len = 0;
        for (const char *line = nl + 1; line < end;) {
                const char *eol = memchr(line, '\n', (size_t) (end - line));
                if (!eol)
                        break;
                if ((size_t) (eol - line) >= 5 && strncasecmp(line, "host:", 5) == 0) {
                        if (host)
                                return fail(ret_error, -EINVAL, "the HTTP request has two Host headers");
                        const char *v = line + 5, *ve = eol;
                        if (ve > v && ve[-1] == '\r')
                                ve--;
                        while (v < ve && is_ows(*v))
                                v++;
                        while (ve > v && is_ows(ve[-1]))
                                ve--;
                        host = v;
                        host_len = host_of_authority(v, (size_t) (ve - v));
                }
                line = eol + 1;
        }
        if (abs_host && host && (abs_len != host_len || strncasecmp(abs_host, host, abs_len) != 0))
                return fail(ret_error, -EINVAL, "the HTTP request target and Host header name different hosts");
        if (abs_host)
                return copy_name((const uint8_t *) abs_host, abs_len, out, size, ret_error);
        if (!host)
                return fail(ret_error, -ENOENT, "the HTTP request has no Host header");
        return copy_name((const uint8_t *) host, host_len, out, size, ret_error);
}

int egress_server_name(const uint8_t *buf, size_t len, char *out, size_t size, const char **ret_error) {
        if (len == 0)
                return 0;
        if (len > EGRESS_FIRST_BYTES_MAX)
                len = EGRESS_FIRST_BYTES_MAX;
        if (buf[0] == TLS_RECORD_HANDSHAKE)
                return tls_server_name(buf, len, out, size, ret_error);
        return http_server_name(buf, len, out, size, ret_error);
}

bool egress_is_http(const uint8_t *buf, size_t len) {
        return len > 0 && buf[0] != TLS_RECORD_HANDSHAKE;
}

int egress_http_request_length(const uint8_t *ubuf, size_t len, uint64_t *ret_len, const char **ret_error) {
        const char *buf = (const char *) ubuf;
        size_t head = 0;
        for (size_t i = 0; i + 1 < len && head == 0; i++)
                if (buf[i] == '\n' && buf[i + 1] == '\n')
                        head = i + 2;
                else if (buf[i] == '\n' && i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
                        head = i + 3;
        if (head == 0)
                return 0;
        const char *nl = memchr(buf, '\n', head);
        bool have_length = false;
        uint64_t body = 0;
        for (const char *line = nl + 1; line < buf + head;) {
                const char *eol = memchr(line, '\n', (size_t) (buf + head - line));
                if (!eol)
                        break;
                const char *ve = eol > line && eol[-1] == '\r' ? eol - 1 : eol;
                if ((size_t) (ve - line) >= 18 && strncasecmp(line, "transfer-encoding:", 18) == 0)
                        return fail(ret_error, -EINVAL,
                                    "the HTTP request's body comes in chunks (Transfer-Encoding), whose end the "
                                    "server-name check cannot find to check the next request");
                if ((size_t) (ve - line) >= 15 && strncasecmp(line, "content-length:", 15) == 0) {
                        const char *v = line + 15;
                        while (v < ve && is_ows(*v))
                                v++;
                        const char *e = ve;
                        while (e > v && is_ows(e[-1]))
                                e--;
                        uint64_t x = 0;
                        if (v == e)
                                return fail(ret_error, -EINVAL, "the HTTP request's Content-Length is empty");
                        for (const char *c = v; c < e; c++) {
                                if (*c < '0' || *c > '9' || x > (UINT64_MAX - 9) / 10)
                                        return fail(ret_error, -EINVAL,
                                                    "the HTTP request's Content-Length is not a number");
                                x = x * 10 + (uint64_t) (*c - '0');
                        }
                        if (have_length && x != body)
                                return fail(ret_error, -EINVAL, "the HTTP request has two Content-Length values");
                        have_length = true;
                        body = x;
                }
                line = eol + 1;
        }
        if (body > UINT64_MAX - head)
                return fail(ret_error, -EINVAL, "the HTTP request's Content-Length is not a number");
        *ret_len = head + body;
        return 1;
}
