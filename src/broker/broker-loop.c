/* SPDX-License-Identifier: MIT */
/* lazaret-broker's loop services for connections (broker.h): the clock,
 * epoll watches and the next deadline, the events record and rate-limited
 * refusal lines, and the host's own addresses. broker.c runs the loop and
 * broker-conn.c's connections use these; they call neither. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "host-addr.h"
#include "log.h"

usec_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / 1000u;
}

/* ---- epoll ---- */

int broker_watch(Broker *b, Watch *w, uint32_t events) {
        if (w->added && w->events == events)
                return 0;
        struct epoll_event ev = { .events = events, .data.ptr = w };
        if (epoll_ctl(b->epoll_fd, w->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, w->fd, &ev) < 0)
                return negative_errno();
        w->added = true;
        w->events = events;
        return 0;
}

void broker_unwatch(Broker *b, Watch *w) {
        if (w->added && w->fd >= 0)
                (void) epoll_ctl(b->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
        w->added = false;
        w->events = 0;
}

void broker_deadline(Broker *b, usec_t when) {
        if (when < b->next_deadline)
                b->next_deadline = when;
}

/* ---- logging and the events record ---- */

void broker_log_refusal(Broker *b, const char *fmt, ...) {
        usec_t now = now_usec();
        b->log_tokens += (double) (now - b->log_tokens_at) / (double) USEC_PER_SEC * LOG_RATE;
        if (b->log_tokens > LOG_BURST)
                b->log_tokens = LOG_BURST;
        b->log_tokens_at = now;
        if (b->log_tokens < 1.0) {
                b->log_suppressed++;
                return;
        }
        b->log_tokens -= 1.0;
        char line[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (b->log_suppressed > 0) {
                log_info("%s (and %" PRIu64 " more refusals not logged)", line, b->log_suppressed);
                b->log_suppressed = 0;
        } else
                log_info("%s", line);
}

static void format_time(char *buf, size_t size) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        char s[32];
        strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, size, "%s.%03ldZ", s, ts.tv_nsec / 1000000L);
}

static json_t *str_or_null(const char *s) {
        return s && *s ? json_string(s) : json_null();
}

void broker_event(Broker *b, const Conn *c, const char *verdict, const char *reason, const char *message) {
        char t[64], a[64];
        format_time(t, sizeof(t));
        json_t *o = json_object();
        json_t *addrs = json_array();
        if (!o || !addrs) {
                json_decref(o);
                json_decref(addrs);
                b->events_dropped++;
                return;
        }
        for (size_t i = 0; i < c->n_addrs; i++) {
                netaddr_format(&c->addrs[i], a, sizeof(a));
                json_array_append_new(addrs, json_string(a));
        }
        if (c->connected >= 0)
                netaddr_format(&c->addrs[c->connected], a, sizeof(a));
        usec_t dur = now_usec() - c->start;
        json_object_set_new(o, "time", json_string(t));
        json_object_set_new(o, "via", str_or_null(c->via));
        json_object_set_new(o, "host", c->have_request ? json_string(c->host) : json_null());
        json_object_set_new(o, "name", str_or_null(c->name));
        json_object_set_new(o, "port", c->have_request ? json_integer(c->port) : json_null());
        json_object_set_new(o, "verdict", json_string(verdict));
        json_object_set_new(o, "reason", str_or_null(reason));
        json_object_set_new(o, "message", json_string(message ?: ""));
        json_object_set_new(o, "addresses", addrs);
        json_object_set_new(o, "address", c->connected >= 0 ? json_string(a) : json_null());
        json_object_set_new(o, "bytes_out", json_integer((json_int_t) c->up.total));
        json_object_set_new(o, "bytes_in", json_integer((json_int_t) c->down.total));
        json_object_set_new(o, "duration_ms", json_integer((json_int_t) (dur / USEC_PER_MSEC)));
        if (b->events_dropped > 0)
                json_object_set_new(o, "dropped", json_integer((json_int_t) b->events_dropped));
        char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!line) {
                b->events_dropped++;
                return;
        }
        size_t len = strlen(line);
        line[len++] = '\n'; /* json_dumps' NUL becomes the newline */
        /* At most PIPE_BUF bytes: the write is atomic, whole or not at all. */
        ssize_t k = len <= PIPE_BUF ? write(b->events.fd, line, len) : -1;
        if (k == (ssize_t) len)
                b->events_dropped = 0;
        else {
                if (k < 0 && errno == EPIPE)
                        b->quit = true;
                b->events_dropped++;
        }
        free(line);
}

/* ---- the host's own addresses ---- */

void broker_host_addresses(Broker *b, const NetAddr **ret, size_t *ret_n) {
        usec_t now = now_usec();
        if (!b->host_addrs_valid || now - b->host_addrs_at >= USEC_PER_SEC) {
                NetAddr *v;
                size_t n;
                int r = host_addresses_read(&v, &n);
                if (r < 0)
                        log_full_errno(LOG_LEVEL_WARNING, r,
                                       "cannot read the host's addresses, using the last ones: %m");
                else {
                        free(b->host_addrs);
                        b->host_addrs = v;
                        b->n_host_addrs = n;
                        b->host_addrs_valid = true;
                }
                b->host_addrs_at = now;
        }
        *ret = b->host_addrs;
        *ret_n = b->n_host_addrs;
}
