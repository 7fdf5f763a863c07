/* SPDX-License-Identifier: MIT */
/* For tests/integration/test_peer.py: what a process in the sandbox could
 * send to a coordinator's control socket it can reach. Static, libc only,
 * so it runs in any image.
 *
 *   ctl-poke SOCKET JSON
 *
 * Sends JSON as one control frame (u32 big-endian length, then the bytes)
 * and prints "answered N bytes" when anything comes back within 5 s, or
 * "closed" when the coordinator closes without a word. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char *argv[]) {
        if (argc != 3) {
                fputs("usage: ctl-poke SOCKET JSON\n", stderr);
                return 64;
        }
        signal(SIGPIPE, SIG_IGN);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(argv[1]) >= sizeof(sa.sun_path))
                return 64;
        strcpy(sa.sun_path, argv[1]);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                printf("cannot connect: %s\n", strerror(errno));
                return 1;
        }
        size_t n = strlen(argv[2]);
        unsigned char hdr[4] = { (unsigned char) (n >> 24), (unsigned char) (n >> 16), (unsigned char) (n >> 8),
                                 (unsigned char) n };
        if (write(fd, hdr, 4) == 4)
                (void) !write(fd, argv[2], n);
        size_t got = 0;
        char buf[4096];
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 5000) <= 0)
                        break;
                ssize_t r = read(fd, buf, sizeof(buf));
                if (r <= 0)
                        break;
                got += (size_t) r;
        }
        if (got)
                printf("answered %zu bytes\n", got);
        else
                puts("closed");
        return 0;
}
