/* SPDX-License-Identifier: MIT */
/* The terminal layer's emulator side (tui-internal.h): the sandbox's
 * screens as grids of cells, written by libvterm's state callbacks; the
 * lines scrolled away, kept for the terminal's scrollback; and the fast
 * path that writes runs of plain text into the cells without libvterm. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "string-util.h"
#include "tui-internal.h"

/* Grids. */

int grid_new(Grid *g, int rows, int cols, const Cell *blank) {
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

void grid_free(Grid *g) {
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

void rotate_rows(Row **r, int n, int k) {
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
Cell blank_cell(const Tui *t) {
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
int used_end(const Row *r, bool reverse) {
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

void hist_reset(Tui *t) {
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

void cb_output(const char *s, size_t len, void *user) {
        strbuf_putn(&((Tui *) user)->replies, s, len);
}

const VTermStateCallbacks state_cbs = {
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

void track_reset(Tui *t) {
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
void feed_emulator(Tui *t, const char *s, size_t n) {
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
