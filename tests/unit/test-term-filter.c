/* SPDX-License-Identifier: MIT */
/* The terminal output filter: each rule, with every input cut at every byte
 * boundary; and libvterm's parser as an independent oracle reading what the
 * filter lets through from hostile and pseudo-random streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <vterm.h>

#include "strbuf.h"
#include "term-filter.h"

typedef struct Run {
        StrBuf out, reply;
        uint64_t dropped;
        TermFilterModes modes;
} Run;

static void run_done(Run *r) {
        strbuf_done(&r->out);
        strbuf_done(&r->reply);
}

/* Feed in pieces: cut at each offset in cuts[] (ascending). */
static Run run_cuts(bool clip, const uint8_t *in, size_t n, const size_t *cuts, size_t ncuts) {
        Run r = { STRBUF_INIT, STRBUF_INIT, 0, {} };
        TermFilter *f = term_filter_new(clip);
        assert_non_null(f);
        size_t at = 0;
        for (size_t i = 0; i <= ncuts; i++) {
                size_t to = i < ncuts ? cuts[i] : n;
                term_filter_feed(f, in + at, to - at, &r.out, &r.reply);
                at = to;
        }
        assert_false(r.out.oom || r.reply.oom);
        r.dropped = term_filter_dropped(f);
        r.modes = *term_filter_modes(f);
        term_filter_free(f);
        return r;
}

static void assert_modes_equal(const TermFilterModes *a, const TermFilterModes *b) {
        assert_int_equal(a->app_cursor, b->app_cursor);
        assert_int_equal(a->app_keypad, b->app_keypad);
        assert_int_equal(a->bracketed_paste, b->bracketed_paste);
        assert_int_equal(a->focus_events, b->focus_events);
        assert_int_equal(a->mouse, b->mouse);
        assert_int_equal(a->mouse_encoding, b->mouse_encoding);
        assert_int_equal(a->alt_screen, b->alt_screen);
        assert_int_equal(a->cursor_hidden, b->cursor_hidden);
}

static void assert_same_run(const Run *a, const Run *b) {
        assert_int_equal(a->out.len, b->out.len);
        assert_memory_equal(strbuf_str(&a->out), strbuf_str(&b->out), a->out.len);
        assert_int_equal(a->reply.len, b->reply.len);
        assert_memory_equal(strbuf_str(&a->reply), strbuf_str(&b->reply), a->reply.len);
        assert_int_equal(a->dropped, b->dropped);
        assert_modes_equal(&a->modes, &b->modes);
}

/* The whole input at once, checked against byte by byte and against two
 * pieces cut at each offset. */
static Run run_split(bool clip, const void *in, size_t n) {
        Run whole = run_cuts(clip, in, n, NULL, 0);
        size_t *every = malloc((n + 1) * sizeof(size_t));
        assert_non_null(every);
        for (size_t i = 0; i < n; i++)
                every[i] = i;
        Run bytes = run_cuts(clip, in, n, every, n);
        assert_same_run(&whole, &bytes);
        run_done(&bytes);
        for (size_t cut = 0; cut <= n; cut++) {
                Run two = run_cuts(clip, in, n, &cut, 1);
                assert_same_run(&whole, &two);
                run_done(&two);
        }
        free(every);
        return whole;
}

static void expect(bool clip, const char *in, size_t n, const char *want, size_t want_n, const char *reply,
                   uint64_t dropped) {
        Run r = run_split(clip, in, n);
        if (r.out.len != want_n || memcmp(strbuf_str(&r.out), want, want_n) != 0) {
                char got[512] = "", exp[512] = "";
                for (size_t i = 0, k = 0; i < r.out.len && k + 5 < sizeof(got); i++)
                        k += snprintf(got + k, sizeof(got) - k, "%02x ", (uint8_t) r.out.data[i]);
                for (size_t i = 0, k = 0; i < want_n && k + 5 < sizeof(exp); i++)
                        k += snprintf(exp + k, sizeof(exp) - k, "%02x ", (uint8_t) want[i]);
                fail_msg("output of %zu-byte input: got [%s] want [%s]", n, got, exp);
        }
        assert_string_equal(strbuf_str(&r.reply), reply);
        assert_int_equal(r.dropped, dropped);
        run_done(&r);
}

/* PASS: unchanged. DROP: nothing out, one thing dropped. */
#define OUT(in, want, ndropped)         expect(false, in, sizeof(in) - 1, want, sizeof(want) - 1, "", ndropped)
#define OUTR(in, want, reply, ndropped) expect(false, in, sizeof(in) - 1, want, sizeof(want) - 1, reply, ndropped)
#define PASS(in)                        OUT(in, in, 0)
#define DROP(in)                        OUT(in, "", 1)
#define PASS_CLIP(in)                   expect(true, in, sizeof(in) - 1, in, sizeof(in) - 1, "", 0)
#define DROP_CLIP(in)                   expect(true, in, sizeof(in) - 1, "", 0, "", 1)

static void test_text(void **state) {
        (void) state;
        PASS("hello, world");
        PASS("\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x99\x82"); /* é日本🙂 */
        PASS("\xe2\x80\x9cquoted\xe2\x80\x9d"); /* “”: 0x9C and 0x9D inside UTF-8 */
        PASS("a\bb\tc\nd\ve\ff\rg\ah\x0ei\x0fj");
        OUT("a\x05"
            "b",
            "ab", 1); /* ENQ: the answerback */
        OUT("a\0b\x01\x02\x7f"
            "c",
            "abc", 4);
        OUT("a\x18"
            "b\x1a"
            "c\x1c\x1d\x1e\x1f",
            "abc", 6);
        /* 8-bit C1 is never a control: raw, it is no UTF-8 and dropped;
         * encoded as UTF-8 (U+009B), it is a C1 control and dropped too. */
        OUT("\x9b"
            "6n",
            "6n", 1);
        OUT("\x9d"
            "0;x\x9c",
            "0;x", 2);
        OUT("\xc2\x9b"
            "c\xc2\x85",
            "c", 2);
        PASS("\xc2\xa0nbsp"); /* U+00A0 is text */
        OUT("x\xc0\xaf"
            "y",
            "xy", 2); /* overlong */
        OUT("\xed\xa0\x80", "", 3); /* a surrogate: each byte is no UTF-8 */
        OUT("\xf4\x90\x80\x80", "", 4); /* past U+10FFFF */
        OUT("\xff\xfe", "", 2);
        OUT("\xe6\x97"
            "x",
            "x", 1); /* cut short */
        OUT("\xe6\x97\033[1m", "\033[1m", 1);
        OUT("\xe6\x97\xa5\xa5", "\xe6\x97\xa5", 1);
}

static void test_csi_pass(void **state) {
        (void) state;
        PASS("\033[1;31m");
        PASS("\033[5;10H");
        PASS("\033[2J\033[J\033[0K\033[K");
        PASS("\033[1;20r");
        PASS("\033[?1049h\033[?1049l");
        PASS("\033[38:2::255:0:0m\033[4:3m"); /* sub-parameters */
        PASS("\033[2 q"); /* DECSCUSR */
        PASS("\033[>4;1m"); /* XTMODKEYS, a setting */
        PASS("\033[22;0t\033[23;0t"); /* push, pop title */
        PASS("\033[!p"); /* DECSTR */
        PASS("\033[>1u\033[<u\033[u"); /* kitty push, pop; SCORC */
        PASS("\033[>0n"); /* key modifiers off */
        PASS("\033[3S\033[2T\033[@\033[4P"); /* SU, SD, ICH, DCH */
        /* The model executes a control inside a sequence; the sequence goes on. */
        OUT("\033[1\n2m", "\n\033[12m", 0);
        OUT("\033[1\x05m", "\033[1m", 1);
        OUT("\033[1\x7fm", "\033[1m", 0); /* DEL is ignored */
        /* 16 parameters pass, 17 do not (libvterm 0.1.4 overruns on them). */
        PASS("\033[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16m");
        DROP("\033[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17m");
        DROP("\033[1:2:3:4:5:6:7:8:9:10:11:12:13:14:15:16:17m");
}

static void test_csi_queries(void **state) {
        (void) state;
        OUTR("\033[c", "", "\033[?62;22c", 1);
        OUTR("\033[0c", "", "\033[?62;22c", 1);
        OUTR("\033[>c", "", "\033[>1;10;0c", 1);
        OUTR("\033[>0c", "", "\033[>1;10;0c", 1);
        OUTR("\033[5n", "", "\033[0n", 1);
        OUTR("a\033[5nb\033[c", "ab", "\033[0n\033[?62;22c", 2);
        DROP("\033[=c"); /* DA3: no answer */
        DROP("\033[=0c");
        DROP("\033[1c");
        DROP("\033[6n"); /* cursor position: no answer */
        DROP("\033[?6n");
        DROP("\033[?996n");
        DROP("\033[?15n");
        DROP("\033[2026$p");
        DROP("\033[?2026$p");
        DROP("\033[14t");
        DROP("\033[18t");
        DROP("\033[21t");
        DROP("\033[3;0;0t"); /* move the window */
        DROP("\033[8;100;300t"); /* resize */
        DROP("\033[2t"); /* iconify */
        DROP("\033[t");
        DROP("\033[22 t");
        DROP("\033[>q");
        DROP("\033[>0q");
        DROP("\033[?u");
        DROP("\033[?1u");
        DROP("\033[?4m");
        DROP("\033[x");
        DROP("\033[1x");
        DROP("\033[1$w");
        DROP("\033[$u");
        DROP("\033[1&u");
        DROP("\033[1;1;1;1;1;1*y");
        DROP("\033[\"v");
        DROP("\033[1'|");
        DROP("\033[#|");
        DROP("\033[?1;1;0S");
        DROP("\033[0i");
        DROP("\033[1+p");
        /* Bounds and shapes the model ignores are dropped whole. */
        char big[300];
        memset(big, '1', sizeof(big));
        memcpy(big, "\033[", 2);
        big[255] = 'm'; /* 256 bytes: the bound */
        expect(false, big, 256, big, 256, "", 0);
        big[255] = '1';
        big[256] = 'm';
        expect(false, big, 257, "", 0, "", 1);
        big[256] = '1';
        big[299] = 'c';
        expect(false, big, 300, "", 0, "", 1);
        DROP("\033[1?c");
        DROP("\033[ 1m");
        DROP("\033[?>c");
        OUTR("\033[1\033[c", "", "\033[?62;22c", 2); /* ESC cuts the first */
        OUT("\033[1\x18m", "m", 2); /* CAN too (and is dropped itself) */
        OUT("\033[1\xc3\xa9m", "\xc3\xa9m", 1); /* so does a character */
}

static void test_osc(void **state) {
        (void) state;
        PASS("\033]0;my title\a");
        PASS("\033]2;my title\033\\");
        PASS("\033]1;icon\a");
        PASS("\033]2;caf\xc3\xa9 \xe6\x97\xa5\a");
        DROP("\033]2;?\a");
        DROP("\033]0;\xc2\x9b\a");
        DROP("\033]0;a\x9c\a");
        DROP("\033]0;a\x01"
             "b\a");
        DROP("\033]0;a\x7f\a");
        DROP("\033]7;file://host/tmp\a");
        DROP("\033]9;notify\a");
        DROP("\033]777;notify;a;b\a");
        DROP("\033]1337;File=inline=1:AAAA\a");
        DROP("\033]133;A\a");
        DROP("\033]50;?\a");
        DROP("\033]46;/tmp/log\a");
        DROP("\033]0\a");
        DROP("\033];x\a");
        PASS("\033]8;;https://example.com/\033\\link\033]8;;\033\\");
        PASS("\033]8;id=1;https://example.com/\a");
        DROP("\033]8;https://example.com/\a"); /* no params field */
        PASS("\033]4;1;rgb:ff/00/00\a");
        PASS("\033]10;#ffffff\a\033]11;black\033\\");
        PASS("\033]104\a\033]104;1\a\033]110\a\033]112\a");
        DROP("\033]4;1;?\a");
        DROP("\033]10;?\a");
        DROP("\033]11;?\033\\");
        DROP("\033]12;?\a");
        DROP("\033]17;?\a");
        DROP("\033]19;?\a");
        DROP("\033]52;c;aGVsbG8=\a"); /* no clipboard */
        DROP("\033]52;c;?\a");
        PASS_CLIP("\033]52;c;aGVsbG8=\a");
        PASS_CLIP("\033]52;;aGk=\033\\");
        PASS_CLIP("\033]52;pc;aGVsbG8h\a");
        DROP_CLIP("\033]52;c;?\a");
        DROP_CLIP("\033]52;c;aGVsbG8\a"); /* not a multiple of 4 */
        DROP_CLIP("\033]52;c;aG=sbG8=\a");
        DROP_CLIP("\033]52;x;aGk=\a");
        DROP_CLIP("\033]52;c\a");
        /* An ESC that is not ST ends the OSC unterminated, and starts anew. */
        OUT("\033]0;t\033[1mx", "\033[1mx", 1);
        OUTR("\033]0;t\033[cx", "x", "\033[?62;22c", 2);
        OUT("\033]0;t\x18x", "x", 2);
        OUT("\033]0;t\033\033\\x", "x", 3); /* the OSC, the lone ESC, and ESC \\ */
}

/* One OSC of n bytes of body (header included), BEL-terminated. */
static void osc_sized(bool clip, const char *head, char fill, size_t n, bool pass) {
        size_t hl = strlen(head), len = 2 + n + 1;
        char *s = malloc(len + 1);
        assert_non_null(s);
        memcpy(s, "\033]", 2);
        memcpy(s + 2, head, hl);
        memset(s + 2 + hl, fill, n - hl);
        s[len - 1] = '\a';
        s[len] = 'z';
        /* Not every cut (quadratic): whole, bytewise and a few pieces. */
        Run whole = run_cuts(clip, (uint8_t *) s, len + 1, NULL, 0);
        size_t cuts[] = { 1, 3, hl + 2, len / 2, len - 1, len };
        Run cut = run_cuts(clip, (uint8_t *) s, len + 1, cuts, 6);
        assert_same_run(&whole, &cut);
        if (pass) {
                assert_int_equal(whole.out.len, len + 1);
                assert_memory_equal(whole.out.data, s, len + 1);
        } else {
                assert_string_equal(strbuf_str(&whole.out), "z");
                assert_int_equal(whole.dropped, 1);
        }
        run_done(&whole);
        run_done(&cut);
        free(s);
}

static void test_osc_bounds(void **state) {
        (void) state;
        osc_sized(false, "2;", 'a', 2 + 256, true);
        osc_sized(false, "2;", 'a', 2 + 257, false);
        osc_sized(false, "2;", 'a', 100000, false);
        osc_sized(false, "8;;http://x/", 'a', 2048, true);
        osc_sized(false, "8;;http://x/", 'a', 2049, false);
        osc_sized(true, "52;c;", 'A', 5 + 100000, true);
        osc_sized(true, "52;c;", 'A', 5 + 100004, false);
        osc_sized(false, "52;c;", 'A', 5 + 100000, false);
        osc_sized(false, "4;1;rgb:", '0', 600, false);
        osc_sized(false, "123456789", '0', 20, false); /* a number too long */
}

static void test_strings(void **state) {
        (void) state;
        OUT("\033P$qm\033\\ok", "ok", 1); /* DECRQSS */
        OUT("\033P+q544e\033\\ok", "ok", 1); /* XTGETTCAP */
        /* The DCS ends at the doubled ESC; then an OSC 52 read, and ESC \\. */
        OUT("\033Ptmux;\033\033]52;c;?\a\033\\ok", "ok", 4);
        OUT("\033_Gf=100,a=T;AAAA\033\\ok", "ok", 1); /* kitty graphics */
        OUT("\033P0;0;0q#0;2;0;0;0~-\033\\ok", "ok", 1); /* sixel */
        OUT("\033Xsos\033\\\033^pm\033\\ok", "ok", 2);
        OUTR("\033P1$r\a\033[c\033\\ok", "ok", "\033[?62;22c", 3); /* BEL does not end a DCS; ESC [ does */
        OUT("\033Pdata\x18ok", "ok", 2);
        OUT("\033Pdata\x1aok", "ok", 2);
        OUT("\033P\x9c\x05\n\033\\ok", "ok", 1);
        /* A DCS that never ends swallows the rest, as it would on a terminal. */
        OUT("\033Pq#0;2;0;0;0~~ hello", "", 0);
}

static void test_esc(void **state) {
        (void) state;
        PASS("\0337\0338\033=\033>\033D\033E\033H\033M\033c");
        PASS("\033(B\033(0\033)0\033*A\033+B\033-A\033(%5\033(\"4");
        PASS("\033#8\033#3\033#4\033#5\033#6");
        DROP("\033Z"); /* DECID */
        DROP("\033%@"); /* out of UTF-8 */
        DROP("\033%G");
        DROP("\033 G"); /* S8C1T */
        DROP("\033\\");
        DROP("\033N");
        DROP("\033n");
        DROP("\033#7");
        DROP("\033((((B");
        DROP("\033*P"); /* libvterm reads these as DCS and CSI */
        DROP("\033([");
        DROP("\033)]");
        OUT("\033\n7", "\n\0337", 0);
        OUT("\033\033c", "\033c", 1);
        OUT("\033\xc3\xa9", "\xc3\xa9", 1);
}

static void modes_after(bool track, const char *in, TermFilterModes want) {
        TermFilter *f = term_filter_new(false);
        assert_non_null(f);
        if (track)
                term_filter_track(f, (const uint8_t *) in, strlen(in));
        else {
                Run r = run_split(false, in, strlen(in));
                assert_modes_equal(&r.modes, &want);
                run_done(&r);
                term_filter_feed(f, (const uint8_t *) in, strlen(in), NULL, NULL);
        }
        assert_modes_equal(term_filter_modes(f), &want);
        term_filter_free(f);
}

static void test_modes(void **state) {
        (void) state;
        modes_after(false, "", (TermFilterModes){});
        modes_after(false, "\033[?1h", (TermFilterModes){ .app_cursor = true });
        modes_after(false, "\033[?1h\033[?1l", (TermFilterModes){});
        modes_after(false, "\033=", (TermFilterModes){ .app_keypad = true });
        modes_after(false, "\033=\033>", (TermFilterModes){});
        modes_after(false, "\033[?66h", (TermFilterModes){ .app_keypad = true });
        modes_after(false, "\033[?1002;1006;2004;1004;1049h\033[?25l",
                    (TermFilterModes){ .mouse = 1002,
                                       .mouse_encoding = 1006,
                                       .bracketed_paste = true,
                                       .focus_events = true,
                                       .alt_screen = true,
                                       .cursor_hidden = true });
        /* Resetting a mouse mode that is not the one set changes nothing. */
        modes_after(false, "\033[?1002h\033[?1000l\033[?1015l", (TermFilterModes){ .mouse = 1002 });
        modes_after(false, "\033[?1000h\033[?1003h", (TermFilterModes){ .mouse = 1003 });
        modes_after(false, "\033[?1003h\033[?1003l", (TermFilterModes){});
        modes_after(false, "\033[?9h\033[?1005h", (TermFilterModes){ .mouse = 9, .mouse_encoding = 1005 });
        modes_after(false, "\033[?1015h\033[?1015l", (TermFilterModes){});
        modes_after(false, "\033[?47h", (TermFilterModes){ .alt_screen = true });
        modes_after(false, "\033[?1047h\033[?1049l", (TermFilterModes){});
        modes_after(false, "\033[?25l\033[?25h", (TermFilterModes){});
        modes_after(false, "\033[?1;;2004h", (TermFilterModes){ .app_cursor = true, .bracketed_paste = true });
        /* Split by a control, as the model reads it. */
        modes_after(false, "\033[?20\n04h", (TermFilterModes){ .bracketed_paste = true });
        /* DECSTR: a soft reset leaves the screen, mouse and paste modes. */
        modes_after(false, "\033[?1h\033=\033[?25l\033[?1049;1000;2004h\033[!p",
                    (TermFilterModes){ .alt_screen = true, .mouse = 1000, .bracketed_paste = true });
        modes_after(false, "\033[?1h\033=\033[?25l\033[?1049;1000;1006;2004;1004hx\033c", (TermFilterModes){});
        /* Nothing that is dropped sets a mode. */
        modes_after(false, "\033P[?1049h\033\\\033]0;\033[?1049$h", (TermFilterModes){});
        modes_after(false, "\033[?1049h\033c\033[?2004$p\033[?1000h\033Z\033[>1049h\033[1049h\033[?1049$h",
                    (TermFilterModes){ .mouse = 1000 });
        char big[400] = "\033[?1049";
        for (size_t i = strlen(big); i < 390; i++)
                big[i] = ';';
        strcat(big, "h");
        modes_after(false, big, (TermFilterModes){});
        modes_after(true, "\033[?1049;2004h\033[?1h\033=",
                    (TermFilterModes){
                            .alt_screen = true, .bracketed_paste = true, .app_cursor = true, .app_keypad = true });

        TermFilter *f = term_filter_new(false);
        assert_non_null(f);
        term_filter_track(f, (const uint8_t *) "\033[c\033Z\x05", 6);
        assert_int_equal(term_filter_dropped(f), 3);
        term_filter_free(f);
}

/* The oracle: libvterm's parser reads the filter's output. */
typedef struct Oracle {
        bool clip;
        unsigned violations, csi, osc, text;
        char why[200];
} Oracle;

static void violation(Oracle *o, const char *fmt, ...) _printf_(2, 3);
static void violation(Oracle *o, const char *fmt, ...) {
        if (o->violations++ == 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(o->why, sizeof(o->why), fmt, ap);
                va_end(ap);
        }
}

/* A run of text: valid UTF-8 without C1 controls (decoded independently of
 * the filter, in the plain way). */
static int o_text(const char *bytes, size_t len, void *user) {
        Oracle *o = user;
        size_t n = 0;
        while (n < len && (uint8_t) bytes[n] >= 0x20)
                n++;
        for (size_t i = 0; i < n;) {
                uint8_t c = bytes[i];
                size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
                uint32_t cp = k == 1 ? c : k == 0 ? 0 : c & (0x7f >> k);
                if (k == 0 || k > n - i) {
                        violation(o, "text byte %02x", c);
                        break;
                }
                for (size_t j = 1; j < k; j++) {
                        if (((uint8_t) bytes[i + j] & 0xc0) != 0x80)
                                violation(o, "text byte %02x after %02x", (uint8_t) bytes[i + j], c);
                        cp = cp << 6 | ((uint8_t) bytes[i + j] & 0x3f);
                }
                static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
                if (cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp < min[k] || cp > 0x10ffff ||
                    (cp >= 0xd800 && cp <= 0xdfff))
                        violation(o, "text U+%04X", cp);
                i += k;
        }
        o->text++;
        return n > 0 ? (int) n : 1;
}

static int o_control(unsigned char c, void *user) {
        /* BEL BS HT LF VT FF CR SO SI, and IND NEL HTS RI (ESC D E H M). */
        if (!(c >= 0x07 && c <= 0x0f) && c != 0x84 && c != 0x85 && c != 0x88 && c != 0x8d)
                violation(user, "control %02x", c);
        return 1;
}

static int o_escape(const char *bytes, size_t len, void *user) {
        static const char *const ok[] = { "7", "8", "=", ">", "c", "#3", "#4", "#5", "#6", "#8" };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
                if (len == strlen(ok[i]) && memcmp(bytes, ok[i], len) == 0)
                        return 1;
        if ((len == 2 || len == 3) && strchr("()*+-./", bytes[0]))
                return 1;
        violation(user, "escape %.*s", (int) len, bytes);
        return 1;
}

static int o_csi(const char *leader, const long args[], int argc, const char *intermed, char cmd, void *user) {
        Oracle *o = user;
        char l = leader ? leader[0] : 0;
        const char *im = intermed ?: "";
        long a0 = argc > 0 && !CSI_ARG_IS_MISSING(args[0]) ? CSI_ARG(args[0]) : 0;
        bool q = false;
        o->csi++;
        switch (cmd) {
        case 'c':
                q = true;
                break;
        case 'n':
                q = l == 0 || l == '?';
                break;
        case 't':
                q = l != 0 || *im || (a0 != 22 && a0 != 23);
                break;
        case 'q':
                q = l == '>';
                break;
        case 'u':
                q = l == '?' || *im;
                break;
        case 'm':
        case 'S':
                q = l == '?';
                break;
        case 'x':
        case 'i':
                q = !*im;
                break;
        case 'p':
                q = strchr(im, '$') || strchr(im, '+');
                break;
        case 'w':
                q = strchr(im, '$');
                break;
        case 'y':
                q = strchr(im, '*');
                break;
        case 'v':
                q = strchr(im, '"');
                break;
        case '|':
                q = strchr(im, '\'') || strchr(im, '#');
                break;
        }
        if (q || (leader && strlen(leader) > 1) || argc > 16)
                violation(o, "CSI %s%ld..%s%c", leader ?: "", a0, im, cmd);
        return 1;
}

static int o_osc(const char *s, size_t len, void *user) {
        Oracle *o = user;
        char buf[64];
        snprintf(buf, sizeof(buf), "%.*s", (int) (len < 63 ? len : 63), s);
        char *end;
        long n = strtol(buf, &end, 10);
        const char *t = *end == ';' ? end + 1 : end;
        bool query = memchr(s, '?', len) != NULL;
        bool ok = (n >= 0 && n <= 2 && *end == ';' && strcmp(t, "?") != 0) || (n == 8 && *end == ';') ||
                  (n == 52 && o->clip && *end == ';' && !query) ||
                  ((n == 4 || n == 5 || (n >= 10 && n <= 19) || n == 104 || n == 105 || (n >= 110 && n <= 119)) &&
                   !query);
        if (end == buf || !ok)
                violation(o, "OSC %s", buf);
        for (size_t i = 0; i < len; i++)
                if ((uint8_t) s[i] < 0x20 || s[i] == 0x7f)
                        violation(o, "OSC with control %02x", (uint8_t) s[i]);
        o->osc++;
        return 1;
}

static int o_dcs(const char *s, size_t len, void *user) {
        violation(user, "DCS %.*s", (int) (len < 20 ? len : 20), s);
        return 1;
}

static const VTermParserCallbacks oracle_cbs = {
        .text = o_text,
        .control = o_control,
        .escape = o_escape,
        .csi = o_csi,
        .osc = o_osc,
        .dcs = o_dcs,
};

/* libvterm's verdict on bytes; returns the violations. */
static unsigned oracle(Oracle *o, const char *p, size_t n) {
        VTerm *vt = vterm_new(24, 80);
        assert_non_null(vt);
        vterm_set_utf8(vt, 1);
        vterm_parser_set_callbacks(vt, &oracle_cbs, o);
        /* One write: libvterm 0.1.4 keeps only 64 bytes of a string split
         * across writes. */
        vterm_input_write(vt, p, n);
        vterm_free(vt);
        return o->violations;
}

/* The filter's output of in passes the oracle (and does not depend on
 * where the input is cut); returns how many violations the raw input has,
 * or -1 when it is not read: libvterm 0.1.4 overruns its array of CSI
 * parameters on a 17th, so raw input with more than 15 separators is not
 * for it (the filter's output never has such a CSI). */
static int check(bool clip, const char *in, size_t n, Oracle *totals) {
        Run r = run_cuts(clip, (const uint8_t *) in, n, NULL, 0);
        size_t cuts[3] = { n / 3, n / 2, n - n / 5 };
        Run c = run_cuts(clip, (const uint8_t *) in, n, cuts, 3);
        assert_same_run(&r, &c);
        Oracle o = { .clip = clip };
        if (oracle(&o, strbuf_str(&r.out), r.out.len) > 0) {
                char hex[400] = "";
                for (size_t i = 0, k = 0; i < n && k + 5 < sizeof(hex); i++)
                        k += snprintf(hex + k, sizeof(hex) - k, "%02x ", (uint8_t) in[i]);
                fail_msg("libvterm found %s in the output of [%s]", o.why, hex);
        }
        totals->csi += o.csi;
        totals->osc += o.osc;
        totals->text += o.text;
        run_done(&r);
        run_done(&c);
        size_t nsep = 0;
        for (size_t i = 0; i < n; i++)
                nsep += in[i] == ';' || in[i] == ':';
        if (nsep > 15)
                return -1;
        Oracle raw = { .clip = clip };
        return (int) oracle(&raw, in, n);
}

#define HOSTILE(s) s, sizeof(s) - 1

/* In front of an emulator: queries pass, REP is written out, what
 * libvterm 0.1.4 mishandles is dropped. */
static void emu(const char *in, const char *want) {
        TermFilter *f = term_filter_new(false);
        assert_non_null(f);
        term_filter_pass_queries(f, true);
        StrBuf out = STRBUF_INIT;
        term_filter_feed(f, (const uint8_t *) in, strlen(in), &out, NULL);
        assert_string_equal(strbuf_str(&out), want);
        strbuf_done(&out);
        term_filter_free(f);
}

static void test_emulator(void **state) {
        (void) state;
        emu("\033[c\033[6n", "\033[c\033[6n");
        emu("a\033[3b", "aaaa");
        emu("\xe4\xb8\xad\033[2b", "\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad");
        emu("\033[b", ""); /* nothing to repeat */
        emu("a\n\033[b", "a\n"); /* nor after a control */
        emu("\033[b"
            "x",
            "x");
        emu("a\xe3\x82\x99"
            "b",
            "ab"); /* a combining mark libvterm counts wide */
        emu("\033[5H\033[2147483646B", "\033[5H"); /* a parameter of 10 digits */
        emu("\033[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17m", "");
}

static void test_oracle_hostile(void **state) {
        (void) state;
        static const struct {
                const char *s;
                size_t n;
        } hostile[] = {
                { HOSTILE("\033[c") },
                { HOSTILE("\033[>c") },
                { HOSTILE("\033[=c") },
                { HOSTILE("\033[5n\033[6n\033[?6n") },
                { HOSTILE("\033[?2004$p\033[4$p") },
                { HOSTILE("\033[14t\033[18t\033[21t\033[3;1;1t") },
                { HOSTILE("\033[>q\033[?u\033[?4m\033[x\033[1$w\033[1$u\033[1;1;1;1;1;1*y\033[\"v") },
                { HOSTILE("\033P$qm\033\\\033P+q544e\033\\") },
                { HOSTILE("\033Ptmux;\033\033]52;c;?\a\033\\") },
                { HOSTILE("\033]52;c;?\a\033]4;1;?\a\033]10;?\033\\\033]7;file:///\a") },
                { HOSTILE("\033]0;a\033[c\a") },
                { HOSTILE("\033]0;\033P$qm\033\\") },
                { HOSTILE("\033[1\033P$qm\033\\") },
                { HOSTILE("\x05\033Z") },
                { HOSTILE("\033%@\x9b"
                          "c") },
                { HOSTILE("\033[?1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17c") },
                { HOSTILE("\033]2;x\x9c\033[c") },
                { HOSTILE("\033]8;;http://a/\x07\033]0;?\a") },
                { HOSTILE("\033_Gi=1,a=q;\033\\\033^pm\033\\\033Xsos\033\\") },
                { HOSTILE("\033[?1049h\033[1;31mred\033[0m\xc3\xa9\xe6\x97\xa5\033]0;title\a\033[6n") },
        };
        Oracle totals = { 0 };
        for (int clip = 0; clip <= 1; clip++)
                for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
                        /* Each is a query or worse: the oracle sees it raw. */
                        if (check(clip, hostile[i].s, hostile[i].n, &totals) == 0)
                                fail_msg("the oracle finds nothing wrong in hostile input %zu", i);
                }
        assert_true(totals.csi > 0 && totals.osc > 0);
}

/* Ordinary drawing passes byte for byte, and the oracle reads it all. */
static void test_oracle_drawing(void **state) {
        (void) state;
        static const char draw[] = "\033[?1049h\033[1;20r\033[5;10H\033[1;31mbold red\033[0m\033[2J\033[K"
                                   "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x99\x82\r\n\033]0;title\a"
                                   "\033]8;;https://example.com/\033\\link\033]8;;\033\\\033(0qqq\033(B";
        Run r = run_split(false, draw, sizeof(draw) - 1);
        assert_int_equal(r.out.len, sizeof(draw) - 1);
        assert_memory_equal(r.out.data, draw, sizeof(draw) - 1);
        assert_int_equal(r.dropped, 0);
        Oracle o = { 0 };
        assert_int_equal(oracle(&o, r.out.data, r.out.len), 0);
        assert_int_equal(o.csi, 7);
        assert_int_equal(o.osc, 3);
        run_done(&r);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (uint32_t) (rng >> 11);
}

static void test_oracle_random(void **state) {
        (void) state;
        static const char *const frags[] = {
                "\033",
                "[",
                "]",
                "P",
                "?",
                "0",
                "1",
                "2",
                "4",
                "5",
                "6",
                "8",
                "9",
                "52",
                ";",
                ":",
                "$",
                ">",
                "=",
                "<",
                "!",
                "\"",
                "'",
                "#",
                "*",
                "+",
                "&",
                " ",
                "(",
                "%",
                "c",
                "n",
                "t",
                "u",
                "p",
                "q",
                "m",
                "h",
                "l",
                "x",
                "y",
                "v",
                "w",
                "i",
                "S",
                "|",
                "Z",
                "X",
                "^",
                "_",
                "\\",
                "B",
                "@",
                "G",
                "a",
                "k",
                "=",
                "\a",
                "\033\\",
                "\x18",
                "\x1a",
                "\x05",
                "\n",
                "\x7f",
                "\0",
                "\x9b",
                "\x9d",
                "\x90",
                "\x9c",
                "\x9e",
                "\x9f",
                "\xc2\x9b",
                "\xc2\x9d",
                "\xc3\xa9",
                "\xe6\x97\xa5",
                "\xe2\x80\x9c",
                "\xf0\x9f",
                "\x99\x82",
                "\x82",
                "\xe6",
                "\033[",
                "\033]",
                "\033P",
                "\033]0;",
                "\033]52;c;",
                "\033]8;;",
                "\033]4;1;",
                "\033]10;",
                "aGk=",
                "\033[?",
                "\033[>",
                "\033[1049h",
                "\033[6n",
        };
        char buf[600];
        Oracle totals = { 0 };
        unsigned raw_bad = 0, raw_read = 0;
        for (int i = 0; i < 6000; i++) {
                size_t n = 0, nfrag = 1 + rnd() % 80;
                for (size_t k = 0; k < nfrag; k++) {
                        const char *fr = frags[rnd() % (sizeof(frags) / sizeof(frags[0]))];
                        size_t fl = fr[0] ? strlen(fr) : 1; /* "\0" is one NUL byte */
                        if (n + fl > sizeof(buf))
                                break;
                        memcpy(buf + n, fr, fl);
                        n += fl;
                }
                int v = check(i % 2, buf, n, &totals);
                raw_read += v >= 0;
                raw_bad += v > 0;
        }
        /* The streams reach the interesting places: sequences pass, and many
         * raw streams hold what the filter must stop. */
        assert_true(totals.csi > 1000);
        assert_true(totals.osc > 20);
        assert_true(raw_read > 3000);
        assert_true(raw_bad > raw_read / 4);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_text),
                cmocka_unit_test(test_csi_pass),
                cmocka_unit_test(test_csi_queries),
                cmocka_unit_test(test_osc),
                cmocka_unit_test(test_osc_bounds),
                cmocka_unit_test(test_strings),
                cmocka_unit_test(test_esc),
                cmocka_unit_test(test_modes),
                cmocka_unit_test(test_emulator),
                cmocka_unit_test(test_oracle_hostile),
                cmocka_unit_test(test_oracle_drawing),
                cmocka_unit_test(test_oracle_random),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
