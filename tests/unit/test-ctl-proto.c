/* SPDX-License-Identifier: MIT */
/* Unit tests of src/shared/ctl-proto: the control protocol codec, the frame
 * reader and session uuids. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl-proto.h"
#include "strbuf.h"

/* The codec never writes through its input; -Wwrite-strings makes literals const. */
#define W(s) ((char *) (s))

#define UUID1 "0f8fad5b-d9cb-469f-a165-70867728950e"
#define UUID2 "7c9e6679-7425-40de-944b-e07fc1f90ae7"

/* ---- helpers ------------------------------------------------------------ */

static uint32_t frame_len(const uint8_t *f) {
        return (uint32_t) f[0] << 24 | (uint32_t) f[1] << 16 | (uint32_t) f[2] << 8 | f[3];
}

static int decode_str(const char *json, CtlMessage *m, const char **err) {
        return ctl_message_decode((const uint8_t *) json, strlen(json), m, err);
}

/* Encode m; check the length prefix; return the JSON text (caller frees). */
static char *encode_json(const CtlMessage *m) {
        uint8_t *f = NULL;
        size_t n = 0;
        assert_int_equal(ctl_message_encode(m, &f, &n), 0);
        assert_true(n > 4);
        assert_int_equal(frame_len(f), n - 4);
        char *s = malloc(n - 4 + 1);
        assert_non_null(s);
        memcpy(s, f + 4, n - 4);
        s[n - 4] = '\0';
        assert_null(memchr(s, '\n', n - 4)); /* compact */
        free(f);
        return s;
}

/* NULL and an empty array are the same empty list (the decoder always
 * returns an array: env may go straight to execve). */
static void assert_strv_equal(char **a, size_t na, char **b, size_t nb) {
        assert_int_equal(na, nb);
        if (!a || !b) {
                assert_int_equal(na, 0);
                assert_true(!a || !a[0]);
                assert_true(!b || !b[0]);
                return;
        }
        for (size_t i = 0; i < na; i++)
                assert_string_equal(a[i], b[i]);
        assert_null(a[na]);
        assert_null(b[nb]);
}

static void assert_mem_equal(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
        assert_int_equal(na, nb);
        if (na > 0)
                assert_memory_equal(a, b, na);
}

static void assert_str_or_null_equal(const char *a, const char *b) {
        if (!a || !b)
                assert_ptr_equal(a, b);
        else
                assert_string_equal(a, b);
}

/* Every field, so a decoder that fills a field of another type fails too. */
static void assert_messages_equal(const CtlMessage *a, const CtlMessage *b) {
        assert_int_equal(a->type, b->type);
        assert_string_equal(a->session_id, b->session_id);
        assert_int_equal(a->version, b->version);
        assert_int_equal(a->cli_pid, b->cli_pid);
        if (a->argv || b->argv)
                assert_strv_equal(a->argv, a->n_argv, b->argv, b->n_argv);
        assert_int_equal(a->n_argv, b->n_argv);
        if (a->env || b->env)
                assert_strv_equal(a->env, a->n_env, b->env, b->n_env);
        assert_int_equal(a->n_env, b->n_env);
        assert_int_equal(a->interactive, b->interactive);
        assert_int_equal(a->rows, b->rows);
        assert_int_equal(a->columns, b->columns);
        assert_int_equal(a->pixel_width, b->pixel_width);
        assert_int_equal(a->pixel_height, b->pixel_height);
        assert_str_or_null_equal(a->term, b->term);
        assert_int_equal(!a->terminfo, !b->terminfo);
        assert_mem_equal(a->terminfo, a->terminfo_len, b->terminfo, b->terminfo_len);
        assert_mem_equal(a->bytes, a->n_bytes, b->bytes, b->n_bytes);
        assert_int_equal(a->eof, b->eof);
        assert_int_equal(a->stream, b->stream);
        assert_string_equal(a->request_id, b->request_id);
        assert_str_or_null_equal(a->profile, b->profile);
        assert_str_or_null_equal(a->command, b->command);
        assert_str_or_null_equal(a->justification, b->justification);
        assert_str_or_null_equal(a->decision, b->decision);
        assert_int_equal(a->queued, b->queued);
        assert_str_or_null_equal(a->anchor, b->anchor);
        assert_str_or_null_equal(a->credential, b->credential);
        assert_str_or_null_equal(a->cwd, b->cwd);
        assert_int_equal(a->signal, b->signal);
        assert_true(a->generation_id == b->generation_id);
        assert_int_equal(a->outcome, b->outcome);
        assert_int_equal(a->exit_code, b->exit_code);
        assert_int_equal(a->exit_signal, b->exit_signal);
        assert_str_or_null_equal(a->message, b->message);
        assert_int_equal(!a->status, !b->status);
        if (a->status)
                assert_true(json_equal(a->status, b->status));
}

/* Encode, check the frame, decode, compare; then the decoded message must
 * encode to the very same bytes. Returns the JSON text. */
static char *roundtrip(const CtlMessage *in) {
        uint8_t *f = NULL, *f2 = NULL;
        size_t n = 0, n2 = 0;
        assert_int_equal(ctl_message_encode(in, &f, &n), 0);
        assert_int_equal(frame_len(f), n - 4);

        CtlMessage out;
        const char *err = NULL;
        int r = ctl_message_decode(f + 4, n - 4, &out, &err);
        if (r < 0)
                fail_msg("decode of %.*s: %s", (int) (n - 4), (const char *) f + 4, err);
        assert_messages_equal(in, &out);

        assert_int_equal(ctl_message_encode(&out, &f2, &n2), 0);
        assert_int_equal(n, n2);
        assert_memory_equal(f, f2, n);
        ctl_message_done(&out);

        char *s = malloc(n - 4 + 1);
        assert_non_null(s);
        memcpy(s, f + 4, n - 4);
        s[n - 4] = '\0';
        free(f);
        free(f2);
        return s;
}

static void roundtrip_expect(const CtlMessage *in, const char *json) {
        char *s = roundtrip(in);
        assert_string_equal(s, json);
        free(s);
}

static void roundtrip_only(const CtlMessage *in) {
        free(roundtrip(in));
}

/* ---- names and uuids ---------------------------------------------------- */

static void test_names(void **state) {
        (void) state;
        for (int t = 0; t < _CTL_TYPE_MAX; t++) {
                assert_non_null(ctl_type_to_string(t));
                assert_int_equal(ctl_type_from_string(ctl_type_to_string(t)), t);
        }
        assert_string_equal(ctl_type_to_string(CTL_SESSION_EXIT), "SessionExit");
        assert_null(ctl_type_to_string(_CTL_TYPE_MAX));
        assert_null(ctl_type_to_string(_CTL_TYPE_INVALID));
        assert_int_equal(ctl_type_from_string("hello"), -EINVAL);
        assert_int_equal(ctl_type_from_string(NULL), -EINVAL);

        for (int s = 0; s < _CTL_SIGNAL_MAX; s++)
                assert_int_equal(ctl_signal_from_string(ctl_signal_to_string(s)), s);
        assert_string_equal(ctl_signal_to_string(CTL_SIGNAL_SUSPEND), "Suspend");
        assert_null(ctl_signal_to_string(_CTL_SIGNAL_MAX));
        assert_int_equal(ctl_signal_from_string("Kill"), -EINVAL);

        for (int o = 0; o < _CTL_EXIT_MAX; o++)
                assert_int_equal(ctl_exit_outcome_from_string(ctl_exit_outcome_to_string(o)), o);
        assert_string_equal(ctl_exit_outcome_to_string(CTL_EXIT_RUNTIME_LOST), "RuntimeLost");
        assert_null(ctl_exit_outcome_to_string(-1));
        assert_int_equal(ctl_exit_outcome_from_string(""), -EINVAL);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(a, b);
}

static void test_uuid(void **state) {
        (void) state;
        assert_true(ctl_uuid_valid(UUID1));
        assert_true(ctl_uuid_valid("00000000-0000-0000-0000-000000000000"));
        assert_false(ctl_uuid_valid(NULL));
        assert_false(ctl_uuid_valid(""));
        assert_false(ctl_uuid_valid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
        assert_false(ctl_uuid_valid("0f8fad5b-d9cb-469f-a165-70867728950"));
        assert_false(ctl_uuid_valid("0f8fad5b-d9cb-469f-a165-70867728950e0"));
        assert_false(ctl_uuid_valid("0f8fad5bd-9cb-469f-a165-70867728950e"));
        assert_false(ctl_uuid_valid("0f8fad5b-d9cb-469f-a165-70867728950g"));
        assert_false(ctl_uuid_valid("{f8fad5b-d9cb-469f-a165-70867728950e"));
        assert_false(ctl_uuid_valid("0f8fad5b d9cb 469f a165 70867728950e"));

        static char ids[1000][37];
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                memset(ids[i], 'x', sizeof ids[i]);
                assert_int_equal(ctl_uuid_v4(ids[i]), 0);
                assert_int_equal(strlen(ids[i]), 36);
                assert_true(ctl_uuid_valid(ids[i]));
                assert_int_equal(ids[i][14], '4');
                assert_non_null(strchr("89ab", ids[i][19]));
        }
        qsort(ids, ELEMENTSOF(ids), sizeof ids[0], cmp_str);
        for (size_t i = 1; i < ELEMENTSOF(ids); i++)
                assert_string_not_equal(ids[i - 1], ids[i]);
}

/* ---- round trips -------------------------------------------------------- */

static void test_roundtrip_hello(void **state) {
        (void) state;
        CtlMessage m = { .type = CTL_HELLO, .version = CTL_PROTOCOL_VERSION, .cli_pid = 4242 };
        roundtrip_expect(&m, "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":4242}");
        m.cli_pid = INT32_MAX;
        roundtrip_only(&m);
        /* The backend the CLI launched with (issue 21). */
        m.cli_pid = 7;
        m.backend = (char *) "native";
        roundtrip_expect(&m, "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":7,\"backend\":\"native\"}");
        /* The control socket's key (issue 41). */
        m.backend = NULL;
        m.key = (char *) "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        roundtrip_expect(&m, "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":7,\"key\":"
                             "\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"}");
        /* Whose address rules made its policy (decision 20). */
        m.key = NULL;
        m.backend = (char *) "native";
        m.address_rules = (char *) "own";
        roundtrip_expect(&m, "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":7,\"backend\":\"native\","
                             "\"address_rules\":\"own\"}");
        /* The policy by its digest (issue 45): 64 characters exactly. */
        m.backend = NULL;
        m.address_rules = NULL;
        m.netpolicy_digest = (char *) "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
        roundtrip_expect(&m, "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":7,\"netpolicy_digest\":"
                             "\"ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\"}");
        CtlMessage bad = {};
        const char *err = NULL;
        assert_true(decode_str("{\"type\":\"Hello\",\"version\":1,\"cli_pid\":7,\"netpolicy_digest\":\"ffee\"}", &bad,
                               &err) < 0);
        ctl_message_done(&bad);
}

static void test_roundtrip_session_open(void **state) {
        (void) state;
        char *argv[] = { W("claude"), W(""), W("--flag=é ✓"), NULL };
        char *env[] = { W("TERM=xterm-256color"), W("_A1="), W("EMPTY_AND=MORE=x"), NULL };
        uint8_t terminfo[] = { 0x1a, 0x01, 0x00, 0xff, 0x7f };

        /* All optional fields present. */
        CtlMessage m = {
                .type = CTL_SESSION_OPEN,
                .argv = argv,
                .n_argv = 3,
                .env = env,
                .n_env = 3,
                .interactive = true,
                .rows = 65535,
                .columns = 0,
                .term = W("xterm-256color.v2+_"),
                .terminfo = terminfo,
                .terminfo_len = sizeof terminfo,
        };
        roundtrip_expect(&m, "{\"type\":\"SessionOpen\",\"argv\":[\"claude\",\"\",\"--flag=é ✓\"],"
                             "\"env\":[\"TERM=xterm-256color\",\"_A1=\",\"EMPTY_AND=MORE=x\"],"
                             "\"interactive\":true,\"rows\":65535,\"columns\":0,"
                             "\"term\":\"xterm-256color.v2+_\",\"terminfo\":\"GgEA/38=\"}");

        /* The session's directory below /workspace. */
        char *argvc[] = { W("claude"), NULL };
        CtlMessage c = {
                .type = CTL_SESSION_OPEN, .argv = argvc, .n_argv = 1, .rows = 24, .columns = 80, .cwd = W("src/é/lib")
        };
        roundtrip_expect(&c, "{\"type\":\"SessionOpen\",\"argv\":[\"claude\"],\"env\":[],"
                             "\"interactive\":false,\"rows\":24,\"columns\":80,\"cwd\":\"src/é/lib\"}");

        /* Optional fields absent; no environment at all. */
        char *argv1[] = { W("claude"), NULL };
        CtlMessage b = { .type = CTL_SESSION_OPEN, .argv = argv1, .n_argv = 1, .rows = 24, .columns = 80 };
        roundtrip_expect(&b, "{\"type\":\"SessionOpen\",\"argv\":[\"claude\"],\"env\":[],"
                             "\"interactive\":false,\"rows\":24,\"columns\":80}");

        /* The decoded empty environment is still a NULL-terminated array. */
        CtlMessage d;
        const char *err = NULL;
        assert_int_equal(decode_str("{\"type\":\"SessionOpen\",\"argv\":[\"sh\"],\"env\":[],\"interactive\":false,"
                                    "\"rows\":1,\"columns\":2,\"term\":null,\"terminfo\":null}",
                                    &d, &err),
                         0);
        assert_non_null(d.env);
        assert_null(d.env[0]);
        assert_int_equal(d.n_env, 0);
        assert_null(d.term);
        assert_null(d.terminfo);
        assert_string_equal(d.argv[0], "sh");
        assert_null(d.argv[1]);
        ctl_message_done(&d);
        ctl_message_done(&d); /* idempotent */
}

static void test_roundtrip_terminal(void **state) {
        (void) state;
        uint8_t bytes[256];
        for (size_t i = 0; i < sizeof bytes; i++)
                bytes[i] = (uint8_t) i;

        CtlMessage in = { .type = CTL_TERMINAL_INPUT, .session_id = UUID1, .bytes = bytes, .n_bytes = 2 };
        bytes[0] = 'h', bytes[1] = 'i';
        roundtrip_expect(&in, "{\"type\":\"TerminalInput\",\"session_id\":\"" UUID1 "\",\"bytes\":\"aGk=\","
                              "\"eof\":false}");
        bytes[0] = 0, bytes[1] = 1;
        in.n_bytes = sizeof bytes;
        in.eof = true;
        roundtrip_only(&in);
        /* Empty input with eof: bytes may be NULL. */
        CtlMessage eof = { .type = CTL_TERMINAL_INPUT, .session_id = UUID1, .eof = true };
        roundtrip_expect(&eof, "{\"type\":\"TerminalInput\",\"session_id\":\"" UUID1 "\",\"bytes\":\"\","
                               "\"eof\":true}");

        CtlMessage resize = { .type = CTL_TERMINAL_RESIZE,
                              .session_id = UUID2,
                              .rows = 50,
                              .columns = 65535,
                              .pixel_width = 0,
                              .pixel_height = 1234 };
        roundtrip_expect(&resize, "{\"type\":\"TerminalResize\",\"session_id\":\"" UUID2 "\",\"rows\":50,"
                                  "\"columns\":65535,\"pixel_width\":0,\"pixel_height\":1234}");

        for (int s = 0; s < _CTL_SIGNAL_MAX; s++) {
                CtlMessage sig = { .type = CTL_TERMINAL_SIGNAL, .session_id = UUID1, .signal = s };
                roundtrip_only(&sig);
        }
        CtlMessage sig = { .type = CTL_TERMINAL_SIGNAL, .session_id = UUID1, .signal = CTL_SIGNAL_QUIT };
        roundtrip_expect(&sig, "{\"type\":\"TerminalSignal\",\"session_id\":\"" UUID1 "\",\"signal\":\"Quit\"}");

        CtlMessage close = { .type = CTL_SESSION_CLOSE, .session_id = UUID2 };
        roundtrip_expect(&close, "{\"type\":\"SessionClose\",\"session_id\":\"" UUID2 "\"}");

        CtlMessage out = {
                .type = CTL_TERMINAL_OUTPUT, .session_id = UUID1, .stream = 2, .bytes = bytes, .n_bytes = 3
        };
        roundtrip_only(&out);
        out.stream = 1;
        out.n_bytes = 0;
        out.bytes = NULL;
        roundtrip_expect(&out, "{\"type\":\"TerminalOutput\",\"session_id\":\"" UUID1 "\",\"stream\":1,"
                               "\"bytes\":\"\"}");
}

static void test_roundtrip_control(void **state) {
        (void) state;
        CtlMessage req = { .type = CTL_STATUS_REQUEST };
        roundtrip_expect(&req, "{\"type\":\"StatusRequest\"}");

        CtlMessage stop = { .type = CTL_STOP_REQUEST, .message = W("user asked") };
        roundtrip_expect(&stop, "{\"type\":\"StopRequest\",\"reason\":\"user asked\"}");
        stop.message = W("");
        roundtrip_only(&stop);

        CtlMessage opened = { .type = CTL_SESSION_OPENED, .session_id = UUID1, .generation_id = 1 };
        roundtrip_expect(&opened, "{\"type\":\"SessionOpened\",\"session_id\":\"" UUID1 "\",\"generation_id\":1}");
        opened.generation_id = INT64_MAX;
        roundtrip_only(&opened);

        json_t *st = json_pack("{s:i, s:[s, {s:b}], s:n, s:f}", "sessions", 2, "profiles", "claude", "x", 1, "nothing",
                               "load", 0.5);
        assert_non_null(st);
        CtlMessage status = { .type = CTL_STATUS, .status = st };
        roundtrip_only(&status);
        json_decref(st);
        st = json_object();
        status.status = st;
        roundtrip_expect(&status, "{\"type\":\"Status\",\"status\":{}}");
        json_decref(st);

        CtlMessage error = { .type = CTL_ERROR, .message = W("no such profile \"x\"\n") };
        roundtrip_expect(&error, "{\"type\":\"Error\",\"message\":\"no such profile \\\"x\\\"\\n\"}");
}

static void test_roundtrip_prompt(void **state) {
        (void) state;
        CtlMessage req = { .type = CTL_PROMPT_REQUEST,
                           .session_id = UUID1,
                           .request_id = UUID2,
                           .profile = W("shell"),
                           .command = W("ls; id"),
                           .justification = W("why"),
                           .queued = 2 };
        roundtrip_expect(&req, "{\"type\":\"PromptRequest\",\"session_id\":\"" UUID1 "\",\"request_id\":\"" UUID2
                               "\",\"profile\":\"shell\",\"command\":\"ls; id\",\"justification\":\"why\","
                               "\"queued\":2}");
        CtlMessage ans = {
                .type = CTL_PROMPT_ANSWER, .session_id = UUID1, .request_id = UUID2, .decision = W("approve")
        };
        roundtrip_expect(&ans, "{\"type\":\"PromptAnswer\",\"session_id\":\"" UUID1 "\",\"request_id\":\"" UUID2
                               "\",\"decision\":\"approve\"}");
        ans.command = W("ls -l");
        roundtrip_only(&ans);
        CtlMessage cancel = { .type = CTL_PROMPT_CANCEL, .session_id = UUID1, .request_id = UUID2 };
        roundtrip_expect(&cancel,
                         "{\"type\":\"PromptCancel\",\"session_id\":\"" UUID1 "\",\"request_id\":\"" UUID2 "\"}");
        CtlMessage done = { .type = CTL_PROMPT_DONE, .session_id = UUID1, .request_id = UUID2 };
        roundtrip_only(&done);
        CtlMessage open = { .type = CTL_SESSION_OPEN,
                            .argv = (char *[]){ W("sh"), NULL },
                            .n_argv = 1,
                            .env = (char *[]){ NULL },
                            .anchor = W("abc"),
                            .credential = W("{}") };
        roundtrip_only(&open);

        CtlMessage m;
        const char *err = NULL;
        /* The request id must be a uuid; the command may not be empty. */
        assert_int_equal(
                decode_str("{\"type\":\"PromptCancel\",\"session_id\":\"" UUID1 "\",\"request_id\":\"x\"}", &m, &err),
                -EBADMSG);
        assert_int_equal(decode_str("{\"type\":\"PromptRequest\",\"session_id\":\"" UUID1 "\",\"request_id\":\"" UUID2
                                    "\",\"profile\":\"shell\",\"command\":\"\",\"justification\":\"\",\"queued\":0}",
                                    &m, &err),
                         -EBADMSG);
        /* A decision is one of three; only an approval carries a command. */
        assert_int_equal(decode_str("{\"type\":\"PromptAnswer\",\"session_id\":\"" UUID1 "\",\"request_id\":\"" UUID2
                                    "\",\"decision\":\"maybe\"}",
                                    &m, &err),
                         -EBADMSG);
        assert_string_equal(err, "decision: not approve, deny, abort or unable");
        assert_int_equal(decode_str("{\"type\":\"PromptAnswer\",\"session_id\":\"" UUID1 "\",\"request_id\":\"" UUID2
                                    "\",\"decision\":\"deny\",\"command\":\"ls\"}",
                                    &m, &err),
                         -EBADMSG);
        assert_string_equal(err, "command: only an approval carries one");
        ans.decision = W("abort");
        ans.command = W("ls -l");
        uint8_t *frame = NULL;
        size_t flen = 0;
        assert_int_equal(ctl_message_encode(&ans, &frame, &flen), -EINVAL); /* never sent either */
}

static void test_roundtrip_session_exit(void **state) {
        (void) state;
        CtlMessage m = { .type = CTL_SESSION_EXIT, .session_id = UUID1, .outcome = CTL_EXIT_EXITED, .exit_code = 0 };
        roundtrip_expect(&m, "{\"type\":\"SessionExit\",\"session_id\":\"" UUID1 "\",\"outcome\":\"Exited\","
                             "\"exit_code\":0}");
        m.exit_code = 255;
        m.message = W("done");
        roundtrip_expect(&m, "{\"type\":\"SessionExit\",\"session_id\":\"" UUID1 "\",\"outcome\":\"Exited\","
                             "\"exit_code\":255,\"message\":\"done\"}");

        CtlMessage t = {
                .type = CTL_SESSION_EXIT, .session_id = UUID2, .outcome = CTL_EXIT_TERMINATED, .exit_signal = 9
        };
        roundtrip_expect(&t, "{\"type\":\"SessionExit\",\"session_id\":\"" UUID2 "\",\"outcome\":\"Terminated\","
                             "\"signal\":9}");
        t.exit_signal = 64;
        t.message = W("");
        roundtrip_only(&t);

        CtlMessage l = { .type = CTL_SESSION_EXIT, .session_id = UUID2, .outcome = CTL_EXIT_RUNTIME_LOST };
        roundtrip_expect(&l, "{\"type\":\"SessionExit\",\"session_id\":\"" UUID2 "\",\"outcome\":\"RuntimeLost\"}");
        l.message = W("runsc died");
        roundtrip_only(&l);

        /* The field the outcome does not carry is not sent. */
        CtlMessage x = { .type = CTL_SESSION_EXIT,
                         .session_id = UUID2,
                         .outcome = CTL_EXIT_RUNTIME_LOST,
                         .exit_code = 3,
                         .exit_signal = 4 };
        char *s = encode_json(&x);
        assert_string_equal(s, "{\"type\":\"SessionExit\",\"session_id\":\"" UUID2 "\",\"outcome\":\"RuntimeLost\"}");
        free(s);
}

/* RFC 4648 section 10, through TerminalOutput both ways. */
static void test_base64_vectors(void **state) {
        (void) state;
        static const struct {
                const char *raw, *b64;
        } v[] = {
                { "", "" },
                { "f", "Zg==" },
                { "fo", "Zm8=" },
                { "foo", "Zm9v" },
                { "foob", "Zm9vYg==" },
                { "fooba", "Zm9vYmE=" },
                { "foobar", "Zm9vYmFy" },
        };
        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                CtlMessage m = { .type = CTL_TERMINAL_OUTPUT,
                                 .session_id = UUID1,
                                 .stream = 1,
                                 .bytes = (uint8_t *) v[i].raw,
                                 .n_bytes = strlen(v[i].raw) };
                char want[200];
                snprintf(want, sizeof want,
                         "{\"type\":\"TerminalOutput\",\"session_id\":\"" UUID1 "\",\"stream\":1,\"bytes\":\"%s\"}",
                         v[i].b64);
                char *s = encode_json(&m);
                assert_string_equal(s, want);
                free(s);

                CtlMessage d;
                const char *err = NULL;
                assert_int_equal(decode_str(want, &d, &err), 0);
                assert_int_equal(d.n_bytes, strlen(v[i].raw));
                if (d.n_bytes > 0)
                        assert_memory_equal(d.bytes, v[i].raw, d.n_bytes);
                ctl_message_done(&d);
        }
}

/* ---- decoder rejections ------------------------------------------------- */

#define SID "\"session_id\":\"" UUID1 "\""
#define OPEN(extra)                                                                                                    \
        "{\"type\":\"SessionOpen\",\"argv\":[\"sh\"],\"env\":[],\"interactive\":true,\"rows\":24,\"columns\":80" extra \
        "}"
#define OPEN_WITH(argv, env)                                                                                           \
        "{\"type\":\"SessionOpen\",\"argv\":" argv ",\"env\":" env ",\"interactive\":true,\"rows\":24,\"columns\":80}"
#define EXIT(extra)  "{\"type\":\"SessionExit\"," SID extra "}"
#define INPUT(bytes) "{\"type\":\"TerminalInput\"," SID ",\"bytes\":" bytes ",\"eof\":false}"

static const struct {
        const char *json, *error;
} rejects[] = {
        /* Frame level. */
        { "", "malformed JSON" },
        { "{", "malformed JSON" },
        { "{\"type\":\"StatusRequest\"} {}", "malformed JSON" },
        { "{\"type\":\"StatusRequest\",}", "malformed JSON" },
        { "[]", "top level is not an object" },
        { "[{\"type\":\"StatusRequest\"}]", "top level is not an object" },
        { "\"StatusRequest\"", "top level is not an object" },
        { "1", "top level is not an object" },
        { "null", "top level is not an object" },
        { "{\"type\":\"StatusRequest\",\"type\":\"StatusRequest\"}", "duplicate key" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":1,\"cli_pid\":2}", "duplicate key" },
        { "{\"type\":\"Status\",\"status\":{\"a\":1,\"a\":1}}", "duplicate key" },
        { "{\"type\":\"StatusRequest\",\"a\\u0000b\":1}", "key contains NUL" },
        { "{\"type\":\"Error\",\"message\":\"\xff\"}", "invalid UTF-8" },
        { "{\"type\":\"Error\",\"message\":\"\xc0\xaf\"}", "invalid UTF-8" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":99999999999999999999}", "number out of range" },
        /* Type. */
        { "{}", "type: missing" },
        { "{\"type\":null}", "type: missing" },
        { "{\"type\":1}", "type: wrong type" },
        { "{\"type\":[\"Hello\"]}", "type: wrong type" },
        { "{\"type\":\"Bogus\"}", "type: unknown" },
        { "{\"type\":\"hello\",\"version\":1,\"cli_pid\":1}", "type: unknown" },
        { "{\"type\":\"StatusRequest\\u0000\"}", "type: unknown" },
        /* Unknown fields, including ones valid for other types. */
        { "{\"type\":\"StatusRequest\",\"x\":1}", "unknown field" },
        { "{\"type\":\"StatusRequest\",\"session_id\":\"" UUID1 "\"}", "unknown field" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":1,\"extra\":null}", "unknown field" },
        { "{\"type\":\"TerminalResize\"," SID ",\"rows\":1,\"columns\":1,\"pixel_width\":1,\"pixel_height\":1,"
          "\"eof\":true}",
          "unknown field" },
        { OPEN(",\"pixel_width\":1"), "unknown field" },
        /* Hello. */
        { "{\"type\":\"Hello\",\"version\":2,\"cli_pid\":1}", "version: unsupported protocol version" },
        { "{\"type\":\"Hello\",\"version\":0,\"cli_pid\":1}", "version: unsupported protocol version" },
        { "{\"type\":\"Hello\",\"version\":-1,\"cli_pid\":1}", "version: out of range" },
        { "{\"type\":\"Hello\",\"version\":\"1\",\"cli_pid\":1}", "version: wrong type" },
        { "{\"type\":\"Hello\",\"version\":1.0,\"cli_pid\":1}", "version: wrong type" },
        { "{\"type\":\"Hello\",\"version\":true,\"cli_pid\":1}", "version: wrong type" },
        { "{\"type\":\"Hello\",\"cli_pid\":1}", "version: missing" },
        { "{\"type\":\"Hello\",\"version\":1}", "cli_pid: missing" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":null}", "cli_pid: missing" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":0}", "cli_pid: out of range" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":-5}", "cli_pid: out of range" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":2147483648}", "cli_pid: out of range" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":1,\"key\":\"00\"}", "key: empty" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":1,\"key\":"
          "\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0\"}",
          "key: too long" },
        { "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":1,\"key\":1}", "key: wrong type" },
        /* SessionOpen. */
        { OPEN_WITH("[]", "[]"), "argv: empty" },
        { OPEN_WITH("[\"\"]", "[]"), "argv: first entry empty" },
        { OPEN_WITH("[\"\",\"x\"]", "[]"), "argv: first entry empty" },
        { OPEN_WITH("\"sh\"", "[]"), "argv: wrong type" },
        { OPEN_WITH("[\"sh\",1]", "[]"), "argv: wrong type" },
        { OPEN_WITH("[\"sh\",null]", "[]"), "argv: wrong type" },
        { OPEN_WITH("[\"sh\",\"a\\u0000b\"]", "[]"), "argv: contains NUL" },
        { OPEN_WITH("null", "[]"), "argv: missing" },
        { OPEN_WITH("[\"sh\"]", "{}"), "env: wrong type" },
        { OPEN_WITH("[\"sh\"]", "[\"FOO\"]"), "env: entry without '='" },
        { OPEN_WITH("[\"sh\"]", "[\"\"]"), "env: entry without '='" },
        { OPEN_WITH("[\"sh\"]", "[\"A=1\",\"1A=x\"]"), "env: invalid variable name" },
        { OPEN_WITH("[\"sh\"]", "[\"=x\"]"), "env: invalid variable name" },
        { OPEN_WITH("[\"sh\"]", "[\"A-B=x\"]"), "env: invalid variable name" },
        { OPEN_WITH("[\"sh\"]", "[\"A B=x\"]"), "env: invalid variable name" },
        { OPEN_WITH("[\"sh\"]", "[\"\\u00e9=x\"]"), "env: invalid variable name" },
        { OPEN_WITH("[\"sh\"]", "[\"A=x\\u0000y\"]"), "env: contains NUL" },
        { "{\"type\":\"SessionOpen\",\"argv\":[\"sh\"],\"interactive\":true,\"rows\":24,\"columns\":80}",
          "env: missing" },
        { "{\"type\":\"SessionOpen\",\"argv\":[\"sh\"],\"env\":[],\"interactive\":1,\"rows\":24,\"columns\":80}",
          "interactive: wrong type" },
        { "{\"type\":\"SessionOpen\",\"argv\":[\"sh\"],\"env\":[],\"interactive\":true,\"rows\":65536,\"columns\":80}",
          "rows: out of range" },
        { "{\"type\":\"SessionOpen\",\"argv\":[\"sh\"],\"env\":[],\"interactive\":true,\"rows\":24,\"columns\":-1}",
          "columns: out of range" },
        { "{\"type\":\"SessionOpen\",\"argv\":[\"sh\"],\"env\":[],\"interactive\":true,\"rows\":24}",
          "columns: missing" },
        { OPEN(",\"term\":\"\""), "term: empty" },
        { OPEN(",\"term\":\"xterm 256\""), "term: invalid value" },
        { OPEN(",\"term\":\"../../x\""), "term: invalid value" },
        { OPEN(",\"term\":\"xterm\\u0000\""), "term: contains NUL" },
        { OPEN(",\"term\":7"), "term: wrong type" },
        { OPEN(",\"terminfo\":\"\""), "terminfo: empty" },
        { OPEN(",\"terminfo\":\"abc\""), "terminfo: invalid base64" },
        { OPEN(",\"terminfo\":[]"), "terminfo: wrong type" },
        { OPEN(",\"cwd\":\"\""), "cwd: empty" },
        { OPEN(",\"cwd\":\"/etc\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"..\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"a/../../etc\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"a/.\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"a//b\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"a/\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"a\\nb\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"\\u001b[2J\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"a\\u007f\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"a\\u0085\""), "cwd: invalid value" },
        { OPEN(",\"cwd\":\"a\\u0000\""), "cwd: contains NUL" },
        { OPEN(",\"cwd\":[\"a\"]"), "cwd: wrong type" },
        /* TerminalInput / bytes. */
        { "{\"type\":\"TerminalInput\",\"session_id\":\"0F8FAD5B-D9CB-469F-A165-70867728950E\",\"bytes\":\"\","
          "\"eof\":false}",
          "session_id: invalid value" },
        { "{\"type\":\"TerminalInput\",\"session_id\":\"0f8fad5b\",\"bytes\":\"\",\"eof\":false}",
          "session_id: invalid value" },
        { "{\"type\":\"TerminalInput\",\"session_id\":\"0f8fad5bd9cb469fa16570867728950e\",\"bytes\":\"\","
          "\"eof\":false}",
          "session_id: invalid value" },
        { "{\"type\":\"TerminalInput\",\"session_id\":\"" UUID1 "0\",\"bytes\":\"\",\"eof\":false}",
          "session_id: invalid value" },
        { "{\"type\":\"TerminalInput\",\"session_id\":\"0f8fad5b-d9cb-469f-a165-70867728950\\u0000\",\"bytes\":\"\","
          "\"eof\":false}",
          "session_id: contains NUL" },
        { "{\"type\":\"TerminalInput\",\"session_id\":42,\"bytes\":\"\",\"eof\":false}", "session_id: wrong type" },
        { "{\"type\":\"TerminalInput\",\"bytes\":\"\",\"eof\":false}", "session_id: missing" },
        { INPUT("\"QQ\""), "bytes: invalid base64" },
        { INPUT("\"QQ=\""), "bytes: invalid base64" },
        { INPUT("\"QR==\""), "bytes: invalid base64" },
        { INPUT("\"QUJ=\""), "bytes: invalid base64" },
        { INPUT("\"QQ=A\""), "bytes: invalid base64" },
        { INPUT("\"=QQQ\""), "bytes: invalid base64" },
        { INPUT("\"Q===\""), "bytes: invalid base64" },
        { INPUT("\"====\""), "bytes: invalid base64" },
        { INPUT("\"QUJD\\nQUJD\""), "bytes: invalid base64" },
        { INPUT("\"QU-D\""), "bytes: invalid base64" },
        { INPUT("\"QU_D\""), "bytes: invalid base64" },
        { INPUT("\"QUJD\\u0000\\u0000\\u0000\\u0000\""), "bytes: contains NUL" },
        { INPUT("null"), "bytes: missing" },
        { INPUT("[1]"), "bytes: wrong type" },
        { "{\"type\":\"TerminalInput\"," SID ",\"bytes\":\"\"}", "eof: missing" },
        { "{\"type\":\"TerminalInput\"," SID ",\"bytes\":\"\",\"eof\":\"false\"}", "eof: wrong type" },
        /* TerminalResize, TerminalSignal, TerminalOutput. */
        { "{\"type\":\"TerminalResize\"," SID ",\"rows\":1,\"columns\":1,\"pixel_width\":65536,\"pixel_height\":1}",
          "pixel_width: out of range" },
        { "{\"type\":\"TerminalResize\"," SID ",\"rows\":1,\"columns\":1,\"pixel_width\":1}", "pixel_height: missing" },
        { "{\"type\":\"TerminalSignal\"," SID ",\"signal\":\"Kill\"}", "signal: invalid value" },
        { "{\"type\":\"TerminalSignal\"," SID ",\"signal\":\"interrupt\"}", "signal: invalid value" },
        { "{\"type\":\"TerminalSignal\"," SID ",\"signal\":2}", "signal: wrong type" },
        { "{\"type\":\"TerminalOutput\"," SID ",\"stream\":3,\"bytes\":\"\"}", "stream: out of range" },
        { "{\"type\":\"TerminalOutput\"," SID ",\"stream\":0,\"bytes\":\"\"}", "stream: out of range" },
        { "{\"type\":\"TerminalOutput\"," SID ",\"stream\":\"1\",\"bytes\":\"\"}", "stream: wrong type" },
        { "{\"type\":\"SessionClose\"}", "session_id: missing" },
        /* SessionOpened. */
        { "{\"type\":\"SessionOpened\"," SID ",\"generation_id\":0}", "generation_id: out of range" },
        { "{\"type\":\"SessionOpened\"," SID ",\"generation_id\":-1}", "generation_id: out of range" },
        { "{\"type\":\"SessionOpened\"," SID ",\"generation_id\":1.5}", "generation_id: wrong type" },
        { "{\"type\":\"SessionOpened\"," SID ",\"generation_id\":1e3}", "generation_id: wrong type" },
        /* SessionExit. */
        { EXIT(",\"outcome\":\"Exited\""), "exit_code: missing" },
        { EXIT(",\"outcome\":\"Exited\",\"exit_code\":null"), "exit_code: missing" },
        { EXIT(",\"outcome\":\"Exited\",\"exit_code\":0,\"signal\":9"), "signal: not allowed with this outcome" },
        { EXIT(",\"outcome\":\"Terminated\""), "signal: missing" },
        { EXIT(",\"outcome\":\"Terminated\",\"signal\":9,\"exit_code\":0"),
          "exit_code: not allowed with this outcome" },
        { EXIT(",\"outcome\":\"RuntimeLost\",\"exit_code\":1"), "exit_code: not allowed with this outcome" },
        { EXIT(",\"outcome\":\"RuntimeLost\",\"signal\":1"), "signal: not allowed with this outcome" },
        { EXIT(",\"outcome\":\"Exited\",\"exit_code\":256"), "exit_code: out of range" },
        { EXIT(",\"outcome\":\"Exited\",\"exit_code\":-1"), "exit_code: out of range" },
        { EXIT(",\"outcome\":\"Terminated\",\"signal\":0"), "signal: out of range" },
        { EXIT(",\"outcome\":\"Terminated\",\"signal\":65"), "signal: out of range" },
        { EXIT(",\"outcome\":\"Terminated\",\"signal\":\"KILL\""), "signal: wrong type" },
        { EXIT(",\"outcome\":\"Crashed\""), "outcome: invalid value" },
        { EXIT(",\"outcome\":\"RuntimeLost\",\"message\":5"), "message: wrong type" },
        { EXIT(",\"outcome\":\"RuntimeLost\",\"message\":\"a\\u0000\""), "message: contains NUL" },
        { EXIT(""), "outcome: missing" },
        /* Status, StopRequest, Error. */
        { "{\"type\":\"Status\",\"status\":[]}", "status: wrong type" },
        { "{\"type\":\"Status\",\"status\":null}", "status: missing" },
        { "{\"type\":\"Status\",\"status\":\"up\"}", "status: wrong type" },
        { "{\"type\":\"Status\",\"status\":{\"a\":[\"x\\u0000\"]}}", "status: contains NUL" },
        { "{\"type\":\"StopRequest\"}", "reason: missing" },
        { "{\"type\":\"StopRequest\",\"message\":\"x\"}", "unknown field" },
        { "{\"type\":\"Error\"}", "message: missing" },
        { "{\"type\":\"Error\",\"message\":\"\\u0000\"}", "message: contains NUL" },
        /* Depth: refused before jansson recurses. */
        { "{\"type\":\"Status\",\"status\":{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
          "]]]]]]"
          "]]]}}",
          "nesting too deep" },
        { "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "nesting too deep" },
};

static void assert_rejected(const uint8_t *p, size_t n, const char *want) {
        /* Pre-filled without owned pointers: must come back zeroed. */
        CtlMessage m = { .type = CTL_ERROR, .n_argv = 7, .rows = 3, .exit_code = 9, .session_id = "junk" };
        const char *err = "unset";
        int r = ctl_message_decode(p, n, &m, &err);
        if (r != -EBADMSG || !err || strcmp(err, want) != 0)
                fail_msg("%.*s: got %d \"%s\", want -EBADMSG \"%s\"", (int) (n > 300 ? 300 : n), (const char *) p, r,
                         err ? err : "(null)", want);
        assert_int_equal(m.type, 0);
        assert_int_equal(m.n_argv, 0);
        assert_int_equal(m.rows, 0);
        assert_int_equal(m.exit_code, 0);
        assert_int_equal(m.session_id[0], 0);
        assert_null(m.argv);
        assert_null(m.message);
        assert_null(m.status);
        /* ret_error may be NULL. */
        assert_int_equal(ctl_message_decode(p, n, &m, NULL), -EBADMSG);
}

static void test_decode_rejects(void **state) {
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(rejects); i++)
                assert_rejected((const uint8_t *) rejects[i].json, strlen(rejects[i].json), rejects[i].error);

        /* A NUL byte in the frame itself, outside any string. */
        static const char nul[] = "{\"type\":\"StatusRequest\"}\0";
        assert_rejected((const uint8_t *) nul, sizeof nul - 1, "malformed JSON");
        assert_rejected(NULL, 0, "malformed JSON");
}

static void test_decode_accepts(void **state) {
        (void) state;
        static const char *const ok[] = {
                " {\"type\" : \"StatusRequest\"}\n",
                "{\"type\":\"Hello\",\"cli_pid\":2147483647,\"version\":1}",
                OPEN_WITH("[\"sh\",\"\",\"\"]", "[\"A=\",\"_=x\",\"a1_B=é\"]"),
                OPEN(",\"term\":null,\"terminfo\":null"),
                OPEN(",\"term\":\"xterm-kitty\",\"terminfo\":\"AAAA\""),
                OPEN(",\"cwd\":null"),
                OPEN(",\"cwd\":\"a/..b/.c/c..\""),
                EXIT(",\"outcome\":\"Exited\",\"exit_code\":1,\"signal\":null,\"message\":null"),
                EXIT(",\"outcome\":\"Terminated\",\"signal\":64,\"exit_code\":null"),
                EXIT(",\"outcome\":\"RuntimeLost\",\"signal\":null,\"exit_code\":null"),
                INPUT("\"\""),
                INPUT("\"QQ==\""),
                INPUT("\"QUI=\""),
                INPUT("\"QUJD\""),
                "{\"type\":\"SessionOpened\"," SID ",\"generation_id\":9223372036854775807}",
                "{\"type\":\"Status\",\"status\":{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
                "{\"type\":\"Error\",\"message\":\"\"}",
                "{\"type\":\"Error\",\"message\":\"\\ud83d\\ude00 \\\\ \\\"\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                CtlMessage m;
                const char *err = NULL;
                int r = decode_str(ok[i], &m, &err);
                if (r != 0)
                        fail_msg("%s: %d %s", ok[i], r, err);
                /* Whatever is accepted can be sent back. */
                free(encode_json(&m));
                ctl_message_done(&m);
        }

        CtlMessage m;
        const char *err = NULL;
        assert_int_equal(decode_str(INPUT("\"\""), &m, &err), 0);
        assert_int_equal(m.type, CTL_TERMINAL_INPUT);
        assert_string_equal(m.session_id, UUID1);
        assert_int_equal(m.n_bytes, 0);
        ctl_message_done(&m);

        assert_int_equal(decode_str(EXIT(",\"outcome\":\"Terminated\",\"signal\":15"), &m, &err), 0);
        assert_int_equal(m.outcome, CTL_EXIT_TERMINATED);
        assert_int_equal(m.exit_signal, 15);
        assert_int_equal(m.exit_code, 0);
        assert_null(m.message);
        ctl_message_done(&m);
}

static char *repeat(char c, size_t n) {
        char *s = malloc(n + 1);
        assert_non_null(s);
        memset(s, c, n);
        s[n] = '\0';
        return s;
}

/* Limits that need big inputs. */
static void test_decode_limits(void **state) {
        (void) state;
        StrBuf b = STRBUF_INIT;
        char *s;

        /* Hello's backend: 16 bytes at most. */
        assert_rejected(
                (const uint8_t *) "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":7,\"backend\":\"native-and-more-x\"}",
                strlen("{\"type\":\"Hello\",\"version\":1,\"cli_pid\":7,\"backend\":\"native-and-more-x\"}"),
                "backend: too long");

        /* term: 256 characters pass, 257 do not. */
        s = repeat('x', 256);
        strbuf_printf(&b, OPEN(",\"term\":\"%s\""), s);
        CtlMessage m;
        const char *err = NULL;
        assert_int_equal(decode_str(strbuf_str(&b), &m, &err), 0);
        assert_int_equal(strlen(m.term), 256);
        ctl_message_done(&m);
        strbuf_done(&b);
        strbuf_printf(&b, OPEN(",\"term\":\"%sx\""), s);
        assert_rejected((const uint8_t *) b.data, b.len, "term: too long");
        strbuf_done(&b);
        free(s);

        /* bytes: CTL_BYTES_MAX decoded bytes pass, one more does not. */
        size_t n64 = (CTL_BYTES_MAX + 2) / 3 * 4;
        s = repeat('A', n64);
        if (CTL_BYTES_MAX % 3 == 1)
                s[n64 - 1] = s[n64 - 2] = '=';
        else if (CTL_BYTES_MAX % 3 == 2)
                s[n64 - 1] = '=';
        strbuf_printf(&b, INPUT("\"%s\""), s);
        assert_int_equal(decode_str(strbuf_str(&b), &m, &err), 0);
        assert_int_equal(m.n_bytes, CTL_BYTES_MAX);
        ctl_message_done(&m);
        strbuf_done(&b);
        free(s);
        s = repeat('A', (CTL_BYTES_MAX + 1 + 2) / 3 * 4);
        strbuf_printf(&b, INPUT("\"%s\""), s);
        assert_rejected((const uint8_t *) b.data, b.len, "bytes: too long");
        strbuf_done(&b);
        free(s);

        /* terminfo: CTL_TERMINFO_MAX. */
        s = repeat('A', (CTL_TERMINFO_MAX + 3) / 3 * 4);
        strbuf_printf(&b, OPEN(",\"terminfo\":\"%s\""), s);
        assert_rejected((const uint8_t *) b.data, b.len, "terminfo: too long");
        strbuf_done(&b);
        free(s);

        /* cwd: CTL_CWD_MAX bytes. */
        s = repeat('d', CTL_CWD_MAX);
        strbuf_printf(&b, OPEN(",\"cwd\":\"%s\""), s);
        assert_int_equal(decode_str(strbuf_str(&b), &m, &err), 0);
        assert_int_equal(strlen(m.cwd), CTL_CWD_MAX);
        ctl_message_done(&m);
        strbuf_done(&b);
        strbuf_printf(&b, OPEN(",\"cwd\":\"%sd\""), s);
        assert_rejected((const uint8_t *) b.data, b.len, "cwd: too long");
        strbuf_done(&b);
        free(s);

        /* argv entries: CTL_STRING_MAX bytes each, CTL_ARGV_MAX of them. */
        s = repeat('a', CTL_STRING_MAX);
        strbuf_printf(&b, OPEN_WITH("[\"sh\",\"%s\"]", "[]"), s);
        assert_int_equal(decode_str(strbuf_str(&b), &m, &err), 0);
        assert_int_equal(strlen(m.argv[1]), CTL_STRING_MAX);
        ctl_message_done(&m);
        strbuf_done(&b);
        strbuf_printf(&b, OPEN_WITH("[\"sh\",\"%sa\"]", "[]"), s);
        assert_rejected((const uint8_t *) b.data, b.len, "argv: too long");
        strbuf_done(&b);
        strbuf_printf(&b, OPEN_WITH("[\"sh\"]", "[\"A=%s\"]"), s);
        assert_rejected((const uint8_t *) b.data, b.len, "env: too long");
        strbuf_done(&b);
        free(s);

        for (unsigned extra = 0; extra <= 1; extra++) {
                StrBuf a = STRBUF_INIT;
                for (unsigned i = 0; i < CTL_ARGV_MAX + extra; i++)
                        strbuf_puts(&a, i == 0 ? "\"sh\"" : ",\"\"");
                strbuf_printf(&b,
                              "{\"type\":\"SessionOpen\",\"argv\":[%s],\"env\":[],\"interactive\":true,"
                              "\"rows\":24,\"columns\":80}",
                              strbuf_str(&a));
                if (extra == 0) {
                        assert_int_equal(decode_str(strbuf_str(&b), &m, &err), 0);
                        assert_int_equal(m.n_argv, CTL_ARGV_MAX);
                        ctl_message_done(&m);
                } else
                        assert_rejected((const uint8_t *) b.data, b.len, "argv: too many entries");
                strbuf_done(&b);
                strbuf_done(&a);
        }

        /* Frame: exactly CTL_FRAME_MAX bytes of JSON pass, one more do not. */
        const char *head = "{\"type\":\"Error\",\"message\":\"", *tail = "\"}";
        s = repeat('m', CTL_FRAME_MAX - strlen(head) - strlen(tail));
        strbuf_printf(&b, "%s%s%s", head, s, tail);
        assert_int_equal(b.len, CTL_FRAME_MAX);
        assert_int_equal(decode_str(strbuf_str(&b), &m, &err), 0);
        /* ... and the encoder produces exactly that frame. */
        uint8_t *f = NULL;
        size_t n = 0;
        assert_int_equal(ctl_message_encode(&m, &f, &n), 0);
        assert_int_equal(n, 4 + CTL_FRAME_MAX);
        assert_memory_equal(f + 4, b.data, CTL_FRAME_MAX);
        free(f);
        ctl_message_done(&m);
        strbuf_putc(&b, ' ');
        assert_rejected((const uint8_t *) b.data, b.len, "frame too large");
        strbuf_done(&b);
        free(s);
}

/* ---- encoder rejections ------------------------------------------------- */

static void test_encode_rejects(void **state) {
        (void) state;
        char *argv[] = { W("sh"), NULL };
        char *empty_argv0[] = { W(""), NULL };
        char *bad_utf8[] = { W("sh"), W("\xff"), NULL };
        char *overlong[] = { W("sh"), W("\xc0\xaf"), NULL };
        char *surrogate[] = { W("sh"), W("\xed\xa0\x80"), NULL };
        char *holes[] = { W("sh"), NULL, NULL };
        char *env_noeq[] = { W("FOO"), NULL };
        char *env_badname[] = { W("1FOO=x"), NULL };
        uint8_t bytes[4] = { 1, 2, 3, 4 };
        json_t *arr = json_array();
        json_t *nul = json_pack("{s:s%}", "a", "x\0y", (size_t) 3);
        json_t *deep = json_object();
        assert_non_null(arr);
        assert_non_null(nul);
        assert_non_null(deep);
        json_t *inner = json_array();
        for (int i = 0; i < 40; i++) {
                json_t *outer = json_array();
                assert_non_null(outer);
                assert_int_equal(json_array_append_new(outer, inner), 0);
                inner = outer;
        }
        assert_int_equal(json_object_set_new(deep, "x", inner), 0);

        const CtlMessage bad[] = {
                { .type = _CTL_TYPE_MAX },
                { .type = _CTL_TYPE_INVALID },
                { .type = CTL_HELLO, .version = 2, .cli_pid = 1 },
                { .type = CTL_HELLO, .version = 1, .cli_pid = 0 },
                { .type = CTL_HELLO, .version = 1, .cli_pid = -1 },
                { .type = CTL_SESSION_OPEN, .argv = NULL, .n_argv = 0, .rows = 1, .columns = 1 },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 0, .rows = 1, .columns = 1 },
                { .type = CTL_SESSION_OPEN, .argv = NULL, .n_argv = 1, .rows = 1, .columns = 1 },
                { .type = CTL_SESSION_OPEN, .argv = empty_argv0, .n_argv = 1 },
                { .type = CTL_SESSION_OPEN, .argv = bad_utf8, .n_argv = 2 },
                { .type = CTL_SESSION_OPEN, .argv = overlong, .n_argv = 2 },
                { .type = CTL_SESSION_OPEN, .argv = surrogate, .n_argv = 2 },
                { .type = CTL_SESSION_OPEN, .argv = holes, .n_argv = 3 },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = CTL_ARGV_MAX + 1 },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .env = env_noeq, .n_env = 1 },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .env = env_badname, .n_env = 1 },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .env = NULL, .n_env = 1 },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .rows = 65536 },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .cwd = W("") },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .cwd = W("../x") },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .cwd = W("/abs") },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .cwd = W("a\nb") },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .cwd = W("\xff") },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .columns = 70000 },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .term = W("") },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .term = W("xterm\n") },
                { .type = CTL_SESSION_OPEN, .argv = argv, .n_argv = 1, .terminfo = bytes, .terminfo_len = 0 },
                { .type = CTL_SESSION_OPEN,
                  .argv = argv,
                  .n_argv = 1,
                  .terminfo = bytes,
                  .terminfo_len = CTL_TERMINFO_MAX + 1 },
                { .type = CTL_TERMINAL_INPUT, .session_id = "" },
                { .type = CTL_TERMINAL_INPUT, .session_id = "0F8FAD5B-D9CB-469F-A165-70867728950E" },
                { .type = CTL_TERMINAL_INPUT, .session_id = UUID1, .bytes = NULL, .n_bytes = 1 },
                { .type = CTL_TERMINAL_INPUT, .session_id = UUID1, .bytes = bytes, .n_bytes = CTL_BYTES_MAX + 1 },
                { .type = CTL_TERMINAL_RESIZE, .session_id = UUID1, .pixel_height = 65536 },
                { .type = CTL_TERMINAL_SIGNAL, .session_id = UUID1, .signal = _CTL_SIGNAL_MAX },
                { .type = CTL_TERMINAL_SIGNAL, .session_id = UUID1, .signal = _CTL_SIGNAL_INVALID },
                { .type = CTL_SESSION_CLOSE },
                { .type = CTL_STOP_REQUEST, .message = NULL },
                { .type = CTL_STOP_REQUEST, .message = W("\xfe") },
                { .type = CTL_SESSION_OPENED, .session_id = UUID1, .generation_id = 0 },
                { .type = CTL_SESSION_OPENED, .session_id = UUID1, .generation_id = (uint64_t) INT64_MAX + 1 },
                { .type = CTL_TERMINAL_OUTPUT, .session_id = UUID1, .stream = 0 },
                { .type = CTL_TERMINAL_OUTPUT, .session_id = UUID1, .stream = 3 },
                { .type = CTL_SESSION_EXIT, .session_id = UUID1, .outcome = CTL_EXIT_EXITED, .exit_code = 256 },
                { .type = CTL_SESSION_EXIT, .session_id = UUID1, .outcome = CTL_EXIT_EXITED, .exit_code = -1 },
                { .type = CTL_SESSION_EXIT, .session_id = UUID1, .outcome = CTL_EXIT_TERMINATED, .exit_signal = 0 },
                { .type = CTL_SESSION_EXIT, .session_id = UUID1, .outcome = CTL_EXIT_TERMINATED, .exit_signal = 65 },
                { .type = CTL_SESSION_EXIT, .session_id = UUID1, .outcome = _CTL_EXIT_MAX },
                { .type = CTL_STATUS, .status = NULL },
                { .type = CTL_STATUS, .status = arr },
                { .type = CTL_STATUS, .status = nul },
                { .type = CTL_STATUS, .status = deep },
                { .type = CTL_ERROR, .message = NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint8_t *f = (uint8_t *) "untouched";
                size_t n = 12345;
                int r = ctl_message_encode(&bad[i], &f, &n);
                if (r != -EINVAL)
                        fail_msg("bad[%zu]: got %d, want -EINVAL", i, r);
                assert_string_equal((char *) f, "untouched");
                assert_int_equal(n, 12345);
        }
        assert_int_equal(ctl_message_encode(NULL, &(uint8_t *){ NULL }, &(size_t){ 0 }), -EINVAL);

        /* A message too large for one frame: 9 arguments of 128 KiB. */
        char *big = repeat('b', CTL_STRING_MAX);
        char *many[10] = { W("sh") };
        for (size_t i = 1; i < ELEMENTSOF(many); i++)
                many[i] = big;
        CtlMessage huge = { .type = CTL_SESSION_OPEN, .argv = many, .n_argv = ELEMENTSOF(many) };
        uint8_t *f = NULL;
        size_t n = 0;
        assert_int_equal(ctl_message_encode(&huge, &f, &n), -EINVAL);
        assert_null(f);
        huge.n_argv = 8; /* 7 x 128 KiB fits */
        assert_int_equal(ctl_message_encode(&huge, &f, &n), 0);
        assert_true(n - 4 <= CTL_FRAME_MAX);
        free(f);
        free(big);

        json_decref(arr);
        json_decref(nul);
        json_decref(deep);
}

/* ---- reader ------------------------------------------------------------- */

static uint8_t *make_frame(const char *json, size_t *ret_len) {
        size_t n = strlen(json);
        uint8_t *f = malloc(4 + n);
        assert_non_null(f);
        f[0] = (uint8_t) (n >> 24), f[1] = (uint8_t) (n >> 16), f[2] = (uint8_t) (n >> 8), f[3] = (uint8_t) n;
        memcpy(f + 4, json, n);
        *ret_len = 4 + n;
        return f;
}

static const char *const stream_json[] = {
        "{\"type\":\"Hello\",\"version\":1,\"cli_pid\":7}",
        "{\"type\":\"StatusRequest\"}",
        "x",
        "{\"type\":\"TerminalInput\",\"session_id\":\"" UUID1 "\",\"bytes\":\"aGVsbG8=\",\"eof\":false}",
        "{\"type\":\"SessionClose\",\"session_id\":\"" UUID1 "\"}",
};

static void build_stream(uint8_t **ret, size_t *ret_len) {
        StrBuf b = STRBUF_INIT;
        for (size_t i = 0; i < ELEMENTSOF(stream_json); i++) {
                size_t n;
                uint8_t *f = make_frame(stream_json[i], &n);
                strbuf_putn(&b, (const char *) f, n);
                free(f);
        }
        *ret_len = b.len;
        *ret = (uint8_t *) strbuf_steal(&b);
}

static void test_reader_one_feed(void **state) {
        (void) state;
        uint8_t *s;
        size_t n;
        build_stream(&s, &n);

        CtlReader r = {};
        assert_int_equal(ctl_reader_feed(&r, s, n), 0);
        for (size_t i = 0; i < ELEMENTSOF(stream_json); i++) {
                const uint8_t *p = NULL;
                size_t len = 0;
                assert_int_equal(ctl_reader_next(&r, &p, &len), 1);
                assert_int_equal(len, strlen(stream_json[i]));
                assert_memory_equal(p, stream_json[i], len);
        }
        const uint8_t *p = (const uint8_t *) "same";
        size_t len = 99;
        assert_int_equal(ctl_reader_next(&r, &p, &len), 0);
        assert_string_equal((const char *) p, "same");
        assert_int_equal(len, 99);
        assert_int_equal(ctl_reader_room(&r), CTL_READER_MAX);
        ctl_reader_done(&r);
        ctl_reader_done(&r);
        free(s);
}

/* Fed in pieces of every size from 1 to 23 bytes, draining after each feed. */
static void test_reader_split(void **state) {
        (void) state;
        uint8_t *s;
        size_t n;
        build_stream(&s, &n);

        for (size_t piece = 1; piece < 24; piece++) {
                CtlReader r = {};
                size_t got = 0;
                for (size_t off = 0; off < n; off += piece) {
                        size_t k = n - off < piece ? n - off : piece;
                        assert_int_equal(ctl_reader_feed(&r, s + off, k), 0);
                        const uint8_t *p;
                        size_t len;
                        int q;
                        while ((q = ctl_reader_next(&r, &p, &len)) > 0) {
                                assert_true(got < ELEMENTSOF(stream_json));
                                assert_int_equal(len, strlen(stream_json[got]));
                                assert_memory_equal(p, stream_json[got], len);
                                /* Decodable where it should be. */
                                CtlMessage m;
                                const char *err;
                                assert_int_equal(ctl_message_decode(p, len, &m, &err), got == 2 ? -EBADMSG : 0);
                                ctl_message_done(&m);
                                got++;
                        }
                        assert_int_equal(q, 0);
                }
                assert_int_equal(got, ELEMENTSOF(stream_json));
                ctl_reader_done(&r);
        }
        free(s);
}

static void assert_failed_for_good(CtlReader *r) {
        const uint8_t *p;
        size_t len;
        assert_int_equal(ctl_reader_next(r, &p, &len), -EMSGSIZE);
        assert_int_equal(ctl_reader_next(r, &p, &len), -EMSGSIZE);
        assert_int_equal(ctl_reader_feed(r, (const uint8_t *) "\0\0\0\1x", 5), -EMSGSIZE);
        assert_int_equal(ctl_reader_next(r, &p, &len), -EMSGSIZE);
        assert_int_equal(ctl_reader_room(r), 0);
}

static void test_reader_bad_length(void **state) {
        (void) state;
        const uint8_t *p;
        size_t len;

        /* Zero length, after a good frame that still comes out first. */
        CtlReader r = {};
        assert_int_equal(ctl_reader_feed(&r, (const uint8_t *) "\0\0\0\1x\0\0\0\0\0\0\0\1y", 14), 0);
        assert_int_equal(ctl_reader_next(&r, &p, &len), 1);
        assert_int_equal(len, 1);
        assert_int_equal(p[0], 'x');
        assert_failed_for_good(&r);
        ctl_reader_done(&r);

        /* Oversized: known from the header alone, before any payload. */
        static const uint32_t sizes[] = { CTL_FRAME_MAX + 1, UINT32_MAX, 0x80000000u };
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                uint8_t h[4] = { (uint8_t) (sizes[i] >> 24), (uint8_t) (sizes[i] >> 16), (uint8_t) (sizes[i] >> 8),
                                 (uint8_t) sizes[i] };
                r = (CtlReader){};
                for (size_t j = 0; j < 3; j++) {
                        assert_int_equal(ctl_reader_feed(&r, h + j, 1), 0);
                        assert_int_equal(ctl_reader_next(&r, &p, &len), 0);
                }
                assert_int_equal(ctl_reader_feed(&r, h + 3, 1), 0);
                assert_failed_for_good(&r);
                ctl_reader_done(&r);
        }
}

static void test_reader_max_frame(void **state) {
        (void) state;
        uint8_t *buf = malloc(CTL_FRAME_MAX);
        assert_non_null(buf);
        for (size_t i = 0; i < CTL_FRAME_MAX; i++)
                buf[i] = (uint8_t) (i * 7);
        static const uint8_t hdr[4] = { (uint8_t) (CTL_FRAME_MAX >> 24), (uint8_t) (CTL_FRAME_MAX >> 16),
                                        (uint8_t) (CTL_FRAME_MAX >> 8), (uint8_t) CTL_FRAME_MAX };

        /* A small frame first, so the big one starts mid-buffer. */
        CtlReader r = {};
        const uint8_t *p;
        size_t len;
        assert_int_equal(ctl_reader_feed(&r, (const uint8_t *) "\0\0\0\2ab", 6), 0);
        assert_int_equal(ctl_reader_feed(&r, hdr, 4), 0);
        assert_int_equal(ctl_reader_next(&r, &p, &len), 1);
        assert_int_equal(len, 2);
        assert_int_equal(ctl_reader_next(&r, &p, &len), 0);
        for (size_t off = 0; off < CTL_FRAME_MAX;) {
                size_t k = 65536 + 3;
                if (k > CTL_FRAME_MAX - off)
                        k = CTL_FRAME_MAX - off;
                assert_true(ctl_reader_room(&r) >= k);
                assert_int_equal(ctl_reader_feed(&r, buf + off, k), 0);
                off += k;
                assert_int_equal(ctl_reader_next(&r, &p, &len), off == CTL_FRAME_MAX ? 1 : 0);
        }
        assert_int_equal(len, CTL_FRAME_MAX);
        assert_memory_equal(p, buf, CTL_FRAME_MAX);
        assert_true(r.cap <= CTL_READER_MAX);

        /* Holding a whole unread maximum frame, the reader takes no more. */
        assert_int_equal(ctl_reader_feed(&r, hdr, 4), 0);
        assert_int_equal(ctl_reader_feed(&r, buf, CTL_FRAME_MAX), 0);
        assert_int_equal(ctl_reader_room(&r), 0);
        assert_int_equal(ctl_reader_feed(&r, (const uint8_t *) "z", 1), -ENOBUFS);
        assert_true(r.cap <= CTL_READER_MAX);
        assert_int_equal(ctl_reader_next(&r, &p, &len), 1); /* not failed */
        assert_int_equal(len, CTL_FRAME_MAX);
        assert_memory_equal(p, buf, CTL_FRAME_MAX);
        assert_int_equal(ctl_reader_next(&r, &p, &len), 0);
        assert_int_equal(ctl_reader_room(&r), CTL_READER_MAX);
        ctl_reader_done(&r);

        /* Fed in one go to a fresh reader. */
        r = (CtlReader){};
        assert_int_equal(ctl_reader_feed(&r, hdr, 4), 0);
        assert_int_equal(ctl_reader_feed(&r, buf, CTL_FRAME_MAX), 0);
        assert_int_equal(ctl_reader_next(&r, &p, &len), 1);
        assert_int_equal(len, CTL_FRAME_MAX);
        ctl_reader_done(&r);
        free(buf);
}

/* 200000 one-byte frames in one feed and in 1000 feeds: a reader that moves
 * the rest of its buffer for every frame takes minutes here, not milliseconds. */
static void test_reader_many_small(void **state) {
        (void) state;
        const size_t frames = 200000;
        uint8_t *s = malloc(frames * 5);
        assert_non_null(s);
        for (size_t i = 0; i < frames; i++) {
                memcpy(s + i * 5, "\0\0\0\1", 4);
                s[i * 5 + 4] = (uint8_t) i;
        }
        for (size_t feeds = 1; feeds <= 1000; feeds *= 1000) {
                CtlReader r = {};
                size_t got = 0, per = frames * 5 / feeds;
                for (size_t f = 0; f < feeds; f++) {
                        assert_int_equal(ctl_reader_feed(&r, s + f * per, per), 0);
                        const uint8_t *p;
                        size_t len;
                        while (ctl_reader_next(&r, &p, &len) > 0) {
                                assert_int_equal(len, 1);
                                assert_int_equal(p[0], (uint8_t) got);
                                got++;
                        }
                }
                assert_int_equal(got, frames);
                ctl_reader_done(&r);
        }
        free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_uuid),
                cmocka_unit_test(test_roundtrip_hello),
                cmocka_unit_test(test_roundtrip_session_open),
                cmocka_unit_test(test_roundtrip_terminal),
                cmocka_unit_test(test_roundtrip_control),
                cmocka_unit_test(test_roundtrip_session_exit),
                cmocka_unit_test(test_roundtrip_prompt),
                cmocka_unit_test(test_base64_vectors),
                cmocka_unit_test(test_decode_rejects),
                cmocka_unit_test(test_decode_accepts),
                cmocka_unit_test(test_decode_limits),
                cmocka_unit_test(test_encode_rejects),
                cmocka_unit_test(test_reader_one_feed),
                cmocka_unit_test(test_reader_split),
                cmocka_unit_test(test_reader_bad_length),
                cmocka_unit_test(test_reader_max_frame),
                cmocka_unit_test(test_reader_many_small),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
