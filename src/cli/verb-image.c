/* SPDX-License-Identifier: MIT */
/* lazaret image build: local OCI images without a registry (architecture
 * decision 13). The verb reads its command line, installs its signal
 * handler and prints the result; the building is image-build.c's, which
 * the coordinator calls as well. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fd-util.h"
#include "image-build.h"
#include "images.h"
#include "log.h"
#include "string-util.h"
#include "verbs.h"

/* The last SIGINT, SIGTERM or SIGHUP received: the running helper is then
 * stopped and the build unwound (a second one while it unwinds changes
 * nothing). */
static volatile sig_atomic_t interrupted = 0;

static void on_signal(int sig) {
        interrupted = sig;
}

static bool stop_requested(void *userdata) {
        (void) userdata;
        return interrupted != 0;
}

/* The reference as it will be named, with podman's implicit ":latest". */
static int normalize_ref(const char *ref, char **ret) {
        const char *last = strrchr(ref, '/');
        if (strchr(last ? last : ref, ':'))
                *ret = strdup(ref);
        else if (asprintf(ret, "%s:latest", ref) < 0)
                *ret = NULL;
        return *ret ? 0 : -ENOMEM;
}

/* NULL when ref can name a locally built image, else why not. */
static const char *tag_problem(const char *ref) {
        if (!startswith(ref, "localhost/"))
                return "local images are named localhost/NAME[:TAG], e.g. localhost/lazaret/busybox:latest";
        if (strchr(ref, '@'))
                return "a digest cannot be chosen: the build computes it";
        return config_image_problem(ref, NULL);
}

static void image_help(void) {
        printf("Usage: lazaret image build busybox|debian|node|sidecar|broker [--tag REF]\n\n"
               "Build a local OCI image without a registry into the calling user's Podman\n"
               "storage (rootless for a normal user, rootful for root) and print its name,\n"
               "ID and digest.\n\n"
               "  busybox   a tiny image for tests: /bin/busybox from busybox-static with a\n"
               "            link per applet, /etc/passwd, /etc/group, /root, /tmp, /workspace\n"
               "            and /run; reproducible (same busybox, same layer digest).\n"
               "            Default REF localhost/lazaret/busybox:latest.\n"
               "  debian    Debian " DEBIAN_SUITE " minbase with " DEBIAN_PACKAGES " from deb.debian.org,\n"
               "            made by mmdebstrap (debootstrap's equivalent that also works\n"
               "            without root, through subordinate ids as rootless Podman does;\n"
               "            as root it runs in root mode). Takes a few minutes.\n"
               "            Default REF localhost/lazaret/debian:" DEBIAN_SUITE ".\n"
               "  node      one layer on the debian image (built first when missing) with\n"
               "            Node.js " NODE_VERSION " and npm " NPM_VERSION " in /usr/local, both from the npm\n"
               "            registry (curl), checked against the sha512 digests this lazaret\n"
               "            was made with. Default REF localhost/lazaret/node:" NODE_VERSION ".\n"
               "  sidecar   the Network Sidecar: lazaret-netd from beside lazaret, the only\n"
               "            file (no shell). Default REF localhost/lazaret/sidecar:netd-HASH,\n"
               "            HASH from lazaret-netd's SHA-256; lazaret run builds it when missing.\n"
               "  broker    lazaret-broker with its shared libraries and lazaret-relay, for an\n"
               "            egress pod (lazaret kube). Default REF localhost/lazaret/broker:latest.\n\n"
               "  --tag REF   name the image REF, a fully qualified localhost/ reference\n"
               "  -h, --help  show this help\n\n"
               "The image is tagged only when the build succeeded; on failure nothing is\n"
               "left behind. Temporary files live in $TMPDIR (default /var/tmp).\n"
               "On success the output is four lines, \"image: REF\", \"id: sha256:...\",\n"
               "\"digest: sha256:...\" and \"layers: sha256:...\"; a profile pins the image\n"
               "as localhost/NAME@DIGEST.\n"
               "Exit status: 0 built, 64 bad command line, 125 the build failed.\n");
}

static int image_build_verb(int argc, char **argv) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "tag", required_argument, NULL, 't' },
                {},
        };
        const char *tag = NULL;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "ht:", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        image_help();
                        return 0;
                case 't':
                        tag = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (optind >= argc) {
                log_error("image build needs a flavour: busybox, debian, node, sidecar or broker");
                return EXIT_USAGE;
        }
        if (argc - optind > 1) {
                log_error("image build takes one flavour (got '%s' as well)", argv[optind + 1]);
                return EXIT_USAGE;
        }
        const char *flavour = argv[optind];
        if (!image_flavour_known(flavour)) {
                log_error("unknown image flavour '%s' (use busybox, debian, node, sidecar or broker)", argv[optind]);
                return EXIT_USAGE;
        }
        if (tag) {
                const char *why = tag_problem(tag);
                if (why) {
                        log_error("--tag '%s' is not a valid local image reference: %s", tag, why);
                        return EXIT_USAGE;
                }
        }
        _cleanup_free_ char *ref = NULL, *sidecar = NULL;
        const char *default_ref = image_flavour_default_ref(flavour);
        if (!tag && !default_ref) {
                int r = image_sidecar_ref(&sidecar);
                if (r == -ENOMEM)
                        return log_error("out of memory"), EXIT_LAZARET;
                if (r < 0) {
                        log_error("cannot read lazaret-netd beside lazaret: %s: install it next to lazaret",
                                  strerror(-r));
                        return EXIT_LAZARET;
                }
        }
        if (normalize_ref(tag ?: default_ref ?: sidecar, &ref) < 0)
                return log_error("out of memory"), EXIT_LAZARET;

        /* Interruptions unwind the build instead of killing us half-way. */
        struct sigaction sa = { .sa_handler = on_signal };
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGHUP, &sa, NULL);
        _cleanup_(image_built_done) ImageBuilt out = {};
        int r = image_build(flavour, ref, &(ImageStop){ .requested = stop_requested }, &out);
        if (r < 0)
                return EXIT_LAZARET; /* logged */
        printf("image: %s\nid: sha256:%s\ndigest: %s\nlayers: %s\n", out.ref, out.id, out.digest, out.layers);
        return 0;
}

int verb_image(int argc, char **argv, const Globals *g) {
        (void) g;
        if (argc < 2 || streq(argv[1], "-h") || streq(argv[1], "--help")) {
                image_help();
                return argc < 2 ? EXIT_USAGE : 0;
        }
        if (streq(argv[1], "build"))
                return image_build_verb(argc - 1, argv + 1);
        log_error("unknown image command '%s' (use build)", argv[1]);
        return EXIT_USAGE;
}
