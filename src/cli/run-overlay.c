/* SPDX-License-Identifier: MIT */
/* The event overlay of `lazaret run`: see run-overlay.h. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event-record.h"
#include "fd-util.h"
#include "macro.h"
#include "event-text.h"
#include "run-overlay.h"
#include "string-util.h"

#define OVERLAY_RECORDS 2000 /* kept, newest last */
#define OVERLAY_TAIL    (UINT64_C(1024) * 1024) /* bytes of the record read when it opens */
#define LINE_MAX_BYTES  512u

/* The sources one can filter on; the first is all of them. */
static const char *const sources[] = { NULL,      "network", "git",   "paths",   "escalation",
                                       "session", "process", "files", "sandbox", "record" };

typedef struct Line {
        char source[16];
        char text[LINE_MAX_BYTES];
} Line;

struct Overlay {
        EventReader *rd;
        Line *lines; /* a ring of OVERLAY_RECORDS */
        size_t first, n;
        size_t filter; /* index into sources */
        size_t back; /* lines scrolled up from the newest */
        unsigned page; /* lines shown, as last drawn */
        char note[160];
};

int overlay_open(const char *domain_dir, Overlay **ret) {
        Overlay *o = calloc(1, sizeof(*o));
        if (!o)
                return -ENOMEM;
        o->lines = calloc(OVERLAY_RECORDS, sizeof(*o->lines));
        if (!o->lines) {
                free(o);
                return -ENOMEM;
        }
        int r = event_reader_open(domain_dir, &o->rd);
        if (r >= 0)
                r = event_reader_seek_tail(o->rd, OVERLAY_TAIL);
        if (r < 0) {
                o->rd = event_reader_close(o->rd);
                snprintf(o->note, sizeof(o->note), "the event record cannot be read: %s",
                         r == -ENOENT ? "there is none yet" : strerror(-r));
        }
        (void) overlay_refresh(o);
        *ret = o;
        return 0;
}

Overlay *overlay_close(Overlay *o) {
        if (!o)
                return NULL;
        event_reader_close(o->rd);
        free(o->lines);
        free(o);
        return NULL;
}

/* One record as a line: time, source, kind, session, then its data as
 * lazaret events shows it (key=value, inert; issue 42: raw JSON, quotes
 * and braces, ran off the edge). */
static void format_record(json_t *j, Line *l) {
        const char *time = json_string_value(json_object_get(j, "time"));
        const char *source = json_string_value(json_object_get(j, "source"));
        const char *kind = json_string_value(json_object_get(j, "kind"));
        const char *session = json_string_value(json_object_get(j, "session"));
        json_t *data = json_object_get(j, "data");
        _cleanup_free_ char *d = json_is_object(data) ? event_text_data(data) : NULL;
        char hms[9] = "--:--:--";
        if (time && strlen(time) >= 19)
                memcpy(hms, time + 11, 8);
        snprintf(l->source, sizeof(l->source), "%s", source ?: "?");
        snprintf(l->text, sizeof(l->text), "%s %-10.10s %-14.14s %-8.8s%s", hms, source ?: "?", kind ?: "?",
                 session ?: "-", d ?: "");
        /* The record is ASCII; its strings were read back by JSON and
         * dumped again escaped; still, nothing but printable ASCII. */
        for (char *c = l->text; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f)
                        *c = '?';
}

bool overlay_refresh(Overlay *o) {
        bool changed = false;
        for (unsigned i = 0; o->rd && i < 10000; i++) {
                json_t *j = NULL;
                int r = event_reader_next(o->rd, true, &j);
                if (r <= 0)
                        break;
                Line *l;
                if (o->n < OVERLAY_RECORDS)
                        l = &o->lines[(o->first + o->n++) % OVERLAY_RECORDS];
                else {
                        l = &o->lines[o->first];
                        o->first = (o->first + 1) % OVERLAY_RECORDS;
                }
                format_record(j, l);
                json_decref(j);
                changed = true;
        }
        return changed;
}

static bool shown(const Overlay *o, const Line *l) {
        return !sources[o->filter] || streq(l->source, sources[o->filter]);
}

static size_t n_shown(const Overlay *o) {
        size_t k = 0;
        for (size_t i = 0; i < o->n; i++)
                if (shown(o, &o->lines[(o->first + i) % OVERLAY_RECORDS]))
                        k++;
        return k;
}

static void scroll(Overlay *o, long delta) {
        size_t total = n_shown(o), page = o->page ? o->page : 1;
        size_t max = total > page ? total - page : 0;
        long b = (long) o->back + delta;
        o->back = b < 0 ? 0 : (size_t) b > max ? max : (size_t) b;
}

OverlayAction overlay_keys(Overlay *o, const uint8_t *p, size_t n) {
        long page = o->page ? (long) o->page : 10;
        for (size_t i = 0; i < n; i++) {
                uint8_t c = p[i];
                if (c == 0x1b) {
                        /* Esc alone (nothing after it in this read) closes;
                         * else a key's sequence: CSI or SS3, then its
                         * parameters and final byte. */
                        if (i + 1 >= n)
                                return OVERLAY_CLOSE;
                        uint8_t k = p[i + 1];
                        if (k != '[' && k != 'O') {
                                i++;
                                continue;
                        }
                        size_t j = i + 2;
                        while (j < n && p[j] >= 0x20 && p[j] < 0x40)
                                j++;
                        if (j >= n)
                                return OVERLAY_NONE;
                        char fin = (char) p[j];
                        bool tilde5 = fin == '~' && j == i + 3 && p[i + 2] == '5';
                        bool tilde6 = fin == '~' && j == i + 3 && p[i + 2] == '6';
                        if (fin == 'A')
                                scroll(o, 1);
                        else if (fin == 'B')
                                scroll(o, -1);
                        else if (tilde5)
                                scroll(o, page);
                        else if (tilde6)
                                scroll(o, -page);
                        else if (fin == 'H')
                                scroll(o, (long) o->n);
                        else if (fin == 'F')
                                scroll(o, -(long) o->n);
                        i = j;
                        continue;
                }
                switch (c) {
                case 'q':
                case 0x1d: /* Ctrl+] again */
                        return OVERLAY_CLOSE;
                case 'p':
                        return OVERLAY_PAUSE;
                case 'f':
                case '\t':
                        o->filter = (o->filter + 1) % ELEMENTSOF(sources);
                        o->back = 0;
                        break;
                case 'k':
                        scroll(o, 1);
                        break;
                case 'j':
                        scroll(o, -1);
                        break;
                case 'g':
                        scroll(o, (long) o->n);
                        break;
                case 'G':
                        o->back = 0;
                        break;
                case ' ':
                        scroll(o, -page);
                        break;
                case 'b':
                        scroll(o, page);
                        break;
                default:
                        break;
                }
        }
        return OVERLAY_NONE;
}

int overlay_draw(Overlay *o, Tui *t, unsigned rows, bool paused, const char *pause_error) {
        if (rows < 3)
                return 0;
        TuiLine *l = calloc(rows, sizeof(*l));
        char header[256], footer[512];
        if (!l)
                return -ENOMEM;
        unsigned page = rows - 2;
        o->page = page;
        scroll(o, 0);
        snprintf(header, sizeof(header),
                 " lazaret events   filter [f]: %s   [p] %s   [Esc] close   Up/Down PgUp/PgDn Home/End",
                 sources[o->filter] ?: "all", paused ? "resume" : "pause");
        l[0] = (TuiLine){ .text = header, .reverse = true };
        /* The newest `page` lines of the filter, `back` lines up. */
        size_t total = n_shown(o), skip_end = o->back, k = 0;
        size_t last = total > skip_end ? total - skip_end : 0; /* one past the newest shown */
        size_t from = last > page ? last - page : 0;
        for (size_t i = 0, idx = 0; i < o->n && k < page; i++) {
                const Line *x = &o->lines[(o->first + i) % OVERLAY_RECORDS];
                if (!shown(o, x))
                        continue;
                if (idx >= from && idx < last)
                        l[1 + k++] = (TuiLine){ .text = x->text };
                idx++;
        }
        if (total == 0)
                l[1] = (TuiLine){ .text = o->note[0] ? o->note : "no events yet" };
        snprintf(footer, sizeof(footer), " %zu events%s, showing %zu-%zu   sandbox %s%s%s", total,
                 o->n >= OVERLAY_RECORDS ? " (the latest)" : "", total ? from + 1 : 0, last,
                 paused ? "PAUSED" : "running", pause_error && *pause_error ? ": " : "",
                 pause_error && *pause_error ? pause_error : "");
        l[rows - 1] = (TuiLine){ .text = footer, .reverse = true };
        int r = tui_overlay_draw(t, l, rows);
        free(l);
        return r;
}
