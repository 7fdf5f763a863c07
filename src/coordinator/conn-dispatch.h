/* SPDX-License-Identifier: MIT */
#pragma once

/* Which control messages a connection to the coordinator takes, in which
 * state (architecture decision 9: a {type, allowed states} table, as
 * OpenSSH's monitor has). Pure: the coordinator's handlers are in
 * coordinator-session.c, one per type this table lets in; anything else
 * is "unexpected message for this connection's state". */

#include <stdbool.h>

#include "ctl-proto.h"

typedef enum ConnState {
        CONN_NEW, /* waiting for Hello */
        CONN_HELLO_WAIT, /* Hello seen, its network policy being checked or applied: frames wait */
        CONN_READY, /* Hello accepted */
        CONN_SESSION, /* owns a session */
        _CONN_STATE_MAX,
} ConnState;

typedef struct ConnFrameRule {
        unsigned states; /* 1 << ConnState for each state that takes it */
        bool session; /* it names the connection's own session (session_id) */
} ConnFrameRule;

/* The rule for type t, or NULL: a message only the coordinator sends (or
 * none at all), never taken from a client. */
const ConnFrameRule *conn_frame_rule(CtlType t);

/* May a connection in state take a message of type t? */
bool conn_frame_allowed(CtlType t, ConnState state);

const char *conn_state_to_string(ConnState s);
