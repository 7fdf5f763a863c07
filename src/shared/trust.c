/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "trust.h"

/* What Lazaret asks of OpenSSL is fixed: SHA-1 and SHA-256 of git objects,
 * SHA-256 and SHA-512 digests, Ed25519 and ECDSA P-256 keys and signatures,
 * TLS 1.3 between keys of its own. The system's openssl.cnf, which OpenSSL reads and applies
 * at a program's first use of it unless told not to, cost 0.8 to 1.5 ms of
 * CPU in each program that used it (every CLI, coordinator and git router:
 * measured, a digest and a key with and without it), on the path of every
 * start and join; all it could change here is to break one of those (a
 * default that fetches only from a FIPS provider, which has no Ed25519) or
 * load a module into a program that holds the Domain's keys. The sandbox's
 * own escalation client does the same (escalate.c). libssl's own start,
 * later and only where TLS is used, finds the configuration done. */
void crypto_init(void) {
        (void) OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
}

#define URI_PROFILE     "urn:lazaret:profile:"
#define URI_SANDBOX     "urn:lazaret:sandbox:"
#define URI_COORDINATOR "urn:lazaret:coordinator"

struct TrustCA {
        EVP_PKEY *key;
        X509 *cert;
        EVP_PKEY *server_key;
        X509 *server_cert;
};

TrustCA *trust_ca_free(TrustCA *ca) {
        if (!ca)
                return NULL;
        EVP_PKEY_free(ca->key);
        X509_free(ca->cert);
        EVP_PKEY_free(ca->server_key);
        X509_free(ca->server_cert);
        free(ca);
        return NULL;
}

/* Names go into certificate extensions written as OpenSSL configuration
 * text: nothing there may be a separator. */
static bool name_ok(const char *s, size_t max) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > max)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
                      *p == '_' || *p == '.'))
                        return false;
        return true;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!ext)
                return -EINVAL;
        int ok = X509_add_ext(cert, ext, -1);
        X509_EXTENSION_free(ext);
        return ok ? 0 : -ENOMEM;
}

typedef enum { CERT_CA, CERT_CLIENT, CERT_SERVER } CertKind;

/* A certificate for key, signed by issuer_key (issuer NULL: self-signed). */
static int make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, int64_t not_before_offset,
                     uint64_t lifetime_sec, CertKind kind, const char *san, X509 **ret) {
        X509 *x = X509_new();
        BIGNUM *bn = BN_new();
        int r = -ENOMEM;
        if (!x || !bn)
                goto out;
        if (!X509_set_version(x, 2) || !BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
            !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)))
                goto out;
        if (!X509_gmtime_adj(X509_getm_notBefore(x), (long) not_before_offset) ||
            !X509_gmtime_adj(X509_getm_notAfter(x), (long) (not_before_offset + (int64_t) lifetime_sec)))
                goto out;
        if (!X509_set_pubkey(x, key))
                goto out;
        X509_NAME *name = X509_get_subject_name(x);
        if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *) "Lazaret", -1, -1, 0) ||
            !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *) cn, -1, -1, 0))
                goto out;
        if (!X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name))
                goto out;
        X509 *iss = issuer ? issuer : x;
        r = add_ext(x, iss, NID_basic_constraints,
                    kind == CERT_CA ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE");
        if (r >= 0)
                r = add_ext(x, iss, NID_key_usage,
                            kind == CERT_CA ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
        if (r >= 0 && kind != CERT_CA)
                r = add_ext(x, iss, NID_ext_key_usage, kind == CERT_CLIENT ? "clientAuth" : "serverAuth");
        if (r >= 0)
                r = add_ext(x, iss, NID_subject_key_identifier, "hash");
        if (r >= 0 && kind != CERT_CA)
                r = add_ext(x, iss, NID_authority_key_identifier, "keyid:always");
        if (r >= 0 && san)
                r = add_ext(x, iss, NID_subject_alt_name, san);
        if (r < 0)
                goto out;
        r = X509_sign(x, issuer_key, EVP_sha256()) > 0 ? 0 : -EIO;
out:
        BN_free(bn);
        if (r < 0) {
                X509_free(x);
                return r;
        }
        *ret = x;
        return 0;
}

int trust_ca_new(uint64_t lifetime_sec, TrustCA **ret) {
        TrustCA *ca = calloc(1, sizeof(TrustCA));
        if (!ca)
                return -ENOMEM;
        int r = -ENOMEM;
        ca->key = EVP_EC_gen("P-256");
        ca->server_key = EVP_EC_gen("P-256");
        if (!ca->key || !ca->server_key)
                goto fail;
        r = make_cert(ca->key, "Lazaret Trust Anchor", NULL, ca->key, -60, lifetime_sec + 60, CERT_CA, NULL, &ca->cert);
        if (r >= 0)
                r = make_cert(ca->server_key, "Lazaret coordinator", ca->cert, ca->key, -60, lifetime_sec + 60,
                              CERT_SERVER, "URI:" URI_COORDINATOR, &ca->server_cert);
        if (r < 0)
                goto fail;
        *ret = ca;
        return 0;
fail:
        trust_ca_free(ca);
        return r;
}

static int pem_of(int (*write)(BIO *, void *), void *obj, char **ret) {
        BIO *b = BIO_new(BIO_s_mem());
        if (!b)
                return -ENOMEM;
        int r = -EIO;
        if (write(b, obj)) {
                char *data = NULL;
                long n = BIO_get_mem_data(b, &data);
                /* Not NUL-terminated: copy by length. */
                *ret = n > 0 ? malloc((size_t) n + 1) : NULL;
                if (*ret) {
                        memcpy(*ret, data, (size_t) n);
                        (*ret)[n] = '\0';
                }
                r = *ret ? 0 : -ENOMEM;
        }
        BIO_free(b);
        return r;
}

static int write_x509(BIO *b, void *x) {
        return PEM_write_bio_X509(b, x);
}

static int write_key(BIO *b, void *k) {
        return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

int trust_ca_pem(const TrustCA *ca, char **ret_pem) {
        return pem_of(write_x509, ca->cert, ret_pem);
}

int trust_issue_client(const TrustCA *ca, const char *profile, const char *sandbox_id, int64_t not_before_offset,
                       uint64_t lifetime_sec, char **ret_cert_pem, char **ret_key_pem) {
        if (!name_ok(profile, 64) || !name_ok(sandbox_id, 128))
                return -EINVAL;
        char san[256], cn[160];
        snprintf(san, sizeof(san), "URI:" URI_PROFILE "%s,URI:" URI_SANDBOX "%s", profile, sandbox_id);
        snprintf(cn, sizeof(cn), "sandbox %.128s", sandbox_id);
        EVP_PKEY *key = EVP_EC_gen("P-256");
        if (!key)
                return -ENOMEM;
        X509 *cert = NULL;
        int r = make_cert(key, cn, ca->cert, ca->key, not_before_offset, lifetime_sec, CERT_CLIENT, san, &cert);
        char *cp = NULL, *kp = NULL;
        if (r >= 0)
                r = pem_of(write_x509, cert, &cp);
        if (r >= 0)
                r = pem_of(write_key, key, &kp);
        X509_free(cert);
        EVP_PKEY_free(key);
        if (r < 0) {
                free(cp);
                return r;
        }
        *ret_cert_pem = cp;
        *ret_key_pem = kp;
        return 0;
}

static SSL_CTX *ctx_new(const SSL_METHOD *m) {
        SSL_CTX *ctx = SSL_CTX_new(m);
        if (!ctx)
                return NULL;
        if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
            !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION)) {
                SSL_CTX_free(ctx);
                return NULL;
        }
        /* No session tickets or resumption: every connection shows its
         * certificate. */
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        (void) SSL_CTX_set_num_tickets(ctx, 0);
        return ctx;
}

int trust_server_ctx(const TrustCA *ca, SSL_CTX **ret) {
        SSL_CTX *ctx = ctx_new(TLS_server_method());
        if (!ctx)
                return -ENOMEM;
        X509_STORE *store = SSL_CTX_get_cert_store(ctx);
        if (!SSL_CTX_use_certificate(ctx, ca->server_cert) || !SSL_CTX_use_PrivateKey(ctx, ca->server_key) ||
            !SSL_CTX_check_private_key(ctx) || !X509_STORE_add_cert(store, ca->cert) ||
            !SSL_CTX_add_client_CA(ctx, ca->cert) || !SSL_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT)) {
                SSL_CTX_free(ctx);
                return -EIO;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        SSL_CTX_set_verify_depth(ctx, 1);
        *ret = ctx;
        return 0;
}

/* The URIs among cert's subject alternative names, each passed to f. */
static int for_each_uri(X509 *cert, int (*f)(const char *uri, size_t len, void *ud), void *ud) {
        GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
        if (!names)
                return 0;
        int r = 0;
        for (int i = 0; r == 0 && i < sk_GENERAL_NAME_num(names); i++) {
                const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
                if (g->type != GEN_URI) {
                        r = -EPERM; /* only our URIs, nothing else */
                        continue;
                }
                const ASN1_IA5STRING *s = g->d.uniformResourceIdentifier;
                r = f((const char *) ASN1_STRING_get0_data(s), (size_t) ASN1_STRING_length(s), ud);
        }
        GENERAL_NAMES_free(names);
        return r;
}

static int is_coordinator(const char *uri, size_t len, void *ud) {
        bool *found = ud;
        if (len == strlen(URI_COORDINATOR) && memcmp(uri, URI_COORDINATOR, len) == 0)
                *found = true;
        return 0;
}

static int server_verify(int preverify_ok, X509_STORE_CTX *x) {
        if (!preverify_ok)
                return 0;
        if (X509_STORE_CTX_get_error_depth(x) != 0)
                return 1;
        bool found = false;
        if (for_each_uri(X509_STORE_CTX_get_current_cert(x), is_coordinator, &found) < 0 || !found) {
                X509_STORE_CTX_set_error(x, X509_V_ERR_HOSTNAME_MISMATCH);
                return 0;
        }
        return 1;
}

int trust_client_ctx(const char *ca_pem, const char *cert_pem, const char *key_pem, SSL_CTX **ret) {
        SSL_CTX *ctx = ctx_new(TLS_client_method());
        if (!ctx)
                return -ENOMEM;
        int r = -EINVAL;
        BIO *b = BIO_new_mem_buf(ca_pem, -1);
        X509 *ca = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        BIO_free(b);
        X509 *cert = NULL;
        EVP_PKEY *key = NULL;
        if (cert_pem && key_pem) {
                b = BIO_new_mem_buf(cert_pem, -1);
                cert = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
                BIO_free(b);
                b = BIO_new_mem_buf(key_pem, -1);
                key = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
                BIO_free(b);
                if (!cert || !key)
                        goto out;
        }
        if (!ca || !X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca) ||
            !SSL_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER))
                goto out;
        if (cert && (!SSL_CTX_use_certificate(ctx, cert) || !SSL_CTX_use_PrivateKey(ctx, key) ||
                     !SSL_CTX_check_private_key(ctx)))
                goto out;
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, server_verify);
        SSL_CTX_set_verify_depth(ctx, 1);
        r = 0;
out:
        X509_free(ca);
        X509_free(cert);
        EVP_PKEY_free(key);
        if (r < 0) {
                SSL_CTX_free(ctx);
                return r;
        }
        *ret = ctx;
        return 0;
}

typedef struct PeerNames {
        const char *profile, *sandbox;
        unsigned seen_profile, seen_sandbox, other;
} PeerNames;

static int peer_uri(const char *uri, size_t len, void *ud) {
        PeerNames *p = ud;
        size_t lp = strlen(URI_PROFILE), ls = strlen(URI_SANDBOX);
        if (len > lp && memcmp(uri, URI_PROFILE, lp) == 0)
                p->seen_profile +=
                        len - lp == strlen(p->profile) && memcmp(uri + lp, p->profile, len - lp) == 0 ? 1 : 100;
        else if (len > ls && memcmp(uri, URI_SANDBOX, ls) == 0)
                p->seen_sandbox +=
                        len - ls == strlen(p->sandbox) && memcmp(uri + ls, p->sandbox, len - ls) == 0 ? 1 : 100;
        else
                p->other++;
        return 0;
}

int trust_check_peer(SSL *ssl, const char *profile, const char *sandbox_id, const char **ret_why) {
        *ret_why = NULL;
        X509 *peer = SSL_get1_peer_certificate(ssl);
        if (!peer) {
                *ret_why = "no client certificate";
                return -EPERM;
        }
        int r = 0;
        if (SSL_get_verify_result(ssl) != X509_V_OK) {
                *ret_why = "the client certificate was not verified";
                r = -EPERM;
        } else {
                PeerNames names = { profile, sandbox_id, 0, 0, 0 };
                if (for_each_uri(peer, peer_uri, &names) < 0 || names.other) {
                        *ret_why = "the client certificate carries names that are not ours";
                        r = -EPERM;
                } else if (names.seen_profile != 1) {
                        *ret_why = "the client certificate is for another profile";
                        r = -EPERM;
                } else if (names.seen_sandbox != 1) {
                        *ret_why = "the client certificate is for another sandbox";
                        r = -EPERM;
                }
        }
        X509_free(peer);
        return r;
}
