/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "expand.h"
#include "fd-util.h"
#include "strbuf.h"

static const char *const token_names[_EXPAND_TOKEN_MAX] = {
        [EXPAND_PROFILE_NAME] = "profile_name",   [EXPAND_PROFILE_DIR] = "profile_dir",
        [EXPAND_DOMAIN_HASH] = "domain_hash",     [EXPAND_DOMAIN_DIR] = "domain_dir",
        [EXPAND_WORKSPACE_DIR] = "workspace_dir",
};

const char *expand_token_to_string(ExpandToken t) {
        if (t < 0 || t >= _EXPAND_TOKEN_MAX)
                return NULL;
        return token_names[t];
}

ExpandToken expand_token_from_string(const char *s, size_t n) {
        for (int t = 0; t < _EXPAND_TOKEN_MAX; t++)
                if (strlen(token_names[t]) == n && memcmp(token_names[t], s, n) == 0)
                        return (ExpandToken) t;
        return _EXPAND_TOKEN_INVALID;
}

_printf_(3, 4) static int fail(char **ret_error, StrBuf *out, const char *fmt, ...) {
        StrBuf e = STRBUF_INIT;
        va_list ap;
        strbuf_done(out);
        va_start(ap, fmt);
        strbuf_vprintf(&e, fmt, ap);
        va_end(ap);
        *ret_error = strbuf_steal(&e);
        return *ret_error ? -EINVAL : -ENOMEM;
}

/* Show at most this much of an offending token in a message. */
#define TOKEN_SHOW_MAX 40

static size_t shown(size_t n) {
        return n > TOKEN_SHOW_MAX ? TOKEN_SHOW_MAX : n;
}

int expand_string(const char *in, const ExpandContext *ctx, char **ret, char **ret_error) {
        StrBuf out = STRBUF_INIT;
        const char *p = in;

        if (p[0] == '~') {
                if (p[1] != '\0' && p[1] != '/')
                        return fail(ret_error, &out,
                                    "'%.*s': only a leading '~' or '~/' is expanded, '~user' is not supported",
                                    (int) shown(strcspn(in, "/")), in);
                if (ctx->home) {
                        strbuf_puts(&out, ctx->home);
                        p++;
                }
        }

        while (*p) {
                if (*p == '}')
                        return fail(ret_error, &out, "unmatched '}'");
                if (*p != '{') {
                        size_t n = strcspn(p, "{}");
                        strbuf_putn(&out, p, n);
                        p += n;
                        continue;
                }
                const char *name = p + 1;
                size_t n = strcspn(name, "{}");
                if (name[n] != '}')
                        return fail(ret_error, &out, "unterminated token '{%.*s': a '{' must open one of the {tokens}",
                                    (int) shown(n), name);
                ExpandToken t = expand_token_from_string(name, n);
                if (t < 0)
                        return fail(ret_error, &out,
                                    "unknown token '{%.*s}' (known: {profile_name}, {profile_dir}, "
                                    "{domain_hash}, {domain_dir}, {workspace_dir})",
                                    (int) shown(n), name);
                if (!ctx->values[t])
                        return fail(ret_error, &out, "token '{%.*s}' cannot be used in this field", (int) n, name);
                strbuf_puts(&out, ctx->values[t]);
                p = name + n + 1;
        }

        char *s = strbuf_steal(&out);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}
