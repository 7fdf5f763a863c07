/* SPDX-License-Identifier: MIT */
/* The terminal layer of `lazaret run`: see tui.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <vterm.h>

#include "client.h"
#include "macro.h"
#include "strbuf.h"
#include "string-util.h"
#include "term-filter.h"
#include "tui.h"

#define FRAME_USEC  (UINT64_C(1000000) / 60) /* the sandbox's screen */
#define STATUS_USEC (UINT64_C(1000000) / 5) /* the status line's own changes */
#define MOVED_USEC  (UINT64_C(5000000)) /* a counter that moved stands out this long */
/* Lines the sandbox scrolled away between two frames are kept (drawn into
 * the terminal's scrollback) up to this many bytes; past it the older ones
 * give way to a line saying how many. */
#define HIST_MAX (UINT64_C(4) * 1024 * 1024)

enum { CNT_CONN, CNT_GIT, CNT_ESC, _CNT_MAX };

/* A cell of the sandbox's screen, kept as libvterm's screen layer keeps it
 * (the same contents after the same input: test-tui-fuzz holds the two side
 * by side) but packed, so that rows compare with memcmp(). */
enum {
        A_BOLD = 1 << 0,
        A_UNDERLINE = 1 << 1,
        A_ITALIC = 1 << 2,
        A_BLINK = 1 << 3,
        A_REVERSE = 1 << 4,
        A_STRIKE = 1 << 5,
        A_PROTECTED = 1 << 6, /* DECSCA: selective erase leaves it */
};
#define CH_WIDE_RIGHT ((uint32_t) -1) /* chars[0] of a wide character's right half */

typedef struct Cell {
        uint32_t chars[VTERM_MAX_CHARS_PER_CELL]; /* up to the first 0; chars[0] 0: erased */
        uint32_t fg, bg; /* color_pack() */
        uint32_t attrs; /* A_* */
} Cell;

/* A row: its cells, and how far they were written since it was last
 * erased whole: from column used on, every cell is tail (so that erasing
 * and drawing a short line costs its length, not the width). */
typedef struct Row {
        Cell *c;
        int used;
        Cell tail;
} Row;

/* A screen of rows, so that scrolling moves pointers, not cells. */
typedef struct Grid {
        Row **row;
        Row *rows_mem;
        Cell *mem;
        int rows, cols;
} Grid;

/* With TuiOptions.writer, the terminal is written by a thread of its own,
 * so that the terminal reading one frame (tmux takes a while) and the
 * emulator taking the sandbox's next output overlap: the main thread hands
 * a frame over and goes on; the next frame waits until it is written. */
typedef struct Writer {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int fd; /* the terminal */
        StrBuf buf; /* the frame handed over */
        bool busy; /* buf is being written */
        bool quit;
        int error; /* the first write that failed: -errno */
        int efd; /* eventfd: a frame was written */
} Writer;

/* The terminal's pen as we last set it. */
typedef struct Pen {
        uint32_t fg, bg, attrs;
        bool valid;
} Pen;

struct Tui {
        int fd;
        bool color, clipboard;
        Writer *w; /* NULL: each frame written before tui_render() returns */
        VTerm *vt;
        VTermState *state;
        TermFilter *filter; /* tracks the modes the terminal must mirror */
        int rows, cols; /* the terminal */
        int vrows; /* the sandbox: rows - 1 */

        /* The emulator's screens (main, alternate) and its pen. */
        Grid scr[2];
        Grid next[2]; /* made by tui_resize() for the resize callback */
        int cur;
        Cell pen;
        bool reverse; /* DECSCNM: the whole screen reversed */
        /* What decides how libvterm draws a run of ASCII (fast_text()). */
        bool insert; /* IRM */
        bool lr_margins; /* DECLRMM */
        bool origin; /* DECOM: a CUF keeps the cursor in the scroll region */
        bool protect; /* DECSCA */
        bool fast_off; /* libvterm's cursor was not where fast_text() put it */
        int gl; /* the set invoked into GL: 0 to 3 */
        uint8_t g_set[4]; /* G0..G3: G_UTF8, G_ASCII or G_OTHER */

        Grid shown; /* vrows x cols: what the terminal shows */
        bool *junk; /* per row: what it shows is not known */
        bool reverse_shown;

        /* Lines scrolled off the sandbox's screen since the last frame. */
        StrBuf hist;
        size_t *hist_off; /* n_hist + 1 offsets into hist */
        bool *hist_same; /* the terminal shows line i on row i already */
        size_t n_hist, cap_hist;
        uint64_t hist_lost;

        StrBuf out;
        StrBuf replies;
        StrBuf scan; /* the filter's output, the emulator's input */
        StrBuf clip; /* with the clipboard allowed: its OSC 52 writes, for the terminal */
        Pen tpen;
        bool overlay; /* the event overlay is up */
        bool dirty, suspended, alt, alt_shown, cursor_visible, bell;
        int cursor_shape, cursor_shape_shown;
        bool title_dirty;
        char title[260];
        TermFilterModes modes_shown;
        bool modes_known;
        uint64_t last_frame;

        /* The status line. */
        char st_profile[64], st_domain[17], st_network[24], st_digest[13];
        unsigned st_sessions;
        uint64_t st_count[_CNT_MAX];
        uint64_t st_moved[_CNT_MAX]; /* when it last moved */
        bool st_paused, st_known;
        bool st_changed; /* its text changed: drawn within STATUS_USEC */
        bool st_lost; /* the row itself is gone (a scroll, a clear): drawn now */
        uint64_t st_last;
};

/* A colour in 32 bits: its type's flags in the top byte, then the index
 * or the RGB value (nothing for a default colour, which libvterm marks with
 * a flag and whatever RGB value it has for it). */
static uint32_t color_pack(const VTermColor *c) {
        uint32_t type = c->type;
        if (type & VTERM_COLOR_DEFAULT_MASK)
                return (type & VTERM_COLOR_DEFAULT_MASK) << 24;
        if (VTERM_COLOR_IS_INDEXED(c))
                return (uint32_t) VTERM_COLOR_INDEXED << 24 | c->indexed.idx;
        return (uint32_t) c->rgb.red << 16 | (uint32_t) c->rgb.green << 8 | c->rgb.blue;
}

#define COLOR_DEFAULT_FG ((uint32_t) VTERM_COLOR_DEFAULT_FG << 24)
#define COLOR_DEFAULT_BG ((uint32_t) VTERM_COLOR_DEFAULT_BG << 24)

static bool color_default(uint32_t c) {
        return ((c >> 24) & VTERM_COLOR_DEFAULT_MASK) != 0;
}

/* Output into room made with strbuf_room(). */

static char *put_uint(char *p, unsigned v) {
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

static void put_cup(StrBuf *o, int row, int col) {
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
static void pen_known_default(Pen *pen) {
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

static void pen_reset(StrBuf *o, Pen *pen) {
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

static bool cell_blank(const Cell *c, uint32_t flip) {
        return (c->chars[0] == 0 || (c->chars[0] == ' ' && c->chars[1] == 0)) &&
               ((c->attrs ^ flip) & (A_REVERSE | A_UNDERLINE | A_STRIKE)) == 0 && color_default(c->bg);
}

struct Row;
static int used_end(const struct Row *r, bool reverse);

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
static void put_row(StrBuf *o, Pen *pen, const Cell *cells, int n, int width, bool reverse, int known_end) {
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

/* Grids. */

static int grid_new(Grid *g, int rows, int cols, const Cell *blank) {
        size_t n = (size_t) rows * (size_t) cols;
        Cell *mem = malloc(n * sizeof(*mem));
        Row *rows_mem = malloc((size_t) rows * sizeof(*rows_mem));
        Row **row = malloc((size_t) rows * sizeof(*row));
        if (!mem || !rows_mem || !row) {
                free(mem);
                free(rows_mem);
                free(row);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                mem[i] = *blank;
        for (int r = 0; r < rows; r++) {
                rows_mem[r] = (Row){ .c = mem + (size_t) r * (size_t) cols, .used = 0, .tail = *blank };
                row[r] = &rows_mem[r];
        }
        *g = (Grid){ .row = row, .rows_mem = rows_mem, .mem = mem, .rows = rows, .cols = cols };
        return 0;
}

static void grid_free(Grid *g) {
        free(g->row);
        free(g->rows_mem);
        free(g->mem);
        *g = (Grid){};
}

/* Rotate n rows up by k (0 <= k <= n): three reversals, in place. */
static void reverse_rows(Row **r, int n) {
        for (int i = 0, j = n - 1; i < j; i++, j--) {
                Row *x = r[i];
                r[i] = r[j];
                r[j] = x;
        }
}

static void rotate_rows(Row **r, int n, int k) {
        if (k <= 0 || k >= n)
                return;
        if (k == 1) {
                /* A line scrolled: the common case. */
                Row *x = r[0];
                memmove(r, r + 1, (size_t) (n - 1) * sizeof(*r));
                r[n - 1] = x;
                return;
        }
        reverse_rows(r, k);
        reverse_rows(r + k, n - k);
        reverse_rows(r, n);
}

/* What an erase leaves: libvterm's screen layer gives the cell the whole
 * pen. */
static Cell blank_cell(const Tui *t) {
        Cell b = t->pen;
        memset(b.chars, 0, sizeof(b.chars));
        b.attrs &= ~(uint32_t) A_PROTECTED;
        return b;
}

static bool row_is_eol(const Cell *row, int cols) {
        for (int c = 0; c < cols; c++)
                if (row[c].chars[0] != 0)
                        return false;
        return true;
}

static void hist_push(Tui *t, const Row *row, int n);

static bool cell_same(const Cell *a, const Cell *b) {
        return memcmp(a, b, sizeof(Cell)) == 0;
}

/* Row r erased whole with blank. */
static void row_erase(Row *r, int cols, const Cell *blank) {
        int n = cell_same(&r->tail, blank) ? r->used : cols;
        for (int c = 0; c < n; c++)
                r->c[c] = *blank;
        r->tail = *blank;
        r->used = 0;
}

/* Where a row's cells that are not blank could end: the width unless its
 * tail is blank. */
static int used_end(const Row *r, bool reverse) {
        return cell_blank(&r->tail, reverse ? A_REVERSE : 0) ? r->used : INT_MAX;
}

/* Columns [from, to) of a row were written. */
static void row_wrote(Row *r, int to) {
        if (to > r->used)
                r->used = to;
}

/* Rows [top, bottom) of g, full width, scrolled up by down lines (down by
 * -down): the rows that come in are erased; those that leave the top of
 * the main screen go up into the scrollback. */
static void grid_scroll(Tui *t, Grid *g, int top, int bottom, int down) {
        top = MAX(top, 0);
        bottom = MIN(bottom, g->rows);
        int h = bottom - top;
        if (h <= 0 || down == 0)
                return;
        int n = MIN(abs(down), h);
        Cell blank = blank_cell(t);
        if (down > 0) {
                if (top == 0 && g == &t->scr[0])
                        for (int i = 0; i < n; i++)
                                hist_push(t, g->row[i], g->cols);
                rotate_rows(g->row + top, h, n);
                for (int r = bottom - n; r < bottom; r++)
                        row_erase(g->row[r], g->cols, &blank);
        } else {
                rotate_rows(g->row + top, h, h - n);
                for (int r = top; r < top + n; r++)
                        row_erase(g->row[r], g->cols, &blank);
        }
        t->dirty = true;
}

/* libvterm's state callbacks: the screen layer's work (libvterm's own
 * moves each row of a scroll, the whole screen for each line). */

static Cell *cell_at(Tui *t, int row, int col) {
        Grid *g = &t->scr[t->cur];
        if (row < 0 || row >= g->rows || col < 0 || col >= g->cols)
                return NULL;
        return &g->row[row]->c[col];
}

static int cb_putglyph(VTermGlyphInfo *info, VTermPos pos, void *user) {
        Tui *t = user;
        Cell *c = cell_at(t, pos.row, pos.col);
        if (!c)
                return 0;
        int i = 0;
        for (; i < VTERM_MAX_CHARS_PER_CELL && info->chars[i]; i++)
                c->chars[i] = info->chars[i];
        if (i > 0) {
                c->fg = t->pen.fg;
                c->bg = t->pen.bg;
                c->attrs = t->pen.attrs;
        }
        for (; i < VTERM_MAX_CHARS_PER_CELL; i++)
                c->chars[i] = 0;
        c->attrs = (c->attrs & ~(uint32_t) A_PROTECTED) | (info->protected_cell ? A_PROTECTED : 0);
        for (int k = 1; k < info->width; k++) {
                Cell *x = cell_at(t, pos.row, pos.col + k);
                if (x)
                        x->chars[0] = CH_WIDE_RIGHT;
        }
        Grid *g = &t->scr[t->cur];
        row_wrote(g->row[pos.row], MIN(pos.col + MAX(info->width, 1), g->cols));
        t->dirty = true;
        return 1;
}

static int cb_erase(VTermRect rect, int selective, void *user) {
        Tui *t = user;
        Grid *g = &t->scr[t->cur];
        Cell blank = blank_cell(t);
        int c0 = MAX(rect.start_col, 0), c1 = MIN(rect.end_col, g->cols);
        for (int r = MAX(rect.start_row, 0); r < MIN(rect.end_row, g->rows); r++) {
                Row *row = g->row[r];
                if (!selective && c0 == 0 && c1 == g->cols) {
                        row_erase(row, g->cols, &blank);
                        continue;
                }
                for (int c = c0; c < c1; c++) {
                        Cell *x = &row->c[c];
                        if (selective && (x->attrs & A_PROTECTED))
                                continue;
                        *x = blank;
                }
                if (!selective && c1 == g->cols && c0 < c1) {
                        /* From c0 on, every cell is blank now. */
                        if (cell_same(&row->tail, &blank))
                                row->used = MIN(row->used, c0);
                        else {
                                row->tail = blank;
                                row->used = c0;
                        }
                } else
                        row_wrote(row, c1);
        }
        t->dirty = true;
        return 1;
}

static int cb_scrollrect(VTermRect rect, int downward, int rightward, void *user) {
        Tui *t = user;
        Grid *g = &t->scr[t->cur];
        /* Only a whole-width scroll of lines here; anything else through
         * libvterm's moverect and erase. */
        if (rightward != 0 || rect.start_col != 0 || rect.end_col != g->cols)
                return 0;
        grid_scroll(t, g, rect.start_row, rect.end_row, downward);
        return 1;
}

static int cb_moverect(VTermRect dest, VTermRect src, void *user) {
        Tui *t = user;
        Grid *g = &t->scr[t->cur];
        int cols = src.end_col - src.start_col;
        int down = src.start_row - dest.start_row;
        if (cols <= 0 || dest.end_col - dest.start_col != cols || MIN(src.start_col, dest.start_col) < 0 ||
            MAX(src.end_col, dest.end_col) > g->cols || MIN(src.start_row, dest.start_row) < 0 ||
            MAX(src.end_row, dest.end_row) > g->rows || dest.end_row - dest.start_row != src.end_row - src.start_row)
                return 1;
        if (down < 0)
                for (int r = dest.end_row - 1; r >= dest.start_row; r--)
                        memmove(&g->row[r]->c[dest.start_col], &g->row[r + down]->c[src.start_col],
                                (size_t) cols * sizeof(Cell));
        else
                for (int r = dest.start_row; r < dest.end_row; r++)
                        memmove(&g->row[r]->c[dest.start_col], &g->row[r + down]->c[src.start_col],
                                (size_t) cols * sizeof(Cell));
        /* What moved in may be from past a source row's used. */
        for (int r = dest.start_row; r < dest.end_row; r++)
                row_wrote(g->row[r], dest.end_col);
        t->dirty = true;
        return 1;
}

static int cb_movecursor(VTermPos pos, VTermPos oldpos, int visible, void *user) {
        (void) pos;
        (void) oldpos;
        (void) visible;
        ((Tui *) user)->dirty = true;
        return 1;
}

static int cb_setpenattr(VTermAttr attr, VTermValue *val, void *user) {
        Tui *t = user;
        uint32_t bit = 0;
        switch (attr) {
        case VTERM_ATTR_BOLD:
                bit = A_BOLD;
                break;
        case VTERM_ATTR_UNDERLINE:
                bit = A_UNDERLINE;
                break;
        case VTERM_ATTR_ITALIC:
                bit = A_ITALIC;
                break;
        case VTERM_ATTR_BLINK:
                bit = A_BLINK;
                break;
        case VTERM_ATTR_REVERSE:
                bit = A_REVERSE;
                break;
        case VTERM_ATTR_STRIKE:
                bit = A_STRIKE;
                break;
        case VTERM_ATTR_FOREGROUND:
                t->pen.fg = color_pack(&val->color);
                return 1;
        case VTERM_ATTR_BACKGROUND:
                t->pen.bg = color_pack(&val->color);
                return 1;
        default: /* the font */
                return 1;
        }
        /* UNDERLINE is a number (single, double, curly), the rest booleans. */
        bool on = attr == VTERM_ATTR_UNDERLINE ? val->number != 0 : val->boolean != 0;
        t->pen.attrs = on ? t->pen.attrs | bit : t->pen.attrs & ~bit;
        return 1;
}

/* A double-width line (DECDWL, DECDHL) keeps the left half of its cells,
 * as libvterm's screen layer does: drawn single width here. */
static int cb_setlineinfo(int row, const VTermLineInfo *newinfo, const VTermLineInfo *oldinfo, void *user) {
        Tui *t = user;
        if (newinfo->doublewidth && (!oldinfo->doublewidth || newinfo->doubleheight != oldinfo->doubleheight)) {
                int cols = t->scr[t->cur].cols;
                (void) cb_erase(
                        (VTermRect){ .start_row = row, .end_row = row + 1, .start_col = cols / 2, .end_col = cols }, 0,
                        t);
        }
        return 1;
}

/* The sandbox's title for the terminal's: printable characters only (valid
 * UTF-8 from U+00A0 up, ASCII from space to tilde), anything else '?'. */
static void title_set(Tui *t, const char *v) {
        const unsigned char *s = (const unsigned char *) v;
        size_t k = 0;
        while (*s && k + 4 < sizeof(t->title)) {
                if (*s >= 0x20 && *s < 0x7f) {
                        t->title[k++] = (char) *s++;
                        continue;
                }
                int n = *s >= 0xf0 && *s < 0xf5 ? 4 : *s >= 0xe0 && *s < 0xf0 ? 3 : *s >= 0xc2 && *s < 0xe0 ? 2 : 0;
                uint32_t u = n == 4 ? *s & 0x07u : n == 3 ? *s & 0x0fu : *s & 0x1fu;
                int i = 1;
                for (; i < n && (s[i] & 0xc0) == 0x80; i++)
                        u = (u << 6) | (s[i] & 0x3fu);
                bool ok = n > 0 && i == n && u >= 0xa0 && u <= 0x10ffff && !(u >= 0xd800 && u < 0xe000) &&
                          !(n == 3 && u < 0x800) && !(n == 4 && u < 0x10000);
                if (ok) {
                        memcpy(t->title + k, s, (size_t) n);
                        k += (size_t) n;
                        s += n;
                } else {
                        t->title[k++] = '?';
                        s += i > 1 ? i : 1;
                }
        }
        t->title[k] = '\0';
        t->title_dirty = true;
}

static int cb_settermprop(VTermProp prop, VTermValue *val, void *user) {
        Tui *t = user;
        switch (prop) {
        case VTERM_PROP_CURSORVISIBLE:
                t->cursor_visible = val->boolean;
                break;
        case VTERM_PROP_ALTSCREEN:
                /* libvterm erases the alternate screen after this. */
                t->alt = val->boolean;
                t->cur = t->alt ? 1 : 0;
                break;
        case VTERM_PROP_REVERSE:
                t->reverse = val->boolean;
                break;
        case VTERM_PROP_CURSORSHAPE:
                t->cursor_shape = val->number;
                break;
        case VTERM_PROP_TITLE:
                title_set(t, val->string ?: "");
                break;
        default:
                break;
        }
        t->dirty = true;
        return 1;
}

static int cb_bell(void *user) {
        Tui *t = user;
        t->bell = t->dirty = true;
        return 1;
}

/* The size changes (tui_resize(), which made t->next at the new size). As
 * libvterm's screen layer does: a main screen made shorter first scrolls
 * up (into the scrollback) what would be cut below the cursor, unless it is
 * blank; then each screen keeps what fits, the rest erased. */
static int cb_resize(int rows, int cols, VTermPos *delta, void *user) {
        Tui *t = user;
        if (!t->next[0].mem || t->next[0].rows != rows || t->next[0].cols != cols)
                return 1; /* cannot happen; every callback checks its bounds */
        Grid *m = &t->scr[0];
        if (t->cur == 0 && rows < m->rows) {
                VTermPos cursor;
                vterm_state_get_cursorpos(t->state, &cursor);
                int r = m->rows - 1;
                for (; r >= rows; r--)
                        if (!row_is_eol(m->row[r]->c, m->cols) || cursor.row == r)
                                break;
                int first_blank = r + 1;
                if (first_blank > rows) {
                        grid_scroll(t, m, 0, m->rows, first_blank - rows);
                        delta->row -= first_blank - rows;
                }
        }
        for (int i = 0; i < 2; i++) {
                Grid *o = &t->scr[i], *n = &t->next[i];
                int w = MIN(o->cols, n->cols);
                for (int r = 0; r < MIN(o->rows, n->rows); r++) {
                        memcpy(n->row[r]->c, o->row[r]->c, (size_t) w * sizeof(Cell));
                        n->row[r]->used = n->cols; /* not known */
                }
                grid_free(o);
                *o = *n;
                *n = (Grid){};
        }
        t->dirty = true;
        return 1;
}

static void hist_reset(Tui *t) {
        t->hist.len = 0;
        t->n_hist = 0;
        if (t->hist_off)
                t->hist_off[0] = 0;
}

/* A line scrolled off the top of the main screen (n cells wide), drawn into
 * t->hist for the next frame. */
static void hist_push(Tui *t, const Row *r, int n) {
        const Cell *row = r->c;
        t->dirty = true;
        if (t->hist.oom)
                return;
        if (t->hist.len > HIST_MAX) {
                t->hist_lost += t->n_hist;
                hist_reset(t);
        }
        if (t->n_hist + 1 >= t->cap_hist) {
                size_t cap = t->cap_hist ? t->cap_hist * 2 : 256;
                size_t *o = realloc(t->hist_off, (cap + 1) * sizeof(*o));
                if (!o)
                        return;
                t->hist_off = o;
                if (t->cap_hist == 0)
                        o[0] = 0; /* no line yet: hist_reset() never ran */
                bool *s = realloc(t->hist_same, cap * sizeof(*s));
                if (!s)
                        return;
                t->hist_same = s;
                t->cap_hist = cap;
        }
        /* The n-th line scrolled away is the one the terminal shows on row
         * n (the emulator scrolls from the top), unless lines were lost. */
        size_t i = t->n_hist;
        t->hist_same[i] = t->hist_lost == 0 && i < (size_t) t->vrows && !t->junk[i] && n == t->cols &&
                          t->reverse == t->reverse_shown &&
                          memcmp(row, t->shown.row[i]->c, (size_t) n * sizeof(Cell)) == 0;
        /* Each line starts and ends with the default pen. */
        Pen pen;
        pen_known_default(&pen);
        put_row(&t->hist, &pen, row, MIN(n, t->cols), t->cols, t->reverse, used_end(r, t->reverse));
        pen_reset(&t->hist, &pen);
        t->n_hist++;
        t->hist_off[t->n_hist] = t->hist.len;
}

static void cb_output(const char *s, size_t len, void *user) {
        strbuf_putn(&((Tui *) user)->replies, s, len);
}

static const VTermStateCallbacks state_cbs = {
        .putglyph = cb_putglyph,
        .movecursor = cb_movecursor,
        .scrollrect = cb_scrollrect,
        .moverect = cb_moverect,
        .erase = cb_erase,
        .setpenattr = cb_setpenattr,
        .settermprop = cb_settermprop,
        .bell = cb_bell,
        .resize = cb_resize,
        .setlineinfo = cb_setlineinfo,
};

/* A fast path for text. libvterm's state layer takes about 11 ns a byte of
 * plain text (it decodes each character, looks its width up in tables and
 * calls putglyph()), more than the rest of the terminal layer together. A
 * run of printable ASCII, when nothing makes libvterm draw it otherwise, is
 * written into the cells here instead and libvterm's cursor moved past it
 * with a CUF: the run's cells up to the column before the last (so that
 * libvterm never has to wrap after it, a state a CUF cannot set), its
 * first character through libvterm always (a wrap may be pending) and its
 * last (so that a combining mark or a REP after it finds the glyph it
 * expects). What would make libvterm draw
 * ASCII otherwise, or the CUF elsewhere, tracked from the sequences that
 * pass: insert mode, left and right margins, origin mode, a character set
 * other than ASCII (or a single shift), and double-width lines (asked of
 * libvterm); DECSCA's protection is copied. test-tui-fuzz holds the result against libvterm's own screen
 * layer fed the same bytes. */
#define FAST_MIN 4 /* shorter runs all through libvterm */

/* The character sets in G0..G3: UTF-8 (as after a reset), ASCII ("ESC ( B",
 * which libvterm decodes apart from UTF-8: see feed_emulator()), or one
 * that draws ASCII otherwise. */
enum { G_UTF8, G_ASCII, G_OTHER };

static void track_reset(Tui *t) {
        t->insert = t->lr_margins = t->origin = t->protect = false;
        t->gl = 0;
        for (int i = 0; i < 4; i++)
                t->g_set[i] = G_UTF8;
}

static bool fast_ok(const Tui *t) {
        return !t->fast_off && !t->insert && !t->lr_margins && !t->origin && t->g_set[t->gl] != G_OTHER;
}

static void emulator_write(Tui *t, const char *p, size_t n) {
        if (n > 0)
                (void) vterm_input_write(t->vt, p, n);
}

/* Returns how many bytes at the run's end it left to libvterm, to be
 * written with what follows: libvterm joins a combining mark to the glyph
 * before it only within one write. */
static size_t fast_text(Tui *t, const char *p, size_t n) {
        Grid *g = &t->scr[t->cur];
        /* The first character through libvterm: it wraps first if a wrap
         * is pending, which it can be anywhere on the row (a line made
         * single width after, a scroll under it), and after it only at the
         * row's end, which the column tells. A single shift takes it. */
        emulator_write(t, p, 1);
        p++;
        n--;
        while (n > 0) {
                VTermPos pos;
                vterm_state_get_cursorpos(t->state, &pos);
                size_t k = 0;
                if (fast_ok(t) && pos.row >= 0 && pos.row < g->rows && pos.col >= 0 && pos.col < g->cols - 1 &&
                    !vterm_state_get_lineinfo(t->state, pos.row)->doublewidth)
                        k = MIN(n - 1, (size_t) (g->cols - 1 - pos.col));
                if (k >= FAST_MIN) {
                        Cell c = t->pen;
                        memset(c.chars, 0, sizeof(c.chars));
                        c.attrs = (c.attrs & ~(uint32_t) A_PROTECTED) | (t->protect ? A_PROTECTED : 0);
                        Cell *row = &g->row[pos.row]->c[pos.col];
                        for (size_t i = 0; i < k; i++) {
                                row[i] = c;
                                row[i].chars[0] = (unsigned char) p[i];
                        }
                        row_wrote(g->row[pos.row], pos.col + (int) k);
                        char cuf[24] = "\033[";
                        char *e = put_uint(cuf + 2, (unsigned) k);
                        *e++ = 'C';
                        emulator_write(t, cuf, (size_t) (e - cuf));
                        VTermPos now;
                        vterm_state_get_cursorpos(t->state, &now);
                        if (now.row != pos.row || now.col != pos.col + (int) k)
                                t->fast_off = true; /* cannot happen; drawn by libvterm from here */
                        t->dirty = true;
                        p += k;
                        n -= k;
                        pos.col += (int) k;
                }
                /* The rest of the row and the first character on the next
                 * (where libvterm wraps); the run's end is left. */
                size_t m = MIN(n, (size_t) MAX(g->cols - pos.col + 1, 1));
                if (m == n)
                        return n;
                emulator_write(t, p, m);
                p += m;
                n -= m;
        }
        return 0;
}

/* The index just past the escape sequence at s[i] (ESC), noting on the way
 * what changes how text is drawn. The filter passes only whole sequences. */
static size_t scan_escape(Tui *t, const char *s, size_t n, size_t i) {
        size_t j = i + 1;
        if (j >= n)
                return n;
        char c = s[j];
        if (c == '[') {
                j++;
                char leader = j < n && s[j] >= '<' && s[j] <= '?' ? s[j++] : 0;
                unsigned params[16], np = 0, v = 0;
                bool digits = false;
                for (; j < n && s[j] >= 0x30 && s[j] <= 0x3f; j++) {
                        if (s[j] >= '0' && s[j] <= '9') {
                                v = v < 100000 ? v * 10 + (unsigned) (s[j] - '0') : v;
                                digits = true;
                        } else if (s[j] == ';' || s[j] == ':') {
                                if (np < 16)
                                        params[np++] = digits ? v : 0;
                                v = 0;
                                digits = false;
                        }
                }
                if (np < 16)
                        params[np++] = digits ? v : 0;
                char inter = 0;
                for (; j < n && s[j] >= 0x20 && s[j] <= 0x2f; j++)
                        inter = s[j];
                if (j >= n)
                        return n;
                char final = s[j];
                /* SM, RM, DECSET, DECRST: libvterm 0.1.4 takes the first
                 * parameter only. */
                if ((final == 'h' || final == 'l') && inter == 0) {
                        bool on = final == 'h';
                        if (leader == 0 && params[0] == 4)
                                t->insert = on;
                        if (leader == '?' && params[0] == 69)
                                t->lr_margins = on;
                        if (leader == '?' && params[0] == 6)
                                t->origin = on;
                }
                if (final == 'q' && inter == '"' && leader == 0)
                        t->protect = params[0] == 1 ? true : params[0] == 0 || params[0] == 2 ? false : t->protect;
                /* DECSTR (CSI ! p) would reset all this, but libvterm
                 * 0.1.4 reads '!' as a leader and never matches it. */
                return j + 1;
        }
        if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
                /* A string, to BEL or ST. */
                for (j++; j < n; j++) {
                        if (s[j] == '\a')
                                return j + 1;
                        if (s[j] == '\033' && j + 1 < n && s[j + 1] == '\\')
                                return j + 2;
                }
                return n;
        }
        char inter = 0;
        for (; j < n && s[j] >= 0x20 && s[j] <= 0x2f; j++)
                inter = inter ? inter : s[j];
        if (j >= n)
                return n;
        char final = s[j];
        if (inter == 0) {
                if (final == 'c')
                        track_reset(t); /* RIS */
                else if (final == 'n' || final == 'o')
                        t->gl = final == 'n' ? 2 : 3; /* LS2, LS3 (a single shift takes a run's first character, which
                                                         libvterm draws) */
        } else if (strchr("()*+", inter)) {
                /* A 94-character set into G0..G3: ASCII is "ESC ( B". */
                t->g_set[strchr("()*+", inter) - "()*+"] = j == i + 2 && final == 'B' ? G_ASCII : G_OTHER;
        } else if (strchr("-./", inter)) {
                t->g_set[1 + (strchr("-./", inter) - "-./")] = G_OTHER; /* a 96-character set */
        }
        return j + 1;
}

/* The filter's output into the emulator: runs of printable ASCII through
 * fast_text(), the rest to libvterm as it is. libvterm decodes text in
 * pieces by the first byte of each: UTF-8 in GL (or a byte above 0x7F)
 * decodes the rest of the text at once; the ASCII set only up to the next
 * byte above 0x7F, where a combining mark then joins the glyph before it
 * only if the cursor has not moved on. So with the ASCII set in GL a run
 * followed by such a byte goes all through libvterm, as it would have. */
static void feed_emulator(Tui *t, const char *s, size_t n) {
        size_t slow = 0; /* s[slow, i) is for libvterm */
        size_t i = 0;
        while (i < n) {
                unsigned char c = (unsigned char) s[i];
                if (c >= 0x20 && c < 0x7f) {
                        size_t j = i + 1;
                        while (j < n && (unsigned char) s[j] >= 0x20 && (unsigned char) s[j] < 0x7f)
                                j++;
                        bool cut = t->g_set[t->gl] == G_ASCII && j < n && (unsigned char) s[j] >= 0x80;
                        if (j - i > FAST_MIN && fast_ok(t) && !cut) {
                                emulator_write(t, s + slow, i - slow);
                                slow = j - fast_text(t, s + i, j - i);
                        }
                        i = j;
                } else if (c == 0x1b)
                        i = scan_escape(t, s, n, i);
                else {
                        if (c == 0x0e || c == 0x0f)
                                t->gl = c == 0x0e ? 1 : 0; /* SO, SI */
                        i++;
                }
        }
        emulator_write(t, s + slow, n - slow);
}

/* The writer thread: all it touches is the Writer. */

static void *writer_main(void *arg) {
        Writer *w = arg;
        pthread_mutex_lock(&w->lock);
        for (;;) {
                while (!w->busy && !w->quit)
                        pthread_cond_wait(&w->cond, &w->lock);
                if (!w->busy)
                        break;
                /* buf is the thread's while busy; error only it sets. */
                bool failed = w->error < 0;
                pthread_mutex_unlock(&w->lock);
                int r = failed ? 0 : write_all(w->fd, w->buf.data, w->buf.len);
                pthread_mutex_lock(&w->lock);
                if (r < 0)
                        w->error = r;
                w->buf.len = 0;
                w->busy = false;
                pthread_cond_broadcast(&w->cond);
                uint64_t one = 1;
                (void) !write(w->efd, &one, sizeof(one));
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

static Writer *writer_free(Writer *w) {
        if (!w)
                return NULL;
        pthread_mutex_lock(&w->lock);
        w->quit = true;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        strbuf_done(&w->buf);
        if (w->efd >= 0)
                close(w->efd);
        free(w);
        return NULL;
}

static int writer_new(int fd, Writer **ret) {
        Writer *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->fd = fd;
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0) {
                int e = -errno;
                free(w);
                return e;
        }
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        /* No signal is the thread's: the caller takes them (signalfd). */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int r = pthread_create(&w->thread, NULL, writer_main, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0) {
                pthread_cond_destroy(&w->cond);
                pthread_mutex_destroy(&w->lock);
                close(w->efd);
                free(w);
                return -r;
        }
        *ret = w;
        return 0;
}

/* Whether the writer still writes a frame; its error, if one failed. */
static int writer_state(Writer *w, bool *busy) {
        pthread_mutex_lock(&w->lock);
        *busy = w->busy;
        int r = w->error;
        pthread_mutex_unlock(&w->lock);
        return r;
}

/* Wait until the frame handed over is written. */
static int writer_wait(Writer *w) {
        pthread_mutex_lock(&w->lock);
        while (w->busy)
                pthread_cond_wait(&w->cond, &w->lock);
        int r = w->error;
        pthread_mutex_unlock(&w->lock);
        return r;
}

/* t->out to the terminal: handed to the writer (after the frame it
 * writes), or written now. */
static int flush_out(Tui *t) {
        StrBuf *o = &t->out;
        if (o->oom) {
                o->oom = false;
                o->len = 0;
                return -ENOMEM;
        }
        if (o->len == 0)
                return 0;
        if (!t->w) {
                int r = write_all(t->fd, o->data, o->len);
                o->len = 0;
                return r;
        }
        Writer *w = t->w;
        pthread_mutex_lock(&w->lock);
        while (w->busy)
                pthread_cond_wait(&w->cond, &w->lock);
        int r = w->error;
        if (r == 0) {
                /* Swap: the writer's empty buffer is ours to fill next. */
                StrBuf x = w->buf;
                w->buf = *o;
                *o = x;
                w->busy = true;
                pthread_cond_broadcast(&w->cond);
        }
        pthread_mutex_unlock(&w->lock);
        o->len = 0;
        return r;
}

int tui_fd(const Tui *t) {
        return t->w ? t->w->efd : -1;
}

void tui_written(Tui *t) {
        uint64_t n;
        if (t->w)
                (void) !read(t->w->efd, &n, sizeof(n));
}

bool tui_backlogged(const Tui *t) {
        return !t->overlay && !t->suspended && t->hist.len >= HIST_MAX / 2;
}

/* What the terminal shows, for a terminal of rows x cols (every row not
 * known yet). On failure nothing changed. */
static int alloc_grid(Tui *t, int rows, int cols) {
        int vrows = rows - 1;
        Grid shown;
        Cell zero = {};
        if (grid_new(&shown, vrows, cols, &zero) < 0)
                return -ENOMEM;
        bool *junk = calloc((size_t) vrows, sizeof(*junk));
        if (!junk) {
                grid_free(&shown);
                return -ENOMEM;
        }
        for (int r = 0; r < vrows; r++)
                junk[r] = true;
        grid_free(&t->shown);
        free(t->junk);
        t->shown = shown;
        t->junk = junk;
        t->rows = rows;
        t->cols = cols;
        t->vrows = vrows;
        return 0;
}

/* The emulator's screens at the sandbox's size, erased with the pen. */
static int alloc_screens(Tui *t, Grid g[2], int vrows, int cols) {
        Cell blank = blank_cell(t);
        if (grid_new(&g[0], vrows, cols, &blank) < 0)
                return -ENOMEM;
        if (grid_new(&g[1], vrows, cols, &blank) < 0) {
                grid_free(&g[0]);
                return -ENOMEM;
        }
        return 0;
}

int tui_new(const TuiOptions *opt, unsigned rows, unsigned columns, Tui **ret) {
        if (rows < 2 || columns < 2 || rows > 10000 || columns > 10000)
                return -ERANGE;
        Tui *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->fd = opt->fd;
        t->color = opt->color;
        t->clipboard = opt->clipboard;
        t->cursor_visible = true;
        t->cursor_shape = t->cursor_shape_shown = 0;
        t->pen = (Cell){ .fg = COLOR_DEFAULT_FG, .bg = COLOR_DEFAULT_BG };
        track_reset(t);
        t->vt = vterm_new((int) rows - 1, (int) columns);
        t->filter = term_filter_new(t->clipboard);
        if (t->filter)
                term_filter_pass_queries(t->filter, true);
        if (!t->vt || !t->filter || alloc_screens(t, t->scr, (int) rows - 1, (int) columns) < 0 ||
            alloc_grid(t, (int) rows, (int) columns) < 0) {
                tui_free(t);
                return -ENOMEM;
        }
        if (opt->writer) {
                int r = writer_new(t->fd, &t->w);
                if (r < 0) {
                        tui_free(t);
                        return r;
                }
        }
        vterm_set_utf8(t->vt, 1);
        vterm_output_set_callback(t->vt, cb_output, t);
        t->state = vterm_obtain_state(t->vt);
        if (!t->state) {
                tui_free(t);
                return -ENOMEM;
        }
        vterm_state_set_callbacks(t->state, &state_cbs, t);
        vterm_state_reset(t->state, 1);

        /* What the terminal shows goes up into its scrollback: a line feed
         * on the bottom row for each row (the scroll region the whole
         * screen first); then the sandbox's screen starts empty, autowrap
         * on (put_row() writes no character past the last column, nor one
         * there whose width the terminal may count otherwise). */
        StrBuf *o = &t->out;
        strbuf_puts(o, "\033[r");
        put_cup(o, t->rows - 1, 0);
        for (int i = 0; i < t->rows; i++)
                strbuf_putc(o, '\n');
        strbuf_puts(o, "\033[0m\033[?7h");
        pen_known_default(&t->tpen);
        t->st_lost = t->dirty = true;
        *ret = t;
        return 0;
}

unsigned tui_rows(const Tui *t) {
        return (unsigned) t->vrows;
}

unsigned tui_columns(const Tui *t) {
        return (unsigned) t->cols;
}

uint64_t tui_dropped(const Tui *t) {
        return term_filter_dropped(t->filter);
}

/* The clipboard writes the filter let through, kept for the next frame
 * (at most HIST_MAX bytes of them: then the latest). */
static void take_clipboard(Tui *t) {
        const char *s = t->scan.data;
        size_t n = t->scan.len;
        for (size_t i = 0; i + 5 <= n; i++) {
                if (memcmp(s + i, "\033]52;", 5) != 0)
                        continue;
                size_t j = i + 5;
                while (j < n && s[j] != '\a' && s[j] != '\033')
                        j++;
                size_t end = j < n && s[j] == '\a' ? j + 1 : j + 2 <= n ? j + 2 : n;
                if (t->clip.len > HIST_MAX)
                        t->clip.len = 0;
                strbuf_putn(&t->clip, s + i, end - i);
                i = end - 1;
        }
        if (t->clip.len > 0)
                t->dirty = true;
}

void tui_feed(Tui *t, const uint8_t *p, size_t n) {
        /* The filter first: what it drops never reaches libvterm either
         * (which cannot take all of it: tui.h). */
        t->scan.len = 0;
        term_filter_feed(t->filter, p, n, &t->scan, NULL);
        if (t->clipboard)
                take_clipboard(t);
        if (t->scan.len > 0)
                feed_emulator(t, t->scan.data, t->scan.len);
}

const uint8_t *tui_replies(Tui *t, size_t *ret_n) {
        *ret_n = t->replies.len;
        return (const uint8_t *) t->replies.data;
}

void tui_replies_clear(Tui *t) {
        t->replies.len = 0;
}

static void copy_field(char *dst, size_t size, const char *src, size_t keep) {
        size_t k = 0;
        for (const unsigned char *s = (const unsigned char *) (src ?: ""); *s && k + 1 < size && k < keep; s++)
                dst[k++] = *s >= 0x20 && *s < 0x7f ? (char) *s : '?';
        dst[k] = '\0';
}

void tui_set_status(Tui *t, const TuiStatus *s, uint64_t now_usec) {
        char profile[64], domain[17], network[24], digest[13];
        copy_field(profile, sizeof(profile), s->profile, 63);
        copy_field(domain, sizeof(domain), s->domain, 8);
        copy_field(network, sizeof(network), s->network, 23);
        copy_field(digest, sizeof(digest), s->digest, 8);
        uint64_t count[_CNT_MAX] = { s->refused_connections, s->refused_git, s->escalations_pending };
        bool changed = !t->st_known || !streq(profile, t->st_profile) || !streq(domain, t->st_domain) ||
                       !streq(network, t->st_network) || !streq(digest, t->st_digest) ||
                       s->sessions != t->st_sessions || s->paused != t->st_paused;
        for (int i = 0; i < _CNT_MAX; i++)
                if (count[i] != t->st_count[i]) {
                        /* A counter that went up stands out. */
                        if (t->st_known && count[i] > t->st_count[i])
                                t->st_moved[i] = now_usec;
                        t->st_count[i] = count[i];
                        changed = true;
                }
        memcpy(t->st_profile, profile, sizeof(profile));
        memcpy(t->st_domain, domain, sizeof(domain));
        memcpy(t->st_network, network, sizeof(network));
        memcpy(t->st_digest, digest, sizeof(digest));
        t->st_sessions = s->sessions;
        t->st_paused = s->paused;
        t->st_known = true;
        if (changed)
                t->st_changed = true;
}

static bool moved(const Tui *t, int i, uint64_t now) {
        return t->st_moved[i] != 0 && now < t->st_moved[i] + MOVED_USEC;
}

/* The status line, on the terminal's last row. */
static void put_status(Tui *t, uint64_t now) {
        StrBuf *o = &t->out;
        const char *base = "\033[0;7m";
        const char *hot = t->color ? "\033[0;1;37;41m" : "\033[0;1;4m";
        const char *warm = t->color ? "\033[0;30;43m" : "\033[0;1;7m";
        put_cup(o, t->rows - 1, 0);
        StrBuf text = STRBUF_INIT;
        int used = 0;
        /* Fields, each with its own style; the row is cut at its width. */
        struct {
                const char *style;
                char s[96];
        } f[8];
        size_t nf = 0;
        /* The counters first: a narrow terminal cuts the rest. */
        snprintf(f[nf].s, sizeof(f[nf].s), " lazaret %s ", t->st_profile);
        f[nf++].style = base;
        if (t->st_paused) {
                snprintf(f[nf].s, sizeof(f[nf].s), " PAUSED ");
                f[nf++].style = hot;
        }
        static const char *const label[_CNT_MAX] = { "refused conn", "refused git", "escalations" };
        for (int i = 0; i < _CNT_MAX; i++) {
                snprintf(f[nf].s, sizeof(f[nf].s), " %s %" PRIu64 " ", label[i], t->st_count[i]);
                f[nf++].style = moved(t, i, now) ? hot : (t->st_count[i] == 0 ? base : warm);
        }
        /* The policy's digest named; the Domain's hash is lazaret status's
         * (issue 42: two bare hashes said nothing, and the line is cut at
         * the terminal's width). */
        snprintf(f[nf].s, sizeof(f[nf].s), " sessions %u  %s  policy %s ", t->st_sessions, t->st_network, t->st_digest);
        f[nf++].style = base;
        for (size_t i = 0; i < nf && used < t->cols; i++) {
                strbuf_puts(&text, f[i].style);
                int k = MIN((int) strlen(f[i].s), t->cols - used);
                strbuf_putn(&text, f[i].s, (size_t) k);
                used += k;
        }
        strbuf_puts(&text, base);
        for (; used < t->cols; used++)
                strbuf_putc(&text, ' ');
        strbuf_puts(&text, "\033[0m");
        strbuf_putn(o, text.data ?: "", text.len);
        strbuf_done(&text);
        pen_known_default(&t->tpen);
        t->st_changed = t->st_lost = false;
        t->st_last = now;
}

static void put_mode(StrBuf *o, unsigned mode, bool on) {
        strbuf_printf(o, "\033[?%u%c", mode, on ? 'h' : 'l');
}

/* The modes that change what the terminal sends, as the sandbox set them. */
static void put_modes(Tui *t) {
        const TermFilterModes *m = term_filter_modes(t->filter);
        const TermFilterModes *s = &t->modes_shown;
        StrBuf *o = &t->out;
        bool all = !t->modes_known;
        if (all || m->app_cursor != s->app_cursor)
                put_mode(o, 1, m->app_cursor);
        if (all || m->app_keypad != s->app_keypad)
                strbuf_puts(o, m->app_keypad ? "\033=" : "\033>");
        if (all || m->bracketed_paste != s->bracketed_paste)
                put_mode(o, 2004, m->bracketed_paste);
        if (all || m->focus_events != s->focus_events)
                put_mode(o, 1004, m->focus_events);
        if (all || m->mouse != s->mouse) {
                if (s->mouse)
                        put_mode(o, s->mouse, false);
                if (m->mouse)
                        put_mode(o, m->mouse, true);
                if (all && !m->mouse)
                        put_mode(o, 1000, false);
        }
        if (all || m->mouse_encoding != s->mouse_encoding) {
                if (s->mouse_encoding)
                        put_mode(o, s->mouse_encoding, false);
                if (m->mouse_encoding)
                        put_mode(o, m->mouse_encoding, true);
        }
        t->modes_shown = *m;
        t->modes_known = true;
}

/* The lines scrolled off the sandbox's screen, into the terminal's
 * scrollback: a page at a time, each line drawn on its row unless the
 * terminal shows it there already, then one line feed per line on the
 * bottom row. */
static void put_hist(Tui *t) {
        StrBuf *o = &t->out;
        pen_reset(o, &t->tpen);
        if (t->hist_lost > 0) {
                /* The marker goes up first, alone. */
                put_cup(o, 0, 0);
                strbuf_printf(o, "\033[K[lazaret: %" PRIu64 " lines scrolled by too fast to keep]", t->hist_lost);
                put_cup(o, t->rows - 1, 0);
                strbuf_putc(o, '\n');
                for (int r = 0; r < t->vrows; r++)
                        t->junk[r] = true;
        }
        size_t i = 0;
        bool first = true;
        while (i < t->n_hist) {
                size_t page = MIN((size_t) t->vrows, t->n_hist - i);
                for (size_t j = 0; j < page; j++) {
                        if (first && t->hist_same[i + j] && !t->junk[j])
                                continue;
                        put_cup(o, (int) j, 0);
                        strbuf_putn(o, t->hist.data + t->hist_off[i + j], t->hist_off[i + j + 1] - t->hist_off[i + j]);
                }
                put_cup(o, t->rows - 1, 0);
                char *b = strbuf_room(o, page);
                if (b) {
                        memset(b, '\n', page);
                        strbuf_grew(o, page);
                }
                /* Everything moved up by page rows. */
                int k = (int) page;
                rotate_rows(t->shown.row, t->vrows, k);
                memmove(t->junk, t->junk + k, (size_t) (t->vrows - k) * sizeof(*t->junk));
                for (int r = t->vrows - k; r < t->vrows; r++)
                        t->junk[r] = true;
                i += page;
                first = false;
        }
        t->st_lost = true;
        hist_reset(t);
        t->hist_lost = 0;
}

int tui_wants(const Tui *t, uint64_t now) {
        if (t->suspended)
                return -1;
        if (t->w) {
                /* A frame being written: the next one when it is done
                 * (tui_fd()); an error at once. */
                bool busy;
                if (writer_state(t->w, &busy) < 0)
                        return 0;
                if (busy)
                        return -1;
        }
        /* Lines pile up: drawn now rather than lost. */
        if (tui_backlogged(t))
                return 0;
        uint64_t due = UINT64_MAX;
        if (!t->overlay && (t->dirty || t->st_lost || t->title_dirty))
                due = t->last_frame + FRAME_USEC;
        if (t->overlay && t->st_lost)
                due = 0;
        if (t->st_changed)
                due = MIN(due, t->st_last + STATUS_USEC);
        /* A counter that stood out goes back. */
        for (int i = 0; i < _CNT_MAX; i++)
                if (t->st_moved[i] && t->st_moved[i] + MOVED_USEC > t->st_last && t->st_moved[i] + MOVED_USEC < due)
                        due = t->st_moved[i] + MOVED_USEC;
        if (due == UINT64_MAX)
                return -1;
        if (due <= now)
                return 0;
        uint64_t ms = (due - now + 999) / 1000;
        return ms > 1000 ? 1000 : (int) ms;
}

int tui_render(Tui *t, uint64_t now) {
        if (t->suspended)
                return 0;
        if (t->w) {
                bool busy;
                int e = writer_state(t->w, &busy);
                if (e < 0 || busy)
                        return e;
        }
        bool content = !t->overlay && (t->dirty || t->st_lost || t->title_dirty) &&
                       (now >= t->last_frame + FRAME_USEC || tui_backlogged(t));
        bool status = t->st_lost || (t->st_changed && now >= t->st_last + STATUS_USEC);
        for (int i = 0; i < _CNT_MAX; i++)
                if (t->st_moved[i] && t->st_moved[i] + MOVED_USEC > t->st_last && t->st_moved[i] + MOVED_USEC <= now)
                        status = true;
        if (!content && !status)
                return 0;
        StrBuf *o = &t->out;
        /* One frame, shown at once where the terminal can (mode 2026). */
        strbuf_puts(o, "\033[?2026h\033[?25l");
        if (content) {
                if (t->alt != t->alt_shown) {
                        /* The terminal's own alternate screen, so the
                         * sandbox's full-screen programs stay out of its
                         * scrollback. */
                        pen_reset(o, &t->tpen);
                        put_mode(o, 1049, t->alt);
                        strbuf_puts(o, "\033[?7h");
                        t->alt_shown = t->alt;
                        for (int r = 0; r < t->vrows; r++)
                                t->junk[r] = true;
                        t->st_lost = true;
                }
                if (t->reverse != t->reverse_shown) {
                        t->reverse_shown = t->reverse;
                        for (int r = 0; r < t->vrows; r++)
                                t->junk[r] = true;
                }
                put_modes(t);
                if (t->n_hist > 0 || t->hist_lost > 0)
                        put_hist(t);
                const Grid *g = &t->scr[t->cur];
                size_t bytes = (size_t) t->cols * sizeof(Cell);
                for (int r = 0; r < MIN(t->vrows, g->rows); r++) {
                        if (g->cols != t->cols)
                                break; /* cannot happen: resized together */
                        Cell *s = t->shown.row[r]->c;
                        if (!t->junk[r] && memcmp(g->row[r]->c, s, bytes) == 0)
                                continue;
                        put_cup(o, r, 0);
                        put_row(o, &t->tpen, g->row[r]->c, t->cols, t->cols, t->reverse,
                                used_end(g->row[r], t->reverse));
                        memcpy(s, g->row[r]->c, bytes);
                        t->junk[r] = false;
                }
                if (t->title_dirty) {
                        strbuf_printf(o, "\033]2;%s\033\\", t->title);
                        t->title_dirty = false;
                }
                if (t->cursor_shape != t->cursor_shape_shown) {
                        /* DECSCUSR: 2 block, 4 underline, 6 bar (steady). */
                        static const int shape[] = { 0, 2, 4, 6 };
                        int k = t->cursor_shape >= 0 && t->cursor_shape < 4 ? shape[t->cursor_shape] : 0;
                        strbuf_printf(o, "\033[%d q", k);
                        t->cursor_shape_shown = t->cursor_shape;
                }
                if (t->clip.len > 0) {
                        strbuf_putn(o, t->clip.data, t->clip.len);
                        t->clip.len = 0;
                }
                if (t->bell) {
                        strbuf_putc(o, '\a');
                        t->bell = false;
                }
                t->dirty = false;
                t->last_frame = now;
        }
        if (t->st_lost || status)
                put_status(t, now);
        pen_reset(o, &t->tpen);
        VTermPos pos;
        vterm_state_get_cursorpos(t->state, &pos);
        put_cup(o, MIN(pos.row, t->vrows - 1), MIN(pos.col, t->cols - 1));
        if (t->cursor_visible && !t->overlay)
                strbuf_puts(o, "\033[?25h");
        strbuf_puts(o, "\033[?2026l");
        return flush_out(t);
}

/* libvterm 0.1.4 does not fit all of its state to a smaller size: the
 * scroll region's top, the left margin and the saved cursor stay where they
 * were (off the screen, where the next scroll moves a negative number of
 * lines and DECRC puts the cursor), and a screen made shorter with the
 * cursor above its last line of text leaves the cursor on a negative row.
 * The margins reset, the cursor back on the screen and saved there. */
static void emulator_resized(VTerm *vt, int vrows, int cols) {
        VTermPos pos;
        vterm_state_get_cursorpos(vterm_obtain_state(vt), &pos);
        int row = pos.row < 0 ? 0 : MIN(pos.row, vrows - 1);
        int col = pos.col < 0 ? 0 : MIN(pos.col, cols - 1);
        char b[48];
        int n = snprintf(b, sizeof(b), "\033[r\033[s\033[%d;%dH\0337", row + 1, col + 1);
        (void) vterm_input_write(vt, b, (size_t) n);
}

void tui_resize(Tui *t, unsigned rows, unsigned columns) {
        if (rows < 2 || columns < 2 || rows > 10000 || columns > 10000)
                return;
        if ((int) rows == t->rows && (int) columns == t->cols)
                return;
        /* Out of memory: the old size stays (drawn cut by the terminal). */
        if (alloc_screens(t, t->next, (int) rows - 1, (int) columns) < 0)
                return;
        if (alloc_grid(t, (int) rows, (int) columns) < 0) {
                grid_free(&t->next[0]);
                grid_free(&t->next[1]);
                return;
        }
        /* The screen is drawn again from the emulator's cells; lines
         * scrolled away and not drawn yet still go up, none of them shown. */
        for (size_t i = 0; i < t->n_hist; i++)
                t->hist_same[i] = false;
        vterm_set_size(t->vt, t->vrows, t->cols); /* cb_resize() */
        grid_free(&t->next[0]);
        grid_free(&t->next[1]);
        emulator_resized(t->vt, t->vrows, t->cols);
        strbuf_puts(&t->out, "\033[r\033[0m\033[?7h");
        pen_known_default(&t->tpen);
        t->dirty = t->st_lost = true;
        t->last_frame = 0;
}

int tui_overlay_draw(Tui *t, const TuiLine *lines, size_t n) {
        if (t->suspended)
                return 0;
        StrBuf *o = &t->out;
        t->overlay = true;
        strbuf_puts(o, "\033[?2026h\033[?25l");
        for (int r = 0; r < t->vrows; r++) {
                put_cup(o, r, 0);
                const TuiLine *l = (size_t) r < n ? &lines[r] : NULL;
                strbuf_puts(o, l && l->reverse ? "\033[0;7m" : "\033[0m");
                int used = 0;
                for (const unsigned char *c = (const unsigned char *) (l && l->text ? l->text : "");
                     *c && used < t->cols; c++, used++)
                        strbuf_putc(o, *c >= 0x20 && *c < 0x7f ? (char) *c : '?');
                if (l && l->reverse)
                        for (; used < t->cols; used++)
                                strbuf_putc(o, ' ');
                else
                        strbuf_puts(o, "\033[K");
                t->junk[r] = true;
        }
        strbuf_puts(o, "\033[0m");
        pen_known_default(&t->tpen);
        strbuf_puts(o, "\033[?2026l");
        return flush_out(t);
}

void tui_overlay_end(Tui *t) {
        t->overlay = false;
        for (int r = 0; r < t->vrows; r++)
                t->junk[r] = true;
        t->dirty = true;
        t->last_frame = 0;
}

int tui_render_now(Tui *t) {
        if (t->w) {
                int e = writer_wait(t->w);
                if (e < 0)
                        return e;
        }
        t->last_frame = 0;
        return tui_render(t, UINT64_MAX / 2);
}

void tui_suspend(Tui *t) {
        /* The prompt draws next: after what was handed over. */
        if (t->w)
                (void) writer_wait(t->w);
        t->suspended = true;
}

void tui_resume(Tui *t) {
        t->suspended = false;
        /* Whoever had the screen left it in their own state. */
        t->modes_known = false;
        t->alt_shown = false; /* it left the terminal on its main screen */
        strbuf_puts(&t->out, "\033[r\033[0m\033[?7h");
        pen_known_default(&t->tpen);
        for (int r = 0; r < t->vrows; r++)
                t->junk[r] = true;
        t->cursor_shape_shown = -1;
        t->dirty = t->st_lost = true;
        t->last_frame = 0;
}

Tui *tui_free(Tui *t) {
        if (!t)
                return NULL;
        if (t->w) {
                (void) writer_wait(t->w);
                t->w = writer_free(t->w);
        }
        if (t->state && t->junk) {
                StrBuf *o = &t->out;
                /* Leave: modes off, the status line erased, the cursor on
                 * the row below the sandbox's. */
                VTermPos pos;
                vterm_state_get_cursorpos(t->state, &pos);
                strbuf_puts(o, "\033[0m");
                if (t->alt_shown)
                        put_mode(o, 1049, false);
                put_cup(o, t->rows - 1, 0);
                strbuf_puts(o, "\033[2K\033[?1l\033>\033[?2004l\033[?1004l\033[?1000l\033[?1002l\033[?1003l\033[?1006l"
                               "\033[?1015l\033[?1005l\033[0 q\033[?7h\033[?25h");
                if (!t->alt_shown) {
                        put_cup(o, MIN(pos.row, t->vrows - 1), 0);
                        if (pos.col > 0)
                                strbuf_puts(o, "\r\n");
                }
                if (!o->oom)
                        (void) write_all(t->fd, o->data, o->len);
        }
        strbuf_done(&t->out);
        strbuf_done(&t->replies);
        strbuf_done(&t->hist);
        strbuf_done(&t->scan);
        strbuf_done(&t->clip);
        free(t->hist_off);
        free(t->hist_same);
        grid_free(&t->shown);
        for (int i = 0; i < 2; i++) {
                grid_free(&t->scr[i]);
                grid_free(&t->next[i]);
        }
        free(t->junk);
        term_filter_free(t->filter);
        if (t->vt)
                vterm_free(t->vt);
        free(t);
        return NULL;
}
