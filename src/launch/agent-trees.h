/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "launch.h"

/* The trees agents of a data root were given to write: every Domain's
 * workspace and read-write volumes, as each launch gave them (canonical
 * paths). A name there may be an agent's own: a volume whose path passes
 * through a symbolic link in one of them is refused at launch, whichever
 * agent could have made the link (path_resolve_no_links_in).
 *
 * Kept in {data_root}/agent-trees, which no sandbox reaches: each path
 * ends in a NUL byte; each coordinator appends what it adds, in one write
 * each, and nothing is removed (a link an agent made outlives its Domain,
 * its reset and a change of configuration); an entry a crash cut short is
 * closed off by the next append and never read. When the file is missing
 * (a data root from before it), every Domain's last launch-spec.json
 * stands for it, and the first record is made from them. */
#define AGENT_TREES_FILE "agent-trees"

/* *ret: a NULL-terminated list of the recorded trees (none: an empty
 * list), -errno on a read error, -EFBIG past 4 MiB. Reads only: without
 * the file, what the Domains' specs name. */
int agent_trees_load(const char *data_root, char ***ret, size_t *ret_n);

void agent_trees_free(char **v);
static inline void agent_trees_freep(char ***v) {
        agent_trees_free(*v);
}

/* Append the trees not recorded yet (the file made first when missing).
 * The data root must exist. */
int agent_trees_record(const char *data_root, char *const *trees, size_t n_trees);

/* What a launch gives its agent to write (its workspace and read-write
 * volumes), recorded in its data root by the coordinator before the
 * sandbox starts: a link its agent makes later is in a recorded tree. */
int agent_trees_record_spec(const LaunchSpec *s);
