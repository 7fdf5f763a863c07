/* SPDX-License-Identifier: MIT */
/* The LaunchSpec's field table (lazaret/launch, issue 43): every field set
 * to a value of its own goes to JSON and back unchanged; the JSON has the
 * keys the CLI and the coordinator have always exchanged (the spec's
 * fingerprint is a digest of it); a required field missing, or of the
 * wrong type, is refused and leaks nothing (ASan). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-trees.h"
#include "launch.h"
#include "netpolicy-digest.h"

#define FIELD(s, f, type) ((type *) (void *) ((char *) (s) + (f)->offset))

/* The keys of the JSON form, as the hand-written form had them. */
static const char *const keys[] = {
        "agent",
        "agent_trees",
        "auto_approve",
        "backend",
        "branch",
        "broker",
        "broker_connections",
        "broker_resolvers",
        "ca_digest",
        "ca_files",
        "catalog_dir",
        "check_server_name",
        "command",
        "cpu_limit",
        "disk_limit_mib",
        "domain_dir",
        "domain_hash",
        "domains",
        "e2fsck",
        "env_names",
        "escalate",
        "escalation_enabled",
        "escalation_output_max",
        "escalation_socket_dir",
        "escalation_time_limit",
        "fingerprint",
        "fuse2fs",
        "git_dir",
        "git_dir_id",
        "image",
        "init",
        "lock_path",
        "mask",
        "memory_cgroup",
        "memory_limit_mib",
        "native",
        "native_fs_only",
        "netd",
        "netpolicy",
        "netpolicy_digest",
        "nofile",
        "nproc",
        "own_address_rules",
        "persistent_dirs",
        "podman",
        "probe_dns_name",
        "probe_domains",
        "probe_targets",
        "profile",
        "protect",
        "relay",
        "rootless",
        "runsc",
        "runsc_network",
        "runtime_dir",
        "sidecar_image",
        "slirp4netns",
        "socket_path",
        "volumes",
        "workspace",
        "workspace_id",
};

static char **strv2(const char *a, const char *b) {
        char **v = calloc(3, sizeof(char *));
        v[0] = strdup(a);
        v[1] = strdup(b);
        return v;
}

/* Every field of the table set, each to something no other field has. */
static void fill(LaunchSpec *s) {
        size_t n;
        const LaunchField *fs = launch_spec_fields(&n);
        for (size_t i = 0; i < n; i++) {
                const LaunchField *f = &fs[i];
                char v[128];
                snprintf(v, sizeof v, "/v/%s", f->key);
                switch (f->kind) {
                case LAUNCH_STR:
                case LAUNCH_STR_OPT:
                        *FIELD(s, f, char *) = strdup(v);
                        break;
                case LAUNCH_STRV:
                case LAUNCH_STRV_OPT:
                        *FIELD(s, f, char **) = strv2(v, "second");
                        break;
                case LAUNCH_BOOL:
                case LAUNCH_BOOL_OPT:
                        *FIELD(s, f, bool) = true;
                        break;
                case LAUNCH_U64:
                case LAUNCH_U64_OPT:
                        *FIELD(s, f, uint64_t) = 1000 + i;
                        break;
                }
        }
        s->runsc_network = RUNSC_NETWORK_SANDBOX;
        s->backend = BACKEND_GVISOR;
        s->volumes = calloc(2, sizeof(LaunchVolume));
        s->volumes[0] =
                (LaunchVolume){ .host = strdup("/h"), .container = strdup("/c"), .read_only = true, .relabel = 'z' };
        s->n_volumes = 1;
        s->ca_files = strv2("/ca/one", "/ca/two");
        s->ca_digest = strdup("ab12");
        assert_int_equal(launch_spec_fingerprint(s), 0);
}

static json_t *to_json(const LaunchSpec *s) {
        json_t *j = NULL;
        assert_int_equal(launch_spec_to_json(s, &j), 0);
        return j;
}

static void test_round_trip(void **state) {
        (void) state;
        LaunchSpec a = {}, b = {};
        fill(&a);
        json_t *ja = to_json(&a);
        assert_int_equal(launch_spec_from_json(ja, &b), 0);
        json_t *jb = to_json(&b);
        assert_true(json_equal(ja, jb));
        /* Field by field, not only as JSON. */
        size_t n;
        const LaunchField *fs = launch_spec_fields(&n);
        for (size_t i = 0; i < n; i++) {
                const LaunchField *f = &fs[i];
                switch (f->kind) {
                case LAUNCH_STR:
                case LAUNCH_STR_OPT:
                        assert_string_equal(*FIELD(&a, f, char *), *FIELD(&b, f, char *));
                        break;
                case LAUNCH_STRV:
                case LAUNCH_STRV_OPT:
                        assert_string_equal((*FIELD(&b, f, char **))[0], (*FIELD(&a, f, char **))[0]);
                        assert_string_equal((*FIELD(&b, f, char **))[1], "second");
                        assert_null((*FIELD(&b, f, char **))[2]);
                        break;
                case LAUNCH_BOOL:
                case LAUNCH_BOOL_OPT:
                        assert_true(*FIELD(&b, f, bool));
                        break;
                case LAUNCH_U64:
                case LAUNCH_U64_OPT:
                        assert_int_equal(*FIELD(&b, f, uint64_t), 1000 + i);
                        break;
                }
        }
        assert_int_equal(b.runsc_network, RUNSC_NETWORK_SANDBOX);
        assert_int_equal(b.backend, BACKEND_GVISOR);
        assert_int_equal(b.n_volumes, 1);
        assert_string_equal(b.volumes[0].host, "/h");
        assert_true(b.volumes[0].read_only);
        assert_int_equal(b.volumes[0].relabel, 'z');
        assert_string_equal(b.ca_files[1], "/ca/two");
        assert_string_equal(b.ca_digest, "ab12");
        assert_string_equal(b.fingerprint, a.fingerprint);
        /* The fingerprint is of the fields: the copy's is the same. */
        char fp[65];
        memcpy(fp, b.fingerprint, sizeof fp);
        assert_int_equal(launch_spec_fingerprint(&b), 0);
        assert_string_equal(b.fingerprint, fp);
        json_decref(ja);
        json_decref(jb);
        launch_spec_done(&a);
        launch_spec_done(&b);
}

static void test_keys(void **state) {
        (void) state;
        LaunchSpec a = {};
        fill(&a);
        json_t *j = to_json(&a);
        size_t n = sizeof(keys) / sizeof(keys[0]);
        assert_int_equal(json_object_size(j), n);
        for (size_t i = 0; i < n; i++)
                if (!json_object_get(j, keys[i]))
                        fail_msg("no key %s", keys[i]);
        json_decref(j);
        launch_spec_done(&a);
}

static void test_optional_ones(void **state) {
        (void) state;
        /* A native spec: no image, Podman or runsc; no CA files, no
         * escalation keys: read back as NULL, empty and 0. */
        LaunchSpec a = {}, b = {};
        fill(&a);
        a.backend = BACKEND_NATIVE;
        a.image = (free(a.image), NULL);
        a.podman = (free(a.podman), NULL);
        a.runsc = (free(a.runsc), NULL);
        json_t *j = to_json(&a);
        assert_true(json_is_null(json_object_get(j, "image")));
        json_object_del(j, "escalation_output_max");
        json_object_del(j, "check_server_name");
        json_object_del(j, "domains");
        json_object_del(j, "ca_files");
        json_object_del(j, "ca_digest");
        assert_int_equal(launch_spec_from_json(j, &b), 0);
        assert_null(b.image);
        assert_int_equal(b.escalation_output_max, 0);
        assert_false(b.check_server_name);
        assert_non_null(b.domains);
        assert_null(b.domains[0]);
        assert_null(b.ca_files);
        json_decref(j);
        launch_spec_done(&a);
        launch_spec_done(&b);
}

static void test_refused(void **state) {
        (void) state;
        size_t n;
        const LaunchField *fs = launch_spec_fields(&n);
        LaunchSpec a = {};
        fill(&a);
        json_t *j = to_json(&a);
        for (size_t i = 0; i < n; i++) {
                const LaunchField *f = &fs[i];
                LaunchSpec b = {};
                json_t *k = json_deep_copy(j);
                bool required = f->kind == LAUNCH_STR || f->kind == LAUNCH_STRV || f->kind == LAUNCH_BOOL ||
                                f->kind == LAUNCH_U64;
                /* Each required one left out. */
                json_object_del(k, f->key);
                if (required)
                        assert_int_equal(launch_spec_from_json(k, &b), -EBADMSG);
                /* Each one of the wrong type: a number where a string is,
                 * a string where a number or a truth value is. */
                json_object_set_new(k, f->key,
                                    f->kind == LAUNCH_U64 || f->kind == LAUNCH_U64_OPT || f->kind == LAUNCH_BOOL ||
                                                    f->kind == LAUNCH_BOOL_OPT
                                            ? json_string("x")
                                            : json_integer(7));
                assert_int_equal(launch_spec_from_json(k, &b), -EBADMSG);
                json_decref(k);
        }
        /* A CA digest without its files; a gVisor spec without an image. */
        json_t *k = json_deep_copy(j);
        json_object_del(k, "ca_files");
        LaunchSpec b = {};
        assert_int_equal(launch_spec_from_json(k, &b), -EBADMSG);
        json_decref(k);
        k = json_deep_copy(j);
        json_object_set_new(k, "image", json_null());
        assert_int_equal(launch_spec_from_json(k, &b), -EBADMSG);
        json_decref(k);
        json_decref(j);
        launch_spec_done(&a);
}

/* The form that travels and is kept: the JSON, a NUL, the policy after it
 * byte for byte (not in the JSON); read back whole; a policy that is not
 * what the JSON names (another length, another digest, a NUL in it, or one
 * in the JSON as well) refused; the JSON alone (a copy an older Lazaret
 * wrote, the policy in it) still read. */
static void test_serialized(void **state) {
        (void) state;
        LaunchSpec a = {}, b = {};
        fill(&a);
        free(a.netpolicy);
        a.netpolicy = strdup("lazaret.netpolicy.v1\nfamily ipv4 enabled default allow\nrule 10.0.0.0/8 deny\n");
        free(a.netpolicy_digest);
        a.netpolicy_digest = malloc(65);
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, a.netpolicy, strlen(a.netpolicy), a.netpolicy_digest);
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(launch_spec_serialize(&a, &buf, &len), 0);
        size_t jl = strlen(buf), pl = strlen(a.netpolicy);
        assert_int_equal(len, jl + 1 + pl);
        assert_memory_equal(buf + jl + 1, a.netpolicy, pl);
        json_t *j = json_loadb(buf, jl, 0, NULL);
        assert_non_null(j);
        assert_null(json_object_get(j, "netpolicy"));
        assert_int_equal(json_integer_value(json_object_get(j, "netpolicy_bytes")), (json_int_t) pl);
        json_decref(j);
        assert_int_equal(launch_spec_deserialize(buf, len, &b), 0);
        assert_string_equal(b.netpolicy, a.netpolicy);
        assert_string_equal(b.netpolicy_digest, a.netpolicy_digest);
        assert_string_equal(b.profile, a.profile);
        assert_string_equal(b.fingerprint, a.fingerprint);
        launch_spec_done(&b);

        /* Cut short, one byte more, a byte changed, a NUL inside. */
        b = (LaunchSpec){};
        assert_int_equal(launch_spec_deserialize(buf, len - 1, &b), -EBADMSG);
        char *more = malloc(len + 2);
        memcpy(more, buf, len);
        more[len] = '\n';
        assert_int_equal(launch_spec_deserialize(more, len + 1, &b), -EBADMSG);
        memcpy(more, buf, len);
        more[jl + 1 + 30] ^= 1;
        assert_int_equal(launch_spec_deserialize(more, len, &b), -EBADMSG);
        memcpy(more, buf, len);
        more[jl + 1 + 30] = '\0';
        assert_int_equal(launch_spec_deserialize(more, len, &b), -EBADMSG);
        free(more);

        /* The policy in the JSON as well as after it. */
        j = json_loadb(buf, jl, 0, NULL);
        json_object_set_new(j, "netpolicy", json_string(a.netpolicy));
        char *t = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        size_t tl = strlen(t);
        char *both = malloc(tl + 1 + pl);
        memcpy(both, t, tl + 1);
        memcpy(both + tl + 1, a.netpolicy, pl);
        assert_int_equal(launch_spec_deserialize(both, tl + 1 + pl, &b), -EBADMSG);
        free(both);
        free(t);

        /* The JSON alone, as an older Lazaret wrote it. */
        j = to_json(&a);
        t = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        assert_int_equal(launch_spec_deserialize(t, strlen(t), &b), 0);
        assert_string_equal(b.netpolicy, a.netpolicy);
        launch_spec_done(&b);
        free(t);
        free(buf);
        launch_spec_done(&a);
}

static void write_text(const char *path, const char *text, size_t len) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, len), (ssize_t) len);
        close(fd);
}

static size_t file_size(const char *path) {
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        return (size_t) st.st_size;
}

/* The record of the trees agents write (agent-trees.c): none before
 * anything is recorded; read from every Domain's launch-spec.json in the
 * data root (its workspace and read-write volumes, not its read-only ones)
 * while there is no record; the first record made from them with the new
 * trees, each once; nothing written when nothing is new; past its pruning
 * size, the trees that are gone dropped and those still there kept. */
static void test_agent_trees(void **state) {
        (void) state;
        char dir[] = "/tmp/test-agent-trees-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char root[256], path[512], file[512];
        snprintf(root, sizeof(root), "%s/data", dir);
        /* The person's record, in a directory made for it. */
        snprintf(file, sizeof(file), "%s/xdg/lazaret/%s", dir, AGENT_TREES_FILE);
        char **v = NULL;
        size_t n = 9;

        /* No data root, no record: nothing, and nothing made. */
        assert_int_equal(agent_trees_load(file, root, &v, &n), 0);
        assert_int_equal(n, 0);
        assert_null(v[0]);
        agent_trees_free(v);
        assert_int_equal(access(root, F_OK), -1);

        /* Two Domains' last specs, and one that does not read. */
        assert_int_equal(mkdir(root, 0700), 0);
        snprintf(path, sizeof(path), "%s/domains", root);
        assert_int_equal(mkdir(path, 0700), 0);
        static const char first[] = "{\"workspace\": \"/home/u/a\", \"volumes\": [{\"host\": \"/home/u/cache\", "
                                    "\"read_only\": false}, {\"host\": \"/home/u/ro\", \"read_only\": true}]}";
        /* The second as launch_spec_serialize writes it: the policy
         * after a NUL. */
        static const char second[] = "{\"workspace\": \"/home/u/b\", \"volumes\": []}\0lazaret.netpolicy.v1\n";
        const char *specs[] = { first, second, "{not json" };
        const size_t lens[] = { strlen(first), sizeof(second) - 1, strlen(specs[2]) };
        for (size_t i = 0; i < 3; i++) {
                snprintf(path, sizeof(path), "%s/domains/%zu", root, i);
                assert_int_equal(mkdir(path, 0700), 0);
                snprintf(path, sizeof(path), "%s/domains/%zu/launch-spec.json", root, i);
                write_text(path, specs[i], lens[i]);
        }
        assert_int_equal(agent_trees_load(file, root, &v, &n), 0);
        assert_int_equal(n, 3);
        assert_string_equal(v[0], "/home/u/a");
        assert_string_equal(v[1], "/home/u/cache");
        assert_string_equal(v[2], "/home/u/b");
        assert_null(v[3]);
        agent_trees_free(v);
        /* Loading writes nothing. */
        assert_int_equal(access(file, F_OK), -1);

        /* The first record: the specs' trees, then the new one, once. */
        char a[] = "/home/u/a", x[] = "/srv/x", c[] = "/home/u/cache";
        char *trees[] = { a, x, x, c };
        assert_int_equal(agent_trees_record(file, root, trees, 4), 0);
        size_t seeded = strlen("/home/u/a") + strlen("/home/u/cache") + strlen("/home/u/b") + 3;
        assert_int_equal(file_size(file), seeded + strlen("/srv/x") + 1);
        struct stat before, after;
        assert_int_equal(stat(file, &before), 0);
        /* Nothing new: not written again. */
        assert_int_equal(agent_trees_record(file, root, trees, 4), 0);
        assert_int_equal(stat(file, &after), 0);
        assert_int_equal(before.st_ino, after.st_ino);
        assert_int_equal(agent_trees_load(file, root, &v, &n), 0);
        assert_int_equal(n, 4);
        assert_string_equal(v[3], "/srv/x");
        agent_trees_free(v);

        /* The record wins over the specs once it exists. */
        snprintf(path, sizeof(path), "%s/domains/1/launch-spec.json", root);
        write_text(path, "{\"workspace\": \"/home/u/z\"}", strlen("{\"workspace\": \"/home/u/z\"}"));
        assert_int_equal(agent_trees_load(file, root, &v, &n), 0);
        assert_int_equal(n, 4);
        for (size_t i = 0; i < n; i++)
                assert_string_not_equal(v[i], "/home/u/z");
        agent_trees_free(v);

        /* Past 256 KiB the trees that are gone go, those still there stay:
         * 400 long names that do not exist, and this directory. */
        static char big[400][900];
        char *many[401];
        for (size_t i = 0; i < 400; i++) {
                snprintf(big[i], sizeof(big[i]), "/nonexistent-%zu/%0800zu", i, i);
                many[i] = big[i];
        }
        many[400] = dir;
        assert_int_equal(agent_trees_record(file, root, many, 401), 0);
        assert_true(file_size(file) > 256u << 10);
        char y[] = "/srv/y";
        char *more[] = { y };
        assert_int_equal(agent_trees_record(file, root, more, 1), 0);
        assert_int_equal(agent_trees_load(file, root, &v, &n), 0);
        bool kept_dir = false, kept_y = false;
        for (size_t i = 0; i < n; i++) {
                assert_null(strstr(v[i], "/nonexistent-"));
                kept_dir = kept_dir || strcmp(v[i], dir) == 0;
                kept_y = kept_y || strcmp(v[i], "/srv/y") == 0;
        }
        assert_true(kept_dir && kept_y);
        agent_trees_free(v);

        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_keys),
                cmocka_unit_test(test_optional_ones), cmocka_unit_test(test_refused),
                cmocka_unit_test(test_serialized),    cmocka_unit_test(test_agent_trees),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
