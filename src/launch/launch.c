/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-trees.h"
#include "ca-bundle.h"
#include "doctor.h"
#include "domain-root.h"
#include "exec-util.h"
#include "fd-util.h"
#include "image-build.h"
#include "launch.h"
#include "netpolicy-digest.h"
#include "path-pattern.h"
#include "path-util.h"
#include "runtime-dir.h"
#include "strbuf.h"
#include "string-util.h"

static void strv_free(char **v) {
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

/* The spec's fields, one row each (issue 43): its JSON key, its kind and
 * where it lives. The JSON form, the reading back and the freeing all
 * come from this table; the round trip is tested in test-launch-spec.c.
 * Kept out: runsc_network and backend (enums), volumes, ca_files with
 * ca_digest (present together or not at all), the fingerprint. */
#define F(key, kind)                                                                                                   \
        { #key, kind, offsetof(LaunchSpec, key) }
static const LaunchField fields[] = {
        F(domain_hash, LAUNCH_STR),
        F(profile, LAUNCH_STR),
        F(workspace, LAUNCH_STR),
        F(workspace_id, LAUNCH_STR_OPT),
        F(git_dir_id, LAUNCH_STR_OPT),
        F(domain_dir, LAUNCH_STR),
        F(agent_trees, LAUNCH_STR_OPT), /* none in a spec copy of an older Lazaret's */
        F(image, LAUNCH_STR_OPT), /* none: native (checked when read) */
        F(command, LAUNCH_STRV),
        F(env_names, LAUNCH_STRV),
        F(git_dir, LAUNCH_STR_OPT),
        F(runtime_dir, LAUNCH_STR),
        F(lock_path, LAUNCH_STR),
        F(socket_path, LAUNCH_STR),
        F(podman, LAUNCH_STR_OPT),
        F(runsc, LAUNCH_STR_OPT),
        F(init, LAUNCH_STR),
        F(rootless, LAUNCH_BOOL),
        F(branch, LAUNCH_BOOL),
        F(nofile, LAUNCH_U64),
        F(nproc, LAUNCH_U64),
        F(memory_limit_mib, LAUNCH_U64),
        F(cpu_limit, LAUNCH_U64),
        F(disk_limit_mib, LAUNCH_U64),
        F(netpolicy, LAUNCH_STR),
        F(netpolicy_digest, LAUNCH_STR),
        F(own_address_rules, LAUNCH_BOOL_OPT),
        F(probe_targets, LAUNCH_STRV),
        F(probe_dns_name, LAUNCH_STR),
        F(netd, LAUNCH_STR_OPT),
        F(slirp4netns, LAUNCH_STR_OPT),
        F(sidecar_image, LAUNCH_STR_OPT),
        F(domains, LAUNCH_STRV_OPT),
        F(probe_domains, LAUNCH_STRV_OPT),
        F(broker_resolvers, LAUNCH_STRV_OPT),
        F(check_server_name, LAUNCH_BOOL_OPT),
        F(broker_connections, LAUNCH_U64_OPT),
        F(broker, LAUNCH_STR_OPT),
        F(relay, LAUNCH_STR_OPT),
        F(persistent_dirs, LAUNCH_STRV),
        F(fuse2fs, LAUNCH_STR_OPT),
        F(e2fsck, LAUNCH_STR_OPT),
        F(catalog_dir, LAUNCH_STR_OPT),
        F(escalation_enabled, LAUNCH_BOOL_OPT),
        F(escalation_socket_dir, LAUNCH_STR_OPT),
        F(auto_approve, LAUNCH_STRV),
        F(escalation_output_max, LAUNCH_U64_OPT),
        F(escalation_time_limit, LAUNCH_U64_OPT),
        F(escalate, LAUNCH_STR_OPT),
        F(protect, LAUNCH_STRV),
        F(mask, LAUNCH_STRV),
        F(native, LAUNCH_STR_OPT),
        F(memory_cgroup, LAUNCH_STR_OPT),
        F(native_fs_only, LAUNCH_BOOL_OPT),
        F(agent, LAUNCH_STR_OPT),
};
#undef F

const LaunchField *launch_spec_fields(size_t *ret_n) {
        *ret_n = ELEMENTSOF(fields);
        return fields;
}

#define FIELD(s, f, type) ((type *) (void *) ((char *) (s) + (f)->offset))

void launch_spec_done(LaunchSpec *s) {
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                const LaunchField *f = &fields[i];
                if (f->kind == LAUNCH_STR || f->kind == LAUNCH_STR_OPT)
                        free(*FIELD(s, f, char *));
                else if (f->kind == LAUNCH_STRV || f->kind == LAUNCH_STRV_OPT)
                        strv_free(*FIELD(s, f, char **));
        }
        for (size_t i = 0; i < s->n_volumes; i++) {
                free(s->volumes[i].host);
                free(s->volumes[i].container);
                free(s->volumes[i].id);
        }
        free(s->volumes);
        strv_free(s->ca_files);
        free(s->ca_digest);
        *s = (LaunchSpec){};
}

/* A NULL-terminated copy of the list a followed by the n entries of b. */
static char **strv_concat(const char *const *a, char *const *b, size_t n) {
        size_t na = 0;
        while (a[na])
                na++;
        char **v = calloc(na + n + 1, sizeof(char *));
        if (!v)
                return NULL;
        for (size_t i = 0; i < na + n; i++)
                if (!(v[i] = strdup(i < na ? a[i] : b[i - na]))) {
                        strv_free(v);
                        return NULL;
                }
        return v;
}

static json_t *strv_json(char **v) {
        json_t *a = json_array();
        for (char **p = v; a && p && *p; p++)
                if (json_array_append_new(a, json_string(*p)) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static json_t *field_json(const LaunchSpec *s, const LaunchField *f) {
        switch (f->kind) {
        case LAUNCH_STR:
                return *FIELD(s, f, char *) ? json_string(*FIELD(s, f, char *)) : NULL;
        case LAUNCH_STR_OPT:
                return *FIELD(s, f, char *) ? json_string(*FIELD(s, f, char *)) : json_null();
        case LAUNCH_STRV:
        case LAUNCH_STRV_OPT:
                return strv_json(*FIELD(s, f, char **));
        case LAUNCH_BOOL:
        case LAUNCH_BOOL_OPT:
                return json_boolean(*FIELD(s, f, bool));
        case LAUNCH_U64:
        case LAUNCH_U64_OPT:
                return json_integer((json_int_t) *FIELD(s, f, uint64_t));
        }
        return NULL;
}

/* with_fingerprint: the spec's own form (the fingerprint in it); without:
 * the input of the fingerprint. tail_policy: the policy left out of the
 * JSON (launch_spec_serialize puts it after it). */
static json_t *spec_json(const LaunchSpec *s, bool with_fingerprint, bool tail_policy) {
        json_t *j = json_object(), *vols = json_array();
        for (size_t i = 0; j && vols && i < s->n_volumes; i++) {
                char relabel[2] = { s->volumes[i].relabel, 0 };
                if (json_array_append_new(vols, json_pack("{s:s, s:s, s:b, s:s, s:s*}", "host", s->volumes[i].host,
                                                          "container", s->volumes[i].container, "read_only",
                                                          s->volumes[i].read_only, "relabel", relabel, "id",
                                                          s->volumes[i].id)) < 0) {
                        json_decref(vols);
                        vols = NULL;
                }
        }
        bool ok = j && vols && json_object_set_new(j, "volumes", vols) == 0;
        if (!ok && !j)
                json_decref(vols);
        for (size_t i = 0; ok && i < ELEMENTSOF(fields); i++) {
                json_t *v;
                const char *key = fields[i].key;
                if (tail_policy && streq(key, "netpolicy")) {
                        key = "netpolicy_bytes";
                        v = s->netpolicy ? json_integer((json_int_t) strlen(s->netpolicy)) : NULL;
                } else if (!with_fingerprint && s->netpolicy && s->netpolicy_digest && streq(key, "netpolicy")) {
                        /* The fingerprint binds the policy by its digest,
                         * netpolicy_digest, already in it (a policy of
                         * 10,000 prefixes would cost milliseconds of JSON
                         * and hashing). */
                        continue;
                } else
                        v = field_json(s, &fields[i]);
                ok = v && json_object_set_new(j, key, v) == 0;
        }
        ok = ok &&
             json_object_set_new(j, "runsc_network", json_string(runsc_network_to_string(s->runsc_network))) == 0 &&
             json_object_set_new(j, "backend", json_string(backend_to_string(s->backend))) == 0;
        /* ca_certificates: both, or neither key. */
        if (ok && s->ca_files)
                ok = json_object_set_new(j, "ca_files", strv_json(s->ca_files)) == 0 &&
                     json_object_set_new(j, "ca_digest", s->ca_digest ? json_string(s->ca_digest) : json_null()) == 0;
        if (ok && with_fingerprint)
                ok = json_object_set_new(j, "fingerprint", json_string(s->fingerprint)) == 0;
        if (!ok) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int launch_spec_fingerprint(LaunchSpec *s) {
        json_t *j = spec_json(s, false, false);
        if (!j)
                return -ENOMEM;
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        if (!text)
                return -ENOMEM;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        /* Domain separation: a spec digest can never equal another digest of
         * the same bytes used for something else. */
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "lazaret.launch-spec.v1\n%s", text);
        free(text);
        _cleanup_free_ char *input = strbuf_steal(&b);
        if (!input)
                return -ENOMEM;
        if (EVP_Digest(input, strlen(input), md, &n, EVP_sha256(), NULL) != 1 || n != 32)
                return -EIO;
        for (unsigned i = 0; i < 32; i++)
                snprintf(s->fingerprint + 2 * i, 3, "%02x", md[i]);
        return 0;
}

int launch_spec_to_json(const LaunchSpec *s, json_t **ret) {
        json_t *j = spec_json(s, true, false);
        if (!j)
                return -ENOMEM;
        *ret = j;
        return 0;
}

static int get_str(json_t *j, const char *key, char **ret) {
        json_t *v = json_object_get(j, key);
        if (!json_is_string(v))
                return -EBADMSG;
        char *s = strdup(json_string_value(v));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* The same for a key that may be absent or null (*ret stays NULL). */
static int get_opt_str(json_t *j, const char *key, char **ret) {
        json_t *v = json_object_get(j, key);
        return !v || json_is_null(v) ? 0 : get_str(j, key, ret);
}

static int get_strv(json_t *j, const char *key, char ***ret) {
        json_t *a = json_object_get(j, key);
        if (!json_is_array(a))
                return -EBADMSG;
        char **v = calloc(json_array_size(a) + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < json_array_size(a); i++) {
                json_t *e = json_array_get(a, i);
                if (!json_is_string(e) || !(v[i] = strdup(json_string_value(e)))) {
                        strv_free(v);
                        return json_is_string(e) ? -ENOMEM : -EBADMSG;
                }
        }
        *ret = v;
        return 0;
}

/* A list that older specs (and specs without it) leave out: empty. */
static int get_opt_strv(json_t *j, const char *key, char ***ret) {
        if (!json_object_get(j, key)) {
                *ret = calloc(1, sizeof(char *));
                return *ret ? 0 : -ENOMEM;
        }
        return get_strv(j, key, ret);
}

/* One field of j into s: -EBADMSG when a field that must be there is
 * not, or has the wrong type. */
static int field_from_json(json_t *j, const LaunchField *f, LaunchSpec *s) {
        json_t *v = json_object_get(j, f->key);
        bool absent = !v || json_is_null(v);
        switch (f->kind) {
        case LAUNCH_STR:
                return get_str(j, f->key, FIELD(s, f, char *));
        case LAUNCH_STR_OPT:
                return get_opt_str(j, f->key, FIELD(s, f, char *));
        case LAUNCH_STRV:
                return get_strv(j, f->key, FIELD(s, f, char **));
        case LAUNCH_STRV_OPT:
                return get_opt_strv(j, f->key, FIELD(s, f, char **));
        case LAUNCH_BOOL:
        case LAUNCH_BOOL_OPT:
                if (absent ? f->kind == LAUNCH_BOOL : !json_is_boolean(v))
                        return -EBADMSG;
                *FIELD(s, f, bool) = json_is_true(v);
                return 0;
        case LAUNCH_U64:
        case LAUNCH_U64_OPT:
                if (absent ? f->kind == LAUNCH_U64 : !json_is_integer(v) || json_integer_value(v) < 0)
                        return -EBADMSG;
                *FIELD(s, f, uint64_t) = absent ? 0 : (uint64_t) json_integer_value(v);
                return 0;
        }
        return -EBADMSG;
}

/* policy: the policy that followed the JSON (launch_spec_deserialize),
 * or NULL: the JSON has it. */
static int spec_from_json(json_t *j, const char *policy, size_t policy_len, LaunchSpec *ret) {
        LaunchSpec s = {};
        int r = 0;
        const char *net = json_string_value(json_object_get(j, "runsc_network"));
        Backend backend = backend_from_string(json_string_value(json_object_get(j, "backend")));
        const char *fp = json_string_value(json_object_get(j, "fingerprint"));
        json_t *vols = json_object_get(j, "volumes");

        if (!json_is_object(j) || !net || backend < 0 || !fp || strlen(fp) != 64 || !json_is_array(vols))
                return -EBADMSG;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fields); i++)
                if (!policy || !streq(fields[i].key, "netpolicy"))
                        r = field_from_json(j, &fields[i], &s);
        if (r >= 0 && policy) {
                /* Its length as the JSON says, no NUL in it, and the
                 * digest the JSON names: what the leader wrote, whole. */
                json_t *n = json_object_get(j, "netpolicy_bytes");
                char d[65];
                if (json_object_get(j, "netpolicy") || !json_is_integer(n) ||
                    json_integer_value(n) != (json_int_t) policy_len || memchr(policy, '\0', policy_len))
                        r = -EBADMSG;
                else {
                        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, policy, policy_len, d);
                        r = streq(d, s.netpolicy_digest) ? 0 : -EBADMSG;
                }
                if (r >= 0 && !(s.netpolicy = strndup(policy, policy_len)))
                        r = -ENOMEM;
        }
        if (r >= 0 && json_object_get(j, "ca_files"))
                r = get_strv(j, "ca_files", &s.ca_files);
        if (r >= 0)
                r = get_opt_str(j, "ca_digest", &s.ca_digest);
        if (r >= 0 && !s.ca_files != !s.ca_digest)
                r = -EBADMSG;
        if (r < 0) {
                launch_spec_done(&s);
                return r;
        }
        s.runsc_network = streq(net, "host") ? RUNSC_NETWORK_HOST : RUNSC_NETWORK_SANDBOX;
        s.backend = backend;
        /* Each backend's own programs. */
        if (backend == BACKEND_NATIVE ? !s.native : !s.podman || !s.runsc || !s.image) {
                launch_spec_done(&s);
                return -EBADMSG;
        }
        memcpy(s.fingerprint, fp, 65);
        s.volumes = calloc(json_array_size(vols) + 1, sizeof(LaunchVolume));
        if (!s.volumes) {
                launch_spec_done(&s);
                return -ENOMEM;
        }
        for (size_t i = 0; i < json_array_size(vols); i++) {
                json_t *v = json_array_get(vols, i);
                LaunchVolume *lv = &s.volumes[i];
                const char *rl = json_string_value(json_object_get(v, "relabel"));
                if (!rl || get_str(v, "host", &lv->host) < 0 || get_str(v, "container", &lv->container) < 0) {
                        s.n_volumes = i + 1;
                        launch_spec_done(&s);
                        return -EBADMSG;
                }
                lv->read_only = json_boolean_value(json_object_get(v, "read_only"));
                lv->relabel = rl[0];
                if (get_opt_str(v, "id", &lv->id) < 0) {
                        s.n_volumes = i + 1;
                        launch_spec_done(&s);
                        return -EBADMSG;
                }
                s.n_volumes = i + 1;
        }
        if (!s.command[0]) {
                launch_spec_done(&s);
                return -EBADMSG;
        }
        *ret = s;
        return 0;
}

int launch_spec_from_json(json_t *j, LaunchSpec *ret) {
        return spec_from_json(j, NULL, 0, ret);
}

int launch_spec_serialize(const LaunchSpec *s, char **ret, size_t *ret_len) {
        json_t *j = spec_json(s, true, true);
        if (!j)
                return -ENOMEM;
        char *text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!text)
                return -ENOMEM;
        size_t jl = strlen(text), pl = s->netpolicy ? strlen(s->netpolicy) : 0;
        char *buf = realloc(text, jl + 1 + pl + 1);
        if (!buf) {
                free(text);
                return -ENOMEM;
        }
        if (s->netpolicy)
                memcpy(buf + jl + 1, s->netpolicy, pl);
        buf[jl + 1 + pl] = '\0';
        *ret = buf;
        *ret_len = s->netpolicy ? jl + 1 + pl : jl; /* without a policy: the JSON alone */
        return 0;
}

int launch_spec_deserialize(const char *buf, size_t len, LaunchSpec *ret) {
        const char *nul = memchr(buf, '\0', len);
        size_t jl = nul ? (size_t) (nul - buf) : len;
        json_error_t e;
        json_t *j = json_loadb(buf, jl, JSON_REJECT_DUPLICATES, &e);
        if (!j)
                return -EBADMSG;
        /* No NUL: the JSON alone (no policy, or a copy of an older
         * Lazaret's, with the policy in it). */
        int r = spec_from_json(j, nul ? nul + 1 : NULL, nul ? len - jl - 1 : 0, ret);
        json_decref(j);
        return r;
}

/* The agent's name: --agent's, or the profile's. */
static const char *agent_name(const LaunchSpec *s) {
        return s->agent ? s->agent : s->profile;
}

char *launch_agent_branch(const LaunchSpec *s) {
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "lazaret/agent-%s", agent_name(s));
        return strbuf_steal(&b);
}

char *launch_agent_worktree(const LaunchSpec *s) {
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "%s/agent-%s", s->domain_dir, agent_name(s));
        return strbuf_steal(&b);
}

char *launch_ca_bundle_path(const LaunchSpec *s) {
        return s->ca_files && s->domain_dir ? path_join(s->domain_dir, "ca-certificates.crt") : NULL;
}

int launch_ca_bundle(char *const *files, char **ret, size_t *ret_len, char ret_digest[65], char **ret_error) {
        StrBuf b = STRBUF_INIT;
        int r = ca_bundle_build(files, &b, ret_error);
        if (r < 0) {
                strbuf_done(&b);
                return r;
        }
        size_t len = b.len;
        char *text = strbuf_steal(&b);
        if (!text)
                return -ENOMEM;
        unsigned char md[32];
        unsigned mdlen = 0;
        if (EVP_Digest(text, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
                free(text);
                return -ENOMEM;
        }
        for (size_t i = 0; i < 32; i++)
                snprintf(ret_digest + 2 * i, 3, "%02x", md[i]);
        *ret = text;
        *ret_len = len;
        return 0;
}

bool launch_spec_env_allowed(const LaunchSpec *s, const char *assignment) {
        size_t n = strcspn(assignment, "=");
        for (char **p = s->env_names; p && *p; p++)
                if (strlen(*p) == n && strncmp(*p, assignment, n) == 0)
                        return true;
        return false;
}

static char **strv_copy(char *const *v, size_t n) {
        char **c = calloc(n + 1, sizeof(char *));
        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(c[i] = strdup(v[i]))) {
                        strv_free(c);
                        return NULL;
                }
        return c;
}

/* The directory holding our own executable: lazaret-init sits beside it. */
static int self_dir(char **ret) {
        char buf[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        char *slash = strrchr(buf, '/');
        if (!slash)
                return -EINVAL;
        *slash = '\0';
        char *d = strdup(buf[0] ? buf : "/");
        if (!d)
                return -ENOMEM;
        *ret = d;
        return 0;
}

static int fail(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int fail(char **ret_error, const char *fmt, ...) {
        StrBuf b = STRBUF_INIT;
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(&b, fmt, ap);
        va_end(ap);
        *ret_error = strbuf_steal(&b);
        return *ret_error ? -ENOENT : -ENOMEM;
}

/* "contains" when a holds b, "lies inside" when b holds a (or they are the
 * same), else NULL. Both canonical. */
static const char *reach(const char *a, const char *b) {
        if (path_under(a, b))
                return "lies inside";
        if (path_under(b, a))
                return "contains";
        return NULL;
}

/* Nothing the sandbox mounts may reach the runtime directory (every
 * Domain's control socket and lock), socket_dir (escalation sockets) or the
 * data root (every Domain's store, layers and worktrees), read-only or not,
 * in either direction (issue 14): a process in the sandbox that reaches a
 * control socket could speak to a coordinator. Only the profile's own
 * directory in the data root ({profile_dir}) may hold volumes. The check
 * runs on canonical paths; LAZARET_TEST_ALLOW_UNSAFE_MOUNTS=1 skips it for
 * the tests of what stands behind it. */
static int check_mount_reach(const Config *cfg, const ConfigProfile *p, const LaunchSpec *s, char **ret_error) {
        if (streq_ptr(getenv("LAZARET_TEST_ALLOW_UNSAFE_MOUNTS"), "1"))
                return 0;
        _cleanup_free_ char *rt = NULL;
        if (path_canonicalize(s->runtime_dir, &rt) < 0 && !(rt = strdup(s->runtime_dir)))
                return -ENOMEM;
        const struct {
                const char *path, *what;
        } zones[] = {
                { rt, "the runtime directory (every sandbox's control socket)" },
                { cfg->socket_dir, "socket_dir (the escalation sockets)" },
                { cfg->data_root, "the data root (every sandbox's store and worktrees)" },
        };
        for (size_t z = 0; z < ELEMENTSOF(zones); z++) {
                if (!zones[z].path)
                        continue;
                const char *how = reach(s->workspace, zones[z].path);
                if (how)
                        return fail(ret_error,
                                    "the workspace %s %s %s %s, which the sandbox must not reach; run lazaret in "
                                    "another directory, or move %s",
                                    s->workspace, how, zones[z].what, zones[z].path,
                                    z == 0   ? "XDG_RUNTIME_DIR"
                                    : z == 1 ? "socket_dir"
                                             : "data_root");
                for (size_t i = 0; i < s->n_volumes; i++) {
                        const LaunchVolume *v = &s->volumes[i];
                        how = reach(v->host, zones[z].path);
                        /* {profile_dir}: this profile's own part of the
                         * data root. */
                        if (how && z == 2 && p->profile_dir && path_under(v->host, p->profile_dir))
                                continue;
                        if (how)
                                return fail(ret_error,
                                            "volume %s: host path %s %s %s %s, which the sandbox must not reach, "
                                            "read-only or not; choose another path (in the data root, only "
                                            "{profile_dir} may be a volume)",
                                            v->container, v->host, how, zones[z].what, zones[z].path);
                }
        }
        return 0;
}

/* path canonical where it exists (as written otherwise); with dir, its
 * directory. */
static char *canonical_or_as_is(const char *path, bool dir) {
        _cleanup_free_ char *d = strdup(path);
        if (!d)
                return NULL;
        char *slash = dir ? strrchr(d, '/') : NULL;
        if (slash && slash != d)
                *slash = '\0';
        char *c = NULL;
        if (path_canonicalize(d, &c) < 0)
                return TAKE_PTR(d);
        return c;
}

/* A read-write volume may hold none of Lazaret's own configuration: the
 * person's files and their directories (a file replaced by rename is a
 * new name), the trust records and theirs. Through one the agent would
 * choose its next sandbox (auto_approve, volumes, network), which the next
 * start reads from what it wrote (a trusted workspace file too: a change
 * voids its trust, but a --config file may lie there as well, and they
 * are not told apart here). Read-only volumes may hold any of them. */
static int check_volumes_own_config(const Config *cfg, const LaunchSpec *s, char **ret_error) {
        if (streq_ptr(getenv("LAZARET_TEST_ALLOW_UNSAFE_MOUNTS"), "1"))
                return 0;
        _cleanup_free_ char *user = NULL, *ws = NULL, *wm = NULL;
        int r;
        if ((r = config_user_path(&user)) < 0 || (r = wstrust_store_path(cfg->home, &ws)) < 0 ||
            (r = wstrust_manifest_store_path(cfg->home, &wm)) < 0)
                return r;
        /* Each file, then its directory. */
        typedef struct {
                const char *path, *what;
        } OwnFile;
        OwnFile own[16];
        size_t n = 0;
        for (size_t i = 0; i < cfg->n_sources && n < ELEMENTSOF(own) - 3; i++) {
                const char *f = cfg->sources[i].path;
                if (cfg->sources[i].trusted && f)
                        own[n++] = (OwnFile){ f, "your configuration file" };
        }
        own[n++] = (OwnFile){ user, "your configuration file" };
        own[n++] = (OwnFile){ ws, "the record of the workspaces you trusted" };
        own[n++] = (OwnFile){ wm, "the record of the manifests you trusted" };
        for (size_t k = 0; k < 2 * n && r >= 0; k++) {
                _cleanup_free_ char *c = canonical_or_as_is(own[k / 2].path, k % 2);
                if (!c)
                        return -ENOMEM;
                for (size_t i = 0; i < s->n_volumes && r >= 0; i++) {
                        const LaunchVolume *v = &s->volumes[i];
                        if (v->read_only || !path_under(c, v->host))
                                continue;
                        r = fail(ret_error,
                                 "volume %s: host path %s holds %s%s %s: read-write, the agent could rewrite "
                                 "what configures its next sandbox; make the volume read-only (mode = \"ro\") or "
                                 "choose a directory that does not hold it",
                                 v->container, v->host, k % 2 ? "the directory of " : "", own[k / 2].what, c);
                }
        }
        return r;
}

/* Append to *list the anchored pattern of path when it lies inside the
 * workspace (not the workspace itself). */
static int protect_if_inside(const char *workspace, const char *path, char ***list) {
        if (!path || !path_under(path, workspace) || streq(path, workspace))
                return 0;
        size_t n = 0;
        while ((*list)[n])
                n++;
        char **v = realloc(*list, (n + 2) * sizeof(char *));
        if (!v)
                return -ENOMEM;
        *list = v;
        /* "/REL": anchored at the workspace's root. */
        if (asprintf(&v[n], "%s", path + strlen(workspace)) < 0) {
                v[n] = NULL;
                return -ENOMEM;
        }
        v[n + 1] = NULL;
        return 0;
}

/* Lazaret's own files must never be the agent's to change, even when the
 * workspace holds them (a direct workspace above the data root): the person's
 * configuration files and the trusted workspace files are protected, and
 * the data root (every Domain's store, layers, worktrees and the router's
 * own mount point) is masked. */
static int protect_own_paths(const Config *cfg, char ***list, char ***mask) {
        int r;
        for (size_t i = 0; i < cfg->n_sources; i++)
                if (cfg->sources[i].trusted && (r = protect_if_inside(cfg->workspace, cfg->sources[i].path, list)) < 0)
                        return r;
        _cleanup_free_ char *user = NULL, *store = NULL;
        if ((r = config_user_path(&user)) < 0 || (r = wstrust_store_path(cfg->home, &store)) < 0)
                return r;
        /* Their directories: a file replaced by rename is a new name. */
        char *slash = strrchr(user, '/');
        if (slash && slash != user)
                *slash = '\0';
        slash = strrchr(store, '/');
        if (slash && slash != store)
                *slash = '\0';
        if ((r = protect_if_inside(cfg->workspace, user, list)) < 0 ||
            (r = protect_if_inside(cfg->workspace, store, list)) < 0 ||
            (r = protect_if_inside(cfg->workspace, cfg->data_root, mask)) < 0)
                return r;
        return 0;
}

/* The workspace and its .git as checked here, by identity: the
 * coordinator and the routers open them by name again, and a process that
 * may rename entries of a parent directory (another agent's sandbox whose
 * workspace holds this one) could have put a symbolic link there by then
 * (to ~/.ssh, or another repository). Each of them refuses what is not
 * this directory. lazaret up says what it checked (trusted) in
 * LAZARET_WORKSPACE_ID, and the agent's workspace must still be that. */
static int pin_workspace(const Config *cfg, LaunchSpec *s, char **ret_error) {
        char id[FD_IDENTITY_MAX];
        const char *want = getenv(WORKSPACE_ID_ENV);
        if (want && *want) {
                int r = open_pinned_dir(cfg->workspace, want, NULL, NULL);
                if (r < 0)
                        return fail(ret_error,
                                    "the workspace %s is not the directory lazaret up checked (%s): it was replaced "
                                    "or moved while lazaret started; nothing was started, run it again",
                                    cfg->workspace, r == -ESTALE ? "another directory is there now" : strerror(-r));
        }
        int r = open_pinned_dir(s->workspace, NULL, NULL, id);
        if (r < 0)
                return fail(ret_error,
                            "the workspace %s changed while lazaret started (%s): a symbolic link or nothing is where "
                            "it was; nothing was started, run it again",
                            s->workspace, strerror(-r));
        if (!(s->workspace_id = strdup(id)))
                return -ENOMEM;
        if (s->git_dir) {
                r = open_pinned_dir(s->git_dir, NULL, NULL, id);
                if (r < 0)
                        return fail(ret_error,
                                    "the repository's %s changed while lazaret started (%s): a symbolic link or "
                                    "nothing is where it was; nothing was started, run it again",
                                    s->git_dir, strerror(-r));
                if (!(s->git_dir_id = strdup(id)))
                        return -ENOMEM;
        }
        return 0;
}

/* A workspace the sandbox writes itself (direct mode, or a workspace that
 * is no git repository) must not be the person's home directory or hold it
 * ("/", "/home"): the agent would write the login files, ~/.gitconfig
 * (whose core.fsmonitor runs on the next git status anywhere), ~/.config
 * (autostart entries, systemd user units, every tool's settings) and
 * ~/.local, all run on the host (issue 40). Both $HOME and the passwd
 * entry's home count. */
static int refuse_home_workspace(const Config *cfg, char **ret_error) {
        const struct passwd *pw = getpwuid(getuid());
        const char *homes[] = { cfg->home, pw ? pw->pw_dir : NULL };
        for (size_t i = 0; i < ELEMENTSOF(homes); i++) {
                _cleanup_free_ char *h = NULL;
                if (!path_is_absolute(homes[i]) || path_canonicalize(homes[i], &h) < 0)
                        continue; /* no such directory: nothing of it to reach */
                if (!path_under(h, cfg->workspace))
                        continue;
                bool is = streq(h, cfg->workspace);
                return fail(ret_error,
                            "the workspace %s %s your home directory%s%s: the agent could write your login files, "
                            "~/.gitconfig, ~/.config and ~/.local, which run on the host. Run lazaret in a project "
                            "directory below it (in a git repository, workspace_mode = \"branch\", the default, "
                            "gives the agent its own worktree)",
                            cfg->workspace, is ? "is" : "holds", is ? "" : " ", is ? "" : h);
        }
        return 0;
}

int launch_spec_build(const Config *cfg, const ConfigProfile *p, Backend backend, LaunchPreflight preflight,
                      LaunchSpec *ret, char **ret_error) {
        _cleanup_(launch_spec_done) LaunchSpec s = {};
        const char *search = getenv("PATH");
        const char *why = NULL;
        int r;

        if (!search || !*search)
                search = DEFAULT_SEARCH_PATH;
        s.backend = backend >= 0 ? backend : p->backend;
        bool native = s.backend == BACKEND_NATIVE;
        /* Only a profile that says backend = "native", or one loaded for a
         * launch with --backend native, may name no image (config
         * validation); gVisor asked for by the flag runs one. */
        if (!native && !p->image)
                return fail(ret_error,
                            "--backend gvisor runs an image, and profile '%s' names none (it says backend = "
                            "\"native\"): add image = \"localhost/lazaret/debian:bookworm\" to [profiles.%s] "
                            "(lazaret image build debian makes it), or run it without --backend gvisor",
                            p->name, p->name);

        /* The native backend needs neither (status and stop still use
         * Podman for what an earlier gVisor generation left, when it is
         * there). */
        r = exec_find_program(search, "podman", &s.podman);
        if (r == -ENOENT && native)
                r = 0;
        else if (r == -ENOENT)
                return fail(ret_error,
                            "podman is not installed or not in PATH; install it: sudo apt-get install podman");
        if (r < 0)
                return r;
        /* [runtime] runsc, else the first on PATH (setup puts a current
         * one in /usr/local/bin, ahead of Debian's). */
        if (cfg->runsc) {
                s.runsc = strdup(cfg->runsc);
                r = s.runsc ? 0 : -ENOMEM;
        } else
                r = exec_find_program(search, "runsc", &s.runsc);
        if (r == -ENOENT && native)
                r = 0;
        else if (r == -ENOENT)
                return fail(ret_error,
                            "runsc (gVisor) is not installed or not in PATH; install it: sudo apt-get install "
                            "runsc");
        if (r < 0)
                return r;

        /* Decision 6: never fall back silently. When gVisor's own network
         * stack cannot work here, say why and how to choose. */
        if (!native && p->runsc_network == RUNSC_NETWORK_SANDBOX) {
                static const char *const only[] = { "runsc", "runsc-network", NULL };
                DoctorOptions o = { .only = only, .runsc = cfg->runsc };
                _cleanup_(doctor_report_freep) DoctorReport *rep = NULL;
                r = doctor_run(&o, &rep);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < rep->n_results; i++)
                        if (rep->results[i].status != DOCTOR_OK)
                                return fail(ret_error,
                                            "profile '%s' uses runsc_network = \"sandbox\", which cannot work on this "
                                            "host: %s. Fix: set runsc_network = \"host\" in [profiles.%s], or put a "
                                            "runsc of release-20240807 or newer first on PATH ('make deps' in "
                                            "Lazaret's source builds one)",
                                            p->name, rep->results[i].detail, p->name);
        }

        _cleanup_free_ char *dir = NULL;
        r = self_dir(&dir);
        if (r < 0)
                return r;
        s.init = path_join(dir, "lazaret-init");
        if (!s.init)
                return -ENOMEM;
        if (access(s.init, X_OK) < 0)
                return fail(ret_error, "%s is missing: lazaret-init must be installed next to lazaret", s.init);

        RuntimePaths rp = {};
        _cleanup_free_ char *rwhy = NULL;
        r = runtime_paths(p->domain_hash, &rp, &rwhy);
        if (r == -EPERM)
                return fail(ret_error, "%s", rwhy);
        if (r < 0)
                return r;
        s.runtime_dir = rp.dir;
        s.lock_path = rp.lock;
        s.socket_path = rp.socket;

        s.domain_hash = strdup(p->domain_hash);
        s.profile = strdup(p->name);
        if (cfg->agent && !(s.agent = strdup(cfg->agent)))
                return -ENOMEM;
        s.domain_dir = strdup(p->domain_dir);
        /* The native backend runs no image (the host's /usr and the rest
         * of its system directories, read-only): a preset's is left out,
         * so nothing looks it up or shows it. */
        s.image = p->image && !native ? strdup(p->image) : NULL;
        s.command = strv_copy(p->command, p->n_command);
        s.env_names = calloc(p->n_env + 1, sizeof(char *));
        if (!s.domain_hash || !s.profile || !s.domain_dir || (p->image && !native && !s.image) || !s.command ||
            !s.env_names)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_env; i++)
                if (!(s.env_names[i] = strdup(p->env[i].name)))
                        return -ENOMEM;
        s.runsc_network = p->runsc_network;
        s.rootless = geteuid() != 0;

        /* The workspace's own repository is served through the git router
         * (both modes); a workspace that is no git repository at all is
         * mounted as it is. Branch mode works from the repository's root
         * (config found it: the Domain is the root's) and needs its own .git
         * directory; direct mode mounts the workspace alone, with .git only
         * when the workspace is the root. Never a silent switch to direct. */
        {
                _cleanup_free_ char *top = NULL;
                bool is_dir = false;
                r = path_find_git_top(cfg->workspace, &top, &is_dir);
                if (r < 0)
                        return fail(ret_error, "cannot look for the git repository holding %s: %s", cfg->workspace,
                                    strerror(-r));
                const char *sub = r > 0 ? path_under(cfg->workspace, top) : NULL;
                /* Git's own directory, mounted read-write, would hand the
                 * sandbox hooks and config the host's git runs. */
                if (sub && (streq(sub, ".git") || startswith(sub, ".git/")))
                        return fail(ret_error,
                                    "the workspace %s is inside the git directory %s/.git, which the sandbox must not "
                                    "get: run lazaret in the working tree %s",
                                    cfg->workspace, top, top);
                if (r > 0 && !is_dir && p->workspace_branch)
                        return fail(ret_error,
                                    "%s/.git is not a directory (the workspace is in a linked worktree or a "
                                    "submodule): workspace_mode = \"branch\" needs the repository's own .git; open its "
                                    "main working tree, or set workspace_mode = \"direct\" in [profiles.%s]",
                                    streq(top, "/") ? "" : top, p->name);
                bool same = r > 0 ? p->repo_root && streq(p->repo_root, top) &&
                                            streq_ptr(p->workspace_subdir, *sub ? sub : NULL)
                                  : !p->repo_root;
                if (p->workspace_branch && !same)
                        return fail(ret_error,
                                    "the git repository holding %s changed while lazaret started; run it "
                                    "again",
                                    cfg->workspace);
                if (p->workspace_branch && p->repo_root) {
                        s.workspace = strdup(p->repo_root);
                        s.git_dir = path_join(p->repo_root, ".git");
                        s.branch = true;
                        if (!s.workspace || !s.git_dir)
                                return -ENOMEM;
                } else {
                        s.workspace = strdup(cfg->workspace);
                        if (!s.workspace)
                                return -ENOMEM;
                        if (r > 0 && is_dir && !*sub && !(s.git_dir = path_join(top, ".git")))
                                return -ENOMEM;
                        /* Direct, whether asked for or a workspace that is
                         * no repository. */
                        r = refuse_home_workspace(cfg, ret_error);
                        if (r < 0)
                                return r;
                }
        }

        r = pin_workspace(cfg, &s, ret_error);
        if (r < 0)
                return r;

        s.volumes = calloc(p->n_volumes + 1, sizeof(LaunchVolume));
        if (!s.volumes)
                return -ENOMEM;
        /* What agents write: this sandbox's workspace and read-write
         * volumes, the data root (their layers and worktrees), and every
         * tree an agent of this data root was given before. A symbolic link
         * on a volume's path inside one of them may be an agent's own (a
         * volume made a link to the user's ~/.ssh between two runs, by this
         * Domain's agent or another's), so none is followed there. */
        _cleanup_(agent_trees_freep) char **others = NULL;
        size_t n_others = 0;
        r = agent_trees_path(cfg->home, &s.agent_trees);
        if (r < 0)
                return r;
        r = agent_trees_load(s.agent_trees, cfg->data_root, &others, &n_others);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(ret_error, "cannot read %s, the record of the trees agents write: %s; fix its permissions",
                            s.agent_trees, strerror(-r));
        _cleanup_free_ char **writable = calloc(p->n_volumes + 3 + n_others, sizeof(char *));
        if (!writable)
                return -ENOMEM;
        size_t n_writable = 0;
        writable[n_writable++] = s.workspace;
        for (size_t i = 0; i < p->n_volumes; i++)
                if (!p->volumes[i].read_only)
                        writable[n_writable++] = p->volumes[i].host;
        size_t own = n_writable;
        writable[n_writable++] = cfg->data_root;
        for (size_t i = 0; i < n_others; i++)
                writable[n_writable++] = others[i];
        for (size_t i = 0; i < p->n_volumes; i++) {
                const ConfigVolume *v = &p->volumes[i];
                struct stat st;
                if (stat(v->host, &st) < 0) {
                        /* Lazaret's own storage is ours to create; anything
                         * else must exist already. */
                        if (errno == ENOENT && path_under(v->host, cfg->data_root)) {
                                r = private_dir(v->host, &why);
                                if (r == -EPERM)
                                        return fail(ret_error, "volume %s: %s %s", v->container, v->host, why);
                                if (r < 0)
                                        return fail(ret_error, "volume %s: cannot create %s: %s", v->container, v->host,
                                                    strerror(-r));
                        } else
                                return fail(ret_error,
                                            "volume %s: host path %s does not exist (%s:%u:%u); create it or fix the "
                                            "volume",
                                            v->container, v->host, v->where.file, v->where.pos.line, v->where.pos.col);
                }
                /* The path as written, again, now: links followed but
                 * for the sandbox's; what it leads to is bound, pinned. */
                _cleanup_free_ char *canon = NULL, *link = NULL;
                size_t root = 0;
                r = path_resolve_no_links_in(v->host_given ?: v->host, writable, n_writable, &canon, &link, &root);
                if (r == 1)
                        return fail(ret_error,
                                    "volume %s: %s is a symbolic link inside %s %s, which %s: lazaret binds no link an "
                                    "agent could have made; make it a directory again, or name what it points to as "
                                    "the volume's host path (%s:%u:%u)",
                                    v->container, link,
                                    root == 0     ? "the workspace"
                                    : root < own  ? "the read-write volume"
                                    : root == own ? "the data root"
                                                  : "a tree an agent was given",
                                    writable[root],
                                    root < own    ? "the sandbox can write"
                                    : root == own ? "every sandbox's layers and worktrees are in"
                                                  : "a sandbox wrote (its workspace or a read-write volume)",
                                    v->where.file, v->where.pos.line, v->where.pos.col);
                if (r < 0)
                        return fail(ret_error, "volume %s: cannot resolve host path %s: %s (%s:%u:%u)", v->container,
                                    v->host_given ?: v->host, strerror(-r), v->where.file, v->where.pos.line,
                                    v->where.pos.col);
                char id[FD_IDENTITY_MAX];
                r = open_pinned(canon, NULL, NULL, id);
                if (r < 0)
                        return fail(ret_error, "volume %s: %s changed while lazaret checked it (%s); try again",
                                    v->container, canon, strerror(-r));
                s.volumes[i] = (LaunchVolume){
                        .host = TAKE_PTR(canon),
                        .container = strdup(v->container),
                        .read_only = v->read_only,
                        .relabel = v->relabel_private  ? 'Z'
                                   : v->relabel_shared ? 'z'
                                                       : 0,
                        .id = strdup(id),
                };
                s.n_volumes = i + 1;
                if (!s.volumes[i].host || !s.volumes[i].container || !s.volumes[i].id)
                        return -ENOMEM;
        }

        r = check_mount_reach(cfg, p, &s, ret_error);
        if (r >= 0)
                r = check_volumes_own_config(cfg, &s, ret_error);
        if (r < 0)
                return r;

        /* The network: the policy travels in canonical form; a sidecar only
         * when it permits something. */
        r = config_profile_netpolicy_canonical(p, &s.netpolicy, NULL);
        if (r < 0)
                return r;
        s.netpolicy_digest = strdup(p->net_digest);
        s.probe_dns_name = strdup(cfg->probe_dns_name);
        s.probe_targets = calloc(cfg->n_probe_targets + 1, sizeof(char *));
        if (!s.netpolicy_digest || !s.probe_dns_name || !s.probe_targets)
                return -ENOMEM;
        for (size_t i = 0; i < cfg->n_probe_targets; i++) {
                char a[64];
                const ConfigProbe *pt = &cfg->probe_targets[i];
                netaddr_format(&pt->addr, a, sizeof(a));
                if (asprintf(&s.probe_targets[i], pt->addr.family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
                             (unsigned) pt->port) < 0) {
                        s.probe_targets[i] = NULL;
                        return -ENOMEM;
                }
        }
        if (!netpolicy_permits_nothing(&p->net)) {
                s.netd = path_join(dir, "lazaret-netd");
                if (!s.netd)
                        return -ENOMEM;
                if (access(s.netd, X_OK) < 0)
                        return fail(ret_error, "%s is missing: lazaret-netd must be installed next to lazaret", s.netd);
                /* The native backend's sidecar is no container: no image
                 * (naming one hashes netd, a millisecond of each start). */
                if (!(s.backend == BACKEND_NATIVE && s.rootless)) {
                        r = image_sidecar_ref(&s.sidecar_image);
                        if (r < 0)
                                return fail(ret_error, "cannot read %s: %s", s.netd, strerror(-r));
                }
        }

        /* Egress by name: the broker and the relay only with rules. */
        s.domains = calloc(p->n_domains + 1, sizeof(char *));
        s.probe_domains = calloc(cfg->n_probe_domains + 1, sizeof(char *));
        s.broker_resolvers = calloc(cfg->n_resolvers + 1, sizeof(char *));
        if (!s.domains || !s.probe_domains || !s.broker_resolvers)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_domains; i++) {
                char b[DOMAIN_NAME_MAX + 16];
                domain_rule_format(&p->domains[i], b, sizeof(b));
                if (!(s.domains[i] = strdup(b)))
                        return -ENOMEM;
        }
        for (size_t i = 0; p->n_domains > 0 && i < cfg->n_probe_domains; i++) {
                char b[DOMAIN_NAME_MAX + 16];
                domain_rule_format(&cfg->probe_domains[i], b, sizeof(b));
                if (!(s.probe_domains[i] = strdup(b)))
                        return -ENOMEM;
        }
        for (size_t i = 0; i < cfg->n_resolvers; i++) {
                char a[64];
                netaddr_format(&cfg->resolvers[i], a, sizeof(a));
                if (!(s.broker_resolvers[i] = strdup(a)))
                        return -ENOMEM;
        }
        s.check_server_name = p->check_server_name;
        s.own_address_rules = p->own_address_rules;
        s.broker_connections = cfg->broker_connections;
        if (p->n_domains > 0) {
                s.broker = path_join(dir, "lazaret-broker");
                s.relay = path_join(dir, "lazaret-relay");
                if (!s.broker || !s.relay)
                        return -ENOMEM;
                if (access(s.broker, X_OK) < 0)
                        return fail(ret_error, "%s is missing: lazaret-broker must be installed next to lazaret",
                                    s.broker);
                if (access(s.relay, X_OK) < 0)
                        return fail(ret_error, "%s is missing: lazaret-relay must be installed next to lazaret",
                                    s.relay);
        }

        /* ca_certificates: the bundle is made here once, so that a file
         * that is not a certificate file stops the launch before anything
         * starts; the coordinator makes it again for the sandbox. */
        if (p->ca_files && p->n_ca_files > 0) {
                s.ca_files = calloc(p->n_ca_files + 1, sizeof(char *));
                if (!s.ca_files)
                        return -ENOMEM;
                for (size_t i = 0; i < p->n_ca_files; i++) {
                        const char *f = p->ca_files[i];
                        if (streq(f, "host") && !(f = ca_host_store())) {
                                StrBuf b = STRBUF_INIT;
                                for (size_t k = 0; ca_host_store_paths[k]; k++)
                                        strbuf_printf(&b, "%s%s", k ? ", " : "", ca_host_store_paths[k]);
                                _cleanup_free_ char *list = strbuf_steal(&b);
                                return fail(ret_error,
                                            "profiles.%s.ca_certificates: \"host\" names the host's trust store, and "
                                            "this host has none (%s); install it (sudo apt-get install "
                                            "ca-certificates) or name the certificate files",
                                            p->name, list ?: "?");
                        }
                        if (!(s.ca_files[i] = strdup(f)))
                                return -ENOMEM;
                }
                _cleanup_free_ char *bundle = NULL, *bad = NULL;
                size_t len = 0;
                char digest[65];
                r = launch_ca_bundle(s.ca_files, &bundle, &len, digest, &bad);
                if (r == -EINVAL)
                        return fail(ret_error, "profiles.%s.ca_certificates: %s", p->name, bad ?: "?");
                if (r < 0)
                        return r;
                if (!(s.ca_digest = strdup(digest)))
                        return -ENOMEM;
        }

        /* The State Anchor: canonical entries (config validated them). The
         * Storage Catalog's place is known even without them, for a
         * recovery of a generation that had some. */
        s.catalog_dir = path_join(cfg->data_root, "catalog");
        if (!s.catalog_dir)
                return -ENOMEM;
        s.persistent_dirs = calloc(p->n_persistent_dirs + 1, sizeof(char *));
        if (!s.persistent_dirs)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_persistent_dirs; i++)
                if (!(s.persistent_dirs[i] = strdup(p->persistent_dirs[i])))
                        return -ENOMEM;
        /* The native backend keeps them with the kernel's overlayfs in
         * the sandbox's own namespace (lazaret-native --persist): none of
         * this. */
        if (p->n_persistent_dirs > 0 && !native) {
                /* The layers are the kernel's overlayfs (issue 44). fuse2fs
                 * and e2fsck only move the changes an older Lazaret kept in
                 * an ext4 image out of it, once (the coordinator names them
                 * when such an image is there and they are not). e2fsprogs'
                 * tools live in sbin, which a user's PATH may lack. */
                _cleanup_free_ char *sbin = NULL;
                if (asprintf(&sbin, "%s:/usr/sbin:/sbin", search) < 0)
                        return -ENOMEM;
                if ((r = exec_find_program(sbin, "fuse2fs", &s.fuse2fs)) < 0 && r != -ENOENT)
                        return r;
                if ((r = exec_find_program(sbin, "e2fsck", &s.e2fsck)) < 0 && r != -ENOENT)
                        return r;
                _cleanup_free_ char *bad = NULL;
                r = domain_root_check(s.domain_dir, &bad);
                if (r < 0)
                        return bad ? fail(ret_error, "%s", bad)
                                   : fail(ret_error, "cannot check the Domain Root %s: %s", s.domain_dir, strerror(-r));
        }

        /* What the native backend cannot provide is refused before
         * anything is made for it (the escalation socket's directory). */
        if (preflight) {
                r = preflight(cfg, p, backend != _BACKEND_INVALID && p->backend != backend, &s, dir, ret_error);
                if (r < 0)
                        return r;
        }
        if (native) {
                if (cfg->memory_cgroup && !(s.memory_cgroup = strdup(cfg->memory_cgroup)))
                        return -ENOMEM;
        }

        /* Host escalation. */
        s.escalation_enabled = cfg->escalation_enabled;
        s.escalation_output_max = cfg->escalation_output_max;
        s.escalation_time_limit = cfg->escalation_time_limit;
        s.auto_approve = calloc(cfg->n_auto_approve + 1, sizeof(char *));
        if (!s.auto_approve)
                return -ENOMEM;
        for (size_t i = 0; i < cfg->n_auto_approve; i++)
                if (!(s.auto_approve[i] = strdup(cfg->auto_approve[i])))
                        return -ENOMEM;
        if (s.escalation_enabled) {
                s.escalation_socket_dir = strdup(cfg->socket_dir);
                s.escalate = path_join(dir, "lazaret-escalate");
                if (!s.escalation_socket_dir || !s.escalate)
                        return -ENOMEM;
                if (access(s.escalate, X_OK) < 0)
                        return fail(ret_error, "%s is missing: lazaret-escalate must be installed next to lazaret",
                                    s.escalate);
                /* Before anything starts: another user's socket_dir (or one
                 * below a directory they can change) is never used. */
                _cleanup_free_ char *swhy = NULL;
                r = safe_private_dir(s.escalation_socket_dir, "escalation.socket_dir",
                                     "choose another socket_dir in [escalation]", &swhy, NULL);
                if (r == -EPERM)
                        return fail(ret_error, "%s", swhy);
                if (r < 0)
                        return fail(ret_error, "cannot make escalation.socket_dir %s: %s", s.escalation_socket_dir,
                                    strerror(-r));
        }

        /* Protected host-run files and masked secrets: the built-in lists
         * and [workspace]'s. */
        s.protect = strv_concat((const char *const *) path_pattern_protect_default, cfg->protect, cfg->n_protect);
        s.mask = strv_concat((const char *const *) path_pattern_mask_default, cfg->mask, cfg->n_mask);
        if (!s.protect || !s.mask)
                return -ENOMEM;
        r = protect_own_paths(cfg, &s.protect, &s.mask);
        if (r < 0)
                return r;

        struct rlimit rl;
        s.nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY ? rl.rlim_max : 1048576;
        /* gVisor counts RLIMIT_NPROC per uid for every task it runs (and
         * the agent has neither CAP_SYS_ADMIN nor CAP_SYS_RESOURCE to pass
         * it): the profile's pids_limit, within the user's own. */
        s.nproc = p->pids_limit;
        if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < s.nproc)
                s.nproc = rl.rlim_max;
        s.memory_limit_mib = p->memory_limit_mib;
        s.cpu_limit = p->cpu_limit;
        s.disk_limit_mib = p->disk_limit_mib;

        r = launch_spec_fingerprint(&s);
        if (r < 0)
                return r;
        *ret = s;
        s = (LaunchSpec){};
        return 0;
}
