/* SPDX-License-Identifier: MIT */
/* lazaret-escalate [--why TEXT] [--] COMMAND [ARG...]
 *
 * The Escalation Client (spec §5.1.2), mounted read-only in the sandbox: it
 * asks the host to run COMMAND. With one argument the argument is the
 * command line as written; with more they are quoted so that the host
 * splits them back into exactly these words. The request carries a fresh
 * uuid, this session's id, the profile, the justification and the time, is
 * signed with the session credential in this process's environment, and
 * goes over mutual TLS 1.3 to the Escalation Socket. The host command's
 * output is written to ours and its exit status becomes ours; a refusal
 * prints why and exits 126; a failure to ask exits 125 with the reason.
 *
 * Environment (set by the coordinator for every session):
 *   LAZARET_SESSION_ID, LAZARET_SESSION_CREDENTIAL, LAZARET_PROFILE
 *   LAZARET_ESCALATE_SOCKET (default: the sandbox's dispenser at
 *     /run/lazaret/dispense/escalate, else /run/lazaret/sock/escalate.sock)
 *   LAZARET_CERTS           (default /run/lazaret/certs)
 * Static: it runs in any image. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl-proto.h"
#include "dispense.h"
#include "escalate-proto.h"
#include "fileio.h"
#include "macro.h"
#include "session-anchor.h"
#include "strbuf.h"
#include "trust.h"

#define EXIT_DENIED 126
#define EXIT_FAILED 125

static int fail(const char *fmt, ...) _printf_(1, 2);
static int fail(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("lazaret-escalate: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return EXIT_FAILED;
}

/* Quote a word so that a POSIX shell-words split gives it back. */
static void put_word(StrBuf *b, const char *w) {
        bool plain = *w != '\0';
        for (const char *p = w; *p && plain; p++)
                plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                        strchr("@%+=:,./_-", *p);
        if (plain) {
                strbuf_puts(b, w);
                return;
        }
        strbuf_putc(b, '\'');
        for (const char *p = w; *p; p++)
                if (*p == '\'')
                        strbuf_puts(b, "'\"'\"'");
                else
                        strbuf_putc(b, *p);
        strbuf_putc(b, '\'');
}

static char *read_text(const char *dir, const char *name) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        char *text = NULL;
        return read_file_capped(path, 64 * 1024, &text, NULL) == 0 ? text : NULL;
}

static bool ssl_write_all(SSL *ssl, const void *p, size_t n) {
        size_t done = 0;
        while (done < n) {
                size_t w = 0;
                if (SSL_write_ex(ssl, (const char *) p + done, n - done, &w) != 1)
                        return false;
                done += w;
        }
        return true;
}

static bool ssl_read_all(SSL *ssl, void *p, size_t n) {
        size_t done = 0;
        while (done < n) {
                size_t r = 0;
                if (SSL_read_ex(ssl, (char *) p + done, n - done, &r) != 1)
                        return false;
                done += r;
        }
        return true;
}

static void write_all(int fd, const unsigned char *p, size_t n) {
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return;
                p += w;
                n -= (size_t) w;
        }
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "why", required_argument, NULL, 'w' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *why = "";
        int c;
        /* The host closes after its answer; a write to it then must not
         * kill us before the output is out. */
        signal(SIGPIPE, SIG_IGN);
        /* No openssl.cnf from the image: nothing to load, nothing to parse. */
        OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) >= 0)
                switch (c) {
                case 'w':
                        why = optarg;
                        break;
                case 'h':
                        printf("Usage: lazaret-escalate [--why TEXT] [--] COMMAND [ARG...]\n\n"
                               "Ask the person at the host to run COMMAND on the host, in the workspace.\n"
                               "Prints its output and exits with its status; 126 when refused.\n");
                        return 0;
                default:
                        return 64;
                }
        if (optind >= argc) {
                fprintf(stderr, "lazaret-escalate: no command; usage: lazaret-escalate [--why TEXT] [--] COMMAND "
                                "[ARG...]\n");
                return 64;
        }
        StrBuf cmd = STRBUF_INIT;
        if (argc - optind == 1)
                strbuf_puts(&cmd, argv[optind]);
        else
                for (int i = optind; i < argc; i++) {
                        if (i > optind)
                                strbuf_putc(&cmd, ' ');
                        put_word(&cmd, argv[i]);
                }
        char *command = strbuf_steal(&cmd);

        const char *sid = getenv("LAZARET_SESSION_ID"), *cred = getenv("LAZARET_SESSION_CREDENTIAL"),
                   *profile = getenv("LAZARET_PROFILE"), *sock = getenv("LAZARET_ESCALATE_SOCKET"),
                   *certs = getenv("LAZARET_CERTS");
        if (!sid || !cred || !profile)
                return fail("this is no Lazaret session (LAZARET_SESSION_ID, LAZARET_SESSION_CREDENTIAL or "
                            "LAZARET_PROFILE is not set)");
        bool sock_given = sock != NULL;
        if (!sock)
                sock = "/run/lazaret/sock/escalate.sock";
        if (!certs)
                certs = "/run/lazaret/certs";
        if (!command)
                return fail("out of memory");

        char rid[37];
        if (ctl_uuid_v4(rid) < 0)
                return fail("cannot make a request id");
        json_t *req =
                json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "request_id", rid, "session_id", sid, "profile", profile,
                          "command", command, "justification", why, "timestamp", (json_int_t) time(NULL));
        if (!req || session_sign_request(cred, req) < 0)
                return fail("the session credential in LAZARET_SESSION_CREDENTIAL is not usable");
        char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        if (!text || strlen(text) > ESCALATE_REQUEST_MAX)
                return fail("the request is too large (the command may be at most 16 KiB)");

        char *ca = read_text(certs, "ca.pem"), *cert = read_text(certs, "client.pem"),
             *key = read_text(certs, "client.key");
        if (!ca || !cert || !key)
                return fail("cannot read the sandbox's certificates in %s", certs);
        SSL_CTX *ctx = NULL;
        if (trust_client_ctx(ca, cert, key, &ctx) < 0)
                return fail("the certificates in %s are not usable", certs);

        /* Through the sandbox's dispenser (gVisor: shared/dispense.h), or
         * at the socket's path (the native backend; or the one
         * LAZARET_ESCALATE_SOCKET names, always directly). */
        const char *via = sock;
        int fd = dispense_connect(sock_given ? 0 : DISPENSE_ESCALATE, sock, 0, &via);
        if (fd < 0) {
                errno = -fd;
                return fail("cannot reach the host at %s: %m (is [escalation] enabled?)", via);
        }
        SSL *ssl = SSL_new(ctx);
        if (!ssl || !SSL_set_fd(ssl, fd) || SSL_connect(ssl) != 1)
                return fail("the TLS handshake with the host failed");

        unsigned char hdr[4];
        escalate_frame_header((uint32_t) strlen(text), hdr);
        if (!ssl_write_all(ssl, hdr, 4) || !ssl_write_all(ssl, text, strlen(text)))
                return fail("the host closed the connection");
        /* The answer comes when the command has run, or was refused. */
        if (!ssl_read_all(ssl, hdr, 4))
                return fail("the host closed the connection without an answer (refused: bad certificate, "
                            "signature or request)");
        uint32_t n = escalate_frame_length(hdr);
        if (n == 0 || n > ESCALATE_RESPONSE_MAX)
                return fail("the host's answer is malformed");
        char *buf = malloc(n);
        if (!buf || !ssl_read_all(ssl, buf, n))
                return fail("the host closed the connection mid-answer");
        EscalateResponse resp;
        const char *bad = NULL;
        if (escalate_response_parse(buf, n, &resp, &bad) < 0 || strcmp(resp.request_id, rid) != 0)
                return fail("the host's answer is malformed (%s)", bad ? bad : "another request's id");
        write_all(STDOUT_FILENO, resp.out, resp.out_len);
        write_all(STDERR_FILENO, resp.err, resp.err_len);
        if (resp.out_truncated)
                fprintf(stderr, "lazaret-escalate: the host command's standard output was cut at %zu bytes\n",
                        resp.out_len);
        if (resp.err_truncated)
                fprintf(stderr, "lazaret-escalate: the host command's standard error was cut at %zu bytes\n",
                        resp.err_len);
        if (!resp.approved || !resp.ran) {
                fprintf(stderr, "lazaret-escalate: %s\n", resp.reason ? resp.reason : "denied by the user");
                return EXIT_DENIED;
        }
        return resp.exit_code;
}
