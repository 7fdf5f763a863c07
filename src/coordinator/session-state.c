/* SPDX-License-Identifier: MIT */
#include <stddef.h>

#include "session-state.h"

#define N_SESSION _SESSION_STATE_INVALID

/* [state][event]: the next state; N_SESSION where there is none. */
static const SessionState session_table[_SESSION_STATE_MAX][_SESSION_EVENT_MAX] = {
        [SESSION_STATE_OPENING] = {
                [SESSION_EVENT_STARTED] = SESSION_STATE_RUNNING,
                [SESSION_EVENT_REAPED] = N_SESSION,
                /* The sandbox stops while its record is being made. */
                [SESSION_EVENT_FINISHED] = SESSION_STATE_FINISHED,
                [SESSION_EVENT_ABANDONED] = SESSION_STATE_FINISHED,
        },
        [SESSION_STATE_RUNNING] = {
                [SESSION_EVENT_STARTED] = N_SESSION,
                [SESSION_EVENT_REAPED] = SESSION_STATE_EXITED,
                /* Reaped first (teardown kills and waits), then finished. */
                [SESSION_EVENT_FINISHED] = N_SESSION,
                [SESSION_EVENT_ABANDONED] = N_SESSION,
        },
        [SESSION_STATE_EXITED] = {
                [SESSION_EVENT_STARTED] = N_SESSION,
                [SESSION_EVENT_REAPED] = N_SESSION,
                [SESSION_EVENT_FINISHED] = SESSION_STATE_FINISHED,
                [SESSION_EVENT_ABANDONED] = N_SESSION,
        },
        [SESSION_STATE_FINISHED] = {
                [SESSION_EVENT_STARTED] = N_SESSION,
                [SESSION_EVENT_REAPED] = N_SESSION,
                [SESSION_EVENT_FINISHED] = N_SESSION,
                [SESSION_EVENT_ABANDONED] = N_SESSION,
        },
};

SessionState session_state_next(SessionState s, SessionEvent event) {
        if (s < 0 || s >= _SESSION_STATE_MAX || event < 0 || event >= _SESSION_EVENT_MAX)
                return _SESSION_STATE_INVALID;
        return session_table[s][event];
}

const char *session_state_to_string(SessionState s) {
        static const char *const names[_SESSION_STATE_MAX] = {
                [SESSION_STATE_OPENING] = "opening",
                [SESSION_STATE_RUNNING] = "running",
                [SESSION_STATE_EXITED] = "exited",
                [SESSION_STATE_FINISHED] = "finished",
        };
        return s >= 0 && s < _SESSION_STATE_MAX ? names[s] : NULL;
}

const char *session_event_to_string(SessionEvent e) {
        static const char *const names[_SESSION_EVENT_MAX] = {
                [SESSION_EVENT_STARTED] = "started",
                [SESSION_EVENT_REAPED] = "reaped",
                [SESSION_EVENT_FINISHED] = "finished",
                [SESSION_EVENT_ABANDONED] = "abandoned",
        };
        return e >= 0 && e < _SESSION_EVENT_MAX ? names[e] : NULL;
}

#define N_PAUSE _PAUSE_STATE_INVALID

static const PauseState pause_table[_PAUSE_STATE_MAX][_PAUSE_EVENT_MAX] = {
        [PAUSE_STATE_RUNNING] = {
                [PAUSE_EVENT_PAUSE] = PAUSE_STATE_PAUSING,
                [PAUSE_EVENT_RESUME] = N_PAUSE,
                [PAUSE_EVENT_DONE] = N_PAUSE,
                [PAUSE_EVENT_FAILED] = N_PAUSE,
                [PAUSE_EVENT_TEARDOWN] = N_PAUSE,
        },
        [PAUSE_STATE_PAUSING] = {
                [PAUSE_EVENT_PAUSE] = N_PAUSE,
                [PAUSE_EVENT_RESUME] = N_PAUSE,
                [PAUSE_EVENT_DONE] = PAUSE_STATE_PAUSED,
                [PAUSE_EVENT_FAILED] = PAUSE_STATE_RUNNING,
                /* Not paused yet: nothing to resume. */
                [PAUSE_EVENT_TEARDOWN] = N_PAUSE,
        },
        [PAUSE_STATE_PAUSED] = {
                [PAUSE_EVENT_PAUSE] = N_PAUSE,
                [PAUSE_EVENT_RESUME] = PAUSE_STATE_RESUMING,
                [PAUSE_EVENT_DONE] = N_PAUSE,
                [PAUSE_EVENT_FAILED] = N_PAUSE,
                [PAUSE_EVENT_TEARDOWN] = PAUSE_STATE_RUNNING,
        },
        [PAUSE_STATE_RESUMING] = {
                [PAUSE_EVENT_PAUSE] = N_PAUSE,
                [PAUSE_EVENT_RESUME] = N_PAUSE,
                [PAUSE_EVENT_DONE] = PAUSE_STATE_RUNNING,
                [PAUSE_EVENT_FAILED] = PAUSE_STATE_PAUSED,
                [PAUSE_EVENT_TEARDOWN] = PAUSE_STATE_RUNNING,
        },
};

PauseState pause_state_next(PauseState s, PauseEvent event) {
        if (s < 0 || s >= _PAUSE_STATE_MAX || event < 0 || event >= _PAUSE_EVENT_MAX)
                return _PAUSE_STATE_INVALID;
        return pause_table[s][event];
}

const char *pause_state_to_string(PauseState s) {
        static const char *const names[_PAUSE_STATE_MAX] = {
                [PAUSE_STATE_RUNNING] = "running",
                [PAUSE_STATE_PAUSING] = "pausing",
                [PAUSE_STATE_PAUSED] = "paused",
                [PAUSE_STATE_RESUMING] = "resuming",
        };
        return s >= 0 && s < _PAUSE_STATE_MAX ? names[s] : NULL;
}

const char *pause_event_to_string(PauseEvent e) {
        static const char *const names[_PAUSE_EVENT_MAX] = {
                [PAUSE_EVENT_PAUSE] = "pause",   [PAUSE_EVENT_RESUME] = "resume",     [PAUSE_EVENT_DONE] = "done",
                [PAUSE_EVENT_FAILED] = "failed", [PAUSE_EVENT_TEARDOWN] = "teardown",
        };
        return e >= 0 && e < _PAUSE_EVENT_MAX ? names[e] : NULL;
}
