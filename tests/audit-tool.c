/* SPDX-License-Identifier: MIT */
/* For tests/integration/test_audit.py, until the escalation pipeline
 * writes the audit trail itself:
 *   audit-tool append DOMAIN_DIR JSON_OBJECT   append as the coordinator will
 *   audit-tool tamper DOMAIN_DIR SEQ FROM TO   replace the text FROM by TO in
 *                                              record SEQ with LMDB's own calls
 *                                              (no rehash), as an attacker would */
#include <endian.h>
#include <jansson.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

static int tamper(const char *dir, unsigned long long seq, const char *from, const char *to) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/store", dir);
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 16) || mdb_env_open(env, path, 0, 0600) ||
            mdb_txn_begin(env, NULL, 0, &txn) || mdb_dbi_open(txn, "audit", 0, &dbi))
                return fprintf(stderr, "audit-tool: cannot open %s\n", path), 1;
        uint64_t be = htobe64(seq);
        MDB_val k = { sizeof(be), &be }, v;
        if (mdb_get(txn, dbi, &k, &v))
                return fprintf(stderr, "audit-tool: no record %llu\n", seq), 1;
        char *text = malloc(v.mv_size + 1); /* LMDB values are not NUL-terminated */
        if (text) {
                memcpy(text, v.mv_data, v.mv_size);
                text[v.mv_size] = '\0';
        }
        char *at = text ? strstr(text, from) : NULL;
        if (!at || strlen(from) != strlen(to))
                return fprintf(stderr, "audit-tool: '%s' not in record %llu (or not the same length)\n", from, seq), 1;
        memcpy(at, to, strlen(to));
        MDB_val nv = { strlen(text), text };
        int r = mdb_put(txn, dbi, &k, &nv, 0) || mdb_txn_commit(txn);
        mdb_env_close(env);
        free(text);
        return r ? 1 : 0;
}

int main(int argc, char **argv) {
        if (argc == 4 && strcmp(argv[1], "append") == 0) {
                json_t *j = json_loads(argv[3], 0, NULL);
                Store *s = NULL;
                int r = j ? store_open(argv[2], NULL, 5000000, &s) : -1;
                if (r >= 0)
                        r = store_audit_append(s, j, NULL);
                store_close(s);
                json_decref(j);
                if (r < 0)
                        fprintf(stderr, "audit-tool: append failed (%d)\n", r);
                return r < 0;
        }
        if (argc == 6 && strcmp(argv[1], "tamper") == 0)
                return tamper(argv[2], strtoull(argv[3], NULL, 10), argv[4], argv[5]);
        fprintf(stderr, "usage: audit-tool append DIR JSON | tamper DIR SEQ FROM TO\n");
        return 2;
}
