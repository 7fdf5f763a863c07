/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "term-filter.h"

#define BEL 0x07
#define SI  0x0f
#define CAN 0x18
#define SUB 0x1a
#define ESC 0x1b
#define DEL 0x7f

/* Bounds on what a sequence in progress may hold (the ESC included). A
 * sequence that outgrows its bound is dropped whole when it ends. */
#define ESC_MAX        4 /* ESC, two intermediates, the final */
#define CSI_MAX        256
#define CSI_PARAMS_MAX 16 /* libvterm 0.1.4, for one, overruns its array on a 17th */
#define CSI_DIGITS_MAX 9 /* digits of one parameter: more overflow libvterm 0.1.4's int */
#define REP_MAX        10000 /* REP's repeats written out, for an emulator */
#define OSC_HEAD_MAX   8 /* "ESC ] Ps ;" while Ps is read */
#define OSC_TITLE_MAX  256 /* the text of OSC 0, 1, 2 */
#define OSC_LINK_MAX   2048 /* all of OSC 8: "8;params;URI" */
#define OSC_OTHER_MAX  512 /* any other, after "ESC ]" */
#define CLIP_SEL_MAX   16
#define CLIP_DATA_MAX  100000
#define OSC_CLIP_MAX   (3 + CLIP_SEL_MAX + 1 + CLIP_DATA_MAX) /* "52;" selection ";" data */

/* The states of the DEC ANSI parser (vt100.net/emu/dec_ansi_parser), with
 * two simplifications that change nothing here, as every DCS, SOS, PM and
 * APC is dropped whatever it holds:
 *   - the five DCS states and SOS/PM/APC string are one: each consumes
 *     everything, and only CAN, SUB and ESC leave it;
 *   - an ESC inside a string (OSC or ignored) is kept as a flag on that
 *     state (string_esc): followed by '\' it is the ST that ends the string,
 *     followed by anything else it ends the string unterminated (dropped)
 *     and starts a new escape sequence, as in the model.
 * Two departures, both for today's terminals: ':' is a parameter byte
 * (SGR sub-parameters, ITU T.416 colours), where the model ignores the
 * sequence; and 0x80..0x9F are never 8-bit C1 controls. The stream is
 * UTF-8, whose continuation bytes are 0x80..0xBF: a raw byte read as C1
 * would cut characters such as U+201C (E2 80 9C) in two. So valid UTF-8
 * passes unchanged, except the C1 controls encoded as UTF-8 (C2 80..C2 9F,
 * which xterm acts on in UTF-8 mode), and every byte that is not part of
 * valid UTF-8, 0x9B included, is dropped. A terminal that does not decode
 * UTF-8 but reads 8-bit C1 would see controls in ordinary characters; it is
 * not supported. */
typedef enum State {
        STATE_GROUND,
        STATE_ESCAPE,
        STATE_ESCAPE_INTERMEDIATE,
        STATE_CSI_ENTRY,
        STATE_CSI_PARAM,
        STATE_CSI_INTERMEDIATE,
        STATE_CSI_IGNORE,
        STATE_OSC_STRING,
        STATE_STRING_IGNORE, /* DCS (all of it), SOS, PM, APC */
        _STATE_MAX,
        _STATE_INVALID = -EINVAL,
} State;

struct TermFilter {
        State state;
        bool allow_clipboard;
        bool pass_queries; /* to an emulator, which answers them itself */
        uint8_t last[4]; /* the last character written (for REP), last_len 0: none */
        size_t last_len;
        bool string_esc; /* an ESC inside the OSC or ignored string */
        bool overflow; /* the sequence outgrew cap: drop it when it ends */
        bool osc_head; /* the OSC's number is being read (no ';' yet) */
        TermFilterModes modes;
        uint64_t dropped;
        uint8_t utf8[4]; /* a UTF-8 character in progress, in the ground state */
        size_t utf8_len;
        size_t len, cap; /* the sequence in progress in seq[], and its bound */
        uint8_t seq[];
};

TermFilter *term_filter_new(bool allow_clipboard) {
        size_t size = 2 + (allow_clipboard ? OSC_CLIP_MAX : OSC_LINK_MAX);
        TermFilter *f = calloc(1, sizeof(TermFilter) + size);
        if (!f)
                return NULL;
        f->state = STATE_GROUND;
        f->allow_clipboard = allow_clipboard;
        return f;
}

TermFilter *term_filter_free(TermFilter *f) {
        return mfree(f);
}

void term_filter_pass_queries(TermFilter *f, bool on) {
        f->pass_queries = on;
}

const TermFilterModes *term_filter_modes(const TermFilter *f) {
        return &f->modes;
}

uint64_t term_filter_dropped(const TermFilter *f) {
        return f->dropped;
}

static void emit(StrBuf *b, const void *p, size_t n) {
        if (b)
                strbuf_putn(b, p, n);
}

/* 1 for ASCII, 2 to 4 for the lead byte of a UTF-8 character, 0 for a byte
 * that cannot start one (a continuation byte, C0/C1 overlongs, F5..FF). */
static size_t utf8_length(uint8_t c) {
        return c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

/* Whether c may be byte i (>= 1) of the character that lead starts: the
 * second byte's range excludes overlongs, surrogates and what is past
 * U+10FFFF. */
static bool utf8_next_ok(uint8_t lead, size_t i, uint8_t c) {
        if (i == 1)
                switch (lead) {
                case 0xe0:
                        return c >= 0xa0 && c <= 0xbf;
                case 0xed:
                        return c >= 0x80 && c <= 0x9f;
                case 0xf0:
                        return c >= 0x90 && c <= 0xbf;
                case 0xf4:
                        return c >= 0x80 && c <= 0x8f;
                }
        return c >= 0x80 && c <= 0xbf;
}

static bool utf8_is_c1(const uint8_t *u) {
        return u[0] == 0xc2 && u[1] < 0xa0;
}

/* U+302A..U+302F and U+3099..U+309A: combining marks that libvterm 0.1.4
 * counts 2 columns wide (its table of wide characters is read before its
 * table of combining ones), so that a base character followed by a run of
 * them is one glyph wider than the screen, written past the row's last cell
 * (through a NULL cell at its end). */
static bool utf8_is_wide_combining(const uint8_t *u) {
        return u[0] == 0xe3 &&
               ((u[1] == 0x80 && u[2] >= 0xaa && u[2] <= 0xaf) || (u[1] == 0x82 && (u[2] == 0x99 || u[2] == 0x9a)));
}

/* Valid UTF-8 without C0, DEL or C1: what a title or URI may hold. */
static bool printable(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n;) {
                size_t k = utf8_length(p[i]);
                if (k == 0 || k > n - i || p[i] < 0x20 || p[i] == DEL)
                        return false;
                for (size_t j = 1; j < k; j++)
                        if (!utf8_next_ok(p[i], j, p[i + j]))
                                return false;
                if (k == 2 && utf8_is_c1(p + i))
                        return false;
                i += k;
        }
        return true;
}

/* A decimal parameter: 0 when empty, UINT_MAX when it is not digits alone
 * (sub-parameters) or too long to matter. */
static unsigned number(const uint8_t *s, size_t n) {
        unsigned v = 0;
        if (n > 6)
                return UINT_MAX;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return UINT_MAX;
                v = v * 10 + (s[i] - '0');
        }
        return v;
}

static void to_ground(TermFilter *f) {
        f->state = STATE_GROUND;
        f->len = 0;
        f->string_esc = f->overflow = false;
}

/* Drop whatever is in progress: a sequence, or a character cut short. */
static void cancel(TermFilter *f) {
        if (f->state != STATE_GROUND || f->utf8_len > 0)
                f->dropped++;
        f->utf8_len = 0;
        to_ground(f);
}

static void seq_start(TermFilter *f, State state, size_t cap) {
        f->state = state;
        f->seq[0] = ESC;
        f->len = 1;
        f->cap = cap;
        f->overflow = false;
}

static void seq_put(TermFilter *f, uint8_t c) {
        if (f->len < f->cap)
                f->seq[f->len++] = c;
        else
                f->overflow = true;
}

/* A C0 control, in the ground state or inside an escape or CSI sequence
 * (where the model executes it and the sequence goes on). BEL, BS, HT, LF,
 * VT, FF, CR, SO and SI are 0x07..0x0F. */
static void control(TermFilter *f, uint8_t c, StrBuf *out) {
        f->last_len = 0;
        if (c >= BEL && c <= SI)
                emit(out, &c, 1);
        else
                f->dropped++;
}

static void ground(TermFilter *f, uint8_t c, StrBuf *out) {
        if (f->utf8_len > 0) {
                if (utf8_next_ok(f->utf8[0], f->utf8_len, c)) {
                        f->utf8[f->utf8_len++] = c;
                        if (f->utf8_len == utf8_length(f->utf8[0])) {
                                if (utf8_is_c1(f->utf8) || (f->pass_queries && utf8_is_wide_combining(f->utf8)))
                                        f->dropped++;
                                else {
                                        emit(out, f->utf8, f->utf8_len);
                                        memcpy(f->last, f->utf8, f->utf8_len);
                                        f->last_len = f->utf8_len;
                                }
                                f->utf8_len = 0;
                        }
                        return;
                }
                /* Cut short: drop what came, and read c afresh. */
                f->dropped++;
                f->utf8_len = 0;
        }
        if (c < 0x20)
                control(f, c, out);
        else if (c < DEL) {
                emit(out, &c, 1);
                f->last[0] = c;
                f->last_len = 1;
        } else if (utf8_length(c) > 1)
                f->utf8[f->utf8_len++] = c;
        else
                f->dropped++; /* DEL, a stray continuation byte (0x80..0x9F among them), or no UTF-8 */
}

static void modes_set(TermFilterModes *m, unsigned mode, bool on) {
        switch (mode) {
        case 1:
                m->app_cursor = on;
                break;
        case 66:
                m->app_keypad = on;
                break;
        case 2004:
                m->bracketed_paste = on;
                break;
        case 1004:
                m->focus_events = on;
                break;
        case 9:
        case 1000:
        case 1002:
        case 1003:
                if (on)
                        m->mouse = mode;
                else if (m->mouse == mode)
                        m->mouse = 0;
                break;
        case 1005:
        case 1006:
        case 1015:
                if (on)
                        m->mouse_encoding = mode;
                else if (m->mouse_encoding == mode)
                        m->mouse_encoding = 0;
                break;
        case 47:
        case 1047:
        case 1049:
                m->alt_screen = on;
                break;
        case 25:
                m->cursor_hidden = !on;
                break;
        }
}

/* Whether a CSI makes the terminal answer (or report, or print): these are
 * never passed. first is the first parameter (0 when missing). */
static bool csi_is_query(uint8_t prefix, const uint8_t *inter, size_t ninter, uint8_t final, unsigned first) {
#define HAS(ch) (memchr(inter, (ch), ninter) != NULL)
        switch (final) {
        case 'c': /* DA1, DA2, DA3 */
                return true;
        case 'n': /* DSR, DEC DSR (CSI > n sets key modifiers) */
                return prefix == 0 || prefix == '?';
        case 't': /* window reports and manipulation; but push, pop title */
                return !(prefix == 0 && ninter == 0 && (first == 22 || first == 23));
        case 'q': /* XTVERSION (CSI SP q, the cursor style, stays) */
                return prefix == '>';
        case 'u': /* kitty keyboard query, DECRQTSR, DECRQUPSS */
                return prefix == '?' || ninter > 0;
        case 'm': /* XTQMODKEYS */
                return prefix == '?';
        case 'x': /* DECREQTPARM */
                return ninter == 0;
        case 'p': /* DECRQM, DECSR */
                return HAS('$') || HAS('+');
        case 'w': /* DECRQPSR */
                return HAS('$');
        case 'y': /* DECRQCRA */
                return HAS('*');
        case 'v': /* DECRQDE */
                return HAS('"');
        case '|': /* DECRQLP, XTREPORTSGR */
                return HAS('\'') || HAS('#');
        case 'S': /* XTSMGRAPHICS */
                return prefix == '?';
        case 'i': /* media copy: print the screen */
                return ninter == 0;
        }
        return false;
#undef HAS
}

/* seq[] holds ESC [ (prefix) params intermediates final, in the shape the
 * CSI states let through. */
static void csi_dispatch(TermFilter *f, StrBuf *out, StrBuf *reply) {
        const uint8_t *p = f->seq + 2, *end = f->seq + f->len - 1;
        uint8_t final = *end, prefix = 0;
        if (f->overflow) {
                f->dropped++;
                return;
        }
        if (*p >= 0x3c && *p <= 0x3f)
                prefix = *p++;
        const uint8_t *params = p;
        size_t nsep = 0;
        for (; p < end && *p >= 0x30 && *p <= 0x3b; p++)
                nsep += *p == ';' || *p == ':';
        const uint8_t *params_end = p, *semi = memchr(params, ';', params_end - params);
        unsigned first = number(params, (semi ?: params_end) - params);
        size_t ninter = end - params_end;

        if (nsep >= CSI_PARAMS_MAX) {
                f->dropped++;
                return;
        }
        for (const uint8_t *q = params, *run = params; f->pass_queries && q <= params_end; q++)
                if (q == params_end || *q == ';' || *q == ':') {
                        if (q - run > CSI_DIGITS_MAX) {
                                f->dropped++;
                                return;
                        }
                        run = q + 1;
                }
        /* REP, to an emulator: libvterm 0.1.4 repeats its last glyph with no
         * check (before any glyph it loops forever, the glyph's width being
         * 0; a wide one at the last column is written through a NULL cell),
         * so the repeats are written out as characters, at most REP_MAX. */
        if (f->pass_queries && final == 'b' && prefix == 0 && ninter == 0) {
                unsigned k = first == 0 ? 1 : first > REP_MAX ? REP_MAX : first;
                for (unsigned i = 0; f->last_len > 0 && !semi && i < k; i++)
                        emit(out, f->last, f->last_len);
                if (f->last_len == 0 || semi)
                        f->dropped++;
                return;
        }
        if (!f->pass_queries && csi_is_query(prefix, params_end, ninter, final, first)) {
                if (ninter == 0 && !semi && first == 0 && final == 'c' && prefix == 0)
                        emit(reply, "\033[?62;22c", 9);
                else if (ninter == 0 && !semi && first == 0 && final == 'c' && prefix == '>')
                        emit(reply, "\033[>1;10;0c", 10);
                else if (ninter == 0 && !semi && first == 5 && final == 'n' && prefix == 0)
                        emit(reply, "\033[0n", 4);
                f->dropped++;
                return;
        }
        emit(out, f->seq, f->len);

        if (prefix == '?' && ninter == 0 && (final == 'h' || final == 'l'))
                for (const uint8_t *q = params; q <= params_end;) {
                        const uint8_t *e = memchr(q, ';', params_end - q) ?: params_end;
                        modes_set(&f->modes, number(q, e - q), final == 'h');
                        q = e + 1;
                }
        else if (prefix == 0 && ninter == 1 && params_end[0] == '!' && final == 'p') {
                /* DECSTR, a soft reset: the screen, mouse and paste modes stay. */
                f->modes.app_cursor = f->modes.app_keypad = f->modes.cursor_hidden = false;
        }
}

/* s is what follows ESC: intermediates and the final. */
static bool esc_allowed(const uint8_t *s, size_t n) {
        if (n == 1)
                return strchr("78=>DEHMc", s[0]);
        if (n == 2 && s[0] == '#')
                return strchr("34568", s[1]); /* line size, DECALN */
        /* Designations of G0..G3 (not ESC % @, which may leave UTF-8 mode),
         * with the finals of known character sets only: libvterm reads
         * ESC ( P as DCS and ESC ( [ as CSI, whatever the intermediate. */
        if (!strchr("()*+-./", s[0]))
                return false;
        if (n == 2)
                return strchr("0124567<=>9ABCEFHKLMQRYZ`f", s[1]); /* ESC ( B, ESC ) 0, ESC - A */
        return n == 3 && strchr("\"%&", s[1]) && strchr("0123456=>?", s[2]); /* ESC ( % 5, ESC ( " 4 */
}

static void esc_dispatch(TermFilter *f, StrBuf *out) {
        if (f->overflow || !esc_allowed(f->seq + 1, f->len - 1)) {
                f->dropped++;
                return;
        }
        emit(out, f->seq, f->len);
        if (f->len == 2 && f->seq[1] == '=')
                f->modes.app_keypad = true;
        else if (f->len == 2 && f->seq[1] == '>')
                f->modes.app_keypad = false;
        else if (f->len == 2 && f->seq[1] == 'c')
                f->modes = (TermFilterModes){};
}

/* An OSC 52 write: "<selection>;<base64>", never the read "?". */
static bool clipboard_write_ok(const uint8_t *t, size_t n) {
        const uint8_t *semi = memchr(t, ';', n);
        if (!semi || (size_t) (semi - t) > CLIP_SEL_MAX)
                return false;
        for (const uint8_t *s = t; s < semi; s++)
                if (*s == '\0' || !strchr("cpqs01234567", *s))
                        return false;
        const uint8_t *d = semi + 1;
        size_t dn = n - (d - t);
        if (dn > CLIP_DATA_MAX || dn % 4 != 0)
                return false;
        for (size_t i = 0; i < dn; i++) {
                uint8_t c = d[i];
                bool pad = c == '=' && (i == dn - 1 || (i == dn - 2 && d[dn - 1] == '='));
                if (!pad && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '+' &&
                    c != '/')
                        return false;
        }
        return true;
}

/* b is the OSC's body: between ESC ] and its terminator. */
static bool osc_allowed(const TermFilter *f, const uint8_t *b, size_t n) {
        const uint8_t *semi = memchr(b, ';', n);
        size_t head = semi ? (size_t) (semi - b) : n;
        unsigned cmd = number(b, head);
        const uint8_t *t = semi ? semi + 1 : b + n;
        size_t tn = n - (t - b);
        if (head == 0 || cmd == UINT_MAX || !printable(b, n))
                return false;
        switch (cmd) {
        case 0: /* icon name and title */
        case 1: /* icon name */
        case 2: /* title */
                return semi && tn <= OSC_TITLE_MAX && !(tn == 1 && t[0] == '?');
        case 8: /* hyperlink: "8;params;URI" */
                return semi && n <= OSC_LINK_MAX && memchr(t, ';', tn);
        case 52:
                return f->allow_clipboard && semi && clipboard_write_ok(t, tn);
        case 4: /* palette colours, special colours, dynamic colours, and their resets */
        case 5:
        case 10 ... 19:
        case 104:
        case 105:
        case 110 ... 119:
                return !memchr(b, '?', n);
        }
        return false;
}

/* The string ends: with ST (ESC \) or, for an OSC, BEL. */
static void string_end(TermFilter *f, StrBuf *out, bool st) {
        if (f->state == STATE_OSC_STRING && !f->overflow && osc_allowed(f, f->seq + 2, f->len - 2)) {
                emit(out, f->seq, f->len);
                emit(out, st ? "\033\\" : "\a", st ? 2 : 1);
        } else
                f->dropped++;
        to_ground(f);
}

static void osc_byte(TermFilter *f, uint8_t c) {
        seq_put(f, c);
        if (f->osc_head && c == ';' && !f->overflow) {
                /* The number is known: how long this kind may grow. */
                unsigned cmd = number(f->seq + 2, f->len - 3);
                f->cap = 2 + (cmd == 52 && f->allow_clipboard ? OSC_CLIP_MAX : cmd == 8 ? OSC_LINK_MAX : OSC_OTHER_MAX);
                f->osc_head = false;
        }
}

/* The CSI states on a byte in 0x20..0x3F (intermediate, parameter, or
 * private marker). */
static State csi_next(State s, uint8_t c) {
        bool inter = c < 0x30, marker = c >= 0x3c;
        switch (s) {
        case STATE_CSI_ENTRY:
                return inter ? STATE_CSI_INTERMEDIATE : STATE_CSI_PARAM;
        case STATE_CSI_PARAM:
                return inter ? STATE_CSI_INTERMEDIATE : marker ? STATE_CSI_IGNORE : STATE_CSI_PARAM;
        case STATE_CSI_INTERMEDIATE:
                return inter ? STATE_CSI_INTERMEDIATE : STATE_CSI_IGNORE;
        case STATE_GROUND:
        case STATE_ESCAPE:
        case STATE_ESCAPE_INTERMEDIATE:
        case STATE_CSI_IGNORE:
        case STATE_OSC_STRING:
        case STATE_STRING_IGNORE:
        case _STATE_MAX:
        case _STATE_INVALID:
                break;
        }
        return STATE_CSI_IGNORE;
}

/* A byte in 0x20..0x7E in an escape or CSI state. */
static void sequence_byte(TermFilter *f, uint8_t c, StrBuf *out, StrBuf *reply) {
        if (f->state == STATE_ESCAPE && c == '[') {
                seq_put(f, c);
                f->state = STATE_CSI_ENTRY;
                f->cap = CSI_MAX;
        } else if (f->state == STATE_ESCAPE && c == ']') {
                seq_put(f, c);
                f->state = STATE_OSC_STRING;
                f->cap = 2 + OSC_HEAD_MAX;
                f->osc_head = true;
        } else if (f->state == STATE_ESCAPE && (c == 'P' || c == 'X' || c == '^' || c == '_'))
                f->state = STATE_STRING_IGNORE;
        else if (f->state == STATE_ESCAPE || f->state == STATE_ESCAPE_INTERMEDIATE) {
                seq_put(f, c);
                if (c < 0x30)
                        f->state = STATE_ESCAPE_INTERMEDIATE;
                else {
                        esc_dispatch(f, out);
                        to_ground(f);
                }
        } else if (c >= 0x40) {
                if (f->state == STATE_CSI_IGNORE)
                        f->dropped++;
                else {
                        seq_put(f, c);
                        csi_dispatch(f, out, reply);
                }
                to_ground(f);
        } else {
                State next = csi_next(f->state, c);
                if (next != STATE_CSI_IGNORE)
                        seq_put(f, c);
                f->state = f->overflow ? STATE_CSI_IGNORE : next;
        }
}

static void feed_byte(TermFilter *f, uint8_t c, StrBuf *out, StrBuf *reply) {
        if (f->string_esc) {
                f->string_esc = false;
                if (c == '\\') {
                        string_end(f, out, true);
                        return;
                }
                cancel(f);
                seq_start(f, STATE_ESCAPE, ESC_MAX);
        }

        /* Anywhere: CAN and SUB abort, ESC starts anew (or ends a string). */
        if (c == CAN || c == SUB) {
                cancel(f);
                f->dropped++;
                return;
        }
        if (c == ESC) {
                if (f->state == STATE_OSC_STRING || f->state == STATE_STRING_IGNORE)
                        f->string_esc = true;
                else {
                        cancel(f);
                        seq_start(f, STATE_ESCAPE, ESC_MAX);
                }
                return;
        }

        switch (f->state) {
        case STATE_GROUND:
                ground(f, c, out);
                return;
        case STATE_OSC_STRING:
                if (c == BEL)
                        string_end(f, out, false);
                else
                        osc_byte(f, c); /* controls too: they make it unprintable */
                return;
        case STATE_STRING_IGNORE:
                return;
        case STATE_ESCAPE:
        case STATE_ESCAPE_INTERMEDIATE:
        case STATE_CSI_ENTRY:
        case STATE_CSI_PARAM:
        case STATE_CSI_INTERMEDIATE:
        case STATE_CSI_IGNORE:
                break;
        case _STATE_MAX:
        case _STATE_INVALID:
                abort();
        }

        if (c < 0x20)
                control(f, c, out);
        else if (c >= 0x80) {
                /* Not part of any sequence: drop the sequence, and c is text. */
                cancel(f);
                ground(f, c, out);
        } else if (c != DEL) /* DEL is ignored */
                sequence_byte(f, c, out, reply);
}

void term_filter_feed(TermFilter *f, const uint8_t *p, size_t n, StrBuf *out, StrBuf *reply) {
        for (size_t i = 0; i < n; i++) {
                /* Runs of printable ASCII, most of any output, go out at once. */
                if (f->state == STATE_GROUND && f->utf8_len == 0 && p[i] >= 0x20 && p[i] < DEL) {
                        size_t j = i + 1;
                        while (j < n && p[j] >= 0x20 && p[j] < DEL)
                                j++;
                        emit(out, p + i, j - i);
                        f->last[0] = p[j - 1];
                        f->last_len = 1;
                        i = j - 1;
                        continue;
                }
                feed_byte(f, p[i], out, reply);
        }
}

void term_filter_track(TermFilter *f, const uint8_t *p, size_t n) {
        term_filter_feed(f, p, n, NULL, NULL);
}
