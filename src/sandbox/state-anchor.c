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
                l->changes = path_join(l->fs_mnt, "changes");
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

/* mkdir in the layer's file system, which only Podman's namespace sees;
 * through the pause process's root the request reaches fuse2fs as that
 * namespace's root, the owner the overlay expects. */
static int make_dir_in_podman_ns(const LaunchSpec *s, const char *path) {
        char where[PATH_MAX + 64];
        int r = podman_ns_path(s, path, where, sizeof(where));
        return r < 0 ? r : make_dir(where);
}

/* Podman's runtime copies of /etc/resolv.conf, hosts and hostname win
 * (spec §4.3.4): the overlay never keeps its own, nor the empty mount
 * points Podman makes for them. Needs the layer's file system mounted. */
static void scrub_runtime_files(const LaunchSpec *s, const AnchorLayer *l) {
        if (!streq(l->dir, "/etc") || l->fs_mount_id <= 0)
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

/* The layer's image: made on first use (sparse, ext4 without a journal,
 * no reserved blocks, its root owned by the namespace's root), checked
 * (e2fsck -p, -fy when preening is not enough) otherwise, and brought to
 * disk_limit MiB. *ret_made when it is new. */
static int layer_image_prepare(const LaunchSpec *s, AnchorLayer *l, bool *ret_made, StrBuf *b) {
        uint64_t want = s->disk_limit_mib * UINT64_C(1024) * 1024;
        char size[32];
        snprintf(size, sizeof(size), "%" PRIu64 "M", s->disk_limit_mib);
        _cleanup_free_ char *out = NULL;
        struct stat st;
        int r;

        *ret_made = false;
        if (lstat(l->image, &st) < 0) {
                if (errno != ENOENT) {
                        strbuf_printf(b, "cannot read %s: %m", l->image);
                        return negative_errno();
                }
                _cleanup_close_ int fd = open(l->image, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0 || ftruncate(fd, (off_t) want) < 0) {
                        r = negative_errno();
                        strbuf_printf(b, "cannot make %s: %s", l->image, strerror(-r));
                        if (fd >= 0)
                                (void) unlink(l->image);
                        return r;
                }
                r = run_tool(s->mke2fs,
                             (const char *const[]){ "mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-m", "0",
                                                    "-E", "root_owner=0:0", "-L", "lazaret-layer", l->image, NULL },
                             &out);
                if (r != 0) {
                        (void) unlink(l->image);
                        strbuf_printf(b, "mke2fs cannot make %s: %s", l->image, tool_why(r, out, "it failed"));
                        return -EIO;
                }
                *ret_made = true;
                return 0;
        }
        if (!S_ISREG(st.st_mode)) {
                strbuf_printf(b, "%s is not a regular file; remove it (lazaret reset --dir %s discards the changes)",
                              l->image, l->dir);
                return -EINVAL;
        }
        /* A coordinator killed hard leaves it unclean: preen; what
         * preening does not fix, fix. */
        r = run_tool(s->e2fsck, (const char *const[]){ "e2fsck", "-p", l->image, NULL }, &out);
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
        if ((uint64_t) st.st_size == want)
                return 0;

        /* disk_limit changed: resize2fs wants a full check first. */
        log_info("resizing %s from %" PRIu64 " to %" PRIu64 " MiB", l->image, (uint64_t) st.st_size >> 20,
                 s->disk_limit_mib);
        out = mfree(out);
        r = run_tool(s->e2fsck, (const char *const[]){ "e2fsck", "-f", "-p", l->image, NULL }, &out);
        if (r >= 4 || r < 0) {
                strbuf_printf(b, "e2fsck -f %s before resizing it: %s", l->image, tool_why(r, out, "it failed"));
                return -EIO;
        }
        bool grow = want > (uint64_t) st.st_size;
        if (grow && truncate(l->image, (off_t) want) < 0) {
                r = negative_errno();
                strbuf_printf(b, "cannot grow %s: %s", l->image, strerror(-r));
                return r;
        }
        out = mfree(out);
        r = run_tool(s->resize2fs, (const char *const[]){ "resize2fs", l->image, size, NULL }, &out);
        if (r != 0) {
                if (grow) {
                        (void) !truncate(l->image, st.st_size);
                        strbuf_printf(b, "resize2fs cannot grow %s to disk_limit %" PRIu64 " MiB: %s", l->image,
                                      s->disk_limit_mib, tool_why(r, out, "it failed"));
                } else
                        strbuf_printf(b,
                                      "the changes to %s hold more than disk_limit %" PRIu64
                                      " MiB allows (resize2fs: %s); raise disk_limit, or discard them with 'lazaret "
                                      "reset --dir %s'",
                                      l->dir, s->disk_limit_mib, tool_why(r, out, "failed"), l->dir);
                return -EIO;
        }
        if (!grow && truncate(l->image, (off_t) want) < 0)
                log_warning("cannot shrink %s to %" PRIu64 " bytes: %m", l->image, want);
        return 0;
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

static int layer_fs_start(const LaunchSpec *s, AnchorLayer *l, StrBuf *b) {
        bool made;
        int r = layer_image_prepare(s, l, &made, b);
        if (r < 0)
                return r;
        if ((r = make_dir(l->fs_mnt)) < 0) {
                strbuf_printf(b, "cannot make %s: %s", l->fs_mnt, strerror(-r));
                return r;
        }
        char *argv[] = { (char *) "fuse2fs", (char *) "-f", (char *) "-o", (char *) "fakeroot",
                         l->image,           l->fs_mnt,     NULL };
        r = podman_ns_spawn(s, s->fuse2fs, argv, &l->fs_pid);
        if (r < 0) {
                strbuf_printf(b, "cannot start fuse2fs for %s: %s", l->dir, strerror(-r));
                return r;
        }
        (void) process_identity_of(l->fs_pid, &l->fs_ident);
        _cleanup_free_ char *what = NULL;
        if (asprintf(&what, "fuse2fs for %s", l->dir) < 0)
                return -ENOMEM;
        r = wait_mounted(&l->fs_pid, what, l->fs_mnt, &l->fs_mount_id, b);
        if (r < 0)
                return r;
        char where[PATH_MAX + 64];
        struct statfs sf;
        if (podman_ns_path(s, l->fs_mnt, where, sizeof(where)) == 0 && statfs(where, &sf) == 0)
                l->fs_size_mib = (uint64_t) sf.f_blocks * (uint64_t) sf.f_bsize >> 20;
        const char *mk[] = { l->changes, l->work };
        for (size_t i = 0; i < 2; i++)
                if ((r = make_dir_in_podman_ns(s, mk[i])) < 0) {
                        strbuf_printf(b, "cannot make %s in the layer's file system: %s", mk[i], strerror(-r));
                        return r;
                }

        /* Changes kept before the images: moved in once (ownership, modes,
         * extended attributes and the overlay's whiteouts kept). */
        struct stat st;
        if (!made || lstat(l->legacy_changes, &st) < 0 || !S_ISDIR(st.st_mode))
                return 0;
        _cleanup_free_ char *from = path_join(l->legacy_changes, ".");
        if (!from)
                return -ENOMEM;
        log_info("moving the changes to %s from %s into %s", l->dir, l->legacy_changes, l->image);
        r = run_in_podman_ns(s, "cp",
                             (char *const[]){ (char *) "cp", (char *) "-a", (char *) "--", from, l->changes, NULL });
        if (r != 0) {
                strbuf_printf(b,
                              "cannot move the changes to %s from %s into their image of disk_limit %" PRIu64
                              " MiB (cp: %s); raise disk_limit if they are larger, or discard them with 'lazaret "
                              "reset --dir %s'",
                              l->dir, l->legacy_changes, s->disk_limit_mib,
                              r < 0 ? strerror(-r) : "see the coordinator log", l->dir);
                l->discard_image = true;
                return -EIO;
        }
        r = run_in_podman_ns(s, "rm",
                             (char *const[]){ (char *) "rm", (char *) "-rf", (char *) "--", l->legacy_changes,
                                              l->legacy_work, NULL });
        if (r != 0)
                log_warning("cannot remove %s and %s after moving them (rm: %d)", l->legacy_changes, l->legacy_work, r);
        return 0;
}

int anchor_layer_start(const LaunchSpec *s, const StateAnchor *a, AnchorLayer *l, char **ret_error) {
        StrBuf b = STRBUF_INIT;
        _cleanup_free_ char *opts = NULL, *what = NULL;
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
        if ((r = make_dir(l->merged)) < 0) {
                strbuf_printf(&b, "cannot make %s: %s", l->merged, strerror(-r));
                goto fail;
        }
        if (strpbrk(l->lower, ",:")) {
                strbuf_printf(&b, "the image's directory %s contains ',' or ':', which fuse-overlayfs cannot take",
                              l->lower);
                r = -EINVAL;
                goto fail;
        }
        r = layer_fs_start(s, l, &b);
        if (r < 0)
                goto fail;
        scrub_runtime_files(s, l);
        /* writeback=0: the kernel's write-back cache would take writes a
         * full layer cannot hold and report ENOSPC only at close(), which
         * gVisor does not pass on; without it write() fails, inside.
         * noacl: with POSIX ACLs on, the kernel asks for a file's ACL
         * whenever someone other than its owner checks it, fuse2fs answers
         * EOPNOTSUPP, and the check fails with it: a directory another
         * user owns could not even be listed, and apt (which fetches as
         * _apt) could not create its files. The mode bits still hold. */
        if (asprintf(&opts, "noacl,writeback=0,lowerdir=%s,upperdir=%s,workdir=%s", l->lower, l->changes, l->work) <
            0) {
                opts = NULL;
                r = -ENOMEM;
                goto fail;
        }
        char *argv[] = { (char *) "fuse-overlayfs", (char *) "-f", (char *) "-o", opts, l->merged, NULL };
        r = podman_ns_spawn(s, s->fuse_overlayfs, argv, &l->pid);
        if (r < 0) {
                strbuf_printf(&b, "cannot start fuse-overlayfs for %s: %s", l->dir, strerror(-r));
                goto fail;
        }
        (void) process_identity_of(l->pid, &l->ident);
        if (asprintf(&what, "fuse-overlayfs for %s", l->dir) < 0) {
                what = NULL;
                r = -ENOMEM;
                goto fail;
        }
        r = wait_mounted(&l->pid, what, l->merged, &l->mount_id, &b);
        if (r < 0)
                goto fail;
        strbuf_done(&b);
        return 0;

fail:
        anchor_layer_stop(s, l);
        if (l->discard_image)
                (void) unlink(l->image);
        *ret_error = strbuf_steal(&b);
        return r < 0 ? r : -EIO;
}

void anchor_layer_stop(const LaunchSpec *s, AnchorLayer *l) {
        bool was = l->pid > 0 || l->mount_id > 0;
        fuse_daemon_stop(s, &l->pid, was ? l->merged : NULL);
        l->mount_id = 0;
        if (was)
                scrub_runtime_files(s, l);
        bool fs = l->fs_pid > 0 || l->fs_mount_id > 0;
        fuse_daemon_stop(s, &l->fs_pid, fs ? l->fs_mnt : NULL);
        l->fs_mount_id = 0;
}

void anchor_layer_recover(const LaunchSpec *s, const ProcessIdentity *overlay, const char *merged,
                          const ProcessIdentity *fs, const char *fs_mnt) {
        if (overlay && process_identity_alive(overlay))
                (void) kill(overlay->pid, SIGKILL);
        if (merged)
                fuse_mount_detach(s, merged);
        /* fuse2fs writes back what it holds when asked to stop. */
        if (fs && process_identity_alive(fs)) {
                (void) kill(fs->pid, SIGTERM);
                uint64_t deadline = now_usec() + STOP_USEC;
                while (process_identity_alive(fs) && now_usec() < deadline)
                        usleep(10000);
                if (process_identity_alive(fs))
                        (void) kill(fs->pid, SIGKILL);
        }
        if (fs_mnt)
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
