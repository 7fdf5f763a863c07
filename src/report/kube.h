/* SPDX-License-Identifier: MIT */
#pragma once

/* lazaret kube (issue 23): a profile as Kubernetes manifests for one agent
 * Domain. The objects are built as JSON trees (kube_build) and written as
 * YAML documents, each with comment lines at its head (kube_yaml). Nothing
 * here runs a program: the image's digest and user come in the options. */

#include <jansson.h>
#include <stdbool.h>

#include "config.h"
#include "strbuf.h"

#define KUBE_RUNTIME_CLASS         "gvisor"
#define KUBE_AGENT_SANDBOX_API     "agents.x-k8s.io/v1beta1"
#define KUBE_AGENT_SANDBOX_EXT_API "extensions.agents.x-k8s.io/v1beta1"
/* `lazaret image build broker`'s name; --broker-image names another. */
#define KUBE_BROKER_IMAGE_DEFAULT "localhost/lazaret/broker:latest"

typedef enum KubeFormat {
        KUBE_FORMAT_KUBERNETES, /* a Pod or Job, claims */
        KUBE_FORMAT_AGENT_SANDBOX, /* a Sandbox and a SandboxTemplate of kubernetes-sigs/agent-sandbox */
} KubeFormat;

typedef struct KubeDoc {
        char *file; /* its file name under --output DIR */
        char *comment; /* lines for the head of the document ('\n' between them), or NULL */
        json_t *obj;
} KubeDoc;

typedef struct KubeDocs {
        KubeDoc *v;
        size_t n;
        char **warnings; /* what carried over only in part, also in the workload's comment */
        size_t n_warnings;
} KubeDocs;

typedef struct KubeOptions {
        const char *ns; /* the namespace, or NULL */
        const char *image; /* pinned: NAME[:TAG]@sha256:HEX */
        const char *image_user; /* the image's user ("" root), or NULL when not known */
        char *const *command; /* a command that ends (a Job), or NULL: the profile's, in a Pod */
        const char *broker_image; /* allow_domains: the broker's image, pinned (the egress pod's) */
        KubeFormat format;
} KubeOptions;

/* What cannot carry over at all (runsc_network = "host", ...): -EINVAL
 * with *ret_error saying which and why, else 0. kube_build() checks it
 * first too. */
int kube_refusal(const ConfigProfile *p, char **ret_error);

/* Build the documents for profile p of c. A part that cannot carry over
 * safely is -EINVAL with *ret_error saying which and why (nothing built). */
int kube_build(const Config *c, const ConfigProfile *p, const KubeOptions *o, KubeDocs *ret, char **ret_error);

void kube_docs_done(KubeDocs *d);

/* What --check validates besides the documents: a Sandbox's pod template
 * as a Pod and its claim templates as PersistentVolumeClaims (Kubernetes'
 * schemas do not know agent-sandbox's kinds). */
#define KUBE_CHECK_MAX 64
int kube_check_docs(const KubeDocs *d, KubeDocs *ret);

/* One document: "---", its comment lines as "# ...", the YAML. */
int kube_yaml(const KubeDoc *d, StrBuf *out);

/* The object name for profile p: "lazaret-" PROFILE "-" HASH, a DNS label
 * (a profile's '_' becomes '-'). */
int kube_name(const ConfigProfile *p, char **ret);

/* Whether image names its digest (NAME@sha256: and 64 hex digits). */
bool kube_image_pinned(const char *image);
