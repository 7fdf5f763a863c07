/* SPDX-License-Identifier: MIT */
/* Loose object verification (git-object.h). */
#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "git-object.h"
#include "macro.h"

/* "commit " and a 64-bit size in decimal, then the NUL. */
#define HEADER_MAX 32
#define CHUNK      16384

static bool is_hex_id(const char *hex, size_t *ret_len) {
        size_t n = strnlen(hex, 65);
        if (n != 40 && n != 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
                        return false;
        *ret_len = n;
        return true;
}

/* "<type> <size>" (without its NUL): the declared payload size, or -1. */
static int64_t parse_header(const char *h, size_t n) {
        static const char *const types[] = { "blob", "tree", "commit", "tag" };
        const char *sp = memchr(h, ' ', n);
        if (!sp)
                return -1;
        size_t tl = (size_t) (sp - h);
        bool known = false;
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (strlen(types[i]) == tl && memcmp(h, types[i], tl) == 0)
                        known = true;
        if (!known)
                return -1;
        const char *d = sp + 1, *end = h + n;
        if (d == end || (d[0] == '0' && end - d > 1) || end - d > 18)
                return -1; /* canonical decimal only: what git writes */
        int64_t size = 0;
        for (; d < end; d++) {
                if (*d < '0' || *d > '9')
                        return -1;
                size = size * 10 + (*d - '0');
        }
        return size;
}

static void free_md(EVP_MD_CTX **c) {
        EVP_MD_CTX_free(*c);
}

int git_object_verify_loose(int fd, const char *hex) {
        size_t hex_len;
        if (fd < 0 || !hex || !is_hex_id(hex, &hex_len))
                return -EINVAL;

        __attribute__((cleanup(free_md))) EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (!md || EVP_DigestInit_ex(md, hex_len == 40 ? EVP_sha1() : EVP_sha256(), NULL) != 1)
                return -ENOMEM;
        z_stream z = { 0 };
        if (inflateInit(&z) != Z_OK)
                return -ENOMEM;

        unsigned char in[CHUNK], out[CHUNK];
        char header[HEADER_MAX];
        size_t header_len = 0;
        bool header_done = false, ended = false;
        int64_t want = -1, got = 0;
        off_t off = 0;
        int r = 0;

        while (!ended) {
                ssize_t k = pread(fd, in, sizeof in, off);
                if (k < 0) {
                        r = -errno;
                        goto out;
                }
                if (k == 0) {
                        r = -EBADMSG; /* the stream stops short */
                        goto out;
                }
                off += k;
                z.next_in = in;
                z.avail_in = (uInt) k;
                while (z.avail_in > 0 && !ended) {
                        z.next_out = out;
                        z.avail_out = sizeof out;
                        int zr = inflate(&z, Z_NO_FLUSH);
                        if (zr != Z_OK && zr != Z_STREAM_END) {
                                r = zr == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
                                goto out;
                        }
                        size_t produced = sizeof out - z.avail_out;
                        if (EVP_DigestUpdate(md, out, produced) != 1) {
                                r = -ENOMEM;
                                goto out;
                        }
                        size_t i = 0;
                        for (; !header_done && i < produced; i++) {
                                if (out[i] == '\0') {
                                        want = parse_header(header, header_len);
                                        if (want < 0) {
                                                r = -EBADMSG;
                                                goto out;
                                        }
                                        header_done = true;
                                } else if (header_len == sizeof header) {
                                        r = -EBADMSG;
                                        goto out;
                                } else
                                        header[header_len++] = (char) out[i];
                        }
                        got += (int64_t) (produced - i);
                        if (header_done && got > want) {
                                r = -EBADMSG; /* more than the header said */
                                goto out;
                        }
                        if (zr == Z_STREAM_END)
                                ended = true;
                        else if (produced == 0 && z.avail_in > 0) {
                                r = -EBADMSG; /* no progress */
                                goto out;
                        }
                }
        }
        /* Nothing may follow the stream: not in this chunk, not after it. */
        if (z.avail_in > 0) {
                r = -EBADMSG;
                goto out;
        }
        ssize_t k = pread(fd, in, 1, off);
        if (k < 0) {
                r = -errno;
                goto out;
        }
        if (k > 0 || !header_done || got != want) {
                r = -EBADMSG;
                goto out;
        }

        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned dl = 0;
        if (EVP_DigestFinal_ex(md, digest, &dl) != 1 || dl * 2 != hex_len) {
                r = -ENOMEM;
                goto out;
        }
        static const char digits[] = "0123456789abcdef";
        for (unsigned i = 0; i < dl; i++)
                if (hex[2 * i] != digits[digest[i] >> 4] || hex[2 * i + 1] != digits[digest[i] & 15]) {
                        r = -EBADMSG;
                        goto out;
                }
out:
        inflateEnd(&z);
        return r;
}
