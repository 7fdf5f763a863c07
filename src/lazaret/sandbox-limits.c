/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "sandbox-limits.h"
#include "macro.h"

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
        char path[64];
        _cleanup_free_ char *text = NULL;
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) conmon, (int) conmon);
        int r = read_file_capped(path, 4096, &text, NULL);
        if (r < 0)
                return r;
        for (char *p = text, *end; *p; p = end) {
                long v = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (v > 0 && process_is((pid_t) v, "runsc-sandbox")) {
                        *ret = (pid_t) v;
                        return 0;
                }
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
