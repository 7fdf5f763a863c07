/* SPDX-License-Identifier: MIT */
#pragma once

/* The Session Coordinator's own header, for its files (issue 17):
 *   coordinator.c          start, the event loop, signals and children,
 *                          recovery, teardown, the watchdog;
 *   coordinator-session.c  control connections, sessions, their store
 *                          records, status;
 *   coordinator-network.c  the Network participant, the policy in force,
 *                          its updates (on the slow thread), the proof;
 *   coordinator-parts.c    the other participants: git router,
 *                          publications and escalation, State Anchor
 *                          layers, work-file watch, the sandbox;
 *   coordinator-broker.c   egress by name: the broker, its record, its
 *                          proof;
 *   coordinator-files.c    what a session changed, for the event record;
 *   coordinator-trace.c    the processes started inside (gVisor's trace
 *                          points), for the event record.
 * Nothing outside these files includes it. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "conn-dispatch.h"
#include "coordinator.h"
#include "disk-watch.h"
#include "domain-root.h"
#include "ctl-key.h"
#include "ctl-proto.h"
#include "exec-util.h"
#include "host-git.h"
#include "fd-util.h"
#include "fileio.h"
#include "fsmonitor.h"
#include "log.h"
#include "path-util.h"
#include "router-run.h"
#include "state-anchor.h"
#include "escalation.h"
#include "event-limit.h"
#include "event-record.h"
#include "participant.h"
#include "session-anchor.h"
#include "session-state.h"
#include "spawn-util.h"
#include "runtime-dir.h"
#include "netpolicy-digest.h"
#include "netpolicy.h"
#include "host-addr.h"
#include "sandbox-limits.h"
#include "sandbox-backend.h"
#include "sidecar.h"
#include "store.h"
#include "strbuf.h"
#include "string-util.h"

#define MAX_CONNECTIONS   64
#define OUT_QUEUE_MAX     (1024u * 1024u) /* stop reading a session while its CLI lags this much */
#define IN_QUEUE_MAX      (1024u * 1024u) /* input not yet taken by the session */
#define READ_CHUNK        (64u * 1024u)
#define IDLE_USEC         (UINT64_C(30) * 1000000) /* no session at all for this long: tear down */
#define DRAIN_USEC        (UINT64_C(200) * 1000) /* output still arriving after the exec client exited */
#define HANGUP_GRACE_USEC (UINT64_C(2) * 1000000)
#define STORE_WAIT_USEC   (UINT64_C(8) * 1000000)
/* How long the watchdog waits for the Domain Store after its coordinator
 * died (a new coordinator holds it while it recovers itself). */
#define WATCHDOG_STORE_WAIT_USEC (UINT64_C(30) * 1000000)
#define LINGER_USEC              (UINT64_C(5) * 1000000) /* for a dropped peer to close its end */
#define MEMORY_CHECK_USEC        (UINT64_C(1000000))

typedef enum WatchKind {
        WATCH_LISTEN,
        WATCH_SIGNAL,
        WATCH_STORE, /* obj: the StoreWorker whose jobs finished */
        WATCH_RUNTIME,
        WATCH_SIDECAR,
        WATCH_ESCALATION,
        WATCH_DISK,
        WATCH_LINES, /* obj: a LinePipe */
        WATCH_TRACE, /* gVisor's trace connection */
        WATCH_CONN,
        WATCH_PTY,
        WATCH_STDIN,
        WATCH_STDOUT,
        WATCH_STDERR,
} WatchKind;

typedef struct Watch {
        WatchKind kind;
        void *obj;
} Watch;

typedef struct Coordinator Coordinator;
typedef struct Conn Conn;
typedef struct SessionFiles SessionFiles;

/* The read end of a helper's pipe of JSON lines (the broker's decisions,
 * the git router's refusals): each whole line goes to fn; at the pipe's
 * end the fd is closed. */
typedef struct LinePipe {
        int fd;
        Watch w;
        void (*fn)(Coordinator *co, const char *line, size_t len);
        char buf[16384];
        size_t len;
} LinePipe;
typedef struct Session Session;

#define TRACE_MSG_MAX (64u * 1024u) /* bytes of a trace message read; the rest is cut */

/* The processes started inside (coordinator-trace.c): gVisor's trace
 * connection, the map of its processes to sessions, the counts. */
typedef struct Trace {
        char *dir; /* the socket, the session's configuration, the sessions' pid files */
        int listen_fd, fd;
        Watch w;
        pthread_t thread; /* accepts runsc's connection during the start */
        bool thread_running;
        int cancel[2];
        int thread_fd; /* the thread's result */
        char thread_error[160];
        char why[240]; /* not observed: why */
        struct TracePid *pids; /* guest thread group -> session */
        size_t n_pids;
        char (*sids)[37]; /* the sessions' ids that processes were attributed to */
        size_t n_sids;
        uint8_t *buf;
        uint32_t last_dropped;
        uint64_t tokens, refill_usec; /* records a second, with a burst */
        uint64_t execs, recorded, over_rate, unreported, sink_dropped, sink_unreported, unattributed, malformed,
                map_full;
} Trace;

/* The native sandbox's processes, scanned in /proc (coordinator-procscan). */
typedef struct ScanProc ScanProc;
typedef struct ProcScan {
        bool on;
        pid_t init_pid;
        dev_t native_dev; /* lazaret-native's binary: its processes are not the sandbox's programs */
        ino_t native_ino;
        char *workspace; /* the host path the sandbox sees as /workspace */
        ScanProc *procs; /* what the last scan saw, by pid */
        size_t n_procs;
        uint64_t next, last_change;
        uint64_t execs, recorded, over_rate, unreported, unattributed, over_limit;
} ProcScan;

typedef struct OutQueue {
        uint8_t *buf;
        size_t len, off, cap; /* buf[off, len) waits to be written */
} OutQueue;

struct Session {
        Coordinator *co;
        Conn *conn; /* NULL once the CLI is gone */
        char id[37];
        bool interactive;
        pid_t pid; /* runsc exec */
        ProcessIdentity ident;
        int pty, in_fd, out_fd, err_fd;
        Watch w_pty, w_in, w_out, w_err;
        OutQueue in; /* towards the session */
        bool in_eof; /* close stdin once the queue drains */
        SessionState state; /* session-state.h: changed by session_transition() alone */
        int wstatus;
        uint64_t drain_deadline;
        uint64_t kill_deadline; /* SIGKILL the exec client after a hangup */
        uint64_t started_usec;
        int cli_pid;
        SessionFiles *files; /* what it changed: its start commit (coordinator-files.c) */
        unsigned char anchor[SESSION_KEY_LEN]; /* the CLI's Session Anchor public key */
        bool has_anchor;
        char *cwd; /* in the sandbox: /workspace or a directory below it */
        int32_t guest_pid; /* its first process inside, once runsc exec has written it; 0 before */
        uint32_t trace_sid; /* its index + 1 in Trace.sids, once a process was attributed to it */
        Session *next;
};

struct Conn {
        Coordinator *co;
        int fd;
        Watch w;
        ConnState state;
        CtlReader rd;
        OutQueue out;
        bool counted; /* holds a reference on the sandbox */
        pid_t peer_pid; /* SO_PEERCRED at accept, for the log */
        int cli_pid;
        char *hello_policy; /* CONN_HELLO_WAIT: the policy its Hello declared */
        int hello_own_rules; /* its address_rules: 1 "own", 0 "global", -1 not said */
        bool close_after_flush;
        bool shut; /* our side is shut down; waiting for the peer's close */
        uint64_t linger_deadline;
        bool dead;
        Session *session;
        bool status_watch; /* wants StatusLine frames */
        char *status_sent; /* the last one it got (JSON) */
        Conn *next;
};

struct Coordinator {
        struct stat self_exe; /* our own binary: every CLI is the same file */
        char ctl_key[CTL_KEY_TEXT + 1]; /* what a CLI's Hello must carry (ctl-key.h) */
        LaunchSpec spec;
        int epfd;
        int listen_fd, signal_fd, runtime_fd, status_fd;
        int watchdog_fd; /* the write end of the watchdog's pipe */
        Watch w_listen, w_signal, w_store, w_slow, w_runtime;
        Store *store;
        StoreWorker *worker;
        /* Long operations (netd, runsc exec, probes) run on a thread of
         * their own, so no terminal waits on them; one at a time. */
        StoreWorker *slow;
        struct NetUpdate *net_update; /* a policy update in progress (one at a time), or NULL */
        uint64_t generation;
        PartStore ps; /* the Domain Store, for the participant driver */
        Part p_sandbox, p_publication;
        Part p_escalation; /* a Publication: the escalation socket and certificates */
        char coordinator_id[37];
        char *container_name;
        /* The sandbox through its backend's ops (sandbox-backend.h), with
         * this generation's mount plan; sb.backend chosen once from the
         * spec. */
        Sandbox sb;
        RouterRun router;
        Part p_router;
        LinePipe router_lines; /* its refusals */
        uint64_t router_refused, router_dropped;
        StateAnchor anchor;
        FsMonitor *fsmon; /* git's file system monitor for the worktree, or NULL */
        Escalation *esc; /* NULL: [escalation] enabled = false */
        Watch w_esc;
        Sidecar sidecar; /* name NULL: no sidecar (loopback only) */
        Part p_network;
        PolicyInForce net; /* the declared policy and the host's addresses denied; the spec keeps the declared one */
        char *declared_netpolicy; /* canonical, as the configuration says it (the last Hello's) */
        NetPolicy declared_parsed; /* the spec's, parsed once for the start (then freed) */
        bool have_declared_parsed;
        struct PolicyJob *policy_job; /* that parse, and the derivation, on a thread until joined */
        /* What the thread derived (the host's addresses denied), for
         * start_network while those addresses have not changed. */
        NetPolicy pre_derived;
        char *pre_canonical;
        HostAddrs pre_host;
        HostAddrs host; /* the host's addresses last read, and what the declared policy made of them */
        int sidecar_fd; /* pidfd of the sidecar's conmon */
        char readiness_fingerprint[65]; /* of the evidence last recorded, or "" */
        Watch w_sidecar;
        char *terminfo_dir;
        char *ca_bundle; /* ca_certificates: <domain_dir>/ca-certificates.crt; NULL without */
        char *worktree; /* branch mode: the agent's worktree, behind /workspace */
        Conn *conns;
        size_t n_conns;
        Session *sessions;
        unsigned refs;
        bool ever_had_session;
        uint64_t started_usec;
        bool stopping;
        const char *stop_reason;
        /* The memory limit (issue 16): the backend's measure, looked at
         * once a second; why it is not watched when it is not. */
        bool mem_watched;
        uint64_t mem_next_check, mem_used;
        char mem_unwatched[160];
        char cpus[64], cpu_unset[160]; /* the CPUs the sandbox runs on, or why it runs anywhere */
        char limit_reason[300];
        bool runtime_lost;
        /* disk_limit for the work files: the helper that measures them,
         * and what it measures. */
        DiskWatch disk;
        Watch w_disk;
        char **disk_paths;
        /* ... and for the persistent directories (issue 44): what their
         * upper directories hold together, at most disk_limit. */
        DiskWatch layer_disk;
        Watch w_layer_disk;
        char **layer_paths;
        /* Egress by name (issue 18): the broker (a child), the read end of
         * its decisions, their counts and their record. */
        Part p_broker;
        pid_t broker_pid;
        ProcessIdentity broker_ident;
        char *broker_dir; /* its socket's directory (native: /run/lazaret/broker in the sandbox) */
        LinePipe broker_lines;
        bool broker_lost;
        uint64_t egress_allowed, egress_refused, egress_dropped;
        /* While the launch proves egress by name: the broker's lines are
         * its probes' (no session exists yet), marked so on the record. */
        bool egress_probing;
        unsigned probe_lines;
        /* The Domain's event record (issue 19): NULL when it cannot be
         * written (status says why; enforcement never depends on it). */
        EventLog *events;
        EventLimiter *limiter; /* what the agent can put on record at will */
        char events_unwritten[200];
        Trace trace;
        ProcScan scan;
        /* The status line of lazaret run (issue 20): what changed since
         * the last StatusLine, sent at most every STATUS_LINE_USEC. */
        bool status_dirty;
        uint64_t status_last;
        uint64_t git_refused; /* the router's refusals under the git policy */
        /* The ids of the escalation requests not decided yet, one entry per
         * "requested" (a repeated id twice: each "decided" takes one); a
         * "decided" of no such id (a request refused before it was read)
         * takes none. At most ESC_PENDING_MAX. */
        char (*esc_pending)[37];
        size_t n_esc_pending;
        PauseState pause; /* session-state.h: changed by co_pause_transition() alone */
        char pause_error[200];
};

#define STATUS_LINE_USEC (UINT64_C(1000000) / 5)
#define ESC_PENDING_MAX  4096
void co_status_line_send(Coordinator *co);
void co_sandbox_pause(Coordinator *co, bool pause);
void co_sandbox_unpause(Coordinator *co);

typedef enum HelloResult {
        HELLO_ACCEPTED,
        HELLO_REFUSED, /* the peer got an Error */
        HELLO_PENDING, /* a policy update runs; its end decides */
} HelloResult;

/* What the connections' part does with a Hello once a policy update it
 * waited for has ended (the asker's, then each that waited). */
typedef void (*HelloResume)(Coordinator *co, Conn *c);

/* A network policy update in progress (update_network). */
typedef struct NetUpdate {
        Coordinator *co;
        Conn *conn; /* the CLI that asked; NULL once it is gone */
        char *declared; /* its declared policy, in force once proved */
        HostAddrs host; /* the host's addresses read for it */
        char fingerprint[65]; /* of the new readiness evidence */
        char *error;
        HelloResume resume;
        uint64_t started_usec;
} NetUpdate;

static inline void net_update_forget(NetUpdate *u, const Conn *c) {
        if (u->conn == c)
                u->conn = NULL;
}

/* ---- coordinator-loop.c: the plumbing every part uses -------------------- */

int co_epoll_add(Coordinator *co, int fd, uint32_t events, Watch *w);
void co_epoll_mod(Coordinator *co, int fd, uint32_t events, Watch *w);
int co_close_watched(Coordinator *co, int fd);
/* Take p's fd (the read end, non-blocking) and watch it when the loop
 * runs; until then its lines wait in the pipe. */
int co_lines_watch(Coordinator *co, LinePipe *p);
/* Handle every whole line p holds; at its end close it. */
void co_lines_readable(Coordinator *co, LinePipe *p);
/* The helper is gone: its last lines, then the fd closed. */
void co_lines_drain(Coordinator *co, LinePipe *p);
int co_queue_put(OutQueue *q, const uint8_t *data, size_t n);
size_t co_queue_pending(const OutQueue *q);
void co_queue_done(OutQueue *q);
int co_queue_flush(OutQueue *q, int fd);
json_t *co_self_identity(void);
void conn_update_events(Conn *c);
int conn_send(Conn *c, const CtlMessage *m);
/* Send an Error and drop the peer once it has gone out. */
void conn_send_error(Conn *c, const char *msg);
/* j (taken) as compact JSON in a memfd, read from its start. */
int co_json_memfd(const char *name, json_t *j, int *ret_fd);
/* The status line has news for the terminals that watch it. */
void co_status_touch(Coordinator *co);
int own_gen_update(Store *st, uint64_t generation, json_t *fields);
/* To the leader CLI while it waits: a step that may take secs seconds. */
void status_wait(Coordinator *co, unsigned secs, const char *step);
/* Make the control socket's key file, then bind and listen. */
int co_bind_socket(Coordinator *co);
/* Remove a control socket, its key file and git's file system monitor's
 * socket next to it. */
void co_unlink_socket(const char *socket_path);
/* Stop taking clients and end the sessions; the loop then tears down. */
void co_begin_stop(Coordinator *co, const char *reason);

/* ---- coordinator.c: the loop, start and teardown ------------------------ */

void co_teardown(Coordinator *co);
void co_release(Coordinator *co);
int start_failed(Coordinator *co);

/* ---- coordinator-session.c: connections and sessions ------------------- */

void accept_clients(Coordinator *co);
void conn_readable(Coordinator *co, Conn *c);
/* Handle the frames read so far; those behind a Hello being checked wait. */
void conn_process(Coordinator *co, Conn *c);
void conn_free(Coordinator *co, Conn *c);
void session_update_events(Session *s);
int session_pump(Session *s, int fd, int stream);
void session_close_output(Session *s, int *fd);
/* Move s along its state machine (session-state.h): false, its state
 * unchanged and the fault logged, when the table has no such transition. */
bool session_transition(Session *s, SessionEvent event);
void session_finish(Session *s);
void session_free(Coordinator *co, Session *s);
void co_check_runtime(Coordinator *co, int timeout_ms);

/* ---- coordinator-network.c: the policy in force, its updates, the proof -- */

extern const PartKind kind_network;
/* The declared policy parsed and derived on a thread of its own, from the
 * spec's reading on (about 3 ms of 10,000 prefixes on the other core,
 * while the start waits on the disk and the git router). Its parse is
 * waited for before the sidecar's first half (co_policy_wait_parsed: *ret
 * the thread's, read-only, until the join); the thread is joined when the
 * network starts (co_policy_join: co->declared_parsed and co->pre_*).
 * Both: 1 parsed, 0 when it does not parse, -ENOENT when no thread ran.
 * co_policy_drop: joined and thrown away. */
void co_policy_begin(Coordinator *co);
int co_policy_wait_parsed(Coordinator *co, const NetPolicy **ret);
int co_policy_join(Coordinator *co);
void co_policy_drop(Coordinator *co);
int start_network(Coordinator *co, char **ret_error);
void stop_network(Coordinator *co);
int prove_network(Coordinator *co, char ret_fingerprint[65], char **ret_error);
/* c's declared policy against the one in force (a Hello without one
 * changes nothing): accepted, refused (c got an Error), or pending while
 * the running sandbox takes it over on the slow thread; at that update's
 * end resume is called for c and for each Hello that waited. */
HelloResult hello_network(Coordinator *co, Conn *c, const char *declared, HelloResume resume);

/* ---- coordinator-trace.c: the processes started inside ------------------ */

/* Before the sandbox starts: the socket runsc's sink connects to, and the
 * trace session's configuration (*ret_config, for --pod-init-config; NULL
 * when the processes cannot be observed: Trace.why says why). */
int trace_begin(Coordinator *co, char **ret_config);
/* After the sandbox's start (started) or its failure. */
void trace_attached(Coordinator *co, bool started);
int trace_watch(Coordinator *co);
void co_trace_readable(Coordinator *co);
void trace_end(Coordinator *co);
/* A dead coordinator's directory, if it left one. */
void trace_remove_stale(Coordinator *co);
/* runsc exec --internal-pid-file for s, or NULL when nothing reads it. */
char *trace_pid_file(const Coordinator *co, const Session *s);
void trace_session_gone(Coordinator *co, const Session *s);
json_t *trace_status(const Coordinator *co);
uint32_t trace_session_sid(Coordinator *co, Session *s);
bool trace_take_token(Trace *t);

void scan_begin(Coordinator *co, const char *workspace);
void scan_session_started(Coordinator *co);
void scan_run(Coordinator *co);
void scan_end(Coordinator *co);
json_t *scan_status(const Coordinator *co);

/* ---- coordinator-parts.c: the other participants and the limits -------- */

/* The sandbox's backend and spec in co->sb (idempotent); the mount plan
 * of this generation (sandbox-backend.h). */
void co_sandbox_init(Coordinator *co);
int co_mount_plan(Coordinator *co, char **ret_error);
/* The observation hooks the backends call (coordinator-trace.c,
 * coordinator-procscan.c). */
int co_trace_begin_hook(void *host, char **ret_config);
void co_trace_attached_hook(void *host, bool started);
void co_scan_begin_hook(void *host, const char *workspace);
void co_scan_session_hook(void *host);
extern const PartKind kind_router, kind_publication, kind_lower, kind_layer, kind_sandbox;
void co_router_line(Coordinator *co, const char *line, size_t len);
int start_router(Coordinator *co, char **ret_error);
void stop_router(Coordinator *co);
int start_escalation(Coordinator *co, char **ret_error);
void stop_escalation(Coordinator *co);
int start_anchor(Coordinator *co, char **ret_error);
void stop_anchor(Coordinator *co);
/* The measures for disk_limit: the work files' (started before the git
 * router, whose start it overlaps), the persistent directories' layers
 * (after start_anchor). */
int start_disk_watch(Coordinator *co, char **ret_error);
int start_layer_watch(Coordinator *co, char **ret_error);
int wait_disk_base(Coordinator *co, char **ret_error);
void stop_disk_watch(Coordinator *co);
void co_check_memory(Coordinator *co);
void co_disk_readable(Coordinator *co, DiskWatch *w);

/* ---- coordinator-files.c: what a session changed ------------------------- */

void co_files_session_started(Coordinator *co, Session *s);
/* Its end: the changed files go on the record (off the loop). */
void co_files_session_ended(Coordinator *co, Session *s);

/* ---- coordinator-broker.c: egress by name -------------------------------- */

extern const PartKind kind_broker;
int start_broker(Coordinator *co, char **ret_error);
void stop_broker(Coordinator *co);
int prove_egress(Coordinator *co, char **ret_error);
void co_broker_reap(Coordinator *co);
void co_broker_refresh(Coordinator *co);
void co_broker_line(Coordinator *co, const char *line, size_t len);
json_t *co_broker_status(const Coordinator *co);
