/* SPDX-License-Identifier: MIT */
/* gVisor's remote sink messages: the protocol buffer wire format, by hand,
 * for the few fields the event record keeps (see trace-wire.h). */
#include <errno.h>
#include <string.h>

#include "trace-wire.h"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

typedef struct Cursor {
        const uint8_t *p, *end;
} Cursor;

/* 1 and the value; 0 at the end of the input (mid-value or not); -EBADMSG
 * for more than ten bytes or bits past 64. */
static int read_varint(Cursor *c, uint64_t *ret) {
        uint64_t v = 0;
        for (unsigned i = 0; i < 10; i++) {
                if (c->p >= c->end)
                        return 0;
                uint8_t b = *c->p++;
                if (i == 9 && b > 1)
                        return -EBADMSG;
                v |= (uint64_t) (b & 0x7f) << (7 * i);
                if (!(b & 0x80)) {
                        *ret = v;
                        return 1;
                }
        }
        return -EBADMSG;
}

typedef struct Field {
        uint32_t num;
        unsigned wire;
        uint64_t v; /* VARINT, I64, I32 */
        TraceBytes b; /* LEN: what arrived of it */
        bool partial; /* LEN: runs past the input's end */
} Field;

/* The next field: 1; 0 at the clean end; -EPIPE when the input ends inside
 * it (f holds a LEN field's part, partial); -EBADMSG. */
static int next_field(Cursor *c, Field *f) {
        if (c->p >= c->end)
                return 0;
        uint64_t key;
        int r = read_varint(c, &key);
        if (r <= 0)
                return r < 0 ? r : -EPIPE;
        if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
                return -EBADMSG;
        *f = (Field){ .num = (uint32_t) (key >> 3), .wire = (unsigned) (key & 7) };
        switch (f->wire) {
        case WIRE_VARINT:
                r = read_varint(c, &f->v);
                return r <= 0 ? (r < 0 ? r : -EPIPE) : 1;
        case WIRE_I64:
        case WIRE_I32: {
                size_t n = f->wire == WIRE_I64 ? 8 : 4;
                if ((size_t) (c->end - c->p) < n) {
                        c->p = c->end;
                        return -EPIPE;
                }
                f->v = 0;
                for (size_t i = 0; i < n; i++)
                        f->v |= (uint64_t) c->p[i] << (8 * i);
                c->p += n;
                return 1;
        }
        case WIRE_LEN: {
                uint64_t n;
                r = read_varint(c, &n);
                if (r <= 0)
                        return r < 0 ? r : -EPIPE;
                size_t left = (size_t) (c->end - c->p);
                f->b.p = (const char *) c->p;
                if (n > left) {
                        f->b.len = left;
                        f->partial = true;
                        c->p = c->end;
                        return -EPIPE;
                }
                f->b.len = (size_t) n;
                c->p += n;
                return 1;
        }
        default: /* groups (3, 4) are not in these messages; 6, 7 are not types */
                return -EBADMSG;
        }
}

static Cursor cursor(TraceBytes b) {
        return (Cursor){ (const uint8_t *) b.p, (const uint8_t *) b.p + b.len };
}

/* Each known field must come with its own wire type. */
static bool want(const Field *f, unsigned wire) {
        return f->wire == wire;
}

static int parse_credentials(TraceBytes b, bool cut, TraceContext *ctx) {
        Cursor c = cursor(b);
        Field f = {};
        int r;
        while ((r = next_field(&c, &f)) > 0) {
                if (f.num != 2 && f.num != 5)
                        continue;
                if (!want(&f, WIRE_VARINT))
                        return -EBADMSG;
                if (f.num == 2)
                        ctx->uid = (uint32_t) f.v;
                else
                        ctx->gid = (uint32_t) f.v;
        }
        if (r == -EPIPE)
                return cut ? 0 : -EBADMSG;
        return r;
}

static int parse_context(TraceBytes b, bool cut, TraceContext *ctx) {
        Cursor c = cursor(b);
        Field f = {};
        int r;
        while ((r = next_field(&c, &f)) > 0) {
                switch (f.num) {
                case 1:
                case 4:
                case 10:
                case 11:
                        if (!want(&f, WIRE_VARINT))
                                return -EBADMSG;
                        if (f.num == 1)
                                ctx->time_ns = (int64_t) f.v;
                        else if (f.num == 4)
                                ctx->tgid = (int32_t) (uint32_t) f.v;
                        else if (f.num == 10)
                                ctx->ppid = (int32_t) (uint32_t) f.v;
                        else
                                ctx->exec_session = f.v != 0;
                        break;
                case 6:
                case 7:
                case 8:
                        if (!want(&f, WIRE_LEN))
                                return -EBADMSG;
                        if (f.num == 6)
                                ctx->container_id = f.b;
                        else if (f.num == 8)
                                ctx->cwd = f.b;
                        else if ((r = parse_credentials(f.b, false, ctx)) < 0)
                                return r;
                        break;
                default:
                        break;
                }
        }
        if (r == -EPIPE && cut) {
                /* Cut inside the credentials: what arrived of them. */
                if (f.num == 7 && f.partial && f.wire == WIRE_LEN)
                        (void) parse_credentials(f.b, true, ctx);
                return 0;
        }
        return r == -EPIPE ? -EBADMSG : r;
}

int trace_message_parse(const void *buf, size_t len, bool cut, TraceMessage *ret) {
        const uint8_t *p = buf;
        if (len < 8)
                return -EBADMSG;
        uint16_t hsize = (uint16_t) (p[0] | p[1] << 8);
        if (hsize < 8 || hsize > len)
                return -EBADMSG;
        *ret = (TraceMessage){
                .type = (uint16_t) (p[2] | p[3] << 8),
                .dropped = (uint32_t) p[4] | (uint32_t) p[5] << 8 | (uint32_t) p[6] << 16 | (uint32_t) p[7] << 24,
                .truncated = cut,
        };
        if (ret->type != TRACE_MSG_CLONE && ret->type != TRACE_MSG_EXEC && ret->type != TRACE_MSG_EXIT &&
            ret->type != TRACE_MSG_CONTAINER)
                return 0;

        Cursor c = { p + hsize, p + len };
        Field f = {};
        int r;
        while ((r = next_field(&c, &f)) > 0) {
                if (f.num == 1) {
                        if (!want(&f, WIRE_LEN))
                                return -EBADMSG;
                        r = parse_context(f.b, false, &ret->ctx);
                        if (r < 0)
                                return r;
                        continue;
                }
                switch (ret->type) {
                case TRACE_MSG_EXEC:
                        if (f.num == 2 || f.num == 3) {
                                if (!want(&f, WIRE_LEN))
                                        return -EBADMSG;
                                if (f.num == 2)
                                        ret->path = f.b;
                                else if (ret->argc++ < TRACE_ARGV_MAX)
                                        ret->argv[ret->argc - 1] = f.b;
                        }
                        break;
                case TRACE_MSG_CLONE:
                        if (f.num == 4 || f.num == 6) {
                                if (!want(&f, WIRE_VARINT))
                                        return -EBADMSG;
                                if (f.num == 4)
                                        ret->child_tgid = (int32_t) (uint32_t) f.v;
                                else
                                        ret->clone_flags = f.v;
                        }
                        break;
                case TRACE_MSG_EXIT:
                        if (f.num == 2) {
                                if (!want(&f, WIRE_VARINT))
                                        return -EBADMSG;
                                ret->exit_status = (int32_t) (uint32_t) f.v;
                        }
                        break;
                default: /* the container's start: its context only */
                        break;
                }
        }
        if (r == -EPIPE && cut) {
                /* A context cut short still names the process. A string
                 * cut short is left out rather than shown in part. */
                if (f.num == 1 && f.partial && f.wire == WIRE_LEN)
                        (void) parse_context(f.b, true, &ret->ctx);
                return 0;
        }
        return r == -EPIPE ? -EBADMSG : r;
}

int trace_handshake_parse(const void *buf, size_t len, uint32_t *ret_version) {
        Cursor c = { buf, (const uint8_t *) buf + len };
        Field f = {};
        int r;
        uint32_t v = 0;
        while ((r = next_field(&c, &f)) > 0)
                if (f.num == 1) {
                        if (!want(&f, WIRE_VARINT))
                                return -EBADMSG;
                        v = (uint32_t) f.v;
                }
        if (r < 0)
                return -EBADMSG;
        *ret_version = v;
        return 0;
}

size_t trace_handshake_write(void *buf, uint32_t version) {
        uint8_t *p = buf;
        size_t n = 0;
        p[n++] = 0x08; /* field 1, varint */
        do {
                p[n++] = (uint8_t) ((version & 0x7f) | (version > 0x7f ? 0x80 : 0));
                version >>= 7;
        } while (version);
        return n;
}
