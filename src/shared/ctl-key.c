/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl-key.h"
#include "fd-util.h"
#include "fileio.h"

char *ctl_key_path(const char *socket_path) {
        size_t n = strlen(socket_path);
        if (n >= 5 && strcmp(socket_path + n - 5, ".sock") == 0)
                n -= 5;
        char *p = malloc(n + 5);
        if (!p)
                return NULL;
        memcpy(p, socket_path, n);
        memcpy(p + n, ".key", 5);
        return p;
}

static bool key_text_valid(const char *s, size_t n) {
        if (n != CTL_KEY_TEXT)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

int ctl_key_create(const char *path, char *ret) {
        unsigned char raw[CTL_KEY_BYTES];
        char text[CTL_KEY_TEXT + 1];
        for (size_t got = 0; got < sizeof(raw);) {
                ssize_t k = getrandom(raw + got, sizeof(raw) - got, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                got += (size_t) k;
        }
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(text + 2 * i, 3, "%02x", raw[i]);
        OPENSSL_cleanse(raw, sizeof(raw));
        int r = write_file_atomic(path, text, CTL_KEY_TEXT, 0600, 0);
        if (r >= 0)
                memcpy(ret, text, sizeof(text));
        OPENSSL_cleanse(text, sizeof(text));
        return r;
}

int ctl_key_read(const char *path, char *ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return errno == ELOOP ? -EPERM : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
                return -EPERM;
        char buf[CTL_KEY_TEXT + 2];
        size_t n = 0;
        for (;;) {
                ssize_t k = read(fd, buf + n, sizeof(buf) - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0 || (n += (size_t) k) == sizeof(buf))
                        break;
        }
        if (!key_text_valid(buf, n)) {
                OPENSSL_cleanse(buf, sizeof(buf));
                return -EBADMSG;
        }
        memcpy(ret, buf, CTL_KEY_TEXT);
        ret[CTL_KEY_TEXT] = '\0';
        OPENSSL_cleanse(buf, sizeof(buf));
        return 0;
}

bool ctl_key_equal(const char *key, const char *given) {
        if (!key || !given || strlen(key) != CTL_KEY_TEXT || strnlen(given, CTL_KEY_TEXT + 1) != CTL_KEY_TEXT)
                return false;
        return CRYPTO_memcmp(key, given, CTL_KEY_TEXT) == 0;
}
