/* SPDX-License-Identifier: MIT */
/* The configuration (config.h): the user's paths, loading and merging the
 * files, validating the top-level sections, and the public calls. Its
 * parts are listed in config-internal.h. */
#include <linux/magic.h>
#include <sys/statfs.h>

#include "config-internal.h"
#include "presets.h"

int config_home(char **ret) {
        const char *h = getenv("HOME");
        if (h && *h) {
                if (!path_is_absolute(h))
                        return -EINVAL;
        } else {
                struct passwd *pw = getpwuid(getuid());
                if (!pw || !pw->pw_dir || !path_is_absolute(pw->pw_dir))
                        return -ENOENT;
                h = pw->pw_dir;
        }
        char *s = strdup(h);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int config_user_path(char **ret) {
        const char *x = getenv("XDG_CONFIG_HOME");
        _cleanup_free_ char *home = NULL;
        char *p;

        /* The XDG base directory spec says relative values are invalid and
         * must be ignored. */
        if (x && path_is_absolute(x))
                p = path_join(x, "lazaret/config.toml");
        else {
                int r = config_home(&home);
                if (r < 0)
                        return r;
                p = path_join(home, ".config/lazaret/config.toml");
        }
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

int config_workspace(const char *arg, char **ret) {
        _cleanup_free_ char *cwd = NULL;
        if (!arg) {
                cwd = getcwd(NULL, 0);
                if (!cwd)
                        return negative_errno();
                arg = cwd;
        }
        _cleanup_free_ char *c = NULL;
        int r = path_canonicalize(arg, &c);
        if (r < 0)
                return r;
        struct stat st;
        if (stat(c, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- loading and merging ----------------------------------------------- */

static void node_done(ConfigNode *n) {
        for (size_t i = 0; i < n->n_children; i++)
                node_done(&n->children[i]);
        free(n->children);
        n->children = NULL;
        n->n_children = 0;
}

typedef struct MergePath {
        const char *key[CONFIG_DEPTH_MAX + 1];
        size_t n;
} MergePath;

static bool merge_is_union(const MergePath *mp) {
        const ConfigKeyRule *rule = config_key_rule(mp->key, mp->n);
        return rule && rule->cls == CONFIG_KEY_UNION;
}

static int merge_table(ConfigNode *dst, const TomlValue *tbl, const ConfigSource *src, MergePath *mp, ConfigDiags *d) {
        dst->src = src;
        dst->value = tbl;
        for (size_t i = 0; i < tbl->table.n; i++) {
                const TomlEntry *e = &tbl->table.entries[i];
                if (strlen(e->key) != e->key_len) {
                        /* "image\u0000x" must not pass for "image". */
                        _cleanup_free_ char *k = config_quoted(e->key, e->key_len);
                        ERR(d, src->path, e->key_pos, "key %s contains a NUL character", k ?: "?");
                        continue;
                }
                if (mp->n >= ELEMENTSOF(mp->key))
                        continue; /* deeper than the parser lets a file go */
                mp->key[mp->n++] = e->key;
                int r = 0;
                ConfigNode *c = (ConfigNode *) config_node_get(dst, e->key);

                if (!c) {
                        ConfigNode *n = realloc(dst->children, (dst->n_children + 1) * sizeof(ConfigNode));
                        if (!n)
                                return -ENOMEM;
                        dst->children = n;
                        c = &dst->children[dst->n_children++];
                        *c = (ConfigNode){ .key = e->key, .src = src, .key_pos = e->key_pos, .value = e->value };
                        if (e->value->type == TOML_TABLE)
                                r = merge_table(c, e->value, src, mp, d);
                        mp->n--;
                        if (r < 0)
                                return r;
                        continue;
                }

                bool was_table = c->value->type == TOML_TABLE, is_table = e->value->type == TOML_TABLE;
                bool both_arrays = c->value->type == TOML_ARRAY && e->value->type == TOML_ARRAY;
                if (was_table && is_table) {
                        c->key_pos = e->key_pos;
                        r = merge_table(c, e->value, src, mp, d);
                } else if (was_table != is_table) {
                        _cleanup_free_ char *k = config_quoted(e->key, e->key_len);
                        ERR(d, src->path, e->key_pos,
                            "%s is %s here but %s in %s:%u:%u; a table and a value cannot be merged", k ?: "?",
                            toml_type_with_article(e->value->type), toml_type_with_article(c->value->type),
                            c->src->path, c->key_pos.line, c->key_pos.col);
                } else if (both_arrays && !src->trusted && merge_is_union(mp)) {
                        /* An untrusted file adds to a list that only
                         * narrows; it never takes entries away. */
                        c->extra = e->value;
                        c->extra_src = src;
                } else {
                        /* Scalars and arrays: the higher-precedence file
                         * wins whole; what an untrusted file added to a
                         * narrowing list stays. */
                        if (both_arrays && !c->src->trusted && !c->extra && merge_is_union(mp)) {
                                c->extra = c->value;
                                c->extra_src = c->src;
                        }
                        c->src = src;
                        c->key_pos = e->key_pos;
                        c->value = e->value;
                }
                mp->n--;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Parse one file's bytes and add it to the sources. Returns 1, -EINVAL
 * after reporting a problem, or -ENOMEM. */
static int add_source(Config *c, const char *path, const char *data, size_t size, bool trusted, ConfigDiags *d) {
        TomlLimits lim = { .max_depth = CONFIG_DEPTH_MAX, .max_string = CONFIG_STRING_MAX };
        TomlError te = {};
        TomlValue *root = NULL;
        int r = toml_parse(data, size, &lim, &root, &te);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                ERR(d, path, te.pos, "%s", te.message);
                return -EINVAL;
        }

        ConfigSource *n = realloc(c->sources, (c->n_sources + 1) * sizeof(ConfigSource));
        char *p = strdup(path);
        if (!n || !p) {
                if (n)
                        c->sources = n;
                free(p);
                toml_free(root);
                return -ENOMEM;
        }
        c->sources = n;
        c->sources[c->n_sources++] = (ConfigSource){ .path = p, .root = root, .trusted = trusted };
        return 1;
}

/* Read and parse one of the person's own files. Returns 1 if loaded, 0 if
 * it does not exist and may be skipped, -EINVAL after reporting a problem,
 * -ENOMEM. */
static int load_source(Config *c, const char *path, bool must_exist, ConfigDiags *d) {
        static const TomlPos top = { 1, 1 };
        _cleanup_free_ char *data = NULL;
        size_t size = 0;

        int r = read_file_capped(path, CONFIG_FILE_MAX, &data, &size);
        if (r == -ENOENT && !must_exist)
                return 0;
        if (r == -EFBIG) {
                ERR(d, path, top, "file is larger than %u bytes; a configuration file is never this big",
                    CONFIG_FILE_MAX);
                return -EINVAL;
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                ERR(d, path, top, "cannot read: %s", strerror(-r));
                return -EINVAL;
        }
        return add_source(c, path, data, size, true, d);
}

/* Read the workspace's lazaret.toml (workspace-trust.h says how) and find
 * whether its bytes are trusted. Returns 1 if loaded, 0 if there is none,
 * -EINVAL after reporting a problem, -ENOMEM. */
static int load_workspace_source(Config *c, const ConfigLoadOptions *o, ConfigDiags *d) {
        static const TomlPos top = { 1, 1 };
        ConfigWorkspaceFile *w = &c->wsfile;
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        const char *why = NULL;
        uid_t owner = 0;

        int r = wstrust_read_workspace_file(c->workspace, geteuid(), &data, &size, &owner, &why);
        if (r == -ENOENT)
                return 0;
        if (r == -ENOMEM)
                return r;
        if (r == -EPERM) {
                ERR(d, w->path, top,
                    "owned by uid %u, not by you (uid %u): a workspace file must be your own; "
                    "remove it, or take it over only after reading it",
                    (unsigned) owner, (unsigned) geteuid());
                return -EINVAL;
        }
        if (r < 0) {
                if (r == -ELOOP || r == -EISDIR || r == -EINVAL || r == -EFBIG)
                        ERR(d, w->path, top, "%s", why);
                else
                        ERR(d, w->path, top, "%s: %s", why, strerror(-r));
                return -EINVAL;
        }
        w->exists = true;
        r = wstrust_sha256_hex(data, size, w->sha256);
        if (r < 0)
                return r;

        if (o->trust_workspace)
                w->trust = CONFIG_TRUST_TRUSTED;
        else {
                r = wstrust_store_path(c->home, &w->store);
                if (r < 0)
                        return r;
                _cleanup_(wstrust_records_done) WsTrustRecords recs = {};
                unsigned line = 0;
                r = wstrust_load(w->store, &recs, &line);
                if (r == -ENOMEM)
                        return r;
                if (r == -EBADMSG) {
                        ERR(d, w->store, ((TomlPos){ line, 1 }),
                            "not a trust record; every line is '<sha256> <time> <path>': remove the line, or the "
                            "file to trust nothing");
                        return -EINVAL;
                }
                if (r < 0) {
                        ERR(d, w->store, top, "cannot read the trusted workspace files: %s", strerror(-r));
                        return -EINVAL;
                }
                const WsTrustRecord *rec = wstrust_find(&recs, w->path);
                w->trust = !rec                            ? CONFIG_TRUST_UNTRUSTED
                           : streq(rec->sha256, w->sha256) ? CONFIG_TRUST_TRUSTED
                                                           : CONFIG_TRUST_CHANGED;
                if (rec)
                        w->trusted_when = rec->when;
        }
        return add_source(c, w->path, data, size, w->trust == CONFIG_TRUST_TRUSTED, d);
}

/* Built-in presets: for each profile whose `preset` a trusted file names
 * (the last one that does), the preset's keys as a source of its own,
 * "preset NAME", put first: the lowest layer, which every file sets over.
 * An untrusted workspace file's `preset` is not followed here; the
 * authority check refuses it when it differs. Returns 0, -EINVAL after
 * reporting a problem, or -ENOMEM. */
static int add_presets(Config *c, ConfigDiags *d) {
        const size_t n_files = c->n_sources;
        size_t n_found = 0;
        struct {
                const char *profile;
                const Preset *preset;
        } found[CONFIG_LIST_MAX];
        bool bad = false;
        for (size_t i = 0; i < n_files; i++) {
                const ConfigSource *src = &c->sources[i];
                const TomlEntry *pt = src->trusted ? toml_table_get(src->root, "profiles") : NULL;
                const TomlValue *profiles = pt ? pt->value : NULL;
                for (size_t k = 0; profiles && profiles->type == TOML_TABLE && k < profiles->table.n; k++) {
                        const TomlEntry *pe = &profiles->table.entries[k];
                        const TomlEntry *ve =
                                pe->value->type == TOML_TABLE ? toml_table_get(pe->value, "preset") : NULL;
                        const TomlValue *v = ve ? ve->value : NULL;
                        if (!v || !config_profile_name_valid(pe->key))
                                continue;
                        const Preset *ps = NULL;
                        if (v->type != TOML_STRING)
                                ERR(d, src->path, v->pos, "profiles.%s.preset is %s; it names a built-in preset (%s)",
                                    pe->key, toml_type_with_article(v->type), preset_names);
                        else if (!(ps = preset_find(v->str.s)) || strlen(v->str.s) != v->str.len) {
                                _cleanup_free_ char *q = config_quoted(v->str.s, v->str.len);
                                ERR(d, src->path, v->pos,
                                    "profiles.%s.preset: %s is not a built-in preset; the presets are %s (a preset "
                                    "is never a path)",
                                    pe->key, q ?: "?", preset_names);
                                ps = NULL;
                        }
                        if (!ps) {
                                bad = true;
                                continue;
                        }
                        size_t j;
                        for (j = 0; j < n_found && !streq(found[j].profile, pe->key); j++)
                                ;
                        if (j == n_found) {
                                if (n_found == ELEMENTSOF(found))
                                        continue;
                                n_found++;
                        }
                        found[j].profile = pe->key;
                        found[j].preset = ps;
                }
        }
        if (bad)
                return -EINVAL;
        for (size_t j = 0; j < n_found; j++) {
                StrBuf text = STRBUF_INIT, name = STRBUF_INIT;
                strbuf_printf(&text, "[profiles.%s]\n%s", found[j].profile, found[j].preset->body);
                strbuf_printf(&name, "preset %s", found[j].preset->name);
                _cleanup_free_ char *t = strbuf_steal(&text), *n = strbuf_steal(&name);
                if (!t || !n)
                        return -ENOMEM;
                int r = add_source(c, n, t, strlen(t), true, d);
                if (r < 0)
                        return r;
                /* First: the lowest precedence. */
                ConfigSource last = c->sources[c->n_sources - 1];
                memmove(&c->sources[1], &c->sources[0], (c->n_sources - 1) * sizeof(ConfigSource));
                c->sources[0] = last;
        }
        return 0;
}

/* ---- validation --------------------------------------------------------- */

static void validate_storage(Validator *v, const ConfigNode *t, const char *top_file) {
        static const TomlPos top = { 1, 1 };
        if (!t) {
                ERR(v->d, top_file, top, "[storage] section is required (it sets data_root)");
                return;
        }
        if (!config_want_type(v, t, "storage", TOML_TABLE))
                return;
        config_check_unknown(v, t, "[storage]", "storage");
        const ConfigNode *n = config_want_child(v, t, "data_root", "storage.data_root", NULL, top);
        if (!n || !config_string_ok(v, n, "storage.data_root"))
                return;
        ExpandContext ctx = { .home = v->c->home };
        if (config_host_path(v, n->src->path, n->value->pos, "storage.data_root", n->value->str.s, &ctx,
                             &v->c->data_root) == 0)
                v->data_root_ok = true;
}

/* runtime.memory_cgroup: a directory of the cgroup v1 memory hierarchy
 * the user may make cgroups in (the native backend makes each sandbox's
 * there and limits it to memory_limit). */
static void validate_memory_cgroup(Validator *v, const ConfigNode *t) {
        const ConfigNode *n = config_node_get(t, "memory_cgroup");
        if (!n || !config_string_ok(v, n, "runtime.memory_cgroup"))
                return;
        ExpandContext ctx = { .home = v->c->home };
        _cleanup_free_ char *path = NULL, *q = NULL;
        if (config_host_path(v, n->src->path, n->value->pos, "runtime.memory_cgroup", n->value->str.s, &ctx, &path) < 0)
                return;
        q = config_quoted(path, strlen(path));
        struct statfs sf;
        _cleanup_free_ char *limit = path_join(path, "memory.limit_in_bytes");
        if (!limit)
                return;
        if (statfs(path, &sf) < 0 || (sf.f_type != CGROUP_SUPER_MAGIC && sf.f_type != CGROUP2_SUPER_MAGIC)) {
                ERR(v->d, n->src->path, n->value->pos,
                    "runtime.memory_cgroup: %s is not a directory of a cgroup file system; name a directory of the "
                    "memory hierarchy you may write (scripts/setup.sh --memory-cgroup USER makes one) or remove the "
                    "key",
                    q ?: "?");
                return;
        }
        if (sf.f_type == CGROUP2_SUPER_MAGIC || access(limit, F_OK) < 0) {
                ERR(v->d, n->src->path, n->value->pos,
                    "runtime.memory_cgroup: %s is not in a cgroup v1 memory hierarchy (no memory.limit_in_bytes); "
                    "cgroup v2 is not supported yet: remove the key (memory_limit is then watched by the coordinator)",
                    q ?: "?");
                return;
        }
        if (access(path, W_OK | X_OK) < 0) {
                ERR(v->d, n->src->path, n->value->pos,
                    "runtime.memory_cgroup: %s: you may not make cgroups in it (%s); have root give it to you "
                    "(scripts/setup.sh --memory-cgroup USER) or remove the key",
                    q ?: "?", strerror(errno));
                return;
        }
        v->c->memory_cgroup = TAKE_PTR(path);
}

int config_memory_cgroup_find(uid_t uid, const char *user, char **ret_path, char **ret_why) {
        const char *root = CONFIG_MEMORY_CGROUP_ROOT;
        _cleanup_free_ char *name = NULL, *path = NULL, *limit = NULL, *fix = NULL;
        struct statfs sf;
        struct stat st;

        *ret_path = NULL;
        *ret_why = NULL;
        if (user && asprintf(&name, "lazaret-%s", user) < 0)
                return -ENOMEM;
        if (!user && asprintf(&name, "lazaret-%u", (unsigned) uid) < 0)
                return -ENOMEM;
        path = path_join(root, name);
        if (!path || asprintf(&fix, "sudo scripts/setup.sh --memory-cgroup %s", user ? user : "USER") < 0)
                return -ENOMEM;
        limit = path_join(root, "memory.limit_in_bytes");
        if (!limit)
                return -ENOMEM;
        int r, e = lstat(path, &st) < 0 ? errno : 0;
        if (statfs(root, &sf) < 0 || sf.f_type != CGROUP_SUPER_MAGIC || access(limit, F_OK) < 0)
                r = asprintf(ret_why,
                             "this host has no cgroup v1 memory hierarchy at %s (cgroup v2 is not supported yet)",
                             root);
        else if (e == ENOENT)
                r = asprintf(ret_why, "there is no %s (%s makes it; a reboot removes it)", path, fix);
        else if (e != 0)
                r = asprintf(ret_why, "cannot look at %s: %s", path, strerror(e));
        else if (!S_ISDIR(st.st_mode))
                r = asprintf(ret_why, "%s is no directory", path);
        else if (st.st_uid != uid)
                r = asprintf(ret_why, "%s is not yours (its owner is uid %u): %s gives it to you", path,
                             (unsigned) st.st_uid, fix);
        else if (statfs(path, &sf) < 0 || sf.f_type != CGROUP_SUPER_MAGIC)
                r = asprintf(ret_why, "%s is not in the cgroup file system", path);
        else if (access(path, W_OK | X_OK) < 0)
                r = asprintf(ret_why, "you may not make cgroups in %s (%s): %s gives it to you", path, strerror(errno),
                             fix);
        else {
                *ret_path = TAKE_PTR(path);
                return 1;
        }
        return r < 0 ? -ENOMEM : 0;
}

/* runtime.memory_cgroup unset: the directory scripts/setup.sh gives the
 * user is used where it is there (issue 42: setup made it and nothing
 * named it); why not is kept for the messages that need one. */
static void find_memory_cgroup(Validator *v) {
        const struct passwd *pw = getpwuid(getuid());
        int r = config_memory_cgroup_find(getuid(), pw ? pw->pw_name : NULL, &v->c->memory_cgroup,
                                          &v->c->memory_cgroup_why);
        if (r > 0)
                v->c->memory_cgroup_found = true;
}

/* [runtime] (optional): runsc, an executable file named by an absolute
 * path (a leading ~ expanded); memory_cgroup. */
static void validate_runtime(Validator *v, const ConfigNode *t) {
        if (!t || !config_node_get(t, "memory_cgroup"))
                find_memory_cgroup(v);
        if (!t || !config_want_type(v, t, "runtime", TOML_TABLE))
                return;
        config_check_unknown(v, t, "[runtime]", "runtime");
        validate_memory_cgroup(v, t);
        const ConfigNode *n = config_node_get(t, "runsc");
        if (!n || !config_string_ok(v, n, "runtime.runsc"))
                return;
        ExpandContext ctx = { .home = v->c->home };
        _cleanup_free_ char *path = NULL;
        if (config_host_path(v, n->src->path, n->value->pos, "runtime.runsc", n->value->str.s, &ctx, &path) < 0)
                return;
        struct stat st;
        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || access(path, X_OK) < 0) {
                _cleanup_free_ char *q = config_quoted(path, strlen(path));
                ERR(v->d, n->src->path, n->value->pos,
                    "runtime.runsc: %s is not an executable file; name gVisor's runsc (for example "
                    "/usr/local/bin/runsc, which 'make deps' installs) or remove the key to use the runsc on PATH",
                    q ?: "?");
                return;
        }
        v->c->runsc = TAKE_PTR(path);
}

/* A list of path patterns and what an untrusted workspace file added to
 * it; each entry checked with its position. */
static int pattern_list(Validator *v, const ConfigNode *n, const char *name, char ***ret, size_t *ret_n) {
        const ConfigNode parts[2] = {
                *n,
                { .key = n->key, .src = n->extra_src, .key_pos = n->key_pos, .value = n->extra },
        };
        for (size_t k = 0; k < ELEMENTSOF(parts); k++) {
                const ConfigNode *x = &parts[k];
                if (!x->value)
                        continue;
                bool ok = true;
                size_t cnt = 0;
                char **list = config_string_list(v, x, name, &cnt, &ok);
                if (!list)
                        continue;
                strv_free_n(list, cnt);
                for (size_t i = 0; i < x->value->array.n; i++) {
                        const TomlValue *e = x->value->array.items[i];
                        if (e->type != TOML_STRING || e->str.len == 0 || strlen(e->str.s) != e->str.len)
                                continue;
                        const char *why = path_pattern_problem(e->str.s);
                        if (why) {
                                _cleanup_free_ char *q = config_quoted(e->str.s, e->str.len);
                                ERR(v->d, x->src->path, e->pos, "%s[%zu]: %s is not a path pattern: %s", name, i,
                                    q ?: "?", why);
                                continue;
                        }
                        if (*ret_n >= CONFIG_LIST_MAX * 2u)
                                continue;
                        char **m = realloc(*ret, (*ret_n + 2) * sizeof(char *));
                        if (!m)
                                return -ENOMEM;
                        *ret = m;
                        if (!(m[*ret_n] = strdup(e->str.s)))
                                return -ENOMEM;
                        m[++*ret_n] = NULL;
                }
        }
        return 0;
}

static int validate_workspace(Validator *v, const ConfigNode *t) {
        if (!t)
                return 0;
        if (!config_want_type(v, t, "workspace", TOML_TABLE))
                return 0;
        config_check_unknown(v, t, "[workspace]", "workspace");
        const ConfigNode *n = config_node_get(t, "protect");
        int r = n ? pattern_list(v, n, "workspace.protect", &v->c->protect, &v->c->n_protect) : 0;
        if (r < 0)
                return r;
        n = config_node_get(t, "mask");
        return n ? pattern_list(v, n, "workspace.mask", &v->c->mask, &v->c->n_mask) : 0;
}

static int validate_escalation(Validator *v, const ConfigNode *t, const char *top_file) {
        static const TomlPos top = { 1, 1 };
        if (!t) {
                ERR(v->d, top_file, top, "[escalation] section is required (it sets enabled and socket_dir)");
                return 0;
        }
        if (!config_want_type(v, t, "escalation", TOML_TABLE))
                return 0;
        config_check_unknown(v, t, "[escalation]", "escalation");
        const ConfigNode *n = config_want_child(v, t, "enabled", "escalation.enabled", NULL, top);
        if (n && config_want_type(v, n, "escalation.enabled", TOML_BOOL))
                v->c->escalation_enabled = n->value->boolean;
        n = config_want_child(v, t, "socket_dir", "escalation.socket_dir", NULL, top);
        if (n && config_string_ok(v, n, "escalation.socket_dir")) {
                ExpandContext ctx = { .home = v->c->home };
                (void) config_host_path(v, n->src->path, n->value->pos, "escalation.socket_dir", n->value->str.s, &ctx,
                                        &v->c->socket_dir);
        }
        v->c->escalation_time_limit = config_bounded_int(
                v, config_node_get(t, "time_limit"), "escalation.time_limit", "seconds", 1, CONFIG_TIME_LIMIT_MAX,
                CONFIG_TIME_LIMIT_DEFAULT, "how long an approved host command may run before it is ended");
        v->c->escalation_output_max =
                config_bounded_int(v, config_node_get(t, "output_limit"), "escalation.output_limit", "bytes", 1024,
                                   CONFIG_OUTPUT_LIMIT_MAX, CONFIG_OUTPUT_LIMIT_DEFAULT,
                                   "bytes of a host command's stdout, and again of its stderr, that "
                                   "reach the sandbox");
        n = config_node_get(t, "auto_approve");
        if (n) {
                bool ok = true;
                v->c->auto_approve = config_string_list(v, n, "escalation.auto_approve", &v->c->n_auto_approve, &ok);
                if (!v->c->auto_approve)
                        return 0;
                v->c->auto_rules = calloc(v->c->n_auto_approve + 1, sizeof(AutoApproveRule));
                if (!v->c->auto_rules)
                        return -ENOMEM;
                /* string_list skipped bad entries: walk the array for positions. */
                for (size_t i = 0; i < n->value->array.n; i++) {
                        const TomlValue *e = n->value->array.items[i];
                        if (e->type != TOML_STRING || e->str.len == 0 || strlen(e->str.s) != e->str.len)
                                continue;
                        _cleanup_free_ char *why = NULL, *q = config_quoted(e->str.s, e->str.len);
                        AutoApproveRule rule;
                        int r = autoapprove_rule_parse(e->str.s, AUTOAPPROVE_SEARCH_PATH, &rule, &why);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                ERR(v->d, n->src->path, e->pos, "escalation.auto_approve[%zu]: %s %s", i, q ?: "?",
                                    why ?: "is not valid");
                        else
                                v->c->auto_rules[v->c->n_auto_rules++] = rule;
                }
        }
        return 0;
}

static int validate(Validator *v) {
        static const TomlPos top = { 1, 1 };
        const ConfigNode *root = &v->c->root;
        const char *top_file = v->c->sources[v->c->n_sources - 1].path;

        config_check_unknown(v, root, "the top level", "");
        validate_storage(v, config_node_get(root, "storage"), top_file);
        int r = config_validate_network(v, config_node_get(root, "network"), top_file);
        if (r < 0)
                return r;
        r = validate_escalation(v, config_node_get(root, "escalation"), top_file);
        if (r < 0)
                return r;
        validate_runtime(v, config_node_get(root, "runtime"));
        r = validate_workspace(v, config_node_get(root, "workspace"));
        if (r < 0)
                return r;

        const ConfigNode *profiles = config_node_get(root, "profiles");
        if (!profiles) {
                ERR(v->d, top_file, top, "no profiles: add at least one [profiles.NAME] table with an image");
                return 0;
        }
        if (!config_want_type(v, profiles, "profiles", TOML_TABLE))
                return 0;
        if (profiles->n_children == 0) {
                KEY_ERR(v, profiles, "no profiles: add at least one [profiles.NAME] table with an image");
                return 0;
        }
        if (profiles->n_children > CONFIG_PROFILES_MAX) {
                KEY_ERR(v, profiles, "%zu profiles; at most %u are allowed", profiles->n_children, CONFIG_PROFILES_MAX);
                return 0;
        }
        v->c->profiles = calloc(profiles->n_children, sizeof(ConfigProfile));
        if (!v->c->profiles)
                return -ENOMEM;
        for (size_t i = 0; i < profiles->n_children; i++) {
                r = config_validate_profile(v, &profiles->children[i]);
                if (r < 0)
                        return r;
        }
        const ConfigNode *dp = config_node_get(root, "default_profile");
        if (dp && config_want_type(v, dp, "default_profile", TOML_STRING)) {
                if (!config_node_get(profiles, dp->value->str.s)) {
                        StrBuf b = STRBUF_INIT;
                        for (size_t i = 0; i < profiles->n_children; i++)
                                strbuf_printf(&b, "%s%s", i ? ", " : "", profiles->children[i].key);
                        _cleanup_free_ char *names = strbuf_steal(&b);
                        KEY_ERR(v, dp, "default_profile = \"%s\" names no profile (configured: %s)", dp->value->str.s,
                                names ?: "?");
                } else if (!(v->c->default_profile = strdup(dp->value->str.s)))
                        return -ENOMEM;
        }
        return 0;
}

/* ---- public ------------------------------------------------------------- */

static void profile_done(ConfigProfile *p) {
        free(p->name);
        strv_free_n(p->command, p->n_command);
        free(p->image);
        strv_free_n(p->persistent_dirs, p->n_persistent_dirs);
        strv_free_n(p->ca_files, p->n_ca_files);
        free(p->allow_egress_name);
        free(p->domains);
        netpolicy_done(&p->net);
        free(p->net_canonical);
        for (size_t i = 0; i < p->n_env; i++) {
                free(p->env[i].name);
                free(p->env[i].value);
                free(p->env[i].host_var);
        }
        free(p->env);
        for (size_t i = 0; i < p->n_volumes; i++) {
                free(p->volumes[i].host);
                free(p->volumes[i].host_given);
                free(p->volumes[i].container);
        }
        free(p->volumes);
        free(p->repo_root);
        free(p->workspace_subdir);
        free(p->profile_dir);
        free(p->domain_dir);
}

void config_drop_documents(Config *c) {
        if (!c)
                return;
        node_done(&c->root);
        c->root = (ConfigNode){};
        for (size_t i = 0; i < c->n_sources; i++)
                c->sources[i].root = toml_free(c->sources[i].root);
}

Config *config_free(Config *c) {
        if (!c)
                return NULL;
        node_done(&c->root);
        for (size_t i = 0; i < c->n_sources; i++) {
                free(c->sources[i].path);
                toml_free(c->sources[i].root);
        }
        free(c->sources);
        for (size_t i = 0; i < c->n_profiles; i++)
                profile_done(&c->profiles[i]);
        free(c->profiles);
        free(c->workspace);
        free(c->home);
        free(c->default_profile);
        free(c->data_root);
        free(c->resolvers);
        free(c->probe_targets);
        free(c->probe_dns_name);
        free(c->default_domains);
        free(c->probe_domains);
        free(c->probe_domains_where);
        free(c->socket_dir);
        free(c->runsc);
        free(c->memory_cgroup);
        free(c->memory_cgroup_why);
        free(c->agent);
        strv_free_n(c->auto_approve, c->n_auto_approve);
        for (size_t i = 0; i < c->n_auto_rules; i++)
                autoapprove_rule_done(&c->auto_rules[i]);
        free(c->auto_rules);
        strv_free_n(c->protect, c->n_protect);
        strv_free_n(c->mask, c->n_mask);
        free(c->wsfile.path);
        free(c->wsfile.store);
        config_widenings_done(&c->wsfile.widenings);
        free(c);
        return NULL;
}

const char *config_trust_to_string(ConfigTrust t) {
        switch (t) {
        case CONFIG_TRUST_NONE:
                return "none";
        case CONFIG_TRUST_UNTRUSTED:
                return "untrusted";
        case CONFIG_TRUST_CHANGED:
                return "changed";
        case CONFIG_TRUST_TRUSTED:
                return "trusted";
        case CONFIG_TRUST_EXPLICIT:
                return "explicit";
        case _CONFIG_TRUST_MAX:
        case _CONFIG_TRUST_INVALID:
                break;
        }
        return NULL;
}

const ConfigProfile *config_find_profile(const Config *c, const char *name) {
        for (size_t i = 0; i < c->n_profiles; i++)
                if (streq(c->profiles[i].name, name))
                        return &c->profiles[i];
        return NULL;
}

int config_load(const ConfigLoadOptions *o, Config **ret, ConfigDiags *diags) {
        _cleanup_(config_freep) Config *c = calloc(1, sizeof(Config));
        if (!c)
                return -ENOMEM;

        int r = config_workspace(o->workspace, &c->workspace);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                ERR(diags, NULL, (TomlPos){}, "workspace %s: %s", o->workspace ?: "(current directory)", strerror(-r));
                return -ENOTDIR;
        }
        /* --agent NAME: a Domain and a branch of its own for each agent on
         * one workspace and profile (issue 22). */
        if (o->agent) {
                if (!config_profile_name_valid(o->agent)) {
                        ERR(diags, NULL, (TomlPos){},
                            "--agent %.64s: an agent's name is 2 to 32 of a-z, 0-9, '_' and '-' (it names its branch, "
                            "lazaret/agent-NAME)",
                            o->agent);
                        return -EINVAL;
                }
                if (!(c->agent = strdup(o->agent)))
                        return -ENOMEM;
        }
        r = config_home(&c->home);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                ERR(diags, NULL, (TomlPos){},
                    "cannot find the home directory: $HOME is %s and the passwd entry has none",
                    r == -EINVAL ? "not an absolute path" : "unset");
                return r;
        }

        _cleanup_free_ char *user = NULL, *explicit_real = NULL;
        r = config_user_path(&user);
        if (r < 0)
                return r;
        c->wsfile.path = path_join(c->workspace, "lazaret.toml");
        if (!c->wsfile.path)
                return -ENOMEM;
        /* --config naming the workspace file itself: the person chose it. */
        if (o->explicit_path) {
                r = path_canonicalize(o->explicit_path, &explicit_real);
                if (r == -ENOMEM)
                        return r;
        }
        bool ws_explicit = explicit_real && streq(explicit_real, c->wsfile.path);

        bool failed = false;
        r = load_source(c, user, false, diags);
        if (r == -ENOMEM)
                return r;
        failed = failed || r < 0;
        if (ws_explicit)
                c->wsfile.trust = CONFIG_TRUST_EXPLICIT;
        else {
                r = load_workspace_source(c, o, diags);
                if (r == -ENOMEM)
                        return r;
                failed = failed || r < 0;
        }
        /* The same file named twice (e.g. --config pointing at the user
         * file) is read once. */
        if (o->explicit_path &&
            !(c->n_sources > 0 && streq(c->sources[0].path, o->explicit_path) && c->sources[0].trusted)) {
                r = load_source(c, o->explicit_path, true, diags);
                if (r == -ENOMEM)
                        return r;
                failed = failed || r < 0;
        }
        if (failed)
                return -EINVAL;
        if (c->n_sources == 0) {
                ERR(diags, NULL, (TomlPos){},
                    "no configuration found (looked for %s and %s); run 'lazaret init' to write a starter file", user,
                    c->wsfile.path);
                return -ENOENT;
        }

        r = add_presets(c, diags);
        if (r < 0)
                return r;

        /* An untrusted workspace file may only narrow: compare it with what
         * the person's own files say before anything of it is used. */
        size_t before = config_diags_errors(diags);
        const ConfigSource *ws = NULL;
        for (size_t i = 0; i < c->n_sources; i++)
                if (c->wsfile.exists && streq(c->sources[i].path, c->wsfile.path))
                        ws = &c->sources[i];
        if (ws && (!ws->trusted || o->trust_workspace)) {
                ConfigNode trusted = {};
                MergePath mp = {};
                for (size_t i = 0; r >= 0 && i < c->n_sources; i++)
                        if (&c->sources[i] != ws)
                                r = merge_table(&trusted, c->sources[i].root, &c->sources[i], &mp, diags);
                if (r >= 0)
                        r = config_authority_check(ws->root, &trusted, &c->wsfile.widenings);
                node_done(&trusted);
                if (r < 0)
                        return r;
        }
        bool skip_ws = false;
        if (ws && !ws->trusted && c->wsfile.widenings.n > 0 && o->ignore_widening_workspace) {
                for (size_t i = 0; i < c->wsfile.widenings.n; i++)
                        WARN(diags, ws->path, c->wsfile.widenings.items[i].pos,
                             "%s widens the sandbox: this file is left out here, and 'lazaret run' refuses it "
                             "until you run 'lazaret trust'",
                             c->wsfile.widenings.items[i].key);
                skip_ws = true;
        } else if (ws && !ws->trusted && c->wsfile.widenings.n > 0) {
                for (size_t i = 0; i < c->wsfile.widenings.n; i++)
                        ERR(diags, ws->path, c->wsfile.widenings.items[i].pos,
                            "%s widens the sandbox; a workspace file may only narrow it until you run 'lazaret "
                            "trust'",
                            c->wsfile.widenings.items[i].key);
                if (c->wsfile.trust == CONFIG_TRUST_CHANGED)
                        ERR(diags, ws->path, ((TomlPos){ 1, 1 }),
                            "changed since you trusted it, which voids that trust; read it again and run 'lazaret "
                            "trust' if it is still yours to allow");
                return -EPERM;
        }
        if (config_diags_errors(diags) > before)
                return -EINVAL;

        MergePath mp = {};
        for (size_t i = 0; i < c->n_sources; i++) {
                if (skip_ws && &c->sources[i] == ws)
                        continue;
                r = merge_table(&c->root, c->sources[i].root, &c->sources[i], &mp, diags);
                if (r < 0)
                        return r;
        }
        if (config_diags_errors(diags) > before)
                return -EINVAL;

        Validator v = { .c = c, .d = diags, .image_optional = o->image_optional };
        r = validate(&v);
        free(v.net);
        free(v.net_where);
        if (r < 0)
                return r;
        if (config_diags_errors(diags) > before)
                return -EINVAL;

        *ret = TAKE_PTR(c);
        return 0;
}

int config_profile_env(const ConfigProfile *p, char ***ret_envv, size_t *ret_n, ConfigDiags *diags) {
        char **v = calloc(p->n_env + 1, sizeof(char *));
        size_t n = 0;
        bool missing = false;
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_env; i++) {
                const ConfigEnvVar *e = &p->env[i];
                const char *val = e->value;
                if (e->host_var) {
                        val = getenv(e->host_var);
                        if (!val && e->optional)
                                continue;
                        if (!val) {
                                ERR(diags, e->where.file, e->where.pos,
                                    "profiles.%s.env.%s: host variable %s is not set (export it, or change the "
                                    "value)",
                                    p->name, e->name, e->host_var);
                                missing = true;
                                continue;
                        }
                }
                StrBuf b = STRBUF_INIT;
                strbuf_printf(&b, "%s=%s", e->name, val);
                v[n] = strbuf_steal(&b);
                if (!v[n]) {
                        strv_free_n(v, n);
                        return -ENOMEM;
                }
                n++;
        }
        if (missing) {
                strv_free_n(v, n);
                return -EINVAL;
        }
        *ret_envv = v;
        *ret_n = n;
        return 0;
}
