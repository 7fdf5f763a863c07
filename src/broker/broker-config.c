/* SPDX-License-Identifier: MIT */
/* The broker's configuration, JSON from the coordinator (issue 18):
 *
 *   {"version": 1, "rules": ["example.com:443", "*.example.org:443"],
 *    "check_server_name": false, "max_connections": 256, "idle_timeout": 600,
 *    "connect_timeout": 10, "netpolicy": "<canonical Derived Network Policy>",
 *    "resolvers": ["198.51.100.4", "127.0.0.1:5353", "[::1]:5353"]}
 *
 * version, rules and netpolicy are required. Unknown keys and bad values are
 * errors naming the key. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "broker.h"
#include "strbuf.h"

#define DEFAULT_MAX_CONNECTIONS 256u
#define DEFAULT_IDLE_TIMEOUT    600u
#define DEFAULT_CONNECT_TIMEOUT 10u

void broker_config_done(BrokerConfig *c) {
        free(c->rules);
        netpolicy_done(&c->policy);
        free(c->resolvers_csv);
        *c = (BrokerConfig){};
}

static int bad(char *error, size_t size, const char *fmt, ...) _printf_(3, 4);
static int bad(char *error, size_t size, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error, size, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static int get_uint(json_t *v, const char *key, unsigned min, unsigned max, unsigned *ret, char *error, size_t size) {
        if (!json_is_integer(v) || json_integer_value(v) < (json_int_t) min || json_integer_value(v) > (json_int_t) max)
                return bad(error, size, "\"%s\" must be an integer from %u to %u", key, min, max);
        *ret = (unsigned) json_integer_value(v);
        return 0;
}

/* "ADDR", "ADDR:PORT" (IPv4), "[ADDR]" or "[ADDR]:PORT" (IPv6), or a bare
 * IPv6 address; the port defaults to 53. */
static int parse_resolver(const char *s, NetAddr *ret_addr, unsigned *ret_port) {
        char host[INET6_ADDRSTRLEN + 1];
        const char *port = NULL;
        size_t hl;
        if (s[0] == '[') {
                const char *close = strchr(s, ']');
                if (!close)
                        return -EINVAL;
                hl = (size_t) (close - s - 1);
                if (hl >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s + 1, hl);
                host[hl] = '\0';
                if (close[1] == ':')
                        port = close + 2;
                else if (close[1] != '\0')
                        return -EINVAL;
                if (!strchr(host, ':'))
                        return -EINVAL;
        } else {
                const char *colon = strchr(s, ':');
                if (colon && strchr(colon + 1, ':'))
                        colon = NULL; /* a bare IPv6 address */
                hl = colon ? (size_t) (colon - s) : strlen(s);
                if (hl >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s, hl);
                host[hl] = '\0';
                if (colon)
                        port = colon + 1;
        }
        if (netaddr_parse(host, ret_addr) < 0)
                return -EINVAL;
        unsigned p = 53;
        if (port) {
                if (port[0] < '1' || port[0] > '9' || strlen(port) > 5)
                        return -EINVAL;
                p = 0;
                for (const char *c = port; *c; c++) {
                        if (*c < '0' || *c > '9')
                                return -EINVAL;
                        p = p * 10 + (unsigned) (*c - '0');
                }
                if (p > 65535)
                        return -EINVAL;
        }
        *ret_port = p;
        return 0;
}

static int parse_rules(json_t *v, BrokerConfig *c, char *error, size_t size) {
        if (!json_is_array(v))
                return bad(error, size, "\"rules\" must be an array of strings");
        size_t n = json_array_size(v);
        if (n > BROKER_RULES_MAX)
                return bad(error, size, "\"rules\" has more than %u entries", BROKER_RULES_MAX);
        c->rules = calloc(n ?: 1, sizeof(DomainRule));
        if (!c->rules)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(v, i);
                const char *why = NULL;
                if (!json_is_string(e))
                        return bad(error, size, "\"rules\"[%zu] is not a string", i);
                if (domain_rule_parse(json_string_value(e), &c->rules[i], &why) < 0)
                        return bad(error, size, "\"rules\"[%zu]: %s", i, why ?: "not a rule");
        }
        c->n_rules = n;
        return 0;
}

static int parse_resolvers(json_t *v, BrokerConfig *c, char *error, size_t size) {
        if (!json_is_array(v))
                return bad(error, size, "\"resolvers\" must be an array of strings");
        size_t n = json_array_size(v);
        if (n > NETPOLICY_RESOLVERS_MAX)
                return bad(error, size, "\"resolvers\" has more than %u entries", NETPOLICY_RESOLVERS_MAX);
        if (n == 0)
                return 0;
        StrBuf b = STRBUF_INIT;
        for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(v, i);
                NetAddr a;
                unsigned port;
                if (!json_is_string(e) || parse_resolver(json_string_value(e), &a, &port) < 0) {
                        strbuf_done(&b);
                        return bad(error, size,
                                   "\"resolvers\"[%zu] is not an address with an optional port (\"192.0.2.53\", "
                                   "\"127.0.0.1:5353\", \"[::1]:5353\")",
                                   i);
                }
                char s[64];
                netaddr_format(&a, s, sizeof(s));
                if (a.family == AF_INET6)
                        strbuf_printf(&b, "%s[%s]:%u", i ? "," : "", s, port);
                else
                        strbuf_printf(&b, "%s%s:%u", i ? "," : "", s, port);
        }
        c->resolvers_csv = strbuf_steal(&b);
        if (!c->resolvers_csv)
                return -ENOMEM;
        c->n_resolvers = n;
        return 0;
}

int broker_config_parse(const char *buf, size_t len, BrokerConfig *ret, char *error, size_t size) {
        json_error_t jerr;
        json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root)
                return bad(error, size, "not JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        BrokerConfig c = {
                .max_connections = DEFAULT_MAX_CONNECTIONS,
                .idle_timeout = DEFAULT_IDLE_TIMEOUT,
                .connect_timeout = DEFAULT_CONNECT_TIMEOUT,
        };
        bool have_version = false, have_rules = false, have_policy = false;
        int r = 0;
        if (!json_is_object(root)) {
                r = bad(error, size, "the configuration is not a JSON object");
                goto out;
        }
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
                if (strcmp(key, "version") == 0) {
                        if (!json_is_integer(v) || json_integer_value(v) != 1) {
                                r = bad(error, size, "\"version\" must be 1");
                                goto out;
                        }
                        have_version = true;
                } else if (strcmp(key, "rules") == 0) {
                        r = parse_rules(v, &c, error, size);
                        if (r < 0)
                                goto out;
                        have_rules = true;
                } else if (strcmp(key, "check_server_name") == 0) {
                        if (!json_is_boolean(v)) {
                                r = bad(error, size, "\"check_server_name\" must be true or false");
                                goto out;
                        }
                        c.check_server_name = json_is_true(v);
                } else if (strcmp(key, "max_connections") == 0) {
                        r = get_uint(v, key, 1, BROKER_CONNECTIONS_MAX, &c.max_connections, error, size);
                        if (r < 0)
                                goto out;
                } else if (strcmp(key, "idle_timeout") == 0) {
                        r = get_uint(v, key, 1, 7 * 24 * 3600, &c.idle_timeout, error, size);
                        if (r < 0)
                                goto out;
                } else if (strcmp(key, "connect_timeout") == 0) {
                        r = get_uint(v, key, 1, 300, &c.connect_timeout, error, size);
                        if (r < 0)
                                goto out;
                } else if (strcmp(key, "netpolicy") == 0) {
                        const char *why = NULL;
                        if (!json_is_string(v)) {
                                r = bad(error, size, "\"netpolicy\" must be a string");
                                goto out;
                        }
                        if (netpolicy_parse(json_string_value(v), json_string_length(v), &c.policy, &why) < 0) {
                                r = bad(error, size, "\"netpolicy\": %s", why ?: "not a canonical policy");
                                goto out;
                        }
                        have_policy = true;
                } else if (strcmp(key, "resolvers") == 0) {
                        r = parse_resolvers(v, &c, error, size);
                        if (r < 0)
                                goto out;
                } else {
                        char shown[64];
                        snprintf(shown, sizeof(shown), "%s", key);
                        for (char *p = shown; *p; p++)
                                if (*p < 0x20 || *p > 0x7e)
                                        *p = '?';
                        r = bad(error, size, "unknown key \"%s\"", shown);
                        goto out;
                }
        }
        if (!have_version || !have_rules || !have_policy) {
                r = bad(error, size, "\"%s\" is missing",
                        !have_version ? "version"
                        : !have_rules ? "rules"
                                      : "netpolicy");
                goto out;
        }
        *ret = c;
        c = (BrokerConfig){};
out:
        json_decref(root);
        broker_config_done(&c);
        return r;
}
