/* SPDX-License-Identifier: MIT */
/* The escalation request parser refuses everything but the protocol's one
 * shape; responses round-trip any output bytes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "escalate-proto.h"
#include "session-anchor.h"

#define RID "11111111-2222-4333-8444-555555555555"
#define SID "aaaaaaaa-0000-4000-8000-00000000000a"

/* A signed request as lazaret-escalate makes it, as text. */
static char *good_request(void) {
        SessionKey a;
        assert_int_equal(session_key_new(&a), 0);
        char *cred = NULL;
        assert_int_equal(session_delegate(&a, 1900000000, &cred), 0);
        json_t *req =
                json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "request_id", RID, "session_id", SID, "profile", "shell",
                          "command", "ls -l", "justification", "to see", "timestamp", (json_int_t) 1800000000);
        assert_int_equal(session_sign_request(cred, req), 0);
        char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        free(cred);
        return text;
}

static int parse_text(const char *text, const char **why) {
        EscalateRequest r;
        int q = escalate_request_parse(text, strlen(text), &r, why);
        if (q == 0)
                escalate_request_done(&r);
        return q;
}

/* good_request with one member changed (value NULL: removed). */
static int parse_with(const char *key, json_t *value, const char **why) {
        char *text = good_request();
        json_t *j = json_loads(text, 0, NULL);
        free(text);
        if (value)
                json_object_set_new(j, key, value);
        else
                json_object_del(j, key);
        text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        int q = parse_text(text, why);
        free(text);
        return q;
}

static void test_request(void **state) {
        (void) state;
        char *text = good_request();
        EscalateRequest r;
        const char *why = NULL;
        assert_int_equal(escalate_request_parse(text, strlen(text), &r, &why), 0);
        assert_string_equal(r.request_id, RID);
        assert_string_equal(r.session_id, SID);
        assert_string_equal(r.profile, "shell");
        assert_string_equal(r.command, "ls -l");
        assert_string_equal(r.justification, "to see");
        assert_int_equal(r.timestamp, 1800000000);
        escalate_request_done(&r);
        free(text);

        assert_int_equal(parse_with("extra", json_true(), &why), -EBADMSG);
        assert_string_equal(why, "the request has unknown or missing fields");
        assert_int_equal(parse_with("justification", NULL, &why), -EBADMSG);
        assert_string_equal(why, "the request has unknown or missing fields");
        assert_int_equal(parse_with("request_id", json_string("not-a-uuid"), &why), -EBADMSG);
        assert_string_equal(why, "request_id is not a uuid");
        assert_int_equal(parse_with("session_id", json_integer(4), &why), -EBADMSG);
        assert_int_equal(parse_with("profile", json_string("../x"), &why), -EBADMSG);
        assert_string_equal(why, "profile is not a profile name");
        assert_int_equal(parse_with("command", json_string(""), &why), -EBADMSG);
        assert_int_equal(parse_with("timestamp", json_string("now"), &why), -EBADMSG);
        assert_int_equal(parse_with("timestamp", json_integer(-1), &why), -EBADMSG);
        assert_int_equal(parse_with("signature", json_integer(1), &why), -EBADMSG);
        assert_int_equal(parse_with("delegation", json_pack("{s:s}", "delegate", "x"), &why), -EBADMSG);
        char *big = malloc(ESCALATE_COMMAND_MAX + 2);
        memset(big, 'a', ESCALATE_COMMAND_MAX + 1);
        big[ESCALATE_COMMAND_MAX + 1] = '\0';
        assert_int_equal(parse_with("command", json_string(big), &why), -EBADMSG);
        assert_string_equal(why, "command is empty, longer than 16 KiB, or holds a NUL byte");
        big[ESCALATE_COMMAND_MAX] = '\0';
        assert_int_equal(parse_with("command", json_string(big), &why), 0);
        free(big);

        assert_int_equal(parse_text("{\"command\":\"a\\u0000b\"}", &why), -EBADMSG);
        assert_int_equal(parse_text("[]", &why), -EBADMSG);
        assert_int_equal(parse_text("{", &why), -EBADMSG);
        assert_int_equal(parse_text("{\"a\":1,\"a\":2}", &why), -EBADMSG);
        assert_int_equal(parse_text("{\"a\":[[[[[[1]]]]]]}", &why), -EBADMSG);
        assert_string_equal(why, "the request is nested too deeply");
        char *huge = calloc(1, ESCALATE_REQUEST_MAX + 2);
        memset(huge, ' ', ESCALATE_REQUEST_MAX + 1);
        assert_int_equal(escalate_request_parse(huge, ESCALATE_REQUEST_MAX + 1, &r, &why), -EBADMSG);
        assert_string_equal(why, "the request is larger than 64 KiB");
        free(huge);
}

static void test_response(void **state) {
        (void) state;
        unsigned char bin[256];
        for (int i = 0; i < 256; i++)
                bin[i] = (unsigned char) i;
        EscalateResponse r = { .request_id = (char *) RID,
                               .approved = true,
                               .decided_by = (char *) "user",
                               .ran = true,
                               .exit_code = 3,
                               .out = bin,
                               .out_len = sizeof(bin),
                               .err = (unsigned char *) "warn\n",
                               .err_len = 5,
                               .err_truncated = true };
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(escalate_response_format(&r, &text, &len), 0);
        EscalateResponse p;
        const char *why = NULL;
        assert_int_equal(escalate_response_parse(text, len, &p, &why), 0);
        assert_string_equal(p.request_id, RID);
        assert_true(p.approved && p.ran);
        assert_int_equal(p.exit_code, 3);
        assert_int_equal(p.out_len, sizeof(bin));
        assert_memory_equal(p.out, bin, sizeof(bin));
        assert_int_equal(p.err_len, 5);
        assert_true(p.err_truncated && !p.out_truncated);
        assert_null(p.reason);
        escalate_response_done(&p);
        free(text);

        EscalateResponse d = { .request_id = (char *) RID,
                               .decided_by = (char *) "user",
                               .reason = (char *) "denied by the user" };
        assert_int_equal(escalate_response_format(&d, &text, &len), 0);
        assert_int_equal(escalate_response_parse(text, len, &p, &why), 0);
        assert_false(p.approved || p.ran);
        assert_string_equal(p.reason, "denied by the user");
        assert_int_equal(p.out_len, 0);
        escalate_response_done(&p);
        free(text);
        assert_int_equal(escalate_response_parse("{\"request_id\":1}", 16, &p, &why), -EBADMSG);

        unsigned char h[4];
        escalate_frame_header(0x01020304, h);
        assert_int_equal(h[0], 1);
        assert_int_equal(escalate_frame_length(h), 0x01020304);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_request),
                cmocka_unit_test(test_response),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
