/* SPDX-License-Identifier: MIT */
/* The toml-test decoder interface (../shared/testdata/toml-test/FORMAT.md):
 * a TOML document on stdin, its tagged JSON encoding on stdout and exit 0,
 * or "toml-decoder: LINE:COL: message" on stderr and exit 1. Exit 2 means the
 * decoder itself failed (I/O, memory), which the test runner treats as a
 * failure either way. */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "toml.h"

#define INPUT_MAX (64u * 1024u * 1024u)

static int read_all(int fd, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;

        for (;;) {
                ssize_t n;

                if (cap - len < 4096) {
                        size_t ncap = cap ? cap * 2 : 65536;
                        char *nbuf;

                        if (ncap > INPUT_MAX + 1)
                                return -EFBIG;
                        nbuf = realloc(buf, ncap);
                        if (!nbuf)
                                return -ENOMEM;
                        buf = nbuf;
                        cap = ncap;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

static void emit_string(FILE *f, const char *s, size_t len) {
        fputc('"', f);
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                switch (c) {
                case '"':
                        fputs("\\\"", f);
                        break;
                case '\\':
                        fputs("\\\\", f);
                        break;
                case '\n':
                        fputs("\\n", f);
                        break;
                case '\t':
                        fputs("\\t", f);
                        break;
                case '\r':
                        fputs("\\r", f);
                        break;
                case '\b':
                        fputs("\\b", f);
                        break;
                case '\f':
                        fputs("\\f", f);
                        break;
                default:
                        /* The parser guarantees UTF-8, so other bytes pass as they are. */
                        if (c < 0x20 || c == 0x7F)
                                fprintf(f, "\\u%04x", c);
                        else
                                fputc(c, f);
                }
        }
        fputc('"', f);
}

/* The shortest %.Ng that reads back to the same double, always spelled as a
 * float (a "." or an exponent), or inf/-inf/nan. */
static void format_float(double d, char *buf, size_t size) {
        if (isnan(d)) {
                snprintf(buf, size, "nan");
                return;
        }
        if (isinf(d)) {
                snprintf(buf, size, d < 0 ? "-inf" : "inf");
                return;
        }
        for (int prec = 15; prec <= 17; prec++) {
                snprintf(buf, size, "%.*g", prec, d);
                if (strtod(buf, NULL) == d)
                        break;
        }
        if (!strpbrk(buf, ".eE"))
                strncat(buf, ".0", size - strlen(buf) - 1);
}

static void emit_fraction(FILE *f, uint32_t ns) {
        char frac[16];
        size_t n;

        if (ns == 0)
                return;
        snprintf(frac, sizeof(frac), "%09" PRIu32, ns);
        n = strlen(frac);
        while (n > 1 && frac[n - 1] == '0')
                n--;
        fprintf(f, ".%.*s", (int) n, frac);
}

static void emit_datetime(FILE *f, const TomlValue *v) {
        const TomlDatetime *dt = &v->dt;
        bool date = v->type != TOML_TIME_LOCAL, time = v->type != TOML_DATE_LOCAL;

        fputc('"', f);
        if (date)
                fprintf(f, "%04d-%02d-%02d", dt->year, dt->month, dt->day);
        if (date && time)
                fputc('T', f);
        if (time) {
                fprintf(f, "%02d:%02d:%02d", dt->hour, dt->minute, dt->second);
                emit_fraction(f, dt->nanosecond);
        }
        if (v->type == TOML_DATETIME) {
                int off = dt->offset_minutes;
                if (off == 0)
                        fputc('Z', f);
                else
                        fprintf(f, "%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 60, abs(off) % 60);
        }
        fputc('"', f);
}

static void emit_value(FILE *f, const TomlValue *v) {
        char buf[64];

        switch (v->type) {
        case TOML_TABLE:
                fputc('{', f);
                for (size_t i = 0; i < v->table.n; i++) {
                        if (i > 0)
                                fputc(',', f);
                        emit_string(f, v->table.entries[i].key, v->table.entries[i].key_len);
                        fputc(':', f);
                        emit_value(f, v->table.entries[i].value);
                }
                fputc('}', f);
                return;
        case TOML_ARRAY:
                fputc('[', f);
                for (size_t i = 0; i < v->array.n; i++) {
                        if (i > 0)
                                fputc(',', f);
                        emit_value(f, v->array.items[i]);
                }
                fputc(']', f);
                return;
        case TOML_STRING:
        case TOML_INTEGER:
        case TOML_FLOAT:
        case TOML_BOOL:
        case TOML_DATETIME:
        case TOML_DATETIME_LOCAL:
        case TOML_DATE_LOCAL:
        case TOML_TIME_LOCAL:
                break;
        case _TOML_TYPE_MAX:
        case _TOML_TYPE_INVALID:
                abort();
        }

        fprintf(f, "{\"type\":\"%s\",\"value\":", toml_type_to_string(v->type));
        switch (v->type) {
        case TOML_STRING:
                emit_string(f, v->str.s, v->str.len);
                break;
        case TOML_INTEGER:
                fprintf(f, "\"%" PRId64 "\"", v->integer);
                break;
        case TOML_FLOAT:
                format_float(v->flt, buf, sizeof(buf));
                fprintf(f, "\"%s\"", buf);
                break;
        case TOML_BOOL:
                fputs(v->boolean ? "\"true\"" : "\"false\"", f);
                break;
        case TOML_DATETIME:
        case TOML_DATETIME_LOCAL:
        case TOML_DATE_LOCAL:
        case TOML_TIME_LOCAL:
                emit_datetime(f, v);
                break;
        case TOML_ARRAY:
        case TOML_TABLE:
        case _TOML_TYPE_MAX:
        case _TOML_TYPE_INVALID:
                abort();
        }
        fputc('}', f);
}

int main(int argc, char **argv) {
        _cleanup_free_ char *data = NULL;
        _cleanup_(toml_freep) TomlValue *root = NULL;
        TomlError error = {};
        size_t len = 0;
        int r;

        if (argc > 1) {
                fprintf(stderr, "usage: %s < FILE.toml\n", argv[0]);
                return 2;
        }

        r = read_all(STDIN_FILENO, &data, &len);
        if (r < 0) {
                fprintf(stderr, "toml-decoder: cannot read standard input: %s\n", strerror(-r));
                return 2;
        }

        r = toml_parse(data, len, NULL, &root, &error);
        if (r == -ENOMEM) {
                fprintf(stderr, "toml-decoder: out of memory\n");
                return 2;
        }
        if (r < 0) {
                fprintf(stderr, "toml-decoder: %u:%u: %s\n", error.pos.line, error.pos.col, error.message);
                return 1;
        }

        emit_value(stdout, root);
        fputc('\n', stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "toml-decoder: cannot write standard output\n");
                return 2;
        }
        return 0;
}
