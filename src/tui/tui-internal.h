/* SPDX-License-Identifier: MIT */
#pragma once

/* The terminal layer's insides, shared by its three files (tui.h is what
 * its callers see): the Tui itself, the cells of the sandbox's screen and
 * the terminal's pen. tui-screen.c is the emulator's side (libvterm's
 * callbacks writing cells, the grids, the scrollback history, the fast
 * path for text); tui-encode.c turns cells and pens into the escape
 * sequences the terminal is sent; tui.c is the rest (the writer thread,
 * the status line, frames, and tui.h's functions). */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vterm.h>

#include "strbuf.h"
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

#define COLOR_DEFAULT_FG ((uint32_t) VTERM_COLOR_DEFAULT_FG << 24)
#define COLOR_DEFAULT_BG ((uint32_t) VTERM_COLOR_DEFAULT_BG << 24)

/* tui-encode.c: colours, and cells, pens and cursor moves as escape
 * sequences (put_uint() writes into room made with strbuf_room()). */
uint32_t color_pack(const VTermColor *c);
char *put_uint(char *p, unsigned v);
void put_cup(StrBuf *o, int row, int col);
void pen_known_default(Pen *pen);
void pen_reset(StrBuf *o, Pen *pen);
bool cell_blank(const Cell *c, uint32_t flip);
void put_row(StrBuf *o, Pen *pen, const Cell *cells, int n, int width, bool reverse, int known_end);

/* tui-screen.c: the emulator's screens, its callbacks, the scrollback
 * history and the fast path for text (feed_emulator()). */
extern const VTermStateCallbacks state_cbs;
int grid_new(Grid *g, int rows, int cols, const Cell *blank);
void grid_free(Grid *g);
void rotate_rows(Row **r, int n, int k);
Cell blank_cell(const Tui *t);
int used_end(const Row *r, bool reverse);
void hist_reset(Tui *t);
void cb_output(const char *s, size_t len, void *user);
void track_reset(Tui *t);
void feed_emulator(Tui *t, const char *s, size_t n);
