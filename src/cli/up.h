/* SPDX-License-Identifier: MIT */
#pragma once

/* lazaret up (issue 22): what the foreground group (verb-up.c) and the
 * detached one (up-group.c: --detach, --attach, lazaret attach, lazaret
 * down) share, which up.c holds; up_group() is up-group.c's. verb-up.c
 * calls up-group.c, both call up.c, never the other way. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "manifest.h"
#include "verbs.h"

#define UP_LINE_MAX 4096

typedef struct UpStream {
        int fd;
        char buf[UP_LINE_MAX];
        size_t len;
} UpStream;

typedef struct UpAgent {
        const ManifestAgent *agent;
        pid_t pid;
        UpStream out, err; /* the foreground's pipes (-EBADF in a detached group) */
        int ready_fd; /* a byte once its session is open; its end without one: the start failed */
        bool ready;
        int status; /* -1 while it runs */
        uint64_t started, ended;
} UpAgent;

/* The manifest's bytes trusted (lazaret trust --manifest), then every
 * agent checked as its launch would be. 0, or an exit status after saying
 * why ("nothing was started"). */
int up_check(const Globals *g, const char *home, const Manifest *m);
int up_manifest_trusted(const Manifest *m, const char *home);

/* text to f with every control character (C0 but tab, DEL, C1) as \xHH;
 * with tag, each line begins "TAG | " (and its newlines are kept). Ends
 * with a newline. */
void up_print_inert(FILE *f, const char *tag, const char *text, size_t len);

/* This program's path (the agents are its children). */
int up_self(char *buf, size_t size);

/* Start r->agent as `lazaret --agent NAME --workspace DIR run --tui=none
 * PROFILE -- ARGV`: on pipes (pty < 0; r->out, r->err), or with pty, a
 * terminal's slave side, as its stdin, stdout, stderr and controlling
 * terminal in a session of its own. Its workspace's identity goes with it
 * (LAZARET_WORKSPACE_ID): -ESTALE, said here, when a symbolic link or
 * nothing is at its canonical path now. */
int up_start_agent(const Globals *g, const char *self, UpAgent *r, int pty);

/* Once all have ended: the side-by-side table (Markdown; caller frees, NULL
 * when out of memory), each agent's figures from its own Domain, also
 * written as report_dir/up-report.{md,json} when report_dir is set (*ret
 * set to EXIT_LAZARET when that fails); *ret_text (may be NULL) gets it as
 * columns for a terminal. */
char *up_compare(const Globals *g, const char *self, const Manifest *m, const UpAgent *run, size_t n,
                 const char *report_dir, int *ret, char **ret_text);
json_t *up_agent_summary(const Globals *g, const char *self, const char *git, const UpAgent *r);
char *up_summary_markdown(const char *manifest, json_t *agents);
/* The table as aligned plain columns for a terminal, strings made inert,
 * each unreadable record's reason below it (caller frees; NULL on OOM). */
char *up_summary_text(const char *manifest, json_t *agents);

/* The files of --report DIR (up.c writes them; up refuses a DIR that
 * holds any of them already). */
extern const char *const up_report_names[5];

/* --detach / --attach NAME: the group in the background (up-group.c).
 * Returns the exit status. */
int up_group(const Globals *g, const char *self, const Manifest *m, const char *report_dir, const char *attach,
             uint64_t started);
