/* SPDX-License-Identifier: MIT */
#pragma once

/* What a sandboxed program prints, made safe for the person's real terminal
 * (`lazaret run` with the terminal layer's emulator off). A streaming
 * VT500-series parser (the DEC ANSI model of vt100.net, states in
 * term-filter.c) splits the output into text, controls and sequences, and
 * keeps only those that cannot make the terminal type anything back, run
 * anything, or read the clipboard:
 *   - text: valid UTF-8 but for the C1 controls U+0080..U+009F; other
 *     bytes are dropped one by one;
 *   - C0: BS HT LF VT FF CR BEL SO SI; the rest (ENQ's answerback, NUL,
 *     CAN, SUB, ...) and DEL are dropped;
 *   - CSI: all but the queries and reports (DA1/2/3, DSR, DECRQM, window
 *     operations but push/pop title, XTVERSION, kitty's and XTQMODKEYS'
 *     queries, DECREQTPARM, DECRQPSR, DECRQTSR, DECRQUPSS, DECRQCRA,
 *     DECRQDE, DECRQLP, XTREPORTSGR, XTSMGRAPHICS, DECSR, media copy),
 *     and none longer than 256 bytes or with more than 16 parameters;
 *   - OSC: titles (0, 1, 2; printable, at most 256 bytes, not "?"),
 *     hyperlinks (8; printable, at most 2048 bytes), colour settings
 *     without a "?" query, and, when allowed, clipboard writes (52, valid
 *     base64, at most 100000 bytes); no other;
 *   - DCS, SOS, PM, APC: none;
 *   - ESC: 7 8 = > D E H M c, # 3 4 5 6 8, designations of known character
 *     sets.
 * Whatever passes is copied byte for byte, and only whole: a sequence cut
 * by the end of a feed waits (in a buffer of bounded size) for the rest, so
 * the output never ends inside a sequence. Bytes 0x80..0x9F are never read
 * as 8-bit C1 controls: the stream is UTF-8, as the terminal is assumed to
 * decode it.
 *
 * The filter answers DA1, DA2 and DSR 5 itself (the program may wait for
 * them); it tracks the modes that change what the terminal sends, so the
 * caller can undo them when the program exits. Pure: no I/O; libc only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "strbuf.h"

/* The modes the program set, as the terminal has them after the output
 * passed so far. */
typedef struct TermFilterModes {
        bool app_cursor; /* DECCKM, CSI ? 1 h/l */
        bool app_keypad; /* ESC = / ESC >, CSI ? 66 h/l (DECNKM) */
        bool bracketed_paste; /* CSI ? 2004 h/l */
        bool focus_events; /* CSI ? 1004 h/l */
        unsigned mouse; /* 0, or the tracking mode set last: 9, 1000, 1002 or 1003 (0 again when that one is reset) */
        unsigned mouse_encoding; /* 0, 1005, 1006 or 1015, the same way */
        bool alt_screen; /* CSI ? 1049, 1047 or 47 h/l */
        bool cursor_hidden; /* CSI ? 25 l (h shows it) */
} TermFilterModes;

/* Opaque; one per output stream. */
typedef struct TermFilter TermFilter;

/* A filter in the ground state with every mode off. allow_clipboard lets
 * OSC 52 clipboard writes through (never reads). NULL when out of memory
 * (it takes about 100 KiB with the clipboard allowed, 2 KiB without). */
TermFilter *term_filter_new(bool allow_clipboard);

/* For the terminal layer's emulator (libvterm) in front of the terminal:
 * the CSI queries pass too (the emulator answers them from the program's
 * own screen; the terminal never sees them). Everything else is dropped as
 * ever, which also keeps from libvterm 0.1.4 what it mishandles (a CSI of
 * more than 16 parameters overruns its array). */
void term_filter_pass_queries(TermFilter *f, bool on);

/* Free f (NULL is fine); returns NULL. */
TermFilter *term_filter_free(TermFilter *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(TermFilter *, term_filter_free);

/* Filter the next n bytes of the program's output. What may reach the
 * terminal is appended to *out; answers to queries the filter answers itself
 * (for the caller to type back to the program as input) are appended to
 * *reply. Either may be NULL to discard it. A sequence may be split across
 * calls anywhere: the result does not depend on how the stream is cut. */
void term_filter_feed(TermFilter *f, const uint8_t *p, size_t n, StrBuf *out, StrBuf *reply);

/* term_filter_feed() without output: only the modes and the counter move.
 * For a caller that shows the output some other way (the terminal layer's
 * emulator) but mirrors the modes. */
void term_filter_track(TermFilter *f, const uint8_t *p, size_t n);

/* The modes as of the bytes fed so far; valid as long as f. RIS (ESC c)
 * turns them all off; DECSTR (CSI ! p) only DECCKM, the keypad mode and the
 * hidden cursor, as a terminal's soft reset does. */
const TermFilterModes *term_filter_modes(const TermFilter *f);

/* How many things were dropped so far: each dropped sequence (whole, or cut
 * short by CAN, SUB, ESC or a non-ASCII byte) counts once, each dropped
 * control character or byte that is not UTF-8 once. */
uint64_t term_filter_dropped(const TermFilter *f);
