/* SPDX-License-Identifier: MIT */
#pragma once

/* Running helper programs (podman, runsc, ...) without a shell: argument
 * vectors only, stdin from /dev/null, output captured with caps, a time
 * limit that kills the program's whole process group. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

#define EXEC_STDOUT_MAX (4U * 1024 * 1024)
/* Where programs are looked for when PATH is unset or empty. */
#define DEFAULT_SEARCH_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
#define EXEC_STDERR_MAX     (64U * 1024)

typedef struct ExecResult {
        int spawn_error; /* -errno when the program could not be started */
        bool timed_out; /* killed after the time limit */
        int status; /* exit status, or 128 + signal */
        char *out; /* NUL-terminated, capped at EXEC_STDOUT_MAX */
        char *err; /* capped at EXEC_STDERR_MAX */
} ExecResult;

void exec_result_done(ExecResult *r);
/* True when the program could not start, timed out or exited non-zero. */
bool exec_result_failed(const ExecResult *r);

/* Run path with argv (argv[0] included, NULL-terminated) in its own process
 * group, with the caller's environment, default signal dispositions and only
 * fds 0-2. A program that cannot be started, times out or fails is described
 * in *ret; the return value is -errno only when running it could not even be
 * attempted (pipes, memory). */
int exec_capture(const char *path, const char *const *argv, uint64_t timeout_usec, ExecResult *ret);

/* The same, with fds[i] placed at fd 3 + i in the program (at most 8). */
int exec_capture_fds(const char *path, const char *const *argv, const int *fds, size_t n_fds, uint64_t timeout_usec,
                     ExecResult *ret);

/* Look name up in the ':'-separated absolute directories of search (empty
 * and relative entries are skipped: they would mean the current directory).
 * Returns 0 and the path (caller frees), -ENOENT, or -ENOMEM. */
int exec_find_program(const char *search, const char *name, char **ret);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t now_usec(void);
