/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* SHA-256(domain || data) as 64 lowercase hex digits and a NUL.
 *
 * Uses OpenSSL's low-level SHA256_* calls (deprecated in OpenSSL 3, still
 * shipped): linked statically into lazaret-netd they add about 17 KiB, where
 * the EVP layer would pull in the provider machinery (5 MiB). */
void sha256_domain_hex(const char *domain, const void *data, size_t len, char ret[65]);
