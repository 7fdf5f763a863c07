/* SPDX-License-Identifier: MIT */
/* The Session Anchor's delegation and request signatures, and what a
 * sandbox might try against them: another session's id with this
 * session's credential, a changed command after signing, an expired
 * delegation, a delegation signed by another anchor, a forged key. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "session-anchor.h"

#define SID_A "aaaaaaaa-0000-4000-8000-00000000000a"
#define SID_B "bbbbbbbb-0000-4000-8000-00000000000b"
#define NOW   1800000000ull

static json_t *request(const char *sid, const char *command) {
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "request_id", "11111111-2222-4333-8444-555555555555",
                         "session_id", sid, "profile", "shell", "command", command, "justification", "because",
                         "timestamp", (json_int_t) NOW);
}

static void test_sign_and_verify(void **state) {
        (void) state;
        SessionKey a, b;
        assert_int_equal(session_key_new(&a), 0);
        assert_int_equal(session_key_new(&b), 0);
        assert_memory_not_equal(a.pub, b.pub, SESSION_KEY_LEN);
        /* Seeds from the kernel: two differ, none is zero (a key whose
         * public half were not its seed's fails the verifications below). */
        static const unsigned char zero[SESSION_KEY_LEN];
        assert_memory_not_equal(a.priv, b.priv, SESSION_KEY_LEN);
        assert_memory_not_equal(a.priv, zero, SESSION_KEY_LEN);
        char *cred = NULL;
        assert_int_equal(session_delegate(&a, NOW + 3600, &cred), 0);
        /* The anchor's private key is not in the credential. */
        char *apriv = session_b64(a.priv, SESSION_KEY_LEN);
        assert_null(strstr(cred, apriv));
        free(apriv);

        const char *why = NULL;
        json_t *req = request(SID_A, "uname -a");
        assert_int_equal(session_sign_request(cred, req), 0);
        assert_int_equal(session_verify_request(req, a.pub, NOW, &why), 0);
        assert_null(why);

        /* Another anchor's key does not verify it. */
        assert_int_equal(session_verify_request(req, b.pub, NOW, &why), -EPERM);
        assert_string_equal(why, "the delegation was not signed by the session's anchor");
        /* After the delegation's time. */
        assert_int_equal(session_verify_request(req, a.pub, NOW + 3601, &why), -EPERM);
        assert_string_equal(why, "the delegation has expired");

        /* Changed after signing. */
        json_t *changed = json_deep_copy(req);
        json_object_set_new(changed, "command", json_string("rm -rf ~"));
        assert_int_equal(session_verify_request(changed, a.pub, NOW, &why), -EPERM);
        assert_string_equal(why, "the request's signature does not verify");
        json_decref(changed);
        /* A later field added. */
        changed = json_deep_copy(req);
        json_object_set_new(changed, "extra", json_true());
        assert_int_equal(session_verify_request(changed, a.pub, NOW, &why), -EPERM);
        json_decref(changed);
        /* The delegation's time pushed out. */
        changed = json_deep_copy(req);
        json_object_set_new(json_object_get(changed, "delegation"), "not_after", json_integer((json_int_t) NOW * 2));
        assert_int_equal(session_verify_request(changed, a.pub, NOW, &why), -EPERM);
        assert_string_equal(why, "the delegation was not signed by the session's anchor");
        json_decref(changed);
        json_decref(req);

        /* Session B's id with session A's credential: the coordinator
         * checks against B's anchor, which did not sign A's delegation. */
        req = request(SID_B, "uname -a");
        assert_int_equal(session_sign_request(cred, req), 0);
        assert_int_equal(session_verify_request(req, b.pub, NOW, &why), -EPERM);
        assert_string_equal(why, "the delegation was not signed by the session's anchor");
        json_decref(req);

        /* A key of the sandbox's own making, with a delegation copied from a
         * real credential: the request signature does not verify. */
        SessionKey forged;
        assert_int_equal(session_key_new(&forged), 0);
        json_t *c = json_loads(cred, 0, NULL);
        char *fk = session_b64(forged.priv, SESSION_KEY_LEN);
        json_object_set_new(c, "key", json_string(fk));
        char *forged_cred = json_dumps(c, JSON_COMPACT);
        req = request(SID_A, "uname -a");
        assert_int_equal(session_sign_request(forged_cred, req), 0);
        assert_int_equal(session_verify_request(req, a.pub, NOW, &why), -EPERM);
        assert_string_equal(why, "the request's signature does not verify");
        json_decref(req);
        free(forged_cred);
        free(fk);
        json_decref(c);

        /* No signature at all, or a credential that does not parse. */
        req = request(SID_A, "uname -a");
        assert_int_equal(session_verify_request(req, a.pub, NOW, &why), -EPERM);
        assert_string_equal(why, "the request carries no delegation or signature");
        assert_int_equal(session_sign_request("{}", req), -EINVAL);
        assert_int_equal(session_sign_request("not json", req), -EINVAL);
        json_decref(req);
        free(cred);
        session_key_wipe(&a);
        session_key_wipe(&b);
        session_key_wipe(&forged);
}

static void test_b64(void **state) {
        (void) state;
        unsigned char in[32], out[32];
        for (size_t i = 0; i < sizeof(in); i++)
                in[i] = (unsigned char) (i * 37 + 250);
        char *t = session_b64(in, sizeof(in));
        assert_int_equal(strlen(t), 43);
        assert_null(strpbrk(t, "+/="));
        assert_int_equal(session_unb64(t, out, sizeof(out)), 0);
        assert_memory_equal(in, out, sizeof(in));
        t[3] = '+';
        assert_int_equal(session_unb64(t, out, sizeof(out)), -EINVAL);
        t[3] = '\0';
        assert_int_equal(session_unb64(t, out, sizeof(out)), -EINVAL);
        assert_int_equal(session_unb64(NULL, out, sizeof(out)), -EINVAL);
        free(t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sign_and_verify),
                cmocka_unit_test(test_b64),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
