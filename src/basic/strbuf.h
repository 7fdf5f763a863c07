/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

/* A growable byte buffer, always NUL-terminated when non-empty. Appending
 * never aborts: on allocation failure the buffer remembers the failure
 * (oom = true), further appends are ignored, and strbuf_steal() returns NULL,
 * so callers check once at the end. */
typedef struct StrBuf {
        char *data;
        size_t len;
        size_t cap;
        bool oom;
} StrBuf;

#define STRBUF_INIT ((StrBuf){ NULL, 0, 0, false })

void strbuf_putn(StrBuf *b, const char *s, size_t n);
void strbuf_puts(StrBuf *b, const char *s);
void strbuf_putc(StrBuf *b, char c);
void strbuf_printf(StrBuf *b, const char *fmt, ...) _printf_(2, 3);
void strbuf_vprintf(StrBuf *b, const char *fmt, va_list ap) _printf_(2, 0);

/* Room for n more bytes at the end, for a caller that writes them itself
 * and then says how many it wrote with strbuf_grew(). NULL when out of
 * memory (oom set). */
char *strbuf_room(StrBuf *b, size_t n);
void strbuf_grew(StrBuf *b, size_t n);

/* The contents as a C string ("" when empty); valid until the next append. */
const char *strbuf_str(const StrBuf *b);

/* Transfer ownership of the contents to the caller (never NULL unless out of
 * memory; an empty buffer yields ""). The buffer is reset. */
char *strbuf_steal(StrBuf *b);

void strbuf_done(StrBuf *b);
