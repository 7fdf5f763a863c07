/* SPDX-License-Identifier: MIT */
/* The Domain's event record (event-record.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "event-record.h"
#include "fd-util.h"
#include "macro.h"
#include "string-util.h"
#include "thread-util.h"

#define READ_LINE_MAX (64u * 1024u) /* a longer line is not ours: skipped */
#define READ_SEGMENTS 64

typedef struct EventLine {
        struct EventLine *next;
        size_t len;
        char text[]; /* with its newline */
} EventLine;

struct EventLog {
        int dir_fd, fd;
        uint64_t size; /* of the current segment */
        int kept_fd; /* the kept segment, opened at the first rotation */
        uint64_t kept_size;
        /* The kept segment's last line when it is a "rotated" note (one
         * rotation after another merge into it): its offset and counts. */
        bool note;
        uint64_t note_off, note_count, note_kept, note_kept_lost;
        char note_first[40];
        EventLimits lim;
        pthread_mutex_t mutex;
        pthread_cond_t wake;
        EventLine *head, *tail;
        size_t n, bytes;
        uint64_t seq, generation;
        uint64_t queued, written, dropped, unreported, write_errors;
        bool stop, started;
        pthread_t thread;
        char path[4096];
};

static void format_time(uint64_t usec, char *buf, size_t size) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        char s[32];
        strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, size, "%s.%06uZ", s, (unsigned) (usec % 1000000));
}

static uint64_t realtime_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

/* Open the current segment (made when missing): a regular file, ours to
 * append to. */
static int open_current(EventLog *l) {
        int fd = openat(l->dir_fd, EVENT_FILE, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return negative_errno();
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                safe_close(fd);
                return -EBADF;
        }
        l->fd = fd;
        l->size = (uint64_t) st.st_size;
        return 0;
}

bool event_kept(const char *source, const char *kind) {
        return streq(source, "sandbox") || streq(source, "session") || streq(source, "escalation") ||
               streq(source, "record") || streq(kind, "summary");
}

static EventLine *make_line(EventLog *l, const char *source, const char *kind, const char *session, json_t *data);

/* Append one line to the kept segment; past kept_max it is rotated once
 * (kept.jsonl -> kept.jsonl.1, the older one falls away). */
static int kept_append(EventLog *l, const char *text, size_t len) {
        if (l->kept_fd >= 0 && l->kept_size > 0 && l->kept_size + len > l->lim.kept_max) {
                l->kept_fd = safe_close(l->kept_fd);
                if (renameat(l->dir_fd, EVENT_KEPT_FILE, l->dir_fd, EVENT_KEPT_FILE ".1") < 0)
                        return negative_errno();
        }
        if (l->kept_fd < 0) {
                int fd = openat(l->dir_fd, EVENT_KEPT_FILE,
                                O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
                if (fd < 0)
                        return negative_errno();
                struct stat st;
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        safe_close(fd);
                        return -EBADF;
                }
                l->kept_fd = fd;
                l->kept_size = (uint64_t) st.st_size;
        }
        size_t off = 0;
        while (off < len) {
                ssize_t k = write(l->kept_fd, text + off, len - off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? negative_errno() : -EIO;
                off += (size_t) k;
        }
        l->kept_size += len;
        return 0;
}

/* The oldest segment is about to fall away: its rare records (the kept
 * kinds) move to the kept segment, in order, and a "record"/"rotated"
 * record says how many others went and from when to when. The segment is
 * read whole here, on the writer's thread: once per segment_max bytes. */
static void keep_rare(EventLog *l, const char *name) {
        _cleanup_close_ int fd = openat(l->dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return;
        _cleanup_free_ char *buf = malloc(READ_LINE_MAX);
        if (!buf)
                return;
        uint64_t lost = 0, kept = 0, kept_lost = 0;
        char first[40] = "", last[40] = "";
        size_t len = 0;
        bool discarding = false;
        for (;;) {
                ssize_t k = read(fd, buf + len, READ_LINE_MAX - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                len += (size_t) k;
                size_t off = 0;
                char *nl;
                while ((nl = memchr(buf + off, '\n', len - off))) {
                        size_t ll = (size_t) (nl - (buf + off));
                        const char *line = buf + off;
                        off += ll + 1;
                        if (discarding) {
                                discarding = false;
                                continue;
                        }
                        json_t *j = json_loadb(line, ll, 0, NULL);
                        const char *src = json_string_value(json_object_get(j, "source"));
                        const char *kind = json_string_value(json_object_get(j, "kind"));
                        const char *t = json_string_value(json_object_get(j, "time"));
                        if (src && kind && event_kept(src, kind)) {
                                if (kept_append(l, line, ll + 1) < 0)
                                        kept_lost++;
                                else
                                        kept++;
                        } else {
                                lost++;
                                if (t && !first[0])
                                        snprintf(first, sizeof(first), "%s", t);
                                if (t)
                                        snprintf(last, sizeof(last), "%s", t);
                        }
                        json_decref(j);
                }
                memmove(buf, buf + off, len - off);
                len -= off;
                if (len == READ_LINE_MAX) {
                        len = 0; /* not ours: skipped */
                        discarding = true;
                }
        }
        if (lost == 0 && kept_lost == 0)
                return;
        if (kept == 0 && l->note && l->kept_fd >= 0 && ftruncate(l->kept_fd, (off_t) l->note_off) == 0) {
                /* Nothing kept since the last note: it grows instead. */
                l->kept_size = l->note_off;
                lost += l->note_count;
                kept = l->note_kept;
                kept_lost += l->note_kept_lost;
                if (l->note_first[0])
                        snprintf(first, sizeof(first), "%s", l->note_first);
        }
        l->note = false;
        json_t *d = json_pack("{s:I, s:s?, s:s?, s:I, s:I}", "count", (json_int_t) lost, "first",
                              first[0] ? first : NULL, "last", last[0] ? last : NULL, "kept", (json_int_t) kept,
                              "kept_lost", (json_int_t) kept_lost);
        if (!d)
                return;
        pthread_mutex_lock(&l->mutex);
        EventLine *e = make_line(l, "record", "rotated", NULL, d);
        pthread_mutex_unlock(&l->mutex);
        json_decref(d);
        if (e && kept_append(l, e->text, e->len) >= 0) {
                l->note = true;
                l->note_off = l->kept_size - e->len;
                l->note_count = lost;
                l->note_kept = kept;
                l->note_kept_lost = kept_lost;
                snprintf(l->note_first, sizeof(l->note_first), "%s", first);
        } else
                l->write_errors++;
        free(e);
}

/* events.jsonl -> .1 -> .2 ...; the oldest is replaced, its rare records
 * kept. */
static int rotate(EventLog *l) {
        char from[64], to[64];
        snprintf(from, sizeof(from), "%s.%u", EVENT_FILE, l->lim.segments - 1);
        keep_rare(l, from);
        for (unsigned i = l->lim.segments - 1; i >= 1; i--) {
                if (i == 1)
                        snprintf(from, sizeof(from), "%s", EVENT_FILE);
                else
                        snprintf(from, sizeof(from), "%s.%u", EVENT_FILE, i - 1);
                snprintf(to, sizeof(to), "%s.%u", EVENT_FILE, i);
                if (renameat(l->dir_fd, from, l->dir_fd, to) < 0 && errno != ENOENT)
                        return negative_errno();
        }
        l->fd = safe_close(l->fd);
        return open_current(l);
}

static void write_line(EventLog *l, const EventLine *e) {
        if (l->size > 0 && l->size + e->len > l->lim.segment_max && rotate(l) < 0) {
                l->write_errors++;
                return;
        }
        if (l->fd < 0) {
                l->write_errors++;
                return;
        }
        size_t off = 0;
        while (off < e->len) {
                ssize_t k = write(l->fd, e->text + off, e->len - off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        l->write_errors++;
                        return;
                }
                off += (size_t) k;
        }
        l->size += e->len;
}

static void *writer_main(void *p) {
        EventLog *l = p;
        pthread_mutex_lock(&l->mutex);
        for (;;) {
                while (!l->head && !l->stop)
                        pthread_cond_wait(&l->wake, &l->mutex);
                EventLine *batch = l->head;
                if (!batch)
                        break; /* stopped, nothing left */
                l->head = l->tail = NULL;
                l->n = l->bytes = 0;
                pthread_mutex_unlock(&l->mutex);

                uint64_t done = 0;
                while (batch) {
                        EventLine *next = batch->next;
                        write_line(l, batch);
                        free(batch);
                        batch = next;
                        done++;
                }

                pthread_mutex_lock(&l->mutex);
                l->written += done;
        }
        pthread_mutex_unlock(&l->mutex);
        return NULL;
}

/* <domain_dir>/events (made 0700 when make), never through a symlink. */
static int open_event_dir(const char *domain_dir, bool make) {
        _cleanup_close_ int root = open(domain_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        if (make && mkdirat(root, EVENT_DIR, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        int dfd = openat(root, EVENT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return dfd < 0 ? negative_errno() : dfd;
}

int event_log_open(const char *domain_dir, const EventLimits *lim, EventLog **ret) {
        if (!domain_dir || !ret)
                return -EINVAL;
        EventLimits d = { EVENT_SEGMENT_MAX, EVENT_SEGMENTS, EVENT_QUEUE_RECORDS, EVENT_QUEUE_BYTES, EVENT_KEPT_MAX };
        if (lim)
                d = *lim;
        if (d.kept_max == 0)
                d.kept_max = d.segment_max;
        if (d.segments < 2 || d.segment_max == 0 || d.queue_records == 0 || d.queue_bytes == 0)
                return -EINVAL;

        int dfd = open_event_dir(domain_dir, true);
        if (dfd < 0)
                return dfd;

        EventLog *l = calloc(1, sizeof(EventLog));
        if (!l) {
                safe_close(dfd);
                return -ENOMEM;
        }
        l->dir_fd = dfd;
        l->fd = -EBADF;
        l->kept_fd = -EBADF;
        l->lim = d;
        snprintf(l->path, sizeof(l->path), "%s/%s/%s", domain_dir, EVENT_DIR, EVENT_FILE);
        pthread_mutex_init(&l->mutex, NULL);
        pthread_cond_init(&l->wake, NULL);
        int r = open_current(l);
        if (r < 0) {
                event_log_close(l);
                return r;
        }

        r = thread_create_no_signals(&l->thread, writer_main, l);
        if (r < 0) {
                event_log_close(l);
                return r;
        }
        l->started = true;
        *ret = l;
        return 0;
}

void event_log_set_generation(EventLog *l, uint64_t generation) {
        if (!l)
                return;
        pthread_mutex_lock(&l->mutex);
        l->generation = generation;
        pthread_mutex_unlock(&l->mutex);
}

/* The length of the valid UTF-8 sequence at s (1-4), or 0. */
static size_t utf8_len(const unsigned char *s, size_t len) {
        unsigned char c = s[0];
        size_t n;
        uint32_t cp;
        if (c >= 0x01 && c < 0x80)
                return 1;
        if (c >= 0xC2 && c <= 0xDF) {
                n = 2;
                cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
                n = 3;
                cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
                n = 4;
                cp = c & 0x07;
        } else
                return 0;
        if (len < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
                return 0;
        return n;
}

json_t *event_string(const char *s, size_t len) {
        size_t cap = len * 4 + 1, o = 0;
        char *t = malloc(cap);
        if (!t)
                return NULL;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_len((const unsigned char *) s + i, len - i);
                if (n == 0) {
                        snprintf(t + o, cap - o, "\\x%02x", (unsigned char) s[i]);
                        o += 4;
                        i++;
                        continue;
                }
                memcpy(t + o, s + i, n);
                o += n;
                i += n;
        }
        json_t *j = json_stringn(t, o);
        free(t);
        return j;
}

json_t *event_str(const char *s) {
        return s ? event_string(s, strlen(s)) : json_null();
}

/* Cut s to at most EVENT_STRING_MAX bytes at a UTF-8 boundary. */
static json_t *cut_string(const char *s, size_t len) {
        if (len <= EVENT_STRING_MAX)
                return NULL;
        size_t keep = EVENT_STRING_MAX - 64;
        while (keep > 0 && ((unsigned char) s[keep] & 0xC0) == 0x80)
                keep--;
        char *t = malloc(keep + 64);
        if (!t)
                return NULL;
        memcpy(t, s, keep);
        snprintf(t + keep, 64, "...(cut, %zu bytes)", len);
        json_t *j = json_string(t);
        free(t);
        return j;
}

json_t *event_str_cut(const char *s) {
        if (!s)
                return json_null();
        json_t *c = cut_string(s, strlen(s));
        return c ? c : json_string(s);
}

/* Long strings anywhere in v are cut (depth-bounded: deeper values are
 * replaced). */
static void cut_strings(json_t *v, unsigned depth) {
        if (json_is_object(v)) {
                const char *k;
                json_t *x;
                void *tmp;
                json_object_foreach_safe(v, tmp, k, x) {
                        json_t *c = json_is_string(x) ? cut_string(json_string_value(x), json_string_length(x)) : NULL;
                        if (c)
                                json_object_set_new(v, k, c);
                        else if (depth >= 8 && (json_is_object(x) || json_is_array(x)))
                                json_object_set_new(v, k, json_string("...(too deep)"));
                        else
                                cut_strings(x, depth + 1);
                }
        } else if (json_is_array(v)) {
                for (size_t i = 0; i < json_array_size(v); i++) {
                        json_t *x = json_array_get(v, i);
                        json_t *c = json_is_string(x) ? cut_string(json_string_value(x), json_string_length(x)) : NULL;
                        if (c)
                                json_array_set_new(v, i, c);
                        else if (depth >= 8 && (json_is_object(x) || json_is_array(x)))
                                json_array_set_new(v, i, json_string("...(too deep)"));
                        else
                                cut_strings(x, depth + 1);
                }
        }
}

/* One line (with its newline) for a record; the log's lock is held. */
static EventLine *make_line(EventLog *l, const char *source, const char *kind, const char *session, json_t *data) {
        char t[48];
        format_time(realtime_usec(), t, sizeof(t));
        json_t *o = json_pack("{s:s, s:I, s:I, s:s?, s:s, s:s, s:O}", "time", t, "seq", (json_int_t) (l->seq + 1),
                              "generation", (json_int_t) l->generation, "session", session, "source", source, "kind",
                              kind, "data", data);
        if (!o)
                return NULL;
        char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        size_t full = s ? strlen(s) : 0;
        if (full > EVENT_LINE_MAX) {
                free(s);
                json_object_set_new(o, "data", json_pack("{s:I}", "oversized_bytes", (json_int_t) full));
                s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        }
        json_decref(o);
        if (!s)
                return NULL;
        size_t len = strlen(s);
        EventLine *e = malloc(sizeof(EventLine) + len + 1);
        if (e) {
                e->next = NULL;
                e->len = len + 1;
                memcpy(e->text, s, len);
                e->text[len] = '\n';
                l->seq++;
        }
        free(s);
        return e;
}

static void push(EventLog *l, EventLine *e) {
        if (l->tail)
                l->tail->next = e;
        else
                l->head = e;
        l->tail = e;
        l->n++;
        l->bytes += e->len;
        l->queued++;
}

/* The count of records dropped since the last report goes on record
 * first (it may exceed the queue's bound by this one small record). */
static void report_dropped(EventLog *l) {
        if (l->unreported == 0)
                return;
        json_t *d = json_pack("{s:I, s:I}", "count", (json_int_t) l->unreported, "total", (json_int_t) l->dropped);
        EventLine *e = d ? make_line(l, "record", "dropped", NULL, d) : NULL;
        json_decref(d);
        if (!e)
                return;
        push(l, e);
        l->unreported = 0;
}

bool event_emit(EventLog *l, const char *source, const char *kind, const char *session, json_t *data) {
        if (!l || !source || !kind || (data && !json_is_object(data))) {
                json_decref(data);
                return false;
        }
        if (!data)
                data = json_object();
        if (!data)
                return false;
        pthread_mutex_lock(&l->mutex);
        bool ok = false;
        if (!l->stop && l->n < l->lim.queue_records && l->bytes < l->lim.queue_bytes) {
                report_dropped(l);
                cut_strings(data, 0);
                EventLine *e = make_line(l, source, kind, session, data);
                if (e) {
                        push(l, e);
                        ok = true;
                        pthread_cond_signal(&l->wake);
                }
        }
        if (!ok) {
                l->dropped++;
                l->unreported++;
        }
        pthread_mutex_unlock(&l->mutex);
        json_decref(data);
        return ok;
}

void event_log_counts(EventLog *l, EventCounts *ret) {
        *ret = (EventCounts){};
        if (!l)
                return;
        pthread_mutex_lock(&l->mutex);
        ret->queued = l->queued;
        ret->written = l->written;
        ret->dropped = l->dropped;
        ret->write_errors = l->write_errors;
        snprintf(ret->path, sizeof(ret->path), "%s", l->path);
        pthread_mutex_unlock(&l->mutex);
}

EventLog *event_log_close(EventLog *l) {
        if (!l)
                return NULL;
        if (l->started) {
                pthread_mutex_lock(&l->mutex);
                report_dropped(l);
                l->stop = true;
                pthread_cond_signal(&l->wake);
                pthread_mutex_unlock(&l->mutex);
                pthread_join(l->thread, NULL);
        }
        while (l->head) {
                EventLine *n = l->head->next;
                free(l->head);
                l->head = n;
        }
        safe_close(l->fd);
        safe_close(l->kept_fd);
        safe_close(l->dir_fd);
        pthread_mutex_destroy(&l->mutex);
        pthread_cond_destroy(&l->wake);
        free(l);
        return NULL;
}

/* ---- time ---------------------------------------------------------------- */

/* Parse "YYYY-MM-DD[(T| )HH:MM[:SS[.frac]]][Z]"; strict selects the
 * record's own form (seconds required, Z required). */
static int parse_utc(const char *s, bool strict, uint64_t *ret) {
        struct tm tm = {};
        int n = 0;
        if (sscanf(s, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &n) != 3 || n != 10)
                return -EINVAL;
        const char *p = s + n;
        uint64_t frac = 0;
        if (*p == 'T' || (!strict && *p == ' ')) {
                p++;
                int m = 0;
                if (sscanf(p, "%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &m) != 2 || m != 5)
                        return -EINVAL;
                p += m;
                if (*p == ':') {
                        p++;
                        if (!isdigit((unsigned char) p[0]) || !isdigit((unsigned char) p[1]))
                                return -EINVAL;
                        tm.tm_sec = (p[0] - '0') * 10 + (p[1] - '0');
                        p += 2;
                        if (*p == '.') {
                                p++;
                                unsigned digits = 0;
                                while (isdigit((unsigned char) *p)) {
                                        if (digits < 6) {
                                                frac = frac * 10 + (uint64_t) (*p - '0');
                                                digits++;
                                        }
                                        p++;
                                }
                                if (digits == 0)
                                        return -EINVAL;
                                for (; digits < 6; digits++)
                                        frac *= 10;
                        }
                } else if (strict)
                        return -EINVAL;
        } else if (strict)
                return -EINVAL;
        if (*p == 'Z')
                p++;
        else if (strict)
                return -EINVAL;
        if (*p)
                return -EINVAL;
        if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
            tm.tm_sec > 60 || tm.tm_year < 1970)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        if (t < 0)
                return -EINVAL;
        *ret = (uint64_t) t * 1000000 + frac;
        return 0;
}

int event_time_parse(const char *s, uint64_t *ret_usec) {
        if (!s || !ret_usec)
                return -EINVAL;
        return parse_utc(s, true, ret_usec);
}

int event_since_parse(const char *s, uint64_t now, uint64_t *ret_usec) {
        if (!s || !*s || !ret_usec)
                return -EINVAL;
        size_t len = strlen(s);
        char unit = s[len - 1];
        if (strchr("smhd", unit) && len >= 2) {
                uint64_t n = 0;
                for (size_t i = 0; i + 1 < len; i++) {
                        if (!isdigit((unsigned char) s[i]) || n > UINT64_C(100000000))
                                return -EINVAL;
                        n = n * 10 + (uint64_t) (s[i] - '0');
                }
                uint64_t mult = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : 86400;
                uint64_t back = n * mult * 1000000;
                *ret_usec = back > now ? 0 : now - back;
                return 0;
        }
        return parse_utc(s, false, ret_usec);
}

/* ---- reading ------------------------------------------------------------- */

struct EventReader {
        int dir_fd;
        int fds[READ_SEGMENTS];
        size_t n, i;
        char *buf;
        size_t len, off;
        bool discarding; /* in a line longer than READ_LINE_MAX */
        bool drained; /* the current segment was renamed; read once more */
        uint64_t skipped;
};

typedef struct SegName {
        unsigned index; /* 0: the current one; kept ones above every other */
        char name[64];
} SegName;

static int seg_cmp(const void *a, const void *b) {
        unsigned x = ((const SegName *) a)->index, y = ((const SegName *) b)->index;
        return x < y ? 1 : x > y ? -1 : 0; /* oldest (highest) first */
}

static int open_segment(int dir_fd, const char *name) {
        int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                safe_close(fd);
                return -EBADF;
        }
        return fd;
}

int event_reader_open(const char *domain_dir, EventReader **ret) {
        if (!domain_dir || !ret)
                return -EINVAL;
        int dfd = open_event_dir(domain_dir, false);
        if (dfd < 0)
                return dfd;
        EventReader *r = calloc(1, sizeof(EventReader));
        if (!r) {
                safe_close(dfd);
                return -ENOMEM;
        }
        r->dir_fd = dfd;
        r->buf = malloc(READ_LINE_MAX);
        if (!r->buf) {
                event_reader_close(r);
                return -ENOMEM;
        }

        DIR *d = fdopendir(dup(dfd));
        if (!d) {
                int e = negative_errno();
                event_reader_close(r);
                return e;
        }
        SegName segs[READ_SEGMENTS];
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n < READ_SEGMENTS) {
                const char *rest = startswith(de->d_name, EVENT_FILE);
                unsigned idx = 0;
                /* The kept segments hold what fell out of the oldest:
                 * read before every other. */
                if (streq(de->d_name, EVENT_KEPT_FILE ".1"))
                        rest = "", idx = 100002;
                else if (streq(de->d_name, EVENT_KEPT_FILE))
                        rest = "", idx = 100001;
                if (!rest)
                        continue;
                if (*rest) {
                        char *end;
                        if (rest[0] != '.' || !isdigit((unsigned char) rest[1]))
                                continue;
                        unsigned long v = strtoul(rest + 1, &end, 10);
                        if (*end || v == 0 || v > 1000)
                                continue;
                        idx = (unsigned) v;
                }
                if (strlen(de->d_name) >= sizeof(segs[n].name))
                        continue;
                segs[n].index = idx;
                strcpy(segs[n].name, de->d_name);
                n++;
        }
        closedir(d);
        qsort(segs, n, sizeof(SegName), seg_cmp);
        bool have_current = n > 0 && segs[n - 1].index == 0;
        for (size_t i = 0; i < n; i++) {
                int fd = open_segment(dfd, segs[i].name);
                if (fd == -ENOENT)
                        continue; /* rotated away meanwhile */
                if (fd < 0) {
                        event_reader_close(r);
                        return fd;
                }
                r->fds[r->n++] = fd;
        }
        if (!have_current) {
                /* Following needs the current segment even when it is
                 * not there yet: made at the writer's first start. */
                int fd = open_segment(dfd, EVENT_FILE);
                if (fd >= 0 && r->n < READ_SEGMENTS)
                        r->fds[r->n++] = fd;
                else
                        safe_close(fd);
        }
        *ret = r;
        return 0;
}

int event_reader_seek_tail(EventReader *r, uint64_t bytes) {
        if (r->n == 0)
                return 0;
        /* The older segments are skipped. */
        for (; r->i + 1 < r->n; r->i++)
                r->fds[r->i] = safe_close(r->fds[r->i]);
        int fd = r->fds[r->i];
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        uint64_t size = (uint64_t) st.st_size;
        uint64_t at = size > bytes ? size - bytes : 0;
        if (lseek(fd, (off_t) at, SEEK_SET) < 0)
                return negative_errno();
        r->len = r->off = 0;
        /* From the middle of a line: the rest of it is not a record. */
        r->discarding = at > 0;
        return 0;
}

/* The current segment was renamed (rotated): 1 after switching to the new
 * one, 0 when it was not. */
static int follow_rotation(EventReader *r) {
        int fd = r->fds[r->n - 1];
        struct stat a, b;
        if (fstat(fd, &a) < 0 || fstatat(r->dir_fd, EVENT_FILE, &b, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                return 0;
        if (!r->drained) {
                r->drained = true; /* what was appended before the rename first */
                return 1;
        }
        int nfd = open_segment(r->dir_fd, EVENT_FILE);
        if (nfd < 0)
                return 0;
        safe_close(fd);
        r->fds[r->n - 1] = nfd;
        r->len = r->off = 0;
        r->discarding = false;
        r->drained = false;
        return 1;
}

int event_reader_next(EventReader *r, bool follow, json_t **ret) {
        *ret = NULL;
        for (;;) {
                char *start = r->buf + r->off;
                char *nl = r->len > r->off ? memchr(start, '\n', r->len - r->off) : NULL;
                if (nl) {
                        size_t ll = (size_t) (nl - start);
                        r->off += ll + 1;
                        if (r->discarding) {
                                r->discarding = false;
                                continue;
                        }
                        json_t *j = json_loadb(start, ll, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
                        if (json_is_object(j)) {
                                *ret = j;
                                return 1;
                        }
                        json_decref(j);
                        r->skipped++;
                        continue;
                }
                memmove(r->buf, r->buf + r->off, r->len - r->off);
                r->len -= r->off;
                r->off = 0;
                if (r->len == READ_LINE_MAX) {
                        r->skipped++;
                        r->discarding = true;
                        r->len = 0;
                }
                if (r->i >= r->n) {
                        /* No segment at all when opened: the writer may
                         * have made one since. */
                        int fd = follow && r->n == 0 ? open_segment(r->dir_fd, EVENT_FILE) : -ENOENT;
                        if (fd < 0)
                                return 0;
                        r->fds[r->n++] = fd;
                        continue;
                }
                ssize_t k = read(r->fds[r->i], r->buf + r->len, READ_LINE_MAX - r->len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno != EAGAIN)
                        return negative_errno();
                if (k > 0) {
                        r->len += (size_t) k;
                        continue;
                }
                if (r->i + 1 < r->n) {
                        /* The end of an older segment: a partial last line
                         * (a crash) is dropped. */
                        r->fds[r->i] = safe_close(r->fds[r->i]);
                        r->i++;
                        r->len = r->off = 0;
                        r->discarding = false;
                        continue;
                }
                if (!follow || follow_rotation(r) == 0)
                        return 0;
        }
}

uint64_t event_reader_skipped(const EventReader *r) {
        return r ? r->skipped : 0;
}

EventReader *event_reader_close(EventReader *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n; i++)
                safe_close(r->fds[i]);
        safe_close(r->dir_fd);
        free(r->buf);
        free(r);
        return NULL;
}
