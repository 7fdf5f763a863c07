/* SPDX-License-Identifier: MIT */
#pragma once

/* The Domain Store's insides (store.h is what its callers see), shared by
 * store.c (opening, schema, migrations, the helpers below), store-records.c
 * and store-audit.c: the Store, its tables' names and the key, value and
 * transaction helpers every part uses. */

#include <jansson.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* 64 MiB of address space; the file only grows as pages are used. Far above
 * what a Domain Root records (a few records per launch). */
#define STORE_MAP_SIZE ((size_t) 64 * 1024 * 1024)
#define STORE_MAX_DBS  16
/* No record comes near this; a bigger value is corruption or abuse. */
#define STORE_VALUE_MAX      ((size_t) 1024 * 1024)
#define STORE_LOCK_POLL_USEC ((uint64_t) 10000)

#define TABLE_META         "meta"
#define TABLE_DOMAIN       "domain"
#define TABLE_GENERATIONS  "generations"
#define TABLE_PARTICIPANTS "participants"
#define TABLE_SESSIONS     "sessions"
#define TABLE_TERMINALS    "terminals"
#define TABLE_AUDIT        "audit"
#define TABLE_UNCLEAN      "unclean"
/* Tags of the unclean index's keys: the table the record is in. */
#define UNCLEAN_PARTICIPANT 'p'
#define UNCLEAN_TERMINAL    't'
#define META_KEY_SCHEMA     "schema"
#define DOMAIN_KEY          "domain"

/* Version 0, before this schema (store_write_v0_fixture, migrate_v0_to_v1). */
#define V0_TABLE_STATE        "state"
#define V0_META_KEY_VERSION   "schema_version"
#define V0_SESSION_KEY_PREFIX "session:"
#define V0_FIXTURE_PHASE      "Attached"
#define V0_FIXTURE_PID_BASE   1000

struct Store {
        int lock_fd;
        MDB_env *env;
        /* Valid once store_open committed them; before that each
         * transaction opens its own (LMDB closes handles first opened in a
         * transaction that aborts). */
        bool dbis_open;
        MDB_dbi dbi_meta;
        MDB_dbi dbi_domain;
        MDB_dbi dbi_generations;
        MDB_dbi dbi_participants;
        MDB_dbi dbi_sessions;
        MDB_dbi dbi_terminals;
        MDB_dbi dbi_audit;
        MDB_dbi dbi_unclean; /* a key per participant or terminal not yet Clean */
        char *domain_id;
};

#define _cleanup_json_ _cleanup_(json_decrefp)

/* store.c */
void env_closep(MDB_env **e);
MDB_val key_u64(uint64_t id, uint64_t *buf);
int key_to_u64(const MDB_val *k, uint64_t *ret);
MDB_val key_str(const char *s);
/* The unclean index (TABLE_UNCLEAN): the record of the given table (tag)
 * and key is not Clean (unclean) or is (the key goes). In the transaction
 * that writes the record's state. */
int unclean_mark(MDB_txn *txn, MDB_dbi unclean, char tag, const MDB_val *key, bool is_unclean);
bool session_id_valid(const char *s);
int value_decode(const MDB_val *v, json_t **ret);
int record_get(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, json_t **ret);
int record_put(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, json_t *j, unsigned flags);
int object_set_new(json_t *o, const char *key, json_t *value);
int txn_begin(Store *s, bool write, MDB_txn **ret);
int txn_commit(MDB_txn **txn);
int table_next_id(MDB_txn *txn, MDB_dbi dbi, uint64_t *ret);
