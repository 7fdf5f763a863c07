/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "prompt-text.h"
#include "toml-write.h"

static void write_string(StrBuf *b, const char *s, size_t n) {
        strbuf_putc(b, '"');
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                switch (c) {
                case '"':
                        strbuf_puts(b, "\\\"");
                        break;
                case '\\':
                        strbuf_puts(b, "\\\\");
                        break;
                case '\n':
                        strbuf_puts(b, "\\n");
                        break;
                case '\t':
                        strbuf_puts(b, "\\t");
                        break;
                default: {
                        if (c < 0x20 || c == 0x7f) {
                                strbuf_printf(b, "\\u%04x", c);
                                break;
                        }
                        /* What prompt-text shows escaped (C1 controls, bidi
                         * marks, invisible characters) as TOML's own escape:
                         * a terminal reads U+009B as CSI, and the same value
                         * parses back. */
                        uint32_t cp = 0;
                        size_t k = c < 0x80 ? 1 : prompt_utf8_decode(s + i, n - i, &cp);
                        if (k > 1 && prompt_char_invisible(cp)) {
                                strbuf_printf(b, cp > 0xffff ? "\\U%08" PRIx32 : "\\u%04" PRIx32, cp);
                                i += k - 1;
                        } else if (k > 1) {
                                strbuf_putn(b, s + i, k);
                                i += k - 1;
                        } else
                                strbuf_putc(b, (char) c); /* ASCII, or not UTF-8 (no parsed value is) */
                }
                }
        }
        strbuf_putc(b, '"');
}

void toml_write_key(StrBuf *b, const char *key) {
        bool bare = *key != '\0';
        for (const char *k = key; *k; k++)
                if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '_' ||
                      *k == '-'))
                        bare = false;
        if (bare)
                strbuf_puts(b, key);
        else
                write_string(b, key, strlen(key));
}

static void write_datetime(StrBuf *b, const TomlValue *v) {
        const TomlDatetime *d = &v->dt;
        bool date = v->type != TOML_TIME_LOCAL, time = v->type != TOML_DATE_LOCAL;
        if (date)
                strbuf_printf(b, "%04d-%02d-%02d", d->year, d->month, d->day);
        if (date && time)
                strbuf_putc(b, 'T');
        if (time) {
                strbuf_printf(b, "%02d:%02d:%02d", d->hour, d->minute, d->second);
                if (d->nanosecond) {
                        char frac[16];
                        snprintf(frac, sizeof(frac), "%09" PRIu32, d->nanosecond);
                        size_t n = strlen(frac);
                        while (n > 1 && frac[n - 1] == '0')
                                frac[--n] = '\0';
                        strbuf_printf(b, ".%s", frac);
                }
        }
        if (v->type == TOML_DATETIME) {
                if (d->offset_minutes == 0)
                        strbuf_putc(b, 'Z');
                else {
                        int off = d->offset_minutes < 0 ? -d->offset_minutes : d->offset_minutes;
                        strbuf_printf(b, "%c%02d:%02d", d->offset_minutes < 0 ? '-' : '+', off / 60, off % 60);
                }
        }
}

static void write_float(StrBuf *b, double f) {
        if (isnan(f))
                strbuf_puts(b, "nan");
        else if (isinf(f))
                strbuf_puts(b, f < 0 ? "-inf" : "inf");
        else {
                char buf[64];
                snprintf(buf, sizeof(buf), "%.17g", f);
                strbuf_puts(b, buf);
                if (!strpbrk(buf, ".eE"))
                        strbuf_puts(b, ".0");
        }
}

void toml_write_value(StrBuf *b, const TomlValue *v) {
        switch (v->type) {
        case TOML_STRING:
                write_string(b, v->str.s, v->str.len);
                break;
        case TOML_INTEGER:
                strbuf_printf(b, "%" PRId64, v->integer);
                break;
        case TOML_FLOAT:
                write_float(b, v->flt);
                break;
        case TOML_BOOL:
                strbuf_puts(b, v->boolean ? "true" : "false");
                break;
        case TOML_DATETIME:
        case TOML_DATETIME_LOCAL:
        case TOML_DATE_LOCAL:
        case TOML_TIME_LOCAL:
                write_datetime(b, v);
                break;
        case TOML_ARRAY:
                strbuf_putc(b, '[');
                for (size_t i = 0; i < v->array.n; i++) {
                        if (i)
                                strbuf_puts(b, ", ");
                        toml_write_value(b, v->array.items[i]);
                }
                strbuf_putc(b, ']');
                break;
        case TOML_TABLE:
                strbuf_putc(b, '{');
                for (size_t i = 0; i < v->table.n; i++) {
                        strbuf_puts(b, i ? ", " : " ");
                        toml_write_key(b, v->table.entries[i].key);
                        strbuf_puts(b, " = ");
                        toml_write_value(b, v->table.entries[i].value);
                }
                strbuf_puts(b, v->table.n ? " }" : "}");
                break;
        case _TOML_TYPE_MAX:
        case _TOML_TYPE_INVALID:
                break;
        }
}

json_t *toml_to_json(const TomlValue *v) {
        switch (v->type) {
        case TOML_STRING:
                return json_stringn(v->str.s, v->str.len);
        case TOML_INTEGER:
                return json_integer((json_int_t) v->integer);
        case TOML_FLOAT:
                if (isnan(v->flt))
                        return json_string("nan");
                if (isinf(v->flt))
                        return json_string(v->flt < 0 ? "-inf" : "inf");
                return json_real(v->flt);
        case TOML_BOOL:
                return json_boolean(v->boolean);
        case TOML_DATETIME:
        case TOML_DATETIME_LOCAL:
        case TOML_DATE_LOCAL:
        case TOML_TIME_LOCAL: {
                StrBuf b = STRBUF_INIT;
                write_datetime(&b, v);
                char *s = strbuf_steal(&b);
                json_t *j = s ? json_string(s) : NULL;
                free(s);
                return j;
        }
        case TOML_ARRAY: {
                json_t *a = json_array();
                for (size_t i = 0; a && i < v->array.n; i++)
                        if (json_array_append_new(a, toml_to_json(v->array.items[i])) < 0) {
                                json_decref(a);
                                return NULL;
                        }
                return a;
        }
        case TOML_TABLE: {
                json_t *o = json_object();
                for (size_t i = 0; o && i < v->table.n; i++)
                        if (json_object_setn_new(o, v->table.entries[i].key, v->table.entries[i].key_len,
                                                 toml_to_json(v->table.entries[i].value)) < 0) {
                                json_decref(o);
                                return NULL;
                        }
                return o;
        }
        case _TOML_TYPE_MAX:
        case _TOML_TYPE_INVALID:
                break;
        }
        return NULL;
}
