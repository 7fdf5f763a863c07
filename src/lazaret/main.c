/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator.h"
#include "disk-watch.h"
#include "lazaret-build.h"
#include "layer-mount.h"
#include "log.h"
#include "string-util.h"
#include "trust.h"
#include "verbs.h"

static const Verb verbs[] = {
        { "audit", verb_audit, "list the host escalations on record, and verify their chain" },
        { "config", verb_config, "check or show the merged configuration" },
        { "doctor", verb_doctor, "check this host's prerequisites for a sandbox launch" },
        { "image", verb_image, "build local images without a registry (busybox, debian, node, sidecar, broker)" },
        { "init", verb_init, "write a commented starter configuration" },
        { "run", verb_run, "run a command (or the profile's agent) in the workspace's sandbox" },
        { "diff", verb_diff, "show the agent's branch against the host's HEAD" },
        { "events", verb_events, "print what the agent did and what was stopped (the event record)" },
        { "report", verb_report,
          "report a session: commands, escalations, network, refusals, files (md, html, sarif...)" },
        { "reset", verb_reset, "discard what the sandbox changed in its persistent directories" },
        { "status", verb_status, "show the workspace's sandbox: generation, sessions, uptime" },
        { "up", verb_up, "run several agents at once from a manifest, each in a sandbox of its own" },
        { "attach", verb_attach, "show one agent's terminal of a group started by up --detach" },
        { "down", verb_down, "end a group started by up --detach and print how its agents compare" },
        { "kube", verb_kube, "write a profile as Kubernetes manifests (gVisor RuntimeClass, NetworkPolicy)" },
        { "trust", verb_trust, "let this workspace's lazaret.toml widen the sandbox, after showing how" },
        { "stop", verb_stop, "end every session and tear the sandbox down" },
};

static void help(void) {
        printf("Usage: lazaret [--config FILE] [--workspace DIR] [--agent NAME] VERB [ARGS...]\n\n"
               "Run AI coding agents in a gVisor sandbox without handing them the machine.\n\n"
               "Verbs:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                printf("  %-8s %s\n", verbs[i].name, verbs[i].summary);
        printf("\nGlobal options (accepted anywhere before \"--\"):\n"
               "  --config FILE     highest-precedence configuration file\n"
               "  --workspace DIR   the project directory (default: the current directory)\n"
               "  --agent NAME      one of several agents on the workspace and profile: a Domain and a\n"
               "                    branch (lazaret/agent-NAME) of its own\n"
               "  -h, --help        show this help\n"
               "      --version     show the version\n\n"
               "See lazaret(1) and lazaret.toml(5).\n");
}

/* Take a global option out of argv. Returns 1 if argv[*i] was one (and
 * advances *i past its value), 0 if not, -1 on a missing value. */
static int take_global(int argc, char **argv, int *i, const char *name, const char **ret) {
        const char *a = argv[*i], *rest = startswith(a, name);
        if (!rest)
                return 0;
        if (*rest == '=') {
                *ret = rest + 1;
                return 1;
        }
        if (*rest != '\0')
                return 0;
        if (*i + 1 >= argc || streq(argv[*i + 1], "--")) {
                log_error("option %s needs a value", name);
                return -1;
        }
        *ret = argv[++*i];
        return 1;
}

int main(int argc, char **argv) {
        Globals g = {};
        char **rest = calloc((size_t) argc + 1, sizeof(char *));
        int n = 0;
        bool dashdash = false;

        log_set_program("lazaret");
        crypto_init();
        if (!rest) {
                log_error("out of memory");
                return EXIT_LAZARET;
        }

        /* Global options are pulled out wherever they appear before "--", so
         * "lazaret config check --config x.toml" and "lazaret --config x.toml
         * config check" mean the same. Everything else keeps its order. */
        for (int i = 1; i < argc; i++) {
                int r = 0;
                if (!dashdash) {
                        if (streq(argv[i], "--"))
                                dashdash = true;
                        else if ((r = take_global(argc, argv, &i, "--config", &g.config_path)) == 0 &&
                                 (r = take_global(argc, argv, &i, "--workspace", &g.workspace)) == 0)
                                r = take_global(argc, argv, &i, "--agent", &g.agent);
                }
                if (r < 0) {
                        free(rest);
                        return EXIT_USAGE;
                }
                if (r == 0)
                        rest[n++] = argv[i];
        }

        int ret;
        /* The hidden verb the leader CLI starts the coordinator with. */
        if (n == 1 && streq(rest[0], "__coordinator")) {
                free(rest);
                return coordinator_main(argc, argv);
        }
        /* 'lazaret stop''s watchdog when no coordinator answers (the
         * coordinator's own is a fork of it, issue 16). */
        if (n == 2 && streq(rest[0], "__watchdog") && streq(rest[1], "--now")) {
                free(rest);
                return coordinator_watchdog_main(true);
        }
        /* The coordinator's measure of the work files (issue 16). */
        if (n >= 4 && streq(rest[0], "__diskwatch")) {
                ret = diskwatch_main((int) n - 1, rest + 1);
                free(rest);
                return ret;
        }
        /* The persistent directories' overlay mounts, in Podman's
         * namespaces (issue 44). */
        if (n >= 2 && streq(rest[0], "__layer")) {
                ret = layer_helper_main((int) n - 1, rest + 1);
                free(rest);
                return ret;
        }
        if (n == 0) {
                help();
                ret = EXIT_USAGE;
        } else if (streq(rest[0], "-h") || streq(rest[0], "--help") || streq(rest[0], "help")) {
                help();
                ret = 0;
        } else if (streq(rest[0], "--version")) {
                printf("lazaret %s\n", LAZARET_VERSION);
                ret = 0;
        } else {
                const Verb *v = NULL;
                for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                        if (streq(verbs[i].name, rest[0]))
                                v = &verbs[i];
                if (!v) {
                        log_error("unknown verb '%s'; run 'lazaret --help' for the list", rest[0]);
                        ret = EXIT_USAGE;
                } else {
                        g.verb = v->name;
                        ret = v->run(n, rest, &g);
                }
        }
        free(rest);
        return ret;
}
