/* SPDX-License-Identifier: MIT */
#pragma once

/* The Trust Anchor (spec §5.1.1, decision 10): an ECDSA P-256 certificate
 * authority made in memory when a coordinator starts, never written down;
 * a short-lived client certificate per sandbox whose subject alternative
 * names say which profile and which sandbox it is
 * (urn:lazaret:profile:NAME, urn:lazaret:sandbox:ID); a server certificate
 * for the coordinator's end (urn:lazaret:coordinator). TLS 1.3 only, the
 * client's certificate required, checked (chain, time, purpose, both names)
 * before a byte of payload is read. */

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct TrustCA TrustCA;

/* A new CA, valid from a minute ago for lifetime_sec. */
/* Each host program calls this first, before any other OpenSSL call: the
 * system's openssl.cnf is then never read (trust.c says why). */
void crypto_init(void);

int trust_ca_new(uint64_t lifetime_sec, TrustCA **ret);
TrustCA *trust_ca_free(TrustCA *ca);

/* The CA certificate as PEM (caller frees). */
int trust_ca_pem(const TrustCA *ca, char **ret_pem);

/* Issue a client certificate for (profile, sandbox_id), valid from
 * not_before_offset seconds from now (negative: in the past) for
 * lifetime_sec; PEM of the certificate and of its new private key (caller
 * frees both). An expired certificate for the tests is issued with a
 * not_before far enough back. */
int trust_issue_client(const TrustCA *ca, const char *profile, const char *sandbox_id, int64_t not_before_offset,
                       uint64_t lifetime_sec, char **ret_cert_pem, char **ret_key_pem);

/* The server side: TLS 1.3 only, our server certificate, client
 * certificates required and verified against this CA; each accepted peer
 * must then pass trust_check_peer. */
int trust_server_ctx(const TrustCA *ca, SSL_CTX **ret);

/* The client side (lazaret-escalate, the tests): TLS 1.3 only, trusts only
 * ca_pem, and checks the server's urn:lazaret:coordinator name. */
int trust_client_ctx(const char *ca_pem, const char *cert_pem, const char *key_pem, SSL_CTX **ret);

/* After the handshake: the peer's certificate names exactly this profile
 * and sandbox (and OpenSSL verified its chain and time). 0, or -EPERM with
 * *ret_why (static text). */
int trust_check_peer(SSL *ssl, const char *profile, const char *sandbox_id, const char **ret_why);
