/* SPDX-License-Identifier: MIT */
#pragma once

/* The terminal layer of `lazaret run` (issue 20): the sandbox's output is
 * never written to the person's terminal as it is. It is fed to a terminal
 * emulator of our own (libvterm) one row shorter than the real terminal,
 * and what reaches the terminal is drawn from that emulator's cells: every
 * cell is placed by an absolute cursor move, nothing is written past the
 * last column (nor anything there that could wrap), and the only
 * scrolling is ours (a line feed on the bottom row, which puts the lines
 * the sandbox scrolled away into the terminal's own scrollback). So no
 * sequence the sandbox prints can draw into the bottom row, where the status
 * line is, or reach the terminal at all: queries are answered by the
 * emulator (from the sandbox's own screen, typed back to the sandbox through
 * tui_take_replies()), and what the emulator does not draw (OSC 52, colour
 * and title reports, DCS) is dropped; a clipboard write passes only when
 * the profile allows it. Input is not translated: the modes that change
 * what the terminal sends (cursor and keypad keys, mouse, bracketed paste,
 * focus) are mirrored onto it.
 *
 * Drawing is done by tui_render(): the caller calls it when tui_wants()
 * says so (content at most 60 times a second, the status line's own
 * changes at most 5 times a second). With TuiOptions.writer a thread of
 * its own writes each frame to the terminal while the caller goes on
 * feeding; the next frame waits until that one is written (tui_fd() is
 * readable then). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Tui Tui;

typedef struct TuiStatus {
        const char *profile;
        const char *domain; /* the Domain hash (a prefix is shown) */
        const char *network; /* the network mode */
        const char *digest; /* the policy digest (a prefix is shown) */
        unsigned sessions;
        uint64_t refused_connections, refused_git, escalations_pending;
        bool paused;
} TuiStatus;

typedef struct TuiOptions {
        int fd; /* the terminal: written to, and asked for its size */
        bool color; /* false: NO_COLOR (the status line without colours) */
        bool clipboard; /* OSC 52 writes reach the terminal */
        bool writer; /* frames written by a thread (else before tui_render() returns) */
} TuiOptions;

/* Take over the terminal (already in raw mode) at rows x columns: what it
 * shows goes to its scrollback, the sandbox's screen starts empty. The
 * sandbox is rows - 1 high: tui_rows(). -ENOMEM; -ERANGE when the terminal
 * is too small (fewer than 2 rows or 2 columns). */
int tui_new(const TuiOptions *opt, unsigned rows, unsigned columns, Tui **ret);
/* Give the terminal back: the status line erased, the modes reset, the
 * cursor below what the sandbox drew. NULL. */
Tui *tui_free(Tui *t);

/* The sandbox's terminal size. */
unsigned tui_rows(const Tui *t);
unsigned tui_columns(const Tui *t);

/* What the sandbox printed. */
void tui_feed(Tui *t, const uint8_t *p, size_t n);
/* Answers to the sandbox's queries (to be sent to it as input); *ret_n 0:
 * none. Valid until the next tui_feed(). */
const uint8_t *tui_replies(Tui *t, size_t *ret_n);
void tui_replies_clear(Tui *t);

void tui_set_status(Tui *t, const TuiStatus *s, uint64_t now_usec);

/* The real terminal's new size (redraws everything). */
void tui_resize(Tui *t, unsigned rows, unsigned columns);

/* Someone else (the escalation prompt) takes the screen; tui_resume() draws
 * everything again and puts the modes back. */
void tui_suspend(Tui *t);
void tui_resume(Tui *t);

/* The event overlay (Ctrl+]) over the sandbox's rows: lines of text (each
 * cut at the width; anything but printable ASCII shown as '?'), the status
 * line stays. The sandbox's screen keeps up behind it; tui_overlay_end()
 * shows it again as it is. */
typedef struct TuiLine {
        const char *text;
        bool reverse;
} TuiLine;
int tui_overlay_draw(Tui *t, const TuiLine *lines, size_t n);
void tui_overlay_end(Tui *t);

/* How long until tui_render() should run: 0 now, -1 nothing to draw, else
 * milliseconds. */
int tui_wants(const Tui *t, uint64_t now_usec);
/* Draw what changed. -errno when the terminal cannot be written. */
int tui_render(Tui *t, uint64_t now_usec);
/* Draw everything pending now (the last frame), after the one being
 * written. */
int tui_render_now(Tui *t);

/* With the writer: an fd readable when a frame was written (then call
 * tui_written()); -1 without. */
int tui_fd(const Tui *t);
void tui_written(Tui *t);
/* Lines scrolled away pile up faster than the terminal takes them: read
 * no more of the sandbox's output until a frame is written. */
bool tui_backlogged(const Tui *t);

/* Counters for tests and status. */
uint64_t tui_dropped(const Tui *t); /* sequences the terminal never saw */
