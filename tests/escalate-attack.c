/* SPDX-License-Identifier: MIT */
/* For tests/integration/test_escalation.py: what a process in the sandbox
 * could send to the Escalation Socket, besides what lazaret-escalate sends.
 *
 *   escalate-attack SOCKET CERTS SESSION_ID CREDENTIAL PROFILE MODE [COMMAND]
 *
 * MODE: good | replay | stale | badsig | extra | oversized | malformed |
 *       nocert. Prints one line per answer: "approved=A ran=R exit=N
 *       reason=TEXT", or "no answer" when the host closed without one. */
#include <errno.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl-proto.h"
#include "escalate-proto.h"
#include "fileio.h"
#include "session-anchor.h"
#include "trust.h"

static const char *sock_path, *certs;

static char *slurp(const char *name) {
        char p[4096], *t = NULL;
        snprintf(p, sizeof(p), "%s/%s", certs, name);
        return read_file_capped(p, 65536, &t, NULL) == 0 ? t : NULL;
}

/* Send one frame (header length `claimed`, body as given) and print the
 * answer. */
static void exchange(bool with_cert, const char *body, size_t len, uint32_t claimed) {
        char *ca = slurp("ca.pem"), *cert = with_cert ? slurp("client.pem") : NULL,
             *key = with_cert ? slurp("client.key") : NULL;
        SSL_CTX *ctx = NULL;
        if (trust_client_ctx(ca, cert, key, &ctx) < 0) {
                puts("bad certificates");
                exit(2);
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                puts("cannot connect");
                exit(2);
        }
        SSL *ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        unsigned char hdr[4];
        escalate_frame_header(claimed, hdr);
        size_t w;
        if (SSL_connect(ssl) != 1 || SSL_write_ex(ssl, hdr, 4, &w) != 1 ||
            (len && SSL_write_ex(ssl, body, len, &w) != 1)) {
                puts("no answer");
                goto out;
        }
        size_t got = 0, r;
        while (got < 4 && SSL_read_ex(ssl, hdr + got, 4 - got, &r) == 1)
                got += r;
        if (got < 4) {
                puts("no answer");
                goto out;
        }
        uint32_t n = escalate_frame_length(hdr);
        char *buf = malloc(n);
        got = 0;
        while (buf && got < n && SSL_read_ex(ssl, buf + got, n - got, &r) == 1)
                got += r;
        EscalateResponse resp;
        const char *why;
        if (got < n || escalate_response_parse(buf, n, &resp, &why) < 0) {
                puts("bad answer");
                goto out;
        }
        printf("approved=%d ran=%d exit=%d reason=%s\n", resp.approved, resp.ran, resp.exit_code,
               resp.reason ? resp.reason : "");
        escalate_response_done(&resp);
        free(buf);
out:
        SSL_free(ssl);
        close(fd);
        SSL_CTX_free(ctx);
        free(ca);
        free(cert);
        free(key);
        ERR_clear_error();
}

int main(int argc, char **argv) {
        if (argc < 7) {
                fprintf(stderr, "usage: escalate-attack SOCKET CERTS SESSION_ID CREDENTIAL PROFILE MODE [COMMAND]\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        sock_path = argv[1];
        certs = argv[2];
        const char *sid = argv[3], *cred = argv[4], *profile = argv[5], *mode = argv[6];
        const char *command = argc > 7 ? argv[7] : "uname -a";
        char rid[37];
        ctl_uuid_v4(rid);
        time_t now = time(NULL);
        json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "request_id", rid, "session_id", sid, "profile",
                                profile, "command", command, "justification", "test", "timestamp",
                                (json_int_t) (strcmp(mode, "stale") == 0 ? now - 3600 : now));
        if (session_sign_request(cred, req) < 0) {
                puts("bad credential");
                return 2;
        }
        if (strcmp(mode, "badsig") == 0)
                json_object_set_new(req, "command", json_string("uname -a; id"));
        if (strcmp(mode, "extra") == 0)
                json_object_set_new(req, "extra", json_true());
        char *text = json_dumps(req, JSON_COMPACT);
        size_t len = strlen(text);
        if (strcmp(mode, "oversized") == 0)
                exchange(true, "", 0, 100000);
        else if (strcmp(mode, "malformed") == 0)
                exchange(true, "{not json", 9, 9);
        else if (strcmp(mode, "nocert") == 0)
                exchange(false, text, len, (uint32_t) len);
        else {
                exchange(true, text, len, (uint32_t) len);
                if (strcmp(mode, "replay") == 0)
                        exchange(true, text, len, (uint32_t) len);
        }
        free(text);
        json_decref(req);
        return 0;
}
