/* SPDX-License-Identifier: MIT */
/* The Domain Store on LMDB (store.h). Every public function is one
 * transaction: it either commits all of its changes or none.
 *
 * This file holds the store itself: opening it, its schema and migrations,
 * the names of its states, the key and value helpers and transactions the
 * other parts share (store-internal.h), and process identities. The
 * records of generations, participants, sessions and terminals are
 * store-records.c's; the audit trail, store-audit.c's; the worker thread,
 * store-worker.c's. */
#include <endian.h>
#include <errno.h>
#include <openssl/evp.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "path-util.h"
#include "lmdb-util.h"
#include "store-internal.h"
#include "string-util.h"

void env_closep(MDB_env **e) {
        if (*e)
                mdb_env_close(*e);
}

/* LMDB returns errno values (positive) or its own negative codes. */
int lmdb_errno(int r) {
        if (r == 0)
                return 0;
        if (r > 0)
                return -r;
        switch (r) {
        case MDB_NOTFOUND:
                return -ENOENT;
        case MDB_KEYEXIST:
                return -EEXIST;
        case MDB_MAP_FULL:
        case MDB_TXN_FULL:
        case MDB_DBS_FULL:
        case MDB_CURSOR_FULL:
        case MDB_PAGE_FULL:
                return -ENOSPC;
        case MDB_READERS_FULL:
        case MDB_MAP_RESIZED:
                return -EAGAIN;
        case MDB_CORRUPTED:
        case MDB_PAGE_NOTFOUND:
        case MDB_INVALID:
        case MDB_VERSION_MISMATCH:
        case MDB_INCOMPATIBLE:
                return -EBADMSG;
        case MDB_BAD_VALSIZE:
        case MDB_BAD_DBI:
        case MDB_BAD_TXN:
        case MDB_BAD_RSLOT:
        case MDB_TLS_FULL:
                return -EINVAL;
        default:
                return -EIO;
        }
}

static uint64_t now_usec(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* ---- names ---- */

static const char *const participant_state_table[_PARTICIPANT_STATE_MAX] = {
        [PARTICIPANT_INTENT] = "Intent",
        [PARTICIPANT_LEASE_HELD] = "LeaseHeld",
        [PARTICIPANT_PREPARED] = "Prepared",
        [PARTICIPANT_COMMITTED] = "Committed",
        [PARTICIPANT_RELEASE_INTENT] = "ReleaseIntent",
        [PARTICIPANT_CLEAN] = "Clean",
};

static const char *const participant_role_table[_ROLE_MAX] = {
        [ROLE_PREPARED_LOWER] = "PreparedLower",
        [ROLE_STATE_ANCHOR] = "StateAnchor",
        [ROLE_GIT_ROUTING] = "GitRouting",
        [ROLE_NETWORK] = "Network",
        [ROLE_HELPER] = "Helper",
        [ROLE_SANDBOX] = "Sandbox",
        [ROLE_PUBLICATION] = "Publication",
};

static const char *const terminal_state_table[_TERMINAL_STATE_MAX] = {
        [TERMINAL_INTENT] = "Intent",
        [TERMINAL_RUNNING] = "Running",
        [TERMINAL_RELEASE_INTENT] = "ReleaseIntent",
        [TERMINAL_CLEAN] = "Clean",
};

static const char *const generation_decision_table[_GENERATION_DECISION_MAX] = {
        [GENERATION_STARTING] = "Starting",  [GENERATION_RUNNING] = "Running",     [GENERATION_FAILED] = "Failed",
        [GENERATION_TORN_DOWN] = "TornDown", [GENERATION_ABANDONED] = "Abandoned",
};

static const char *const session_phase_table[_SESSION_PHASE_MAX] = {
        [SESSION_OPENING] = "Opening",
        [SESSION_RUNNING] = "Running",
};

static int lookup_string(const char *const *table, int n, const char *s) {
        if (!s)
                return -EINVAL;
        for (int i = 0; i < n; i++)
                if (table[i] && streq(table[i], s))
                        return i;
        return -EINVAL;
}

const char *generation_decision_to_string(GenerationDecision d) {
        return d >= 0 && d < _GENERATION_DECISION_MAX ? generation_decision_table[d] : NULL;
}

GenerationDecision generation_decision_from_string(const char *s) {
        return (GenerationDecision) lookup_string(generation_decision_table, _GENERATION_DECISION_MAX, s);
}

const char *session_phase_to_string(SessionPhase p) {
        return p >= 0 && p < _SESSION_PHASE_MAX ? session_phase_table[p] : NULL;
}

SessionPhase session_phase_from_string(const char *s) {
        return (SessionPhase) lookup_string(session_phase_table, _SESSION_PHASE_MAX, s);
}

const char *participant_state_to_string(ParticipantState s) {
        if (s < 0 || s >= _PARTICIPANT_STATE_MAX)
                return NULL;
        return participant_state_table[s];
}

ParticipantState participant_state_from_string(const char *s) {
        return (ParticipantState) lookup_string(participant_state_table, _PARTICIPANT_STATE_MAX, s);
}

const char *participant_role_to_string(ParticipantRole r) {
        if (r < 0 || r >= _ROLE_MAX)
                return NULL;
        return participant_role_table[r];
}

ParticipantRole participant_role_from_string(const char *s) {
        return (ParticipantRole) lookup_string(participant_role_table, _ROLE_MAX, s);
}

const char *terminal_state_to_string(TerminalState s) {
        if (s < 0 || s >= _TERMINAL_STATE_MAX)
                return NULL;
        return terminal_state_table[s];
}

TerminalState terminal_state_from_string(const char *s) {
        return (TerminalState) lookup_string(terminal_state_table, _TERMINAL_STATE_MAX, s);
}

bool participant_transition_valid(ParticipantState from, ParticipantState to) {
        if (from < 0 || from >= _PARTICIPANT_STATE_MAX || to < 0 || to >= _PARTICIPANT_STATE_MAX)
                return false;
        return from != PARTICIPANT_CLEAN && to > from;
}

bool terminal_transition_valid(TerminalState from, TerminalState to) {
        if (from < 0 || from >= _TERMINAL_STATE_MAX || to < 0 || to >= _TERMINAL_STATE_MAX)
                return false;
        return from != TERMINAL_CLEAN && to > from;
}

/* ---- keys and values ---- */

MDB_val key_u64(uint64_t id, uint64_t *buf) {
        /* Big-endian, so LMDB's byte order is id order. */
        *buf = htobe64(id);
        return (MDB_val){ .mv_size = sizeof(*buf), .mv_data = buf };
}

int key_to_u64(const MDB_val *k, uint64_t *ret) {
        uint64_t be;
        if (k->mv_size != sizeof(be))
                return -EBADMSG;
        memcpy(&be, k->mv_data, sizeof(be));
        *ret = be64toh(be);
        return 0;
}

MDB_val key_str(const char *s) {
        return (MDB_val){ .mv_size = strlen(s), .mv_data = (void *) s };
}

/* 8-4-4-4-12 hex digits, as LAZARET_SESSION_ID is generated. */
bool session_id_valid(const char *s) {
        if (!s || strlen(s) != 36)
                return false;
        for (size_t i = 0; i < 36; i++) {
                char c = s[i];
                if (i == 8 || i == 13 || i == 18 || i == 23) {
                        if (c != '-')
                                return false;
                } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
                        return false;
        }
        return true;
}

int value_decode(const MDB_val *v, json_t **ret) {
        if (v->mv_size > STORE_VALUE_MAX)
                return -EBADMSG;
        json_error_t err;
        json_t *j = json_loadb(v->mv_data, v->mv_size, JSON_REJECT_DUPLICATES, &err);
        if (!j)
                return json_error_code(&err) == json_error_out_of_memory ? -ENOMEM : -EBADMSG;
        if (!json_is_object(j)) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

int record_get(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, json_t **ret) {
        MDB_val v;
        int r = mdb_get(txn, dbi, key, &v);
        if (r != 0)
                return lmdb_errno(r);
        return value_decode(&v, ret);
}

int record_put(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, json_t *j, unsigned flags) {
        if (!json_is_object(j))
                return -EINVAL;
        _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        if (!text)
                return -ENOMEM;
        size_t n = strlen(text);
        if (n > STORE_VALUE_MAX)
                return -EFBIG;
        MDB_val v = { .mv_size = n, .mv_data = text };
        return lmdb_errno(mdb_put(txn, dbi, key, &v, flags));
}

/* Set key in an object, taking the reference of value (NULL means OOM). */
int object_set_new(json_t *o, const char *key, json_t *value) {
        if (!value)
                return -ENOMEM;
        if (json_object_set_new(o, key, value) < 0)
                return -ENOMEM;
        return 0;
}

int txn_begin(Store *s, bool write, MDB_txn **ret) {
        MDB_txn *txn;
        int r = mdb_txn_begin(s->env, NULL, write ? 0 : MDB_RDONLY, &txn);
        if (r != 0)
                return lmdb_errno(r);
        *ret = txn;
        return 0;
}

int txn_commit(MDB_txn **txn) {
        return lmdb_errno(mdb_txn_commit(TAKE_PTR(*txn)));
}

/* The id after the last key of a u64-keyed table (1 for an empty one). */
int table_next_id(MDB_txn *txn, MDB_dbi dbi, uint64_t *ret) {
        _cleanup_cursor_ MDB_cursor *c = NULL;
        int r = mdb_cursor_open(txn, dbi, &c);
        if (r != 0)
                return lmdb_errno(r);
        MDB_val k, v;
        r = mdb_cursor_get(c, &k, &v, MDB_LAST);
        if (r == MDB_NOTFOUND) {
                *ret = 1;
                return 0;
        }
        if (r != 0)
                return lmdb_errno(r);
        uint64_t last;
        r = key_to_u64(&k, &last);
        if (r < 0)
                return r;
        if (last >= (uint64_t) INT64_MAX) /* ids must fit a JSON integer */
                return -EOVERFLOW;
        *ret = last + 1;
        return 0;
}

/* ---- schema ---- */

static json_t *schema_record_new(void) {
        return json_pack("{s:s,s:i}", "schema_id", STORE_SCHEMA_ID, "schema_version", STORE_SCHEMA_VERSION);
}

/* The schema version recorded in meta: "schema" -> JSON (version >= 1), or
 * the version-0 text key. */
static int meta_read_version(MDB_txn *txn, MDB_dbi meta, unsigned *ret) {
        MDB_val k = key_str(META_KEY_SCHEMA), v;
        int r = mdb_get(txn, meta, &k, &v);
        if (r == 0) {
                _cleanup_json_ json_t *j = NULL;
                r = value_decode(&v, &j);
                if (r < 0)
                        return r;
                const char *id = json_string_value(json_object_get(j, "schema_id"));
                json_t *ver = json_object_get(j, "schema_version");
                if (!id || !streq(id, STORE_SCHEMA_ID) || !json_is_integer(ver))
                        return -EBADMSG;
                json_int_t n = json_integer_value(ver);
                if (n < 1 || n > UINT_MAX)
                        return -EBADMSG;
                *ret = (unsigned) n;
                return 0;
        }
        if (r != MDB_NOTFOUND)
                return lmdb_errno(r);

        k = key_str(V0_META_KEY_VERSION);
        r = mdb_get(txn, meta, &k, &v);
        if (r == MDB_NOTFOUND)
                return -EBADMSG;
        if (r != 0)
                return lmdb_errno(r);
        if (v.mv_size != 1 || ((const char *) v.mv_data)[0] != '0')
                return -EBADMSG;
        *ret = 0;
        return 0;
}

static int main_table_empty(MDB_txn *txn, bool *ret) {
        MDB_dbi main_dbi;
        int r = mdb_dbi_open(txn, NULL, 0, &main_dbi);
        if (r != 0)
                return lmdb_errno(r);
        MDB_stat st;
        r = mdb_stat(txn, main_dbi, &st);
        if (r != 0)
                return lmdb_errno(r);
        *ret = st.ms_entries == 0;
        return 0;
}

/* Parse a version-0 "<cli_pid> <phase>" value. */
static int v0_session_parse(const MDB_val *v, json_int_t *ret_pid, char **ret_phase) {
        if (v->mv_size == 0 || v->mv_size > 256)
                return -EBADMSG;
        const char *p = v->mv_data, *end = p + v->mv_size;
        json_int_t pid = 0;
        const char *q = p;
        for (; q < end && *q >= '0' && *q <= '9'; q++) {
                pid = pid * 10 + (*q - '0');
                if (pid > INT_MAX)
                        return -EBADMSG;
        }
        if (q == p || pid <= 0 || q == end || *q != ' ')
                return -EBADMSG;
        q++;
        if (q == end)
                return -EBADMSG;
        for (const char *c = q; c < end; c++)
                if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                      *c == '-'))
                        return -EBADMSG;
        /* The text is an LMDB value, not NUL-terminated: copy by length. */
        char *phase = malloc((size_t) (end - q) + 1);
        if (!phase)
                return -ENOMEM;
        memcpy(phase, q, (size_t) (end - q));
        phase[end - q] = '\0';
        *ret_pid = pid;
        *ret_phase = phase;
        return 0;
}

/* v0 -> v1: "state" "session:<uuid>" -> "<cli_pid> <phase>" becomes a
 * sessions record; the state table is dropped. Anything else in the state
 * table fails the migration rather than being lost silently. */
static int migrate_v0_to_v1(MDB_txn *txn) {
        MDB_dbi state, sessions;
        int r = mdb_dbi_open(txn, TABLE_SESSIONS, MDB_CREATE, &sessions);
        if (r != 0)
                return lmdb_errno(r);
        r = mdb_dbi_open(txn, V0_TABLE_STATE, 0, &state);
        if (r == MDB_NOTFOUND)
                return 0; /* a version-0 store that never recorded anything */
        if (r != 0)
                return lmdb_errno(r);

        _cleanup_cursor_ MDB_cursor *c = NULL;
        r = mdb_cursor_open(txn, state, &c);
        if (r != 0)
                return lmdb_errno(r);
        MDB_val k, v;
        for (r = mdb_cursor_get(c, &k, &v, MDB_FIRST); r == 0; r = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
                size_t plen = strlen(V0_SESSION_KEY_PREFIX);
                if (k.mv_size != plen + 36 || memcmp(k.mv_data, V0_SESSION_KEY_PREFIX, plen) != 0)
                        return -EBADMSG;
                char id[37];
                memcpy(id, (const char *) k.mv_data + plen, 36);
                id[36] = '\0';
                if (!session_id_valid(id))
                        return -EBADMSG;

                json_int_t pid;
                _cleanup_free_ char *phase = NULL;
                int q = v0_session_parse(&v, &pid, &phase);
                if (q < 0)
                        return q;
                char cli_id[32];
                (void) snprintf(cli_id, sizeof(cli_id), "pid:%lld", (long long) pid);

                _cleanup_json_ json_t *rec = json_pack("{s:s,s:s,s:s,s:i,s:n}", "session_id", id, "cli_id", cli_id,
                                                       "session_phase", phase, "generation_id", 0, "session_anchor_id");
                if (!rec)
                        return -ENOMEM;
                MDB_val sk = key_str(id);
                q = record_put(txn, sessions, &sk, rec, MDB_NOOVERWRITE);
                if (q < 0)
                        return q;
        }
        if (r != MDB_NOTFOUND)
                return lmdb_errno(r);
        mdb_cursor_close(TAKE_PTR(c));

        return lmdb_errno(mdb_drop(txn, state, 1));
}

/* Version 1 to 2: the escalation audit trail, a new table that starts
 * empty; nothing is copied. */
static int migrate_v1_to_v2(MDB_txn *txn) {
        MDB_dbi audit;
        return lmdb_errno(mdb_dbi_open(txn, TABLE_AUDIT, MDB_CREATE, &audit));
}

int unclean_mark(MDB_txn *txn, MDB_dbi unclean, char tag, const MDB_val *key, bool is_unclean) {
        char buf[1 + 64];
        if (key->mv_size == 0 || key->mv_size > sizeof(buf) - 1)
                return -EINVAL;
        buf[0] = tag;
        memcpy(buf + 1, key->mv_data, key->mv_size);
        MDB_val k = { .mv_size = key->mv_size + 1, .mv_data = buf }, v = { .mv_size = 1, .mv_data = (void *) "u" };
        int r = is_unclean ? mdb_put(txn, unclean, &k, &v, 0) : mdb_del(txn, unclean, &k, NULL);
        return r == 0 || (!is_unclean && r == MDB_NOTFOUND) ? 0 : lmdb_errno(r);
}

/* Every record of a table that is not in its clean state, into the
 * index. */
static int index_unclean(MDB_txn *txn, MDB_dbi unclean, const char *table, char tag, int (*parse)(const char *),
                         int clean) {
        MDB_dbi dbi;
        int r = mdb_dbi_open(txn, table, MDB_CREATE, &dbi);
        if (r != 0)
                return lmdb_errno(r);
        _cleanup_cursor_ MDB_cursor *c = NULL;
        r = mdb_cursor_open(txn, dbi, &c);
        if (r != 0)
                return lmdb_errno(r);
        MDB_val k, v;
        for (r = mdb_cursor_get(c, &k, &v, MDB_FIRST); r == 0; r = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
                _cleanup_json_ json_t *rec = NULL;
                int q = value_decode(&v, &rec);
                if (q < 0)
                        return q;
                int st = parse(json_string_value(json_object_get(rec, "state")));
                if (st < 0)
                        return -EBADMSG;
                if (st != clean && (q = unclean_mark(txn, unclean, tag, &k, true)) < 0)
                        return q;
        }
        return r == MDB_NOTFOUND ? 0 : lmdb_errno(r);
}

static int participant_parse(const char *s) {
        return participant_state_from_string(s);
}

static int terminal_parse(const char *s) {
        return terminal_state_from_string(s);
}

/* Version 2 to 3: the unclean index, made from the records. */
static int migrate_v2_to_v3(MDB_txn *txn) {
        MDB_dbi unclean;
        int r = mdb_dbi_open(txn, TABLE_UNCLEAN, MDB_CREATE, &unclean);
        if (r != 0)
                return lmdb_errno(r);
        r = index_unclean(txn, unclean, TABLE_PARTICIPANTS, UNCLEAN_PARTICIPANT, participant_parse, PARTICIPANT_CLEAN);
        if (r >= 0)
                r = index_unclean(txn, unclean, TABLE_TERMINALS, UNCLEAN_TERMINAL, terminal_parse, TERMINAL_CLEAN);
        return r;
}

/* migrations[v] converts a version-v store to version v+1 inside txn. */
static int (*const migrations[STORE_SCHEMA_VERSION])(MDB_txn *txn) = {
        [0] = migrate_v0_to_v1,
        [1] = migrate_v1_to_v2,
        [2] = migrate_v2_to_v3,
};

int store_migrate(Store *s) {
        if (!s)
                return -EINVAL;

        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        MDB_dbi meta = s->dbi_meta;
        if (!s->dbis_open) {
                r = mdb_dbi_open(txn, TABLE_META, 0, &meta);
                if (r != 0)
                        return lmdb_errno(r); /* no meta: nothing to migrate (-ENOENT) */
        }
        unsigned from;
        r = meta_read_version(txn, meta, &from);
        if (r < 0)
                return r;
        if (from > STORE_SCHEMA_VERSION)
                return -EPROTONOSUPPORT;
        if (from == STORE_SCHEMA_VERSION)
                return (int) from;

        for (unsigned v = from; v < STORE_SCHEMA_VERSION; v++) {
                r = migrations[v](txn);
                if (r < 0)
                        return r;
        }

        MDB_val k = key_str(V0_META_KEY_VERSION);
        r = mdb_del(txn, meta, &k, NULL);
        if (r != 0 && r != MDB_NOTFOUND)
                return lmdb_errno(r);
        _cleanup_json_ json_t *schema = schema_record_new();
        if (!schema)
                return -ENOMEM;
        k = key_str(META_KEY_SCHEMA);
        r = record_put(txn, meta, &k, schema, 0);
        if (r < 0)
                return r;
        r = txn_commit(&txn);
        if (r < 0)
                return r;
        return (int) from;
}

int store_schema_version(Store *s, unsigned *ret) {
        if (!s || !ret)
                return -EINVAL;
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, false, &txn);
        if (r < 0)
                return r;
        unsigned v;
        r = meta_read_version(txn, s->dbi_meta, &v);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

/* ---- open and close ---- */

int lmdb_lock_acquire(const char *path, uint64_t wait_usec, int *ret_fd) {
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0)
                return negative_errno();
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADFD;

        uint64_t start = now_usec();
        for (;;) {
                if (flock(fd, LOCK_EX | LOCK_NB) >= 0)
                        break;
                if (errno == EINTR)
                        continue;
                if (errno != EWOULDBLOCK)
                        return negative_errno();
                uint64_t elapsed = now_usec() - start;
                if (elapsed >= wait_usec)
                        return -EBUSY;
                uint64_t pause = wait_usec - elapsed;
                if (pause > STORE_LOCK_POLL_USEC)
                        pause = STORE_LOCK_POLL_USEC;
                struct timespec ts = { .tv_sec = 0, .tv_nsec = (long) pause * 1000 };
                (void) nanosleep(&ts, NULL);
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* DIR/store must be a real directory (not a symlink to elsewhere). */
int lmdb_env_dir_prepare(const char *path) {
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        struct stat st;
        if (lstat(path, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        return 0;
}

static int env_open(const char *path, MDB_env **ret) {
        _cleanup_(env_closep) MDB_env *env = NULL;
        int r = mdb_env_create(&env);
        if (r != 0)
                return lmdb_errno(r);
        r = mdb_env_set_maxdbs(env, STORE_MAX_DBS);
        if (r != 0)
                return lmdb_errno(r);
        r = mdb_env_set_mapsize(env, STORE_MAP_SIZE);
        if (r != 0)
                return lmdb_errno(r);
        /* MDB_NOTLS: read transactions are not bound to the thread that
         * began them (the worker runs them). Commits stay durable. */
        r = mdb_env_open(env, path, MDB_NOTLS, 0600);
        if (r != 0)
                return lmdb_errno(r);
        /* We hold the store lock, so every recorded reader is a dead process. */
        int dead;
        (void) mdb_reader_check(env, &dead);
        *ret = TAKE_PTR(env);
        return 0;
}

static int domain_record_new(const StoreDomain *d, json_t **ret) {
        json_t *j = json_pack("{s:s,s:s,s:s}", "domain_id", d->domain_id, "profile_name", d->profile_name,
                              "canonical_workspace", d->canonical_workspace);
        if (!j)
                return -ENOMEM;
        *ret = j;
        return 0;
}

/* Fill (first open) or check (later opens) the domain record. */
static int domain_check(MDB_txn *txn, MDB_dbi dbi, const StoreDomain *d, char **ret_domain_id) {
        MDB_val k = key_str(DOMAIN_KEY);
        _cleanup_json_ json_t *rec = NULL;
        int r = record_get(txn, dbi, &k, &rec);
        if (r == -ENOENT) {
                if (!d)
                        return -EINVAL;
                r = domain_record_new(d, &rec);
                if (r < 0)
                        return r;
                r = record_put(txn, dbi, &k, rec, MDB_NOOVERWRITE);
                if (r < 0)
                        return r;
        } else if (r < 0)
                return r;

        const char *id = json_string_value(json_object_get(rec, "domain_id"));
        const char *profile = json_string_value(json_object_get(rec, "profile_name"));
        const char *workspace = json_string_value(json_object_get(rec, "canonical_workspace"));
        if (!id || !profile || !workspace)
                return -EBADMSG;
        if (d &&
            (!streq(id, d->domain_id) || !streq(profile, d->profile_name) || !streq(workspace, d->canonical_workspace)))
                return -EXDEV;

        char *copy = strdup(id);
        if (!copy)
                return -ENOMEM;
        *ret_domain_id = copy;
        return 0;
}

/* Create a new store, or migrate and check an existing one; on success the
 * table handles are valid for the life of the environment. */
static int store_init(Store *s, const StoreDomain *domain) {
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;

        MDB_dbi meta;
        r = mdb_dbi_open(txn, TABLE_META, 0, &meta);
        if (r == MDB_NOTFOUND) {
                /* No meta table: an empty environment is a new store;
                 * anything else is not one of ours. */
                bool empty;
                r = main_table_empty(txn, &empty);
                if (r < 0)
                        return r;
                if (!empty)
                        return -EBADMSG;
                r = mdb_dbi_open(txn, TABLE_META, MDB_CREATE, &meta);
                if (r != 0)
                        return lmdb_errno(r);
                _cleanup_json_ json_t *schema = schema_record_new();
                if (!schema)
                        return -ENOMEM;
                MDB_val k = key_str(META_KEY_SCHEMA);
                r = record_put(txn, meta, &k, schema, MDB_NOOVERWRITE);
                if (r < 0)
                        return r;
        } else if (r != 0)
                return lmdb_errno(r);
        else {
                unsigned version;
                r = meta_read_version(txn, meta, &version);
                if (r < 0)
                        return r;
                if (version > STORE_SCHEMA_VERSION)
                        return -EPROTONOSUPPORT;
                if (version < STORE_SCHEMA_VERSION) {
                        mdb_txn_abort(TAKE_PTR(txn));
                        r = store_migrate(s);
                        if (r < 0)
                                return r;
                        r = txn_begin(s, true, &txn);
                        if (r < 0)
                                return r;
                }
        }

        const struct {
                const char *name;
                MDB_dbi *dbi;
        } tables[] = {
                { TABLE_META, &s->dbi_meta },
                { TABLE_DOMAIN, &s->dbi_domain },
                { TABLE_GENERATIONS, &s->dbi_generations },
                { TABLE_PARTICIPANTS, &s->dbi_participants },
                { TABLE_SESSIONS, &s->dbi_sessions },
                { TABLE_TERMINALS, &s->dbi_terminals },
                { TABLE_AUDIT, &s->dbi_audit },
                { TABLE_UNCLEAN, &s->dbi_unclean },
        };
        for (size_t i = 0; i < ELEMENTSOF(tables); i++) {
                r = mdb_dbi_open(txn, tables[i].name, MDB_CREATE, tables[i].dbi);
                if (r != 0)
                        return lmdb_errno(r);
        }
        _cleanup_free_ char *domain_id = NULL;
        r = domain_check(txn, s->dbi_domain, domain, &domain_id);
        if (r < 0)
                return r;
        r = txn_commit(&txn);
        if (r < 0)
                return r;

        /* Only now are the handles valid beyond this transaction. */
        s->dbis_open = true;
        s->domain_id = TAKE_PTR(domain_id);
        return 0;
}

static bool domain_valid(const StoreDomain *d) {
        return d->domain_id && d->domain_id[0] && d->profile_name && d->profile_name[0] && d->canonical_workspace &&
               d->canonical_workspace[0];
}

int store_open(const char *dir, const StoreDomain *domain, uint64_t wait_usec, Store **ret) {
        if (!dir || !ret || (domain && !domain_valid(domain)))
                return -EINVAL;

        _cleanup_free_ char *lock_path = path_join(dir, "store.lock");
        _cleanup_free_ char *env_path = path_join(dir, "store");
        if (!lock_path || !env_path)
                return -ENOMEM;

        _cleanup_(store_closep) Store *s = calloc(1, sizeof(Store));
        if (!s)
                return -ENOMEM;
        s->lock_fd = -EBADF;

        int r = lmdb_lock_acquire(lock_path, wait_usec, &s->lock_fd);
        if (r < 0)
                return r;
        r = lmdb_env_dir_prepare(env_path);
        if (r < 0)
                return r;
        r = env_open(env_path, &s->env);
        if (r < 0)
                return r;
        r = store_init(s, domain);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(s);
        return 0;
}

Store *store_close(Store *s) {
        if (!s)
                return NULL;
        if (s->env)
                mdb_env_close(s->env);
        /* Unlock only after the environment is closed. */
        safe_close(s->lock_fd);
        free(s->domain_id);
        free(s);
        return NULL;
}

/* ---- test support ---- */

int store_write_v0_fixture(const char *dir, const char *const *session_ids, size_t n) {
        if (!dir || (n > 0 && !session_ids))
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!session_id_valid(session_ids[i]))
                        return -EINVAL;

        _cleanup_free_ char *lock_path = path_join(dir, "store.lock");
        _cleanup_free_ char *env_path = path_join(dir, "store");
        if (!lock_path || !env_path)
                return -ENOMEM;
        _cleanup_close_ int lock_fd = -EBADF;
        int r = lmdb_lock_acquire(lock_path, 0, &lock_fd);
        if (r < 0)
                return r;
        r = lmdb_env_dir_prepare(env_path);
        if (r < 0)
                return r;
        _cleanup_(env_closep) MDB_env *env = NULL;
        r = env_open(env_path, &env);
        if (r < 0)
                return r;

        MDB_txn *t;
        r = mdb_txn_begin(env, NULL, 0, &t);
        if (r != 0)
                return lmdb_errno(r);
        _cleanup_txn_ MDB_txn *txn = t;
        bool empty;
        r = main_table_empty(txn, &empty);
        if (r < 0)
                return r;
        if (!empty)
                return -EEXIST;

        MDB_dbi meta, state;
        r = mdb_dbi_open(txn, TABLE_META, MDB_CREATE, &meta);
        if (r != 0)
                return lmdb_errno(r);
        r = mdb_dbi_open(txn, V0_TABLE_STATE, MDB_CREATE, &state);
        if (r != 0)
                return lmdb_errno(r);
        MDB_val k = key_str(V0_META_KEY_VERSION), v = { .mv_size = 1, .mv_data = (void *) "0" };
        r = mdb_put(txn, meta, &k, &v, 0);
        if (r != 0)
                return lmdb_errno(r);
        for (size_t i = 0; i < n; i++) {
                char key[64], val[64];
                int kl = snprintf(key, sizeof(key), "%s%s", V0_SESSION_KEY_PREFIX, session_ids[i]);
                int vl = snprintf(val, sizeof(val), "%zu %s", V0_FIXTURE_PID_BASE + i, V0_FIXTURE_PHASE);
                k = (MDB_val){ .mv_size = (size_t) kl, .mv_data = key };
                v = (MDB_val){ .mv_size = (size_t) vl, .mv_data = val };
                r = mdb_put(txn, state, &k, &v, 0);
                if (r != 0)
                        return lmdb_errno(r);
        }
        return txn_commit(&txn);
}

/* ---- process identity ---- */

/* Fields of /proc/PID/stat: 3 (state) and 22 (starttime). comm (field 2)
 * may hold spaces and parentheses, so parse after the last ')'. */
static int proc_stat_read(int pid, char *ret_state, uint64_t *ret_start_time) {
        char path[sizeof("/proc//stat") + 3 * sizeof(int)];
        (void) snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : negative_errno();

        char buf[4096];
        size_t len = 0;
        for (;;) {
                if (len >= sizeof(buf) - 1)
                        return -EBADMSG;
                ssize_t k = read(fd, buf + len, sizeof(buf) - 1 - len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == ESRCH ? -ESRCH : negative_errno();
                }
                if (k == 0)
                        break;
                len += (size_t) k;
        }
        buf[len] = '\0';
        if (strlen(buf) != len)
                return -EBADMSG;

        char *p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        p++;

        char state = 0;
        uint64_t start_time = 0;
        int field = 2;
        char *save = NULL;
        for (char *tok = strtok_r(p, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
                field++;
                if (field == 3) {
                        if (tok[0] == '\0' || tok[1] != '\0')
                                return -EBADMSG;
                        state = tok[0];
                } else if (field == 22) {
                        if (tok[0] < '0' || tok[0] > '9')
                                return -EBADMSG;
                        char *end;
                        errno = 0;
                        unsigned long long v = strtoull(tok, &end, 10);
                        if (errno != 0 || *end != '\0')
                                return -EBADMSG;
                        start_time = v;
                        break;
                }
        }
        if (field != 22)
                return -EBADMSG;
        *ret_state = state;
        *ret_start_time = start_time;
        return 0;
}

int process_identity_of(int pid, ProcessIdentity *ret) {
        if (pid <= 0 || !ret)
                return -EINVAL;
        char state;
        uint64_t start_time;
        int r = proc_stat_read(pid, &state, &start_time);
        if (r < 0)
                return r;
        *ret = (ProcessIdentity){ .pid = pid, .start_time = start_time };
        return 0;
}

bool process_identity_alive(const ProcessIdentity *id) {
        if (!id || id->pid <= 0)
                return false;
        char state;
        uint64_t start_time;
        if (proc_stat_read(id->pid, &state, &start_time) < 0)
                return false;
        if (start_time != id->start_time)
                return false;
        /* A zombie has exited; only its pid remains until it is reaped. */
        return state != 'Z' && state != 'X' && state != 'x';
}

json_t *process_identity_to_json(const ProcessIdentity *id) {
        if (!id || id->pid <= 0 || id->start_time > (uint64_t) INT64_MAX)
                return NULL;
        return json_pack("{s:i,s:I}", "pid", id->pid, "start_time", (json_int_t) id->start_time);
}

int process_identity_from_json(json_t *j, ProcessIdentity *ret) {
        if (!json_is_object(j) || !ret)
                return -EINVAL;
        json_t *pid = json_object_get(j, "pid"), *st = json_object_get(j, "start_time");
        if (!json_is_integer(pid) || !json_is_integer(st))
                return -EINVAL;
        json_int_t p = json_integer_value(pid), t = json_integer_value(st);
        if (p <= 0 || p > INT_MAX || t < 0)
                return -EINVAL;
        *ret = (ProcessIdentity){ .pid = (int) p, .start_time = (uint64_t) t };
        return 0;
}
