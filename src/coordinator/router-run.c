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

void router_run_done(RouterRun *r) {
        free(r->mountpoint);
        free(r->isolated);
        *r = (RouterRun){};
}

int router_start(const LaunchSpec *s, const char *worktree, int events_fd, RouterRun *ret, char **ret_error) {
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
        argv = calloc(16 + 2 * n_patterns, sizeof(char *));
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
        /* What the leader checked, or nothing is served (launch.h). */
        if (s->branch ? s->git_dir_id : s->workspace_id) {
                argv[k++] = (char *) "--expect-id";
                argv[k++] = s->branch ? s->git_dir_id : s->workspace_id;
        }
        argv[k++] = (char *) "--isolated";
        argv[k++] = rr.isolated;
        if (worktree) {
                argv[k++] = (char *) "--worktree";
                argv[k++] = (char *) worktree;
        }
        if (events_fd >= 0) {
                argv[k++] = (char *) "--events-fd";
                argv[k++] = (char *) "3";
        }
        argv[k++] = rr.mountpoint;
        argv[k] = NULL;
        SpawnFd fds[] = { { events_fd, 3 } };
        r = podman_ns_spawn_fds(s, router, argv, fds, events_fd >= 0 ? 1 : 0, &rr.pid);
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
                        if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_NOT_PINNED)
                                /* Its --expect-id refused the root. */
                                strbuf_printf(&b,
                                              "%s is no longer the directory lazaret checked: it was replaced or "
                                              "moved while lazaret started (a symbolic link, another directory or "
                                              "nothing in its place); nothing was started, run it again",
                                              s->branch ? s->git_dir : s->workspace);
                        else
                                strbuf_printf(&b,
                                              "the git router exited during start (status %d); see the coordinator log",
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

void router_stop(const LaunchSpec *s, RouterRun *r) {
        fuse_daemon_stop(s, &r->pid, r->mountpoint);
}
