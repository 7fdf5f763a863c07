/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ca-bundle.h"
#include "fd-util.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"

const char *const ca_host_store_paths[] = {
        "/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Arch, Alpine */
        "/etc/pki/tls/certs/ca-bundle.crt", /* Fedora, RHEL */
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* Fedora, RHEL (the source of the above) */
        "/etc/ssl/ca-bundle.pem", /* openSUSE */
        NULL,
};

const char *ca_host_store(void) {
        for (size_t i = 0; ca_host_store_paths[i]; i++)
                if (access(ca_host_store_paths[i], R_OK) == 0)
                        return ca_host_store_paths[i];
        return NULL;
}

_printf_(2, 3) static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *m = NULL;
        int k = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        *ret_error = m;
        return -EINVAL;
}

/* The certificates of one file's bytes appended to out; their number. */
static int one_file(const char *path, const char *data, size_t size, StrBuf *out, size_t *total, char **ret_error) {
        BIO *in = BIO_new_mem_buf(data, (int) size);
        BIO *mem = BIO_new(BIO_s_mem());
        if (!in || !mem) {
                BIO_free(in);
                BIO_free(mem);
                return -ENOMEM;
        }
        int n = 0, r = 0;
        for (;;) {
                char *name = NULL, *header = NULL;
                unsigned char *der = NULL;
                long len = 0;
                ERR_clear_error();
                if (PEM_read_bio(in, &name, &header, &der, &len) != 1) {
                        /* The end of the blocks, or a block that is not
                         * one: only the first is fine. */
                        unsigned long e = ERR_peek_last_error();
                        if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
                                break;
                        r = fail(ret_error, "%s: a PEM block that cannot be read (cut short or damaged)", path);
                        break;
                }
                bool cert = streq(name, "CERTIFICATE") || streq(name, "TRUSTED CERTIFICATE");
                X509 *x = NULL;
                if (cert) {
                        const unsigned char *p = der;
                        x = streq(name, "CERTIFICATE") ? d2i_X509(NULL, &p, len) : d2i_X509_AUX(NULL, &p, len);
                        if (x && p != der + len) {
                                X509_free(x);
                                x = NULL;
                        }
                }
                if (!cert)
                        r = fail(ret_error,
                                 "%s holds a %.40s block: a certificate file for the sandbox holds certificates "
                                 "only (never a key); name the certificate's own file",
                                 path, name);
                else if (!x)
                        r = fail(ret_error, "%s: certificate %d is not valid X.509", path, n + 1);
                else if (*total >= CA_BUNDLE_MAX)
                        r = fail(ret_error, "%s: more than %u certificates in all; this is not a trust store", path,
                                 CA_BUNDLE_MAX);
                else if (PEM_write_bio_X509(mem, x) != 1)
                        r = -ENOMEM;
                else {
                        n++;
                        (*total)++;
                }
                X509_free(x);
                OPENSSL_free(name);
                OPENSSL_free(header);
                OPENSSL_free(der);
                if (r < 0)
                        break;
        }
        ERR_clear_error();
        if (r == 0 && n == 0)
                r = fail(ret_error, "%s holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path);
        if (r == 0) {
                char *p = NULL;
                long k = BIO_get_mem_data(mem, &p);
                if (k > 0)
                        strbuf_putn(out, p, (size_t) k);
                if (out->oom)
                        r = -ENOMEM;
        }
        BIO_free(in);
        BIO_free(mem);
        return r < 0 ? r : n;
}

int ca_bundle_build(char *const *files, StrBuf *out, char **ret_error) {
        size_t total = 0;
        for (size_t i = 0; files && files[i]; i++) {
                _cleanup_free_ char *data = NULL;
                size_t size = 0;
                int r = read_file_capped(files[i], CA_FILE_MAX, &data, &size);
                if (r == -ENOMEM)
                        return r;
                if (r == -EFBIG)
                        return fail(ret_error, "%s is larger than %u bytes; no certificate file is", files[i],
                                    CA_FILE_MAX);
                if (r < 0)
                        return fail(ret_error, "cannot read %s: %s", files[i], strerror(-r));
                r = one_file(files[i], data, size, out, &total, ret_error);
                if (r < 0)
                        return r;
        }
        return (int) total;
}
