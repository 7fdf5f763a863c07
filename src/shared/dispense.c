/* SPDX-License-Identifier: MIT */
#include "dispense.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-util.h"

const char *dispense_path(char service) {
        switch (service) {
        case DISPENSE_ESCALATE:
                return DISPENSE_DIR "/escalate";
        case DISPENSE_BROKER:
                return DISPENSE_DIR "/broker";
        case DISPENSE_FSMONITOR:
                return DISPENSE_DIR "/fsmonitor";
        default:
                return NULL;
        }
}

int dispense_send(int sock, uint8_t status, int fd) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u = {};
        struct iovec iov = { .iov_base = &status, .iov_len = 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (fd >= 0) {
                m.msg_control = u.buf;
                m.msg_controllen = sizeof(u.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        for (;;) {
                ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
                if (n == 1)
                        return 0;
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 ? -errno : -EIO;
        }
}

int dispense_recv(int sock, int *ret_fd) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 4)];
        } u = {};
        uint8_t status;
        struct iovec iov = { .iov_base = &status, .iov_len = 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
        ssize_t n;
        do
                n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EAGAIN ? -ETIMEDOUT : -errno;
        int fd = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; i++) {
                                int x;
                                memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                if (fd < 0)
                                        fd = x;
                                else
                                        safe_close(x); /* one is the protocol */
                        }
                }
        if (n == 0) {
                safe_close(fd);
                return -EPIPE;
        }
        if (status != 0 || (m.msg_flags & MSG_CTRUNC) || fd < 0) {
                safe_close(fd);
                return status != 0 ? -(int) status : -EBADMSG;
        }
        *ret_fd = fd;
        return 0;
}

static int connect_path(const char *path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

int dispense_connect(char service, const char *fallback, int nonblock, const char **ret_via) {
        const char *path = dispense_path(service);
        int fd = -1, r = -ENOENT;
        if (path && access(path, F_OK) == 0) {
                int d = -1;
                if (ret_via)
                        *ret_via = path;
                r = connect_path(path, &d);
                if (r >= 0) {
                        struct timeval tv = { .tv_sec = DISPENSE_TIMEOUT_MS / 1000 };
                        (void) setsockopt(d, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                        r = dispense_recv(d, &fd);
                        safe_close(d);
                }
        } else if (fallback) {
                if (ret_via)
                        *ret_via = fallback;
                r = connect_path(fallback, &fd);
        } else if (ret_via)
                *ret_via = path;
        if (r < 0)
                return r;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, nonblock ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0) {
                r = -errno;
                safe_close(fd);
                return r;
        }
        return fd;
}
