/* SPDX-License-Identifier: MIT */
#pragma once

/* The coordinator's state machines for a session and for the sandbox's
 * pause (issue 43; style: states as enums, transitions in one place). Pure:
 * the coordinator (coordinator-session.c, coordinator.c,
 * coordinator-parts.c) applies them, the unit test drives them. A
 * transition that is not in the table returns _X_STATE_INVALID (-EINVAL)
 * and the caller keeps the state it had. */

#include <errno.h>
#include <stdbool.h>

typedef enum SessionState {
        SESSION_STATE_OPENING, /* recorded (Intent), its exec client not started yet */
        SESSION_STATE_RUNNING, /* its exec client runs (pid > 0, not reaped) */
        SESSION_STATE_EXITED, /* its exec client was reaped; its output drains */
        SESSION_STATE_FINISHED, /* its end was told, or it was given up before it ran: freed once its CLI is gone */
        _SESSION_STATE_MAX,
        _SESSION_STATE_INVALID = -EINVAL,
} SessionState;

typedef enum SessionEvent {
        SESSION_EVENT_STARTED, /* its exec client was started */
        SESSION_EVENT_REAPED, /* its exec client exited and was reaped */
        SESSION_EVENT_FINISHED, /* its exit was sent (session_finish): after it ran, or at teardown before */
        SESSION_EVENT_ABANDONED, /* it could not be recorded or started */
        _SESSION_EVENT_MAX,
        _SESSION_EVENT_INVALID = -EINVAL,
} SessionEvent;

/* The state event leads to from s, or _SESSION_STATE_INVALID. */
SessionState session_state_next(SessionState s, SessionEvent event);

/* Its exec client runs: signals and hang-ups go to it, SIGCHLD may reap it. */
static inline bool session_state_running(SessionState s) {
        return s == SESSION_STATE_RUNNING;
}

/* Not finished: it counts as a session of the sandbox (status, status line). */
static inline bool session_state_live(SessionState s) {
        return s >= 0 && s < SESSION_STATE_FINISHED;
}

const char *session_state_to_string(SessionState s);
const char *session_event_to_string(SessionEvent e);

typedef enum PauseState {
        PAUSE_STATE_RUNNING, /* not paused */
        PAUSE_STATE_PAUSING, /* runsc pause under way */
        PAUSE_STATE_PAUSED,
        PAUSE_STATE_RESUMING, /* runsc resume under way */
        _PAUSE_STATE_MAX,
        _PAUSE_STATE_INVALID = -EINVAL,
} PauseState;

typedef enum PauseEvent {
        PAUSE_EVENT_PAUSE, /* a session asked to pause */
        PAUSE_EVENT_RESUME, /* a session asked to resume */
        PAUSE_EVENT_DONE, /* runsc pause or resume succeeded */
        PAUSE_EVENT_FAILED, /* runsc pause or resume failed: as before it */
        PAUSE_EVENT_TEARDOWN, /* resumed at teardown, so that it can stop */
        _PAUSE_EVENT_MAX,
        _PAUSE_EVENT_INVALID = -EINVAL,
} PauseEvent;

/* The state event leads to from s, or _PAUSE_STATE_INVALID: a request
 * while runsc is still at work, to pause a paused sandbox or resume a
 * running one is not a transition. */
PauseState pause_state_next(PauseState s, PauseEvent event);

/* What status shows as "paused": paused, or being resumed. */
static inline bool pause_state_paused(PauseState s) {
        return s == PAUSE_STATE_PAUSED || s == PAUSE_STATE_RESUMING;
}

const char *pause_state_to_string(PauseState s);
const char *pause_event_to_string(PauseEvent e);
