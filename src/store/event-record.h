/* SPDX-License-Identifier: MIT */
#pragma once

/* The Domain's event record (issue 19, decision 18): what the agent did and
 * what was stopped. Enforcement never reads it.
 *
 * On disk: <domain>/events/, one JSON object per line, pure ASCII (every
 * other character \u-escaped, so the file is inert even when printed as it
 * is), in segments: events.jsonl is written, events.jsonl.1 .. .N-1 are
 * older; a segment that would grow past its limit is rotated (the oldest
 * falls away), so the record is bounded at segments x segment_max bytes.
 * Rare records (event_kept(): the sandbox's starts and stops, sessions,
 * escalations, the record's own notes, summaries) are not lost with it:
 * before the oldest segment falls away they are appended to kept.jsonl,
 * followed by a "record"/"rotated" record (count, first, last: the others
 * that went; kept, kept_lost); kept.jsonl is itself rotated once past
 * kept_max (kept.jsonl.1, the older one falls away). Readers take the
 * kept segments first: they are older than every other.
 * Each record:
 *   {"time":"2026-12-01T23:59:01.123456Z","seq":N,"generation":G,
 *    "session":"UUID"|null,"source":"...","kind":"...","data":{...}}
 * seq counts the records of one writer (one coordinator), from 1.
 *
 * Writing: one writer per Domain (the coordinator, which holds the Domain
 * Store's lock). event_emit() serializes on the caller's thread and queues
 * the line; a thread of the log's own appends it. The queue is bounded (in
 * records and bytes): a record that does not fit is counted and dropped,
 * and the next one written is preceded by a "record"/"dropped" record
 * with the count. emit never waits on I/O. Strings over a bound are cut
 * (marked), and a record that is still too long keeps its envelope with
 * its data replaced by {"oversized_bytes": N}.
 *
 * Reading: event_reader_open() takes every segment's descriptor at once
 * (a rotation while reading neither skips nor repeats), oldest first, and
 * can follow the current one across rotations. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVENT_DIR           "events"
#define EVENT_FILE          "events.jsonl"
#define EVENT_KEPT_FILE     "kept.jsonl"
#define EVENT_SEGMENT_MAX   (UINT64_C(8) * 1024 * 1024)
#define EVENT_SEGMENTS      4
#define EVENT_QUEUE_RECORDS 16384
#define EVENT_QUEUE_BYTES   (4u * 1024u * 1024u)
#define EVENT_LINE_MAX      (16u * 1024u)
#define EVENT_STRING_MAX    2048u /* bytes of one string kept in a record */
#define EVENT_KEPT_MAX      (UINT64_C(8) * 1024 * 1024)

typedef struct EventLimits {
        uint64_t segment_max;
        unsigned segments; /* 2 or more */
        size_t queue_records, queue_bytes;
        uint64_t kept_max; /* 0: segment_max */
} EventLimits;

/* Whether records of this source and kind are kept when their segment
 * falls away: those the agent cannot make at will. */
bool event_kept(const char *source, const char *kind);

typedef struct EventLog EventLog;

/* Make (0700) or open <domain_dir>/events and its current segment (0600,
 * a regular file, never through a symlink) and start the writer. lim NULL:
 * the defaults above. */
int event_log_open(const char *domain_dir, const EventLimits *lim, EventLog **ret);
/* s (len bytes) as a JSON string: valid UTF-8 as it is, every byte that is
 * not part of one as the four characters \xNN, NUL as \x00. NULL on OOM. */
json_t *event_string(const char *s, size_t len);
/* The same for a C string (NULL: JSON null). */
json_t *event_str(const char *s);
/* A long C string (UTF-8) as event_emit keeps it, cut to EVENT_STRING_MAX
 * bytes as it would cut it, without a copy of the whole first (a network
 * policy of 10,000 prefixes is 260 KB). NULL s: JSON null. */
json_t *event_str_cut(const char *s);

/* The generation stamped on records queued from now on. */
void event_log_set_generation(EventLog *l, uint64_t generation);
/* Queue one record; data (taken; NULL for none) must be an object.
 * session NULL: none. Returns false when it was dropped (or l is NULL). */
bool event_emit(EventLog *l, const char *source, const char *kind, const char *session, json_t *data);
typedef struct EventCounts {
        uint64_t queued, written, dropped, write_errors;
        char path[4096]; /* the current segment */
} EventCounts;
void event_log_counts(EventLog *l, EventCounts *ret);
/* Write what is queued, stop the writer, close. Returns NULL. */
EventLog *event_log_close(EventLog *l);

/* "2026-12-01T23:59:01.123456Z" (or without the fraction) as microseconds
 * since the epoch; -EINVAL when it is not that. */
int event_time_parse(const char *s, uint64_t *ret_usec);
/* A user's --since: an RFC 3339 time in UTC as above (also with a space for
 * the T, without seconds, or a date alone), or a duration before now:
 * N followed by s, m, h or d. */
int event_since_parse(const char *s, uint64_t now_usec, uint64_t *ret_usec);

typedef struct EventReader EventReader;
/* Take the segments of <domain_dir>/events, oldest first. -ENOENT when
 * there is no record yet. */
int event_reader_open(const char *domain_dir, EventReader **ret);
/* The next record: 1 and *ret (caller's reference), 0 at the end of what is
 * written so far, <0 on error. Lines that are not JSON objects are skipped
 * and counted (event_reader_skipped). With follow, a later call returns
 * what was appended since, across rotations. */
int event_reader_next(EventReader *r, bool follow, json_t **ret);
uint64_t event_reader_skipped(const EventReader *r);
/* Read on from the last `bytes` bytes of the current segment only (the
 * first, partial line skipped): the latest records, without reading the
 * whole record. */
int event_reader_seek_tail(EventReader *r, uint64_t bytes);
EventReader *event_reader_close(EventReader *r);
