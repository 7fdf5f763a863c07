/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <yaml.h>

#include "broker-proto.h"
#include "domain-rule.h"
#include "fd-util.h"
#include "kube.h"
#include "macro.h"
#include "netpolicy.h"
#include "string-util.h"

#define KUBE_WORKSPACE "/workspace"
#define KUBE_SEED      "/lazaret-seed"

bool kube_image_pinned(const char *image) {
        const char *at = strstr(image, "@sha256:");
        if (!at || at == image)
                return false;
        const char *hex = at + strlen("@sha256:");
        size_t n = strspn(hex, "0123456789abcdef");
        return n == 64 && hex[n] == '\0';
}

int kube_name(const ConfigProfile *p, char **ret) {
        char *n = NULL;
        if (asprintf(&n, "lazaret-%s-%s", p->name, p->domain_hash) < 0)
                return -ENOMEM;
        for (char *c = n; *c; c++)
                if (*c == '_')
                        *c = '-';
        *ret = n;
        return 0;
}

void kube_docs_done(KubeDocs *d) {
        for (size_t i = 0; i < d->n; i++) {
                free(d->v[i].file);
                free(d->v[i].comment);
                json_decref(d->v[i].obj);
        }
        free(d->v);
        for (size_t i = 0; i < d->n_warnings; i++)
                free(d->warnings[i]);
        free(d->warnings);
        *d = (KubeDocs){};
}

typedef struct Build {
        const Config *c;
        const ConfigProfile *p;
        const KubeOptions *o;
        char *name;
        KubeDocs docs;
        json_t *claim_templates; /* agent-sandbox: the claims, for the controller to make */
        StrBuf claim_notes; /* agent-sandbox: what their documents would have said */
        bool oom;
} Build;

_printf_(2, 3) static void warn(Build *b, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *w = NULL;
        if (vasprintf(&w, fmt, ap) < 0)
                w = NULL;
        va_end(ap);
        char **v = w ? realloc(b->docs.warnings, (b->docs.n_warnings + 1) * sizeof(char *)) : NULL;
        if (!v) {
                free(w);
                b->oom = true;
                return;
        }
        b->docs.warnings = v;
        v[b->docs.n_warnings++] = w;
}

/* Takes obj and comment. */
static void add_doc(Build *b, const char *kind, const char *name, json_t *obj, char *comment) {
        KubeDoc *v = obj ? realloc(b->docs.v, (b->docs.n + 1) * sizeof(KubeDoc)) : NULL;
        char *file = NULL;
        if (v) {
                b->docs.v = v;
                if (asprintf(&file, "%s-%s.yaml", kind, name) < 0)
                        file = NULL;
        }
        if (!v || !file) {
                json_decref(obj);
                free(comment);
                b->oom = true;
                return;
        }
        for (char *c = file; *c; c++)
                if (*c >= 'A' && *c <= 'Z')
                        *c = (char) (*c - 'A' + 'a');
        v[b->docs.n++] = (KubeDoc){ .file = file, .comment = comment, .obj = obj };
}

static json_t *labels(const Build *b) {
        return json_pack("{s:s, s:s, s:s, s:s}", "app.kubernetes.io/name", "lazaret", "app.kubernetes.io/managed-by",
                         "lazaret", "lazaret.dev/profile", b->p->name, "lazaret.dev/domain", b->p->domain_hash);
}

/* The agent's pod's labels: the NetworkPolicies select it by its role. */
static json_t *agent_labels(const Build *b) {
        json_t *l = labels(b);
        if (l)
                json_object_set_new(l, "lazaret.dev/role", json_string("agent"));
        return l;
}

static json_t *metadata(const Build *b, const char *name) {
        json_t *m = json_pack("{s:s}", "name", name);
        if (m && b->o->ns)
                json_object_set_new(m, "namespace", json_string(b->o->ns));
        if (m)
                json_object_set_new(m, "labels", labels(b));
        return m;
}

static json_t *quantity_mib(uint64_t mib) {
        char q[32];
        snprintf(q, sizeof(q), "%" PRIu64 "Mi", mib);
        return json_string(q);
}

static json_t *claim_spec(uint64_t mib) {
        return json_pack("{s:[s], s:{s:{s:o}}}", "accessModes", "ReadWriteOnce", "resources", "requests", "storage",
                         quantity_mib(mib));
}

static json_t *claim(Build *b, const char *name, uint64_t mib) {
        return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "PersistentVolumeClaim", "metadata",
                         metadata(b, name), "spec", claim_spec(mib));
}

/* The image's user as Kubernetes can check it: a numeric uid other than
 * 0 runs as non-root; root, a name or no knowledge of it are said. */
static void user_context(Build *b, json_t *sc) {
        const char *u = b->o->image_user;
        if (!u) {
                warn(b, "the image's user is not known here (the image is not in Podman's store): the agent runs as "
                        "the image says, possibly as root (in gVisor's sandbox, every capability dropped)");
                return;
        }
        char *end = NULL;
        errno = 0;
        unsigned long uid = strtoul(u, &end, 10);
        bool numeric = *u >= '0' && *u <= '9' && errno == 0 && (*end == '\0' || *end == ':');
        if (numeric && uid != 0 && uid <= INT32_MAX) {
                json_object_set_new(sc, "runAsNonRoot", json_true());
                json_object_set_new(sc, "runAsUser", json_integer((json_int_t) uid));
                if (*end == ':') {
                        char *gend = NULL;
                        unsigned long gid = strtoul(end + 1, &gend, 10);
                        if (gend != end + 1 && *gend == '\0' && gid <= INT32_MAX)
                                json_object_set_new(sc, "runAsGroup", json_integer((json_int_t) gid));
                }
                return;
        }
        if (!*u || (numeric && uid == 0) || streq(u, "root") || startswith(u, "root:") || startswith(u, "0:"))
                warn(b, "the image runs as root (in gVisor's sandbox, every capability dropped); give the image a "
                        "numeric USER to run as non-root");
        else {
                /* The user is the image's text: quoted, so it cannot write to the terminal. */
                _cleanup_free_ char *q = config_quoted(u, strlen(u));
                warn(b,
                     "the image's user %s is a name, which Kubernetes cannot check is not root: give the "
                     "image a numeric USER to have runAsNonRoot",
                     q ? q : "?");
        }
}

static json_t *container_security(Build *b) {
        json_t *sc = json_pack("{s:b, s:b, s:{s:[s]}, s:{s:s}}", "allowPrivilegeEscalation", 0, "privileged", 0,
                               "capabilities", "drop", "ALL", "seccompProfile", "type", "RuntimeDefault");
        if (sc)
                user_context(b, sc);
        return sc;
}

static json_t *argv_json(char *const *argv) {
        json_t *a = json_array();
        for (size_t i = 0; a && argv && argv[i]; i++)
                json_array_append_new(a, json_string(argv[i]));
        return a;
}

static json_t *role_selector(const Build *b, const char *role);

/* The NetworkPolicy: egress only to what the Derived Network Policy
 * permits, as its own prefixes (netpolicy_blocks(): each allowing rule
 * less the denying rules directly beneath it), no ingress. */
static int network_policy(Build *b) {
        const NetPolicy *np = &b->p->net;
        json_t *to = json_array();
        size_t n_prefixes = 0;
        for (NetFamily f = 0; to && f < _NET_FAMILY_MAX; f++) {
                NetBlock *blocks = NULL;
                size_t n = 0;
                int r = netpolicy_blocks(np, f, &blocks, &n);
                if (r < 0) {
                        json_decref(to);
                        return r;
                }
                for (size_t i = 0; i < n; i++) {
                        char buf[64];
                        cidr_format(&blocks[i].cidr, buf, sizeof(buf));
                        json_t *block = json_pack("{s:s}", "cidr", buf);
                        json_t *except = json_array();
                        for (size_t k = 0; except && k < blocks[i].n_except; k++) {
                                cidr_format(&blocks[i].except[k], buf, sizeof(buf));
                                json_array_append_new(except, json_string(buf));
                        }
                        n_prefixes += 1 + blocks[i].n_except;
                        if (block && json_array_size(except) > 0)
                                json_object_set(block, "except", except);
                        json_decref(except);
                        json_array_append_new(to, json_pack("{s:o}", "ipBlock", block));
                }
                netpolicy_blocks_free(blocks, n);
        }
        if (!to)
                return -ENOMEM;
        size_t n_to = json_array_size(to);
        json_t *egress = json_array();
        if (egress && n_to > 0)
                json_array_append_new(egress, json_pack("{s:o}", "to", to));
        else
                json_decref(to);
        /* allow_domains: the egress pod's relay, by the pod's labels. */
        if (egress && b->p->n_domains > 0)
                json_array_append_new(egress, json_pack("{s:[{s:o}], s:[{s:s, s:i}, {s:s, s:i}]}", "to", "podSelector",
                                                        role_selector(b, "egress"), "ports", "protocol", "TCP", "port",
                                                        (int) RELAY_HTTP_PORT, "protocol", "TCP", "port",
                                                        (int) RELAY_SOCKS_PORT));
        json_t *spec = egress ? json_pack("{s:o, s:[s, s], s:[], s:o}", "podSelector", role_selector(b, "agent"),
                                          "policyTypes", "Ingress", "Egress", "ingress", "egress", egress)
                              : NULL;
        json_t *obj = spec ? json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "networking.k8s.io/v1", "kind",
                                       "NetworkPolicy", "metadata", metadata(b, b->name), "spec", spec)
                           : NULL;
        char *comment = NULL;
        char what[224];
        if (n_prefixes > 0)
                snprintf(what, sizeof(what),
                         "egress only to what it permits (%zu of its prefixes, each allowing one less\n"
                         "the denying ones beneath it)%s",
                         n_prefixes, b->p->n_domains > 0 ? " and to the egress pod's relay" : "");
        else
                snprintf(what, sizeof(what), "%s (it permits no address)",
                         b->p->n_domains > 0 ? "no egress but to the egress pod's relay" : "no egress at all");
        if (asprintf(&comment,
                     "The Derived Network Policy sha256:%s\n"
                     "compiled: %s, no ingress at all. It holds only where the cluster's\n"
                     "network plugin enforces NetworkPolicy (docs/kubernetes.md).",
                     b->p->net_digest, what) < 0)
                comment = NULL;
        if (!obj || !comment) {
                json_decref(obj);
                free(comment);
                return -ENOMEM;
        }
        add_doc(b, "NetworkPolicy", b->name, obj, comment);
        return 0;
}

static char *join_warnings(const Build *b, const char *head) {
        StrBuf s = STRBUF_INIT;
        strbuf_puts(&s, head);
        for (size_t i = 0; i < b->docs.n_warnings; i++)
                strbuf_printf(&s, "\nwarning: %s", b->docs.warnings[i]);
        return strbuf_steal(&s);
}

static int fail(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return -EINVAL;
}

/* What cannot carry over at all: refused before anything is built. */
int kube_refusal(const ConfigProfile *p, char **ret_error) {
        if (p->runsc_network == RUNSC_NETWORK_HOST)
                return fail(ret_error,
                            "profile %s: runsc_network = \"host\" (%s:%u:%u) cannot carry over: on a cluster it is the "
                            "node's network (hostNetwork), which no NetworkPolicy holds; use \"sandbox\"",
                            p->name, p->runsc_network_where.file ? p->runsc_network_where.file : "",
                            p->runsc_network_where.pos.line, p->runsc_network_where.pos.col);
        return 0;
}

/* A claim NAME-VOL mounted at path (read-only when ro), note at the head
 * of its document (taken). For agent-sandbox, a volume claim template VOL
 * instead, which the controller makes as VOL-NAME and adds to the pod as
 * the volume VOL. Returns the claim's name, or NULL (b->oom). */
static char *claim_volume(Build *b, json_t *mounts, json_t *volumes, const char *vol, const char *path, bool ro,
                          char *note) {
        bool sandbox = b->o->format == KUBE_FORMAT_AGENT_SANDBOX;
        char *cn = NULL;
        if (!note || (sandbox ? asprintf(&cn, "%s-%s", vol, b->name) : asprintf(&cn, "%s-%s", b->name, vol)) < 0) {
                free(note);
                b->oom = true;
                return NULL;
        }
        json_t *m = json_pack("{s:s, s:s}", "name", vol, "mountPath", path);
        if (m && ro)
                json_object_set_new(m, "readOnly", json_true());
        json_array_append_new(mounts, m);
        if (sandbox) {
                json_array_append_new(b->claim_templates,
                                      json_pack("{s:{s:s, s:o}, s:o}", "metadata", "name", vol, "labels", labels(b),
                                                "spec", claim_spec(b->p->disk_limit_mib)));
                strbuf_printf(&b->claim_notes, "\n%s", note);
                free(note);
                return cn;
        }
        json_array_append_new(volumes,
                              json_pack("{s:s, s:{s:s}}", "name", vol, "persistentVolumeClaim", "claimName", cn));
        add_doc(b, "PersistentVolumeClaim", cn, claim(b, cn, b->p->disk_limit_mib), note);
        return cn;
}

/* agent-sandbox (kubernetes-sigs/agent-sandbox): the pod as a Sandbox, and
 * as a SandboxTemplate for claims and warm pools, its managed NetworkPolicy
 * off (policies add up: the controller's beside ours would reopen egress),
 * claims unable to add environment variables or volumes. */
static json_t *agent_sandbox(Build *b, json_t *pod, json_t **ret_template) {
        json_t *blueprint =
                json_pack("{s:{s:{s:o}, s:O}, s:O, s:b}", "podTemplate", "metadata", "labels", agent_labels(b), "spec",
                          pod, "volumeClaimTemplates", b->claim_templates, "service", 0);
        json_t *tspec = blueprint ? json_deep_copy(blueprint) : NULL;
        if (tspec) {
                json_object_set_new(tspec, "networkPolicyManagement", json_string("Unmanaged"));
                json_object_set_new(tspec, "envVarsInjectionPolicy", json_string("Disallowed"));
                json_object_set_new(tspec, "volumeClaimTemplatesPolicy", json_string("Disallowed"));
        }
        *ret_template = tspec ? json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", KUBE_AGENT_SANDBOX_EXT_API, "kind",
                                          "SandboxTemplate", "metadata", metadata(b, b->name), "spec", tspec)
                              : NULL;
        return blueprint ? json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", KUBE_AGENT_SANDBOX_API, "kind", "Sandbox",
                                     "metadata", metadata(b, b->name), "spec", blueprint)
                         : NULL;
}

/* ---- allow_domains: the egress pod ---------------------------------------
 *
 * The broker cannot share the agent's pod: a NetworkPolicy holds for a
 * whole pod (and under gVisor its containers share one network stack), so
 * whatever the broker may reach the agent could reach directly. The broker
 * and the relay run in a pod of their own (NAME-egress): the relay listens
 * on the pod's address for the agent's pod alone and hands each request to
 * the broker over a socket in an emptyDir; the broker checks the name and
 * port, resolves it through the profile's resolvers and connects. The
 * agent reaches that pod's Service and, by address, only what its own
 * policy permits; its proxy variables name the Service's address as the
 * kubelet gives it (service links: $(NAME_EGRESS_SERVICE_HOST)). */

#define KUBE_ROLE_LABEL "lazaret.dev/role"

static char *egress_name(const Build *b) {
        char *n = NULL;
        return asprintf(&n, "%s-egress", b->name) < 0 ? NULL : n;
}

/* The Service's address as an environment variable of the agent's
 * container: the Service's name in upper case, '-' as '_'. */
static char *egress_host_var(const Build *b) {
        char *n = NULL;
        if (asprintf(&n, "%s-egress_SERVICE_HOST", b->name) < 0)
                return NULL;
        for (char *c = n; *c; c++)
                *c = *c == '-' ? '_' : (*c >= 'a' && *c <= 'z') ? (char) (*c - 'a' + 'A') : *c;
        return n;
}

static json_t *role_selector(const Build *b, const char *role) {
        return json_pack("{s:{s:s, s:s}}", "matchLabels", "lazaret.dev/domain", b->p->domain_hash, KUBE_ROLE_LABEL,
                         role);
}

/* The broker's configuration, as the coordinator gives it on the host. */
static char *broker_config_text(const Build *b) {
        const ConfigProfile *p = b->p;
        json_t *rules = json_array(), *res = json_array();
        for (size_t i = 0; rules && i < p->n_domains; i++) {
                char buf[DOMAIN_NAME_MAX + 16];
                domain_rule_format(&p->domains[i], buf, sizeof(buf));
                json_array_append_new(rules, json_string(buf));
        }
        for (size_t i = 0; res && i < b->c->n_resolvers; i++) {
                char buf[64];
                netaddr_format(&b->c->resolvers[i], buf, sizeof(buf));
                json_array_append_new(res, json_string(buf));
        }
        _cleanup_free_ char *canon = NULL;
        if (netpolicy_format(&p->net, &canon, NULL) < 0) {
                json_decref(rules);
                json_decref(res);
                return NULL;
        }
        json_t *j = json_pack("{s:i, s:o*, s:b, s:I, s:i, s:i, s:s, s:o*}", "version", 1, "rules", rules,
                              "check_server_name", p->check_server_name, "max_connections",
                              (json_int_t) b->c->broker_connections, "idle_timeout", 600, "connect_timeout", 10,
                              "netpolicy", canon, "resolvers", res);
        char *text = j ? json_dumps(j, JSON_SORT_KEYS | JSON_INDENT(1)) : NULL;
        json_decref(j);
        return text;
}

static json_t *egress_security(void) {
        return json_pack("{s:b, s:b, s:b, s:{s:[s]}}", "allowPrivilegeEscalation", 0, "privileged", 0,
                         "readOnlyRootFilesystem", 1, "capabilities", "drop", "ALL");
}

/* The ports the rules name, each once, as NetworkPolicy ports. */
static json_t *rule_ports(const ConfigProfile *p) {
        json_t *ports = json_array();
        for (size_t i = 0; ports && i < p->n_domains; i++) {
                bool seen = false;
                for (size_t k = 0; k < i && !seen; k++)
                        seen = p->domains[k].port == p->domains[i].port;
                if (!seen)
                        json_array_append_new(
                                ports, json_pack("{s:s, s:i}", "protocol", "TCP", "port", (int) p->domains[i].port));
        }
        return ports;
}

static void egress(Build *b) {
        const ConfigProfile *p = b->p;
        _cleanup_free_ char *name = egress_name(b), *config = broker_config_text(b);
        if (!name || !config) {
                b->oom = true;
                return;
        }
        /* The broker's configuration. */
        json_t *cm = json_pack("{s:s, s:s, s:o, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap", "metadata",
                               metadata(b, name), "data", "broker.json", config);
        add_doc(b, "ConfigMap", name, cm,
                strdup("allow_domains: the broker's rules, the Derived Network Policy it checks every\n"
                       "address against (private, loopback, link-local, metadata) and the resolvers."));

        /* The pod: the broker and the relay, the socket between them. */
        json_t *meta = metadata(b, name);
        if (meta)
                json_object_set_new(json_object_get(meta, "labels"), KUBE_ROLE_LABEL, json_string("egress"));
        json_t *resources = json_pack("{s:{s:s}, s:{s:s}}", "requests", "memory", "64Mi", "limits", "memory", "256Mi");
        json_t *broker =
                json_pack("{s:s, s:s, s:[s, s, s, s, s], s:o, s:O, s:[{s:s, s:s, s:b}, {s:s, s:s}]}", "name", "broker",
                          "image", b->o->broker_image, "command", "/lazaret-broker", "--serve", BROKER_SOCKET_PATH,
                          "--config", "/etc/lazaret/broker.json", "securityContext", egress_security(), "resources",
                          resources, "volumeMounts", "name", "config", "mountPath", "/etc/lazaret", "readOnly", 1,
                          "name", "broker-socket", "mountPath", BROKER_SOCKET_DIR);
        json_t *relay = json_pack("{s:s, s:s, s:[s, s, s, s, s], s:[{s:s, s:i}, {s:s, s:i}], s:o, s:O, "
                                  "s:[{s:s, s:s}]}",
                                  "name", "relay", "image", b->o->broker_image, "command", "/lazaret-relay", "--listen",
                                  "0.0.0.0", "--broker", BROKER_SOCKET_PATH, "ports", "name", "http", "containerPort",
                                  (int) RELAY_HTTP_PORT, "name", "socks", "containerPort", (int) RELAY_SOCKS_PORT,
                                  "securityContext", egress_security(), "resources", resources, "volumeMounts", "name",
                                  "broker-socket", "mountPath", BROKER_SOCKET_DIR);
        json_decref(resources);
        json_t *spec = json_pack(
                "{s:s, s:s, s:b, s:b, s:b, s:{s:b, s:i, s:i, s:{s:s}}, s:[o, o], "
                "s:[{s:s, s:{s:s}}, {s:s, s:{s:s}}]}",
                "runtimeClassName", KUBE_RUNTIME_CLASS, "restartPolicy", "Always", "automountServiceAccountToken", 0,
                "enableServiceLinks", 0, "hostNetwork", 0, "securityContext", "runAsNonRoot", 1, "runAsUser", 65534,
                "runAsGroup", 65534, "seccompProfile", "type", "RuntimeDefault", "containers", broker, relay, "volumes",
                "name", "config", "configMap", "name", name, "name", "broker-socket", "emptyDir", "medium", "Memory");
        /* Names resolve through the profile's resolvers, as on the host
         * (none: the pod's own resolv.conf, the cluster's DNS). */
        if (spec && b->c->n_resolvers > 0) {
                json_t *ns = json_array();
                for (size_t i = 0; ns && i < b->c->n_resolvers; i++) {
                        char buf[64];
                        netaddr_format(&b->c->resolvers[i], buf, sizeof(buf));
                        json_array_append_new(ns, json_string(buf));
                }
                json_object_set_new(spec, "dnsPolicy", json_string("None"));
                json_object_set_new(spec, "dnsConfig", json_pack("{s:o}", "nameservers", ns));
        }
        json_t *pod = spec ? json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "Pod", "metadata", meta,
                                       "spec", spec)
                           : (json_decref(meta), NULL);
        char *pod_note = NULL;
        if (asprintf(&pod_note,
                     "allow_domains: the broker and the relay, in gVisor, out of the agent's pod (a\n"
                     "NetworkPolicy holds for a whole pod, so the broker's egress must not be the\n"
                     "agent's). The relay listens on %u (HTTP CONNECT and plain HTTP) and %u (SOCKS5)\n"
                     "for the agent's pod alone; the broker checks each name and port against %zu\n"
                     "rule%s, resolves it, refuses private and denied addresses, and connects.",
                     RELAY_HTTP_PORT, RELAY_SOCKS_PORT, p->n_domains, p->n_domains == 1 ? "" : "s") < 0)
                pod_note = NULL;
        add_doc(b, "Pod", name, pod, pod_note);

        json_t *svc =
                json_pack("{s:s, s:s, s:o, s:{s:s, s:o, s:[{s:s, s:i, s:s}, {s:s, s:i, s:s}]}}", "apiVersion", "v1",
                          "kind", "Service", "metadata", metadata(b, name), "spec", "type", "ClusterIP", "selector",
                          json_pack("{s:s, s:s}", "lazaret.dev/domain", b->p->domain_hash, KUBE_ROLE_LABEL, "egress"),
                          "ports", "name", "http", "port", (int) RELAY_HTTP_PORT, "targetPort", "http", "name", "socks",
                          "port", (int) RELAY_SOCKS_PORT, "targetPort", "socks");
        add_doc(b, "Service", name, svc,
                strdup("allow_domains: the egress pod's address for the agent (its proxy variables name\n"
                       "it through the kubelet's service links). Apply it before the agent's pod."));

        /* Its policy: in from the agent's pod on the relay's ports; out to
         * DNS and to the rules' ports (the broker checks the addresses). */
        json_t *dns_to = json_array();
        for (size_t i = 0; dns_to && i < b->c->n_resolvers; i++) {
                char buf[64];
                NetAddr a = b->c->resolvers[i];
                netaddr_format(&a, buf, sizeof(buf));
                json_array_append_new(
                        dns_to, json_pack("{s:{s:s+}}", "ipBlock", "cidr", buf, a.family == AF_INET ? "/32" : "/128"));
        }
        json_t *anywhere =
                json_pack("[{s:{s:s}}, {s:{s:s}}]", "ipBlock", "cidr", "0.0.0.0/0", "ipBlock", "cidr", "::/0");
        json_t *dns_rule = json_pack("{s:[{s:s, s:i}, {s:s, s:i}]}", "ports", "protocol", "UDP", "port", 53, "protocol",
                                     "TCP", "port", 53);
        if (dns_rule && dns_to && json_array_size(dns_to) > 0)
                json_object_set(dns_rule, "to", dns_to);
        json_decref(dns_to);
        json_t *np = json_pack(
                "{s:s, s:s, s:o, s:{s:o, s:[s, s], s:[{s:[{s:o}], s:[{s:s, s:i}, {s:s, s:i}]}], s:[o, {s:o, s:o}]}}",
                "apiVersion", "networking.k8s.io/v1", "kind", "NetworkPolicy", "metadata", metadata(b, name), "spec",
                "podSelector", role_selector(b, "egress"), "policyTypes", "Ingress", "Egress", "ingress", "from",
                "podSelector", role_selector(b, "agent"), "ports", "protocol", "TCP", "port", (int) RELAY_HTTP_PORT,
                "protocol", "TCP", "port", (int) RELAY_SOCKS_PORT, "egress", dns_rule, "to", anywhere, "ports",
                rule_ports(p));
        add_doc(b, "NetworkPolicy", name, np,
                strdup("allow_domains: the egress pod takes connections from the agent's pod alone, and\n"
                       "reaches DNS and, on the rules' ports, the addresses the broker has checked."));
}

/* The agent's proxy variables: the egress pod's Service, by the address
 * the kubelet gives (service links); a variable the profile sets stays. */
static void egress_env(Build *b, json_t *env) {
        _cleanup_free_ char *host = egress_host_var(b);
        if (!host) {
                b->oom = true;
                return;
        }
        char http[160], socks[160];
        snprintf(http, sizeof(http), "http://$(%s):%u", host, RELAY_HTTP_PORT);
        snprintf(socks, sizeof(socks), "socks5h://$(%s):%u", host, RELAY_SOCKS_PORT);
        const struct {
                const char *name, *value;
        } vars[] = {
                { "HTTP_PROXY", http },
                { "HTTPS_PROXY", http },
                { "http_proxy", http },
                { "https_proxy", http },
                { "ALL_PROXY", socks },
                { "all_proxy", socks },
                { "NO_PROXY", "localhost,127.0.0.1,::1" },
                { "no_proxy", "localhost,127.0.0.1,::1" },
                { "NODE_USE_ENV_PROXY", "1" },
        };
        for (size_t i = 0; i < ELEMENTSOF(vars); i++) {
                bool set = false;
                for (size_t k = 0; k < b->p->n_env && !set; k++)
                        set = streq(b->p->env[k].name, vars[i].name);
                if (!set)
                        json_array_append_new(env,
                                              json_pack("{s:s, s:s}", "name", vars[i].name, "value", vars[i].value));
        }
}

int kube_build(const Config *c, const ConfigProfile *p, const KubeOptions *o, KubeDocs *ret, char **ret_error) {
        *ret_error = NULL;
        int r = kube_refusal(p, ret_error);
        if (r < 0)
                return r;
        if (!o->image || !kube_image_pinned(o->image))
                return fail(ret_error, "profile %s: the image must be pinned by digest (NAME@sha256:...)", p->name);
        if (o->format == KUBE_FORMAT_AGENT_SANDBOX && o->command)
                return fail(ret_error, "--format agent-sandbox runs the profile's command (a Sandbox is a pod that "
                                       "stays); leave out the command after --, or use the kubernetes format's Job");
        Build b = { .c = c, .p = p, .o = o, .claim_templates = json_array(), .claim_notes = STRBUF_INIT };
        if (!b.claim_templates || kube_name(p, &b.name) < 0) {
                json_decref(b.claim_templates);
                return -ENOMEM;
        }

        if (startswith(o->image, "localhost/"))
                warn(&b,
                     "%s is this host's own image: push it to a registry the cluster pulls from, and pin the "
                     "name and digest the registry gives it",
                     o->image);
        if (p->backend == BACKEND_NATIVE)
                warn(&b,
                     "backend = \"native\" is this host's: on the cluster the agent runs in gVisor (RuntimeClass "
                     "%s)",
                     KUBE_RUNTIME_CLASS);
        if (c->escalation_enabled)
                warn(&b, "host escalation does not carry over (on a cluster there is no person's terminal to "
                         "approve a request): the agent has none");
        if (p->workspace_branch) {
                /* The claim's name as the controller makes it, for agent-sandbox. */
                _cleanup_free_ char *ws = NULL;
                if (asprintf(&ws, o->format == KUBE_FORMAT_AGENT_SANDBOX ? "workspace-%s" : "%s-workspace", b.name) < 0)
                        ws = NULL;
                warn(&b,
                     "workspace_mode = \"branch\" has no equivalent: the workspace is the claim %s; clone the "
                     "repository into it",
                     ws ?: "of /workspace");
        }
        warn(&b, "pids_limit = %" PRIu64 " is the node's to set (the kubelet's podPidsLimit)", p->pids_limit);
        if (p->n_ca_files > 0)
                warn(&b, "ca_certificates is this host's trust store and files, which do not carry over: put the "
                         "certificates in the image, or in a ConfigMap mounted with SSL_CERT_FILE pointing at it");

        /* The agent's container, and the same context for the others. */
        json_t *security = container_security(&b);
        json_t *mounts = json_array(), *volumes = json_array(), *init = json_array(), *env = json_array();
        if (mounts && volumes)
                free(claim_volume(&b, mounts, volumes, "workspace", KUBE_WORKSPACE, false,
                                  strdup("The workspace: /workspace in the agent's container.")));
        /* persistent_dirs: a volume each, filled from the image on the
         * first start (there is no layer over the image to keep). */
        for (size_t i = 0; mounts && volumes && init && i < p->n_persistent_dirs; i++) {
                const char *dir = p->persistent_dirs[i];
                char vol[32], seed[32];
                char *note = NULL;
                snprintf(vol, sizeof(vol), "persist-%zu", i);
                snprintf(seed, sizeof(seed), "seed-%zu", i);
                if (asprintf(&note,
                             "persistent_dirs: %s, copied from the image on the first start; a later\n"
                             "image's %s does not replace what is kept here (lazaret reset has no equivalent:\n"
                             "delete the claim).",
                             dir, dir) < 0)
                        note = NULL;
                free(claim_volume(&b, mounts, volumes, vol, dir, false, note));
                json_array_append_new(init,
                                      json_pack("{s:s, s:s, s:[s, s, s, s], s:[{s:s, s:s}], s:o}", "name", seed,
                                                "image", o->image, "command", "/bin/sh", "-c",
                                                "[ -e " KUBE_SEED "/.lazaret-seeded ] || { cp -a \"$0\"/. " KUBE_SEED
                                                "/ && touch " KUBE_SEED "/.lazaret-seeded; }",
                                                dir, "volumeMounts", "name", vol, "mountPath", KUBE_SEED,
                                                "securityContext", json_deep_copy(security)));
        }
        for (size_t i = 0; mounts && volumes && i < p->n_volumes; i++) {
                const ConfigVolume *v = &p->volumes[i];
                char vol[32];
                char *note = NULL;
                snprintf(vol, sizeof(vol), "volume-%zu", i);
                if (asprintf(&note, "volumes: %s%s (its host directory is not carried over).", v->container,
                             v->read_only ? ", read-only" : "") < 0)
                        note = NULL;
                _cleanup_free_ char *cn = claim_volume(&b, mounts, volumes, vol, v->container, v->read_only, note);
                if (cn)
                        warn(&b,
                             "the host directory %s does not carry over: %s is the volume %s, empty until you "
                             "fill it",
                             v->host, v->container, cn);
        }
        /* The environment: values as they are; what the host would give,
         * a reference to a Secret (never the value). */
        char *secret = NULL;
        if (asprintf(&secret, "%s-env", b.name) < 0)
                secret = NULL;
        StrBuf keys = STRBUF_INIT;
        for (size_t i = 0; env && secret && i < p->n_env; i++) {
                const ConfigEnvVar *e = &p->env[i];
                if (e->host_var) {
                        /* env?:VAR: the pod starts without it when the Secret lacks the key. */
                        json_array_append_new(
                                env, json_pack(e->optional ? "{s:s, s:{s:{s:s, s:s, s:b}}}" : "{s:s, s:{s:{s:s, s:s}}}",
                                               "name", e->name, "valueFrom", "secretKeyRef", "name", secret, "key",
                                               e->host_var, "optional", 1));
                        strbuf_printf(&keys, " --from-literal=%s=...", e->host_var);
                } else
                        json_array_append_new(env, json_pack("{s:s, s:s}", "name", e->name, "value", e->value));
        }
        if (keys.len > 0)
                warn(&b, "the environment the host gave is the Secret %s: kubectl create secret generic %s%s", secret,
                     secret, strbuf_str(&keys));
        if (env && p->n_domains > 0) {
                egress_env(&b, env);
                if (o->broker_image && startswith(o->broker_image, "localhost/"))
                        warn(&b,
                             "the broker's image %s is this host's own: push it to a registry the cluster pulls "
                             "from and name it with --broker-image",
                             o->broker_image);
                warn(&b,
                     "allow_domains: the broker is the egress pod %s-egress; git over SSH does not go through it "
                     "on a cluster (use HTTPS), and the agent's pod has the namespace's service links (give it "
                     "a namespace of its own)",
                     b.name);
        }
        strbuf_done(&keys);
        free(secret);

        json_t *limits = json_object();
        if (limits && p->memory_limit_mib > 0) /* memory_limit = 0: none */
                json_object_set_new(limits, "memory", quantity_mib(p->memory_limit_mib));
        if (limits)
                json_object_set_new(limits, "ephemeral-storage", quantity_mib(p->disk_limit_mib));
        if (limits && p->cpu_limit > 0)
                json_object_set_new(limits, "cpu", json_integer((json_int_t) p->cpu_limit));
        json_t *resources = limits ? json_pack("{s:O, s:O}", "requests", limits, "limits", limits) : NULL;
        json_decref(limits);
        bool job = o->command != NULL;
        json_t *container =
                json_pack("{s:s, s:s, s:o, s:s, s:o, s:o, s:o}", "name", "agent", "image", o->image, "command",
                          argv_json(job ? o->command : p->command), "workingDir", KUBE_WORKSPACE, "resources",
                          resources, "securityContext", json_incref(security), "volumeMounts", json_incref(mounts));
        if (container && json_array_size(env) > 0)
                json_object_set(container, "env", env);
        if (container && !job) {
                /* The agent's terminal: kubectl attach -it. */
                json_object_set_new(container, "stdin", json_true());
                json_object_set_new(container, "tty", json_true());
        }
        /* Name resolution through the profile's resolvers only, as in the
         * sandbox on the host (the cluster's DNS would answer for every
         * name, and lies on a private address a policy usually denies). */
        json_t *ns = json_array();
        for (size_t i = 0; ns && i < p->net.n_resolvers; i++) {
                char buf[64];
                const NetAddr *a = &p->net.resolvers[i];
                netaddr_format(a, buf, sizeof(buf));
                json_array_append_new(ns, json_string(buf));
                /* 10.0.2.0/24 is rootless Podman's slirp4netns network,
                 * which the starter's resolvers name on such a host: no
                 * cluster's pod reaches it (issue 42). */
                if (a->family == AF_INET && a->addr[0] == 10 && a->addr[1] == 0 && a->addr[2] == 2)
                        warn(&b,
                             "the resolver %s is rootless Podman's own (slirp4netns) on this host: a pod on a cluster "
                             "cannot reach it, so no name would resolve there; set [network] resolvers (or the "
                             "profile's) to a DNS server the cluster's pods reach",
                             buf);
        }
        /* None: no name resolves (Kubernetes wants one nameserver; on the
         * pod's own loopback nothing answers). */
        if (ns && json_array_size(ns) == 0)
                json_array_append_new(ns, json_string("127.0.0.1"));
        json_t *dns = ns ? json_pack("{s:o}", "nameservers", ns) : NULL;
        json_t *pod =
                json_pack("{s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:s, s:o, s:{s:{s:s}}, s:[o], s:O}", "runtimeClassName",
                          KUBE_RUNTIME_CLASS, "restartPolicy", "Never", "automountServiceAccountToken", 0,
                          "enableServiceLinks", p->n_domains > 0, "hostNetwork", 0, "hostPID", 0, "hostIPC", 0,
                          "dnsPolicy", "None", "dnsConfig", dns, "securityContext", "seccompProfile", "type",
                          "RuntimeDefault", "containers", container, "volumes", volumes);
        if (pod && json_array_size(init) > 0)
                json_object_set(pod, "initContainers", init);
        json_decref(security);
        json_decref(mounts);
        json_decref(volumes);
        json_decref(init);
        json_decref(env);

        json_t *workload = NULL, *tmpl = NULL;
        bool sandbox = o->format == KUBE_FORMAT_AGENT_SANDBOX;
        if (pod && sandbox) {
                workload = agent_sandbox(&b, pod, &tmpl);
                json_decref(pod);
        } else if (pod && job) {
                json_t *meta = json_pack("{s:o}", "labels", agent_labels(&b));
                workload = json_pack("{s:s, s:s, s:o, s:{s:i, s:{s:o, s:o}}}", "apiVersion", "batch/v1", "kind", "Job",
                                     "metadata", metadata(&b, b.name), "spec", "backoffLimit", 0, "template",
                                     "metadata", meta, "spec", pod);
        } else if (pod) {
                json_t *meta = metadata(&b, b.name);
                if (meta)
                        json_object_set_new(meta, "labels", agent_labels(&b));
                workload = json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "Pod", "metadata", meta,
                                     "spec", pod);
        }
        json_decref(b.claim_templates);
        r = network_policy(&b);
        if (r >= 0 && p->n_domains > 0)
                egress(&b);
        if (r < 0 || b.oom || !workload || (sandbox && !tmpl)) {
                json_decref(workload);
                json_decref(tmpl);
                strbuf_done(&b.claim_notes);
                kube_docs_done(&b.docs);
                free(b.name);
                return r < 0 ? r : -ENOMEM;
        }
        if (sandbox)
                add_doc(&b, "SandboxTemplate", b.name, tmpl,
                        strdup("The same as a template, for SandboxClaims and warm pools: the controller's managed\n"
                               "NetworkPolicy is off (it would add to the one below and reopen egress), and\n"
                               "claims may add no environment variables and no volumes."));
        const char *apply;
        if (sandbox)
                apply = p->n_domains > 0 ? "An agent-sandbox Sandbox (kubernetes-sigs/agent-sandbox): its controller "
                                           "makes the pod\nand the claims. Apply the NetworkPolicies and the egress "
                                           "pod's objects before it."
                                         : "An agent-sandbox Sandbox (kubernetes-sigs/agent-sandbox): its controller "
                                           "makes the pod\nand the claims. Apply the NetworkPolicy before it.";
        else
                apply = p->n_domains > 0 ? "Apply the claims, the NetworkPolicies and the egress pod's ConfigMap, Pod "
                                           "and\nService before it (its proxy variables need the Service)."
                                         : "Apply the claims and the NetworkPolicy before it.";
        char head[512];
        snprintf(head, sizeof(head),
                 "lazaret kube: profile %s as one agent Domain (%s), in gVisor (RuntimeClass %s).\n%s", p->name,
                 p->domain_hash, KUBE_RUNTIME_CLASS, apply);
        strbuf_puts(&b.claim_notes, "");
        _cleanup_free_ char *notes = strbuf_steal(&b.claim_notes);
        _cleanup_free_ char *full = NULL;
        if (!notes || asprintf(&full, "%s%s", head, notes) < 0)
                full = NULL;
        /* The workload first: what carried over only in part is at the
         * top of what a person reads. */
        add_doc(&b, sandbox ? "Sandbox" : job ? "Job" : "Pod", b.name, workload, full ? join_warnings(&b, full) : NULL);
        if (b.oom || !b.docs.v[b.docs.n - 1].comment) {
                kube_docs_done(&b.docs);
                free(b.name);
                return -ENOMEM;
        }
        KubeDoc w = b.docs.v[b.docs.n - 1];
        memmove(&b.docs.v[1], &b.docs.v[0], (b.docs.n - 1) * sizeof(KubeDoc));
        b.docs.v[0] = w;
        free(b.name);
        *ret = b.docs;
        return 0;
}

int kube_check_docs(const KubeDocs *d, KubeDocs *ret) {
        KubeDocs out = {};
        for (size_t i = 0; i < d->n; i++) {
                json_t *o = d->v[i].obj;
                if (!streq_ptr(json_string_value(json_object_get(o, "kind")), "Sandbox"))
                        continue;
                json_t *meta = json_object_get(o, "metadata"), *spec = json_object_get(o, "spec");
                const char *name = json_string_value(json_object_get(meta, "name"));
                json_t *tmpl = json_object_get(spec, "podTemplate");
                json_t *docs[KUBE_CHECK_MAX];
                size_t n = 0;
                docs[n++] = json_pack("{s:s, s:s, s:{s:s, s:O}, s:O}", "apiVersion", "v1", "kind", "Pod", "metadata",
                                      "name", name ?: "", "labels",
                                      json_object_get(json_object_get(tmpl, "metadata"), "labels"), "spec",
                                      json_object_get(tmpl, "spec"));
                size_t k;
                json_t *ct;
                json_array_foreach(json_object_get(spec, "volumeClaimTemplates"), k, ct) {
                        if (n == KUBE_CHECK_MAX)
                                break;
                        char *cn = NULL;
                        if (asprintf(&cn, "%s-%s",
                                     json_string_value(json_object_get(json_object_get(ct, "metadata"), "name")) ?: "",
                                     name ?: "") < 0)
                                cn = NULL;
                        docs[n++] = cn ? json_pack("{s:s, s:s, s:{s:s}, s:O}", "apiVersion", "v1", "kind",
                                                   "PersistentVolumeClaim", "metadata", "name", cn, "spec",
                                                   json_object_get(ct, "spec"))
                                       : NULL;
                        free(cn);
                }
                for (size_t m = 0; m < n; m++) {
                        KubeDoc *v = docs[m] ? realloc(out.v, (out.n + 1) * sizeof(KubeDoc)) : NULL;
                        char *file = NULL;
                        if (!v || asprintf(&file, "check-%zu-%zu.yaml", i, m) < 0) {
                                if (v)
                                        out.v = v;
                                for (size_t q = m; q < n; q++)
                                        json_decref(docs[q]);
                                kube_docs_done(&out);
                                return -ENOMEM;
                        }
                        out.v = v;
                        v[out.n++] = (KubeDoc){ .file = file, .obj = docs[m] };
                }
        }
        *ret = out;
        return 0;
}

/* ---- YAML, through libyaml's emitter ------------------------------------- */

static int out_handler(void *data, unsigned char *buffer, size_t size) {
        strbuf_putn(data, (const char *) buffer, size);
        return 1;
}

/* A string libyaml may write plain without it reading back as something
 * else (a number, a boolean, null): otherwise double-quoted. */
static bool plain_safe(const char *s) {
        static const char *const special[] = { "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", NULL };
        if (!*s)
                return false;
        if ((*s >= '0' && *s <= '9') || *s == '-' || *s == '+' || *s == '.')
                return false;
        for (const char *const *k = special; *k; k++)
                if (strcasecmp(s, *k) == 0)
                        return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      strchr("/._-@", *c)))
                        return false;
        return true;
}

static int emit_scalar(yaml_emitter_t *e, const char *s, bool is_string) {
        yaml_event_t ev;
        bool plain = !is_string || plain_safe(s);
        if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *) s, (int) strlen(s), plain, !plain,
                                          plain ? YAML_PLAIN_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE))
                return -ENOMEM;
        return yaml_emitter_emit(e, &ev) ? 0 : -EIO;
}

static int emit_node(yaml_emitter_t *e, json_t *j) {
        yaml_event_t ev;
        char num[32];
        switch (json_typeof(j)) {
        case JSON_OBJECT: {
                bool empty = json_object_size(j) == 0;
                if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                         empty ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE) ||
                    !yaml_emitter_emit(e, &ev))
                        return -EIO;
                const char *k;
                json_t *v;
                json_object_foreach(j, k, v) {
                        int r = emit_scalar(e, k, true);
                        if (r < 0 || (r = emit_node(e, v)) < 0)
                                return r;
                }
                yaml_mapping_end_event_initialize(&ev);
                return yaml_emitter_emit(e, &ev) ? 0 : -EIO;
        }
        case JSON_ARRAY: {
                bool empty = json_array_size(j) == 0;
                if (!yaml_sequence_start_event_initialize(
                            &ev, NULL, NULL, 1, empty ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE) ||
                    !yaml_emitter_emit(e, &ev))
                        return -EIO;
                size_t i;
                json_t *v;
                json_array_foreach(j, i, v) {
                        int r = emit_node(e, v);
                        if (r < 0)
                                return r;
                }
                yaml_sequence_end_event_initialize(&ev);
                return yaml_emitter_emit(e, &ev) ? 0 : -EIO;
        }
        case JSON_STRING:
                return emit_scalar(e, json_string_value(j), true);
        case JSON_INTEGER:
                snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(j));
                return emit_scalar(e, num, false);
        case JSON_TRUE:
                return emit_scalar(e, "true", false);
        case JSON_FALSE:
                return emit_scalar(e, "false", false);
        case JSON_NULL:
                return emit_scalar(e, "null", false);
        case JSON_REAL:
        default:
                return -EINVAL;
        }
}

int kube_yaml(const KubeDoc *d, StrBuf *out) {
        strbuf_puts(out, "---\n");
        for (const char *l = d->comment; l && *l;) {
                const char *nl = strchr(l, '\n');
                size_t n = nl ? (size_t) (nl - l) : strlen(l);
                strbuf_printf(out, "# %.*s\n", (int) n, l);
                l = nl ? nl + 1 : l + n;
        }
        yaml_emitter_t e;
        yaml_event_t ev;
        if (!yaml_emitter_initialize(&e))
                return -ENOMEM;
        yaml_emitter_set_output(&e, out_handler, out);
        yaml_emitter_set_unicode(&e, 1);
        yaml_emitter_set_width(&e, -1);
        yaml_emitter_set_indent(&e, 2);
        int r = -EIO;
        if (yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) && yaml_emitter_emit(&e, &ev) &&
            yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) && yaml_emitter_emit(&e, &ev)) {
                r = emit_node(&e, d->obj);
                if (r == 0)
                        r = yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&e, &ev) &&
                                            yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&e, &ev)
                                    ? 0
                                    : -EIO;
        }
        yaml_emitter_delete(&e);
        return out->oom ? -ENOMEM : r;
}
