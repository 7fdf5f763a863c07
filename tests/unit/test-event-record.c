/* SPDX-License-Identifier: MIT */
/* Unit tests of src/store/event-record: the Domain's event record, its
 * bounded queue, its rotation, its reader and its times. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "event-limit.h"
#include "event-record.h"

static char *tmpdir(void) {
        char *d = strdup("/tmp/test-event-record-XXXXXX");
        assert_non_null(d);
        assert_non_null(mkdtemp(d));
        return d;
}

static void rmtree(const char *d) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
        assert_int_equal(system(cmd), 0);
}

/* Every record of the Domain, oldest first, as an array. */
static json_t *read_all(const char *dir, uint64_t *ret_skipped) {
        EventReader *r = NULL;
        assert_int_equal(event_reader_open(dir, &r), 0);
        json_t *all = json_array(), *j;
        int k;
        while ((k = event_reader_next(r, false, &j)) == 1)
                json_array_append_new(all, j);
        assert_int_equal(k, 0);
        if (ret_skipped)
                *ret_skipped = event_reader_skipped(r);
        event_reader_close(r);
        return all;
}

static void test_round_trip(void **state) {
        (void) state;
        char *d = tmpdir();
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, NULL, &l), 0);
        event_log_set_generation(l, 7);
        assert_true(event_emit(l, "session", "started", "0123", json_pack("{s:s}", "argv0", "sh")));
        /* A string the agent chose: escapes, bidi marks, a NUL. */
        json_t *evil = json_object();
        json_object_set_new(evil, "host",
                            json_stringn("a\x1b[2J\xe2\x80\xae"
                                         "b\0c",
                                         10));
        assert_true(event_emit(l, "network", "connection", NULL, evil));
        assert_true(event_emit(l, "record", "plain", NULL, NULL));
        assert_false(event_emit(l, "x", "y", NULL, json_array())); /* data must be an object */
        l = event_log_close(l);

        /* The file is pure ASCII with no control character but newlines. */
        char path[512];
        snprintf(path, sizeof(path), "%s/events/events.jsonl", d);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        int ch, lines = 0;
        while ((ch = fgetc(f)) != EOF) {
                assert_true(ch == '\n' || (ch >= 0x20 && ch < 0x7f));
                lines += ch == '\n';
        }
        fclose(f);
        assert_int_equal(lines, 3);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);

        json_t *all = read_all(d, NULL);
        assert_int_equal(json_array_size(all), 3);
        json_t *a = json_array_get(all, 0), *b = json_array_get(all, 1);
        assert_string_equal(json_string_value(json_object_get(a, "source")), "session");
        assert_string_equal(json_string_value(json_object_get(a, "kind")), "started");
        assert_string_equal(json_string_value(json_object_get(a, "session")), "0123");
        assert_int_equal(json_integer_value(json_object_get(a, "generation")), 7);
        assert_int_equal(json_integer_value(json_object_get(a, "seq")), 1);
        assert_int_equal(json_integer_value(json_object_get(b, "seq")), 2);
        assert_true(json_is_null(json_object_get(b, "session")));
        json_t *host = json_object_get(json_object_get(b, "data"), "host");
        assert_int_equal(json_string_length(host), 10);
        assert_memory_equal(json_string_value(host),
                            "a\x1b[2J\xe2\x80\xae"
                            "b\0c",
                            10);
        uint64_t t;
        assert_int_equal(event_time_parse(json_string_value(json_object_get(a, "time")), &t), 0);
        assert_true(t > UINT64_C(1700000000) * 1000000);
        json_decref(all);
        rmtree(d);
        free(d);
}

/* A queue of four records: a flood is counted, never kept, and the count
 * goes on record before the next one written. */
static void test_bounded_queue(void **state) {
        (void) state;
        char *d = tmpdir();
        EventLimits lim = { .segment_max = 1 << 26, .segments = 2, .queue_records = 4, .queue_bytes = 1 << 20 };
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, &lim, &l), 0);
        unsigned ok = 0, dropped = 0;
        for (unsigned i = 0; i < 100000; i++) {
                if (event_emit(l, "git", "refused", NULL, json_pack("{s:i}", "i", (int) i)))
                        ok++;
                else
                        dropped++;
        }
        EventCounts c;
        event_log_counts(l, &c);
        assert_int_equal(c.dropped, dropped);
        assert_true(dropped > 0); /* the writer cannot keep pace with this loop */
        assert_true(strstr(c.path, "/events/events.jsonl") != NULL);
        l = event_log_close(l);

        json_t *all = read_all(d, NULL);
        uint64_t records = 0, reported = 0, last_seq = 0;
        json_t *ev;
        size_t i;
        json_array_foreach(all, i, ev) {
                uint64_t seq = (uint64_t) json_integer_value(json_object_get(ev, "seq"));
                assert_int_equal(seq, last_seq + 1); /* no gap in what was written */
                last_seq = seq;
                if (strcmp(json_string_value(json_object_get(ev, "kind")), "dropped") == 0)
                        reported +=
                                (uint64_t) json_integer_value(json_object_get(json_object_get(ev, "data"), "count"));
                else
                        records++;
        }
        assert_int_equal(records, ok);
        assert_int_equal(reported, dropped);
        json_decref(all);
        rmtree(d);
        free(d);
}

/* Segments of 4 KiB, three of them: the record stays bounded, the reader
 * gets the newest records in order, and the oldest fall away. */
static void test_rotation(void **state) {
        (void) state;
        char *d = tmpdir();
        EventLimits lim = { .segment_max = 4096, .segments = 3, .queue_records = 1 << 20, .queue_bytes = 1 << 28 };
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, &lim, &l), 0);
        for (int i = 0; i < 1000; i++)
                assert_true(event_emit(l, "t", "n", NULL, json_pack("{s:i}", "i", i)));
        l = event_log_close(l);
        char p[512];
        uint64_t total = 0;
        for (int i = 0; i < 4; i++) {
                if (i == 0)
                        snprintf(p, sizeof(p), "%s/events/events.jsonl", d);
                else
                        snprintf(p, sizeof(p), "%s/events/events.jsonl.%d", d, i);
                struct stat st;
                int r = stat(p, &st);
                if (i == 3) {
                        assert_int_equal(r, -1); /* only three segments */
                        continue;
                }
                assert_int_equal(r, 0);
                assert_true(st.st_size <= 4096);
                total += (uint64_t) st.st_size;
        }
        assert_true(total <= 3 * 4096);
        json_t *all = read_all(d, NULL);
        /* First what the segments that fell away left: their notes. */
        json_int_t gone = 0;
        size_t notes = 0;
        while (notes < json_array_size(all)) {
                json_t *e = json_array_get(all, notes);
                if (strcmp(json_string_value(json_object_get(e, "source")), "record") != 0)
                        break;
                assert_string_equal(json_string_value(json_object_get(e, "kind")), "rotated");
                gone += json_integer_value(json_object_get(json_object_get(e, "data"), "count"));
                notes++;
        }
        size_t n = json_array_size(all) - notes;
        assert_true(notes > 0 && n > 20 && n < 1000);
        assert_int_equal(gone + (json_int_t) n, 1000);
        for (size_t i = 0; i < n; i++) {
                json_t *data = json_object_get(json_array_get(all, notes + i), "data");
                assert_int_equal(json_integer_value(json_object_get(data, "i")), (json_int_t) (1000 - n + i));
        }
        json_decref(all);
        rmtree(d);
        free(d);
}

/* Issue 41: a flood of records the agent can make (refusals) rotates
 * every segment, yet the rare ones written before it (a session, an
 * escalation request) are still there, in order, before the flood's
 * survivors, with notes saying how many records went and when. */
static void test_rare_records_survive_a_flood(void **state) {
        (void) state;
        char *d = tmpdir();
        EventLimits lim = { .segment_max = 4096, .segments = 2, .queue_records = 1 << 20, .queue_bytes = 1 << 28 };
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, &lim, &l), 0);
        assert_true(event_emit(l, "sandbox", "started", NULL, NULL));
        assert_true(event_emit(l, "session", "started", "s1", json_pack("{s:s}", "cwd", "/workspace")));
        assert_true(event_emit(l, "paths", "refused", NULL, json_pack("{s:s}", "path", "before")));
        assert_true(event_emit(l, "escalation", "requested", "s1", json_pack("{s:s}", "request_id", "r1")));
        for (int i = 0; i < 5000; i++)
                assert_true(event_emit(l, "network", "connection", NULL, json_pack("{s:i}", "i", i)));
        assert_true(event_emit(l, "network", "summary", NULL, json_pack("{s:i}", "total", 5000)));
        for (int i = 0; i < 5000; i++)
                assert_true(event_emit(l, "network", "connection", NULL, json_pack("{s:i}", "i", i)));
        l = event_log_close(l);

        json_t *all = read_all(d, NULL);
        /* The kept ones first, in order; the first flood's note between
         * the escalation and the summary. */
        const char *want[] = { "sandbox", "session", "escalation", "record", "network", "record" };
        for (size_t i = 0; i < 6; i++)
                assert_string_equal(json_string_value(json_object_get(json_array_get(all, i), "source")), want[i]);
        assert_string_equal(json_string_value(json_object_get(json_array_get(all, 4), "kind")), "summary");
        json_int_t gone = 0, connections = 0;
        bool before = false;
        size_t i;
        json_t *e;
        json_array_foreach(all, i, e) {
                const char *src = json_string_value(json_object_get(e, "source"));
                json_t *data = json_object_get(e, "data");
                if (strcmp(src, "record") == 0) {
                        assert_string_equal(json_string_value(json_object_get(e, "kind")), "rotated");
                        assert_non_null(json_string_value(json_object_get(data, "first")));
                        assert_int_equal(json_integer_value(json_object_get(data, "kept_lost")), 0);
                        gone += json_integer_value(json_object_get(data, "count"));
                } else if (strcmp(src, "network") == 0 &&
                           strcmp(json_string_value(json_object_get(e, "kind")), "connection") == 0)
                        connections++;
                else if (strcmp(src, "paths") == 0)
                        before = true;
        }
        assert_false(before); /* a refusal is not kept: its count is */
        assert_int_equal(gone + connections, 10001);
        json_decref(all);

        /* The kept segment is bounded too. */
        struct stat st;
        char p[512];
        snprintf(p, sizeof(p), "%s/events/kept.jsonl", d);
        assert_int_equal(stat(p, &st), 0);
        assert_true(st.st_size <= 4096);
        rmtree(d);
        free(d);
}

/* Long strings are cut; a record that is still too long keeps its
 * envelope. */
static void test_long_strings(void **state) {
        (void) state;
        char *d = tmpdir();
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, NULL, &l), 0);
        char *big = malloc(100000);
        assert_non_null(big);
        memset(big, 'x', 99999);
        big[99999] = '\0';
        assert_true(event_emit(l, "s", "long", NULL, json_pack("{s:s}", "cmd", big)));
        /* Cut before (event_str_cut): the same record. A short one whole. */
        assert_true(event_emit(l, "s", "long", NULL, json_pack("{s:o}", "cmd", event_str_cut(big))));
        json_t *cut = event_str_cut(big);
        assert_true(json_string_length(cut) <= EVENT_STRING_MAX);
        assert_non_null(strstr(json_string_value(cut), "(cut, 99999 bytes)"));
        json_decref(cut);
        json_t *whole = event_str_cut("short");
        assert_string_equal(json_string_value(whole), "short");
        json_decref(whole);
        json_t *many = json_array();
        for (int i = 0; i < 100; i++)
                json_array_append_new(many, json_string(big));
        assert_true(event_emit(l, "s", "many", NULL, json_pack("{s:o}", "argv", many)));
        free(big);
        l = event_log_close(l);
        json_t *all = read_all(d, NULL);
        assert_int_equal(json_array_size(all), 3);
        const char *cmd = json_string_value(json_object_get(json_object_get(json_array_get(all, 0), "data"), "cmd"));
        assert_true(strlen(cmd) <= EVENT_STRING_MAX);
        assert_non_null(strstr(cmd, "(cut, 99999 bytes)"));
        assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(all, 1), "data"), "cmd")),
                            cmd);
        json_t *d2 = json_object_get(json_array_get(all, 2), "data");
        assert_true(json_integer_value(json_object_get(d2, "oversized_bytes")) > EVENT_LINE_MAX);
        assert_string_equal(json_string_value(json_object_get(json_array_get(all, 2), "kind")), "many");
        json_decref(all);
        rmtree(d);
        free(d);
}

/* The reader skips what is not a record, refuses a symlinked directory,
 * and follows the current segment across a rotation. */
static void test_reader(void **state) {
        (void) state;
        char *d = tmpdir();
        EventReader *r = NULL;
        assert_int_equal(event_reader_open(d, &r), -ENOENT);

        EventLimits lim = { .segment_max = 500, .segments = 2, .queue_records = 100, .queue_bytes = 1 << 20 };
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, &lim, &l), 0);
        assert_true(event_emit(l, "a", "one", NULL, NULL));
        l = event_log_close(l);
        char p[512];
        snprintf(p, sizeof(p), "%s/events/events.jsonl", d);
        FILE *f = fopen(p, "a");
        assert_non_null(f);
        fputs("not json\n[1,2]\n", f);
        fclose(f);

        assert_int_equal(event_reader_open(d, &r), 0);
        json_t *j;
        assert_int_equal(event_reader_next(r, true, &j), 1);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "one");
        json_decref(j);
        assert_int_equal(event_reader_next(r, true, &j), 0);
        assert_int_equal(event_reader_skipped(r), 2);

        /* Appended and rotated while the reader follows. */
        assert_int_equal(event_log_open(d, &lim, &l), 0);
        for (int i = 0; i < 6; i++)
                assert_true(event_emit(l, "a", "more", NULL, json_pack("{s:i}", "i", i)));
        l = event_log_close(l);
        int seen = 0, k;
        while ((k = event_reader_next(r, true, &j)) == 1) {
                assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "data"), "i")), seen);
                seen++;
                json_decref(j);
        }
        assert_int_equal(k, 0);
        assert_int_equal(seen, 6);
        event_reader_close(r);

        /* events/ as a symlink: neither written nor read through. */
        char *d2 = tmpdir(), link[512];
        snprintf(link, sizeof(link), "%s/events", d2);
        assert_int_equal(symlink(d, link), 0);
        assert_int_equal(event_log_open(d2, NULL, &l), -ENOTDIR);
        assert_int_equal(event_reader_open(d2, &r), -ENOTDIR);
        /* A planted symlink as the current segment: refused. */
        char *d3 = tmpdir(), sub[512], tgt[512];
        snprintf(sub, sizeof(sub), "%s/events", d3);
        assert_int_equal(mkdir(sub, 0700), 0);
        snprintf(link, sizeof(link), "%s/events/events.jsonl", d3);
        snprintf(tgt, sizeof(tgt), "%s/target", d3);
        assert_int_equal(symlink(tgt, link), 0);
        assert_int_equal(event_log_open(d3, NULL, &l), -ELOOP);
        struct stat st;
        assert_int_equal(stat(tgt, &st), -1);
        rmtree(d);
        rmtree(d2);
        rmtree(d3);
        free(d);
        free(d2);
        free(d3);
}

/* Bytes that are not UTF-8 (and NUL) become \xNN text; valid UTF-8
 * stays. */
static void test_event_string(void **state) {
        (void) state;
        json_t *j = event_string("caf\xe9\xff \xc3\xa9\0x\xed\xa0\x80\xf0\x9f\x98\x80", 17);
        assert_non_null(j);
        assert_string_equal(json_string_value(j), "caf\\xe9\\xff \xc3\xa9\\x00x\\xed\\xa0\\x80\xf0\x9f\x98\x80");
        json_decref(j);
        j = event_str(NULL);
        assert_true(json_is_null(j));
        json_decref(j);
        j = event_str("");
        assert_string_equal(json_string_value(j), "");
        json_decref(j);
}

static void test_times(void **state) {
        (void) state;
        uint64_t t;
        assert_int_equal(event_time_parse("1970-01-01T00:00:01Z", &t), 0);
        assert_int_equal(t, 1000000);
        assert_int_equal(event_time_parse("2026-12-01T23:59:01.123456Z", &t), 0);
        assert_int_equal(t, UINT64_C(1796169541123456));
        assert_int_equal(event_time_parse("2026-12-01T23:59:01.5Z", &t), 0);
        assert_int_equal(t % 1000000, 500000);
        assert_int_equal(event_time_parse("2026-12-01 23:59:01Z", &t), -EINVAL);
        assert_int_equal(event_time_parse("2026-12-01T23:59Z", &t), -EINVAL);
        assert_int_equal(event_time_parse("2026-13-01T00:00:00Z", &t), -EINVAL);
        assert_int_equal(event_time_parse("2026-12-01T00:00:00Zjunk", &t), -EINVAL);
        assert_int_equal(event_time_parse("", &t), -EINVAL);

        uint64_t now = UINT64_C(1796169541000000);
        assert_int_equal(event_since_parse("90s", now, &t), 0);
        assert_int_equal(t, now - 90000000);
        assert_int_equal(event_since_parse("2h", now, &t), 0);
        assert_int_equal(t, now - UINT64_C(7200000000));
        assert_int_equal(event_since_parse("1d", now, &t), 0);
        assert_int_equal(t, now - UINT64_C(86400000000));
        assert_int_equal(event_since_parse("2026-12-01", now, &t), 0);
        assert_int_equal(t, UINT64_C(1796083200000000));
        assert_int_equal(event_since_parse("2026-12-01 23:59", now, &t), 0);
        assert_int_equal(t, UINT64_C(1796169540000000));
        assert_int_equal(event_since_parse("99999999999d", now, &t), -EINVAL);
        assert_int_equal(event_since_parse("h", now, &t), -EINVAL);
        assert_int_equal(event_since_parse("-5m", now, &t), -EINVAL);
        assert_int_equal(event_since_parse("yesterday", now, &t), -EINVAL);
}

/* Issue 41: refusals per key, the first few in full, then counted and
 * put on record as one "aggregated" record per key; many keys are held to
 * the bucket's rate; the totals say what was done. */
static void test_limiter(void **state) {
        (void) state;
        char *d = tmpdir();
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, NULL, &l), 0);
        uint64_t now = 1000000;
        EventLimiter *lim = event_limiter_new(now);
        assert_non_null(lim);
        json_t *key = json_pack("{s:s, s:i}", "host", "evil.example", "port", 443);
        unsigned full = 0;
        for (int i = 0; i < 1000; i++)
                full += event_limiter_admit(lim, "network", "connection", key, i == 500 ? 7 : 0, now);
        assert_int_equal(full, EVENT_LIMIT_FULL);
        assert_int_equal(event_limiter_next(lim), now + EVENT_LIMIT_INTERVAL_USEC);
        event_limiter_flush(lim, l, now + 1, false); /* not due yet */
        /* Distinct paths: the bucket, not the keys, bounds them. */
        full = 0;
        for (int i = 0; i < 1000; i++) {
                json_t *k = json_pack("{s:s, s:i}", "path", "p", "i", i);
                full += event_limiter_admit(lim, "paths", "refused", k, 0, now);
                json_decref(k);
        }
        assert_int_equal(full, EVENT_LIMIT_BURST - EVENT_LIMIT_FULL);
        /* A second later, the rate's worth again. */
        json_t *k2 = json_pack("{s:s}", "path", "later");
        assert_true(event_limiter_admit(lim, "paths", "refused", k2, 0, now + 1000000));
        json_decref(k2);
        event_limiter_flush(lim, l, now + EVENT_LIMIT_INTERVAL_USEC, false);
        assert_int_equal(event_limiter_next(lim), UINT64_MAX);
        json_t *totals = event_limiter_totals(lim);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(totals, "network"), "aggregated")), 995);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(totals, "paths"), "recorded")),
                         EVENT_LIMIT_BURST - EVENT_LIMIT_FULL + 1);
        json_decref(totals);
        lim = event_limiter_free(lim);
        json_decref(key);
        l = event_log_close(l);

        json_t *all = read_all(d, NULL);
        json_int_t net = 0, paths = 0, dropped = 0;
        size_t records = 0, i;
        json_t *e;
        json_array_foreach(all, i, e) {
                json_t *data = json_object_get(e, "data");
                assert_string_equal(json_string_value(json_object_get(e, "kind")), "aggregated");
                records++;
                if (strcmp(json_string_value(json_object_get(e, "source")), "network") == 0) {
                        assert_string_equal(json_string_value(json_object_get(data, "host")), "evil.example");
                        assert_string_equal(json_string_value(json_object_get(data, "of")), "connection");
                        net += json_integer_value(json_object_get(data, "count"));
                        dropped += json_integer_value(json_object_get(data, "dropped"));
                } else
                        paths += json_integer_value(json_object_get(data, "count"));
        }
        assert_int_equal(net, 995);
        assert_int_equal(dropped, 7);
        assert_int_equal(paths, 1000 - (EVENT_LIMIT_BURST - EVENT_LIMIT_FULL));
        /* Bounded: the first keys each, the rest in one. */
        assert_true(records <= EVENT_LIMIT_FLUSH_KEYS + 2);
        json_decref(all);
        rmtree(d);
        free(d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),   cmocka_unit_test(test_bounded_queue),
                cmocka_unit_test(test_rotation),     cmocka_unit_test(test_long_strings),
                cmocka_unit_test(test_reader),       cmocka_unit_test(test_times),
                cmocka_unit_test(test_event_string), cmocka_unit_test(test_rare_records_survive_a_flood),
                cmocka_unit_test(test_limiter),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
