/* SPDX-License-Identifier: MIT */
/* lazaret init: write a commented starter configuration. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "doctor.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "path-util.h"
#include "starter.h"
#include "strbuf.h"
#include "verbs.h"

/* mkdir -p for the parents of path; new directories get mode. */
static int mkdir_parents(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return negative_errno();
                *s = '/';
        }
        return 0;
}

int verb_init(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "force", no_argument, NULL, 'f' },
                {},
        };
        bool force = false;
        int c;
        (void) g;
        optind = 1;
        while ((c = getopt_long(argc, argv, "hf", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret init [--force]\n\n"
                               "Write a commented starter configuration to $XDG_CONFIG_HOME/lazaret/config.toml\n"
                               "(default ~/.config/lazaret/config.toml). An existing file is kept unless\n"
                               "--force is given.\n");
                        return 0;
                case 'f':
                        force = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                log_error("init takes no arguments (got '%s')", argv[optind]);
                return EXIT_USAGE;
        }

        _cleanup_free_ char *path = NULL, *text = NULL;
        int r = config_user_path(&path);
        if (r < 0)
                return log_error_errno(r, "cannot find the configuration directory: set HOME or XDG_CONFIG_HOME"),
                       EXIT_LAZARET;
        /* Write what works on this host: gVisor's own network stack only
         * when doctor's runsc-network check passes. */
        static const char *const only[] = { "runsc-network", NULL };
        DoctorOptions dopts = { .only = only };
        _cleanup_(doctor_report_freep) DoctorReport *rep = NULL;
        StarterHost host;
        starter_probe_host(&host);
        host.sandbox_network_ok =
                doctor_run(&dopts, &rep) >= 0 && rep->n_results == 1 && rep->results[0].status == DOCTOR_OK;
        r = starter_config(&host, &text);
        if (r < 0)
                return log_error_errno(r, "cannot build the starter configuration: %s", strerror(-r)), EXIT_LAZARET;

        r = mkdir_parents(path, 0700);
        if (r < 0)
                return log_error_errno(r, "cannot create the directory of %s: %s", path, strerror(-r)), EXIT_LAZARET;
        r = write_file_atomic(path, text, strlen(text), 0644, !force);
        if (r == -EEXIST) {
                log_error("%s already exists; keeping it (use 'lazaret init --force' to replace it)", path);
                return EXIT_LAZARET;
        }
        if (r < 0)
                return log_error_errno(r, "cannot write %s: %s", path, strerror(-r)), EXIT_LAZARET;
        printf("wrote %s\nnext: edit it, then run 'lazaret config check' and 'lazaret doctor'\n", path);
        return 0;
}
