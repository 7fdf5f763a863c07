/* SPDX-License-Identifier: MIT */
/* The terminal layer of `lazaret run`: see tui.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

typedef struct Pen {
        VTermScreenCellAttrs attrs;
        VTermColor fg, bg;
        bool valid;
} Pen;

struct Tui {
        int fd;
        bool color, clipboard;
        VTerm *vt;
        VTermScreen *screen;
        TermFilter *filter; /* tracks the modes the terminal must mirror */
        int rows, cols; /* the terminal */
        int vrows; /* the sandbox: rows - 1 */

        VTermScreenCell *shown; /* vrows x cols: what the terminal shows */
        bool *junk; /* per row: what it shows is not known */
        VTermScreenCell *row; /* one row from the emulator */

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
        Pen pen;
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

static void put_cup(StrBuf *o, int row, int col) {
        strbuf_printf(o, "\033[%d;%dH", row + 1, col + 1);
}

static bool color_eq(const VTermColor *a, const VTermColor *b) {
        if (a->type != b->type)
                return false;
        if (a->type & VTERM_COLOR_DEFAULT_MASK)
                return true;
        if (VTERM_COLOR_IS_INDEXED(a))
                return a->indexed.idx == b->indexed.idx;
        return a->rgb.red == b->rgb.red && a->rgb.green == b->rgb.green && a->rgb.blue == b->rgb.blue;
}

static bool attrs_eq(const VTermScreenCellAttrs *a, const VTermScreenCellAttrs *b) {
        return a->bold == b->bold && a->underline == b->underline && a->italic == b->italic && a->blink == b->blink &&
               a->reverse == b->reverse && a->strike == b->strike;
}

static bool cell_eq(const VTermScreenCell *a, const VTermScreenCell *b) {
        for (int i = 0; i < VTERM_MAX_CHARS_PER_CELL; i++) {
                if (a->chars[i] != b->chars[i])
                        return false;
                if (a->chars[i] == 0)
                        break;
        }
        return a->width == b->width && attrs_eq(&a->attrs, &b->attrs) && color_eq(&a->fg, &b->fg) &&
               color_eq(&a->bg, &b->bg);
}

static void put_color(StrBuf *o, const VTermColor *c, bool fg) {
        if (fg ? VTERM_COLOR_IS_DEFAULT_FG(c) : VTERM_COLOR_IS_DEFAULT_BG(c))
                return;
        if (VTERM_COLOR_IS_INDEXED(c)) {
                unsigned i = c->indexed.idx;
                if (i < 8)
                        strbuf_printf(o, ";%u", (fg ? 30u : 40u) + i);
                else if (i < 16)
                        strbuf_printf(o, ";%u", (fg ? 90u : 100u) + i - 8);
                else
                        strbuf_printf(o, ";%u;5;%u", fg ? 38u : 48u, i);
        } else
                strbuf_printf(o, ";%u;2;%u;%u;%u", fg ? 38u : 48u, c->rgb.red, c->rgb.green, c->rgb.blue);
}

/* The terminal's pen is known to be the default one (after an SGR 0). */
static void pen_known_default(Pen *pen) {
        *pen = (Pen){ .valid = true };
        pen->fg.type = VTERM_COLOR_DEFAULT_FG;
        pen->bg.type = VTERM_COLOR_DEFAULT_BG;
}

/* Make the terminal's pen the cell's. */
static void pen_set(StrBuf *o, Pen *pen, const VTermScreenCell *c) {
        if (pen->valid && attrs_eq(&pen->attrs, &c->attrs) && color_eq(&pen->fg, &c->fg) && color_eq(&pen->bg, &c->bg))
                return;
        strbuf_puts(o, "\033[0");
        if (c->attrs.bold)
                strbuf_puts(o, ";1");
        if (c->attrs.italic)
                strbuf_puts(o, ";3");
        if (c->attrs.underline)
                strbuf_puts(o, ";4");
        if (c->attrs.blink)
                strbuf_puts(o, ";5");
        if (c->attrs.reverse)
                strbuf_puts(o, ";7");
        if (c->attrs.strike)
                strbuf_puts(o, ";9");
        put_color(o, &c->fg, true);
        put_color(o, &c->bg, false);
        strbuf_putc(o, 'm');
        pen->attrs = c->attrs;
        pen->fg = c->fg;
        pen->bg = c->bg;
        pen->valid = true;
}

static void pen_reset(StrBuf *o, Pen *pen) {
        if (pen->valid && !pen->attrs.bold && !pen->attrs.italic && !pen->attrs.underline && !pen->attrs.blink &&
            !pen->attrs.reverse && !pen->attrs.strike && VTERM_COLOR_IS_DEFAULT_FG(&pen->fg) &&
            VTERM_COLOR_IS_DEFAULT_BG(&pen->bg))
                return;
        strbuf_puts(o, "\033[0m");
        pen_known_default(pen);
}

static void put_utf8(StrBuf *o, uint32_t u) {
        char b[4];
        if (u < 0x80) {
                strbuf_putc(o, (char) u);
        } else if (u < 0x800) {
                b[0] = (char) (0xc0 | (u >> 6));
                b[1] = (char) (0x80 | (u & 0x3f));
                strbuf_putn(o, b, 2);
        } else if (u < 0x10000) {
                b[0] = (char) (0xe0 | (u >> 12));
                b[1] = (char) (0x80 | ((u >> 6) & 0x3f));
                b[2] = (char) (0x80 | (u & 0x3f));
                strbuf_putn(o, b, 3);
        } else {
                b[0] = (char) (0xf0 | (u >> 18));
                b[1] = (char) (0x80 | ((u >> 12) & 0x3f));
                b[2] = (char) (0x80 | ((u >> 6) & 0x3f));
                b[3] = (char) (0x80 | (u & 0x3f));
                strbuf_putn(o, b, 4);
        }
}

/* A cell's characters. Nothing that a terminal could take for a control
 * (C0, DEL, C1 as characters, surrogates) is ever written: U+FFFD instead.
 * Returns false when a character is not ASCII, whose width the terminal
 * may count differently from the emulator. */
static bool put_chars(StrBuf *o, const VTermScreenCell *c) {
        if (c->chars[0] == 0) {
                strbuf_putc(o, ' ');
                return true;
        }
        bool ascii = true;
        for (int i = 0; i < VTERM_MAX_CHARS_PER_CELL && c->chars[i]; i++) {
                uint32_t u = c->chars[i];
                if (u < 0x20 || (u >= 0x7f && u < 0xa0) || (u >= 0xd800 && u < 0xe000) || u > 0x10ffff)
                        u = 0xfffd;
                if (u >= 0x80)
                        ascii = false;
                put_utf8(o, u);
        }
        return ascii;
}

static bool cell_blank(const VTermScreenCell *c) {
        return (c->chars[0] == 0 || (c->chars[0] == ' ' && c->chars[1] == 0)) && !c->attrs.reverse &&
               !c->attrs.underline && !c->attrs.strike && VTERM_COLOR_IS_DEFAULT_BG(&c->bg);
}

/* One row of cells from the cursor, which is at its first column: the
 * cells up to the last one that is not blank, then erased to the end. A
 * character that is not ASCII is followed by a move to the column the
 * emulator puts the next one in, so a terminal that counts its width
 * differently garbles that row at most. */
static void put_row(StrBuf *o, Pen *pen, const VTermScreenCell *cells, int cols) {
        int end = cols;
        while (end > 0 && cell_blank(&cells[end - 1]))
                end--;
        for (int col = 0; col < end;) {
                const VTermScreenCell *c = &cells[col];
                int w = c->width > 0 ? c->width : 1;
                if (c->chars[0] == (uint32_t) -1) {
                        /* The right half of a wide character whose left
                         * half is not ours: a blank. */
                        VTermScreenCell b = *c;
                        b.chars[0] = 0;
                        pen_set(o, pen, &b);
                        strbuf_putc(o, ' ');
                        col++;
                        continue;
                }
                pen_set(o, pen, c);
                if (!put_chars(o, c) || w > 1)
                        strbuf_printf(o, "\033[%dG", col + w + 1);
                col += w;
        }
        if (end < cols) {
                pen_reset(o, pen);
                strbuf_puts(o, "\033[K");
        }
}

static void fetch_row(Tui *t, int r, VTermScreenCell *cells) {
        for (int c = 0; c < t->cols; c++) {
                VTermScreenCell *x = &cells[c];
                memset(x, 0, sizeof(*x));
                (void) vterm_screen_get_cell(t->screen, (VTermPos){ .row = r, .col = c }, x);
                /* Only what cell_eq() compares counts: the rest zero. */
                VTermScreenCellAttrs a = x->attrs;
                memset(&x->attrs, 0, sizeof(x->attrs));
                x->attrs.bold = a.bold;
                x->attrs.underline = a.underline;
                x->attrs.italic = a.italic;
                x->attrs.blink = a.blink;
                x->attrs.reverse = a.reverse;
                x->attrs.strike = a.strike;
        }
}

/* libvterm's callbacks. */

static int cb_damage(VTermRect rect, void *user) {
        (void) rect;
        ((Tui *) user)->dirty = true;
        return 1;
}

static int cb_movecursor(VTermPos pos, VTermPos oldpos, int visible, void *user) {
        (void) pos;
        (void) oldpos;
        (void) visible;
        ((Tui *) user)->dirty = true;
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
                t->alt = val->boolean;
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

static void hist_reset(Tui *t) {
        t->hist.len = 0;
        t->n_hist = 0;
        if (t->hist_off)
                t->hist_off[0] = 0;
}

static int cb_sb_pushline(int cols, const VTermScreenCell *cells, void *user) {
        Tui *t = user;
        t->dirty = true;
        if (t->hist.oom)
                return 1;
        if (t->hist.len > HIST_MAX) {
                t->hist_lost += t->n_hist;
                hist_reset(t);
        }
        if (t->n_hist + 1 >= t->cap_hist) {
                size_t cap = t->cap_hist ? t->cap_hist * 2 : 256;
                size_t *o = realloc(t->hist_off, (cap + 1) * sizeof(*o));
                if (!o)
                        return 1;
                t->hist_off = o;
                if (t->cap_hist == 0)
                        o[0] = 0; /* no line yet: hist_reset() never ran */
                bool *s = realloc(t->hist_same, cap * sizeof(*s));
                if (!s)
                        return 1;
                t->hist_same = s;
                t->cap_hist = cap;
        }
        int n = MIN(cols, t->cols);
        /* The n-th line scrolled away is the one the terminal shows on row
         * n (the emulator scrolls from the top), unless lines were lost. */
        size_t i = t->n_hist;
        bool same = t->hist_lost == 0 && i < (size_t) t->vrows && !t->junk[i];
        VTermScreenCell *row = t->row;
        for (int c = 0; c < t->cols; c++) {
                memset(&row[c], 0, sizeof(row[c]));
                if (c < n) {
                        row[c].width = cells[c].width;
                        memcpy(row[c].chars, cells[c].chars, sizeof(row[c].chars));
                        row[c].fg = cells[c].fg;
                        row[c].bg = cells[c].bg;
                        row[c].attrs.bold = cells[c].attrs.bold;
                        row[c].attrs.underline = cells[c].attrs.underline;
                        row[c].attrs.italic = cells[c].attrs.italic;
                        row[c].attrs.blink = cells[c].attrs.blink;
                        row[c].attrs.reverse = cells[c].attrs.reverse;
                        row[c].attrs.strike = cells[c].attrs.strike;
                } else {
                        row[c].width = 1;
                        row[c].fg.type = VTERM_COLOR_DEFAULT_FG;
                        row[c].bg.type = VTERM_COLOR_DEFAULT_BG;
                }
                if (same && !cell_eq(&row[c], &t->shown[i * (size_t) t->cols + (size_t) c]))
                        same = false;
        }
        Pen pen = {};
        pen_reset(&t->hist, &pen);
        put_row(&t->hist, &pen, row, t->cols);
        pen_reset(&t->hist, &pen);
        t->hist_same[i] = same;
        t->n_hist++;
        t->hist_off[t->n_hist] = t->hist.len;
        return 1;
}

static void cb_output(const char *s, size_t len, void *user) {
        strbuf_putn(&((Tui *) user)->replies, s, len);
}

static const VTermScreenCallbacks screen_cbs = {
        .damage = cb_damage,
        .moverect = NULL,
        .movecursor = cb_movecursor,
        .settermprop = cb_settermprop,
        .bell = cb_bell,
        .sb_pushline = cb_sb_pushline,
};

/* What the terminal shows, for a terminal of rows x cols (every row not
 * known yet). On failure nothing changed. */
static int alloc_grid(Tui *t, int rows, int cols) {
        int vrows = rows - 1;
        VTermScreenCell *shown = calloc((size_t) vrows * (size_t) cols, sizeof(*shown));
        bool *junk = calloc((size_t) vrows, sizeof(*junk));
        VTermScreenCell *row = calloc((size_t) cols, sizeof(*row));
        if (!shown || !junk || !row) {
                free(shown);
                free(junk);
                free(row);
                return -ENOMEM;
        }
        for (int r = 0; r < vrows; r++)
                junk[r] = true;
        free(t->shown);
        free(t->junk);
        free(t->row);
        t->shown = shown;
        t->junk = junk;
        t->row = row;
        t->rows = rows;
        t->cols = cols;
        t->vrows = vrows;
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
        t->vt = vterm_new((int) rows - 1, (int) columns);
        t->filter = term_filter_new(t->clipboard);
        if (t->filter)
                term_filter_pass_queries(t->filter, true);
        if (!t->vt || !t->filter || alloc_grid(t, (int) rows, (int) columns) < 0) {
                tui_free(t);
                return -ENOMEM;
        }
        vterm_set_utf8(t->vt, 1);
        vterm_output_set_callback(t->vt, cb_output, t);
        t->screen = vterm_obtain_screen(t->vt);
        vterm_screen_set_callbacks(t->screen, &screen_cbs, t);
        vterm_screen_set_damage_merge(t->screen, VTERM_DAMAGE_SCREEN);
        vterm_screen_enable_altscreen(t->screen, 1);
        vterm_screen_reset(t->screen, 1);

        /* What the terminal shows goes up into its scrollback: a line feed
         * on the bottom row for each row (the scroll region the whole
         * screen first); then the sandbox's screen starts empty, autowrap
         * off (nothing we draw can scroll). */
        StrBuf *o = &t->out;
        strbuf_puts(o, "\033[r");
        put_cup(o, t->rows - 1, 0);
        for (int i = 0; i < t->rows; i++)
                strbuf_putc(o, '\n');
        strbuf_puts(o, "\033[0m\033[?7l");
        pen_known_default(&t->pen);
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
                (void) vterm_input_write(t->vt, t->scan.data, t->scan.len);
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
        snprintf(f[nf].s, sizeof(f[nf].s), " sessions %u  %s  %s %s ", t->st_sessions, t->st_domain, t->st_network,
                 t->st_digest);
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
        pen_known_default(&t->pen);
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
        if (t->hist_lost > 0) {
                /* The marker goes up first, alone. */
                pen_reset(o, &t->pen);
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
                pen_known_default(&t->pen);
                put_cup(o, t->rows - 1, 0);
                for (size_t j = 0; j < page; j++)
                        strbuf_putc(o, '\n');
                /* Everything moved up by page rows. */
                size_t cols = (size_t) t->cols;
                for (size_t r = 0; r < (size_t) t->vrows; r++)
                        if (r + page < (size_t) t->vrows) {
                                memcpy(&t->shown[r * cols], &t->shown[(r + page) * cols], cols * sizeof(*t->shown));
                                t->junk[r] = t->junk[r + page];
                        } else
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
        bool content = !t->overlay && (t->dirty || t->st_lost || t->title_dirty) && now >= t->last_frame + FRAME_USEC;
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
                vterm_screen_flush_damage(t->screen);
                if (t->alt != t->alt_shown) {
                        /* The terminal's own alternate screen, so the
                         * sandbox's full-screen programs stay out of its
                         * scrollback. */
                        pen_reset(o, &t->pen);
                        put_mode(o, 1049, t->alt);
                        strbuf_puts(o, "\033[?7l");
                        t->alt_shown = t->alt;
                        for (int r = 0; r < t->vrows; r++)
                                t->junk[r] = true;
                        t->st_lost = true;
                }
                put_modes(t);
                if (t->n_hist > 0 || t->hist_lost > 0)
                        put_hist(t);
                size_t cols = (size_t) t->cols;
                for (int r = 0; r < t->vrows; r++) {
                        fetch_row(t, r, t->row);
                        VTermScreenCell *s = &t->shown[(size_t) r * cols];
                        bool same = !t->junk[r];
                        for (size_t c = 0; same && c < cols; c++)
                                same = cell_eq(&t->row[c], &s[c]);
                        if (same)
                                continue;
                        put_cup(o, r, 0);
                        put_row(o, &t->pen, t->row, t->cols);
                        memcpy(s, t->row, cols * sizeof(*s));
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
        pen_reset(o, &t->pen);
        VTermPos pos;
        vterm_state_get_cursorpos(vterm_obtain_state(t->vt), &pos);
        put_cup(o, MIN(pos.row, t->vrows - 1), MIN(pos.col, t->cols - 1));
        if (t->cursor_visible && !t->overlay)
                strbuf_puts(o, "\033[?25h");
        strbuf_puts(o, "\033[?2026l");
        if (o->oom) {
                o->oom = false;
                o->len = 0;
                return -ENOMEM;
        }
        int r = write_all(t->fd, o->data, o->len);
        o->len = 0;
        return r;
}

/* libvterm 0.1.4 does not fit all of its state to a smaller size: the
 * scroll region's top, the left margin and the saved cursor stay where they
 * were (off the screen, where the next scroll moves a negative number of
 * lines and DECRC puts the cursor), and a screen made shorter with the
 * cursor above its last line of text leaves the cursor on a negative row.
 * The margins reset, the cursor back on the screen and saved there. */
static void emulator_resized(Tui *t) {
        VTermPos pos;
        vterm_state_get_cursorpos(vterm_obtain_state(t->vt), &pos);
        int row = pos.row < 0 ? 0 : MIN(pos.row, t->vrows - 1);
        int col = pos.col < 0 ? 0 : MIN(pos.col, t->cols - 1);
        char b[48];
        int n = snprintf(b, sizeof(b), "\033[r\033[s\033[%d;%dH\0337", row + 1, col + 1);
        (void) vterm_input_write(t->vt, b, (size_t) n);
}

void tui_resize(Tui *t, unsigned rows, unsigned columns) {
        if (rows < 2 || columns < 2 || rows > 10000 || columns > 10000)
                return;
        if ((int) rows == t->rows && (int) columns == t->cols)
                return;
        /* Out of memory: the old size stays (drawn cut by the terminal). */
        if (alloc_grid(t, (int) rows, (int) columns) < 0)
                return;
        /* The screen is drawn again from the emulator's cells; lines
         * scrolled away and not drawn yet still go up, none of them shown. */
        for (size_t i = 0; i < t->n_hist; i++)
                t->hist_same[i] = false;
        vterm_set_size(t->vt, t->vrows, t->cols);
        emulator_resized(t);
        strbuf_puts(&t->out, "\033[r\033[0m\033[?7l");
        pen_known_default(&t->pen);
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
        pen_known_default(&t->pen);
        strbuf_puts(o, "\033[?2026l");
        if (o->oom) {
                o->oom = false;
                o->len = 0;
                return -ENOMEM;
        }
        int r = write_all(t->fd, o->data, o->len);
        o->len = 0;
        return r;
}

void tui_overlay_end(Tui *t) {
        t->overlay = false;
        for (int r = 0; r < t->vrows; r++)
                t->junk[r] = true;
        t->dirty = true;
        t->last_frame = 0;
}

void tui_suspend(Tui *t) {
        t->suspended = true;
}

void tui_resume(Tui *t) {
        t->suspended = false;
        /* Whoever had the screen left it in their own state. */
        t->modes_known = false;
        t->alt_shown = false; /* it left the terminal on its main screen */
        strbuf_puts(&t->out, "\033[r\033[0m\033[?7l");
        pen_known_default(&t->pen);
        for (int r = 0; r < t->vrows; r++)
                t->junk[r] = true;
        t->cursor_shape_shown = -1;
        t->dirty = t->st_lost = true;
        t->last_frame = 0;
}

Tui *tui_free(Tui *t) {
        if (!t)
                return NULL;
        if (t->vt && t->junk) {
                StrBuf *o = &t->out;
                /* Leave: modes off, the status line erased, the cursor on
                 * the row below the sandbox's. */
                VTermPos pos;
                vterm_state_get_cursorpos(vterm_obtain_state(t->vt), &pos);
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
        free(t->shown);
        free(t->junk);
        free(t->row);
        term_filter_free(t->filter);
        if (t->vt)
                vterm_free(t->vt);
        free(t);
        return NULL;
}
