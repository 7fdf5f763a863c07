/* SPDX-License-Identifier: MIT */
/* Unit tests of ca_bundle_build(): certificates made here with OpenSSL go
 * through as themselves (compared in DER after reading the bundle back),
 * comments between them stay out, and a file that holds anything but
 * certificates (a private key above all), a damaged block, no certificate
 * or nothing readable is refused, naming the file. The host's own store
 * (where there is one) gives as many certificates as it has BEGIN lines. */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ca-bundle.h"
#include "macro.h"

static char dir[] = "/tmp/test-ca-bundle-XXXXXX";

static EVP_PKEY *key;

static X509 *make_cert(const char *cn) {
        X509 *x = X509_new();
        assert_non_null(x);
        X509_set_version(x, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(x), (long) (strlen(cn) + 1));
        X509_gmtime_adj(X509_getm_notBefore(x), 0);
        X509_gmtime_adj(X509_getm_notAfter(x), 3600);
        X509_NAME *n = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *) cn, -1, -1, 0);
        X509_set_issuer_name(x, n);
        X509_set_pubkey(x, key);
        assert_true(X509_sign(x, key, NULL) > 0);
        return x;
}

static char *pem_of(X509 *x) {
        BIO *b = BIO_new(BIO_s_mem());
        assert_int_equal(PEM_write_bio_X509(b, x), 1);
        char *p = NULL;
        long n = BIO_get_mem_data(b, &p);
        char *s = malloc((size_t) n + 1);
        assert_non_null(s);
        memcpy(s, p, (size_t) n);
        s[n] = '\0';
        BIO_free(b);
        return s;
}

static char *write_tmp(const char *name, const char *text) {
        char *path = NULL;
        assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        return path;
}

/* The certificates of a bundle, read back with OpenSSL. */
static size_t read_back(const char *pem, X509 **ret, size_t max) {
        BIO *b = BIO_new_mem_buf(pem, -1);
        size_t n = 0;
        X509 *x;
        while (n < max && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
                ret[n++] = x;
        BIO_free(b);
        return n;
}

static void test_certificates_go_through(void **state) {
        (void) state;
        X509 *a = make_cert("a.example.test"), *b = make_cert("bb.example.test");
        char *pa = pem_of(a), *pb = pem_of(b), *text = NULL;
        assert_true(asprintf(&text, "# a comment\n%s\nsome words between\n%s", pa, pb) > 0);
        char *f1 = write_tmp("two.pem", text), *f2 = write_tmp("one.pem", pa);
        StrBuf out = STRBUF_INIT;
        char *err = NULL;
        assert_int_equal(ca_bundle_build((char *[]){ f1, f2, NULL }, &out, &err), 3);
        assert_null(err);
        assert_null(strstr(strbuf_str(&out), "comment"));
        assert_null(strstr(strbuf_str(&out), "words"));
        X509 *got[4];
        assert_int_equal(read_back(strbuf_str(&out), got, 4), 3);
        assert_int_equal(X509_cmp(got[0], a), 0);
        assert_int_equal(X509_cmp(got[1], b), 0);
        assert_int_equal(X509_cmp(got[2], a), 0);
        for (size_t i = 0; i < 3; i++)
                X509_free(got[i]);
        strbuf_done(&out);
        X509_free(a);
        X509_free(b);
        free(pa);
        free(pb);
        free(text);
        free(f1);
        free(f2);
}

static void expect_refused(const char *name, const char *text, const char *why) {
        char *f = write_tmp(name, text);
        StrBuf out = STRBUF_INIT;
        char *err = NULL;
        assert_int_equal(ca_bundle_build((char *[]){ f, NULL }, &out, &err), -EINVAL);
        assert_non_null(err);
        if (!strstr(err, f) || !strstr(err, why))
                fail_msg("%s: %s (wanted %s)", name, err, why);
        free(err);
        strbuf_done(&out);
        free(f);
}

static void test_refused(void **state) {
        (void) state;
        X509 *a = make_cert("a.example.test");
        char *pa = pem_of(a);
        BIO *b = BIO_new(BIO_s_mem());
        assert_int_equal(PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL), 1);
        char *pk = NULL;
        long n = BIO_get_mem_data(b, &pk);
        char *with_key = NULL;
        assert_true(asprintf(&with_key, "%s%.*s", pa, (int) n, pk) > 0);
        expect_refused("key.pem", with_key, "holds a PRIVATE KEY block");
        expect_refused("empty.pem", "", "holds no PEM certificate");
        expect_refused("words.pem", "just words\n", "holds no PEM certificate");
        /* A block cut short, and one whose contents are no certificate. */
        char *cut = strdup(pa);
        cut[strlen(pa) / 2] = '\0';
        expect_refused("cut.pem", cut, "cannot be read");
        expect_refused("junk.pem", "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
                       "is not valid X.509");
        StrBuf out = STRBUF_INIT;
        char *err = NULL;
        assert_int_equal(ca_bundle_build((char *[]){ (char *) "/nonexistent/ca.pem", NULL }, &out, &err), -EINVAL);
        assert_non_null(strstr(err, "cannot read /nonexistent/ca.pem"));
        free(err);
        strbuf_done(&out);
        BIO_free(b);
        free(cut);
        free(with_key);
        free(pa);
        X509_free(a);
}

static void test_host_store(void **state) {
        (void) state;
        const char *store = ca_host_store();
        if (!store) {
                print_message("LOUD SKIP: no trust store on this host (%s, ...)\n", ca_host_store_paths[0]);
                skip();
        }
        FILE *f = fopen(store, "r");
        assert_non_null(f);
        char line[4096];
        int begins = 0;
        while (fgets(line, sizeof(line), f))
                begins += strcmp(line, "-----BEGIN CERTIFICATE-----\n") == 0;
        fclose(f);
        StrBuf out = STRBUF_INIT;
        char *err = NULL;
        int r = ca_bundle_build((char *[]){ (char *) store, NULL }, &out, &err);
        if (r < 0)
                fail_msg("%s", err);
        assert_true(begins > 0);
        assert_int_equal(r, begins);
        strbuf_done(&out);
}

static int setup(void **state) {
        (void) state;
        key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        return key && mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
        (void) state;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        EVP_PKEY_free(key);
        return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_certificates_go_through),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_host_store),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
