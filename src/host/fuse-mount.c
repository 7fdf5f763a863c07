/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "fuse-mount.h"
#include "podman.h"
#include "string-util.h"

#define STOP_USEC (UINT64_C(5) * 1000000)

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
