/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "launch.h"
#include "workspace-trust.h"

/* The trees agents were given to write: every Domain's workspace and
 * read-write volumes, as each launch gave them (canonical paths), whatever
 * its data root. A name there may be an agent's own: a volume whose path
 * passes through a symbolic link in one of them is refused at launch,
 * whichever agent could have made the link (path_resolve_no_links_in).
 *
 * One record for the person, beside the records of what they trusted
 * ($XDG_DATA_HOME/lazaret/agent-trees; no sandbox may write there, nor
 * reach a data root): each path ends in a NUL byte. A coordinator adds its
 * trees before its sandbox starts, under a lock (<file>.lock), writing the
 * record whole and renaming it into place. Nothing is removed while the
 * tree is there (a link an agent made outlives its Domain, its reset and
 * a change of configuration); past 256 KiB, the trees that no longer
 * exist are dropped. When the file is missing (before the first record),
 * every Domain's last launch-spec.json in the data root stands for it, and
 * the first record is made from them. */
#define AGENT_TREES_FILE "agent-trees"

/* The record's path for the person whose home is home. */
static inline int agent_trees_path(const char *home, char **ret) {
        return wstrust_user_record_path(home, AGENT_TREES_FILE, ret);
}

/* *ret: a NULL-terminated list of the recorded trees (none: an empty
 * list), -errno on a read error, -EFBIG past 4 MiB. Reads only: without
 * the file, what the specs of data_root's Domains name. */
int agent_trees_load(const char *file, const char *data_root, char ***ret, size_t *ret_n);

void agent_trees_free(char **v);
static inline void agent_trees_freep(char ***v) {
        agent_trees_free(*v);
}

/* Add the trees not recorded yet (the record made first when missing). */
int agent_trees_record(const char *file, const char *data_root, char *const *trees, size_t n_trees);

/* What a launch gives its agent to write (its workspace and read-write
 * volumes), recorded by the coordinator before the sandbox starts, in the
 * spec's agent_trees: a link its agent makes later is in a recorded
 * tree. */
int agent_trees_record_spec(const LaunchSpec *s);
