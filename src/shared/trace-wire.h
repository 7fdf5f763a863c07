/* SPDX-License-Identifier: MIT */
#pragma once

/* gVisor's runtime monitoring, as its remote sink sends it (issue 19): the
 * messages of one SOCK_SEQPACKET connection from the sentry. Each is an
 * 8-byte header (little-endian: header size, message type, the sink's
 * count of points it dropped, which wraps) and a protocol buffer; the
 * connection opens with a Handshake each way (field 1: version).
 *
 * Only what the event record keeps is decoded, by hand from the wire
 * format: an exec (ExecveInfo: its context, binary_path, argv; env is
 * skipped, never read, since it carries the sessions' credentials), a
 * clone (CloneInfo: context, created thread group, flags) and a thread
 * group's exit (ExitNotifyParentInfo: context, exit status). The sentry is
 * not trusted (gVisor's own threat model): every length is checked
 * against what is left, nothing is allocated, strings point into the
 * caller's buffer (not NUL-terminated, any bytes), and a message cut short
 * by the receiver keeps the fields that arrived whole. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_WIRE_VERSION  1u
#define TRACE_HEADER_SIZE   8u
#define TRACE_MSG_CONTAINER 1u /* MESSAGE_CONTAINER_START */
#define TRACE_MSG_CLONE     2u /* MESSAGE_SENTRY_CLONE */
#define TRACE_MSG_EXEC      3u /* MESSAGE_SENTRY_EXEC */
#define TRACE_MSG_EXIT      4u /* MESSAGE_SENTRY_EXIT_NOTIFY_PARENT */
#define TRACE_ARGV_MAX      32u /* arguments kept; argc counts them all */
#define TRACE_CLONE_THREAD  0x00010000u

typedef struct TraceBytes {
        const char *p; /* NULL: absent */
        size_t len;
} TraceBytes;

typedef struct TraceContext {
        int64_t time_ns;
        int32_t tgid, ppid;
        uint32_t uid, gid; /* effective */
        bool exec_session;
        TraceBytes cwd, container_id;
} TraceContext;

typedef struct TraceMessage {
        uint16_t type;
        uint32_t dropped; /* the header's count */
        bool truncated; /* cut short: some fields may be missing */
        TraceContext ctx;
        /* TRACE_MSG_EXEC */
        TraceBytes path;
        TraceBytes argv[TRACE_ARGV_MAX];
        size_t argc; /* every argument seen, kept or not */
        /* TRACE_MSG_CLONE */
        int32_t child_tgid;
        uint64_t clone_flags;
        /* TRACE_MSG_EXIT */
        int32_t exit_status;
} TraceMessage;

/* buf: one whole message as received (len bytes); cut: the receiver had
 * less room than the message (MSG_TRUNC). 0 and *ret; -EBADMSG when the
 * header or a field is malformed; a type not listed above is 0 with only
 * the header's fields. */
int trace_message_parse(const void *buf, size_t len, bool cut, TraceMessage *ret);

/* A Handshake's version: 0, or -EBADMSG. */
int trace_handshake_parse(const void *buf, size_t len, uint32_t *ret_version);
/* Ours, into buf (at least 8 bytes): its length. */
size_t trace_handshake_write(void *buf, uint32_t version);
