/* SPDX-License-Identifier: MIT */
#pragma once

/* The one way Lazaret starts a program (issue 17). The child gets exactly
 * the descriptors listed (stdin is /dev/null unless one is listed for it;
 * stdout and stderr are ours unless listed), an empty signal mask and
 * every signal at its default disposition, and, when asked, Podman's user
 * and mount namespaces, a working directory, a session or process group
 * of its own, a controlling terminal, or no parent at all (detach: a
 * double fork). A failure in the child before exec (a namespace it cannot
 * join, a program that is not there) comes back as the call's -errno
 * through a close-on-exec pipe, so the caller never mistakes it for the
 * program's own exit status. The child runs in the caller's memory until
 * its exec (CLONE_VM | CLONE_VFORK, as posix_spawn(3)): no copy of the
 * caller's page tables. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct SpawnFd {
        int from; /* ours */
        int to; /* the child's */
} SpawnFd;

typedef struct SpawnSpec {
        const char *path;
        char *const *argv;
        char *const *envp; /* NULL: our environment */
        const SpawnFd *fds;
        size_t n_fds;
        int userns_fd, mntns_fd, netns_fd; /* joined first (in this order) when >= 0 */
        const char *cwd; /* NULL: unchanged */
        int cwd_fd; /* >= 0: fchdir to it (after cwd) */
        bool new_session; /* setsid() */
        bool controlling_tty; /* fd 0 becomes the controlling terminal (needs new_session) */
        bool new_pgroup; /* setpgid(0, 0) */
        bool detach; /* not our child: reparented at once */
        bool no_wait; /* return before its exec: a failure before it is exit status 127 (not with detach) */
        /* SIGKILL when the thread that started it ends (the parent-death
         * signal; not with detach): a helper the caller waits for must
         * not outlive a caller that was killed. */
        bool die_with_parent;
        pid_t parent_pid; /* set by spawn() */
        /* Called in the child last, right before its execve (descriptors,
         * signals and namespaces in place): only system calls, nothing
         * allocated (the child may share our memory); a -errno fails the
         * spawn with it. */
        int (*before_exec)(void *userdata);
        void *before_exec_data;
} SpawnSpec;

/* SPAWN_SPEC_INIT(path, argv): argv may be a compound literal (its commas
 * are the variadic part). */
#define SPAWN_SPEC_INIT(p, ...)                                                                                        \
        ((SpawnSpec){                                                                                                  \
                .path = (p), .argv = (__VA_ARGS__), .userns_fd = -1, .mntns_fd = -1, .netns_fd = -1, .cwd_fd = -1 })

/* Start it. *ret_pid is the child (0 when detached; ret_pid may be NULL
 * then). Returns 0, or -errno: the fork's, or the child's before exec
 * (unless no_wait: spawn() waits for the exec, which is slow for a large
 * program on a busy machine, and several can start at once without). */
int spawn(const SpawnSpec *s, pid_t *ret_pid);

/* Wait for the child pid: its exit status (128 + the signal that ended
 * it), or -errno. */
int spawn_wait(pid_t pid);

/* The network namespace of process pid (its /proc/PID/ns/net) in
 * *ret_netns, and the user namespace that owns it in *ret_userns, which a
 * spawn must enter first to enter that one (rootless Podman's, for its
 * containers'); *ret_userns is -EBADF when that is ours already. Both
 * close-on-exec. Returns 0 or -errno. */
int spawn_netns_of(pid_t pid, int *ret_netns, int *ret_userns);
