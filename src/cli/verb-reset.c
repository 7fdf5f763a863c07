/* SPDX-License-Identifier: MIT */
/* lazaret reset [PROFILE] [--dir DIR] [--yes]: discard the persistent
 * changes of a profile's State Anchor (spec §4.3.2) for the workspace. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec-util.h"
#include "fd-util.h"
#include "client.h"
#include "fileio.h"
#include "log.h"
#include "path-util.h"
#include "persist.h"
#include "profile-pick.h"
#include "router-run.h"
#include "runtime-dir.h"
#include "strbuf.h"
#include "string-util.h"
#include "verbs.h"

/* A mount point at path or below it, in Podman's rootless namespace (a
 * crashed coordinator's overlay that nobody recovered yet, a stage of a
 * person's volume) or on the host: rm would remove through one below
 * (--one-file-system does not see a bind mount of the same file system).
 * *ret: the first one found, or NULL. */
static int mounted_somewhere(const char *path, char **ret) {
        char where[2][64] = { "/proc/self/mountinfo", "" };
        pid_t pause;
        *ret = NULL;
        if (podman_pause_pid_find(&pause) == 0)
                snprintf(where[1], sizeof(where[1]), "/proc/%d/mountinfo", (int) pause);
        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *text = NULL;
                if (!where[i][0] || read_file_capped(where[i], 16u * 1024u * 1024u, &text, NULL) < 0)
                        continue;
                for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                        char mp[4097];
                        if (sscanf(line, "%*d %*d %*s %*s %4096s", mp) != 1)
                                continue;
                        /* The kernel's octal escapes (\040 for a space). */
                        char *o = mp;
                        for (const char *c = mp; *c; c++) {
                                if (c[0] == '\\' && c[1] >= '0' && c[1] <= '3' && c[2] >= '0' && c[2] <= '7' &&
                                    c[3] >= '0' && c[3] <= '7') {
                                        *o++ = (char) ((c[1] - '0') * 64 + (c[2] - '0') * 8 + (c[3] - '0'));
                                        c += 3;
                                } else
                                        *o++ = *c;
                        }
                        *o = '\0';
                        if (path_under(mp, path)) {
                                *ret = strdup(mp);
                                return *ret ? 1 : -ENOMEM;
                        }
                }
        }
        return 0;
}

/* Remove paths; rootless through `podman unshare`, where the files the
 * sandbox's other users made (owned by subordinate ids) can be removed. */
static int remove_paths(char **paths, size_t n, char **ret_error) {
        const char *search = getenv("PATH");
        if (!search || !*search)
                search = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
        _cleanup_free_ char *podman = NULL, *rm = NULL;
        int r = exec_find_program(search, "rm", &rm);
        if (r < 0)
                return r;
        /* Without Podman (a host for the native backend alone) there are
         * no files of subordinate ids: the user's own rm removes them. */
        bool rootless = geteuid() != 0;
        if (rootless && (r = exec_find_program(search, "podman", &podman)) < 0) {
                if (r != -ENOENT)
                        return r;
                rootless = false;
        }
        const char **argv = calloc(n + 8, sizeof(char *));
        if (!argv)
                return -ENOMEM;
        size_t k = 0;
        if (rootless) {
                argv[k++] = "podman";
                argv[k++] = "unshare";
        }
        argv[k++] = rm;
        argv[k++] = "-rf";
        /* Never into another file system mounted below (one of the same
         * file system, which rm cannot tell, is refused before:
         * mounted_somewhere). */
        argv[k++] = "--one-file-system";
        argv[k++] = "--";
        for (size_t i = 0; i < n; i++)
                argv[k++] = paths[i];
        argv[k] = NULL;
        _cleanup_(exec_result_done) ExecResult res = {};
        r = exec_capture(rootless ? podman : rm, argv, UINT64_C(600) * 1000000, &res);
        free(argv);
        if (r < 0)
                return r;
        if (res.spawn_error < 0 || res.timed_out || res.status != 0) {
                *ret_error = strdup(res.err && *res.err ? res.err : "rm failed");
                if (*ret_error)
                        (*ret_error)[strcspn(*ret_error, "\n")] = '\0'; /* its first error */
                return -EIO;
        }
        return 0;
}

int verb_reset(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "dir", required_argument, NULL, 'd' },
                { "yes", no_argument, NULL, 'y' },
                {},
        };
        const char *only = NULL;
        bool yes = false;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "hy", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret reset [PROFILE] [--dir DIR] [--yes] [--workspace DIR]\n\n"
                               "Discard what the sandbox of PROFILE changed in its persistent_dirs for the\n"
                               "workspace (all of them, or DIR only). Asks first unless --yes; refused while\n"
                               "the sandbox runs.\n");
                        return 0;
                case 'd':
                        only = optarg;
                        break;
                case 'y':
                        yes = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        const char *profile_name = NULL;
        if (profile_operand(argc, argv, optind, "reset", &profile_name) < 0)
                return EXIT_USAGE;
        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        int pr = profile_load(g, profile_name, &cfg, &p);
        if (pr < 0)
                return profile_load_exit(pr);

        StrBuf list = STRBUF_INIT;
        for (size_t i = 0; i < p->n_persistent_dirs; i++)
                strbuf_printf(&list, "%s%s", i ? ", " : "", p->persistent_dirs[i]);
        _cleanup_free_ char *dirs = strbuf_steal(&list);
        if (p->n_persistent_dirs == 0) {
                log_error("profile %s has no persistent_dirs: nothing to reset", p->name);
                return EXIT_USAGE;
        }
        _cleanup_free_ char *want = NULL;
        if (only) {
                const char *why = NULL;
                want = persist_dir_canonical(only, &why);
                size_t i;
                for (i = 0; want && i < p->n_persistent_dirs && !streq(p->persistent_dirs[i], want); i++)
                        ;
                if (!want || i == p->n_persistent_dirs) {
                        log_error("%s is not one of %s's persistent_dirs (%s)", only, p->name, dirs ? dirs : "?");
                        return EXIT_USAGE;
                }
        }

        /* The coordinator holds the Domain Store's lock while it lives; we
         * hold it while we remove, so no sandbox starts meanwhile. */
        _cleanup_free_ char *lock_path = path_join(p->domain_dir, "store.lock");
        if (!lock_path) {
                log_error("out of memory");
                return EXIT_LAZARET;
        }
        _cleanup_close_ int lock = open(lock_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (lock < 0 && errno != ENOENT) {
                log_error("cannot open %s: %m", lock_path);
                return EXIT_LAZARET;
        }
        if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0) {
                /* Running, or tearing down after its last session (the CLI
                 * returns before the teardown ends): wait for the latter. */
                RuntimePaths rp = {};
                _cleanup_free_ char *why = NULL;
                _cleanup_close_ int fd = -EBADF;
                bool listening = runtime_paths(p->domain_hash, &rp, &why) == 0 && client_connect(rp.socket, &fd) == 0;
                runtime_paths_done(&rp);
                uint64_t deadline = now_usec() + UINT64_C(30) * 1000000;
                int locked = -1;
                while (!listening && (locked = flock(lock, LOCK_EX | LOCK_NB)) < 0 && now_usec() < deadline)
                        usleep(50000);
                if (locked < 0) {
                        log_error("the sandbox of %s is running; stop it first ('lazaret stop %s')", p->name, p->name);
                        return EXIT_LAZARET;
                }
        }

        /* <name>_layer.img holds the changes (their file system, mounted on
         * <name>_layer while the sandbox runs); _changes and _work are
         * where they lived before. */
        /* <name>_native is the native backend's layer (its upper and work
         * directories: sandbox/native/native-layers.h). */
        static const char *const suffixes[] = { "layer.img", "layer", "changes", "work", "merged", "image", "native" };
        const size_t n_sfx = ELEMENTSOF(suffixes);
        char **paths = calloc(n_sfx * p->n_persistent_dirs + 1, sizeof(char *));
        size_t n = 0;
        int ret = 0;
        bool oom = !paths;
        StrBuf which = STRBUF_INIT;
        for (size_t i = 0; !oom && i < p->n_persistent_dirs; i++) {
                if (want && !streq(want, p->persistent_dirs[i]))
                        continue;
                _cleanup_free_ char *name = persist_dir_name(p->persistent_dirs[i]);
                strbuf_printf(&which, "%s%s", n ? ", " : "", p->persistent_dirs[i]);
                for (size_t k = 0; name && k < n_sfx; k++) {
                        char *leaf = NULL;
                        if (asprintf(&leaf, "%s_%s", name, suffixes[k]) < 0)
                                leaf = NULL;
                        paths[n] = leaf ? path_join(p->domain_dir, leaf) : NULL;
                        free(leaf);
                        if (paths[n])
                                n++;
                }
                if (!name || n % n_sfx != 0)
                        oom = true;
        }
        _cleanup_free_ char *what = strbuf_steal(&which), *err = NULL;
        if (oom || !what) {
                log_error("out of memory");
                ret = EXIT_LAZARET;
                goto done;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *mp = NULL;
                int k = mounted_somewhere(paths[i], &mp);
                if (k == -ENOMEM) {
                        log_error("out of memory");
                        ret = EXIT_LAZARET;
                        goto done;
                }
                if (k > 0) {
                        log_error("%s is still mounted (by a sandbox that did not end cleanly, or by hand); reset "
                                  "removes nothing through a mount: run 'lazaret run %s' once (it cleans up) or "
                                  "'lazaret stop %s', or unmount it (in Podman's namespace: podman unshare umount "
                                  "%s), then reset",
                                  mp, p->name, p->name, mp);
                        ret = EXIT_LAZARET;
                        goto done;
                }
        }
        if (!yes) {
                if (!isatty(STDIN_FILENO)) {
                        log_error("reset needs confirmation: run it on a terminal, or pass --yes");
                        ret = EXIT_USAGE;
                        goto done;
                }
                fprintf(stderr,
                        "Discard every change the sandbox of %s made to %s in %s? This cannot be undone. [y/N] ",
                        p->name, what ? what : "?", cfg->workspace);
                char answer[16] = "";
                if (!fgets(answer, sizeof(answer), stdin) || (answer[0] != 'y' && answer[0] != 'Y')) {
                        fprintf(stderr, "nothing was changed\n");
                        ret = EXIT_LAZARET;
                        goto done;
                }
        }
        int r = remove_paths(paths, n, &err);
        if (r < 0) {
                log_error("cannot remove the changes of %s: %s", what ? what : "?", err ? err : strerror(-r));
                ret = EXIT_LAZARET;
                goto done;
        }
        printf("%s: discarded the changes to %s\n", p->name, what ? what : "?");
done:
        for (size_t i = 0; paths && i < n; i++)
                free(paths[i]);
        free(paths);
        return ret;
}
