/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fd-util.h"
#include "host-git.h"
#include "string-util.h"

extern char **environ;

const char *const host_git_options[] = {
        "-c", "core.hooksPath=/dev/null", "-c",         "core.fsmonitor=false",
        "-c", "log.showSignature=false",  "--no-pager", NULL,
};

void host_git_argv(Argv *a, const char *workspace) {
        argv_add(a, "git");
        argv_add(a, "-C");
        argv_add(a, workspace);
        for (const char *const *o = host_git_options; *o; o++)
                argv_add(a, *o);
}

int host_git_drop_environment(void) {
        for (;;) {
                const char *found = NULL;
                for (char **e = environ; e && *e; e++)
                        if (startswith(*e, "GIT_") && strchr(*e, '=')) {
                                found = *e;
                                break;
                        }
                if (!found)
                        return 0;
                _cleanup_free_ char *name = strndup(found, strcspn(found, "="));
                if (!name)
                        return -ENOMEM;
                if (unsetenv(name) < 0)
                        return negative_errno();
        }
}
