/* SPDX-License-Identifier: MIT */
/* Unit tests of src/shared/trace-wire: gVisor's remote sink messages as
 * the sentry (not trusted) could send them. The messages are built here by
 * a small encoder of the protocol buffer wire format; real ones, from the
 * pinned runsc, are checked by tests/integration/test_processes.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace-wire.h"

typedef struct Buf {
        uint8_t b[8192];
        size_t n;
} Buf;

static void put_varint(Buf *b, uint64_t v) {
        do {
                assert_true(b->n < sizeof(b->b));
                b->b[b->n++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
        } while (v);
}

static void put_key(Buf *b, uint32_t num, unsigned wire) {
        put_varint(b, (uint64_t) num << 3 | wire);
}

static void put_uint(Buf *b, uint32_t num, uint64_t v) {
        put_key(b, num, 0);
        put_varint(b, v);
}

static void put_bytes(Buf *b, uint32_t num, const void *p, size_t n) {
        put_key(b, num, 2);
        put_varint(b, n);
        assert_true(b->n + n <= sizeof(b->b));
        memcpy(b->b + b->n, p, n);
        b->n += n;
}

static void put_str(Buf *b, uint32_t num, const char *s) {
        put_bytes(b, num, s, strlen(s));
}

static void put_header(Buf *b, uint16_t type, uint32_t dropped) {
        uint8_t h[8] = { 8,
                         0,
                         (uint8_t) type,
                         (uint8_t) (type >> 8),
                         (uint8_t) dropped,
                         (uint8_t) (dropped >> 8),
                         (uint8_t) (dropped >> 16),
                         (uint8_t) (dropped >> 24) };
        memcpy(b->b + b->n, h, 8);
        b->n += 8;
}

/* A context as the sentry fills it, with fields the decoder skips. */
static void context(Buf *c, int32_t tgid, int32_t ppid) {
        Buf creds = {};
        put_uint(&creds, 1, 1000);
        put_uint(&creds, 2, 1001); /* effective uid */
        put_uint(&creds, 5, 2002); /* effective gid */
        put_uint(c, 1, 1796183909974612224ull);
        put_uint(c, 2, 77); /* thread id */
        put_uint(c, 4, (uint64_t) (int64_t) tgid);
        put_str(c, 6, "runsc-631390");
        put_bytes(c, 7, creds.b, creds.n);
        put_str(c, 8, "/workspace/sub dir");
        put_str(c, 9, "bash");
        put_uint(c, 10, (uint64_t) (int64_t) ppid);
        put_uint(c, 11, 1);
}

static void exec_message(Buf *m, size_t nargs) {
        Buf c = {};
        context(&c, 42, 7);
        put_header(m, TRACE_MSG_EXEC, 3);
        put_bytes(m, 1, c.b, c.n);
        put_str(m, 2, "/usr/bin/ls");
        for (size_t i = 0; i < nargs; i++) {
                char a[16];
                snprintf(a, sizeof(a), "arg%zu", i);
                put_str(m, 3, i == 0 ? "ls" : a);
        }
        put_str(m, 4, "LAZARET_SESSION_CREDENTIAL=secret");
        put_uint(m, 5, 0755);
        put_key(m, 99, 1); /* unknown: 64-bit */
        for (int i = 0; i < 8; i++)
                m->b[m->n++] = 0xff;
        put_key(m, 98, 5); /* unknown: 32-bit */
        for (int i = 0; i < 4; i++)
                m->b[m->n++] = 0xee;
        put_str(m, 17, "/bin/ls"); /* execfn */
}

static bool bytes_eq(TraceBytes b, const char *s) {
        return b.p && b.len == strlen(s) && memcmp(b.p, s, b.len) == 0;
}

static void test_exec(void **state) {
        (void) state;
        Buf m = {};
        exec_message(&m, 3);
        TraceMessage t;
        assert_int_equal(trace_message_parse(m.b, m.n, false, &t), 0);
        assert_int_equal(t.type, TRACE_MSG_EXEC);
        assert_int_equal(t.dropped, 3);
        assert_false(t.truncated);
        assert_int_equal(t.ctx.tgid, 42);
        assert_int_equal(t.ctx.ppid, 7);
        assert_int_equal(t.ctx.uid, 1001);
        assert_int_equal(t.ctx.gid, 2002);
        assert_true(t.ctx.exec_session);
        assert_true(t.ctx.time_ns == 1796183909974612224ll);
        assert_true(bytes_eq(t.ctx.cwd, "/workspace/sub dir"));
        assert_true(bytes_eq(t.ctx.container_id, "runsc-631390"));
        assert_true(bytes_eq(t.path, "/usr/bin/ls"));
        assert_int_equal(t.argc, 3);
        assert_true(bytes_eq(t.argv[0], "ls"));
        assert_true(bytes_eq(t.argv[1], "arg1"));
        assert_true(bytes_eq(t.argv[2], "arg2"));
        /* The environment is never looked at: nothing points into it. */
        const char *env = memmem(m.b, m.n, "secret", 6);
        assert_non_null(env);
        for (size_t i = 0; i < t.argc; i++)
                assert_false(t.argv[i].p <= env && env < t.argv[i].p + t.argv[i].len);
}

static void test_many_args(void **state) {
        (void) state;
        Buf m = {};
        exec_message(&m, 100);
        TraceMessage t;
        assert_int_equal(trace_message_parse(m.b, m.n, false, &t), 0);
        assert_int_equal(t.argc, 100);
        assert_true(bytes_eq(t.argv[TRACE_ARGV_MAX - 1], "arg31"));
}

static void test_clone_exit_other(void **state) {
        (void) state;
        Buf c = {}, m = {};
        context(&c, 5, 1);
        put_header(&m, TRACE_MSG_CLONE, 0);
        put_bytes(&m, 1, c.b, c.n);
        put_uint(&m, 3, 9);
        put_uint(&m, 4, 9);
        put_uint(&m, 6, TRACE_CLONE_THREAD | 0x11);
        TraceMessage t;
        assert_int_equal(trace_message_parse(m.b, m.n, false, &t), 0);
        assert_int_equal(t.type, TRACE_MSG_CLONE);
        assert_int_equal(t.ctx.tgid, 5);
        assert_int_equal(t.child_tgid, 9);
        assert_int_equal(t.clone_flags, TRACE_CLONE_THREAD | 0x11);

        m = (Buf){};
        put_header(&m, TRACE_MSG_EXIT, 0xffffffffu);
        put_bytes(&m, 1, c.b, c.n);
        put_uint(&m, 2, (uint64_t) (int64_t) -1); /* a negative int32: ten bytes */
        assert_int_equal(trace_message_parse(m.b, m.n, false, &t), 0);
        assert_int_equal(t.type, TRACE_MSG_EXIT);
        assert_int_equal(t.exit_status, -1);
        assert_int_equal(t.dropped, 0xffffffffu);

        /* A type the decoder does not know: the header only. */
        m = (Buf){};
        put_header(&m, 38, 12);
        put_bytes(&m, 1, c.b, c.n);
        assert_int_equal(trace_message_parse(m.b, m.n, false, &t), 0);
        assert_int_equal(t.type, 38);
        assert_int_equal(t.dropped, 12);
        assert_int_equal(t.ctx.tgid, 0);

        /* A longer header (a later protocol version): the payload follows
         * it. */
        Buf l = {};
        uint8_t h[12] = { 12, 0, TRACE_MSG_EXIT, 0, 1, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd };
        memcpy(l.b, h, sizeof(h));
        l.n = sizeof(h);
        put_uint(&l, 2, 3);
        assert_int_equal(trace_message_parse(l.b, l.n, false, &t), 0);
        assert_int_equal(t.exit_status, 3);
}

static void expect_bad(const Buf *m) {
        TraceMessage t;
        assert_int_equal(trace_message_parse(m->b, m->n, false, &t), -EBADMSG);
}

static void test_malformed(void **state) {
        (void) state;
        Buf m = {};
        TraceMessage t;
        /* Headers. */
        assert_int_equal(trace_message_parse("\x08\x00\x03", 3, false, &t), -EBADMSG);
        assert_int_equal(trace_message_parse("\x04\x00\x03\x00\x00\x00\x00\x00", 8, false, &t), -EBADMSG);
        assert_int_equal(trace_message_parse("\x40\x00\x03\x00\x00\x00\x00\x00", 8, false, &t), -EBADMSG);
        /* A known field with another wire type. */
        put_header(&m, TRACE_MSG_EXEC, 0);
        put_uint(&m, 2, 5);
        expect_bad(&m);
        m = (Buf){};
        put_header(&m, TRACE_MSG_EXEC, 0);
        put_str(&m, 1, "x"); /* a context that is a bad message */
        expect_bad(&m);
        m = (Buf){};
        put_header(&m, TRACE_MSG_CLONE, 0);
        put_str(&m, 4, "x");
        expect_bad(&m);
        /* Groups, wire types 6 and 7, field number 0. */
        for (unsigned w = 3; w <= 7; w++) {
                if (w == 5)
                        continue;
                m = (Buf){};
                put_header(&m, TRACE_MSG_EXEC, 0);
                put_key(&m, 50, w);
                put_uint(&m, 1, 0);
                expect_bad(&m);
        }
        m = (Buf){};
        put_header(&m, TRACE_MSG_EXEC, 0);
        put_uint(&m, 0, 1);
        expect_bad(&m);
        /* A varint of eleven bytes, and one of ten with bits past 64. */
        m = (Buf){};
        put_header(&m, TRACE_MSG_EXIT, 0);
        put_key(&m, 2, 0);
        for (int i = 0; i < 10; i++)
                m.b[m.n++] = 0x80;
        m.b[m.n++] = 0x01;
        expect_bad(&m);
        m = (Buf){};
        put_header(&m, TRACE_MSG_EXIT, 0);
        put_key(&m, 2, 0);
        for (int i = 0; i < 9; i++)
                m.b[m.n++] = 0xff;
        m.b[m.n++] = 0x02;
        expect_bad(&m);
        /* A length past the end, and one of 2^63. */
        m = (Buf){};
        put_header(&m, TRACE_MSG_EXEC, 0);
        put_key(&m, 2, 2);
        put_varint(&m, 100);
        memcpy(m.b + m.n, "abc", 3);
        m.n += 3;
        expect_bad(&m);
        m = (Buf){};
        put_header(&m, TRACE_MSG_EXEC, 0);
        put_key(&m, 3, 2);
        put_varint(&m, UINT64_C(1) << 63);
        expect_bad(&m);
}

/* Cut by the receiver: the fields that arrived whole stay, a string cut
 * short is left out, a cut context still names the process. */
static void test_cut(void **state) {
        (void) state;
        Buf m = {};
        exec_message(&m, 3);
        TraceMessage t;
        /* Inside the first argument's bytes. */
        const uint8_t *ls = memmem(m.b + 8, m.n - 8, "\x1a\x02ls", 4);
        assert_non_null(ls);
        size_t at = (size_t) (ls - m.b) + 3;
        assert_int_equal(trace_message_parse(m.b, at, false, &t), -EBADMSG);
        assert_int_equal(trace_message_parse(m.b, at, true, &t), 0);
        assert_true(t.truncated);
        assert_int_equal(t.argc, 0);
        assert_true(bytes_eq(t.path, "/usr/bin/ls"));
        assert_int_equal(t.ctx.tgid, 42);

        /* Inside the context, after its thread group. */
        const uint8_t *cwd = memmem(m.b + 8, m.n - 8, "/workspace", 10);
        assert_non_null(cwd);
        at = (size_t) (cwd - m.b) + 2;
        assert_int_equal(trace_message_parse(m.b, at, true, &t), 0);
        assert_int_equal(t.ctx.tgid, 42);
        assert_int_equal(t.ctx.uid, 1001);
        assert_null(t.ctx.cwd.p);
        assert_null(t.path.p);

        /* Every prefix: never an error when cut, never a read past the
         * end (the sanitizers' build), and a prefix that ends between two
         * fields is a message of its own. */
        for (size_t n = 8; n <= m.n; n++) {
                assert_int_equal(trace_message_parse(m.b, n, true, &t), 0);
                int r = trace_message_parse(m.b, n, false, &t);
                assert_true(r == 0 || r == -EBADMSG);
        }
}

/* Random bytes behind a valid header: no crash, no read past the end. */
static void test_noise(void **state) {
        (void) state;
        unsigned seed = 12345;
        uint8_t b[512];
        for (int round = 0; round < 20000; round++) {
                size_t n = 8 + (size_t) (rand_r(&seed) % 500);
                for (size_t i = 0; i < n; i++)
                        b[i] = (uint8_t) rand_r(&seed);
                b[0] = 8;
                b[1] = 0;
                b[2] = (uint8_t) (1 + round % 4);
                b[3] = 0;
                uint8_t *copy = malloc(n); /* exact size, so ASan sees an overrun */
                assert_non_null(copy);
                memcpy(copy, b, n);
                TraceMessage t;
                int r = trace_message_parse(copy, n, round % 2, &t);
                assert_true(r == 0 || r == -EBADMSG);
                if (r == 0)
                        for (size_t i = 0; i < t.argc && i < TRACE_ARGV_MAX; i++)
                                assert_true((const uint8_t *) t.argv[i].p + t.argv[i].len <= copy + n);
                free(copy);
        }
}

static void test_handshake(void **state) {
        (void) state;
        uint8_t b[16];
        uint32_t v;
        size_t n = trace_handshake_write(b, 1);
        assert_int_equal(n, 2);
        assert_memory_equal(b, "\x08\x01", 2);
        assert_int_equal(trace_handshake_parse(b, n, &v), 0);
        assert_int_equal(v, 1);
        n = trace_handshake_write(b, 300);
        assert_int_equal(n, 3);
        assert_int_equal(trace_handshake_parse(b, n, &v), 0);
        assert_int_equal(v, 300);
        /* Empty (version 0), unknown fields, garbage. */
        assert_int_equal(trace_handshake_parse(b, 0, &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(trace_handshake_parse("\x10\x05\x08\x02", 4, &v), 0);
        assert_int_equal(v, 2);
        assert_int_equal(trace_handshake_parse("\x0a\x01", 2, &v), -EBADMSG);
        assert_int_equal(trace_handshake_parse("\x08", 1, &v), -EBADMSG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec),
                cmocka_unit_test(test_many_args),
                cmocka_unit_test(test_clone_exit_other),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_cut),
                cmocka_unit_test(test_noise),
                cmocka_unit_test(test_handshake),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
