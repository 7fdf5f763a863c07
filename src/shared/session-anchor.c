/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fd-util.h"
#include "macro.h"
#include "session-anchor.h"
#include "string-util.h"

#define DELEGATION_DOMAIN "lazaret/session-delegation/v1\n"
#define REQUEST_DOMAIN    "lazaret/escalation-request/v1\n"

void session_key_wipe(SessionKey *k) {
        explicit_bzero(k, sizeof(*k));
}

/* An Ed25519 private key is 32 random bytes (RFC 8032 §5.1.5): taken from
 * the kernel's generator, the same source OpenSSL's own seeds itself from.
 * Asking OpenSSL's generator for them (EVP_PKEY_Q_keygen) first set up its
 * DRBG, which fetched and built every cipher of the default provider: 1.1
 * to 1.3 ms of each CLI's first key, measured, on the path of every join
 * (the signatures need no randomness: Ed25519's are deterministic). */
int session_key_new(SessionKey *ret) {
        *ret = (SessionKey){};
        for (size_t got = 0; got < SESSION_KEY_LEN;) {
                ssize_t k = getrandom(ret->priv + got, SESSION_KEY_LEN - got, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        int r = -errno;
                        session_key_wipe(ret);
                        return r;
                }
                got += (size_t) k;
        }
        EVP_PKEY *p = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, ret->priv, SESSION_KEY_LEN);
        size_t np = SESSION_KEY_LEN;
        int ok = p && EVP_PKEY_get_raw_public_key(p, ret->pub, &np) && np == SESSION_KEY_LEN;
        EVP_PKEY_free(p);
        if (!ok) {
                session_key_wipe(ret);
                return -EIO;
        }
        return 0;
}

char *session_b64(const unsigned char *data, size_t len) {
        char *out = malloc(4 * ((len + 2) / 3) + 1);
        if (!out)
                return NULL;
        int n = EVP_EncodeBlock((unsigned char *) out, data, (int) len);
        while (n > 0 && out[n - 1] == '=')
                n--;
        out[n] = '\0';
        for (char *p = out; *p; p++)
                *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
        return out;
}

int session_unb64(const char *text, unsigned char *ret, size_t len) {
        size_t n = text ? strlen(text) : 0;
        /* Exactly the unpadded length of len bytes. */
        if (n != (4 * len + 2) / 3 || n > 256)
                return -EINVAL;
        char buf[264];
        for (size_t i = 0; i < n; i++) {
                char c = text[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '_'))
                        return -EINVAL;
                buf[i] = c == '-' ? '+' : c == '_' ? '/' : c;
        }
        size_t padded = n;
        while (padded % 4)
                buf[padded++] = '=';
        unsigned char out[200];
        int m = EVP_DecodeBlock(out, (const unsigned char *) buf, (int) padded);
        if (m < 0 || (size_t) m < len)
                return -EINVAL;
        memcpy(ret, out, len);
        return 0;
}

static char *canonical(json_t *j) {
        return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
}

/* What is signed: domain || canonical(j) (caller frees). */
static unsigned char *message(const char *domain, json_t *j, size_t *ret_len) {
        _cleanup_free_ char *text = canonical(j);
        if (!text)
                return NULL;
        size_t dl = strlen(domain), tl = strlen(text);
        unsigned char *msg = malloc(dl + tl);
        if (!msg)
                return NULL;
        memcpy(msg, domain, dl);
        memcpy(msg + dl, text, tl);
        *ret_len = dl + tl;
        return msg;
}

/* Sign domain || canonical(j) with the raw Ed25519 private key. */
static int sign(const unsigned char priv[SESSION_KEY_LEN], const char *domain, json_t *j,
                unsigned char sig[SESSION_SIG_LEN]) {
        size_t len = 0;
        _cleanup_free_ unsigned char *msg = message(domain, j, &len);
        if (!msg)
                return -ENOMEM;
        EVP_PKEY *p = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, SESSION_KEY_LEN);
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        size_t n = SESSION_SIG_LEN;
        int ok = p && ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, p) == 1 &&
                 EVP_DigestSign(ctx, sig, &n, msg, len) == 1 && n == SESSION_SIG_LEN;
        EVP_MD_CTX_free(ctx);
        EVP_PKEY_free(p);
        return ok ? 0 : -EIO;
}

static bool verify(const unsigned char pub[SESSION_KEY_LEN], const char *domain, json_t *j, const char *sig_b64) {
        unsigned char sig[SESSION_SIG_LEN];
        if (session_unb64(sig_b64, sig, sizeof(sig)) < 0)
                return false;
        size_t len = 0;
        _cleanup_free_ unsigned char *msg = message(domain, j, &len);
        if (!msg)
                return false;
        EVP_PKEY *p = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, SESSION_KEY_LEN);
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        bool ok = p && ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, p) == 1 &&
                  EVP_DigestVerify(ctx, sig, sizeof(sig), msg, len) == 1;
        EVP_MD_CTX_free(ctx);
        EVP_PKEY_free(p);
        return ok;
}

int session_delegate(const SessionKey *anchor, uint64_t not_after, char **ret_credential) {
        SessionKey d;
        int r = session_key_new(&d);
        if (r < 0)
                return r;
        _cleanup_free_ char *pub = session_b64(d.pub, SESSION_KEY_LEN), *priv = session_b64(d.priv, SESSION_KEY_LEN);
        session_key_wipe(&d);
        json_t *del = json_pack("{s:s?, s:I}", "delegate", pub, "not_after", (json_int_t) not_after);
        unsigned char sig[SESSION_SIG_LEN];
        r = del && pub && priv ? sign(anchor->priv, DELEGATION_DOMAIN, del, sig) : -ENOMEM;
        char *sig_b64 = r >= 0 ? session_b64(sig, sizeof(sig)) : NULL;
        json_t *cred =
                sig_b64 ? json_pack("{s:O, s:s, s:s}", "delegation", del, "signature", sig_b64, "key", priv) : NULL;
        free(sig_b64);
        json_decref(del);
        *ret_credential = cred ? canonical(cred) : NULL;
        json_decref(cred);
        if (priv)
                explicit_bzero(priv, strlen(priv));
        if (r < 0)
                return r;
        return *ret_credential ? 0 : -ENOMEM;
}

int session_sign_request(const char *credential, json_t *request) {
        json_t *cred = json_loads(credential, JSON_REJECT_DUPLICATES, NULL);
        json_t *del = json_object_get(cred, "delegation");
        const char *dsig = json_string_value(json_object_get(cred, "signature"));
        SessionKey k = {};
        int r = -EINVAL;
        if (!json_is_object(del) || !dsig || !json_is_object(request) ||
            session_unb64(json_string_value(json_object_get(cred, "key")), k.priv, SESSION_KEY_LEN) < 0)
                goto out;
        (void) json_object_del(request, "signature");
        if (json_object_set(request, "delegation", del) < 0 ||
            json_object_set_new(request, "delegation_signature", json_string(dsig)) < 0) {
                r = -ENOMEM;
                goto out;
        }
        unsigned char sig[SESSION_SIG_LEN];
        r = sign(k.priv, REQUEST_DOMAIN, request, sig);
        if (r >= 0) {
                char *b = session_b64(sig, sizeof(sig));
                r = b && json_object_set_new(request, "signature", json_string(b)) == 0 ? 0 : -ENOMEM;
                free(b);
        }
out:
        session_key_wipe(&k);
        json_decref(cred);
        return r;
}

int session_verify_request(json_t *request, const unsigned char anchor_pub[SESSION_KEY_LEN], uint64_t now,
                           const char **ret_why) {
        json_t *del = json_object_get(request, "delegation");
        const char *sid = json_string_value(json_object_get(request, "session_id"));
        const char *dsig = json_string_value(json_object_get(request, "delegation_signature"));
        const char *sig = json_string_value(json_object_get(request, "signature"));
        *ret_why = "the request carries no delegation or signature";
        if (!json_is_object(del) || !sid || !dsig || !sig)
                return -EPERM;
        *ret_why = "the delegation was not signed by the session's anchor";
        if (!verify(anchor_pub, DELEGATION_DOMAIN, del, dsig))
                return -EPERM;
        json_t *na = json_object_get(del, "not_after");
        *ret_why = "the delegation has expired";
        if (!json_is_integer(na) || json_integer_value(na) < 0 || (uint64_t) json_integer_value(na) < now)
                return -EPERM;
        unsigned char dpub[SESSION_KEY_LEN];
        *ret_why = "the delegation names no valid key";
        if (session_unb64(json_string_value(json_object_get(del, "delegate")), dpub, sizeof(dpub)) < 0)
                return -EPERM;
        json_t *unsigned_req = json_copy(request);
        if (!unsigned_req)
                return -ENOMEM;
        (void) json_object_del(unsigned_req, "signature");
        bool ok = verify(dpub, REQUEST_DOMAIN, unsigned_req, sig);
        json_decref(unsigned_req);
        *ret_why = ok ? NULL : "the request's signature does not verify";
        return ok ? 0 : -EPERM;
}
