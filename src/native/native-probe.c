/* SPDX-License-Identifier: MIT */
/* What the host allows the native backend (issue 21): Landlock's ABI and
 * whether this user may create user namespaces. lazaret-native --check
 * says it, and lazaret's launch asks it in its own process (no program to
 * start on the way to a sandbox). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "landlock.h"
#include "macro.h"
#include "native-probe.h"
#include "string-util.h"

/* Whether this user may create a user namespace; if not, *why says what
 * stops it. */
static int probe_userns(char *why, size_t size) {
        const char *e = getenv(NO_USERNS_TEST_ENV);
        if (e && streq(e, "1")) {
                snprintf(why, size, "%s=1 simulates a host without them", NO_USERNS_TEST_ENV);
                return -EPERM;
        }
        /* Once per process: lazaret up checks several agents in one. */
        static int known = 1; /* 1: not probed yet */
        static char known_why[384];
        if (known <= 0) {
                snprintf(why, size, "%s", known_why);
                return known;
        }
        pid_t pid = fork();
        if (pid < 0) {
                snprintf(why, size, "fork: %s", strerror(errno));
                return -errno;
        }
        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER) < 0 ? MIN(errno, 255) : 0);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                snprintf(known_why, sizeof(known_why),
                         "unshare(CLONE_NEWUSER): %s; kernel.unprivileged_userns_clone, user.max_user_namespaces "
                         "or a security module forbids them",
                         WIFEXITED(st) ? strerror(WEXITSTATUS(st)) : "the probe died");
                snprintf(why, size, "%s", known_why);
                known = -EPERM;
                return known;
        }
        known = 0;
        return 0;
}

/* The mode to run in (*ret_mode) for what was asked (want), and the
 * kernel's Landlock ABI; for FS-ONLY, *why says why (shown by --check).
 * Fails, with the cause and the fix in *why, when Landlock is missing or
 * FULL was asked for where user namespaces are not available. */
int native_probe(NativeMode want, NativeMode *ret_mode, int *ret_abi, char *why, size_t size) {
        int abi = landlock_abi();
        if (abi <= 0) {
                snprintf(why, size,
                         "Landlock is not available (the kernel lacks it or did not enable it at boot): enable it "
                         "(Linux 5.13 or newer, \"landlock\" in lsm=), or use the container backend");
                return -EOPNOTSUPP;
        }
        *ret_abi = abi;
        if (want == NATIVE_MODE_FS_ONLY) {
                snprintf(why, size, "--mode fs-only");
                *ret_mode = NATIVE_MODE_FS_ONLY;
                return 0;
        }
        char cause[384];
        if (probe_userns(cause, sizeof(cause)) >= 0) {
                *ret_mode = NATIVE_MODE_FULL;
                return 0;
        }
        if (want == NATIVE_MODE_FULL) {
                snprintf(why, size,
                         "--mode full: unprivileged user namespaces are not available (%s): allow them, run with "
                         "--mode fs-only (Landlock alone), or use the container backend",
                         cause);
                return -EPERM;
        }
        snprintf(why, size, "no user namespaces: %s", cause);
        *ret_mode = NATIVE_MODE_FS_ONLY;
        return 0;
}
