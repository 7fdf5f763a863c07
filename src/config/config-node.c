/* SPDX-License-Identifier: MIT */
/* The configuration's ground floor (config.h, config-internal.h): the
 * diagnostics (file:line:column, for the user), quoting and key paths, a
 * node's child by key, and small helpers (environment names, the Domain
 * hash, path squashing). Every other part of the configuration
 * (config.c, config-validator.c, config-profile.c, config-authority.c)
 * calls these; they call none of them. */
#include "config-internal.h"

/* ---- diagnostics -------------------------------------------------------- */

void config_diag_add(ConfigDiags *d, const char *file, TomlPos pos, bool warning, const char *fmt, ...) {
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
char *config_quoted(const char *s, size_t n) {
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

bool config_env_name_valid(const char *s) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
                return false;
        for (s++; *s; s++)
                if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
                        return false;
        return true;
}

int config_domain_hash(const char *profile, const char *workspace, const char *agent, char ret[13]) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "%s:%s", profile, workspace);
        if (agent)
                strbuf_printf(&b, ":agent=%s", agent);
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

char *config_path_squash(const char *p) {
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

const ConfigNode *config_node_get(const ConfigNode *n, const char *key) {
        if (!n)
                return NULL;
        for (size_t i = 0; i < n->n_children; i++)
                if (streq(n->children[i].key, key))
                        return &n->children[i];
        return NULL;
}
