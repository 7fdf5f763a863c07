/* SPDX-License-Identifier: MIT */
/* Unit tests of the sandbox backends' interface (issue 43): the table
 * (every backend has every op, found by its name), and the sandbox
 * participant driven through the participant driver and the real Domain
 * Store with a fake backend whose sandboxes are entries of a "world": a
 * start, a start that fails before or after it made something, a
 * recovery by the backend the record names, a record naming no backend.
 * After each, the world is empty or the record that names what is left is
 * not Clean. Then what the two real backends say without a sandbox: the
 * native one has no freezer (-EOPNOTSUPP), gVisor no memory cgroup. */
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

#include "config.h"
#include "macro.h"
#include "participant.h"
#include "sandbox-backend.h"
#include "store.h"
#include "string-util.h"

/* ---- the fake backend ------------------------------------------------------ */

typedef enum FakeFail {
        FAKE_OK,
        FAKE_FAIL_BEFORE, /* start fails having made nothing */
        FAKE_FAIL_AFTER, /* start fails having made the sandbox, and leaves its state */
} FakeFail;

static struct {
        char running[8][64]; /* sandbox names; "" free */
        FakeFail fail;
        int starts, releases, dones;
        const char *last_plan_workspace;
} world;

static int world_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(world.running); i++)
                if (name && streq(world.running[i], name))
                        return (int) i;
        return -1;
}

static size_t world_count(void) {
        size_t n = 0;
        for (size_t i = 0; i < ELEMENTSOF(world.running); i++)
                n += world.running[i][0] != '\0';
        return n;
}

typedef struct FakeState {
        int slot;
} FakeState;

static int fake_start(Sandbox *sb, json_t **ret_commit, char **ret_error) {
        world.starts++;
        world.last_plan_workspace = sb->plan.workspace;
        if (world.fail == FAKE_FAIL_BEFORE) {
                *ret_error = strdup("fake: no room for a sandbox");
                return -EIO;
        }
        int slot = world_find("");
        assert_true(slot >= 0);
        snprintf(world.running[slot], sizeof(world.running[slot]), "%s", sb->name);
        FakeState *st = calloc(1, sizeof(*st));
        assert_non_null(st);
        st->slot = slot;
        sb->state = st;
        if (world.fail == FAKE_FAIL_AFTER) {
                *ret_error = strdup("fake: made it, then failed");
                return -EIO;
        }
        sb->id = strdup("fake-id");
        sb->supervisor = 1;
        *ret_commit = json_pack("{s:s}", "container_id", "fake-id");
        return 0;
}

/* By the record's name: live or a dead coordinator's. */
static int fake_release(Sandbox *sb, json_t *own) {
        (void) sb;
        world.releases++;
        int slot = world_find(json_string_value(json_object_get(own, "container_name")));
        if (slot >= 0)
                world.running[slot][0] = '\0';
        return 0;
}

static void fake_done(Sandbox *sb) {
        world.dones++;
        free(sb->state);
        sb->state = NULL;
}

static int fake_reap(Sandbox *sb, const char **ret_why) {
        (void) sb;
        (void) ret_why;
        return 0;
}

static int fake_session_input(Sandbox *sb, const SessionExec *x, json_t *env, int *ret_fd) {
        (void) sb;
        (void) x;
        (void) env;
        (void) ret_fd;
        return -EOPNOTSUPP;
}

static const char *fake_session_program(Sandbox *sb) {
        (void) sb;
        return "/bin/true";
}

static char **fake_session_argv(Sandbox *sb, const SessionExec *x) {
        (void) sb;
        (void) x;
        return NULL;
}

static void fake_session_started(Sandbox *sb, pid_t pid) {
        (void) sb;
        (void) pid;
}

static char **fake_base_env(const Sandbox *sb) {
        (void) sb;
        return NULL;
}

static const char *fake_inside_path(const Sandbox *sb, SandboxPath path) {
        (void) sb;
        (void) path;
        return "/";
}

static int fake_memory_open(Sandbox *sb, char *why, size_t size) {
        (void) sb;
        snprintf(why, size, "fake: no measure");
        return -EOPNOTSUPP;
}

static int fake_memory_used(Sandbox *sb, uint64_t *ret) {
        (void) sb;
        (void) ret;
        return -EOPNOTSUPP;
}

static void fake_memory_close(Sandbox *sb) {
        (void) sb;
}

static const char *fake_limit_enforcer(Sandbox *sb, SandboxLimit limit, bool *ret_enforced) {
        (void) sb;
        (void) limit;
        *ret_enforced = false;
        return "nothing";
}

static int fake_pause_argv(Sandbox *sb, bool pause, Argv *ret, char *error, size_t size) {
        (void) sb;
        (void) pause;
        (void) ret;
        snprintf(error, size, "fake: no freezer");
        return -EOPNOTSUPP;
}

static int fake_egress_probe(Sandbox *sb, const char *name, const char *port, uint64_t t, char **ret_line) {
        (void) sb;
        (void) name;
        (void) port;
        (void) t;
        (void) ret_line;
        return -EOPNOTSUPP;
}

static const char *fake_start_warning(Sandbox *sb) {
        (void) sb;
        return NULL;
}

static void fake_describe(Sandbox *sb, json_t *sandbox, json_t *limits) {
        (void) sb;
        (void) limits;
        json_object_set_new(sandbox, "boundary", json_string("none"));
}

static const SandboxBackend fake_backend = {
        .name = "fake",
        .start = fake_start,
        .release = fake_release,
        .done = fake_done,
        .reap = fake_reap,
        .session_input = fake_session_input,
        .session_program = fake_session_program,
        .session_argv = fake_session_argv,
        .session_started = fake_session_started,
        .base_env = fake_base_env,
        .inside_path = fake_inside_path,
        .memory_open = fake_memory_open,
        .memory_used = fake_memory_used,
        .memory_killed = fake_memory_used,
        .memory_close = fake_memory_close,
        .limit_enforcer = fake_limit_enforcer,
        .pause_argv = fake_pause_argv,
        .egress_probe = fake_egress_probe,
        .start_warning = fake_start_warning,
        .describe = fake_describe,
};

/* The coordinator's kind_sandbox, with the Sandbox as its context. */
static int k_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        (void) obj;
        (void) intent;
        return sandbox_part_acquire(ctx, ret_commit, ret_error);
}

static int k_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        (void) obj;
        (void) generation;
        return sandbox_part_release(ctx, own);
}

static const PartKind kind = { .role = ROLE_SANDBOX, .acquire = k_acquire, .release = k_release };
static const PartKind *const kinds[] = { &kind };

/* ---- a store ---------------------------------------------------------------- */

static char dir[64];
static const StoreDomain dom = { "0123456789ab", "p", "/w" };

static Store *open_store(void) {
        Store *st = NULL;
        assert_int_equal(store_open(dir, &dom, 0, &st), 0);
        return st;
}

static size_t unclean(Store *st) {
        json_t *list = NULL;
        assert_int_equal(store_list_unclean(st, &list), 0);
        size_t n = json_array_size(list);
        json_decref(list);
        return n;
}

static int setup(void **state) {
        (void) state;
        memset(&world, 0, sizeof(world));
        snprintf(dir, sizeof(dir), "/tmp/lazaret-backend-XXXXXX");
        assert_non_null(mkdtemp(dir));
        return 0;
}

static int teardown(void **state) {
        (void) state;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
        return 0;
}

static Sandbox fake_sandbox(const LaunchSpec *spec, const char *name) {
        Sandbox sb = { .backend = &fake_backend, .spec = spec, .name = name, .generation = 1 };
        sb.plan.workspace = strdup("/w/git-mnt");
        sb.plan.workspace_routed = true;
        sb.plan.terminfo_dir = strdup("/d/terminfo");
        return sb;
}

/* A new generation in st, and sb's participant begun there through the
 * driver: part_begin's result, *ret_err its error (or NULL). */
static int begin_sandbox(Store *st, Sandbox *sb, Part *ret, char **ret_err) {
        uint64_t gen;
        assert_int_equal(store_generation_begin(st, NULL, &gen), 0);
        PartStore ps = part_store_of(st);
        return part_begin(&ps, gen, &kind, sandbox_part_intent(sb, json_pack("{s:i}", "pid", 1)), sb, sb, ret, ret_err);
}

/* ---- the tests ---------------------------------------------------------------- */

static void test_table(void **state) {
        (void) state;
        for (Backend b = 0; b < _BACKEND_MAX; b++) {
                const SandboxBackend *k = sandbox_backend_for(b);
                assert_non_null(k);
                assert_string_equal(k->name, backend_to_string(b));
                assert_ptr_equal(sandbox_backend_by_name(k->name), k);
                /* None is NULL: what a backend cannot do says so. */
                assert_non_null(k->preflight);
                assert_non_null(k->start);
                assert_non_null(k->release);
                assert_non_null(k->done);
                assert_non_null(k->reap);
                assert_non_null(k->session_input);
                assert_non_null(k->session_program);
                assert_non_null(k->session_argv);
                assert_non_null(k->session_started);
                assert_non_null(k->base_env);
                assert_non_null(k->inside_path);
                assert_non_null(k->memory_open);
                assert_non_null(k->memory_used);
                assert_non_null(k->memory_killed);
                assert_non_null(k->memory_close);
                assert_non_null(k->limit_enforcer);
                assert_non_null(k->pause_argv);
                assert_non_null(k->egress_probe);
                assert_non_null(k->start_warning);
                assert_non_null(k->describe);
        }
        assert_null(sandbox_backend_for(_BACKEND_MAX));
        assert_null(sandbox_backend_by_name("fake"));
        assert_null(sandbox_backend_by_name(NULL));
}

static void test_start_and_release(void **state) {
        (void) state;
        LaunchSpec spec = {};
        Store *st = open_store();
        PartStore ps = part_store_of(st);
        Sandbox sb = fake_sandbox(&spec, "lazaret-coord-a");
        Part p = {};
        assert_int_equal(begin_sandbox(st, &sb, &p, NULL), 0);
        assert_int_equal(world_count(), 1);
        assert_string_equal(world.last_plan_workspace, "/w/git-mnt");
        assert_string_equal(sb.id, "fake-id");
        /* The record: the backend, the plan, and what the start learnt. */
        json_t *rec = NULL;
        assert_int_equal(store_participant_get(st, p.id, &rec), 0);
        json_t *own = json_object_get(rec, "ownership");
        assert_string_equal(json_string_value(json_object_get(own, "backend")), "fake");
        assert_string_equal(json_string_value(json_object_get(own, "container_id")), "fake-id");
        assert_string_equal(json_string_value(json_object_get(json_object_get(own, "plan"), "workspace")),
                            "/w/git-mnt");
        assert_true(json_is_true(json_object_get(json_object_get(own, "plan"), "workspace_routed")));
        assert_string_equal(json_string_value(json_object_get(rec, "state")), "Committed");
        json_decref(rec);
        assert_int_equal(part_end(&ps, &p, &sb, &sb), 0);
        assert_int_equal(world_count(), 0);
        assert_int_equal(unclean(st), 0);
        sandbox_done(&sb);
        assert_null(sb.state);
        assert_null(sb.id);
        assert_int_equal(world.dones, 1);
        mount_plan_done(&sb.plan);
        store_close(st);
}

static void test_failed_start_leaves_nothing(void **state) {
        (void) state;
        LaunchSpec spec = {};
        for (FakeFail f = FAKE_FAIL_BEFORE; f <= FAKE_FAIL_AFTER; f++) {
                Store *st = open_store();
                world.fail = f;
                Sandbox sb = fake_sandbox(&spec, "lazaret-coord-b");
                Part p = {};
                char *err = NULL;
                assert_int_equal(begin_sandbox(st, &sb, &p, &err), -EIO);
                assert_non_null(err);
                assert_true(startswith(err, "fake: "));
                free(err);
                /* What the failed start made is gone, its state freed, and
                 * the record is Clean. */
                assert_int_equal(world_count(), 0);
                assert_null(sb.state);
                assert_int_equal(p.id, 0);
                assert_int_equal(unclean(st), 0);
                mount_plan_done(&sb.plan);
                store_close(st);
        }
        assert_int_equal(world.dones, 1); /* FAKE_FAIL_AFTER's state, by the interface */
}

/* A coordinator dies holding its sandbox: the next one's recovery removes
 * it by the backend its record names, with no state of its own. */
static void test_recovery_by_the_recorded_backend(void **state) {
        (void) state;
        LaunchSpec spec = {};
        Store *st = open_store();
        Sandbox sb = fake_sandbox(&spec, "lazaret-coord-c");
        Part p = {};
        assert_int_equal(begin_sandbox(st, &sb, &p, NULL), 0);
        sandbox_done(&sb); /* the coordinator's memory, gone with it */
        mount_plan_done(&sb.plan);
        st = store_close(st);
        assert_int_equal(world_count(), 1);

        st = open_store();
        PartStore ps = part_store_of(st);
        assert_int_equal(unclean(st), 1);
        Sandbox next = { .backend = &fake_backend, .spec = &spec, .name = "lazaret-coord-c" };
        assert_int_equal(part_recover(&ps, kinds, ELEMENTSOF(kinds), &next), 1);
        assert_int_equal(world_count(), 0);
        assert_int_equal(unclean(st), 0);

        /* A record naming a backend nobody has is left for a later look,
         * not marked Clean. */
        uint64_t gen;
        assert_int_equal(store_generation_begin(st, NULL, &gen), 0);
        uint64_t id;
        json_t *own = json_pack("{s:s, s:s}", "container_name", "x", "backend", "nonesuch");
        assert_int_equal(store_participant_add(st, gen, ROLE_SANDBOX, own, &id), 0);
        json_decref(own);
        assert_int_equal(part_recover(&ps, kinds, ELEMENTSOF(kinds), &next), -EIO);
        assert_int_equal(unclean(st), 1);
        store_close(st);
}

/* What the real backends say without a sandbox. */
static void test_not_supported_is_explicit(void **state) {
        (void) state;
        LaunchSpec spec = { .rootless = true };
        Sandbox sb = { .backend = &sandbox_backend_native, .spec = &spec, .name = "n" };
        char err[200] = "";
        Argv a = {};
        assert_int_equal(sandbox_backend_native.pause_argv(&sb, true, &a, err, sizeof(err)), -EOPNOTSUPP);
        assert_non_null(strstr(err, "no freezer"));
        assert_null(a.v);
        uint64_t k = 0;
        sb.backend = &sandbox_backend_gvisor;
        assert_int_equal(sandbox_backend_gvisor.memory_killed(&sb, &k), -EOPNOTSUPP);
        assert_string_equal(sandbox_backend_gvisor.inside_path(&sb, SANDBOX_PATH_CA_BUNDLE), CA_BUNDLE_PATH);
        assert_null(sandbox_gvisor_info(&sb));
        assert_int_equal(sandbox_native_init_pid(&sb), 0);
        bool on = false;
        assert_non_null(strstr(sandbox_backend_gvisor.limit_enforcer(&sb, SANDBOX_LIMIT_PIDS, &on), "gVisor"));
        assert_true(on);
}

static void test_mount_plan_json(void **state) {
        (void) state;
        MountPlan p = { .workspace = strdup("/home/u/wt"),
                        .git_source = strdup("/d/git-mnt"),
                        .terminfo_dir = strdup("/d/ti"),
                        .broker_dir = strdup("/d/broker") };
        json_t *j = mount_plan_to_json(&p);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "workspace")), "/home/u/wt");
        assert_string_equal(json_string_value(json_object_get(j, "git_source")), "/d/git-mnt");
        assert_true(json_is_false(json_object_get(j, "workspace_routed")));
        assert_true(json_is_false(json_object_get(j, "escalation")));
        assert_true(json_is_true(json_object_get(j, "names")));
        assert_true(json_is_null(json_object_get(j, "network_from")));
        json_decref(j);
        mount_plan_done(&p);
        assert_null(p.workspace);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table),
                cmocka_unit_test_setup_teardown(test_start_and_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_start_leaves_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_recovery_by_the_recorded_backend, setup, teardown),
                cmocka_unit_test(test_not_supported_is_explicit),
                cmocka_unit_test(test_mount_plan_json),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
