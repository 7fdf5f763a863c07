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
#include "exec-util.h"
#include "host-git.h"
#include "fd-util.h"
#include "fileio.h"
#include "launch.h"
#include "ctl-proto.h"
#include "log.h"
#include "path-pattern.h"
#include "path-util.h"
#include "profile-pick.h"
#include "prompt-text.h"
#include "prompt.h"
#include "session-anchor.h"
#include "strbuf.h"
#include "string-util.h"
#include "verbs.h"

#define TERMINFO_FILE_MAX CTL_TERMINFO_MAX

/* The person ended the session at the escalation prompt ([Q]). */
#define EXIT_ABORTED 130

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

/* The escalation prompt while it is up: TTY forwarding is suspended (keys
 * go to the prompt, the session's output waits here, up to HELD_MAX). */
#define HELD_MAX (8u * 1024u * 1024u)

typedef struct PromptState {
        Prompt *prompt;
        char request_id[37];
        uint8_t *held;
        size_t held_len;
        size_t dropped;
} PromptState;

static void prompt_hold(PromptState *ps, const uint8_t *p, size_t n) {
        if (ps->held_len + n > HELD_MAX) {
                ps->dropped += n;
                return;
        }
        uint8_t *b = realloc(ps->held, ps->held_len + n);
        if (!b) {
                ps->dropped += n;
                return;
        }
        memcpy(b + ps->held_len, p, n);
        ps->held = b;
        ps->held_len += n;
}

/* Take the prompt down: the screen as it was, then what the session said
 * meanwhile, and a size change so a full-screen program redraws. */
static void prompt_end(PromptState *ps, int fd, const char *sid) {
        if (!ps->prompt)
                return;
        ps->prompt = prompt_close(ps->prompt);
        if (ps->held_len > 0)
                (void) write_all(STDOUT_FILENO, ps->held, ps->held_len);
        if (ps->dropped > 0) {
                char msg[128];
                int k = snprintf(msg, sizeof(msg),
                                 "\r\nlazaret: %zu bytes of output dropped while the prompt was up\r\n", ps->dropped);
                (void) write_all(STDERR_FILENO, msg, (size_t) k);
        }
        ps->held = mfree(ps->held);
        ps->held_len = ps->dropped = 0;
        struct winsize ws = {};
        if (fd >= 0 && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 1) {
                CtlMessage m = { .type = CTL_TERMINAL_RESIZE, .rows = ws.ws_row - 1u, .columns = ws.ws_col };
                memcpy(m.session_id, sid, 37);
                (void) client_send(fd, &m);
                (void) send_resize(fd, sid);
        }
}

static int prompt_answer(int fd, const char *sid, const char *rid, const char *decision, const char *edited) {
        CtlMessage m = { .type = CTL_PROMPT_ANSWER, .decision = (char *) decision, .command = (char *) edited };
        memcpy(m.session_id, sid, 37);
        memcpy(m.request_id, rid, 37);
        return client_send(fd, &m);
}

/* A PromptRequest: show it, or say this terminal cannot. */
static void prompt_begin(PromptState *ps, int fd, const char *sid, bool interactive, const CtlMessage *m) {
        if (ps->prompt || !interactive) {
                /* The coordinator sends one at a time, and only to a
                 * terminal; anything else is refused, never shown. */
                (void) prompt_answer(fd, sid, m->request_id, "unable", NULL);
                return;
        }
        PromptInfo info = { .request_id = m->request_id,
                            .profile = m->profile,
                            .session_id = sid,
                            .command = m->command,
                            .justification = m->justification,
                            .queued = m->queued };
        int r = prompt_show(&info, &ps->prompt);
        if (r < 0) {
                fprintf(stderr,
                        "\r\nlazaret: cannot show the escalation prompt on this terminal (TERM=%s): %s; the "
                        "request was refused\r\n",
                        getenv("TERM") ?: "", r == -ENOTTY ? "ncurses does not know it" : strerror(-r));
                (void) prompt_answer(fd, sid, m->request_id, "unable", NULL);
                return;
        }
        memcpy(ps->request_id, m->request_id, 37);
}

/* Keys for the prompt. Returns -1 to go on, or the exit status when the
 * person aborted the session. */
static int prompt_input(PromptState *ps, int fd, const char *sid) {
        _cleanup_free_ char *edited = NULL;
        switch (prompt_keys(ps->prompt, &edited)) {
        case PROMPT_ACTION_NONE:
                break;
        case PROMPT_ACTION_APPROVE:
                /* The prompt stays up until the command is done. */
                (void) prompt_answer(fd, sid, ps->request_id, "approve", edited);
                break;
        case PROMPT_ACTION_CANCEL: {
                CtlMessage m = { .type = CTL_PROMPT_CANCEL };
                memcpy(m.session_id, sid, 37);
                memcpy(m.request_id, ps->request_id, 37);
                (void) client_send(fd, &m);
                break;
        }
        case PROMPT_ACTION_DENY:
                (void) prompt_answer(fd, sid, ps->request_id, "deny", NULL);
                prompt_end(ps, fd, sid);
                break;
        case PROMPT_ACTION_ABORT: {
                (void) prompt_answer(fd, sid, ps->request_id, "abort", NULL);
                CtlMessage c = { .type = CTL_SESSION_CLOSE };
                memcpy(c.session_id, sid, 37);
                (void) client_send(fd, &c);
                prompt_end(ps, -1, sid);
                restore_terminal();
                fprintf(stderr, "\r\nlazaret: session ended at the escalation prompt\n");
                return EXIT_ABORTED;
        }
        }
        return -1;
}

static void prompt_state_done(PromptState *ps) {
        ps->prompt = prompt_close(ps->prompt);
        ps->held = mfree(ps->held);
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

        _cleanup_(prompt_state_done) PromptState ps = {};
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
                        prompt_end(&ps, -1, sid);
                        restore_terminal();
                        log_error("the coordinator sent an invalid frame");
                        return EXIT_LAZARET;
                }
                if (k > 0) {
                        CtlMessage m = {};
                        const char *why = NULL;
                        if (ctl_message_decode(p, len, &m, &why) < 0) {
                                prompt_end(&ps, -1, sid);
                                restore_terminal();
                                log_error("the coordinator sent an invalid frame: %s", why ? why : "?");
                                return EXIT_LAZARET;
                        }
                        if (m.type == CTL_TERMINAL_OUTPUT && streq(m.session_id, sid) && ps.prompt)
                                prompt_hold(&ps, m.bytes, m.n_bytes);
                        else if (m.type == CTL_PROMPT_REQUEST && streq(m.session_id, sid))
                                prompt_begin(&ps, fd, sid, interactive, &m);
                        else if (m.type == CTL_PROMPT_DONE && streq(m.session_id, sid)) {
                                if (ps.prompt && streq(m.request_id, ps.request_id))
                                        prompt_end(&ps, fd, sid);
                        } else if (m.type == CTL_TERMINAL_OUTPUT && streq(m.session_id, sid)) {
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
                                prompt_end(&ps, -1, sid);
                                restore_terminal();
                                if (m.message)
                                        fprintf(stderr, "%slazaret: %s\n", interactive ? "\r\n" : "", m.message);
                                ctl_message_done(&m);
                                return st;
                        } else if (m.type == CTL_ERROR) {
                                prompt_end(&ps, -1, sid);
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
                                prompt_end(&ps, -1, sid);
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
                                        if (ps.prompt)
                                                prompt_resize(ps.prompt);
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
                                        prompt_end(&ps, -1, sid);
                                        restore_terminal();
                                        return 128 + (int) si.ssi_signo;
                                }
                                }
                                (void) client_send(fd, &m);
                        }
                }
                if (stdin_open && ps.prompt && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
                        if (pfd[2].revents & (POLLHUP | POLLERR)) {
                                /* The terminal hung up: we leave, as on
                                 * SIGHUP, and the request is refused for
                                 * the session that went (not denied by a
                                 * person who is not there). */
                                CtlMessage c = { .type = CTL_SESSION_CLOSE };
                                memcpy(c.session_id, sid, 37);
                                (void) client_send(fd, &c);
                                prompt_end(&ps, -1, sid);
                                restore_terminal();
                                return 128 + SIGHUP;
                        }
                        int st = prompt_input(&ps, fd, sid);
                        if (st >= 0)
                                return st;
                        continue;
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

/* Branch mode masks nothing: the agent's worktree is a checkout of HEAD,
 * so untracked secrets never reach it, and a committed one stays readable
 * through git's objects whatever the worktree would show. Say so for each
 * committed name that matches a mask pattern. */
#define COMMITTED_WARN_MAX 20

static void warn_committed_secrets(const LaunchSpec *s) {
        if (!s->branch || !s->git_dir)
                return;
        _cleanup_free_ char *git = NULL;
        const char *search = getenv("PATH");
        if (exec_find_program(search && *search ? search : "/usr/bin:/bin", "git", &git) < 0)
                return;
        Argv a = {};
        host_git_argv(&a, s->workspace);
        argv_add(&a, "-c");
        argv_add(&a, "core.quotePath=true");
        argv_add(&a, "ls-files");
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = a.oom ? -ENOMEM : exec_capture(git, (const char *const *) a.v, UINT64_C(30) * 1000000, &res);
        argv_done(&a);
        if (r < 0 || exec_result_failed(&res) || !res.out)
                return;
        size_t n_mask = 0, shown = 0, found = 0;
        while (s->mask && s->mask[n_mask])
                n_mask++;
        for (char *line = res.out; *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                if (*line && path_pattern_match_any(line, (const char *const *) s->mask, n_mask)) {
                        found++;
                        if (shown++ < COMMITTED_WARN_MAX) {
                                _cleanup_free_ char *vis = prompt_visible(line, strlen(line));
                                log_warning("%s is committed to the repository and matches a mask pattern: the "
                                            "agent can read it through git (a committed secret cannot be masked; "
                                            "remove it from the history and rotate it)",
                                            vis ?: "?");
                        }
                }
                if (!nl)
                        break;
                line = nl + 1;
        }
        if (found > COMMITTED_WARN_MAX)
                log_warning("and %zu more committed names that match a mask pattern", found - COMMITTED_WARN_MAX);
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
                               "one sandbox; it stops when the last one leaves. Requests from the sandbox\n"
                               "to run a command on this computer that need you are asked on this terminal.\n"
                               "Exit status: CMD's; 130 when you ended the session at that prompt ([Q]);\n"
                               "125 when Lazaret fails.\n");
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
                        /* The control protocol carries text (JSON): say so
                         * now, not as a failed session later. */
                        for (char **c = cmd; *c; c++)
                                if (!ctl_utf8_valid(*c, strlen(*c))) {
                                        log_error("argument %d of the command is not UTF-8 text, which the "
                                                  "sandbox's control protocol cannot carry; pass it in a file or "
                                                  "encoded (e.g. base64)",
                                                  (int) (c - cmd) + 1);
                                        return EXIT_USAGE;
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
        int r = profile_load_for_launch(g, profile_name, &cfg, &p);
        if (r < 0)
                return profile_load_exit(r);
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
        warn_committed_secrets(&spec);
        /* Branch mode in a directory of a repository: the session starts in
         * the same directory of the agent's worktree. */
        const char *cwd = spec.branch ? p->workspace_subdir : NULL;
        if (cwd && (!path_relative_safe(cwd, CTL_CWD_MAX) || !ctl_utf8_valid(cwd, strlen(cwd)))) {
                strv_free_n(envv, n_env);
                log_error(
                        "the sandbox cannot start in %s: its path below the repository %s has a control "
                        "character, is not UTF-8 or is longer than %u bytes; run lazaret from another directory of the "
                        "repository",
                        cfg->workspace, p->repo_root, CTL_CWD_MAX);
                return EXIT_LAZARET;
        }

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
        /* Each attempt that ends in a retry says why; three of them end in
         * one line naming the last (never in silence). */
        char retry[256] = "";
        bool settled = false;
        for (int attempt = 0; attempt < 3; attempt++) {
                _cleanup_close_ int fd = -EBADF;
                _cleanup_free_ char *e = NULL;
                r = client_connect_or_spawn(&spec, &fd, &e);
                if (r < 0 && !e) {
                        snprintf(retry, sizeof(retry), "cannot reach or start the coordinator: %s", strerror(-r));
                        continue;
                }
                settled = true;
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
                        .cwd = (char *) cwd,
                };
                size_t n_argv = 0;
                while (open_m.argv[n_argv])
                        n_argv++;
                open_m.n_argv = n_argv;
                if ((r = client_send(fd, &hello)) < 0 || (r = client_send(fd, &open_m)) < 0) {
                        snprintf(retry, sizeof(retry),
                                 "the coordinator closed the connection before the session opened (it was "
                                 "stopping): %s",
                                 strerror(-r));
                        settled = false;
                        ctl_reader_done(&rd);
                        continue;
                }
                CtlMessage reply = {};
                r = client_recv(fd, &rd, &reply, -1);
                if (r == -ECONNRESET) {
                        snprintf(retry, sizeof(retry),
                                 "the coordinator closed the connection before the session opened (it was "
                                 "stopping)");
                        settled = false;
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
        if (!settled)
                log_error("cannot open a session after three attempts: %s; run it again", retry);
        strv_free_n(envv, n_env);
        return ret;
}
