/* SPDX-License-Identifier: MIT */
/* The Trust Anchor: real TLS 1.3 handshakes over a socketpair, the server
 * in a thread. A valid sandbox certificate passes; no certificate, another
 * CA's, an expired one, another sandbox's or another profile's do not, nor
 * does a TLS 1.2 client or a client that does not trust our CA. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/err.h>

#include "trust.h"

typedef struct Server {
        SSL_CTX *ctx;
        int fd;
        int handshake; /* SSL_accept's result */
        int check; /* trust_check_peer's */
        const char *why;
        char got; /* the byte the client sent, after the check */
} Server;

static void *serve(void *p) {
        Server *s = p;
        SSL *ssl = SSL_new(s->ctx);
        SSL_set_fd(ssl, s->fd);
        s->handshake = SSL_accept(ssl);
        s->check = -1;
        if (s->handshake == 1) {
                s->check = trust_check_peer(ssl, "shell", "sandbox1", &s->why);
                if (s->check == 0 && SSL_read(ssl, &s->got, 1) == 1)
                        (void) SSL_write(ssl, "k", 1);
        }
        SSL_shutdown(ssl);
        SSL_free(ssl);
        close(s->fd);
        ERR_clear_error();
        return NULL;
}

typedef struct Result {
        int server_handshake, server_check, client_handshake;
        char reply;
        const char *why;
} Result;

static Result connect_with(const TrustCA *ca, SSL_CTX *client) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        Server s = { .fd = sv[0] };
        assert_int_equal(trust_server_ctx(ca, &s.ctx), 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, serve, &s), 0);
        SSL *ssl = SSL_new(client);
        SSL_set_fd(ssl, sv[1]);
        Result r = { .client_handshake = SSL_connect(ssl) };
        if (r.client_handshake == 1 && SSL_write(ssl, "x", 1) == 1)
                (void) SSL_read(ssl, &r.reply, 1);
        SSL_shutdown(ssl);
        SSL_free(ssl);
        close(sv[1]);
        assert_int_equal(pthread_join(t, NULL), 0);
        SSL_CTX_free(s.ctx);
        ERR_clear_error();
        r.server_handshake = s.handshake;
        r.server_check = s.check;
        r.why = s.why;
        return r;
}

static SSL_CTX *client_for(const TrustCA *trusted, const TrustCA *issuer, const char *profile, const char *sandbox,
                           int64_t nb, uint64_t life) {
        char *ca_pem = NULL, *cert = NULL, *key = NULL;
        assert_int_equal(trust_ca_pem(trusted, &ca_pem), 0);
        if (issuer)
                assert_int_equal(trust_issue_client(issuer, profile, sandbox, nb, life, &cert, &key), 0);
        SSL_CTX *ctx = NULL;
        assert_int_equal(trust_client_ctx(ca_pem, cert, key, &ctx), 0);
        free(ca_pem);
        free(cert);
        free(key);
        return ctx;
}

static void test_handshakes(void **state) {
        (void) state;
        TrustCA *ca = NULL, *other = NULL;
        assert_int_equal(trust_ca_new(3600, &ca), 0);
        assert_int_equal(trust_ca_new(3600, &other), 0);

        /* The sandbox's own certificate. */
        SSL_CTX *c = client_for(ca, ca, "shell", "sandbox1", -60, 600);
        Result r = connect_with(ca, c);
        assert_int_equal(r.client_handshake, 1);
        assert_int_equal(r.server_handshake, 1);
        assert_int_equal(r.server_check, 0);
        assert_int_equal(r.reply, 'k');
        SSL_CTX_free(c);

        /* No certificate at all. */
        c = client_for(ca, NULL, NULL, NULL, 0, 0);
        r = connect_with(ca, c);
        assert_int_not_equal(r.server_handshake, 1);
        assert_int_equal(r.reply, 0);
        SSL_CTX_free(c);

        /* A certificate from another CA. */
        c = client_for(ca, other, "shell", "sandbox1", -60, 600);
        r = connect_with(ca, c);
        assert_int_not_equal(r.server_handshake, 1);
        assert_int_equal(r.reply, 0);
        SSL_CTX_free(c);

        /* Expired an hour ago. */
        c = client_for(ca, ca, "shell", "sandbox1", -7200, 3600);
        r = connect_with(ca, c);
        assert_int_not_equal(r.server_handshake, 1);
        assert_int_equal(r.reply, 0);
        SSL_CTX_free(c);

        /* Not valid yet. */
        c = client_for(ca, ca, "shell", "sandbox1", 3600, 3600);
        r = connect_with(ca, c);
        assert_int_not_equal(r.server_handshake, 1);
        SSL_CTX_free(c);

        /* Our CA, but another sandbox's or another profile's certificate:
         * the handshake completes, the names do not fit, nothing is read. */
        c = client_for(ca, ca, "shell", "sandbox2", -60, 600);
        r = connect_with(ca, c);
        assert_int_equal(r.server_handshake, 1);
        assert_int_equal(r.server_check, -EPERM);
        assert_string_equal(r.why, "the client certificate is for another sandbox");
        assert_int_equal(r.reply, 0);
        SSL_CTX_free(c);
        c = client_for(ca, ca, "claude", "sandbox1", -60, 600);
        r = connect_with(ca, c);
        assert_int_equal(r.server_check, -EPERM);
        assert_string_equal(r.why, "the client certificate is for another profile");
        SSL_CTX_free(c);

        /* A client that does not trust our CA refuses the server. */
        c = client_for(other, ca, "shell", "sandbox1", -60, 600);
        r = connect_with(ca, c);
        assert_int_not_equal(r.client_handshake, 1);
        SSL_CTX_free(c);

        /* TLS 1.2 is not spoken. */
        c = client_for(ca, ca, "shell", "sandbox1", -60, 600);
        assert_true(SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION));
        assert_true(SSL_CTX_set_max_proto_version(c, TLS1_2_VERSION));
        r = connect_with(ca, c);
        assert_int_not_equal(r.server_handshake, 1);
        assert_int_not_equal(r.client_handshake, 1);
        SSL_CTX_free(c);

        trust_ca_free(ca);
        trust_ca_free(other);
}

static void test_names_refused(void **state) {
        (void) state;
        TrustCA *ca = NULL;
        assert_int_equal(trust_ca_new(60, &ca), 0);
        char *cert = NULL, *key = NULL;
        /* A comma would add a name of the caller's choosing. */
        assert_int_equal(trust_issue_client(ca, "shell,URI:urn:lazaret:sandbox:x", "s1", 0, 60, &cert, &key), -EINVAL);
        assert_int_equal(trust_issue_client(ca, "shell", "", 0, 60, &cert, &key), -EINVAL);
        assert_int_equal(trust_issue_client(ca, "", "s1", 0, 60, &cert, &key), -EINVAL);
        assert_null(cert);
        assert_int_equal(trust_issue_client(ca, "shell", "s1", 0, 60, &cert, &key), 0);
        assert_non_null(strstr(cert, "-----BEGIN CERTIFICATE-----"));
        assert_non_null(strstr(key, "-----BEGIN PRIVATE KEY-----"));
        free(cert);
        free(key);
        trust_ca_free(ca);
}

int main(void) {
        /* A refused peer closes its end while the other still writes. */
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_handshakes),
                cmocka_unit_test(test_names_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
