/* SPDX-License-Identifier: MIT */
#pragma once

/* The coordinator's end of the sandbox's door to the host's sockets
 * (shared/dispense.h; issue 41, item 4): gVisor runs without host-uds, and
 * the Escalation Socket, the broker's and git's file system monitor's
 * (issue 44) reach the sandbox only as
 * descriptors this hands in, one per connection, through lazaret-init
 * --dispense (run in the sandbox with runsc exec --pass-fd). A thread of
 * its own answers, so the requests of the readiness probes, made while the
 * coordinator waits on them, are answered too. When the sandbox's end
 * closes (the agent can kill the dispenser), it is run again, at most
 * every 2 s, backing off to 30 s while that fails. */

#include <stdbool.h>

typedef struct DispenserConfig {
        const char *runsc; /* the runsc binary */
        const char *runsc_root;
        const char *sandbox_id;
        bool rootless;
        const char *escalate_socket; /* the host path, or NULL: no such service */
        const char *broker_socket; /* the host path, or NULL */
        const char *fsmonitor_socket; /* the host path, or NULL (coordinator/fsmonitor.h) */
} DispenserConfig;

typedef struct Dispenser Dispenser;

/* Runs the dispenser in the sandbox and waits (10 s) until it listens,
 * then starts the thread. 0, or -errno with *ret_error (caller frees):
 * nothing is left running then. */
int dispenser_start(const DispenserConfig *c, Dispenser **ret, char **ret_error);

/* Stops the thread and closes our end (the dispenser in the sandbox then
 * exits). NULL-safe; returns NULL. */
Dispenser *dispenser_stop(Dispenser *d);
