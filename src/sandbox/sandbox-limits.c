/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "macro.h"
#include "proc-util.h"
#include "sandbox-limits.h"

#define MEMORY_FILE_NAME "/memfd:runsc-memory"

/* argv[0] of pid is name. */
static bool process_is(pid_t pid, const char *name) {
        char path[64];
        _cleanup_free_ char *cmd = NULL;
        size_t len = 0;
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int) pid);
        if (read_file_capped(path, 4096, &cmd, &len) < 0 || len == 0)
                return false;
        return strcmp(cmd, name) == 0;
}

static int find_sandbox(pid_t conmon, pid_t *ret) {
        _cleanup_free_ pid_t *kids = NULL;
        size_t n = 0;
        int r = proc_children(conmon, conmon, &kids, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (process_is(kids[i], "runsc-sandbox")) {
                        *ret = kids[i];
                        return 0;
                }
        return -ESRCH;
}

int limits_memory_open(pid_t conmon_pid, int *ret_fd) {
        pid_t pid;
        int r = find_sandbox(conmon_pid, &pid);
        if (r < 0)
                return r;
        char dir[64];
        snprintf(dir, sizeof(dir), "/proc/%d/fd", (int) pid);
        DIR *d = opendir(dir);
        if (!d)
                return negative_errno();
        struct dirent *de;
        r = -ESRCH;
        while (r == -ESRCH && (de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char link[64 + sizeof(de->d_name)], target[256];
                snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
                ssize_t n = readlink(link, target, sizeof(target) - 1);
                if (n <= 0)
                        continue;
                target[n] = '\0';
                if (strncmp(target, MEMORY_FILE_NAME, strlen(MEMORY_FILE_NAME)) != 0)
                        continue;
                int fd = open(link, O_RDONLY | O_CLOEXEC);
                r = fd < 0 ? negative_errno() : 0;
                if (fd >= 0)
                        *ret_fd = fd;
        }
        closedir(d);
        return r;
}

int limits_memory_used(int fd, uint64_t *ret_bytes) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        *ret_bytes = (uint64_t) st.st_blocks * 512;
        return 0;
}

/* Set affinity and nice on every thread of pid, then recurse into its
 * children. */
static int cpu_apply_tree(pid_t pid, const cpu_set_t *set, int nice, unsigned depth) {
        char dir[64];
        int n = 0;
        if (depth > 8)
                return 0;
        snprintf(dir, sizeof(dir), "/proc/%d/task", (int) pid);
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : negative_errno();
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                pid_t tid = (pid_t) strtol(de->d_name, NULL, 10);
                if (tid <= 0)
                        continue;
                /* A thread that ended meanwhile is no failure. */
                if (sched_setaffinity(tid, sizeof(*set), set) < 0 && errno != ESRCH) {
                        int r = negative_errno();
                        closedir(d);
                        return r;
                }
                if (setpriority(PRIO_PROCESS, (id_t) tid, nice) < 0 && errno != ESRCH) {
                        int r = negative_errno();
                        closedir(d);
                        return r;
                }
                n++;
                _cleanup_free_ pid_t *kids = NULL;
                size_t n_kids = 0;
                if (proc_children(pid, tid, &kids, &n_kids) < 0)
                        continue;
                for (size_t i = 0; i < n_kids; i++) {
                        int k = cpu_apply_tree(kids[i], set, nice, depth + 1);
                        if (k < 0) {
                                closedir(d);
                                return k;
                        }
                        n += k;
                }
        }
        closedir(d);
        return n;
}

int limits_cpu_apply(pid_t conmon_pid, bool with_root, unsigned n_cpus, int nice, char *ret_cpus, size_t size) {
        cpu_set_t have, set;
        if (sched_getaffinity(0, sizeof(have), &have) < 0)
                return negative_errno();
        CPU_ZERO(&set);
        unsigned total = (unsigned) CPU_COUNT(&have), taken = 0;
        if (n_cpus == 0 || n_cpus > total)
                n_cpus = total;
        /* The last ones: CPU 0 stays freest for the host. */
        for (int c = CPU_SETSIZE - 1; c >= 0 && taken < n_cpus; c--)
                if (CPU_ISSET(c, &have)) {
                        CPU_SET(c, &set);
                        taken++;
                }
        size_t off = 0;
        ret_cpus[0] = '\0';
        for (int c = 0; c < CPU_SETSIZE && off + 8 < size; c++)
                if (CPU_ISSET(c, &set))
                        off += (size_t) snprintf(ret_cpus + off, size - off, "%s%d", off ? "," : "", c);
        /* No process yet (the native backend's FS-ONLY mode): the set,
         * for each session's. */
        if (conmon_pid <= 0)
                return 1;
        if (with_root)
                return cpu_apply_tree(conmon_pid, &set, nice, 0);
        /* conmon itself stays as it is; what runs under it does not. */
        _cleanup_free_ pid_t *kids = NULL;
        size_t n_kids = 0;
        int r = proc_children(conmon_pid, conmon_pid, &kids, &n_kids);
        if (r < 0)
                return r;
        int n = 0;
        /* Twice: a thread made while the first pass ran is caught by the
         * second. */
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < n_kids; i++) {
                        int k = cpu_apply_tree(kids[i], &set, nice, 0);
                        if (k < 0)
                                return k;
                        if (pass == 1)
                                n += k;
                }
        return n;
}
