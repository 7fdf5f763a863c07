/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "fsmonitor.h"
#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "strbuf.h"
#include "string-util.h"
#include "thread-util.h"

/* What the journal keeps before it starts again (older tokens then get a
 * trivial answer), and the most paths one answer names (more: "/"). */
#define JOURNAL_MAX  200000u
#define ANSWER_PATHS 20000u
/* A client has this long to send its request and take its answer. */
#define CLIENT_TIMEOUT_MS 2000
#define TOKEN_MAX         64
/* The most directories it watches: each watch holds kernel memory and
 * counts against the user's inotify limit, which the person's own editors
 * share. A larger tree is not watched (git inside looks at every file). */
#define DIRS_MAX 65536u
/* Answers a second that read the journal; past them "/" (git then looks at
 * every file itself, in the sandbox, on its own CPU time). */
#define ANSWERS_PER_SECOND 50u

/* Deeper than this, the tree is not watched: one descriptor is held per
 * level while it is walked. */
#define DEPTH_MAX 256u
/* The least time between two walks of the whole tree after an overflow. */
#define REWALK_MIN_S 10u

/* No IN_DONT_FOLLOW: watches are added through /proc/self/fd's links to
 * directories opened with O_NOFOLLOW (watch_fd). */
#define WATCH_MASK                                                                                                     \
        (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO |                \
         IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

typedef struct Change {
        uint64_t seq;
        char *path; /* relative to the top; a directory ends with '/' */
} Change;

struct FsMonitor {
        char *root, *socket_path;
        int inotify_fd, listen_fd, stop_fd;
        pthread_t thread;
        bool started;

        /* The thread's own. */
        char **wd_path; /* by watch descriptor: the directory, relative ("" is the top) */
        size_t n_wd;
        Change *journal;
        size_t n_journal;
        uint64_t seq, base; /* tokens older than base get "/" */
        char instance[17];
        bool whole; /* every directory is watched */
        size_t n_dirs, dirs_max;
        uint64_t second; /* CLOCK_MONOTONIC second of the answers counted */
        uint64_t rewalked; /* CLOCK_MONOTONIC second of the last rewalk, or 0 */
        unsigned answers;

        /* Read by fsmonitor_stats() from the coordinator's thread. */
        pthread_mutex_t lock;
        FsMonitorStats stats;
};

static void set_why(FsMonitor *m, const char *why) {
        pthread_mutex_lock(&m->lock);
        snprintf(m->stats.why, sizeof(m->stats.why), "%s", why);
        pthread_mutex_unlock(&m->lock);
}

static void journal_reset(FsMonitor *m) {
        for (size_t i = 0; i < m->n_journal; i++)
                free(m->journal[i].path);
        m->n_journal = 0;
        m->base = ++m->seq;
}

static void journal_add(FsMonitor *m, const char *dir, const char *name, bool is_dir) {
        if (m->n_journal > 0 && m->n_journal >= JOURNAL_MAX)
                journal_reset(m);
        Change *last = m->n_journal > 0 ? &m->journal[m->n_journal - 1] : NULL;
        char *p = NULL;
        if (asprintf(&p, "%s%s%s%s", dir, *dir && name ? "/" : "", name ?: "", is_dir ? "/" : "") < 0)
                return;
        if (last && streq(last->path, p)) {
                last->seq = ++m->seq;
                free(p);
                return;
        }
        if (m->n_journal % 1024 == 0) {
                Change *j = reallocarray(m->journal, m->n_journal + 1024, sizeof(Change));
                if (!j) {
                        free(p);
                        journal_reset(m);
                        return;
                }
                m->journal = j;
        }
        m->journal[m->n_journal++] = (Change){ ++m->seq, p };
}

/* ---- watches --------------------------------------------------------------- */

static int wd_set(FsMonitor *m, int wd, const char *rel) {
        if ((size_t) wd >= m->n_wd) {
                size_t n = MAX((size_t) wd + 1, m->n_wd * 2);
                char **v = reallocarray(m->wd_path, n, sizeof(char *));
                if (!v)
                        return -ENOMEM;
                memset(v + m->n_wd, 0, (n - m->n_wd) * sizeof(char *));
                m->wd_path = v;
                m->n_wd = n;
        }
        char *c = strdup(rel);
        if (!c)
                return -ENOMEM;
        free(m->wd_path[wd]);
        m->wd_path[wd] = c;
        return 0;
}

static const char *wd_get(const FsMonitor *m, int wd) {
        return wd >= 0 && (size_t) wd < m->n_wd ? m->wd_path[wd] : NULL;
}

static void wd_forget(FsMonitor *m, int wd) {
        if (wd >= 0 && (size_t) wd < m->n_wd)
                m->wd_path[wd] = mfree(m->wd_path[wd]);
}

/* Watch rel (relative to the top) and every directory under it, never
 * following a symbolic link, and not the top's .git. A directory that
 * cannot be watched makes the tree not whole. */
static void give_up(FsMonitor *m, const char *why) {
        if (m->whole)
                log_warning("fsmonitor: %s; git inside looks at every file", why);
        set_why(m, why);
        m->whole = false;
        /* Every watch goes with the descriptor. */
        int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (fd >= 0) {
                safe_close(m->inotify_fd);
                m->inotify_fd = fd;
        }
        for (size_t i = 0; i < m->n_wd; i++)
                m->wd_path[i] = mfree(m->wd_path[i]);
}

/* The directory rel (relative to the top) opened by a walk from the top,
 * one component at a time, never following a symbolic link: a directory
 * the sandbox swapped for a link to the host's own (after the event that
 * named it) is not entered. -errno: gone, or not a directory. */
static int open_rel(FsMonitor *m, const char *rel) {
        int fd = open(m->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        for (const char *p = rel; *p;) {
                size_t n = strcspn(p, "/");
                char name[NAME_MAX + 1];
                if (n == 0 || n > NAME_MAX) {
                        safe_close(fd);
                        return -EINVAL;
                }
                memcpy(name, p, n);
                name[n] = '\0';
                int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int e = errno;
                safe_close(fd);
                if (sub < 0)
                        return -e;
                fd = sub;
                p += n;
                if (*p == '/')
                        p++;
        }
        return fd;
}

/* Watch the directory fd (rel, relative to the top) and every directory
 * under it, by descriptors: each opened with O_NOFOLLOW from its parent's,
 * the watch added through /proc/self/fd, so no symbolic link is followed
 * anywhere on the way (the sandbox writes every name here). Not the top's
 * .git. Takes fd. A directory that cannot be watched makes the tree not
 * whole. */
static void watch_fd(FsMonitor *m, int fd, const char *rel, unsigned depth) {
        _cleanup_close_ int dfd = fd;
        if (!m->whole)
                return;
        if (m->n_dirs >= m->dirs_max || depth > DEPTH_MAX) {
                char why[128];
                if (depth > DEPTH_MAX)
                        snprintf(why, sizeof why, "the working tree is more than %u directories deep", DEPTH_MAX);
                else
                        snprintf(why, sizeof why, "the working tree has more than %zu directories", m->dirs_max);
                give_up(m, why);
                return;
        }
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", dfd);
        /* The magic link is followed to the directory opened above. */
        int wd = inotify_add_watch(m->inotify_fd, proc, WATCH_MASK);
        if (wd < 0) {
                give_up(m, errno == ENOSPC ? "the user's inotify watch limit was reached"
                                           : "a directory of the working tree cannot be watched");
                return;
        }
        m->n_dirs++;
        if (wd_set(m, wd, rel) < 0) {
                give_up(m, "out of memory");
                return;
        }
        pthread_mutex_lock(&m->lock);
        m->stats.dirs++;
        pthread_mutex_unlock(&m->lock);
        /* The subdirectories' names first, then each walked: one
         * descriptor per level, not one per entry read. */
        int rfd = dup(dfd);
        DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
        if (!d) {
                safe_close(rfd);
                give_up(m, "a directory of the working tree cannot be read");
                return;
        }
        char **subs = NULL;
        size_t n = 0;
        struct dirent *e;
        bool oom = false;
        while (!oom && (e = readdir(d))) {
                if (streq(e->d_name, ".") || streq(e->d_name, ".."))
                        continue;
                if (!*rel && streq(e->d_name, ".git"))
                        continue;
                bool dir = e->d_type == DT_DIR;
                if (e->d_type == DT_UNKNOWN) {
                        struct stat st;
                        dir = fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
                }
                if (!dir)
                        continue;
                char **v = n % 64 == 0 ? reallocarray(subs, n + 64, sizeof(char *)) : subs;
                char *c = v ? strdup(e->d_name) : NULL;
                if (!v || !c) {
                        free(c);
                        oom = true;
                        break;
                }
                subs = v;
                subs[n++] = c;
        }
        closedir(d);
        for (size_t i = 0; i < n; i++) {
                if (!oom && m->whole) {
                        _cleanup_free_ char *sub = NULL;
                        int cfd = openat(dfd, subs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (cfd < 0)
                                ; /* gone already, or a link now: its parent's event says so */
                        else if (asprintf(&sub, "%s%s%s", rel, *rel ? "/" : "", subs[i]) < 0) {
                                safe_close(cfd);
                                oom = true;
                        } else
                                watch_fd(m, cfd, sub, depth + 1);
                }
                free(subs[i]);
        }
        free(subs);
        if (oom)
                give_up(m, "out of memory");
}

static void watch_tree(FsMonitor *m, const char *rel) {
        if (!m->whole)
                return;
        int fd = open_rel(m, rel);
        if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
                return; /* gone already, or a link now: its parent's event says so */
        if (fd < 0) {
                give_up(m, "a directory of the working tree cannot be opened");
                return;
        }
        unsigned depth = 0;
        for (const char *p = rel; *p; p++)
                depth += *p == '/';
        watch_fd(m, fd, rel, depth + (*rel != 0));
}

/* The kernel's event queue overflowed: the events lost may have named new
 * directories, which would then never be watched, and what changes in
 * them never named (git, trusting its untracked cache and its index's
 * "unchanged" bits, would miss a file made or changed there). Every watch
 * goes, and the tree is walked again from the top; the journal restarts,
 * so every token given before is answered "everything". A tree already
 * given up stays so, and so is one that overflows again within
 * REWALK_MIN_S of the last walk: the sandbox, which makes the events,
 * must not keep the coordinator walking its tree. */
static void rewalk(FsMonitor *m) {
        journal_reset(m);
        pthread_mutex_lock(&m->lock);
        m->stats.overflows++;
        pthread_mutex_unlock(&m->lock);
        if (!m->whole)
                return;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (m->rewalked > 0 && (uint64_t) now.tv_sec < m->rewalked + REWALK_MIN_S) {
                give_up(m, "the kernel's event queue overflowed twice within 10 s");
                return;
        }
        m->rewalked = (uint64_t) now.tv_sec > 0 ? (uint64_t) now.tv_sec : 1;
        int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (fd < 0) {
                give_up(m, "the kernel's event queue overflowed, and no new watch could be made");
                return;
        }
        safe_close(m->inotify_fd);
        m->inotify_fd = fd;
        for (size_t i = 0; i < m->n_wd; i++)
                m->wd_path[i] = mfree(m->wd_path[i]);
        m->n_dirs = 0;
        pthread_mutex_lock(&m->lock);
        m->stats.dirs = 0;
        pthread_mutex_unlock(&m->lock);
        watch_tree(m, "");
}

/* Every event the kernel has queued, into the journal. */
static void read_events(FsMonitor *m) {
        _Alignas(struct inotify_event) char buf[64 * 1024];
        for (;;) {
                ssize_t n = read(m->inotify_fd, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return; /* EAGAIN: nothing more queued */
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *) p;
                        p += sizeof(*ev) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW) {
                                /* The rest of buf is the old descriptor's:
                                 * its watch numbers mean nothing now. */
                                rewalk(m);
                                break;
                        }
                        const char *dir = wd_get(m, ev->wd);
                        if (ev->mask & IN_IGNORED) {
                                wd_forget(m, ev->wd);
                                continue;
                        }
                        if (!dir)
                                continue;
                        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
                                if (!*dir) {
                                        /* The top itself went: nothing
                                         * said from here on would hold. */
                                        m->whole = false;
                                        set_why(m, "the working tree's top was moved or deleted");
                                }
                                continue;
                        }
                        const char *name = ev->len > 0 ? ev->name : NULL;
                        if (!name)
                                continue;
                        if (!*dir && streq(name, ".git"))
                                continue;
                        bool is_dir = ev->mask & IN_ISDIR;
                        journal_add(m, dir, name, false);
                        if (is_dir) {
                                /* Everything under it may be new or gone. */
                                journal_add(m, dir, name, true);
                                if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
                                        _cleanup_free_ char *sub = NULL;
                                        if (asprintf(&sub, "%s%s%s", dir, *dir ? "/" : "", name) >= 0)
                                                watch_tree(m, sub);
                                        else
                                                m->whole = false;
                                }
                        }
                }
        }
}

/* ---- the answers ------------------------------------------------------------- */

/* "INSTANCE.SEQ" as this monitor gave it: its sequence number, or 0. */
static uint64_t token_seq(const FsMonitor *m, const char *token) {
        size_t k = strlen(m->instance);
        if (strncmp(token, m->instance, k) != 0 || token[k] != '.')
                return 0;
        const char *d = token + k + 1;
        if (!*d || strspn(d, "0123456789") != strlen(d) || strlen(d) > 19)
                return 0;
        return strtoull(d, NULL, 10);
}

static int write_all(int fd, const void *data, size_t n) {
        const char *p = data;
        while (n > 0) {
                ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -errno;
                p += w;
                n -= (size_t) w;
        }
        return 0;
}

static void answer(FsMonitor *m, int fd) {
        struct timeval tv = { CLIENT_TIMEOUT_MS / 1000, (CLIENT_TIMEOUT_MS % 1000) * 1000 };
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        char req[TOKEN_MAX + 8];
        size_t len = 0;
        while (len < sizeof(req) - 1) {
                ssize_t n = recv(fd, req + len, sizeof(req) - 1 - len, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t) n;
                if (memchr(req, '\n', len))
                        break;
        }
        req[len] = '\0';
        char *nl = strchr(req, '\n');
        if (!nl || strncmp(req, "2 ", 2) != 0)
                return; /* not the protocol: closed without an answer */
        *nl = '\0';
        const char *token = req + 2;

        /* A sandbox that asks without end gets the cheap answer. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((uint64_t) now.tv_sec != m->second) {
                m->second = (uint64_t) now.tv_sec;
                m->answers = 0;
        }
        bool flood = ++m->answers > ANSWERS_PER_SECOND;
        /* Every change made before the question is in the kernel's queue. */
        read_events(m);
        uint64_t since = token_seq(m, token);
        bool trivial = flood || !m->whole || since == 0 || since < m->base || since > m->seq;
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "%s.%" PRIu64, m->instance, m->seq);
        strbuf_putc(&b, '\0');
        size_t n_paths = 0;
        for (size_t i = 0; !trivial && i < m->n_journal; i++)
                if (m->journal[i].seq > since) {
                        if (++n_paths > ANSWER_PATHS) {
                                trivial = true;
                                break;
                        }
                        strbuf_puts(&b, m->journal[i].path);
                        strbuf_putc(&b, '\0');
                }
        if (trivial) {
                strbuf_done(&b);
                b = STRBUF_INIT;
                strbuf_printf(&b, "%s.%" PRIu64, m->instance, m->seq);
                strbuf_putc(&b, '\0');
                strbuf_puts(&b, "/");
                strbuf_putc(&b, '\0');
        }
        if (!b.oom)
                (void) write_all(fd, strbuf_str(&b), b.len);
        strbuf_done(&b);
        pthread_mutex_lock(&m->lock);
        m->stats.queries++;
        if (trivial)
                m->stats.trivial++;
        pthread_mutex_unlock(&m->lock);
}

static void *thread_main(void *userdata) {
        FsMonitor *m = userdata;
        watch_tree(m, "");
        if (m->whole)
                set_why(m, "");
        for (;;) {
                struct pollfd p[3] = { { m->stop_fd, POLLIN, 0 },
                                       { m->inotify_fd, POLLIN, 0 },
                                       { m->listen_fd, POLLIN, 0 } };
                if (poll(p, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[0].revents)
                        break;
                if (p[1].revents)
                        read_events(m);
                if (p[2].revents & POLLIN) {
                        int fd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                        if (fd >= 0) {
                                answer(m, fd);
                                safe_close(fd);
                        }
                }
        }
        return NULL;
}

static int bind_socket(const char *path, int *ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        (void) unlink(path);
        mode_t old = umask(0077);
        int r = bind(fd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(fd, 64) < 0)
                return negative_errno();
        *ret = TAKE_FD(fd);
        return 0;
}

FsMonitor *fsmonitor_stop(FsMonitor *m) {
        if (!m)
                return NULL;
        if (m->started) {
                uint64_t one = 1;
                (void) !write(m->stop_fd, &one, sizeof one);
                pthread_join(m->thread, NULL);
        }
        if (m->listen_fd >= 0)
                (void) unlink(m->socket_path);
        safe_close(m->listen_fd);
        safe_close(m->inotify_fd);
        safe_close(m->stop_fd);
        for (size_t i = 0; i < m->n_wd; i++)
                free(m->wd_path[i]);
        free(m->wd_path);
        for (size_t i = 0; i < m->n_journal; i++)
                free(m->journal[i].path);
        free(m->journal);
        pthread_mutex_destroy(&m->lock);
        free(m->root);
        free(m->socket_path);
        free(m);
        return NULL;
}

int fsmonitor_start(const char *root, const char *socket_path, FsMonitor **ret) {
        FsMonitor *m = calloc(1, sizeof(FsMonitor));
        if (!m)
                return -ENOMEM;
        m->inotify_fd = m->listen_fd = m->stop_fd = -EBADF;
        pthread_mutex_init(&m->lock, NULL);
        m->whole = true;
        m->base = m->seq = 1;
        /* At most a quarter of the user's inotify watches. */
        m->dirs_max = DIRS_MAX;
        _cleanup_fclose_ FILE *f = fopen("/proc/sys/fs/inotify/max_user_watches", "re");
        unsigned long max = 0;
        if (f && fscanf(f, "%lu", &max) == 1 && max / 4 < m->dirs_max)
                m->dirs_max = max / 4;
        snprintf(m->stats.why, sizeof(m->stats.why), "the working tree is being walked");
        uint8_t rnd[8];
        int r = 0;
        if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
                r = -EIO;
        for (size_t i = 0; r >= 0 && i < sizeof rnd; i++)
                snprintf(m->instance + 2 * i, 3, "%02x", rnd[i]);
        m->root = strdup(root);
        m->socket_path = strdup(socket_path);
        if (r >= 0 && (!m->root || !m->socket_path))
                r = -ENOMEM;
        if (r >= 0 && (m->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
                r = negative_errno();
        if (r >= 0 && (m->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
                r = negative_errno();
        if (r >= 0)
                r = bind_socket(socket_path, &m->listen_fd);
        if (r >= 0) {
                r = thread_create_no_signals(&m->thread, thread_main, m);
                m->started = r >= 0;
        }
        if (r < 0) {
                fsmonitor_stop(m);
                return r;
        }
        *ret = m;
        return 0;
}

char *fsmonitor_socket_path(const char *control_socket) {
        char *p = NULL;
        return asprintf(&p, "%s.fsmon", control_socket) < 0 ? NULL : p;
}

void fsmonitor_stats(FsMonitor *m, FsMonitorStats *ret) {
        pthread_mutex_lock(&m->lock);
        *ret = m->stats;
        pthread_mutex_unlock(&m->lock);
}
