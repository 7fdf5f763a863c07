/* SPDX-License-Identifier: MIT */
#pragma once

/* lazaret-broker's parts (issue 18): the configuration (broker-config.c),
 * the event loop and c-ares' sockets in it (broker.c), the loop's services
 * (epoll watches, deadlines, the events record, the log, the host's
 * addresses: broker-loop.c), one client connection's life with its DNS
 * lookup (broker-conn.c). broker.c calls broker-conn.c, both call
 * broker-loop.c, never the other way. One process per Domain, one thread,
 * one epoll loop. */

#include <ares.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker-proto.h"
#include "domain-rule.h"
#include "netpolicy.h"

typedef uint64_t usec_t;
#define USEC_PER_SEC  1000000ull
#define USEC_PER_MSEC 1000ull
#define USEC_INFINITY UINT64_MAX

#define BROKER_CONNECTIONS_MAX         16384u
#define BROKER_RULES_MAX               4096u
#define BROKER_ADDRS_MAX               16u /* answers kept to connect to; all are checked */
#define BROKER_DNS_TIMEOUT_SEC         5u
#define BROKER_SERVER_NAME_TIMEOUT_SEC 10u
#define BROKER_HOST_SHOWN_MAX          256u /* bytes of the escaped host in events and messages */
#define BROKER_MESSAGE_MAX             256u

typedef struct BrokerConfig {
        DomainRule *rules;
        size_t n_rules;
        bool check_server_name;
        unsigned max_connections;
        unsigned idle_timeout; /* seconds */
        unsigned connect_timeout; /* seconds */
        NetPolicy policy;
        char *resolvers_csv; /* for ares_set_servers_ports_csv; NULL: /etc/resolv.conf */
        size_t n_resolvers;
} BrokerConfig;

/* Parse the configuration JSON. Returns 0, or -EINVAL with a message in
 * error (one line naming the key at fault). */
int broker_config_parse(const char *buf, size_t len, BrokerConfig *ret, char *error, size_t error_size);
void broker_config_done(BrokerConfig *c);

typedef enum WatchKind {
        WATCH_LISTEN,
        WATCH_EVENTS,
        WATCH_SIGNAL,
        WATCH_ARES,
        WATCH_CLIENT,
        WATCH_SERVER,
        _WATCH_KIND_MAX,
} WatchKind;

typedef struct Conn Conn;

/* What an epoll event points at. */
typedef struct Watch {
        WatchKind kind;
        int fd;
        uint32_t events; /* registered interest; 0 with !added: not registered */
        bool added;
        Conn *conn;
        struct Watch *next; /* WATCH_ARES: the broker's list; dead lists */
} Watch;

typedef enum ConnState {
        CONN_REQUEST, /* reading the request line */
        CONN_RESOLVING, /* one DNS lookup */
        CONN_CONNECTING, /* to the validated addresses in turn */
        CONN_SERVER_NAME, /* OK sent; waiting for the first bytes (check_server_name) */
        CONN_PUMP,
        CONN_DEAD,
        _CONN_STATE_MAX,
} ConnState;

/* One direction of the pump: src -> pipe -> dst. */
typedef struct Flow {
        int pipe[2];
        size_t cap; /* the pipe's size */
        size_t bytes; /* in the pipe now */
        bool full; /* a splice into the pipe did not fit */
        bool eof; /* src ended */
        bool shut; /* dst got shutdown(SHUT_WR) */
        int read_error; /* reading src failed (-errno): an end, after what the pipe holds */
        int error; /* the flow failed (-errno): writing dst, or read_error once the pipe is empty */
        bool dst_failed; /* error is dst's */
        uint64_t total; /* delivered to dst */
        /* check_server_name on plain HTTP: the client's bytes go to the
         * server one request at a time, each checked first; budget is
         * what is left of the current one. */
        bool per_request;
        uint64_t budget;
} Flow;

typedef struct Lookup {
        Conn *conn; /* NULL once the connection gave up on it */
} Lookup;

typedef struct Broker Broker;

struct Conn {
        Broker *broker;
        Conn *prev, *next;
        ConnState state;
        Watch client, server;
        usec_t start, deadline, last_activity;
        bool have_request;
        char host[BROKER_HOST_SHOWN_MAX + 8]; /* as asked, escaped; "" before the request */
        char name[DOMAIN_NAME_MAX + 1]; /* canonical; "" for an IP literal */
        uint16_t port;
        const char *via; /* static BROKER_VIA_*, NULL before the request */
        NetAddr addrs[BROKER_ADDRS_MAX];
        size_t n_addrs, next_addr;
        int connected; /* index into addrs, -1 */
        int connect_errno;
        Lookup *lookup;
        bool client_hup, server_hup;
        Flow up, down; /* client -> server (bytes_out), server -> client (bytes_in) */
};

struct Broker {
        BrokerConfig cfg;
        int epoll_fd;
        Watch listen, events, signal;
        bool listen_paused;
        usec_t listen_paused_at;
        ares_channel ares;
        Watch *ares_watches;
        Watch *dead_watches; /* freed after the current batch of events */
        Conn *conns;
        size_t n_conns;
        Conn *dead_conns;
        usec_t next_deadline;
        NetAddr *host_addrs;
        size_t n_host_addrs;
        usec_t host_addrs_at;
        bool host_addrs_valid;
        uint64_t events_dropped;
        double log_tokens;
        usec_t log_tokens_at;
        uint64_t log_suppressed;
        bool quit;
};

/* The loop's services for connections (broker-loop.c): broker.c and
 * broker-conn.c use them, they call neither. */
#define LOG_BURST 20.0 /* refusal lines at once */
#define LOG_RATE  1.0 /* refusal lines per second after the burst */

usec_t now_usec(void);
int broker_watch(Broker *b, Watch *w, uint32_t events);
void broker_unwatch(Broker *b, Watch *w);
void broker_deadline(Broker *b, usec_t when);
/* The host's own addresses, at most a second old. */
void broker_host_addresses(Broker *b, const NetAddr **ret, size_t *ret_n);
/* One JSON line to the events pipe (dropped and counted when full). */
void broker_event(Broker *b, const Conn *c, const char *verdict, const char *reason, const char *message);
/* An info line, rate-limited (a flood of refusals must not fill the log). */
void broker_log_refusal(Broker *b, const char *fmt, ...) _printf_(2, 3);

/* A connection's life (broker-conn.c); broker.c's loop calls these. */
/* Start the lookup of c->name; the answer comes to conn_resolved(). */
int broker_resolve(Broker *b, Conn *c);
void conn_accept(Broker *b, int fd);
void conn_refuse_limit(Broker *b, int fd);
void conn_handle(Conn *c, Watch *w, uint32_t events);
void conn_timeout(Conn *c, usec_t now);
void conn_resolved(Conn *c, int status, const struct ares_addrinfo *res);
/* Close both sides; an allowed connection's event is written with message. */
void conn_close(Conn *c, const char *message);
void conn_free(Conn *c);
