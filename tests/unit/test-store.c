/* SPDX-License-Identifier: MIT */
/* Unit tests of src/store/store: the Domain Store on LMDB, its migration,
 * process identities and the worker thread. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <lmdb.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd-util.h"
#include "macro.h"
#include "store.h"

static const StoreDomain dom = { "0123456789ab", "shell", "/home/u/ws" };

#define U1 "11111111-1111-4111-8111-111111111111"
#define U2 "22222222-2222-4222-8222-222222222222"
#define U3 "33333333-3333-4333-8333-333333333333"

/* ---- temporary Domain Roots ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st;
        (void) flag;
        (void) ftw;
        return remove(path);
}

static int setup_dir(void **state) {
        char *d = strdup("/tmp/lazaret-store-XXXXXX");
        if (!d || !mkdtemp(d)) {
                free(d);
                return -1;
        }
        *state = d;
        return 0;
}

static int teardown_dir(void **state) {
        char *d = *state;
        int r = nftw(d, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(d);
        return r;
}

static char *subpath(const char *dir, const char *name) {
        char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        return p;
}

/* ---- raw LMDB access, to check and damage what the store wrote ---- */

static MDB_env *raw_open(const char *dir) {
        char *p = subpath(dir, "store");
        MDB_env *env = NULL;
        assert_int_equal(mkdir(p, 0700) == 0 || errno == EEXIST, 1);
        assert_int_equal(mdb_env_create(&env), 0);
        assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
        assert_int_equal(mdb_env_set_mapsize(env, (size_t) 64 * 1024 * 1024), 0);
        assert_int_equal(mdb_env_open(env, p, MDB_NOTLS, 0600), 0);
        free(p);
        return env;
}

/* The value of table[key] as a new string, or NULL when the table or the
 * key does not exist. */
static char *raw_get(const char *dir, const char *table, const char *key) {
        MDB_env *env = raw_open(dir);
        MDB_txn *txn;
        MDB_dbi dbi;
        char *out = NULL;
        assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
        if (mdb_dbi_open(txn, table, 0, &dbi) == 0) {
                MDB_val k = { strlen(key), (void *) key }, v;
                if (mdb_get(txn, dbi, &k, &v) == 0) {
                        /* Not strndup: LMDB values are not NUL-terminated, and
                         * ASan's strict_string_checks would read past the
                         * value into the map. */
                        out = malloc(v.mv_size + 1);
                        assert_non_null(out);
                        memcpy(out, v.mv_data, v.mv_size);
                        out[v.mv_size] = '\0';
                }
        }
        mdb_txn_abort(txn);
        mdb_env_close(env);
        return out;
}

static bool raw_table_exists(const char *dir, const char *table) {
        MDB_env *env = raw_open(dir);
        MDB_txn *txn;
        MDB_dbi dbi;
        assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
        bool exists = mdb_dbi_open(txn, table, 0, &dbi) == 0;
        mdb_txn_abort(txn);
        mdb_env_close(env);
        return exists;
}

static void raw_put(const char *dir, const char *table, const void *key, size_t klen, const void *val, size_t vlen) {
        MDB_env *env = raw_open(dir);
        MDB_txn *txn;
        MDB_dbi dbi;
        assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
        assert_int_equal(mdb_dbi_open(txn, table, MDB_CREATE, &dbi), 0);
        MDB_val k = { klen, (void *) key }, v = { vlen, (void *) val };
        assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
}

static void raw_put_str(const char *dir, const char *table, const char *key, const char *val) {
        raw_put(dir, table, key, strlen(key), val, strlen(val));
}

/* Every "key=value\n" of a table, in order, as one string (NULL if absent). */
static char *raw_dump(const char *dir, const char *table) {
        MDB_env *env = raw_open(dir);
        MDB_txn *txn;
        MDB_dbi dbi;
        MDB_cursor *c;
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
        if (mdb_dbi_open(txn, table, 0, &dbi) == 0) {
                FILE *f = open_memstream(&buf, &len);
                assert_non_null(f);
                assert_int_equal(mdb_cursor_open(txn, dbi, &c), 0);
                MDB_val k, v;
                for (int r = mdb_cursor_get(c, &k, &v, MDB_FIRST); r == 0; r = mdb_cursor_get(c, &k, &v, MDB_NEXT))
                        fprintf(f, "%.*s=%.*s\n", (int) k.mv_size, (char *) k.mv_data, (int) v.mv_size,
                                (char *) v.mv_data);
                mdb_cursor_close(c);
                fclose(f);
        }
        mdb_txn_abort(txn);
        mdb_env_close(env);
        return buf;
}

static Store *open_ok(const char *dir) {
        Store *s = NULL;
        assert_int_equal(store_open(dir, &dom, 0, &s), 0);
        assert_non_null(s);
        return s;
}

static void assert_json_eq(json_t *got, const char *want_text) {
        json_error_t err;
        json_t *want = json_loads(want_text, 0, &err);
        assert_non_null(want);
        if (!json_equal(got, want)) {
                char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
                print_error("got  %s\nwant %s\n", g ? g : "(null)", want_text);
                free(g);
                fail();
        }
        json_decref(want);
}

/* ---- names and state machines ---- */

static void test_names(void **state) {
        (void) state;
        const char *ps[] = { "Intent", "LeaseHeld", "Prepared", "Committed", "ReleaseIntent", "Clean" };
        for (int i = 0; i < _PARTICIPANT_STATE_MAX; i++) {
                assert_string_equal(participant_state_to_string(i), ps[i]);
                assert_int_equal(participant_state_from_string(ps[i]), i);
        }
        const char *roles[] = { "PreparedLower", "StateAnchor", "GitRouting", "Network",
                                "Helper",        "Sandbox",     "Publication" };
        for (int i = 0; i < _ROLE_MAX; i++) {
                assert_string_equal(participant_role_to_string(i), roles[i]);
                assert_int_equal(participant_role_from_string(roles[i]), i);
        }
        const char *ts[] = { "Intent", "Running", "ReleaseIntent", "Clean" };
        for (int i = 0; i < _TERMINAL_STATE_MAX; i++) {
                assert_string_equal(terminal_state_to_string(i), ts[i]);
                assert_int_equal(terminal_state_from_string(ts[i]), i);
        }
        assert_null(participant_state_to_string(_PARTICIPANT_STATE_MAX));
        assert_null(participant_state_to_string(_PARTICIPANT_STATE_INVALID));
        assert_null(participant_role_to_string(_ROLE_MAX));
        assert_null(terminal_state_to_string(_TERMINAL_STATE_MAX));
        assert_int_equal(participant_state_from_string("intent"), _PARTICIPANT_STATE_INVALID);
        assert_int_equal(participant_state_from_string(NULL), _PARTICIPANT_STATE_INVALID);
        assert_int_equal(participant_role_from_string("Sandbox "), _ROLE_INVALID);
        assert_int_equal(terminal_state_from_string("Prepared"), _TERMINAL_STATE_INVALID);
        const char *gd[] = { "Starting", "Running", "Failed", "TornDown", "Abandoned" };
        assert_int_equal(ELEMENTSOF(gd), _GENERATION_DECISION_MAX);
        for (int i = 0; i < _GENERATION_DECISION_MAX; i++) {
                assert_string_equal(generation_decision_to_string(i), gd[i]);
                assert_int_equal(generation_decision_from_string(gd[i]), i);
        }
        const char *sp[] = { "Opening", "Running" };
        assert_int_equal(ELEMENTSOF(sp), _SESSION_PHASE_MAX);
        for (int i = 0; i < _SESSION_PHASE_MAX; i++) {
                assert_string_equal(session_phase_to_string(i), sp[i]);
                assert_int_equal(session_phase_from_string(sp[i]), i);
        }
        assert_null(generation_decision_to_string(_GENERATION_DECISION_MAX));
        assert_null(session_phase_to_string(_SESSION_PHASE_INVALID));
        assert_int_equal(generation_decision_from_string("Torn Down"), _GENERATION_DECISION_INVALID);
        assert_int_equal(session_phase_from_string(NULL), _SESSION_PHASE_INVALID);
}

/* Written out by hand from the documented order, not computed. */
static const bool participant_ok[_PARTICIPANT_STATE_MAX][_PARTICIPANT_STATE_MAX] = {
        /*                 Int LH Prep Com RelI Clean */
        /* Intent */ { 0, 1, 1, 1, 1, 1 },
        /* LeaseHeld */ { 0, 0, 1, 1, 1, 1 },
        /* Prepared */ { 0, 0, 0, 1, 1, 1 },
        /* Committed */ { 0, 0, 0, 0, 1, 1 },
        /* ReleaseIntent */ { 0, 0, 0, 0, 0, 1 },
        /* Clean */ { 0, 0, 0, 0, 0, 0 },
};

static const bool terminal_ok[_TERMINAL_STATE_MAX][_TERMINAL_STATE_MAX] = {
        /* Intent */ { 0, 1, 1, 1 },
        /* Running */ { 0, 0, 1, 1 },
        /* ReleaseIntent */ { 0, 0, 0, 1 },
        /* Clean */ { 0, 0, 0, 0 },
};

static void test_transition_tables(void **state) {
        (void) state;
        for (int f = 0; f < _PARTICIPANT_STATE_MAX; f++)
                for (int t = 0; t < _PARTICIPANT_STATE_MAX; t++)
                        assert_int_equal(participant_transition_valid(f, t), participant_ok[f][t]);
        for (int f = 0; f < _TERMINAL_STATE_MAX; f++)
                for (int t = 0; t < _TERMINAL_STATE_MAX; t++)
                        assert_int_equal(terminal_transition_valid(f, t), terminal_ok[f][t]);
        assert_false(participant_transition_valid(PARTICIPANT_INTENT, _PARTICIPANT_STATE_MAX));
        assert_false(participant_transition_valid(_PARTICIPANT_STATE_INVALID, PARTICIPANT_CLEAN));
        assert_false(terminal_transition_valid(TERMINAL_INTENT, _TERMINAL_STATE_INVALID));
}

/* ---- open, lock, domain, schema ---- */

static void test_open_create(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);

        struct stat st;
        char *p = subpath(dir, "store");
        assert_int_equal(lstat(p, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0700);
        free(p);
        p = subpath(dir, "store.lock");
        assert_int_equal(lstat(p, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0600);
        free(p);

        unsigned v = 99;
        assert_int_equal(store_schema_version(s, &v), 0);
        assert_int_equal(v, 3);
        assert_int_equal(store_migrate(s), STORE_SCHEMA_VERSION);
        assert_null(store_close(s));

        char *meta = raw_get(dir, "meta", "schema");
        assert_non_null(meta);
        assert_string_equal(meta, "{\"schema_id\":\"lazaret.domain-store\",\"schema_version\":3}");
        free(meta);
        char *d = raw_get(dir, "domain", "domain");
        assert_non_null(d);
        assert_string_equal(d, "{\"canonical_workspace\":\"/home/u/ws\",\"domain_id\":\"0123456789ab\","
                               "\"profile_name\":\"shell\"}");
        free(d);

        /* Reopen, then again with the wait path (lock free: immediate). */
        s = open_ok(dir);
        store_close(s);
        s = NULL;
        assert_int_equal(store_open(dir, &dom, 1000000, &s), 0);
        store_close(s);

        assert_null(store_close(NULL));
}

static void test_open_bad_paths(void **state) {
        const char *dir = *state;
        Store *s = (Store *) 0x1;
        char *missing = subpath(dir, "missing");
        assert_int_equal(store_open(missing, &dom, 0, &s), -ENOENT);
        assert_ptr_equal(s, (Store *) 0x1); /* untouched on failure */
        free(missing);

        /* store.lock as a symlink is refused (O_NOFOLLOW). */
        char *a = subpath(dir, "a");
        assert_int_equal(mkdir(a, 0700), 0);
        char *lock = subpath(a, "store.lock");
        assert_int_equal(symlink("/tmp/elsewhere-lock", lock), 0);
        assert_int_equal(store_open(a, &dom, 0, &s), -ELOOP);
        free(lock);
        free(a);

        /* store/ as a symlink to a directory is refused. */
        char *b = subpath(dir, "b");
        assert_int_equal(mkdir(b, 0700), 0);
        char *envdir = subpath(b, "store");
        assert_int_equal(symlink(dir, envdir), 0);
        assert_int_equal(store_open(b, &dom, 0, &s), -ENOTDIR);
        free(envdir);
        free(b);

        assert_int_equal(store_open(NULL, &dom, 0, &s), -EINVAL);
        assert_int_equal(store_open(dir, &dom, 0, NULL), -EINVAL);
        StoreDomain bad = dom;
        bad.profile_name = "";
        assert_int_equal(store_open(dir, &bad, 0, &s), -EINVAL);
        assert_ptr_equal(s, (Store *) 0x1);
}

static void write_int(int fd, int v) {
        if (write(fd, &v, sizeof(v)) != sizeof(v))
                _exit(90);
}

static int read_int(int fd) {
        int v;
        assert_int_equal(read(fd, &v, sizeof(v)), sizeof(v));
        return v;
}

static uint64_t mono_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

/* A second process: -EBUSY at once, -EBUSY after a bounded wait, success
 * when the holder closes during a longer wait. The child is forked before
 * the parent opens, so it shares neither the lock's file description nor
 * the LMDB environment. */
static void test_open_busy_other_process(void **state) {
        const char *dir = *state;
        int go[2], res[2];
        assert_int_equal(pipe2(go, O_CLOEXEC), 0);
        assert_int_equal(pipe2(res, O_CLOEXEC), 0);

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* Only the parent may hold these ends, so a parent that
                 * fails an assertion gives the child EOF, not a hang. */
                close(go[1]);
                close(res[0]);
                alarm(60);
                char c;
                if (read(go[0], &c, 1) != 1)
                        _exit(91);
                Store *cs = NULL;
                write_int(res[1], store_open(dir, &dom, 0, &cs));
                uint64_t t0 = mono_usec();
                int r = store_open(dir, &dom, 200000, &cs);
                write_int(res[1], r);
                write_int(res[1], (int) ((mono_usec() - t0) / 1000));
                /* The parent closes after it reads the results. */
                r = store_open(dir, &dom, 20000000, &cs);
                write_int(res[1], r);
                if (r == 0) {
                        uint64_t g;
                        write_int(res[1], store_generation_last(cs, &g) == 0 ? (int) g : -1);
                        store_close(cs);
                }
                _exit(0);
        }

        Store *s = open_ok(dir);
        uint64_t g;
        assert_int_equal(store_generation_begin(s, NULL, &g), 0);
        assert_int_equal(write(go[1], "x", 1), 1);
        assert_int_equal(read_int(res[0]), -EBUSY);
        assert_int_equal(read_int(res[0]), -EBUSY);
        int waited_ms = read_int(res[0]);
        assert_true(waited_ms >= 200);
        assert_true(waited_ms < 10000);
        /* Let the child start its long wait, then hand the store over. */
        usleep(100000);
        store_close(s);
        assert_int_equal(read_int(res[0]), 0);
        assert_int_equal(read_int(res[0]), 1); /* it saw what we committed */

        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        close(go[0]);
        close(go[1]);
        close(res[0]);
        close(res[1]);

        s = open_ok(dir);
        store_close(s);
}

static void test_domain_mismatch(void **state) {
        const char *dir = *state;
        store_close(open_ok(dir));

        Store *s = NULL;
        StoreDomain d = dom;
        d.domain_id = "ba9876543210";
        assert_int_equal(store_open(dir, &d, 0, &s), -EXDEV);
        d = dom;
        d.profile_name = "other";
        assert_int_equal(store_open(dir, &d, 0, &s), -EXDEV);
        d = dom;
        d.canonical_workspace = "/home/u/ws2";
        assert_int_equal(store_open(dir, &d, 0, &s), -EXDEV);
        assert_null(s);

        /* The refused opens released the lock and left the record alone. */
        assert_int_equal(store_open(dir, NULL, 0, &s), 0);
        store_close(s);
        store_close(open_ok(dir));

        /* A new store needs its domain. */
        char *fresh = subpath(dir, "fresh");
        assert_int_equal(mkdir(fresh, 0700), 0);
        s = NULL;
        assert_int_equal(store_open(fresh, NULL, 0, &s), -EINVAL);
        assert_null(s);
        store_close(open_ok(fresh));
        free(fresh);
}

static void test_newer_and_foreign(void **state) {
        const char *dir = *state;
        Store *s = NULL;
        const char *newer = "{\"schema_id\":\"lazaret.domain-store\",\"schema_version\":4}";
        raw_put_str(dir, "meta", "schema", newer);
        assert_int_equal(store_open(dir, &dom, 0, &s), -EPROTONOSUPPORT);
        assert_null(s);
        char *m = raw_get(dir, "meta", "schema");
        assert_string_equal(m, newer);
        free(m);
        assert_false(raw_table_exists(dir, "domain"));

        raw_put_str(dir, "meta", "schema", "{\"schema_id\":\"something.else\",\"schema_version\":1}");
        assert_int_equal(store_open(dir, &dom, 0, &s), -EBADMSG);
        raw_put_str(dir, "meta", "schema", "[1]");
        assert_int_equal(store_open(dir, &dom, 0, &s), -EBADMSG);
        raw_put_str(dir, "meta", "schema", "{\"schema_id\":\"lazaret.domain-store\",\"schema_version\":\"1\"}");
        assert_int_equal(store_open(dir, &dom, 0, &s), -EBADMSG);

        /* Tables but no meta: not ours. */
        char *other = subpath(dir, "other");
        assert_int_equal(mkdir(other, 0700), 0);
        raw_put_str(other, "stuff", "k", "v");
        assert_int_equal(store_open(other, &dom, 0, &s), -EBADMSG);
        free(other);
        assert_null(s);
}

/* ---- generations ---- */

static void test_generations(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        uint64_t g = 777;
        assert_int_equal(store_generation_last(s, &g), -ENOENT);
        assert_int_equal(g, 777);

        json_t *info =
                json_pack("{s:s,s:s,s:n}", "configuration_fingerprint", "fp1", "coordinator_id", "c1", "sandbox_id");
        assert_int_equal(store_generation_begin(s, info, &g), 0);
        assert_int_equal(g, 1);
        json_decref(info);
        assert_int_equal(store_generation_begin(s, NULL, &g), 0);
        assert_int_equal(g, 2);

        json_t *rec = NULL;
        assert_int_equal(store_generation_get(s, 1, &rec), 0);
        assert_json_eq(rec, "{\"domain_id\":\"0123456789ab\",\"generation_id\":1,\"configuration_fingerprint\":"
                            "\"fp1\",\"coordinator_id\":\"c1\",\"network_sidecar_id\":null,\"sandbox_id\":null,"
                            "\"durable_decision\":null}");
        json_decref(rec);

        json_t *f = json_pack("{s:s,s:s}", "sandbox_id", "sb-1", "durable_decision", "Committed");
        assert_int_equal(store_generation_update(s, 1, f), 0);
        json_decref(f);
        assert_int_equal(store_generation_get(s, 1, &rec), 0);
        assert_json_eq(rec, "{\"domain_id\":\"0123456789ab\",\"generation_id\":1,\"configuration_fingerprint\":"
                            "\"fp1\",\"coordinator_id\":\"c1\",\"network_sidecar_id\":null,\"sandbox_id\":\"sb-1\","
                            "\"durable_decision\":\"Committed\"}");
        json_decref(rec);

        /* Generation 2 untouched. */
        assert_int_equal(store_generation_get(s, 2, &rec), 0);
        assert_true(json_is_null(json_object_get(rec, "sandbox_id")));
        assert_int_equal(json_integer_value(json_object_get(rec, "generation_id")), 2);
        json_decref(rec);

        rec = (json_t *) 0x1;
        assert_int_equal(store_generation_get(s, 3, &rec), -ENOENT);
        assert_ptr_equal(rec, (json_t *) 0x1);
        f = json_pack("{s:s}", "sandbox_id", "x");
        assert_int_equal(store_generation_update(s, 3, f), -ENOENT);
        json_decref(f);
        f = json_pack("{s:i}", "generation_id", 9);
        assert_int_equal(store_generation_update(s, 1, f), -EINVAL);
        json_decref(f);
        f = json_pack("{s:i}", "sandbox_id", 9);
        assert_int_equal(store_generation_update(s, 1, f), -EINVAL);
        json_decref(f);
        f = json_pack("{s:s}", "domain_id", "x");
        g = 777;
        assert_int_equal(store_generation_begin(s, f, &g), -EINVAL);
        assert_int_equal(g, 777);
        json_decref(f);
        f = json_pack("[]");
        assert_int_equal(store_generation_begin(s, f, &g), -EINVAL);
        assert_int_equal(store_generation_update(s, 1, f), -EINVAL);
        json_decref(f);

        assert_int_equal(store_generation_last(s, &g), 0);
        assert_int_equal(g, 2);
        store_close(s);

        /* Durable across a reopen, and numbering continues. */
        s = open_ok(dir);
        assert_int_equal(store_generation_last(s, &g), 0);
        assert_int_equal(g, 2);
        assert_int_equal(store_generation_get(s, 1, &rec), 0);
        assert_string_equal(json_string_value(json_object_get(rec, "sandbox_id")), "sb-1");
        json_decref(rec);
        assert_int_equal(store_generation_begin(s, NULL, &g), 0);
        assert_int_equal(g, 3);
        store_close(s);
}

/* ---- participants ---- */

static char *participant_text(Store *s, uint64_t id) {
        json_t *rec = NULL;
        assert_int_equal(store_participant_get(s, id, &rec), 0);
        char *t = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
        assert_non_null(t);
        json_decref(rec);
        return t;
}

static void test_participant_transitions(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        uint64_t g, id, expect_id = 1;
        assert_int_equal(store_generation_begin(s, NULL, &g), 0);

        for (int from = 0; from < _PARTICIPANT_STATE_MAX; from++)
                for (int to = 0; to < _PARTICIPANT_STATE_MAX; to++) {
                        json_t *own = json_pack("{s:s,s:{s:i,s:i}}", "container_id", "lz-1", "host_coordinator", "pid",
                                                10, "start_time", 20);
                        assert_int_equal(store_participant_add(s, g, ROLE_SANDBOX, own, &id), 0);
                        json_decref(own);
                        assert_int_equal(id, expect_id);
                        expect_id++;
                        if (from != PARTICIPANT_INTENT)
                                assert_int_equal(store_participant_set_state(s, id, from, NULL), 0);

                        char *before = participant_text(s, id);
                        json_t *more = json_pack("{s:s}", "runtime_root", "/run/x");
                        int r = store_participant_set_state(s, id, to, more);
                        json_decref(more);
                        char *after = participant_text(s, id);
                        if (participant_ok[from][to]) {
                                assert_int_equal(r, 0);
                                json_t *rec = NULL;
                                assert_int_equal(store_participant_get(s, id, &rec), 0);
                                char want[512];
                                snprintf(want, sizeof(want),
                                         "{\"participant_id\":%llu,\"generation_id\":1,\"role\":\"Sandbox\","
                                         "\"state\":\"%s\",\"ownership\":{\"container_id\":\"lz-1\","
                                         "\"host_coordinator\":{\"pid\":10,\"start_time\":20},"
                                         "\"runtime_root\":\"/run/x\"}}",
                                         (unsigned long long) id, participant_state_to_string(to));
                                assert_json_eq(rec, want);
                                json_decref(rec);
                        } else {
                                assert_int_equal(r, -EINVAL);
                                assert_string_equal(after, before);
                                assert_null(strstr(after, "runtime_root"));
                        }
                        free(before);
                        free(after);
                }

        /* The documented failure path: Intent -> ReleaseIntent -> Clean. */
        assert_int_equal(store_participant_add(s, g, ROLE_NETWORK, NULL, &id), 0);
        assert_int_equal(store_participant_set_state(s, id, PARTICIPANT_RELEASE_INTENT, NULL), 0);
        assert_int_equal(store_participant_set_state(s, id, PARTICIPANT_CLEAN, NULL), 0);
        char *t = participant_text(s, id);
        assert_non_null(strstr(t, "\"ownership\":{}"));
        free(t);
        /* A Clean record takes no more ownership updates. */
        json_t *late = json_pack("{s:s}", "x", "y");
        assert_int_equal(store_participant_update(s, id, late), -EINVAL);

        /* update merges without a state change (evidence replaced after a
         * network policy update, say). */
        uint64_t net;
        assert_int_equal(store_participant_add(s, g, ROLE_NETWORK, NULL, &net), 0);
        json_t *ev1 = json_pack("{s:s, s:s}", "readiness_fingerprint", "aa", "namespace", "n");
        assert_int_equal(store_participant_set_state(s, net, PARTICIPANT_COMMITTED, ev1), 0);
        json_t *ev2 = json_pack("{s:s}", "readiness_fingerprint", "bb");
        assert_int_equal(store_participant_set_state(s, net, PARTICIPANT_COMMITTED, ev2), -EINVAL);
        assert_int_equal(store_participant_update(s, net, ev2), 0);
        t = participant_text(s, net);
        assert_non_null(strstr(t, "\"state\":\"Committed\""));
        assert_non_null(strstr(t, "\"readiness_fingerprint\":\"bb\""));
        assert_non_null(strstr(t, "\"namespace\":\"n\""));
        free(t);
        assert_int_equal(store_participant_update(s, net, NULL), -EINVAL);
        json_decref(late);
        json_decref(ev1);
        json_decref(ev2);

        uint64_t keep = 4242;
        assert_int_equal(store_participant_add(s, 99, ROLE_HELPER, NULL, &keep), -ENOENT);
        assert_int_equal(store_participant_add(s, g, _ROLE_MAX, NULL, &keep), -EINVAL);
        assert_int_equal(store_participant_add(s, g, _ROLE_INVALID, NULL, &keep), -EINVAL);
        json_t *arr = json_array();
        assert_int_equal(store_participant_add(s, g, ROLE_HELPER, arr, &keep), -EINVAL);
        assert_int_equal(keep, 4242);
        assert_int_equal(store_participant_set_state(s, id, PARTICIPANT_CLEAN, arr), -EINVAL);
        json_decref(arr);
        assert_int_equal(store_participant_set_state(s, 100000, PARTICIPANT_CLEAN, NULL), -ENOENT);
        assert_int_equal(store_participant_set_state(s, 1, _PARTICIPANT_STATE_MAX, NULL), -EINVAL);
        json_t *rec = (json_t *) 0x1;
        assert_int_equal(store_participant_get(s, 100000, &rec), -ENOENT);
        assert_ptr_equal(rec, (json_t *) 0x1);
        store_close(s);
}

static void test_list_unclean(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        json_t *list = NULL;
        assert_int_equal(store_list_unclean(s, &list), 0);
        assert_json_eq(list, "[]");
        json_decref(list);

        uint64_t g1, g2, p1, p2, p3, p4, p5;
        assert_int_equal(store_generation_begin(s, NULL, &g1), 0);
        assert_int_equal(store_generation_begin(s, NULL, &g2), 0);
        assert_int_equal(store_participant_add(s, g1, ROLE_PREPARED_LOWER, NULL, &p1), 0);
        assert_int_equal(store_participant_add(s, g1, ROLE_NETWORK, NULL, &p2), 0);
        json_t *own = json_pack("{s:s}", "container_id", "lz-sb");
        assert_int_equal(store_participant_add(s, g2, ROLE_SANDBOX, own, &p3), 0);
        json_decref(own);
        assert_int_equal(store_participant_add(s, g2, ROLE_HELPER, NULL, &p4), 0);
        assert_int_equal(store_participant_add(s, g1, ROLE_PUBLICATION, NULL, &p5), 0);
        assert_int_equal(p5, 5);

        assert_int_equal(store_participant_set_state(s, p1, PARTICIPANT_CLEAN, NULL), 0);
        assert_int_equal(store_participant_set_state(s, p2, PARTICIPANT_COMMITTED, NULL), 0);
        assert_int_equal(store_participant_set_state(s, p4, PARTICIPANT_RELEASE_INTENT, NULL), 0);
        assert_int_equal(store_participant_set_state(s, p4, PARTICIPANT_CLEAN, NULL), 0);
        own = json_pack("{s:i}", "mount_id", 77);
        assert_int_equal(store_participant_set_state(s, p5, PARTICIPANT_LEASE_HELD, own), 0);
        json_decref(own);

        assert_int_equal(store_list_unclean(s, &list), 0);
        assert_json_eq(list, "["
                             "{\"participant_id\":2,\"generation_id\":1,\"role\":\"Network\",\"state\":\"Committed\","
                             "\"ownership\":{}},"
                             "{\"participant_id\":3,\"generation_id\":2,\"role\":\"Sandbox\",\"state\":\"Intent\","
                             "\"ownership\":{\"container_id\":\"lz-sb\"}},"
                             "{\"participant_id\":5,\"generation_id\":1,\"role\":\"Publication\","
                             "\"state\":\"LeaseHeld\",\"ownership\":{\"mount_id\":77}}"
                             "]");
        json_decref(list);
        store_close(s);

        /* What a coordinator that restarts finds. */
        s = open_ok(dir);
        assert_int_equal(store_list_unclean(s, &list), 0);
        assert_int_equal(json_array_size(list), 3);
        json_decref(list);
        store_close(s);
}

/* ---- sessions and terminals ---- */

static void test_sessions(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        json_t *sess = json_pack("{s:s,s:i,s:s,s:s,s:s}", "session_id", U1, "generation_id", 1, "cli_id", "pid:42",
                                 "session_anchor_id", "anchor-1", "session_phase", "Attached");
        assert_int_equal(store_session_put(s, sess), 0);
        json_t *rec = NULL;
        assert_int_equal(store_session_get(s, U1, &rec), 0);
        assert_true(json_equal(rec, sess));
        json_decref(rec);

        /* put replaces whole. */
        json_object_del(sess, "session_anchor_id");
        json_object_set_new(sess, "session_phase", json_string("Waiting"));
        assert_int_equal(store_session_put(s, sess), 0);
        assert_int_equal(store_session_get(s, U1, &rec), 0);
        assert_true(json_equal(rec, sess));
        assert_null(json_object_get(rec, "session_anchor_id"));
        json_decref(rec);

        json_t *f = json_pack("{s:s,s:n}", "session_phase", "Detached", "session_anchor_id");
        assert_int_equal(store_session_update(s, U1, f), 0);
        json_decref(f);
        assert_int_equal(store_session_get(s, U1, &rec), 0);
        assert_json_eq(rec, "{\"session_id\":\"" U1 "\",\"generation_id\":1,\"cli_id\":\"pid:42\","
                            "\"session_anchor_id\":null,\"session_phase\":\"Detached\"}");
        json_decref(rec);

        f = json_pack("{s:s}", "session_id", U2);
        assert_int_equal(store_session_update(s, U1, f), -EINVAL);
        json_decref(f);
        f = json_pack("{s:s}", "session_phase", "x");
        assert_int_equal(store_session_update(s, U2, f), -ENOENT);
        assert_int_equal(store_session_update(s, "nope", f), -EINVAL);
        json_decref(f);
        rec = (json_t *) 0x1;
        assert_int_equal(store_session_get(s, U2, &rec), -ENOENT);
        assert_int_equal(store_session_get(s, "../../etc", &rec), -EINVAL);
        assert_int_equal(store_session_get(s, "11111111-1111-4111-8111-11111111111g", &rec), -EINVAL);
        assert_ptr_equal(rec, (json_t *) 0x1);

        json_object_set_new(sess, "session_id", json_string("11111111x1111-4111-8111-111111111111"));
        assert_int_equal(store_session_put(s, sess), -EINVAL);
        json_object_del(sess, "session_id");
        assert_int_equal(store_session_put(s, sess), -EINVAL);
        json_decref(sess);
        store_close(s);
}

static void put_session(Store *s, const char *id) {
        json_t *sess = json_pack("{s:s,s:i,s:s,s:n,s:s}", "session_id", id, "generation_id", 1, "cli_id", "pid:1",
                                 "session_anchor_id", "session_phase", "Attached");
        assert_int_equal(store_session_put(s, sess), 0);
        json_decref(sess);
}

static json_t *terminal_new(const char *id, const char *st) {
        json_t *t =
                json_pack("{s:i,s:s,s:s,s:s,s:{s:i,s:I},s:{s:i,s:i,s:i},s:{s:i,s:I},s:{s:i,s:I,s:i}}", "generation_id",
                          1, "session_id", id, "state", st, "container_id", "lz-c", "host_coordinator", "pid", 100,
                          "start_time", (json_int_t) 5000, "pty_master", "master_fd", 7, "device", 34, "inode", 9,
                          "exec_client", "pid", 101, "start_time", (json_int_t) 5001, "guest_process", "leader_pid", 1,
                          "leader_start_time", (json_int_t) 3, "process_group_id", 1);
        assert_non_null(t);
        return t;
}

static const char *terminal_state_of(Store *s, const char *id) {
        json_t *list = NULL;
        static char buf[32];
        assert_int_equal(store_list_unclean_terminals(s, &list), 0);
        strcpy(buf, "Clean");
        for (size_t i = 0; i < json_array_size(list); i++) {
                json_t *t = json_array_get(list, i);
                if (strcmp(json_string_value(json_object_get(t, "session_id")), id) == 0)
                        snprintf(buf, sizeof(buf), "%s", json_string_value(json_object_get(t, "state")));
        }
        json_decref(list);
        return buf;
}

static void test_terminals(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);

        json_t *t = terminal_new(U1, "Intent");
        assert_int_equal(store_terminal_put(s, t), -ENOENT); /* no session yet */
        put_session(s, U1);
        put_session(s, U2);
        put_session(s, U3);
        assert_int_equal(store_terminal_put(s, t), 0);
        assert_int_equal(store_terminal_put(s, t), -EEXIST);
        json_decref(t);

        t = terminal_new(U2, "Bogus");
        assert_int_equal(store_terminal_put(s, t), -EINVAL);
        json_decref(t);
        t = terminal_new("nope", "Intent");
        assert_int_equal(store_terminal_put(s, t), -EINVAL);
        json_decref(t);

        /* Every transition of the terminal machine, checked on the record. */
        for (int from = 0; from < _TERMINAL_STATE_MAX; from++)
                for (int to = 0; to < _TERMINAL_STATE_MAX; to++) {
                        json_t *tt = terminal_new(U3, terminal_state_to_string(from));
                        assert_int_equal(store_terminal_put(s, tt), 0);
                        json_decref(tt);
                        json_t *f = json_pack("{s:s}", "container_id", "lz-new");
                        int r = store_terminal_set_state(s, U3, to, f);
                        json_decref(f);
                        if (terminal_ok[from][to]) {
                                assert_int_equal(r, 0);
                                assert_string_equal(terminal_state_of(s, U3), terminal_state_to_string(to));
                        } else {
                                assert_int_equal(r, -EINVAL);
                                assert_string_equal(terminal_state_of(s, U3), terminal_state_to_string(from));
                        }
                        /* Leave it Clean, so the next put may replace it. */
                        if (strcmp(terminal_state_of(s, U3), "Clean") != 0)
                                assert_int_equal(store_terminal_set_state(s, U3, TERMINAL_CLEAN, NULL), 0);
                }

        t = terminal_new(U2, "Running");
        assert_int_equal(store_terminal_put(s, t), 0);
        json_decref(t);

        json_t *f = json_pack("{s:s}", "container_id", "lz-2");
        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_RUNNING, f), 0);
        json_decref(f);
        f = json_pack("{s:s}", "state", "Clean");
        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_CLEAN, f), -EINVAL);
        json_decref(f);
        f = json_pack("{s:s}", "session_id", U2);
        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_CLEAN, f), -EINVAL);
        json_decref(f);
        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_INTENT, NULL), -EINVAL);
        assert_int_equal(store_terminal_set_state(s, U1, _TERMINAL_STATE_MAX, NULL), -EINVAL);
        assert_int_equal(store_terminal_set_state(s, "22222222-2222-4222-8222-000000000000", TERMINAL_CLEAN, NULL),
                         -ENOENT);

        json_t *list = NULL;
        assert_int_equal(store_list_unclean_terminals(s, &list), 0);
        assert_int_equal(json_array_size(list), 2);
        json_t *first = json_array_get(list, 0);
        json_t *want = terminal_new(U1, "Running");
        json_object_set_new(want, "container_id", json_string("lz-2"));
        assert_true(json_equal(first, want));
        json_decref(want);
        assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "session_id")), U2);
        json_decref(list);

        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_RELEASE_INTENT, NULL), 0);
        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_CLEAN, NULL), 0);
        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_CLEAN, NULL), -EINVAL);
        assert_int_equal(store_list_unclean_terminals(s, &list), 0);
        assert_int_equal(json_array_size(list), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "session_id")), U2);
        json_decref(list);

        /* A Clean terminal may be replaced by a new one. */
        t = terminal_new(U1, "Intent");
        assert_int_equal(store_terminal_put(s, t), 0);
        json_decref(t);
        assert_string_equal(terminal_state_of(s, U1), "Intent");
        store_close(s);
}

static void test_bad_values(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        put_session(s, U1);
        put_session(s, U2);
        put_session(s, U3);

        /* A record over the 1 MiB cap is refused on write. */
        char *big = malloc(2 * 1024 * 1024);
        assert_non_null(big);
        memset(big, 'x', 2 * 1024 * 1024 - 1);
        big[2 * 1024 * 1024 - 1] = '\0';
        json_t *f = json_pack("{s:s}", "session_phase", big);
        assert_int_equal(store_session_update(s, U1, f), -EFBIG);
        json_decref(f);
        store_close(s);

        raw_put_str(dir, "sessions", U1, "[1]");
        raw_put_str(dir, "sessions", U2, "{\"session_id\":");
        memset(big, ' ', 2 * 1024 * 1024);
        big[0] = '{';
        big[2 * 1024 * 1024 - 1] = '}';
        raw_put(dir, "sessions", U3, strlen(U3), big, 2 * 1024 * 1024);
        free(big);
        raw_put_str(dir, "terminals", U1, "{\"session_id\":\"" U1 "\",\"state\":\"Sideways\"}");
        raw_put_str(dir, "unclean", "t" U1, "u"); /* as the index names it */

        s = open_ok(dir);
        json_t *rec = NULL;
        assert_int_equal(store_session_get(s, U1, &rec), -EBADMSG);
        assert_int_equal(store_session_get(s, U2, &rec), -EBADMSG);
        assert_int_equal(store_session_get(s, U3, &rec), -EBADMSG);
        assert_null(rec);
        assert_int_equal(store_list_unclean_terminals(s, &rec), -EBADMSG);
        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_CLEAN, NULL), -EBADMSG);
        assert_null(rec);
        store_close(s);
}

/* ---- migration ---- */

#define MA "aaaaaaaa-0000-4000-8000-000000000001"
#define MB "aaaaaaaa-0000-4000-8000-000000000002"
#define MC "aaaaaaaa-0000-4000-8000-000000000003"

static void test_migration(void **state) {
        const char *dir = *state;
        const char *const ids[] = { MA, MB, MC };
        assert_int_equal(store_write_v0_fixture(dir, ids, 3), 0);
        assert_int_equal(store_write_v0_fixture(dir, ids, 3), -EEXIST);

        char *v = raw_get(dir, "meta", "schema_version");
        assert_string_equal(v, "0");
        free(v);
        v = raw_get(dir, "state", "session:" MB);
        assert_string_equal(v, "1001 Attached");
        free(v);

        Store *s = open_ok(dir);
        unsigned ver = 0;
        assert_int_equal(store_schema_version(s, &ver), 0);
        assert_int_equal(ver, 3);
        for (size_t i = 0; i < 3; i++) {
                json_t *rec = NULL;
                assert_int_equal(store_session_get(s, ids[i], &rec), 0);
                char want[256];
                snprintf(want, sizeof(want),
                         "{\"session_id\":\"%s\",\"cli_id\":\"pid:%zu\",\"session_phase\":\"Attached\","
                         "\"generation_id\":0,\"session_anchor_id\":null}",
                         ids[i], 1000 + i);
                assert_json_eq(rec, want);
                json_decref(rec);
        }
        assert_int_equal(store_migrate(s), STORE_SCHEMA_VERSION);
        /* The migrated store works like any other, the audit trail too. */
        json_t *fields = json_pack("{s:s}", "command", "ls");
        assert_int_equal(store_audit_append(s, fields, NULL), 0);
        json_decref(fields);
        uint64_t g;
        assert_int_equal(store_generation_begin(s, NULL, &g), 0);
        assert_int_equal(g, 1);
        store_close(s);

        assert_false(raw_table_exists(dir, "state"));
        assert_null(raw_get(dir, "meta", "schema_version"));
        v = raw_get(dir, "meta", "schema");
        assert_string_equal(v, "{\"schema_id\":\"lazaret.domain-store\",\"schema_version\":3}");
        free(v);
        char *dump = raw_dump(dir, "sessions");
        assert_non_null(dump);
        assert_non_null(strstr(dump, MC "={\"cli_id\":\"pid:1002\",\"generation_id\":0,\"session_anchor_id\":null,"
                                        "\"session_id\":\"" MC "\",\"session_phase\":\"Attached\"}\n"));
        free(dump);

        /* An empty version-0 store migrates too. */
        char *empty = subpath(dir, "empty");
        assert_int_equal(mkdir(empty, 0700), 0);
        assert_int_equal(store_write_v0_fixture(empty, NULL, 0), 0);
        store_close(open_ok(empty));
        assert_false(raw_table_exists(empty, "state"));
        free(empty);
}

/* A failure anywhere in the migration leaves the version-0 store exactly
 * as it was. The damaged entry sorts last, so the others were already
 * copied inside the transaction when it fails. */
static void check_failed_migration(const char *dir, const char *key, const char *val) {
        const char *const ids[] = { MA, MB };
        assert_int_equal(store_write_v0_fixture(dir, ids, 2), 0);
        raw_put_str(dir, "state", key, val);
        char *state_before = raw_dump(dir, "state");
        char *meta_before = raw_dump(dir, "meta");
        assert_non_null(state_before);

        Store *s = NULL;
        assert_int_equal(store_open(dir, &dom, 0, &s), -EBADMSG);
        assert_null(s);

        char *state_after = raw_dump(dir, "state");
        char *meta_after = raw_dump(dir, "meta");
        assert_string_equal(state_after, state_before);
        assert_string_equal(meta_after, meta_before);
        assert_string_equal(meta_after, "schema_version=0\n");
        assert_false(raw_table_exists(dir, "sessions"));
        assert_false(raw_table_exists(dir, "domain"));
        free(state_before);
        free(state_after);
        free(meta_before);
        free(meta_after);

        /* Repaired, it migrates. */
        MDB_env *env = raw_open(dir);
        MDB_txn *txn;
        MDB_dbi dbi;
        assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
        assert_int_equal(mdb_dbi_open(txn, "state", 0, &dbi), 0);
        MDB_val k = { strlen(key), (void *) key };
        int r = mdb_del(txn, dbi, &k, NULL);
        assert_true(r == 0 || r == MDB_NOTFOUND);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
        raw_put_str(dir, "state", "session:" MC, "7 Detached");

        s = open_ok(dir);
        json_t *rec = NULL;
        assert_int_equal(store_session_get(s, MC, &rec), 0);
        assert_string_equal(json_string_value(json_object_get(rec, "cli_id")), "pid:7");
        assert_string_equal(json_string_value(json_object_get(rec, "session_phase")), "Detached");
        json_decref(rec);
        store_close(s);
}

static void test_migration_failure(void **state) {
        const char *dir = *state;
        const struct {
                const char *key, *val;
        } cases[] = {
                { "session:" MC, "garbage" },         { "session:" MC, "12x Attached" },
                { "session:" MC, "0 Attached" },      { "session:" MC, "12 " },
                { "session:" MC, "12 two words" },    { "session:" MC, "" },
                { "session:zzzzzzzz", "1 Attached" }, { "zzz", "1 Attached" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char name[16];
                snprintf(name, sizeof(name), "case%zu", i);
                char *d = subpath(dir, name);
                assert_int_equal(mkdir(d, 0700), 0);
                check_failed_migration(d, cases[i].key, cases[i].val);
                free(d);
        }
}

/* ---- process identity ---- */

static void test_identity_self(void **state) {
        (void) state;
        ProcessIdentity me = { 0 };
        assert_int_equal(process_identity_of(getpid(), &me), 0);
        assert_int_equal(me.pid, getpid());
        assert_true(me.start_time > 0);
        assert_true(process_identity_alive(&me));

        ProcessIdentity fake = me;
        fake.start_time++;
        assert_false(process_identity_alive(&fake));
        fake.start_time = me.start_time - 1;
        assert_false(process_identity_alive(&fake));
        fake = (ProcessIdentity){ .pid = 0, .start_time = me.start_time };
        assert_false(process_identity_alive(&fake));
        assert_false(process_identity_alive(NULL));

        ProcessIdentity keep = { 5, 6 };
        assert_int_equal(process_identity_of(0, &keep), -EINVAL);
        assert_int_equal(process_identity_of(-1, &keep), -EINVAL);
        assert_int_equal(keep.pid, 5);

        json_t *j = process_identity_to_json(&me);
        assert_non_null(j);
        char want[128];
        snprintf(want, sizeof(want), "{\"pid\":%d,\"start_time\":%llu}", me.pid, (unsigned long long) me.start_time);
        assert_json_eq(j, want);
        ProcessIdentity back = { 0 };
        assert_int_equal(process_identity_from_json(j, &back), 0);
        assert_int_equal(back.pid, me.pid);
        assert_int_equal(back.start_time, me.start_time);
        json_decref(j);
        assert_null(process_identity_to_json(&fake));

        const char *bad[] = {
                "{\"pid\":\"1\",\"start_time\":1}", "{\"pid\":0,\"start_time\":1}",          "{\"pid\":1}",
                "{\"pid\":1,\"start_time\":-1}",    "{\"pid\":4294967297,\"start_time\":1}", "[1,2]",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_error_t err;
                json_t *b = json_loads(bad[i], 0, &err);
                assert_non_null(b);
                keep = (ProcessIdentity){ 5, 6 };
                assert_int_equal(process_identity_from_json(b, &keep), -EINVAL);
                assert_int_equal(keep.pid, 5);
                json_decref(b);
        }
}

static uint64_t uptime_ticks(void) {
        FILE *f = fopen("/proc/uptime", "re");
        assert_non_null(f);
        double up = 0;
        assert_int_equal(fscanf(f, "%lf", &up), 1);
        fclose(f);
        return (uint64_t) (up * (double) sysconf(_SC_CLK_TCK));
}

/* A child named like "a) b (c) d": field 22 must come from after the last
 * ')'. It started just now, so its start time is close to the uptime. */
static void test_identity_child(void **state) {
        (void) state;
        int ready[2], quit[2];
        assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
        assert_int_equal(pipe2(quit, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(ready[0]);
                close(quit[1]);
                alarm(60);
                char c;
                if (prctl(PR_SET_NAME, "a) b (c) d", 0, 0, 0) < 0)
                        _exit(1);
                if (write(ready[1], "r", 1) != 1)
                        _exit(2);
                (void) !read(quit[0], &c, 1);
                _exit(0);
        }
        char c;
        assert_int_equal(read(ready[0], &c, 1), 1);

        char path[64], comm[64] = "";
        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        assert_non_null(fgets(comm, sizeof(comm), f));
        fclose(f);
        assert_string_equal(comm, "a) b (c) d\n");

        ProcessIdentity child = { 0 }, me = { 0 };
        assert_int_equal(process_identity_of(pid, &child), 0);
        assert_int_equal(process_identity_of(getpid(), &me), 0);
        uint64_t now = uptime_ticks();
        assert_int_equal(child.pid, pid);
        assert_true(child.start_time >= me.start_time);
        assert_true(child.start_time <= now + 100);
        assert_true(child.start_time + 10 * (uint64_t) sysconf(_SC_CLK_TCK) >= now);
        assert_true(process_identity_alive(&child));

        /* Exited but not reaped: a zombie is not alive. */
        assert_int_equal(write(quit[1], "q", 1), 1);
        siginfo_t si;
        assert_int_equal(waitid(P_PID, (id_t) pid, &si, WEXITED | WNOWAIT), 0);
        assert_false(process_identity_alive(&child));

        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_false(process_identity_alive(&child));
        ProcessIdentity gone = { 5, 6 };
        assert_int_equal(process_identity_of(pid, &gone), -ESRCH);
        assert_int_equal(gone.pid, 5);
        close(ready[0]);
        close(ready[1]);
        close(quit[0]);
        close(quit[1]);
}

/* ---- worker ---- */

#define N_JOBS 1000

typedef struct WorkerCtx {
        pthread_t main_thread;
        int ran[N_JOBS + 10];
        int n_ran;
        int done[N_JOBS + 10];
        int n_done;
        int job_on_main; /* jobs that ran on the loop thread: must stay 0 */
        int done_off_main; /* callbacks on another thread: must stay 0 */
        int bad_result;
        StoreWorker *w;
} WorkerCtx;

typedef struct Job {
        WorkerCtx *ctx;
        int index;
        bool write;
        unsigned sleep_usec;
} Job;

static int job_fn(Store *s, void *userdata) {
        Job *j = userdata;
        WorkerCtx *c = j->ctx;
        if (pthread_equal(pthread_self(), c->main_thread))
                c->job_on_main++;
        c->ran[c->n_ran++] = j->index;
        if (j->sleep_usec)
                usleep(j->sleep_usec);
        if (j->write) {
                uint64_t g;
                int r = store_generation_begin(s, NULL, &g);
                if (r < 0)
                        return r;
        }
        return j->index * 3;
}

static void done_fn(int result, void *userdata) {
        Job *j = userdata;
        WorkerCtx *c = j->ctx;
        if (!pthread_equal(pthread_self(), c->main_thread))
                c->done_off_main++;
        if (result != j->index * 3)
                c->bad_result++;
        c->done[c->n_done++] = j->index;
}

static void test_worker_order(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        static WorkerCtx ctx;
        static Job jobs[N_JOBS];
        memset(&ctx, 0, sizeof(ctx));
        ctx.main_thread = pthread_self();

        StoreWorker *w = NULL;
        assert_int_equal(store_worker_new(s, &w), 0);
        int fd = store_worker_fd(w);
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
        assert_int_equal(store_worker_submit(w, NULL, done_fn, NULL), -EINVAL);
        assert_int_equal(store_worker_dispatch(w), 0);

        for (int i = 0; i < N_JOBS; i++) {
                jobs[i] = (Job){ .ctx = &ctx, .index = i, .write = i % 10 == 0 };
                assert_int_equal(store_worker_submit(w, job_fn, done_fn, &jobs[i]), 0);
        }

        /* Completions wait for dispatch: nothing runs on its own. */
        struct pollfd p = { .fd = fd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 10000), 1);
        assert_int_equal(ctx.n_done, 0);

        int dispatched = 0;
        uint64_t deadline = mono_usec() + 60 * 1000000ULL;
        while (ctx.n_done < N_JOBS) {
                assert_true(mono_usec() < deadline);
                if (poll(&p, 1, 1000) == 1)
                        dispatched += store_worker_dispatch(w);
        }
        assert_int_equal(dispatched, N_JOBS);
        assert_int_equal(ctx.n_ran, N_JOBS);
        for (int i = 0; i < N_JOBS; i++) {
                assert_int_equal(ctx.ran[i], i);
                assert_int_equal(ctx.done[i], i);
        }
        assert_int_equal(ctx.job_on_main, 0);
        assert_int_equal(ctx.done_off_main, 0);
        assert_int_equal(ctx.bad_result, 0);
        /* Nothing left: the eventfd is quiet after the last dispatch. */
        assert_int_equal(store_worker_dispatch(w), 0);
        assert_int_equal(poll(&p, 1, 0), 0);

        assert_null(store_worker_free(w));
        assert_null(store_worker_free(NULL));

        uint64_t g;
        assert_int_equal(store_generation_last(s, &g), 0);
        assert_int_equal(g, N_JOBS / 10);
        store_close(s);
}

static Job follow_up;

static void done_submit_more(int result, void *userdata) {
        Job *j = userdata;
        done_fn(result, userdata);
        follow_up = (Job){ .ctx = j->ctx, .index = N_JOBS + 1, .write = true };
        assert_int_equal(store_worker_submit(j->ctx->w, job_fn, done_fn, &follow_up), 0);
}

static void test_worker_free_drains(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        static WorkerCtx ctx;
        static Job jobs[50];
        memset(&ctx, 0, sizeof(ctx));
        ctx.main_thread = pthread_self();

        assert_int_equal(store_worker_new(s, &ctx.w), 0);
        for (int i = 0; i < 50; i++) {
                jobs[i] = (Job){ .ctx = &ctx, .index = i, .write = true, .sleep_usec = 1000 };
                assert_int_equal(store_worker_submit(ctx.w, job_fn, i == 10 ? done_submit_more : done_fn, &jobs[i]), 0);
        }
        /* A job without a callback runs too. */
        static Job silent;
        silent = (Job){ .ctx = &ctx, .index = 50 };
        assert_int_equal(store_worker_submit(ctx.w, job_fn, NULL, &silent), 0);

        /* No dispatch at all: free must run every job and callback. */
        assert_null(store_worker_free(ctx.w));
        assert_int_equal(ctx.n_ran, 52);
        assert_int_equal(ctx.n_done, 51);
        for (int i = 0; i < 50; i++)
                assert_int_equal(ctx.done[i], i);
        assert_int_equal(ctx.done[50], N_JOBS + 1);
        assert_int_equal(ctx.ran[51], N_JOBS + 1);
        assert_int_equal(ctx.job_on_main, 0);
        assert_int_equal(ctx.done_off_main, 0);
        assert_int_equal(ctx.bad_result, 0);

        /* Nothing runs after free returned. */
        usleep(20000);
        assert_int_equal(ctx.n_ran, 52);

        uint64_t g;
        assert_int_equal(store_generation_last(s, &g), 0);
        assert_int_equal(g, 51);
        store_close(s);
}

/* An older store: the table its version did not have dropped, and its
 * version written. */
static void make_older(const char *dir, const char *table, unsigned version) {
        MDB_env *env = raw_open(dir);
        MDB_txn *txn;
        MDB_dbi dbi;
        assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
        assert_int_equal(mdb_dbi_open(txn, table, 0, &dbi), 0);
        assert_int_equal(mdb_drop(txn, dbi, 1), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
        char schema[128];
        snprintf(schema, sizeof(schema), "{\"schema_id\":\"lazaret.domain-store\",\"schema_version\":%u}", version);
        raw_put_str(dir, "meta", "schema", schema);
}

/* A version-1 store (before the audit trail) migrates to 2: the audit table
 * appears, empty, and everything else stays. */
static void test_migration_v1(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        uint64_t g;
        assert_int_equal(store_generation_begin(s, NULL, &g), 0);
        store_close(s);
        /* Make it a version-1 store: no audit table, version 1. */
        make_older(dir, "audit", 1);
        assert_false(raw_table_exists(dir, "audit"));

        s = open_ok(dir);
        unsigned ver = 0;
        assert_int_equal(store_schema_version(s, &ver), 0);
        assert_int_equal(ver, 3);
        json_t *gen = NULL;
        assert_int_equal(store_generation_get(s, g, &gen), 0);
        json_decref(gen);
        json_t *list = NULL;
        assert_int_equal(store_audit_list(s, &list), 0);
        assert_int_equal(json_array_size(list), 0);
        json_decref(list);
        store_close(s);
        assert_true(raw_table_exists(dir, "audit"));
}

/* A version-2 store (before the unclean index) migrates to 3: the index
 * is made from the records, so recovery finds the participants and
 * terminals that are not Clean, and only those, as before. */
static void test_migration_v2(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        uint64_t g, p1, p2, p3;
        assert_int_equal(store_generation_begin(s, NULL, &g), 0);
        assert_int_equal(store_participant_add(s, g, ROLE_NETWORK, NULL, &p1), 0);
        assert_int_equal(store_participant_add(s, g, ROLE_SANDBOX, NULL, &p2), 0);
        assert_int_equal(store_participant_add(s, g, ROLE_HELPER, NULL, &p3), 0);
        assert_int_equal(store_participant_set_state(s, p1, PARTICIPANT_CLEAN, NULL), 0);
        assert_int_equal(store_participant_set_state(s, p3, PARTICIPANT_COMMITTED, NULL), 0);
        put_session(s, U1);
        put_session(s, U2);
        json_t *t = json_pack("{s:s, s:s}", "session_id", U1, "state", "Intent");
        assert_int_equal(store_terminal_put(s, t), 0);
        json_decref(t);
        t = json_pack("{s:s, s:s}", "session_id", U2, "state", "Clean");
        assert_int_equal(store_terminal_put(s, t), 0);
        json_decref(t);
        store_close(s);
        /* Make it a version-2 store: no index, version 2. */
        make_older(dir, "unclean", 2);
        assert_false(raw_table_exists(dir, "unclean"));

        s = open_ok(dir);
        unsigned ver = 0;
        assert_int_equal(store_schema_version(s, &ver), 0);
        assert_int_equal(ver, 3);
        json_t *list = NULL;
        assert_int_equal(store_list_unclean(s, &list), 0);
        assert_int_equal(json_array_size(list), 2);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 0), "participant_id")),
                         (json_int_t) p2);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 1), "participant_id")),
                         (json_int_t) p3);
        json_decref(list);
        assert_int_equal(store_list_unclean_terminals(s, &list), 0);
        assert_int_equal(json_array_size(list), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "session_id")), U1);
        json_decref(list);
        /* And it is kept from then on: Clean leaves the index. */
        assert_int_equal(store_participant_set_state(s, p3, PARTICIPANT_RELEASE_INTENT, NULL), 0);
        assert_int_equal(store_participant_set_state(s, p3, PARTICIPANT_CLEAN, NULL), 0);
        assert_int_equal(store_terminal_set_state(s, U1, TERMINAL_CLEAN, NULL), 0);
        assert_int_equal(store_list_unclean(s, &list), 0);
        assert_int_equal(json_array_size(list), 1);
        json_decref(list);
        assert_int_equal(store_list_unclean_terminals(s, &list), 0);
        assert_int_equal(json_array_size(list), 0);
        json_decref(list);
        store_close(s);
        /* One key left, p2's: p3 and the terminal left it when Clean. */
        char *dump = raw_dump(dir, "unclean");
        assert_non_null(dump);
        assert_null(strstr(dump, "t" U1));
        size_t lines = 0;
        for (const char *c = dump; *c; c++)
                lines += *c == '\n';
        assert_int_equal(lines, 1);
        free(dump);
}

/* store_audit_append copies what it is given. */
static int append(Store *s, json_t *fields, uint64_t *ret_seq) {
        int r = store_audit_append(s, fields, ret_seq);
        json_decref(fields);
        return r;
}

static char *audit_key(uint64_t seq) {
        static char k[8];
        uint64_t be = htobe64(seq);
        memcpy(k, &be, 8);
        return k;
}

static void test_audit_chain(void **state) {
        const char *dir = *state;
        Store *s = open_ok(dir);
        for (int i = 0; i < 4; i++) {
                uint64_t seq = 0;
                assert_int_equal(append(s,
                                        json_pack("{s:s, s:s, s:i}", "command", i == 2 ? "ls; id" : "ls", "decision",
                                                  i == 2 ? "user" : "auto", "exit_code", i),
                                        &seq),
                                 0);
                assert_int_equal(seq, (uint64_t) i + 1);
        }
        /* The store's own fields may not come from the caller. */
        json_t *bad = json_pack("{s:i}", "seq", 9);
        assert_int_equal(store_audit_append(s, bad, NULL), -EINVAL);
        json_decref(bad);
        bad = json_pack("{s:s}", "hash", "x");
        assert_int_equal(store_audit_append(s, bad, NULL), -EINVAL);
        json_decref(bad);

        json_t *list = NULL;
        assert_int_equal(store_audit_list(s, &list), 0);
        assert_int_equal(json_array_size(list), 4);
        json_t *first = json_array_get(list, 0), *second = json_array_get(list, 1);
        assert_string_equal(json_string_value(json_object_get(first, "prev_hash")),
                            "0000000000000000000000000000000000000000000000000000000000000000");
        assert_string_equal(json_string_value(json_object_get(second, "prev_hash")),
                            json_string_value(json_object_get(first, "hash")));
        uint64_t bad_seq = 0;
        const char *why = NULL;
        assert_int_equal(audit_verify(list, &bad_seq, &why), 0);

        /* Changed in memory: the record's hash no longer fits. */
        json_t *copy = json_deep_copy(list);
        json_object_set_new(json_array_get(copy, 2), "command", json_string("ls"));
        assert_int_equal(audit_verify(copy, &bad_seq, &why), -EBADMSG);
        assert_int_equal(bad_seq, 3);
        assert_string_equal(why, "its content does not match its hash (it was changed)");
        json_decref(copy);
        /* One taken out: the next one's number is wrong. */
        copy = json_deep_copy(list);
        json_array_remove(copy, 1);
        assert_int_equal(audit_verify(copy, &bad_seq, &why), -EBADMSG);
        assert_int_equal(bad_seq, 2);
        json_decref(copy);
        /* Renumbered after a removal and rehashed: the link still breaks. */
        copy = json_deep_copy(list);
        json_array_remove(copy, 1);
        json_object_set_new(json_array_get(copy, 1), "seq", json_integer(2));
        json_object_set_new(json_array_get(copy, 2), "seq", json_integer(3));
        assert_int_equal(audit_verify(copy, &bad_seq, &why), -EBADMSG);
        assert_int_equal(bad_seq, 2);
        json_decref(copy);
        json_decref(list);
        store_close(s);

        /* Changed on disk, with LMDB's own calls: the store's reader sees it. */
        char *rec = NULL;
        {
                MDB_env *env = raw_open(dir);
                MDB_txn *txn;
                MDB_dbi dbi;
                assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
                assert_int_equal(mdb_dbi_open(txn, "audit", 0, &dbi), 0);
                MDB_val k = { 8, audit_key(3) }, v;
                assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
                rec = malloc(v.mv_size + 1); /* LMDB values are not NUL-terminated */
                assert_non_null(rec);
                memcpy(rec, v.mv_data, v.mv_size);
                rec[v.mv_size] = '\0';
                char *d = strstr(rec, "\"decision\":\"user\"");
                assert_non_null(d);
                memcpy(d, "\"decision\":\"auto\"", 17);
                MDB_val nv = { strlen(rec), rec };
                assert_int_equal(mdb_put(txn, dbi, &k, &nv, 0), 0);
                assert_int_equal(mdb_txn_commit(txn), 0);
                mdb_env_close(env);
        }
        free(rec);
        s = open_ok(dir);
        assert_int_equal(store_audit_list(s, &list), 0);
        assert_int_equal(audit_verify(list, &bad_seq, &why), -EBADMSG);
        assert_int_equal(bad_seq, 3);
        json_decref(list);
        /* Appending goes on from the last record, as it is. */
        uint64_t seq = 0;
        assert_int_equal(append(s, json_pack("{s:s}", "command", "uname"), &seq), 0);
        assert_int_equal(seq, 5);
        store_close(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_transition_tables),
                cmocka_unit_test_setup_teardown(test_open_create, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_open_bad_paths, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_open_busy_other_process, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_domain_mismatch, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_newer_and_foreign, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_generations, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_participant_transitions, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_list_unclean, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_sessions, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_terminals, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_bad_values, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_migration, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_migration_failure, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_migration_v1, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_migration_v2, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_audit_chain, setup_dir, teardown_dir),
                cmocka_unit_test(test_identity_self),
                cmocka_unit_test(test_identity_child),
                cmocka_unit_test_setup_teardown(test_worker_order, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_worker_free_drains, setup_dir, teardown_dir),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
