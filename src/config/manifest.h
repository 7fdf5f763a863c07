/* SPDX-License-Identifier: MIT */
#pragma once

/* A manifest of several agents at once (issue 22): `lazaret up MANIFEST`.
 *
 *   [agents.alpha]
 *   profile = "shell"
 *   command = ["claude", "-p", "fix the failing test"]
 *   workspace = "~/src/project"        # optional: the manifest's directory
 *
 * Each agent is a table named after it (so two agents cannot share a
 * name); its name is a profile name's shape (2 to 32 of a-z, 0-9, '_',
 * '-': it names its Domain and, in branch mode, its branch
 * lazaret/agent-NAME). The command is an argv array, never shell language.
 * Strict: an unknown key, a wrong type, an empty command, no agent or too
 * many is an error naming the file, line and column.
 *
 * A manifest chooses which directories and profiles its agents get, and it
 * may lie in a workspace an agent can write: like a workspace's
 * lazaret.toml it is trusted only by its exact bytes (lazaret trust
 * --manifest; records in $XDG_DATA_HOME/lazaret/trusted-manifests), and it
 * is read without following a symbolic link, a regular file of the user's
 * own. Its bytes alone do not say which directories its agents get: a
 * relative workspace (or one through a directory an agent can write) names
 * whatever a symbolic link put in its place points to. So what is trusted
 * is manifest_trust_digest(): the bytes together with the canonical
 * directory each agent's workspace resolved to when the person read them. */

#include <stddef.h>

#include "toml.h"

#define MANIFEST_AGENTS_MAX 32u
#define MANIFEST_ARGS_MAX   1024u
#define MANIFEST_BYTES_MAX  (1024u * 1024u)

typedef struct ManifestAgent {
        char *name;
        char *profile;
        char **argv; /* NULL-terminated, at least one entry */
        size_t argc;
        char *workspace; /* absolute, canonical, an existing directory */
        TomlPos pos; /* where its table begins */
} ManifestAgent;

typedef struct Manifest {
        char *path; /* as given */
        char *canonical; /* the file opened, absolute and canonical: what trust records */
        char sha256[65]; /* of the exact bytes parsed */
        ManifestAgent *agents; /* in the file's order */
        size_t n_agents;
} Manifest;

/* Read and check path. home expands a leading "~" in workspace (NULL: a
 * "~" is an error). On failure returns -errno and *ret_error is one line,
 * "PATH:LINE:COL: what is wrong, and the fix" where a position applies
 * (caller frees); *ret is left empty. */
int manifest_load(const char *path, const char *home, Manifest *ret, char **ret_error);

/* Only open and read path as manifest_load() does: its canonical path
 * (caller frees) and the SHA-256 of its bytes, whatever they hold. */
int manifest_identify(const char *path, char **ret_canonical, char ret_sha256[65], char **ret_error);

/* The canonical path path has, or would have when it is gone or refused
 * (its directory resolved, its name kept): what names it in trust records
 * and a group's directory. Caller frees. */
int manifest_canonical(const char *path, char **ret);

/* What trust records of a loaded manifest, as lowercase hex (65 bytes with
 * the NUL): the SHA-256 of "lazaret manifest trust 1", the SHA-256 of its
 * bytes, then each agent's name and canonical workspace, every field
 * NUL-terminated (no name or path holds a NUL, so no two manifests share
 * the text). Equal only for the same bytes whose agents resolve to the same
 * directories. 0 or -EIO. */
int manifest_trust_digest(const Manifest *m, char ret[65]);

void manifest_done(Manifest *m);
