/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "profile-pick.h"
#include "fd-util.h"
#include "strbuf.h"

static char *profile_names(const Config *cfg) {
        StrBuf b = STRBUF_INIT;
        for (size_t i = 0; i < cfg->n_profiles; i++)
                strbuf_printf(&b, "%s%s", i ? ", " : "", cfg->profiles[i].name);
        return strbuf_steal(&b);
}

static int load(const Globals *g, const char *name, bool launch, Backend backend, Config **ret_cfg,
                const ConfigProfile **ret_profile) {
        ConfigDiags d = {};
        Config *cfg = NULL;
        ConfigLoadOptions o = { .explicit_path = g->config_path,
                                .agent = g->agent,
                                .workspace = g->workspace,
                                .ignore_widening_workspace = !launch,
                                .image_optional = !launch || backend == BACKEND_NATIVE };
        int r = config_load(&o, &cfg, &d);
        config_diags_print(&d, stderr);
        config_diags_done(&d);
        if (r == -EPERM)
                return r;
        if (r < 0)
                return -EINVAL;

        const ConfigProfile *p = NULL;
        if (name) {
                p = config_find_profile(cfg, name);
                if (!p) {
                        _cleanup_free_ char *names = profile_names(cfg);
                        log_error("no profile '%s' in the configuration (configured: %s)", name, names ?: "?");
                }
        } else if (cfg->n_profiles == 1)
                p = &cfg->profiles[0];
        else if (cfg->default_profile)
                p = config_find_profile(cfg, cfg->default_profile); /* validated: it names one */
        else {
                _cleanup_free_ char *names = profile_names(cfg);
                log_error("several profiles are configured (%s): name one, e.g. 'lazaret %s %s', or set "
                          "default_profile = \"%s\" at the top of your configuration",
                          names ?: "?", g->verb ?: "run", cfg->profiles[0].name, cfg->profiles[0].name);
        }
        if (!p) {
                config_free(cfg);
                return -EINVAL;
        }
        *ret_cfg = cfg;
        *ret_profile = p;
        return 0;
}

int profile_load(const Globals *g, const char *name, Config **ret_cfg, const ConfigProfile **ret_profile) {
        return load(g, name, false, _BACKEND_INVALID, ret_cfg, ret_profile);
}

int profile_load_for_launch(const Globals *g, const char *name, Backend backend, Config **ret_cfg,
                            const ConfigProfile **ret_profile) {
        return load(g, name, true, backend, ret_cfg, ret_profile);
}

int config_load_exit(const ConfigLoadOptions *o, Config **ret) {
        ConfigDiags d = {};
        int r = config_load(o, ret, &d);
        config_diags_print(&d, stderr);
        config_diags_done(&d);
        if (r == -ENOMEM) {
                log_error("out of memory");
                return EXIT_LAZARET;
        }
        if (r == -ENOTDIR)
                return EXIT_USAGE; /* the workspace could not be resolved */
        if (r < 0)
                return EXIT_CONFIG;
        return 0;
}

int profile_load_exit(int r) {
        return r == -EPERM ? EXIT_CONFIG : EXIT_LAZARET;
}

int profile_operand(int argc, char **argv, int first, const char *verb, const char **ret_name) {
        if (argc - first > 1) {
                log_error("%s takes at most one profile name", verb);
                return -EINVAL;
        }
        *ret_name = first < argc ? argv[first] : NULL;
        return 0;
}

int trust_records_read(const char *store, WsTrustRecords *ret) {
        unsigned line = 0;
        int r = wstrust_load(store, ret, &line);
        if (r == -EBADMSG) {
                log_error("%s:%u: not a trust record; remove the line, or the file to trust nothing", store, line);
                return EXIT_LAZARET;
        }
        if (r < 0) {
                log_error("cannot read %s: %s", store, strerror(-r));
                return EXIT_LAZARET;
        }
        return 0;
}
