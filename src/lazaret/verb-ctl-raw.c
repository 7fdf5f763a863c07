/* SPDX-License-Identifier: MIT */
/* lazaret __ctl-raw SOCKET: for the tests of the control protocol only.
 * Sends standard input to a coordinator's control socket as it is, then
 * copies every byte the coordinator answers to standard output until it
 * closes (10 s at most). The coordinator talks only to its own binary
 * (issue 14), so the decoder's tests speak through this one. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-util.h"
#include "log.h"
#include "verbs.h"

#define RAW_MAX (16u * 1024u * 1024u)

int ctl_raw_main(const char *socket_path) {
        signal(SIGPIPE, SIG_IGN);
        _cleanup_free_ char *in = malloc(RAW_MAX);
        size_t n = 0;
        if (!in)
                return EXIT_LAZARET;
        for (;;) {
                ssize_t r = read(STDIN_FILENO, in + n, RAW_MAX - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        log_error("cannot read standard input: %s", strerror(errno));
                        return EXIT_LAZARET;
                }
                if (r == 0 || (n += (size_t) r) == RAW_MAX)
                        break;
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(socket_path) >= sizeof(sa.sun_path)) {
                log_error("socket path too long");
                return EXIT_USAGE;
        }
        strcpy(sa.sun_path, socket_path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                log_error("cannot connect to %s: %s", socket_path, strerror(errno));
                return EXIT_LAZARET;
        }
        for (size_t off = 0; off < n;) {
                ssize_t w = write(fd, in + off, n - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        break; /* the peer dropped us: read what it said */
                off += (size_t) w;
        }
        (void) shutdown(fd, SHUT_WR);
        char buf[65536];
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 10000) <= 0)
                        break;
                ssize_t r = read(fd, buf, sizeof(buf));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                if (fwrite(buf, 1, (size_t) r, stdout) != (size_t) r)
                        break;
        }
        fflush(stdout);
        return 0;
}
