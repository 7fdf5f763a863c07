/* SPDX-License-Identifier: MIT */
/* lazaret-init --fsmonitor VERSION TOKEN: git's core.fsmonitor hook in the
 * sandbox (issue 44). It asks the host's monitor (coordinator/fsmonitor.h)
 * through the dispenser which paths may have changed since TOKEN and
 * passes the answer to git as it came: the new token, NUL, then the paths,
 * each NUL-terminated. Any failure exits 1, and git then looks at every
 * file, as it does without a monitor. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "dispense.h"
#include "init.h"

#define TOKEN_MAX  64
#define TIMEOUT_MS 5000

static int write_all(int fd, const char *p, size_t n) {
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -1;
                p += w;
                n -= (size_t) w;
        }
        return 0;
}

int fsmonitor_hook_main(const char *version, const char *token) {
        if (strcmp(version, "2") != 0)
                return 1;
        /* Ours are short and printable; anything else asks for everything. */
        size_t n = strlen(token);
        bool ok = n > 0 && n <= TOKEN_MAX;
        for (size_t i = 0; ok && i < n; i++)
                ok = token[i] > ' ' && token[i] < 0x7f;
        int fd = dispense_connect(DISPENSE_FSMONITOR, NULL, 0, NULL);
        if (fd < 0)
                return 1;
        struct timeval tv = { TIMEOUT_MS / 1000, 0 };
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        char req[TOKEN_MAX + 8];
        int k = snprintf(req, sizeof req, "2 %s\n", ok ? token : "none");
        if (k < 0 || write_all(fd, req, (size_t) k) < 0) {
                close(fd);
                return 1;
        }
        char buf[65536];
        size_t total = 0;
        bool token_seen = false;
        for (;;) {
                ssize_t r = read(fd, buf, sizeof buf);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        close(fd);
                        return 1;
                }
                if (r == 0)
                        break;
                if (!token_seen && memchr(buf, '\0', (size_t) r))
                        token_seen = true;
                if (write_all(STDOUT_FILENO, buf, (size_t) r) < 0) {
                        close(fd);
                        return 1;
                }
                total += (size_t) r;
        }
        close(fd);
        return total > 0 && token_seen ? 0 : 1;
}
