/* SPDX-License-Identifier: MIT */
#pragma once

/* The Session Anchor (spec §4.3.5 step 3, §5.1.1, decision 10). Each CLI
 * holds an Ed25519 keypair and registers the public key with its session.
 * For each exec it delegates a fresh Ed25519 keypair: the anchor signs
 * {delegate public key, not_after}, and the exec gets the delegation and
 * the delegate's private key (never the anchor's) in its environment as
 * one credential. lazaret-escalate signs each request with the delegate
 * key; the coordinator checks the delegation against the anchor key it
 * holds for the request's session_id (so a delegation binds to the session
 * whose anchor signed it), its time, and the request's signature.
 *
 * Signed bytes are a domain separator and the compact, key-sorted, ASCII
 * JSON of the object (jansson), so both sides serialize alike. Keys and
 * signatures travel as unpadded base64url. */

#include <jansson.h>
#include <stdint.h>

#define ESCALATE_DELEGATION_SEC (UINT64_C(24) * 3600) /* how long an exec's credential holds */
#define SESSION_KEY_LEN         32 /* Ed25519 public and private (seed) keys */
#define SESSION_SIG_LEN         64

typedef struct SessionKey {
        unsigned char pub[SESSION_KEY_LEN];
        unsigned char priv[SESSION_KEY_LEN]; /* all zero for a public key alone */
} SessionKey;

int session_key_new(SessionKey *ret);
/* Wipe a key (explicit_bzero). */
void session_key_wipe(SessionKey *k);

/* base64url without padding; caller frees / ret must hold len bytes. */
char *session_b64(const unsigned char *data, size_t len);
int session_unb64(const char *text, unsigned char *ret, size_t len);

/* The credential for one exec: JSON text {"delegation": {delegate,
 * not_after}, "signature", "key"} (caller frees). */
int session_delegate(const SessionKey *anchor, uint64_t not_after, char **ret_credential);

/* Sign request (an object without "signature") with the credential's
 * delegate key: adds "delegation", "delegation_signature" and "signature".
 * -EINVAL for a credential that does not parse. */
int session_sign_request(const char *credential, json_t *request);

/* Check a signed request against the anchor's public key for its session
 * at time now: 0, or -EPERM with *ret_why (static text). The request is
 * left as it is. */
int session_verify_request(json_t *request, const unsigned char anchor_pub[SESSION_KEY_LEN], uint64_t now,
                           const char **ret_why);
