/* SPDX-License-Identifier: MIT */
/* The coordinator's other participants (the table is in
 * docs/ARCHITECTURE.md): the git router, the control socket and the
 * escalation socket as Publications, the State Anchor's lower image and
 * layers, the work files' watch, and the sandbox container. */
#include "coordinator-internal.h"
#include "native-layers.h"

/* The memory limit: over it, the sandbox stops, and every terminal is told
 * why (the sessions end with Lazaret's failure status). */
void co_check_memory(Coordinator *co) {
        uint64_t used = 0, limit = co->spec.memory_limit_mib << 20;
        co->mem_next_check = now_usec() + MEMORY_CHECK_USEC;
        if (co->sb.backend->memory_used(&co->sb, &used) < 0)
                return;
        co->mem_used = used;
        if (limit == 0) /* memory_limit = 0: measured for status, never a stop */
                return;
        /* In a memory cgroup the kernel keeps it under the limit: ending a
         * process there for want of memory is reaching it. */
        uint64_t kills = 0;
        bool killed = co->sb.backend->memory_killed(&co->sb, &kills) == 0 && kills > 0;
        if ((used <= limit && !killed) || co->stopping)
                return;
        if (killed)
                snprintf(co->limit_reason, sizeof(co->limit_reason),
                         "the sandbox reached its memory limit: the kernel ended a process in it that would have held "
                         "more (memory_limit = %" PRIu64 " MiB in the profile)",
                         co->spec.memory_limit_mib);
        else
                snprintf(co->limit_reason, sizeof(co->limit_reason),
                         "the sandbox reached its memory limit (%" PRIu64 " MiB held; memory_limit = %" PRIu64
                         " MiB in the profile)",
                         used >> 20, co->spec.memory_limit_mib);
        log_error("%s", co->limit_reason);
        co->runtime_lost = true;
        co_begin_stop(co, co->limit_reason);
}

/* The persistent directories' changes past disk_limit (issue 44: the
 * kernel's overlay says no ENOSPC of its own). */
static void layers_over(Coordinator *co, uint64_t held) {
        snprintf(co->limit_reason, sizeof(co->limit_reason),
                 "the persistent directories' changes hold %" PRIu64 " MiB, past disk_limit = %" PRIu64
                 " MiB in the profile",
                 held >> 20, co->spec.disk_limit_mib);
}

/* disk_limit for the work files (w: co->disk) or gVisor's layers
 * (co->layer_disk): the helper's figures, or its end. */
void co_disk_readable(Coordinator *co, DiskWatch *w) {
        bool layers = w == &co->layer_disk;
        int k = diskwatch_read(w);
        if (k < 0) {
                w->fd = co_close_watched(co, w->fd);
                if (!co->stopping) {
                        /* Unmeasured, the limit would be a claim only. */
                        log_error("the measure of the %s stopped unexpectedly",
                                  layers ? "persistent directories" : "work files");
                        co->runtime_lost = true;
                        co_begin_stop(co, layers ? "the measure of the persistent directories (disk_limit) stopped "
                                                   "unexpectedly"
                                                 : "the measure of the work files (disk_limit) stopped unexpectedly");
                }
                return;
        }
        uint64_t grown = diskwatch_grown(w), limit = co->spec.disk_limit_mib << 20;
        if (k == 0 || grown <= limit || co->stopping)
                return;
        if (layers) {
                layers_over(co, grown);
                log_error("%s", co->limit_reason);
                co->runtime_lost = true;
                co_begin_stop(co, co->limit_reason);
                return;
        }
        StrBuf b = STRBUF_INIT;
        for (size_t i = 0; co->disk_paths[i]; i++)
                strbuf_printf(&b, "%s%s", i ? ", " : "", co->disk_paths[i]);
        _cleanup_free_ char *paths = strbuf_steal(&b);
        /* The native backend's persistent directories are measured with
         * them (start_disk_watch). */
        bool native_layers =
                co->spec.backend == BACKEND_NATIVE && co->spec.persistent_dirs && co->spec.persistent_dirs[0];
        snprintf(co->limit_reason, sizeof(co->limit_reason),
                 "the work files%s grew by %" PRIu64 " MiB during this run, past disk_limit = %" PRIu64
                 " MiB in the profile (%s)",
                 native_layers ? " and persistent directories" : "", grown >> 20, co->spec.disk_limit_mib,
                 paths ? paths : "?");
        log_error("%s", co->limit_reason);
        co->runtime_lost = true;
        co_begin_stop(co, co->limit_reason);
}

/* The git router is a Participant: recorded before it starts, Committed
 * with its process and mount identity, Clean once it is gone. obj: the
 * RouterRun. */
static int router_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        RouterRun *rr = obj;
        (void) intent;
        const char *wt = co->worktree ? strrchr(co->worktree, '/') : NULL;
        /* Its refusals, for the event record. */
        int p[2];
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return negative_errno();
        (void) fcntl(p[1], F_SETPIPE_SZ, 1024 * 1024);
        int r = router_start(&co->spec, wt ? wt + 1 : NULL, p[1], rr, ret_error);
        safe_close(p[1]);
        if (r < 0) {
                safe_close(p[0]);
                return r;
        }
        co->router_lines.fd = p[0];
        *ret_commit = json_pack("{s:o, s:{s:i}}", "daemon", process_identity_to_json(&rr->ident), "mount", "mount_id",
                                rr->mount_id);
        log_info("%s router %d serving %s on %s", co->spec.branch ? "git" : "workspace", (int) rr->pid,
                 co->spec.branch ? co->spec.git_dir : co->spec.workspace, rr->mountpoint);
        return 0;
}

static int router_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        if (obj) {
                router_stop(&co->spec, obj);
                router_run_done(obj);
                co_lines_drain(co, &co->router_lines); /* its last refusals */
                return 0;
        }
        /* A dead coordinator's: kill it (by pid and start time), then
         * detach the mount it leaves behind. */
        ProcessIdentity pi;
        if (process_identity_from_json(json_object_get(own, "daemon"), &pi) >= 0 && process_identity_alive(&pi))
                (void) kill(pi.pid, SIGKILL);
        const char *mp = json_string_value(json_object_get(own, "mountpoint"));
        /* Where it was mounted: the native backend's router in the host's
         * mount namespace, whatever this coordinator's backend is. */
        LaunchSpec where = co->spec;
        if (json_is_true(json_object_get(own, "host_namespace")))
                where.backend = BACKEND_NATIVE;
        else if (where.backend == BACKEND_NATIVE)
                where.backend = BACKEND_GVISOR;
        if (mp && (where.backend == BACKEND_NATIVE || where.podman))
                fuse_mount_detach(&where, mp);
        return 0;
}

/* One refusal of the git router: on the record as source "git" (the git
 * policy) or "paths" (a protected or masked name of the workspace). */
void co_router_line(Coordinator *co, const char *line, size_t len) {
        json_t *j = json_loadb(line, len, 0, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return;
        }
        json_t *d = json_object_get(j, "dropped");
        if (json_is_integer(d))
                co->router_dropped += (uint64_t) json_integer_value(d);
        co->router_refused++;
        const char *rule = json_string_value(json_object_get(j, "rule"));
        if (rule && streq(rule, "git")) {
                co->git_refused++;
                co_status_touch(co);
        }
        /* Per rule, operation, path and errno: the first few in full, then
         * counted (the agent can be refused as often as it likes). */
        const char *source = rule && streq(rule, "git") ? "git" : "paths";
        json_t *key = json_pack("{s:O?, s:O?, s:O?, s:O?}", "rule", json_object_get(j, "rule"), "op",
                                json_object_get(j, "op"), "path", json_object_get(j, "path"), "errno",
                                json_object_get(j, "errno"));
        bool full = event_limiter_admit(co->limiter, source, "refused", key,
                                        json_is_integer(d) ? (uint64_t) json_integer_value(d) : 0, now_usec());
        json_decref(key);
        if (!full) {
                json_decref(j);
                return;
        }
        event_emit(co->events, source, "refused", NULL, j);
}

const PartKind kind_router = {
        .role = ROLE_GIT_ROUTING,
        .recover_pass = 1, /* after the sandbox that has it mounted */
        .acquire = router_acquire,
        .release = router_release,
};

int start_router(Coordinator *co, char **ret_error) {
        _cleanup_free_ char *mnt = path_join(co->spec.domain_dir, "git-mnt"),
                            *iso = path_join(co->spec.domain_dir, "git-isolated");
        if (!mnt || !iso)
                return -ENOMEM;
        return part_begin(&co->ps, co->generation, &kind_router,
                          json_pack("{s:s, s:s, s:s, s:b}", "mountpoint", mnt, "host_root",
                                    co->spec.branch ? co->spec.git_dir : co->spec.workspace, "isolated_root", iso,
                                    "host_namespace", co->spec.backend == BACKEND_NATIVE),
                          co, &co->router, &co->p_router, ret_error);
}

void stop_router(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_router, co, &co->router);
}

/* ---- host escalation ------------------------------------------------------ */

static int esc_session(void *userdata, const char *session_id, unsigned char ret_anchor[SESSION_KEY_LEN],
                       bool *ret_interactive) {
        Coordinator *co = userdata;
        for (Session *s = co->sessions; s; s = s->next)
                if (streq(s->id, session_id) &&
                    (s->state == SESSION_STATE_OPENING || session_state_running(s->state)) && s->has_anchor) {
                        memcpy(ret_anchor, s->anchor, SESSION_KEY_LEN);
                        *ret_interactive = s->interactive && s->conn;
                        return 0;
                }
        return -ENOENT;
}

static Session *prompt_session(Coordinator *co, const char *session_id) {
        for (Session *s = co->sessions; s; s = s->next)
                if (streq(s->id, session_id) && session_state_live(s->state) && s->interactive && s->conn &&
                    !s->conn->dead)
                        return s;
        return NULL;
}

static int esc_prompt(void *userdata, const EscalationPrompt *p) {
        Coordinator *co = userdata;
        Session *s = prompt_session(co, p->session_id);
        if (!s)
                return -ENOENT;
        CtlMessage m = { .type = CTL_PROMPT_REQUEST,
                         .profile = (char *) p->profile,
                         .command = (char *) p->command,
                         .justification = (char *) p->justification,
                         .queued = p->queued };
        memcpy(m.session_id, s->id, 37);
        memcpy(m.request_id, p->request_id, 37);
        return conn_send(s->conn, &m) < 0 ? -ENOENT : 0;
}

static void esc_prompt_done(void *userdata, const char *session_id, const char *request_id) {
        Coordinator *co = userdata;
        Session *s = prompt_session(co, session_id);
        if (!s)
                return;
        CtlMessage m = { .type = CTL_PROMPT_DONE };
        memcpy(m.session_id, s->id, 37);
        memcpy(m.request_id, request_id, 37);
        (void) conn_send(s->conn, &m);
}

static int job_audit(Store *st, void *userdata) {
        return store_audit_append(st, userdata, NULL);
}

static void job_audit_done(int result, void *userdata) {
        if (result < 0)
                log_error("cannot append to the audit trail: %s", strerror(-result));
        json_decref(userdata);
}

/* Appended on the store thread (an fsync), in order; once the loop has
 * ended (teardown), here. */
static int esc_audit(void *userdata, json_t *record) {
        Coordinator *co = userdata;
        if (!co->worker)
                return store_audit_append(co->store, record, NULL);
        json_incref(record);
        int r = store_worker_submit(co->worker, job_audit, job_audit_done, record);
        if (r < 0)
                json_decref(record);
        return r;
}

static void esc_event(void *userdata, const char *kind, const char *session_id, json_t *data) {
        Coordinator *co = userdata;
        const char *rid = json_string_value(json_object_get(data, "request_id"));
        if (rid && strlen(rid) == 36 && streq(kind, "requested")) {
                if (!co->esc_pending)
                        co->esc_pending = calloc(ESC_PENDING_MAX, sizeof(*co->esc_pending));
                if (co->esc_pending && co->n_esc_pending < ESC_PENDING_MAX)
                        memcpy(co->esc_pending[co->n_esc_pending++], rid, 37);
        } else if (rid && streq(kind, "decided"))
                for (size_t i = 0; i < co->n_esc_pending; i++)
                        if (streq(co->esc_pending[i], rid)) {
                                memcpy(co->esc_pending[i], co->esc_pending[--co->n_esc_pending], 37);
                                break;
                        }
        co_status_touch(co);
        event_emit(co->events, "escalation", kind, session_id, data);
}

/* Publications: the control socket (obj: the coordinator, live) and the
 * escalation socket and certificates (obj: the coordinator, whose
 * Escalation goes). Release works from either ownership. */
static int publication_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        const char *sock = json_string_value(json_object_get(own, "socket_path"));
        if (sock)
                co_unlink_socket(sock);
        const char *state_dir = json_string_value(json_object_get(own, "escalation_state_dir")),
                   *socket_dir = json_string_value(json_object_get(own, "escalation_socket_dir"));
        if (state_dir || socket_dir) {
                if (obj)
                        co->esc = escalation_free(co->esc);
                escalation_remove(state_dir, socket_dir);
        }
        return 0;
}

static int socket_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        (void) obj;
        (void) intent;
        (void) ret_commit;
        (void) ret_error;
        return co_bind_socket(ctx);
}

static int escalation_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        (void) obj;
        (void) intent;
        (void) ret_commit;
        char sandbox_id[128];
        snprintf(sandbox_id, sizeof(sandbox_id), "%s-g%" PRIu64, co->container_name, co->generation);
        EscalationHost host = { .session = esc_session,
                                .audit = esc_audit,
                                .event = esc_event,
                                .prompt = esc_prompt,
                                .prompt_done = esc_prompt_done,
                                .userdata = co };
        int r = escalation_new(&co->spec, sandbox_id, co->worktree ? co->worktree : co->spec.workspace, &host, &co->esc,
                               ret_error);
        if (r < 0)
                return r; /* escalation_new removed what it made */
        log_info("escalation socket %s/escalate.sock (sandbox %s)", escalation_socket_dir(co->esc), sandbox_id);
        return 0;
}

const PartKind kind_publication = { .role = ROLE_PUBLICATION,
                                    .acquire = socket_acquire,
                                    .release = publication_release };
static const PartKind kind_escalation = { .role = ROLE_PUBLICATION,
                                          .acquire = escalation_acquire,
                                          .release = publication_release };

void stop_escalation(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_escalation, co, co);
        co->esc = escalation_free(co->esc);
}

int start_escalation(Coordinator *co, char **ret_error) {
        if (!co->spec.escalation_enabled)
                return 0;
        /* On record before anything is made: a successor removes what a
         * killed coordinator leaves. */
        _cleanup_free_ char *state_dir = NULL, *socket_dir = NULL;
        int r = escalation_paths(&co->spec, &state_dir, &socket_dir);
        if (r < 0)
                return r;
        return part_begin(
                &co->ps, co->generation, &kind_escalation,
                json_pack("{s:s, s:s}", "escalation_state_dir", state_dir, "escalation_socket_dir", socket_dir), co, co,
                &co->p_escalation, ret_error);
}

/* The State Anchor (spec §4.3.3): the image's mount is a PreparedLower
 * participant (Intent with the image id, Committed with its path), each
 * overlay a StateAnchor participant (Intent with its directories, Committed
 * with the daemon and the mount). Layers start after the image mount and
 * stop before it goes. */
/* obj: the StateAnchor. */
static int lower_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        StateAnchor *a = obj;
        (void) intent;
        int r = anchor_lease_image(&co->spec, a, co->generation, ret_error);
        if (r < 0)
                return r;
        *ret_commit = json_pack("{s:s, s:s}", "lease_state", "Held", "path", a->image_mount);
        return 0;
}

/* Our lease on the image's mount in the Storage Catalog, taken or not
 * (release is idempotent); the last lease unmounts it. */
static int lower_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        const char *image = json_string_value(json_object_get(own, "prepared_artifact_id"));
        if (image)
                (void) anchor_release_image(&co->spec, image, generation);
        if (obj) {
                StateAnchor *a = obj;
                a->image_mount = mfree(a->image_mount);
        }
        return 0;
}

/* obj: the AnchorLayer. */
static int layer_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        AnchorLayer *l = obj;
        (void) intent;
        int r = anchor_layer_start(&co->spec, &co->anchor, l, ret_error);
        if (r < 0)
                return r;
        *ret_commit = json_pack("{s:{s:i}, s:s, s:I}", "mount", "mount_id", l->mount_id, "lower_path", l->lower,
                                "layer_size_mib", (json_int_t) l->fs_size_mib);
        r = anchor_record_image(&co->spec, &co->anchor, l);
        if (r > 0)
                log_info("the image under %s changed: its new copy is the lower layer now, the changes in %s "
                         "are kept",
                         l->dir, l->changes);
        else if (r < 0)
                log_warning("cannot record the image of %s: %s", l->dir, strerror(-r));
        log_info("persistent %s: overlay %d on %s (lower %s), changes in %s (at most %" PRIu64 " MiB)", l->dir,
                 l->mount_id, l->merged, l->lower, l->changes, l->fs_size_mib);
        return 0;
}

/* The overlay; a record of an older Lazaret also names its FUSE daemons. */
static int layer_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        if (obj) {
                anchor_layer_stop(&co->spec, obj);
                return 0;
        }
        ProcessIdentity ov, fs;
        bool has_ov = process_identity_from_json(json_object_get(own, "daemon"), &ov) >= 0,
             has_fs = process_identity_from_json(json_object_get(own, "layer_daemon"), &fs) >= 0;
        anchor_layer_recover(&co->spec, has_ov ? &ov : NULL, json_string_value(json_object_get(own, "merged_path")),
                             has_fs ? &fs : NULL, json_string_value(json_object_get(own, "layer_mount")));
        return 0;
}

const PartKind kind_lower = { .role = ROLE_PREPARED_LOWER,
                              .recover_pass = 2, /* after the overlays above it */
                              .acquire = lower_acquire,
                              .release = lower_release };
const PartKind kind_layer = {
        .role = ROLE_STATE_ANCHOR,
        .recover_pass = 1, /* after the sandbox that has it mounted */
        .acquire = layer_acquire,
        .release = layer_release,
};

/* The State Anchor (spec §4.3.3): the image's mount is a PreparedLower
 * participant (Intent with the image id, Committed with its path), each
 * overlay a StateAnchor participant (Intent with its directories, Committed
 * with the daemons and the mount). Layers start after the image mount and
 * stop before it goes. */
void stop_anchor(Coordinator *co) {
        for (size_t i = co->anchor.n_layers; i > 0; i--) {
                AnchorLayer *l = &co->anchor.layers[i - 1];
                (void) part_end(&co->ps, &l->participant, co, l);
        }
        (void) part_end(&co->ps, &co->anchor.p_lower, co, &co->anchor);
}

int start_anchor(Coordinator *co, char **ret_error) {
        StateAnchor *a = &co->anchor;
        /* The native backend keeps its persistent directories itself, in
         * the sandbox's own mount namespace (native-layers.h): no image,
         * no daemon, nothing mounted here. */
        if (co->spec.backend == BACKEND_NATIVE) {
                /* A new layer's first start copies the host's tree of
                 * directories (native-layers.h): the leader waits longer. */
                if (native_layers_new(&co->spec))
                        status_wait(co, 130, "making the persistent directories' new layers");
                return 0;
        }
        int r = anchor_init(&co->spec, a);
        if (r < 0 || a->n_layers == 0)
                return r;
        r = domain_root_check(co->spec.domain_dir, ret_error);
        if (r < 0)
                return r;
        r = anchor_resolve_image(&co->spec, a, ret_error);
        if (r < 0)
                return r;
        r = part_begin(&co->ps, co->generation, &kind_lower,
                       json_pack("{s:s, s:s, s:s, s:n}", "prepared_artifact_id", a->image_id, "source_identity",
                                 co->spec.image, "lease_state", "Acquiring", "path"),
                       co, a, &a->p_lower, ret_error);
        if (r < 0)
                return r;
        /* Changes an older Lazaret kept are moved in once. */
        bool moving = false;
        for (size_t i = 0; i < a->n_layers; i++) {
                struct stat st;
                if (lstat(a->layers[i].changes, &st) < 0 &&
                    (lstat(a->layers[i].image, &st) == 0 || lstat(a->layers[i].legacy_changes, &st) == 0))
                        moving = true;
        }
        if (moving)
                status_wait(co, 600, "moving the persistent directories' changes into their images");
        for (size_t i = 0; i < a->n_layers; i++) {
                AnchorLayer *l = &a->layers[i];
                r = part_begin(&co->ps, co->generation, &kind_layer,
                               json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}", "dir", l->dir, "lower_artifact_id",
                                         a->image_id, "upper_path", l->changes, "work_path", l->work, "merged_path",
                                         l->merged, "mount"),
                               co, l, &l->participant, ret_error);
                if (r < 0)
                        return r; /* start_failed() ends the others */
        }
        if (moving)
                status_wait(co, 10, "starting the sandbox");
        return 0;
}

/* What the sandbox writes on the host outside its layers: the agent's
 * worktree and the repository's git directory in branch mode, the
 * workspace otherwise (with a git directory outside it). */
static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

/* Where the backend's supervisor writes its pid (gVisor's conmon), for
 * the measures' count of files held open; NULL when it has none. */
static int supervisor_pidfile(Coordinator *co, char **ret) {
        co_sandbox_init(co);
        if (!co->sb.backend->supervisor_pidfile)
                return 0;
        *ret = path_join(co->spec.domain_dir, co->sb.backend->supervisor_pidfile);
        return *ret ? 0 : -ENOMEM;
}

int start_disk_watch(Coordinator *co, char **ret_error) {
        /* The native backend's persistent directories have no file system
         * of their own to say ENOSPC: their upper layers are measured with
         * the work files (native-layers.h). */
        char **uppers = co->spec.backend == BACKEND_NATIVE ? native_layers_uppers(&co->spec) : NULL;
        if (co->spec.backend == BACKEND_NATIVE && !uppers)
                return -ENOMEM;
        size_t n_uppers = 0;
        for (char **u = uppers; u && *u; u++)
                n_uppers++;
        const char **v = calloc(3 + n_uppers, sizeof(char *));
        if (!v) {
                strv_free(uppers);
                return -ENOMEM;
        }
        size_t n = 0;
        if (co->worktree) {
                v[n++] = co->worktree;
                if (co->spec.git_dir)
                        v[n++] = co->spec.git_dir;
        } else {
                v[n++] = co->spec.workspace;
                if (co->spec.git_dir && !path_under(co->spec.git_dir, co->spec.workspace))
                        v[n++] = co->spec.git_dir;
        }
        for (size_t i = 0; i < n_uppers; i++)
                v[n++] = uppers[i];
        co->disk_paths = calloc(n + 1, sizeof(char *));
        bool oom = !co->disk_paths;
        for (size_t i = 0; !oom && i < n; i++)
                oom = !(co->disk_paths[i] = strdup(v[i]));
        free(v);
        strv_free(uppers);
        if (oom)
                return -ENOMEM;
        _cleanup_free_ char *pidfile = NULL;
        if (supervisor_pidfile(co, &pidfile) < 0)
                return -ENOMEM;
        int r = diskwatch_start(&co->spec, co->disk_paths, pidfile, co->spec.disk_limit_mib << 20, &co->disk);
        if (r < 0) {
                if (asprintf(ret_error, "cannot start the measure of the work files for disk_limit: %s", strerror(-r)) <
                    0)
                        *ret_error = NULL;
                return r;
        }
        log_info("work files measured by %d: the sandbox stops when they grow by more than %" PRIu64 " MiB",
                 (int) co->disk.pid, co->spec.disk_limit_mib);
        return 0;
}

int start_layer_watch(Coordinator *co, char **ret_error) {
        if (co->anchor.n_layers == 0)
                return 0;
        _cleanup_free_ char *pidfile = NULL;
        if (supervisor_pidfile(co, &pidfile) < 0)
                return -ENOMEM;
        co->layer_paths = calloc(co->anchor.n_layers + 1, sizeof(char *));
        if (!co->layer_paths)
                return -ENOMEM;
        for (size_t i = 0; i < co->anchor.n_layers; i++)
                if (!(co->layer_paths[i] = strdup(co->anchor.layers[i].changes)))
                        return -ENOMEM;
        co->layer_disk.absolute = true;
        int r = diskwatch_start(&co->spec, co->layer_paths, pidfile, co->spec.disk_limit_mib << 20, &co->layer_disk);
        if (r < 0) {
                if (asprintf(ret_error, "cannot start the measure of the persistent directories for disk_limit: %s",
                             strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        log_info("persistent directories measured by %d: the sandbox stops when their changes hold more than %" PRIu64
                 " MiB",
                 (int) co->layer_disk.pid, co->spec.disk_limit_mib);
        return 0;
}

/* The baseline is taken before the sandbox starts: a walk still going on
 * while the agent writes would count into it what the agent wrote in the
 * directories it had not reached yet, and that would escape the limit. The
 * walk runs beside the git router's, the network's and escalation's start; what is left of it
 * is waited for here. */
int wait_disk_base(Coordinator *co, char **ret_error) {
        bool said = false;
        uint64_t start = now_usec();
        DiskWatch *lw = co->layer_disk.fd >= 0 ? &co->layer_disk : NULL;
        while (!co->disk.have_base || (lw && !lw->have_base)) {
                DiskWatch *w = !co->disk.have_base ? &co->disk : lw;
                struct pollfd pfd = { .fd = w->fd, .events = POLLIN };
                int k = poll(&pfd, 1, 1000);
                if (k < 0 && errno != EINTR)
                        return negative_errno();
                if (k > 0 && diskwatch_read(w) < 0) {
                        *ret_error = strdup(w == lw ? "the measure of the persistent directories (disk_limit) ended "
                                                      "before its first walk; see the coordinator log"
                                                    : "the measure of the work files (disk_limit) ended before its "
                                                      "first walk; see the coordinator log");
                        return -EIO;
                }
                if (k == 0 && !said) {
                        status_wait(co, 600, "measuring the work files for disk_limit");
                        said = true;
                }
        }
        if (said)
                status_wait(co, 10, "starting the sandbox");
        log_info("work files: %" PRIu64 " MiB at the start (measured in %" PRIu64 " ms)", co->disk.base >> 20,
                 (now_usec() - start) / 1000);
        if (lw && diskwatch_grown(lw) > co->spec.disk_limit_mib << 20) {
                /* Full already (disk_limit lowered, or the last run
                 * stopped over it): the sandbox would stop at once. */
                StrBuf b = STRBUF_INIT;
                for (size_t i = 0; i < co->anchor.n_layers; i++)
                        strbuf_printf(&b, "%s%s", i ? " " : "", co->anchor.layers[i].dir);
                _cleanup_free_ char *dirs = strbuf_steal(&b);
                if (asprintf(ret_error,
                             "the changes to the persistent directories hold %" PRIu64
                             " MiB, more than disk_limit %" PRIu64
                             " MiB allows; raise disk_limit, or discard them with 'lazaret reset --dir DIR' (%s)",
                             diskwatch_grown(lw) >> 20, co->spec.disk_limit_mib, dirs ? dirs : "?") < 0)
                        *ret_error = NULL;
                return -ENOSPC;
        }
        if (lw)
                log_info("persistent directories: %" PRIu64 " MiB of changes at the start", diskwatch_grown(lw) >> 20);
        return 0;
}

void stop_disk_watch(Coordinator *co) {
        if (co->disk.fd >= 0)
                co->disk.fd = co_close_watched(co, co->disk.fd);
        diskwatch_stop(&co->disk);
        if (co->layer_disk.fd >= 0)
                co->layer_disk.fd = co_close_watched(co, co->layer_disk.fd);
        diskwatch_stop(&co->layer_disk);
}

/* The sandbox, through its backend (sandbox-backend.c): ctx is the
 * coordinator, whose sb carries the backend and this generation's plan. */
void co_sandbox_init(Coordinator *co) {
        co->sb.spec = &co->spec;
        co->sb.backend = sandbox_backend_for(co->spec.backend);
        co->sb.name = co->container_name;
        co->sb.generation = co->generation;
}

static const SandboxHooks sandbox_hooks = {
        .trace_begin = co_trace_begin_hook,
        .trace_attached = co_trace_attached_hook,
        .scan_begin = co_scan_begin_hook,
        .session_started = co_scan_session_hook,
};

/* What the sandbox sees, decided once for this generation: which host
 * directory is /workspace, what guards .git, the doors in. */
/* git's file system monitor (fsmonitor.h), for a backend that wants it and
 * the agent's worktree in branch mode, which only the sandbox writes while
 * it runs. Direct mode goes without: the workspace router hides masked
 * names, and changes to them must not be named inside. Not started, the
 * sessions' git looks at every file, as before: a warning, not an error. */
static void co_fsmonitor_plan(Coordinator *co, MountPlan *p) {
        co->fsmon = fsmonitor_stop(co->fsmon);
        if (!co->sb.backend->fsmonitor || !co->spec.branch || !co->worktree)
                return;
        _cleanup_free_ char *path = fsmonitor_socket_path(co->spec.socket_path);
        if (!path)
                return;
        int r = fsmonitor_start(co->worktree, path, &co->fsmon);
        if (r < 0) {
                log_warning("git's file system monitor cannot start (%s): git status inside looks at every file",
                            strerror(-r));
                return;
        }
        p->fsmonitor_socket = TAKE_PTR(path);
}

int co_mount_plan(Coordinator *co, char **ret_error) {
        MountPlan *p = &co->sb.plan;
        mount_plan_done(p);
        co_sandbox_init(co);
        co->sb.hooks = &sandbox_hooks;
        co->sb.host = co;
        bool routed = co->router.pid > 0;
        if (!co->spec.branch && !routed) {
                *ret_error = strdup("direct mode needs the workspace router, which did not start");
                return -EIO;
        }
        /* Direct mode: the workspace router's mount is the workspace;
         * branch mode: the worktree, with the git router's mount at .git's
         * own path (or, without the router, .git read-only). */
        p->workspace_routed = !co->spec.branch;
        p->workspace = strdup(p->workspace_routed ? co->router.mountpoint
                              : co->worktree      ? co->worktree
                                                  : co->spec.workspace);
        if (co->spec.branch && co->spec.git_dir && routed)
                p->git_source = strdup(co->router.mountpoint);
        p->git_read_only = co->spec.branch && co->spec.git_dir && !routed;
        p->terminfo_dir = strdup(co->terminfo_dir);
        p->ca_bundle = launch_ca_bundle_path(&co->spec);
        if (co->esc) {
                p->certs_dir = strdup(escalation_certs_dir(co->esc));
                p->socket_dir = strdup(escalation_socket_dir(co->esc));
        }
        if (co->p_broker.id)
                p->broker_dir = strdup(co->broker_dir);
        if (co->sidecar.name) {
                p->network_from = strdup(co->sidecar.name);
                p->network_pid = co->sidecar.netd_pid;
                /* The resolvers of the policy in force (as Podman's --dns
                 * writes gVisor's), without reading it again. */
                StrBuf b = STRBUF_INIT;
                strbuf_puts(&b, "# the network policy's resolvers (lazaret)\n");
                for (size_t i = 0; i < co->net.parsed.n_resolvers; i++) {
                        char a[64];
                        netaddr_format(&co->net.parsed.resolvers[i], a, sizeof(a));
                        strbuf_printf(&b, "nameserver %s\n", a);
                }
                p->resolv_conf = strbuf_steal(&b);
        }
        p->anchor = co->anchor.n_layers ? &co->anchor : NULL;
        co_fsmonitor_plan(co, p);
        if (!p->workspace || (co->spec.branch && co->spec.git_dir && routed && !p->git_source) || !p->terminfo_dir ||
            (co->esc && (!p->certs_dir || !p->socket_dir)) || (co->p_broker.id && !p->broker_dir) ||
            (co->sidecar.name && (!p->network_from || !p->resolv_conf)))
                return -ENOMEM;
        return 0;
}

static int sandbox_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        (void) obj;
        (void) intent;
        return sandbox_part_acquire(&co->sb, ret_commit, ret_error);
}

static int sandbox_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) obj;
        (void) generation;
        co_sandbox_init(co);
        return sandbox_part_release(&co->sb, own);
}

const PartKind kind_sandbox = { .role = ROLE_SANDBOX, .acquire = sandbox_acquire, .release = sandbox_release };

/* Pause and resume of the whole sandbox (issue 20): runsc pause stops
 * every task of the sandbox's kernel, resume starts them again. On the slow
 * thread (runsc talks to the sandbox); one at a time; the next StatusLine
 * says how it went. */
#define PAUSE_USEC (UINT64_C(30) * 1000000)

typedef struct PauseJob {
        Coordinator *co;
        bool pause;
        char *runsc;
        Argv argv;
        char error[200];
} PauseJob;

static int run_pause(const char *runsc, char **argv, bool pause, char *error, size_t size) {
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture(runsc, (const char *const *) argv, PAUSE_USEC, &res);
        if (r < 0) {
                snprintf(error, size, "cannot run runsc %s: %s", pause ? "pause" : "resume", strerror(-r));
                return r;
        }
        if (exec_result_failed(&res)) {
                const char *e = res.err && *res.err ? res.err : res.out ? res.out : "";
                snprintf(error, size, "runsc %s failed: %.*s", pause ? "pause" : "resume", (int) strcspn(e, "\n"), e);
                return -EIO;
        }
        return 0;
}

static int job_pause(Store *st, void *userdata) {
        (void) st;
        PauseJob *j = userdata;
        return run_pause(j->runsc, j->argv.v, j->pause, j->error, sizeof(j->error));
}

/* The sandbox's pause state after event (session-state.h); false, the
 * state unchanged, when the table has no such transition. */
static bool pause_transition(Coordinator *co, PauseEvent event) {
        PauseState next = pause_state_next(co->pause, event);
        if (next < 0) {
                log_debug("pause: no transition for %s when %s", pause_event_to_string(event),
                          pause_state_to_string(co->pause));
                return false;
        }
        co->pause = next;
        return true;
}

static void job_pause_done(int result, void *userdata) {
        PauseJob *j = userdata;
        Coordinator *co = j->co;
        (void) pause_transition(co, result >= 0 ? PAUSE_EVENT_DONE : PAUSE_EVENT_FAILED);
        if (result >= 0) {
                co->pause_error[0] = '\0';
                event_emit(co->events, "sandbox", j->pause ? "paused" : "resumed", NULL, NULL);
        } else {
                snprintf(co->pause_error, sizeof(co->pause_error), "%s", j->error);
                log_warning("%s", j->error);
        }
        co_status_touch(co);
        argv_done(&j->argv);
        free(j->runsc);
        free(j);
}

void co_sandbox_pause(Coordinator *co, bool pause) {
        co_status_touch(co);
        PauseEvent ask = pause ? PAUSE_EVENT_PAUSE : PAUSE_EVENT_RESUME;
        /* Not while runsc is at work, nor to where it already is. */
        if (pause_state_next(co->pause, ask) < 0 || co->stopping || !co->slow || !co->sb.state)
                return;
        PauseJob *j = calloc(1, sizeof(*j));
        if (!j)
                return;
        j->co = co;
        j->pause = pause;
        /* The backend's argument vector, run on the slow thread; a backend
         * without a freezer says why (-EOPNOTSUPP). */
        int r = co->sb.backend->pause_argv(&co->sb, pause, &j->argv, co->pause_error, sizeof(co->pause_error));
        if (r == -EOPNOTSUPP) {
                free(j);
                return;
        }
        j->runsc = strdup(co->sb.backend->session_program(&co->sb));
        if (r < 0 || !j->runsc || store_worker_submit(co->slow, job_pause, job_pause_done, j) < 0) {
                argv_done(&j->argv);
                free(j->runsc);
                free(j);
                return;
        }
        (void) pause_transition(co, ask);
}

/* At teardown: a paused sandbox is resumed first, so that it can stop. */
void co_sandbox_unpause(Coordinator *co) {
        if (!pause_state_paused(co->pause))
                return;
        Argv a = {};
        char error[200];
        if (co->sb.backend->pause_argv(&co->sb, false, &a, error, sizeof(error)) >= 0 &&
            run_pause(co->sb.backend->session_program(&co->sb), a.v, false, error, sizeof(error)) < 0)
                log_warning("%s", error);
        argv_done(&a);
        (void) pause_transition(co, PAUSE_EVENT_TEARDOWN);
}
