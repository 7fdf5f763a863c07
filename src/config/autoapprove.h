/* SPDX-License-Identifier: MIT */
#pragma once

/* [escalation] auto_approve (spec §5.2.1, decision 11, issue 14): each
 * entry is an argument vector whose program is resolved to an absolute path
 * when the configuration loads. A request is approved without the prompt
 * only when it has no metacharacter, its own program resolves to the same
 * absolute path, and its words are exactly the entry's ("uname -a" approves
 * "uname -a" and nothing else). An entry that ends in the word "..." is a
 * prefix: the request may add words after the entry's, but each added word
 * names an existing file beneath the workspace and is no option (nothing
 * that starts with '-': an added option may name a program to run, as
 * sort's --compress-program does, or a file outside, as "-m/etc/shadow";
 * options belong in the entry: "ls -l ..."). The entry's own relative words that name
 * something existing must resolve beneath the workspace too, with no
 * symlink leaving it (openat2 RESOLVE_BENEATH), so a symlink README.md ->
 * /etc/shadow never makes "cat README.md" read it; a word that names
 * nothing ("9876" in "sleep 9876") is no file. Programs that run other
 * programs or code (git, shells, interpreters, env, xargs, find, make, npm,
 * ...) are refused as entries. */

#include <stdbool.h>
#include <stddef.h>

/* Where program names are looked up, at config load and for requests; the
 * commands run with this PATH too. */
#define AUTOAPPROVE_SEARCH_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

#define AUTOAPPROVE_PREFIX_MARK "..."

typedef struct AutoApproveRule {
        char **argv; /* NULL-terminated; argv[0] is absolute; without the "..." */
        size_t argc;
        bool prefix; /* the entry ended in "...": more words may follow */
} AutoApproveRule;

/* Why program (an absolute path) may never be auto-approved, judged by its
 * own name and by the name of the file it resolves to; NULL when it may. */
const char *autoapprove_refused(const char *program);

/* Parse one configured entry. On a bad one -EINVAL with *ret_why, one
 * sentence naming the cause (caller frees); -ENOMEM. */
int autoapprove_rule_parse(const char *entry, const char *search, AutoApproveRule *ret, char **ret_why);
void autoapprove_rule_done(AutoApproveRule *r);

/* Whether the request's vector (req[0] as the sandbox wrote it) is approved
 * by rule. A program name is looked up in search; an absolute path must be
 * the rule's program, letter for letter; a relative path never matches.
 * workspace_fd is the directory the command would run in: the file-naming
 * words are resolved beneath it (see above). */
bool autoapprove_match(const AutoApproveRule *rule, char *const *req, size_t req_n, const char *search,
                       int workspace_fd);

/* Whether program (an absolute path) reads the files it is given (cat,
 * head, grep, ...): a prefix entry for it deserves a warning. */
bool autoapprove_reads_files(const char *program);
