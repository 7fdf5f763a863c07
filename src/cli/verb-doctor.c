/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "doctor.h"
#include "log.h"
#include "string-util.h"
#include "verbs.h"

#define TIMEOUT_SEC_MAX 3600

static void doctor_help(void) {
        printf("Usage: lazaret doctor [--json] [--timeout SECONDS]\n\n"
               "Check this host's prerequisites for a sandbox launch, for the user running\n"
               "the check (rootless Podman unless run as root). Each failed check names the\n"
               "fix to paste.\n\n"
               "  --json               print one JSON object instead of text\n"
               "  --timeout SECONDS    time limit for each external command (default 30)\n"
               "  -h, --help           show this help\n\n"
               "Exit status: 0 when every required check passes, 1 otherwise.\n");
}

static int parse_timeout(const char *s, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || s[0] == '+' || v == 0 || v > TIMEOUT_SEC_MAX)
                return -EINVAL;
        *ret = (uint64_t) v * 1000000;
        return 0;
}

static void print_text(const DoctorReport *rep) {
        size_t width = 0;
        for (size_t i = 0; i < rep->n_results; i++)
                if (strlen(rep->results[i].name) > width)
                        width = strlen(rep->results[i].name);

        if (rep->user)
                printf("doctor: checking as %s (uid %u, %s)\n", rep->user, (unsigned) rep->uid,
                       rep->rootless ? "rootless" : "rootful");
        else
                printf("doctor: checking as uid %u (%s)\n", (unsigned) rep->uid,
                       rep->rootless ? "rootless" : "rootful");

        for (size_t i = 0; i < rep->n_results; i++) {
                const DoctorResult *r = &rep->results[i];
                const char *label = "?";
                switch (r->status) {
                case DOCTOR_OK:
                        label = "ok";
                        break;
                case DOCTOR_PROBLEM:
                        label = "PROBLEM";
                        break;
                case DOCTOR_WARNING:
                        label = "warning";
                        break;
                case _DOCTOR_STATUS_MAX:
                case _DOCTOR_STATUS_INVALID:
                        break;
                }
                printf("  %-8s %-*s  %s\n", label, (int) width, r->name, r->detail);
                if (!r->fix)
                        continue;
                /* "fix:" under the name column, continuation lines under the first. */
                const char *line = r->fix;
                for (bool first = true; line; first = false) {
                        const char *nl = strchr(line, '\n');
                        int len = (int) (nl ? (size_t) (nl - line) : strlen(line));
                        printf("  %-8s %s%.*s\n", "", first ? "fix: " : "     ", len, line);
                        line = nl ? nl + 1 : NULL;
                }
        }

        if (rep->n_problems == 0)
                printf("doctor: all required checks passed");
        else
                printf("doctor: %u required %s failed", rep->n_problems, rep->n_problems == 1 ? "check" : "checks");
        if (rep->n_warnings > 0)
                printf(" (%u %s)", rep->n_warnings, rep->n_warnings == 1 ? "warning" : "warnings");
        printf("\n");
}

int verb_doctor(int argc, char **argv, const Globals *g) {
        enum {
                ARG_JSON = 0x100,
                ARG_TIMEOUT,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, ARG_JSON },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                {},
        };
        _cleanup_(doctor_report_freep) DoctorReport *rep = NULL;
        DoctorOptions opts = {};
        bool json = false;
        int c, r;

        /* The configuration plays no part in the host checks but one: the
         * runsc checked is [runtime] runsc when a configuration names it
         * (and the memory cgroup the native backend uses, [runtime]
         * memory_cgroup)
         * (one that does not load is left to 'lazaret config check'). */
        _cleanup_(config_freep) Config *cfg = NULL;
        ConfigDiags diags = {};
        ConfigLoadOptions lo = { .explicit_path = g->config_path,
                                 .agent = g->agent,
                                 .workspace = g->workspace,
                                 .ignore_widening_workspace = true };
        if (config_load(&lo, &cfg, &diags) == 0) {
                opts.runsc = cfg->runsc;
                if (!cfg->memory_cgroup_found)
                        opts.memory_cgroup = cfg->memory_cgroup;
        }
        config_diags_done(&diags);

        optind = 0; /* glibc: reinitialise, argv[0] is the verb */
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+:h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        doctor_help();
                        return 0;
                case ARG_JSON:
                        json = true;
                        break;
                case ARG_TIMEOUT:
                        if (parse_timeout(optarg, &opts.timeout_usec) < 0) {
                                log_error("doctor: --timeout needs a number of seconds from 1 to %d, not '%s'",
                                          TIMEOUT_SEC_MAX, optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case ':':
                        log_error("doctor: option %s needs a value", argv[optind - 1]);
                        return EXIT_USAGE;
                case '?':
                        if (optopt != 0)
                                log_error("doctor: unknown option '-%c'; see 'lazaret doctor --help'", optopt);
                        else
                                log_error("doctor: unknown option '%s'; see 'lazaret doctor --help'", argv[optind - 1]);
                        return EXIT_USAGE;
                default:
                        log_error("doctor: unexpected option");
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                log_error("doctor: unexpected argument '%s'; see 'lazaret doctor --help'", argv[optind]);
                return EXIT_USAGE;
        }

        r = doctor_run(&opts, &rep);
        if (r < 0) {
                log_error_errno(r, "doctor: cannot run the checks: %s", strerror(-r));
                return EXIT_LAZARET;
        }

        if (json) {
                json_t *j = NULL;
                r = doctor_report_to_json(rep, &j);
                char *s = r >= 0 ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
                json_decref(j);
                if (!s) {
                        log_error("doctor: out of memory");
                        return EXIT_LAZARET;
                }
                printf("%s\n", s);
                free(s);
        } else
                print_text(rep);

        if (fflush(stdout) != 0) {
                log_error("doctor: cannot write the report: %s", strerror(errno));
                return EXIT_LAZARET;
        }
        return doctor_report_ok(rep) ? 0 : EXIT_PROBLEMS;
}
