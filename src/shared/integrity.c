/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "integrity.h"
#include "macro.h"
#include "string-util.h"

#define SHA512_LEN 64
/* base64 of 64 bytes: 88 characters, two of them '=' padding. */
#define SHA512_B64_LEN 88

static bool b64_char(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

/* The 64 bytes sri names, or -EINVAL. */
static int parse_sri(const char *sri, unsigned char ret[SHA512_LEN]) {
        const char *b64 = sri ? startswith(sri, "sha512-") : NULL;
        if (!b64 || strlen(b64) != SHA512_B64_LEN || !streq(b64 + SHA512_B64_LEN - 2, "=="))
                return -EINVAL;
        for (size_t i = 0; i < SHA512_B64_LEN - 2; i++)
                if (!b64_char(b64[i]))
                        return -EINVAL;
        unsigned char out[SHA512_LEN + 3];
        /* EVP_DecodeBlock counts padding as zero bytes: 66, of which 64 are ours. */
        if (EVP_DecodeBlock(out, (const unsigned char *) b64, SHA512_B64_LEN) != SHA512_LEN + 2)
                return -EINVAL;
        memcpy(ret, out, SHA512_LEN);
        return 0;
}

int integrity_check_fd(int fd, const char *sri, char **ret_actual) {
        unsigned char want[SHA512_LEN];
        if (parse_sri(sri, want) < 0)
                return -EINVAL;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha512(), NULL) != 1) {
                EVP_MD_CTX_free(ctx);
                return -ENOMEM;
        }
        int r = 0;
        for (;;) {
                unsigned char buf[65536];
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        break;
                }
                if (n == 0)
                        break;
                if (EVP_DigestUpdate(ctx, buf, (size_t) n) != 1) {
                        r = -EIO;
                        break;
                }
        }
        unsigned char got[SHA512_LEN];
        unsigned len = 0;
        if (r == 0 && (EVP_DigestFinal_ex(ctx, got, &len) != 1 || len != SHA512_LEN))
                r = -EIO;
        EVP_MD_CTX_free(ctx);
        if (r < 0)
                return r;
        if (CRYPTO_memcmp(got, want, SHA512_LEN) == 0)
                return 1;
        if (ret_actual) {
                char b64[SHA512_B64_LEN + 1];
                EVP_EncodeBlock((unsigned char *) b64, got, SHA512_LEN);
                if (asprintf(ret_actual, "sha512-%s", b64) < 0)
                        *ret_actual = NULL;
        }
        return 0;
}
