/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "argv-util.h"
#include "broker-proto.h"
#include "exec-util.h"
#include "fileio.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "native-layers.h"
#include "native-run.h"
#include "path-util.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"

#define READY_USEC (UINT64_C(10) * 1000000)
/* A new persistent layer first gets a copy of the host directory's tree
 * (4 s for Debian's /usr here): the holder's ready line may take longer. */
#define READY_NEW_LAYERS_USEC (UINT64_C(120) * 1000000)
#define STOP_USEC             (UINT64_C(5) * 1000000)

static bool reap(pid_t pid, uint64_t timeout_usec) {
        uint64_t deadline = now_usec() + timeout_usec;
        for (;;) {
                pid_t r = waitpid(pid, NULL, WNOHANG);
                if (r == pid || (r < 0 && errno == ECHILD))
                        return true;
                if (now_usec() >= deadline)
                        return false;
                usleep(5000);
        }
}

/* ---- the memory cgroup ----------------------------------------------------
 * With runtime.memory_cgroup, each sandbox gets a cgroup of its own in it,
 * named after the coordinator, limited to memory_limit (and as much again
 * of nothing: swap is held to the same figure); the holder and every joiner
 * move into it first thing (lazaret-native --cgroup), so the kernel charges
 * all the sandbox holds there, shared memory and kernel buffers included. */

#define CGROUP_PREFIX "lazaret-"

static int write_text(const char *dir, const char *file, const char *text) {
        _cleanup_free_ char *p = path_join(dir, file);
        if (!p)
                return -ENOMEM;
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        size_t l = strlen(text);
        ssize_t k = write(fd, text, l);
        return k == (ssize_t) l ? 0 : k < 0 ? negative_errno() : -EIO;
}

/* The cgroups coordinators that are gone left behind (killed, or their
 * removal raced their last processes): removed where empty. A live
 * coordinator's is left alone, even empty (its holder may be about to
 * move in). */
static void cgroup_sweep(const char *parent) {
        DIR *d = opendir(parent);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || !startswith(de->d_name, CGROUP_PREFIX))
                        continue;
                /* lazaret-PID-START: the coordinator's identity. */
                int pid = 0;
                unsigned long long start = 0;
                int used = 0;
                if (sscanf(de->d_name + strlen(CGROUP_PREFIX), "%d-%llu%n", &pid, &start, &used) != 2 ||
                    de->d_name[strlen(CGROUP_PREFIX) + (size_t) used] != '\0' || pid <= 0)
                        continue;
                ProcessIdentity who = { .pid = pid, .start_time = start };
                if (process_identity_alive(&who))
                        continue;
                (void) unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
        }
        closedir(d);
}

static int cgroup_make(const LaunchSpec *s, char **ret_path, char **ret_error) {
        cgroup_sweep(s->memory_cgroup);
        ProcessIdentity self = {};
        int r = process_identity_of(getpid(), &self);
        if (r < 0)
                return r;
        char name[64];
        snprintf(name, sizeof(name), CGROUP_PREFIX "%d-%" PRIu64, (int) self.pid, self.start_time);
        _cleanup_free_ char *p = path_join(s->memory_cgroup, name);
        if (!p)
                return -ENOMEM;
        if (mkdir(p, 0700) < 0 && errno != EEXIST) {
                r = negative_errno();
                if (asprintf(ret_error, "cannot make the sandbox's memory cgroup %s: %s (runtime.memory_cgroup)", p,
                             strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        char limit[32];
        snprintf(limit, sizeof(limit), "%" PRIu64 "\n", s->memory_limit_mib << 20);
        /* memory_limit = 0: the cgroup holds the sandbox's processes (and
         * ends them all), with no limit. */
        r = s->memory_limit_mib > 0 ? write_text(p, "memory.limit_in_bytes", limit) : 0;
        /* Without swap accounting there is no memsw file, and nothing to
         * hold to the limit. */
        if (r >= 0 && s->memory_limit_mib > 0) {
                r = write_text(p, "memory.memsw.limit_in_bytes", limit);
                if (r == -ENOENT)
                        r = 0;
        }
        if (r < 0) {
                if (asprintf(ret_error, "cannot limit the sandbox's memory cgroup %s to memory_limit: %s", p,
                             strerror(-r)) < 0)
                        *ret_error = NULL;
                (void) rmdir(p);
                return r;
        }
        *ret_path = TAKE_PTR(p);
        return 0;
}

/* The sandbox's cgroup made, and "--cgroup DIR" added to a; on failure
 * a is done. */
static int cgroup_add(const LaunchSpec *s, Argv *a, NativeRun *n, char **ret_error) {
        int r = cgroup_make(s, &n->cgroup, ret_error);
        if (r < 0) {
                argv_done(a);
                return r;
        }
        argv_add(a, "--cgroup");
        argv_add(a, n->cgroup);
        return 0;
}

/* Its processes are gone (the holder reaped): the cgroup goes too. A joiner
 * our loop has not reaped yet keeps it busy a moment. */
static void cgroup_remove(char **path) {
        if (!*path)
                return;
        for (int i = 0; i < 100; i++) {
                if (rmdir(*path) == 0 || errno == ENOENT)
                        break;
                if (errno != EBUSY) {
                        log_warning("cannot remove the sandbox's memory cgroup %s: %s", *path, strerror(errno));
                        break;
                }
                if (i == 99)
                        log_warning("the sandbox's memory cgroup %s still has processes; the next start removes it",
                                    *path);
                usleep(10000);
        }
        free(*path);
        *path = NULL;
}

/* Whether the process of pidfd (pid) is still in the cgroup cg, by the
 * memory line of /proc/PID/cgroup: ".../PARENT/NAME" as cg ends. */
static bool still_in(const char *cg, pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        _cleanup_free_ char *text = NULL;
        if (read_file_capped(path, 65536, &text, NULL) < 0)
                return false;
        const char *name = strrchr(cg, '/');
        if (!name)
                return false;
        const char *parent = name;
        while (parent > cg && parent[-1] != '/')
                parent--;
        size_t want = strlen(parent); /* "PARENT/NAME" */
        for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                char *colon = strchr(line, ':');
                if (!colon || !startswith(colon + 1, "memory:"))
                        continue;
                size_t l = strcspn(line, "\n");
                return l >= want + 1 && line[l - want - 1] == '/' && strncmp(line + l - want, parent, want) == 0;
        }
        return false;
}

/* FS-ONLY has no init to end what the sessions leave: every process in
 * its memory cgroup is, until none is left. Each by a pidfd taken before
 * it is checked to be in the cgroup still, so that a pid reused meanwhile
 * is never another's process. */
static void cgroup_kill_all(const char *cg) {
        _cleanup_free_ char *procs = path_join(cg, "cgroup.procs");
        for (int i = 0; procs && i < 200; i++) {
                _cleanup_free_ char *text = NULL;
                if (read_file_capped(procs, 1 << 20, &text, NULL) < 0 || !*text)
                        return;
                for (char *p = text, *end;; p = end) {
                        long pid = strtol(p, &end, 10);
                        if (end == p)
                                break;
                        if (pid <= 0)
                                continue;
                        int fd = (int) syscall(SYS_pidfd_open, (pid_t) pid, 0);
                        if (fd < 0)
                                continue;
                        if (still_in(cg, (pid_t) pid))
                                (void) syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
                        close(fd);
                }
                usleep(5000);
        }
        log_warning("processes are left in the sandbox's memory cgroup %s after 1 s of killing them", cg);
}

void native_run_stop(NativeRun *n) {
        if (n->fs_only && n->cgroup)
                cgroup_kill_all(n->cgroup);
        for (char **p = n->fs_args; p && *p; p++)
                free(*p);
        n->fs_args = mfree(n->fs_args);
        if (n->pid <= 0) {
                n->relay_pid = 0;
                cgroup_remove(&n->cgroup);
                return;
        }
        (void) kill(n->pid, SIGTERM);
        if (!reap(n->pid, STOP_USEC)) {
                log_warning("the native sandbox's holder (pid %d) did not end within 5 s; killing it", (int) n->pid);
                (void) kill(n->pid, SIGKILL);
                (void) reap(n->pid, UINT64_MAX / 2);
        }
        /* The relay's joiner ends with the sandbox's processes. */
        if (n->relay_pid > 0 && !reap(n->relay_pid, STOP_USEC)) {
                (void) kill(n->relay_pid, SIGKILL);
                (void) reap(n->relay_pid, UINT64_MAX / 2);
        }
        n->relay_pid = 0;
        n->pid = 0;
        n->init_pid = 0;
        cgroup_remove(&n->cgroup);
}

int native_run_probe(const LaunchSpec *s, const NativeRun *n, const char *name, const char *port, uint64_t timeout_usec,
                     char **ret_line) {
        char *const probe[] = { (char *) "/run/lazaret/relay",
                                (char *) "--listening",
                                (char *) "--probe",
                                (char *) name,
                                (char *) port,
                                NULL };
        Argv a = { .v = native_join_argv(s, n, NULL, false, probe) };
        if (!a.v)
                return -ENOMEM;
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture(s->native, (const char *const *) a.v, timeout_usec, &res);
        argv_done(&a);
        if (r < 0)
                return r;
        const char *out = res.out && *res.out ? res.out : res.err ? res.err : "";
        *ret_line = strndup(out, strcspn(out, "\n"));
        return *ret_line ? 0 : -ENOMEM;
}

/* The first "Pss:" of smaps_rollup, or the resident set of statm, in
 * bytes; 0 when neither can be read (the process ended). */
static uint64_t process_memory(int proc_dir) {
        char buf[4096];
        int fd = openat(proc_dir, "smaps_rollup", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t k = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (k > 0) {
                        buf[k] = '\0';
                        const char *p = strstr(buf, "\nPss:");
                        if (p)
                                return strtoull(p + 5, NULL, 10) << 10;
                }
        }
        fd = openat(proc_dir, "statm", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0)
                return 0;
        buf[k] = '\0';
        unsigned long long size = 0, resident = 0;
        if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
                return 0;
        return (uint64_t) resident * (uint64_t) sysconf(_SC_PAGESIZE);
}

/* A "NAME VALUE" line's value in the text of a cgroup file. */
static bool stat_value(const char *text, const char *name, uint64_t *ret) {
        size_t l = strlen(name);
        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, name, l) == 0 && p[l] == ' ') {
                        *ret = strtoull(p + l + 1, NULL, 10);
                        return true;
                }
        return false;
}

static int cgroup_read(const NativeRun *n, const char *file, char **ret) {
        _cleanup_free_ char *p = path_join(n->cgroup, file);
        if (!p)
                return -ENOMEM;
        return read_file_capped(p, 64 * 1024, ret, NULL);
}

int native_memory_killed(const NativeRun *n, uint64_t *ret_kills) {
        if (!n->cgroup)
                return -ENODATA;
        _cleanup_free_ char *t = NULL;
        int r = cgroup_read(n, "memory.oom_control", &t);
        if (r < 0)
                return r;
        return stat_value(t, "oom_kill", ret_kills) ? 0 : -EBADMSG;
}

int native_memory_used(const NativeRun *n, uint64_t *ret_bytes) {
        if (n->init_pid <= 0 && !n->fs_only)
                return -ESRCH;
        if (n->cgroup) {
                /* What it is charged, but for file contents cached from disk
                 * (the kernel drops those before it refuses memory); tmpfs
                 * and shared memory are "shmem" in the cache. */
                _cleanup_free_ char *u = NULL, *st = NULL;
                int r = cgroup_read(n, "memory.usage_in_bytes", &u);
                if (r >= 0)
                        r = cgroup_read(n, "memory.stat", &st);
                if (r < 0)
                        return r;
                uint64_t used = strtoull(u, NULL, 10), cache = 0, shmem = 0;
                if (!stat_value(st, "total_cache", &cache) || !stat_value(st, "total_shmem", &shmem))
                        return -EBADMSG;
                uint64_t files = cache > shmem ? cache - shmem : 0;
                *ret_bytes = used > files ? used - files : 0;
                return 0;
        }
        DIR *d = opendir("/proc");
        if (!d)
                return negative_errno();
        uint64_t total = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                int pd = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (pd < 0)
                        continue;
                struct stat st;
                if (fstatat(pd, "ns/pid", &st, 0) == 0 && st.st_dev == n->pidns_dev && st.st_ino == n->pidns_ino)
                        total += process_memory(pd);
                close(pd);
        }
        closedir(d);
        /* Files in its tmpfs mounts are memory no process maps. */
        static const char *const tmpfs[] = { "tmp", "home/sandbox", "dev/shm" };
        for (size_t i = 0; i < ELEMENTSOF(tmpfs); i++) {
                char p[96];
                struct statfs sf;
                snprintf(p, sizeof(p), "/proc/%d/root/%s", (int) n->init_pid, tmpfs[i]);
                if (statfs(p, &sf) == 0)
                        total += (uint64_t) (sf.f_blocks - sf.f_bfree) * (uint64_t) sf.f_bsize;
        }
        *ret_bytes = total;
        return 0;
}

void native_run_remove_leftover_cgroup(const char *cgroup) {
        cgroup_kill_all(cgroup);
        char *p = strdup(cgroup);
        cgroup_remove(&p);
}

void native_run_kill_leftover(const ProcessIdentity *holder) {
        /* Its init and every process of the sandbox die with it (each
         * level has PR_SET_PDEATHSIG). */
        if (holder->pid > 0 && process_identity_alive(holder))
                (void) kill(holder->pid, SIGKILL);
}

/* The holder's stdout and stderr until its "ready PID" line, its exit, or
 * the time limit. */
static int wait_ready(NativeRun *n, int out, int err, uint64_t timeout_usec, char **ret_error) {
        char obuf[128] = "", ebuf[1024] = "";
        size_t on = 0, en = 0;
        bool out_open = true, err_open = true;
        uint64_t deadline = now_usec() + timeout_usec;
        for (;;) {
                char *nl = memchr(obuf, '\n', on);
                if (nl) {
                        *nl = '\0';
                        char *end = NULL;
                        long pid = startswith(obuf, "ready ") ? strtol(obuf + 6, &end, 10) : 0;
                        if (pid <= 0 || !end || *end) {
                                *ret_error = strdup("lazaret-native --hold said something else than \"ready PID\"");
                                return -EBADMSG;
                        }
                        n->init_pid = (pid_t) pid;
                        return 0;
                }
                if (!out_open) {
                        /* Its stderr has the cause: read it to its end. */
                        while (err_open && en < sizeof(ebuf) - 1) {
                                struct pollfd p = { .fd = err, .events = POLLIN };
                                uint64_t now = now_usec();
                                if (now >= deadline || poll(&p, 1, (int) ((deadline - now) / 1000) + 1) <= 0)
                                        break;
                                ssize_t k = read(err, ebuf + en, sizeof(ebuf) - 1 - en);
                                if (k <= 0)
                                        break;
                                en += (size_t) k;
                        }
                        ebuf[en] = '\0';
                        const char *why = ebuf;
                        if (startswith(why, "lazaret-native: "))
                                why += strlen("lazaret-native: ");
                        size_t l = strcspn(why, "\n");
                        if (asprintf(ret_error, "%.*s",
                                     (int) (l ? l : strlen("lazaret-native ended without saying why")),
                                     l ? why : "lazaret-native ended without saying why") < 0)
                                *ret_error = NULL;
                        return -EIO;
                }
                uint64_t now = now_usec();
                if (now >= deadline) {
                        *ret_error = strdup("the native sandbox was not ready within 10 s");
                        return -ETIMEDOUT;
                }
                struct pollfd p[2] = { { .fd = out, .events = POLLIN },
                                       { .fd = err_open ? err : -1, .events = POLLIN } };
                int k = poll(p, 2, (int) ((deadline - now) / 1000) + 1);
                if (k < 0 && errno != EINTR)
                        return negative_errno();
                if (p[0].revents) {
                        ssize_t r = read(out, obuf + on, sizeof(obuf) - 1 - on);
                        if (r <= 0)
                                out_open = false;
                        else
                                on += (size_t) r;
                        if (on == sizeof(obuf) - 1 && !memchr(obuf, '\n', on)) {
                                *ret_error = strdup("lazaret-native --hold said something else than \"ready PID\"");
                                return -EBADMSG;
                        }
                }
                if (p[1].revents) {
                        ssize_t r = en < sizeof(ebuf) - 1 ? read(err, ebuf + en, sizeof(ebuf) - 1 - en) : 0;
                        if (r <= 0)
                                err_open = false;
                        else
                                en += (size_t) r;
                }
        }
}

/* Editor settings, as under gVisor: hidden where they exist. */
static void add_editor_masks(Argv *a, const char *workspace) {
        for (const char *const *m = (const char *const[]){ ".vscode", ".idea", NULL }; *m; m++) {
                _cleanup_free_ char *hp = path_join(workspace, *m);
                struct stat st;
                if (hp && lstat(hp, &st) == 0 && S_ISDIR(st.st_mode)) {
                        argv_add(a, "--mask");
                        argv_add(a, hp);
                }
        }
}

/* ---- the network sidecar's namespace ---------------------------------------
 * Address rules: the sandbox runs in the network sidecar's namespace, where
 * lazaret-netd keeps the policy's routes and DNS filter (as for gVisor with
 * runsc_network = "host"). lazaret-native starts in the user namespace that
 * owns it (Podman's: only there may a process enter it) and makes its own
 * below it (--share-net), which holds no capability over those routes. */

/* The sandbox's /etc/resolv.conf (<domain>/resolv.conf): the mount plan's,
 * the resolvers of the policy in force; written (and synced) only when it
 * is not that already. */
static int write_resolv_conf(const LaunchSpec *s, const char *text, char **ret_path) {
        _cleanup_free_ char *path = path_join(s->domain_dir, "resolv.conf");
        if (!path)
                return -ENOMEM;
        size_t len = strlen(text);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        struct stat st;
        _cleanup_free_ char *old = NULL;
        size_t old_len = 0;
        if (!(fd >= 0 && fstat(fd, &st) >= 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0644 &&
              read_fd_capped(fd, len + 1, &old, &old_len) >= 0 && old_len == len && memcmp(old, text, len) == 0)) {
                int r = write_file_atomic(path, text, len, 0644, 0);
                if (r < 0)
                        return r;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* .git read-only (branch mode with no git router): the one the leader
 * checked (--ro-pinned), not what a link put in its place leads to. */
static void add_git_read_only(Argv *a, const LaunchSpec *s) {
        if (s->git_dir_id) {
                argv_add(a, "--ro-pinned");
                argv_addf(a, "%s:%s", s->git_dir_id, s->git_dir);
        } else {
                argv_add(a, "--ro");
                argv_add(a, s->git_dir);
        }
}

/* FS-ONLY: nothing to hold. Each session runs lazaret-native --mode
 * fs-only at the host's paths in the sandbox's memory cgroup: the
 * workspace (the router's mount in direct mode, the worktree in branch
 * mode, its repository's .git read-only), the terminfo read-only. */
static int fs_only_start(const LaunchSpec *s, const MountPlan *plan, NativeRun *ret, char **ret_error) {
        const char *workspace = plan->workspace;
        NativeRun n = { .fs_only = true };
        if (!s->memory_cgroup) {
                *ret_error = strdup("FS-ONLY needs runtime.memory_cgroup");
                return -EINVAL;
        }
        Argv a = {};
        argv_add(&a, "lazaret-native");
        argv_add(&a, "--mode");
        argv_add(&a, "fs-only");
        argv_add(&a, "--workspace");
        argv_add(&a, workspace);
        if (plan->git_read_only)
                add_git_read_only(&a, s);
        argv_add(&a, "--ro");
        argv_add(&a, plan->terminfo_dir);
        if (plan->ca_bundle) {
                argv_add(&a, "--ro");
                argv_add(&a, plan->ca_bundle);
        }
        add_editor_masks(&a, workspace);
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        int r = cgroup_add(s, &a, &n, ret_error);
        if (r < 0)
                return r;
        if (a.oom) {
                argv_done(&a);
                cgroup_remove(&n.cgroup);
                return -ENOMEM;
        }
        n.fs_args = a.v;
        log_info("native sandbox in FS-ONLY mode: sessions run lazaret-native --mode fs-only in %s", n.cgroup);
        *ret = n;
        return 0;
}

int native_run_start(const LaunchSpec *s, const MountPlan *plan, NativeRun *ret, char **ret_error) {
        if (s->native_fs_only)
                return fs_only_start(s, plan, ret, ret_error);
        const char *workspace = plan->workspace, *certs_dir = plan->certs_dir, *socket_dir = plan->socket_dir,
                   *broker_dir = plan->broker_dir;
        Argv a = {};
        argv_add(&a, "lazaret-native");
        argv_add(&a, "--mode");
        argv_add(&a, "full");
        argv_add(&a, "--die-with-parent");
        argv_add(&a, "--workspace");
        argv_add(&a, workspace);
        /* Branch mode: the repository's .git where the worktree's
         * "gitdir:" line points, through the git router when it runs. */
        if (plan->git_source) {
                argv_add(&a, "--bind");
                argv_addf(&a, "%s:%s", plan->git_source, s->git_dir);
        } else if (plan->git_read_only)
                add_git_read_only(&a, s);
        argv_add(&a, "--ro-bind");
        argv_addf(&a, "%s:/run/lazaret/terminfo", plan->terminfo_dir);
        if (plan->ca_bundle) {
                argv_add(&a, "--ro-bind");
                argv_addf(&a, "%s:" CA_BUNDLE_PATH, plan->ca_bundle);
        }
        /* Volumes where they say: read-only, or read-write (each join gets
         * --rw for those). */
        for (size_t i = 0; i < s->n_volumes; i++) {
                /* What launch resolved and checked (no link the sandbox
                 * could have made), bound only if it is still that. */
                const LaunchVolume *v = &s->volumes[i];
                if (v->id) {
                        argv_add(&a, v->read_only ? "--ro-bind-pinned" : "--bind-pinned");
                        argv_addf(&a, "%s:%s:%s", v->id, v->host, v->container);
                        continue;
                }
                argv_add(&a, s->volumes[i].read_only ? "--ro-bind" : "--bind");
                argv_addf(&a, "%s:%s", s->volumes[i].host, s->volumes[i].container);
        }
        /* Host escalation: the client, the sandbox's certificates and the
         * socket's directory where gVisor's sandbox has them, read-only (a
         * socket in it can still be connected to). */
        if (certs_dir && socket_dir && s->escalate) {
                argv_add(&a, "--ro-bind");
                argv_addf(&a, "%s:/run/lazaret/escalate", s->escalate);
                argv_add(&a, "--ro-bind");
                argv_addf(&a, "%s:/run/lazaret/certs", certs_dir);
                argv_add(&a, "--ro-bind");
                argv_addf(&a, "%s:/run/lazaret/sock", socket_dir);
        }
        /* Egress by name: the relay listens on the sandbox's own loopback
         * and hands each request to the broker's socket; lazaret-init
         * keeps it running, as in gVisor's sandbox. */
        bool names = broker_dir && s->relay;
        if (names) {
                argv_add(&a, "--loopback");
                argv_add(&a, "--ro-bind");
                argv_addf(&a, "%s:%s", broker_dir, BROKER_SOCKET_DIR);
                argv_add(&a, "--ro-bind");
                argv_addf(&a, "%s:/run/lazaret/relay", s->relay);
                argv_add(&a, "--ro-bind");
                argv_addf(&a, "%s:/run/lazaret/init", s->init);
        }
        /* pids_limit: RLIMIT_NPROC, counted in the sandbox's own user
         * namespace (each join sets it too). */
        argv_add(&a, "--nproc");
        argv_addf(&a, "%" PRIu64, s->nproc);
        /* /tmp and the home are memory: memory_limit caps each (0: the
         * kernel's default, half the host's memory). */
        if (s->memory_limit_mib > 0) {
                argv_add(&a, "--tmp-size");
                argv_addf(&a, "%" PRIu64, s->memory_limit_mib << 20);
        }
        /* Address rules: the sidecar's namespace, its resolvers. */
        _cleanup_close_ int netns = -EBADF, userns = -EBADF;
        bool net = plan->network_pid > 0;
        if (net) {
                _cleanup_free_ char *resolv = NULL;
                int r = spawn_netns_of(plan->network_pid, &netns, &userns);
                if (r < 0) {
                        argv_done(&a);
                        if (asprintf(ret_error, "cannot open the network sidecar's namespace: %s", strerror(-r)) < 0)
                                *ret_error = NULL;
                        return r;
                }
                r = plan->resolv_conf ? write_resolv_conf(s, plan->resolv_conf, &resolv) : -EINVAL;
                if (r < 0) {
                        argv_done(&a);
                        if (asprintf(ret_error, "cannot write the sandbox's resolv.conf: %s", strerror(-r)) < 0)
                                *ret_error = NULL;
                        return r;
                }
                argv_add(&a, "--share-net");
                argv_add(&a, "--ro-bind");
                argv_addf(&a, "%s:/etc/resolv.conf", resolv);
        }
        add_editor_masks(&a, workspace);
        /* persistent_dirs: each kept in its layer under the Domain Root
         * (native-layers.h), mounted in the sandbox's namespace. */
        int pr = native_layers_args(s, &a, ret_error);
        if (pr < 0) {
                argv_done(&a);
                return pr;
        }
        NativeRun n = { .loopback = names, .share_net = net };
        if (s->memory_cgroup) {
                int r = cgroup_add(s, &a, &n, ret_error);
                if (r < 0)
                        return r;
        }
        argv_add(&a, "--hold");
        if (a.oom) {
                argv_done(&a);
                cgroup_remove(&n.cgroup);
                return -ENOMEM;
        }
        int out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF };
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
                int r = negative_errno();
                safe_close(out[0]);
                safe_close(out[1]);
                argv_done(&a);
                cgroup_remove(&n.cgroup);
                return r;
        }
        SpawnFd fds[] = { { out[1], 1 }, { err[1], 2 } };
        SpawnSpec sp = SPAWN_SPEC_INIT(s->native, a.v);
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.cwd = "/";
        /* Its own process group: a signal for the coordinator's group is
         * not the sandbox's. */
        sp.new_pgroup = true;
        sp.userns_fd = userns;
        sp.netns_fd = netns;
        n.git_routed = plan->git_source != NULL;
        int r = spawn(&sp, &n.pid);
        argv_done(&a);
        safe_close(out[1]);
        safe_close(err[1]);
        if (r < 0) {
                safe_close(out[0]);
                safe_close(err[0]);
                if (asprintf(ret_error, "cannot start %s: %s", s->native, strerror(-r)) < 0)
                        *ret_error = NULL;
                cgroup_remove(&n.cgroup);
                return r;
        }
        (void) process_identity_of(n.pid, &n.ident);
        r = wait_ready(&n, out[0], err[0], native_layers_new(s) ? READY_NEW_LAYERS_USEC : READY_USEC, ret_error);
        safe_close(out[0]);
        safe_close(err[0]);
        if (r < 0) {
                native_run_stop(&n);
                return r;
        }
        log_info("native sandbox held by %d, its init is %d", (int) n.pid, (int) n.init_pid);
        /* Its PID namespace, by which its processes are found (memory). */
        char nsp[64];
        struct stat nst;
        snprintf(nsp, sizeof(nsp), "/proc/%d/ns/pid", (int) n.init_pid);
        if (stat(nsp, &nst) < 0) {
                r = negative_errno();
                if (asprintf(ret_error, "cannot examine the native sandbox's PID namespace: %s", strerror(-r)) < 0)
                        *ret_error = NULL;
                native_run_stop(&n);
                return r;
        }
        n.pidns_dev = nst.st_dev;
        n.pidns_ino = nst.st_ino;
        if (names) {
                char *const relay[] = { (char *) "/run/lazaret/init", (char *) "--relay", (char *) "/run/lazaret/relay",
                                        NULL };
                Argv argv = { .v = native_join_argv(s, &n, NULL, false, relay) };
                if (!argv.v) {
                        native_run_stop(&n);
                        return -ENOMEM;
                }
                /* Its output goes to our log (stderr); nothing of ours
                 * else. */
                SpawnSpec rp = SPAWN_SPEC_INIT(s->native, argv.v);
                rp.cwd = "/";
                rp.new_pgroup = true;
                r = spawn(&rp, &n.relay_pid);
                argv_done(&argv);
                if (r < 0) {
                        if (asprintf(ret_error, "cannot start the relay of egress by name: %s", strerror(-r)) < 0)
                                *ret_error = NULL;
                        native_run_stop(&n);
                        return r;
                }
                log_info("relay of egress by name: lazaret-init --relay joined by %d", (int) n.relay_pid);
        }
        *ret = n;
        return 0;
}

char **native_join_argv(const LaunchSpec *s, const NativeRun *n, const char *cwd, bool env_fd, char *const *argv) {
        Argv a = {};
        const char *sub = cwd ? path_under(cwd, "/workspace") : NULL;
        /* FS-ONLY: the sandbox's own run, at the host's paths; FULL: a
         * join of the held one. */
        if (n->fs_only)
                for (char **p = n->fs_args; p && *p; p++)
                        argv_add(&a, *p);
        else {
                argv_add(&a, "lazaret-native");
                argv_add(&a, "--join");
                argv_addf(&a, "%d", (int) n->init_pid);
        }
        if (sub && *sub) {
                argv_add(&a, "--cwd");
                argv_add(&a, sub);
        }
        if (env_fd) {
                argv_add(&a, "--env-fd");
                argv_add(&a, "3");
        }
        if (!n->fs_only) {
                if (n->git_routed) {
                        argv_add(&a, "--rw");
                        argv_add(&a, s->git_dir);
                }
                if (n->loopback)
                        argv_add(&a, "--loopback");
                if (n->share_net)
                        argv_add(&a, "--share-net");
                if (n->cgroup) {
                        argv_add(&a, "--cgroup");
                        argv_add(&a, n->cgroup);
                }
                argv_add(&a, "--nproc");
                argv_addf(&a, "%" PRIu64, s->nproc);
                for (size_t i = 0; i < s->n_volumes; i++)
                        if (!s->volumes[i].read_only) {
                                argv_add(&a, "--rw");
                                argv_add(&a, s->volumes[i].container);
                        }
                for (char **d = s->persistent_dirs; d && *d; d++) {
                        argv_add(&a, "--rw");
                        argv_add(&a, *d);
                }
        }
        argv_add(&a, "--");
        for (char *const *p = argv; p && *p; p++)
                argv_add(&a, *p);
        if (a.oom) {
                argv_done(&a);
                return NULL;
        }
        return a.v;
}
