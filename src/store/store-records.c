/* SPDX-License-Identifier: MIT */
/* The Domain Store's records (store.h, store-internal.h): generations,
 * participants with their state transitions, sessions and terminals, and
 * the lists of those not yet cleaned up. Each public function is one
 * transaction. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lmdb-util.h"
#include "store-internal.h"
#include "string-util.h"

/* ---- generations ---- */

static const char *const generation_fields[] = {
        "configuration_fingerprint", "coordinator_id", "network_sidecar_id", "sandbox_id", "durable_decision",
};

/* The store owns domain_id and generation_id; the schema fields are strings
 * or null; other keys pass through. */
static int generation_fields_check(json_t *fields) {
        if (!json_is_object(fields))
                return -EINVAL;
        if (json_object_get(fields, "domain_id") || json_object_get(fields, "generation_id"))
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(generation_fields); i++) {
                json_t *v = json_object_get(fields, generation_fields[i]);
                if (v && !json_is_string(v) && !json_is_null(v))
                        return -EINVAL;
        }
        return 0;
}

int store_generation_begin(Store *s, json_t *info, uint64_t *ret_generation_id) {
        if (!s || !ret_generation_id)
                return -EINVAL;
        if (info) {
                int q = generation_fields_check(info);
                if (q < 0)
                        return q;
        }

        _cleanup_json_ json_t *rec = info ? json_deep_copy(info) : json_object();
        if (!rec)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(generation_fields); i++)
                if (!json_object_get(rec, generation_fields[i])) {
                        int q = object_set_new(rec, generation_fields[i], json_null());
                        if (q < 0)
                                return q;
                }

        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        uint64_t id, kb;
        r = table_next_id(txn, s->dbi_generations, &id);
        if (r < 0)
                return r;
        r = object_set_new(rec, "domain_id", json_string(s->domain_id));
        if (r < 0)
                return r;
        r = object_set_new(rec, "generation_id", json_integer((json_int_t) id));
        if (r < 0)
                return r;
        MDB_val k = key_u64(id, &kb);
        r = record_put(txn, s->dbi_generations, &k, rec, MDB_NOOVERWRITE);
        if (r < 0)
                return r;
        r = txn_commit(&txn);
        if (r < 0)
                return r;
        *ret_generation_id = id;
        return 0;
}

/* Read key in dbi, merge fields into it (top level), write it back. */
static int record_merge(Store *s, MDB_dbi dbi, MDB_val *key, json_t *fields) {
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *rec = NULL;
        r = record_get(txn, dbi, key, &rec);
        if (r < 0)
                return r;
        if (json_object_update(rec, fields) < 0)
                return -ENOMEM;
        r = record_put(txn, dbi, key, rec, 0);
        if (r < 0)
                return r;
        return txn_commit(&txn);
}

int store_generation_update(Store *s, uint64_t generation_id, json_t *fields) {
        if (!s)
                return -EINVAL;
        int r = generation_fields_check(fields);
        if (r < 0)
                return r;
        uint64_t kb;
        MDB_val k = key_u64(generation_id, &kb);
        return record_merge(s, s->dbi_generations, &k, fields);
}

static int record_get_one(Store *s, MDB_dbi dbi, MDB_val *key, json_t **ret) {
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, false, &txn);
        if (r < 0)
                return r;
        return record_get(txn, dbi, key, ret);
}

int store_generation_get(Store *s, uint64_t generation_id, json_t **ret) {
        if (!s || !ret)
                return -EINVAL;
        uint64_t kb;
        MDB_val k = key_u64(generation_id, &kb);
        return record_get_one(s, s->dbi_generations, &k, ret);
}

int store_generation_last(Store *s, uint64_t *ret_generation_id) {
        if (!s || !ret_generation_id)
                return -EINVAL;
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, false, &txn);
        if (r < 0)
                return r;
        uint64_t next;
        r = table_next_id(txn, s->dbi_generations, &next);
        if (r < 0)
                return r;
        if (next == 1)
                return -ENOENT;
        *ret_generation_id = next - 1;
        return 0;
}

/* ---- participants ---- */

int store_participant_add(Store *s, uint64_t generation_id, ParticipantRole role, json_t *ownership,
                          uint64_t *ret_participant_id) {
        const char *role_name = participant_role_to_string(role);
        if (!s || !ret_participant_id || !role_name || (ownership && !json_is_object(ownership)) ||
            generation_id > (uint64_t) INT64_MAX)
                return -EINVAL;

        _cleanup_json_ json_t *own = ownership ? json_deep_copy(ownership) : json_object();
        if (!own)
                return -ENOMEM;

        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        uint64_t gkb, kb, id;
        MDB_val gk = key_u64(generation_id, &gkb), gv;
        r = mdb_get(txn, s->dbi_generations, &gk, &gv);
        if (r != 0)
                return lmdb_errno(r); /* -ENOENT: no such generation */
        r = table_next_id(txn, s->dbi_participants, &id);
        if (r < 0)
                return r;

        _cleanup_json_ json_t *rec = json_pack("{s:I,s:I,s:s,s:s,s:O}", "participant_id", (json_int_t) id,
                                               "generation_id", (json_int_t) generation_id, "role", role_name, "state",
                                               participant_state_to_string(PARTICIPANT_INTENT), "ownership", own);
        if (!rec)
                return -ENOMEM;
        MDB_val k = key_u64(id, &kb);
        r = record_put(txn, s->dbi_participants, &k, rec, MDB_NOOVERWRITE);
        if (r < 0)
                return r;
        r = unclean_mark(txn, s->dbi_unclean, UNCLEAN_PARTICIPANT, &k, true);
        if (r < 0)
                return r;
        r = txn_commit(&txn);
        if (r < 0)
                return r;
        *ret_participant_id = id;
        return 0;
}

static int participant_write(Store *s, uint64_t participant_id, ParticipantState state, bool keep_state,
                             json_t *ownership);

int store_participant_set_state(Store *s, uint64_t participant_id, ParticipantState state, json_t *ownership) {
        return participant_write(s, participant_id, state, false, ownership);
}

int store_participant_update(Store *s, uint64_t participant_id, json_t *ownership) {
        if (!ownership)
                return -EINVAL;
        return participant_write(s, participant_id, PARTICIPANT_INTENT, true, ownership);
}

static int participant_write(Store *s, uint64_t participant_id, ParticipantState state, bool keep_state,
                             json_t *ownership) {
        const char *state_name = participant_state_to_string(state);
        if (!s || !state_name || (ownership && !json_is_object(ownership)))
                return -EINVAL;

        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        uint64_t kb;
        MDB_val k = key_u64(participant_id, &kb);
        _cleanup_json_ json_t *rec = NULL;
        r = record_get(txn, s->dbi_participants, &k, &rec);
        if (r < 0)
                return r;
        ParticipantState from = participant_state_from_string(json_string_value(json_object_get(rec, "state")));
        if (from < 0)
                return -EBADMSG;
        if (keep_state) {
                if (from == PARTICIPANT_CLEAN)
                        return -EINVAL;
                state_name = participant_state_to_string(from);
        } else if (!participant_transition_valid(from, state))
                return -EINVAL;

        if (ownership) {
                json_t *own = json_object_get(rec, "ownership");
                if (!json_is_object(own))
                        return -EBADMSG;
                if (json_object_update(own, ownership) < 0)
                        return -ENOMEM;
        }
        r = object_set_new(rec, "state", json_string(state_name));
        if (r < 0)
                return r;
        r = record_put(txn, s->dbi_participants, &k, rec, 0);
        if (r < 0)
                return r;
        r = unclean_mark(txn, s->dbi_unclean, UNCLEAN_PARTICIPANT, &k,
                         participant_state_from_string(state_name) != PARTICIPANT_CLEAN);
        if (r < 0)
                return r;
        return txn_commit(&txn);
}

int store_participant_get(Store *s, uint64_t participant_id, json_t **ret) {
        if (!s || !ret)
                return -EINVAL;
        uint64_t kb;
        MDB_val k = key_u64(participant_id, &kb);
        return record_get_one(s, s->dbi_participants, &k, ret);
}

/* Every record of dbi whose "state" is not clean, in key order: those the
 * unclean index names (tag), not every record the Domain ever made. */
static int list_not_clean(Store *s, MDB_dbi dbi, char tag, int (*state_parse)(const char *), int clean, json_t **ret) {
        _cleanup_json_ json_t *list = json_array();
        if (!list)
                return -ENOMEM;
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, false, &txn);
        if (r < 0)
                return r;
        _cleanup_cursor_ MDB_cursor *c = NULL;
        r = mdb_cursor_open(txn, s->dbi_unclean, &c);
        if (r != 0)
                return lmdb_errno(r);
        MDB_val k = { .mv_size = 1, .mv_data = &tag }, v;
        for (r = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); r == 0 && ((const char *) k.mv_data)[0] == tag;
             r = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
                MDB_val rk = { .mv_size = k.mv_size - 1, .mv_data = (char *) k.mv_data + 1 };
                json_t *rec;
                int q = record_get(txn, dbi, &rk, &rec);
                if (q < 0)
                        return q == -ENOENT ? -EBADMSG : q; /* indexed, and gone: not ours */
                int st = state_parse(json_string_value(json_object_get(rec, "state")));
                if (st < 0) {
                        json_decref(rec);
                        return -EBADMSG;
                }
                if (st == clean) {
                        json_decref(rec);
                        continue;
                }
                if (json_array_append_new(list, rec) < 0)
                        return -ENOMEM;
        }
        if (r != 0 && r != MDB_NOTFOUND)
                return lmdb_errno(r);
        *ret = TAKE_PTR(list);
        return 0;
}

static int participant_state_parse(const char *s) {
        return participant_state_from_string(s);
}

static int terminal_state_parse(const char *s) {
        return terminal_state_from_string(s);
}

int store_list_unclean(Store *s, json_t **ret) {
        if (!s || !ret)
                return -EINVAL;
        return list_not_clean(s, s->dbi_participants, UNCLEAN_PARTICIPANT, participant_state_parse, PARTICIPANT_CLEAN,
                              ret);
}

/* ---- sessions and terminals ---- */

int store_session_put(Store *s, json_t *session) {
        if (!s || !json_is_object(session))
                return -EINVAL;
        const char *id = json_string_value(json_object_get(session, "session_id"));
        if (!session_id_valid(id))
                return -EINVAL;

        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        MDB_val k = key_str(id);
        r = record_put(txn, s->dbi_sessions, &k, session, 0);
        if (r < 0)
                return r;
        return txn_commit(&txn);
}

/* fields must not rename the record it merges into. */
static int fields_check_session_id(json_t *fields, const char *session_id) {
        if (!json_is_object(fields))
                return -EINVAL;
        json_t *id = json_object_get(fields, "session_id");
        if (id && (!json_is_string(id) || !streq(json_string_value(id), session_id)))
                return -EINVAL;
        return 0;
}

int store_session_update(Store *s, const char *session_id, json_t *fields) {
        if (!s || !session_id_valid(session_id))
                return -EINVAL;
        int r = fields_check_session_id(fields, session_id);
        if (r < 0)
                return r;
        MDB_val k = key_str(session_id);
        return record_merge(s, s->dbi_sessions, &k, fields);
}

int store_session_get(Store *s, const char *session_id, json_t **ret) {
        if (!s || !ret || !session_id_valid(session_id))
                return -EINVAL;
        MDB_val k = key_str(session_id);
        return record_get_one(s, s->dbi_sessions, &k, ret);
}

int store_terminal_put(Store *s, json_t *terminal) {
        if (!s || !json_is_object(terminal))
                return -EINVAL;
        const char *id = json_string_value(json_object_get(terminal, "session_id"));
        if (!session_id_valid(id))
                return -EINVAL;
        if (terminal_state_from_string(json_string_value(json_object_get(terminal, "state"))) < 0)
                return -EINVAL;

        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        MDB_val k = key_str(id), v;
        r = mdb_get(txn, s->dbi_sessions, &k, &v);
        if (r != 0)
                return lmdb_errno(r); /* -ENOENT: no such session */

        /* An unclean terminal is a resource still to be removed; replacing
         * its record would forget it. */
        _cleanup_json_ json_t *old = NULL;
        r = record_get(txn, s->dbi_terminals, &k, &old);
        if (r >= 0) {
                TerminalState st = terminal_state_from_string(json_string_value(json_object_get(old, "state")));
                if (st < 0)
                        return -EBADMSG;
                if (st != TERMINAL_CLEAN)
                        return -EEXIST;
        } else if (r != -ENOENT)
                return r;

        r = record_put(txn, s->dbi_terminals, &k, terminal, 0);
        if (r < 0)
                return r;
        r = unclean_mark(txn, s->dbi_unclean, UNCLEAN_TERMINAL, &k,
                         terminal_state_from_string(json_string_value(json_object_get(terminal, "state"))) !=
                                 TERMINAL_CLEAN);
        if (r < 0)
                return r;
        return txn_commit(&txn);
}

int store_terminal_set_state(Store *s, const char *session_id, TerminalState state, json_t *fields) {
        const char *state_name = terminal_state_to_string(state);
        if (!s || !state_name || !session_id_valid(session_id))
                return -EINVAL;
        if (fields) {
                int q = fields_check_session_id(fields, session_id);
                if (q < 0)
                        return q;
                if (json_object_get(fields, "state"))
                        return -EINVAL;
        }

        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        MDB_val k = key_str(session_id);
        _cleanup_json_ json_t *rec = NULL;
        r = record_get(txn, s->dbi_terminals, &k, &rec);
        if (r < 0)
                return r;
        TerminalState from = terminal_state_from_string(json_string_value(json_object_get(rec, "state")));
        if (from < 0)
                return -EBADMSG;
        if (!terminal_transition_valid(from, state))
                return -EINVAL;
        if (fields && json_object_update(rec, fields) < 0)
                return -ENOMEM;
        r = object_set_new(rec, "state", json_string(state_name));
        if (r < 0)
                return r;
        r = record_put(txn, s->dbi_terminals, &k, rec, 0);
        if (r < 0)
                return r;
        r = unclean_mark(txn, s->dbi_unclean, UNCLEAN_TERMINAL, &k, state != TERMINAL_CLEAN);
        if (r < 0)
                return r;
        return txn_commit(&txn);
}

int store_list_unclean_terminals(Store *s, json_t **ret) {
        if (!s || !ret)
                return -EINVAL;
        return list_not_clean(s, s->dbi_terminals, UNCLEAN_TERMINAL, terminal_state_parse, TERMINAL_CLEAN, ret);
}
