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
#include "presets.h"
#include "starter.h"
#include "strbuf.h"
#include "toml.h"
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

/* --agent: the profile appended to the person's file (the starter first
 * when there is none), unless the file has a profile of that name. */
static int add_agent(const char *path, const char *name, const Preset *ps, const StarterHost *host) {
        _cleanup_free_ char *old = NULL, *profile = NULL;
        size_t size = 0;
        bool has_default = false;
        int r = read_file_capped(path, CONFIG_FILE_MAX, &old, &size);
        if (r == -ENOENT) {
                r = starter_config(host, &old);
                if (r < 0)
                        return log_error_errno(r, "cannot build the starter configuration: %s", strerror(-r)),
                               EXIT_LAZARET;
                size = strlen(old);
        } else if (r < 0)
                return log_error_errno(r, "cannot read %s: %s", path, strerror(-r)), EXIT_LAZARET;
        else {
                TomlLimits lim = { .max_depth = CONFIG_DEPTH_MAX, .max_string = CONFIG_STRING_MAX };
                TomlError te = {};
                TomlValue *root = NULL;
                r = toml_parse(old, size, &lim, &root, &te);
                if (r < 0) {
                        toml_free(root);
                        log_error("%s:%u:%u: %s; fix it first ('lazaret config check')", path, te.pos.line, te.pos.col,
                                  te.message);
                        return EXIT_CONFIG;
                }
                const TomlEntry *pt = toml_table_get(root, "profiles");
                bool taken = pt && pt->value->type == TOML_TABLE && toml_table_get(pt->value, name);
                has_default = toml_table_get(root, "default_profile") != NULL;
                toml_free(root);
                if (taken) {
                        log_error("%s has a profile %s already; keeping it (choose another name with --name)", path,
                                  name);
                        return EXIT_LAZARET;
                }
        }
        r = starter_agent_profile(name, ps, host, &profile);
        if (r < 0)
                return log_error_errno(r, "cannot build the profile: %s", strerror(-r)), EXIT_LAZARET;
        StrBuf b = STRBUF_INIT;
        /* The agent just added is what a bare "lazaret run" starts, unless
         * the person chose a default already. A top-level key goes before
         * every table: at the very top. */
        if (!has_default)
                strbuf_printf(&b,
                              "# The profile \"lazaret run\" (and every verb given no profile name) uses.\n"
                              "default_profile = \"%s\"\n\n",
                              name);
        strbuf_putn(&b, old, size);
        if (size > 0 && old[size - 1] != '\n')
                strbuf_putc(&b, '\n');
        strbuf_puts(&b, profile);
        _cleanup_free_ char *text = strbuf_steal(&b);
        if (!text)
                return log_error("out of memory"), EXIT_LAZARET;
        r = mkdir_parents(path, 0700);
        if (r < 0)
                return log_error_errno(r, "cannot create the directory of %s: %s", path, strerror(-r)), EXIT_LAZARET;
        r = write_file_atomic(path, text, strlen(text), 0644, 0);
        if (r < 0)
                return log_error_errno(r, "cannot write %s: %s", path, strerror(-r)), EXIT_LAZARET;
        printf("added profile %s (preset %s) to %s%s\nnext: lazaret image build %s, then lazaret run%s%s\n", name,
               ps->name, path, has_default ? "" : " as the default profile", ps->image_flavour, has_default ? " " : "",
               has_default ? name : "");
        return 0;
}

int verb_init(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "force", no_argument, NULL, 'f' },
                { "name", required_argument, NULL, 'n' },
                {},
        };
        bool force = false;
        /* --agent is a global option (main.c takes it wherever it stands);
         * to init it names the preset. */
        const char *agent = g->agent, *name = NULL;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "hf", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret init [--force]\n"
                               "       lazaret init --agent PRESET [--name PROFILE]\n\n"
                               "Write a commented starter configuration to $XDG_CONFIG_HOME/lazaret/config.toml\n"
                               "(default ~/.config/lazaret/config.toml). An existing file is kept unless\n"
                               "--force is given.\n\n"
                               "--agent adds a profile (named PRESET, or PROFILE) that uses the built-in\n"
                               "preset PRESET (%s), with what the preset gives as\n"
                               "comments; the starter configuration is written first when there is none.\n",
                               preset_names);
                        return 0;
                case 'f':
                        force = true;
                        break;
                case 'n':
                        name = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                log_error("init takes no arguments (got '%s')", argv[optind]);
                return EXIT_USAGE;
        }
        const Preset *ps = NULL;
        if (name && !agent) {
                log_error("--name names the profile of --agent; give --agent PRESET");
                return EXIT_USAGE;
        }
        if (agent && !(ps = preset_find(agent))) {
                log_error("--agent %.64s: not a built-in preset; the presets are %s", agent, preset_names);
                return EXIT_USAGE;
        }
        if (agent && !name)
                name = ps->name;
        if (name && !config_profile_name_valid(name)) {
                log_error("--name %.64s: a profile's name is 2 to 32 of a-z, 0-9, '_' and '-'", name);
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
        if (ps)
                return add_agent(path, name, ps, &host);
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
