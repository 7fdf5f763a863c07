/* SPDX-License-Identifier: MIT */
#pragma once

/* git's file system monitor for the sandbox's working tree, answered from
 * the host (issue 44). Inside gVisor every lstat() costs a trip through the
 * sentry, and `git status` makes one per tracked file (20,000 files: most
 * of its time). With core.fsmonitor set (the sandbox's environment, never
 * the repository's configuration), git asks a hook which paths may have
 * changed since a token it kept, and lstat()s only those.
 *
 * The host watches the directory that is /workspace (the agent's worktree
 * in branch mode, the workspace itself otherwise; not .git) with inotify,
 * in a thread of its own, and keeps a journal of the paths that changed.
 * The hook inside (lazaret-init --fsmonitor) reaches it through the
 * sandbox's dispenser (shared/dispense.h, service 'F'): it sends
 * "2 TOKEN\n", the thread reads every event the kernel has queued (a
 * change the sandbox made before it asked is queued by then: gVisor sends
 * changes to a shared mount to the host synchronously), and answers with
 * git's hook protocol, version 2: the new token, NUL, then each changed
 * path relative to the top, NUL-terminated. A token it did not give, one
 * older than the journal holds, an overflowed event queue or a tree it
 * could not watch whole get "/": everything may have changed, and git
 * looks at every file, as without a monitor.
 *
 * The sandbox can only ask; what it sends is a token to parse, and the
 * answer is names the agent could list itself. */

#include <stdint.h>

typedef struct FsMonitor FsMonitor;

typedef struct FsMonitorStats {
        uint64_t queries, trivial, dirs, overflows;
        char why[128]; /* why answers are trivial now, or "" */
} FsMonitorStats;

/* Watch root (not its top-level .git) and answer on a Unix socket bound at
 * socket_path (any file there is replaced). The tree is walked on the
 * thread; queries wait until it is. 0, or -errno: nothing left then. */
int fsmonitor_start(const char *root, const char *socket_path, FsMonitor **ret);

/* Stop the thread, close everything and remove the socket. NULL-safe;
 * returns NULL. */
FsMonitor *fsmonitor_stop(FsMonitor *m);

void fsmonitor_stats(FsMonitor *m, FsMonitorStats *ret);

/* The monitor's socket next to the Domain's control socket:
 * "<control socket>.fsmon" (caller frees; NULL on OOM). */
char *fsmonitor_socket_path(const char *control_socket);
