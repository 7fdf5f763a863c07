/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cidr.h"
#include "netpolicy-digest.h"
#include "config.h"
#include "expand.h"
#include "fd-util.h"
#include "fileio.h"
#include "path-util.h"
#include "path-pattern.h"
#include "persist.h"
#include "strbuf.h"
#include "string-util.h"

/* ---- diagnostics -------------------------------------------------------- */

_printf_(5, 6) static void diag_add(ConfigDiags *d, const char *file, TomlPos pos, bool warning, const char *fmt, ...) {
        StrBuf b = STRBUF_INIT;
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(&b, fmt, ap);
        va_end(ap);

        ConfigDiag *n = realloc(d->items, (d->n + 1) * sizeof(ConfigDiag));
        char *msg = strbuf_steal(&b);
        char *f = file ? strdup(file) : NULL;
        if (!n || !msg || (file && !f)) {
                /* Out of memory while reporting: keep what we have; the
                 * caller still sees an error count through the earlier ones
                 * or through its own -ENOMEM. */
                if (n)
                        d->items = n;
                free(msg);
                free(f);
                return;
        }
        d->items = n;
        d->items[d->n++] = (ConfigDiag){ .file = f, .pos = pos, .warning = warning, .message = msg };
}

#define ERR(d, file, pos, ...)  diag_add((d), (file), (pos), false, __VA_ARGS__)
#define WARN(d, file, pos, ...) diag_add((d), (file), (pos), true, __VA_ARGS__)

void config_diags_done(ConfigDiags *d) {
        for (size_t i = 0; i < d->n; i++) {
                free(d->items[i].file);
                free(d->items[i].message);
        }
        free(d->items);
        d->items = NULL;
        d->n = 0;
}

size_t config_diags_errors(const ConfigDiags *d) {
        size_t n = 0;
        for (size_t i = 0; i < d->n; i++)
                n += !d->items[i].warning;
        return n;
}

void config_diags_print(const ConfigDiags *d, FILE *f) {
        for (size_t i = 0; i < d->n; i++) {
                const ConfigDiag *x = &d->items[i];
                /* Positioned messages follow the compiler convention; the
                 * others look like every other lazaret message. */
                if (x->file)
                        fprintf(f, "%s:%u:%u: %s%s\n", x->file, x->pos.line, x->pos.col, x->warning ? "warning: " : "",
                                x->message);
                else
                        fprintf(f, "lazaret: %s%s\n", x->warning ? "warning: " : "error: ", x->message);
        }
}

/* Quote text from a configuration for a message: printable ASCII as is,
 * everything else escaped, so a file cannot put terminal escapes into our
 * output; long text is cut. */
static void put_quoted(StrBuf *b, const char *s, size_t n) {
        const size_t max = 64;
        strbuf_putc(b, '\'');
        for (size_t i = 0; i < n && i < max; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c == '\'' || c == '\\')
                        strbuf_printf(b, "\\%c", c);
                else if (c >= 0x20 && c < 0x7f)
                        strbuf_putc(b, (char) c);
                else
                        strbuf_printf(b, "\\x%02x", c);
        }
        if (n > max)
                strbuf_puts(b, "...");
        strbuf_putc(b, '\'');
}

/* A string usable in messages; freed by the caller. NULL only on OOM, which
 * is then shown as "?". */
static char *quoted(const char *s, size_t n) {
        StrBuf b = STRBUF_INIT;
        put_quoted(&b, s, n);
        return strbuf_steal(&b);
}

static bool key_is_bare(const char *k) {
        if (!*k)
                return false;
        for (; *k; k++)
                if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '_' ||
                      *k == '-'))
                        return false;
        return true;
}

char *config_key_path(const char *parent, const char *key) {
        StrBuf b = STRBUF_INIT;
        if (parent && *parent) {
                strbuf_puts(&b, parent);
                strbuf_putc(&b, '.');
        }
        if (key_is_bare(key))
                strbuf_puts(&b, key);
        else {
                /* Render as a TOML basic string; escaping keeps it one line. */
                strbuf_putc(&b, '"');
                for (const char *k = key; *k; k++) {
                        unsigned char c = (unsigned char) *k;
                        if (c == '"' || c == '\\')
                                strbuf_printf(&b, "\\%c", c);
                        else if (c < 0x20 || c == 0x7f)
                                strbuf_printf(&b, "\\u%04x", c);
                        else
                                strbuf_putc(&b, (char) c);
                }
                strbuf_putc(&b, '"');
        }
        return strbuf_steal(&b);
}

/* ---- small helpers ------------------------------------------------------ */

void strv_free_n(char **v, size_t n) {
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

static bool env_name_valid(const char *s) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
                return false;
        for (s++; *s; s++)
                if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
                        return false;
        return true;
}

int config_domain_hash(const char *profile, const char *workspace, char ret[13]) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "%s:%s", profile, workspace);
        _cleanup_free_ char *s = strbuf_steal(&b);
        if (!s)
                return -ENOMEM;
        if (EVP_Digest(s, strlen(s), md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < 6)
                return -EIO;
        static const char hex[] = "0123456789abcdef";
        for (unsigned i = 0; i < 6; i++) {
                ret[2 * i] = hex[md[i] >> 4];
                ret[2 * i + 1] = hex[md[i] & 15];
        }
        ret[12] = '\0';
        return 0;
}

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

/* Canonicalize a path that need not exist yet: the longest existing prefix
 * is resolved with realpath(3) (all symlinks), the rest is appended as is.
 * The caller has already refused ".." segments, so the remainder cannot climb
 * back out of the resolved prefix. */
static int canonicalize_partial(const char *path, char **ret) {
        _cleanup_free_ char *head = strdup(path);
        if (!head)
                return -ENOMEM;
        size_t len = strlen(head);
        for (;;) {
                char *r = realpath(head, NULL);
                if (r) {
                        const char *rest = path + len;
                        while (*rest == '/')
                                rest++;
                        if (!*rest) {
                                *ret = r;
                                return 0;
                        }
                        char *j = path_join(r, rest);
                        free(r);
                        if (!j)
                                return -ENOMEM;
                        /* Drop "." segments and doubled slashes of the tail. */
                        StrBuf b = STRBUF_INIT;
                        for (const char *p = j; *p;) {
                                size_t n = strcspn(p, "/");
                                if (n > 0 && !(n == 1 && p[0] == '.')) {
                                        strbuf_putc(&b, '/');
                                        strbuf_putn(&b, p, n);
                                }
                                p += n;
                                while (*p == '/')
                                        p++;
                        }
                        free(j);
                        char *s = strbuf_steal(&b);
                        if (!s)
                                return -ENOMEM;
                        if (!*s) {
                                free(s);
                                s = strdup("/");
                                if (!s)
                                        return -ENOMEM;
                        }
                        *ret = s;
                        return 0;
                }
                if (errno != ENOENT)
                        return negative_errno();
                /* Cut the last segment and try its parent. */
                while (len > 1 && head[len - 1] == '/')
                        len--;
                while (len > 1 && head[len - 1] != '/')
                        len--;
                if (len <= 1) {
                        head[0] = '/';
                        head[1] = '\0';
                        len = 1;
                } else
                        head[--len] = '\0';
        }
}

/* ---- loading and merging ----------------------------------------------- */

static void node_done(ConfigNode *n) {
        for (size_t i = 0; i < n->n_children; i++)
                node_done(&n->children[i]);
        free(n->children);
        n->children = NULL;
        n->n_children = 0;
}

const ConfigNode *config_node_get(const ConfigNode *n, const char *key) {
        if (!n)
                return NULL;
        for (size_t i = 0; i < n->n_children; i++)
                if (streq(n->children[i].key, key))
                        return &n->children[i];
        return NULL;
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
                        _cleanup_free_ char *k = quoted(e->key, e->key_len);
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
                        _cleanup_free_ char *k = quoted(e->key, e->key_len);
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

/* ---- validation --------------------------------------------------------- */

typedef struct NetWhere {
        const char *file;
        TomlPos pos;
        const char *list; /* "network.default_allow", "profiles.x.allow_egress", ... */
        size_t index;
} NetWhere;

typedef struct Validator {
        Config *c;
        ConfigDiags *d;
        bool data_root_ok;
        /* Network policy input: [network] entries first (n_net_global), then
         * the profile being validated. */
        NetPolicyEntry *net;
        NetWhere *net_where;
        size_t n_net, n_net_global, cap_net;
        NetWhere res_where[NETPOLICY_RESOLVERS_MAX];
        bool net_bad; /* some network input was invalid: no policy compiled */
} Validator;

static ConfigWhere where_of(const ConfigNode *n) {
        return (ConfigWhere){ .file = n->src->path, .pos = n->value->pos };
}

#define NODE_ERR(v, n, ...) ERR((v)->d, (n)->src->path, (n)->value->pos, __VA_ARGS__)
#define KEY_ERR(v, n, ...)  ERR((v)->d, (n)->src->path, (n)->key_pos, __VA_ARGS__)

/* Report keys of table n that the schema (config_key_rules) does not have
 * below the rule path parent. */
static void check_unknown(Validator *v, const ConfigNode *n, const char *what, const char *parent) {
        const char *known[32];
        config_key_children(parent, known, ELEMENTSOF(known));
        for (size_t i = 0; i < n->n_children; i++) {
                const ConfigNode *k = &n->children[i];
                bool ok = false;
                for (const char *const *q = known; *q; q++)
                        ok = ok || streq(*q, k->key);
                if (ok)
                        continue;
                StrBuf list = STRBUF_INIT;
                for (const char *const *q = known; *q; q++)
                        strbuf_printf(&list, "%s%s", q == known ? "" : ", ", *q);
                _cleanup_free_ char *kq = quoted(k->key, strlen(k->key));
                KEY_ERR(v, k, "unknown key %s in %s (known: %s)", kq ?: "?", what, strbuf_str(&list));
                strbuf_done(&list);
        }
}

static bool want_type(Validator *v, const ConfigNode *n, const char *name, TomlType t) {
        if (n->value->type == t)
                return true;
        NODE_ERR(v, n, "%s must be %s, not %s", name, toml_type_with_article(t),
                 toml_type_with_article(n->value->type));
        return false;
}

/* A required child of table t (which may itself be missing: then "where" is
 * the best position we have). */
static const ConfigNode *want_child(Validator *v, const ConfigNode *t, const char *key, const char *name,
                                    const char *file, TomlPos pos) {
        const ConfigNode *n = config_node_get(t, key);
        if (!n) {
                if (t && t->src)
                        ERR(v->d, t->src->path, t->key_pos, "%s is required", name);
                else
                        ERR(v->d, file, pos, "%s is required", name);
        }
        return n;
}

static bool string_ok(Validator *v, const ConfigNode *n, const char *name) {
        if (!want_type(v, n, name, TOML_STRING))
                return false;
        if (strlen(n->value->str.s) != n->value->str.len) {
                NODE_ERR(v, n, "%s must not contain a NUL character", name);
                return false;
        }
        if (n->value->str.len == 0) {
                NODE_ERR(v, n, "%s must not be empty", name);
                return false;
        }
        return true;
}

/* Validate an array of non-empty strings; returns a copy (or NULL with
 * *ok=false). */
static char **string_list_max(Validator *v, const ConfigNode *n, const char *name, size_t max, size_t *ret_n,
                              bool *ok) {
        *ret_n = 0;
        if (!want_type(v, n, name, TOML_ARRAY)) {
                *ok = false;
                return NULL;
        }
        size_t cnt = n->value->array.n;
        if (cnt > max) {
                NODE_ERR(v, n, "%s has %zu entries; at most %zu are allowed", name, cnt, max);
                *ok = false;
                return NULL;
        }
        char **out = calloc(cnt + 1, sizeof(char *));
        if (!out) {
                *ok = false;
                return NULL;
        }
        size_t k = 0;
        for (size_t i = 0; i < cnt; i++) {
                const TomlValue *e = n->value->array.items[i];
                if (e->type != TOML_STRING) {
                        ERR(v->d, n->src->path, e->pos, "%s[%zu] must be a string, not %s", name, i,
                            toml_type_with_article(e->type));
                        *ok = false;
                        continue;
                }
                if (e->str.len == 0 || strlen(e->str.s) != e->str.len) {
                        ERR(v->d, n->src->path, e->pos, "%s[%zu] must be a non-empty string without NUL characters",
                            name, i);
                        *ok = false;
                        continue;
                }
                out[k] = strdup(e->str.s);
                if (!out[k]) {
                        *ok = false;
                        break;
                }
                k++;
        }
        *ret_n = k;
        return out;
}

/* Expand, check for "..", require absolute, canonicalize. */
static int host_path(Validator *v, const char *file, TomlPos pos, const char *name, const char *raw,
                     const ExpandContext *ctx, char **ret) {
        _cleanup_free_ char *exp = NULL, *why = NULL, *q = NULL;
        int r = expand_string(raw, ctx, &exp, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                ERR(v->d, file, pos, "%s: %s", name, why);
                return -EINVAL;
        }
        q = quoted(exp, strlen(exp));
        if (path_has_dotdot(exp)) {
                ERR(v->d, file, pos, "%s: path %s contains a '..' segment after expansion; refusing it", name,
                    q ?: "?");
                return -EINVAL;
        }
        if (!path_is_absolute(exp)) {
                ERR(v->d, file, pos, "%s: path %s is not absolute after expansion (start it with '/' or '~/')", name,
                    q ?: "?");
                return -EINVAL;
        }
        r = canonicalize_partial(exp, ret);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                ERR(v->d, file, pos, "%s: cannot resolve %s: %s", name, q ?: "?", strerror(-r));
                return -EINVAL;
        }
        return 0;
}

static void validate_storage(Validator *v, const ConfigNode *t, const char *top_file) {
        static const TomlPos top = { 1, 1 };
        if (!t) {
                ERR(v->d, top_file, top, "[storage] section is required (it sets data_root)");
                return;
        }
        if (!want_type(v, t, "storage", TOML_TABLE))
                return;
        check_unknown(v, t, "[storage]", "storage");
        const ConfigNode *n = want_child(v, t, "data_root", "storage.data_root", NULL, top);
        if (!n || !string_ok(v, n, "storage.data_root"))
                return;
        ExpandContext ctx = { .home = v->c->home };
        if (host_path(v, n->src->path, n->value->pos, "storage.data_root", n->value->str.s, &ctx, &v->c->data_root) ==
            0)
                v->data_root_ok = true;
}

/* [runtime] (optional): runsc, an executable file named by an absolute
 * path (a leading ~ expanded). */
static void validate_runtime(Validator *v, const ConfigNode *t) {
        if (!t || !want_type(v, t, "runtime", TOML_TABLE))
                return;
        check_unknown(v, t, "[runtime]", "runtime");
        const ConfigNode *n = config_node_get(t, "runsc");
        if (!n || !string_ok(v, n, "runtime.runsc"))
                return;
        ExpandContext ctx = { .home = v->c->home };
        _cleanup_free_ char *path = NULL;
        if (host_path(v, n->src->path, n->value->pos, "runtime.runsc", n->value->str.s, &ctx, &path) < 0)
                return;
        struct stat st;
        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || access(path, X_OK) < 0) {
                _cleanup_free_ char *q = quoted(path, strlen(path));
                ERR(v->d, n->src->path, n->value->pos,
                    "runtime.runsc: %s is not an executable file; name gVisor's runsc (for example "
                    "/usr/local/bin/runsc, which 'make deps' installs) or remove the key to use the runsc on PATH",
                    q ?: "?");
                return;
        }
        v->c->runsc = TAKE_PTR(path);
}

static char **string_list(Validator *v, const ConfigNode *n, const char *name, size_t *ret_n, bool *ok) {
        return string_list_max(v, n, name, CONFIG_LIST_MAX, ret_n, ok);
}

/* Add the entries of a CIDR list to the validator's policy input. */
static int validate_cidrs(Validator *v, const ConfigNode *n, const char *name, NetAction action, char ***ret,
                          size_t *ret_n) {
        bool ok = true;
        char **list = string_list_max(v, n, name, CONFIG_PREFIXES_MAX, ret_n, &ok);
        if (!list) {
                v->net_bad = true;
                return 0;
        }
        *ret = list;
        if (!ok)
                v->net_bad = true;
        /* Positions: string_list skipped bad entries, so walk the array again. */
        for (size_t i = 0; i < n->value->array.n; i++) {
                const TomlValue *e = n->value->array.items[i];
                if (e->type != TOML_STRING || e->str.len == 0 || strlen(e->str.s) != e->str.len)
                        continue;
                Cidr cidr;
                const char *why = NULL;
                if (cidr_parse(e->str.s, &cidr, &why) < 0) {
                        _cleanup_free_ char *q = quoted(e->str.s, e->str.len);
                        ERR(v->d, n->src->path, e->pos, "%s[%zu]: %s is not a valid CIDR: %s", name, i, q ?: "?", why);
                        v->net_bad = true;
                        continue;
                }
                if (v->n_net >= v->cap_net) {
                        size_t cap = v->cap_net ? v->cap_net * 2 : 64;
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
                v->net[v->n_net] = (NetPolicyEntry){ .prefix = cidr, .action = action, .where_index = v->n_net };
                v->net_where[v->n_net] = (NetWhere){ .file = n->src->path, .pos = e->pos, .list = name, .index = i };
                v->n_net++;
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

static int validate_network(Validator *v, const ConfigNode *t, const char *top_file) {
        static const TomlPos top = { 1, 1 };
        int r;

        v->c->ipv6_enabled = true;
        if (!t) {
                ERR(v->d, top_file, top, "[network] section is required (it sets default_allow and default_deny)");
                v->net_bad = true;
                return 0;
        }
        if (!want_type(v, t, "network", TOML_TABLE)) {
                v->net_bad = true;
                return 0;
        }
        check_unknown(v, t, "[network]", "network");

        const ConfigNode *n = config_node_get(t, "ipv6");
        if (n && string_ok(v, n, "network.ipv6")) {
                if (streq(n->value->str.s, "disabled"))
                        v->c->ipv6_enabled = false;
                else if (!streq(n->value->str.s, "enabled")) {
                        _cleanup_free_ char *q = quoted(n->value->str.s, n->value->str.len);
                        NODE_ERR(v, n, "network.ipv6 must be \"enabled\" or \"disabled\", not %s", q ?: "?");
                        v->net_bad = true;
                }
        } else if (n)
                v->net_bad = true;

        n = want_child(v, t, "default_allow", "network.default_allow", NULL, top);
        if (!n)
                v->net_bad = true;
        else if ((r = validate_cidrs(v, n, "network.default_allow", NET_ALLOW, &v->c->default_allow,
                                     &v->c->n_default_allow)) < 0)
                return r;
        n = want_child(v, t, "default_deny", "network.default_deny", NULL, top);
        if (!n)
                v->net_bad = true;
        else if ((r = validate_cidrs(v, n, "network.default_deny", NET_DENY, &v->c->default_deny,
                                     &v->c->n_default_deny)) < 0)
                return r;
        if (n && n->extra) {
                /* What an untrusted workspace file adds to the denied list. */
                const ConfigNode x = { .key = n->key, .src = n->extra_src, .key_pos = n->key_pos, .value = n->extra };
                char **more = NULL;
                size_t n_more = 0;
                if ((r = validate_cidrs(v, &x, "network.default_deny", NET_DENY, &more, &n_more)) < 0)
                        return r;
                if (more) {
                        char **all = realloc(v->c->default_deny, (v->c->n_default_deny + n_more + 1) * sizeof(char *));
                        if (!all) {
                                strv_free_n(more, n_more);
                                return -ENOMEM;
                        }
                        memcpy(all + v->c->n_default_deny, more, n_more * sizeof(char *));
                        v->c->default_deny = all;
                        v->c->n_default_deny += n_more;
                        all[v->c->n_default_deny] = NULL;
                        free(more);
                }
        }
        v->n_net_global = v->n_net;

        n = config_node_get(t, "resolvers");
        if (n) {
                bool ok = true;
                size_t cnt;
                char **list = string_list_max(v, n, "network.resolvers", NETPOLICY_RESOLVERS_MAX, &cnt, &ok);
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
                                _cleanup_free_ char *q = quoted(e->str.s, e->str.len);
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
                char **list = string_list(v, n, "network.probe_targets", &cnt, &ok);
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
                                _cleanup_free_ char *q = quoted(e->str.s, e->str.len);
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
        if (n && string_ok(v, n, "network.probe_dns_name")) {
                const char *q = n->value->str.s;
                bool ok = strlen(q) <= 253;
                for (const char *c = q; ok && *c; c++)
                        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                             *c == '-' || *c == '.' || *c == '_';
                if (!ok || q[0] == '.' || strstr(q, "..")) {
                        _cleanup_free_ char *qq = quoted(q, strlen(q));
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
        return 0;
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
                char **list = string_list(v, x, name, &cnt, &ok);
                if (!list)
                        continue;
                strv_free_n(list, cnt);
                for (size_t i = 0; i < x->value->array.n; i++) {
                        const TomlValue *e = x->value->array.items[i];
                        if (e->type != TOML_STRING || e->str.len == 0 || strlen(e->str.s) != e->str.len)
                                continue;
                        const char *why = path_pattern_problem(e->str.s);
                        if (why) {
                                _cleanup_free_ char *q = quoted(e->str.s, e->str.len);
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
        if (!want_type(v, t, "workspace", TOML_TABLE))
                return 0;
        check_unknown(v, t, "[workspace]", "workspace");
        const ConfigNode *n = config_node_get(t, "protect");
        int r = n ? pattern_list(v, n, "workspace.protect", &v->c->protect, &v->c->n_protect) : 0;
        if (r < 0)
                return r;
        n = config_node_get(t, "mask");
        return n ? pattern_list(v, n, "workspace.mask", &v->c->mask, &v->c->n_mask) : 0;
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
        int r = netpolicy_build(enabled, v->net, v->n_net, v->c->resolvers, v->c->n_resolvers, &p->net, &err);
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
                    "destination the sandbox may reach",
                    i, a, p->name);
        }
        _cleanup_free_ char *canon = NULL;
        size_t len;
        r = netpolicy_format(&p->net, &canon, &len);
        if (r < 0)
                return r;
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, canon, len, p->net_digest);
        return 0;
}

int config_profile_netpolicy_canonical(const ConfigProfile *p, char **ret, size_t *ret_len) {
        return netpolicy_format(&p->net, ret, ret_len);
}

/* An optional integer key within [min, max]: its value, or def when it is
 * absent or wrong (then with an error naming the range and what it is). */
static uint64_t bounded_int(Validator *v, const ConfigNode *n, const char *name, const char *unit, uint64_t min,
                            uint64_t max, uint64_t def, const char *what) {
        if (!n || !want_type(v, n, name, TOML_INTEGER))
                return def;
        int64_t x = n->value->integer;
        if (x < (int64_t) min || x > (int64_t) max) {
                NODE_ERR(v, n, "%s: %lld %s is out of range; give %llu to %llu (%s)", name, (long long) x, unit,
                         (unsigned long long) min, (unsigned long long) max, what);
                return def;
        }
        return (uint64_t) x;
}

static int validate_escalation(Validator *v, const ConfigNode *t, const char *top_file) {
        static const TomlPos top = { 1, 1 };
        if (!t) {
                ERR(v->d, top_file, top, "[escalation] section is required (it sets enabled and socket_dir)");
                return 0;
        }
        if (!want_type(v, t, "escalation", TOML_TABLE))
                return 0;
        check_unknown(v, t, "[escalation]", "escalation");
        const ConfigNode *n = want_child(v, t, "enabled", "escalation.enabled", NULL, top);
        if (n && want_type(v, n, "escalation.enabled", TOML_BOOL))
                v->c->escalation_enabled = n->value->boolean;
        n = want_child(v, t, "socket_dir", "escalation.socket_dir", NULL, top);
        if (n && string_ok(v, n, "escalation.socket_dir")) {
                ExpandContext ctx = { .home = v->c->home };
                (void) host_path(v, n->src->path, n->value->pos, "escalation.socket_dir", n->value->str.s, &ctx,
                                 &v->c->socket_dir);
        }
        v->c->escalation_time_limit = bounded_int(v, config_node_get(t, "time_limit"), "escalation.time_limit",
                                                  "seconds", 1, CONFIG_TIME_LIMIT_MAX, CONFIG_TIME_LIMIT_DEFAULT,
                                                  "how long an approved host command may run before it is ended");
        v->c->escalation_output_max = bounded_int(v, config_node_get(t, "output_limit"), "escalation.output_limit",
                                                  "bytes", 1024, CONFIG_OUTPUT_LIMIT_MAX, CONFIG_OUTPUT_LIMIT_DEFAULT,
                                                  "bytes of a host command's stdout, and again of its stderr, that "
                                                  "reach the sandbox");
        n = config_node_get(t, "auto_approve");
        if (n) {
                bool ok = true;
                v->c->auto_approve = string_list(v, n, "escalation.auto_approve", &v->c->n_auto_approve, &ok);
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
                        _cleanup_free_ char *why = NULL, *q = quoted(e->str.s, e->str.len);
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

/* Normalize a container path: collapse "//" and "/./", drop a trailing "/". */
static char *container_normalize(const char *p) {
        StrBuf b = STRBUF_INIT;
        while (*p) {
                size_t n = strcspn(p, "/");
                if (n > 0 && !(n == 1 && p[0] == '.')) {
                        strbuf_putc(&b, '/');
                        strbuf_putn(&b, p, n);
                }
                p += n;
                while (*p == '/')
                        p++;
        }
        if (b.len == 0)
                strbuf_putc(&b, '/');
        return strbuf_steal(&b);
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
                        _cleanup_free_ char *kq = quoted(e->key, e->key_len);
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
                ExpandContext ctx = { .home = v->c->home };
                ctx.values[EXPAND_PROFILE_NAME] = p->name;
                ctx.values[EXPAND_PROFILE_DIR] = p->profile_dir;
                ctx.values[EXPAND_DOMAIN_HASH] = p->domain_hash;
                ctx.values[EXPAND_DOMAIN_DIR] = p->domain_dir;
                ctx.values[EXPAND_WORKSPACE_DIR] = v->c->workspace;
                _cleanup_free_ char *hn = NULL;
                StrBuf hb = STRBUF_INIT;
                strbuf_printf(&hb, "%s.host", name);
                hn = strbuf_steal(&hb);
                int r = host_path(v, file, host->value->pos, hn ?: name, host->value->str.s, &ctx, &cv.host);
                if (r == -ENOMEM)
                        return r;
                ok = r == 0;
        }

        if (cont && cont->value->type == TOML_STRING && cont->value->str.len > 0) {
                const char *cs = cont->value->str.s;
                _cleanup_free_ char *q = quoted(cs, cont->value->str.len);
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
                        cv.container = container_normalize(cs);
                        if (!cv.container) {
                                free(cv.host);
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
                                        _cleanup_free_ char *q = quoted(s, n);
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
                free(cv.container);
                return 0;
        }
        ConfigVolume *nv = realloc(p->volumes, (p->n_volumes + 1) * sizeof(ConfigVolume));
        if (!nv) {
                free(cv.host);
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
        if (!want_type(v, t, name, TOML_TABLE))
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
                _cleanup_free_ char *kq = quoted(e->key, strlen(e->key));
                if (!env_name_valid(e->key)) {
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
                ConfigEnvVar ev = { .where = where_of(e) };
                const char *host = startswith(e->value->str.s, "env:");
                if (host) {
                        if (!env_name_valid(host)) {
                                _cleanup_free_ char *q = quoted(host, strlen(host));
                                NODE_ERR(v, e, "%s.%s: 'env:' must be followed by a host variable name, got %s", name,
                                         e->key, q ?: "?");
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
        if (!want_type(v, n, nn, TOML_ARRAY))
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

static int validate_profile(Validator *v, const ConfigNode *t) {
        _cleanup_free_ char *pname = config_key_path("profiles", t->key);
        _cleanup_free_ char *kq = quoted(t->key, strlen(t->key));
        if (!pname)
                return -ENOMEM;

        if (!config_profile_name_valid(t->key)) {
                KEY_ERR(v, t,
                        "profile name %s is not allowed: use 2 to 32 characters from a-z, 0-9, '_' and '-' "
                        "(^[a-z0-9_-]{2,32}$)",
                        kq ?: "?");
                return 0;
        }
        if (!want_type(v, t, pname, TOML_TABLE))
                return 0;

        StrBuf wb = STRBUF_INIT;
        strbuf_printf(&wb, "[%s]", pname);
        _cleanup_free_ char *what = strbuf_steal(&wb);
        if (!what)
                return -ENOMEM;
        check_unknown(v, t, what, "profiles.*");

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
        {
                _cleanup_free_ char *np = config_key_path(pname, "pids_limit"),
                                    *nm = config_key_path(pname, "memory_limit");
                p->pids_limit = bounded_int(v, config_node_get(t, "pids_limit"), np ?: "pids_limit", "tasks",
                                            CONFIG_PIDS_LIMIT_MIN, CONFIG_PIDS_LIMIT_MAX, CONFIG_PIDS_LIMIT_DEFAULT,
                                            "processes and threads inside the sandbox");
                p->memory_limit_mib =
                        bounded_int(v, config_node_get(t, "memory_limit"), nm ?: "memory_limit", "MiB",
                                    CONFIG_MEMORY_LIMIT_MIN, CONFIG_MEMORY_LIMIT_MAX, CONFIG_MEMORY_LIMIT_DEFAULT,
                                    "MiB of memory the sandbox's programs may hold");
                _cleanup_free_ char *nc = config_key_path(pname, "cpu_limit");
                p->cpu_limit =
                        bounded_int(v, config_node_get(t, "cpu_limit"), nc ?: "cpu_limit", "CPUs", 0,
                                    CONFIG_CPU_LIMIT_MAX, 0, "CPUs the sandbox may run on; 0 for all of the host's");
                _cleanup_free_ char *nd = config_key_path(pname, "disk_limit");
                p->disk_limit_mib = bounded_int(v, config_node_get(t, "disk_limit"), nd ?: "disk_limit", "MiB",
                                                CONFIG_DISK_LIMIT_MIN, CONFIG_DISK_LIMIT_MAX, CONFIG_DISK_LIMIT_DEFAULT,
                                                "MiB the sandbox may write to its own root file system");
        }

        _cleanup_free_ char *n_image = config_key_path(pname, "image");
        const ConfigNode *n = want_child(v, t, "image", n_image ?: "image", NULL, t->key_pos);
        if (n && string_ok(v, n, n_image ?: "image")) {
                bool pinned = false;
                const char *why = image_problem(n->value->str.s, &pinned);
                _cleanup_free_ char *q = quoted(n->value->str.s, n->value->str.len);
                if (why)
                        NODE_ERR(v, n, "%s: %s is not a valid image reference: %s", n_image, q ?: "?", why);
                else {
                        p->image = strdup(n->value->str.s);
                        if (!p->image)
                                return -ENOMEM;
                        p->image_where = where_of(n);
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
                if (want_type(v, n, nn ?: "workspace_mode", TOML_STRING)) {
                        if (streq(n->value->str.s, "branch"))
                                p->workspace_branch = true;
                        else if (streq(n->value->str.s, "direct"))
                                p->workspace_branch = false;
                        else {
                                _cleanup_free_ char *q = quoted(n->value->str.s, n->value->str.len);
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
        r = config_domain_hash(p->name, p->repo_root ?: v->c->workspace, p->domain_hash);
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
                if (want_type(v, n, nn ?: "runsc_network", TOML_STRING)) {
                        if (streq(n->value->str.s, "sandbox"))
                                p->runsc_network = RUNSC_NETWORK_SANDBOX;
                        else if (streq(n->value->str.s, "host"))
                                p->runsc_network = RUNSC_NETWORK_HOST;
                        else {
                                _cleanup_free_ char *q = quoted(n->value->str.s, n->value->str.len);
                                NODE_ERR(v, n, "%s: %s is not one of \"sandbox\" (gVisor's network stack) or \"host\"",
                                         nn, q ?: "?");
                        }
                        p->runsc_network_where = where_of(n);
                }
        }

        n = config_node_get(t, "persistent_dirs");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "persistent_dirs");
                bool ok = true;
                p->persistent_dirs = string_list(v, n, nn ?: "persistent_dirs", &p->n_persistent_dirs, &ok);
                /* Keep the canonical form of the good entries; string_list
                 * skipped bad ones, so walk the array again for positions. */
                size_t kept = 0;
                for (size_t i = 0; p->persistent_dirs && n->value->type == TOML_ARRAY && i < n->value->array.n; i++) {
                        const TomlValue *e = n->value->array.items[i];
                        if (e->type != TOML_STRING || strlen(e->str.s) != e->str.len || e->str.len == 0)
                                continue;
                        _cleanup_free_ char *q = quoted(e->str.s, e->str.len);
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

        v->n_net = v->n_net_global;
        n = config_node_get(t, "allow_egress");
        bool egress_bad = false;
        if (n) {
                p->allow_egress_name = config_key_path(pname, "allow_egress");
                if (!p->allow_egress_name)
                        return -ENOMEM;
                bool was_bad = v->net_bad;
                v->net_bad = false;
                r = validate_cidrs(v, n, p->allow_egress_name, NET_ALLOW, &p->allow_egress, &p->n_allow_egress);
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

        n = config_node_get(t, "env");
        if (n) {
                r = validate_env(v, p, n, pname);
                if (r < 0)
                        return r;
        }

        n = config_node_get(t, "volumes");
        if (n) {
                _cleanup_free_ char *nn = config_key_path(pname, "volumes");
                if (want_type(v, n, nn ?: "volumes", TOML_ARRAY)) {
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

static int validate(Validator *v) {
        static const TomlPos top = { 1, 1 };
        const ConfigNode *root = &v->c->root;
        const char *top_file = v->c->sources[v->c->n_sources - 1].path;

        check_unknown(v, root, "the top level", "");
        validate_storage(v, config_node_get(root, "storage"), top_file);
        int r = validate_network(v, config_node_get(root, "network"), top_file);
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
        if (!want_type(v, profiles, "profiles", TOML_TABLE))
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
                r = validate_profile(v, &profiles->children[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- public ------------------------------------------------------------- */

static void profile_done(ConfigProfile *p) {
        free(p->name);
        strv_free_n(p->command, p->n_command);
        free(p->image);
        strv_free_n(p->persistent_dirs, p->n_persistent_dirs);
        strv_free_n(p->allow_egress, p->n_allow_egress);
        free(p->allow_egress_name);
        netpolicy_done(&p->net);
        for (size_t i = 0; i < p->n_env; i++) {
                free(p->env[i].name);
                free(p->env[i].value);
                free(p->env[i].host_var);
        }
        free(p->env);
        for (size_t i = 0; i < p->n_volumes; i++) {
                free(p->volumes[i].host);
                free(p->volumes[i].container);
        }
        free(p->volumes);
        free(p->repo_root);
        free(p->workspace_subdir);
        free(p->profile_dir);
        free(p->domain_dir);
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
        free(c->data_root);
        strv_free_n(c->default_allow, c->n_default_allow);
        strv_free_n(c->default_deny, c->n_default_deny);
        free(c->resolvers);
        free(c->probe_targets);
        free(c->probe_dns_name);
        free(c->socket_dir);
        free(c->runsc);
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

        Validator v = { .c = c, .d = diags };
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
