/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "argv-util.h"
#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "image-build.h"
#include "log.h"
#include "netpolicy-digest.h"
#include "proc-util.h"
#include "router-run.h"
#include "sidecar.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"

#define PODMAN_TIMEOUT_USEC (UINT64_C(120) * 1000000)
#define ATTEST_TIMEOUT_MS   15000
#define PROBE_TIMEOUT_MS    3000
#define PROBE_DEADLINE_USEC (UINT64_C(60) * 1000000)
#define PROBE_DENIED_MAX    32u
#define PROBE_ROUTES_MAX    8u
#define READINESS_DOMAIN    "lazaret/network-readiness-identity/v1\n"
#define SLIRP_IPV6_ADDRESS  "fd00::100/64"
#define SLIRP_IPV6_GATEWAY  "fe80::2"
#define KEEP_KEY_HEX        64

static int fail(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(char **ret_error, int r, const char *fmt, ...) {
        StrBuf b = STRBUF_INIT;
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(&b, fmt, ap);
        va_end(ap);
        *ret_error = strbuf_steal(&b);
        return *ret_error ? r : -ENOMEM;
}

void policy_in_force_done(PolicyInForce *p) {
        netpolicy_done(&p->parsed);
        free(p->canonical);
        *p = (PolicyInForce){};
}

void sidecar_done(Sidecar *sc) {
        sidecar_stop_own(sc);
        free(sc->name);
        free(sc->id);
        free(sc->keep_dir);
        safe_close(sc->ctl_fd);
        json_decref(sc->attestation);
        *sc = (Sidecar){ .ctl_fd = -EBADF, .uplink_exit_fd = -EBADF, .go_fd = -EBADF, .uplink_ready_fd = -EBADF };
}

int sidecar_name(const LaunchSpec *s, char **ret) {
        return asprintf(ret, "lazaret-net-%s", s->domain_hash) < 0 ? -ENOMEM : 0;
}

/* On the failure paths: the error is already being reported. */
static void remove_quietly(const LaunchSpec *s, const char *name) {
        _cleanup_free_ char *ignored = NULL;
        (void) container_remove(s, name, &ignored);
}

static int sealed_memfd(const char *text, size_t len) {
        int fd = memfd_create("lazaret-netpolicy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return negative_errno();
        size_t done = 0;
        while (done < len) {
                ssize_t k = write(fd, text + done, len - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        int r = k < 0 ? negative_errno() : -EIO;
                        close(fd);
                        return r;
                }
                done += (size_t) k;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0) {
                int r = negative_errno();
                close(fd);
                return r;
        }
        return fd;
}

/* fd readable within timeout_ms: 0, -ETIMEDOUT or -errno. */
static int wait_readable(int fd, int timeout_ms) {
        struct pollfd p = { fd, POLLIN, 0 };
        int k;
        do
                k = poll(&p, 1, timeout_ms);
        while (k < 0 && errno == EINTR);
        return k < 0 ? negative_errno() : k == 0 ? -ETIMEDOUT : 0;
}

/* netd's next packet on the control socket, as JSON. */
static int read_reply(int fd, int timeout_ms, json_t **ret) {
        int r = wait_readable(fd, timeout_ms);
        if (r < 0)
                return r;
        char buf[16384];
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
        if (n < 0)
                return negative_errno();
        if (n == 0)
                return -ECONNRESET;
        json_error_t e;
        json_t *j = json_loadb(buf, (size_t) n, JSON_REJECT_DUPLICATES, &e);
        if (!j || !json_is_object(j)) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

/* An attestation is accepted only for the digest we sent, with every route
 * read back as the policy wants, and routes made for the stack that reads
 * them (gVisor's own stack ignores the kernel style's prohibit routes). */
int sidecar_check_attestation(json_t *a, const char *digest, bool kernel_stack, char **ret_error) {
        const char *type = json_string_value(json_object_get(a, "type"));
        if (type && streq(type, "error"))
                return fail(ret_error, -EPROTO, "lazaret-netd: %s",
                            json_string_value(json_object_get(a, "message")) ?: "unknown error");
        const char *d = json_string_value(json_object_get(a, "derived_policy_digest"));
        json_t *obs = json_object_get(a, "observation");
        if (!type || !streq(type, "attestation") || !d || !json_is_object(obs))
                return fail(ret_error, -EPROTO, "lazaret-netd sent no attestation");
        if (!streq(d, digest))
                return fail(ret_error, -EPROTO,
                            "lazaret-netd attested policy %.12s, not the one sent (%.12s): the policy was changed "
                            "on the way",
                            d, digest);
        const char *style = json_string_value(json_object_get(a, "routes_for"));
        if (!style || !streq(style, kernel_stack ? "kernel" : "gvisor"))
                return fail(ret_error, -EPROTO, "lazaret-netd made routes for %s's stack, not for %s",
                            style && streq(style, "kernel") ? "the kernel" : "gVisor",
                            kernel_stack ? "the kernel's" : "gVisor's");
        if (!json_is_true(json_object_get(obs, "routes_attested")))
                return fail(ret_error, -EPROTO, "lazaret-netd could not attest the routes: %s",
                            json_string_value(json_object_get(a, "error")) ?: "the routes differ from the policy");
        return 0;
}

static int read_pid(const char *path, pid_t *ret) {
        _cleanup_free_ char *text = NULL;
        int r = read_file_capped(path, 64, &text, NULL);
        if (r < 0)
                return r;
        long v = strtol(text, NULL, 10);
        if (v <= 0)
                return -EBADMSG;
        *ret = (pid_t) v;
        return 0;
}

static int conmon_child(pid_t conmon, pid_t *ret) {
        _cleanup_free_ pid_t *kids = NULL;
        size_t n = 0;
        int r = proc_children(conmon, conmon, &kids, &n);
        if (r < 0)
                return r;
        if (n == 0)
                return -ESRCH;
        *ret = kids[0];
        return 0;
}

/* A stop the coordinator was asked for while it builds: the signal waits,
 * blocked, so that it is neither lost nor acted on half-way. */
static bool stop_signal_pending(void *userdata) {
        sigset_t p;
        (void) userdata;
        return sigpending(&p) == 0 &&
               (sigismember(&p, SIGTERM) == 1 || sigismember(&p, SIGINT) == 1 || sigismember(&p, SIGHUP) == 1);
}

/* The sidecar image, built by the image library (issue 43: it installs no
 * handler and ignores no signal). SIGTERM, SIGINT and SIGHUP are blocked
 * meanwhile and a pending one stops the build, which then removes what it
 * made; unblocked again, the signal does what it does anywhere else in a
 * start (kills a starting coordinator, whose watchdog removes the rest;
 * reaches the signalfd of a running one). 0 or -errno. */
static int build_sidecar_image(const char *ref) {
        sigset_t stop, old;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &stop, &old) < 0)
                return negative_errno();
        int r = image_build("sidecar", ref, &(ImageStop){ .requested = stop_signal_pending }, NULL);
        (void) sigprocmask(SIG_SETMASK, &old, NULL);
        return r;
}

/* ---- the native backend's sidecar: no container ------------------------
 * Issue 45: with any address rule a native cold start paid for a container
 * (Podman, runc and conmon: about 140 of its 175 ms) that holds nothing but
 * a network namespace with netd's routes and an uplink. The coordinator
 * makes that namespace itself: netd starts in a user and network namespace
 * of its own (the user's uid its root, no other id mapped; NET_ADMIN its
 * only capability, no new privileges), and slirp4netns, in that user
 * namespace but the host's network namespace, gives it tap0 as it gives
 * Podman's (the host's loopback out of reach, in a sandbox of its own,
 * under seccomp). netd dies with the coordinator (the parent-death
 * signal), slirp4netns when the coordinator's end of its exit pipe closes.
 * The native sandbox enters that user namespace and makes its own below
 * it, as it did below Podman's: nothing in it holds a capability over the
 * routes. */

bool sidecar_own_namespace(const LaunchSpec *s) {
        return s->backend == BACKEND_NATIVE && s->rootless;
}

#define OWN_READY_TIMEOUT_MS 10000

typedef struct OwnChild {
        pid_t parent;
        int ready_fd, go_fd; /* the child's numbers */
        char uid_map[32], gid_map[32];
        bool no_ipv6;
} OwnChild;

static int own_write(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = strlen(text);
        ssize_t k = write(fd, text, n);
        int r = k < 0 ? -errno : (size_t) k != n ? -EIO : 0;
        (void) close(fd);
        return r;
}

/* In netd's child before its exec (system calls only): the namespaces, its
 * one capability, then a byte on ready_fd ('u', or 'e' and the errno) and
 * wait for slirp4netns's tap0 (a byte on go_fd). */
static int own_child_fail(const OwnChild *c, int r) {
        char b[1 + sizeof(int)] = { 'e' };
        int e = -r;
        memcpy(b + 1, &e, sizeof(int));
        (void) !write(c->ready_fd, b, sizeof(b));
        return r;
}

static int own_before_exec(void *userdata) {
        const OwnChild *c = userdata;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != c->parent)
                return own_child_fail(c, -ESRCH);
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
                return own_child_fail(c, -errno);
        int r = own_write("/proc/self/setgroups", "deny");
        if (r >= 0)
                r = own_write("/proc/self/uid_map", c->uid_map);
        if (r >= 0)
                r = own_write("/proc/self/gid_map", c->gid_map);
        if (r < 0)
                return own_child_fail(c, r);
        /* As Podman's --sysctl did, before tap0 exists. */
        if (c->no_ipv6) {
                r = own_write("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
                if (r >= 0)
                        r = own_write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
                if (r < 0 && r != -ENOENT) /* ENOENT: no IPv6 in this kernel */
                        return own_child_fail(c, r);
        } else {
                /* No router advertisements: they would bring back the
                 * default route and the prefix route. */
                r = own_write("/proc/sys/net/ipv6/conf/default/accept_ra", "0");
                if (r < 0)
                        return own_child_fail(c, r);
        }
        /* netd never forks and holds a handful of descriptors. */
        struct rlimit nofile = { 64, 64 };
        if (setrlimit(RLIMIT_NOFILE, &nofile) < 0)
                return own_child_fail(c, -errno);
        /* NET_ADMIN alone: root in its namespace gets at exec what the
         * bounding set keeps. */
        for (int cap = 0; cap <= 63; cap++)
                if (cap != CAP_NET_ADMIN && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        return own_child_fail(c, -errno);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return own_child_fail(c, -errno);
        if (write(c->ready_fd, "u", 1) != 1)
                return -EPIPE;
        (void) close(c->ready_fd);
        /* The go: one byte, and the policy's memfd, which becomes fd 3. */
        char go;
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = { &go, 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
        ssize_t k;
        do
                k = recvmsg(c->go_fd, &mh, MSG_CMSG_CLOEXEC);
        while (k < 0 && errno == EINTR);
        (void) close(c->go_fd);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        if (k != 1 || !cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
            cm->cmsg_len != CMSG_LEN(sizeof(int)))
                return -EPIPE;
        int policy;
        memcpy(&policy, CMSG_DATA(cm), sizeof(int));
        if (dup2(policy, 3) < 0)
                return -errno;
        if (policy != 3)
                (void) close(policy);
        return 0;
}

/* One byte (or 'e' and an errno) from fd within timeout_ms. */
static int own_wait_byte(int fd, int timeout_ms, char *ret) {
        int r = wait_readable(fd, timeout_ms);
        if (r < 0)
                return r;
        char b[1 + sizeof(int)];
        ssize_t n;
        do
                n = read(fd, b, sizeof(b));
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        if (n == 0)
                return -ECONNRESET;
        if (b[0] == 'e' && (size_t) n == sizeof(b)) {
                int e;
                memcpy(&e, b + 1, sizeof(int));
                return e > 0 ? -e : -EIO;
        }
        *ret = b[0];
        return 0;
}

/* The Domain's directory, for netd.sock and netd.key: a path through
 * /proc/self/fd, as short as a socket's address needs whatever the data
 * root's length. */
static int keep_addr(int dirfd, const char *name, struct sockaddr_un *ret, socklen_t *ret_len) {
        *ret = (struct sockaddr_un){ .sun_family = AF_UNIX };
        int n = snprintf(ret->sun_path, sizeof(ret->sun_path), "/proc/self/fd/%d/%s", dirfd, name);
        if (n < 0 || (size_t) n >= sizeof(ret->sun_path))
                return -ENAMETOOLONG;
        *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + (size_t) n + 1);
        return 0;
}

static void keep_forget(const char *dir) {
        _cleanup_close_ int dfd = dir ? open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -EBADF;
        if (dfd < 0)
                return;
        (void) unlinkat(dfd, SIDECAR_KEEP_SOCKET, 0);
        (void) unlinkat(dfd, SIDECAR_KEEP_KEY, 0);
}

void sidecar_stop_own(Sidecar *sc) {
        if (!sc->own_namespace)
                return;
        int st;
        if (sc->listening || sc->kept)
                keep_forget(sc->keep_dir);
        sc->listening = sc->keepable = false;
        if (sc->netd_pid > 0) {
                (void) kill(sc->netd_pid, SIGKILL);
                /* A kept netd is an earlier coordinator's child, not ours. */
                while (waitpid(sc->netd_pid, &st, 0) < 0 && errno == EINTR)
                        ;
                sc->netd_pid = sc->conmon_pid = 0;
        }
        /* Its exit descriptor reads EOF: slirp4netns ends by itself (a
         * kept one when netd, which holds the other copy, is gone). */
        sc->uplink_exit_fd = safe_close(sc->uplink_exit_fd);
        sc->go_fd = safe_close(sc->go_fd);
        sc->uplink_ready_fd = safe_close(sc->uplink_ready_fd);
        if (sc->kept)
                sc->uplink_pid = 0;
        if (sc->uplink_pid > 0) {
                (void) kill(sc->uplink_pid, SIGKILL);
                while (waitpid(sc->uplink_pid, &st, 0) < 0 && errno == EINTR)
                        ;
                sc->uplink_pid = 0;
        }
        sc->kept = false;
}

static int keep_write(const char *dir, const char *line, size_t n) {
        _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        static const char tmp[] = SIDECAR_KEEP_KEY ".tmp";
        (void) unlinkat(dfd, tmp, 0);
        _cleanup_close_ int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return negative_errno();
        ssize_t k = write(fd, line, n);
        int r = k < 0 ? negative_errno() : (size_t) k != n ? -EIO : 0;
        if (r >= 0 && renameat(dfd, tmp, dfd, SIDECAR_KEEP_KEY) < 0)
                r = negative_errno();
        if (r < 0)
                (void) unlinkat(dfd, tmp, 0);
        return r;
}

/* netd may outlive us (issue 45): a fresh key, which netd takes with
 * "keep" and a later coordinator reads from netd.key (0600, in the
 * Domain, with the uplink's pid and the flags netd was started with).
 * At the teardown, off the start's path; on failure netd is not kept.
 * The file is a cache: not synced, and a torn one is not taken. */
static void keep_offer(Sidecar *sc) {
        uint8_t raw[32];
        char key[65], line[160];
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t) sizeof(raw)) {
                log_debug("netd will not be kept: no random key: %m");
                return;
        }
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(key + 2 * i, 3, "%02x", raw[i]);
        explicit_bzero(raw, sizeof(raw));
        int n = snprintf(line, sizeof(line), "keep %s %d", key, (int) sc->uplink_pid);
        json_t *a = NULL;
        int r = send(sc->ctl_fd, line, (size_t) n, MSG_NOSIGNAL) == n ? 0 : negative_errno();
        if (r >= 0)
                r = read_reply(sc->ctl_fd, ATTEST_TIMEOUT_MS, &a);
        const char *type = r >= 0 ? json_string_value(json_object_get(a, "type")) : NULL;
        bool ok = type && streq(type, "kept");
        json_decref(a);
        if (!ok)
                log_debug("netd will not be kept: it did not take the key (%s)", r < 0 ? strerror(-r) : "refused");
        else {
                n = snprintf(line, sizeof(line), "%s %d %d %d\n", key, (int) sc->uplink_pid, sc->pre_ipv6 ? 1 : 0,
                             sc->pre_ipv6_uplink ? 1 : 0);
                r = keep_write(sc->keep_dir, line, (size_t) n);
                if (r < 0)
                        log_debug("netd will not be kept: cannot write %s/%s: %s", sc->keep_dir, SIDECAR_KEEP_KEY,
                                  strerror(-r));
                sc->keepable = r >= 0;
        }
        explicit_bzero(line, sizeof(line));
        explicit_bzero(key, sizeof(key));
}

void sidecar_leave_own(Sidecar *sc, bool keep) {
        if (!sc->own_namespace)
                return;
        if (keep && sc->netd_pid > 0 && sc->listening && !sc->kept && sc->ctl_fd >= 0)
                keep_offer(sc);
        if (!keep || !sc->keepable || sc->netd_pid <= 0) {
                sidecar_stop_own(sc);
                return;
        }
        /* netd sees its control socket close and waits on netd.sock; it
         * holds slirp4netns's exit pipe. */
        sc->ctl_fd = safe_close(sc->ctl_fd);
        sc->uplink_exit_fd = safe_close(sc->uplink_exit_fd);
        sc->go_fd = safe_close(sc->go_fd);
        sc->uplink_ready_fd = safe_close(sc->uplink_ready_fd);
        sc->netd_pid = sc->conmon_pid = sc->uplink_pid = 0;
        sc->listening = sc->keepable = sc->kept = false;
        log_info("the network namespace is kept for the next run with this policy");
}

bool sidecar_reap(Sidecar *sc) {
        int st;
        if (!sc->own_namespace)
                return false;
        if (sc->netd_pid > 0 && waitpid(sc->netd_pid, &st, WNOHANG) == sc->netd_pid)
                sc->netd_pid = sc->conmon_pid = 0; /* the pidfd's watch says it */
        if (sc->uplink_pid > 0 && waitpid(sc->uplink_pid, &st, WNOHANG) == sc->uplink_pid) {
                sc->uplink_pid = 0;
                return true;
        }
        return false;
}

/* The first half, which needs no policy yet: netd in its namespace,
 * waiting; slirp4netns attaching tap0 to it. The coordinator starts it
 * before the workspace router (sidecar_prestart), so that both start side
 * by side. */
static int own_begin(const LaunchSpec *s, bool ipv6, bool ipv6_uplink, bool kernel_stack, Sidecar *sc,
                     char **ret_error) {
        if (!s->slirp4netns)
                return fail(ret_error, -ENOENT,
                            "slirp4netns is not installed or not in PATH: the native backend's address rules "
                            "need it (sudo apt-get install slirp4netns)");
        int ctl[2], ready[2], go[2], up_ready[2], up_exit[2];
        sc->own_namespace = true; /* what follows is ended by sidecar_stop_own */
        sc->kernel_stack = kernel_stack;
        sc->pre_ipv6 = ipv6;
        sc->pre_ipv6_uplink = ipv6_uplink;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
                return negative_errno();
        sc->ctl_fd = ctl[0];
        _cleanup_close_ int theirs = ctl[1];
        if (pipe2(ready, O_CLOEXEC) < 0)
                return negative_errno();
        _cleanup_close_ int ready_r = ready[0], ready_w = ready[1];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, go) < 0)
                return negative_errno();
        sc->go_fd = go[0];
        _cleanup_close_ int go_r = go[1];
        _cleanup_close_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                return negative_errno();
        /* slirp4netns's exit pipe: netd holds a copy of its writing end,
         * so that a kept netd's uplink lives as long as it does. */
        if (pipe2(up_exit, O_CLOEXEC) < 0)
                return negative_errno();
        _cleanup_close_ int up_exit_r = up_exit[0];
        sc->uplink_exit_fd = up_exit[1];
        /* Where netd listens once kept (issue 45): netd.sock in the Domain.
         * Without it netd runs as before, ending with us. */
        _cleanup_close_ int listen_fd = -EBADF;
        free(sc->keep_dir);
        sc->keep_dir = strdup(s->domain_dir);
        _cleanup_close_ int dfd = sc->keep_dir ? open(sc->keep_dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -EBADF;
        struct sockaddr_un sa;
        socklen_t sl;
        if (dfd >= 0 && keep_addr(dfd, SIDECAR_KEEP_SOCKET, &sa, &sl) >= 0) {
                (void) unlinkat(dfd, SIDECAR_KEEP_KEY, 0);
                (void) unlinkat(dfd, SIDECAR_KEEP_SOCKET, 0);
                /* Bound here; netd listens when it is kept, so that a
                 * connection's peer is netd (the listener's credentials). */
                listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
                if (listen_fd >= 0 && bind(listen_fd, (struct sockaddr *) &sa, sl) < 0)
                        listen_fd = safe_close(listen_fd);
                if (listen_fd < 0)
                        log_debug("netd will not be kept: cannot listen on %s/%s: %m", sc->keep_dir,
                                  SIDECAR_KEEP_SOCKET);
                sc->listening = listen_fd >= 0;
        }

        uint64_t t0 = now_usec();
        OwnChild c = { .parent = getpid(), .ready_fd = 5, .go_fd = 6, .no_ipv6 = !ipv6 };
        snprintf(c.uid_map, sizeof(c.uid_map), "0 %u 1", (unsigned) getuid());
        snprintf(c.gid_map, sizeof(c.gid_map), "0 %u 1", (unsigned) getgid());
        Argv a = {};
        argv_add(&a, "lazaret-netd");
        if (kernel_stack)
                argv_add(&a, "--kernel-stack");
        if (ipv6_uplink) {
                argv_add(&a, "--ipv6-uplink");
                argv_add(&a, SLIRP_IPV6_ADDRESS "," SLIRP_IPV6_GATEWAY);
        }
        if (listen_fd >= 0) {
                argv_add(&a, "--listen-fd");
                argv_add(&a, "7");
                /* Tests keep it a short while (netd takes 100 ms to its
                 * ten minutes). */
                const char *idle = getenv("LAZARET_TEST_NETD_KEEP_MS");
                if (idle && strspn(idle, "0123456789") == strlen(idle) && strlen(idle) <= 6 && atol(idle) >= 100 &&
                    atol(idle) <= 600000) {
                        log_warning("the network namespace is kept %s ms at most (LAZARET_TEST_NETD_KEEP_MS)", idle);
                        argv_add(&a, "--keep-idle-ms");
                        argv_add(&a, idle);
                }
        }
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        char *const envp[] = { NULL };
        SpawnFd fds[] = { { devnull, 0 },   { devnull, 1 },           { theirs, 4 }, { ready_w, 5 }, { go_r, 6 },
                          { listen_fd, 7 }, { sc->uplink_exit_fd, 8 } };
        SpawnSpec sp = SPAWN_SPEC_INIT(s->netd, a.v);
        sp.envp = envp;
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds) - (listen_fd < 0 ? 2 : 0);
        sp.cwd = "/";
        sp.new_pgroup = true;
        sp.no_wait = true; /* it waits for its uplink and policy before the exec */
        sp.before_exec = own_before_exec;
        sp.before_exec_data = &c;
        int r = spawn(&sp, &sc->netd_pid);
        argv_done(&a);
        if (r < 0)
                return fail(ret_error, r, "cannot start lazaret-netd: %s", strerror(-r));
        sc->conmon_pid = sc->netd_pid;
        sc->own_namespace = true;
        theirs = safe_close(theirs);
        listen_fd = safe_close(listen_fd);
        ready_w = safe_close(ready_w);
        go_r = safe_close(go_r);
        char b = 0;
        r = own_wait_byte(ready_r, OWN_READY_TIMEOUT_MS, &b);
        if (r < 0)
                return fail(ret_error, r, "cannot make the network sidecar's namespace: %s",
                            r == -ECONNRESET ? "lazaret-netd exited" : strerror(-r));
        log_debug("netd's namespace made in %" PRIu64 " us", now_usec() - t0);

        /* The uplink, in netd's user namespace (as its root: slirp4netns's
         * own sandbox is a mount namespace), attached to its network
         * namespace. */
        char nspath[64];
        snprintf(nspath, sizeof(nspath), "/proc/%d/ns/user", (int) sc->netd_pid);
        _cleanup_close_ int userns = open(nspath, O_RDONLY | O_CLOEXEC);
        if (userns < 0) {
                r = negative_errno();
                return fail(ret_error, r, "cannot open lazaret-netd's user namespace: %s", strerror(-r));
        }
        if (pipe2(up_ready, O_CLOEXEC) < 0)
                return negative_errno();
        sc->uplink_ready_fd = up_ready[0];
        _cleanup_close_ int up_ready_w = up_ready[1];
        snprintf(nspath, sizeof(nspath), "/proc/%d/ns/net", (int) sc->netd_pid);
        Argv u = {};
        argv_add(&u, "slirp4netns");
        argv_add(&u, "--configure");
        argv_add(&u, "--mtu=65520");
        argv_add(&u, "--disable-host-loopback");
        argv_add(&u, "--enable-sandbox");
        argv_add(&u, "--enable-seccomp");
        if (ipv6)
                argv_add(&u, "--enable-ipv6");
        argv_add(&u, "--ready-fd=3");
        argv_add(&u, "--exit-fd=4");
        argv_add(&u, "--netns-type=path");
        argv_add(&u, nspath);
        argv_add(&u, "tap0");
        if (u.oom) {
                argv_done(&u);
                return -ENOMEM;
        }
        SpawnFd ufds[] = { { devnull, 0 }, { devnull, 1 }, { devnull, 2 }, { up_ready_w, 3 }, { up_exit_r, 4 } };
        SpawnSpec usp = SPAWN_SPEC_INIT(s->slirp4netns, u.v);
        usp.fds = ufds;
        usp.n_fds = ELEMENTSOF(ufds);
        usp.cwd = "/";
        usp.new_pgroup = true;
        usp.userns_fd = userns;
        r = spawn(&usp, &sc->uplink_pid);
        argv_done(&u);
        if (r < 0)
                return fail(ret_error, r, "cannot start slirp4netns: %s", strerror(-r));
        sc->started_usec = t0;
        return 0;
}

/* The second half: tap0 up, netd gets its policy, installs and attests. */
static int own_finish(const PolicyInForce *pol, Sidecar *sc, char **ret_error) {
        _cleanup_close_ int memfd = sealed_memfd(pol->canonical, strlen(pol->canonical));
        if (memfd < 0)
                return fail(ret_error, memfd, "cannot make the policy memfd: %s", strerror(-memfd));
        char b = 0;
        int r = own_wait_byte(sc->uplink_ready_fd, OWN_READY_TIMEOUT_MS, &b);
        sc->uplink_ready_fd = safe_close(sc->uplink_ready_fd);
        if (r < 0)
                return fail(ret_error, r, "slirp4netns did not attach the network sidecar's uplink: %s",
                            r == -ECONNRESET ? "it exited" : strerror(-r));
        log_debug("slirp4netns attached in %" PRIu64 " us", now_usec() - sc->started_usec);

        /* tap0 is there: netd may start, with its policy. */
        char cbuf[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = { (char[]){ 'g' }, 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &memfd, sizeof(int));
        ssize_t k;
        do
                k = sendmsg(sc->go_fd, &mh, MSG_NOSIGNAL);
        while (k < 0 && errno == EINTR);
        sc->go_fd = safe_close(sc->go_fd);
        if (k != 1)
                return fail(ret_error, -EPIPE, "lazaret-netd exited before its start");
        r = read_reply(sc->ctl_fd, ATTEST_TIMEOUT_MS, &sc->attestation);
        if (r < 0)
                return fail(ret_error, r, "lazaret-netd sent no attestation: %s",
                            r == -ETIMEDOUT    ? "timed out"
                            : r == -ECONNRESET ? "it exited"
                                               : strerror(-r));
        r = sidecar_check_attestation(sc->attestation, pol->digest, sc->kernel_stack, ret_error);
        if (r < 0)
                return r;
        log_debug("netd attested in %" PRIu64 " us", now_usec() - sc->started_usec);
        if (asprintf(&sc->id, "netd-%d", (int) sc->netd_pid) < 0) {
                sc->id = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* The flags the first half needs, from the declared policy (the derived
 * one only adds the host's addresses, denied). */
static int own_flags(const LaunchSpec *s, const NetPolicy *declared, bool *ret_ipv6, bool *ret_ipv6_uplink) {
        _cleanup_(netpolicy_done) NetPolicy np = {};
        if (!declared) {
                const char *why = NULL;
                int r = netpolicy_parse(s->netpolicy, strlen(s->netpolicy), &np, &why);
                if (r < 0)
                        return r;
                declared = &np;
        }
        *ret_ipv6 = declared->enabled[NET_IPV6];
        *ret_ipv6_uplink = *ret_ipv6 && netpolicy_family_permits_any(declared, NET_IPV6);
        return 0;
}

/* netd.key: "KEY UPLINK-PID IPV6 IPV6-UPLINK\n". */
typedef struct KeptKey {
        char key[KEEP_KEY_HEX + 1];
        int uplink, ipv6, ipv6_uplink;
} KeptKey;

/* Show the kept netd on fd its key (from netd.key in dfd) and take its
 * answer, its last attestation. */
static int keep_state(int dfd, int fd, KeptKey *k, json_t **ret_attestation) {
        _cleanup_close_ int kfd = openat(dfd, SIDECAR_KEEP_KEY, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (kfd < 0)
                return negative_errno();
        char line[160], tail;
        ssize_t n = read(kfd, line, sizeof(line) - 1);
        int r = -EBADMSG;
        if (n > 0) {
                line[n] = '\0';
                if (sscanf(line, "%64[0-9a-f] %d %d %d%c", k->key, &k->uplink, &k->ipv6, &k->ipv6_uplink, &tail) == 5 &&
                    strlen(k->key) == KEEP_KEY_HEX && tail == '\n' && k->uplink > 1 && k->ipv6 >= 0 && k->ipv6 <= 1 &&
                    k->ipv6_uplink >= 0 && k->ipv6_uplink <= 1)
                        r = 0;
        }
        explicit_bzero(line, sizeof(line));
        if (r >= 0) {
                char msg[6 + KEEP_KEY_HEX + 1];
                int m = snprintf(msg, sizeof(msg), "state %s", k->key);
                r = send(fd, msg, (size_t) m, MSG_NOSIGNAL) == m ? 0 : negative_errno();
                explicit_bzero(msg, sizeof(msg));
        }
        explicit_bzero(k->key, sizeof(k->key));
        json_t *att = NULL;
        if (r >= 0)
                r = read_reply(fd, 2000, &att);
        const char *type = r >= 0 ? json_string_value(json_object_get(att, "type")) : NULL;
        if (r >= 0 && (!type || !streq(type, "attestation")))
                r = -EPROTO;
        if (r < 0)
                json_decref(att);
        else
                *ret_attestation = att;
        return r;
}

/* Connect to netd.sock in dfd; when nobody listens there its files are
 * forgotten (-errno of the connect). */
static int keep_dial(int dfd, int *ret_fd) {
        struct sockaddr_un sa;
        socklen_t sl;
        int r = keep_addr(dfd, SIDECAR_KEEP_SOCKET, &sa, &sl);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (struct sockaddr *) &sa, sl) < 0) {
                r = negative_errno();
                (void) unlinkat(dfd, SIDECAR_KEEP_SOCKET, 0);
                (void) unlinkat(dfd, SIDECAR_KEEP_KEY, 0);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* An earlier run's netd, kept (issue 45): netd.key read, netd.sock
 * connected, the peer the user's and running our lazaret-netd, "state KEY"
 * answered with its last attestation. sidecar_start decides whether it
 * serves this run's policy. Nothing kept, or a dead one: -errno, and its
 * files are forgotten. */
static int kept_connect(const LaunchSpec *s, Sidecar *sc) {
        _cleanup_close_ int dfd = open(s->domain_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        _cleanup_close_ int fd = -EBADF;
        int r = keep_dial(dfd, &fd);
        if (r < 0)
                return r;
        /* The user's, running our lazaret-netd (not one an upgrade
         * replaced): ours, ended below when it does not serve. */
        struct ucred cr = {};
        socklen_t cl = sizeof(cr);
        char exe[64];
        struct stat a, b;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != getuid() || cr.pid <= 1)
                r = -EPERM;
        snprintf(exe, sizeof(exe), "/proc/%d/exe", (int) cr.pid);
        bool ours =
                r >= 0 && stat(exe, &a) >= 0 && stat(s->netd, &b) >= 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
        if (r >= 0 && !ours)
                r = -ESTALE;
        KeptKey k = {};
        json_t *att = NULL;
        if (r >= 0)
                r = keep_state(dfd, fd, &k, &att);
        if (r < 0) {
                json_decref(att);
                log_info("the network namespace kept from an earlier run cannot be taken (%s): starting a new one",
                         r == -ESTALE ? "lazaret-netd was replaced since" : strerror(-r));
                /* Ours, but of no use: ended (not waited for: an earlier
                 * coordinator's child); its files go. One an upgrade
                 * replaced that still knows the key is told to quit. */
                if (ours)
                        (void) kill(cr.pid, SIGKILL);
                else if (r == -ESTALE && keep_state(dfd, fd, &k, &att) >= 0) {
                        json_decref(att);
                        (void) send(fd, "quit", 4, MSG_NOSIGNAL);
                }
                (void) unlinkat(dfd, SIDECAR_KEEP_SOCKET, 0);
                (void) unlinkat(dfd, SIDECAR_KEEP_KEY, 0);
                return r;
        }
        const char *style = json_string_value(json_object_get(att, "routes_for"));
        sc->keep_dir = strdup(s->domain_dir);
        if (!sc->keep_dir) {
                json_decref(att);
                return -ENOMEM;
        }
        sc->own_namespace = sc->kept = sc->keepable = true;
        sc->ctl_fd = TAKE_FD(fd);
        sc->netd_pid = sc->conmon_pid = cr.pid;
        sc->uplink_pid = k.uplink;
        sc->attestation = att;
        sc->kernel_stack = style && streq(style, "kernel");
        sc->pre_ipv6 = k.ipv6;
        sc->pre_ipv6_uplink = k.ipv6_uplink;
        return 0;
}

int sidecar_end_kept(const char *domain_dir) {
        _cleanup_close_ int dfd = open(domain_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        _cleanup_close_ int fd = -EBADF;
        int r = keep_dial(dfd, &fd);
        if (r == -ENOENT || r == -ECONNREFUSED)
                return 0; /* nothing kept, or a dead one's files (forgotten) */
        if (r < 0)
                return r;
        KeptKey k = {};
        json_t *att = NULL;
        r = keep_state(dfd, fd, &k, &att);
        json_decref(att);
        if (r >= 0 && send(fd, "quit", 4, MSG_NOSIGNAL) != 4)
                r = negative_errno();
        if (r >= 0) {
                /* Its end closes the connection. */
                char b;
                if (wait_readable(fd, 5000) < 0 || recv(fd, &b, 1, MSG_DONTWAIT) != 0)
                        r = -ETIMEDOUT;
        }
        (void) unlinkat(dfd, SIDECAR_KEEP_SOCKET, 0);
        (void) unlinkat(dfd, SIDECAR_KEEP_KEY, 0);
        return r < 0 ? r : 1;
}

bool sidecar_prestart_kept(const LaunchSpec *s, Sidecar *sc) {
        if (!sidecar_own_namespace(s) || !s->netd || !s->netpolicy)
                return true;
        return kept_connect(s, sc) >= 0;
}

void sidecar_prestart(const LaunchSpec *s, const NetPolicy *declared, Sidecar *sc) {
        if (!sidecar_own_namespace(s) || !s->netd || !s->netpolicy || sc->kept)
                return;
        bool ipv6 = false, ipv6_uplink = false;
        _cleanup_free_ char *err = NULL;
        if (own_flags(s, declared, &ipv6, &ipv6_uplink) < 0 ||
            own_begin(s, ipv6, ipv6_uplink, !launch_gvisor_netstack(s), sc, &err) < 0) {
                /* The start proper tries again and says what fails. */
                log_debug("the network sidecar did not start early: %s", err ?: "?");
                sidecar_done(sc);
        }
}

int sidecar_start(const LaunchSpec *s, const PolicyInForce *pol, Sidecar *ret, char **ret_error) {
        _cleanup_(sidecar_done)
                Sidecar sc = { .ctl_fd = -EBADF, .uplink_exit_fd = -EBADF, .go_fd = -EBADF, .uplink_ready_fd = -EBADF };
        _cleanup_close_ int memfd = -EBADF, theirs = -EBADF;
        _cleanup_(exec_result_done) ExecResult res = {};
        _cleanup_free_ char *pidfile = NULL;
        int r;

        if (!s->netd)
                return fail(ret_error, -EINVAL, "the policy permits nothing; no sidecar is needed");
        if (!sidecar_own_namespace(s) && !s->sidecar_image)
                return fail(ret_error, -EINVAL, "the launch names no sidecar image");
        if (!pol->canonical)
                return fail(ret_error, -EINVAL, "no network policy is in force");
        bool ipv6 = pol->parsed.enabled[NET_IPV6];
        bool ipv6_uplink = ipv6 && netpolicy_family_permits_any(&pol->parsed, NET_IPV6);
        const NetAddr *resolvers = pol->parsed.resolvers;
        size_t n_resolvers = pol->parsed.n_resolvers;

        r = sidecar_name(s, &sc.name);
        if (r < 0)
                return r;
        /* The sandbox's traffic goes through this namespace's own stack:
         * one route per rule, not gVisor's cover (a quarter as many). */
        sc.kernel_stack = !launch_gvisor_netstack(s);
        if (sidecar_own_namespace(s)) {
                /* Kept from an earlier run (issue 45): taken when it has
                 * this policy, with the same flags (the probes run again
                 * all the same); else ended, and a new one started. */
                _cleanup_free_ char *why = NULL;
                if (ret->kept && ret->pre_ipv6 == ipv6 && ret->pre_ipv6_uplink == ipv6_uplink &&
                    sidecar_check_attestation(ret->attestation, pol->digest, sc.kernel_stack, &why) >= 0) {
                        free(ret->name);
                        ret->name = TAKE_PTR(sc.name);
                        if (asprintf(&ret->id, "netd-%d", (int) ret->netd_pid) < 0) {
                                ret->id = NULL;
                                return -ENOMEM;
                        }
                        log_info("the network namespace kept from an earlier run has this policy (netd %d): "
                                 "taken",
                                 (int) ret->netd_pid);
                        return 0;
                }
                if (ret->kept) {
                        log_info("the network namespace kept from an earlier run does not serve this one (%s): "
                                 "starting a new one",
                                 why ?: "its flags differ");
                        sidecar_done(ret);
                }
                /* Started early with the same flags: finish it; else
                 * start it now. */
                if (ret->own_namespace && ret->go_fd >= 0 && ret->pre_ipv6 == ipv6 &&
                    ret->pre_ipv6_uplink == ipv6_uplink && ret->kernel_stack == sc.kernel_stack) {
                        char *name = TAKE_PTR(sc.name);
                        sc = *ret;
                        *ret = (Sidecar){
                                .ctl_fd = -EBADF, .uplink_exit_fd = -EBADF, .go_fd = -EBADF, .uplink_ready_fd = -EBADF
                        };
                        free(sc.name);
                        sc.name = name;
                } else {
                        sidecar_done(ret);
                        r = own_begin(s, ipv6, ipv6_uplink, sc.kernel_stack, &sc, ret_error);
                        if (r < 0)
                                return r;
                }
                r = own_finish(pol, &sc, ret_error);
                if (r < 0)
                        return r;
                *ret = sc;
                sc = (Sidecar){
                        .ctl_fd = -EBADF, .uplink_exit_fd = -EBADF, .go_fd = -EBADF, .uplink_ready_fd = -EBADF
                };
                return 0;
        }
        if (asprintf(&pidfile, "%s/sidecar-conmon.pid", s->domain_dir) < 0)
                return -ENOMEM;
        (void) unlink(pidfile);

        /* Nothing is asked of Podman beforehand (each call costs tens of
         * milliseconds on a cold start): a missing image is built and a
         * leftover container of this name removed only when the run fails
         * for that reason, then it is tried once more. */
        for (int attempt = 0;; attempt++) {
                memfd = sealed_memfd(pol->canonical, strlen(pol->canonical));
                if (memfd < 0)
                        return fail(ret_error, memfd, "cannot make the policy memfd: %s", strerror(-memfd));
                int sp[2];
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                        return negative_errno();
                sc.ctl_fd = sp[0];
                theirs = sp[1];

                Argv a = {};
                argv_add(&a, "podman");
                argv_add(&a, "run");
                argv_add(&a, "--detach");
                argv_addf(&a, "--name=%s", sc.name);
                argv_add(&a, "--runtime=runc");
                argv_add(&a, "--pull=never");
                if (s->rootless)
                        argv_addf(&a, "--network=slirp4netns%s", ipv6 ? ":enable_ipv6=true" : "");
                else
                        argv_add(&a, "--network=bridge");
                /* netd changes routes and nothing else. */
                argv_add(&a, "--cap-drop=all");
                argv_add(&a, "--cap-add=NET_ADMIN");
                argv_add(&a, "--read-only");
                argv_add(&a, "--read-only-tmpfs=false");
                argv_add(&a, "--security-opt=no-new-privileges");
                argv_add(&a, "--preserve-fds=2");
                /* netd never forks and holds a handful of fds. Small explicit
                 * limits also keep runc clear of Podman's defaults, which are above
                 * this kind of host's hard limits (runc fails with EPERM then). */
                argv_add(&a, "--ulimit=nofile=64:64");
                argv_add(&a, "--ulimit=nproc=64:64");
                /* netd reports on its control socket; a log file and conmon's own
                 * cgroup only cost start-up time (about 30 and 20 ms, measured). */
                argv_add(&a, "--log-driver=none");
                argv_add(&a, "--cgroups=no-conmon");
                argv_addf(&a, "--conmon-pidfile=%s", pidfile);
                argv_addf(&a, "--label=io.lazaret.domain=%s", s->domain_hash);
                argv_add(&a, "--label=io.lazaret.role=network-sidecar");
                if (!ipv6) {
                        argv_add(&a, "--sysctl=net.ipv6.conf.all.disable_ipv6=1");
                        argv_add(&a, "--sysctl=net.ipv6.conf.default.disable_ipv6=1");
                } else if (s->rootless) {
                        /* No router advertisements: they would bring back the
                         * default route and the prefix route. */
                        argv_add(&a, "--sysctl=net.ipv6.conf.default.accept_ra=0");
                        argv_add(&a, "--sysctl=net.ipv6.conf.tap0.accept_ra=0");
                }
                /* The sandbox shares this namespace and its resolv.conf. */
                if (n_resolvers == 0)
                        argv_add(&a, "--dns=none");
                for (size_t i = 0; i < n_resolvers; i++) {
                        char addr[64];
                        netaddr_format(&resolvers[i], addr, sizeof(addr));
                        argv_addf(&a, "--dns=%s", addr);
                }
                argv_add(&a, "--");
                argv_add(&a, s->sidecar_image);
                if (sc.kernel_stack)
                        argv_add(&a, "--kernel-stack");
                if (ipv6_uplink && s->rootless) {
                        argv_add(&a, "--ipv6-uplink");
                        argv_add(&a, SLIRP_IPV6_ADDRESS "," SLIRP_IPV6_GATEWAY);
                }
                if (a.oom) {
                        argv_done(&a);
                        return -ENOMEM;
                }
                int fds[2] = { memfd, theirs };
                r = exec_capture_fds(s->podman, (const char *const *) a.v, fds, 2, PODMAN_TIMEOUT_USEC, &res);
                argv_done(&a);
                memfd = safe_close(memfd);
                theirs = safe_close(theirs);
                if (r < 0)
                        return r;
                if (exec_result_failed(&res)) {
                        _cleanup_free_ char *e = podman_error(&res);
                        bool no_image = e && (strstr(e, "image not known") || strstr(e, "no such image"));
                        bool in_use = e && strstr(e, "already in use");
                        remove_quietly(s, sc.name);
                        if (attempt == 0 && (no_image || in_use)) {
                                sc.ctl_fd = safe_close(sc.ctl_fd);
                                exec_result_done(&res);
                                res = (ExecResult){};
                                if (no_image) {
                                        log_info("building the network sidecar image %s", s->sidecar_image);
                                        if (build_sidecar_image(s->sidecar_image) < 0)
                                                return fail(
                                                        ret_error, -EIO,
                                                        "cannot build the network sidecar image %s; try 'lazaret image "
                                                        "build sidecar' and fix what it reports",
                                                        s->sidecar_image);
                                }
                                continue;
                        }
                        return fail(ret_error, -EIO, "cannot start the network sidecar: %s", e ?: "podman failed");
                }
                break;
        }
        sc.id = strndup(res.out, strcspn(res.out, "\r\n"));
        if (!sc.id)
                return -ENOMEM;

        r = read_reply(sc.ctl_fd, ATTEST_TIMEOUT_MS, &sc.attestation);
        if (r >= 0)
                r = sidecar_check_attestation(sc.attestation, pol->digest, sc.kernel_stack, ret_error);
        else
                r = fail(ret_error, r, "lazaret-netd sent no attestation: %s",
                         r == -ETIMEDOUT    ? "timed out"
                         : r == -ECONNRESET ? "it exited"
                                            : strerror(-r));
        if (r >= 0)
                r = read_pid(pidfile, &sc.conmon_pid);
        /* netd is conmon's child (conmon is the container's subreaper):
         * no podman inspect needed. */
        if (r >= 0)
                r = conmon_child(sc.conmon_pid, &sc.netd_pid);
        if (r < 0 && !*ret_error)
                r = fail(ret_error, r, "cannot find lazaret-netd's process in %s", sc.name);
        if (r < 0) {
                if (!*ret_error)
                        (void) fail(ret_error, r, "the network sidecar failed: %s", strerror(-r));
                remove_quietly(s, sc.name);
                return r;
        }
        *ret = sc;
        sc = (Sidecar){ .ctl_fd = -EBADF, .uplink_exit_fd = -EBADF, .go_fd = -EBADF, .uplink_ready_fd = -EBADF };
        return 0;
}

int sidecar_update(Sidecar *sc, const char *canonical, const char *digest, char **ret_error) {
        _cleanup_close_ int memfd = sealed_memfd(canonical, strlen(canonical));
        if (memfd < 0)
                return fail(ret_error, memfd, "cannot make the policy memfd: %s", strerror(-memfd));
        char cbuf[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = { (char *) "update", 6 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &memfd, sizeof(int));
        if (sendmsg(sc->ctl_fd, &mh, MSG_NOSIGNAL) < 0)
                return fail(ret_error, negative_errno(), "cannot reach lazaret-netd: %s", strerror(errno));
        json_t *a = NULL;
        int r = read_reply(sc->ctl_fd, ATTEST_TIMEOUT_MS, &a);
        if (r < 0)
                return fail(ret_error, r, "lazaret-netd did not answer the update: %s", strerror(-r));
        r = sidecar_check_attestation(a, digest, sc->kernel_stack, ret_error);
        if (r < 0) {
                json_decref(a);
                return r;
        }
        json_decref(sc->attestation);
        sc->attestation = a;
        return 0;
}

/* ---- probes ------------------------------------------------------------ */

static void add_addr(Argv *a, const char *opt, const NetAddr *addr) {
        char s[64];
        netaddr_format(addr, s, sizeof(s));
        argv_add(a, opt);
        argv_add(a, s);
}

/* runsc exec of the netd mounted in the sandbox, with capability cap
 * (NULL: none beyond the sandbox's own). */
static void netd_in_sandbox_argv(const LaunchSpec *s, const SandboxInfo *sandbox, const char *cap, Argv *a) {
        argv_add(a, "runsc");
        argv_addf(a, "--root=%s", sandbox->runsc_root);
        if (s->rootless)
                argv_add(a, "--ignore-cgroups");
        argv_add(a, "exec");
        if (cap) {
                argv_add(a, "--cap");
                argv_add(a, cap);
        }
        argv_add(a, sandbox->id);
        argv_add(a, "/run/lazaret/netd");
}

int sidecar_update_gvisor(const LaunchSpec *s, const Sidecar *sc, const SandboxInfo *sandbox, const char *canonical,
                          char **ret_error) {
        /* The policy travels as one argument (Linux takes 128 KiB). */
        if (strlen(canonical) > GVISOR_POLICY_ARG_MAX)
                return fail(ret_error, -E2BIG,
                            "the policy (%zu bytes) is too large to hand to gVisor's own network stack (at most "
                            "%u); run 'lazaret stop' and start again to apply it",
                            strlen(canonical), GVISOR_POLICY_ARG_MAX);
        Argv a = {};
        netd_in_sandbox_argv(s, sandbox, "CAP_NET_ADMIN", &a);
        argv_add(&a, "gvisor-routes");
        argv_add(&a, "--policy");
        argv_add(&a, canonical);
        json_t *up = json_object_get(sc->attestation, "uplinks");
        const char *fam;
        json_t *v;
        json_object_foreach(up, fam, v) {
                const char *gw = json_string_value(json_object_get(v, "gateway")),
                           *dev = json_string_value(json_object_get(v, "device"));
                if (gw && dev) {
                        argv_add(&a, "--uplink");
                        argv_addf(&a, "%s,%s", gw, dev);
                }
        }
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture(s->runsc, (const char *const *) a.v, PROBE_DEADLINE_USEC, &res);
        argv_done(&a);
        if (r < 0)
                return fail(ret_error, r, "cannot run lazaret-netd in the sandbox: %s", strerror(-r));
        json_t *o = res.out ? json_loads(res.out, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        bool ok = !exec_result_failed(&res) && json_is_true(json_object_get(o, "attested"));
        _cleanup_free_ char *detail = NULL;
        if (!ok)
                detail = strdup(json_string_value(json_object_get(o, "detail"))
                                        ?: (res.err && *res.err ? res.err : "lazaret-netd failed"));
        json_decref(o);
        if (detail)
                detail[strcspn(detail, "\n")] = '\0';
        if (!ok)
                return fail(ret_error, -EPROTO, "cannot give gVisor's own network stack the new routes: %s",
                            detail ?: "out of memory");
        return 0;
}

/* What to probe: a denied address in every deny rule (and in a family
 * that denies by default), an address in some permitted routes, the
 * configured targets, every resolver. */
static void probe_args(const LaunchSpec *s, const NetPolicy *p, Argv *a) {
        size_t n_denied = 0;
        for (size_t i = 0; i < p->n_rules && n_denied < PROBE_DENIED_MAX; i++) {
                NetAddr addr;
                if (p->rules[i].action == NET_DENY && netpolicy_denied_probe_address(p, &p->rules[i], &addr)) {
                        add_addr(a, "--deny", &addr);
                        n_denied++;
                }
        }
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                if (!p->enabled[f] || p->default_action[f] != NET_DENY)
                        continue;
                /* A documentation address when the policy denies it (the
                 * space's first address, 0.0.0.0 or ::, means "this
                 * host" to connect()), else the first denied one. */
                NetAddr addr;
                if (netaddr_parse(f == NET_IPV6 ? "2001:db8::1" : "192.0.2.1", &addr) < 0 ||
                    netpolicy_verdict(p, &addr) != NET_DENY) {
                        NetRule all = { .prefix = { .family = f == NET_IPV6 ? AF_INET6 : AF_INET },
                                        .action = NET_DENY };
                        if (!netpolicy_denied_probe_address(p, &all, &addr))
                                continue;
                }
                add_addr(a, "--deny", &addr);
        }
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                NetRoute *routes = NULL;
                size_t n = 0, used = 0;
                if (netpolicy_permitted_routes(p, f, PROBE_ROUTES_MAX, &routes, &n) < 0) {
                        a->oom = true;
                        return;
                }
                bool dns_checked = false;
                for (size_t i = 0; i < n && used < PROBE_ROUTES_MAX; i++) {
                        if (!routes[i].permit)
                                continue;
                        NetAddr addr = { .family = routes[i].prefix.family };
                        memcpy(addr.addr, routes[i].prefix.addr, sizeof(addr.addr));
                        /* The middle of the route: the network address
                         * (0.0.0.0, ::) may be special. */
                        unsigned bits = addr.family == AF_INET6 ? 128 : 32, b = routes[i].prefix.prefixlen;
                        if (b < bits)
                                addr.addr[b / 8] |= (uint8_t) (0x80 >> (b % 8));
                        add_addr(a, "--route", &addr);
                        used++;
                        /* Port 53 reaches the resolvers only: check it at
                         * one permitted address that is none of them. The
                         * port rules live in the namespace's kernel, which
                         * gVisor's own stack does not consult. */
                        bool resolver = false;
                        for (size_t k = 0; k < p->n_resolvers; k++)
                                resolver |= p->resolvers[k].family == addr.family &&
                                            memcmp(p->resolvers[k].addr, addr.addr, 16) == 0;
                        if (!dns_checked && !resolver && !launch_gvisor_netstack(s)) {
                                add_addr(a, "--dns-blocked", &addr);
                                dns_checked = true;
                        }
                }
                free(routes);
        }
        for (char **t = s->probe_targets; t && *t; t++) {
                argv_add(a, "--permit");
                argv_add(a, *t);
        }
        for (size_t i = 0; i < p->n_resolvers; i++)
                add_addr(a, "--dns", &p->resolvers[i]);
        argv_add(a, "--dns-name");
        argv_add(a, s->probe_dns_name);
        argv_add(a, "--timeout-ms");
        argv_addf(a, "%d", PROBE_TIMEOUT_MS);
}

/* Run argv (netd probe) in target's network namespace, joining the user
 * namespace that owns it first (rootless Podman's). Captures stdout. */
static int run_in_netns(pid_t target, char *const argv[], char **ret_out, int *ret_status) {
        _cleanup_close_ int userns = -EBADF, netns = -EBADF, out_r = -EBADF, out_w = -EBADF;
        /* The owner of its namespace: Podman's rootless user namespace,
         * or (rootful) ours. */
        int q = spawn_netns_of(target, &netns, &userns);
        if (q < 0)
                return q;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        out_r = p[0];
        out_w = p[1];
        _cleanup_close_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                return negative_errno();
        SpawnFd fds[] = { { devnull, 0 }, { out_w, 1 }, { devnull, 2 } };
        SpawnSpec sp = SPAWN_SPEC_INIT(argv[0], argv);
        sp.userns_fd = userns;
        sp.netns_fd = netns;
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        pid_t pid;
        int r = spawn(&sp, &pid);
        if (r < 0)
                return r;
        out_w = safe_close(out_w);
        StrBuf out = STRBUF_INIT;
        uint64_t deadline = now_usec() + PROBE_DEADLINE_USEC;
        for (;;) {
                uint64_t now = now_usec();
                if (now >= deadline) {
                        (void) kill(pid, SIGKILL);
                        break;
                }
                struct pollfd pf = { out_r, POLLIN, 0 };
                int k = poll(&pf, 1, (int) ((deadline - now) / 1000) + 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        continue;
                char buf[4096];
                ssize_t n = read(out_r, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                if (out.len < 1024 * 1024)
                        strbuf_putn(&out, buf, (size_t) n);
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        *ret_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        *ret_out = strbuf_steal(&out);
        return *ret_out ? 0 : -ENOMEM;
}

int sidecar_probe(const LaunchSpec *s, const Sidecar *sc, const SandboxInfo *sandbox, const NetPolicy *p,
                  json_t **ret_probe, char **ret_error) {
        Argv a = {};
        _cleanup_free_ char *out = NULL;
        int status = 0, r;
        bool in_sandbox = launch_gvisor_netstack(s);

        if (in_sandbox) {
                /* gVisor's netstack has its own copy of the routes: ask
                 * from inside, with the netd mounted there. */
                if (!sandbox)
                        return fail(ret_error, -EINVAL, "the sandbox must run before it can be probed");
                netd_in_sandbox_argv(s, sandbox, NULL, &a);
        } else
                argv_add(&a, s->netd);
        argv_add(&a, "probe");
        probe_args(s, p, &a);
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        if (in_sandbox) {
                _cleanup_(exec_result_done) ExecResult res = {};
                r = exec_capture(s->runsc, (const char *const *) a.v, PROBE_DEADLINE_USEC, &res);
                if (r >= 0) {
                        status = res.spawn_error < 0 || res.timed_out ? 125 : res.status;
                        out = TAKE_PTR(res.out);
                        if (!out)
                                out = strdup("");
                }
        } else
                r = run_in_netns(sc->netd_pid, a.v, &out, &status);
        argv_done(&a);
        if (r < 0)
                return fail(ret_error, r, "cannot run the network probe: %s", strerror(-r));

        json_t *denied = json_array(), *permitted = json_array(), *dns = json_array();
        const char *bad = NULL;
        _cleanup_free_ char *bad_text = NULL;
        for (char *line = out; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                json_t *o = json_loads(line, 0, NULL);
                const char *kind = json_string_value(json_object_get(o, "kind"));
                if (kind && streq(kind, "denied")) {
                        json_array_append(denied, o);
                        if (!bad && !json_is_true(json_object_get(o, "unreachable")))
                                bad = "denied";
                } else if (kind && streq(kind, "permitted")) {
                        json_array_append(permitted, o);
                        if (!bad && !json_is_true(json_object_get(o, "reachable")))
                                bad = "permitted";
                } else if (kind && streq(kind, "dns")) {
                        json_array_append(dns, o);
                        if (!bad && !json_is_true(json_object_get(o, "answered")))
                                bad = "dns";
                }
                if (bad && !bad_text) {
                        const char *dst = json_string_value(json_object_get(o, "destination"))
                                                  ?: json_string_value(json_object_get(o, "resolver")) ?: "?";
                        const char *detail = json_string_value(json_object_get(o, "detail")) ?: "?";
                        if (asprintf(&bad_text,
                                     streq(bad, "denied")      ? "denied destination %s is reachable (%s)"
                                     : streq(bad, "permitted") ? "permitted destination %s is not reachable (%s)"
                                                               : "resolver %s did not answer (%s)",
                                     dst, detail) < 0)
                                bad_text = NULL;
                }
                json_decref(o);
                line = nl ? nl + 1 : NULL;
        }
        json_t *probe = json_pack("{s:s, s:o, s:o, s:o, s:o?}", "method",
                                  in_sandbox ? "inside the sandbox (runsc exec)" : "sidecar namespace", "denied",
                                  denied, "permitted", permitted, "dns", dns, "enforcement_namespace",
                                  json_incref(json_object_get(sc->attestation, "enforcement_namespace")));
        if (!probe)
                return -ENOMEM;
        *ret_probe = probe;
        if (bad_text)
                return fail(ret_error, -EPROTO, "network readiness check failed: %s", bad_text);
        if (status != 0)
                return fail(ret_error, -EPROTO, "network readiness check failed: the probe exited with status %d",
                            status);
        return 0;
}

int sidecar_readiness_fingerprint(json_t *identity, char ret[65]) {
        char *text = json_dumps(identity, JSON_COMPACT | JSON_SORT_KEYS);
        if (!text)
                return -ENOMEM;
        sha256_domain_hex(READINESS_DOMAIN, text, strlen(text), ret);
        free(text);
        return 0;
}
