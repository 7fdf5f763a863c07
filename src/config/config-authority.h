/* SPDX-License-Identifier: MIT */
#pragma once

/* Who may widen the sandbox (architecture decision 15).
 *
 * The files the person chose ($XDG_CONFIG_HOME/lazaret/config.toml and
 * --config FILE) carry authority. A workspace's lazaret.toml is input from
 * whoever wrote the repository (and, in direct mode, from the agent itself):
 * until the person trusts its exact bytes (lazaret trust), it may only
 * narrow what the sandbox gets.
 *
 * Every key of the schema is classified once, in config_key_rules[]; the
 * loader, `lazaret trust`, lazaret.toml(5) and the tests all use that table. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "toml.h"

typedef struct ConfigNode ConfigNode;

typedef enum ConfigKeyClass {
        CONFIG_KEY_TABLE, /* a table: its keys are classified one by one */
        CONFIG_KEY_NEUTRAL, /* acts inside the sandbox only */
        CONFIG_KEY_AUTHORITY, /* any value but the trusted files' own widens */
        CONFIG_KEY_NARROW_VALUE, /* one value narrows (narrow_str / narrow_bool); any other widens */
        CONFIG_KEY_SUBSET, /* a list: keeping entries of the trusted files' list narrows, any other entry widens */
        CONFIG_KEY_UNION, /* a list that can only narrow: the workspace's entries are added to the trusted ones */
        CONFIG_KEY_ENV, /* "env:VAR" copies a host variable in; a literal widens when it replaces the trusted
                         * files' value or names a variable of config_env_names[] */
        _CONFIG_KEY_CLASS_MAX,
        _CONFIG_KEY_CLASS_INVALID = -EINVAL,
} ConfigKeyClass;

/* How two entries of a SUBSET list are compared. */
typedef enum ConfigEntryKind {
        CONFIG_ENTRY_VALUE, /* structurally equal TOML values */
        CONFIG_ENTRY_CIDR, /* the same prefix, however written */
        CONFIG_ENTRY_VOLUME, /* the same host and container; the mode the same, or made read-only */
        _CONFIG_ENTRY_KIND_MAX,
        _CONFIG_ENTRY_KIND_INVALID = -EINVAL,
} ConfigEntryKind;

typedef struct ConfigKeyRule {
        const char *path; /* dotted; "*" stands for any one key (a profile, a variable) */
        ConfigKeyClass cls;
        ConfigEntryKind entry; /* SUBSET only */
        const char *narrow_str; /* NARROW_VALUE: the string that narrows, or NULL for a boolean */
        bool narrow_bool; /* NARROW_VALUE with narrow_str NULL: the boolean that narrows */
        const char *why; /* why it is classified so (lazaret.toml(5) quotes these) */
} ConfigKeyRule;

extern const ConfigKeyRule config_key_rules[];
extern const size_t config_key_rules_n;

const char *config_key_class_to_string(ConfigKeyClass c);

/* The rule of a key given by its n path components, or NULL when the schema
 * has no such key (validation reports it as unknown). */
const ConfigKeyRule *config_key_rule(const char *const *path, size_t n);

/* The names of the keys directly below parent ("" for the top level,
 * "profiles.*" for a profile), in table order, into ret (NULL-terminated;
 * at most max - 1 names). Returns how many. */
size_t config_key_children(const char *parent, const char **ret, size_t max);

/* Variables whose literal value, set by an untrusted workspace file, would
 * widen what the sandbox gets although it acts inside only: it chooses
 * whose account the agent works on (a credential), where the agent's
 * requests go with the person's prompts and code (an endpoint, a proxy,
 * whom TLS trusts), or code that runs at a program's start (the loader,
 * interpreters' start-up options, git's configuration). A workspace file
 * setting one needs trust, as does one replacing any variable the trusted
 * files set. Patterns are fnmatch(3) globs matched ignoring case (proxy
 * variables are read in either case); lazaret.toml(5) lists them. */
typedef struct ConfigEnvName {
        const char *pattern;
        const char *why; /* what a workspace's value could do (lazaret trust shows it) */
} ConfigEnvName;

extern const ConfigEnvName config_env_names[];
extern const size_t config_env_names_n;

/* The first entry of config_env_names[] that name matches, or NULL. */
const ConfigEnvName *config_env_name_find(const char *name);

/* One thing an untrusted workspace file would add over the trusted files. */
typedef struct ConfigWidening {
        char *key; /* "profiles.tt.volumes[0]" */
        TomlPos pos; /* of the value (or the list entry) in the workspace file */
        const TomlValue *value; /* points into the workspace file's tree */
        const TomlValue *trusted; /* the trusted files' value at that key, or NULL when they set none */
        const ConfigKeyRule *rule;
        const char *why; /* why this value widens: rule->why, or for env the variable's own reason (static) */
} ConfigWidening;

typedef struct ConfigWidenings {
        ConfigWidening *items;
        size_t n;
} ConfigWidenings;

void config_widenings_done(ConfigWidenings *w);

/* Compare the workspace file's tree (root) with the trusted files' merged
 * tree (trusted, NULL when there is none) and list, in document order, every
 * key whose value would widen the sandbox. Keys the schema does not know and
 * values of the wrong type are skipped: validation reports them. Returns 0
 * (ret may be empty) or -ENOMEM. */
int config_authority_check(const TomlValue *root, const ConfigNode *trusted, ConfigWidenings *ret);
