/* SPDX-License-Identifier: MIT */
/* The coordinator's plumbing, which every other part of it uses and which
 * uses none of them: epoll watches, helpers' line pipes, the connections'
 * output queues and frames out, a JSON memfd, the store's wrappers, the
 * status pipe's waits, the control socket, and the start of a stop. The
 * coordinator's files form layers over it (tests/file-cycles.py): the
 * loop and start (coordinator.c) over the connections and sessions
 * (coordinator-session.c) over the network, the participants, the broker,
 * the observation and the files record. */
#include "coordinator-internal.h"

int co_epoll_add(Coordinator *co, int fd, uint32_t events, Watch *w) {
        struct epoll_event ev = { .events = events, .data.ptr = w };
        return epoll_ctl(co->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? negative_errno() : 0;
}

void co_epoll_mod(Coordinator *co, int fd, uint32_t events, Watch *w) {
        struct epoll_event ev = { .events = events, .data.ptr = w };
        (void) epoll_ctl(co->epfd, EPOLL_CTL_MOD, fd, &ev);
}

int co_close_watched(Coordinator *co, int fd) {
        if (fd >= 0)
                (void) epoll_ctl(co->epfd, EPOLL_CTL_DEL, fd, NULL);
        return safe_close(fd);
}

int co_lines_watch(Coordinator *co, LinePipe *p) {
        if (p->fd < 0 || co->epfd < 0)
                return 0;
        p->w = (Watch){ WATCH_LINES, p };
        return co_epoll_add(co, p->fd, EPOLLIN, &p->w);
}

void co_lines_readable(Coordinator *co, LinePipe *p) {
        /* A bounded number of reads per wakeup: a helper that floods its
         * pipe cannot hold the loop (and every terminal) on itself. */
        for (int rounds = 0; p->fd >= 0 && rounds < 64; rounds++) {
                ssize_t n = read(p->fd, p->buf + p->len, sizeof(p->buf) - p->len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        p->fd = co_close_watched(co, p->fd);
                        p->len = 0;
                        return;
                }
                p->len += (size_t) n;
                char *start = p->buf, *nl;
                while ((nl = memchr(start, '\n', p->len - (size_t) (start - p->buf)))) {
                        p->fn(co, start, (size_t) (nl - start));
                        start = nl + 1;
                }
                size_t rest = p->len - (size_t) (start - p->buf);
                if (rest == sizeof(p->buf))
                        rest = 0; /* a line longer than the buffer is not the helper's: dropped */
                memmove(p->buf, start, rest);
                p->len = rest;
        }
}

void co_lines_drain(Coordinator *co, LinePipe *p) {
        /* The writer has exited: the pipe ends after what it holds. */
        for (int i = 0; p->fd >= 0 && i < 1024; i++)
                co_lines_readable(co, p);
        if (p->fd >= 0)
                p->fd = co_close_watched(co, p->fd);
        p->len = 0;
}

/* The queue's buffer holds what waits and what was written ahead of it;
 * the written part goes once it is as large as what waits (so each byte
 * moves at most once more), which keeps the buffer at about twice what
 * waits however long a lagging reader streams. */
int co_queue_put(OutQueue *q, const uint8_t *data, size_t n) {
        size_t pending = q->len - q->off;
        if (q->off > 0 && q->off >= pending) {
                memmove(q->buf, q->buf + q->off, pending);
                q->len = pending;
                q->off = 0;
        }
        if (n > q->cap - q->len) {
                size_t cap = MAX(MAX(q->cap * 2, q->len + n), (size_t) 4096);
                uint8_t *b = realloc(q->buf, cap);
                if (!b)
                        return -ENOMEM;
                q->buf = b;
                q->cap = cap;
        }
        memcpy(q->buf + q->len, data, n);
        q->len += n;
        return 0;
}

size_t co_queue_pending(const OutQueue *q) {
        return q->len - q->off;
}

void co_queue_done(OutQueue *q) {
        free(q->buf);
        *q = (OutQueue){};
}

/* Write what the queue holds to a non-blocking fd. 1: empty now, 0: more
 * left, -errno: the fd is broken. */
int co_queue_flush(OutQueue *q, int fd) {
        while (co_queue_pending(q) > 0) {
                ssize_t n = write(fd, q->buf + q->off, co_queue_pending(q));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return negative_errno();
                }
                q->off += (size_t) n;
        }
        q->off = q->len = 0;
        return 1;
}

/* Our own pid + start time, as the store records process identities. */
json_t *co_self_identity(void) {
        ProcessIdentity me = {};
        (void) process_identity_of(getpid(), &me);
        return process_identity_to_json(&me);
}

void conn_update_events(Conn *c) {
        /* A Hello being checked: the frames after it wait (unread). */
        uint32_t ev = (c->state == CONN_HELLO_WAIT ? 0 : EPOLLIN) | EPOLLRDHUP;
        if (co_queue_pending(&c->out) > 0)
                ev |= EPOLLOUT;
        co_epoll_mod(c->co, c->fd, ev, &c->w);
}

int conn_send(Conn *c, const CtlMessage *m) {
        _cleanup_free_ uint8_t *frame = NULL;
        size_t len = 0;
        if (!c || c->dead)
                return 0;
        int r = ctl_message_encode(m, &frame, &len);
        if (r < 0)
                return r;
        r = co_queue_put(&c->out, frame, len);
        if (r < 0)
                return r;
        r = co_queue_flush(&c->out, c->fd);
        if (r < 0) {
                c->dead = true;
                return r;
        }
        conn_update_events(c);
        return 0;
}

void conn_send_error(Conn *c, const char *msg) {
        CtlMessage m = { .type = CTL_ERROR, .message = (char *) msg };
        log_info("dropping a client: %s", msg);
        (void) conn_send(c, &m);
        c->close_after_flush = true;
}

int co_json_memfd(const char *name, json_t *j, int *ret_fd) {
        char *text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!text)
                return -ENOMEM;
        int fd = memfd_create(name, MFD_CLOEXEC);
        if (fd < 0) {
                free(text);
                return negative_errno();
        }
        size_t len = strlen(text);
        ssize_t w = write(fd, text, len);
        free(text);
        if (w < 0 || (size_t) w != len || lseek(fd, 0, SEEK_SET) < 0) {
                safe_close(fd);
                return -EIO;
        }
        *ret_fd = fd;
        return 0;
}

void co_status_touch(Coordinator *co) {
        co->status_dirty = true;
}

/* The store copies the JSON it is given; these wrappers take ownership of
 * it, so the objects the coordinator builds for each call with json_pack()
 * are freed (they leaked before). */
int own_gen_update(Store *st, uint64_t generation, json_t *fields) {
        int r = store_generation_update(st, generation, fields);
        json_decref(fields);
        return r;
}

/* The next step may take up to secs (the leader's limit from now on). */
void status_wait(Coordinator *co, unsigned secs, const char *step) {
        if (co->status_fd < 0)
                return;
        char line[160];
        int n = snprintf(line, sizeof(line), "wait %u %s\n", secs, step);
        if (n > 0 && (size_t) n < sizeof(line))
                (void) !write(co->status_fd, line, (size_t) n);
}

void co_begin_stop(Coordinator *co, const char *reason) {
        if (co->stopping)
                return;
        co->stopping = true;
        co->stop_reason = reason;
        log_info("stopping: %s", reason ? reason : "no clients left");
        /* Our hold on gVisor's memory file would keep its pages after the
         * sandbox ends. */
        if (co->mem_watched)
                co->sb.backend->memory_close(&co->sb); /* status keeps the last figure */
        /* No new clients from now on. */
        if (co->listen_fd >= 0) {
                co->listen_fd = co_close_watched(co, co->listen_fd);
                co_unlink_socket(co->spec.socket_path);
        }
        for (Session *s = co->sessions; s; s = s->next)
                if (session_state_running(s->state) && s->pid > 0) {
                        (void) kill(s->pid, SIGKILL);
                }
}

void co_unlink_socket(const char *socket_path) {
        (void) unlink(socket_path);
        /* git's file system monitor's (fsmonitor.h), which a dead
         * coordinator leaves too. */
        _cleanup_free_ char *fsmon = fsmonitor_socket_path(socket_path);
        if (fsmon)
                (void) unlink(fsmon);
        _cleanup_free_ char *key_path = ctl_key_path(socket_path);
        if (key_path)
                (void) unlink(key_path);
}

int co_bind_socket(Coordinator *co) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(co->spec.socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, co->spec.socket_path);
        /* The key first: a CLI that can connect can read it (issue 41). */
        _cleanup_free_ char *key_path = ctl_key_path(co->spec.socket_path);
        if (!key_path)
                return -ENOMEM;
        int r = ctl_key_create(key_path, co->ctl_key);
        if (r < 0)
                return r;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        (void) unlink(co->spec.socket_path);
        mode_t old = umask(0077);
        r = bind(fd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(fd, 64) < 0) {
                r = negative_errno();
                safe_close(fd);
                return r;
        }
        co->listen_fd = fd;
        return 0;
}
