/* SPDX-License-Identifier: MIT */
#pragma once

/* The work files' disk ceiling (issue 16): the workspace (or the agent's
 * worktree) and the repository's git directory are host directories the
 * sandbox writes through a bind mount or the git router, where no file
 * system of ours can say ENOSPC. A helper, `lazaret __diskwatch`, measures
 * them instead: a walk at the start (the baseline), then every
 * DISKWATCH_TICK_USEC a look at how much the file systems under them grew
 * (statfs, nearly free), and a walk again when that growth could have
 * taken them past the limit, or a minute went by. Each measure adds the
 * files unlinked but still held open on their file systems
 * (diskwatch_unlinked). It writes "base BYTES"
 * and then "used BYTES" lines to its stdout; the coordinator waits for the
 * baseline before the sandbox starts, and stops the sandbox when they grew
 * by more than disk_limit during the run.
 *
 * Rootless it runs in Podman's user namespace as its root, so directories
 * the sandbox's other users made (owned by subordinate ids, mode 0700) are
 * no hiding place. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch.h"

#define DISKWATCH_TICK_USEC (UINT64_C(2) * 1000000)
#define DISKWATCH_WALK_USEC (UINT64_C(60) * 1000000)

/* The bytes of disk the files under each path take (st_blocks; a file
 * with several links counted once; other file systems mounted below not
 * entered). Unreadable directories are skipped and counted in
 * *ret_unreadable. */
int diskwatch_measure(char *const *paths, uint64_t *ret_bytes, uint64_t *ret_unreadable);

/* The bytes of disk taken by files unlinked but still open (st_nlink 0,
 * each inode once) on the file systems of paths, held by a process of the
 * roots' trees (a root or a descendant of one) whose /proc/PID/fd this
 * one may read: no walk finds them, yet they are the disk's until the
 * last descriptor closes (issue 41). A file another program of the
 * person's holds is not the sandbox's. Only a link that names a deleted
 * file is followed. */
int diskwatch_unlinked(char *const *paths, const pid_t *roots, size_t n_roots, uint64_t *ret_bytes);

/* `lazaret __diskwatch PARENT_PID [=]LIMIT_BYTES PIDFILE|- PATH...`: the
 * unlinked files of the parent's tree count, and of conmon's when PIDFILE
 * (read at each measure) names it; "=" before the limit: it is on what
 * the paths hold, not on their growth. */
int diskwatch_main(int argc, char **argv);

typedef struct DiskWatch {
        /* Set before the start: the limit is on what the paths hold, not
         * on what they grew by (the persistent directories' upper
         * directories, issue 44); diskwatch_grown() is then what they
         * hold. */
        bool absolute;
        pid_t pid;
        int fd; /* the helper's stdout */
        char buf[256];
        size_t len;
        bool have_base, have_used;
        uint64_t base, used;
} DiskWatch;

#define DISKWATCH_INIT ((DiskWatch){ .fd = -EBADF })

/* Start the helper for paths (NULL-terminated); pidfile (or NULL) is
 * where the sandbox's supervisor's pid will be written (gVisor's conmon),
 * whose tree's unlinked files count as well as ours. */
int diskwatch_start(const LaunchSpec *s, char *const *paths, const char *pidfile, uint64_t limit_bytes, DiskWatch *w);
/* Read what it wrote: 1 when the figures changed, 0 when not, -EPIPE when
 * it ended. */
int diskwatch_read(DiskWatch *w);
/* Bytes the work files grew by since the start (0 before the baseline);
 * absolute: what they hold. */
uint64_t diskwatch_grown(const DiskWatch *w);
/* End it (SIGKILL) and reap it; closes the fd. */
void diskwatch_stop(DiskWatch *w);
