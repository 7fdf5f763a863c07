/* SPDX-License-Identifier: MIT */
#pragma once

/* Subresource-integrity strings ("sha512-" and the digest in base64, as the
 * npm registry publishes them in dist.integrity): the one way a download is
 * trusted. Only sha512 is accepted. */

/* Whether the file open at fd (read from its start to its end) has the
 * digest sri names. Returns 1 (it does), 0 (it does not: *ret_actual, when
 * not NULL, gets the file's own "sha512-..." string, freed by the caller),
 * -EINVAL when sri is not a sha512 integrity string, or another -errno. */
int integrity_check_fd(int fd, const char *sri, char **ret_actual);
