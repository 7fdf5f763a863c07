/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "path-util.h"
#include "podman.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"

#define PODMAN_TIMEOUT_USEC (UINT64_C(120) * 1000000)

/* Podman's last error line, for one-line messages. */
char *podman_error(const ExecResult *r) {
        StrBuf b = STRBUF_INIT;
        if (r->spawn_error < 0)
                strbuf_printf(&b, "cannot run podman: %s", strerror(-r->spawn_error));
        else if (r->timed_out)
                strbuf_puts(&b, "podman did not finish in time");
        else {
                const char *e = r->err && *r->err ? r->err : r->out ? r->out : "";
                const char *best = NULL;
                size_t best_len = 0;
                for (const char *l = e; *l;) {
                        size_t n = strcspn(l, "\n");
                        if (n > 0) {
                                best = l;
                                best_len = n;
                        }
                        l += n;
                        if (*l)
                                l++;
                }
                strbuf_printf(&b, "podman exited with status %d%s%.*s", r->status, best ? ": " : "",
                              (int) (best_len > 400 ? 400 : best_len), best ? best : "");
        }
        return strbuf_steal(&b);
}

int podman_pause_pid_find(pid_t *ret) {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        StrBuf cand[2] = { STRBUF_INIT, STRBUF_INIT };
        size_t n = 0;
        if (xdg && path_is_absolute(xdg))
                strbuf_printf(&cand[n++], "%s/libpod/tmp/pause.pid", xdg);
        strbuf_printf(&cand[n++], "/tmp/podman-run-%u/libpod/tmp/pause.pid", (unsigned) geteuid());
        pid_t found = 0;
        for (size_t i = 0; i < n && !found; i++) {
                _cleanup_free_ char *text = NULL;
                if (strbuf_str(&cand[i]) && read_file_capped(strbuf_str(&cand[i]), 64, &text, NULL) == 0) {
                        long p = strtol(text, NULL, 10);
                        if (p > 0 && kill((pid_t) p, 0) == 0)
                                found = (pid_t) p;
                }
        }
        strbuf_done(&cand[0]);
        strbuf_done(&cand[1]);
        if (!found)
                return -ESRCH;
        *ret = found;
        return 0;
}

/* Podman's rootless pause process, which holds its user and mount
 * namespaces. Started with `podman unshare true` when missing. */
int podman_pause_pid(const LaunchSpec *s, pid_t *ret) {
        for (int attempt = 0; attempt < 2; attempt++) {
                if (podman_pause_pid_find(ret) == 0)
                        return 0;
                _cleanup_(exec_result_done) ExecResult r = {};
                int k = exec_capture(s->podman, (const char *const[]){ "podman", "unshare", "true", NULL },
                                     UINT64_C(60) * 1000000, &r);
                if (k < 0)
                        return k;
        }
        return -ESRCH;
}

int podman_ns_fd(const LaunchSpec *s, const char *ns, int *ret) {
        *ret = -EBADF;
        /* Rootful Podman and the native backend (whose sandbox binds what
         * the host's mount namespace holds) use the host's. */
        if (!s->rootless || s->backend == BACKEND_NATIVE)
                return 0;
        pid_t pp;
        int r = podman_pause_pid(s, &pp);
        if (r < 0)
                return r;
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int) pp, ns);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        *ret = fd;
        return 0;
}

int podman_ns_spawn(const LaunchSpec *s, const char *path, char *const argv[], pid_t *ret) {
        return podman_ns_spawn_out(s, path, argv, -EBADF, ret);
}

int podman_ns_spawn_out(const LaunchSpec *s, const char *path, char *const argv[], int out_fd, pid_t *ret) {
        SpawnFd out[] = { { out_fd, 1 } };
        return podman_ns_spawn_fds(s, path, argv, out, out_fd >= 0 ? 1 : 0, ret);
}

int podman_ns_spawn_fds(const LaunchSpec *s, const char *path, char *const argv[], const SpawnFd *fds, size_t n,
                        pid_t *ret) {
        _cleanup_close_ int userns = -EBADF, mntns = -EBADF;
        int r = podman_ns_fd(s, "user", &userns);
        if (r >= 0)
                r = podman_ns_fd(s, "mnt", &mntns);
        if (r < 0)
                return r;
        /* These daemons parse what the sandbox drives: they get stdin
         * (/dev/null), stdout and stderr, never one of our descriptors
         * (the Domain Store's data.mdb), and default signal dispositions
         * (not our ignored SIGPIPE). */
        SpawnSpec sp = SPAWN_SPEC_INIT(path, argv);
        sp.userns_fd = userns;
        sp.mntns_fd = mntns;
        sp.cwd = "/";
        sp.fds = fds;
        sp.n_fds = n;
        return spawn(&sp, ret);
}

/* Podman refuses to remove a container caught between two states, its
 * runtime saying it stopped while Podman's own record still says it runs
 * (seen when the `podman run` that made it was cut short, as a stop during
 * a start does): "could not be stopped: sending SIGKILL ...: container
 * state improper: stopped". Its record catches up within moments, so such a
 * refusal is tried again, 250 ms apart, for at most 2 s. */
#define REMOVE_TRIES      9
#define REMOVE_RETRY_USEC (250 * 1000)

int container_remove(const LaunchSpec *s, const char *name, char **ret_error) {
        const char *argv[] = { "podman", "rm", "--force", "--time=0", "--ignore", name, NULL };
        for (int attempt = 1;; attempt++) {
                _cleanup_(exec_result_done) ExecResult res = {};
                int r = exec_capture(s->podman, argv, PODMAN_TIMEOUT_USEC, &res);
                if (r < 0)
                        return r;
                if (!exec_result_failed(&res))
                        return 0;
                char *e = podman_error(&res);
                if (attempt < REMOVE_TRIES && e && strstr(e, "container state improper")) {
                        free(e);
                        (void) usleep(REMOVE_RETRY_USEC);
                        continue;
                }
                *ret_error = e;
                return -EIO;
        }
}
