/* SPDX-License-Identifier: MIT */
/* lazaret config check | show */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "autoapprove.h"
#include "config.h"
#include "fd-util.h"
#include "host-addr.h"
#include "log.h"
#include "netpolicy-digest.h"
#include "profile-pick.h"
#include "prompt-text.h"
#include "strbuf.h"
#include "string-util.h"
#include "toml-write.h"
#include "verbs.h"

#define MERGE_RULE                                                                                                     \
        "tables merge key by key; any other value (arrays too) from a later file replaces the earlier one whole; "     \
        "an untrusted workspace file may only narrow, and its network.default_deny entries add to the others"

static int load(const Globals *g, Config **ret) {
        ConfigLoadOptions o = { .explicit_path = g->config_path, .agent = g->agent, .workspace = g->workspace };
        return config_load_exit(&o, ret);
}

/* A prefix auto_approve entry ("cat ...") for a program that reads files:
 * each word the sandbox adds must name a file in the workspace, but an
 * exact entry leaves nothing to the sandbox. Said by config check only. */
static void warn_prefix_readers(const Config *cfg) {
        const ConfigNode *n = config_node_get(config_node_get(&cfg->root, "escalation"), "auto_approve");
        if (!n || n->value->type != TOML_ARRAY)
                return;
        for (size_t i = 0; i < n->value->array.n; i++) {
                const TomlValue *e = n->value->array.items[i];
                if (e->type != TOML_STRING)
                        continue;
                AutoApproveRule rule;
                _cleanup_free_ char *why = NULL;
                if (autoapprove_rule_parse(e->str.s, AUTOAPPROVE_SEARCH_PATH, &rule, &why) < 0)
                        continue;
                if (rule.prefix && autoapprove_reads_files(rule.argv[0])) {
                        _cleanup_free_ char *vis = prompt_visible(e->str.s, e->str.len);
                        fprintf(stderr,
                                "%s:%u:%u: warning: escalation.auto_approve[%zu]: '%s' lets the sandbox add words to "
                                "a program that reads files; each added word must name a file in the workspace, but "
                                "an exact entry (without '...') is safer\n",
                                n->src->path, e->pos.line, e->pos.col, i, vis ?: "?");
                }
                autoapprove_rule_done(&rule);
        }
}

static int config_check(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret config check [--config FILE] [--workspace DIR]\n\n"
                               "Validate the merged configuration. Exit 0 when valid, 65 when not, with one\n"
                               "error per line as FILE:LINE:COL: message.\n");
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                log_error("config check takes no arguments (got '%s')", argv[optind]);
                return EXIT_USAGE;
        }

        _cleanup_(config_freep) Config *cfg = NULL;
        int r = load(g, &cfg);
        if (r != 0)
                return r;

        /* Host variables named by env:VAR are read at launch; check now that
         * a launch would find them. */
        ConfigDiags d = {};
        bool bad = false;
        for (size_t i = 0; i < cfg->n_profiles; i++) {
                char **envv = NULL;
                size_t n = 0;
                r = config_profile_env(&cfg->profiles[i], &envv, &n, &d);
                if (r == -ENOMEM) {
                        config_diags_done(&d);
                        log_error("out of memory");
                        return EXIT_LAZARET;
                }
                if (r < 0)
                        bad = true;
                else
                        strv_free_n(envv, n);
        }
        config_diags_print(&d, stderr);
        config_diags_done(&d);
        if (bad)
                return EXIT_CONFIG;
        warn_prefix_readers(cfg);

        printf("configuration valid: %zu profile%s from", cfg->n_profiles, cfg->n_profiles == 1 ? "" : "s");
        for (size_t i = 0; i < cfg->n_sources; i++)
                printf("%s %s", i ? "," : "", cfg->sources[i].path);
        printf("\n");
        return 0;
}

/* ---- show: text --------------------------------------------------------- */

static void put_where(StrBuf *b, size_t start, const ConfigNode *n) {
        size_t w = b->len - start;
        for (; w < 40; w++)
                strbuf_putc(b, ' ');
        strbuf_printf(b, "  # %s:%u:%u\n", n->src->path, n->value->pos.line, n->value->pos.col);
}

/* The policy in force for a profile: its own, with the host's addresses,
 * read now, denied (what the coordinator does at launch and each join). */
static int host_rules(const ConfigProfile *p, NetPolicy *ret, HostAddrs *ret_host, char digest[65]) {
        _cleanup_free_ char *canon = NULL, *again = NULL;
        const char *why;
        int r = config_profile_netpolicy_canonical(p, &canon, NULL);
        if (r < 0)
                return r;
        r = netpolicy_parse(canon, strlen(canon), ret, &why);
        if (r < 0)
                return r;
        r = host_addresses_deny(ret, ret_host, NULL);
        if (r >= 0)
                r = netpolicy_format(ret, &again, NULL);
        if (r < 0) {
                netpolicy_done(ret);
                host_addrs_done(ret_host);
                return r;
        }
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, again, strlen(again), digest);
        return 0;
}

static void show_resolved_profile(StrBuf *b, const ConfigProfile *p) {
        strbuf_printf(b, "# resolved: profile_dir = %s\n", p->profile_dir);
        if (p->repo_root) {
                strbuf_printf(b,
                              "# resolved: repo_root   = %s (workspace_mode = \"branch\": the Domain is the "
                              "repository's)\n",
                              p->repo_root);
                strbuf_printf(b, "# resolved: workspace_subdir = %s\n",
                              p->workspace_subdir ? p->workspace_subdir : "(none: the repository's root)");
        }
        strbuf_printf(b, "# resolved: domain_hash = %s\n", p->domain_hash);
        strbuf_printf(b, "# resolved: domain_dir  = %s\n", p->domain_dir);
        for (size_t i = 0; i < p->n_volumes; i++)
                strbuf_printf(b, "# resolved: volumes[%zu]  = %s -> %s%s\n", i, p->volumes[i].host,
                              p->volumes[i].container, p->volumes[i].read_only ? " (read-only)" : "");
        _cleanup_free_ char *canon = NULL;
        if (config_profile_netpolicy_canonical(p, &canon, NULL) < 0) {
                b->oom = true;
                return;
        }
        strbuf_printf(b, "# resolved: address rules = %s\n",
                      p->own_address_rules
                              ? "the profile's own (allow_egress, with network.default_deny; network.default_allow "
                                "does not reach it)"
                              : "inherited (network.default_allow and network.default_deny, with allow_egress)");
        strbuf_printf(b, "# resolved: network policy sha256 = %s\n", p->net_digest);
        for (const char *l = canon; *l;) {
                const char *nl = strchr(l, '\n');
                size_t n = nl ? (size_t) (nl - l) : strlen(l);
                strbuf_puts(b, "# resolved: network policy: ");
                strbuf_putn(b, l, n);
                strbuf_putc(b, '\n');
                l += n + (nl ? 1 : 0);
        }
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                _cleanup_free_ NetRoute *routes = NULL;
                size_t n = 0, permit = 0;
                if (netpolicy_routes(&p->net, f, &routes, &n) < 0) {
                        b->oom = true;
                        return;
                }
                for (size_t i = 0; i < n; i++)
                        permit += routes[i].permit;
                strbuf_printf(b, "# resolved: network routes %s = %zu gateway, %zu prohibit%s\n",
                              net_family_to_string(f), permit, n - permit, p->net.enabled[f] ? "" : " (disabled)");
        }
        _cleanup_(netpolicy_done) NetPolicy in_force = {};
        _cleanup_(host_addrs_done) HostAddrs h = {};
        char digest[65];
        if (host_rules(p, &in_force, &h, digest) < 0) {
                strbuf_puts(b, "# resolved: implicit rules: cannot read the host's addresses\n");
                return;
        }
        for (size_t i = 0; i < h.n; i++) {
                char a[64];
                netaddr_format(&h.addrs[i], a, sizeof(a));
                if (h.effects[i] == HOST_ADDR_IMPLICIT_DENY)
                        strbuf_printf(b, "# resolved: implicit rule: deny %s/%d (an address of the host)\n", a,
                                      h.addrs[i].family == AF_INET6 ? 128 : 32);
                else
                        strbuf_printf(b, "# resolved: implicit rule: none for %s (an address of the host): %s\n", a,
                                      h.effects[i] == HOST_ADDR_POLICY_DENIES
                                              ? "the policy denies it already"
                                              : "a configured resolver, permitted as configured");
        }
        strbuf_printf(b, "# resolved: network policy in force (with the implicit rules) sha256 = %s\n", digest);
}

static void show_table(StrBuf *b, const Config *cfg, const ConfigNode *t, const char *path, const char *only_profile,
                       int depth) {
        bool header = false;
        for (size_t i = 0; i < t->n_children; i++) {
                const ConfigNode *n = &t->children[i];
                if (n->value->type == TOML_TABLE)
                        continue;
                if (!header && path) {
                        strbuf_printf(b, "\n[%s]\n", path);
                        header = true;
                }
                size_t start = b->len;
                toml_write_key(b, n->key);
                strbuf_puts(b, " = ");
                toml_write_value(b, n->value);
                put_where(b, start, n);
                if (n->extra) {
                        strbuf_puts(b, "# and from the untrusted workspace file (it may only add here): ");
                        toml_write_value(b, n->extra);
                        strbuf_printf(b, "  # %s:%u:%u\n", n->extra_src->path, n->extra->pos.line, n->extra->pos.col);
                }
        }
        /* A profile with no scalar keys still gets its header, so its
         * resolved paths have a home. */
        bool is_profile = depth == 2 && path && startswith(path, "profiles.");
        if (is_profile && !header) {
                strbuf_printf(b, "\n[%s]\n", path);
                header = true;
        }
        if (is_profile) {
                const ConfigProfile *p = config_find_profile(cfg, t->key);
                if (p)
                        show_resolved_profile(b, p);
        }
        for (size_t i = 0; i < t->n_children; i++) {
                const ConfigNode *n = &t->children[i];
                if (n->value->type != TOML_TABLE)
                        continue;
                if (depth == 1 && path && streq(path, "profiles") && only_profile && !streq(n->key, only_profile))
                        continue;
                StrBuf sub = STRBUF_INIT;
                if (path)
                        strbuf_printf(&sub, "%s.", path);
                toml_write_key(&sub, n->key);
                show_table(b, cfg, n, strbuf_str(&sub), only_profile, depth + 1);
                strbuf_done(&sub);
        }
}

static int show_text(const Config *cfg, const char *only_profile) {
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "# lazaret configuration for workspace %s\n", cfg->workspace);
        strbuf_puts(&b, "# files, lowest precedence first:\n");
        for (size_t i = 0; i < cfg->n_sources; i++)
                strbuf_printf(&b, "#   %s%s\n", cfg->sources[i].path,
                              cfg->sources[i].trusted ? ""
                              : cfg->wsfile.trust == CONFIG_TRUST_CHANGED
                                      ? " (workspace file, changed since trusted: it may only narrow)"
                                      : " (workspace file, untrusted: it may only narrow)");
        strbuf_puts(&b, "# merge: " MERGE_RULE "\n");
        strbuf_printf(&b, "# resolved: storage.data_root = %s\n", cfg->data_root);
        strbuf_printf(&b, "# resolved: escalation.socket_dir = %s\n", cfg->socket_dir);
        show_table(&b, cfg, &cfg->root, NULL, only_profile, 0);
        if (b.oom) {
                strbuf_done(&b);
                log_error("out of memory");
                return EXIT_LAZARET;
        }
        fputs(strbuf_str(&b), stdout);
        strbuf_done(&b);
        return 0;
}

/* ---- show: JSON --------------------------------------------------------- */

static json_t *node_json(const ConfigNode *n, const char *only_profile, int depth, const char *parent) {
        if (n->value->type != TOML_TABLE && n->extra)
                return json_pack("{s:o, s:s, s:i, s:i, s:{s:o, s:s, s:i, s:i}}", "value", toml_to_json(n->value),
                                 "file", n->src->path, "line", (int) n->value->pos.line, "column",
                                 (int) n->value->pos.col, "added", "value", toml_to_json(n->extra), "file",
                                 n->extra_src->path, "line", (int) n->extra->pos.line, "column",
                                 (int) n->extra->pos.col);
        if (n->value->type != TOML_TABLE)
                return json_pack("{s:o, s:s, s:i, s:i}", "value", toml_to_json(n->value), "file", n->src->path, "line",
                                 (int) n->value->pos.line, "column", (int) n->value->pos.col);
        json_t *o = json_object();
        for (size_t i = 0; o && i < n->n_children; i++) {
                const ConfigNode *c = &n->children[i];
                if (depth == 1 && parent && streq(parent, "profiles") && only_profile && !streq(c->key, only_profile))
                        continue;
                json_t *j = node_json(c, only_profile, depth + 1, c->key);
                if (!j || json_object_set_new(o, c->key, j) < 0) {
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}

static json_t *policy_json(const NetPolicy *np, const char *digest) {
        _cleanup_free_ char *canon = NULL;
        char c[64];
        if (netpolicy_format(np, &canon, NULL) < 0)
                return NULL;
        json_t *fam = json_array(), *rules = json_array(), *res = json_array();
        for (NetFamily f = 0; fam && f < _NET_FAMILY_MAX; f++)
                json_array_append_new(fam, np->enabled[f]
                                                   ? json_pack("{s:s, s:s, s:s}", "family", net_family_to_string(f),
                                                               "disposition", "enabled", "default_action",
                                                               net_action_to_string(np->default_action[f]))
                                                   : json_pack("{s:s, s:s}", "family", net_family_to_string(f),
                                                               "disposition", "disabled"));
        for (size_t i = 0; rules && i < np->n_rules; i++) {
                cidr_format(&np->rules[i].prefix, c, sizeof(c));
                json_array_append_new(rules,
                                      json_pack("{s:s, s:s, s:s}", "family",
                                                net_family_to_string(net_family_of(np->rules[i].prefix.family)),
                                                "network", c, "action", net_action_to_string(np->rules[i].action)));
        }
        for (size_t i = 0; res && i < np->n_resolvers; i++) {
                netaddr_format(&np->resolvers[i], c, sizeof(c));
                json_array_append_new(res, json_pack("{s:s, s:s}", "family",
                                                     net_family_to_string(net_family_of(np->resolvers[i].family)),
                                                     "address", c));
        }
        return json_pack("{s:s, s:s, s:s, s:o*, s:o*, s:o*}", "schema_id", NETPOLICY_SCHEMA, "digest", digest,
                         "canonical", canon, "address_families", fam, "prefix_rules", rules, "resolvers", res);
}

static json_t *profile_json(const ConfigProfile *p) {
        json_t *vols = json_array();
        for (size_t i = 0; vols && i < p->n_volumes; i++)
                json_array_append_new(vols, json_pack("{s:s, s:s, s:b}", "host", p->volumes[i].host, "container",
                                                      p->volumes[i].container, "read_only", p->volumes[i].read_only));
        json_t *policy = policy_json(&p->net, p->net_digest);
        _cleanup_(netpolicy_done) NetPolicy in_force = {};
        _cleanup_(host_addrs_done) HostAddrs h = {};
        char digest[65];
        if (policy && host_rules(p, &in_force, &h, digest) >= 0) {
                json_t *rules = json_array();
                for (size_t i = 0; rules && i < h.n; i++) {
                        char a[64];
                        netaddr_format(&h.addrs[i], a, sizeof(a));
                        json_array_append_new(rules, json_pack("{s:s, s:s}", "address", a, "effect",
                                                               host_addr_effect_to_string(h.effects[i])));
                }
                json_object_set_new(policy, "implicit_host_rules", rules);
                json_object_set_new(policy, "in_force_digest", json_string(digest));
        }
        return json_pack("{s:s, s:s?, s:s?, s:s, s:s, s:o*, s:o*}", "profile_dir", p->profile_dir, "repo_root",
                         p->repo_root, "workspace_subdir", p->workspace_subdir, "domain_hash", p->domain_hash,
                         "domain_dir", p->domain_dir, "volumes", vols, "network_policy", policy);
}

static int show_json(const Config *cfg, const char *only_profile) {
        json_t *files = json_array(), *profiles = json_object();
        for (size_t i = 0; files && i < cfg->n_sources; i++)
                json_array_append_new(files, json_string(cfg->sources[i].path));
        for (size_t i = 0; profiles && i < cfg->n_profiles; i++)
                if (!only_profile || streq(cfg->profiles[i].name, only_profile))
                        json_object_set_new(profiles, cfg->profiles[i].name, profile_json(&cfg->profiles[i]));

        json_t *wsf = json_pack("{s:s, s:s}", "path", cfg->wsfile.path, "trust",
                                config_trust_to_string(cfg->wsfile.exists || cfg->wsfile.trust == CONFIG_TRUST_EXPLICIT
                                                               ? cfg->wsfile.trust
                                                               : CONFIG_TRUST_NONE));
        if (wsf && cfg->wsfile.exists)
                json_object_set_new(wsf, "sha256", json_string(cfg->wsfile.sha256));
        json_t *j = json_pack("{s:s, s:o*, s:o*, s:s, s:o*, s:{s:s, s:s, s:o*}}", "workspace", cfg->workspace, "files",
                              files, "workspace_file", wsf, "merge", MERGE_RULE, "config",
                              node_json(&cfg->root, only_profile, 0, NULL), "resolved", "data_root", cfg->data_root,
                              "socket_dir", cfg->socket_dir, "profiles", profiles);
        if (!j) {
                log_error("out of memory");
                return EXIT_LAZARET;
        }
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (!s) {
                log_error("out of memory");
                return EXIT_LAZARET;
        }
        puts(s);
        free(s);
        return 0;
}

static int config_show(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "profile", required_argument, NULL, 'p' },
                {},
        };
        bool json = false;
        const char *profile = NULL;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "hp:", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret config show [--json] [--profile NAME] [--workspace DIR]\n\n"
                               "Print the merged configuration, each value with the file and position it\n"
                               "came from, and per profile the resolved profile_dir, repo_root and\n"
                               "workspace_subdir (branch mode in a git repository), domain_hash and\n"
                               "domain_dir for the workspace.\n");
                        return 0;
                case 'j':
                        json = true;
                        break;
                case 'p':
                        profile = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                log_error("config show takes no arguments (got '%s')", argv[optind]);
                return EXIT_USAGE;
        }

        _cleanup_(config_freep) Config *cfg = NULL;
        int r = load(g, &cfg);
        if (r != 0)
                return r;
        if (profile && !config_find_profile(cfg, profile)) {
                StrBuf names = STRBUF_INIT;
                for (size_t i = 0; i < cfg->n_profiles; i++)
                        strbuf_printf(&names, "%s%s", i ? ", " : "", cfg->profiles[i].name);
                log_error("no profile '%s' in the configuration (configured: %s)", profile, strbuf_str(&names));
                strbuf_done(&names);
                return EXIT_USAGE;
        }
        return json ? show_json(cfg, profile) : show_text(cfg, profile);
}

int verb_config(int argc, char **argv, const Globals *g) {
        if (argc < 2 || streq(argv[1], "-h") || streq(argv[1], "--help")) {
                printf("Usage: lazaret config check [--config FILE]\n"
                       "       lazaret config show [--json] [--profile NAME] [--workspace DIR]\n");
                return argc < 2 ? EXIT_USAGE : 0;
        }
        if (streq(argv[1], "check"))
                return config_check(argc - 1, argv + 1, g);
        if (streq(argv[1], "show"))
                return config_show(argc - 1, argv + 1, g);
        log_error("unknown config command '%s' (use check or show)", argv[1]);
        return EXIT_USAGE;
}
