/* SPDX-License-Identifier: MIT */
/* The terminal layer's emulator against hostile output: what a sandboxed
 * program prints goes through tui_feed() (the filter, then libvterm 0.1.4's
 * state layer and tui.c's own screen) and the real terminal's size changes
 * through tui_resize(); after each step the frame is drawn (tui_render(),
 * which reads every cell), the cursor must be on the screen, and every cell
 * must be what libvterm's own screen layer (the oracle, fed the same bytes
 * and resized the same way) holds. The streams are pseudo-random (a fixed
 * seed), biased towards the sequences libvterm mishandles, and the inputs
 * that made it crash or hang, each cut down to what it takes.
 *
 * tui.c, tui-encode.c and tui-screen.c are compiled into this test (they
 * are not in shared_dep) so that their own libvterm set-up and resize
 * handling are what is tested; write_all() is stubbed. */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/tui/tui-encode.c"
#include "../../src/tui/tui-screen.c"
#include "../../src/tui/tui.c"

/* The terminal: what tui_render() writes, counted and dropped; or, for
 * test_writer, written to a pipe (fd >= 0), from the writer thread. */
static uint64_t written;
int write_all(int fd, const void *buf, size_t n) {
        if (fd < 0) {
                written += n;
                return 0;
        }
        for (const char *p = buf; n > 0;) {
                ssize_t k = write(fd, p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/* A step that does not come back (libvterm 0.1.4 loops forever on some
 * input): the whole test fails instead of hanging. */
static void on_alarm(int sig) {
        (void) sig;
        static const char m[] = "test-tui-fuzz: a step did not finish in 10 s (libvterm loops)\n";
        (void) !write(STDERR_FILENO, m, sizeof(m) - 1);
        _exit(1);
}

static uint64_t now;

/* The oracle: libvterm's screen layer, at the sandbox's size. */
typedef struct Oracle {
        VTerm *vt;
        VTermScreen *screen;
} Oracle;

static Oracle oracle;

/* TUI_FUZZ_TRACE=1: every step of every screen, to replay a failure. */
static bool trace;

static void oracle_open(unsigned rows, unsigned cols) {
        oracle.vt = vterm_new((int) rows - 1, (int) cols);
        assert_non_null(oracle.vt);
        vterm_set_utf8(oracle.vt, 1);
        oracle.screen = vterm_obtain_screen(oracle.vt);
        vterm_screen_enable_altscreen(oracle.screen, 1);
        vterm_screen_reset(oracle.screen, 1);
}

static void oracle_close(void) {
        vterm_free(oracle.vt);
        oracle = (Oracle){};
}

static Tui *open_tui(unsigned rows, unsigned cols, bool clip) {
        TuiOptions o = { .fd = -1, .color = true, .clipboard = clip };
        Tui *t = NULL;
        assert_int_equal(tui_new(&o, rows, cols, &t), 0);
        TuiStatus s = {
                .profile = "test", .domain = "0123456789ab", .network = "none", .digest = "abcdef01", .sessions = 1
        };
        tui_set_status(t, &s, now);
        oracle_open(rows, cols);
        if (trace)
                fprintf(stderr, "OPEN(%u, %u)\n", rows, cols);
        return t;
}

static void close_tui(Tui *t) {
        tui_free(t);
        oracle_close();
}

/* The step being checked, shown when a check fails. */
static const char *step_what;
static const char *step_data;
static size_t step_len;

static void show_bytes(const char *p, size_t n) {
        fprintf(stderr, "\"");
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) p[i];
                if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
                        fputc(c, stderr);
                else
                        fprintf(stderr, "\\x%02x\"\"", c);
        }
        fprintf(stderr, "\"");
}

static void show_step(void) {
        fprintf(stderr, "test-tui-fuzz: after %s", step_what ?: "the start");
        if (step_data) {
                fprintf(stderr, " ");
                show_bytes(step_data, MIN(step_len, (size_t) 4000));
        }
        fprintf(stderr, "\n");
}

/* Every cell of tui.c's screen as the oracle has it. */
static void compare(Tui *t) {
        const Grid *g = &t->scr[t->cur];
        int rows, cols;
        vterm_get_size(oracle.vt, &rows, &cols);
        assert_int_equal(g->rows, rows);
        assert_int_equal(g->cols, cols);
        assert_int_equal(g->rows, t->vrows);
        assert_int_equal(g->cols, t->cols);
        for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++) {
                        VTermScreenCell x;
                        memset(&x, 0, sizeof(x));
                        assert_int_equal(vterm_screen_get_cell(oracle.screen, (VTermPos){ .row = r, .col = c }, &x), 1);
                        const Cell *m = &g->row[r]->c[c];
                        bool same = true;
                        for (int i = 0; i < VTERM_MAX_CHARS_PER_CELL; i++) {
                                if (x.chars[i] != m->chars[i])
                                        same = false;
                                if (x.chars[i] == 0 || x.chars[0] == CH_WIDE_RIGHT)
                                        break;
                        }
                        int width = c + 1 < cols && g->row[r]->c[c + 1].chars[0] == CH_WIDE_RIGHT ? 2 : 1;
                        uint32_t flip = t->reverse ? A_REVERSE : 0;
                        same = same && x.width == width && !!x.attrs.bold == !!(m->attrs & A_BOLD) &&
                               !!x.attrs.underline == !!(m->attrs & A_UNDERLINE) &&
                               !!x.attrs.italic == !!(m->attrs & A_ITALIC) &&
                               !!x.attrs.blink == !!(m->attrs & A_BLINK) &&
                               !!x.attrs.reverse == !!((m->attrs ^ flip) & A_REVERSE) &&
                               !!x.attrs.strike == !!(m->attrs & A_STRIKE) && color_pack(&x.fg) == m->fg &&
                               color_pack(&x.bg) == m->bg;
                        if (!same)
                                show_step();
                        if (!same)
                                fail_msg("cell (%d,%d) of %dx%d%s: U+%04X w%d attrs %x fg %08x bg %08x, the oracle's "
                                         "U+%04X w%d b%d u%d i%d k%d r%d s%d fg %08x bg %08x (second characters "
                                         "U+%04X, U+%04X)",
                                         r, c, rows, cols, t->reverse ? " (DECSCNM)" : "", m->chars[0], width, m->attrs,
                                         m->fg, m->bg, x.chars[0], x.width, x.attrs.bold, x.attrs.underline,
                                         x.attrs.italic, x.attrs.blink, x.attrs.reverse, x.attrs.strike,
                                         color_pack(&x.fg), color_pack(&x.bg), m->chars[1],
                                         x.chars[0] ? x.chars[1] : 0);
                }
        /* Each row of both screens: from used on, every cell its tail. */
        for (int i = 0; i < 2; i++)
                for (int r = 0; r < t->scr[i].rows; r++) {
                        const Row *row = t->scr[i].row[r];
                        assert_true(row->used >= 0 && row->used <= t->scr[i].cols);
                        for (int c = row->used; c < t->scr[i].cols; c++)
                                if (!cell_same(&row->c[c], &row->tail))
                                        show_step();
                        for (int c = row->used; c < t->scr[i].cols; c++)
                                if (!cell_same(&row->c[c], &row->tail))
                                        fail_msg("screen %d row %d: cell %d past used %d is not its tail", i, r, c,
                                                 row->used);
                }
        VTermPos a, b;
        vterm_state_get_cursorpos(t->state, &a);
        vterm_state_get_cursorpos(vterm_obtain_state(oracle.vt), &b);
        if (a.row != b.row || a.col != b.col)
                show_step();
        if (a.row != b.row || a.col != b.col)
                fail_msg("the cursor is at (%d,%d), the oracle's at (%d,%d)", a.row, a.col, b.row, b.col);
}

/* Draw a frame, then compare: the cursor on the screen, every cell the
 * oracle's. */
static void check(Tui *t) {
        now += 1000000;
        assert_true(tui_render(t, now) >= 0);
        size_t k;
        (void) tui_replies(t, &k);
        tui_replies_clear(t);
        VTermPos pos;
        vterm_state_get_cursorpos(t->state, &pos);
        if (pos.row < 0 || pos.row >= t->vrows || pos.col < 0 || pos.col >= t->cols)
                fail_msg("the cursor is at (%d,%d), off the %dx%d screen", pos.row, pos.col, t->vrows, t->cols);
        compare(t);
}

static void feed(Tui *t, const void *p, size_t n) {
        alarm(10);
        step_what = "feeding";
        step_data = p;
        step_len = n;
        if (trace) {
                fprintf(stderr, "FEED(");
                show_bytes(p, n);
                fprintf(stderr, "),\n");
        }
        tui_feed(t, p, n);
        /* The oracle takes what the emulator took: the filter's output. */
        if (t->scan.len > 0)
                (void) vterm_input_write(oracle.vt, t->scan.data, t->scan.len);
        check(t);
        alarm(0);
}

static void feed_str(Tui *t, const char *s) {
        feed(t, s, strlen(s));
}

static void resize(Tui *t, unsigned rows, unsigned cols) {
        alarm(10);
        step_what = "a resize";
        step_data = NULL;
        if (trace)
                fprintf(stderr, "RESIZE(%u, %u),\n", rows, cols);
        bool change = (int) rows != t->rows || (int) cols != t->cols;
        tui_resize(t, rows, cols);
        if (change) {
                vterm_set_size(oracle.vt, (int) rows - 1, (int) cols);
                emulator_resized(oracle.vt, (int) rows - 1, (int) cols);
        }
        check(t);
        alarm(0);
}

/* Each input that crashed or hung libvterm behind the filter, cut down to
 * what it takes. A step is a feed, or (NULL text) a resize of the real
 * terminal to rows x cols; the sandbox's screen is one row shorter. */
typedef struct Step {
        const char *text;
        unsigned rows, cols;
} Step;
#define FEED(s)                                                                                                        \
        { s, 0, 0 }
#define RESIZE(r, c)                                                                                                   \
        { NULL, r, c }
#define MAX_STEPS 4

typedef struct Crasher {
        const char *what;
        unsigned rows, cols;
        Step steps[MAX_STEPS];
} Crasher;

static const Crasher crashers[] = {
        /* REP (CSI b) repeats the last glyph by its width: before any
         * glyph that width is 0, and the loop never ends. */
        { "REP before any glyph", 25, 80, { FEED("\033[b") } },
        /* ... after a lone combining mark, the same. */
        { "REP after a lone combining mark", 25, 80, { FEED("\xcc\x80\033[b") } },
        /* REP of a wide glyph with the cursor on the last column: its
         * right half goes to the cell past the row, a NULL cell. */
        { "REP of a wide glyph at the last column", 25, 80, { FEED("\xe4\xb8\xad\033[999C\033[b") } },
        { "REP of a wide glyph at the last column, 3 columns", 4, 3, { FEED("\xe2\x8c\xa9\033[b") } },
        /* U+3099 and U+302A..U+302F are combining marks that libvterm
         * counts 2 wide: a base character and enough of them make one
         * glyph wider than the screen, written past its row. */
        { "wide combining marks wider than the screen",
          25,
          80,
          { FEED("a\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99"
                 "\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99"
                 "\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99"
                 "\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99"
                 "\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82\x99\xe3\x82"
                 "\x99") } },
        { "one wide combining mark, 2 columns", 3, 2, { FEED("a\xe3\x82\x99") } },
        { "ideographic tone marks, 2 columns", 3, 2, { FEED("a\xe3\x80\xaa\xe3\x80\xaf") } },
        /* A scroll region whose top is below the screen after it shrinks:
         * the next scroll moves a negative number of lines. */
        { "scroll region below a screen made shorter", 25, 80, { FEED("\033[7r"), RESIZE(2, 80), FEED("\v") } },
        { "scroll region below a screen made shorter, SU",
          25,
          80,
          { FEED("\033[21r"), RESIZE(11, 80), FEED("\033[S") } },
        /* The saved cursor is not moved onto a screen made shorter: DECRC
         * puts the cursor below it, where the line attributes are read and
         * written past their array. */
        { "DECRC below a screen made shorter, text",
          25,
          80,
          { FEED("\033[20H\0337"), RESIZE(11, 80), FEED("\0338-") } },
        { "DECRC below a screen made shorter, HT", 25, 80, { FEED("\033[10H\0337"), RESIZE(2, 80), FEED("\0338\t") } },
        { "DECRC below a screen made shorter, DECDWL",
          25,
          80,
          { FEED("\033[20H\0337"), RESIZE(11, 80), FEED("\0338\033#6") } },
        /* A screen made shorter with the cursor above the last line written
         * scrolls that line up, and the cursor with it: onto a negative
         * row, where ED erases through NULL cells. */
        { "cursor above the text of a screen made shorter",
          26,
          80,
          { FEED("\033[24HLine 24\r\nLine 25\033[H"), RESIZE(21, 80), FEED("\033[J") } },
        /* Lines scrolled away before the first frame: tui.c's offset of the
         * first of them (hist_off[0]) must be 0, not what realloc() left. */
        { "scrolling", 4, 10, { FEED("a\nb\nc\nd\ne\nf\n") } },
        /* 17 parameters overrun libvterm's array of 16. */
        { "17 parameters", 25, 80, { FEED("\033[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17m") } },
};

static void test_crashers(void **state) {
        (void) state;
        for (size_t i = 0; i < sizeof(crashers) / sizeof(crashers[0]); i++) {
                const Crasher *c = &crashers[i];
                fprintf(stderr, "  %s\n", c->what);
                Tui *t = open_tui(c->rows, c->cols, false);
                check(t);
                for (size_t k = 0; k < MAX_STEPS && (c->steps[k].text || c->steps[k].rows); k++) {
                        if (c->steps[k].text)
                                feed_str(t, c->steps[k].text);
                        else
                                resize(t, c->steps[k].rows, c->steps[k].cols);
                }
                /* The emulator still works: text after it all is drawn. */
                feed_str(t, "\033[H\033[2Jok");
                assert_int_equal(t->scr[t->cur].row[0]->c[0].chars[0], 'o');
                close_tui(t);
        }
}

/* The pseudo-random streams. */
static uint64_t rng;
static uint32_t rnd(uint32_t n) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return n ? (uint32_t) ((rng >> 11) % n) : 0;
}
static bool chance(unsigned pct) {
        return rnd(100) < pct;
}

static void put_cp(StrBuf *b, uint32_t u) {
        char c[4];
        strbuf_putn(b, c, (size_t) (put_utf8_p(c, u) - c)); /* tui.c's */
}

static void gen_number(StrBuf *b) {
        static const char *const huge[] = { "65535",      "2147483646",          "2147483647",
                                            "4294967295", "9223372036854775807", "99999999999999999999",
                                            "0000000001" };
        unsigned k = rnd(100);
        if (k < 25)
                return;
        if (k < 60)
                strbuf_printf(b, "%u", rnd(10));
        else if (k < 80)
                strbuf_printf(b, "%u", rnd(301));
        else if (k < 90)
                strbuf_printf(b, "%u", rnd(2101));
        else
                strbuf_puts(b, huge[rnd(sizeof(huge) / sizeof(huge[0]))]);
}

static void gen_fragment(StrBuf *b) {
        static const char finals[] = "@ABCDEFGHIJKLMPSTXZ`abcdefghijklmnpqrstuxyz{|}~";
        static const char *const escs[] = { "\0337",  "\0338",  "\033c",   "\033D",  "\033E",   "\033H",  "\033M",
                                            "\033=",  "\033>",  "\033#3",  "\033#4", "\033#5",  "\033#6", "\033#8",
                                            "\033(0", "\033(B", "\016",    "\017",   "\033[!p", "\033[r", "\033[s",
                                            "\033[b", "\033[g", "\033[3g", "\033[I", "\033[Z",  "\033[c", "\033[6n" };
        static const unsigned modes[] = { 1,  4,    5,    6,    7,    12,   20,   25,   47,  66,
                                          69, 1000, 1002, 1004, 1006, 1047, 1048, 1049, 2004 };
        static const uint32_t glyphs[] = { 0x4e2d, 0x3042, 0xac00, 0x1f600, 0x2329, 0x300,  0x301,  0x36f, 0x200d,
                                           0x200b, 0xfe0f, 0x1160, 0x3099,  0x309a, 0x302a, 0x20e3, 0xe9,  0x2500 };
        size_t start = b->len;
        switch (rnd(12)) {
        case 0: /* text */
                for (unsigned n = 1 + rnd(40); n > 0; n--)
                        strbuf_putc(b, (char) (0x20 + rnd(0x5f)));
                break;
        case 1: /* wide, combining, zero width */
                for (unsigned n = 1 + rnd(chance(20) ? 60 : 8); n > 0; n--)
                        put_cp(b, glyphs[rnd(sizeof(glyphs) / sizeof(glyphs[0]))]);
                break;
        case 2: /* any CSI */
        case 3: {
                strbuf_puts(b, "\033[");
                if (chance(25))
                        strbuf_putc(b, "?><="[rnd(4)]);
                for (unsigned n = chance(70) ? rnd(4) : rnd(17), i = 0; i < n; i++) {
                        if (i)
                                strbuf_putc(b, chance(15) ? ':' : ';');
                        gen_number(b);
                }
                if (chance(10))
                        strbuf_putc(b, " !\"#$%&'*+"[rnd(10)]);
                strbuf_putc(b, finals[rnd(sizeof(finals) - 1)]);
                break;
        }
        case 4: /* margins */
                strbuf_printf(b, "\033[%u;%u%c", rnd(chance(50) ? 8 : 300), rnd(chance(50) ? 8 : 300),
                              chance(60) ? 'r' : 's');
                break;
        case 5: /* modes */
                strbuf_printf(b, "\033[?%u%c",
                              chance(70) ? modes[rnd(sizeof(modes) / sizeof(modes[0]))] : 1 + rnd(2100),
                              chance(50) ? 'h' : 'l');
                break;
        case 6: /* counts, on the cursor's line */
                strbuf_puts(b, "\033[");
                gen_number(b);
                strbuf_putc(b, "@PLMXbSTABCDEFGIZ`adejk"[rnd(23)]);
                break;
        case 7:
                strbuf_puts(b, escs[rnd(sizeof(escs) / sizeof(escs[0]))]);
                break;
        case 8: /* controls */
                for (unsigned n = 1 + rnd(6); n > 0; n--)
                        strbuf_putc(b, "\n\r\b\t\v\f\a\x0e\x0f\x05"[rnd(10)]);
                break;
        case 9: /* OSC, DCS */
                strbuf_printf(b, chance(70) ? "\033]%u;" : "\033P%u", rnd(120));
                for (unsigned n = rnd(chance(10) ? 600 : 30); n > 0; n--)
                        strbuf_putc(b, (char) (0x20 + rnd(0x5f)));
                strbuf_puts(b, chance(50) ? "\a" : "\033\\");
                break;
        case 10: /* bytes */
                for (unsigned n = 1 + rnd(10); n > 0; n--)
                        strbuf_putc(b, (char) rnd(256));
                break;
        default: /* somewhere, then a glyph */
                strbuf_printf(b, "\033[%u;%uH", rnd(300), rnd(300));
                put_cp(b, glyphs[rnd(sizeof(glyphs) / sizeof(glyphs[0]))]);
                break;
        }
        if (b->len - start > 2 && chance(3)) /* cut short */
                b->len = start + 1 + rnd((uint32_t) (b->len - start - 1));
}

static void random_size(unsigned *rows, unsigned *cols) {
        if (chance(40)) {
                *rows = 2 + rnd(8);
                *cols = 2 + rnd(10);
        } else {
                *rows = 2 + rnd(60);
                *cols = 2 + rnd(200);
        }
}

static void test_random(void **state) {
        (void) state;
        /* TUI_FUZZ_SEED and TUI_FUZZ_ROUNDS: longer runs by hand. */
        const char *seed = getenv("TUI_FUZZ_SEED"), *rounds = getenv("TUI_FUZZ_ROUNDS");
        rng = seed ? strtoull(seed, NULL, 0) | 1 : 0x2545f4914f6cdd1dULL;
        int n_rounds = rounds ? atoi(rounds) : 1500;
        StrBuf chunk = STRBUF_INIT;
        uint64_t bytes = 0;
        for (int i = 0; i < n_rounds; i++) {
                unsigned rows, cols;
                random_size(&rows, &cols);
                Tui *t = open_tui(rows, cols, chance(30));
                check(t);
                for (unsigned k = 1 + rnd(40); k > 0; k--) {
                        if (chance(15)) {
                                random_size(&rows, &cols);
                                resize(t, rows, cols);
                        }
                        chunk.len = 0;
                        for (unsigned n = 1 + rnd(30); n > 0; n--)
                                gen_fragment(&chunk);
                        assert_false(chunk.oom);
                        feed(t, chunk.data, chunk.len);
                        bytes += chunk.len;
                }
                close_tui(t);
        }
        strbuf_done(&chunk);
        assert_true(bytes > (uint64_t) n_rounds * 1000);
        assert_true(written > bytes / 4);
}

typedef struct Drain {
        int fd;
        StrBuf *got;
} Drain;

static void *drain(void *arg) {
        Drain *d = arg;
        char b[65536];
        ssize_t n;
        while ((n = read(d->fd, b, sizeof(b))) > 0)
                strbuf_putn(d->got, b, (size_t) n);
        return NULL;
}

/* The writer thread against a slow terminal (a pipe read a little at a
 * time, or not at all): the sandbox's output stops being taken (backlogged)
 * rather than lines being lost, every line reaches the terminal once and
 * in order, and tui_free() writes what is left and gives the terminal back
 * last. */
static void test_writer(void **state) {
        (void) state;
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
        TuiOptions o = { .fd = p[1], .color = true, .writer = true };
        Tui *t = NULL;
        assert_int_equal(tui_new(&o, 25, 80, &t), 0);
        StrBuf got = STRBUF_INIT;
        char buf[65536];
        uint64_t clock = 1;
        unsigned line = 0;
        bool was_backlogged = false;
        /* Lines of about 80 bytes: the terminal reads nothing until they
         * wait (HIST_MAX / 2 of them not drawn: the writer is stuck on the
         * full pipe), then 40000 more with 4 KiB read between feeds. How
         * many lines the first frames took depends on when the writer
         * thread ran (under load, one frame can take tens of thousands),
         * so the first part goes on until lines wait, or 400000 went in. */
        unsigned reading_from = 0;
        bool reading = false;
        for (;;) {
                if (!reading && (was_backlogged || line >= 400000)) {
                        reading = true;
                        reading_from = line;
                }
                if (reading && line >= reading_from + 40000)
                        break;
                while (tui_backlogged(t)) {
                        was_backlogged = true;
                        /* The relay stops reading and waits for the
                         * terminal: this terminal reads now. */
                        ssize_t n = read(p[0], buf, sizeof(buf));
                        if (n > 0)
                                strbuf_putn(&got, buf, (size_t) n);
                        int w = tui_wants(t, clock);
                        if (w == 0)
                                assert_int_equal(tui_render(t, clock), 0);
                        else
                                (void) poll(&(struct pollfd){ .fd = tui_fd(t), .events = POLLIN }, 1, 10);
                        tui_written(t);
                }
                char l[160];
                int n = snprintf(l, sizeof(l), "line %u of the sandbox's output, with some text to make it long\r\n",
                                 line++);
                tui_feed(t, (const uint8_t *) l, (size_t) n);
                clock += 100;
                if (tui_wants(t, clock) == 0)
                        assert_int_equal(tui_render(t, clock), 0);
                if (reading) {
                        ssize_t r = read(p[0], buf, 4096);
                        if (r > 0)
                                strbuf_putn(&got, buf, (size_t) r);
                        tui_written(t);
                }
        }
        assert_true(was_backlogged);
        /* The last frame, then the terminal back; read until the end.
         * tui_render_now() waits for the frame being written and
         * tui_free() until the pipe takes it all: read meanwhile (the
         * frame handed over last can be larger than what the pipe still
         * holds, a hang under load before). */
        int fl = fcntl(p[0], F_GETFL);
        assert_int_equal(fcntl(p[0], F_SETFL, fl & ~O_NONBLOCK), 0);
        pthread_t th;
        Drain rd = { p[0], &got };
        assert_int_equal(pthread_create(&th, NULL, drain, &rd), 0);
        assert_int_equal(tui_render_now(t), 0);
        t = tui_free(t);
        close(p[1]);
        pthread_join(th, NULL);
        close(p[0]);
        assert_false(got.oom);
        /* Every line once, in order; the terminal given back last. (A
         * scan by hand: strstr() and sscanf() measure the rest of the
         * string on each call, and ASan's do too.) */
        const char *s = strbuf_str(&got);
        size_t len = got.len, last_line = 0;
        unsigned want = 0;
        for (size_t i = 0; i + 5 < len; i++) {
                if (memcmp(s + i, "line ", 5) != 0)
                        continue;
                unsigned v = 0;
                size_t j = i + 5;
                while (j < len && s[j] >= '0' && s[j] <= '9')
                        v = v * 10 + (unsigned) (s[j++] - '0');
                if (j == i + 5 || j + 3 > len || memcmp(s + j, " of", 3) != 0)
                        continue;
                if (v != want)
                        fail_msg("line %u reached the terminal where line %u should have", v, want);
                want++;
                last_line = i;
        }
        assert_int_equal(want, line);
        static const char lost[] = "scrolled by too fast", leave[] = "\033[?7h\033[?25h";
        size_t at_leave = 0;
        for (size_t i = 0; i + sizeof(leave) - 1 <= len; i++) {
                if (memcmp(s + i, lost, MIN(sizeof(lost) - 1, len - i)) == 0 && len - i >= sizeof(lost) - 1)
                        fail_msg("lines were lost: %.60s", s + i);
                if (memcmp(s + i, leave, sizeof(leave) - 1) == 0)
                        at_leave = i;
        }
        assert_true(at_leave > last_line);
        strbuf_done(&got);
}

int main(void) {
        signal(SIGALRM, on_alarm);
        trace = getenv("TUI_FUZZ_TRACE") != NULL;
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_crashers),
                cmocka_unit_test(test_random),
                cmocka_unit_test(test_writer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
