/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "ctl-proto.h"
#include "fd-util.h"
#include "lmdb-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"

#define CATALOG_MAP_SIZE       ((size_t) 16 * 1024 * 1024)
#define CATALOG_LOCK_USEC      (UINT64_C(300) * 1000000) /* another user may be mounting */
#define CATALOG_SCHEMA_ID      "lazaret/storage-catalog"
#define CATALOG_SCHEMA_VERSION 1

typedef struct Catalog {
        int lock_fd;
        MDB_env *env;
        MDB_dbi meta, artifacts, leases, operations;
} Catalog;

static void catalog_close(Catalog *c) {
        if (c->env)
                mdb_env_close(c->env);
        safe_close(c->lock_fd); /* only after the environment */
        *c = (Catalog){ .lock_fd = -EBADF };
}

static int catalog_open(const char *dir, Catalog *ret) {
        Catalog c = { .lock_fd = -EBADF };
        _cleanup_free_ char *lock = path_join(dir, "catalog.lock"), *envp = path_join(dir, "lmdb");
        if (!lock || !envp)
                return -ENOMEM;
        int r = lmdb_env_dir_prepare(dir);
        if (r >= 0)
                r = lmdb_lock_acquire(lock, CATALOG_LOCK_USEC, &c.lock_fd);
        if (r >= 0)
                r = lmdb_env_dir_prepare(envp);
        if (r >= 0)
                r = lmdb_errno(mdb_env_create(&c.env));
        if (r >= 0)
                r = lmdb_errno(mdb_env_set_maxdbs(c.env, 8));
        if (r >= 0)
                r = lmdb_errno(mdb_env_set_mapsize(c.env, CATALOG_MAP_SIZE));
        if (r >= 0)
                r = lmdb_errno(mdb_env_open(c.env, envp, MDB_NOTLS, 0600));
        if (r < 0) {
                catalog_close(&c);
                return r;
        }
        int dead;
        (void) mdb_reader_check(c.env, &dead);

        _cleanup_txn_ MDB_txn *txn = NULL;
        r = lmdb_errno(mdb_txn_begin(c.env, NULL, 0, &txn));
        if (r >= 0)
                r = lmdb_errno(mdb_dbi_open(txn, "meta", MDB_CREATE, &c.meta));
        if (r >= 0)
                r = lmdb_errno(mdb_dbi_open(txn, "artifacts", MDB_CREATE, &c.artifacts));
        if (r >= 0)
                r = lmdb_errno(mdb_dbi_open(txn, "leases", MDB_CREATE, &c.leases));
        if (r >= 0)
                r = lmdb_errno(mdb_dbi_open(txn, "operations", MDB_CREATE, &c.operations));
        if (r >= 0) {
                MDB_val k = { .mv_size = 6, .mv_data = (void *) "schema" }, v;
                int q = mdb_get(txn, c.meta, &k, &v);
                if (q == MDB_NOTFOUND) {
                        char text[128];
                        int n = snprintf(text, sizeof(text), "{\"schema_id\": \"%s\", \"schema_version\": %d}",
                                         CATALOG_SCHEMA_ID, CATALOG_SCHEMA_VERSION);
                        v = (MDB_val){ .mv_size = (size_t) n, .mv_data = text };
                        r = lmdb_errno(mdb_put(txn, c.meta, &k, &v, 0));
                } else if (q == 0) {
                        json_t *j = json_loadb(v.mv_data, v.mv_size, 0, NULL);
                        if (!j || !streq(json_string_value(json_object_get(j, "schema_id")) ?: "", CATALOG_SCHEMA_ID) ||
                            json_integer_value(json_object_get(j, "schema_version")) != CATALOG_SCHEMA_VERSION)
                                r = -EPROTO;
                        json_decref(j);
                } else
                        r = lmdb_errno(q);
        }
        if (r >= 0)
                r = lmdb_errno(mdb_txn_commit(TAKE_PTR(txn)));
        if (r < 0) {
                catalog_close(&c);
                return r;
        }
        *ret = c;
        return 0;
}

static int get_json(MDB_txn *txn, MDB_dbi dbi, const char *key, json_t **ret) {
        MDB_val k = { .mv_size = strlen(key), .mv_data = (void *) key }, v;
        int r = mdb_get(txn, dbi, &k, &v);
        if (r != 0)
                return lmdb_errno(r);
        *ret = json_loadb(v.mv_data, v.mv_size, JSON_REJECT_DUPLICATES, NULL);
        return *ret ? 0 : -EBADMSG;
}

/* Takes ownership of j. */
static int put_json(MDB_txn *txn, MDB_dbi dbi, const char *key, json_t *j) {
        if (!j)
                return -ENOMEM;
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        if (!text)
                return -ENOMEM;
        MDB_val k = { .mv_size = strlen(key), .mv_data = (void *) key },
                v = { .mv_size = strlen(text), .mv_data = text };
        int r = lmdb_errno(mdb_put(txn, dbi, &k, &v, 0));
        free(text);
        return r;
}

static int del_key(MDB_txn *txn, MDB_dbi dbi, const char *key) {
        MDB_val k = { .mv_size = strlen(key), .mv_data = (void *) key };
        int r = mdb_del(txn, dbi, &k, NULL);
        return r == MDB_NOTFOUND ? 0 : lmdb_errno(r);
}

static char *lease_key(const char *artifact, const char *domain, uint64_t generation) {
        char *k = NULL;
        if (asprintf(&k, "%s\n%s\n%" PRIu64, artifact, domain, generation) < 0)
                return NULL;
        return k;
}

/* Keys of dbi, optionally only those starting with prefix. */
static int list_keys(MDB_txn *txn, MDB_dbi dbi, const char *prefix, json_t **ret) {
        _cleanup_cursor_ MDB_cursor *cur = NULL;
        int r = lmdb_errno(mdb_cursor_open(txn, dbi, &cur));
        if (r < 0)
                return r;
        json_t *a = json_array();
        if (!a)
                return -ENOMEM;
        MDB_val k, v;
        size_t plen = prefix ? strlen(prefix) : 0;
        for (int q = mdb_cursor_get(cur, &k, &v, MDB_FIRST); q == 0; q = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
                if (plen && (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0))
                        continue;
                if (json_array_append_new(a, json_stringn(k.mv_data, k.mv_size)) < 0) {
                        json_decref(a);
                        return -ENOMEM;
                }
        }
        *ret = a;
        return 0;
}

static int leases_of(MDB_txn *txn, Catalog *c, const char *artifact, size_t *ret_n) {
        _cleanup_free_ char *prefix = NULL;
        if (asprintf(&prefix, "%s\n", artifact) < 0)
                return -ENOMEM;
        json_t *keys = NULL;
        int r = list_keys(txn, c->leases, prefix, &keys);
        if (r < 0)
                return r;
        *ret_n = json_array_size(keys);
        json_decref(keys);
        return 0;
}

/* Finish what a dead user left: a mount whose artifact was never recorded
 * is given back; an artifact that would not unmount is tried again. */
static int tidy(Catalog *c, const CatalogMounter *m) {
        _cleanup_txn_ MDB_txn *txn = NULL;
        int r = lmdb_errno(mdb_txn_begin(c->env, NULL, 0, &txn));
        if (r < 0)
                return r;
        json_t *ops = NULL;
        r = list_keys(txn, c->operations, NULL, &ops);
        if (r < 0)
                return r;
        size_t i;
        json_t *key;
        json_array_foreach(ops, i, key) {
                json_t *op = NULL, *art = NULL;
                if (get_json(txn, c->operations, json_string_value(key), &op) == 0) {
                        const char *id = json_string_value(json_object_get(op, "expected_artifact_id"));
                        if (id && get_json(txn, c->artifacts, id, &art) == -ENOENT)
                                (void) m->unmount(m->userdata, id);
                }
                json_decref(op);
                json_decref(art);
                (void) del_key(txn, c->operations, json_string_value(key));
        }
        json_decref(ops);

        json_t *arts = NULL;
        r = list_keys(txn, c->artifacts, NULL, &arts);
        if (r < 0)
                return r;
        json_array_foreach(arts, i, key) {
                const char *id = json_string_value(key);
                json_t *art = NULL;
                size_t n = 0;
                if (get_json(txn, c->artifacts, id, &art) == 0 &&
                    streq(json_string_value(json_object_get(art, "state")) ?: "", "Reclaiming") &&
                    leases_of(txn, c, id, &n) == 0 && n == 0 && m->unmount(m->userdata, id) == 0)
                        (void) del_key(txn, c->artifacts, id);
                json_decref(art);
        }
        json_decref(arts);
        return lmdb_errno(mdb_txn_commit(TAKE_PTR(txn)));
}

static json_t *artifact_record(const CatalogLease *l, const char *path, const char *state) {
        return json_pack("{s:s, s:s, s:s, s:s}", "prepared_artifact_id", l->artifact_id, "source_identity",
                         l->source_identity, "path", path, "state", state);
}

int catalog_lease(const char *dir, const CatalogLease *l, const CatalogMounter *m, char **ret_path, char **ret_error) {
        Catalog c;
        int r = catalog_open(dir, &c);
        if (r < 0) {
                if (asprintf(ret_error, "cannot open the storage catalog in %s: %s", dir, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        (void) tidy(&c, m);
        _cleanup_free_ char *lkey = lease_key(l->artifact_id, l->domain_id, l->generation_id), *path = NULL,
                            *err = NULL;
        json_t *lrec = json_pack("{s:s, s:s, s:I}", "prepared_artifact_id", l->artifact_id, "domain_id", l->domain_id,
                                 "generation_id", (json_int_t) l->generation_id);
        if (!lkey || !lrec) {
                json_decref(lrec);
                catalog_close(&c);
                return -ENOMEM;
        }

        /* Held already (by any Domain) and still there: one more lease. */
        _cleanup_txn_ MDB_txn *txn = NULL;
        json_t *art = NULL;
        r = lmdb_errno(mdb_txn_begin(c.env, NULL, 0, &txn));
        if (r >= 0 && get_json(txn, c.artifacts, l->artifact_id, &art) == 0) {
                const char *p = json_string_value(json_object_get(art, "path"));
                if (p && m->valid(m->userdata, p)) {
                        path = strdup(p);
                        r = path ? put_json(txn, c.artifacts, l->artifact_id, artifact_record(l, p, "Available"))
                                 : -ENOMEM;
                        if (r >= 0)
                                r = put_json(txn, c.leases, lkey, TAKE_PTR(lrec));
                        if (r >= 0)
                                r = lmdb_errno(mdb_txn_commit(TAKE_PTR(txn)));
                }
        }
        json_decref(art);
        if (r < 0 || path)
                goto done;

        /* Not mounted: record the operation, mount, record the artifact. */
        char op_id[37];
        r = ctl_uuid_v4(op_id);
        if (r >= 0)
                r = put_json(txn, c.operations, op_id,
                             json_pack("{s:s, s:s, s:s, s:n}", "operation_id", op_id, "expected_artifact_id",
                                       l->artifact_id, "source_identity", l->source_identity, "stage_path"));
        if (r >= 0)
                r = lmdb_errno(mdb_txn_commit(TAKE_PTR(txn)));
        if (r < 0)
                goto done;
        int mr = m->mount(m->userdata, l->artifact_id, &path, &err);
        r = lmdb_errno(mdb_txn_begin(c.env, NULL, 0, &txn));
        if (r >= 0 && mr >= 0)
                r = put_json(txn, c.artifacts, l->artifact_id, artifact_record(l, path, "Available"));
        if (r >= 0 && mr >= 0)
                r = put_json(txn, c.leases, lkey, TAKE_PTR(lrec));
        if (r >= 0)
                r = del_key(txn, c.operations, op_id);
        if (r >= 0)
                r = lmdb_errno(mdb_txn_commit(TAKE_PTR(txn)));
        if (mr < 0) {
                *ret_error = TAKE_PTR(err);
                r = mr;
        }
done:
        json_decref(lrec);
        catalog_close(&c);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path);
        return 0;
}

int catalog_release(const char *dir, const char *artifact_id, const char *domain_id, uint64_t generation_id,
                    const CatalogMounter *m) {
        Catalog c;
        int r = catalog_open(dir, &c);
        if (r < 0)
                return r;
        (void) tidy(&c, m);
        _cleanup_free_ char *lkey = lease_key(artifact_id, domain_id, generation_id);
        _cleanup_txn_ MDB_txn *txn = NULL;
        r = lkey ? lmdb_errno(mdb_txn_begin(c.env, NULL, 0, &txn)) : -ENOMEM;
        if (r >= 0)
                r = del_key(txn, c.leases, lkey);
        size_t n = 0;
        json_t *art = NULL;
        if (r >= 0)
                r = leases_of(txn, &c, artifact_id, &n);
        int ur = 0;
        if (r >= 0 && n == 0 && get_json(txn, c.artifacts, artifact_id, &art) == 0) {
                ur = m->unmount(m->userdata, artifact_id);
                if (ur >= 0)
                        r = del_key(txn, c.artifacts, artifact_id);
                else {
                        json_object_set_new(art, "state", json_string("Reclaiming"));
                        r = put_json(txn, c.artifacts, artifact_id, json_incref(art));
                }
        }
        json_decref(art);
        if (r >= 0)
                r = lmdb_errno(mdb_txn_commit(TAKE_PTR(txn)));
        catalog_close(&c);
        return r < 0 ? r : ur;
}

static int dump_table(MDB_txn *txn, MDB_dbi dbi, json_t *into) {
        _cleanup_cursor_ MDB_cursor *cur = NULL;
        int r = lmdb_errno(mdb_cursor_open(txn, dbi, &cur));
        if (r < 0)
                return r;
        MDB_val k, v;
        for (int q = mdb_cursor_get(cur, &k, &v, MDB_FIRST); q == 0; q = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
                json_t *j = json_loadb(v.mv_data, v.mv_size, 0, NULL);
                if (!j || json_array_append_new(into, j) < 0)
                        return -EBADMSG;
        }
        return 0;
}

int catalog_dump(const char *dir, json_t **ret) {
        Catalog c;
        int r = catalog_open(dir, &c);
        if (r < 0)
                return r;
        json_t *j = json_pack("{s:[], s:[], s:[]}", "artifacts", "leases", "operations");
        _cleanup_txn_ MDB_txn *txn = NULL;
        r = j ? lmdb_errno(mdb_txn_begin(c.env, NULL, MDB_RDONLY, &txn)) : -ENOMEM;
        if (r >= 0)
                r = dump_table(txn, c.artifacts, json_object_get(j, "artifacts"));
        if (r >= 0)
                r = dump_table(txn, c.leases, json_object_get(j, "leases"));
        if (r >= 0)
                r = dump_table(txn, c.operations, json_object_get(j, "operations"));
        if (txn)
                mdb_txn_abort(TAKE_PTR(txn));
        catalog_close(&c);
        if (r < 0) {
                json_decref(j);
                return r;
        }
        *ret = j;
        return 0;
}
