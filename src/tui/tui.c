/* SPDX-License-Identifier: MIT */
/* The terminal layer of `lazaret run` (see tui.h): the writer thread, the
 * status line, frames drawn from the emulator's cells, and tui.h's
 * functions. The emulator's screen is tui-screen.c; cells and pens as
 * escape sequences, tui-encode.c; what they share, tui-internal.h. */
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
#include "tui-internal.h"
#include "thread-util.h"

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
        int r = thread_create_no_signals(&w->thread, writer_main, w);
        if (r < 0) {
                pthread_cond_destroy(&w->cond);
                pthread_mutex_destroy(&w->lock);
                close(w->efd);
                free(w);
                return r;
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
