/* SPDX-License-Identifier: MIT */
/* The gVisor backend's ops (sandbox-backend.h): one runsc container per
 * Domain made with Podman (sandbox.c), sessions by runsc exec, the
 * escalation and broker sockets through the dispenser (dispenser.c), the
 * memory from gVisor's own file, pause by runsc. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <sys/mount.h>
#include <sched.h>

#include "dispenser.h"
#include "exec-util.h"
#include "fd-util.h"
#include "podman.h"
#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "sandbox-backend.h"
#include "sandbox-limits.h"
#include "sandbox.h"
#include "store.h"
#include "string-util.h"

typedef struct GvisorState {
        SandboxInfo info;
        Dispenser *dispenser;
        int mem_fd;
} GvisorState;

static GvisorState *state_of(Sandbox *sb) {
        return sb->state;
}

SandboxInfo *sandbox_gvisor_info(Sandbox *sb) {
        return sb->backend == &sandbox_backend_gvisor && sb->state ? &state_of(sb)->info : NULL;
}

static void gvisor_done(Sandbox *sb) {
        GvisorState *st = state_of(sb);
        st->dispenser = dispenser_stop(st->dispenser);
        sandbox_info_done(&st->info);
        safe_close(st->mem_fd);
        free(st);
        sb->state = NULL;
}

/* Each pinned volume bound onto its stage in the Domain, which Podman is
 * then given: Podman would resolve the volume's own path again, by name,
 * so a name swapped for a link between launch's check and its bind would
 * be followed. A child of ours in Podman's user and mount namespaces (no
 * exec: a helper program cost about 35 ms of a start per volume) opens
 * each volume with no symbolic link on its canonical path, checks it is
 * still what launch resolved (device and inode), and binds it from that
 * descriptor; or, to unstage, detaches the stages. The stage (a directory,
 * or an empty file for a file) is made on the host first. */
typedef struct StageReport {
        int index; /* the volume that failed, -1: none */
        int error; /* errno */
        bool stale; /* another file than launch checked */
} StageReport;

#define STAGE_MAX 64

/* stages[k] is volume vol[k]'s (binding), or one found in the Domain
 * (unstaging: vol unused). */
static void stage_child(const LaunchSpec *s, char *const *stages, const size_t *vol, size_t n, const dev_t *dev,
                        const ino_t *ino, bool bind, int userns, int mntns, int report) {
        StageReport rep = { .index = -1 };
        if ((userns >= 0 && setns(userns, CLONE_NEWUSER) < 0) || (mntns >= 0 && setns(mntns, CLONE_NEWNS) < 0)) {
                rep.error = errno;
                (void) !write(report, &rep, sizeof(rep));
                _exit(1);
        }
        for (size_t k = 0; k < n && rep.index < 0; k++) {
                const char *stage = stages[k];
                size_t i = bind ? vol[k] : 0;
                (void) umount2(stage, MNT_DETACH | UMOUNT_NOFOLLOW); /* a crash's, or unstaging */
                if (bind) {
                        struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                                                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
                        long fd = syscall(SYS_openat2, AT_FDCWD, s->volumes[i].host, &how, sizeof(how));
                        struct stat st;
                        if (fd < 0 || fstat((int) fd, &st) < 0) {
                                rep = (StageReport){ (int) i, errno, false };
                                break;
                        }
                        if (st.st_dev != dev[k] || st.st_ino != ino[k]) {
                                rep = (StageReport){ (int) i, ESTALE, true };
                                break;
                        }
                        /* "/proc/self/fd/N" without stdio. */
                        char from[32] = "/proc/self/fd/", digits[12];
                        int nd = 0;
                        for (long v = fd; v > 0 || nd == 0; v /= 10)
                                digits[nd++] = (char) ('0' + v % 10);
                        size_t at = strlen(from);
                        while (nd > 0)
                                from[at++] = digits[--nd];
                        from[at] = '\0';
                        if (mount(from, stage, NULL, MS_BIND | MS_REC, NULL) < 0) {
                                rep = (StageReport){ (int) i, errno, false };
                                break;
                        }
                        (void) close((int) fd);
                }
        }
        (void) !write(report, &rep, sizeof(rep));
        _exit(rep.index < 0 ? 0 : 1);
}

/* Unstaging: every stage in the Domain, whichever spec made it (a
 * coordinator recovering a gVisor generation may have another spec, even
 * a native one), in Podman's namespaces as they are: with no pause
 * process they are gone, and their mounts with them. 1: nothing to do. */
static int unstage_list(const LaunchSpec *s, char **stages, size_t *ret_n, int *userns, int *mntns) {
        _cleanup_free_ char *dir = path_join(s->domain_dir, "volumes");
        if (!dir)
                return -ENOMEM;
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 1 : negative_errno();
        size_t n = 0;
        int r = 0;
        for (struct dirent *de; r >= 0 && n < STAGE_MAX && (de = readdir(d));) {
                if (de->d_name[0] < '0' || de->d_name[0] > '9' || de->d_name[strspn(de->d_name, "0123456789")])
                        continue;
                if (!(stages[n] = path_join(dir, de->d_name)))
                        r = -ENOMEM;
                else
                        n++;
        }
        closedir(d);
        *ret_n = n;
        if (r < 0 || n == 0 || !s->rootless)
                return r < 0 ? r : n == 0;
        pid_t pp;
        if (podman_pause_pid_find(&pp) < 0)
                return 1;
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/ns/user", (int) pp);
        *userns = open(p, O_RDONLY | O_CLOEXEC);
        snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int) pp);
        *mntns = *userns >= 0 ? open(p, O_RDONLY | O_CLOEXEC) : -EBADF;
        if (*mntns < 0)
                return errno == ENOENT || errno == ESRCH ? 1 : negative_errno();
        return 0;
}

static int stage_run(const LaunchSpec *s, bool bind, char **ret_error) {
        char *stages[STAGE_MAX] = {};
        size_t vol[STAGE_MAX];
        dev_t dev[STAGE_MAX];
        ino_t ino[STAGE_MAX];
        size_t n = 0;
        int r = 0;
        _cleanup_close_ int userns = -EBADF, mntns = -EBADF;
        for (size_t i = 0; bind && i < s->n_volumes && r >= 0; i++) {
                const LaunchVolume *v = &s->volumes[i];
                if (!v->id)
                        continue;
                unsigned long long d, in;
                if (n >= STAGE_MAX || sscanf(v->id, "%llu:%llu", &d, &in) != 2)
                        r = -EINVAL;
                else if (!(stages[n] = sandbox_volume_stage(s, i)))
                        r = -ENOMEM;
                else {
                        vol[n] = i;
                        dev[n] = (dev_t) d;
                        ino[n] = (ino_t) in;
                        n++;
                }
        }
        int p[2] = { -EBADF, -EBADF };
        if (bind && r >= 0 && n > 0)
                r = podman_ns_fd(s, "user", &userns);
        if (bind && r >= 0 && n > 0)
                r = podman_ns_fd(s, "mnt", &mntns);
        if (!bind) {
                r = unstage_list(s, stages, &n, &userns, &mntns);
                if (r > 0) {
                        r = 0;
                        for (size_t i = 0; i < n; i++)
                                stages[i] = mfree(stages[i]);
                        n = 0;
                }
        }
        if (r >= 0 && n > 0 && pipe2(p, O_CLOEXEC) < 0)
                r = negative_errno();
        if (r >= 0 && n > 0) {
                pid_t pid = fork();
                if (pid == 0) {
                        safe_close(p[0]);
                        stage_child(s, stages, vol, n, dev, ino, bind, userns, mntns, p[1]);
                }
                if (pid < 0)
                        r = negative_errno();
                p[1] = safe_close(p[1]);
                StageReport rep = { .index = -1, .error = EIO };
                ssize_t k = pid > 0 ? read(p[0], &rep, sizeof(rep)) : -1;
                int st = 0;
                while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
                        ;
                if (r >= 0 &&
                    (k != (ssize_t) sizeof(rep) || rep.index >= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
                        r = -(rep.error ?: EIO);
                        const char *what = rep.index >= 0 ? s->volumes[rep.index].container : "volumes";
                        const char *host = rep.index >= 0 ? s->volumes[rep.index].host : "";
                        if (rep.stale || rep.error == ELOOP)
                                r = asprintf(ret_error,
                                             "volume %s: %s is no longer what lazaret checked (%s): it was "
                                             "replaced or moved since",
                                             what, host,
                                             rep.stale ? "another file is there now"
                                                       : "a symbolic link is on its path") < 0
                                            ? -ENOMEM
                                            : -ESTALE;
                        else if (asprintf(ret_error, "volume %s: cannot %s %s: %s", what,
                                          bind ? "bind" : "detach the stage of", host, strerror(rep.error ?: EIO)) < 0)
                                r = -ENOMEM;
                }
                safe_close(p[0]);
        }
        for (size_t i = 0; i < n; i++)
                free(stages[i]);
        return r;
}

static int stage_volumes(const LaunchSpec *s, char **ret_error) {
        _cleanup_free_ char *dir = path_join(s->domain_dir, "volumes");
        if (!dir)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        for (size_t i = 0; i < s->n_volumes; i++) {
                const LaunchVolume *v = &s->volumes[i];
                if (!v->id)
                        continue;
                _cleanup_free_ char *stage = sandbox_volume_stage(s, i);
                if (!stage)
                        return -ENOMEM;
                struct stat st;
                bool is_dir = stat(v->host, &st) < 0 || S_ISDIR(st.st_mode);
                int fd = is_dir ? (mkdir(stage, 0700) < 0 && errno != EEXIST ? -1 : 0)
                                : open(stage, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0 && errno != EISDIR) {
                        int r = negative_errno();
                        if (asprintf(ret_error, "cannot make %s: %s", stage, strerror(-r)) < 0)
                                *ret_error = NULL;
                        return r;
                }
                if (fd > 0)
                        safe_close(fd);
        }
        return stage_run(s, true, ret_error);
}

/* The stages' mounts, detached (not mounted is no error). */
static void unstage_volumes(const LaunchSpec *s) {
        _cleanup_free_ char *err = NULL;
        if (stage_run(s, false, &err) < 0)
                log_warning("cannot detach the volumes' stages: %s", err ?: "?");
}

static int gvisor_start(Sandbox *sb, json_t **ret_commit, char **ret_error) {
        const LaunchSpec *s = sb->spec;
        const MountPlan *p = &sb->plan;
        GvisorState *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        st->mem_fd = -EBADF;
        /* The processes inside, when they can be observed: losing them
         * weakens nothing, so the start goes on without them. */
        _cleanup_free_ char *trace_config = NULL;
        int r = sb->hooks && sb->hooks->trace_begin ? sb->hooks->trace_begin(sb->host, &trace_config) : 0;
        if (r < 0) {
                free(st);
                return r;
        }
        uint64_t t0 = now_usec();
        r = stage_volumes(s, ret_error);
        log_debug("volumes staged in %" PRIu64 " us", now_usec() - t0);
        if (r < 0) {
                unstage_volumes(s);
                free(st);
                return r;
        }
        r = sandbox_start(s, sb->generation, p, trace_config, &st->info, ret_error);
        if (r < 0)
                unstage_volumes(s);
        if (sb->hooks && sb->hooks->trace_attached)
                sb->hooks->trace_attached(sb->host, r >= 0);
        if (r < 0) {
                free(st);
                return r;
        }
        sb->state = st;
        /* Before anything inside asks: the readiness probes go through the
         * relay to the broker. */
        bool esc = p->certs_dir && p->socket_dir;
        if (esc || p->broker_dir || p->fsmonitor_socket) {
                _cleanup_free_ char *esc_sock = esc ? path_join(p->socket_dir, "escalate.sock") : NULL,
                                    *broker_sock = p->broker_dir ? path_join(p->broker_dir, "sock") : NULL;
                DispenserConfig dc = { .runsc = s->runsc,
                                       .runsc_root = st->info.runsc_root,
                                       .sandbox_id = st->info.id,
                                       .rootless = s->rootless,
                                       .escalate_socket = esc_sock,
                                       .broker_socket = broker_sock,
                                       .fsmonitor_socket = p->fsmonitor_socket };
                r = (esc && !esc_sock) || (p->broker_dir && !broker_sock)
                            ? -ENOMEM
                            : dispenser_start(&dc, &st->dispenser, ret_error);
        }
        if (r >= 0 && !(sb->id = strdup(st->info.id)))
                r = -ENOMEM;
        if (r < 0) {
                _cleanup_free_ char *ignored = NULL;
                (void) container_remove(s, sb->name, &ignored);
                unstage_volumes(s);
                gvisor_done(sb);
                sb->id = mfree(sb->id);
                return r;
        }
        sb->supervisor = st->info.conmon_pid;
        ProcessIdentity conmon = {};
        (void) process_identity_of(st->info.conmon_pid, &conmon);
        *ret_commit = json_pack("{s:s, s:s, s:o}", "container_id", st->info.id, "runtime_root", st->info.runsc_root,
                                "runtime_supervisor", process_identity_to_json(&conmon));
        return 0;
}

/* The container, removed by name (Podman's --ignore makes that
 * idempotent), live or a dead coordinator's. */
static int gvisor_release(Sandbox *sb, json_t *own) {
        if (sb->state)
                state_of(sb)->dispenser = dispenser_stop(state_of(sb)->dispenser);
        const char *name = json_string_value(json_object_get(own, "container_name"));
        _cleanup_free_ char *err = NULL;
        if (name && container_remove(sb->spec, name, &err) < 0) {
                log_error("cannot remove the sandbox %s: %s", name, err ? err : "?");
                return -EIO;
        }
        unstage_volumes(sb->spec);
        return 0;
}

static int gvisor_reap(Sandbox *sb, const char **ret_why) {
        (void) sb;
        (void) ret_why;
        return 0;
}

/* runsc reads the OCI process description from the memfd at its fd 3. */
static int gvisor_session_input(Sandbox *sb, const SessionExec *x, json_t *env, int *ret_fd) {
        json_t *args = json_array();
        for (size_t i = 0; args && x->argv[i]; i++)
                if (json_array_append_new(args, json_string(x->argv[i])) < 0) {
                        json_decref(args);
                        return -ENOMEM;
                }
        if (!args)
                return -ENOMEM;
        json_t *proc = json_pack("{s:b, s:O, s:o*, s:O*, s:s}", "terminal", x->interactive, "user",
                                 state_of(sb)->info.user, "args", args, "env", env, "cwd", x->cwd);
        if (!proc)
                return -ENOMEM;
        if (x->interactive &&
            json_object_set_new(proc, "consoleSize",
                                json_pack("{s:i, s:i}", "height", (int) x->rows, "width", (int) x->columns)) < 0) {
                json_decref(proc);
                return -ENOMEM;
        }
        _cleanup_free_ char *text = json_dumps(proc, JSON_COMPACT);
        json_decref(proc);
        if (!text)
                return -ENOMEM;
        return memfd_from("lazaret-process", text, strlen(text), ret_fd);
}

static const char *gvisor_session_program(Sandbox *sb) {
        return sb->spec->runsc;
}

static char **gvisor_session_argv(Sandbox *sb, const SessionExec *x) {
        return sandbox_exec_argv(sb->spec, &state_of(sb)->info, "/proc/self/fd/3", x->pidfile);
}

static void gvisor_session_started(Sandbox *sb, pid_t pid) {
        /* cpu_limit holds every host thread of the sandbox already; the
         * trace points see the process. */
        (void) sb;
        (void) pid;
}

static char **gvisor_base_env(const Sandbox *sb) {
        const GvisorState *st = sb->state;
        return st ? st->info.env : NULL;
}

static const char *gvisor_inside_path(const Sandbox *sb, SandboxPath path) {
        (void) sb;
        return path == SANDBOX_PATH_CA_BUNDLE ? CA_BUNDLE_PATH : "/run/lazaret/terminfo";
}

static int gvisor_memory_open(Sandbox *sb, char *why, size_t size) {
        GvisorState *st = state_of(sb);
        int r = limits_memory_open(sb->supervisor, &st->mem_fd);
        if (r < 0)
                snprintf(why, size, "gVisor's memory file of the sandbox cannot be read: %s", strerror(-r));
        return r;
}

static int gvisor_memory_used(Sandbox *sb, uint64_t *ret_bytes) {
        return limits_memory_used(state_of(sb)->mem_fd, ret_bytes);
}

static void gvisor_memory_close(Sandbox *sb) {
        if (sb->state)
                state_of(sb)->mem_fd = safe_close(state_of(sb)->mem_fd);
}

static int gvisor_memory_killed(Sandbox *sb, uint64_t *ret_kills) {
        (void) sb;
        (void) ret_kills;
        return -EOPNOTSUPP; /* no memory cgroup of its own: gVisor's kernel keeps the memory */
}

static const char *gvisor_limit_enforcer(Sandbox *sb, SandboxLimit limit, bool *ret_enforced) {
        bool rootless = sb->spec->rootless;
        *ret_enforced = true;
        switch (limit) {
        case SANDBOX_LIMIT_PIDS:
                return rootless ? "gVisor (RLIMIT_NPROC for every task of the sandbox)"
                                : "gVisor (RLIMIT_NPROC for every task of the sandbox), and a pids cgroup for runsc's "
                                  "host threads";
        case SANDBOX_LIMIT_MEMORY:
                return rootless ? "the coordinator, which stops the sandbox at the limit"
                                : "the coordinator, which stops the sandbox at the limit, and a memory cgroup above it";
        case SANDBOX_LIMIT_DISK:
                return sb->plan.anchor && sb->plan.anchor->n_layers > 0
                               ? "gVisor's overlay of the sandbox's own root file system (ENOSPC inside); the "
                                 "persistent directories' changes (together) and the work files' growth by the "
                                 "coordinator, which stops the sandbox past it"
                               : "gVisor's overlay of the sandbox's own root file system (ENOSPC inside); the work "
                                 "files' growth by the coordinator, which stops the sandbox past it";
        }
        *ret_enforced = false;
        return "nothing";
}

/* runsc pause stops every task of the sandbox's kernel, resume starts
 * them again. */
static int gvisor_pause_argv(Sandbox *sb, bool pause, Argv *ret, char *error, size_t size) {
        GvisorState *st = state_of(sb);
        Argv a = {};
        argv_add(&a, "runsc");
        argv_addf(&a, "--root=%s", st->info.runsc_root);
        if (sb->spec->rootless)
                argv_add(&a, "--ignore-cgroups");
        argv_add(&a, pause ? "pause" : "resume");
        argv_add(&a, st->info.id);
        if (a.oom) {
                argv_done(&a);
                snprintf(error, size, "out of memory");
                return -ENOMEM;
        }
        *ret = a;
        return 0;
}

/* One probe through the relay in the sandbox: its one line of output. */
static int gvisor_egress_probe(Sandbox *sb, const char *name, const char *port, uint64_t timeout_usec,
                               char **ret_line) {
        GvisorState *st = state_of(sb);
        Argv a = {};
        argv_add(&a, "runsc");
        argv_addf(&a, "--root=%s", st->info.runsc_root);
        if (sb->spec->rootless)
                argv_add(&a, "--ignore-cgroups");
        argv_add(&a, "exec");
        argv_add(&a, st->info.id);
        argv_add(&a, "/run/lazaret/relay");
        argv_add(&a, "--listening");
        argv_add(&a, "--probe");
        argv_add(&a, name);
        argv_add(&a, port);
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture(sb->spec->runsc, (const char *const *) a.v, timeout_usec, &res);
        argv_done(&a);
        if (r < 0)
                return r;
        const char *out = res.out && *res.out ? res.out : res.err ? res.err : "";
        *ret_line = strndup(out, strcspn(out, "\n"));
        return *ret_line ? 0 : -ENOMEM;
}

static const char *gvisor_start_warning(Sandbox *sb) {
        (void) sb;
        return NULL;
}

static void gvisor_describe(Sandbox *sb, json_t *sandbox, json_t *limits) {
        (void) sb;
        (void) sandbox;
        (void) limits;
}

/* gVisor's prerequisites (runsc, Podman, the layers' tools) are launch's
 * own, checked for every profile: nothing of the backend's alone. */
static int gvisor_preflight(const Config *cfg, const ConfigProfile *p, bool from_flag, LaunchSpec *s, const char *dir,
                            char **ret_error) {
        (void) cfg;
        (void) p;
        (void) from_flag;
        (void) s;
        (void) dir;
        (void) ret_error;
        return 0;
}

const SandboxBackend sandbox_backend_gvisor = {
        .name = "gvisor",
        .preflight = gvisor_preflight,
        .uses_image = true,
        .traced = true,
        .git_router_optional = false,
        .fsmonitor = true,
        .supervisor_pidfile = SANDBOX_CONMON_PIDFILE,
        .start = gvisor_start,
        .release = gvisor_release,
        .done = gvisor_done,
        .reap = gvisor_reap,
        .session_input = gvisor_session_input,
        .session_program = gvisor_session_program,
        .session_argv = gvisor_session_argv,
        .session_started = gvisor_session_started,
        .base_env = gvisor_base_env,
        .inside_path = gvisor_inside_path,
        .memory_open = gvisor_memory_open,
        .memory_used = gvisor_memory_used,
        .memory_killed = gvisor_memory_killed,
        .memory_close = gvisor_memory_close,
        .limit_enforcer = gvisor_limit_enforcer,
        .pause_argv = gvisor_pause_argv,
        .egress_probe = gvisor_egress_probe,
        .start_warning = gvisor_start_warning,
        .describe = gvisor_describe,
};
