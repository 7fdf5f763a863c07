/* SPDX-License-Identifier: MIT */
#pragma once

/* The coordinator's end of host escalation (spec §5, decisions 10, 11,
 * 14): the Trust Anchor and the sandbox's certificates, the Escalation
 * Socket, and the pipeline every request goes through:
 *   mTLS handshake (TLS 1.3, client certificate from our CA) → the
 *   certificate names this profile and sandbox → one frame of at most 64 KiB
 *   → strict parse → the session's anchor verifies the delegation and the
 *   signature → fresh timestamp (±5 min), unused request id → metacharacter
 *   check → shell-words split → an auto_approve entry matches → run by
 *   posix_spawn (fixed environment, fds 0-2 only, the workspace's host
 *   directory as cwd, output capped) → response → audit record.
 * A request that needs a person goes to the terminal of the session that
 * signed it (escalation_answer), one at a time per session, at most 8 in
 * its queue; without a terminal it is refused with that reason. Everything
 * past the handshake is on the audit trail.
 *
 * The module runs on its own epoll set, which the coordinator watches as
 * one fd; it hears of its children's exits through escalation_reaped(). */

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "autoapprove.h"
#include "launch.h"
#include "session-anchor.h"

/* A request for the person at a session's terminal. */
typedef struct EscalationPrompt {
        const char *session_id, *request_id, *profile, *command, *justification;
        unsigned queued; /* requests of the session waiting behind it */
} EscalationPrompt;

typedef struct EscalationHost {
        /* The anchor key of a session that is still open, and whether it
         * has a terminal: 0, or -ENOENT. */
        int (*session)(void *userdata, const char *session_id, unsigned char ret_anchor[SESSION_KEY_LEN],
                       bool *ret_interactive);
        /* Append a record to the audit trail. */
        int (*audit)(void *userdata, json_t *record);
        /* Put an event on the Domain's record (data taken): "requested"
         * once a request is parsed, "decided" with its decision and
         * outcome (the audit record's request_id links the two). May be
         * NULL. */
        void (*event)(void *userdata, const char *kind, const char *session_id, json_t *data);
        /* Put the prompt up on the session's terminal: 0, or -ENOENT when
         * the session or its CLI is gone. */
        int (*prompt)(void *userdata, const EscalationPrompt *p);
        /* A shown request is over (its approved command finished, or the
         * requester withdrew): the terminal takes the prompt down. */
        void (*prompt_done)(void *userdata, const char *session_id, const char *request_id);
        void *userdata;
} EscalationHost;

typedef struct Escalation Escalation;

/* Where a Domain's escalation lives: <runtime dir>/escalate-<hash> (the
 * certificates in certs/ under it) and <socket_dir>/<hash>. The coordinator
 * records both before escalation_new(), so that a successor can remove what
 * a killed coordinator left (escalation_remove: the socket, the three
 * certificate files, the directories; nothing else). */
int escalation_paths(const LaunchSpec *s, char **ret_state_dir, char **ret_socket_dir);
void escalation_remove(const char *state_dir, const char *socket_dir);

/* Make the CA and the sandbox's certificates (in a private directory of
 * the runtime dir), and the socket (in socket_dir/<hash>/, the directory
 * made 0700 and checked to be ours). workspace: the host directory behind
 * /workspace. On failure -errno and one line in *ret_error. */
int escalation_new(const LaunchSpec *s, const char *sandbox_id, const char *workspace, const EscalationHost *host,
                   Escalation **ret, char **ret_error);
/* Close everything, kill running commands, remove the socket and the
 * certificates. */
Escalation *escalation_free(Escalation *e);

const char *escalation_certs_dir(const Escalation *e); /* mount at /run/lazaret/certs, read-only */
const char *escalation_socket_dir(const Escalation *e); /* mount at /run/lazaret/sock */

/* The fd the coordinator watches (readable: call escalation_dispatch). */
int escalation_fd(const Escalation *e);
void escalation_dispatch(Escalation *e);
/* The person's answer to the prompt shown for request_id on the session's
 * terminal: decision "approve" (edited: the command as they changed it, or
 * NULL), "deny", "abort" (denied; the caller ends the session) or "unable"
 * (refused: the terminal cannot show the prompt). An
 * approved command with metacharacters runs under /bin/sh -c, any other as
 * its words. -ENOENT when no such prompt is up (withdrawn meanwhile). */
int escalation_answer(Escalation *e, const char *session_id, const char *request_id, const char *decision,
                      const char *edited);
/* Stop the approved command of that prompt: SIGTERM to its process group,
 * SIGKILL two seconds later. -ENOENT when none runs. */
int escalation_cancel(Escalation *e, const char *session_id, const char *request_id);
/* The session ended or its CLI left: its waiting requests are refused. */
void escalation_session_gone(Escalation *e, const char *session_id);
/* Reap the approved commands that exited (each by its pid: other threads
 * of the coordinator wait for children of their own). */
void escalation_reap(Escalation *e);
