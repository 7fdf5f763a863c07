/* SPDX-License-Identifier: MIT */
/* The native backend's ops (sandbox-backend.h): lazaret-native's holder
 * and joiners on the host's kernel (native-run.c), observed by a scan of
 * /proc, its memory in its own cgroup or watched, no freezer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "native-preflight.h"
#include "native-run.h"
#include "path-util.h"
#include "sandbox-backend.h"
#include "sandbox-limits.h"
#include "store.h"
#include "string-util.h"

static NativeRun *run_of(Sandbox *sb) {
        return sb->state;
}

pid_t sandbox_native_init_pid(Sandbox *sb) {
        return sb->backend == &sandbox_backend_native && sb->state ? run_of(sb)->init_pid : 0;
}

static void native_done(Sandbox *sb) {
        NativeRun *n = run_of(sb);
        native_run_stop(n); /* safe twice: a no-op after release */
        free(n);
        sb->state = NULL;
}

static int native_start(Sandbox *sb, json_t **ret_commit, char **ret_error) {
        NativeRun *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        int r = native_run_start(sb->spec, &sb->plan, n, ret_error);
        if (r < 0) {
                free(n);
                return r;
        }
        sb->state = n;
        if (!(sb->id = strdup(sb->name))) {
                native_done(sb);
                return -ENOMEM;
        }
        sb->supervisor = n->pid; /* 0 in FS-ONLY: no holder, its sessions are all */
        /* Its processes, observed by a scan of /proc (it has no trace
         * points). */
        if (sb->hooks && sb->hooks->scan_begin)
                sb->hooks->scan_begin(sb->host, sb->plan.workspace);
        *ret_commit =
                n->fs_only ? json_pack("{s:s, s:s, s:s}", "backend", "native", "mode", "fs-only", "cgroup", n->cgroup)
                           : json_pack("{s:s, s:o, s:i, s:s?}", "backend", "native", "holder",
                                       process_identity_to_json(&n->ident), "init_pid", (int) n->init_pid, "cgroup",
                                       n->cgroup);
        return 0;
}

static int native_release(Sandbox *sb, json_t *own) {
        NativeRun *n = run_of(sb);
        if (n && (n->pid > 0 || n->fs_only)) {
                native_run_stop(n);
                return 0;
        }
        /* A dead coordinator's (it died with it, unless it was killed
         * before --die-with-parent took hold); in FS-ONLY, what is left in
         * its memory cgroup. */
        ProcessIdentity pi;
        if (process_identity_from_json(json_object_get(own, "holder"), &pi) >= 0)
                native_run_kill_leftover(&pi);
        const char *cg = json_string_value(json_object_get(own, "cgroup"));
        if (cg && sb->spec->memory_cgroup && path_under(cg, sb->spec->memory_cgroup))
                native_run_remove_leftover_cgroup(cg);
        return 0;
}

static bool reaped(pid_t pid) {
        int st;
        return pid > 0 && waitpid(pid, &st, WNOHANG) == pid;
}

static int native_reap(Sandbox *sb, const char **ret_why) {
        NativeRun *n = run_of(sb);
        if (!n || !reaped(n->relay_pid))
                return 0;
        /* Names would stop resolving for the agent, silently: the
         * coordinator stops instead. */
        n->relay_pid = 0;
        *ret_why = "the relay of egress by name stopped unexpectedly";
        return -EPIPE;
}

/* The joiner reads the environment from a descriptor (--env-fd):
 * NUL-separated NAME=VALUE entries. Never on a command line, which every
 * user of the host can read in /proc. */
static int native_session_input(Sandbox *sb, const SessionExec *x, json_t *env, int *ret_fd) {
        (void) sb;
        (void) x;
        size_t len = 0, i;
        json_t *e;
        json_array_foreach(env, i, e) len += strlen(json_string_value(e) ?: "") + 1;
        _cleanup_free_ char *buf = malloc(len + 1);
        if (!buf)
                return -ENOMEM;
        char *p = buf;
        json_array_foreach(env, i, e) {
                const char *v = json_string_value(e);
                if (!v)
                        continue;
                size_t n = strlen(v) + 1;
                memcpy(p, v, n);
                p += n;
        }
        return memfd_from("lazaret-env", buf, len, ret_fd);
}

static const char *native_session_program(Sandbox *sb) {
        return sb->spec->native;
}

static char **native_session_argv(Sandbox *sb, const SessionExec *x) {
        return native_join_argv(sb->spec, run_of(sb), x->cwd, true, x->argv);
}

static void native_session_started(Sandbox *sb, pid_t pid) {
        if (sb->hooks && sb->hooks->session_started)
                sb->hooks->session_started(sb->host);
        /* cpu_limit: the joiner and what it starts (inherited). */
        if (sb->cpus[0])
                (void) limits_cpu_apply(pid, true, (unsigned) sb->spec->cpu_limit, SANDBOX_NICE, (char[64]){}, 64);
}

static char **native_base_env(const Sandbox *sb) {
        (void) sb;
        return NULL;
}

/* FS-ONLY's commands see the host's paths. */
static const char *native_inside_path(const Sandbox *sb, SandboxPath path) {
        const NativeRun *n = sb->state;
        bool host = n && n->fs_only;
        if (path == SANDBOX_PATH_CA_BUNDLE)
                return host ? sb->plan.ca_bundle : CA_BUNDLE_PATH;
        return host ? sb->plan.terminfo_dir : "/run/lazaret/terminfo";
}

/* Its processes and tmpfs mounts, looked at once a second like gVisor's
 * memory file, or its memory cgroup: always readable. */
static int native_memory_open(Sandbox *sb, char *why, size_t size) {
        (void) sb;
        (void) why;
        (void) size;
        return 0;
}

static int native_mem_used(Sandbox *sb, uint64_t *ret_bytes) {
        return native_memory_used(run_of(sb), ret_bytes);
}

static int native_mem_killed(Sandbox *sb, uint64_t *ret_kills) {
        int r = native_memory_killed(run_of(sb), ret_kills);
        return r == -ENODATA ? -EOPNOTSUPP : r;
}

static void native_memory_close(Sandbox *sb) {
        (void) sb;
}

static const char *native_limit_enforcer(Sandbox *sb, SandboxLimit limit, bool *ret_enforced) {
        NativeRun *n = run_of(sb);
        bool fs_only = n && n->fs_only;
        *ret_enforced = true;
        switch (limit) {
        case SANDBOX_LIMIT_PIDS:
                *ret_enforced = !fs_only;
                return fs_only ? "nothing: FS-ONLY has no user namespace of its own, and RLIMIT_NPROC would count "
                                 "the user's processes on the host too"
                               : "RLIMIT_NPROC of every process of the sandbox, which Linux counts in the sandbox's "
                                 "own user namespace: its tasks, not the user's on the host";
        case SANDBOX_LIMIT_MEMORY:
                return n && n->cgroup
                               ? "the kernel: the sandbox's own memory cgroup (runtime.memory_cgroup), swap included, "
                                 "where a process that would pass the limit is ended; the coordinator then stops the "
                                 "sandbox"
                               : "the coordinator: the proportional set size of the sandbox's processes and what its "
                                 "tmpfs mounts hold, once a second; at the limit it stops the sandbox. Shared memory "
                                 "no process maps any more escapes it: set runtime.memory_cgroup for the kernel's "
                                 "limit";
        case SANDBOX_LIMIT_DISK:
                return "the work files' growth by the coordinator, which stops the sandbox past it (the native "
                       "sandbox's system directories are the host's, read-only)";
        }
        *ret_enforced = false;
        return "nothing";
}

static int native_pause_argv(Sandbox *sb, bool pause, Argv *ret, char *error, size_t size) {
        (void) sb;
        (void) pause;
        (void) ret;
        snprintf(error, size, "pause needs the gVisor backend (the native one has no freezer of its own)");
        return -EOPNOTSUPP;
}

static int native_egress_probe(Sandbox *sb, const char *name, const char *port, uint64_t timeout_usec,
                               char **ret_line) {
        return native_run_probe(sb->spec, run_of(sb), name, port, timeout_usec, ret_line);
}

static const char *native_start_warning(Sandbox *sb) {
        if (!run_of(sb) || !run_of(sb)->fs_only)
                return NULL;
        return sb->spec->branch ? "FS-ONLY (no user namespaces here): Landlock and seccomp at the host's paths, no "
                                  "network, .git read-only (commits are refused); pids_limit is not enforced"
                                : "FS-ONLY (no user namespaces here): Landlock and seccomp at the host's paths, no "
                                  "network; pids_limit is not enforced";
}

/* The boundary, and what .git is in the sandbox. */
static void native_describe(Sandbox *sb, json_t *sandbox, json_t *limits) {
        NativeRun *n = run_of(sb);
        bool fs_only = n && n->fs_only;
        (void) json_object_set_new(sandbox, "boundary",
                                   json_string(fs_only ? "Landlock and seccomp at the host's paths, no network, every "
                                                         "process in a memory cgroup (lazaret-native, FS-ONLY mode: "
                                                         "no user namespaces here)"
                                               : n && n->share_net
                                                       ? "Landlock, user, mount, IPC and PID namespaces, seccomp, in "
                                                         "the network sidecar's network namespace (lazaret-native, "
                                                         "FULL mode)"
                                                       : "Landlock, user, mount, IPC, network and PID namespaces, "
                                                         "seccomp (lazaret-native, FULL mode)"));
        if (n && !fs_only)
                (void) json_object_set_new(sandbox, "init_pid", json_integer(n->init_pid));
        /* What its network is, and what holds it (decision 20). */
        (void) json_object_set_new(
                sandbox, "network_enforced_by",
                json_string(fs_only             ? "seccomp: no IP sockets, no connect(2) (FS-ONLY)"
                            : n && n->share_net ? "the network sidecar's namespace: lazaret-netd's routes and DNS "
                                                  "filter, attested and probed from there before the agent "
                                                  "started; the sandbox's own user namespace, below the one that "
                                                  "owns it, has no capability over them"
                            : n && n->loopback  ? "a network namespace of its own with its loopback alone, where "
                                                  "the relay hands names to the broker"
                                                : "a network namespace of its own with no interface up"));
        (void) json_object_set_new(sandbox, "mode", json_string(fs_only ? "fs-only" : "full"));
        if (sb->plan.git_read_only)
                (void) json_object_set_new(sandbox, "git",
                                           json_string("read-only: commits are refused (the git router could not "
                                                       "run; see the coordinator log)"));
        if (limits && n && n->cgroup)
                (void) json_object_set_new(json_object_get(limits, "memory"), "cgroup", json_string(n->cgroup));
}

const SandboxBackend sandbox_backend_native = {
        .name = "native",
        .preflight = native_preflight,
        .uses_image = false,
        .traced = false,
        .git_router_optional = true,
        .fsmonitor = false, /* the kernel's own lstat() is cheap */
        .start = native_start,
        .release = native_release,
        .done = native_done,
        .reap = native_reap,
        .session_input = native_session_input,
        .session_program = native_session_program,
        .session_argv = native_session_argv,
        .session_started = native_session_started,
        .base_env = native_base_env,
        .inside_path = native_inside_path,
        .memory_open = native_memory_open,
        .memory_used = native_mem_used,
        .memory_killed = native_mem_killed,
        .memory_close = native_memory_close,
        .limit_enforcer = native_limit_enforcer,
        .pause_argv = native_pause_argv,
        .egress_probe = native_egress_probe,
        .start_warning = native_start_warning,
        .describe = native_describe,
};
