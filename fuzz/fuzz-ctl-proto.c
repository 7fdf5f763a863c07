/* SPDX-License-Identifier: MIT */
/* Fuzz the control protocol: the input is a byte stream from a peer. Every
 * frame the reader yields is decoded; whatever decodes must encode again, and
 * the re-encoded frame must decode to the same message and encode to the same
 * bytes. The stream is read twice, whole and in small uneven pieces, and both
 * readings must yield the same frames and end in the same state. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool streq_or_null(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}

static bool strv_equal(char **a, size_t na, char **b, size_t nb) {
        if (na != nb || !a != !b)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!streq_or_null(a[i], b[i]))
                        return false;
        return !a || (!a[na] && !b[nb]);
}

static bool mem_equal(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
        return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

static bool messages_equal(const CtlMessage *a, const CtlMessage *b) {
        return a->type == b->type && strcmp(a->session_id, b->session_id) == 0 && a->version == b->version &&
               a->cli_pid == b->cli_pid && strv_equal(a->argv, a->n_argv, b->argv, b->n_argv) &&
               strv_equal(a->env, a->n_env, b->env, b->n_env) && a->interactive == b->interactive &&
               a->rows == b->rows && a->columns == b->columns && a->pixel_width == b->pixel_width &&
               a->pixel_height == b->pixel_height && streq_or_null(a->term, b->term) && !a->terminfo == !b->terminfo &&
               mem_equal(a->terminfo, a->terminfo_len, b->terminfo, b->terminfo_len) &&
               mem_equal(a->bytes, a->n_bytes, b->bytes, b->n_bytes) && a->eof == b->eof && a->stream == b->stream &&
               a->signal == b->signal && a->generation_id == b->generation_id && a->outcome == b->outcome &&
               a->exit_code == b->exit_code && a->exit_signal == b->exit_signal &&
               streq_or_null(a->message, b->message) && streq_or_null(a->cwd, b->cwd) && !a->status == !b->status &&
               (!a->status || json_equal(a->status, b->status));
}

static bool message_is_zero(const CtlMessage *m) {
        return m->type == 0 && m->session_id[0] == 0 && !m->argv && !m->env && !m->term && !m->terminfo && !m->bytes &&
               !m->message && !m->cwd && !m->status && m->n_argv == 0 && m->n_bytes == 0;
}

static void check_frame(const uint8_t *payload, size_t len) {
        CtlMessage m;
        const char *err = NULL;
        int r = ctl_message_decode(payload, len, &m, &err);
        if (r < 0) {
                if (!message_is_zero(&m))
                        abort();
                if (r == -EBADMSG && (!err || !*err))
                        abort();
                if (r != -EBADMSG && r != -ENOMEM)
                        abort();
                return;
        }

        uint8_t *f1 = NULL, *f2 = NULL;
        size_t n1 = 0, n2 = 0;
        if (ctl_message_encode(&m, &f1, &n1) < 0)
                abort(); /* we accepted it, so we must be able to send it */
        if (n1 < 5 || n1 - 4 > CTL_FRAME_MAX ||
            ((size_t) f1[0] << 24 | (size_t) f1[1] << 16 | (size_t) f1[2] << 8 | f1[3]) != n1 - 4)
                abort();

        CtlMessage m2;
        if (ctl_message_decode(f1 + 4, n1 - 4, &m2, &err) < 0)
                abort();
        if (!messages_equal(&m, &m2))
                abort();
        if (ctl_message_encode(&m2, &f2, &n2) < 0 || n1 != n2 || memcmp(f1, f2, n1) != 0)
                abort();

        free(f1);
        free(f2);
        ctl_message_done(&m);
        ctl_message_done(&m2);
}

typedef struct Trace {
        uint64_t hash;
        size_t frames;
        int end;
} Trace;

static void trace_frame(Trace *t, const uint8_t *p, size_t n) {
        t->frames++;
        t->hash = (t->hash ^ n) * 1099511628211u;
        for (size_t i = 0; i < n; i++)
                t->hash = (t->hash ^ p[i]) * 1099511628211u;
}

/* Drain the reader; returns its last result (0 or -EMSGSIZE). */
static int drain(CtlReader *r, Trace *t, bool decode) {
        const uint8_t *p;
        size_t n;
        int k;
        while ((k = ctl_reader_next(r, &p, &n)) > 0) {
                trace_frame(t, p, n);
                if (decode)
                        check_frame(p, n);
        }
        return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > CTL_READER_MAX)
                return 0;

        /* Whole. */
        Trace whole = { .hash = 14695981039346656037u };
        CtlReader r = {};
        if (ctl_reader_feed(&r, data, size) < 0)
                abort();
        whole.end = drain(&r, &whole, true);
        ctl_reader_done(&r);

        /* In pieces of 1..13 bytes, draining after each; a failed reader
         * must keep refusing. */
        Trace pieces = { .hash = 14695981039346656037u };
        r = (CtlReader){};
        pieces.end = 0;
        for (size_t off = 0, i = 0; off < size; i++) {
                size_t k = 1 + i % 13;
                if (k > size - off)
                        k = size - off;
                if (k > ctl_reader_room(&r) && !r.failed)
                        abort();
                int q = ctl_reader_feed(&r, data + off, k);
                if (pieces.end < 0) {
                        if (q != -EMSGSIZE)
                                abort();
                        break;
                }
                if (q < 0)
                        abort();
                off += k;
                pieces.end = drain(&r, &pieces, false);
        }
        if (size == 0)
                pieces.end = drain(&r, &pieces, false);
        ctl_reader_done(&r);

        if (whole.frames != pieces.frames || whole.hash != pieces.hash || whole.end != pieces.end)
                abort();
        return 0;
}
