/* SPDX-License-Identifier: MIT */
/* The coordinator's session and pause state machines (lazaret/
 * session-state, issue 43): every transition the table has, and that
 * everything else is refused, state for state and event for event. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "session-state.h"

#define NO_S _SESSION_STATE_INVALID
#define NO_P _PAUSE_STATE_INVALID

static const struct {
        SessionState from;
        SessionEvent event;
        SessionState to;
} session_want[] = {
        { SESSION_STATE_OPENING, SESSION_EVENT_STARTED, SESSION_STATE_RUNNING },
        { SESSION_STATE_OPENING, SESSION_EVENT_ABANDONED, SESSION_STATE_FINISHED },
        /* Teardown while its record is being made. */
        { SESSION_STATE_OPENING, SESSION_EVENT_FINISHED, SESSION_STATE_FINISHED },
        { SESSION_STATE_RUNNING, SESSION_EVENT_REAPED, SESSION_STATE_EXITED },
        { SESSION_STATE_EXITED, SESSION_EVENT_FINISHED, SESSION_STATE_FINISHED },
};

static SessionState session_expected(SessionState from, SessionEvent e) {
        for (size_t i = 0; i < sizeof(session_want) / sizeof(session_want[0]); i++)
                if (session_want[i].from == from && session_want[i].event == e)
                        return session_want[i].to;
        return NO_S;
}

static void test_session_table(void **state) {
        (void) state;
        for (SessionState s = 0; s < _SESSION_STATE_MAX; s++)
                for (SessionEvent e = 0; e < _SESSION_EVENT_MAX; e++)
                        assert_int_equal(session_state_next(s, e), session_expected(s, e));
}

static void test_session_refusals(void **state) {
        (void) state;
        /* Nothing leaves FINISHED: a finished session is not reaped,
         * started or finished again. */
        for (SessionEvent e = 0; e < _SESSION_EVENT_MAX; e++)
                assert_int_equal(session_state_next(SESSION_STATE_FINISHED, e), NO_S);
        /* A running exec client is reaped before its end is told. */
        assert_int_equal(session_state_next(SESSION_STATE_RUNNING, SESSION_EVENT_FINISHED), NO_S);
        /* Never started twice; a session that ran is not abandoned. */
        assert_int_equal(session_state_next(SESSION_STATE_RUNNING, SESSION_EVENT_STARTED), NO_S);
        assert_int_equal(session_state_next(SESSION_STATE_RUNNING, SESSION_EVENT_ABANDONED), NO_S);
        assert_int_equal(session_state_next(SESSION_STATE_EXITED, SESSION_EVENT_REAPED), NO_S);
        /* Out of range either way. */
        assert_int_equal(session_state_next(_SESSION_STATE_INVALID, SESSION_EVENT_STARTED), NO_S);
        assert_int_equal(session_state_next(_SESSION_STATE_MAX, SESSION_EVENT_STARTED), NO_S);
        assert_int_equal(session_state_next(SESSION_STATE_OPENING, _SESSION_EVENT_MAX), NO_S);
        assert_int_equal(session_state_next(SESSION_STATE_OPENING, _SESSION_EVENT_INVALID), NO_S);
}

static void test_session_lives(void **state) {
        (void) state;
        /* The whole life of a session that ran, and of one given up. */
        SessionState s = SESSION_STATE_OPENING;
        assert_true(session_state_live(s) && !session_state_running(s));
        s = session_state_next(s, SESSION_EVENT_STARTED);
        assert_true(session_state_live(s) && session_state_running(s));
        s = session_state_next(s, SESSION_EVENT_REAPED);
        assert_true(session_state_live(s) && !session_state_running(s));
        s = session_state_next(s, SESSION_EVENT_FINISHED);
        assert_int_equal(s, SESSION_STATE_FINISHED);
        assert_false(session_state_live(s) || session_state_running(s));
        assert_int_equal(session_state_next(SESSION_STATE_OPENING, SESSION_EVENT_ABANDONED), SESSION_STATE_FINISHED);
        assert_false(session_state_live(_SESSION_STATE_INVALID));
}

static void test_session_names(void **state) {
        (void) state;
        for (SessionState s = 0; s < _SESSION_STATE_MAX; s++)
                assert_non_null(session_state_to_string(s));
        for (SessionEvent e = 0; e < _SESSION_EVENT_MAX; e++)
                assert_non_null(session_event_to_string(e));
        assert_null(session_state_to_string(_SESSION_STATE_MAX));
        assert_null(session_state_to_string(_SESSION_STATE_INVALID));
        assert_null(session_event_to_string(_SESSION_EVENT_MAX));
        assert_string_equal(session_state_to_string(SESSION_STATE_EXITED), "exited");
}

static const struct {
        PauseState from;
        PauseEvent event;
        PauseState to;
} pause_want[] = {
        { PAUSE_STATE_RUNNING, PAUSE_EVENT_PAUSE, PAUSE_STATE_PAUSING },
        { PAUSE_STATE_PAUSING, PAUSE_EVENT_DONE, PAUSE_STATE_PAUSED },
        { PAUSE_STATE_PAUSING, PAUSE_EVENT_FAILED, PAUSE_STATE_RUNNING },
        { PAUSE_STATE_PAUSED, PAUSE_EVENT_RESUME, PAUSE_STATE_RESUMING },
        { PAUSE_STATE_PAUSED, PAUSE_EVENT_TEARDOWN, PAUSE_STATE_RUNNING },
        { PAUSE_STATE_RESUMING, PAUSE_EVENT_DONE, PAUSE_STATE_RUNNING },
        { PAUSE_STATE_RESUMING, PAUSE_EVENT_FAILED, PAUSE_STATE_PAUSED },
        { PAUSE_STATE_RESUMING, PAUSE_EVENT_TEARDOWN, PAUSE_STATE_RUNNING },
};

static PauseState pause_expected(PauseState from, PauseEvent e) {
        for (size_t i = 0; i < sizeof(pause_want) / sizeof(pause_want[0]); i++)
                if (pause_want[i].from == from && pause_want[i].event == e)
                        return pause_want[i].to;
        return NO_P;
}

static void test_pause_table(void **state) {
        (void) state;
        for (PauseState s = 0; s < _PAUSE_STATE_MAX; s++)
                for (PauseEvent e = 0; e < _PAUSE_EVENT_MAX; e++)
                        assert_int_equal(pause_state_next(s, e), pause_expected(s, e));
}

static void test_pause_refusals(void **state) {
        (void) state;
        /* One runsc at a time: no request while one is at work. */
        for (PauseState s = PAUSE_STATE_PAUSING; s <= PAUSE_STATE_RESUMING; s += 2) {
                assert_int_equal(pause_state_next(s, PAUSE_EVENT_PAUSE), NO_P);
                assert_int_equal(pause_state_next(s, PAUSE_EVENT_RESUME), NO_P);
        }
        /* Not to where it already is. */
        assert_int_equal(pause_state_next(PAUSE_STATE_RUNNING, PAUSE_EVENT_RESUME), NO_P);
        assert_int_equal(pause_state_next(PAUSE_STATE_PAUSED, PAUSE_EVENT_PAUSE), NO_P);
        /* runsc reports only on what it was asked. */
        assert_int_equal(pause_state_next(PAUSE_STATE_RUNNING, PAUSE_EVENT_DONE), NO_P);
        assert_int_equal(pause_state_next(PAUSE_STATE_PAUSED, PAUSE_EVENT_FAILED), NO_P);
        /* Teardown resumes only what is paused. */
        assert_int_equal(pause_state_next(PAUSE_STATE_RUNNING, PAUSE_EVENT_TEARDOWN), NO_P);
        assert_int_equal(pause_state_next(PAUSE_STATE_PAUSING, PAUSE_EVENT_TEARDOWN), NO_P);
        assert_int_equal(pause_state_next(_PAUSE_STATE_MAX, PAUSE_EVENT_PAUSE), NO_P);
        assert_int_equal(pause_state_next(PAUSE_STATE_RUNNING, _PAUSE_EVENT_INVALID), NO_P);
}

static void test_pause_shown(void **state) {
        (void) state;
        /* Status says "paused" from runsc pause's success until runsc
         * resume's, as it did with the boolean. */
        assert_false(pause_state_paused(PAUSE_STATE_RUNNING));
        assert_false(pause_state_paused(PAUSE_STATE_PAUSING));
        assert_true(pause_state_paused(PAUSE_STATE_PAUSED));
        assert_true(pause_state_paused(PAUSE_STATE_RESUMING));
        for (PauseState s = 0; s < _PAUSE_STATE_MAX; s++)
                assert_non_null(pause_state_to_string(s));
        for (PauseEvent e = 0; e < _PAUSE_EVENT_MAX; e++)
                assert_non_null(pause_event_to_string(e));
        assert_null(pause_state_to_string(_PAUSE_STATE_INVALID));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_session_table), cmocka_unit_test(test_session_refusals),
                cmocka_unit_test(test_session_lives), cmocka_unit_test(test_session_names),
                cmocka_unit_test(test_pause_table),   cmocka_unit_test(test_pause_refusals),
                cmocka_unit_test(test_pause_shown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
