/* SPDX-License-Identifier: MIT */
/* The terminal layer's encoding (tui-internal.h): colours packed into 32
 * bits, and cells, pens and cursor moves written as the escape sequences
 * the terminal is sent, with the terminal's pen tracked so that each is
 * set only when it changes. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "tui-internal.h"

/* A colour in 32 bits: its type's flags in the top byte, then the index
 * or the RGB value (nothing for a default colour, which libvterm marks with
 * a flag and whatever RGB value it has for it). */
uint32_t color_pack(const VTermColor *c) {
        uint32_t type = c->type;
        if (type & VTERM_COLOR_DEFAULT_MASK)
                return (type & VTERM_COLOR_DEFAULT_MASK) << 24;
        if (VTERM_COLOR_IS_INDEXED(c))
                return (uint32_t) VTERM_COLOR_INDEXED << 24 | c->indexed.idx;
        return (uint32_t) c->rgb.red << 16 | (uint32_t) c->rgb.green << 8 | c->rgb.blue;
}

static bool color_default(uint32_t c) {
        return ((c >> 24) & VTERM_COLOR_DEFAULT_MASK) != 0;
}

/* Output into room made with strbuf_room(). */

char *put_uint(char *p, unsigned v) {
        char d[10];
        int n = 0;
        do {
                d[n++] = (char) ('0' + v % 10);
                v /= 10;
        } while (v > 0);
        while (n > 0)
                *p++ = d[--n];
        return p;
}

static char *put_str(char *p, const char *s) {
        size_t n = strlen(s);
        memcpy(p, s, n);
        return p + n;
}

static char *put_utf8_p(char *p, uint32_t u) {
        if (u < 0x80) {
                *p++ = (char) u;
        } else if (u < 0x800) {
                *p++ = (char) (0xc0 | (u >> 6));
                *p++ = (char) (0x80 | (u & 0x3f));
        } else if (u < 0x10000) {
                *p++ = (char) (0xe0 | (u >> 12));
                *p++ = (char) (0x80 | ((u >> 6) & 0x3f));
                *p++ = (char) (0x80 | (u & 0x3f));
        } else {
                *p++ = (char) (0xf0 | (u >> 18));
                *p++ = (char) (0x80 | ((u >> 12) & 0x3f));
                *p++ = (char) (0x80 | ((u >> 6) & 0x3f));
                *p++ = (char) (0x80 | (u & 0x3f));
        }
        return p;
}

void put_cup(StrBuf *o, int row, int col) {
        char *b = strbuf_room(o, 24);
        if (!b)
                return;
        char *p = put_str(b, "\033[");
        p = put_uint(p, (unsigned) row + 1);
        *p++ = ';';
        p = put_uint(p, (unsigned) col + 1);
        *p++ = 'H';
        strbuf_grew(o, (size_t) (p - b));
}

static char *put_color(char *p, uint32_t c, bool fg) {
        if (color_default(c))
                return p;
        if ((c >> 24) & VTERM_COLOR_INDEXED) {
                unsigned i = c & 0xff;
                *p++ = ';';
                if (i < 8)
                        return put_uint(p, (fg ? 30u : 40u) + i);
                if (i < 16)
                        return put_uint(p, (fg ? 90u : 100u) + i - 8);
                p = put_str(p, fg ? "38;5;" : "48;5;");
                return put_uint(p, i);
        }
        p = put_str(p, fg ? ";38;2;" : ";48;2;");
        p = put_uint(p, (c >> 16) & 0xff);
        *p++ = ';';
        p = put_uint(p, (c >> 8) & 0xff);
        *p++ = ';';
        return put_uint(p, c & 0xff);
}

/* The terminal's pen is known to be the default one (after an SGR 0). */
void pen_known_default(Pen *pen) {
        *pen = (Pen){ .fg = COLOR_DEFAULT_FG, .bg = COLOR_DEFAULT_BG, .valid = true };
}

static bool pen_is_default(const Pen *pen) {
        return pen->valid && (pen->attrs & ~A_PROTECTED) == 0 && color_default(pen->fg) && color_default(pen->bg);
}

#define SGR_MAX 64 /* the longest SGR put_sgr() writes */

/* Make the terminal's pen this one. */
static char *put_sgr(char *p, Pen *pen, uint32_t fg, uint32_t bg, uint32_t attrs) {
        attrs &= ~(uint32_t) A_PROTECTED;
        if (pen->valid && pen->fg == fg && pen->bg == bg && pen->attrs == attrs)
                return p;
        p = put_str(p, "\033[0");
        if (attrs & A_BOLD)
                p = put_str(p, ";1");
        if (attrs & A_ITALIC)
                p = put_str(p, ";3");
        if (attrs & A_UNDERLINE)
                p = put_str(p, ";4");
        if (attrs & A_BLINK)
                p = put_str(p, ";5");
        if (attrs & A_REVERSE)
                p = put_str(p, ";7");
        if (attrs & A_STRIKE)
                p = put_str(p, ";9");
        p = put_color(p, fg, true);
        p = put_color(p, bg, false);
        *p++ = 'm';
        *pen = (Pen){ .fg = fg, .bg = bg, .attrs = attrs, .valid = true };
        return p;
}

void pen_reset(StrBuf *o, Pen *pen) {
        if (pen_is_default(pen))
                return;
        strbuf_puts(o, "\033[0m");
        pen_known_default(pen);
}

/* A cell's characters. Nothing that a terminal could take for a control
 * (C0, DEL, C1 as characters, surrogates) is ever written: U+FFFD instead.
 * Returns false when a character is not ASCII, whose width the terminal
 * may count differently from the emulator. */
static char *put_chars(char *p, const Cell *c, bool *ascii) {
        *ascii = true;
        if (c->chars[0] == 0) {
                *p++ = ' ';
                return p;
        }
        for (int i = 0; i < VTERM_MAX_CHARS_PER_CELL && c->chars[i]; i++) {
                uint32_t u = c->chars[i];
                if (u < 0x20 || (u >= 0x7f && u < 0xa0) || (u >= 0xd800 && u < 0xe000) || u > 0x10ffff)
                        u = 0xfffd;
                if (u >= 0x80)
                        *ascii = false;
                p = put_utf8_p(p, u);
        }
        return p;
}

bool cell_blank(const Cell *c, uint32_t flip) {
        return (c->chars[0] == 0 || (c->chars[0] == ' ' && c->chars[1] == 0)) &&
               ((c->attrs ^ flip) & (A_REVERSE | A_UNDERLINE | A_STRIKE)) == 0 && color_default(c->bg);
}

/* Room one cell can take drawn: an SGR, six characters of 4 bytes, the
 * autowrap off and on around them, a CHA. */
#define CELL_MAX (SGR_MAX + 4 * VTERM_MAX_CHARS_PER_CELL + 16 + 16)

/* One row of n cells from the cursor, which is at its first column: the
 * cells up to the last one that is not blank, then erased to the end of a
 * row width wide. A character that is not ASCII is followed by a move to
 * the column the emulator puts the next one in, so a terminal that counts
 * its width differently garbles that row at most; in the last column it is
 * written with autowrap off, so that it cannot wrap onto the next row
 * (which may be the status line). Nothing else is ever written past the
 * last column: the terminal's autowrap stays on, which tmux 3.3 draws five
 * times faster. reverse: DECSCNM. Cells from known_end on are known to be
 * blank. */
void put_row(StrBuf *o, Pen *pen, const Cell *cells, int n, int width, bool reverse, int known_end) {
        uint32_t flip = reverse ? A_REVERSE : 0;
        int end = MIN(n, known_end);
        while (end > 0 && cell_blank(&cells[end - 1], flip))
                end--;
        char *b = strbuf_room(o, (size_t) end * CELL_MAX + 16);
        if (!b)
                return;
        char *p = b;
        for (int col = 0; col < end;) {
                const Cell *c = &cells[col];
                p = put_sgr(p, pen, c->fg, c->bg, c->attrs ^ flip);
                uint32_t u = c->chars[0];
                if (u == CH_WIDE_RIGHT) {
                        /* The right half of a wide character whose left
                         * half is not ours: a blank. */
                        *p++ = ' ';
                        col++;
                        continue;
                }
                /* A wide character's width, as libvterm's screen layer
                 * tells it: its right half follows. */
                int w = col + 1 < n && cells[col + 1].chars[0] == CH_WIDE_RIGHT ? 2 : 1;
                if (u >= 0x20 && u < 0x7f && c->chars[1] == 0 && w == 1) {
                        *p++ = (char) u;
                        col++;
                        continue;
                }
                bool ascii, last = col + w >= width;
                if (last)
                        p = put_str(p, "\033[?7l");
                p = put_chars(p, c, &ascii);
                if (last)
                        p = put_str(p, "\033[?7h");
                if (!ascii || w > 1) {
                        p = put_str(p, "\033[");
                        p = put_uint(p, (unsigned) (col + w + 1));
                        *p++ = 'G';
                }
                col += w;
        }
        if (end < width) {
                if (!pen_is_default(pen)) {
                        p = put_str(p, "\033[0m");
                        pen_known_default(pen);
                }
                p = put_str(p, "\033[K");
        }
        strbuf_grew(o, (size_t) (p - b));
}
