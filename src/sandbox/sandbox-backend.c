/* SPDX-License-Identifier: MIT */
/* The table of sandbox backends, the mount plan's record, and the sandbox
 * participant's two halves over any backend (sandbox-backend.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "sandbox-backend.h"
#include "string-util.h"

/* A third backend: one file of ops and one line here. */
static const SandboxBackend *const backends[] = {
        [BACKEND_GVISOR] = &sandbox_backend_gvisor,
        [BACKEND_NATIVE] = &sandbox_backend_native,
};

const SandboxBackend *sandbox_backend_for(Backend b) {
        if ((size_t) b >= ELEMENTSOF(backends))
                return NULL;
        return backends[b];
}

const SandboxBackend *sandbox_backend_by_name(const char *name) {
        for (size_t i = 0; name && i < ELEMENTSOF(backends); i++)
                if (backends[i] && streq(backends[i]->name, name))
                        return backends[i];
        return NULL;
}

void mount_plan_done(MountPlan *p) {
        free(p->workspace);
        free(p->git_source);
        free(p->terminfo_dir);
        free(p->ca_bundle);
        free(p->certs_dir);
        free(p->socket_dir);
        free(p->broker_dir);
        free(p->network_from);
        free(p->resolv_conf);
        free(p->fsmonitor_socket);
        *p = (MountPlan){};
}

json_t *mount_plan_to_json(const MountPlan *p) {
        json_t *dirs = json_array();
        for (size_t i = 0; dirs && p->anchor && i < p->anchor->n_layers; i++)
                if (json_array_append_new(dirs, json_string(p->anchor->layers[i].dir)) < 0) {
                        json_decref(dirs);
                        return NULL;
                }
        return json_pack("{s:s?, s:b, s:s?, s:b, s:s?, s:s?, s:b, s:b, s:s?, s:o*, s:b}", "workspace", p->workspace,
                         "workspace_routed", p->workspace_routed, "git_source", p->git_source, "git_read_only",
                         p->git_read_only, "terminfo_dir", p->terminfo_dir, "ca_bundle", p->ca_bundle, "escalation",
                         p->certs_dir && p->socket_dir, "names", p->broker_dir != NULL, "network_from", p->network_from,
                         "persistent_dirs", dirs, "fsmonitor", p->fsmonitor_socket != NULL);
}

json_t *sandbox_part_intent(const Sandbox *sb, json_t *host_coordinator) {
        json_t *plan = mount_plan_to_json(&sb->plan);
        if (!plan) {
                json_decref(host_coordinator);
                return NULL;
        }
        return json_pack("{s:s, s:n, s:o, s:s, s:o}", "container_name", sb->name, "container_id", "host_coordinator",
                         host_coordinator, "backend", sb->backend->name, "plan", plan);
}

int sandbox_part_acquire(Sandbox *sb, json_t **ret_commit, char **ret_error) {
        int r = sb->backend->start(sb, ret_commit, ret_error);
        if (r < 0 && sb->state) {
                /* A start that failed leaves nothing: the backend's word,
                 * kept here too. */
                log_error("the %s backend's failed start left its state", sb->backend->name);
                sandbox_done(sb);
        }
        return r;
}

int sandbox_part_release(Sandbox *sb, json_t *own) {
        /* The record says which backend made it: a recovery runs the
         * backend of the dead coordinator's start, whatever this one's. */
        const char *name = json_string_value(json_object_get(own, "backend"));
        const SandboxBackend *b = !name                                           ? &sandbox_backend_gvisor
                                  : sb->backend && streq(sb->backend->name, name) ? sb->backend
                                                                                  : sandbox_backend_by_name(name);
        if (!b) {
                log_error("a sandbox record names an unknown backend '%s'", name);
                return -EINVAL;
        }
        if (b == sb->backend)
                return b->release(sb, own);
        /* Not this coordinator's backend: only what the record says. */
        Sandbox other = { .backend = b, .spec = sb->spec, .name = sb->name, .generation = sb->generation };
        return b->release(&other, own);
}

void sandbox_done(Sandbox *sb) {
        if (sb->state)
                sb->backend->done(sb);
        sb->state = NULL;
        sb->id = mfree(sb->id);
        sb->supervisor = 0;
}
