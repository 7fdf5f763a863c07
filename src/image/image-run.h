/* SPDX-License-Identifier: MIT */
#pragma once

/* The helper programs of lazaret image build (mmdebstrap, tar, podman,
 * curl): run with fork and execve of an absolute path, an argument vector
 * and never a shell, stdin from /dev/null, stdout and stderr captured, in
 * a process group of their own so that a time limit or an interruption
 * stops everything they started. No signal handling here: the caller's
 * handler sets image_run_interrupted. */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#define RUN_STDOUT_MAX (16U * 1024 * 1024)
#define RUN_LINE_MAX   1024

/* Nonzero (the signal) once the build is to stop: the running helper is
 * stopped and run() returns with .interrupted. */
extern volatile sig_atomic_t image_run_interrupted;

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
 * timeout_usec; on_line (or NULL) gets each line of its stderr. 0 with
 * *ret filled in, or -errno when it could not even be attempted. */
int run(char *const *argv, char *const *envp, uint64_t timeout_usec, LineFn on_line, Run *ret);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t mono_usec(void);
