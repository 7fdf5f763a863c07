/* SPDX-License-Identifier: MIT */
/* The report as Markdown or HTML (report.h). Everything read from the
 * record is written through report_text(); times are parsed and written
 * again, numbers printed, so only the renderer's own text goes out as it
 * is. The HTML is one file with its style inline, no script, and a policy
 * that lets it load nothing. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lazaret-build.h"
#include "fd-util.h"
#include "macro.h"
#include "report.h"
#include "string-util.h"

typedef struct Doc {
        bool html, in_cell;
        StrBuf *out;
} Doc;

static void lit(Doc *d, const char *s) {
        strbuf_puts(d->out, s);
}

_printf_(2, 3) static void litf(Doc *d, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(d->out, fmt, ap);
        va_end(ap);
}

/* A string from the record, sanitised for the document. */
static void text(Doc *d, const char *s, size_t len) {
        _cleanup_free_ char *t = report_text(s, len,
                                             d->html      ? TEXT_HTML
                                             : d->in_cell ? TEXT_MARKDOWN_CELL
                                                          : TEXT_MARKDOWN);
        strbuf_puts(d->out, t ?: "?");
}

static void jtext(Doc *d, json_t *v) {
        if (json_is_string(v))
                text(d, json_string_value(v), json_string_length(v));
}

/* "2026-12-01 23:59:01" (UTC) from a record's time, or "". */
static const char *when(json_t *t, char buf[static 40]) {
        uint64_t usec;
        buf[0] = '\0';
        if (!json_is_string(t) || event_time_parse(json_string_value(t), &usec) < 0)
                return buf;
        time_t s = (time_t) (usec / 1000000);
        struct tm tm;
        gmtime_r(&s, &tm);
        strftime(buf, 40, "%Y-%m-%d %H:%M:%S", &tm);
        return buf;
}

static void heading(Doc *d, int level, const char *s) {
        if (d->html)
                litf(d, "<h%d>%s</h%d>\n", level, s, level);
        else
                litf(d, "\n%.*s %s\n\n", level, "######", s);
}

static void table_begin(Doc *d, const char *const *heads) {
        if (d->html) {
                lit(d, "<table>\n<thead><tr>");
                for (const char *const *h = heads; *h; h++)
                        litf(d, "<th>%s</th>", *h);
                lit(d, "</tr></thead>\n<tbody>\n");
                return;
        }
        lit(d, "|");
        for (const char *const *h = heads; *h; h++)
                litf(d, " %s |", *h);
        lit(d, "\n|");
        for (const char *const *h = heads; *h; h++)
                lit(d, "---|");
        lit(d, "\n");
}

static void row_begin(Doc *d) {
        lit(d, d->html ? "<tr>" : "|");
}

static void row_end(Doc *d) {
        lit(d, d->html ? "</tr>\n" : "\n");
}

static void cell_begin(Doc *d) {
        lit(d, d->html ? "<td>" : " ");
        d->in_cell = true;
}

static void cell_end(Doc *d) {
        lit(d, d->html ? "</td>" : " |");
        d->in_cell = false;
}

static void cell_json(Doc *d, json_t *v) {
        cell_begin(d);
        if (json_is_string(v))
                jtext(d, v);
        else if (json_is_integer(v))
                litf(d, "%" PRIi64, (int64_t) json_integer_value(v));
        cell_end(d);
}

static void cell_lit(Doc *d, const char *s) {
        cell_begin(d);
        lit(d, s);
        cell_end(d);
}

static void cell_time(Doc *d, json_t *t) {
        char buf[40];
        cell_lit(d, when(t, buf));
}

static void table_end(Doc *d) {
        lit(d, d->html ? "</tbody>\n</table>\n" : "\n");
}

static void para_begin(Doc *d) {
        lit(d, d->html ? "<p>" : "");
}

static void para_end(Doc *d) {
        lit(d, d->html ? "</p>\n" : "\n\n");
}

/* A command line from argv: arguments with a space, a quote or nothing in
 * them quoted; the whole then sanitised. */
static void put_argv(Doc *d, json_t *argv) {
        StrBuf b = STRBUF_INIT;
        strbuf_puts(&b, "");
        size_t i;
        json_t *a;
        json_array_foreach(argv, i, a) {
                const char *s = json_string_value(a) ?: "";
                size_t n = json_string_length(a);
                if (i)
                        strbuf_putc(&b, ' ');
                bool q = n == 0 || strpbrk(s, " \"'") || memchr(s, '\0', n);
                if (q)
                        strbuf_putc(&b, '"');
                for (size_t k = 0; k < n; k++) {
                        if (q && (s[k] == '"' || s[k] == '\\'))
                                strbuf_putc(&b, '\\');
                        strbuf_putc(&b, s[k]);
                }
                if (q)
                        strbuf_putc(&b, '"');
        }
        text(d, b.data ?: "", b.len);
        strbuf_done(&b);
}

static const char *const CSS = "body{font-family:sans-serif;margin:2em;color:#222;max-width:80em}"
                               "table{border-collapse:collapse;margin:0.5em 0 1.5em}"
                               "th,td{border:1px solid #bbb;padding:0.2em 0.5em;text-align:left;vertical-align:top;"
                               "overflow-wrap:break-word}"
                               "th{background:#eee}h2{border-bottom:2px solid #444;margin-top:2em}"
                               ".refused{color:#a00;font-weight:bold}.allowed{color:#060}"
                               ".meta{color:#555}";

static void put_outcome(Doc *d, json_t *s) {
        const char *o = json_string_value(json_object_get(s, "outcome"));
        json_t *code = json_object_get(s, "exit_code"), *sig = json_object_get(s, "signal");
        if (!o && json_is_null(json_object_get(s, "ended"))) {
                lit(d, "still running, or the sandbox stopped before it ended");
                return;
        }
        text(d, o ?: "?", strlen(o ?: "?"));
        if (json_is_integer(code))
                litf(d, ", exit status %" PRIi64, (int64_t) json_integer_value(code));
        if (json_is_integer(sig))
                litf(d, ", signal %" PRIi64, (int64_t) json_integer_value(sig));
        json_t *msg = json_object_get(s, "message");
        if (json_is_string(msg)) {
                lit(d, " (");
                jtext(d, msg);
                lit(d, ")");
        }
}

/* What a list of the report left out (it lists at most max entries). */
static void put_omitted(Doc *d, json_int_t omitted, const char *what, int max) {
        if (omitted <= 0)
                return;
        para_begin(d);
        litf(d, "%" PRIi64 " more %s not listed (the report lists %d).", (int64_t) omitted, what, max);
        para_end(d);
}

/* The processes started (a session's, or a run's of no session). */
static void put_processes(Doc *d, json_t *p, const char *what) {
        json_int_t count = json_integer_value(json_object_get(p, "count")),
                   not_recorded = json_integer_value(json_object_get(p, "not_recorded")),
                   omitted = json_integer_value(json_object_get(p, "omitted"));
        if (count == 0 && not_recorded == 0)
                return;
        char head[160];
        snprintf(head, sizeof(head), "%s: %" PRIi64, what, (int64_t) count);
        heading(d, 4, head);
        json_t *list = json_object_get(p, "list");
        if (json_array_size(list) > 0) {
                table_begin(d, (const char *const[]){ "Started", "Command", "Directory", "Program", NULL });
                size_t i;
                json_t *e;
                json_array_foreach(list, i, e) {
                        row_begin(d);
                        cell_time(d, json_object_get(e, "time"));
                        cell_begin(d);
                        json_t *argv = json_object_get(e, "argv");
                        if (json_is_array(argv))
                                put_argv(d, argv);
                        cell_end(d);
                        cell_json(d, json_object_get(e, "cwd"));
                        cell_json(d, json_object_get(e, "path"));
                        row_end(d);
                }
                table_end(d);
        }
        put_omitted(d, omitted, "processes", REPORT_PROCESS_MAX);
        if (not_recorded > 0) {
                para_begin(d);
                litf(d,
                     "%" PRIi64 " more processes, of any session, were started faster than the record takes "
                     "them (counted only).",
                     (int64_t) not_recorded);
                para_end(d);
        }
}

static void put_session(Doc *d, json_t *s) {
        char buf[40], head[160];
        const char *id = json_string_value(json_object_get(s, "id")) ?: "?";
        _cleanup_free_ char *vid = report_text(id, strlen(id), d->html ? TEXT_HTML : TEXT_MARKDOWN);
        snprintf(head, sizeof(head), "Session %s", vid ?: "?");
        heading(d, 3, head);
        if (d->html)
                lit(d, "<ul>\n");
        lit(d, d->html ? "<li>Command: " : "- Command: ");
        json_t *argv = json_object_get(s, "argv");
        if (json_is_array(argv))
                put_argv(d, argv);
        else
                lit(d, "(not on record)");
        lit(d, d->html ? "</li>\n<li>Run by " : "\n- Run by ");
        json_t *user = json_object_get(s, "user");
        if (json_is_string(user))
                jtext(d, user);
        else
                lit(d, "(not on record)");
        json_t *cwd = json_object_get(s, "cwd");
        if (json_is_string(cwd)) {
                lit(d, " in ");
                jtext(d, cwd);
        }
        json_t *term = json_object_get(s, "terminal");
        if (json_is_boolean(term))
                lit(d, json_is_true(term) ? ", with a terminal" : ", without a terminal");
        litf(d, "%sStarted %s", d->html ? "</li>\n<li>" : "\n- ", when(json_object_get(s, "started"), buf));
        if (!json_is_null(json_object_get(s, "ended")))
                litf(d, ", ended %s", when(json_object_get(s, "ended"), buf));
        json_t *dur = json_object_get(s, "duration_ms");
        if (json_is_integer(dur))
                litf(d, " (%.1f s)", (double) json_integer_value(dur) / 1000.0);
        lit(d, d->html ? "</li>\n<li>Outcome: " : "\n- Outcome: ");
        put_outcome(d, s);
        lit(d, d->html ? "</li>\n</ul>\n" : "\n\n");

        json_t *esc = json_object_get(s, "escalations");
        if (json_array_size(esc) > 0) {
                heading(d, 4, "Escalations");
                table_begin(d, (const char *const[]){ "Requested", "Command", "Justification", "Decision", "By",
                                                      "Reason", "Exit status", NULL });
                size_t i;
                json_t *e;
                json_array_foreach(esc, i, e) {
                        row_begin(d);
                        cell_time(d, json_object_get(e, "requested"));
                        cell_json(d, json_object_get(e, "command"));
                        cell_json(d, json_object_get(e, "justification"));
                        json_t *dec = json_object_get(e, "decision");
                        if (json_is_string(dec))
                                cell_json(d, dec);
                        else
                                cell_lit(d, "(no decision on record)");
                        cell_json(d, json_object_get(e, "decided_by"));
                        cell_json(d, json_object_get(e, "reason"));
                        cell_json(d, json_object_get(e, "exit_code"));
                        row_end(d);
                }
                table_end(d);
        }

        put_processes(d, json_object_get(s, "processes"), "Processes started");

        json_t *files = json_object_get(s, "files");
        if (json_is_object(files)) {
                json_t *list = json_object_get(files, "files");
                snprintf(head, sizeof(head), "Files changed: %zu, +%" PRIi64 " -%" PRIi64, json_array_size(list),
                         (int64_t) json_integer_value(json_object_get(files, "added")),
                         (int64_t) json_integer_value(json_object_get(files, "deleted")));
                heading(d, 4, head);
                json_t *inc = json_object_get(files, "incomplete");
                if (json_is_string(inc)) {
                        para_begin(d);
                        lit(d, "Incomplete: ");
                        jtext(d, inc);
                        para_end(d);
                }
                if (json_array_size(list) > 0) {
                        table_begin(d, (const char *const[]){ "File", "Change", "Added", "Deleted", NULL });
                        size_t i;
                        json_t *f;
                        json_array_foreach(list, i, f) {
                                row_begin(d);
                                cell_json(d, json_object_get(f, "path"));
                                cell_json(d, json_object_get(f, "change"));
                                cell_json(d, json_object_get(f, "added"));
                                cell_json(d, json_object_get(f, "deleted"));
                                row_end(d);
                        }
                        table_end(d);
                }
                if (json_is_true(json_object_get(files, "truncated"))) {
                        para_begin(d);
                        lit(d, "More files changed than the record keeps (500); see lazaret diff.");
                        para_end(d);
                }
        }
}

static void put_network(Doc *d, json_t *sb) {
        json_t *net = json_object_get(sb, "network");
        json_int_t omitted = json_integer_value(json_object_get(json_object_get(sb, "omitted"), "network"));
        if (json_array_size(net) == 0 && omitted == 0)
                return;
        heading(d, 3, "Network destinations");
        table_begin(d, (const char *const[]){ "Verdict", "Host", "Port", "Name rule", "Reason", "Times", "First",
                                              "Last", "Bytes out", "Bytes in", NULL });
        /* Refused first. */
        for (int pass = 0; pass < 2; pass++) {
                size_t i;
                json_t *e;
                json_array_foreach(net, i, e) {
                        const char *v = json_string_value(json_object_get(e, "verdict")) ?: "?";
                        if (streq(v, "refused") != (pass == 0))
                                continue;
                        row_begin(d);
                        cell_begin(d);
                        if (d->html)
                                litf(d, "<span class=\"%s\">", streq(v, "refused") ? "refused" : "allowed");
                        text(d, v, strlen(v));
                        if (d->html)
                                lit(d, "</span>");
                        cell_end(d);
                        cell_json(d, json_object_get(e, "host"));
                        cell_json(d, json_object_get(e, "port"));
                        cell_json(d, json_object_get(e, "name"));
                        cell_json(d, json_object_get(e, "reason"));
                        cell_json(d, json_object_get(e, "count"));
                        cell_time(d, json_object_get(e, "first"));
                        cell_time(d, json_object_get(e, "last"));
                        cell_json(d, json_object_get(e, "bytes_out"));
                        cell_json(d, json_object_get(e, "bytes_in"));
                        row_end(d);
                }
        }
        table_end(d);
        put_omitted(d, omitted, "destinations", REPORT_DISTINCT_MAX);
}

static void put_refusals(Doc *d, json_t *sb) {
        json_t *ref = json_object_get(sb, "refusals");
        json_int_t omitted = json_integer_value(json_object_get(json_object_get(sb, "omitted"), "refusals"));
        if (json_array_size(ref) == 0 && omitted == 0)
                return;
        heading(d, 3, "Refused git and file operations");
        table_begin(d, (const char *const[]){ "Source", "Rule", "Operation", "Path", "Error", "Times", "First", "Last",
                                              NULL });
        size_t i;
        json_t *e;
        json_array_foreach(ref, i, e) {
                row_begin(d);
                cell_json(d, json_object_get(e, "source"));
                cell_json(d, json_object_get(e, "rule"));
                cell_json(d, json_object_get(e, "op"));
                cell_json(d, json_object_get(e, "path"));
                cell_json(d, json_object_get(e, "errno"));
                cell_json(d, json_object_get(e, "count"));
                cell_time(d, json_object_get(e, "first"));
                cell_time(d, json_object_get(e, "last"));
                row_end(d);
        }
        table_end(d);
        put_omitted(d, omitted, "refused paths", REPORT_DISTINCT_MAX);
}

static void put_sandbox(Doc *d, json_t *sb) {
        char buf[40], head[160];
        snprintf(head, sizeof(head), "Sandbox run %" PRIi64,
                 (int64_t) json_integer_value(json_object_get(sb, "generation")));
        heading(d, 2, head);
        para_begin(d);
        if (!json_is_null(json_object_get(sb, "started")))
                litf(d, "Started %s", when(json_object_get(sb, "started"), buf));
        else
                lit(d, "Its start is no longer on record");
        if (!json_is_null(json_object_get(sb, "stopped")))
                litf(d, ", stopped %s", when(json_object_get(sb, "stopped"), buf));
        json_t *reason = json_object_get(sb, "stop_reason"), *failed = json_object_get(sb, "start_failed");
        if (json_is_string(reason)) {
                lit(d, " (");
                jtext(d, reason);
                lit(d, ")");
        }
        if (json_is_string(failed)) {
                lit(d, "; it failed to start: ");
                jtext(d, failed);
        }
        lit(d, ".");
        json_t *image = json_object_get(sb, "image");
        if (json_is_string(image)) {
                lit(d, d->html ? "<br>\nImage " : "\nImage ");
                jtext(d, image);
                lit(d, ".");
        }
        para_end(d);
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(sb, "sessions"), i, s) put_session(d, s);
        put_processes(d, json_object_get(sb, "processes"), "Processes of no session"); /* and those not recorded */
        put_network(d, sb);
        put_refusals(d, sb);
}

void report_render_doc(json_t *m, bool html, StrBuf *out) {
        Doc d = { .html = html, .out = out };
        char first[40], last[40];
        json_t *rec = json_object_get(m, "record");
        json_t *profile = json_object_get(m, "profile"), *ws = json_object_get(m, "workspace");
        if (html) {
                lit(&d, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                        "style-src 'unsafe-inline'\">\n<title>Lazaret report: ");
                jtext(&d, profile);
                litf(&d, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>Lazaret report: ", CSS);
                jtext(&d, profile);
                lit(&d, "</h1>\n");
        } else {
                lit(&d, "# Lazaret report: ");
                jtext(&d, profile);
                lit(&d, "\n\n");
        }
        para_begin(&d);
        if (html)
                lit(&d, "<span class=\"meta\">");
        lit(&d, "Workspace ");
        jtext(&d, ws);
        litf(&d, ". Generated %s (UTC) by lazaret %s from %" PRIi64 " records",
             when(json_object_get(m, "generated"), first), LAZARET_VERSION,
             (int64_t) json_integer_value(json_object_get(rec, "records")));
        if (!json_is_null(json_object_get(rec, "first")))
                litf(&d, " (%s to %s)", when(json_object_get(rec, "first"), first),
                     when(json_object_get(rec, "last"), last));
        lit(&d, ".");
        json_int_t dropped = json_integer_value(json_object_get(rec, "dropped"));
        json_int_t unread = json_integer_value(json_object_get(rec, "unreadable_lines"));
        if (dropped > 0)
                litf(&d, " %" PRIi64 " records were dropped when they came faster than they could be written.",
                     (int64_t) dropped);
        json_int_t aggregated = json_integer_value(json_object_get(rec, "aggregated"));
        json_int_t rotated = json_integer_value(json_object_get(rec, "rotated"));
        if (aggregated > 0)
                litf(&d,
                     " %" PRIi64 " refusals were aggregated: past the first few of each, or over the rate, they"
                     " were counted, not recorded one by one (the counts are below).",
                     (int64_t) aggregated);
        if (rotated > 0)
                litf(&d,
                     " %" PRIi64 " older records were rotated away with the record's oldest segments (sessions,"
                     " escalations and the sandbox's starts and stops were kept).",
                     (int64_t) rotated);
        if (unread > 0)
                litf(&d, " %" PRIi64 " lines of the record could not be read.", (int64_t) unread);
        json_t *sess = json_object_get(m, "session");
        if (json_is_string(sess)) {
                lit(&d, " Only session ");
                jtext(&d, sess);
                lit(&d, ", with the network destinations and refusals of its sandbox run while it ran.");
        }
        if (html)
                lit(&d, "</span>");
        para_end(&d);
        json_t *sbs = json_object_get(m, "sandboxes");
        if (json_array_size(sbs) == 0) {
                para_begin(&d);
                lit(&d, json_is_string(sess) ? "No such session on record." : "Nothing on record.");
                para_end(&d);
        }
        size_t i;
        json_t *sb;
        json_array_foreach(sbs, i, sb) put_sandbox(&d, sb);
        if (html)
                lit(&d, "</body>\n</html>\n");
}
