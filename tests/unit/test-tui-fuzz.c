/* SPDX-License-Identifier: MIT */
/* The terminal layer's emulator against hostile output: what a sandboxed
 * program prints goes through tui_feed() (the filter, then libvterm 0.1.4)
 * and the real terminal's size changes through tui_resize(); after each
 * step the frame is drawn (tui_render(), which reads every cell) and every
 * cell and the cursor are read again here. The streams are pseudo-random
 * (a fixed seed), biased towards the sequences libvterm mishandles, and the
 * inputs that made it crash or hang, each cut down to what it takes.
 *
 * tui.c is compiled into this test (it is not in shared_dep) so that its
 * own libvterm set-up and resize handling are what is tested; write_all()
 * is stubbed. */
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

#include "../../src/lazaret/tui.c"

/* The terminal: what tui_render() writes, counted and dropped. */
static uint64_t written;
int write_all(int fd, const void *buf, size_t n) {
        (void) fd;
        (void) buf;
        written += n;
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

static Tui *open_tui(unsigned rows, unsigned cols, bool clip) {
        TuiOptions o = { .fd = -1, .color = true, .clipboard = clip };
        Tui *t = NULL;
        assert_int_equal(tui_new(&o, rows, cols, &t), 0);
        TuiStatus s = {
                .profile = "test", .domain = "0123456789ab", .network = "none", .digest = "abcdef01", .sessions = 1
        };
        tui_set_status(t, &s, now);
        return t;
}

/* Draw a frame, then read every cell and the cursor: all on the screen. */
static void check(Tui *t) {
        now += 1000000;
        assert_true(tui_render(t, now) >= 0);
        size_t k;
        (void) tui_replies(t, &k);
        tui_replies_clear(t);
        for (int r = 0; r < t->vrows; r++)
                for (int c = 0; c < t->cols; c++) {
                        VTermScreenCell x;
                        memset(&x, 0, sizeof(x));
                        assert_int_equal(vterm_screen_get_cell(t->screen, (VTermPos){ .row = r, .col = c }, &x), 1);
                        assert_true(x.width == 1 || x.width == 2);
                }
        VTermPos pos;
        vterm_state_get_cursorpos(vterm_obtain_state(t->vt), &pos);
        if (pos.row < 0 || pos.row >= t->vrows || pos.col < 0 || pos.col >= t->cols)
                fail_msg("the cursor is at (%d,%d), off the %dx%d screen", pos.row, pos.col, t->vrows, t->cols);
}

static void feed(Tui *t, const void *p, size_t n) {
        alarm(10);
        tui_feed(t, p, n);
        check(t);
        alarm(0);
}

static void feed_str(Tui *t, const char *s) {
        feed(t, s, strlen(s));
}

static void resize(Tui *t, unsigned rows, unsigned cols) {
        alarm(10);
        tui_resize(t, rows, cols);
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
                VTermScreenCell x;
                assert_int_equal(vterm_screen_get_cell(t->screen, (VTermPos){ 0, 0 }, &x), 1);
                assert_int_equal(x.chars[0], 'o');
                tui_free(t);
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
        put_utf8(b, u); /* tui.c's */
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
        rng = 0x2545f4914f6cdd1dULL;
        StrBuf chunk = STRBUF_INIT;
        uint64_t bytes = 0;
        for (int i = 0; i < 1500; i++) {
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
                tui_free(t);
        }
        strbuf_done(&chunk);
        assert_true(bytes > 2000000);
        assert_true(written > bytes / 4);
}

int main(void) {
        signal(SIGALRM, on_alarm);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_crashers),
                cmocka_unit_test(test_random),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
