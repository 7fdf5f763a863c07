/* SPDX-License-Identifier: MIT */
#include "conn-dispatch.h"

#define S(x) (1U << (x))

static const ConnFrameRule rules[_CTL_TYPE_MAX] = {
        [CTL_HELLO] = { S(CONN_NEW), false },
        [CTL_SESSION_OPEN] = { S(CONN_READY), false },
        [CTL_TERMINAL_INPUT] = { S(CONN_SESSION), true },
        [CTL_TERMINAL_RESIZE] = { S(CONN_SESSION), true },
        [CTL_TERMINAL_SIGNAL] = { S(CONN_SESSION), true },
        [CTL_SESSION_CLOSE] = { S(CONN_SESSION), true },
        /* Status and stop need no session, only a Hello. */
        [CTL_STATUS_REQUEST] = { S(CONN_HELLO_WAIT) | S(CONN_READY) | S(CONN_SESSION), false },
        [CTL_STOP_REQUEST] = { S(CONN_HELLO_WAIT) | S(CONN_READY) | S(CONN_SESSION), false },
        [CTL_PROMPT_ANSWER] = { S(CONN_SESSION), true },
        [CTL_PROMPT_CANCEL] = { S(CONN_SESSION), true },
        [CTL_STATUS_WATCH] = { S(CONN_SESSION), true },
        [CTL_SANDBOX_PAUSE] = { S(CONN_SESSION), true },
        /* The coordinator's own: SessionOpened, TerminalOutput,
         * SessionExit, Status, Error, PromptRequest, PromptDone,
         * StatusLine (no states). */
};

const ConnFrameRule *conn_frame_rule(CtlType t) {
        if (t < 0 || t >= _CTL_TYPE_MAX || rules[t].states == 0)
                return NULL;
        return &rules[t];
}

bool conn_frame_allowed(CtlType t, ConnState state) {
        const ConnFrameRule *r = conn_frame_rule(t);
        return r && state >= 0 && state < _CONN_STATE_MAX && (r->states & S(state));
}

const char *conn_state_to_string(ConnState s) {
        static const char *const names[_CONN_STATE_MAX] = {
                [CONN_NEW] = "new",
                [CONN_HELLO_WAIT] = "hello-wait",
                [CONN_READY] = "ready",
                [CONN_SESSION] = "session",
        };
        return s >= 0 && s < _CONN_STATE_MAX ? names[s] : NULL;
}
