/* SPDX-License-Identifier: MIT */
#pragma once

/* The CLI side of the control socket: hold-to-bind locking (spec §4.3.5
 * step 1), spawning the coordinator, framed I/O. */

#include <stdbool.h>

#include "ctl-proto.h"
#include "launch.h"

/* Connect to a running coordinator's socket. -ECONNREFUSED / -ENOENT when
 * none listens. */
int client_connect(const char *socket_path, int *ret_fd);

/* Connect to the Domain's coordinator, starting one if none runs:
 * flock(LOCK_EX|LOCK_NB) on the lock file; the leader spawns the coordinator
 * and keeps the lock until the socket accepts connections (10 s limit);
 * followers wait for the lock, release it and connect. 1 when this call
 * started the coordinator (with spec), 0 when one was running. On failure
 * *ret_error holds one line naming the cause (caller frees). */
int client_connect_or_spawn(const LaunchSpec *spec, int *ret_fd, char **ret_error);

/* Send hello (a CTL_HELLO) on fd with the key of the socket at
 * socket_path (ctl-key.h), which the coordinator requires before anything
 * else. When the key cannot be read, *ret_error (caller frees) names the
 * file, the cause and the fix, and nothing is sent; a failed send leaves it
 * NULL. Returns 0 or -errno. */
int client_send_hello(int fd, const char *socket_path, CtlMessage *hello, char **ret_error);

/* Send a message (blocking). */
int client_send(int fd, const CtlMessage *m);

/* Read one message (blocking, or up to timeout_ms when >= 0: -ETIMEDOUT).
 * -ECONNRESET when the peer closed. */
int client_recv(int fd, CtlReader *rd, CtlMessage *ret, int timeout_ms);

/* Write a whole buffer, retrying short writes. */
int write_all(int fd, const void *buf, size_t n);
