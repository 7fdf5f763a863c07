/* SPDX-License-Identifier: MIT */
#pragma once

/* The configuration's variable expansion (spec §3.2.1, §3.2.2): a leading
 * tilde and a closed list of {tokens}. Pure: no environment or file system
 * access; the caller supplies every value. Fuzzed by fuzz/fuzz-expand.c. */

#include <stdbool.h>

typedef enum ExpandToken {
        EXPAND_PROFILE_NAME, /* {profile_name} */
        EXPAND_PROFILE_DIR, /* {profile_dir}   = {data_root}/{profile_name} */
        EXPAND_DOMAIN_HASH, /* {domain_hash} */
        EXPAND_DOMAIN_DIR, /* {domain_dir}    = {data_root}/domains/{domain_hash} */
        EXPAND_WORKSPACE_DIR, /* {workspace_dir} */
        _EXPAND_TOKEN_MAX,
        _EXPAND_TOKEN_INVALID = -1,
} ExpandToken;

typedef struct ExpandContext {
        const char *home; /* value for a leading "~"; NULL: tilde is not expanded here */
        const char *values[_EXPAND_TOKEN_MAX]; /* NULL: token not allowed in this field */
} ExpandContext;

/* Token name without braces ("profile_dir"), or NULL. */
const char *expand_token_to_string(ExpandToken t);
ExpandToken expand_token_from_string(const char *s, size_t n);

/* Expand in. "~" is expanded only as the very first character and only when
 * followed by '/' or the end ("~user" is refused). Every '{' must open a
 * token "{name}" naming an allowed token; a stray '{' or '}' is an error, so
 * a typo cannot silently become a literal directory name.
 *
 * On success returns 0 and *ret (caller frees). On bad input returns -EINVAL
 * and *ret_error (caller frees) describes it, e.g. "unknown token
 * '{profle_dir}'"; on allocation failure -ENOMEM. */
int expand_string(const char *in, const ExpandContext *ctx, char **ret, char **ret_error);
