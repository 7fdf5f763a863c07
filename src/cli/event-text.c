/* SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "event-text.h"
#include "fd-util.h"
#include "prompt-text.h"
#include "strbuf.h"

static void put_string(StrBuf *b, const char *s, size_t len, bool quote) {
        quote = quote || len == 0 || strpbrk(s, " \"=") != NULL || memchr(s, '\0', len) != NULL;
        _cleanup_free_ char *vis = prompt_visible(s, len);
        if (!vis) {
                strbuf_puts(b, "?");
                return;
        }
        if (!quote) {
                strbuf_puts(b, vis);
                return;
        }
        strbuf_putc(b, '"');
        for (const char *p = vis; *p; p++) {
                if (*p == '"')
                        strbuf_putc(b, '\\');
                strbuf_putc(b, *p);
        }
        strbuf_putc(b, '"');
}

static void put_value(StrBuf *b, json_t *v, unsigned depth) {
        if (json_is_string(v)) {
                put_string(b, json_string_value(v), json_string_length(v), depth > 0);
                return;
        }
        if (json_is_array(v) && depth < 4) {
                size_t i;
                json_t *x;
                strbuf_putc(b, '[');
                json_array_foreach(v, i, x) {
                        if (i)
                                strbuf_puts(b, ", ");
                        put_value(b, x, depth + 1);
                }
                strbuf_putc(b, ']');
                return;
        }
        if (json_is_object(v) && depth < 4) {
                const char *k;
                json_t *x;
                bool first = true;
                strbuf_putc(b, '{');
                json_object_foreach(v, k, x) {
                        if (!first)
                                strbuf_puts(b, ", ");
                        first = false;
                        put_string(b, k, strlen(k), false);
                        strbuf_putc(b, '=');
                        put_value(b, x, depth + 1);
                }
                strbuf_putc(b, '}');
                return;
        }
        _cleanup_free_ char *raw =
                json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        put_string(b, raw ? raw : "?", raw ? strlen(raw) : 1, false);
}

char *event_text_data(json_t *data) {
        StrBuf b = STRBUF_INIT;
        const char *k;
        json_t *v;
        json_object_foreach(data, k, v) {
                if (json_is_null(v))
                        continue;
                strbuf_putc(&b, ' ');
                put_string(&b, k, strlen(k), false);
                strbuf_putc(&b, '=');
                put_value(&b, v, 0);
        }
        return strbuf_steal(&b);
}

char *event_text_value(json_t *v) {
        StrBuf b = STRBUF_INIT;
        put_value(&b, v, 0);
        return strbuf_steal(&b);
}
