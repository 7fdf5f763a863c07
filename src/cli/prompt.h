/* SPDX-License-Identifier: MIT */
#pragma once

/* The escalation prompt (spec §5.2, decision 11), drawn with ncurses on the
 * CLI's own terminal while TTY forwarding is suspended. It shows the request
 * id, profile, session, justification and command; nothing of the request's
 * text reaches the terminal as it is where it could move the cursor, change
 * colours or hide characters (prompt-text.h), and the shell's
 * metacharacters are highlighted. Keys: [A]pprove, [D]eny (also Ctrl-C),
 * [E]dit in place (Enter keeps the edit, Esc drops it; the edited command
 * is shown, with its metacharacters, before it can be approved), [Q] abort
 * the session. Once approved, the prompt stays up while the command runs:
 * [C] cancels it. A command that does not fit on the screen cannot be
 * approved until the terminal is large enough to show all of it.
 *
 * The caller owns the event loop: it calls prompt_keys() when stdin is
 * readable and prompt_resize() on SIGWINCH. */

#include <stdbool.h>

typedef enum PromptAction {
        PROMPT_ACTION_NONE, /* nothing decided yet */
        PROMPT_ACTION_APPROVE,
        PROMPT_ACTION_DENY,
        PROMPT_ACTION_ABORT,
        PROMPT_ACTION_CANCEL, /* stop the approved command */
} PromptAction;

typedef struct Prompt Prompt;

typedef struct PromptInfo {
        const char *request_id, *profile, *session_id, *command, *justification;
        unsigned queued;
} PromptInfo;

/* Take over the terminal on stdin/stdout and show the request. -ENOTTY
 * when ncurses cannot drive this terminal type, -ENOMEM. */
int prompt_show(const PromptInfo *info, Prompt **ret);

/* Read the keys waiting on stdin. Returns what the person decided, or
 * PROMPT_ACTION_NONE. With APPROVE, *ret_edited is the command as edited
 * (caller frees), or NULL when unchanged; the prompt then shows the command
 * running until prompt_close(). */
PromptAction prompt_keys(Prompt *p, char **ret_edited);

/* The terminal changed size: redraw. */
void prompt_resize(Prompt *p);

/* Give the terminal back as it was (the screen too). NULL. */
Prompt *prompt_close(Prompt *p);
