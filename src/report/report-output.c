/* SPDX-License-Identifier: MIT */
/* Where a report is written (report.h): the one writer of every file the
 * CLI writes into a directory the person names (lazaret report --output,
 * lazaret up --report). The directory may lie in the workspace, which the
 * agent writes. It is walked with directory
 * descriptors, never through a symbolic link, and a report is only ever
 * a new file: O_EXCL refuses whatever is planted under its name (a link,
 * a FIFO, a file), so nothing is written through it or over it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "report.h"
#include "string-util.h"

static const char *kind_of(mode_t m) {
        return S_ISLNK(m)    ? "a symbolic link"
               : S_ISFIFO(m) ? "a FIFO"
               : S_ISSOCK(m) ? "a socket"
               : S_ISCHR(m)  ? "a character device"
               : S_ISBLK(m)  ? "a block device"
               : S_ISDIR(m)  ? "a directory"
               : S_ISREG(m)  ? "a file"
                             : "something other than a file";
}

static int why(char **ret, int r, const char *fmt, ...) _printf_(3, 4);
static int why(char **ret, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(ret, fmt, ap) < 0)
                *ret = NULL;
        va_end(ap);
        return r;
}

int report_output_dir(const char *path, ReportDir *ret, char **ret_why) {
        *ret = (ReportDir){ .fd = -EBADF, .parent_fd = -EBADF };
        if (!path || !*path)
                return why(ret_why, -EINVAL, "a directory is needed");
        _cleanup_free_ char *copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        _cleanup_close_ int fd = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return why(ret_why, -errno, "cannot open %s: %s", path[0] == '/' ? "/" : "the current directory",
                           strerror(errno));
        /* The components; the walk so far, for messages. */
        char *save = NULL;
        size_t n = 0;
        char *parts[256];
        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (n == ELEMENTSOF(parts))
                        return why(ret_why, -ENAMETOOLONG, "%s: too many components", path);
                parts[n++] = c;
        }
        for (size_t i = 0; i < n; i++) {
                const char *c = parts[i];
                if (streq(c, "."))
                        continue;
                int sub = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                bool made = false;
                if (sub < 0 && errno == ENOENT && i == n - 1) {
                        int mk = mkdirat(fd, c, 0700);
                        if (mk < 0 && errno != EEXIST)
                                return why(ret_why, -errno, "cannot make %s: %s", path, strerror(errno));
                        made = mk >= 0;
                        sub = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (sub >= 0 && made) {
                        /* Kept to take it away again if no report lands in it. */
                        ret->made = strdup(c);
                        ret->parent_fd = TAKE_FD(fd);
                        fd = sub;
                        continue;
                }
                if (sub < 0) {
                        int e = errno;
                        struct stat st;
                        if ((e == ELOOP || e == ENOTDIR) && fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                                return why(ret_why, -e,
                                           "%s: %s is %s; reports are never written through one: give a "
                                           "directory's own path",
                                           path, c, kind_of(st.st_mode));
                        return why(ret_why, -e, "%s: cannot open %s: %s", path, c, strerror(e));
                }
                close(fd);
                fd = sub;
        }
        ret->fd = TAKE_FD(fd);
        return 0;
}

void report_output_done(ReportDir *d, bool written) {
        if (!written && d->made && d->parent_fd >= 0)
                (void) unlinkat(d->parent_fd, d->made, AT_REMOVEDIR); /* only ever an empty directory */
        d->fd = safe_close(d->fd);
        d->parent_fd = safe_close(d->parent_fd);
        d->made = mfree(d->made);
}

int report_output_write(int dir_fd, const char *name, const char *data, size_t len, char **ret_why) {
        _cleanup_close_ int fd =
                openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0) {
                int e = errno;
                struct stat st;
                if (e == EEXIST && fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                        return why(ret_why, -e,
                                   "%s is already there (%s): a report is only ever written as a new file; "
                                   "remove it or name another directory",
                                   name, kind_of(st.st_mode));
                return why(ret_why, -e, "cannot create %s: %s", name, strerror(e));
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
                (void) unlinkat(dir_fd, name, 0);
                return why(ret_why, -EBADF, "%s is not a new file of ours after creating it; nothing written", name);
        }
        int r = loop_write(fd, data, len);
        if (r < 0) {
                (void) unlinkat(dir_fd, name, 0);
                return why(ret_why, r, "cannot write %s: %s (removed)", name, strerror(-r));
        }
        if (close(TAKE_FD(fd)) < 0) {
                int e = errno;
                (void) unlinkat(dir_fd, name, 0);
                return why(ret_why, -e, "cannot write %s: %s (removed)", name, strerror(e));
        }
        return 0;
}

int report_output_write_all(int dir_fd, const char *const *names, const char *const *data, const size_t *lens, size_t n,
                            bool replace, char **ret_why) {
        /* Each to a new file of its own first (report_output_write's
         * checks), then renamed into place: RENAME_NOREPLACE unless the
         * person asked to replace, and then only a file of theirs. */
        _cleanup_free_ char **tmp = calloc(n ?: 1, sizeof(char *));
        if (!tmp)
                return -ENOMEM;
        int r = 0;
        size_t made = 0, placed = 0;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                struct stat st;
                if (fstatat(dir_fd, names[i], &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
                    (!replace || !S_ISREG(st.st_mode) || st.st_uid != geteuid()))
                        r = why(ret_why, -EEXIST,
                                replace ? "%s is already there (%s, not a file of yours): only such a file is replaced"
                                        : "%s is already there (%s): a file is only ever written as a new file "
                                          "here; remove it or name another directory",
                                names[i], kind_of(st.st_mode));
                else if (asprintf(&tmp[i], ".%s.lazaret-%d-%zu", names[i], (int) getpid(), i) < 0) {
                        tmp[i] = NULL;
                        r = -ENOMEM;
                } else if ((r = report_output_write(dir_fd, tmp[i], data[i], lens[i], ret_why)) >= 0)
                        made++;
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                if (renameat2(dir_fd, tmp[i], dir_fd, names[i], replace ? 0 : RENAME_NOREPLACE) < 0) {
                        int e = errno;
                        r = why(ret_why, -e, "cannot put %s in place: %s", names[i], strerror(e));
                        break;
                }
                placed++;
        }
        /* A failure leaves nothing of this call: its temporary files and
         * what it placed (never a file it replaced: that one is gone). */
        for (size_t i = 0; i < n; i++) {
                if (r < 0 && i < placed && !replace)
                        (void) unlinkat(dir_fd, names[i], 0);
                if (tmp[i] && (r < 0 || i >= placed) && i < made)
                        (void) unlinkat(dir_fd, tmp[i], 0);
                free(tmp[i]);
        }
        return r < 0 ? r : 0;
}
