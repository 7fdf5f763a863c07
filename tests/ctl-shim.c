/* SPDX-License-Identifier: MIT */
/* An LD_PRELOAD library for the tests of the control sockets
 * (tests/integration: test_peer.py, test_run.py, test_network.py,
 * test_up.py). Loaded into the real lazaret binary, it takes over before
 * main, so the coordinator's check of the peer's executable passes: what
 * a process of the person's uid that is not the CLI can do with that binary
 * (issue 41), and, given the key, what the protocol's tests send.
 *
 *   LD_PRELOAD=ctl-shim.so CTL_SHIM_SOCKET=SOCKET lazaret --version <BYTES
 *
 * Sends standard input to SOCKET as it is, then copies every byte the
 * server answers to standard output until it closes (or is silent for 10
 * s), and exits 0 without running lazaret's main. Its side of the
 * connection is shut down after sending, unless CTL_SHIM_HOLD is set (a
 * client that stays, as a CLI whose session runs does). With CTL_SHIM_CONFINE=KEYFILE it
 * first confines itself with Landlock as the escalation's auto-approved
 * commands are (reads beneath /usr and /etc only) and tries to read
 * KEYFILE, saying on standard error what that gave ("key: ..."). Without
 * CTL_SHIM_SOCKET it does nothing. */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define SHIM_MAX (16u * 1024u * 1024u)

static void confine(void) {
        struct landlock_ruleset_attr ra = { .handled_access_fs =
                                                    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR };
        int rs = (int) syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);
        if (rs < 0) {
                fprintf(stderr, "shim: landlock: %s\n", strerror(errno));
                _exit(2);
        }
        static const char *const readable[] = { "/usr", "/etc" };
        for (size_t i = 0; i < sizeof(readable) / sizeof(readable[0]); i++) {
                struct landlock_path_beneath_attr pb = { .allowed_access = ra.handled_access_fs,
                                                         .parent_fd = open(readable[i], O_PATH | O_CLOEXEC) };
                if (pb.parent_fd < 0 || syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
                        fprintf(stderr, "shim: landlock rule %s: %s\n", readable[i], strerror(errno));
                        _exit(2);
                }
                close(pb.parent_fd);
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
                fprintf(stderr, "shim: landlock_restrict_self: %s\n", strerror(errno));
                _exit(2);
        }
        close(rs);
}

__attribute__((constructor)) static void shim(void) {
        const char *sock = getenv("CTL_SHIM_SOCKET"), *keyfile = getenv("CTL_SHIM_CONFINE");
        if (!sock)
                return;
        signal(SIGPIPE, SIG_IGN);
        char *in = malloc(SHIM_MAX);
        size_t n = 0;
        if (!in)
                _exit(2);
        for (;;) {
                ssize_t r = read(STDIN_FILENO, in + n, SHIM_MAX - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        _exit(2);
                if (r == 0 || (n += (size_t) r) == SHIM_MAX)
                        break;
        }
        if (keyfile) {
                confine();
                int fd = open(keyfile, O_RDONLY | O_CLOEXEC);
                fprintf(stderr, "key: %s\n", fd >= 0 ? "read" : strerror(errno));
                if (fd >= 0)
                        close(fd);
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(sock) >= sizeof(sa.sun_path))
                _exit(2);
        strcpy(sa.sun_path, sock);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                fprintf(stderr, "shim: cannot connect to %s: %s\n", sock, strerror(errno));
                _exit(1);
        }
        for (size_t off = 0; off < n;) {
                ssize_t w = write(fd, in + off, n - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        break; /* the peer dropped us: read what it said */
                off += (size_t) w;
        }
        if (!getenv("CTL_SHIM_HOLD"))
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
        _exit(0);
}
