/* SPDX-License-Identifier: MIT */
#pragma once

/* What the escalation prompt shows of a request's text (spec §5.2, decision
 * 11): nothing in it may move the cursor, change colours, hide or reorder
 * characters. Control characters become \n, \t, \r or \xNN; a backslash
 * becomes \\; bytes that are not UTF-8 become \xNN; C1 controls, bidi
 * marks and invisible characters become <U+XXXX>. Other UTF-8 stays. The
 * shell's metacharacters are marked, so the prompt can highlight them.
 * Pure; libc only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum PromptSegKind {
        PROMPT_PLAIN, /* text as it is */
        PROMPT_META, /* a shell metacharacter (as it is, e.g. ";") */
        PROMPT_ESCAPED, /* a stand-in for what cannot be shown (e.g. "\x1b") */
} PromptSegKind;

typedef struct PromptSeg {
        PromptSegKind kind;
        char *text; /* ASCII or valid UTF-8 without controls */
} PromptSeg;

/* One character of s (len > 0 bytes): a valid UTF-8 sequence, or one byte.
 * Returns how many bytes it took (1 to 4). */
typedef struct PromptUnit {
        PromptSegKind kind;
        unsigned cp; /* the code point (the byte, for one that is not UTF-8) */
        char text[16]; /* what to show, NUL-terminated */
} PromptUnit;
size_t prompt_unit(const char *s, size_t len, PromptUnit *ret);

/* Split s (len bytes) into segments; 0 or -ENOMEM. */
int prompt_segments(const char *s, size_t len, PromptSeg **ret, size_t *ret_n);
void prompt_segments_free(PromptSeg *v, size_t n);

/* The segments joined (caller frees); NULL on OOM. */
char *prompt_visible(const char *s, size_t len);

/* Is cp a character that changes how the text around it is shown, or
 * shows as nothing (C1 controls, bidi marks and overrides, zero-width and
 * other default-ignorable characters)? The one list prompt_unit uses; the
 * TOML writer escapes the same characters. */
bool prompt_char_invisible(uint32_t cp);

/* The length of the valid UTF-8 sequence at s (at most n > 0 bytes) and its
 * code point in *ret, or 0 when it is not one (overlong, a surrogate, past
 * U+10FFFF, cut short). */
size_t prompt_utf8_decode(const char *s, size_t n, uint32_t *ret);

/* s (len bytes) made inert for a screen whose own quoting must stay, such
 * as TOML text that is already escaped: every character prompt_unit shows
 * escaped (control characters, bytes that are not UTF-8, C1 controls, bidi
 * and invisible characters) is its escape, but a newline stays a newline
 * and backslashes and shell metacharacters stay as they are. Caller frees;
 * NULL on OOM. */
char *prompt_inert(const char *s, size_t len);
