/* SPDX-License-Identifier: MIT */
/* lazaret kube [PROFILE] [--namespace NS] [--output DIR] [--check]
 * [-- CMD [ARG]...]: the profile as Kubernetes manifests for one agent
 * Domain (kube.h), on standard output or as files in DIR; --check
 * validates them offline against Kubernetes' OpenAPI schemas with
 * kubernetes-validate (from PyPI). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "exec-util.h"
#include "fileio.h"
#include "kube.h"
#include "log.h"
#include "path-util.h"
#include "profile-pick.h"
#include "report.h"
#include "string-util.h"
#include "verbs.h"

#define KUBE_TOOL_USEC (UINT64_C(120) * 1000000)

static const char help[] = "Usage: lazaret kube [PROFILE] [--namespace NS] [--output DIR] [--format FORMAT] [--check]\n"
                           "                    [--force] [--broker-image REF] [-- CMD [ARG]...]\n\n"
                           "Write PROFILE as Kubernetes manifests for one agent Domain: a Pod running the\n"
                           "profile's command (a Job running CMD when one is given) in gVisor's\n"
                           "RuntimeClass, non-root where the image allows, no privilege escalation, every\n"
                           "capability dropped, the image pinned by digest, requests and limits from the\n"
                           "profile; a NetworkPolicy compiled from the Derived Network Policy; for\n"
                           "allow_domains an egress pod (the broker and the relay) the agent reaches by\n"
                           "its Service and nothing else by name; the\n"
                           "workspace, the persistent directories and the volumes as claims; what the\n"
                           "host's environment gave as references to a Secret (never the values). What\n"
                           "cannot carry over is refused with the reason; what carries over in part is\n"
                           "said at the top of the workload.\n"
                           "  -n, --namespace NS  the manifests' namespace\n"
                           "  -o, --output DIR    one file per object in DIR, each new (0600); no symbolic\n"
                           "                      link is followed on DIR's path\n"
                           "  --force             with --output: replace files of yours already there\n"
                           "  -f, --format FORMAT kubernetes (the default), or agent-sandbox: a Sandbox and a\n"
                           "                      SandboxTemplate of kubernetes-sigs/agent-sandbox, its managed\n"
                           "                      NetworkPolicy off in favour of this one\n"
                           "  --broker-image REF  allow_domains: the image of the egress pod's broker and\n"
                           "                      relay (default " KUBE_BROKER_IMAGE_DEFAULT ", from\n"
                           "                      lazaret image build broker, pinned from Podman's store)\n"
                           "  --check             validate them with kubernetes-validate (pipx install\n"
                           "                      kubernetes-validate); exit 1 when they do not pass\n"
                           "See lazaret(1) and docs/kubernetes.md.\n";

/* A DNS-1123 label, as a namespace's name must be. */
static bool dns_label(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
                        return false;
        return true;
}

/* The image pinned, and its user, from Podman's store. A pinned image
 * that is not there is used as it is (its user unknown); one that is not
 * pinned must be there. Returns 0, or an exit status after saying why. */
static int image_facts_of(const char *what, const char *ref, const char *fix, char **ret_image, char **ret_user);

static int image_facts(const ConfigProfile *p, char **ret_image, char **ret_user) {
        _cleanup_free_ char *what = NULL, *fix = NULL;
        /* A native profile may name none, and verbs that start nothing load
         * any profile without one; a pod runs one (gVisor). */
        if (!p->image) {
                log_error("profile %s names no image%s, and a Kubernetes pod runs one: "
                          "add image = \"REGISTRY/NAME@sha256:...\" to [profiles.%s]",
                          p->name, p->backend == BACKEND_NATIVE ? " (it says backend = \"native\")" : "", p->name);
                return EXIT_CONFIG;
        }
        if (asprintf(&what, "profile %s: the image %s", p->name, p->image) < 0 ||
            asprintf(&fix, "pull it (podman pull %s) or pin it in the profile (%s@sha256:...)", p->image, p->image) < 0)
                return EXIT_LAZARET;
        return image_facts_of(what, p->image, fix, ret_image, ret_user);
}

static int image_facts_of(const char *what, const char *ref, const char *fix, char **ret_image, char **ret_user) {
        _cleanup_free_ char *podman = NULL;
        const char *search = getenv("PATH");
        bool pinned = kube_image_pinned(ref);
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_find_program(search && *search ? search : "/usr/bin:/bin", "podman", &podman);
        if (r == 0)
                r = exec_capture(podman,
                                 (const char *const[]){ "podman", "image", "inspect", "--format",
                                                        "{{.Digest}} {{.Config.User}}", ref, NULL },
                                 KUBE_TOOL_USEC, &res);
        bool found = r == 0 && res.status == 0 && res.out && startswith(res.out, "sha256:");
        if (!found && !pinned) {
                log_error("%s is not pinned by digest and not in Podman's store: %s", what, fix);
                return EXIT_CONFIG;
        }
        *ret_user = NULL;
        if (found) {
                char *sp = strchr(res.out, ' ');
                char *nl = strchr(res.out, '\n');
                if (nl)
                        *nl = '\0';
                if (!sp) {
                        log_error("podman image inspect said something else than a digest and a user: %s", res.out);
                        return EXIT_LAZARET;
                }
                *sp = '\0';
                if (!(*ret_user = strdup(sp + 1)))
                        return EXIT_LAZARET;
        }
        char *img = NULL;
        if (pinned)
                img = strdup(ref);
        else if (asprintf(&img, "%s@%s", ref, res.out) < 0)
                img = NULL;
        if (!img) {
                *ret_user = mfree(*ret_user);
                return EXIT_LAZARET;
        }
        if (!kube_image_pinned(img)) {
                log_error("podman image inspect gave no usable digest for %s: %s", ref, img);
                free(img);
                *ret_user = mfree(*ret_user);
                return EXIT_LAZARET;
        }
        *ret_image = img;
        return 0;
}

/* Every file in dir, or none, through the safe writer of report --output
 * (report.h): dir walked without following a symbolic link, each file new
 * (0600) unless --force replaces a file of the user's there. */
static int write_all(const char *dir, const KubeDocs *docs, const StrBuf *texts, bool force) {
        _cleanup_free_ const char **names = calloc(docs->n ?: 1, sizeof(char *)),
                                  **data = calloc(docs->n ?: 1, sizeof(char *));
        _cleanup_free_ size_t *lens = calloc(docs->n ?: 1, sizeof(size_t));
        _cleanup_free_ char *why = NULL;
        if (!names || !data || !lens)
                return EXIT_LAZARET;
        for (size_t i = 0; i < docs->n; i++) {
                names[i] = docs->v[i].file;
                data[i] = texts[i].data ?: "";
                lens[i] = texts[i].len;
        }
        ReportDir rd;
        int r = report_output_dir(dir, &rd, &why);
        if (r >= 0)
                r = report_output_write_all(rd.fd, names, data, lens, docs->n, force, &why);
        report_output_done(&rd, r >= 0);
        if (r < 0) {
                log_error("--output %s: %s; nothing was written", dir, why ?: strerror(-r));
                return EXIT_LAZARET;
        }
        for (size_t i = 0; i < docs->n; i++) {
                _cleanup_free_ char *p = path_join(dir, names[i]);
                printf("%s\n", p ?: names[i]);
        }
        return 0;
}

/* kubernetes-validate --strict over the files. Returns 0 (they pass), 1
 * (they do not: its words on stderr), or EXIT_LAZARET. */
/* The validator, looked up before anything is printed (issue 42: without
 * it the whole YAML went to standard output before the error). Debian
 * 12's pip refuses to install into the system's Python
 * (externally-managed-environment): pipx, or a venv of its own. */
static int find_validator(char **ret) {
        const char *search = getenv("PATH");
        if (exec_find_program(search && *search ? search : "/usr/bin:/bin", "kubernetes-validate", ret) < 0) {
                log_error("--check: kubernetes-validate is not on PATH; install it from PyPI with pipx (apt install "
                          "pipx; pipx install kubernetes-validate), or in a venv of its own (python3 -m venv "
                          "~/.local/kv && ~/.local/kv/bin/pip install kubernetes-validate && ln -s "
                          "~/.local/kv/bin/kubernetes-validate ~/.local/bin/); nothing was written");
                return EXIT_LAZARET;
        }
        return 0;
}

static int check_files(const char *tool, char **files, size_t n) {
        const char **argv = calloc(n + 4, sizeof(char *));
        if (!argv)
                return EXIT_LAZARET;
        argv[0] = "kubernetes-validate";
        argv[1] = "--strict";
        argv[2] = "--quiet";
        for (size_t i = 0; i < n; i++)
                argv[3 + i] = files[i];
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture(tool, argv, KUBE_TOOL_USEC, &res);
        free(argv);
        if (r < 0 || res.spawn_error < 0 || res.timed_out) {
                log_error("--check: cannot run %s: %s", tool, res.timed_out ? "it took too long" : strerror(-r));
                return EXIT_LAZARET;
        }
        if (res.out && *res.out)
                fputs(res.out, stderr);
        if (res.err && *res.err)
                fputs(res.err, stderr);
        if (res.status != 0) {
                log_error("--check: the manifests do not pass kubernetes-validate --strict (above)");
                return 1;
        }
        /* It passes what it has no schema for (agent-sandbox's kinds,
         * checked through their pod and claims): say only what it read. */
        size_t unknown = 0;
        for (const char *w = res.out; w && (w = strstr(w, "Couldn't find schema")); w++)
                unknown++;
        fprintf(stderr, "lazaret: --check: %zu manifest%s valid (kubernetes-validate --strict)%s\n", n - unknown,
                n - unknown == 1 ? "" : "s",
                unknown ? "; the Sandbox's own fields have no schema there: its pod and claims were checked "
                          "as a Pod and claims"
                        : "");
        return 0;
}

/* --check: the documents, and what kube_check_docs() adds (a Sandbox's
 * pod and claims), in a directory of their own for kubernetes-validate. */
static int validate(const char *tool, const KubeDocs *docs, const StrBuf *texts) {
        KubeDocs extra = {};
        if (kube_check_docs(docs, &extra) < 0)
                return EXIT_LAZARET;
        char dir[] = "/tmp/lazaret-kube-XXXXXX";
        if (!mkdtemp(dir)) {
                log_error("--check: cannot make a temporary directory: %s", strerror(errno));
                kube_docs_done(&extra);
                return EXIT_LAZARET;
        }
        size_t n = docs->n + extra.n;
        char **paths = calloc(n, sizeof(char *));
        int ret = paths ? 0 : EXIT_LAZARET;
        for (size_t i = 0; ret == 0 && i < n; i++) {
                const KubeDoc *d = i < docs->n ? &docs->v[i] : &extra.v[i - docs->n];
                StrBuf t = STRBUF_INIT;
                if (i >= docs->n && kube_yaml(d, &t) < 0)
                        ret = EXIT_LAZARET;
                const StrBuf *text = i < docs->n ? &texts[i] : &t;
                paths[i] = path_join(dir, d->file);
                if (ret == 0 && (!paths[i] || write_file_atomic(paths[i], text->data, text->len, 0600, 0) < 0)) {
                        log_error("--check: cannot write %s: %s", d->file, strerror(errno));
                        ret = EXIT_LAZARET;
                }
                strbuf_done(&t);
        }
        if (ret == 0)
                ret = check_files(tool, paths, n);
        for (size_t i = 0; paths && i < n; i++) {
                if (paths[i])
                        (void) unlink(paths[i]);
                free(paths[i]);
        }
        free(paths);
        (void) rmdir(dir);
        kube_docs_done(&extra);
        return ret;
}

int verb_kube(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },         { "namespace", required_argument, NULL, 'n' },
                { "output", required_argument, NULL, 'o' }, { "check", no_argument, NULL, 'c' },
                { "format", required_argument, NULL, 'f' }, { "broker-image", required_argument, NULL, 'b' },
                { "force", no_argument, NULL, 'F' },        {},
        };
        /* The command after "--" is the Job's: options end there. */
        int dashes = argc;
        for (int i = 1; i < argc; i++)
                if (streq(argv[i], "--")) {
                        dashes = i;
                        break;
                }
        const char *ns = NULL, *output = NULL, *broker_ref = KUBE_BROKER_IMAGE_DEFAULT;
        bool check = false, force = false;
        KubeFormat format = KUBE_FORMAT_KUBERNETES;
        int c;
        optind = 1;
        while ((c = getopt_long(dashes, argv, "hn:o:f:", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        fputs(help, stdout);
                        return 0;
                case 'n':
                        ns = optarg;
                        break;
                case 'o':
                        output = optarg;
                        break;
                case 'c':
                        check = true;
                        break;
                case 'F':
                        force = true;
                        break;
                case 'b':
                        broker_ref = optarg;
                        break;
                case 'f':
                        if (streq(optarg, "kubernetes"))
                                format = KUBE_FORMAT_KUBERNETES;
                        else if (streq(optarg, "agent-sandbox"))
                                format = KUBE_FORMAT_AGENT_SANDBOX;
                        else {
                                log_error("--format %s: no such format; give kubernetes (the default) or "
                                          "agent-sandbox",
                                          optarg);
                                return EXIT_USAGE;
                        }
                        break;
                default:
                        log_error("usage: lazaret kube [PROFILE] [--namespace NS] [--output DIR] [--format FORMAT] "
                                  "[--check] [-- CMD [ARG]...] (see lazaret kube --help)");
                        return EXIT_USAGE;
                }
        const char *name = NULL;
        if (profile_operand(dashes, argv, optind, "kube", &name) < 0)
                return EXIT_USAGE;
        if (dashes < argc && dashes + 1 == argc) {
                log_error("kube: -- takes the Job's command after it (or leave it out for a Pod running the "
                          "profile's command)");
                return EXIT_USAGE;
        }
        if (ns && !dns_label(ns)) {
                log_error("--namespace %s: a namespace is 1-63 characters of a-z, 0-9 and '-', a letter or digit "
                          "at each end",
                          ns);
                return EXIT_USAGE;
        }
        if (force && !output) {
                log_error("kube: --force replaces files in --output DIR; give --output");
                return EXIT_USAGE;
        }
        if (output) {
                /* Checked now by the walk that will write there (a directory
                 * it makes is taken away again). */
                _cleanup_free_ char *why = NULL;
                ReportDir rd;
                int k = report_output_dir(output, &rd, &why);
                report_output_done(&rd, false);
                if (k < 0) {
                        log_error("--output %s", why ?: strerror(-k));
                        return EXIT_USAGE;
                }
                if (access(output, W_OK) < 0) {
                        log_error("--output %s: not a directory you may write: %s", output, strerror(errno));
                        return EXIT_USAGE;
                }
        }
        _cleanup_free_ char *validator = NULL;
        if (check && find_validator(&validator) != 0)
                return EXIT_LAZARET;
        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        int r = profile_load(g, name, &cfg, &p);
        if (r < 0)
                return profile_load_exit(r);
        _cleanup_free_ char *image = NULL, *user = NULL, *why = NULL;
        /* Refused for what it is before the image is looked up. */
        r = kube_refusal(p, &why);
        if (r < 0) {
                log_error("%s", why ? why : strerror(-r));
                return r == -EINVAL ? EXIT_CONFIG : EXIT_LAZARET;
        }
        why = mfree(why);
        r = image_facts(p, &image, &user);
        if (r != 0)
                return r;
        /* allow_domains: the broker's own image, for the egress pod. */
        _cleanup_free_ char *broker_image = NULL, *broker_user = NULL;
        if (p->n_domains > 0) {
                _cleanup_free_ char *what = NULL;
                if (asprintf(&what, "profile %s lists names (allow_domains): the broker's image %s", p->name,
                             broker_ref) < 0)
                        return EXIT_LAZARET;
                r = image_facts_of(what, broker_ref,
                                   "build it (lazaret image build broker), push it to a registry the cluster pulls "
                                   "from and name it with --broker-image REGISTRY/NAME@sha256:...",
                                   &broker_image, &broker_user);
                if (r != 0)
                        return r;
        }
        KubeOptions o = { .ns = ns,
                          .image = image,
                          .image_user = user,
                          .broker_image = broker_image,
                          .command = dashes < argc ? argv + dashes + 1 : NULL,
                          .format = format };
        KubeDocs docs = {};
        r = kube_build(cfg, p, &o, &docs, &why);
        if (r < 0) {
                log_error("%s", why ? why : strerror(-r));
                return r == -EINVAL ? EXIT_CONFIG : EXIT_LAZARET;
        }
        for (size_t i = 0; i < docs.n_warnings; i++)
                log_warning("kube: %s", docs.warnings[i]);

        /* Everything rendered before anything is written. */
        StrBuf *texts = calloc(docs.n, sizeof(StrBuf));
        int ret = texts ? 0 : EXIT_LAZARET;
        for (size_t i = 0; ret == 0 && i < docs.n; i++)
                if (kube_yaml(&docs.v[i], &texts[i]) < 0)
                        ret = EXIT_LAZARET;
        if (ret == 0 && output)
                ret = write_all(output, &docs, texts, force);
        for (size_t i = 0; ret == 0 && !output && i < docs.n; i++)
                fwrite(texts[i].data, 1, texts[i].len, stdout);
        if (fflush(stdout) != 0 && ret == 0)
                ret = EXIT_LAZARET;
        if (ret == 0 && check)
                ret = validate(validator, &docs, texts);
        for (size_t i = 0; texts && i < docs.n; i++)
                strbuf_done(&texts[i]);
        free(texts);
        kube_docs_done(&docs);
        return ret;
}
