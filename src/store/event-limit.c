/* SPDX-License-Identifier: MIT */
/* Aggregation and rate limit of what the agent can put on record at will
 * (event-limit.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "event-limit.h"
#include "macro.h"
#include "string-util.h"

typedef struct Entry {
        char *source, *kind;
        json_t *key; /* NULL: "other" */
        uint64_t full, pending, dropped;
        uint64_t first, last; /* realtime usec of the pending ones */
} Entry;

struct EventLimiter {
        json_t *index; /* "source\x1fkind\x1fkey" -> integer index into entries */
        Entry *entries;
        size_t n;
        uint64_t tokens, refill, next_flush;
        json_t *totals;
};

static uint64_t realtime_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

EventLimiter *event_limiter_new(uint64_t now) {
        EventLimiter *lim = calloc(1, sizeof(EventLimiter));
        if (!lim)
                return NULL;
        lim->index = json_object();
        lim->totals = json_object();
        lim->entries = calloc(EVENT_LIMIT_KEYS + 8, sizeof(Entry));
        if (!lim->index || !lim->totals || !lim->entries)
                return event_limiter_free(lim);
        lim->tokens = EVENT_LIMIT_BURST;
        lim->refill = now;
        lim->next_flush = UINT64_MAX;
        return lim;
}

static void entries_clear(EventLimiter *lim) {
        for (size_t i = 0; i < lim->n; i++) {
                free(lim->entries[i].source);
                free(lim->entries[i].kind);
                json_decref(lim->entries[i].key);
        }
        lim->n = 0;
        json_object_clear(lim->index);
}

EventLimiter *event_limiter_free(EventLimiter *lim) {
        if (!lim)
                return NULL;
        if (lim->entries)
                entries_clear(lim);
        free(lim->entries);
        json_decref(lim->index);
        json_decref(lim->totals);
        free(lim);
        return NULL;
}

static void total_add(EventLimiter *lim, const char *source, const char *what) {
        json_t *s = json_object_get(lim->totals, source);
        if (!s) {
                s = json_pack("{s:I, s:I}", "recorded", (json_int_t) 0, "aggregated", (json_int_t) 0);
                if (!s || json_object_set_new(lim->totals, source, s) < 0)
                        return;
        }
        json_object_set_new(s, what, json_integer(json_integer_value(json_object_get(s, what)) + 1));
}

static bool take_token(EventLimiter *lim, uint64_t now) {
        uint64_t add = now > lim->refill ? (now - lim->refill) * EVENT_LIMIT_RATE / 1000000 : 0;
        if (add > 0) {
                lim->tokens = MIN(lim->tokens + add, (uint64_t) EVENT_LIMIT_BURST);
                lim->refill = now;
        }
        if (lim->tokens == 0)
                return false;
        lim->tokens--;
        return true;
}

/* The entry of (source, kind, key), made when missing; key NULL: the
 * source's "other". NULL on OOM or when the table is full. */
static Entry *entry_get(EventLimiter *lim, const char *source, const char *kind, json_t *key) {
        char *k = key ? json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII) : NULL;
        if (key && !k)
                return NULL;
        size_t len = strlen(source) + strlen(kind) + (k ? strlen(k) : 0) + 4;
        char *id = malloc(len);
        if (!id) {
                free(k);
                return NULL;
        }
        snprintf(id, len, "%s\x1f%s\x1f%s", source, kind, k ?: "");
        free(k);
        json_t *at = json_object_get(lim->index, id);
        Entry *e = NULL;
        if (at)
                e = &lim->entries[json_integer_value(at)];
        else if (lim->n < EVENT_LIMIT_KEYS + (key ? 0 : 8)) {
                e = &lim->entries[lim->n];
                *e = (Entry){ .source = strdup(source), .kind = strdup(kind), .key = key ? json_deep_copy(key) : NULL };
                if (!e->source || !e->kind || (key && !e->key) ||
                    json_object_set_new(lim->index, id, json_integer((json_int_t) lim->n)) < 0) {
                        free(e->source);
                        free(e->kind);
                        json_decref(e->key);
                        e = NULL;
                } else
                        lim->n++;
        }
        free(id);
        return e;
}

bool event_limiter_admit(EventLimiter *lim, const char *source, const char *kind, json_t *key, uint64_t dropped,
                         uint64_t now) {
        if (!lim)
                return true;
        Entry *e = entry_get(lim, source, kind, key);
        if (e && e->key && e->full < EVENT_LIMIT_FULL && take_token(lim, now)) {
                e->full++;
                total_add(lim, source, "recorded");
                return true;
        }
        if (!e)
                e = entry_get(lim, source, kind, NULL); /* the table is full */
        if (!e) {
                /* Out of memory: on record in full rather than lost. */
                total_add(lim, source, "recorded");
                return true;
        }
        uint64_t t = realtime_usec();
        if (e->pending == 0)
                e->first = t;
        e->last = t;
        e->pending++;
        e->dropped += dropped;
        total_add(lim, source, "aggregated");
        if (lim->next_flush == UINT64_MAX)
                lim->next_flush = now + EVENT_LIMIT_INTERVAL_USEC;
        return false;
}

uint64_t event_limiter_next(const EventLimiter *lim) {
        return lim ? lim->next_flush : UINT64_MAX;
}

static void format_time(uint64_t usec, char buf[static 40]) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, 40 - n, ".%06uZ", (unsigned) (usec % 1000000));
}

static void emit_entry(EventLog *log, const char *source, const char *kind, json_t *key, uint64_t count,
                       uint64_t dropped, uint64_t first, uint64_t last) {
        char f[40], l[40];
        format_time(first, f);
        format_time(last, l);
        json_t *d = key ? json_deep_copy(key) : json_pack("{s:b}", "other", 1);
        if (!d)
                return;
        json_object_set_new(d, "of", json_string(kind));
        json_object_set_new(d, "count", json_integer((json_int_t) count));
        json_object_set_new(d, "first", json_string(f));
        json_object_set_new(d, "last", json_string(l));
        if (dropped > 0)
                json_object_set_new(d, "dropped", json_integer((json_int_t) dropped));
        event_emit(log, source, "aggregated", NULL, d);
}

void event_limiter_flush(EventLimiter *lim, EventLog *log, uint64_t now, bool force) {
        if (!lim || lim->next_flush == UINT64_MAX || (!force && now < lim->next_flush))
                return;
        /* The first keys each on a record of their own; what is left, and
         * the "other" entries, summed per source and kind. */
        unsigned emitted = 0;
        for (size_t i = 0; i < lim->n; i++) {
                Entry *e = &lim->entries[i];
                if (e->pending == 0 || !e->key || emitted >= EVENT_LIMIT_FLUSH_KEYS)
                        continue;
                emit_entry(log, e->source, e->kind, e->key, e->pending, e->dropped, e->first, e->last);
                e->pending = e->dropped = 0;
                emitted++;
        }
        for (size_t i = 0; i < lim->n; i++) {
                Entry *e = &lim->entries[i];
                if (e->pending == 0)
                        continue;
                uint64_t count = 0, dropped = 0, first = UINT64_MAX, last = 0;
                for (size_t j = i; j < lim->n; j++) {
                        Entry *o = &lim->entries[j];
                        if (o->pending == 0 || !streq(o->source, e->source) || !streq(o->kind, e->kind))
                                continue;
                        count += o->pending;
                        dropped += o->dropped;
                        first = MIN(first, o->first);
                        last = MAX(last, o->last);
                        if (o != e)
                                o->pending = o->dropped = 0;
                }
                emit_entry(log, e->source, e->kind, NULL, count, dropped, first, last);
                e->pending = e->dropped = 0;
        }
        /* A full table forgets its keys: they may come again in full,
         * within the bucket's rate. */
        if (lim->n >= EVENT_LIMIT_KEYS)
                entries_clear(lim);
        lim->next_flush = UINT64_MAX;
}

json_t *event_limiter_totals(const EventLimiter *lim) {
        return lim ? json_deep_copy(lim->totals) : json_object();
}
