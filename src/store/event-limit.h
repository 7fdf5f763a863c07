/* SPDX-License-Identifier: MIT */
#pragma once

/* Records the agent can make at will (the broker's refusals, the git and
 * workspace routers' refusals), aggregated per key and rate-limited before
 * they reach the event record (issue 41): a flood costs the record a few
 * lines a second, not its history.
 *
 * Per key (source, kind and the fields that name what was refused: a
 * destination, a path) the first EVENT_LIMIT_FULL go on record in full,
 * while the limiter's bucket has tokens (EVENT_LIMIT_RATE a second after a
 * burst of EVENT_LIMIT_BURST, over all keys); the rest are counted on
 * their key. Every EVENT_LIMIT_INTERVAL_USEC (and at the run's end) the
 * counts go on record as <source>/"aggregated" records: the key's fields,
 * "of" (the kind), "count", "first" and "last" (times), "dropped" (the
 * helper's own drop counts that rode on them); at most
 * EVENT_LIMIT_FLUSH_KEYS keys each time, the rest summed in one record
 * per source with "other": true. At most EVENT_LIMIT_KEYS keys are told
 * apart; past that, new ones count as "other" until the next flush forgets
 * the quiet ones. Single-threaded (the coordinator's loop). */

#include <stdbool.h>
#include <stdint.h>

#include "event-record.h"

#define EVENT_LIMIT_FULL          5u
#define EVENT_LIMIT_RATE          20u
#define EVENT_LIMIT_BURST         200u
#define EVENT_LIMIT_INTERVAL_USEC (UINT64_C(10) * 1000000)
#define EVENT_LIMIT_FLUSH_KEYS    64u
#define EVENT_LIMIT_KEYS          1024u

typedef struct EventLimiter EventLimiter;

/* NULL on OOM. now: microseconds, any monotonic clock the caller keeps. */
EventLimiter *event_limiter_new(uint64_t now);
EventLimiter *event_limiter_free(EventLimiter *lim);

/* One record of source/kind with key (an object of what names it;
 * borrowed): true when the caller should emit it in full, false when it
 * was counted. dropped: the helper's own drop count riding on it (kept on
 * the key when counted). NULL lim: always true. */
bool event_limiter_admit(EventLimiter *lim, const char *source, const char *kind, json_t *key, uint64_t dropped,
                         uint64_t now);

/* Put the counts on record when the interval went by (force: now). */
void event_limiter_flush(EventLimiter *lim, EventLog *log, uint64_t now, bool force);
/* When the next flush is due (UINT64_MAX: nothing counted). */
uint64_t event_limiter_next(const EventLimiter *lim);

/* The run's totals: {"SOURCE": {"recorded": N, "aggregated": N}, ...}
 * (new reference; NULL on OOM). */
json_t *event_limiter_totals(const EventLimiter *lim);
