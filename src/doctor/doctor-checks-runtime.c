/* SPDX-License-Identifier: MIT */
/* lazaret doctor's checks of the container runtime (doctor-internal.h):
 * Podman and its version, runsc, its network and files, runc, the FUSE
 * tools, slirp4netns, and the storage driver. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "doctor-internal.h"
#include "fd-util.h"
#include "path-util.h"
#include "string-util.h"

/* ---- the checks ---- */

int check_podman(DoctorContext *c, DoctorResult *r) {
        static const unsigned min[3] = PODMAN_MIN_VERSION;
        int k = podman_probe(c);
        if (k < 0)
                return k;

        if (!c->podman_path)
                return result_fail(r, strdup("sudo apt-get install podman"),
                                   "podman is not installed (not found in PATH)");
        if (!c->podman_version_ok && !c->podman_error)
                return result_fail(r, strdup("sudo apt-get install podman"),
                                   "%s --version does not report a version lazaret understands", c->podman_path);
        if (c->podman_version_ok && doctor_version_compare(c->podman_version, min) < 0)
                return result_fail(r,
                                   strdup("# install Podman 4.3 or newer (Debian 12: sudo apt-get install "
                                          "podman)\nsudo apt-get install podman"),
                                   "podman %u.%u.%u at %s is too old: lazaret needs 4.3 or newer", c->podman_version[0],
                                   c->podman_version[1], c->podman_version[2], c->podman_path);
        if (c->podman_version_failed)
                return result_fail(r, strdup("sudo apt-get install --reinstall podman"), "%s", c->podman_error);
        if (c->podman_error && c->podman_timed_out)
                return result_fail(r, strdup("# see where podman waits:\npodman --log-level=debug info"), "%s%s%s%s",
                                   c->podman_error, c->rootless ? " (as " : "", c->rootless ? c->who : "",
                                   c->rootless ? ")" : "");
        if (c->podman_error) {
                if (c->rootless)
                        return result_fail(r,
                                           strdup("# fix the subuid, subgid and newuidmap problems first, then restart "
                                                  "Podman's user namespace:\n"
                                                  "podman system migrate"),
                                           "%s (as %s)", c->podman_error, c->who);
                return result_fail(r, strdup("# see what podman reports:\npodman --log-level=debug info"), "%s",
                                   c->podman_error);
        }

        const DoctorPodmanInfo *i = &c->podman_info;
        return result_ok(r, "podman %u.%u.%u at %s (%s, cgroups %s, graph driver %s, OCI runtime %s)",
                         c->podman_version[0], c->podman_version[1], c->podman_version[2], c->podman_path,
                         c->rootless ? "rootless" : "rootful", i->cgroup_version ?: "unknown",
                         i->graph_driver ?: "unknown", i->oci_runtime ?: "unknown");
}

int check_runsc(DoctorContext *c, DoctorResult *r) {
        char date[16];
        int k = runsc_probe(c);
        if (k < 0)
                return k;

        if (!c->runsc_path)
                return result_fail(r, strdup("sudo apt-get install runsc"),
                                   "runsc (gVisor) is not installed (not found in PATH)");
        if (c->runsc_error)
                return result_fail(r, strdup("sudo apt-get install --reinstall runsc"), "%s", c->runsc_error);
        if (c->runsc_release == 0)
                return result_ok(r, "runsc %s at %s (release date unknown)", c->runsc_version ?: "(no version)",
                                 c->runsc_path);
        return result_ok(r, "runsc %s (release %s) at %s", c->runsc_version, format_release(c->runsc_release, date),
                         c->runsc_path);
}

/* Whether net.core.rmem_default is visible in a fresh network namespace,
 * which is what runsc tests to refuse "the root network namespace".
 * Returns 1 or 0, or -errno when no namespace could be made. */
static int rmem_visible_in_new_netns(void) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        int p[2], status, e = 0;

        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        rfd = p[0];
        wfd = p[1];

        pid_t pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                int code = 0;
                if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) {
                        e = errno;
                        /* root may be refused a user namespace, not a network one. */
                        if (geteuid() == 0 && unshare(CLONE_NEWNET) == 0)
                                e = 0;
                }
                if (e == 0) {
                        if (access("/proc/sys/net/core/rmem_default", F_OK) == 0)
                                _exit(0);
                        if (errno == ENOENT)
                                _exit(1);
                        e = errno;
                        code = 3;
                } else
                        code = 2;
                if (write(wfd, &e, sizeof e) < 0) {
                }
                _exit(code);
        }
        wfd = safe_close(wfd);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        if (!WIFEXITED(status))
                return -EIO;
        switch (WEXITSTATUS(status)) {
        case 0:
                return 1;
        case 1:
                return 0;
        default:
                if (read(rfd, &e, sizeof e) != (ssize_t) sizeof e || e <= 0)
                        e = EIO;
                return -e;
        }
}

int check_runsc_network(DoctorContext *c, DoctorResult *r) {
        static const char fix[] =
                "# either let runsc use the kernel network stack of the sidecar's namespace: in the profile\n"
                "# ([profiles.NAME] in ~/.config/lazaret/config.toml or ./lazaret.toml) set\n"
                "#     runsc_network = \"host\"\n"
                "# or put a runsc of release-20240807 or newer first on PATH: 'make deps' in Lazaret's source\n"
                "# (scripts/setup.sh) builds the pinned gVisor and installs /usr/local/bin/runsc";
        _cleanup_free_ char *method = NULL;
        struct utsname u;
        unsigned major = 0, minor = 0;
        char date[16];
        int k, visible;

        k = runsc_probe(c);
        if (k < 0)
                return k;

        if (uname(&u) < 0)
                return negative_errno();
        bool kernel_known = doctor_parse_kernel_release(u.release, &major, &minor) >= 0;

        visible = rmem_visible_in_new_netns();
        if (visible >= 0)
                method = strdup("checked in a new network namespace");
        else if (kernel_known) {
                int e = -visible;
                visible = major > 6 || (major == 6 && minor >= 11);
                method = strdup_printf(
                        "cannot unshare a network namespace (%s); judged by kernel version, 6.11+ shows it",
                        strerror(e));
        } else
                method = strdup_printf("cannot unshare a network namespace (%s) nor parse the kernel release",
                                       strerror(-visible));
        if (!method)
                return -ENOMEM;

        const char *where = visible > 0 ? "visible" : visible == 0 ? "not visible" : "perhaps visible";
        if (!c->runsc_path || c->runsc_error)
                return result_fail(r, strdup(fix),
                                   "runsc is not usable (see the runsc check); net.core.rmem_default is %s in a new "
                                   "network namespace on kernel %s (%s)",
                                   where, u.release, method);

        bool works = doctor_runsc_sandbox_network_works(c->runsc_release, visible);
        if (works && visible == 0)
                return result_ok(r,
                                 "net.core.rmem_default is not visible in a new network namespace on kernel %s (%s): "
                                 "runsc --network=sandbox works",
                                 u.release, method);
        if (works)
                return result_ok(
                        r,
                        "runsc release %s copes with net.core.rmem_default in every network namespace (kernel %s, %s)",
                        format_release(c->runsc_release, date), u.release, method);
        if (c->runsc_release == 0)
                return result_fail(
                        r, strdup(fix),
                        "runsc %s has no release date; runsc before release-20240807 refuses --network=sandbox when "
                        "net.core.rmem_default is %s in a new network namespace (kernel %s, %s)",
                        c->runsc_version ?: "(unknown version)", where, u.release, method);
        return result_fail(r, strdup(fix),
                           "runsc %s (release %s, before release-20240807) refuses --network=sandbox here: "
                           "net.core.rmem_default is %s in a new network namespace on kernel %s (%s)",
                           c->runsc_version, format_release(c->runsc_release, date), where, u.release, method);
}

/* statx and lstat of a symbolic link in the sandbox's own file system, in
 * a throwaway sandbox (runsc do): Debian's runsc 20221219 fails both on
 * recent kernels ("ls -l /" says "Invalid argument"), its 20240729 the
 * second ("Bad file descriptor"). */
int check_runsc_files(DoctorContext *c, DoctorResult *r) {
        static const char fix[] = "put a current runsc first on PATH: 'make deps' in Lazaret's source "
                                  "(scripts/setup.sh) builds the pinned gVisor and installs /usr/local/bin/runsc";
        static const char script[] = "stat / >/dev/null 2>&1 || { echo statx; exit 1; }; "
                                     "ln -s / /tmp/.lazaret-probe && ls -l /tmp/.lazaret-probe >/dev/null 2>&1 || "
                                     "{ echo lstat; exit 1; }; echo ok";
        _cleanup_(exec_result_done) ExecResult v = {};
        int k = runsc_probe(c);
        if (k < 0)
                return k;
        if (!c->runsc_path || c->runsc_error)
                return result_fail(r, strdup(fix), "runsc is not usable (see the runsc check)");
        k = command_run(
                c, c->runsc_path,
                (const char *const[]){ "runsc", "--rootless", "--network=none", "do", "/bin/sh", "-c", script, NULL },
                &v);
        if (k < 0)
                return k;
        const char *out = v.out ?: "";
        if (!exec_result_failed(&v) && strstr(out, "ok"))
                return result_ok(r, "stat and lstat of a symbolic link work in runsc %s's file system",
                                 c->runsc_version ?: "(unknown version)");
        if (startswith(out, "statx"))
                return result_fail(r, strdup(fix),
                                   "runsc %s cannot stat files in its sandbox on this kernel (statx: \"ls -l /\" "
                                   "fails with \"Invalid argument\")",
                                   c->runsc_version ?: "(unknown version)");
        if (startswith(out, "lstat"))
                return result_fail(r, strdup(fix),
                                   "runsc %s cannot lstat symbolic links in its sandbox on this kernel "
                                   "(\"ls -l\" of a symlink fails)",
                                   c->runsc_version ?: "(unknown version)");
        _cleanup_free_ char *what = strdup_printf("%s --rootless --network=none do /bin/sh", c->runsc_path);
        if (!what)
                return -ENOMEM;
        _cleanup_free_ char *why = describe_command_failure(c, what, &v);
        return result_fail(r, strdup(fix), "cannot probe runsc's file system: %s", why ?: "it failed");
}

/* A tool that must be in PATH and answer --version; line_prefix picks the
 * version line out of its output (NULL: the first line). */
static int check_tool(DoctorContext *c, DoctorResult *r, const char *name, const char *package,
                      const char *line_prefix) {
        _cleanup_free_ char *path = NULL, *line = NULL;
        _cleanup_(exec_result_done) ExecResult v = {};

        int k = exec_find_program(c->search_path, name, &path);
        if (k == -ENOENT)
                return result_fail(r, strdup_printf("sudo apt-get install %s", package),
                                   "%s is not installed (not found in PATH)", name);
        if (k < 0)
                return k;

        k = command_run(c, path, (const char *const[]){ name, "--version", NULL }, &v);
        if (k < 0)
                return k;
        if (exec_result_failed(&v)) {
                _cleanup_free_ char *what = strdup_printf("%s --version", path);
                if (!what)
                        return -ENOMEM;
                _cleanup_free_ char *why = describe_command_failure(c, what, &v);
                if (!why)
                        return -ENOMEM;
                return result_fail(r, strdup_printf("sudo apt-get install --reinstall %s", package), "%s", why);
        }

        /* Some tools print their version on stderr. */
        const char *text = *v.out ? v.out : v.err;
        const char *found = line_prefix ? find_line(text, line_prefix) : text;
        if (found && line_prefix)
                found -= strlen(line_prefix);
        if (found)
                line = strndup(found, size_min(strcspn(found, "\r\n"), ERROR_LINE_MAX));
        else
                line = strdup("version unknown");
        if (!line)
                return -ENOMEM;
        return result_ok(r, "%s at %s", line, path);
}

int check_runc(DoctorContext *c, DoctorResult *r) {
        return check_tool(c, r, "runc", "runc", "runc version ");
}

/* Lazaret no longer runs fuse-overlayfs (issue 44: the persistent
 * directories are the kernel's overlayfs); the check keeps its name (the
 * JSON's names are an interface) and says so. */
int check_fuse_overlayfs(DoctorContext *c, DoctorResult *r) {
        _cleanup_free_ char *path = NULL;
        int k = exec_find_program(c->search_path, "fuse-overlayfs", &path);
        if (k == -ENOENT)
                return result_ok(r, "not installed, and not needed: persistent directories are the kernel's "
                                    "overlayfs (see overlay-userns)");
        if (k < 0)
                return k;
        k = check_tool(c, r, "fuse-overlayfs", "fuse-overlayfs", "fuse-overlayfs: version ");
        if (k >= 0 && r->status == DOCTOR_OK) {
                _cleanup_free_ char *was = r->detail;
                r->detail = strdup_printf("%s (not used by Lazaret: persistent directories are the kernel's "
                                          "overlayfs)",
                                          was);
                if (!r->detail)
                        return -ENOMEM;
        }
        return k;
}

/* fuse2fs (and e2fsck) move the changes an older Lazaret kept in an ext4
 * image per persistent directory out of it, once; nothing else needs it. */
int check_fuse2fs(DoctorContext *c, DoctorResult *r) {
        int k = check_tool(c, r, "fuse2fs", "fuse2fs", "fuse2fs ");
        if (k >= 0 && r->status != DOCTOR_OK) {
                _cleanup_free_ char *was = r->detail;
                r->detail = strdup_printf("%s; needed only to move the persistent directories' changes an older "
                                          "Lazaret kept in ext4 images (<name>_layer.img) out of them",
                                          was);
                if (!r->detail)
                        return -ENOMEM;
        }
        return k;
}

int check_slirp4netns(DoctorContext *c, DoctorResult *r) {
        if (!c->rootless)
                return result_ok(r, "rootful: not needed");
        return check_tool(c, r, "slirp4netns", "slirp4netns", "slirp4netns version ");
}

int check_storage_driver(DoctorContext *c, DoctorResult *r) {
        int k = podman_probe(c);
        if (k < 0)
                return k;

        if (!c->podman_info_ok)
                return result_fail(r, strdup("# fix the podman check first"),
                                   "unknown: podman info is not available (see the podman check)");

        const char *driver = c->podman_info.graph_driver;
        if (!driver)
                return result_fail(r, strdup("podman info --format '{{.Store.GraphDriverName}}'"),
                                   "podman info does not name its graph driver");
        if (!streq(driver, "vfs"))
                return result_ok(r, "%s", driver);

        /* Where this user's storage.conf is (podman info says), else the default. */
        _cleanup_free_ char *conf = NULL, *conf_word = NULL, *dir_word = NULL;
        if (c->podman_info.storage_conf)
                conf = strdup(c->podman_info.storage_conf);
        else if (c->rootless) {
                const char *home = getenv("HOME");
                conf = home ? path_join(home, ".config/containers/storage.conf") : NULL;
                if (home && !conf)
                        return -ENOMEM;
        } else
                conf = strdup("/etc/containers/storage.conf");
        bool exists = conf && access(conf, F_OK) == 0;
        char *fix;
        if (!conf)
                fix = strdup("# in the [storage] table of ~/.config/containers/storage.conf set\n"
                             "#     driver = \"overlay\"\n"
                             "# then (this deletes the user's Podman containers and images):\n"
                             "podman system reset");
        else {
                conf_word = shell_word(conf);
                _cleanup_free_ char *dir = strdup(conf);
                if (!conf_word || !dir)
                        return -ENOMEM;
                char *slash = strrchr(dir, '/');
                if (slash && slash != dir)
                        *slash = '\0';
                dir_word = shell_word(dir);
                if (!dir_word)
                        return -ENOMEM;
                if (exists)
                        fix = strdup_printf("# in the [storage] table of %s set\n"
                                            "#     driver = \"overlay\"\n"
                                            "# then (this deletes the user's Podman containers and images):\n"
                                            "podman system reset",
                                            conf);
                else
                        fix = strdup_printf("mkdir -p %s && printf '[storage]\\ndriver = \"overlay\"\\n' > %s\n"
                                            "# this deletes the user's Podman containers and images:\n"
                                            "podman system reset",
                                            dir_word, conf_word);
        }
        return result_fail(r, fix,
                           "vfs: every container gets a full copy of its image (slow starts, large disk use)%s%s%s",
                           !conf    ? ""
                           : exists ? "; set in "
                                    : "; there is no ",
                           conf ?: "", conf && !exists ? " asking for overlay" : "");
}
