/* SPDX-License-Identifier: MIT */
/* The Validator's helpers (config-internal.h): where a node is, unknown
 * keys against the schema (config-authority.c), typed getters that report
 * what is wrong with the node's position, string lists, host paths and
 * bounded integers. config.c and config-profile.c validate with them. */
#include "config-internal.h"

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
                        char *sq = config_path_squash(j);
                        free(j);
                        if (!sq)
                                return -ENOMEM;
                        *ret = sq;
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

ConfigWhere config_where_of(const ConfigNode *n) {
        return (ConfigWhere){ .file = n->src->path, .pos = n->value->pos };
}

/* Report keys of table n that the schema (config_key_rules) does not have
 * below the rule path parent. */
void config_check_unknown(Validator *v, const ConfigNode *n, const char *what, const char *parent) {
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
                _cleanup_free_ char *kq = config_quoted(k->key, strlen(k->key));
                KEY_ERR(v, k, "unknown key %s in %s (known: %s)", kq ?: "?", what, strbuf_str(&list));
                strbuf_done(&list);
        }
}

bool config_want_type(Validator *v, const ConfigNode *n, const char *name, TomlType t) {
        if (n->value->type == t)
                return true;
        NODE_ERR(v, n, "%s must be %s, not %s", name, toml_type_with_article(t),
                 toml_type_with_article(n->value->type));
        return false;
}

/* A required child of table t (which may itself be missing: then "where" is
 * the best position we have). */
const ConfigNode *config_want_child(Validator *v, const ConfigNode *t, const char *key, const char *name,
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

bool config_string_ok(Validator *v, const ConfigNode *n, const char *name) {
        if (!config_want_type(v, n, name, TOML_STRING))
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
char **config_string_list_max(Validator *v, const ConfigNode *n, const char *name, size_t max, size_t *ret_n,
                              bool *ok) {
        *ret_n = 0;
        if (!config_want_type(v, n, name, TOML_ARRAY)) {
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

/* Expand, check for "..", require absolute, canonicalize; *ret_given
 * (when not NULL) gets the expanded path before canonicalization. */
int config_host_path(Validator *v, const char *file, TomlPos pos, const char *name, const char *raw,
                     const ExpandContext *ctx, char **ret) {
        return config_host_path_given(v, file, pos, name, raw, ctx, ret, NULL);
}

int config_host_path_given(Validator *v, const char *file, TomlPos pos, const char *name, const char *raw,
                           const ExpandContext *ctx, char **ret, char **ret_given) {
        _cleanup_free_ char *exp = NULL, *why = NULL, *q = NULL;
        int r = expand_string(raw, ctx, &exp, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                ERR(v->d, file, pos, "%s: %s", name, why);
                return -EINVAL;
        }
        q = config_quoted(exp, strlen(exp));
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
        if (ret_given)
                *ret_given = TAKE_PTR(exp);
        return 0;
}

char **config_string_list(Validator *v, const ConfigNode *n, const char *name, size_t *ret_n, bool *ok) {
        return config_string_list_max(v, n, name, CONFIG_LIST_MAX, ret_n, ok);
}

/* An optional integer key within [min, max]: its value, or def when it is
 * absent or wrong (then with an error naming the range and what it is). */
uint64_t config_bounded_int(Validator *v, const ConfigNode *n, const char *name, const char *unit, uint64_t min,
                            uint64_t max, uint64_t def, const char *what) {
        if (!n || !config_want_type(v, n, name, TOML_INTEGER))
                return def;
        int64_t x = n->value->integer;
        if (x < (int64_t) min || x > (int64_t) max) {
                NODE_ERR(v, n, "%s: %lld %s is out of range; give %llu to %llu (%s)", name, (long long) x, unit,
                         (unsigned long long) min, (unsigned long long) max, what);
                return def;
        }
        return (uint64_t) x;
}
