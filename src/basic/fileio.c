/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "strbuf.h"

int read_fd_capped(int fd, size_t max_size, char **ret_data, size_t *ret_size) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((size_t) st.st_size > max_size)
                return -EFBIG;

        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = (size_t) st.st_size + 1;
        buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (len == cap) {
                        /* The file grew while we read it; keep honouring the cap. */
                        if (cap > max_size)
                                return -EFBIG;
                        cap = cap * 2 > max_size + 1 ? max_size + 1 : cap * 2;
                        char *n = realloc(buf, cap + 1);
                        if (!n)
                                return -ENOMEM;
                        buf = n;
                }
                ssize_t k = read(fd, buf + len, cap - len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                len += (size_t) k;
                if (len > max_size)
                        return -EFBIG;
        }
        buf[len] = '\0';
        *ret_data = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = len;
        return 0;
}

int read_file_capped(const char *path, size_t max_size, char **ret_data, size_t *ret_size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        return read_fd_capped(fd, max_size, ret_data, ret_size);
}

int write_file_temp(const char *path, const char *data, size_t size, unsigned mode, char **ret_tmp) {
        StrBuf tmp = STRBUF_INIT;
        strbuf_printf(&tmp, "%s.tmp.XXXXXX", path);
        _cleanup_free_ char *t = strbuf_steal(&tmp);
        if (!t)
                return -ENOMEM;

        _cleanup_close_ int fd = mkostemp(t, O_CLOEXEC);
        if (fd < 0)
                return negative_errno();

        int r = 0;
        if (fchmod(fd, (mode_t) mode) < 0)
                r = negative_errno();
        for (size_t off = 0; r == 0 && off < size;) {
                ssize_t k = write(fd, data + off, size - off);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = negative_errno();
                        break;
                }
                off += (size_t) k;
        }
        if (r == 0 && fsync(fd) < 0)
                r = negative_errno();
        if (r < 0) {
                (void) unlink(t);
                return r;
        }
        *ret_tmp = TAKE_PTR(t);
        return 0;
}

int write_file_atomic(const char *path, const char *data, size_t size, unsigned mode, int exclusive) {
        _cleanup_free_ char *t = NULL;
        int r = write_file_temp(path, data, size, mode, &t);
        if (r < 0)
                return r;
        if (exclusive)
                r = renameat2(AT_FDCWD, t, AT_FDCWD, path, RENAME_NOREPLACE) < 0 ? negative_errno() : 0;
        else
                r = rename(t, path) < 0 ? negative_errno() : 0;
        if (r < 0)
                (void) unlink(t);
        return r;
}
