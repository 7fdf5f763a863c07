/* SPDX-License-Identifier: MIT */
/* The native backend's preflight (SandboxBackend.preflight, issue 43):
 * what it cannot provide for a profile on this host, refused at launch,
 * before anything is made for it. Moved from launch.c, unchanged. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "exec-util.h"
#include "launch.h"
#include "macro.h"
#include "native-preflight.h"
#include "native-probe.h"
#include "netpolicy.h"
#include "path-util.h"
#include "strbuf.h"
#include "string-util.h"

static int fail(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int fail(char **ret_error, const char *fmt, ...) {
        StrBuf b = STRBUF_INIT;
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(&b, fmt, ap);
        va_end(ap);
        *ret_error = strbuf_steal(&b);
        return *ret_error ? -ENOENT : -ENOMEM;
}

/* Why the user has no memory cgroup (runtime.memory_cgroup unset, and
 * none of setup's found), naming the fix. */
static const char *memory_cgroup_why(const Config *cfg) {
        return cfg->memory_cgroup_why ? cfg->memory_cgroup_why
                                      : "no memory cgroup was found for you (sudo scripts/setup.sh --memory-cgroup "
                                        "USER makes one)";
}

/* The native backend (issue 21): what it cannot provide fails closed here,
 * before anything starts, naming what is missing and the way out; never a
 * silent fallback to something weaker. lazaret-native's own --check proves
 * Landlock and user namespaces on this host. */
int native_preflight(const Config *cfg, const ConfigProfile *p, bool from_flag, LaunchSpec *s, const char *dir,
                     char **ret_error) {
        /* Who asked for it: the profile, or only --backend (issue 42: the
         * error said the profile "uses backend = native" when it did not). */
        char who[160];
        if (from_flag)
                snprintf(who, sizeof who, "--backend native (for profile '%s')", p->name);
        else
                snprintf(who, sizeof who, "profile '%s' uses backend = \"native\", which", p->name);
        if (geteuid() == 0)
                return fail(ret_error,
                            "%s runs the agent as the user who starts it "
                            "and refuses root (its files would be root's on the host): run lazaret as your own user, "
                            "or use backend = \"gvisor\"",
                            who);
        /* Address rules: the sandbox runs in the network sidecar's
         * namespace (netd's routes), which the coordinator makes itself
         * (no Podman needed; launch finds slirp4netns). */
        bool addresses = !netpolicy_permits_nothing(&p->net);
        const char *rules_fix = p->own_address_rules || cfg->n_default_allow == 0
                                        ? "remove allow_egress from the profile"
                                        : "set inherit_default_allow = false in it (names only, through the broker)";
        if (addresses) {
                const char *search = getenv("PATH");
                int r = exec_find_program(search && *search ? search : DEFAULT_SEARCH_PATH, "slirp4netns",
                                          &s->slirp4netns);
                if (r == -ENOENT)
                        return fail(ret_error,
                                    "%s enforces address rules in a network namespace of its own whose uplink is "
                                    "slirp4netns, and slirp4netns is not installed or not in PATH: install it (sudo "
                                    "apt-get install slirp4netns), or %s",
                                    who, rules_fix);
                if (r < 0)
                        return r;
        }
        /* persistent_dirs are kept by lazaret-native's --persist, which
         * mounts them over the sandbox's own root: not where its own
         * mounts are (the home and /tmp are memory, /workspace is the
         * workspace). */
        for (size_t i = 0; i < p->n_persistent_dirs; i++) {
                const char *d = p->persistent_dirs[i];
                if (path_under(d, "/tmp") || path_under(d, "/home"))
                        return fail(ret_error,
                                    "%s cannot keep persistent directory %s: not /tmp or /home or below them (the "
                                    "sandbox's own memory); change persistent_dirs in [profiles.%s], or use backend "
                                    "= \"gvisor\"",
                                    who, d, p->name);
        }
        /* Volumes are bound where they say, but not over the sandbox's own
         * mounts (lazaret-native refuses those destinations too). */
        for (size_t i = 0; i < p->n_volumes; i++) {
                const char *c = p->volumes[i].container;
                static const char *const below[] = { "/proc", "/dev", "/workspace", "/run/lazaret" };
                bool bad = streq(c, "/") || streq(c, "/tmp") || streq(c, "/home") || streq(c, "/home/sandbox");
                for (size_t k = 0; !bad && k < ELEMENTSOF(below); k++)
                        bad = path_under(c, below[k]) != NULL;
                if (bad)
                        return fail(ret_error,
                                    "%s cannot take volume %s there "
                                    "(%s:%u:%u): not /, /tmp or the home, and not /proc, /dev, /workspace or "
                                    "/run/lazaret or below them; choose another container path",
                                    who, c, p->volumes[i].where.file, p->volumes[i].where.pos.line,
                                    p->volumes[i].where.pos.col);
        }
        s->native = path_join(dir, "lazaret-native");
        if (!s->native)
                return -ENOMEM;
        if (access(s->native, X_OK) < 0)
                return fail(ret_error, "%s is missing: lazaret-native must be installed next to lazaret", s->native);
        /* What the host allows, asked here (as lazaret-native --check
         * would say it, without starting it). */
        char why[1024], desc[1200];
        NativeMode mode = _NATIVE_MODE_INVALID;
        int abi = 0;
        if (native_probe(NATIVE_MODE_AUTO, &mode, &abi, why, sizeof(why)) < 0)
                return fail(ret_error, "%s cannot work on this host: %s", who, why);
        /* FS-ONLY (no user namespaces here): Landlock and seccomp at the
         * host's paths. What needs namespaces is refused, naming it. */
        if (mode != NATIVE_MODE_FS_ONLY) {
                /* Only a memory cgroup holds memory_limit on the host's
                 * kernel: a watch of what processes map misses memory none
                 * maps any more (a memfd, shared memory), so a limit nothing
                 * enforces is refused rather than shown (decision 20). */
                if (p->memory_limit_mib > 0 && !cfg->memory_cgroup)
                        return fail(ret_error,
                                    "%s cannot hold memory_limit = %" PRIu64
                                    " MiB here: only a memory cgroup enforces it on the host's kernel, and "
                                    "runtime.memory_cgroup is not set and %s; or set memory_limit = 0 in "
                                    "[profiles.%s] to run with no memory limit, or use backend = \"gvisor\"",
                                    who, p->memory_limit_mib, memory_cgroup_why(cfg), p->name);
                return 0;
        }
        s->native_fs_only = true;
        snprintf(desc, sizeof(desc), "FS-ONLY (Landlock ABI %d; %s)", abi, why);
        const char *out = desc;
        int l = (int) strlen(desc);
        if (addresses)
                return fail(ret_error,
                            "%s runs %.*s here: address rules need FULL mode, whose sandbox runs in the network "
                            "sidecar's namespace; allow unprivileged user namespaces, %s, or use backend = "
                            "\"gvisor\"",
                            who, l, out, rules_fix);
        /* Without a PID namespace only Landlock's scope keeps the agent's
         * signals from the user's other processes (the coordinator's). */
        if (abi < 6)
                return fail(ret_error,
                            "%s runs %.*s here: FS-ONLY needs Landlock "
                            "ABI 6 (Linux 6.12) to keep the sandbox's signals from the user's other processes, and "
                            "this kernel has ABI %d; allow unprivileged user namespaces, or use backend = \"gvisor\"",
                            who, l, out, abi);
        if (p->n_domains > 0)
                return fail(ret_error,
                            "%s runs %.*s here: egress by name "
                            "(allow_domains) needs FULL mode, whose network namespace the broker's relay listens in; "
                            "allow unprivileged user namespaces, or use backend = \"gvisor\"",
                            who, l, out);
        if (cfg->escalation_enabled)
                return fail(
                        ret_error,
                        "%s runs %.*s here: escalation needs FULL "
                        "mode (FS-ONLY refuses connect(2), and its client is reached at /run/lazaret/escalate); set "
                        "[escalation] enabled = false, allow unprivileged user namespaces, or use backend = "
                        "\"gvisor\"",
                        who, l, out);
        if (p->n_persistent_dirs > 0)
                return fail(ret_error,
                            "%s runs %.*s here: persistent_dirs need FULL mode's "
                            "mount namespace; remove them, allow unprivileged user namespaces, or use backend = "
                            "\"gvisor\"",
                            who, l, out);
        if (p->n_volumes > 0)
                return fail(ret_error,
                            "%s runs %.*s here: volumes need FULL mode's "
                            "mount namespace (%s:%u:%u); remove them, allow unprivileged user namespaces, or use "
                            "backend = \"gvisor\"",
                            who, l, out, p->volumes[0].where.file, p->volumes[0].where.pos.line,
                            p->volumes[0].where.pos.col);
        if (!cfg->memory_cgroup)
                return fail(ret_error,
                            "%s runs %.*s here: without a PID namespace "
                            "only a memory cgroup holds memory_limit and ends every process the sandbox leaves, "
                            "and runtime.memory_cgroup is not set and %s; or allow unprivileged user namespaces, or "
                            "use backend = \"gvisor\"",
                            who, l, out, memory_cgroup_why(cfg));
        return 0;
}
