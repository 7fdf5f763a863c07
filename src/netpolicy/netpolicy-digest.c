/* SPDX-License-Identifier: MIT */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <string.h>

#include "netpolicy-digest.h"

void sha256_domain_hex(const char *domain, const void *data, size_t len, char ret[65]) {
        static const char hex[] = "0123456789abcdef";
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256_CTX c;

        SHA256_Init(&c);
        SHA256_Update(&c, domain, strlen(domain));
        SHA256_Update(&c, data, len);
        SHA256_Final(md, &c);
        for (size_t i = 0; i < sizeof(md); i++) {
                ret[2 * i] = hex[md[i] >> 4];
                ret[2 * i + 1] = hex[md[i] & 15];
        }
        ret[64] = '\0';
}
