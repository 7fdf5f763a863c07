/* SPDX-License-Identifier: MIT */
/* TOML 1.0.0 parser (see toml.h).
 *
 * One pass over the bytes with a cursor that tracks line and column. The
 * whole document is checked to be UTF-8 before parsing starts, so the parser
 * proper only has to care about which code points are allowed where.
 *
 * Recursion happens only for arrays and inline tables, and every level is
 * counted against max_depth; freeing is iterative.
 *
 * Its length (some 1,300 lines) is the grammar's: one recursive-descent
 * parser over one cursor, with its string, number and date-time scanners;
 * split, each part would need the cursor's internals, and the toml-test
 * corpus checks it as one unit. The value tree it builds is toml-tree.c's. */

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd-util.h"
#include "macro.h"
#include "toml-internal.h"

#define DEFAULT_MAX_DEPTH  128u
#define DEFAULT_MAX_STRING (1024u * 1024u)

/* How much of a key or token an error message quotes. */
#define SHOW_MAX 48u

/* ---- the cursor ----------------------------------------------------------- */

typedef struct Parser {
        const char *data;
        size_t len;
        size_t off;
        TomlPos pos; /* of data[off] */
        size_t max_depth;
        size_t max_string;
        TomlError *error;
        locale_t c_locale; /* for strtod_l(), created on the first float */
} Parser;

static int peek_at(const Parser *p, size_t k) {
        if (k >= p->len - p->off)
                return -1;
        return (unsigned char) p->data[p->off + k];
}

static int peek(const Parser *p) {
        return peek_at(p, 0);
}

static void advance(Parser *p) {
        unsigned char c;

        if (p->off >= p->len)
                return;
        c = (unsigned char) p->data[p->off++];
        if (c == '\n') {
                p->pos.line++;
                p->pos.col = 1;
        } else if ((c & 0xC0) != 0x80) /* count code points, not bytes */
                p->pos.col++;
}

static int fail_at(Parser *p, TomlPos pos, int r, const char *fmt, ...) _printf_(4, 5);
static int fail_at(Parser *p, TomlPos pos, int r, const char *fmt, ...) {
        va_list ap;

        p->error->pos = pos;
        va_start(ap, fmt);
        vsnprintf(p->error->message, sizeof(p->error->message), fmt, ap);
        va_end(ap);
        return r;
}

#define fail(p, r, ...) fail_at((p), (p)->pos, (r), __VA_ARGS__)

static int fail_oom(Parser *p) {
        return fail(p, -ENOMEM, "out of memory");
}

static bool is_digit(int c) {
        return c >= '0' && c <= '9';
}

static bool is_bare_key_char(int c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
}

/* Control characters that may not appear literally anywhere (tab may). */
static bool is_control(int c) {
        return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7F;
}

/* The code point at the cursor; the document is valid UTF-8 by now. */
static uint32_t decode_cur(const Parser *p) {
        const unsigned char *s = (const unsigned char *) p->data + p->off;
        size_t left = p->len - p->off, n;
        uint32_t cp;

        if (s[0] < 0x80)
                return s[0];
        n = s[0] >= 0xF0 ? 3 : s[0] >= 0xE0 ? 2 : 1;
        cp = s[0] & (0x3Fu >> n);
        for (size_t i = 1; i <= n && i < left; i++)
                cp = (cp << 6) | (s[i] & 0x3Fu);
        return cp;
}

/* "end of file", "'x'" or "U+000C", for "expected ..., found ..." messages. */
static const char *describe_cur(const Parser *p, char *buf, size_t size) {
        int c = peek(p);

        if (c < 0)
                return "end of file";
        if (c == '\n' || (c == '\r' && peek_at(p, 1) == '\n'))
                return "end of line";
        if (c >= 0x20 && c < 0x7F)
                snprintf(buf, size, "'%c'", c);
        else
                snprintf(buf, size, "U+%04" PRIX32, decode_cur(p));
        return buf;
}

#define FOUND(p) describe_cur((p), (char[16]){ 0 }, 16)

/* Render bytes for a message: printable ones (and UTF-8) as they are, the
 * rest as \xNN, cut after about SHOW_MAX bytes. */
static void show_bytes(char *buf, size_t size, const char *s, size_t len) {
        size_t o = 0;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                if (o + 8 >= size)
                        break;
                if (o >= SHOW_MAX && (c & 0xC0) != 0x80) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\')
                        o += (size_t) snprintf(buf + o, size - o, "\\x%02X", c);
                else
                        buf[o++] = (char) c;
        }
        buf[o] = '\0';
}

/* ---- whitespace, newlines, comments --------------------------------------- */

static void skip_ws(Parser *p) {
        while (peek(p) == ' ' || peek(p) == '\t')
                advance(p);
}

/* Returns 1 if a newline (LF or CRLF) was consumed, 0 if there is none. */
static int eat_newline(Parser *p) {
        int c = peek(p);

        if (c == '\n') {
                advance(p);
                return 1;
        }
        if (c == '\r') {
                if (peek_at(p, 1) != '\n')
                        return fail(p, -EINVAL, "carriage return must be followed by a newline");
                advance(p);
                advance(p);
                return 1;
        }
        return 0;
}

/* At '#': consume the comment, not the newline. */
static int skip_comment(Parser *p) {
        advance(p);
        for (;;) {
                int c = peek(p);
                if (c < 0 || c == '\n' || (c == '\r' && peek_at(p, 1) == '\n'))
                        return 0;
                if (is_control(c))
                        return fail(p, -EINVAL, "control character U+%04X is not allowed in a comment", (unsigned) c);
                advance(p);
        }
}

/* Inside arrays: whitespace, comments and newlines in any mix. */
static int skip_ws_comments_newlines(Parser *p) {
        for (;;) {
                int r;

                skip_ws(p);
                if (peek(p) == '#') {
                        r = skip_comment(p);
                        if (r < 0)
                                return r;
                }
                r = eat_newline(p);
                if (r <= 0)
                        return r;
        }
}

/* ---- strings -------------------------------------------------------------- */

typedef struct Buf {
        char *data;
        size_t len, cap;
} Buf;

static void buf_done(Buf *b) {
        free(b->data);
}

static int buf_put(Parser *p, Buf *b, const char *s, size_t n, TomlPos start) {
        char *d;

        if (n > p->max_string - b->len)
                return fail_at(p, start, -E2BIG, "string longer than %zu bytes", p->max_string);
        d = grow_array(b->data, &b->cap, b->len + n + 1, 1);
        if (!d)
                return fail_oom(p);
        b->data = d;
        if (n > 0)
                memcpy(d + b->len, s, n);
        b->len += n;
        d[b->len] = '\0';
        return 0;
}

static int buf_steal(Parser *p, Buf *b, char **ret, size_t *ret_len) {
        if (!b->data) {
                b->data = strdup("");
                if (!b->data)
                        return fail_oom(p);
        }
        *ret_len = b->len;
        *ret = TAKE_PTR(b->data);
        return 0;
}

static int hex_value(int c) {
        if (is_digit(c))
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static size_t utf8_encode(uint32_t cp, char out[static 4]) {
        if (cp < 0x80) {
                out[0] = (char) cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char) (0xC0 | (cp >> 6));
                out[1] = (char) (0x80 | (cp & 0x3F));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char) (0xE0 | (cp >> 12));
                out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
                out[2] = (char) (0x80 | (cp & 0x3F));
                return 3;
        }
        out[0] = (char) (0xF0 | (cp >> 18));
        out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char) (0x80 | (cp & 0x3F));
        return 4;
}

/* At a backslash in a basic string. */
static int parse_escape(Parser *p, Buf *b, TomlPos start, bool multiline) {
        TomlPos epos = p->pos;
        char ch, utf8[4];
        int c, r;

        advance(p);
        c = peek(p);
        switch (c) {
        case 'b':
                ch = '\b';
                break;
        case 't':
                ch = '\t';
                break;
        case 'n':
                ch = '\n';
                break;
        case 'f':
                ch = '\f';
                break;
        case 'r':
                ch = '\r';
                break;
        case '"':
                ch = '"';
                break;
        case '\\':
                ch = '\\';
                break;
        case 'u':
        case 'U': {
                int digits = c == 'u' ? 4 : 8;
                uint32_t cp = 0;

                advance(p);
                for (int i = 0; i < digits; i++) {
                        int h = hex_value(peek(p));
                        if (h < 0)
                                return fail_at(p, epos, -EINVAL, "invalid escape: \\%c needs %d hex digits", c, digits);
                        cp = (cp << 4) | (uint32_t) h;
                        advance(p);
                }
                if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                        return fail_at(p, epos, -EINVAL,
                                       "invalid escape: U+%04" PRIX32 " is not a unicode scalar value", cp);
                return buf_put(p, b, utf8, utf8_encode(cp, utf8), start);
        }
        default:
                if (multiline && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
                        /* Line-ending backslash: drop it and all whitespace
                         * and newlines up to the next other character. */
                        skip_ws(p);
                        r = eat_newline(p);
                        if (r < 0)
                                return r;
                        if (r == 0)
                                return fail_at(p, epos, -EINVAL,
                                               "invalid escape: a backslash followed by whitespace must end the line");
                        do {
                                skip_ws(p);
                                r = eat_newline(p);
                                if (r < 0)
                                        return r;
                        } while (r > 0);
                        return 0;
                }
                if (c < 0)
                        return fail_at(p, start, -EINVAL, "unterminated string");
                if (c >= 0x20 && c < 0x7F)
                        return fail_at(p, epos, -EINVAL, "invalid escape sequence '\\%c'", c);
                return fail_at(p, epos, -EINVAL, "invalid escape sequence: backslash followed by %s", FOUND(p));
        }
        advance(p);
        return buf_put(p, b, &ch, 1, start);
}

/* Any of the four string forms, at its opening quote. Keys may use only the
 * single-line ones. Multi-line strings get CRLF normalised to LF. */
static int parse_string(Parser *p, bool key, char **ret, size_t *ret_len) {
        _cleanup_(buf_done) Buf b = {};
        TomlPos start = p->pos;
        int q = peek(p), r;
        bool multi = peek_at(p, 1) == q && peek_at(p, 2) == q;

        if (multi) {
                if (key)
                        return fail(p, -EINVAL, "multi-line strings cannot be used as keys");
                advance(p);
                advance(p);
                advance(p);
                /* A newline right after the opening delimiter is trimmed. */
                r = eat_newline(p);
                if (r < 0)
                        return r;
        } else
                advance(p);

        for (;;) {
                int c = peek(p);
                size_t from;

                if (c < 0)
                        return fail_at(p, start, -EINVAL,
                                       multi ? "unterminated multi-line string" : "unterminated string");

                if (c == q) {
                        size_t n = 1;

                        if (!multi) {
                                advance(p);
                                break;
                        }
                        while (n < 6 && peek_at(p, n) == q)
                                n++;
                        if (n >= 6)
                                return fail(p, -EINVAL, "too many quotes at the end of a multi-line string");
                        /* Up to two quotes may sit right before the closing three. */
                        from = p->off;
                        for (size_t i = 0; i < n; i++)
                                advance(p);
                        if (n < 3) {
                                r = buf_put(p, &b, p->data + from, n, start);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        r = buf_put(p, &b, p->data + from, n - 3, start);
                        if (r < 0)
                                return r;
                        break;
                }

                if (c == '\\' && q == '"') {
                        r = parse_escape(p, &b, start, multi);
                        if (r < 0)
                                return r;
                        continue;
                }

                if (c == '\n' || (c == '\r' && peek_at(p, 1) == '\n')) {
                        if (!multi)
                                return fail_at(p, start, -EINVAL, "unterminated string");
                        r = eat_newline(p);
                        if (r < 0)
                                return r;
                        r = buf_put(p, &b, "\n", 1, start);
                        if (r < 0)
                                return r;
                        continue;
                }

                if (is_control(c))
                        return fail(p, -EINVAL, "control character U+%04X is not allowed in a string", (unsigned) c);

                /* A run of ordinary bytes, copied at once. It holds no
                 * newline (a control character ends it), so only the
                 * column moves: by its code points (advance()'s count). */
                from = p->off;
                const unsigned char *d = (const unsigned char *) p->data;
                size_t i = from;
                unsigned cols = 0;
                for (; i < p->len; i++) {
                        unsigned char ch = d[i];
                        if (ch == q || (ch == '\\' && q == '"') || is_control(ch))
                                break;
                        cols += (ch & 0xC0) != 0x80;
                }
                p->off = i;
                p->pos.col += cols;
                r = buf_put(p, &b, p->data + from, p->off - from, start);
                if (r < 0)
                        return r;
        }

        return buf_steal(p, &b, ret, ret_len);
}

/* ---- keys ----------------------------------------------------------------- */

typedef struct KeyPart {
        char *s;
        size_t len;
        TomlPos pos;
} KeyPart;

typedef struct Key {
        KeyPart *parts;
        size_t n, cap;
} Key;

static void key_done(Key *k) {
        for (size_t i = 0; i < k->n; i++)
                free(k->parts[i].s);
        free(k->parts);
}

/* "a.b.\"c d\"": the first upto+1 parts of a key, for messages. Returns buf. */
static const char *show_path(char *buf, size_t size, const Key *k, size_t upto) {
        size_t o = 0;

        buf[0] = '\0';
        for (size_t i = 0; i <= upto && i < k->n && o + 16 < size; i++) {
                const KeyPart *part = &k->parts[i];
                bool bare = part->len > 0;

                for (size_t j = 0; j < part->len; j++)
                        if (!is_bare_key_char((unsigned char) part->s[j]))
                                bare = false;
                if (i > 0)
                        buf[o++] = '.';
                if (!bare)
                        buf[o++] = '"';
                show_bytes(buf + o, size - o - 2, part->s, part->len);
                o += strlen(buf + o);
                if (!bare)
                        buf[o++] = '"';
                buf[o] = '\0';
        }
        return buf;
}

#define PATH(k, upto) show_path((char[128]){ 0 }, 128, (k), (upto))

/* A simple or dotted key. depth is that of the table the key is relative to;
 * each part adds a level. */
static int parse_key(Parser *p, size_t depth, Key *k) {
        for (;;) {
                KeyPart part = { .pos = p->pos };
                KeyPart *parts;
                int c = peek(p), r;

                if (c == '"' || c == '\'') {
                        r = parse_string(p, true, &part.s, &part.len);
                        if (r < 0)
                                return r;
                } else if (is_bare_key_char(c)) {
                        size_t from = p->off;

                        while (is_bare_key_char(peek(p)))
                                advance(p);
                        part.len = p->off - from;
                        if (part.len > p->max_string)
                                return fail_at(p, part.pos, -E2BIG, "key longer than %zu bytes", p->max_string);
                        part.s = memdup_nul(p->data + from, part.len);
                        if (!part.s)
                                return fail_oom(p);
                } else if (k->n == 0)
                        return fail(p, -EINVAL, "expected a key, found %s", FOUND(p));
                else
                        return fail(p, -EINVAL, "expected a key after '.', found %s", FOUND(p));

                if (k->n + 1 > p->max_depth - depth) {
                        free(part.s);
                        return fail_at(p, part.pos, -E2BIG, "nesting too deep (limit %zu)", p->max_depth);
                }
                parts = grow_array(k->parts, &k->cap, k->n + 1, sizeof(KeyPart));
                if (!parts) {
                        free(part.s);
                        return fail_oom(p);
                }
                k->parts = parts;
                k->parts[k->n++] = part;

                skip_ws(p);
                if (peek(p) != '.')
                        return 0;
                advance(p);
                skip_ws(p);
        }
}

/* ---- scalars -------------------------------------------------------------- */

static int new_scalar(Parser *p, TomlType type, TomlPos pos, TomlNode **ret) {
        TomlNode *n = node_new(type, pos);
        if (!n)
                return fail_oom(p);
        *ret = n;
        return 0;
}

static bool all_digits(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!is_digit((unsigned char) s[i]))
                        return false;
        return true;
}

static int two_digits(const char *s) {
        return (s[0] - '0') * 10 + (s[1] - '0');
}

static int days_in_month(int year, int month) {
        static const int days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

        if (month == 2 && year % 4 == 0 && (year % 100 != 0 || year % 400 == 0))
                return 29;
        return days[month - 1];
}

static bool looks_like_date(const char *s, size_t n) {
        return n >= 10 && all_digits(s, 4) && s[4] == '-' && all_digits(s + 5, 2) && s[7] == '-' &&
               all_digits(s + 8, 2);
}

#define SHOWN(n) ((int) ((n) < SHOW_MAX ? (n) : SHOW_MAX))

/* A date, time or date-time token; s[0..n) holds only [0-9A-Za-z_+.:-] and
 * possibly the one space allowed between date and time. */
static int parse_datetime(Parser *p, const char *s, size_t n, TomlPos pos, TomlNode **ret) {
        TomlDatetime dt = {};
        TomlType type;
        bool has_date = false;
        size_t i = 0;
        int r;

        if (looks_like_date(s, n)) {
                dt.year = two_digits(s) * 100 + two_digits(s + 2);
                dt.month = two_digits(s + 5);
                dt.day = two_digits(s + 8);
                if (dt.month < 1 || dt.month > 12)
                        return fail_at(p, pos, -EINVAL, "invalid date '%.*s': month out of range", SHOWN(n), s);
                if (dt.day < 1 || dt.day > days_in_month(dt.year, dt.month))
                        return fail_at(p, pos, -EINVAL, "invalid date '%.*s': day out of range", SHOWN(n), s);
                has_date = true;
                i = 10;
                if (i == n) {
                        type = TOML_DATE_LOCAL;
                        goto done;
                }
                if (s[i] != 'T' && s[i] != 't' && s[i] != ' ')
                        return fail_at(p, pos, -EINVAL, "invalid date-time '%.*s'", SHOWN(n), s);
                i++;
        } else if (!(n >= 3 && all_digits(s, 2) && s[2] == ':'))
                return fail_at(p, pos, -EINVAL, memchr(s, '-', n) ? "invalid date '%.*s'" : "invalid time '%.*s'",
                               SHOWN(n), s);

        if (n - i < 8 || !all_digits(s + i, 2) || s[i + 2] != ':' || !all_digits(s + i + 3, 2) || s[i + 5] != ':' ||
            !all_digits(s + i + 6, 2))
                return fail_at(p, pos, -EINVAL, "invalid time in '%.*s': expected HH:MM:SS", SHOWN(n), s);
        dt.hour = two_digits(s + i);
        dt.minute = two_digits(s + i + 3);
        dt.second = two_digits(s + i + 6);
        /* 60 is a leap second, which RFC 3339 allows. */
        if (dt.hour > 23 || dt.minute > 59 || dt.second > 60)
                return fail_at(p, pos, -EINVAL, "invalid time in '%.*s': out of range", SHOWN(n), s);
        i += 8;

        if (i < n && s[i] == '.') {
                size_t digits = 0;

                i++;
                for (; i < n && is_digit((unsigned char) s[i]); i++, digits++)
                        if (digits < 9)
                                dt.nanosecond = dt.nanosecond * 10 + (uint32_t) (s[i] - '0');
                if (digits == 0)
                        return fail_at(p, pos, -EINVAL, "invalid time in '%.*s': no digits after '.'", SHOWN(n), s);
                for (; digits < 9; digits++)
                        dt.nanosecond *= 10;
        }

        if (i == n) {
                type = has_date ? TOML_DATETIME_LOCAL : TOML_TIME_LOCAL;
                goto done;
        }
        if (!has_date)
                return fail_at(p, pos, -EINVAL, "invalid local time '%.*s'", SHOWN(n), s);

        if (s[i] == 'Z' || s[i] == 'z') {
                dt.offset_minutes = 0;
                i++;
        } else if ((s[i] == '+' || s[i] == '-') && n - i >= 6 && all_digits(s + i + 1, 2) && s[i + 3] == ':' &&
                   all_digits(s + i + 4, 2)) {
                int oh = two_digits(s + i + 1), om = two_digits(s + i + 4);

                if (oh > 23 || om > 59)
                        return fail_at(p, pos, -EINVAL, "invalid date-time '%.*s': offset out of range", SHOWN(n), s);
                dt.offset_minutes = (s[i] == '-' ? -1 : 1) * (oh * 60 + om);
                i += 6;
        } else
                return fail_at(p, pos, -EINVAL, "invalid date-time '%.*s'", SHOWN(n), s);
        if (i != n)
                return fail_at(p, pos, -EINVAL, "invalid date-time '%.*s'", SHOWN(n), s);
        type = TOML_DATETIME;

done:
        r = new_scalar(p, type, pos, ret);
        if (r < 0)
                return r;
        (*ret)->v.dt = dt;
        return 0;
}

static int digit_value(int c, unsigned base) {
        int v = hex_value(c);
        return v >= 0 && (unsigned) v < base ? v : -1;
}

/* DIGIT *( DIGIT / "_" DIGIT ) in base, from s[*i]. */
static bool scan_digits(const char *s, size_t n, size_t *i, unsigned base) {
        size_t j = *i;

        if (j >= n || digit_value((unsigned char) s[j], base) < 0)
                return false;
        for (j++; j < n; j++) {
                if (digit_value((unsigned char) s[j], base) >= 0)
                        continue;
                if (s[j] != '_')
                        break;
                if (j + 1 >= n || digit_value((unsigned char) s[j + 1], base) < 0)
                        return false;
        }
        *i = j;
        return true;
}

static int make_integer(Parser *p, const char *s, size_t n, unsigned base, bool negative, TomlPos pos, const char *tok,
                        size_t tok_len, TomlNode **ret) {
        uint64_t limit = negative ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX, u = 0;
        int r;

        for (size_t i = 0; i < n; i++) {
                int d = digit_value((unsigned char) s[i], base);
                if (d < 0)
                        continue; /* underscore */
                if (u > (limit - (uint64_t) d) / base)
                        return fail_at(p, pos, -EINVAL, "integer '%.*s' out of range", SHOWN(tok_len), tok);
                u = u * base + (uint64_t) d;
        }

        r = new_scalar(p, TOML_INTEGER, pos, ret);
        if (r < 0)
                return r;
        if (!negative)
                (*ret)->v.integer = (int64_t) u;
        else if (u == (uint64_t) INT64_MAX + 1)
                (*ret)->v.integer = INT64_MIN;
        else
                (*ret)->v.integer = -(int64_t) u;
        return 0;
}

static int make_float(Parser *p, const char *s, size_t n, TomlPos pos, TomlNode **ret) {
        _cleanup_free_ char *clean = NULL;
        size_t m = 0;
        char *end;
        double d;
        int r;

        clean = malloc(n + 1);
        if (!clean)
                return fail_oom(p);
        for (size_t i = 0; i < n; i++)
                if (s[i] != '_')
                        clean[m++] = s[i];
        clean[m] = '\0';

        /* strtod() obeys LC_NUMERIC; strtod_l() with a private "C" locale
         * does not care what the program did with setlocale(). */
        if (p->c_locale == (locale_t) 0) {
                p->c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t) 0);
                if (p->c_locale == (locale_t) 0)
                        return fail_oom(p);
        }
        errno = 0;
        d = strtod_l(clean, &end, p->c_locale);
        if (end != clean + m)
                return fail_at(p, pos, -EINVAL, "invalid float '%.*s'", SHOWN(n), s);
        if (errno == ERANGE && isinf(d))
                return fail_at(p, pos, -EINVAL, "float '%.*s' out of range", SHOWN(n), s);

        r = new_scalar(p, TOML_FLOAT, pos, ret);
        if (r < 0)
                return r;
        (*ret)->v.flt = d;
        return 0;
}

static int parse_number(Parser *p, const char *s, size_t n, TomlPos pos, TomlNode **ret) {
        const char *what =
                is_digit((unsigned char) s[0]) || s[0] == '+' || s[0] == '-' || s[0] == '.' ? "number" : "value";
        bool negative = false, signed_ = false, is_float = false;
        size_t i = 0, j;
        int r;

        if (s[0] == '+' || s[0] == '-') {
                signed_ = true;
                negative = s[0] == '-';
                i = 1;
        }

        if (n - i == 3 && (memcmp(s + i, "inf", 3) == 0 || memcmp(s + i, "nan", 3) == 0)) {
                double d = s[i] == 'i' ? INFINITY : NAN;

                r = new_scalar(p, TOML_FLOAT, pos, ret);
                if (r < 0)
                        return r;
                (*ret)->v.flt = negative ? -d : d;
                return 0;
        }

        if (n - i > 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'o' || s[i + 1] == 'b')) {
                unsigned base = s[i + 1] == 'x' ? 16 : s[i + 1] == 'o' ? 8 : 2;

                if (signed_)
                        return fail_at(p, pos, -EINVAL,
                                       "invalid number '%.*s': hexadecimal, octal and binary integers take no sign",
                                       SHOWN(n), s);
                j = i + 2;
                if (!scan_digits(s, n, &j, base) || j != n)
                        return fail_at(p, pos, -EINVAL, "invalid integer '%.*s'", SHOWN(n), s);
                return make_integer(p, s + i + 2, n - i - 2, base, false, pos, s, n, ret);
        }

        j = i;
        if (!scan_digits(s, n, &j, 10))
                return fail_at(p, pos, -EINVAL, "invalid %s '%.*s'", what, SHOWN(n), s);
        if (s[i] == '0' && j - i > 1)
                return fail_at(p, pos, -EINVAL, "invalid number '%.*s': leading zeros are not allowed", SHOWN(n), s);
        if (j == n)
                return make_integer(p, s + i, n - i, 10, negative, pos, s, n, ret);

        if (s[j] == '.') {
                j++;
                if (!scan_digits(s, n, &j, 10))
                        return fail_at(p, pos, -EINVAL, "invalid float '%.*s'", SHOWN(n), s);
                is_float = true;
        }
        if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                j++;
                if (j < n && (s[j] == '+' || s[j] == '-'))
                        j++;
                if (!scan_digits(s, n, &j, 10))
                        return fail_at(p, pos, -EINVAL, "invalid float '%.*s'", SHOWN(n), s);
                is_float = true;
        }
        if (!is_float || j != n)
                return fail_at(p, pos, -EINVAL, "invalid %s '%.*s'", what, SHOWN(n), s);
        return make_float(p, s, n, pos, ret);
}

static bool is_scalar_char(int c) {
        return is_bare_key_char(c) || c == '+' || c == '.' || c == ':';
}

/* Booleans, numbers and date-times: scan the token, then classify it. */
static int parse_scalar(Parser *p, TomlNode **ret) {
        TomlPos pos = p->pos;
        size_t from = p->off, n, lead = 0;
        const char *s;
        int r;

        while (is_scalar_char(peek(p)))
                advance(p);
        /* "1979-05-27 07:32:00": RFC 3339 lets a space separate date and time. */
        if (p->off - from == 10 && looks_like_date(p->data + from, 10) && peek(p) == ' ' && is_digit(peek_at(p, 1)) &&
            is_digit(peek_at(p, 2)) && peek_at(p, 3) == ':') {
                advance(p);
                while (is_scalar_char(peek(p)))
                        advance(p);
        }

        s = p->data + from;
        n = p->off - from;
        if (n == 0)
                return fail(p, -EINVAL, "expected a value, found %s", FOUND(p));

        if ((n == 4 && memcmp(s, "true", 4) == 0) || (n == 5 && memcmp(s, "false", 5) == 0)) {
                r = new_scalar(p, TOML_BOOL, pos, ret);
                if (r < 0)
                        return r;
                (*ret)->v.boolean = n == 4;
                return 0;
        }

        while (lead < n && is_digit((unsigned char) s[lead]))
                lead++;
        if (lead > 0 && lead < n && (s[lead] == '-' || s[lead] == ':'))
                return parse_datetime(p, s, n, pos, ret);
        return parse_number(p, s, n, pos, ret);
}

/* ---- values, arrays, inline tables ---------------------------------------- */

static int parse_keyval(Parser *p, TomlNode *table, size_t depth);
static int parse_value(Parser *p, size_t depth, TomlNode **ret);

static int parse_array(Parser *p, size_t depth, TomlNode **ret) {
        _cleanup_(node_freep) TomlNode *a = NULL;
        int r;

        a = node_new(TOML_ARRAY, p->pos);
        if (!a)
                return fail_oom(p);
        advance(p);

        for (;;) {
                _cleanup_(node_freep) TomlNode *item = NULL;

                r = skip_ws_comments_newlines(p);
                if (r < 0)
                        return r;
                if (peek(p) == ']')
                        break;

                r = parse_value(p, depth + 1, &item);
                if (r < 0)
                        return r;
                if (array_push(a, item) < 0)
                        return fail_oom(p);
                TAKE_PTR(item);

                r = skip_ws_comments_newlines(p);
                if (r < 0)
                        return r;
                if (peek(p) == ']')
                        break;
                if (peek(p) != ',')
                        return fail(p, -EINVAL, "expected ',' or ']' after array element, found %s", FOUND(p));
                advance(p);
        }
        advance(p);

        *ret = TAKE_PTR(a);
        return 0;
}

static int parse_inline_table(Parser *p, size_t depth, TomlNode **ret) {
        _cleanup_(node_freep) TomlNode *t = NULL;
        int r;

        t = node_new(TOML_TABLE, p->pos);
        if (!t)
                return fail_oom(p);
        t->flags = NODE_INLINE;
        advance(p);
        skip_ws(p);

        if (peek(p) != '}')
                for (;;) {
                        r = parse_keyval(p, t, depth);
                        if (r < 0)
                                return r;
                        skip_ws(p);
                        if (peek(p) == '}')
                                break;
                        if (peek(p) != ',')
                                return fail(p, -EINVAL, "expected ',' or '}' in inline table, found %s", FOUND(p));
                        advance(p);
                        skip_ws(p);
                        if (peek(p) == '}')
                                return fail(p, -EINVAL, "trailing comma is not allowed in an inline table");
                }
        advance(p);

        *ret = TAKE_PTR(t);
        return 0;
}

static int parse_value(Parser *p, size_t depth, TomlNode **ret) {
        TomlPos pos = p->pos;
        TomlNode *n;
        char *s;
        size_t len;
        int r;

        if (depth > p->max_depth)
                return fail(p, -E2BIG, "nesting too deep (limit %zu)", p->max_depth);

        switch (peek(p)) {
        case '"':
        case '\'':
                r = parse_string(p, false, &s, &len);
                if (r < 0)
                        return r;
                n = node_new(TOML_STRING, pos);
                if (!n) {
                        free(s);
                        return fail_oom(p);
                }
                n->v.str.s = s;
                n->v.str.len = len;
                *ret = n;
                return 0;
        case '[':
                return parse_array(p, depth, ret);
        case '{':
                return parse_inline_table(p, depth, ret);
        default:
                return parse_scalar(p, ret);
        }
}

/* Walk one dotted-key part (not the last) down from *t, creating the table
 * if needed. Dotted keys may only extend tables that dotted keys created. */
static int descend_dotted(Parser *p, TomlNode **t, const Key *k, size_t i) {
        const KeyPart *part = &k->parts[i];
        TomlEntry *e = table_find(*t, part->s, part->len);
        TomlNode *v;

        if (!e) {
                _cleanup_(node_freep) TomlNode *n = NULL;
                _cleanup_free_ char *key = NULL;

                n = node_new(TOML_TABLE, part->pos);
                key = memdup_nul(part->s, part->len);
                if (!n || !key)
                        return fail_oom(p);
                n->flags = NODE_DOTTED;
                if (table_add(*t, key, part->len, part->pos, n) < 0)
                        return fail_oom(p);
                TAKE_PTR(key);
                *t = TAKE_PTR(n);
                return 0;
        }

        v = node_of(e->value);
        if (v->v.type == TOML_ARRAY && (v->flags & NODE_AOT))
                return fail_at(p, part->pos, -EINVAL, "cannot extend array of tables '%s' with dotted keys",
                               PATH(k, i));
        if (v->v.type != TOML_TABLE)
                return fail_at(p, part->pos, -EINVAL, "key '%s' is already defined as %s", PATH(k, i),
                               toml_type_with_article(v->v.type));
        if (v->flags & NODE_INLINE)
                return fail_at(p, part->pos, -EINVAL, "cannot extend inline table '%s'", PATH(k, i));
        if (!(v->flags & NODE_DOTTED))
                return fail_at(p, part->pos, -EINVAL, "cannot extend table '%s' with dotted keys", PATH(k, i));
        *t = v;
        return 0;
}

/* key = value, into table (at depth). */
static int parse_keyval(Parser *p, TomlNode *table, size_t depth) {
        _cleanup_(key_done) Key k = {};
        _cleanup_(node_freep) TomlNode *value = NULL;
        TomlNode *t = table;
        KeyPart *last;
        int r;

        r = parse_key(p, depth, &k);
        if (r < 0)
                return r;
        if (peek(p) != '=')
                return fail(p, -EINVAL, "expected '=' after key");
        advance(p);
        skip_ws(p);

        for (size_t i = 0; i + 1 < k.n; i++) {
                r = descend_dotted(p, &t, &k, i);
                if (r < 0)
                        return r;
        }
        last = &k.parts[k.n - 1];
        if (table_find(t, last->s, last->len))
                return fail_at(p, last->pos, -EINVAL, "duplicate key '%s'", PATH(&k, k.n - 1));

        r = parse_value(p, depth + k.n, &value);
        if (r < 0)
                return r;
        if (table_add(t, last->s, last->len, last->pos, value) < 0)
                return fail_oom(p);
        last->s = NULL;
        TAKE_PTR(value);
        return 0;
}

/* ---- table headers -------------------------------------------------------- */

static int new_aot_element(Parser *p, TomlNode *array, TomlPos pos, TomlNode **ret) {
        TomlNode *elem = node_new(TOML_TABLE, pos);

        if (!elem)
                return fail_oom(p);
        elem->flags = NODE_DEFINED;
        if (array_push(array, elem) < 0) {
                toml_free(&elem->v);
                return fail_oom(p);
        }
        *ret = elem;
        return 0;
}

/* [a.b] or [[a.b]]: make the named table current. */
static int parse_header(Parser *p, TomlNode *root, TomlNode **ret_table, size_t *ret_depth) {
        _cleanup_(key_done) Key k = {};
        TomlPos pos = p->pos;
        TomlNode *t = root;
        size_t depth = 0;
        bool aot = false;
        int r;

        advance(p);
        if (peek(p) == '[') {
                aot = true;
                advance(p);
        }
        skip_ws(p);
        r = parse_key(p, 0, &k);
        if (r < 0)
                return r;
        if (peek(p) != ']')
                return fail(p, -EINVAL, "expected ']' after table name, found %s", FOUND(p));
        advance(p);
        if (aot) {
                if (peek(p) != ']')
                        return fail(p, -EINVAL, "expected ']]' after array of tables name, found %s", FOUND(p));
                advance(p);
        }

        for (size_t i = 0; i < k.n; i++) {
                KeyPart *part = &k.parts[i];
                bool last = i + 1 == k.n;
                TomlEntry *e = table_find(t, part->s, part->len);
                TomlNode *v;

                depth++;
                if (depth > p->max_depth)
                        return fail_at(p, part->pos, -E2BIG, "nesting too deep (limit %zu)", p->max_depth);

                if (!e) {
                        _cleanup_(node_freep) TomlNode *n = NULL;
                        _cleanup_free_ char *key = NULL;

                        n = node_new(last && aot ? TOML_ARRAY : TOML_TABLE, pos);
                        if (!n)
                                return fail_oom(p);
                        n->flags = last ? (aot ? NODE_AOT : NODE_DEFINED) : NODE_IMPLICIT;
                        key = memdup_nul(part->s, part->len);
                        if (!key || table_add(t, key, part->len, part->pos, n) < 0)
                                return fail_oom(p);
                        TAKE_PTR(key);
                        v = TAKE_PTR(n);
                        if (!(last && aot)) {
                                t = v;
                                continue;
                        }
                        depth++;
                        if (depth > p->max_depth)
                                return fail_at(p, part->pos, -E2BIG, "nesting too deep (limit %zu)", p->max_depth);
                        r = new_aot_element(p, v, pos, &t);
                        if (r < 0)
                                return r;
                        continue;
                }

                v = node_of(e->value);
                if (v->v.type == TOML_TABLE) {
                        if (v->flags & NODE_INLINE)
                                return fail_at(p, part->pos, -EINVAL, "cannot extend inline table '%s'", PATH(&k, i));
                        if (last && aot)
                                return fail_at(p, part->pos, -EINVAL, "key '%s' is already defined as a table",
                                               PATH(&k, i));
                        if (last) {
                                if (v->flags & NODE_DOTTED)
                                        return fail_at(p, part->pos, -EINVAL,
                                                       "table '%s' is already defined by dotted keys", PATH(&k, i));
                                if (!(v->flags & NODE_IMPLICIT))
                                        return fail_at(p, part->pos, -EINVAL, "duplicate table '%s'", PATH(&k, i));
                                v->flags = (v->flags & ~NODE_IMPLICIT) | NODE_DEFINED;
                                v->v.pos = pos;
                        }
                        t = v;
                        continue;
                }

                if (v->v.type != TOML_ARRAY)
                        return fail_at(p, part->pos, -EINVAL, "key '%s' is already defined as %s", PATH(&k, i),
                                       toml_type_with_article(v->v.type));
                if (!(v->flags & NODE_AOT))
                        return fail_at(p, part->pos, -EINVAL, "cannot extend static array '%s'", PATH(&k, i));
                if (last && !aot)
                        return fail_at(p, part->pos, -EINVAL, "key '%s' is already defined as an array of tables",
                                       PATH(&k, i));
                /* Array-of-tables elements are a level of their own. */
                depth++;
                if (depth > p->max_depth)
                        return fail_at(p, part->pos, -E2BIG, "nesting too deep (limit %zu)", p->max_depth);
                if (last) {
                        r = new_aot_element(p, v, pos, &t);
                        if (r < 0)
                                return r;
                } else
                        t = node_of(v->v.array.items[v->v.array.n - 1]);
        }

        *ret_table = t;
        *ret_depth = depth;
        return 0;
}

/* ---- the document --------------------------------------------------------- */

static int validate_utf8(const Parser *p, TomlError *error) {
        const unsigned char *s = (const unsigned char *) p->data;
        size_t i = p->off;

        while (i < p->len) {
                /* ASCII, eight bytes at a time (most of any document). */
                if (p->len - i >= 8) {
                        uint64_t w;
                        memcpy(&w, s + i, sizeof(w));
                        if (!(w & UINT64_C(0x8080808080808080))) {
                                i += 8;
                                continue;
                        }
                }
                unsigned char c = s[i], lo = 0x80, hi = 0xBF;
                size_t need;

                if (c < 0x80) {
                        i++;
                        continue;
                }
                if (c >= 0xC2 && c <= 0xDF)
                        need = 1;
                else if (c == 0xE0) {
                        need = 2;
                        lo = 0xA0; /* overlong */
                } else if (c == 0xED) {
                        need = 2;
                        hi = 0x9F; /* surrogates */
                } else if (c >= 0xE1 && c <= 0xEF)
                        need = 2;
                else if (c == 0xF0) {
                        need = 3;
                        lo = 0x90; /* overlong */
                } else if (c == 0xF4) {
                        need = 3;
                        hi = 0x8F; /* above U+10FFFF */
                } else if (c >= 0xF1 && c <= 0xF3)
                        need = 3;
                else
                        goto bad;

                if (need >= p->len - i || s[i + 1] < lo || s[i + 1] > hi)
                        goto bad;
                for (size_t k = 2; k <= need; k++)
                        if ((s[i + k] & 0xC0) != 0x80)
                                goto bad;
                i += need + 1;
        }
        return 0;

bad:;
        /* Where, counted only now: lines, and code points in the line
         * (everything before the bad byte is valid UTF-8). */
        TomlPos pos = p->pos;
        for (size_t k = p->off; k < i; k++)
                if (s[k] == '\n') {
                        pos.line++;
                        pos.col = 1;
                } else if ((s[k] & 0xC0) != 0x80)
                        pos.col++;
        error->pos = pos;
        snprintf(error->message, sizeof(error->message), "invalid UTF-8 (byte 0x%02X)", s[i]);
        return -EINVAL;
}

static int parse_document(Parser *p, TomlNode *root) {
        TomlNode *cur = root;
        size_t depth = 0;

        for (;;) {
                const char *what = NULL;
                int c, r;

                skip_ws(p);
                c = peek(p);
                if (c < 0)
                        return 0;
                if (c == '[') {
                        r = parse_header(p, root, &cur, &depth);
                        what = "table header";
                } else if (c != '#' && c != '\n' && c != '\r') {
                        r = parse_keyval(p, cur, depth);
                        what = "value";
                } else
                        r = 0;
                if (r < 0)
                        return r;

                skip_ws(p);
                if (peek(p) == '#') {
                        r = skip_comment(p);
                        if (r < 0)
                                return r;
                }
                if (peek(p) < 0)
                        return 0;
                r = eat_newline(p);
                if (r < 0)
                        return r;
                if (r == 0)
                        return fail(p, -EINVAL, "expected newline after %s, found %s", what ?: "comment", FOUND(p));
        }
}

int toml_parse(const char *data, size_t len, const TomlLimits *limits, TomlValue **ret_root, TomlError *ret_error) {
        _cleanup_(node_freep) TomlNode *root = NULL;
        TomlError error = {};
        Parser p = {
                .data = data,
                .len = data ? len : 0,
                .pos = { 1, 1 },
                .max_depth = DEFAULT_MAX_DEPTH,
                .max_string = DEFAULT_MAX_STRING,
                .error = &error,
        };
        int r;

        if (!ret_root || (!data && len > 0)) {
                r = fail(&p, -EINVAL, "invalid arguments");
                goto finish;
        }
        if (limits && limits->max_depth > 0)
                p.max_depth = limits->max_depth < TOML_DEPTH_HARD_MAX ? limits->max_depth : TOML_DEPTH_HARD_MAX;
        if (limits && limits->max_string > 0)
                p.max_string = limits->max_string;

        /* A byte order mark is allowed at the very start and is not text. */
        if (p.len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
                p.off = 3;

        r = validate_utf8(&p, &error);
        if (r < 0)
                goto finish;

        root = node_new(TOML_TABLE, p.pos);
        if (!root) {
                r = fail_oom(&p);
                goto finish;
        }
        root->flags = NODE_DEFINED;
        r = parse_document(&p, root);

finish:
        if (p.c_locale != (locale_t) 0)
                freelocale(p.c_locale);
        if (r < 0) {
                if (ret_error)
                        *ret_error = error;
                return r;
        }
        *ret_root = &TAKE_PTR(root)->v;
        return 0;
}
