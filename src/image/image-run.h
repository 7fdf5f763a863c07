/* SPDX-License-Identifier: MIT */
#pragma once

/* The helper programs of lazaret image build (mmdebstrap, tar, podman,
 * curl): run with fork and execve of an absolute path, an argument vector
 * and never a shell, stdin from /dev/null, stdout and stderr captured, in
 * a process group of their own so that a time limit or an interruption
 * stops everything they started. No signal handling here: the caller
 * says when to stop (ImageStop). */

#include <stdbool.h>
#include <stdint.h>

#define RUN_STDOUT_MAX (16U * 1024 * 1024)
#define RUN_LINE_MAX   1024

/* When the caller wants a build stopped (a signal its own handler noted,
 * a signal pending while blocked): requested(userdata) is asked between
 * polls, at least every 100 ms, and must be async-signal-safe in spirit
 * (cheap, no side effects). Once it says true the running helper is
 * stopped and run() returns with .interrupted. */
typedef struct ImageStop {
        bool (*requested)(void *userdata);
        void *userdata;
} ImageStop;

static inline bool image_stop_requested(const ImageStop *s) {
        return s && s->requested && s->requested(s->userdata);
}

typedef void (*LineFn)(const char *line);

typedef struct Run {
        int spawn_error; /* -errno when the program could not be started */
        bool timed_out;
        bool interrupted;
        int status; /* exit status, or 128 + signal */
        char *out; /* stdout, NUL-terminated, at most RUN_STDOUT_MAX bytes */
        bool out_truncated;
        char *why; /* the most telling stderr line: the first that reads
                    * like an error ("E:", "Error:", "error:", "tar:"; later
                    * ones are usually consequences), else the last one; or
                    * NULL */
} Run;

void run_done(Run *r);
/* True when it could not start, timed out, was interrupted or failed. */
bool run_failed(const Run *r);

/* Run argv[0] (an absolute path) with envp (NULL: ours) for at most
 * timeout_usec, or until stop (NULL: never) asks; on_line (or NULL) gets
 * each line of its stderr. 0 with *ret filled in, or -errno when it could
 * not even be attempted. */
int run(char *const *argv, char *const *envp, uint64_t timeout_usec, LineFn on_line, const ImageStop *stop, Run *ret);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t mono_usec(void);
