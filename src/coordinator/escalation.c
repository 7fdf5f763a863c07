/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <limits.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "escalate-proto.h"
#include "escalation.h"
#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "landlock.h"
#include "log.h"
#include "path-pattern.h"
#include "seccomp-filter.h"
#include "path-util.h"
#include "runtime-dir.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"
#include "trust.h"
#include "words.h"

#define CONN_MAX          16 /* connections at once; more are closed at accept */
#define REQUEST_USEC      (UINT64_C(10) * 1000000) /* handshake and request, from accept */
#define TIMESTAMP_SKEW    300 /* seconds a request's time may differ from ours */
#define SEEN_MAX          4096 /* request ids remembered (replays) */
#define CERT_LIFETIME_SEC (UINT64_C(7) * 24 * 3600)
#define PROMPT_QUEUE_MAX  8 /* requests of one session at its terminal: the one shown and those waiting */
#define CANCEL_GRACE_USEC (UINT64_C(2) * 1000000) /* SIGTERM, then SIGKILL */

typedef enum ConnPhase {
        PHASE_HANDSHAKE,
        PHASE_READ,
        PHASE_PROMPT, /* waiting for the person at the session's terminal */
        PHASE_RUN,
        PHASE_WRITE,
} ConnPhase;

typedef struct EscConn EscConn;

typedef struct Pipe {
        EscConn *conn;
        int fd;
        int stream; /* 1 or 2 */
} Pipe;

struct EscConn {
        Escalation *e;
        int fd;
        SSL *ssl;
        ConnPhase phase;
        uint64_t deadline;
        unsigned char hdr[4];
        size_t hdr_got;
        char *body;
        size_t body_len, body_got;
        /* the request and what became of it */
        json_t *audit;
        char request_id[37];
        /* a request that needs the person at the terminal */
        char session_id[37];
        char *command; /* as asked */
        char *justification;
        uint64_t seq; /* arrival order in its session's queue */
        bool shown; /* its prompt is up (or, approved, its command runs) */
        bool peer_gone; /* the sandbox side hung up */
        const char *decided_by; /* "auto", "user" or "edited" */
        uint64_t kill_deadline; /* cancelled: SIGKILL then */
        uint64_t run_deadline; /* the time limit: SIGTERM then */
        pid_t pid;
        bool exited;
        int wstatus;
        Pipe out, err;
        unsigned char *buf[3]; /* [1] stdout, [2] stderr */
        size_t len[3];
        bool truncated[3];
        char *response;
        size_t response_len, response_off;
        EscConn *next;
};

struct Escalation {
        const LaunchSpec *spec;
        EscalationHost host;
        char *sandbox_id;
        char *workspace;
        TrustCA *ca;
        SSL_CTX *ctx;
        char *certs_dir; /* <runtime dir>/escalate-<hash>/certs */
        char *state_dir; /* <runtime dir>/escalate-<hash> */
        char *socket_dir; /* <socket_dir>/<hash> */
        char *socket_path;
        int epfd, listen_fd, timer_fd;
        EscConn *conns;
        unsigned n_conns;
        char (*seen)[37];
        size_t n_seen;
        AutoApproveRule *rules;
        size_t n_rules;
        size_t output_max;
        uint64_t prompt_seq;
        char env_home[4200], env_user[300], env_logname[300]; /* looked up once */
        /* Branch mode: the worktree's git directory in the repository, for
         * the host's git in a command the person approved, never what the
         * worktree's .git file (the agent's to write) names: a git
         * directory of the agent's making would hand that git its
         * configuration, and with it commands (a clean filter). NULL
         * otherwise. */
        char *env_git_dir, *env_git_work_tree;
        /* How an auto-approved command runs (issue 41): under lazaret-init
         * --reap (no process outlives it), with this seccomp program (no
         * socket, no device node, none of the kernel's riskier interfaces)
         * and, rootful, as the workspace's owner. confinable is false when
         * any of it is missing: every request then goes to the person. */
        bool confinable;
        char *init_path;
        struct sock_fprog seccomp;
        bool drop_ids;
        uid_t run_uid;
        gid_t run_gid;
};

/* ---- setup -------------------------------------------------------------- */

static int write_private(const char *dir, const char *name, const char *text) {
        _cleanup_free_ char *p = path_join(dir, name);
        if (!p)
                return -ENOMEM;
        /* Readable inside the sandbox by whatever user the image runs as;
         * the directory above is ours alone on the host. */
        return write_file_atomic(p, text, strlen(text), 0644, 0);
}

static int owned_dir(const char *dir, mode_t mode, const char **ret_why) {
        if (mkdir(dir, mode) < 0 && errno != EEXIST)
                return negative_errno();
        struct stat st;
        if (lstat(dir, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode)) {
                *ret_why = "is not a directory";
                return -ENOTDIR;
        }
        if (st.st_uid != geteuid()) {
                *ret_why = "belongs to another user";
                return -EPERM;
        }
        if (chmod(dir, mode) < 0)
                return negative_errno();
        return 0;
}

static int rules_from_spec(Escalation *e) {
        size_t n = 0;
        while (e->spec->auto_approve && e->spec->auto_approve[n])
                n++;
        e->rules = calloc(n + 1, sizeof(AutoApproveRule));
        if (!e->rules)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                /* Parsed (and refused where they must be) at config load;
                 * parse again here, where they are used. */
                _cleanup_free_ char *why = NULL;
                AutoApproveRule r;
                if (autoapprove_rule_parse(e->spec->auto_approve[i], AUTOAPPROVE_SEARCH_PATH, &r, &why) < 0) {
                        log_warning("auto_approve entry '%s' ignored: %s", e->spec->auto_approve[i], why ?: "?");
                        continue;
                }
                e->rules[e->n_rules++] = r;
        }
        return 0;
}

/* How long the sandbox's certificate is valid: a week, or fewer seconds
 * when LAZARET_ESCALATION_CERT_SECONDS says so (it can only shorten it; the
 * tests use it to see an expired certificate refused). */
static uint64_t cert_lifetime(void) {
        const char *v = getenv("LAZARET_ESCALATION_CERT_SECONDS");
        char *end = NULL;
        errno = 0;
        unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
        if (!v || !*v || errno || *end || n == 0 || n > CERT_LIFETIME_SEC)
                return CERT_LIFETIME_SEC;
        return n;
}

int escalation_paths(const LaunchSpec *s, char **ret_state_dir, char **ret_socket_dir) {
        char leaf[64];
        snprintf(leaf, sizeof(leaf), "escalate-%s", s->domain_hash);
        char *state = path_join(s->runtime_dir, leaf), *sock = path_join(s->escalation_socket_dir, s->domain_hash);
        if (!state || !sock) {
                free(state);
                free(sock);
                return -ENOMEM;
        }
        *ret_state_dir = state;
        *ret_socket_dir = sock;
        return 0;
}

void escalation_remove(const char *state_dir, const char *socket_dir) {
        static const char *const certs[] = { "ca.pem", "client.pem", "client.key" };
        if (socket_dir) {
                _cleanup_free_ char *p = path_join(socket_dir, "escalate.sock");
                if (p)
                        (void) unlink(p);
                (void) rmdir(socket_dir);
        }
        _cleanup_free_ char *dir = state_dir ? path_join(state_dir, "certs") : NULL;
        for (size_t i = 0; dir && i < ELEMENTSOF(certs); i++) {
                _cleanup_free_ char *p = path_join(dir, certs[i]);
                if (p)
                        (void) unlink(p);
        }
        if (dir)
                (void) rmdir(dir);
        if (state_dir)
                (void) rmdir(state_dir);
}

/* What an auto-approved command needs besides Landlock (see struct
 * Escalation); a missing part sends every request to the person. */
static void confinable_setup(Escalation *e) {
        const char *why = NULL;
        e->confinable = false;
        if (landlock_abi() <= 0)
                why = "this kernel has no Landlock";
        else if (!e->spec->init || !(e->init_path = realpath(e->spec->init, NULL)))
                why = "lazaret-init is not beside lazaret";
        else if (native_seccomp_export(NATIVE_SECCOMP_NO_SOCKET, &e->seccomp) < 0)
                why = "the seccomp filter could not be built";
        else if (geteuid() == 0) {
                /* Rootful: never as root. As the workspace's owner, who
                 * has its files anyway; a workspace of root's has none. */
                struct stat st;
                if (stat(e->workspace, &st) < 0 || st.st_uid == 0)
                        why = "lazaret runs as root and the workspace belongs to root";
                else {
                        e->drop_ids = true;
                        e->run_uid = st.st_uid;
                        e->run_gid = st.st_gid;
                }
        }
        if (why && e->n_rules > 0)
                log_warning("auto_approve is off for this sandbox (%s): every request goes to the person", why);
        e->confinable = !why;
}

int escalation_new(const LaunchSpec *s, const char *sandbox_id, const char *workspace, const EscalationHost *host,
                   Escalation **ret, char **ret_error) {
        Escalation *e = calloc(1, sizeof(Escalation));
        StrBuf b = STRBUF_INIT;
        const char *why = NULL;
        _cleanup_free_ char *ca_pem = NULL, *cert = NULL, *key = NULL;
        int r = -ENOMEM;
        if (!e)
                return -ENOMEM;
        *e = (Escalation){ .spec = s,
                           .host = *host,
                           .epfd = -EBADF,
                           .listen_fd = -EBADF,
                           .timer_fd = -EBADF,
                           .output_max = s->escalation_output_max };
        e->sandbox_id = strdup(sandbox_id);
        e->workspace = strdup(workspace);
        e->seen = calloc(SEEN_MAX, sizeof(*e->seen));
        if (escalation_paths(s, &e->state_dir, &e->socket_dir) < 0)
                goto fail;
        e->certs_dir = path_join(e->state_dir, "certs");
        e->socket_path = path_join(e->socket_dir, "escalate.sock");
        if (!e->sandbox_id || !e->workspace || !e->seen || !e->certs_dir || !e->socket_path)
                goto fail;
        if ((r = rules_from_spec(e)) < 0)
                goto fail;
        const struct passwd *pw = getpwuid(geteuid());
        snprintf(e->env_home, sizeof(e->env_home), "HOME=%s", pw && pw->pw_dir ? pw->pw_dir : "/");
        snprintf(e->env_user, sizeof(e->env_user), "USER=%s", pw && pw->pw_name ? pw->pw_name : "");
        snprintf(e->env_logname, sizeof(e->env_logname), "LOGNAME=%s", pw && pw->pw_name ? pw->pw_name : "");
        const char *wt_name = strrchr(workspace, '/');
        if (s->branch && s->git_dir && wt_name && !streq(workspace, s->workspace)) {
                StrBuf gd = STRBUF_INIT, gw = STRBUF_INIT;
                strbuf_printf(&gd, "GIT_DIR=%s/worktrees/%s", s->git_dir, wt_name + 1);
                strbuf_printf(&gw, "GIT_WORK_TREE=%s", workspace);
                e->env_git_dir = strbuf_steal(&gd);
                e->env_git_work_tree = strbuf_steal(&gw);
                if (!e->env_git_dir || !e->env_git_work_tree) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        confinable_setup(e);

        /* The certificates: private on the host (the runtime dir is 0700). */
        if ((r = private_dir(e->state_dir, &why)) < 0 || (r = owned_dir(e->certs_dir, 0755, &why)) < 0) {
                strbuf_printf(&b, "cannot prepare %s: %s", e->certs_dir, why ? why : strerror(-r));
                goto fail;
        }
        if ((r = trust_ca_new(CERT_LIFETIME_SEC, &e->ca)) < 0 || (r = trust_ca_pem(e->ca, &ca_pem)) < 0 ||
            (r = trust_issue_client(e->ca, s->profile, sandbox_id, -60, 60 + cert_lifetime(), &cert, &key)) < 0 ||
            (r = trust_server_ctx(e->ca, &e->ctx)) < 0) {
                strbuf_printf(&b, "cannot make the sandbox's certificates: %s", strerror(-r));
                goto fail;
        }
        if ((r = write_private(e->certs_dir, "ca.pem", ca_pem)) < 0 ||
            (r = write_private(e->certs_dir, "client.pem", cert)) < 0 ||
            (r = write_private(e->certs_dir, "client.key", key)) < 0) {
                strbuf_printf(&b, "cannot write the certificates to %s: %s", e->certs_dir, strerror(-r));
                goto fail;
        }
        explicit_bzero(key, strlen(key));

        /* The socket: socket_dir must be ours and private; our directory
         * in it is mounted into the sandbox alone. */
        char *swhy = NULL;
        if ((r = safe_private_dir(s->escalation_socket_dir, "escalation.socket_dir",
                                  "choose another socket_dir in [escalation]", &swhy, NULL)) < 0) {
                strbuf_printf(&b, "%s", swhy ?: strerror(-r));
                free(swhy);
                goto fail;
        }
        if ((r = owned_dir(e->socket_dir, 0755, &why)) < 0) {
                strbuf_printf(&b, "cannot prepare %s: %s", e->socket_dir, why ? why : strerror(-r));
                goto fail;
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(e->socket_path) >= sizeof(sa.sun_path)) {
                strbuf_printf(&b, "the escalation socket path %s is too long; choose a shorter socket_dir",
                              e->socket_path);
                r = -ENAMETOOLONG;
                goto fail;
        }
        strcpy(sa.sun_path, e->socket_path);
        (void) unlink(e->socket_path);
        e->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (e->listen_fd < 0 || bind(e->listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            chmod(e->socket_path, 0666) < 0 || listen(e->listen_fd, 16) < 0) {
                r = negative_errno();
                strbuf_printf(&b, "cannot listen on %s: %s", e->socket_path, strerror(-r));
                goto fail;
        }
        e->epfd = epoll_create1(EPOLL_CLOEXEC);
        e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        struct itimerspec its = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
        struct epoll_event tv = { .events = EPOLLIN, .data.ptr = &e->timer_fd };
        if (e->epfd < 0 || e->timer_fd < 0 || timerfd_settime(e->timer_fd, 0, &its, NULL) < 0 ||
            epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->listen_fd, &ev) < 0 ||
            epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->timer_fd, &tv) < 0) {
                r = negative_errno();
                strbuf_printf(&b, "cannot watch the escalation socket: %s", strerror(-r));
                goto fail;
        }
        strbuf_done(&b);
        *ret = e;
        return 0;
fail:
        *ret_error = strbuf_steal(&b);
        escalation_free(e);
        return r < 0 ? r : -EIO;
}

const char *escalation_certs_dir(const Escalation *e) {
        return e->certs_dir;
}

const char *escalation_socket_dir(const Escalation *e) {
        return e->socket_dir;
}

int escalation_fd(const Escalation *e) {
        return e->epfd;
}

/* ---- connections ---------------------------------------------------------- */

static void conn_free(EscConn *c) {
        Escalation *e = c->e;
        for (EscConn **p = &e->conns; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        e->n_conns--;
        if (c->pid > 0 && !c->exited)
                (void) kill(-c->pid, SIGKILL); /* its process group (setsid); reaped by the coordinator */
        if (c->ssl)
                SSL_free(c->ssl);
        safe_close(c->fd);
        safe_close(c->out.fd);
        safe_close(c->err.fd);
        free(c->body);
        free(c->buf[1]);
        free(c->buf[2]);
        free(c->response);
        free(c->command);
        free(c->justification);
        json_decref(c->audit);
        free(c);
}

static void now_iso(char buf[32]) {
        time_t t = time(NULL);
        struct tm tm;
        strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
}

static void audit_set(EscConn *c, const char *key, json_t *v) {
        if (c->audit && v)
                json_object_set_new(c->audit, key, v);
        else
                json_decref(v);
}

static void sha256_hex(const unsigned char *p, size_t n, char out[65]) {
        unsigned char md[32];
        unsigned int len = 0;
        if (!EVP_Digest(p, n, md, &len, EVP_sha256(), NULL) || len != 32) {
                out[0] = '\0';
                return;
        }
        for (unsigned i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void conn_io(EscConn *c);
static void conn_end(EscConn *c, const char *why);
static void conn_enqueue(EscConn *c, const EscalateRequest *req);
static void conn_run(EscConn *c, char **argv, const char *decided_by, const AutoApproveRule *rule);
static void prompt_over(Escalation *e, const char *session_id, const char *request_id);

/* The answer is ready: send it, then record it. */
static void conn_respond(EscConn *c, bool approved, const char *decided_by, const char *reason) {
        char when[32];
        now_iso(when);
        bool ran = c->pid > 0 && c->exited;
        int code = !ran                      ? 0
                   : WIFEXITED(c->wstatus)   ? WEXITSTATUS(c->wstatus)
                   : WIFSIGNALED(c->wstatus) ? 128 + WTERMSIG(c->wstatus)
                                             : 125;
        EscalateResponse r = { .request_id = c->request_id[0] ? c->request_id : (char *) "",
                               .approved = approved,
                               .decided_by = (char *) decided_by,
                               .ran = ran,
                               .exit_code = code,
                               .out = c->buf[1],
                               .out_len = c->len[1],
                               .out_truncated = c->truncated[1],
                               .err = c->buf[2],
                               .err_len = c->len[2],
                               .err_truncated = c->truncated[2],
                               .reason = (char *) reason };
        audit_set(c, "decision",
                  json_string(approved                      ? decided_by
                              : streq(decided_by, "policy") ? "refused"
                                                            : "denied"));
        audit_set(c, "decided_by", json_string(decided_by));
        if (reason)
                audit_set(c, "reason", json_string(reason));
        audit_set(c, "exit_code", ran ? json_integer(code) : json_null());
        if (ran) {
                char h1[65], h2[65];
                sha256_hex(c->buf[1] ? c->buf[1] : (const unsigned char *) "", c->len[1], h1);
                sha256_hex(c->buf[2] ? c->buf[2] : (const unsigned char *) "", c->len[2], h2);
                audit_set(c, "stdout_bytes", json_integer((json_int_t) c->len[1]));
                audit_set(c, "stderr_bytes", json_integer((json_int_t) c->len[2]));
                audit_set(c, "stdout_sha256", json_string(h1));
                audit_set(c, "stderr_sha256", json_string(h2));
                audit_set(c, "stdout_truncated", json_boolean(c->truncated[1]));
                audit_set(c, "stderr_truncated", json_boolean(c->truncated[2]));
        }
        audit_set(c, "finished_at", json_string(when));
        if (approved)
                log_info("escalation %s: ran, exit status %d", c->request_id, code);
        else
                log_info("escalation %s: refused: %s", c->request_id[0] ? c->request_id : "(unparsed)",
                         reason ? reason : "?");
        /* The answer goes out first and the record (an fsync) right after:
         * the command has run (or not) either way, and the sandbox need not
         * wait for the disk. */
        Escalation *e = c->e;
        if (e->host.event && c->audit) {
                static const char *const keys[] = { "request_id",   "command",     "final_command", "edited_command",
                                                    "decision",     "decided_by",  "reason",        "exit_code",
                                                    "stdout_bytes", "stderr_bytes" };
                json_t *d = json_object();
                for (size_t i = 0; d && i < ELEMENTSOF(keys); i++) {
                        json_t *v = json_object_get(c->audit, keys[i]);
                        if (v)
                                json_object_set(d, keys[i], v);
                }
                e->host.event(e->host.userdata, "decided", json_string_value(json_object_get(c->audit, "session_id")),
                              d);
        }
        json_t *audit = json_incref(c->audit);
        if (c->peer_gone || escalate_response_format(&r, &c->response, &c->response_len) < 0) {
                c->response = NULL;
                conn_free(c);
        } else {
                c->phase = PHASE_WRITE;
                c->response_off = 0;
                struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
                (void) epoll_ctl(e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
                conn_io(c); /* may free c */
        }
        if (audit && e->host.audit(e->host.userdata, audit) < 0)
                log_error("cannot append to the audit trail");
        json_decref(audit);
}

static bool seen_before(Escalation *e, const char *id) {
        for (size_t i = 0; i < e->n_seen && i < SEEN_MAX; i++)
                if (streq(e->seen[i], id))
                        return true;
        memcpy(e->seen[e->n_seen % SEEN_MAX], id, 37);
        e->n_seen++;
        return false;
}

static int add_pipe(EscConn *c, Pipe *p) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = p };
        return epoll_ctl(c->e->epfd, EPOLL_CTL_ADD, p->fd, &ev) < 0 ? negative_errno() : 0;
}

/* The workspace, granted to an auto-approved command as the sandbox sees
 * it (issue 41): a masked name not at all (the sandbox reads it empty),
 * a protected one and any nested .git read-only, the top .git not at all,
 * everything else read-write. Landlock cannot take a path out of a grant,
 * so a directory that holds such a name, or one on the way to it, is
 * granted piecewise: its names to list, no more (removing or renaming an
 * entry is a right of the directory, which would let rm or mv take a
 * protected or masked name away), and each entry on its own; a directory
 * that holds none, whole. */
#define GRANT_WALK_MAX 100000

typedef enum GrantKind { GRANT_NONE, GRANT_RO, GRANT_RW, GRANT_DONE } GrantKind;

typedef struct GrantWalk {
        LandlockRules *rules;
        const char *const *protect, *const *mask;
        size_t n_protect, n_mask;
        size_t seen;
        char *why;
} GrantWalk;

static int grant(GrantWalk *w, const char *path, LandlockGrant g) {
        _cleanup_free_ char *why = NULL;
        int q = landlock_rules_add(w->rules, path, g, &why);
        /* A name gone or swapped for a symlink since we looked is reached
         * through the rule of where it leads, if any. */
        if (q == -ELOOP || q == -ENOENT)
                return 0;
        if (q < 0 && !w->why)
                w->why = TAKE_PTR(why);
        return q;
}

/* Walk the directory at path (rel below the workspace, "" for its root);
 * *ret_clean when nothing beneath needs a grant of its own, in which case
 * nothing was added (the caller grants the whole directory). */
static int grant_walk(GrantWalk *w, const char *path, const char *rel, bool *ret_clean) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ELOOP || errno == ENOTDIR ? (*ret_clean = true, 0)
                                                                             : negative_errno();
        DIR *d = fdopendir(fd);
        if (!d)
                return negative_errno();
        TAKE_FD(fd);
        char **names = NULL;
        GrantKind *kinds = NULL;
        size_t n = 0, cap = 0;
        bool clean = true;
        int q = 0;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (++w->seen > GRANT_WALK_MAX) {
                        q = -E2BIG;
                        break;
                }
                _cleanup_free_ char *crel = *rel ? path_join(rel, de->d_name) : strdup(de->d_name);
                _cleanup_free_ char *cpath = path_join(path, de->d_name);
                if (!crel || !cpath) {
                        q = -ENOMEM;
                        break;
                }
                GrantKind k;
                unsigned char type = de->d_type;
                if (type == DT_UNKNOWN) {
                        struct stat st;
                        type = lstat(cpath, &st) < 0 ? DT_UNKNOWN
                               : S_ISDIR(st.st_mode) ? DT_DIR
                               : S_ISLNK(st.st_mode) ? DT_LNK
                                                     : DT_REG;
                }
                if (type == DT_LNK)
                        k = GRANT_NONE; /* reached through where it leads */
                else if (!*rel && streq(de->d_name, ".git"))
                        k = GRANT_NONE, clean = false;
                else if (path_pattern_match_any(crel, w->mask, w->n_mask))
                        k = GRANT_NONE, clean = false;
                else if (streq(de->d_name, ".git") || path_pattern_match_any(crel, w->protect, w->n_protect))
                        k = GRANT_RO, clean = false;
                else if (type == DT_DIR) {
                        bool sub_clean = false;
                        q = grant_walk(w, cpath, crel, &sub_clean);
                        if (q < 0)
                                break;
                        k = sub_clean ? GRANT_RW : GRANT_DONE;
                        if (!sub_clean)
                                clean = false;
                } else
                        k = GRANT_RW;
                if (n == cap) {
                        size_t nc = cap ? cap * 2 : 16;
                        char **nn = reallocarray(names, nc, sizeof *nn);
                        if (nn)
                                names = nn;
                        GrantKind *nk = nn ? reallocarray(kinds, nc, sizeof *nk) : NULL;
                        if (!nn || !nk) {
                                q = -ENOMEM;
                                break;
                        }
                        kinds = nk;
                        cap = nc;
                }
                names[n] = TAKE_PTR(cpath);
                kinds[n++] = k;
        }
        if (q >= 0 && errno != 0)
                q = negative_errno();
        closedir(d);
        if (q >= 0 && !clean) {
                /* The directory's names to list, and each entry on its own. */
                q = grant(w, path, LANDLOCK_GRANT_NAMES_READ_ONLY);
                for (size_t i = 0; q >= 0 && i < n; i++)
                        if (kinds[i] == GRANT_RO || kinds[i] == GRANT_RW)
                                q = grant(w, names[i],
                                          kinds[i] == GRANT_RO ? LANDLOCK_GRANT_READ_ONLY : LANDLOCK_GRANT_READ_WRITE);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        free(kinds);
        if (q >= 0)
                *ret_clean = clean;
        return q;
}

/* What an auto-approved command may reach of the host's file system: the
 * system's programs and configuration (/usr, /etc, a /lib or /bin that is
 * no symlink into /usr), /dev/null, /dev/zero and the random devices, its
 * program, lazaret-init and what its entry names by absolute path, to
 * read; the workspace as above. Nothing else: not the home directory,
 * /tmp, /run or /proc. The match checked each word beneath the workspace,
 * but only when it was made: the agent, which writes the workspace, may
 * swap a name for a symlink to ~/.ssh/id_rsa or to a masked .env between
 * that check and the command's open. Landlock decides at the open, on the
 * file reached. */
static int confine(const Escalation *e, const AutoApproveRule *rule, LandlockRules **ret, char **ret_why) {
        static const char *const system_ro[] = { "/usr",      "/etc",         "/bin",        "/sbin",
                                                 "/lib",      "/lib32",       "/lib64",      "/libx32",
                                                 "/dev/zero", "/dev/urandom", "/dev/random", NULL };
        _cleanup_(landlock_rules_freep) LandlockRules *r = NULL;
        int q = landlock_rules_new(0, &r);
        if (q < 0)
                return q;
        for (const char *const *p = system_ro; *p; p++) {
                struct stat st;
                /* /bin as a symlink into /usr is reached through /usr's rule. */
                if (lstat(*p, &st) < 0 || S_ISLNK(st.st_mode))
                        continue;
                if ((q = landlock_rules_add(r, *p, LANDLOCK_GRANT_READ_ONLY, ret_why)) < 0)
                        return q;
        }
        /* Rules take resolved paths. */
        _cleanup_free_ char *ws = realpath(e->workspace, NULL);
        if (!ws)
                return negative_errno();
        /* The host's workspace itself (direct mode): the directory the
         * leader checked, not what a link put in its place leads to. */
        if (e->spec->workspace_id && streq(e->workspace, e->spec->workspace) &&
            (!streq(ws, e->workspace) || open_pinned_dir(ws, e->spec->workspace_id, NULL, NULL) < 0)) {
                *ret_why = strdup("the workspace is no longer the directory lazaret checked (replaced or moved)");
                return -ESTALE;
        }
        if ((q = landlock_rules_add(r, "/dev/null", LANDLOCK_GRANT_READ_WRITE, ret_why)) < 0 ||
            (q = landlock_rules_add(r, e->init_path, LANDLOCK_GRANT_READ_ONLY, ret_why)) < 0)
                return q;
        /* The program and the person's own absolute words ("cat
         * /etc/hostname"), as they resolve now. */
        for (size_t i = 0; i < rule->argc; i++) {
                if (rule->argv[i][0] != '/')
                        continue;
                _cleanup_free_ char *real = realpath(rule->argv[i], NULL);
                if (real && (q = landlock_rules_add(r, real, LANDLOCK_GRANT_READ_ONLY, ret_why)) < 0)
                        return q;
        }
        GrantWalk w = { .rules = r,
                        .protect = (const char *const *) e->spec->protect,
                        .n_protect = e->spec->protect ? path_pattern_count((const char *const *) e->spec->protect) : 0,
                        .mask = (const char *const *) e->spec->mask,
                        .n_mask = e->spec->mask ? path_pattern_count((const char *const *) e->spec->mask) : 0 };
        bool clean = false;
        q = grant_walk(&w, ws, "", &clean);
        if (q >= 0 && clean)
                q = grant(&w, ws, LANDLOCK_GRANT_READ_WRITE);
        if (q < 0) {
                *ret_why = w.why         ? TAKE_PTR(w.why)
                           : q == -E2BIG ? strdup("the workspace has more than 100000 entries to look through")
                                         : NULL;
                free(w.why);
                return q;
        }
        *ret = TAKE_PTR(r);
        return 0;
}

/* Does a word of the request name a file the sandbox sees masked (through
 * a symlink too: "ln -s .env README.md")? Then the person decides. */
static bool names_masked(const Escalation *e, int wfd, char *const *argv, size_t argc) {
        if (!e->spec->mask || wfd < 0)
                return false;
        _cleanup_free_ char *ws = realpath(e->workspace, NULL);
        if (!ws)
                return true;
        size_t n_mask = path_pattern_count((const char *const *) e->spec->mask);
        for (size_t i = 1; i < argc; i++) {
                if (argv[i][0] == '-' || argv[i][0] == '/')
                        continue;
                struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
                _cleanup_close_ int fd = (int) syscall(SYS_openat2, wfd, argv[i], &how, sizeof how);
                if (fd < 0)
                        continue; /* names nothing beneath: the match decided */
                char proc[64], real[PATH_MAX];
                snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
                ssize_t k = readlink(proc, real, sizeof real - 1);
                if (k < 0)
                        return true;
                real[k] = '\0';
                size_t wl = strlen(ws);
                const char *rel = strncmp(real, ws, wl) == 0 && (real[wl] == '/' || !real[wl]) ? real + wl : NULL;
                if (!rel)
                        return true;
                if (*rel == '/')
                        rel++;
                if (*rel && path_pattern_match_any(rel, (const char *const *) e->spec->mask, n_mask))
                        return true;
        }
        return false;
}

typedef struct Confinement {
        const Escalation *e;
        const LandlockRules *rules;
} Confinement;

/* In the child, right before lazaret-init is executed: its own children
 * list on fd 3 (it is ours now: execve keeps the pid), rootful the
 * workspace owner's ids, then Landlock, then seccomp. System calls only. */
static int apply_confinement(void *userdata) {
        const Confinement *c = userdata;
        const char *why;
        char path[64];
        int pid = (int) getpid();
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
                return -errno;
        if (fd != 3) {
                if (dup2(fd, 3) < 0)
                        return -errno;
                close(fd);
        }
        /* Raw system calls: this child shares the coordinator's memory, and
         * glibc's setgroups/setresuid would change the ids of every thread
         * of the process it thinks it is (NPTL's setxid broadcast), the
         * coordinator's own among them (posix_spawn does the same). */
        if (c->e->drop_ids) {
                if (syscall(SYS_setgroups, 0, NULL) < 0 ||
                    syscall(SYS_setresgid, c->e->run_gid, c->e->run_gid, c->e->run_gid) < 0 ||
                    syscall(SYS_setresuid, c->e->run_uid, c->e->run_uid, c->e->run_uid) < 0)
                        return -errno;
        }
        int q = landlock_apply(c->rules, 0, &why);
        if (q < 0)
                return q;
        return native_seccomp_load(&c->e->seccomp);
}

/* The workspace the host's commands run in: the host's own in direct mode
 * as the leader checked it (open_pinned_dir), else the agent's worktree. */
static int open_workspace(const Escalation *e, int *ret_fd) {
        if (e->spec->workspace_id && streq(e->workspace, e->spec->workspace))
                return open_pinned_dir(e->workspace, e->spec->workspace_id, ret_fd, NULL);
        int fd = open(e->workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        *ret_fd = fd;
        return 0;
}

/* Start the vector: fixed environment, stdin /dev/null, stdout and
 * stderr to pipes, no other fd, the workspace's host directory as cwd, a
 * session of its own. */
static int start_command(EscConn *c, char **argv, const LandlockRules *rules) {
        Escalation *e = c->e;
        int out[2] = { -1, -1 }, err[2] = { -1, -1 };
        _cleanup_close_ int cwd = -EBADF;
        int w = open_workspace(e, &cwd);
        if (w < 0)
                return w;
        /* Only our ends are non-blocking: the command writes as to any pipe. */
        if (pipe2(out, O_CLOEXEC) < 0)
                return negative_errno();
        if (pipe2(err, O_CLOEXEC) < 0 || fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 ||
            fcntl(err[0], F_SETFL, O_NONBLOCK) < 0) {
                int q = negative_errno();
                safe_close(out[0]);
                safe_close(out[1]);
                safe_close(err[0]);
                safe_close(err[1]);
                return q;
        }
        char *envp[] = { (char *) "PATH=" AUTOAPPROVE_SEARCH_PATH,
                         e->env_home,
                         e->env_user,
                         e->env_logname,
                         (char *) "LANG=C.UTF-8",
                         e->env_git_dir,
                         e->env_git_work_tree,
                         NULL };
        SpawnFd fds[] = { { out[1], 1 }, { err[1], 2 } };
        /* An auto-approved command runs under lazaret-init --reap: when it
         * ends, so does everything it started (setsid or not). */
        size_t n = 0;
        while (argv[n])
                n++;
        _cleanup_free_ char **wrapped = rules ? calloc(n + 5, sizeof(char *)) : NULL;
        if (rules && !wrapped) {
                safe_close(out[0]);
                safe_close(out[1]);
                safe_close(err[0]);
                safe_close(err[1]);
                return -ENOMEM;
        }
        if (wrapped) {
                wrapped[0] = e->init_path;
                wrapped[1] = (char *) "--reap";
                wrapped[2] = (char *) "3";
                wrapped[3] = (char *) "--";
                memcpy(wrapped + 4, argv, n * sizeof(char *));
        }
        Confinement conf = { .e = e, .rules = rules };
        SpawnSpec sp = SPAWN_SPEC_INIT(wrapped ? wrapped[0] : argv[0], wrapped ? wrapped : argv);
        sp.envp = envp;
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.cwd_fd = cwd;
        sp.new_session = true;
        if (rules) {
                sp.before_exec = apply_confinement;
                sp.before_exec_data = &conf;
        }
        int r = spawn(&sp, &c->pid);
        safe_close(out[1]);
        safe_close(err[1]);
        if (r < 0) {
                c->pid = 0;
                safe_close(out[0]);
                safe_close(err[0]);
                return r;
        }
        c->out = (Pipe){ c, out[0], 1 };
        c->err = (Pipe){ c, err[0], 2 };
        c->phase = PHASE_RUN;
        c->run_deadline = now_usec() + (e->spec->escalation_time_limit ? e->spec->escalation_time_limit
                                                                       : CONFIG_TIME_LIMIT_DEFAULT) *
                                               UINT64_C(1000000);
        /* Nothing more is read from the sandbox while the command runs, but
         * its hang-up is watched: the command ends with it. */
        struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = c };
        (void) epoll_ctl(e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
        if ((r = add_pipe(c, &c->out)) < 0 || (r = add_pipe(c, &c->err)) < 0)
                return r;
        return 0;
}

/* The pipeline, once the request's bytes are in. */
static void conn_decide(EscConn *c) {
        Escalation *e = c->e;
        char when[32];
        now_iso(when);
        EscalateRequest req;
        const char *why = NULL;
        c->audit = json_pack("{s:s, s:s}", "received_at", when, "sandbox_id", e->sandbox_id);
        if (escalate_request_parse(c->body, c->body_len, &req, &why) < 0) {
                audit_set(c, "command", json_null());
                conn_respond(c, false, "policy", why ? why : "the request is malformed");
                return;
        }
        memcpy(c->request_id, req.request_id, 37);
        audit_set(c, "request_id", json_string(req.request_id));
        audit_set(c, "session_id", json_string(req.session_id));
        audit_set(c, "profile", json_string(req.profile));
        audit_set(c, "command", json_string(req.command));
        audit_set(c, "justification", json_string(req.justification));
        if (e->host.event)
                e->host.event(e->host.userdata, "requested", req.session_id,
                              json_pack("{s:s, s:s?, s:s?}", "request_id", req.request_id, "command", req.command,
                                        "justification", req.justification));

        unsigned char anchor[SESSION_KEY_LEN];
        bool interactive = false;
        const char *reason = NULL;
        int64_t now = (int64_t) time(NULL);
        if (!streq(req.profile, e->spec->profile))
                reason = "the request names another profile";
        else if (e->host.session(e->host.userdata, req.session_id, anchor, &interactive) < 0)
                reason = "no open session has this id";
        else if (session_verify_request(req.json, anchor, (uint64_t) now, &why) < 0)
                reason = why;
        else if (req.timestamp < now - TIMESTAMP_SKEW || req.timestamp > now + TIMESTAMP_SKEW)
                reason = "the request's time is more than five minutes off";
        else if (seen_before(e, req.request_id))
                reason = "this request id was used before";
        if (reason) {
                conn_respond(c, false, "policy", reason);
                escalate_request_done(&req);
                return;
        }

        /* The command pipeline (spec §5.2.1, decision 11). */
        char **argv = NULL;
        size_t argc = 0;
        const char *meta = words_metachar(req.command, strlen(req.command));
        const AutoApproveRule *rule = NULL;
        _cleanup_close_ int wfd = -EBADF;
        (void) open_workspace(e, &wfd);
        if (!meta && words_split(req.command, strlen(req.command), &argv, &argc, &why) == 0 && argc > 0)
                for (size_t i = 0; i < e->n_rules && !rule; i++)
                        if (autoapprove_match(&e->rules[i], argv, argc, AUTOAPPROVE_SEARCH_PATH, wfd))
                                rule = &e->rules[i];
        /* Without its confinement an approved command could not be held
         * to what its entry meant (see confine()): the person decides. */
        if (rule && !e->confinable) {
                log_info("escalation %s: an auto_approve entry matches, but the command cannot be confined "
                         "here (see the warning at the start); it needs the person",
                         req.request_id);
                rule = NULL;
        }
        /* A file the sandbox sees masked is the person's to hand out. */
        if (rule && names_masked(e, wfd, argv, argc)) {
                log_info("escalation %s: a word names a masked file; it needs the person", req.request_id);
                rule = NULL;
        }
        bool approved = rule != NULL;
        if (!approved) {
                words_free(argv);
                if (!interactive)
                        conn_respond(c, false, "policy",
                                     "it needs the person at the terminal, and this session has none (a "
                                     "non-interactive lazaret run); no auto_approve entry matches it");
                else
                        conn_enqueue(c, &req);
                escalate_request_done(&req);
                return;
        }
        escalate_request_done(&req);
        conn_run(c, argv, "auto", rule);
        words_free(argv);
}

/* Run an approved vector: the program as PATH resolves it here (for an
 * auto_approve entry, as the rule resolved it, and confined to what the
 * entry meant), never as the sandbox's PATH would. */
static void conn_run(EscConn *c, char **argv, const char *decided_by, const AutoApproveRule *rule) {
        char when[32];
        now_iso(when);
        c->decided_by = decided_by;
        _cleanup_free_ char *prog = NULL;
        if (!strchr(argv[0], '/') && exec_find_program(AUTOAPPROVE_SEARCH_PATH, argv[0], &prog) == 0) {
                free(argv[0]);
                argv[0] = TAKE_PTR(prog);
        }
        StrBuf fin = STRBUF_INIT;
        for (size_t i = 0; argv[i]; i++)
                strbuf_printf(&fin, "%s%s", i ? " " : "", argv[i]);
        _cleanup_free_ char *final = strbuf_steal(&fin);
        audit_set(c, "final_command", final ? json_string(final) : json_null());
        audit_set(c, "decided_at", json_string(when));
        _cleanup_(landlock_rules_freep) LandlockRules *rules = NULL;
        _cleanup_free_ char *why = NULL;
        int r = rule ? confine(c->e, rule, &rules, &why) : 0;
        if (r < 0) {
                log_error("escalation %s: cannot confine the auto-approved command: %s", c->request_id,
                          why ?: strerror(-r));
                conn_respond(c, false, "policy", "the auto-approved command could not be confined to the workspace");
                return;
        }
        r = start_command(c, argv, rules);
        if (r < 0) {
                char msg[128];
                snprintf(msg, sizeof(msg), "the command could not be started: %s", strerror(-r));
                conn_respond(c, false, "policy", msg);
        }
}

/* ---- the prompt ------------------------------------------------------------ */

/* Requests of one session take turns at its terminal: the oldest waiting
 * one is shown once nothing of that session is up (a prompt, or an
 * approved command still running). */
static void prompt_next(Escalation *e, const char *session_id) {
        for (;;) {
                EscConn *next = NULL;
                unsigned waiting = 0;
                for (EscConn *c = e->conns; c; c = c->next) {
                        if (!streq(c->session_id, session_id) || c->phase > PHASE_RUN)
                                continue;
                        if (c->shown)
                                return;
                        if (c->phase == PHASE_PROMPT) {
                                waiting++;
                                if (!next || c->seq < next->seq)
                                        next = c;
                        }
                }
                if (!next)
                        return;
                EscalationPrompt p = { .session_id = next->session_id,
                                       .request_id = next->request_id,
                                       .profile = e->spec->profile,
                                       .command = next->command,
                                       .justification = next->justification,
                                       .queued = waiting - 1 };
                if (e->host.prompt(e->host.userdata, &p) == 0) {
                        next->shown = true;
                        log_info("escalation %s: asking the person at session %s", next->request_id, session_id);
                        return;
                }
                conn_respond(next, false, "policy", "the session that asked has no terminal any more");
        }
}

/* c was shown and is over now: its terminal closes the prompt, the next
 * request of the session comes up. c may be gone already. */
static void prompt_over(Escalation *e, const char *session_id, const char *request_id) {
        e->host.prompt_done(e->host.userdata, session_id, request_id);
        prompt_next(e, session_id);
}

static void conn_enqueue(EscConn *c, const EscalateRequest *req) {
        Escalation *e = c->e;
        unsigned n = 0;
        for (EscConn *o = e->conns; o; o = o->next)
                if (o != c && streq(o->session_id, req->session_id) &&
                    (o->phase == PHASE_PROMPT || (o->phase == PHASE_RUN && o->shown)))
                        n++;
        if (n >= PROMPT_QUEUE_MAX) {
                conn_respond(c, false, "policy",
                             "too many requests of this session are waiting for the person at its terminal");
                return;
        }
        c->command = strdup(req->command);
        c->justification = strdup(req->justification ? req->justification : "");
        if (!c->command || !c->justification) {
                conn_respond(c, false, "policy", "out of memory");
                return;
        }
        memcpy(c->session_id, req->session_id, 37);
        c->phase = PHASE_PROMPT;
        c->seq = ++e->prompt_seq;
        if (n > 0)
                log_info("escalation %s: waits its turn at session %s (%u ahead)", c->request_id, c->session_id, n);
        /* Only the hang-up of a requester that gave up is of interest now. */
        struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = c };
        (void) epoll_ctl(e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
        prompt_next(e, c->session_id);
}

static EscConn *find_shown(Escalation *e, const char *session_id, const char *request_id) {
        for (EscConn *c = e ? e->conns : NULL; c; c = c->next)
                if (c->shown && streq(c->session_id, session_id) && streq(c->request_id, request_id))
                        return c;
        return NULL;
}

int escalation_answer(Escalation *e, const char *session_id, const char *request_id, const char *decision,
                      const char *edited) {
        EscConn *c = find_shown(e, session_id, request_id);
        char sid[37], rid[37];
        if (!c || c->phase != PHASE_PROMPT)
                return -ENOENT; /* withdrawn meanwhile, or answered twice */
        memcpy(sid, session_id, 37);
        memcpy(rid, request_id, 37);
        if (streq(decision, "unable")) {
                conn_respond(c, false, "policy",
                             "it needs the person at the terminal, and that terminal cannot show the prompt (its "
                             "type is unknown to ncurses)");
                prompt_next(e, sid);
                return 0;
        }
        if (!streq(decision, "approve")) {
                bool abort = streq(decision, "abort");
                log_info("escalation %s: %s by the user", rid, abort ? "denied (session aborted)" : "denied");
                conn_respond(c, false, "user",
                             abort ? "denied by the user, who ended the session" : "denied by the user");
                if (!abort)
                        prompt_next(e, sid);
                return 0;
        }
        const char *cmd = edited ? edited : c->command;
        const char *by = edited && !streq(edited, c->command) ? "edited" : "user";
        if (edited)
                audit_set(c, "edited_command", json_string(edited));
        /* The person decided; the metacharacter decision is made again on
         * what they approved: with any, the shell runs it, which only a
         * person may allow. */
        char **argv = NULL;
        size_t argc = 0;
        const char *why = NULL;
        if (words_metachar(cmd, strlen(cmd))) {
                argv = calloc(4, sizeof(char *));
                if (argv && (!(argv[0] = strdup("/bin/sh")) || !(argv[1] = strdup("-c")) || !(argv[2] = strdup(cmd)))) {
                        words_free(argv);
                        argv = NULL;
                }
                if (!argv)
                        why = "out of memory";
        } else if (words_split(cmd, strlen(cmd), &argv, &argc, &why) < 0 || argc == 0) {
                words_free(argv);
                argv = NULL;
                if (!why)
                        why = "the command is empty";
        }
        if (!argv) {
                char msg[160];
                snprintf(msg, sizeof(msg), "the approved command cannot be run: %s", why);
                conn_respond(c, false, "policy", msg);
                prompt_over(e, sid, rid);
                return 0;
        }
        log_info("escalation %s: approved by the user%s", rid, streq(by, "edited") ? " (edited)" : "");
        conn_run(c, argv, by, NULL);
        words_free(argv);
        /* A command that could not start was answered already. */
        EscConn *still = find_shown(e, sid, rid);
        if (!still || still->phase != PHASE_RUN)
                prompt_over(e, sid, rid);
        return 0;
}

/* End a running command: SIGTERM to its process group now, SIGKILL when
 * the grace is over (the timer); why goes on the record. */
static void conn_end(EscConn *c, const char *why) {
        if (c->phase != PHASE_RUN || c->exited || c->pid <= 0 || c->kill_deadline)
                return;
        log_info("escalation %s: ended (%s)", c->request_id, why);
        audit_set(c, "ended_by", json_string(why));
        (void) kill(-c->pid, SIGTERM);
        c->kill_deadline = now_usec() + CANCEL_GRACE_USEC;
}

int escalation_cancel(Escalation *e, const char *session_id, const char *request_id) {
        EscConn *c = find_shown(e, session_id, request_id);
        if (!c || c->phase != PHASE_RUN || c->exited || c->pid <= 0)
                return -ENOENT;
        if (c->kill_deadline == 0) {
                log_info("escalation %s: cancelled by the user", request_id);
                audit_set(c, "cancelled", json_true());
                (void) kill(-c->pid, SIGTERM);
                c->kill_deadline = now_usec() + CANCEL_GRACE_USEC;
        }
        return 0;
}

void escalation_session_gone(Escalation *e, const char *session_id) {
        if (!e)
                return;
        for (;;) {
                EscConn *c = e->conns;
                while (c && !(c->phase == PHASE_PROMPT && streq(c->session_id, session_id)))
                        c = c->next;
                if (!c)
                        return;
                conn_respond(c, false, "policy", "the session that asked has ended");
        }
}

static void conn_maybe_done(EscConn *c) {
        if (c->phase != PHASE_RUN || !c->exited || c->out.fd >= 0 || c->err.fd >= 0)
                return;
        Escalation *e = c->e;
        bool shown = c->shown;
        char sid[37], rid[37];
        memcpy(sid, c->session_id, 37);
        memcpy(rid, c->request_id, 37);
        conn_respond(c, true, c->decided_by ? c->decided_by : "auto", NULL);
        if (shown)
                prompt_over(e, sid, rid);
}

static void pipe_read(Pipe *p) {
        EscConn *c = p->conn;
        unsigned char chunk[65536];
        for (;;) {
                ssize_t n = read(p->fd, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        (void) epoll_ctl(c->e->epfd, EPOLL_CTL_DEL, p->fd, NULL);
                        p->fd = safe_close(p->fd);
                        conn_maybe_done(c);
                        return;
                }
                size_t room = c->e->output_max - c->len[p->stream];
                size_t take = (size_t) n < room ? (size_t) n : room;
                if (take < (size_t) n)
                        c->truncated[p->stream] = true; /* the rest is read and dropped */
                if (take > 0) {
                        unsigned char *nb = realloc(c->buf[p->stream], c->len[p->stream] + take);
                        if (!nb)
                                return;
                        memcpy(nb + c->len[p->stream], chunk, take);
                        c->buf[p->stream] = nb;
                        c->len[p->stream] += take;
                }
        }
}

static bool escalation_reaped(Escalation *e, pid_t pid, int wstatus);

void escalation_reap(Escalation *e) {
        for (EscConn *c = e ? e->conns : NULL, *next; c; c = next) {
                next = c->next;
                int st;
                if (c->pid > 0 && !c->exited && waitpid(c->pid, &st, WNOHANG) == c->pid)
                        (void) escalation_reaped(e, c->pid, st);
        }
}

static bool escalation_reaped(Escalation *e, pid_t pid, int wstatus) {
        for (EscConn *c = e ? e->conns : NULL; c; c = c->next)
                if (c->pid == pid) {
                        c->exited = true;
                        c->wstatus = wstatus;
                        conn_maybe_done(c);
                        return true;
                }
        return false;
}

/* Handshake, then the 4-byte length, then the body. */
static void conn_io(EscConn *c) {
        if (c->phase == PHASE_PROMPT) {
                /* The requester hung up while the person had not answered
                 * (lazaret-escalate interrupted, say): take the prompt down. */
                Escalation *e = c->e;
                bool shown = c->shown;
                char sid[37], rid[37];
                memcpy(sid, c->session_id, 37);
                memcpy(rid, c->request_id, 37);
                c->peer_gone = true;
                conn_respond(c, false, "policy", "withdrawn: the requester hung up before the person answered");
                if (shown)
                        prompt_over(e, sid, rid);
                return;
        }
        if (c->phase == PHASE_RUN) {
                /* Hung up while its command runs: nobody waits for it any
                 * more, so it ends (SIGTERM, SIGKILL 2 s later), on the
                 * record; no host process outlives its requester. */
                (void) epoll_ctl(c->e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
                c->peer_gone = true;
                conn_end(c, "requester_hung_up");
                return;
        }
        if (c->phase == PHASE_HANDSHAKE) {
                int r = SSL_accept(c->ssl);
                if (r != 1) {
                        int err = SSL_get_error(c->ssl, r);
                        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
                                struct epoll_event ev = { .events = err == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT,
                                                          .data.ptr = c };
                                (void) epoll_ctl(c->e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
                                return;
                        }
                        unsigned long e = ERR_peek_last_error();
                        long v = SSL_get_verify_result(c->ssl);
                        log_info("escalation: TLS handshake refused (%s%s%s)",
                                 e ? ERR_reason_error_string(e) : "the peer went away", v != X509_V_OK ? ": " : "",
                                 v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
                        ERR_clear_error();
                        conn_free(c);
                        return;
                }
                /* Before any payload byte: is this our sandbox? */
                const char *why = NULL;
                if (trust_check_peer(c->ssl, c->e->spec->profile, c->e->sandbox_id, &why) < 0) {
                        log_info("escalation: refused before the request: %s", why);
                        conn_free(c);
                        return;
                }
                c->phase = PHASE_READ;
        }
        if (c->phase == PHASE_READ) {
                for (;;) {
                        size_t got = 0;
                        int r;
                        if (c->hdr_got < 4)
                                r = SSL_read_ex(c->ssl, c->hdr + c->hdr_got, 4 - c->hdr_got, &got);
                        else
                                r = SSL_read_ex(c->ssl, c->body + c->body_got, c->body_len - c->body_got, &got);
                        if (r != 1) {
                                int err = SSL_get_error(c->ssl, r);
                                if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
                                        struct epoll_event ev = { .events = err == SSL_ERROR_WANT_READ ? EPOLLIN
                                                                                                       : EPOLLOUT,
                                                                  .data.ptr = c };
                                        (void) epoll_ctl(c->e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
                                        return;
                                }
                                ERR_clear_error();
                                conn_free(c);
                                return;
                        }
                        if (c->hdr_got < 4) {
                                c->hdr_got += got;
                                if (c->hdr_got < 4)
                                        continue;
                                uint32_t n = escalate_frame_length(c->hdr);
                                if (n == 0 || n > ESCALATE_REQUEST_MAX) {
                                        /* Audited: it came with a valid certificate. */
                                        c->body_len = 0;
                                        char when[32];
                                        now_iso(when);
                                        c->audit = json_pack("{s:s, s:s, s:n}", "received_at", when, "sandbox_id",
                                                             c->e->sandbox_id, "command");
                                        conn_respond(c, false, "policy", "the request is larger than 64 KiB");
                                        return;
                                }
                                c->body_len = n;
                                c->body = malloc(n);
                                if (!c->body) {
                                        conn_free(c);
                                        return;
                                }
                                continue;
                        }
                        c->body_got += got;
                        if (c->body_got == c->body_len) {
                                conn_decide(c);
                                return;
                        }
                }
        }
        if (c->phase == PHASE_WRITE) {
                while (c->response_off < 4 + c->response_len) {
                        unsigned char hdr[4];
                        escalate_frame_header((uint32_t) c->response_len, hdr);
                        const void *p = c->response_off < 4 ? (const void *) (hdr + c->response_off)
                                                            : (const void *) (c->response + c->response_off - 4);
                        size_t n = c->response_off < 4 ? 4 - c->response_off : 4 + c->response_len - c->response_off;
                        size_t w = 0;
                        int r = SSL_write_ex(c->ssl, p, n, &w);
                        if (r != 1) {
                                int err = SSL_get_error(c->ssl, r);
                                if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ)
                                        return;
                                ERR_clear_error();
                                conn_free(c);
                                return;
                        }
                        c->response_off += w;
                }
                (void) SSL_shutdown(c->ssl);
                conn_free(c);
        }
}

static void accept_conns(Escalation *e) {
        for (;;) {
                int fd = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                if (e->n_conns >= CONN_MAX) {
                        /* A flood: the coordinator and the terminals stay
                         * responsive, the excess is closed unread. */
                        log_warning("escalation: %u connections already; closing another", e->n_conns);
                        safe_close(fd);
                        continue;
                }
                EscConn *c = calloc(1, sizeof(EscConn));
                SSL *ssl = c ? SSL_new(e->ctx) : NULL;
                if (!c || !ssl || !SSL_set_fd(ssl, fd)) {
                        if (ssl)
                                SSL_free(ssl);
                        free(c);
                        safe_close(fd);
                        continue;
                }
                *c = (EscConn){ .e = e,
                                .fd = fd,
                                .ssl = ssl,
                                .deadline = now_usec() + REQUEST_USEC,
                                .out.fd = -EBADF,
                                .err.fd = -EBADF };
                c->next = e->conns;
                e->conns = c;
                e->n_conns++;
                struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
                if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                        conn_free(c);
                        continue;
                }
                conn_io(c);
        }
}

void escalation_dispatch(Escalation *e) {
        struct epoll_event evs[16];
        int n = epoll_wait(e->epfd, evs, 16, 0);
        for (int i = 0; i < n; i++) {
                void *p = evs[i].data.ptr;
                if (!p)
                        accept_conns(e);
                else if (p == &e->timer_fd) {
                        uint64_t ticks;
                        if (read(e->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
                                log_debug("escalation: timer: %m");
                        uint64_t now = now_usec();
                        for (EscConn *c = e->conns, *next; c; c = next) {
                                next = c->next;
                                if (c->phase <= PHASE_READ && now > c->deadline) {
                                        log_info("escalation: no complete request within 10 s; closed");
                                        conn_free(c);
                                } else if (c->phase == PHASE_RUN && c->kill_deadline && now > c->kill_deadline &&
                                           !c->exited) {
                                        (void) kill(-c->pid, SIGKILL);
                                        c->kill_deadline = UINT64_MAX;
                                } else if (c->phase == PHASE_RUN && !c->kill_deadline && now > c->run_deadline)
                                        conn_end(c, "time_limit");
                        }
                } else {
                        /* A connection or one of its pipes: find which. */
                        EscConn *c;
                        for (c = e->conns; c; c = c->next) {
                                if (p == c) {
                                        conn_io(c);
                                        break;
                                }
                                if (p == &c->out || p == &c->err) {
                                        pipe_read(p);
                                        break;
                                }
                        }
                }
        }
}

Escalation *escalation_free(Escalation *e) {
        if (!e)
                return NULL;
        while (e->conns)
                conn_free(e->conns);
        safe_close(e->epfd);
        safe_close(e->listen_fd);
        safe_close(e->timer_fd);
        escalation_remove(e->state_dir, e->socket_dir);
        SSL_CTX_free(e->ctx);
        trust_ca_free(e->ca);
        for (size_t i = 0; i < e->n_rules; i++)
                autoapprove_rule_done(&e->rules[i]);
        free(e->rules);
        free(e->init_path);
        native_seccomp_prog_done(&e->seccomp);
        free(e->seen);
        free(e->sandbox_id);
        free(e->workspace);
        free(e->env_git_dir);
        free(e->env_git_work_tree);
        free(e->certs_dir);
        free(e->state_dir);
        free(e->socket_dir);
        free(e->socket_path);
        free(e);
        return NULL;
}
