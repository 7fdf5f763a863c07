/* SPDX-License-Identifier: MIT */
/* The Domain Store's escalation audit trail (store.h, store-internal.h):
 * records chained by SHA-256, appended in one transaction each, listed,
 * read from a store another process holds, and verified. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "path-util.h"
#include "lmdb-util.h"
#include "store-internal.h"
#include "string-util.h"

/* ---- the escalation audit trail ---- */

#define AUDIT_HASH_DOMAIN "lazaret/audit-record/v1\n"
#define AUDIT_HASH_ZERO   "0000000000000000000000000000000000000000000000000000000000000000"

/* SHA-256 (hex) over the domain separator and the record's canonical JSON
 * without its "hash". */
static int audit_hash(json_t *record, char ret[65]) {
        _cleanup_json_ json_t *copy = json_copy(record);
        if (!copy)
                return -ENOMEM;
        (void) json_object_del(copy, "hash");
        _cleanup_free_ char *text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
        if (!text)
                return -ENOMEM;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
                 EVP_DigestUpdate(ctx, AUDIT_HASH_DOMAIN, strlen(AUDIT_HASH_DOMAIN)) &&
                 EVP_DigestUpdate(ctx, text, strlen(text)) && EVP_DigestFinal_ex(ctx, md, &n);
        EVP_MD_CTX_free(ctx);
        if (!ok || n != 32)
                return -EIO;
        for (unsigned i = 0; i < n; i++)
                snprintf(ret + 2 * i, 3, "%02x", md[i]);
        return 0;
}

int store_audit_append(Store *s, json_t *fields, uint64_t *ret_seq) {
        if (!s || !json_is_object(fields) || json_object_get(fields, "seq") || json_object_get(fields, "prev_hash") ||
            json_object_get(fields, "hash"))
                return -EINVAL;
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, true, &txn);
        if (r < 0)
                return r;
        /* The last record gives the sequence number and the link. */
        char prev[65] = AUDIT_HASH_ZERO;
        uint64_t seq = 1;
        {
                _cleanup_cursor_ MDB_cursor *c = NULL;
                r = lmdb_errno(mdb_cursor_open(txn, s->dbi_audit, &c));
                if (r < 0)
                        return r;
                MDB_val k, v;
                int q = mdb_cursor_get(c, &k, &v, MDB_LAST);
                if (q == 0) {
                        uint64_t last;
                        _cleanup_json_ json_t *rec = NULL;
                        r = key_to_u64(&k, &last);
                        if (r >= 0)
                                r = value_decode(&v, &rec);
                        if (r < 0)
                                return r;
                        const char *h = json_string_value(json_object_get(rec, "hash"));
                        if (!h || strlen(h) != 64)
                                return -EBADMSG;
                        memcpy(prev, h, 65);
                        seq = last + 1;
                } else if (q != MDB_NOTFOUND)
                        return lmdb_errno(q);
        }
        _cleanup_json_ json_t *rec = json_deep_copy(fields);
        if (!rec || json_object_set_new(rec, "seq", json_integer((json_int_t) seq)) < 0 ||
            json_object_set_new(rec, "prev_hash", json_string(prev)) < 0)
                return -ENOMEM;
        char hash[65];
        r = audit_hash(rec, hash);
        if (r < 0)
                return r;
        if (json_object_set_new(rec, "hash", json_string(hash)) < 0)
                return -ENOMEM;
        uint64_t kb;
        MDB_val k = key_u64(seq, &kb);
        r = record_put(txn, s->dbi_audit, &k, rec, MDB_NOOVERWRITE);
        if (r < 0)
                return r;
        r = txn_commit(&txn);
        if (r < 0)
                return r;
        if (ret_seq)
                *ret_seq = seq;
        return 0;
}

static int audit_list(MDB_txn *txn, MDB_dbi dbi, json_t **ret) {
        _cleanup_cursor_ MDB_cursor *c = NULL;
        int r = lmdb_errno(mdb_cursor_open(txn, dbi, &c));
        if (r < 0)
                return r;
        _cleanup_json_ json_t *list = json_array();
        if (!list)
                return -ENOMEM;
        MDB_val k, v;
        for (int q = mdb_cursor_get(c, &k, &v, MDB_FIRST); q == 0; q = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
                json_t *rec = NULL;
                r = value_decode(&v, &rec);
                if (r < 0)
                        return r;
                if (json_array_append_new(list, rec) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(list);
        return 0;
}

int store_audit_list(Store *s, json_t **ret) {
        if (!s || !ret)
                return -EINVAL;
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = txn_begin(s, false, &txn);
        if (r < 0)
                return r;
        return audit_list(txn, s->dbi_audit, ret);
}

int store_audit_read(const char *dir, json_t **ret) {
        _cleanup_free_ char *env_path = path_join(dir, "store");
        if (!env_path)
                return -ENOMEM;
        struct stat st;
        if (stat(env_path, &st) < 0)
                return negative_errno();
        _cleanup_(env_closep) MDB_env *env = NULL;
        int r = lmdb_errno(mdb_env_create(&env));
        if (r >= 0)
                r = lmdb_errno(mdb_env_set_maxdbs(env, STORE_MAX_DBS));
        if (r >= 0)
                r = lmdb_errno(mdb_env_set_mapsize(env, STORE_MAP_SIZE));
        /* Read-only, beside a coordinator that may be writing: LMDB's own
         * reader table keeps us consistent; the store lock is not ours. */
        if (r >= 0)
                r = lmdb_errno(mdb_env_open(env, env_path, MDB_RDONLY | MDB_NOTLS, 0600));
        if (r < 0)
                return r;
        _cleanup_txn_ MDB_txn *txn = NULL;
        r = lmdb_errno(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
        if (r < 0)
                return r;
        MDB_dbi dbi;
        int q = mdb_dbi_open(txn, TABLE_AUDIT, 0, &dbi);
        if (q == MDB_NOTFOUND) { /* a store from before the audit trail */
                *ret = json_array();
                return *ret ? 0 : -ENOMEM;
        }
        if (q != 0)
                return lmdb_errno(q);
        return audit_list(txn, dbi, ret);
}

int audit_verify(json_t *records, uint64_t *ret_bad_seq, const char **ret_why) {
        char prev[65] = AUDIT_HASH_ZERO;
        size_t i;
        json_t *rec;
        *ret_why = NULL;
        json_array_foreach(records, i, rec) {
                uint64_t want = (uint64_t) i + 1;
                json_t *seq = json_object_get(rec, "seq");
                const char *ph = json_string_value(json_object_get(rec, "prev_hash"));
                const char *h = json_string_value(json_object_get(rec, "hash"));
                *ret_bad_seq = want;
                if (!json_is_integer(seq) || (uint64_t) json_integer_value(seq) != want) {
                        *ret_why = "its sequence number is not the next one (a record before it is missing)";
                        return -EBADMSG;
                }
                if (!ph || !streq(ph, prev)) {
                        *ret_why = "it does not link to the record before it";
                        return -EBADMSG;
                }
                char got[65];
                int r = audit_hash(rec, got);
                if (r < 0)
                        return r;
                if (!h || !streq(h, got)) {
                        *ret_why = "its content does not match its hash (it was changed)";
                        return -EBADMSG;
                }
                memcpy(prev, got, sizeof(prev));
        }
        return 0;
}
