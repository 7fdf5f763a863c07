/* SPDX-License-Identifier: MIT */
/* lazaret doctor's checks of the host (doctor-internal.h): /dev/fuse and
 * /dev/net/tun, subordinate ids and newuidmap, ulimits, cgroups, the
 * resource limits, and what the native backend finds. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "config.h"
#include "doctor-internal.h"
#include "native-probe.h"
#include "fd-util.h"
#include "fileio.h"
#include "strbuf.h"
#include "string-util.h"

static void format_owner(uid_t uid, gid_t gid, char *buf, size_t size) {
        struct passwd *pw = getpwuid(uid);
        struct group *gr = getgrgid(gid);
        char u[32], g[32];
        if (!pw)
                snprintf(u, sizeof u, "%u", (unsigned) uid);
        if (!gr)
                snprintf(g, sizeof g, "%u", (unsigned) gid);
        snprintf(buf, size, "%s:%s", pw ? pw->pw_name : u, gr ? gr->gr_name : g);
}

static int check_device(DoctorContext *c, DoctorResult *r, const char *path, const char *module, unsigned minor,
                        const char *udev_name, const char *static_node) {
        char owner[160];
        struct stat st;

        _cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0) {
                if (fstat(fd, &st) < 0)
                        return negative_errno();
                if (!S_ISCHR(st.st_mode))
                        return result_fail(
                                r, strdup_printf("sudo rm -f %s && sudo mknod -m 0666 %s c 10 %u", path, path, minor),
                                "%s is not a character device", path);
                format_owner(st.st_uid, st.st_gid, owner, sizeof owner);
                return result_ok(r, "%s (mode %04o %s) opens read-write for %s%s", path,
                                 (unsigned) (st.st_mode & 07777), owner, c->who, c->rootless ? "" : " (rootful)");
        }
        int e = errno;
        if (e == ENOENT || e == ENODEV || e == ENXIO)
                return result_fail(r, strdup_printf("sudo modprobe %s", module),
                                   "%s: %s (kernel module %s not loaded?)", path, strerror(e), module);

        char *fix = strdup_printf("sudo chmod 0666 %s\n"
                                  "# keep it across reboots with a udev rule:\n"
                                  "echo 'KERNEL==\"%s\", MODE=\"0666\", OPTIONS+=\"static_node=%s\"' | sudo tee "
                                  "/etc/udev/rules.d/70-lazaret-%s.rules",
                                  path, udev_name, static_node, udev_name);
        if (stat(path, &st) < 0)
                return result_fail(r, fix, "%s cannot be opened read-write by %s: %s", path, c->who, strerror(e));
        format_owner(st.st_uid, st.st_gid, owner, sizeof owner);
        return result_fail(r, fix, "%s is mode %04o %s; %s cannot open it read-write (%s)", path,
                           (unsigned) (st.st_mode & 07777), owner, c->who, strerror(e));
}

/* Both are misc devices (major 10) with fixed minors; the udev rules are
 * Debian's own defaults, which hosts without udev never apply. */
int check_dev_fuse(DoctorContext *c, DoctorResult *r) {
        return check_device(c, r, "/dev/fuse", "fuse", 229, "fuse", "fuse");
}

int check_dev_net_tun(DoctorContext *c, DoctorResult *r) {
        return check_device(c, r, "/dev/net/tun", "tun", 200, "tun", "net/tun");
}

static int read_optional(const char *path, char **ret) {
        int k = read_file_capped(path, SUBID_FILE_MAX, ret, NULL);
        if (k == -ENOENT) {
                *ret = NULL;
                return 0;
        }
        return k;
}

static int check_subid(DoctorContext *c, DoctorResult *r, const char *file, const char *kind, const char *flag) {
        _cleanup_free_ char *subuid = NULL, *subgid = NULL;
        uint64_t count, start;
        unsigned entries;
        int k;

        if (!c->rootless)
                return result_ok(r, "rootful: not needed");

        /* Both files: the other one only helps to pick a range free in both. */
        bool is_uid = streq(file, "/etc/subuid");
        k = read_optional(file, is_uid ? &subuid : &subgid);
        if (k == -ENOMEM)
                return k;
        if (k < 0)
                return result_fail(r, strdup_printf("sudo chmod 0644 %s", file), "cannot read %s: %s", file,
                                   strerror(-k));
        k = read_optional(is_uid ? "/etc/subgid" : "/etc/subuid", is_uid ? &subgid : &subuid);
        if (k == -ENOMEM)
                return k;

        k = doctor_subid_count(is_uid ? subuid : subgid, c->user, c->uid, &count, &entries);
        if (k < 0)
                return k;
        if (count >= SUBID_NEEDED)
                return result_ok(r, "%s has %" PRIu64 " subordinate %s in %s (%u %s)", c->who, count, kind, file,
                                 entries, entries == 1 ? "entry" : "entries");

        const char *const texts[] = { subuid, subgid };
        k = doctor_subid_free_range(texts, ELEMENTSOF(texts), SUBID_NEEDED, &start);
        if (k == -ENOMEM)
                return k;
        char *fix;
        if (k < 0)
                fix = strdup_printf("# no free range of 65536 ids found in /etc/subuid and /etc/subgid; pick one:\n"
                                    "sudo usermod %s FIRST-LAST %s\npodman system migrate",
                                    flag, c->user_word);
        else
                fix = strdup_printf("sudo usermod %s %" PRIu64 "-%" PRIu64 " %s\npodman system migrate", flag, start,
                                    start + SUBID_NEEDED - 1, c->user_word);
        if (count == 0)
                return result_fail(r, fix,
                                   "%s has no entry for %s (uid %u); rootless Podman needs 65536 subordinate %s", file,
                                   c->who, (unsigned) c->uid, kind);
        return result_fail(r, fix, "%s has only %" PRIu64 " subordinate %s in %s; rootless Podman needs 65536", c->who,
                           count, kind, file);
}

int check_subuid(DoctorContext *c, DoctorResult *r) {
        return check_subid(c, r, "/etc/subuid", "uids", "--add-subuids");
}

int check_subgid(DoctorContext *c, DoctorResult *r) {
        return check_subid(c, r, "/etc/subgid", "gids", "--add-subgids");
}

/* newuidmap must be setuid root or carry the capability in its permitted set. */
static int idmap_tool_state(const char *search, const char *name, unsigned cap, char **ret_path, const char **ret_how) {
        _cleanup_free_ char *path = NULL;
        struct stat st;
        uint8_t xattr[64];

        int k = exec_find_program(search, name, &path);
        if (k < 0)
                return k;
        if (stat(path, &st) < 0)
                return negative_errno();
        if (st.st_uid == 0 && (st.st_mode & S_ISUID))
                *ret_how = "setuid root";
        else {
                ssize_t n = getxattr(path, "security.capability", xattr, sizeof xattr);
                *ret_how = n > 0 && doctor_file_caps_have(xattr, (size_t) n, cap) ? "file capabilities" : NULL;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

int check_newuidmap(DoctorContext *c, DoctorResult *r) {
        static const struct {
                const char *name;
                unsigned cap;
        } tools[] = {
                { "newuidmap", CAP_SETUID },
                { "newgidmap", CAP_SETGID },
        };
        _cleanup_free_ char *p0 = NULL, *p1 = NULL;
        char **paths[] = { &p0, &p1 };
        const char *how[2] = {};

        if (!c->rootless)
                return result_ok(r, "rootful: not needed");

        for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
                int k = idmap_tool_state(c->search_path, tools[i].name, tools[i].cap, paths[i], &how[i]);
                if (k == -ENOENT)
                        return result_fail(r, strdup("sudo apt-get install uidmap"),
                                           "%s is not installed (not found in PATH)", tools[i].name);
                if (k == -ENOMEM)
                        return k;
                if (k < 0)
                        return result_fail(r, strdup("sudo apt-get install --reinstall uidmap"),
                                           "cannot inspect %s: %s", tools[i].name, strerror(-k));
        }
        for (size_t i = 0; i < ELEMENTSOF(tools); i++)
                if (!how[i]) {
                        _cleanup_free_ char *w = shell_word(*paths[i]);
                        if (!w)
                                return -ENOMEM;
                        return result_fail(
                                r, strdup_printf("sudo chmod u+s %s", w),
                                "%s is neither setuid root nor has file capabilities; rootless Podman cannot map ids",
                                *paths[i]);
                }
        return result_ok(r, "%s (%s), %s (%s)", p0, how[0], p1, how[1]);
}

static void format_rlim(rlim_t v, char buf[static 32]) {
        if (v == RLIM_INFINITY)
                snprintf(buf, 32, "unlimited");
        else
                snprintf(buf, 32, "%llu", (unsigned long long) v);
}

int check_ulimits(DoctorContext *c, DoctorResult *r) {
        struct rlimit nofile, nproc;
        char f[32], p[32];

        if (getrlimit(RLIMIT_NOFILE, &nofile) < 0 || getrlimit(RLIMIT_NPROC, &nproc) < 0)
                return negative_errno();
        format_rlim(nofile.rlim_max, f);
        format_rlim(nproc.rlim_max, p);
        if (nofile.rlim_max < 1024)
                return result_fail(
                        r,
                        strdup_printf("echo '%s hard nofile 65536' | sudo tee /etc/security/limits.d/70-lazaret.conf\n"
                                      "# then log in again",
                                      c->user_word),
                        "hard limit nofile %s is below 1024 (nproc %s)", f, p);
        return result_ok(r, "hard limits nofile %s, nproc %s: lazaret run passes these to Podman as --ulimit", f, p);
}

static int statfs_magic(const char *path, int64_t *ret) {
        struct statfs s;
        if (statfs(path, &s) < 0)
                return negative_errno();
        *ret = (int64_t) s.f_type;
        return 0;
}

int check_cgroup(DoctorContext *c, DoctorResult *r) {
        int64_t root = 0, unified = 0;
        int k;

        k = statfs_magic("/sys/fs/cgroup", &root);
        if (k < 0)
                return result_fail(r, strdup("sudo mount -t cgroup2 none /sys/fs/cgroup"),
                                   "cannot statfs /sys/fs/cgroup: %s", strerror(-k));
        (void) statfs_magic("/sys/fs/cgroup/unified", &unified);

        const char *podman = c->podman_info_ok && c->podman_info.cgroup_version ? c->podman_info.cgroup_version : NULL;
        DoctorCgroupMode m = doctor_cgroup_mode_from_magic(root, unified);
        switch (m) {
        case DOCTOR_CGROUP_UNIFIED:
                return result_ok(r, "unified (cgroup v2 only)");
        case DOCTOR_CGROUP_HYBRID:
                return result_ok(r,
                                 "hybrid: v1 controllers with a v2 hierarchy at /sys/fs/cgroup/unified%s%s%s; runc and "
                                 "runsc work, crun refuses",
                                 podman ? " (Podman uses " : "", podman ?: "", podman ? ")" : "");
        case DOCTOR_CGROUP_LEGACY:
                return result_fail(r,
                                   strdup("# boot with the unified hierarchy: add systemd.unified_cgroup_hierarchy=1 "
                                          "to GRUB_CMDLINE_LINUX\n"
                                          "sudoedit /etc/default/grub && sudo update-grub && sudo reboot"),
                                   "legacy (cgroup v1 only): runc and runsc work, crun refuses, rootless Podman cannot "
                                   "limit resources");
        case _DOCTOR_CGROUP_MODE_MAX:
        case _DOCTOR_CGROUP_MODE_INVALID:
                break;
        }
        return result_fail(r, strdup("# mount the cgroup2 file system at /sys/fs/cgroup (systemd does this at boot)"),
                           "/sys/fs/cgroup is neither cgroup2 nor a tmpfs of v1 hierarchies (f_type 0x%" PRIx64 ")",
                           (uint64_t) root);
}

/* How each of a profile's ceilings is enforced here (issue 16); never one
 * that nothing enforces. */
int check_limits(DoctorContext *c, DoctorResult *r) {
        if (!c->rootless)
                return result_ok(r, "pids_limit: gVisor's RLIMIT_NPROC for every task, and a pids cgroup; "
                                    "memory_limit: the coordinator stops the sandbox at it (gVisor's memory file), "
                                    "and a memory cgroup above it; cpu_limit: the CPU affinity of the sandbox's "
                                    "host threads, which run at nice 10; disk_limit: gVisor's overlay of the root "
                                    "file system; the persistent directories' changes and the work files by the "
                                    "coordinator, which stops the sandbox past it");
        return result_ok(r, "pids_limit: gVisor's RLIMIT_NPROC for every task (it bounds runsc's host threads too); "
                            "memory_limit: the coordinator stops the sandbox at it (gVisor's memory file); "
                            "cpu_limit: the CPU affinity of the sandbox's host threads, which run at nice 10. "
                            "disk_limit: gVisor's overlay of the root file system; the persistent directories' changes "
                            "and the work files by the coordinator, which stops the sandbox past it. Rootless runsc "
                            "runs without cgroups here, so no cgroup stands "
                            "behind them");
}

/* A sysctl's value as an integer, or -1 when it is not there. */
static long sysctl_long(const char *path) {
        _cleanup_free_ char *t = NULL;
        if (read_file_capped(path, 64, &t, NULL) < 0)
                return -1;
        char *end;
        long v = strtol(t, &end, 10);
        return end == t ? -1 : v;
}

/* The native backend (issue 42, 45): Landlock's ABI and whether
 * unprivileged user namespaces work (FULL), else why not (FS-ONLY) and the
 * fix, Ubuntu's AppArmor restriction of them among the reasons; and what
 * holds memory_limit there. */
int check_native(DoctorContext *c, DoctorResult *r) {
        char why[1024] = "";
        NativeMode mode = _NATIVE_MODE_INVALID;
        int abi = 0;
        if (native_probe(NATIVE_MODE_AUTO, &mode, &abi, why, sizeof why) < 0)
                return result_fail(r,
                                   strdup("# Landlock is off in this kernel: add landlock to the lsm= list on the "
                                          "kernel command line\nsudoedit /etc/default/grub && sudo update-grub && sudo "
                                          "reboot"),
                                   "backend = \"native\" cannot run here: %s", why);
        /* What holds memory_limit: the configured cgroup, setup's for the
         * user (found as a run finds it), or nothing, and why. */
        _cleanup_free_ char *cg = NULL, *cg_why = NULL, *memory = NULL;
        if (c->memory_cgroup_configured)
                memory = strdup_printf("memory_limit: the kernel's, in a memory cgroup in %s (runtime.memory_cgroup)",
                                       c->memory_cgroup_configured);
        else {
                int k = config_memory_cgroup_find(c->uid, c->user, &cg, &cg_why);
                if (k < 0)
                        return k;
                memory = k > 0 ? strdup_printf("memory_limit: the kernel's, in a memory cgroup in %s (setup's, "
                                               "found; runtime.memory_cgroup is not set)",
                                               cg)
                               : strdup_printf("memory_limit needs a memory cgroup, and runtime.memory_cgroup is not "
                                               "set and %s; or memory_limit = 0 (no limit)",
                                               cg_why);
        }
        if (!memory)
                return -ENOMEM;
        if (mode == NATIVE_MODE_FULL)
                return result_ok(r,
                                 "FULL: Landlock ABI %d, unprivileged user namespaces; %s; address rules: in a "
                                 "network namespace of lazaret-netd's own (slirp4netns: its own check)",
                                 abi, memory);
        /* FS-ONLY: say which switch keeps user namespaces from us. */
        StrBuf fix = STRBUF_INIT;
        if (sysctl_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
                strbuf_puts(&fix, "# AppArmor restricts unprivileged user namespaces (Ubuntu 24.04 and later): lift "
                                  "it for lazaret-native alone with a profile of its own, or for every program:\n"
                                  "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0\n");
        if (sysctl_long("/proc/sys/kernel/unprivileged_userns_clone") == 0)
                strbuf_puts(&fix, "sudo sysctl -w kernel.unprivileged_userns_clone=1\n");
        if (sysctl_long("/proc/sys/user/max_user_namespaces") == 0)
                strbuf_puts(&fix, "sudo sysctl -w user.max_user_namespaces=15000\n");
        if (fix.len == 0)
                strbuf_puts(&fix, "# allow unprivileged user namespaces on this host (see the detail)\n");
        strbuf_puts(&fix, "# or stay with FS-ONLY: Landlock and seccomp alone, which refuses address rules, names, "
                          "escalation and volumes, and needs runtime.memory_cgroup");
        char *f = strbuf_steal(&fix);
        return result_fail(r, f, "FS-ONLY (Landlock ABI %d): %s", abi, why);
}

/* The persistent directories are the kernel's overlayfs mounted in
 * Podman's user namespace (issue 44): try one in a user and mount
 * namespace of our own, on a tmpfs there (Linux 5.11 or later; tmpfs
 * keeps user extended attributes from 6.6, and before that the kernel
 * mounts without them). The child's status: 0, or the errno of the step
 * that failed (+100 for the overlay mount itself). */
static int write_proc(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t k = write(fd, text, strlen(text));
        int e = errno;
        (void) close(fd);
        errno = e;
        return k == (ssize_t) strlen(text) ? 0 : -1;
}

static int overlay_probe_child(const char *dir, uid_t uid, gid_t gid) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                return errno;
        char map[64];
        snprintf(map, sizeof(map), "0 %u 1", (unsigned) uid);
        if (write_proc("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
                return errno;
        if (write_proc("/proc/self/uid_map", map) < 0)
                return errno;
        snprintf(map, sizeof(map), "0 %u 1", (unsigned) gid);
        if (write_proc("/proc/self/gid_map", map) < 0)
                return errno;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("lazaret-doctor", dir, "tmpfs", 0, "size=1m,mode=0700") < 0)
                return errno;
        char l[PATH_MAX], u[PATH_MAX], w[PATH_MAX], m[PATH_MAX], opts[4 * PATH_MAX];
        snprintf(l, sizeof(l), "%s/l", dir);
        snprintf(u, sizeof(u), "%s/u", dir);
        snprintf(w, sizeof(w), "%s/w", dir);
        snprintf(m, sizeof(m), "%s/m", dir);
        if (mkdir(l, 0755) < 0 || mkdir(u, 0755) < 0 || mkdir(w, 0755) < 0 || mkdir(m, 0755) < 0)
                return errno;
        snprintf(opts, sizeof(opts), "userxattr,lowerdir=%s,upperdir=%s,workdir=%s", l, u, w);
        if (mount("overlay", m, "overlay", 0, opts) < 0)
                return 100 + errno;
        return 0;
}

int check_overlay_userns(DoctorContext *c, DoctorResult *r) {
        (void) c;
        char dir[] = "/tmp/lazaret-doctor-XXXXXX";
        if (!mkdtemp(dir))
                return result_fail(r, strdup("# make /tmp writable"), "cannot make a directory in /tmp: %m");
        uid_t uid = getuid();
        gid_t gid = getgid();
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                (void) rmdir(dir);
                return -e;
        }
        if (pid == 0)
                _exit(overlay_probe_child(dir, uid, gid));
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        (void) rmdir(dir);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (code == 0)
                return result_ok(r, "the kernel mounts overlayfs in a user namespace (userxattr): persistent_dirs "
                                    "can be kept");
        if (code >= 100)
                return result_fail(r,
                                   strdup("# persistent_dirs need Linux 5.11 or later with overlayfs mounts in user "
                                          "namespaces; profiles without persistent_dirs work without"),
                                   "the kernel refuses an overlayfs mount in a user namespace (%s): persistent_dirs "
                                   "cannot be kept",
                                   strerror(code - 100));
        return result_fail(r,
                           strdup("# Podman rootless needs user namespaces too: see the subuid and newuidmap checks"),
                           "cannot make a user and mount namespace to try an overlayfs mount (%s)",
                           code > 0 ? strerror(code) : "the probe was killed");
}
