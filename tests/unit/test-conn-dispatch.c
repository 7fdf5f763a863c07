/* SPDX-License-Identifier: MIT */
/* The control connection's dispatch table (lazaret/conn-dispatch, issue
 * 43; decision 9): a message in the wrong state is refused, what only the
 * coordinator sends is never taken, and every message a CLI sends has a
 * rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "conn-dispatch.h"

#define ALL_STATES ((1U << _CONN_STATE_MAX) - 1)
#define S(x)       (1U << (x))

static const struct {
        CtlType type;
        unsigned states;
        bool session;
} want[] = {
        { CTL_HELLO, S(CONN_NEW), false },
        { CTL_SESSION_OPEN, S(CONN_READY), false },
        { CTL_TERMINAL_INPUT, S(CONN_SESSION), true },
        { CTL_TERMINAL_RESIZE, S(CONN_SESSION), true },
        { CTL_TERMINAL_SIGNAL, S(CONN_SESSION), true },
        { CTL_SESSION_CLOSE, S(CONN_SESSION), true },
        { CTL_STATUS_REQUEST, ALL_STATES & ~S(CONN_NEW), false },
        { CTL_STOP_REQUEST, ALL_STATES & ~S(CONN_NEW), false },
        { CTL_PROMPT_ANSWER, S(CONN_SESSION), true },
        { CTL_PROMPT_CANCEL, S(CONN_SESSION), true },
        { CTL_STATUS_WATCH, S(CONN_SESSION), true },
        { CTL_SANDBOX_PAUSE, S(CONN_SESSION), true },
};

static const CtlType coordinators_own[] = {
        CTL_SESSION_OPENED, CTL_TERMINAL_OUTPUT, CTL_SESSION_EXIT, CTL_STATUS,
        CTL_ERROR,          CTL_PROMPT_REQUEST,  CTL_PROMPT_DONE,  CTL_STATUS_LINE,
};

static void test_each_type_in_each_state(void **state) {
        (void) state;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                const ConnFrameRule *r = conn_frame_rule(want[i].type);
                assert_non_null(r);
                assert_int_equal(r->session, want[i].session);
                for (ConnState st = 0; st < _CONN_STATE_MAX; st++)
                        assert_int_equal(conn_frame_allowed(want[i].type, st), !!(want[i].states & S(st)));
        }
}

static void test_wrong_state_refused(void **state) {
        (void) state;
        /* Nothing but Hello before Hello: no session, no status, no stop. */
        for (CtlType t = 0; t < _CTL_TYPE_MAX; t++)
                assert_int_equal(conn_frame_allowed(t, CONN_NEW), t == CTL_HELLO);
        /* No second Hello; no session opened twice on one connection. */
        assert_false(conn_frame_allowed(CTL_HELLO, CONN_READY));
        assert_false(conn_frame_allowed(CTL_HELLO, CONN_SESSION));
        assert_false(conn_frame_allowed(CTL_SESSION_OPEN, CONN_SESSION));
        /* Input and prompt answers before the session is open. */
        assert_false(conn_frame_allowed(CTL_TERMINAL_INPUT, CONN_READY));
        assert_false(conn_frame_allowed(CTL_PROMPT_ANSWER, CONN_READY));
        assert_false(conn_frame_allowed(CTL_SANDBOX_PAUSE, CONN_HELLO_WAIT));
        /* Out of range. */
        assert_false(conn_frame_allowed(_CTL_TYPE_INVALID, CONN_SESSION));
        assert_false(conn_frame_allowed(_CTL_TYPE_MAX, CONN_SESSION));
        assert_false(conn_frame_allowed(CTL_HELLO, _CONN_STATE_MAX));
        assert_null(conn_frame_rule(_CTL_TYPE_INVALID));
}

static void test_coordinators_own_never_taken(void **state) {
        (void) state;
        for (size_t i = 0; i < sizeof(coordinators_own) / sizeof(coordinators_own[0]); i++) {
                assert_null(conn_frame_rule(coordinators_own[i]));
                for (ConnState st = 0; st < _CONN_STATE_MAX; st++)
                        assert_false(conn_frame_allowed(coordinators_own[i], st));
        }
        /* Every type is one or the other: a new type needs a decision. */
        assert_int_equal(sizeof(want) / sizeof(want[0]) + sizeof(coordinators_own) / sizeof(coordinators_own[0]),
                         _CTL_TYPE_MAX);
}

static void test_state_names(void **state) {
        (void) state;
        assert_string_equal(conn_state_to_string(CONN_NEW), "new");
        assert_string_equal(conn_state_to_string(CONN_SESSION), "session");
        assert_null(conn_state_to_string(_CONN_STATE_MAX));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_each_type_in_each_state),
                cmocka_unit_test(test_wrong_state_refused),
                cmocka_unit_test(test_coordinators_own_never_taken),
                cmocka_unit_test(test_state_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
