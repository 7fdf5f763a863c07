/* SPDX-License-Identifier: MIT */
/* lazaret status [PROFILE] [--json], lazaret stop [PROFILE] */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "coordinator.h"
#include "exec-util.h"
#include "config.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "path-pattern.h"
#include "path-util.h"
#include "persist.h"
#include "profile-pick.h"
#include "prompt-text.h"
#include "runtime-dir.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "sidecar.h"
#include "string-util.h"
#include "verbs.h"

/* The profile's persistent directories and the image each layer was last
 * used with (from <name>_image in the Domain Root; null before the first
 * start). */
/* The implicit rules: the host's own addresses, each denied whatever the
 * policy says (or a configured resolver, permitted as configured). */
static void print_host_addresses(json_t *a) {
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e) {
                const char *addr = json_string_value(json_object_get(e, "address")) ?: "?";
                const char *effect = json_string_value(json_object_get(e, "effect")) ?: "?";
                bool v6 = strchr(addr, ':');
                if (streq(effect, "implicit_deny"))
                        printf("  implicit    deny %s/%d (an address of the host)\n", addr, v6 ? 128 : 32);
                else if (streq(effect, "policy_denies"))
                        printf("  implicit    %s: an address of the host, denied by the policy already\n", addr);
                else
                        printf("  implicit    %s: an address of the host and a configured resolver, permitted as "
                               "configured\n",
                               addr);
        }
}

static json_t *persistent_info(const ConfigProfile *p) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < p->n_persistent_dirs; i++) {
                _cleanup_free_ char *name = persist_dir_name(p->persistent_dirs[i]);
                char *leaf = NULL, *chg = NULL;
                if (!name || asprintf(&leaf, "%s_image", name) < 0 || asprintf(&chg, "%s_layer/upper", name) < 0) {
                        free(leaf);
                        json_decref(a);
                        return NULL;
                }
                _cleanup_free_ char *path = path_join(p->domain_dir, leaf), *changes = path_join(p->domain_dir, chg);
                free(leaf);
                free(chg);
                _cleanup_free_ char *text = NULL;
                json_t *was =
                        path && read_file_capped(path, 64 * 1024, &text, NULL) == 0 ? json_loads(text, 0, NULL) : NULL;
                /* The changes are the overlay's upper directory (issue 44);
                 * what they may hold, all persistent directories together,
                 * is disk_limit (the coordinator measures them; a running
                 * sandbox's status says how much they hold). The native
                 * backend's layer (sandbox/native-layers.h: <name>_native),
                 * when it has one. */
                _cleanup_free_ char *nleaf = NULL, *native = NULL;
                struct stat nst;
                if (asprintf(&nleaf, "%s_native", name) < 0)
                        nleaf = NULL;
                native = nleaf ? path_join(p->domain_dir, nleaf) : NULL;
                if (native && (lstat(native, &nst) < 0 || !S_ISDIR(nst.st_mode)))
                        native = mfree(native);
                json_t *e = json_pack("{s:s, s:s?, s:s?, s:O?, s:O?, s:O?, s:O?, s:I}", "dir", p->persistent_dirs[i],
                                      "native_layer", native, "changes", changes, "image",
                                      json_object_get(was, "image"), "image_id", json_object_get(was, "image_id"),
                                      "previous_image_id", json_object_get(was, "previous_image_id"), "updated",
                                      json_object_get(was, "updated"), "size_mib", (json_int_t) p->disk_limit_mib);
                json_decref(was);
                if (!e || json_array_append_new(a, e) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

/* The names in the workspace that a direct-mode sandbox sees masked: a
 * walk of the host's tree (no symlink followed, a masked directory listed
 * without what is beneath it) within a budget. The router masks by name at
 * every access, so this list is for the person; it is not what enforces. */
#define MASK_WALK_ENTRIES 100000
#define MASK_WALK_DEPTH   64

typedef struct MaskWalk {
        const char **patterns;
        size_t n_patterns;
        json_t *found;
        size_t seen;
        bool cut;
} MaskWalk;

static void mask_walk(MaskWalk *w, int dfd, char *rel, size_t len, unsigned depth) {
        if (depth > MASK_WALK_DEPTH) {
                w->cut = true;
                return;
        }
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                safe_close(fd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (++w->seen > MASK_WALK_ENTRIES) {
                        w->cut = true;
                        break;
                }
                size_t n = strlen(de->d_name);
                if (len + n + 2 > PATH_MAX)
                        continue;
                size_t at = len;
                if (len)
                        rel[at++] = '/';
                memcpy(rel + at, de->d_name, n + 1);
                if (depth == 0 && streq(de->d_name, ".git"))
                        ; /* the repository's own: the git router's business */
                else if (path_pattern_match_any(rel, w->patterns, w->n_patterns))
                        json_array_append_new(w->found, json_string(rel));
                else if (de->d_type == DT_DIR) {
                        int cfd = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (cfd >= 0) {
                                mask_walk(w, cfd, rel, at + n, depth + 1);
                                safe_close(cfd);
                        }
                }
                rel[len] = '\0';
        }
        closedir(d);
}

/* Adds "masked" (sorted) and "masked_complete" to guard. */
static void add_masked(json_t *guard, const char *workspace) {
        json_t *pats = json_object_get(guard, "mask_patterns");
        size_t n = json_array_size(pats);
        if (!workspace || n == 0)
                return;
        _cleanup_free_ const char **v = calloc(n, sizeof(char *));
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                v[i] = json_string_value(json_array_get(pats, i)) ?: "";
        MaskWalk w = { .patterns = v, .n_patterns = n, .found = json_array() };
        _cleanup_close_ int fd = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        char rel[PATH_MAX] = "";
        if (fd >= 0 && w.found)
                mask_walk(&w, fd, rel, 0, 0);
        /* Sorted, so the list reads the same each time. */
        size_t k = json_array_size(w.found);
        for (size_t i = 1; i < k; i++)
                for (size_t j = i; j > 0 && strcmp(json_string_value(json_array_get(w.found, j - 1)),
                                                   json_string_value(json_array_get(w.found, j))) > 0;
                     j--) {
                        json_t *a = json_incref(json_array_get(w.found, j - 1));
                        json_array_set(w.found, j - 1, json_array_get(w.found, j));
                        json_array_set_new(w.found, j, a);
                }
        json_object_set_new(guard, "masked", w.found);
        json_object_set_new(guard, "masked_complete", json_boolean(!w.cut));
}

static void print_persistent(json_t *a) {
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e) {
                const char *id = json_string_value(json_object_get(e, "image_id"));
                const char *prev = json_string_value(json_object_get(e, "previous_image_id"));
                const char *native = json_string_value(json_object_get(e, "native_layer"));
                printf("  persistent  %s  ", json_string_value(json_object_get(e, "dir")));
                if (native)
                        printf("native backend's layer %s%s", native, id ? "; gVisor's: " : "\n");
                if (!id) {
                        if (!native)
                                printf("not used yet\n");
                        continue;
                }
                printf("image %.12s (%s)", id, json_string_value(json_object_get(e, "image")) ?: "?");
                if (prev)
                        printf(", was %.12s", prev);
                printf(", since %s", json_string_value(json_object_get(e, "updated")) ?: "?");
                if (json_is_integer(json_object_get(e, "size_mib")))
                        printf("; changes at most %lld MiB (disk_limit, all persistent directories together)",
                               (long long) json_integer_value(json_object_get(e, "size_mib")));
                printf("\n");
        }
}

/* The control socket of PROFILE's domain for the workspace, or of the only
 * profile. */
typedef struct DomainRef {
        char *socket, *profile, *domain_dir, *domain_hash;
} DomainRef;

static void domain_ref_done(DomainRef *d) {
        free(d->socket);
        free(d->profile);
        free(d->domain_dir);
        free(d->domain_hash);
        *d = (DomainRef){};
}

static int domain_socket(const Globals *g, const char *name, DomainRef *ret, json_t **ret_persistent) {
        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        int pr = profile_load(g, name, &cfg, &p);
        if (pr < 0)
                return pr;
        RuntimePaths rp = {};
        _cleanup_free_ char *why = NULL;
        int r = runtime_paths(p->domain_hash, &rp, &why);
        if (r < 0) {
                if (why)
                        log_error("%s", why);
                else
                        log_error("cannot use the runtime directory: %s", strerror(-r));
                return -EINVAL;
        }
        ret->socket = TAKE_PTR(rp.socket);
        ret->profile = strdup(p->name);
        ret->domain_dir = strdup(p->domain_dir);
        ret->domain_hash = strdup(p->domain_hash);
        runtime_paths_done(&rp);
        if (ret_persistent && !(*ret_persistent = persistent_info(p)))
                return -ENOMEM;
        return ret->profile && ret->domain_dir && ret->domain_hash ? 0 : -ENOMEM;
}

/* No coordinator answers: the containers Podman still holds for this
 * Domain (its label), which a coordinator that died left (issue 16). */
static json_t *leftover_containers(const char *domain_hash) {
        const char *search = getenv("PATH");
        _cleanup_free_ char *podman = NULL, *label = NULL;
        json_t *names = json_array();
        if (!names || exec_find_program(search && *search ? search : DEFAULT_SEARCH_PATH, "podman", &podman) < 0 ||
            asprintf(&label, "label=io.lazaret.domain=%s", domain_hash) < 0)
                return names;
        _cleanup_(exec_result_done) ExecResult res = {};
        const char *argv[] = { "podman", "ps", "--all", "--filter", label, "--format", "{{.Names}}", NULL };
        if (exec_capture(podman, argv, UINT64_C(30) * 1000000, &res) < 0 || exec_result_failed(&res) || !res.out)
                return names;
        for (char *line = res.out, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                if (*line)
                        json_array_append_new(names, json_string(line));
        }
        return names;
}

/* 'lazaret stop' when no coordinator answers: a watchdog run now removes
 * what the Domain Store records of a dead coordinator. Returns its exit
 * status (0: nothing was left), or -errno. */
static int remove_leftovers(const char *domain_dir) {
        _cleanup_free_ char *spec = path_join(domain_dir, WATCHDOG_SPEC_FILE),
                            *logp = path_join(domain_dir, "coordinator.log");
        if (!spec || !logp)
                return -ENOMEM;
        _cleanup_close_ int sfd = open(spec, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (sfd < 0)
                return errno == ENOENT ? 0 : negative_errno(); /* never started here */
        _cleanup_close_ int lfd = open(logp, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (lfd < 0)
                return negative_errno();
        SpawnFd fds[] = { { lfd, 1 }, { lfd, 2 }, { sfd, COORDINATOR_SPEC_FD } };
        SpawnSpec sp = SPAWN_SPEC_INIT(
                "/proc/self/exe", (char *const[]){ (char *) "lazaret", (char *) "__watchdog", (char *) "--now", NULL });
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        pid_t pid;
        int r = spawn(&sp, &pid);
        if (r < 0)
                return r;
        return spawn_wait(pid);
}

static int ask(int fd, const char *sock, CtlMessage *req, CtlMessage *ret) {
        CtlReader rd = {};
        CtlMessage hello = { .type = CTL_HELLO, .version = CTL_PROTOCOL_VERSION, .cli_pid = (int) getpid() };
        _cleanup_free_ char *why = NULL;
        int r = client_send_hello(fd, sock, &hello, &why);
        if (why)
                log_error("%s", why);
        if (r >= 0)
                r = client_send(fd, req);
        if (r >= 0 && ret)
                r = client_recv(fd, &rd, ret, 10000);
        ctl_reader_done(&rd);
        return r;
}

int verb_status(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                {},
        };
        bool json = false;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret status [PROFILE] [--json] [--workspace DIR]\n\n"
                               "Show the sandbox of PROFILE for the workspace: generation, sessions, uptime.\n");
                        return 0;
                case 'j':
                        json = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        const char *name = NULL;
        if (profile_operand(argc, argv, optind, "status", &name) < 0)
                return EXIT_USAGE;
        _cleanup_(domain_ref_done) DomainRef d = {};
        json_t *persistent = NULL;
        int r = domain_socket(g, name, &d, &persistent);
        const char *sock = d.socket, *profile = d.profile;
        if (r < 0) {
                json_decref(persistent);
                return profile_load_exit(r);
        }
        _cleanup_close_ int fd = -EBADF;
        CtlMessage reply = {};
        CtlMessage req = { .type = CTL_STATUS_REQUEST };
        if (client_connect(sock, &fd) < 0 || ask(fd, sock, &req, &reply) < 0 || reply.type != CTL_STATUS) {
                ctl_message_done(&reply);
                json_t *left = leftover_containers(d.domain_hash);
                if (json) {
                        json_t *j = json_pack("{s:b, s:s}", "running", 0, "profile", profile);
                        if (j && json_array_size(left))
                                json_object_set(j, "left_by_a_dead_coordinator", left);
                        if (j && json_array_size(persistent))
                                json_object_set(j, "persistent", persistent);
                        char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
                        if (text)
                                puts(text);
                        free(text);
                        json_decref(j);
                } else if (json_array_size(left)) {
                        printf("%s: not running, but a coordinator that died left", profile);
                        size_t k;
                        json_t *e;
                        json_array_foreach(left, k, e) printf("%s %s", k ? "," : "", json_string_value(e));
                        printf("; its watchdog removes them, or 'lazaret stop'\n");
                        print_persistent(persistent);
                } else {
                        printf("%s: not running\n", profile);
                        print_persistent(persistent);
                }
                json_decref(left);
                json_decref(persistent);
                return 0;
        }
        if (json_array_size(persistent))
                json_object_set(reply.status, "persistent", persistent);
        json_t *guard = json_object_get(reply.status, "workspace_guard");
        if (json_is_object(guard))
                add_masked(guard, json_string_value(json_object_get(reply.status, "workspace")));
        if (json) {
                char *s = json_dumps(reply.status, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                if (s)
                        puts(s);
                free(s);
        } else {
                json_t *st = reply.status, *sb = json_object_get(st, "sandbox");
                const char *agent = json_string_value(json_object_get(st, "agent"));
                printf("%s%s%s: running\n", json_string_value(json_object_get(st, "profile")), agent ? ", agent " : "",
                       agent ? agent : "");
                printf("  workspace   %s\n", json_string_value(json_object_get(st, "workspace")));
                printf("  domain      %s\n", json_string_value(json_object_get(st, "domain_hash")));
                printf("  generation  %lld\n", (long long) json_integer_value(json_object_get(st, "generation")));
                if (json_string_value(json_object_get(sb, "boundary")))
                        printf("  sandbox     %s (native: %s)\n", json_string_value(json_object_get(sb, "name")),
                               json_string_value(json_object_get(sb, "boundary")));
                else
                        printf("  sandbox     %s (%s)\n", json_string_value(json_object_get(sb, "name")),
                               json_string_value(json_object_get(sb, "image")));
                if (json_string_value(json_object_get(sb, "git")))
                        printf("  .git        %s\n", json_string_value(json_object_get(sb, "git")));
                json_t *net = json_object_get(st, "network");
                const char *side = json_string_value(json_object_get(net, "sidecar"));
                bool fs_only = streq_ptr(json_string_value(json_object_get(sb, "mode")), "fs-only");
                bool own_ns = streq_ptr(json_string_value(json_object_get(net, "sidecar_kind")), "namespace");
                printf("  network     %s%s, policy %.12s%s\n",
                       side      ? side
                       : fs_only ? "none (FS-ONLY: no IP sockets, no connect(2))"
                                 : "loopback only",
                       side && own_ns ? (json_is_true(json_object_get(net, "kept_from_earlier_run"))
                                                 ? " (netd in a namespace of its own, no container; kept from an "
                                                   "earlier run)"
                                                 : " (netd in a namespace of its own, no container)")
                                      : "",
                       json_string_value(json_object_get(net, "policy_digest")) ?: "?",
                       json_is_true(json_object_get(net, "update_in_progress")) ? " (being applied)" : "");
                const char *net_by = json_string_value(json_object_get(sb, "network_enforced_by"));
                if (net_by)
                        printf("  net held by %s\n", net_by);
                const char *rules = json_string_value(json_object_get(net, "address_rules"));
                if (rules)
                        printf("  addresses   %s\n",
                               streq(rules, "own") ? "the profile's own rules (allow_egress, network.default_deny); "
                                                     "network.default_allow does not reach it"
                                                   : "the global rules (network.default_allow, network.default_deny), "
                                                     "with the profile's allow_egress");
                print_host_addresses(json_object_get(net, "host_addresses"));
                json_t *eg = json_object_get(net, "egress_by_name");
                if (eg)
                        printf("  names       %zu rule%s through the broker (%s): %lld allowed, %lld refused\n",
                               json_array_size(json_object_get(eg, "rules")),
                               json_array_size(json_object_get(eg, "rules")) == 1 ? "" : "s",
                               json_string_value(json_object_get(eg, "broker")) ?: "?",
                               (long long) json_integer_value(json_object_get(eg, "allowed")),
                               (long long) json_integer_value(json_object_get(eg, "refused")));
                json_t *ev = json_object_get(st, "events");
                if (json_is_true(json_object_get(ev, "recorded")))
                        printf("  events      %lld written, %lld dropped ('lazaret events')\n",
                               (long long) json_integer_value(json_object_get(ev, "written")),
                               (long long) json_integer_value(json_object_get(ev, "dropped")));
                else if (ev)
                        printf("  events      NOT RECORDED: %s\n",
                               json_string_value(json_object_get(ev, "why")) ?: "?");
                json_t *pr = json_object_get(ev, "processes");
                if (json_is_true(json_object_get(pr, "observed")) && json_object_get(pr, "over_limit"))
                        printf("  processes   observed (a scan of /proc, 50 ms to 2 s apart: shorter ones may be "
                               "missed): %lld started, %lld recorded, %lld over the rate\n",
                               (long long) json_integer_value(json_object_get(pr, "execs")),
                               (long long) json_integer_value(json_object_get(pr, "recorded")),
                               (long long) json_integer_value(json_object_get(pr, "over_rate")));
                else if (json_is_true(json_object_get(pr, "observed")))
                        printf("  processes   observed (gVisor's trace points): %lld started, %lld recorded, %lld over "
                               "the rate, %lld dropped by gVisor\n",
                               (long long) json_integer_value(json_object_get(pr, "execs")),
                               (long long) json_integer_value(json_object_get(pr, "recorded")),
                               (long long) json_integer_value(json_object_get(pr, "over_rate")),
                               (long long) json_integer_value(json_object_get(pr, "dropped_by_gvisor")));
                else if (pr)
                        printf("  processes   NOT OBSERVED: %s\n",
                               json_string_value(json_object_get(pr, "why")) ?: "?");
                json_t *lim = json_object_get(st, "limits"), *lp = json_object_get(lim, "pids"),
                       *lm = json_object_get(lim, "memory");
                if (lp && json_is_false(json_object_get(lp, "enforced")))
                        printf("  pids        %lld tasks, NOT ENFORCED: %s\n",
                               (long long) json_integer_value(json_object_get(lp, "limit")),
                               json_string_value(json_object_get(lp, "enforced_by")));
                else if (lp)
                        printf("  pids        at most %lld tasks: %s\n",
                               (long long) json_integer_value(json_object_get(lp, "limit")),
                               json_string_value(json_object_get(lp, "enforced_by")));
                json_t *lc = json_object_get(lim, "cpu"), *ld = json_object_get(lim, "disk");
                if (ld)
                        printf("  disk        %lld MiB: %s\n",
                               (long long) json_integer_value(json_object_get(ld, "limit_mib")),
                               json_string_value(json_object_get(ld, "enforced_by")));
                json_t *wf = json_object_get(ld, "work_files");
                if (wf && json_is_true(json_object_get(wf, "enforced"))) {
                        printf("  work files  ");
                        if (json_is_integer(json_object_get(wf, "grown_mib")))
                                printf("grew by %lld MiB",
                                       (long long) json_integer_value(json_object_get(wf, "grown_mib")));
                        else
                                printf("being measured");
                        size_t k;
                        json_t *e;
                        json_array_foreach(json_object_get(wf, "paths"), k, e)
                                printf("%s%s", k ? ", " : " in ", json_string_value(e));
                        printf("\n");
                } else if (wf)
                        printf("  work files  NOT ENFORCED: %s\n",
                               json_string_value(json_object_get(wf, "enforced_by")));
                if (lc && json_is_true(json_object_get(lc, "enforced")))
                        printf("  cpu         CPUs %s at nice %lld: %s\n",
                               json_string_value(json_object_get(lc, "cpus")),
                               (long long) json_integer_value(json_object_get(lc, "nice")),
                               json_string_value(json_object_get(lc, "enforced_by")));
                else if (lc)
                        printf("  cpu         NOT ENFORCED: %s\n",
                               json_string_value(json_object_get(lc, "enforced_by")));
                if (lm && json_is_true(json_object_get(lm, "enforced")))
                        printf("  memory      %lld of %lld MiB: %s\n",
                               (long long) json_integer_value(json_object_get(lm, "used_mib")),
                               (long long) json_integer_value(json_object_get(lm, "limit_mib")),
                               json_string_value(json_object_get(lm, "enforced_by")));
                else if (lm && json_integer_value(json_object_get(lm, "limit_mib")) == 0)
                        printf("  memory      %lld MiB held, no limit: %s\n",
                               (long long) json_integer_value(json_object_get(lm, "used_mib")),
                               json_string_value(json_object_get(lm, "enforced_by")));
                else if (lm)
                        printf("  memory      %lld MiB, NOT ENFORCED: %s\n",
                               (long long) json_integer_value(json_object_get(lm, "limit_mib")),
                               json_string_value(json_object_get(lm, "enforced_by")));
                print_persistent(persistent);
                if (json_is_array(json_object_get(guard, "masked"))) {
                        json_t *m = json_object_get(guard, "masked"), *e;
                        size_t k;
                        printf("  masked      ");
                        if (json_array_size(m) == 0)
                                printf("nothing in the workspace matches");
                        json_array_foreach(m, k, e) {
                                /* Names from the workspace: shown inertly. */
                                _cleanup_free_ char *vis =
                                        prompt_visible(json_string_value(e), strlen(json_string_value(e)));
                                printf("%s%s", k ? ", " : "", vis ?: "?");
                        }
                        printf("%s\n", json_is_true(json_object_get(guard, "masked_complete"))
                                               ? ""
                                               : " (the listing stopped at its budget; every match is masked all "
                                                 "the same)");
                } else if (guard)
                        printf("  workspace   branch mode: the agent's own worktree\n");
                printf("  uptime      %llds\n", (long long) json_integer_value(json_object_get(st, "uptime_seconds")));
                json_t *ss = json_object_get(st, "sessions");
                printf("  sessions    %zu\n", json_array_size(ss));
                size_t i;
                json_t *s;
                json_array_foreach(ss, i, s)
                        printf("    %s  %s, %llds\n", json_string_value(json_object_get(s, "session_id")),
                               json_is_true(json_object_get(s, "interactive")) ? "terminal" : "pipes",
                               (long long) json_integer_value(json_object_get(s, "age_seconds")));
        }
        ctl_message_done(&reply);
        json_decref(persistent);
        return 0;
}

int verb_stop(int argc, char **argv, const Globals *g) {
        if (argc > 1 && (streq(argv[1], "-h") || streq(argv[1], "--help"))) {
                printf("Usage: lazaret stop [PROFILE] [--workspace DIR]\n\n"
                       "End every session of the sandbox (each terminal is told why) and tear it down.\n");
                return 0;
        }
        const char *name = NULL;
        if (profile_operand(argc, argv, 1, "stop", &name) < 0)
                return EXIT_USAGE;
        _cleanup_(domain_ref_done) DomainRef d = {};
        int dr = domain_socket(g, name, &d, NULL);
        const char *profile = d.profile;
        if (dr < 0)
                return profile_load_exit(dr);
        _cleanup_close_ int fd = -EBADF;
        if (client_connect(d.socket, &fd) < 0) {
                /* No coordinator answers: one may have died and left its
                 * sandbox (issue 16); the store says what. */
                int r = remove_leftovers(d.domain_dir);
                /* The native backend's network namespace, kept after the
                 * last run for the next (issue 45), ends too. */
                int k = r == 0 ? sidecar_end_kept(d.domain_dir) : 0;
                if (k < 0)
                        log_warning("cannot end the network namespace kept for the next run: %s", strerror(-k));
                if (r == 0)
                        printf("%s: not running%s\n", profile,
                               k > 0 ? " (the network namespace kept for the next run has ended)" : "");
                else if (r == WATCHDOG_EXIT_BUSY) {
                        log_error("the sandbox of profile '%s' is starting or stopping (a coordinator holds its "
                                  "domain store, but does not answer yet); try again",
                                  profile);
                        return EXIT_LAZARET;
                } else if (r == WATCHDOG_EXIT_REMOVED)
                        printf("%s: stopped what a coordinator that died left (see %s/coordinator.log)\n", profile,
                               d.domain_dir);
                else {
                        log_error("cannot remove what a coordinator that died left: %s; see %s/coordinator.log",
                                  r < 0 ? strerror(-r) : "its watchdog failed", d.domain_dir);
                        return EXIT_LAZARET;
                }
                return 0;
        }
        CtlMessage req = { .type = CTL_STOP_REQUEST, .message = (char *) "lazaret stop" };
        if (ask(fd, d.socket, &req, NULL) < 0) {
                log_error("cannot reach the coordinator");
                return EXIT_LAZARET;
        }
        /* Wait until the coordinator has closed: teardown is then done. */
        char buf[4096];
        while (read(fd, buf, sizeof(buf)) > 0)
                ;
        printf("%s: stopped\n", profile);
        return 0;
}
