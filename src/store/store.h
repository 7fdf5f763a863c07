/* SPDX-License-Identifier: MIT */
#pragma once

/* The Domain Store (spec §4.4, schema "Domain Store", decision 12): one LMDB
 * environment per Domain Root, opened by exactly one process, the Session
 * Coordinator. Other processes ask the coordinator over the control socket.
 *
 * Layout under the Domain Root DIR:
 *   DIR/store.lock   flock(LOCK_EX) held for as long as the store is open
 *   DIR/store/       the LMDB environment (data.mdb, lock.mdb), mode 0700
 *
 * Tables (LMDB named databases), values are JSON objects (jansson), keys are
 * big-endian integers unless noted:
 *   meta          "schema" -> {schema_id, schema_version}   (StoreMetadata)
 *   domain        "domain" -> {domain_id, profile_name, canonical_workspace}
 *   generations   u64 generation_id -> Generation
 *   participants  u64 participant_id -> Participant
 *   sessions      session_id (36-char uuid text) -> Session
 *   terminals     session_id -> SessionTerminal
 *
 * Every resource is recorded (Intent) before it is made and marked Clean after
 * it is gone, so a coordinator that opens a store left by a dead one can find
 * and remove the leftovers (store_list_unclean).
 *
 * Every function below is one LMDB transaction (all of its changes or none)
 * and may be called from any thread (the environment uses MDB_NOTLS);
 * records are returned as new JSON objects owned by the caller. Errors
 * common to all: -EINVAL for bad arguments, -ENOENT for a missing record,
 * -EBADMSG for a stored value that is not a JSON object of the expected
 * shape (values over 1 MiB included), -ENOSPC when the 64 MiB map is full,
 * -EFBIG for a record over 1 MiB. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

#define STORE_SCHEMA_ID      "lazaret.domain-store"
#define STORE_SCHEMA_VERSION 3

typedef struct Store Store;

typedef enum ParticipantState {
        PARTICIPANT_INTENT,
        PARTICIPANT_LEASE_HELD,
        PARTICIPANT_PREPARED,
        PARTICIPANT_COMMITTED,
        PARTICIPANT_RELEASE_INTENT,
        PARTICIPANT_CLEAN,
        _PARTICIPANT_STATE_MAX,
        _PARTICIPANT_STATE_INVALID = -EINVAL,
} ParticipantState;

/* Which ParticipantOwnership variant a participant carries (schema). */
typedef enum ParticipantRole {
        ROLE_PREPARED_LOWER,
        ROLE_STATE_ANCHOR,
        ROLE_GIT_ROUTING,
        ROLE_NETWORK,
        ROLE_HELPER,
        ROLE_SANDBOX,
        ROLE_PUBLICATION,
        _ROLE_MAX,
        _ROLE_INVALID = -EINVAL,
} ParticipantRole;

typedef enum TerminalState {
        TERMINAL_INTENT,
        TERMINAL_RUNNING,
        TERMINAL_RELEASE_INTENT,
        TERMINAL_CLEAN,
        _TERMINAL_STATE_MAX,
        _TERMINAL_STATE_INVALID = -EINVAL,
} TerminalState;

/* A generation's durable_decision and a session's session_phase: the
 * application's values (the schema records them as strings). */
typedef enum GenerationDecision {
        GENERATION_STARTING,
        GENERATION_RUNNING,
        GENERATION_FAILED, /* its start failed; what it made is released */
        GENERATION_TORN_DOWN, /* ended by its coordinator */
        GENERATION_ABANDONED, /* its coordinator died; a successor recovered it */
        _GENERATION_DECISION_MAX,
        _GENERATION_DECISION_INVALID = -EINVAL,
} GenerationDecision;

typedef enum SessionPhase {
        SESSION_OPENING,
        SESSION_RUNNING,
        _SESSION_PHASE_MAX,
        _SESSION_PHASE_INVALID = -EINVAL,
} SessionPhase;

/* "Intent", "LeaseHeld", ... (schema spelling) and back. */
const char *participant_state_to_string(ParticipantState s);
ParticipantState participant_state_from_string(const char *s);
const char *participant_role_to_string(ParticipantRole r); /* "Sandbox", "Publication", ... */
ParticipantRole participant_role_from_string(const char *s);
const char *terminal_state_to_string(TerminalState s);
TerminalState terminal_state_from_string(const char *s);
const char *generation_decision_to_string(GenerationDecision d); /* "Starting", "TornDown", ... */
GenerationDecision generation_decision_from_string(const char *s);
const char *session_phase_to_string(SessionPhase p); /* "Opening", "Running" */
SessionPhase session_phase_from_string(const char *s);

/* Forward transitions only: each state may move to any later state in the
 * order Intent < LeaseHeld < Prepared < Committed < ReleaseIntent < Clean
 * (so a failed creation goes Intent -> ReleaseIntent -> Clean); Clean is
 * final. Same for terminals. */
bool participant_transition_valid(ParticipantState from, ParticipantState to);
bool terminal_transition_valid(TerminalState from, TerminalState to);

/* Open (creating if needed) the store of the Domain Root dir. Takes an
 * exclusive flock on dir/store.lock: with wait_usec == 0 it fails at once
 * with -EBUSY when another process holds it, otherwise it retries until
 * wait_usec has passed, then -EBUSY. A store of an older schema version is
 * migrated in one transaction (store_migrate); a newer one is refused with
 * -EPROTONOSUPPORT. domain fills the domain table on first open; on later
 * opens it must match (-EXDEV otherwise).
 * domain may be NULL to open an existing store without the check (-EINVAL
 * when there is no domain record yet). -EBADMSG: the environment holds
 * something other than a Lazaret domain store (foreign schema_id, unknown
 * layout). The lock is on an open file description: a fork() child shares
 * it until it exits or execs (the fd is O_CLOEXEC). */
typedef struct StoreDomain {
        const char *domain_id; /* the 12-hex-digit domain hash */
        const char *profile_name;
        const char *canonical_workspace;
} StoreDomain;
int store_open(const char *dir, const StoreDomain *domain, uint64_t wait_usec, Store **ret);

/* Close the environment and release the lock. Accepts NULL, returns NULL.
 * Free any StoreWorker of s first. */
Store *store_close(Store *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Store *, store_close)

int store_schema_version(Store *s, unsigned *ret);

/* Generations. info holds configuration_fingerprint, coordinator_id,
 * network_sidecar_id, sandbox_id, durable_decision (strings; may be null);
 * the store adds domain_id and generation_id. Ids count up from 1.
 * info and fields may not set domain_id or generation_id (-EINVAL); the
 * schema fields absent from info are recorded as null. info may be NULL. */
int store_generation_begin(Store *s, json_t *info, uint64_t *ret_generation_id);
/* Merge fields into a generation record (e.g. sandbox_id, durable_decision). */
int store_generation_update(Store *s, uint64_t generation_id, json_t *fields);
/* New reference to the record, or -ENOENT. */
int store_generation_get(Store *s, uint64_t generation_id, json_t **ret);
int store_generation_last(Store *s, uint64_t *ret_generation_id); /* -ENOENT if none */

/* Participants. Added in state Intent with its ownership object (the schema
 * variant for role, e.g. for Sandbox {container_id, runtime_root,
 * host_coordinator: {pid, start_time}, ...}). set_state checks the transition
 * (-EINVAL when not allowed) and, when ownership is non-NULL, merges those
 * fields into the recorded ownership in the same transaction.
 * add: -ENOENT when the generation does not exist; ownership may be NULL
 * ({}). set_state: on -EINVAL the record is left unchanged. The merge is
 * one level deep (json_object_update). */
int store_participant_add(Store *s, uint64_t generation_id, ParticipantRole role, json_t *ownership,
                          uint64_t *ret_participant_id);
int store_participant_set_state(Store *s, uint64_t participant_id, ParticipantState state, json_t *ownership);
/* Merge ownership fields without a state change (a Clean record is final:
 * -EINVAL). */
int store_participant_update(Store *s, uint64_t participant_id, json_t *ownership);
int store_participant_get(Store *s, uint64_t participant_id, json_t **ret);

/* Every participant not in state Clean, of any generation, oldest first, as a
 * JSON array of records {participant_id, generation_id, role, state,
 * ownership}. New reference. */
int store_list_unclean(Store *s, json_t **ret);

/* Sessions (schema Session: generation_id, session_id, cli_id,
 * session_anchor_id, session_phase) and their terminals (SessionTerminal:
 * generation_id, session_id, state, container_id, plus the identities
 * host_coordinator, pty_master, exec_client, guest_process as objects). */
int store_session_put(Store *s, json_t *session); /* insert or replace, keyed by session_id */
int store_session_update(Store *s, const char *session_id, json_t *fields);
int store_session_get(Store *s, const char *session_id, json_t **ret);
/* The terminal starts in the state it names. -ENOENT when the session is
 * not recorded; -EEXIST when the session's terminal is recorded and not
 * Clean (its record must not be forgotten); a Clean one is replaced. */
int store_terminal_put(Store *s, json_t *terminal);
/* fields may not hold state or another session_id (-EINVAL). */
int store_terminal_set_state(Store *s, const char *session_id, TerminalState state, json_t *fields);
/* Every terminal not Clean, as a JSON array. */
int store_list_unclean_terminals(Store *s, json_t **ret);

/* The escalation audit trail (spec §4.4): append-only records, each
 * chained to the one before. store_audit_append() takes the caller's fields
 * (an object without "seq", "prev_hash" or "hash") and adds "seq" (1, 2,
 * ...), "prev_hash" (the previous record's hash; 64 zeros for the first) and
 * "hash": SHA-256 over "lazaret/audit-record/v1\n" and the record's compact,
 * key-sorted, ASCII JSON without "hash". store_audit_list() gives every
 * record in order. audit_verify() checks such a list: 0, or -EBADMSG with
 * the seq of the first record that breaks the chain and why (a changed
 * record, a missing one, a broken link). Removing records from the end is
 * not visible in the chain itself. */
int store_audit_append(Store *s, json_t *fields, uint64_t *ret_seq);
int store_audit_list(Store *s, json_t **ret);
/* The same from the Domain Root dir, read-only and without the store lock
 * (a coordinator may be running and appending): -ENOENT without a store. */
int store_audit_read(const char *dir, json_t **ret);
int audit_verify(json_t *records, uint64_t *ret_bad_seq, const char **ret_why);

/* Explicit migrations (spec §4.4.3): table-to-table copies in one
 * transaction. Exposed for tests; store_open calls it. Returns the version
 * migrated from (STORE_SCHEMA_VERSION when there was nothing to do), or
 * -errno; on failure the store is left exactly as it was. Version 0 to 1:
 * each "session:<uuid>" -> "<cli_pid> <phase>" becomes a sessions record
 * {session_id, cli_id: "pid:<cli_pid>", session_phase: <phase>,
 * generation_id: 0, session_anchor_id: null}; the state table is dropped.
 * Any other key or value in it fails the migration (-EBADMSG). Version 1
 * to 2: the audit table is added, empty. Version 2 to 3: the unclean
 * index, a key for each participant and terminal record not Clean, made
 * from them (recovery reads those instead of every record a Domain ever
 * made: a start read them all, more with each run). */
int store_migrate(Store *s);

/* Test support: write a version-0 store (the shape before this schema: a
 * single "state" table of "session:<uuid>" -> "<cli_pid> <phase>" text
 * values, and meta "schema_version" = "0") into dir, so the migration has a
 * real fixture to convert. Session i is recorded as "<1000 + i> Attached".
 * Takes the store lock (-EBUSY); -EEXIST when dir already has a store. */
int store_write_v0_fixture(const char *dir, const char *const *session_ids, size_t n);

/* Process identity of a host process: pid and start time (field 22 of
 * /proc/PID/stat, clock ticks since boot). process_identity_alive() is true
 * only while a process with that pid AND that start time exists, so pid reuse
 * is never mistaken for the original. A zombie (exited, not yet reaped) is
 * not alive. process_identity_of() returns -ESRCH when there is no such
 * process. process_identity_to_json() gives {pid, start_time}, NULL on
 * OOM or an invalid identity; _from_json() returns -EINVAL unless both are
 * integers in range. */
typedef struct ProcessIdentity {
        int pid;
        uint64_t start_time;
} ProcessIdentity;
int process_identity_of(int pid, ProcessIdentity *ret);
bool process_identity_alive(const ProcessIdentity *id);
json_t *process_identity_to_json(const ProcessIdentity *id);
int process_identity_from_json(json_t *j, ProcessIdentity *ret);

/* Worker thread for store transactions, so the event loop never waits on a
 * disk sync (spec §4.4.2). Jobs run in submission order on one thread;
 * their completions are queued and run on the loop thread when the loop
 * calls store_worker_dispatch() after store_worker_fd() became readable
 * (an eventfd).
 * A job's userdata belongs to the job until its done callback runs; done may
 * be NULL. submit returns -ESHUTDOWN once free has begun stopping the
 * thread. dispatch does nothing when called from inside a callback. */
typedef struct StoreWorker StoreWorker;
typedef int (*StoreJobFn)(Store *s, void *userdata);
typedef void (*StoreDoneFn)(int result, void *userdata);
int store_worker_new(Store *s, StoreWorker **ret);
int store_worker_fd(StoreWorker *w);
int store_worker_submit(StoreWorker *w, StoreJobFn fn, StoreDoneFn done, void *userdata);
/* Run the callbacks of finished jobs. Returns how many ran. */
int store_worker_dispatch(StoreWorker *w);
/* Wait for every submitted job to finish and run the remaining callbacks;
 * then stop the thread. Accepts NULL, returns NULL. Jobs that callbacks
 * submit while it drains run too. Must not be called from a callback. */
StoreWorker *store_worker_free(StoreWorker *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(StoreWorker *, store_worker_free)
