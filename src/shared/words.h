/* SPDX-License-Identifier: MIT */
#pragma once

/* Escalation commands as text (spec §5.2.1, decision 11): which bytes force
 * the human prompt, and the POSIX shell-words splitter that turns a
 * metacharacter-free command into an argument vector. Our own, because
 * wordexp(3) runs the shell; its oracle is Python's shlex.split (POSIX mode,
 * no comments), whose rules it follows exactly:
 *   - words are separated by space, tab, CR and LF;
 *   - '...' is literal;
 *   - "..." is literal but for \" and \\ (a backslash before anything else
 *     stays, so "\$" is \$);
 *   - outside quotes a backslash takes the next byte literally;
 *   - quotes join the word they touch, and '' or "" is an empty word.
 * Pure; libc only. */

#include <stddef.h>

/* The first byte of s (len bytes) that keeps a command from being run
 * without a shell or approved by a rule: ; | & $ ( ) ` > < \ or a control
 * character (newline, CR, anything below 0x20, DEL). NULL when there is
 * none. */
const char *words_metachar(const char *s, size_t len);

/* Split s (len bytes; a NUL byte is an error) into a NULL-terminated vector
 * of *ret_n words (caller frees with words_free). -EINVAL with *ret_why
 * ("no closing quotation", "nothing after the backslash", "a NUL byte") on
 * bad input, -ENOMEM. */
int words_split(const char *s, size_t len, char ***ret, size_t *ret_n, const char **ret_why);

void words_free(char **v);
