/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "argv-util.h"
#include "exec-util.h"
#include "host-git.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "path-util.h"
#include "dispense.h"
#include "sandbox.h"
#include "strbuf.h"
#include "string-util.h"

#define PODMAN_TIMEOUT_USEC (UINT64_C(120) * 1000000)
#define STATE_FILE_MAX      (4u * 1024u * 1024u)

char *sandbox_volume_stage(const LaunchSpec *s, size_t i) {
        char *p = NULL;
        return asprintf(&p, "%s/volumes/%zu", s->domain_dir, i) < 0 ? NULL : p;
}

int sandbox_name(const LaunchSpec *s, char **ret) {
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "lazaret-coord-%s", s->domain_hash);
        char *n = strbuf_steal(&b);
        if (!n)
                return -ENOMEM;
        *ret = n;
        return 0;
}

void sandbox_info_done(SandboxInfo *i) {
        free(i->id);
        free(i->runsc_root);
        if (i->env)
                for (char **p = i->env; *p; p++)
                        free(*p);
        free(i->env);
        json_decref(i->user);
        *i = (SandboxInfo){};
}

/* Find the runsc state root Podman used for this container: rootless Podman
 * keeps it in its runtime directory, rootful in /run/runsc. The state file
 * "<id>_sandbox:<id>.state" proves which. */
static int find_runsc_root(const LaunchSpec *s, const char *id, char **ret, char **ret_state) {
        StrBuf cand[3] = { STRBUF_INIT, STRBUF_INIT, STRBUF_INIT };
        size_t n = 0;
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (!s->rootless)
                strbuf_puts(&cand[n++], "/run/runsc");
        else {
                if (xdg && path_is_absolute(xdg))
                        strbuf_printf(&cand[n++], "%s/runsc", xdg);
                strbuf_printf(&cand[n++], "/tmp/podman-run-%u/runsc", (unsigned) geteuid());
        }
        int r = -ENOENT;
        for (size_t i = 0; i < n; i++) {
                StrBuf f = STRBUF_INIT;
                strbuf_printf(&f, "%s/%s_sandbox:%s.state", strbuf_str(&cand[i]), id, id);
                if (r == -ENOENT && access(strbuf_str(&f), R_OK) == 0) {
                        *ret = strbuf_steal(&cand[i]);
                        *ret_state = strbuf_steal(&f);
                        r = *ret && *ret_state ? 0 : -ENOMEM;
                }
                strbuf_done(&f);
        }
        for (size_t i = 0; i < n; i++)
                strbuf_done(&cand[i]);
        return r;
}

/* The container's process environment from runsc's state file (the OCI spec
 * Podman wrote: image ENV plus Podman's own). */
static int read_spec_env(const char *state, char ***ret, json_t **ret_user) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_file_capped(state, STATE_FILE_MAX, &text, &len);
        if (r < 0)
                return r;
        json_error_t e;
        json_t *j = json_loadb(text, len, 0, &e);
        if (!j)
                return -EBADMSG;
        json_t *process = json_object_get(json_object_get(j, "spec"), "process");
        json_t *env = json_object_get(process, "env");
        json_t *user = json_object_get(process, "user");
        if (!json_is_array(env)) {
                json_decref(j);
                return -EBADMSG;
        }
        char **v = calloc(json_array_size(env) + 1, sizeof(char *));
        size_t k = 0;
        for (size_t i = 0; v && i < json_array_size(env); i++) {
                const char *s = json_string_value(json_array_get(env, i));
                if (s && strchr(s, '=') && !(v[k++] = strdup(s))) {
                        for (size_t q = 0; q < k; q++)
                                free(v[q]);
                        free(v);
                        v = NULL;
                }
        }
        if (v && json_is_object(user))
                *ret_user = json_deep_copy(user);
        else if (v)
                *ret_user = json_pack("{s:i, s:i}", "uid", 0, "gid", 0);
        json_decref(j);
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}

int sandbox_start(const LaunchSpec *s, uint64_t generation, const MountPlan *plan, const char *trace_config,
                  SandboxInfo *ret, char **ret_error) {
        const char *workspace = plan->workspace, *network_from = plan->network_from;
        const StateAnchor *anchor = plan->anchor;
        _cleanup_free_ char *name = NULL, *pidfile = NULL;
        _cleanup_(exec_result_done) ExecResult res = {};
        Argv a = {};
        int r;

        r = sandbox_name(s, &name);
        if (r < 0)
                return r;
        StrBuf pb = STRBUF_INIT;
        strbuf_printf(&pb, "%s/" SANDBOX_CONMON_PIDFILE, s->domain_dir);
        pidfile = strbuf_steal(&pb);
        if (!pidfile)
                return -ENOMEM;
        (void) unlink(pidfile);

        argv_add(&a, "podman");
        argv_add(&a, "run");
        argv_add(&a, "--detach");
        argv_addf(&a, "--name=%s", name);
        argv_addf(&a, "--runtime=%s", s->runsc);
        /* Rootless runsc cannot make cgroups on this kind of host; Podman
         * still accounts the container. */
        if (s->rootless)
                argv_add(&a, "--runtime-flag=ignore-cgroups");
        /* Without a sidecar, gVisor's own loopback-only stack (runsc
         * network=none): Podman's empty namespace has its loopback down,
         * which runsc's other modes copy as no loopback at all, and the
         * relay of egress by name listens there. */
        if (network_from)
                argv_addf(&a, "--runtime-flag=network=%s", runsc_network_to_string(s->runsc_network));
        else
                argv_add(&a, "--runtime-flag=network=none");
        /* The root file system's changes live in gVisor's overlay, whose
         * upper layer is a file in the container's own root (runsc's
         * default medium): disk_limit caps it, ENOSPC inside. */
        argv_addf(&a, "--runtime-flag=overlay2=root:self,size=%" PRIu64 "m", s->disk_limit_mib);
        /* No host Unix socket is reachable (runsc's host-uds stays off):
         * the Escalation Socket and the broker's come in as descriptors,
         * through the dispenser (dispenser.h; issue 41). */
        /* gVisor's trace points of the processes started inside, to the
         * coordinator's socket (issue 19); runsc connects when it creates
         * the sandbox, and starts it without them when it cannot. */
        if (trace_config)
                argv_addf(&a, "--runtime-flag=pod-init-config=%s", trace_config);
        /* The sidecar's namespace, where netd enforces the policy; with a
         * policy that permits nothing there is no sidecar: loopback only. */
        if (network_from)
                argv_addf(&a, "--network=container:%s", network_from);
        else
                argv_add(&a, "--network=none");
        argv_addf(&a, "--ulimit=nofile=%" PRIu64 ":%" PRIu64, s->nofile, s->nofile);
        argv_addf(&a, "--ulimit=nproc=%" PRIu64 ":%" PRIu64, s->nproc, s->nproc);
        /* Rootful, cgroups count what the host pays, behind the limits the
         * coordinator and gVisor keep: runsc's host threads (about 8 per
         * task), and the sentry's own memory over the programs'. */
        if (!s->rootless) {
                argv_addf(&a, "--pids-limit=%" PRIu64, s->nproc * SANDBOX_HOST_THREADS_PER_TASK + 256);
                if (s->memory_limit_mib > 0)
                        argv_addf(&a, "--memory=%" PRIu64 "m", s->memory_limit_mib + s->memory_limit_mib / 4 + 256);
        }
        /* PID 1's stdout and stderr are the container's log, a host file
         * conmon fills without a bound, and the agent can write them
         * (/proc/1/fd/1): that would grow the host's disk past
         * disk_limit. Sessions have their own streams; nothing reads the
         * log. */
        argv_add(&a, "--log-driver=none");
        argv_add(&a, "--security-opt=no-new-privileges");
        /* No frames around the routes, no changes to them (decision 7). */
        argv_add(&a, "--cap-drop=NET_RAW");
        argv_add(&a, "--cap-drop=NET_ADMIN");
        argv_addf(&a, "--label=io.lazaret.domain=%s", s->domain_hash);
        argv_addf(&a, "--label=io.lazaret.profile=%s", s->profile);
        argv_addf(&a, "--label=io.lazaret.generation=%" PRIu64, generation);
        argv_addf(&a, "--conmon-pidfile=%s", pidfile);
        argv_addf(&a, "--hostname=%s", s->profile);
        argv_add(&a, "--workdir=/workspace");
        /* Direct mode: the working tree only through the workspace router
         * (its mount is the plan's workspace), which guards its .git,
         * protected and masked names. */
        if (plan->workspace_routed)
                argv_addf(&a, "--volume=%s:/workspace", workspace);
        else
                argv_addf(&a, "--volume=%s:/workspace:z", workspace);
        /* Editor settings are hidden under empty tmpfs mounts, but only where
         * they exist: a mount point would otherwise litter the tree. In
         * direct mode the workspace router serves them read-only instead
         * (protected host-run files). */
        for (const char *const *m = (const char *const[]){ ".vscode", ".idea", NULL }; !plan->workspace_routed && *m;
             m++) {
                _cleanup_free_ char *hp = path_join(workspace, *m);
                struct stat st;
                if (hp && lstat(hp, &st) == 0 && S_ISDIR(st.st_mode))
                        argv_addf(&a, "--mount=type=tmpfs,destination=/workspace/%s,tmpfs-mode=0755", *m);
        }
        /* The routed .git in branch mode, at its own path, so the
         * worktree's "gitdir:" line resolves inside as outside; a mount
         * point, so it cannot be renamed or removed from inside. (Direct
         * mode's .git is the workspace router's, at /workspace/.git.) */
        if (plan->git_source)
                argv_addf(&a, "--volume=%s:%s", plan->git_source, s->git_dir);
        argv_addf(&a, "--mount=type=bind,source=%s,destination=/run/lazaret/init,ro=true", s->init);
        argv_addf(&a, "--mount=type=bind,source=%s,destination=/run/lazaret/terminfo,ro=true", plan->terminfo_dir);
        /* gVisor's own stack is probed from inside (decision 7). */
        if (network_from && s->runsc_network == RUNSC_NETWORK_SANDBOX && s->netd)
                argv_addf(&a, "--mount=type=bind,source=%s,destination=/run/lazaret/netd,ro=true", s->netd);
        /* ca_certificates: the bundle the coordinator made, read-only. */
        if (plan->ca_bundle)
                argv_addf(&a, "--mount=type=bind,source=%s,destination=" CA_BUNDLE_PATH ",ro=true", plan->ca_bundle);
        for (size_t i = 0; i < s->n_volumes; i++) {
                const LaunchVolume *v = &s->volumes[i];
                StrBuf opts = STRBUF_INIT;
                strbuf_puts(&opts, v->read_only ? "ro" : "rw");
                if (v->relabel)
                        strbuf_printf(&opts, ",%c", v->relabel);
                /* Pinned: the stage the backend bound it onto (Podman
                 * would resolve the volume's own path again, by name). */
                _cleanup_free_ char *stage = v->id ? sandbox_volume_stage(s, i) : NULL;
                argv_addf(&a, "--volume=%s:%s:%s", stage ?: v->host, v->container, strbuf_str(&opts));
                strbuf_done(&opts);
        }
        /* Host escalation: the client and the sandbox's certificates. */
        bool escalate = plan->certs_dir && plan->socket_dir && s->escalate, relay = plan->broker_dir && s->relay;
        if (escalate) {
                argv_addf(&a, "--mount=type=bind,source=%s,destination=/run/lazaret/escalate,ro=true", s->escalate);
                argv_addf(&a, "--mount=type=bind,source=%s,destination=/run/lazaret/certs,ro=true", plan->certs_dir);
        }
        /* Egress by name: the relay (init keeps it running). */
        if (relay)
                argv_addf(&a, "--mount=type=bind,source=%s,destination=/run/lazaret/relay,ro=true", s->relay);
        /* The dispenser's sockets (dispenser.h), in a directory of the
         * sandbox's own that only its root may change. */
        if (escalate || relay || plan->fsmonitor_socket)
                argv_add(&a, "--mount=type=tmpfs,destination=" DISPENSE_DIR ",tmpfs-mode=0755,tmpfs-size=64k");
        /* The State Anchor: each persistent directory is its overlay's
         * merged view. Podman mounts the deeper paths later, so its own
         * /etc/resolv.conf, hosts and hostname cover /etc's (spec §4.3.4). */
        for (size_t i = 0; anchor && i < anchor->n_layers; i++)
                argv_addf(&a, "--volume=%s:%s:rw", anchor->layers[i].merged, anchor->layers[i].dir);
        argv_add(&a, "--entrypoint=/run/lazaret/init");
        argv_add(&a, "--");
        /* The same image the layers' lowerdirs come from. */
        argv_add(&a, anchor && anchor->image_id ? anchor->image_id : s->image);
        if (relay) {
                argv_add(&a, "--relay");
                argv_add(&a, "/run/lazaret/relay");
        }
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }

        r = exec_capture(s->podman, (const char *const *) a.v, PODMAN_TIMEOUT_USEC, &res);
        argv_done(&a);
        if (r < 0)
                return r;
        if (exec_result_failed(&res)) {
                *ret_error = podman_error(&res);
                /* A half-made container (created, failed to start) must not
                 * outlive this attempt. */
                _cleanup_free_ char *ignored = NULL;
                (void) container_remove(s, name, &ignored);
                return *ret_error ? -EIO : -ENOMEM;
        }

        SandboxInfo info = {};
        size_t idlen = strcspn(res.out, "\r\n");
        info.id = strndup(res.out, idlen);
        if (!info.id)
                return -ENOMEM;

        _cleanup_free_ char *state = NULL, *pidtext = NULL;
        r = find_runsc_root(s, info.id, &info.runsc_root, &state);
        if (r >= 0)
                r = read_spec_env(state, &info.env, &info.user);
        if (r >= 0)
                r = read_file_capped(pidfile, 64, &pidtext, NULL);
        if (r >= 0) {
                info.conmon_pid = (pid_t) strtol(pidtext, NULL, 10);
                if (info.conmon_pid <= 0)
                        r = -EBADMSG;
        }
        if (r < 0) {
                StrBuf e = STRBUF_INIT;
                strbuf_printf(&e, "the sandbox %s started, but its runtime state cannot be read: %s", name,
                              strerror(-r));
                *ret_error = strbuf_steal(&e);
                sandbox_info_done(&info);
                _cleanup_free_ char *ignored = NULL;
                (void) container_remove(s, name, &ignored);
                return -EIO;
        }
        *ret = info;
        return 0;
}

char **sandbox_exec_argv(const LaunchSpec *s, const SandboxInfo *i, const char *procfile, const char *pidfile) {
        Argv a = {};
        argv_add(&a, "runsc");
        argv_addf(&a, "--root=%s", i->runsc_root);
        if (s->rootless)
                argv_add(&a, "--ignore-cgroups");
        argv_add(&a, "exec");
        argv_addf(&a, "--process=%s", procfile);
        if (pidfile)
                argv_addf(&a, "--internal-pid-file=%s", pidfile);
        argv_add(&a, i->id);
        if (a.oom) {
                argv_done(&a);
                return NULL;
        }
        return a.v;
}

/* Run git on the host for the workspace's repository, without the hooks,
 * fsmonitor or pager its configuration may name: until the git router
 * guards .git, that configuration is writable from the sandbox. */
static int host_git(const LaunchSpec *s, int repo_fd, const char *const *args, ExecResult *ret) {
        Argv a = {};
        /* In the repository the leader checked (its descriptor, fd 3 of
         * git's), not whatever its name leads to by now. */
        host_git_argv(&a, repo_fd >= 0 ? "/proc/self/fd/3" : s->workspace);
        for (const char *const *p = args; *p; p++)
                argv_add(&a, *p);
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        _cleanup_free_ char *git = NULL;
        const char *search = getenv("PATH");
        int r = exec_find_program(search && *search ? search : "/usr/bin:/bin", "git", &git);
        if (r < 0) {
                argv_done(&a);
                return r;
        }
        r = exec_capture_fds(git, (const char *const *) a.v, &repo_fd, repo_fd >= 0 ? 1 : 0, PODMAN_TIMEOUT_USEC, ret);
        argv_done(&a);
        return r;
}

static char *git_error(const char *what, const ExecResult *r) {
        StrBuf b = STRBUF_INIT;
        const char *e = r->err ? r->err : "";
        size_t n = strcspn(e, "\n");
        strbuf_printf(&b, "%s failed%s%.*s", what, n ? ": " : "", (int) (n > 300 ? 300 : n), e);
        return strbuf_steal(&b);
}

/* The path a worktree's link file names (its one line, after prefix):
 * absolute, or relative to dir (git's worktree.useRelativePaths). */
static char *link_target(const char *data, size_t n, const char *prefix, const char *dir) {
        if (!data || strlen(data) != n || n < 2 || data[n - 1] != '\n' || memchr(data, '\n', n - 1))
                return NULL;
        const char *p = startswith(data, prefix);
        if (!p || p[0] == '\n')
                return NULL;
        _cleanup_free_ char *t = strndup(p, (size_t) (data + n - 1 - p));
        if (!t)
                return NULL;
        return t[0] == '/' ? TAKE_PTR(t) : path_join(dir, t);
}

static bool same_file(const char *a, const char *b) {
        struct stat x, y;
        return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The worktree is the checked repository's: its registration there
 * (.git/worktrees/NAME/gitdir, which the git router never lets the sandbox
 * write) names this worktree, and the .git the leader pinned is still the
 * one at its path. A worktree made while a link stood in for the
 * repository (git writes the real path of the repository it used into the
 * worktree's .git file: checked for a fresh one) has no such registration.
 * The worktree's own .git file is the agent's to write: on reuse one that
 * names anything else is put back (the host's git never reads it: see
 * coordinator-files.c), or the start is refused if it cannot be. */
static int worktree_of_repository(const LaunchSpec *s, const char *path, bool fresh, char **ret_error) {
        if (!s->git_dir || !s->git_dir_id)
                return 0;
        const char *name = strrchr(path, '/');
        _cleanup_free_ char *dotgit = path_join(path, ".git"), *admin = NULL, *reg_path = NULL, *want = NULL,
                            *reg = NULL, *reg_target = NULL, *line = NULL, *line_target = NULL;
        if (!name || !dotgit || asprintf(&admin, "%s/worktrees/%s", s->git_dir, name + 1) < 0 ||
            !(reg_path = path_join(admin, "gitdir")) || asprintf(&want, "gitdir: %s\n", admin) < 0)
                return -ENOMEM;
        /* The registration names the worktree's .git by its real path (the
         * data root's may hold a link): compared as what each is. */
        size_t n = 0;
        _cleanup_close_ int rfd = open(reg_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (rfd >= 0 && read_fd_capped(rfd, 4096, &reg, &n) >= 0)
                reg_target = link_target(reg, n, "", admin);
        bool ok = same_file(reg_target, dotgit) && open_pinned_dir(s->git_dir, s->git_dir_id, NULL, NULL) == 0;
        if (ok) {
                /* Not blocking on a FIFO the agent put there, nor reading
                 * anything but a file. */
                struct stat st;
                _cleanup_close_ int fd = open(dotgit, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read_fd_capped(fd, 4096, &line, &n) >= 0)
                        line_target = link_target(line, n, "gitdir: ", path);
                bool same = same_file(line_target, admin);
                if (!same && fresh)
                        ok = false;
                else if (!same) {
                        int r = write_file_atomic(dotgit, want, strlen(want), 0644, 0);
                        if (r < 0) {
                                StrBuf e = STRBUF_INIT;
                                strbuf_printf(&e,
                                              "the agent's worktree %s has a .git that is not its own and cannot be "
                                              "put back (%s); remove %s, then run lazaret again",
                                              path, strerror(-r), path);
                                *ret_error = strbuf_steal(&e);
                                return -ESTALE;
                        }
                        log_info("the worktree's .git named another git directory: put back");
                }
        }
        if (ok)
                return 0;
        StrBuf e = STRBUF_INIT;
        strbuf_printf(&e,
                      "the agent's worktree %s is not one of the repository %s (the repository was replaced or moved "
                      "while lazaret started: a symbolic link in its place); remove %s, then run lazaret again",
                      path, s->git_dir, path);
        *ret_error = strbuf_steal(&e);
        return -ESTALE;
}

int sandbox_prepare_worktree(const LaunchSpec *s, char **ret_path, char **ret_error) {
        _cleanup_free_ char *branch = launch_agent_branch(s), *path = launch_agent_worktree(s), *dotgit = NULL,
                            *ref = NULL;
        if (!branch || !path)
                return -ENOMEM;
        dotgit = path_join(path, ".git");
        StrBuf rb = STRBUF_INIT;
        strbuf_printf(&rb, "refs/heads/%s", branch);
        ref = strbuf_steal(&rb);
        if (!dotgit || !ref)
                return -ENOMEM;

        struct stat st;
        if (lstat(dotgit, &st) == 0) {
                /* A later generation reuses the worktree and its branch. */
                int r = worktree_of_repository(s, path, false, ret_error);
                if (r < 0)
                        return r;
                *ret_path = TAKE_PTR(path);
                return 0;
        }

        /* Agents of one repository starting together (lazaret up) would
         * race in git: a prune takes a worktree another add has registered
         * but not yet locked for its initialization for a stale one, and an
         * add reads the other half-made registrations. Ours are made one at
         * a time, under an advisory lock in the user's runtime directory,
         * which no sandbox reaches (a lock on .git itself could be taken and
         * held by a native sandbox that sees .git read-only). */
        _cleanup_close_ int lock = -EBADF;
        if (s->runtime_dir) {
                _cleanup_free_ char *lock_path = path_join(s->runtime_dir, "worktree.lock");
                if (!lock_path)
                        return -ENOMEM;
                lock = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (lock < 0) {
                        StrBuf e = STRBUF_INIT;
                        strbuf_printf(&e, "cannot open %s: %s", lock_path, strerror(errno));
                        *ret_error = strbuf_steal(&e);
                        return -EIO;
                }
                while (flock(lock, LOCK_EX) < 0)
                        if (errno != EINTR)
                                return negative_errno();
                if (lstat(dotgit, &st) == 0) {
                        /* Made by another start of this agent meanwhile. */
                        int r = worktree_of_repository(s, path, false, ret_error);
                        if (r < 0)
                                return r;
                        *ret_path = TAKE_PTR(path);
                        return 0;
                }
        }

        _cleanup_close_ int repo = -EBADF;
        if (s->workspace_id) {
                int k = open_pinned_dir(s->workspace, s->workspace_id, &repo, NULL);
                if (k < 0) {
                        StrBuf e = STRBUF_INIT;
                        strbuf_printf(&e,
                                      "the repository %s is no longer the directory lazaret checked (%s): it was "
                                      "replaced or moved while lazaret started; nothing was started, run it again",
                                      s->workspace, k == -ESTALE ? "another directory is there now" : strerror(-k));
                        *ret_error = strbuf_steal(&e);
                        return -ESTALE;
                }
        }
        _cleanup_(exec_result_done) ExecResult prune = {}, head = {}, have = {}, add = {};
        /* A worktree directory someone deleted leaves a stale registration. */
        int r = host_git(s, repo, (const char *const[]){ "worktree", "prune", NULL }, &prune);
        if (r < 0)
                return r;
        r = host_git(s, repo, (const char *const[]){ "rev-parse", "--verify", "--quiet", "HEAD^{commit}", NULL },
                     &head);
        if (r < 0)
                return r;
        if (exec_result_failed(&head) && head.err && *head.err) {
                /* Not "no commit": git refused (ownership, corruption). */
                *ret_error = git_error("git rev-parse HEAD", &head);
                return -EIO;
        }
        if (exec_result_failed(&head)) {
                StrBuf e = STRBUF_INIT;
                strbuf_printf(&e,
                              "the repository in %s has no commit yet, so there is nothing to branch the agent from: "
                              "commit once, or set workspace_mode = \"direct\" in [profiles.%s]",
                              s->workspace, s->profile);
                *ret_error = strbuf_steal(&e);
                return -EIO;
        }
        r = host_git(s, repo, (const char *const[]){ "rev-parse", "--verify", "--quiet", ref, NULL }, &have);
        if (r < 0)
                return r;
        if (exec_result_failed(&have))
                r = host_git(s, repo,
                             (const char *const[]){ "worktree", "add", "--quiet", "-b", branch, path, "HEAD", NULL },
                             &add);
        else
                r = host_git(s, repo, (const char *const[]){ "worktree", "add", "--quiet", path, branch, NULL }, &add);
        if (r < 0)
                return r;
        if (exec_result_failed(&add)) {
                *ret_error = git_error("git worktree add", &add);
                return -EIO;
        }
        r = worktree_of_repository(s, path, true, ret_error);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path);
        return 0;
}

int sandbox_worktree_dir(const char *root, const char *rel) {
        if (!path_relative_safe(rel, PATH_MAX))
                return -EINVAL;
        _cleanup_close_ int fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        _cleanup_free_ char *copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        char *save = NULL;
        for (char *name = strtok_r(copy, "/", &save); name; name = strtok_r(NULL, "/", &save)) {
                struct open_how how = {
                        .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
                };
                long next = syscall(SYS_openat2, fd, name, &how, sizeof how);
                if (next < 0 && errno == ENOENT) {
                        /* mkdirat does not follow a symlink in the last name. */
                        if (mkdirat(fd, name, 0755) < 0 && errno != EEXIST)
                                return negative_errno();
                        next = syscall(SYS_openat2, fd, name, &how, sizeof how);
                }
                if (next < 0)
                        return negative_errno();
                safe_close(fd);
                fd = (int) next;
        }
        return 0;
}
