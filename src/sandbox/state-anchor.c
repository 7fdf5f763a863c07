/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "path-util.h"
#include "persist.h"
#include "fuse-mount.h"
#include "layer-mount.h"
#include "podman.h"
#include "spawn-util.h"
#include "state-anchor.h"
#include "strbuf.h"
#include "string-util.h"

#define PODMAN_USEC (UINT64_C(120) * 1000000)
#define READY_USEC  (UINT64_C(5) * 1000000)
#define STOP_USEC   (UINT64_C(5) * 1000000)
#define TOOL_USEC   (UINT64_C(600) * 1000000)

static void layer_done(AnchorLayer *l) {
        free(l->dir);
        free(l->name);
        free(l->image);
        free(l->fs_mnt);
        free(l->changes);
        free(l->work);
        free(l->merged);
        free(l->legacy_changes);
        free(l->legacy_work);
        free(l->lower);
        *l = (AnchorLayer){};
}

void anchor_done(StateAnchor *a) {
        for (size_t i = 0; i < a->n_layers; i++)
                layer_done(&a->layers[i]);
        free(a->layers);
        free(a->image_id);
        free(a->image_mount);
        *a = (StateAnchor){};
}

static char *layer_path(const LaunchSpec *s, const char *name, const char *suffix) {
        char *leaf = NULL;
        if (asprintf(&leaf, "%s_%s", name, suffix) < 0)
                return NULL;
        char *p = path_join(s->domain_dir, leaf);
        free(leaf);
        return p;
}

int anchor_init(const LaunchSpec *s, StateAnchor *ret) {
        StateAnchor a = {};
        size_t n = 0;
        while (s->persistent_dirs && s->persistent_dirs[n])
                n++;
        a.layers = calloc(n + 1, sizeof(AnchorLayer));
        if (!a.layers)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                AnchorLayer *l = &a.layers[i];
                a.n_layers = i + 1;
                l->dir = strdup(s->persistent_dirs[i]);
                l->name = persist_dir_name(s->persistent_dirs[i]);
                if (!l->dir || !l->name)
                        goto oom;
                l->image = layer_path(s, l->name, "layer.img");
                l->fs_mnt = layer_path(s, l->name, "layer");
                l->merged = layer_path(s, l->name, "merged");
                l->legacy_changes = layer_path(s, l->name, "changes");
                l->legacy_work = layer_path(s, l->name, "work");
                if (!l->image || !l->fs_mnt || !l->merged || !l->legacy_changes || !l->legacy_work)
                        goto oom;
                l->changes = path_join(l->fs_mnt, "upper");
                l->work = path_join(l->fs_mnt, "work");
                if (!l->changes || !l->work)
                        goto oom;
        }
        *ret = a;
        return 0;
oom:
        anchor_done(&a);
        return -ENOMEM;
}

/* podman ARGS..., through `podman unshare` when rootless (image mounts
 * exist only in Podman's mount namespace). Output trimmed into *ret_out. */
static int podman_do(const LaunchSpec *s, bool in_ns, const char *const *args, char **ret_out, char **ret_error) {
        const char *argv[16];
        size_t k = 0;
        argv[k++] = "podman";
        if (in_ns && s->rootless) {
                argv[k++] = "unshare";
                argv[k++] = s->podman;
        }
        for (; *args && k < 15; args++)
                argv[k++] = *args;
        argv[k] = NULL;
        _cleanup_(exec_result_done) ExecResult r = {};
        int q = exec_capture(s->podman, argv, PODMAN_USEC, &r);
        if (q < 0)
                return q;
        if (exec_result_failed(&r)) {
                if (ret_error)
                        *ret_error = podman_error(&r); /* its last line says what went wrong */
                return -EIO;
        }
        if (ret_out) {
                char *o = r.out ? r.out : (char *) "";
                size_t len = strlen(o);
                while (len > 0 && (o[len - 1] == '\n' || o[len - 1] == ' '))
                        len--;
                *ret_out = strndup(o, len);
                if (!*ret_out)
                        return -ENOMEM;
        }
        return 0;
}

int anchor_resolve_image(const LaunchSpec *s, StateAnchor *a, char **ret_error) {
        _cleanup_free_ char *id = NULL, *err = NULL;
        int r = podman_do(s, false, (const char *const[]){ "image", "inspect", "--format", "{{.Id}}", s->image, NULL },
                          &id, &err);
        if (r < 0) {
                if (asprintf(ret_error, "cannot find the image %s for persistent_dirs: %s", s->image,
                             err ? err : strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (strlen(id) != 64 || id[strspn(id, "0123456789abcdef")] != '\0') {
                if (asprintf(ret_error, "podman gave no image id for %s", s->image) < 0)
                        *ret_error = NULL;
                return -EIO;
        }
        free(a->image_id);
        a->image_id = TAKE_PTR(id);
        return 0;
}

/* The Storage Catalog's mounter: Podman's image mounts, made in its
 * namespace. */
static int image_mount(void *userdata, const char *image_id, char **ret_path, char **ret_error) {
        const LaunchSpec *s = userdata;
        _cleanup_free_ char *path = NULL, *err = NULL;
        int r = podman_do(s, true, (const char *const[]){ "image", "mount", image_id, NULL }, &path, &err);
        if (r < 0) {
                if (asprintf(ret_error, "cannot mount the image %s (podman image mount): %s", s->image,
                             err ? err : strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (!path_is_absolute(path) || strchr(path, '\n')) {
                /* Mounted, but we cannot tell where: give it back. */
                (void) podman_do(s, true, (const char *const[]){ "image", "unmount", image_id, NULL }, NULL, NULL);
                *ret_error = strdup("podman image mount gave no path");
                return -EIO;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

static int image_unmount(void *userdata, const char *image_id) {
        const LaunchSpec *s = userdata;
        _cleanup_free_ char *err = NULL;
        int r = podman_do(s, true, (const char *const[]){ "image", "unmount", image_id, NULL }, NULL, &err);
        if (r < 0)
                log_warning("cannot unmount the image %s: %s", image_id, err ? err : "?");
        return r;
}

/* Where a mount vanished (a new Podman namespace) an empty directory is
 * left, or nothing. */
static bool nonempty_dir_in_podman_ns(const LaunchSpec *s, const char *path);

static bool image_valid(void *userdata, const char *path) {
        return nonempty_dir_in_podman_ns(userdata, path);
}

int anchor_lease_image(const LaunchSpec *s, StateAnchor *a, uint64_t generation, char **ret_error) {
        CatalogMounter m = { image_mount, image_unmount, image_valid, (void *) s };
        CatalogLease l = { a->image_id, s->image, s->domain_hash, generation };
        _cleanup_free_ char *path = NULL;
        int r = catalog_lease(s->catalog_dir, &l, &m, &path, ret_error);
        if (r < 0)
                return r;
        free(a->image_mount);
        a->image_mount = TAKE_PTR(path);
        return 0;
}

int anchor_release_image(const LaunchSpec *s, const char *image_id, uint64_t generation) {
        if (!s->catalog_dir)
                return -EINVAL;
        CatalogMounter m = { image_mount, image_unmount, image_valid, (void *) s };
        return catalog_release(s->catalog_dir, image_id, s->domain_hash, generation, &m);
}

static int make_dir(const char *p) {
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        struct stat st;
        if (lstat(p, &st) < 0)
                return negative_errno();
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* path as Podman's namespace sees it, through its pause process's root. */
static int podman_ns_path(const LaunchSpec *s, const char *path, char *buf, size_t size) {
        if (s->rootless) {
                pid_t pp;
                int r = podman_pause_pid(s, &pp);
                if (r < 0)
                        return r;
                snprintf(buf, size, "/proc/%d/root%s", (int) pp, path);
        } else
                snprintf(buf, size, "%s", path);
        return 0;
}

/* Whether path (as Podman's namespace sees it) is a directory. */
static bool dir_in_podman_ns(const LaunchSpec *s, const char *path) {
        char where[PATH_MAX + 64];
        struct stat st;
        return podman_ns_path(s, path, where, sizeof(where)) == 0 && stat(where, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool nonempty_dir_in_podman_ns(const LaunchSpec *s, const char *path) {
        char where[PATH_MAX + 64];
        if (podman_ns_path(s, path, where, sizeof(where)) < 0)
                return false;
        DIR *d = opendir(where);
        if (!d)
                return false;
        bool any = false;
        for (struct dirent *e; !any && (e = readdir(d));)
                any = !streq(e->d_name, ".") && !streq(e->d_name, "..");
        closedir(d);
        return any;
}

/* Podman's runtime copies of /etc/resolv.conf, hosts and hostname win
 * (spec §4.3.4): the overlay never keeps its own, nor the empty mount
 * points Podman makes for them. */
static void scrub_runtime_files(const LaunchSpec *s, const AnchorLayer *l) {
        if (!streq(l->dir, "/etc"))
                return;
        for (const char *const *f = (const char *const[]){ "resolv.conf", "hosts", "hostname", NULL }; *f; f++) {
                _cleanup_free_ char *p = path_join(l->changes, *f);
                char where[PATH_MAX + 64];
                if (p && podman_ns_path(s, p, where, sizeof(where)) == 0 && unlink(where) < 0 && errno == EISDIR)
                        (void) rmdir(where);
        }
}

/* Why a tool of run_tool() failed: its errno, its last line, or dflt. */
static const char *tool_why(int r, const char *out, const char *dflt) {
        return r < 0 ? strerror(-r) : out && *out ? out : dflt;
}

/* Run an e2fsprogs tool on the host (the image is our own file); its exit
 * status, or -errno. Its last line of output into *ret_out. */
static int run_tool(const char *path, const char *const *argv, char **ret_out) {
        _cleanup_(exec_result_done) ExecResult r = {};
        int q = exec_capture(path, argv, TOOL_USEC, &r);
        if (q < 0)
                return q;
        if (r.spawn_error < 0)
                return r.spawn_error;
        if (r.timed_out)
                return -ETIMEDOUT;
        if (ret_out) {
                const char *o = r.err && *r.err ? r.err : r.out ? r.out : "";
                size_t len = strlen(o);
                while (len > 0 && (o[len - 1] == '\n' || o[len - 1] == ' '))
                        len--;
                const char *line = o + len;
                while (line > o && line[-1] != '\n')
                        line--;
                *ret_out = strndup(line, (size_t) (o + len - line));
        }
        return r.status;
}

/* Run argv in Podman's namespace and wait; its exit status, or -errno. */
static int run_in_podman_ns(const LaunchSpec *s, const char *name, char *const argv[]) {
        const char *search = getenv("PATH");
        _cleanup_free_ char *path = NULL;
        int r = exec_find_program(search && *search ? search : "/usr/bin:/bin", name, &path);
        if (r < 0)
                return r;
        pid_t pid;
        r = podman_ns_spawn(s, path, argv, &pid);
        if (r < 0)
                return r;
        return spawn_wait(pid);
}

/* Wait (5 s at most) for the FUSE daemon pid to mount mnt. */
static int wait_mounted(pid_t *pid, const char *what, const char *mnt, int *ret_mount_id, StrBuf *b) {
        uint64_t deadline = now_usec() + READY_USEC;
        for (;;) {
                int st;
                if (waitpid(*pid, &st, WNOHANG) == *pid) {
                        *pid = 0;
                        strbuf_printf(b, "%s exited during start (status %d); see the coordinator log", what,
                                      WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
                        return -EIO;
                }
                if (fuse_mount_id(*pid, mnt, ret_mount_id) == 0)
                        return 0;
                if (now_usec() >= deadline) {
                        strbuf_printf(b, "%s did not mount %s within 5 s", what, mnt);
                        return -ETIMEDOUT;
                }
                usleep(2000);
        }
}

/* rm -rf paths in Podman's namespace (files of the sandbox's other users
 * are owned by subordinate ids there), never into a mount below them. */
static int remove_in_podman_ns(const LaunchSpec *s, const char *a, const char *b) {
        return run_in_podman_ns(s, "rm",
                                (char *const[]){ (char *) "rm", (char *) "-rf", (char *) "--one-file-system",
                                                 (char *) "--", (char *) a, (char *) b, NULL });
}

/* The changes kept in an ext4 image (<name>_layer.img, mounted by fuse2fs
 * under fuse-overlayfs before issue 44) copied out into next: the image
 * checked (e2fsck), mounted read-only, `cp -a` in Podman's namespace
 * (owners, modes, attributes, the 0:0 whiteouts), unmounted. */
static int copy_out_of_image(const LaunchSpec *s, AnchorLayer *l, const char *next, StrBuf *b) {
        if (!s->fuse2fs || !s->e2fsck) {
                strbuf_printf(b,
                              "the changes to %s are in %s, made by an older Lazaret; moving them out needs fuse2fs "
                              "and e2fsck, which are not installed; install them: sudo apt-get install fuse2fs "
                              "e2fsprogs",
                              l->dir, l->image);
                return -ENOENT;
        }
        _cleanup_free_ char *out = NULL, *mnt = layer_path(s, l->name, "migrate"), *from = NULL;
        if (!mnt || !(from = path_join(mnt, "changes")))
                return -ENOMEM;
        /* A coordinator killed hard left it unclean: preen; what preening
         * does not fix, fix. */
        int r = run_tool(s->e2fsck, (const char *const[]){ "e2fsck", "-p", l->image, NULL }, &out);
        if (r >= 4 || r < 0) {
                log_warning("e2fsck -p %s: exit %d (%s); running e2fsck -fy", l->image, r, out ? out : "");
                out = mfree(out);
                r = run_tool(s->e2fsck, (const char *const[]){ "e2fsck", "-f", "-y", l->image, NULL }, &out);
        }
        if (r >= 4 || r < 0) {
                strbuf_printf(b,
                              "the file system of the changes to %s (%s) is damaged and e2fsck cannot repair it (%s); "
                              "discard them with 'lazaret reset --dir %s'",
                              l->dir, l->image, tool_why(r, out, "exit status 4 or more"), l->dir);
                return -EIO;
        }
        if ((r = make_dir(mnt)) < 0) {
                strbuf_printf(b, "cannot make %s: %s", mnt, strerror(-r));
                return r;
        }
        pid_t pid = 0;
        int mount_id = 0;
        char *argv[] = {
                (char *) "fuse2fs", (char *) "-f", (char *) "-o", (char *) "ro,fakeroot", l->image, mnt, NULL
        };
        r = podman_ns_spawn(s, s->fuse2fs, argv, &pid);
        if (r < 0) {
                strbuf_printf(b, "cannot start fuse2fs for %s: %s", l->image, strerror(-r));
                return r;
        }
        r = wait_mounted(&pid, "fuse2fs", mnt, &mount_id, b);
        if (r >= 0) {
                r = run_in_podman_ns(
                        s, "cp",
                        (char *const[]){ (char *) "cp", (char *) "-a", (char *) "--", from, (char *) next, NULL });
                if (r != 0) {
                        strbuf_printf(b, "cannot copy the changes to %s out of %s (cp: %s); see the coordinator log",
                                      l->dir, l->image, r < 0 ? strerror(-r) : "it failed");
                        r = -EIO;
                }
        }
        fuse_daemon_stop(s, &pid, mnt);
        (void) rmdir(mnt);
        return r;
}

/* Changes an older Lazaret kept, moved into <name>_layer/upper once, in
 * the kernel overlay's form: from the ext4 image (before issue 44) or from
 * <name>_changes (before the images). upper.new until it is whole: a move
 * cut short starts over, and the old copy goes only once upper is there. */
static int layer_migrate(const LaunchSpec *s, AnchorLayer *l, StrBuf *b) {
        struct stat st;
        bool have_image = lstat(l->image, &st) == 0 && S_ISREG(st.st_mode);
        bool have_legacy = lstat(l->legacy_changes, &st) == 0 && S_ISDIR(st.st_mode);
        if (lstat(l->changes, &st) == 0) {
                if (have_image && unlink(l->image) == 0)
                        log_info("removed %s: its changes were moved into %s", l->image, l->changes);
                return 0;
        }
        if (!have_image && !have_legacy)
                return 0;
        _cleanup_free_ char *next = path_join(l->fs_mnt, "upper.new");
        if (!next)
                return -ENOMEM;
        int r = make_dir(l->fs_mnt);
        if (r < 0) {
                strbuf_printf(b, "cannot make %s: %s", l->fs_mnt, strerror(-r));
                return r;
        }
        if (lstat(next, &st) == 0 && remove_in_podman_ns(s, next, next) != 0) {
                strbuf_printf(b, "cannot remove %s (a move cut short)", next);
                return -EIO;
        }
        log_info("moving the changes to %s from %s into %s", l->dir, have_image ? l->image : l->legacy_changes,
                 l->changes);
        if (have_image)
                r = copy_out_of_image(s, l, next, b);
        else if (rename(l->legacy_changes, next) < 0) {
                r = negative_errno();
                strbuf_printf(b, "cannot move %s to %s: %s", l->legacy_changes, next, strerror(-r));
        }
        if (r < 0)
                return r;
        _cleanup_free_ char *err = NULL;
        r = layer_helper_run(s, (const char *const[]){ "convert", next, NULL }, &err);
        if (r < 0) {
                strbuf_printf(b, "cannot turn the changes to %s into the kernel overlay's form: %s", l->dir,
                              err ? err : strerror(-r));
                return r;
        }
        if (rename(next, l->changes) < 0) {
                r = negative_errno();
                strbuf_printf(b, "cannot move %s to %s: %s", next, l->changes, strerror(-r));
                return r;
        }
        if (have_image && unlink(l->image) < 0)
                log_warning("cannot remove %s after moving its changes: %m", l->image);
        if (!have_image && remove_in_podman_ns(s, l->legacy_work, l->legacy_work) != 0)
                log_warning("cannot remove %s after moving the changes", l->legacy_work);
        return 0;
}

/* The PID whose /proc/PID/mountinfo is Podman's mount namespace. */
static int podman_ns_pid(const LaunchSpec *s, pid_t *ret) {
        if (s->rootless)
                return podman_pause_pid(s, ret);
        *ret = getpid();
        return 0;
}

int anchor_layer_start(const LaunchSpec *s, const StateAnchor *a, AnchorLayer *l, char **ret_error) {
        StrBuf b = STRBUF_INIT;
        _cleanup_free_ char *err = NULL;
        pid_t ns;
        int r;

        /* An image without the directory: an empty lowerdir. */
        char *image_dir = path_join(a->image_mount, l->dir);
        if (!image_dir)
                return -ENOMEM;
        if (dir_in_podman_ns(s, image_dir))
                l->lower = image_dir;
        else {
                free(image_dir);
                l->lower = path_join(s->domain_dir, "state-empty");
                if (!l->lower)
                        return -ENOMEM;
                if ((r = make_dir(l->lower)) < 0) {
                        strbuf_printf(&b, "cannot make %s: %s", l->lower, strerror(-r));
                        goto fail;
                }
        }
        const char *const paths[] = { l->lower, l->changes, l->work };
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (strpbrk(paths[i], ",:\\")) {
                        strbuf_printf(&b,
                                      "the directory %s contains ',', ':' or '\\', which an overlay mount cannot take",
                                      paths[i]);
                        r = -EINVAL;
                        goto fail;
                }
        const char *const dirs[] = { l->merged, l->fs_mnt };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                if ((r = make_dir(dirs[i])) < 0) {
                        strbuf_printf(&b, "cannot make %s: %s", dirs[i], strerror(-r));
                        goto fail;
                }
        r = layer_migrate(s, l, &b);
        if (r < 0)
                goto fail;
        const char *const mk[] = { l->changes, l->work };
        for (size_t i = 0; i < ELEMENTSOF(mk); i++)
                if ((r = make_dir(mk[i])) < 0) {
                        strbuf_printf(&b, "cannot make %s: %s", mk[i], strerror(-r));
                        goto fail;
                }
        scrub_runtime_files(s, l);
        r = layer_helper_run(s, (const char *const[]){ "mount", l->lower, l->changes, l->work, l->merged, NULL }, &err);
        if (r < 0) {
                strbuf_printf(&b, "cannot mount the overlay of %s: %s", l->dir, err ? err : strerror(-r));
                goto fail;
        }
        if ((r = podman_ns_pid(s, &ns)) < 0 || (r = layer_mount_id(ns, l->merged, &l->mount_id)) < 0) {
                strbuf_printf(&b, "the overlay of %s is not in Podman's mount namespace after its mount: %s", l->dir,
                              strerror(-r));
                (void) layer_helper_run(s, (const char *const[]){ "unmount", l->merged, NULL }, NULL);
                goto fail;
        }
        l->fs_size_mib = s->disk_limit_mib;
        strbuf_done(&b);
        return 0;

fail:
        anchor_layer_stop(s, l);
        *ret_error = strbuf_steal(&b);
        return r < 0 ? r : -EIO;
}

void anchor_layer_stop(const LaunchSpec *s, AnchorLayer *l) {
        if (l->mount_id > 0) {
                _cleanup_free_ char *err = NULL;
                if (layer_helper_run(s, (const char *const[]){ "unmount", l->merged, NULL }, &err) < 0)
                        log_warning("cannot unmount the overlay of %s: %s", l->dir, err ? err : "?");
                l->mount_id = 0;
        }
        scrub_runtime_files(s, l);
}

void anchor_layer_recover(const LaunchSpec *s, const ProcessIdentity *overlay, const char *merged,
                          const ProcessIdentity *fs, const char *fs_mnt) {
        /* Records of an older Lazaret name its FUSE daemons. */
        if (overlay && process_identity_alive(overlay))
                (void) kill(overlay->pid, SIGKILL);
        if (merged)
                (void) layer_helper_run(s, (const char *const[]){ "unmount", merged, NULL }, NULL);
        /* fuse2fs writes back what it holds when asked to stop. */
        if (fs && process_identity_alive(fs)) {
                (void) kill(fs->pid, SIGTERM);
                uint64_t deadline = now_usec() + STOP_USEC;
                while (process_identity_alive(fs) && now_usec() < deadline)
                        usleep(10000);
                if (process_identity_alive(fs))
                        (void) kill(fs->pid, SIGKILL);
        }
        if (fs && fs_mnt)
                fuse_mount_detach(s, fs_mnt);
}

int anchor_record_image(const LaunchSpec *s, const StateAnchor *a, const AnchorLayer *l) {
        _cleanup_free_ char *path = layer_path(s, l->name, "image"), *old = NULL;
        if (!path)
                return -ENOMEM;
        const char *prev = NULL;
        json_t *was = NULL;
        if (read_file_capped(path, 64 * 1024, &old, NULL) == 0) {
                was = json_loads(old, 0, NULL);
                const char *id = json_string_value(json_object_get(was, "image_id"));
                if (id && !streq(id, a->image_id))
                        prev = id;
                else if (id)
                        prev = json_string_value(json_object_get(was, "previous_image_id"));
        }
        bool changed = was && json_string_value(json_object_get(was, "image_id")) &&
                       !streq(json_string_value(json_object_get(was, "image_id")), a->image_id);
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        json_t *j = json_pack("{s:s, s:s, s:s, s:s?, s:s}", "dir", l->dir, "image", s->image, "image_id", a->image_id,
                              "previous_image_id", prev, "updated", when);
        json_decref(was);
        if (!j)
                return -ENOMEM;
        char *text = json_dumps(j, JSON_SORT_KEYS | JSON_INDENT(2));
        json_decref(j);
        if (!text)
                return -ENOMEM;
        int r = write_file_atomic(path, text, strlen(text), 0644, 0);
        free(text);
        return r < 0 ? r : changed;
}
