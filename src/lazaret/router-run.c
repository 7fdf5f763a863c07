/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "path-util.h"
#include "router-run.h"
#include "runtime-dir.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"

#define READY_USEC (UINT64_C(5) * 1000000)
#define STOP_USEC  (UINT64_C(5) * 1000000)

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

/* fork + (rootless) join Podman's namespaces + exec. Only async-signal-safe
 * calls between fork and exec. */
int podman_ns_spawn(const LaunchSpec *s, const char *path, char *const argv[], pid_t *ret) {
        return podman_ns_spawn_out(s, path, argv, -EBADF, ret);
}

int podman_ns_spawn_out(const LaunchSpec *s, const char *path, char *const argv[], int out_fd, pid_t *ret) {
        _cleanup_close_ int userns = -EBADF, mntns = -EBADF;
        if (s->rootless) {
                pid_t pp;
                int r = podman_pause_pid(s, &pp);
                if (r < 0)
                        return r;
                char p[64];
                snprintf(p, sizeof(p), "/proc/%d/ns/user", (int) pp);
                userns = open(p, O_RDONLY | O_CLOEXEC);
                snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int) pp);
                mntns = open(p, O_RDONLY | O_CLOEXEC);
                if (userns < 0 || mntns < 0)
                        return negative_errno();
        }
        /* These daemons parse what the sandbox drives: they get stdin
         * (/dev/null), stdout and stderr, never one of our descriptors
         * (the Domain Store's data.mdb), and default signal dispositions
         * (not our ignored SIGPIPE). */
        SpawnFd out[] = { { out_fd, 1 } };
        SpawnSpec sp = SPAWN_SPEC_INIT(path, argv);
        sp.userns_fd = userns;
        sp.mntns_fd = mntns;
        sp.cwd = "/";
        sp.fds = out;
        sp.n_fds = out_fd >= 0 ? 1 : 0;
        return spawn(&sp, ret);
}

int fuse_mount_id(pid_t pid, const char *mountpoint, int *ret_id) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/mountinfo", (int) pid);
        _cleanup_free_ char *text = NULL;
        int r = read_file_capped(p, 16u * 1024u * 1024u, &text, NULL);
        if (r < 0)
                return r;
        for (char *line = text; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                int id = 0, parent = 0;
                char mp[PATH_MAX + 1];
                /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ..." */
                if (sscanf(line, "%d %d %*s %*s %4096s", &id, &parent, mp) == 3 && streq(mp, mountpoint) &&
                    strstr(line, " - fuse")) {
                        *ret_id = id;
                        return 0;
                }
                line = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

void router_run_done(RouterRun *r) {
        free(r->mountpoint);
        free(r->isolated);
        *r = (RouterRun){};
}

int router_start(const LaunchSpec *s, const char *worktree, RouterRun *ret, char **ret_error) {
        RouterRun rr = {};
        _cleanup_free_ char **argv = NULL;
        const char *why = NULL;
        char self[PATH_MAX];
        StrBuf b = STRBUF_INIT;

        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n < 0)
                return negative_errno();
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (!slash)
                return -EINVAL;
        *slash = '\0';
        _cleanup_free_ char *router = path_join(self, "lazaret-gitrouter");
        rr.mountpoint = path_join(s->domain_dir, "git-mnt");
        rr.isolated = path_join(s->domain_dir, "git-isolated");
        if (!router || !rr.mountpoint || !rr.isolated) {
                router_run_done(&rr);
                return -ENOMEM;
        }
        int r = access(router, X_OK) < 0 ? -ENOENT : 0;
        if (r < 0) {
                strbuf_printf(&b, "%s is missing: lazaret-gitrouter must be installed next to lazaret", router);
                goto fail;
        }
        if ((r = private_dir(rr.mountpoint, &why)) < 0 || (r = private_dir(rr.isolated, &why)) < 0) {
                strbuf_printf(&b, "cannot prepare %s: %s", rr.mountpoint, why ? why : strerror(-r));
                goto fail;
        }

        size_t n_patterns = 0;
        for (char **p = s->protect; p && *p; p++)
                n_patterns++;
        for (char **p = s->mask; p && *p; p++)
                n_patterns++;
        argv = calloc(12 + 2 * n_patterns, sizeof(char *));
        if (!argv) {
                r = -ENOMEM;
                goto fail;
        }
        size_t k = 0;
        argv[k++] = (char *) "lazaret-gitrouter";
        if (s->branch) {
                argv[k++] = (char *) "--host-git";
                argv[k++] = s->git_dir;
        } else {
                /* Direct mode: the whole working tree, its protected and
                 * masked names, and its .git when it is a repository. */
                argv[k++] = (char *) "--workspace";
                argv[k++] = s->workspace;
                if (s->git_dir)
                        argv[k++] = (char *) "--git";
                for (char **p = s->protect; p && *p; p++) {
                        argv[k++] = (char *) "--protect";
                        argv[k++] = *p;
                }
                for (char **p = s->mask; p && *p; p++) {
                        argv[k++] = (char *) "--mask";
                        argv[k++] = *p;
                }
        }
        argv[k++] = (char *) "--isolated";
        argv[k++] = rr.isolated;
        if (worktree) {
                argv[k++] = (char *) "--worktree";
                argv[k++] = (char *) worktree;
        }
        argv[k++] = rr.mountpoint;
        argv[k] = NULL;
        r = podman_ns_spawn(s, router, argv, &rr.pid);
        if (r < 0) {
                strbuf_printf(&b, "cannot start the git router: %s", strerror(-r));
                goto fail;
        }
        (void) process_identity_of(rr.pid, &rr.ident);

        uint64_t deadline = now_usec() + READY_USEC;
        for (;;) {
                int st;
                if (waitpid(rr.pid, &st, WNOHANG) == rr.pid) {
                        rr.pid = 0;
                        strbuf_printf(&b, "the git router exited during start (status %d); see the coordinator log",
                                      WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
                        r = -EIO;
                        goto fail;
                }
                if (fuse_mount_id(rr.pid, rr.mountpoint, &rr.mount_id) == 0)
                        break;
                if (now_usec() >= deadline) {
                        strbuf_printf(&b, "the git router did not mount %s within 5 s", rr.mountpoint);
                        r = -ETIMEDOUT;
                        goto fail;
                }
                usleep(5000);
        }
        *ret = rr;
        return 0;

fail:
        router_stop(s, &rr);
        *ret_error = strbuf_steal(&b);
        router_run_done(&rr);
        return r < 0 ? r : -EIO;
}

void fuse_mount_detach(const LaunchSpec *s, const char *mountpoint) {
        _cleanup_free_ char *fusermount = NULL;
        const char *search = getenv("PATH");
        if (exec_find_program(search && *search ? search : "/usr/bin:/bin", "fusermount3", &fusermount) < 0)
                return;
        char *argv[] = {
                (char *) "fusermount3", (char *) "-u", (char *) "-z", (char *) "-q", (char *) mountpoint, NULL
        };
        pid_t pid;
        if (podman_ns_spawn(s, fusermount, argv, &pid) < 0)
                return;
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
}

void fuse_daemon_stop(const LaunchSpec *s, pid_t *pid, const char *mountpoint) {
        if (*pid > 0) {
                (void) kill(*pid, SIGTERM);
                uint64_t deadline = now_usec() + STOP_USEC;
                int st;
                for (;;) {
                        pid_t w = waitpid(*pid, &st, WNOHANG);
                        if (w == *pid || (w < 0 && errno == ECHILD))
                                break;
                        if (now_usec() >= deadline) {
                                (void) kill(*pid, SIGKILL);
                                (void) waitpid(*pid, &st, 0);
                                break;
                        }
                        usleep(5000);
                }
                *pid = 0;
        }
        /* A daemon killed hard leaves its mount behind (ENOTCONN). */
        if (mountpoint)
                fuse_mount_detach(s, mountpoint);
}

void router_stop(const LaunchSpec *s, RouterRun *r) {
        fuse_daemon_stop(s, &r->pid, r->mountpoint);
}
