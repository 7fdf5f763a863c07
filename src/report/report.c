/* SPDX-License-Identifier: MIT */
/* The report's model (report.h): one pass over the event record. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lazaret-build.h"
#include "fd-util.h"
#include "macro.h"
#include "prompt-text.h"
#include "report.h"
#include "string-util.h"

static const char *const format_names[_REPORT_FORMAT_MAX] = {
        [REPORT_MD] = "md",       [REPORT_HTML] = "html",   [REPORT_JSON] = "json",
        [REPORT_JSONL] = "jsonl", [REPORT_SARIF] = "sarif",
};

const char *report_format_to_string(ReportFormat f) {
        return f >= 0 && f < _REPORT_FORMAT_MAX ? format_names[f] : NULL;
}

ReportFormat report_format_from_string(const char *s) {
        for (ReportFormat f = 0; s && f < _REPORT_FORMAT_MAX; f++)
                if (streq(s, format_names[f]))
                        return f;
        return _REPORT_FORMAT_INVALID;
}

const char *report_format_extension(ReportFormat f) {
        return report_format_to_string(f);
}

char *report_text(const char *s, size_t len, TextEscape how) {
        StrBuf b = STRBUF_INIT;
        strbuf_puts(&b, "");
        for (size_t i = 0; i < len;) {
                PromptUnit u;
                i += prompt_unit(s + i, len - i, &u);
                for (const char *t = u.text; *t; t++) {
                        char c = *t;
                        if (how == TEXT_HTML && strchr("&<>\"'", c)) {
                                strbuf_puts(&b, c == '&'   ? "&amp;"
                                                : c == '<' ? "&lt;"
                                                : c == '>' ? "&gt;"
                                                : c == '"' ? "&quot;"
                                                           : "&#39;");
                                continue;
                        }
                        /* GFM splits a table row at every pipe not escaped,
                         * code spans included (a backslash before it is
                         * removed there). Every backslash of the visible
                         * text is doubled, so this one is never paired. */
                        if (how == TEXT_MARKDOWN_CELL && c == '|')
                                strbuf_putc(&b, '\\');
                        strbuf_putc(&b, c);
                }
        }
        if (b.oom || (how != TEXT_MARKDOWN && how != TEXT_MARKDOWN_CELL) || b.len == 0)
                return strbuf_steal(&b);
        /* A Markdown code span: nothing in it is a link, an autolink, HTML
         * or emphasis. Its fence is one backtick longer than the longest
         * run inside, and a space each side keeps a backtick at either
         * end from joining it (one space each side is taken off). */
        size_t run = 0, longest = 0;
        for (size_t i = 0; i < b.len; i++) {
                run = b.data[i] == '`' ? run + 1 : 0;
                if (run > longest)
                        longest = run;
        }
        StrBuf o = STRBUF_INIT;
        for (size_t i = 0; i <= longest; i++)
                strbuf_putc(&o, '`');
        strbuf_putc(&o, ' ');
        strbuf_putn(&o, b.data, b.len);
        strbuf_putc(&o, ' ');
        for (size_t i = 0; i <= longest; i++)
                strbuf_putc(&o, '`');
        strbuf_done(&b);
        return strbuf_steal(&o);
}

/* ---- the model ---- */

typedef struct Build {
        const ReportMeta *meta;
        json_t *model, *sandboxes; /* the array in model */
        json_t *by_gen; /* "G" -> sandbox object (borrowed from sandboxes) */
        json_t *by_session; /* id -> session object */
        json_t *by_request; /* request id -> escalation object */
        json_t *net_index, *ref_index; /* "G\x1fkey" -> entry object */
        unsigned open_matched; /* sessions matching meta->session now open */
        uint64_t records, dropped, aggregated, rotated;
        const char *first, *last; /* times (kept alive by the copies in model) */
        char first_buf[40], last_buf[40];
} Build;

static bool session_matches(const Build *b, const char *id) {
        return !b->meta->session || (id && startswith(id, b->meta->session));
}

/* The processes a session started (or, on a run, those of no session):
 * how many, the first REPORT_PROCESS_MAX. A run's also counts the execs
 * the coordinator did not record (over its rate), of whichever session:
 * the count rides on the next record, which may be another session's. */
static json_t *processes_new(bool run) {
        return run ? json_pack("{s:i, s:i, s:[], s:i}", "count", 0, "not_recorded", 0, "list", "omitted", 0)
                   : json_pack("{s:i, s:[], s:i}", "count", 0, "list", "omitted", 0);
}

static json_t *sandbox_for(Build *b, json_int_t gen) {
        char key[32];
        snprintf(key, sizeof(key), "%" PRIi64, (int64_t) gen);
        json_t *s = json_object_get(b->by_gen, key);
        if (s)
                return s;
        s = json_pack("{s:I, s:n, s:n, s:n, s:n, s:n, s:n, s:n, s:n, s:[], s:[], s:[], s:{s:i, s:i}, s:o}",
                      "generation", gen, "started", "stopped", "image", "network_policy", "worktree", "workspace",
                      "stop_reason", "start_failed", "sessions", "network", "refusals", "omitted", "network", 0,
                      "refusals", 0, "processes", processes_new(true));
        if (!s || json_array_append_new(b->sandboxes, s) < 0 || json_object_set(b->by_gen, key, s) < 0)
                return NULL;
        return s;
}

static void set_copy(json_t *to, const char *key, json_t *from, const char *from_key) {
        json_t *v = json_object_get(from, from_key ?: key);
        if (v && !json_is_null(v))
                json_object_set(to, key, v);
}

static void add_int(json_t *o, const char *key, json_t *v) {
        json_t *old = json_object_get(o, key);
        if (json_is_integer(v) && json_is_integer(old))
                json_integer_set(old, json_integer_value(old) + json_integer_value(v));
}

/* The entry of a sandbox's network or refusal list under key, or NULL
 * when there is none yet (*ret_room: whether one may be made: at most
 * REPORT_DISTINCT_MAX per list; beyond, counted as omitted). Looked up
 * before anything is built: most records repeat an entry. */
static json_t *entry_find(json_t *sb, json_t *index, const char *list, const char *key, bool *ret_room) {
        json_t *e = json_object_get(index, key);
        *ret_room = false;
        if (e)
                return e;
        if (json_array_size(json_object_get(sb, list)) < REPORT_DISTINCT_MAX) {
                *ret_room = true;
                return NULL;
        }
        json_t *om = json_object_get(sb, "omitted");
        json_t *n = json_object_get(om, list);
        if (json_is_integer(n))
                json_integer_set(n, json_integer_value(n) + 1);
        return NULL;
}

static json_t *entry_add(json_t *sb, json_t *index, const char *list, const char *key, json_t *fresh) {
        if (!fresh || json_array_append_new(json_object_get(sb, list), fresh) < 0 ||
            json_object_set(index, key, fresh) < 0)
                return NULL;
        return fresh;
}

/* n occurrences (an "aggregated" record stands for its count). */
static void seen(json_t *e, json_t *time, json_int_t k) {
        json_t *n = json_object_get(e, "count");
        if (json_is_integer(n))
                json_integer_set(n, json_integer_value(n) + k);
        if (json_is_null(json_object_get(e, "first")))
                json_object_set(e, "first", time);
        json_object_set(e, "last", time);
}

static void on_network(Build *b, json_t *sb, json_int_t gen, json_t *d, json_t *time, json_int_t count) {
        /* The launch's own proof of egress by name, before any session. */
        if (json_is_true(json_object_get(d, "probe")))
                return;
        const char *verdict = json_string_value(json_object_get(d, "verdict")) ?: "?";
        const char *host = json_string_value(json_object_get(d, "host"));
        json_int_t port = json_integer_value(json_object_get(d, "port"));
        const char *reason = json_string_value(json_object_get(d, "reason"));
        char key[1024];
        snprintf(key, sizeof(key), "%" PRIi64 "\x1f%s\x1f%s\x1f%" PRIi64 "\x1f%s", (int64_t) gen, verdict, host ?: "",
                 (int64_t) port, reason ?: "");
        bool room;
        json_t *e = entry_find(sb, b->net_index, "network", key, &room);
        if (!e && room)
                e = entry_add(sb, b->net_index, "network", key,
                              json_pack("{s:s, s:s?, s:O?, s:s?, s:s?, s:s?, s:i, s:n, s:n, s:i, s:i}", "verdict",
                                        verdict, "host", host, "port", json_object_get(d, "port"), "name",
                                        json_string_value(json_object_get(d, "name")), "reason", reason, "message",
                                        json_string_value(json_object_get(d, "message")), "count", 0, "first", "last",
                                        "bytes_out", 0, "bytes_in", 0));
        if (!e)
                return;
        seen(e, time, count);
        add_int(e, "bytes_out", json_object_get(d, "bytes_out"));
        add_int(e, "bytes_in", json_object_get(d, "bytes_in"));
        const char *name = json_string_value(json_object_get(d, "name"));
        if (name && !json_is_string(json_object_get(e, "name")))
                json_object_set_new(e, "name", json_string(name));
}

static void on_refusal(Build *b, json_t *sb, json_int_t gen, const char *source, json_t *d, json_t *time,
                       json_int_t count) {
        const char *rule = json_string_value(json_object_get(d, "rule")) ?: source;
        const char *op = json_string_value(json_object_get(d, "op")) ?: "?";
        const char *path = json_string_value(json_object_get(d, "path")) ?: "";
        const char *err = json_string_value(json_object_get(d, "errno")) ?: "";
        char key[4096];
        snprintf(key, sizeof(key), "%" PRIi64 "\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", (int64_t) gen, source, rule, op, path,
                 err);
        bool room;
        json_t *e = entry_find(sb, b->ref_index, "refusals", key, &room);
        if (!e && room)
                e = entry_add(sb, b->ref_index, "refusals", key,
                              json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:n, s:n}", "source", source, "rule", rule,
                                        "op", op, "path", path, "errno", err, "count", 0, "first", "last"));
        if (e)
                seen(e, time, count);
}

static json_t *session_for(Build *b, json_t *sb, const char *id, json_t *time) {
        json_t *s = json_object_get(b->by_session, id);
        if (s)
                return s;
        /* Its start fell out of the record (rotated away): what is left. */
        s = json_pack("{s:s, s:O, s:n, s:n, s:[], s:n, s:n, s:n, s:n, s:n, s:n, s:n, s:[], s:n, s:o}", "id", id,
                      "started", time, "ended", "user", "argv", "cwd", "terminal", "outcome", "exit_code", "signal",
                      "duration_ms", "message", "escalations", "files", "processes", processes_new(false));
        if (!s || json_array_append_new(json_object_get(sb, "sessions"), s) < 0 ||
            json_object_set(b->by_session, id, s) < 0)
                return NULL;
        return s;
}

static void on_session(Build *b, json_t *sb, const char *kind, const char *id, json_t *d, json_t *time) {
        if (!id || !session_matches(b, id))
                return;
        json_t *s = session_for(b, sb, id, time);
        if (!s)
                return;
        if (streq(kind, "started")) {
                json_object_set(s, "started", time);
                set_copy(s, "argv", d, NULL);
                set_copy(s, "cwd", d, NULL);
                set_copy(s, "terminal", d, NULL);
                set_copy(s, "user", d, NULL);
                b->open_matched++;
        } else if (streq(kind, "ended")) {
                json_object_set(s, "ended", time);
                set_copy(s, "outcome", d, NULL);
                set_copy(s, "exit_code", d, NULL);
                set_copy(s, "signal", d, NULL);
                set_copy(s, "duration_ms", d, NULL);
                set_copy(s, "message", d, NULL);
                if (b->open_matched > 0)
                        b->open_matched--;
        }
}

static void on_escalation(Build *b, json_t *sb, const char *kind, const char *id, json_t *d, json_t *time) {
        if (!id || !session_matches(b, id))
                return;
        const char *req = json_string_value(json_object_get(d, "request_id"));
        if (!req)
                return;
        json_t *e = json_object_get(b->by_request, req);
        if (!e) {
                json_t *s = session_for(b, sb, id, time);
                e = json_pack("{s:s, s:O, s:n, s:n, s:n, s:n, s:n, s:n, s:n}", "request_id", req, "requested", time,
                              "decided", "command", "justification", "decision", "decided_by", "reason", "exit_code");
                if (!s || !e || json_array_append_new(json_object_get(s, "escalations"), e) < 0 ||
                    json_object_set(b->by_request, req, e) < 0)
                        return;
        }
        set_copy(e, "command", d, NULL);
        set_copy(e, "justification", d, NULL);
        if (streq(kind, "decided")) {
                json_object_set(e, "decided", time);
                set_copy(e, "command", d, "final_command");
                set_copy(e, "decision", d, NULL);
                set_copy(e, "decided_by", d, NULL);
                set_copy(e, "reason", d, NULL);
                set_copy(e, "exit_code", d, NULL);
        }
}

static void on_files(Build *b, json_t *sb, const char *id, json_t *d, json_t *time) {
        if (!id || !session_matches(b, id))
                return;
        json_t *s = session_for(b, sb, id, time);
        json_t *files = json_object_get(d, "files");
        if (!s || !json_is_array(files))
                return;
        json_int_t added = 0, deleted = 0;
        json_t *list = json_array();
        size_t i;
        json_t *f;
        json_array_foreach(files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                if (!path || !list)
                        continue;
                json_t *o = json_pack("{s:s}", "path", path);
                if (json_is_true(json_object_get(f, "untracked")))
                        json_object_set_new(o, "change", json_string("untracked"));
                else if (json_is_true(json_object_get(f, "binary")))
                        json_object_set_new(o, "change", json_string("binary"));
                else {
                        json_int_t a = json_integer_value(json_object_get(f, "added")),
                                   dd = json_integer_value(json_object_get(f, "deleted"));
                        const char *status = json_string_value(json_object_get(f, "status"));
                        json_object_set_new(o, "change",
                                            json_string(status && (streq(status, "added") || streq(status, "deleted"))
                                                                ? status
                                                                : "modified"));
                        json_object_set_new(o, "added", json_integer(a));
                        json_object_set_new(o, "deleted", json_integer(dd));
                        added += a;
                        deleted += dd;
                }
                json_array_append_new(list, o);
        }
        json_t *summary =
                json_pack("{s:o, s:s?, s:b, s:s?, s:I, s:I}", "files", list, "since",
                          json_string_value(json_object_get(d, "since")), "truncated",
                          json_is_true(json_object_get(d, "truncated")), "incomplete",
                          json_string_value(json_object_get(d, "incomplete")), "added", added, "deleted", deleted);
        if (summary)
                json_object_set_new(s, "files", summary);
}

/* Network records and refusals carry no session (the broker and the git
 * router serve the whole sandbox): with a session asked for, those of its
 * run while one of the sessions asked for was open. */
static bool sandbox_wide_wanted(const Build *b) {
        return !b->meta->session || b->open_matched > 0;
}

static void json_add(json_t *o, const char *key, json_int_t n) {
        json_object_set_new(o, key, json_integer(json_integer_value(json_object_get(o, key)) + n));
}

/* A process started inside: on its session, or on the run when it has
 * none (the launch's own probes are left out). */
static void on_process(Build *b, json_t *sb, const char *id, json_t *d, json_t *time) {
        if (!d)
                return;
        json_t *nr = json_object_get(d, "not_recorded");
        if (json_is_integer(nr) && json_integer_value(nr) > 0 && sandbox_wide_wanted(b))
                json_add(json_object_get(sb, "processes"), "not_recorded", json_integer_value(nr));
        if (json_is_true(json_object_get(d, "probe")))
                return;
        json_t *p;
        if (id) {
                if (!session_matches(b, id))
                        return;
                json_t *s = session_for(b, sb, id, time);
                p = s ? json_object_get(s, "processes") : NULL;
        } else {
                if (!sandbox_wide_wanted(b))
                        return;
                p = json_object_get(sb, "processes");
        }
        if (!p)
                return;
        json_add(p, "count", 1);
        json_t *list = json_object_get(p, "list");
        if (json_array_size(list) >= REPORT_PROCESS_MAX) {
                json_add(p, "omitted", 1);
                return;
        }
        json_t *argv = json_object_get(d, "argv");
        json_t *e = json_pack("{s:O, s:O?, s:O?, s:O?, s:O?}", "time", time, "pid", json_object_get(d, "pid"), "argv",
                              json_is_array(argv) ? argv : NULL, "cwd", json_object_get(d, "cwd"), "path",
                              json_object_get(d, "path"));
        if (e)
                json_array_append_new(list, e);
}

static void on_sandbox(json_t *sb, const char *kind, json_t *d, json_t *time) {
        if (streq(kind, "started")) {
                json_object_set(sb, "started", time);
                set_copy(sb, "image", d, NULL);
                set_copy(sb, "network_policy", d, NULL);
                set_copy(sb, "worktree", d, NULL);
                set_copy(sb, "workspace", d, NULL);
        } else if (streq(kind, "stopped")) {
                json_object_set(sb, "stopped", time);
                set_copy(sb, "stop_reason", d, "reason");
        } else if (streq(kind, "start_failed")) {
                json_object_set(sb, "stopped", time);
                set_copy(sb, "start_failed", d, "message");
        }
}

static void on_record(Build *b, json_t *ev) {
        json_t *time = json_object_get(ev, "time");
        const char *source = json_string_value(json_object_get(ev, "source"));
        const char *kind = json_string_value(json_object_get(ev, "kind"));
        const char *session = json_string_value(json_object_get(ev, "session"));
        json_t *data = json_object_get(ev, "data");
        json_int_t gen = json_integer_value(json_object_get(ev, "generation"));
        if (!json_is_string(time) || !source || !kind)
                return;
        if (!json_is_object(data))
                data = NULL;
        b->records++;
        if (!b->first)
                snprintf(b->first_buf, sizeof(b->first_buf), "%s", json_string_value(time));
        b->first = b->first_buf;
        snprintf(b->last_buf, sizeof(b->last_buf), "%s", json_string_value(time));
        b->last = b->last_buf;

        /* The broker's and the router's own drops ride on their next line. */
        if (json_is_integer(json_object_get(data, "dropped")) &&
            (streq(source, "network") || streq(source, "git") || streq(source, "paths")))
                b->dropped += (uint64_t) json_integer_value(json_object_get(data, "dropped"));
        if (streq(source, "record")) {
                json_int_t n = json_integer_value(json_object_get(data, "count"));
                if (streq(kind, "dropped"))
                        b->dropped += (uint64_t) n;
                else if (streq(kind, "rotated"))
                        b->rotated += (uint64_t) n;
                return;
        }
        /* Repeats the coordinator counted rather than recorded (issue 41):
         * one record for their count. */
        json_int_t count = 1;
        if (streq(kind, "aggregated") && (streq(source, "network") || streq(source, "git") || streq(source, "paths"))) {
                count = json_integer_value(json_object_get(data, "count"));
                if (count <= 0)
                        return;
                b->aggregated += (uint64_t) count;
                if (json_is_true(json_object_get(data, "other")))
                        return; /* no key: counted, not listed */
        }
        json_t *sb = sandbox_for(b, gen);
        if (!sb)
                return;
        if (streq(source, "sandbox"))
                on_sandbox(sb, kind, data, time);
        else if (streq(source, "session"))
                on_session(b, sb, kind, session, data, time);
        else if (streq(source, "escalation"))
                on_escalation(b, sb, kind, session, data, time);
        else if (streq(source, "files"))
                on_files(b, sb, session, data, time);
        else if (streq(source, "process") && streq(kind, "started"))
                on_process(b, sb, session, data, time);
        else if (streq(source, "network") && sandbox_wide_wanted(b))
                on_network(b, sb, gen, data, time, count);
        else if ((streq(source, "git") || streq(source, "paths")) && sandbox_wide_wanted(b))
                on_refusal(b, sb, gen, source, data, time, count);
}

static void format_usec(uint64_t usec, char buf[static 40]) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, 40 - n, ".%06uZ", (unsigned) (usec % 1000000));
}

int report_build(EventReader *rd, const ReportMeta *meta, json_t **ret) {
        char now[40];
        format_usec(meta->now_usec, now);
        Build b = {
                .meta = meta,
                .by_gen = json_object(),
                .by_session = json_object(),
                .by_request = json_object(),
                .net_index = json_object(),
                .ref_index = json_object(),
                .sandboxes = json_array(),
        };
        int r = 0;
        if (!b.by_gen || !b.by_session || !b.by_request || !b.net_index || !b.ref_index || !b.sandboxes)
                r = -ENOMEM;
        for (;;) {
                if (r < 0)
                        break;
                json_t *ev = NULL;
                r = rd ? event_reader_next(rd, false, &ev) : 0;
                if (r <= 0)
                        break;
                on_record(&b, ev);
                json_decref(ev);
                r = 0;
        }
        /* With a session asked for, only the runs it was part of. */
        for (size_t i = json_array_size(b.sandboxes); meta->session && i > 0; i--)
                if (json_array_size(json_object_get(json_array_get(b.sandboxes, i - 1), "sessions")) == 0)
                        json_array_remove(b.sandboxes, i - 1);
        if (r >= 0) {
                b.model = json_pack("{s:i, s:s, s:s, s:s?, s:s, s:s?, s:{s:I, s:s?, s:s?, s:I, s:I, s:I, s:I}, s:O}",
                                    "lazaret_report", REPORT_VERSION, "lazaret_version", LAZARET_VERSION, "profile",
                                    meta->profile, "workspace", meta->workspace, "generated", now, "session",
                                    meta->session, "record", "records", (json_int_t) b.records, "first", b.first,
                                    "last", b.last, "dropped", (json_int_t) b.dropped, "aggregated",
                                    (json_int_t) b.aggregated, "rotated", (json_int_t) b.rotated, "unreadable_lines",
                                    (json_int_t) (rd ? event_reader_skipped(rd) : 0), "sandboxes", b.sandboxes);
                if (!b.model)
                        r = -ENOMEM;
        }
        json_decref(b.by_gen);
        json_decref(b.by_session);
        json_decref(b.by_request);
        json_decref(b.net_index);
        json_decref(b.ref_index);
        json_decref(b.sandboxes);
        if (r < 0)
                return r;
        *ret = b.model;
        return 0;
}
