/* SPDX-License-Identifier: MIT */
/* lazaret-gitrouter: serve a host repository's .git under the git policy
 * (issue 4, decision 3). Foreground, single-threaded; SIGTERM, SIGINT or
 * SIGHUP unmount and exit 0.
 *
 *   lazaret-gitrouter --host-git DIR --isolated DIR [--worktree NAME]
 *                     [--allow-main-head] MOUNTPOINT
 *   lazaret-gitrouter --workspace DIR --isolated DIR [--git] [--allow-main-head]
 *                     [--protect PATTERN]... [--mask PATTERN]... MOUNTPOINT
 *
 * Either form takes --events-fd N: each refused request is one JSON line on
 * that descriptor (a pipe; made non-blocking here), for the Domain's event
 * record; a line that does not fit is dropped and counted. And
 * --expect-id DEV:INO: the --host-git or --workspace directory must be that
 * one (fd_identity), reached with no symbolic link, or the router exits 3
 * (EXIT_NOT_PINNED) before it mounts anything.
 *
 * The second form serves a whole working tree (direct mode, issue 13):
 * protected names are read-only and cannot be created, masked ones read as
 * empty, and with --git the tree's .git is served under the git policy.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "host-git.h"
#include "macro.h"
#include "path-pattern.h"
#include "router.h"
#include "trust.h"

static void usage(FILE *f) {
        fputs("usage: lazaret-gitrouter --host-git DIR --isolated DIR [--worktree NAME] [--allow-main-head] "
              "MOUNTPOINT\n"
              "       lazaret-gitrouter --workspace DIR --isolated DIR [--git] [--allow-main-head] "
              "[--protect PATTERN]... [--mask PATTERN]... MOUNTPOINT\n"
              "       (either form also takes --events-fd N and --expect-id DEV:INO)\n",
              f);
}

#define PATTERNS_MAX 4096

static int add_pattern(const char **list, size_t *n, const char *pattern) {
        const char *why = path_pattern_problem(pattern);
        if (why) {
                fprintf(stderr, "lazaret-gitrouter: '%s' is not a path pattern: %s\n", pattern, why);
                return -EINVAL;
        }
        if (*n >= PATTERNS_MAX) {
                fprintf(stderr, "lazaret-gitrouter: more than %d patterns\n", PATTERNS_MAX);
                return -E2BIG;
        }
        list[(*n)++] = pattern;
        return 0;
}

/* Keep fds 0-2 taken, so no file the router opens for a request gets a
 * number below 3 (fi->fh == 0 means "no handle"). */
static int reserve_std_fds(void) {
        for (int i = 0; i < 3; i++) {
                if (fcntl(i, F_GETFD) >= 0)
                        continue;
                int fd = open("/dev/null", O_RDWR);
                if (fd < 0)
                        return negative_errno();
                if (fd != i)
                        return -EBADF;
        }
        return 0;
}

static int open_root(const char *path, const char *what, const char *expect_id) {
        if (expect_id) {
                /* What lazaret checked, by identity, and no symbolic link on
                 * the way: a parent's writer may have swapped it since. */
                int fd, r = open_pinned_dir(path, expect_id, &fd, NULL);
                if (r < 0) {
                        fprintf(stderr,
                                "lazaret-gitrouter: the %s directory %s is not the one lazaret checked (%s): it was "
                                "replaced or moved since\n",
                                what, path, r == -ESTALE ? "another directory is there now" : strerror(-r));
                        return -2;
                }
                return fd;
        }
        int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "lazaret-gitrouter: cannot open %s directory %s: %s\n", what, path, strerror(errno));
                return -1;
        }
        return fd;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "host-git", required_argument, NULL, 'g' },
                { "isolated", required_argument, NULL, 'i' },
                { "worktree", required_argument, NULL, 'w' },
                { "allow-main-head", no_argument, NULL, 'H' },
                { "workspace", required_argument, NULL, 'W' },
                { "git", no_argument, NULL, 'G' },
                { "protect", required_argument, NULL, 'p' },
                { "mask", required_argument, NULL, 'm' },
                { "events-fd", required_argument, NULL, 'e' },
                { "expect-id", required_argument, NULL, 'I' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *host_git = NULL, *isolated = NULL, *worktree = NULL, *workspace = NULL, *expect_id = NULL;
        static const char *protect[PATTERNS_MAX], *mask[PATTERNS_MAX];
        size_t n_protect = 0, n_mask = 0;
        bool allow_main_head = false, git = false;
        int c, events_fd = -1;

        crypto_init();

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'g':
                        host_git = optarg;
                        break;
                case 'i':
                        isolated = optarg;
                        break;
                case 'w':
                        worktree = optarg;
                        break;
                case 'H':
                        allow_main_head = true;
                        break;
                case 'W':
                        workspace = optarg;
                        break;
                case 'I':
                        expect_id = optarg;
                        break;
                case 'G':
                        git = true;
                        break;
                case 'p':
                        if (add_pattern(protect, &n_protect, optarg) < 0)
                                return 64;
                        break;
                case 'm':
                        if (add_pattern(mask, &n_mask, optarg) < 0)
                                return 64;
                        break;
                case 'e': {
                        char *end;
                        errno = 0;
                        long v = strtol(optarg, &end, 10);
                        if (errno || *end || v < 3 || v > 1024 || fcntl((int) v, F_GETFD) < 0) {
                                fprintf(stderr, "lazaret-gitrouter: --events-fd %s: not an open descriptor\n", optarg);
                                return 64;
                        }
                        events_fd = (int) v;
                        (void) fcntl(events_fd, F_SETFD, FD_CLOEXEC);
                        (void) fcntl(events_fd, F_SETFL, fcntl(events_fd, F_GETFL) | O_NONBLOCK);
                        break;
                }
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 64;
                }
        if (!!host_git == !!workspace || !isolated || optind != argc - 1 ||
            (host_git && (git || n_protect || n_mask)) || (workspace && worktree)) {
                usage(stderr);
                return 64;
        }
        const char *mountpoint = argv[optind];
        if (worktree && (!*worktree || strchr(worktree, '/') || !strcmp(worktree, ".") || !strcmp(worktree, ".."))) {
                fprintf(stderr, "lazaret-gitrouter: invalid worktree name '%s'\n", worktree);
                return 64;
        }
        /* A gone reader is an EPIPE on the events pipe, never our end. */
        if (events_fd >= 0)
                (void) signal(SIGPIPE, SIG_IGN);
        /* The host's git checks the packs the sandbox adds (router.c):
         * nothing of ours may change what it reads or runs. */
        if (host_git_drop_environment() < 0) {
                fprintf(stderr, "lazaret-gitrouter: out of memory\n");
                return 1;
        }
        if (reserve_std_fds() < 0) {
                fprintf(stderr, "lazaret-gitrouter: cannot reserve standard descriptors\n");
                return 1;
        }
        /* Files the sandbox creates on the host are never group or world
         * writable. */
        umask(022);
        /* Every file the sandbox holds open is a descriptor here, and
         * gVisor's gofer keeps many open at once (an untar of a few
         * thousand files exceeds the usual soft limit of 1024): use the
         * whole hard limit. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }

        _cleanup_close_ int host_fd = open_root(host_git ?: workspace, host_git ? "host .git" : "workspace", expect_id);
        if (host_fd < 0)
                return host_fd == -2 ? EXIT_NOT_PINNED : 1;
        _cleanup_close_ int iso_fd = open_root(isolated, "isolated", NULL);
        if (iso_fd < 0)
                return 1;

        Router router = {
                .host_fd = host_fd,
                .iso_fd = iso_fd,
                .policy = { .worktree = worktree, .allow_main_head = allow_main_head },
                .workspace = workspace != NULL,
                .ws = { .protect = protect, .n_protect = n_protect, .mask = mask, .n_mask = n_mask },
                .events_fd = events_fd,
        };
        if (git)
                router.ws.git = &router.policy;

        struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
        if (fuse_opt_add_arg(&args, argv[0]) < 0 || fuse_opt_add_arg(&args, "-o") < 0 ||
            fuse_opt_add_arg(&args, "fsname=lazaret-gitrouter,subtype=lazaret-gitrouter") < 0) {
                fprintf(stderr, "lazaret-gitrouter: out of memory\n");
                return 1;
        }
        struct fuse *f = fuse_new(&args, router_operations(), sizeof(struct fuse_operations), &router);
        fuse_opt_free_args(&args);
        if (!f) {
                fprintf(stderr, "lazaret-gitrouter: cannot set up the FUSE session\n");
                return 1;
        }
        if (fuse_mount(f, mountpoint) != 0) {
                fprintf(stderr, "lazaret-gitrouter: cannot mount on %s\n", mountpoint);
                fuse_destroy(f);
                return 1;
        }
        struct fuse_session *se = fuse_get_session(f);
        if (fuse_set_signal_handlers(se) != 0) {
                fprintf(stderr, "lazaret-gitrouter: cannot install signal handlers\n");
                fuse_unmount(f);
                fuse_destroy(f);
                return 1;
        }
        /* One thread: the policy, the events pipe and the per-path cache
         * timeouts (router.h, Router.cfg) assume it. */
        int r = fuse_loop(f);
        fuse_remove_signal_handlers(se);
        fuse_unmount(f);
        fuse_destroy(f);
        /* A signal ends the loop normally (libfuse versions differ on
         * whether they report it as -signo). */
        if (r < 0 && r != -SIGTERM && r != -SIGINT && r != -SIGHUP) {
                fprintf(stderr, "lazaret-gitrouter: session ended: %s\n", strerror(-r));
                return 1;
        }
        return 0;
}
