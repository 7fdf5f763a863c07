/* SPDX-License-Identifier: MIT */
/* Unit tests of the participant driver (issue 17): fake participants whose
 * resources are entries of a "world", a fake store, and a failure injected
 * at every step of start, teardown and recovery. After each, every
 * resource in the world must be named by a record that is not Clean (so
 * the next recovery finds it), and a recovery without failures must leave
 * the world empty. Then the same walk on the real Domain Store. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "macro.h"
#include "participant.h"
#include "store.h"

/* ---- the world and its faults -------------------------------------------- */

#define MAX_RES 64

typedef enum Step {
        STEP_NONE,
        STEP_ADD, /* recording Intent */
        STEP_ACQUIRE, /* acquire fails having made nothing */
        STEP_ACQUIRE_HALF, /* acquire fails having made the resource */
        STEP_COMMIT, /* recording Committed */
        STEP_RELEASE_INTENT,
        STEP_RELEASE, /* release fails, the resource stays */
        STEP_CLEAN, /* recording Clean */
        _STEP_MAX,
} Step;

static struct {
        bool exists[MAX_RES];
        Step fail;
        int releases;
} world;

typedef struct Rec {
        uint64_t id, generation;
        ParticipantRole role;
        ParticipantState state;
        json_t *own;
} Rec;

static struct {
        Rec recs[256];
        size_t n;
} fake;

static Rec *fake_find(uint64_t id) {
        for (size_t i = 0; i < fake.n; i++)
                if (fake.recs[i].id == id)
                        return &fake.recs[i];
        return NULL;
}

static int f_add(void *u, uint64_t generation, ParticipantRole role, json_t *own, uint64_t *ret_id) {
        (void) u;
        if (world.fail == STEP_ADD)
                return -EIO;
        Rec *r = &fake.recs[fake.n++];
        *r = (Rec){ .id = fake.n,
                    .generation = generation,
                    .role = role,
                    .state = PARTICIPANT_INTENT,
                    .own = json_deep_copy(own) };
        *ret_id = r->id;
        return 0;
}

static int f_set_state(void *u, uint64_t id, ParticipantState state, json_t *own) {
        (void) u;
        Rec *r = fake_find(id);
        if (!r)
                return -ENOENT;
        if (((state == PARTICIPANT_COMMITTED || state == PARTICIPANT_PREPARED) && world.fail == STEP_COMMIT) ||
            (state == PARTICIPANT_RELEASE_INTENT && world.fail == STEP_RELEASE_INTENT) ||
            (state == PARTICIPANT_CLEAN && world.fail == STEP_CLEAN))
                return -EIO;
        if (!participant_transition_valid(r->state, state))
                return -EINVAL;
        r->state = state;
        if (own)
                json_object_update(r->own, own);
        return 0;
}

static int f_update(void *u, uint64_t id, json_t *own) {
        (void) u;
        Rec *r = fake_find(id);
        if (!r || r->state == PARTICIPANT_CLEAN)
                return -EINVAL;
        json_object_update(r->own, own);
        return 0;
}

static int f_get(void *u, uint64_t id, json_t **ret) {
        (void) u;
        Rec *r = fake_find(id);
        if (!r)
                return -ENOENT;
        *ret = json_pack("{s:I, s:I, s:s, s:s, s:O}", "participant_id", (json_int_t) r->id, "generation_id",
                         (json_int_t) r->generation, "role", participant_role_to_string(r->role), "state",
                         participant_state_to_string(r->state), "ownership", r->own);
        return 0;
}

static int f_list_unclean(void *u, json_t **ret) {
        json_t *a = json_array();
        for (size_t i = 0; i < fake.n; i++)
                if (fake.recs[i].state != PARTICIPANT_CLEAN) {
                        json_t *rec;
                        assert_int_equal(f_get(u, fake.recs[i].id, &rec), 0);
                        json_array_append_new(a, rec);
                }
        *ret = a;
        return 0;
}

static const PartStore fake_store = { NULL, f_add, f_set_state, f_update, f_get, f_list_unclean };

static void reset(void) {
        for (size_t i = 0; i < fake.n; i++)
                json_decref(fake.recs[i].own);
        memset(&fake, 0, sizeof(fake));
        memset(&world, 0, sizeof(world));
}

/* ---- the fake kinds -------------------------------------------------------- */

static int res_of(json_t *own) {
        json_t *v = json_object_get(own, "res");
        return json_is_integer(v) ? (int) json_integer_value(v) : -1;
}

static int acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        (void) ctx;
        (void) obj;
        int n = res_of(intent);
        assert_true(n >= 0 && n < MAX_RES);
        if (world.fail == STEP_ACQUIRE) {
                *ret_error = strdup("injected");
                return -EIO;
        }
        world.exists[n] = true;
        if (world.fail == STEP_ACQUIRE_HALF)
                return -EIO;
        *ret_commit = json_pack("{s:b}", "made", 1);
        return 0;
}

static int release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        (void) ctx;
        (void) obj;
        (void) generation;
        world.releases++;
        if (world.fail == STEP_RELEASE)
                return -EBUSY;
        int n = res_of(own);
        if (n >= 0 && n < MAX_RES)
                world.exists[n] = false;
        return 0;
}

static const PartKind kind_a = { .role = ROLE_GIT_ROUTING, .acquire = acquire, .release = release };
static const PartKind kind_b = {
        .role = ROLE_PREPARED_LOWER, .recover_pass = 1, .acquire_prepares = true, .acquire = acquire, .release = release
};
static const PartKind *const kinds[] = { &kind_a, &kind_b };

/* Every resource that exists is named by a record that is not Clean. */
static void assert_never_forgotten(const char *when, Step step) {
        for (int n = 0; n < MAX_RES; n++) {
                if (!world.exists[n])
                        continue;
                bool named = false;
                for (size_t i = 0; i < fake.n; i++)
                        named = named || (fake.recs[i].state != PARTICIPANT_CLEAN && res_of(fake.recs[i].own) == n);
                if (!named)
                        fail_msg("%s, failure at step %d: resource %d exists and no open record names it", when,
                                 (int) step, n);
        }
}

static void assert_recovery_empties_the_world(const char *when, Step step) {
        world.fail = STEP_NONE;
        int r = part_recover(&fake_store, kinds, ELEMENTSOF(kinds), NULL);
        if (r < 0)
                fail_msg("%s, step %d: recovery failed: %d", when, (int) step, r);
        for (int n = 0; n < MAX_RES; n++)
                if (world.exists[n])
                        fail_msg("%s, step %d: resource %d survived the recovery", when, (int) step, n);
        for (size_t i = 0; i < fake.n; i++)
                assert_int_equal(fake.recs[i].state, PARTICIPANT_CLEAN);
}

static int begin(const PartKind *k, int res, Part *p, char **err) {
        return part_begin(&fake_store, 1, k, json_pack("{s:i}", "res", res), NULL, NULL, p, err);
}

/* ---- the tests --------------------------------------------------------------- */

static void test_start_with_a_failure_at_every_step(void **state) {
        (void) state;
        for (Step s = STEP_NONE; s < _STEP_MAX; s++) {
                reset();
                Part a = {}, b = {};
                char *err = NULL;
                assert_int_equal(begin(&kind_a, 1, &a, &err), 0);
                free(err);
                world.fail = s;
                int r = begin(&kind_b, 2, &b, &err);
                bool should_fail = s == STEP_ADD || s == STEP_ACQUIRE || s == STEP_ACQUIRE_HALF;
                assert_int_equal(r < 0, should_fail);
                if (s == STEP_ACQUIRE)
                        assert_string_equal(err, "injected");
                free(err);
                if (s == STEP_ADD)
                        assert_false(world.exists[2]); /* nothing made without a record */
                assert_never_forgotten("start", s);
                /* The failed start's teardown, then a recovery. */
                world.fail = STEP_NONE;
                (void) part_end(&fake_store, &b, NULL, NULL);
                (void) part_end(&fake_store, &a, NULL, NULL);
                assert_never_forgotten("teardown after start", s);
                assert_recovery_empties_the_world("start", s);
        }
        reset();
}

static void test_teardown_with_a_failure_at_every_step(void **state) {
        (void) state;
        for (Step s = STEP_NONE; s < _STEP_MAX; s++) {
                reset();
                Part a = {}, b = {};
                assert_int_equal(begin(&kind_a, 1, &a, NULL), 0);
                assert_int_equal(begin(&kind_b, 2, &b, NULL), 0);
                assert_true(world.exists[1] && world.exists[2]);
                world.fail = s;
                int r = part_end(&fake_store, &b, NULL, NULL);
                assert_int_equal(r < 0, s == STEP_RELEASE);
                assert_int_equal(b.id, 0); /* the caller's hold ends either way */
                (void) part_end(&fake_store, &a, NULL, NULL);
                assert_never_forgotten("teardown", s);
                if (s == STEP_RELEASE)
                        assert_true(world.exists[1] && world.exists[2]);
                assert_recovery_empties_the_world("teardown", s);
        }
        reset();
}

static void test_recovery_with_a_failure_at_every_step(void **state) {
        (void) state;
        for (Step s = STEP_NONE; s < _STEP_MAX; s++) {
                reset();
                Part a = {}, b = {}, c = {};
                /* A dead coordinator's: one committed, one of each kind, one
                 * that only got as far as Intent (its commit was lost). */
                assert_int_equal(begin(&kind_a, 1, &a, NULL), 0);
                assert_int_equal(begin(&kind_b, 2, &b, NULL), 0);
                world.fail = STEP_COMMIT;
                assert_int_equal(begin(&kind_a, 3, &c, NULL), 0);
                world.fail = s;
                int r = part_recover(&fake_store, kinds, ELEMENTSOF(kinds), NULL);
                assert_int_equal(r < 0, s == STEP_RELEASE);
                if (r >= 0)
                        assert_int_equal(r, 3);
                assert_never_forgotten("recovery", s);
                assert_recovery_empties_the_world("recovery", s);
        }
        reset();
}

static void test_recovery_order_and_unknown_roles(void **state) {
        (void) state;
        reset();
        Part a = {}, b = {};
        /* b (pass 1) is recorded first, a (pass 0) must go first anyway. */
        assert_int_equal(begin(&kind_b, 2, &b, NULL), 0);
        assert_int_equal(begin(&kind_a, 1, &a, NULL), 0);
        assert_int_equal(part_recover(&fake_store, kinds, ELEMENTSOF(kinds), NULL), 2);
        assert_true(fake.recs[1].state == PARTICIPANT_CLEAN && fake.recs[0].state == PARTICIPANT_CLEAN);

        /* A role no kind covers: refused, nothing touched. */
        reset();
        assert_int_equal(begin(&kind_a, 1, &a, NULL), 0);
        static const PartKind *const only_b[] = { &kind_b };
        assert_int_equal(part_recover(&fake_store, only_b, 1, NULL), -EPROTO);
        assert_true(world.exists[1]);
        assert_int_equal(world.releases, 0);
        reset();
}

static void test_update(void **state) {
        (void) state;
        reset();
        Part a = {};
        assert_int_equal(begin(&kind_a, 1, &a, NULL), 0);
        assert_int_equal(part_update(&fake_store, &a, -1, json_pack("{s:s}", "evidence", "x")), 0);
        assert_string_equal(json_string_value(json_object_get(fake.recs[0].own, "evidence")), "x");
        assert_true(json_is_true(json_object_get(fake.recs[0].own, "made")));
        Part none = {};
        assert_int_equal(part_update(&fake_store, &none, -1, json_object()), -ENOENT);
        assert_int_equal(part_end(&fake_store, &a, NULL, NULL), 0);
        assert_int_equal(part_end(&fake_store, &a, NULL, NULL), 0); /* nothing held: nothing to do */
        assert_int_equal(world.releases, 1);
        reset();
}

/* The same walk on the real Domain Store: records survive a close, and
 * a recovery from a reopened store releases what the first left. */
static void test_real_store(void **state) {
        (void) state;
        reset();
        char dir[] = "/tmp/lazaret-part-XXXXXX";
        assert_non_null(mkdtemp(dir));
        StoreDomain dom = { "0123456789ab", "p", "/w" };
        Store *st = NULL;
        assert_int_equal(store_open(dir, &dom, 0, &st), 0);
        uint64_t gen;
        assert_int_equal(store_generation_begin(st, NULL, &gen), 0);
        PartStore ps = part_store_of(st);
        Part a = {}, b = {};
        assert_int_equal(part_begin(&ps, gen, &kind_a, json_pack("{s:i}", "res", 1), NULL, NULL, &a, NULL), 0);
        assert_int_equal(part_begin(&ps, gen, &kind_b, json_pack("{s:i}", "res", 2), NULL, NULL, &b, NULL), 0);
        assert_int_equal(part_end(&ps, &a, NULL, NULL), 0);
        assert_false(world.exists[1]);
        st = store_close(st); /* the coordinator dies holding b */

        assert_int_equal(store_open(dir, &dom, 0, &st), 0);
        ps = part_store_of(st);
        json_t *list = NULL;
        assert_int_equal(store_list_unclean(st, &list), 0);
        assert_int_equal(json_array_size(list), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "state")), "Prepared");
        json_decref(list);
        assert_int_equal(part_recover(&ps, kinds, ELEMENTSOF(kinds), NULL), 1);
        assert_false(world.exists[2]);
        assert_int_equal(store_list_unclean(st, &list), 0);
        assert_int_equal(json_array_size(list), 0);
        json_decref(list);
        st = store_close(st);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
        reset();
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_start_with_a_failure_at_every_step),
                cmocka_unit_test(test_teardown_with_a_failure_at_every_step),
                cmocka_unit_test(test_recovery_with_a_failure_at_every_step),
                cmocka_unit_test(test_recovery_order_and_unknown_roles),
                cmocka_unit_test(test_update),
                cmocka_unit_test(test_real_store),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
