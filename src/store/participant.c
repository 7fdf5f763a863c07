/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "participant.h"

static int st_add(void *u, uint64_t generation, ParticipantRole role, json_t *own, uint64_t *ret_id) {
        return store_participant_add(u, generation, role, own, ret_id);
}

static int st_set_state(void *u, uint64_t id, ParticipantState state, json_t *own) {
        return store_participant_set_state(u, id, state, own);
}

static int st_update(void *u, uint64_t id, json_t *own) {
        return store_participant_update(u, id, own);
}

static int st_get(void *u, uint64_t id, json_t **ret) {
        return store_participant_get(u, id, ret);
}

static int st_list_unclean(void *u, json_t **ret) {
        return store_list_unclean(u, ret);
}

PartStore part_store_of(Store *s) {
        return (PartStore){ .userdata = s,
                            .add = st_add,
                            .set_state = st_set_state,
                            .update = st_update,
                            .get = st_get,
                            .list_unclean = st_list_unclean };
}

/* ReleaseIntent, release(own), Clean when nothing is left. own borrowed. */
static int end_record(const PartStore *ps, const PartKind *k, uint64_t id, uint64_t generation, json_t *own, void *ctx,
                      void *obj) {
        const char *role = participant_role_to_string(k->role);
        int r = ps->set_state(ps->userdata, id, PARTICIPANT_RELEASE_INTENT, NULL);
        if (r < 0)
                log_warning("store: participant %" PRIu64 " (%s) -> ReleaseIntent: %s", id, role, strerror(-r));
        int q = k->release(ctx, obj, own, generation);
        if (q < 0) {
                log_warning("participant %" PRIu64 " (%s) is not released: %s; it stays recorded for the next "
                            "recovery",
                            id, role, strerror(-q));
                return q;
        }
        r = ps->set_state(ps->userdata, id, PARTICIPANT_CLEAN, NULL);
        if (r < 0)
                log_warning("store: participant %" PRIu64 " (%s) -> Clean: %s", id, role, strerror(-r));
        return 0;
}

int part_begin(const PartStore *ps, uint64_t generation, const PartKind *k, json_t *intent, void *ctx, void *obj,
               Part *ret, char **ret_error) {
        uint64_t id = 0;
        *ret = (Part){};
        if (ret_error)
                *ret_error = NULL;
        if (!intent) {
                intent = json_object();
                if (!intent)
                        return -ENOMEM;
        }
        /* Recorded before anything is made: without the record, nothing. */
        int r = ps->add(ps->userdata, generation, k->role, intent, &id);
        if (r < 0) {
                json_decref(intent);
                return r;
        }
        json_t *commit = NULL;
        char *why = NULL;
        r = k->acquire(ctx, obj, intent, &commit, &why);
        if (r < 0) {
                (void) end_record(ps, k, id, generation, intent, ctx, obj);
                json_decref(intent);
                json_decref(commit);
                if (ret_error)
                        *ret_error = why;
                else
                        free(why);
                return r;
        }
        free(why);
        json_decref(intent);
        ParticipantState to = k->acquire_prepares ? PARTICIPANT_PREPARED : PARTICIPANT_COMMITTED;
        r = ps->set_state(ps->userdata, id, to, commit);
        json_decref(commit);
        if (r < 0)
                /* Made, but recorded as Intent only: the record still
                 * names it, so it is not forgotten; a teardown ends it as
                 * it is. */
                log_warning("store: participant %" PRIu64 " (%s) -> %s: %s", id, participant_role_to_string(k->role),
                            participant_state_to_string(to), strerror(-r));
        *ret = (Part){ .kind = k, .id = id, .generation = generation };
        return 0;
}

int part_update(const PartStore *ps, const Part *p, int state, json_t *fields) {
        int r;
        if (p->id == 0)
                r = -ENOENT;
        else if (state >= 0)
                r = ps->set_state(ps->userdata, p->id, (ParticipantState) state, fields);
        else
                r = fields ? ps->update(ps->userdata, p->id, fields) : 0;
        json_decref(fields);
        return r;
}

int part_end(const PartStore *ps, Part *p, void *ctx, void *obj) {
        if (p->id == 0)
                return 0;
        Part done = *p;
        *p = (Part){};
        json_t *rec = NULL, *own = NULL;
        if (ps->get(ps->userdata, done.id, &rec) >= 0)
                own = json_object_get(rec, "ownership");
        json_t *empty = own ? NULL : json_object();
        int r = end_record(ps, done.kind, done.id, done.generation, own ? own : empty, ctx, obj);
        json_decref(empty);
        json_decref(rec);
        return r;
}

int part_recover(const PartStore *ps, const PartKind *const *kinds, size_t n_kinds, void *ctx) {
        json_t *list = NULL;
        int r = ps->list_unclean(ps->userdata, &list);
        if (r < 0)
                return r;
        int max_pass = 0;
        for (size_t i = 0; i < n_kinds; i++)
                if (kinds[i]->recover_pass > max_pass)
                        max_pass = kinds[i]->recover_pass;
        int removed = 0;
        bool failed = false;
        size_t i;
        json_t *p;
        json_array_foreach(list, i, p) {
                ParticipantRole role = participant_role_from_string(json_string_value(json_object_get(p, "role")));
                bool known = false;
                for (size_t k = 0; k < n_kinds; k++)
                        known = known || kinds[k]->role == role;
                if (!known) {
                        log_error("participant %" PRIu64 " has a role no kind covers (%s): left alone",
                                  (uint64_t) json_integer_value(json_object_get(p, "participant_id")),
                                  json_string_value(json_object_get(p, "role")) ?: "?");
                        json_decref(list);
                        return -EPROTO;
                }
        }
        for (int pass = 0; pass <= max_pass; pass++)
                json_array_foreach(list, i, p) {
                        ParticipantRole role =
                                participant_role_from_string(json_string_value(json_object_get(p, "role")));
                        const PartKind *k = NULL;
                        for (size_t j = 0; j < n_kinds && !k; j++)
                                if (kinds[j]->role == role)
                                        k = kinds[j];
                        if (k->recover_pass != pass)
                                continue;
                        uint64_t id = (uint64_t) json_integer_value(json_object_get(p, "participant_id"));
                        uint64_t gen = (uint64_t) json_integer_value(json_object_get(p, "generation_id"));
                        log_info("recovering participant %" PRIu64 " (%s, %s)", id, participant_role_to_string(role),
                                 json_string_value(json_object_get(p, "state")) ?: "?");
                        json_t *own = json_object_get(p, "ownership");
                        json_t *empty = own ? NULL : json_object();
                        if (end_record(ps, k, id, gen, own ? own : empty, ctx, NULL) < 0)
                                failed = true;
                        else
                                removed++;
                        json_decref(empty);
                }
        json_decref(list);
        return failed ? -EIO : removed;
}
