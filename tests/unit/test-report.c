/* SPDX-License-Identifier: MIT */
/* Unit tests of src/report/report*: the one sanitiser, the model built
 * from a record written by the real event log, the bounds on it, the
 * session filter, and the safe writer against planted links and FIFOs.
 * tests/integration/test_report.py checks the formats against their
 * schemas, parsers and a browser, from a real session. */
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

#include "event-record.h"
#include "report.h"

static char *tmpdir(void) {
        char *d = strdup("/tmp/test-report-XXXXXX");
        assert_non_null(d);
        assert_non_null(mkdtemp(d));
        return d;
}

static void rmtree(const char *d) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
        assert_int_equal(system(cmd), 0);
}

static void check_text(const char *in, TextEscape how, const char *want) {
        char *got = report_text(in, strlen(in), how);
        assert_non_null(got);
        assert_string_equal(got, want);
        free(got);
}

static void test_sanitiser(void **state) {
        (void) state;
        /* Controls, bidi marks, invisible characters: shown, in every mode. */
        check_text("a\x1b[2J\tb\n", TEXT_PLAIN, "a\\x1b[2J\\tb\\n");
        check_text("x\xe2\x80\xaey", TEXT_PLAIN, "x<U+202E>y");
        check_text("x\xe2\x80\xaey", TEXT_HTML, "x&lt;U+202E&gt;y");
        check_text("x\xe2\x80\xaey", TEXT_MARKDOWN, "` x<U+202E>y `");
        check_text("\\", TEXT_PLAIN, "\\\\");
        check_text("caf\xc3\xa9 \xff", TEXT_PLAIN, "caf\xc3\xa9 \\xff");
        /* HTML: markup and both quotes become references. */
        check_text("</script><b a='1' b=\"2\">&amp;", TEXT_HTML,
                   "&lt;/script&gt;&lt;b a=&#39;1&#39; b=&quot;2&quot;&gt;&amp;amp;");
        /* Markdown: a code span, so no link, image, autolink, emphasis or
         * HTML can start; its fence longer than any run of backticks in it;
         * in a table cell, pipes escaped too (GFM splits cells first). */
        check_text("[x](http://e/) a@b.com <e>", TEXT_MARKDOWN, "` [x](http://e/) a@b.com <e> `");
        check_text("a`b``c", TEXT_MARKDOWN, "``` a`b``c ```");
        check_text("`", TEXT_MARKDOWN, "`` ` ``");
        check_text("a|b\\|", TEXT_MARKDOWN_CELL, "` a\\|b\\\\\\| `");
        check_text("a|b", TEXT_MARKDOWN, "` a|b `");
        check_text("", TEXT_MARKDOWN, "");
        /* A NUL inside is shown, never ends the string early. */
        char *got = report_text("a\0b", 3, TEXT_PLAIN);
        assert_string_equal(got, "a\\x00b");
        free(got);
}

static void test_formats(void **state) {
        (void) state;
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                assert_int_equal(report_format_from_string(report_format_to_string(f)), f);
        assert_int_equal(report_format_from_string("pdf"), _REPORT_FORMAT_INVALID);
        assert_int_equal(report_format_from_string(NULL), _REPORT_FORMAT_INVALID);
        assert_string_equal(report_format_extension(REPORT_SARIF), "sarif");
}

#define SID1 "11111111-1111-4111-8111-111111111111"
#define SID2 "22222222-2222-4222-8222-222222222222"

static void net(EventLog *l, const char *host, int port, const char *verdict, const char *reason) {
        assert_true(event_emit(l, "network", "connection", NULL,
                               json_pack("{s:s, s:s, s:i, s:s, s:s?, s:i, s:i}", "via", "proxy", "host", host, "port",
                                         port, "verdict", verdict, "reason", reason, "bytes_out", 10, "bytes_in", 20)));
}

static void git_refused(EventLog *l, const char *path) {
        assert_true(event_emit(
                l, "git", "refused", NULL,
                json_pack("{s:s, s:s, s:s, s:s}", "rule", "git", "op", "write", "path", path, "errno", "EACCES")));
}

/* One run: two sessions, the second with an escalation refused, network
 * and git refusals, files changed. */
static char *write_record(void) {
        char *d = tmpdir();
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, NULL, &l), 0);
        event_log_set_generation(l, 3);
        assert_true(event_emit(
                l, "sandbox", "started", NULL,
                json_pack("{s:s, s:s, s:s}", "profile", "default", "image", "img", "network_policy", "abc")));
        assert_true(event_emit(l, "session", "started", SID1,
                               json_pack("{s:[s, s], s:s, s:b, s:s}", "argv", "/bin/sh", "-c", "cwd", "/workspace",
                                         "terminal", 0, "user", "alice")));
        net(l, "before.example", 443, "refused", "not_allowed");
        assert_true(
                event_emit(l, "session", "ended", SID1, json_pack("{s:s, s:i}", "outcome", "Exited", "exit_code", 0)));
        assert_true(
                event_emit(l, "session", "started", SID2,
                           json_pack("{s:[s], s:s, s:b}", "argv", "agent\x1b[2J", "cwd", "/workspace", "terminal", 1)));
        for (int i = 0; i < 3; i++)
                net(l, "evil.example", 443, "refused", "not_allowed");
        net(l, "pypi.org", 443, "allowed", NULL);
        git_refused(l, ".git/hooks/pre-commit");
        git_refused(l, ".git/hooks/pre-commit");
        assert_true(event_emit(
                l, "escalation", "requested", SID2,
                json_pack("{s:s, s:s, s:s}", "request_id", "r1", "command", "rm -rf /", "justification", "</script>")));
        assert_true(event_emit(l, "escalation", "decided", SID2,
                               json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}", "request_id", "r1", "command", "rm -rf /",
                                         "decision", "refused", "decided_by", "policy", "reason", "no terminal",
                                         "exit_code")));
        assert_true(event_emit(l, "session", "ended", SID2,
                               json_pack("{s:s, s:i, s:i}", "outcome", "Exited", "exit_code", 3, "duration_ms", 1500)));
        assert_true(event_emit(l, "files", "changed", SID2,
                               json_pack("{s:s, s:s, s:[{s:s, s:i, s:i}, {s:s, s:b}, {s:s, s:b}], s:b}", "root", "/w",
                                         "since", "abc", "files", "path", "a.c", "added", 5, "deleted", 2, "path",
                                         "logo.png", "binary", 1, "path", "new.txt", "untracked", 1, "truncated", 0)));
        net(l, "after.example", 80, "refused", "not_allowed");
        assert_true(event_emit(l, "sandbox", "stopped", NULL, json_pack("{s:s}", "reason", "no session is left")));
        l = event_log_close(l);
        return d;
}

static json_t *build(const char *d, const char *session) {
        EventReader *rd = NULL;
        assert_int_equal(event_reader_open(d, &rd), 0);
        ReportMeta meta = { .profile = "default", .workspace = "/w", .session = session, .now_usec = 1 };
        json_t *m = NULL;
        assert_int_equal(report_build(rd, &meta, &m), 0);
        event_reader_close(rd);
        return m;
}

static json_t *find(json_t *arr, const char *key, const char *value) {
        size_t i;
        json_t *x;
        json_array_foreach(arr, i, x) {
                const char *v = json_string_value(json_object_get(x, key));
                if (v && strcmp(v, value) == 0)
                        return x;
        }
        return NULL;
}

static void test_model(void **state) {
        (void) state;
        char *d = write_record();
        json_t *m = build(d, NULL);
        json_t *rec = json_object_get(m, "record");
        assert_int_equal(json_integer_value(json_object_get(rec, "records")), 17);
        json_t *sbs = json_object_get(m, "sandboxes");
        assert_int_equal(json_array_size(sbs), 1);
        json_t *sb = json_array_get(sbs, 0);
        assert_int_equal(json_integer_value(json_object_get(sb, "generation")), 3);
        assert_string_equal(json_string_value(json_object_get(sb, "image")), "img");
        assert_string_equal(json_string_value(json_object_get(sb, "stop_reason")), "no session is left");
        json_t *sessions = json_object_get(sb, "sessions");
        assert_int_equal(json_array_size(sessions), 2);
        json_t *s1 = find(sessions, "id", SID1), *s2 = find(sessions, "id", SID2);
        assert_non_null(s1);
        assert_non_null(s2);
        assert_string_equal(json_string_value(json_object_get(s1, "user")), "alice");
        assert_int_equal(json_integer_value(json_object_get(s2, "exit_code")), 3);
        /* The model keeps the record's strings; renderers sanitise. */
        assert_string_equal(json_string_value(json_array_get(json_object_get(s2, "argv"), 0)), "agent\x1b[2J");
        json_t *esc = json_object_get(s2, "escalations");
        assert_int_equal(json_array_size(esc), 1);
        json_t *e = json_array_get(esc, 0);
        assert_string_equal(json_string_value(json_object_get(e, "decision")), "refused");
        assert_string_equal(json_string_value(json_object_get(e, "justification")), "</script>");
        assert_true(json_is_string(json_object_get(e, "decided")));
        json_t *files = json_object_get(s2, "files");
        assert_int_equal(json_array_size(json_object_get(files, "files")), 3);
        assert_int_equal(json_integer_value(json_object_get(files, "added")), 5);
        assert_int_equal(json_integer_value(json_object_get(files, "deleted")), 2);
        assert_string_equal(
                json_string_value(json_object_get(find(json_object_get(files, "files"), "path", "logo.png"), "change")),
                "binary");
        /* Network: one entry per destination and verdict, counted. */
        json_t *nets = json_object_get(sb, "network");
        assert_int_equal(json_array_size(nets), 4);
        json_t *evil = find(nets, "host", "evil.example");
        assert_int_equal(json_integer_value(json_object_get(evil, "count")), 3);
        assert_int_equal(json_integer_value(json_object_get(evil, "bytes_out")), 30);
        assert_string_equal(json_string_value(json_object_get(evil, "verdict")), "refused");
        json_t *refs = json_object_get(sb, "refusals");
        assert_int_equal(json_array_size(refs), 1);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(refs, 0), "count")), 2);
        json_decref(m);

        /* One session: its run, itself only, and what the broker and the
         * router saw while it ran (not before.example, not after.example). */
        m = build(d, "2222");
        sb = json_array_get(json_object_get(m, "sandboxes"), 0);
        assert_int_equal(json_array_size(json_object_get(sb, "sessions")), 1);
        assert_string_equal(
                json_string_value(json_object_get(json_array_get(json_object_get(sb, "sessions"), 0), "id")), SID2);
        assert_string_equal(json_string_value(json_object_get(sb, "image")), "img");
        nets = json_object_get(sb, "network");
        assert_int_equal(json_array_size(nets), 2);
        assert_null(find(nets, "host", "before.example"));
        assert_null(find(nets, "host", "after.example"));
        assert_int_equal(json_array_size(json_object_get(sb, "refusals")), 1);
        json_decref(m);
        m = build(d, "3333");
        assert_int_equal(json_array_size(json_object_get(m, "sandboxes")), 0);
        json_decref(m);

        /* Every format renders; what the agent chose is inert in each. */
        m = build(d, NULL);
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++) {
                StrBuf out = STRBUF_INIT;
                report_render(m, f, &out);
                char *doc = strbuf_steal(&out);
                assert_non_null(doc);
                assert_null(strchr(doc, '\x1b'));
                assert_null(strstr(doc, "\xe2\x80\xae"));
                /* In Markdown, markup is inert inside its code span. */
                if (f != REPORT_MD)
                        assert_null(strstr(doc, "</script>"));
                if (f == REPORT_MD) {
                        assert_non_null(strstr(doc, "` agent\\x1b[2J `"));
                        assert_non_null(strstr(doc, "` </script> `"));
                } else if (f == REPORT_HTML) {
                        assert_non_null(strstr(doc, "agent\\x1b[2J"));
                        assert_non_null(strstr(doc, "&lt;/script&gt;"));
                        assert_null(strstr(doc, "<script"));
                } else if (f == REPORT_SARIF) {
                        assert_non_null(strstr(doc, "\"ruleId\": \"escalation.refused\""));
                        assert_non_null(strstr(doc, "\"ruleId\": \"git.refused\""));
                        assert_non_null(strstr(doc, "\"ruleId\": \"network.refused\""));
                        assert_non_null(strstr(doc, "\"occurrenceCount\": 3"));
                } else
                        assert_non_null(strstr(doc, "agent\\\\x1b[2J")); /* JSON's escape of the backslash */
                free(doc);
        }
        json_decref(m);
        rmtree(d);
        free(d);
}

/* A flood of distinct destinations and paths: the report lists at most
 * REPORT_DISTINCT_MAX of each and counts the rest. */
static void test_bounds(void **state) {
        (void) state;
        char *d = tmpdir();
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, NULL, &l), 0);
        event_log_set_generation(l, 1);
        char host[64];
        for (int i = 0; i < REPORT_DISTINCT_MAX + 5; i++) {
                snprintf(host, sizeof(host), "h%d.example", i);
                net(l, host, 443, "refused", "not_allowed");
                snprintf(host, sizeof(host), ".git/hooks/h%d", i);
                git_refused(l, host);
        }
        net(l, "h0.example", 443, "refused", "not_allowed"); /* listed already: counted */
        l = event_log_close(l);
        json_t *m = build(d, NULL);
        json_t *sb = json_array_get(json_object_get(m, "sandboxes"), 0);
        assert_int_equal(json_array_size(json_object_get(sb, "network")), REPORT_DISTINCT_MAX);
        assert_int_equal(json_array_size(json_object_get(sb, "refusals")), REPORT_DISTINCT_MAX);
        json_t *om = json_object_get(sb, "omitted");
        assert_int_equal(json_integer_value(json_object_get(om, "network")), 5);
        assert_int_equal(json_integer_value(json_object_get(om, "refusals")), 5);
        assert_int_equal(json_integer_value(
                                 json_object_get(find(json_object_get(sb, "network"), "host", "h0.example"), "count")),
                         2);
        /* And says so: in the documents, and to code-scanning tools. */
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++) {
                StrBuf out = STRBUF_INIT;
                report_render(m, f, &out);
                char *doc = strbuf_steal(&out);
                assert_non_null(doc);
                if (f == REPORT_MD || f == REPORT_HTML) {
                        assert_non_null(strstr(doc, "5 more destinations not listed"));
                        assert_non_null(strstr(doc, "5 more refused paths not listed"));
                } else if (f == REPORT_SARIF)
                        assert_non_null(strstr(doc, "5 more destinations and 5 more paths than the report lists"));
                free(doc);
        }
        json_decref(m);
        rmtree(d);
        free(d);
}

static void test_output(void **state) {
        (void) state;
        char *d = tmpdir();
        char p[256], q[512], *why = NULL;
        ReportDir dir;

        /* A directory missing at the end is made, 0700, and taken away
         * again when no report was written in it. */
        snprintf(p, sizeof(p), "%s/out", d);
        assert_int_equal(report_output_dir(p, &dir, &why), 0);
        assert_string_equal(dir.made, "out");
        report_output_done(&dir, false);
        assert_int_equal(access(p, F_OK), -1);
        assert_int_equal(report_output_dir(p, &dir, &why), 0);
        int fd = dir.fd;
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0700);
        assert_int_equal(report_output_write(fd, "r.md", "hello", 5, &why), 0);
        snprintf(q, sizeof(q), "%s/r.md", p);
        assert_int_equal(stat(q, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(st.st_size, 5);
        /* Never over what is there. */
        assert_int_equal(report_output_write(fd, "r.md", "again", 5, &why), -EEXIST);
        assert_non_null(strstr(why, "already there (a file)"));
        free(why);
        why = NULL;

        /* A planted symbolic link with the report's name: refused, nothing
         * written through it. */
        snprintf(q, sizeof(q), "%s/target", d);
        assert_int_equal(mknod(q, S_IFREG | 0600, 0), 0);
        assert_int_equal(symlinkat(q, fd, "link.md"), 0);
        assert_int_equal(report_output_write(fd, "link.md", "x", 1, &why), -EEXIST);
        assert_non_null(strstr(why, "a symbolic link"));
        free(why);
        why = NULL;
        assert_int_equal(stat(q, &st), 0);
        assert_int_equal(st.st_size, 0);
        /* A dangling one (O_CREAT would follow it and make the target). */
        snprintf(q, sizeof(q), "%s/made-through-link", d);
        assert_int_equal(symlinkat(q, fd, "dangling.md"), 0);
        assert_int_equal(report_output_write(fd, "dangling.md", "x", 1, &why), -EEXIST);
        free(why);
        why = NULL;
        assert_int_equal(access(q, F_OK), -1);
        /* A FIFO: refused at once, no writer waits on it. */
        assert_int_equal(mkfifoat(fd, "fifo.md", 0600), 0);
        assert_int_equal(report_output_write(fd, "fifo.md", "x", 1, &why), -EEXIST);
        assert_non_null(strstr(why, "a FIFO"));
        free(why);
        why = NULL;
        report_output_done(&dir, true);
        assert_int_equal(stat(p, &st), 0);
        /* A directory that was there already is never taken away. */
        assert_int_equal(report_output_dir(p, &dir, &why), 0);
        assert_null(dir.made);
        report_output_done(&dir, false);
        assert_int_equal(stat(p, &st), 0);

        /* The directory itself, or any directory on the way, a link:
         * refused, and the link's target gets nothing. */
        snprintf(q, sizeof(q), "%s/elsewhere", d);
        assert_int_equal(mkdir(q, 0700), 0);
        snprintf(p, sizeof(p), "%s/linkdir", d);
        assert_int_equal(symlink(q, p), 0);
        assert_true(report_output_dir(p, &dir, &why) < 0);
        assert_non_null(strstr(why, "linkdir is a symbolic link"));
        free(why);
        why = NULL;
        snprintf(p, sizeof(p), "%s/linkdir/sub", d);
        assert_true(report_output_dir(p, &dir, &why) < 0);
        assert_non_null(strstr(why, "linkdir is a symbolic link"));
        free(why);
        why = NULL;
        snprintf(q, sizeof(q), "%s/elsewhere/sub", d);
        assert_int_equal(access(q, F_OK), -1);
        assert_int_equal(dir.fd, -EBADF);
        /* Only the last directory is made. */
        snprintf(p, sizeof(p), "%s/a/b", d);
        assert_true(report_output_dir(p, &dir, &why) < 0);
        assert_non_null(strstr(why, "cannot open a"));
        free(why);
        why = NULL;
        /* A file where the directory should be. */
        snprintf(p, sizeof(p), "%s/out/r.md", d);
        assert_true(report_output_dir(p, &dir, &why) < 0);
        assert_non_null(strstr(why, "r.md is a file"));
        free(why);
        rmtree(d);
        free(d);
}

/* Several files all or none (lazaret up --report, lazaret kube --output):
 * new files only, unless replace, and then only a regular file of ours. */
static void test_output_all(void **state) {
        (void) state;
        char *d = tmpdir();
        char q[512], *why = NULL;
        int fd = open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        const char *names[] = { "a.md", "b.md" }, *data[] = { "one", "two" };
        size_t lens[] = { 3, 3 };
        assert_int_equal(report_output_write_all(fd, names, data, lens, 2, false, &why), 0);
        struct stat st;
        snprintf(q, sizeof(q), "%s/b.md", d);
        assert_int_equal(stat(q, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        /* Taken names: refused, nothing of this call left. */
        const char *more[] = { "c.md", "b.md" };
        assert_int_equal(report_output_write_all(fd, more, data, lens, 2, false, &why), -EEXIST);
        assert_non_null(strstr(why, "b.md is already there (a file)"));
        free(why);
        why = NULL;
        snprintf(q, sizeof(q), "%s/c.md", d);
        assert_int_equal(access(q, F_OK), -1);
        /* Replaced on request; a link with the name is not, even then. */
        const char *again[] = { "new", "NEW" };
        assert_int_equal(report_output_write_all(fd, names, again, lens, 2, true, &why), 0);
        snprintf(q, sizeof(q), "%s/b.md", d);
        char buf[8] = "";
        FILE *f = fopen(q, "re");
        assert_non_null(f);
        assert_non_null(fgets(buf, sizeof(buf), f));
        fclose(f);
        assert_string_equal(buf, "NEW");
        snprintf(q, sizeof(q), "%s/target", d);
        assert_int_equal(mknod(q, S_IFREG | 0600, 0), 0);
        assert_int_equal(unlinkat(fd, "a.md", 0), 0);
        assert_int_equal(symlinkat(q, fd, "a.md"), 0);
        assert_int_equal(report_output_write_all(fd, names, data, lens, 2, true, &why), -EEXIST);
        assert_non_null(strstr(why, "a symbolic link, not a file of yours"));
        free(why);
        assert_int_equal(stat(q, &st), 0);
        assert_int_equal(st.st_size, 0);
        close(fd);
        rmtree(d);
        free(d);
}

static void proc(EventLog *l, const char *sid, const char *arg, json_t *extra) {
        json_t *d =
                json_pack("{s:i, s:i, s:s, s:[s, s], s:i, s:s, s:i, s:i}", "pid", 42, "ppid", 7, "path", "/bin/echo",
                          "argv", "/bin/echo", arg, "argc", 2, "cwd", "/workspace", "uid", 0, "gid", 0);
        assert_non_null(d);
        if (extra)
                assert_int_equal(json_object_update(d, extra), 0);
        json_decref(extra);
        assert_true(event_emit(l, "process", "started", sid, d));
}

static size_t count_of(const char *doc, const char *needle) {
        size_t n = 0;
        for (const char *p = doc; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* Processes: each on its session, the first REPORT_PROCESS_MAX listed and
 * the rest counted; those of no session on the run, the launch's probes
 * on neither; the execs not recorded counted on the run, whichever
 * record their count rode on; a session asked for takes its own. */
static void test_processes(void **state) {
        (void) state;
        char *d = tmpdir();
        EventLog *l = NULL;
        assert_int_equal(event_log_open(d, NULL, &l), 0);
        event_log_set_generation(l, 1);
        proc(l, NULL, "probe", json_pack("{s:b}", "probe", 1));
        assert_true(event_emit(l, "session", "started", SID1, json_pack("{s:[s], s:s}", "argv", "sh", "cwd", "/w")));
        char arg[32];
        for (int i = 0; i < REPORT_PROCESS_MAX + 5; i++) {
                snprintf(arg, sizeof(arg), "one-%d", i);
                proc(l, SID1, arg, NULL);
        }
        proc(l, NULL, "orphan</td>", NULL);
        assert_true(event_emit(l, "session", "ended", SID1, json_pack("{s:s}", "outcome", "Exited")));
        assert_true(event_emit(l, "session", "started", SID2, json_pack("{s:[s], s:s}", "argv", "sh", "cwd", "/w")));
        proc(l, SID2, "two", json_pack("{s:i}", "not_recorded", 7)); /* SID1's execs, perhaps */
        assert_true(event_emit(l, "session", "ended", SID2, json_pack("{s:s}", "outcome", "Exited")));
        l = event_log_close(l);

        json_t *m = build(d, NULL);
        json_t *sb = json_array_get(json_object_get(m, "sandboxes"), 0);
        json_t *p1 = json_object_get(find(json_object_get(sb, "sessions"), "id", SID1), "processes");
        json_t *p2 = json_object_get(find(json_object_get(sb, "sessions"), "id", SID2), "processes");
        json_t *run = json_object_get(sb, "processes");
        assert_int_equal(json_integer_value(json_object_get(p1, "count")), REPORT_PROCESS_MAX + 5);
        assert_int_equal(json_array_size(json_object_get(p1, "list")), REPORT_PROCESS_MAX);
        assert_int_equal(json_integer_value(json_object_get(p1, "omitted")), 5);
        json_t *first = json_array_get(json_object_get(p1, "list"), 0);
        assert_string_equal(json_string_value(json_array_get(json_object_get(first, "argv"), 1)), "one-0");
        assert_string_equal(json_string_value(json_object_get(first, "cwd")), "/workspace");
        assert_int_equal(json_integer_value(json_object_get(p2, "count")), 1);
        assert_null(json_object_get(p2, "not_recorded"));
        assert_int_equal(json_integer_value(json_object_get(run, "count")), 1); /* the orphan; not the probe */
        assert_int_equal(json_integer_value(json_object_get(run, "not_recorded")), 7);
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++) {
                StrBuf out = STRBUF_INIT;
                report_render(m, f, &out);
                char *doc = strbuf_steal(&out);
                assert_non_null(doc);
                assert_null(strstr(doc, "probe"));
                if (f == REPORT_MD || f == REPORT_HTML) {
                        assert_non_null(strstr(doc, "Processes started: 205"));
                        assert_non_null(strstr(doc, "5 more processes not listed (the report lists 200)"));
                        assert_non_null(strstr(doc, "7 more processes, of any session, were started faster"));
                        assert_non_null(strstr(doc, "Processes of no session: 1"));
                        assert_int_equal(count_of(doc, "one-"), REPORT_PROCESS_MAX);
                }
                if (f == REPORT_HTML)
                        assert_non_null(strstr(doc, "orphan&lt;/td&gt;"));
                if (f == REPORT_JSONL)
                        assert_int_equal(count_of(doc, "\"type\":\"process\""), REPORT_PROCESS_MAX + 2);
                free(doc);
        }
        json_decref(m);

        /* The first session only: its processes, and nothing of the run
         * from while it was not open (the second session's count). */
        m = build(d, SID1);
        sb = json_array_get(json_object_get(m, "sandboxes"), 0);
        assert_int_equal(json_array_size(json_object_get(sb, "sessions")), 1);
        run = json_object_get(sb, "processes");
        assert_int_equal(json_integer_value(json_object_get(run, "count")), 1);
        assert_int_equal(json_integer_value(json_object_get(run, "not_recorded")), 0);
        json_decref(m);
        rmtree(d);
        free(d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sanitiser), cmocka_unit_test(test_formats), cmocka_unit_test(test_model),
                cmocka_unit_test(test_bounds),    cmocka_unit_test(test_output),  cmocka_unit_test(test_output_all),
                cmocka_unit_test(test_processes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
