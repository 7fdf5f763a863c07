/* SPDX-License-Identifier: MIT */
/* lazaret run [PROFILE] [-- CMD [ARG...]] */
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
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
#include "run-overlay.h"
#include "session-anchor.h"
#include "strbuf.h"
#include "string-util.h"
#include "sandbox-backend.h"
#include "term-filter.h"
#include "tui.h"
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

/* The escalation prompt while it is up: TTY forwarding is suspended (keys
 * go to the prompt). Without the status line the session's output waits
 * here, up to HELD_MAX; with it, the screen behind the prompt keeps up. */
#define HELD_MAX (8u * 1024u * 1024u)

typedef struct PromptState {
        Prompt *prompt;
        char request_id[37];
        uint8_t *held;
        size_t held_len;
        size_t dropped;
} PromptState;

/* What the relay holds while the session runs. */
typedef struct Relay {
        int fd;
        CtlReader *rd;
        const char *sid;
        bool interactive;
        PromptState ps;
        Tui *tui; /* the sandbox's screen and the status line, or NULL */
        TermFilter *filter[3]; /* [1] stdout, [2] stderr, when a terminal: what may reach it */
        StrBuf out, reply;
        TuiStatus st;
        char profile[64], domain[65], network[64], digest[65], pause_error[200];
        const char *domain_dir;
        Overlay *overlay; /* Ctrl+]: the latest events, or NULL */
        uint64_t overlay_next; /* when it reads the record again */
} Relay;

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

static int send_input(Relay *r, const void *p, size_t n) {
        CtlMessage m = { .type = CTL_TERMINAL_INPUT, .bytes = (uint8_t *) p, .n_bytes = n };
        memcpy(m.session_id, r->sid, 37);
        return client_send(r->fd, &m);
}

/* What the session printed, on its way to our stdout or stderr: through
 * the status line's emulator, or the filter when that is a terminal, or as
 * it is into a file or a pipe. -EPIPE when our reader is gone. */
static int relay_output(Relay *r, int stream, const uint8_t *p, size_t n) {
        if (r->tui) {
                tui_feed(r->tui, p, n);
                size_t k = 0;
                const uint8_t *rep = tui_replies(r->tui, &k);
                if (k > 0)
                        (void) send_input(r, rep, k);
                tui_replies_clear(r->tui);
                return 0;
        }
        int out = stream == 2 ? STDERR_FILENO : STDOUT_FILENO;
        TermFilter *f = r->filter[stream == 2 ? 2 : 1];
        if (!f)
                return write_all(out, p, n);
        r->out.len = r->reply.len = 0;
        term_filter_feed(f, p, n, &r->out, &r->reply);
        if (r->reply.len > 0 && r->interactive)
                (void) send_input(r, r->reply.data, r->reply.len);
        return r->out.len > 0 ? write_all(out, r->out.data, r->out.len) : 0;
}

static int send_resize(Relay *r) {
        struct winsize ws = {};
        if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
                return 0;
        if (r->tui) {
                tui_resize(r->tui, ws.ws_row, ws.ws_col);
                ws.ws_row = (unsigned short) tui_rows(r->tui);
                ws.ws_col = (unsigned short) tui_columns(r->tui);
                ws.ws_xpixel = ws.ws_ypixel = 0;
        }
        CtlMessage m = { .type = CTL_TERMINAL_RESIZE,
                         .rows = ws.ws_row,
                         .columns = ws.ws_col,
                         .pixel_width = ws.ws_xpixel,
                         .pixel_height = ws.ws_ypixel };
        memcpy(m.session_id, r->sid, 37);
        return client_send(r->fd, &m);
}

/* Take the prompt down: the screen as it was, then what the session said
 * meanwhile (or, with the status line, its screen as it is now), and a size
 * change so a full-screen program redraws. */
static void prompt_end(Relay *r, bool leaving) {
        PromptState *ps = &r->ps;
        if (!ps->prompt)
                return;
        ps->prompt = prompt_close(ps->prompt);
        if (r->tui) {
                tui_resume(r->tui);
                return;
        }
        if (ps->held_len > 0)
                (void) relay_output(r, 1, ps->held, ps->held_len);
        if (ps->dropped > 0) {
                char msg[128];
                int k = snprintf(msg, sizeof(msg),
                                 "\r\nlazaret: %zu bytes of output dropped while the prompt was up\r\n", ps->dropped);
                (void) write_all(STDERR_FILENO, msg, (size_t) k);
        }
        ps->held = mfree(ps->held);
        ps->held_len = ps->dropped = 0;
        struct winsize ws = {};
        if (!leaving && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 1) {
                CtlMessage m = { .type = CTL_TERMINAL_RESIZE, .rows = ws.ws_row - 1u, .columns = ws.ws_col };
                memcpy(m.session_id, r->sid, 37);
                (void) client_send(r->fd, &m);
                (void) send_resize(r);
        }
}

static int prompt_answer(int fd, const char *sid, const char *rid, const char *decision, const char *edited) {
        CtlMessage m = { .type = CTL_PROMPT_ANSWER, .decision = (char *) decision, .command = (char *) edited };
        memcpy(m.session_id, sid, 37);
        memcpy(m.request_id, rid, 37);
        return client_send(fd, &m);
}

/* A PromptRequest: show it, or say this terminal cannot. */
static void prompt_begin(Relay *r, const CtlMessage *m) {
        PromptState *ps = &r->ps;
        if (ps->prompt || !r->interactive) {
                /* The coordinator sends one at a time, and only to a
                 * terminal; anything else is refused, never shown. */
                (void) prompt_answer(r->fd, r->sid, m->request_id, "unable", NULL);
                return;
        }
        PromptInfo info = { .request_id = m->request_id,
                            .profile = m->profile,
                            .session_id = r->sid,
                            .command = m->command,
                            .justification = m->justification,
                            .queued = m->queued };
        if (r->overlay) {
                /* The prompt goes first: the overlay closes. */
                r->overlay = overlay_close(r->overlay);
                tui_overlay_end(r->tui);
        }
        if (r->tui)
                tui_suspend(r->tui);
        int k = prompt_show(&info, &ps->prompt);
        if (k < 0) {
                if (r->tui)
                        tui_resume(r->tui);
                fprintf(stderr,
                        "\r\nlazaret: cannot show the escalation prompt on this terminal (TERM=%s): %s; the "
                        "request was refused\r\n",
                        getenv("TERM") ?: "", k == -ENOTTY ? "ncurses does not know it" : strerror(-k));
                (void) prompt_answer(r->fd, r->sid, m->request_id, "unable", NULL);
                return;
        }
        memcpy(ps->request_id, m->request_id, 37);
}

static void relay_leave(Relay *r) {
        if (r->overlay) {
                /* The sandbox's last screen, not the overlay, stays. */
                r->overlay = overlay_close(r->overlay);
                tui_overlay_end(r->tui);
                (void) tui_render_now(r->tui);
        }
        prompt_end(r, true);
        r->tui = tui_free(r->tui);
        restore_terminal();
}

/* Keys for the prompt. Returns -1 to go on, or the exit status when the
 * person aborted the session. */
static int prompt_input(Relay *r) {
        PromptState *ps = &r->ps;
        _cleanup_free_ char *edited = NULL;
        switch (prompt_keys(ps->prompt, &edited)) {
        case PROMPT_ACTION_NONE:
                break;
        case PROMPT_ACTION_APPROVE:
                /* The prompt stays up until the command is done. */
                (void) prompt_answer(r->fd, r->sid, ps->request_id, "approve", edited);
                break;
        case PROMPT_ACTION_CANCEL: {
                CtlMessage m = { .type = CTL_PROMPT_CANCEL };
                memcpy(m.session_id, r->sid, 37);
                memcpy(m.request_id, ps->request_id, 37);
                (void) client_send(r->fd, &m);
                break;
        }
        case PROMPT_ACTION_DENY:
                (void) prompt_answer(r->fd, r->sid, ps->request_id, "deny", NULL);
                prompt_end(r, false);
                break;
        case PROMPT_ACTION_ABORT: {
                (void) prompt_answer(r->fd, r->sid, ps->request_id, "abort", NULL);
                CtlMessage c = { .type = CTL_SESSION_CLOSE };
                memcpy(c.session_id, r->sid, 37);
                (void) client_send(r->fd, &c);
                relay_leave(r);
                fprintf(stderr, "\r\nlazaret: session ended at the escalation prompt\n");
                return EXIT_ABORTED;
        }
        }
        return -1;
}

static void relay_done(Relay *r) {
        r->overlay = overlay_close(r->overlay);
        r->ps.prompt = prompt_close(r->ps.prompt);
        r->ps.held = mfree(r->ps.held);
        r->tui = tui_free(r->tui);
        for (size_t i = 0; i < ELEMENTSOF(r->filter); i++)
                r->filter[i] = term_filter_free(r->filter[i]);
        strbuf_done(&r->out);
        strbuf_done(&r->reply);
}

static uint64_t mono_usec(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* A StatusLine from the coordinator. */
static void relay_status(Relay *r, json_t *j) {
        if (!r->tui || !json_is_object(j))
                return;
        json_t *v;
        if ((v = json_object_get(j, "sessions")) && json_is_integer(v))
                r->st.sessions = (unsigned) json_integer_value(v);
        if ((v = json_object_get(j, "refused_connections")) && json_is_integer(v))
                r->st.refused_connections = (uint64_t) json_integer_value(v);
        if ((v = json_object_get(j, "refused_git")) && json_is_integer(v))
                r->st.refused_git = (uint64_t) json_integer_value(v);
        if ((v = json_object_get(j, "escalations_pending")) && json_is_integer(v))
                r->st.escalations_pending = (uint64_t) json_integer_value(v);
        if ((v = json_object_get(j, "paused")) && json_is_boolean(v))
                r->st.paused = json_is_true(v);
        if ((v = json_object_get(j, "network")) && json_is_string(v))
                snprintf(r->network, sizeof(r->network), "%s", json_string_value(v));
        if ((v = json_object_get(j, "policy_digest")) && json_is_string(v))
                snprintf(r->digest, sizeof(r->digest), "%s", json_string_value(v));
        v = json_object_get(j, "pause_error");
        snprintf(r->pause_error, sizeof(r->pause_error), "%s", json_is_string(v) ? json_string_value(v) : "");
        tui_set_status(r->tui, &r->st, mono_usec());
        if (r->overlay)
                r->overlay_next = 0; /* drawn again now */
}

#define OVERLAY_REFRESH_USEC (UINT64_C(500) * 1000)

static int overlay_show(Relay *r) {
        r->overlay_next = mono_usec() + OVERLAY_REFRESH_USEC;
        return overlay_draw(r->overlay, r->tui, tui_rows(r->tui), r->st.paused, r->pause_error);
}

/* Keys while the overlay is up. */
static void overlay_input(Relay *r, const uint8_t *p, size_t n) {
        switch (overlay_keys(r->overlay, p, n)) {
        case OVERLAY_CLOSE:
                r->overlay = overlay_close(r->overlay);
                tui_overlay_end(r->tui);
                return;
        case OVERLAY_PAUSE: {
                CtlMessage m = { .type = CTL_SANDBOX_PAUSE, .pause = !r->st.paused };
                memcpy(m.session_id, r->sid, 37);
                (void) client_send(r->fd, &m);
                break;
        }
        case OVERLAY_NONE:
                break;
        }
        (void) overlay_show(r);
}

/* What the person typed: to the session, but for Ctrl+], which opens the
 * overlay (what follows it goes there). */
static int relay_input(Relay *r, const uint8_t *p, size_t n) {
        if (r->overlay) {
                overlay_input(r, p, n);
                return 0;
        }
        const uint8_t *gs = r->tui && r->domain_dir ? memchr(p, 0x1d, n) : NULL;
        size_t before = gs ? (size_t) (gs - p) : n;
        if (before > 0 && send_input(r, p, before) < 0)
                return -ECONNRESET;
        if (!gs)
                return 0;
        if (overlay_open(r->domain_dir, &r->overlay) < 0)
                return 0;
        if (n > before + 1)
                overlay_input(r, gs + 1, n - before - 1);
        else
                (void) overlay_show(r);
        return 0;
}

/* Relay until the session ends. Returns the exit status. */
static int relay(Relay *r) {
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

        int fd = r->fd;
        const char *sid = r->sid;
        bool stdin_open = true;
        for (;;) {
                /* Frames already buffered come first, unless the terminal
                 * lags behind: then the sandbox waits (backpressure). */
                bool hold = r->tui && tui_backlogged(r->tui);
                const uint8_t *p;
                size_t len;
                int k = hold ? 0 : ctl_reader_next(r->rd, &p, &len);
                if (k < 0) {
                        relay_leave(r);
                        log_error("the coordinator sent an invalid frame");
                        return EXIT_LAZARET;
                }
                if (k > 0) {
                        CtlMessage m = {};
                        const char *why = NULL;
                        if (ctl_message_decode(p, len, &m, &why) < 0) {
                                relay_leave(r);
                                log_error("the coordinator sent an invalid frame: %s", why ? why : "?");
                                return EXIT_LAZARET;
                        }
                        if (m.type == CTL_TERMINAL_OUTPUT && streq(m.session_id, sid) && r->ps.prompt && !r->tui)
                                prompt_hold(&r->ps, m.bytes, m.n_bytes);
                        else if (m.type == CTL_PROMPT_REQUEST && streq(m.session_id, sid))
                                prompt_begin(r, &m);
                        else if (m.type == CTL_PROMPT_DONE && streq(m.session_id, sid)) {
                                if (r->ps.prompt && streq(m.request_id, r->ps.request_id))
                                        prompt_end(r, false);
                        } else if (m.type == CTL_STATUS_LINE)
                                relay_status(r, m.status);
                        else if (m.type == CTL_TERMINAL_OUTPUT && streq(m.session_id, sid)) {
                                if (relay_output(r, m.stream, m.bytes, m.n_bytes) == -EPIPE) {
                                        /* Our reader is gone (| head): end the
                                         * session as a local pipe would. */
                                        CtlMessage c = { .type = CTL_SESSION_CLOSE };
                                        memcpy(c.session_id, sid, 37);
                                        (void) client_send(fd, &c);
                                        ctl_message_done(&m);
                                        relay_leave(r);
                                        return 128 + SIGPIPE;
                                }
                        } else if (m.type == CTL_SESSION_EXIT && streq(m.session_id, sid)) {
                                int st = exit_status_of(&m);
                                if (r->tui)
                                        (void) tui_render_now(r->tui);
                                relay_leave(r);
                                if (m.message)
                                        fprintf(stderr, "%slazaret: %s\n", r->interactive ? "\r\n" : "", m.message);
                                ctl_message_done(&m);
                                return st;
                        } else if (m.type == CTL_ERROR) {
                                relay_leave(r);
                                log_error("the coordinator refused: %s", m.message ? m.message : "?");
                                ctl_message_done(&m);
                                return EXIT_LAZARET;
                        }
                        ctl_message_done(&m);
                        continue;
                }
                int timeout = -1;
                if (r->tui) {
                        uint64_t now = mono_usec();
                        timeout = tui_wants(r->tui, now);
                        if (timeout == 0) {
                                int e = tui_render(r->tui, now);
                                if (e < 0) {
                                        relay_leave(r);
                                        log_error("cannot write to the terminal: %s", strerror(-e));
                                        return EXIT_LAZARET;
                                }
                                timeout = tui_wants(r->tui, mono_usec());
                        }
                        if (r->overlay) {
                                /* New records, every half second. */
                                now = mono_usec();
                                if (now >= r->overlay_next) {
                                        (void) overlay_refresh(r->overlay);
                                        (void) overlay_show(r);
                                }
                                int w = (int) ((r->overlay_next - MIN(now, r->overlay_next)) / 1000) + 1;
                                timeout = timeout < 0 || w < timeout ? w : timeout;
                        }
                }
                struct pollfd pfd[4] = {
                        { .fd = hold ? -1 : fd, .events = POLLIN },
                        { .fd = sfd, .events = POLLIN },
                        { .fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN },
                        { .fd = r->tui ? tui_fd(r->tui) : -1, .events = POLLIN },
                };
                if (poll(pfd, 4, timeout) < 0 && errno != EINTR)
                        return EXIT_LAZARET;
                if (pfd[3].revents & POLLIN)
                        tui_written(r->tui); /* the next frame can go */
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        uint8_t buf[65536];
                        size_t room = ctl_reader_room(r->rd);
                        ssize_t n = read(fd, buf, room < sizeof(buf) && room > 0 ? room : sizeof(buf));
                        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (n <= 0 || ctl_reader_feed(r->rd, buf, (size_t) n) < 0) {
                                relay_leave(r);
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
                                        if (r->ps.prompt)
                                                prompt_resize(r->ps.prompt);
                                        if (r->interactive)
                                                (void) send_resize(r);
                                        if (r->overlay)
                                                r->overlay_next = 0; /* drawn again at the new size now */
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
                                        relay_leave(r);
                                        return 128 + (int) si.ssi_signo;
                                }
                                }
                                (void) client_send(fd, &m);
                        }
                }
                if (stdin_open && r->ps.prompt && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
                        if (pfd[2].revents & (POLLHUP | POLLERR)) {
                                /* The terminal hung up: we leave, as on
                                 * SIGHUP, and the request is refused for
                                 * the session that went (not denied by a
                                 * person who is not there). */
                                CtlMessage c = { .type = CTL_SESSION_CLOSE };
                                memcpy(c.session_id, sid, 37);
                                (void) client_send(fd, &c);
                                relay_leave(r);
                                return 128 + SIGHUP;
                        }
                        int st = prompt_input(r);
                        if (st >= 0)
                                return st;
                        continue;
                }
                if (stdin_open && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
                        uint8_t buf[65536];
                        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
                        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        int e = 0;
                        if (n <= 0) {
                                stdin_open = false;
                                CtlMessage m = { .type = CTL_TERMINAL_INPUT, .eof = true };
                                memcpy(m.session_id, sid, 37);
                                e = client_send(fd, &m);
                        } else
                                e = relay_input(r, buf, (size_t) n);
                        if (e < 0) {
                                relay_leave(r);
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

/* Unix sockets under the workspace and the volumes: the native backend's
 * sandbox can connect to any of them (Landlock guards files, not a
 * socket's connect; gVisor reaches none, issue 41). Looked for in the first
 * SOCKET_SCAN_MAX entries of each tree, without following links; each
 * found is printed as a warning. */
#define SOCKET_SCAN_MAX 50000
static size_t scan_left;
static unsigned sockets_found;

static int scan_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
        (void) flag;
        (void) f;
        if (S_ISSOCK(st->st_mode)) {
                log_warning("%s is a Unix socket inside what the sandbox mounts; with the native backend the "
                            "sandbox can connect to it: move it out, or use backend = \"gvisor\"",
                            path);
                sockets_found++;
        }
        return --scan_left == 0 ? 1 : 0;
}

static void warn_sockets(const LaunchSpec *s) {
        if (s->backend != BACKEND_NATIVE)
                return;
        scan_left = SOCKET_SCAN_MAX;
        (void) nftw(s->workspace, scan_entry, 16, FTW_PHYS);
        for (size_t i = 0; i < s->n_volumes; i++) {
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

/* The terminal layer: the status line (with the emulator behind it), or
 * the filter on each of stdout and stderr that is a terminal. */
static int relay_setup(Relay *r, const LaunchSpec *spec, const ConfigProfile *p, bool want_tui, unsigned rows,
                       unsigned columns) {
        if (want_tui) {
                const char *nc = getenv("NO_COLOR");
                TuiOptions o = { .fd = STDOUT_FILENO, .color = !nc || !*nc, .clipboard = p->clipboard, .writer = true };
                int k = tui_new(&o, rows, columns, &r->tui);
                if (k < 0 && k != -ERANGE) {
                        log_error("cannot start the status line: %s", strerror(-k));
                        return k;
                }
                if (r->tui) {
                        snprintf(r->profile, sizeof(r->profile), "%s", spec->profile ?: "");
                        snprintf(r->domain, sizeof(r->domain), "%s", spec->domain_hash ?: "");
                        snprintf(r->digest, sizeof(r->digest), "%s", spec->netpolicy_digest ?: "");
                        r->domain_dir = spec->domain_dir;
                        r->st = (TuiStatus){
                                .profile = r->profile, .domain = r->domain, .network = r->network, .digest = r->digest
                        };
                        tui_set_status(r->tui, &r->st, mono_usec());
                        CtlMessage w = { .type = CTL_STATUS_WATCH };
                        memcpy(w.session_id, r->sid, 37);
                        (void) client_send(r->fd, &w);
                        return 0;
                }
        }
        for (int s = 1; s <= 2; s++)
                if (isatty(s) && !(r->filter[s] = term_filter_new(p->clipboard)))
                        return log_error("out of memory"), -ENOMEM;
        return 0;
}

/* lazaret up's agents: a descriptor (LAZARET_READY_FD) that gets a byte
 * once the session is open, so that up can tell a start that failed from a
 * command that ended. Taken out of the environment, kept from children. */
static int take_ready_fd(void) {
        const char *e = getenv(READY_FD_ENV);
        if (!e)
                return -1;
        char *end = NULL;
        long v = strtol(e, &end, 10);
        (void) unsetenv(READY_FD_ENV);
        if (!end || *end || v < 3 || v > 1024 || fcntl((int) v, F_SETFD, FD_CLOEXEC) < 0)
                return -1;
        return (int) v;
}

/* The Session Anchor: this CLI's key, and the delegated key the exec gets
 * (valid for a day), never this one. Made on a thread while the
 * coordinator starts (or the connection to one is made): OpenSSL's first
 * key and signature cost most of a millisecond. (Beside the configuration's
 * load it gained nothing: that load's first digest waited for OpenSSL's
 * initialization on the thread.) Joined (and its secrets wiped) on every
 * way out. */
typedef struct AnchorJob {
        pthread_t thread;
        bool started;
        char *pub, *credential;
        int r;
} AnchorJob;

static void *anchor_make(void *arg) {
        AnchorJob *j = arg;
        SessionKey k = {};
        j->r = session_key_new(&k);
        if (j->r >= 0 && !(j->pub = session_b64(k.pub, SESSION_KEY_LEN)))
                j->r = -ENOMEM;
        if (j->r >= 0)
                j->r = session_delegate(&k, (uint64_t) time(NULL) + ESCALATE_DELEGATION_SEC, &j->credential);
        session_key_wipe(&k);
        return NULL;
}

static int anchor_join(AnchorJob *j) {
        if (j->started) {
                (void) pthread_join(j->thread, NULL);
                j->started = false;
        }
        return j->r;
}

static void anchor_job_done(AnchorJob *j) {
        (void) anchor_join(j);
        free(j->pub);
        if (j->credential)
                explicit_bzero(j->credential, strlen(j->credential));
        free(j->credential);
}

/* The configuration's parsed documents, freed on a thread of their own
 * once the session is open (10,000 prefixes are as many nodes: a
 * millisecond of CPU, which on two cores the sandbox's start shared when
 * it ran beside it): nothing reads them after the launch spec is built
 * (only the profile's and the spec's copies). Joined before the
 * configuration is freed. */
typedef struct DropJob {
        pthread_t thread;
        bool started;
        Config *cfg;
} DropJob;

static void *drop_run(void *arg) {
        config_drop_documents(((DropJob *) arg)->cfg);
        return NULL;
}

static void drop_job_done(DropJob *j) {
        if (j->started)
                (void) pthread_join(j->thread, NULL);
        j->started = false;
}

int verb_run(int argc, char **argv, const Globals *g) {
        /* A coordinator that dies, or a reader of our output that goes
         * away, must give an error we can report, not a silent SIGPIPE. */
        signal(SIGPIPE, SIG_IGN);
        _cleanup_close_ int ready_fd = take_ready_fd();

        /* No getopt here: it would swallow the "--" that separates the
         * command, and everything after it belongs to the command. */
        /* --tui=status (default on a terminal) or --tui=none. */
        const char *tui_mode = NULL;
        for (int i = 1; i < argc && !streq(argv[i], "--"); i++)
                if (startswith(argv[i], "--tui=")) {
                        tui_mode = argv[i] + 6;
                        if (!streq(tui_mode, "none") && !streq(tui_mode, "status")) {
                                log_error("--tui=%s: the terminal layer is 'status' (the status line) or 'none'",
                                          tui_mode);
                                return EXIT_LAZARET;
                        }
                        memmove(argv + i, argv + i + 1, (size_t) (argc - i) * sizeof(*argv));
                        argc--;
                        i--;
                }
        /* --backend gvisor|native: the profile's backend key for this
         * launch (the person's own choice on the command line). */
        Backend backend = _BACKEND_INVALID;
        for (int i = 1; i < argc && !streq(argv[i], "--"); i++) {
                const char *v = NULL;
                int eat = 1;
                if (startswith(argv[i], "--backend="))
                        v = argv[i] + strlen("--backend=");
                else if (streq(argv[i], "--backend")) {
                        v = i + 1 < argc ? argv[i + 1] : "";
                        eat = i + 1 < argc ? 2 : 1;
                } else
                        continue;
                backend = backend_from_string(v);
                if (backend < 0) {
                        log_error("--backend %s: the backend is 'gvisor' (Podman and gVisor) or 'native' (Landlock, "
                                  "namespaces and seccomp)",
                                  v);
                        return EXIT_LAZARET;
                }
                memmove(argv + i, argv + i + eat, (size_t) (argc - i - eat + 1) * sizeof(*argv));
                argc -= eat;
                i--;
        }
        for (int i = 1; i < argc && !streq(argv[i], "--"); i++)
                if (streq(argv[i], "-h") || streq(argv[i], "--help")) {
                        printf("Usage: lazaret run [PROFILE] [--tui=status|none] [--backend gvisor|native]\n"
                               "                   [--workspace DIR] [-- CMD [ARG...]]\n\n"
                               "Run CMD (default: the profile's command) in the profile's sandbox for the\n"
                               "workspace, starting the sandbox if it is not running. Several terminals share\n"
                               "one sandbox; it stops when the last one leaves. Requests from the sandbox\n"
                               "to run a command on this computer that need you are asked on this terminal.\n"
                               "On a terminal the bottom row is a status line (--tui=none, or the profile's\n"
                               "status_line = false, turns it off); Ctrl+] shows the latest events.\n"
                               "--backend replaces the profile's backend for this launch.\n"
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
        /* After cfg: their ends (the threads joined) come before cfg's. */
        _cleanup_(anchor_job_done) AnchorJob anchor = {};
        _cleanup_(drop_job_done) DropJob drop = {};
        const ConfigProfile *p = NULL;
        int r = profile_load_for_launch(g, profile_name, backend, &cfg, &p);
        if (r < 0)
                return profile_load_exit(r);
        size_t n_env = 0;
        char **envv = build_env(cfg, p, &n_env);
        if (!envv)
                return EXIT_LAZARET;

        _cleanup_(launch_spec_done) LaunchSpec spec = {};
        _cleanup_free_ char *err = NULL;
        r = launch_spec_build(cfg, p, backend,
                              sandbox_backend_for(backend != _BACKEND_INVALID ? backend : p->backend)->preflight, &spec,
                              &err);
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
        /* The status line: on a terminal of 3 rows or more, unless turned
         * off here or by the profile. */
        struct winsize tws = {};
        bool want_tui = interactive && p->status_line && !(tui_mode && streq(tui_mode, "none")) &&
                        ioctl(STDOUT_FILENO, TIOCGWINSZ, &tws) == 0 && tws.ws_row >= 3 && tws.ws_col >= 2;
        const char *term = getenv("TERM");
        _cleanup_free_ char *terminfo = NULL;
        size_t terminfo_len = 0;
        if (interactive && term && term_name_ok(term))
                (void) find_terminfo(term, &terminfo, &terminfo_len);

        /* The Session Anchor's keys, made while the coordinator starts
         * (cold) or the connection is made (warm). */
        anchor.started = pthread_create(&anchor.thread, NULL, anchor_make, &anchor) == 0;
        if (!anchor.started)
                (void) anchor_make(&anchor);

        /* Connect; a coordinator that is just tearing down can close on us
         * before it answers: then start over (a new one will come up). */
        int ret = EXIT_LAZARET;
        /* Each attempt that ends in a retry says why; three of them end in
         * one line naming the last (never in silence). */
        char retry[256] = "";
        bool settled = false;
        for (int attempt = 0; attempt < 3; attempt++) {
                _cleanup_close_ int fd = -EBADF;
                _cleanup_free_ char *e = NULL, *key_error = NULL;
                r = client_connect_or_spawn(&spec, &fd, &e);
                bool started_it = r == 1;
                if (r < 0 && !e) {
                        snprintf(retry, sizeof(retry), "cannot reach or start the coordinator: %s", strerror(-r));
                        continue;
                }
                settled = true;
                if (r < 0) {
                        log_error("%s", e);
                        break;
                }
                if (anchor_join(&anchor) < 0) {
                        log_error("cannot make the session's keys");
                        break;
                }
                char *anchor_pub = anchor.pub, *credential = anchor.credential; /* still the job's */
                CtlReader rd = {};
                /* Our policy: a running sandbox takes it over if it changed
                 * (runsc_network = "host"), or says why it cannot. */
                /* A coordinator we started has our policy: its digest
                 * says so (the text of 10,000 prefixes costs milliseconds
                 * of JSON each way); one we join gets the text. */
                bool by_digest = started_it && spec.netpolicy && spec.netpolicy_digest;
                CtlMessage hello = { .type = CTL_HELLO,
                                     .version = CTL_PROTOCOL_VERSION,
                                     .cli_pid = (int) getpid(),
                                     .netpolicy = by_digest ? NULL : spec.netpolicy,
                                     .netpolicy_digest = by_digest ? spec.netpolicy_digest : NULL,
                                     .backend = (char *) backend_to_string(spec.backend),
                                     .address_rules = (char *) (spec.own_address_rules ? "own" : "global") };
                struct winsize ws = { .ws_row = 24, .ws_col = 80 };
                if (interactive)
                        (void) ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
                bool tui_now = want_tui && ws.ws_row >= 3;
                if (tui_now) {
                        /* The sandbox's terminal is one row shorter. */
                        ws.ws_row--;
                        ws.ws_xpixel = ws.ws_ypixel = 0;
                }
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
                r = client_send_hello(fd, spec.socket_path, &hello, &key_error);
                if (key_error && r == -ENOENT) {
                        /* A coordinator that is stopping removes its key
                         * with its socket. */
                        snprintf(retry, sizeof(retry),
                                 "the coordinator was stopping before the session opened (its control socket's key "
                                 "is gone)");
                        settled = false;
                        ctl_reader_done(&rd);
                        continue;
                }
                if (key_error) {
                        log_error("%s", key_error);
                        ctl_reader_done(&rd);
                        break;
                }
                if (r < 0 || (r = client_send(fd, &open_m)) < 0) {
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
                if (ready_fd >= 0) {
                        (void) !write(ready_fd, "1", 1);
                        ready_fd = safe_close(ready_fd);
                }
                if (!drop.cfg) {
                        drop.cfg = cfg;
                        drop.started = pthread_create(&drop.thread, NULL, drop_run, &drop) == 0;
                        if (!drop.started)
                                config_drop_documents(cfg);
                }

                if (interactive && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
                        struct termios raw = saved_tio;
                        cfmakeraw(&raw);
                        tio_saved = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
                }
                _cleanup_(relay_done) Relay rl = { .fd = fd, .rd = &rd, .sid = sid, .interactive = interactive };
                ret = relay_setup(&rl, &spec, p, tui_now, ws.ws_row + 1u, ws.ws_col);
                if (ret < 0) {
                        restore_terminal();
                        ctl_reader_done(&rd);
                        ret = EXIT_LAZARET;
                        break;
                }
                ret = relay(&rl);
                restore_terminal();
                ctl_reader_done(&rd);
                break;
        }
        if (!settled)
                log_error("cannot open a session after three attempts: %s; run it again", retry);
        strv_free_n(envv, n_env);
        return ret;
}
