/* SPDX-License-Identifier: MIT */
/* The control protocol codec (ctl-proto.h). Each message type has one table
 * of fields; the decoder and the encoder both walk it and share the checks,
 * so the encoder never produces a frame that the decoder would refuse.
 * Its length (some 1,250 lines) is the protocol's eighteen message types
 * over those shared tables and checks. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <openssl/crypto.h>

#include "ctl-proto.h"
#include "fd-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"

#define CTL_TERM_MAX 256u
/* A drained reader gives back a larger buffer, so one big frame does not pin
 * a megabyte per peer for the rest of the connection. */
#define CTL_READER_KEEP (64u * 1024u)
#define CTL_READER_MIN  4096u

/* ---- names -------------------------------------------------------------- */

static const char *const ctl_type_table[_CTL_TYPE_MAX] = {
        [CTL_HELLO] = "Hello",
        [CTL_SESSION_OPEN] = "SessionOpen",
        [CTL_TERMINAL_INPUT] = "TerminalInput",
        [CTL_TERMINAL_RESIZE] = "TerminalResize",
        [CTL_TERMINAL_SIGNAL] = "TerminalSignal",
        [CTL_SESSION_CLOSE] = "SessionClose",
        [CTL_STATUS_REQUEST] = "StatusRequest",
        [CTL_STOP_REQUEST] = "StopRequest",
        [CTL_SESSION_OPENED] = "SessionOpened",
        [CTL_TERMINAL_OUTPUT] = "TerminalOutput",
        [CTL_SESSION_EXIT] = "SessionExit",
        [CTL_STATUS] = "Status",
        [CTL_ERROR] = "Error",
        [CTL_PROMPT_REQUEST] = "PromptRequest",
        [CTL_PROMPT_ANSWER] = "PromptAnswer",
        [CTL_PROMPT_CANCEL] = "PromptCancel",
        [CTL_PROMPT_DONE] = "PromptDone",
        [CTL_STATUS_WATCH] = "StatusWatch",
        [CTL_STATUS_LINE] = "StatusLine",
        [CTL_SANDBOX_PAUSE] = "SandboxPause",
};

static const char *const ctl_signal_table[_CTL_SIGNAL_MAX] = {
        [CTL_SIGNAL_INTERRUPT] = "Interrupt",
        [CTL_SIGNAL_QUIT] = "Quit",
        [CTL_SIGNAL_SUSPEND] = "Suspend",
};

static const char *const ctl_exit_outcome_table[_CTL_EXIT_MAX] = {
        [CTL_EXIT_EXITED] = "Exited",
        [CTL_EXIT_TERMINATED] = "Terminated",
        [CTL_EXIT_RUNTIME_LOST] = "RuntimeLost",
};

static int name_lookup(const char *const *table, int n, const char *s) {
        if (!s)
                return -EINVAL;
        for (int i = 0; i < n; i++)
                if (streq(table[i], s))
                        return i;
        return -EINVAL;
}

const char *ctl_type_to_string(CtlType t) {
        if (t < 0 || t >= _CTL_TYPE_MAX)
                return NULL;
        return ctl_type_table[t];
}

CtlType ctl_type_from_string(const char *s) {
        return (CtlType) name_lookup(ctl_type_table, _CTL_TYPE_MAX, s);
}

const char *ctl_signal_to_string(CtlSignal s) {
        if (s < 0 || s >= _CTL_SIGNAL_MAX)
                return NULL;
        return ctl_signal_table[s];
}

CtlSignal ctl_signal_from_string(const char *s) {
        return (CtlSignal) name_lookup(ctl_signal_table, _CTL_SIGNAL_MAX, s);
}

const char *ctl_exit_outcome_to_string(CtlExitOutcome o) {
        if (o < 0 || o >= _CTL_EXIT_MAX)
                return NULL;
        return ctl_exit_outcome_table[o];
}

CtlExitOutcome ctl_exit_outcome_from_string(const char *s) {
        return (CtlExitOutcome) name_lookup(ctl_exit_outcome_table, _CTL_EXIT_MAX, s);
}

/* ---- uuids -------------------------------------------------------------- */

bool ctl_uuid_valid(const char *s) {
        if (!s)
                return false;
        /* Never reads past s[36], so a char[37] without its NUL is safe. */
        for (size_t i = 0; i < 36; i++) {
                if (i == 8 || i == 13 || i == 18 || i == 23) {
                        if (s[i] != '-')
                                return false;
                } else if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        }
        return s[36] == '\0';
}

int ctl_uuid_v4(char ret[37]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t b[16];
        size_t got = 0;

        while (got < sizeof b) {
                ssize_t k = getrandom(b + got, sizeof b - got, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                got += (size_t) k;
        }
        b[6] = (uint8_t) ((b[6] & 0x0f) | 0x40); /* version 4 */
        b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80); /* variant 10 (RFC 4122) */

        char s[37];
        size_t o = 0;
        for (size_t i = 0; i < sizeof b; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        s[o++] = '-';
                s[o++] = hex[b[i] >> 4];
                s[o++] = hex[b[i] & 0xf];
        }
        s[o] = '\0';
        memcpy(ret, s, sizeof s);
        return 0;
}

/* ---- base64 (RFC 4648, padded, canonical) ------------------------------- */

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

/* Strict: length a multiple of 4, '=' only as the last one or two characters,
 * unused bits of the last group zero (one encoding per byte string). Returns
 * 0, -EBADMSG for invalid text, -E2BIG when the result would exceed max
 * (checked before allocating), -ENOMEM. "" decodes to NULL, 0. */
int ctl_base64_decode(const char *s, size_t n, size_t max, uint8_t **ret, size_t *ret_len) {
        if (n % 4 != 0)
                return -EBADMSG;
        if (n == 0) {
                *ret = NULL;
                *ret_len = 0;
                return 0;
        }
        size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
        size_t out_len = n / 4 * 3 - pad;
        if (out_len > max)
                return -E2BIG;

        /* Validate everything before allocating: a peer's garbage costs nothing. */
        for (size_t i = 0; i < n - pad; i++)
                if (b64_value(s[i]) < 0)
                        return -EBADMSG;
        if (pad == 2 && (b64_value(s[n - 3]) & 0x0f) != 0)
                return -EBADMSG;
        if (pad == 1 && (b64_value(s[n - 2]) & 0x03) != 0)
                return -EBADMSG;

        _cleanup_free_ uint8_t *out = malloc(out_len);
        if (!out)
                return -ENOMEM;
        size_t o = 0;
        for (size_t i = 0; i < n; i += 4) {
                uint32_t v = 0;
                for (size_t j = 0; j < 4; j++)
                        v = v << 6 | (uint32_t) (s[i + j] == '=' ? 0 : b64_value(s[i + j]));
                uint8_t q[3] = { (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v };
                for (size_t j = 0; j < 3 && o < out_len; j++)
                        out[o++] = q[j];
        }
        *ret = TAKE_PTR(out);
        *ret_len = out_len;
        return 0;
}

char *ctl_base64_encode(const uint8_t *p, size_t n, size_t *ret_len) {
        size_t out_len = (n + 2) / 3 * 4;
        char *out = malloc(out_len + 1);
        if (!out)
                return NULL;
        size_t o = 0;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t) p[i] << 16;
                if (i + 1 < n)
                        v |= (uint32_t) p[i + 1] << 8;
                if (i + 2 < n)
                        v |= p[i + 2];
                out[o++] = b64_alphabet[(v >> 18) & 0x3f];
                out[o++] = b64_alphabet[(v >> 12) & 0x3f];
                out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 0x3f] : '=';
                out[o++] = i + 2 < n ? b64_alphabet[v & 0x3f] : '=';
        }
        out[o] = '\0';
        *ret_len = out_len;
        return out;
}

/* ---- checks shared by the decoder and the encoder ----------------------- */

/* RFC 3629 as jansson applies it: no overlong forms, no surrogates, nothing
 * above U+10FFFF. The decoder gets this from jansson; the encoder checks
 * first so that invalid input is -EINVAL rather than a mystery -ENOMEM. */
bool ctl_utf8_valid(const char *s, size_t n) {
        const uint8_t *p = (const uint8_t *) s;
        size_t i = 0;
        while (i < n) {
                uint8_t c = p[i];
                size_t k;
                uint32_t cp, min;
                if (c < 0x80) {
                        i++;
                        continue;
                } else if (c >= 0xc2 && c <= 0xdf) {
                        k = 1, cp = c & 0x1f, min = 0x80;
                } else if (c >= 0xe0 && c <= 0xef) {
                        k = 2, cp = c & 0x0f, min = 0x800;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        k = 3, cp = c & 0x07, min = 0x10000;
                } else
                        return false;
                if (n - i - 1 < k)
                        return false;
                for (size_t j = 1; j <= k; j++) {
                        if ((p[i + j] & 0xc0) != 0x80)
                                return false;
                        cp = cp << 6 | (p[i + j] & 0x3f);
                }
                if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                i += k + 1;
        }
        return true;
}

static bool term_char_valid(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '+' || c == '-';
}

typedef enum FieldError {
        FE_OK,
        FE_MISSING,
        FE_TYPE,
        FE_RANGE,
        FE_NUL,
        FE_INVALID,
        FE_TOO_LONG,
        FE_EMPTY,
        FE_TOO_MANY,
        FE_FIRST_EMPTY,
        FE_NO_EQUALS,
        FE_BAD_NAME,
        FE_BASE64,
        FE_UNEXPECTED,
        _FE_MAX,
        _FE_INVALID = -EINVAL,
} FieldError;

/* Static strings with the field's name, built at compile time. */
#define FIELD_ERRORS(n)                                                                                                \
        {                                                                                                              \
                [FE_OK] = NULL, [FE_MISSING] = n ": missing", [FE_TYPE] = n ": wrong type",                            \
                [FE_RANGE] = n ": out of range", [FE_NUL] = n ": contains NUL", [FE_INVALID] = n ": invalid value",    \
                [FE_TOO_LONG] = n ": too long", [FE_EMPTY] = n ": empty", [FE_TOO_MANY] = n ": too many entries",      \
                [FE_FIRST_EMPTY] = n ": first entry empty", [FE_NO_EQUALS] = n ": entry without '='",                  \
                [FE_BAD_NAME] = n ": invalid variable name", [FE_BASE64] = n ": invalid base64",                       \
                [FE_UNEXPECTED] = n ": not allowed with this outcome",                                                 \
        }

typedef enum FieldKind {
        FIELD_UNSIGNED, /* unsigned, value in min..max */
        FIELD_INT, /* int, value in min..max */
        FIELD_U64, /* uint64_t, value in min..max */
        FIELD_BOOL, /* bool */
        FIELD_UUID, /* char[37], canonical lowercase */
        FIELD_STRING, /* char *, length in min..max */
        FIELD_TERM, /* char *, length in min..max, [A-Za-z0-9._+-] */
        FIELD_RELPATH, /* char *, length in min..max, path_relative_safe() */
        FIELD_ARGV, /* char **, min..max entries, the first not empty */
        FIELD_ENV, /* char **, min..max entries "NAME=value" */
        FIELD_BYTES, /* uint8_t * + size_t, base64, decoded length in min..max */
        FIELD_SIGNAL, /* CtlSignal by name */
        FIELD_OUTCOME, /* CtlExitOutcome by name */
        FIELD_OBJECT, /* json_t *, an object */
        _FIELD_KIND_MAX,
        _FIELD_KIND_INVALID = -EINVAL,
} FieldKind;

typedef enum FieldPresence {
        PRESENCE_REQUIRED,
        PRESENCE_OPTIONAL, /* absent or null: NULL; encoded when non-NULL */
        PRESENCE_EXITED, /* there exactly when outcome is Exited */
        PRESENCE_TERMINATED, /* there exactly when outcome is Terminated */
        _PRESENCE_MAX,
        _PRESENCE_INVALID = -EINVAL,
} FieldPresence;

typedef struct Field {
        const char *name;
        FieldKind kind;
        FieldPresence presence;
        int64_t min, max;
        size_t offset; /* of the value in CtlMessage */
        size_t count_offset; /* of its size_t length, for ARGV, ENV, BYTES */
        const char *error[_FE_MAX];
} Field;

#define FIELD(n, k, p, lo, hi, member)                                                                                 \
        {                                                                                                              \
                .name = n, .kind = k, .presence = p, .min = lo, .max = hi, .offset = offsetof(CtlMessage, member),     \
                .error = FIELD_ERRORS(n),                                                                              \
        }
#define FIELD_N(n, k, p, lo, hi, member, count)                                                                        \
        {                                                                                                              \
                .name = n, .kind = k, .presence = p, .min = lo, .max = hi, .offset = offsetof(CtlMessage, member),     \
                .count_offset = offsetof(CtlMessage, count), .error = FIELD_ERRORS(n),                                 \
        }

#define F_SESSION_ID     FIELD("session_id", FIELD_UUID, PRESENCE_REQUIRED, 0, 0, session_id)
#define F_U16(n, member) FIELD(n, FIELD_UNSIGNED, PRESENCE_REQUIRED, 0, 65535, member)

static const Field hello_fields[] = {
        /* Any version parses; message_check() then says "unsupported". */
        FIELD("version", FIELD_UNSIGNED, PRESENCE_REQUIRED, 0, INT_MAX, version),
        FIELD("cli_pid", FIELD_INT, PRESENCE_REQUIRED, 1, INT_MAX, cli_pid),
        FIELD("key", FIELD_STRING, PRESENCE_OPTIONAL, CTL_KEY_TEXT, CTL_KEY_TEXT, key),
        FIELD("netpolicy", FIELD_STRING, PRESENCE_OPTIONAL, 1, CTL_FRAME_MAX, netpolicy),
        FIELD("netpolicy_digest", FIELD_STRING, PRESENCE_OPTIONAL, 64, 64, netpolicy_digest),
        FIELD("backend", FIELD_STRING, PRESENCE_OPTIONAL, 1, 16, backend),
        FIELD("address_rules", FIELD_STRING, PRESENCE_OPTIONAL, 1, 16, address_rules),
};

static const Field session_open_fields[] = {
        FIELD_N("argv", FIELD_ARGV, PRESENCE_REQUIRED, 1, CTL_ARGV_MAX, argv, n_argv),
        FIELD_N("env", FIELD_ENV, PRESENCE_REQUIRED, 0, CTL_ARGV_MAX, env, n_env),
        FIELD("interactive", FIELD_BOOL, PRESENCE_REQUIRED, 0, 0, interactive),
        F_U16("rows", rows),
        F_U16("columns", columns),
        FIELD("term", FIELD_TERM, PRESENCE_OPTIONAL, 1, CTL_TERM_MAX, term),
        FIELD_N("terminfo", FIELD_BYTES, PRESENCE_OPTIONAL, 1, CTL_TERMINFO_MAX, terminfo, terminfo_len),
        FIELD("anchor", FIELD_STRING, PRESENCE_OPTIONAL, 1, 64, anchor),
        FIELD("credential", FIELD_STRING, PRESENCE_OPTIONAL, 1, 1024, credential),
        FIELD("cwd", FIELD_RELPATH, PRESENCE_OPTIONAL, 1, CTL_CWD_MAX, cwd),
};

static const Field terminal_input_fields[] = {
        F_SESSION_ID,
        FIELD_N("bytes", FIELD_BYTES, PRESENCE_REQUIRED, 0, CTL_BYTES_MAX, bytes, n_bytes),
        FIELD("eof", FIELD_BOOL, PRESENCE_REQUIRED, 0, 0, eof),
};

static const Field terminal_resize_fields[] = {
        F_SESSION_ID,
        F_U16("rows", rows),
        F_U16("columns", columns),
        F_U16("pixel_width", pixel_width),
        F_U16("pixel_height", pixel_height),
};

static const Field terminal_signal_fields[] = {
        F_SESSION_ID,
        FIELD("signal", FIELD_SIGNAL, PRESENCE_REQUIRED, 0, 0, signal),
};

static const Field session_close_fields[] = {
        F_SESSION_ID,
};

static const Field stop_request_fields[] = {
        FIELD("reason", FIELD_STRING, PRESENCE_REQUIRED, 0, CTL_FRAME_MAX, message),
};

static const Field session_opened_fields[] = {
        F_SESSION_ID,
        FIELD("generation_id", FIELD_U64, PRESENCE_REQUIRED, 1, INT64_MAX, generation_id),
};

static const Field terminal_output_fields[] = {
        F_SESSION_ID,
        FIELD("stream", FIELD_INT, PRESENCE_REQUIRED, 1, 2, stream),
        FIELD_N("bytes", FIELD_BYTES, PRESENCE_REQUIRED, 0, CTL_BYTES_MAX, bytes, n_bytes),
};

static const Field session_exit_fields[] = {
        F_SESSION_ID,
        FIELD("outcome", FIELD_OUTCOME, PRESENCE_REQUIRED, 0, 0, outcome),
        FIELD("exit_code", FIELD_INT, PRESENCE_EXITED, 0, 255, exit_code),
        FIELD("signal", FIELD_INT, PRESENCE_TERMINATED, 1, 64, exit_signal),
        FIELD("message", FIELD_STRING, PRESENCE_OPTIONAL, 0, CTL_FRAME_MAX, message),
};

static const Field status_fields[] = {
        FIELD("status", FIELD_OBJECT, PRESENCE_REQUIRED, 0, 0, status),
};

static const Field error_fields[] = {
        FIELD("message", FIELD_STRING, PRESENCE_REQUIRED, 0, CTL_FRAME_MAX, message),
};

#define F_REQUEST_ID FIELD("request_id", FIELD_UUID, PRESENCE_REQUIRED, 0, 0, request_id)

static const Field prompt_request_fields[] = {
        F_SESSION_ID,
        F_REQUEST_ID,
        FIELD("profile", FIELD_STRING, PRESENCE_REQUIRED, 1, 64, profile),
        FIELD("command", FIELD_STRING, PRESENCE_REQUIRED, 1, 16384, command),
        FIELD("justification", FIELD_STRING, PRESENCE_REQUIRED, 0, 4096, justification),
        FIELD("queued", FIELD_UNSIGNED, PRESENCE_REQUIRED, 0, 1024, queued),
};

static const Field prompt_answer_fields[] = {
        F_SESSION_ID,
        F_REQUEST_ID,
        FIELD("decision", FIELD_STRING, PRESENCE_REQUIRED, 1, 16, decision),
        FIELD("command", FIELD_STRING, PRESENCE_OPTIONAL, 1, 16384, command),
};

static const Field prompt_ref_fields[] = {
        F_SESSION_ID,
        F_REQUEST_ID,
};

static const Field status_watch_fields[] = {
        F_SESSION_ID,
};

static const Field sandbox_pause_fields[] = {
        F_SESSION_ID,
        FIELD("pause", FIELD_BOOL, PRESENCE_REQUIRED, 0, 0, pause),
};

typedef struct MessageFields {
        const Field *fields;
        size_t n;
} MessageFields;

#define MESSAGE_FIELDS(a)                                                                                              \
        { a, ELEMENTSOF(a) }

static const MessageFields message_fields[_CTL_TYPE_MAX] = {
        [CTL_HELLO] = MESSAGE_FIELDS(hello_fields),
        [CTL_SESSION_OPEN] = MESSAGE_FIELDS(session_open_fields),
        [CTL_TERMINAL_INPUT] = MESSAGE_FIELDS(terminal_input_fields),
        [CTL_TERMINAL_RESIZE] = MESSAGE_FIELDS(terminal_resize_fields),
        [CTL_TERMINAL_SIGNAL] = MESSAGE_FIELDS(terminal_signal_fields),
        [CTL_SESSION_CLOSE] = MESSAGE_FIELDS(session_close_fields),
        [CTL_STATUS_REQUEST] = { NULL, 0 },
        [CTL_STOP_REQUEST] = MESSAGE_FIELDS(stop_request_fields),
        [CTL_SESSION_OPENED] = MESSAGE_FIELDS(session_opened_fields),
        [CTL_TERMINAL_OUTPUT] = MESSAGE_FIELDS(terminal_output_fields),
        [CTL_SESSION_EXIT] = MESSAGE_FIELDS(session_exit_fields),
        [CTL_STATUS] = MESSAGE_FIELDS(status_fields),
        [CTL_ERROR] = MESSAGE_FIELDS(error_fields),
        [CTL_PROMPT_REQUEST] = MESSAGE_FIELDS(prompt_request_fields),
        [CTL_PROMPT_ANSWER] = MESSAGE_FIELDS(prompt_answer_fields),
        [CTL_PROMPT_CANCEL] = MESSAGE_FIELDS(prompt_ref_fields),
        [CTL_PROMPT_DONE] = MESSAGE_FIELDS(prompt_ref_fields),
        [CTL_STATUS_WATCH] = MESSAGE_FIELDS(status_watch_fields),
        [CTL_STATUS_LINE] = MESSAGE_FIELDS(status_fields),
        [CTL_SANDBOX_PAUSE] = MESSAGE_FIELDS(sandbox_pause_fields),
};

static void *field_ptr(CtlMessage *m, size_t offset) {
        return (uint8_t *) m + offset;
}

static const void *field_cptr(const CtlMessage *m, size_t offset) {
        return (const uint8_t *) m + offset;
}

/* Whether a conditional field belongs in m (the outcome decides). */
static bool field_wanted(const Field *f, const CtlMessage *m) {
        switch (f->presence) {
        case PRESENCE_REQUIRED:
                return true;
        case PRESENCE_OPTIONAL:
                return *(void *const *) field_cptr(m, f->offset) != NULL;
        case PRESENCE_EXITED:
                return m->outcome == CTL_EXIT_EXITED;
        case PRESENCE_TERMINATED:
                return m->outcome == CTL_EXIT_TERMINATED;
        case _PRESENCE_MAX:
        case _PRESENCE_INVALID:
                break;
        }
        return false;
}

static FieldError check_length(const Field *f, size_t len) {
        if (len < (uint64_t) f->min)
                return FE_EMPTY;
        if (len > (uint64_t) f->max)
                return FE_TOO_LONG;
        return FE_OK;
}

static FieldError check_term(const Field *f, const char *s, size_t len) {
        FieldError e = check_length(f, len);
        if (e != FE_OK)
                return e;
        for (size_t i = 0; i < len; i++)
                if (!term_char_valid(s[i]))
                        return FE_INVALID;
        return FE_OK;
}

static FieldError check_relpath(const Field *f, const char *s, size_t len) {
        FieldError e = check_length(f, len);
        if (e != FE_OK)
                return e;
        return path_relative_safe(s, (size_t) f->max) ? FE_OK : FE_INVALID;
}

/* The check of a string kind. */
static FieldError check_text(const Field *f, const char *s, size_t len) {
        switch (f->kind) {
        case FIELD_TERM:
                return check_term(f, s, len);
        case FIELD_RELPATH:
                return check_relpath(f, s, len);
        case FIELD_STRING:
        case FIELD_UNSIGNED:
        case FIELD_INT:
        case FIELD_U64:
        case FIELD_BOOL:
        case FIELD_UUID:
        case FIELD_ARGV:
        case FIELD_ENV:
        case FIELD_BYTES:
        case FIELD_SIGNAL:
        case FIELD_OUTCOME:
        case FIELD_OBJECT:
        case _FIELD_KIND_MAX:
        case _FIELD_KIND_INVALID:
                break;
        }
        return check_length(f, len);
}

static FieldError check_strv_entry(const Field *f, size_t idx, const char *s, size_t len) {
        if (len > CTL_STRING_MAX)
                return FE_TOO_LONG;
        if (f->kind == FIELD_ARGV)
                return idx == 0 && len == 0 ? FE_FIRST_EMPTY : FE_OK;

        const char *eq = memchr(s, '=', len);
        if (!eq)
                return FE_NO_EQUALS;
        if (eq == s || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
                return FE_BAD_NAME;
        for (const char *p = s + 1; p < eq; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
                        return FE_BAD_NAME;
        return FE_OK;
}

/* A value inside Status.status at nesting depth (the frame's object is 1):
 * within CTL_JSON_DEPTH_MAX, with no NUL in any string. Bounded recursion:
 * the depth check comes first. */
static bool json_value_ok(const json_t *v, unsigned depth) {
        switch (json_typeof(v)) {
        case JSON_OBJECT: {
                if (depth > CTL_JSON_DEPTH_MAX)
                        return false;
                json_t *o = (json_t *) v; /* jansson's iterators take non-const */
                for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
                        if (strlen(json_object_iter_key(it)) != json_object_iter_key_len(it))
                                return false;
                        if (!json_value_ok(json_object_iter_value(it), depth + 1))
                                return false;
                }
                return true;
        }
        case JSON_ARRAY:
                if (depth > CTL_JSON_DEPTH_MAX)
                        return false;
                for (size_t i = 0; i < json_array_size(v); i++)
                        if (!json_value_ok(json_array_get(v, i), depth + 1))
                                return false;
                return true;
        case JSON_STRING:
                return strlen(json_string_value(v)) == json_string_length(v);
        case JSON_INTEGER:
        case JSON_REAL:
        case JSON_TRUE:
        case JSON_FALSE:
        case JSON_NULL:
                return true;
        }
        return false;
}

bool json_text_depth_ok(const uint8_t *p, size_t n, unsigned max) {
        unsigned depth = 0;
        bool in_string = false;
        for (size_t i = 0; i < n; i++) {
                if (in_string) {
                        if (p[i] == '\\')
                                i++;
                        else if (p[i] == '"')
                                in_string = false;
                        continue;
                }
                if (p[i] == '"')
                        in_string = true;
                else if (p[i] == '[' || p[i] == '{') {
                        if (++depth > max)
                                return false;
                } else if ((p[i] == ']' || p[i] == '}') && depth > 0)
                        depth--;
        }
        return true;
}

/* Rules spanning fields; m is complete. NULL when fine. */
static const char *message_check(const CtlMessage *m) {
        if (m->type == CTL_HELLO && m->version != CTL_PROTOCOL_VERSION)
                return "version: unsupported protocol version";
        if (m->type == CTL_PROMPT_ANSWER) {
                if (!streq(m->decision, "approve") && !streq(m->decision, "deny") && !streq(m->decision, "abort") &&
                    !streq(m->decision, "unable"))
                        return "decision: not approve, deny, abort or unable";
                if (m->command && !streq(m->decision, "approve"))
                        return "command: only an approval carries one";
        }
        return NULL;
}

/* ---- message lifetime --------------------------------------------------- */

static char **strv_free(char **l) {
        if (l)
                for (char **i = l; *i; i++)
                        free(*i);
        free(l);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free)

void ctl_message_done(CtlMessage *m) {
        if (!m)
                return;
        strv_free(m->argv);
        strv_free(m->env);
        free(m->term);
        free(m->terminfo);
        free(m->bytes);
        free(m->message);
        free(m->netpolicy);
        free(m->netpolicy_digest);
        if (m->key)
                OPENSSL_cleanse(m->key, strlen(m->key));
        free(m->key);
        free(m->backend);
        free(m->address_rules);
        free(m->anchor);
        free(m->profile);
        free(m->command);
        free(m->justification);
        free(m->decision);
        if (m->credential)
                explicit_bzero(m->credential, strlen(m->credential));
        free(m->credential);
        free(m->cwd);
        if (m->status)
                json_decref(m->status);
        *m = (CtlMessage){};
}

/* ---- decoding ----------------------------------------------------------- */

/* A JSON string without NUL. */
static FieldError get_string(const json_t *v, const char **ret, size_t *ret_len) {
        if (!json_is_string(v))
                return FE_TYPE;
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        if (strlen(s) != len)
                return FE_NUL;
        *ret = s;
        *ret_len = len;
        return FE_OK;
}

static int decode_strv(const Field *f, const json_t *v, CtlMessage *m, FieldError *ret_fe) {
        if (!json_is_array(v))
                return *ret_fe = FE_TYPE, -EBADMSG;
        size_t n = json_array_size(v);
        if (n < (uint64_t) f->min)
                return *ret_fe = FE_EMPTY, -EBADMSG;
        if (n > (uint64_t) f->max)
                return *ret_fe = FE_TOO_MANY, -EBADMSG;

        _cleanup_(strv_freep) char **l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *s;
                size_t len;
                FieldError e = get_string(json_array_get(v, i), &s, &len);
                if (e == FE_OK)
                        e = check_strv_entry(f, i, s, len);
                if (e != FE_OK)
                        return *ret_fe = e, -EBADMSG;
                l[i] = strndup(s, len);
                if (!l[i])
                        return -ENOMEM;
        }
        *(char ***) field_ptr(m, f->offset) = TAKE_PTR(l);
        *(size_t *) field_ptr(m, f->count_offset) = n;
        return 0;
}

/* Returns 0, -EBADMSG with *ret_fe set, or -ENOMEM. */
static int decode_field(const Field *f, const json_t *v, CtlMessage *m, FieldError *ret_fe) {
        void *p = field_ptr(m, f->offset);
        const char *s;
        size_t len;
        FieldError e;

        switch (f->kind) {
        case FIELD_UNSIGNED:
        case FIELD_INT:
        case FIELD_U64: {
                if (!json_is_integer(v))
                        return *ret_fe = FE_TYPE, -EBADMSG;
                json_int_t x = json_integer_value(v);
                if (x < f->min || x > f->max)
                        return *ret_fe = FE_RANGE, -EBADMSG;
                if (f->kind == FIELD_UNSIGNED)
                        *(unsigned *) p = (unsigned) x;
                else if (f->kind == FIELD_INT)
                        *(int *) p = (int) x;
                else
                        *(uint64_t *) p = (uint64_t) x;
                return 0;
        }
        case FIELD_BOOL:
                if (!json_is_boolean(v))
                        return *ret_fe = FE_TYPE, -EBADMSG;
                *(bool *) p = json_is_true(v);
                return 0;
        case FIELD_UUID:
                e = get_string(v, &s, &len);
                if (e == FE_OK && !ctl_uuid_valid(s))
                        e = FE_INVALID;
                if (e != FE_OK)
                        return *ret_fe = e, -EBADMSG;
                memcpy(p, s, 37);
                return 0;
        case FIELD_STRING:
        case FIELD_TERM:
        case FIELD_RELPATH: {
                e = get_string(v, &s, &len);
                if (e == FE_OK)
                        e = check_text(f, s, len);
                if (e != FE_OK)
                        return *ret_fe = e, -EBADMSG;
                char *c = strndup(s, len);
                if (!c)
                        return -ENOMEM;
                *(char **) p = c;
                return 0;
        }
        case FIELD_ARGV:
        case FIELD_ENV:
                return decode_strv(f, v, m, ret_fe);
        case FIELD_BYTES: {
                e = get_string(v, &s, &len);
                if (e != FE_OK)
                        return *ret_fe = e, -EBADMSG;
                uint8_t *b;
                size_t n;
                int r = ctl_base64_decode(s, len, (size_t) f->max, &b, &n);
                if (r == -E2BIG)
                        return *ret_fe = FE_TOO_LONG, -EBADMSG;
                if (r == -EBADMSG)
                        return *ret_fe = FE_BASE64, -EBADMSG;
                if (r < 0)
                        return r;
                if (n < (uint64_t) f->min) {
                        free(b);
                        return *ret_fe = FE_EMPTY, -EBADMSG;
                }
                *(uint8_t **) p = b;
                *(size_t *) field_ptr(m, f->count_offset) = n;
                return 0;
        }
        case FIELD_SIGNAL: {
                e = get_string(v, &s, &len);
                if (e != FE_OK)
                        return *ret_fe = e, -EBADMSG;
                CtlSignal sig = ctl_signal_from_string(s);
                if (sig < 0)
                        return *ret_fe = FE_INVALID, -EBADMSG;
                *(CtlSignal *) p = sig;
                return 0;
        }
        case FIELD_OUTCOME: {
                e = get_string(v, &s, &len);
                if (e != FE_OK)
                        return *ret_fe = e, -EBADMSG;
                CtlExitOutcome o = ctl_exit_outcome_from_string(s);
                if (o < 0)
                        return *ret_fe = FE_INVALID, -EBADMSG;
                *(CtlExitOutcome *) p = o;
                return 0;
        }
        case FIELD_OBJECT:
                if (!json_is_object(v))
                        return *ret_fe = FE_TYPE, -EBADMSG;
                if (!json_value_ok(v, 2))
                        return *ret_fe = FE_NUL, -EBADMSG;
                *(json_t **) p = json_incref((json_t *) v);
                return 0;
        case _FIELD_KIND_MAX:
        case _FIELD_KIND_INVALID:
                break;
        }
        return -EINVAL;
}

static const char *json_error_string(const json_error_t *je) {
        switch (json_error_code(je)) {
        case json_error_duplicate_key:
                return "duplicate key";
        case json_error_invalid_utf8:
                return "invalid UTF-8";
        case json_error_numeric_overflow:
                return "number out of range";
        case json_error_null_byte_in_key:
                return "key contains NUL";
        case json_error_stack_overflow:
                return "nesting too deep";
        case json_error_out_of_memory:
                return "out of memory";
        case json_error_unknown:
        case json_error_cannot_open_file:
        case json_error_invalid_argument:
        case json_error_premature_end_of_input:
        case json_error_end_of_input_expected:
        case json_error_invalid_syntax:
        case json_error_invalid_format:
        case json_error_wrong_type:
        case json_error_null_character:
        case json_error_null_value:
        case json_error_item_not_found:
        case json_error_index_out_of_range:
                break;
        }
        return "malformed JSON";
}

static int decode_object(json_t *o, CtlMessage *m, const char **ret_error) {
        json_t *t = json_object_get(o, "type");
        if (!t || json_is_null(t))
                return *ret_error = "type: missing", -EBADMSG;
        if (!json_is_string(t))
                return *ret_error = "type: wrong type", -EBADMSG;
        /* A name with NUL in it is no known name. */
        CtlType type = strlen(json_string_value(t)) == json_string_length(t)
                               ? ctl_type_from_string(json_string_value(t))
                               : _CTL_TYPE_INVALID;
        if (type < 0)
                return *ret_error = "type: unknown", -EBADMSG;
        m->type = type;

        const MessageFields *mf = &message_fields[type];
        for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
                const char *key = json_object_iter_key(it);
                bool known = streq(key, "type");
                for (size_t i = 0; !known && i < mf->n; i++)
                        known = streq(key, mf->fields[i].name);
                if (!known)
                        return *ret_error = "unknown field", -EBADMSG;
        }

        uint32_t present = 0;
        for (size_t i = 0; i < mf->n; i++) {
                const Field *f = &mf->fields[i];
                json_t *v = json_object_get(o, f->name);
                if (!v || json_is_null(v)) {
                        if (f->presence == PRESENCE_REQUIRED)
                                return *ret_error = f->error[FE_MISSING], -EBADMSG;
                        continue;
                }
                FieldError fe = FE_OK;
                int r = decode_field(f, v, m, &fe);
                if (r == -EBADMSG)
                        return *ret_error = f->error[fe], -EBADMSG;
                if (r < 0)
                        return *ret_error = "out of memory", r;
                present |= UINT32_C(1) << i;
        }

        /* Conditional fields: only now is the outcome known. */
        for (size_t i = 0; i < mf->n; i++) {
                const Field *f = &mf->fields[i];
                if (f->presence != PRESENCE_EXITED && f->presence != PRESENCE_TERMINATED)
                        continue;
                bool want = field_wanted(f, m), have = present & (UINT32_C(1) << i);
                if (want && !have)
                        return *ret_error = f->error[FE_MISSING], -EBADMSG;
                if (!want && have)
                        return *ret_error = f->error[FE_UNEXPECTED], -EBADMSG;
        }

        const char *err = message_check(m);
        if (err)
                return *ret_error = err, -EBADMSG;
        return 0;
}

int ctl_message_decode(const uint8_t *payload, size_t len, CtlMessage *ret, const char **ret_error) {
        _cleanup_(ctl_message_done) CtlMessage m = {};
        const char *err = NULL;
        int r;

        *ret = (CtlMessage){};

        if (len > CTL_FRAME_MAX) {
                err = "frame too large";
                r = -EBADMSG;
        } else if (!json_text_depth_ok(payload, len, CTL_JSON_DEPTH_MAX)) {
                err = "nesting too deep";
                r = -EBADMSG;
        } else {
                json_error_t je;
                json_auto_t *o = json_loadb((const char *) payload, len,
                                            JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
                if (!o) {
                        err = json_error_string(&je);
                        r = json_error_code(&je) == json_error_out_of_memory ? -ENOMEM : -EBADMSG;
                } else if (!json_is_object(o)) {
                        err = "top level is not an object";
                        r = -EBADMSG;
                } else
                        r = decode_object(o, &m, &err);
        }
        if (r < 0) {
                if (ret_error)
                        *ret_error = err;
                return r;
        }

        *ret = m;
        m = (CtlMessage){};
        return 0;
}

/* ---- encoding ----------------------------------------------------------- */

static int encode_string(const char *s, size_t len, json_t **ret) {
        if (!ctl_utf8_valid(s, len))
                return -EINVAL;
        json_t *v = json_stringn(s, len);
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}

static int encode_strv(const Field *f, const CtlMessage *m, json_t **ret) {
        char *const *l = *(char **const *) field_cptr(m, f->offset);
        size_t n = *(const size_t *) field_cptr(m, f->count_offset);
        if (n < (uint64_t) f->min || n > (uint64_t) f->max || (n > 0 && !l))
                return -EINVAL;

        json_auto_t *a = json_array();
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (!l[i])
                        return -EINVAL;
                size_t len = strlen(l[i]);
                if (check_strv_entry(f, i, l[i], len) != FE_OK)
                        return -EINVAL;
                json_t *s;
                int r = encode_string(l[i], len, &s);
                if (r < 0)
                        return r;
                if (json_array_append_new(a, s) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(a);
        return 0;
}

/* Returns 0 with a new reference in *ret, -EINVAL, -ENOMEM. */
static int encode_field(const Field *f, const CtlMessage *m, json_t **ret) {
        const void *p = field_cptr(m, f->offset);
        json_t *v = NULL;

        switch (f->kind) {
        case FIELD_UNSIGNED:
        case FIELD_INT:
        case FIELD_U64: {
                /* Every range fits in int64_t; compare in the field's own type. */
                bool ok;
                json_int_t x;
                if (f->kind == FIELD_UNSIGNED) {
                        unsigned u = *(const unsigned *) p;
                        ok = (uint64_t) u >= (uint64_t) f->min && (uint64_t) u <= (uint64_t) f->max;
                        x = (json_int_t) u;
                } else if (f->kind == FIELD_INT) {
                        int i = *(const int *) p;
                        ok = i >= f->min && i <= f->max;
                        x = i;
                } else {
                        uint64_t u = *(const uint64_t *) p;
                        ok = u >= (uint64_t) f->min && u <= (uint64_t) f->max;
                        x = (json_int_t) u;
                }
                if (!ok)
                        return -EINVAL;
                v = json_integer(x);
                break;
        }
        case FIELD_BOOL:
                v = json_boolean(*(const bool *) p);
                break;
        case FIELD_UUID:
                if (!ctl_uuid_valid(p))
                        return -EINVAL;
                v = json_stringn_nocheck(p, 36);
                break;
        case FIELD_STRING:
        case FIELD_TERM:
        case FIELD_RELPATH: {
                const char *s = *(char *const *) p;
                if (!s)
                        return -EINVAL;
                size_t len = strlen(s);
                if (check_text(f, s, len) != FE_OK)
                        return -EINVAL;
                return encode_string(s, len, ret);
        }
        case FIELD_ARGV:
        case FIELD_ENV:
                return encode_strv(f, m, ret);
        case FIELD_BYTES: {
                const uint8_t *b = *(uint8_t *const *) p;
                size_t n = *(const size_t *) field_cptr(m, f->count_offset);
                if (check_length(f, n) != FE_OK || (n > 0 && !b))
                        return -EINVAL;
                size_t len;
                _cleanup_free_ char *s = ctl_base64_encode(b, n, &len);
                if (!s)
                        return -ENOMEM;
                v = json_stringn_nocheck(s, len);
                break;
        }
        case FIELD_SIGNAL: {
                const char *s = ctl_signal_to_string(*(const CtlSignal *) p);
                if (!s)
                        return -EINVAL;
                v = json_string_nocheck(s);
                break;
        }
        case FIELD_OUTCOME: {
                const char *s = ctl_exit_outcome_to_string(*(const CtlExitOutcome *) p);
                if (!s)
                        return -EINVAL;
                v = json_string_nocheck(s);
                break;
        }
        case FIELD_OBJECT: {
                json_t *o = *(json_t *const *) p;
                if (!o || !json_is_object(o) || !json_value_ok(o, 2))
                        return -EINVAL;
                v = json_incref(o);
                break;
        }
        case _FIELD_KIND_MAX:
        case _FIELD_KIND_INVALID:
                return -EINVAL;
        }
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}

typedef struct FrameBuf {
        uint8_t *buf;
        size_t len, cap;
        bool too_big;
} FrameBuf;

/* Collects jansson's output after the 4-byte prefix, never beyond a whole
 * frame: an oversized message fails without being built in full. */
static int frame_append(const char *data, size_t size, void *userdata) {
        FrameBuf *b = userdata;
        if (size > 4 + CTL_FRAME_MAX - b->len) {
                b->too_big = true;
                return -1;
        }
        if (size > b->cap - b->len) {
                size_t cap = b->cap;
                while (size > cap - b->len)
                        cap = cap * 2 > 4 + CTL_FRAME_MAX ? 4 + CTL_FRAME_MAX : cap * 2;
                uint8_t *n = realloc(b->buf, cap);
                if (!n)
                        return -1;
                b->buf = n;
                b->cap = cap;
        }
        memcpy(b->buf + b->len, data, size);
        b->len += size;
        return 0;
}

int ctl_message_encode(const CtlMessage *m, uint8_t **ret, size_t *ret_len) {
        int r;

        if (!m)
                return -EINVAL;
        const char *type = ctl_type_to_string(m->type);
        if (!type || message_check(m))
                return -EINVAL;

        json_auto_t *o = json_object();
        if (!o)
                return -ENOMEM;
        if (json_object_set_new_nocheck(o, "type", json_string_nocheck(type)) < 0)
                return -ENOMEM;

        const MessageFields *mf = &message_fields[m->type];
        for (size_t i = 0; i < mf->n; i++) {
                const Field *f = &mf->fields[i];
                if (!field_wanted(f, m))
                        continue;
                json_t *v = NULL;
                r = encode_field(f, m, &v);
                if (r < 0)
                        return r;
                if (json_object_set_new_nocheck(o, f->name, v) < 0)
                        return -ENOMEM;
        }

        FrameBuf b = { .len = 4, .cap = 256 };
        b.buf = malloc(b.cap);
        if (!b.buf)
                return -ENOMEM;
        r = json_dump_callback(o, frame_append, &b, JSON_COMPACT);
        _cleanup_free_ uint8_t *buf = b.buf;
        if (r < 0)
                return b.too_big ? -EINVAL : -ENOMEM;

        size_t n = b.len - 4;
        buf[0] = (uint8_t) (n >> 24);
        buf[1] = (uint8_t) (n >> 16);
        buf[2] = (uint8_t) (n >> 8);
        buf[3] = (uint8_t) n;
        *ret = TAKE_PTR(buf);
        *ret_len = b.len;
        return 0;
}

/* ---- frame reader ------------------------------------------------------- */

int ctl_reader_feed(CtlReader *r, const uint8_t *data, size_t n) {
        if (r->failed)
                return -EMSGSIZE;
        if (n == 0)
                return 0;

        size_t unread = r->len - r->start;
        if (n > CTL_READER_MAX - unread)
                return -ENOBUFS;

        if (unread == 0) {
                r->start = r->len = 0;
                if (r->cap > CTL_READER_KEEP) {
                        r->buf = mfree(r->buf);
                        r->cap = 0;
                }
        }

        if (n > r->cap - r->len && r->start > 0) {
                /* Move the partial frame to the front instead of growing.
                 * Frames are consumed by advancing start, so a byte is moved
                 * at most once while it waits: linear in the stream. */
                memmove(r->buf, r->buf + r->start, unread);
                r->start = 0;
                r->len = unread;
        }

        if (n > r->cap - r->len) {
                size_t need = r->len + n, cap = r->cap > 0 ? r->cap : CTL_READER_MIN;
                while (cap < need)
                        cap *= 2;
                if (cap > CTL_READER_MAX)
                        cap = CTL_READER_MAX;
                uint8_t *b = realloc(r->buf, cap);
                if (!b)
                        return -ENOMEM;
                r->buf = b;
                r->cap = cap;
        }

        memcpy(r->buf + r->len, data, n);
        r->len += n;
        return 0;
}

size_t ctl_reader_room(const CtlReader *r) {
        if (r->failed)
                return 0;
        return CTL_READER_MAX - (r->len - r->start);
}

int ctl_reader_next(CtlReader *r, const uint8_t **ret_payload, size_t *ret_len) {
        if (r->failed)
                return -EMSGSIZE;

        size_t unread = r->len - r->start;
        if (unread < 4)
                return 0;
        const uint8_t *p = r->buf + r->start;
        uint32_t n = (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
        if (n == 0 || n > CTL_FRAME_MAX) {
                /* The peer is dropped; keep nothing it sent. */
                r->buf = mfree(r->buf);
                r->start = r->len = r->cap = 0;
                r->failed = true;
                return -EMSGSIZE;
        }
        if (unread - 4 < n)
                return 0;

        r->start += 4 + (size_t) n;
        *ret_payload = p + 4;
        *ret_len = n;
        return 1;
}

void ctl_reader_done(CtlReader *r) {
        if (!r)
                return;
        free(r->buf);
        *r = (CtlReader){};
}
