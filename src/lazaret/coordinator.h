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

#include "launch.h"

#define COORDINATOR_SPEC_FD   3
#define COORDINATOR_STATUS_FD 4

/* Run the coordinator until teardown. Returns the process exit status. */
int coordinator_main(void);
