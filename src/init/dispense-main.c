/* SPDX-License-Identifier: MIT */
/* lazaret-init --dispense FD SERVICES: the sandbox's end of the door to
 * the host's sockets (shared/dispense.h). Run by the coordinator through
 * runsc exec, as root in the sandbox, with FD one end of a socket pair
 * whose other end the coordinator holds. For each service letter (E, B)
 * it listens on DISPENSE_DIR/<service> (mode 0666, in a directory only
 * root may change), says DISPENSE_READY on FD, then serves one connection
 * at a time: the service byte to the coordinator, its answer (and the
 * host descriptor) to the client. A socket removed or replaced from
 * inside is made again within a second. Exits when FD closes. */
#include "init.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "dispense.h"
#include "fd-util.h"

typedef struct Listener {
        char service;
        const char *path;
        int fd;
        dev_t dev;
        ino_t ino;
} Listener;

static int listen_on(Listener *l) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        l->fd = safe_close(l->fd);
        /* Whatever is in its place goes (an empty directory too). */
        if (unlink(l->path) < 0 && errno == EISDIR)
                (void) rmdir(l->path);
        strcpy(sa.sun_path, l->path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(l->path, 0666) < 0 || listen(fd, 64) < 0 ||
            stat(l->path, &st) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        l->fd = fd;
        l->dev = st.st_dev;
        l->ino = st.st_ino;
        return 0;
}

static bool still_ours(const Listener *l) {
        struct stat st;
        return l->fd >= 0 && lstat(l->path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == l->dev &&
               st.st_ino == l->ino;
}

/* One client: ask, wait for the answer, pass it on. False when the
 * coordinator's end is gone. */
static bool serve_one(int ctl, Listener *l) {
        int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
                return true;
        int host = -1;
        uint8_t status = 0;
        if (loop_write(ctl, &l->service, 1) < 0) {
                safe_close(c);
                return false;
        }
        int r = dispense_recv(ctl, &host);
        if (r == -EPIPE || r == -ETIMEDOUT || r == -EBADMSG || r == -ECONNRESET) {
                safe_close(c);
                return false;
        }
        if (r < 0)
                status = (uint8_t) (-r > 255 ? EIO : -r);
        (void) dispense_send(c, status, host);
        safe_close(host);
        safe_close(c);
        return true;
}

int dispense_main(int ctl, const char *services) {
        Listener ls[3];
        size_t n = 0;
        for (const char *p = services; *p && n < 3; p++) {
                const char *path = dispense_path(*p);
                if (!path) {
                        fprintf(stderr, "lazaret-init: --dispense: unknown service '%c'\n", *p);
                        return 2;
                }
                ls[n++] = (Listener){ .service = *p, .path = path, .fd = -1 };
        }
        if (n == 0) {
                fputs("lazaret-init: --dispense takes one or more of E, B and F\n", stderr);
                return 2;
        }
        /* The answer to a request comes at once or never. */
        struct timeval tv = { .tv_sec = DISPENSE_TIMEOUT_MS / 1000 };
        (void) setsockopt(ctl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) mkdir(DISPENSE_DIR, 0755);
        for (size_t i = 0; i < n; i++) {
                int r = listen_on(&ls[i]);
                if (r < 0) {
                        fprintf(stderr, "lazaret-init: cannot listen on %s: %s\n", ls[i].path, strerror(-r));
                        return 1;
                }
        }
        const char ready = DISPENSE_READY;
        if (loop_write(ctl, &ready, 1) < 0)
                return 1;
        for (;;) {
                struct pollfd p[4] = { { .fd = ctl, .events = POLLIN } };
                for (size_t i = 0; i < n; i++)
                        p[1 + i] = (struct pollfd){ .fd = ls[i].fd, .events = POLLIN };
                int k = poll(p, 1 + n, 1000);
                if (k < 0 && errno != EINTR)
                        return 1;
                /* The coordinator never writes unasked: anything here is
                 * its end closing. */
                if (k > 0 && p[0].revents)
                        return 0;
                for (size_t i = 0; k > 0 && i < n; i++)
                        if ((p[1 + i].revents & POLLIN) && !serve_one(ctl, &ls[i]))
                                return 0;
                for (size_t i = 0; i < n; i++)
                        if (!still_ours(&ls[i]) && listen_on(&ls[i]) < 0)
                                ls[i].fd = safe_close(ls[i].fd);
        }
}
