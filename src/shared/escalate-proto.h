/* SPDX-License-Identifier: MIT */
#pragma once

/* The escalation protocol (spec §5.1.2, §5.1.3) inside the mTLS stream:
 * one request frame from lazaret-escalate, one response frame back. A
 * frame is a u32 big-endian length and that many bytes of one JSON object.
 *
 * Request {request_id, session_id, profile, command, justification,
 *          timestamp, delegation{delegate, not_after},
 *          delegation_signature, signature}
 *   request_id, session_id: uuid v4 text; profile: a profile name;
 *   command: 1..ESCALATE_COMMAND_MAX bytes, no NUL; justification: at most
 *   ESCALATE_JUSTIFICATION_MAX bytes; timestamp: unix seconds. Nothing
 *   else: an unknown, missing or mistyped field refuses the request.
 * Response {request_id, approved, decided_by, exit_code?, stdout, stderr,
 *           stdout_truncated, stderr_truncated, reason?}
 *   stdout/stderr: base64 of the bytes (the command's output may be any
 *   bytes); exit_code only when it ran; reason when it did not. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ESCALATE_REQUEST_MAX       (64u * 1024u) /* bytes of JSON in the request frame */
#define ESCALATE_RESPONSE_MAX      (8u * 1024u * 1024u) /* and in the response frame */
#define ESCALATE_COMMAND_MAX       (16u * 1024u)
#define ESCALATE_JUSTIFICATION_MAX (4u * 1024u)
#define ESCALATE_OUTPUT_MAX        (2u * 1024u * 1024u) /* decoded bytes per stream */

typedef struct EscalateRequest {
        const char *request_id, *session_id, *profile, *command, *justification; /* point into json */
        int64_t timestamp;
        json_t *json; /* the whole request (owned), for the signature check */
} EscalateRequest;

/* Parse and check one request's JSON (len bytes). 0, or -EBADMSG with
 * *ret_why (static text); -ENOMEM. */
int escalate_request_parse(const char *buf, size_t len, EscalateRequest *ret, const char **ret_why);
void escalate_request_done(EscalateRequest *r);

typedef struct EscalateResponse {
        char *request_id;
        bool approved;
        char *decided_by; /* "auto", "user", "edited", or who refused: "policy" */
        bool ran;
        int exit_code;
        unsigned char *out, *err;
        size_t out_len, err_len;
        bool out_truncated, err_truncated;
        char *reason; /* NULL when it ran */
} EscalateResponse;

/* The response as compact JSON text (caller frees). */
int escalate_response_format(const EscalateResponse *r, char **ret, size_t *ret_len);
/* Parse a response (the client's side). 0 or -EBADMSG with *ret_why. */
int escalate_response_parse(const char *buf, size_t len, EscalateResponse *ret, const char **ret_why);
void escalate_response_done(EscalateResponse *r);

/* Frames: the u32 big-endian length prefix. */
void escalate_frame_header(uint32_t len, unsigned char ret[4]);
uint32_t escalate_frame_length(const unsigned char hdr[4]);
