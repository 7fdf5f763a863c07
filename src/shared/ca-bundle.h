/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "strbuf.h"

/* ca_certificates (issue 24): the certificate authorities a profile hands
 * its sandbox, as one PEM bundle that the sandbox's TLS clients are pointed
 * at (SSL_CERT_FILE and its kin).
 *
 * Only certificates reach the bundle: each file is read as a sequence of
 * PEM blocks, every CERTIFICATE (or TRUSTED CERTIFICATE) block is parsed as
 * X.509 and written out again from the parsed form; a block of any other
 * kind (a private key above all) refuses the whole file, so a path named by
 * mistake cannot carry a secret in. Text between blocks (comments) is left
 * out. */

/* The host's trust store: the first of the usual bundle files that exists
 * (Debian and Ubuntu, Fedora and RHEL, openSUSE, Arch, Alpine), or NULL. */
const char *ca_host_store(void);

/* The paths searched, NULL-terminated, for messages. */
extern const char *const ca_host_store_paths[];

#define CA_FILE_MAX   (4U * 1024 * 1024)
#define CA_BUNDLE_MAX 2048 /* certificates in one bundle */

/* Append the certificates of files (NULL-terminated) to out, in order.
 * Returns the number of certificates, or -EINVAL with *ret_error naming
 * the file and what is wrong with it (caller frees), or -ENOMEM. */
int ca_bundle_build(char *const *files, StrBuf *out, char **ret_error);
