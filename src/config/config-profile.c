/* SPDX-License-Identifier: MIT */
/* A profile's sections, validated (config.c calls validate_profile and
 * validate_network): the network policy and its compiled form, the
 * image reference, volumes, env and the command. */
#include "config-internal.h"

/* Add the entries of a CIDR list to the validator's policy input; *ret_n
 * counts the valid ones. Checked where they are in the document, never
 * copied (10,000 prefixes were as many copies, read by nothing). */
static int validate_cidrs(Validator *v, const ConfigNode *n, const char *name, NetAction action, size_t *ret_n) {
        *ret_n = 0;
        if (!config_want_type(v, n, name, TOML_ARRAY)) {
                v->net_bad = true;
                return 0;
        }
        size_t cnt = n->value->array.n;
        if (cnt > CONFIG_PREFIXES_MAX) {
                NODE_ERR(v, n, "%s has %zu entries; at most %zu are allowed", name, cnt, (size_t) CONFIG_PREFIXES_MAX);
                v->net_bad = true;
                return 0;
        }
        /* Room for all of them at once (10,000 prefixes grew it eight
         * times, copying each time): the loop below adds at most these. */
        if (v->n_net + cnt > v->cap_net) {
                size_t cap = v->n_net + cnt;
                NetPolicyEntry *ne = realloc(v->net, cap * sizeof(*ne));
                if (!ne)
                        return -ENOMEM;
                v->net = ne;
                NetWhere *nw = realloc(v->net_where, cap * sizeof(*nw));
                if (!nw)
                        return -ENOMEM;
                v->net_where = nw;
                v->cap_net = cap;
        }
        for (size_t i = 0; i < cnt; i++) {
                const TomlValue *e = n->value->array.items[i];
                if (e->type != TOML_STRING) {
                        ERR(v->d, n->src->path, e->pos, "%s[%zu] must be a string, not %s", name, i,
                            toml_type_with_article(e->type));
                        v->net_bad = true;
                        continue;
                }
                if (e->str.len == 0 || strlen(e->str.s) != e->str.len) {
                        ERR(v->d, n->src->path, e->pos, "%s[%zu] must be a non-empty string without NUL characters",
                            name, i);
                        v->net_bad = true;
                        continue;
                }
                Cidr cidr;
                const char *why = NULL;
                if (cidr_parse(e->str.s, &cidr, &why) < 0) {
                        _cleanup_free_ char *q = config_quoted(e->str.s, e->str.len);
                        ERR(v->d, n->src->path, e->pos, "%s[%zu]: %s is not a valid CIDR: %s", name, i, q ?: "?", why);
                        v->net_bad = true;
                        continue;
                }
                v->net[v->n_net] = (NetPolicyEntry){ .prefix = cidr, .action = action, .where_index = v->n_net };
                v->net_where[v->n_net] = (NetWhere){ .file = n->src->path, .pos = e->pos, .list = name, .index = i };
                v->n_net++;
                (*ret_n)++;
        }
        return 0;
}

int probe_target_parse(const char *s, NetAddr *ret_addr, uint16_t *ret_port) {
        char a[INET6_ADDRSTRLEN + 1];
        const char *colon, *host = s;
        size_t hl;

        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                host = s + 1;
                hl = (size_t) (end - host);
                colon = end + 1;
        } else {
                colon = strrchr(s, ':');
                if (!colon || memchr(s, ':', (size_t) (colon - s)))
                        return -EINVAL; /* IPv6 needs brackets */
                hl = (size_t) (colon - s);
        }
        if (hl == 0 || hl >= sizeof(a))
                return -EINVAL;
        memcpy(a, host, hl);
        a[hl] = '\0';
        NetAddr addr;
        if (netaddr_parse(a, &addr) < 0 || (s[0] == '[') != (addr.family == AF_INET6))
                return -EINVAL;
        const char *p = colon + 1;
        unsigned port = 0;
        if (*p == '\0' || (p[0] == '0'))
                return -EINVAL;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                port = port * 10 + (unsigned) (*p - '0');
                if (port > 65535)
                        return -EINVAL;
        }
        *ret_addr = addr;
        *ret_port = (uint16_t) port;
        return 0;
}

/* A list of NAME[:PORT] rules (domain-rule.h) into *ret (appended to what
 * it holds), each entry's error at its position; a rule listed twice in
 * one list is an error. exact_only: no wildcards (probe names). */
static int validate_domains(Validator *v, const ConfigNode *n, const char *name, bool exact_only, DomainRule **ret,
                            size_t *ret_n, ConfigWhere **ret_where) {
        bool ok = true;
        size_t cnt = 0;
        char **list = config_string_list(v, n, name, &cnt, &ok);
        strv_free_n(list, cnt);
        if (!list)
                return 0;
        size_t first = *ret_n;
        DomainRule *d = realloc(*ret, (first + n->value->array.n + 1) * sizeof(DomainRule));
        if (!d)
                return -ENOMEM;
        *ret = d;
        if (ret_where) {
                ConfigWhere *w = realloc(*ret_where, (first + n->value->array.n + 1) * sizeof(ConfigWhere));
                if (!w)
                        return -ENOMEM;
                *ret_where = w;
        }
        for (size_t i = 0; i < n->value->array.n; i++) {
                const TomlValue *e = n->value->array.items[i];
                if (e->type != TOML_STRING || e->str.len == 0 || strlen(e->str.s) != e->str.len)
                        continue; /* string_list said why */
                _cleanup_free_ char *q = config_quoted(e->str.s, e->str.len);
                DomainRule rule;
                const char *why = NULL;
                if (domain_rule_parse(e->str.s, &rule, &why) < 0) {
                        ERR(v->d, n->src->path, e->pos,
                            "%s[%zu]: %s is not NAME[:PORT] (e.g. \"api.example.com\", \"*.example.org:22\"): %s", name,
                            i, q ?: "?", why);
                        continue;
                }
                if (exact_only && rule.wildcard) {
                        ERR(v->d, n->src->path, e->pos, "%s[%zu]: %s is a wildcard; a probe needs one exact name", name,
                            i, q ?: "?");
                        continue;
                }
                size_t j;
                for (j = first; j < *ret_n; j++)
                        if (d[j].wildcard == rule.wildcard && d[j].port == rule.port && streq(d[j].name, rule.name))
                                break;
                if (j < *ret_n) {
                        ERR(v->d, n->src->path, e->pos, "%s[%zu]: %s is listed twice; keep one", name, i, q ?: "?");
                        continue;
                }
                if (ret_where)
                        (*ret_where)[*ret_n] = (ConfigWhere){ .file = n->src->path, .pos = e->pos };
                d[(*ret_n)++] = rule;
        }
        return 0;
}

int config_validate_network(Validator *v, const ConfigNode *t, const char *top_file) {
        static const TomlPos top = { 1, 1 };
        int r;

        v->c->ipv6_enabled = true;
        if (!t) {
                ERR(v->d, top_file, top, "[network] section is required (it sets default_allow and default_deny)");
                v->net_bad = true;
                return 0;
        }
        if (!config_want_type(v, t, "network", TOML_TABLE)) {
                v->net_bad = true;
                return 0;
        }
        config_check_unknown(v, t, "[network]", "network");

        const ConfigNode *n = config_node_get(t, "ipv6");
        if (n && config_string_ok(v, n, "network.ipv6")) {
                if (streq(n->value->str.s, "disabled"))
                        v->c->ipv6_enabled = false;
                else if (!streq(n->value->str.s, "enabled")) {
                        _cleanup_free_ char *q = config_quoted(n->value->str.s, n->value->str.len);
                        NODE_ERR(v, n, "network.ipv6 must be \"enabled\" or \"disabled\", not %s", q ?: "?");
                        v->net_bad = true;
                }
        } else if (n)
                v->net_bad = true;

        n = config_want_child(v, t, "default_allow", "network.default_allow", NULL, top);
        if (!n)
                v->net_bad = true;
        else if ((r = validate_cidrs(v, n, "network.default_allow", NET_ALLOW, &v->c->n_default_allow)) < 0)
                return r;
        n = config_want_child(v, t, "default_deny", "network.default_deny", NULL, top);
        if (!n)
                v->net_bad = true;
        else if ((r = validate_cidrs(v, n, "network.default_deny", NET_DENY, &v->c->n_default_deny)) < 0)
                return r;
        if (n && n->extra) {
                /* What an untrusted workspace file adds to the denied list. */
                const ConfigNode x = { .key = n->key, .src = n->extra_src, .key_pos = n->key_pos, .value = n->extra };
                size_t n_more = 0;
                if ((r = validate_cidrs(v, &x, "network.default_deny", NET_DENY, &n_more)) < 0)
                        return r;
                v->c->n_default_deny += n_more;
        }
        v->n_net_global = v->n_net;

        n = config_node_get(t, "resolvers");
        if (n) {
                bool ok = true;
                size_t cnt;
                char **list = config_string_list_max(v, n, "network.resolvers", NETPOLICY_RESOLVERS_MAX, &cnt, &ok);
                strv_free_n(list, cnt);
                if (!list || !ok)
                        v->net_bad = true;
                v->c->resolvers = calloc(NETPOLICY_RESOLVERS_MAX, sizeof(NetAddr));
                if (!v->c->resolvers)
                        return -ENOMEM;
                for (size_t i = 0; list && i < n->value->array.n; i++) {
                        const TomlValue *e = n->value->array.items[i];
                        if (e->type != TOML_STRING || e->str.len == 0 || strlen(e->str.s) != e->str.len)
                                continue;
                        if (netaddr_parse(e->str.s, &v->c->resolvers[v->c->n_resolvers]) < 0) {
                                _cleanup_free_ char *q = config_quoted(e->str.s, e->str.len);
                                ERR(v->d, n->src->path, e->pos,
                                    "network.resolvers[%zu]: %s is not an IPv4 or IPv6 address (write the address "
                                    "alone, without a port or prefix length)",
                                    i, q ?: "?");
                                v->net_bad = true;
                                continue;
                        }
                        v->res_where[v->c->n_resolvers] = (NetWhere){
                                .file = n->src->path, .pos = e->pos, .list = "network.resolvers", .index = i
                        };
                        v->c->n_resolvers++;
                }
        }

        n = config_node_get(t, "probe_targets");
        if (n) {
                bool ok = true;
                size_t cnt;
                char **list = config_string_list(v, n, "network.probe_targets", &cnt, &ok);
                strv_free_n(list, cnt);
                if (!list || !ok)
                        v->net_bad = true;
                if (list) {
                        v->c->probe_targets = calloc(n->value->array.n + 1, sizeof(ConfigProbe));
                        if (!v->c->probe_targets)
                                return -ENOMEM;
                }
                for (size_t i = 0; list && i < n->value->array.n; i++) {
                        const TomlValue *e = n->value->array.items[i];
                        if (e->type != TOML_STRING || e->str.len == 0 || strlen(e->str.s) != e->str.len)
                                continue;
                        ConfigProbe *pt = &v->c->probe_targets[v->c->n_probe_targets];
                        if (probe_target_parse(e->str.s, &pt->addr, &pt->port) < 0) {
                                _cleanup_free_ char *q = config_quoted(e->str.s, e->str.len);
                                ERR(v->d, n->src->path, e->pos,
                                    "network.probe_targets[%zu]: %s is not ADDRESS:PORT (e.g. \"198.51.100.7:443\" "
                                    "or \"[2001:db8::7]:443\", port 1-65535)",
                                    i, q ?: "?");
                                v->net_bad = true;
                                continue;
                        }
                        pt->where = (ConfigWhere){ .file = n->src->path, .pos = e->pos };
                        v->c->n_probe_targets++;
                }
        }

        n = config_node_get(t, "probe_dns_name");
        if (n && config_string_ok(v, n, "network.probe_dns_name")) {
                const char *q = n->value->str.s;
                bool ok = strlen(q) <= 253;
                for (const char *c = q; ok && *c; c++)
                        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                             *c == '-' || *c == '.' || *c == '_';
                if (!ok || q[0] == '.' || strstr(q, "..")) {
                        _cleanup_free_ char *qq = config_quoted(q, strlen(q));
                        NODE_ERR(v, n,
                                 "network.probe_dns_name: %s is not a DNS name (letters, digits, '-', '_' and "
                                 "dots; at most 253 characters)",
                                 qq ?: "?");
                        v->net_bad = true;
                } else if (!(v->c->probe_dns_name = strdup(q)))
                        return -ENOMEM;
        } else if (n)
                v->net_bad = true;
        if (!v->c->probe_dns_name && !(v->c->probe_dns_name = strdup(NETPROBE_DNS_NAME_DEFAULT)))
                return -ENOMEM;

        n = config_node_get(t, "default_domains");
        if (n && (r = validate_domains(v, n, "network.default_domains", false, &v->c->default_domains,
                                       &v->c->n_default_domains, NULL)) < 0)
                return r;
        n = config_node_get(t, "probe_domains");
        if (n && (r = validate_domains(v, n, "network.probe_domains", true, &v->c->probe_domains,
                                       &v->c->n_probe_domains, &v->c->probe_domains_where)) < 0)
                return r;
        v->c->broker_connections =
                config_bounded_int(v, config_node_get(t, "broker_connections"), "network.broker_connections",
                                   "connections", 1, CONFIG_BROKER_CONNECTIONS_MAX, CONFIG_BROKER_CONNECTIONS_DEFAULT,
                                   "connections the broker holds open for one sandbox at once");
        return 0;
}

static void net_where_name(const NetWhere *w, char *buf, size_t size) {
        snprintf(buf, size, "%s[%zu]", w->list, w->index);
}

/* Compile the profile's Derived Network Policy from [network] and its
 * allow_egress (already appended to v->net). */
static int compile_profile_policy(Validator *v, ConfigProfile *p) {
        if (v->net_bad)
                return 0;
        bool enabled[_NET_FAMILY_MAX] = { true, v->c->ipv6_enabled };
        NetPolicyError err;
        /* A policy that permits no address gives the sandbox no sidecar and
         * so no DNS: the resolvers serve the broker alone (issue 18), and
         * need not be permitted. */
        NetPolicy bare = {};
        /* A profile with its own address rules drops [network]
         * default_allow's entries (each keeps its where_index) and keeps
         * default_deny's and its own. */
        _cleanup_free_ NetPolicyEntry *own = NULL;
        const NetPolicyEntry *in = v->net;
        size_t n_in = v->n_net;
        if (p->own_address_rules) {
                own = calloc(v->n_net ?: 1, sizeof(*own));
                if (!own)
                        return -ENOMEM;
                n_in = 0;
                for (size_t i = 0; i < v->n_net; i++)
                        if (i >= v->n_net_global || v->net[i].action != NET_ALLOW)
                                own[n_in++] = v->net[i];
                in = own;
        }
        /* Built once (10,000 prefixes are a sort), then given the
         * resolvers unless it permits nothing (then it needs none). */
        int r = netpolicy_build(enabled, in, n_in, NULL, 0, &bare, &err);
        if (r == -ENOMEM)
                return r;
        if (r == 0 && !netpolicy_permits_nothing(&bare))
                r = netpolicy_set_resolvers(&bare, v->c->resolvers, v->c->n_resolvers, &err);
        if (r == 0)
                p->net = bare;
        else
                netpolicy_done(&bare);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                const NetWhere *w = err.is_resolver ? &v->res_where[err.where_index] : &v->net_where[err.where_index];
                char name[128], other[192] = "";
                net_where_name(w, name, sizeof(name));
                if (err.has_other) {
                        const NetWhere *o = &v->net_where[err.other_index];
                        char oname[128];
                        net_where_name(o, oname, sizeof(oname));
                        snprintf(other, sizeof(other), " (the other is %s at %s:%u:%u)", oname, o->file, o->pos.line,
                                 o->pos.col);
                }
                /* Name the profile only when its own entries take part;
                 * otherwise every profile would repeat the same error. */
                char prof[64] = "";
                bool from_profile = err.is_resolver ? v->n_net > v->n_net_global
                                                    : err.where_index >= v->n_net_global ||
                                                              (err.has_other && err.other_index >= v->n_net_global);
                if (from_profile)
                        snprintf(prof, sizeof(prof), " (profile %s)", p->name);
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "%s: %s%s%s", name, err.message, other, prof) < 0)
                        return -ENOMEM;
                for (size_t i = 0; i < v->d->n; i++)
                        if (v->d->items[i].pos.line == w->pos.line && v->d->items[i].pos.col == w->pos.col &&
                            streq(v->d->items[i].message, msg))
                                return 0;
                ERR(v->d, w->file, w->pos, "%s", msg);
                return 0;
        }
        for (size_t i = 0; i < v->c->n_probe_targets; i++) {
                const ConfigProbe *pt = &v->c->probe_targets[i];
                if (netpolicy_verdict(&p->net, &pt->addr) == NET_ALLOW)
                        continue;
                char a[64];
                netaddr_format(&pt->addr, a, sizeof(a));
                ERR(v->d, pt->where.file, pt->where.pos,
                    "network.probe_targets[%zu]: %s is denied by the policy of profile %s; a probe target must be a "
                    "destination the sandbox may reach%s",
                    i, a, p->name,
                    p->own_address_rules ? " (the profile does not inherit network.default_allow: add the address to "
                                           "its allow_egress, or set its inherit_default_allow = true)"
                                         : "");
        }
        size_t len;
        free(p->net_canonical);
        p->net_canonical = NULL;
        r = netpolicy_format(&p->net, &p->net_canonical, &len);
        if (r < 0)
                return r;
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, p->net_canonical, len, p->net_digest);
        return 0;
}

int config_profile_netpolicy_canonical(const ConfigProfile *p, char **ret, size_t *ret_len) {
        /* Formatted once, with the digest. */
        if (p->net_canonical) {
                char *c = strdup(p->net_canonical);
                if (!c)
                        return -ENOMEM;
                if (ret_len)
                        *ret_len = strlen(c);
                *ret = c;
                return 0;
        }
        return netpolicy_format(&p->net, ret, ret_len);
}

/* Image references: [domain/]path[:tag][@sha256:hex], lowercase path
 * components. We require a registry domain ("fully qualified", so Podman
 * never consults a search list) and warn when there is no digest. */
static const char *image_problem(const char *s, bool *ret_pinned) {
        const char *at = strchr(s, '@');
        *ret_pinned = false;
        size_t name_len = at ? (size_t) (at - s) : strlen(s);
        if (at) {
                const char *hex = startswith(at + 1, "sha256:");
                if (!hex || strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
                        return "the digest must be '@sha256:' followed by 64 lowercase hex digits";
                *ret_pinned = true;
        }
        const char *slash = memchr(s, '/', name_len);
        if (!slash)
                return "not fully qualified: name the registry, e.g. docker.io/library/debian:bookworm";
        size_t dlen = (size_t) (slash - s);
        bool dot = false;
        for (size_t i = 0; i < dlen; i++) {
                char c = s[i];
                if (c == '.' || c == ':')
                        dot = true;
                else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
                        return "the registry name has a character that is not allowed";
        }
        if (dlen == 0 || (!dot && !(dlen == 9 && memcmp(s, "localhost", 9) == 0)))
                return "not fully qualified: the first component must be a registry host (with a '.' or ':', or "
                       "'localhost')";
        /* Path and optional tag. */
        const char *p = slash + 1, *end = s + name_len;
        const char *colon = NULL;
        for (const char *q = p; q < end; q++)
                if (*q == ':')
                        colon = q;
        const char *path_end = colon ? colon : end;
        if (p == path_end)
                return "the repository path is empty";
        char prev = '/';
        for (const char *q = p; q < path_end; q++) {
                char c = *q;
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (alnum) {
                        prev = c;
                        continue;
                }
                if (c == '/' || c == '.' || c == '_' || c == '-') {
                        if (prev == '/' || ((c == '/' || c == '.') && (prev == '.' || prev == '_' || prev == '-')))
                                return "the repository path must be lowercase components separated by '/'";
                        prev = c;
                        continue;
                }
                return "the repository path must be lowercase letters, digits and . _ - /";
        }
        if (prev != '/' && !((prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9')))
                return "the repository path must end with a letter or digit";
        if (colon) {
                size_t tl = (size_t) (end - colon - 1);
                if (tl == 0 || tl > 128)
                        return "the tag must be 1 to 128 characters";
                for (const char *q = colon + 1; q < end; q++) {
                        char c = *q;
                        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                              (q > colon + 1 && (c == '.' || c == '-'))))
                                return "the tag may hold letters, digits, '_', '.' and '-' (not first)";
                }
        }
        return NULL;
}

const char *config_image_problem(const char *ref, bool *ret_pinned) {
        bool pinned = false;
        const char *why = image_problem(ref, &pinned);
        if (ret_pinned)
                *ret_pinned = !why && pinned;
        return why;
}

static bool reserved_container_path(const char *p) {
        static const char *const exact[] = { "/", "/workspace" };
        static const char *const trees[] = { "/run/lazaret", "/proc", "/sys", "/dev" };
        for (size_t i = 0; i < ELEMENTSOF(exact); i++)
                if (streq(p, exact[i]))
                        return true;
        for (size_t i = 0; i < ELEMENTSOF(trees); i++) {
                const char *r = startswith(p, trees[i]);
                if (r && (*r == '\0' || *r == '/'))
                        return true;
        }
        return false;
}

/* The placeholders a profile's host paths may use ({profile_dir} and its
 * kin), for expand_string(). */
static ExpandContext profile_expand_context(const Validator *v, const ConfigProfile *p) {
        ExpandContext ctx = { .home = v->c->home };
        ctx.values[EXPAND_PROFILE_NAME] = p->name;
        ctx.values[EXPAND_PROFILE_DIR] = p->profile_dir;
        ctx.values[EXPAND_DOMAIN_HASH] = p->domain_hash;
        ctx.values[EXPAND_DOMAIN_DIR] = p->domain_dir;
        ctx.values[EXPAND_WORKSPACE_DIR] = v->c->workspace;
        return ctx;
}

static int validate_volume(Validator *v, ConfigProfile *p, const ConfigNode *vol, const TomlValue *t, size_t idx,
                           const char *pname) {
        const char *file = vol->src->path;
        StrBuf nb = STRBUF_INIT;
        strbuf_printf(&nb, "%s.volumes[%zu]", pname, idx);
        _cleanup_free_ char *name = strbuf_steal(&nb);
        if (!name)
                return -ENOMEM;

        if (t->type != TOML_TABLE) {
                ERR(v->d, file, t->pos, "%s must be a table with host, container and mode, not %s", name,
                    toml_type_with_article(t->type));
                return 0;
        }
        const TomlEntry *host = NULL, *cont = NULL, *mode = NULL;
        for (size_t i = 0; i < t->table.n; i++) {
                const TomlEntry *e = &t->table.entries[i];
                if (streq(e->key, "host"))
                        host = e;
                else if (streq(e->key, "container"))
                        cont = e;
                else if (streq(e->key, "mode"))
                        mode = e;
                else {
                        _cleanup_free_ char *kq = config_quoted(e->key, e->key_len);
                        ERR(v->d, file, e->key_pos, "unknown key %s in %s (known: host, container, mode)", kq ?: "?",
                            name);
                }
        }
        ConfigVolume cv = { .where = { file, t->pos } };
        bool ok = true;
        const struct {
                const TomlEntry *e;
                const char *key;
        } req[] = { { host, "host" }, { cont, "container" } };
        for (size_t i = 0; i < ELEMENTSOF(req); i++) {
                if (!req[i].e) {
                        ERR(v->d, file, t->pos, "%s.%s is required", name, req[i].key);
                        ok = false;
                } else if (req[i].e->value->type != TOML_STRING || req[i].e->value->str.len == 0 ||
                           strlen(req[i].e->value->str.s) != req[i].e->value->str.len) {
                        ERR(v->d, file, req[i].e->value->pos, "%s.%s must be a non-empty string", name, req[i].key);
                        ok = false;
                }
        }

        if (ok && v->data_root_ok) {
                ExpandContext ctx = profile_expand_context(v, p);
                _cleanup_free_ char *hn = NULL;
                StrBuf hb = STRBUF_INIT;
                strbuf_printf(&hb, "%s.host", name);
                hn = strbuf_steal(&hb);
                int r = config_host_path_given(v, file, host->value->pos, hn ?: name, host->value->str.s, &ctx,
                                               &cv.host, &cv.host_given);
                if (r == -ENOMEM)
                        return r;
                ok = r == 0;
        }

        if (cont && cont->value->type == TOML_STRING && cont->value->str.len > 0) {
                const char *cs = cont->value->str.s;
                _cleanup_free_ char *q = config_quoted(cs, cont->value->str.len);
                TomlPos cpos = cont->value->pos;
                if (strlen(cs) != cont->value->str.len)
                        ok = false;
                else if (!path_is_absolute(cs)) {
                        ERR(v->d, file, cpos, "%s.container: %s must be an absolute path in the sandbox", name,
                            q ?: "?");
                        ok = false;
                } else if (path_has_dotdot(cs)) {
                        ERR(v->d, file, cpos, "%s.container: path %s contains a '..' segment; refusing it", name,
                            q ?: "?");
                        ok = false;
                } else if (strpbrk(cs, "{}~,:")) {
                        ERR(v->d, file, cpos,
                            "%s.container: %s has one of '{', '}', '~', ',', ':', which are not allowed in a "
                            "sandbox path",
                            name, q ?: "?");
                        ok = false;
                } else {
                        cv.container = config_path_squash(cs);
                        if (!cv.container) {
                                free(cv.host);
                                free(cv.host_given);
                                return -ENOMEM;
                        }
                        if (reserved_container_path(cv.container)) {
                                ERR(v->d, file, cpos,
                                    "%s.container: %s is reserved by Lazaret (/, /workspace, /run/lazaret, /proc, "
                                    "/sys and /dev cannot be volume targets)",
                                    name, q ?: "?");
                                ok = false;
                        }
                        for (size_t i = 0; ok && i < p->n_volumes; i++)
                                if (streq(p->volumes[i].container, cv.container)) {
                                        ERR(v->d, file, cpos,
                                            "%s.container: %s is already the target of %s.volumes[%zu]", name, q ?: "?",
                                            pname, i);
                                        ok = false;
                                }
                }
        }

        if (mode) {
                if (mode->value->type != TOML_STRING || strlen(mode->value->str.s) != mode->value->str.len) {
                        ERR(v->d, file, mode->value->pos, "%s.mode must be a string such as \"ro\" or \"rw,z\"", name);
                        ok = false;
                } else {
                        bool ro = false, rw = false;
                        const char *s = mode->value->str.s;
                        if (!*s) {
                                ERR(v->d, file, mode->value->pos,
                                    "%s.mode is empty; leave it out or use options from ro, rw, z, Z", name);
                                ok = false;
                        }
                        while (*s) {
                                size_t n = strcspn(s, ",");
                                if (n == 2 && memcmp(s, "ro", 2) == 0)
                                        ro = true;
                                else if (n == 2 && memcmp(s, "rw", 2) == 0)
                                        rw = true;
                                else if (n == 1 && s[0] == 'z')
                                        cv.relabel_shared = true;
                                else if (n == 1 && s[0] == 'Z')
                                        cv.relabel_private = true;
                                else {
                                        _cleanup_free_ char *q = config_quoted(s, n);
                                        ERR(v->d, file, mode->value->pos,
                                            "%s.mode: unknown option %s (allowed: ro, rw, z, Z, comma-separated)", name,
                                            q ?: "?");
                                        ok = false;
                                }
                                s += n;
                                if (*s == ',')
                                        s++;
                        }
                        if (ro && rw) {
                                ERR(v->d, file, mode->value->pos, "%s.mode: 'ro' and 'rw' contradict each other", name);
                                ok = false;
                        }
                        if (cv.relabel_shared && cv.relabel_private) {
                                ERR(v->d, file, mode->value->pos,
                                    "%s.mode: 'z' (shared label) and 'Z' (private label) contradict each other", name);
                                ok = false;
                        }
                        cv.read_only = ro;
                }
        }

        if (!ok) {
                free(cv.host);
                free(cv.host_given);
                free(cv.container);
                return 0;
        }
        ConfigVolume *nv = realloc(p->volumes, (p->n_volumes + 1) * sizeof(ConfigVolume));
        if (!nv) {
                free(cv.host);
                free(cv.host_given);
                free(cv.container);
                return -ENOMEM;
        }
        p->volumes = nv;
        p->volumes[p->n_volumes++] = cv;
        return 0;
}

static int validate_env(Validator *v, ConfigProfile *p, const ConfigNode *t, const char *pname) {
        StrBuf nb = STRBUF_INIT;
        strbuf_printf(&nb, "%s.env", pname);
        _cleanup_free_ char *name = strbuf_steal(&nb);
        if (!name)
                return -ENOMEM;
        if (!config_want_type(v, t, name, TOML_TABLE))
                return 0;
        if (t->n_children > CONFIG_LIST_MAX) {
                NODE_ERR(v, t, "%s has %zu variables; at most %u are allowed", name, t->n_children, CONFIG_LIST_MAX);
                return 0;
        }
        p->env = calloc(t->n_children ? t->n_children : 1, sizeof(ConfigEnvVar));
        if (!p->env)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_children; i++) {
                const ConfigNode *e = &t->children[i];
                _cleanup_free_ char *kq = config_quoted(e->key, strlen(e->key));
                if (!config_env_name_valid(e->key)) {
                        KEY_ERR(v, e,
                                "%s: %s is not a valid variable name (letters, digits and '_', not starting "
                                "with a digit)",
                                name, kq ?: "?");
                        continue;
                }
                if (startswith(e->key, "LAZARET_")) {
                        KEY_ERR(v, e, "%s: %s is reserved: Lazaret sets LAZARET_* variables itself", name, kq ?: "?");
                        continue;
                }
                if (e->value->type != TOML_STRING) {
                        NODE_ERR(v, e, "%s.%s must be a string, not %s", name, e->key,
                                 toml_type_with_article(e->value->type));
                        continue;
                }
                if (strlen(e->value->str.s) != e->value->str.len) {
                        NODE_ERR(v, e, "%s.%s must not contain a NUL character", name, e->key);
                        continue;
                }
                ConfigEnvVar ev = { .where = config_where_of(e) };
                const char *host = startswith(e->value->str.s, "env:");
                if (!host && (host = startswith(e->value->str.s, "env?:")))
                        ev.optional = true;
                if (host) {
                        if (!config_env_name_valid(host)) {
                                _cleanup_free_ char *q = config_quoted(host, strlen(host));
                                NODE_ERR(v, e, "%s.%s: '%s' must be followed by a host variable name, got %s", name,
                                         e->key, ev.optional ? "env?:" : "env:", q ?: "?");
                                continue;
                        }
                        ev.host_var = strdup(host);
                        if (!ev.host_var)
                                return -ENOMEM;
                } else {
                        ev.value = strdup(e->value->str.s);
                        if (!ev.value)
                                return -ENOMEM;
                }
                ev.name = strdup(e->key);
                if (!ev.name) {
                        free(ev.value);
                        free(ev.host_var);
                        return -ENOMEM;
                }
                p->env[p->n_env++] = ev;
        }
        return 0;
}

const char *runsc_network_to_string(RunscNetwork n) {
        switch (n) {
        case RUNSC_NETWORK_SANDBOX:
                return "sandbox";
        case RUNSC_NETWORK_HOST:
                return "host";
        case _RUNSC_NETWORK_MAX:
        case _RUNSC_NETWORK_INVALID:
                break;
        }
        return NULL;
}

static const char *const backend_names[_BACKEND_MAX] = {
        [BACKEND_GVISOR] = "gvisor",
        [BACKEND_NATIVE] = "native",
};

const char *backend_to_string(Backend b) {
        return b >= 0 && b < _BACKEND_MAX ? backend_names[b] : NULL;
}

Backend backend_from_string(const char *s) {
        for (int b = 0; s && b < _BACKEND_MAX; b++)
                if (streq(s, backend_names[b]))
                        return (Backend) b;
        return _BACKEND_INVALID;
}

static int validate_command(Validator *v, ConfigProfile *p, const ConfigNode *n, const char *pname) {
        _cleanup_free_ char *nn = config_key_path(pname, "command");
        bool ok = true;
        if (!nn)
                return -ENOMEM;
        if (n->value->type == TOML_ARRAY && n->value->array.n == 0) {
                NODE_ERR(v, n, "%s must name a program: it is an empty array", nn);
                return 0;
        }
        /* Entries after the first may be empty strings (a real argument). */
        if (!config_want_type(v, n, nn, TOML_ARRAY))
                return 0;
        size_t cnt = n->value->array.n;
        if (cnt > CONFIG_LIST_MAX) {
                NODE_ERR(v, n, "%s has %zu entries; at most %u are allowed", nn, cnt, CONFIG_LIST_MAX);
                return 0;
        }
        char **argv = calloc(cnt + 1, sizeof(char *));
        if (!argv)
                return -ENOMEM;
        for (size_t i = 0; i < cnt; i++) {
                const TomlValue *e = n->value->array.items[i];
                if (e->type != TOML_STRING) {
                        ERR(v->d, n->src->path, e->pos, "%s[%zu] must be a string, not %s", nn, i,
                            toml_type_with_article(e->type));
                        ok = false;
                } else if (strlen(e->str.s) != e->str.len) {
                        ERR(v->d, n->src->path, e->pos, "%s[%zu] must not contain a NUL character", nn, i);
                        ok = false;
                } else if (i == 0 && e->str.len == 0) {
                        ERR(v->d, n->src->path, e->pos, "%s[0] must name a program, not be empty", nn);
                        ok = false;
                } else if (!(argv[i] = strdup(e->str.s))) {
                        strv_free_n(argv, i);
                        return -ENOMEM;
                }
        }
        if (!ok) {
                for (size_t i = 0; i < cnt; i++)
                        free(argv[i]);
                free(argv);
                return 0;
        }
        strv_free_n(p->command, p->n_command);
        p->command = argv;
        p->n_command = cnt;
        return 0;
}

/* ca_certificates: "host", or a list of "host" and PEM files on the host
 * (absolute or ~/, {profile_dir} and its kin expanded), at most 16, each
 * once. The files' contents are read at launch (ca-bundle.h). */
static int validate_ca(Validator *v, ConfigProfile *p, const ConfigNode *n, const char *pname) {
        _cleanup_free_ char *nn = config_key_path(pname, "ca_certificates");
        const char *name = nn ?: "ca_certificates";
        static const char *const choices =
                "\"host\" (the host's trust store) or a list of \"host\" and PEM certificate files";
        const TomlValue *one = n->value->type == TOML_STRING ? n->value : NULL;
        if (!one && n->value->type != TOML_ARRAY) {
                NODE_ERR(v, n, "%s is %s; it is %s", name, toml_type_with_article(n->value->type), choices);
                return 0;
        }
        size_t count = one ? 1 : n->value->array.n;
        if (count == 0 || count > 16) {
                NODE_ERR(v, n, "%s has %zu entries; it takes 1 to 16", name, count);
                return 0;
        }
        p->ca_files = calloc(count + 1, sizeof(char *));
        if (!p->ca_files)
                return -ENOMEM;
        p->ca_where = config_where_of(n);
        for (size_t i = 0; i < count; i++) {
                const TomlValue *e = one ?: n->value->array.items[i];
                _cleanup_free_ char *en = NULL;
                if (!one && asprintf(&en, "%s[%zu]", name, i) < 0)
                        return -ENOMEM;
                if (e->type != TOML_STRING || e->str.len == 0 || strlen(e->str.s) != e->str.len) {
                        ERR(v->d, n->src->path, e->pos, "%s is not a non-empty string; it is %s", en ?: name, choices);
                        continue;
                }
                char *c = NULL;
                if (streq(e->str.s, "host")) {
                        if (!(c = strdup("host")))
                                return -ENOMEM;
                } else if (one) {
                        _cleanup_free_ char *q = config_quoted(e->str.s, e->str.len);
                        ERR(v->d, n->src->path, e->pos, "%s: %s is not \"host\"; it is %s", name, q ?: "?", choices);
                        continue;
                } else {
                        if (!v->data_root_ok)
                                continue;
                        ExpandContext ctx = profile_expand_context(v, p);
                        int r = config_host_path(v, n->src->path, e->pos, en ?: name, e->str.s, &ctx, &c);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                continue;
                }
                bool twice = false;
                for (size_t j = 0; j < p->n_ca_files && !twice; j++)
                        twice = streq(p->ca_files[j], c);
                if (twice) {
                        ERR(v->d, n->src->path, e->pos, "%s: %s is listed twice; keep one", en ?: name, c);
                        free(c);
                        continue;
                }
                p->ca_files[p->n_ca_files++] = c;
        }
        return 0;
}

int config_validate_profile(Validator *v, const ConfigNode *t) {
        _cleanup_free_ char *pname = config_key_path("profiles", t->key);
        _cleanup_free_ char *kq = config_quoted(t->key, strlen(t->key));
        if (!pname)
                return -ENOMEM;

        if (!config_profile_name_valid(t->key)) {
                KEY_ERR(v, t,
                        "profile name %s is not allowed: use 2 to 32 characters from a-z, 0-9, '_' and '-' "
                        "(^[a-z0-9_-]{2,32}$)",
                        kq ?: "?");
                return 0;
        }
        if (!config_want_type(v, t, pname, TOML_TABLE))
                return 0;

        StrBuf wb = STRBUF_INIT;
        strbuf_printf(&wb, "[%s]", pname);
        _cleanup_free_ char *what = strbuf_steal(&wb);
        if (!what)
                return -ENOMEM;
        config_check_unknown(v, t, what, "profiles.*");

        ConfigProfile *p = &v->c->profiles[v->c->n_profiles];
        *p = (ConfigProfile){};
        p->name = strdup(t->key);
        if (!p->name)
                return -ENOMEM;
        v->c->n_profiles++;

        int r;
        p->command = calloc(3, sizeof(char *));
        if (!p->command || !(p->command[0] = strdup("/bin/sh")) || !(p->command[1] = strdup("-l")))
                return -ENOMEM;
        p->n_command = 2;
        p->runsc_network = RUNSC_NETWORK_SANDBOX;
        p->workspace_branch = true;
        p->status_line = true;
        {
                _cleanup_free_ char *np = config_key_path(pname, "pids_limit"),
                                    *nm = config_key_path(pname, "memory_limit");
                p->pids_limit = config_bounded_int(
                        v, config_node_get(t, "pids_limit"), np ?: "pids_limit", "tasks", CONFIG_PIDS_LIMIT_MIN,
                        CONFIG_PIDS_LIMIT_MAX, CONFIG_PIDS_LIMIT_DEFAULT, "processes and threads inside the sandbox");
                /* 0: no limit, said in so many words (the native backend
                 * without a memory cgroup has none to give, issue 41). */
                const ConfigNode *mn = config_node_get(t, "memory_limit");
                if (mn && mn->value->type == TOML_INTEGER && mn->value->integer == 0)
                        p->memory_limit_mib = 0;
                else
                        p->memory_limit_mib =
                                config_bounded_int(v, mn, nm ?: "memory_limit", "MiB", CONFIG_MEMORY_LIMIT_MIN,
                                                   CONFIG_MEMORY_LIMIT_MAX, CONFIG_MEMORY_LIMIT_DEFAULT,
                                                   "MiB of memory the sandbox's programs may hold, or 0 for no limit");
                _cleanup_free_ char *nc = config_key_path(pname, "cpu_limit");
                p->cpu_limit = config_bounded_int(v, config_node_get(t, "cpu_limit"), nc ?: "cpu_limit", "CPUs", 0,
                                                  CONFIG_CPU_LIMIT_MAX, 0,
                                                  "CPUs the sandbox may run on; 0 for all of the host's");
                _cleanup_free_ char *nd = config_key_path(pname, "disk_limit");
                p->disk_limit_mib =
                        config_bounded_int(v, config_node_get(t, "disk_limit"), nd ?: "disk_limit", "MiB",
                                           CONFIG_DISK_LIMIT_MIN, CONFIG_DISK_LIMIT_MAX, CONFIG_DISK_LIMIT_DEFAULT,
                                           "MiB the sandbox may write to its own root file system");
        }

        /* The image is what gVisor runs: a profile that says backend =
         * "native", or any profile of a launch with --backend native or of a
         * verb that starts nothing, needs none (issues 42, 45; run with
         * --backend gvisor, the launch refuses it, naming the key). The
         * backend key itself is checked below. */
        _cleanup_free_ char *n_image = config_key_path(pname, "image");
        const ConfigNode *nb = config_node_get(t, "backend");
        bool image_optional = v->image_optional || (nb && nb->value->type == TOML_STRING &&
                                                    backend_from_string(nb->value->str.s) == BACKEND_NATIVE);
        const ConfigNode *n = config_node_get(t, "image");
        if (!n && !image_optional)
                KEY_ERR(v, t,
                        "%s is required: the image gVisor runs the sandbox from (add image = "
                        "\"localhost/lazaret/debian:bookworm\", which 'lazaret image build debian' makes), or say "
                        "backend = \"native\" to run the host's own programs",
                        n_image ?: "image");
        if (n && config_string_ok(v, n, n_image ?: "image")) {
                bool pinned = false;
                const char *why = image_problem(n->value->str.s, &pinned);
                _cleanup_free_ char *q = config_quoted(n->value->str.s, n->value->str.len);
                if (why)
                        NODE_ERR(v, n, "%s: %s is not a valid image reference: %s", n_image, q ?: "?", why);
                else {
                        p->image = strdup(n->value->str.s);
                        if (!p->image)
                                return -ENOMEM;
                        p->image_where = config_where_of(n);
                        if (!pinned && !startswith(p->image, "localhost/"))
                                WARN(v->d, n->src->path, n->value->pos,
                                     "%s: %s is not pinned by digest; append @sha256:<digest> so the sandbox "
                                     "cannot change under you",
                                     n_image, q ?: "?");
                }
        }

        n = config_node_get(t, "command");
        if (n) {
                r = validate_command(v, p, n, pname);
                if (r < 0)
                        return r;
        }

        n = config_node_get(t, "workspace_mode");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "workspace_mode");
                if (config_want_type(v, n, nn ?: "workspace_mode", TOML_STRING)) {
                        if (streq(n->value->str.s, "branch"))
                                p->workspace_branch = true;
                        else if (streq(n->value->str.s, "direct"))
                                p->workspace_branch = false;
                        else {
                                _cleanup_free_ char *q = config_quoted(n->value->str.s, n->value->str.len);
                                NODE_ERR(v, n,
                                         "%s: %s is not one of \"branch\" (the agent works on its own git "
                                         "branch) or \"direct\" (on the host's working tree)",
                                         nn, q ?: "?");
                        }
                }
        }

        /* The Domain (spec §4.3.1), once workspace_mode is known: in branch
         * mode, the nearest directory at or above the workspace that holds a
         * .git directory stands for the workspace, so every directory of a
         * repository shares one sandbox and one agent branch. A .git that is
         * no directory (linked worktree, submodule) is refused at launch. */
        if (p->workspace_branch) {
                _cleanup_free_ char *top = NULL;
                bool is_dir = false;
                r = path_find_git_top(v->c->workspace, &top, &is_dir);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        ERR(v->d, NULL, (TomlPos){}, "cannot look for the git repository holding %s: %s",
                            v->c->workspace, strerror(-r));
                else if (r > 0 && is_dir) {
                        const char *sub = path_under(v->c->workspace, top);
                        if (sub && *sub && !(p->workspace_subdir = strdup(sub)))
                                return -ENOMEM;
                        p->repo_root = TAKE_PTR(top);
                }
        }
        r = config_domain_hash(p->name, p->repo_root ?: v->c->workspace, v->c->agent, p->domain_hash);
        if (r < 0)
                return r;
        if (v->data_root_ok) {
                p->profile_dir = path_join(v->c->data_root, p->name);
                StrBuf db = STRBUF_INIT;
                strbuf_printf(&db, "domains/%s", p->domain_hash);
                _cleanup_free_ char *rel = strbuf_steal(&db);
                p->domain_dir = rel ? path_join(v->c->data_root, rel) : NULL;
                if (!p->profile_dir || !p->domain_dir)
                        return -ENOMEM;
        }

        n = config_node_get(t, "runsc_network");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "runsc_network");
                if (config_want_type(v, n, nn ?: "runsc_network", TOML_STRING)) {
                        if (streq(n->value->str.s, "sandbox"))
                                p->runsc_network = RUNSC_NETWORK_SANDBOX;
                        else if (streq(n->value->str.s, "host"))
                                p->runsc_network = RUNSC_NETWORK_HOST;
                        else {
                                _cleanup_free_ char *q = config_quoted(n->value->str.s, n->value->str.len);
                                NODE_ERR(v, n, "%s: %s is not one of \"sandbox\" (gVisor's network stack) or \"host\"",
                                         nn, q ?: "?");
                        }
                        p->runsc_network_where = config_where_of(n);
                }
        }

        n = config_node_get(t, "backend");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "backend");
                if (config_want_type(v, n, nn ?: "backend", TOML_STRING)) {
                        Backend b = backend_from_string(n->value->str.s);
                        if (b >= 0 && strlen(n->value->str.s) == n->value->str.len)
                                p->backend = b;
                        else {
                                _cleanup_free_ char *q = config_quoted(n->value->str.s, n->value->str.len);
                                NODE_ERR(v, n,
                                         "%s: %s is not one of \"gvisor\" (Podman and gVisor, the default) or "
                                         "\"native\" (Landlock, namespaces and seccomp on the host's kernel)",
                                         nn, q ?: "?");
                        }
                }
        }

        n = config_node_get(t, "persistent_dirs");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "persistent_dirs");
                bool ok = true;
                p->persistent_dirs = config_string_list(v, n, nn ?: "persistent_dirs", &p->n_persistent_dirs, &ok);
                /* Keep the canonical form of the good entries; string_list
                 * skipped bad ones, so walk the array again for positions. */
                size_t kept = 0;
                for (size_t i = 0; p->persistent_dirs && n->value->type == TOML_ARRAY && i < n->value->array.n; i++) {
                        const TomlValue *e = n->value->array.items[i];
                        if (e->type != TOML_STRING || strlen(e->str.s) != e->str.len || e->str.len == 0)
                                continue;
                        _cleanup_free_ char *q = config_quoted(e->str.s, e->str.len);
                        const char *why = NULL;
                        char *c = persist_dir_canonical(e->str.s, &why);
                        if (!c && !why)
                                return -ENOMEM;
                        if (!c) {
                                ERR(v->d, n->src->path, e->pos, "%s[%zu]: %s %s", nn, i, q ?: "?", why);
                                continue;
                        }
                        size_t j;
                        for (j = 0; j < kept && !persist_dirs_overlap(p->persistent_dirs[j], c); j++)
                                ;
                        if (j < kept) {
                                ERR(v->d, n->src->path, e->pos,
                                    streq(p->persistent_dirs[j], c)
                                            ? "%s[%zu]: %s is listed twice; keep one"
                                            : "%s[%zu]: %s overlaps %s listed before it; keep only the outer one",
                                    nn, i, q ?: "?", p->persistent_dirs[j]);
                                free(c);
                                continue;
                        }
                        /* string_list kept this entry at a position <= i. */
                        free(p->persistent_dirs[kept]);
                        p->persistent_dirs[kept++] = c;
                }
                if (p->persistent_dirs) {
                        for (size_t j = kept; j < p->n_persistent_dirs; j++)
                                p->persistent_dirs[j] = mfree(p->persistent_dirs[j]);
                        p->n_persistent_dirs = kept;
                }
        }

        n = config_node_get(t, "inherit_default_allow");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "inherit_default_allow");
                if (config_want_type(v, n, nn ?: "inherit_default_allow", TOML_BOOL))
                        p->own_address_rules = !n->value->boolean;
        }
        v->n_net = v->n_net_global;
        n = config_node_get(t, "allow_egress");
        bool egress_bad = false;
        if (n) {
                p->allow_egress_name = config_key_path(pname, "allow_egress");
                if (!p->allow_egress_name)
                        return -ENOMEM;
                bool was_bad = v->net_bad;
                v->net_bad = false;
                r = validate_cidrs(v, n, p->allow_egress_name, NET_ALLOW, &p->n_allow_egress);
                if (r < 0)
                        return r;
                egress_bad = v->net_bad;
                v->net_bad = was_bad;
        }
        if (!egress_bad) {
                r = compile_profile_policy(v, p);
                if (r < 0)
                        return r;
        }

        /* Egress by name: [network]'s names, then the profile's. */
        if (v->c->n_default_domains > 0) {
                p->domains = calloc(v->c->n_default_domains + 1, sizeof(DomainRule));
                if (!p->domains)
                        return -ENOMEM;
                memcpy(p->domains, v->c->default_domains, v->c->n_default_domains * sizeof(DomainRule));
                p->n_domains = v->c->n_default_domains;
        }
        n = config_node_get(t, "allow_domains");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "allow_domains");
                DomainRule *own = NULL;
                size_t n_own = 0;
                r = validate_domains(v, n, nn ?: "allow_domains", false, &own, &n_own, NULL);
                for (size_t i = 0; r >= 0 && i < n_own; i++) {
                        size_t j;
                        for (j = 0; j < p->n_domains; j++)
                                if (p->domains[j].wildcard == own[i].wildcard && p->domains[j].port == own[i].port &&
                                    streq(p->domains[j].name, own[i].name))
                                        break;
                        if (j < p->n_domains)
                                continue; /* in default_domains already */
                        DomainRule *d = realloc(p->domains, (p->n_domains + 2) * sizeof(DomainRule));
                        if (!d)
                                r = -ENOMEM;
                        else {
                                p->domains = d;
                                p->domains[p->n_domains++] = own[i];
                        }
                }
                free(own);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; p->n_domains > 0 && i < v->c->n_probe_domains; i++) {
                const DomainRule *pd = &v->c->probe_domains[i];
                if (domain_rules_find(p->domains, p->n_domains, pd->name, pd->port, NULL))
                        continue;
                ERR(v->d, v->c->probe_domains_where[i].file, v->c->probe_domains_where[i].pos,
                    "network.probe_domains: %s:%u is not among the names profile %s may reach; a probe must be a "
                    "name the sandbox may reach (add it to allow_domains or default_domains)",
                    pd->name, pd->port, p->name);
        }
        n = config_node_get(t, "check_server_name");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "check_server_name");
                if (config_want_type(v, n, nn ?: "check_server_name", TOML_BOOL))
                        p->check_server_name = n->value->boolean;
        }
        n = config_node_get(t, "status_line");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "status_line");
                if (config_want_type(v, n, nn ?: "status_line", TOML_BOOL))
                        p->status_line = n->value->boolean;
        }
        n = config_node_get(t, "clipboard");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "clipboard");
                if (config_want_type(v, n, nn ?: "clipboard", TOML_BOOL))
                        p->clipboard = n->value->boolean;
        }

        n = config_node_get(t, "ca_certificates");
        if (n) {
                r = validate_ca(v, p, n, pname);
                if (r < 0)
                        return r;
        }

        n = config_node_get(t, "env");
        if (n) {
                r = validate_env(v, p, n, pname);
                if (r < 0)
                        return r;
        }

        n = config_node_get(t, "volumes");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "volumes");
                if (config_want_type(v, n, nn ?: "volumes", TOML_ARRAY)) {
                        if (n->value->array.n > CONFIG_LIST_MAX)
                                NODE_ERR(v, n, "%s has %zu entries; at most %u are allowed", nn, n->value->array.n,
                                         CONFIG_LIST_MAX);
                        else
                                for (size_t i = 0; i < n->value->array.n; i++) {
                                        r = validate_volume(v, p, n, n->value->array.items[i], i, pname);
                                        if (r < 0)
                                                return r;
                                }
                }
        }
        return 0;
}
