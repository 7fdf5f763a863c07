/* SPDX-License-Identifier: MIT */
/* lazaret trust [--yes] | --list | --revoke: which workspace lazaret.toml
 * files may widen the sandbox (architecture decision 15), and which
 * manifests lazaret up may run (--manifest FILE). */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fd-util.h"
#include "log.h"
#include "manifest.h"
#include "path-util.h"
#include "profile-pick.h"
#include "prompt-text.h"
#include "strbuf.h"
#include "string-util.h"
#include "toml-write.h"
#include "verbs.h"
#include "workspace-trust.h"

static void show_value(StrBuf *b, const TomlValue *v) {
        /* toml_write_value escapes control characters, C1 controls, bidi
         * marks and invisible characters: nothing the file holds can
         * repaint this screen. */
        toml_write_value(b, v);
}

/* Everything these screens show passes through prompt-text's inert
 * rendering (as lazaret diff's does) on its way out, TOML's own escapes
 * kept: a path, a key or a value that slipped past the TOML writer still
 * cannot move the cursor, erase a line above or reorder text. */
static void put_inert(FILE *f, const char *text) {
        _cleanup_free_ char *v = prompt_inert(text, strlen(text));
        fputs(v ?: "(out of memory)\n", f);
        fflush(f);
}

/* One name for a message, inert; caller frees (NULL only on OOM). */
static char *vis(const char *s) {
        return prompt_inert(s, strlen(s));
}

static void format_time(int64_t when, char *buf, size_t size) {
        time_t t = (time_t) when;
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
                snprintf(buf, size, "%lld", (long long) when);
}

/* What the workspace file adds over the person's own files. */
static int show_difference(const Config *cfg) {
        const ConfigWorkspaceFile *w = &cfg->wsfile;
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b, "Workspace file %s\n  sha256 %s\n\n", w->path, w->sha256);
        if (w->widenings.n == 0)
                strbuf_puts(&b, "It adds nothing over your own configuration: it only narrows the sandbox, which it "
                                "may do without trust.\n");
        else {
                strbuf_printf(&b, "Trusting it gives the sandbox %zu thing%s your own configuration does not:\n",
                              w->widenings.n, w->widenings.n == 1 ? "" : "s");
                for (size_t i = 0; i < w->widenings.n; i++) {
                        const ConfigWidening *x = &w->widenings.items[i];
                        strbuf_printf(&b, "\n  %s = ", x->key);
                        show_value(&b, x->value);
                        strbuf_printf(&b, "\n      line %u, column %u; ", x->pos.line, x->pos.col);
                        if (x->trusted) {
                                strbuf_puts(&b, "yours: ");
                                show_value(&b, x->trusted);
                        } else
                                strbuf_puts(&b, "yours: not set");
                        strbuf_printf(&b, "\n      (%s)\n", x->why);
                }
        }
        if (b.oom) {
                strbuf_done(&b);
                return -ENOMEM;
        }
        put_inert(stdout, strbuf_str(&b));
        strbuf_done(&b);
        return 0;
}

/* The manifests' records, after the workspace files'. */
static int trust_list_manifests(const char *home) {
        _cleanup_free_ char *store = NULL;
        if (wstrust_manifest_store_path(home, &store) < 0)
                return EXIT_LAZARET;
        _cleanup_(wstrust_records_done) WsTrustRecords recs = {};
        int r = trust_records_read(store, &recs);
        if (r != 0)
                return r;
        for (size_t i = 0; i < recs.n; i++) {
                const WsTrustRecord *rec = &recs.items[i];
                /* Its bytes and where its agents' directories resolve now,
                 * as up would check them. */
                _cleanup_(manifest_done) Manifest m = {};
                _cleanup_free_ char *err = NULL;
                char digest[WSTRUST_SHA256_HEX_LEN + 1] = "";
                r = manifest_load(rec->path, home, &m, &err);
                if (r >= 0 && manifest_trust_digest(&m, digest) < 0)
                        return EXIT_LAZARET;
                const char *state = r == -ENOENT                                                  ? "missing"
                                    : r < 0                                                       ? "refused"
                                    : streq(digest, rec->sha256) && streq(m.canonical, rec->path) ? "trusted"
                                                                                                  : "changed";
                char when[64];
                format_time(rec->when, when, sizeof(when));
                _cleanup_free_ char *vp = vis(rec->path);
                printf("%-8s %s  (a manifest, since %s)\n", state, vp ?: "?", when);
        }
        return 0;
}

static int trust_list(const char *home) {
        _cleanup_free_ char *store = NULL;
        if (wstrust_store_path(home, &store) < 0)
                return EXIT_LAZARET;
        _cleanup_(wstrust_records_done) WsTrustRecords recs = {};
        int r = trust_records_read(store, &recs);
        if (r != 0)
                return r;
        if (recs.n == 0)
                printf("no workspace file is trusted (%s)\n", store);
        for (size_t i = 0; i < recs.n; i++) {
                const WsTrustRecord *rec = &recs.items[i];
                _cleanup_free_ char *dir = strdup(rec->path), *data = NULL;
                if (!dir)
                        return EXIT_LAZARET;
                char *slash = strrchr(dir, '/');
                if (slash)
                        *slash = '\0';
                const char *why = NULL, *state;
                size_t size = 0;
                char sha[WSTRUST_SHA256_HEX_LEN + 1] = "";
                r = wstrust_read_workspace_file(*dir ? dir : "/", geteuid(), &data, &size, NULL, &why);
                if (r == -ENOENT)
                        state = "missing";
                else if (r < 0)
                        state = "refused";
                else if (wstrust_sha256_hex(data, size, sha) < 0)
                        return EXIT_LAZARET;
                else
                        state = streq(sha, rec->sha256) ? "trusted" : "changed";
                char when[64];
                format_time(rec->when, when, sizeof(when));
                _cleanup_free_ char *vp = vis(rec->path);
                printf("%-8s %s  (since %s)\n", state, vp ?: "?", when);
        }
        return 0;
}

static int trust_revoke(const Globals *g, const char *home) {
        _cleanup_free_ char *ws = NULL, *store = NULL;
        int r = config_workspace(g->workspace, &ws);
        if (r < 0) {
                _cleanup_free_ char *vw = vis(g->workspace ?: "(current directory)");
                log_error("workspace %s: %s", vw ?: "?", strerror(-r));
                return EXIT_USAGE;
        }
        _cleanup_free_ char *path = path_join(ws, "lazaret.toml");
        if (!path || wstrust_store_path(home, &store) < 0)
                return EXIT_LAZARET;
        r = wstrust_set(store, path, NULL, 0);
        _cleanup_free_ char *vp = vis(path);
        if (r == -ENOENT) {
                log_error("%s is not trusted: nothing to revoke", vp ?: "?");
                return EXIT_PROBLEMS;
        }
        if (r < 0) {
                log_error("cannot update %s: %s", store, strerror(-r));
                return EXIT_LAZARET;
        }
        printf("%s is no longer trusted: it may only narrow the sandbox\n", vp ?: "?");
        return 0;
}

static void show_string(StrBuf *b, const char *s) {
        TomlValue v = { .type = TOML_STRING, .str = { .s = (char *) s, .len = strlen(s) } };
        toml_write_value(b, &v);
}

/* Ask on the terminal unless --yes. Returns 0 to go on, or an exit status. */
static int confirm(bool yes, const char *path) {
        if (yes)
                return 0;
        if (!isatty(STDIN_FILENO)) {
                log_error("trust needs confirmation: run it on a terminal, or pass --yes after reading the above");
                return EXIT_USAGE;
        }
        _cleanup_free_ char *vp = vis(path);
        fprintf(stderr, "\nTrust these exact bytes of %s? [y/N] ", vp ?: "?");
        char answer[16] = "";
        if (!fgets(answer, sizeof(answer), stdin) || (answer[0] != 'y' && answer[0] != 'Y')) {
                fprintf(stderr, "nothing was trusted\n");
                return EXIT_PROBLEMS;
        }
        return 0;
}

/* lazaret trust --manifest FILE: what each agent would get, then its
 * bytes recorded. */
static int trust_manifest(const char *file, bool yes, const char *home) {
        Manifest m = {};
        _cleanup_free_ char *err = NULL, *store = NULL;
        int r = manifest_load(file, home, &m, &err);
        if (r < 0) {
                _cleanup_free_ char *ve = vis(err ? err : strerror(-r));
                log_error("%s", ve ?: "?");
                log_error("nothing was trusted: the manifest is not valid");
                return r == -EINVAL ? EXIT_CONFIG : EXIT_LAZARET;
        }
        StrBuf b = STRBUF_INIT;
        /* Paths as TOML strings, every control character escaped: a
         * directory the manifest names may be named to repaint this screen. */
        strbuf_puts(&b, "Manifest ");
        show_string(&b, m.canonical);
        strbuf_printf(&b, "\n  sha256 %s\n\nTrusting it lets 'lazaret up' start %zu agent%s:\n", m.sha256, m.n_agents,
                      m.n_agents == 1 ? "" : "s");
        for (size_t i = 0; i < m.n_agents; i++) {
                const ManifestAgent *a = &m.agents[i];
                strbuf_printf(&b, "\n  %s (line %u): your profile %s, with the directory ", a->name, a->pos.line,
                              a->profile);
                show_string(&b, a->workspace);
                strbuf_puts(&b, "\n      command [");
                for (size_t k = 0; k < a->argc; k++) {
                        if (k)
                                strbuf_puts(&b, ", ");
                        show_string(&b, a->argv[k]);
                }
                strbuf_puts(&b, "]\n");
        }
        strbuf_puts(&b, "\nTrust covers these bytes and these directories as they resolve now: a workspace that "
                        "later resolves elsewhere (a symbolic link put in its place) voids it.\n");
        char digest[WSTRUST_SHA256_HEX_LEN + 1];
        if (manifest_trust_digest(&m, digest) < 0)
                b.oom = true;
        if (!b.oom)
                put_inert(stdout, strbuf_str(&b));
        bool oom = b.oom;
        strbuf_done(&b);
        r = oom ? EXIT_LAZARET : confirm(yes, m.canonical);
        if (r == 0 && wstrust_manifest_store_path(home, &store) < 0)
                r = EXIT_LAZARET;
        if (r == 0) {
                int k = wstrust_set(store, m.canonical, digest, (int64_t) time(NULL));
                if (k < 0) {
                        log_error("cannot record the trust in %s: %s", store,
                                  k == -EINVAL ? "its path has control characters" : strerror(-k));
                        r = EXIT_LAZARET;
                } else {
                        _cleanup_free_ char *vp = vis(m.canonical);
                        printf("trusted %s (sha256 %s) with its agents' directories; any change to it, or to "
                               "where they resolve, voids this\n",
                               vp ?: "?", m.sha256);
                }
        }
        manifest_done(&m);
        return r;
}

static int revoke_manifest(const char *file, const char *home) {
        _cleanup_free_ char *canonical = NULL, *store = NULL;
        if (manifest_canonical(file, &canonical) < 0) {
                _cleanup_free_ char *vf = vis(file);
                log_error("%s: cannot resolve its directory: %s", vf ?: "?", strerror(errno));
                return EXIT_USAGE;
        }
        if (wstrust_manifest_store_path(home, &store) < 0)
                return EXIT_LAZARET;
        int r = wstrust_set(store, canonical, NULL, 0);
        _cleanup_free_ char *vp = vis(canonical);
        if (r == -ENOENT) {
                log_error("%s is not trusted: nothing to revoke", vp ?: "?");
                return EXIT_PROBLEMS;
        }
        if (r < 0) {
                log_error("cannot update %s: %s", store, strerror(-r));
                return EXIT_LAZARET;
        }
        printf("%s is no longer trusted: lazaret up refuses it\n", vp ?: "?");
        return 0;
}

int verb_trust(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },           { "yes", no_argument, NULL, 'y' },
                { "list", no_argument, NULL, 'l' },           { "revoke", no_argument, NULL, 'r' },
                { "manifest", required_argument, NULL, 'm' }, {},
        };
        bool yes = false, list = false, revoke = false;
        const char *manifest = NULL;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "hy", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret trust [--workspace DIR] [--yes]\n"
                               "       lazaret trust --manifest FILE [--yes]\n"
                               "       lazaret trust --list\n"
                               "       lazaret trust --revoke [--workspace DIR | --manifest FILE]\n\n"
                               "A workspace's lazaret.toml may only narrow the sandbox until you trust it.\n"
                               "trust shows what the file would add over your own configuration, asks, and\n"
                               "records its path and the SHA-256 of its exact bytes in your data directory\n"
                               "($XDG_DATA_HOME/lazaret/trusted-workspaces). Any change to the file voids\n"
                               "the trust. --list shows every record and whether its file still matches;\n"
                               "--revoke removes this workspace's record.\n\n"
                               "A manifest (lazaret up) chooses its agents' directories and profiles: up\n"
                               "refuses it until --manifest FILE shows what each agent gets and records its\n"
                               "bytes and the directories its agents resolve to\n"
                               "($XDG_DATA_HOME/lazaret/trusted-manifests); a directory that resolves\n"
                               "elsewhere later (a symbolic link in its place) voids the trust too.\n");
                        return 0;
                case 'y':
                        yes = true;
                        break;
                case 'l':
                        list = true;
                        break;
                case 'r':
                        revoke = true;
                        break;
                case 'm':
                        manifest = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                log_error("trust takes no arguments (got '%s'); name the workspace with --workspace DIR", argv[optind]);
                return EXIT_USAGE;
        }
        if (list + revoke > 1 || ((list || revoke) && yes)) {
                log_error("trust: --list, --revoke and --yes go one at a time");
                return EXIT_USAGE;
        }
        if (manifest && (list || g->workspace || g->config_path)) {
                log_error("trust --manifest takes no %s: it trusts that file alone", list           ? "--list"
                                                                                     : g->workspace ? "--workspace"
                                                                                                    : "--config");
                return EXIT_USAGE;
        }
        _cleanup_free_ char *home = NULL;
        if (config_home(&home) < 0) {
                log_error("cannot find the home directory: set $HOME");
                return EXIT_LAZARET;
        }
        if (list) {
                int r = trust_list(home);
                return r != 0 ? r : trust_list_manifests(home);
        }
        if (manifest)
                return revoke ? revoke_manifest(manifest, home) : trust_manifest(manifest, yes, home);
        if (revoke)
                return trust_revoke(g, home);

        _cleanup_(config_freep) Config *cfg = NULL;
        ConfigLoadOptions o = {
                .explicit_path = g->config_path, .agent = g->agent, .workspace = g->workspace, .trust_workspace = true
        };
        int r = config_load_exit(&o, &cfg);
        if (r == EXIT_CONFIG)
                log_error("nothing was trusted: the configuration it would make is not valid (above)");
        if (r != 0)
                return r;
        _cleanup_free_ char *vp = vis(cfg->wsfile.path);
        if (cfg->wsfile.trust == CONFIG_TRUST_EXPLICIT) {
                log_error("%s is named with --config, which already trusts it; leave --config out to trust it as "
                          "the workspace's file",
                          vp ?: "?");
                return EXIT_USAGE;
        }
        if (!cfg->wsfile.exists) {
                log_error("%s does not exist: there is nothing to trust", vp ?: "?");
                return EXIT_USAGE;
        }
        if (show_difference(cfg) < 0)
                return EXIT_LAZARET;

        r = confirm(yes, cfg->wsfile.path);
        if (r != 0)
                return r;
        _cleanup_free_ char *store = NULL;
        if (wstrust_store_path(home, &store) < 0)
                return EXIT_LAZARET;
        r = wstrust_set(store, cfg->wsfile.path, cfg->wsfile.sha256, (int64_t) time(NULL));
        if (r == -EINVAL) {
                log_error("%s cannot be recorded: its path has control characters", vp ?: "?");
                return EXIT_LAZARET;
        }
        if (r < 0) {
                log_error("cannot record the trust in %s: %s", store, strerror(-r));
                return EXIT_LAZARET;
        }
        printf("trusted %s (sha256 %s); any change to it voids this\n", vp ?: "?", cfg->wsfile.sha256);
        return 0;
}
