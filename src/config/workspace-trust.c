/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "path-util.h"
#include "strbuf.h"
#include "string-util.h"
#include "workspace-trust.h"

void wstrust_records_done(WsTrustRecords *r) {
        for (size_t i = 0; i < r->n; i++)
                free(r->items[i].path);
        free(r->items);
        *r = (WsTrustRecords){};
}

static int store_path(const char *home, const char *name, char **ret) {
        const char *xdg = getenv("XDG_DATA_HOME");
        StrBuf b = STRBUF_INIT;
        /* A relative XDG_DATA_HOME is invalid by the XDG spec: ignored. */
        if (xdg && path_is_absolute(xdg))
                strbuf_printf(&b, "%s/lazaret/%s", xdg, name);
        else
                strbuf_printf(&b, "%s/.local/share/lazaret/%s", home, name);
        char *p = strbuf_steal(&b);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

int wstrust_store_path(const char *home, char **ret) {
        return store_path(home, "trusted-workspaces", ret);
}

int wstrust_manifest_store_path(const char *home, char **ret) {
        return store_path(home, "trusted-manifests", ret);
}

int wstrust_user_record_path(const char *home, const char *name, char **ret) {
        return store_path(home, name, ret);
}

static bool path_recordable(const char *p) {
        if (!path_is_absolute(p))
                return false;
        for (const unsigned char *c = (const unsigned char *) p; *c; c++)
                if (*c < 0x20 || *c == 0x7f)
                        return false;
        return true;
}

static bool sha_hex_valid(const char *s, size_t n) {
        if (n != WSTRUST_SHA256_HEX_LEN)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static int parse_line(const char *line, size_t len, WsTrustRecord *ret) {
        /* <64 hex> SP <digits> SP <path> */
        if (len < WSTRUST_SHA256_HEX_LEN + 4 || !sha_hex_valid(line, WSTRUST_SHA256_HEX_LEN) ||
            line[WSTRUST_SHA256_HEX_LEN] != ' ')
                return -EBADMSG;
        const char *p = line + WSTRUST_SHA256_HEX_LEN + 1, *end = line + len;
        int64_t when = 0;
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9') {
                if (when > (INT64_MAX - 9) / 10)
                        return -EBADMSG;
                when = when * 10 + (*p - '0');
                p++;
        }
        if (p == d || p >= end || *p != ' ')
                return -EBADMSG;
        p++;
        char *path = strndup(p, (size_t) (end - p));
        if (!path)
                return -ENOMEM;
        if (!path_recordable(path) || strlen(path) != (size_t) (end - p)) {
                free(path);
                return -EBADMSG;
        }
        memcpy(ret->sha256, line, WSTRUST_SHA256_HEX_LEN);
        ret->sha256[WSTRUST_SHA256_HEX_LEN] = '\0';
        ret->when = when;
        ret->path = path;
        return 0;
}

int wstrust_load(const char *store, WsTrustRecords *ret, unsigned *ret_line) {
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        int r = read_file_capped(store, (size_t) WSTRUST_RECORDS_MAX * 4200u, &data, &size);
        if (r == -ENOENT) {
                *ret = (WsTrustRecords){};
                return 0;
        }
        if (r < 0)
                return r;

        WsTrustRecords out = {};
        unsigned line = 0;
        for (size_t off = 0; off < size;) {
                const char *nl = memchr(data + off, '\n', size - off);
                size_t len = nl ? (size_t) (nl - (data + off)) : size - off;
                line++;
                if (out.n >= WSTRUST_RECORDS_MAX) {
                        r = -EBADMSG;
                        goto fail;
                }
                WsTrustRecord *n = realloc(out.items, (out.n + 1) * sizeof(*n));
                if (!n) {
                        r = -ENOMEM;
                        goto fail;
                }
                out.items = n;
                r = parse_line(data + off, len, &out.items[out.n]);
                if (r < 0)
                        goto fail;
                out.n++;
                off += len + (nl ? 1 : 0);
        }
        *ret = out;
        return 0;
fail:
        wstrust_records_done(&out);
        if (r == -EBADMSG && ret_line)
                *ret_line = line;
        return r;
}

const WsTrustRecord *wstrust_find(const WsTrustRecords *r, const char *path) {
        for (size_t i = 0; i < r->n; i++)
                if (streq(r->items[i].path, path))
                        return &r->items[i];
        return NULL;
}

int wstrust_mkdir_parents(const char *path) {
        /* Every missing directory on the way to the store's is made 0700. */
        _cleanup_free_ char *d = strdup(path);
        if (!d)
                return -ENOMEM;
        char *slash = strrchr(d, '/');
        if (!slash || slash == d)
                return 0;
        *slash = '\0';
        for (char *p = d + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(d, 0700) < 0 && errno != EEXIST)
                        return negative_errno();
                *p = '/';
        }
        if (mkdir(d, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

int wstrust_lock(const char *record, int *ret_fd) {
        int r = wstrust_mkdir_parents(record);
        if (r < 0)
                return r;
        StrBuf lb = STRBUF_INIT;
        strbuf_printf(&lb, "%s.lock", record);
        _cleanup_free_ char *lock = strbuf_steal(&lb);
        if (!lock)
                return -ENOMEM;
        _cleanup_close_ int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0)
                return negative_errno();
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int wstrust_set(const char *store, const char *path, const char *sha256, int64_t when) {
        if (!path_recordable(path) || (sha256 && !sha_hex_valid(sha256, strlen(sha256))))
                return -EINVAL;
        /* Removing from a store that does not exist: nothing to make. */
        if (!sha256 && access(store, F_OK) < 0 && errno == ENOENT)
                return -ENOENT;
        _cleanup_close_ int lfd = -EBADF;
        int r = wstrust_lock(store, &lfd);
        if (r < 0)
                return r;

        _cleanup_(wstrust_records_done) WsTrustRecords recs = {};
        r = wstrust_load(store, &recs, NULL);
        if (r < 0)
                return r;

        StrBuf out = STRBUF_INIT;
        bool found = false;
        for (size_t i = 0; i < recs.n; i++) {
                if (streq(recs.items[i].path, path)) {
                        found = true;
                        continue;
                }
                strbuf_printf(&out, "%s %" PRId64 " %s\n", recs.items[i].sha256, recs.items[i].when,
                              recs.items[i].path);
        }
        if (sha256) {
                if (recs.n - (found ? 1 : 0) >= WSTRUST_RECORDS_MAX) {
                        strbuf_done(&out);
                        return -E2BIG;
                }
                strbuf_printf(&out, "%s %" PRId64 " %s\n", sha256, when, path);
        } else if (!found) {
                strbuf_done(&out);
                return -ENOENT;
        }
        _cleanup_free_ char *text = strbuf_steal(&out);
        if (!text)
                return -ENOMEM;
        return write_file_atomic(store, text, strlen(text), 0600, 0);
}

int wstrust_sha256_hex(const void *data, size_t size, char ret[WSTRUST_SHA256_HEX_LEN + 1]) {
        unsigned char md[32];
        unsigned int mdlen = 0;
        if (EVP_Digest(data, size, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != sizeof(md))
                return -EIO;
        for (size_t i = 0; i < sizeof(md); i++)
                snprintf(ret + 2 * i, 3, "%02x", md[i]);
        return 0;
}

int wstrust_read_workspace_file(const char *dir, uid_t uid, char **ret_data, size_t *ret_size, uid_t *ret_owner,
                                const char **ret_why) {
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                *ret_why = "cannot open the workspace directory";
                return negative_errno();
        }
        /* O_NONBLOCK: a FIFO must not hold the open until someone writes. */
        _cleanup_close_ int fd = openat(dfd, "lazaret.toml", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                int e = errno;
                if (e == ELOOP)
                        *ret_why = "is a symbolic link; a workspace file must be a regular file of its own";
                else if (e == ENOENT)
                        *ret_why = "does not exist";
                else
                        *ret_why = "cannot be opened";
                return -e;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
                *ret_why = "cannot be examined";
                return negative_errno();
        }
        if (S_ISDIR(st.st_mode)) {
                *ret_why = "is a directory; a workspace file must be a regular file";
                return -EISDIR;
        }
        if (!S_ISREG(st.st_mode)) {
                *ret_why = "is not a regular file (a FIFO, socket or device); a workspace file must be a regular file";
                return -EINVAL;
        }
        if (st.st_uid != uid) {
                if (ret_owner)
                        *ret_owner = st.st_uid;
                *ret_why = "is owned by another user; a workspace file must be your own";
                return -EPERM;
        }
        int r = read_fd_capped(fd, WSTRUST_FILE_MAX, ret_data, ret_size);
        if (r == -EFBIG)
                *ret_why = "is larger than 1048576 bytes; a configuration file is never this big";
        else if (r < 0)
                *ret_why = "cannot be read";
        return r;
}
