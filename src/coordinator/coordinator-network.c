/* SPDX-License-Identifier: MIT */
/* The coordinator's network: the Network participant (the sidecar and
 * its attestation), the Derived Network Policy in force with the host's
 * own addresses denied, a changed policy applied on the slow thread while
 * the CLI that asked waits, and the probes' Network Readiness Evidence. */
#include <semaphore.h>

#include "coordinator-internal.h"

/* The Derived Network Policy in force: the declared one, plus a deny rule
 * for every address of the host itself that it would permit, read now
 * (issue 14). *ret_why names what failed. */
static int effective_policy(const char *declared, const NetPolicy *parsed, NetPolicy *ret_net, char **ret_canon,
                            HostAddrs *ret_host, const char **ret_why) {
        NetPolicy np;
        int r = parsed ? netpolicy_copy(parsed, &np) : netpolicy_parse(declared, strlen(declared), &np, ret_why);
        if (r < 0) {
                if (r == -ENOMEM)
                        *ret_why = "out of memory";
                return r;
        }
        _cleanup_(host_addrs_done) HostAddrs h = {};
        r = host_addresses_deny(&np, &h, NULL);
        if (r < 0) {
                *ret_why = r == -E2BIG ? "the host's addresses take the policy past its rule limit"
                                       : "cannot read the host's addresses";
                netpolicy_done(&np);
                return r;
        }
        r = netpolicy_format(&np, ret_canon, NULL);
        if (r < 0) {
                *ret_why = "out of memory";
                netpolicy_done(&np);
                return r;
        }
        *ret_net = np;
        *ret_host = h;
        h = (HostAddrs){};
        return 0;
}

/* The host's addresses now are h's (both sorted, as read): then the same
 * declared policy derives the same policy as when h was read. */
static bool host_addrs_unchanged(const HostAddrs *h) {
        _cleanup_free_ NetAddr *now = NULL;
        size_t n = 0;
        if (host_addresses_read(&now, &n) < 0 || n != h->n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (now[i].family != h->addrs[i].family ||
                    memcmp(now[i].addr, h->addrs[i].addr, now[i].family == AF_INET ? 4 : 16) != 0)
                        return false;
        return true;
}

/* An address of the host that the running policy permits: the first, or
 * NULL. */
static const NetAddr *host_permitted(const NetPolicy *running, const HostAddrs *h) {
        for (size_t i = 0; i < h->n; i++)
                if (h->effects[i] == HOST_ADDR_IMPLICIT_DENY && netpolicy_verdict(running, &h->addrs[i]) == NET_ALLOW)
                        return &h->addrs[i];
        return NULL;
}

/* np and canon (both taken) become the policy in force, co->net. The
 * spec keeps the declared policy: the configuration the launch named. */
static int set_policy(Coordinator *co, NetPolicy *np, char *canon) {
        bool own = co->net.canonical ? co->net.own_rules : co->spec.own_address_rules;
        policy_in_force_done(&co->net);
        co->net.own_rules = own;
        co->net.parsed = *np;
        *np = (NetPolicy){};
        co->net.canonical = canon;
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, canon, strlen(canon), co->net.digest);
        /* The broker judges names' addresses by it too. */
        co_broker_refresh(co);
        return 0;
}

/* The slow thread's part of a policy update: netd replaces the routes,
 * gVisor's own stack takes them over, the probes run again and the
 * evidence is recorded. The loop changes none of what it reads while it
 * runs (one update at a time; other Hellos with a policy wait). */
static int job_net_update(Store *st, void *userdata) {
        NetUpdate *u = userdata;
        Coordinator *co = u->co;
        (void) st;
        int r = sidecar_update(&co->sidecar, co->net.canonical, co->net.digest, &u->error);
        if (r >= 0 && launch_gvisor_netstack(&co->spec))
                r = sidecar_update_gvisor(&co->spec, &co->sidecar, sandbox_gvisor_info(&co->sb), co->net.canonical,
                                          &u->error);
        if (r >= 0)
                r = prove_network(co, u->fingerprint, &u->error);
        return r;
}

/* Back on the loop: the CLI that asked gets its session (its frames
 * waited), or the reason and the sandbox stops rather than stay between
 * two policies; then the Hellos that waited are looked at. */
static void job_net_update_done(int result, void *userdata) {
        NetUpdate *u = userdata;
        Coordinator *co = u->co;
        co->net_update = NULL;
        if (result < 0) {
                _cleanup_free_ char *msg = NULL;
                const char *e = u->error ? u->error : strerror(-result);
                log_error("network policy update failed: %s", e);
                if (asprintf(&msg, "cannot apply the new network policy: %s; the sandbox stops", e) < 0)
                        msg = NULL;
                if (u->conn)
                        conn_send_error(u->conn, msg ?: "cannot apply the new network policy");
                co_begin_stop(co, "a network policy update failed");
        } else {
                memcpy(co->readiness_fingerprint, u->fingerprint, sizeof(u->fingerprint));
                free(co->declared_netpolicy);
                co->declared_netpolicy = TAKE_PTR(u->declared);
                host_addrs_done(&co->host);
                co->host = u->host;
                u->host = (HostAddrs){};
                log_info("network policy update done (+%" PRIu64 " ms)", (now_usec() - u->started_usec) / 1000);
        }
        Conn *asker = u->conn;
        free(u->declared);
        host_addrs_done(&u->host);
        free(u->error);
        HelloResume resume = u->resume;
        free(u);
        if (asker && result >= 0)
                resume(co, asker);
        for (Conn *c = co->conns; c && !co->net_update; c = c->next)
                if (c->state == CONN_HELLO_WAIT && !c->dead && !c->close_after_flush) {
                        if (co->stopping)
                                conn_send_error(c, "the sandbox is stopping; run the command again");
                        else
                                resume(co, c);
                }
}

/* A CLI joined with a different network policy (canonical, with the
 * host's addresses h denied; *decl is what it declared). The running
 * sandbox takes it over: netd replaces the routes (with gVisor's own
 * stack, gVisor's too) and the probes run again before the CLI gets its
 * session, all on the slow thread (HELLO_PENDING: *decl and *h taken).
 * What the running sandbox cannot take is refused with the reason; a
 * failure half-way stops the sandbox rather than leave it between two
 * policies. */
static HelloResult update_network(Coordinator *co, Conn *c, const char *canonical, const char *cause, char **decl,
                                  HostAddrs *h, HelloResume resume) {
        NetPolicy np;
        const char *why;
        if (netpolicy_parse(canonical, strlen(canonical), &np, &why) < 0) {
                conn_send_error(c, "the network policy sent is not canonical");
                return HELLO_REFUSED;
        }
        if (!co->sidecar.name && netpolicy_permits_nothing(&np)) {
                /* Loopback only before and after: nothing to apply. */
                char *c2 = strdup(canonical);
                if (!c2)
                        netpolicy_done(&np);
                if (!c2 || set_policy(co, &np, c2) < 0) {
                        conn_send_error(c, "out of memory");
                        return HELLO_REFUSED;
                }
                return HELLO_ACCEPTED;
        }
        const char *refuse = NULL;
        if (!co->sidecar.name)
                refuse = "the sandbox runs without a network sidecar (its policy permits nothing)";
        else if (np.enabled[NET_IPV6] != co->net.parsed.enabled[NET_IPV6])
                refuse = "the IPv6 disposition changed";
        else if (np.n_resolvers != co->net.parsed.n_resolvers ||
                 memcmp(np.resolvers, co->net.parsed.resolvers, np.n_resolvers * sizeof(NetAddr)) != 0)
                refuse = "the resolvers changed (they are in the sandbox's resolv.conf)";
        if (refuse) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg,
                             "the network policy changed%s%s%s, and the running sandbox cannot take it over: %s; "
                             "run 'lazaret stop' and start again to apply it",
                             cause ? " (" : "", cause ?: "", cause ? ")" : "", refuse) < 0)
                        msg = NULL;
                conn_send_error(c, msg ?: "the network policy changed");
                netpolicy_done(&np);
                return HELLO_REFUSED;
        }
        NetUpdate *u = calloc(1, sizeof(NetUpdate));
        char *canon_copy = strdup(canonical);
        if (!u || !canon_copy) {
                free(u);
                free(canon_copy);
                netpolicy_done(&np);
                conn_send_error(c, "out of memory");
                return HELLO_REFUSED;
        }
        char old[13];
        snprintf(old, sizeof(old), "%.12s", co->net.digest);
        /* The new policy is in force (the evidence names its digest next
         * to the generation's configuration) before the thread reads it. */
        int r = set_policy(co, &np, canon_copy);
        log_info("network policy update %s -> %.12s", old, co->net.digest);
        *u = (NetUpdate){ .co = co, .conn = c, .resume = resume, .started_usec = now_usec() };
        if (r < 0) {
                u->error = strdup("out of memory");
                job_net_update_done(r, u);
                return HELLO_REFUSED;
        }
        u->declared = TAKE_PTR(*decl);
        u->host = *h;
        *h = (HostAddrs){};
        co->net_update = u;
        r = store_worker_submit(co->slow, job_net_update, job_net_update_done, u);
        if (r < 0) {
                u->error = strdup("cannot start the update");
                job_net_update_done(r, u);
                return HELLO_REFUSED;
        }
        return HELLO_PENDING;
}

/* Every CLI that joins to open a session sends its declared policy: with
 * the host's addresses read again, the same policy in force, or the same
 * declaration and no new host address it permits, means nothing to do.
 * Otherwise the running sandbox takes it over or the CLI is told why not.
 * A Hello without a policy (status, stop) changes nothing. */
HelloResult hello_network(Coordinator *co, Conn *c, const char *declared, HelloResume resume) {
        if (!declared || !co->declared_netpolicy)
                return HELLO_ACCEPTED;
        /* The usual Hello (the CLI that started us, or one with the same
         * configuration) while the host kept its addresses: the policy in
         * force is what it would derive, without parsing it again. */
        if (!co->net_update && streq(declared, co->declared_netpolicy) && host_addrs_unchanged(&co->host))
                return HELLO_ACCEPTED;
        _cleanup_(netpolicy_done) NetPolicy np = {};
        _cleanup_free_ char *canon = NULL, *decl = strdup(declared);
        _cleanup_(host_addrs_done) HostAddrs h = {};
        const char *why = NULL;
        if (!decl) {
                conn_send_error(c, "out of memory");
                return HELLO_REFUSED;
        }
        int r = effective_policy(decl, NULL, &np, &canon, &h, &why);
        if (r == -EINVAL) {
                conn_send_error(c, "the network policy sent is not canonical");
                return HELLO_REFUSED;
        }
        if (r < 0) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "cannot check the network policy: %s (%s)", why, strerror(-r)) < 0)
                        msg = NULL;
                conn_send_error(c, msg ?: "cannot check the network policy");
                return HELLO_REFUSED;
        }
        bool same_declaration = streq(decl, co->declared_netpolicy);
        const NetAddr *fresh = same_declaration ? host_permitted(&co->net.parsed, &h) : NULL;
        if (streq(canon, co->net.canonical) || (same_declaration && !fresh)) {
                host_addrs_done(&co->host);
                co->host = h;
                h = (HostAddrs){};
                return HELLO_ACCEPTED;
        }
        char cause[128] = "";
        if (fresh) {
                char a[64];
                netaddr_format(fresh, a, sizeof(a));
                snprintf(cause, sizeof(cause), "the host has a new address, %s, which it must deny", a);
        }
        HelloResult hr = update_network(co, c, canon, fresh ? cause : NULL, &decl, &h, resume);
        if (hr == HELLO_ACCEPTED) {
                free(co->declared_netpolicy);
                co->declared_netpolicy = TAKE_PTR(decl);
                host_addrs_done(&co->host);
                co->host = h;
                h = (HostAddrs){};
        }
        return hr;
}

/* The network sidecar: acquired is attested (Prepared); the probes'
 * evidence commits it (prove_network). obj: the coordinator, live. */
static int network_acquire(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error) {
        Coordinator *co = ctx;
        (void) obj;
        (void) intent;
        int r = sidecar_start(&co->spec, &co->net, &co->sidecar, ret_error);
        if (r < 0)
                return r;
        ProcessIdentity conmon = {}, uplink = {};
        (void) process_identity_of(co->sidecar.conmon_pid, &conmon);
        *ret_commit = json_pack("{s:s, s:O?, s:o}", "container_id", co->sidecar.id, "namespace",
                                json_object_get(co->sidecar.attestation, "enforcement_namespace"), "runtime_supervisor",
                                process_identity_to_json(&conmon));
        /* No container: what a later coordinator ends if this one dies
         * without (both die with it, by the parent-death signal and the
         * exit pipe; this is for the rest). */
        if (*ret_commit && co->sidecar.own_namespace) {
                (void) process_identity_of(co->sidecar.uplink_pid, &uplink);
                (void) json_object_set_new(*ret_commit, "daemon", process_identity_to_json(&conmon));
                (void) json_object_set_new(*ret_commit, "uplink", process_identity_to_json(&uplink));
        }
        return 0;
}

static int network_release(void *ctx, void *obj, json_t *own, uint64_t generation) {
        Coordinator *co = ctx;
        (void) generation;
        if (obj && co->sidecar_fd >= 0)
                co->sidecar_fd = co_close_watched(co, co->sidecar_fd);
        if (obj)
                /* Kept for the next run (issue 45) only after a proven
                 * start and a teardown for want of clients: not after
                 * 'lazaret stop', a limit, or a lost part. */
                sidecar_leave_own(&co->sidecar, co->stopping && !co->stop_reason && !co->runtime_lost &&
                                                        co->readiness_fingerprint[0] != '\0');
        else
                /* A dead coordinator's namespace of its own: netd and its
                 * uplink, by pid and start time. */
                for (const char *const *k = (const char *const[]){ "daemon", "uplink", NULL }; *k; k++) {
                        ProcessIdentity pi;
                        if (process_identity_from_json(json_object_get(own, *k), &pi) >= 0 &&
                            process_identity_alive(&pi))
                                (void) kill(pi.pid, SIGKILL);
                }
        const char *name = json_string_value(json_object_get(own, "container_name"));
        _cleanup_free_ char *err = NULL;
        if (name && container_remove(&co->spec, name, &err) < 0) {
                log_error("cannot remove the network sidecar %s: %s", name, err ? err : "?");
                return -EIO;
        }
        if (obj)
                sidecar_done(&co->sidecar);
        return 0;
}

const PartKind kind_network = {
        .role = ROLE_NETWORK,
        .recover_pass = 1, /* after the sandbox in its namespace */
        .acquire_prepares = true,
        .acquire = network_acquire,
        .release = network_release,
};

typedef struct PolicyJob {
        pthread_t thread;
        sem_t parsed_sem; /* posted once parsed: read-only for both from then on */
        char *text; /* its own copy: nothing it reads is freed under it */
        NetPolicy parsed, derived;
        int parsed_r, derived_r;
        char *canonical;
        HostAddrs host;
} PolicyJob;

static void *policy_job_run(void *arg) {
        PolicyJob *j = arg;
        const char *why = NULL;
        j->parsed_r = netpolicy_parse(j->text, strlen(j->text), &j->parsed, &why);
        (void) sem_post(&j->parsed_sem);
        if (j->parsed_r >= 0)
                j->derived_r = effective_policy(j->text, &j->parsed, &j->derived, &j->canonical, &j->host, &why);
        return NULL;
}

/* No thread (out of memory, or none to be had): the parse is made when
 * it is needed, as before. */
void co_policy_begin(Coordinator *co) {
        PolicyJob *j = calloc(1, sizeof(*j));
        if (!j)
                return;
        j->text = strdup(co->spec.netpolicy);
        j->derived_r = -ENOENT;
        if (!j->text || sem_init(&j->parsed_sem, 0, 0) < 0) {
                free(j->text);
                free(j);
                return;
        }
        if (pthread_create(&j->thread, NULL, policy_job_run, j) != 0) {
                (void) sem_destroy(&j->parsed_sem);
                free(j->text);
                free(j);
                return;
        }
        co->policy_job = j;
}

int co_policy_wait_parsed(Coordinator *co, const NetPolicy **ret) {
        PolicyJob *j = co->policy_job;
        if (!j)
                return -ENOENT;
        while (sem_wait(&j->parsed_sem) < 0 && errno == EINTR)
                ;
        /* Posted again: a later wait, or the join, does not block. */
        (void) sem_post(&j->parsed_sem);
        *ret = j->parsed_r >= 0 ? &j->parsed : NULL;
        return j->parsed_r >= 0;
}

static void pre_derived_done(Coordinator *co) {
        netpolicy_done(&co->pre_derived);
        co->pre_canonical = mfree(co->pre_canonical);
        host_addrs_done(&co->pre_host);
}

int co_policy_join(Coordinator *co) {
        PolicyJob *j = TAKE_PTR(co->policy_job);
        if (!j)
                return -ENOENT;
        (void) pthread_join(j->thread, NULL);
        (void) sem_destroy(&j->parsed_sem);
        int r = j->parsed_r >= 0;
        if (r) {
                netpolicy_done(&co->declared_parsed);
                co->declared_parsed = j->parsed;
                j->parsed = (NetPolicy){};
        }
        pre_derived_done(co);
        if (j->derived_r >= 0) {
                co->pre_derived = j->derived;
                co->pre_canonical = TAKE_PTR(j->canonical);
                co->pre_host = j->host;
                j->derived = (NetPolicy){};
                j->host = (HostAddrs){};
        }
        netpolicy_done(&j->parsed);
        netpolicy_done(&j->derived);
        free(j->canonical);
        host_addrs_done(&j->host);
        free(j->text);
        free(j);
        return r;
}

void co_policy_drop(Coordinator *co) {
        if (co->policy_job && co_policy_join(co) > 0) {
                netpolicy_done(&co->declared_parsed);
                co->have_declared_parsed = false;
        }
        pre_derived_done(co);
}

int start_network(Coordinator *co, char **ret_error) {
        _cleanup_(netpolicy_done) NetPolicy np = {};
        _cleanup_free_ char *canon = NULL;
        const char *why = NULL;
        int r;
        co->declared_netpolicy = strdup(co->spec.netpolicy);
        if (!co->declared_netpolicy)
                return -ENOMEM;
        r = co_policy_join(co);
        if (r != -ENOENT)
                co->have_declared_parsed = r > 0;
        /* Derived on the thread, and the host's addresses as they were
         * then: taken as it is. */
        if (co->pre_canonical && host_addrs_unchanged(&co->pre_host)) {
                np = co->pre_derived;
                co->pre_derived = (NetPolicy){};
                canon = TAKE_PTR(co->pre_canonical);
                host_addrs_done(&co->host);
                co->host = co->pre_host;
                co->pre_host = (HostAddrs){};
                log_debug("the policy derived beside the start is taken (the host's addresses are unchanged)");
                r = 0;
        } else
                r = effective_policy(co->declared_netpolicy, co->have_declared_parsed ? &co->declared_parsed : NULL,
                                     &np, &canon, &co->host, &why);
        pre_derived_done(co);
        netpolicy_done(&co->declared_parsed);
        co->have_declared_parsed = false;
        if (r >= 0)
                r = set_policy(co, &np, TAKE_PTR(canon));
        if (r < 0) {
                *ret_error = strdup(why ?: "out of memory");
                return r;
        }
        for (size_t i = 0; i < co->host.n; i++)
                if (co->host.effects[i] == HOST_ADDR_IMPLICIT_DENY) {
                        char a[64];
                        netaddr_format(&co->host.addrs[i], a, sizeof(a));
                        log_info("implicit rule: deny %s (an address of the host)", a);
                }
        if (!co->spec.netd) {
                log_info("the policy permits no destination: loopback only, no sidecar");
                (void) own_gen_update(co->store, co->generation, json_pack("{s:s}", "network", "LoopbackOnly"));
                return 0;
        }
        _cleanup_free_ char *name = NULL;
        r = sidecar_name(&co->spec, &name);
        if (r < 0)
                return r;
        for (int attempt = 0;; attempt++) {
                log_debug("starting the network sidecar (+%" PRIu64 " ms)", (now_usec() - co->started_usec) / 1000);
                /* A container is removed by its name; the native
                 * backend's namespace of its own has none. */
                bool own = sidecar_own_namespace(&co->spec);
                r = part_begin(&co->ps, co->generation, &kind_network,
                               json_pack("{s:s*, s:s, s:b}", "container_name", own ? NULL : name,
                                         "derived_policy_digest", co->net.digest, "own_namespace", own),
                               co, co, &co->p_network, ret_error);
                if (r < 0)
                        return r;
                /* Podman may have given the host an address just now
                 * (rootful: its bridge, made with the first container on
                 * it). Read them again; one the policy permits means the
                 * sidecar starts again with it denied (in the main table,
                 * where gVisor's own stack reads the routes). */
                /* The same addresses: nothing is new (without a parse). */
                if (host_addrs_unchanged(&co->host))
                        break;
                _cleanup_(netpolicy_done) NetPolicy again = {};
                _cleanup_free_ char *again_canon = NULL;
                _cleanup_(host_addrs_done) HostAddrs h = {};
                r = effective_policy(co->declared_netpolicy, NULL, &again, &again_canon, &h, &why);
                if (r < 0) {
                        stop_network(co);
                        *ret_error = strdup(why);
                        return r;
                }
                const NetAddr *fresh = host_permitted(&co->net.parsed, &h);
                if (!fresh) {
                        host_addrs_done(&co->host);
                        co->host = h;
                        h = (HostAddrs){};
                        break;
                }
                char a[64];
                netaddr_format(fresh, a, sizeof(a));
                stop_network(co);
                if (attempt > 0) {
                        if (asprintf(ret_error,
                                     "the host's addresses keep changing (%s is new since the sidecar started); "
                                     "try again when they are stable",
                                     a) < 0)
                                *ret_error = NULL;
                        return -EAGAIN;
                }
                log_info("the host has a new address, %s, since the sidecar started: starting it again with "
                         "that address denied",
                         a);
                host_addrs_done(&co->host);
                co->host = h;
                h = (HostAddrs){};
                r = set_policy(co, &again, TAKE_PTR(again_canon));
                if (r < 0)
                        return r;
        }
        (void) own_gen_update(co->store, co->generation, json_pack("{s:s}", "network_sidecar_id", co->sidecar.id));
        co->sidecar_fd = (int) syscall(SYS_pidfd_open, co->sidecar.conmon_pid, 0);
        log_info("network sidecar %s attested policy %.12s (+%" PRIu64 " ms)", co->sidecar.name, co->net.digest,
                 (now_usec() - co->started_usec) / 1000);
        return 0;
}

/* Probe from where the agent's traffic originates and record the Network
 * Readiness Evidence; a mismatch is an error naming the destination. */
int prove_network(Coordinator *co, char ret_fingerprint[65], char **ret_error) {
        if (!co->sidecar.name)
                return 0;
        json_t *probe = NULL;
        int r = sidecar_probe(&co->spec, &co->sidecar, sandbox_gvisor_info(&co->sb), &co->net.parsed, &probe,
                              ret_error);
        json_t *ns = json_object_get(co->sidecar.attestation, "enforcement_namespace");
        json_t *identity =
                json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:O?}", "schema_id", "lazaret.network-readiness-identity.v1",
                          "domain_id", co->spec.domain_hash, "generation_id", (json_int_t) co->generation,
                          "configuration_fingerprint", co->spec.fingerprint, "network_sidecar_id", co->sidecar.id,
                          "derived_policy_digest", co->net.digest, "enforcement_namespace", ns);
        char fp[65] = "";
        if (!identity || sidecar_readiness_fingerprint(identity, fp) < 0) {
                json_decref(identity);
                json_decref(probe);
                return -ENOMEM;
        }
        json_decref(identity);
        if (probe) {
                json_object_set_new(probe, "domain_id", json_string(co->spec.domain_hash));
                json_object_set_new(probe, "generation_id", json_integer((json_int_t) co->generation));
        }
        ProcessIdentity conmon = {};
        (void) process_identity_of(co->sidecar.conmon_pid, &conmon);
        json_t *attestation = json_deep_copy(co->sidecar.attestation);
        if (attestation)
                json_object_update_new(attestation,
                                       json_pack("{s:s, s:I, s:s, s:s, s:o, s:n}", "domain_id", co->spec.domain_hash,
                                                 "generation_id", (json_int_t) co->generation,
                                                 "configuration_fingerprint", co->spec.fingerprint,
                                                 "network_sidecar_id", co->sidecar.id, "runtime_supervisor",
                                                 process_identity_to_json(&conmon), "connectivity_helper"));
        json_t *evidence =
                json_pack("{s:s, s:I, s:s, s:s, s:o*, s:o*, s:b}", "domain_id", co->spec.domain_hash, "generation_id",
                          (json_int_t) co->generation, "network_sidecar_id", co->sidecar.id, "readiness_fingerprint",
                          fp, "attestation", attestation, "probe", probe, "accepted", r >= 0);
        if (r < 0) {
                /* Kept for the record on the participant being released. */
                (void) part_update(&co->ps, &co->p_network, -1, json_pack("{s:o*}", "rejected_evidence", evidence));
                return r;
        }
        json_t *own = json_pack("{s:s, s:s, s:O?, s:o, s:o*}", "derived_policy_digest", co->net.digest,
                                "readiness_fingerprint", fp, "namespace", ns, "runtime_supervisor",
                                process_identity_to_json(&conmon), "readiness_evidence", evidence);
        /* The first proof commits the participant; an update's proof
         * replaces the evidence. */
        if (part_update(&co->ps, &co->p_network, PARTICIPANT_COMMITTED, json_incref(own)) == -EINVAL)
                (void) part_update(&co->ps, &co->p_network, -1, own);
        else
                json_decref(own);
        memcpy(ret_fingerprint, fp, sizeof(fp));
        log_info("network readiness proved (fingerprint %.12s, +%" PRIu64 " ms)", fp,
                 (now_usec() - co->started_usec) / 1000);
        return 0;
}

void stop_network(Coordinator *co) {
        (void) part_end(&co->ps, &co->p_network, co, co);
}
