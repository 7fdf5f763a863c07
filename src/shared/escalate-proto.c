/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-proto.h"
#include "escalate-proto.h"
#include "fd-util.h"
#include "macro.h"
#include "profile-name.h"
#include "string-util.h"

#define REQUEST_DEPTH_MAX 3u /* the request, its delegation; one more is already wrong */

void escalate_frame_header(uint32_t len, unsigned char ret[4]) {
        ret[0] = (unsigned char) (len >> 24);
        ret[1] = (unsigned char) (len >> 16);
        ret[2] = (unsigned char) (len >> 8);
        ret[3] = (unsigned char) len;
}

uint32_t escalate_frame_length(const unsigned char hdr[4]) {
        return (uint32_t) hdr[0] << 24 | (uint32_t) hdr[1] << 16 | (uint32_t) hdr[2] << 8 | hdr[3];
}

void escalate_request_done(EscalateRequest *r) {
        json_decref(r->json);
        *r = (EscalateRequest){};
}

/* A string member of at most max bytes (and at least min), without NUL. */
static const char *str_member(json_t *o, const char *key, size_t min, size_t max) {
        json_t *v = json_object_get(o, key);
        if (!json_is_string(v))
                return NULL;
        size_t n = json_string_length(v);
        const char *s = json_string_value(v);
        if (n < min || n > max || strlen(s) != n)
                return NULL;
        return s;
}

static bool only_keys(json_t *o, const char *const *keys) {
        const char *k;
        json_t *v;
        size_t n = 0;
        json_object_foreach(o, k, v) {
                const char *const *p;
                for (p = keys; *p && !streq(*p, k); p++)
                        ;
                if (!*p)
                        return false;
                n++;
        }
        size_t want = 0;
        while (keys[want])
                want++;
        return n == want;
}

int escalate_request_parse(const char *buf, size_t len, EscalateRequest *ret, const char **ret_why) {
        static const char *const keys[] = { "request_id",    "session_id", "profile",    "command",
                                            "justification", "timestamp",  "delegation", "delegation_signature",
                                            "signature",     NULL };
        static const char *const del_keys[] = { "delegate", "not_after", NULL };
        *ret_why = "the request is larger than 64 KiB";
        if (len > ESCALATE_REQUEST_MAX)
                return -EBADMSG;
        *ret_why = "the request is nested too deeply";
        if (!json_text_depth_ok((const uint8_t *) buf, len, REQUEST_DEPTH_MAX))
                return -EBADMSG;
        json_error_t e;
        json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
        *ret_why = "the request is not one JSON object";
        if (!json_is_object(j)) {
                json_decref(j);
                return -EBADMSG;
        }
        EscalateRequest r = { .json = j };
        json_t *del = json_object_get(j, "delegation"), *ts = json_object_get(j, "timestamp");
        *ret_why = "the request has unknown or missing fields";
        if (!only_keys(j, keys) || !json_is_object(del) || !only_keys(del, del_keys))
                goto bad;
        *ret_why = "request_id is not a uuid";
        r.request_id = str_member(j, "request_id", 36, 36);
        if (!r.request_id || !ctl_uuid_valid(r.request_id))
                goto bad;
        *ret_why = "session_id is not a uuid";
        r.session_id = str_member(j, "session_id", 36, 36);
        if (!r.session_id || !ctl_uuid_valid(r.session_id))
                goto bad;
        *ret_why = "profile is not a profile name";
        r.profile = str_member(j, "profile", 1, 64);
        if (!r.profile || !config_profile_name_valid(r.profile))
                goto bad;
        *ret_why = "command is empty, longer than 16 KiB, or holds a NUL byte";
        r.command = str_member(j, "command", 1, ESCALATE_COMMAND_MAX);
        if (!r.command)
                goto bad;
        *ret_why = "justification is longer than 4 KiB or holds a NUL byte";
        r.justification = str_member(j, "justification", 0, ESCALATE_JUSTIFICATION_MAX);
        if (!r.justification)
                goto bad;
        *ret_why = "timestamp is not a number of seconds";
        if (!json_is_integer(ts) || json_integer_value(ts) < 0)
                goto bad;
        r.timestamp = json_integer_value(ts);
        *ret_why = "the delegation or a signature is malformed";
        if (!str_member(del, "delegate", 1, 64) || !json_is_integer(json_object_get(del, "not_after")) ||
            !str_member(j, "delegation_signature", 1, 128) || !str_member(j, "signature", 1, 128))
                goto bad;
        *ret_why = NULL;
        *ret = r;
        return 0;
bad:
        escalate_request_done(&r);
        return -EBADMSG;
}

void escalate_response_done(EscalateResponse *r) {
        free(r->request_id);
        free(r->decided_by);
        free(r->out);
        free(r->err);
        free(r->reason);
        *r = (EscalateResponse){};
}

int escalate_response_format(const EscalateResponse *r, char **ret, size_t *ret_len) {
        size_t n;
        _cleanup_free_ char *out = ctl_base64_encode(r->out, r->out_len, &n),
                            *err = ctl_base64_encode(r->err, r->err_len, &n);
        if (!out || !err)
                return -ENOMEM;
        json_t *j =
                json_pack("{s:s, s:b, s:s, s:s, s:s, s:b, s:b}", "request_id", r->request_id, "approved", r->approved,
                          "decided_by", r->decided_by ? r->decided_by : "policy", "stdout", out, "stderr", err,
                          "stdout_truncated", r->out_truncated, "stderr_truncated", r->err_truncated);
        if (j && r->ran)
                json_object_set_new(j, "exit_code", json_integer(r->exit_code));
        if (j && r->reason)
                json_object_set_new(j, "reason", json_string(r->reason));
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text)
                return -ENOMEM;
        *ret = text;
        *ret_len = strlen(text);
        return 0;
}

int escalate_response_parse(const char *buf, size_t len, EscalateResponse *ret, const char **ret_why) {
        EscalateResponse r = {};
        *ret_why = "the response is too large";
        if (len > ESCALATE_RESPONSE_MAX)
                return -EBADMSG;
        json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
        *ret_why = "the response is not the protocol's";
        const char *id = json_string_value(json_object_get(j, "request_id"));
        const char *by = json_string_value(json_object_get(j, "decided_by"));
        const char *out = json_string_value(json_object_get(j, "stdout"));
        const char *err = json_string_value(json_object_get(j, "stderr"));
        json_t *code = json_object_get(j, "exit_code"), *reason = json_object_get(j, "reason");
        if (!json_is_object(j) || !id || !by || !out || !err || !json_is_boolean(json_object_get(j, "approved")) ||
            (code && !json_is_integer(code)) || (reason && !json_is_string(reason)))
                goto bad;
        r.approved = json_is_true(json_object_get(j, "approved"));
        r.ran = code != NULL;
        r.exit_code = code ? (int) json_integer_value(code) : 0;
        r.out_truncated = json_is_true(json_object_get(j, "stdout_truncated"));
        r.err_truncated = json_is_true(json_object_get(j, "stderr_truncated"));
        if (ctl_base64_decode(out, strlen(out), ESCALATE_OUTPUT_MAX, &r.out, &r.out_len) < 0 ||
            ctl_base64_decode(err, strlen(err), ESCALATE_OUTPUT_MAX, &r.err, &r.err_len) < 0)
                goto bad;
        r.request_id = strdup(id);
        r.decided_by = strdup(by);
        r.reason = reason ? strdup(json_string_value(reason)) : NULL;
        json_decref(j);
        if (!r.request_id || !r.decided_by || (reason && !r.reason)) {
                escalate_response_done(&r);
                return -ENOMEM;
        }
        *ret_why = NULL;
        *ret = r;
        return 0;
bad:
        json_decref(j);
        escalate_response_done(&r);
        return -EBADMSG;
}
