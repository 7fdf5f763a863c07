/* SPDX-License-Identifier: MIT */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

static bool strbuf_reserve(StrBuf *b, size_t extra) {
        if (b->oom)
                return false;
        if (extra > SIZE_MAX / 2 - b->len - 1) {
                b->oom = true;
                return false;
        }
        size_t need = b->len + extra + 1;
        if (need <= b->cap)
                return true;
        size_t cap = b->cap ? b->cap : 64;
        while (cap < need)
                cap *= 2;
        char *n = realloc(b->data, cap);
        if (!n) {
                b->oom = true;
                return false;
        }
        b->data = n;
        b->cap = cap;
        return true;
}

void strbuf_putn(StrBuf *b, const char *s, size_t n) {
        if (!strbuf_reserve(b, n))
                return;
        if (n > 0)
                memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = '\0';
}

char *strbuf_room(StrBuf *b, size_t n) {
        if (!strbuf_reserve(b, n))
                return NULL;
        return b->data + b->len;
}

void strbuf_grew(StrBuf *b, size_t n) {
        if (b->oom || !b->data)
                return;
        b->len += n;
        b->data[b->len] = '\0';
}

void strbuf_puts(StrBuf *b, const char *s) {
        strbuf_putn(b, s, strlen(s));
}

void strbuf_putc(StrBuf *b, char c) {
        strbuf_putn(b, &c, 1);
}

void strbuf_vprintf(StrBuf *b, const char *fmt, va_list ap) {
        va_list aq;
        va_copy(aq, ap);
        int n = vsnprintf(NULL, 0, fmt, aq);
        va_end(aq);
        if (n < 0) {
                b->oom = true;
                return;
        }
        if (!strbuf_reserve(b, (size_t) n))
                return;
        vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
        b->len += (size_t) n;
}

void strbuf_printf(StrBuf *b, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(b, fmt, ap);
        va_end(ap);
}

const char *strbuf_str(const StrBuf *b) {
        return b->data ? b->data : "";
}

char *strbuf_steal(StrBuf *b) {
        char *r;
        if (b->oom) {
                strbuf_done(b);
                return NULL;
        }
        r = b->data ? b->data : strdup("");
        *b = STRBUF_INIT;
        return r;
}

void strbuf_done(StrBuf *b) {
        free(b->data);
        *b = STRBUF_INIT;
}
