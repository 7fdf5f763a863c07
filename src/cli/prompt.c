/* SPDX-License-Identifier: MIT */
#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <errno.h>
#include <limits.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <wchar.h>

#include "escalate-proto.h"
#include "fd-util.h"
#include "macro.h"
#include "prompt-text.h"
#include "prompt.h"
#include "string-util.h"
#include "words.h"

typedef enum PromptMode {
        MODE_VIEW,
        MODE_EDIT,
        MODE_RUNNING,
} PromptMode;

struct Prompt {
        SCREEN *screen;
        char *old_locale;
        PromptMode mode;
        char *request_id, *profile, *session_id, *justification;
        char *asked; /* the command as the sandbox asked */
        char *cmd; /* the command as it stands (edited or not) */
        char *edit; /* the edit buffer (MODE_EDIT) */
        size_t edit_len, cursor; /* bytes; the cursor is on a character boundary */
        unsigned queued;
        bool cancelled;
        bool fits; /* the whole command is on the screen */
        const char *note; /* a line of feedback, or NULL */
        short meta_pair, esc_pair;
};

/* ---- laying out the command ------------------------------------------------ */

/* Columns a character takes, or -1 when it must be shown escaped (not
 * printable in this locale, or zero width: a combining mark cannot hide
 * on top of another character). */
static int unit_width(const PromptUnit *u) {
        if (u->kind != PROMPT_PLAIN || u->cp < 0x80)
                return (int) strlen(u->text);
        int w = wcwidth((wchar_t) u->cp);
        return w > 0 ? w : -1;
}

/* Draw the command s (len bytes) from row y0 to row y1 (exclusive), wrapped
 * at the screen's width; with draw false only measure. Returns whether it
 * all fits; *ret_cy, *ret_cx: where the character at byte offset `at` starts
 * (or the end). */
static bool layout(Prompt *p, const char *s, size_t len, int y0, int y1, size_t at, bool draw, int *ret_cy,
                   int *ret_cx) {
        int W = COLS > 4 ? COLS - 4 : 1, x = 0, y = 0;
        bool fits = true;
        size_t i = 0;
        for (;;) {
                PromptUnit u = {};
                size_t n = 0;
                int w = 0;
                if (i < len) {
                        n = prompt_unit(s + i, len - i, &u);
                        w = unit_width(&u);
                        if (w < 0) {
                                u.kind = PROMPT_ESCAPED;
                                snprintf(u.text, sizeof(u.text), "<U+%04X>", u.cp);
                                w = (int) strlen(u.text);
                        }
                        if (x + w > W && x > 0) {
                                y++;
                                x = 0;
                        }
                }
                if (i == at) {
                        *ret_cy = y0 + y;
                        *ret_cx = 2 + x;
                }
                if (i >= len)
                        break;
                if (y0 + y >= y1)
                        fits = false;
                else if (draw) {
                        attr_t a = u.kind == PROMPT_META      ? A_BOLD | A_REVERSE | COLOR_PAIR(p->meta_pair)
                                   : u.kind == PROMPT_ESCAPED ? A_UNDERLINE | COLOR_PAIR(p->esc_pair)
                                                              : A_NORMAL;
                        attrset(a);
                        mvaddstr(y0 + y, 2 + x, u.text);
                        attrset(A_NORMAL);
                }
                x += w;
                i += n;
        }
        return fits;
}

/* A line of the prompt's own text, cut at the screen's edge (never
 * wrapped onto the next row). */
static void put(int y, int x, const char *text) {
        if (y >= 0 && y < LINES && x < COLS)
                mvaddnstr(y, x, text, COLS - x);
}

/* One line of request text (profile, justification) made visible, cut at
 * the screen's width. */
static void field(int y, const char *label, const char *value) {
        put(y, 2, label);
        int x = 12, room = COLS - 13;
        for (size_t i = 0, n = strlen(value); i < n && room > 0;) {
                PromptUnit u;
                size_t k = prompt_unit(value + i, n - i, &u);
                int w = unit_width(&u);
                if (w < 0) {
                        snprintf(u.text, sizeof(u.text), "<U+%04X>", u.cp);
                        w = (int) strlen(u.text);
                }
                if (w > room - (i + k < n ? 1 : 0)) {
                        mvaddstr(y, x, "~");
                        break;
                }
                mvaddstr(y, x, u.text);
                x += w;
                room -= w;
                i += k;
        }
}

static void draw(Prompt *p) {
        erase();
        attrset(A_REVERSE | A_BOLD);
        mvhline(0, 0, ' ', COLS);
        put(0, 1, "Lazaret: the sandbox asks to run a command on this computer");
        attrset(A_NORMAL);
        field(2, "Request", p->request_id);
        field(3, "Profile", p->profile);
        field(4, "Session", p->session_id);
        put(4, 12 + (int) strlen(p->session_id), " (this terminal)");
        field(5, "Why", p->justification[0] ? p->justification : "(no reason given)");
        bool edited = !streq(p->cmd, p->asked);
        put(7, 2, p->mode == MODE_EDIT ? "Command (editing)" : edited ? "Command (edited by you)" : "Command");

        /* The bottom rows: what the command will do, the keys, feedback. */
        int keys_y = LINES - 2, info_y = LINES - 4;
        const char *text = p->mode == MODE_EDIT ? p->edit : p->cmd;
        size_t len = p->mode == MODE_EDIT ? p->edit_len : strlen(p->cmd);
        int cy = 8, cx = 2;
        p->fits = layout(p, text, len, 8, info_y - 1, p->cursor, true, &cy, &cx);
        if (!p->fits) {
                attrset(A_BOLD);
                put(info_y - 1, 2, "[... more: the terminal is too small to show the whole command]");
                attrset(A_NORMAL);
        }
        bool meta = words_metachar(text, len) != NULL;
        if (meta) {
                attrset(A_BOLD | COLOR_PAIR(p->meta_pair));
                put(info_y, 2, "! Shell metacharacters (highlighted): if approved, /bin/sh -c runs this.");
                attrset(A_NORMAL);
        } else
                put(info_y, 2, "Runs as a program with these words, without a shell, in the workspace.");
        if (p->queued > 0) {
                char line[96];
                snprintf(line, sizeof(line), "%u more request%s of this session %s waiting.", p->queued,
                         p->queued == 1 ? "" : "s", p->queued == 1 ? "is" : "are");
                put(info_y + 1, 2, line);
        }
        attrset(A_BOLD);
        switch (p->mode) {
        case MODE_VIEW:
                put(keys_y, 2, "[A] Approve and run   [D] Deny   [E] Edit   [Q] Abort this session");
                break;
        case MODE_EDIT:
                put(keys_y, 2, "Enter: keep the edit   Esc: drop it   Left/Right Home/End Backspace Delete");
                break;
        case MODE_RUNNING:
                put(keys_y, 2,
                    p->cancelled ? "Cancelling the command ..." : "Running on this computer ...   [C] Cancel it");
                break;
        }
        attrset(A_NORMAL);
        if (p->note)
                put(keys_y + 1, 2, p->note);
        if (p->mode == MODE_EDIT) {
                curs_set(1);
                move(cy, cx);
        } else {
                curs_set(0);
                move(LINES - 1, 0);
        }
        refresh();
}

/* ---- the editor ------------------------------------------------------------ */

/* Byte offset of the character boundary before / after the cursor. */
static size_t edit_prev(const Prompt *p) {
        size_t at = 0;
        for (size_t i = 0; i < p->cursor;) {
                PromptUnit u;
                at = i;
                i += prompt_unit(p->edit + i, p->edit_len - i, &u);
        }
        return at;
}

static size_t edit_next(const Prompt *p) {
        PromptUnit u;
        return p->cursor < p->edit_len ? p->cursor + prompt_unit(p->edit + p->cursor, p->edit_len - p->cursor, &u)
                                       : p->edit_len;
}

static void edit_delete(Prompt *p, size_t from, size_t to) {
        memmove(p->edit + from, p->edit + to, p->edit_len - to + 1);
        p->edit_len -= to - from;
        p->cursor = from;
}

static void edit_insert(Prompt *p, wint_t wc) {
        char mb[MB_LEN_MAX];
        mbstate_t st = {};
        size_t n = wcrtomb(mb, (wchar_t) wc, &st);
        if (n == (size_t) -1 || n == 0)
                return;
        if (p->edit_len + n > ESCALATE_COMMAND_MAX) {
                p->note = "The command cannot be longer than 16 KiB.";
                return;
        }
        char *b = realloc(p->edit, p->edit_len + n + 1);
        if (!b)
                return;
        p->edit = b;
        memmove(b + p->cursor + n, b + p->cursor, p->edit_len - p->cursor + 1);
        memcpy(b + p->cursor, mb, n);
        p->edit_len += n;
        p->cursor += n;
}

/* Enter: the edit becomes the command, shown for approval. */
static void edit_keep(Prompt *p) {
        const char *why = NULL;
        char **v = NULL;
        size_t n = 0;
        if (p->edit_len == 0) {
                p->note = "The command is empty: type one, or Esc.";
                return;
        }
        if (!words_metachar(p->edit, p->edit_len)) {
                if (words_split(p->edit, p->edit_len, &v, &n, &why) < 0) {
                        p->note = streq(why, "no closing quotation") ? "A quotation is not closed."
                                                                     : "The command cannot be split into words.";
                        return;
                }
                words_free(v);
        }
        free(p->cmd);
        p->cmd = TAKE_PTR(p->edit);
        p->edit_len = p->cursor = 0;
        p->mode = MODE_VIEW;
}

static void edit_key(Prompt *p, int kind, wint_t wc) {
        p->note = NULL;
        if (kind == KEY_CODE_YES) {
                switch (wc) {
                case KEY_LEFT:
                        p->cursor = edit_prev(p);
                        break;
                case KEY_RIGHT:
                        p->cursor = edit_next(p);
                        break;
                case KEY_HOME:
                        p->cursor = 0;
                        break;
                case KEY_END:
                        p->cursor = p->edit_len;
                        break;
                case KEY_BACKSPACE:
                        if (p->cursor > 0)
                                edit_delete(p, edit_prev(p), p->cursor);
                        break;
                case KEY_DC:
                        edit_delete(p, p->cursor, edit_next(p));
                        break;
                case KEY_ENTER:
                        edit_keep(p);
                        break;
                default:
                        break;
                }
                return;
        }
        switch (wc) {
        case '\r':
        case '\n':
                edit_keep(p);
                return;
        case 27: /* Esc: back to the command as it was */
                p->edit = mfree(p->edit);
                p->edit_len = p->cursor = 0;
                p->mode = MODE_VIEW;
                return;
        case 127:
        case 8:
                if (p->cursor > 0)
                        edit_delete(p, edit_prev(p), p->cursor);
                return;
        case 1: /* ^A */
                p->cursor = 0;
                return;
        case 5: /* ^E */
                p->cursor = p->edit_len;
                return;
        case 2: /* ^B */
                p->cursor = edit_prev(p);
                return;
        case 6: /* ^F */
                p->cursor = edit_next(p);
                return;
        case 4: /* ^D */
                edit_delete(p, p->cursor, edit_next(p));
                return;
        case 11: /* ^K */
                edit_delete(p, p->cursor, p->edit_len);
                return;
        case 21: /* ^U */
                edit_delete(p, 0, p->cursor);
                return;
        default:
                /* What the person types goes in as it is; control
                 * characters are not typed into a command. */
                if (wc >= 0x20 && wc != 0x7f && (wc < 0x80 || wc > 0x9f))
                        edit_insert(p, wc);
                return;
        }
}

/* ---- the prompt ------------------------------------------------------------ */

static bool locale_is_utf8(void) {
        const char *cs = nl_langinfo(CODESET);
        return cs && (streq(cs, "UTF-8") || streq(cs, "utf8"));
}

int prompt_show(const PromptInfo *info, Prompt **ret) {
        Prompt *p = calloc(1, sizeof(Prompt));
        if (!p)
                return -ENOMEM;
        p->request_id = strdup(info->request_id);
        p->profile = strdup(info->profile);
        p->session_id = strdup(info->session_id);
        p->justification = strdup(info->justification);
        p->asked = strdup(info->command);
        p->cmd = strdup(info->command);
        p->queued = info->queued;
        const char *cur = setlocale(LC_CTYPE, NULL);
        p->old_locale = strdup(cur ? cur : "C");
        if (!p->request_id || !p->profile || !p->session_id || !p->justification || !p->asked || !p->cmd ||
            !p->old_locale) {
                prompt_close(p);
                return -ENOMEM;
        }
        /* The terminal's own locale for ncurses; UTF-8 when that says
         * nothing (or ASCII): unknown characters are shown escaped anyway. */
        if (!setlocale(LC_CTYPE, "") || !locale_is_utf8())
                (void) setlocale(LC_CTYPE, "C.UTF-8");

        fflush(stdout);
        p->screen = newterm(NULL, stdout, stdin);
        if (!p->screen)
                p->screen = newterm("vt100", stdout, stdin);
        if (!p->screen) {
                prompt_close(p);
                return -ENOTTY;
        }
        set_term(p->screen);
        raw();
        noecho();
        nonl();
        keypad(stdscr, TRUE);
        nodelay(stdscr, TRUE);
        set_escdelay(100);
        if (has_colors() && start_color() == OK) {
                (void) use_default_colors();
                if (init_pair(1, COLOR_RED, -1) == OK)
                        p->meta_pair = 1;
                if (init_pair(2, COLOR_YELLOW, -1) == OK)
                        p->esc_pair = 2;
        }
        p->mode = MODE_VIEW;
        draw(p);
        *ret = p;
        return 0;
}

PromptAction prompt_keys(Prompt *p, char **ret_edited) {
        PromptAction act = PROMPT_ACTION_NONE;
        wint_t wc;
        int kind;
        *ret_edited = NULL;
        while (act == PROMPT_ACTION_NONE && (kind = get_wch(&wc)) != ERR) {
                if (kind == KEY_CODE_YES && wc == KEY_RESIZE)
                        continue;
                switch (p->mode) {
                case MODE_EDIT:
                        edit_key(p, kind, wc);
                        break;
                case MODE_RUNNING:
                        if (kind == OK && (wc == 'c' || wc == 'C' || wc == 3) && !p->cancelled) {
                                p->cancelled = true;
                                act = PROMPT_ACTION_CANCEL;
                        }
                        break;
                case MODE_VIEW:
                        if (kind != OK)
                                break;
                        p->note = NULL;
                        switch (wc) {
                        case 'a':
                        case 'A':
                                if (!p->fits) {
                                        p->note = "Make the terminal larger to see the whole command first.";
                                        break;
                                }
                                if (!streq(p->cmd, p->asked) && !(*ret_edited = strdup(p->cmd)))
                                        break;
                                p->mode = MODE_RUNNING;
                                act = PROMPT_ACTION_APPROVE;
                                break;
                        case 'd':
                        case 'D':
                        case 3: /* ^C */
                                act = PROMPT_ACTION_DENY;
                                break;
                        case 'q':
                        case 'Q':
                                act = PROMPT_ACTION_ABORT;
                                break;
                        case 'e':
                        case 'E':
                                free(p->edit);
                                p->edit = strdup(p->cmd);
                                if (!p->edit)
                                        break;
                                p->edit_len = p->cursor = strlen(p->edit);
                                p->mode = MODE_EDIT;
                                break;
                        default:
                                p->note = "Press A, D, E or Q.";
                                break;
                        }
                        break;
                }
        }
        draw(p);
        return act;
}

void prompt_resize(Prompt *p) {
        struct winsize ws = {};
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
                (void) resizeterm(ws.ws_row, ws.ws_col);
        draw(p);
}

Prompt *prompt_close(Prompt *p) {
        if (!p)
                return NULL;
        if (p->screen) {
                set_term(p->screen);
                curs_set(1);
                endwin();
                delscreen(p->screen);
        }
        if (p->old_locale)
                (void) setlocale(LC_CTYPE, p->old_locale);
        free(p->old_locale);
        free(p->request_id);
        free(p->profile);
        free(p->session_id);
        free(p->justification);
        free(p->asked);
        free(p->cmd);
        free(p->edit);
        free(p);
        return NULL;
}
