/* SPDX-License-Identifier: MIT */
/* Unit tests of src/config: expansion, CIDRs (netpolicy/cidr), domain hash, and the loader's
 * hierarchy and merge rules. The many single-error cases live in
 * tests/integration/test_config_errors.py, against the real binary. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cidr.h"
#include "config-authority.h"
#include "fd-util.h"
#include "workspace-trust.h"
#include "config.h"
#include "expand.h"
#include "fileio.h"
#include "string-util.h"
#include "path-util.h"
#include "persist.h"

static ExpandContext full_ctx(void) {
        ExpandContext c = { .home = "/home/u" };
        c.values[EXPAND_PROFILE_NAME] = "claude";
        c.values[EXPAND_PROFILE_DIR] = "/data/claude";
        c.values[EXPAND_DOMAIN_HASH] = "0123456789ab";
        c.values[EXPAND_DOMAIN_DIR] = "/data/domains/0123456789ab";
        c.values[EXPAND_WORKSPACE_DIR] = "/w";
        return c;
}

static void expect_expand(const ExpandContext *c, const char *in, const char *want) {
        char *out = NULL, *err = NULL;
        int r = expand_string(in, c, &out, &err);
        if (r != 0)
                fail_msg("expand '%s': %d %s", in, r, err ? err : "");
        assert_string_equal(out, want);
        free(out);
}

static void expect_expand_error(const ExpandContext *c, const char *in, const char *want) {
        char *out = NULL, *err = NULL;
        assert_int_equal(expand_string(in, c, &out, &err), -EINVAL);
        assert_null(out);
        assert_string_equal(err, want);
        free(err);
}

static void test_expand(void **state) {
        (void) state;
        ExpandContext c = full_ctx();
        expect_expand(&c, "~", "/home/u");
        expect_expand(&c, "~/x", "/home/u/x");
        expect_expand(&c, "/a/~/b", "/a/~/b");
        expect_expand(&c, "a~", "a~");
        expect_expand(&c, "{profile_dir}/home", "/data/claude/home");
        expect_expand(&c, "{domain_dir}/{profile_name}-{domain_hash}",
                      "/data/domains/0123456789ab/claude-0123456789ab");
        expect_expand(&c, "{workspace_dir}", "/w");
        expect_expand(&c, "", "");

        expect_expand_error(&c, "~root/x", "'~root': only a leading '~' or '~/' is expanded, '~user' is not supported");
        expect_expand_error(&c, "{profle_dir}/x",
                            "unknown token '{profle_dir}' (known: {profile_name}, {profile_dir}, {domain_hash}, "
                            "{domain_dir}, {workspace_dir})");
        expect_expand_error(&c, "/x/{profile_dir",
                            "unterminated token '{profile_dir': a '{' must open one of the {tokens}");
        expect_expand_error(&c, "/x/}", "unmatched '}'");
        expect_expand_error(&c, "{{profile_dir}}", "unterminated token '{': a '{' must open one of the {tokens}");

        ExpandContext none = { .home = NULL };
        expect_expand(&none, "~/x", "~/x");
        expect_expand_error(&none, "{profile_dir}", "token '{profile_dir}' cannot be used in this field");
}

static void expect_cidr(const char *s, const char *canon) {
        Cidr c;
        const char *why = NULL;
        char buf[64];
        if (cidr_parse(s, &c, &why) != 0)
                fail_msg("cidr '%s': %s", s, why);
        cidr_format(&c, buf, sizeof(buf));
        assert_string_equal(buf, canon);
}

static void expect_cidr_error(const char *s, const char *want) {
        Cidr c;
        const char *why = NULL;
        assert_int_equal(cidr_parse(s, &c, &why), -EINVAL);
        assert_string_equal(why, want);
}

static void test_cidr(void **state) {
        (void) state;
        expect_cidr("10.0.0.0/8", "10.0.0.0/8");
        expect_cidr("0.0.0.0/0", "0.0.0.0/0");
        expect_cidr("192.168.1.1/32", "192.168.1.1/32");
        expect_cidr("172.16.0.0/12", "172.16.0.0/12");
        expect_cidr("::/0", "::/0");
        expect_cidr("fd00:ec2::254/128", "fd00:ec2::254/128");
        expect_cidr("FE80::/10", "fe80::/10");
        expect_cidr_error("10.1.0.0/8", "host bits are set (the address must be the network address of the prefix)");
        expect_cidr_error("172.17.0.0/12", "host bits are set (the address must be the network address of the prefix)");
        expect_cidr_error("fe80::1/10", "host bits are set (the address must be the network address of the prefix)");
        expect_cidr_error("10.0.0.0", "missing prefix length (write e.g. 10.0.0.0/8 or 2001:db8::/32)");
        expect_cidr_error("10.0.0.0/33", "prefix length is larger than 32");
        expect_cidr_error("::/129", "prefix length is larger than 128");
        expect_cidr_error("10.0.0.0/08", "prefix length must be a decimal number without leading zeros");
        expect_cidr_error("10.0.0.0/", "prefix length must be a decimal number without leading zeros");
        expect_cidr_error("10.0.0.0/8x", "prefix length must be a decimal number without leading zeros");
        expect_cidr_error("10.0.0/8", "not an IPv4 or IPv6 address");
        expect_cidr_error("/8", "not an IPv4 or IPv6 address");
        expect_cidr_error("example.com/8", "not an IPv4 or IPv6 address");
}

static void test_domain_hash(void **state) {
        (void) state;
        char h[13];
        /* Reference values from Python's hashlib (an independent SHA-256). */
        assert_int_equal(config_domain_hash("claude", "/home/u/proj", NULL, h), 0);
        assert_string_equal(h, "6a52bc2082da");
        assert_int_equal(config_domain_hash("shell", "/tmp/\xc3\xbc", NULL, h), 0);
        assert_string_equal(h, "1847b42f8104");
        /* An agent of its own (--agent a1): "claude:/home/u/proj:agent=a1". */
        assert_int_equal(config_domain_hash("claude", "/home/u/proj", "a1", h), 0);
        assert_string_equal(h, "f0bb856f93c0");
}

static void test_profile_names(void **state) {
        (void) state;
        assert_true(config_profile_name_valid("claude"));
        assert_true(config_profile_name_valid("a1"));
        assert_true(config_profile_name_valid("my_agent-2"));
        assert_true(config_profile_name_valid("abcdefghijklmnopqrstuvwxyz012345")); /* 32 */
        assert_false(config_profile_name_valid("abcdefghijklmnopqrstuvwxyz0123456")); /* 33 */
        assert_false(config_profile_name_valid("a"));
        assert_false(config_profile_name_valid(""));
        assert_false(config_profile_name_valid("Claude"));
        assert_false(config_profile_name_valid("a.b"));
        assert_false(config_profile_name_valid("a/b"));
        assert_false(config_profile_name_valid("a\\b"));
        assert_false(config_profile_name_valid("a b"));
        assert_false(config_profile_name_valid("a;b"));
        assert_false(config_profile_name_valid(".."));
}

/* ---- loader ------------------------------------------------------------- */

static char dir[64];

static int setup_dirs(void **state) {
        (void) state;
        strcpy(dir, "/tmp/lazaret-cfg-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        char p[128];
        snprintf(p, sizeof(p), "%s/xdg", dir);
        mkdir(p, 0700);
        snprintf(p, sizeof(p), "%s/xdg/lazaret", dir);
        mkdir(p, 0700);
        snprintf(p, sizeof(p), "%s/ws", dir);
        mkdir(p, 0700);
        snprintf(p, sizeof(p), "%s/home", dir);
        mkdir(p, 0700);
        snprintf(p, sizeof(p), "%s/xdg", dir);
        setenv("XDG_CONFIG_HOME", p, 1);
        snprintf(p, sizeof(p), "%s/home", dir);
        setenv("HOME", p, 1);
        return 0;
}

static int teardown_dirs(void **state) {
        (void) state;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *rel, const char *text) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        assert_int_equal(write_file_atomic(p, text, strlen(text), 0600, 0), 0);
}

/* Write a workspace file and trust its exact bytes, as 'lazaret trust' does. */
static void put_trusted(const char *rel, const char *text) {
        char p[256], sha[WSTRUST_SHA256_HEX_LEN + 1];
        _cleanup_free_ char *store = NULL, *canon = NULL;
        put(rel, text);
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        assert_int_equal(path_canonicalize(p, &canon), 0);
        assert_int_equal(wstrust_store_path(getenv("HOME"), &store), 0);
        assert_int_equal(wstrust_sha256_hex(text, strlen(text), sha), 0);
        assert_int_equal(wstrust_set(store, canon, sha, 1), 0);
}

static NetAction verdict_of(const ConfigProfile *p, const char *addr) {
        NetAddr a;
        assert_int_equal(netaddr_parse(addr, &a), 0);
        return netpolicy_verdict(&p->net, &a);
}

static const char base_cfg[] =
        "[storage]\n"
        "data_root = \"~/data\"\n"
        "[network]\n"
        "default_allow = [\"0.0.0.0/0\"]\n"
        "default_deny = [\"10.0.0.0/8\"]\n"
        "[escalation]\n"
        "enabled = true\n"
        "socket_dir = \"/tmp/sock\"\n"
        "[profiles.claude]\n"
        "image = \"localhost/agent:1\"\n"
        "env = { A = \"1\", B = \"2\" }\n"
        "volumes = [{ host = \"{profile_dir}/home\", container = \"/root\", mode = \"ro,z\" }]\n";

static void test_load_merge(void **state) {
        (void) state;
        char ws[128], explicit[128], want[256];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        snprintf(explicit, sizeof(explicit), "%s/explicit.toml", dir);
        put("xdg/lazaret/config.toml", base_cfg);
        /* The workspace file overrides one scalar, adds an env key and
         * replaces the default_deny array whole. */
        put_trusted("ws/lazaret.toml", "[network]\ndefault_deny = [\"192.168.0.0/16\"]\n"
                                       "[profiles.claude]\nimage = \"localhost/agent:2\"\nenv.C = \"3\"\n");
        put("explicit.toml", "[escalation]\nenabled = false\n");

        ConfigLoadOptions o = { .explicit_path = explicit, .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        int r = config_load(&o, &c, &d);
        if (r != 0) {
                config_diags_print(&d, stderr);
                fail_msg("config_load: %d", r);
        }
        assert_int_equal(c->n_sources, 3);
        assert_false(c->escalation_enabled);
        assert_int_equal(c->n_default_deny, 1);
        assert_int_equal(c->n_profiles, 1);
        const ConfigProfile *p = config_find_profile(c, "claude");
        assert_non_null(p);
        /* The trusted file's list replaced the base's whole. */
        assert_int_equal(verdict_of(p, "192.168.1.1"), NET_DENY);
        assert_int_equal(verdict_of(p, "10.1.2.3"), NET_ALLOW);
        assert_string_equal(p->image, "localhost/agent:2");
        assert_int_equal(p->n_env, 3);
        snprintf(want, sizeof(want), "%s/home/data", dir);
        assert_string_equal(c->data_root, want);
        snprintf(want, sizeof(want), "%s/home/data/claude", dir);
        assert_string_equal(p->profile_dir, want);
        char h[13];
        assert_int_equal(config_domain_hash("claude", ws, NULL, h), 0);
        assert_string_equal(p->domain_hash, h);
        snprintf(want, sizeof(want), "%s/home/data/domains/%s", dir, h);
        assert_string_equal(p->domain_dir, want);
        assert_int_equal(p->n_volumes, 1);
        snprintf(want, sizeof(want), "%s/home/data/claude/home", dir);
        assert_string_equal(p->volumes[0].host, want);
        assert_true(p->volumes[0].read_only);
        assert_true(p->volumes[0].relabel_shared);

        /* Provenance: the image came from the workspace file, line 4. */
        const ConfigNode *n =
                config_node_get(config_node_get(config_node_get(&c->root, "profiles"), "claude"), "image");
        assert_non_null(n);
        snprintf(want, sizeof(want), "%s/ws/lazaret.toml", dir);
        assert_string_equal(n->src->path, want);
        assert_int_equal(n->value->pos.line, 4);
        assert_int_equal(n->value->pos.col, 9);
        config_free(c);
        config_diags_done(&d);
}

static void test_load_symlinked_workspace(void **state) {
        (void) state;
        char ws[128], link[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        snprintf(link, sizeof(link), "%s/wslink", dir);
        assert_int_equal(symlink(ws, link), 0);
        put("xdg/lazaret/config.toml", base_cfg);
        ConfigLoadOptions o = { .workspace = link };
        ConfigDiags d = {};
        Config *c = NULL;
        assert_int_equal(config_load(&o, &c, &d), 0);
        /* The domain is computed on the canonical path: same hash as via ws. */
        assert_string_equal(c->workspace, ws);
        char h[13];
        assert_int_equal(config_domain_hash("claude", ws, NULL, h), 0);
        assert_string_equal(c->profiles[0].domain_hash, h);
        config_free(c);
        config_diags_done(&d);
}

static void test_load_conflict(void **state) {
        (void) state;
        char ws[128], want[512];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        put("xdg/lazaret/config.toml", base_cfg);
        put("ws/lazaret.toml", "profiles = \"none\"\n");
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        assert_int_equal(config_load(&o, &c, &d), -EINVAL);
        assert_null(c);
        assert_int_equal(config_diags_errors(&d), 1);
        snprintf(want, sizeof(want), "%s/ws/lazaret.toml", dir);
        assert_string_equal(d.items[0].file, want);
        assert_int_equal(d.items[0].pos.line, 1);
        assert_int_equal(d.items[0].pos.col, 1);
        snprintf(want, sizeof(want),
                 "'profiles' is a string here but a table in %s/xdg/lazaret/config.toml:9:2; a table and a value "
                 "cannot be merged",
                 dir);
        assert_string_equal(d.items[0].message, want);
        config_diags_done(&d);
}

static void test_load_nothing(void **state) {
        (void) state;
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        assert_int_equal(config_load(&o, &c, &d), -ENOENT);
        assert_int_equal(d.n, 1);
        assert_null(d.items[0].file);
        config_diags_done(&d);
}

static void test_profile_env(void **state) {
        (void) state;
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        put("xdg/lazaret/config.toml", base_cfg);
        put_trusted("ws/lazaret.toml", "[profiles.claude.env]\nKEY = \"env:LAZARET_UNIT_HOST_VAR\"\n");
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        assert_int_equal(config_load(&o, &c, &d), 0);

        char **envv = NULL;
        size_t n = 0;
        unsetenv("LAZARET_UNIT_HOST_VAR");
        assert_int_equal(config_profile_env(&c->profiles[0], &envv, &n, &d), -EINVAL);
        assert_int_equal(d.n, 1);
        assert_string_equal(d.items[0].message,
                            "profiles.claude.env.KEY: host variable LAZARET_UNIT_HOST_VAR is not set (export it, or "
                            "change the value)");
        assert_int_equal(d.items[0].pos.line, 2);

        setenv("LAZARET_UNIT_HOST_VAR", "secret", 1);
        assert_int_equal(config_profile_env(&c->profiles[0], &envv, &n, &d), 0);
        assert_int_equal(n, 3);
        assert_string_equal(envv[0], "A=1");
        assert_string_equal(envv[1], "B=2");
        assert_string_equal(envv[2], "KEY=secret");
        strv_free_n(envv, n);
        config_free(c);
        config_diags_done(&d);
}

static void test_persist_dirs(void **state) {
        (void) state;
        static const struct {
                const char *in, *out;
        } ok[] = {
                { "/usr", "/usr" },         { "//usr///", "/usr" },       { "/var/lib/apt", "/var/lib/apt" },
                { "/root", "/root" },       { "/run/user", "/run/user" }, { "/workspaces", "/workspaces" },
                { "/devices", "/devices" }, { "/etc", "/etc" },
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                const char *why = "unset";
                char *c = persist_dir_canonical(ok[i].in, &why);
                assert_non_null(c);
                assert_null(why);
                assert_string_equal(c, ok[i].out);
                free(c);
        }
        static const char *const bad[] = { "usr",
                                           "",
                                           "/",
                                           "//",
                                           "/usr/../etc",
                                           "/usr/./lib",
                                           "/..",
                                           "/workspace",
                                           "/workspace/x",
                                           "/run",
                                           "/run/lazaret",
                                           "/run/lazaret/certs",
                                           "/proc",
                                           "/proc/1",
                                           "/sys",
                                           "/dev",
                                           "/dev/shm" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *why = NULL;
                char *c = persist_dir_canonical(bad[i], &why);
                if (c)
                        fail_msg("%s was accepted as %s", bad[i], c);
                assert_non_null(why);
        }
        assert_true(persist_dirs_overlap("/usr", "/usr"));
        assert_true(persist_dirs_overlap("/usr", "/usr/local"));
        assert_true(persist_dirs_overlap("/usr/local", "/usr"));
        assert_false(persist_dirs_overlap("/usr", "/usrx"));
        assert_false(persist_dirs_overlap("/var/lib", "/var/log"));

        static const struct {
                const char *in, *out;
        } names[] = { { "/usr", "usr" },
                      { "/var/lib", "var_2flib" },
                      { "/var_lib", "var_5flib" },
                      { "/a_/b", "a_5f_2fb" },
                      { "/a/_b", "a_2f_5fb" } };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                char *n = persist_dir_name(names[i].in);
                assert_non_null(n);
                assert_string_equal(n, names[i].out);
                free(n);
        }
}

static void test_persist_config(void **state) {
        (void) state;
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        put("xdg/lazaret/config.toml", base_cfg);
        put_trusted("ws/lazaret.toml", "[profiles.claude]\n"
                                       "persistent_dirs = [\"/usr/\", \"var\", \"/usr\", \"/usr/local\", "
                                       "\"/run\", \"/etc\", \"/../x\"]\n");
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        assert_int_equal(config_load(&o, &c, &d), -EINVAL);
        assert_int_equal(config_diags_errors(&d), 5);
        const char *want[] = {
                "profiles.claude.persistent_dirs[1]: 'var' must be an absolute path in the sandbox",
                "profiles.claude.persistent_dirs[2]: '/usr' is listed twice; keep one",
                "profiles.claude.persistent_dirs[3]: '/usr/local' overlaps /usr listed before it; keep only the "
                "outer one",
                "profiles.claude.persistent_dirs[4]: '/run' covers a directory the sandbox needs as it is "
                "(/workspace, /run/lazaret, /proc, /sys or /dev)",
                "profiles.claude.persistent_dirs[6]: '/../x' contains a '.' or '..' segment",
        };
        for (size_t i = 0; i < 5; i++) {
                assert_string_equal(d.items[i].message, want[i]);
                assert_int_equal(d.items[i].pos.line, 2);
        }
        config_diags_done(&d);

        put_trusted("ws/lazaret.toml", "[profiles.claude]\npersistent_dirs = [\"//usr/\", \"/etc\", \"/var/lib\"]\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), 0);
        const ConfigProfile *p = config_find_profile(c, "claude");
        assert_int_equal(p->n_persistent_dirs, 3);
        assert_string_equal(p->persistent_dirs[0], "/usr");
        assert_string_equal(p->persistent_dirs[1], "/etc");
        assert_string_equal(p->persistent_dirs[2], "/var/lib");
        assert_null(p->persistent_dirs[3]);
        config_free(c);
        config_diags_done(&d);
}

/* Egress by name (issue 18): rules merged from [network] and the profile,
 * each bad entry an error at its place, probes checked against them, and
 * resolvers that serve the broker alone in a profile without a sidecar. */
static void test_domains_config(void **state) {
        (void) state;
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        put("xdg/lazaret/config.toml",
            "[storage]\ndata_root = \"~/data\"\n"
            "[network]\ndefault_allow = []\ndefault_deny = [\"10.0.0.0/8\"]\nresolvers = [\"198.51.100.4\"]\n"
            "default_domains = [\"Registry.Example.TEST.\", \"*.cdn.example.test:8443\"]\n"
            "probe_domains = [\"registry.example.test\"]\nbroker_connections = 3\n"
            "[escalation]\nenabled = false\nsocket_dir = \"/tmp/sock\"\n"
            "[profiles.aa]\nimage = \"localhost/agent:1\"\n"
            "allow_domains = [\"api.example.test\", \"registry.example.test:443\", \"git.example.test:22\"]\n"
            "check_server_name = true\n");
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        int r = config_load(&o, &c, &d);
        if (r != 0) {
                config_diags_print(&d, stderr);
                fail_msg("config_load: %d", r);
        }
        const ConfigProfile *p = config_find_profile(c, "aa");
        assert_non_null(p);
        /* registry.example.test:443 came from default_domains already. */
        assert_int_equal(p->n_domains, 4);
        assert_string_equal(p->domains[0].name, "registry.example.test");
        assert_int_equal(p->domains[0].port, 443);
        assert_true(p->domains[1].wildcard);
        assert_string_equal(p->domains[1].name, "cdn.example.test");
        assert_int_equal(p->domains[1].port, 8443);
        assert_string_equal(p->domains[2].name, "api.example.test");
        assert_int_equal(p->domains[3].port, 22);
        assert_true(p->check_server_name);
        assert_int_equal(c->broker_connections, 3);
        /* No address is permitted: no sidecar, no resolver of its own. */
        assert_true(netpolicy_permits_nothing(&p->net));
        assert_int_equal(p->net.n_resolvers, 0);
        assert_int_equal(c->n_resolvers, 1);
        config_free(c);
        config_diags_done(&d);

        put("xdg/lazaret/config.toml",
            "[storage]\ndata_root = \"~/data\"\n"
            "[network]\ndefault_allow = []\ndefault_deny = []\n"
            "default_domains = [\"ok.example.test\", \"ok.example.test\", \"*.com\", \"a b.test\"]\n"
            "probe_domains = [\"*.x.example.test\", \"other.example.test\"]\nbroker_connections = 0\n"
            "[escalation]\nenabled = false\nsocket_dir = \"/tmp/sock\"\n"
            "[profiles.aa]\nimage = \"localhost/agent:1\"\n"
            "allow_domains = [\"x.example.test:0\", \"10.1.2.3\", \"b\u00fccher.test\"]\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EINVAL);
        const char *want[] = {
                "network.default_domains[1]: 'ok.example.test' is listed twice; keep one",
                "network.default_domains[2]: '*.com' is not NAME[:PORT]",
                "network.default_domains[3]: 'a b.test' is not NAME[:PORT]",
                "network.probe_domains[0]: '*.x.example.test' is a wildcard; a probe needs one exact name",
                "network.broker_connections: 0 connections is out of range",
                "profiles.aa.allow_domains[0]: 'x.example.test:0' is not NAME[:PORT]",
                "profiles.aa.allow_domains[1]: '10.1.2.3' is not NAME[:PORT]",
                "profiles.aa.allow_domains[2]: ",
                "network.probe_domains: other.example.test:443 is not among the names profile aa may reach",
        };
        assert_int_equal(config_diags_errors(&d), ELEMENTSOF(want));
        for (size_t i = 0; i < ELEMENTSOF(want); i++)
                if (!startswith(d.items[i].message, want[i]))
                        fail_msg("diag %zu: %s", i, d.items[i].message);
        /* Positioned: the line of the entry. */
        assert_int_equal(d.items[0].pos.line, 6);
        assert_int_equal(d.items[5].pos.line, 14);
        assert_int_equal(d.items[8].pos.line, 7);
        config_diags_done(&d);
}

/* Decision 20: a profile can say that [network] default_allow does not
 * reach it, and the agent presets are names-only (issue 41, item 6). */
static void test_own_address_rules(void **state) {
        (void) state;
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        put("xdg/lazaret/config.toml", "[storage]\ndata_root = \"~/data\"\n"
                                       "[network]\ndefault_allow = [\"0.0.0.0/0\"]\ndefault_deny = [\"10.0.0.0/8\"]\n"
                                       "[escalation]\nenabled = false\nsocket_dir = \"/tmp/sock\"\n"
                                       "[profiles.cc]\npreset = \"claude\"\n"
                                       "[profiles.wide]\npreset = \"claude\"\ninherit_default_allow = true\n"
                                       "[profiles.own]\nimage = \"localhost/agent:1\"\ninherit_default_allow = false\n"
                                       "allow_egress = [\"0.0.0.0/0\"]\n"
                                       "[profiles.few]\nimage = \"localhost/agent:1\"\ninherit_default_allow = false\n"
                                       "allow_egress = [\"198.51.100.0/24\"]\n"
                                       "[profiles.plain]\nimage = \"localhost/agent:1\"\n");
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        int r = config_load(&o, &c, &d);
        if (r != 0) {
                config_diags_print(&d, stderr);
                fail_msg("config_load: %d", r);
        }
        /* The preset: its names through the broker, no address at all. */
        const ConfigProfile *p = config_find_profile(c, "cc");
        assert_true(p->own_address_rules);
        assert_true(p->n_domains > 0);
        assert_true(netpolicy_permits_nothing(&p->net));
        assert_int_equal(verdict_of(p, "203.0.113.1"), NET_DENY);
        /* Said otherwise, the global rules reach it again. */
        p = config_find_profile(c, "wide");
        assert_false(p->own_address_rules);
        assert_int_equal(verdict_of(p, "203.0.113.1"), NET_ALLOW);
        assert_int_equal(verdict_of(p, "10.1.2.3"), NET_DENY);
        /* Its own addresses; default_deny still holds. */
        p = config_find_profile(c, "own");
        assert_true(p->own_address_rules);
        assert_int_equal(verdict_of(p, "203.0.113.1"), NET_ALLOW);
        assert_int_equal(verdict_of(p, "10.1.2.3"), NET_DENY);
        p = config_find_profile(c, "few");
        assert_int_equal(verdict_of(p, "198.51.100.7"), NET_ALLOW);
        assert_int_equal(verdict_of(p, "203.0.113.1"), NET_DENY);
        p = config_find_profile(c, "plain");
        assert_false(p->own_address_rules);
        assert_int_equal(verdict_of(p, "203.0.113.1"), NET_ALLOW);
        /* Two policies, two digests. */
        assert_string_not_equal(config_find_profile(c, "cc")->net_digest, p->net_digest);
        config_free(c);
        config_diags_done(&d);

        /* A workspace file may turn the global rules off (it narrows), not
         * on for a preset that has them off. */
        put("ws/lazaret.toml", "[profiles.plain]\ninherit_default_allow = false\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), 0);
        assert_true(config_find_profile(c, "plain")->own_address_rules);
        assert_int_equal(verdict_of(config_find_profile(c, "plain"), "203.0.113.1"), NET_DENY);
        config_free(c);
        config_diags_done(&d);
        put("ws/lazaret.toml", "[profiles.cc]\ninherit_default_allow = true\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EPERM);
        assert_true(startswith(d.items[0].message, "profiles.cc.inherit_default_allow widens"));
        config_diags_done(&d);

        /* A value that is not a bool; a probe target the profile's own
         * rules deny: the error says why. */
        char wsfile[160];
        snprintf(wsfile, sizeof(wsfile), "%s/lazaret.toml", ws);
        assert_int_equal(unlink(wsfile), 0);
        put("xdg/lazaret/config.toml",
            "[storage]\ndata_root = \"~/data\"\n"
            "[network]\ndefault_allow = [\"0.0.0.0/0\"]\ndefault_deny = []\nprobe_targets = [\"203.0.113.9:443\"]\n"
            "[escalation]\nenabled = false\nsocket_dir = \"/tmp/sock\"\n"
            "[profiles.cc]\npreset = \"claude\"\ninherit_default_allow = \"no\"\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EINVAL);
        assert_non_null(strstr(d.items[0].message, "inherit_default_allow"));
        config_diags_done(&d);
        put("xdg/lazaret/config.toml",
            "[storage]\ndata_root = \"~/data\"\n"
            "[network]\ndefault_allow = [\"0.0.0.0/0\"]\ndefault_deny = []\nprobe_targets = [\"203.0.113.9:443\"]\n"
            "[escalation]\nenabled = false\nsocket_dir = \"/tmp/sock\"\n"
            "[profiles.cc]\npreset = \"claude\"\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EINVAL);
        assert_int_equal(config_diags_errors(&d), 1);
        assert_non_null(strstr(d.items[0].message, "does not inherit network.default_allow"));
        config_diags_done(&d);
}

/* memory_limit = 0 says "no limit" in so many words (issue 41, item 10:
 * the native backend refuses a limit no memory cgroup would hold); below
 * 64 it is still out of range. */
static void test_memory_limit_off(void **state) {
        (void) state;
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        put("xdg/lazaret/config.toml", "[storage]\ndata_root = \"~/data\"\n"
                                       "[network]\ndefault_allow = []\ndefault_deny = []\n"
                                       "[escalation]\nenabled = false\nsocket_dir = \"/tmp/sock\"\n"
                                       "[profiles.off]\nimage = \"localhost/agent:1\"\nmemory_limit = 0\n"
                                       "[profiles.dflt]\nimage = \"localhost/agent:1\"\n");
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        int r = config_load(&o, &c, &d);
        if (r != 0) {
                config_diags_print(&d, stderr);
                fail_msg("config_load: %d", r);
        }
        assert_int_equal(config_find_profile(c, "off")->memory_limit_mib, 0);
        assert_int_equal(config_find_profile(c, "dflt")->memory_limit_mib, CONFIG_MEMORY_LIMIT_DEFAULT);
        config_free(c);
        config_diags_done(&d);
        put("xdg/lazaret/config.toml", "[storage]\ndata_root = \"~/data\"\n"
                                       "[network]\ndefault_allow = []\ndefault_deny = []\n"
                                       "[escalation]\nenabled = false\nsocket_dir = \"/tmp/sock\"\n"
                                       "[profiles.low]\nimage = \"localhost/agent:1\"\nmemory_limit = 1\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EINVAL);
        assert_int_equal(config_diags_errors(&d), 1);
        assert_non_null(strstr(d.items[0].message, "or 0 for no limit"));
        config_diags_done(&d);
}

/* ---- authority (decision 15) ------------------------------------------- */

static void test_key_rules(void **state) {
        (void) state;
        /* Each key classified once. */
        for (size_t i = 0; i < config_key_rules_n; i++) {
                assert_non_null(config_key_class_to_string(config_key_rules[i].cls));
                assert_non_null(config_key_rules[i].why);
                for (size_t j = i + 1; j < config_key_rules_n; j++)
                        assert_string_not_equal(config_key_rules[i].path, config_key_rules[j].path);
        }
        const char *p1[] = { "profiles", "x", "volumes" }, *p2[] = { "profiles", "x", "env", "TOKEN" },
                   *p3[] = { "network", "nope" }, *p4[] = { "profiles", "x", "volumes", "y" };
        assert_int_equal(config_key_rule(p1, 3)->cls, CONFIG_KEY_SUBSET);
        assert_int_equal(config_key_rule(p2, 4)->cls, CONFIG_KEY_ENV);
        assert_null(config_key_rule(p3, 2));
        assert_null(config_key_rule(p4, 4));
        const char *k[32];
        assert_int_equal(config_key_children("", k, 32), 7);
        assert_string_equal(k[0], "storage");
        assert_string_equal(k[6], "default_profile");
        assert_string_equal(k[3], "profiles");
        assert_string_equal(k[4], "runtime");
        assert_int_equal(config_key_children("profiles.*", k, 32), 20);
        assert_string_equal(k[0], "preset");
        assert_string_equal(k[4], "backend");
        assert_string_equal(k[7], "pids_limit");
        assert_string_equal(k[8], "memory_limit");
        assert_string_equal(k[9], "cpu_limit");
        assert_string_equal(k[10], "disk_limit");
        assert_string_equal(k[11], "allow_egress");
        assert_string_equal(k[12], "inherit_default_allow");
        assert_string_equal(k[13], "allow_domains");
        assert_string_equal(k[14], "check_server_name");
        assert_string_equal(k[15], "status_line");
        assert_string_equal(k[16], "clipboard");
        assert_string_equal(k[17], "ca_certificates");
        assert_string_equal(k[19], "volumes");
        assert_null(k[20]);
        assert_int_equal(config_key_children("profiles", k, 32), 0);
}

/* default_profile (issue 42): names one of the profiles, or is an error
 * listing them; only the person's own files may set it. */
static void test_default_profile(void **state) {
        (void) state;
        char ws[128], cfg[1024];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;
        put("ws/lazaret.toml", "");
        snprintf(cfg, sizeof cfg, "default_profile = \"shell\"\n%s[profiles.shell]\nimage = \"localhost/s:1\"\n",
                 base_cfg);
        put("xdg/lazaret/config.toml", cfg);
        assert_int_equal(config_load(&o, &c, &d), 0);
        assert_string_equal(c->default_profile, "shell");
        config_free(c);
        config_diags_done(&d);

        snprintf(cfg, sizeof cfg, "default_profile = \"nope\"\n%s[profiles.shell]\nimage = \"localhost/s:1\"\n",
                 base_cfg);
        put("xdg/lazaret/config.toml", cfg);
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EINVAL);
        assert_int_equal(config_diags_errors(&d), 1);
        assert_string_equal(d.items[0].message,
                            "default_profile = \"nope\" names no profile (configured: claude, shell)");
        assert_int_equal(d.items[0].pos.line, 1);
        config_diags_done(&d);

        /* A repository does not choose among the person's profiles. */
        snprintf(cfg, sizeof cfg, "%s[profiles.shell]\nimage = \"localhost/s:1\"\n", base_cfg);
        put("xdg/lazaret/config.toml", cfg);
        put("ws/lazaret.toml", "default_profile = \"shell\"\n");
        d = (ConfigDiags){};
        c = NULL;
        assert_int_equal(config_load(&o, &c, &d), -EPERM);
        config_free(c);
        config_diags_done(&d);
        put("ws/lazaret.toml", "");
}

static int load_ws(const char *text, Config **ret, ConfigDiags *d) {
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        put("xdg/lazaret/config.toml", base_cfg);
        put("ws/lazaret.toml", text);
        ConfigLoadOptions o = { .workspace = ws };
        *d = (ConfigDiags){};
        return config_load(&o, ret, d);
}

static void test_authority(void **state) {
        (void) state;
        Config *c = NULL;
        ConfigDiags d;
        char want[256];

        /* Widening: one positioned error each, nothing merged. */
        assert_int_equal(
                load_ws("[profiles.claude]\nimage = \"localhost/other:1\"\nenv.T = \"env:HOME\"\n"
                        "volumes = [{ host = \"{profile_dir}/home\", container = \"/root\", mode = \"rw\" }]\n",
                        &c, &d),
                -EPERM);
        assert_null(c);
        assert_int_equal(config_diags_errors(&d), 3);
        assert_string_equal(d.items[0].message, "profiles.claude.image widens the sandbox; a workspace file may only "
                                                "narrow it until you run 'lazaret trust'");
        assert_int_equal(d.items[0].pos.line, 2);
        assert_int_equal(d.items[0].pos.col, 9);
        assert_true(strncmp(d.items[1].message, "profiles.claude.env.T widens", 28) == 0);
        assert_true(strncmp(d.items[2].message, "profiles.claude.volumes[0] widens", 33) == 0);
        config_diags_done(&d);

        /* Egress by name: a workspace file (the agent writes it in direct
         * mode) may not add names, probes or broker connections, nor turn
         * the server-name check off; turning it on narrows. */
        assert_int_equal(load_ws("[network]\ndefault_domains = [\"exfil.example\"]\nbroker_connections = 4096\n"
                                 "probe_domains = [\"exfil.example\"]\n"
                                 "[profiles.claude]\nallow_domains = [\"*.exfil.example\"]\n"
                                 "check_server_name = false\n",
                                 &c, &d),
                         -EPERM);
        assert_null(c);
        assert_int_equal(config_diags_errors(&d), 5);
        assert_true(strncmp(d.items[0].message, "network.default_domains widens", 30) == 0);
        assert_true(strncmp(d.items[1].message, "network.broker_connections widens", 33) == 0);
        assert_true(strncmp(d.items[2].message, "network.probe_domains widens", 28) == 0);
        assert_true(strncmp(d.items[3].message, "profiles.claude.allow_domains widens", 36) == 0);
        assert_true(strncmp(d.items[4].message, "profiles.claude.check_server_name widens", 40) == 0);
        config_diags_done(&d);
        assert_int_equal(load_ws("[profiles.claude]\ncheck_server_name = true\n", &c, &d), 0);
        assert_true(c->profiles[0].check_server_name);
        config_free(c);
        config_diags_done(&d);

        /* Narrowing: deny entries added beside the trusted ones, the volume
         * made read-only (it was "ro,z": keeping z is no more), escalation off. */
        assert_int_equal(load_ws("[network]\ndefault_deny = [\"192.168.0.0/16\"]\ndefault_allow = []\n"
                                 "[escalation]\nenabled = false\n"
                                 "[profiles.claude]\nimage = \"localhost/agent:1\"\nenv.E = \"literal\"\n",
                                 &c, &d),
                         0);
        assert_int_equal(c->wsfile.trust, CONFIG_TRUST_UNTRUSTED);
        assert_int_equal(c->n_default_deny, 2);
        assert_int_equal(c->n_default_allow, 0);
        /* Both lists' entries, the workspace file's added to the base's. */
        assert_non_null(strstr(c->profiles[0].net_canonical, "\nrule 10.0.0.0/8 deny\nrule 192.168.0.0/16 deny\n"));
        assert_false(c->escalation_enabled);
        config_free(c);
        config_diags_done(&d);

        /* A volume narrowed to read-only passes; adding a relabel does not. */
        assert_int_equal(load_ws("[profiles.claude]\nvolumes = [{ host = \"{profile_dir}/home\", container = "
                                 "\"/root\", mode = \"ro\" }]\n",
                                 &c, &d),
                         0);
        config_free(c);
        config_diags_done(&d);
        assert_int_equal(load_ws("[profiles.claude]\nvolumes = [{ host = \"{profile_dir}/home\", container = "
                                 "\"/root\", mode = \"ro,Z\" }]\n",
                                 &c, &d),
                         -EPERM);
        config_diags_done(&d);

        /* Trusted bytes carry authority; one byte more voids it. */
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        put_trusted("ws/lazaret.toml", "[profiles.claude]\nimage = \"localhost/other:1\"\n");
        ConfigLoadOptions o = { .workspace = ws };
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), 0);
        assert_int_equal(c->wsfile.trust, CONFIG_TRUST_TRUSTED);
        assert_string_equal(c->profiles[0].image, "localhost/other:1");
        config_free(c);
        config_diags_done(&d);
        put("ws/lazaret.toml", "[profiles.claude]\nimage = \"localhost/other:1\"\n\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EPERM);
        assert_int_equal(config_diags_errors(&d), 2);
        assert_true(strncmp(d.items[1].message, "changed since you trusted it", 28) == 0);
        config_diags_done(&d);

        /* Verbs that start nothing leave the file out, with warnings. */
        o.ignore_widening_workspace = true;
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), 0);
        assert_int_equal(config_diags_errors(&d), 0);
        assert_true(d.n >= 1 && d.items[0].warning);
        assert_string_equal(c->profiles[0].image, "localhost/agent:1");
        config_free(c);
        config_diags_done(&d);

        /* --config naming the workspace file: the person chose it. */
        snprintf(want, sizeof(want), "%s/ws/lazaret.toml", dir);
        o = (ConfigLoadOptions){ .workspace = ws, .explicit_path = want };
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), 0);
        assert_int_equal(c->wsfile.trust, CONFIG_TRUST_EXPLICIT);
        assert_string_equal(c->profiles[0].image, "localhost/other:1");
        config_free(c);
        config_diags_done(&d);
}

/* ca_certificates (issue 24): "host", or "host" and host files in a list,
 * canonical; every bad entry an error at its place; an untrusted workspace
 * file may not set it. */
#define CA_HEAD                                                                                                        \
        "[storage]\ndata_root = \"~/data\"\n[network]\ndefault_allow = []\ndefault_deny = []\n[escalation]\n"          \
        "enabled = false\nsocket_dir = \"/tmp/sock\"\n"

/* Issue 40, item 4: a literal env value acts inside the sandbox, but a
 * workspace file that swaps the person's API key (or sets an endpoint, a
 * proxy or start-up code) chooses whose account the agent works on and
 * where its requests go: a widening, which needs trust. */
static void test_authority_env(void **state) {
        (void) state;
        Config *c = NULL;
        ConfigDiags d;
        char ws[128];
        snprintf(ws, sizeof(ws), "%s/ws", dir);

        /* The table: credentials, endpoints, proxies in either case,
         * start-up code; names that choose nothing pass. */
        static const char *const known[] = { "OPENAI_API_KEY",
                                             "ANTHROPIC_AUTH_TOKEN",
                                             "AWS_SECRET_ACCESS_KEY",
                                             "AWS_ACCESS_KEY_ID",
                                             "DB_PASSWORD",
                                             "OPENAI_BASE_URL",
                                             "ANTHROPIC_BASE_URL",
                                             "OPENAI_API_BASE",
                                             "DOCKER_HOST",
                                             "HTTPS_PROXY",
                                             "https_proxy",
                                             "all_proxy",
                                             "NO_PROXY",
                                             "LD_PRELOAD",
                                             "NODE_OPTIONS",
                                             "PYTHONSTARTUP",
                                             "PYTHONPATH",
                                             "BASH_ENV",
                                             "GIT_CONFIG_GLOBAL",
                                             "GIT_SSH_COMMAND",
                                             "SSL_CERT_FILE",
                                             "REQUESTS_CA_BUNDLE",
                                             "NODE_EXTRA_CA_CERTS",
                                             "CODEX_HOME",
                                             "NPM_CONFIG_REGISTRY",
                                             "PATH" };
        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                assert_non_null(config_env_name_find(known[i]));
        static const char *const plain[] = { "RUST_LOG", "TERM", "LANG", "CI", "DEBUG", "KEYBOARD", "NODE_ENV" };
        for (size_t i = 0; i < ELEMENTSOF(plain); i++)
                assert_null(config_env_name_find(plain[i]));
        for (size_t i = 0; i < config_env_names_n; i++)
                assert_non_null(config_env_names[i].why);

        /* The attack: the person's codex profile reads the key from the
         * host (the preset's "env?:OPENAI_API_KEY"); the repository's file
         * sets its own. */
        char user[sizeof(base_cfg) + 64];
        snprintf(user, sizeof(user), "%s[profiles.codex]\npreset = \"codex\"\n", base_cfg);
        put("xdg/lazaret/config.toml", user);
        put("ws/lazaret.toml", "[profiles.codex.env]\nOPENAI_API_KEY = \"sk-proj-ATTACKER\"\n");
        ConfigLoadOptions o = { .workspace = ws };
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EPERM);
        assert_null(c);
        assert_int_equal(config_diags_errors(&d), 1);
        assert_string_equal(d.items[0].message, "profiles.codex.env.OPENAI_API_KEY widens the sandbox; a workspace "
                                                "file may only narrow it until you run 'lazaret trust'");
        assert_int_equal(d.items[0].pos.line, 2);
        config_diags_done(&d);

        /* What lazaret trust shows: the value, the person's own, and why. */
        o.trust_workspace = true;
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), 0);
        assert_int_equal(c->wsfile.widenings.n, 1);
        const ConfigWidening *x = &c->wsfile.widenings.items[0];
        assert_string_equal(x->key, "profiles.codex.env.OPENAI_API_KEY");
        assert_string_equal(x->value->str.s, "sk-proj-ATTACKER");
        assert_non_null(x->trusted);
        assert_string_equal(x->trusted->str.s, "env?:OPENAI_API_KEY");
        assert_non_null(strstr(x->why, "replace yours"));
        config_free(c);
        config_diags_done(&d);
        o.trust_workspace = false;

        /* Variables the person does not set: an endpoint, a proxy (lower
         * case too), start-up code, git's configuration; and a plain one of
         * the person's replaced. Each one error; the plain new one passes. */
        put("ws/lazaret.toml", "[profiles.claude.env]\nOPENAI_BASE_URL = \"https://attacker.example/v1\"\n"
                               "https_proxy = \"http://attacker.example:8080\"\nNODE_OPTIONS = \"--require ./x.js\"\n"
                               "LD_PRELOAD = \"/workspace/x.so\"\nGIT_CONFIG_GLOBAL = \"/workspace/g\"\n"
                               "A = \"2\"\nRUST_LOG = \"debug\"\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), -EPERM);
        assert_int_equal(config_diags_errors(&d), 6);
        static const char *const keys[] = { "OPENAI_BASE_URL", "https_proxy",       "NODE_OPTIONS",
                                            "LD_PRELOAD",      "GIT_CONFIG_GLOBAL", "A" };
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                char want[128];
                snprintf(want, sizeof(want), "profiles.claude.env.%s widens", keys[i]);
                assert_true(strncmp(d.items[i].message, want, strlen(want)) == 0);
        }
        config_diags_done(&d);

        /* The person's own value again, or a plain variable of its own:
         * narrowing, no trust needed. */
        put("ws/lazaret.toml", "[profiles.claude.env]\nA = \"1\"\nRUST_LOG = \"debug\"\n"
                               "[profiles.codex.env]\nOPENAI_API_KEY = \"env?:OPENAI_API_KEY\"\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), 0);
        assert_int_equal(config_diags_errors(&d), 0);
        config_free(c);
        config_diags_done(&d);
}

static void test_ca_config(void **state) {
        (void) state;
        char ws[128], want[256];
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        ConfigLoadOptions o = { .workspace = ws };
        ConfigDiags d = {};
        Config *c = NULL;

        put("xdg/lazaret/config.toml",
            CA_HEAD "[profiles.aa]\nimage = \"localhost/a:1\"\n"
                    "ca_certificates = \"host\"\n[profiles.bb]\nimage = \"localhost/a:1\"\n"
                    "ca_certificates = [\"host\", \"~/ca/corp.pem\", \"/etc//x/../y.pem\"]\n");
        assert_int_equal(config_load(&o, &c, &d), -EINVAL);
        assert_int_equal(config_diags_errors(&d), 1);
        assert_string_equal(d.items[0].message,
                            "profiles.bb.ca_certificates[2]: path '/etc//x/../y.pem' contains a '..' segment after "
                            "expansion; refusing it");
        config_diags_done(&d);

        put("xdg/lazaret/config.toml", CA_HEAD "[profiles.aa]\nimage = \"localhost/a:1\"\n"
                                               "ca_certificates = \"host\"\n[profiles.bb]\nimage = \"localhost/a:1\"\n"
                                               "ca_certificates = [\"host\", \"~/ca/corp.pem\"]\n[profiles.cc]\n"
                                               "image = \"localhost/a:1\"\n");
        d = (ConfigDiags){};
        assert_int_equal(config_load(&o, &c, &d), 0);
        const ConfigProfile *p = config_find_profile(c, "aa");
        assert_int_equal(p->n_ca_files, 1);
        assert_string_equal(p->ca_files[0], "host");
        p = config_find_profile(c, "bb");
        assert_int_equal(p->n_ca_files, 2);
        assert_string_equal(p->ca_files[0], "host");
        snprintf(want, sizeof(want), "%s/home/ca/corp.pem", dir);
        assert_string_equal(p->ca_files[1], want);
        assert_null(p->ca_files[2]);
        p = config_find_profile(c, "cc");
        assert_null(p->ca_files);
        config_free(c);
        config_diags_done(&d);

        static const struct {
                const char *value, *message;
        } bad[] = {
                { "\"image\"", "profiles.aa.ca_certificates: 'image' is not \"host\"; it is \"host\" (the host's "
                               "trust store) or a list of \"host\" and PEM certificate files" },
                { "true", "profiles.aa.ca_certificates is a boolean; it is \"host\" (the host's trust store) or a "
                          "list of \"host\" and PEM certificate files" },
                { "[]", "profiles.aa.ca_certificates has 0 entries; it takes 1 to 16" },
                { "[\"host\", \"host\"]", "profiles.aa.ca_certificates[1]: host is listed twice; keep one" },
                { "[\"ca.pem\"]", "profiles.aa.ca_certificates[0]: path 'ca.pem' is not absolute after expansion "
                                  "(start it with '/' or '~/')" },
                { "[\"host\", 3]", "profiles.aa.ca_certificates[1] is not a non-empty string; it is \"host\" (the "
                                   "host's trust store) or a list of \"host\" and PEM certificate files" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char text[512];
                snprintf(text, sizeof(text), CA_HEAD "[profiles.aa]\nimage = \"localhost/a:1\"\nca_certificates = %s\n",
                         bad[i].value);
                put("xdg/lazaret/config.toml", text);
                d = (ConfigDiags){};
                c = NULL;
                assert_int_equal(config_load(&o, &c, &d), -EINVAL);
                assert_int_equal(config_diags_errors(&d), 1);
                assert_string_equal(d.items[0].message, bad[i].message);
                assert_int_equal(d.items[0].pos.line, 11);
                config_diags_done(&d);
        }

        /* A workspace file may not hand the sandbox the host's files. */
        assert_int_equal(load_ws("[profiles.claude]\nca_certificates = \"host\"\n", &c, &d), -EPERM);
        assert_int_equal(config_diags_errors(&d), 1);
        assert_non_null(strstr(d.items[0].message, "profiles.claude.ca_certificates widens the sandbox"));
        config_diags_done(&d);
}

static void test_trust_store(void **state) {
        (void) state;
        char store[256], sha[WSTRUST_SHA256_HEX_LEN + 1];
        snprintf(store, sizeof(store), "%s/home/share/lazaret/trusted-workspaces", dir);
        assert_int_equal(wstrust_sha256_hex("", 0, sha), 0);
        assert_string_equal(sha, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

        WsTrustRecords recs = {};
        assert_int_equal(wstrust_load(store, &recs, NULL), 0); /* none yet */
        assert_int_equal(recs.n, 0);
        assert_int_equal(wstrust_set(store, "/a/lazaret.toml", sha, 5), 0);
        assert_int_equal(wstrust_set(store, "/b/lazaret.toml", sha, 6), 0);
        assert_int_equal(wstrust_set(store, "/a/lazaret.toml", sha, 7), 0); /* replaces */
        assert_int_equal(wstrust_load(store, &recs, NULL), 0);
        assert_int_equal(recs.n, 2);
        assert_int_equal(wstrust_find(&recs, "/a/lazaret.toml")->when, 7);
        assert_null(wstrust_find(&recs, "/c/lazaret.toml"));
        wstrust_records_done(&recs);
        struct stat st;
        assert_int_equal(stat(store, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);

        /* Never a path with a control character, nor a relative one. */
        assert_int_equal(wstrust_set(store, "/a\nb/lazaret.toml", sha, 1), -EINVAL);
        assert_int_equal(wstrust_set(store, "a/lazaret.toml", sha, 1), -EINVAL);
        assert_int_equal(wstrust_set(store, "/a/lazaret.toml", "xyz", 1), -EINVAL);
        assert_int_equal(wstrust_set(store, "/b/lazaret.toml", NULL, 0), 0);
        assert_int_equal(wstrust_set(store, "/b/lazaret.toml", NULL, 0), -ENOENT);

        /* A line that is not a record is named. */
        char bad[512];
        snprintf(bad, sizeof(bad), "%s 1 /a/lazaret.toml\n%s x /b\n", sha, sha);
        assert_int_equal(write_file_atomic(store, bad, strlen(bad), 0600, 0), 0);
        unsigned line = 0;
        assert_int_equal(wstrust_load(store, &recs, &line), -EBADMSG);
        assert_int_equal(line, 2);
}

static void test_workspace_file_kinds(void **state) {
        (void) state;
        char ws[128], p[256], *data = NULL;
        const char *why = NULL;
        size_t size = 0;
        uid_t owner = 0;
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        snprintf(p, sizeof(p), "%s/lazaret.toml", ws);

        assert_int_equal(wstrust_read_workspace_file(ws, geteuid(), &data, &size, &owner, &why), -ENOENT);
        assert_int_equal(symlink("/etc/hostname", p), 0);
        assert_int_equal(wstrust_read_workspace_file(ws, geteuid(), &data, &size, &owner, &why), -ELOOP);
        unlink(p);
        assert_int_equal(mkfifo(p, 0600), 0);
        assert_int_equal(wstrust_read_workspace_file(ws, geteuid(), &data, &size, &owner, &why), -EINVAL);
        unlink(p);
        assert_int_equal(mkdir(p, 0700), 0);
        assert_int_equal(wstrust_read_workspace_file(ws, geteuid(), &data, &size, &owner, &why), -EISDIR);
        rmdir(p);
        put("ws/lazaret.toml", "x = 1\n");
        assert_int_equal(wstrust_read_workspace_file(ws, geteuid() + 1, &data, &size, &owner, &why), -EPERM);
        assert_int_equal(owner, geteuid());
        assert_int_equal(wstrust_read_workspace_file(ws, geteuid(), &data, &size, &owner, &why), 0);
        assert_string_equal(data, "x = 1\n");
        free(data);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_expand),
                cmocka_unit_test(test_cidr),
                cmocka_unit_test(test_domain_hash),
                cmocka_unit_test(test_profile_names),
                cmocka_unit_test_setup_teardown(test_load_merge, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_load_symlinked_workspace, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_load_conflict, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_load_nothing, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_profile_env, setup_dirs, teardown_dirs),
                cmocka_unit_test(test_persist_dirs),
                cmocka_unit_test_setup_teardown(test_persist_config, setup_dirs, teardown_dirs),
                cmocka_unit_test(test_key_rules),
                cmocka_unit_test_setup_teardown(test_default_profile, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_domains_config, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_own_address_rules, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_memory_limit_off, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_authority, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_authority_env, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_ca_config, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_trust_store, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_workspace_file_kinds, setup_dirs, teardown_dirs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
