/* SPDX-License-Identifier: MIT */
#pragma once

/* The control protocol between the lazaret CLI and its Session Coordinator
 * (decision 9; schema "Session terminal protocol").
 *
 * Wire format: frames of a u32 big-endian length followed by that many bytes
 * of one JSON object (UTF-8) with a "type" member. Frames larger than
 * CTL_FRAME_MAX, malformed JSON, unknown types, missing or mistyped fields and
 * unknown fields are errors: the receiver drops the peer. Byte strings
 * (terminal data, terminfo) travel base64-encoded (RFC 4648, with padding).
 *
 * Messages, CLI -> coordinator:
 *   Hello           {type, version, cli_pid, key?, netpolicy?, netpolicy_digest?, backend?, address_rules?}
 *                                                         first frame, always;
 *                                                         key: the socket's key (ctl-key.h),
 *                                                         which the coordinator requires;
 *                                                         netpolicy: the joining CLI's Derived
 *                                                         Network Policy (canonical form);
 *                                                         netpolicy_digest: instead, its digest,
 *                                                         from the CLI that started the
 *                                                         coordinator with that policy (a
 *                                                         policy of 10,000 prefixes costs
 *                                                         milliseconds of JSON each way); one
 *                                                         that is not the coordinator's is
 *                                                         refused;
 *                                                         address_rules: with netpolicy, whose
 *                                                         address rules made it, "global" or "own";
 *                                                         backend: the one it launched with (a
 *                                                         different running one refuses it)
 *   SessionOpen     {type, argv[], env[], interactive, rows, columns,
 *                    term?, terminfo?, anchor?, credential?, cwd?}  start a command;
 *                                                         anchor: the CLI's Session Anchor
 *                                                         public key, credential: the exec's
 *                                                         delegation (session-anchor.h); cwd:
 *                                                         the session's directory below
 *                                                         /workspace (relative, no "." or ".."
 *                                                         segment, no control character, at
 *                                                         most CTL_CWD_MAX bytes), absent for
 *                                                         /workspace itself
 *   TerminalInput   {type, session_id, bytes, eof}         stdin data; eof=true once stdin ends
 *   TerminalResize  {type, session_id, rows, columns, pixel_width, pixel_height}
 *   TerminalSignal  {type, session_id, signal}             "Interrupt" | "Quit" | "Suspend"
 *   SessionClose    {type, session_id}                     the CLI is leaving
 *   StatusRequest   {type}
 *   StopRequest     {type, reason}
 * Coordinator -> CLI:
 *   SessionOpened   {type, session_id, generation_id}
 *   TerminalOutput  {type, session_id, stream, bytes}      stream 1 (stdout, or the PTY) or 2 (stderr)
 *   SessionExit     {type, session_id, outcome, exit_code?, signal?, message?}
 *                    outcome "Exited" (exit_code set) | "Terminated" (signal set) | "RuntimeLost"
 *   Status          {type, status}                         status: an object (see coordinator)
 *   Error           {type, message}                        then the coordinator closes
 *   PromptRequest   {type, session_id, request_id, profile, command, justification, queued}
 *                                                         a request from this session's sandbox
 *                                                         needs the person at this terminal
 *   PromptDone      {type, session_id, request_id}         take the prompt down: the approved command
 *                                                         has finished, or the requester hung up
 * CLI -> coordinator, while a prompt is up:
 *   PromptAnswer    {type, session_id, request_id, decision, command?}
 *                    decision "approve" | "deny" | "abort" | "unable" (this terminal cannot show
 *                    the prompt); command: the edited command line, with "approve" only
 *   PromptCancel    {type, session_id, request_id}         stop the approved command
 * CLI -> coordinator, for the status line of `lazaret run` (issue 20):
 *   StatusWatch     {type, session_id}                     send StatusLine frames to this
 *                                                         connection: one now, then one when it
 *                                                         changes, at most 5 a second
 *   SandboxPause    {type, session_id, pause}              pause (true) or resume (false) the
 *                                                         whole sandbox; the next StatusLine
 *                                                         says which it is
 * Coordinator -> CLI:
 *   StatusLine      {type, status}                         status: {sessions, refused_connections,
 *                                                         refused_git, escalations_pending,
 *                                                         paused, network, policy_digest,
 *                                                         pause_error?}
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl-key.h"
#include "macro.h"

#define CTL_PROTOCOL_VERSION 1
#define CTL_FRAME_MAX        (1024u * 1024u) /* bytes of JSON in one frame */
#define CTL_BYTES_MAX        (256u * 1024u) /* decoded bytes in one Input/Output frame */
#define CTL_ARGV_MAX         4096u /* entries in argv or env */
#define CTL_STRING_MAX       (128u * 1024u) /* one argv/env string */
#define CTL_TERMINFO_MAX     (64u * 1024u) /* a compiled terminfo entry */
#define CTL_CWD_MAX          4000u /* SessionOpen.cwd: "/workspace/" + it stays below PATH_MAX */
#define CTL_JSON_DEPTH_MAX   32u /* nesting of arrays/objects, the frame's object included */
#define CTL_READER_MAX       (4u + CTL_FRAME_MAX) /* unread bytes a CtlReader holds at most */

typedef enum CtlType {
        CTL_HELLO,
        CTL_SESSION_OPEN,
        CTL_TERMINAL_INPUT,
        CTL_TERMINAL_RESIZE,
        CTL_TERMINAL_SIGNAL,
        CTL_SESSION_CLOSE,
        CTL_STATUS_REQUEST,
        CTL_STOP_REQUEST,
        CTL_SESSION_OPENED,
        CTL_TERMINAL_OUTPUT,
        CTL_SESSION_EXIT,
        CTL_STATUS,
        CTL_ERROR,
        CTL_PROMPT_REQUEST,
        CTL_PROMPT_ANSWER,
        CTL_PROMPT_CANCEL,
        CTL_PROMPT_DONE,
        CTL_STATUS_WATCH,
        CTL_STATUS_LINE,
        CTL_SANDBOX_PAUSE,
        _CTL_TYPE_MAX,
        _CTL_TYPE_INVALID = -EINVAL,
} CtlType;

typedef enum CtlSignal {
        CTL_SIGNAL_INTERRUPT,
        CTL_SIGNAL_QUIT,
        CTL_SIGNAL_SUSPEND,
        _CTL_SIGNAL_MAX,
        _CTL_SIGNAL_INVALID = -EINVAL,
} CtlSignal;

typedef enum CtlExitOutcome {
        CTL_EXIT_EXITED,
        CTL_EXIT_TERMINATED,
        CTL_EXIT_RUNTIME_LOST,
        _CTL_EXIT_MAX,
        _CTL_EXIT_INVALID = -EINVAL,
} CtlExitOutcome;

/* One decoded message. Strings and buffers are owned by the message and freed
 * by ctl_message_done(). session_id is a 36-character lowercase uuid. Fields
 * not used by a type are zero / NULL. */
typedef struct CtlMessage {
        CtlType type;
        char session_id[37];

        /* Hello */
        unsigned version;
        int cli_pid;
        char *key; /* the control socket's key (ctl-key.h); may be NULL */
        char *netpolicy; /* may be NULL */
        char *netpolicy_digest; /* instead of netpolicy: its digest; may be NULL */
        char *backend; /* "gvisor" or "native"; may be NULL */
        char *address_rules; /* "global" or "own" (the profile's, decision 20); may be NULL */

        /* SessionOpen */
        char **argv; /* NULL-terminated; n_argv >= 1 */
        size_t n_argv;
        char **env; /* NULL-terminated "NAME=value" */
        size_t n_env;
        bool interactive;
        unsigned rows, columns; /* also TerminalResize */
        unsigned pixel_width, pixel_height;
        char *term; /* may be NULL */
        uint8_t *terminfo; /* may be NULL */
        size_t terminfo_len;
        char *anchor; /* the CLI's Session Anchor public key (base64url); may be NULL */
        char *credential; /* the exec's delegation credential; may be NULL */
        char *cwd; /* below /workspace, path_relative_safe(); NULL: /workspace itself */

        /* TerminalInput / TerminalOutput */
        uint8_t *bytes;
        size_t n_bytes;
        bool eof;
        int stream; /* 1 or 2 */

        /* TerminalSignal */
        CtlSignal signal;

        /* SessionOpened */
        uint64_t generation_id;

        /* SessionExit */
        CtlExitOutcome outcome;
        int exit_code; /* Exited */
        int exit_signal; /* Terminated: signal number */
        char *message; /* also StopRequest.reason and Error.message; may be NULL */

        /* Status */
        json_t *status; /* owned reference */

        /* PromptRequest / PromptAnswer / PromptCancel / PromptDone */
        char request_id[37];
        char *profile;
        char *command; /* PromptRequest: as asked; PromptAnswer: the edited command, or NULL */
        char *justification;
        char *decision; /* "approve", "deny", "abort" or "unable" */
        unsigned queued; /* requests waiting behind this one */

        /* SandboxPause */
        bool pause;
} CtlMessage;

const char *ctl_type_to_string(CtlType t); /* "Hello", "SessionOpen", ... */
CtlType ctl_type_from_string(const char *s);
const char *ctl_signal_to_string(CtlSignal s);
CtlSignal ctl_signal_from_string(const char *s);
const char *ctl_exit_outcome_to_string(CtlExitOutcome o);
CtlExitOutcome ctl_exit_outcome_from_string(const char *s);

void ctl_message_done(CtlMessage *m);

/* Encode m as one frame (length prefix included). *ret is malloc'ed.
 * Returns 0, -EINVAL for a message that violates the limits or field rules
 * (so we never send what we would refuse), or -ENOMEM. Only the fields of
 * m->type are read. Optional fields are left out when NULL (term, terminfo,
 * SessionExit.message); SessionExit carries exit_code only for Exited and
 * signal (m->exit_signal) only for Terminated, the other is ignored.
 * StopRequest.reason and Error.message (m->message) are required. Strings
 * must be valid UTF-8 (JSON carries no other bytes). */
int ctl_message_encode(const CtlMessage *m, uint8_t **ret, size_t *ret_len);

/* Decode the JSON payload of one frame (without the length prefix). Strict:
 * unknown types or fields, wrong types, missing fields, out-of-range numbers,
 * invalid base64 or uuids, strings with NUL, argv empty, env entries without
 * '=' or with an invalid name: -EBADMSG with *ret_error (static string, may
 * be NULL) saying what. On success *ret is filled (call ctl_message_done).
 * On error *ret is zeroed and nothing is leaked; -ENOMEM (error "out of
 * memory") when allocation fails. Payloads above CTL_FRAME_MAX or nested
 * deeper than CTL_JSON_DEPTH_MAX are refused before parsing. */
int ctl_message_decode(const uint8_t *payload, size_t len, CtlMessage *ret, const char **ret_error);

/* Incremental frame reader for a stream socket. Feed it bytes; take complete
 * payloads out. A length of 0 or above CTL_FRAME_MAX makes the reader fail
 * for good (-EMSGSIZE), as the peer must then be dropped. Zero-initialize
 * (CtlReader r = {}); the fields are private. */
typedef struct CtlReader {
        uint8_t *buf;
        size_t start; /* first unread byte: frames are consumed without moving memory */
        size_t len, cap;
        bool failed;
} CtlReader;

/* Append n bytes. Returns 0; -EMSGSIZE once the reader has failed; -ENOBUFS
 * (nothing taken, reader unchanged) when it would then hold more than
 * CTL_READER_MAX unread bytes, which happens only to a caller that does not
 * drain ctl_reader_next() after each feed or feeds more than
 * ctl_reader_room(); -ENOMEM. Invalidates the last payload returned. */
int ctl_reader_feed(CtlReader *r, const uint8_t *data, size_t n);
/* How many bytes ctl_reader_feed() accepts now: read at most this much from
 * the socket. Never 0 once ctl_reader_next() has returned 0 (a partial frame
 * needs at most CTL_READER_MAX bytes); 0 when failed. */
size_t ctl_reader_room(const CtlReader *r);
/* 1 with *ret_payload / *ret_len pointing into the reader (valid until the
 * next feed or next call) when a whole frame is there; 0 when more bytes are
 * needed; -EMSGSIZE when the peer sent an invalid length. */
int ctl_reader_next(CtlReader *r, const uint8_t **ret_payload, size_t *ret_len);
void ctl_reader_done(CtlReader *r);

/* Generate a uuid v4 string (36 chars + NUL) from the kernel CSPRNG. */
int ctl_uuid_v4(char ret[37]);
bool ctl_uuid_valid(const char *s);

/* Base64 (RFC 4648, padded). Decoding is strict: one encoding per byte
 * string, -EBADMSG otherwise, -E2BIG above max (checked first); "" is NULL,
 * 0. Encoding returns NUL-terminated text (caller frees) or NULL. */
int ctl_base64_decode(const char *s, size_t n, size_t max, uint8_t **ret, size_t *ret_len);
char *ctl_base64_encode(const uint8_t *p, size_t n, size_t *ret_len);

/* RFC 3629 UTF-8 as jansson applies it (no overlong forms, no surrogates,
 * nothing above U+10FFFF): what a string must be to be sent. */
bool ctl_utf8_valid(const char *s, size_t n);

/* Nesting depth of raw JSON text at most max, counted before jansson (which
 * recurses) sees it. Exact for valid JSON; invalid JSON is refused by the
 * parser anyway. */
bool json_text_depth_ok(const uint8_t *p, size_t n, unsigned max);
