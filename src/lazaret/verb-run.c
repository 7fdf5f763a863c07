/* SPDX-License-Identifier: MIT */
/* lazaret run [PROFILE] [-- CMD [ARG...]] */
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "config.h"
#include "fd-util.h"
#include "fileio.h"
#include "launch.h"
#include "log.h"
#include "path-util.h"
#include "profile-pick.h"
#include "session-anchor.h"
#include "strbuf.h"
#include "string-util.h"
#include "verbs.h"

#define TERMINFO_FILE_MAX CTL_TERMINFO_MAX

static struct termios saved_tio;
static bool tio_saved;

static void restore_terminal(void) {
        if (tio_saved)
                (void) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
        tio_saved = false;
}

/* The compiled terminfo entry TERM resolves to on this host, searched like
 * ncurses does: $TERMINFO, ~/.terminfo, $TERMINFO_DIRS, then the system
 * directories. Kitty, Ghostty and Alacritty install theirs in one of these. */
static int find_terminfo(const char *term, char **ret_data, size_t *ret_len) {
        const char *home = getenv("HOME");
        StrBuf dirs = STRBUF_INIT;
        if (getenv("TERMINFO"))
                strbuf_printf(&dirs, "%s:", getenv("TERMINFO"));
        if (home)
                strbuf_printf(&dirs, "%s/.terminfo:", home);
        if (getenv("TERMINFO_DIRS"))
                strbuf_printf(&dirs, "%s:", getenv("TERMINFO_DIRS"));
        strbuf_puts(&dirs, "/etc/terminfo:/lib/terminfo:/usr/share/terminfo:/usr/lib/terminfo");
        _cleanup_free_ char *list = strbuf_steal(&dirs);
        if (!list)
                return -ENOMEM;
        for (char *save = NULL, *d = strtok_r(list, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                if (!path_is_absolute(d))
                        continue;
                /* Entries live under their first letter, or (macOS-style
                 * builds) under its hex code. */
                char first[2] = { term[0], 0 }, hex[3];
                snprintf(hex, sizeof(hex), "%02x", (unsigned char) term[0]);
                const char *subs[] = { first, hex };
                for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                        StrBuf f = STRBUF_INIT;
                        strbuf_printf(&f, "%s/%s/%s", d, subs[i], term);
                        int r = read_file_capped(strbuf_str(&f), TERMINFO_FILE_MAX, ret_data, ret_len);
                        strbuf_done(&f);
                        if (r == 0)
                                return 0;
                }
        }
        return -ENOENT;
}

static bool term_name_ok(const char *t) {
        size_t n = strlen(t);
        return n > 0 && n <= 256 &&
               strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") == n;
}

static int exit_status_of(const CtlMessage *m) {
        switch (m->outcome) {
        case CTL_EXIT_EXITED:
                return m->exit_code;
        case CTL_EXIT_TERMINATED:
                return 128 + m->exit_signal;
        case CTL_EXIT_RUNTIME_LOST:
        case _CTL_EXIT_MAX:
        case _CTL_EXIT_INVALID:
                break;
        }
        return EXIT_LAZARET;
}

static int send_resize(int fd, const char *sid) {
        struct winsize ws = {};
        if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
                return 0;
        CtlMessage m = { .type = CTL_TERMINAL_RESIZE,
                         .rows = ws.ws_row,
                         .columns = ws.ws_col,
                         .pixel_width = ws.ws_xpixel,
                         .pixel_height = ws.ws_ypixel };
        memcpy(m.session_id, sid, 37);
        return client_send(fd, &m);
}

/* Relay until the session ends. Returns the exit status. */
static int relay(int fd, CtlReader *rd, const char *sid, bool interactive) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGWINCH);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGQUIT);
        sigaddset(&mask, SIGTSTP);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        _cleanup_close_ int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                return log_error_errno(errno, "signalfd: %s", strerror(errno)), EXIT_LAZARET;

        bool stdin_open = true;
        for (;;) {
                struct pollfd pfd[3] = {
                        { .fd = fd, .events = POLLIN },
                        { .fd = sfd, .events = POLLIN },
                        { .fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN },
                };
                /* Frames already buffered come first. */
                const uint8_t *p;
                size_t len;
                int k = ctl_reader_next(rd, &p, &len);
                if (k < 0) {
                        restore_terminal();
                        log_error("the coordinator sent an invalid frame");
                        return EXIT_LAZARET;
                }
                if (k > 0) {
                        CtlMessage m = {};
                        const char *why = NULL;
                        if (ctl_message_decode(p, len, &m, &why) < 0) {
                                restore_terminal();
                                log_error("the coordinator sent an invalid frame: %s", why ? why : "?");
                                return EXIT_LAZARET;
                        }
                        if (m.type == CTL_TERMINAL_OUTPUT && streq(m.session_id, sid)) {
                                if (write_all(m.stream == 2 ? STDERR_FILENO : STDOUT_FILENO, m.bytes, m.n_bytes) ==
                                    -EPIPE) {
                                        /* Our reader is gone (| head): end the
                                         * session as a local pipe would. */
                                        CtlMessage c = { .type = CTL_SESSION_CLOSE };
                                        memcpy(c.session_id, sid, 37);
                                        (void) client_send(fd, &c);
                                        ctl_message_done(&m);
                                        restore_terminal();
                                        return 128 + SIGPIPE;
                                }
                        } else if (m.type == CTL_SESSION_EXIT && streq(m.session_id, sid)) {
                                int st = exit_status_of(&m);
                                restore_terminal();
                                if (m.message)
                                        fprintf(stderr, "%slazaret: %s\n", interactive ? "\r\n" : "", m.message);
                                ctl_message_done(&m);
                                return st;
                        } else if (m.type == CTL_ERROR) {
                                restore_terminal();
                                log_error("the coordinator refused: %s", m.message ? m.message : "?");
                                ctl_message_done(&m);
                                return EXIT_LAZARET;
                        }
                        ctl_message_done(&m);
                        continue;
                }
                if (poll(pfd, 3, -1) < 0 && errno != EINTR)
                        return EXIT_LAZARET;
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        uint8_t buf[65536];
                        size_t room = ctl_reader_room(rd);
                        ssize_t n = read(fd, buf, room < sizeof(buf) && room > 0 ? room : sizeof(buf));
                        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (n <= 0 || ctl_reader_feed(rd, buf, (size_t) n) < 0) {
                                restore_terminal();
                                log_error("lost the connection to the sandbox's coordinator%s",
                                          n == 0 ? " (it closed)" : "");
                                return EXIT_LAZARET;
                        }
                        continue;
                }
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                                CtlMessage m = { .type = CTL_TERMINAL_SIGNAL };
                                memcpy(m.session_id, sid, 37);
                                switch (si.ssi_signo) {
                                case SIGWINCH:
                                        if (interactive)
                                                (void) send_resize(fd, sid);
                                        continue;
                                case SIGINT:
                                        m.signal = CTL_SIGNAL_INTERRUPT;
                                        break;
                                case SIGQUIT:
                                        m.signal = CTL_SIGNAL_QUIT;
                                        break;
                                case SIGTSTP:
                                        m.signal = CTL_SIGNAL_SUSPEND;
                                        break;
                                default: {
                                        /* SIGTERM, SIGHUP: we leave; the session ends. */
                                        CtlMessage c = { .type = CTL_SESSION_CLOSE };
                                        memcpy(c.session_id, sid, 37);
                                        (void) client_send(fd, &c);
                                        restore_terminal();
                                        return 128 + (int) si.ssi_signo;
                                }
                                }
                                (void) client_send(fd, &m);
                        }
                }
                if (stdin_open && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
                        uint8_t buf[65536];
                        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
                        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        CtlMessage m = { .type = CTL_TERMINAL_INPUT };
                        memcpy(m.session_id, sid, 37);
                        if (n <= 0) {
                                stdin_open = false;
                                m.eof = true;
                        } else {
                                m.bytes = buf;
                                m.n_bytes = (size_t) n;
                        }
                        if (client_send(fd, &m) < 0) {
                                restore_terminal();
                                log_error("lost the connection to the sandbox's coordinator");
                                return EXIT_LAZARET;
                        }
                }
        }
}

static char **build_env(const Config *cfg, const ConfigProfile *p, size_t *ret_n) {
        ConfigDiags d = {};
        char **envv = NULL;
        int r = config_profile_env(p, &envv, ret_n, &d);
        config_diags_print(&d, stderr);
        config_diags_done(&d);
        (void) cfg;
        return r < 0 ? NULL : envv;
}

/* Unix sockets under the workspace and the volumes (decision 14): with
 * escalation on, runsc runs with host-uds=open, so the sandbox could connect
 * to any of them. Looked for in the first SOCKET_SCAN_MAX entries of each
 * tree, without following links; each found is printed as a warning. */
#define SOCKET_SCAN_MAX 50000
static size_t scan_left;
static unsigned sockets_found;

static int scan_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
        (void) flag;
        (void) f;
        if (S_ISSOCK(st->st_mode)) {
                log_warning("%s is a Unix socket inside what the sandbox mounts; with [escalation] enabled the "
                            "sandbox can connect to it (runsc host-uds=open): move it out, or set enabled = false",
                            path);
                sockets_found++;
        }
        return --scan_left == 0 ? 1 : 0;
}

static void warn_sockets(const LaunchSpec *s) {
        if (!s->escalation_enabled)
                return;
        scan_left = SOCKET_SCAN_MAX;
        (void) nftw(s->workspace, scan_entry, 16, FTW_PHYS);
        for (size_t i = 0; i < s->n_volumes; i++)
                if (!s->volumes[i].read_only) {
                        scan_left = SOCKET_SCAN_MAX;
                        (void) nftw(s->volumes[i].host, scan_entry, 16, FTW_PHYS);
                }
}

int verb_run(int argc, char **argv, const Globals *g) {
        /* A coordinator that dies, or a reader of our output that goes
         * away, must give an error we can report, not a silent SIGPIPE. */
        signal(SIGPIPE, SIG_IGN);

        /* No getopt here: it would swallow the "--" that separates the
         * command, and everything after it belongs to the command. */
        for (int i = 1; i < argc && !streq(argv[i], "--"); i++)
                if (streq(argv[i], "-h") || streq(argv[i], "--help")) {
                        printf("Usage: lazaret run [PROFILE] [--workspace DIR] [-- CMD [ARG...]]\n\n"
                               "Run CMD (default: the profile's command) in the profile's sandbox for the\n"
                               "workspace, starting the sandbox if it is not running. Several terminals share\n"
                               "one sandbox; it stops when the last one leaves. Exit status: CMD's, or 125\n"
                               "when Lazaret fails.\n");
                        return 0;
                } else if (argv[i][0] == '-') {
                        log_error("unknown option '%s' (see lazaret run --help)", argv[i]);
                        return EXIT_LAZARET;
                }
        const char *profile_name = NULL;
        char **cmd = NULL;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--")) {
                        cmd = argv + i + 1;
                        if (!*cmd) {
                                log_error("nothing after '--': give a command, or leave out '--' for the profile's");
                                return EXIT_LAZARET;
                        }
                        break;
                }
                if (profile_name) {
                        log_error("unexpected argument '%s': put the command after '--', e.g. lazaret run %s -- ls",
                                  argv[i], profile_name);
                        return EXIT_LAZARET;
                }
                profile_name = argv[i];
        }

        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        int r = profile_load(g, profile_name, &cfg, &p);
        if (r < 0)
                return EXIT_LAZARET;
        size_t n_env = 0;
        char **envv = build_env(cfg, p, &n_env);
        if (!envv)
                return EXIT_LAZARET;

        _cleanup_(launch_spec_done) LaunchSpec spec = {};
        _cleanup_free_ char *err = NULL;
        r = launch_spec_build(cfg, p, &spec, &err);
        if (r < 0) {
                strv_free_n(envv, n_env);
                if (err)
                        log_error("%s", err);
                else
                        log_error_errno(r, "cannot prepare the launch: %s", strerror(-r));
                return EXIT_LAZARET;
        }
        warn_sockets(&spec);

        bool interactive = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
        const char *term = getenv("TERM");
        _cleanup_free_ char *terminfo = NULL;
        size_t terminfo_len = 0;
        if (interactive && term && term_name_ok(term))
                (void) find_terminfo(term, &terminfo, &terminfo_len);

        /* Connect; a coordinator that is just tearing down can close on us
         * before it answers: then start over (a new one will come up). */
        /* The Session Anchor: this CLI's key. The exec gets a delegated key
         * (valid for a day), never this one. */
        SessionKey anchor = {};
        _cleanup_free_ char *anchor_pub = NULL, *credential = NULL;
        if (session_key_new(&anchor) < 0 || !(anchor_pub = session_b64(anchor.pub, SESSION_KEY_LEN)) ||
            session_delegate(&anchor, (uint64_t) time(NULL) + ESCALATE_DELEGATION_SEC, &credential) < 0) {
                session_key_wipe(&anchor);
                log_error("cannot make the session's keys");
                return EXIT_LAZARET;
        }
        session_key_wipe(&anchor);

        int ret = EXIT_LAZARET;
        for (int attempt = 0; attempt < 3; attempt++) {
                _cleanup_close_ int fd = -EBADF;
                _cleanup_free_ char *e = NULL;
                r = client_connect_or_spawn(&spec, &fd, &e);
                if (r < 0 && !e)
                        continue;
                if (r < 0) {
                        log_error("%s", e);
                        break;
                }
                CtlReader rd = {};
                /* Our policy: a running sandbox takes it over if it changed
                 * (runsc_network = "host"), or says why it cannot. */
                CtlMessage hello = { .type = CTL_HELLO,
                                     .version = CTL_PROTOCOL_VERSION,
                                     .cli_pid = (int) getpid(),
                                     .netpolicy = spec.netpolicy };
                struct winsize ws = { .ws_row = 24, .ws_col = 80 };
                if (interactive)
                        (void) ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
                CtlMessage open_m = {
                        .type = CTL_SESSION_OPEN,
                        .argv = cmd ? cmd : spec.command,
                        .env = envv,
                        .n_env = n_env,
                        .interactive = interactive,
                        .rows = ws.ws_row,
                        .columns = ws.ws_col,
                        .term = interactive && term && term_name_ok(term) ? (char *) term : NULL,
                        .terminfo = (uint8_t *) terminfo,
                        .terminfo_len = terminfo_len,
                        .anchor = anchor_pub,
                        .credential = credential,
                };
                size_t n_argv = 0;
                while (open_m.argv[n_argv])
                        n_argv++;
                open_m.n_argv = n_argv;
                if (client_send(fd, &hello) < 0 || client_send(fd, &open_m) < 0) {
                        ctl_reader_done(&rd);
                        continue;
                }
                CtlMessage reply = {};
                r = client_recv(fd, &rd, &reply, -1);
                if (r == -ECONNRESET) {
                        ctl_reader_done(&rd);
                        continue;
                }
                if (r < 0 || reply.type != CTL_SESSION_OPENED) {
                        if (r >= 0 && reply.type == CTL_ERROR)
                                log_error("the coordinator refused the session: %s", reply.message ?: "?");
                        else
                                log_error("unexpected answer from the coordinator (%s)",
                                          r < 0 ? strerror(-r) : ctl_type_to_string(reply.type));
                        ctl_message_done(&reply);
                        ctl_reader_done(&rd);
                        break;
                }
                char sid[37];
                memcpy(sid, reply.session_id, 37);
                ctl_message_done(&reply);

                if (interactive && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
                        struct termios raw = saved_tio;
                        cfmakeraw(&raw);
                        tio_saved = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
                }
                ret = relay(fd, &rd, sid, interactive);
                restore_terminal();
                ctl_reader_done(&rd);
                break;
        }
        strv_free_n(envv, n_env);
        return ret;
}
