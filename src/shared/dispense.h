/* SPDX-License-Identifier: MIT */
#pragma once

/* The sandbox's door to the host's Unix sockets (issue 41, item 4).
 *
 * gVisor reaches no host Unix socket (runsc runs without host-uds). The two
 * the sandbox needs, the Escalation Socket and the broker's, are handed in
 * as descriptors instead: the coordinator runs lazaret-init --dispense in
 * the sandbox with one end of a socket pair (runsc exec --pass-fd), and it
 * listens on DISPENSE_DIR/<service>, a tmpfs of the sandbox's own. For each
 * connection it asks the coordinator with one byte, the service
 * (DISPENSE_ESCALATE, DISPENSE_BROKER or DISPENSE_FSMONITOR); the coordinator connects to the
 * real socket on the host and answers with one status byte (0, or an errno
 * value) carrying the connected descriptor (SCM_RIGHTS) when 0. The
 * dispenser hands the same answer to its client, which then talks on the
 * host descriptor directly: no bytes are copied inside.
 *
 * The coordinator connects only to the sockets it made or started;
 * the byte names which, nothing else is read from the sandbox. On the
 * native backend (no dispenser, the host's socket directory mounted) the
 * clients connect to their usual path. */

#include <stdint.h>

#define DISPENSE_DIR        "/run/lazaret/dispense"
#define DISPENSE_ESCALATE   'E'
#define DISPENSE_BROKER     'B'
#define DISPENSE_FSMONITOR  'F' /* git's file system monitor (coordinator/fsmonitor.h) */
#define DISPENSE_READY      'R' /* the dispenser's first byte: listening */
#define DISPENSE_TIMEOUT_MS 10000

/* The path inside the sandbox for service (DISPENSE_*), or NULL. */
const char *dispense_path(char service);

/* Send one status byte, with fd (>= 0) attached. 0 or -errno. */
int dispense_send(int sock, uint8_t status, int fd);

/* Receive one status byte and the descriptor it carries (close-on-exec).
 * Returns 0 with *ret_fd (a status of 0 with no descriptor is -EBADMSG),
 * -status for a refusal, -EPIPE at end of file, or -errno. */
int dispense_recv(int sock, int *ret_fd);

/* A connected stream socket to service: through the sandbox's dispenser
 * when there is one (its socket exists), else connected to fallback (NULL:
 * none). nonblock sets O_NONBLOCK on the result. Returns the descriptor
 * (close-on-exec) or -errno; *ret_via (or NULL) says which path was
 * tried last, for messages. */
int dispense_connect(char service, const char *fallback, int nonblock, const char **ret_via);
