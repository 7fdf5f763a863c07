/* SPDX-License-Identifier: MIT */
#pragma once

/* lazaret report (issue 19): what the event record says of each sandbox
 * run and session, as Markdown, HTML, JSON, JSON lines or SARIF 2.1.0.
 *
 * report_build() reads the record once into a model (a JSON object, the
 * "json" format's content; tests/data/schemas/report.schema.json
 * describes it): per sandbox run (a generation) its sessions, each with
 * its command, its escalations and their decisions, the processes it
 * started (the first REPORT_PROCESS_MAX listed) and the files it
 * changed; the run's network destinations and refusals, counted per
 * distinct destination or path (at most REPORT_DISTINCT_MAX of each, the
 * rest counted), and the processes of no session. The model's strings
 * are as the record holds them; every renderer passes each one through
 * report_text(), the one sanitiser, on its way out. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "event-record.h"
#include "strbuf.h"

#define REPORT_DISTINCT_MAX 1000
#define REPORT_VERSION      1
#define REPORT_PROCESS_MAX  200 /* processes listed per session, and per run for those of none */

typedef enum ReportFormat {
        REPORT_MD,
        REPORT_HTML,
        REPORT_JSON,
        REPORT_JSONL,
        REPORT_SARIF,
        _REPORT_FORMAT_MAX,
        _REPORT_FORMAT_INVALID = -1,
} ReportFormat;

const char *report_format_to_string(ReportFormat f); /* "md", ... */
ReportFormat report_format_from_string(const char *s);
const char *report_format_extension(ReportFormat f); /* "md", "html", "json", "jsonl", "sarif" */

typedef enum TextEscape {
        TEXT_PLAIN, /* visible: control characters, bidi and invisible marks shown as escapes */
        TEXT_HTML, /* visible, then & < > " ' as character references */
        TEXT_MARKDOWN, /* visible, then a code span (empty: nothing) */
        TEXT_MARKDOWN_CELL, /* the same in a table cell: pipes escaped too */
} TextEscape;

/* The one sanitiser: s (len bytes, any bytes) as the escalation prompt
 * shows it (prompt-text.h), then escaped for how. NULL on OOM. */
char *report_text(const char *s, size_t len, TextEscape how);

typedef struct ReportMeta {
        const char *profile;
        const char *workspace;
        const char *session; /* a session id or its first characters; NULL: every session */
        uint64_t now_usec; /* the report's time */
} ReportMeta;

/* Read rd to its end into *ret (rd NULL: there is no record yet). */
int report_build(EventReader *rd, const ReportMeta *meta, json_t **ret);

/* The model in format f, appended to out. */
void report_render(json_t *model, ReportFormat f, StrBuf *out);
/* Markdown or HTML (report-render.c; report_render() calls it). */
void report_render_doc(json_t *model, bool html, StrBuf *out);

/* The safe writer (report-output.c) of every file the CLI writes into a
 * directory the person names (report --output, up --report). Open the
 * directory path for reports:
 * walked a component at a time from "/" or the current directory, none of
 * them followed if it is a symbolic link; the last one made (0700) when it
 * is missing. On failure *ret_why says why in words (caller frees). */
typedef struct ReportDir {
        int fd; /* the directory */
        int parent_fd; /* its parent, when it was made here */
        char *made; /* its name in parent_fd, when it was made here */
} ReportDir;
int report_output_dir(const char *path, ReportDir *ret, char **ret_why);
/* Close d; a directory report_output_dir() made is removed again unless a
 * report was written in it (and only while it is empty). */
void report_output_done(ReportDir *d, bool written);
/* Create name in dir_fd (O_EXCL, O_NOFOLLOW, 0600, checked to be a regular
 * file of ours) and write data to it; a failed write removes it. Never
 * opens what is there already. */
int report_output_write(int dir_fd, const char *name, const char *data, size_t len, char **ret_why);
/* n files in dir_fd, all or none: each written as report_output_write()
 * writes (under a temporary name), then renamed to names[i]. Without
 * replace a name already taken (by anything) is refused; with it, only a
 * regular file of the caller's is replaced. A failure removes what this
 * call made. Returns 0, or -errno with *ret_why (caller frees). */
int report_output_write_all(int dir_fd, const char *const *names, const char *const *data, const size_t *lens, size_t n,
                            bool replace, char **ret_why);
