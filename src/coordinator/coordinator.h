/* SPDX-License-Identifier: MIT */
#pragma once

/* The Session Coordinator (spec §4.3.5): one detached process per Domain.
 * It owns the Domain Store, the sandbox container, the control socket and
 * the PTYs of every session; CLIs talk to it over the control socket.
 *
 * Started by the leader CLI as `lazaret __coordinator` with:
 *   fd 3  a sealed memfd holding the LaunchSpec JSON
 *   fd 4  the write end of a pipe: "ok\n" once the control socket accepts
 *         connections, or "error: <one line>\n" when the start failed
 *   stdout and stderr: the log file in the Domain Root. */

#include <stdbool.h>

#include "launch.h"

/* COORDINATOR_SPEC_FD and COORDINATOR_STATUS_FD: launch.h (the hand-over). */
/* The watchdog's end of its pipe (its fd 3 is the same LaunchSpec). */
#define WATCHDOG_PIPE_FD 4

/* Run the coordinator until teardown. Returns the process exit status.
 * argv is main()'s: the watchdog (a fork of it) writes its name over it. */
int coordinator_main(int argc, char **argv);

/* The coordinator's watchdog, "lazaret __watchdog" to ps(1) (issue 16):
 * forked by the coordinator as it starts, in a session of its own, it
 * waits on a pipe whose write end only the coordinator holds. "done"
 * there means the coordinator cleaned up itself; the end of the pipe
 * without it means the coordinator died, and the watchdog removes what
 * the Domain Store records (the sandbox, its sidecar, the routers, the
 * sockets), as the next coordinator would. */
int coordinator_watchdog_main(bool now);

/* `lazaret __watchdog --now` (for 'lazaret stop' when no coordinator
 * answers): fd 3 is the Domain Root's copy of the LaunchSpec; it removes
 * what the store records at once. Exit 0: nothing was left; this: parts
 * were removed; 1: it failed. */
#define WATCHDOG_EXIT_REMOVED 10
/* ... and this when a coordinator holds the Domain Store (starting or
 * stopping). */
#define WATCHDOG_EXIT_BUSY 11
