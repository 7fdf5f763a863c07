/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "cidr.h"
#include "config-authority.h"
#include "config.h"
#include "fd-util.h"
#include "strbuf.h"
#include "string-util.h"

/* The one classification of the schema (decision 15). A key missing here
 * is unknown to the schema, and validation refuses it. */
const ConfigKeyRule config_key_rules[] = {
        { "storage", CONFIG_KEY_TABLE, .why = "a table" },
        { "storage.data_root", CONFIG_KEY_AUTHORITY,
          .why = "a host path: where Lazaret keeps every Domain's state, layers and volumes" },

        { "network", CONFIG_KEY_TABLE, .why = "a table" },
        { "network.default_allow", CONFIG_KEY_SUBSET, CONFIG_ENTRY_CIDR,
          .why = "destinations every sandbox may reach: keeping fewer of the trusted entries narrows" },
        { "network.default_deny", CONFIG_KEY_UNION,
          .why = "destinations no sandbox may reach: a workspace's entries are added to the trusted ones" },
        { "network.ipv6", CONFIG_KEY_NARROW_VALUE, .narrow_str = "disabled",
          .why = "\"disabled\" narrows; \"enabled\" lets the sandbox reach IPv6 destinations" },
        { "network.resolvers", CONFIG_KEY_AUTHORITY,
          .why = "the DNS servers the sandbox may send queries to, and the only ones port 53 reaches" },
        { "network.probe_targets", CONFIG_KEY_AUTHORITY,
          .why = "what the launch proves reachable: the person's own check of the policy" },
        { "network.probe_dns_name", CONFIG_KEY_AUTHORITY,
          .why = "the name the launch resolves to prove DNS works: the person's own check" },
        { "network.default_domains", CONFIG_KEY_AUTHORITY,
          .why = "host names every sandbox may reach through the broker" },
        { "network.probe_domains", CONFIG_KEY_AUTHORITY,
          .why = "what the launch proves reachable by name: the person's own check" },
        { "network.broker_connections", CONFIG_KEY_AUTHORITY,
          .why = "how many connections the broker opens on the host for one sandbox" },

        { "escalation", CONFIG_KEY_TABLE, .why = "a table" },
        { "escalation.enabled", CONFIG_KEY_NARROW_VALUE, .narrow_bool = false,
          .why = "false narrows; true opens the one door back to the host" },
        { "escalation.socket_dir", CONFIG_KEY_AUTHORITY, .why = "a host path where Lazaret makes a socket" },
        { "escalation.auto_approve", CONFIG_KEY_SUBSET, CONFIG_ENTRY_VALUE,
          .why = "host commands that run without asking: keeping fewer of the trusted entries narrows" },
        { "escalation.output_limit", CONFIG_KEY_AUTHORITY,
          .why = "how much of a host command's output reaches the sandbox" },
        { "escalation.time_limit", CONFIG_KEY_AUTHORITY, .why = "how long a host command may run" },

        { "profiles", CONFIG_KEY_TABLE, .why = "a table" },
        { "profiles.*", CONFIG_KEY_TABLE, .why = "a table: a new profile is judged key by key" },
        { "profiles.*.preset", CONFIG_KEY_AUTHORITY,
          .why = "a built-in preset: an image, host directories, host variables and names the sandbox may reach" },
        { "profiles.*.image", CONFIG_KEY_AUTHORITY,
          .why = "the host pulls it from the registry it names, outside the sandbox's network policy" },
        { "profiles.*.command", CONFIG_KEY_NEUTRAL, .why = "it runs inside the sandbox only" },
        { "profiles.*.runsc_network", CONFIG_KEY_NARROW_VALUE, .narrow_str = "sandbox",
          .why = "\"host\" hands the sandbox's traffic to the kernel's network stack" },
        { "profiles.*.backend", CONFIG_KEY_NARROW_VALUE, .narrow_str = "gvisor",
          .why = "\"native\" puts the agent on the host's own kernel, behind Landlock and seccomp instead of gVisor" },
        { "profiles.*.workspace_mode", CONFIG_KEY_NARROW_VALUE, .narrow_str = "branch",
          .why = "\"direct\" lets the agent write the host's working tree" },
        { "profiles.*.persistent_dirs", CONFIG_KEY_AUTHORITY, .why = "host storage kept across runs" },
        { "profiles.*.pids_limit", CONFIG_KEY_AUTHORITY,
          .why = "how many processes and threads the sandbox may run, and so how many host threads runsc makes" },
        { "profiles.*.memory_limit", CONFIG_KEY_AUTHORITY,
          .why = "how much of the host's memory the sandbox may hold" },
        { "profiles.*.cpu_limit", CONFIG_KEY_AUTHORITY, .why = "how many of the host's CPUs the sandbox may use" },
        { "profiles.*.disk_limit", CONFIG_KEY_AUTHORITY,
          .why = "how much of the host's disk the sandbox's root file system may take" },
        { "profiles.*.allow_egress", CONFIG_KEY_SUBSET, CONFIG_ENTRY_CIDR,
          .why = "destinations this profile may reach: keeping fewer of the trusted entries narrows" },
        { "profiles.*.inherit_default_allow", CONFIG_KEY_NARROW_VALUE, .narrow_bool = false,
          .why = "false narrows: true lets network.default_allow's destinations reach this profile too" },
        { "profiles.*.allow_domains", CONFIG_KEY_AUTHORITY,
          .why = "host names this profile may reach through the broker" },
        { "profiles.*.check_server_name", CONFIG_KEY_NARROW_VALUE, .narrow_bool = true,
          .why = "true narrows: the broker refuses a connection whose TLS server name or Host is another name" },
        { "profiles.*.status_line", CONFIG_KEY_NARROW_VALUE, .narrow_bool = true,
          .why = "true narrows: false hides from the person what the sandbox is refused" },
        { "profiles.*.clipboard", CONFIG_KEY_NARROW_VALUE, .narrow_bool = false,
          .why = "false narrows: true lets what the sandbox prints set the host's clipboard" },
        { "profiles.*.ca_certificates", CONFIG_KEY_AUTHORITY,
          .why = "host files in the sandbox, and the authorities its TLS clients trust" },
        { "profiles.*.env", CONFIG_KEY_TABLE, .why = "a table" },
        { "profiles.*.env.*", CONFIG_KEY_ENV,
          .why = "\"env:VAR\" (or \"env?:VAR\") copies a host variable (often a secret) in; a literal acts inside "
                 "only, unless it replaces your own value or names a credential, endpoint or start-up variable" },
        { "profiles.*.volumes", CONFIG_KEY_SUBSET, CONFIG_ENTRY_VOLUME,
          .why = "host paths in the sandbox: dropping entries or making one read-only narrows" },

        { "runtime", CONFIG_KEY_TABLE, .why = "a table" },
        { "runtime.runsc", CONFIG_KEY_AUTHORITY,
          .why = "a host program: the gVisor runtime every sandbox runs under, run as the user" },
        { "runtime.memory_cgroup", CONFIG_KEY_AUTHORITY,
          .why = "a host cgroup directory: where the native backend makes each sandbox's memory cgroup" },

        { "workspace", CONFIG_KEY_TABLE, .why = "a table" },
        { "workspace.protect", CONFIG_KEY_UNION,
          .why = "more host-run files the sandbox may read but not change: added to the trusted ones" },
        { "workspace.mask", CONFIG_KEY_UNION, .why = "more secrets the sandbox sees empty: added to the trusted ones" },
        { "default_profile", CONFIG_KEY_AUTHORITY,
          .why = "which of the person's profiles a verb given no profile name uses (a repository may not pick "
                 "a wider one)" },
};
const size_t config_key_rules_n = ELEMENTSOF(config_key_rules);

#define WHY_CREDENTIAL                                                                                                 \
        "a credential: a workspace's value puts the agent's work, with your prompts and code, on another's account"
#define WHY_ENDPOINT "an endpoint: where a program sends its requests, and with them your prompts, code and keys"
#define WHY_PROXY    "a proxy: every request of the programs that honour it goes there first, keys and all"
#define WHY_TLS      "whom TLS clients trust: a workspace's authority could read and change the agent's traffic"
#define WHY_STARTUP  "code or options a program loads at its start: it runs inside the agent, beside your keys"
#define WHY_CONFIG   "where a program finds its configuration, which can name another endpoint, key or program"

/* The one list of variables a workspace may not set without trust
 * (config-authority.h). Broad on purpose: a false match costs one question
 * of lazaret trust, a miss costs the person's keys. */
const ConfigEnvName config_env_names[] = {
        { "*_KEY", WHY_CREDENTIAL },
        { "*_KEY_ID", WHY_CREDENTIAL },
        { "*_TOKEN", WHY_CREDENTIAL },
        { "*_SECRET", WHY_CREDENTIAL },
        { "*_PASSWORD", WHY_CREDENTIAL },
        { "*_PASSWD", WHY_CREDENTIAL },
        { "*_CREDENTIALS", WHY_CREDENTIAL },
        { "*_AUTH", WHY_CREDENTIAL },
        { "*_URL", WHY_ENDPOINT },
        { "*_URI", WHY_ENDPOINT },
        { "*_ENDPOINT", WHY_ENDPOINT },
        { "*_HOST", WHY_ENDPOINT },
        { "*_API_BASE", WHY_ENDPOINT },
        { "*_REGISTRY", WHY_ENDPOINT },
        { "*_PROXY", WHY_PROXY },
        { "SSL_CERT_*", WHY_TLS },
        { "*_CA_BUNDLE", WHY_TLS },
        { "*_CA_CERTS", WHY_TLS },
        { "LD_*", WHY_STARTUP },
        { "NODE_OPTIONS", WHY_STARTUP },
        { "NODE_PATH", WHY_STARTUP },
        { "PYTHONSTARTUP", WHY_STARTUP },
        { "PYTHONPATH", WHY_STARTUP },
        { "PYTHONHOME", WHY_STARTUP },
        { "PERL5OPT", WHY_STARTUP },
        { "PERL5LIB", WHY_STARTUP },
        { "RUBYOPT", WHY_STARTUP },
        { "RUBYLIB", WHY_STARTUP },
        { "JAVA_TOOL_OPTIONS", WHY_STARTUP },
        { "_JAVA_OPTIONS", WHY_STARTUP },
        { "JDK_JAVA_OPTIONS", WHY_STARTUP },
        { "BASH_ENV", WHY_STARTUP },
        { "ENV", WHY_STARTUP },
        { "PROMPT_COMMAND", WHY_STARTUP },
        { "PATH", WHY_STARTUP },
        { "GIT_*", WHY_CONFIG },
        { "HOME", WHY_CONFIG },
        { "*_HOME", WHY_CONFIG },
        { "XDG_*", WHY_CONFIG },
        { "*CONFIG*", WHY_CONFIG },
};
const size_t config_env_names_n = ELEMENTSOF(config_env_names);

const ConfigEnvName *config_env_name_find(const char *name) {
        for (size_t i = 0; i < config_env_names_n; i++)
                if (fnmatch(config_env_names[i].pattern, name, FNM_CASEFOLD) == 0)
                        return &config_env_names[i];
        return NULL;
}

const char *config_key_class_to_string(ConfigKeyClass c) {
        switch (c) {
        case CONFIG_KEY_TABLE:
                return "table";
        case CONFIG_KEY_NEUTRAL:
                return "neutral";
        case CONFIG_KEY_AUTHORITY:
                return "authority";
        case CONFIG_KEY_NARROW_VALUE:
                return "narrowing-value";
        case CONFIG_KEY_SUBSET:
                return "subset";
        case CONFIG_KEY_UNION:
                return "narrowing";
        case CONFIG_KEY_ENV:
                return "env";
        case _CONFIG_KEY_CLASS_MAX:
        case _CONFIG_KEY_CLASS_INVALID:
                break;
        }
        return NULL;
}

static bool rule_matches(const char *rule, const char *const *path, size_t n) {
        size_t i = 0;
        const char *s = rule;
        for (;;) {
                size_t len = strcspn(s, ".");
                if (i >= n)
                        return false;
                bool star = len == 1 && s[0] == '*';
                if (!star && (strlen(path[i]) != len || memcmp(path[i], s, len) != 0))
                        return false;
                i++;
                s += len;
                if (*s == '\0')
                        return i == n;
                s++;
        }
}

const ConfigKeyRule *config_key_rule(const char *const *path, size_t n) {
        for (size_t i = 0; i < config_key_rules_n; i++)
                if (rule_matches(config_key_rules[i].path, path, n))
                        return &config_key_rules[i];
        return NULL;
}

size_t config_key_children(const char *parent, const char **ret, size_t max) {
        size_t n = 0, plen = strlen(parent);
        for (size_t i = 0; i < config_key_rules_n && n + 1 < max; i++) {
                const char *path = config_key_rules[i].path, *rest;
                if (plen == 0)
                        rest = path;
                else if (strncmp(path, parent, plen) == 0 && path[plen] == '.')
                        rest = path + plen + 1;
                else
                        continue;
                if (strchr(rest, '.') || streq(rest, "*"))
                        continue;
                ret[n++] = rest;
        }
        ret[n] = NULL;
        return n;
}

void config_widenings_done(ConfigWidenings *w) {
        for (size_t i = 0; i < w->n; i++)
                free(w->items[i].key);
        free(w->items);
        *w = (ConfigWidenings){};
}

/* ---- entries ------------------------------------------------------------ */

enum {
        VOL_RO = 1 << 0,
        VOL_RW = 1 << 1,
        VOL_Z_SHARED = 1 << 2,
        VOL_Z_PRIVATE = 1 << 3,
        VOL_BAD = 1 << 4,
};

static unsigned volume_mode(const TomlValue *t) {
        const TomlEntry *m = toml_table_get(t, "mode");
        if (!m)
                return 0;
        if (m->value->type != TOML_STRING)
                return VOL_BAD;
        unsigned bits = 0;
        for (const char *s = m->value->str.s; *s;) {
                size_t n = strcspn(s, ",");
                if (n == 2 && memcmp(s, "ro", 2) == 0)
                        bits |= VOL_RO;
                else if (n == 2 && memcmp(s, "rw", 2) == 0)
                        bits |= VOL_RW;
                else if (n == 1 && s[0] == 'z')
                        bits |= VOL_Z_SHARED;
                else if (n == 1 && s[0] == 'Z')
                        bits |= VOL_Z_PRIVATE;
                else
                        bits |= VOL_BAD;
                s += n;
                if (*s == ',')
                        s++;
        }
        return bits;
}

static bool same_string_key(const TomlValue *a, const TomlValue *b, const char *key) {
        const TomlEntry *x = toml_table_get(a, key), *y = toml_table_get(b, key);
        return x && y && toml_value_equal(x->value, y->value);
}

/* Does the trusted entry t cover the workspace's entry w? */
static bool entry_covered(ConfigEntryKind kind, const TomlValue *w, const TomlValue *t) {
        switch (kind) {
        case CONFIG_ENTRY_VALUE:
                return toml_value_equal(w, t);
        case CONFIG_ENTRY_CIDR: {
                if (w->type != TOML_STRING || t->type != TOML_STRING)
                        return false;
                Cidr a, b;
                const char *why;
                if (cidr_parse(w->str.s, &a, &why) < 0 || cidr_parse(t->str.s, &b, &why) < 0)
                        return toml_value_equal(w, t);
                return a.family == b.family && a.prefixlen == b.prefixlen && memcmp(a.addr, b.addr, 16) == 0;
        }
        case CONFIG_ENTRY_VOLUME: {
                if (w->type != TOML_TABLE || t->type != TOML_TABLE)
                        return false;
                for (size_t i = 0; i < w->table.n; i++) {
                        const char *k = w->table.entries[i].key;
                        if (!streq(k, "host") && !streq(k, "container") && !streq(k, "mode"))
                                return false;
                }
                if (!same_string_key(w, t, "host") || !same_string_key(w, t, "container"))
                        return false;
                unsigned wm = volume_mode(w), tm = volume_mode(t);
                if ((wm | tm) & VOL_BAD)
                        return false;
                /* The same labels or fewer (a relabel changes the host's
                 * files), and read-only unless the trusted entry writes. */
                unsigned labels = VOL_Z_SHARED | VOL_Z_PRIVATE;
                if ((wm & labels) & ~(tm & labels))
                        return false;
                return (wm & VOL_RO) || !(tm & VOL_RO);
        }
        case _CONFIG_ENTRY_KIND_MAX:
        case _CONFIG_ENTRY_KIND_INVALID:
                break;
        }
        return false;
}

/* ---- the walk ----------------------------------------------------------- */

typedef struct Walk {
        ConfigWidenings *out;
        const char *path[CONFIG_DEPTH_MAX + 1];
        size_t depth;
} Walk;

static int widen(Walk *w, const char *key, TomlPos pos, const TomlValue *value, const TomlValue *trusted,
                 const ConfigKeyRule *rule, const char *why) {
        ConfigWidening *n = realloc(w->out->items, (w->out->n + 1) * sizeof(ConfigWidening));
        if (!n)
                return -ENOMEM;
        w->out->items = n;
        char *k = strdup(key);
        if (!k)
                return -ENOMEM;
        n[w->out->n++] = (ConfigWidening){
                .key = k, .pos = pos, .value = value, .trusted = trusted, .rule = rule, .why = why ?: rule->why
        };
        return 0;
}

static int walk_table(Walk *w, const TomlValue *tbl, const ConfigNode *trusted, const char *name);

static int walk_entry(Walk *w, const TomlEntry *e, const ConfigNode *tn, const char *parent) {
        const ConfigKeyRule *rule = config_key_rule(w->path, w->depth);
        const TomlValue *v = e->value;
        const TomlValue *tv = tn ? tn->value : NULL;
        _cleanup_free_ char *name = config_key_path(parent, e->key);
        if (!name)
                return -ENOMEM;
        if (!rule)
                return 0; /* unknown: validation says so */

        switch (rule->cls) {
        case CONFIG_KEY_TABLE:
                return v->type == TOML_TABLE ? walk_table(w, v, tn, name) : 0;
        case CONFIG_KEY_NEUTRAL:
        case CONFIG_KEY_UNION:
                return 0;
        case CONFIG_KEY_AUTHORITY:
                if (tv && toml_value_equal(v, tv))
                        return 0;
                return widen(w, name, v->pos, v, tv, rule, NULL);
        case CONFIG_KEY_NARROW_VALUE:
                if (rule->narrow_str) {
                        if (v->type != TOML_STRING)
                                return 0; /* validation names the type */
                        if (streq(v->str.s, rule->narrow_str) && strlen(v->str.s) == v->str.len)
                                return 0;
                } else {
                        if (v->type != TOML_BOOL)
                                return 0;
                        if (v->boolean == rule->narrow_bool)
                                return 0;
                }
                if (tv && toml_value_equal(v, tv))
                        return 0;
                return widen(w, name, v->pos, v, tv, rule, NULL);
        case CONFIG_KEY_ENV: {
                if (v->type != TOML_STRING || (tv && toml_value_equal(v, tv)))
                        return 0;
                /* A host variable copied in; else a literal, which acts
                 * inside only, unless it takes the place of the person's
                 * own value (their key swapped for another's) or names a
                 * variable that chooses accounts, endpoints or start-up
                 * code. */
                const ConfigEnvName *known = NULL;
                const char *why = NULL;
                if (startswith(v->str.s, "env:") || startswith(v->str.s, "env?:"))
                        why = "it copies a host variable (often a secret) into the sandbox";
                else if (tv)
                        why = "your own files set this variable: the workspace's value would replace yours";
                else if ((known = config_env_name_find(e->key)))
                        why = known->why;
                else
                        return 0;
                return widen(w, name, v->pos, v, tv, rule, why);
        }
        case CONFIG_KEY_SUBSET:
                if (v->type != TOML_ARRAY)
                        return 0;
                for (size_t i = 0; i < v->array.n; i++) {
                        const TomlValue *x = v->array.items[i];
                        bool covered = false;
                        for (size_t j = 0; tv && tv->type == TOML_ARRAY && !covered && j < tv->array.n; j++)
                                covered = entry_covered(rule->entry, x, tv->array.items[j]);
                        if (covered)
                                continue;
                        StrBuf b = STRBUF_INIT;
                        strbuf_printf(&b, "%s[%zu]", name, i);
                        _cleanup_free_ char *en = strbuf_steal(&b);
                        if (!en)
                                return -ENOMEM;
                        int r = widen(w, en, x->pos, x, tv, rule, NULL);
                        if (r < 0)
                                return r;
                }
                return 0;
        case _CONFIG_KEY_CLASS_MAX:
        case _CONFIG_KEY_CLASS_INVALID:
                break;
        }
        return 0;
}

static int walk_table(Walk *w, const TomlValue *tbl, const ConfigNode *trusted, const char *name) {
        if (w->depth >= ELEMENTSOF(w->path))
                return 0; /* deeper than any key of the schema */
        for (size_t i = 0; i < tbl->table.n; i++) {
                const TomlEntry *e = &tbl->table.entries[i];
                if (strlen(e->key) != e->key_len)
                        continue; /* a NUL in a key: the merge refuses it */
                w->path[w->depth++] = e->key;
                int r = walk_entry(w, e, config_node_get(trusted, e->key), name);
                w->depth--;
                if (r < 0)
                        return r;
        }
        return 0;
}

int config_authority_check(const TomlValue *root, const ConfigNode *trusted, ConfigWidenings *ret) {
        Walk w = { .out = ret };
        int r = walk_table(&w, root, trusted, "");
        if (r < 0)
                config_widenings_done(ret);
        return r;
}
